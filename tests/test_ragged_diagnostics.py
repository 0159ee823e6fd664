"""Every diagnostic of masks, runtime scalars, while loops, atomics and random numbers: class,
code, line, column, exact message and hint, at the user's own line."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
X = S((256, 64), F32)


# ---------------------------------------------------------------- partial tiles and masks
@mg.mgpu_kernel(out_shape=lambda x: x)
def unmasked_read_past_end(x, out):
  out.at[ml.ds(0, 128)][...] = x.at[ml.ds(192, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def window_starting_past_end(x, out):
  buf = ml.smem((128, 64), F32)
  ml.copy(x.at[ml.ds(256, 128)], buf)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((64, 64), x.dtype))
def copies_past_end(x, out):
  buf = ml.smem((128, 64), F32)
  ml.copy(x.at[ml.ds(192, 128)], buf)      # rows 256.. read as zeros
  ml.copy(buf, out.at[ml.ds(0, 128)])      # rows 64.. dropped


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_mask(x, out):
  out.at[ml.ds(0, 128)].store(x.at[ml.ds(0, 128)].load(mask=ml.zeros((128, 64), F32)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def mask_of_wrong_shape(x, out):
  m = ml.arange(64) < 10
  out.at[ml.ds(0, 128)].store(x.at[ml.ds(0, 128)].load(mask=m[:, None]))


@mg.mgpu_kernel(out_shape=lambda x: x)
def other_of_wrong_dtype(x, out):
  m = ml.arange(128)[:, None] < 100
  out.at[ml.ds(0, 128)][...] = x.at[ml.ds(0, 128)].load(mask=m, other=ml.sum(ml.arange(128)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def cdiv_of_floats(x, out):
  n = ml.cdiv(x.shape[0] / 2, 128)


def test_an_unmasked_register_read_past_the_end_is_rejected():
  e = expect(unmasked_read_past_end, [X], mg.IndexOutOfBoundsError, "x.at[ml.ds(192, 128)][...]",
             "ml.ds(192, 128) is out of bounds for dimension 0 of x (size 256)")
  assert "ml.copy" in e.hint and "mask" in e.hint


def test_a_window_starting_past_the_end_is_rejected():
  e = expect(window_starting_past_end, [X], mg.IndexOutOfBoundsError, "x.at[ml.ds(256, 128)]",
             "ml.ds(256, 128) is out of bounds for dimension 0 of x (size 256)")
  assert e.hint == ("the window has no element inside x (dimension 0 has size 256; it lies wholly past the end),"
                    " so neither a mask nor a TMA copy has anything to move: start it inside, ml.ds(s, 128) with"
                    " s < 256")


def test_tma_copies_may_run_past_the_end():
  builds(copies_past_end, X)


def test_a_mask_must_be_boolean():
  e = expect(float_mask, [X], mg.KernelTypeError, "x.at[ml.ds(0, 128)].load(",
             "ml.load's mask must be a boolean tensor, got a float32 tensor")
  assert "mask=m != 0" in e.hint


def test_a_mask_must_fit_the_window():
  e = expect(mask_of_wrong_shape, [X], mg.ShapeMismatchError, "x.at[ml.ds(0, 128)].load(",
             "ml.load on the mask of shape (64, 1) and x.at[ml.ds(0, 128)] of shape (128, 64): the shapes"
             " do not broadcast (axis 0 of the result would be both 64 and 128)")
  assert "broadcast" in e.hint


def test_other_must_have_the_refs_dtype():
  e = expect(other_of_wrong_dtype, [X], mg.DtypeMismatchError, "x.at[ml.ds(0, 128)].load(",
             "ml.load's other (int32) differs from x.at[ml.ds(0, 128)]'s dtype (float32)")
  assert e.hint == "convert it: other=(ml.sum(ml.arange(128))).astype(jnp.float32)"


def test_cdiv_needs_integers():
  e = expect(cdiv_of_floats, [X], mg.KernelTypeError, "ml.cdiv(", "ml.cdiv needs integers, got 128.0 and 128")
  assert e.hint == "ml.cdiv(n, 128)"


# ---------------------------------------------------------------- runtime scalars
@mg.mgpu_kernel(out_shape=lambda x: S((4,), F32))
def tensor_into_one_element(x, out):
  out[0] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: S((4,), jnp.int32))
def float_scalar_into_int(x, out):
  out[1] = ml.sum(x[...])


@mg.mgpu_kernel(out_shape=lambda x, a: x)
def scalar_param_given_an_array(x, alpha: ml.scalar, out):
  out[...] = x[...] * alpha


@mg.mgpu_kernel(out_shape=lambda x: x)
def scalar_output(x, out: ml.scalar):
  pass


def test_a_tensor_stored_into_one_element_is_rejected():
  e = expect(tensor_into_one_element, [S((128,), F32)], mg.ShapeMismatchError, "out[0]",
             "cannot store a tensor of shape (128,) into out[0], a single element")
  assert "ml.sum(x)" in e.hint


def test_a_scalar_store_keeps_the_dtype():
  e = expect(float_scalar_into_int, [S((128,), F32)], mg.StoreDtypeError, "out[1]",
             "cannot store ml.sum(x[...]) (float32) into out[1] (GMEM, int32): no implicit conversion")
  assert e.hint == "convert explicitly: (ml.sum(x[...])).astype(jnp.int32)"


def test_a_scalar_parameter_needs_a_number():
  e = expect(scalar_param_given_an_array, [S((128,), F32), S((4,), F32)], mg.SignatureError, "alpha",
             "alpha is annotated ml.scalar but was given an array of shape (4,) (float32)")
  assert "Python int or float" in e.hint


def test_a_scalar_parameter_is_an_input():
  e = expect(scalar_output, [S((128,), F32)], mg.SignatureError, "out: ml.scalar",
             "out is annotated ml.scalar but is an output parameter")
  assert "before the outputs" in e.hint


# ---------------------------------------------------------------- while, break, continue
@mg.mgpu_kernel(out_shape=lambda x: x)
def static_while(x, out, *, rounds: ml.constexpr = 3):
  v = x[...]
  while rounds > 0:
    v = v * 2
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def tensor_while(x, out):
  v = x[...]
  while v > 0.0:
    v = v - 1.0
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def while_changes_a_type(x, n, out):
  v = x[...]
  k = 0
  while k < n[...]:
    v = v.astype(jnp.float16)
    k += 1
  out[...] = v.astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def loop_skipping_an_iteration(x, n, out):
  v = x[...]
  for i in range(n[...]):
    if i == 2:
      continue
    v = v * 2
  out[...] = v


N = S((), jnp.int32)


def test_a_while_on_python_values_that_never_change_does_not_end():
  e = expect(static_while, [S((128,), F32)], mg.KernelTypeError, "rounds > 0",
             "this while condition is still the Python value True and nothing in the loop changes it: a loop on Python"
             " values runs while the kernel is traced, and this one does not end")
  assert "range(n)" in e.hint


def test_a_while_condition_is_a_boolean_scalar():
  e = expect(tensor_while, [S((128,), F32)], mg.KernelTypeError, "v > 0.0",
             "a while condition must be a boolean scalar, got a bool tensor of shape (128,)")
  assert "while ml.any(v > 0.0):" in e.hint and "ml.where(v > 0.0, a, b)" in e.hint


def test_a_while_carry_keeps_its_type():
  e = expect(while_changes_a_type, [S((128,), F32), N], mg.LoopCarryTypeError,
             "v = v.astype(jnp.float16)",
             "v enters the loop as a float32 tensor of shape (128,) but an iteration makes it a float16 tensor of shape (128,)")
  assert "astype(jnp.float32)" in e.hint


def test_continue_under_a_runtime_if_skips_the_rest_of_the_body():
  # was MG001; the rest of the body is now the if's other path (frontend/jumps.py)
  x = np.arange(128, dtype=np.float32)
  got = loop_skipping_an_iteration(jnp.asarray(x), jnp.array(5, jnp.int32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), x * 2 ** 4)


# ---------------------------------------------------------------- atomics
@mg.mgpu_kernel(out_shape=lambda x: x)
def atomic_into_input(x, out):
  ml.atomic_add(x, out[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def float32_atomic_max(x, out):
  ml.atomic_max(out, x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def atomic_on_one_smem_element(x, out):
  buf = ml.smem((128,), jnp.int32)
  ml.atomic_add(buf.at[3], 1)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def two_atomic_kinds(x, out):
  v = x[...].astype(jnp.int32)
  ml.atomic_add(out, v)
  ml.atomic_max(out, v)


@mg.mgpu_kernel(out_shape=lambda x: x)
def reduce_into_smem(x, out):
  buf = ml.smem((128,), F32)
  ml.copy(x, buf, reduce="add")


@mg.mgpu_kernel(out_shape=lambda x: x)
def reduce_with_a_typo(x, out):
  buf = ml.smem((128,), F32)
  ml.copy(x, buf)
  ml.copy(buf, out, reduce="sum")


@mg.mgpu_kernel(out_shape=lambda x: x)
def tma_max_of_float32(x, out):
  buf = ml.smem((128,), F32)
  ml.copy(x, buf)
  ml.copy(buf, out, reduce="max")


V = [S((128,), F32)]


def test_atomics_do_not_write_inputs():
  e = expect(atomic_into_input, V, mg.InputWriteError, "ml.atomic_add(",
             "ml.atomic_add updates x, an input: inputs are read-only")
  assert "starts at the operation's identity" in e.hint


def test_float32_atomic_max_works():
  # (MG106 until probe 39c; now two integer maxima on the float's bits, element by element)
  x = np.random.default_rng(2).standard_normal(128).astype(np.float32) - 1.0
  np.testing.assert_array_equal(np.asarray(float32_atomic_max(jnp.asarray(x), interpret=True)), x)
  float32_atomic_max.check(*V)


def test_an_atomic_on_one_smem_element_is_a_plain_update():
  e = expect(atomic_on_one_smem_element, V, mg.KernelTypeError, "ml.atomic_add(",
             "ml.atomic_add on a single SMEM element: a scalar is the same in every thread, so update it"
             " plainly")
  assert e.hint.startswith("buf[i] = buf[i] + v")


def test_an_output_takes_one_atomic_kind():
  e = expect(two_atomic_kinds, V, mg.KernelTypeError, "ml.atomic_max(",
             "out is updated with atomic add and atomic max: an output updated by atomics starts at the"
             " operation's identity, so it takes one kind")
  assert "its own output" in e.hint and "the atomic add" in e.notes[0]


def test_a_reducing_copy_goes_from_smem_to_gmem():
  e = expect(reduce_into_smem, V, mg.CopySpaceError, "ml.copy(x, buf",
             "ml.copy(..., reduce='add') combines SMEM into GMEM, but this copy goes from GMEM to SMEM")
  assert "ml.smem buffer" in e.hint


def test_a_reducing_copy_names_its_operation():
  e = expect(reduce_with_a_typo, V, mg.KernelTypeError, "ml.copy(buf, out",
             "ml.copy's reduce must be one of 'add', 'max', 'min', got 'sum'")
  assert e.hint == 'ml.copy(buf, out.at[...], reduce="add")'


def test_the_tma_engine_has_no_float32_max():
  expect(tma_max_of_float32, V, mg.UnsupportedDtypeError, "ml.copy(buf, out",
         "ml.copy(..., reduce='max') on float32 is not supported by the TMA engine: Hopper's atomic max"
         " takes bfloat16, float16, int32, int64, uint32")


# ---------------------------------------------------------------- random numbers
@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.uint32))
def float_seed(x, out):
  out[...] = ml.randint(ml.sum(x[...]), ml.arange(128))


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_offsets(x, out):
  out[...] = ml.rand(0, x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_number_offset(x, out):
  out[...] = ml.rand(0, 1.5) + x[...]


def test_a_seed_is_an_integer():
  e = expect(float_seed, V, mg.KernelTypeError, "ml.randint(",
             "a random seed must be a Python int or an integer scalar, got a scalar (float32)")
  assert e.hint == "convert it: ml.sum(x[...]).astype(jnp.int32), or pass a Python int"


def test_offsets_are_32_bit_integers():
  e = expect(float_offsets, V, mg.UnsupportedDtypeError, "ml.rand(",
             "ml.rand's offsets must be integers (int32 or uint32: one counter per number), got float32")
  assert e.hint == "convert them: x[...].astype(jnp.int32)"


def test_offsets_are_integers():
  # (an integer scalar is an offset, as Triton's tl.rand(seed, pid): probe 49g)
  e = expect(float_number_offset, V, mg.KernelTypeError, "ml.rand(",
             "ml.rand's offsets must be an integer tensor (one counter per number) or scalar, got a Python float")
  assert "ml.arange" in e.hint


@pytest.mark.parametrize("kernel", [unmasked_read_past_end, float_mask, static_while, atomic_into_input,
                                    float_seed], ids=lambda k: k.__name__)
def test_no_internal_text_reaches_the_user(kernel):
  with pytest.raises(mg.KernelError) as info:
    kernel.check(*(V if kernel is not unmasked_read_past_end and kernel is not float_mask else [X]))
  text = str(info.value)
  assert "Traceback" not in text and "mlir" not in text.lower() and "InternalError" not in text


@mg.mgpu_kernel(out_shape=lambda x, lab: S((x.shape[0],), jnp.int32), grid=lambda x, lab: (x.shape[0],))
def scalar_read_past_labels(x, lab, out):
  r = ml.program_id(0)
  out[r] = lab[r]


def test_a_scalar_read_the_grid_takes_past_the_end_is_rejected():
  # A labels array one shorter than the grid: program 1 certainly reads past it (as a window
  # read does, a single element is proved from the grid, not left to interpret mode).
  e = expect(scalar_read_past_labels, [S((2, 128), jnp.float32), S((1,), jnp.int32)], mg.IndexOutOfBoundsError,
             "lab[r]", "lab[1] is read in program (1, 0, 0), outside lab's shape (1,)")
  assert "ml.minimum" in e.hint
  builds(scalar_read_past_labels, S((2, 128), jnp.float32), S((2,), jnp.int32))
