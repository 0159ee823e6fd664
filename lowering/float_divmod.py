"""Float `//` and `%` on the GPU, as jnp computes them (`jnp.floor_divide`, `jnp.remainder`).

jnp starts from the exact remainder (`lax.rem`, C's fmod) and moves it to the divisor's sign; the
quotient is `(a - fmod) / b`, one less where the remainder moved, rounded half away from zero. LLVM's
NVPTX backend expands `frem` (MLIR's `arith.remf`) as `a - b * trunc(a / b)`, which is not exact where
the quotient is large, so the remainder is computed here from exact steps: each step subtracts a whole
multiple `q` of the divisor scaled by 2**(20k), `q` below 2**20 rounded to the nearest whole number,
with one fused multiply-add, whose result (a multiple of the scaled divisor's last bit, smaller than it)
is exact, and adds the scaled divisor back where it went below zero (exact again). 16-bit operands
take it in float32 (exact: the remainder is representable in their dtype), then the rest of jnp's
formula rounds in their dtype per op, as XLA does. Interpret mode's `float_divmod` is the same formula.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import math as mlir_math

from ..frontend.dtypes import DType
from ..frontend.ops.elementwise import BinOp
from .mosaic import asm_per_element

_STEP = 20                       # bits of quotient a step removes (the approximate division's error stays < 1/4)


def steps(d: DType, divisor=None) -> int:
  """Steps that reduce any finite dividend of `d` (by `divisor` where it is a constant)."""
  top = math.log2(float(ml_dtypes.finfo(np.float32 if d == DType.f32 else d.np).max))   # (numpy's finfo
  # does not know bfloat16 with numpy 2 on the GPU machine)
  if divisor is not None and divisor and not math.isfinite(divisor):
    return 1                  # (an infinite divisor leaves the dividend, a NaN gives NaN: no step reduces)
  low = math.log2(abs(divisor)) if divisor else -149.0 if d != DType.f16 else -24.0
  return max(1, math.ceil((top - low + 1) / _STEP))


def fmod(a: fa.FragmentedArray, b: fa.FragmentedArray, n: int) -> fa.FragmentedArray:
  """C's fmod of float32 arrays, exactly (the dividend's sign; NaN for a zero or NaN divisor, an
  infinite or NaN dividend)."""
  x, y = a.abs(), b.abs()
  r = x
  for k in reversed(range(n)):
    yk = _scaled(y, _STEP * k)                          # exact, or inf (then no step is taken)
    q = (r / yk)._pointwise(mlir_math.roundeven)
    m = (-q)._pointwise(mlir_math.fma, yk, r)             # r - q * yk, exact
    m = (m < 0.0).select(m + yk, m)
    r = (r >= yk).select(m, r)
  r = r._pointwise(mlir_math.copysign, a)
  nan = (y == 0.0) | (x == float("inf")) | (a != a) | (b != b)
  return nan.select(fa.FragmentedArray.splat(_f32(float("nan")), r.shape, r.layout), r)


def _div_rn(a: fa.FragmentedArray, b: fa.FragmentedArray) -> fa.FragmentedArray:
  """a / b rounded to nearest, as XLA and NumPy divide: `arith.divf` compiles to an approximate
  division on the GPU (design note 64), which moved jnp's rounded quotient by one where the exact one
  is near a half (the H200 run of session 25, quotients of 2**22 to 2**23)."""
  return a._pointwise(lambda x, y: asm_per_element("div.rn.f32 $0, $1, $2;", "=f,f,f", x, y), b)


def _scaled(y, e: int):
  """y * 2**e, in factors a float32 holds (each exact, or inf where the product is)."""
  while e > 0:
    y, e = y * float(2.0 ** min(e, 120)), e - 120
  return y


def _f32(v):
  from jaxlib.mlir.dialects import arith
  return arith.constant(ir.F32Type.get(), v)


def floor_divmod(kind: BinOp, a: fa.FragmentedArray, b: fa.FragmentedArray, d: DType, n: int):
  """jnp's `a // b` (kind FLOORDIV) or `a % b` (MOD) of arrays of float dtype `d`."""
  f32 = ir.F32Type.get()
  wide = (lambda v: v) if d == DType.f32 else (lambda v: v.astype(f32))
  mod = fmod(wide(a), wide(b), n)
  if d != DType.f32:
    mod = mod.astype(a.mlir_dtype)                       # exact
  moved = (mod != 0.0) & ((mod < 0.0) ^ (b < 0.0))
  if kind == BinOp.MOD:
    return moved.select(mod + b, mod)
  q = _div_rn(wide((b == 0.0).select(a, a - mod)), wide(b))
  if d != DType.f32:
    q = q.astype(a.mlir_dtype)                           # float32's rounded quotient, rounded again: the
    # 16-bit dtype's own (a float32 quotient has more than twice their bits and two more)
  q = (moved | (mod != mod)).select(q - 1.0, q)
  t = q._pointwise(mlir_math.trunc)                      # rounded half away from zero, as lax.round
  return ((q - t).abs() >= 0.5).select((q < 0.0).select(t - 1.0, t + 1.0), t)
