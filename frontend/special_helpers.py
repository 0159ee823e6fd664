"""lax's special functions in the kernel language, as XLA expands them (its Lanczos approximation, g = 7, the
coefficients of Numerical Recipes' gamma), for jnp_bits' forms: float32 operands (jnp_bits converts 16-bit ones
first and rounds the result once, as XLA upcasts them)."""
import math

from . import language as ml

_G = 7.0
_BASE = 0.99999999999980993227684700473478
_COEFFS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283, 771.3234287776530788486528258894,
           -176.61502916214059906584551354, 12.507343278686904814458936853, -0.13857109526572011689554707,
           9.984369578019570859563e-6, 1.50563273514931155834e-7)
_LOG_PI = math.log(math.pi)
_LOG_SQRT_2PI = (math.log(2.0) + math.log(math.pi)) / 2
_LOG_G_HALF = math.log(_G + 0.5)


@ml.inline
def lgamma(x):
  """XLA's Lgamma: the Lanczos sum of z = x - 1 for x >= 0.5, the reflection log(pi / |sin(pi x)|) - lgamma(1 - x)
  below (inf at the poles: 0, -1, -2, ...), +inf at +-inf."""
  reflect = x < 0.5
  z = ml.where(reflect, -x, x - 1.0)
  s = ml.full(x.shape, _BASE, ml.float32)
  for i in ml.static_range(8):
    s = s + _COEFFS[i] / (z + (i + 1.0))
  t = z + (_G + 0.5)
  log_t = ml.log1p(z * (1 / (_G + 0.5))) + _LOG_G_HALF
  log_y = _LOG_SQRT_2PI + (z + 0.5 - t / log_t) * log_t + ml.log(s)
  a = ml.abs(x)
  frac = a - ml.floor(a)
  frac = ml.where(frac > 0.5, 1.0 - frac, frac)
  denom = ml.log(ml.sin(math.pi * frac))
  reflection = ml.where(ml.isfinite(denom), _LOG_PI - denom - log_y, -denom)
  return ml.where(ml.isinf(x), float("inf"), ml.where(reflect, reflection, log_y))


@ml.inline
def digamma(x):
  """XLA's Digamma: the Lanczos sum's log derivative for x >= 0.5, the reflection psi(1 - x) - pi / tan(pi x)
  below; NaN at the negative poles (-1, -2, ...) and -inf at 0 (jax 0.11's, the H200's: 0.10 gave NaN there)."""
  reflect = x < 0.5
  z = ml.where(reflect, -x, x - 1.0)
  num = ml.zeros(x.shape, ml.float32)
  den = ml.full(x.shape, _BASE, ml.float32)
  for i in ml.static_range(8):
    q = z + (i + 1.0)
    num = num - _COEFFS[i] / (q * q)
    den = den + _COEFFS[i] / q
  t = z + (_G + 0.5)
  log_t = ml.log1p(z * (1 / (_G + 0.5))) + _LOG_G_HALF
  y = log_t + num / den - _G / t
  r = x + ml.abs(ml.floor(x + 0.5))
  reflection = y - math.pi * ml.cos(math.pi * r) / ml.sin(math.pi * r)
  y = ml.where((x < 0) & (x == ml.floor(x)), float("nan"), ml.where(reflect, reflection, y))
  return ml.where(x == 0, float("-inf"), y)
