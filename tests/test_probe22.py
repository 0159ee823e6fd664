"""Probe 22 (helpers writing kernels from the docs: the Python of a kernel body, integer semantics):
`x.dtype == jnp.float32` was always False in a kernel (the static branch went the wrong way);
methods of static objects ("relu".startswith) were MG900; jnp.finfo(x.dtype), jnp.dtype("float16")
and astype("float16") were rejected; assert and raise on static values, exceptions and f-strings
were MG001; comparisons with a NumPy scalar of the other signedness wrapped it (uint16 > np.int16(-1)
was False); and messages that named `^` for `~`, AST classes for `is`/`in`, or a placeholder `x`."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x: x)
def by_dtype(x, out):
  v = x[...]
  if x.dtype == jnp.float32:
    v = v * 2
  elif v.dtype in (jnp.bfloat16, np.float16):
    v = v * 3
  else:
    v = v * 4
  if x.dtype != "float32" and x.dtype.name == "int32" and ml.int32 == x.dtype:
    v = v + 1
  out[...] = v


@pytest.mark.parametrize("dtype,factor", [(jnp.float32, 2), (jnp.bfloat16, 3), (jnp.float16, 3), (jnp.int32, 5)])
def test_dtype_comparisons_in_a_kernel_mean_what_they_mean_in_numpy(dtype, factor):
  x = jnp.arange(128).astype(dtype)
  got = by_dtype(x, interpret=True)
  want = x * factor if factor != 5 else x * 4 + 1
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def dtype_tools(x, out, *, mode: ml.constexpr = "relu"):
  v = x[...]
  if mode.startswith("re"):                       # a method of a static str
    v = ml.maximum(v, float(jnp.finfo(x.dtype).tiny))
  if jnp.issubdtype(x.dtype, jnp.floating):
    v = v.astype(jnp.dtype("float16")).astype("float32").astype(x.dtype)
  out[...] = v


def test_static_objects_and_numpy_dtype_tools_work_on_x_dtype():
  x = jnp.linspace(-2, 2, 128, dtype=F32)
  got = dtype_tools(x, interpret=True)
  want = jnp.maximum(x, jnp.finfo(F32).tiny).astype(jnp.float16).astype(F32)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(dtype_tools(x, mode="none", interpret=True), x.astype(jnp.float16).astype(F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def asserting(x, out, *, mode: ml.constexpr = "relu"):
  assert x.shape[0] % 128 == 0, f"rows must be a multiple of 128, got {x.shape[0]}"
  if mode not in ("relu", "none"):
    raise ValueError(f"unknown mode {mode!r}")
  out[...] = x[...] if mode == "none" else ml.maximum(x[...], 0.0)


def test_assert_and_raise_check_static_values_while_tracing():
  x = jnp.linspace(-1, 1, 128, dtype=F32)
  np.testing.assert_array_equal(asserting(x, interpret=True), jnp.maximum(x, 0))
  expect(asserting, [S((96,), F32)], mg.StaticAssertionError, "assert x.shape",
         "assert x.shape[0] % 128 == 0 failed: rows must be a multiple of 128, got 96")
  expect(asserting, [S((128,), F32)], mg.StaticAssertionError, "raise ValueError",
         "the kernel raised ValueError: unknown mode 'gelu'", mode="gelu")


@mg.mgpu_kernel(out_shape=lambda x: x)
def runtime_assert(x, out):
  v = x[...]
  assert ml.sum(v) > 0
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def runtime_raise(x, out):
  v = x[...]
  if ml.sum(v) > 0:
    raise ValueError("positive")
  out[...] = v


def test_assert_and_raise_of_run_time_values_are_rejected_with_what_to_write():
  expect(runtime_assert, [S((128,), F32)], mg.UnsupportedSyntaxError, "ml.sum(v) > 0",
         "assert of a run-time value is not supported in a kernel")
  expect(runtime_raise, [S((128,), F32)], mg.UnsupportedSyntaxError, "raise ValueError",
         "raise under a run-time condition is not supported in a kernel")


def compare_with(c):
  @mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
  def compare_scalar(x, out):            # c: a closure's NumPy scalar keeps its dtype (a constexpr would not)
    v = x[...]
    out[...] = (v > c).astype(jnp.int32) + (v == c).astype(jnp.int32) * 2
  return compare_scalar


@pytest.mark.parametrize("dtype,c", [(jnp.uint16, np.int16(-1)), (jnp.int16, np.uint16(40000)),
                                     (jnp.uint16, jnp.int16(-1)), (jnp.int8, np.uint8(200))])
def test_comparisons_with_a_numpy_scalar_of_the_other_signedness_promote_as_jnp(dtype, c):
  info = np.iinfo(dtype)
  x = jnp.asarray(np.array([0, 7, info.max, info.min] * 32).astype(dtype))
  got = compare_with(c)(x, interpret=True)
  want = (x > c).astype(jnp.int32) + (x == c).astype(jnp.int32) * 2
  np.testing.assert_array_equal(got, want)


def test_a_comparison_jnp_takes_to_64_bits_is_mg104_with_a_hint_that_works():
  expect(compare_with(np.int32(-1)), [S((128,), jnp.uint32)], mg.DtypeMismatchError, "v > c",
         "> on v (uint32) and the int32 scalar -1: a NumPy or JAX scalar keeps its dtype, and jnp computes"
         " these two in int64, which kernels do not have",
         hint="-1 is outside uint32: convert the value: v.astype(jnp.int32)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def invert_float(x, out):
  out[...] = ~x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def is_none(x, out, *, bias: ml.constexpr = None):
  v = x[...]
  if out is not None and v is not None and bias is None:
    v = v + 1.0
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def in_tuple(x, out):
  v = x[...]
  out[...] = ml.where(v in (1.0, 2.0), v, 0.0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def compare_int8(x, out):
  val = x[...]
  out[...] = (val > 3).astype(jnp.int32)


def test_operator_messages_name_the_operator_and_the_operand():
  expect(invert_float, [S((128,), F32)], mg.UnsupportedDtypeError, "~x",
         "~ needs an integer or boolean operand, got x[...] (float32)")
  expect(in_tuple, [S((128,), F32)], mg.UnsupportedSyntaxError, "v in",
         "`in` on a register tensor is not supported in a kernel",
         hint="test each value with ==: (v == 1.0) | (v == 2.0)")
  expect(compare_int8, [S((128,), jnp.int8)], mg.UnsupportedDtypeError, "val > 3",
         "> is not supported on int8: Hopper has no register arithmetic on 8-bit types",
         hint="upcast first: val.astype(jnp.int32), compute, then cast back")
  x = jnp.ones((128,), F32)
  np.testing.assert_array_equal(is_none(x, interpret=True), x + 1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def builtins_on_tensors(x, out):
  v = x[...]
  out[...] = round(v) + pow(v, 2)


def test_round_and_pow_of_a_tensor_are_numpys():
  x = jnp.linspace(-3, 3, 128, dtype=F32)
  np.testing.assert_allclose(builtins_on_tensors(x, interpret=True), jnp.round(x) + x ** 2, rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_condition(x, out):
  if x[0] :
    out[...] = x[...]
  else:
    out[...] = x[...] * 2


def test_an_int_scalar_condition_names_its_dtype_and_the_comparison():
  expect(int_condition, [S((128,), jnp.int32)], mg.KernelTypeError, "x[0]",
         "an if condition must be a Python value or a boolean scalar, got a int32 scalar",
         hint="compare it: if x[0] != 0:")


# ---------------------------------------------------------------- pipelines (probe of loops and clusters)
@mg.mgpu_kernel(out_shape=lambda x, st: S((32, 128), F32), grid=(1,))
def staged_step(x, st: ml.scalar, out, *, ws: ml.constexpr = False):
  x_s = ml.smem((32, 128))
  acc = ml.zeros((32, 128), F32)
  for t in ml.range(1, 8, st, stages=3, warp_specialize=ws):
    ml.copy(x.at[ml.ds(t * 32, 32)], x_s)
    acc = acc + x_s[...]
  out[...] = acc


@pytest.mark.parametrize("ws", [False, True])
def test_a_pipelined_loops_run_time_step_is_checked_positive(ws):
  """A negative step ran one trip silently; a step of 0 was an internal floor division by zero."""
  x = jnp.ones((256, 128), F32)
  np.testing.assert_array_equal(staged_step(x, jnp.int32(2), ws=ws, interpret=True), jnp.full((32, 128), 4.0))
  for st in (-1, 0):
    with pytest.raises(mg.InterpretError, match=f"this loop's run-time step is {st}: a loop counts upwards"):
      staged_step(x, jnp.int32(st), ws=ws, interpret=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, *, form: (2,), input_output_aliases={0: 0})
def persistent_in_place(x, out, *, form: ml.constexpr, ws: ml.constexpr = False):
  x_s, o_s = ml.smem((32, 128)), ml.smem((32, 128))
  if form == "stride":
    for t in ml.range(ml.program_id(0), x.shape[0] // 32, ml.num_programs(0), stages=2, warp_specialize=ws):
      ml.copy(x.at[ml.ds(t * 32, 32)], x_s)
      o_s[...] = x_s[...] * 3
      ml.copy(o_s, out.at[ml.ds(t * 32, 32)])
  else:
    for k in ml.range(x.shape[0] // 64, stages=2, warp_specialize=ws):
      t = ml.program_id(0) + k * ml.num_programs(0)
      ml.copy(x.at[ml.ds(t * 32, 32)], x_s)
      o_s[...] = x_s[...] * 3
      ml.copy(o_s, out.at[ml.ds(t * 32, 32)])


@pytest.mark.parametrize("form", ["stride", "count"])
@pytest.mark.parametrize("ws", [False, True])
def test_a_persistent_tile_by_tile_in_place_update_is_pipelined(form, ws):
  """MG502 (the trips' windows cannot meet: their stride is the grid, at least 1); with
  warp_specialize interpret mode also raised a race between a tile's load and another's store."""
  x = jax.random.normal(jax.random.key(0), (256, 128), F32)
  np.testing.assert_array_equal(persistent_in_place(x, form=form, ws=ws, interpret=True), x * 3)
  assert "mosaic_gpu" in jax.export.export(
      jax.jit(lambda x: persistent_in_place(x, form=form, ws=ws)), platforms=["cuda"])(S(x.shape, F32)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), input_output_aliases={0: 0})
def reads_a_neighbours_tile(x, out):
  x_s, o_s = ml.smem((32, 128)), ml.smem((32, 128))
  for t in ml.range(ml.program_id(0), 7, ml.num_programs(0), stages=2):
    ml.copy(x.at[ml.ds(t * 16, 32)], x_s)            # overlaps the previous trip's tile when the grid is 1
    o_s[...] = x_s[...] + 1
    ml.copy(o_s, out.at[ml.ds(t * 32, 32)])


def test_a_persistent_load_that_may_meet_an_earlier_trips_store_stays_rejected():
  expect(reads_a_neighbours_tile, [S((256, 128), F32)], mg.PipelineError, "ml.copy(x.at",
         "this pipelined load reads x, which the loop writes (through out, its alias): with stages=2 it is"
         " issued up to 1 trip(s) early, before those writes")


# ---------------------------------------------------------------- hints (probe of fused model kernels)
@mg.mgpu_kernel(out_shape=lambda g: S((g.shape[1],), F32), grid=lambda g: (ml.cdiv(g.shape[1], 64),))
def bias_grad(g, db):
  j = ml.program_id(0)
  c = j * 64 + ml.arange(64)
  v = g.at[:, ml.ds(j * 64, 64)].load(mask=c[None, :] < g.shape[1], other=0.0)
  ml.atomic_add(db.at[ml.ds(j * 64, 64)], ml.sum(v, axis=0))


@mg.mgpu_kernel(out_shape=lambda g: S((g.shape[1],), F32), grid=lambda g: (ml.cdiv(g.shape[1], 64),))
def bias_grad_masked(g, db):
  j = ml.program_id(0)
  c = j * 64 + ml.arange(64)
  v = g.at[:, ml.ds(j * 64, 64)].load(mask=c[None, :] < g.shape[1], other=0.0)
  ml.atomic_add(db.at[ml.ds(j * 64, 64)], ml.sum(v, axis=0), mask=c < g.shape[1])


@mg.mgpu_kernel(out_shape=lambda g: S((g.shape[1],), F32), grid=lambda g: (ml.cdiv(g.shape[1], 64),))
def bias_grad_scatter(g, db):          # the hint followed
  j = ml.program_id(0)
  c = j * 64 + ml.arange(64)
  v = g.at[:, ml.ds(j * 64, 64)].load(mask=c[None, :] < g.shape[1], other=0.0)
  ml.atomic_add(db.at[j * 64 + ml.arange(64)], ml.sum(v, axis=0))


def test_an_atomic_past_the_end_points_at_the_scatter_which_works():
  spec = [S((8, 130), F32)]
  expect(bias_grad, spec, mg.IndexOutOfBoundsError, "ml.atomic_add",
         "this register write touches db[128:192] in program (2, 0, 0), outside db's shape (130,)",
         hint="index the window with a tensor of positions (a scatter), whose updates past the end are dropped:"
              " ml.atomic_add(db.at[start + ml.arange(64)], value), start being the window's start")
  expect(bias_grad_masked, spec, mg.KernelTypeError, "ml.atomic_add", "ml.atomic_add takes no mask=")
  g = jax.random.normal(jax.random.key(1), (8, 130), F32)
  np.testing.assert_allclose(bias_grad_scatter(g, interpret=True), g.sum(0), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda p, b1, step: p)
def bias_correction(p, b1: ml.scalar, step: ml.scalar, out):
  out[...] = p[...] / (1.0 - b1 ** step)


@mg.mgpu_kernel(out_shape=lambda x, lab: S(lab.shape, jnp.int32))
def where_int8(x, lab, out):
  v = lab[...]
  out[...] = ml.where(v == -100, 0, v).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x, seed: x)
def float_seed(x, seed: ml.scalar, out):
  out[...] = ml.where(ml.rand(seed, ml.arange(128)) >= 0.5, x[...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), F32))
def slice_builtin(x, out):
  win = (ml.ds(0, 8), slice(None))
  out[...] = x.at[win][...]


def test_hints_name_the_operand_and_work_when_followed():
  expect(bias_correction, [S((128,), F32), S((), F32), S((), jnp.int32)], mg.UnsupportedSyntaxError, "b1 ** step",
         "b1 ** step: an exponent held in registers is supported on a Python-number base only (c ** t); the"
         " exponent of a register value must be a static number",
         hint="for b1 > 0: ml.exp2(step.astype(jnp.float32) * ml.log2(b1))")
  expect(where_int8, [S((128,), F32), S((128,), jnp.int8)], mg.UnsupportedDtypeError, "ml.where",
         "ml.where is not supported on int8: Hopper has no register arithmetic on 8-bit types",
         hint="upcast first: v.astype(jnp.int32), compute, then cast back")
  expect(float_seed, [S((128,), F32), S((), F32)], mg.KernelTypeError, "ml.rand",
         "a random seed must be a Python int or an int32/uint32/int64 scalar, got a scalar (float32)",
         hint="convert it: seed.astype(jnp.int32), or pass a Python int")
  x = jnp.arange(16 * 128, dtype=F32).reshape(16, 128)
  np.testing.assert_array_equal(slice_builtin(x, interpret=True), x[:8])


# ---------------------------------------------------------------- ragged and loops (probe of data-dependent kernels)
@mg.mgpu_kernel(out_shape=lambda ln: S((1,), jnp.int32))
def tuple_of_numbers_carried(ln, out):
  st = (0, 0)
  while st[0] < ln[0]:
    st = (st[0] + 1, st[1] + 2)
  out[0] = st[0] + st[1]


def test_a_tuple_of_numbers_is_carried_leaf_by_leaf():
  np.testing.assert_array_equal(tuple_of_numbers_carried(jnp.array([5], jnp.int32), interpret=True), [15])


@mg.mgpu_kernel(out_shape=lambda off, x: S((off.shape[0] - 1,), F32), grid=lambda off, x: (off.shape[0] - 1,))
def segment_sums(off, x, out):
  g = ml.program_id(0)
  acc = ml.zeros((128,), F32)
  for c in range(off[g], off[g + 1], 128):
    idx = c + ml.arange(128)
    acc = acc + x.at[ml.ds(c, 128)].load(mask=idx < off[g + 1], other=0.0)
  out[g] = ml.sum(acc)


def test_no_segments_is_no_launch_even_when_the_data_is_not_empty():
  off = jnp.zeros((1,), jnp.int32)
  for n in (0, 1000):
    assert segment_sums(off, jnp.ones((n,), F32), interpret=True).shape == (0,)
  with pytest.raises(mg.LaunchConfigError, match=r"every output of this call is empty \(or aliased to an input\): a"
                                                 " call on arrays returns them without a launch"):
    segment_sums.check(S((1,), jnp.int32), S((1000,), F32))


@mg.mgpu_kernel(out_shape=lambda off, x: S((1,), F32))
def int_start_float_sum(off, x, out):
  acc = 0
  for c in range(off[0], off[1]):
    acc = acc.astype(jnp.float32) + x[c]
  out[0] = acc


def test_a_carry_started_as_an_int_summing_floats_is_told_to_start_as_a_float():
  expect(int_start_float_sum, [S((2,), jnp.int32), S((8,), F32)], mg.LoopCarryTypeError, "acc = acc.astype",
         "acc enters the loop as scalar<int32> but an iteration makes it scalar<float32>",
         hint="start it as a float before the loop: acc = 0.0 (a Python int starts an int32 carry)")


@mg.mgpu_kernel(out_shape=lambda x: S((32, 128), F32))
def tile_sum(x, out, *, n: ml.constexpr):
  x_s = ml.smem((32, 128))                     # dtype from the copy in the loop
  acc = ml.zeros((32, 128), F32)
  for t in ml.range(n, stages=2):
    ml.copy(x.at[ml.ds(t * 32, 32)], x_s)
    acc = acc + x_s[...]
  out[...] = acc


def test_a_loop_of_no_trips_known_while_tracing_is_an_empty_sum():
  """Its buffer's dtype came only from the body, which is not traced: MG105 'never used'."""
  x = jnp.ones((128, 128), F32)
  np.testing.assert_array_equal(tile_sum(x, n=0, interpret=True), jnp.zeros((32, 128)))
  np.testing.assert_array_equal(tile_sum(x, n=2, interpret=True), jnp.full((32, 128), 2.0))
  assert "mosaic_gpu" in jax.export.export(jax.jit(lambda x: tile_sum(x, n=0)), platforms=["cuda"])(
      S(x.shape, F32)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda b: S((128, 64), F32), grid=(2,), cluster=(2,))
def multicast_wrong_axis(b, out):
  b_s = ml.smem((128, 64))
  ml.copy(b.at[:, :], b_s, multicast=1)
  out[...] = b_s[...]


def test_the_multicast_axis_hint_names_the_cluster_that_works():
  expect(multicast_wrong_axis, [S((128, 64), F32)], mg.ClusterRefError, "ml.copy(b.at",
         "multicast along axis 1, but the kernel's cluster is (2, 1, 1)",
         hint="launch with @mgpu_kernel(..., cluster=(1, 2)) or larger along that axis, or multicast along"
              " axis 0, where the cluster has 2 CTAs")


# ---------------------------------------------------------------- diagnostics (probe of the error format)
@ml.inline
def add_bias(v, b):
  return v + b


@mg.mgpu_kernel(out_shape=lambda x, b16: x)
def two_calls(x, b16, out):
  v = x[...]
  w = add_bias(v, 1.0)
  out[...] = add_bias(w, b16[...])


def test_a_mistake_in_a_helper_names_the_call_it_comes_from():
  with pytest.raises(mg.DtypeMismatchError) as info:
    two_calls.check(S((128,), F32), S((128,), jnp.float16))
  e = info.value
  assert e.message == "+ on v (float32) and b (float16): dtypes differ and are never converted implicitly"
  assert (e.lineno, e.col_offset) == where(add_bias, "v + b")
  line, col = where(two_calls, "add_bias(w")
  assert e.notes == (f"{two_calls.fn.__code__.co_filename}:{line}:{col}: in this call of add_bias",)


def test_ml_functions_and_helpers_outside_a_kernel_are_kernel_errors_at_the_call():
  with pytest.raises(mg.KernelTypeError, match="ml.exp can only be used inside an @mgpu_kernel function") as e:
    ml.exp(jnp.ones(4))
  assert e.value.lineno > 0 and e.value.filename == __file__
  with pytest.raises(mg.KernelTypeError, match="add_bias is an @ml.inline helper: call it from an @mgpu_kernel"):
    add_bias(1.0, 2.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def nested_def(x, out):
  def sq(v):
    return v * v
  lst = [x[...]]
  lst.append(x[...])
  out[...] = sq(lst[1])


def test_a_failed_statement_does_not_cascade_into_errors_about_what_it_would_have_bound():
  with pytest.raises(mg.KernelError) as e:
    nested_def.check(S((128,), F32))
  assert [type(x).__name__ for x in e.value.errors] == ["UnsupportedSyntaxError", "KernelTypeError"]
  assert "no .append" in e.value.errors[1].message


def test_a_lambda_kernel_is_told_to_be_a_def():
  with pytest.raises(mg.LaunchConfigError, match="a kernel must be a def"):
    mg.mgpu_kernel(lambda x, out: None, out_shape=lambda x: x)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def int_divide(x, y, out):
  out[...] = x[...] // y[...]


def test_an_interpreter_error_under_jit_is_not_logged_with_its_traceback(caplog):
  f = jax.jit(lambda a, b: int_divide(a, b, interpret=True))
  with pytest.raises(Exception, match=r"integer // by zero"):
    f(jnp.ones((128,), jnp.int32), jnp.zeros((128,), jnp.int32)).block_until_ready()
  assert not [r for r in caplog.records if "pure_callback failed" in r.getMessage()]


# ---------------------------------------------------------------- dtypes (probe of the dtype matrix)
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def mask_and_int(x, out):
  m = x[...] > 0
  out[...] = (m & 6) + (m | 2) * 10 + (m + 1) * 100


def test_a_boolean_meeting_a_python_int_computes_in_int32_as_jnp():
  x = jnp.array([-1.0, 0.0, 2.0, 3.0] * 32, F32)
  m = x > 0
  np.testing.assert_array_equal(mask_and_int(x, interpret=True), (m & 6) + (m | 2) * 10 + (m + 1) * 100)


_X64_SEED = """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, mgpu_dsl as mg
from mgpu_dsl import language as ml
SEED = 2 ** 40 + 7

@mg.mgpu_kernel(out_shape=lambda x, seed: x)
def noise_of(x, seed: ml.scalar, out):
    out[...] = ml.rand(seed, ml.arange(256))

@mg.mgpu_kernel(out_shape=lambda x: x)
def noise_fixed(x, out):
    out[...] = ml.rand(SEED, ml.arange(256))

x = jnp.zeros((256,), jnp.float32)
got = noise_of(x, jnp.int64(SEED), interpret=True)
np.testing.assert_array_equal(got, noise_fixed(x, interpret=True))
print("OK")
"""


def test_an_int64_seed_under_x64_is_its_two_halves(tmp_path):
  """It was MG003 (int32/uint32 only), though the docs offer jnp.int64 with x64."""
  import subprocess
  import sys
  script = tmp_path / "seed64.py"
  script.write_text(_X64_SEED)
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                     env={**__import__("os").environ, "MGPU_DSL_CACHE_DIR": "off"})
  assert r.stdout.strip().endswith("OK"), r.stdout + r.stderr


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] + 2, x.shape[1]), x.dtype))
def halo_rows(x, out):
  buf = ml.smem((x.shape[0] + 2, x.shape[1]), F32)
  ml.copy(x.at[ml.ds(-1, x.shape[0] + 2), :], buf)      # zeros above and below, read by TMA
  ml.copy(buf, out)


def test_a_copy_whose_constant_start_is_before_0_builds():
  """MG900 at export: a Python slice's -1 counted from the end."""
  x = jax.random.normal(jax.random.key(3), (16, 64), F32)
  np.testing.assert_array_equal(halo_rows(x, interpret=True), jnp.pad(x, ((1, 1), (0, 0))))
  halo_rows.check(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def masked_smem_8bit(x, out):
  buf = ml.smem((256,), x.dtype)
  ml.copy(x, buf)
  v = buf.load(mask=ml.arange(256) < 200, other=0)
  buf.store(v, mask=ml.arange(256) >= 100)           # a masked SMEM store of 8-bit values too
  out[...] = buf[...]


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8, jnp.float8_e4m3fn], ids=str)
def test_masked_smem_accesses_of_8_bit_values_select_in_32_bits(dtype):
  """MG106 'ml.where is not supported on int8', about an ml.where the user never wrote."""
  x = (jnp.arange(256) % 100).astype(dtype)
  want = x.at[200:].set(0)
  np.testing.assert_array_equal(np.asarray(masked_smem_8bit(x, interpret=True), np.float32),
                                np.asarray(want, np.float32))
  masked_smem_8bit.check(S(x.shape, dtype))


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_float_other(x, out):
  buf = ml.smem((256,), x.dtype)
  ml.copy(x, buf)
  out[...] = buf.load(mask=ml.arange(256) < 200, other=0.5)


def test_a_float_other_for_an_integer_smem_window_is_mg104_as_from_gmem():
  expect(smem_float_other, [S((256,), jnp.int32)], mg.DtypeMismatchError, "buf.load",
         "ml.load's other (0.5) is a float but buf is int32", hint="an integer of int32: other=0")


COEFFS = np.array([0.5, -1.0, 2.0], np.float32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def horner(x, out, *, c: ml.constexpr = (np.float32(1.0), np.float32(3.0))):
  v = x[...]
  acc = ml.zeros(v.shape, v.dtype) + COEFFS[0]
  for k in ml.static_range(1, 3):
    acc = acc * v + COEFFS[k]
  out[...] = acc * c[0] + c[1]


def test_numpy_scalars_from_arrays_and_constexpr_tuples_are_numbers():
  """`+ cannot take a Python float32`: NumPy scalars indexed out of arrays or tuples."""
  x = jnp.linspace(-2, 2, 128, dtype=F32)
  want = ((0.5 * x - 1.0) * x + 2.0) * 1.0 + 3.0
  np.testing.assert_allclose(horner(x, interpret=True), want, rtol=1e-6)


def test_an_autotuned_kernel_without_a_gpu_runs_the_first_config_that_builds():
  @mg.autotune(configs=[dict(bs=256), dict(bs=128)])
  @mg.mgpu_kernel(out_shape=lambda x, *, bs: x, grid=lambda x, *, bs: (x.shape[0] // bs,))
  def scale(x, out, *, bs: ml.constexpr):
    i = ml.program_id(0)
    out.at[ml.ds(i * bs, bs)][...] = x.at[ml.ds(i * bs, bs)][...] * 2
  x = jnp.arange(384, dtype=F32)
  np.testing.assert_array_equal(scale(x, interpret=True), x * 2)
  assert scale.best_config(x, interpret=True) == {"bs": 128}


def test_bench_wall_arguments_are_checked():
  with pytest.raises(mg.KernelTypeError, match="mg.bench_wall's iterations must be an int of at least 1, got 0"):
    mg.bench_wall(jnp.sin, jnp.ones(4), iterations=0)
  with pytest.raises(mg.KernelTypeError, match="each spec needs .shape and .dtype"):
    mg.check_specs(scale_kernel, [1024])


@mg.mgpu_kernel(out_shape=lambda x: x)
def scale_kernel(x, out):
  out[...] = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def arg_keepdims(x, out):
  v = x[...]
  out[...] = ml.argmax(v, axis=1, keepdims=True) + ml.argmin(v, axis=0, keepdims=True) * 100


def test_argmax_and_argmin_keep_their_axis_as_jnp():
  """keepdims was an unexpected keyword, with a hint (axis=None) that fails on 2-D tensors."""
  x = jax.random.normal(jax.random.key(4), (64, 128), F32)
  want = jnp.argmax(x, axis=1, keepdims=True) + jnp.argmin(x, axis=0, keepdims=True) * 100
  np.testing.assert_array_equal(arg_keepdims(x, interpret=True), want)


def test_a_misspelt_constexpr_at_a_call_is_reported_at_the_call():
  import inspect
  with pytest.raises(mg.SignatureError, match="has no constexpr parameter 'factor'") as info:
    tile_sum(jnp.ones((128, 128), F32), factor=3, interpret=True)
  line = inspect.currentframe().f_lineno - 1
  assert (info.value.filename, info.value.lineno) == (__file__, line)
  assert info.value.notes[0].endswith(": the kernel")


# ---------------------------------------------------------------- cross-CTA (probe of split work)
@mg.mgpu_kernel(out_shape=lambda x, *, other: (S((8,), F32),) * 2, grid=(8,))
def own_partial(x, acc, out, *, other: ml.constexpr):
  i = ml.program_id(0)
  ml.atomic_add(acc.at[i], ml.sum(x.at[ml.ds(i * 128, 128)][...]))
  out[i] = acc[(i + other) % 8]


def test_reading_back_only_what_this_program_adds_atomically_is_no_race():
  """Any read of an atomically updated output was a race, even of elements no other program touches."""
  x = jnp.arange(1024, dtype=F32)
  acc, out = own_partial(x, other=0, interpret=True)
  np.testing.assert_array_equal(acc, x.reshape(8, 128).sum(1))
  np.testing.assert_array_equal(out, acc)
  expect(own_partial, [S((1024,), F32)], mg.RaceError, "acc[(i + other) % 8]",
         "acc is read here while other programs may still be adding to it with atomics: programs run in no"
         " fixed order, so the value read depends on timing", other=1)


def test_a_run_time_shape_a_misplaced_cluster_and_reserved_names_are_launch_errors():
  @mg.mgpu_kernel(out_shape=lambda x, n: S((n,), F32), grid=(1,))
  def head(x, n: ml.scalar, out):
    out[...] = x.at[ml.ds(0, out.shape[0])][...]
  x = jnp.ones((256,), F32)
  with pytest.raises(mg.LaunchConfigError, match="out_shape gives an output whose shape holds a run-time value"):
    jax.jit(lambda x, n: head(x, n, interpret=True))(x, 128)
  for bad in (0, (), False):
    k = mg.mgpu_kernel(scale_kernel.fn, out_shape=lambda x: x, cluster=bad)
    with pytest.raises(mg.LaunchConfigError, match="cluster must be 1 to 3 positive ints"):
      k(x, interpret=True)
  aliased = mg.mgpu_kernel(scale_kernel.fn, out_shape=lambda x: x, input_output_aliases={np.int64(0): 0})
  np.testing.assert_array_equal(aliased(x, interpret=True), 2 * x)


@mg.mgpu_kernel(out_shape=lambda x: x)
def interpret_named(x, out, *, interpret: ml.constexpr = 1):
  out[...] = x[...] * interpret


@mg.mgpu_kernel(out_shape=lambda x: x)
def no_params():
  pass


def test_a_parameter_named_interpret_and_a_kernel_of_no_parameters_are_named():
  expect(interpret_named, [S((128,), F32)], mg.SignatureError, "interpret: ml",
         "a kernel parameter cannot be named interpret: kernel(..., interpret=True) is the call's switch to"
         " interpret mode")
  with pytest.raises(mg.SignatureError, match="no_params has no parameters"):
    no_params.check(S((128,), F32))


# ---------------------------------------------------------------- scans (probe of sequence kernels)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def scans_in_a_loop(x, out):
  for c in range(x.shape[0] // 128):
    v = x.at[ml.ds(c * 128, 128)][...]
    v = ml.cumsum(ml.cumsum(v, axis=0), axis=1)
    v = ml.cumsum(ml.cumsum(v, axis=0, reverse=True), axis=1, reverse=True)
    out.at[ml.ds(c * 128, 128)][...] = v


def test_scratches_of_one_loop_body_share_smem():
  """Four 64 KiB scan scratches in a runtime loop lived through the whole loop: MG402 (265728 bytes)."""
  x = jax.random.normal(jax.random.key(5), (256, 128), F32)
  t = x.reshape(2, 128, 128)
  t = jnp.cumsum(jnp.cumsum(t, 1), 2)
  t = jnp.flip(jnp.cumsum(jnp.flip(t, 1), 1), 1)
  t = jnp.flip(jnp.cumsum(jnp.flip(t, 2), 2), 2)
  np.testing.assert_allclose(scans_in_a_loop(x, interpret=True), t.reshape(256, 128), rtol=1e-3, atol=5e-2)
  scans_in_a_loop.check(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def clamp_low(x, out):
  lo = jnp.finfo(x.dtype).min
  out[...] = ml.maximum(x[...], lo) + np.finfo(np.float32).eps


@mg.mgpu_kernel(out_shape=lambda x: x)
def count_down(x, out):
  for c in range(3, -1, -1):
    out[...] = x[...]


def test_numpy_scalars_from_static_attributes_and_the_count_down_hint():
  x = jnp.array([-jnp.inf, 0.0, 1.0] + [2.0] * 125, F32)
  np.testing.assert_array_equal(clamp_low(x, interpret=True),
                                jnp.maximum(x, jnp.finfo(F32).min) + jnp.finfo(F32).eps)
  expect(count_down, [S((128,), F32)], mg.KernelTypeError, "range(3, -1, -1)",
         "range() in a kernel counts upwards: a step of -1 is not supported",
         hint="count upwards and compute the descending index inside: for k in range(n): c = n - 1 - k")


# ---------------------------------------------------------------- review of this session's changes
@ml.inline
def next_pow2(n):
  return 1 if n <= 1 else 2 * next_pow2((n + 1) // 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def uses_recursion(x, out, *, act: ml.constexpr = None):
  out[...] = x[...] * next_pow2(3)


def test_a_recursive_helper_and_a_helper_constexpr_have_a_disk_key():
  """value_text of a helper fingerprinted its helpers again, without end (RecursionError)."""
  from mgpu_dsl import deps as D
  assert D.value_text(next_pow2).startswith("inline:")
  assert D.Dependencies(uses_recursion.fn).fingerprint() is not None


HALF = {ml.float16, ml.bfloat16}
OFFSETS = {ml.float16: 100.0, ml.bfloat16: 100.0}


@mg.mgpu_kernel(out_shape=lambda x: x)
def dtype_sets(x, out):
  v = x[...].astype(jnp.float32)
  if x.dtype in HALF:
    v = v + OFFSETS[x.dtype]
  out[...] = v.astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_tuple_in_loop(x, out):
  tile = (128,)
  shp = (128,)
  acc = ml.zeros(tile, F32)
  for i in range(2):
    w = 128
    tile = (w,)
    v = x.at[ml.ds(i * 128, 128)][...]
    shp = v.shape
    acc = acc + v
  out.at[ml.ds(0, 128)][...] = acc + ml.zeros(shp, F32) + ml.zeros(tile, F32)
  out.at[ml.ds(128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def aliased_through_input(x, out):
  x[...] = x[...] + 1
  out = None


def test_review_of_the_sessions_changes():
  x = jnp.ones((128,), jnp.float16)
  np.testing.assert_array_equal(dtype_sets(x, interpret=True), x + 100)      # a set of DTypes finds x.dtype
  y = jnp.arange(256, dtype=F32)
  got = static_tuple_in_loop(y, interpret=True)
  np.testing.assert_array_equal(got[:128], y[:128] + y[128:])                 # tile, shp stayed static
  np.testing.assert_array_equal(aliased_through_input(y, interpret=True), y + 1)   # aliased: no MG602


@mg.mgpu_kernel(out_shape=lambda x: x)
def clamp_bf16(x, out):
  out[...] = ml.maximum(x[...], jnp.finfo(x.dtype).min) + jnp.finfo(x.dtype).eps


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def in_scalar(x, out):
  i = ml.program_id(0)
  out[...] = ml.where(i in (0, 1), 1, 0) + ml.zeros((128,), jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def round_digits(x, out):
  out[...] = round(x[...], 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def and_f8(x, out):
  out[...] = x[...] & x[...]


def test_docs_audit_bfloat16_finfo_and_hints():
  x = jnp.array([-jnp.inf, 0.0, 1.0] + [2.0] * 125, jnp.bfloat16)
  want = jnp.maximum(x, jnp.finfo(jnp.bfloat16).min) + jnp.finfo(jnp.bfloat16).eps
  np.testing.assert_array_equal(np.asarray(clamp_bf16(x, interpret=True), np.float32), np.asarray(want, np.float32))
  expect(in_scalar, [S((128,), F32)], mg.UnsupportedSyntaxError, "i in (0, 1)",
         "`in` on a scalar is not supported in a kernel", hint="test each value with ==: (i == 0) | (i == 1)")
  expect(round_digits, [S((128,), F32)], mg.KernelTypeError, "round(",
         "round(x, ndigits) of a register value: only round(x) (to whole numbers) is supported")
  expect(and_f8, [S((128,), jnp.float8_e5m2)], mg.UnsupportedDtypeError, "x[...] & x[...]",
         "& needs integer operands, got float8_e5m2")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,), input_output_aliases={0: 0})
def ws_reads_back(x, out, *, back: ml.constexpr):
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  for t in ml.range(8, 32, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds((t - back) * 64, 64)], x_s)
    o_s[...] = x_s[...] + 1
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])


def test_a_warp_specialised_loop_reading_back_an_earlier_trips_store_is_rejected():
  """The producer's TMA load of tile t - 8 did not wait for the consumers' TMA store of it (trip t - 8):
  a race on the GPU that check and export accepted (the software pipeline waits)."""
  expect(ws_reads_back, [S((32 * 64, 128), F32)], mg.WarpSpecializeError, "ml.copy(x.at",
         "this load reads x, which an earlier trip of this warp-specialised loop writes (through out, its"
         " alias): the producer's loads do not wait for the consumers' stores", back=8)
  x = jax.random.normal(jax.random.key(6), (32 * 64, 128), F32)
  got = ws_reads_back(x, back=-1, interpret=True)      # reading ahead (a tile later trips write) is fine
  t = x.reshape(32, 64, 128)
  want = jnp.concatenate([t[:8], t[9:] + 1, jnp.ones((1, 64, 128), F32)]).reshape(x.shape)
  np.testing.assert_array_equal(got, want)


@mg.mgpu_kernel(out_shape=lambda x, r: x, grid=lambda x, r: (x.shape[0] // 128,))
def permute_own_tile(x, r, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
  rows = r.at[ml.ds(i * 128, 128)][...]
  tile = out.at[ml.ds(i * 128, 128)]
  v = tile[rows, :]                                   # a gather of this program's own rows
  tile[...] = v


def test_a_gather_from_this_programs_own_window_of_an_output_is_no_certain_race():
  """The gather's window was taken as the whole output, read for certain: a compile-time MG951."""
  x = jax.random.normal(jax.random.key(7), (256, 64), F32)
  r = jnp.concatenate([jax.random.permutation(jax.random.key(8), 128)] * 2).astype(jnp.int32)
  want = jnp.concatenate([x[:128][r[:128]], x[128:][r[128:]]])
  np.testing.assert_array_equal(permute_own_tile(x, r, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda cache, new: cache, grid=lambda cache, new: (new.shape[0] // 8,),
                input_output_aliases={0: 0})
def append_rows(cache, new, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 8, 8), :][...] = new.at[ml.ds(i * 8, 8), :][...]


def test_an_aliased_kernel_with_no_programs_returns_its_input_unchanged():
  """MG007 'non-empty outputs would be left unwritten': an aliased output holds the input's values."""
  cache = jnp.arange(16 * 128, dtype=F32).reshape(16, 128)
  got = append_rows(cache, jnp.zeros((0, 128), F32), interpret=True)
  np.testing.assert_array_equal(got, cache)


def test_autotune_with_a_python_number_for_an_ml_scalar_and_a_symbolic_vmap_batch():
  @mg.autotune(configs=[dict(bm=64), dict(bm=128)])
  @mg.mgpu_kernel(out_shape=lambda x, a, *, bm: x, grid=lambda x, a, *, bm: (x.shape[0] // bm,))
  def scale(x, a: ml.scalar, out, *, bm: ml.constexpr):
    i = ml.program_id(0)
    out.at[ml.ds(i * bm, bm)][...] = x.at[ml.ds(i * bm, bm)][...] * a
  x = jnp.ones((256,), F32)
  assert scale.best_config(x, 2.0) == {"bm": 64}            # 'float' object has no attribute 'shape'
  b = jax.export.symbolic_shape("b")[0]
  with pytest.raises(mg.SignatureError, match="jax.vmap over a batch of symbolic size b"):
    jax.export.export(jax.jit(jax.vmap(scale_kernel)), platforms=["cuda"])(S((b, 128), F32))


# ---------------------------------------------------------------- second review
@mg.mgpu_kernel(out_shape=lambda x: (S((8,), F32),) * 2, grid=(8,))
def maybe_update_neighbour(x, acc, out):
  i = ml.program_id(0)
  s = ml.sum(x.at[ml.ds(i * 128, 128)][...])
  if s > 0.0:                                     # data-dependent: may happen
    ml.atomic_add(acc.at[(i + 1) % 8], s)
  out[i] = acc[i]


def test_a_read_racing_with_an_update_that_may_happen_stays_a_race():
  expect(maybe_update_neighbour, [S((1024,), F32)], mg.RaceError, "acc[i]",
         "acc is read here while other programs may still be adding to it with atomics: programs run in no"
         " fixed order, so the value read depends on timing")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def filled_once(x, out):
  for i in range(4):
    tab = ml.smem((128,), F32)
    if i == 0:
      tab[...] = x.at[ml.ds(0, 128)][...]
    tmp = ml.smem((128,), F32)
    tmp[...] = tab[...] * 2
    out.at[ml.ds(i * 128, 128)][...] = tmp[...] + i.astype(F32)


def test_a_users_buffer_in_a_loop_body_keeps_the_whole_loop():
  """Only compiler scratches live from first to last use in a loop body: tab (filled on trip 0) and
  tmp shared memory, and trips 1-3 would read tmp's data on the GPU."""
  from mgpu_dsl.frontend.smem import plan_smem
  hit = filled_once._compile((S((512,), F32),), {})
  plan = plan_smem(hit["kernel"], {})
  assert len(set(plan.offsets)) == len(plan.offsets)          # every buffer its own place
  x = jnp.arange(512, dtype=F32)
  want = jnp.concatenate([x[:128] * 2 + i for i in range(4)])
  np.testing.assert_array_equal(filled_once(x, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def aliased_rebound(x, out):
  out = x[...] + 1


def test_an_aliased_output_rebound_without_any_write_is_reported():
  expect(aliased_rebound, [S((128,), F32)], mg.UncoveredOutputError, "out = x",
         "out is an output, and this assignment rebinds the name: nothing writes the output")


# ---------------------------------------------------------------- the examples as a library (round 2)
def test_the_examples_refuse_inputs_they_would_get_wrong():
  import sys, os
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
  import attention as AT
  import paged_attention as PA
  import quickstart as QS
  q = jnp.ones((1, 128, 1, 64), jnp.float16)
  with pytest.raises(ValueError, match="sm_scale must be positive"):       # -inf masks times a negative scale: NaN
    AT.attention(q, q, q, sm_scale=-0.125, interpret=True)
  q128 = jnp.ones((1, 100, 1, 128), jnp.float16)
  with pytest.raises(ValueError, match="seq length 100 must be a multiple of 8 for head_dim 128"):
    AT.attention(q128, q128, q128, interpret=True)
  with pytest.raises(ValueError, match="kv_heads dividing"):
    AT.attention(q, q[:, :, :0], q[:, :, :0], interpret=True)
  qp = jnp.ones((1, 128, 64), jnp.float16)
  pages = jnp.ones((1, 8, 16, 64), jnp.float16)
  tables, lengths = jnp.zeros((1, 8), jnp.int32), jnp.full((1,), 16, jnp.int32)
  with pytest.raises(ValueError, match="at most 64 query heads a kv head, got 128"):
    PA.paged_attention(qp, pages, pages, tables, lengths, tensor_cores=True, interpret=True)
  got = PA.paged_attention(qp[:, :4], pages, pages, tables, lengths, splits=np.int64(2), interpret=True)
  assert got.shape == (1, 4, 64)                                     # a NumPy int splits: accepted
  with pytest.raises(mg.SignatureError, match="gelu_mul needs x and y of one shape"):
    QS.gelu_mul(jnp.ones((128, 64), F32), jnp.ones((64, 64), F32), interpret=True)
