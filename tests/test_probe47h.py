"""Probe 47h (row statistics and reductions in every shape): jnp's statistics that ml has no function of its own
for, called on register values as Pallas kernels call them, compute as jnp's own source writes them in ml.*
reductions and elementwise math (frontend/jnp_stats.py): `jnp.linalg.norm` and `jnp.linalg.vector_norm` (L2,
L1, +-inf, 0 and p norms along an axis, a matrix's Frobenius, 1- and inf-norms), `jnp.nansum`, `nanmean`, `nanmax`,
`nanmin`, `nanvar`, `nanstd`, `jnp.ptp`, `jnp.count_nonzero`, `jnp.average` (with weights), `jnp.logaddexp`,
`jnp.prod` along one axis, and jax.lax's `reduce_max`, `reduce_min`, `reduce_sum`, `reduce_prod`, `reduce_and`,
`reduce_or`. Each was MG003 ("norm cannot take a register tensor inside a kernel") whose hint wrote the formula.
`dtype=` of a mean, var or std (`jnp.mean(v_bf16, axis=1, dtype=jnp.float32)`, `x.mean(dtype=...)`, `ml.var(...,
dtype=...)`) computes as jnp's: it was MG003 ("jnp.mean's dtype= has no counterpart in a kernel")."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32, I8, I32 = jnp.float16, jnp.bfloat16, jnp.float32, jnp.int8, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _input(shape, dtype=F32, seed=0, scale=1.0, shift=0.0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * scale + shift, dtype)


def _with_nans(shape, seed=1):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  x[1, 3] = np.nan
  x[2, :] = np.nan            # a row of NaN only: jnp's nan statistics give NaN there
  x[3, ::3] = np.nan
  x[4, 7] = np.inf
  return jnp.asarray(x)


def _close(got, want, rtol=1e-5, atol=1e-6):
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype, (got.dtype, want.dtype)
  np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def _rows(x):
  return S((x.shape[0],), F32)


# ---------------------------------------------------------------- dtype= of a mean, var or std
@mg.mgpu_kernel(out_shape=lambda x: (_rows(x), _rows(x), _rows(x), _rows(x), S((x.shape[0], 1), F32)),
                grid=lambda x: (x.shape[0] // 8,))
def stats_in_float32(x, mean_j, mean_m, var_j, std_j, rstd):
  """A layer norm's statistics of bfloat16 rows accumulated in float32, as Pallas code asks for them."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  mean_j.at[r][...] = jnp.mean(v, axis=1, dtype=jnp.float32)
  mean_m.at[r][...] = v.mean(axis=-1, dtype=jnp.float32)
  var_j.at[r][...] = jnp.var(v, axis=1, dtype=jnp.float32)
  std_j.at[r][...] = jnp.std(v, 1, jnp.float32, ddof=1)
  rstd.at[r, :][...] = lax.rsqrt(ml.var(v, axis=1, keepdims=True, dtype=jnp.float32) + 1e-5)


def test_a_mean_var_and_std_take_jnps_dtype():
  x = _input((16, 512), BF16, 0, 2.0, 1.0)
  xf = x.astype(F32)
  mj, mm, vj, sj, rs = stats_in_float32(x, interpret=True)
  _close(mj, jnp.mean(x, axis=1, dtype=F32))
  _close(mm, jnp.mean(xf, axis=1))
  _close(vj, jnp.var(x, axis=1, dtype=F32), rtol=1e-5)
  _close(sj, jnp.std(x, 1, F32, ddof=1), rtol=1e-5)
  _close(rs, lax.rsqrt(jnp.var(xf, axis=1, keepdims=True) + 1e-5), rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), BF16), S((x.shape[0], 1), F16), S((x.shape[0],), BF16),
                                     S((x.shape[0],), F32)))
def narrow_stats(x, mean16, var16, std16, where_mean):
  v = x[...]
  mean16[...] = jnp.mean(v, axis=1, dtype=jnp.bfloat16)
  var16[...] = jnp.var(v, axis=1, dtype=jnp.float16, keepdims=True)
  std16[...] = ml.std(v, axis=1, dtype=jnp.bfloat16)
  where_mean[...] = ml.mean(v.astype(jnp.int8), axis=1, dtype=jnp.float32, where=v > 0)


def test_a_narrow_dtype_computes_in_float32_and_rounds_once():
  """jnp.var and std with a 16-bit dtype compute in float32 and round once (bit for bit here); jnp.mean with one
  sums in the 16-bit type on the CPU, so the kernel's mean (float32, rounded once) is within an ulp of the exact
  mean, as ml.sum's dtype= is."""
  x = _input((16, 256), F32, 3, 3.0, 1.0)
  m16, v16, s16, wm = narrow_stats(x, interpret=True)
  exact = np.asarray(x, np.float64).mean(axis=1)
  assert np.asarray(m16).dtype == jnp.dtype(BF16)
  np.testing.assert_array_equal(np.asarray(m16), np.asarray(jnp.asarray(exact.astype(np.float32), BF16)))
  np.testing.assert_array_equal(np.asarray(v16), np.asarray(jnp.var(x, axis=1, dtype=F16, keepdims=True)))
  np.testing.assert_array_equal(np.asarray(s16), np.asarray(jnp.std(x, axis=1, dtype=BF16)))
  _close(wm, jnp.mean(x.astype(I8), axis=1, dtype=F32, where=x > 0))


@mg.mgpu_kernel(out_shape=lambda x: (_rows(x), S((x.shape[0], 1), F32), _rows(x), _rows(x)))
def given_means(x, var, std1, nan_var, masked):
  """jnp's var and std of a mean computed already (`mean=`): a layer norm's mean reused for the variance."""
  v = x[...]
  mu = jnp.mean(v, axis=1, keepdims=True)
  var[...] = jnp.var(v, axis=1, mean=mu)
  std1[...] = jnp.std(v, axis=1, ddof=1, keepdims=True, mean=mu)
  nan_var[...] = jnp.nanvar(v, axis=1, mean=jnp.nanmean(v, axis=1, keepdims=True))
  masked[...] = ml.var(v, axis=1, mean=1.0, where=v > 0)


def test_var_and_std_take_a_mean_given():
  x = _with_nans((8, 128))
  clean = jnp.where(jnp.isnan(x), 0.5, x)
  mu = clean.mean(axis=1, keepdims=True)
  got = given_means(clean, interpret=True)
  for g, w in zip(got, (jnp.var(clean, axis=1, mean=mu), jnp.std(clean, axis=1, ddof=1, keepdims=True, mean=mu))):
    _close(g, w, rtol=1e-5)
  _close(given_means(x, interpret=True)[2], jnp.nanvar(x, axis=1, mean=jnp.nanmean(x, axis=1, keepdims=True)),
         rtol=1e-5)
  _close(got[3], jnp.var(clean, axis=1, mean=1.0, where=clean > 0), rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), I32))
def integer_mean(x, out):
  v = x[...]
  out[...] = jnp.mean(v, axis=1, dtype=jnp.int32)


def test_an_integer_dtype_of_a_mean_says_to_give_a_float_one():
  expect(integer_mean, [S((8, 128), I8)], mg.UnsupportedDtypeError, "jnp.mean(v",
         "jnp.mean (as ml.mean) with dtype=int32 is not supported (a mean, var or std computes in a float of 16 bits"
         " or more)", hint="give a float dtype, ml.mean(v, dtype=jnp.float32), or convert the result:"
         " ml.mean(v).astype(jnp.int32)")


# ---------------------------------------------------------------- jnp.linalg.norm and vector_norm
@mg.mgpu_kernel(out_shape=lambda x: (x, x, _rows(x), _rows(x), _rows(x), _rows(x), _rows(x)))
def vector_norms(x, l2n, l1n, linf, lminf, l0, l3, vn):
  v = x[...]
  l2n[...] = v / jnp.linalg.norm(v, axis=-1, keepdims=True)
  l1n[...] = v / jnp.linalg.norm(v, ord=1, axis=1, keepdims=True)
  linf[...] = jnp.linalg.norm(v, ord=jnp.inf, axis=1)
  lminf[...] = jnp.linalg.norm(v, ord=-np.inf, axis=1)
  l0[...] = jnp.linalg.norm(v, ord=0, axis=1)
  l3[...] = jnp.linalg.norm(v, ord=3, axis=1)
  vn[...] = jnp.linalg.vector_norm(v, axis=-1)


@mg.mgpu_kernel(out_shape=lambda x: (S((), F32),) * 5)
def matrix_norms(x, fro, one, inf, minus_one, flat_l1):
  v = x[...]
  fro[...] = jnp.linalg.norm(v)
  one[...] = jnp.linalg.norm(v, ord=1)
  inf[...] = jnp.linalg.norm(v, ord=jnp.inf)
  minus_one[...] = jnp.linalg.norm(v, -1, (0, 1))
  flat_l1[...] = jnp.linalg.vector_norm(v, ord=1)


def test_jnp_linalg_norms_compute_as_jnps():
  x = _input((16, 128), F32, 4)
  x = x.at[5, :64].set(0.0)
  for got, want in zip(vector_norms(x, interpret=True), (
      x / jnp.linalg.norm(x, axis=-1, keepdims=True), x / jnp.linalg.norm(x, ord=1, axis=1, keepdims=True),
      jnp.linalg.norm(x, ord=jnp.inf, axis=1), jnp.linalg.norm(x, ord=-np.inf, axis=1),
      jnp.linalg.norm(x, ord=0, axis=1), jnp.linalg.norm(x, ord=3, axis=1), jnp.linalg.vector_norm(x, axis=-1))):
    _close(got, want, rtol=2e-5)
  for got, want in zip(matrix_norms(x, interpret=True), (
      jnp.linalg.norm(x), jnp.linalg.norm(x, ord=1), jnp.linalg.norm(x, ord=jnp.inf), jnp.linalg.norm(x, -1, (0, 1)),
      jnp.linalg.vector_norm(x, ord=1))):
    _close(got, want, rtol=2e-5)


@mg.mgpu_kernel(out_shape=lambda a, p, n: S((a.shape[0],), F32), grid=lambda a, p, n: (a.shape[0] // 8,))
def triplet_distances(a, p, n, out):
  """Norms of differences of bfloat16 embeddings, converted first (a triplet loss's distances)."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  x = a.at[r, :][...].astype(jnp.float32)
  dp = jnp.linalg.norm(x - p.at[r, :][...].astype(jnp.float32), axis=1)
  dn = jnp.linalg.norm(x - n.at[r, :][...].astype(jnp.float32), axis=1)
  out.at[r][...] = jnp.maximum(dp - dn + 1.0, 0.0)


def test_a_norm_of_a_difference_of_converted_rows():
  a, p, n = (_input((16, 256), BF16, s) for s in (5, 6, 7))
  f = lambda t: t.astype(F32)
  want = jnp.maximum(jnp.linalg.norm(f(a) - f(p), axis=1) - jnp.linalg.norm(f(a) - f(n), axis=1) + 1.0, 0.0)
  _close(triplet_distances(a, p, n, interpret=True), want, rtol=1e-5)


# ---------------------------------------------------------------- jnp's nan statistics
@mg.mgpu_kernel(out_shape=lambda x: (_rows(x),) * 6 + (S((), F32), S((x.shape[0], 1), F32), _rows(x), _rows(x)))
def nan_stats(x, s, m, hi, lo, v, sd, whole_max, var1, hi0, pos_sum):
  t = x[...]
  s[...] = jnp.nansum(t, axis=1)
  m[...] = jnp.nanmean(t, axis=1)
  hi[...] = jnp.nanmax(t, axis=1)
  lo[...] = jnp.nanmin(t, axis=-1)
  v[...] = jnp.nanvar(t, axis=1)
  sd[...] = jnp.nanstd(t, axis=1)
  whole_max[...] = jnp.nanmax(t)
  var1[...] = jnp.nanvar(t, axis=1, ddof=1, keepdims=True)
  hi0[...] = jnp.nanmax(t, axis=1, initial=0.5)
  pos_sum[...] = jnp.nansum(t, axis=1, where=t > 0)


def test_jnps_nan_statistics_compute_as_jnps():
  x = _with_nans((8, 128))
  want = (jnp.nansum(x, axis=1), jnp.nanmean(x, axis=1), jnp.nanmax(x, axis=1), jnp.nanmin(x, axis=-1),
          jnp.nanvar(x, axis=1), jnp.nanstd(x, axis=1), jnp.nanmax(x), jnp.nanvar(x, axis=1, ddof=1, keepdims=True),
          jnp.nanmax(x, axis=1, initial=0.5), jnp.nansum(x, axis=1, where=x > 0))
  for got, w in zip(nan_stats(x, interpret=True), want):
    _close(got, w, rtol=1e-5, atol=1e-5)
  assert np.isnan(np.asarray(want[1])[2]) and np.isnan(np.asarray(want[2])[2])     # (the all-NaN row)


@mg.mgpu_kernel(out_shape=lambda x, w: (_rows(x), S((x.shape[0], 1), F32), S((x.shape[0],), I32), S((), I32),
                                        _rows(x), _rows(x), S((x.shape[1],), F32)))
def spread_counts_averages(x, w, span, span_kd, nonzero, positives, avg_w, avg_w1, avg_cols):
  t = x[...]
  span[...] = jnp.ptp(t, axis=1)
  span_kd[...] = jnp.ptp(t, axis=1, keepdims=True)
  nonzero[...] = jnp.count_nonzero(jnp.round(t), axis=1)
  positives[...] = jnp.count_nonzero(t > 0)
  avg_w[...] = jnp.average(t, axis=1, weights=jnp.abs(t) + 0.5)
  avg_w1[...] = jnp.average(t, axis=1, weights=w[...])
  avg_cols[...] = jnp.average(t, axis=0)


def test_ptp_count_nonzero_and_average_compute_as_jnps():
  x = _input((16, 128), F32, 8, 1.5)
  w = jnp.abs(_input((128,), F32, 9)) + 0.25
  want = (jnp.ptp(x, axis=1), jnp.ptp(x, axis=1, keepdims=True), jnp.count_nonzero(jnp.round(x), axis=1),
          jnp.count_nonzero(x > 0), jnp.average(x, axis=1, weights=jnp.abs(x) + 0.5),
          jnp.average(x, axis=1, weights=w), jnp.average(x, axis=0))
  for got, v in zip(spread_counts_averages(x, w, interpret=True), want):
    _close(got, v, rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, x))
def log_add_exps(x, y, both, with_zero, mixed):
  a, b = x[...], y[...]
  both[...] = jnp.logaddexp(a, b)
  with_zero[...] = jnp.logaddexp(a, 0.0)
  mixed[...] = jnp.logaddexp(a, b.astype(jnp.bfloat16))


def test_jnp_logaddexp_keeps_equal_infinities_and_nan():
  x = np.array(_input((8, 128), F32, 10, 3.0))
  y = np.array(_input((8, 128), F32, 11, 3.0))
  x[0, :4] = y[0, :4] = [np.inf, -np.inf, 5.0, -np.inf]
  x[0, 4], y[0, 5], x[1, 0], y[1, 0] = np.nan, np.nan, 100.0, -100.0
  x, y = jnp.asarray(x), jnp.asarray(y)
  for got, want in zip(log_add_exps(x, y, interpret=True), (
      jnp.logaddexp(x, y), jnp.logaddexp(x, 0.0), jnp.logaddexp(x, y.astype(BF16)))):
    _close(got, want, rtol=1e-6)


# ---------------------------------------------------------------- products and lax's reductions
@mg.mgpu_kernel(out_shape=lambda x, q: (_rows(x), S((1, x.shape[1]), F32), S((q.shape[0],), I32), _rows(x)))
def products(x, q, rows, cols_kd, int_rows, lax_rows):
  t = x[...]
  rows[...] = jnp.prod(t, axis=1)
  cols_kd[...] = jnp.prod(t, axis=0, keepdims=True)
  int_rows[...] = jnp.prod(q[...], axis=-1)
  lax_rows[...] = lax.reduce_prod(t, (1,))


@mg.mgpu_kernel(out_shape=lambda x, q: (_rows(x), S((x.shape[1],), F32), S((), F32), S((q.shape[0],), I8),
                                        S((x.shape[0],), jnp.bool_), S((x.shape[0],), jnp.bool_)))
def lax_reductions(x, q, hi, lo, total, wrapped, some, every):
  t = x[...]
  hi[...] = lax.reduce_max(t, axes=(1,))
  lo[...] = lax.reduce_min(t, (0,))
  total[...] = lax.reduce_sum(t, (0, 1))
  wrapped[...] = lax.reduce_sum(q[...], (1,))
  some[...] = lax.reduce_or(t > 2.0, (1,))
  every[...] = lax.reduce_and(t > -2.0, (1,))


def test_jnp_prod_and_lax_reductions_compute_as_theirs():
  x = 1.0 + 0.05 * _input((16, 128), F32, 12)
  q = jnp.asarray(np.random.default_rng(13).integers(-2, 3, (16, 8)), I8)
  want = (jnp.prod(x, axis=1), jnp.prod(x, axis=0, keepdims=True), jnp.prod(q, axis=-1), lax.reduce_prod(x, (1,)))
  for got, w in zip(products(x, q, interpret=True), want):
    _close(got, w, rtol=1e-5)
  qw = jnp.asarray(np.random.default_rng(14).integers(-128, 128, (16, 128)), I8)    # an int8 sum wraps, as lax's
  x2 = _input((16, 128), F32, 15)
  want = (lax.reduce_max(x2, (1,)), lax.reduce_min(x2, (0,)), lax.reduce_sum(x2, (0, 1)), lax.reduce_sum(qw, (1,)),
          lax.reduce_or(x2 > 2.0, (1,)), lax.reduce_and(x2 > -2.0, (1,)))
  for got, w in zip(lax_reductions(x2, qw, interpret=True), want):
    _close(got, w, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- keepdims statistics squeezed back
@mg.mgpu_kernel(out_shape=lambda x: (_rows(x), _rows(x), _rows(x)), grid=lambda x: (x.shape[0] // 8,))
def squeezed_stats(x, hi, mean, lse):
  """Row statistics kept as (8, 1) for the broadcast, stored as (M,): jnp.squeeze and lax.squeeze were MG003."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  m = jnp.max(v, axis=1, keepdims=True)
  hi.at[r][...] = jnp.squeeze(m, axis=1)
  mean.at[r][...] = lax.squeeze(jnp.mean(v - m, axis=-1, keepdims=True), (1,))
  lse.at[r][...] = jnp.squeeze(m + jnp.log(jnp.sum(jnp.exp(v - m), axis=1, keepdims=True)))


def test_keepdims_statistics_squeeze_back_to_rows():
  x = _input((16, 256), F32, 19)
  m = jnp.max(x, axis=1)
  for got, want in zip(squeezed_stats(x, interpret=True), (m, jnp.mean(x - m[:, None], axis=1),
                                                          jax.nn.logsumexp(x, axis=1))):
    _close(got, want, rtol=1e-5)


# ---------------------------------------------------------------- Triton's tl.reduce with a combine of its own
@ml.inline
def welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
  """TorchInductor's and Triton's Welford merge of two (mean, m2, weight) partials."""
  delta = mean_2 - mean_1
  new_weight = weight_1 + weight_2
  w2_over_w = ml.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
  return mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight


@mg.mgpu_kernel(out_shape=lambda x: (_rows(x), _rows(x)), grid=lambda x: (x.shape[0] // 8,))
def welford_rows(x, mean, var):
  """One pass over rows longer than a block: per-lane Welford accumulators over the loop's trips, merged across
  the lanes by ml.reduce with welford_combine (a TorchInductor layer norm's statistics)."""
  r0 = ml.program_id(0) * 8
  m = ml.zeros((8, 1024), jnp.float32)
  m2 = ml.zeros((8, 1024), jnp.float32)
  w = ml.zeros((8, 1024), jnp.float32)
  for k in range(x.shape[1] // 1024):
    v = x.at[ml.ds(r0, 8), ml.ds(k * 1024, 1024)][...].astype(jnp.float32)
    w = w + 1.0
    d = v - m
    m = m + d / w
    m2 = m2 + d * (v - m)
  mu, sq, n = ml.reduce((m, m2, w), 1, welford_combine)
  mean.at[ml.ds(r0, 8)][...] = mu
  var.at[ml.ds(r0, 8)][...] = sq / n


@ml.inline
def first_argmax(v1, i1, v2, i2):
  take = (v2 > v1) | ((v2 == v1) & (i2 < i1))
  return ml.where(take, v2, v1), ml.where(take, i2, i1)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), I32), _rows(x), S((x.shape[0], 1), F32), S((), F32),
                                     S((x.shape[1],), F32)))
def custom_reductions(x, am, hi, total_kd, everything, col_prod):
  v = x[...]
  idx = ml.broadcast_to(ml.arange(v.shape[1])[None, :], v.shape)
  _, am[...] = ml.reduce((v, idx), 1, first_argmax)
  hi[...] = ml.reduce(v, 1, ml.maximum)
  total_kd[...] = ml.reduce(v, -1, lambda p, q: p + q, keep_dims=True)
  everything[...] = ml.reduce(v, None, lambda p, q: ml.minimum(p, q))
  col_prod[...] = ml.reduce(1.0 + 0.01 * v, 0, lambda p, q: p * q)


def test_ml_reduce_takes_tritons_combines():
  """Triton's tl.reduce((mean, m2, weight), 1, welford_combine) was MG002 ("no general ml.reduce") whose hint folded
  the tile with rolled copies by hand."""
  x = _input((16, 4096), BF16, 20, 1.0, 3.0)
  xf = x.astype(F32)
  mu, var = welford_rows(x, interpret=True)
  _close(mu, xf.mean(axis=1), rtol=1e-5)
  _close(var, xf.var(axis=1), rtol=1e-4)
  y = jnp.asarray(np.random.default_rng(21).integers(0, 6, (16, 128)), F32)
  want = (jnp.argmax(y, axis=1).astype(I32), y.max(axis=1), y.sum(axis=-1, keepdims=True), y.min(),
          jnp.prod(1.0 + 0.01 * y, axis=0))
  for got, w in zip(custom_reductions(y, interpret=True), want):
    _close(got, w, rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: _rows(x))
def reduce_bad_axis(x, out):
  v = x[...]
  out[...] = ml.reduce(v, 2, ml.maximum)


def test_ml_reduce_checks_its_axis():
  expect(reduce_bad_axis, [S((8, 128), F32)], mg.IndexOutOfBoundsError, "ml.reduce(",
         "ml.reduce: axis 2 is out of range for a tensor of rank 2", hint="axes run from -2 to 1")


# ---------------------------------------------------------------- column statistics across programs: Triton's masked atomics
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), F32), S((x.shape[1],), F32)),
                grid=lambda x: (ml.cdiv(x.shape[0], 32), ml.cdiv(x.shape[1], 64)))
def column_sums_and_maxima(x, sums, maxima):
  """Triton's layer-norm-backward habit: each program's (32, 64) tile summed over its rows and added into the column
  sums with tl.atomic_add(ptr + cols, v, mask=cols < N); the last column window runs past the array's end."""
  i, j = ml.program_id(0), ml.program_id(1)
  rows, cols = i * 32 + ml.arange(32), j * 64 + ml.arange(64)
  t = x.at[ml.ds(i * 32, 32), ml.ds(j * 64, 64)].load(
      mask=(rows[:, None] < x.shape[0]) & (cols[None, :] < x.shape[1]), other=0.0).astype(jnp.float32)
  ml.atomic_add(sums.at[ml.ds(j * 64, 64)], ml.sum(t, axis=0), mask=cols < x.shape[1])
  ml.atomic_max(maxima.at[ml.ds(j * 64, 64)], ml.max(ml.abs(t), axis=0), mask=cols < x.shape[1])


@mg.mgpu_kernel(out_shape=lambda g, ids: S((64, g.shape[1]), F32), grid=lambda g, ids: (g.shape[0] // 32,))
def rows_by_id_but_padding(g, ids, out):
  """A masked scatter (padding id 0 skipped) and a masked count into a window inside the array."""
  r = ml.ds(ml.program_id(0) * 32, 32)
  k = ids.at[r][...]
  ml.atomic_add(out.at[k, :], g.at[r, :][...], mask=(k != 0)[:, None])


@mg.mgpu_kernel(out_shape=lambda x: S((12, x.shape[1]), F32), grid=lambda x: (x.shape[0] // 32, ml.cdiv(x.shape[1], 64)))
def overlapping_row_blocks(x, out):
  """A 2-D window whose columns run past the end, its rows inside: the positions of both axes as a grid."""
  i, j = ml.program_id(0), ml.program_id(1)
  cols = j * 64 + ml.arange(64)
  t = x.at[ml.ds(i * 32, 32), ml.ds(j * 64, 64)].load(mask=cols[None, :] < x.shape[1], other=0.0)
  ml.atomic_add(out.at[ml.ds(i * 4, 8), ml.ds(j * 64, 64)], ml.sum(t.reshape(8, 4, 64), axis=1),
                mask=cols[None, :] < x.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), BF16), grid=lambda x: (x.shape[0] // 16,))
def count_large(x, out):
  """A number added under a mask into a bfloat16 output: the number takes the output's dtype, as unmasked."""
  t = x.at[ml.ds(ml.program_id(0) * 16, 16), :][...]
  ml.atomic_add(out, 1.0, mask=ml.max(t, axis=0) > 1.0)


def test_masked_atomics_update_what_the_mask_keeps():
  """ml.atomic_add(..., mask=) was MG003 "takes no mask=" whose hint wrote the scatter and the select."""
  x = _input((100, 200), BF16, 24)
  sums, maxima = column_sums_and_maxima(x, interpret=True)
  _close(sums, jnp.sum(x.astype(F32), axis=0), rtol=1e-4, atol=1e-4)
  _close(maxima, jnp.max(jnp.abs(x.astype(F32)), axis=0))
  g = _input((128, 128), F32, 25)
  ids = jnp.asarray(np.random.default_rng(26).integers(0, 64, (128,)), I32)
  want = jnp.zeros((64, 128), F32).at[ids].add(jnp.where((ids != 0)[:, None], g, 0.0))
  _close(rows_by_id_but_padding(g, ids, interpret=True), want, rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(lambda a: column_sums_and_maxima(a)), platforms=["cuda"])(S((100, 200), BF16))
  z = _input((96, 128), F32, 31)
  _close(count_large(z, interpret=True), jnp.sum(z.reshape(6, 16, 128).max(axis=1) > 1.0, axis=0).astype(BF16))
  y = _input((64, 200), F32, 30)
  folded = y.reshape(2, 8, 4, 200).sum(axis=2)
  want = jnp.zeros((12, 200), F32).at[0:8].add(folded[0]).at[4:12].add(folded[1])
  _close(overlapping_row_blocks(y, interpret=True), want, rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=lambda x: (x.shape[0] // 8,))
def atomic_number_mask(x, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  ml.atomic_add(out, ml.sum(x.at[r, :][...], axis=0), mask=ml.arange(128))


def test_a_masked_atomics_mask_must_be_boolean():
  expect(atomic_number_mask, [S((16, 128), F32)], mg.KernelTypeError, "ml.atomic_add(",
         "ml.atomic_add's mask must be a boolean tensor or scalar, got int32 values",
         hint="pass a comparison, mask=cols < n (the elements it keeps are updated; of a number mask, its nonzero"
              " elements: mask=m != 0)")


# ---------------------------------------------------------------- what stays an error
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0],), F32))
def average_wrong_weights(x, w, out):
  t = x[...]
  out[...] = jnp.average(t, axis=1, weights=w[...])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def average_returned(x, out):
  t = x[...]
  out[...] = jnp.average(t, axis=1, returned=True)[0]


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def matrix_two_norm(x, out):
  t = x[...]
  out[...] = jnp.linalg.norm(t, ord=2)


def test_what_the_formulas_cannot_take_is_named_in_the_users_words():
  """A mistake inside a formula names the call's operands as written (not the formula's temporaries); an argument
  the formula lacks is named; a matrix 2-norm (singular values) keeps its MG003 and hint."""
  expect(average_wrong_weights, [S((8, 128), F32), S((64,), F32)], mg.ShapeMismatchError, "jnp.average(",
         "jnp.average on t of shape (8, 128) and w[...][None, :] of shape (1, 64): the shapes do not broadcast (axis 1"
         " of the result would be both 128 and 64)")      # (named as the call, since probe 51c: it said '*')
  # (returned= was named here as an argument the formula lacked until probe 52d gave the formula it)
  xr = np.random.default_rng(3).standard_normal((8, 128)).astype(np.float32)
  np.testing.assert_allclose(average_returned(xr, interpret=True), jnp.average(xr, axis=1), rtol=1e-6)
  expect(matrix_two_norm, [S((8, 128), F32)], mg.KernelTypeError, "jnp.linalg.norm(",
         "norm cannot take a register tensor inside a kernel")


# ---------------------------------------------------------------- CUDA export and the GPU
@mg.mgpu_kernel(out_shape=lambda x: (x, _rows(x), _rows(x), _rows(x)), grid=lambda x: (x.shape[0] // 8,))
def layer_stats_jnp(x, y, mean, rstd, spread):
  """A layer norm written with jnp's statistics: bfloat16 rows with NaN-free stats in float32, L2 norms, spans."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  mu = jnp.mean(v, axis=1, dtype=jnp.float32)
  rs = lax.rsqrt(jnp.var(v, axis=1, dtype=jnp.float32) + 1e-5)
  y.at[r, :][...] = ((v.astype(jnp.float32) - mu[:, None]) * rs[:, None]).astype(y.dtype)
  mean.at[r][...] = mu
  rstd.at[r][...] = rs
  spread.at[r][...] = jnp.ptp(v.astype(jnp.float32), axis=1) / jnp.linalg.norm(v.astype(jnp.float32), axis=1)


def _layer_ref(x):
  xf = x.astype(F32)
  mu, rs = xf.mean(1), lax.rsqrt(xf.var(1) + 1e-5)
  return (((xf - mu[:, None]) * rs[:, None]).astype(x.dtype), mu, rs, jnp.ptp(xf, axis=1) / jnp.linalg.norm(xf, axis=1))


def test_the_statistics_build_for_cuda():
  exported = jax.export.export(jax.jit(lambda a: layer_stats_jnp(a)), platforms=["cuda"])(S((16, 256), BF16))
  assert "mosaic_gpu" in exported.mlir_module()
  x = _input((16, 256), BF16, 16)
  for got, want in zip(layer_stats_jnp(x, interpret=True), _layer_ref(x)):
    _close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_jnp_statistics_on_the_gpu_match_interpret_mode():
  x = _input((64, 1024), BF16, 17, 2.0, 0.5)
  for got, want in zip(layer_stats_jnp(x), layer_stats_jnp(x, interpret=True)):     # (bfloat16 y: an ulp of rounding)
    _close(got, want, rtol=1e-5 if got.dtype == jnp.dtype(F32) else 1e-2, atol=1e-5 if got.dtype == jnp.dtype(F32)
           else 1e-2)
  xn = _with_nans((8, 128))
  for got, want in zip(nan_stats(xn), nan_stats(xn, interpret=True)):
    _close(got, want, rtol=1e-5, atol=1e-5)
  xv = _input((16, 128), F32, 18)
  for got, want in zip(vector_norms(xv), vector_norms(xv, interpret=True)):
    _close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_masked_atomics_on_the_gpu_match_interpret_mode():
  x = _input((1000, 200), BF16, 27)
  for got, want in zip(column_sums_and_maxima(x), column_sums_and_maxima(x, interpret=True)):
    _close(got, want, rtol=1e-4, atol=1e-3)
  g = _input((256, 128), F32, 28)
  ids = jnp.asarray(np.random.default_rng(29).integers(0, 64, (256,)), I32)
  _close(rows_by_id_but_padding(g, ids), rows_by_id_but_padding(g, ids, interpret=True), rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_ml_reduce_on_the_gpu_matches_interpret_mode():
  x = _input((32, 8192), BF16, 22, 1.0, 3.0)
  for got, want in zip(welford_rows(x), welford_rows(x, interpret=True)):
    _close(got, want, rtol=1e-4, atol=1e-5)
  y = jnp.asarray(np.random.default_rng(23).integers(0, 6, (16, 128)), F32)
  for got, want in zip(custom_reductions(y), custom_reductions(y, interpret=True)):
    _close(got, want, rtol=1e-5, atol=1e-6)


def test_ml_reduce_builds_for_cuda():
  exported = jax.export.export(jax.jit(lambda a: welford_rows(a)), platforms=["cuda"])(S((16, 4096), BF16))
  assert "mosaic_gpu" in exported.mlir_module()
  custom_reductions.check(S((16, 128), F32))
