"""Python's builtins on run-time scalars, as Python computes them on the same numbers where that differs from the
elementwise ml.* function a tensor takes: `max(a, b)` of float scalars is Python's `b if b > a else a` (the first
of equal values, -0.0 in max(-0.0, 0.0); a NaN kept only where it comes first), not ml.maximum's."""
from __future__ import annotations

from .ops import elementwise as ew
from .ops.base import is_value
from .types import ScalarType, resolve


def _scalar(v) -> bool:
  """A run-time scalar or a Python number (not a tensor, a tuple, ...)."""
  return is_value(v) and isinstance(v.type, ScalarType) or type(v) in (int, float, bool)


def min_max(cx, is_max: bool, out, v):
  """`max(out, v)` (`min`) of run-time values: Python's rule on two scalars of a float dtype (`v` only where it
  is greater, as Python's max keeps the first of equal values and skips a later NaN); elementwise ml.maximum
  (ml.minimum) otherwise (integers, where the two agree; tensors, which Python's max does not take)."""
  kind = ew.BinOp.MAX if is_max else ew.BinOp.MIN
  if not (_scalar(out) and _scalar(v)):
    return ew.binary(cx, kind, out, v)
  (a, b), _, dt = ew.common(cx, out, v, f"ml.{kind.name.lower()}imum")
  d = resolve(dt)
  if not getattr(d, "is_float", False):
    return ew.binary(cx, kind, out, v)
  take = ew.compare(cx, ew.CmpOp.GT if is_max else ew.CmpOp.LT, b, a)
  return ew.where_(cx, take, b, a)
