"""A user probe's findings (probe 9): messages that named the wrong thing or gave a hint that
did not fit, and the reductions of booleans that jnp allows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from locate import expect, where
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


# ---------------------------------------------------------------- operands quoted as written
@mg.mgpu_kernel(out_shape=lambda x: x)
def center_int(x, out):
  v = x[...]
  out[...] = v - ml.mean(v, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32))
def mean_minus_sum(x, out):
  v = x[...]
  out[...] = ml.mean(v, axis=1)[:, None] - (v + 1)


def test_a_broadcast_operand_is_quoted_as_written():
  expect(center_int, [S((8, 128), I32)], mg.DtypeMismatchError, "v - ml.mean",
         "- on v (int32) and ml.mean(v, axis=1, keepdims=True) (float32): dtypes differ and are never"
         " converted implicitly",
         hint="convert one side explicitly, e.g. ml.mean(v, axis=1, keepdims=True).astype(jnp.int32)")
  expect(mean_minus_sum, [S((8, 128), I32)], mg.DtypeMismatchError, "ml.mean(v, axis=1)[:, None] -",
         "- on ml.mean(v, axis=1)[:, None] (float32) and v + 1 (int32): dtypes differ and are never"
         " converted implicitly", hint="convert one side explicitly, e.g. (v + 1).astype(jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def add_booleans(x, out):
  b = x[...] > 0
  out[...] = (b + b).astype(I32)


def test_bool_arithmetic_hint_names_the_operand():
  expect(add_booleans, [S((128,), F32)], mg.UnsupportedDtypeError, "b + b", "+ on boolean values",
         hint="for logic use & | ^; to count or compute, convert first: b.astype(jnp.int32) (or jnp.float32)")


# ---------------------------------------------------------------- an untyped SMEM buffer's dtype
@mg.mgpu_kernel(out_shape=lambda x: x)
def untyped_out_buffer(x, out):
  x_s, o_s = ml.smem((32, 128)), ml.smem((32, 128))
  ml.copy(x, x_s)
  v = x_s[...].astype(F32)
  o_s[...] = (v * 2).astype(o_s.dtype)
  ml.copy(o_s, out)


@mg.mgpu_kernel(out_shape=lambda x: x)
def typed_out_buffer(x, out):
  x_s, o_s = ml.smem((32, 128)), ml.smem((32, 128), x.dtype)
  ml.copy(x, x_s)
  v = x_s[...].astype(F32)
  o_s[...] = (v * 2).astype(o_s.dtype)
  ml.copy(o_s, out)


def test_an_untyped_buffer_hints_the_inputs_dtype():
  expect(untyped_out_buffer, [S((32, 128), jnp.bfloat16)], mg.DtypeInferenceError, "o_s.dtype",
         "o_s's dtype is not known yet at this point",
         hint="give the buffer, when you make it, the dtype of the data it will hold:"
              " o_s = ml.smem((32, 128), x.dtype)")
  x = jnp.ones((32, 128), jnp.bfloat16)
  np.testing.assert_array_equal(typed_out_buffer(x, interpret=True).astype(F32), 2.0)   # followed
