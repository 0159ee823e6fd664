"""A select's mask that places an index along another axis than the masked load of its data did (MG202, probe 50f).

`v = x.at[rows[:, None], cols[None, :]].load(mask=(rows[:, None] < M) & ..., other=0.0)` places `rows` along axis 0
of the tile; `ml.where(rows[None, :] < M, v, 0.0)` (or `m[None, :]` of `m = rows < M`) selects by it along axis 1,
so a square tile keeps the wrong lanes, with no error from the GPU or interpret mode (a tile of other sides is a
shape mismatch already). Read from the typed IR before the rewrites: each value's `ml.arange`s and the axes they
vary along (through comparisons, arithmetic, casts and broadcasts), for the select's mask and for the masks of the
masked loads its selected values come from through elementwise math; a select whose mask places a comparison of an
arange with a bound only along axes where those loads place the same comparison nowhere is reported at the select. An index placed along both axes (a
diagonal, `i[:, None] == i[None, :]`), or data that went through a dot, a reduction or a transpose, is not read.
"""
from __future__ import annotations

import ast

from . import errors as E
from . import ir
from .call_texts import keywords
from .loc import call_at
from .ops.access import MaskedLoad
from .ops.elementwise import Arange, Binary, Cast, Compare, Unary, Where
from .ops.shape import Broadcast
from .types import ScalarType

_ELEMENTWISE = (Binary, Unary, Cast, Where)


def _axes(v, defs, memo, depth=0) -> dict:
  """{arange value id, or (its id, comparison kind, bound) once compared with a number or scalar: the axes of v's
  shape it varies along}."""
  if not isinstance(v, ir.Value) or depth > 64:
    return {}
  if v.id in memo:
    return memo[v.id]
  o, out = defs.get(v.id), {}
  if isinstance(o, Arange):
    out = {v.id: {o.dim}}
  elif isinstance(o, Broadcast):
    shape = tuple(getattr(o.x.type, "shape", ()))
    for a, axes in _axes(o.x, defs, memo, depth + 1).items():
      moved = {o.dims[k] for k in axes if k < len(shape) and shape[k] > 1}
      if moved:
        out[a] = moved
  elif isinstance(o, Compare):
    # an index compared with a bound: keyed by both (the same bound placed along two axes is the mistake; a
    # reused arange compared with another size, a column bound of a tile whose rows the load masked, is not)
    other = o.rhs if isinstance(o.rhs, (int, float)) else getattr(o.rhs, "id", None) if isinstance(
        getattr(o.rhs, "type", None), ScalarType) else None
    if other is not None:
      for a, axes in _axes(o.lhs, defs, memo, depth + 1).items():
        if not isinstance(a, tuple):
          out[(a, o.kind, other)] = set(axes)
  elif isinstance(o, _ELEMENTWISE):
    for x in o.operands():
      if isinstance(x, ir.Value) and getattr(x.type, "shape", None) == getattr(v.type, "shape", None):
        for a, axes in _axes(x, defs, memo, depth + 1).items():
          out.setdefault(a, set()).update(axes)
  memo[v.id] = out
  return out


def _loads(v, defs, seen) -> list:
  """The masked loads `v` comes from through elementwise math (of its own shape)."""
  if not isinstance(v, ir.Value) or v.id in seen:
    return []
  seen.add(v.id)
  o = defs.get(v.id)
  if isinstance(o, MaskedLoad):
    return [o]
  if isinstance(o, _ELEMENTWISE):
    return [ld for x in o.operands() if getattr(getattr(x, "type", None), "shape", None) == v.type.shape
            for ld in _loads(x, defs, seen)]
  return []


def check_where_axes(kernel: ir.Kernel, defs: dict) -> list:
  errors, memo, done = [], {}, set()
  for o in ir.walk(kernel.body):
    shape = tuple(getattr(getattr(o, "results", (None,))[0], "type", None).shape) if isinstance(o, Where) and hasattr(
        o.results[0].type, "shape") else ()
    if len(shape) < 2 or o.loc in done:
      continue
    placed = {}
    for ld in (ld for x in (o.on_true, o.on_false) for ld in _loads(x, defs, set())):
      for a, axes in _axes(ld.mask, defs, memo).items():
        placed.setdefault(a, (set(), ld))[0].update(axes)
    for a, axes in _axes(o.cond, defs, memo).items():
      if isinstance(a, tuple) and a in placed and not (axes & placed[a][0]):
        done.add(o.loc)
        errors.append(_error(o, defs, a, axes, placed[a], len(shape)))
        break
  return errors


def _error(o, defs, a, axes, placed, rank):
  load_axes, ld = placed
  name = next((v.name for v in [_value(defs, a[0])] if v is not None and v.name), None) or "the index"
  mine, theirs = min(axes), min(load_axes)
  node = call_at(o.loc)
  kw = keywords(o.loc)
  func = ast.unparse(node.func) if node is not None else ""
  cond = kw.get("condition") or kw.get("where") if not func.endswith("where") else (
      kw.get("condition") or (ast.unparse(node.args[0]) if node.args else ""))
  want = "[" + ", ".join(":" if k == theirs else "None" for k in range(rank)) + "]"
  return E.ShapeMismatchError(
      f"{'this select' if func.endswith('where') or not func else func}'s mask {cond} places {name} along axis {mine} of the tile, but the masked load at line"
      f" {ld.loc.lineno} placed {name} along axis {theirs}: it keeps or drops the lanes of another axis than the"
      f" load's mask did", o.loc,
      hint=f"place {name} along axis {theirs} as the load does ({name}{want}, or a mask m of it as m{want})")


def _value(defs, vid):
  o = defs.get(vid)
  return next((r for r in getattr(o, "results", ()) if r.id == vid), None)
