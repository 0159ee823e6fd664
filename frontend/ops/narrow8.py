"""8-bit values (int8, uint8, float8) in registers: Hopper has no arithmetic on them, so comparisons, max,
min, selects and integer arithmetic compute in 32 bits, on values widened exactly, and convert back."""
from __future__ import annotations

import numpy as np

from .. import errors as E
from .. import hw
from ..dtypes import DType
from ..types import ScalarType
from .base import is_value


def _wide(d):
  """The 32-bit type an 8-bit value computes a comparison, max, min or select in (exactly: every
  8-bit value is one of it), or None where `d` has register arithmetic of its own (16 bits up)."""
  if isinstance(d, DType) and d not in hw.ARITH_DTYPES and d != DType.bool_:
    return DType.f32 if d.is_float else DType.i32
  return None


def narrowed(cx, r, d):
  """`r`, computed in 32 bits from values of the 8-bit `d`, back in `d` (as `.astype` converts: past a
  float8 type's range NaN or inf, as jnp)."""
  from .elementwise import astype
  return astype(cx, r, d)


def _widened(cx, values, wide, narrow, what, shape=None, saturate=True):
  """`values` in `wide`. A Python number first becomes the 8-bit `narrow` as the operation would
  have converted it: a float rounded to float8 as jnp's weak typing does (x > 101 on
  float8_e4m3fn compares with 104), an int wrapped to the 8-bit integer as == and 16-bit types
  do (300 is 44 in uint8). Where the number becomes a float8 result (`saturate`: ml.where,
  max, min) it converts as jnp.full converts it, from float64 (1000.0 is NaN); a comparison keeps
  jnp's conversion from float32. A float8 scalar is broadcast to the result's `shape` first (a
  tensor converts); compared, it converts exactly from its bits; otherwise the result could not be
  converted back to a float8 scalar on the GPU."""
  from .elementwise import astype, f8_number

  def one(v):
    if is_value(v):
      if isinstance(v.type, ScalarType) and narrow.is_float and shape is not None:
        from .shape import broadcast_to
        v = broadcast_to.rule(cx, v, shape)
      if isinstance(v.type, ScalarType) and narrow.is_float and saturate:   # (a comparison converts it exactly)
        raise E.UnsupportedDtypeError(
            f"{what} with the {narrow} scalar {cx.named(v)}: an 8-bit float scalar has no arithmetic on the GPU"
            f" (it converts to wider types, not back)", cx.loc,
            hint=f"compute in float32: ({cx.named(v)}).astype(jnp.float32), or meet it with a tensor operand (it"
                 f" is then broadcast)")
      w = astype(cx, v, wide)
      if is_value(w) and not w.name:      # run-time hints (a zero divisor, a shift amount) name the user's operand
        w.name = cx.named(v, "")
      return w
    if isinstance(v, (int, float)) and not isinstance(v, bool):
      if narrow.is_float:
        v = f8_number(v, narrow) if saturate else v
        with np.errstate(over="ignore"):     # 1e39 -> inf -> NaN in float8_e4m3fn, as jnp: no warning
          return float(np.asarray(v, np.float32).astype(narrow.np))
      if isinstance(v, int):
        return int(np.asarray(v, np.int64).astype(narrow.np))
    return v
  return [one(v) for v in values]
