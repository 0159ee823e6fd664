"""Probe 31b (scientific and HPC kernels: stencils, convolutions, sparse products, histograms,
scans, transposes of odd shapes, complex pairs, Monte Carlo, uint8 images, odd reductions, float64
inputs): hints that did not work when followed."""
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


# ---------------------------------------------------------------- a red-black update in place
@mg.mgpu_kernel(out_shape=lambda u, *, color: u, grid=lambda u, *, color: (u.shape[0] // 128,),
                input_output_aliases={0: 0})
def red_black(u, out, *, color: ml.constexpr):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  left = u.at[ml.ds(i * 128 - 1, 128)].load(mask=idx >= 1, other=0.0)
  right = u.at[ml.ds(i * 128 + 1, 128)].load(mask=idx + 1 < u.shape[0], other=0.0)
  out.at[ml.ds(i * 128, 128)].store(0.5 * (left + right), mask=idx % 2 == color)


@mg.mgpu_kernel(out_shape=lambda u, *, color: u, grid=lambda u, *, color: (u.shape[0] // 128,),
                input_output_aliases={0: 0})
def red_black_masked(u, out, *, color: ml.constexpr):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  left = u.at[ml.ds(i * 128 - 1, 128)].load(mask=(idx % 2 == color) & (idx >= 1), other=0)
  right = u.at[ml.ds(i * 128 + 1, 128)].load(mask=(idx % 2 == color) & (idx + 1 < u.shape[0]), other=0)
  out.at[ml.ds(i * 128, 128)].store(0.5 * (left + right), mask=idx % 2 == color)


def test_a_read_racing_with_a_masked_store_in_place_hints_the_masked_read():
  """The hint said only to drop input_output_aliases: a red-black update then leaves the other
  colour's elements unwritten (MG602). Masking the read as the store is masked is the fix."""
  e = expect(red_black, [S((1024,), F32)], mg.RaceError, "u.at[ml.ds(i * 128 + 1, 128)]",
             "program (0, 0, 0) reads u[128], the memory of out (aliased), while program (1, 0, 0) writes"
             " out[128]: programs run in no fixed order, so the value read depends on timing", color=0)
  assert e.hint.endswith("; where each program writes only the elements its mask keeps (a red-black or"
                         " checkerboard update) and uses what it reads only there, mask the read the same way,"
                         " .load(mask=(idx % 2 == color) & (idx + 1 < u.shape[0]), other=0): a masked-off"
                         " element is never read"), e.hint


@pytest.mark.parametrize("color", [0, 1])
def test_the_masked_red_black_update_builds_and_matches_numpy(color):
  x = jnp.asarray(np.random.default_rng(0).standard_normal(1024), F32)
  y = np.asarray(red_black_masked(x, color=color, interpret=True))
  p = np.pad(np.asarray(x), 1)
  want = np.where(np.arange(1024) % 2 == color, 0.5 * (p[:-2] + p[2:]), np.asarray(x))
  np.testing.assert_allclose(y, want, rtol=1e-6)
  assert "mosaic_gpu" in str(_export(red_black_masked, S((1024,), F32), color=color))


# ---------------------------------------------------------------- TMA tiles of an image whose rows are not 16 bytes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def invert_tiles(x, out):
  per_row = ml.cdiv(x.shape[1], 128)
  a = ml.smem((16, 128))
  b = ml.smem((16, 128))
  for t in ml.range(ml.program_id(0), ml.cdiv(x.shape[0], 16) * per_row, ml.num_programs(0), stages=2):
    rows, cols = ml.ds(t // per_row * 16, 16), ml.ds(t % per_row * 128, 128)
    ml.copy(x.at[rows, cols], a)
    b[...] = (255 - a[...].astype(jnp.int32)).astype(jnp.uint8)
    ml.copy(b, out.at[rows, cols])


def test_a_tma_copy_of_rows_not_16_bytes_apart_hints_the_padding_and_a_masked_read():
  """The hint said "pad the array's last dimension, or read it into registers with ref[...]": an
  unmasked read of the last tile, past the array's end, is MG203, and the padding was not said."""
  expect(invert_tiles, [S((100, 999), jnp.uint8)], mg.TmaLimitError, "ml.copy(x.at[rows, cols], a)",
         "TMA copies need x.at[rows, cols]'s rows to be a multiple of 16 bytes apart; its last dimension is"
         " 999 x 1 bytes",
         hint="pad x's rows to 1008 elements outside the kernel, jnp.pad(x, ((0, 0), (0, 9))), and slice the"
              " result back; or read the window into registers instead, x.at[rows, cols][...]"
              " (x.at[rows, cols].load(mask=..., other=0) where it may run past x's end; a pipelined loop,"
              " ml.range(..., stages=), needs a TMA load: make it a plain range)")
  expect(invert_tiles, [S((16, 99), F32)], mg.TmaLimitError, "ml.copy(x.at[rows, cols], a)",
         "TMA copies need x.at[rows, cols]'s rows to be a multiple of 16 bytes apart; its last dimension is"
         " 99 x 4 bytes")


def test_the_padded_image_inverts_as_numpy_does():
  img = np.random.default_rng(1).integers(0, 256, (100, 999)).astype(np.uint8)
  y = invert_tiles(jnp.pad(jnp.asarray(img), ((0, 0), (0, 9))), interpret=True)[:, :999]
  np.testing.assert_array_equal(np.asarray(y), 255 - img)
  assert "mosaic_gpu" in str(_export(invert_tiles, S((100, 1008), jnp.uint8)))


# ---------------------------------------------------------------- 2x2 pooling of a uint8 image in registers
@mg.mgpu_kernel(out_shape=lambda x, *, op: S((x.shape[0] // 2, x.shape[1] // 2), x.dtype),
                grid=lambda x, *, op: (x.shape[0] // 2,))
def pool_pairs(x, out, *, op: ml.constexpr):
  r = ml.program_id(0)
  a = x.at[2 * r][...].reshape(x.shape[1] // 2, 2)
  b = x.at[2 * r + 1][...].reshape(x.shape[1] // 2, 2)
  if op == "max":
    out.at[r][...] = ml.max(ml.maximum(a, b), axis=1)
  else:
    out.at[r][...] = ml.min(ml.minimum(a, b), axis=1)


def test_the_narrow_rows_hint_pads_uint8_data_with_a_uint8_identity():
  """An 8-bit max or min computes in 32 bits: the hint's `other=` was 4294967295 for a min (of
  uint32), which a uint8 load rejects (MG003), where 255 is uint8's highest value."""
  message = ("this tile of shape (128, 2) is reduced or broadcast along its rows or columns, which needs"
             " columns a multiple of 32 (one per lane of a warp), and rows a multiple of 4 unless the columns are"
             " a multiple of 128")
  e = expect(pool_pairs, [S((16, 256), jnp.uint8)], mg.LayoutError, "ml.max(ml.maximum(a, b), axis=1)",
             message, op="max")
  assert "other=0) for a max (255 for a min, 0 for a sum)" in e.hint, e.hint
  e = expect(pool_pairs, [S((16, 256), jnp.uint8)], mg.LayoutError, "ml.min(ml.minimum(a, b), axis=1)",
             message, op="min")
  assert "other=255) for a min (0 for a max, 0 for a sum)" in e.hint, e.hint
