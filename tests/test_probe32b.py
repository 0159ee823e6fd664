"""Probe 32b (a regression hunt on break/continue, loop-else, walrus whiles, bool relayouts, flat
argmax, 64-bit narrowing, interpret errors under jit, partial kernels and autotune pickling,
combined with vmap/jit, nested and pipelined loops)."""
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


# ---------------------------------------------------------------- jax.vmap of NumPy 64-bit arrays
@mg.mgpu_kernel(out_shape=lambda x: x)
def plus_one(x, out):
  out[...] = x[...] + 1


def test_vmap_over_numpy_int64_and_float64_arrays_takes_them_as_jax_does():
  """An eager call took np.arange(128) (int64 values that fit int32) as JAX takes it; under
  jax.vmap the custom_vmap rule saw the NumPy array itself and refused it as an int64 *spec*
  (MG006 'give the spec as jnp.int32'), where jnp's own vmap computes."""
  a = np.arange(256).reshape(2, 128)
  got = jax.vmap(lambda v: plus_one(v, interpret=True))(a)
  assert got.dtype == jnp.int32
  np.testing.assert_array_equal(got, a + 1)
  f = np.linspace(0.0, 1.0, 256).reshape(2, 128)
  got = jax.vmap(lambda v: plus_one(v, interpret=True))(f)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, (f + 1).astype(np.float32))


def test_vmap_over_numpy_int64_values_int32_cannot_hold_is_refused_as_an_eager_call_is():
  a = np.arange(256).reshape(2, 128) * 2 ** 40
  with pytest.raises(mg.SignatureError) as info:
    jax.vmap(lambda v: plus_one(v, interpret=True))(a)
  e = info.value
  assert e.message.startswith("plus_one: input 0 (x) is a NumPy int64 array holding ")
  assert "which int32 cannot hold" in e.message
  assert e.hint.endswith("else pass values int32 holds")


@pytest.mark.gpu
def test_gpu_vmap_over_numpy_int64_matches_interpret_mode():
  a = np.arange(256).reshape(2, 128)
  np.testing.assert_array_equal(jax.vmap(plus_one)(a), jax.vmap(lambda v: plus_one(v, interpret=True))(a))
