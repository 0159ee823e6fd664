"""The data helpers of probe 63a's fuzzer of data-dependent and ragged kernels (tests/ragged_fuzz.py), and five of its
families: `seqloop` (a pipelined loop over a varlen sequence's row tiles, each stored in the loop), `moe` (tokens
gathered by id, an expert's product, atomically added back), `spmv` (CSR: column ids and values loaded masked, x
gathered by them), `persist` (a persistent grouped GEMM walking groups and their row tiles in nested run-time loops),
`compact` (stream compaction by a carried count used as a store offset). `ragged_fuzz.Gen` builds on `Drawn`.
"""
from __future__ import annotations

import re

import numpy as np

import dot_fuzz

F32, F16, BF16, I32 = "float32", "float16", "bfloat16", "int32"
IDX = ["uint32", "int16", "uint16", "int8", "uint8"]
ROW_OPS = {   # a tile's row op: its kernel text (of `v`) and its NumPy twin (of a sequence's rows)
    "rowsum": ("v + ml.sum(v, axis=1, keepdims=True)", lambda q: q + q.sum(1, keepdims=True)),
    "rowmax": ("v - ml.max(v, axis=1)[:, None]", lambda q: q - q.max(1, keepdims=True) if len(q) else q),
    "scale": ("v * 2.0 + 1.0", lambda q: q * 2 + 1),
}


def _np(dt):
  return dot_fuzz._np(dt)


class Drawn(dot_fuzz.Gen):
  """A kernel's inputs drawn for the edges (offsets, lengths, ids of several integer types), its loops, and five
  families (`f_seqloop`, `f_moe`, `f_spmv`, `f_persist`, `f_compact`)."""

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

  def groups(self, G, bm, hi_tiles, K, N):
    """A grouped GEMM's data: group sizes (for the edges), their offsets (an index input), float16 or bfloat16 lhs
    (M, K) and rhs (G, K, N); (off, M, op, lhs, rhs, their names) and the reference of rows by their group's rhs."""
    lens = self.lengths(G, bm, hi_tiles)
    off = self.offsets(lens)
    M = max(int(off[-1]), 1)
    op = self.r.choice([F16, BF16])
    av = self.vals((M, K), op)
    bv = self.vals((G, K, N), op, -2, 2)
    names = self.index(off), self.data(av, op), self.data(bv, op)
    ref = np.zeros((M, N))
    for g in range(G):
      ref[off[g]:off[g + 1]] = av[off[g]:off[g + 1]] @ bv[g]
    return lens, off, M, op, names, ref

  def sequences(self):
    """Packed sequences (cu_seqlens) at block 128 or 256: (row tile, columns, dtype, count, lengths, offsets)."""
    r = self.r
    self.block = r.choice([None, 256])
    bm = r.choice([64, 128]) if self.block is None else r.choice([128, 256])
    D = r.choice([16, 32, 64, 128])
    dt = r.choice([F32, F16, BF16])
    Bn = r.randint(1, 4)
    lens = self.lengths(Bn, bm)
    return bm, D, dt, Bn, lens, self.offsets(lens)

  def selectors(self, D, nprog, L, lo, hi):
    """Per program a length (0, 1, L or between) and L selectors in [lo, hi] (index inputs), and its L rows of
    float32 data: (lens, sel, rows, their names)."""
    r = self.r
    lens = [r.choice([0, 1, L, r.randint(0, L)]) for _ in range(nprog)]
    sel = self.rng.integers(lo, hi + 1, (nprog, L))
    xv = self.vals((nprog * L, D), F32)
    return lens, sel, xv, (self.index(lens), self.index(sel), self.data(xv, F32))

  def row_op(self, op, ind):
    """`y = ...` of the tile `v` by `op` (a row sum or maximum broadcast back, or a scale): the NumPy function of a
    sequence's rows that it is."""
    k, fn = ROW_OPS[op]
    self.emit(f"{ind}y = {k}")
    return fn

  # ------------------------------------------------------------------ families
  def f_seqloop(self):
    """varlen, one program a sequence: a pipelined loop over its row tiles (TMA windows at loaded rows), each tile
    stored inside the loop (whole by TMA where the sequence covers it, else under a row mask), a column sum carried."""
    r = self.r
    bm, D, dt, Bn, lens, off = self.sequences()
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
    fn = self.row_op(op, "  ")
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
      ref[off[b]:off[b + 1]] = fn(q)
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
    lens, off, M, op, (on, an, bnm), ref = self.groups(G, bm, 2, K, N)
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
    lens, sel, xv, (ln, sn, xn) = self.selectors(D, nprog, L, -2, 2)
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
