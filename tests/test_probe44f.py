"""Probe 44f (masks and statistics of small or ragged 3-D tiles: per-row lengths, masked softmax over padded batches).

- A mask of per-row lengths too small for a register tensor, `ml.arange(8)[None, :, None] < n[...][:, None, None]`
  of (2, 8, 1), is recomputed at the shape of the tile it meets (a masked load's window, ml.where's operands): it was
  MG204 'broadcasting n[...] of shape (2, 1, 1) to (2, 8, 1)' (frontend/ops/small_regrid.py); so is a (2, 1, 64) mask
  of per-batch column lengths, whose own broadcast of the lengths no layout takes.
- A small statistic stored whole into an output of its shape (`out[...] = ml.max(x, axis=2)` of a (2, 8, 64) tile
  into (2, 8); a keepdims (2, 8, 1) one) is stored a row of its vector at a time, or an element at a time where its
  rows are shorter than a vector: it was MG204 with the hint to store it as a vector (frontend/ops/small_stores.py).
- A statistic over a middle axis stored whole in its own shape ((2, 1, 32), or (2, 32) without keepdims) is stored
  from the tile it is spread along, a row at a time: it was MG204 with a hint that reduced each leading index apart.
- A statistic over a middle axis meeting per-batch lengths broadcast to its shape (a masked mean's divisor,
  `ml.sum(v, axis=1) / lens[:, None]`) is computed on its spread tile, the lengths broadcast to the tile: it was MG204.
- A small mask reduced along an axis (`ml.sum(m, axis=1)` of the (2, 8, 1) mask, to count the lengths) was MG204 naming
  the compiler's SMEM scratch, then in the user's words; it computes since probe 45a.
- Stored into a window of its elements on other axes ((8, 8) into (8, 1, 8)), a value is the store's shape mismatch,
  whose hint inserts the axis where the window has it (it said m[:, :, None], of shape (8, 8, 1)).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _rand(shape, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _export(kernel, *specs):
  fn = jax.jit(lambda *a: kernel(*a))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _close(got, want, tol=1e-5):
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


# ---------------------------------------------------------------- masks of per-row lengths, at the tile's shape
@mg.mgpu_kernel(out_shape=lambda x, n, s, e: (x, x, x, x), grid=(1,))
def ragged_masks(x, n, s, e, a, b, c, d):
  t = ml.arange(8)[None, :, None]
  mask = t < n[...][:, None, None]                      # (2, 8, 1): 16 elements
  a[...] = ml.softmax(x.at[:, ml.ds(0, 8), :].load(mask=mask, other=-jnp.inf), axis=1)
  v = x[...]
  b[...] = ml.where(mask, v, 0.0)
  seg = (t >= s[...][:, None, None]) & (t < e[...][:, None, None])      # a segment [s, e) of each batch
  c[...] = ml.where(seg, v, -1.0)
  w = ml.where(mask, v, -jnp.inf)                       # a masked softmax written out
  m = ml.max(w, axis=1, keepdims=True)
  p = ml.exp(w - m)
  d[...] = p / ml.sum(p, axis=1, keepdims=True) + mask.astype(jnp.float32)


def _ragged_masks_want(x, n, s, e):
  t = np.arange(8)[None, :, None]
  mask, seg = t < n[:, None, None], (t >= s[:, None, None]) & (t < e[:, None, None])
  soft = jax.nn.softmax(np.where(mask, x, -np.inf), 1)
  return soft, np.where(mask, x, 0), np.where(seg, x, -1), soft + mask


def test_a_mask_of_per_row_lengths_too_small_for_a_register_tensor_is_computed_at_its_tiles_shape():
  """Each was MG204 'broadcasting n[...] of shape (2, 1, 1) to (2, 8, 1): broadcasting works into 1-D and 2-D
  tensors', with a hint to broadcast the lengths to (2, 8, 32) by hand."""
  x, n = _rand((2, 8, 32), 1), np.array([5, 8], np.int32)
  s, e = np.array([1, 0], np.int32), np.array([4, 6], np.int32)
  _close(ragged_masks(x, n, s, e, interpret=True), _ragged_masks_want(x, n, s, e))
  ir = ragged_masks.typed_ir(S(x.shape, F32), *(S((2,), I32),) * 3)
  assert "tensor<2x8x1" not in ir             # (the small mask is computed at the tile's shape, not its own)
  assert "@mosaic_gpu" in _export(ragged_masks, S(x.shape, F32), *(S((2,), I32),) * 3)


@mg.mgpu_kernel(out_shape=lambda x, s, n: (x, s), grid=(1,))
def ragged_heads_and_keys(x, s, n, a, b):
  t = ml.arange(8)[None, None, :, None]                 # (2, 1, 8, 1) over (batch, head, seq, d)
  a[...] = ml.where(t < n[...][:, None, None, None], x[...], 0.0)
  k = ml.arange(16)[None, None, :]                      # (2, 1, 16): per-batch key lengths of (2, 8, 16) scores
  b[...] = ml.softmax(ml.where(k < n[...][:, None, None], s[...], -jnp.inf), axis=-1)


def test_masks_of_per_batch_lengths_over_heads_and_keys_are_computed_at_their_tiles_shape():
  x, s, n = _rand((2, 2, 8, 32), 9), _rand((2, 8, 16), 10), np.array([5, 8], np.int32)
  want = (np.where(np.arange(8)[None, None, :, None] < n[:, None, None, None], x, 0),
          jax.nn.softmax(np.where(np.arange(16)[None, None, :] < n[:, None, None], s, -np.inf), -1))
  _close(ragged_heads_and_keys(x, s, n, interpret=True), want)
  assert "@mosaic_gpu" in _export(ragged_heads_and_keys, S(x.shape, F32), S(s.shape, F32), S((2,), I32))


@mg.mgpu_kernel(out_shape=lambda x, n: (S((2, 8), F32), x), grid=(1,))
def ragged_columns(x, n, a, b):
  c = ml.arange(64)[None, None, :]
  mask = c < n[...][:, None, None]                      # (2, 1, 64): 128 elements, but 2 rows of 64
  v = x[...]
  a[...] = ml.sum(ml.where(mask, v, 0.0), axis=2)
  b[...] = ml.softmax(v, axis=-1, where=mask)


def test_a_mask_of_per_batch_column_lengths_is_computed_at_its_tiles_shape():
  """It was MG204 'broadcasting n[...] of shape (2, 1, 1) to (2, 1, 64): broadcasting works into 1-D and 2-D tensors'
  (2 rows of 64 columns take no row-wise layout), though it meets a (2, 8, 64) tile that the lengths broadcast to."""
  x, n = _rand((2, 8, 64), 8), np.array([10, 64], np.int32)
  mask = np.broadcast_to(np.arange(64)[None, None, :] < n[:, None, None], x.shape)
  _close(ragged_columns(x, n, interpret=True), (np.where(mask, x, 0).sum(2), jax.nn.softmax(x, -1, where=mask)))
  assert "@mosaic_gpu" in _export(ragged_columns, S(x.shape, F32), S((2,), I32))


# ---------------------------------------------------------------- small statistics stored whole
@mg.mgpu_kernel(out_shape=lambda x, y: (S((2, 8), F32), S((2, 8, 1), F32), S((2, 8), F32), S((2, 8), I32),
                                        S((4, 4), F32), S((4, 4, 1), F32)), grid=(1,))
def small_stats_stored(x, y, a, b, c, d, e, f):
  v = x[...]                                            # (2, 8, 64): 16 row statistics
  a[...] = ml.max(v, axis=2)
  b[...] = ml.sum(v, axis=2, keepdims=True)
  c[...] = ml.logsumexp(v, axis=-1) * 2.0 + 1.0
  d[...] = ml.argmax(v, axis=2)
  w = y[...]                                            # (4, 4, 64): rows of 4, shorter than a vector
  e[...] = ml.min(w, axis=2)
  f[...] = ml.mean(w, axis=2, keepdims=True)


def _small_stats_want(x, y):
  return (x.max(2), x.sum(2, keepdims=True), jax.nn.logsumexp(x, -1) * 2 + 1, x.argmax(2), y.min(2),
          y.mean(2, keepdims=True))


def test_a_small_statistic_stored_whole_is_stored_a_row_or_an_element_at_a_time():
  """Each was MG204 'ml.max(v, axis=2) has shape (2, 8): 16 elements, too few for a register tensor of that shape',
  whose hint stored it as a (16,) vector reshaped outside the kernel."""
  x, y = _rand((2, 8, 64), 2), _rand((4, 4, 64), 3)
  _close(small_stats_stored(x, y, interpret=True), _small_stats_want(x, y))
  assert "@mosaic_gpu" in _export(small_stats_stored, S(x.shape, F32), S(y.shape, F32))


# ---------------------------------------------------------------- middle-axis statistics stored whole
@mg.mgpu_kernel(out_shape=lambda x, y: (S((2, 1, 32), F32), S((2, 32), F32), S((2, 1, 32), F32), S((2, 32), F32),
                                        S((2, 1, 1, 32), F32)), grid=(1,))
def middle_stats_stored(x, y, a, b, c, d, e):
  v = x[...]                                            # (2, 8, 32) over axis 1: (2, 1, 32), 64 elements
  a[...] = ml.sum(v, axis=1, keepdims=True)
  b[...] = ml.max(v, axis=1)
  c[...] = ml.mean(v, axis=1, keepdims=True)
  d[...] = ml.std(v, axis=1)
  e[...] = ml.logsumexp(y[...], axis=(1, 2), keepdims=True)   # (2, 2, 8, 32) over the middle run (1, 2)


def _middle_stats_want(x, y):
  return (x.sum(1, keepdims=True), x.max(1), x.mean(1, keepdims=True), x.std(1),
          jax.nn.logsumexp(y, (1, 2), keepdims=True))


def test_a_small_middle_axis_statistic_stored_whole_is_stored_from_its_spread_tile():
  """Each was MG204 'ml.sum(v, axis=1, keepdims=True) keeps axes of sizes (2, 32) around the reduced axis 1: 64
  elements ... no register tensor holds it to store', whose hint reduced each leading index apart."""
  x, y = _rand((2, 8, 32), 4), _rand((2, 2, 8, 32), 5)
  _close(middle_stats_stored(x, y, interpret=True), _middle_stats_want(x, y))
  assert "@mosaic_gpu" in _export(middle_stats_stored, S(x.shape, F32), S(y.shape, F32))


# ---------------------------------------------------------------- middle-axis statistics meeting per-batch lengths
@mg.mgpu_kernel(out_shape=lambda x, n: (S((2, 32), F32), x, S((2, 1, 32), F32)), grid=(1,))
def masked_mean_pool(x, n, a, b, c):
  t = ml.arange(8)[None, :, None]
  lens = n[...]
  v = ml.where(t < lens[:, None, None], x[...], 0.0)   # (2, 8, 32) padded along axis 1
  a[...] = ml.sum(v, axis=1) / lens[:, None].astype(jnp.float32)
  b[...] = v - ml.sum(v, axis=1, keepdims=True) / lens[:, None, None].astype(jnp.float32)
  c[...] = ml.max(v, axis=1, keepdims=True) * lens[:, None, None].astype(jnp.float32)


def _masked_mean_pool_want(x, n):
  v = np.where(np.arange(8)[None, :, None] < n[:, None, None], x, 0)
  return v.sum(1) / n[:, None], v - v.sum(1, keepdims=True) / n[:, None, None], v.max(1, keepdims=True) * n[:, None, None]


def test_a_middle_axis_statistic_meets_per_batch_lengths_broadcast_to_it():
  """Each was MG204: the statistic meeting `lens[:, None]` (a (2,) vector stretched to its (2, 32) shape) is not
  spread, so it was 'v of shape (2, 8, 32) is reduced or broadcast along an axis' at the reduction; keepdims,
  'broadcasting lens[:, None, None] ... of shape (2, 1, 1) to (2, 1, 32)'."""
  x, n = _rand((2, 8, 32), 6), np.array([3, 8], np.int32)
  _close(masked_mean_pool(x, n, interpret=True), _masked_mean_pool_want(x, n))
  assert "@mosaic_gpu" in _export(masked_mean_pool, S(x.shape, F32), S((2,), I32))


# ---------------------------------------------------------------- a small mask reduced along an axis
@mg.mgpu_kernel(out_shape=lambda x, n: S((2, 32), F32), grid=(1,))
def mask_counted(x, n, o):
  t = ml.arange(8)[None, :, None]
  m = (t < n[...][:, None, None]).astype(jnp.float32)
  o[...] = ml.sum(x[...] * m, axis=1) / ml.sum(m, axis=1)   # mask counted


@mg.mgpu_kernel(out_shape=lambda x, n: S((2, 32), F32), grid=(1,))
def mask_counted_fixed(x, n, o):
  t = ml.arange(8)[None, :, None]
  m = (t < n[...][:, None, None]).astype(jnp.float32)
  o[...] = ml.sum(x[...] * m, axis=1) / ml.sum(ml.broadcast_to(m, (2, 8, 32)), axis=1)


def test_a_small_mask_reduced_along_an_axis_computes_as_its_old_hint_did():
  """It was MG204 'ml.sum(m, axis=1) has shape (2, 8, 1) ...' at the reduction, whose hint stored the compiler's SMEM
  scratch, 'give ml.sum(m, axis=1) scratch the shape (16,)'; then MG204 in the user's words with a hint that broadcast
  it to the tile; since probe 45a it computes (each count a full reduction, frontend/ops/small_parts.py)."""
  x, n = _rand((2, 8, 32), 7), np.array([5, 8], np.int32)
  mask = np.arange(8)[None, :, None] < n[:, None, None]
  _close([mask_counted(x, n, interpret=True), mask_counted_fixed(x, n, interpret=True)],
         [(x * mask).sum(1) / mask.sum(1)] * 2)


# ---------------------------------------------------------------- a value stored into a window of its elements on other axes
@mg.mgpu_kernel(out_shape=lambda x: S((8, 1, 8), F32), grid=(1,))
def stat_without_its_axis(x, o):
  m = ml.max(x[...], axis=1)
  o[...] = m   # statistic without its axis


@mg.mgpu_kernel(out_shape=lambda y: S((128, 1, 64), F32), grid=(1,))
def tile_without_its_axis(y, p):
  t = y[...]
  p[...] = t   # tile without its axis


def test_a_value_stored_without_the_windows_size_1_axis_is_told_where_to_insert_it():
  """The spread statistic was MG204 'm keeps axes of sizes (8, 8) ... no register tensor holds it to store' (hint: store
  it broadcast back); either value's hint inserted the axis last, m[:, :, None] of shape (8, 8, 1), not the window's."""
  for kernel, spec, at, text, name, shape in (
      (stat_without_its_axis, (8, 4, 8), "# statistic without its axis", "m", "o", (8, 8)),
      (tile_without_its_axis, (128, 64), "# tile without its axis", "t", "p", (128, 64))):
    with pytest.raises(mg.ShapeMismatchError) as info:
      kernel.check(S(spec, F32))
    e = info.value
    full = (shape[0], 1, shape[1])
    assert (e.lineno, e.col_offset) == (_line_of(at), 2)
    assert e.message == f"cannot store a tensor of shape {shape} into {name} of shape {full}"
    assert e.hint.endswith(f"give {text} the axes it lacks: {text}[:, None, :] (shape {full})"), e.hint


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_masks_of_per_batch_lengths_match_numpy():
  x, n = _rand((2, 8, 32), 1), np.array([5, 8], np.int32)
  s, e = np.array([1, 0], np.int32), np.array([4, 6], np.int32)
  _close(ragged_masks(x, n, s, e), _ragged_masks_want(x, n, s, e))
  x, n = _rand((2, 8, 64), 8), np.array([10, 64], np.int32)
  mask = np.broadcast_to(np.arange(64)[None, None, :] < n[:, None, None], x.shape)
  _close(ragged_columns(x, n), (np.where(mask, x, 0).sum(2), jax.nn.softmax(x, -1, where=mask)))
  x, s, n = _rand((2, 2, 8, 32), 9), _rand((2, 8, 16), 10), np.array([5, 8], np.int32)
  _close(ragged_heads_and_keys(x, s, n), (np.where(np.arange(8)[None, None, :, None] < n[:, None, None, None], x, 0),
                                          jax.nn.softmax(np.where(np.arange(16)[None, None, :] < n[:, None, None], s,
                                                                  -np.inf), -1)))
  x, n = _rand((2, 8, 32), 7), np.array([5, 8], np.int32)
  mask = np.arange(8)[None, :, None] < n[:, None, None]
  _close([mask_counted_fixed(x, n)], [(x * mask).sum(1) / mask.sum(1)])


@pytest.mark.gpu
def test_gpu_small_statistics_stored_whole_a_row_or_an_element_at_a_time_match_numpy():
  """(New store patterns: rows of a statistic's vector read through SMEM into GMEM rows, element stores.)"""
  x, y = _rand((2, 8, 64), 2), _rand((4, 4, 64), 3)
  _close(small_stats_stored(x, y), _small_stats_want(x, y))
  x, y = _rand((2, 8, 32), 4), _rand((2, 2, 8, 32), 5)
  _close(middle_stats_stored(x, y), _middle_stats_want(x, y))
  x, n = _rand((2, 8, 32), 6), np.array([3, 8], np.int32)
  _close(masked_mean_pool(x, n), _masked_mean_pool_want(x, n))
