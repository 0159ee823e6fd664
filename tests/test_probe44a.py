"""Probe 44a (row statistics of 3-D and 4-D tiles, as softmax, layer norm and attention users write them).

- Two statistics over a middle run of axes of a 4-D tile meeting each other (ml.logsumexp(v, axis=(1, 2)): its max
  and log-sum) go through SMEM as one alone does (it was MG204 naming the internal (2, 1, 1, 64) statistic).
- A statistic over a middle axis (or run of them) keeping too few elements for a register tensor ((2, 1, 32) of a
  (2, 8, 32) tile) is also computed spread back along its axis, so v - m, softmax, log_softmax, var, std, logsumexp
  and argmax over it compute (they were MG204), loops carry it as its spread tile, and storing it whole is MG204 at
  the store with a hint that works; one over the outer axes of a 4-D tile is the (0, 2) one of its 3-D reshape.
- A keepdims statistic of at most 8 elements stored whole into an output of its shape ((1, 2, 1) channel sums,
  (2, 1, 1) sums over two trailing axes) is stored an element at a time (it was MG204 with a generic hint), and
  loops carry one packed into a vector (MG204 at its ml.zeros).
- A mask of per-row lengths too small for a register tensor ((2, 8, 1)) gets a hint that broadcasts it to the tile
  it meets (its hint repeated the lengths with ml.concatenate, which two elements do not take).
"""
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


def _col_of(text, sub):
  with open(__file__) as f:
    return f.read().splitlines()[_line_of(text) - 1].index(sub)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _close(got, want, tol=1e-5):
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


# ---------------------------------------------------------------- statistics over a middle run of a 4-D tile, meeting
@mg.mgpu_kernel(out_shape=lambda x: (S((2, 64), F32), S((2, 1, 1, 64), F32), x, x), grid=(1,))
def middle_run_lse(x, a, b, c, d):
  v = x[...]                                    # (2, 2, 8, 64) over axes (1, 2): (2, 64) kept
  a[...] = ml.logsumexp(v, axis=(1, 2))
  b[...] = ml.logsumexp(v, axis=(1, 2), keepdims=True)
  c[...] = v - ml.logsumexp(v, axis=(1, 2), keepdims=True)
  m = ml.max(v, axis=(1, 2), keepdims=True)
  d[...] = ml.exp(v - m) / ml.sum(ml.exp(v - m), axis=(1, 2), keepdims=True) + m


def _middle_run_lse_want(x):
  m = jnp.max(x, (1, 2), keepdims=True)
  return (jax.nn.logsumexp(x, (1, 2)), jax.nn.logsumexp(x, (1, 2), keepdims=True),
          x - jax.nn.logsumexp(x, (1, 2), keepdims=True), jnp.exp(x - m) / jnp.sum(jnp.exp(x - m), (1, 2), keepdims=True) + m)


def test_statistics_over_a_middle_run_of_a_4d_tile_meet_each_other():
  """Each was MG204 'fn(v, axis=(1, 2)) of shape (2, 1, 1, 64) meets a row-wise tile': the second statistic's size-1
  axes (inserted into, or removed from, the 4-D tensor) joined the first one's tile, and the relayout pass sent
  only a reshape made by the culprit itself through SMEM."""
  x = _rand((2, 2, 8, 64), 1)
  _close(middle_run_lse(x, interpret=True), _middle_run_lse_want(x))
  assert "@mosaic_gpu" in _export(middle_run_lse, S(x.shape, F32))


# ---------------------------------------------------------------- a small middle-axis statistic broadcast back
@mg.mgpu_kernel(out_shape=lambda x: (x,) * 8, grid=(1,))
def middle_stats(x, a, b, c, d, e, f, g, h):
  v = x[...]                                    # (2, 8, 32) over axis 1: (2, 1, 32), 64 elements
  a[...] = v - ml.max(v, axis=1, keepdims=True)
  b[...] = ml.softmax(v, axis=1)
  c[...] = ml.log_softmax(v, axis=1)
  d[...] = (v - ml.mean(v, axis=1, keepdims=True)) / ml.sqrt(ml.var(v, axis=1, keepdims=True) + 1e-5)
  e[...] = v - ml.logsumexp(v, axis=1, keepdims=True)
  m = ml.min(v, axis=1)                         # (2, 32) without keepdims
  f[...] = v * m[:, None, :] + ml.std(v, axis=1, keepdims=True)
  g[...] = v * ml.argmax(v, axis=1, keepdims=True).astype(v.dtype) + ml.argmin(v, axis=1)[:, None, :].astype(v.dtype)
  h[...] = ml.mean(v, axis=1, keepdims=True)     # broadcast back by the store


def _middle_stats_want(x):
  x = x.astype(F32)
  return (x - jnp.max(x, 1, keepdims=True), jax.nn.softmax(x, 1), jax.nn.log_softmax(x, 1),
          (x - jnp.mean(x, 1, keepdims=True)) / jnp.sqrt(jnp.var(x, 1, keepdims=True) + 1e-5),
          x - jax.nn.logsumexp(x, 1, keepdims=True), x * jnp.min(x, 1)[:, None, :] + jnp.std(x, 1, keepdims=True),
          x * jnp.argmax(x, 1, keepdims=True) + jnp.argmin(x, 1)[:, None, :], jnp.broadcast_to(jnp.mean(x, 1, keepdims=True),
                                                                                             x.shape))


@pytest.mark.parametrize("dtype, tol", [(jnp.float32, 1e-5), (jnp.bfloat16, 6e-2)], ids=["float32", "bfloat16"])
def test_a_small_middle_axis_statistic_broadcasts_back(dtype, tol):
  """Each was MG204 'ml.max over axis 1 of a 3-D tensor (2, 8, 32) keeps axes of sizes (2, 32): 64 elements, too
  few for a register tensor of more than one axis', whose hint computed a leading index at a time from the ref."""
  x = _rand((2, 8, 32), 2, dtype)
  _close(middle_stats(x, interpret=True), _middle_stats_want(x), tol)
  if dtype == jnp.float32:
    assert "@mosaic_gpu" in _export(middle_stats, S(x.shape, dtype))


@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, y, y), grid=(1,))
def middle_stats_4d(x, y, a, b, c, d):
  v = x[...]                                    # (2, 2, 8, 16) over axis 2: (2, 2, 1, 16), 64 elements
  a[...] = ml.softmax(v, axis=2)
  b[...] = v - ml.sum(v, axis=-2, keepdims=True) * 0.5
  w = y[...]                                    # (2, 4, 8, 32) over the middle run (1, 2): (2, 1, 1, 32)
  c[...] = ml.log_softmax(w, axis=(1, 2))
  d[...] = (w - ml.mean(w, axis=(1, 2), keepdims=True)) / ml.std(w, axis=(1, 2), keepdims=True)


def _middle_stats_4d_want(x, y):
  return (jax.nn.softmax(x, 2), x - jnp.sum(x, 2, keepdims=True) * 0.5, jax.nn.log_softmax(y, (1, 2)),
          (y - jnp.mean(y, (1, 2), keepdims=True)) / jnp.std(y, (1, 2), keepdims=True))


def test_a_small_statistic_over_a_middle_axis_or_run_of_a_4d_tile_broadcasts_back():
  """The run (1, 2) was MG204 'ml.log_softmax over axis (1, 2) of a 4-D tensor (2, 4, 8, 32) keeps axes of sizes (2,
  32)'; it is spread along the middle axis of the (2, 32, 32) reshape."""
  x, y = _rand((2, 2, 8, 16), 3), _rand((2, 4, 8, 32), 10)
  _close(middle_stats_4d(x, y, interpret=True), _middle_stats_4d_want(x, y), 2e-5)
  assert "@mosaic_gpu" in _export(middle_stats_4d, S(x.shape, F32), S(y.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x), grid=(1,))
def outer_stats_4d(x, a, b, c):
  v = x[...]                                    # (2, 2, 8, 64) over axes (0, 3): (1, 2, 8, 1), 16 elements
  a[...] = ml.softmax(v, axis=(0, 3))
  b[...] = (v - ml.mean(v, axis=(0, -1), keepdims=True)) / ml.std(v, axis=(0, 3), keepdims=True)
  m = ml.max(v, axis=(0, 3))                    # (2, 8) without keepdims
  c[...] = v - m[None, :, :, None]


def test_a_small_statistic_over_outer_axes_of_a_4d_tile_is_the_3d_reshapes():
  """Each was MG204 'ml.softmax over axis (0, 3) of a 4-D tensor (2, 2, 8, 64) keeps axes of sizes (2, 8): 16
  elements', whose hint computed on the (2, 16, 64) reshape: the compiler does."""
  x = _rand((2, 2, 8, 64), 12)
  _close(outer_stats_4d(x, interpret=True), (jax.nn.softmax(x, (0, 3)), (x - jnp.mean(x, (0, 3), keepdims=True)) /
                                             jnp.std(x, (0, 3), keepdims=True), x - jnp.max(x, (0, 3))[None, :, :, None]),
         2e-5)
  assert "@mosaic_gpu" in _export(outer_stats_4d, S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32), grid=(1,))
def middle_max_summed(x, o):
  m = ml.max(x[...], axis=1, keepdims=True)
  o[0] = ml.sum(m) + ml.sum(m.reshape(64))   # middle max summed


@mg.mgpu_kernel(out_shape=lambda x: S((2, 32), F32), grid=(1,))
def middle_max_fixed(x, out):
  for i in ml.static_range(2):
    out.at[i][...] = ml.max(x.at[i][...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((8, 1, 8), F32), grid=(1,))
def narrow_max_stored(x, o):
  m = ml.max(x[...], axis=1)
  o[...] = m   # narrow max stored


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def narrow_max_fixed(x, out):
  m = ml.max(x[...], axis=1)
  out[...] = ml.broadcast_to(m[:, None, :], (8, 4, 8))


def test_a_small_middle_axis_statistic_reduced_or_stored_broadcast_says_so_and_its_hint_works():
  """(Stored whole in its own shape, it is stored a row at a time: tests/test_probe44f.py.)"""
  x = _rand((2, 8, 32), 4)
  _close([middle_max_fixed(x, interpret=True)], [jnp.max(x, 1)])
  with pytest.raises(mg.LayoutError) as info:     # (reduced or reshaped, it is refused)
    middle_max_summed.check(S(x.shape, F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# middle max summed"), _col_of("# middle max summed", "ml.sum(m)"))
  assert e.message.endswith("it broadcasts back against the (2, 8, 32) tile it reduces, but no register tensor holds"
                            " it to reduce (ml.sum)")
  assert e.hint == ("reduce each leading index apart, read 2-D from its ref: for i in ml.static_range(2): out.at[i][...]"
                    " = ml.max(x.at[i][...], axis=0), a (32,) vector a row of an output out of shape (2, 32)")
  x = _rand((8, 4, 8), 5)                       # (stored without its axis: the store's mismatch, probe 44f)
  with pytest.raises(mg.ShapeMismatchError) as info:
    narrow_max_stored.check(S(x.shape, F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# narrow max stored"), 2)
  assert e.message == "cannot store a tensor of shape (8, 8) into o of shape (8, 1, 8)"
  assert e.hint.endswith("give m the axes it lacks: m[:, None, :] (shape (8, 1, 8))")
  _close([narrow_max_fixed(x, interpret=True)[:, 0, :]], [jnp.max(x, 1)])
  assert "@mosaic_gpu" in _export(narrow_max_fixed, S(x.shape, F32))


# ---------------------------------------------------------------- a few-element keepdims statistic stored whole
@mg.mgpu_kernel(out_shape=lambda x, y: (S((1, 2, 1), F32),) * 5 + (S((2, 1, 1), F32),) * 3 + (S((1, 8, 1), F32),),
                grid=(1,))
def few_stored(x, y, a, b, c, d, e, f, g, h, k):
  v = x[...]                                    # (4, 2, 32): (1, 2, 1) channel statistics
  a[...] = ml.sum(v, axis=(0, 2), keepdims=True)
  b[...] = ml.mean(v, axis=(0, 2), keepdims=True)
  c[...] = ml.std(v, axis=(0, 2), keepdims=True)
  d[...] = ml.logsumexp(v, axis=(0, 2), keepdims=True)
  e[...] = ml.max(v, axis=(0, 2), keepdims=True) - 2.0 * ml.min(v, axis=(0, 2), keepdims=True)
  w = y[...]                                    # (2, 8, 32): (2, 1, 1) and (1, 8, 1) statistics
  f[...] = ml.sum(w, axis=(1, 2), keepdims=True)
  g[...] = ml.var(w, axis=(1, 2), keepdims=True)
  h[...] = ml.max(w, axis=(1, 2), keepdims=True) * 0.5
  k[...] = ml.mean(w, axis=(0, 2), keepdims=True)


def _few_stored_want(x, y):
  c, r = dict(axis=(0, 2), keepdims=True), dict(axis=(1, 2), keepdims=True)
  return (jnp.sum(x, **c), jnp.mean(x, **c), jnp.std(x, **c), jax.nn.logsumexp(x, **c), jnp.max(x, **c) - 2 * jnp.min(x, **c),
          jnp.sum(y, **r), jnp.var(y, **r), jnp.max(y, **r) * 0.5, jnp.mean(y, **c))


@mg.mgpu_kernel(out_shape=lambda x: S((1, 2, 1), jnp.bfloat16), grid=(1,))
def few_stored_f32_into_bf16(x, o):
  o[...] = ml.sum(x[...], axis=(0, 2), keepdims=True)   # few into bf16


def test_a_few_element_keepdims_statistic_stored_whole_is_stored_an_element_at_a_time():
  """Each was MG204: the (1, 2, 1) and (1, 8, 1) ones (selected full reductions) 'this tensor has shape (1, 2, 1):
  register tensors need a multiple of 128 elements' with the hint to work on tiles of 128 elements; the (2, 1, 1)
  ones (the vector of a 2-D reshape's rows) 'has shape (2, 1, 1): 2 elements' with the hint to store a (2,) vector."""
  x, y = _rand((4, 2, 32), 6), _rand((2, 8, 32), 7)
  _close(few_stored(x, y, interpret=True), _few_stored_want(x, y), 2e-5)
  assert "@mosaic_gpu" in _export(few_stored, S(x.shape, F32), S(y.shape, F32))
  with pytest.raises(mg.StoreDtypeError) as info:          # (a dtype mismatch is still the store's, in its words)
    few_stored_f32_into_bf16.check(S(x.shape, F32))
  assert (info.value.lineno, info.value.col_offset) == (_line_of("# few into bf16"), 2)
  assert info.value.message == ("cannot store ml.sum(x[...], axis=(0, 2), keepdims=True) (float32) into o (GMEM,"
                                " bfloat16): no implicit conversion")


# ---------------------------------------------------------------- a mask of per-row lengths, too small until it meets the tile
@mg.mgpu_kernel(out_shape=lambda x, n: (x, x), grid=(1,))
def ragged_softmax_fixed(x, n, o, p):
  t = ml.arange(8)[None, :, None]
  mask = t < ml.broadcast_to(n[...][:, None, None], (2, 8, 32))
  o[...] = ml.softmax(x.at[:, ml.ds(0, 8), :].load(mask=mask, other=-jnp.inf), axis=1)
  w = x.at[:, ml.ds(0, 8), :].load(mask=mask, other=0.0)          # a masked mean over the ragged axis
  p[...] = w - ml.sum(w, axis=1, keepdims=True) / ml.sum(mask.astype(jnp.float32), axis=1, keepdims=True)


def _ragged_want(x, n):
  mask = np.arange(8)[None, :, None] < np.asarray(n)[:, None, None]
  w = jnp.where(mask, x, 0.0)
  return (jax.nn.softmax(jnp.where(mask, x, -jnp.inf), 1),
          w - jnp.sum(w, 1, keepdims=True) / jnp.sum(jnp.broadcast_to(mask, x.shape), 1, keepdims=True))


def test_a_mask_too_small_for_a_register_tensor_broadcast_to_the_tile_by_hand_computes():
  """(The (2, 8, 1) mask itself now computes at the tile's shape: tests/test_probe44f.py.)"""
  x, n = _rand((2, 8, 32), 8), jnp.asarray([5, 8], jnp.int32)
  _close(ragged_softmax_fixed(x, n, interpret=True), _ragged_want(x, n))
  assert "@mosaic_gpu" in _export(ragged_softmax_fixed, S(x.shape, F32), S(n.shape, jnp.int32))


# ---------------------------------------------------------------- middle-axis statistics carried by loops
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape[1:], F32),) * 3, grid=(1,))
def running_middle_stats(x, o, p, q):
  m = ml.full((2, 1, 32), -jnp.inf, jnp.float32)       # an online softmax over time chunks (2, 8, 32): per channel
  l = ml.zeros((2, 1, 32), jnp.float32)
  for i in range(x.shape[0]):
    v = x.at[i][...]
    m_new = ml.maximum(m, ml.max(v, axis=1, keepdims=True))
    l = l * ml.exp(m - m_new) + ml.sum(ml.exp(v - m_new), axis=1, keepdims=True)
    m = m_new
  o[...] = ml.exp(x.at[0][...] - m) / l
  s = ml.zeros((2, 1, 32), jnp.float32)
  i = 0
  while i < x.shape[0]:                                # (unrolled: a fill plus a statistic)
    s = s + ml.mean(x.at[i][...], axis=1, keepdims=True)
    i += 1
  p[...] = x.at[1][...] - s
  a = ml.full((2, 1, 32), -jnp.inf, jnp.float32)
  for i in range(x.shape[0]):                          # nested: the inner loop's start is the outer one's carry
    for j in range(2):
      a = ml.maximum(a, ml.max(x.at[i][...] * (j + 1.0), axis=1, keepdims=True))
  q[...] = x.at[2][...] - a


def _running_middle_stats_want(x):
  m = jnp.max(x, (0, 2), keepdims=True)[0]
  return (jnp.exp(x[0] - m) / jnp.sum(jnp.exp(x - m), (0, 2), keepdims=True)[0],
          x[1] - jnp.mean(x, 2, keepdims=True).sum(0), x[2] - 2 * m)


def test_a_small_middle_axis_statistic_is_carried_by_loops_as_its_spread_tile():
  """Each was MG204 'broadcasting m of shape (2, 1, 32) to (2, 8, 32)' after the loop (the carry was the statistic's
  vector, whose broadcast back along a middle axis no layout takes), with a hint to repeat it by ml.concatenate."""
  x = _rand((3, 2, 8, 32), 9)
  _close(running_middle_stats(x, interpret=True), _running_middle_stats_want(x))
  assert "@mosaic_gpu" in _export(running_middle_stats, S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: (S((2, 1, 1), F32), S((1, 2, 1), F32), S((1, 8, 1), F32)), grid=(1,))
def running_few_stats(x, a, b, c):
  s = ml.zeros((2, 1, 1), jnp.float32)                 # per-batch sums of (2, 8, 32) chunks: the vector of 2 rows
  t = ml.zeros((1, 2, 1), jnp.float32)                 # per-channel maxima of (4, 2, 64) views: selected reductions
  u = ml.zeros((1, 8, 1), jnp.float32)                 # 8 of them, carried as a vector before
  for i in range(x.shape[0]):
    v = x.at[i][...]
    s = s + ml.sum(v, axis=(1, 2), keepdims=True)
    t = ml.maximum(t, ml.max(v.reshape(4, 2, 64), axis=(0, 2), keepdims=True))
    u = u + ml.mean(v, axis=(0, 2), keepdims=True)
  a[...] = s
  b[...] = t
  c[...] = u * 0.5


def _running_few_stats_want(x):
  return (jnp.sum(x, (0, 2, 3))[:, None, None], jnp.maximum(jnp.max(x.reshape(3, 4, 2, 64), (0, 1, 3)), 0)[None, :, None],
          0.5 * jnp.sum(jnp.mean(x, (1, 3)), 0)[None, :, None])


def test_a_few_element_statistic_is_carried_by_loops_packed():
  """Each was MG204 at its ml.zeros: 'this (2, 1, 1) tensor is reshaped from or into a row statistic' (hint: reshape
  before the reduction), '(1, 2, 1): register tensors need a multiple of 128 elements', and for (1, 8, 1) 'this
  tensor has shape (8,): a 1-D register vector needs a multiple of 8 elements' with the hint to make it 8 long."""
  x = _rand((3, 2, 8, 32), 11)
  _close(running_few_stats(x, interpret=True), _running_few_stats_want(x), 2e-5)
  assert "@mosaic_gpu" in _export(running_few_stats, S(x.shape, F32))


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_middle_axis_and_middle_run_statistics_match_jnp():
  x = _rand((2, 2, 8, 64), 1)
  _close(middle_run_lse(x), _middle_run_lse_want(x))
  for dtype, tol in ((jnp.float32, 1e-5), (jnp.bfloat16, 6e-2)):
    x = _rand((2, 8, 32), 2, dtype)
    _close(middle_stats(x), _middle_stats_want(x), tol)
  x, y = _rand((2, 2, 8, 16), 3), _rand((2, 4, 8, 32), 10)
  _close(middle_stats_4d(x, y), _middle_stats_4d_want(x, y), 2e-5)
  x = _rand((8, 4, 8), 5)
  _close([narrow_max_fixed(x)[:, 0, :]], [jnp.max(x, 1)])
  x = _rand((2, 2, 8, 64), 12)
  _close(outer_stats_4d(x), (jax.nn.softmax(x, (0, 3)), (x - jnp.mean(x, (0, 3), keepdims=True)) /
                             jnp.std(x, (0, 3), keepdims=True), x - jnp.max(x, (0, 3))[None, :, :, None]), 2e-5)
  x = _rand((3, 2, 8, 32), 9)
  _close(running_middle_stats(x), _running_middle_stats_want(x))


@pytest.mark.gpu
def test_gpu_few_element_statistics_stored_whole_and_ragged_masks_match_jnp():
  x, y = _rand((4, 2, 32), 6), _rand((2, 8, 32), 7)
  _close(few_stored(x, y), _few_stored_want(x, y), 2e-5)
  x, n = _rand((2, 8, 32), 8), jnp.asarray([5, 8], jnp.int32)
  _close(ragged_softmax_fixed(x, n), _ragged_want(x, n))
  x = _rand((3, 2, 8, 32), 11)
  _close(running_few_stats(x), _running_few_stats_want(x), 2e-5)
