"""Probe 60a's differential fuzzer of tensor-core-structured kernels: random kernels around `ml.dot` / `jnp.dot` /
`@` as Triton and Pallas users write them.

`Gen(seed)` draws a plan (a family, dtypes, tile and array sizes, how each operand reaches the tensor cores, the
loop, the epilogue) and writes from it the kernel's source and its NumPy reference, computed from the plan itself
(never from interpret mode). Families:

- `gemm`: one (bm, bn) tile a program of an (M, K) @ (K, N) product: float16, bfloat16, float32 (TF32), float8_e4m3fn,
  float8_e5m2 and int8 (int32 accumulator) operands; A stored (m, k) or (k, m) and read as `a_s.T`, B stored (k, n)
  or (n, k) and read as `b_s.T`; operands copied by TMA windows, loaded by Triton's pointer grids or masked `ml.ds`
  windows into registers (the compiler stages them), or read from SMEM into registers (`a_s[...]`); K in one block
  or a loop (`range`, `ml.range`, stages, warp specialisation) with a ragged last block; M and N from a few rows to
  multi-warpgroup tiles (block=128/256/384), ragged at the array's end; batched grids; split-K over a grid axis with
  the partial sums added by atomics or TMA reductions; epilogues (bias per row or column, scales per row, column
  or tensor, activations, casts to 16-bit, masked, pointer, TMA and transposed stores); `out_dtype=` and
  `preferred_element_type=`, `acc += ml.dot(...)`, `jnp.dot` and `@` spellings.
- `chain`: attention-like `p @ v` after `q @ k.T` over a loop of key blocks, p a converted accumulator (A from
  registers), K or V stored either way.
- `pallas`: Pallas-style whole-ref reads, `jnp.dot(x, w, preferred_element_type=...)`, `x @ w`, `lax.dot_general`
  and `jnp.einsum` of register tiles, small odd tiles.

Inputs are small multiples of 1/2 (whole numbers for int8 and float16 accumulators), exact in every operand dtype
(float8_e5m2 included), so the products and their sums are exact and only the epilogue rounds: the reference is
float64 math, rounded where the kernel rounds (a cast of an accumulator to 16-bit operands, the output dtype).
`run(gen)` classifies as tests/diff_fuzz.py does ("ok", "wrong", "crash", "refused", "build"); comparisons are
tests/mem_fuzz.py's `compare` with `dot=True` at the output's dtype. Deterministic.
"""
from __future__ import annotations

import random
import sys

import jax.numpy as jnp
import numpy as np

import diff_fuzz
import mem_fuzz

F16, BF16, F32, E4, E5, I8, I32 = "float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "int8", "int32"
ISZ = {F16: 2, BF16: 2, F32: 4, E4: 1, E5: 1, I8: 1, I32: 4}
KMAJOR = (F32, E4, E5, I8)      # read K-major by the tensor cores: B passed as `b_s.T` of an (n, k) buffer
SIXTEEN = (F16, BF16)


def _np(dt):
  return jnp.dtype(dt)


def _cdiv(a, b):
  return -(-a // b)


def _round(x, dt):
  """float64 `x` rounded to `dt` as a cast in the kernel rounds it (saturating for float8), back in float64."""
  if dt in (E4, E5):
    lim = float(jnp.finfo(_np(dt)).max)
    x = np.clip(x, -lim, lim)
  return np.asarray(x, np.float32).astype(_np(dt)).astype(np.float64)


ACTS = {
    "relu": ("jax.nn.relu({v})", lambda y: np.maximum(y, 0)),
    "maximum": ("jnp.maximum({v}, 0.0)", lambda y: np.maximum(y, 0)),
    "silu": ("jax.nn.silu({v})", lambda y: y / (1 + np.exp(-y))),
    "gelu": ("jax.nn.gelu({v})", lambda y: 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))),
    "tanh": ("jnp.tanh({v})", np.tanh),
    "sigmoid": ("jax.nn.sigmoid({v})", lambda y: 1 / (1 + np.exp(-y))),
}


class Gen:
  """One random tensor-core kernel (`source`, `args`, `refs`, `tags`) from the plan of `seed`."""

  FAMILIES = ["gemm"] * 6 + ["chain"] * 2 + ["pallas"] * 2

  def __init__(self, seed, family=None):
    self._start(seed)
    self.family = family or self.r.choice(self.FAMILIES)
    getattr(self, "k_" + self.family)()

  def _start(self, seed):
    """The plan's random streams and an empty kernel (the fuzzers built on this one start the same way)."""
    self.seed = seed
    self.r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.ins, self.outs, self.lines, self.tags = [], [], [], {"dot"}
    self.grid, self.block, self.tol_dtype = (1,), None, None

  # ------------------------------------------------------------------ values
  def input(self, shape, dt, lo=-7, hi=7, half=True):
    """An input of whole numbers in [lo, hi] (halved for floats where `half`): exact in every operand dtype."""
    name = f"x{len(self.ins)}"
    v = self.rng.integers(lo, hi + 1, shape).astype(np.float64)
    if half and dt not in (I8, I32):
      v = v / 2
    self.ins.append((name, v.astype(np.float32).astype(_np(dt))))
    return name, v

  def output(self, ref, dt):
    name = f"o{len(self.outs)}"
    self.outs.append((name, np.asarray(ref, np.float64).astype(np.float32).astype(_np(dt)) if dt != I32
                      else np.asarray(ref).astype(np.int32)))
    return name

  def emit(self, line):
    self.lines.append("  " + line)

  @property
  def source(self):
    ins = ", ".join(n for n, _ in self.ins)
    outs = ", ".join(n for n, _ in self.outs)
    specs = ", ".join(f"S({tuple(v.shape)}, jnp.{jnp.dtype(v.dtype).name})" for _, v in self.outs)
    block = f", block={self.block}" if self.block else ""
    src = diff_fuzz.HEADER + f"\n\n@mg.mgpu_kernel(out_shape=lambda *a: ({specs},), grid={self.grid}{block})\n"
    return src + f"def kernel({ins}, {outs}):\n" + "\n".join(self.lines) + "\n"

  @property
  def args(self):
    return [jnp.asarray(a) for _, a in self.ins]

  @property
  def refs(self):
    return [v for _, v in self.outs]

  # ------------------------------------------------------------------ pieces shared by the families
  def _aligned(self, n, dt, unit_bytes=16):
    """`n` rounded up to whole `unit_bytes` of `dt` (an array's rows 16 bytes apart, as TMA needs)."""
    u = max(1, unit_bytes // ISZ[dt])
    return _cdiv(n, u) * u

  def _tile_rows(self):
    r = self.r
    bm = r.choice([8, 16, 32, 48, 64, 64, 64, 128, 128, 128, 192, 256])
    block = None
    if bm == 128 and r.random() < 0.5:
      block = 256
    elif bm == 192:
      block = 384
    elif bm == 256:
      block = r.choice([256, 256, 384]) if r.random() < 0.8 else 256
    return bm, block

  def _epilogue(self, acc, acc_ref, acc_dt, bm, bn, M, N, rows_at, cols_at, pb, pre, split=False, out_t=False):
    """The epilogue of an (bm, bn) accumulator `acc` (reference `acc_ref`, the whole (…, M, N) product): bias,
    scales, activation, cast and store. Returns nothing; adds the output."""
    r = self.r
    y, ref = acc, acc_ref
    linear_only = split
    if acc_dt == I32 and r.random() < 0.4 and not split:
      odt = I32
    else:
      odt = r.choice([F32, F32, F16, BF16]) if not split else F32
    if odt != I32:
      if acc_dt != F32:
        y = f"{acc}.astype(jnp.float32)"
      if r.random() < 0.35 and not linear_only:        # bias per column (N,) or per row (M,)
        if r.random() < 0.7:
          bn_, bv = self.input((N,), F32)
          self.emit(f"bias = ml.load({bn_}.at[ml.ds({cols_at}, {bn})], mask={cols_at} + ml.arange({bn}) < {N}, "
                    "other=0.0)")
          y, ref = f"({y} + bias[None, :])", ref + bv[None, :]
          self.tags.add("bias_col")
        else:
          bn_, bv = self.input((M,), F32)
          self.emit(f"bias = ml.load({bn_}.at[ml.ds({rows_at}, {bm})], mask={rows_at} + ml.arange({bm}) < {M}, "
                    "other=0.0)")
          y, ref = f"({y} + bias[:, None])", ref + bv[:, None]
          self.tags.add("bias_row")
      if r.random() < 0.35:                            # scales: per row, per column, per tensor
        kind = r.choice(["row", "col", "tensor"])
        self.tags.add("scale_" + kind)
        if kind == "tensor":
          sn, sv = self.input((1,), F32, 1, 4)
          y, ref = f"({y} * {sn}[0])", ref * sv[0]
        elif kind == "row":
          sn, sv = self.input((M,), F32, 1, 4)
          self.emit(f"rs = ml.load({sn}.at[ml.ds({rows_at}, {bm})], mask={rows_at} + ml.arange({bm}) < {M}, "
                    "other=0.0)")
          y, ref = f"({y} * rs[:, None])", ref * sv[:, None]
        else:
          sn, sv = self.input((N,), F32, 1, 4)
          self.emit(f"cs = ml.load({sn}.at[ml.ds({cols_at}, {bn})], mask={cols_at} + ml.arange({bn}) < {N}, "
                    "other=0.0)")
          y, ref = f"({y} * cs[None, :])", ref * sv[None, :]
      if r.random() < 0.3 and not linear_only:
        act = r.choice(sorted(ACTS))
        self.tags.add("act_" + act)
        y = f"{ACTS[act][0].format(v=f'({y} * 0.0625)')}"
        ref = ACTS[act][1](np.asarray(ref * 0.0625, np.float32).astype(np.float64))
      if odt != F32:
        y = r.choice([f"({y}).astype(jnp.{odt})", f"({y}).astype({{o}}.dtype)", f"({y}).to(jnp.{odt})"])
    elif acc_dt != I32:
      y = f"{acc}.astype(jnp.int32)"
    self.tol_dtype = odt if odt != I32 else None
    full = ref
    store = r.choice(["mask", "mask", "ptr", "tma", "tma_t"]) if not split else r.choice(["atomic", "atomic",
                                                                                          "tma_reduce"])
    last = M if not out_t else N
    width = N if not out_t else M
    if store in ("tma", "tma_reduce") and (N * ISZ[odt]) % 16:
      store = "mask" if store == "tma" else "atomic"
    if store == "tma_t" and ((M * ISZ[odt]) % 16 or bm * bn > 128 * 128):
      store = "mask"
    del last, width
    oshape = pre + ((N, M) if store == "tma_t" else (M, N))
    oref = np.swapaxes(full, -1, -2) if store == "tma_t" else full
    o = self.output(oref, odt)
    y = y.replace("{o}", o)
    self.tags.add("store_" + store)
    self.emit(f"y = {y}")
    del oshape
    if store == "mask":
      self.emit(f"rows = {rows_at} + ml.arange({bm})")
      self.emit(f"cols = {cols_at} + ml.arange({bn})")
      self.emit(f"{o}.at[{pb}ml.ds({rows_at}, {bm}), ml.ds({cols_at}, {bn})].store(y, "
                f"mask=(rows[:, None] < {M}) & (cols[None, :] < {N}))")
    elif store == "ptr":
      self.emit(f"rows = {rows_at} + ml.arange({bm})")
      self.emit(f"cols = {cols_at} + ml.arange({bn})")
      self.emit(f"ml.store({o}.at[{pb}rows[:, None], cols[None, :]], y, mask=(rows[:, None] < {M}) & "
                f"(cols[None, :] < {N}))")
    elif store == "tma":
      self.emit(f"c_s = ml.smem(({bm}, {bn}), jnp.{odt})")
      self.emit("c_s[...] = y")
      self.emit(f"ml.copy(c_s, {o}.at[{pb}ml.ds({rows_at}, {bm}), ml.ds({cols_at}, {bn})])")
    elif store == "tma_t":
      self.emit(f"c_s = ml.smem(({bn}, {bm}), jnp.{odt})")
      self.emit("c_s[...] = y.T")
      self.emit(f"ml.copy(c_s, {o}.at[{pb}ml.ds({cols_at}, {bn}), ml.ds({rows_at}, {bm})])")
    elif store == "atomic":
      self.emit(f"rows = {rows_at} + ml.arange({bm})")
      self.emit(f"cols = {cols_at} + ml.arange({bn})")
      self.emit(f"ml.atomic_add({o}.at[{pb}ml.ds({rows_at}, {bm}), ml.ds({cols_at}, {bn})], y, "
                f"mask=(rows[:, None] < {M}) & (cols[None, :] < {N}))")
    else:
      self.emit(f"c_s = ml.smem(({bm}, {bn}), jnp.float32)")
      self.emit("c_s[...] = y")
      self.emit(f"ml.copy(c_s, {o}.at[{pb}ml.ds({rows_at}, {bm}), ml.ds({cols_at}, {bn})], reduce=\"add\")")

  @staticmethod
  def _stages(want, stage_bytes, budget=200 * 1024):
    """`want` stages, fewer where their buffers (`stage_bytes`: a stage's, the rest's) pass the SMEM budget (at
    least 2, as a pipeline needs)."""
    per, rest = stage_bytes
    return max(2, min(want, (budget - rest) // per))

  # ------------------------------------------------------------------ family: a tiled GEMM
  def k_gemm(self):
    r = self.r
    dt = r.choice([F16, F16, BF16, BF16, F32, E4, E5, I8])
    acc_dt = I32 if dt == I8 else (F16 if dt in (F16, E4, E5) and r.random() < 0.15 else F32)
    bm, block = self._tile_rows()
    per_wg = bm // max(1, (block or 128) // 128)
    bn = r.choice([8, 16, 24, 32, 48, 64, 64, 96, 128, 128, 192, 256])
    while max(per_wg, 64) * bn > 128 * 128 or (dt == I8 and bn % 16 and bn not in (8, 24)):
      bn = r.choice([16, 32, 64, 128])
    bk = {1: r.choice([32, 64, 128]), 2: r.choice([16, 32, 64, 64, 128]), 4: r.choice([8, 16, 32, 32, 64])}[ISZ[dt]]
    while (bm * bk + bk * bn) * ISZ[dt] * 2 > 128 * 1024 and bk * ISZ[dt] > 32:
      bk //= 2                 # (two stages of both operands within the SMEM budget: else MG402, a right refusal)
    kmajor = dt in KMAJOR
    # how each operand arrives: TMA into SMEM, a pointer grid or masked window into registers, or SMEM read back
    a_mode = r.choice(["tma", "tma", "tma", "ptr", "win", "smem_regs"])
    b_mode = r.choice(["tma", "tma", "tma", "ptr", "win"])
    at = a_mode == "tma" and not kmajor and r.random() < 0.25
    bt = (b_mode == "tma" and (kmajor or r.random() < 0.35)) or (b_mode != "tma" and r.random() < 0.2)
    if a_mode == "smem_regs" and dt in (F32,):
      a_mode = "tma"
    tma_a, tma_b = a_mode in ("tma", "smem_regs"), b_mode == "tma"
    loop = r.choice(["one", "range", "mlrange", "stages", "stages", "ws"])
    if loop == "ws" and not (tma_a and tma_b and a_mode == "tma"):
      loop = "stages" if tma_a or tma_b else "range"
    if loop == "stages" and not (tma_a or tma_b):
      loop = "mlrange"
    split = 0 if loop == "one" or acc_dt != F32 and dt != I8 else r.choice([0, 0, 0, 0, 2, 3])
    if dt == I8:
      split = 0
    batch = 0 if split else r.choice([0, 0, 0, 2])
    # sizes: M, N from a few rows to several tiles, ragged; K ragged in its last block
    M = r.randint(1, 3 * bm)
    N = r.randint(1, 3 * bn)
    nk = 1 if loop == "one" else r.randint(1, 4)
    K = r.randint(max(1, (nk - 1) * bk + 1), nk * bk)
    if tma_a or tma_b or True:          # rows of every array 16 bytes apart (TMA; pointer loads do not need it)
      K = self._aligned(K, dt)
      if (not bt and tma_b) or (at and tma_a):
        N, M = (self._aligned(N, dt), self._aligned(M, dt) if at else M)
    if split:
      K = self._aligned(max(K, split * bk), dt)
    if acc_dt == F16:
      lo, hi, half = -2, 2, False
    elif dt == I8:
      lo, hi, half = -8, 8, False
    else:
      lo, hi, half = -7, 7, True
    pre = (batch,) if batch else ()
    a, av = self.input(pre + ((K, M) if at else (M, K)), dt, lo, hi, half)
    b, bv = self.input(pre + ((N, K) if bt else (K, N)), dt, lo, hi, half)
    A = np.swapaxes(av, -1, -2) if at else av
    B = np.swapaxes(bv, -1, -2) if bt else bv
    prod = A @ B
    self.tags |= {f"dt:{dt}", f"acc:{acc_dt}", f"a:{a_mode}", f"b:{b_mode}", f"loop:{loop}"}
    self.tags |= {t for t, on in [("at", at), ("bt", bt), ("batch", batch), (f"split{split}", split),
                                  (f"block{block}", block)] if on}
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    self.grid = (gm, gn) + ((batch,) if batch else ()) + ((split,) if split else ())
    self.block = block
    self.emit("i = ml.program_id(0)")
    self.emit("j = ml.program_id(1)")
    pb = ""
    if batch:
      self.emit("z = ml.program_id(2)")
      pb = "z, "
    nsteps = f"ml.cdiv({K}, {bk})"
    kfirst = "0"
    if split:
      self.emit("s = ml.program_id(2)")
      per = _cdiv(_cdiv(K, bk), split)
      nsteps = f"ml.minimum({per}, ml.cdiv({K}, {bk}) - s * {per})" if r.random() < 0.5 else str(per)
      kfirst = f"s * {per}"
      if nsteps == str(per) and per * (split - 1) >= _cdiv(K, bk):
        nsteps = f"ml.minimum({per}, ml.cdiv({K}, {bk}) - s * {per})"
    if tma_a:
      self.emit(f"a_s = ml.smem(({bk}, {bm}), jnp.{dt})" if at else f"a_s = ml.smem(({bm}, {bk}), jnp.{dt})")
    if tma_b:
      self.emit(f"b_s = ml.smem(({bn}, {bk}), jnp.{dt})" if bt else f"b_s = ml.smem(({bk}, {bn}), jnp.{dt})")
    # SMEM a stage (both operands: a register one is staged by the compiler), beside the epilogue's and the
    # transpose scratch's (at most bm * bn float32 each): more than the 227 KiB budget is MG402, a right refusal
    stage_bytes = ((bm * bk + bk * bn) * ISZ[dt], 2 * bm * bn * 4)
    zero = r.choice(["ml.zeros(({bm}, {bn}), jnp.{d})", "jnp.zeros(({bm}, {bn}), jnp.{d})",
                     "ml.full(({bm}, {bn}), 0, jnp.{d})"]).format(bm=bm, bn=bn, d=acc_dt)
    form = r.choice(["acc", "acc", "plus", "jnp", "matmul", "out_dtype"])
    if form == "matmul" and acc_dt != F32 or form == "jnp" and dt in (E4, E5):
      form = "acc"
    ind = ""
    if loop == "one":
      kk = "0"
      ind = ""
    else:
      if form == "out_dtype":
        form = "acc"
      self.emit(f"acc = {zero}")
      head = {"range": f"range({nsteps})", "mlrange": f"ml.range({nsteps})",
              "stages": f"ml.range({nsteps}, stages={self._stages(r.choice([2, 2, 3, 4]), stage_bytes)})",
              "ws": f"ml.range({nsteps}, stages={self._stages(r.choice([2, 3]), stage_bytes)}, "
                    "warp_specialize=True)"}[loop]
      self.emit(f"for k in {head}:")
      kk = f"({kfirst} + k)" if split else "k"
      ind = "  "
    e = lambda s: self.emit(ind + s)  # noqa: E731
    koff = f"{kk} * {bk}"
    # operand A
    if a_mode in ("tma", "smem_regs"):
      if at:
        e(f"ml.copy({a}.at[{pb}ml.ds({koff}, {bk}), ml.ds(i * {bm}, {bm})], a_s)")
      else:
        e(f"ml.copy({a}.at[{pb}ml.ds(i * {bm}, {bm}), ml.ds({koff}, {bk})], a_s)")
      aop = "a_s.T" if at else ("a_s[...]" if a_mode == "smem_regs" else "a_s")
    elif a_mode == "ptr":
      e(f"rk = {koff} + ml.arange({bk})")
      e(f"rm = i * {bm} + ml.arange({bm})")
      e(f"av = ml.load({a}.at[{pb}rm[:, None], rk[None, :]], mask=(rm[:, None] < {M}) & (rk[None, :] < {K}), "
        f"other=0)")
      aop = "av"
    else:
      e(f"av = {a}.at[{pb}ml.ds(i * {bm}, {bm}), ml.ds({koff}, {bk})].load(mask=((i * {bm} + ml.arange({bm}))"
        f"[:, None] < {M}) & (({koff} + ml.arange({bk}))[None, :] < {K}), other=0)")
      aop = "av"
    # operand B
    if b_mode == "tma":
      if bt:
        e(f"ml.copy({b}.at[{pb}ml.ds(j * {bn}, {bn}), ml.ds({koff}, {bk})], b_s)")
      else:
        e(f"ml.copy({b}.at[{pb}ml.ds({koff}, {bk}), ml.ds(j * {bn}, {bn})], b_s)")
      bop = "b_s.T" if bt else "b_s"
    else:
      e(f"rk2 = {koff} + ml.arange({bk})")
      e(f"rn = j * {bn} + ml.arange({bn})")
      if bt:
        idx = "rn[:, None], rk2[None, :]"
        mask = f"(rn[:, None] < {N}) & (rk2[None, :] < {K})"
      else:
        idx = "rk2[:, None], rn[None, :]"
        mask = f"(rk2[:, None] < {K}) & (rn[None, :] < {N})"
      if b_mode == "ptr":
        e(f"bv = ml.load({b}.at[{pb}{idx}], mask={mask}, other=0)")
      else:
        win = (f"ml.ds(j * {bn}, {bn}), ml.ds({koff}, {bk})" if bt else f"ml.ds({koff}, {bk}), ml.ds(j * {bn}, {bn})")
        e(f"bv = {b}.at[{pb}{win}].load(mask={mask}, other=0)")
      bop = "bv.T" if bt else "bv"
    self.tags.add("form:" + form)
    if form == "acc":
      e(f"acc = ml.dot({aop}, {bop}, acc)" if loop != "one" else f"acc = ml.dot({aop}, {bop}, {zero})")
    elif form == "plus":
      e(f"acc += ml.dot({aop}, {bop}{', out_dtype=jnp.' + acc_dt if r.random() < 0.5 or acc_dt != F32 else ''})"
        if loop != "one" else f"acc = ml.dot({aop}, {bop})" + (f".astype(jnp.{acc_dt})" if acc_dt == F16 else ""))
    elif form == "jnp":
      sa = aop if not aop.endswith("_s") else aop + "[...]"
      sb = bop if not bop.endswith("_s") else bop + "[...]"
      sb = sb.replace("b_s.T", "b_s[...].T")
      sa = sa.replace("a_s.T", "a_s[...].T")
      kw = r.choice(["preferred_element_type", "preferred_element_type", None]) if acc_dt != F16 else \
          "preferred_element_type"
      kws = f", {kw}=jnp.{acc_dt}" if kw else ""
      if not kw and dt in SIXTEEN:
        kws = ", preferred_element_type=jnp.float32"
      if kw is None and dt == F32:
        kws = ""
      if dt == I8:
        kws = ", preferred_element_type=jnp.int32"
      call = r.choice([f"jnp.dot({sa}, {sb}{kws})", f"jnp.matmul({sa}, {sb}{kws})",
                       f"lax.dot_general({sa}, {sb}, (((1,), (0,)), ((), ())){kws})"])
      e(f"acc += {call}" if loop != "one" else f"acc = {call}")
    elif form == "matmul":
      sa = aop if not aop.endswith("_s") else aop + "[...]"
      sb = bop if not bop.endswith("_s") else bop + "[...]"
      sb = sb.replace("b_s.T", "b_s[...].T")
      sa = sa.replace("a_s.T", "a_s[...].T")
      if dt in SIXTEEN:
        sa, sb = f"{sa}.astype(jnp.float32)", f"{sb}.astype(jnp.float32)"
      elif dt != F32:
        form = "acc"
        e(f"acc = ml.dot({aop}, {bop}, acc)" if loop != "one" else f"acc = ml.dot({aop}, {bop}, {zero})")
      if form == "matmul":
        e(f"acc = acc + {sa} @ {sb}" if loop != "one" else f"acc = {sa} @ {sb}")
    else:       # out_dtype= / preferred_element_type= on a dot without an accumulator (one K block)
      kw = r.choice(["out_dtype", "preferred_element_type"])
      e(f"acc = ml.dot({aop}, {bop}, {kw}=jnp.{acc_dt})")
    if acc_dt == F16:
      ref = np.asarray(prod, np.float64)        # whole numbers below 2048: exact in float16
    else:
      ref = prod
    self._epilogue("acc", ref, acc_dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", pb, pre, split=bool(split))

  # ------------------------------------------------------------------ family: q @ k.T, then p @ v
  def k_chain(self):
    r = self.r
    dt = r.choice([F16, BF16])
    d = r.choice([16, 32, 64, 64, 128])
    dv = r.choice([16, 32, 64, 64, 128])
    bq = r.choice([64, 64, 128])
    bkv = r.choice([16, 32, 64, 64, 128])
    block = 256 if bq == 128 and r.random() < 0.5 else None
    Mq = r.randint(1, 2 * bq)
    L = r.randint(1, 3 * bkv)
    kt = r.random() < 0.25         # K stored (d, L): s = q_s @ kt_s
    vt = r.random() < 0.25         # V stored (dv, L): p @ vt_s.T
    if kt or vt:
      L = self._aligned(L, dt)
    loop = r.choice(["range", "mlrange", "stages", "ws"])
    pf = r.choice(["scale", "relu", "cast"])
    q, qv = self.input((Mq, d), dt)
    k, kv = self.input((d, L) if kt else (L, d), dt)
    v, vv = self.input((dv, L) if vt else (L, dv), dt)
    K_ = kv.T if kt else kv
    V_ = vv.T if vt else vv
    nb = _cdiv(L, bkv)
    acc = np.zeros((Mq, dv))
    for jb in range(nb):
      kb = np.zeros((bkv, d))
      vb = np.zeros((bkv, dv))
      kb[:min(bkv, L - jb * bkv)] = K_[jb * bkv:(jb + 1) * bkv]
      vb[:min(bkv, L - jb * bkv)] = V_[jb * bkv:(jb + 1) * bkv]
      s = qv @ kb.T
      p = {"scale": s * 0.125, "relu": np.maximum(s, 0) * 0.25, "cast": s}[pf]
      acc = acc + _round(p, dt) @ vb
    self.tags |= {f"dt:{dt}", f"loop:{loop}", f"p:{pf}"} | {t for t, on in [("kt", kt), ("vt", vt)] if on}
    self.grid, self.block = (_cdiv(Mq, bq),), block
    self.emit("i = ml.program_id(0)")
    self.emit(f"q_s = ml.smem(({bq}, {d}), jnp.{dt})")
    self.emit(f"k_s = ml.smem(({d}, {bkv}), jnp.{dt})" if kt else f"k_s = ml.smem(({bkv}, {d}), jnp.{dt})")
    self.emit(f"v_s = ml.smem(({dv}, {bkv}), jnp.{dt})" if vt else f"v_s = ml.smem(({bkv}, {dv}), jnp.{dt})")
    self.emit(f"ml.copy({q}.at[ml.ds(i * {bq}, {bq})], q_s)")
    self.emit(f"acc = ml.zeros(({bq}, {dv}), jnp.float32)")
    head = {"range": f"range(ml.cdiv({L}, {bkv}))", "mlrange": f"ml.range(ml.cdiv({L}, {bkv}))",
            "stages": f"ml.range(ml.cdiv({L}, {bkv}), stages=2)",
            "ws": f"ml.range(ml.cdiv({L}, {bkv}), stages=2, warp_specialize=True)"}[loop]
    self.emit(f"for j in {head}:")
    self.emit(f"  ml.copy({k}.at[:, ml.ds(j * {bkv}, {bkv})], k_s)" if kt else
              f"  ml.copy({k}.at[ml.ds(j * {bkv}, {bkv})], k_s)")
    self.emit(f"  ml.copy({v}.at[:, ml.ds(j * {bkv}, {bkv})], v_s)" if vt else
              f"  ml.copy({v}.at[ml.ds(j * {bkv}, {bkv})], v_s)")
    self.emit("  s = ml.dot(q_s, k_s)" if kt else r.choice(["  s = ml.dot(q_s, k_s.T)", "  s = ml.dot(q_s, ml.trans(k_s))"]))
    pexpr = {"scale": "s * 0.125", "relu": "jnp.maximum(s, 0.0) * 0.25", "cast": "s"}[pf]
    conv = r.choice([f"({pexpr}).astype(jnp.{dt})", f"({pexpr}).to(jnp.{dt})", f"({pexpr}).astype({v}.dtype)"])
    self.emit(f"  p = {conv}")
    vop = "v_s.T" if vt else "v_s"
    self.emit(r.choice([f"  acc = ml.dot(p, {vop}, acc)", f"  acc += ml.dot(p, {vop})",
                        f"  acc = acc + ml.dot(p, {vop})"]))
    self._epilogue("acc", acc, F32, bq, dv, Mq, dv, f"i * {bq}", "0", "", ())

  # ------------------------------------------------------------------ family: Pallas-style register tiles
  def k_pallas(self):
    r = self.r
    dt = r.choice([F16, BF16, F32, I8])
    bm = r.choice([8, 16, 32, 64, 64, 128])
    K = r.choice([16, 32, 64, 64, 128, 256]) if dt != I8 else r.choice([32, 64, 128])
    if dt == F32:
      K = r.choice([8, 16, 32, 64, 128])
    N = r.choice([8, 16, 32, 64, 64, 128, 256]) if dt != I8 else r.choice([16, 32, 64, 128])
    g = r.randint(1, 3)
    M = g * bm
    wt = r.random() < 0.3          # w stored (N, K): contracted over its last axis
    lo, hi, half = (-8, 8, False) if dt == I8 else (-7, 7, True)
    x, xv = self.input((M, K), dt, lo, hi, half)
    w, wv = self.input((N, K) if wt else (K, N), dt, lo, hi, half)
    W = wv.T if wt else wv
    prod = xv @ W
    acc_dt = I32 if dt == I8 else F32
    self.grid = (g,)
    self.tags |= {f"dt:{dt}", "wt" if wt else "w"}
    self.emit("i = ml.program_id(0)")
    self.emit(f"xb = {x}[ml.ds(i * {bm}, {bm}), :]")
    self.emit(f"wb = {w}[...]")
    pet = f", preferred_element_type=jnp.{acc_dt}" if dt != F32 or r.random() < 0.5 else ""
    if wt:
      call = r.choice([f"jnp.dot(xb, wb.T{pet})", f"lax.dot_general(xb, wb, (((1,), (1,)), ((), ())){pet})",
                       f"jnp.einsum('mk,nk->mn', xb, wb{pet})"])
    else:
      forms = [f"jnp.dot(xb, wb{pet})", f"jnp.matmul(xb, wb{pet})", f"jnp.einsum('mk,kn->mn', xb, wb{pet})",
               f"lax.dot(xb, wb{pet})"]
      if not pet or dt == F32:
        forms.append("xb @ wb")
      call = r.choice(forms)
      if call == "xb @ wb" and dt in SIXTEEN:
        call = "xb.astype(jnp.float32) @ wb.astype(jnp.float32)"
    self.tags.add("call:" + call.split("(")[0].split(" ")[0])
    self.emit(f"acc = {call}")
    if dt in SIXTEEN and not pet and "astype" not in call:
      acc_dt = dt                      # jnp.dot of 16-bit tiles without preferred_element_type: 16-bit
      prod = _round(prod, dt)
    odt = r.choice([acc_dt, F32]) if acc_dt != I32 else r.choice([I32, F32])
    y = "acc" if odt == acc_dt else f"acc.astype(jnp.{odt})"
    if odt != I32 and r.random() < 0.4:
      bname, bv = self.input((N,), odt if odt != I32 else F32)
      y = f"{y} + {bname}[...][None, :]"
      prod = _round(_round(prod, odt) + bv[None, :], odt) if odt != F32 else prod + bv[None, :]
      self.tags.add("bias_col")
    o = self.output(prod, odt)
    self.tol_dtype = odt if odt != I32 else None
    self.emit(f"{o}[ml.ds(i * {bm}, {bm}), :] = {y}")


def compare(got, want, tol_dtype=None):
  return mem_fuzz.compare(got, want, dot=True, tol_dtype=tol_dtype)


def run(gen, *, build=True):
  """(class, detail) of `gen`'s kernel: tests/diff_fuzz.py's classes."""
  return diff_fuzz.run(gen, build=build, compare=lambda g, w, dot=False: compare(g, w, gen.tol_dtype))


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  every = int(sys.argv[3]) if len(sys.argv) > 3 else 1      # export one seed in `every`
  fam = sys.argv[4] if len(sys.argv) > 4 else None
  for s in range(lo, hi):
    g = Gen(s, family=fam)
    cls, detail = run(g, build=(s % every == 0))
    print(f"SEED {s} {cls} {g.family} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
