"""Probe 38h, second part (convolutions, stencils and image kernels written by hand): a pipelined loop reading
windows of the halo tile it loads, hints for weights wider than a TMA box, a middle-axis repeat, a stencil's
row and column masks, and a gather of odd-width image rows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _x(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _f32(v):
  return np.asarray(v, np.float32)


def _inputs(specs):
  return [_x(shape, dtype, seed) for seed, (shape, dtype) in enumerate(specs)]


# ---------------------------------------------------------------- windows of a halo tile a pipelined loop loads
def _rows_stencil(ws):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
  def rows_stencil(x, out):        # a persistent second difference along the rows, 32 rows a tile
    h, w = x.shape
    t_s = ml.smem((34, w), F32)
    for t in ml.range(ml.program_id(0), ml.cdiv(h, 32), ml.num_programs(0), stages=2, warp_specialize=ws):
      ml.copy(x.at[ml.ds(t * 32 - 1, 34), :], t_s)
      v = t_s.at[0:32][...] + t_s.at[2:34][...] - 2 * t_s.at[1:33][...]
      r = t * 32 + ml.arange(32)
      out.at[ml.ds(t * 32, 32), :].store(v, mask=(r < h)[:, None])
  return rows_stencil


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def laplacian_tiles(x, out):       # a 5-point Laplacian, its tiles stored by TMA
  h, w = x.shape
  t_s = ml.smem((34, w), F32)
  o_s = ml.smem((32, w), F32)
  for t in ml.range(ml.program_id(0), ml.cdiv(h, 32), ml.num_programs(0), stages=2):
    ml.copy(x.at[ml.ds(t * 32 - 1, 34), :], t_s)
    mid = t_s.at[1:33][...]
    left = ml.concatenate([ml.zeros((32, 1), F32), mid[:, :-1]], axis=1)
    right = ml.concatenate([mid[:, 1:], ml.zeros((32, 1), F32)], axis=1)
    o_s[...] = t_s.at[0:32][...] + t_s.at[2:34][...] + left + right - 4 * mid
    ml.copy(o_s, out.at[ml.ds(t * 32, 32), :])


def _second_difference(x):
  p = np.pad(np.asarray(x), ((1, 1), (0, 0)))
  return p[:-2] + p[2:] - 2 * np.asarray(x)


def _laplacian(x):
  p = np.pad(np.asarray(x), 1)
  return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * np.asarray(x)


PIPELINED_WINDOWS = [(_rows_stencil(False), (200, 128), _second_difference),
                     (_rows_stencil(True), (77, 64), _second_difference),
                     (laplacian_tiles, (200, 128), _laplacian)]


@pytest.mark.parametrize("kernel,shape,ref", PIPELINED_WINDOWS)
def test_a_pipelined_loop_reads_static_windows_of_its_loaded_halo_tile(kernel, shape, ref):
  """A halo tile loaded whole by a pipelined loop (34 rows for 32 outputs) and read as the rows above, at
  and below each output, `t_s.at[0:32][...]`, was MG502 ('the loop may only read it whole'). Static
  windows read into registers are restaged with the buffer and read after the stage's load landed, and
  the stage is refilled after every thread has read them, as whole reads are."""
  x = _x(shape)
  np.testing.assert_allclose(kernel(x, interpret=True), ref(x), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in str(_export(kernel, S(shape, F32)))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,shape,ref", PIPELINED_WINDOWS)
def test_gpu_a_pipelined_loop_reads_windows_of_its_halo_tile(kernel, shape, ref):
  x = _x(shape)
  np.testing.assert_allclose(jax.jit(kernel)(x), ref(x), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- weights wider than a TMA box, for a dot
@mg.mgpu_kernel(out_shape=lambda w, b: S((64, 64), F32), grid=(1,))
def wide_weights(w, b, out):      # w (64, 576): a channels-first conv's (C_out, 9 * C_in) weights
  w_s = ml.smem(w.shape, F16)
  ml.copy(w, w_s)
  b_s = ml.smem(b.shape, F16)
  for k in ml.static_range(3):
    ml.copy(b.at[ml.ds(k * 192, 192)], b_s.at[ml.ds(k * 192, 192)])
  out[...] = ml.dot(w_s, b_s)


@mg.mgpu_kernel(out_shape=lambda w, b: S((64, 64), F32), grid=(1,))
def wide_weights_by_registers(w, b, out):
  w_s = ml.smem(w.shape, F16)
  for k in ml.static_range(3):
    w_s.at[:, ml.ds(k * 192, 192)][...] = w.at[:, ml.ds(k * 192, 192)][...]
  b_s = ml.smem(b.shape, F16)
  for k in ml.static_range(3):
    ml.copy(b.at[ml.ds(k * 192, 192)], b_s.at[ml.ds(k * 192, 192)])
  out[...] = ml.dot(w_s, b_s)


def test_weights_wider_than_a_tma_box_hint_register_pieces_of_whole_tiles():
  """A (64, 576) weight copied whole into a dot operand (576 columns, more than a TMA box) was hinted a
  reshape outside the kernel, a buffer a piece, or the register copy of each piece into the buffer's windows
  (wide_weights_by_registers). Since probe 56c the copy of whole tiles is one box in tiles: both compute."""
  specs = [S((64, 576), F16), S((576, 64), F16)]
  w, b = _inputs([((64, 576), F16), ((576, 64), F16)])
  np.testing.assert_allclose(_f32(wide_weights(w, b, interpret=True)), _f32(w) @ _f32(b), rtol=1e-2, atol=5e-2)
  _export(wide_weights, *specs)
  np.testing.assert_allclose(_f32(wide_weights_by_registers(w, b, interpret=True)), _f32(w) @ _f32(b),
                             rtol=1e-2, atol=5e-2)
  _export(wide_weights_by_registers, *specs)


@pytest.mark.gpu
def test_gpu_weights_stored_from_registers_in_pieces_match_jnp():
  w, b = _inputs([((64, 576), F16), ((576, 64), F16)])
  np.testing.assert_allclose(_f32(jax.jit(wide_weights_by_registers)(w, b)), _f32(w) @ _f32(b), rtol=1e-2, atol=5e-2)


# ---------------------------------------------------------------- a nearest upsampling's repeat
@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype), grid=lambda x: (x.shape[0],))
def upsample_nhwc(x, out):
  y = ml.program_id(0)
  w, c = x.shape[1], x.shape[2]
  v = x.at[y][...]
  r = ml.broadcast_to(v[:, None, :], (w, 2, c)).reshape(2 * w, c)
  out.at[2 * y][...] = r
  out.at[2 * y + 1][...] = r


@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype), grid=lambda x: (x.shape[0],))
def upsample_nhwc_repeat(x, out):
  y = ml.program_id(0)
  w, c = x.shape[1], x.shape[2]
  v = x.at[y][...]
  r = ml.concatenate([v[:, None, :]] * 2, axis=1).reshape(2 * w, c)
  out.at[2 * y][...] = r
  out.at[2 * y + 1][...] = r


def test_a_middle_axis_broadcast_is_the_repeat():
  """The hint said 'repeat the (32, 1, 64) tensor t ...: ml.concatenate([t] * 2, axis=1)', t a name of its
  own; since probe 38j the broadcast is those copies (the compiler makes them), and the repeat still works."""
  x = _x((8, 32, 64))
  np.testing.assert_allclose(upsample_nhwc(x, interpret=True), np.repeat(np.repeat(x, 2, 0), 2, 1))
  _export(upsample_nhwc, S((8, 32, 64), F32))
  x = _x((8, 32, 64))
  np.testing.assert_allclose(upsample_nhwc_repeat(x, interpret=True), np.repeat(np.repeat(x, 2, 0), 2, 1))
  _export(upsample_nhwc_repeat, S((8, 32, 64), F32))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def window_stored_by_tma(x, out):
  h, w = x.shape
  t_s = ml.smem((34, w), F32)
  for t in ml.range(ml.program_id(0), ml.cdiv(h, 32), ml.num_programs(0), stages=2):
    ml.copy(x.at[ml.ds(t * 32 - 1, 34), :], t_s)
    ml.copy(t_s.at[1:33], out.at[ml.ds(t * 32, 32), :])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def window_stored_from_registers(x, out):
  h, w = x.shape
  t_s = ml.smem((34, w), F32)
  for t in ml.range(ml.program_id(0), ml.cdiv(h, 32), ml.num_programs(0), stages=2):
    ml.copy(x.at[ml.ds(t * 32 - 1, 34), :], t_s)
    r = t * 32 + ml.arange(32)
    out.at[ml.ds(t * 32, 32), :].store(t_s.at[1:33][...], mask=(r < h)[:, None])


def test_a_window_a_pipelined_loop_copies_out_hints_the_register_read():
  e = expect(window_stored_by_tma, [S((150, 64), F32)], mg.PipelineError, "t_s.at[1:33]",
             "t_s is loaded by TMA in a pipelined loop, so the loop may only read it whole (ml.dot, ml.copy from"
             " it, or [...]), read windows of it into registers, or pass windows of it to ml.dot")
  assert e.hint.endswith("or read the window into registers, t_s.at[1:33][...] (and store it from there)")
  x = _x((150, 64))
  np.testing.assert_allclose(window_stored_from_registers(x, interpret=True), x)
  _export(window_stored_from_registers, S((150, 64), F32))


# ---------------------------------------------------------------- a stencil's row and column masks combined as vectors
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def flat_masks(x, out):
  r = ml.arange(8)
  c = ml.arange(128)
  out[...] = x.at[ml.ds(-1, 8), :].load(mask=(r >= 1) & (c < 128), other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def grid_masks(x, out):
  r = ml.arange(8)
  c = ml.arange(128)
  out[...] = x.at[ml.ds(-1, 8), :].load(mask=(r >= 1)[:, None] & (c < 128)[None, :], other=0.0)


def test_row_and_column_masks_of_other_lengths_hint_their_grid():
  """`(r >= 1) & (c < 128)` of an 8-row and a 128-column vector was hinted 'insert axes with v[:, None] or
  v[None, :]'; the hint writes the grid of both in the user's words."""
  expect(flat_masks, [S((8, 128), F32)], mg.ShapeMismatchError, "(r >= 1) & (c < 128)",
         "& on r >= 1 of shape (8,) and c < 128 of shape (128,): the shapes do not broadcast (axis 0 of the result"
         " would be both 8 and 128)",
         hint="shapes broadcast as in NumPy: trailing axes align and size-1 axes stretch; for the 8 x 128 grid of"
              " both (a mask of rows and columns), make r >= 1 a column and c < 128 a row: (r >= 1)[:, None] &"
              " (c < 128)[None, :]")
  x = _x((8, 128))
  np.testing.assert_allclose(grid_masks(x, interpret=True), np.concatenate([np.zeros((1, 128)), x[:-1]]))
  _export(grid_masks, S((8, 128), F32))


# ---------------------------------------------------------------- a gather of image rows of an odd width
def _erode(cols):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 16),))
  def erode(x, out):              # a 3 x 3 erosion of a uint8 image, its edges replicated
    i = ml.program_id(0)
    h, w = x.shape
    r = i * 16 + ml.arange(16)
    acc = ml.full((16, cols), 255, jnp.uint8)
    for dy in ml.static_range(-1, 2):
      for dx in ml.static_range(-1, 2):
        rr = ml.clip(r + dy, 0, h - 1)
        cc = ml.clip(ml.arange(cols) + dx, 0, w - 1)
        acc = ml.minimum(acc, x[rr[:, None], cc[None, :]])
    out.at[ml.ds(i * 16, 16), ml.ds(0, cols)].store(acc, mask=(r < h)[:, None] & (ml.arange(cols) < w)[None, :])
  return erode


def test_a_gather_of_rows_of_an_odd_width_computes():
  """A (16, 130) gather was hinted with 256 columns (rounded up to 128s, which any row count takes), then with 160
  (16 rows take a multiple of 32); since probe 59b the padded trace computes it 160 columns wide itself, its index
  grids made again there, and stores the 130 under the mask. The hint's 160-column kernel computes too."""
  x = jnp.asarray(np.random.default_rng(0).integers(0, 256, (37, 130)), jnp.uint8)
  p = np.pad(np.asarray(x), 1, mode="edge")
  want = np.min([p[a:a + 37, b:b + 130] for a in range(3) for b in range(3)], axis=0)
  np.testing.assert_array_equal(_erode(130)(x, interpret=True), want)
  _export(_erode(130), S((37, 130), jnp.uint8))
  np.testing.assert_array_equal(_erode(160)(x, interpret=True), want)
  _export(_erode(160), S((37, 130), jnp.uint8))
