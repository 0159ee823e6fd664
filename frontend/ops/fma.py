"""`ml.fma(x, y, z)`: x * y + z rounded once (Triton's `tl.fma`, libdevice's `fma`; PTX `fma.rn`), where
`x * y + z` rounds the product first (interpret mode) or as the compiler fuses it."""
from __future__ import annotations

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..types import ScalarType, TensorType, dtype_name, resolve
from .base import builtin, check_register_value, is_value, kind_of
from .elementwise import PURE_ELEMENTWISE

FMA_DTYPES = (DType.f32, DType.f16, DType.bf16)


@ir.op(PURE_ELEMENTWISE)
class Fma(ir.Op):
  """x * y + z with one rounding (operands of the result's type)."""
  x: ir.Value
  y: ir.Value
  z: ir.Value
  loc: object
  results: tuple


@builtin
def fma(cx, x, y, z):
  """x * y + z rounded once, to nearest even (`tl.fma`): float32, float16 or bfloat16 operands of one
  dtype (Python numbers take it), broadcast to one shape."""
  from .elementwise import full_
  from .shape import broadcast_operands, broadcast_to
  args = (x, y, z)
  for a in args:
    check_register_value(cx, a, "ml.fma")
  values = [a for a in args if is_value(a)]
  if not values:
    raise E.KernelTypeError("ml.fma of three Python numbers: compute it while tracing", cx.loc,
                            hint="ml.fma takes register values (x * y + z of numbers is a number)")
  dts = {resolve(v.type.dtype) for v in values}
  if len(dts) > 1:
    names = ", ".join(f"{cx.named(v, kind_of(v))} ({dtype_name(resolve(v.type.dtype))})" for v in values)
    raise E.DtypeMismatchError(f"ml.fma's operands have different dtypes: {names}", cx.loc,
                               hint="convert them to one: ml.fma(x, y.astype(x.dtype), z.astype(x.dtype))")
  dt = dts.pop()
  if dt not in FMA_DTYPES:
    raise E.UnsupportedDtypeError(
        f"ml.fma on {dtype_name(dt)}: a fused multiply-add takes float32, float16 or bfloat16", cx.loc,
        hint="convert to float32 first: ml.fma(x.astype(jnp.float32), y.astype(jnp.float32), z.astype(jnp.float32))"
             if dt != DType.bool_ else "for integers write x * y + z")
  args, shape = broadcast_operands(cx, args, "ml.fma")
  if shape is None:
    from .elementwise import _scalar_full
    args = [a if is_value(a) else _scalar_full(cx, a, dt, "ml.fma") for a in args]
    rtype = ScalarType(dt)
  else:
    args = [full_(cx, shape, a, dt) if not is_value(a) else
            broadcast_to.rule(cx, a, shape) if isinstance(a.type, ScalarType) else a for a in args]
    rtype = TensorType(shape, dt)
  return cx.b.emit(Fma, *args, loc=cx.loc, types=[rtype], names=[cx.name]).result
