"""Static safety: every Mosaic GPU mistake is caught before IR, at the user's line.

One test per check added or tightened for it (class, code, line, column, message),
the regressions the fuzzer (tests/test_fuzz.py) and the H200 found, and one-pass
reporting of every independent mistake of a kernel. Each bad kernel marks the
offending text; `where` finds its line and column in this file.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend.ops import elementwise_checks
from mgpu_dsl.frontend.dtypes import DType
from locate import builds, expect, where  # noqa: F401

S = jax.ShapeDtypeStruct
F32, F16, BF16, I8, I32, BOOL = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int8, jnp.int32, jnp.bool_


# ---------------------------------------------------------------------------- bool in memory
# Bool arrays are one byte an element (jax's layout): refs and SMEM buffers of bool hold bytes
# (tests/test_bool_io.py has the rest); these were MG106 until then.
@mg.mgpu_kernel(out_shape=lambda x: x)
def bool_smem(x, out):
  mask = ml.smem((128,), jnp.bool_)
  mask[...] = x[...] > 0
  out[...] = ml.where(mask[...], x[...], 0.0)


def test_smem_buffer_of_bool_holds_a_mask():
  x = rand.normal(rand.key(0), (128,), F32)
  np.testing.assert_array_equal(bool_smem(x, interpret=True), np.where(x > 0, x, 0))


@mg.mgpu_kernel(out_shape=lambda m: S(m.shape, jnp.float32))
def bool_gmem_read(m, out):
  out[...] = ml.where(m[...], 1.0, 0.0)


def test_reading_a_bool_array_works():
  m = rand.bernoulli(rand.key(1), 0.5, (128,))
  np.testing.assert_array_equal(bool_gmem_read(m, interpret=True), np.asarray(m, np.float32))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_))
def bool_gmem_write(x, out):
  out[...] = x[...] > 0


def test_writing_a_bool_array_works():
  x = rand.normal(rand.key(2), (128,), F32)
  got = bool_gmem_write(x, interpret=True)
  assert got.dtype == jnp.bool_
  np.testing.assert_array_equal(got, x > 0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def bool_into_inferred_smem(x, out):
  buf = ml.smem((128,))
  buf[...] = x[...] > 0
  out[...] = ml.where(buf[...], x[...], -1.0)


def test_storing_a_mask_into_an_inferred_buffer_makes_it_bool():
  assert "bool" in bool_into_inferred_smem.typed_ir(S((128,), F32))
  x = rand.normal(rand.key(3), (128,), F32)
  np.testing.assert_array_equal(bool_into_inferred_smem(x, interpret=True), np.where(x > 0, x, -1))


@mg.mgpu_kernel(out_shape=lambda m: S(m.shape, jnp.int8))
def bool_tma(m, out):
  buf = ml.smem((128,))
  ml.copy(m, buf)
  out[...] = buf[...].astype(jnp.int8)


def test_tma_copy_of_a_bool_array_moves_its_bytes():
  builds(bool_tma, S((128,), BOOL))
  m = rand.bernoulli(rand.key(4), 0.5, (128,))
  np.testing.assert_array_equal(bool_tma(m, interpret=True), np.asarray(m, np.int8))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int8))
def mask_as_int8(x, out):
  m = x[...] > 0
  out[...] = m.astype(jnp.int8)


def test_masks_stored_as_int8_build():
  builds(mask_as_int8, S((128,), F32))


# ---------------------------------------------------------------------------- 8-bit types
@mg.mgpu_kernel(out_shape=lambda x: x)
def int8_add(x, out):
  out[...] = x[...] + 1


def test_8bit_arithmetic_wraps_as_jnps():
  """It was MG106 (no 8-bit register arithmetic); probe 38g: computed in 32 bits, wrapped back."""
  x = jnp.arange(-64, 64, dtype=I8) * 2
  np.testing.assert_array_equal(np.asarray(int8_add(x, interpret=True)), np.asarray(x + 1))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def int8_bitwise_and_equality(x, out):
  y = (x[...] & 3) ^ x[...]
  out[...] = ml.where((y == 0) | (x[...] != 1), 1.0, 2.0)


def test_8bit_bitwise_ops_and_equality_build():
  builds(int8_bitwise_and_equality, S((128,), I8))
  builds(int8_bitwise_and_equality, S((128,), jnp.uint8))


@mg.mgpu_kernel(out_shape=lambda x: x)
def int8_where(x, out):
  out[...] = ml.where(x[...] == 0, x[...], 1)


def test_where_on_8bit_values_selects_in_32_bits():
  x = jnp.arange(-64, 64, dtype=I8)
  np.testing.assert_array_equal(int8_where(x, interpret=True), jnp.where(x == 0, x, 1).astype(I8))
  builds(int8_where, S((128,), I8))


# ---------------------------------------------------------------------------- casts
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float8_e4m3fn))
def int_to_f8(x, out):
  out[...] = x[...].astype(jnp.float8_e4m3fn)


def test_cast_from_wide_int_to_8bit_float_builds_as_the_two_step_cast():
  # it was MG106 hinting the two steps through float32; since probe 30c the lowering takes them
  x = jnp.arange(-64, 64, dtype=I32) * 9
  np.testing.assert_array_equal(np.asarray(int_to_f8(x, interpret=True)).astype(np.float32),
                                np.asarray(int_to_f8_via_f32(x, interpret=True)).astype(np.float32))
  builds(int_to_f8, S((128,), I32))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float8_e4m3fn))
def int_to_f8_via_f32(x, out):
  out[...] = x[...].astype(jnp.float32).astype(jnp.float8_e4m3fn)


def test_cast_to_8bit_float_through_float32_builds():
  builds(int_to_f8_via_f32, S((128,), I32))
  builds(int_to_f8_via_f32, S((128,), I8))


@mg.mgpu_kernel(out_shape=lambda x: x)
def scalar_f16_to_bf16(x, out):
  s = ml.program_id(0).astype(jnp.float16)
  t = s.astype(jnp.bfloat16)
  out[...] = x[...]


def test_scalar_cast_between_floats_of_one_width_builds():
  """Was MG106 (scalars between floats of one width): it goes through float32, exactly."""
  builds(scalar_f16_to_bf16, S((128,), F32))


@pytest.mark.parametrize("src,dst,scalar,ok", [
    (DType.i32, DType.f8e4m3, False, True), (DType.i16, DType.f8e5m2, False, True),   # through f32 (probe 30c)
    (DType.i8, DType.f8e4m3, False, True), (DType.f32, DType.f8e4m3, False, True),
    (DType.f16, DType.bf16, False, True), (DType.f16, DType.bf16, True, True),
    (DType.f8e4m3, DType.f8e5m2, True, False), (DType.f32, DType.bool_, False, False),
    (DType.bool_, DType.f32, False, True), (DType.i32, DType.f8e4m3, True, False),   # no scalar f8 on the GPU
], ids=str)
def test_cast_table(src, dst, scalar, ok):
  assert (elementwise_checks.cast_problem(src, dst, scalar=scalar) is None) == ok


@mg.mgpu_kernel(out_shape=lambda x: x)
def arange_f8(x, out):
  r = ml.arange(128, jnp.float8_e4m3fn)


def test_arange_of_8bit_float_is_rejected():
  expect(arange_f8, [S((128,), F32)], mg.UnsupportedDtypeError, "ml.arange(",
         "ml.arange cannot produce float8_e4m3fn: it makes integers, float32, float16 or bfloat16")


# ---------------------------------------------------------------------------- TMA limits
@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_box_too_big(x, out):
  buf = ml.smem((8, 512), jnp.float32)
  ml.copy(x, buf)
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x, at: S((8, 512), x.dtype))
def tma_box_at_a_read_start(x, at, out):
  buf = ml.smem((8, 512), jnp.float32)
  ml.copy(x.at[:, ml.ds(at[0], 512)], buf)
  out[...] = buf[...]


def test_tma_box_over_256_elements_is_rejected():
  """A last axis past the box is one box of (pieces, width) since probe 56c (a leading one is copied in pieces of
  256 since probe 52i: test_probe52i.py); at a start read from data, which no piece is known to divide, it stays
  MG401."""
  x = np.arange(8 * 512, dtype=np.float32).reshape(8, 512)
  np.testing.assert_array_equal(tma_box_too_big(x, interpret=True), x)
  expect(tma_box_at_a_read_start, [S((8, 1024), F32), S((1,), jnp.int32)], mg.TmaLimitError, "ml.copy(x.at[",
         "TMA copies move at most 256 elements along each dimension; this window is (8, 512)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_box_256(x, out):
  buf = ml.smem((256,), jnp.float32)
  ml.copy(x, buf)
  ml.copy(buf, out)


def test_tma_box_of_256_elements_builds():
  builds(tma_box_256, S((256,), F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_rank_unit_dim(x, out):
  buf = ml.smem((2, 2, 2, 2, 1, 16))
  ml.copy(x.at[:, :, :, :, 0:1, :], buf)


def test_tma_rank_counts_size_one_windows_of_larger_dimensions():
  expect(tma_rank_unit_dim, [S((2, 2, 2, 2, 4, 16), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies move at most 5 dimensions; copying this window of x.at[:, :, :, :, 0:1, :]"
         " (shape (2, 2, 2, 2, 4, 16)) needs 6")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_rank_squeezed(x, out):
  buf = ml.smem((2, 2, 2, 2, 16))
  ml.copy(x.at[:, :, 1, :, :, 1, :], buf)


def test_tma_rank_counts_integer_indexed_dimensions():
  expect(tma_rank_squeezed, [S((2, 2, 2, 2, 2, 4, 16), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies move at most 5 dimensions; copying this window of x.at[:, :, 1, :, :, 1, :]"
         " (shape (2, 2, 2, 2, 2, 4, 16)) needs 6")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_rank_unit_array_dims(x, out):
  buf = ml.smem((1, 2, 2, 2, 2, 16))
  ml.copy(x, buf)
  ml.copy(buf, out)


def test_tma_rank_ignores_dimensions_of_size_one():
  builds(tma_rank_unit_array_dims, S((1, 2, 2, 2, 2, 16), F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_minor_8_bytes(x, out):
  buf = ml.smem((16, 2), jnp.float32)     # (32 elements: too few to go through registers, probe 47d)
  ml.copy(x, buf)


def test_tma_minor_extent_must_be_16_bytes():
  expect(tma_minor_8_bytes, [S((16, 2), F32)], mg.TmaLimitError, "ml.copy(x, buf)",
         "TMA copies need the last dimension to span a multiple of 16 bytes; 2 x 4 bytes = 8")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_gmem_stride(x, out):
  buf = ml.smem((8, 4), jnp.float32)
  ml.copy(x.at[:, 0:4], buf)


def test_tma_gmem_rows_must_be_16_bytes_apart():
  expect(tma_gmem_stride, [S((8, 6), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies need x.at[:, 0:4]'s rows to be a multiple of 16 bytes apart; its last"
         " dimension is 6 x 4 bytes")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_column(x, out):
  buf = ml.smem((128,), jnp.float32)
  ml.copy(x.at[:, 0], buf)


def test_tma_window_must_keep_the_last_dimension():
  expect(tma_column, [S((128, 4), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies need the last dimension of x.at[:, 0] to be contiguous, but it is indexed by"
         " a single element")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_smem_inner_slice(x, out):
  buf = ml.smem((8, 64), jnp.float32)
  ml.copy(x, buf.at[:, 0:32])


def test_tma_smem_window_must_be_contiguous():
  expect(tma_smem_inner_slice, [S((8, 32), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies need a contiguous SMEM window; buf.at[:, 0:32] slices an inner dimension")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_smem_misaligned(x, out):
  buf = ml.smem((33, 4), jnp.float32)
  ml.copy(x, buf.at[1:33])


def test_tma_smem_window_must_start_at_128_bytes():
  e = expect(tma_smem_misaligned, [S((32, 4), F32)], mg.TmaLimitError, "ml.copy(",
             "TMA copies need the SMEM window to start at a multiple of 128 bytes; buf.at[1:33]"
             " starts 16 bytes into buf")
  assert "pad its inner dimensions" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def tma_smem_dynamic_misaligned(x, out):
  buf = ml.smem((2, 2, 4), jnp.float32)
  ml.copy(x, buf.at[ml.program_id(0)])


def test_tma_smem_window_with_a_dynamic_start_must_step_by_128_bytes():
  expect(tma_smem_dynamic_misaligned, [S((2, 4), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies need the SMEM window to start at a multiple of 128 bytes;"
         " buf.at[ml.program_id(0)] moves by 32 bytes per step of its dynamic index along dimension 0")


@mg.mgpu_kernel(out_shape=lambda x: S((2,) + x.shape, x.dtype), grid=(2,))
def tma_smem_stages(x, out):
  i = ml.program_id(0)
  buf = ml.smem((2, 32, 4), jnp.float32)
  ml.copy(x, buf.at[i])
  ml.copy(buf.at[i], out.at[i])


def test_tma_smem_windows_on_128_byte_boundaries_build():
  builds(tma_smem_stages, S((32, 4), F32))


# (a pipelined buffer of 32 bytes was MG401 here; its stages are padded now: tests/test_stage_padding.py)


# ---------------------------------------------------------------------------- static indexing
@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def index_past_end(x, out):
  out[...] = x.at[8][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def slice_past_end(x, out):
  out[...] = x.at[0, 64:192][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def ds_past_end(x, out):
  out[...] = x.at[0, ml.ds(64, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def too_many_indices(x, out):
  out[...] = x.at[0, 0, 0][...]


@pytest.mark.parametrize("kernel,at,message", [
    (index_past_end, "x.at[8]", "index 8 is out of bounds for dimension 0 of x (size 8)"),
    (slice_past_end, "x.at[0, 64:192]", "slice 64:192 is out of bounds for dimension 1 of x (size 128)"),
    (ds_past_end, "x.at[0, ml.ds(64, 128)]", "ml.ds(64, 128) is out of bounds for dimension 1 of x (size 128)"),
    (too_many_indices, "x.at[0, 0, 0]", "too many indices for x of rank 2: got 3"),
], ids=lambda v: getattr(v, "__name__", "") if callable(v) else None)
def test_static_out_of_bounds_indexing_is_rejected(kernel, at, message):
  expect(kernel, [S((8, 128), F32)], mg.IndexOutOfBoundsError, at, message)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def cta_past_cluster(x, out):
  buf = ml.smem((128,), jnp.float32)
  out[...] = ml.cluster_ref(buf, 2)[...]


def test_static_cta_index_outside_the_cluster_is_rejected():
  expect(cta_past_cluster, [S((128,), F32)], mg.IndexOutOfBoundsError, "ml.cluster_ref(",
         "CTA 2 is outside the cluster's 2 CTAs along axis 0")


# ---------------------------------------------------------------------------- SMEM capacity
LIMIT = 227 * 1024 - 16      # 227 KiB a CTA, less Mosaic GPU's static SMEM (measured: frontend/hw.py)


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_exact(x, out, *, n: ml.constexpr):
  big = ml.smem((n,), jnp.float32)
  big.at[0:128][...] = x[...]
  out[...] = big.at[0:128][...]


def test_smem_capacity_is_227_kib_less_16_bytes():
  builds(smem_exact, S((128,), F32), n=LIMIT // 4)
  expect(smem_exact, [S((128,), F32)], mg.SmemCapacityError, "ml.smem((n,), jnp.float32)",
         f"the kernel's SMEM needs {LIMIT + 4} bytes (big {LIMIT + 4} bytes, plus barriers and alignment),"
         f" more than the {LIMIT} bytes (227 KiB less 16 bytes) a kernel's buffers can use", n=LIMIT // 4 + 1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_with_barrier(x, out, *, n: ml.constexpr):
  big = ml.smem((n,), jnp.float32)
  ml.copy(x, big.at[0:128])
  out[...] = big.at[0:128][...]


def test_smem_capacity_counts_barriers_and_1024_byte_alignment():
  # One TMA load site: an 8-byte barrier, then the buffer at the next 1024-byte boundary.
  builds(smem_with_barrier, S((128,), F32), n=(LIMIT - 1024) // 4)
  expect(smem_with_barrier, [S((128,), F32)], mg.SmemCapacityError, "ml.smem((n,), jnp.float32)",
         f"the kernel's SMEM needs {LIMIT + 4} bytes (big {LIMIT + 4 - 1024} bytes, plus barriers and alignment),"
         f" more than the {LIMIT} bytes (227 KiB less 16 bytes) a kernel's buffers can use", n=(LIMIT - 1024) // 4 + 1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_padding(x, out, *, n: ml.constexpr):
  small = ml.smem((128,), jnp.float32)
  big = ml.smem((n,), jnp.float32)
  small[...] = x[...]
  big.at[0:128][...] = x[...]
  out[...] = small[...] + big.at[0:128][...]


def test_smem_capacity_counts_the_1024_byte_boundary_of_each_live_buffer():
  # small (512 bytes) and big are live together: big starts at 1024, or small at the first 1024-byte
  # boundary after big. A big of 226 KiB leaves small room after it; 4 bytes more push small to
  # 227 KiB, past the limit, though the bytes themselves (231940) would fit.
  assert (LIMIT - 1024) // 4 < 226 * 256
  builds(smem_padding, S((128,), F32), n=226 * 256)
  with pytest.raises(mg.SmemCapacityError):
    smem_padding.check(S((128,), F32), n=226 * 256 + 1)


# ---------------------------------------------------------------------------- launch config
def _copy_kernel(**launch):
  @mg.mgpu_kernel(out_shape=lambda x: x, **launch)
  def copy(x, out):
    out[...] = x[...]
  return copy


@pytest.mark.parametrize("launch,message", [
    (dict(block=96), "block must be a multiple of 128 threads (one warpgroup) between 128 and 1024, got 96"),
    (dict(block=2048), "block must be a multiple of 128 threads (one warpgroup) between 128 and 1024, got 2048"),
    (dict(block=lambda x: x.shape[0] // 2), "block must be a multiple of 128 threads (one warpgroup) between 128"
                                            " and 1024, got 64"),
    (dict(grid=(0,)), "grid must be 1 to 3 positive ints, got (0,)"),
    (dict(grid=(3,), cluster=(2,)), "grid (3, 1, 1) is not divisible by cluster (2, 1, 1) along x"),
    (dict(grid=(32,), cluster=(32,)), "a cluster holds at most 16 CTAs on Hopper, got (32, 1, 1)"),
], ids=lambda v: re.sub(r" at 0x[0-9a-f]+", "", str(v)))  # stable ids: pytest-xdist workers compare them
def test_launch_config_errors(launch, message):
  k = _copy_kernel(**launch)
  with pytest.raises(mg.LaunchConfigError) as info:
    k.check(S((128,), F32))
  e = info.value
  assert (e.code, e.message) == ("MG007", message)
  assert (e.lineno, e.col_offset) == where(k, "def copy(x, out):")


def test_block_callable_gets_the_inputs_and_the_constexprs_it_names():
  @mg.mgpu_kernel(out_shape=lambda x, **meta: x, block=lambda x, *, wgs: 128 * wgs)
  def copy(x, out, *, wgs: ml.constexpr):
    out[...] = x[...]
  assert "/2wg>" in copy.typed_ir(S((256,), F32), wgs=2)
  with pytest.raises(mg.SignatureError) as info:     # a callable that fails: at the decorator
    _copy_kernel(block=lambda x: x.shape[7]).check(S((128,), F32))
  assert "the block callable failed" in info.value.message


# ---------------------------------------------------------------------------- not expressible
@mg.mgpu_kernel(out_shape=lambda x: x)
def plain_copy(x, out):
  out[...] = x[...]


def test_blackwell_dtypes_are_not_kernel_dtypes():
  with pytest.raises(mg.SignatureError) as info:
    plain_copy.check(S((128,), jnp.float8_e8m0fnu))
  assert info.value.message == ("plain_copy: input 0 (x) has dtype float8_e8m0fnu, which kernels do"
                                " not support")
  assert "float8_e4m3fn" in info.value.hint


@mg.mgpu_kernel(out_shape=lambda x: x)
def f4_smem(x, out):
  buf = ml.smem((128,), jnp.float4_e2m1fn)


def test_blackwell_4bit_smem_is_not_expressible():
  e = expect(f4_smem, [S((128,), F32)], mg.UnsupportedDtypeError, "ml.smem(",
             "ml.smem: float4_e2m1fn is not a kernel dtype")
  assert e.code == "MG106" and "uint8" in e.hint and "two a byte" in e.hint     # packed (probe 33d)
