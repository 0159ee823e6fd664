"""Probe 63a's differential fuzzer of data-dependent and ragged kernels: windows, masks and trip counts that come from
values the kernel reads (offsets, lengths, page tables, index vectors), as grouped GEMMs, varlen and paged attention,
MoE dispatch, segment sums, CSR SpMV, histograms and early exits are written.

`Gen(seed)` draws a plan and its data, and writes the kernel and a NumPy reference of the same program (computed from
the plan and the data, never from interpret mode). The data is drawn for the edges: empty groups, groups of one row,
groups crossing tile edges, lengths 0 and exactly a tile, trip counts of 0. Families:

- `segsum`: segment g of x is off[g]:off[g+1] (CSR offsets read as scalars): a run-time loop (`range`, `ml.range`)
  over its tiles, aligned (`start // B .. cdiv(end, B)`) or from its start (`cdiv(end - start, B)` trips at
  `start + t * B`), masked loads at both ends (1-D vectors or rows of a 2-D array), a sum or a max, stored as a scalar,
  a row, or added atomically into a row the data chooses; sometimes under `if end > start` with an else branch;
- `varlen`: packed sequences (cu_seqlens): a (sequence, row tile) grid, an early exit by the length read from memory,
  a tile loaded at a run-time row (TMA window or masked load), row statistics, a partial tile stored at a run-time
  offset under a row mask (masked register store, or atomically);
- `grouped`: a grouped GEMM over group offsets: rows of group g times rhs[g] (ragged M: run-time TMA windows, an
  `ml.range(K // bk, stages=s)` loop, warp-specialised at block 256), the tile stored masked at a run-time row;
- `ragk`: a grouped weight gradient, out[g] = xt[:, s:e] @ dy[s:e] (ragged K: a run-time trip count, the A tile
  masked in registers, the B tile a TMA window at a run-time row, pipelined by stages 1-4);
- `paged`: a page table and lengths: an `ml.range` over a sequence's pages (run-time trip count, stages 1-4,
  warp-specialised where it is a dot loop), each trip's TMA window chosen by the table entry it reads, the last page
  masked by the length; a masked column sum of the pages, or the row maximum and sum of q @ k.T;
- `gather`: index vectors read from inputs: rows gathered by id, `ml.where` by data, scattered to a permutation,
  atomically added into data-chosen rows (repeated ids), or counted into a histogram;
- `cond`: `if`/`while` on loaded scalars inside run-time loops, accumulating rows chosen by them.

Inputs are small whole numbers or halves, so every sum is exact and the comparison is diff_fuzz's tight one.
`run(gen)` classifies as tests/diff_fuzz.py does ("ok", "wrong", "crash", "refused", "build"). Deterministic.
"""
from __future__ import annotations

import re
import sys

import numpy as np

import diff_fuzz
import dot_fuzz

F32, F16, BF16, I32 = "float32", "float16", "bfloat16", "int32"
IDX = ["uint32", "int16", "uint16", "int8", "uint8"]
FAMILIES = (["segsum"] * 3 + ["varlen"] * 2 + ["seqloop"] * 2 + ["grouped"] * 2 + ["ragk"] * 2 + ["paged"] * 2
            + ["gather"] * 2 + ["moe"] * 2 + ["spmv"] + ["cond"] * 2 + ["persist"] * 2 + ["compact"])


def _np(dt):
  return dot_fuzz._np(dt)


class Gen(dot_fuzz.Gen):
  """One random data-dependent kernel (`source`, `args`, `refs`, `tags`) from the plan of `seed`."""

  def __init__(self, seed, family=None):
    self._start(seed)
    self.tags, self.widen = set(), set()
    self.family = family or self.r.choice(FAMILIES)
    self.tags.add("fam:" + self.family)
    getattr(self, "f_" + self.family)()
    if self.block:
      self.tags.add(f"block:{self.block}")

  # ------------------------------------------------------------------ data
  def data(self, arr, dt):
    """An input holding `arr` exactly."""
    name = f"x{len(self.ins)}"
    self.ins.append((name, np.asarray(arr).astype(_np(dt))))
    return name

  def index(self, arr):
    """An input of offsets, ids or lengths: int32, or (one in four) another integer type that holds them; its scalar
    reads then widened to int32 as the hints of MG104 and MG003 say (`x[g].astype(jnp.int32)`), or (one in three)
    left narrow, where those refusals are the right answer."""
    arr = np.asarray(arr)
    dt = I32
    if self.r.random() < 0.25:
      fits = [t for t in IDX if np.iinfo(t).min <= arr.min(initial=0) and arr.max(initial=0) <= np.iinfo(t).max]
      dt = self.r.choice(fits)
      self.tags.add("idx:" + dt)
    name = self.data(arr, dt)
    if dt != I32 and self.r.random() < 0.67:
      self.widen.add(name)
      self.tags.add("widened")
    return name

  @property
  def source(self):
    src = super().source
    for name in self.widen:      # scalar reads `x3[...]` (not windows `x3.at[...]`) widened to int32
      src = re.sub(rf"\b({name})\[([^\[\]]*)\]", r"\1[\2].astype(jnp.int32)", src)
    return src

  def lengths(self, n, tile, hi_tiles=3):
    """`n` segment lengths drawn for the edges: 0, 1, a tile, a tile +- 1, crossing tile edges, random."""
    r = self.r
    out = []
    for _ in range(n):
      out.append(r.choice([0, 1, tile, tile - 1, tile + 1, r.randint(0, hi_tiles * tile), r.randint(1, 2 * tile)]))
    if r.random() < 0.3:
      out[r.randrange(n)] = 0
    return out

  def offsets(self, lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)

  def loop_head(self, n, pipe=False, ws=False):
    """A run-time loop's header over `n` trips (a kernel expression)."""
    r = self.r
    if pipe:
      st = r.choice([2, 3, 4] if ws else [1, 2, 3, 4])     # (a producer warpgroup needs 2 stages: MG003)
      self.tags.add(f"stages:{st}" + (":ws" if ws else ""))
      return f"ml.range({n}, stages={st}" + (", warp_specialize=True)" if ws else ")")
    form = r.choice(["range", "ml.range"])
    self.tags.add("loop:" + form)
    return f"{form}({n})"

  def vals(self, shape, dt, lo=-4, hi=4):
    v = self.rng.integers(lo, hi + 1, shape).astype(np.float64)
    return v / 2 if dt != I32 else v

  # ------------------------------------------------------------------ families
  def f_segsum(self):
    r = self.r
    B = r.choice([64, 128, 128, 256])
    self.block = r.choice([None, 256]) if B >= 128 else None
    G = r.randint(1, 5)
    lens = self.lengths(G, B)
    off = self.offsets(lens)
    N = int(off[-1]) + r.choice([0, 0, 3, B])
    two_d = r.random() < 0.5
    D = r.choice([16, 32, 64]) if two_d else None
    dt = r.choice([F32, F32, F16, BF16]) if two_d else F32
    red = r.choice(["sum", "sum", "max"])
    xv = self.vals((max(N, 1), D) if two_d else (max(N, 1),), dt)
    on = self.index(off)
    xn = self.data(xv, dt)
    self.grid = (G,)
    aligned = r.random() < 0.5
    guard = r.random() < 0.4
    store = r.choice(["scalar", "row", "atomic"]) if two_d else r.choice(["scalar", "atomic"])
    self.tags |= {f"red:{red}", f"store:{store}", "aligned" if aligned else "from_start", "2d" if two_d else "1d"}
    ind = "  "
    self.emit("g = ml.program_id(0)")
    self.emit(f"start = {on}[g]")
    self.emit(f"end = {on}[g + 1]")
    fill = "-jnp.inf" if red == "max" else "0.0"
    shape = f"({B}, {D})" if two_d else f"({B},)"
    if guard:
      self.tags.add("guard")
      self.emit("if end > start:")
    else:
      ind = ""
    self.emit(f"{ind}acc = ml.full({shape}, {fill}, jnp.float32)")
    tma = two_d and r.random() < 0.5
    self.tags |= {"tma"} if tma else set()
    self._loop_at = len(self.lines)
    if r.random() < 0.25:        # Triton's `for r0 in range(start, end, BLOCK)`: run-time bounds, a static step
      form = "ml.range" if tma else r.choice(["range", "ml.range"])
      st = f", stages={r.choice([1, 2, 3])}" if tma else ""
      self.tags.add("loop:step")
      self.emit(f"{ind}for r0 in {form}(start, end, {B}{st}):")
    elif aligned:
      self.emit(f"{ind}for c in {self.loop_head('ml.cdiv(end, %d) - start // %d' % (B, B), pipe=tma)}:")
      self.emit(f"{ind}  r0 = (start // {B} + c) * {B}")
    else:
      self.emit(f"{ind}for c in {self.loop_head('ml.cdiv(end - start, %d)' % B, pipe=tma)}:")
      self.emit(f"{ind}  r0 = start + c * {B}")
    self.emit(f"{ind}  idx = r0 + ml.arange({B})")
    m = "((idx >= start) & (idx < end))" + ("[:, None]" if two_d else "")
    win = f"{xn}.at[ml.ds(r0, {B}), :]" if two_d else f"{xn}.at[ml.ds(r0, {B})]"
    if tma:                      # a TMA window at the loaded start (pipelined), the segment's rows selected
      self.lines.insert(self._loop_at, f"  {ind}x_s = ml.smem(({B}, {D}), jnp.{dt})")
      self.emit(f"{ind}  ml.copy({win}, x_s)")
      self.emit(f"{ind}  v = ml.where({m}, x_s[...].astype(jnp.float32), 0.0)")
    else:
      self.emit(f"{ind}  v = {win}.load(mask={m}, other=0).astype(jnp.float32)")
    if red == "max":
      self.emit(f"{ind}  acc = ml.maximum(acc, ml.where({m}, v, -jnp.inf))")
    else:
      self.emit(f"{ind}  acc = acc + v")
    segs = [xv[off[g]:off[g + 1]] for g in range(G)]
    if two_d:
      self.emit(f"{ind}res = ml.{red}(acc, axis=0)")
      ref = np.stack([(s.sum(0) if red == "sum" else (s.max(0) if len(s) else np.full(D, -np.inf))) for s in segs])
    else:
      self.emit(f"{ind}res = ml.{red}(acc)")
      ref = np.array([(s.sum() if red == "sum" else (s.max() if len(s) else -np.inf)) for s in segs])
    if store == "atomic":        # into a row the data chooses (a permutation read from memory)
      perm = np.array(self.rng.permutation(G))
      pn = self.index(perm)
      if red == "max":
        self.emit(f"{ind}res = ml.maximum(res, -1000.0)")
        ref = np.maximum(ref, -1000.0)
      if guard:                  # an empty segment skips its add
        ref = np.where((np.array(lens) > 0)[:, None] if two_d else np.array(lens) > 0, ref, 0.0)
      out = np.zeros_like(ref)
      out[perm] = ref
      o = self.output(out, F32)
      tgt = f"{o}.at[{pn}[g]]" if two_d else f"{o}.at[{pn}[g]]"
      self.emit(f"{ind}ml.atomic_add({tgt}, res)")
      return
    if guard:                    # an empty segment takes the else branch's 7
      nonempty = np.array(lens) > 0
      ref = np.where(nonempty[:, None] if two_d else nonempty, ref, 7.0)
    o = self.output(ref, F32)
    tgt = f"{o}.at[g][...]" if two_d else f"{o}[g]"
    self.emit(f"{ind}{tgt} = res")
    if guard:
      self.emit("else:")
      self.emit(f"  {tgt} = " + (f"ml.full(({D},), 7.0, jnp.float32)" if two_d else "7.0"))

  def f_varlen(self):
    r = self.r
    self.block = r.choice([None, 256])
    bm = r.choice([64, 128]) if self.block is None else r.choice([128, 256])
    D = r.choice([16, 32, 64, 128])
    dt = r.choice([F32, F16, BF16])
    Bn = r.randint(1, 4)
    lens = self.lengths(Bn, bm)
    off = self.offsets(lens)
    T = int(off[-1]) + r.choice([0, 5])
    tiles = max(1, max(-(-l // bm) for l in lens))
    xv = self.vals((max(T, 1), D), dt)
    on = self.index(off)
    xn = self.data(xv, dt)
    self.grid = (Bn, tiles)
    mode = r.choice(["tma", "load"])
    op = r.choice(["rowsum", "rowmax", "scale"])
    st = r.choice(["masked", "atomic"])
    self.tags |= {f"load:{mode}", f"op:{op}", f"store:{st}"}
    self.emit("b = ml.program_id(0)")
    self.emit("j = ml.program_id(1)")
    self.emit(f"r0 = {on}[b] + j * {bm}")
    self.emit(f"n = {on}[b + 1] - r0")
    early = r.choice([None, "if", "return"])
    if early == "if":
      self.tags.add("early_exit")
      self.emit("if n > 0:")
    elif early == "return":      # (the tail's zeros, below, are written before it)
      self.tags.add("early_return")
      self._ret_at = len(self.lines)
      self.emit("if n <= 0:")
      self.emit("  return")
    ind = "  " if early == "if" else ""
    if mode == "tma":
      self.emit(f"{ind}x_s = ml.smem(({bm}, {D}), jnp.{dt})")
      self.emit(f"{ind}ml.copy({xn}.at[ml.ds(r0, {bm}), :], x_s)")
      self.emit(f"{ind}v = x_s[...].astype(jnp.float32)")
    else:
      self.emit(f"{ind}v = {xn}.at[ml.ds(r0, {bm}), :].load(mask=(ml.arange({bm}) < n)[:, None], other=0).astype(jnp.float32)")
    rows = f"(ml.arange({bm}) < n)[:, None]"
    if op == "rowsum":
      self.emit(f"{ind}y = v + ml.sum(ml.where({rows}, v, 0.0), axis=1, keepdims=True)")
    elif op == "rowmax":
      self.emit(f"{ind}y = v - ml.max(v, axis=1)[:, None]")
    else:
      self.emit(f"{ind}y = v * 2.0 + 1.0")
    ref = np.zeros((max(T, 1), D))
    for b in range(Bn):
      s = xv[off[b]:off[b + 1]]
      if op == "rowsum":
        y = s + s.sum(1, keepdims=True)
      elif op == "rowmax":
        y = s - s.max(1, keepdims=True) if len(s) else s
      else:
        y = s * 2 + 1
      ref[off[b]:off[b + 1]] = y
    o = self.output(ref, F32)
    if st == "masked":
      self.emit(f"{ind}{o}.at[ml.ds(r0, {bm}), :].store(y, mask={rows})")
    else:
      self.emit(f"{ind}ml.atomic_add({o}.at[r0 + ml.arange({bm}), :], ml.where({rows}, y, 0.0), mask={rows})")
    if T > off[-1] or 1 > T:
      # rows past the sequences: zeros, written by the first program
      # rows past the sequences: zeros, written by the first program (added, beside the other programs' atomics)
      t0, nt = int(off[-1]), max(T, 1) - int(off[-1])
      at = self._ret_at if early == "return" else len(self.lines)
      self.lines[at:at] = ["  if (b == 0) & (j == 0):",
                           f"    {o}.at[ml.ds({t0}, {nt}), :][...] = ml.zeros(({nt}, {D}), jnp.float32)" if st == "masked"
                           else f"    ml.atomic_add({o}.at[ml.ds({t0}, {nt}), :], ml.zeros(({nt}, {D}), jnp.float32))"]

  def f_grouped(self):
    r = self.r
    self.block = r.choice([None, 256])
    bm = r.choice([64, 128]) if self.block is None else r.choice([128, 256])
    bn = r.choice([64, 128])
    bk = r.choice([32, 64])
    nk = r.randint(1, 4)
    K, N = nk * bk, bn * r.randint(1, 2)
    G = r.randint(1, 4)
    lens = self.lengths(G, bm, 2)
    off = self.offsets(lens)
    M = max(int(off[-1]), 1)
    tiles = max(1, max(-(-l // bm) for l in lens))
    op = r.choice([F16, BF16])
    av = self.vals((M, K), op)
    bv = self.vals((G, K, N), op, -2, 2)
    on = self.index(off)
    an = self.data(av, op)
    bnm = self.data(bv, op)
    self.grid = (G, tiles, N // bn)
    ws = self.block == 256 and r.random() < 0.5
    head = self.loop_head(f"{K} // {bk}", pipe=True, ws=ws)
    self.emit("g = ml.program_id(0)")
    self.emit("t = ml.program_id(1)")
    self.emit("j = ml.program_id(2)")
    self.emit(f"r0 = {on}[g] + t * {bm}")
    self.emit(f"n = {on}[g + 1] - r0")
    self.emit("if n > 0:")
    self.emit(f"  a_s = ml.smem(({bm}, {bk}), jnp.{op})")
    self.emit(f"  b_s = ml.smem(({bk}, {bn}), jnp.{op})")
    self.emit(f"  acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    self.emit(f"  for k in {head}:")
    self.emit(f"    ml.copy({an}.at[ml.ds(r0, {bm}), ml.ds(k * {bk}, {bk})], a_s)")
    self.emit(f"    ml.copy({bnm}.at[g, ml.ds(k * {bk}, {bk}), ml.ds(j * {bn}, {bn})], b_s)")
    self.emit("    acc = ml.dot(a_s, b_s, acc)")
    ref = np.zeros((M, N))
    for g in range(G):
      ref[off[g]:off[g + 1]] = av[off[g]:off[g + 1]] @ bv[g]
    odt = r.choice([F32, op])
    o = self.output(ref, odt)
    cast = "" if odt == F32 else f".astype(jnp.{odt})"
    self.emit(f"  {o}.at[ml.ds(r0, {bm}), ml.ds(j * {bn}, {bn})].store(acc{cast}, mask=(ml.arange({bm}) < n)[:, None])")
    self.tags |= {"dot", f"dt:{op}"}
    if int(off[-1]) == 0:       # (no rows: the output's one row of zeros, by one program)
      self.emit("if (g == 0) & (t == 0) & (j == 0):")
      self.emit(f"  {o}.at[0:1, :][...] = ml.zeros((1, {N}), jnp.{odt})")

  def f_ragk(self):
    r = self.r
    self.block = None
    bm = r.choice([64, 128])
    bn = r.choice([32, 64, 128])
    bk = r.choice([16, 32, 64])
    G = r.randint(1, 4)
    lens = self.lengths(G, bk, 4)
    off = self.offsets(lens)
    Kt = int(off[-1]) + r.choice([0, 0, 8])
    op = r.choice([F16, BF16])
    xv = self.vals((bm, max(Kt, 8)), op)
    dv = self.vals((max(Kt, 8), bn), op, -2, 2)
    on = self.index(off)
    xn = self.data(xv, op)
    dn = self.data(dv, op)
    self.grid = (G,)
    aligned = r.random() < 0.5
    pipe = r.random() < 0.7
    self.emit("g = ml.program_id(0)")
    self.emit(f"s = {on}[g]")
    self.emit(f"e = {on}[g + 1]")
    self.emit(f"b_s = ml.smem(({bk}, {bn}), jnp.{op})")
    self.emit(f"acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    if aligned:
      self.emit(f"for c in {self.loop_head(f'ml.cdiv(e, {bk}) - s // {bk}', pipe=pipe)}:")
      self.emit(f"  k0 = (s // {bk} + c) * {bk}")
    else:
      self.emit(f"for c in {self.loop_head(f'ml.cdiv(e - s, {bk})', pipe=pipe)}:")
      self.emit(f"  k0 = s + c * {bk}")
    self.emit(f"  kk = k0 + ml.arange({bk})")
    self.emit(f"  a = {xn}.at[:, ml.ds(k0, {bk})].load(mask=((kk >= s) & (kk < e))[None, :], other=0)")
    self.emit(f"  ml.copy({dn}.at[ml.ds(k0, {bk}), :], b_s)")
    self.emit("  acc = ml.dot(a, b_s, acc)")
    ref = np.stack([xv[:, off[g]:off[g + 1]] @ dv[off[g]:off[g + 1]] for g in range(G)])
    o = self.output(ref, F32)
    self.emit(f"{o}.at[g][...] = acc")
    self.tags |= {"dot", "aligned" if aligned else "from_start"}

  def f_paged(self):
    r = self.r
    page = r.choice([16, 32, 64, 128])
    D = r.choice([32, 64, 128])
    Bq = r.randint(1, 3)
    maxp = r.randint(1, 4)
    P = Bq * maxp + r.randint(0, 3)
    kind = r.choice(["colsum", "colsum", "scores"])
    dt = F16 if kind == "scores" else r.choice([F32, F16, BF16])
    lens = [min(l, maxp * page) for l in self.lengths(Bq, page, maxp)]
    table = np.array(self.rng.permutation(P)[:Bq * maxp]).reshape(Bq, maxp)
    kv = self.vals((P, page, D), dt)
    padded = kind == "colsum" and r.random() < 0.5    # a table padded with -1 past the pages in use, all walked
    if padded:
      for b in range(Bq):
        table[b, -(-lens[b] // page):] = -1
      self.tags.add("padded_table")
    ln = self.index(lens)
    tn = self.index(table)
    kn = self.data(kv, dt)
    self.grid = (Bq,)
    ws = kind == "scores" and r.random() < 0.5
    if ws:
      self.block = 256
    self.emit("b = ml.program_id(0)")
    self.emit(f"n = {ln}[b]")
    self.emit(f"k_s = ml.smem(({page}, {D}), jnp.{dt})")
    brk = not padded and r.random() < 0.3      # every table column walked, the loop left by a break on its index
    head = self.loop_head(str(maxp) if padded or brk else f"ml.cdiv(n, {page})", pipe=r.random() < 0.7 or ws, ws=ws)
    if brk:
      cut = r.choice([f"p >= ml.cdiv(n, {page})", f"p * {page} >= n", f"ml.cdiv(n, {page}) <= p", f"p > (n - 1) // {page}"])
      self.tags.add("break")
    if kind == "colsum":
      self.emit(f"acc = ml.zeros(({D},), jnp.float32)")
      self.emit(f"for p in {head}:")
      if brk:
        self.emit(f"  if {cut}:")
        self.emit("    break")
      if padded:
        self.emit(f"  pg = {tn}[b, p]")
        self.emit("  if pg >= 0:")
        self.emit(f"    ml.copy({kn}.at[pg], k_s)")
        self.emit(f"    pos = p * {page} + ml.arange({page})")
        self.emit(f"    acc = acc + ml.sum(ml.where((pos < n)[:, None], k_s[...].astype(jnp.float32), 0.0), axis=0)")
      else:
        self.emit(f"  ml.copy({kn}.at[{tn}[b, p]], k_s)")
        self.emit(f"  pos = p * {page} + ml.arange({page})")
        self.emit(f"  acc = acc + ml.sum(ml.where((pos < n)[:, None], k_s[...].astype(jnp.float32), 0.0), axis=0)")
      ref = np.stack([np.concatenate([kv[table[b, p]] for p in range(maxp)])[:lens[b]].sum(0) for b in range(Bq)])
      # (padded: the -1 pages lie past the length, so the concatenation's cut drops them)
      o = self.output(ref, F32)
      self.emit(f"{o}.at[b][...] = acc")
    else:
      qv = self.vals((64, D), dt, -2, 2)
      qn = self.data(qv, dt)
      self.emit(f"q_s = ml.smem((64, {D}), jnp.{dt})")
      self.emit(f"ml.copy({qn}, q_s)")
      self.emit("m = ml.full((64,), -jnp.inf, jnp.float32)")
      self.emit("sm = ml.zeros((64,), jnp.float32)")
      self.emit(f"for p in {head}:")
      if brk:
        self.emit(f"  if {cut}:")
        self.emit("    break")
      self.emit(f"  ml.copy({kn}.at[{tn}[b, p]], k_s)")
      self.emit("  sc = ml.dot(q_s, k_s.T)")
      self.emit(f"  pos = p * {page} + ml.arange({page})")
      self.emit("  sc = ml.where((pos < n)[None, :], sc, -jnp.inf)")
      self.emit("  m = ml.maximum(m, ml.max(sc, axis=1))")
      self.emit("  sm = sm + ml.sum(ml.where((pos < n)[None, :], sc, 0.0), axis=1)")
      mref, sref = [], []
      for b in range(Bq):
        k = np.concatenate([kv[table[b, p]] for p in range(maxp)])[:lens[b]]
        s = qv @ k.T
        mref.append(s.max(1) if lens[b] else np.full(64, -np.inf))
        sref.append(s.sum(1))
      om = self.output(np.stack(mref), F32)
      os_ = self.output(np.stack(sref), F32)
      self.emit(f"{om}.at[b][...] = m")
      self.emit(f"{os_}.at[b][...] = sm")
      self.tags.add("dot")
    self.tags.add(f"kind:{kind}")

  def f_gather(self):
    r = self.r
    self.block = r.choice([None, 256])
    bm = r.choice([64, 128, 256])
    D = r.choice([16, 32, 64, 128])
    dt = r.choice([F32, F32, F16, I32])
    R = r.randint(bm // 2, 3 * bm)
    nprog = r.randint(1, 3)
    n = nprog * bm
    table = self.vals((R, D), dt)
    ids = self.rng.integers(0, R, n)
    kind = r.choice(["scatter", "atomic", "hist", "where"])
    tn = self.data(table, dt)
    idn = self.index(ids)
    self.grid = (nprog,)
    self.emit("i = ml.program_id(0)")
    self.emit(f"ids = {idn}.at[ml.ds(i * {bm}, {bm})][...]")
    if kind == "hist":
      nb = r.choice([8, 16, 64, 128])
      self.emit(f"ml.atomic_add({{o}}.at[ids % {nb}], 1)")
      h = np.bincount(ids % nb, minlength=nb)
      o = self.output(h, I32)
      self.lines[-1] = self.lines[-1].format(o=o)
      self.tags.add("kind:hist")
      return
    self.emit(f"rows = {tn}[ids, :]")
    g = table[ids]
    if kind == "where" or r.random() < 0.4:
      thr = self.data(np.array([r.randint(-2, 2)]), dt if dt != F16 else F32)
      self.emit(f"rows = ml.where(rows > {thr}[0], rows, -rows)")
      g = np.where(g > thr_val(self, thr), g, -g)
      self.tags.add("where_by_data")
    if kind in ("scatter", "where"):
      perm = self.rng.permutation(n)
      pn = self.index(perm)
      self.emit(f"dst = {pn}.at[ml.ds(i * {bm}, {bm})][...]")
      self.emit(f"{{o}}[dst, :] = rows")
      ref = np.zeros((n, D))
      ref[perm] = g
      o = self.output(ref, dt)
    else:
      nr = r.randint(1, bm)
      dsts = self.rng.integers(0, nr, n)
      dn = self.index(dsts)
      self.emit(f"dst = {dn}.at[ml.ds(i * {bm}, {bm})][...]")
      fn = r.choice(["add", "add", "max", "min"])
      self.emit(f"ml.atomic_{fn}({{o}}.at[dst, :], rows{'.astype(jnp.float32)' if dt == F16 else ''})")
      # an atomically updated output starts at the operation's identity (docs/language.md, "Atomics")
      odt = F32 if dt == F16 else dt
      lim = (np.inf, np.inf) if odt == F32 else (-np.iinfo(np.int32).min, np.iinfo(np.int32).max)
      ref = np.full((nr, D), {"add": 0.0, "max": -lim[0], "min": lim[1]}[fn])
      getattr(np, {"add": "add", "max": "maximum", "min": "minimum"}[fn]).at(ref, dsts, g)
      self.tags.add("atomic:" + fn)
      o = self.output(ref, F32 if dt == F16 else dt)
    self.lines[-1] = self.lines[-1].format(o=o)
    self.tags.add("kind:" + kind)

  def f_cond(self):
    r = self.r
    D = r.choice([32, 64, 128])
    nprog = r.randint(1, 4)
    L = r.randint(1, 12)
    lens = [r.choice([0, 1, L, r.randint(0, L)]) for _ in range(nprog)]
    sel = self.rng.integers(-3, 4, (nprog, L))
    xv = self.vals((nprog * L, D), F32)
    ln = self.index(lens)
    sn = self.index(sel)
    xn = self.data(xv, F32)
    self.grid = (nprog,)
    kind = r.choice(["if", "while", "break"])
    self.emit("i = ml.program_id(0)")
    self.emit(f"acc = ml.zeros(({D},), jnp.float32)")
    ref = np.zeros((nprog, D))
    cnt = np.zeros(nprog, np.int64)
    if kind == "if":
      self.emit(f"for t in {self.loop_head(f'{ln}[i]')}:")
      self.emit(f"  c = {sn}[i, t]")
      self.emit(f"  row = {xn}.at[i * {L} + t][...]")
      self.emit("  if c > 0:")
      self.emit("    acc = acc + row * 2.0")
      self.emit("  elif c < -1:")
      self.emit("    acc = ml.maximum(acc, row)")
      self.emit("  else:")
      self.emit("    acc = acc - 1.0")
      for p in range(nprog):
        a = np.zeros(D)
        for t in range(lens[p]):
          row, c = xv[p * L + t], sel[p, t]
          a = a + row * 2 if c > 0 else (np.maximum(a, row) if c < -1 else a - 1)
        ref[p] = a
    else:       # a while loop on a loaded scalar: stop at the length or at the first negative selector
      self.emit("t = 0")
      cond = f"t < {ln}[i]" if kind == "while" else f"(t < {ln}[i]) & ({sn}[i, ml.minimum(t, {L - 1})] >= 0)"
      self.emit(f"while {cond}:")
      self.emit(f"  acc = acc + {xn}.at[i * {L} + t][...]")
      self.emit("  t = t + 1")
      for p in range(nprog):
        t = 0
        while t < lens[p] and (kind == "while" or sel[p, min(t, L - 1)] >= 0):
          ref[p] += xv[p * L + t]
          t += 1
        cnt[p] = t
      oc = self.output(cnt, I32)
      self.emit(f"{oc}[i] = t")
    o = self.output(ref, F32)
    self.emit(f"{o}.at[i][...] = acc")
    self.tags.add("kind:" + kind)

  def f_seqloop(self):
    """varlen, one program a sequence: a pipelined loop over its row tiles (TMA windows at loaded rows), each tile
    stored inside the loop (whole by TMA where the sequence covers it, else under a row mask), a column sum carried."""
    r = self.r
    self.block = r.choice([None, 256])
    bm = r.choice([64, 128]) if self.block is None else r.choice([128, 256])
    D = r.choice([16, 32, 64, 128])
    dt = r.choice([F32, F16, BF16])
    Bn = r.randint(1, 4)
    lens = self.lengths(Bn, bm)
    off = self.offsets(lens)
    T = int(off[-1]) + r.choice([0, 0, 8])
    xv = self.vals((max(T, 8), D), dt)
    on = self.index(off)
    xn = self.data(xv, dt)
    self.grid = (Bn,)
    op = r.choice(["scale", "rowsum", "rowmax"])
    tstore = r.random() < 0.5
    odt = r.choice([F32, dt])
    self.tags |= {f"op:{op}", "tma_store" if tstore else "masked_store", f"out:{odt}"}
    self.emit("b = ml.program_id(0)")
    self.emit(f"s = {on}[b]")
    self.emit(f"L = {on}[b + 1] - s")
    self.emit(f"x_s = ml.smem(({bm}, {D}), jnp.{dt})")
    if tstore:
      self.emit(f"c_s = ml.smem(({bm}, {D}), jnp.{odt})")
    self.emit(f"cs = ml.zeros(({D},), jnp.float32)")
    self.emit(f"for t in {self.loop_head(f'ml.cdiv(L, {bm})', pipe=True)}:")
    self.emit(f"  r0 = s + t * {bm}")
    self.emit(f"  n = L - t * {bm}")
    self.emit(f"  ml.copy({xn}.at[ml.ds(r0, {bm}), :], x_s)")
    self.emit("  v = x_s[...].astype(jnp.float32)")
    rows = f"(ml.arange({bm}) < n)[:, None]"
    if op == "rowsum":
      self.emit("  y = v + ml.sum(v, axis=1, keepdims=True)")
    elif op == "rowmax":
      self.emit("  y = v - ml.max(v, axis=1)[:, None]")
    else:
      self.emit("  y = v * 2.0 - 1.0")
    self.emit(f"  cs = cs + ml.sum(ml.where({rows}, v, 0.0), axis=0)")
    cast = "" if odt == F32 else f".astype(jnp.{odt})"
    win = f"{{o}}.at[ml.ds(r0, {bm}), :]"
    if tstore:
      self.emit(f"  if n >= {bm}:")
      self.emit(f"    c_s[...] = y{cast}")
      self.emit(f"    ml.copy(c_s, {win})")
      self.emit("  else:")
      self.emit(f"    {win}.store(y{cast}, mask={rows})")
    else:
      self.emit(f"  {win}.store(y{cast}, mask={rows})")
    ref = np.zeros((max(T, 8), D))
    cref = np.zeros((Bn, D))
    for b in range(Bn):
      q = xv[off[b]:off[b + 1]]
      y = q + q.sum(1, keepdims=True) if op == "rowsum" else (q - q.max(1, keepdims=True) if op == "rowmax" and len(q)
                                                                else q * 2 - 1)
      ref[off[b]:off[b + 1]] = y
      cref[b] = q.sum(0)
    o = self.output(ref, odt)
    oc = self.output(cref, F32)
    self.lines = [ln.replace("{o}", o) for ln in self.lines]
    self.emit(f"{oc}.at[b][...] = cs")
    if max(T, 8) > off[-1]:     # rows past the sequences: zeros, by program 0
      t0, nt = int(off[-1]), max(T, 8) - int(off[-1])
      self.emit("if b == 0:")
      self.emit(f"  {o}.at[ml.ds({t0}, {nt}), :][...] = ml.zeros(({nt}, {D}), jnp.{odt})")

  def f_moe(self):
    """MoE: tokens sorted by expert (`order`, expert offsets), each (expert, row tile) program gathers its tokens'
    rows by id, multiplies by the expert's weight (`ml.dot` of a gathered register A), scales by the gate and adds
    the rows atomically into the tokens' rows (top-k: a token picked k times adds k times)."""
    r = self.r
    self.block = r.choice([None, 256])
    bm = r.choice([64, 128]) if self.block is None else 128
    K = r.choice([16, 32, 64])
    N = r.choice([16, 32, 64, 128])
    E = r.randint(1, 4)
    Tk = r.randint(1, 3 * bm)
    topk = r.choice([1, 2])
    T = max(1, Tk // topk)
    tok = np.concatenate([self.rng.permutation(T) for _ in range(topk + 1)])[:Tk]
    eid = self.rng.integers(0, E, Tk)
    if r.random() < 0.3:
      eid[:] = r.randrange(E)           # every token on one expert: the others empty
    srt = np.argsort(eid, kind="stable")
    order, eid = tok[srt], eid[srt]
    off = self.offsets(np.bincount(eid, minlength=E))
    tiles = max(1, max(-(-int(c) // bm) for c in np.diff(off)))
    op = r.choice([F16, BF16])
    xv = self.vals((T, K), op)
    wv = self.vals((E, K, N), op, -2, 2)
    gv = self.vals((Tk,), F32, 0, 4)
    on = self.index(off)
    tn = self.index(order)
    gn = self.data(gv, F32)
    xn = self.data(xv, op)
    wn = self.data(wv, op)
    self.grid = (E, tiles)
    how = r.choice(["gather", "gather", "rows"])
    self.emit("e = ml.program_id(0)")
    self.emit("t = ml.program_id(1)")
    self.emit(f"r0 = {on}[e] + t * {bm}")
    self.emit(f"n = {on}[e + 1] - r0")
    self.emit("if n > 0:")
    self.emit(f"  inside = ml.arange({bm}) < n")
    self.emit(f"  tok = {tn}.at[ml.ds(r0, {bm})].load(mask=inside, other=0)")
    self.emit(f"  gate = {gn}.at[ml.ds(r0, {bm})].load(mask=inside, other=0.0)")
    self.emit(f"  w_s = ml.smem(({K}, {N}), jnp.{op})")
    self.emit(f"  ml.copy({wn}.at[e], w_s)")
    self.emit(f"  a = {xn}[tok, :]")
    self.emit("  y = ml.dot(a, w_s) * gate[:, None]")
    ref = np.zeros((T, N))
    for i in range(Tk):
      ref[order[i]] += gv[i] * (xv[order[i]] @ wv[eid[i]])
    o = self.output(ref, F32)
    if how == "gather":
      self.emit(f"  ml.atomic_add({o}.at[tok, :], y, mask=inside[:, None])")
    else:
      self.emit(f"  ml.atomic_add({o}.at[tok, :], ml.where(inside[:, None], y, 0.0))")
    self.tags |= {"dot", f"moe:{how}", f"topk:{topk}"}

  def f_spmv(self):
    """CSR SpMV: a program a row (or rows of a block), its nonzeros' column ids and values loaded masked, x gathered
    by the ids, a run-time loop over the row's chunks."""
    r = self.r
    B = r.choice([32, 64, 128, 256])
    R = r.randint(1, 6)
    C = r.randint(1, 300)
    lens = self.lengths(R, B, 2)
    off = self.offsets(lens)
    nnz = int(off[-1])
    cols = self.rng.integers(0, C, max(nnz, 1))
    vals = self.vals((max(nnz, 1),), F32)
    xv = self.vals((C,), F32)
    on = self.index(off)
    cn = self.index(cols)
    vn = self.data(vals, F32)
    xn = self.data(xv, F32)
    self.grid = (R,)
    self.emit("i = ml.program_id(0)")
    self.emit(f"s = {on}[i]")
    self.emit(f"e = {on}[i + 1]")
    self.emit(f"acc = ml.zeros(({B},), jnp.float32)")
    self.emit(f"for c in {self.loop_head(f'ml.cdiv(e - s, {B})')}:")
    self.emit(f"  k = s + c * {B} + ml.arange({B})")
    self.emit("  m = k < e")
    self.emit(f"  cl = {cn}.at[ml.ds(s + c * {B}, {B})].load(mask=m, other=0)")
    self.emit(f"  vv = {vn}.at[ml.ds(s + c * {B}, {B})].load(mask=m, other=0.0)")
    self.emit(f"  acc = acc + vv * {xn}[cl]")
    ref = np.array([(vals[off[i]:off[i + 1]] * xv[cols[off[i]:off[i + 1]]]).sum() for i in range(R)])
    o = self.output(ref, F32)
    self.emit(f"{o}[i] = ml.sum(acc)")

  def f_persist(self):
    """A persistent grouped GEMM: each program walks groups g = pid, pid + P, ... and each group's row tiles (nested
    run-time loops, trip counts from the offsets), a pipelined K loop inside, every tile stored masked at its row."""
    r = self.r
    bm = r.choice([64, 128])
    bn = r.choice([32, 64, 128])
    bk = r.choice([32, 64])
    nk = r.randint(1, 3)
    K, N = nk * bk, bn
    G = r.randint(1, 5)
    P = r.randint(1, G)
    lens = self.lengths(G, bm, 2)
    off = self.offsets(lens)
    M = max(int(off[-1]), 1)
    op = r.choice([F16, BF16])
    av = self.vals((M, K), op)
    bv = self.vals((G, K, N), op, -2, 2)
    on = self.index(off)
    an = self.data(av, op)
    bnm = self.data(bv, op)
    self.grid = (P,)
    self.emit("pid = ml.program_id(0)")
    self.emit(f"a_s = ml.smem(({bm}, {bk}), jnp.{op})")
    self.emit(f"b_s = ml.smem(({bk}, {bn}), jnp.{op})")
    self.emit(f"for g in range(pid, {G}, {P}):")
    self.emit(f"  s = {on}[g]")
    self.emit(f"  L = {on}[g + 1] - s")
    self.emit(f"  for t in {self.loop_head(f'ml.cdiv(L, {bm})')}:")
    self.emit(f"    r0 = s + t * {bm}")
    self.emit(f"    acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    self.emit(f"    for k in {self.loop_head(f'{K} // {bk}', pipe=True)}:")
    self.emit(f"      ml.copy({an}.at[ml.ds(r0, {bm}), ml.ds(k * {bk}, {bk})], a_s)")
    self.emit(f"      ml.copy({bnm}.at[g, ml.ds(k * {bk}, {bk}), :], b_s)")
    self.emit("      acc = ml.dot(a_s, b_s, acc)")
    ref = np.zeros((M, N))
    for g in range(G):
      ref[off[g]:off[g + 1]] = av[off[g]:off[g + 1]] @ bv[g]
    o = self.output(ref, F32)
    self.emit(f"    {o}.at[ml.ds(r0, {bm}), :].store(acc, mask=(ml.arange({bm}) < L - t * {bm})[:, None])")
    if int(off[-1]) == 0:
      self.emit("if pid == 0:")
      self.emit(f"  {o}.at[0:1, :][...] = ml.zeros((1, {N}), jnp.float32)")
    self.tags.add("dot")

  def f_compact(self):
    """Stream compaction by a count carried through a run-time loop: rows whose loaded selector is positive are
    stored at the count, which then grows (a data-dependent store offset); the count stored last."""
    r = self.r
    D = r.choice([16, 32, 64, 128])
    nprog = r.randint(1, 3)
    L = r.randint(1, 10)
    lens = [r.choice([0, 1, L, r.randint(0, L)]) for _ in range(nprog)]
    sel = self.rng.integers(-2, 3, (nprog, L))
    xv = self.vals((nprog * L, D), F32)
    ln = self.index(lens)
    sn = self.index(sel)
    xn = self.data(xv, F32)
    self.grid = (nprog,)
    self.emit("i = ml.program_id(0)")
    self.emit(f"{{o}}.at[ml.ds(i * {L}, {L}), :][...] = ml.zeros(({L}, {D}), jnp.float32)")
    self.emit("cnt = 0")
    self.emit(f"for t in {self.loop_head(f'{ln}[i]')}:")
    self.emit(f"  if {sn}[i, t] > 0:")
    self.emit(f"    {{o}}.at[i * {L} + cnt][...] = {xn}.at[i * {L} + t][...] * 2.0")
    self.emit("    cnt = cnt + 1")
    ref = np.zeros((nprog * L, D))
    cref = np.zeros(nprog, np.int64)
    for p in range(nprog):
      c = 0
      for t in range(lens[p]):
        if sel[p, t] > 0:
          ref[p * L + c] = xv[p * L + t] * 2
          c += 1
      cref[p] = c
    o = self.output(ref, F32)
    oc = self.output(cref, I32)
    self.lines = [ln_.replace("{o}", o) for ln_ in self.lines]
    self.emit(f"{oc}[i] = cnt")


def thr_val(gen, name):
  return float(dict(gen.ins)[name][0])


def compare(got, want, tol_dtype=None):
  return diff_fuzz.compare(got, want)


def run(gen, *, build=True):
  """(class, detail) of `gen`'s kernel: tests/diff_fuzz.py's classes."""
  return diff_fuzz.run(gen, build=build, compare=lambda g, w, dot=False: compare(g, w))


if __name__ == "__main__":     # python tests/ragged_fuzz.py LO HI [EVERY] [FAMILY]: interpret mode, a CUDA export of one seed in EVERY
  every = int((sys.argv[3:] or [1])[0])
  fam = (sys.argv[4:] or [None])[0]
  for s in range(int(sys.argv[1]), int(sys.argv[2])):
    gen = Gen(s, family=fam)
    print(f"SEED {s}", *run(gen, build=s % every == 0), sorted(gen.tags), flush=True)
