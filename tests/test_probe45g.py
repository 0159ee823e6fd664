"""Probe 45g (short and odd-length register data: leftovers of probes 45a, 45d and 45e).

Each section says what was wrong. A GMEM window read whole that no register tensor holds (a (17,) vector, not a
multiple of 8; a (3, 45) or (8, 24) tile, not a multiple of 128; a (2, 8) window scanned) was MG204 wherever it
was used beyond a whole reduction of the read as it is; such a kernel is now traced again with the window read
padded under a mask and computed padded (frontend/ops/padded_tiles.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- short and odd windows, elementwise and stored
# `o[...] = a[...] * 2 + b[...]` of (17,), (1, 17), (8, 24) or (3, 45) arrays was MG204 at the read ("a 1-D
# register vector needs a multiple of 8 elements", "register tensors need a multiple of 128 elements").
@mg.mgpu_kernel(out_shape=lambda a, b: a)
def doubled(a, b, o):
  o[...] = ml.where(a[...] > 0, a[...] * 2, ml.exp(b[...])) - 1


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 100,))
def doubled_in_windows(x, out):       # a window of a larger array: the padding reads past it, masked
  r = ml.ds(ml.program_id(0) * 100, 100)
  out.at[r][...] = x.at[r][...] * 2


def test_odd_windows_compute_elementwise_and_store_under_a_mask():
  for shape in ((17,), (1, 17), (8, 24), (3, 45)):
    a, b = _rnd(shape, 1), _rnd(shape, 2)
    want = np.where(a > 0, a * 2, np.exp(b)) - 1
    np.testing.assert_allclose(np.asarray(doubled(a, b, interpret=True)), want, rtol=1e-5, err_msg=str(shape))
  assert doubled.mlir(S((3, 45), F32), S((3, 45), F32)).startswith("module @doubled")
  x = _rnd(300, 3)
  np.testing.assert_array_equal(np.asarray(doubled_in_windows(x, interpret=True)), x * 2)


# ---------------------------------------------------------------- short reads reduced after math, 8-bit ones
# Probe 45e read padded only a read reduced as it is: `ml.sum(p[...] * 2.0)` of 5 partials, `ml.mean` of them, and
# 8-bit reads (an int8 max over 100 elements, a uint8 row min) were MG204. The padding is the reduction's identity
# whatever math made it (the padded read's 0 becomes 1 under `+ 1.0`), and a mean divides by the unpadded count.
@mg.mgpu_kernel(out_shape=lambda p, q, r: (S((), F32), S((), F32), S((), F32), S((), q.dtype),
                                           S((r.shape[0],), r.dtype)))
def reduced_after_math(p, q, r, total, mean, least, top, row_min):
  v = p[...] + 1.0
  total[...] = ml.sum(v * 2.0)
  mean[...] = ml.mean(v)
  least[...] = ml.min(v)
  top[...] = ml.max(q[...])
  row_min[...] = ml.min(r[...], axis=1)


def test_short_reads_reduce_after_math_with_the_identity_in_their_padding():
  p = np.abs(_rnd(5, 4)) + 3.0
  q = np.random.default_rng(5).integers(-128, -3, 100).astype(np.int8)
  r = np.random.default_rng(6).integers(1, 256, (4, 40)).astype(np.uint8)
  total, mean, least, top, row_min = reduced_after_math(p, q, r, interpret=True)
  np.testing.assert_allclose(float(total), np.sum((p + 1) * 2), rtol=1e-5)
  np.testing.assert_allclose(float(mean), np.mean(p + 1), rtol=1e-5)
  assert float(least) == float(np.min(p + 1))
  assert int(top) == int(q.max())
  np.testing.assert_array_equal(np.asarray(row_min), r.min(1))


# ---------------------------------------------------------------- row statistics broadcast back (softmax, layer norm)
# A softmax over the rows of a (3, 45) or (8, 24) tile and a layer norm of a (17,) vector: keepdims statistics
# broadcast back against the padded tile (a padded row's statistic counts only its own elements).
@mg.mgpu_kernel(out_shape=lambda x, v: (x, v))
def softmax_and_norm(x, v, o, n):
  s = x[...]
  e = ml.exp(s - ml.max(s, axis=1, keepdims=True))
  o[...] = e / ml.sum(e, axis=1, keepdims=True)
  d = v[...] - ml.mean(v[...], axis=-1, keepdims=True)
  n[...] = d * ml.rsqrt(ml.mean(d * d, axis=-1, keepdims=True) + 1e-5)


def test_row_statistics_of_odd_windows_broadcast_back():
  for shape in ((3, 45), (8, 24)):
    x, v = _rnd(shape, 11), _rnd(17, 12)
    o, n = softmax_and_norm(x, v, interpret=True)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(o), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7, err_msg=str(shape))
    d = v - v.mean()
    np.testing.assert_allclose(np.asarray(n), d / np.sqrt((d * d).mean() + 1e-5), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- a scan of a small window
# `o[...] = ml.cumsum(x[...], axis=1)` of a (2, 8) window: no op scans the vector a small window is held as, and
# the (2, 8) tile was MG204. A forward scan keeps the padding at the end of its axis.
@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def scanned(x, s, m):
  s[...] = ml.cumsum(x[...], axis=1)
  m[...] = ml.cummax(x[...] * 2.0, axis=0)


def test_a_small_window_scans_padded():
  x = _rnd((2, 8), 7)
  s, m = scanned(x, interpret=True)
  np.testing.assert_allclose(np.asarray(s), np.cumsum(x, axis=1), rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(m), np.maximum.accumulate(x * 2, axis=0))
  # (a reverse scan was MG204 here; since probe 46h its padding holds the scan's identity: tests/test_probe46h.py)
  np.testing.assert_allclose(np.asarray(scanned_from_the_end(x, interpret=True)),
                             np.flip(np.cumsum(np.flip(x * 2.0, 1), axis=1), 1), rtol=1e-5)
  x = np.random.default_rng(17).standard_normal(17).astype(np.float32)    # (since probe 46e an argmax computes
  assert int(argmax_of_17(jnp.asarray(x), interpret=True)) == np.argmax(x)  # padded: the least index of a hit)
  # (v.shape and len(v) ended the padded trace, MG204: they would have been 24; since probe 46j they are its own 17)
  np.testing.assert_allclose(np.asarray(divided_by_its_length(x, interpret=True)), x / 17, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(divided_by_its_len(x, interpret=True)), x / 17, rtol=1e-6)


# ---------------------------------------------------------------- what the padding cannot take fails as it did (checked
# with the kernels that compute)
# A reverse scan would scan the padding first, x.shape would be the padded shape: the padded trace was given up and
# the kernel failed at the read, with the hint that pads it (both compute since probes 46h and 46j). (An argmax takes the least index of the elements equal
# to the extreme, which is a real one: since probe 46e it computes padded.)
@mg.mgpu_kernel(out_shape=lambda x: x)
def scanned_from_the_end(x, o):
  o[...] = ml.cumsum(x[...] * 2.0, axis=1, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def divided_by_its_length(x, o):
  v = x[...]
  o[...] = v / v.shape[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def divided_by_its_len(x, o):
  v = x[...]
  o[...] = v / len(v)


@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.int32))
def argmax_of_17(x, o):
  o[...] = ml.argmax(x[...] + 1.0)


# ---------------------------------------------------------------- a leading-axis reduction to a shape no register holds
# `o[...] = ml.sum(x[...], axis=0)` of a (2, 3, 64) tile: its (2, 192) reshape has fewer than 4 rows and its (3, 64)
# result is no register tensor, so it was MG204 "partial reductions work on 1-D and 2-D tensors", and the hint's
# `v[0] + v[1]` failed too ("this tensor has shape (3, 64)"). The slabs' rows are now combined through SMEM, and a
# (3, 64) window of a register tensor is read back a row at a time, held as the vector of its 192 elements.
@mg.mgpu_kernel(out_shape=lambda x, q, y: (S(x.shape[1:], x.dtype), S(x.shape[1:], x.dtype), S(x.shape[1:], jnp.int32),
                                           S(y.shape[1:], y.dtype)))
def leading_sums(x, q, y, s, top, count, ymax):
  s[...] = ml.sum(x[...], axis=0)
  top[...] = ml.max(x[...] * 2.0, axis=0)
  count[...] = ml.sum(q[...], axis=0)
  ymax[...] = ml.max(y[...], axis=0)       # (3, 3, 64): no register tensor holds it; read padded


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], x.dtype))
def leading_sum_hint_followed(x, o):
  v = x[...]
  o[...] = v[0] + v[1]


def test_a_leading_axis_reduction_to_a_shape_no_register_holds_computes():
  x, y = _rnd((2, 3, 64), 8), _rnd((3, 3, 64), 9)
  q = np.random.default_rng(10).integers(-100, 100, (2, 3, 64)).astype(np.int8)
  s, top, count, ymax = leading_sums(x, q, y, interpret=True)
  np.testing.assert_allclose(np.asarray(s), x.sum(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(top), (x * 2).max(0))
  np.testing.assert_array_equal(np.asarray(count), q.astype(np.int32).sum(0))
  np.testing.assert_array_equal(np.asarray(ymax), y.max(0))
  np.testing.assert_allclose(np.asarray(leading_sum_hint_followed(x, interpret=True)), x[0] + x[1], rtol=1e-6)


@pytest.mark.gpu
def test_odd_windows_read_and_stored_padded_past_the_arrays_end_on_the_gpu():
  """The padded reads and stores run past the array's end under their masks (masked lanes touch no memory)."""
  for shape in ((17,), (1, 17), (8, 24), (3, 45)):
    a, b = _rnd(shape, 1), _rnd(shape, 2)
    np.testing.assert_allclose(np.asarray(doubled(jnp.asarray(a), jnp.asarray(b))),
                               np.where(a > 0, a * 2, np.exp(b)) - 1, rtol=1e-5, err_msg=str(shape))
  x = _rnd(300, 3)
  np.testing.assert_array_equal(np.asarray(doubled_in_windows(jnp.asarray(x))), x * 2)
  x = _rnd((2, 8), 7)
  s, m = scanned(jnp.asarray(x))
  np.testing.assert_allclose(np.asarray(s), np.cumsum(x, axis=1), rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(m), np.maximum.accumulate(x * 2, axis=0))


@pytest.mark.gpu
def test_short_reads_reduced_after_math_read_padded_past_the_arrays_end_on_the_gpu():
  p = np.abs(_rnd(5, 4)) + 3.0
  q = np.random.default_rng(5).integers(-128, -3, 100).astype(np.int8)
  r = np.random.default_rng(6).integers(1, 256, (4, 40)).astype(np.uint8)
  total, mean, least, top, row_min = reduced_after_math(jnp.asarray(p), jnp.asarray(q), jnp.asarray(r))
  np.testing.assert_allclose(float(total), np.sum((p + 1) * 2), rtol=1e-5)
  np.testing.assert_allclose(float(mean), np.mean(p + 1), rtol=1e-5)
  assert float(least) == float(np.min(p + 1))
  assert int(top) == int(q.max())
  np.testing.assert_array_equal(np.asarray(row_min), r.min(1))


@pytest.mark.gpu
def test_a_leading_axis_reduction_to_a_shape_no_register_holds_on_the_gpu():
  """(3, 3, 64) is read padded past the array's end under its mask; the (2, 3, 64) ones go through SMEM."""
  x, y = _rnd((2, 3, 64), 8), _rnd((3, 3, 64), 9)
  q = np.random.default_rng(10).integers(-100, 100, (2, 3, 64)).astype(np.int8)
  s, top, count, ymax = leading_sums(jnp.asarray(x), jnp.asarray(q), jnp.asarray(y))
  np.testing.assert_allclose(np.asarray(s), x.sum(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(top), (x * 2).max(0))
  np.testing.assert_array_equal(np.asarray(count), q.astype(np.int32).sum(0))
  np.testing.assert_array_equal(np.asarray(ymax), y.max(0))
  np.testing.assert_allclose(np.asarray(leading_sum_hint_followed(jnp.asarray(x))), x[0] + x[1], rtol=1e-6)


@pytest.mark.gpu
def test_row_statistics_of_odd_windows_read_padded_past_the_arrays_end_on_the_gpu():
  for shape in ((3, 45), (8, 24)):
    x, v = _rnd(shape, 11), _rnd(17, 12)
    o, n = softmax_and_norm(jnp.asarray(x), jnp.asarray(v))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(o), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7, err_msg=str(shape))
    d = v - v.mean()
    np.testing.assert_allclose(np.asarray(n), d / np.sqrt((d * d).mean() + 1e-5), rtol=1e-4, atol=1e-5)
