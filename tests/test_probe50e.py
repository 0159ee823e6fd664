"""Probe 50e (numbers that differ from jnp).

- A conversion to float8 past its range saturated (`(v * 300).astype(jnp.float8_e4m3fn)` gave 448, the
  GPU's cvt.rn.satfinite) where jnp gives NaN (float8_e4m3fn has no infinity) and float8_e5m2 +-inf. XLA
  on the GPU selects jnp's values around the same saturating instruction; the kernel now does too (a
  select on the source's magnitude: NaN before the conversion for e4m3fn, the infinities' bits after it
  for e5m2), in interpret mode and on the GPU. Python numbers (ml.full, stores, ml.where, other=)
  convert as jnp.full does. `fp_downcast_rounding="rtz"` still saturates finite values (rounding toward
  zero never overflows).
- `tl.fma` / `ml.fma` (and libdevice's `fma`) were MG002 ("write x * y + z"): a fused multiply-add rounds once
  (PTX fma.rn; MLIR math.fma), which `x * y + z` does not, and error-free transformations (TwoProd, Dekker's
  splits, compensated sums) need it. Now an op, rounded once in interpret mode too.
"""
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl import language as tl
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, F16 = jnp.float32, jnp.bfloat16, jnp.float16
F8 = [jnp.float8_e4m3fn, jnp.float8_e5m2]
_name = lambda d: jnp.dtype(d).name


def _export(fn, *specs, **kw):
  return jax.export.export(jax.jit(lambda *a: fn(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()


def same(got, want):
  """Equal as float32 values, NaN matching NaN (a NaN's payload is not compared)."""
  g, w = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
  assert g.shape == w.shape and g.dtype == w.dtype
  ok = (g == w) | np.isnan(g) & np.isnan(w)
  assert ok.all(), f"differ at {np.flatnonzero(~ok)[:8]}: got {g[~ok][:8]}, want {w[~ok][:8]}"


def _edges(n, src, seed=0):
  """float8's edges (each side of 464 and 61440, inf, NaN), then values spread past both ranges."""
  e = [464.0, 465.0, -465.0, 61439.0, 61440.0, -61440.0, 1e5, np.inf, -np.inf, np.nan, 448.0, -0.0, 3.0]
  x = np.random.default_rng(seed).standard_normal(n).astype(np.float32) * 3.0
  x[:len(e)] = e
  return jnp.asarray(x).astype(src)


# ---------------------------------------------------------------- float -> float8 past the range
@mg.mgpu_kernel(out_shape=lambda x, *, dt: S(x.shape, dt), grid=lambda x, **_: (x.shape[0] // 128,))
def quantize(x, out, *, dt: ml.constexpr, scale: ml.constexpr = 300.0):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = (v * scale).astype(dt)       # no clamp: jnp's NaN / inf past the range


@pytest.mark.parametrize("dt", F8, ids=_name)
@pytest.mark.parametrize("src", [F32, BF16, F16], ids=_name)
def test_a_cast_past_float8s_range_is_jnps(src, dt):
  x = _edges(256, src)
  same(quantize(x, dt=dt, scale=1.0, interpret=True), x.astype(dt))
  same(quantize(x, dt=dt, interpret=True), (x * 300.0).astype(dt))
  assert "mosaic_gpu" in _export(quantize, S(x.shape, src), dt=dt)


@mg.mgpu_kernel(out_shape=lambda x, s: S(x.shape, jnp.float8_e4m3fn))
def per_row_quant(x, s, out):
  # a Triton port: x / scale with a per-row scale that a caller computed too small
  out[...] = (x[...] / s[...][:, None]).to(jnp.float8_e4m3fn)


@mg.mgpu_kernel(out_shape=lambda g: S(g.shape, jnp.float8_e5m2))
def grad_e5m2(g, out):
  out[...] = (g[...].astype(jnp.float32) * 1024.0).astype(jnp.float8_e5m2)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float8_e4m3fn))
def rtz_f8(x, out):
  out[...] = x[...].to(jnp.float8_e4m3fn, fp_downcast_rounding="rtz")




def test_other_float8_overflows_are_jnps_too():
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.standard_normal((64, 128)).astype(np.float32) * 100)
  s = jnp.asarray(np.linspace(0.05, 2.0, 64).astype(np.float32))
  got = per_row_quant(x, s, interpret=True)
  want = (x / s[:, None]).astype(jnp.float8_e4m3fn)
  assert np.isnan(np.asarray(want, np.float32)).any()
  same(got, want)
  g = jnp.asarray(rng.standard_normal((16, 128)).astype(np.float32) * 80).astype(BF16)
  want = (g.astype(F32) * 1024.0).astype(jnp.float8_e5m2)
  assert np.isinf(np.asarray(want, np.float32)).any()
  same(grad_e5m2(g, interpret=True), want)
  assert "mosaic_gpu" in _export(per_row_quant, S(x.shape, F32), S(s.shape, F32))
  # (rounding toward zero still saturates finite values: it never overflows)
  x = jnp.asarray(np.array([1000.0, -1e6, 470.0, 447.0] * 32, np.float32))
  np.testing.assert_array_equal(np.asarray(rtz_f8(x, interpret=True), np.float32), [448.0, -448.0, 448.0, 416.0] * 32)


@mg.mgpu_kernel(out_shape=lambda x, *, dt: S(x.shape, dt))
def int_to_f8(x, out, *, dt: ml.constexpr):
  out[...] = x[...].astype(dt)


@pytest.mark.parametrize("dt", F8, ids=_name)
def test_an_integer_past_float8s_range_is_jnps(dt):
  x = jnp.asarray((np.arange(128) - 64) * 1001).astype(jnp.int32)
  same(int_to_f8(x, dt=dt, interpret=True), x.astype(dt))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype), S(x.shape, x.dtype), S(x.shape, x.dtype)))
def numbers_into_f8(x, a, b, c):
  v = x[...]
  a[...] = ml.full(v.shape, 1000.0, v.dtype)
  b[...] = ml.where(v > 0, v, -7e4)
  c[...] = v.astype(jnp.float32).astype(jnp.float8_e4m3fn).astype(v.dtype) if v.dtype == jnp.float8_e5m2 else v


@pytest.mark.parametrize("dt", F8, ids=_name)
def test_python_numbers_and_float8_to_float8_convert_as_jnp(dt):
  x = jnp.asarray(np.linspace(-60000, 60000, 128).astype(np.float32)).astype(dt)
  a, b, c = numbers_into_f8(x, interpret=True)
  same(a, jnp.full(x.shape, 1000.0, dt))
  same(b, jnp.where(x > 0, x, -7e4))
  same(c, x.astype(jnp.float8_e4m3fn).astype(dt) if dt == jnp.float8_e5m2 else x)


# ---------------------------------------------------------------- ml.fma: one rounding
def _nearest(v: Fraction, dt):
  """The `dt` value nearest `v`, ties to even (from float64's neighbours: exact for these dtypes)."""
  f = np.asarray(float(v), np.float64).astype(dt)
  u = {2: np.uint16, 4: np.uint32}[np.dtype(dt).itemsize]
  near = [c for c in (f, (f.view(u) + u(1)).view(dt), (f.view(u) - u(1)).view(dt)) if np.isfinite(float(c))]
  return min(near, key=lambda c: (abs(Fraction(float(c)) - v), int(np.asarray(c).view(u)) & 1))


def fma_ref(x, y, z, dt):
  return np.array([_nearest(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)), dt)
                   for a, b, c in zip(*(np.asarray(v, np.float64).ravel() for v in (x, y, z)))], dt)


@mg.mgpu_kernel(out_shape=lambda x, y, z: x, grid=lambda x, y, z: (x.shape[0] // 128,))
def fma_tl(x_ptr, y_ptr, z_ptr, out_ptr):
  # a Triton port: offsets, loads, tl.fma, a store
  offs = tl.program_id(0) * 128 + tl.arange(0, 128)
  out_ptr.at[offs].store(tl.fma(x_ptr.at[offs].load(), y_ptr.at[offs].load(), z_ptr.at[offs].load()))


@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=_name)
def test_fma_rounds_once(dt):
  rng = np.random.default_rng(4)
  x, y = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
  x, y = (jnp.asarray(v).astype(dt) for v in (x, y))
  p = np.asarray(x, np.float64) * np.asarray(y, np.float64)
  z = -p * np.where(np.arange(256) < 128, 1.0, rng.uniform(0.5, 2.0, 256))   # half: x * y - round(x * y)
  z = jnp.asarray(z.astype(np.float32)).astype(dt)
  got = np.asarray(fma_tl(x, y, z, interpret=True))
  want = fma_ref(x, y, z, np.dtype(dt))
  np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
  two_roundings = np.asarray((x * y + z).astype(F32))          # x * y rounded first: its error lost
  assert (two_roundings[:128] == 0).all() and (got[:128] != 0).any()


@mg.mgpu_kernel(out_shape=lambda hi, b: (hi, hi))
def two_prod(hi_in, b, err, hi_out):
  # TwoProd: a * b == hi + err exactly
  a, c = hi_in[...], b[...][None, :]
  hi = a * c
  err[...] = ml.fma(a, c, -hi)
  hi_out[...] = hi + ml.fma(ml.full((), 0.5, jnp.float32), 2.0, -1.0)        # a scalar fma: 0.0


def test_fma_of_broadcast_operands_and_scalars():
  rng = np.random.default_rng(5)
  a = jnp.asarray(rng.standard_normal((8, 128)).astype(np.float32))
  b = jnp.asarray(rng.standard_normal(128).astype(np.float32))
  err, hi = two_prod(a, b, interpret=True)
  exact = np.asarray(a, np.float64) * np.asarray(b, np.float64)[None, :]
  np.testing.assert_array_equal(np.asarray(hi, np.float64) + np.asarray(err, np.float64), exact)
  assert np.asarray(err).any()
  text = two_prod.mlir(S(a.shape, F32), S(b.shape, F32))
  assert "math.fma" in text and "mosaic_gpu" in _export(two_prod, S(a.shape, F32), S(b.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def fma_mixed(x, out):
  out[...] = ml.fma(x[...], x[...].astype(jnp.bfloat16), 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def fma_ints(x, out):
  out[...] = ml.fma(x[...], 3, 1)


def test_fma_dtype_mistakes():
  expect(fma_mixed, [S((128,), F32)], mg.DtypeMismatchError, "ml.fma(x[...], x[...].astype(jnp.bfloat16), 1.0)",
         "ml.fma's operands have different dtypes: x[...] (float32), x[...].astype(jnp.bfloat16) (bfloat16)",
         hint="convert them to one: ml.fma(x, y.astype(x.dtype), z.astype(x.dtype))")
  expect(fma_ints, [S((128,), jnp.int32)], mg.UnsupportedDtypeError, "ml.fma(x[...], 3, 1)",
         "ml.fma on int32: a fused multiply-add takes float32, float16 or bfloat16",
         hint="convert to float32 first: ml.fma(x.astype(jnp.float32), y.astype(jnp.float32),"
              " z.astype(jnp.float32))")


# ---------------------------------------------------------------- jnp.spacing
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else F32))
def spacing(x, out):
  out[...] = jnp.spacing(x[...])


@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=_name)
def test_jnp_spacing_is_jaxs(dt):
  fi = jnp.finfo(dt)
  edges = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, float(fi.max), -float(fi.max),
           float(fi.smallest_subnormal), -float(fi.smallest_subnormal), float(fi.tiny), -7.5]
  x = np.random.default_rng(7).standard_normal(128).astype(np.float32) * 100
  x[:len(edges)] = edges
  x = jnp.asarray(x).astype(dt)
  same(spacing(x, interpret=True), jnp.spacing(x))
  xi = jnp.arange(-64, 64, dtype=jnp.int32)
  same(spacing(xi, interpret=True), jnp.spacing(xi))
  assert "mosaic_gpu" in _export(spacing, S(x.shape, dt))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", F8, ids=_name)
@pytest.mark.parametrize("src", [F32, BF16, F16], ids=_name)
def test_gpu_float8_casts_are_jnps(src, dt):
  x = _edges(4096, src)
  got = jax.jit(lambda x: quantize(x, dt=dt))(x)
  same(got, (x * 300.0).astype(dt))
  same(got, quantize(x, dt=dt, interpret=True))
  xi = jnp.asarray((np.arange(128) - 64) * 1001).astype(jnp.int32)
  same(jax.jit(lambda x: int_to_f8(x, dt=dt))(xi), xi.astype(dt))
  y = jnp.asarray(np.linspace(-60000, 60000, 128).astype(np.float32)).astype(dt)
  for g, w in zip(numbers_into_f8(y), numbers_into_f8(y, interpret=True)):
    same(g, w)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=_name)
def test_gpu_fma_rounds_once(dt):
  rng = np.random.default_rng(6)
  x, y, z = (jnp.asarray(rng.standard_normal(1024).astype(np.float32)).astype(dt) for _ in range(3))
  z = jnp.where(jnp.arange(1024) < 512, -(x.astype(F32) * y.astype(F32)).astype(dt), z)
  got = np.asarray(jax.jit(fma_tl)(x, y, z))
  np.testing.assert_array_equal(got.astype(np.float64), fma_ref(x, y, z, np.dtype(dt)).astype(np.float64))
  a = jnp.asarray(rng.standard_normal((8, 128)).astype(np.float32))
  b = jnp.asarray(rng.standard_normal(128).astype(np.float32))
  err, hi = jax.jit(two_prod)(a, b)
  np.testing.assert_array_equal(np.asarray(hi, np.float64) + np.asarray(err, np.float64),
                                np.asarray(a, np.float64) * np.asarray(b, np.float64)[None, :])


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=_name)
def test_gpu_spacing(dt):
  x = jnp.asarray(np.random.default_rng(8).standard_normal(1024).astype(np.float32) * 100).astype(dt)
  x = x.at[:4].set(jnp.asarray([0.0, -0.0, float(jnp.finfo(dt).max), float(jnp.finfo(dt).smallest_subnormal)], dt))
  same(jax.jit(spacing)(x), jnp.spacing(x))
