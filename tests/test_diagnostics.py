"""Every core diagnostic: its class, code, line, column, message and hint.

Each bad kernel marks the offending expression; `where(fn, text)` finds its line
and column in this file, so the tests check positions without hard-coding them.
"""
import inspect

import jax
import numpy as np
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16


def where(fn, text):
  """(lineno, col) of the first occurrence of `text` in fn's source file."""
  lines, first = inspect.getsourcelines(fn.fn)
  for n, line in enumerate(lines):
    if text in line:
      return first + n, line.index(text)
  raise AssertionError(f"{text!r} not in {fn.__name__}")


def check_error(kernel, specs, cls, at, message, hint=None, **constexprs):
  with pytest.raises(cls) as info:
    kernel.check(*specs, **constexprs)
  e = info.value
  line, col = where(kernel, at)
  assert (e.lineno, e.col_offset) == (line, col), e.render()
  assert e.filename == __file__
  assert message in e.message, e.message
  if hint is not None:
    assert hint in (e.hint or ""), e.hint
  assert "Traceback" not in str(e) and "mlir" not in str(e).lower()
  return e


@mg.mgpu_kernel(out_shape=lambda x: x)
def copy_dtype_gmem_to_smem(x, out):
  buf = ml.smem((128, 64), jnp.float16)
  ml.copy(x, buf)
  ml.copy(buf, out)


def test_copy_gmem_to_smem_with_different_dtypes_is_rejected():
  e = check_error(copy_dtype_gmem_to_smem, [S((128, 64), F32)], mg.CopyDtypeError, "ml.copy(x, buf)",
                  "cannot copy x (GMEM, float32) into buf (SMEM, float16): element types differ",
                  hint="allocate buf as float32")
  assert e.code == "MG101"
  assert e.end_col_offset - e.col_offset == len("ml.copy(x, buf)")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float16))
def copy_dtype_smem_to_gmem(x, out):
  buf = ml.smem((128, 64))
  ml.copy(x, buf)
  ml.copy(buf, out)


def test_copy_smem_to_gmem_with_different_dtypes_is_rejected():
  check_error(copy_dtype_smem_to_gmem, [S((128, 64), F32)], mg.DtypeConflictError, "ml.copy(buf, out)",
              "buf (SMEM, inferred dtype) would be float16 here")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float16))
def copy_dtype_explicit_smem_to_gmem(x, out):
  buf = ml.smem((128, 64), jnp.float32)
  ml.copy(x, buf)
  ml.copy(buf, out)


def test_copy_explicit_smem_to_gmem_of_other_dtype_is_rejected():
  check_error(copy_dtype_explicit_smem_to_gmem, [S((128, 64), F32)], mg.CopyDtypeError,
              "ml.copy(buf, out)", "cannot copy buf (SMEM, float32) into out (GMEM, float16)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def store_dtype(x, out):
  buf = ml.smem((128, 64), jnp.float32)
  ml.copy(x, buf)
  h = buf[...].astype(jnp.float16)
  buf[...] = h
  ml.copy(buf, out)


def test_register_store_of_another_dtype_is_rejected_with_astype_hint():
  e = check_error(store_dtype, [S((128, 64), F32)], mg.StoreDtypeError, "buf[...] = h",
                  "cannot store h (float16) into buf (SMEM, float32): no implicit conversion",
                  hint="buf[...] = (h).astype(jnp.float32)")
  assert e.code == "MG102"


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def conflicting_inference(x, y, out):
  buf = ml.smem((128, 64))
  ml.copy(x, buf)
  ml.copy(y, buf)
  ml.copy(buf, out)


def test_inferred_smem_dtype_conflict_names_both_lines():
  e = check_error(conflicting_inference, [S((128, 64), F32), S((128, 64), F16)], mg.DtypeConflictError,
                  "ml.copy(y, buf)", "but line")
  first, _ = where(conflicting_inference, "ml.copy(x, buf)")
  assert f"line {first} already made it float32" in e.message
  assert any(f":{first}:" in n for n in e.notes)
  assert e.code == "MG103"


@mg.mgpu_kernel(out_shape=lambda x: x)
def copy_shape(x, out):
  buf = ml.smem((64, 64))
  ml.copy(x, buf)
  ml.copy(buf, out.at[0:64])


def test_copy_between_different_shapes_is_rejected():
  check_error(copy_shape, [S((128, 64), F32)], mg.CopyShapeError, "ml.copy(x, buf)",
              "cannot copy x (shape (128, 64)) into buf (shape (64, 64)): shapes differ")


@mg.mgpu_kernel(out_shape=lambda x: x)
def gmem_to_gmem(x, out):
  ml.copy(x, out)


def test_copy_gmem_to_gmem_is_rejected_with_staging_hint():
  e = check_error(gmem_to_gmem, [S((128, 64), F32)], mg.CopySpaceError, "ml.copy(x, out)",
                  "there is no GMEM -> GMEM copy", hint="stage it through SMEM")
  assert e.code == "MG301"


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def cluster_ref_of_gmem(x, out):
  peer = ml.cluster_ref(x, 1)
  out[...] = peer[...]


def test_cluster_ref_of_gmem_is_rejected():
  check_error(cluster_ref_of_gmem, [S((128,), F32)], mg.ClusterRefError, "ml.cluster_ref(x, 1)",
              "ml.cluster_ref needs an SMEM buffer of this CTA, got x (GMEM)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def cluster_ref_without_cluster(x, out):
  buf = ml.smem((128,))
  ml.copy(x, buf)
  out[...] = ml.cluster_ref(buf, 1)[...]


def test_cluster_ref_without_a_cluster_is_rejected():
  check_error(cluster_ref_without_cluster, [S((128,), F32)], mg.ClusterRefError,
              "ml.cluster_ref(buf, 1)", "but the kernel's cluster is (1, 1, 1)", hint="cluster=")


@mg.mgpu_kernel(out_shape=lambda x: x)
def loop_that_exits_early(x, out):
  v = x[...]
  for i in range(4):
    v = v * 2
    break
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def pipelined_loop_that_exits_early(x, out):
  v = x[...]
  for i in ml.range(4, stages=2):
    v = v * 2
    break
  out[...] = v


def test_unsupported_python_is_reported_at_its_node():
  # a run-time loop's break ends it (frontend/jumps.py); a pipelined loop runs every trip
  np.testing.assert_array_equal(loop_that_exits_early(jnp.ones(128, F32), interpret=True), np.full(128, 2.0))
  e = check_error(pipelined_loop_that_exits_early, [S((128,), F32)], mg.UnsupportedSyntaxError, "break",
                  "break in a pipelined loop or one with a run-time step is not supported in a kernel",
                  hint="drop those options")
  assert e.code == "MG001"


@mg.mgpu_kernel(out_shape=lambda x: x)
def unknown_name(x, out):
  out[...] = x[...] * scale_factor


def test_unknown_name_is_reported():
  check_error(unknown_name, [S((128,), F32)], mg.UnknownNameError, "scale_factor",
              "name 'scale_factor' is not defined")


@mg.mgpu_kernel(out_shape=lambda x: x)
def mixed_dtypes(x, out):
  a = x[...].astype(jnp.int32)
  b = a.astype(jnp.uint32)       # (int64 in jnp; float32 with float16 is jnp's float32 since probe 47b)
  out[...] = a + b


def test_arithmetic_on_different_dtypes_is_rejected():
  check_error(mixed_dtypes, [S((128,), F32)], mg.DtypeMismatchError, "a + b",
              "+ on a (int32) and b (uint32)", hint=".astype(")


def test_error_renders_location_source_caret_and_hint():
  with pytest.raises(mg.CopyDtypeError) as info:
    copy_dtype_gmem_to_smem.check(S((128, 64), F32))
  line, col = where(copy_dtype_gmem_to_smem, "ml.copy(x, buf)")
  text = str(info.value).splitlines()
  assert text[0].startswith(f"{__file__}:{line}:{col}: cannot copy x")
  assert text[0].endswith("[MG101]")
  assert text[1].strip() == "ml.copy(x, buf)"
  assert text[2] == " " * (4 + col) + "^" + "~" * (len("ml.copy(x, buf)") - 1)
  assert text[3].startswith("hint: ")


def test_kernel_errors_reach_the_user_without_internal_frames():
  try:
    jax.jit(gmem_to_gmem)(jnp.zeros((128, 64), F32))
  except mg.KernelError as e:
    frames = [f.filename for f in __import__("traceback").extract_tb(e.__traceback__)]
    assert not any("/frontend/" in f or "/lowering/" in f for f in frames), frames
  else:
    raise AssertionError("no error")


@mg.mgpu_kernel(out_shape=lambda x, v: x)
def broadcast_on_strided(x, v, out):
  out[...] = x[...] + v[...]


def test_broadcasting_a_vector_over_a_tile_computes_numpys_result():
  x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
  v = np.arange(64, dtype=np.float32)
  np.testing.assert_array_equal(broadcast_on_strided(x, v, interpret=True), x + v)


def test_shapes_that_do_not_broadcast_are_rejected_naming_both():
  e = check_error(broadcast_on_strided, [S((128, 64), F32), S((32,), F32)], mg.ShapeMismatchError,
                  "x[...] + v[...]", "do not broadcast")
  assert "(128, 64)" in e.message and "(32,)" in e.message and e.hint


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def two_inputs(x, y, out):
  out[...] = x[...] + y[...]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[1],), x.dtype))
def bad_out_shape(x, out):
  out[...] = x[...]


def test_out_shape_callable_failing_is_a_signature_error():
  with pytest.raises(mg.SignatureError) as info:
    bad_out_shape.check(S((128,), F32))
  assert "out_shape callable failed for 1 input(s) float32[128]: IndexError" in info.value.message


def test_too_few_inputs_are_reported_before_out_shape_is_called():
  with pytest.raises(mg.SignatureError) as info:
    two_inputs.check(S((128,), F32))
  assert info.value.message == ("two_inputs takes 2 inputs (x, y), then 1 output (out), but was called"
                                " with 1 input")


def test_int64_specs_without_x64_are_refused_not_narrowed():
  """They were taken as int32, as JAX passes int64 arrays without x64: the kernel checked was not the
  one asked for (test_probe31c has the outputs and NumPy values)."""
  if jax.config.jax_enable_x64:
    pytest.skip("x64 mode keeps int64")
  k = mg.mgpu_kernel(out_shape=lambda x: x)(_copy_rows)
  with pytest.raises(mg.SignatureError, match="is given as int64, but jax_enable_x64 is off"):
    k.typed_ir(S((128,), jnp.int64))
  assert "int32" in k.typed_ir(np.arange(128))       # NumPy's int64 values that fit: as JAX takes them


def _copy_rows(x, out):
  out[...] = x[...]


@ml.inline
def _bad_helper(ref):
  buf = ml.smem((128,), jnp.float16)
  ml.copy(ref, buf)
  return buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_bad_helper(x, out):
  out[...] = _bad_helper(x).astype(jnp.float32)


def test_mistake_inside_an_inline_helper_is_reported_at_the_helper_line():
  with pytest.raises(mg.CopyDtypeError) as info:
    calls_bad_helper.check(S((128,), F32))
  lines, first = inspect.getsourcelines(_bad_helper.fn)
  n = next(i for i, l in enumerate(lines) if "ml.copy(ref, buf)" in l)
  assert info.value.lineno == first + n and len(info.value.errors) == 1


def _plain_helper(v):
  return v * 2


_unreadable = {}
exec(compile("def _unreadable_helper(v):\n  return v * 2\n", "<generated>", "exec"), _unreadable)
_unreadable_helper = _unreadable["_unreadable_helper"]


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_plain_helper(x, out):
  out[...] = _plain_helper(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_unreadable_helper(x, out):
  out[...] = _unreadable_helper(x[...])


def test_calling_an_undecorated_helper_on_runtime_values_suggests_inline():
  """A plain function of the user's is an inline helper since probe 52b; one whose source cannot be read (made by
  exec) keeps the MG003 that says to decorate it."""
  x = np.arange(128, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(calls_plain_helper(x, interpret=True)), 2 * x)
  check_error(calls_unreadable_helper, [S((128,), F32)], mg.KernelTypeError, "_unreadable_helper(x[...])",
              "_unreadable_helper cannot take a register tensor inside a kernel", hint="@ml.inline")


@ml.inline
def _early_return(v, relu):
  if relu:                      # a static condition: the helper ends here
    return ml.maximum(v, 0.0)
  return v


@ml.inline
def _runtime_early_return(v):
  if ml.program_id(0) > 0:
    return v * 2.0
  return v


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_early_return(x, out, *, relu: ml.constexpr):
  out[...] = _early_return(x[...], relu)


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_runtime_early_return(x, out):
  out[...] = _runtime_early_return(x[...])


def test_an_inline_helper_may_return_early_under_a_static_condition():
  x = jnp.linspace(-1.0, 1.0, 128, dtype=F32)
  np.testing.assert_array_equal(np.asarray(calls_early_return(x, relu=True, interpret=True)),
                                np.maximum(np.asarray(x), 0.0))
  np.testing.assert_array_equal(np.asarray(calls_early_return(x, relu=False, interpret=True)), np.asarray(x))
  calls_early_return.check(S((128,), F32), relu=True)


def test_an_inline_helper_may_return_under_a_runtime_condition():
  """It was MG001 at the return; each path now binds the value the call takes (tests/test_probe32b.py
  has the mistakes: a path without a return, a return in a run-time loop, types that differ)."""
  x = jnp.linspace(-1.0, 1.0, 128, dtype=F32)
  np.testing.assert_array_equal(np.asarray(calls_runtime_early_return(x, interpret=True)), np.asarray(x))
  calls_runtime_early_return.check(S((128,), F32))
