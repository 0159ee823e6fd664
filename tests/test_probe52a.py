"""Probe 52a: user mistakes whose diagnostics were right in place but not in advice. A misspelt method or
attribute (`x.lod()`, `v.asype(f32)`, `x.shap[0]`) listed every method instead of naming the one meant; an
augmented assignment of a whole ref (`out *= 2.0`, `buf += 1.0`) said to read the ref into registers, where the
fix is `out[...] *= 2.0`; a ref stored into one element (`out[i] = v` of `for i, v in enumerate(x)`) said "store a
number or a scalar"; `0.0 in v` of a register tensor hinted `((0.0) == 1.0) | ((0.0) == 2.0)` (and `not in` named
the scalar on its left as the tensor); `ml.copy(x.at[::2], buf)` said to store "a value" with an assignment.
Each now says what to write, with the user's names, and the kernel written so works."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _x(shape, seed=0):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- misspelt methods and attributes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def typo_load(x, out):
  out[...] = x.lod()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def typo_store(x, out):
  out.stroe(x[...] * 2)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def typo_astype(x, out):
  out[...] = x[...].asype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def typo_ref_astype(x, out):
  out[...] = x.astyp(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def typo_shape(x, out):
  out[...] = x[...] * x.shap[0]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype), grid=(1,))
def typo_transpose(x, out):
  out[...] = x[...].tranpose()


def test_a_misspelt_method_or_attribute_names_the_one_meant():
  """Each hint listed every method of refs and register values ("refs have .at, .load, ..."); now it names
  the close one, with the call's own arguments, read from the ref first where only a register value has it."""
  spec = [S((128,), F32)]
  expect(typo_load, spec, mg.KernelTypeError, "x.lod", "a GMEM ref has no attribute 'lod'",
         hint="did you mean x.load()?")
  expect(typo_store, spec, mg.KernelTypeError, "out.stroe", "a GMEM ref has no attribute 'stroe'",
         hint="did you mean out.store(x[...] * 2)?")
  expect(typo_astype, spec, mg.KernelTypeError, "x[...].asype", "a register tensor has no attribute 'asype'",
         hint="did you mean x[...].astype(jnp.float32)?")
  expect(typo_ref_astype, spec, mg.KernelTypeError, "x.astyp", "a GMEM ref has no attribute 'astyp'",
         hint="did you mean x[...].astype(jnp.float32)? (x is a ref: read it into registers with x[...] first)")
  expect(typo_shape, spec, mg.KernelTypeError, "x.shap", "a GMEM ref has no attribute 'shap'",
         hint="did you mean x.shape?")
  expect(typo_transpose, [S((16, 8), F32)], mg.KernelTypeError, "x[...].tranpose",
         "a register tensor has no attribute 'tranpose'", hint="did you mean x[...].transpose()?")


# ---------------------------------------------------------------- an augmented assignment of a whole ref
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def scale_out(x, out, *, fixed: ml.constexpr = False):
  out[...] = x[...]
  if fixed:
    out[...] *= 2.0
  else:
    out *= 2.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def bump_smem(x, out, *, fixed: ml.constexpr = False):
  buf = ml.smem((128,), jnp.float32)
  ml.copy(x, buf)
  if fixed:
    buf[...] += 1.0
  else:
    buf += 1.0
  ml.copy(buf, out)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def scale_input(x, out):
  x *= 2.0
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def bump_row(x, out):
  out[...] = x[...]
  row = out.at[3]
  row -= 1.0


def test_an_augmented_assignment_of_a_whole_ref_updates_through_an_index():
  """`out *= 2.0` (NumPy's in-place update, Pallas's o_ref[...] *= 2 without the index) said "* works on
  register values ... read it into registers first: out[...]", whose fix rebinds the output name; the hint now
  writes the update through the index (or, for an input, into an output), and the kernel so written works."""
  spec = [S((128,), F32)]
  expect(scale_out, spec, mg.KernelTypeError, "out *= 2.0",
         "out *= ... would rebind the name out, a GMEM ref, to a value: a ref's elements are updated through an index",
         hint="update its elements through an index: out[...] *= 2.0")
  expect(bump_smem, spec, mg.KernelTypeError, "buf += 1.0",
         "buf += ... would rebind the name buf, an SMEM ref, to a value: a ref's elements are updated through an"
         " index", hint="update its elements through an index: buf[...] += 1.0")
  expect(scale_input, spec, mg.KernelTypeError, "x *= 2.0",
         "x *= ... would rebind the name x, a GMEM ref, to a value: a ref's elements are updated through an index",
         hint="x is an input, which is read-only: compute in registers, v = x[...] * 2.0, and store v into an output"
              " (out[...] = v)")
  expect(bump_row, [S((8, 64), F32)], mg.KernelTypeError, "row -= 1.0",
         "row -= ... would rebind the name row, a GMEM ref, to a value: a ref's elements are updated through an"
         " index", hint="update its elements through an index: row[...] -= 1.0")
  x = _x(128)
  np.testing.assert_array_equal(scale_out(x, fixed=True, interpret=True), x * 2)
  np.testing.assert_array_equal(bump_smem(x, fixed=True, interpret=True), x + 1)
  scale_out.check(*spec, fixed=True)
  bump_smem.check(*spec, fixed=True)


# ---------------------------------------------------------------- a ref stored into one element
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def double_each(x, out, *, fixed: ml.constexpr = False):
  for i, v in enumerate(x):
    if fixed:
      out[i] = v[...] * 2
    else:
      out[i] = v


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def first_of_rows(x, out, *, fixed: ml.constexpr = False):
  for i in ml.static_range(x.shape[0]):
    if fixed:
      out[i] = x.at[i][0]
    else:
      out[i] = x.at[i]


def test_a_ref_stored_into_one_element_is_read_first():
  """The hint was "store a number or a scalar"; it now reads the ref's element (the first of a wider view)."""
  expect(double_each, [S((8,), F32)], mg.KernelTypeError, "out[i] = v",
         "cannot store a GMEM ref into out[i]", nth=1, hint="read its element: out[i] = v[...]")
  expect(first_of_rows, [S((8, 4), F32)], mg.KernelTypeError, "out[i] = x.at[i]",
         "cannot store a GMEM ref into out[i]", nth=1,
         hint="read one element of it (x.at[i] has shape (4,)): out[i] = x.at[i][0]")
  x, rows = _x(8), _x((8, 4), seed=1)
  np.testing.assert_array_equal(double_each(x, fixed=True, interpret=True), x * 2)
  np.testing.assert_array_equal(first_of_rows(rows, fixed=True, interpret=True), rows[:, 0])
  first_of_rows.check(S((8, 4), F32), fixed=True)


# ---------------------------------------------------------------- `in` on a register tensor
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def flip_unless_zero(x, out, *, fixed: ml.constexpr = False):
  v = x[...]
  if (ml.any(v == 0.0) if fixed else 0.0 in v):
    out[...] = v
  else:
    out[...] = -v


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int32), grid=(1,))
def pid_absent(x, out):
  out[0] = 1 if ml.program_id(0) not in x[...] * 2 else 0


def test_in_on_a_register_tensor_hints_a_reduction():
  """`0.0 in v` hinted `((0.0) == 1.0) | ((0.0) == 2.0)` (the fix of `k in (1, 2)`), and `not in` named the
  scalar on its left as the tensor; the hint now reduces the comparison, ml.any(v == 0.0) / ml.all(... != ...)."""
  expect(flip_unless_zero, [S((128,), F32)], mg.UnsupportedSyntaxError, "0.0 in v",
         "`in` on a register tensor is not supported in a kernel",
         hint="reduce a comparison of every element: ml.any(v == 0.0)")
  expect(pid_absent, [S((128,), F32)], mg.UnsupportedSyntaxError, "ml.program_id(0) not in",
         "`not in` on a register tensor is not supported in a kernel",
         hint="reduce a comparison of every element: ml.all((x[...] * 2) != ml.program_id(0))")
  x = _x(128)
  zero = x.copy()
  zero[5] = 0.0
  np.testing.assert_array_equal(flip_unless_zero(x, fixed=True, interpret=True), -x)
  np.testing.assert_array_equal(flip_unless_zero(zero, fixed=True, interpret=True), zero)


# ---------------------------------------------------------------- ml.copy of a strided view
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype), grid=(1,))
def evens(x, out, *, fixed: ml.constexpr = False):
  buf = ml.smem((x.shape[0] // 2,))
  if fixed:
    buf[...] = x[::2]
  else:
    ml.copy(x.at[::2], buf)
  ml.copy(buf, out)


@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0], x.shape[1]), x.dtype), grid=(1,))
def interleave(x, out, *, fixed: ml.constexpr = False):
  buf = ml.smem(x.shape)
  ml.copy(x, buf)
  if fixed:
    out[::2] = buf[...]
    out[1::2] = buf[...] * 2
  else:
    ml.copy(buf, out.at[::2])
    ml.copy(buf, out.at[1::2])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=(1,))
def odd_columns(x, out):
  buf = ml.smem((x.shape[0], x.shape[1] // 2))
  ml.copy(x.at[:, 1::2], buf)
  ml.copy(buf, out)


def test_a_copy_of_a_strided_view_moves_it_through_registers():
  """The hint was "ml.copy moves data between refs; store a value into a ref with an assignment: buf[...] =
  value"; it now writes the strided read or write with the user's refs, and the kernels so written work."""
  expect(evens, [S((128,), F32)], mg.KernelTypeError, "ml.copy(x.at[::2], buf)",
         "ml.copy cannot move x.at[::2]: a strided view's elements are not consecutive in memory, and a TMA copy"
         " moves a window of consecutive ones",
         hint="move it through registers: buf[...] = x[::2] (or copy the step-1 window that covers it and slice the"
              " register tensor)")
  expect(interleave, [S((64, 32), F32)], mg.KernelTypeError, "ml.copy(buf, out.at[::2])",
         "ml.copy cannot move out.at[::2]: a strided view's elements are not consecutive in memory, and a TMA copy"
         " moves a window of consecutive ones",
         hint="move it through registers: out[::2] = buf[...] (or copy the step-1 window that covers it and slice"
              " the register tensor)")
  expect(odd_columns, [S((64, 128), F32)], mg.KernelTypeError, "ml.copy(x.at[:, 1::2], buf)",
         "ml.copy cannot move x.at[:, 1::2]: a strided view's elements are not consecutive in memory, and a TMA"
         " copy moves a window of consecutive ones",
         hint="move it through registers: buf[...] = x[:, 1::2] (or copy the step-1 window that covers it and"
              " slice the register tensor)")
  x, m = _x(128), _x((64, 32), seed=2)
  np.testing.assert_array_equal(evens(x, fixed=True, interpret=True), x[::2])
  want = np.empty((128, 32), np.float32)
  want[::2], want[1::2] = m, m * 2
  np.testing.assert_array_equal(interleave(m, fixed=True, interpret=True), want)
  evens.check(S((128,), F32), fixed=True)
  interleave.check(S((64, 32), F32), fixed=True)


# ---------------------------------------------------------------- Triton's sizes after the output pointers
@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (ml.cdiv(x.shape[0], 128),))
def add_sized(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: ml.constexpr = 128):
  offsets = ml.program_id(0) * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  mask = offsets < n_elements
  ml.store(output_ptr.at[offsets], ml.load(x_ptr.at[offsets], mask=mask) + ml.load(y_ptr.at[offsets], mask=mask),
           mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (ml.cdiv(x.shape[0], 128),))
def add_scalar_last(x_ptr, y_ptr, output_ptr, n: ml.scalar, BLOCK_SIZE: ml.constexpr = 128):
  offsets = ml.program_id(0) * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  ml.store(output_ptr.at[offsets], ml.load(x_ptr.at[offsets], mask=offsets < n), mask=offsets < n)


@mg.mgpu_kernel(out_shape=S((1000,), F32), grid=(8,))
def add_static(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: ml.constexpr = 128):
  offsets = ml.program_id(0) * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  mask = offsets < n_elements
  ml.store(output_ptr.at[offsets], ml.load(x_ptr.at[offsets], mask=mask), mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, y, n: x, grid=lambda x, y, n: (ml.cdiv(x.shape[0], 128),))
def add_moved(x_ptr, y_ptr, n_elements: ml.scalar, output_ptr, BLOCK_SIZE: ml.constexpr = 128):
  offsets = ml.program_id(0) * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  mask = offsets < n_elements
  ml.store(output_ptr.at[offsets], ml.load(x_ptr.at[offsets], mask=mask) + ml.load(y_ptr.at[offsets], mask=mask),
           mask=mask)


def test_a_size_after_the_output_pointers_moves_before_the_outputs():
  """The Triton tutorial's `add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE)` with a constexpr default,
  called add(x, y, 1000), was hinted `pass it by keyword: add_sized(..., BLOCK_SIZE=1000)` (the size taken for the
  block); with a static out_shape the size became an output, and `offsets < n_elements` hinted reading it,
  n_elements[...]. Both hints now move the size before the outputs as an ml.scalar input, which works."""
  from locate import expect_call
  spec = [S((1000,), F32), S((1000,), F32), 1000]
  sized = ("{p} follows output_ptr, among the outputs (parameters are the inputs, then the outputs), so 1000 would"
           " bind a constexpr: a run-time number is an ml.scalar input, before the outputs, def {k}(x_ptr, y_ptr,"
           " {p}: ml.scalar, output_ptr, ...); or drop {p} and read sizes off the refs (x_ptr.shape[0] is a Python"
           " int in the kernel)")
  message = "{k} was given 1 extra positional argument (int 1000) after its 2 inputs: pass constexprs by keyword"
  expect_call(add_sized, spec, mg.SignatureError, "def add_sized", message.format(k="add_sized"),
              hint=sized.format(p="n_elements", k="add_sized"))
  expect_call(add_scalar_last, spec, mg.SignatureError, "def add_scalar_last", message.format(k="add_scalar_last"),
              hint=sized.format(p="n", k="add_scalar_last"))
  expect(add_static, spec, mg.KernelTypeError, "offsets < n_elements",
         "< works on register values, got n_elements (GMEM ref)",
         hint="n_elements is an output parameter (parameters are the inputs, then the outputs; Triton passes sizes"
              " after the output pointers): a run-time number is an ml.scalar input, before the outputs, n_elements:"
              " ml.scalar; or drop n_elements and read sizes off the refs (x.shape[0] is a Python int in the kernel)")
  x, y = _x(1000), _x(1000, seed=1)
  np.testing.assert_array_equal(add_moved(x, y, 1000, interpret=True), x + y)
  add_moved.check(*spec)


# ---------------------------------------------------------------- `==` typed for `=`, an update without its `=`
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def copy_typo(x, out, *, fixed: ml.constexpr = False):
  if fixed:
    out[...] = x[...]
  else:
    out[...] == x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def double_typo(x, out):
  y = x[...]
  y == y * 2
  out[...] = y


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def sum_dropped(x, out, *, fixed: ml.constexpr = False):
  acc = ml.zeros(x.shape, jnp.float32)
  for i in range(4):
    if fixed:
      acc += x[...]
    else:
      acc + x[...]
  out[...] = acc


def test_a_dropped_comparison_or_update_says_the_assignment_meant():
  """`out[...] == x[...]` (`=` typed as `==`) was hinted `y = out[...] == x[...]` or `out[...] = out[...] ==
  x[...]`, and `acc + x[...]` `y = acc + x[...]`: the hints now write the assignment meant."""
  spec = [S((128,), F32)]
  expect(copy_typo, spec, mg.KernelTypeError, "out[...] == x[...]",
         "the result of out[...] == x[...] is dropped: the expression makes a new value, so this statement does"
         " nothing", hint="== compares (and makes a new value); to assign or store, write one =: out[...] = x[...]")
  expect(double_typo, spec, mg.KernelTypeError, "y == y * 2",
         "the result of y == y * 2 is dropped: the expression makes a new value, so this statement does nothing",
         hint="== compares (and makes a new value); to assign or store, write one =: y = y * 2")
  expect(sum_dropped, spec, mg.KernelTypeError, "acc + x[...]",
         "the result of acc + x[...] is dropped: the expression makes a new value, so this statement does nothing",
         hint="to update acc, assign the result: acc += x[...] (acc = acc + x[...])")
  x = _x(128)
  np.testing.assert_array_equal(copy_typo(x, fixed=True, interpret=True), x)
  np.testing.assert_allclose(sum_dropped(x, fixed=True, interpret=True), 4 * x, rtol=1e-6)


# ---------------------------------------------------------------- a name nothing defines
BLOCK_M = 64


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def bare_program_id(x, out):
  out[...] = x[...] + program_id(0)  # noqa: F821


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def local_typo(x, out, *, scale: ml.constexpr = 2.0):
  acc = ml.zeros(x.shape, jnp.float32)
  for i in range(2):
    acc += x[...]
  out[...] = accc * scael + BLOCKM  # noqa: F821


def test_an_undefined_name_says_the_name_meant():
  """`program_id(0)` without `ml.` (Triton's `from triton.language import *`) and a misspelt local, constexpr or
  module global were hinted "kernels see their parameters, local names and module globals"; the hint now names
  the language's function, or the close name the kernel sees (each of a statement's unknown names)."""
  spec = [S((128,), F32)]
  expect(bare_program_id, spec, mg.UnknownNameError, "program_id(0)", "name 'program_id' is not defined",
         hint="program_id is the kernel language's: write ml.program_id (from mgpu_dsl import language as ml)")
  e = expect(local_typo, spec, mg.UnknownNameError, "accc", "name 'accc' is not defined", hint="did you mean acc?")
  assert [(o.message, o.hint) for o in e.errors[1:]] == [
      ("name 'scael' is not defined", "did you mean scale?"), ("name 'BLOCKM' is not defined", "did you mean BLOCK_M?")]


# ---------------------------------------------------------------- an assignment to an attribute
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def set_data(x, out):
  out.data = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: S((32, 128), x.dtype), grid=(1,))
def set_shape(x, out, *, fixed: ml.constexpr = False):
  v = x[...]
  if fixed:
    v = v.reshape((32, 128))
  else:
    v.shape = (32, 128)
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: S((32, 128), x.dtype), grid=(1,))
def set_ref_shape(x, out):
  x.shape = (32, 128)
  out[...] = x[...]


def test_an_assignment_to_an_attribute_says_what_to_write():
  """`out.data = v`, `v.shape = (32, 128)` (NumPy's in-place reshape) were MG001 with the list of supported
  statements; the hint now writes the store or the rebinding meant, and the message names the target."""
  spec = [S((64, 64), F32)]
  expect(set_data, spec, mg.UnsupportedSyntaxError, "out.data",
         "assigning to an attribute (out.data = ...) is not supported in a kernel",
         hint="a ref's elements are written through an index: out[...] = x[...] * 2")
  expect(set_shape, spec, mg.UnsupportedSyntaxError, "v.shape",
         "assigning to an attribute (v.shape = ...) is not supported in a kernel",
         hint="a register value's shape is fixed: bind the name to the reshaped value, v = v.reshape((32, 128))")
  expect(set_ref_shape, spec, mg.UnsupportedSyntaxError, "x.shape",
         "assigning to an attribute (x.shape = ...) is not supported in a kernel",
         hint="x is a ref: its shape is the array's; reshape the array outside the kernel (free in XLA), or read it"
              " and reshape the value, v = x[...].reshape((32, 128))")
  x = _x((64, 64))
  np.testing.assert_array_equal(set_shape(x, fixed=True, interpret=True), x.reshape(32, 128))


# ---------------------------------------------------------------- launch options at the call, a list for an array
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def doubled(x, out):
  rows = ml.ds(ml.program_id(0) * 128, 128)
  out.at[rows][...] = x.at[rows][...] * 2


@mg.mgpu_kernel(out_shape=lambda x, *, n: x, grid=lambda x, *, n: (n,))
def doubled_in(x, out, *, n: ml.constexpr):
  t = x.shape[0] // n
  rows = ml.ds(ml.program_id(0) * t, t)
  out.at[rows][...] = x.at[rows][...] * 2


def test_a_launch_option_at_the_call_or_a_list_for_an_array_says_where_it_goes():
  """`doubled(x, grid=(2,))` (pallas_call's habit) was hinted "its constexpr parameters are: none", and
  `doubled([x])` "grid is called with the kernel's inputs"; the hints now say where each goes."""
  import pytest
  x = _x(256)
  with pytest.raises(mg.SignatureError) as info:
    doubled(x, grid=(2,), interpret=True)
  e = info.value
  assert e.message == "doubled has no constexpr parameter 'grid'"
  assert e.hint == ("grid= is the decorator's, not the call's: @mg.mgpu_kernel(..., grid=(2,)) (a call passes the"
                    " inputs and constexprs); for one that varies per call, make it a callable of a constexpr"
                    " parameter n of the kernel (`*, n: ml.constexpr` in its def): grid=lambda x, *, n: (n,), called"
                    " k(x, n=...)")
  with pytest.raises(mg.SignatureError) as info:
    doubled(x, block=256, interpret=True)
  assert info.value.hint.startswith("block= is the decorator's, not the call's: @mg.mgpu_kernel(..., block=256)")
  for arg, kind, leaf in (([x], "list", "x[0]"), ({"a": x}, "dict", "x['a']")):
    with pytest.raises(mg.SignatureError) as info:
      doubled(arg, interpret=True)
    e = info.value
    assert e.message == f"the grid callable failed for 1 input(s) float32[256]: AttributeError: '{kind}' object has" \
                        " no attribute 'shape'"
    assert e.hint == (f"x was passed a {kind} (1 array), and the grid callable gets that {kind}, as the kernel's"
                      f" parameter does: pass the array itself ({leaf} where the {kind} holds one), or index the {kind}"
                      f" in the callable and the kernel ({leaf}.shape[0], {leaf}[...])")
  np.testing.assert_array_equal(doubled_in(x, n=2, interpret=True), 2 * x)


# ---------------------------------------------------------------- numbers quoted as written
@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=(1,))
def norm_rows(x, w, out):
  v = x[...]
  m = ml.mean(v, axis=1, keepdims=True)
  out[...] = (v - m) / ml.sqrt(ml.var(v, axis=1, keepdims=True) + 1e-5) * w[...][:, None]


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=(1,))
def low_bits(x, y, out):
  out[...] = (x[...] & 0xFF) + (y[...] >> 0b11) * 1_000


def test_a_message_quotes_numbers_as_written():
  """Messages quoted expressions as astor prints them, with Python's repr of each number: `1e-5` as 1e-05,
  `0xFF` as 255, `1_000` as 1000; they now quote a literal as the source writes it."""
  expect(norm_rows, [S((64, 256), F32), S((256,), F32)], mg.ShapeMismatchError, "(v - m) / ml.sqrt",
         "* on (v - m) / ml.sqrt(ml.var(v, axis=1, keepdims=True) + 1e-5) of shape (64, 256) and w[...][:, None] of"
         " shape (256, 1): the shapes do not broadcast (axis 0 of the result would be both 64 and 256)")
  expect(low_bits, [S((128,), jnp.int32), S((64,), jnp.int32)], mg.ShapeMismatchError, "(x[...] & 0xFF)",
         "+ on x[...] & 0xFF of shape (128,) and (y[...] >> 0b11) * 1_000 of shape (64,): the shapes do not broadcast"
         " (axis 0 of the result would be both 128 and 64)")


# ---------------------------------------------------------------- refs and values swapped in ml.store and ml.copy
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def store_swapped(x, out, *, fixed: ml.constexpr = False):
  if fixed:
    ml.store(out, x[...] * 2)
  else:
    ml.store(x[...] * 2, out)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_copy(x, out, *, fixed: ml.constexpr = False):
  i = ml.program_id(0)
  buf = ml.smem((x.shape[1],), x.dtype)
  if fixed:
    ml.copy(x.at[i], buf)
  else:
    ml.copy(x[i], buf)
  ml.copy(buf, out.at[i])


def test_a_ref_and_a_value_swapped_or_read_are_hinted_as_meant():
  """`ml.store(v, out)` (the value first) was hinted `ml.store(out, out), not into v`; `ml.copy(x[i], buf)` (Pallas's
  `x_ref[i]` for the view) "store a value into a ref with an assignment". Both now write the call meant."""
  expect(store_swapped, [S((128,), F32)], mg.KernelTypeError, "ml.store(x[...] * 2, out)",
         "ml.store needs a ref (a parameter, an ml.smem buffer or a view), got a register tensor",
         hint="the ref comes first, then the value: ml.store(out, x[...] * 2)")
  expect(row_copy, [S((4, 128), F32)], mg.KernelTypeError, "ml.copy(x[i], buf)",
         "ml.copy source must be a ref (a kernel parameter, an ml.smem buffer or a view), got a register tensor",
         hint="ml.copy moves data between refs: take the window as a view with .at, ml.copy(x.at[i], buf) (x.at[i] is"
              " a ref; x[i] reads its elements into registers)")
  x, rows = _x(128), _x((4, 128), seed=3)
  np.testing.assert_array_equal(store_swapped(x, fixed=True, interpret=True), 2 * x)
  np.testing.assert_array_equal(row_copy(rows, fixed=True, interpret=True), rows)
  row_copy.check(S((4, 128), F32), fixed=True)


# ---------------------------------------------------------------- the shape not first, Triton's pointer=
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def fill_swapped(x, out, *, fixed: ml.constexpr = False):
  if fixed:
    out[...] = x[...] + ml.full((128,), 0.5, jnp.float32) + ml.zeros((128,), jnp.float32)
  else:
    out[...] = x[...] + ml.full(0.5, (128,), jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def zeros_swapped(x, out):
  out[...] = x[...] + ml.zeros(jnp.float32, (128,))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def triton_pointer(x, out):
  ml.store(pointer=out, value=ml.load(x) * 2)


def test_arguments_in_another_order_or_tritons_keyword_are_hinted():
  """`ml.full(0.5, (128,), f32)` was "needs a static shape ..., got 0.5" (and `ml.zeros(f32, (128,))` "needs a dtype
  ..., got (128,)"), and Triton's `pointer=` had no rename; the hints now write the call meant."""
  spec = [S((128,), F32)]
  expect(fill_swapped, spec, mg.KernelTypeError, "ml.full(0.5",
         "ml.full's first argument is the shape, got 0.5 there and the shape (128,) as its value",
         hint="write the shape first, ml.full((128,), 0.5, jnp.float32) (ml.full(shape, value, dtype), as jnp's and"
              " Triton's)")
  expect(zeros_swapped, spec, mg.KernelTypeError, "ml.zeros(",
         "ml.zeros's first argument is the shape, got jnp.float32 there and the shape (128,) as its dtype",
         hint="write the shape first, ml.zeros((128,), jnp.float32) (ml.zeros(shape, dtype), as jnp's and Triton's)")
  expect(triton_pointer, spec, mg.KernelTypeError, "ml.store(",
         "ml.store: got an unexpected keyword argument 'pointer'",
         hint="write ref= for pointer=: ml.store(ref, value, mask=None, boundary_check=None)")
  x = _x(128)
  np.testing.assert_array_equal(fill_swapped(x, fixed=True, interpret=True), x + 0.5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8, x.shape[1] // 128))
def tiles_2d(x, out):
  w = (ml.ds(ml.program_id(0) * 8, 8), ml.ds(ml.program_id(1) * 128, 128))
  out.at[w][...] = x.at[w][...]


def test_an_input_of_too_few_axes_for_the_grid_callable_says_so():
  """`doubled(np.float32(1))` (a number for a vector) and a vector for a 2-D kernel were hinted "grid is called with
  the kernel's inputs (and the constexprs it names)" after the callable's IndexError; the hint now names the axis."""
  import pytest
  for kernel, arg, shape, axes, read, least in ((doubled, np.float32(1.0), "()", "0 axes", 0, "1, not a number"),
                                               (tiles_2d, _x(256), "(256,)", "1 axis", 1, "2")):
    with pytest.raises(mg.SignatureError) as info:
      kernel(arg, interpret=True)
    assert info.value.message.endswith("IndexError: tuple index out of range")
    assert info.value.hint == (f"x has shape {shape} ({axes}), and the grid callable reads x.shape[{read}]: pass x with"
                               f" the axes the kernel is written for (at least {least})")
