"""Unmasked gathers whose indices, known while compiling, leave the dimension they index (MG203; probe 51a).

A gather follows jnp's rule: a negative index counts from the end, one past the end clamps to the last element
(frontend/ops/gather.py, `_in_range`). A Triton user's `x.at[r, ml.arange(64) * 2].load()` of a row of 100 reads
the element 99 for each of its last 14 lanes, silently, where Triton reads past the row (or faults) and the user
meant a mask. Where the indices are built from `ml.arange`, constants, program ids and loop counters (the grid
evaluation's, frontend/mask_boxes.py), an index at or past the end (or before minus the size), in a program that
certainly runs the gather, is this error, with the mask that keeps the lanes inside as the hint. A gather with a
mask (`.load(mask=..., other=...)`, or whose result an `ml.where` selects from) is checked where its mask is known,
at the lanes it keeps. Only indices that step by other than 1 are checked (strides, `ml.arange(64) * 2`; reversed and
computed orders): a run of consecutive positions or one position a program past the end is a ragged last tile, which
jnp-style code stores back at the same positions, where jnp's scatter drops what the clamped read gave (probe 42u's
`out[rows, :] = x[rows, :] + 1`), or the layout hint's widened rows (`t[ids[:, None], ml.arange(32)[None, :]]` of 16
columns); Triton's loads of runs are windows, checked as such (MG203). Indices of data and unsigned indices keep jnp's
rule, and so does an index an `ml.where` chooses (`ml.where(ok, idx, n)`, lanes pointed past the end on purpose, as
MG204's hint for a short `ml.arange` writes).
"""
from __future__ import annotations

import ast

import numpy as np

from . import errors as E
from . import ir
from .loc import call_at
from .mask_boxes import _Eval
from .ops.elementwise import BinOp, Binary, Cast, CmpOp, Compare, Where
from .ops.gather import Gather
from .ops.shape import Broadcast
from .types import resolve


def _raw(defs, v):
  """(the index before jnp's wrap and clamp, the dimension's size) of a gather's index operand `v`
  (min(max(i + where(i < 0, n, 0), 0), n - 1), maybe broadcast, maybe plus a view's start), or None."""
  o = defs.get(getattr(v, "id", None))
  if isinstance(o, Binary) and o.kind == BinOp.ADD and isinstance(o.lhs, ir.Value) and not isinstance(o.rhs, int):
    o = defs.get(o.lhs.id) if isinstance(o.lhs, ir.Value) else None   # (a view's start added)
    if isinstance(o, Binary) and o.kind == BinOp.ADD:
      o = None
  if isinstance(o, Broadcast):
    o = defs.get(o.x.id)
  if not (isinstance(o, Binary) and o.kind == BinOp.MIN and isinstance(o.rhs, int) and isinstance(o.lhs, ir.Value)):
    return None
  n = o.rhs + 1
  m = defs.get(o.lhs.id)
  if not (isinstance(m, Binary) and m.kind == BinOp.MAX and m.rhs == 0 and isinstance(m.lhs, ir.Value)):
    return None
  a = defs.get(m.lhs.id)
  if not (isinstance(a, Binary) and a.kind == BinOp.ADD and isinstance(a.rhs, ir.Value)):
    return None
  w = defs.get(a.rhs.id)
  c = defs.get(getattr(getattr(w, "cond", None), "id", None))
  if not (isinstance(w, Where) and w.on_true == n and isinstance(c, Compare) and c.kind == CmpOp.LT
          and c.lhs is a.lhs and c.rhs == 0):
    return None
  return a.lhs, n


def _selected(defs, v, depth=0) -> bool:
  """Whether the index `v` is chosen lane by lane by an ml.where (through casts and broadcasts)."""
  o = defs.get(getattr(v, "id", None))
  if isinstance(o, Where):
    return True
  if isinstance(o, (Cast, Broadcast)) and depth < 8:
    return _selected(defs, o.x, depth + 1)
  return False


def _run(val) -> bool:
  """Whether the index values `val` (programs or 1, *dims) are one position a program (a scalar, broadcast) or a run of
  consecutive positions along one axis."""
  axes = [k for k in range(1, val.ndim) if val.shape[k] > 1]
  return not axes or len(axes) == 1 and bool(np.all(np.diff(val, axis=axes[0]) == 1))


class GatherBounds:
  """Per gather (by location): the first program and lane whose index leaves its dimension."""

  def __init__(self, kernel):
    self.selected = {}        # a gather's result id -> the mask an ml.where (or its masked load's) selects it by
    for o in ir.walk(kernel.body):
      if isinstance(o, Where) and isinstance(o.on_true, ir.Value) and isinstance(o.cond, ir.Value):
        self.selected.setdefault(o.on_true.id, o)
    self.found: dict = {}
    self.pads = getattr(kernel, "pad_tiles", None) or {}     # (a padded trace's values: their own shapes)

  def see(self, mem, acc) -> None:
    o = acc.op
    if not isinstance(o, Gather) or o.loc in self.found or not acc.must.any():
      return
    progs = np.flatnonzero(acc.must)
    shape = tuple(o.results[0].type.shape)
    sel = self.selected.get(o.results[0].id)
    mask = sel.cond if sel is not None else None
    if mask is None and getattr(o, "masked", False):
      return                  # (a masked load whose select is not the gather's own: its mask is not known here)
    on = None
    if mask is not None:
      on = _Eval(mem.ev, progs, shape).value(mask) if tuple(getattr(mask.type, "shape", ())) == shape else None
      if on is None:
        return                # (a mask of data: the lanes it keeps are interpret mode's)
    for d, v in enumerate(o.indices):
      got = _raw(mem.ev.defs, v)
      if got is None:
        continue
      raw, n = got
      if not getattr(resolve(raw.type.dtype), "is_signed", False) or (on is not None and len(raw.type.shape) != len(shape)):
        continue
      if _selected(mem.ev.defs, raw):
        continue            # (lanes pointed past the end on purpose, ml.where(ok, idx, n): MG204's hint for a short
        #                     ml.arange, whose clamped lanes its masked store drops)
      val = _Eval(mem.ev, progs, tuple(raw.type.shape)).value(raw)
      if val is None:
        continue
      bad = (val >= n) | (val < -n)
      own = self.pads.get(o.results[0].id) or self.pads.get(raw.id)
      if own is not None:     # (lanes a padded trace added, past the tile's own elements, index nothing of the user's)
        if len(own) != val.ndim - 1:
          continue
        keep = np.zeros(bad.shape, bool)
        keep[(slice(None),) + tuple(slice(0, k) for k in own)] = True
        bad = bad & keep
      if _run(val):
        continue            # (a run, or one index a program, past the end: a ragged last tile, whose jnp store drops
        #                     what its clamped read gave (probe 42u), or rows of data read wider than asked, the layout
        #                     hint's `t[ids[:, None], ml.arange(32)[None, :]]`; Triton's run loads are windows, MG203)
      if on is not None:
        bad, val = np.broadcast_arrays(bad & on.astype(bool), val)
      if bad.any():
        at = np.argwhere(bad)[0]
        p = int(progs[at[0]]) if val.shape[0] > 1 else int(progs[0])
        where = (f" in program {mem.ev.program(p)}" if mem.ev.P > 1 else "") + mem._trip(p)
        row = bad[at[0]]
        count = (int(np.count_nonzero(np.broadcast_to(row, shape))) if row.ndim == len(shape) else
                 int(np.count_nonzero(row)) * int(np.prod(shape)) // max(1, row.size))
        self.found[o.loc] = (o, d, n, int(val[tuple(at)]), where, count, int(np.prod(shape)), sel)
        return

  def errors(self) -> list:
    return [_error(*f) for f in self.found.values()]


def _texts(loc, d):
  """(the ref's text, the subscript's index text, the index's text along dimension `d`) of the gather written at
  `loc` (`x.at[r, cols * 2]` or `x[r, cols * 2]`), Nones where the line does not say them."""
  line, a, b = getattr(loc, "source_line", ""), getattr(loc, "col_offset", 0), getattr(loc, "end_col_offset", None)
  if not line or b is None or getattr(loc, "end_lineno", None) != getattr(loc, "lineno", None):
    return None, None, None
  try:
    node = ast.parse(line[a:b], mode="eval").body
  except SyntaxError:
    return None, None, None
  sub = next((s for s in ast.walk(node) if isinstance(s, ast.Subscript)), None)
  if sub is None:
    return None, None, None
  elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
  base = sub.value.value if isinstance(sub.value, ast.Attribute) and sub.value.attr == "at" else sub.value
  whole = ", ".join(ast.unparse(e) for e in elts)
  if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts) or d >= len(elts):
    return ast.unparse(base), whole, None
  return ast.unparse(base), whole, ast.unparse(elts[d])


def _error(o, d, n, value, where, count, lanes, sel):
  root = o.ref.name or "the array"
  ref, index, idx = _texts(o.loc, d)
  ref = ref or root
  past = value >= n
  tail = (f"{count} of its {lanes} lanes" if count > 1 else "a lane") + (" past the end" if past else " before the start")
  i = idx or "idx"
  op = any(c in i for c in "&|^<>=") or " if " in i
  j = f"({i})" if op else i
  cond = f"{j} < {ref}.shape[{d}]" if past else f"{j} >= -{ref}.shape[{d}]"
  end = "last" if past else "first"
  if sel is not None:
    own = _mask_text(o.loc)
    kw = own or _mask_text(sel.loc)
    both = ("mask=" if own or not kw else "ml.where(") + (f"({kw}) & ({cond})" if kw else f"(mask) & ({cond})") + (
        "" if own or not kw else ", ...)")
    return E.IndexOutOfBoundsError(
        f"index {value} is out of bounds for dimension {d} of {root} (size {n}){where}: this masked gather reads"
        f" {tail} where its mask is on, where jnp's gather clamps them to its {end} element", o.loc,
        hint=f"bound the index the mask keeps by the dimension it indexes: {both}")
  return E.IndexOutOfBoundsError(
      f"index {value} is out of bounds for dimension {d} of {root} (size {n}){where}: this gather reads {tail},"
      f" where jnp's gather clamps them to its {end} element", o.loc,
      hint=f"mask the lanes inside: {ref}.at[{index or '...'}].load(mask={cond}, other=0), or clamp the index where"
           f" the {end} element is meant: "
           + (f"ml.minimum({i}, {ref}.shape[{d}] - 1)" if past else f"ml.maximum({i}, 0)"))


def _mask_text(loc):
  """The mask= of the masked load written at `loc` (`x.at[r, idx].load(mask=m, other=0)`), or of the ml.where
  selecting the gather (its first argument), as written; None where the line does not say it."""
  node = call_at(loc)
  if node is None:
    return None
  kw = next((k.value for k in node.keywords if k.arg == "mask"), None)
  if kw is None and node.args and isinstance(node.func, ast.Attribute) and node.func.attr == "where":
    kw = node.args[0]
  return ast.unparse(kw) if kw is not None else None
