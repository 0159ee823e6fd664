"""The extremes of int32 index tensors over the grid, for frontend/overflow.py.

An index tensor a kernel builds from `ml.arange` and the scalars the grid evaluation knows
(`i * t + ml.arange(t)`, `rows[:, None] * n + cols[None, :]`) is a sum of one term per axis and
a scalar offset. Each term takes both its smallest and its largest value somewhere along its
axis, and terms of different axes combine freely, so the tensor's smallest and largest
elements are the offset plus the terms' extremes, exactly, in every program. Where one passes
int32's range, some element of the tensor certainly wraps on the GPU: the last tile of an
array of nearly 2**31 elements, whose offsets run past 2**31 - 1 and wrap negative, so that
`offs < n` keeps elements past the array's end.

A value is `Sep(off, axes)`: `off` the offset (an int, or an int64 array over the programs),
`axes` {axis: (lo, hi)}, the extremes of that axis's term. Anything else is None (unknown).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .dtypes import DType
from .ops.elementwise import Arange, BinOp, Binary
from .ops.shape import Broadcast, Reshape
from .types import TensorType, resolve

I32_LO, I32_HI = DType.i32.int_range


@dataclasses.dataclass(frozen=True)
class Sep:
  off: object
  axes: dict

  def extremes(self):
    lo = self.off + sum((a for a, _ in self.axes.values()), 0)
    hi = self.off + sum((b for _, b in self.axes.values()), 0)
    return lo, hi


def _int_tensor(v) -> bool:
  return isinstance(getattr(v, "type", None), TensorType) and resolve(v.type.dtype) == DType.i32


def _operand(ev, ranges, x):
  """A Binary operand as a Sep (tensor) or a number/array (scalar); None when unknown."""
  if isinstance(x, bool):
    return None
  if isinstance(x, int):
    return x
  if isinstance(getattr(x, "type", None), TensorType):
    return ranges.get(x.id)
  v = ev.value(x)
  return None if v is None or resolve(x.type.dtype) != DType.i32 else np.asarray(v, np.int64)


def _scaled(s: Sep, c) -> Sep:
  axes = {}
  for k, (lo, hi) in s.axes.items():
    a, b = lo * c, hi * c
    axes[k] = (np.minimum(a, b), np.maximum(a, b))
  return Sep(s.off * c, axes)


def _combine(kind, a, b):
  """a `kind` b over Seps and scalars; None where the result is not a Sep of exact extremes."""
  if kind == BinOp.SUB:
    b = _scaled(b, -1) if isinstance(b, Sep) else -b
    kind = BinOp.ADD
  if kind == BinOp.ADD:
    if isinstance(a, Sep) and isinstance(b, Sep):
      if set(a.axes) & set(b.axes):          # two terms along one axis: extremes not both reached
        return None
      return Sep(a.off + b.off, {**a.axes, **b.axes})
    s, c = (a, b) if isinstance(a, Sep) else (b, a)
    return Sep(s.off + c, s.axes) if isinstance(s, Sep) else None
  if kind == BinOp.MUL:
    if isinstance(a, Sep) == isinstance(b, Sep):
      return None
    s, c = (a, b) if isinstance(a, Sep) else (b, a)
    return _scaled(s, c)
  if kind == BinOp.SHL and isinstance(a, Sep) and not isinstance(b, Sep):    # a * 2**b, b in 0..31
    return None if np.any((np.asarray(b) < 0) | (np.asarray(b) > 31)) else _scaled(a, np.left_shift(1, np.asarray(b, np.int64)))
  return None


def track_tensor(ev, ranges: dict, o, must):
  """Note the Sep of `o`'s int32 tensor result in `ranges`; (program, exact extreme) where an
  int32 sum, difference, product or left shift of such tensors certainly wraps in a program of `must`."""
  if not o.results or not _int_tensor(o.results[0]):
    return None
  r = o.results[0]
  ranges.pop(r.id, None)
  if not ev.exact:            # a summarised pass over a loop: its values over-approximate
    return None
  if isinstance(o, Arange):
    n = r.type.shape[o.dim]
    ranges[r.id] = Sep(0, {o.dim: (0, n - 1)} if n > 1 else {})
  elif isinstance(o, Broadcast) and o.x.id in ranges:
    s = ranges[o.x.id]
    ranges[r.id] = Sep(s.off, {o.dims[k]: v for k, v in s.axes.items()})
  elif isinstance(o, Reshape) and o.x.id in ranges:
    s = ranges[o.x.id]
    src = [k for k, n in enumerate(o.x.type.shape) if n > 1]
    dst = [k for k, n in enumerate(r.type.shape) if n > 1]
    if [o.x.type.shape[k] for k in src] == [r.type.shape[k] for k in dst]:   # size-1 axes moved only
      ranges[r.id] = Sep(s.off, {dst[src.index(k)]: v for k, v in s.axes.items()})
  elif isinstance(o, Binary) and o.kind in (BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.SHL):
    a, b = (_operand(ev, ranges, x) for x in (o.lhs, o.rhs))
    if a is None or b is None:
      return None
    s = _combine(o.kind, a, b)
    if s is None:
      return None
    lo, hi = (np.broadcast_to(np.asarray(v, np.int64), must.shape) for v in s.extremes())
    bad = must & ((lo < I32_LO) | (hi > I32_HI))
    if bad.any():
      p = int(np.argmax(bad))
      return p, int(hi[p] if hi[p] > I32_HI else lo[p])
    ranges[r.id] = s
  return None
