"""Triton's conversion keywords on ml.cast / .astype: `bitcast=True` (ml.bitcast) and
`fp_downcast_rounding` ("rtne", the default rounding, or "rtz": toward zero, float32 -> bfloat16 by
its bits); jnp's `copy=` (nothing to copy in registers)."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import resolve
from .base import is_value
from .elementwise_checks import method_on

_MODES = ("rtne", "rtz")


def check_cast_keywords(cx, x, dtype, rounding, bitcast, copy):
  """The rounding mode asked for ("rtne" or "rtz"), after checking the keywords' values."""
  if not isinstance(bitcast, bool):
    raise E.KernelTypeError(f"ml.cast's bitcast must be True or False, got {bitcast!r}", cx.loc,
                            hint="ml.cast(x, dtype, bitcast=True) is ml.bitcast(x, dtype): the same bits")
  if copy is not None and not isinstance(copy, bool):
    raise E.KernelTypeError(f".astype's copy must be True or False, got {copy!r}", cx.loc,
                            hint="leave copy out: a conversion in registers makes a new value anyway")
  if rounding is None:
    return "rtne"
  if rounding not in _MODES:
    raise E.KernelTypeError(f"fp_downcast_rounding must be 'rtne' or 'rtz', got {rounding!r}", cx.loc,
                            hint="'rtne' rounds to nearest, ties to even (the default); 'rtz' toward zero")
  if bitcast and rounding == "rtz":
    raise E.KernelTypeError("fp_downcast_rounding='rtz' with bitcast=True: a bitcast does not round", cx.loc,
                            hint="drop fp_downcast_rounding, or bitcast=True")
  return rounding


def toward_zero(cx, x, dt):
  """`x` converted to `dt` rounding toward zero: float32 -> bfloat16 keeps the top 16 bits of each
  finite value and infinity (NaN converts as it does to nearest: it stays NaN). Other float
  narrowings (float32 -> float16 or float8, float16 -> bfloat16, ...; Triton's `x.to(tl.float16,
  fp_downcast_rounding="rtz")`): the value rounded to nearest, then, where that rounded away from zero,
  one step back toward zero by its bits (an overflow to inf becomes the largest finite value; float8
  saturates as its conversion does)."""
  from .elementwise import BinOp, CmpOp, UnOp, astype, binary, compare, saturating_cast, unary, where_
  from .elementwise_fns import bitcast
  src = resolve(x.type.dtype) if is_value(x) else None
  if src == dt:
    return x
  if not (isinstance(src, DType) and src.is_float and dt.is_float and _narrower(dt, src)):
    name = method_on(cx.named(x)) if is_value(x) else repr(x)
    raise E.UnsupportedDtypeError(
        f"fp_downcast_rounding='rtz' rounds a float to a narrower float, not {src or 'a Python number'} to {dt}",
        cx.loc, hint=(f"a float converted to an integer truncates toward zero anyway (leave fp_downcast_rounding"
                      f" out): {name}.astype(jnp.{dt})" if dt.is_int and isinstance(src, DType) and src.is_float else
                      f"round to nearest even (leave fp_downcast_rounding out): {name}.astype(jnp.{dt})"))
  if src == DType.f32 and dt == DType.bf16:
    top = bitcast.rule(cx, binary(cx, BinOp.AND, bitcast.rule(cx, x, DType.u32), 0xFFFF0000), DType.f32)
    return where_(cx, compare(cx, CmpOp.NE, x, x), astype(cx, x, dt), astype(cx, top, dt))
  wide = x if src == DType.f32 else astype(cx, x, DType.f32)       # (exact)
  y = saturating_cast(cx, wide, dt)      # (float8: the hardware's saturating conversion, not jnp's NaN)
  away = compare(cx, CmpOp.GT, unary(cx, UnOp.ABS, astype(cx, y, DType.f32)), unary(cx, UnOp.ABS, wide))
  bits = DType.u8 if dt.bits == 8 else DType.u16
  back = bitcast.rule(cx, binary(cx, BinOp.SUB, bitcast.rule(cx, y, bits), 1), dt)   # |y| >= 1 ulp: no wrap
  return where_(cx, away, back, y)


def _narrower(dt, src) -> bool:
  """Whether every `dt` value is a `src` value, `src` not one of `dt`'s (float16 -> bfloat16 counts: its
  range is not bfloat16's, but rounding toward zero is defined through float32)."""
  return dt.bits < src.bits or (dt.bits == src.bits and dt != src)
