"""Probe 70b's corpus, its fourth part: bit-level float functions and exact operations (nextafter, spacing, frexp,
ldexp, reduce_precision, ordered integer keys of floats and ulp distances, bfloat16 rounding to nearest even and
stochastically with given random bits, a correctly rounded sqrt, fmod / remainder signs, fmax / fmin, integer
wrapping, argmax ties, 16-bit subnormal sums, per-op 16-bit rounding). Same CASES form as probe70b_sums.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70b_edges import specials, _np
from probe70b_sums import BF16, F16, F32, I32, S, f32, fma32, rng_of

CASES = {}
U32 = jnp.uint32


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def _finite_specials(seed):
  x = specials(seed)
  return np.where(np.isfinite(x), x, f32(1.5))


# ---------------------------------------------------------------- nextafter, spacing, frexp, ldexp
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x), grid=(1,))
def nextafter_spacing(x, up, down, sp):
  """jnp.nextafter towards +inf and -inf (from 0: the smallest subnormal), and jnp.spacing."""
  v = x[...]
  up[...] = jnp.nextafter(v, jnp.inf)
  down[...] = jnp.nextafter(v, -jnp.inf)
  sp[...] = jnp.spacing(v)


def _nextafter_ref(x):
  """NumPy's, but jax's spacing of a zero: the smallest subnormal of the zero's sign (NumPy's is +1e-45 for both)."""
  sp = np.where(x == 0, np.copysign(np.nextafter(f32(0), f32(1)), x), np.spacing(x))
  return np.nextafter(x, f32(np.inf)), np.nextafter(x, f32(-np.inf)), sp


case("nextafter_and_spacing", nextafter_spacing, lambda s: ((_finite_specials(s),), {}), _np(_nextafter_ref), 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, I32), x, x), grid=(1,))
def frexp_ldexp(x, m_out, e_out, back, sub):
  """jnp.frexp's mantissa in [0.5, 1) and exponent, ldexp back (exact), and ldexp by -140 into the subnormals
  (kept, as NumPy's; XLA on the CPU flushes them)."""
  v = x[...]
  m, e = jnp.frexp(v)
  m_out[...] = m
  e_out[...] = e
  back[...] = jnp.ldexp(m, e)
  sub[...] = jnp.ldexp(v, -140)


def _frexp_ref(x):
  m, e = np.frexp(x)
  return m, e.astype(np.int32), np.ldexp(m, e), np.ldexp(x, -140).astype(f32)


case("frexp_ldexp_roundtrip_and_subnormal", frexp_ldexp, lambda s: ((_finite_specials(s),), {}), _np(_frexp_ref), 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def reduce_precision(x, b, h):
  """lax.reduce_precision to bfloat16's and float16's bits, kept in float32 (mixed-precision emulation)."""
  v = x[...]
  b[...] = jax.lax.reduce_precision(v, exponent_bits=8, mantissa_bits=7)
  h[...] = jax.lax.reduce_precision(v, exponent_bits=5, mantissa_bits=10)


case("reduce_precision_bf16_f16", reduce_precision, lambda s: ((specials(s),), {}),
     lambda x: (np.asarray(jnp.asarray(x).astype(BF16).astype(F32)),
                np.asarray(jax.lax.reduce_precision(jnp.asarray(x), 5, 10))), 0)


# ---------------------------------------------------------------- ordered keys, ulp distance, rounding by the bits
@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape, I32), S(a.shape, I32)), grid=(1,))
def ulp_distance(a, b, key_out, dist):
  """Floats as ordered int32 keys (a radix sort's flip of the negative ones), and the ulp distance of two arrays, as
  a testing harness computes it."""
  ia = a[...].view(I32)
  ib = b[...].view(I32)
  ka = ml.where(ia < 0, -2147483648 - ia, ia)
  kb = ml.where(ib < 0, -2147483648 - ib, ib)
  key_out[...] = ka
  dist[...] = ml.abs(ka - kb)


def _ulp_ref(a, b):
  ia, ib = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
  ka = np.where(ia < 0, -2 ** 31 - ia, ia)
  kb = np.where(ib < 0, -2 ** 31 - ib, ib)
  return ka.astype(np.int32), np.abs(ka - kb).astype(np.int32)


def _ulp_make(seed):
  r = rng_of(seed)
  a = r.standard_normal((8, 128)).astype(f32)
  return (a, (a + a * r.integers(-4, 5, (8, 128)) * 6e-8).astype(f32)), {}


case("ordered_keys_and_ulp_distance", ulp_distance, _ulp_make, _ulp_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, U32), S(x.shape, BF16)), grid=(1,))
def bf16_round_by_bits(x, bits_out, cast):
  """float32 to bfloat16 to nearest even by the bits (the docs' form), NaN kept quiet, against the cast."""
  v = x[...]
  u = v.view(U32)
  r = (u + ((u >> 16) & 1) + 0x7FFF) >> 16
  r = ml.where(v != v, (u >> 16) | 0x40, r)
  bits_out[...] = r
  cast[...] = v.astype(BF16)


def _bf16_bits_ref(x):
  u = x.view(np.uint32).astype(np.uint64)
  r = ((u + ((u >> 16) & 1) + 0x7FFF) >> 16)
  r = np.where(np.isnan(x), (u >> 16) | 0x40, r)
  return r.astype(np.uint32), np.asarray(jnp.asarray(x).astype(BF16))


case("bf16_round_nearest_even_by_bits", bf16_round_by_bits, lambda s: ((specials(s),), {}), _np(_bf16_bits_ref), 0)


@mg.mgpu_kernel(out_shape=lambda x, r: (x, S(x.shape, BF16)), grid=(1,))
def stochastic_round_bf16(x, rbits, widened, out):
  """Stochastic rounding to bfloat16 with given random bits (as bitsandbytes and FP8 training recipes draw them):
  the low 16 random bits added to the float's bits, the low half dropped; the result is exactly a bfloat16."""
  u = x[...].view(U32)
  r = (u + (rbits[...] & 0xFFFF)) & 0xFFFF0000
  w = r.view(F32)
  widened[...] = w
  out[...] = w.astype(BF16)


def _sr_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((8, 128)).astype(f32), r.integers(0, 2 ** 32 - 1, (8, 128), dtype=np.uint64).astype(np.uint32)), {}


def _sr_ref(x, bits):
  u = x.view(np.uint32).astype(np.uint64)
  w = ((u + (bits & 0xFFFF)) & 0xFFFF0000).astype(np.uint32).view(f32)
  return w, np.asarray(jnp.asarray(w).astype(BF16))


case("stochastic_round_bf16_given_bits", stochastic_round_bf16, _sr_make, _sr_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x, seed: S((), F32), grid=(1,))
def stochastic_round_philox(x, seed: ml.scalar, mean):
  """The same with bits drawn in the kernel by ml.randint (Philox, an offset an element): unbiased, so the mean of the
  rounded values (1 or 1 + 2**-7 each) is x's 1 + 2**-10 within the rounding's noise (about 8e-5 over 1024)."""
  offs = ml.arange(0, x.shape[0])[:, None] * x.shape[1] + ml.arange(0, x.shape[1])[None, :]
  u = x[...].view(U32)
  bits = ml.randint(seed, offs)
  r = ((u + (bits & 0xFFFF)) & 0xFFFF0000).view(F32).astype(BF16)
  mean[...] = ml.mean(r.astype(F32))


case("stochastic_round_philox_unbiased", stochastic_round_philox,
     lambda s: ((np.full((8, 128), 1.0 + 2.0 ** -10, f32), np.int32(1234)), {}),
     lambda x, seed: f32(1.0 + 2.0 ** -10), 5e-4)


# ---------------------------------------------------------------- sqrt, fmod, fmax
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, S(x.shape, F16)), grid=(1,))
def sqrt_correctly_rounded(x, s, p, j, h):
  """ml.sqrt, x ** 0.5 and jnp.sqrt: IEEE's correctly rounded root, as NumPy's and jnp's (-0.0 stays -0.0 but for
  ** 0.5, pow's +0.0); float16 computed in float32 and rounded once."""
  v = x[...]
  s[...] = ml.sqrt(v)
  p[...] = v ** 0.5
  j[...] = jnp.sqrt(v)
  h[...] = ml.sqrt(v.astype(F16))


def _sqrt_make(seed):
  r = rng_of(seed)
  v = (r.random((8, 128)) * 10.0 ** r.integers(-40, 39, (8, 128))).astype(f32)
  v[0, :8] = [0.0, -0.0, 1e-45, np.inf, 4.0, 2.0, -1.0, np.nan]
  return (v,), {}


case("sqrt_correctly_rounded", sqrt_correctly_rounded, _sqrt_make,
     _np(lambda x: (np.sqrt(x), np.where(x == 0, f32(0), np.sqrt(x)), np.sqrt(x), np.sqrt(x.astype(np.float16)))), 0)


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, a, a, a), grid=(1,))
def fmod_remainder_signs(a, b, fm, rm, fl, fx, fn):
  """ml.fmod (C's: the dividend's sign, -0.0 kept), % (the divisor's sign), //, jnp.fmax / fmin (the number over a
  NaN)."""
  x, y = a[...], b[...]
  fm[...] = ml.fmod(x, y)
  rm[...] = x % y
  fl[...] = x // y
  fx[...] = jnp.fmax(x, y)
  fn[...] = jnp.fmin(x, y)


def _fmod_make(seed):
  r = rng_of(seed)
  a = (r.integers(-20, 21, (8, 128)) * 0.5).astype(f32)
  b = np.where(r.random((8, 128)) < 0.5, f32(2.0), f32(-1.5))
  a[0, :6] = [-0.0, 0.0, -4.0, 4.0, np.nan, 1.0]
  b[0, :6] = [3.0, -3.0, 2.0, -2.0, 1.0, np.nan]
  return (a, b), {}


case("fmod_remainder_fmax_signs", fmod_remainder_signs, _fmod_make,
     _np(lambda a, b: (np.fmod(a, b), np.asarray(jnp.remainder(a, b)), np.asarray(jnp.floor_divide(a, b)),
                       np.fmax(a, b), np.fmin(a, b))), 0)


# ---------------------------------------------------------------- integers, ties, 16-bit
@mg.mgpu_kernel(out_shape=lambda n, u: (S(n.shape, jnp.uint8), S(n.shape, jnp.int8), S(n.shape, U32),
                                        S(u.shape, I32), S(n.shape, jnp.bool_), S(n.shape, F32)), grid=(1,))
def integer_wraps(n, u, u8, i8, u32, i32, b, f):
  """int32 to uint8 / int8 / uint32 and uint32 to int32 wrap modulo 2**k, as jnp's; int to bool is != 0; a sum of
  int32 products wraps."""
  v = n[...]
  u8[...] = v.astype(jnp.uint8)
  i8[...] = v.astype(jnp.int8)
  u32[...] = v.astype(U32)
  i32[...] = u[...].astype(I32)
  b[...] = v.astype(jnp.bool_)
  f[...] = (v * 65537).astype(F32)


def _wrap_make(seed):
  r = rng_of(seed)
  n = r.integers(-2 ** 31, 2 ** 31 - 1, (8, 128)).astype(np.int32)
  n[0, :6] = [0, -1, 255, 256, -129, 2 ** 31 - 1]
  return (n, r.integers(0, 2 ** 32 - 1, (8, 128), dtype=np.uint64).astype(np.uint32)), {}


case("integer_wraps", integer_wraps, _wrap_make,
     lambda n, u: tuple(np.asarray(v) for v in (jnp.asarray(n).astype(jnp.uint8), jnp.asarray(n).astype(jnp.int8),
                                                jnp.asarray(n).astype(U32), jnp.asarray(u).astype(I32),
                                                jnp.asarray(n).astype(jnp.bool_),
                                                (jnp.asarray(n) * 65537).astype(F32))), 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), I32), S((x.shape[0],), I32), S((x.shape[0],), I32)), grid=(1,))
def argmax_ties(x, am, an, ami):
  """argmax / argmin ties give the first index (-0.0 and +0.0 tie; a row of -inf gives 0), on floats and ints."""
  v = x[...]
  am[...] = ml.argmax(v, axis=1).astype(I32)
  an[...] = jnp.argmin(v, axis=1).astype(I32)
  ami[...] = ml.argmax(v.astype(I32), axis=1).astype(I32)


def _ties_make(seed):
  r = rng_of(seed)
  x = r.integers(-3, 4, (8, 128)).astype(f32)
  x[1] = -0.0
  x[1, 9] = 0.0
  x[2] = -np.inf
  x[3, 40] = 3.0
  x[4] = 0.0
  x[4, 3] = -0.0
  return (x,), {}


case("argmax_argmin_ties", argmax_ties, _ties_make,
     lambda x: (np.argmax(x, 1).astype(np.int32), np.argmin(x, 1).astype(np.int32),
                np.argmax(x.astype(np.int32), 1).astype(np.int32)), 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F16), S((x.shape[0],), F32)), grid=(1,))
def f16_subnormal_sums(x, s16, s32):
  """Sums of float16 subnormals (6e-8 to 6e-5): float32 inside, rounded once; none flushed."""
  v = x[...]
  s16[...] = ml.sum(v, axis=1)
  s32[...] = ml.sum(v.astype(F32), axis=1)


def _f16sub_make(seed):
  r = rng_of(seed)
  return ((r.integers(1, 1024, (8, 256)) * 2.0 ** -24).astype(np.float16),), {}


case("f16_subnormal_sums", f16_subnormal_sums, _f16sub_make,
     lambda x: (x.astype(np.float64).sum(1).astype(np.float16), x.astype(np.float64).sum(1).astype(f32)), 0)


@mg.mgpu_kernel(out_shape=lambda a, b, c: (a, a), grid=(1,))
def bf16_per_op_rounding(a, b, c, chain, wide):
  """bfloat16 a * b + c rounded each op as jnp's eager bfloat16 ops (the product to bfloat16, then the sum), and the
  same in float32 rounded once at the end."""
  x, y, z = a[...], b[...], c[...]
  chain[...] = x * y + z
  wide[...] = (x.astype(F32) * y.astype(F32) + z.astype(F32)).astype(BF16)


def _bf16_make(seed):
  r = rng_of(seed)
  return tuple(jnp.asarray(r.standard_normal((8, 128)).astype(f32)).astype(BF16) for _ in range(3)), {}


def _bf16_ref(a, b, c):
  p = (a * b)                                          # eager jnp: each op its own rounding
  return np.asarray(p + c), np.asarray((np.asarray(a, f32) * np.asarray(b, f32) + np.asarray(c, f32)).astype(BF16))


case("bf16_per_op_rounding", bf16_per_op_rounding, _bf16_make, _bf16_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x), grid=(1,))
def exp2_log2_exact(x, e, l, r):
  """exp2 of integers and log2 of powers of two are exact (libdevice's and NumPy's); jnp.round(x, 2)."""
  v = x[...]
  k = ml.floor(v)
  e[...] = ml.exp2(k)
  l[...] = ml.log2(ml.exp2(k))
  r[...] = jnp.round(v, 2)


case("exp2_log2_exact_round_decimals", exp2_log2_exact,
     lambda s: ((rng_of(s).uniform(-120, 120, (8, 128)).astype(f32),), {}),
     lambda x: (np.exp2(np.floor(x)), np.floor(x), np.asarray(jnp.round(jnp.asarray(x), 2))), 0)


@mg.mgpu_kernel(out_shape=lambda a, b, c: a, grid=(1,))
def fma_halfway_cases(a, b, c, out):
  """ml.fma where the exact a * b + c lies just off a float32 halfway point (a product 1 + 2**-11 + 2**-24 plus a
  tiny c): rounded once it goes the tiny c's way; through float64 first it would tie to even."""
  out[...] = ml.fma(a[...], b[...], c[...])


def _halfway_make(seed):
  r = rng_of(seed)
  a = r.standard_normal((8, 128)).astype(f32)
  b = r.standard_normal((8, 128)).astype(f32)
  c = r.standard_normal((8, 128)).astype(f32)
  k = np.arange(64)
  a[0, :64] = b[0, :64] = f32(1 + 2.0 ** -12) * np.where(k % 2, f32(1), f32(-1))
  c[0, :64] = np.where(k % 4 < 2, f32(2.0 ** -60), f32(-2.0 ** -60)) * f32(2.0) ** (k // 4 % 8)
  return (a, b, c), {}


case("fma_rounded_once_at_halfway_points", fma_halfway_cases, _halfway_make, lambda a, b, c: fma32(a, b, c), 0)
