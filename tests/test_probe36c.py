"""Probe 36c (convolution, stencil, pooling and image kernels as a vision user writes them): edge
padding by concatenating windows of a register tile, hints of windows wholly outside an image."""
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


# ---------------------------------------------------------------- edge padding: windows of one tile at several offsets
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def grad_replicate(x, out):          # forward difference, the last column repeated (np.gradient's edge)
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4)][...]
  nxt = ml.concatenate([v[:, 1:], v[:, -1:]], axis=1)
  out.at[ml.ds(i * 4, 4)][...] = nxt - v


@mg.mgpu_kernel(out_shape=lambda x: x)
def blur_reflect(x, out):            # a 3-tap blur along the rows, reflect padding at both ends
  v = x[...]
  left = ml.concatenate([v[:, 1:2], v[:, :-1]], axis=1)
  right = ml.concatenate([v[:, 1:], v[:, -2:-1]], axis=1)
  out[...] = 0.25 * left + 0.5 * v + 0.25 * right


@mg.mgpu_kernel(out_shape=lambda x: x)
def replicate_from_ref(x, out):      # the windows read from the ref itself
  out[...] = ml.concatenate([x[:, :1], x[:, :-1]], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def three_parts(x, out):             # windows out of rotated order, and a fill
  v = x[...]
  out[...] = ml.concatenate([v[:, 100:], ml.zeros((16, 2), F32), v[:, 50:98], v[:, :50]], axis=1)


def _refs(x):
  reflect = jnp.pad(x, ((0, 0), (1, 1)), mode="reflect")
  return {
      grad_replicate: jnp.concatenate([x[:, 1:], x[:, -1:]], 1) - x,
      blur_reflect: 0.25 * reflect[:, :-2] + 0.5 * x + 0.25 * reflect[:, 2:],
      replicate_from_ref: jnp.concatenate([x[:, :1], x[:, :-1]], 1),
      three_parts: jnp.concatenate([x[:, 100:], jnp.zeros((16, 2), F32), x[:, 50:98], x[:, :50]], 1),
  }


def test_windows_of_one_tile_at_several_offsets_are_rolls_selected_by_index():
  """They were MG204 ("this tensor has shape (4, 127)"), with a hint no stencil could follow: only
  windows following each other around the axis (one roll) or constant fills were read as a roll."""
  x = jnp.asarray(np.random.default_rng(0).standard_normal((16, 128)), F32)
  for kernel, want in _refs(x).items():
    np.testing.assert_allclose(np.asarray(kernel(x, interpret=True)), np.asarray(want), rtol=1e-6, atol=1e-6)
    assert "mosaic_gpu" in str(_export(kernel, S((16, 128), F32)))


@pytest.mark.gpu
def test_windows_of_one_tile_at_several_offsets_on_the_gpu():
  x = jnp.asarray(np.random.default_rng(1).standard_normal((16, 128)), F32)
  for kernel, want in _refs(x).items():
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(x)), np.asarray(want), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- a tap's window wholly outside a 1-pixel-wide image
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8),))
def box3x3(x, out):
  i = ml.program_id(0)
  h, w = x.shape
  r = i * 8 + ml.arange(8)
  c = ml.arange(128)
  acc = ml.zeros((8, 128), jnp.int32)
  for a in ml.static_range(-1, 2):
    for b in ml.static_range(-1, 2):
      m = (r[:, None] + a >= 0) & (r[:, None] + a < h) & (c[None, :] + b >= 0) & (c[None, :] + b < w)
      acc += x.at[ml.ds(i * 8 + a, 8), ml.ds(b, 128)].load(mask=m, other=0).astype(jnp.int32)
  out.at[ml.ds(i * 8, 8), ml.ds(0, 128)].store(((acc + 4) // 9).astype(jnp.uint8),
                                              mask=(r[:, None] < h) & (c[None, :] < w))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8),))
def box3x3_skipped(x, out):          # the hint followed
  i = ml.program_id(0)
  h, w = x.shape
  r = i * 8 + ml.arange(8)
  c = ml.arange(128)
  acc = ml.zeros((8, 128), jnp.int32)
  for a in ml.static_range(-1, 2):
    for b in ml.static_range(-1, 2):
      if b < x.shape[1]:
        m = (r[:, None] + a >= 0) & (r[:, None] + a < h) & (c[None, :] + b >= 0) & (c[None, :] + b < w)
        acc += x.at[ml.ds(i * 8 + a, 8), ml.ds(b, 128)].load(mask=m, other=0).astype(jnp.int32)
  out.at[ml.ds(i * 8, 8), ml.ds(0, 128)].store(((acc + 4) // 9).astype(jnp.uint8),
                                              mask=(r[:, None] < h) & (c[None, :] < w))


def test_a_window_wholly_outside_names_the_start_of_its_own_dimension():
  """With two ml.ds in the window the hint fell back to "start it inside, ml.ds(s, 128) with s < 1",
  which a 3x3 tap loop over a 1-pixel-wide image cannot do; it names dimension 1's start, `b`, now."""
  expect(box3x3, [S((1, 1), jnp.uint8)], mg.IndexOutOfBoundsError, "x.at[ml.ds(i * 8 + a, 8), ml.ds(b, 128)]",
         "ml.ds(1, 128) is out of bounds for dimension 1 of x (size 1)",
         hint="the window has no element inside x (dimension 1 has size 1; it lies wholly past the end), so"
              " neither a mask nor a TMA copy has anything to move: skip it with a test known while compiling,"
              " `if b < x.shape[1]:` around the chunk that uses it (in an ml.static_range loop, the trips past"
              " the end; where the chunk still needs what a masked load reads there, all its other=, give it"
              " that in an else: branch, v = ml.full(v's shape, other, dtype)), or loop with a run-time"
              " range(...), whose trips there the mask keeps off")
  for shape in ((1, 1), (9, 1), (13, 100)):
    x = jnp.asarray(np.random.default_rng(2).integers(0, 256, shape), jnp.uint8)
    s = jax.lax.reduce_window(x.astype(jnp.int32), 0, jax.lax.add, (3, 3), (1, 1), "SAME")
    np.testing.assert_array_equal(np.asarray(box3x3_skipped(x, interpret=True)), np.asarray(((s + 4) // 9).astype(jnp.uint8)))
  assert "mosaic_gpu" in str(_export(box3x3_skipped, S((1, 1), jnp.uint8)))
