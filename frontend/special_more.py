"""jax.scipy.special's functions of the gamma family that jax composes of lax.lgamma (probe 56f), in the kernel
language as jax defines them, for jnp_special's forms: float32 operands (16-bit ones converted first and the result
rounded once, as jnp_bits' lgamma). `gammasgn`, `loggamma`, `factorial`, `beta`, `betaln` (with scipy's `algdiv`
for b >= 8), `comb`, `poch`, `multigammaln`, `boxcox` and `boxcox1p`."""
import math

from . import language as ml
from .special_helpers import lgamma

_LOG_PI = math.log(math.pi)


@ml.inline
def gammasgn(x):
  """The sign of gamma(x): NaN at the poles (negative integers, -inf) and at NaN, -1 where floor(x) is odd below 0 and
  at -0.0, else 1 (jax's jnp.select)."""
  floor_x = ml.floor(x)
  neg = x < 0
  minus = (neg & (floor_x % 2 != 0)) | ((x == 0) & (ml.bitcast(x, ml.int32) < 0))
  return ml.where((neg & (x == floor_x)) | ml.isnan(x), float("nan"), ml.where(minus, -1.0, 1.0))


@ml.inline
def loggamma(x):
  """jax's loggamma of reals: lgamma(x) where x > 0, NaN elsewhere."""
  return ml.where(x > 0, lgamma(x), float("nan"))


@ml.inline
def factorial(n):
  """jax's float factorial: exp(lgamma(n + 1)), 0 below 0."""
  return ml.where(n < 0, 0.0, ml.exp(lgamma(n + 1.0)))


@ml.inline
def _algdiv(a, b):
  """scipy's algdiv (jax's third_party betaln): log(gamma(b) / gamma(a + b)) for b >= 8, a <= b."""
  h = a / b
  c = h / (1.0 + h)
  x = h / (1.0 + h)
  d = b + (a - 0.5)
  x2 = x * x
  s3 = 1.0 + (x + x2)
  s5 = 1.0 + (x + x2 * s3)
  s7 = 1.0 + (x + x2 * s5)
  s9 = 1.0 + (x + x2 * s7)
  s11 = 1.0 + (x + x2 * s9)
  t = (1.0 / b) * (1.0 / b)
  w = ((((-0.165322962780713e-02 * s11 * t + 0.837308034031215e-03 * s9) * t + -0.595202931351870e-03 * s7) * t
        + 0.793650666825390e-03 * s5) * t + -0.277777777760991e-02 * s3) * t + 0.833333333333333e-01
  w = w * (c / b)
  u = d * ml.log1p(a / b)
  v = a * (ml.log(b) - 1.0)
  return ml.where(u <= v, (w - v) - u, (w - u) - v)


@ml.inline
def betaln(a, b):
  """jax's betaln: lgamma(a) + lgamma(b) - lgamma(a + b) below b = 8 (a <= b), lgamma(a) + algdiv(a, b) above."""
  lo = ml.minimum(a, b)
  hi = ml.maximum(a, b)
  small = lgamma(lo) + (lgamma(hi) - lgamma(lo + hi))
  large = lgamma(lo) + _algdiv(lo, hi)
  return ml.where(hi < 8.0, small, large)


@ml.inline
def beta(a, b):
  """jax's beta: the product of the three gammasgn times exp(betaln(a, b))."""
  return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * ml.exp(betaln(a, b))


@ml.inline
def comb(n, k):
  """jax's comb without repetition: exp(gammaln(N + 1) - gammaln(k + 1) - gammaln(N + 1 - k)), 0 where k > N,
  N < 0 or k < 0."""
  ok = (k <= n) & (n >= 0) & (k >= 0)
  sn = ml.where(ok, n, 0.0)
  sk = ml.where(ok, k, 0.0)
  r = ml.exp(lgamma(sn + 1.0) - lgamma(sk + 1.0) - lgamma(sn + 1.0 - sk))
  return ml.where(ok, r, 0.0)


@ml.inline
def comb_repeated(n, k):
  """jax's comb(N, k, repetition=True): comb(N + k - 1, k), 1 where k == 0 and N >= 0."""
  return ml.where((k == 0) & (n >= 0), 1.0, comb(n + k - 1.0, k))


@ml.inline
def _gamma(x):
  return gammasgn(x) * ml.exp(lgamma(x))


@ml.inline
def poch(z, m):
  """jax's poch: gamma(z + m) / gamma(z), 1 where m is 0."""
  return ml.where(m == 0.0, 1.0, _gamma(z + m) / _gamma(z))


@ml.inline
def multigammaln(a, d):
  """jax's multigammaln: the sum over i < d of lgamma(a - i / 2), plus d (d - 1) / 4 log(pi)."""
  s = lgamma(a)
  for i in ml.static_range(1, d):
    s = s + lgamma(a - i * 0.5)
  return s + (0.25 * d * (d - 1)) * _LOG_PI


@ml.inline
def _boxcox_of(lx, lmbda):
  """expm1(lmbda lx) / lmbda, lx where lmbda is 0 (jax's boxcox and boxcox1p of their logs)."""
  zero = lmbda == 0
  safe = ml.where(zero, 1.0, lmbda)
  return ml.where(zero, lx, ml.expm1(safe * lx) / safe)


@ml.inline
def boxcox(x, lmbda):
  """jax's boxcox: expm1(lmbda log x) / lmbda, log x where lmbda is 0."""
  return _boxcox_of(ml.log(x), lmbda)


@ml.inline
def boxcox1p(x, lmbda):
  """jax's boxcox1p: expm1(lmbda log1p x) / lmbda, log1p x where lmbda is 0."""
  return _boxcox_of(ml.log1p(x), lmbda)
