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


def test_a_small_result_over_leading_and_trailing_axes_says_so_and_its_hint_works():
  x = _rand((2, 4, 8, 32), 3)
  with pytest.raises(mg.LayoutError) as info:
    outer_sum.check(S(x.shape, F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# outer sum"), 11)
  assert e.message == ("ml.sum over axis (0, 3) of a 4-D tensor (2, 4, 8, 32) keeps axes of sizes (4, 8): 32 elements,"
                       " too few for a register tensor of more than one axis (a multiple of 128; a 1-D vector may"
                       " hold any multiple of 8)")
  assert e.hint == ("compute the (4, 8) result as the (32,) vector of its row-major order: ml.sum(v.reshape(2, 32, 32),"
                    " axis=(0, 2)), then store it through an output of shape (32,) and reshape that outside the kernel,"
                    " .reshape(4, 8) (free in XLA)")
  np.testing.assert_allclose(outer_sum_fixed(x, interpret=True).reshape(4, 8), jnp.sum(x, (0, 3)), rtol=1e-4, atol=1e-4)
  assert "@mosaic_gpu" in _export(outer_sum_fixed, S(x.shape, F32))


def test_a_small_result_over_middle_axes_says_so_and_its_hint_works():
  x = _rand((2, 4, 8, 32), 4)
  with pytest.raises(mg.LayoutError) as info:
    middle_var.check(S(x.shape, F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# middle var"), 11)
  assert e.message.startswith("ml.var over axis (1, 2) of a 4-D tensor (2, 4, 8, 32) keeps axes of sizes (2, 32): 64")
  assert e.hint == ("reduce each leading index apart, read 2-D from its ref: for i in ml.static_range(2): out.at[i][...]"
                    " = ml.var(x.at[i][...].reshape(32, 32), axis=0), a (32,) vector a row of an output out of shape"
                    " (2, 32)")
  np.testing.assert_allclose(middle_var_fixed(x, interpret=True), jnp.var(x, (1, 2)), rtol=1e-4, atol=1e-4)
  assert "@mosaic_gpu" in _export(middle_var_fixed, S(x.shape, F32))
  # one middle axis of a computed tensor: no "window of a register tensor", the array reshaped outside
  with pytest.raises(mg.LayoutError) as info:
    middle_max.check(S((2, 8, 32), F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# middle max"), 11)
  assert "window" not in e.message and "keeps axes of sizes (2, 32)" in e.message
  assert e.hint.endswith("(x: the array reshaped to (2, 8, 32) outside the kernel, free in XLA; compute on each slice"
                         " as on the whole)")


@pytest.mark.gpu
def test_gpu_axes_around_one_kept_axis_and_small_result_fixes_match_jnp():
  x = _rand((4, 8, 32), 1)
  _close(channel_stats(x), _channel_stats_want(x), 1e-5)
  x = _rand((2, 4, 8, 32), 2)
  _close(head_stats(x), (jnp.sum(x, (0, 1, 3)), jnp.var(x, (0, 1, 3))), 1e-4)
  np.testing.assert_allclose(outer_sum_fixed(x).reshape(4, 8), jnp.sum(x, (0, 3)), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(middle_var_fixed(x), jnp.var(x, (1, 2)), rtol=1e-4, atol=1e-4)
