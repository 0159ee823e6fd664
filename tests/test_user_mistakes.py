"""Mistakes and habits a new user brings (found by porting Triton and Pallas kernels as a
newcomer would): each gets a KernelError at the user's line, in the user's words, with a hint,
and what the docs promise works."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- Python ints that do not fit 32 bits
@mg.mgpu_kernel(out_shape=lambda n: n, grid=(1,))
def add_constant(n, out, *, c: ml.constexpr):
  out[...] = n[...] + c


@pytest.mark.parametrize("dtype,c", [(jnp.int32, 2 ** 31 - 1), (jnp.int32, -2 ** 31), (jnp.uint32, 2 ** 32 - 1),
                                     (jnp.int16, 70000), (jnp.float32, 2 ** 40)], ids=str)
def test_python_ints_in_range_wrap_like_jnp(dtype, c):
  n = jnp.arange(256, dtype=dtype)
  want = (np.asarray(n).astype(np.int64) + c).astype(np.dtype(dtype)) if dtype != jnp.float32 else \
      np.asarray(n) + np.float32(c)
  np.testing.assert_array_equal(add_constant(n, c=c, interpret=True), want)


@pytest.mark.parametrize("dtype,c,kind", [(jnp.int32, 2 ** 32 + 5, "int32"), (jnp.int32, -2 ** 31 - 1, "int32"),
                                          (jnp.uint32, 2 ** 32, "uint32"), (jnp.int8, 2 ** 40, "int32")], ids=str)
def test_python_ints_past_32_bits_are_rejected(dtype, c, kind):
  """Once 2**32 + 5 silently became 5 (JAX raises OverflowError for it)."""
  expect(add_constant, [S((256,), dtype)], mg.KernelTypeError, "n[...] + c",
         f"+ uses the Python int {c}, which does not fit in {kind}: kernels compute in 32 bits (a larger"
         f" constant would silently lose its high bits)", c=c,
         hint="use a constant in range, or a float (e.g. float(...)) if you meant floating point")


# ---------------------------------------------------------------- reshaping a row-wise tile
@mg.mgpu_kernel(out_shape=lambda x, s: S((x.size,), x.dtype), grid=(1,))
def scale_flat(x, s, out):
  y = x[...] * s[...][:, None]
  out[...] = y.reshape((x.size,))


def test_reshaping_a_row_wise_tile_is_reported_at_the_reshape_in_its_shapes():
  """Once: 'y of shape (2048,) is reduced or broadcast along an axis', naming the wrong shape."""
  expect(scale_flat, [S((8, 256), jnp.float32), S((8,), jnp.float32)], mg.LayoutError, "y.reshape",
         "reshape of y (8, 256) into (2048,): y is a row-wise tile here (it is reduced or broadcast along"
         " its rows, or meets such a tile), and a tile's rows live in fixed threads, so it can only gain or"
         " lose size-1 axes",
         hint="keep it 2-D and store it through a 2-D output (reshape the result outside the kernel), or"
              " reshape before the reduction or broadcast")


# ---------------------------------------------------------------- Python lists
@mg.mgpu_kernel(out_shape=lambda x: S((4,), jnp.float32), grid=(1,))
def append_sums(x, out, *, concat: ml.constexpr = False):
  sums = []
  for c in ml.static_range(4):
    if concat:
      sums = sums + (ml.sum(x.at[ml.ds(c * 256, 256)][...]),)
    else:
      sums.append(ml.sum(x.at[ml.ds(c * 256, 256)][...]))
  for c in ml.static_range(4):
    out[c] = sums[c]


def test_list_append_says_lists_are_fixed_and_how_to_build_one():
  """Once: 'sums has no attribute append' with the hint 'check the spelling'."""
  expect(append_sums, [S((1024,), jnp.float32)], mg.KernelTypeError, "sums.append",
         "sums.append: lists in a kernel are fixed once built (the kernel sees them as tuples), so they have"
         " no .append",
         hint="build it in one go: sums = [f(c) for c in ml.static_range(n)], or sums = sums + (value,) in an"
              " ml.static_range loop")
  x = jax.random.normal(jax.random.key(0), (1024,), jnp.float32)
  np.testing.assert_allclose(append_sums(x, concat=True, interpret=True), np.asarray(x).reshape(4, 256).sum(1),
                             rtol=1e-5)
