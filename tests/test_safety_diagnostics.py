"""Diagnostics point where the mistake is: launch configuration at the decorator's argument,
print's format specs (honoured on both backends, or rejected for what they are), Python
constructs named in their messages."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
X = [S((256,), F32)]


# ---------------------------------------------------------------------------- launch configuration
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(0,))
def empty_grid(x, out):
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x,
                grid=(2,), cluster=(3,))
def odd_cluster(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x.shap, grid=(1,))
def bad_out_shape(x, out):
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: x.shape[0] // 512)
def zero_programs(x, out):
  out[...] = x[...]


@pytest.mark.parametrize("kernel,at,cls,message", [
    (empty_grid, "grid=(0,)", mg.LaunchConfigError, "grid must be 1 to 3 positive ints, got (0,)"),
    (odd_cluster, "cluster=(3,)", mg.LaunchConfigError,
     "grid (2, 1, 1) is not divisible by cluster (3, 1, 1) along x"),
    (bad_out_shape, "out_shape=lambda x: x.shap", mg.SignatureError,
     "the out_shape callable failed for 1 input(s) float32[256]: AttributeError:"
     " an input array has no attribute 'shap'"),
    (zero_programs, "grid=lambda x: x.shape[0] // 512", mg.LaunchConfigError,
     "grid must be 1 to 3 positive ints, got (0,)"),
], ids=["grid", "cluster", "out_shape", "grid_callable"])
def test_launch_configuration_errors_point_at_the_decorator_argument(kernel, at, cls, message):
  e = expect(kernel, X, cls, at, message)
  assert e.end_col_offset - e.col_offset == len(at)      # the caret spans the argument


# ---------------------------------------------------------------------------- print
@mg.mgpu_kernel(out_shape=lambda x: x)
def formatted(x, out):
  v = x[...]
  i = ml.program_id(0) - 3
  print(f"i={i:+04d} {i:.1f} 100% v={v:.2f}")
  out[...] = v


def test_format_specs_apply_per_element_in_interpret_mode(capsys):
  formatted(jnp.arange(128, dtype=F32) / 4, interpret=True)
  line = capsys.readouterr().out.strip()
  assert line.startswith("[program (0, 0, 0)] i=-003 -3.0 100% v=[0.00 0.25 0.50")


def test_format_specs_reach_the_gpu_as_printf_conversions():
  text = formatted.mlir(S((128,), F32))
  call = next(line for line in text.splitlines() if "gpu.printf" in line)
  assert '"i=%+04lld %.1f 100%% v=<tensor<128, float32>>\\0A"' in call


@mg.mgpu_kernel(out_shape=lambda x: x)
def centred(x, out):
  i = ml.program_id(0)
  print(f"{i:^5}")
  out[...] = x[...]


def test_a_format_spec_printf_cannot_honour_is_rejected_at_its_field():
  expect(centred, [S((128,), F32)], mg.KernelTypeError, "i:^5",
         "the GPU cannot print i with the format spec '^5': printf has no equivalent",
         hint="use [<][+][#][0][width][.precision][type] with type d, x, o (integers) or f, e, g (floats)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_spec_of_float(x, out):
  v = x[...]
  print(f"{v:d}")
  out[...] = v


def test_a_format_spec_that_does_not_suit_the_dtype_is_rejected():
  expect(int_spec_of_float, [S((128,), F32)], mg.KernelTypeError, "v:d",
         "cannot format v (float32) with 'd': Unknown format code 'd' for object of type 'float'")


# ---------------------------------------------------------------------------- Python constructs
@mg.mgpu_kernel(out_shape=lambda x: x)
def generator_sum(x, out):
  v = x[...]
  out[...] = sum(v * k for k in range(3))


@mg.mgpu_kernel(out_shape=lambda x: x)
def tuple_sum(x, out):
  v = x[...]
  out[...] = sum((v, v))


@mg.mgpu_kernel(out_shape=lambda x: x)
def tuple_index(x, out):
  i = ml.program_id(0)
  out[...] = x[...] * (1.0, 2.0)[i]


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def tensor_sum(x, out):
  out[...] = sum(x[...])


def test_generator_expressions_and_sum_of_a_tuple_are_pythons():
  """Unrolled while tracing: sum(v * k for k in range(3)) is 0 + v * 0 + v * 1 + v * 2."""
  x = jnp.linspace(-1, 1, 128, dtype=F32)
  np.testing.assert_allclose(generator_sum(x, interpret=True), 3 * x, rtol=1e-6)
  np.testing.assert_allclose(tuple_sum(x, interpret=True), 2 * x, rtol=1e-6)


def test_sum_of_a_register_tensor_is_named():
  expect(tensor_sum, [S((128,), F32)], mg.UnsupportedSyntaxError, "sum(x[...])",
         "sum(...) of register values is not supported in a kernel",
         hint="reduce a register tensor with ml.sum(x[...]) (or ml.sum(x[...], axis=...)); add values with +")


def test_indexing_a_python_tuple_with_a_runtime_value_is_named():
  e = expect(tuple_index, [S((128,), F32)], mg.KernelTypeError, "(1.0, 2.0)[i]",
             "cannot index (1.0, 2.0) (a Python tuple) with a runtime value")
  assert "Value" not in e.message
