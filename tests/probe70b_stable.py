"""Probe 70b's corpus, its second part: numerically stable forms. Online softmax and logsumexp merges over chunks and
splits with -inf entries and fully masked rows, log1p / expm1 / softplus / log-sigmoid / cross-entropy in their
stable forms, Horner and Estrin polynomials, Cody-Waite range reduction of large arguments, nextafter / frexp / ldexp
/ spacing, and stochastic and nearest-even rounding to bfloat16 by the bits. Same CASES form as probe70b_sums.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70b_sums import F32, I32, S, f32, fma32, rng_of

CASES = {}
NEG_INF = float("-inf")


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def masked_scores(seed, shape, p_masked=0.3):
  """Scores with -inf entries, row 1 fully masked, row 2 all but one masked."""
  r = rng_of(seed)
  x = (r.standard_normal(shape) * 4).astype(f32)
  x[r.random(shape) < p_masked] = -np.inf
  x[1] = -np.inf
  x[2] = -np.inf
  x[2, 5] = 3.0
  return x


def softmax_ref_zero_rows(x):
  """Softmax whose fully masked rows are 0 (flash attention's convention: l == 0 gives 0)."""
  x = x.astype(np.float64)
  m = np.max(x, 1, keepdims=True)
  m = np.where(np.isneginf(m), 0, m)
  e = np.exp(x - m)
  l = e.sum(1, keepdims=True)
  return np.where(l == 0, 0, e / np.where(l == 0, 1, l))


# ---------------------------------------------------------------- online softmax / logsumexp
@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=lambda x, **k: (x.shape[0] // 8,))
def online_softmax_chunks(x, out, *, BK: ml.constexpr = 64):
  """Triton's online softmax: a running max and a rescaled sum over column chunks, then a second pass to write. The
  max of a masked-so-far row is -inf: the rescale factor exp(m_old - m_new) of -inf - (-inf) is NaN unless guarded,
  as FlashAttention guards it (m_new == -inf: use 0)."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  m = ml.full((8,), NEG_INF, F32)
  l = ml.zeros((8,), F32)
  for k in range(x.shape[1] // BK):
    v = x.at[r, ml.ds(k * BK, BK)][...]
    m_new = ml.maximum(m, ml.max(v, axis=1))
    m_safe = ml.where(m_new == NEG_INF, 0.0, m_new)
    l = l * ml.exp(m - m_safe) + ml.sum(ml.exp(v - m_safe[:, None]), axis=1)
    m = m_new
  m_safe = ml.where(m == NEG_INF, 0.0, m)
  inv = ml.where(l == 0.0, 0.0, 1.0 / l)
  for k in range(x.shape[1] // BK):
    v = x.at[r, ml.ds(k * BK, BK)][...]
    out.at[r, ml.ds(k * BK, BK)][...] = ml.exp(v - m_safe[:, None]) * inv[:, None]


case("online_softmax_chunks_masked_rows", online_softmax_chunks, lambda s: ((masked_scores(s, (16, 256)),), {}),
     lambda x, **k: softmax_ref_zero_rows(x), 2e-6)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=(1,))
def logsumexp_rows_jax(x, out):
  """jax.nn.logsumexp of rows with -inf entries: -inf for a fully masked row, as jax's."""
  out[...] = jax.nn.logsumexp(x[...], axis=1)


def _lse_ref(x):
  with np.errstate(divide="ignore"):
    m = np.max(x.astype(np.float64), 1)
    ms = np.where(np.isneginf(m), 0, m)
    return np.log(np.exp(x.astype(np.float64) - ms[:, None]).sum(1)) + ms


case("logsumexp_rows_with_masked_rows", logsumexp_rows_jax, lambda s: ((masked_scores(s, (8, 128)),), {}), _lse_ref, 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=(1,))
def ml_logsumexp_and_logaddexp(x, lse, pair):
  """ml.logsumexp of the rows, and the first and second halves' logsumexps merged by jnp.logaddexp (-inf and -inf
  give -inf, as jnp's)."""
  v = x[...]
  h = x.shape[1] // 2
  lse[...] = ml.logsumexp(v, axis=1)
  pair[...] = jnp.logaddexp(ml.logsumexp(v[:, :h], axis=1), ml.logsumexp(v[:, h:], axis=1))


case("ml_logsumexp_and_logaddexp_merge", ml_logsumexp_and_logaddexp, lambda s: ((masked_scores(s, (8, 128)),), {}),
     lambda x: (_lse_ref(x), _lse_ref(x)), 1e-6)


@mg.mgpu_kernel(out_shape=lambda o, lse: (S(o.shape[1:], F32), S(lse.shape[1:], F32)), grid=(1,))
def split_k_combine(o, lse, out, lse_out):
  """Split-KV decode's combine (FlashDecoding): partial outputs o[s] and their logsumexps lse[s] merged with weights
  exp(lse[s] - lse_max); a split that saw only masked keys has lse -inf and weight 0; a row all of whose splits are
  masked writes 0 and -inf."""
  m = ml.full(lse.shape[1:], NEG_INF, F32)
  for s in range(lse.shape[0]):
    m = ml.maximum(m, lse.at[s][...])
  m_safe = ml.where(m == NEG_INF, 0.0, m)
  acc = ml.zeros(o.shape[1:], F32)
  den = ml.zeros(lse.shape[1:], F32)
  for s in range(lse.shape[0]):
    w = ml.exp(lse.at[s][...] - m_safe)
    acc += o.at[s][...] * w[:, None]
    den += w
  out[...] = ml.where(den[:, None] > 0, acc / den[:, None], 0.0)
  lse_out[...] = ml.where(den > 0, m_safe + ml.log(den), NEG_INF)


def _split_make(seed):
  r = rng_of(seed)
  o = r.standard_normal((4, 16, 64)).astype(f32)
  lse = (r.standard_normal((4, 16)) * 3).astype(f32)
  lse[1, :4] = -np.inf
  lse[:, 7] = -np.inf
  o[:, 7] = 0
  return (o, lse), {}


def _split_ref(o, lse):
  m = lse.max(0)
  ms = np.where(np.isneginf(m), 0, m).astype(np.float64)
  w = np.exp(lse - ms)
  den = w.sum(0)
  with np.errstate(invalid="ignore", divide="ignore"):
    out = np.where(den[:, None] > 0, (o * w[:, :, None]).sum(0) / den[:, None], 0)
    return out, np.where(den > 0, ms + np.log(den), -np.inf)


case("split_k_combine_masked_splits", split_k_combine, _split_make, _split_ref, 2e-6)


@mg.mgpu_kernel(out_shape=lambda x, m: x, grid=(1,))
def softmax_where_fully_masked(x, m, out):
  """ml.softmax(where=) as jax.nn.softmax(where=): masked entries 0, a row with no entry kept all 0."""
  out[...] = ml.softmax(x[...], axis=1, where=m[...] != 0)


def _sw_make(seed):
  r = rng_of(seed)
  m = (r.random((8, 128)) < 0.5).astype(np.int8)
  m[3] = 0
  return (r.standard_normal((8, 128)).astype(f32) * 3, m), {}


case("softmax_where_fully_masked_row", softmax_where_fully_masked, _sw_make,
     lambda x, m: np.asarray(jax.nn.softmax(x, axis=1, where=m != 0)), 2e-6)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def log_softmax_with_neg_inf(x, out):
  """jax.nn.log_softmax of rows holding -inf entries (-inf stays -inf; a fully masked row is NaN, as jax's)."""
  out[...] = jax.nn.log_softmax(x[...], axis=1)


case("log_softmax_with_neg_inf", log_softmax_with_neg_inf, lambda s: ((masked_scores(s, (8, 128)),), {}),
     lambda x: np.asarray(jax.nn.log_softmax(x, axis=1)), 1e-6)


# ---------------------------------------------------------------- stable elementary forms
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x), grid=(1,))
def log1p_expm1_small(x, a, b, c, d):
  """log1p and expm1 near 0 (where log(1 + x) and exp(x) - 1 lose every digit), and their jnp spellings."""
  v = x[...]
  a[...] = ml.log1p(v)
  b[...] = ml.expm1(v)
  c[...] = jnp.log1p(v)
  d[...] = jnp.expm1(v)


def _tiny(seed):
  r = rng_of(seed)
  return (r.standard_normal((8, 128)).astype(f32) * np.float32(10.0) ** r.integers(-30, 0, (8, 128)).astype(f32),), {}


case("log1p_expm1_small", log1p_expm1_small, _tiny,
     lambda x: (np.log1p(x), np.expm1(x), np.log1p(x), np.expm1(x)), 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x), grid=(1,))
def softplus_logsigmoid(x, sp, ls, sp2):
  """softplus and log-sigmoid for |x| up to 100 (exp(100) overflows float32): jax.nn's, and softplus written the
  stable way by hand."""
  v = x[...]
  sp[...] = jax.nn.softplus(v)
  ls[...] = jax.nn.log_sigmoid(v)
  sp2[...] = ml.maximum(v, 0.0) + ml.log1p(ml.exp(-ml.abs(v)))


def _sp_ref(x):
  x = x.astype(np.float64)
  sp = np.logaddexp(x, 0)
  return sp, -np.logaddexp(-x, 0), sp


case("softplus_logsigmoid_large", softplus_logsigmoid,
     lambda s: ((np.linspace(-100, 100, 1024, dtype=f32).reshape(8, 128),), {}), _sp_ref, 1e-6)


@mg.mgpu_kernel(out_shape=lambda x, z: S((x.shape[0],), F32), grid=(1,))
def bce_with_logits(x, z, out):
  """PyTorch's binary_cross_entropy_with_logits, stable form: max(x, 0) - x * z + log1p(exp(-|x|)), row means."""
  v, t = x[...], z[...]
  loss = ml.maximum(v, 0.0) - v * t + ml.log1p(ml.exp(-ml.abs(v)))
  out[...] = ml.mean(loss, axis=1)


case("bce_with_logits_stable", bce_with_logits,
     lambda s: ((rng_of(s).standard_normal((8, 256)).astype(f32) * 40, (rng_of(s + 1).random((8, 256)) < 0.5).astype(f32)),
                {}),
     lambda x, z: np.mean(np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x.astype(np.float64)))), 1), 1e-6)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=(1,))
def hypot_and_logaddexp(a, b, out):
  """jnp.hypot past float32's squares (1e30) and below them (1e-30), and jnp.logaddexp of large arguments."""
  x, y = a[...], b[...]
  out[...] = jnp.hypot(x, y) + jnp.logaddexp(x, y) * 0.0


def _hyp_make(seed):
  r = rng_of(seed)
  sc = np.float32(10.0) ** r.integers(-30, 31, (8, 128)).astype(f32)
  return (r.standard_normal((8, 128)).astype(f32) * sc, r.standard_normal((8, 128)).astype(f32) * sc), {}


case("hypot_no_overflow", hypot_and_logaddexp, _hyp_make,
     lambda a, b: np.hypot(a.astype(np.float64), b.astype(np.float64)), 2e-7)


# ---------------------------------------------------------------- polynomials
COEFFS = [1.0 / 5040, -1.0 / 720, 1.0 / 120, -1.0 / 24, 1.0 / 6, -0.5, 1.0, 1.0]      # a degree-7 polynomial


def horner_np(x, coeffs=COEFFS):
  acc = np.full_like(x, f32(coeffs[0]))
  for c in coeffs[1:]:
    acc = f32(f32(acc * x) + f32(c))
  return acc


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def horner(x, out):
  """Horner's rule with a Python list of coefficients, each step a product and a sum rounded apart (as NumPy and
  jnp compute it; a contracted step is an FMA and differs in the last bits)."""
  v = x[...]
  acc = ml.full(v.shape, COEFFS[0], F32)
  for c in COEFFS[1:]:
    acc = acc * v + c
  out[...] = acc


case("horner_rounded_steps", horner, lambda s: ((rng_of(s).uniform(-2, 2, (8, 128)).astype(f32),), {}), horner_np, 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def horner_fma(x, out):
  """Horner's rule by ml.fma (CUDA's fmaf, Triton's tl.fma): each step rounded once."""
  v = x[...]
  acc = ml.full(v.shape, COEFFS[0], F32)
  for c in COEFFS[1:]:
    acc = ml.fma(acc, v, c)
  out[...] = acc


def _horner_fma_ref(x):
  acc = np.full_like(x, f32(COEFFS[0]))
  for c in COEFFS[1:]:
    acc = fma32(acc, x, f32(c))
  return acc


case("horner_fma_steps", horner_fma, lambda s: ((rng_of(s).uniform(-2, 2, (8, 128)).astype(f32),), {}),
     _horner_fma_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def polyval_jnp(x, a, b):
  """jnp.polyval of a static table, and of the table as a jnp array: each step's product and sum rounded apart, as
  NumPy's polyval and eager jnp's ops round them (jnp.polyval itself is jitted, and XLA on the CPU contracts its
  steps into FMAs: it differs from both in the last bit in a third of these values)."""
  v = x[...]
  a[...] = jnp.polyval(jnp.array(COEFFS), v)
  b[...] = jnp.polyval(COEFFS, v)


case("polyval_jnp", polyval_jnp, lambda s: ((rng_of(s).uniform(-2, 2, (8, 128)).astype(f32),), {}),
     lambda x: (horner_np(x), np.polyval(np.array(COEFFS, f32), x)), 0)


def estrin_np(x, c=COEFFS[::-1]):
  x2 = f32(x * x)
  x4 = f32(x2 * x2)
  p01 = f32(f32(c[1] * x) + f32(c[0]))
  p23 = f32(f32(f32(c[3]) * x) + f32(c[2]))
  p45 = f32(f32(f32(c[5]) * x) + f32(c[4]))
  p67 = f32(f32(f32(c[7]) * x) + f32(c[6]))
  return f32(f32(f32(f32(p67 * x2) + p45) * x4) + f32(f32(p23 * x2) + p01))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def estrin(x, out):
  """Estrin's scheme for the same polynomial (c0 + c1 x + ...): pairs, then x**2 and x**4, shorter dependency chains."""
  c = COEFFS[::-1]
  v = x[...]
  x2 = v * v
  x4 = x2 * x2
  p01 = c[1] * v + c[0]
  p23 = c[3] * v + c[2]
  p45 = c[5] * v + c[4]
  p67 = c[7] * v + c[6]
  out[...] = (p67 * x2 + p45) * x4 + (p23 * x2 + p01)


case("estrin_rounded_steps", estrin, lambda s: ((rng_of(s).uniform(-2, 2, (8, 128)).astype(f32),), {}), estrin_np, 0)


# ---------------------------------------------------------------- range reduction
PIO2_1 = 1.5703125                      # pi / 2 in three parts (Cody-Waite), the first two with few bits
PIO2_2 = 4.837512969970703125e-4
PIO2_3 = 7.54978995489188216e-8
SIN_C = [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1]
COS_C = [2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2]


def _cody_waite_np(x):
  k = np.round(f32(x * f32(2 / np.pi)))
  r = f32(f32(f32(x - f32(k * f32(PIO2_1))) - f32(k * f32(PIO2_2))) - f32(k * f32(PIO2_3)))
  return k, r


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def cody_waite_reduce(x, k_out, r_out):
  """Cody-Waite reduction by pi/2 in three parts: each k * part exact (few bits), each subtraction rounded apart. A
  contracted `x - k * PIO2_1` would be exact too but the later steps, fused, give other bits than interpret mode."""
  v = x[...]
  k = ml.round(v * (2 / np.pi))
  r = ((v - k * PIO2_1) - k * PIO2_2) - k * PIO2_3
  k_out[...] = k
  r_out[...] = r


case("cody_waite_reduce", cody_waite_reduce, lambda s: ((rng_of(s).uniform(-2000, 2000, (8, 128)).astype(f32),), {}),
     _cody_waite_np, 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def sin_by_reduction(x, out):
  """sin of arguments up to 2000 by the reduction above, the quadrant by k % 4 (integer), minimax polynomials on
  [-pi/4, pi/4] (Cephes' sinf / cosf)."""
  v = x[...]
  k = ml.round(v * (2 / np.pi))
  r = ((v - k * PIO2_1) - k * PIO2_2) - k * PIO2_3
  z = r * r
  s = ((SIN_C[0] * z + SIN_C[1]) * z + SIN_C[2]) * z * r + r
  c = ((COS_C[0] * z + COS_C[1]) * z + COS_C[2]) * z * z - 0.5 * z + 1.0
  q = k.astype(I32) % 4
  y = ml.where(q % 2 == 0, s, c)
  out[...] = ml.where(q >= 2, -y, y)


case("sin_by_cody_waite", sin_by_reduction, lambda s: ((rng_of(s).uniform(-2000, 2000, (8, 128)).astype(f32),), {}),
     lambda x: np.sin(x.astype(np.float64)), 2e-6)


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def sin_cos_large_args(x, s, c):
  """ml.sin and ml.cos of arguments up to 1e6 (libdevice's sinf reduces them exactly; NumPy in interpret mode)."""
  v = x[...]
  s[...] = ml.sin(v)
  c[...] = jnp.cos(v)


case("sin_cos_large_args", sin_cos_large_args,
     lambda s: ((rng_of(s).uniform(-1e6, 1e6, (8, 128)).astype(f32),), {}),
     lambda x: (np.sin(x.astype(np.float64)), np.cos(x.astype(np.float64))), 1e-6)
