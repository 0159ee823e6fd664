"""Probe 41s (a user's reductions and shape work in statistics): a reduction over axes around one kept axis whose
last-axis-first intermediate is too small for a register tensor reduces the other axes first; a reduction whose
result has two or more axes but fewer than 128 elements, over axes no 2-D reshape reduces, says so with a hint
that compiles (the middle-axis one said "a window of a register tensor", the others READ_2D_FIRST)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _close(got, want, tol):
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert g.shape == w.shape and g.dtype == w.dtype
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


# ---------------------------------------------------------------- axes around one kept axis, a small intermediate
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), F32), S((x.shape[1],), F32), x), grid=(1,))
def channel_stats(x, mx, mean, centred):
  """Per-channel statistics of a (4, 8, 32) tile: the max and mean over (0, 2), and the tile less its (1, 8, 1)
  mean (the (4, 8) left by the last axis reduced first holds 32 elements: no register tensor)."""
  v = x[...]
  mx[...] = ml.max(v, axis=(0, 2))
  mean[...] = ml.mean(v, axis=(0, -1))
  centred[...] = v - ml.mean(v, axis=(0, 2), keepdims=True)


def _channel_stats_want(x):
  return jnp.max(x, (0, 2)), jnp.mean(x, (0, 2)), x - jnp.mean(x, (0, 2), keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[2],), F32), S((x.shape[2],), F32)), grid=(1,))
def head_stats(x, s, var):
  """A (2, 4, 8, 32) tile's sum and variance over (0, 1, 3): 8 results, the two leading axes first."""
  v = x[...]
  s[...] = ml.sum(v, axis=(0, 1, 3))
  var[...] = ml.var(v, axis=(0, 1, 3))


def test_axes_around_one_kept_axis_reduce_the_leading_ones_first():
  x = _rand((4, 8, 32), 1)
  _close(channel_stats(x, interpret=True), _channel_stats_want(x), 1e-5)
  assert "@mosaic_gpu" in _export(channel_stats, S(x.shape, F32))
  x = _rand((2, 4, 8, 32), 2)
  _close(head_stats(x, interpret=True), (jnp.sum(x, (0, 1, 3)), jnp.var(x, (0, 1, 3))), 1e-4)
  assert "@mosaic_gpu" in _export(head_stats, S(x.shape, F32))


# ---------------------------------------------------------------- small results of two or more axes
@mg.mgpu_kernel(out_shape=lambda x: S((4, 8), F32), grid=(1,))
def outer_sum(x, o):
  v = x[...]
  o[...] = ml.sum(v, axis=(0, 3))   # outer sum


@mg.mgpu_kernel(out_shape=lambda x: S((32,), F32), grid=(1,))
def outer_sum_fixed(x, o):
  v = x[...]
  o[...] = ml.sum(v.reshape(2, 32, 32), axis=(0, 2))


@mg.mgpu_kernel(out_shape=lambda x: S((2, 32), F32), grid=(1,))
def middle_var(x, o):
  v = x[...]
  o[...] = ml.var(v, axis=(1, 2))   # middle var


@mg.mgpu_kernel(out_shape=lambda x: S((2, 32), F32), grid=(1,))
def middle_var_fixed(x, out):
  for i in ml.static_range(2):
    out.at[i][...] = ml.var(x.at[i][...].reshape(32, 32), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((2, 32), F32), grid=(1,))
def middle_max(x, o):
  o[...] = ml.max(ml.exp(x[...]), axis=1)   # middle max


def test_a_small_result_over_leading_and_trailing_axes_computes_as_its_hint_does():
  """(Probe 44a: it computes, as the (0, 2) sum of the (2, 32, 32) reshape; stored whole it was MG204 at the store,
  whose hint stored its vector; since probe 44f it is stored a row at a time.)"""
  x = _rand((2, 4, 8, 32), 3)
  np.testing.assert_allclose(outer_sum(x, interpret=True), jnp.sum(x, (0, 3)), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(outer_sum_fixed(x, interpret=True).reshape(4, 8), jnp.sum(x, (0, 3)), rtol=1e-4, atol=1e-4)
  assert "@mosaic_gpu" in _export(outer_sum_fixed, S(x.shape, F32))


def test_a_small_result_over_middle_axes_computes_as_its_hint_does():
  """(Stored whole, it was MG204 at the store, whose hint reduced each leading index apart; since probe 44f its rows
  are stored from the tile it is spread along, probe 44a.)"""
  x = _rand((2, 4, 8, 32), 4)
  np.testing.assert_allclose(middle_var(x, interpret=True), jnp.var(x, (1, 2)), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(middle_var_fixed(x, interpret=True), jnp.var(x, (1, 2)), rtol=1e-4, atol=1e-4)
  assert "@mosaic_gpu" in _export(middle_var_fixed, S(x.shape, F32))
  x = _rand((2, 8, 32), 5)          # one middle axis of a computed tensor
  np.testing.assert_allclose(middle_max(x, interpret=True), jnp.max(jnp.exp(x), 1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_axes_around_one_kept_axis_and_small_result_fixes_match_jnp():
  x = _rand((4, 8, 32), 1)
  _close(channel_stats(x), _channel_stats_want(x), 1e-5)
  x = _rand((2, 4, 8, 32), 2)
  _close(head_stats(x), (jnp.sum(x, (0, 1, 3)), jnp.var(x, (0, 1, 3))), 1e-4)
  np.testing.assert_allclose(outer_sum_fixed(x).reshape(4, 8), jnp.sum(x, (0, 3)), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(middle_var_fixed(x), jnp.var(x, (1, 2)), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- a broadcast product's operands in any form
F16 = jnp.float16


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=(1,))
def converted_scores(a, b, o):
  o[...] = ml.sum(a[...].astype(F32)[:, None, :] * b[...].astype(F32)[None, :, :], axis=2)   # converted


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=(1,))
def converted_scores_fixed(a, b, out):
  a_s = ml.smem((64, 64))
  b_s = ml.smem((16, 64))
  ml.copy(a.at[ml.ds(0, 64), :], a_s)
  ml.copy(b, b_s)
  s = ml.dot(a_s, b_s.T)
  out.at[ml.ds(0, 64), :].store(s, mask=ml.arange(64)[:, None] < 4)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=(1,))
def computed_keys(a, b, o):
  q = a[...]
  o[...] = ml.sum(q[:, None, :] * ml.exp(b[...])[None], axis=-1)   # computed


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=(1,))
def computed_keys_fixed(a, b, out):
  q_s = ml.smem((64, 64))
  ml.copy(a.at[ml.ds(0, 64), :], q_s)
  b_s = ml.smem((64, 64), jnp.float32)
  b_s[...] = ml.concatenate([ml.exp(b[...]), ml.zeros((48, 64), jnp.float32)], axis=0)
  s = ml.dot(q_s, b_s.T)
  out.at[ml.ds(0, 64), ml.ds(0, 64)].store(s, mask=(ml.arange(64)[:, None] < 4) & (ml.arange(64)[None, :] < 16))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=(1,))
def computed_keys_by_rows(a, b, out):
  q = a[...]
  for i in ml.static_range(4):
    out.at[i][...] = ml.sum(q[i][None, :] * ml.exp(b[...]), axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((4, b.shape[0]), F32), grid=lambda a, b: (a.shape[0] // 4,))
def window_scores(a, b, o):
  i = ml.program_id(0)
  o.at[ml.ds(i * 4, 4), :][...] = ml.sum(a[ml.ds(i * 4, 4), :][:, None, :] * b[...][None, :, :], axis=2)  # window


def test_a_product_of_converted_or_computed_operands_is_hinted_as_the_dot_and_the_hints_work():
  a, b = _rand((4, 64), 5, F16), _rand((16, 64), 6, F16)
  with pytest.raises(mg.LayoutError) as info:
    converted_scores.check(S(a.shape, F16), S(b.shape, F16))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# converted"), 11)
  assert e.message == "ml.sum over axis 2 of a 3-D tensor (4, 16, 64): partial reductions work on 1-D and 2-D tensors"
  assert e.hint.startswith(
      "this is a[...].astype(F32) @ b[...].astype(F32).T, which ml.dot computes on the tensor cores: put the operands"
      " in SMEM buffers of 64 and 16 rows, ml.copy(a.at[ml.ds(0, 64), :], a_s); ml.copy(b, b_s), then s = ml.dot(a_s,"
      " b_s.T), a (64, 16) product, then o.at[ml.ds(0, 64), :].store(s, mask=ml.arange(64)[:, None] < 4)")
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32).T
  np.testing.assert_allclose(converted_scores_fixed(a, b, interpret=True), want, rtol=1e-2, atol=1e-2)
  assert "@mosaic_gpu" in _export(converted_scores_fixed, S(a.shape, F16), S(b.shape, F16))

  a, b = _rand((4, 64), 7), _rand((16, 64), 8)
  with pytest.raises(mg.LayoutError) as info:
    computed_keys.check(S(a.shape, F32), S(b.shape, F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# computed"), 11)
  assert e.hint == (
      "this is q @ ml.exp(b[...]).T, which ml.dot computes on the tensor cores: put the operands in SMEM buffers of 64"
      " and 64 rows, ml.copy(a.at[ml.ds(0, 64), :], q_s) (zeros past the array's last row); b_s = ml.smem((64, 64),"
      " jnp.float32); b_s[...] = ml.concatenate([ml.exp(b[...]), ml.zeros((48, 64), jnp.float32)], axis=0), then s ="
      " ml.dot(q_s, b_s.T), a (64, 64) product, then o.at[ml.ds(0, 64), ml.ds(0, 64)].store(s, mask=(ml.arange(64)[:,"
      " None] < 4) & (ml.arange(64)[None, :] < 16)) (the window past the output's 4 rows and 16 columns masked) (ml.dot"
      " reads float32 operands as TF32, about 3 significant digits; the rows keep float32); or, in registers, one row"
      " of q at a time: ml.sum(q[i][None, :] * ml.exp(b[...]), axis=1) for i in ml.static_range(4), each a (16,)"
      " vector")
  want = a @ jnp.exp(b).T
  np.testing.assert_allclose(computed_keys_fixed(a, b, interpret=True), want, rtol=3e-2, atol=3e-2)
  np.testing.assert_allclose(computed_keys_by_rows(a, b, interpret=True), want, rtol=1e-5, atol=1e-5)
  for kernel in (computed_keys_fixed, computed_keys_by_rows):
    assert "@mosaic_gpu" in _export(kernel, S(a.shape, F32), S(b.shape, F32))


def test_a_product_of_a_window_copies_a_64_row_window_and_the_rows_index_is_not_the_users():
  with pytest.raises(mg.LayoutError) as info:
    window_scores.check(S((128, 64), F32), S((16, 64), F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# window"), 34)
  assert "ml.copy(a.at[ml.ds(i * 4, 64), :], a_s); ml.copy(b, b_s), then s = ml.dot(a_s, b_s.T)" in e.hint
  assert e.hint.endswith("ml.sum(a[ml.ds(i * 4, 4), :][r][None, :] * b[...], axis=1) for r in ml.static_range(4),"
                         " each a (16,) vector")


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=(1,))
def big_scores(a, b, o):
  o[...] = ml.sum((a[...] * 2.0)[:, None, :] * b[...][None, :, :], axis=-1)   # big


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=(1,))
def big_scores_fixed(a, b, out):
  a_s = ml.smem((64, 32), jnp.float32)
  a_s[...] = a[...] * 2.0
  b_s = ml.smem((64, 32))
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s.T)


def test_a_product_too_large_for_smem_is_hinted_as_the_dot_at_the_sum():
  """It was MG402 at the broadcast, whose hint ("read such pieces straight from the ref") did not apply."""
  a, b = _rand((64, 32), 9), _rand((64, 32), 10)
  with pytest.raises(mg.SmemCapacityError) as info:
    big_scores.check(S(a.shape, F32), S(b.shape, F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# big"), 11)
  assert e.message == ("ml.sum over axis -1 of the broadcast product (64, 64, 32) (524288 bytes) moves the product"
                       " between threads through SMEM, more than the 232432 bytes (227 KiB less 16 bytes) a kernel's"
                       " buffers can use")
  assert e.hint.startswith(
      "this is (a[...] * 2.0) @ b.T, which ml.dot computes on the tensor cores: put the operands in SMEM buffers of 64"
      " and 64 rows, a_s = ml.smem((64, 32), jnp.float32); a_s[...] = a[...] * 2.0; ml.copy(b, b_s), then s ="
      " ml.dot(a_s, b_s.T), a (64, 64) product, then o[...] = s")
  np.testing.assert_allclose(big_scores_fixed(a, b, interpret=True), 2 * a @ b.T, rtol=3e-2, atol=3e-2)
  assert "@mosaic_gpu" in _export(big_scores_fixed, S(a.shape, F32), S(b.shape, F32))


@pytest.mark.gpu
def test_gpu_product_hints_followed_match_jnp():
  a, b = _rand((4, 64), 5, F16), _rand((16, 64), 6, F16)
  np.testing.assert_allclose(converted_scores_fixed(a, b), np.asarray(a, np.float32) @ np.asarray(b, np.float32).T,
                             rtol=1e-2, atol=1e-2)
  a, b = _rand((4, 64), 7), _rand((16, 64), 8)
  np.testing.assert_allclose(computed_keys_fixed(a, b), a @ jnp.exp(b).T, rtol=3e-2, atol=3e-2)
  # (numpy's float32 product: jnp's matmul on the GPU rounds its float32 operands to TF32)
  want = np.asarray(a, np.float32) @ np.exp(np.asarray(b, np.float32)).T
  np.testing.assert_allclose(computed_keys_by_rows(a, b), want, rtol=1e-4, atol=1e-3)
  a, b = _rand((64, 32), 9), _rand((64, 32), 10)
  np.testing.assert_allclose(big_scores_fixed(a, b), 2 * a @ b.T, rtol=3e-2, atol=3e-2)


# ---------------------------------------------------------------- take_along_axis of an SMEM buffer, many indices a row
@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, x.dtype), grid=(1,))
def smem_take(x, idx, o):
  buf = ml.smem(x.shape)
  ml.copy(x, buf)
  o[...] = ml.take_along_axis(buf, idx[...], axis=1)   # smem take


@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, x.dtype), grid=(1,))
def smem_take_cols(x, idx, o):
  buf = ml.smem(x.shape)
  ml.copy(x, buf)
  o[...] = ml.take_along_axis(buf, idx[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, x.dtype), grid=(1,))
def gmem_take(x, idx, o):
  o[...] = ml.take_along_axis(x, idx[...], axis=1)


def _ids(shape, n, seed):
  return jnp.asarray(np.random.default_rng(seed).integers(-n, n, shape), jnp.int32)


def test_take_along_axis_of_an_smem_buffer_takes_32_indices_a_row():
  """Above 16 indices a row it was MG003 "only GMEM refs gather", whose hint ("take the rows one by one") did not fit."""
  x = _rand((128, 64), 11)
  idx = _ids((128, 32), 64, 12)
  np.testing.assert_array_equal(smem_take(x, idx, interpret=True), jnp.take_along_axis(x, idx, axis=1))
  assert "@mosaic_gpu" in _export(smem_take, S(x.shape, F32), S(idx.shape, jnp.int32))
  idx = _ids((32, 64), 128, 13)
  np.testing.assert_array_equal(smem_take_cols(x, idx, interpret=True), jnp.take_along_axis(x, idx, axis=0))


def test_take_along_axis_of_an_smem_buffer_with_many_indices_is_its_gather():
  """Above 64 indices a row it was MG003 (each a select over the whole buffer), whose hint gathered from the GMEM
  array the buffer was copied from; since probe 69b an SMEM buffer gathers as a GMEM ref does (design note 228)."""
  x = _rand((128, 128), 14)
  idx = _ids((128, 128), 128, 15)
  np.testing.assert_array_equal(smem_take(x, idx, interpret=True), jnp.take_along_axis(x, idx, axis=1))
  assert "@mosaic_gpu" in _export(smem_take, S(x.shape, F32), S(idx.shape, jnp.int32))
  np.testing.assert_array_equal(gmem_take(x, idx, interpret=True), jnp.take_along_axis(x, idx, axis=1))


@pytest.mark.gpu
def test_gpu_take_along_axis_of_an_smem_buffer_matches_jnp():
  x = _rand((128, 64), 11)
  idx = _ids((128, 32), 64, 12)
  np.testing.assert_array_equal(smem_take(x, idx), jnp.take_along_axis(x, idx, axis=1))
  idx = _ids((32, 64), 128, 13)
  np.testing.assert_array_equal(smem_take_cols(x, idx), jnp.take_along_axis(x, idx, axis=0))


# ---------------------------------------------------------------- small statistics that keep the shape or broadcast back
# (over a middle axis, ml.softmax(x[...], axis=1) and v - ml.mean(v, axis=1, keepdims=True) of a (2, 8, 32) tile
# compute since probe 44a: tests/test_probe44a.py)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def middle_softmax_fixed(x, out):
  for i in ml.static_range(2):
    out.at[i][...] = ml.softmax(x.at[i][...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def outer_centred(x, o):
  v = x[...]
  o[...] = v - ml.max(v, axis=(0, 3), keepdims=True)   # outer centred


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def outer_centred_fixed(x, o):
  w = x[...].reshape(2, 32, 32)
  o[...] = (w - ml.max(w, axis=(0, 2), keepdims=True)).reshape(2, 4, 8, 32)


def test_a_small_statistic_over_outer_axes_broadcasts_back_as_its_hint_did():
  """The keepdims form got the reduced form's hint (a vector a row of an output), which did not apply; then the 3-D
  reshape's hint; since probe 44a the compiler computes it so."""
  x = _rand((2, 4, 8, 32), 16)
  want = x - jnp.max(x, axis=(0, 3), keepdims=True)
  np.testing.assert_allclose(outer_centred(x, interpret=True), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(outer_centred_fixed(x, interpret=True), want, rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(outer_centred, S(x.shape, F32))


# ---------------------------------------------------------------- a small statistic of three or more axes, no keepdims
@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def head_softmax(x, p_out, d_out):
  """Per-head attention statistics of a (1, 2, 16, 64) score tile: the (1, 2, 16) row max, 32 elements, used
  as m[..., None] (and its logsumexp subtracted back): it was MG204, whose hint stored it as a vector."""
  s = x[...]
  m = ml.max(s, axis=-1)
  p = ml.exp(s - m[..., None])
  l = ml.sum(p, axis=3)
  p_out[...] = p / l[:, :, :, None]
  d_out[...] = s - (m + ml.log(l))[..., None]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:3], F32), grid=(1,))
def head_max(x, o):
  o[...] = ml.max(x[...], axis=-1)   # head max


@mg.mgpu_kernel(out_shape=lambda x: S((32,), F32), grid=(1,))
def head_max_fixed(x, a):
  a[...] = (ml.max(x[...], axis=-1)).reshape(32)


def test_a_small_statistic_of_three_axes_broadcasts_back_without_keepdims():
  x = _rand((1, 2, 16, 64), 17)
  _close(head_softmax(x, interpret=True), (jax.nn.softmax(x, -1), x - jax.nn.logsumexp(x, -1, keepdims=True)), 1e-5)
  assert "@mosaic_gpu" in _export(head_softmax, S(x.shape, F32))
  # (stored whole it was MG204 with the hint to store its vector; since probe 44f a row of 16 at a time)
  np.testing.assert_allclose(head_max(x, interpret=True), jnp.max(x, -1), rtol=1e-6)
  np.testing.assert_allclose(head_max_fixed(x, interpret=True), jnp.max(x, -1).reshape(32), rtol=1e-6)
  assert "@mosaic_gpu" in _export(head_max_fixed, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_small_statistics_match_jnp():
  x = _rand((1, 2, 16, 64), 17)
  _close(head_softmax(x), (jax.nn.softmax(x, -1), x - jax.nn.logsumexp(x, -1, keepdims=True)), 1e-5)
  for fixed, shape, want in [(middle_softmax_fixed, (2, 8, 32), lambda x: jax.nn.softmax(x, 1)),
                             (outer_centred_fixed, (2, 4, 8, 32), lambda x: x - jnp.max(x, axis=(0, 3), keepdims=True))]:
    x = _rand(shape, 16)
    np.testing.assert_allclose(fixed(x), want(x), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def rms_small(x, a):
  v = x[...]
  m = ml.sum(v * v, axis=-1)   # rms small
  a[...] = v * ml.rsqrt(m[..., None] / 64 + 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def rms_small_fixed(x, a):
  v = x[...]
  m = ml.sum(v * v, axis=2, keepdims=True)
  a[...] = v * ml.rsqrt(m / 64 + 1e-5)


def test_a_small_two_axis_statistic_hints_keepdims_to_broadcast_it_back():
  """Its hint only stored the statistic as a vector, of no use for the m[..., None] the kernel goes on with; since
  probe 43a the (2, 8) statistic is the vector of the 2-D reshape's rows typed (2, 8), and m[..., None] takes it."""
  x = _rand((2, 8, 64), 18)
  want = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5)
  np.testing.assert_allclose(rms_small(x, interpret=True), want, rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(rms_small, S(x.shape, F32))
  np.testing.assert_allclose(rms_small_fixed(x, interpret=True), want, rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(rms_small_fixed, S(x.shape, F32))


# ---------------------------------------------------------------- a scan without an axis: jnp flattens
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def running_total(x, o):
  v = x[...]
  o[...] = ml.cumsum(v * 2.0)   # running total


@mg.mgpu_kernel(out_shape=lambda x: S((x.size,), F32), grid=(1,))
def running_total_fixed(x, o):
  v = x[...]
  o[...] = ml.cumsum((v * 2.0).reshape(-1))


def test_a_scan_of_a_tile_without_an_axis_hints_jnps_flattened_scan_which_works():
  x = _rand((16, 64), 19)
  with pytest.raises(mg.KernelTypeError) as info:
    running_total.check(S(x.shape, F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# running total"), 11)
  assert e.message == "ml.cumsum of a 2-D tensor needs an axis (jnp's axis=None flattens it)"
  assert e.hint.endswith("; jnp's flattened scan is ml.cumsum((v * 2.0).reshape(-1)), a 1-D vector")
  np.testing.assert_allclose(running_total_fixed(x, interpret=True), jnp.cumsum(x * 2.0), rtol=1e-4, atol=1e-4)
  assert "@mosaic_gpu" in _export(running_total_fixed, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_followed_hints_match_jnp():
  x = _rand((16, 64), 19)
  np.testing.assert_allclose(running_total_fixed(x), jnp.cumsum(x * 2.0), rtol=1e-4, atol=1e-4)
  x = _rand((2, 8, 64), 18)
  np.testing.assert_allclose(rms_small_fixed(x), x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5),
                             rtol=1e-5, atol=1e-5)
  x = _rand((2, 4, 8, 32), 16)
  np.testing.assert_allclose(outer_centred_fixed(x), x - jnp.max(x, axis=(0, 3), keepdims=True), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: (S((), F32), S((), F32)), grid=(1,))
def total_of_row_maxes(x, a, b):
  s = x[...]
  a[...] = ml.sum(ml.max(s, axis=-1))
  b[...] = ml.min(ml.sum(s, axis=-1, keepdims=True))


def test_a_full_reduction_of_a_small_statistic_reduces_its_vector():
  """It was MG204 'm has shape (1, 2, 16): register tensors need a multiple of 128 elements' at the statistic."""
  x = _rand((1, 2, 16, 64), 20)
  _close(total_of_row_maxes(x, interpret=True), (jnp.sum(jnp.max(x, -1)), jnp.min(jnp.sum(x, -1))), 1e-4)
  assert "@mosaic_gpu" in _export(total_of_row_maxes, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_full_reduction_of_a_small_statistic_matches_jnp():
  x = _rand((1, 2, 16, 64), 20)
  _close(total_of_row_maxes(x), (jnp.sum(jnp.max(x, -1)), jnp.min(jnp.sum(x, -1))), 1e-4)
