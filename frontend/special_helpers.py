"""lax's special functions in the kernel language, as XLA expands them (its Lanczos approximation, g = 7, the
coefficients of Numerical Recipes' gamma), and jax.scipy.special's ndtri, log_ndtr, i0e and i1e as jax defines them
(probe 51b), for jnp_bits' forms: float32 operands (jnp_bits converts 16-bit ones first and rounds the result once,
as XLA upcasts them)."""
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


# jax.scipy.special's ndtri (Cephes' rational approximations), log_ndtr (float32's segments at -10 and 5, the
# asymptotic series of order 3 below) and lax's i0e / i1e (Cephes' float32 Chebyshev series), as jax defines them
_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)
_I0E_A = (-1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
          1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
          -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
          1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
          -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
          1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0E_B = (3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
          2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
          8.04490411014108831608E-1)
_I1E_A = (9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
          -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
          4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
          -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
          2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
          -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1E_B = (-3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
          -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
          7.78576235018280120474E-1)
_HALF_SQRT_2 = 0.5 * math.sqrt(2.0)


@ml.inline
def _polyval(coeffs, x):
  """jnp.polyval's Horner steps (the highest power first)."""
  y = ml.zeros(x.shape, ml.float32)
  for i in ml.static_range(len(coeffs)):
    y = y * x + coeffs[i]
  return y


@ml.inline
def _chebyshev(coeffs, x):
  """Cephes' chbevl, as lax's evaluate_chebyshev_polynomial writes it."""
  b0 = ml.zeros(x.shape, ml.float32)
  b1 = b0
  b2 = b0
  for i in ml.static_range(len(coeffs)):
    b2 = b1
    b1 = b0
    b0 = x * b1 - b2 + coeffs[i]
  return 0.5 * (b0 - b2)


@ml.inline
def ndtri(p):
  """jax.scipy.special.ndtri (float32): Cephes' rational approximation near 1/2, the asymptotic ones in the tails;
  -inf at 0, inf at 1, NaN outside [0, 1]."""
  mcp = ml.where(p > float(-math.expm1(-2.0)), 1.0 - p, p)
  mcp = ml.where(mcp == 0.0, 0.5, mcp)
  w = mcp - 0.5
  ww = w * w
  big = (w + w * ww * (_polyval(_NDTRI_P0, ww) / _polyval(_NDTRI_Q0, ww))) * -math.sqrt(2.0 * math.pi)
  z = ml.sqrt(-2.0 * ml.log(mcp))
  first = z - ml.log(z) / z
  small = first - _polyval(_NDTRI_P2, 1 / z) / _polyval(_NDTRI_Q2, 1 / z) / z
  other = first - _polyval(_NDTRI_P1, 1 / z) / _polyval(_NDTRI_Q1, 1 / z) / z
  x = ml.where(mcp > math.exp(-2.0), big, ml.where(z >= 8.0, small, other))
  x = ml.where(p > float(1.0 - math.exp(-2.0)), x, -x)
  return ml.where(p == 0.0, float("-inf"), ml.where(p == 1.0, float("inf"), x))


@ml.inline
def _ndtr(x):
  w = x * _HALF_SQRT_2
  z = ml.abs(w)
  return 0.5 * ml.where(z < _HALF_SQRT_2, 1.0 + ml.erf(w), ml.where(w > 0, 2.0 - ml.erfc(z), ml.erfc(z)))


@ml.inline
def log_ndtr(x):
  """jax.scipy.special.log_ndtr (float32, series_order=3): -ndtr(-x) above 5, log(ndtr(x)) down to -10, the
  asymptotic series below."""
  upper = x > 5.0
  r = _ndtr(ml.where(upper, -x, ml.maximum(x, -10.0)))
  lo = ml.minimum(x, -10.0)
  x2 = lo * lo
  series = 1.0 + 3.0 / (x2 * x2) - (1.0 / x2 + 15.0 / (x2 * x2 * x2))
  lower = -0.5 * x2 - ml.log(-lo) - float(0.5 * math.log(2.0 * math.pi)) + ml.log(series)
  return ml.where(upper, -r, ml.where(x > -10.0, ml.log(r), lower))


@ml.inline
def i0e(x):
  """lax.bessel_i0e (float32): Cephes' Chebyshev series of [0, 8] and of 32 / |x| beyond."""
  a = ml.abs(x)
  return ml.where(a <= 8.0, _chebyshev(_I0E_A, 0.5 * a - 2.0), _chebyshev(_I0E_B, 32.0 / a - 2.0) / ml.sqrt(a))


@ml.inline
def i1e(x):
  """lax.bessel_i1e (float32): Cephes' Chebyshev series times |x| on [0, 8], of 32 / |x| beyond; odd in x."""
  a = ml.abs(x)
  y = ml.where(a <= 8.0, _chebyshev(_I1E_A, 0.5 * a - 2.0) * a, _chebyshev(_I1E_B, 32.0 / a - 2.0) / ml.sqrt(a))
  return ml.where(x < 0, -y, y)


@ml.inline
def gamma(x):
  """jax.scipy.special.gamma of reals: gammasgn(x) * exp(lgamma(x)), the sign NaN at the poles (and NaN), -1 where
  floor(x) is odd below 0 and at -0.0, else 1 (jax's)."""
  floor_x = ml.floor(x)
  neg = x < 0
  minus = (neg & (floor_x % 2 != 0)) | ((x == 0) & (ml.bitcast(x, ml.int32) < 0))
  sign = ml.where((neg & (x == floor_x)) | ml.isnan(x), float("nan"), ml.where(minus, -1.0, 1.0))
  return sign * ml.exp(lgamma(x))


@ml.inline
def ieee_remainder(x, y):
  """libdevice's remainder(x, y) (C's remainderf, IEEE 754's): x - n * y with n the quotient x / y rounded to the
  nearest integer, ties to even, exactly (fdlibm's steps: C's exact fmod by 2|y|, then |y| taken off once past half
  of it, twice where that leaves half or more), float32 operands; NaN where y is 0 or x infinite, as C's."""
  p = ml.abs(y)
  a = ml.abs(ml.fmod(x, p + p))
  h = 0.5 * p
  b = a - p
  a = ml.where(a > h, ml.where(b >= h, b - p, b), a)
  return ml.where(x < 0.0, -a, a)
