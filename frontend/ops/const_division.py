"""`x / c` of a float register value and a number known while tracing, as jnp computes it (probe 53h).

XLA's algebraic simplifier, a pass every backend runs, rewrites a floating-point division by a constant into
the product by the constant's reciprocal (`A / Const => A * (1 / Const)`, the reciprocal computed in the
constant's own type), and jnp's `x / 3.0` holds its Python number as such a constant, eagerly and under jit.
So jnp's float32 `x / 3.0` is `x * float32(1 / float32(3.0))`, an ulp from the IEEE quotient in a third of the
values, and float16's is the product by the float16 reciprocal (XLA multiplies float16 natively; under jax.jit
on the GPU too, session 44's H100: benchmarks/probe_div_const.py, where eager jnp on the GPU, holding c as an
operand, gives the IEEE quotient instead; session 43 had taken that eager quotient for the GPU's rule). A kernel
writes the same product: bit for bit jnp's in interpret mode and on the GPU (whose division is not IEEE's;
design note 64). bfloat16, which XLA on the CPU widens to float32 first (where the product and the quotient
round alike), keeps the division; so do powers of two (the product is the quotient exactly, and the examples'
kernels keep their MLIR) and numbers whose reciprocal is not a normal float.
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import DType

_NP = {DType.f32: np.float32, DType.f16: np.float16}


def reciprocal(c, d) -> float | None:
  """The number a division by `c` in dtype `d` multiplies by in jnp (XLA's reciprocal of the constant), or None
  where the division stays (another dtype, a power of two, zero, a non-finite or subnormal number or reciprocal)."""
  t = _NP.get(d)
  if t is None or isinstance(c, bool) or not isinstance(c, (int, float)) or type(c).__name__ == "TypedInt":
    return None
  with np.errstate(all="ignore"):
    k = t(c)
    r = t(np.float32(1) / np.float32(k))
  info = np.finfo(t)
  if not (np.isfinite(k) and np.isfinite(r)) or k == 0 or abs(k) < info.tiny or abs(r) < info.tiny:
    return None
  m, _ = math.frexp(abs(float(k)))
  if m == 0.5:
    return None               # a power of two: x / 2**n is x * 2**-n exactly
  return float(r)
