"""Helpers in the kernel language for jnp_bits' forms (jnp's and lax's bit-level float functions and lax's special
functions), traced at each call as a user's @ml.inline helper is: each needs a value several times. The bit helpers
take the float's integer twin (`it`: ml.int32 for float32, ml.int16 for 16-bit floats) and its layout (`nmant`
mantissa bits, `mask` of the exponent field, `bias`), computing as jax's source or XLA's expansion does."""
from . import language as ml


@ml.inline
def nextafter(x, y, it, top):
  """XLA's NextAfter of x towards y (same dtype; `top` the integer twin's largest value): y where they are equal,
  the smallest subnormal of y's sign from a zero, else x's bits one up or down in magnitude; NaN from a NaN."""
  xi = ml.bitcast(x, it)
  yi = ml.bitcast(y, it)
  xm = xi & top
  ym = yi & top
  down = (xm > ym) | ((xi < 0) != (yi < 0))
  r = ml.where(down, xi - 1, xi + 1)
  r = ml.where(xm == 0, ml.where(yi < 0, -top, 1), r)
  return ml.where(ml.isnan(x) | ml.isnan(y), float("nan"), ml.where(x == y, y, ml.bitcast(r.astype(it), x.dtype)))


@ml.inline
def frexp(x, it, nmant, mask, bias, tiny):
  """jnp.frexp: (mantissa in [0.5, 1) with x's sign, int32 exponent); subnormals scaled up by 2**nmant first, as
  jax's _normalize_float; x itself and 0 for a zero, an infinity or NaN."""
  sub = ml.abs(x) < tiny
  bits = ml.bitcast(ml.where(sub, x * float(2 ** nmant), x), it)
  e = ml.where(sub, -nmant, 0) + ((bits >> nmant) & mask).astype(ml.int32) - bias + 1
  bits = (bits & ~(mask << nmant)) | ((bias - 1) << nmant)
  keep = ml.isinf(x) | ml.isnan(x) | (x == 0)
  return ml.where(keep, x, ml.bitcast(bits.astype(it), x.dtype)), ml.where(keep, 0, e)


@ml.inline
def ldexp(x, n, it, nmant, mask, bias, tiny):
  """jnp.ldexp(x, n) as jax's source computes it, in x's dtype: frexp's (m, e), e + n as a float of x's dtype, one
  factor of 2 moved into m where that exponent is positive, m * 2 ** e; x itself where it is infinite or zero."""
  m, e = frexp(x, it, nmant, mask, bias, tiny)
  f = e.astype(x.dtype) + n
  m = ml.where(f > 0, m * 2, m)
  f = ml.where(f > 0, f - 1, f)
  return ml.where(ml.isinf(x) | (x == 0), x, m * pow2(f, x.dtype, it, nmant, mask, bias))


@ml.inline
def pow2(f, dtype, it, nmant, mask, bias):
  """2 ** f of whole numbers f, exactly, as bits of `dtype`: normal and subnormal powers, +inf above the range and 0
  below it (jax's `2 ** e`; the GPU's exp2 is not exact everywhere)."""
  k = ml.minimum(ml.maximum(f, -(bias + nmant)), bias + 1).astype(ml.int32)
  normal = (ml.maximum(k, 1 - bias) + bias) << nmant
  sub = 1 << ml.minimum(ml.maximum(k + (bias - 1 + nmant), 0), nmant - 1)
  bits = ml.where(k > bias, mask << nmant, ml.where(k >= 1 - bias, normal, ml.where(k >= 1 - bias - nmant, sub, 0)))
  return ml.bitcast(bits.astype(it), dtype)


@ml.inline
def reduce_precision(x, ut, nbits, src_e, src_m, e_bits, m_bits):
  """XLA's ReducePrecision of x (whose unsigned twin is `ut`, `nbits` wide, with `src_e` exponent and `src_m`
  mantissa bits) to e_bits and m_bits: the mantissa rounded to nearest even by an integer add and a mask, then
  exponents past the narrower range to +-inf and below it to +-0; NaN stays NaN where mantissa bits remain."""
  u = ml.bitcast(x, ut)
  if m_bits < src_m:
    last = 1 << (src_m - m_bits)
    u = ((u + (((u & last) >> (src_m - m_bits)) + ((last >> 1) - 1))) & ((1 << nbits) - last)).astype(ut)
  if e_bits < src_e:
    sign = 1 << (nbits - 1)
    field = ((1 << src_e) - 1) << src_m
    bias = (1 << (src_e - 1)) - 1
    rbias = (1 << (e_bits - 1)) - 1
    ex = u & field
    zero = u & sign
    u = ml.where(ex > ((bias + rbias) << src_m), zero | field, ml.where(ex <= ((bias - rbias) << src_m), zero, u))
  r = ml.bitcast(u.astype(ut), x.dtype)
  if m_bits > 0:
    r = ml.where(ml.isnan(x), x, r)
  return r


@ml.inline
def spacing(x, it, top, tiny, f16):
  """jnp.spacing: nextafter(x, copysign(inf, x)) - x, the smallest subnormal `tiny` of x's sign where that is 0;
  float16's nextafter(x, inf) - x (jax's source: numpy's differs by dtype)."""
  inf = ml.full(x.shape, float("inf"), x.dtype)
  if f16:
    return nextafter(x, inf, it, top) - x
  neg = ml.bitcast(x, it) < 0
  r = nextafter(x, ml.where(neg, -inf, inf), it, top) - x
  return ml.where(r == 0, ml.where(neg, -tiny, tiny), r)
