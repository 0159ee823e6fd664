"""Probe 61c's differential fuzzer of tensor-core operands in flight: the shapes tests/async_fuzz.py (probe 61a) does
not draw (design note 205).

`Gen(seed)` draws a plan and writes the kernel and its NumPy reference from it (never from interpret mode):

- the operand dtype: float16, bfloat16, float32 (TF32: a register A the compiler stages through SMEM), int8 (int32
  accumulator) and float8_e4m3fn / float8_e5m2 (their 8-bit register A layout, lowering/mma.py `_eight_bit_a`); B
  K-major (`b_s.T` of an (n, k) buffer) where the tensor cores read it so;
- the warpgroups: one (64 or 128 rows) or several (block=256 with 128 rows, block=384 with 192 rows: the tile split by
  rows, 64 a warpgroup);
- the loop: `ml.range(n, stages=2..3)`, a plain `range`, `lax.fori_loop` and a `while` loop carrying the accumulator,
  a pipelined loop whose body issues its dots in an `ml.static_range(2)` over halves of the block; forced only
  (`loop="ws"` / `"pingpong"`, probe 62b's `WS_LOOPS`, not in `LOOPS`, so that earlier seeds draw what they drew):
  `warp_specialize=True` and ping-pong (block=256);
- A: by TMA (the control), loaded, masked-loaded, a slice of a wider loaded window (`w[:, :bk]` or `w[:, bk:]`), a
  concatenation of two loaded halves (along k or along rows), `jnp.where` of a loaded tile and a mask;
- the accumulator: chained, `acc += ml.dot(...)`, a fresh product each trip;
- epilogues that read the accumulator under masks (`ml.where` of a column mask, a masked store, a masked row sum).

Inputs are small whole numbers (int8) or multiples of 1/2 (floats: exact in float8 too), so every product and sum is
exact and only the epilogue's cast rounds. `run(gen)` classifies as tests/async_fuzz.py does (MG951 is "race").
Deterministic.
"""
from __future__ import annotations

import sys

import numpy as np

import async_fuzz
import dot_fuzz

F16, BF16, F32, E4, E5, I8, I32 = "float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "int8", "int32"
KMAJOR = (F32, E4, E5, I8)
DTYPES = [F16, BF16, F32, F32, E4, E5, I8, I8]
LOOPS = ["stages"] * 4 + ["plain", "fori", "while", "static", "static"]
WS_LOOPS = ["ws", "pingpong"]          # (drawn by ws_gen: probe 62b)
A_MODES = ["tma", "load", "masked", "slice", "slice", "concat", "concat", "where", "where", "carried"]
ACC_MODES = ["chain", "chain", "plus", "fresh", "old"]
EPILOGUES = ["plain", "where", "masked", "rowsum", "mid"]
WARPGROUPS = [1, 1, 2, 3]


class Gen(dot_fuzz.Gen):
  """One random kernel (`source`, `args`, `refs`, `tags`) from the plan of `seed` (keywords force a choice)."""

  def __init__(self, seed, dt=None, loop=None, a_mode=None, acc_mode=None, epi=None, wgs=None):
    self._start(seed)
    self.family = "async2"
    r = self.r
    self.dt = dt or r.choice(DTYPES)
    self.loop = loop or r.choice(LOOPS)
    self.a_mode = a_mode or r.choice(A_MODES)
    self.acc_mode = acc_mode or r.choice(ACC_MODES)
    self.epi = epi or r.choice(EPILOGUES)
    self.wgs = wgs or r.choice(WARPGROUPS)
    if self.loop == "pingpong":      # (two compute warpgroups taking turns: block=256, 128 rows)
      self.wgs = 2
    self.build()

  def build(self):
    r = self.r
    dt, loop, a_mode, acc_mode, epi, wgs = self.dt, self.loop, self.a_mode, self.acc_mode, self.epi, self.wgs
    eight = dt in (E4, E5, I8)
    acc_dt = I32 if dt == I8 else F32
    bm = {1: r.choice([64, 128]), 2: 128, 3: 192}[wgs]
    self.block = {1: None, 2: 256, 3: 384}[wgs]
    bn = r.choice([16, 32, 64, 64, 128])
    unit = {F16: 16, BF16: 16, F32: 8, E4: 32, E5: 32, I8: 32}[dt]    # one instruction's k
    halves = loop == "static" or a_mode == "concat"
    bk = r.choice([1, 2, 2, 4]) * unit
    if halves and bk < 2 * unit:
      bk = 2 * unit
    if dt == F32 and bk > 32 or eight and bk > 128:
      bk //= 2
    nk = r.randint(1, 4)
    gm = r.randint(1, 2)
    M, K, N = gm * bm, nk * bk, bn
    if a_mode == "masked":
      M -= r.randint(0, bm - 1)
    self.tags |= {f"loop:{loop}", f"a:{a_mode}", f"acc:{acc_mode}", f"dt:{dt}", f"epi:{epi}", f"wg:{wgs}"}
    lo, hi, half = (-8, 8, False) if dt == I8 else (-7, 7, True)
    # inputs: A (wider by bk for a slice's window), B stored (k, n) or (n, k)
    shift = r.choice([0, bk]) if a_mode == "slice" else 0
    an, av = self.input((M, K + bk) if a_mode == "slice" else (M, K), dt, lo, hi, half)
    A = av[:, shift:shift + K]
    kmajor = dt in KMAJOR
    bname, bv = self.input((N, K) if kmajor else (K, N), dt, lo, hi, half)
    B = bv.T if kmajor else bv
    cond_rows = r.choice(["even", "low"])
    if a_mode == "where":           # jnp.where(mask, w, 0): rows kept by the mask
      keep = (np.arange(M) % 2 == 0) if cond_rows == "even" else (np.arange(M) % bm < bm // 2)
      A = np.where(keep[:, None], A, 0)
    # the reference
    acc = np.zeros((M, N))
    ncol = r.randint(1, N)
    mx = np.full((M,), -np.inf)
    for k in range(nk):
      ab = A[:, k * bk:(k + 1) * bk] if a_mode != "carried" else A[:, :bk] * (-1 if dt == I8 else 0.5) ** k
      prod = ab @ B[k * bk:(k + 1) * bk]
      if acc_mode == "old":     # the row max of the value before each dot (its kept columns)
        mx = np.maximum(mx, acc[:, :ncol].max(axis=1))
      acc = prod if acc_mode == "fresh" else acc + prod
      if epi == "mid":          # the row max of the kept columns after each dot
        mx = np.maximum(mx, acc[:, :ncol].max(axis=1))
    # --- the kernel
    self.grid = (gm,)
    e = self.emit
    e("i = ml.program_id(0)")
    r0 = f"i * {bm}"
    if a_mode == "tma":
      e(f"a_s = ml.smem(({bm}, {bk}), jnp.{dt})")
    e(f"b_s = ml.smem(({bn}, {bk}), jnp.{dt})" if kmajor else f"b_s = ml.smem(({bk}, {bn}), jnp.{dt})")
    zero = f"ml.zeros(({bm}, {bn}), jnp.{acc_dt})"
    e(f"acc = {zero}")
    cm = f"(ml.arange({bn}) < {ncol})[None, :]"
    low = "-2147483647" if dt == I8 else "-jnp.inf"
    if acc_mode == "old" or epi == "mid":
      e(f"mx = ml.full(({bm},), {low}, jnp.{acc_dt})")
    if a_mode == "carried":
      e(f"a_reg = {an}.at[ml.ds({r0}, {bm}), ml.ds(0, {bk})][...]")
    ind = "  "
    if loop == "fori":
      carry = ["acc"] + (["mx"] if acc_mode == "old" or epi == "mid" else []) + (["a_reg"] if a_mode == "carried" else [])
      e(f"def body(k, {', '.join(carry)}):")
    elif loop == "while":
      e("k = 0")
      e(f"while k < {nk}:")
    else:
      head = {"stages": f"ml.range({nk}, stages={r.choice([2, 2, 3])})", "plain": f"range({nk})",
              "static": f"ml.range({nk}, stages={r.choice([2, 3])})",
              "ws": f"ml.range({nk}, stages={r.choice([2, 3])}, warp_specialize=True)",
              "pingpong": f"ml.range({nk}, stages=2, warp_specialize=True, pingpong=True)"}[loop]
      e(f"for k in {head}:")
    g = lambda s: e(ind + s)  # noqa: E731
    bwin = f"ml.ds(0, {bn}), ml.ds(k * {bk}, {bk})" if kmajor else f"ml.ds(k * {bk}, {bk}), ml.ds(0, {bn})"
    g(f"ml.copy({bname}.at[{bwin}], b_s)")
    rows = f"ml.ds({r0}, {bm})"
    win = f"{an}.at[{rows}, ml.ds(k * {bk}, {bk})]"
    h = bk // 2
    if a_mode == "tma":
      g(f"ml.copy({win}, a_s)")
      aop = "a_s"
    elif a_mode == "load":
      g(f"av = {win}[...]")
      aop = "av"
    elif a_mode == "masked":
      g(f"av = {win}.load(mask=({r0} + ml.arange({bm}))[:, None] < {M}, other=0)")
      aop = "av"
    elif a_mode == "slice":
      g(f"w = {an}.at[{rows}, ml.ds(k * {bk}, {2 * bk})][...]")
      g(f"av = w[:, {shift}:{shift + bk}]" if r.random() < 0.5 else
        f"av = w[:, {':' + str(bk) if shift == 0 else str(bk) + ':'}]")
      aop = "av"
    elif a_mode == "concat":
      if r.random() < 0.5 or wgs > 1:
        g(f"w0 = {an}.at[{rows}, ml.ds(k * {bk}, {h})][...]")
        g(f"w1 = {an}.at[{rows}, ml.ds(k * {bk} + {h}, {h})][...]")
        g(r.choice(["av = ml.concatenate([w0, w1], axis=1)", "av = jnp.concatenate([w0, w1], axis=-1)"]))
      else:
        g(f"w0 = {an}.at[ml.ds({r0}, {bm // 2}), ml.ds(k * {bk}, {bk})][...]")
        g(f"w1 = {an}.at[ml.ds({r0} + {bm // 2}, {bm // 2}), ml.ds(k * {bk}, {bk})][...]")
        g(r.choice(["av = ml.concatenate([w0, w1], axis=0)", "av = jnp.concatenate([w0, w1])"]))
      aop = "av"
    elif a_mode == "carried":
      aop = "a_reg"
    else:   # where
      g(f"w = {win}[...]")
      m = f"(ml.arange({bm}) % 2 == 0)[:, None]" if cond_rows == "even" else f"(ml.arange({bm}) < {bm // 2})[:, None]"
      g(r.choice([f"av = jnp.where({m}, w, 0)", f"av = ml.where({m}, w, ml.zeros_like(w))"]))
      aop = "av"
    bop = "b_s.T" if kmajor else "b_s"
    outdt = f", out_dtype=jnp.{acc_dt}" if dt == I8 else ""
    if loop == "static":       # the block's two halves, each its own dot, unrolled
      if aop == "a_s":
        g("a_all = a_s[...]")
        aop = "a_all"
      if acc_mode == "old":
        g("old = acc")
      g("for hh in ml.static_range(2):")
      ah = f"{aop}[:, hh * {h}:(hh + 1) * {h}]"
      if r.random() < 0.5:      # B's half read into registers (staged again by the compiler)
        bh = f"b_s[...][:, hh * {h}:(hh + 1) * {h}].T" if kmajor else f"b_s[...][hh * {h}:(hh + 1) * {h}, :]"
      else:                     # B's half as a view of the SMEM buffer
        bh = f"b_s.at[:, ml.ds(hh * {h}, {h})].T" if kmajor else f"b_s.at[ml.ds(hh * {h}, {h}), :]"
      if acc_mode == "fresh":
        g(f"  part = ml.dot({ah}, {bh}{outdt}) if hh == 0 else ml.dot({ah}, {bh}, part)")
        g("  if hh == 1:")
        g("    acc = part")
      elif acc_mode == "plus":
        g(f"  acc += ml.dot({ah}, {bh}{outdt})")
      else:     # chain (and old)
        g(f"  acc = ml.dot({ah}, {bh}, acc)")
    elif acc_mode == "fresh":
      g(f"acc = ml.dot({aop}, {bop}{outdt})")
    elif acc_mode == "plus":
      g(f"acc += ml.dot({aop}, {bop}{outdt})")
    else:
      if acc_mode == "old":
        g("old = acc")
      g(f"acc = ml.dot({aop}, {bop}, acc)")
    if acc_mode == "old":
      g(f"mx = ml.maximum(mx, ml.max(ml.where({cm}, old, {low}), axis=1))")
    if epi == "mid":
      g(f"mx = ml.maximum(mx, ml.max(ml.where({cm}, acc, {low}), axis=1))")
    if a_mode == "carried":
      g("a_reg = -a_reg" if dt == I8 else f"a_reg = (a_reg.astype(jnp.float32) * 0.5).astype(jnp.{dt})")
    if loop == "fori":
      carry = ["acc"] + (["mx"] if acc_mode == "old" or epi == "mid" else []) + (["a_reg"] if a_mode == "carried" else [])
      g(f"return {', '.join(carry)}" if len(carry) > 1 else "return acc")
      if len(carry) > 1:
        e(f"{', '.join(carry)} = lax.fori_loop(0, {nk}, lambda k, c: body(k, *c), ({', '.join(carry)}))")
      else:
        e(f"acc = lax.fori_loop(0, {nk}, body, acc)")
    elif loop == "while":
      g("k += 1")
    # epilogue: the accumulator read under masks (rows past M, of a masked A, are not stored)
    odt = F32 if dt != I8 else r.choice([I32, F32])
    cast = "" if odt == acc_dt else f".astype(jnp.{odt})"
    ragged = M < gm * bm
    e(f"rr = {r0} + ml.arange({bm})")
    tile = f"ml.ds({r0}, {bm}), ml.ds(0, {bn})"
    if epi == "plain":
      o = self.output(acc, odt)
      e(f"{o}.at[{tile}].store(acc{cast}, mask=rr[:, None] < {M})" if ragged else f"{o}[{tile}] = acc{cast}")
    elif epi == "where":
      o = self.output(np.where(np.arange(N)[None, :] < ncol, acc, -1), odt)
      e(f"y = ml.where({cm}, acc, -1){cast}")
      e(f"{o}.at[{tile}].store(y, mask=rr[:, None] < {M})" if ragged else f"{o}[{tile}] = y")
    elif epi == "masked":      # the output has the kept columns only
      o = self.output(acc[:, :ncol], odt)
      e(f"{o}.at[{tile}].store(acc{cast}, mask=(rr[:, None] < {M}) & {cm})")
    elif epi == "mid" or acc_mode == "old" and epi == "rowsum":     # the running masked row max
      ref = mx if dt != I8 else np.where(np.isinf(mx), -2147483647, mx)
      o = self.output(ref, odt)
      e(f"{o}.at[ml.ds({r0}, {bm})].store(mx{cast}, mask=rr < {M})" if ragged else f"{o}[ml.ds({r0}, {bm})] = mx{cast}")
    else:   # rowsum of the kept columns
      o = self.output(np.where(np.arange(N)[None, :] < ncol, acc, 0).sum(axis=1), odt)
      e(f"s = ml.sum(ml.where({cm}, acc, 0), axis=1)")
      e(f"{o}.at[ml.ds({r0}, {bm})].store(s{cast}, mask=rr < {M})" if ragged else f"{o}[ml.ds({r0}, {bm})] = s{cast}")
    self.tol_dtype = odt


def ws_gen(seed):
  """Probe 62b's focused draw: a warp-specialised or ping-pong loop with an 8-bit (int8, float8) or TF32 operand,
  A from registers (loaded, masked, sliced, concatenated, selected, carried) or by TMA (the control)."""
  import random
  r = random.Random(seed * 7919 + 62)
  return Gen(seed, dt=r.choice([I8, E4, E5, F32]), loop=r.choice(WS_LOOPS),
             a_mode=r.choice(["load", "masked", "slice", "concat", "where", "carried", "tma"]))


def compare(got, want, tol_dtype=None):
  return dot_fuzz.compare(got, want, tol_dtype)


def run(gen, *, build=True):
  """(class, detail): tests/async_fuzz.py's classes ("race" for interpret mode's MG951)."""
  return async_fuzz.run(gen, build=build)


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  every = int(sys.argv[3]) if len(sys.argv) > 3 else 1      # export one seed in `every`
  draw = ws_gen if "ws" in sys.argv[4:] else Gen              # (`... ws`: probe 62b's warp-specialised draw)
  for s in range(lo, hi):
    gen = draw(s)
    cls, detail = run(gen, build=(s % every == 0))
    print(f"SEED {s} {cls} {sorted(gen.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
