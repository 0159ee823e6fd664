"""Triton's pointer arithmetic written on refs (theme p of session 40): the diagnostics of run offsets
`x.at[offs]` speak in the user's offsets. An unmasked run statically past the end names the offsets and
hints their mask (it said `ml.ds(0, 128)`, a window the user never wrote, and `ref.load(mask=...)`);
Triton's 2-D `x_ptr + rows[:, None] * stride + cols[None, :]` hints the ref indexed by the user's
row and column vectors (it hinted placeholders, `ml.ds(r0, m), ml.ds(c0, n)`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_cols(x, o):                       # a row index and a run of columns past the row's end
  r = ml.program_id(0)
  cols = ml.arange(128)
  ml.store(o.at[r, cols], ml.load(x.at[r, cols]) * 2.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_cols_read_masked(x, o):           # the read's hint followed
  r = ml.program_id(0)
  cols = ml.arange(128)
  ml.store(o.at[r, cols], x.at[r, cols].load(mask=cols < x.shape[1], other=0) * 2.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_cols_masked(x, o):                # and the store's
  r = ml.program_id(0)
  cols = ml.arange(128)
  o.at[r, cols].store(x.at[r, cols].load(mask=cols < x.shape[1], other=0) * 2.0, mask=cols < o.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: S((64, 128), x.dtype), grid=(1,))
def grid_before_start(x, o):              # a 2-D grid whose columns start before 0
  r = ml.arange(64)
  c = ml.arange(128) + -2
  o[...] = ml.zeros((64, 128), F32)
  v = ml.load(x.at[r[:, None], c[None, :]])
  o[...] = v


def test_an_unmasked_static_run_past_the_end_names_the_offsets_and_hints_their_mask():
  spec = [S((4, 100), F32)]
  expect(row_cols, spec, mg.IndexOutOfBoundsError, "ml.load(x.at[r, cols])",
         "the offsets cols run over 0..127 along dimension 1 of x, outside its size 100: an unmasked register"
         " read must stay inside the array",
         hint="mask the offsets to the elements inside: x.at[r, cols].load(mask=cols < x.shape[1], other=0)")
  expect(row_cols_read_masked, spec, mg.IndexOutOfBoundsError, "ml.store(o.at[r, cols]",
         "the offsets cols run over 0..127 along dimension 1 of o, outside its size 100: an unmasked register"
         " write must stay inside the array",
         hint="mask the offsets to the elements inside: o.at[r, cols].store(x.at[r, cols].load(mask=cols <"
              " x.shape[1], other=0) * 2.0, mask=cols < o.shape[1])")
  x = rand.normal(rand.key(0), (4, 100), F32)       # both hints followed
  np.testing.assert_allclose(row_cols_masked(x, interpret=True), x * 2, rtol=1e-6)
  expect(grid_before_start, [S((64, 128), F32)], mg.IndexOutOfBoundsError, "ml.load(x.at[r[:, None]",
         "the offsets c[None, :] run over -2..125 along dimension 1 of x, outside its size 128: an unmasked"
         " register read must stay inside the array",
         hint="mask the offsets to the elements inside: x.at[r[:, None], c[None, :]].load(mask=c[None, :] >= 0,"
              " other=0)")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 32),))
def pointer_grid(x_ptr, o_ptr, stride_m: ml.constexpr = 64):     # Triton's 2-D pointer block, verbatim
  offs_m = ml.program_id(0) * 32 + ml.arange(32)
  offs_n = ml.arange(64)
  ptrs = x_ptr + offs_m[:, None] * stride_m + offs_n[None, :]
  v = ml.load(ptrs, mask=offs_m[:, None] < x_ptr.shape[0], other=0.0)
  ml.store(o_ptr + offs_m[:, None] * stride_m + offs_n[None, :], v, mask=offs_m[:, None] < x_ptr.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 32),))
def pointer_grid_store(x, o_ptr, stride_m: ml.constexpr = 64):    # the store alone, columns first
  offs_m = ml.program_id(0) * 32 + ml.arange(32)
  offs_n = ml.arange(64)
  v = x.at[offs_m[:, None], offs_n[None, :]].load(mask=offs_m[:, None] < x.shape[0], other=0.0)
  ml.store(o_ptr + (offs_n[None, :] + stride_m * offs_m[:, None]), v + 1.0, mask=offs_m[:, None] < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 32),))
def grid_indexed(x, o):                   # the hints followed
  offs_m = ml.program_id(0) * 32 + ml.arange(32)
  offs_n = ml.arange(64)
  v = ml.load(x.at[offs_m[:, None], offs_n[None, :]], mask=offs_m[:, None] < x.shape[0], other=0.0)
  ml.store(o.at[offs_m[:, None], offs_n[None, :]], v + 1.0, mask=offs_m[:, None] < x.shape[0])


def test_tritons_2d_pointer_block_hints_the_ref_indexed_by_the_users_vectors():
  spec = [S((100, 64), F32)]
  msg = ("+ works on register values, got {} (GMEM ref) plus integer offsets: a ref is not a pointer, so offsets"
         " are not added to it")
  expect(pointer_grid, spec, mg.KernelTypeError, "x_ptr + offs_m", msg.format("x_ptr"),
         hint="index x_ptr by dimension with the offsets' vectors instead of adding them (refs have no strides:"
              " x_ptr's rows are its first index, so stride_m goes): ml.load(x_ptr.at[offs_m[:, None], offs_n[None,"
              " :]], mask=mask, other=0.0), ml.store(x_ptr.at[offs_m[:, None], offs_n[None, :]], value, mask=mask)"
              " (runs start + ml.arange(n) move the tile they cover; other offsets gather or scatter)")
  expect(pointer_grid_store, spec, mg.KernelTypeError, "o_ptr + (offs_n", msg.format("o_ptr"),
         hint="index o_ptr by dimension with the offsets' vectors instead of adding them (refs have no strides:"
              " o_ptr's rows are its first index, so stride_m goes): ml.store(o_ptr.at[offs_m[:, None], offs_n[None,"
              " :]], v + 1.0, mask=offs_m[:, None] < x.shape[0]) (runs start + ml.arange(n) move the tile they"
              " cover; other offsets gather or scatter)")
  x = rand.normal(rand.key(1), (100, 64), F32)
  np.testing.assert_allclose(grid_indexed(x, interpret=True), x + 1, rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def grid_store_unmasked(x, o):            # both dimensions of the grid run past the end
  r = ml.arange(128)
  c = ml.arange(128)
  v = ml.load(x.at[r[:, None], c[None, :]], mask=(r[:, None] < 100) & (c[None, :] < 100), other=0.0)
  ml.store(o.at[r[:, None], c[None, :]], v)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def grid_store_masked(x, o):              # its hint followed
  r = ml.arange(128)
  c = ml.arange(128)
  v = ml.load(x.at[r[:, None], c[None, :]], mask=(r[:, None] < 100) & (c[None, :] < 100), other=0.0)
  o.at[r[:, None], c[None, :]].store(v, mask=(r[:, None] < o.shape[0]) & (c[None, :] < o.shape[1]))


def test_a_grid_past_the_end_in_both_dimensions_hints_one_mask_of_both():
  expect(grid_store_unmasked, [S((100, 100), F32)], mg.IndexOutOfBoundsError, "ml.store(o.at",
         "the offsets r[:, None] run over 0..127 along dimension 0 of o, outside its size 100: an unmasked"
         " register write must stay inside the array",
         hint="mask the offsets to the elements inside: o.at[r[:, None], c[None, :]].store(v, mask=(r[:, None] <"
              " o.shape[0]) & (c[None, :] < o.shape[1]))")
  x = rand.normal(rand.key(2), (100, 100), F32)
  np.testing.assert_array_equal(grid_store_masked(x, interpret=True), x)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 32),))
def column_mask_only(x, o):               # the rows' mask left out of a 2-D grid's load
  offs_m = ml.program_id(0) * 32 + ml.arange(32)
  offs_n = ml.arange(128)
  v = ml.load(x.at[offs_m[:, None], offs_n[None, :]], mask=offs_n[None, :] < x.shape[1], other=0.0)
  ml.store(o.at[offs_m[:, None], offs_n[None, :]], v,
           mask=(offs_m[:, None] < x.shape[0]) & (offs_n[None, :] < x.shape[1]))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 32),))
def both_masks(x, o):                     # its hint followed
  offs_m = ml.program_id(0) * 32 + ml.arange(32)
  offs_n = ml.arange(128)
  v = ml.load(x.at[offs_m[:, None], offs_n[None, :]],
              mask=(offs_n[None, :] < x.shape[1]) & (offs_m[:, None] < x.shape[0]), other=0.0)
  ml.store(o.at[offs_m[:, None], offs_n[None, :]], v,
           mask=(offs_m[:, None] < x.shape[0]) & (offs_n[None, :] < x.shape[1]))


@mg.mgpu_kernel(out_shape=lambda n, x: x, grid=lambda n, x: (ml.cdiv(x.shape[0], 128),))
def data_mask(n, x, o):                   # a length read from memory past the array's end
  offs = ml.program_id(0) * 128 + ml.arange(128)
  v = ml.load(x.at[offs], mask=offs < n[0], other=0.0)
  ml.store(o.at[offs], v, mask=offs < x.shape[0])


def test_a_masked_run_on_outside_the_array_hints_the_users_offsets_in_the_mask():
  expect(column_mask_only, [S((100, 100), F32)], mg.IndexOutOfBoundsError, "ml.load(x.at[offs_m",
         "this masked load touches x[96:128, 0:100] in program (3, 0, 0) where its mask is on, outside x's shape"
         " (100, 100)",
         hint="keep the mask off outside x too: mask=(offs_n[None, :] < x.shape[1]) & (offs_m[:, None] <"
              " x.shape[0])")
  x = rand.normal(rand.key(3), (100, 100), F32)
  np.testing.assert_array_equal(both_masks(x, interpret=True), x)
  x = rand.normal(rand.key(4), (300,), F32)
  with pytest.raises(mg.OutOfBoundsError) as info:         # interpret mode's check of a mask of data
    data_mask(jnp.array([310], jnp.int32), x, interpret=True)
  assert info.value.hint == ("keep the mask off outside x too: mask=(offs < n[0]) & (offs < x.shape[0]) (a mask of"
                             " data, a segment's end or a length read from memory, is on wherever the data says,"
                             " also past x's end)")
  np.testing.assert_array_equal(data_mask(jnp.array([200], jnp.int32), x, interpret=True),
                                jnp.where(jnp.arange(300) < 200, x, 0))
