"""Probe 52d (reductions at scale and the corner semantics of floats). What was refused or missing:

- the flat `ml.argmax(v)` / `ml.argmin(v)` (axis=None, jnp's index into the row-major flattened tile) of an odd 2-D
  read no register tensor holds (a (7, 33) or (12, 20) window read whole) was MG204: the padded trace gave up, as its
  flat indices would count the padded width. They are now counted with the read's own width, and the least index of
  the elements equal to the extreme (NaN first, as jnp) is taken with the padding dropped (frontend/ops/reduce.py);
- `jnp.quantile` and `jnp.percentile` were MG003 (jnp.median computed): now at a static q along one axis of a 1-D or
  2-D tile, methods linear, lower, higher, nearest and midpoint, jax's indices and weights (float32), NaN where the
  row holds one, integers as float32, a 16-bit float result in the operand's dtype (frontend/jnp_quantiles.py);
  `jnp.nanquantile`, `jnp.nanpercentile` and `jnp.nanmedian` too, each row's position from its count of numbers;
- `jnp.nanargmax` / `jnp.nanargmin` were MG003: now jax's (NaN replaced by -inf / inf, -1 where every element is
  NaN), along an axis or flat, keepdims too;
- reductions spelt generically were MG003 whose hint said "use ml.reduce": a ufunc's `.reduce` and `.accumulate`
  (`jnp.add.reduce(v, axis=1)`, `np.maximum.accumulate`, jnp's and NumPy's ufuncs), `jax.lax.reduce(x, init,
  computation, dims)` (of a tuple of operands too), lax's `reduce_and` / `reduce_or` / `reduce_xor` of integers, and
  Triton's `tl.xor_sum` (MG002): now the ml reductions they mean, the bitwise ones an ml.reduce of `a ^ b` (frontend/ufunc_reduce.py);
  `ml.reduce(v, None, combine)` of an odd 2-D read (MG204 at the read: its flattening reshape ended the padded
  trace) reduces the last axis, then the first (frontend/ops/combine_reduce.py);
- `jnp.sum(v, promote_integers=False)` (and jnp.prod's) was MG003 even of floats: a narrow integer sum or product is
  now in its own dtype, wrapping, as jnp's, and nothing changes for others (frontend/jnp_calls.py, jnp_stats.py);
- `jax.scipy.special.softmax` / `log_softmax` were MG003: jax.nn's, over every axis by default as scipy's;
- `jnp.linalg.matrix_norm` was MG003: jnp.linalg.norm over the last two axes; a matrix's 2-norm, -2-norm or nuclear
  norm (of singular values) stays MG003, whose hint wrote the L2 formula (the Frobenius norm, another number) and now
  says so (frontend/shape_hints.py);
- a sort or argsort along an axis that is not the last (`jnp.sort(v, axis=0)`, the columns) was MG003 whose hint
  wrote the transposes: the sort now does them (frontend/ops/sort.py);
- `jnp.partition`, `jnp.argpartition` (a top-k threshold's `jnp.partition(v, -k)[:, -k]`) and `jax.lax.approx_max_k`
  / `approx_min_k` were MG003: jax's orders from sorts (signed zeros tie by position, where jax's top_k puts +0.0
  first), the approximate top k computed exactly (frontend/jnp_quantiles.py);
- `jnp.average(..., returned=True)` and `jnp.nanprod` were MG003: jnp's (frontend/jnp_stats.py).
"""
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, F16, I32 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _f32(x):
  return np.asarray(jnp.asarray(x).astype(F32))


# ---------------------------------------------------------------- flat argmax / argmin of an odd read
@mg.mgpu_kernel(out_shape=lambda x: S((2,), I32))
def flat_extremes(x, o):
  v = x[...]
  o[0] = jnp.argmax(v)
  o[1] = ml.argmin(v * 2)


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), I32))
def flat_argmax_kept(x, o):
  o[...] = x[...].argmax(keepdims=True)


def _flat_inputs(shape, dtype, seed):
  """Ties (small integers), NaNs (one at the last element), a tile of -inf, normal values."""
  rng = np.random.default_rng(seed)
  ties = rng.integers(-3, 3, shape).astype(np.float32)
  nans = rng.standard_normal(shape).astype(np.float32)
  nans[shape[0] - 1, shape[1] - 1] = np.nan
  nans[shape[0] // 2, 3] = np.nan
  cases = [rng.standard_normal(shape).astype(np.float32), ties]
  if dtype != I32:
    cases += [nans, np.full(shape, -np.inf, np.float32)]
  return [jnp.asarray(c).astype(dtype) for c in cases]


@pytest.mark.parametrize("shape,dtype", [((7, 33), F32), ((5, 40), BF16), ((12, 20), I32), ((1, 70), F16)])
def test_flat_argmax_of_an_odd_read_is_jnps_index(shape, dtype):
  for seed, x in enumerate(_flat_inputs(shape, dtype, 1)):
    got = np.asarray(flat_extremes(x, interpret=True))
    want = [jnp.argmax(x), jnp.argmin(x * 2)]
    np.testing.assert_array_equal(got, np.array(want, np.int32), err_msg=f"input {seed}")
  flat_extremes.check(S(shape, dtype))


def test_flat_argmax_keepdims_of_an_odd_read():
  x = np.random.default_rng(2).standard_normal((7, 33)).astype(np.float32)
  x[6, 30] = 9.0
  np.testing.assert_array_equal(flat_argmax_kept(x, interpret=True), jnp.argmax(x, keepdims=True))
  jax.export.export(jax.jit(flat_argmax_kept), platforms=["cuda"])(S((7, 33), F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_flat_argmax_of_odd_reads():
  for shape, dtype in [((7, 33), F32), ((5, 40), BF16), ((12, 20), I32)]:
    for x in _flat_inputs(shape, dtype, 3):
      np.testing.assert_array_equal(jax.jit(flat_extremes)(x), np.array([jnp.argmax(x), jnp.argmin(x * 2)], np.int32))


# ---------------------------------------------------------------- jnp.quantile, jnp.percentile
@mg.mgpu_kernel(out_shape=lambda x: S((5, x.shape[0]), F32))
def row_quantiles(x, o):
  v = x[...]
  o[0] = jnp.quantile(v, 0.9, axis=1)
  o[1] = jnp.quantile(v, 0.37, axis=1, method="lower")
  o[2] = jnp.quantile(v, 0.37, axis=-1, method="higher")
  o[3] = jnp.quantile(v, 0.37, axis=1, method="nearest")
  o[4] = jnp.percentile(v, 25, axis=1, method="midpoint")


def _row_quantiles(x):
  return np.stack([jnp.quantile(x, 0.9, axis=1), jnp.quantile(x, 0.37, axis=1, method="lower"),
                   jnp.quantile(x, 0.37, axis=1, method="higher"), jnp.quantile(x, 0.37, axis=1, method="nearest"),
                   jnp.percentile(x, 25, axis=1, method="midpoint")]).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def column_quantile(x, o):
  o[...] = jnp.quantile(x[...], 0.75, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def clip_percentile(x, o):                      # a calibration's 99th percentile of a vector
  o[...] = jnp.percentile(x[...], 99.0, keepdims=True)


def _quantile_rows(seed, shape):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  x[2, 5], x[3, 7], x[4], x[5] = np.nan, np.inf, -np.inf, np.inf
  return x


def test_quantile_and_percentile_are_jnps():
  for x in (_quantile_rows(4, (8, 128)), _quantile_rows(5, (8, 100)),
            np.random.default_rng(6).integers(-50, 50, (8, 128)).astype(np.int32)):
    np.testing.assert_allclose(row_quantiles(x, interpret=True), _row_quantiles(x), rtol=1e-6, atol=1e-6)
  xb = jnp.asarray(np.random.default_rng(7).standard_normal((64, 128)), BF16)
  got = column_quantile(xb, interpret=True)
  assert got.dtype == BF16
  np.testing.assert_allclose(_f32(got), _f32(jnp.quantile(xb, 0.75, axis=0)), rtol=1e-2, atol=1e-2)
  v = np.random.default_rng(8).standard_normal(1000).astype(np.float32)
  np.testing.assert_allclose(clip_percentile(v, interpret=True), jnp.percentile(v, 99.0, keepdims=True), rtol=1e-6)
  for k, spec in ((row_quantiles, S((8, 100), F32)), (column_quantile, S((64, 128), BF16)),
                  (clip_percentile, S((1000,), F32))):
    jax.export.export(jax.jit(k), platforms=["cuda"])(spec)


@mg.mgpu_kernel(out_shape=lambda x: S((6, x.shape[0]), F32))
def row_nanquantiles(x, o):
  v = x[...]
  o[0] = jnp.nanquantile(v, 0.9, axis=1)
  o[1] = jnp.nanquantile(v, 0.37, axis=1, method="lower")
  o[2] = jnp.nanquantile(v, 0.37, axis=1, method="higher")
  o[3] = jnp.nanquantile(v, 0.37, axis=1, method="nearest")
  o[4] = jnp.nanpercentile(v, 25, axis=1, method="midpoint")
  o[5] = jnp.nanmedian(v, axis=1)


def _row_nanquantiles(x):
  return np.stack([jnp.nanquantile(x, 0.9, axis=1), jnp.nanquantile(x, 0.37, axis=1, method="lower"),
                   jnp.nanquantile(x, 0.37, axis=1, method="higher"),
                   jnp.nanquantile(x, 0.37, axis=1, method="nearest"),
                   jnp.nanpercentile(x, 25, axis=1, method="midpoint"), jnp.nanmedian(x, axis=1)]).astype(np.float32)


def _nan_quantile_rows(seed, shape):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  x[0], x[1, ::3], x[2, 5], x[3, 1:], x[4, 2:], x[5, 7], x[6, ::2] = np.nan, np.nan, np.nan, np.nan, np.nan, np.inf, -np.nan
  return x


def test_nanquantile_nanpercentile_nanmedian_are_jnps():
  for x in (_nan_quantile_rows(16, (8, 128)), _nan_quantile_rows(17, (8, 100)),
            np.random.default_rng(18).integers(-50, 50, (8, 128)).astype(np.int32)):
    np.testing.assert_allclose(row_nanquantiles(x, interpret=True), _row_nanquantiles(x), rtol=1e-6, atol=1e-6)
  jax.export.export(jax.jit(row_nanquantiles), platforms=["cuda"])(S((8, 100), F32))


# ---------------------------------------------------------------- jnp.nanargmax, jnp.nanargmin
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), I32), S((x.shape[0], 1), I32), S((1,), I32)))
def nan_skipping_args(x, a, b, c):
  v = x[...]
  a[...] = jnp.nanargmax(v, axis=1)
  b[...] = jnp.nanargmin(v, axis=-1, keepdims=True)
  c[0] = jnp.nanargmax(v)


def _nan_rows(seed, shape):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  x[0, :], x[1, 5], x[1, 6], x[2, 0], x[3, :], x[3, 4], x[4, ::2] = np.nan, np.nan, 50, np.nan, -np.inf, np.nan, np.nan
  return x


def test_nanargmax_and_nanargmin_are_jnps():
  for x in (_nan_rows(9, (8, 128)), _nan_rows(10, (8, 100)), np.full((8, 128), np.nan, np.float32),
            np.random.default_rng(11).integers(-3, 3, (8, 128)).astype(np.int32)):
    a, b, c = nan_skipping_args(x, interpret=True)
    np.testing.assert_array_equal(a, jnp.nanargmax(x, axis=1))
    np.testing.assert_array_equal(b, jnp.nanargmin(x, axis=1, keepdims=True))
    np.testing.assert_array_equal(c, jnp.nanargmax(x)[None])
  jax.export.export(jax.jit(nan_skipping_args), platforms=["cuda"])(S((8, 100), F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_quantiles_and_nan_skipping_args():
  for x in (_quantile_rows(4, (8, 128)), _quantile_rows(5, (8, 100))):
    np.testing.assert_allclose(jax.jit(row_quantiles)(x), _row_quantiles(x), rtol=1e-6, atol=1e-6)
  for x in (_nan_quantile_rows(16, (8, 128)), _nan_quantile_rows(17, (8, 100))):
    np.testing.assert_allclose(jax.jit(row_nanquantiles)(x), _row_nanquantiles(x), rtol=1e-6, atol=1e-6)
  xb = jnp.asarray(np.random.default_rng(7).standard_normal((64, 128)), BF16)
  np.testing.assert_allclose(_f32(jax.jit(column_quantile)(xb)), _f32(jnp.quantile(xb, 0.75, axis=0)), rtol=1e-2,
                             atol=1e-2)
  for x in (_nan_rows(9, (8, 128)), _nan_rows(10, (8, 100))):
    a, b, c = jax.jit(nan_skipping_args)(x)
    np.testing.assert_array_equal(a, jnp.nanargmax(x, axis=1))
    np.testing.assert_array_equal(b, jnp.nanargmin(x, axis=1, keepdims=True))
    np.testing.assert_array_equal(c, jnp.nanargmax(x)[None])


# ---------------------------------------------------------------- generic spellings of reductions
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32), S((x.shape[1],), F32),
                                     S((x.shape[0],), jnp.bool_), S((x.shape[0],), F32), S((x.shape[0],), F32)))
def ufunc_reductions(x, a, b, c, d, e, f):
  v = x[...]
  a[...] = jnp.add.reduce(v, axis=1)
  b[...] = jnp.maximum.reduce(v, axis=1)
  c[...] = jnp.minimum.reduce(v)                 # (a ufunc reduces axis 0 unless told)
  d[...] = jnp.logical_or.reduce(v > 2, axis=1)
  e[...] = jnp.logaddexp.reduce(v, axis=1)
  f[...] = np.multiply.reduce(1 + v * 0.01, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S(x.shape, F32), S(x.shape, F32)))
def ufunc_accumulations(x, a, b, c):
  v = x[...]
  a[...] = jnp.add.accumulate(v, axis=1)
  b[...] = jnp.maximum.accumulate(v, axis=1)
  c[...] = np.minimum.accumulate(v)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32), S((x.shape[1],), F32),
                                     S((x.shape[0],), F32)))
def lax_generic_reductions(x, a, b, c, d):
  v = x[...]
  a[...] = jax.lax.reduce(v, 0.0, jax.lax.add, (1,))
  b[...] = jax.lax.reduce(v, -jnp.inf, jax.lax.max, (1,))
  c[...] = jax.lax.reduce(v, jnp.inf, jnp.minimum, (0,))
  d[...] = jax.lax.reduce(v, 0.0, lambda p, q: p + q, (1,))


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), I32), S((x.shape[0],), I32), S((x.shape[1],), I32),
                                     S((1,), I32), S((x.shape[0],), I32), S((x.shape[0], 1), I32)))
def bitwise_reductions(x, a, b, c, d, e, f):
  v = x[...]
  a[...] = jax.lax.reduce_or(v, axes=(1,))
  b[...] = jax.lax.reduce_and(v, axes=(1,))
  c[...] = jax.lax.reduce_xor(v, axes=(0,))
  d[0] = jax.lax.reduce(v, 0, operator.or_, (0, 1))
  e[...] = ml.xor_sum(v, axis=1)
  f[...] = jnp.bitwise_xor.reduce(v, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: (S((1, 1), F32), S((1,), I32)))
def whole_odd_reduce(x, m, i):                  # ml.reduce(axis=None) of an odd read: it was MG204 at the read
  t = x[...]
  m[...] = ml.reduce(t, None, ml.minimum, keep_dims=True)
  flat = ml.arange(t.shape[0])[:, None] * t.shape[1] + ml.arange(t.shape[1])[None, :]
  i[0] = ml.reduce((t, flat), None, _first_max)[1]


@ml.inline
def _first_max(v1, i1, v2, i2):
  take = (v2 > v1) | ((v2 == v1) & (i2 < i1))
  return ml.where(take, v2, v1), ml.where(take, i2, i1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def float_xor_sum(x, o):
  o[...] = ml.xor_sum(x[...], axis=1)


def _rows(seed, shape):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  x[2, 5] = np.nan
  return x


def _bits(seed, shape):
  return np.random.default_rng(seed).integers(0, 1 << 30, shape).astype(np.int32)


def _bitwise_ref(x):
  return (np.bitwise_or.reduce(x, 1), np.bitwise_and.reduce(x, 1), np.bitwise_xor.reduce(x, 0),
          np.bitwise_or.reduce(x.ravel())[None], np.bitwise_xor.reduce(x, 1), np.bitwise_xor.reduce(x, 1)[:, None])


def _check_generic(run):
  x = _rows(12, (8, 128))
  want = (x.sum(1), x.max(1), x.min(0), np.logical_or.reduce(x > 2, 1), jax.nn.logsumexp(x, axis=1),
          np.prod(1 + x * 0.01, 1))
  for g, w in zip(run(ufunc_reductions, x), want):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=1e-5, atol=1e-5)
  want = (np.cumsum(x, 1), jax.lax.cummax(x, axis=1), jax.lax.cummin(x, axis=0))
  for g, w in zip(run(ufunc_accumulations, x), want):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  for g, w in zip(run(lax_generic_reductions, x), (x.sum(1), x.max(1), x.min(0), x.sum(1))):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  x = np.random.default_rng(14).standard_normal((7, 33)).astype(np.float32)
  m, i = run(whole_odd_reduce, x)
  np.testing.assert_array_equal(m, x.min(keepdims=True))
  np.testing.assert_array_equal(i, [np.argmax(x)])
  for shape in ((8, 128), (8, 100)):
    xi = _bits(13, shape)
    for g, w in zip(run(bitwise_reductions, xi), _bitwise_ref(xi)):
      np.testing.assert_array_equal(g, w)


def test_ufunc_and_lax_generic_reductions_compute():
  _check_generic(lambda k, x: k(x, interpret=True))
  for k, spec in ((ufunc_reductions, S((8, 128), F32)), (ufunc_accumulations, S((8, 128), F32)),
                  (lax_generic_reductions, S((8, 128), F32)), (bitwise_reductions, S((8, 100), I32))):
    jax.export.export(jax.jit(k), platforms=["cuda"])(spec)


def test_whole_combine_reduction_of_an_odd_read():
  x = np.random.default_rng(14).standard_normal((7, 33)).astype(np.float32)
  x[3, 4] = x[5, 30] = 9.0
  m, i = whole_odd_reduce(x, interpret=True)
  np.testing.assert_array_equal(m, x.min(keepdims=True))
  np.testing.assert_array_equal(i, [np.argmax(x)])
  jax.export.export(jax.jit(whole_odd_reduce), platforms=["cuda"])(S((7, 33), F32))


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), I32), S((x.shape[2],), I32), S((x.shape[0],), I32)))
def bitwise_over_two_axes(x, a, b, c):
  v = x[...]
  a[...] = jax.lax.reduce_or(v, axes=(1, 2))
  b[...] = jnp.bitwise_and.reduce(v | 0x100, axis=(0, 1))
  c[...] = ml.xor_sum(v, axis=(1, 2))


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), I32)))
def lax_reduce_argmax(x, v, i):                 # lax.reduce of (values, indices) with a combine of the kernel's
  t = x[...]
  idx = ml.broadcast_to(ml.arange(t.shape[1])[None, :], t.shape)

  def first_max(a, b):
    take = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]))
    return ml.where(take, b[0], a[0]), ml.where(take, b[1], a[1])
  v[...], i[...] = jax.lax.reduce((t, idx), (-jnp.inf, 0), first_max, (1,))


def test_lax_reduce_of_several_operands():
  x = np.round(np.random.default_rng(25).standard_normal((8, 128)) * 2).astype(np.float32)     # ties
  v, i = lax_reduce_argmax(x, interpret=True)
  np.testing.assert_array_equal(v, x.max(1))
  np.testing.assert_array_equal(i, np.argmax(x, 1))
  lax_reduce_argmax.check(S((8, 128), F32))


def test_bitwise_reductions_over_two_axes():
  x = _bits(24, (8, 8, 128))
  a, b, c = bitwise_over_two_axes(x, interpret=True)
  np.testing.assert_array_equal(a, np.bitwise_or.reduce(x.reshape(8, -1), 1))
  np.testing.assert_array_equal(b, np.bitwise_and.reduce((x | 0x100).reshape(-1, 128), 0))
  np.testing.assert_array_equal(c, np.bitwise_xor.reduce(x.reshape(8, -1), 1))
  bitwise_over_two_axes.check(S((8, 8, 128), I32))


def test_xor_sum_of_floats_is_mg106():
  expect(float_xor_sum, [S((8, 128), F32)], mg.UnsupportedDtypeError, "ml.xor_sum(x[...], axis=1)",
         "ml.xor_sum needs integers, got float32",
         hint="xor the bits: ml.xor_sum(ml.bitcast(x[...], jnp.int32), ...) (or convert the values,"
              " x[...].astype(jnp.int32))")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_generic_reductions():
  _check_generic(lambda k, x: jax.jit(k)(x))


# ---------------------------------------------------------------- promote_integers=, jax.scipy.special's softmax
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype), S((x.shape[0],), x.dtype)))
def unpromoted(x, s, p):
  v = x[...]
  s[...] = jnp.sum(v, axis=1, promote_integers=False)
  p[...] = jnp.prod(v % 3 - 1, axis=1, promote_integers=False)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def scipy_softmaxes(x, a, b, c):
  v = x[...]
  a[...] = jax.scipy.special.softmax(v, axis=1)
  b[...] = jax.scipy.special.log_softmax(v, axis=-1)
  c[...] = jax.scipy.special.softmax(v)          # (scipy's default: every axis)


def test_promote_integers_false_and_scipy_softmax():
  rng = np.random.default_rng(15)
  for x in (rng.integers(-100, 100, (8, 128)).astype(np.int8), rng.integers(0, 255, (8, 128)).astype(np.uint8),
            rng.standard_normal((8, 128)).astype(np.float32)):
    s, p = unpromoted(x, interpret=True)
    assert s.dtype == x.dtype and p.dtype == x.dtype
    np.testing.assert_allclose(s, jnp.sum(x, axis=1, promote_integers=False), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(p, jnp.prod(x % 3 - 1, axis=1, promote_integers=False), rtol=1e-5, atol=1e-5)
  unpromoted.check(S((8, 128), jnp.int8))
  x = rng.standard_normal((8, 128)).astype(np.float32)
  x[3] = -np.inf
  want = (jax.scipy.special.softmax(x, axis=1), jax.scipy.special.log_softmax(x, axis=-1),
          jax.scipy.special.softmax(x))
  for g, w in zip(scipy_softmaxes(x, interpret=True), want):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
  jax.export.export(jax.jit(scipy_softmaxes), platforms=["cuda"])(S((8, 128), F32))


# ---------------------------------------------------------------- matrix norms
@mg.mgpu_kernel(out_shape=lambda x: S((5,), F32))
def matrix_norms(x, o):
  v = x[...]
  o[0] = jnp.linalg.matrix_norm(v)
  o[1] = jnp.linalg.matrix_norm(v, ord=1)
  o[2] = jnp.linalg.matrix_norm(v, ord=-jnp.inf)
  o[3] = jnp.linalg.matrix_norm(v, ord=jnp.inf)
  o[4] = jnp.linalg.matrix_norm(v, ord=-1)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32))
def spectral_norm(x, o):
  v = x[...]
  o[0] = jnp.linalg.norm(v, ord=2)


def test_matrix_norm_and_the_hint_of_singular_value_norms():
  x = np.random.default_rng(19).standard_normal((8, 128)).astype(np.float32)
  want = [jnp.linalg.matrix_norm(x, ord=o) for o in ("fro", 1, -jnp.inf, jnp.inf, -1)]
  np.testing.assert_allclose(matrix_norms(x, interpret=True), np.array(want, np.float32), rtol=1e-5)
  matrix_norms.check(S((8, 128), F32))
  expect(spectral_norm, [S((8, 128), F32)], mg.KernelTypeError, "jnp.linalg.norm(v, ord=2)",
         "norm cannot take a register tensor inside a kernel",
         hint="a matrix's 2-norm (its largest singular value) needs an SVD, which no kernel form computes: take it"
              " outside the kernel; the Frobenius norm is ml.sqrt(ml.sum(v * v)) (ord='fro'), each row's 2-norm"
              " ml.sqrt(ml.sum(v * v, axis=1)) (axis=1)")


# ---------------------------------------------------------------- sorts along another axis
@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, I32), x))
def column_sorts(x, s, i, d):
  v = x[...]
  s[...] = jnp.sort(v, axis=0)
  i[...] = jnp.argsort(v, axis=0)
  d[...] = jnp.sort(v, axis=-2, descending=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def middle_argsort(x, o):
  o[...] = ml.argsort(x[...], axis=1)


def _column_data(seed, shape):
  x = np.round(np.random.default_rng(seed).standard_normal(shape) * 4) / 2       # ties
  x.reshape(-1)[[387, 647, 137, 265]] = np.nan, np.inf, -0.0, 0.0
  return x.astype(np.float32)


def _check_sorts(run):
  x = _column_data(20, (8, 128))
  s, i, d = run(column_sorts, x)
  np.testing.assert_array_equal(s, jnp.sort(x, axis=0))
  np.testing.assert_array_equal(i, jnp.argsort(x, axis=0))
  np.testing.assert_array_equal(d, jnp.sort(x, axis=0, descending=True))
  x3 = _column_data(21, (4, 8, 32))
  np.testing.assert_array_equal(run(middle_argsort, x3), jnp.argsort(x3, axis=1))


def test_sorts_along_another_axis():
  _check_sorts(lambda k, x: k(x, interpret=True))
  jax.export.export(jax.jit(column_sorts), platforms=["cuda"])(S((8, 128), F32))
  jax.export.export(jax.jit(middle_argsort), platforms=["cuda"])(S((4, 8, 32), F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_sorts_along_another_axis():
  _check_sorts(lambda k, x: jax.jit(k)(x))


# ---------------------------------------------------------------- partitions, approximate top k
@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, I32), x, S(x.shape, I32), S((x.shape[0],), x.dtype)))
def partitions(x, a, b, c, d, t):
  v = x[...]
  a[...] = jnp.partition(v, 4)
  b[...] = jnp.argpartition(v, 4, axis=-1)
  c[...] = jnp.partition(v, -3, axis=0)
  d[...] = jnp.argpartition(v, 2, axis=0)
  t[...] = jnp.partition(v, -5, axis=-1)[:, -5]          # the 5th largest of each row: a top-k threshold


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], 4), x.dtype), S((x.shape[0], 4), I32), S((x.shape[0], 4), x.dtype),
                                     S((x.shape[0], 4), I32)))
def approximate_top_k(x, a, b, c, d):
  a[...], b[...] = jax.lax.approx_max_k(x[...], 4)
  c[...], d[...] = jax.lax.approx_min_k(x[...], 4)


def _partition_ref(x):
  return (jnp.partition(x, 4), jnp.argpartition(x, 4), jnp.partition(x, -3, axis=0), jnp.argpartition(x, 2, axis=0),
          jnp.partition(x, -5, axis=-1)[:, -5])


def _check_partitions(run):
  """Against jnp on the CPU: where values tie, which index argpartition names and the order of the elements
  around the kth are jax's CPU sorts' (jnp on the GPU arranges ties its own way: the first GPU run of this test
  failed against a GPU reference)."""
  rng = np.random.default_rng(22)
  x = (np.round(rng.standard_normal((8, 128)) * 3) / 2 + 0.0).astype(np.float32)     # ties, no -0.0
  x[2, 5], x[3, 7] = np.nan, np.inf
  cpu = jax.devices("cpu")[0]
  for v in (x, rng.integers(0, 10, (8, 128)).astype(np.int32)):
    with jax.default_device(cpu):
      want = [np.asarray(w) for w in _partition_ref(v)]
    for g, w in zip(run(partitions, v), want):
      np.testing.assert_array_equal(g, w)
  y = rng.standard_normal((8, 128)).astype(np.float32)
  with jax.default_device(cpu):
    lo_v, lo_i = jax.lax.top_k(-y, 4)
    want = [np.asarray(w) for w in (*jax.lax.top_k(y, 4), -lo_v, lo_i)]
  for g, w in zip(run(approximate_top_k, y), want):
    np.testing.assert_array_equal(g, w)


def test_partitions_and_approximate_top_k():
  _check_partitions(lambda k, x: k(x, interpret=True))
  jax.export.export(jax.jit(partitions), platforms=["cuda"])(S((8, 128), F32))
  jax.export.export(jax.jit(approximate_top_k), platforms=["cuda"])(S((8, 128), F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_partitions_and_approximate_top_k():
  _check_partitions(lambda k, x: jax.jit(k)(x))


# ---------------------------------------------------------------- jnp.average(returned=True), jnp.nanprod
@mg.mgpu_kernel(out_shape=lambda x, w: (S((x.shape[0],), F32), S((x.shape[0],), F32), S((x.shape[0],), F32),
                                        S((x.shape[0],), F32), S((x.shape[0],), F32)))
def averages_returned(x, w, a, b, c, d, p):
  v = x[...]
  a[...], b[...] = jnp.average(v, axis=1, weights=w[...], returned=True)
  c[...], d[...] = jnp.average(v, axis=1, returned=True)
  p[...] = jnp.nanprod(1 + v * 0.01, axis=1)


def test_average_returned_and_nanprod():
  rng = np.random.default_rng(23)
  x, w = rng.standard_normal((8, 128)).astype(np.float32), np.abs(rng.standard_normal((8, 128))).astype(np.float32)
  x[1, ::3], x[2] = np.nan, np.nan
  want = (*jnp.average(x, axis=1, weights=w, returned=True), *jnp.average(x, axis=1, returned=True),
          jnp.nanprod(1 + x * 0.01, axis=1))
  for g, r in zip(averages_returned(x, w, interpret=True), want):
    np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
  averages_returned.check(S((8, 128), F32), S((8, 128), F32))
