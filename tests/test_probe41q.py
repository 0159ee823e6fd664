"""Probe 41q (JAX citizenship): kernels called the ways JAX users call functions (jax.jit, eager calls with
Python numbers, the spec methods check/typed_ir/mlir), until a mistake was reported away from the user's
call, or a call that works under jax.jit failed eagerly."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _here(offset=0):
  """(filename, line) of the caller's line plus `offset`."""
  f = inspect.currentframe().f_back
  return f.f_code.co_filename, f.f_lineno + offset


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, bm: (x.shape[0] // bm,))
def scale_rows(x, out, *, bm: ml.constexpr):
  i = ml.program_id(0)
  out[ml.ds(i * bm, bm), :] = x[ml.ds(i * bm, bm), :] * 2


# ---------------------------------------------------------------- spec methods: the call's mistake at the call
@pytest.mark.parametrize("method", ["check", "typed_ir", "mlir"])
def test_a_spec_methods_signature_error_is_at_the_users_call(method):
  """`scale_rows.check(spec, spec)` (an output passed) pointed at the kernel's def; `scale_rows(x, x)`
  pointed at the call. Each spec method now points at its call, the def kept as a note."""
  spec = S((256, 64), F32)
  with pytest.raises(mg.KernelError) as info:
    getattr(scale_rows, method)(spec, spec, bm=64)
  e, (filename, line) = info.value, _here(-1)
  assert type(e) is mg.SignatureError
  assert (e.filename, e.lineno, e.col_offset) == (filename, line, 4)
  assert e.message == "scale_rows takes 1 input (x), then 1 output (out), but was called with 2 inputs"
  assert e.notes[0].endswith(": the kernel")
  assert f":{scale_rows.fn.__code__.co_firstlineno + 1}:" in e.notes[0]


def test_a_misspelt_constexpr_in_typed_ir_is_at_the_users_call():
  with pytest.raises(mg.KernelError) as info:
    scale_rows.typed_ir(S((256, 64), F32), bn=64)
  e, (filename, line) = info.value, _here(-1)
  assert type(e) is mg.SignatureError
  assert (e.filename, e.lineno, e.col_offset) == (filename, line, 4)
  assert e.message == "scale_rows has no constexpr parameter 'bn'"
  assert e.hint == "its constexpr parameters are: bm"
  scale_rows.check(S((256, 64), F32), bm=64)


# ---------------------------------------------------------------- Python numbers for 0-d inputs
@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 128,))
def times(x, s, out):
  i = ml.program_id(0)
  out[ml.ds(i * 128, 128), :] = x[ml.ds(i * 128, 128), :] * s[...]


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 128,))
def plus(x, s, out):
  i = ml.program_id(0)
  out[ml.ds(i * 128, 128), :] = x[ml.ds(i * 128, 128), :] + s[...]


def test_a_python_float_for_a_0d_input_runs_eagerly_as_under_jit():
  """`times(x, 2.5)` was MG006 called eagerly, but ran under jax.jit (a weakly typed 0-d array)."""
  x = rand.normal(rand.key(0), (256, 64), F32)
  eager = times(x, 2.5, interpret=True)
  jitted = jax.jit(lambda x, s: times(x, s, interpret=True))(x, 2.5)
  np.testing.assert_allclose(eager, np.asarray(x) * np.float32(2.5), rtol=1e-6)
  np.testing.assert_array_equal(eager, jitted)
  assert eager.dtype == jitted.dtype == F32
  # A number passed where the kernel slices an array is still the call's SignatureError naming the
  # number, not an error from inside the kernel about a 0-d array.
  with pytest.raises(mg.KernelError) as info:
    times(2.0, x, interpret=True)
  e, (filename, line) = info.value, _here(-1)
  assert type(e) is mg.SignatureError
  assert (e.filename, e.lineno) == (filename, line)
  assert e.message == "times: input 0 (x) is float 2.0; kernel inputs are arrays"


def test_a_python_int_for_a_0d_input_runs_eagerly_as_under_jit():
  xi = jnp.arange(256 * 64, dtype=jnp.int32).reshape(256, 64)
  eager = plus(xi, 3, interpret=True)
  np.testing.assert_array_equal(eager, np.asarray(xi) + 3)
  np.testing.assert_array_equal(eager, jax.jit(lambda x, s: plus(x, s, interpret=True))(xi, 3))
  assert eager.dtype == jnp.int32


def test_a_python_number_under_vmap_with_in_axes_none():
  """jax.vmap(k, in_axes=(0, None)) passes the Python number itself to the kernel's batching rule."""
  xb = rand.normal(rand.key(1), (3, 256, 64), F32)
  y = jax.vmap(lambda x, s: times(x, s, interpret=True), in_axes=(0, None))(xb, 2.0)
  np.testing.assert_allclose(y, np.asarray(xb) * 2, rtol=1e-6)


def test_a_python_number_in_a_jitted_function_exports_for_cuda():
  """A constant inside the user's own jitted function: the kernel's launch gets a float32 0-d array."""
  text = jax.export.export(jax.jit(lambda x: times(x, 2.0)), platforms=["cuda"])(S((256, 64), F32)).mlir_module()
  assert "mosaic_gpu" in text


@pytest.mark.gpu
def test_python_numbers_for_0d_inputs_on_the_gpu():
  x = rand.normal(rand.key(2), (256, 64), F32)
  np.testing.assert_allclose(times(x, 2.5), np.asarray(x) * np.float32(2.5), rtol=1e-6)
  xi = jnp.arange(256 * 64, dtype=jnp.int32).reshape(256, 64)
  np.testing.assert_array_equal(plus(xi, 3), np.asarray(xi) + 3)
  np.testing.assert_allclose(jax.jit(lambda x: times(x, 2.0))(x), np.asarray(x) * 2, rtol=1e-6)


def test_a_python_number_for_a_0d_input_in_the_spec_methods():
  """`times.check(spec, 2.0)` was MG006 where jax.eval_shape(times, spec, 2.0) worked: the spec methods take
  a Python number for a 0-d input as a call does, the same code as a float32 0-d spec (since probe 42u a
  specialisation of its own, weakly typed as jnp's Python numbers: its values are numbered apart)."""
  import re
  spec = S((256, 64), F32)
  times.check(spec, 2.0)
  ids = lambda text: re.sub(r"%\d+", "%", text)
  assert ids(times.typed_ir(spec, 2.0)) == ids(times.typed_ir(spec, S((), F32)))
  assert times.mlir(spec, 2.0) == times.mlir(spec, S((), F32))
  with pytest.raises(mg.KernelError) as info:
    times.check(2.0, spec)
  e, (filename, line) = info.value, _here(-1)
  assert type(e) is mg.SignatureError
  assert (e.filename, e.lineno) == (filename, line)
  assert e.message == "times: input 0 (x) is float 2.0; kernel inputs are arrays"


@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=lambda x, bm: (x.shape[0] // bm,))
def float_block_rows(x, out, *, bm: ml.constexpr):
  i = ml.program_id(0)
  out[ml.ds(i * bm, bm), :] = x[ml.ds(i * bm, bm), :] * 2


def test_a_float_constexpr_that_makes_the_grid_float_is_named_in_the_hint():
  """`bm=64.0` into a grid that divides with // already: the hint said "divide with //"; it names the
  constexpr to pass as an int, and that call works."""
  import inspect
  x = jnp.ones((256, 64), jnp.float32)
  with pytest.raises(mg.LaunchConfigError) as info:
    float_block_rows(x, bm=64.0, interpret=True)
  e = info.value
  assert e.code == "MG007" and e.lineno == inspect.getsourcelines(float_block_rows)[1]
  assert e.message == "grid must be 1 to 3 positive ints, got (4.0,)"
  assert e.hint == "bm=64.0 is a float, so the counts computed from it are floats: pass bm=64 (an int)"
  np.testing.assert_array_equal(float_block_rows(x, bm=64, interpret=True), x * 2)
