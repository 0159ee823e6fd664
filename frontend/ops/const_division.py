"""`x / c` of a float register value and a number known while tracing, as jnp computes it (probe 53h).

XLA's algebraic simplifier, a pass every backend runs, rewrites a floating-point division by a constant into
the product by the constant's reciprocal (`A / Const => A * (1 / Const)`, the reciprocal computed in the
constant's own type), and jnp's `x / 3.0` holds its Python number as such a constant, eagerly and under jit.
So jnp's float32 `x / 3.0` is `x * float32(1 / float32(3.0))`, an ulp from the IEEE quotient in a third of the
values. float16's differs by platform: XLA on the CPU multiplies by the float16 reciprocal, on the GPU (the
H100 of session 43, benchmarks/probe_div_const.py) in float32 by the float32 reciprocal of the number rounded to
float16, rounded once; the kernel writes the GPU's (elementwise.binary widens float16 for it), bit for bit
jnp's on the GPU, in interpret mode too (and a multiply where the GPU's division is not IEEE's; design note 64).
bfloat16, which XLA widens to float32 first (where the product and the quotient round alike), keeps the division; so do powers of two (the product is the quotient exactly, and the examples'
kernels keep their MLIR) and numbers whose reciprocal is not a normal float.
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import DType

_NP = {DType.f32: np.float32, DType.f16: np.float16}


def reciprocal(c, d) -> float | None:
  """The float32 number a division by `c` in dtype `d` multiplies by in jnp on the GPU (XLA's reciprocal of the
  constant; float16's product is in float32), or None
  where the division stays (another dtype, a power of two, zero, a non-finite or subnormal number or reciprocal)."""
  t = _NP.get(d)
  if t is None or isinstance(c, bool) or not isinstance(c, (int, float)) or type(c).__name__ == "TypedInt":
    return None
  with np.errstate(all="ignore"):
    k = t(c)
    r = np.float32(1) / np.float32(k)     # (float16 multiplies in float32 by the float32 reciprocal, as on the GPU)
  info = np.finfo(t)
  if not (np.isfinite(k) and np.isfinite(t(r))) or k == 0 or abs(k) < info.tiny or abs(t(r)) < info.tiny:
    return None
  m, _ = math.frexp(abs(float(k)))
  if m == 0.5:
    return None               # a power of two: x / 2**n is x * 2**-n exactly
  return float(r)
