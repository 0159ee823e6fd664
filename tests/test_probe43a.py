"""Probe 43a (statistics and reductions of 3-D and 4-D tiles): an index of a small statistic (m[1] of the (4, 8, 1)
max of a (4, 8, 64) tile) reads its vector's elements (it was MG204 naming the compiler's 'm scratch'); a small
statistic of two axes without keepdims ((4, 8) of ml.max(v, axis=2)) is one too, so m[..., None] and m[i] take it;
a slice of a 3-D tile read through SMEM (w = v[1]) takes its own layout, so it reduces (it was MG204 blaming v)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _close(got, want, tol=1e-5):
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


# ---------------------------------------------------------------- m[i] of a small statistic
@mg.mgpu_kernel(out_shape=lambda x, i: (S(x.shape[1:], F32), S(x.shape[1:], F32), S((2,) + x.shape[1:], F32),
                                        S(x.shape[1:], F32), S((x.shape[1],), F32)), grid=(1,))
def centred_rows(x, i, a, b, c, d, e):
  v = x[...]
  m = ml.max(v, axis=2, keepdims=True)          # (4, 8, 1): 32 elements
  a[...] = v[1] - m[1]
  b[...] = v[-1] - m[-1]
  c[...] = v[2:4] * m[2:4]
  k = i[0]
  d[...] = v[k] - m[k]                          # a run-time index
  e[...] = m[1][:, 0] + m[0, 3, 0]


def _centred_rows_want(x, i):
  m = jnp.max(x, axis=2, keepdims=True)
  return x[1] - m[1], x[-1] - m[-1], x[2:4] * m[2:4], x[i] - m[i], m[1][:, 0] + m[0, 3, 0]


def test_an_index_of_a_small_statistic_reads_its_vectors_elements():
  x, i = _rand((4, 8, 64), 1), jnp.asarray([2], jnp.int32)
  _close(centred_rows(x, i, interpret=True), _centred_rows_want(x, 2))
  assert "@mosaic_gpu" in _export(centred_rows, S(x.shape, F32), S((1,), jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x, i: S((4, 1), F32), grid=(1,))
def column_of_small(x, i, o):
  m = ml.sum(x[...], axis=-1, keepdims=True)
  o[...] = m[:, i[0]]   # column of small


@mg.mgpu_kernel(out_shape=lambda x: S((32,), F32), grid=(1,))
def column_of_small_fixed(x, out):
  m = ml.sum(x[...], axis=-1, keepdims=True)
  out[...] = m.reshape(32)


def test_an_index_of_a_small_statistic_that_is_no_run_names_it_and_its_hint_works():
  # (a static column, m[:, 2], is picked an element at a time since probe 45a: tests/test_probe45a.py; a run-time
  # one, m[:, i[0]], was this test's error until probe 46a picked it the same way)
  x = _rand((4, 8, 64), 2)
  for i in (2, -1):
    got = column_of_small(x, jnp.asarray([i], jnp.int32), interpret=True)
    np.testing.assert_allclose(got, jnp.sum(x, -1, keepdims=True)[:, i], rtol=1e-5, atol=1e-5)
  got = column_of_small_fixed(x, interpret=True).reshape(4, 8, 1)[:, 2]
  np.testing.assert_allclose(got, jnp.sum(x, -1, keepdims=True)[:, 2], rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(column_of_small_fixed, S(x.shape, F32))


# ---------------------------------------------------------------- a small statistic of two axes, without keepdims
@mg.mgpu_kernel(out_shape=lambda x: (x, x, S(x.shape[1:], F32), S((x.shape[1],), F32), x), grid=(1,))
def row_stats(x, a, b, c, d, e):
  v = x[...]
  m = ml.max(v, axis=2)                         # (4, 8): 32 elements
  a[...] = v - m[..., None]
  s = ml.sum(v, axis=-1) * 0.5
  b[...] = v * s[:, :, None]
  c[...] = v[1] - m[1][:, None]
  d[...] = m[2] + ml.min(v, axis=-1)[3]
  l = ml.logsumexp(v, axis=2)
  e[...] = v - l[..., None]


def _row_stats_want(x):
  m = jnp.max(x, axis=2)
  return (x - m[..., None], x * (jnp.sum(x, -1) * 0.5)[..., None], x[1] - m[1][:, None], m[2] + jnp.min(x, -1)[3],
          x - jax.nn.logsumexp(x, 2)[..., None])


def test_a_small_statistic_of_two_axes_broadcasts_back_and_indexes():
  x = _rand((4, 8, 64), 3)
  _close(row_stats(x, interpret=True), _row_stats_want(x))
  assert "@mosaic_gpu" in _export(row_stats, S(x.shape, F32))


# ---------------------------------------------------------------- a slice of a 3-D tile reduced
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape[1:], F32), S(x.shape[1:], F32)), grid=(1,))
def slab_softmax(x, a, b):
  v = x[...] * 2.0
  w = v[1]
  a[...] = w - ml.max(w, axis=1, keepdims=True)
  b[...] = ml.softmax(v[3], axis=0)


def test_a_slice_of_a_3d_tile_read_through_smem_reduces():
  x = _rand((4, 8, 64), 4)
  _close(slab_softmax(x, interpret=True),
         (2 * x[1] - jnp.max(2 * x[1], axis=1, keepdims=True), jax.nn.softmax(2 * x[3], axis=0)))
  assert "@mosaic_gpu" in _export(slab_softmax, S(x.shape, F32))


# ---------------------------------------------------------------- a keepdims statistic of a few elements over axes no plan holds
@mg.mgpu_kernel(out_shape=lambda x, y, n: (x, x, x, x, y, S(n.shape, F32)), grid=(1,))
def channel_norms(x, y, n, a, b, c, d, e, f):
  v = x[...]                                    # (4, 2, 32): 2 channels in the middle
  a[...] = v - ml.sum(v, axis=(0, 2), keepdims=True)
  b[...] = (v - ml.mean(v, axis=(0, -1), keepdims=True)) / ml.std(v, axis=(0, 2), keepdims=True)
  c[...] = ml.softmax(v, axis=(0, 2))
  d[...] = v - ml.logsumexp(v, axis=(0, 2), keepdims=True)
  w = y[...]                                    # (2, 4, 2, 32): 4 kept elements over axes (1, 3)
  e[...] = w - ml.max(w, axis=(1, 3), keepdims=True)
  k = n[...]                                    # int32: the max of each channel, in its own dtype
  f[...] = (k - ml.max(k, axis=(0, 2), keepdims=True)).astype(jnp.float32)


def _channel_norms_want(x, y, n):
  return (x - jnp.sum(x, (0, 2), keepdims=True), (x - jnp.mean(x, (0, 2), keepdims=True)) / jnp.std(x, (0, 2), keepdims=True),
          jax.nn.softmax(x, (0, 2)), x - jax.nn.logsumexp(x, (0, 2), keepdims=True), y - jnp.max(y, (1, 3), keepdims=True),
          (n - jnp.max(n, (0, 2), keepdims=True)).astype(F32))


def _channel_inputs():
  n = jnp.asarray(np.random.default_rng(7).integers(-1000, 1000, (4, 2, 32)), jnp.int32)
  return _rand((4, 2, 32), 5), _rand((2, 4, 2, 32), 6), n


def test_a_keepdims_statistic_of_a_few_elements_over_axes_around_a_kept_one_broadcasts_back():
  """(1, 2, 1) channel statistics of a (4, 2, 32) tile were MG204 whose hint (read 2-D) gave no working form."""
  x, y, n = _channel_inputs()
  _close(channel_norms(x, y, n, interpret=True), _channel_norms_want(x, y, n), 2e-5)
  assert "@mosaic_gpu" in _export(channel_norms, *(S(t.shape, t.dtype) for t in (x, y, n)))


@mg.mgpu_kernel(out_shape=lambda x: S((2,), F32), grid=(1,))
def channel_sums(x, o):
  v = x[...]
  o[...] = ml.sum(v, axis=(0, 2))   # channel sums


@mg.mgpu_kernel(out_shape=lambda x: S((2,), F32), grid=(1,))
def channel_var(x, o):
  v = x[...]
  o[...] = ml.var(v, axis=(0, 2))   # channel var


@mg.mgpu_kernel(out_shape=lambda x: (S((2,), F32), S((2,), F32)), grid=(1,))
def channel_fixed(x, out, out2):
  v = x[...]
  for j in ml.static_range(2): out[j] = ml.sum(v, where=ml.arange(2)[None, :, None] == j)
  for j in ml.static_range(2): out2[j] = ml.var(v, where=ml.arange(2)[None, :, None] == j)


@pytest.mark.parametrize("kernel, what", [(channel_sums, "sum"), (channel_var, "var")])
def test_a_result_of_a_few_elements_computes_as_its_hint_wrote_it(kernel, what):
  """The (2,) channel statistics were MG204 ('keeps an axis of size 2: 2 elements, too few for a register vector')
  with a hint that wrote each element as a full reduction with where=; since probe 53a the compiler writes it so."""
  x = _rand((4, 2, 32), 8)
  want = jnp.sum(x, (0, 2)) if what == "sum" else jnp.var(x, (0, 2))
  _close(kernel(x, interpret=True), want)
  _close(channel_fixed(x, interpret=True), (jnp.sum(x, (0, 2)), jnp.var(x, (0, 2))))
  assert "@mosaic_gpu" in _export(kernel, S(x.shape, F32))
  assert "@mosaic_gpu" in _export(channel_fixed, S(x.shape, F32))


# ---------------------------------------------------------------- a middle-axis statistic of a 4-D tile broadcast back
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x, S(x.shape[:1] + x.shape[2:], F32), S(x.shape[:1] + x.shape[2:], F32)),
                grid=(1,))
def head_stats_4d(x, a, b, c, d, e, f):
  v = x[...]                                    # (2, 2, 8, 64): statistics over axis 1 of 2 (kept (2, 1, 8, 64))
  a[...] = v - ml.max(v, axis=1, keepdims=True)
  b[...] = ml.softmax(v, axis=1)
  c[...] = (v - ml.mean(v, axis=-3, keepdims=True)) / ml.std(v, axis=1, keepdims=True)
  m = ml.max(v, axis=1)
  d[...] = v - m[:, None]
  e[...] = ml.argmax(v, axis=1).astype(jnp.float32)
  f[...] = ml.logsumexp(v, axis=1)


def _head_stats_4d_want(x):
  return (x - jnp.max(x, 1, keepdims=True), jax.nn.softmax(x, 1),
          (x - jnp.mean(x, 1, keepdims=True)) / jnp.std(x, 1, keepdims=True), x - jnp.max(x, 1)[:, None],
          jnp.argmax(x, 1).astype(F32), jax.nn.logsumexp(x, 1))


def test_a_middle_axis_statistic_of_a_4d_tile_broadcasts_back():
  """Each was MG204 'v of shape (2, 2, 8, 64) is reduced or broadcast along an axis; that works on 2-D tiles': the
  statistic's size-1 axis, inserted into 4-D, was a broadcast the layouts related to a 2-D tile."""
  x = _rand((2, 2, 8, 64), 9)
  _close(head_stats_4d(x, interpret=True), _head_stats_4d_want(x))
  assert "@mosaic_gpu" in _export(head_stats_4d, S(x.shape, F32))


# ---------------------------------------------------------------- axes (1, 3) of a 4-D tile: a (2, 8) statistic
@mg.mgpu_kernel(out_shape=lambda x: (x, x, S((16,), F32), S((16,), F32), S((16,), F32)), grid=(1,))
def outer_axes_4d(x, a, b, c, d, e):
  v = x[...]                                    # (2, 2, 8, 64) over axes (1, 3): (2, 8), 16 elements
  m = ml.max(v, axis=(1, 3))
  a[...] = v - m[:, None, :, None]
  b[...] = v - ml.mean(v, axis=(1, 3), keepdims=True)
  c[...] = m.reshape(16)
  d[...] = ml.var(v, axis=(1, 3)).reshape(16)
  e[...] = ml.logsumexp(v, axis=(1, 3)).reshape(16)


def _outer_axes_4d_want(x):
  return (x - jnp.max(x, (1, 3), keepdims=True), x - jnp.mean(x, (1, 3), keepdims=True),
          jnp.max(x, (1, 3)).reshape(16), jnp.var(x, (1, 3)).reshape(16), jax.nn.logsumexp(x, (1, 3)).reshape(16))


def test_a_statistic_over_a_middle_and_the_last_axis_of_a_4d_tile_is_a_small_one():
  """ml.max(v, axis=(1, 3)) of a (2, 2, 8, 64) tile was MG204 'partial reductions work on 1-D and 2-D tensors' with a
  hint to read 2-D; ml.var and ml.logsumexp over them named their own (2, 1, 8, 1) step the user never wrote."""
  x = _rand((2, 2, 8, 64), 10)
  _close(outer_axes_4d(x, interpret=True), _outer_axes_4d_want(x))
  assert "@mosaic_gpu" in _export(outer_axes_4d, S(x.shape, F32))


# ---------------------------------------------------------------- a small two-axis statistic carried by a loop
@mg.mgpu_kernel(out_shape=lambda x: (S((32,), F32), S(x.shape[1:], F32)), grid=(1,))
def running_max(x, a, b):
  m = ml.full((4, 8), -jnp.inf, jnp.float32)     # (4, 8): 32 elements, the max over chunks and columns
  for k in ml.range(x.shape[0]):
    v = x[k]
    m = ml.maximum(m, ml.max(v, axis=2))
  a[...] = m.reshape(32)
  b[...] = x[0] - m[..., None]


def test_a_small_two_axis_statistic_is_carried_by_a_loop():
  """It was MG204 'this (4, 8) tensor is reshaped from or into a row statistic': only statistics of 3 or more axes
  were carried as their vectors."""
  x = _rand((3, 4, 8, 64), 11)
  m = jnp.max(x, (0, 3))
  _close(running_max(x, interpret=True), (m.reshape(32), x[0] - m[..., None]))
  assert "@mosaic_gpu" in _export(running_max, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_small_statistics_indexed_and_broadcast_match_jnp():
  x, i = _rand((4, 8, 64), 1), jnp.asarray([2], jnp.int32)
  _close(centred_rows(x, i), _centred_rows_want(x, 2))
  _close(row_stats(x), _row_stats_want(x))
  _close(slab_softmax(x), (2 * x[1] - jnp.max(2 * x[1], axis=1, keepdims=True), jax.nn.softmax(2 * x[3], axis=0)))
  np.testing.assert_allclose(column_of_small_fixed(x).reshape(4, 8, 1)[:, 2], jnp.sum(x, -1, keepdims=True)[:, 2],
                             rtol=1e-5, atol=1e-5)
  x, y, n = _channel_inputs()
  _close(channel_norms(x, y, n), _channel_norms_want(x, y, n), 2e-5)
  x = _rand((4, 2, 32), 8)
  _close(channel_fixed(x), (jnp.sum(x, (0, 2)), jnp.var(x, (0, 2))))
  x = _rand((2, 2, 8, 64), 9)
  _close(head_stats_4d(x), _head_stats_4d_want(x))
  x = _rand((2, 2, 8, 64), 10)
  _close(outer_axes_4d(x), _outer_axes_4d_want(x))
  x = _rand((3, 4, 8, 64), 11)
  _close(running_max(x), (jnp.max(x, (0, 3)).reshape(32), x[0] - jnp.max(x, (0, 3))[..., None]))
