"""Static safety, continued: control flow, one-pass reporting of every error, messages, and
the regressions the fuzzer (tests/test_fuzz.py) and the H200 found."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend.ops import elementwise_fns
from locate import builds, expect, where  # noqa: F401

S = jax.ShapeDtypeStruct
F32, F16, BF16, I8, I32, BOOL = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int8, jnp.int32, jnp.bool_


# ---------------------------------------------------------------------------- control flow
@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float32))
def carry_changes_dtype(x, out):
  acc = ml.zeros((128,), jnp.float32)
  for k in range(4):
    acc = x.at[ml.ds(k * 128, 128)][...]
  out[...] = acc


def test_loop_carried_dtype_change_is_reported_at_the_assignment():
  e = expect(carry_changes_dtype, [S((512,), F16)], mg.LoopCarryTypeError, "acc = x.at[",
             "acc enters the loop as a float32 tensor of shape (128,) but an iteration makes it a float16 tensor of shape (128,)")
  line, col = where(carry_changes_dtype, "for k in range(4):")
  assert e.notes == (f"{__file__}:{line}:{col}: the loop that carries acc",)
  assert e.hint == "convert it back at the end of the body: acc = acc.astype(jnp.float32)"


@mg.mgpu_kernel(out_shape=lambda x: x)
def carry_changes_kind(x, out):
  acc = ml.zeros((128,), jnp.float32)
  for k in range(4):
    acc = x
  out[...] = acc


def test_loop_carried_value_becoming_a_ref_is_reported_at_the_assignment():
  expect(carry_changes_kind, [S((128,), F32)], mg.LoopCarryTypeError, "acc = x",
         "acc changes from a float32 tensor of shape (128,) to a float32 GMEM ref of shape (128,) inside the loop")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def unbound_after_if(x, out):
  if ml.program_id(0) == 0:
    factor = 2.0
  out[...] = x[...] * factor


def test_name_bound_in_one_branch_is_unbound_after_the_if():
  line, _ = where(unbound_after_if, "if ml.program_id(0) == 0:")
  expect(unbound_after_if, [S((128,), F32)], mg.UnboundNameError, "factor\n".strip(), nth=1,
         message=f"factor is possibly unbound here: it is assigned in only one branch of the if at line {line}")


@mg.mgpu_kernel(out_shape=lambda x: x)
def unbound_after_loop(x, out):
  for k in range(2):
    last = x[...]
  out[...] = last


def test_name_bound_only_in_a_loop_is_unbound_after_it():
  line, _ = where(unbound_after_loop, "for k in range(2):")
  expect(unbound_after_loop, [S((128,), F32)], mg.UnboundNameError, "last", nth=1,
         message=f"last is possibly unbound here: it is only assigned inside the loop at line {line}")


@mg.mgpu_kernel(out_shape=lambda x: x)
def loop_variable_after_loop(x, out):
  for k in range(2):
    out[...] = x[...]
  out.at[ml.ds(k * 128, 128)][...] = x[...]


def test_loop_variable_is_unbound_after_a_runtime_loop():
  line, _ = where(loop_variable_after_loop, "for k in range(2):")
  expect(loop_variable_after_loop, [S((128,), F32)], mg.UnboundNameError, "k * 128",
         f"k is possibly unbound here: k is the loop variable of the loop at line {line}, which is"
         f" not defined after a runtime loop (it may run no trips)")


# ---------------------------------------------------------------------------- one pass, every error
@mg.mgpu_kernel(out_shape=lambda x: x)
def three_mistakes(x, out):
  buf = ml.smem((128,), jnp.float16)
  ml.copy(x, buf)
  y = x[...] + scale_factr
  z = y * 2
  out[...] = x[...].astype(jnp.int32) * x[...].astype(jnp.uint32)     # (int64 in jnp: converted explicitly)


def test_one_pass_reports_three_independent_mistakes():
  with pytest.raises(mg.CopyDtypeError) as info:
    three_mistakes.check(S((128,), F32))
  errors = info.value.errors
  assert [(type(e), (e.lineno, e.col_offset)) for e in errors] == [
      (mg.CopyDtypeError, where(three_mistakes, "ml.copy(x, buf)")),
      (mg.UnknownNameError, where(three_mistakes, "scale_factr")),
      (mg.DtypeMismatchError, where(three_mistakes, "x[...].astype(jnp.int32) * x[...].astype(jnp.uint32)")),
  ]   # `z = y * 2` uses y, which the failed line did not bind: no second report
  text = str(info.value)
  assert "2 more error(s) in this kernel:" in text
  assert "UnknownNameError: " in text and "DtypeMismatchError: " in text


@mg.mgpu_kernel(out_shape=lambda x: x)
def mistakes_in_blocks(x, out):
  acc = ml.zeros((128,), jnp.float32)
  for k in range(2):
    acc = acc + undefined_a
  if ml.program_id(0) == 0:
    v = ml.exp(x)
  else:
    v = x[...]
  out[...] = acc + v + undefined_b + undefined_a


def test_errors_inside_loops_and_branches_do_not_cascade():
  with pytest.raises(mg.KernelError) as info:
    mistakes_in_blocks.check(S((128,), F32))
  assert [(type(e), e.lineno) for e in info.value.errors] == [
      (mg.UnknownNameError, where(mistakes_in_blocks, "undefined_a")[0]),
      (mg.KernelTypeError, where(mistakes_in_blocks, "ml.exp(x)")[0]),
      (mg.UnknownNameError, where(mistakes_in_blocks, "undefined_b")[0]),
  ]   # acc and v are poisoned (the last line reads both, not reported again), undefined_a reported once; its
  # undefined_b is a mistake of its own (reported since probe 39a)


@mg.mgpu_kernel(out_shape=lambda x: x)
def unknown_twice(x, out):
  a = x[...] * nope
  b = x[...] + nope
  out[...] = x[...].astype(jnp.uint64)


def test_a_name_is_reported_unknown_once():
  with pytest.raises(mg.UnknownNameError) as info:
    unknown_twice.check(S((128,), F32))
  assert [type(e) for e in info.value.errors] == [mg.UnknownNameError, mg.UnsupportedDtypeError]


@mg.mgpu_kernel(out_shape=lambda x: x)
def error_and_overflow(x, out):
  big = ml.smem((256, 256), jnp.float32)
  out[...] = x[...].astype(jnp.int32) + x[...].astype(jnp.uint32)


def test_smem_overflow_is_reported_with_other_errors():
  with pytest.raises(mg.DtypeMismatchError) as info:
    error_and_overflow.check(S((128,), F32))
  assert [type(e) for e in info.value.errors] == [mg.DtypeMismatchError, mg.SmemCapacityError]


@mg.mgpu_kernel(out_shape=lambda x: x)
def many_in_static_loop(x, out):
  for j in ml.static_range(3):
    out[...] = x[...].astype(jnp.int32) + x[...].astype(jnp.uint32)


def test_an_error_repeated_by_an_unrolled_loop_is_reported_once():
  with pytest.raises(mg.DtypeMismatchError) as info:
    many_in_static_loop.check(S((128,), F32))
  assert len(info.value.errors) == 1


def test_unexpected_exceptions_become_internal_errors_at_the_statement(monkeypatch):
  def broken(*args, **kwargs):
    raise ZeroDivisionError("simulated bug")
  monkeypatch.setattr(elementwise_fns.arange, "rule", broken)

  @mg.mgpu_kernel(out_shape=lambda x: x)
  def uses_arange(x, out):
    out[...] = x[...] + ml.arange(128).astype(jnp.float32)

  with pytest.raises(mg.InternalError) as info:
    uses_arange.check(S((128,), F32))
  e = info.value
  assert (e.lineno, e.col_offset) == where(uses_arange, "out[...] = x[...] + ml.arange")
  assert e.message == "mgpu_dsl failed while tracing this statement: ZeroDivisionError: simulated bug"


# ---------------------------------------------------------------------------- messages
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float16))
def store_expression(x, out):
  out[...] = x[...] * 0.5


def test_store_dtype_error_quotes_the_stored_expression():
  e = expect(store_expression, [S((128,), F32)], mg.StoreDtypeError, "out[...]",
             "cannot store x[...] * 0.5 (float32) into out (GMEM, float16): no implicit conversion")
  assert e.hint == "convert explicitly: out[...] = (x[...] * 0.5).astype(jnp.float16)"


def test_kernel_without_source_is_located_at_its_code():
  ns = {"ml": ml}
  exec("def k(x, out):\n  out[...] = x[...]\n", ns)
  with pytest.raises(mg.KernelError) as info:
    mg.mgpu_kernel(ns["k"], out_shape=lambda x: x).check(S((128,), F32))
  e = info.value
  assert type(e) is mg.SourceUnavailableError and e.code == "MG008"
  assert (e.filename, e.lineno, e.col_offset) == ("<string>", 1, 0)
  assert e.message.startswith("cannot read the source of k: ")


# ---------------------------------------------------------------------------- regressions (fuzzer)
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def where_of_two_numbers(x, out):
  out[...] = ml.where(x[...] == 0, 1.0, 2.0) + ml.maximum(0, 1.5)


def test_where_of_two_python_numbers_builds():
  # Was an InternalError ("binary op on two Python values reached the emitter").
  builds(where_of_two_numbers, S((128,), I8))


@mg.mgpu_kernel(out_shape=lambda x: S((2,) + x.shape, x.dtype), grid=(2,))
def scalar_float_compare(x, out):
  i = ml.program_id(0)
  s = i.astype(jnp.float32)
  out.at[i][...] = x[...] * ml.where(x[...] > s, 1.0, 0.0)
  if s < 1.0:
    out.at[i][...] = x[...]


def test_scalar_float_comparison_builds():
  # Was an InternalError from the lowering (AttributeError: olt).
  builds(scalar_float_compare, S((128,), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float32))
def fill_and_mask(x, out):
  t = ml.full((128,), True, jnp.bool_)
  m = t | (x[...] > 0)
  out[...] = ml.where(m ^ True, 1.0, 0.0)


def test_bool_register_tensors_build():
  # Was an InternalError: Mosaic GPU needs i1 tensors to be unsigned (is_signed=False).
  builds(fill_and_mask, S((128,), F32))


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 128), jnp.float32))
def dot_result_in_two_branches(a, b, out):
  a_s = ml.smem((64, 64), jnp.float16)
  b_s = ml.smem((64, 128), jnp.float16)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  i = ml.program_id(0)
  if i % 2 == 0:
    out[...] = acc - 0.5
  if i % 2 == 1:
    out[...] = acc + 0.5


def test_dot_result_read_inside_two_branches_builds():
  # Was an InternalError: the first read of the accumulator (inside the first if)
  # was cached and reused in the second if, where it does not dominate.
  builds(dot_result_in_two_branches, S((64, 64), F16), S((64, 128), F16))


@mg.mgpu_kernel(out_shape=lambda x: x)
def loop_over_int64(x, out):
  n = ml.program_id(0).astype(jnp.int64) + 3
  acc = x[...]
  for j in range(n):
    acc = acc + 1.0
  out[...] = acc


def test_runtime_loop_bounds_of_int64_count_in_int64():
  # Was an InternalError: an i64 bound met the loop's i32 step (MLIR verification failed); then MG003;
  # since probe 47c the loop counts in int64 (lax.fori_loop's index takes its bounds' type).
  assert "scf.for" in loop_over_int64.mlir(S((128,), F32))
  x = np.arange(128, dtype=np.float32)
  np.testing.assert_array_equal(loop_over_int64(x, interpret=True), x + 3)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 256), jnp.float32))
def dot_tile_of_ragged_array(a, b, out):
  a_s = ml.smem((64, 128), jnp.bfloat16)      # two tiles wide: copied through a GMEM tiling
  b_s = ml.smem((128, 256), jnp.bfloat16)
  ml.copy(a.at[0:64], a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


def test_tma_into_a_tensor_core_tile_of_a_ragged_array_goes_a_row_of_tiles_a_tma():
  # Was an InternalError (Mosaic GPU's TileTransform: "dimension 0 must have size smaller or
  # a multiple of its tiling 8, but got 300"), then MG401 until probe 46c copied such rows a row of
  # tiles (8 rows) a TMA.
  builds(dot_tile_of_ragged_array, S((300, 128), BF16), S((128, 256), BF16))
  builds(dot_tile_of_ragged_array, S((304, 128), BF16), S((128, 256), BF16))


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 256), jnp.float32))
def dot_tile_window_inside_a_tile(a, b, out):
  a_s = ml.smem((64, 128), jnp.bfloat16)
  b_s = ml.smem((128, 256), jnp.bfloat16)
  ml.copy(a.at[4:68], a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


def test_tma_window_into_a_tensor_core_tile_may_start_inside_a_tile():
  # (MG401 "this window starts at 4 in dimension 0, inside a tile" until probe 46c)
  rng = np.random.default_rng(4)
  a = jnp.asarray(rng.standard_normal((128, 128)), BF16)
  b = jnp.asarray(rng.standard_normal((128, 256)), BF16)
  got = dot_tile_window_inside_a_tile(a, b, interpret=True)
  want = np.asarray(a[4:68], np.float32) @ np.asarray(b, np.float32)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-2, atol=1e-1)
  builds(dot_tile_window_inside_a_tile, S((128, 128), BF16), S((128, 256), BF16))


def test_a_tensor_core_tile_one_tile_wide_takes_any_rows():
  # One column of (8, 128-byte) tiles is the same SMEM bytes as swizzled rows: no GMEM tiling.
  builds(dot_one_tile_wide, S((300, 64), BF16), S((64, 256), BF16))


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 256), jnp.float32))
def dot_one_tile_wide(a, b, out):
  a_s = ml.smem((64, 64), jnp.bfloat16)
  b_s = ml.smem((64, 256), jnp.bfloat16)
  ml.copy(a.at[4:68], a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)
