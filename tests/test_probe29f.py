"""Probe 29f (memory and copies: odd shapes and dtypes, negative slices, SMEM slabs of 3-D
buffers): hints that did not work when followed."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
F16 = jnp.float16


# ---------------------------------------------------------------- static slices and indices past a dimension
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((4, 128), x.dtype))
def last_ten_rows(x, out):
  out[...] = x[-10:]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1, 128), x.dtype))
def rows_after_the_end(x, out):
  out[...] = x[5:]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), x.dtype))
def row_minus_five(x, out):
  out[...] = x[-5]


def test_a_static_slice_or_index_outside_says_what_fits():
  """The hint was 'dimension 0 of x has size 4', which says nothing to do; a slice NumPy would
  clip (x[-10:] of 4 rows) now names the slice inside, an empty one says so, an index the range."""
  expect(last_ten_rows, [S((4, 128), F32)], mg.IndexOutOfBoundsError, "x[-10:]",
         "slice -10: is out of bounds for dimension 0 of x (size 4)",
         hint="dimension 0 of x has size 4, and a ref's slice is not clipped to it as a NumPy slice is (a window"
              " keeps the size it is written with): write the part inside, 0:4 (NumPy's -10: there), or pass a"
              " larger x")
  expect(rows_after_the_end, [S((4, 128), F32)], mg.IndexOutOfBoundsError, "x[5:]",
         "slice 5: is out of bounds for dimension 0 of x (size 4)",
         hint="dimension 0 of x has size 4, so 5: holds no element there (a slice needs at least one: start <"
              " stop, both in -4..4); handle an empty case outside the kernel")
  expect(row_minus_five, [S((4, 128), F32)], mg.IndexOutOfBoundsError, "x[-5]",
         "index -5 is out of bounds for dimension 0 of x (size 4)",
         hint="dimension 0 of x has size 4: an index there is in -4..3 (a negative one counts from the end:"
              " x.at[3] or x.at[-1] is the last)")
  x = jnp.arange(512, dtype=F32).reshape(4, 128)
  np.testing.assert_array_equal(last_rows_inside(x, interpret=True), x[-10:])


@mg.mgpu_kernel(out_shape=lambda x: x)
def last_rows_inside(x, out):        # the first hint, followed
  out[...] = x[0:4]


# ---------------------------------------------------------------- a small slab of a 3-D SMEM buffer
@mg.mgpu_kernel(out_shape=lambda x: x)
def slabs(x, out):
  a = ml.smem(x.shape)
  ml.copy(x, a)
  for i in ml.static_range(x.shape[0]):
    a.at[i][...] = a.at[i][...] * 2
  ml.copy(a, out)


@mg.mgpu_kernel(out_shape=lambda x: x)
def slabs_padded(x, out):            # the hint, followed
  a = ml.smem((2, 8, 32))
  ml.copy(x.at[:, :, ml.ds(0, 32)], a)
  m = ml.arange(32)[None, :] < 24
  for i in ml.static_range(x.shape[0]):
    v = a.at[i, ml.ds(0, 8), ml.ds(0, 32)].load(mask=m, other=0)
    out.at[i, :, ml.ds(0, 32)].store(v * 2, mask=m)


def test_a_small_slab_of_a_3d_buffer_is_padded_in_its_own_rank():
  """The hint said to allocate the (2, 8, 24) buffer as ml.smem((8, 32)) and read a.load(...): the
  slab's shape, not the buffer's, and the whole buffer's read. It now pads the buffer's last
  dimension and reads the slab's window."""
  x = (jnp.arange(2 * 8 * 24) % 97).astype(F16).reshape(2, 8, 24)
  # (the (8, 24) SMEM slab, 192 elements, is read a row at a time and held as their vector since probe 45g)
  np.testing.assert_array_equal(slabs(x, interpret=True), x * 2)
  np.testing.assert_array_equal(slabs_padded(x, interpret=True), x * 2)
  jax.export.export(jax.jit(slabs_padded), platforms=["cuda"])(S(x.shape, x.dtype))
