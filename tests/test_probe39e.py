"""Probe 39e (reductions, statistics and selection: argmax/argmin with ties and NaNs, top-k by repeated
max, sorts and medians of short rows, Welford/Chan variance merged across tiles and programs, column sums
by atomics, norms, any/all/counts, products, integer sums that wrap, 16-bit float sums, cumulative
logsumexp, histograms, segment sums, 3-D reductions along each axis, masked reductions).

jnp's `where=` of ml.max, ml.min, ml.mean, ml.var and ml.std, and `initial=` of ml.sum, ml.max and
ml.min, were MG003 ('unexpected keyword argument'), with hints to write the select, the count and the
two-pass masked variance out; the hint for `ml.max(v, where=m, initial=c)` dropped `initial` (a row the
mask keeps nothing of gave -inf, not c), and `ml.sum(v, initial=c)` was told only the signature."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs, **kw):
  return jax.export.export(jax.jit(lambda *a: fn(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()


def _masked_data(dtype=np.float32, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((16, 128)).astype(dtype)
  m = rng.random((16, 128)) > 0.3
  m[0] = False                 # a row the mask keeps nothing of
  m[1] = False
  m[1, 5] = True               # and one it keeps one element of
  return x, m


# ---------------------------------------------------------------- jnp's where= and initial= of the reductions
@mg.mgpu_kernel(out_shape=lambda x, m: (S((x.shape[0],), F32),) * 8, grid=lambda x, m: (x.shape[0] // 8,))
def masked_statistics(x, m, mx, mn, mean, var, sd, s, sm, mx0):
  i = ml.program_id(0)
  rows = ml.ds(i * 8, 8)
  v = x.at[rows, :][...]
  keep = m.at[rows, :][...]
  mx.at[rows][...] = ml.max(v, axis=1, where=keep, initial=-1.0)
  mn.at[rows][...] = v.min(axis=1, where=keep, initial=0.5)
  mean.at[rows][...] = ml.mean(v, axis=1, where=keep)
  var.at[rows][...] = ml.var(v, axis=1, where=keep)
  sd.at[rows][...] = v.std(axis=1, where=keep, ddof=1)
  s.at[rows][...] = ml.sum(v, axis=1, initial=2.0)
  sm.at[rows][...] = ml.sum(v, axis=1, where=keep, initial=-3.0)
  mx0.at[rows][...] = ml.max(v, axis=1, initial=0.0)


def _masked_statistics_want(x, m):
  return (jnp.max(x, 1, where=m, initial=-1.0), jnp.min(x, 1, where=m, initial=0.5), jnp.mean(x, 1, where=m),
          jnp.var(x, 1, where=m), jnp.std(x, 1, where=m, ddof=1), jnp.sum(x, 1, initial=2.0),
          jnp.sum(x, 1, where=m, initial=-3.0), jnp.max(x, 1, initial=0.0))


def test_max_min_mean_var_and_std_take_jnps_where_and_initial():
  x, m = _masked_data()
  got = masked_statistics(jnp.asarray(x), jnp.asarray(m), interpret=True)
  for g, w in zip(got, _masked_statistics_want(x, m)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)   # NaN where nothing is kept
  assert np.isnan(np.asarray(got[2])[0]) and np.asarray(got[0])[0] == -1.0
  assert "mosaic_gpu" in _export(masked_statistics, S(x.shape, F32), S(m.shape, jnp.bool_)).lower()


@mg.mgpu_kernel(out_shape=lambda x, m: (S((x.shape[0],), jnp.int32), S((x.shape[0],), jnp.int32),
                                        S((x.shape[0],), F32), S((), jnp.int32), S((1, 1), F32),
                                        S((x.shape[0], 1), F32), S((x.shape[0],), x.dtype)))
def masked_int_and_column_masks(x, m, mx, mn, mean, top, whole, var, mx16):
  v = x[...]
  keep = m[...]
  cols = ml.arange(x.shape[1])[None, :] < 100          # a (1, n) mask, broadcast over the rows
  mx[...] = ml.max(v, axis=1, where=keep)               # the dtype's lowest value where nothing is kept
  mn[...] = ml.min(v, axis=1, where=cols, initial=7)
  mean[...] = ml.mean(v, axis=1, where=cols)
  top[...] = ml.max(v, where=keep)
  whole[...] = ml.mean(v, where=keep, keepdims=True)
  var[...] = ml.var(v, axis=1, where=cols, keepdims=True)
  mx16[...] = ml.max(v, axis=1, where=keep, initial=-5)


def test_integer_reductions_take_where_with_a_broadcast_mask_and_keepdims():
  x, m = _masked_data()
  xi = (x * 40).astype(np.int32)
  cols = np.broadcast_to(np.arange(128)[None, :] < 100, xi.shape)
  lo = np.iinfo(np.int32).min
  want = (jnp.max(xi, 1, where=m, initial=lo), jnp.min(xi, 1, where=cols, initial=7), jnp.mean(xi, 1, where=cols),
          jnp.max(xi, where=m, initial=lo), jnp.mean(xi, where=m, keepdims=True),
          jnp.var(xi, 1, where=cols, keepdims=True), jnp.max(xi, 1, where=m, initial=-5))
  got = masked_int_and_column_masks(jnp.asarray(xi), jnp.asarray(m), interpret=True)
  for g, w in zip(got, want):
    assert np.asarray(g).dtype == np.asarray(w).dtype
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)
  _export(masked_int_and_column_masks, S(xi.shape, jnp.int32), S(m.shape, jnp.bool_))


@mg.mgpu_kernel(out_shape=lambda x, m: (S((x.shape[0],), x.dtype),) * 3)
def masked_half(x, m, mx, mean, var):
  v = x[...]
  keep = m[...]
  mx[...] = ml.max(v, axis=1, where=keep, initial=-2.0)
  mean[...] = ml.mean(v, axis=1, where=keep)           # summed and divided in float32, rounded once
  var[...] = ml.var(v, axis=1, where=keep)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_16_bit_masked_statistics_keep_the_dtype_and_compute_in_float32(dtype):
  x, m = _masked_data(dtype, seed=1)
  x32 = np.asarray(x, np.float32)
  got = masked_half(jnp.asarray(x), jnp.asarray(m), interpret=True)
  want = (jnp.max(x, 1, where=m, initial=-2.0), jnp.mean(x32, 1, where=m).astype(dtype),
          jnp.var(x32, 1, where=m).astype(dtype))
  for g, w in zip(got, want):
    assert g.dtype == dtype
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
  _export(masked_half, S(x.shape, dtype), S(m.shape, jnp.bool_))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def initial_of_a_tensor(x, out):
  v = x[...]
  out[...] = ml.max(v, axis=1, initial=v[:, 0])


def test_an_initial_that_is_a_tensor_is_reported_at_the_call():
  expect(initial_of_a_tensor, [S((8, 128), F32)], mg.KernelTypeError, "ml.max(v, axis=1, initial=v[:, 0])",
         "ml.max: initial= takes a number or a scalar, got a register tensor",
         hint="combine a tensor after the reduction: ml.maximum(ml.max(v, axis=1), v[:, 0])")


@pytest.mark.gpu
def test_masked_statistics_on_the_gpu():
  x, m = _masked_data()
  got = masked_statistics(jnp.asarray(x), jnp.asarray(m))
  for g, w in zip(got, _masked_statistics_want(x, m)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
  xi = (x * 40).astype(np.int32)
  cols = np.broadcast_to(np.arange(128)[None, :] < 100, xi.shape)
  mx, mn, mean = masked_int_and_column_masks(jnp.asarray(xi), jnp.asarray(m))[:3]
  np.testing.assert_array_equal(np.asarray(mx), jnp.max(xi, 1, where=m, initial=np.iinfo(np.int32).min))
  np.testing.assert_array_equal(np.asarray(mn), jnp.min(xi, 1, where=cols, initial=7))
  np.testing.assert_allclose(np.asarray(mean), jnp.mean(xi, 1, where=cols), rtol=1e-5)


# ---------------------------------------------------------------- softmax over the trailing axes of few rows
@mg.mgpu_kernel(out_shape=lambda s, x4: (s, s, s, x4))
def per_head_softmax(s, x4, p, lp, pw, p4):
  v = s[...]                                              # (heads, queries, keys) scores
  q = ml.arange(v.shape[1])[None, :, None]
  k = ml.arange(v.shape[2])[None, None, :]
  p[...] = ml.softmax(v, axis=-1, where=k <= q * 4)      # a causal mask that broadcasts
  lp[...] = ml.log_softmax(v, axis=2, where=v > 0)
  pw[...] = ml.softmax(v * 0.5, axis=(1, 2))
  p4[...] = ml.softmax(x4[...], axis=-1)


def _per_head_softmax_want(s, x4):
  causal = np.broadcast_to(np.arange(64)[None, None, :] <= np.arange(16)[None, :, None] * 4, s.shape)
  return (jax.nn.softmax(s, -1, where=causal), jax.nn.log_softmax(s, 2, where=s > 0),
          jax.nn.softmax(s * 0.5, (1, 2)), jax.nn.softmax(x4, -1))


def test_softmax_over_trailing_axes_whose_rows_are_too_few_for_a_statistic_computes_on_the_2d_tile():
  """A (2, 16, 64) tile's softmax over its last axis (per-head scores, 32 rows) was MG204 (its (2, 16) row
  statistic holds no multiple of 128 elements), with a hint to reshape to 2-D and back: the compiler does."""
  rng = np.random.default_rng(39)
  s = rng.standard_normal((2, 16, 64)).astype(np.float32)
  x4 = rng.standard_normal((2, 2, 8, 32)).astype(np.float32)
  for g, w in zip(per_head_softmax(s, x4, interpret=True), _per_head_softmax_want(s, x4)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-7)
  _export(per_head_softmax, S(s.shape, F32), S(x4.shape, F32))


@pytest.mark.gpu
def test_per_head_softmax_on_the_gpu():
  rng = np.random.default_rng(39)
  s = rng.standard_normal((2, 16, 64)).astype(np.float32)
  x4 = rng.standard_normal((2, 2, 8, 32)).astype(np.float32)
  for g, w in zip(per_head_softmax(jnp.asarray(s), jnp.asarray(x4)), _per_head_softmax_want(s, x4)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- a kept statistic of few rows, stored
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2] + (1,), F32))
def kept_row_max_3d(x, out):
  v = x[...]
  out[...] = ml.max(v, axis=2, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * x.shape[1],), F32))
def kept_row_max_3d_followed(x, out):
  v = x[...]
  out[...] = (ml.max(v, axis=2, keepdims=True)).reshape(32)


def test_a_kept_3d_statistic_stored_itself_or_as_its_vector_is_numpys():
  """`ml.max(v, axis=2, keepdims=True)` of a (4, 8, 128) tile computes (probe 39a: the 2-D reshape's row
  vector); stored itself, its (4, 8, 1) shape was MG204 at the store, whose hint stored the vector and reshaped
  it outside; since probe 44f it is stored a row of 8 at a time. Either way the result is numpy's."""
  x = np.random.default_rng(3).standard_normal((4, 8, 128)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(kept_row_max_3d(x, interpret=True)), x.max(2, keepdims=True))
  _export(kept_row_max_3d, S(x.shape, F32))
  x = np.random.default_rng(3).standard_normal((4, 8, 128)).astype(np.float32)
  got = np.asarray(kept_row_max_3d_followed(x, interpret=True)).reshape(4, 8, 1)
  np.testing.assert_array_equal(got, x.max(2, keepdims=True))
  _export(kept_row_max_3d_followed, S(x.shape, F32))


# ---------------------------------------------------------------- an unnamed vector reshaped is named by its text
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], F32))
def row_sums_reshaped(x, out):
  v = x[...]
  out[...] = ml.sum(v.reshape(32, 128), axis=1).reshape(4, 8)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], F32))
def row_sums_reshaped_followed(x, out):
  v = x[...]
  vec = ml.sum(v.reshape(32, 128), axis=1)
  for r in ml.static_range(4):
    out.at[r][...] = vec[r * 8:(r + 1) * 8]


def test_a_reshape_of_an_unnamed_vector_computes_padded():
  """`ml.sum(v.reshape(32, 128), axis=1).reshape(4, 8)` was reported as 'reshape of v, a vector of 32
  elements', and its hint sliced `v[r * 8:(r + 1) * 8]`: a placeholder v, read as the user's own (4, 8, 128)
  tile v (slicing that gives the wrong values); probe 39e named it by the user's text, and since probe 48a the
  padded trace computes it (its rows into a (4, 32) tile, padded)."""
  x = np.random.default_rng(4).standard_normal((4, 8, 128)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(row_sums_reshaped(x, interpret=True)), x.sum(2), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(row_sums_reshaped_followed(x, interpret=True)), x.sum(2), rtol=1e-5, atol=1e-5)
  _export(row_sums_reshaped, S(x.shape, F32))
  _export(row_sums_reshaped_followed, S(x.shape, F32))


# ---------------------------------------------------------------- initial= takes the result's dtype, as jnp's
@mg.mgpu_kernel(out_shape=lambda x, h, c: (S((x.shape[0],), jnp.int32), S((x.shape[0],), jnp.int32),
                                           S((h.shape[0],), h.dtype)))
def initial_in_the_results_dtype(x, h, c: ml.scalar, mx, s8, sh):
  v = x[...]
  mx[...] = ml.max(v, axis=1, initial=3.0)               # a whole-number float on int32: the integer 3
  s8[...] = ml.sum(v.astype(jnp.int8), axis=1, initial=-7)
  sh[...] = ml.sum(h[...], axis=1, initial=c)             # a float32 scalar, converted to float16 as jnp does


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def fractional_initial_on_ints(x, out):
  v = x[...]
  out[...] = ml.max(v, axis=1, initial=0.5)


def test_initial_is_converted_to_the_reductions_dtype_as_jnp_does():
  rng = np.random.default_rng(8)
  x = rng.integers(-60, 60, (16, 128)).astype(np.int32)
  h = rng.standard_normal((16, 128)).astype(np.float16)
  mx, s8, sh = initial_in_the_results_dtype(x, h, 0.1, interpret=True)
  np.testing.assert_array_equal(mx, jnp.max(x, 1, initial=3))
  np.testing.assert_array_equal(s8, jnp.sum(x.astype(np.int8), 1, initial=-7))
  assert sh.dtype == jnp.float16
  want = (jnp.sum(h.astype(np.float32), 1).astype(np.float16).astype(np.float32) + np.float32(np.float16(0.1)))
  np.testing.assert_array_equal(np.asarray(sh, np.float32), want.astype(np.float16).astype(np.float32))
  _export(initial_in_the_results_dtype, S(x.shape, jnp.int32), S(h.shape, jnp.float16), 0.1)
  expect(fractional_initial_on_ints, [S((8, 128), jnp.int32)], mg.DtypeMismatchError, "ml.max(v, axis=1, initial=0.5)",
         "ml.max's initial (0.5) is no int32 value, the result's dtype",
         hint="a whole number in int32's range (-2147483648..2147483647), or convert first for a float result:"
              " ml.max(v.astype(jnp.float32), axis=1, initial=0.5)")


# ---------------------------------------------------------------- 3-D reductions whose kept axes are all of size 1
@mg.mgpu_kernel(out_shape=lambda x: (x, S((1, 1, 1), F32), S((1, 1), jnp.int32), S((1, 1, 1), F32), x, S((1, 1), F32),
                                     S((1,), F32)))
def one_query_one_head(x, normed, mx, am, lse, p, pos, tot):
  v = x[...]                                             # (1, 1, keys): decode scores of one head, one query
  normed[...] = (v - ml.mean(v, axis=-1, keepdims=True)) * ml.rsqrt(ml.var(v, axis=-1, keepdims=True) + 1e-5)
  mx[...] = ml.max(v, axis=2, keepdims=True)
  am[...] = ml.argmax(v, axis=-1)
  lse[...] = ml.logsumexp(v, axis=-1, keepdims=True)
  p[...] = ml.softmax(v, axis=-1)
  pos[...] = ml.sum(v, axis=2, where=v > 0, initial=1.0)
  tot[...] = ml.sum(v, axis=(1, 2))


def _one_query_one_head_want(x):
  return ((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), x.max(2, keepdims=True),
          x.argmax(-1).astype(np.int32), jax.nn.logsumexp(x, -1, keepdims=True), jax.nn.softmax(x, -1),
          jnp.sum(x, 2, where=x > 0, initial=1.0), x.sum((1, 2)))


def test_a_3d_reduction_that_keeps_only_size_1_axes_is_the_full_reduction_stretched():
  """ml.max(v, axis=2) of a (1, 1, 256) tile (and var, argmax, logsumexp, softmax of it) was MG204: its (1, 1)
  statistic holds no multiple of 128 elements, and the hint's reshape gave a (1,) vector of the same kind."""
  x = np.random.default_rng(21).standard_normal((1, 1, 256)).astype(np.float32)
  for g, w in zip(one_query_one_head(x, interpret=True), _one_query_one_head_want(x)):
    assert np.asarray(g).shape == np.asarray(w).shape
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
  _export(one_query_one_head, S(x.shape, F32))


@pytest.mark.gpu
def test_one_query_one_head_on_the_gpu():
  x = np.random.default_rng(21).standard_normal((1, 1, 256)).astype(np.float32)
  for g, w in zip(one_query_one_head(jnp.asarray(x)), _one_query_one_head_want(x)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- a where= mask wider than x: jnp's segment reductions
@mg.mgpu_kernel(out_shape=lambda x, ids: (S((16,), F32),) * 4 + (S((16,), jnp.bool_), S((16,), jnp.int32)))
def segment_stats_by_mask(x, ids, mean, mx, mn, sm, big, pos):
  v = x[...]
  s = ids[...]
  member = s[:, None] == ml.arange(16)[None, :]           # (256, 16): element i in segment j
  mean[...] = ml.mean(ml.broadcast_to(v[:, None], (256, 16)), axis=0, where=member)
  mx[...] = ml.max(v[:, None], axis=0, where=member, initial=-1.0)   # x (256, 1) grows to the mask's shape
  mn[...] = ml.min(v[:, None], axis=0, where=member)
  sm[...] = ml.sum(v[:, None], axis=0, where=member)
  big[...] = ml.any(v[:, None] > 1.0, axis=0, where=member)
  pos[...] = ml.sum(v[:, None] > 0, axis=0, where=member)


@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), F32))
def segment_mean_unbroadcast(x, ids, out):
  v = x[...]
  out[...] = ml.mean(v[:, None], axis=0, where=ids[...][:, None] == ml.arange(16)[None, :])


def _segments(seed=25):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal(256).astype(np.float32)
  ids = np.sort(rng.integers(0, 16, 256)).astype(np.int32)
  ids[ids == 3] = 4                                        # an empty segment
  return x, ids


def _segment_stats_want(x, ids):
  member = ids[:, None] == np.arange(16)[None, :]
  col = x[:, None]
  return (jnp.mean(np.broadcast_to(col, member.shape), 0, where=member), jnp.max(col, 0, where=member, initial=-1.0),
          jnp.min(col, 0, where=member, initial=np.inf), jnp.sum(col, 0, where=member),
          jnp.any(col > 1, 0, where=member), jnp.sum(col > 0, 0, where=member).astype(jnp.int32))


def test_a_where_mask_wider_than_x_broadcasts_x_as_jnps_sum_max_min_any_and_all_do():
  """`ml.max(v[:, None], axis=0, where=member, initial=...)`, jnp's segment max by a membership mask, was MG202
  ('where= of shape (256, 16) does not broadcast to x's (256, 1)'): jnp selects with x broadcast to the mask's
  shape. jnp's mean counts the mask at x's shape (an error there too): its hint now broadcasts x first."""
  x, ids = _segments()
  for g, w in zip(segment_stats_by_mask(x, ids, interpret=True), _segment_stats_want(x, ids)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
  _export(segment_stats_by_mask, S(x.shape, F32), S(ids.shape, jnp.int32))
  expect(segment_mean_unbroadcast, [S((256,), F32), S((256,), jnp.int32)], mg.ShapeMismatchError, "ml.mean(",
         "ml.mean's where= of shape (256, 16) does not broadcast to x's (256, 1)",
         hint="ml.mean counts the elements the mask keeps of x's own shape, as jnp's: broadcast x to the mask's first,"
              " ml.mean(ml.broadcast_to(v[:, None], (256, 16)), axis=0, where=ids[...][:, None] =="
              " ml.arange(16)[None, :])")


@pytest.mark.gpu
def test_segment_stats_by_mask_on_the_gpu():
  x, ids = _segments()
  for g, w in zip(segment_stats_by_mask(jnp.asarray(x), jnp.asarray(ids)), _segment_stats_want(x, ids)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- reductions ml lacks, written as their hints say
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def xor_of_rows(x, out):
  out[...] = ml.xor_sum(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def general_reduce(x, out):
  out[...] = ml.reduce(x[...], 1, ml.maximum)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype), S((x.shape[0],), jnp.float32)))
def xor_and_product_by_rolls(x, xo, prod):
  v = x[...]
  p = (v & 3).astype(jnp.float32) * 0.5 + 0.75
  h = v.shape[1] // 2
  for _ in ml.static_range(7):
    v = v ^ ml.roll(v, -h, axis=1)
    p = p * ml.roll(p, -h, axis=1)
    h = h // 2
  xo[...] = v[:, 0]
  prod[...] = p[:, 0]


def test_xor_sum_and_general_reduce_hints_fold_whole_tiles_with_rolls():
  """The hints folded windows of halves, v = v[:, :h] ^ v[:, h:]: for 16 rows of 128 the (16, 4) window is
  MG204 (no multiple of 128 elements), so the kernel written from them did not compile. A roll keeps the tile."""
  xf = jnp.asarray(np.random.default_rng(5).standard_normal((16, 128)), F32)      # (ml.reduce exists since probe 47h)
  np.testing.assert_array_equal(np.asarray(general_reduce(xf, interpret=True)), np.asarray(jnp.max(xf, axis=1)))
  x = np.random.default_rng(6).integers(0, 1 << 30, (16, 128)).astype(np.int32)
  xo, prod = xor_and_product_by_rolls(x, interpret=True)
  np.testing.assert_array_equal(xo, np.bitwise_xor.reduce(x, axis=1))
  # (ml.xor_sum was an UnknownNameError whose hint wrote these rolls until probe 52d added it)
  np.testing.assert_array_equal(xor_of_rows(x, interpret=True), np.bitwise_xor.reduce(x, axis=1))
  np.testing.assert_allclose(prod, np.prod((x & 3) * 0.5 + 0.75, axis=1), rtol=1e-5)
  _export(xor_and_product_by_rolls, S(x.shape, jnp.int32))


# ---------------------------------------------------------------- lax's reductions with their axes by keyword
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def lax_reduce_max_by_keyword(x, out):
  v = x[...]
  out[...] = jax.lax.reduce_max(v, axes=(1,))


def test_lax_reductions_with_axes_by_keyword_compute():
  """`lax.reduce_max(v, axes=(1,))` was hinted as 'write ml.max(x, axis=y)': placeholders, where the call names
  its operand v and its axes by keyword; then 'write ml.max(v, axis=(1,))'; since probe 47h it computes."""
  x = jnp.asarray(np.random.default_rng(7).standard_normal((8, 128)), F32)
  np.testing.assert_array_equal(np.asarray(lax_reduce_max_by_keyword(x, interpret=True)),
                                np.asarray(jax.lax.reduce_max(x, (1,))))


# ---------------------------------------------------------------- var, std and logsumexp over two axes of a 3-D tile
@mg.mgpu_kernel(out_shape=lambda x, b: (S((x.shape[0],), F32), S((x.shape[2],), F32), S((x.shape[0],), F32),
                                        S((x.shape[2],), F32), S((x.shape[2],), F32), S((x.shape[0],), F32),
                                        S((x.shape[0],), F32)))
def two_axis_statistics(x, b, var, sd, lse, var_w, lse_w, lse_b, sign):
  v = x[...]
  var[...] = ml.var(v, axis=(1, 2))
  sd[...] = ml.std(v, axis=(0, 1), ddof=1)
  lse[...] = ml.logsumexp(v, axis=(1, 2))
  var_w[...] = ml.var(v, axis=(0, 1), where=v > 0)
  lse_w[...] = ml.logsumexp(v, axis=(0, 1), where=v < 1.0)
  lse_b[...], sign[...] = ml.logsumexp(v, axis=(1, 2), b=b[...] - 0.3, return_sign=True)


def _two_axis_statistics_want(x, b):
  lse_b, sign = jax.nn.logsumexp(x, (1, 2), b=b - 0.3, return_sign=True)
  return (jnp.var(x, (1, 2)), jnp.std(x, (0, 1), ddof=1), jax.nn.logsumexp(x, (1, 2)), jnp.var(x, (0, 1), where=x > 0),
          jax.nn.logsumexp(x, (0, 1), where=x < 1), lse_b, sign)


def _two_axis_data():
  rng = np.random.default_rng(37)
  x = rng.standard_normal((8, 16, 16)).astype(np.float32)
  b = rng.random((8, 16, 16)).astype(np.float32)
  b[0] = 0.0
  return x, b


def test_var_std_and_logsumexp_over_two_axes_of_a_3d_tile_compute_on_its_2d_reshape():
  """ml.var(v, axis=(1, 2)) and ml.logsumexp(v, axis=(0, 1)) of an (8, 16, 16) tile were MG204 ('take the leading
  axes in ml.static_range loops'), where ml.mean and ml.sum over the same axes worked: their mean or max, kept with
  the tile's rank, does not broadcast back against it. They compute on the 2-D reshape, as the plain reduction."""
  x, b = _two_axis_data()
  for g, w in zip(two_axis_statistics(x, b, interpret=True), _two_axis_statistics_want(x, b)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  _export(two_axis_statistics, S(x.shape, F32), S(b.shape, F32))


@pytest.mark.gpu
def test_two_axis_statistics_on_the_gpu():
  x, b = _two_axis_data()
  got = two_axis_statistics(jnp.asarray(x), jnp.asarray(b))
  for g, w in zip(got, _two_axis_statistics_want(x, b)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
