"""Comparisons of index grids the grid evaluation proves free of wrap-around (lowering/index_compare.py uses them).

A causal mask compares two grids of `ml.arange`, broadcasts, scalars and integer constants:

    rows = i * bkv + ml.arange(bkv)[:, None]
    cols = j * bq + ml.arange(bq)[None, :]
    ml.where(cols >= rows, s, -inf)

Each side is affine in the element's indices: `Σ c * scalar + Σ_axis a * index`. `affine` reads that form off the
typed IR. Where every scalar's values over the grid and the loops' trips are known or bounded (absint.GridEval,
loop_spans.span) and neither side nor their difference can reach int32's (int64's) bounds, nothing wraps: `lhs cmp
rhs` is then `lhs - rhs cmp 0`, which the lowering evaluates as one scalar a thread against an immediate per
element (no index grid kept live in registers). `see` is GridEval's hook at each walk of a tensor Compare; a
comparison proven on every walk is rebuilt with `Compare.no_wrap` (checks.mark_nonzero_divisions).
"""
from __future__ import annotations

import numpy as np

from . import ir
from .ops.elementwise import Arange, BinOp, Binary, Constant
from .ops.shape import Broadcast
from .types import ScalarType


class Affine:
  """`Σ coef * scalar + Σ_axis a[axis] * index[axis]` over a value's axes (scalars: values or Python ints)."""

  def __init__(self, scalars=(), axes=None, aranges=()):
    self.scalars = list(scalars)      # [(coef, ir.Value | int)]
    self.axes = dict(axes or {})      # axis -> coef
    self.aranges = list(aranges)      # [(an Arange's type, its dim, the axis of this value its index became)]

  def scaled(self, k: int) -> "Affine":
    return Affine([(c * k, x) for c, x in self.scalars], {a: c * k for a, c in self.axes.items()}, self.aranges)

  def plus(self, other: "Affine") -> "Affine":
    axes = dict(self.axes)
    for a, c in other.axes.items():
      axes[a] = axes.get(a, 0) + c
    return Affine(self.scalars + other.scalars, axes, self.aranges + other.aranges)

  def extent(self, shape) -> int:
    """The largest |Σ a * index| over the grid."""
    return sum(abs(c) * (shape[a] - 1) for a, c in self.axes.items())


def int_constant(defs, x):
  if isinstance(x, (bool, np.bool_)):
    return None
  if isinstance(x, (int, np.integer)):
    return int(x)
  o = defs.get(x.id) if isinstance(x, ir.Value) else None
  if isinstance(o, Constant) and isinstance(o.value, (int, np.integer)) and not isinstance(o.value, bool):
    return int(o.value)
  return None


def affine(defs, x, dtype, depth=0):
  """x as an Affine over its own axes, or None (another computation, another dtype, too deep)."""
  if depth > 32:
    return None
  if not isinstance(x, ir.Value):
    k = int_constant(defs, x)
    return None if k is None else Affine([(1, k)])
  if x.type.dtype != dtype:
    return None
  if isinstance(x.type, ScalarType):
    return Affine([(1, x)])
  o = defs.get(x.id)
  if isinstance(o, Arange):
    n = x.type.shape[o.dim]
    return Affine(axes={o.dim: 1} if n > 1 else {}, aranges=[(x.type, o.dim, o.dim)] if n > 1 else [])
  if isinstance(o, Broadcast):
    inner = affine(defs, o.x, dtype, depth + 1)
    if inner is None:
      return None
    shape, out = o.x.type.shape, x.type.shape
    # an axis of size 1 stretched to more: its index is 0 there
    axes = {o.dims[a]: c for a, c in inner.axes.items() if shape[a] == out[o.dims[a]]}
    return Affine(inner.scalars, axes, [(t, dim, o.dims[a]) for t, dim, a in inner.aranges
                                        if shape[a] == out[o.dims[a]]])
  if isinstance(o, Binary) and o.kind in (BinOp.ADD, BinOp.SUB):
    a, b = affine(defs, o.lhs, dtype, depth + 1), affine(defs, o.rhs, dtype, depth + 1)
    if a is None or b is None:
      return None
    return a.plus(b if o.kind == BinOp.ADD else b.scaled(-1))
  if isinstance(o, Binary) and o.kind == BinOp.MUL:
    for grid, k in ((o.lhs, o.rhs), (o.rhs, o.lhs)):
      k = int_constant(defs, k)
      if k is not None:
        a = affine(defs, grid, dtype, depth + 1)
        return None if a is None else a.scaled(k)
  return None


def _side_bound(ev, side: Affine, shape):
  """The largest |value| of one side over the grid and the programs, or None."""
  from .loop_spans import span
  total = side.extent(shape)
  for c, x in side.scalars:
    b = span(ev, x, ev.spans)           # (its values in this walk; over a summarised loop's trips, their bounds)
    if b is None:
      return None
    total += abs(c) * int(max(np.max(np.abs(b[0]), initial=0), np.max(np.abs(b[1]), initial=0)))
  return total


def see(ev, o) -> None:
  """GridEval's hook at a walk of the tensor comparison `o`: whether this walk proves it free of wrap-around, and
  with it every walk before (ev.grid_compares: id(o) -> (o, proven))."""
  if id(o) not in ev.grid_sides:         # (the form, once: a loop walked trip by trip meets it each trip)
    d = next((x.type.dtype for x in (o.lhs, o.rhs) if isinstance(x, ir.Value)), None)
    sides = None
    if d is not None and getattr(d, "is_int", False) and d.is_signed and d.bits in (32, 64):
      sides = [affine(ev.defs, x, d) for x in (o.lhs, o.rhs)]
      if any(s is None for s in sides) or not any(s.axes for s in sides):
        sides = None
    ev.grid_sides[id(o)] = (sides, d)
  sides, d = ev.grid_sides[id(o)]
  ok = sides is not None
  if ok:
    shape = o.result.type.shape
    bounds = [_side_bound(ev, s, shape) for s in sides]
    # each side, their difference and every partial sum the lowering forms stay below the type's bound
    ok = all(b is not None for b in bounds) and sum(bounds) < (1 << (d.bits - 1)) - 1
  ev.grid_compares[id(o)] = (o, ev.grid_compares.get(id(o), (o, True))[1] and ok)
