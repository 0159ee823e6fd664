"""Probe 43c (interpret mode against the GPU: where could they disagree?).

The fix: `ml.exp2(s, approx=True)` of a scalar (a full reduction's result) compiled to the accurate
`math.exp2`, which keeps subnormal results, where tensors use the hardware's `ex2.approx.ftz` and
interpret mode models that instruction (flushing them) for both: the scalar now takes the tensors'
instruction.

The rest states where interpret mode and the GPU agree, bit for bit or within the tolerance
docs/language.md promises ("Interpret mode"): integer wrap-around, division and remainder of negative
numbers in every width, NaN and -0.0 through max/min/argmax/sort/clip/cummax, masked loads' `other`,
TMA windows before the start and past the end, long 16-bit rows summed in float32, atomic scatters with
duplicate indices, two stores to one element in one program, and the transcendental functions (within a
few float32 ulp). Each case runs in interpret mode against jnp and exports for CUDA here; its `gpu` test
runs it compiled on the H200 against interpret mode and jnp.
"""
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16 = jnp.float32, jnp.float16, jnp.bfloat16
INTS = [jnp.int8, jnp.uint8, jnp.int16, jnp.uint16, jnp.int32, jnp.uint32]


def _export(kernel, *args, **constexprs):
  specs = [S(a.shape, a.dtype) for a in args]
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def same(got, want):
  """Equal elementwise, with the sign of zeros, NaN matching NaN (compared as float64: exact here)."""
  g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
  assert g.shape == w.shape, (g.shape, w.shape)
  ok = (g == w) & (np.signbit(g) == np.signbit(w)) | np.isnan(g) & np.isnan(w)
  assert ok.all(), f"differ at {np.flatnonzero(~ok)[:8]}: got {g[~ok][:8]}, want {w[~ok][:8]}"


def close_ulps(got, want, dt, ulps):
  """Within `ulps` units in the last place of dtype `dt` (relative), specials (NaN, +-inf) equal."""
  g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
  eps = float(ml_dtypes.finfo(dt).eps)
  tiny = float(ml_dtypes.finfo(dt).tiny)
  fin = np.isfinite(w)
  with np.errstate(invalid="ignore"):
    ok = np.where(fin, np.abs(g - w) <= ulps * eps * np.maximum(np.abs(w), tiny), (g == w) | np.isnan(g) & np.isnan(w))
  assert ok.all(), f"differ at {np.flatnonzero(~ok)[:8]}: got {g[~ok][:8]}, want {w[~ok][:8]}"


def _ints(dt, n, seed):
  info = np.iinfo(dt)
  v = np.random.default_rng(seed).integers(info.min, info.max, size=n, endpoint=True, dtype=np.int64)
  v[:4] = [info.min, info.max, 0, -1 if info.min < 0 else 1]
  return jnp.asarray(v.astype(dt))


# ---------------------------------------------------------------- the fix: a scalar's approximate exp2
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def exp2_approx_scalar(x, out):
  s = ml.min(x[...])                                   # a scalar
  t = ml.exp2(x[...], approx=True)                     # a tensor
  out[...] = ml.where(ml.arange(128) == 0, ml.exp2(s, approx=True), t)


def _subnormal_exponents():
  """Exponents whose 2**x is subnormal in float32 (flushed by ex2.approx.ftz), and ordinary ones."""
  x = np.linspace(-140.0, 10.0, 128).astype(np.float32)
  x[0] = -130.0                                         # the minimum: the scalar's exp2 is subnormal
  return jnp.asarray(x)


def test_scalar_exp2_approx_is_the_tensors_instruction():
  x = _subnormal_exponents()
  text = exp2_approx_scalar.mlir(x)
  assert "math.exp2" not in text                        # (the accurate exp2 keeps 2**-130)
  assert text.count("ex2.approx.ftz.f32") >= 2          # the scalar's and the tensor's
  got = np.asarray(exp2_approx_scalar(x, interpret=True))
  assert got[0] == 0.0 and not np.signbit(got[0])       # flushed, as the instruction flushes
  assert "mosaic_gpu" in _export(exp2_approx_scalar, x)


@pytest.mark.gpu
def test_gpu_scalar_exp2_approx_agrees_with_interpret_mode():
  x = _subnormal_exponents()
  got = jax.jit(exp2_approx_scalar)(x)
  want = np.asarray(exp2_approx_scalar(x, interpret=True))
  g = np.asarray(got)
  # ex2.approx.ftz in both: the same results flushed to +0.0 (the values themselves: within the ulps below)
  assert ((g == 0) == (want == 0)).all() and (np.signbit(g) == np.signbit(want)).all()
  close_ulps(np.asarray(got)[1:][np.asarray(x)[1:] > -126], np.exp2(np.asarray(x)[1:][np.asarray(x)[1:] > -126]),
             F32, 4)


# ---------------------------------------------------------------- integers: wrap-around in every width
@ml.inline
def _int_ops(a, b, bz):
  return ml.concatenate([a + b, a - b, a * b, a // bz, a % bz, ml.maximum(a, b), ml.minimum(a, b), a ^ b])


@mg.mgpu_kernel(out_shape=lambda a, b, bz: S((8 * a.shape[0],), a.dtype), grid=(1,))
def int_wrap(a, b, bz, out):
  out[...] = _int_ops(a[...], b[...], bz[...])


def _int_case(dt):
  a, b = _ints(dt, 256, 1), _ints(dt, 256, 2)
  bz = jnp.where(b == 0, jnp.asarray(3, dt), b)
  want = jnp.concatenate([a + b, a - b, a * b, a // bz, a % bz, jnp.maximum(a, b), jnp.minimum(a, b), a ^ b])
  return (a, b, bz), want


@pytest.mark.parametrize("dt", INTS, ids=lambda d: jnp.dtype(d).name)
def test_integer_wrap_division_and_remainder(dt):
  args, want = _int_case(dt)
  same(int_wrap(*args, interpret=True), want)
  assert "mosaic_gpu" in _export(int_wrap, *args)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", INTS, ids=lambda d: jnp.dtype(d).name)
def test_gpu_integer_wrap_division_and_remainder(dt):
  args, want = _int_case(dt)
  got = jax.jit(int_wrap)(*args)
  same(got, want)
  same(got, int_wrap(*args, interpret=True))


# ---------------------------------------------------------------- NaN and -0.0 through max, min, sort, ...
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)


def _specials(dt, seed):
  v = np.random.default_rng(seed).choice(SPECIALS, size=(8, 64))
  v[0] = 0.0
  v[0, 5] = -0.0
  v[1] = -0.0
  v[1, 7] = 0.0
  v[2] = -np.inf
  v[3] = np.nan
  v[4, 3] = np.nan
  return jnp.asarray(v).astype(dt)


@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, x, x, x, x, S((x.shape[0],), jnp.int32), S((x.shape[0],), jnp.int32),
                                         S(x.shape, jnp.int32)), grid=(1,))
def nan_zero(x, y, mx, mn, clip, srt, cmx, rmax, amax, amin, asrt):
  a, b = x[...], y[...]
  mx[...] = ml.maximum(a, b)
  mn[...] = ml.minimum(a, b)
  clip[...] = ml.clip(a, -0.0, 0.0)
  srt[...] = ml.sort(a, descending=True)
  cmx[...] = ml.cummax(a, axis=1)
  rmax[...] = ml.where(ml.arange(64)[None, :] == 0, ml.max(a, axis=1, keepdims=True),
                       ml.min(a, axis=1, keepdims=True))
  amax[...] = ml.argmax(a, axis=1)
  amin[...] = ml.argmin(a, axis=1)
  asrt[...] = ml.argsort(a)


def _nan_zero_want(x, y):
  first = (jnp.arange(64) == 0)[None, :]
  return (jnp.maximum(x, y), jnp.minimum(x, y), jnp.clip(x, -0.0, 0.0), jnp.sort(x, axis=1, descending=True),
          jax.lax.cummax(x, axis=1), jnp.where(first, jnp.max(x, axis=1, keepdims=True), jnp.min(x, axis=1, keepdims=True)),
          jnp.argmax(x, axis=1), jnp.argmin(x, axis=1), jnp.argsort(x, axis=1))


def _cpu_want(x, y):
  """jnp's results computed on the CPU: on a GPU machine XLA:GPU's argmax/argmin of rows holding NaN did not
  give the first NaN's index (jnp's documented semantics, which interpret mode and the kernel follow)."""
  cpu = jax.devices("cpu")[0]
  with jax.default_device(cpu):
    return _nan_zero_want(jax.device_put(x, cpu), jax.device_put(y, cpu))


@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_nan_and_signed_zeros_through_max_min_sort(dt):
  x, y = _specials(dt, 3), _specials(dt, 4)
  for g, w in zip(nan_zero(x, y, interpret=True), _cpu_want(x, y)):
    same(g, w)
  assert "mosaic_gpu" in _export(nan_zero, x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_nan_and_signed_zeros_through_max_min_sort(dt):
  x, y = _specials(dt, 3), _specials(dt, 4)
  got = jax.jit(nan_zero)(x, y)
  for g, i, w in zip(got, nan_zero(x, y, interpret=True), _cpu_want(x, y)):
    same(g, w)
    same(g, i)


# ---------------------------------------------------------------- masked loads' other, TMA zero fill
def _masked_other(other):
  @mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype), grid=(1,))
  def masked_other(x, out):
    idx = ml.arange(256)
    out[...] = x.at[ml.ds(0, 256)].load(mask=idx < x.shape[0], other=other)
  return masked_other


OTHERS = [(F32, float("nan")), (F32, -0.0), (F32, float("-inf")), (F16, 1e5), (BF16, -0.0), (jnp.int8, -128),
          (jnp.uint8, 255), (jnp.uint32, 2 ** 32 - 1), (jnp.float8_e4m3fn, 1000.0)]


def _other_want(x, dt, other):
  fill = jnp.full((56,), other, F32).astype(dt) if jnp.issubdtype(dt, jnp.floating) else jnp.full((56,), other, dt)
  # (1000.0 into float8_e4m3fn: NaN, as jnp converts it; probe 50e)
  return jnp.concatenate([x, fill])


@pytest.mark.parametrize("dt,other", OTHERS, ids=lambda v: jnp.dtype(v).name if isinstance(v, type) else str(v))
def test_masked_load_other(dt, other):
  x = jnp.arange(200).astype(dt)
  k = _masked_other(other)
  same(k(x, interpret=True), _other_want(x, dt, other))
  assert "mosaic_gpu" in _export(k, x)


@pytest.mark.gpu
@pytest.mark.parametrize("dt,other", OTHERS, ids=lambda v: jnp.dtype(v).name if isinstance(v, type) else str(v))
def test_gpu_masked_load_other(dt, other):
  x = jnp.arange(200).astype(dt)
  k = _masked_other(other)
  got = jax.jit(k)(x)
  same(got, _other_want(x, dt, other))
  same(got, k(x, interpret=True))


@mg.mgpu_kernel(out_shape=lambda x: S((3, 64, x.shape[1]), x.dtype), grid=(3,))
def tma_edges(x, out):
  """Windows starting before 0, inside, and running past the end of a 100-row array: zeros outside."""
  i = ml.program_id(0)
  buf = ml.smem((64, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 50 - 20, 64)], buf)
  ml.copy(buf, out.at[i])


def _tma_want(x):
  pad = jnp.concatenate([jnp.zeros((20, x.shape[1]), x.dtype), x, jnp.zeros((64, x.shape[1]), x.dtype)])
  return jnp.stack([pad[i * 50:i * 50 + 64] for i in range(3)])


@pytest.mark.parametrize("dt", [F32, BF16, jnp.int8], ids=lambda d: jnp.dtype(d).name)
def test_tma_windows_outside_read_zeros(dt):
  x = (jnp.arange(100 * 64).reshape(100, 64) % 97 - 50).astype(dt)
  same(tma_edges(x, interpret=True), _tma_want(x))
  assert "mosaic_gpu" in _export(tma_edges, x)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, BF16, jnp.int8], ids=lambda d: jnp.dtype(d).name)
def test_gpu_tma_windows_outside_read_zeros(dt):
  x = (jnp.arange(100 * 64).reshape(100, 64) % 97 - 50).astype(dt)
  got = jax.jit(tma_edges)(x)
  same(got, _tma_want(x))
  same(got, tma_edges(x, interpret=True))


# ---------------------------------------------------------------- long 16-bit rows: summed in float32
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype), S((), x.dtype)), grid=(1,))
def long_rows(x, rows, total):
  v = x[...]
  rows[...] = ml.sum(v, axis=1)
  total[...] = ml.sum(v)


def _long_rows_input(dt):
  rng = np.random.default_rng(7)
  return jnp.asarray(rng.uniform(0.0, 4.0, (8, 2048)).astype(np.float32)).astype(dt)


def _f32_sums(x):
  v = np.asarray(x).astype(np.float64)
  return v.sum(axis=1), v.sum()


@pytest.mark.parametrize("dt", [F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_long_16bit_rows_sum_in_float32(dt):
  x = _long_rows_input(dt)
  rows, total = long_rows(x, interpret=True)
  r, t = _f32_sums(x)                           # the exact sums, rounded once to dt: within half an ulp
  close_ulps(rows, r, dt, 0.5)
  close_ulps(total, t, dt, 0.5)
  assert "mosaic_gpu" in _export(long_rows, x)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_long_16bit_rows_sum_in_float32(dt):
  """The GPU adds in another order than interpret mode (float32 either way): the sums then differ by
  float32 rounding only, far below the 16-bit result's ulp, so both round to within an ulp of the exact sum
  (a 16-bit accumulator would be tens of ulp off at 2048 elements)."""
  x = _long_rows_input(dt)
  rows, total = jax.jit(long_rows)(x)
  r, t = _f32_sums(x)
  close_ulps(rows, r, dt, 1)
  close_ulps(total, t, dt, 1)
  ri, ti = long_rows(x, interpret=True)
  close_ulps(rows, ri, dt, 1)
  close_ulps(total, ti, dt, 1)


# ---------------------------------------------------------------- atomics with duplicates, two stores
@mg.mgpu_kernel(out_shape=lambda v, ids: S((16, 32), v.dtype), grid=lambda v, ids: (v.shape[0] // 128,))
def scatter_add(v, ids, out):
  i = ml.program_id(0)
  ml.atomic_add(out.at[ids.at[ml.ds(i * 128, 128)][...], :], v.at[ml.ds(i * 128, 128), :][...])


def _scatter_case(dt):
  rng = np.random.default_rng(8)
  ids = jnp.asarray(rng.integers(-20, 20, 256), jnp.int32)        # repeated, negative and dropped indices
  if dt == jnp.uint32:
    v = jnp.asarray(rng.integers(0, 2 ** 32, (256, 32), dtype=np.int64).astype(np.uint32))
  else:
    v = jnp.asarray(rng.integers(-50, 50, (256, 32))).astype(dt)
  return (v, ids), jnp.zeros((16, 32), dt).at[ids].add(v, mode="drop")


@pytest.mark.parametrize("dt", [F32, jnp.int32, jnp.uint32], ids=lambda d: jnp.dtype(d).name)
def test_atomic_scatter_with_duplicate_indices(dt):
  args, want = _scatter_case(dt)
  same(scatter_add(*args, interpret=True), want)
  assert "mosaic_gpu" in _export(scatter_add, *args)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, jnp.int32, jnp.uint32], ids=lambda d: jnp.dtype(d).name)
def test_gpu_atomic_scatter_with_duplicate_indices(dt):
  """Whole numbers: every order of the float adds gives the same sums, so bit for bit."""
  args, want = _scatter_case(dt)
  got = jax.jit(scatter_add)(*args)
  same(got, want)
  same(got, scatter_add(*args, interpret=True))


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def two_stores(x, first, last):
  first[...] = x[...]
  first[5] = -7.0                          # a thread's scalar store after the CTA's vector store
  last[5] = -7.0
  last[...] = x[...] * 2.0                 # and the other way round
  s = first[3]                             # read back what another thread wrote
  first[7] = s + 1.0


def _two_stores_want(x):
  return x.at[5].set(-7.0).at[7].set(x[3] + 1.0), x * 2.0


def test_two_stores_to_one_element_in_program_order():
  x = jnp.arange(256, dtype=F32)
  for g, w in zip(two_stores(x, interpret=True), _two_stores_want(x)):
    same(g, w)
  assert "mosaic_gpu" in _export(two_stores, x)


@pytest.mark.gpu
def test_gpu_two_stores_to_one_element_in_program_order():
  x = jnp.arange(256, dtype=F32)
  got = jax.jit(two_stores)(x)
  for g, i, w in zip(got, two_stores(x, interpret=True), _two_stores_want(x)):
    same(g, w)
    same(g, i)


# ---------------------------------------------------------------- transcendental functions: a few ulp
_ERF = np.vectorize(math.erf, otypes=[np.float64])
# Each function and its exact value (float64 NumPy: jnp's float32 exp2 on the CPU is 5 ulp off at 2**14).
UNARY = {"exp": (ml.exp, np.exp), "exp2": (ml.exp2, np.exp2), "log": (ml.log, np.log), "log2": (ml.log2, np.log2),
         "sqrt": (ml.sqrt, np.sqrt), "rsqrt": (ml.rsqrt, lambda v: 1 / np.sqrt(v)), "tanh": (ml.tanh, np.tanh),
         "sin": (ml.sin, np.sin), "cos": (ml.cos, np.cos), "erf": (ml.erf, _ERF),
         "sigmoid": (ml.sigmoid, lambda v: 1 / (1 + np.exp(-v)))}


@mg.mgpu_kernel(out_shape=lambda x: S((len(UNARY),) + x.shape, x.dtype), grid=(1,))
def unary_all(x, out):
  v = x[...]
  for k, (f, _) in enumerate(UNARY.values()):
    out.at[k][...] = f(v)


def _unary_input(dt):
  """Normal floats only (jnp on the CPU flushes subnormals), the specials and a wide spread."""
  special = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 0.5, 3.0, 9.0, -9.0, 20.0, -20.0, 80.0, -80.0]
  rng = np.random.default_rng(9)
  x = np.concatenate([special, rng.normal(size=1024 - len(special)) * 6]).astype(np.float32)
  return jnp.asarray(x).astype(dt)


def _unary_want(x):
  v = np.asarray(x).astype(np.float64)
  with np.errstate(all="ignore"):
    return np.stack([f(v) for _, f in UNARY.values()]).astype(np.asarray(x).dtype)


# float32 results within a few ulp of each other (libdevice's 1 or 2 ulp, docs/language.md, plus NumPy's; sigmoid,
# 1 / (1 + exp(-x)), adds its division's two and a rounding: 8 in all); 16-bit ones, computed in float32 and rounded
# once, equal or an ulp apart.
_ULPS = {F32: 8, F16: 2, BF16: 2}


@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_transcendentals_within_their_tolerance(dt):
  x = _unary_input(dt)
  got = unary_all(x, interpret=True)
  close_ulps(got, _unary_want(x), dt, _ULPS[dt])
  assert "mosaic_gpu" in _export(unary_all, x)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_transcendentals_within_their_tolerance(dt):
  x = _unary_input(dt)
  got = jax.jit(unary_all)(x)
  close_ulps(got, unary_all(x, interpret=True), dt, _ULPS[dt])
  close_ulps(got, _unary_want(x), dt, _ULPS[dt])


# ---------------------------------------------------------------- the fix: sigmoid of 16-bit floats
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def sigmoid_k(x, out):
  out[...] = ml.sigmoid(x[...])


@pytest.mark.parametrize("dt", [F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_sigmoid_of_16bit_floats_rounds_once(dt):
  """float32 inside, rounded once: float16's exp(12) overflowed, and sigmoid(-12) was 0, not 6.1e-6."""
  x = jnp.asarray(np.linspace(-16.0, 16.0, 256), dt)
  v = np.asarray(x).astype(np.float64)
  want = (1 / (1 + np.exp(-v))).astype(np.asarray(x).dtype)
  got = sigmoid_k(x, interpret=True)
  close_ulps(got, want, dt, 0.5 if dt == F16 else 1)
  assert np.asarray(got)[0] > 0
  assert "mosaic_gpu" in _export(sigmoid_k, x)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F16, BF16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_sigmoid_of_16bit_floats_rounds_once(dt):
  x = jnp.asarray(np.linspace(-16.0, 16.0, 256), dt)
  got = jax.jit(sigmoid_k)(x)
  close_ulps(got, sigmoid_k(x, interpret=True), dt, 1)
  assert np.asarray(got)[0] > 0


# ---------------------------------------------------------------- approx= where ml.exp takes none
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def exp_approx(x, out):
  out[...] = ml.exp(x[...], approx=True)          # Mosaic GPU's x.exp(approx=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def tanh_approx(x, out):
  out[...] = ml.tanh(x[...], approx=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def exp_approx_followed(x, out):
  out[...] = ml.exp2(x[...] * 1.4426950408889634, approx=True)


def test_approx_keyword_hints_the_approximate_instruction():
  x = jnp.linspace(-8.0, 8.0, 256, dtype=F32)
  expect(exp_approx, (x,), mg.KernelTypeError, "ml.exp(x[...], approx=True)",
         "ml.exp: got an unexpected keyword argument 'approx'",
         hint="ml.exp has no approx=: the hardware's approximate exponential is ml.exp2(x[...] * 1.4426950408889634,"
              " approx=True) (ex2.approx.ftz: about 2 ulp, subnormal results flushed to zero), or drop approx=; ml.exp(x)")
  expect(tanh_approx, (x,), mg.KernelTypeError, "ml.tanh(x[...], approx=True)",
         "ml.tanh: got an unexpected keyword argument 'approx'",
         hint="ml.tanh has no approximate form (libdevice's, within 2 ulp on the GPU): drop approx=; ml.tanh(x)")
  close_ulps(exp_approx_followed(x, interpret=True), np.exp(np.asarray(x, np.float64)), F32, 16)   # the hint, followed
  assert "mosaic_gpu" in _export(exp_approx_followed, x)


# ---------------------------------------------------------------- emulate= of one element: its scalar's ex2
@mg.mgpu_kernel(out_shape=lambda x: (S((1,), F32), S((1, 1), F32)), grid=(1,))
def exp2_emulate_one(x, one, one_by_one):
  one[...] = ml.exp2(x.at[0:1][...], approx=True, emulate=0.5)               # Triton's BLOCK=1
  one_by_one[...] = ml.exp2(x.at[0:1][...][None, :], approx=True, emulate=0.5)


def test_exp2_emulate_of_one_element_is_its_scalars_instruction():
  x = jnp.asarray([-130.0, 3.5] + [0.0] * 126, F32)
  a, b = exp2_emulate_one(x, interpret=True)
  same(a, np.zeros(1, np.float32))                 # 2**-130 flushed, as ex2.approx.ftz
  same(b, np.zeros((1, 1), np.float32))
  text = exp2_emulate_one.mlir(x)
  assert "ex2.approx.ftz.f32" in text and "math.exp2" not in text
  assert "mosaic_gpu" in _export(exp2_emulate_one, x)


@pytest.mark.gpu
def test_gpu_exp2_emulate_of_one_element():
  for v in (-130.0, 3.5, -0.0, float("inf")):
    x = jnp.asarray([v] + [0.0] * 127, F32)
    for g, i in zip(jax.jit(exp2_emulate_one)(x), exp2_emulate_one(x, interpret=True)):
      same(g, i)
