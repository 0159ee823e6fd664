"""Mistakes and habits a new user brings (found by porting Triton and Pallas kernels as a
newcomer would): each gets a KernelError at the user's line, in the user's words, with a hint,
and what the docs promise works."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from mlir_barriers import named_barriers

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- Python ints that do not fit 32 bits
@mg.mgpu_kernel(out_shape=lambda n: n, grid=(1,))
def add_constant(n, out, *, c: ml.constexpr):
  out[...] = n[...] + c


@pytest.mark.parametrize("dtype,c", [(jnp.int32, 2 ** 31 - 1), (jnp.int32, -2 ** 31), (jnp.uint32, 2 ** 32 - 1),
                                     (jnp.int16, 70000), (jnp.float32, 2 ** 40)], ids=str)
def test_python_ints_in_range_wrap_like_jnp(dtype, c):
  n = jnp.arange(256, dtype=dtype)
  want = (np.asarray(n).astype(np.int64) + c).astype(np.dtype(dtype)) if dtype != jnp.float32 else \
      np.asarray(n) + np.float32(c)
  np.testing.assert_array_equal(add_constant(n, c=c, interpret=True), want)


@pytest.mark.parametrize("dtype,c,kind", [(jnp.int32, 2 ** 32 + 5, "int32"), (jnp.int32, -2 ** 31 - 1, "int32"),
                                          (jnp.uint32, 2 ** 32, "uint32"), (jnp.int8, 2 ** 40, "int32")], ids=str)
def test_python_ints_past_32_bits_are_rejected(dtype, c, kind):
  """Once 2**32 + 5 silently became 5 (JAX raises OverflowError for it)."""
  expect(add_constant, [S((256,), dtype)], mg.KernelTypeError, "n[...] + c",
         f"+ uses the Python int {c}, which does not fit in {kind}: kernels compute in 32 bits (a larger"
         f" constant would silently lose its high bits)", c=c,
         hint=f"compute in int64, which holds {c}: n[...].astype(jnp.int64) + {c} (then .astype(...) back to the"
              " type you store)")


# ---------------------------------------------------------------- reshaping a row-wise tile
@mg.mgpu_kernel(out_shape=lambda x, s: S((x.size,), x.dtype), grid=(1,))
def scale_flat(x, s, out):
  y = x[...] * s[...][:, None]
  out[...] = y.reshape((x.size,))


def test_reshaping_a_row_wise_tile_goes_through_smem():
  """Once: 'y of shape (2048,) is reduced or broadcast along an axis', naming the wrong shape; then
  MG204 at the reshape; since probe 30a the reshape moves the tile's elements through SMEM."""
  specs = [S((8, 256), jnp.float32), S((8,), jnp.float32)]
  scale_flat.check(*specs)
  x = rand.normal(rand.key(0), (8, 256), jnp.float32)
  s = jnp.arange(8, dtype=jnp.float32)
  np.testing.assert_allclose(scale_flat(x, s, interpret=True), (x * s[:, None]).reshape(-1), rtol=1e-6)


# ---------------------------------------------------------------- Python lists
@mg.mgpu_kernel(out_shape=lambda x: S((4,), jnp.float32), grid=(1,))
def append_sums(x, out, *, concat: ml.constexpr = False):
  sums = []
  for c in ml.static_range(4):
    if concat:
      sums = sums + (ml.sum(x.at[ml.ds(c * 256, 256)][...]),)
    else:
      sums.append(ml.sum(x.at[ml.ds(c * 256, 256)][...]))
  for c in ml.static_range(4):
    out[c] = sums[c]


def test_list_append_in_an_unrolled_loop_builds_the_list():
  """Once: 'sums has no attribute append' with the hint 'check the spelling'; then MG003 ("lists in a kernel
  are fixed once built"); now `sums.append(v)` binds sums to a new list, as `sums += [v]` does (probe 38j)."""
  x = rand.normal(rand.key(0), (1024,), jnp.float32)
  want = np.asarray(x).reshape(4, 256).sum(1)
  np.testing.assert_allclose(append_sums(x, concat=True, interpret=True), want, rtol=1e-5)
  np.testing.assert_allclose(append_sums(x, interpret=True), want, rtol=1e-5)


# ---------------------------------------------------------------- Python calls on static values
def _half(n):
  return n // 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def static_calls(x, out):
  s = 1.0 / math.sqrt(x.shape[1]) + np.sqrt(4.0) * _half(x.shape[0]) + max(x.shape[0], 3)
  out[...] = x[...] * s


def test_python_functions_of_static_values_run_while_tracing():
  """docs/language.md promises it; once every call but a builtin's was 'not supported'."""
  x = rand.normal(rand.key(1), (8, 256), jnp.float32)
  s = 1.0 / np.sqrt(256) + 2.0 * 4 + 8
  np.testing.assert_allclose(static_calls(x, interpret=True), np.asarray(x) * np.float32(s), rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def numpy_habits(x, out, *, fail: ml.constexpr = "jnp"):
  if fail == "jnp":
    out[...] = np.exp(x[...], out=x[...])     # (np.exp(v) computes as jnp.exp since probe 47b; its out= is named)
  else:
    out[...] = x[...] + np.zeros((8, 256))[0, 0] + _half("eight")


def test_a_numpy_function_on_a_register_tensor_names_the_ml_function():
  expect(numpy_habits, [S((8, 256), jnp.float32)], mg.KernelTypeError, "np.exp",
         "np.exp's out= has no counterpart in a kernel, where np.exp computes as ml.exp",
         hint="a kernel writes a result by storing it: out[...] = np.exp(...)")


def test_static_calls_that_fail_or_return_arrays_are_located():
  e = expect(numpy_habits, [S((8, 256), jnp.float32)], mg.KernelTypeError, "np.zeros",
             "np.zeros(...) returned an array of shape (8, 256) while tracing; a kernel's tensors are built with"
             " ml.* functions", fail="np")
  assert e.hint == "write ml.zeros((8, 256), jnp.float32)"


# ---------------------------------------------------------------- Triton's arange(start, stop)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def add_offsets(x, out, *, start: ml.constexpr = 0):
  pid = ml.program_id(0)
  offs = pid * 256 + ml.arange(start, start + 256)
  out.at[ml.ds(pid * 256, 256)][...] = x.at[ml.ds(pid * 256, 256)][...] + offs.astype(jnp.float32)


@pytest.mark.parametrize("start", [0, 3])
def test_arange_takes_trions_start_and_stop(start):
  x = jnp.zeros((1024,), jnp.float32)
  np.testing.assert_array_equal(add_offsets(x, start=start, interpret=True), np.arange(1024) + start)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def empty_arange(x, out):
  out[...] = x[...] + ml.arange(8, 8).astype(jnp.float32)


def test_an_empty_arange_is_located():
  expect(empty_arange, [S((256,), jnp.float32)], mg.KernelTypeError, "ml.arange(8, 8)",
         "ml.arange(8, 8) is empty: stop must be above start",
         hint="ml.arange(start, stop) holds stop - start values, e.g. ml.arange(0, 128)")


# ---------------------------------------------------------------- the decorator and the call
def test_an_unknown_decorator_option_is_located_at_the_keyword():
  with pytest.raises(mg.SignatureError) as e:
    @mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,), num_warps=4)
    def copy(x, out):
      out[...] = x[...]
  line = test_an_unknown_decorator_option_is_located_at_the_keyword.__code__.co_firstlineno + 2
  assert (e.value.lineno, e.value.message) == (line, "@mgpu_kernel has no option num_warps=")
  assert e.value.hint == "threads per CTA are block= (a multiple of 128: num_warps=4 is block=128)"
  with pytest.raises(mg.SignatureError, match="did you mean block="):
    mg.mgpu_kernel(out_shape=lambda x: x, blocks=128)(static_calls.fn)


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def two_outputs_one_param(x, out):
  out[...] = x[...]


def test_out_shape_with_more_outputs_than_parameters_says_so():
  with pytest.raises(mg.SignatureError) as e:
    two_outputs_one_param.check(S((256,), jnp.float32))
  assert e.value.message == ("two_outputs_one_param was called with 1 input and out_shape describes 2 outputs:"
                             " 3 ref parameters, but two_outputs_one_param has 2 (x, out)")


# ---------------------------------------------------------------- shifts past the bit width
@mg.mgpu_kernel(out_shape=lambda n: n, grid=(1,))
def shift_left(n, out, *, c: ml.constexpr):
  out[...] = n[...] << c


@pytest.mark.parametrize("dtype,c,bits", [(jnp.int32, 32, 32), (jnp.int16, 20, 16), (jnp.uint32, -1, 32)], ids=str)
def test_a_static_shift_past_the_bit_width_is_jnps(dtype, c, bits):
  n = (jnp.arange(256, dtype=jnp.int32) * 977).astype(dtype)        # (was MG003; since probe 28e jnp's 0)
  np.testing.assert_array_equal(shift_left(n, c=c, interpret=True), n << c)


def test_a_shift_within_the_bit_width_matches_numpy():
  n = jnp.arange(256, dtype=jnp.int32)
  np.testing.assert_array_equal(shift_left(n, c=31, interpret=True), np.asarray(n) << 31)


# ---------------------------------------------------------------- tensor-core tiles and warpgroups
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), jnp.float32), block=256)
def small_tile_two_warpgroups(a, b, out):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


def test_a_dot_tile_too_short_for_the_warpgroups_is_computed_whole_by_each():
  """Once a LayoutError saying the dot's own result 'meets a tensor-core result', then MG501 asking for
  block=128: each warpgroup now computes the 64-row dot whole (tests/test_probe35a.py runs it)."""
  a = jnp.arange(64 * 64, dtype=jnp.float32).reshape(64, 64) % 7 - 3
  got = small_tile_two_warpgroups(a.astype(jnp.float16), a.T.astype(jnp.float16), interpret=True)
  np.testing.assert_array_equal(got, a @ a.T)
  assert "wgmma/whole" in small_tile_two_warpgroups.typed_ir(*[S((64, 64), jnp.float16)] * 2)


# ---------------------------------------------------------------- windows strided in their last dimension
@mg.mgpu_kernel(out_shape=lambda x: x)
def swap_pairs(x, out):
  """x (n, d, 2): the interleaved halves of RoPE; each view's elements are 2 apart."""
  out.at[:, :, 0][...] = x.at[:, :, 1][...]
  out.at[:, :, 1][...] = x.at[:, :, 0][...]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], x.dtype))
def scaled_evens(x, out):
  v = x.at[:, :, 0][...]
  out[...] = v / ml.max(v, axis=1)[:, None]          # a row-wise tile from a strided window


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:1], x.dtype))
def short_column(x, out):
  out[...] = x.at[:, 1][...] * 2.0


def _pairs(shape=(8, 256, 2)):
  return rand.uniform(rand.key(3), shape, jnp.float32) + 0.5


def test_windows_strided_in_their_last_dimension_move_element_by_element():
  """Once an InternalError (MLIR: 'vector.load ... most minor memref dim must have unit stride')
  at .check, while interpret mode ran them."""
  x = _pairs()
  np.testing.assert_array_equal(swap_pairs(x, interpret=True), np.asarray(x)[:, :, ::-1])
  v = np.asarray(x)[:, :, 0]
  np.testing.assert_allclose(scaled_evens(x, interpret=True), v / v.max(1, keepdims=True), rtol=1e-6)
  for k in (swap_pairs, scaled_evens):
    text = k.mlir(S(x.shape, x.dtype))
    assert "vector<4xf32>" not in text and "vector<2xf32>" not in text


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:1], x.dtype))
def short_smem_column(x, out):
  buf = ml.smem(x.shape, x.dtype)
  ml.copy(x, buf)
  out[...] = buf.at[:, 1][...] * 2.0


def test_a_short_vector_of_a_strided_window_computes_and_an_smem_one_is_located():
  """A GMEM one is read padded to 128 elements since probe 51g (it was this MG204, whose hint padded it); an SMEM
  buffer's cannot run past its end, and keeps the MG204 at the read."""
  x = np.random.default_rng(5).standard_normal((64, 2)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(short_column(x, interpret=True)), x[:, 1] * 2.0, rtol=1e-6)
  jax.export.export(jax.jit(short_column), platforms=["cuda"])(S((64, 2), jnp.float32))
  expect(short_smem_column, [S((64, 2), jnp.float32)], mg.LayoutError, "buf.at[:, 1][...]",
         "buf.at[:, 1][...] of shape (64,) comes from or goes to a window strided in its last dimension (its"
         " elements are not next to each other), and such a window moves a multiple of 128 elements, one per"
         " thread", hint="move a window of a multiple of 128 elements (more rows at once), or lay the array out with"
                         " this dimension last")


@pytest.mark.gpu
def test_strided_windows_on_the_gpu_match_interpret_mode():
  x = _pairs()
  np.testing.assert_array_equal(jax.jit(swap_pairs)(x), swap_pairs(x, interpret=True))
  np.testing.assert_allclose(jax.jit(scaled_evens)(x), scaled_evens(x, interpret=True), rtol=1e-6)


# ---------------------------------------------------------------- size-1 axes around a tile
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[2],), jnp.float32))
def column_sums_of_a_slab(x, out):
  out[...] = ml.sum(x[...].reshape((x.shape[1], x.shape[2])), axis=0)     # x (1, m, n)


def test_a_tile_read_with_a_size_1_axis_and_reshaped_2d_reduces():
  """It was MG204 ('reshape to 2-D first', which the kernel had done); since probe 44a the reshape that drops
  the size-1 axis is one the relayout moves, and the column sums compute."""
  x = np.random.default_rng(0).standard_normal((1, 128, 256)).astype(np.float32)
  got = column_sums_of_a_slab(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(got, x[0].sum(0), rtol=1e-5, atol=1e-5)
  text = jax.export.export(jax.jit(column_sums_of_a_slab), platforms=["cuda"])(S(x.shape, jnp.float32)).mlir_module()
  assert "mosaic_gpu" in text


# ---------------------------------------------------------------- a 0-d output every program writes
@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.float32), grid=(4,))
def total_by_every_program(x, out):
  out[...] = ml.sum(x[...])


def test_every_program_writing_a_0d_output_is_a_race_found_when_compiling():
  """Once only interpret mode saw it: the grid's write check skipped 0-d outputs."""
  expect(total_by_every_program, [S((128,), jnp.float32)], mg.RaceError, "out[...] =",
         "program (0, 0, 0) and program (1, 0, 0) both write out: programs run in no fixed order, so the"
         " result depends on timing",
         hint="write it from one program (if ml.program_id(0) == 0: ...), or add every program's share with"
              " ml.atomic_add")


# ---------------------------------------------------------------- 1-D vectors of any multiple of 8
@mg.mgpu_kernel(out_shape=lambda x: x)
def double_vector(x, out):
  out[...] = x[...] * 2.0


@pytest.mark.parametrize("n", [1000, 64, 256])
def test_vectors_of_a_multiple_of_8_elements_interpret_and_build(n):
  x = jnp.arange(n, dtype=jnp.float32)
  np.testing.assert_array_equal(double_vector(x, interpret=True), np.asarray(x) * 2)
  double_vector.check(S((n,), jnp.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 64, 256])
def test_vectors_of_a_multiple_of_8_elements_on_the_gpu(n):
  x = jnp.arange(n, dtype=jnp.float32)
  np.testing.assert_array_equal(jax.jit(double_vector)(x), np.asarray(x) * 2)


# ---------------------------------------------------------------- argmax and argmin of rows holding NaN
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), jnp.int32),) * 2)
def arg_extremes(x, hi, lo):
  v = x[...]
  hi[...] = ml.argmax(v, 1)
  lo[...] = ml.argmin(v, 1)


def _with_nans():
  x = np.random.RandomState(0).randn(8, 128).astype(np.float32)
  x[0, 5] = x[3, 100] = x[3, 7] = x[5, 127] = np.nan
  return jnp.asarray(x)


def test_argmax_and_argmin_point_at_the_first_nan_as_numpy_does():
  """Once the index was the row length (out of range): NaN == max is never true. (numpy and
  XLA on the CPU give the first NaN; XLA on the H200 gave a later one for a row of two NaNs.)"""
  x = _with_nans()
  hi, lo = arg_extremes(x, interpret=True)
  np.testing.assert_array_equal(hi, np.argmax(np.asarray(x), 1))
  np.testing.assert_array_equal(lo, np.argmin(np.asarray(x), 1))


@pytest.mark.gpu
def test_argmax_and_argmin_with_nans_on_the_gpu():
  x = _with_nans()
  hi, lo = jax.jit(arg_extremes)(x)
  np.testing.assert_array_equal(hi, np.argmax(np.asarray(x), 1))
  np.testing.assert_array_equal(lo, np.argmin(np.asarray(x), 1))


# ---------------------------------------------------------------- launch limits and calls with specs
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1, x.shape[0] // 128))
def rows_along_y(x, out):
  r = ml.ds(ml.program_id(1) * 128, 128)
  out.at[r][...] = x.at[r][...] * 2.0


def test_a_grid_past_cudas_limit_along_y_is_rejected_at_the_grid():
  with pytest.raises(mg.LaunchConfigError) as e:
    rows_along_y.check(S((70000 * 128,), jnp.float32))
  assert e.value.message == "grid (1, 70000, 1) has 70000 CTAs along y; a launch has at most 65535 there"
  rows_along_y.check(S((65535 * 128,), jnp.float32))


def test_a_vmap_batch_past_the_limit_of_its_grid_axis_runs_in_chunks():
  """(MG007 before probe 46f: the batch runs as a jax.lax.map over launches of 65535, test_probe46f.py)"""
  x = jnp.zeros((70000, 128), jnp.float32)
  text = jax.export.export(jax.jit(jax.vmap(rows_along_y)), platforms=["cuda"])(x).mlir_module()
  assert text.count("stablehlo.custom_call @mosaic_gpu") == 2


def test_calling_a_kernel_on_specs_says_to_use_check():
  with pytest.raises(mg.SignatureError) as e:
    rows_along_y(S((256,), jnp.float32), interpret=True)
  assert e.value.message == "rows_along_y: input 0 is a jax.ShapeDtypeStruct; a call runs the kernel on arrays"
  assert ".check(*specs)" in e.value.hint


@mg.mgpu_kernel(out_shape=lambda n: n, grid=(1,))
def divide_by(n, out, *, c: ml.constexpr, op: ml.constexpr = "//"):
  out[...] = n[...] // c if op == "//" else n[...] % c


@pytest.mark.parametrize("op", ["//", "%"])
def test_a_static_integer_division_by_zero_is_rejected(op):
  at = "n[...] // c" if op == "//" else "n[...] % c"
  expect(divide_by, [S((256,), jnp.int32)], mg.KernelTypeError, at,
         f"{op} by 0 on int32: integer division by zero is undefined on the GPU", c=0, op=op,
         hint=f"divide by a non-zero constant; a divisor that can be 0 must be replaced where it is:"
              f" ml.where(d == 0, 0, n[...] {op} ml.where(d == 0, 1, d)) (the outer ml.where sets the lanes where"
              f" d == 0, to 0 or the value you want)")


def test_numpy_scalars_are_python_numbers_as_constexprs():
  x = jnp.arange(256, dtype=jnp.int32)
  np.testing.assert_array_equal(divide_by(x, c=np.int32(7), interpret=True), np.asarray(x) // 7)


def test_an_int64_tensor_takes_64_bit_python_ints():
  """With x64 on; the 32-bit range rule was applied to int64 operands too."""
  before = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", True)
  try:
    n = jnp.arange(256, dtype=jnp.int64)
    np.testing.assert_array_equal(add_constant(n, c=3 * 10 ** 9, interpret=True), np.asarray(n) + 3 * 10 ** 9)
  finally:
    jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize("shape", [(0,), (0, 128), (128, 0)], ids=str)
def test_a_register_tensor_of_no_elements_is_reported_by_check_and_a_call_returns_the_empty_output(shape):
  """Once interpret mode returned an empty array while .check raised an InternalError. A call whose
  outputs all have no elements now returns them without a launch (tests/test_probe29b.py)."""
  expect(double_vector, [S(shape, jnp.float32)], mg.LaunchConfigError, "out_shape=",   # no kernel, as the call (probe 35f)
         f"every output of this call is empty (out_shape gives {shape}): a call on arrays returns them without a"
         f" launch, whatever the grid, and there is no kernel to check or build",
         hint="check or build a specialisation whose outputs have elements")
  out = double_vector(jnp.zeros(shape, jnp.float32), interpret=True)
  assert out.shape == shape and out.dtype == jnp.float32


# ---------------------------------------------------------------- exports the kernel cannot take
def test_an_export_with_a_symbolic_dimension_says_kernels_are_concrete():
  n = jax.export.symbolic_shape("n")[0]
  with pytest.raises(mg.SignatureError, match="symbolic dimension n; a kernel is compiled for concrete shapes"):
    jax.export.export(jax.jit(double_vector), platforms=["cuda"])(S((256, n), jnp.float32))


def test_an_export_for_cuda_and_cpu_names_the_cpu_as_the_problem():
  with pytest.raises(mg.NoGpuError, match="has no lowering for the other platforms"):
    jax.export.export(jax.jit(double_vector), platforms=["cuda", "cpu"])(S((256,), jnp.float32))


# ---------------------------------------------------------------- runtime scalars
@mg.mgpu_kernel(out_shape=lambda x, a: x)
def scale_by(x, a: ml.scalar, out):
  out[...] = x[...] * a


def test_a_bool_for_an_ml_scalar_is_a_bool_scalar():
  """Once refused (MG006, then a hint to pass int(a)); a bool is a bool scalar, as jnp.bool_(True), so
  multiplying a float32 tensor by it takes the float's dtype, as jnp's promotion (probe 33a; it was MG104)."""
  x = jnp.ones((256,), jnp.float32)
  np.testing.assert_array_equal(scale_by(x, 3.0, interpret=True), np.full(256, 3.0, np.float32))
  np.testing.assert_array_equal(scale_by(x, True, interpret=True), x * jnp.bool_(True))
  np.testing.assert_array_equal(scale_by(x, False, interpret=True), x * jnp.bool_(False))


# ---------------------------------------------------------------- signed zeros in max and min
@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, S((8,), a.dtype), S((8,), a.dtype)))
def extremes(a, b, hi, lo, row_hi, row_lo):
  x, y = a[...], b[...]
  hi[...] = ml.maximum(x, y)
  lo[...] = ml.minimum(x, y)
  row_hi[...] = ml.max(x, axis=1)
  row_lo[...] = ml.min(x, axis=1)


def test_max_and_min_order_signed_zeros_as_the_gpu_and_jnp_do():
  """-0.0 < +0.0 (the GPU's maximumf); interpret mode once followed numpy's operand order."""
  a, b = np.zeros((8, 128), np.float32), np.zeros((8, 128), np.float32)
  a[0] = -0.0
  b[1] = -0.0
  a[2] = b[2] = -0.0
  a[3, 5] = np.nan
  a[5] = -0.0
  a[5, 3] = 0.0
  got = extremes(jnp.asarray(a), jnp.asarray(b), interpret=True)
  want = (jnp.maximum(a, b), jnp.minimum(a, b), jnp.max(a, 1), jnp.min(a, 1))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(np.signbit(np.asarray(g)), np.signbit(np.asarray(w)))


@mg.mgpu_kernel(out_shape=lambda x: S((32,), jnp.int32))
def histogram_in_output(x, out):
  out[...] = ml.zeros((32,), jnp.int32)
  for k in range(x.shape[0]):
    b = x[k]
    out[b] = out[b] + 1


def test_a_histogram_kept_in_its_output_counts_every_item():
  """Every thread reads and rewrites out[b]; without barriers a warp ahead read the next
  iteration's update (the compiled kernel had none)."""
  x = rand.randint(rand.key(3), (300,), 0, 32, jnp.int32)
  np.testing.assert_array_equal(histogram_in_output(x, interpret=True), np.bincount(np.asarray(x), minlength=32))
  assert len(named_barriers(histogram_in_output.mlir(S((300,), jnp.int32)))) >= 3     # 1 before the loop, 2 a trip


@pytest.mark.gpu
def test_gpu_histogram_kept_in_its_output_counts_every_item():
  x = rand.randint(rand.key(4), (3000,), 0, 32, jnp.int32)
  np.testing.assert_array_equal(np.asarray(histogram_in_output(x)), np.bincount(np.asarray(x), minlength=32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def per_head_state(x, out):
  st = [ml.zeros((128,), jnp.float32), ml.zeros((128,), jnp.float32)]     # a list literal
  for i in range(3):
    st = [st[h] + x[...] for h in ml.static_range(2)]                     # rebuilt by a comprehension
  new = []
  for h in ml.static_range(2):
    new = new + [st[h] * 2.0]
  out[...] = new[0] + new[1] + ml.zeros([128], jnp.float32)              # a list as a shape


def test_a_list_literal_is_a_list_carried_like_a_comprehension():
  """A list literal was traced as a tuple: 'st changes from a tuple of 2 values to a list of 2'."""
  np.testing.assert_array_equal(per_head_state(jnp.ones((128,), jnp.float32), interpret=True), np.full(128, 12.0))


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), jnp.float32))
def matmul_operator(a, b, out):      # (a and b read as float32: ml.dot reads float32 K-major, so @ stages b)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = a_s[...] @ b_s[...]


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), jnp.int32))
def matmul_operator_of_integers(a, b, out):
  out[...] = a[...] @ b[...]


def test_the_matmul_operator_computes_as_ml_dot_or_in_registers():
  """It hinted how to write ** instead; then ml.dot(a_s, b_s); since probe 48b a product of float tiles computes
  (float32 ones as TF32, b staged K-major); @ of int32 tiles kept the hint until probe 49b, which computes it in
  registers (jnp_einsum.chunked_product), wrapping in int32 as jnp's."""
  rng = np.random.default_rng(0)
  a, b = (jnp.asarray(rng.standard_normal((64, 64)), jnp.float32) for _ in range(2))
  np.testing.assert_allclose(np.asarray(matmul_operator(a, b, interpret=True)), np.asarray(a @ b), rtol=2e-2, atol=1e-1)
  i, j = (jnp.asarray(rng.integers(-2 ** 20, 2 ** 20, (64, 64)), jnp.int32) for _ in range(2))
  np.testing.assert_array_equal(np.asarray(matmul_operator_of_integers(i, j, interpret=True)), np.asarray(i @ j))


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def count_down_wrongly(x, s, out):
  v = x[...]
  for i in range(4, 0, s[...]):
    v = v * 2
  out[...] = v


def test_a_negative_runtime_step_is_reported_even_when_the_loop_would_be_empty():
  """range(4, 0, s) with s = -1 silently ran no trip (the loop was dropped while tracing)."""
  with pytest.raises(mg.InterpretError) as e:
    count_down_wrongly(jnp.ones(128, jnp.float32), jnp.int32(-1), interpret=True)
  assert "run-time step is -1" in e.value.message
  np.testing.assert_array_equal(count_down_wrongly(jnp.ones(128, jnp.float32), jnp.int32(1), interpret=True),
                                np.ones(128))


@mg.mgpu_kernel(out_shape=lambda x: x)
def unused_buffer(x, out):
  o_s = ml.smem((128,))
  out[...] = x[...]


def test_an_unused_buffer_says_it_is_unused():
  """It said no copy or store gives it a dtype, as if one were missing."""
  with pytest.raises(mg.DtypeInferenceError) as e:
    unused_buffer.check(S((128,), jnp.float32))
  assert e.value.message == "cannot infer the dtype of o_s: it is allocated but never used"
  assert e.value.hint.endswith("or remove it")


@mg.mgpu_kernel(out_shape=lambda x: x)
def missing_ml_functions(x, out, *, f: ml.constexpr = "scan"):
  if f == "scan":
    out[...] = ml.scan(x[...], axis=0)
  else:
    out[...] = ml.maximun(x[...], 0.0)


@pytest.mark.parametrize("f,hint", [("scan", "no ml.scan: ml.associative_scan(combine, (a, b), axis=1)"),
                                    ("typo", "did you mean ml.maximum?")])
def test_a_missing_ml_function_says_what_to_write(f, hint):
  """Both said 'check the spelling'."""
  with pytest.raises(mg.UnknownNameError) as e:
    missing_ml_functions.check(S((128,), jnp.float32), f=f)
  assert e.value.hint.startswith(hint)
