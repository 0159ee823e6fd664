"""Probe 37e (memory-bound fused kernels: quantisation with per-row and per-group scales, casts between
every dtype pair, integer arithmetic, rotary embeddings, dropout, transposes, padding, 1-D vectors of odd
lengths): group quantisation written on a 3-D view of the tile, `g = v.reshape(r, n, 32)`, reduced over
its last axis and divided by `s[:, :, None]`, and two reductions' vectors reshaped and combined."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


# ---------------------------------------------------------------- group quantisation on a 3-D view
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int8), S((x.shape[0], x.shape[1] // 32), F32)),
                grid=lambda x: (x.shape[0] // 16,))
def group_quant(x, q, s):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 16, 16), :][...].astype(jnp.float32)
  g = v.reshape(16, x.shape[1] // 32, 32)
  amax = ml.max(ml.abs(g), axis=2)
  sc = ml.maximum(amax, 1e-6) * (1 / 127.0)
  qq = ml.round(g / sc[:, :, None])
  q.at[ml.ds(i * 16, 16), :][...] = qq.reshape(16, x.shape[1]).astype(jnp.int8)
  s.at[ml.ds(i * 16, 16), :][...] = sc


def _group_quant_reference(x):
  g = np.asarray(x).astype(np.float32).reshape(x.shape[0], -1, 32)
  sc = np.maximum(np.abs(g).max(2), np.float32(1e-6)) * np.float32(1 / 127.0)
  return np.round(g / sc[..., None]).reshape(x.shape).astype(np.int8), sc


def _group_quant_input(cols=256):
  return np.random.default_rng(37).standard_normal((32, cols)).astype(np.float16)


@pytest.mark.parametrize("cols", [256, 512])
def test_a_group_quantisation_on_a_3d_view_of_the_tile(cols):
  """`ml.max(ml.abs(g), axis=2)` of the (16, n, 32) view was MG204 ("partial reductions work on 1-D and
  2-D tensors", its hint writing the 2-D reduction), and `g / sc[:, :, None]` MG204 again ("broadcasting
  works into 1-D and 2-D tensors"), whose hint looped over `.at[i]` of register tensors, which have no
  `.at`: the reduction is now the 2-D one of the merged axes and the broadcast the 2-D one of the
  merged axes, between reshapes (frontend/ops/broadcast_nd.py)."""
  x = _group_quant_input(cols)
  q, s = group_quant(x, interpret=True)
  wq, ws = _group_quant_reference(x)
  np.testing.assert_array_equal(np.asarray(s), ws)
  np.testing.assert_array_equal(np.asarray(q), wq)
  _export(group_quant, S(x.shape, x.dtype))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("cols", [256, 512])
def test_a_group_quantisation_on_a_3d_view_on_the_gpu(cols):
  x = _group_quant_input(cols)
  q, s = group_quant(x)
  wq, ws = _group_quant_reference(x)
  np.testing.assert_allclose(np.asarray(s), ws, rtol=1e-6)
  assert np.abs(np.asarray(q).astype(np.int32) - wq).max() <= 1     # (the GPU's division, an ulp off)


@mg.mgpu_kernel(out_shape=lambda q, s: S(q.shape, F32), grid=lambda q, s: (q.shape[0] // 16,))
def group_dequant(q, s, out):
  i = ml.program_id(0)
  v = q.at[ml.ds(i * 16, 16), :][...].astype(jnp.float32)
  sc = s.at[ml.ds(i * 16, 16), :][...]
  out.at[ml.ds(i * 16, 16), :][...] = (v.reshape(16, q.shape[1] // 32, 32) * sc[:, :, None]).reshape(16, q.shape[1])


@mg.mgpu_kernel(out_shape=lambda x, b: x)
def add_per_slice(x, b, out):
  out[...] = x[...] * 2 + b[...]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], x.dtype))
def sum_and_mean_over_leading(x, out):
  out[...] = ml.sum(x[...], axis=0) + ml.mean(x[...], axis=0)


def _broadcast_inputs():
  rng = np.random.default_rng(7)
  q = rng.integers(-127, 128, (32, 256)).astype(np.int8)
  s = rng.random((32, 8)).astype(np.float32)
  x = rng.standard_normal((4, 8, 128)).astype(np.float32)
  return q, s, x, rng.standard_normal((8, 128)).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda img, bias: img)
def add_bias_4d(img, bias, y):
  y[...] = img[...] + bias[...]


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def stretch_middle(x, s, out):
  out[...] = x[...] * s[...][:, None, :]


def test_broadcasts_and_reductions_along_trailing_or_leading_axes_of_3d_tensors():
  """A per-group scale stretched along the last axis, a 2-D tensor added to every slice of a 3-D one,
  and reductions over the leading axis: each was MG204. A small bias read 4-D keeps its MG204 (the loops
  hint; since probe 45a one of fewer than 128 elements is read as their vector, and broadcasts); a middle axis
  stretched is copies of the source along it since probe 38j."""
  expect(add_bias_4d, [S((2, 4, 16, 160), F32), S((1, 1, 1, 160), F32)], mg.LayoutError, "img[...] + bias",
         "broadcasting bias[...] of shape (1, 1, 1, 160) to (2, 4, 16, 160): broadcasting works into 1-D and"
         " 2-D tensors, not 4-D ones (a register tile keeps its rows in fixed threads)")
  xm = np.random.default_rng(5).standard_normal((4, 8, 128)).astype(np.float32)
  sm = np.random.default_rng(6).standard_normal((4, 128)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(stretch_middle(xm, sm, interpret=True)), xm * sm[:, None, :])  # (38j)
  q, s, x, b = _broadcast_inputs()
  want = (q.astype(np.float32).reshape(32, 8, 32) * s[..., None]).reshape(32, 256)
  np.testing.assert_array_equal(np.asarray(group_dequant(q, s, interpret=True)), want)
  np.testing.assert_array_equal(np.asarray(add_per_slice(x, b, interpret=True)), x * 2 + b)
  np.testing.assert_allclose(np.asarray(sum_and_mean_over_leading(x, interpret=True)), x.sum(0) + x.mean(0),
                             rtol=1e-6, atol=1e-6)
  _export(group_dequant, S(q.shape, q.dtype), S(s.shape, s.dtype))
  _export(add_per_slice, S(x.shape, F32), S(b.shape, F32))
  _export(sum_and_mean_over_leading, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_broadcasts_and_reductions_along_trailing_or_leading_axes_of_3d_tensors_on_the_gpu():
  q, s, x, b = _broadcast_inputs()
  want = (q.astype(np.float32).reshape(32, 8, 32) * s[..., None]).reshape(32, 256)
  np.testing.assert_allclose(np.asarray(group_dequant(q, s)), want, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(add_per_slice(x, b)), x * 2 + b, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(sum_and_mean_over_leading(x)), x.sum(0) + x.mean(0), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- two reductions' vectors reshaped
@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[1] // 8), x.dtype))
def two_column_sums_reshaped(x, out):
  v = x[...]
  out[...] = ml.sum(v, axis=0).reshape(8, x.shape[1] // 8) + ml.max(v, axis=0).reshape(8, x.shape[1] // 8)


def test_two_reduced_vectors_reshaped_and_combined():
  """Each column vector reshaped to (8, 64) goes through SMEM (frontend/relayout.py); the second one,
  met only through the elementwise sum of the two, was not found (MG204 'reshaped from or into a column
  vector'): the relayout now follows the tensors that share a layout to the reshape."""
  x = np.random.default_rng(3).standard_normal((4, 512)).astype(np.float32)
  got = two_column_sums_reshaped(x, interpret=True)
  np.testing.assert_allclose(np.asarray(got), (x.sum(0) + x.max(0)).reshape(8, 64), rtol=1e-6, atol=1e-6)
  _export(two_column_sums_reshaped, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_two_reduced_vectors_reshaped_and_combined_on_the_gpu():
  x = np.random.default_rng(3).standard_normal((4, 512)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(two_column_sums_reshaped(x)), (x.sum(0) + x.max(0)).reshape(8, 64),
                             rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- jnp.repeat of a tile
@mg.mgpu_kernel(out_shape=lambda x: S((16, 128), x.dtype))
def repeat_columns(x, out):
  v = x[...]
  out[...] = jnp.repeat(v, 2, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((48, 64), x.dtype))
def repeat_rows(x, out):
  v = x[...]
  out[...] = jnp.repeat(v, 3, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((16, 2048), x.dtype))
def repeat_columns_32(x, out):
  v = x[...]
  out[...] = jnp.repeat(v, 32, axis=-1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1]), x.dtype))
def repeat_by_broadcast(x, out):
  v = x[...]
  out[...] = ml.broadcast_to(v[:, :, None], (16, 64, 2)).reshape(16, 128)


@mg.mgpu_kernel(out_shape=lambda x, *, r, axis: S(np.repeat(np.zeros(x.shape), r, axis=axis).shape, x.dtype))
def repeat_as_hinted(x, out, *, r: ml.constexpr, axis: ml.constexpr):
  v = x[...]
  m, n = x.shape
  if axis == 0:
    out[...] = ml.concatenate([v[:, None, :]] * r, axis=1).reshape(m * r, n)
  elif r % 32 == 0:
    out[...] = ml.broadcast_to(v[:, :, None], (m, n, r)).reshape(m, n * r)
  else:
    out[...] = ml.concatenate([v[:, :, None]] * r, axis=2).reshape(m, n * r)


@pytest.mark.parametrize("kernel, r, axis, hint", [
    (repeat_columns, 2, 1, "write ml.concatenate([v[:, :, None]] * 2, axis=2).reshape(16, 128) (through SMEM, jnp.repeat's order)"),
    (repeat_rows, 3, 0, "write ml.concatenate([v[:, None, :]] * 3, axis=1).reshape(48, 64) (through SMEM, jnp.repeat's order)"),
    (repeat_columns_32, 32, -1, "write ml.broadcast_to(v[:, :, None], (16, 64, 32)).reshape(16, 2048) (jnp.repeat's order)")])
def test_jnp_repeat_of_a_tile_hints_what_computes_it(kernel, r, axis, hint):
  """jnp.repeat of a 2-D tile hinted a gather from 'ref' with placeholders (`ref[ml.arange(n * r) // r]`)
  that a tile computed in registers has no ref for; the hint writes the copies (or, 32 or more of them, the
  broadcast along a new last axis, which 3-D broadcasts now take) with the kernel's own names and sizes."""
  x = np.random.default_rng(4).standard_normal((16, 64)).astype(np.float32)
  # (jnp.repeat computes as ml.repeat since probe 47b, which writes those forms)
  np.testing.assert_array_equal(np.asarray(kernel(x, interpret=True)), np.repeat(x, r, axis=axis))
  got = repeat_as_hinted(x, r=r, axis=axis, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.repeat(x, r, axis=axis))
  _export(repeat_as_hinted, S(x.shape, F32), r=r, axis=axis)


def test_a_repeat_along_a_narrow_last_axis_is_the_copies():
  """A broadcast along a last axis too narrow for a 2-D broadcast (2 columns) was MG204 whose hint wrote the
  copies, ml.concatenate([t] * 2, axis=2); the compiler now makes them itself (probe 38j)."""
  x = np.random.default_rng(4).standard_normal((16, 64)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(repeat_by_broadcast(x, interpret=True)), np.repeat(x, 2, axis=1))
  _export(repeat_by_broadcast, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("r, axis", [(2, 1), (3, 0), (32, -1)])
def test_jnp_repeat_as_hinted_on_the_gpu(r, axis):
  x = np.random.default_rng(4).standard_normal((16, 64)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(repeat_as_hinted(x, r=r, axis=axis)), np.repeat(x, r, axis=axis))
