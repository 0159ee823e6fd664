"""Probe 51a (nothing silently wrong, what probe 50f left). Kernels that compiled, ran and gave wrong numbers with
nothing said:

- `ml.program_id(1)` on a grid of one axis (`grid=(n,)`) was 0 in every program, as Triton's, with no word: the
  kernel wrote one tile n times. Now MG203 at the ml.program_id (the grid's axes as written reach the trace:
  mgpu_dsl/kernel.py, frontend/ops/control.py); a grid written with the axis, `grid=(n, 1)`, keeps its 0;
- `jnp.prod` of a masked load with `other=0.0` was 0 (MG953 did not follow scans, which jnp.prod, lax.reduce_prod
  and `ml.cumprod(v)[-1]` take a product with): now interpret mode follows the padding through scans
  (lowering/interpret_pad_scans.py) and reports a scan's total that the padding changes (the scan is marked where
  its last element is read: frontend/ops/scan.py) and a scan whose elements at lanes of data it changes (a
  reverse scan from a padded end); a forward scan stored under its mask stays fine; jnp's `v.prod(axis=1)` method
  of a register tensor (MG003 before) is jnp.prod's;
- an unmasked gather whose indices, known while compiling, leave the array (`x.at[r, ml.arange(64) * 2].load()` of
  a row of 100) clamped silently into the last element (jnp's rule): now MG203 with the mask as the hint
  (frontend/gather_bounds.py); gathers of indices read from data keep jnp's rule.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- ml.program_id of an axis the grid lacks
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def rows_by_second_axis(x, out):
  i = ml.program_id(0)
  j = ml.program_id(1)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + j


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64))
def tiles_by_third_axis(x, out):
  i, j, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = x.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] * (b + 1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=4)
def int_grid_second_axis(x, out):
  pid = ml.program_id(axis=1)
  out.at[ml.ds(pid * 128, 128)][...] = x.at[ml.ds(pid * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64, 1))
def tiles_with_written_third_axis(x, out):
  i, j, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = x.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] * (b + 1)


def test_program_id_of_an_axis_a_grid_of_fewer_axes_lacks_is_mg203():
  """A grid written with the axis, (2, 2, 1), keeps its 0: the grid's axes are in the specialisation key, so it
  shares no trace with (2, 2)."""
  expect(rows_by_second_axis, [S((512,), F32)], mg.IndexOutOfBoundsError, "ml.program_id(1)",
         "ml.program_id(1) reads grid axis 1, but the grid has 1 axis: it would be 0 in every program",
         hint="the grid's programs are ml.program_id(0); to launch programs along axis 1 too, give the grid 2 extents,"
              " grid=(n0, n1) (or a callable returning them), or write 0 where 0 is meant")
  expect(tiles_by_third_axis, [S((128, 128), F32)], mg.IndexOutOfBoundsError, "ml.program_id(2)",
         "ml.program_id(2) reads grid axis 2, but the grid has 2 axes: it would be 0 in every program",
         hint="the grid's programs are ml.program_id(0) and ml.program_id(1); to launch programs along axis 2 too, give"
              " the grid 3 extents, grid=(n0, n1, n2) (or a callable returning them), or write 0 where 0 is meant")
  expect(int_grid_second_axis, [S((512,), F32)], mg.IndexOutOfBoundsError, "ml.program_id(axis=1)",
         "ml.program_id(1) reads grid axis 1, but the grid has 1 axis: it would be 0 in every program")
  x = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
  np.testing.assert_array_equal(tiles_with_written_third_axis(x, interpret=True), x)
  tiles_with_written_third_axis.check(S((128, 128), F32))


# ---------------------------------------------------------------- padding through scans (MG953)
def _near_one(seed, shape):
  return (1 + 0.01 * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def row_prod(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[r] = jnp.prod(v)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def rows_cumprod_last(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[ml.ds(r * 8, 8), cols].load(mask=cols[None, :] < x.shape[1], other=0.0)
  out.at[ml.ds(r * 8, 8)][...] = ml.cumprod(v, axis=1)[:, -1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 1), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def rows_prod_keepdims(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[ml.ds(r * 8, 8), cols].load(mask=cols[None, :] < x.shape[1], other=0.0)
  out.at[ml.ds(r * 8, 8), :][...] = jnp.prod(v, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def row_cummax_last(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[r] = ml.cummax(v)[-1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def rows_prod_of_ones(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[ml.ds(r * 8, 8), cols].load(mask=cols[None, :] < x.shape[1], other=1.0)
  out.at[ml.ds(r * 8, 8)][...] = jnp.prod(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_cumprod_stored(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  m = cols < x.shape[1]
  v = x.at[r, cols].load(mask=m, other=0.0)
  out.at[r, cols].store(jnp.cumprod(v), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def rows_prod_method(x, out):
  r = ml.program_id(0)
  out.at[ml.ds(r * 8, 8)][...] = x.at[ml.ds(r * 8, 8), :][...].prod(axis=1)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype), S((x.shape[1],), x.dtype)))
def small_tile_products(x, rows, cols):
  rows[...] = jnp.prod(x[...], axis=1)      # (a (5, 40) read: traced padded, the padding the compiler's own)
  cols[...] = jnp.prod(x[...], axis=0)


def _masked_reduction(kernel, x, at, message, hint):
  with pytest.raises(mg.MaskedReductionError) as info:
    kernel(x, interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(kernel, at), e.render()
  assert e.code == "MG953" and e.message == message and e.hint == hint, e.render()


def test_a_product_of_padding_filled_with_zero_is_mg953():
  """other=1.0 under a product, and a forward scan whose padded lanes a masked store drops, compute."""
  x = _near_one(0, (16, 100))
  np.testing.assert_allclose(rows_prod_of_ones(x, interpret=True), x.prod(axis=1), rtol=1e-5)
  np.testing.assert_allclose(row_cumprod_stored(x, interpret=True), np.cumprod(x, axis=1), rtol=1e-5)
  np.testing.assert_allclose(rows_prod_method(x, interpret=True), x.prod(axis=1), rtol=1e-5)    # jnp's v.prod()
  small = x[:5, :40]
  for got, want in zip(small_tile_products(small, interpret=True), (small.prod(axis=1), small.prod(axis=0))):
    np.testing.assert_allclose(got, want, rtol=1e-5)
  line = where(row_prod, "x.at[r, cols]")[0]
  _masked_reduction(
      row_prod, x, "jnp.prod(v)",
      f"jnp.prod multiplies lanes the masked load at line {line} kept off past the end of x, filled with other=0.0:"
      f" they change its result in program (0, 0, 0), 0 where the elements inside give {np.prod(x[0]):.6g}",
      f"fill them with the identity of a product: other=1.0 in the masked load at line {line} (where a sum reads"
      f" the same tile, keep other=0 there and reduce ml.where(cols < x.shape[1], v, 1.0))")
  line = where(rows_cumprod_last, "x.at[")[0]
  with pytest.raises(mg.MaskedReductionError, match=f"ml.cumprod multiplies lanes the masked load at line {line}"):
    rows_cumprod_last(x, interpret=True)
  with pytest.raises(mg.MaskedReductionError, match="jnp.prod multiplies lanes"):
    rows_prod_keepdims(jnp.asarray(x, jnp.bfloat16), interpret=True)
  line = where(row_cummax_last, "x.at[")[0]
  _masked_reduction(
      row_cummax_last, -x, "ml.cummax(v)",
      f"ml.cummax takes the max of lanes the masked load at line {line} kept off past the end of x, filled with"
      f" other=0.0: they change its result in program (0, 0, 0), 0 where the elements inside give {np.max(-x[0]):.6g}",
      f"fill them with the identity of a max: other=float('-inf') in the masked load at line {line} (where a sum"
      f" reads the same tile, keep other=0 there and reduce ml.where(cols < x.shape[1], v, float('-inf')))")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_suffix_sums(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  m = cols < x.shape[1]
  v = x.at[r, cols].load(mask=m, other=1.0)
  out.at[r, cols].store(ml.cumsum(v, reverse=True), mask=m)


def test_a_reverse_scan_from_padding_that_changes_lanes_of_data_is_mg953():
  x = _near_one(2, (4, 100))
  line = where(row_suffix_sums, "x.at[")[0]
  want = np.flip(np.cumsum(np.flip(x[0]))).astype(np.float32)[0]
  with pytest.raises(mg.MaskedReductionError) as info:
    row_suffix_sums(x, interpret=True)
  e = info.value
  assert e.lineno == where(row_suffix_sums, "ml.cumsum")[0]
  assert e.message.startswith(f"ml.cumsum scans lanes the masked load at line {line} kept off past the end of x,"
                              f" filled with other=1.0: they change its elements at lanes of data, ")
  assert e.message.endswith(f"at lane 0 in program (0, 0, 0) where the elements inside give {want:.6g}")
  assert e.hint == f"fill them with the identity of a sum: other=0.0 in the masked load at line {line}"


# ---------------------------------------------------------------- unmasked gathers past the end (MG203)
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), x.dtype), grid=lambda x: (x.shape[0],))
def even_columns(x, out):
  r = ml.program_id(0)
  out.at[r, :][...] = x.at[r, ml.arange(64) * 2].load()


@mg.mgpu_kernel(out_shape=lambda x: S((32,), x.dtype))
def every_fourth(x, out):
  out[...] = x[ml.arange(32) * 4]


@mg.mgpu_kernel(out_shape=lambda x: S((100,), x.dtype))
def every_other_of_100(x, out):
  out[...] = x[ml.arange(100) * 2]        # (an arange of 100 lanes: traced padded to 128, whose extra lanes count not)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 128), x.dtype), grid=lambda x: (x.shape[0],))
def strided_chunks(x, out):
  r = ml.program_id(0)
  for k in range(4):
    out.at[r, ml.ds(k * 32, 32)][...] = x.at[r, k * 32 + ml.arange(32) * 2].load()


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), x.dtype), grid=lambda x: (x.shape[0],))
def even_columns_masked(x, out):
  r = ml.program_id(0)
  idx = ml.arange(64) * 2
  a = x.at[r, idx].load(mask=idx < x.shape[1], other=0.0)
  b = ml.where(idx < x.shape[1], x[r, idx], 0.0)
  out.at[r, :][...] = a + b


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), x.dtype), grid=lambda x: (x.shape[0],))
def reversed_row(x, out):
  r = ml.program_id(0)
  out.at[r, :][...] = x[r, -1 - ml.arange(64)]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), x.dtype), grid=lambda x: (x.shape[0],))
def strided_masked_by_offsets(x, out):
  r = ml.program_id(0)
  offs = ml.arange(64)
  out.at[r, :][...] = x.at[r, offs * 2].load(mask=offs < x.shape[1], other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), x.dtype), grid=lambda x: (x.shape[0],))
def strided_selected_by_offsets(x, out):
  r = ml.program_id(0)
  offs = ml.arange(64)
  out.at[r, :][...] = ml.where(offs < x.shape[1], x[r, offs * 2], 0.0)


def test_a_gather_whose_mask_keeps_indices_past_the_end_is_mg203():
  """Triton's strided load masked by its offsets, not by the addresses it reads (`offs < n` for `offs * 2`)."""
  expect(strided_masked_by_offsets, [S((4, 100), F32)], mg.IndexOutOfBoundsError, "x.at[r, offs * 2]",
         "index 100 is out of bounds for dimension 1 of x (size 100) in program (0, 0, 0): this masked gather reads"
         " 14 of its 64 lanes past the end where its mask is on, where jnp's gather clamps them to its last element",
         hint="bound the index the mask keeps by the dimension it indexes:"
              " mask=(offs < x.shape[1]) & (offs * 2 < x.shape[1])")
  expect(strided_selected_by_offsets, [S((4, 100), F32)], mg.IndexOutOfBoundsError, "x[r, offs * 2]",
         "index 100 is out of bounds for dimension 1 of x (size 100) in program (0, 0, 0): this masked gather reads"
         " 14 of its 64 lanes past the end where its mask is on, where jnp's gather clamps them to its last element",
         hint="bound the index the mask keeps by the dimension it indexes:"
              " ml.where((offs < x.shape[1]) & (offs * 2 < x.shape[1]), ...)")


def test_an_unmasked_gather_past_the_end_is_mg203():
  """Masked gathers, a where's, and gathers inside (negative indices counting from the end) compute."""
  x = np.random.default_rng(3).standard_normal((4, 100)).astype(np.float32)
  want = np.zeros((4, 64), np.float32)
  want[:, :50] = 2 * x[:, ::2]
  np.testing.assert_allclose(even_columns_masked(x, interpret=True), want, rtol=1e-6)
  wide = np.tile(x, (1, 2))[:, :128]
  np.testing.assert_array_equal(even_columns(wide, interpret=True), wide[:, ::2])
  np.testing.assert_array_equal(reversed_row(x[:, :64], interpret=True), x[:, :64][:, ::-1])
  expect(even_columns, [S((4, 100), F32)], mg.IndexOutOfBoundsError, "x.at[r, ml.arange(64) * 2]",
         "index 100 is out of bounds for dimension 1 of x (size 100) in program (0, 0, 0): this gather reads 14 of its"
         " 64 lanes past the end, where jnp's gather clamps them to its last element",
         hint="mask the lanes inside: x.at[r, ml.arange(64) * 2].load(mask=ml.arange(64) * 2 < x.shape[1], other=0),"
              " or clamp the index where the last element is meant: ml.minimum(ml.arange(64) * 2, x.shape[1] - 1)")
  expect(every_fourth, [S((100,), F32)], mg.IndexOutOfBoundsError, "x[ml.arange(32) * 4]",
         "index 100 is out of bounds for dimension 0 of x (size 100): this gather reads 7 of its 32 lanes past the"
         " end, where jnp's gather clamps them to its last element")
  expect(every_other_of_100, [S((150,), F32)], mg.IndexOutOfBoundsError, "x[ml.arange(100) * 2]",
         "index 150 is out of bounds for dimension 0 of x (size 150): this gather reads 25 of its 100 lanes past the"
         " end, where jnp's gather clamps them to its last element")
  y = np.arange(200, dtype=np.float32)
  np.testing.assert_array_equal(every_other_of_100(y, interpret=True), y[::2])
  expect(strided_chunks, [S((4, 100), F32)], mg.IndexOutOfBoundsError, "x.at[r, k * 32",
         "index 100 is out of bounds for dimension 1 of x (size 100) in program (0, 0, 0) when k = 2: this gather"
         " reads 14 of its 32 lanes past the end, where jnp's gather clamps them to its last element")


