"""Probe 27g (the mistakes corpus: wrong kernels real users write): a run-time while whose
condition nothing in its body changes (a hang), positional parameters with defaults and methods'
`self` taken for refs, hints that named the wrong ref or the wrong window size."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
X = S((1024, 64), F32)


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _x():
  return np.random.RandomState(0).randn(1024, 64).astype(np.float32)


# ---------------------------------------------------------------- a while that never ends
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def while_forgot_step(x, out):
  i = ml.program_id(0)
  k = i
  while k < 4:
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def while_with_step(x, out):             # while_forgot_step's hint followed
  i = ml.program_id(0)
  k = i
  while k < 4:
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
    k += 1
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


def test_while_whose_condition_never_changes_is_rejected_not_a_hang():
  e = expect(while_forgot_step, [X], mg.KernelTypeError, "k < 4",
             "this while condition never changes: the loop's body assigns none of k, so a program that"
             " enters the loop never leaves it (the GPU would hang)")
  assert "k += 1" in e.hint
  x = _x()
  np.testing.assert_array_equal(np.asarray(while_with_step(x, interpret=True)), 2 * x)
  assert "mosaic_gpu" in _export(while_with_step, X)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def while_reads_memory(x, out):          # a condition that reads memory may change: not this error
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
  n = 0
  while (x[i * 128, 0] > 100.0) & (n < 3):
    n += 1


def test_while_whose_condition_changes_is_accepted():
  x = _x()
  np.testing.assert_array_equal(np.asarray(while_reads_memory(x, interpret=True)), x)


# ---------------------------------------------------------------- parameters taken for refs
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def default_positional(x, out, scale=2.0):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * scale


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def default_annotated(x, out, scale: ml.constexpr = 2.0):        # the hint's first way
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * scale


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def default_keyword_only(x, out, *, scale=2.0):                  # the hint's second way
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * scale


def test_a_positional_parameter_with_a_default_is_not_taken_for_an_output():
  e = expect(default_positional, [X], mg.SignatureError, "scale=2.0",
             "scale has a default (2.0), but a positional parameter without ml.constexpr is a ref (an input or"
             " output array), so scale would be taken for an array")
  assert "scale: ml.constexpr = 2.0" in e.hint and "*, scale=2.0" in e.hint
  x = _x()
  for k in (default_annotated, default_keyword_only):
    np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), 2 * x)
    np.testing.assert_array_equal(np.asarray(k(x, scale=3.0, interpret=True)), 3 * x)
    assert "mosaic_gpu" in _export(k, X)


class _Model:
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
  def forward(self, x, out):
    i = ml.program_id(0)
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def test_a_method_kernel_whose_out_shape_takes_no_self_says_kernels_bind_no_self():
  x = _x()
  for call in (lambda: _Model().forward(x, interpret=True), lambda: _Model.forward.check(X)):
    with pytest.raises(mg.SignatureError) as info:
      call()
    assert info.value.message == ("forward's first parameter is self, but a kernel is not a method: it binds"
                                  " no self (every parameter is an array)")
    assert "@staticmethod" in info.value.hint


# ---------------------------------------------------------------- an atomic given a value
@mg.mgpu_kernel(out_shape=lambda x: S((), F32), grid=(8,))
def atomic_into_value(x, out):
  i = ml.program_id(0)
  ml.atomic_add(out[...], ml.sum(x.at[ml.ds(i * 128, 128)][...]))


@mg.mgpu_kernel(out_shape=lambda x: S((4, 64), F32), grid=(8,))
def atomic_into_row_value(x, out):
  i = ml.program_id(0)
  ml.atomic_add(out[i % 4], ml.sum(x.at[ml.ds(i * 128, 128)][...], axis=0))


@mg.mgpu_kernel(out_shape=lambda x: S((), F32), grid=(8,))
def atomic_into_ref(x, out):               # atomic_into_value's hint followed
  i = ml.program_id(0)
  ml.atomic_add(out, ml.sum(x.at[ml.ds(i * 128, 128)][...]))


@mg.mgpu_kernel(out_shape=lambda x: S((4, 64), F32), grid=(8,))
def atomic_into_row(x, out):               # atomic_into_row_value's hint followed
  i = ml.program_id(0)
  ml.atomic_add(out.at[i % 4], ml.sum(x.at[ml.ds(i * 128, 128)][...], axis=0))


def test_an_atomic_given_the_value_read_from_a_ref_names_that_ref():
  e = expect(atomic_into_value, [X], mg.KernelTypeError, "ml.atomic_add(",
             "ml.atomic_add needs a ref (an output, an ml.smem buffer or a view of one), got a scalar")
  assert e.hint == ("pass the ref's window itself, not the value read from it:"
                    " ml.atomic_add(out, ml.sum(x.at[ml.ds(i * 128, 128)][...]))")
  e = expect(atomic_into_row_value, [X], mg.KernelTypeError, "ml.atomic_add(",
             "ml.atomic_add needs a ref (an output, an ml.smem buffer or a view of one), got a register tensor")
  assert e.hint == ("pass the ref's window itself, not the value read from it:"
                    " ml.atomic_add(out.at[i % 4], ml.sum(x.at[ml.ds(i * 128, 128)][...], axis=0))")
  x = _x()
  np.testing.assert_allclose(np.asarray(atomic_into_ref(x, interpret=True)), x.sum(), rtol=1e-5)
  rows = x.reshape(8, 128, 64).sum(1).reshape(2, 4, 64).sum(0)
  np.testing.assert_allclose(np.asarray(atomic_into_row(x, interpret=True)), rows, rtol=1e-5, atol=1e-4)
  for k in (atomic_into_ref, atomic_into_row):
    assert "mosaic_gpu" in _export(k, X)


# ---------------------------------------------------------------- ml.copy's operands swapped
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def copy_swapped(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 64))
  ml.copy(buf, x.at[ml.ds(i * 128, 128)])
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def copy_in_order(x, out):                 # copy_swapped's hint followed
  i = ml.program_id(0)
  buf = ml.smem((128, 64))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


def test_a_copy_from_smem_into_an_input_hints_the_operands_may_be_swapped():
  e = expect(copy_swapped, [X], mg.InputWriteError, "ml.copy(buf, x",
             "cannot write into x: it is an input of the kernel, and inputs are read-only (JAX arrays are"
             " immutable)")
  assert e.hint.startswith("ml.copy(src, dst) copies its first argument into its second: to fill buf from x,"
                           " swap them, ml.copy(x.at[ml.ds(i * 128, 128)], buf); else write the result")
  x = _x()
  np.testing.assert_array_equal(np.asarray(copy_in_order(x, interpret=True)), x)
  assert "mosaic_gpu" in _export(copy_in_order, X)


# ---------------------------------------------------------------- a run-time slice of static size
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def slice_of_program_rows(x, out):
  i = ml.program_id(0)
  out[ml.ds(i * 128, 128), :] = x[i * 128:(i + 1) * 128, :]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def window_of_program_rows(x, out):        # slice_of_program_rows's hint followed
  i = ml.program_id(0)
  out[ml.ds(i * 128, 128), :] = x.at[ml.ds(i * 128, 128), :][...]


def test_a_slice_whose_bounds_differ_by_a_constant_is_a_window_of_that_size():
  """(Hinted ml.ds(i * 128, 128) until probe 39a, which takes the slice as that window.)"""
  x = _x()
  np.testing.assert_array_equal(np.asarray(slice_of_program_rows(x, interpret=True)), x)
  np.testing.assert_array_equal(np.asarray(window_of_program_rows(x, interpret=True)), x)
  assert "mosaic_gpu" in _export(window_of_program_rows, X)


# ---------------------------------------------------------------- an @ml.inline method
class _Scaler:
  def __init__(self, s):
    self.s = s

  @ml.inline
  def apply(self, v):
    return v * self.s

  @ml.inline
  def broken(self, v):
    return jax.scipy.special.dawsn(v)   # (no form; jnp.sinc (48b), nextafter (49b), spacing (50e), i0 (56f) compute)


_scaler = _Scaler(3.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def calls_inline_method(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = _scaler.apply(x.at[ml.ds(i * 128, 128)][...])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def calls_broken_inline_method(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = _scaler.broken(x.at[ml.ds(i * 128, 128)][...])


def test_an_inline_method_called_on_an_instance_binds_the_instance():
  x = _x()
  np.testing.assert_array_equal(np.asarray(calls_inline_method(x, interpret=True)), 3 * x)
  assert "mosaic_gpu" in _export(calls_inline_method, X)
  with pytest.raises(mg.KernelTypeError) as info:
    calls_broken_inline_method.check(X)
  e = info.value
  assert e.message == "dawsn cannot take a register tensor inside a kernel"
  assert e.lineno == _Scaler.broken.fn.__code__.co_firstlineno + 2      # (the decorator's line, the def, the return)
  assert any("in this call of broken" in n for n in e.notes)


# ---------------------------------------------------------------- Triton's tl.math namespace
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def triton_math_namespace(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = ml.math.exp(x.at[ml.ds(i * 128, 128)][...])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def ml_exp(x, out):                        # triton_math_namespace's hint followed
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = ml.exp(x.at[ml.ds(i * 128, 128)][...])


def test_tritons_math_namespace_names_mls_own_functions():
  x = _x()          # ml.math.exp was MG002 naming ml.exp until probe 48g: it is ml.exp
  np.testing.assert_allclose(np.asarray(triton_math_namespace(x, interpret=True)), np.exp(x), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(ml_exp(x, interpret=True)), np.exp(x), rtol=1e-6)
  assert "mosaic_gpu" in _export(triton_math_namespace, X)


# ---------------------------------------------------------------- a config dict changed in place
_CFG = {"scale": 2.0}
_FACTORS = [2.0]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def reads_config(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * _CFG["scale"] * _FACTORS[0]


def test_a_global_dict_or_list_changed_in_place_recompiles_the_kernel():
  x = _x()
  try:
    np.testing.assert_array_equal(np.asarray(reads_config(x, interpret=True)), x * 4.0)
    _CFG["scale"] = 4.0                      # (powers of two: the products are exact)
    np.testing.assert_array_equal(np.asarray(reads_config(x, interpret=True)), x * 8.0)
    _FACTORS[0] = 8.0
    np.testing.assert_array_equal(np.asarray(reads_config(x, interpret=True)), x * 32.0)
    assert reads_config.cache_info().retraces == 2
  finally:
    _CFG["scale"], _FACTORS[0] = 2.0, 2.0
  assert "mosaic_gpu" in _export(reads_config, X)
