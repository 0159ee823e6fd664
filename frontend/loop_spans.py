"""The range of starts a window takes over a summarised loop's trips (probe 67b).

GridEval (frontend/absint.py) walks a loop past its budget exactly on its first and last trips and once more with
its counter unknown; a window whose start follows from the counter was then unknown there, and the coverage proof
took it as spanning its whole dimension, so a scan over 16 or more tokens, `for t in range(T - 1): o.at[h, t][...] =
...`, whose last row no trip writes, compiled (interpret mode reported it, the GPU left the row uninitialised). The
counter's values over the trips are known, though: from the first to the last. `span` carries that interval through
the integer arithmetic of the window's start (interval arithmetic, sound for any +, -, *, min, max, and floor
division and modulo by a positive number), so a write covers the hull of its windows over the trips, an over-approximation of
what it writes (the checks stay sound: a hole they report is one no trip fills)."""
from __future__ import annotations

import numpy as np

from . import ir
from .ops.elementwise import BinOp, Binary, Cast
from .types import ScalarType

LIMIT = 1 << 31     # bounds past int32 (a product that may wrap): no span


def span(ev, v, spans: dict, depth: int = 0):
  """(lo, hi): int64 arrays over the programs bounding the scalar `v` over the trips of the loops in `spans`
  (id of a loop counter -> its (lo, hi)); None where it is not integer arithmetic of them and known values."""
  if depth > 32:
    return None
  if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, ir.Value)):
    return None
  known = ev.value(v)
  if known is not None:
    k = np.asarray(known, np.int64)
    return k, k
  if v.id in spans:
    return spans[v.id]
  t = v.type
  if not (isinstance(t, ScalarType) and getattr(t.dtype, "is_int", False)):
    return None
  d = ev.defs.get(v.id)
  if isinstance(d, Cast) and not d.bitcast and getattr(d.x.type.dtype, "is_int", False):
    return span(ev, d.x, spans, depth + 1)
  if not isinstance(d, Binary):
    return None
  if d.kind == BinOp.MOD:              # floor modulo by a positive number, whatever the dividend: [0, b)
    b = span(ev, d.rhs, spans, depth + 1)
    if b is None or not (np.all(b[0] == b[1]) and np.all(b[0] > 0)):
      return None
    return np.zeros_like(b[0]), b[0] - 1
  a = span(ev, d.lhs, spans, depth + 1)
  b = span(ev, d.rhs, spans, depth + 1)
  if a is None or b is None:
    return None
  if d.kind == BinOp.ADD:
    lo, hi = a[0] + b[0], a[1] + b[1]
  elif d.kind == BinOp.SUB:
    lo, hi = a[0] - b[1], a[1] - b[0]
  elif d.kind == BinOp.MUL:
    ends = [x * y for x in a for y in b]
    lo, hi = np.minimum.reduce(ends), np.maximum.reduce(ends)
  elif d.kind in (BinOp.MIN, BinOp.MAX):
    f = np.minimum if d.kind == BinOp.MIN else np.maximum
    lo, hi = f(a[0], b[0]), f(a[1], b[1])
  elif d.kind == BinOp.FLOORDIV and np.all(b[0] == b[1]) and np.all(b[0] > 0):
    lo, hi = a[0] // b[0], a[1] // b[0]
  else:
    return None
  if np.any(np.abs(lo) >= LIMIT) or np.any(np.abs(hi) >= LIMIT):
    return None
  return lo, hi
