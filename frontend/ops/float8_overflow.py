"""Conversions to float8 past its range, as jnp (and XLA on the GPU) give them: float8_e4m3fn has no
infinity, so a value that rounds past 448 (|x| > 464) and +-inf become NaN; float8_e5m2 gives +-inf past
57344 (|x| >= 61440: halfway to 65536 rounds to even, there inf). The GPU's conversion (cvt.rn.satfinite, the only one Hopper
has) saturates instead, and interpret mode's models it: `jnp_float8` selects jnp's values around it, as
XLA's own lowering does (a select on the source's magnitude)."""
from __future__ import annotations

from ..dtypes import DType, FLOAT8
from ..types import TensorType, resolve
from .base import is_value

# Halfway between the largest finite float8 and the next step: 464 rounds to 448 (to even), 61440 to
# 65536, which is inf in float8_e5m2
THRESHOLD = {DType.f8e4m3: 464.0, DType.f8e5m2: 61440.0}


def can_overflow(src, dst) -> bool:
  """Whether values of `src` can lie past float8 `dst`'s range (8-bit integers, and e4m3fn -> e5m2, cannot)."""
  if dst not in FLOAT8 or not isinstance(src, DType) or src == DType.bool_:
    return False
  if src.is_int:
    return src.bits > 8
  return not (src == DType.f8e4m3 and dst == DType.f8e5m2) and src != dst


def jnp_float8(cx, x, dst, saturating):
  """`x` (a register tensor) converted to float8 `dst` as jnp converts it; `saturating(v)` is the
  hardware's (saturating) conversion of a float32 or wider value `v`."""
  from .elementwise import CmpOp, astype, compare, where_
  from .elementwise_fns import bitcast
  src = resolve(x.type.dtype)
  if not (is_value(x) and isinstance(x.type, TensorType) and can_overflow(src, dst)):
    return saturating(x)
  if src.is_int or src in FLOAT8:
    x = astype(cx, x, DType.f32)        # (exact for float8 and past float8's range for integers: as the GPU converts)
  top, e5 = THRESHOLD[dst], dst == DType.f8e5m2
  hi = compare(cx, CmpOp.GE if e5 else CmpOp.GT, x, top)
  lo = compare(cx, CmpOp.LE if e5 else CmpOp.LT, x, -top)
  if dst == DType.f8e4m3:               # NaN converts to NaN: select it before the conversion
    return saturating(where_(cx, hi, float("nan"), where_(cx, lo, float("-nan"), x)))
  bits = bitcast.rule(cx, saturating(x), DType.u8)       # e5m2's infinities, by their bits (the cast saturates)
  return bitcast.rule(cx, where_(cx, hi, 0x7C, where_(cx, lo, 0xFC, bits)), dst)
