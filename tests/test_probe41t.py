"""Probe 41t (ports of other DSLs' tutorial kernels: Triton's matmul, layer norm, softmax, dropout; Pallas GPU's
ops; Liger-Kernel's fused losses; int8/fp8 quantisation), the problems the ports found."""
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


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


# ---------------------------------------------------------------- Triton's matmul, its B tile masked in registers
@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def masked_tiles(a_ptr, b_ptr, c_ptr, *, bk: ml.constexpr):
  """Triton's tutorial loop: both tiles loaded through pointer grids under a mask of k, stored into the
  buffers ml.dot reads."""
  offs_am = ml.arange(128)
  offs_bn = ml.arange(64)
  acc = ml.zeros((128, 64), F32)
  a_s = ml.smem((128, bk), jnp.float16)
  b_s = ml.smem((bk, 64), jnp.float16)
  for k in range(0, ml.cdiv(a_ptr.shape[1], bk)):
    offs_k = k * bk + ml.arange(bk)
    b = ml.load(b_ptr.at[offs_k[:, None], offs_bn[None, :]], mask=offs_k[:, None] < b_ptr.shape[0], other=0.0)  # B tile
    a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :]], mask=offs_k[None, :] < a_ptr.shape[1], other=0.0)
    a_s[...] = a
    b_s[...] = b
    acc += ml.dot(a_s, b_s)
  ml.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc)


def test_a_dot_operand_tile_too_short_is_reported_at_the_tile_not_at_its_mask_index():
  """The k offsets (32,) are the rows of B's (32, 64) tile only through the (32, 1) mask broadcast to it: the
  error named ml.arange(32) ('meets a tensor-core result', hint: keep the dot's tile shape); it names the tile
  stored into b_s, whose fix (64 rows) works."""
  specs = (S((128, 128), jnp.float16), S((128, 64), jnp.float16))
  with pytest.raises(mg.LayoutError) as info:
    masked_tiles.check(*specs, bk=32)
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# B tile"), 8)
  assert str(e).splitlines()[0].endswith(
      "b of shape (32, 64) moves between registers and b_s, which ml.dot reads (tiled for the tensor cores), so it"
      " takes the tensor-core (WGMMA) layout: it must be 2-D with rows a multiple of 64 (64 per warpgroup) and"
      " columns a multiple of 8 [MG204]")
  assert e.hint.startswith("give b_s a multiple of 64 rows")
  a = _rand((128, 100), 1, jnp.float16)
  b = _rand((100, 64), 2, jnp.float16)
  np.testing.assert_allclose(masked_tiles(a, b, bk=64, interpret=True), a.astype(F32) @ b.astype(F32),
                             rtol=2e-2, atol=2e-2)
  assert "@mosaic_gpu" in _export(masked_tiles, S(a.shape, a.dtype), S(b.shape, b.dtype), bk=64)


# ---------------------------------------------------------------- a kernel built in a factory, with a docstring
def _scaled_softmax(scale):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
  def softmax(x_ptr, out_ptr):
    """Triton's fused softmax, one row a program, built per scale by a factory (as kernels written for
    several configurations are): the docstring's second line keeps the factory's indentation."""
    row = ml.program_id(0)
    cols = ml.arange(1024)
    mask = cols < x_ptr.shape[1]
    r = ml.load(x_ptr.at[row, cols], mask=mask, other=-float("inf")) * scale
    num = ml.exp(r - ml.max(r, axis=0))
    ml.store(out_ptr.at[row, cols], num / ml.sum(num, axis=0), mask=mask)
  return softmax


def test_a_factory_built_kernel_with_a_multiline_docstring_reads_its_source():
  """Its source was compared with the compiled code after a dedent, which changed the docstring's constant:
  SourceUnavailableError MG008, 'no longer holds the text Python compiled' (the file had not changed)."""
  x = _rand((7, 1000), 3)
  kernel = _scaled_softmax(0.5)
  np.testing.assert_allclose(kernel(x, interpret=True), jax.nn.softmax(x * 0.5, axis=1), rtol=1e-5, atol=1e-6)
  assert "@mosaic_gpu" in _export(kernel, S(x.shape, F32))


# ---------------------------------------------------------------- Triton's one-row pointer offsets of a 2-D array
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_by_stride(X, Y):
  row = ml.program_id(0)
  cols = ml.arange(512)
  mask = cols < X.shape[1]
  x = ml.load(X + row * X.shape[1] + cols, mask=mask, other=0.)      # row pointer
  ml.store(Y.at[row, cols], x + 1, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=lambda x, **k: (x.shape[0],))
def cols_then_stride(X, Y, *, stride_x: ml.constexpr):
  row = ml.program_id(0)
  cols = ml.arange(512)
  mask = cols < X.shape[1]
  x = ml.load(X.at[row, cols], mask=mask, other=0.)
  ml.store(Y + cols + stride_x * row, x + 1, mask=mask)                # cols first


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_by_stride_fixed(X, Y):     # both hints, followed
  row = ml.program_id(0)
  cols = ml.arange(512)
  mask = cols < X.shape[1]
  x = ml.load(X.at[row, cols], mask=mask, other=0.0)
  ml.store(Y.at[row, cols], x + 1, mask=mask)


def test_one_row_pointer_offsets_of_a_2d_array_are_hinted_as_its_row_and_columns():
  """`X + row * X.shape[1] + cols` hinted the windows of a loop over k and of `ml.ds(start, n)` blocks;
  `Y + cols + stride_x * row` hinted `Y.at[cols]`, which indexes Y's rows (a gather of 512 rows of a 5-row
  array). Both now write the user's row and columns, X.at[row, cols], with the call's mask and other."""
  spec = S((5, 500), F32)
  with pytest.raises(mg.KernelTypeError) as info:
    row_by_stride.check(spec)
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# row pointer"), 14)
  assert str(e).splitlines()[0].endswith(
      "+ works on register values, got X (GMEM ref) plus the offset row * X.shape[1]: a ref is not a pointer, so it"
      " does not move by an offset [MG003]")
  assert e.hint == ("index X by row and column (refs have no strides: X's rows are its first index):"
                    " ml.load(X.at[row, cols], mask=mask, other=0.0); to add to X's values, read it first:"
                    " X[...] + row * X.shape[1]")
  with pytest.raises(mg.KernelTypeError) as info:
    cols_then_stride.check(spec, stride_x=500)
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# cols first"), 11)
  assert str(e).splitlines()[0].endswith(
      "+ works on register values, got Y (GMEM ref) plus integer offsets: a ref is not a pointer, so offsets are not"
      " added to it [MG003]")
  assert e.hint == ("index Y by row and column (refs have no strides: Y's rows are its first index):"
                    " ml.store(Y.at[row, cols], x + 1, mask=mask)")
  x = _rand((5, 500), 4)
  np.testing.assert_allclose(row_by_stride_fixed(x, interpret=True), x + 1, rtol=1e-6)
  assert "@mosaic_gpu" in _export(row_by_stride_fixed, spec)
