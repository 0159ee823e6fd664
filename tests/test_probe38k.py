"""Probe 38k: mistakes kernel authors make and the diagnostics they get (7-12: tests/test_probe38k2.py).

1. A hint that converts or transposes an operand the user wrote as an expression (`i * 64.5`,
   `v * 2`, `av * 2.0`) writes that expression, parenthesised, not a placeholder (`i`, `x`, `a`)
   that may name another variable of the kernel (`a` was the kernel's GMEM input).
2. `ml.copy` given a register value (a ref read with `[...]`, a computed tile, a number) on either
   side says what the user meant: pass the ref without `[...]`, store with `ref[...] = v`, or read
   with `v = buf[...]` (the hint was "to write registers into a ref use ref[...] = value" even
   where a ref was to be read).
3. A list of register tiles, or a dict with int keys, indexed by a run-time scalar (`parts[i % 3]`,
   `d[i * 2 + 1]`) hints the select per entry over its keys, as a tuple of numbers already did; the
   generic hint spoke of tuples only.
4. A store of a value whose shape is not the window's says how it relates: a row statistic that
   lacks the window's column axis (`[:, None]`), the window's transpose (drop `.T`), size-1 axes
   the window lacks (`.reshape`); the store's messages quote the value as written (`v.T`), not
   the name it was computed from (`v`).
5. A grid of float counts (`x.shape[0] / 64`, `np.ceil(x.shape[0] / 64)`) says counts are ints and
   rewrites the callable with ml.cdiv (a NumPy float was called "a value known only at run time");
   an out_shape that gives a shape alone (`lambda x: x.shape`) is given a dtype.
6. An SMEM overflow where the user's buffer is still live while a scratch the compiler allocates (a
   transpose's, a sort's) is in use, and the two sharing memory would fit, names the line that needs
   the scratch and says to finish reading the buffer first (the hint was "use smaller tiles")."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

X = jax.ShapeDtypeStruct((256, 128), jnp.float32)
H = jax.ShapeDtypeStruct((256, 128), jnp.float16)


def _error(kernel, *specs):
  with pytest.raises(mg.KernelError) as info:
    kernel.check(*specs)
  return info.value


def _line(fn, text):
  import inspect
  lines, first = inspect.getsourcelines(fn)
  return first + next(k for k, l in enumerate(lines) if text in l)


# -- 1. hints write the user's expression, not a placeholder -----------------------------------

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def float_start(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64.5, 64)][...]


def test_a_float_window_start_is_converted_as_written():
  e = _error(float_start, X)
  assert type(e) is mg.KernelTypeError and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line(float_start, "64.5"), 35)
  assert e.message == "an index must be an integer scalar, got i * 64.5 (float32)"
  assert e.hint.endswith("convert a float32 that holds an index: (i * 64.5).astype(jnp.int32)")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def approx_f16(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.exp2(v * 2, approx=True).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def approx_f16_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.exp2((v * 2).astype(jnp.float32), approx=True).astype(out.dtype)


def test_exp2_approx_of_float16_expression_hint_converts_it_and_runs():
  e = _error(approx_f16, H)
  assert type(e) is mg.UnsupportedDtypeError and e.code == "MG106"
  assert (e.lineno, e.col_offset) == (_line(approx_f16, "approx=True"), 35)
  assert e.message == "ml.exp2(..., approx=True) works on float32, got v * 2 (float16)"
  assert e.hint == "compute in float32: ml.exp2((v * 2).astype(jnp.float32), approx=True)"
  x = (rand.normal(rand.key(0), (256, 128)) * 3).astype(jnp.float16)
  got = approx_f16_fixed(x, interpret=True)
  want = jnp.exp2(x.astype(jnp.float32) * 2).astype(jnp.float16)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=2e-3)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def sort_columns(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.sort(v * 2, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def sort_columns_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.sort((v * 2).T).T


def test_sort_along_axis_0_hint_transposes_the_expression_and_sorts_columns():
  x = rand.normal(rand.key(1), (256, 128))
  got = sort_columns_fixed(x, interpret=True)
  want = jnp.sort((x * 2).reshape(4, 64, 128), axis=1).reshape(256, 128)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  # (axis=0 was MG003 whose hint wrote the transposes until probe 52d made the sort do them)
  np.testing.assert_array_equal(np.asarray(sort_columns(x, interpret=True)), np.asarray(want))


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
                grid=lambda a, b: (a.shape[0] // 64,))
def dot_f32_a(a, b, out):
  i = ml.program_id(0)
  b_s = ml.smem((128, 128))
  ml.copy(b, b_s)
  av = a.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.dot(av * 2.0, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
                grid=lambda a, b: (a.shape[0] // 64,))
def dot_f32_a_fixed(a, b, out):
  i = ml.program_id(0)
  b_s = ml.smem((128, 128))
  ml.copy(b, b_s)
  av = a.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.dot((av * 2.0).astype(jnp.float16), b_s)


def test_a_register_operand_of_float32_is_named_by_its_expression_not_the_input_a():
  e = _error(dot_f32_a, X, jax.ShapeDtypeStruct((128, 128), jnp.float16))
  assert type(e) is mg.UnsupportedDtypeError and e.code == "MG106"
  assert (e.lineno, e.col_offset) == (_line(dot_f32_a, "ml.dot"), 35)
  assert e.message == "ml.dot takes operand a from registers in bfloat16 or float16 only, got av * 2.0 (float32)"
  assert e.hint == "convert it to b's dtype: ml.dot((av * 2.0).astype(jnp.float16), ...)"
  a = rand.normal(rand.key(2), (256, 128))
  b = rand.normal(rand.key(3), (128, 128)).astype(jnp.float16)
  got = dot_f32_a_fixed(a, b, interpret=True)
  want = (a * 2).astype(jnp.float16).astype(jnp.float32) @ b.astype(jnp.float32)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def float_register_index(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v + v[ml.sum(v) * 0.0]


def test_a_float_register_index_is_converted_as_written():
  e = _error(float_register_index, X)
  assert type(e) is mg.KernelTypeError and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line(float_register_index, "v + v["), 39)
  assert e.message == "an index of v must be an integer, got ml.sum(v) * 0.0 (float32)"
  assert e.hint == "convert it: (ml.sum(v) * 0.0).astype(jnp.int32)"


# -- 2. ml.copy of a register value ------------------------------------------------------------

@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_loaded(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 128))
  ml.copy(x.at[ml.ds(i * 128, 128)][...], buf)
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_loaded_fixed(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 128))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_into_value(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 128))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  v = ml.zeros((128, 128), jnp.float32)
  ml.copy(buf, v)
  out.at[ml.ds(i * 128, 128)][...] = v + 1


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_into_value_fixed(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 128))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  v = buf[...]
  out.at[ml.ds(i * 128, 128)][...] = v + 1


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_computed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  ml.copy(v * 2, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_computed_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = v * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_number(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 128), jnp.float32)
  ml.copy(0.5, buf)
  out.at[ml.ds(i * 128, 128)][...] = buf[...] + x.at[ml.ds(i * 128, 128)][...]


@pytest.mark.parametrize("kernel, fixed, col, message, hint, want", [
    (copy_loaded, copy_loaded_fixed, 2, "ml.copy source must be a ref (a kernel parameter, an ml.smem buffer or"
     " a view), got a register tensor", "ml.copy moves data between refs: pass the ref itself, without [...],"
     " ml.copy(x.at[ml.ds(i * 128, 128)], buf)", lambda x: x),
    (copy_into_value, copy_into_value_fixed, 2, "ml.copy destination must be a ref (a kernel parameter, an"
     " ml.smem buffer or a view), got a register tensor", "ml.copy moves data between refs; read a ref into"
     " registers with [...]: v = buf[...]", lambda x: x + 1),
    (copy_computed, copy_computed_fixed, 2, "ml.copy source must be a ref (a kernel parameter, an ml.smem"
     " buffer or a view), got a register tensor", "ml.copy moves data between refs; store a value into a ref"
     " with an assignment: out.at[ml.ds(i * 128, 128)][...] = v * 2", lambda x: x * 2),
    (copy_number, None, 2, "ml.copy source must be a ref (a kernel parameter, an ml.smem buffer or a view),"
     " got a Python float", "ml.copy moves data between refs; store a value into a ref with an assignment:"
     " buf[...] = 0.5", None),
])
def test_a_copy_of_a_register_value_says_what_was_meant(kernel, fixed, col, message, hint, want):
  e = _error(kernel, X)
  assert type(e) is mg.KernelTypeError and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line(kernel, "ml.copy(") if kernel is not copy_into_value
                                      else _line(kernel, "ml.copy(buf, v)"), col)
  assert (e.message, e.hint) == (message, hint)
  if fixed is not None:
    x = rand.normal(rand.key(4), (256, 128))
    np.testing.assert_array_equal(np.asarray(fixed(x, interpret=True)), np.asarray(want(x)))


# -- 3. run-time index into a list of tiles or a dict ------------------------------------------

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def list_of_tiles(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  parts = [v, v * 2, v * 3]
  out.at[ml.ds(i * 64, 64)][...] = parts[i % 3]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def list_of_tiles_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  parts = [v, v * 2, v * 3]
  r = parts[0]
  for k in ml.static_range(1, 3):
    r = ml.where((i % 3) == k, parts[k], r)
  out.at[ml.ds(i * 64, 64)][...] = r


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def dict_of_scales(x, out):
  i = ml.program_id(0)
  d = {1: 0.5, 3: 2.0, 7: 4.0}
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...] * d[i * 2 + 1]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def dict_of_scales_fixed(x, out):
  i = ml.program_id(0)
  d = {1: 0.5, 3: 2.0, 7: 4.0}
  r = d[1]
  for k in (3, 7):
    r = ml.where((i * 2 + 1) == k, d[k], r)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...] * r


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def dict_of_names(x, out):
  i = ml.program_id(0)
  d = {"a": 0.5, "b": 2.0}
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...] * d[i]


@pytest.mark.parametrize("kernel, fixed, text, col, message, hint, scale", [
    (list_of_tiles, list_of_tiles_fixed, "parts[i % 3]", 35, "cannot index parts (a Python list) with a runtime value",
     "select the entry instead: r = parts[0], then for k in ml.static_range(1, 3): r = ml.where((i % 3) == k,"
     " parts[k], r)", [1.0, 2.0, 3.0, 1.0]),
    (dict_of_scales, dict_of_scales_fixed, "d[i * 2 + 1]", 66, "cannot index d (a Python dict) with a runtime value",
     "select the entry instead: r = d[1], then for k in (3, 7): r = ml.where((i * 2 + 1) == k, d[k], r)",
     [0.5, 2.0, 0.5, 4.0]),
    (dict_of_names, None, "d[i]", 66, "cannot index d (a Python dict) with a runtime value",
     "index Python lists, tuples and dicts with static values (ints, shapes, constexprs); select between"
     " register values with ml.where", None),
])
def test_a_run_time_index_into_a_list_or_dict_hints_a_select_per_entry(kernel, fixed, text, col, message, hint,
                                                                        scale):
  e = _error(kernel, X)
  assert type(e) is mg.KernelTypeError and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line(kernel, text), col)
  assert (e.message, e.hint) == (message, hint)
  if fixed is not None:
    x = rand.normal(rand.key(5), (256, 128))
    want = x * jnp.repeat(jnp.asarray(scale, jnp.float32), 64)[:, None]
    np.testing.assert_array_equal(np.asarray(fixed(x, interpret=True)), np.asarray(want))


# -- 4. a stored value of another shape -------------------------------------------------------

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def store_row_sums(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.sum(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def store_row_sums_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.sum(v, axis=1)[:, None]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def store_transposed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v.T


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def store_transposed_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def store_unit_axis(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v[:, :, None] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def store_unit_axis_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = (v[:, :, None] * 2).reshape(64, 128)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def store_reshaped(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v.reshape(128, 64)


@pytest.mark.parametrize("kernel, fixed, shape, hint, want", [
    (store_row_sums, store_row_sums_fixed, (64,), "a stored value broadcasts to the window as in NumPy, trailing"
     " axes aligned; give ml.sum(v, axis=1) the axes it lacks: ml.sum(v, axis=1)[:, None] (shape (64, 1))",
     lambda x: jnp.broadcast_to(jnp.sum(x, axis=1, keepdims=True), x.shape)),
    (store_transposed, store_transposed_fixed, (128, 64), "the value is the window's transpose: store v",
     lambda x: x),
    (store_unit_axis, store_unit_axis_fixed, (64, 128, 1), "the value has size-1 axes the window lacks: store"
     " (v[:, :, None] * 2).reshape(64, 128)", lambda x: x * 2),
    (store_reshaped, None, (128, 64), "the value has the window's axes swapped: where it holds the window"
     " transposed, store v.reshape(128, 64).T; else give it the window's shape (64, 128)", None),
])
def test_a_stored_value_of_another_shape_says_how_it_relates_to_the_window(kernel, fixed, shape, hint, want):
  e = _error(kernel, X)
  assert type(e) is mg.ShapeMismatchError and e.code == "MG202"
  assert (e.lineno, e.col_offset) == (_line(kernel, "out.at["), 2)
  assert e.message == f"cannot store a tensor of shape {shape} into out.at[ml.ds(i * 64, 64)] of shape (64, 128)"
  assert e.hint == hint
  if fixed is not None:
    x = rand.normal(rand.key(6), (256, 128))
    np.testing.assert_allclose(np.asarray(fixed(x, interpret=True)), np.asarray(want(x)), rtol=1e-5, atol=1e-5)


# -- 5. grid counts that are floats, out_shape that is a shape -----------------------------------

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] / 64,))
def grid_true_div(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (np.ceil(x.shape[0] / 64),))
def grid_np_ceil(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 64),))
def grid_fixed(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...]


@mg.mgpu_kernel(out_shape=lambda x: x.shape, grid=lambda x: (x.shape[0] // 64,))
def shape_only(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((256, 128), x.dtype), grid=lambda x: (x.shape[0] // 64,))
def shape_fixed(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...]


def _decorator_line(fn):
  import inspect
  return inspect.getsourcelines(fn)[1]


@pytest.mark.parametrize("kernel, got", [(grid_true_div, "(4.0,)"), (grid_np_ceil, "(np.float64(4.0),)")],
                         ids=["true_div", "np_ceil"])
def test_a_float_grid_count_is_rewritten_with_cdiv(kernel, got):
  e = _error(kernel, X)
  assert type(e) is mg.LaunchConfigError and e.code == "MG007"
  assert (e.lineno, e.col_offset) == (_decorator_line(kernel), 39)
  assert e.message == f"grid must be 1 to 3 positive ints, got {got}"
  assert e.hint == ("a count of programs is an int: divide with // (or round up with ml.cdiv),"
                    " grid=lambda x: (ml.cdiv(x.shape[0], 64),)")
  x = rand.normal(rand.key(7), (256, 128))
  np.testing.assert_array_equal(np.asarray(grid_fixed(x, interpret=True)), np.asarray(x))


def test_an_out_shape_that_is_a_shape_is_given_a_dtype():
  e = _error(shape_only, X)
  assert type(e) is mg.LaunchConfigError and e.code == "MG007"
  assert (e.lineno, e.col_offset) == (_decorator_line(shape_only), 16)
  assert e.message == "out_shape must give arrays or jax.ShapeDtypeStructs, got a tuple of 2 items"
  assert e.hint == ("(256, 128) is a shape: give it a dtype, out_shape=lambda x: jax.ShapeDtypeStruct((256, 128),"
                    " x.dtype) (x.shape for the first input's shape)")
  x = rand.normal(rand.key(8), (256, 128))
  np.testing.assert_array_equal(np.asarray(shape_fixed(x, interpret=True)), np.asarray(x))


# -- 6. SMEM overflow: a buffer live across a compiler scratch ----------------------------------

@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def buffer_across_transpose(x, b, out):
  buf = ml.smem((384, 128))
  for k in ml.static_range(2):
    ml.copy(b.at[ml.ds(k * 192, 192)], buf.at[ml.ds(k * 192, 192)])
  v = x[...]
  out[...] = v.T + buf.at[0:128][...] + buf.at[256:384][...]


@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def buffer_across_transpose_fixed(x, b, out):
  buf = ml.smem((384, 128))
  for k in ml.static_range(2):
    ml.copy(b.at[ml.ds(k * 192, 192)], buf.at[ml.ds(k * 192, 192)])
  w = buf.at[0:128][...] + buf.at[256:384][...]
  v = x[...]
  out[...] = v.T + w


@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def buffer_across_sort(x, b, out):
  buf = ml.smem((384, 128))
  for k in ml.static_range(2):
    ml.copy(b.at[ml.ds(k * 192, 192)], buf.at[ml.ds(k * 192, 192)])
  v = x[...]
  out[...] = ml.sort(v) + buf.at[0:128][...] + buf.at[256:384][...]


@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def buffer_across_sort_fixed(x, b, out):
  buf = ml.smem((384, 128))
  for k in ml.static_range(2):
    ml.copy(b.at[ml.ds(k * 192, 192)], buf.at[ml.ds(k * 192, 192)])
  w = buf.at[0:128][...] + buf.at[256:384][...]
  v = x[...]
  out[...] = ml.sort(v) + w


@pytest.mark.parametrize("kernel, fixed, what, op, want", [
    (buffer_across_transpose, buffer_across_transpose_fixed, "transpose scratch 66048 bytes", "v.T + buf",
     lambda x, b: x.T + b[:128] + b[256:]),
    (buffer_across_sort, buffer_across_sort_fixed, "sort keys 66048 bytes, sort positions 66048 bytes",
     "ml.sort(v) + buf", lambda x, b: jnp.sort(x, axis=-1) + b[:128] + b[256:]),
], ids=["transpose", "sort"])
def test_a_buffer_live_across_a_compiler_scratch_is_read_first(kernel, fixed, what, op, want):
  specs = (jax.ShapeDtypeStruct((128, 128), jnp.float32), jax.ShapeDtypeStruct((384, 128), jnp.float32))
  e = _error(kernel, *specs)
  assert type(e) is mg.SmemCapacityError and e.code == "MG402"
  # (at the op whose scratch takes the buffers past the limit, allocated after buf: probe 61b; buf in a note)
  assert (e.lineno, e.col_offset) == (_line(kernel, op), 13)
  assert any(n.endswith("buf, 192 KiB, allocated here") for n in e.notes), e.notes
  total = 263680 if "transpose" in what else 330240
  assert e.message == (f"the kernel's SMEM needs {total} bytes (buf 192 KiB, {what}, plus barriers and alignment),"
                       f" more than the 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use")
  line = _line(kernel, op)
  scratch = what.split(" 66048")[0]
  assert e.hint == (f"buf (196608 bytes) is still in use where the compiler needs a {scratch} (66048 bytes) for"
                    f" line {line}: read what the kernel needs from buf into registers before line {line}, and"
                    f" the two share memory (buffers whose lifetimes do not overlap do); or use smaller tiles")
  fixed.check(*specs)          # it fits, and builds the Mosaic GPU module
  x = rand.normal(rand.key(9), (128, 128))
  b = rand.normal(rand.key(10), (384, 128))
  np.testing.assert_allclose(np.asarray(fixed(x, b, interpret=True)), np.asarray(want(x, b)), rtol=1e-6, atol=1e-6)
