"""Probe 46a (odd windows on both sides of an assignment, and index forms): `math.floor(f)`, `math.ceil(f)` and
`math.trunc(f)` of a run-time scalar are ints, as Python's, so they index."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


# ---------------------------------------------------------------- math.floor / ceil / trunc of a run-time scalar
@mg.mgpu_kernel(out_shape=lambda x, f, n: (S((5,), x.dtype), S((7,), I32)))
def math_rounded_index(x, f, n, out, ints):
  g = f[0]
  out[0] = x[math.floor(g)]
  out[1] = x[math.ceil(g * 2.0) - 1]
  out[2] = x[math.trunc(f[1].astype(jnp.bfloat16)) + 8]
  out[3] = x.at[ml.ds(math.floor(g), 4)][...].sum()
  out[4] = x[math.floor(n[0] / 3) + 8]                 # of an integer quotient: n // 3, exactly
  ints[0] = math.floor(f[1])
  ints[1] = math.ceil(f[1])
  ints[2] = math.trunc(f[1])
  ints[3] = math.ceil(n[1] / 64)                     # of an integer quotient: ml.cdiv(n, 64), exactly
  ints[4] = math.floor(n[1] / 64)
  ints[5] = math.floor(n[0])                         # of an integer: itself
  ints[6] = math.ceil(n[0] / -4)


def _math_rounded_want(x, fa, na):
  g, h = float(fa[0]), float(fa[1])
  hb = float(np.asarray(fa[1:2]).astype(BF16)[0])
  n0, n1 = int(na[0]), int(na[1])
  out = [x[math.floor(g)], x[math.ceil(float(np.float32(g) * np.float32(2))) - 1], x[math.trunc(hb) + 8],
         x[math.floor(g):math.floor(g) + 4].sum(), x[n0 // 3 + 8]]
  ints = [math.floor(h), math.ceil(h), math.trunc(h), -(-n1 // 64), n1 // 64, n0, -(n0 // 4)]
  return np.array(out, np.float32), np.array(ints, np.int32)


def test_math_floor_ceil_trunc_of_a_run_time_scalar_are_ints_that_index():
  """math.floor(f) of a float scalar was MG003 (hinted ml.floor, whose float result no index takes); Python's
  math.floor, ceil and trunc give ints: an int32 here, the whole number toward -inf, +inf or 0. Of a true division
  of integers (math.ceil(n / 64)) the exact integer quotient (n // 64, ml.cdiv(n, 64)): float32's rounds past
  2**24."""
  x = np.arange(16, dtype=np.float32) * 10 + 1
  for f, n in (([2.6, -1.5], [7, 2**24 + 1]), ([3.0, 1.25], [-5, 64]), ([0.5, -2.0], [0, -65])):
    fa, na = np.array(f, np.float32), np.array(n, np.int32)
    got, ints = math_rounded_index(x, fa, na, interpret=True)
    want, want_ints = _math_rounded_want(x, fa, na)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, err_msg=str(f))
    np.testing.assert_array_equal(np.asarray(ints), want_ints, err_msg=str((f, n)))
  ir = math_rounded_index.typed_ir(S((16,), F32), S((2,), F32), S((2,), I32))
  assert "floor" in ir and "ceil" in ir and "scalar<int32> = cast" in ir, ir
  jax.export.export(jax.jit(math_rounded_index), platforms=["cuda"])(S((16,), F32), S((2,), F32), S((2,), I32))
  # Python's math.floor takes one number, not an array: of a register tensor it stays MG003, hinting ml.floor
  expect(math_floor_of_a_tensor, [S((128,), F32)], mg.KernelTypeError, "math.floor(x[...])",
         "floor cannot take a register tensor inside a kernel",
         hint="use ml.floor: kernels call ml.* functions on register values")


@mg.mgpu_kernel(out_shape=lambda x: x)
def math_floor_of_a_tensor(x, o):
  o[...] = math.floor(x[...])


@pytest.mark.gpu
def test_gpu_math_floor_ceil_trunc_index():
  x = np.arange(16, dtype=np.float32) * 10 + 1
  for f, n in (([2.6, -1.5], [7, 2**24 + 1]), ([3.0, 1.25], [-5, 64]), ([0.5, -2.0], [0, -65])):
    fa, na = np.array(f, np.float32), np.array(n, np.int32)
    got, ints = math_rounded_index(jnp.asarray(x), jnp.asarray(fa), jnp.asarray(na))
    want, want_ints = _math_rounded_want(x, fa, na)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, err_msg=str(f))
    np.testing.assert_array_equal(np.asarray(ints), want_ints, err_msg=str((f, n)))
