"""Probe 25b (helpers writing reductions, convolutions and data-dependent kernels): messages blamed
on the wrong line, hints that describe another operation or that fail when followed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- B1: a keepdims full reduction used again
@mg.mgpu_kernel(out_shape=lambda x: (S((), F32), S((), F32), S((1, 1), F32), S((), F32)))
def keepdims_again(x, a, b, c, d):
  t = ml.sum(x[...], keepdims=True)
  a[...] = ml.max(t)
  b[...] = t[0, 0] * 2
  c[...] = ml.mean(t, axis=1, keepdims=True) + 1
  d[...] = ml.min(ml.sum(t, axis=0))


def test_a_keepdims_full_reduction_reduces_again_and_indexes_to_its_scalar():
  # ml.max(t) of t = ml.sum(x, keepdims=True) was MG204 at t's line ("t has shape (1, 1): register
  # tensors need a multiple of 128 elements"), as was t[0, 0]; one element reduces to itself
  x = jax.random.normal(jax.random.key(0), (16, 128), F32)
  s = jnp.sum(x, keepdims=True)
  a, b, c, d = keepdims_again(x, interpret=True)
  np.testing.assert_allclose(a, jnp.max(s), rtol=1e-5)
  np.testing.assert_allclose(b, s[0, 0] * 2, rtol=1e-5)
  np.testing.assert_allclose(c, jnp.mean(s, axis=1, keepdims=True) + 1, rtol=1e-5)
  np.testing.assert_allclose(d, jnp.min(jnp.sum(s, axis=0)), rtol=1e-5)
  _export(lambda x: keepdims_again(x)[0], S((16, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), F32))
def keepdims_carried(x, out):
  t = ml.zeros((1, 1), F32)
  for c in range(x.shape[0] // 8):
    t = t + ml.sum(x.at[ml.ds(c * 8, 8)][...], keepdims=True)
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), F32))
def scalar_carried(x, out):
  t = 0.0
  for c in range(x.shape[0] // 8):
    t = t + ml.sum(x.at[ml.ds(c * 8, 8)][...])
  out[...] = t


def test_a_loop_carrying_a_one_element_tensor_is_blamed_at_the_loop_and_hints_a_scalar_carry():
  expect(keepdims_carried, [S((16, 128), F32)], mg.LayoutError, "for c in",
         "this loop carries t, a tensor of shape (1, 1): a register tensor needs a multiple of 128 elements"
         " (one per thread of a warpgroup)",
         hint="carry a scalar: start it as a number (t = 0.0) and add full reductions without keepdims=True"
              " (t = t + ml.sum(...)); of a one-element tensor, t[0, 0] is its scalar")
  x = jax.random.normal(jax.random.key(1), (16, 128), F32)     # the hint, followed
  np.testing.assert_allclose(scalar_carried(x, interpret=True), jnp.sum(x, keepdims=True), rtol=1e-5)
  _export(scalar_carried, S((16, 128), F32))


# ---------------------------------------------------------------- B2: a window of an empty dimension
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def masked_row_sums(x, out):
  cols = ml.arange(128)
  v = x.at[:, ml.ds(0, 128)].load(mask=cols[None, :] < x.shape[1], other=0.0)
  out[...] = ml.sum(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((128,), F32))
def gather_empty(t, ids, out):
  out[...] = t[ids[...], 0]


def test_a_window_of_an_empty_dimension_hints_the_empty_case_outside_the_kernel():
  # the hint was the bare fact "dimension 1 of x has size 0"
  hint = ("x is empty along dimension 1 in this call: handle that case outside the kernel (when x.shape[1] == 0,"
          " make the outputs there, e.g. with jnp.zeros) and call the kernel only on non-empty arrays")
  expect(masked_row_sums, [S((8, 0), F32)], mg.IndexOutOfBoundsError, "x.at[:, ml.ds(0, 128)]",
         "ml.ds(0, 128) is out of bounds for dimension 1 of x (size 0)", hint=hint)

  def row_sums(x):                        # the hint, followed
    return jnp.zeros((x.shape[0],), F32) if x.shape[1] == 0 else masked_row_sums(x, interpret=True)
  np.testing.assert_array_equal(row_sums(jnp.ones((8, 0), F32)), np.zeros(8))
  np.testing.assert_array_equal(row_sums(jnp.ones((8, 100), F32)), np.full(8, 100.0))
  _export(masked_row_sums, S((8, 100), F32))
  e = expect(gather_empty, [S((4, 0), F32), S((128,), jnp.int32)], mg.IndexOutOfBoundsError, "t[ids[...], 0]",
             "index 0 is out of bounds for dimension 1 of t (size 0)")
  assert e.hint.startswith("t is empty along dimension 1 in this call: handle that case outside the kernel")
