"""Probe 30e (the lead's): hints that showed placeholders where the user's own expressions belong."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x: x)
def full_like(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = ml.full_like(x, 3.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def full_like_computed(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = ml.zeros_like(x * 2) + x


@mg.mgpu_kernel(out_shape=lambda x: x)
def full_like_fixed(x_ref, o_ref):       # full_like's hint followed
  x = x_ref[...]
  o_ref[...] = ml.full(x.shape, 3.0, x.dtype)


def test_ml_full_like_hint_uses_the_calls_own_arguments():
  # the hint was "ml.full(x.shape, value, x.dtype)" whatever the call's arguments
  expect(full_like, [S((128,), F32)], mg.UnknownNameError, "ml.full_like",
         "ml has no attribute 'full_like'", hint="no ml.full_like: ml.full(x.shape, 3.0, x.dtype)")
  expect(full_like_computed, [S((128,), F32)], mg.UnknownNameError, "ml.zeros_like",
         "ml has no attribute 'zeros_like'",
         hint="no ml.zeros_like: y = x * 2 and then ml.zeros(y.shape, y.dtype)")
  got = full_like_fixed(jnp.zeros((128,), F32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.full((128,), 3.0, np.float32))
