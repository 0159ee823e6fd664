"""Probe 40m (a user's reductions and statistics at their edges): a small keepdims statistic of a 3-D tile
converted (`.astype`, `ml.bitcast`) or made by a size-1-axes insert (`ml.std` over two trailing axes) still
broadcasts back as the vector of the 2-D reshape's rows; a (1, n) tile no row-wise layout holds reduces along
its one row as the full reduction."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- a small keepdims statistic, converted
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.bfloat16), S(x.shape, jnp.float16)), grid=(1,))
def centred_low(x, a, b):
  """A (4, 8, 64) tile's (4, 8, 1) row max and row sum converted to 16 bits, broadcast back against the tile."""
  v = x[...]
  m = ml.max(v, axis=2, keepdims=True).astype(jnp.bfloat16)
  a[...] = v.astype(jnp.bfloat16) - m
  s = ml.sum(v, axis=-1, keepdims=True).astype(jnp.float16)
  b[...] = v.astype(jnp.float16) * s


def _centred_low_want(x):
  return (x.astype(jnp.bfloat16) - jnp.max(x, axis=2, keepdims=True).astype(jnp.bfloat16),
          x.astype(jnp.float16) * jnp.sum(x, axis=-1, keepdims=True).astype(jnp.float16))


def _close(got, want, tol):
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert g.shape == w.shape and g.dtype == w.dtype
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


def test_a_converted_small_keepdims_statistic_broadcasts_back():
  x = _rand((4, 8, 64), 1)
  _close(centred_low(x, interpret=True), _centred_low_want(x), 2e-2)
  assert "@mosaic_gpu" in _export(centred_low, S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def sign_scaled(x, out):
  """The sign bit of a (4, 8, 1) row sum, reinterpreted through ml.bitcast, applied to the tile."""
  v = x[...]
  bits = ml.bitcast(ml.sum(v, axis=2, keepdims=True), jnp.uint32) & 0x80000000
  out[...] = v * (1.0 - 2.0 * (bits >> 31).astype(jnp.float32))


def test_a_bitcast_small_keepdims_statistic_broadcasts_back():
  x = _rand((4, 8, 64), 2)
  want = x * jnp.where(jnp.sum(x, axis=2, keepdims=True) < 0, -1.0, 1.0)
  np.testing.assert_allclose(sign_scaled(x, interpret=True), want, rtol=1e-6, atol=1e-6)
  assert "@mosaic_gpu" in _export(sign_scaled, S(x.shape, F32))


# ---------------------------------------------------------------- a statistic of size-1 axes inserted
@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def group_norm(x, a, b):
  """Group norm over (channels-per-group, spatial) of a (groups, 16, 32) tile: ml.std and ml.var over the two
  trailing axes with keepdims ((4, 1, 1): the (4,) vector with two axes inserted), then elementwise math."""
  v = x[...]
  a[...] = (v - ml.mean(v, axis=(1, 2), keepdims=True)) / ml.std(v, axis=(1, 2), keepdims=True)
  b[...] = v * ml.rsqrt(ml.var(v, axis=(-2, -1), keepdims=True) + 1e-5)


def test_a_statistic_over_two_trailing_axes_takes_elementwise_math_and_broadcasts_back():
  x = _rand((4, 16, 32), 3)
  want = ((x - x.mean((1, 2), keepdims=True)) / x.std((1, 2), keepdims=True),
          x * jax.lax.rsqrt(x.var((1, 2), keepdims=True) + 1e-5))
  _close(group_norm(x, interpret=True), want, 1e-4)
  assert "@mosaic_gpu" in _export(group_norm, S(x.shape, F32))


# ---------------------------------------------------------------- the one row of a (1, n) tile
@mg.mgpu_kernel(out_shape=lambda a, b: (S((1,), F32), S((1, 1), F32), S(b.shape, F32), S((1,), jnp.int32)),
                grid=(1,))
def one_row(a, b, s, m, c, k):
  """Statistics of a router's one token, (1, 8), and a (1, 64) row, along their one row."""
  va = a[...]
  s[...] = ml.sum(va, axis=1)
  m[...] = ml.max(va, axis=-1, keepdims=True)
  vb = b[...]
  c[...] = vb - ml.max(vb, axis=1, keepdims=True) + ml.mean(vb, axis=1)[:, None]
  k[...] = ml.argmax(va, axis=1)


def _one_row_want(a, b):
  return (a.sum(1), a.max(-1, keepdims=True), b - b.max(1, keepdims=True) + b.mean(1)[:, None],
          jnp.argmax(a, 1).astype(jnp.int32))


def test_a_one_row_tile_reduces_along_its_row():
  a, b = _rand((1, 8), 4), _rand((1, 64), 5)
  _close(one_row(a, b, interpret=True), _one_row_want(a, b), 1e-5)
  assert "@mosaic_gpu" in _export(one_row, S(a.shape, F32), S(b.shape, F32))
  ir = one_row.typed_ir(S((1, 8), F32), S((1, 128), F32))
  assert "tensor<1, float32, rows" in ir     # a (1, 128) row's statistic keeps its row-wise layout



# ---------------------------------------------------------------- statistics over axes around a kept one
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), F32), S((x.shape[1],), F32), S((x.shape[1],), F32), x), grid=(1,))
def batch_norm(x, mx, sm, var, y):
  """A batch norm's per-channel statistics over (batch, width) of an (n, c, w) tile: axes (0, 2), around the
  kept channel axis, and the (1, c, 1) mean broadcast back against the tile."""
  v = x[...]
  mx[...] = ml.max(v, axis=(0, 2))
  sm[...] = ml.sum(v, axis=(0, -1))
  var[...] = ml.var(v, axis=(0, 2))
  y[...] = v - ml.mean(v, axis=(0, 2), keepdims=True)


def _batch_norm_want(x):
  return x.max((0, 2)), x.sum((0, 2)), x.var((0, 2)), x - x.mean((0, 2), keepdims=True)


def test_a_statistic_over_axes_around_a_kept_one_reduces_and_broadcasts_back():
  x = _rand((4, 32, 64), 6)
  _close(batch_norm(x, interpret=True), _batch_norm_want(x), 1e-4)
  assert "@mosaic_gpu" in _export(batch_norm, S(x.shape, F32))



# ---------------------------------------------------------------- a float8 extreme of one element
@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype), grid=(1,))
def f8_row_max(x, out):
  out[...] = ml.max(x[...], axis=1)     # f8 one-row max


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32), grid=(1,))
def f8_row_max_wide(x, out):            # the hint, followed
  out[...] = ml.max(x[...].astype(jnp.float32), axis=1)


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def test_a_float8_max_of_one_element_says_so_and_its_hint_works():
  with pytest.raises(mg.UnsupportedDtypeError) as info:
    f8_row_max.check(S((1, 64), jnp.float8_e4m3fn))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# f8 one-row max"), 13)
  assert str(e).splitlines()[0].endswith(
      "ml.max over axis=1 of a float8_e4m3fn tensor of shape (1, 64) is one element: an 8-bit float scalar, which the"
      " GPU cannot make (a float8 tensor keeps its dtype along an axis of several results) [MG106]")
  assert e.hint == ("convert first and keep the result in float32: ml.max(x[...].astype(jnp.float32), axis=1),"
                    " stored into a float32 output")
  x = _rand((1, 64), 7, jnp.float8_e4m3fn)
  np.testing.assert_array_equal(f8_row_max_wide(x, interpret=True), x.astype(F32).max(1))
  assert "@mosaic_gpu" in _export(f8_row_max_wide, S(x.shape, x.dtype))



# ---------------------------------------------------------------- a one-element statistic reshaped
@mg.mgpu_kernel(out_shape=lambda x: (S((1,), F32), S((1,), F32)), grid=(1,))
def row_lse(x, a, b):
  """ml.logsumexp along the one row of a (1, 40) tile (with where= too): its (1, 1) statistic made (1,)."""
  v = x[...]
  a[...] = ml.logsumexp(v, axis=1)
  b[...] = ml.logsumexp(v, axis=-1, where=v > 0)


def test_a_logsumexp_along_a_one_row_tile_drops_its_axis():
  x = _rand((1, 40), 8)
  _close(row_lse(x, interpret=True), (jax.nn.logsumexp(x, 1), jax.nn.logsumexp(x, -1, where=x > 0)), 1e-5)
  assert "@mosaic_gpu" in _export(row_lse, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_small_statistics_and_one_rows_match_jnp():
  x = _rand((4, 8, 64), 1)
  _close(centred_low(x), _centred_low_want(x), 2e-2)
  x = _rand((4, 8, 64), 2)
  np.testing.assert_allclose(sign_scaled(x), x * jnp.where(jnp.sum(x, axis=2, keepdims=True) < 0, -1.0, 1.0),
                             rtol=1e-6, atol=1e-6)
  x = _rand((4, 16, 32), 3)
  _close(group_norm(x), ((x - x.mean((1, 2), keepdims=True)) / x.std((1, 2), keepdims=True),
                         x * jax.lax.rsqrt(x.var((1, 2), keepdims=True) + 1e-5)), 1e-4)
  a, b = _rand((1, 8), 4), _rand((1, 64), 5)
  _close(one_row(a, b), _one_row_want(a, b), 1e-5)
  x = _rand((4, 32, 64), 6)
  _close(batch_norm(x), _batch_norm_want(x), 1e-4)
  x = _rand((1, 40), 8)
  _close(row_lse(x), (jax.nn.logsumexp(x, 1), jax.nn.logsumexp(x, -1, where=x > 0)), 1e-5)
