"""Probe 28a (quantization and bit manipulation): conversions to bool as jnp's (x != 0), and hints
for bit tricks (logical shifts, population counts) that work when followed for the operand's dtype."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- .astype(bool) is x != 0
@mg.mgpu_kernel(out_shape=lambda x: (jax.ShapeDtypeStruct(x.shape, jnp.int8), jax.ShapeDtypeStruct(x.shape, jnp.int32)))
def nonzero_mask(x, m8, m32):
  v = x[...]
  m8[...] = v.astype(jnp.bool_).astype(jnp.int8)
  m32[...] = ml.where(ml.cast(v, bool), 1, 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def branch_on_bool(x, out):
  i = ml.program_id(0)
  if bool(x[i]):
    out[i] = x[i].astype(bool).astype(out.dtype) * 5
  else:
    out[i] = 7


_VALUES = {jnp.float32: [0.0, -0.0, np.nan, 0.25, -2.0, np.inf, -np.inf, 1e-30],
           jnp.bfloat16: [0.0, -0.0, np.nan, 0.25, -2.0, np.inf, -np.inf, 3.0],
           jnp.int32: [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 7, 0, 2],
           jnp.uint8: [0, 1, 255, 128, 0, 2, 3, 0], jnp.int8: [0, -128, 127, 1, -1, 0, 5, 0],
           jnp.float8_e4m3fn: [0.0, -0.0, np.nan, 0.25, -2.0, 448.0, 0.0, 1.0]}


@pytest.mark.parametrize("dtype", list(_VALUES), ids=lambda d: jnp.dtype(d).name)
def test_astype_bool_is_nonzero_as_jnp(dtype):
  x = jnp.asarray(np.resize(np.asarray(_VALUES[dtype], np.float64), 256)).astype(dtype)
  m8, m32 = nonzero_mask(x, interpret=True)
  want = np.asarray(x.astype(bool))
  np.testing.assert_array_equal(np.asarray(m8), want.astype(np.int8))
  np.testing.assert_array_equal(np.asarray(m32), want.astype(np.int32))
  assert "mosaic_gpu" in _export(nonzero_mask, jax.ShapeDtypeStruct((256,), dtype))


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.float32, jnp.int16])
def test_bool_of_a_scalar_branches_on_nonzero(dtype):
  x = jnp.asarray(np.array([0, 3, -1, 0, np.nan if dtype == jnp.float32 else 9, 0, 2, -0.0])).astype(dtype)
  got = np.asarray(branch_on_bool(x, interpret=True))
  np.testing.assert_array_equal(got, np.where(np.asarray(x) != 0, 5, 7).astype(np.asarray(x).dtype))
  assert "mosaic_gpu" in _export(branch_on_bool, jax.ShapeDtypeStruct((8,), dtype))
