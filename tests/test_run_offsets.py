"""Triton's `tl.load(x_ptr + offs, mask=m, other=0)` and `tl.store(o_ptr + offs, v, mask=m)` written on refs:
`ml.load(x.at[offs], mask=m, other=0.0)`, `x.at[offs].load(...)`, `ml.store(o.at[offs], v, mask=m)` and
`o.at[offs].store(v, mask=m)`, where every index tensor is a run `start + ml.arange(n)` (a 2-D grid
`rows[:, None]`, `cols[None, :]` in the ref's axis order), move the window the run covers, as
`x.at[ml.ds(start, n)]` does: a masked window access, no gather. Runs in another order are a gather or a
scatter; an unmasked run past the end is MG203, whose hint masks the user's offsets."""
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


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (ml.cdiv(x.shape[0], 1024),))
def add(x, y, o):                          # Triton's first tutorial, as ported
  offs = ml.program_id(0) * 1024 + ml.arange(1024)
  mask = offs < x.shape[0]
  a = ml.load(x.at[offs], mask=mask, other=0.0)
  b = y.at[offs].load(mask=mask, other=0.0)
  ml.store(o.at[offs], a + b, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 32), ml.cdiv(x.shape[1], 128)))
def double_block(x, o):                   # x_ptr + rows[:, None] * stride + cols[None, :]
  rows = ml.program_id(0) * 32 + ml.arange(32)
  cols = ml.program_id(1) * 128 + ml.arange(128)
  m = (rows[:, None] < x.shape[0]) & (cols[None, :] < x.shape[1])
  v = x.at[rows[:, None], cols[None, :]].load(mask=m, other=0.0)
  o.at[rows[:, None], cols[None, :]].store(v * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def normalise_rows(x, o):                 # a row index and a run of columns
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = ml.load(x.at[r, cols], mask=cols < x.shape[1], other=0.0)
  ml.store(o.at[r, cols], v / ml.sum(v), mask=cols < x.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def transpose_grid(x, o):                 # runs in the other order: a gather and a scatter
  r, c = ml.arange(32), ml.arange(32)
  keep = (r[:, None] < 30) & (c[None, :] < 32)
  t = ml.load(x.at[c[None, :], r[:, None]], mask=keep, other=-1.0)
  ml.store(o.at[c[None, :], r[:, None]], t, mask=keep)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def smem_run(x, o):
  buf = ml.smem((256,), F32)
  buf[...] = x[...]
  o.at[ml.ds(0, 128)][...] = ml.load(buf.at[64 + ml.arange(128)])
  o.at[ml.ds(128, 128)][...] = ml.zeros((128,), F32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 256),))
def unmasked_tail(x, o):
  offs = ml.program_id(0) * 256 + ml.arange(256)
  ml.store(o.at[offs], ml.load(x.at[offs]) * 2)


def _cases():
  x = jnp.arange(3000, dtype=F32)
  yield add, (x, jnp.ones_like(x)), x + 1
  x = rand.normal(rand.key(0), (100, 300), F32)
  yield double_block, (x,), x * 2
  x = rand.uniform(rand.key(1), (8, 100), F32) + 0.5
  yield normalise_rows, (x,), x / x.sum(1, keepdims=True)
  x = rand.normal(rand.key(2), (32, 32), F32)
  t = jnp.where(jnp.arange(32)[:, None] < 30, x.T, -1.0)          # t[i, j] = x[j, i] where i < 30
  yield transpose_grid, (x,), jnp.where(jnp.arange(32)[None, :] < 30, t.T, 0.0)
  x = jnp.arange(256, dtype=F32)
  yield smem_run, (x,), jnp.concatenate([x[64:192], jnp.zeros(128, F32)])


@pytest.mark.parametrize("case", range(5))
def test_run_offsets_match_jnp_in_interpret_mode_and_export(case):
  kernel, args, want = list(_cases())[case]
  np.testing.assert_allclose(kernel(*args, interpret=True), want, rtol=1e-6)
  exported = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])
  assert "mosaic_gpu" in exported.mlir_module()


def test_a_run_is_a_window_access_and_runs_in_another_order_a_gather():
  for kernel, spec in ((add, [S((3000,), F32)] * 2), (double_block, [S((100, 300), F32)])):
    text = kernel.typed_ir(*spec)
    assert "= maskedload " in text and "maskedstore " in text
    assert "= gather " not in text and "scatterupdate " not in text
  text = transpose_grid.typed_ir(S((32, 32), F32))
  assert "= gather " in text and "scatterupdate kind=set" in text


def test_an_unmasked_run_past_the_end_is_mg203_with_the_users_offsets_masked():
  expect(unmasked_tail, [S((300,), F32)], mg.IndexOutOfBoundsError, "ml.load(x.at[offs])",
             "this register read touches x[256:512] in program (1, 0, 0), outside x's shape (300,)",
             hint="mask the offsets to the elements inside: x.at[offs].load(mask=offs < x.shape[0], other=0)")


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (ml.cdiv(x.shape[0], 1024),))
def add_pointers(x_ptr, y_ptr, output_ptr, BLOCK_SIZE: ml.constexpr = 1024):     # the tutorial, verbatim
  pid = ml.program_id(axis=0)
  offsets = pid * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  mask = offsets < x_ptr.shape[0]
  x = ml.load(x_ptr + offsets, mask=mask)
  y = ml.load(y_ptr.at[offsets], mask=mask)
  ml.store(output_ptr + offsets, x + y, mask=mask)


def test_pointer_arithmetic_hints_the_ref_indexed_by_the_users_offsets():
  spec = [S((3000,), F32)] * 2
  expect(add_pointers, spec, mg.KernelTypeError, "x_ptr + offsets",
         "+ works on register values, got x_ptr (GMEM ref) plus integer offsets: a ref is not a pointer, so offsets"
         " are not added to it",
         hint="index x_ptr with the offsets instead of adding them: ml.load(x_ptr.at[offsets], mask=mask) (a run"
              " start + ml.arange(n) moves the window it covers; other offsets gather or scatter); to add to"
              " x_ptr's values, read it first: x_ptr[...] + ...")
  with pytest.raises(mg.KernelTypeError) as info:
    add_pointers.check(*spec)
  assert ("ml.store(output_ptr.at[offsets], x + y, mask=mask)" in
          str(info.value).split("output_ptr + offsets")[-1])       # the store's own hint, in its words
  x = jnp.arange(3000, dtype=F32)           # the hints followed: add's kernel (above) gives x + y
  np.testing.assert_array_equal(add(x, x, interpret=True), x + x)


@pytest.mark.gpu
def test_gpu_run_offsets_match_jnp():
  for kernel, args, want in _cases():
    np.testing.assert_allclose(jax.jit(kernel)(*args), want, rtol=1e-6)
