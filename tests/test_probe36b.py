"""Probe 36b (a numerics audit of special values and integer edge cases, op by op, against jnp):
NaN, +-inf, -0.0 and subnormals through the elementwise ops, reductions, scans and sorts, casts,
integer division and shifts, in interpret mode and (marked gpu) on the GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _same_bits(got, want):
  """Equal values, NaN where NaN, and the same sign of zero."""
  g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
  assert g.shape == w.shape, (g.shape, w.shape)
  np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
  ok = ~np.isnan(w)
  np.testing.assert_array_equal(g[ok], w[ok])
  np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


# ---------------------------------------------------------------- the sign of a zero sum
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_sums(x, out):
  out[...] = ml.sum(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def column_sums(x, out):
  out[...] = ml.sum(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def total(x, out):
  out[0] = ml.sum(x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), block=256)
def row_means_two_warpgroups(x, out):
  out[...] = ml.mean(x[...], axis=1)


def _zeros(shape, dtype=F32):
  """-0.0 everywhere but +0.0 in the first of the last rows (a sum of both signs is +0.0)."""
  x = np.full(shape, -0.0, np.float32)
  x[-1, 0] = 0.0
  return jnp.asarray(x, dtype)


def test_a_sum_of_one_element_keeps_its_sign_of_zero_as_jnp():
  """Interpret mode summed a (128, 1) tile's rows with numpy, whose sum of a single -0.0 is +0.0,
  where jnp's sum (and the GPU's, which moves nothing for an axis of one element) is the element."""
  x = _zeros((128, 1))
  _same_bits(row_sums(x, interpret=True), jnp.sum(x, axis=1))


@pytest.mark.parametrize("kernel,ref", [(row_sums, lambda x: jnp.sum(x, axis=1)),
                                        (column_sums, lambda x: jnp.sum(x, axis=0)),
                                        (total, lambda x: jnp.sum(x)[None]),
                                        (row_means_two_warpgroups, lambda x: jnp.mean(x, axis=1))])
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
def test_a_sum_of_negative_zeros_is_positive_zero_in_interpret_mode_as_jnp(kernel, ref, dtype):
  x = _zeros((8, 128), dtype)
  _same_bits(kernel(x, interpret=True), ref(x))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [row_sums, column_sums, total, row_means_two_warpgroups])
@pytest.mark.parametrize("dtype", [F32, jnp.float16, jnp.bfloat16])
def test_gpu_a_sum_of_negative_zeros_is_positive_zero_as_interpret_mode(kernel, dtype):
  """Mosaic GPU's reduction combines the elements alone (no +0.0 init value, as XLA's): a row of -0.0
  summed to -0.0 on the GPU; the lowering adds +0.0 to every float sum of more than one element."""
  x = _zeros((8, 128), dtype)
  _same_bits(jax.jit(kernel)(x), kernel(x, interpret=True))
  y = jnp.asarray(np.random.default_rng(0).standard_normal((8, 128)), dtype)
  np.testing.assert_allclose(np.asarray(jax.jit(kernel)(y), np.float32),
                             np.asarray(kernel(y, interpret=True), np.float32), rtol=2e-2, atol=1e-3)
  one = _zeros((128, 1), dtype)
  _same_bits(jax.jit(row_sums)(one), row_sums(one, interpret=True))
