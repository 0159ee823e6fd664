"""Mistakes with reductions, broadcasting and the new math: class, code, line, column, message, hint."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from locate import expect
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x: x)
def axis_out_of_range(x, out):
  out[...] = x[...] - ml.max(x[...], axis=2)[:, None]


def test_reduction_axis_out_of_range():
  e = expect(axis_out_of_range, [S((8, 128), F32)], mg.IndexOutOfBoundsError, "ml.max(x[...], axis=2)",
             "ml.max: axis 2 is out of range for a tensor of rank 2")
  assert e.hint == "axes run from -2 to 1"


@mg.mgpu_kernel(out_shape=lambda x, v: x)
def bad_broadcast(x, v, out):
  out[...] = x[...] * v[...][:, None]


def test_shapes_that_do_not_broadcast_name_both():
  e = expect(bad_broadcast, [S((8, 128), F32), S((16,), F32)], mg.ShapeMismatchError,
             "x[...] * v[...][:, None]",
             "* on x[...] of shape (8, 128) and v[...][:, None] of shape (16, 1): the shapes do not broadcast"
             " (axis 0 of the result would be both 8 and 16)")
  assert "v[:, None]" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape[:2], F32))
def partial_3d(x, out):
  out[...] = ml.sum(x[...], axis=2)


def test_partial_reduction_of_a_3d_tensor_says_to_reshape():
  # (since probe 43a the (20, 4) statistic is the vector of the 2-D reshape's rows, typed (20, 4): storing it whole is
  # the mistake, at the store, where its rows are too short for vectors and too many for elements; since probe 44f a
  # (4, 8) one is stored a row at a time; since probe 45a one of at most 256 elements with short rows, the (20, 4) one,
  # an element at a time)
  e = expect(partial_3d, [S((100, 4, 32), F32)], mg.LayoutError, "out[...] = ml.sum(x[...], axis=2)",
             "ml.sum(x[...], axis=2) has shape (100, 4): 400 elements, too few for a register tensor of that shape (a"
             " multiple of 128; a 1-D vector may hold any multiple of 8)")
  assert "reshape" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def reduce_float8(x, out):
  out[...] = ml.sum(x[...]).astype(F32)


def test_reducing_float8_says_to_convert_the_operand():      # booleans are counted: tests/test_probe9.py
  expect(reduce_float8, [S((128,), jnp.float8_e4m3fn)], mg.UnsupportedDtypeError, "ml.sum(x[...])",
         "ml.sum of float8_e4m3fn values is not supported", hint="convert first: x[...].astype(jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def row_and_column(x, out):
  v = ml.sum(x[...], axis=1)
  out[...] = x[...] + v[:, None] + v          # (v[None, :] written out reads a copy: probe 33c)


def test_a_vector_used_as_row_and_column_statistic_is_a_layout_conflict():
  e = expect(row_and_column, [S((128, 128), F32)], mg.LayoutError, "x[...] + v[:, None] + v",
             "v is used as a row statistic (one value per row) of one tile and as a column vector"
             " (one value per column) of another: a register vector lives in one of the two layouts")
  # v is a reduction's result: computing it again gives a row statistic again (probe 26g)
  assert e.hint.startswith("pass one use through an SMEM vector: tmp = ml.smem((128,), jnp.float32); tmp[...] = v")


@mg.mgpu_kernel(out_shape=lambda x: x)
def bad_shift(x, out):
  out[...] = x[...] << 2


def test_shifting_floats_needs_integers():
  expect(bad_shift, [S((128,), F32)], mg.UnsupportedDtypeError, "x[...] << 2",
         "<< needs integer operands, got float32")


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.int8))
def bad_bitcast(x, out):
  out[...] = ml.bitcast(x[...] > 0, jnp.int8)


def test_bitcast_of_bool_is_rejected():
  """(A bitcast between widths of 8 to 32 bits is lax.bitcast_convert_type's since probe 42w.)"""
  e = expect(bad_bitcast, [S((128,), F32)], mg.UnsupportedDtypeError, "ml.bitcast(x[...] > 0, jnp.int8)",
             "ml.bitcast from bool (1 bits) to int8 (8 bits): widths differ")
  assert e.hint


@mg.mgpu_kernel(out_shape=lambda x: x)
def misspelled_keyword(x, out):
  out[...] = x[...] - ml.max(x[...], axes=1)[:, None]


def test_a_misspelled_keyword_gets_pythons_message_at_the_call():
  e = expect(misspelled_keyword, [S((8, 128), F32)], mg.KernelTypeError, "ml.max(x[...], axes=1)",
             "ml.max: got an unexpected keyword argument 'axes'")
  assert e.hint == ("ml.max(x, axis=None, keepdims=False, initial=None, where=None, return_indices=False,"
                    " return_indices_tie_break_left=True)")


# ------------------------------------------------------------------ the new math, computed
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x, x), grid=(1,))
def math_fns(x, a, b, c, d, e):
  v = x[...]
  a[...] = ml.sin(v) + ml.cos(v)
  b[...] = ml.erf(v)
  c[...] = ml.log2(ml.abs(v) + 1.0)
  d[...] = ml.sigmoid(v)
  e[...] = ml.bitcast(ml.bitcast(v, jnp.int32) >> 1 << 1, F32)


def test_new_math_in_interpret_mode():
  import math
  x = np.linspace(-4, 4, 256, dtype=np.float32)
  a, b, c, d, e = math_fns(x, interpret=True)
  np.testing.assert_allclose(a, np.sin(x) + np.cos(x), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(b, [math.erf(v) for v in x], rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(c, np.log2(np.abs(x) + 1), rtol=1e-6)
  np.testing.assert_allclose(d, 1 / (1 + np.exp(-x)), rtol=1e-6)
  np.testing.assert_array_equal(e.view(np.int32), x.view(np.int32) & ~1)


def test_new_math_exports_for_cuda():
  f = jax.jit(math_fns)
  txt = jax.export.export(f, platforms=["cuda"])(S((256,), F32)).mlir_module()
  assert "@mosaic_gpu" in txt


@pytest.mark.gpu
def test_new_math_on_the_gpu_matches_interpret_mode():
  x = np.linspace(-4, 4, 256, dtype=np.float32)
  for g, i in zip(math_fns(x), math_fns(x, interpret=True)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(i), rtol=2e-6, atol=2e-6)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[1],), F32))
def comprehension(x, out):
  rows = [x.at[i][...] for i in ml.static_range(x.shape[0]) if i % 2 == 0]
  acc = rows[0]
  for r in rows[1:]:
    acc = acc + r
  out[...] = acc


def test_list_comprehensions_over_static_ranges_unroll():
  x = np.arange(4 * 128, dtype=np.float32).reshape(4, 128)
  np.testing.assert_array_equal(comprehension(x, interpret=True), x[0] + x[2])


@mg.mgpu_kernel(out_shape=lambda x: x)
def runtime_comprehension(x, out):
  n = ml.program_id(0)
  out[...] = x[...] + len([1 for i in range(n)])


def test_a_comprehension_over_a_runtime_range_is_rejected():
  e = expect(runtime_comprehension, [S((128,), F32)], mg.KernelTypeError, "range(n)",
             "a comprehension needs static bounds")
  assert "ints or constexprs" in e.hint
