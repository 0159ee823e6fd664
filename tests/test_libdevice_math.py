"""libdevice's float functions, conversions and the integer products Triton ports call (session 60;
frontend/libdevice_math.py, libdevice_bits.py): each was MG002 "has no attribute" (a formula in its hint, or "check
the spelling" of a name CUDA has). Each is checked in interpret mode against NumPy's / jax's value of CUDA's meaning,
and exported for CUDA; the operands they refuse keep a KernelError at the call."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32, U32, I64 = jnp.float32, jnp.int32, jnp.uint32, jnp.int64
ld = ml.extra.cuda.libdevice


def _export(kernel, args):
  specs = [S(np.shape(a), np.asarray(a).dtype) for a in args]
  return jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, y: (x,) * 12)
def floats(x, y, sh, ch, l10, e10, ash, sat, fd, rc, fmx, rem, lg, ei):
  v, w = x[...], y[...]
  sh[...] = ld.sinh(v)
  ch[...] = ld.cosh(v)
  l10[...] = ld.log10(ml.abs(v) + 1.0)
  e10[...] = ld.exp10(v)
  ash[...] = ld.asinh(v)
  sat[...] = ld.saturatef(v)
  fd[...] = ld.fdim(v, w)
  rc[...] = ld.rcp_rn(w)
  fmx[...] = ld.fmax(v, w)
  rem[...] = ld.remainder(v * 7.0, w)
  lg[...] = ld.lgamma(ml.abs(v) + 0.5)
  ei[...] = ld.erfinv(ml.minimum(ml.abs(w) * 0.4, 0.99))


def _rel(got, want, tol):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  ok = np.isclose(got, want, rtol=tol, atol=tol) | (np.isnan(got) & np.isnan(want))
  assert ok.all(), (got[~ok][:4], want[~ok][:4])


def test_float_functions_compute_cuda_meaning():
  """sinh, cosh, log10, exp10, asinh, saturatef (NaN to 0), fdim, rcp_rn, fmax (a number over NaN), IEEE
  remainder (the quotient rounded to even), lgamma and erfinv: each was MG002."""
  rng = np.random.default_rng(0)
  x = rng.uniform(-3, 3, 256).astype(np.float32)
  y = rng.uniform(0.25, 2.5, 256).astype(np.float32) * rng.choice([-1, 1], 256).astype(np.float32)
  x[:4] = [np.nan, 0.5, 1.5, -2.5]
  y[:5] = [1.0, 1.0, 1.0, 1.0, np.nan]      # remainder ties: 3.5 -> -0.5, 10.5 -> 0.5, -17.5 -> 0.5
  out = floats(x, y, interpret=True)
  with np.errstate(all="ignore"):
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    ref = [np.sinh(xd), np.cosh(xd), np.log10(np.abs(xd) + 1), 10.0 ** xd, np.arcsinh(xd),
           np.where(np.isnan(xd), 0.0, np.clip(xd, 0, 1)), np.where(xd <= yd, 0.0, xd - yd), 1.0 / yd,
           np.fmax(xd, yd), [math.remainder(float(np.float32(a * np.float32(7))), b) if b == b and a == a
                             else np.nan for a, b in zip(x, yd)],
           [math.lgamma(abs(float(a)) + 0.5) if a == a else np.nan for a in x],
           np.asarray(jax.scipy.special.erfinv(jnp.minimum(jnp.abs(y) * 0.4, 0.99)))]
  for name, got, want in zip("sinh cosh log10 exp10 asinh saturatef fdim rcp_rn fmax remainder lgamma erfinv".split(),
                             out, ref):
    _rel(got, want, 2e-6 if name in ("saturatef", "fdim", "rcp_rn", "fmax", "remainder") else 3e-5)
  np.testing.assert_array_equal(np.asarray(out[9])[1:4], np.float32([-0.5, 0.5, 0.5]))
  assert np.asarray(out[5])[0] == 0.0 and np.asarray(out[8])[0] == y[0] and np.asarray(out[8])[4] == x[4]
  assert "mosaic_gpu" in _export(floats, (x, y))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32),) * 4 + (S(x.shape, U32), S(x.shape, I32), x, x))
def conversions(x, rn, rz, rd, ru, un, bits, back, whole):
  v = x[...]
  rn[...] = ld.float2int_rn(v)
  rz[...] = ld.float2int_rz(v)
  rd[...] = ld.float2int_rd(v)
  ru[...] = ld.float2int_ru(v)
  un[...] = ld.float2uint_rz(ml.abs(v))
  bits[...] = ld.float_as_int(v)
  back[...] = ld.int_as_float(ld.float_as_int(v) ^ -2147483648)
  whole[...] = ld.int2float_rn(ld.float2int_rn(v))


def test_conversions_round_as_their_suffix_says():
  """float2int_rn (ties to even), _rz, _rd, _ru, float2uint, the bit casts float_as_int / int_as_float and
  int2float_rn: each was MG002 ("did you mean ml.float32?")."""
  x = np.float32(np.r_[[0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, 0.0], np.linspace(-50, 50, 248)])
  rn, rz, rd, ru, un, bits, back, whole = conversions(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(rn), np.rint(x).astype(np.int32))
  np.testing.assert_array_equal(np.asarray(rz), np.trunc(x).astype(np.int32))
  np.testing.assert_array_equal(np.asarray(rd), np.floor(x).astype(np.int32))
  np.testing.assert_array_equal(np.asarray(ru), np.ceil(x).astype(np.int32))
  np.testing.assert_array_equal(np.asarray(un), np.trunc(np.abs(x)).astype(np.uint32))
  np.testing.assert_array_equal(np.asarray(bits), x.view(np.int32))
  np.testing.assert_array_equal(np.asarray(back), -x)
  np.testing.assert_array_equal(np.asarray(whole), np.rint(x))
  assert "mosaic_gpu" in _export(conversions, (x,))


@mg.mgpu_kernel(out_shape=lambda x, y, z: (x, S(x.shape, U32), x, S(x.shape, U32)))
def products(x, y, z, m24, um24, sad, usad):
  v, w, u = x[...], y[...], z[...]
  m24[...] = ld.mul24(v, w)
  um24[...] = ld.umul24(ml.bitcast(v, jnp.uint32), ml.bitcast(w, jnp.uint32))
  sad[...] = ld.sad(v, w, u)
  usad[...] = ld.usad(ml.bitcast(v, jnp.uint32), ml.bitcast(w, jnp.uint32), ml.bitcast(u, jnp.uint32))


def _s24(v):
  v = v.astype(np.int64) & 0xFFFFFF
  return np.where(v >= 1 << 23, v - (1 << 24), v)


def test_integer_products_mul24_and_sad():
  """CUDA's __mul24 / __umul24 (the low 32 bits of the product of the low 24 bits, signed or not) and __sad /
  __usad (|x - y| + z, the difference without overflow, the sum wrapping): MG002 before."""
  rng = np.random.default_rng(1)
  x, y, z = (rng.integers(-2 ** 31, 2 ** 31 - 1, 256, dtype=np.int64).astype(np.int32) for _ in range(3))
  x[:3], y[:3] = [2 ** 31 - 1, -2 ** 31, 5], [-2 ** 31, 2 ** 31 - 1, 0x800001]
  m24, um24, sad, usad = products(x, y, z, interpret=True)
  wrap = lambda v, t: (np.asarray(v, np.int64) % 2 ** 32).astype(np.uint32).view(t)
  np.testing.assert_array_equal(np.asarray(m24), wrap(_s24(x) * _s24(y), np.int32))
  ux, uy, uz = (v.view(np.uint32).astype(np.int64) for v in (x, y, z))
  np.testing.assert_array_equal(np.asarray(um24), wrap((ux & 0xFFFFFF) * (uy & 0xFFFFFF), np.uint32))
  np.testing.assert_array_equal(np.asarray(sad), wrap(np.abs(x.astype(np.int64) - y) + uz, np.int32))
  np.testing.assert_array_equal(np.asarray(usad), wrap(np.abs(ux - uy) + uz, np.uint32))
  assert "mosaic_gpu" in _export(products, (x, y, z))


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def high_words(x, y, o):
  o[...] = ld.mul64hi(x[...], y[...])


def test_mul64hi_is_the_signed_products_high_word():
  """CUDA's __mul64hi of int64: the high 64 bits of the 128-bit signed product, from 32-bit halves."""
  with jax.enable_x64(True):
    rng = np.random.default_rng(2)
    x, y = (rng.integers(-2 ** 63, 2 ** 63 - 1, 256, dtype=np.int64) for _ in range(2))
    x[:4], y[:4] = [-2 ** 63, -1, 2 ** 63 - 1, 3], [-2 ** 63, 2 ** 63 - 1, 2 ** 63 - 1, -5]
    got = np.asarray(high_words(x, y, interpret=True))
    want = np.array([(int(a) * int(b)) >> 64 for a, b in zip(x, y)], np.int64)
    np.testing.assert_array_equal(got, want)
    assert "mosaic_gpu" in _export(high_words, (x, y))


@mg.mgpu_kernel(out_shape=lambda x: x)
def mul64hi_of_int32(x, o):
  o[...] = ld.mul64hi(x[...], x[...])


def test_mul64hi_of_int32_says_widen():
  """Its operands are int64 (Triton's mul64hi of int32 has no libdevice function either): a KernelTypeError at
  the call, whose hint widens them."""
  with pytest.raises(mg.KernelTypeError) as info:
    mul64hi_of_int32.typed_ir(S((256,), I32))
  e = info.value
  assert e.code == "MG003", (e.code, str(e))
  assert e.filename == __file__ and e.lineno == mul64hi_of_int32.__wrapped__.__code__.co_firstlineno + 2
  assert "takes int64 integers, got int32 for x[...]" in e.message
  assert e.hint.startswith("widen it: ld.mul64hi((x[...]).astype(jnp.int64), x[...])"), e.hint


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_operands(x, o):
  o[...] = x[...] + ld.float2int_rn(2.5) + ld.mul24(0x1000001, 3) + ld.sad(3, 10, 1)


def test_python_numbers_compute_while_tracing():
  x = np.arange(256, dtype=np.int32)
  np.testing.assert_array_equal(np.asarray(static_operands(x, interpret=True)), x + 2 + 3 + 8)


@pytest.mark.gpu
def test_gpu_matches_interpret():
  rng = np.random.default_rng(3)
  x = rng.uniform(-3, 3, 256).astype(np.float32)
  y = rng.uniform(0.25, 2.5, 256).astype(np.float32)
  for g, i in zip(floats(x, y), floats(x, y, interpret=True)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(i), rtol=2e-6, atol=2e-6)
  for g, i in zip(conversions(x), conversions(x, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(i))
  a, b, c = (rng.integers(-2 ** 31, 2 ** 31 - 1, 256, dtype=np.int64).astype(np.int32) for _ in range(3))
  for g, i in zip(products(a, b, c), products(a, b, c, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(i))


@mg.mgpu_kernel(out_shape=lambda x: (x,) * 6)
def static_floats(x, a, b, c, d, e, f):
  v = x[...]
  a[...] = v + ld.log10(0.0)
  b[...] = v + ld.lgamma(-1.0)
  c[...] = v + ld.acosh(0.5)
  d[...] = v + ld.erfinv(0.5)
  e[...] = v + ld.float2int_rn(3e10)
  f[...] = v + ld.cyl_bessel_i1(-3.0)


def test_python_numbers_take_ieee_answers_while_tracing():
  """Of Python numbers, IEEE's infinities and NaN where Python's math raises (log10(0), lgamma's poles, acosh
  below 1: they were MG003 "failed while tracing: ValueError"), CUDA's saturating conversion, and erfinv and the
  Bessel functions by series (MG003 before: "no value while tracing")."""
  a, b, c, d, e, f = (float(np.asarray(o)[0]) for o in static_floats(np.zeros(128, np.float32), interpret=True))
  assert a == -np.inf and b == np.inf and np.isnan(c)
  np.testing.assert_allclose(d, float(jax.scipy.special.erfinv(np.float32(0.5))), rtol=1e-6)
  assert e == np.float32(2 ** 31 - 1)
  np.testing.assert_allclose(f, float(jax.scipy.special.i1(np.float32(-3.0))), rtol=1e-6)
