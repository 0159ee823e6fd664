"""Probe G's findings.

1. A reversed slice (`x.at[::-1]`, `v[::-1]`) got the strided-slice hint built for a step of
   -1 ("an axis of size -1 ... n // -1"); negative and zero steps now have their own messages
   and hints, and the hints work.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def exports(kernel, *args, **kw):
  """The kernel's real Mosaic GPU module, built on the CPU through a CUDA export."""
  text = jax.export.export(jax.jit(functools.partial(kernel, **kw)), platforms=["cuda"])(*args).mlir_module()
  assert "mosaic_gpu" in text
  return text


# ---------------------------------------------------------------- 1. reversed slices
@mg.mgpu_kernel(out_shape=lambda x: x)
def rev_ref(x, out):
  out[...] = x.at[::-1][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def rev_ref_cols(x, out):
  out[...] = x.at[:, ::-2][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def rev_tensor(x, out):
  v = x[...]
  out[...] = v[::-1]


@mg.mgpu_kernel(out_shape=lambda x: x)
def strided_tensor(x, out):
  v = x[...]
  out[...] = v[:, ::2]


@mg.mgpu_kernel(out_shape=lambda x: x)
def zero_step(x, out):
  out[...] = x.at[::0][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def plain_copy(x, out):
  out[...] = x[...] * 2.0


R = 8


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // R,))
def rows_from_the_end(x, out):
  i = ml.program_id(0)
  n = x.shape[0]
  for r in ml.static_range(R):
    out.at[i * R + r][...] = x.at[n - 1 - (i * R + r)][...]


REVERSED = "reversed slices (step -1) are not supported: windows are read in memory order"
OUTSIDE = ("reverse outside the kernel, where XLA fuses it into the producer: call the kernel on"
           " x[::-1] (jnp.flip(x, axis=0)) from your jitted function")


def test_a_reversed_ref_slice_has_its_own_hint():
  expect(rev_ref, [S((128,), F32)], mg.KernelTypeError, "x.at[::-1][...]", REVERSED, hint=OUTSIDE)
  e = expect(rev_ref, [S((64, 128), F32)], mg.KernelTypeError, "x.at[::-1][...]", REVERSED)
  assert e.hint == OUTSIDE + "; or read row n - 1 - r of the ref with an int index: x.at[n - 1 - r]"
  assert "size -1" not in e.hint and "// -1" not in e.hint
  expect(rev_ref_cols, [S((64, 128), F32)], mg.KernelTypeError, "x.at[:, ::-2][...]",
         "reversed slices (step -2) are not supported: windows are read in memory order",
         hint="reverse outside the kernel, where XLA fuses it into the producer: call the kernel on"
              " x[:, ::-2] from your jitted function")


def test_a_reversed_register_tensor_slice_has_its_own_hint():
  expect(rev_tensor, [S((128,), F32)], mg.KernelTypeError, "v[::-1]",
         "reversed slices (step -1) of a register tensor are not supported: its elements live in other"
         " threads", hint=OUTSIDE)
  e = expect(strided_tensor, [S((8, 128), F32)], mg.KernelTypeError, "v[:, ::2]",
             "strided slices (step 2) of a register tensor are not supported: its elements live in other"
             " threads")
  assert "x.reshape(..., n // 2, 2)" in e.hint


def test_a_zero_step_is_an_error_as_in_python():
  expect(zero_step, [S((128,), F32)], mg.KernelTypeError, "x.at[::0][...]",
         "slice step cannot be zero (dimension 0)",
         hint="slice with a step of 1 (x.at[a:b]), or index one element with an int")


def test_the_reversal_hints_work():
  x = jax.random.normal(jax.random.key(0), (128,), F32)
  got = jax.jit(lambda x: plain_copy(x[::-1], interpret=True))(x)      # the hint, followed
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x[::-1] * 2.0))
  exports(lambda x: plain_copy(x[::-1]), x)
  x2 = jax.random.normal(jax.random.key(1), (64, 128), F32)
  np.testing.assert_array_equal(np.asarray(rows_from_the_end(x2, interpret=True)), np.asarray(x2[::-1]))
  rows_from_the_end.check(S((64, 128), F32))
  exports(rows_from_the_end, x2)


@pytest.mark.gpu
def test_gpu_rows_from_the_end():
  x = jax.random.normal(jax.random.key(1), (64, 128), F32)
  np.testing.assert_array_equal(np.asarray(jax.jit(rows_from_the_end)(x)), np.asarray(x[::-1]))
