"""Tensor cores: `ml.dot` on WGMMA, its type rule and operand checks, and the dot waits.

WGMMA reads both operands from SMEM tiled in (8, 128 bytes) tiles with a 128-byte
swizzle (frontend/layouts.py sets that up for every buffer a dot reads); the
accumulator lives in registers in the WGMMA layout. The limits are hw.py's.
"""
from __future__ import annotations

from .. import errors as E
from .. import hw
from .. import ir
from ..dtypes import DType
from ..infer import unify
from ..ir import Access, LayoutRule, Traits
from ..types import Layout, RefType, Space, TensorType, dtype_name, resolve
from .base import builtin, is_value, kind_of


def _dot_effects(o):
  return [(o.a, Access.MMA_READ), (o.b, Access.MMA_READ), (None, Access.MMA_ISSUE)]


@ir.op(Traits(effects=_dot_effects, layout=LayoutRule.DOT))
class Dot(ir.Op):
  """`acc + a @ b` on the tensor cores (WGMMA), issued asynchronously.

  `a` (m, k) and `b` (k, n) are SMEM refs that frontend/layouts.py tiles and
  swizzles for the tensor cores; `acc` is an (m, n) tensor in the WGMMA layout,
  or None for zeros. The sync pass waits for the result before it is read.
  """
  a: ir.Value
  b: ir.Value
  acc: ir.Value | None
  loc: object
  results: tuple


@ir.op(Traits(inserted=True))
class DotWait(ir.Op):
  """Wait until at most `pending` issued Dot groups are still running."""
  pending: int
  loc: object
  results: tuple = ()


@builtin
def dot(cx, a, b, acc=None):
  """`acc + a @ b` on the tensor cores (WGMMA), accumulating in float32.

  `a` (m, k) and `b` (k, n) are SMEM buffers (or stage views of them) of
  float16 or bfloat16; the compiler tiles and swizzles them for the tensor
  cores. `acc` is an (m, n) register tensor (float32; float16 for float16
  inputs) or None for zeros. m a multiple of 64, n a multiple of 64 up to
  256, k a multiple of 64.
  """
  loc = cx.loc
  for what, x in (("a", a), ("b", b)):
    if not is_value(x) or not isinstance(x.type, RefType) or x.type.space != Space.SMEM or x.type.remote:
      got = f"{x.name} ({x.type.space})" if is_value(x) and isinstance(x.type, RefType) else kind_of(x)
      raise E.MmaOperandError(
          f"ml.dot operand {what} must be an SMEM buffer of this CTA, got {got}", loc,
          hint=f"copy the tile into SMEM first: {what}_s = ml.smem(shape); ml.copy({what}_tile, {what}_s)")
    if len(x.type.shape) != 2:
      raise E.MmaOperandError(f"ml.dot operand {what} must be 2-D, got shape {x.type.shape}", loc,
                              hint="index the leading dimensions away: buf.at[stage]")
  (m, k), (k2, n) = a.type.shape, b.type.shape
  if k != k2:
    raise E.ShapeMismatchError(
        f"ml.dot of {a.name} {a.type.shape} and {b.name} {b.type.shape}: inner dimensions differ", loc,
        hint="a is (m, k) and b is (k, n)")
  dt = unify(a.type.dtype, b.type.dtype, loc, "ml.dot operand")
  if dt is None:
    raise E.DtypeMismatchError(
        f"ml.dot of {a.name} ({dtype_name(a.type.dtype)}) and {b.name} ({dtype_name(b.type.dtype)}):"
        f" both operands must have one dtype", loc, hint="convert one operand's tile when you fill it")
  d = resolve(dt)
  if isinstance(d, DType) and d not in hw.MMA_DTYPES:
    raise E.UnsupportedDtypeError(
        f"ml.dot on {d}: the tensor cores take float16 or bfloat16 operands here", loc,
        hint="convert the tiles to jnp.bfloat16 or jnp.float16 when you fill them")
  k_step = hw.tile_cols(2)
  if m % hw.MMA_M:
    raise E.MmaOperandError(f"ml.dot needs m (rows of a) to be a multiple of {hw.MMA_M}, got {m}", loc,
                            hint="use a tile of 64, 128, ... rows")
  if n % k_step or n > hw.MMA_N_MAX:
    raise E.MmaOperandError(
        f"ml.dot needs n (columns of b) to be a multiple of {k_step} and at most {hw.MMA_N_MAX}, got {n}", loc,
        hint="split wider tiles into several dots of at most 256 columns")
  if k % k_step:
    raise E.MmaOperandError(
        f"ml.dot needs k to be a multiple of {k_step} ({hw.SWIZZLE} bytes of 16-bit elements), got {k}",
        loc, hint="use a k tile of 64 or 128")
  acc_dtype = DType.f32
  if acc is not None:
    if not is_value(acc) or not isinstance(acc.type, TensorType):
      raise E.KernelTypeError(f"ml.dot's acc must be a register tensor, got {kind_of(acc)}", loc,
                              hint="start from acc = ml.zeros((m, n), jnp.float32)")
    if acc.type.shape != (m, n):
      raise E.ShapeMismatchError(
          f"ml.dot's acc has shape {acc.type.shape}, but {a.name} @ {b.name} is {(m, n)}", loc,
          hint=f"accumulate in an ({m}, {n}) tensor")
    acc_dtype = resolve(acc.type.dtype)
    ok = hw.MMA_ACC.get(d, (DType.f32,))
    if isinstance(acc_dtype, DType) and acc_dtype not in ok:
      raise E.UnsupportedDtypeError(
          f"ml.dot accumulates {d} products in {' or '.join(map(str, ok))}, not {acc_dtype}", loc,
          hint="accumulate in jnp.float32: acc = ml.zeros((m, n), jnp.float32)")
  t = TensorType((m, n), acc_dtype, Layout.WGMMA)
  return cx.b.emit(Dot, a, b, acc, loc=loc, types=[t], names=[cx.name]).result
