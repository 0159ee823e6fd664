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


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def chunked_difference(x, out):      # x - x shifted right by one, a chunk at a time: the previous chunk's last column
  i = ml.program_id(0)
  prev = ml.zeros((4, 128), F32)
  for c in ml.static_range(x.shape[1] // 128):
    cur = x.at[ml.ds(i * 4, 4), ml.ds(c * 128, 128)][...]
    out.at[ml.ds(i * 4, 4), ml.ds(c * 128, 128)][...] = cur - ml.concatenate([prev[:, -1:], cur[:, :-1]], axis=1)
    prev = cur


@mg.mgpu_kernel(out_shape=lambda x: x)
def negated_rotation(x, out):        # windows of two tensors of the result's shape
  v = x[...]
  w = -v
  out[...] = ml.concatenate([w[:, 1:], v[:, :1]], axis=1)


def _refs(x):
  reflect = jnp.pad(x, ((0, 0), (1, 1)), mode="reflect")
  return {
      grad_replicate: jnp.concatenate([x[:, 1:], x[:, -1:]], 1) - x,
      blur_reflect: 0.25 * reflect[:, :-2] + 0.5 * x + 0.25 * reflect[:, 2:],
      replicate_from_ref: jnp.concatenate([x[:, :1], x[:, :-1]], 1),
      three_parts: jnp.concatenate([x[:, 100:], jnp.zeros((16, 2), F32), x[:, 50:98], x[:, :50]], 1),
      negated_rotation: jnp.concatenate([-x[:, 1:], x[:, :1]], 1),
  }


def test_windows_of_one_tile_at_several_offsets_are_rolls_selected_by_index():
  """They were MG204 ("this tensor has shape (4, 127)"), with a hint no stencil could follow: only
  windows following each other around the axis (one roll) or constant fills were read as a roll."""
  x = jnp.asarray(np.random.default_rng(0).standard_normal((16, 128)), F32)
  for kernel, want in _refs(x).items():
    np.testing.assert_allclose(np.asarray(kernel(x, interpret=True)), np.asarray(want), rtol=1e-6, atol=1e-6)
    assert "mosaic_gpu" in str(_export(kernel, S((16, 128), F32)))


def test_windows_of_tensors_of_the_result_shape_are_rolls_selected_by_index():
  """A halo from the previous chunk, `[prev[:, -1:], cur[:, :-1]]`, was MG204 at the (4, 1) window."""
  x = jnp.asarray(np.random.default_rng(3).standard_normal((8, 384)), F32)
  want = x - jnp.concatenate([jnp.zeros((8, 1), F32), x[:, :-1]], 1)
  np.testing.assert_allclose(np.asarray(chunked_difference(x, interpret=True)), np.asarray(want), rtol=1e-6, atol=1e-6)
  assert "mosaic_gpu" in str(_export(chunked_difference, S((8, 384), F32)))


@pytest.mark.gpu
def test_windows_of_one_tile_at_several_offsets_on_the_gpu():
  x = jnp.asarray(np.random.default_rng(1).standard_normal((16, 128)), F32)
  for kernel, want in _refs(x).items():
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(x)), np.asarray(want), rtol=1e-6, atol=1e-6)
  x = jnp.asarray(np.random.default_rng(4).standard_normal((8, 384)), F32)
  np.testing.assert_allclose(np.asarray(jax.jit(chunked_difference)(x)),
                             np.asarray(chunked_difference(x, interpret=True)), rtol=1e-6, atol=1e-6)


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


# ---------------------------------------------------------------- a store at (row, column) pairs of flat pixel positions
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0] * x.shape[1], 128),))
def median3x3(x, out):
  i = ml.program_id(0)
  h, w = x.shape
  p = i * 128 + ml.arange(128)
  r = p // w
  c = p % w
  k = ml.arange(16)
  rr = ml.clip(r[:, None] + (k // 3 - 1)[None, :], 0, h - 1)
  cc = ml.clip(c[:, None] + (k % 3 - 1)[None, :], 0, w - 1)
  v = x.at[rr, cc].load(mask=(k[None, :] < 9) & (p[:, None] < h * w), other=float("inf"))
  med = ml.sort(v, axis=-1)[:, 4]
  ok = p < h * w
  ml.store(out.at[r, c], med, mask=ok)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * x.shape[1],), x.dtype),
                grid=lambda x: (ml.cdiv(x.shape[0] * x.shape[1], 128),))
def median3x3_flat(x, out):          # the hint followed: a flat output, reshaped outside
  i = ml.program_id(0)
  h, w = x.shape
  p = i * 128 + ml.arange(128)
  r = p // w
  c = p % w
  k = ml.arange(16)
  rr = ml.clip(r[:, None] + (k // 3 - 1)[None, :], 0, h - 1)
  cc = ml.clip(c[:, None] + (k % 3 - 1)[None, :], 0, w - 1)
  v = x.at[rr, cc].load(mask=(k[None, :] < 9) & (p[:, None] < h * w), other=float("inf"))
  med = ml.sort(v, axis=-1)[:, 4]
  ok = p < h * w
  ml.store(out.at[ml.ds(i * 128, 128)], med, mask=ok)


def test_a_store_at_index_pairs_is_a_scatter():
  """The hint offered ml.store(out.at[ml.ds(start0, 128), ml.ds(start1, 128)], med, mask=ok): a
  (128, 128) window for a (128,) value, as if r and c made a grid; later the flat output's window.
  The store at (r, c) pairs is a scatter now, and the flat output's window still works."""
  x = np.random.default_rng(5).standard_normal((13, 21)).astype(np.float32)
  padded = np.pad(x, 1, mode="edge")
  want = np.median(np.stack([padded[a:a + 13, b:b + 21] for a in range(3) for b in range(3)], -1), -1)
  np.testing.assert_array_equal(np.asarray(median3x3_flat(jnp.asarray(x), interpret=True)).reshape(13, 21), want)
  np.testing.assert_array_equal(np.asarray(median3x3(jnp.asarray(x), interpret=True)), want)


# ---------------------------------------------------------------- depthwise weights read whole
@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0], ml.cdiv(x.shape[1], 32)))
def depthwise3x3(x, w, out):         # x (h, w, c) channels last, w (3, 3, c)
  h = ml.program_id(0)
  j = ml.program_id(1)
  H, W, C = x.shape
  wt = w[...]
  cols = j * 32 + ml.arange(32)
  acc = ml.zeros((32, C), F32)
  for a in ml.static_range(3):
    for b in ml.static_range(3):
      m = (cols[:, None] + b - 1 >= 0) & (cols[:, None] + b - 1 < W) & (h + a - 1 >= 0) & (h + a - 1 < H)
      acc += x.at[h + a - 1, ml.ds(j * 32 + b - 1, 32), :].load(mask=m, other=0.0) * wt[a, b][None, :]
  out.at[h, ml.ds(j * 32, 32), :].store(acc, mask=cols[:, None] < W)


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0], ml.cdiv(x.shape[1], 32)))
def depthwise3x3_rows(x, w, out):    # the hint followed
  h = ml.program_id(0)
  j = ml.program_id(1)
  H, W, C = x.shape
  cols = j * 32 + ml.arange(32)
  acc = ml.zeros((32, C), F32)
  for a in ml.static_range(3):
    for b in ml.static_range(3):
      m = (cols[:, None] + b - 1 >= 0) & (cols[:, None] + b - 1 < W) & (h + a - 1 >= 0) & (h + a - 1 < H)
      acc += x.at[h + a - 1, ml.ds(j * 32 + b - 1, 32), :].load(mask=m, other=0.0) * w.at[a, b][...][None, :]
  out.at[h, ml.ds(j * 32, 32), :].store(acc, mask=cols[:, None] < W)


def test_small_3d_weights_read_whole_are_hinted_a_vector_at_a_time():
  """The hint was "work on tiles of 128 elements or more, e.g. (128,) or (4, 32)", which (3, 3, 32)
  weights cannot be; it said to read them a vector at a time (depthwise3x3_rows), and now they compute whole."""
  rng = np.random.default_rng(6)
  x = jnp.asarray(rng.standard_normal((5, 40, 32)), F32)
  w = jnp.asarray(rng.standard_normal((3, 3, 32)), F32)
  want = jax.lax.conv_general_dilated(x[None], w.reshape(3, 3, 1, 32), (1, 1), "SAME",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=32)[0]
  np.testing.assert_allclose(np.asarray(depthwise3x3_rows(x, w, interpret=True)), np.asarray(want), rtol=1e-5, atol=1e-5)
  # (the (3, 3, 32) weights read whole were MG204 with the hint above; the padded trace computes them since session 36)
  np.testing.assert_allclose(np.asarray(depthwise3x3(x, w, interpret=True)), np.asarray(want), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- jax's image functions called in a kernel
@mg.mgpu_kernel(out_shape=lambda x: x)
def pooled_in_kernel(x, out):
  v = x[...]
  out[...] = jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (3, 3), (1, 1), "SAME", base_dilation=(2, 2))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def median_in_kernel(x, out):
  v = x[...]
  out[...] = jnp.median(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2), x.dtype),
                grid=lambda x: (ml.cdiv(x.shape[0] // 2, 16), ml.cdiv(x.shape[1] // 2, 32)))
def maxpool_hinted(x, out):          # the reduce_window hint followed: 3x3 windows, stride 2, padding 1
  i = ml.program_id(0)
  j = ml.program_id(1)
  r = i * 16 + ml.arange(16)
  c = j * 32 + ml.arange(32)
  acc = ml.full((16, 32), float("-inf"), F32)
  for a in ml.static_range(3):
    for b in ml.static_range(3):
      rr = 2 * r + a - 1
      cc = 2 * c + b - 1
      inside = (rr[:, None] >= 0) & (rr[:, None] < x.shape[0]) & (cc[None, :] >= 0) & (cc[None, :] < x.shape[1])
      acc = ml.maximum(acc, x.at[rr[:, None], cc[None, :]].load(mask=inside, other=float('-inf')))
  out.at[ml.ds(i * 16, 16), ml.ds(j * 32, 32)].store(acc, mask=(r[:, None] < out.shape[0]) & (c[None, :] < out.shape[1]))


def test_jax_image_functions_in_a_kernel_say_what_to_write():
  """reduce_window, conv_general_dilated, jnp.median, jnp.gradient, jnp.interp and jax.image.resize had the
  generic "decorate a helper of your own with @ml.inline" hint."""
  e = expect(pooled_in_kernel, [S((16, 128), F32)], mg.KernelTypeError, "jax.lax.reduce_window(",
             "reduce_window cannot take a register tensor inside a kernel")
  assert e.hint.startswith("reduce_window computes in a kernel on a register tile")    # (a base-dilated one: probe 53c)
  xm = jnp.asarray(np.random.default_rng(8).standard_normal((16, 128)), F32)     # (jnp.median computes: probe 48b)
  np.testing.assert_array_equal(np.asarray(median_in_kernel(xm, interpret=True)), np.asarray(jnp.median(xm, axis=1)))
  x = jnp.asarray(np.random.default_rng(7).standard_normal((37, 90)), F32)
  want = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (3, 3), (2, 2), [(1, 1), (1, 1)])[:18, :45]
  np.testing.assert_array_equal(np.asarray(maxpool_hinted(x, interpret=True)), np.asarray(want))


# ---------------------------------------------------------------- jnp's .at[...] updates of a register tile's boundary
@mg.mgpu_kernel(out_shape=lambda x: x)
def zero_first_column(x, out):
  v = x[...]
  out[...] = v.at[:, 0].set(0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def bump_inner_rows(x, out):
  v = x[...]
  out[...] = v.at[1:-1, :].add(1.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def bump_inner_rows_hinted(x, out):
  v = x[...]
  out[...] = ml.where((ml.arange(16)[:, None] >= 1) & (ml.arange(16)[:, None] < 15), v + 1.0, v)


def test_an_at_update_of_a_column_or_a_slice_is_hinted_as_its_select():
  """`v.at[:, 0].set(0.0)` was hinted as ml.where(ml.arange(16)[:, None] == idx, y, v), rows and a
  placeholder; a negative slice bound is counted from the end."""
  x = jnp.asarray(np.random.default_rng(8).standard_normal((16, 128)), F32)   # (both compute since probe 51i)
  np.testing.assert_array_equal(np.asarray(zero_first_column(x, interpret=True)), np.asarray(x.at[:, 0].set(0.0)))
  np.testing.assert_array_equal(np.asarray(bump_inner_rows(x, interpret=True)), np.asarray(x.at[1:-1, :].add(1.0)))
  np.testing.assert_array_equal(np.asarray(bump_inner_rows_hinted(x, interpret=True)), np.asarray(x.at[1:-1, :].add(1.0)))


# ---------------------------------------------------------------- jnp.pad's edge and reflect modes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def edge_padded_in_kernel(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = jnp.pad(x.at[ml.ds(i * 128, 128)][...], 17, mode="edge")[:128]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def edge_padded_hinted(x, out):      # x shifted right by one, its first element repeated
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x[ml.clip(i * 128 + ml.arange(128) - 1, 0, x.shape[0] - 1)]


def test_jnp_pad_in_a_kernel_hints_its_edge_and_reflect_modes():
  """The hint wrote only jnp.pad's zeros (and jnp.roll's wrap-around), whatever the mode. (An edge of a vector
  computes since probe 56f; one wider than 16 is still this MG003.)"""
  e = expect(edge_padded_in_kernel, [S((256,), F32)], mg.KernelTypeError, "jnp.pad(",
             "jnp.pad of a register tensor pads with one constant, or by mode 'edge', 'reflect', 'symmetric' or"
             " 'wrap', along any axis by static widths: this call's mode='edge' 17 wide along the last axis (at most"
             " 16) is not computed in a kernel")
  assert ("jnp.pad's mode='edge' gathers at clamped indices, x[ml.clip((i * 128) + ml.arange(128) - 1, 0,"
          " x.shape[0] - 1)]") in e.hint
  x = jnp.asarray(np.random.default_rng(9).standard_normal(256), F32)
  np.testing.assert_array_equal(np.asarray(edge_padded_hinted(x, interpret=True)),
                                np.asarray(jnp.pad(x, 1, mode="edge")[:256]))


# ---------------------------------------------------------------- math on a narrow window inside ml.concatenate
@mg.mgpu_kernel(out_shape=lambda x: x)
def negated_window(x, out):
  v = x[...]
  out[...] = ml.concatenate([-v[:, 1:], v[:, :1]], axis=1)


def test_math_on_a_narrow_register_window_computes():
  """The hint was "work on tiles of 128 elements or more, e.g. (128,) or (4, 32)", then (MG204) to compute on the
  whole tensor first; since probe 47a a window no register tensor holds computes padded (negated_rotation above is
  the hint followed)."""
  x = jnp.asarray(np.random.default_rng(10).standard_normal((16, 128)), F32)
  np.testing.assert_array_equal(np.asarray(negated_window(x, interpret=True)),
                                np.asarray(jnp.concatenate([-x[:, 1:], x[:, :1]], 1)))
  x = jnp.asarray(np.random.default_rng(10).standard_normal((16, 128)), F32)
  np.testing.assert_array_equal(np.asarray(negated_rotation(x, interpret=True)),
                                np.asarray(jnp.concatenate([-x[:, 1:], x[:, :1]], 1)))
