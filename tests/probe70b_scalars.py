"""Probe 70b's corpus, its fifth part: the same care on scalars (full reductions, `s[i]` reads, ml.scalar parameters),
which lower to scalar MLIR arithmetic rather than FragmentedArray registers: a compensated grand total over chunk
sums, TwoSum / TwoProd of scalars, scalar NaN, signed zeros and saturating casts, a scalar Welford over elements read
one at a time, and a scalar logsumexp merge of masked partials. Same CASES form as probe70b_sums.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70b_sums import F32, I32, S, f32, fma32, ill_conditioned, kahan_np, rng_of, two_sum

CASES = {}
U32 = jnp.uint32


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


@mg.mgpu_kernel(out_shape=lambda x: S((), F32), grid=(1,))
def kahan_scalar_of_elements(x, out):
  """A CUDA thread's serial Kahan loop over the elements read one at a time (`x[i]`: a scalar each)."""
  s = 0.0
  c = 0.0
  for i in ml.range(x.shape[0]):
    y = x[i] - c
    t = s + y
    c = (t - s) - y
    s = t
  out[...] = s


case("kahan_scalar_of_elements", kahan_scalar_of_elements, lambda s: ((ill_conditioned(s, (512,)),), {}),
     lambda x: kahan_np(x[:, None])[0], 0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((4,), F32), grid=(1,))
def scalar_eft(a, b, out):
  """TwoSum and TwoProd (Dekker's split and ml.fma) of two scalars read from memory."""
  x, y = a[0], b[0]
  s = x + y
  bb = s - x
  out[0] = s
  out[1] = (x - (s - bb)) + (y - bb)
  p = x * y
  out[2] = ml.fma(x, y, -p)
  t = 4097.0 * x
  out[3] = t - (t - x)


def _scalar_eft_ref(a, b):
  x, y = a[0], b[0]
  s, e = two_sum(x, y)
  t = f32(f32(4097.0) * x)
  return np.array([s, e, fma32(x, y, -f32(x * y)), f32(t - f32(t - x))], f32)


case("scalar_eft_two_sum_two_prod_split", scalar_eft,
     lambda s: ((np.array([1.0 + 2.0 ** -20], f32), np.array([3.0 - 2.0 ** -21], f32) * f32(1.7)), {}),
     _scalar_eft_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=(1,))
def scalar_totals_compensated(x, out):
  """Per-row totals as scalars (ml.sum of a row), compensated across rows, each running total stored."""
  s = 0.0
  c = 0.0
  for i in range(x.shape[0]):
    y = ml.sum(x.at[i][...]) - c
    t = s + y
    c = (t - s) - y
    s = t
    out[i] = s


def _totals_ref(x):
  rows = x.astype(np.float64).sum(1).astype(f32)     # each row's sum (exact here: small integers)
  out = []
  s = c = f32(0)
  for y0 in rows:
    y = f32(y0 - c)
    t = f32(s + y)
    c = f32(f32(t - s) - y)
    s = t
    out.append(s)
  return np.array(out, f32)


case("scalar_totals_compensated", scalar_totals_compensated,
     lambda s: (((rng_of(s).integers(-1000, 1000, (8, 128)) * 2.0 ** rng_of(s).integers(-8, 12, (8, 1))).astype(f32),),
                {}), _totals_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: S((8,), F32), grid=(1,))
def scalar_nan_and_zeros(x, out):
  """Scalar max / min of NaN and signed zeros (ml.maximum's, jnp's), a NaN total, abs and copysign of -0.0."""
  a, b = x[0], x[1]             # NaN, 1.0
  z, nz = x[2], x[3]            # 0.0, -0.0
  out[0] = ml.maximum(a, b)
  out[1] = jnp.minimum(b, a)
  out[2] = ml.maximum(z, nz)
  out[3] = ml.minimum(z, nz)
  out[4] = ml.sum(x[...])
  out[5] = ml.abs(nz)
  out[6] = jnp.copysign(b, nz)
  out[7] = ml.where(a > 0, a, 0.0)


def _snz_make(seed):
  x = rng_of(seed).standard_normal(128).astype(f32)
  x[:4] = [np.nan, 1.0, 0.0, -0.0]
  return (x,), {}


case("scalar_nan_and_signed_zeros", scalar_nan_and_zeros, _snz_make,
     lambda x: np.array([np.nan, np.nan, 0.0, -0.0, np.nan, 0.0, -1.0, 0.0], f32), 0)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S(x.shape, U32), S(x.shape, F32)), grid=(1,))
def scalar_casts_at_edges(x, i, u, r):
  """Element-at-a-time casts (a CUDA port's per-thread conversions): NaN to 0, +-inf and out-of-range values
  saturated, negative values to 0 in uint32, ml.round's halves to even."""
  for k in range(x.shape[0]):
    v = x[k]
    i[k] = v.astype(I32)
    u[k] = v.astype(U32)
    r[k] = ml.round(v)


def _sc_make(seed):
  return (np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.5, -2.5, 0.5, -0.7, 4.5e9, 2147483520.0, -1.5, 1.5, 16.5,
                    -0.0, 1e-45], f32),), {}


case("scalar_casts_at_edges", scalar_casts_at_edges, _sc_make,
     lambda x: (np.asarray(jnp.asarray(x).astype(I32)), np.asarray(jnp.asarray(x).astype(U32)), np.round(x)), 0)


@mg.mgpu_kernel(out_shape=lambda x: S((3,), F32), grid=(1,))
def scalar_welford(x, out):
  """Welford over elements read one at a time (the count an int converted per step), the variance sample and
  population."""
  mean = 0.0
  m2 = 0.0
  for k in ml.range(x.shape[0]):
    v = x[k]
    n = (k + 1).astype(F32)
    d = v - mean
    mean = mean + d / n
    m2 = m2 + d * (v - mean)
  out[0] = mean
  out[1] = m2 / x.shape[0]
  out[2] = m2 / (x.shape[0] - 1)


def _sw_ref(x):
  mean = m2 = f32(0)
  for k, v in enumerate(x):
    d = f32(v - mean)
    mean = f32(mean + f32(d / f32(k + 1)))
    m2 = f32(m2 + f32(d * f32(v - mean)))
  n = len(x)
  return np.array([mean, f32(m2 / f32(n)), f32(m2 / f32(n - 1))], f32)


case("scalar_welford_elements", scalar_welford, lambda s: ((rng_of(s).standard_normal(200).astype(f32) + 1e3,), {}),
     _sw_ref, 0)


@mg.mgpu_kernel(out_shape=lambda m, l: S((), F32), grid=(1,))
def scalar_lse_merge(m, l, out):
  """Merging (max, sum) partials of a logsumexp in a scalar loop, some partials from fully masked blocks (m = -inf,
  l = 0): the guard keeps exp(-inf - (-inf)) out."""
  mx = float("-inf")
  sm = 0.0
  for k in ml.range(m.shape[0]):
    mk, lk = m[k], l[k]
    new = ml.maximum(mx, mk)
    safe = ml.where(new == float("-inf"), 0.0, new)
    sm = sm * ml.exp(mx - safe) + lk * ml.exp(mk - safe)
    mx = new
  out[...] = ml.where(sm > 0, mx + ml.log(sm), float("-inf"))


def _slm_make(seed):
  r = rng_of(seed)
  m = (r.standard_normal(16) * 5).astype(f32)
  l = (r.random(16) * 10 + 1).astype(f32)
  m[[0, 3, 4]] = -np.inf
  l[[0, 3, 4]] = 0
  return (m, l), {}


def _slm_ref(m, l):
  keep = l > 0
  return np.log(np.sum(l[keep].astype(np.float64) * np.exp(m[keep].astype(np.float64))))


case("scalar_logsumexp_merge_masked_partials", scalar_lse_merge, _slm_make, _slm_ref, 2e-6)


# ---------------------------------------------------------------- reductions with a combine of the kernel's (Inductor, Triton)
@ml.inline
def welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
  """PyTorch Inductor's triton_helpers.welford_combine (Chan's merge of two (mean, M2, weight) partials)."""
  delta = mean_2 - mean_1
  new_weight = weight_1 + weight_2
  w2_over_w = ml.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
  return mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight


@mg.mgpu_kernel(out_shape=lambda x, **k: (S((x.shape[0],), F32), S((x.shape[0],), F32)),
                grid=lambda x, **k: (x.shape[0] // 8,))
def inductor_welford(x, mean_out, var_out, *, RBLOCK: ml.constexpr = 64):
  """Inductor's generated var_mean: per-lane (mean, M2, weight) updated chunk by chunk (welford_reduce), then the
  lanes merged by tl.reduce with welford_combine."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  mean = ml.zeros((8, RBLOCK), F32)
  m2 = ml.zeros((8, RBLOCK), F32)
  weight = ml.zeros((8, RBLOCK), F32)
  for k in range(x.shape[1] // RBLOCK):
    v = x.at[r, ml.ds(k * RBLOCK, RBLOCK)][...]
    weight = weight + 1.0
    delta = v - mean
    mean = mean + delta / weight
    m2 = m2 + delta * (v - mean)
  mu, q, w = ml.reduce((mean, m2, weight), 1, welford_combine)
  mean_out.at[r][...] = mu
  var_out.at[r][...] = q / w


case("inductor_welford_reduce_combine", inductor_welford,
     lambda s: ((rng_of(s).standard_normal((16, 512)).astype(f32) * 2 + 100,), {}),
     lambda x, **k: (np.mean(x.astype(np.float64), 1), np.var(x.astype(np.float64), 1)), 2e-6)


@ml.inline
def kahan_combine(s1, c1, s2, c2):
  """Two compensated partial sums merged: TwoSum of the sums, the errors added to the compensations."""
  s = s1 + s2
  bb = s - s1
  e = (s1 - (s - bb)) + (s2 - bb)
  return s, c1 + c2 + e


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=(1,))
def kahan_tree_reduce(x, out):
  """A compensated row sum as one tl.reduce of (sum, compensation) pairs: the tree's partial sums merged by TwoSum."""
  v = x[...]
  s, c = ml.reduce((v, ml.zeros(v.shape, F32)), 1, kahan_combine)
  out[...] = s + c


case("kahan_tree_reduce_combine", kahan_tree_reduce, lambda s: ((ill_conditioned(s, (8, 512)),), {}),
     lambda x: x.astype(np.float64).sum(1), 1e-7)
