"""Probe 31c (dtype and numeric edge cases): Python bools as ml.scalar flags, 64-bit specs without
jax_enable_x64, Triton's ml.math.* spellings, and the hints for weakly typed scalars."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- a Python bool for an ml.scalar
@mg.mgpu_kernel(out_shape=lambda x, flag: x)
def maybe_double(x, flag: ml.scalar, out):
  if flag:
    out[...] = x[...] * 2
  else:
    out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, flag: x)
def select_by_flag(x, flag: ml.scalar, out):
  out[...] = ml.where(flag, x[...], -x[...])


def test_a_python_bool_for_an_ml_scalar_is_a_bool_flag():
  """It was MG006 ('ml.scalar values are ints or floats'): a bool is a bool scalar, as jnp.bool_(b)."""
  x = jnp.arange(128, dtype=F32)
  for flag in (True, False):
    np.testing.assert_array_equal(maybe_double(x, flag, interpret=True), x * 2 if flag else x)
    np.testing.assert_array_equal(select_by_flag(x, flag, interpret=True), x if flag else -x)
    jitted = jax.jit(lambda v, f: maybe_double(v, f, interpret=True))
    np.testing.assert_array_equal(jitted(x, flag), x * 2 if flag else x)
  assert "scalar<bool>" in maybe_double.typed_ir(S((128,), F32), True)
  maybe_double.check(S((128,), F32), False)
