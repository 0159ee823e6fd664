"""Triton's functions of one meaning that a ported kernel calls as it was written (probe 49h): `tl.clamp`,
`tl.fdiv`, `tl.div_rn`, `tl.umulhi` (libdevice's `mulhi`) and `tl.swizzle2d` (the tutorials' grouped matmul ordering), each a thin layer
over elementwise.py's type rules; `tl.PropagateNan` for clamp's keyword. Each was an MG002 hint before. libdevice's
`round` (halves away from zero; probe 57c: it was MG002, whose hint's `floor(x + 0.5)` rounded 0.49999997 to 1)."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import dtype_name, resolve
from . import elementwise as ew
from .elementwise_checks import method_on
from .base import Builtin, builtin, check_binary_operands, check_register_value, is_value, kind_of, shown


class PropagateNan:
  """Triton's `tl.PropagateNan.NONE` / `.ALL` (tl.clamp's and tl.maximum's keyword): accepted; a NaN `x`
  stays NaN either way (jnp.clip's rule; Triton leaves NONE's result on a NaN unspecified)."""
  NONE = "none"
  ALL = "all"


def _floats(cx, x, y, what):
  """`x` and `y` (register values or numbers, at least one a value) for a float-only division: integers and bools
  are converted to float32 first (as `/` converts them), float16 and bfloat16 to float32 (the result converted
  back: the division rounds once, in float32, then to the 16-bit dtype)."""
  check_binary_operands(cx, x, y, what, f"write {shown(x)} / {shown(y)}")
  (a, b), _, dt = ew.common(cx, x, y, what)
  d = resolve(dt)
  if not isinstance(d, DType) or not d.is_float:
    a, b = (ew.astype(cx, v, DType.f32) if is_value(v) else float(v) for v in (a, b))
    return a, b, DType.f32
  if d != DType.f32:
    if d not in (DType.f16, DType.bf16):
      raise E.UnsupportedDtypeError(f"{what} of {dtype_name(d)} values", cx.loc,
                                    hint=f"convert them to float32 first: {what}(x.astype(jnp.float32), ...)")
    a, b = (ew.astype(cx, v, DType.f32) if is_value(v) else float(v) for v in (a, b))
  return a, b, d


@builtin
def div_rn(cx, x, y):
  """`x / y` rounded to the nearest float32 (Triton's `tl.div_rn`, PTX's div.rn.f32): `/` on the GPU is within
  an ulp of it. 16-bit floats divide in float32 and round once to their dtype; integers divide as float32."""
  a, b, d = _floats(cx, x, y, "ml.div_rn")
  q = ew.binary(cx, ew.BinOp.DIV_RN, a, b, "ml.div_rn")
  return q if d == DType.f32 else ew.astype(cx, q, d)


@builtin
def fdiv(cx, x, y, ieee_rounding=False):
  """Triton's `tl.fdiv(x, y, ieee_rounding=False)`: `x / y`; `ieee_rounding=True` is `ml.div_rn(x, y)`."""
  if not isinstance(ieee_rounding, bool):
    raise E.KernelTypeError(f"ml.fdiv's ieee_rounding must be a static bool, got {kind_of(ieee_rounding)}", cx.loc,
                            hint="ml.fdiv(x, y) is x / y; ml.fdiv(x, y, ieee_rounding=True) is ml.div_rn(x, y)")
  if ieee_rounding:
    return div_rn.rule(cx, x, y)
  for v in (x, y):
    check_register_value(cx, v, "ml.fdiv")
  return ew.binary(cx, ew.BinOp.DIV, x, y, "ml.fdiv")


@builtin
def clamp(cx, x, min=None, max=None, propagate_nan=PropagateNan.NONE):
  """Triton's `tl.clamp(x, min, max)`: `x` limited to `[min, max]`, as `ml.clip(x, min, max)` (a NaN `x` stays
  NaN; `propagate_nan=tl.PropagateNan.ALL` is the same). One bound by keyword (torch's `clamp(x, max=1.0)`)
  limits that side only."""
  if propagate_nan not in (PropagateNan.NONE, PropagateNan.ALL):
    raise E.KernelTypeError(f"ml.clamp's propagate_nan must be ml.PropagateNan.NONE or .ALL, got"
                            f" {shown(propagate_nan)}", cx.loc, hint="leave it out: a NaN x stays NaN")
  from .elementwise_fns import clip
  if min is None and max is None:
    raise E.KernelTypeError("ml.clamp needs min, max or both", cx.loc,
                            hint=f"give the bounds: ml.clamp({cx.named(x, 'x')}, lo, hi), or min= or max= alone")
  return clip.rule(cx, x, min, max)


def _high_word(cx, x, y, what, unsigned):
  check_binary_operands(cx, x, y, what, f"write ({shown(x)} * {shown(y)}) >> 32")
  (a, b), _, dt = ew.common(cx, x, y, what)
  d = resolve(dt)
  if d not in (DType.i32, DType.u32):
    args = ", ".join(f"{method_on(cx.named(v, n))}.astype(jnp.uint32)" if is_value(v) else shown(v)
                     for v, n in ((x, "x"), (y, "y")))
    raise E.UnsupportedDtypeError(
        f"{what} takes 32-bit integers (int32 or uint32), got {dtype_name(d) if isinstance(d, DType) else 'these'}",
        cx.loc, hint=f"convert them: {what}({args})")
  if unsigned and d == DType.i32:    # Triton's umulhi of int32: the unsigned product's high word, as int32 bits
    from .elementwise_fns import bitcast
    a, b = (bitcast.rule(cx, v, DType.u32) if is_value(v) else v % 2 ** 32 for v in (a, b))
    return bitcast.rule(cx, ew.binary(cx, ew.BinOp.MULHI, a, b, what), DType.i32)
  return ew.binary(cx, ew.BinOp.MULHI, a, b, what)


@builtin
def umulhi(cx, x, y):
  """Triton's `tl.umulhi(x, y)`: the high 32 bits of the 64-bit product of 32-bit integers taken as unsigned
  (Triton's MulhiUIOp, libdevice's __nv_umulhi: of int32 operands, their bits; PTX's mul.hi.u32)."""
  return _high_word(cx, x, y, "ml.umulhi", True)


@builtin
def mulhi(cx, x, y):
  """libdevice's `mulhi(x, y)` (`tl.extra.cuda.libdevice.mulhi`): the high 32 bits of the product, signed for
  int32 (__nv_mulhi) and unsigned for uint32 (PTX's mul.hi.s32 / .u32)."""
  return _high_word(cx, x, y, "ml.mulhi", False)


@builtin
def swizzle2d(cx, i, j, size_i, size_j, size_g):
  """Triton's `tl.swizzle2d(i, j, size_i, size_j, size_g)`: the (i, j) of an `size_i` x `size_j` grid of tiles
  reordered into groups of `size_g` rows, column by column within a group (the tutorials' GROUP_SIZE_M order):
  `ml.grouped_ids(i * size_j + j, size_i, size_j, group=size_g)` where the sizes are static ints."""
  B = ew.BinOp
  sizes = (size_i, size_j, size_g)
  for name, v in zip(("size_i", "size_j", "size_g"), sizes):
    check_register_value(cx, v, "ml.swizzle2d")
    if isinstance(v, bool) or isinstance(v, float) or (is_value(v) and not resolve(v.type.dtype).is_int):
      raise E.KernelTypeError(f"ml.swizzle2d's {name} must be an int, got {shown(v)}", cx.loc,
                              hint="tile counts are ints: ml.cdiv(M, BLOCK_M)")
  ij = ew.binary(cx, B.ADD, ew.binary(cx, B.MUL, i, size_j), j) if is_value(i) or is_value(j) else i * size_j + j
  if all(isinstance(v, int) for v in sizes) and all(v > 0 for v in sizes) and is_value(ij):
    from .control import grouped_ids
    return grouped_ids.rule(cx, ij, size_i, size_j, size_g)
  if not any(is_value(v) for v in (ij, *sizes)):      # all static: computed while tracing, as Python's
    size_gj = size_g * size_j
    off_i = ij // size_gj * size_g
    g = builtins_min(size_i - off_i, size_g)
    return off_i + ij % size_gj % g, ij % size_gj // g
  size_gj = ew.binary(cx, B.MUL, size_g, size_j)
  off_i = ew.binary(cx, B.MUL, ew.binary(cx, B.FLOORDIV, ij, size_gj), size_g)
  g = ew.binary(cx, B.MIN, ew.binary(cx, B.SUB, size_i, off_i), size_g)
  within = ew.binary(cx, B.MOD, ij, size_gj)
  return ew.binary(cx, B.ADD, off_i, ew.binary(cx, B.MOD, within, g)), ew.binary(cx, B.FLOORDIV, within, g)


builtins_min = min


def _round_away(cx, x):
  """libdevice's `round(x)` (Triton's `tl.extra.cuda.libdevice.round`, `tl.math.round`; C's `roundf`, `lax.round`'s
  default): `x` rounded to the nearest whole number, halves away from zero (0.5 -> 1, -2.5 -> -3), where `ml.round`
  takes them to even; integers unchanged. Exact: the whole part `trunc(x)`, one further from zero where the
  fraction `x - trunc(x)` (exact in x's dtype) is half or more, so 0.49999997 gives 0 and 8388609.0 itself (where
  `floor(x + 0.5)` would round the sum); -0.3 gives -0.0, NaN and +-inf stay."""
  from . import BUILTINS
  from .elementwise_checks import check_dtype_support
  if isinstance(x, (int, float)) and not isinstance(x, bool):      # a Python number: computed while tracing
    import math
    t = float(math.trunc(x)) if math.isfinite(x) else float(x)
    return t + math.copysign(1.0, x) if math.isfinite(x) and abs(x - t) >= 0.5 else t
  check_register_value(cx, x, "ml.libdevice.round")
  if is_value(x) and isinstance(d := resolve(x.type.dtype), DType) and d.is_float:      # (float8: upcast first)
    check_dtype_support(cx, d, "ml.libdevice.round", x=x)
  t = BUILTINS["trunc"].rule(cx, x)
  if t is x:
    return x                                     # an integer value: whole already
  frac = BUILTINS["abs"].rule(cx, ew.binary(cx, ew.BinOp.SUB, x, t, "ml.libdevice.round"))
  step = BUILTINS["where"].rule(cx, ew.compare(cx, ew.CmpOp.LT, x, 0.0), -1.0, 1.0)
  return BUILTINS["where"].rule(cx, ew.compare(cx, ew.CmpOp.GE, frac, 0.5),
                                ew.binary(cx, ew.BinOp.ADD, t, step, "ml.libdevice.round"), t)


ROUND_AWAY = Builtin(_round_away, "libdevice.round")     # Triton's namespaces' `round`; no `ml.` name of its own
