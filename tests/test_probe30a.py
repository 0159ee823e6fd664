"""Probe 30a (LLM inference and training kernels as Triton or Pallas users port them: RoPE, SwiGLU,
int8/int4/fp8 quantisation, KV-cache appends, sampling, cross-entropy, MoE routing)."""
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


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _nibbles(b):
  b = np.asarray(b).astype(np.int32)
  return ((b << 28).astype(np.int32) >> 28), ((b << 24).astype(np.int32) >> 28)


# ---------------------------------------------------------------- reshapes of row-wise tiles
# A tile reduced or broadcast along its rows keeps each row in fixed threads; reshaping it other than
# by size-1 axes was MG204 ("a tile's rows live in fixed threads"), so each of these common
# quantisation kernels was rejected. The reshape now moves the elements through an SMEM scratch.
@mg.mgpu_kernel(out_shape=lambda p, s: S((p.shape[0], p.shape[1] * 2), jnp.float16),
                grid=lambda p, s: (p.shape[0] // 16,))
def unpack_int4_row_scales(p, s, out):
  i = ml.program_id(0)
  b = p.at[ml.ds(i * 16, 16), :][...].astype(jnp.int32)
  lo = (b << 28) >> 28
  hi = (b << 24) >> 28
  both = ml.concatenate([lo[..., None], hi[..., None]], axis=-1).reshape(16, out.shape[1])
  sc = s.at[ml.ds(i * 16, 16)][...]
  out.at[ml.ds(i * 16, 16), :][...] = (both.astype(jnp.float32) * sc[:, None]).astype(jnp.float16)


@mg.mgpu_kernel(out_shape=lambda p, s: S((p.shape[0], p.shape[1] * 2), jnp.bfloat16),
                grid=lambda p, s: (p.shape[0] // 16,))
def unpack_int4_scaled_first(p, s, out):
  i = ml.program_id(0)
  b = p.at[ml.ds(i * 16, 16), :][...].astype(jnp.int32)
  sc = s.at[ml.ds(i * 16, 16)][...]
  lo = (((b << 28) >> 28).astype(jnp.float32) * sc[:, None]).astype(jnp.bfloat16)
  hi = (((b << 24) >> 28).astype(jnp.float32) * sc[:, None]).astype(jnp.bfloat16)
  out.at[ml.ds(i * 16, 16), :][...] = ml.concatenate([lo[..., None], hi[..., None]], axis=-1).reshape(
      16, out.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], x.shape[1] // 2), jnp.uint8), S((x.shape[0],), F32)),
                grid=lambda x: (x.shape[0] // 8,))
def quantize_pack_int4(x, p, s):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8), :][...].astype(jnp.float32)
  sc = ml.maximum(ml.max(ml.abs(v), axis=1), 1e-8) / 7.0
  q = ml.clip(ml.round(v / sc[:, None]), -8, 7).astype(jnp.int32)
  pairs = q.reshape(8 * p.shape[1], 2)
  b = (pairs[:, 0] & 0xF) | ((pairs[:, 1] & 0xF) << 4)
  p.at[ml.ds(i * 8, 8), :][...] = b.reshape(8, p.shape[1]).astype(jnp.uint8)
  s.at[ml.ds(i * 8, 8)][...] = sc


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), jnp.uint8), block=256)
def quantize_pack_int4_loop(x, p):
  for i in range(x.shape[0] // 8):
    v = x.at[ml.ds(i * 8, 8), :][...].astype(jnp.float32)
    sc = ml.maximum(ml.max(ml.abs(v), axis=1), 1e-8) / 7.0
    q = ml.clip(ml.round(v / sc[:, None]), -8, 7).astype(jnp.int32)
    pairs = q.reshape(8 * p.shape[1], 2)
    b = (pairs[:, 0] & 0xF) | ((pairs[:, 1] & 0xF) << 4)
    p.at[ml.ds(i * 8, 8), :][...] = b.reshape(8, p.shape[1]).astype(jnp.uint8)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int8), S((x.shape[0], x.shape[1] // 128), F32)),
                grid=lambda x: (x.shape[0],))
def group_quantize(x, q, s):
  r = ml.program_id(0)
  v = x.at[r][...].astype(jnp.float32).reshape(x.shape[1] // 128, 128)     # a row as its groups
  sc = ml.maximum(ml.max(ml.abs(v), axis=1, keepdims=True), 1e-8) / 127.0
  q.at[r][...] = ml.round(v / sc).astype(jnp.int8).reshape(x.shape[1])
  s.at[r][...] = sc[:, 0]


def _pack_reference(x):
  v = np.asarray(x.astype(F32))
  sc = np.maximum(np.abs(v).max(1), np.float32(1e-8)) / np.float32(7)
  q = np.clip(np.round(v / sc[:, None]), -8, 7).astype(np.int32).reshape(x.shape[0], -1, 2)
  return ((q[..., 0] & 15) | ((q[..., 1] & 15) << 4)).astype(np.uint8), sc


def test_int4_unpacking_with_row_scales_interleaves_through_smem():
  p = rand.randint(rand.key(1), (32, 128), 0, 256, jnp.int32).astype(jnp.uint8)
  s = rand.uniform(rand.key(2), (32,), F32)
  lo, hi = _nibbles(p)
  want = np.stack([lo, hi], -1).reshape(32, 256).astype(np.float32) * np.asarray(s)[:, None]
  for kernel, dt in ((unpack_int4_row_scales, np.float16), (unpack_int4_scaled_first, jnp.bfloat16)):
    got = kernel(p, s, interpret=True)
    np.testing.assert_array_equal(np.asarray(got.astype(F32)), want.astype(dt).astype(np.float32))
    assert "relayoutstore" in kernel.typed_ir(S(p.shape, p.dtype), S(s.shape, s.dtype))
    assert "mosaic_gpu" in _export(kernel, S(p.shape, p.dtype), S(s.shape, s.dtype))


def test_per_row_int4_quantisation_packs_its_pairs_through_smem():
  x = rand.normal(rand.key(0), (16, 256), jnp.float16)
  got_p, got_s = quantize_pack_int4(x, interpret=True)
  want_p, want_s = _pack_reference(x)
  np.testing.assert_array_equal(np.asarray(got_p), want_p)
  np.testing.assert_allclose(np.asarray(got_s), want_s, rtol=1e-6)
  assert "mosaic_gpu" in _export(quantize_pack_int4, S(x.shape, x.dtype))
  x = rand.normal(rand.key(4), (32, 512), F32)   # in a loop, two warpgroups
  np.testing.assert_array_equal(np.asarray(quantize_pack_int4_loop(x, interpret=True)), _pack_reference(x)[0])
  assert "mosaic_gpu" in _export(quantize_pack_int4_loop, S(x.shape, x.dtype))


def test_a_loaded_row_reshaped_into_groups_is_reduced_per_group():
  x = rand.normal(rand.key(0), (5, 1024), jnp.bfloat16)
  q, s = group_quantize(x, interpret=True)
  v = np.asarray(x.astype(F32)).reshape(5, 8, 128)
  sc = np.maximum(np.abs(v).max(-1, keepdims=True), np.float32(1e-8)) / np.float32(127)
  np.testing.assert_array_equal(np.asarray(q), np.round(v / sc).astype(np.int8).reshape(5, 1024))
  np.testing.assert_allclose(np.asarray(s), sc[..., 0], rtol=1e-6)
  assert "mosaic_gpu" in _export(group_quantize, S(x.shape, x.dtype))


@mg.mgpu_kernel(out_shape=lambda x: S((2, x.shape[1] // 2), x.dtype))
def column_sums_reshaped(x, out):
  s = ml.sum(x[...], axis=0)          # a column vector: one value per column, 1-D
  out[...] = s.reshape(2, x.shape[1] // 2)


def test_a_column_vector_reshaped_goes_through_smem():
  """A 1-D vector of a tile's columns has no size-1 axis in registers: its elements' positions in the
  scratch are their own indices (the GPU lowering once put the tile's dropped axis back in front)."""
  x = rand.normal(rand.key(0), (8, 256), F32)
  np.testing.assert_allclose(column_sums_reshaped(x, interpret=True), np.asarray(x).sum(0).reshape(2, 128),
                             rtol=1e-5, atol=1e-5)
  assert "relayoutstore" in column_sums_reshaped.typed_ir(S(x.shape, x.dtype))
  assert "mosaic_gpu" in _export(column_sums_reshaped, S(x.shape, x.dtype))


@mg.mgpu_kernel(out_shape=lambda x, s: S((x.size // 2, 2), x.dtype))
def reshape_too_large(x, s, out):
  y = x[...] * s[...][:, None]
  out[...] = y.reshape((x.size // 2, 2))


def test_a_reshape_scratch_too_large_for_smem_names_the_reshape():
  expect(reshape_too_large, [S((64, 1024), F32), S((64,), F32)], mg.SmemCapacityError,
         "y.reshape((x.size // 2, 2))",
         "the kernel's SMEM needs 262144 bytes (reshape scratch 256 KiB, plus barriers and alignment), more"
         " than the 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use",
         hint="reshape fewer rows per program: the largest buffer, reshape scratch, holds the whole tile a"
              " reshape moves between threads (a row-wise tile: reduced or broadcast along its rows); or"
              " reshape before the reduction or broadcast, or outside the kernel (free in XLA)")


def _signed_codes(p):
  p = np.asarray(p).astype(np.int32)
  lo, hi = p & 15, p >> 4
  return np.stack([np.where(lo > 7, lo - 16, lo), np.where(hi > 7, hi - 16, hi)], -1)


def _codes_close(got, want):
  """Integer codes equal but for at most one step in one place in a thousand (division rounding)."""
  diff = np.abs(got - want)
  assert diff.max() <= 1 and np.count_nonzero(diff) <= max(1, diff.size // 1000), (np.count_nonzero(diff), diff.max())


@pytest.mark.gpu
def test_row_wise_reshapes_on_the_gpu_match_interpret_mode():
  p = rand.randint(rand.key(1), (64, 128), 0, 256, jnp.int32).astype(jnp.uint8)
  s = rand.uniform(rand.key(2), (64,), F32)
  for kernel in (unpack_int4_row_scales, unpack_int4_scaled_first):
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(p, s)), np.asarray(kernel(p, s, interpret=True)))
  # The GPU's float32 division is not IEEE's (benchmarks/probe_division.py: within an ulp or two), so
  # scales max / 7 differ in their last bit, and a quotient that lands within an ulp of k + 0.5 can round
  # the other way: scales compare to 1e-6, codes to within one step in a few places. A layout bug moves
  # whole rows or columns, which this still sees.
  x = rand.normal(rand.key(0), (64, 256), F32)
  (p_gpu, s_gpu), (p_int, s_int) = jax.jit(quantize_pack_int4)(x), quantize_pack_int4(x, interpret=True)
  _codes_close(_signed_codes(p_gpu), _signed_codes(p_int))
  np.testing.assert_allclose(np.asarray(s_gpu), np.asarray(s_int), rtol=1e-6)
  x = rand.normal(rand.key(4), (32, 512), F32)
  _codes_close(_signed_codes(jax.jit(quantize_pack_int4_loop)(x)), _signed_codes(quantize_pack_int4_loop(x, interpret=True)))
  x = rand.normal(rand.key(0), (64, 1024), F32)
  (q_gpu, s_gpu), (q_int, s_int) = jax.jit(group_quantize)(x), group_quantize(x, interpret=True)
  _codes_close(np.asarray(q_gpu, np.int32), np.asarray(q_int, np.int32))
  np.testing.assert_allclose(np.asarray(s_gpu), np.asarray(s_int), rtol=1e-6)
  x = rand.normal(rand.key(0), (8, 256), F32)
  np.testing.assert_allclose(np.asarray(jax.jit(column_sums_reshaped)(x)), np.asarray(x).sum(0).reshape(2, 128),
                             rtol=1e-5, atol=1e-5)



# ---------------------------------------------------------------- reshapes of tensor-core results
# An ml.dot result lives in the WGMMA layout; a reshape of it (an int4-packing epilogue, a flat store)
# was MG204 ("meets a tensor-core result, so it must be 2-D ..."), and now goes through SMEM too.
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1] // 2), jnp.uint8),
                grid=lambda a, b, *, wgs: (a.shape[0] // (64 * wgs),), block=lambda a, b, *, wgs: 128 * wgs)
def gemm_int4_epilogue(a, b, out, *, wgs: ml.constexpr):
  i = ml.program_id(0)
  m = 64 * wgs
  a_s = ml.smem((m, 64), jnp.float16)
  b_s = ml.smem((64, 128), jnp.float16)
  ml.copy(a.at[ml.ds(i * m, m), :], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  q = ml.clip(ml.round(acc), -8, 7).astype(jnp.int32)
  pairs = q.reshape(m * 64, 2)
  byte = (pairs[:, 0] & 0xF) | ((pairs[:, 1] & 0xF) << 4)
  out.at[ml.ds(i * m, m), :][...] = byte.reshape(m, 64).astype(jnp.uint8)


def _gemm_int4_reference(a, b):
  acc = np.asarray(a.astype(F32)) @ np.asarray(b.astype(F32))
  q = np.clip(np.round(acc), -8, 7).astype(np.int32).reshape(a.shape[0], -1, 2)
  return ((q[..., 0] & 15) | ((q[..., 1] & 15) << 4)).astype(np.uint8)


@pytest.mark.parametrize("wgs", [1, 2])
def test_a_tensor_core_result_reshaped_in_the_epilogue_goes_through_smem(wgs):
  a = (rand.normal(rand.key(0), (256, 64), F32) * 0.3).astype(jnp.float16)
  b = (rand.normal(rand.key(1), (64, 128), F32) * 0.3).astype(jnp.float16)
  got = gemm_int4_epilogue(a, b, wgs=wgs, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _gemm_int4_reference(a, b))
  assert "mosaic_gpu" in _export(gemm_int4_epilogue, S(a.shape, a.dtype), S(b.shape, b.dtype), wgs=wgs)


@pytest.mark.gpu
@pytest.mark.parametrize("wgs", [1, 2])
def test_a_tensor_core_reshape_on_the_gpu_matches_numpy(wgs):
  a = (rand.normal(rand.key(0), (256, 64), F32) * 0.3).astype(jnp.float16)
  b = (rand.normal(rand.key(1), (64, 128), F32) * 0.3).astype(jnp.float16)
  got = jax.jit(lambda a, b: gemm_int4_epilogue(a, b, wgs=wgs))(a, b)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(gemm_int4_epilogue(a, b, wgs=wgs, interpret=True)))

# ---------------------------------------------------------------- gathers of rows not a multiple of 32 wide
@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype), grid=lambda t, ids: (ids.shape[0] // 4,))
def embed_rows(t, ids, out):
  i = ml.program_id(0)
  r = ids.at[ml.ds(i * 4, 4)][...]
  out.at[ml.ds(i * 4, 4), :][...] = t[r, :]


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype), grid=lambda t, ids: (ids.shape[0] // 4,))
def embed_rows_as_hinted(t, ids, out):
  i = ml.program_id(0)
  r = ids.at[ml.ds(i * 4, 4)][...]
  v = t[r[:, None], ml.arange(4096)[None, :]]
  out.at[ml.ds(i * 4, 4), ml.ds(0, 4096)].store(v, mask=ml.arange(4096)[None, :] < 4095)


def test_a_gather_of_rows_4095_wide_hints_a_padded_index_grid_that_works():
  """The hint was 'take a window t.at[:, ml.ds(c, 32)] that stays inside the rows', which no window
  of a 4095-wide row's tail does; it now writes the padded index grid and the masked store."""
  specs = [S((100, 4095), jnp.bfloat16), S((8,), jnp.int32)]
  expect(embed_rows, specs, mg.LayoutError, "t[r, :]",
         "this gather of shape (4, 4095) spreads each row's index along the row: that needs columns a multiple"
         " of 32 (one per lane of a warp), and rows a multiple of 4 unless the columns are a multiple of 128",
         hint="take 4096 columns and drop the extra ones at the store: v = t[ids[:, None], ml.arange(4096)[None, :]]"
              " (columns past the row's end clamp to its last), then out.at[rows, ml.ds(0, 4096)].store(v,"
              " mask=ml.arange(4096)[None, :] < 4095); or pad the table's rows to a multiple of 32 elements"
              " outside the kernel (jnp.pad)")
  t = rand.normal(rand.key(0), (100, 4095), jnp.bfloat16)
  ids = rand.randint(rand.key(1), (8,), 0, 100, jnp.int32)
  np.testing.assert_array_equal(np.asarray(embed_rows_as_hinted(t, ids, interpret=True)), np.asarray(t[ids]))
  assert "mosaic_gpu" in _export(embed_rows_as_hinted, *specs)


# ---------------------------------------------------------------- a Triton block mask over a whole-row view
@mg.mgpu_kernel(out_shape=lambda l: S((l.shape[0],), F32), grid=lambda l: (l.shape[0],))
def row_sums_block_mask(l, out):
  r = ml.program_id(0)
  offs = ml.arange(4096)
  v = l.at[r, :].load(mask=offs < l.shape[1], other=0.0)
  out[r] = ml.sum(v.astype(jnp.float32))


@mg.mgpu_kernel(out_shape=lambda l: S((l.shape[0],), F32), grid=lambda l: (l.shape[0],))
def row_sums_block_mask_as_hinted(l, out):
  r = ml.program_id(0)
  offs = ml.arange(4096)
  v = l.at[r, ml.ds(0, 4096)].load(mask=offs < l.shape[1], other=0.0)
  out[r] = ml.sum(v.astype(jnp.float32))


def test_a_block_mask_longer_than_a_whole_row_view_hints_the_wider_window():
  """Was 'the shapes do not broadcast' with NumPy's broadcasting rules as the hint, which do not
  say that the window itself may run past the row's end under the mask."""
  expect(row_sums_block_mask, [S((3, 4095), jnp.bfloat16)], mg.ShapeMismatchError, "l.at[r, :].load(",
         "ml.load's mask of shape (4096,) is longer than l.at[r, :] of shape (4095,) (axis 0: 4096 elements,"
         " the window 4095)",
         hint="make the window the mask's size: a masked window of a GMEM array may run past its end, and the"
              " mask keeps the elements there off: l.at[r, ml.ds(0, 4096)]")
  l = rand.normal(rand.key(0), (3, 4095), jnp.bfloat16)
  np.testing.assert_allclose(np.asarray(row_sums_block_mask_as_hinted(l, interpret=True)),
                             np.asarray(l.astype(F32)).sum(1), rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- Triton's row pointer: x_ptr + row * stride
@mg.mgpu_kernel(out_shape=lambda l: S((l.shape[0],), F32), grid=lambda l: (l.shape[0],))
def row_pointer(l, out):
  r = ml.program_id(0)
  offs = ml.arange(4096)
  v = ml.load(l + r * l.shape[1] + offs, mask=offs < l.shape[1], other=0.0)
  out[r] = ml.sum(v.astype(jnp.float32))


def test_a_ref_plus_a_run_time_row_offset_is_pointer_arithmetic():
  """Was '+ works on register values' with the hint 'read it into registers first: l[...]', which
  adds the offset to l's values; the row's window is what Triton's pointer describes."""
  expect(row_pointer, [S((3, 4095), jnp.bfloat16)], mg.KernelTypeError, "l + r * l.shape[1]",
         "+ works on register values, got l (GMEM ref) plus the offset r * l.shape[1]: a ref is not a pointer,"
         " so it does not move by an offset",
         hint="index l by row and column (refs have no strides: l's rows are its first index):"
              " ml.load(l.at[r, offs], mask=offs < l.shape[1], other=0.0); to add to l's values, read it first:"
              " l[...] + r * l.shape[1]")   # (probe 41t: the user's row and columns, was the generic windows)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype), grid=(1,))
def block_pointer(x, out):
  pid = ml.program_id(0)
  out[...] = ml.load(x + pid * 128 + ml.arange(128))


def test_a_1d_ref_plus_a_program_offset_hints_the_block_window():
  expect(block_pointer, [S((1024,), F32)], mg.KernelTypeError, "x + pid * 128",
         "+ works on register values, got x (GMEM ref) plus the offset pid * 128: a ref is not a pointer, so"
         " it does not move by an offset",
         hint="index the window each step needs instead of moving x: a block, x.at[ml.ds(start, n)].load(mask=mask,"
              " other=0.0) (for x_ptr + start + ml.arange(n); in a loop over k, start = k * BLOCK for Triton's"
              " ptrs += BLOCK); one element, x[i]; to add to x's values, read it first: x[...] + pid * 128")
