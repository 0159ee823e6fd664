"""Shape, layout and reduction ops on register tensors of awkward shapes (a probe of the
27th session): reductions of one-column tiles, size-1 axes added to vectors of any multiple
of 8 elements. Interpret mode against numpy, and the CUDA export."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def spec(a):
  return S(a.shape, a.dtype)


def rand(shape, dtype=np.float32, seed=0):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def exported(kernel, *arrays):
  return jax.export.export(jax.jit(kernel), platforms=["cuda"])(*map(spec, arrays)).mlir_module()


# ------------------------------------------------ an (n, 1) column reduced along its rows
@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.float32))
def column_sum(x, out):
  out[...] = ml.sum(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), jnp.float32))
def column_mean_kept(x, out):
  out[...] = ml.mean(x[...], axis=0, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int32))
def column_argmax(x, out):
  out[...] = ml.argmax(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def column_minus_max(x, out):
  v = x[...]
  out[...] = v - ml.max(v, axis=0, keepdims=True)


@pytest.mark.parametrize("kernel, ref", [
    (column_sum, lambda x: x.sum(0)),
    (column_mean_kept, lambda x: x.mean(0, keepdims=True)),
    (column_argmax, lambda x: x.argmax(0)),
    (column_minus_max, lambda x: x - x.max(0, keepdims=True)),
], ids=["sum", "mean_keepdims", "argmax", "minus_max"])
@pytest.mark.parametrize("rows", [128, 1024])
def test_column_reduced_along_rows(kernel, ref, rows):
  x = rand((rows, 1))
  got = np.asarray(kernel(jnp.asarray(x), interpret=True))
  np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in str(exported(kernel, x))

