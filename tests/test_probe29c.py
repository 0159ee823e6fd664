"""Probe 29c (numerics parity: interpret mode computes what the GPU computes, and both what jnp
computes where jnp defines the result): integer // and % of negative operands, division by zero,
float -> int casts of NaN, infinities and out-of-range values, wrapping + and *, shifts past the
width, NaN and -0.0 in max/min and sorts, rounding to float16/bfloat16, mixed-dtype promotion."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect  # noqa: F401

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16
F16 = jnp.float16


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- scalar casts between 16-bit floats
@mg.mgpu_kernel(out_shape=lambda x: S((8,), F16 if x.dtype == BF16 else BF16))
def scalar_16bit_swap(x, out):
  for j in range(8):
    s = x[j]
    out[j] = s.astype(out.dtype)


@pytest.mark.parametrize("src,dst", [(BF16, F16), (F16, BF16)])
def test_a_scalar_cast_between_16_bit_floats_goes_through_float32(src, dst):
  """It was MG106 ('scalars convert between floats of one width only through float32'), though
  the tensors' cast bridges through float32 itself: bfloat16 -> float32 is exact, so the one
  rounding is jnp's (NaN, infinities, float16's overflow to inf and its subnormals included)."""
  x = jnp.asarray([np.nan, 1.0 / 3, -0.0, np.inf, 70000.0, 3e-6, -2.7e38 if src == BF16 else -65504.0,
                   1.00390625], src)
  np.testing.assert_array_equal(np.asarray(scalar_16bit_swap(x, interpret=True)), np.asarray(x.astype(dst)))
  builds(scalar_16bit_swap, S((8,), src))
