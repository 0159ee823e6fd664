"""Probe 45a (small and odd-shaped register tiles: segment sums, MoE routing, per-batch lengths, small statistics).

- A window of fewer elements than a warpgroup has threads read whole ((2, 8) segment ids, (8, 2) top-2 expert ids) is
  held as the vector of its elements typed with its shape, as a small statistic is (frontend/ops/small_loads.py): it
  was MG204 'seg has shape (2, 8): register tensors need a multiple of 128 elements', with a hint to load a larger
  masked tile. Where an op then takes no such tensor (a scan along its axis), the kernel fails as it did, at the read.
- A small tensor reduced along an axis (`ml.sum(seg, axis=1)`, `ml.argmax(w, axis=0)`, the (2, 8, 1) mask of per-row
  lengths counted with `ml.sum(mask, axis=1)`) or indexed off a run (`seg[:, 3]`, `seg[0, 2:6]`) computes each result
  as a scalar (frontend/ops/small_parts.py): each was MG204.
- A window of at most 32 elements that no vector holds ((2, 2) top-2 ids of 2 tokens, a (3, 5) window) is held as
  its scalars, a few-element statistic's (frontend/ops/few_stats.py); read or stored with a mask, an element at a time.
- A small statistic of more than 64 elements whose rows are not a multiple of 8 (the (20, 4) axis-2 sums of a
  (20, 4, 128) tile) stored whole is stored an element at a time (up to 256): it was MG204 with a hint to reshape it.
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


def _col_of(text, sub):
  with open(__file__) as f:
    return f.read().splitlines()[_line_of(text) - 1].index(sub)


def _rand(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _export(kernel, *specs):
  fn = jax.jit(lambda *a: kernel(*a))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _close(got, want, tol=1e-5):
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------- small windows read whole
@mg.mgpu_kernel(out_shape=lambda x, ids, w, top: (S((2, 4, 32), F32), x, S((2, 8), F32), top), grid=(1,))
def segment_sums(x, ids, w, top, a, b, c, d):
  seg = ids.at[ml.ds(1, 2), ml.ds(0, 8)][...]          # (2, 8) of a (4, 16) array: 16 segment ids
  wt = w[...]                                           # (2, 8) float32 weights
  v = x[...] * wt[:, :, None]
  for s in ml.static_range(4):
    a.at[:, s, :][...] = ml.sum(ml.where(seg[:, :, None] == s, v, 0.0), axis=1)
  b[...] = ml.where(seg[:, :, None] == 1, x[...], 0.0)
  c[...] = ml.where(seg > 1, wt, -wt) + ml.exp(wt) - seg
  d[...] = top[...] * 2 + 1                              # (8, 2) top-2 expert ids: short rows, an element at a time


def _segment_sums_want(x, ids, w, top):
  seg = ids[1:3, :8]
  v = x * w[:, :, None]
  return (np.stack([np.where(seg[:, :, None] == s, v, 0).sum(1) for s in range(4)], 1),
          np.where(seg[:, :, None] == 1, x, 0), np.where(seg > 1, w, -w) + np.exp(w) - seg, top * 2 + 1)


def test_a_small_window_read_whole_is_held_as_the_vector_of_its_elements():
  """Each read was MG204 'seg has shape (2, 8): register tensors need a multiple of 128 elements (one per thread of a
  warpgroup)', with a hint that loaded a (4, 32) window masked to it."""
  rng = np.random.default_rng(0)
  x, w = _rand((2, 8, 32), 1), _rand((2, 8), 2)
  ids, top = rng.integers(0, 4, (4, 16)).astype(np.int32), rng.integers(0, 8, (8, 2)).astype(np.int32)
  _close(segment_sums(x, ids, w, top, interpret=True), _segment_sums_want(x, ids, w, top), 1e-4)
  specs = (S(x.shape, F32), S(ids.shape, I32), S(w.shape, F32), S(top.shape, I32))
  assert "tensor<16, int32" in segment_sums.typed_ir(*specs)        # (the ids' vector)
  assert "@mosaic_gpu" in _export(segment_sums, *specs)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16, np.int8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_a_small_window_of_each_dtype_reads_and_converts(dtype):
  a = (np.random.default_rng(3).random((2, 8)) > 0.5) if dtype == np.bool_ else _rand((2, 8), 3, dtype) * 4
  a = np.asarray(a, dtype)

  @mg.mgpu_kernel(out_shape=lambda a: (a, S((2, 8), F32)), grid=(1,))
  def small_dtype(a, o, p):
    v = a[...]
    o[...] = v
    p[...] = v.astype(jnp.float32) * 2.0 + 1.0

  o, p = small_dtype(a, interpret=True)
  np.testing.assert_array_equal(np.asarray(o), a)
  np.testing.assert_allclose(np.asarray(p), a.astype(np.float32) * 2 + 1, rtol=1e-2)


@mg.mgpu_kernel(out_shape=lambda t, x: (t, x, S((2,), I32), t, t), grid=(1,))
def two_tokens_top2(t, x, o, p, q, r, s):
  v = t[...]                                            # (2, 2): 4 expert ids, no vector: their scalars
  o[...] = v * 2 + 1
  p[...] = ml.where(v[:, :, None] > 3, x[...], 0.0)
  q[...] = ml.sum(v, axis=1)
  r[...] = t.at[ml.ds(1, 2), :].load(mask=ml.arange(2)[:, None] < 1, other=-1)   # (row 2 past the array's end)
  s[...] = ml.zeros((2, 2), jnp.int32)
  s.store(v + 10, mask=ml.arange(2)[None, :] < 1)


def _two_tokens_top2_want(t, x):
  keep = np.arange(2)[:, None] < 1
  return (t * 2 + 1, np.where(t[:, :, None] > 3, x, 0), t.sum(1), np.where(keep, np.pad(t, ((0, 1), (0, 0)))[1:3], -1),
          np.where(keep.T, t + 10, 0))


@mg.mgpu_kernel(out_shape=lambda x, ids: (S((2, 32), F32), S((2, 8), I32)), grid=(1,))
def segments_over_time(x, ids, o, p):
  acc, cnt = ml.zeros((2, 8, 32), jnp.float32), ml.zeros((2, 8), jnp.int32)
  for t in ml.range(x.shape[0]):                        # a run-time loop: each step's (2, 8) ids read whole
    seg = ids.at[t][...]
    acc = acc + ml.where(seg[:, :, None] == 1, x.at[t][...], 0.0)
    cnt = cnt + seg
  o[...] = ml.sum(acc, axis=1)
  p[...] = cnt


def test_a_loop_reads_small_windows_and_carries_their_sum():
  rng = np.random.default_rng(12)
  x, ids = _rand((3, 2, 8, 32), 13), rng.integers(0, 3, (3, 2, 8)).astype(np.int32)
  _close(segments_over_time(x, ids, interpret=True), (np.where(ids[..., None] == 1, x, 0).sum((0, 2)), ids.sum(0)),
         1e-4)


def test_a_window_of_at_most_8_elements_read_whole_is_held_as_their_scalars():
  """It was MG204 'v has shape (2, 2): register tensors need a multiple of 128 elements'; its sum along an axis, that
  of a few-element statistic, was MG204 'v of shape (2, 2) is reduced or broadcast along its rows or columns', and so
  were a masked load and a masked store of a (2, 2) window and a (2, 2) fill stored whole."""
  rng = np.random.default_rng(10)
  t, x = rng.integers(0, 8, (2, 2)).astype(np.int32), _rand((2, 2, 32), 11)
  _close(two_tokens_top2(t, x, interpret=True), _two_tokens_top2_want(t, x))
  assert "@mosaic_gpu" in _export(two_tokens_top2, S(t.shape, I32), S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda a, x, b: (a, S((3,), F32), S((5,), F32), x, S((3,), I32), S((5, 3), F32),
                                          S((5,), F32), S((3,), F32), b, b, S((3,), F32)), grid=(1,))
def odd_window(a, x, b, o, p, q, r, s, t, u, w, y, z, p2):
  v = a[...]                                            # (3, 5): 15 elements, no vector's count: their scalars
  o[...] = ml.exp(v) * 2.0 + ml.arange(5)[None, :].astype(jnp.float32)
  p[...] = ml.sum(v, axis=1)
  q[...] = ml.max(v, axis=0)
  r[...] = x[...] * v[:, :, None]
  s[...] = ml.argmax(v, axis=1)
  t[...] = v.T
  u[...] = v[1]
  w[...] = v[:, 3]
  y[...] = b.at[:, ml.ds(1, 5)].load(mask=ml.arange(5)[None, :] < 4, other=-1)   # (column 5 past the array's end)
  z[...] = ml.zeros((3, 5), jnp.int32)
  z.store(b[...] * 2, mask=ml.arange(3)[:, None] < 2)
  p2[...] = ml.max(b[...].astype(jnp.float32) * 0.5, axis=1)    # (a reduction of math of the scalars)


def _odd_window_want(a, x, b):
  return (np.exp(a) * 2 + np.arange(5)[None], a.sum(1), a.max(0), x * a[:, :, None], a.argmax(1), a.T, a[1], a[:, 3],
          np.where(np.arange(5)[None] < 4, np.pad(b, ((0, 0), (0, 1)))[:, 1:6], -1),
          np.where(np.arange(3)[:, None] < 2, b * 2, 0), b.max(1) * 0.5)


def test_a_window_of_up_to_32_elements_no_vector_holds_is_held_as_their_scalars():
  """A (3, 5) window read whole (or masked) was MG204 'a[...] has shape (3, 5): register tensors need a multiple of 128
  elements', whose hint loaded a (4, 32) window masked to it; it is 15 scalars, a few-element statistic's."""
  rng = np.random.default_rng(14)
  a, x, b = _rand((3, 5), 15), _rand((3, 5, 128), 16), rng.integers(0, 9, (3, 5)).astype(np.int32)
  _close(odd_window(a, x, b, interpret=True), _odd_window_want(a, x, b))
  assert "@mosaic_gpu" in _export(odd_window, S(a.shape, F32), S(x.shape, F32), S(b.shape, I32))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def small_scanned(x, o):
  o[...] = ml.roll(x[...], 1, axis=1)   # small scanned


def test_a_small_window_an_op_does_not_take_fails_at_its_read_as_it_did():
  """A roll takes no tensor held as a vector of its elements: the kernel is traced again with the window read as a tile
  (read padded, tests/test_probe45g.py). It was MG204 at the read with the hint that pads it (a roll would bring the
  padding in) until probe 46j, which rolls a padded read along its own length."""
  x = _rand((2, 8), 17)
  _close(small_scanned(x, interpret=True), np.roll(x, 1, axis=1))


# ---------------------------------------------------------------- small tensors reduced along an axis, and indexed
@mg.mgpu_kernel(out_shape=lambda w: (S((2,), F32), S((8,), F32), S((2, 1), F32), S((1, 8), F32), S((2,), I32),
                                     S((8,), I32), S((8,), F32), S((2,), F32), S((4,), F32), S((8, 2), F32)), grid=(1,))
def small_reduced(w, a, b, c, d, e, f, g, h, k, t):
  v = w[...]
  a[...] = ml.max(v, axis=1)
  b[...] = ml.min(v, axis=0)
  c[...] = ml.sum(v, axis=1, keepdims=True)
  d[...] = ml.mean(v, axis=0, keepdims=True)
  e[...] = ml.argmax(v, axis=1)
  f[...] = ml.argmin(v, axis=0)
  g[...] = v[1]
  h[...] = v[:, 3]
  k[...] = v[0, 2:6]
  t[...] = v.T


def _small_reduced_want(w):
  return (w.max(1), w.min(0), w.sum(1, keepdims=True), w.mean(0, keepdims=True), w.argmax(1), w.argmin(0), w[1],
          w[:, 3], w[0, 2:6], w.T)


@mg.mgpu_kernel(out_shape=lambda x, n: (S((2, 1), I32), S((2, 32), F32), S((2, 1), jnp.bool_), S((), I32),
                                        S((2, 8, 1), jnp.bool_)), grid=(1,))
def lengths_counted(x, n, a, b, c, d, e):
  t = ml.arange(8)[None, :, None]
  mask = t < n[...][:, None, None]                      # (2, 8, 1): 16 elements
  a[...] = ml.sum(mask, axis=1)
  b[...] = ml.sum(ml.where(mask, x[...], 0.0), axis=1) / ml.sum(mask.astype(jnp.float32), axis=1)
  c[...] = ml.max(mask & (t > 5), axis=1)
  d[...] = ml.sum(mask)
  e[...] = mask


def test_a_small_tensor_reduced_along_an_axis_or_indexed_off_a_run_computes_each_element():
  """Each was MG204: a reduction or column of the (2, 8) weights 'of shape (2, 8) is reduced or broadcast along its
  rows or columns'; `ml.sum(mask, axis=1)` of the (2, 8, 1) mask 'reduces a tensor of shape (2, 8, 1): 16 elements
  ... no statistic held otherwise' (its hint broadcast it to the tile); v[0, 2:6] of 4 elements named a (4,) vector."""
  w = _rand((2, 8), 4)
  _close(small_reduced(w, interpret=True), _small_reduced_want(w))
  x, n = _rand((2, 8, 32), 5), np.array([5, 8], np.int32)
  mask = np.arange(8)[None, :, None] < n[:, None, None]
  _close(lengths_counted(x, n, interpret=True),
         (mask.sum(1), np.where(mask, x, 0).sum(1) / mask.sum(1), (mask & (np.arange(8)[None, :, None] > 5)).max(1),
          mask.sum(), mask))
  assert "@mosaic_gpu" in _export(small_reduced, S(w.shape, F32))
  assert "@mosaic_gpu" in _export(lengths_counted, S(x.shape, F32), S((2,), I32))


# ---------------------------------------------------------------- small statistics with short rows stored whole
@mg.mgpu_kernel(out_shape=lambda x: (S((20, 4), F32), S((20, 4, 1), F32), S((20, 4), F32)), grid=(1,))
def short_row_stats(x, a, b, c):
  v = x[...]                                            # (20, 4, 128): 80 row statistics in rows of 4
  a[...] = ml.sum(v, axis=2)
  b[...] = ml.max(v, axis=2, keepdims=True)
  c[...] = ml.mean(v, axis=-1) * 2.0 + 1.0


def test_a_small_statistic_of_more_than_64_elements_in_short_rows_is_stored_an_element_at_a_time():
  """It was MG204 'ml.sum(x[...], axis=2) has shape (20, 4): 80 elements, too few for a register tensor of that
  shape', whose hint stored it as an (80,) vector reshaped outside the kernel."""
  x = _rand((20, 4, 128), 6)
  _close(short_row_stats(x, interpret=True), (x.sum(2), x.max(2, keepdims=True), x.mean(-1) * 2 + 1), 1e-4)
  assert "@mosaic_gpu" in _export(short_row_stats, S(x.shape, F32))


# ---------------------------------------------------------------- small tensors meeting index grids and lengths
@mg.mgpu_kernel(out_shape=lambda w, ids, n, x: (w, ids, S((2, 8), jnp.bool_), S((2, 8), F32), S((2, 8), I32)),
                grid=(1,))
def per_row_lengths(w, ids, n, x, a, b, c, d, e):
  v, s, lens = w[...], ids[...], n[...]
  valid = ml.arange(8)[None, :] < lens[:, None]         # (2, 8): the lengths broadcast against an index grid
  a[...] = ml.where(valid, v, -1.0) + (ml.arange(2)[:, None] + 1).astype(jnp.float32)
  b[...] = ml.where(valid, s, -1) + ml.arange(8)[None, :] * 10
  c[...] = valid & (s > 1)
  d[...] = ml.where(ml.arange(8)[None, :] < lens[:, None], ml.max(x[...], axis=2), 0.0)   # a small statistic
  e[...] = ml.zeros((2, 8), jnp.int32)                  # a small fill stored whole


def _per_row_lengths_want(w, ids, n, x):
  valid = np.arange(8)[None, :] < n[:, None]
  return (np.where(valid, w, -1) + np.arange(2)[:, None] + 1, np.where(valid, ids, -1) + np.arange(8)[None, :] * 10,
          valid & (ids > 1), np.where(valid, x.max(2), 0), np.zeros((2, 8), np.int32))


@mg.mgpu_kernel(out_shape=lambda b: (S((2, 8), I32), S((2, 8), I32)), grid=(1,))
def small_masked_io(b, o, p):
  m = ml.arange(8)[None, :] < 5
  o[...] = b.at[ml.ds(1, 2), ml.ds(11, 8)].load(mask=m, other=-1)   # (columns 16..18 past the array's end)
  p[...] = ml.zeros((2, 8), jnp.int32)
  p.store(b.at[ml.ds(1, 2), ml.ds(4, 8)][...] * 3, mask=m)


def test_a_small_tensor_meets_index_grids_lengths_and_masks_at_its_elements():
  """Each was MG204 'v of shape (2, 8) is reduced or broadcast along its rows or columns' (the grid or the lengths'
  broadcast), 'this tile of shape (2, 8) ...' at a masked load or store, or 'has shape (2, 8): register tensors need
  a multiple of 128 elements' at a fill stored whole."""
  rng = np.random.default_rng(7)
  w, x = _rand((2, 8), 8), _rand((2, 8, 64), 9)
  ids, n = rng.integers(0, 4, (2, 8)).astype(np.int32), np.array([3, 6], np.int32)
  _close(per_row_lengths(w, ids, n, x, interpret=True), _per_row_lengths_want(w, ids, n, x))
  b = rng.integers(0, 9, (4, 16)).astype(np.int32)
  keep = np.arange(8)[None, :] < 5
  padded = np.pad(b, ((0, 0), (0, 8)))
  _close(small_masked_io(b, interpret=True),
         (np.where(keep, padded[1:3, 11:19], -1), np.where(keep, b[1:3, 4:12] * 3, 0)))
  assert "@mosaic_gpu" in _export(per_row_lengths, S(w.shape, F32), S(ids.shape, I32), S((2,), I32), S(x.shape, F32))
  assert "@mosaic_gpu" in _export(small_masked_io, S(b.shape, I32))


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_small_windows_read_whole_match_numpy():
  """(New load patterns: rows of a GMEM window read into an SMEM scratch, or its elements one at a time, then the
  scratch read as one vector.)"""
  rng = np.random.default_rng(0)
  x, w = _rand((2, 8, 32), 1), _rand((2, 8), 2)
  ids, top = rng.integers(0, 4, (4, 16)).astype(np.int32), rng.integers(0, 8, (8, 2)).astype(np.int32)
  _close(segment_sums(x, ids, w, top), _segment_sums_want(x, ids, w, top), 1e-4)


@pytest.mark.gpu
def test_gpu_small_tensors_reduced_indexed_and_stored_match_numpy():
  w = _rand((2, 8), 4)
  _close(small_reduced(w), _small_reduced_want(w))
  x, n = _rand((2, 8, 32), 5), np.array([5, 8], np.int32)
  mask = np.arange(8)[None, :, None] < n[:, None, None]
  _close(lengths_counted(x, n),
         (mask.sum(1), np.where(mask, x, 0).sum(1) / mask.sum(1), (mask & (np.arange(8)[None, :, None] > 5)).max(1),
          mask.sum(), mask))
  x = _rand((20, 4, 128), 6)
  _close(short_row_stats(x), (x.sum(2), x.max(2, keepdims=True), x.mean(-1) * 2 + 1), 1e-4)
  rng = np.random.default_rng(7)
  w, x = _rand((2, 8), 8), _rand((2, 8, 64), 9)
  ids, n = rng.integers(0, 4, (2, 8)).astype(np.int32), np.array([3, 6], np.int32)
  _close(per_row_lengths(w, ids, n, x), _per_row_lengths_want(w, ids, n, x))
  rng = np.random.default_rng(12)
  x, ids = _rand((3, 2, 8, 32), 13), rng.integers(0, 3, (3, 2, 8)).astype(np.int32)
  _close(segments_over_time(x, ids), (np.where(ids[..., None] == 1, x, 0).sum((0, 2)), ids.sum(0)), 1e-4)


@pytest.mark.gpu
def test_gpu_small_masked_load_past_the_arrays_end_and_masked_store_match_numpy():
  """(May fault if a masked element were read or written: the load's window runs 3 columns past the array's end; each
  element is read at indices clamped into the array, and stored under an if on its mask element.)"""
  b = np.random.default_rng(7).integers(0, 9, (4, 16)).astype(np.int32)
  keep = np.arange(8)[None, :] < 5
  padded = np.pad(b, ((0, 0), (0, 8)))
  _close(small_masked_io(b), (np.where(keep, padded[1:3, 11:19], -1), np.where(keep, b[1:3, 4:12] * 3, 0)))
  rng = np.random.default_rng(10)        # (a (2, 2) window whose second row lies past the array's end)
  t, x = rng.integers(0, 8, (2, 2)).astype(np.int32), _rand((2, 2, 32), 11)
  _close(two_tokens_top2(t, x), _two_tokens_top2_want(t, x))
  rng = np.random.default_rng(14)        # (a (3, 5) window whose last column lies past the array's end)
  a, x, b = _rand((3, 5), 15), _rand((3, 5, 128), 16), rng.integers(0, 9, (3, 5)).astype(np.int32)
  _close(odd_window(a, x, b), _odd_window_want(a, x, b))
