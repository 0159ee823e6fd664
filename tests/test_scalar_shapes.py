"""A scalar is jnp's 0-d array: its reshapes to one element, ravel, flatten and atleast_Nd give a tensor of that
shape holding it (session 55; `s.reshape(1)`, `s.ravel()` and `jnp.atleast_1d(s)` were refusals)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _kernel(shape):
  return mg.mgpu_kernel(out_shape=lambda x: S(shape, F32))


@_kernel((1,))
def reshape_1(x, o):
  o[...] = ml.sum(x[...]).reshape(1)


@_kernel((1, 1))
def reshape_11(x, o):
  o[...] = jnp.reshape(ml.sum(x[...]), (1, 1))


@_kernel((1,))
def reshape_minus_1(x, o):
  o[...] = ml.sum(x[...]).reshape(-1)


@_kernel((1,))
def reshape_empty(x, o):
  o[...] = jnp.min(x[...]).reshape((1,)) + ml.sum(x[...]).reshape(())


@_kernel((1,))
def ravel(x, o):
  o[...] = jnp.ravel(ml.sum(x[...]))


@_kernel((1,))
def flatten(x, o):
  o[...] = ml.sum(x[...]).flatten()


@_kernel((1,))
def atleast_1d(x, o):
  o[...] = jnp.atleast_1d(ml.sum(x[...]))


@_kernel((1, 1))
def atleast_2d(x, o):
  o[...] = jnp.atleast_2d(ml.sum(x[...]))


CASES = {reshape_1: lambda x: x.sum().reshape(1), reshape_11: lambda x: x.sum().reshape(1, 1),
         reshape_minus_1: lambda x: x.sum().reshape(-1), reshape_empty: lambda x: (x.min() + x.sum()).reshape(1),
         ravel: lambda x: x.sum().ravel(), flatten: lambda x: x.sum().ravel(),
         atleast_1d: lambda x: np.atleast_1d(x.sum()), atleast_2d: lambda x: np.atleast_2d(x.sum())}


@pytest.mark.parametrize("kernel", CASES, ids=lambda k: k.fn.__name__)
def test_a_scalar_reshaped_to_one_element_is_jnps(kernel):
  x = np.random.default_rng(3).standard_normal(128).astype(np.float32)
  got = np.asarray(kernel(jnp.asarray(x), interpret=True))
  want = CASES[kernel](x)
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_scalar_reshaped_exports_for_cuda():
  for kernel in (reshape_11, atleast_1d):
    exported = jax.export.export(jax.jit(kernel), platforms=["cuda"])(S((128,), F32))
    assert "mosaic_gpu" in exported.mlir_module()


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [reshape_1, reshape_11, ravel], ids=lambda k: k.fn.__name__)
def test_gpu_a_scalar_reshaped(kernel):
  x = np.random.default_rng(4).standard_normal(128).astype(np.float32)
  np.testing.assert_allclose(np.asarray(jax.jit(kernel)(jnp.asarray(x))), CASES[kernel](x), rtol=1e-5)
