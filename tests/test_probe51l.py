"""Probe 51l (leftovers of probes 51c and 51e: products and statistics of odd tiles). jax.Array's method
`v.swapaxes(axis1, axis2)` of a register tensor was MG003 ("no attribute 'swapaxes'") where `jnp.swapaxes` computed:
it is `ml.transpose` of the swapped axes (`.T` of a 2-D tile). `x[...] @ w[...]` of int8 tiles said "the operator @
is not supported" with a hint to stage SMEM buffers by hand; it now says what jnp's int8 `@` is (an int8 product, its
sums wrapped) and asks for `jnp.dot(..., preferred_element_type=jnp.int32)`, as `jnp.dot` of int8 register tiles
already did, and `jnp.dot` of int8 refs read whole (`a[...]`) now asks so too. Frontend only: the GPU test compares
the swaps with NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from locate import expect
from probe_util import export as _export

S = jax.ShapeDtypeStruct
F32, I8, I32 = jnp.float32, jnp.int8, jnp.int32


def _rnd(shape, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- v.swapaxes of register tensors
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), F32), grid=lambda x: (1,))
def swap2(x_ref, o_ref):           # a Pallas port's transposed tile
  o_ref[...] = x_ref[...].swapaxes(0, 1) * 2.0


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2], x.shape[1]), F32), grid=lambda x: (1,))
def swap3(x_ref, o_ref):           # heads' (h, s, d) tile to (h, d, s), axes counted from the end
  o_ref[...] = x_ref[...].swapaxes(-1, 1)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (1,))
def swap_same(x_ref, o_ref):       # an axis swapped with itself: the tile as it is
  o_ref[...] = x_ref[...].swapaxes(1, -1) + 1.0


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), F32), grid=lambda x: (1,))
def swap_bad(x_ref, o_ref):
  o_ref[...] = x_ref[...].swapaxes(0, 2)


def test_swapaxes_method_of_register_tensors():
  x = _rnd((16, 32), 1)
  np.testing.assert_array_equal(np.asarray(swap2(x, interpret=True)), x.T * 2)
  _export(swap2, x)
  z = _rnd((2, 16, 32), 2)
  np.testing.assert_array_equal(np.asarray(swap3(z, interpret=True)), z.swapaxes(1, 2))
  _export(swap3, z)
  np.testing.assert_array_equal(np.asarray(swap_same(x, interpret=True)), x + 1)


def test_swapaxes_of_an_axis_the_tile_lacks():
  expect(swap_bad, [S((16, 32), F32)], mg.KernelTypeError, "x_ref[...].swapaxes(0, 2)",
         "x_ref[...].swapaxes(0, 2): the axes must be static ints of the 2 axes of x_ref[...] (shape (16, 32))",
         hint="x_ref[...].swapaxes(0, 1) (or .T)")


@pytest.mark.gpu
def test_swapaxes_on_the_gpu():
  x, z = _rnd((16, 32), 3), _rnd((2, 16, 32), 4)
  np.testing.assert_array_equal(np.asarray(swap2(x)), x.T * 2)
  np.testing.assert_array_equal(np.asarray(swap3(z)), z.swapaxes(1, 2))


# ---------------------------------------------------------------- int8 products asked as jnp writes them
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), I32), grid=lambda a, b: (1,))
def int8_at(a_ref, b_ref, o_ref):  # a W8A8 port's `x @ w`
  o_ref[...] = a_ref[...] @ b_ref[...]


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), I32), grid=lambda a, b: (1,))
def int8_dot_read(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...])


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), I32), grid=lambda a, b: (1,))
def int8_dot_int32(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.int32)


def test_int8_at_asks_for_int32_sums():
  expect(int8_at, [S((16, 64), I8), S((64, 32), I8)], mg.KernelTypeError, "a_ref[...] @ b_ref[...]",
         "a_ref[...] @ b_ref[...] of int8 tiles is jnp's int8 product (its int32 sums wrapped), which a kernel does"
         " not compute",
         hint="ask for the int32 sums: jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.int32) (or"
              " jnp.matmul with it), computed on the tensor cores as ml.dot")


def test_int8_dot_of_reads_asks_for_int32_sums():
  expect(int8_dot_read, [S((16, 64), I8), S((64, 32), I8)], mg.KernelTypeError, "jnp.dot(a_ref[...], b_ref[...])",
         "dot cannot take a register tensor inside a kernel",
         hint="jnp's product of int8 tiles is int8 (its int32 sums wrapped): ask for the sums, jnp.dot(a_ref[...],"
              " b_ref[...], preferred_element_type=jnp.int32), computed on the tensor cores as ml.dot")
  rng = np.random.default_rng(5)       # the form both hints give computes
  a, b = rng.integers(-8, 8, (16, 64)).astype(np.int8), rng.integers(-8, 8, (64, 32)).astype(np.int8)
  np.testing.assert_array_equal(np.asarray(int8_dot_int32(a, b, interpret=True)),
                                a.astype(np.int32) @ b.astype(np.int32))


# ---------------------------------------------------------------- int32 products of fewer than 32 columns
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), I32), grid=lambda a, b: (1,))
def int32_dot(a_ref, b_ref, o_ref):          # a Pallas port's integer projection of two rows
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...])


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (1,))
def int8_widened_matmul(a_ref, b_ref, o_ref):   # int8 tiles widened first, then scaled
  h = a_ref[...].astype(jnp.int32) @ b_ref[...].astype(jnp.int32)
  o_ref[...] = h.astype(jnp.float32) * 0.5


def test_int32_products_of_few_columns_compute():
  """(2, 48) by (48, 16) int32 was MG204 hinting the chunks' 3-D broadcast: b is padded with zero columns to a
  multiple of 32 (40 to 64)."""
  rng = np.random.default_rng(6)
  for m, k, n in ((2, 48, 16), (2, 48, 8), (2, 48, 40)):
    a, b = rng.integers(-9, 9, (m, k)).astype(np.int32), rng.integers(-9, 9, (k, n)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(int32_dot(a, b, interpret=True)), a @ b)
    _export(int32_dot, a, b)
  a, b = rng.integers(-9, 9, (2, 48)).astype(np.int8), rng.integers(-9, 9, (48, 16)).astype(np.int8)
  want = (a.astype(np.int32) @ b.astype(np.int32)).astype(np.float32) * 0.5
  np.testing.assert_array_equal(np.asarray(int8_widened_matmul(a, b, interpret=True)), want)
  _export(int8_widened_matmul, a, b)


@pytest.mark.gpu
def test_int32_products_of_few_columns_on_the_gpu():
  rng = np.random.default_rng(7)
  a, b = rng.integers(-9, 9, (2, 48)).astype(np.int32), rng.integers(-9, 9, (48, 16)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(int32_dot(a, b)), a @ b)
