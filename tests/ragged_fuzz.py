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
- `ragk`: a grouped weight gradient, out[g] = xt[:, s:e] @ dy[s:e] (ragged K: a run-time trip count, or a static one
  left by a break on the group's length, `if c * bk >= e - s: break`; the A tile masked in registers, the B tile a TMA
  window at a run-time row, pipelined by stages 1-4);
- `paged`: a page table and lengths: an `ml.range` over a sequence's pages (run-time trip count, stages 1-4,
  warp-specialised where it is a dot loop), each trip's TMA window chosen by the table entry it reads, the last page
  masked by the length; or every table column walked, left by a break on the page count (`if p >= ml.cdiv(n, 16):
  break` and its other spellings), or a table padded with -1 skipped by an `if` on the entry read; a masked column
  sum of the pages, or the row maximum and sum of q @ k.T;
- `gather`: index vectors read from inputs: rows gathered by id, `ml.where` by data, scattered to a permutation,
  atomically added into data-chosen rows (repeated ids), or counted into a histogram;
- `cond`: `if`/`while` on loaded scalars inside run-time loops, accumulating rows chosen by them.

The data helpers and five of the families (`seqloop`, `moe`, `spmv`, `persist`, `compact`: see their docstrings) live
in tests/ragged_fuzz_more.py, whose `Drawn` this module's `Gen` builds on. Inputs are small whole numbers or halves, so
every sum is exact and the comparison is diff_fuzz's tight one.
`run(gen)` classifies as tests/diff_fuzz.py does ("ok", "wrong", "crash", "refused", "build"). Deterministic.
"""
from __future__ import annotations

import sys

import numpy as np

import diff_fuzz
from ragged_fuzz_more import BF16, F16, F32, I32, Drawn

FAMILIES = (["segsum"] * 3 + ["varlen"] * 2 + ["seqloop"] * 2 + ["grouped"] * 2 + ["ragk"] * 2 + ["paged"] * 2
            + ["gather"] * 2 + ["moe"] * 2 + ["spmv"] + ["cond"] * 2 + ["persist"] * 2 + ["compact"])


class Gen(Drawn):
  """One random data-dependent kernel (`source`, `args`, `refs`, `tags`) from the plan of `seed`."""

  def __init__(self, seed, family=None):
    self._start(seed)
    self.tags, self.widen = set(), set()
    self.family = family or self.r.choice(FAMILIES)
    self.tags.add("fam:" + self.family)
    getattr(self, "f_" + self.family)()
    if self.block:
      self.tags.add(f"block:{self.block}")

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
    bm, D, dt, Bn, lens, off = self.sequences()
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
    fn = self.row_op(op, ind)
    ref = np.zeros((max(T, 1), D))
    for b in range(Bn):
      ref[off[b]:off[b + 1]] = fn(xv[off[b]:off[b + 1]])
    o = self.output(ref, F32)
    if st == "masked":
      self.emit(f"{ind}{o}.at[ml.ds(r0, {bm}), :].store(y, mask={rows})")
    else:
      self.emit(f"{ind}ml.atomic_add({o}.at[r0 + ml.arange({bm}), :], ml.where({rows}, y, 0.0), mask={rows})")
    if T > off[-1] or 1 > T:
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
    lens, off, M, op, (on, an, bnm), ref = self.groups(G, bm, 2, K, N)
    tiles = max(1, max(-(-l // bm) for l in lens))
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
    elif r.random() < 0.4:       # a static trip count past every group's, left by a break on the group's length
      trips = max(1, max(-(-n // bk) for n in lens)) + r.randint(0, 2)
      self.emit(f"for c in {self.loop_head(str(trips), pipe=pipe)}:")
      self.emit("  " + r.choice([f"if c * {bk} >= e - s:", f"if c >= ml.cdiv(e - s, {bk}):", f"if {bk} * c > e - s - 1:"]))
      self.emit("    break")
      self.emit(f"  k0 = s + c * {bk}")
      self.tags.add("break")
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
      if padded:               # (the -1 entries skipped by an if on the entry read)
        self.emit(f"  pg = {tn}[b, p]")
        self.emit("  if pg >= 0:")
      ind = "    " if padded else "  "
      self.emit(f"{ind}ml.copy({kn}.at[{'pg' if padded else f'{tn}[b, p]'}], k_s)")
      self.emit(f"{ind}pos = p * {page} + ml.arange({page})")
      self.emit(f"{ind}acc = acc + ml.sum(ml.where((pos < n)[:, None], k_s[...].astype(jnp.float32), 0.0), axis=0)")
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
      self.emit("{o}[dst, :] = rows")
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
    lens, sel, xv, (ln, sn, xn) = self.selectors(D, nprog, L, -3, 3)
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
