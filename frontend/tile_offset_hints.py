"""Hints for windows of tensor-core buffers that start inside a tile (probe 67a): a dense 1-D conv's taps as row
windows of one SMEM tile, `ml.dot(a_s.at[ml.ds(5 + k, 64), :], w_s, acc)`, start at rows 5, 6, 7, 8, and ml.dot
reads whole 8-row tiles. MG204's hint said to promise a multiple of 8 or to unroll the loop (neither holds); it now
names the starts and the two forms that compile: the rows read into registers as a register A, or each tap copied
by TMA from GMEM at its start. Also the user's text of a window's starts (`start_texts`, the other hints' too)."""
from __future__ import annotations

import ast

from . import ir
from .loc import expr_at


def start_texts(view) -> list:
  """The user's text of each start of view `x.at[a, ml.ds(s, n)]` (None where unknown), by dimension."""
  loc = view.loc
  out = [None] * len(view.index)
  node = expr_at(loc)
  if isinstance(node, ast.Attribute) and node.attr == "T":      # a_s.at[:, ml.ds(r, 64)].T
    node = node.value
  if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at"):
    return out
  elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
  if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts) or len(elts) > len(out):
    return out
  for d, e in enumerate(elts):
    if isinstance(e, ast.Call) and len(e.args) == 2 and getattr(e.func, "attr", getattr(e.func, "id", "")) == "ds":
      out[d] = ast.unparse(e.args[0])
    elif not isinstance(e, ast.Slice):
      out[d] = ast.unparse(e)
  return out


def _starts(start, defs, loops) -> tuple | None:
  """The values a window's start takes: (start,) of a static one; over the trips of the loop of static bounds whose
  counter it is plus a constant (`5 + k`, `k - 3`), those values (at most 64 trips); None otherwise."""
  from .tma_starts import _constant_offset
  if isinstance(start, int):
    return (start,)
  base, c = _constant_offset(start, defs)
  loop = loops.get(getattr(base, "id", None))
  bounds = (getattr(loop, "start", None), getattr(loop, "stop", None), getattr(loop, "step", None))
  if not all(type(b) is int for b in bounds) or not bounds[2] or len(range(*bounds)) > 64:
    return None
  return tuple(v + c for v in range(*bounds))


def inside_tile_hint(kernel, defs, view, tile, loops) -> str | None:
  """The hint for `view`, ml.dot's A, a window of whole tiles in size whose row start lies inside a tile on some
  trip; None for any other view."""
  from .ops.mma import Dot
  rows, cols = view.index[-2:]
  if rows.squeeze or cols.squeeze or view.transpose or rows.size % tile[0] or cols.start != 0 or \
      cols.size != view.ref.type.shape[-1]:
    return None
  if not any(isinstance(o, Dot) and o.a is view.result for o in ir.walk(kernel.body)):
    return None
  starts = _starts(rows.start, defs, loops)
  if starts is None or all(s % tile[0] == 0 for s in starts):
    return None
  x = view.ref.name
  text = start_texts(view)[-2] or "start"
  shown = ", ".join(map(str, starts[:6])) + (", ..." if len(starts) > 6 else "")
  where = f"row {shown}" if len(starts) == 1 else f"rows {shown} over the loop's trips"
  from .types import resolve
  regs = (f"read its rows into registers and pass them as the A operand, ml.dot({x}[ml.ds({text}, {rows.size}), :],"
          f" ...) (a 16-bit A from registers takes any start; {x} is then no tensor-core buffer), or "
          if getattr(resolve(view.ref.type.dtype), "bits", 0) == 16 else "")
  return (f"ml.dot reads {x} from SMEM in whole tiles of {tile[0]} rows, and this window starts at {where}, inside a"
          f" tile (no promise or unrolling makes it whole): {regs}copy each window by TMA from GMEM at its own start"
          f" into a buffer of its own, ml.copy(src.at[..., ml.ds(..., {rows.size}), :], {x}_k), which takes any row")
