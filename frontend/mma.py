"""`ml.dot`: the tensor-core (WGMMA) matrix product, its type rule and operand checks.

WGMMA reads both operands from SMEM tiled in (8, 128 bytes) tiles with a
128-byte swizzle (frontend/layouts.py sets that up for every buffer a dot
reads); the accumulator lives in registers in the WGMMA layout. Limits, from
MOSAIC_GPU_NOTES 1.6: A and B of one 16-bit dtype, m a multiple of 64, n a
multiple of 64 and at most 256, k a multiple of 64, an f32 accumulator (f16
also allowed for f16 inputs).
"""
from __future__ import annotations

from . import errors as E
from . import ir
from .dtypes import DType
from .semantics import is_value, kind_of
from .types import Layout, RefType, Space, TensorType, dtype_name, resolve

MMA_DTYPES = (DType.f16, DType.bf16)
MAX_N = 256


def dot(em, a, b, acc, loc, name=""):
  for what, x in (("a", a), ("b", b)):
    if not is_value(x) or not isinstance(x.type, RefType) or x.type.space != Space.SMEM or x.type.remote:
      got = f"{x.name} ({x.type.space})" if is_value(x) and isinstance(x.type, RefType) else kind_of(x)
      raise E.MmaOperandError(
          f"ml.dot operand {what} must be an SMEM buffer of this CTA, got {got}", loc,
          hint=f"copy the tile into SMEM first: {what}_s = ml.smem(shape); ml.copy({what}_tile, {what}_s)")
    if len(x.type.shape) != 2:
      raise E.MmaOperandError(f"ml.dot operand {what} must be 2-D, got shape {x.type.shape}", loc)
  (m, k), (k2, n) = a.type.shape, b.type.shape
  if k != k2:
    raise E.ShapeMismatchError(
        f"ml.dot of {a.name} {a.type.shape} and {b.name} {b.type.shape}: inner dimensions differ", loc)
  dt = em.unify(a.type.dtype, b.type.dtype, loc, "ml.dot operand")
  if dt is None:
    raise E.DtypeMismatchError(
        f"ml.dot of {a.name} ({dtype_name(a.type.dtype)}) and {b.name} ({dtype_name(b.type.dtype)}):"
        f" both operands must have one dtype", loc, hint="convert one operand's tile when you fill it")
  d = resolve(dt)
  if isinstance(d, DType) and d not in MMA_DTYPES:
    raise E.UnsupportedDtypeError(
        f"ml.dot on {d}: the tensor cores take float16 or bfloat16 operands here", loc,
        hint="convert the tiles to jnp.bfloat16 or jnp.float16 when you fill them")
  if m % 64:
    raise E.MmaOperandError(f"ml.dot needs m (rows of a) to be a multiple of 64, got {m}", loc,
                            hint="use a tile of 64, 128, ... rows")
  if n % 64 or n > MAX_N:
    raise E.MmaOperandError(
        f"ml.dot needs n (columns of b) to be a multiple of 64 and at most {MAX_N}, got {n}", loc,
        hint="split wider tiles into several dots of at most 256 columns")
  if k % 64:
    raise E.MmaOperandError(f"ml.dot needs k to be a multiple of 64 (128 bytes of 16-bit elements), got {k}",
                            loc, hint="use a k tile of 64 or 128")
  acc_dtype = DType.f32
  if acc is not None:
    if not is_value(acc) or not isinstance(acc.type, TensorType):
      raise E.KernelTypeError(f"ml.dot's acc must be a register tensor, got {kind_of(acc)}", loc,
                              hint="start from acc = ml.zeros((m, n), jnp.float32)")
    if acc.type.shape != (m, n):
      raise E.ShapeMismatchError(
          f"ml.dot's acc has shape {acc.type.shape}, but {a.name} @ {b.name} is {(m, n)}", loc)
    acc_dtype = resolve(acc.type.dtype)
    ok = (DType.f32, DType.f16) if d == DType.f16 else (DType.f32,)
    if isinstance(acc_dtype, DType) and acc_dtype not in ok:
      raise E.UnsupportedDtypeError(
          f"ml.dot accumulates {d} products in {' or '.join(map(str, ok))}, not {acc_dtype}", loc,
          hint="accumulate in jnp.float32: acc = ml.zeros((m, n), jnp.float32)")
  t = TensorType((m, n), acc_dtype, Layout.WGMMA)
  return em.emit(ir.Dot, a, b, acc, loc=loc, types=[t], names=[name]).result
