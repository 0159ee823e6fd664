"""Probe 63b's differential fuzzer of grid and schedule structures: how the programs of a grid share the work.

`Gen(seed)` draws a plan (a family, a grid, how program ids map to tiles, dtypes, tile sizes, how each tile is read
and written) and writes from it the kernel's source and its NumPy reference, computed from the plan (what the
program means, a whole array at a time), never from interpret mode. Families:

- `map`: one (bm, bn) tile of an (M, N) array (or of a batch of them) a program, on 1-D, 2-D and 3-D grids: tile
  coordinates from `ml.program_id` of each axis (either axis order), a 1-D id split row- or column-major, Triton's
  GROUP_SIZE_M swizzle (`ml.grouped_ids` or the formula of scalars), grids larger than the work (programs that
  `return` early or skip their body under an `if`), grids of one program looping over every tile;
- `persist`: a persistent grid of 1..8 (or `mg.num_sms()`) programs looping over the tiles, `for t in range(pid,
  n_tiles, ml.num_programs(0))`, `ml.range` of the same (pipelined where the tile comes by TMA) or of a trip count,
  with an epilogue a tile and a per-program total carried through the loop and added atomically at the end;
- `reduce`: every program's tile reduced into one scalar (sum, max) and row sums by atomics from the programs of a
  row of tiles, with a ticket counting the programs;
- `splitk`: an (M, K) @ (K, N) product (or column sums) whose K is split among the programs of a grid axis (or of a
  1-D id), the partials added by atomics, or added into a workspace whose last program (by a per-tile ticket)
  writes the epilogue;
- `lock`: stream-K style: programs add their partial into a group's row under a spin lock (`ml.atomic_cas`), the
  group's first program writing it; or program 2p waits on program 2p + 1's flag and combines its partial;
- `overlap`: plain writes whose windows two programs share (a stride shorter than the tile, an idle grid axis, a
  persistent loop of the wrong step, a wrong id split): the compiler's grid proofs must refuse them (MG951, or
  MG602 where an element is left unwritten); the plan counts each element's writers, so a plan whose windows turn
  out disjoint and covering must run.

Tiles hold plain register math and tensor-core products of float32 / float16 / int32 values, read by TMA windows,
masked window loads or pointer grids and written by TMA, window, masked, pointer and atomic stores; tiles cover the
array exactly or leave ragged edges in either axis; block=128 and 256. Inputs are small whole numbers or halves, so
every sum is exact and order-independent. `run(gen)` classifies as tests/diff_fuzz.py does ("ok", "wrong", "crash",
"refused", "build"), and an `overlap` plan that is accepted "wrong". Deterministic.
"""
from __future__ import annotations

import sys

import numpy as np

import diff_fuzz
import dot_fuzz
from grid_fuzz_races import RaceFamilies

F32, F16, I32 = "float32", "float16", "int32"
ISZ = {F32: 4, F16: 2, I32: 4}
FAMILIES = ["map"] * 5 + ["persist"] * 3 + ["reduce"] * 2 + ["splitk"] * 3 + ["lock"] * 2 + ["overlap"] * 2
SCHEMES = ["2d", "2d_t", "rows", "cols", "grouped", "triton", "3d", "extra_ret", "extra_if", "one", "extra2d",
           "flat2d", "table", "snake"]


def _cdiv(a, b):
  return -(-a // b)


def _cast(x, dt):
  x = np.asarray(x, np.float64)
  return x.astype(np.int32) if dt == I32 else x.astype(np.float32).astype(dot_fuzz._np(dt))


class Gen(RaceFamilies, dot_fuzz.Gen):
  """One random grid-structured kernel (`source`, `args`, `refs`, `tags`) from the plan of `seed`."""

  def __init__(self, seed, family=None):
    self._start(seed)
    self.tags = set()
    self.race = None            # overlap: "race", "uncovered" or None (disjoint and covering: must run)
    r = self.r
    self.family = family or r.choice(FAMILIES)
    self.block = r.choice([128, 128, 256])
    self.tags |= {f"fam:{self.family}", f"block:{self.block}"}
    getattr(self, "k_" + self.family)()
    if self.block == 128:
      self.block = None

  def out(self, ref, dt):
    name = f"o{len(self.outs)}"
    self.outs.append((name, _cast(ref, dt)))
    return name

  # ------------------------------------------------------------------ tiles
  def sizes(self, dot=False):
    """(bm, bn, M, N, dt): a tile and an array of 1..3 tiles an axis, ragged or exact in either axis."""
    r = self.r
    if dot:
      bm = r.choice([64, 128]) if self.block == 128 else r.choice([128, 256])
      bn = r.choice([32, 64, 128])
      dt = r.choice([F16, F16, F32])
    else:
      bm = r.choice([8, 16, 32, 64, 64, 128, 128, 256])
      bn = r.choice([32, 64, 128, 128, 256])
      while bm * bn > 64 * self.block:
        bn //= 2
      dt = r.choice([F32, F32, F16, I32])
    M = r.randint(1, 3) * bm - (r.randint(1, bm - 1) if r.random() < 0.4 else 0)
    N = r.randint(1, 3) * bn - (r.choice([bn // 2, 8 * r.randint(1, bn // 8 - 1) if bn > 8 else 0])
                                if r.random() < 0.4 else 0)
    N = max(N, 8)            # rows 16 bytes apart (TMA)
    if not dot and r.random() < 0.2:     # rows that are not (no TMA: masked and pointer loads and stores)
      N = max(1, N - r.choice([1, 3, 5]))
      self.no_tma = N * ISZ[dt] % 16 != 0
      self.tags.add("odd_cols")
    if r.random() < 0.4:     # ragged rows
      M = max(1, M - r.randint(1, min(bm - 1, 7)) if bm > 1 else M)
    self.tags.add("ragged" if M % bm or N % bn else "exact")
    return bm, bn, M, N, dt

  def math(self, dt):
    """A register op of a tile: (kernel text with {v}, NumPy function)."""
    forms = [("{v} * 2 + 1", lambda x: x * 2 + 1), ("ml.maximum({v}, 0)", lambda x: np.maximum(x, 0)),
             ("ml.abs({v}) - 3", lambda x: np.abs(x) - 3), ("ml.where({v} > 1, {v}, -{v})",
                                                            lambda x: np.where(x > 1, x, -x)),
             ("{v} - 2", lambda x: x - 2), ("{v} * {v}", lambda x: x * x)]
    return self.r.choice(forms)

  def load_tile(self, x, dt, bm, bn, M, N, r0, c0, pb="", ind=0, mode=None, exact=None):
    """Kernel lines reading x's (bm, bn) tile at (r0, c0) (expressions) into `v`; its mode."""
    r = self.r
    exact = (M % bm == 0 and N % bn == 0) if exact is None else exact
    mode = mode or r.choice(["tma", "tma", "mask", "ptr"] + (["win", "win"] if exact else []))
    if mode == "tma" and getattr(self, "no_tma", False):
      mode = r.choice(["mask", "ptr"])
    e = lambda s: self.emit("  " * ind + s)  # noqa: E731
    if mode == "tma":
      e(f"ml.copy({x}.at[{pb}ml.ds({r0}, {bm}), ml.ds({c0}, {bn})], x_s)")
      e("v = x_s[...]")
      self.smem_x = (bm, bn, dt)
    elif mode == "win":
      e(f"v = {x}.at[{pb}ml.ds({r0}, {bm}), ml.ds({c0}, {bn})][...]")
    elif mode == "mask":
      e(f"v = {x}.at[{pb}ml.ds({r0}, {bm}), ml.ds({c0}, {bn})].load(mask=(({r0}) + ml.arange({bm}) < {M})[:, None] "
        f"& (({c0}) + ml.arange({bn}) < {N})[None, :], other=0)")
    else:
      e(f"rr = ({r0}) + ml.arange({bm})")
      e(f"cc = ({c0}) + ml.arange({bn})")
      e(f"v = ml.load({x}.at[{pb}rr[:, None], cc[None, :]], mask=(rr[:, None] < {M}) & (cc[None, :] < {N}), other=0)")
    self.tags.add("load:" + mode)
    return mode

  def store_tile(self, o, y, dt, bm, bn, M, N, r0, c0, pb="", ind=0, modes=None):
    r = self.r
    exact = M % bm == 0 and N % bn == 0
    modes = modes or (["tma", "mask", "mask", "ptr"] + (["win", "win"] if exact else [])
                      + ["atomic"])
    mode = r.choice(modes)
    if mode == "tma" and getattr(self, "no_tma", False):
      mode = r.choice(["mask", "ptr"])
    e = lambda s: self.emit("  " * ind + s)  # noqa: E731
    m = f"(({r0}) + ml.arange({bm}) < {M})[:, None] & (({c0}) + ml.arange({bn}) < {N})[None, :]"
    win = f"{o}.at[{pb}ml.ds({r0}, {bm}), ml.ds({c0}, {bn})]"
    if mode == "tma":
      e(f"o_s[...] = {y}")
      e(f"ml.copy(o_s, {win})")
      self.smem_o = (bm, bn, dt)
    elif mode == "win":
      e(f"{win}[...] = {y}")
    elif mode == "mask":
      e(f"{win}.store({y}, mask={m})")
    elif mode == "ptr":
      e(f"rs = ({r0}) + ml.arange({bm})")
      e(f"cs = ({c0}) + ml.arange({bn})")
      e(f"ml.store({o}.at[{pb}rs[:, None], cs[None, :]], {y}, mask=(rs[:, None] < {M}) & (cs[None, :] < {N}))")
    else:
      e(f"ml.atomic_add({win}, {y}, mask={m})")
    self.tags.add("store:" + mode)
    return mode

  def smem_lines(self):
    """The SMEM buffers the tile's TMA reads and stores asked for, at the kernel's top (after the id lines)."""
    out = []
    if getattr(self, "smem_x", None):
      bm, bn, dt = self.smem_x
      out.append(f"  x_s = ml.smem(({bm}, {bn}), jnp.{dt})")
    if getattr(self, "smem_o", None):
      bm, bn, dt = self.smem_o
      out.append(f"  o_s = ml.smem(({bm}, {bn}), jnp.{dt})")
    self.lines[:0] = out

  # ------------------------------------------------------------------ how program ids map to tiles
  def scheme(self, gm, gn, nb=0):
    """Grid and the kernel lines giving tile coordinates i, j (and batch z) of each program; the body's indent and
    whether the body is a loop over tiles (`one`). Returns (indent, note)."""
    r = self.r
    s = r.choice(SCHEMES if not nb else ["3d", "3d", "rows", "extra_if"])
    self.tags.add("scheme:" + s)
    T = gm * gn * max(nb, 1)
    e = self.emit
    if s == "3d":
      self.grid = (gm, gn, nb or 1) if r.random() < 0.7 or nb else (gn, gm, 1)
      if self.grid[0] == gm:
        e("i = ml.program_id(0)")
        e("j = ml.program_id(1)")
      else:
        e("j = ml.program_id(0)")
        e("i = ml.program_id(1)")
      if nb:
        e("z = ml.program_id(2)")
      return 0
    if s == "2d":
      self.grid = (gm, gn)
      e("i = ml.program_id(0)")
      e("j = ml.program_id(1)")
      return 0
    if s == "extra2d":       # a 2-D grid past the tiles in either axis: the programs outside return
      self.grid = (gm + r.randint(0, 2), gn + r.randint(0, 2))
      e("i = ml.program_id(0)")
      e("j = ml.program_id(1)")
      e(f"if (i >= {gm}) | (j >= {gn}):" if r.random() < 0.5 else f"if i >= {gm} or j >= {gn}:")
      e("  return")
      return 0
    if s == "flat2d":        # a 2-D grid's programs numbered through ml.num_programs, then split row-major
      self.grid = (gm, gn) if r.random() < 0.5 else (gm * gn, 1)
      e("t = ml.program_id(0) * ml.num_programs(1) + ml.program_id(1)")
      e(f"i = t // {gn}")
      e(f"j = t % {gn}")
      return 0
    if s == "2d_t":
      self.grid = (gn, gm)
      e("i, j = ml.program_id(1), ml.program_id(0)")
      return 0
    if s == "one":
      self.grid = (1,)
      e(f"for t in range({T}):")
      e(f"  i = t // {gn}")
      e(f"  j = t % {gn}")
      return 1
    self.grid = (T,)
    e("t = ml.program_id(0)")
    if nb:
      e(f"z = t // {gm * gn}")
      e(f"t = t % {gm * gn}")
    if s == "table":          # a tile scheduler's order, read from an input (checked in interpret mode)
      name = f"x{len(self.ins)}"
      self.ins.append((name, self.rng.permutation(T).astype(np.int32)))
      self.lines[-1] = f"  t = {name}[ml.program_id(0)]"
    if s == "snake":          # boustrophedon: odd tile rows walked backwards, the programs in reverse
      self.lines[-1] = f"  t = {T - 1} - ml.program_id(0)"
      e(f"i = t // {gn}")
      e(f"j = t % {gn} if i % 2 == 0 else {gn - 1} - t % {gn}")
    if s in ("rows", "extra_ret", "extra_if", "table"):
      if r.random() < 0.3:
        e(f"i, j = divmod(t, {gn})")
      else:
        e(f"i = t // {gn}")
        e(f"j = t % {gn}")
    elif s == "cols":
      e(f"i = t % {gm}")
      e(f"j = t // {gm}")
    elif s == "grouped":
      e(f"i, j = ml.grouped_ids(t, {gm}, {gn}, group={r.choice([1, 2, 3, 8])})")
    elif s == "triton":
      g = r.choice([1, 2, 3, 8])
      e(f"num_pid_in_group = {g} * {gn}")
      e("group_id = t // num_pid_in_group")
      e(f"first_pid_m = group_id * {g}")
      e(f"group_size_m = {r.choice(['ml.minimum', 'min'])}({gm} - first_pid_m, {g})")
      e("i = first_pid_m + (t % num_pid_in_group) % group_size_m")
      e("j = (t % num_pid_in_group) // group_size_m")
    if s in ("extra_ret", "extra_if"):
      ex = r.randint(1, 5)
      self.grid = (T + ex,)
      if s == "extra_ret":
        e(f"if t >= {T}:")
        e("  return")
        return 0
      e(f"if ml.program_id(0) < {T}:")
      return 1
    return 0

  # ------------------------------------------------------------------ family: one tile a program
  def k_map(self):
    r = self.r
    dot = r.random() < 0.3
    if dot:
      return self.dot_map()
    bm, bn, M, N, dt = self.sizes()
    nb = r.choice([0, 0, 0, 2])
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    pre = (nb,) if nb else ()
    x, xv = self.input(pre + (M, N), dt, -4, 4, half=dt != I32)
    ind = self.scheme(gm, gn, nb)
    pb = "z, " if nb else ""
    self.load_tile(x, dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", pb, ind)
    k, f = self.math(dt)
    self.emit("  " * ind + f"y = {k.format(v='v')}")
    ref = f(xv)
    o = self.out(ref, dt)
    self.store_tile(o, "y", dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", pb, ind)
    self.smem_lines()

  def dot_tile(self, bm, bn, dt, ind, i="i", j="j", kr=None, K=None):
    """Kernel lines of acc = A[i tile] @ B[:, j tile] over the K steps `kr` (a range's arguments)."""
    r = self.r
    e = lambda s: self.emit("  " * ind + s)  # noqa: E731
    bk = self.bk
    e(f"acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    loop = r.choice(["range", "mlrange", "stages", "stages", "ws"])
    head = {"range": f"range({kr})", "mlrange": f"ml.range({kr})", "stages": f"ml.range({kr}, stages=2)",
            "ws": f"ml.range({kr}, stages=2, warp_specialize=True)"}[loop]
    self.tags.add("kloop:" + loop)
    e(f"for k in {head}:")
    e(f"  ml.copy({self.a}.at[ml.ds({i} * {bm}, {bm}), ml.ds(k * {bk}, {bk})], a_s)")
    if dt == F32:     # (float32 operands are read K-major: B stored (n, k), passed transposed)
      e(f"  ml.copy({self.b}.at[ml.ds({j} * {bn}, {bn}), ml.ds(k * {bk}, {bk})], b_s)")
      e("  acc = ml.dot(a_s, b_s.T, acc)")
    else:
      e(f"  ml.copy({self.b}.at[ml.ds(k * {bk}, {bk}), ml.ds({j} * {bn}, {bn})], b_s)")
      e("  acc = ml.dot(a_s, b_s, acc)")
    self.lines.insert(0, f"  a_s = ml.smem(({bm}, {bk}), jnp.{dt})")
    self.lines.insert(1, f"  b_s = ml.smem({(bn, bk) if dt == F32 else (bk, bn)}, jnp.{dt})")

  def dot_operands(self, dot_dt, M, N, nk):
    r = self.r
    self.bk = bk = r.choice([32, 64]) if dot_dt == F16 else r.choice([16, 32])
    K = nk * bk - (r.choice([0, 0, 8]) if nk > 1 else 0)
    K = max(8, K)
    self.a, av = self.input((M, K), dot_dt, -3, 3)
    self.b, bv = self.input((N, K) if dot_dt == F32 else (K, N), dot_dt, -3, 3)
    self.tags |= {"dot", f"dt:{dot_dt}"}
    return K, av @ (bv.T if dot_dt == F32 else bv)

  def dot_map(self):
    r = self.r
    bm, bn, M, N, dt = self.sizes(dot=True)
    if dt == F32:
      N = max(N, 4)
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    K, prod = self.dot_operands(dt, M, N, r.randint(1, 3))
    ind = self.scheme(gm, gn)
    self.dot_tile(bm, bn, dt, ind, kr=f"ml.cdiv({K}, {self.bk})")
    odt = r.choice([F32, F16])
    y = "acc" if odt == F32 else "acc.astype(jnp.float16)"
    if r.random() < 0.4:
      y = f"ml.maximum({y}, 0)"
      prod = np.maximum(prod, 0)
    o = self.out(prod, odt)
    self.store_tile(o, y, odt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", ind,
                    modes=["tma", "mask", "ptr"] + (["atomic"] if odt == F32 else []))
    self.smem_lines()

  # ------------------------------------------------------------------ family: persistent grids
  def valid(self, bm, bn, M, N, r0, c0):
    return f"(({r0}) + ml.arange({bm}) < {M})[:, None] & (({c0}) + ml.arange({bn}) < {N})[None, :]"

  def total_of(self, dt):
    """The kernel's expression of the float32 (int32) sum of the tile `y`'s elements inside the array."""
    return "ml.sum(ml.where(ok, y, 0))" if dt == I32 else "ml.sum(ml.where(ok, y.astype(jnp.float32), 0.0))"

  def persist_dot(self):
    """A persistent matmul: each program's tiles in turn, a pipelined K loop and an epilogue a tile."""
    r = self.r
    bm, bn, M, N, dt = self.sizes(dot=True)
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    T = gm * gn
    K, prod = self.dot_operands(dt, M, N, r.randint(1, 3))
    P = r.choice([1, 2, 3, T, "sms"])
    self.grid = "(mg.num_sms(),)" if P == "sms" else (P,)
    self.tags.add(f"P:{P if P in (1, 'sms') else ('T' if P == T else 'n')}")
    self.emit("pid = ml.program_id(0)")
    self.emit(f"for t in {r.choice(['range', 'ml.range'])}(pid, {T}, ml.num_programs(0)):")
    order = r.choice(["grouped", "rows", "snake"])
    self.tags.add("order:" + order)
    if order == "grouped":
      self.emit(f"  i, j = ml.grouped_ids(t, {gm}, {gn}, group={r.choice([2, 8])})")
    elif order == "rows":
      self.emit(f"  i, j = t // {gn}, t % {gn}")
    else:
      self.emit(f"  i = t // {gn}")
      self.emit(f"  j = t % {gn} if i % 2 == 0 else {gn - 1} - t % {gn}")
    self.dot_tile(bm, bn, dt, 1, kr=f"ml.cdiv({K}, {self.bk})")
    odt = r.choice([F32, F16])
    y = "acc" if odt == F32 else "acc.astype(jnp.float16)"
    if r.random() < 0.4:
      y, prod = f"ml.maximum({y}, 0)", np.maximum(prod, 0)
    o = self.out(prod, odt)
    self.store_tile(o, y, odt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", 1,
                    modes=["tma", "tma", "mask", "ptr"] + (["atomic"] if odt == F32 else []))
    self.smem_lines()

  def k_persist(self):
    r = self.r
    if r.random() < 0.35:
      return self.persist_dot()
    bm, bn, M, N, dt = self.sizes()
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    T = gm * gn
    P = r.choice([1, 2, 3, 4, 5, 8, T, T + 2, "sms"])
    self.grid = "(mg.num_sms(),)" if P == "sms" else (P,)
    self.tags.add(f"P:{P if P in (1, 'sms') else ('T' if P == T else 'n')}")
    x, xv = self.input((M, N), dt, -4, 4, half=dt != I32)
    form = r.choice(["range", "mlrange", "trips", "while", "break", "2d", "continue", "return"])
    self.tags.add("loop:" + form)
    self.emit("pid = ml.program_id(0)")
    self.emit("g = ml.num_programs(0)")
    total = r.random() < 0.5 and form != "return"     # (a return skips the total's atomic after the loop)
    if total:
      self.emit("tot = 0" if dt == I32 else "tot = 0.0")
    mode = r.choice(["tma", "tma", "mask", "ptr"] + (["win"] if M % bm == 0 and N % bn == 0 else []))
    if mode == "tma" and getattr(self, "no_tma", False):
      mode = "mask"
    small = bm * bn * ISZ[dt] <= 32 * 1024       # (two stages of bigger tiles pass the SMEM budget: MG402)
    stages = ", stages=2" if mode == "tma" and small and r.random() < 0.6 else ""
    ind = 1
    if form == "range":
      self.emit(f"for t in range(pid, {T}, g):")
    elif form == "mlrange":
      self.emit(f"for t in ml.range(pid, {T}, g{stages}):")
    elif form == "trips":
      self.emit(f"for kk in ml.range(({T} - pid + g - 1) // g{stages}):")
      self.emit("  t = pid + kk * g")
    elif form == "while":
      self.emit("t = pid")
      self.emit(f"while t < {T}:")
    elif form in ("continue", "return"):     # a loop past the tiles, the extra trips skipped
      self.emit(f"for t in {r.choice(['range', 'ml.range'])}(pid, {T + r.randint(1, 4)}, g):")
      self.emit(f"  if t >= {T}:")
      self.emit(f"    {form}")
    elif form == "break":
      self.emit(f"for kk in range({T}):")
      self.emit("  t = pid + kk * g")
      self.emit(f"  if t >= {T}:")
      self.emit("    break")
    else:
      self.grid = (r.randint(1, gm + 1), r.randint(1, gn + 1))
      self.emit(f"for i in range(pid, {gm}, g):")
      inner = "ml.range" if r.random() < 0.5 else "range"
      self.emit(f"  for j in {inner}(ml.program_id(1), {gn}, ml.num_programs(1)):")
      ind = 2
    if form == "2d":
      pass
    elif r.random() < 0.3:
      self.emit(f"  i, j = ml.grouped_ids(t, {gm}, {gn}, group={r.choice([2, 3])})")
      self.tags.add("grouped")
    else:
      self.emit(f"  i = t // {gn}")
      self.emit(f"  j = t % {gn}")
    self.load_tile(x, dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", ind, mode=mode)
    k, f = self.math(dt)
    e = lambda s: self.emit("  " * ind + s)  # noqa: E731
    e(f"y = {k.format(v='v')}")
    y = f(xv)
    o = self.out(y, dt)
    self.store_tile(o, "y", dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", ind)
    if total:
      tdt = I32 if dt == I32 else F32
      e(f"ok = {self.valid(bm, bn, M, N, f'i * {bm}', f'j * {bn}')}")
      e(f"tot += {self.total_of(dt)}")
      t = self.out(np.sum(y), tdt)
      self.emit(f"ml.atomic_add({t}, tot)")
      self.outs[-1] = (t, _cast(np.sum(y), tdt).reshape(()))
      self.tags.add("total")
    if form == "while":
      at = len(self.lines) - (1 if total else 0)
      self.lines.insert(at, "    t += g")
    self.smem_lines()

  # ------------------------------------------------------------------ family: reductions across programs
  def k_reduce(self):
    r = self.r
    bm, bn, M, N, dt = self.sizes()
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    x, xv = self.input((M, N), dt, -4, 4, half=dt != I32)
    ind = self.scheme(gm, gn)
    e = lambda s: self.emit("  " * ind + s)  # noqa: E731
    self.load_tile(x, dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", ind)
    k, f = self.math(dt)
    e(f"y = {k.format(v='v')}")
    y = f(xv)
    e(f"ok = {self.valid(bm, bn, M, N, f'i * {bm}', f'j * {bn}')}")
    tdt = I32 if dt == I32 else F32
    cast = "" if dt == I32 else ".astype(jnp.float32)"
    kinds = r.sample(["sum", "max", "rows", "cols", "ticket", "once", "last", "min"], r.randint(1, 3))
    for kind in kinds:
      self.tags.add("red:" + kind)
      if kind == "sum":
        o = self.out(np.sum(y), tdt)
        e(f"ml.atomic_add({o}, {self.total_of(dt)})")
      elif kind == "max":
        o = self.out(np.max(y), tdt)
        low = "-1000" if dt == I32 else "-1000.0"
        e(f"ml.atomic_max({o}, ml.max(ml.where(ok, y{cast}, {low})))")
      elif kind == "rows":
        o = self.out(np.sum(y, axis=1), tdt)
        e(f"ml.atomic_add({o}.at[ml.ds(i * {bm}, {bm})], ml.sum(ml.where(ok, y{cast}, 0), axis=1), "
          f"mask=i * {bm} + ml.arange({bm}) < {M})")
      elif kind == "cols":
        o = self.out(np.sum(y, axis=0), tdt)
        e(f"ml.atomic_add({o}.at[ml.ds(j * {bn}, {bn})], ml.sum(ml.where(ok, y{cast}, 0), axis=0), "
          f"mask=j * {bn} + ml.arange({bn}) < {N})")
      elif kind == "min":
        o = self.out(np.min(y, axis=1), tdt)
        high = "1000" if dt == I32 else "1000.0"
        e(f"ml.atomic_min({o}.at[ml.ds(i * {bm}, {bm})], ml.min(ml.where(ok, y{cast}, {high}), axis=1), "
          f"mask=i * {bm} + ml.arange({bm}) < {M})")
      elif kind == "once":     # a row statistic of the first column block, written by its programs alone
        o = self.out(np.sum(y[:, :bn], axis=1), tdt)
        e("if j == 0:")
        e(f"  {o}.at[ml.ds(i * {bm}, {bm})].store(ml.sum(ml.where(ok, y{cast}, 0), axis=1), "
          f"mask=i * {bm} + ml.arange({bm}) < {M})")
      elif kind == "last":     # the last program to take a ticket copies the finished sum
        tot = self.out(np.sum(y), tdt)
        cnt = self.out(np.int32(gm * gn), I32)
        fin = self.out(np.sum(y), tdt)
        e(f"ml.atomic_add({tot}, {self.total_of(dt)})")
        e(f"if ml.atomic_add({cnt}, 1) == {gm * gn - 1}:")
        e(f"  {fin}[...] = {tot}[...]" if r.random() < 0.5 else f"  ml.store({fin}, ml.atomic_add({tot}, 0))")
      else:
        o = self.out(np.int32(gm * gn), I32)
        e(f"ml.atomic_add({o}, 1)")
    self.outs = [(n, v.reshape(()) if v.ndim == 0 else v) for n, v in self.outs]
    self.smem_lines()

  # ------------------------------------------------------------------ family: split-K
  def k_splitk(self):
    r = self.r
    if r.random() < 0.35:
      return self.split_cols()
    bm, bn, M, N, dt = self.sizes(dot=True)
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    S = r.choice([2, 3, 4])
    nk = r.randint(S, 2 * S)
    K, prod = self.dot_operands(dt, M, N, nk)
    steps = _cdiv(K, self.bk)
    per = _cdiv(steps, S)
    form = r.choice(["grid3", "grid3", "flat"])
    self.tags.add("split:" + form)
    if form == "grid3":
      self.grid = (gm, gn, S)
      self.emit("i = ml.program_id(0)")
      self.emit("j = ml.program_id(1)")
      self.emit("s = ml.program_id(2)")
      self.emit(f"tile = i * {gn} + j")
    else:
      self.grid = (gm * gn * S,)
      self.emit("t = ml.program_id(0)")
      self.emit(f"s = t % {S}")
      self.emit(f"tile = t // {S}")
      self.emit(f"i = tile // {gn}")
      self.emit(f"j = tile % {gn}")
    self.dot_tile(bm, bn, dt, 0, kr=f"s * {per}, ml.minimum((s + 1) * {per}, {steps})")
    m = self.valid(bm, bn, M, N, f"i * {bm}", f"j * {bn}")
    win = f"ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})"
    if r.random() < 0.3:
      return self.stream_k(bm, bn, M, N, dt, gm, gn, steps, prod)
    comb = r.choice(["atomic", "atomic", "ticket", "ticket", "tma_reduce"])
    self.tags.add("combine:" + comb)
    if comb == "atomic":
      o = self.out(prod, F32)
      self.emit(f"ml.atomic_add({o}.at[{win}], acc, mask={m})")
    elif comb == "tma_reduce":
      o = self.out(prod, F32)
      self.lines.insert(0, f"  c_s = ml.smem(({bm}, {bn}), jnp.float32)")
      self.emit("c_s[...] = acc")
      self.emit(f"ml.copy(c_s, {o}.at[{win}], reduce=\"add\")")
    else:
      ws = self.out(prod, F32)
      cnt = self.out(np.full((gm * gn,), S), I32)
      o = self.out(np.maximum(prod, 0), F16)
      self.emit(f"ml.atomic_add({ws}.at[{win}], acc, mask={m})")
      self.emit(f"if ml.atomic_add({cnt}.at[tile], 1) == {S} - 1:")
      self.emit(f"  w = {ws}.at[{win}].load(mask={m}, other=0.0)")
      self.emit(f"  {o}.at[{win}].store(ml.maximum(w, 0.0).astype(jnp.float16), mask={m})")

  def stream_k(self, bm, bn, M, N, dt, gm, gn, steps, prod):
    """Stream-K: the (tile, k step) iterations dealt out evenly to P programs, each flushing its partial of a
    tile atomically where the tile's steps (or the program's share) end."""
    r = self.r
    del self.lines[2:]                 # (keep the operand buffers; the split's grid lines go)
    total = gm * gn * steps
    P = r.randint(2, min(8, total))
    per = _cdiv(total, P)
    self.grid = (P,)
    self.tags.add("split:streamk")
    self.emit("p = ml.program_id(0)")
    self.emit(f"start = p * {per}")
    self.emit(f"end = ml.minimum(start + {per}, {total})")
    self.emit(f"acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    self.emit("for it in range(start, end):")
    self.emit(f"  tile = it // {steps}")
    self.emit(f"  k = it % {steps}")
    self.emit(f"  i = tile // {gn}")
    self.emit(f"  j = tile % {gn}")
    bk = self.bk
    self.emit(f"  ml.copy({self.a}.at[ml.ds(i * {bm}, {bm}), ml.ds(k * {bk}, {bk})], a_s)")
    if dt == F32:
      self.emit(f"  ml.copy({self.b}.at[ml.ds(j * {bn}, {bn}), ml.ds(k * {bk}, {bk})], b_s)")
      self.emit("  acc = ml.dot(a_s, b_s.T, acc)")
    else:
      self.emit(f"  ml.copy({self.b}.at[ml.ds(k * {bk}, {bk}), ml.ds(j * {bn}, {bn})], b_s)")
      self.emit("  acc = ml.dot(a_s, b_s, acc)")
    self.emit(f"  if (k == {steps} - 1) | (it == end - 1):")
    o = self.out(prod, F32)
    self.emit(f"    ml.atomic_add({o}.at[ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})], acc, "
              f"mask={self.valid(bm, bn, M, N, f'i * {bm}', f'j * {bn}')})")
    self.emit(f"    acc = ml.zeros(({bm}, {bn}), jnp.float32)")

  def split_cols(self):
    """Column sums of an (M, N) array, the row tiles split among S programs of each column block (strided)."""
    r = self.r
    bm, bn, M, N, dt = self.sizes()
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    S = r.choice([1, 2, 3, 4])
    x, xv = self.input((M, N), dt, -4, 4, half=dt != I32)
    self.tags.add("split:cols")
    sax = r.randint(0, 1)
    self.grid = (gn, S) if sax else (S, gn)
    self.emit(f"s, j = ml.program_id({sax}), ml.program_id({1 - sax})")
    tdt = I32 if dt == I32 else F32
    self.emit(f"part = ml.zeros(({bn},), jnp.{tdt})")
    self.emit(f"for i in range(s, {gm}, ml.num_programs({sax})):")
    mode = self.load_tile(x, dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", 1,
                          mode=r.choice(["tma", "mask", "ptr"]))
    del mode
    self.emit(f"  part += ml.sum(v{'' if dt == I32 else '.astype(jnp.float32)'}, axis=0)")
    o = self.out(xv.sum(axis=0), tdt)
    self.emit(f"ml.atomic_add({o}.at[ml.ds(j * {bn}, {bn})], part, mask=j * {bn} + ml.arange({bn}) < {N})")
    self.smem_lines()

  # ------------------------------------------------------------------ family: locks and flags (stream-K)
  def k_lock(self):
    r = self.r
    bm = r.choice([8, 16, 32, 64, 128])
    bn = r.choice([32, 64, 128, 256])
    dt = r.choice([F32, F16, I32])
    P = r.choice([2, 3, 4, 6, 8, 8, 132])      # (132: mg.num_sms(), a persistent grid, all programs resident)
    if P == 132:
      bm, bn = min(bm, 16), min(bn, 64)
    M = P * bm - (r.randint(1, bm - 1) if r.random() < 0.3 and bm > 1 else 0)
    x, xv = self.input((M, bn), dt, -4, 4, half=dt != I32)
    tdt = I32 if dt == I32 else F32
    self.grid = (P,)
    self.emit("p = ml.program_id(0)")
    self.load_tile(x, dt, bm, bn, M, bn, f"p * {bm}", "0", "", 0, mode=r.choice(["tma", "mask", "ptr"]))
    self.emit(f"part = ml.sum(v{'' if dt == I32 else '.astype(jnp.float32)'}, axis=0)")
    parts = [np.pad(xv, ((0, P * bm - M), (0, 0)))[q * bm:(q + 1) * bm].sum(axis=0) for q in range(P)]
    if r.random() < 0.6 or P % 2:
      G = r.choice([g for g in (1, 2, 3) if g <= P])
      self.tags.add("lock")
      acc = self.out(np.stack([sum(parts[q] for q in range(P) if q % G == g) if g < P else np.zeros(bn)
                               for g in range(G)]), tdt)
      lock = self.out(np.array([0] * G + [1 if g < P else 0 for g in range(G)]), I32)
      self.emit(f"g = p % {G}")
      self.emit(f"while ml.atomic_cas({lock}.at[g], 0, 1) == 1:")
      self.emit("  pass")
      self.emit(f"if {lock}[g + {G}] == 0:")
      self.emit(f"  ml.atomic_xchg({lock}.at[g + {G}], 1)")
      self.emit("else:")
      self.emit(f"  part += {acc}.at[g, :][...]")
      self.emit(f"{acc}.at[g, :][...] = part")
      self.emit(f"ml.atomic_xchg({lock}.at[g], 0)")
      return self.smem_lines()
    self.tags.add("flags")
    ws = self.out(np.stack(parts), tdt)
    flags = self.out(np.ones(P), I32)
    o = self.out(np.stack([parts[q] + parts[q + 1] for q in range(0, P, 2)]), tdt)
    self.emit(f"{ws}.at[p, :][...] = part")
    self.emit(r.choice([f"ml.atomic_xchg({flags}.at[p], 1)", f"ml.atomic_add({flags}.at[p], 1, sem=\"release\")"]))
    self.emit("if p % 2 == 0:")
    self.emit(f"  while ml.atomic_cas({flags}.at[p + 1], 1, 1) != 1:")
    self.emit("    pass")
    self.emit(f"  {o}.at[p // 2, :][...] = part + {ws}.at[p + 1, :][...]")
    self.smem_lines()


# ---------------------------------------------------------------------- running
EXPECT = {"race": ("MG951",), "uncovered": ("MG602",), "race+uncovered": ("MG951", "MG602"),
          "read": ("MG951", "MG601")}


def compare(got, want, dot=False):
  """Exact inputs: every output is the reference up to float32's last bits (diff_fuzz's rule, sums not dots)."""
  del dot
  return diff_fuzz.compare(got, want)


def run(gen, *, build=True):
  """(class, detail): diff_fuzz.run's, where an `overlap` plan whose writes two programs share (or leave some
  element unwritten) must be refused with MG951 (MG602): refused so it is "ok", accepted "wrong"."""
  cls, detail = diff_fuzz.run(gen, build=build and not gen.race, compare=compare)
  if gen.race:
    code = detail.split()[0] if cls == "refused" else None
    if code in EXPECT[gen.race]:
      return "ok", f"refused as expected: {detail}"
    if cls in ("ok", "wrong"):
      return "wrong", f"{gen.race} accepted" + (f" ({detail})" if detail else "")
  return cls, detail


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  fam = sys.argv[3] if len(sys.argv) > 3 and not sys.argv[3].startswith("-") else None
  for s in range(lo, hi):
    g = Gen(s, family=fam)
    cls, detail = run(g, build="--build" in sys.argv or s % 5 == 0)
    print(f"SEED {s} {cls} {g.family} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
