"""How a kernel is declared, called and lives inside JAX: the mistakes and habits of users
who integrate kernels into models (options, constexpr defaults, NumPy values, traced values,
run-time scalars, jit, vmap and export without a GPU); each is a KernelError at the user's
line with a hint, or works as JAX users expect."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))   # the examples' wrappers

S = jax.ShapeDtypeStruct
NO_GPU = not any(d.platform == "gpu" for d in jax.devices())


@mg.mgpu_kernel(out_shape=())
def no_outputs(x):
  x[...] = x[...] * 2.0


def test_an_out_shape_of_no_outputs_says_so():
  """Once reported as a parameter count that named the input as an output."""
  with pytest.raises(mg.LaunchConfigError) as e:
    no_outputs.check(S((256,), jnp.float32))
  assert e.value.message.startswith("out_shape describes no outputs")
  assert "input_output_aliases" in e.value.hint


@mg.mgpu_kernel(out_shape=lambda x, *, n: S((x.shape[0] * n,), x.dtype), grid=lambda x, *, n, step=7: (n,))
def repeat_rows(x, out, *, n: ml.constexpr = 2, step: ml.constexpr = 1):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x[...] + step


def test_out_shape_and_grid_callables_see_the_kernels_constexpr_defaults():
  """They got only the constexprs passed: a missing-argument SignatureError, or silently the
  callable's own default where the kernel used its own."""
  x = jnp.arange(128, dtype=jnp.float32)
  np.testing.assert_array_equal(repeat_rows(x, interpret=True), np.tile(np.asarray(x) + 1, 2))
  np.testing.assert_array_equal(repeat_rows(x, n=3, interpret=True), np.tile(np.asarray(x) + 1, 3))
  repeat_rows.check(S((128,), jnp.float32))          # compiles with the grid of the default n


HALF = np.float32(0.5)
THREE = np.int64(3)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (np.prod(x.shape) // 128,))
def numpy_values(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * HALF + THREE


def test_numpy_scalars_in_globals_and_numpy_ints_in_grids_are_python_numbers():
  """A NumPy scalar global was 'cannot take a Python float32'; a grid of np.int64 was 'must
  be positive ints, got (np.int64(2),)'."""
  x = jnp.arange(256, dtype=jnp.float32)
  np.testing.assert_array_equal(numpy_values(x, interpret=True), np.asarray(x) * 0.5 + 3)


def test_a_traced_value_captured_by_a_kernel_says_to_pass_it_as_an_input():
  def f(x, s):
    @mg.mgpu_kernel(out_shape=lambda x: x)
    def scale_by(x, out):
      out[...] = x[...] * s
    return scale_by(x, interpret=True)
  with pytest.raises(mg.KernelTypeError) as e:
    jax.jit(f)(jnp.ones(128), 3.0)
  assert e.value.message.startswith("s is a value JAX is tracing") and "ml.scalar" in e.value.hint
  assert e.value.lineno == f.__code__.co_firstlineno + 3


def test_a_python_int_past_int32_for_an_ml_scalar_says_which_array_to_pass():
  """It was a raw OverflowError from NumPy, at the call and in .check."""
  from dropout import dropout, reference_mask
  x = jnp.ones((1024,), jnp.float32)
  with pytest.raises(mg.SignatureError) as e:
    dropout(x, 2 ** 32 - 1, interpret=True)
  assert "int32" in e.value.message and "jnp.uint32(seed)" in e.value.hint
  assert e.value.filename == __file__
  got = dropout(x, jnp.uint32(2 ** 32 - 1), p=0.5, interpret=True)
  np.testing.assert_array_equal(np.asarray(got) != 0, reference_mask(1024, 2 ** 32 - 1, 0.5))


@mg.mgpu_kernel(out_shape=S((128,), jnp.int32))
def iota128(out):
  out[...] = ml.arange(128)


def test_a_kernel_of_no_traced_inputs_under_jit_is_staged_not_run():
  """With no traced input the call ran eagerly while JAX traced (NoGpuError when exporting)."""
  exported = jax.export.export(jax.jit(lambda x: iota128() + x), platforms=["cuda"])(S((128,), jnp.int32))
  assert exported.mlir_module().count("@mosaic_gpu") >= 1
  got = jax.jit(lambda x: iota128(interpret=True) + x)(jnp.ones((128,), jnp.int32))
  np.testing.assert_array_equal(got, np.arange(128) + 1)


@pytest.mark.skipif(not NO_GPU, reason="the error of a machine without a GPU")
def test_no_gpu_under_eager_vmap_points_at_the_users_call():
  """It pointed into jax/_src/custom_batching.py."""
  with pytest.raises(mg.NoGpuError) as e:
    jax.vmap(iota_like)(jnp.ones((4, 128)))
  assert e.value.filename == __file__ and "jax.vmap(iota_like)" in e.value.loc.source_line


@mg.mgpu_kernel(out_shape=lambda x: x)
def iota_like(x, out):
  out[...] = x[...] * 2.0


def test_an_unknown_option_of_a_kernel_without_source_is_still_readable():
  """Its message could not be printed (a location of None)."""
  with pytest.raises(mg.SignatureError) as e:
    mg.mgpu_kernel(out_shape=lambda x: x, num_warps=4)(lambda x, o: None)
  assert "no option num_warps=" in str(e.value) and e.value.filename == __file__


def test_decorator_and_call_options_are_checked_where_written():
  """cache_size=0 was a raw ValueError; interpret='false' silently interpreted; an output of
  shape (-1,) was reported at a store; an empty input's grid of (0,) did not say why."""
  with pytest.raises(mg.LaunchConfigError) as e:
    mg.mgpu_kernel(out_shape=lambda x: x, cache_size=0)(iota_like.fn)
  assert e.value.message.startswith("cache_size must be a positive int") and e.value.filename == __file__
  with pytest.raises(mg.SignatureError) as e:
    iota_like(jnp.ones(128), interpret="false")
  assert "interpret= takes True, False or None" in e.value.message and e.value.filename == __file__
  with pytest.raises(mg.LaunchConfigError) as e:
    negative_out(jnp.ones(128), interpret=True)
  assert "shape (-1,)" in e.value.message and "out_shape=" in e.value.loc.source_line
  # (an output only atomics update starts at 0 with no programs too: tests/test_probe35a.py has the MG007)
  np.testing.assert_array_equal(count_rows(jnp.ones((0, 128)), interpret=True), np.zeros(1))


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.float32), grid=lambda x: (x.shape[0] // 8,))
def count_rows(x, out):
  ml.atomic_add(out.at[0], ml.sum(x.at[ml.ds(ml.program_id(0) * 8, 8), :][...]))


@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0],), jnp.float32)), grid=lambda x: (x.shape[0] // 8,),
                input_output_aliases={0: 0})
def scale_rows(x, y, s):
  rows = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[rows, :][...]
  y.at[rows, :][...] = v * 2
  s.at[rows][...] = ml.sum(v, axis=1)


def test_a_call_whose_outputs_are_all_empty_returns_them_without_a_launch():
  """An empty batch: the grid callable gives no programs and there is nothing to write, so the
  call returns the empty outputs (an aliased one is its input), as jnp does; was MG007."""
  x = jnp.ones((0, 128), jnp.float32)
  for run in (lambda x: scale_rows(x, interpret=True), jax.jit(scale_rows)):
    y, s = run(x)
    assert (y.shape, y.dtype, s.shape, s.dtype) == ((0, 128), jnp.float32, (0,), jnp.float32)
  y, s = jax.vmap(scale_rows)(jnp.ones((3, 0, 128), jnp.float32))
  assert y.shape == (3, 0, 128) and s.shape == (3, 0)
  assert numpy_values(jnp.ones((0,)), interpret=True).shape == (0,)
  np.testing.assert_array_equal(scale_rows(jnp.ones((8, 128)), interpret=True)[1], np.full(8, 128.0))


@mg.mgpu_kernel(out_shape=lambda x: S((-1,), x.dtype))
def negative_out(x, out):
  out[...] = x[...]


def test_the_matmul_examples_reject_operands_whose_inner_dimensions_differ():
  """matmul of (128, 128) and (64, 256) returned a[:, :64] @ b (TMA reads past b's end as zeros)."""
  import matmul as M
  with pytest.raises(mg.SignatureError) as e:
    M.matmul(jnp.ones((128, 128), jnp.bfloat16), jnp.ones((64, 256), jnp.bfloat16), interpret=True)
  assert "a @ b needs a (m, k) and b (k, n), got (128, 128) and (64, 256)" in e.value.message


def test_an_export_for_cuda_of_an_interpreted_call_holds_the_compiled_kernel():
  """With MGPU_DSL_INTERPRET=1 (or interpret=True) an export for cuda failed inside JAX (a
  callback has no CUDA lowering without a GPU); it now holds the kernel, as without it."""
  f = jax.jit(lambda x: iota_like(x, interpret=True) + 1.0)
  text = jax.export.export(f, platforms=["cuda"])(S((128,), jnp.float32)).mlir_module()
  assert "@mosaic_gpu" in text and "callback" not in text
  np.testing.assert_array_equal(f(jnp.arange(128, dtype=jnp.float32)), np.arange(128) * 2.0 + 1)


def test_num_warps_at_the_call_says_where_it_lives():
  with pytest.raises(mg.SignatureError) as e:
    iota_like(jnp.ones(128), num_warps=4, interpret=True)
  assert "no constexpr parameter 'num_warps'" in e.value.message and "block=128" in e.value.hint


@ml.inline
def _twice(v):
  w = v * 2.0
  return w


@mg.mgpu_kernel(out_shape=lambda x: x)
def doubled_by_helper(x, out):
  out[...] = _twice(x[...])


@pytest.mark.skipif(not NO_GPU, reason="the error of a machine without a GPU")
def test_no_gpu_under_jit_points_at_the_kernels_def_not_a_helper_above_it():
  """It pointed at the first line of the module, inside the @ml.inline helper."""
  with pytest.raises(mg.NoGpuError) as e:
    jax.jit(doubled_by_helper)(jnp.ones(128, jnp.float32))
  assert e.value.lineno == doubled_by_helper.fn.__code__.co_firstlineno + 1


@mg.mgpu_kernel(out_shape=lambda x: {"var": x, "mean": x})
def stats_named_out_of_order(x, var, mean):
  mean[...] = x[...]
  var[...] = x[...] * 0.0


@mg.mgpu_kernel(out_shape=lambda x: {"var": x, "mean": x})
def stats_in_sorted_order(x, mean, var):
  mean[...] = x[...]
  var[...] = x[...] * 0.0


@mg.mgpu_kernel(out_shape=lambda x: {"b": x, "a": x})
def stats_other_names(x, first, second):
  first[...] = x[...]
  second[...] = x[...] * 0.0


def test_dict_outputs_named_like_other_parameters_are_rejected_not_swapped():
  """A dict's leaves bind in sorted-key order: keys naming other output parameters swapped them."""
  from locate import expect
  e = expect(stats_named_out_of_order, [S((128,), jnp.float32)], mg.SignatureError,
             'out_shape=lambda x: {"var": x, "mean": x}',   # the decorator's out_shape= argument
             "out_shape's key 'mean' binds output parameter 'var', not the parameter named 'mean': a dict's"
             " outputs follow its sorted keys ('mean', 'var'), not parameter names")
  assert e.hint.startswith("name the output parameters in sorted-key order (mean, var)")
  x = jnp.arange(128, dtype=jnp.float32)
  for kernel in (stats_in_sorted_order, stats_other_names):    # matching names, or unrelated ones: fine
    got = kernel(x, interpret=True)
    first = got["mean"] if kernel is stats_in_sorted_order else got["a"]
    np.testing.assert_array_equal(np.asarray(first), np.asarray(x))


def test_out_shape_passed_positionally_is_named():
  """The docs once showed mgpu_kernel(out_shape, grid=...): a lambda taken for the kernel function
  was 'cannot read the source of <lambda>' (MG008) at the first call."""
  with pytest.raises(mg.LaunchConfigError) as e:
    mg.mgpu_kernel(lambda x: x, grid=(1,))
  assert e.value.message == ("mgpu_kernel's positional argument is the kernel function, got a lambda:"
                             " out_shape and the other options are passed by keyword")
  assert e.value.filename == __file__ and "out_shape=lambda x: x" in e.value.hint
  with pytest.raises(mg.LaunchConfigError):
    mg.mgpu_kernel(S((128,), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_out(x, out):
  buf = ml.smem((128, 64), jnp.float16)
  buf[...] = x[...].astype(jnp.float16)
  ml.copy(buf, out)


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_in(x, out):
  buf = ml.smem((128, 64), jnp.float16)
  ml.copy(x, buf)
  out[...] = buf[...].astype(jnp.float32)


def test_a_copy_dtype_hint_converts_towards_the_other_side():
  """The hint said buf2[...] = buf[...].astype(jnp.float16): buf's own type, which fixes nothing."""
  spec = S((128, 64), jnp.float32)
  with pytest.raises(mg.CopyDtypeError) as e:
    stage_out.check(spec)
  assert e.value.hint.endswith("buf2 = ml.smem((128, 64), jnp.float32); buf2[...] = buf[...].astype(jnp.float32);"
                               " ml.copy(buf2, out)")
  with pytest.raises(mg.CopyDtypeError) as e:
    stage_in.check(spec)
  assert e.value.hint.endswith("buf2 = ml.smem((128, 64), jnp.float32); ml.copy(x, buf2);"
                               " buf[...] = buf2[...].astype(jnp.float16)")
