"""Calling conventions: a kernel checks its own arguments before any user callable runs,
describes its call to `inspect.signature`, and ships as a typed package."""
import inspect
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl import calling

import kernels as K

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _never(*args, **kwargs):
  raise AssertionError("a user callable ran before the arguments were checked")


@mg.mgpu_kernel(out_shape=_never, grid=_never)
def guarded(x, y, out):
  out[...] = x[...] + y[...]


def test_signature_lists_inputs_then_constexprs_and_interpret():
  assert str(inspect.signature(K.row_block_sum)) == (
      "(x: 'jax.Array', n: ml.constexpr, *, interpret: 'bool | None' = None)")   # (n by position too: probe 43d)


def test_signature_keeps_constexpr_defaults():
  sig = inspect.signature(K.double)
  assert list(sig.parameters) == ["x", "interpret"]
  assert sig.parameters["x"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD     # (by keyword too: probe 38g)


def test_jit_with_static_interpret_runs_the_kernel():
  x = jnp.arange(256 * 64, dtype=F32).reshape(256, 64)
  out = jax.jit(K.double, static_argnames=["interpret"])(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)


def test_jit_with_static_constexpr_runs_the_kernel():
  x = jnp.ones((256, 64), F32)
  out = jax.jit(K.row_block_sum, static_argnames=["n", "interpret"])(x, n=2, interpret=True)
  np.testing.assert_array_equal(np.asarray(out), np.full((128, 64), 2.0, np.float32))


def test_traced_constexpr_says_to_mark_it_static():
  with pytest.raises(mg.SignatureError) as info:
    jax.jit(K.row_block_sum)(jnp.ones((256, 64), F32), n=2)
  assert info.value.message.startswith("row_block_sum: constexpr n is a traced value")
  assert "jax.jit(row_block_sum, static_argnames=['n'])" in info.value.hint
  assert "the argument that carries it" in info.value.hint     # f(x, s) passing n=s (probe 15)


def test_traced_interpret_flag_says_to_mark_it_static():
  with pytest.raises(mg.SignatureError) as info:
    jax.jit(K.double)(jnp.ones((256, 64), F32), interpret=True)
  assert "static_argnames=['interpret']" in info.value.hint


def test_jax_array_constexpr_is_rejected():
  with pytest.raises(mg.SignatureError) as info:
    K.row_block_sum(jnp.ones((256, 64), F32), n=jnp.int32(2), interpret=True)
  assert "constexpr n is a jax array" in info.value.message
  assert "n=v.item()" in info.value.hint          # not int(v), which truncates a float (probe 15)


def test_list_input_is_one_short_signature_error():
  xs = [jnp.ones((128,), F32)] * 1000
  with pytest.raises(mg.SignatureError) as info:
    K.double(xs)
  assert info.value.message == "double: input 0 (x) is a list of 1000 items; kernel inputs are arrays"
  assert "jnp.stack" in info.value.hint
  assert len(str(info.value)) < 1000


def test_python_scalar_input_points_at_constexprs():
  with pytest.raises(mg.SignatureError) as info:
    K.double(2.0)
  assert info.value.message == "double: input 0 (x) is float 2.0; kernel inputs are arrays"
  assert "ml.constexpr" in info.value.hint


def test_unsupported_input_dtype_is_a_signature_error():
  with pytest.raises(mg.SignatureError) as info:
    K.double.check(S((128, 64), jnp.complex64))
  assert info.value.message == "double: input 0 (x) has dtype complex64, which kernels do not support"


def test_input_count_is_checked_before_user_callables_run():
  with pytest.raises(mg.SignatureError) as info:
    guarded.check(S((128,), F32), S((128,), F32), S((128,), F32))
  assert info.value.message == ("guarded has 3 ref parameters (x, y, out) and takes at most 2 inputs"
                                " (the rest are outputs), but was called with 3")


def test_input_count_from_out_shape_arity():
  with pytest.raises(mg.SignatureError) as info:
    K.fused.check(S((64, 64), F32))
  assert info.value.message == "fused takes 2 inputs (x, y), then 1 output (out), but was called with 1 input"


def test_unknown_constexpr_is_reported_before_user_callables_run():
  with pytest.raises(mg.SignatureError) as info:
    guarded.check(S((128,), F32), S((128,), F32), bn=2)
  assert info.value.message == "guarded has no constexpr parameter 'bn'"


def test_failing_callable_message_is_capped():
  def loud(x):
    raise ValueError("x" * 50_000)
  k = mg.mgpu_kernel(out_shape=loud)(K.double.fn)
  with pytest.raises(mg.SignatureError) as info:
    k.check(S((128, 64), F32))
  assert info.value.message.startswith("the out_shape callable failed for 1 input(s) float32[128, 64]")
  assert len(info.value.message) <= calling.MAX_MESSAGE


def test_call_and_public_api_have_docstrings():
  for obj in (mg.KernelFunction.__call__, mg.KernelFunction.typed_ir, mg.KernelFunction.mlir,
              mg.KernelFunction.check, mg.KernelFunction.cache_clear, mg.mgpu_kernel, mg.bench,
              mg.bench_wall, mg.autotune, mg.check_specs):
    assert obj.__doc__ and len(obj.__doc__.strip()) > 20, obj
  assert "constexpr" in K.double.__call__.__doc__


def test_package_ships_py_typed():
  here = os.path.dirname(mg.__file__)
  assert os.path.isfile(os.path.join(here, "py.typed"))
  with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")) as f:
    assert 'mgpu_dsl = ["py.typed"]' in f.read()


def test_version_flag():
  out = subprocess.run([sys.executable, "-m", "mgpu_dsl", "--version"], capture_output=True, text=True)
  assert out.returncode == 0 and out.stdout.strip() == f"mgpu_dsl {mg.__version__}"
  script = shutil.which("mgpu-dsl")
  if script is not None:
    out = subprocess.run([script, "--version"], capture_output=True, text=True)
    assert out.stdout.strip() == f"mgpu_dsl {mg.__version__}"


# ------------------------------------------------------------------ no GPU
NO_GPU_HINT = ("pass interpret=True (or set MGPU_DSL_INTERPRET=1) to run it on the CPU with numpy;"
               " jax.export(jax.jit(f), platforms=['cuda']) and kernel.mlir(*specs) work without a GPU")


@pytest.mark.skipif(any(d.platform == "gpu" for d in jax.devices()), reason="on a GPU the call runs")
def test_a_kernel_called_without_a_gpu_says_so_at_the_users_line_not_inside_jax():
  x = jnp.ones((256, 64), jnp.float32)
  with pytest.raises(mg.NoGpuError) as e:
    K.double(x)                                  # eager: the error is at this line
  call_line = inspect.currentframe().f_lineno - 1
  assert (e.value.filename, e.value.lineno) == (__file__, call_line)
  assert e.value.message == ("double runs on an NVIDIA Hopper GPU (it is a Mosaic GPU kernel), but the call"
                             " is being compiled for cpu: JAX sees no GPU here")
  assert e.value.hint == NO_GPU_HINT
  for f in (jax.jit(lambda x: K.double(x) * 2), lambda x: jax.jit(K.double).lower(x)):
    with pytest.raises(mg.NoGpuError) as e:      # under jit the CPU lowering raises it, at the kernel
      f(x)
    assert (e.value.filename, e.value.lineno) == (K.__file__, K.double.fn.__code__.co_firstlineno + 1)
    assert "runs on an NVIDIA Hopper GPU" in e.value.message and e.value.hint == NO_GPU_HINT
  exported = jax.export.export(jax.jit(K.double), platforms=["cuda"])(x)    # for the GPU: unchanged
  assert "@mosaic_gpu" in exported.mlir_module()
  np.testing.assert_array_equal(K.double(x, interpret=True), x * 2)


@mg.mgpu_kernel(out_shape=lambda x, **kw: x)
def scaled_by(x, out, *, f: ml.constexpr = 2.0):
  out[...] = x[...] * f


def test_a_constexpr_passed_by_position_after_the_inputs():
  """It said 'input 1 (out) is float 3.0; kernel inputs are arrays', naming an output (probe 15); a constexpr
  after the inputs is now taken by position, as Triton takes it (probe 43d); one too many is a count."""
  np.testing.assert_array_equal(scaled_by(jnp.ones((128,), F32), 3.0, interpret=True), 3.0)
  with pytest.raises(mg.SignatureError) as info:
    scaled_by(jnp.ones((128,), F32), 3.0, 4.0, interpret=True)
  assert info.value.message == ("scaled_by was given 2 values after its 1 input (float 3.0, float 4.0), but takes"
                                " 1 constexpr by position (f)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def two_outputs_one_described(x, out, out2):
  out[...] = x[...]
  out2[...] = x[...]


def test_too_few_outputs_in_out_shape_hint_names_the_parameters():
  with pytest.raises(mg.SignatureError) as info:
    two_outputs_one_described(jnp.ones((128,), F32), interpret=True)
  assert info.value.hint.startswith("if out is an output too, describe 2 outputs in out_shape")


def test_interpret_passed_by_position_says_keyword():
  with pytest.raises(mg.SignatureError) as info:
    scaled_by(jnp.ones((128,), F32), True)
  assert "interpret is passed by keyword" in info.value.message and info.value.hint == "scaled_by(..., interpret=True)"
