"""Rules of frontend/ops/fma.py: `math.fma` (LLVM's llvm.fma: PTX fma.rn.f32, .f16, .bf16), and in
interpret mode x * y + z rounded once: the product is exact in float64, the sum's rounding error is
exact too (TwoSum), and rounding to odd keeps the second rounding (to the dtype) correct."""
from __future__ import annotations

import numpy as np
from jaxlib.mlir.dialects import math as mlir_math

from ..frontend.ops.fma import Fma
from ..frontend.types import ScalarType, TensorType
from . import interpret_numerics as N
from .mosaic import as_array, operand
from .registry import interpret, lower


@lower(Fma)
def _fma(ctx, o):
  t = o.result.type
  if isinstance(t, ScalarType):
    ctx.set(o.result, mlir_math.fma(*(operand(ctx, v) for v in (o.x, o.y, o.z))))
    return
  x, y, z = (as_array(ctx, operand(ctx, v), t, t.dtype) for v in (o.x, o.y, o.z))
  ctx.set(o.result, x._pointwise(mlir_math.fma, y, z))


def _to_odd(s, err, wide):
  """`s` (the nearest `wide` value to s + err) moved to the odd neighbour where err != 0: rounded to odd."""
  bits = {np.float64: np.uint64, np.float32: np.uint32}[wide]
  even = (s.view(bits) & 1) == 0
  step = np.nextafter(s, np.where(err > 0, np.inf, -np.inf).astype(wide))
  return np.where((err != 0) & even & np.isfinite(s), step, s).astype(wide)


def fma_once(x, y, z, dtype):
  """x * y + z rounded once to numpy `dtype` (float32, float16 or bfloat16)."""
  with np.errstate(all="ignore"):
    x, y, z = (np.asarray(v, np.float64) for v in (x, y, z))
    p = x * y                                  # exact: 24 + 24 significant bits
    s = p + z
    bp = s - z                                 # TwoSum: s + err == p + z exactly
    err = (p - bp) + (z - (s - bp))
    err = np.where(np.isfinite(s), err, 0.0)
    s = _to_odd(s, err, np.float64)
    if np.dtype(dtype) == np.float32 or np.dtype(dtype) == np.float16:
      return s.astype(dtype)
    f = s.astype(np.float32)                   # bfloat16: to odd in float32 too, then once to nearest
    return _to_odd(f, np.where(np.isfinite(f), s - f.astype(np.float64), 0.0), np.float32).astype(dtype)


@interpret(Fma)
def _i_fma(cta, o):
  t = o.result.type
  nd = N.np_dtype(t.dtype)
  r = fma_once(*(cta.operand(v, t.dtype) for v in (o.x, o.y, o.z)), nd)
  cta.set(o.result, np.array(np.broadcast_to(r, t.shape), nd) if isinstance(t, TensorType) else np.asarray(r, nd))
