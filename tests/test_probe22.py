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

import rand
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
         " these two in int64, which is not implicit here",
         hint="-1 is outside uint32: convert the value: v.astype(jnp.int64)")


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
  i8 = jnp.arange(-64, 64, dtype=jnp.int8)      # (8-bit order computes in 32 bits since probe 23)
  np.testing.assert_array_equal(compare_int8(i8, interpret=True), (i8 > 3).astype(jnp.int32))
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


def test_an_int_scalar_condition_is_its_truth():
  """(An MG003 naming `x[0] != 0` until probe 39a: Python's truth of an int is that test.)"""
  for first in (0, 3):
    x = jnp.arange(first, first + 128, dtype=jnp.int32)
    np.testing.assert_array_equal(int_condition(x, interpret=True), x if first else x * 2)


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
  x = rand.normal(rand.key(0), (256, 128), F32)
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
              " ml.atomic_add(db.at[(j * 64) + ml.arange(64)], ml.sum(v, axis=0))")
  g = rand.normal(rand.key(1), (8, 130), F32)
  np.testing.assert_allclose(bias_grad_scatter(g, interpret=True), g.sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(bias_grad_masked(g, interpret=True), g.sum(0), rtol=1e-5, atol=1e-5)   # (probe 47d)


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
  p = jnp.linspace(1.0, 2.0, 128, dtype=F32)      # (b1 ** step is jnp.power since probe 29a: it was MG001)
  np.testing.assert_allclose(bias_correction(p, 0.9, 7, interpret=True), p / (1.0 - np.float32(0.9) ** 7), rtol=1e-6)
  lab = jnp.arange(-128, 0, dtype=jnp.int8).at[5].set(-100)      # (8-bit selects: 32 bits since probe 23)
  np.testing.assert_array_equal(where_int8(jnp.ones((128,), F32), lab, interpret=True),
                                jnp.where(lab == -100, 0, lab).astype(jnp.int32))
  expect(float_seed, [S((128,), F32), S((), F32)], mg.KernelTypeError, "ml.rand",
         "a random seed must be a Python int or an integer scalar, got a scalar (float32)",
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
         "acc enters the loop as an int32 scalar but an iteration makes it a float32 scalar",
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
  w = add_bias(v, 1)
  out[...] = add_bias(w, b16[...])


def test_a_mistake_in_a_helper_names_the_call_it_comes_from():
  with pytest.raises(mg.DtypeMismatchError) as info:
    two_calls.check(S((128,), jnp.int32), S((128,), jnp.uint32))     # (int64 in jnp: probe 47b)
  e = info.value
  assert e.message == "+ on v (int32) and b (uint32): dtypes differ and are never converted implicitly"
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
  lst.insert(0, x[...])
  out[...] = sq(lst[1])


def test_a_failed_statement_does_not_cascade_into_errors_about_what_it_would_have_bound():
  with pytest.raises(mg.KernelError) as e:
    nested_def.check(S((128,), F32))
  # (probe 38g: the nested def is a helper now; the list's insert is the one mistake)
  assert [type(x).__name__ for x in e.value.errors] == ["KernelTypeError"]
  assert "no .insert" in e.value.errors[0].message


def test_a_lambda_kernel_is_told_to_be_a_def():
  with pytest.raises(mg.LaunchConfigError, match="a kernel must be a def"):
    mg.mgpu_kernel(lambda x, out: None, out_shape=lambda x: x)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def int_shift(x, y, out):
  out[...] = x[...] << y[...]


def test_an_interpreter_error_under_jit_is_not_logged_with_its_traceback(caplog):
  # (a shift past the width: a run-time zero divisor computes jnp's numbers since probe 57a)
  f = jax.jit(lambda a, b: int_shift(a, b, interpret=True))
  with pytest.raises(Exception, match=r"a shift by an amount outside 0\.\.31"):
    f(jnp.ones((128,), jnp.int32), jnp.full((128,), 40, jnp.int32)).block_until_ready()
  assert not [r for r in caplog.records if "pure_callback failed" in r.getMessage()]


def test_a_misspelt_constexpr_at_a_call_is_reported_at_the_call():
  import inspect
  with pytest.raises(mg.SignatureError, match="has no constexpr parameter 'factor'") as info:
    tile_sum(jnp.ones((128, 128), F32), factor=3, interpret=True)
  line = inspect.currentframe().f_lineno - 1
  assert (info.value.filename, info.value.lineno) == (__file__, line)
  assert info.value.notes[0].endswith(": the kernel")
