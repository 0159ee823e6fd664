"""Hints of interpret mode's run-time errors that look at how the failing op's result is used (a read
outside its buffer that is a side of an ml.where). Frontend knowledge: the typed IR and the user's
call text (loc.call_at); the interpreter (lowering/interpret_memory.py) asks for them."""
from __future__ import annotations

import ast

from . import ir
from .loc import call_at
from .ops.elementwise import Where
from .types import TensorType

_STEPS = 4      # pure ops between the read and the select (a cast, an arithmetic op)


def users(kernel) -> dict:
  """Value id -> the ops that take it as an operand."""
  out: dict = {}
  for o in ir.walk(kernel.body):
    for v in o.operands():
      if isinstance(v, ir.Value):
        out.setdefault(v.id, []).append(o)
  return out


def _select_of(used, o):
  """The ml.where a result of `o` reaches as one of its sides (through a few pure ops), or None."""
  todo, seen = [(r, 0) for r in o.results], set()
  while todo:
    v, depth = todo.pop()
    for u in used.get(v.id, ()):
      if id(u) in seen:
        continue
      seen.add(id(u))
      if isinstance(u, Where) and v is not u.cond:
        return u
      if depth < _STEPS and ir.traits_of(u).pure and not u.regions:
        todo += [(r, depth + 1) for r in u.results]
  return None


def where_read_hint(used, o) -> str | None:
  """For a read outside its buffer whose value is a side of an ml.where: the select computes both
  sides, so the read runs where the condition is False too; an if statement reads only on the
  path taken."""
  w = _select_of(used, o)
  if w is None:
    return None
  call = call_at(w.loc)
  if call is not None and isinstance(call.func, ast.Attribute) and call.func.attr == "load":
    # the select of a masked load of SMEM (the compiler's, not an ml.where): the load reads its whole window
    return ("a masked load of SMEM reads its whole window and keeps the elements its mask turns on, so the window"
            " must lie inside the buffer (only a GMEM window may run past the end): keep its start where it fits,"
            " ml.minimum(start, n - size), or allocate the buffer with room for the window past its end")
  tensor = isinstance(w.cond.type, TensorType)
  if call is not None and len(call.args) == 3:
    c, a, b = (ast.unparse(x) for x in call.args)
    if tensor:
      ref = a[:-len("[...]")] if a.endswith("[...]") else "x.at[...]"
      return (f"ml.where computes both of its sides, so this read runs also where {c} is False: load under the"
              f" mask instead, which never touches the elements it keeps off: {ref}.load(mask={c}, other={b})")
    return (f"ml.where computes both of its sides, so this read runs also where {c} is False: read in an if"
            f" statement, which reads only on the path taken: if {c}: v = {a}, and else: v = {b}")
  return ("ml.where computes both of its sides, so this read runs also where the condition is False: "
          + ("load under the mask instead, x.at[...].load(mask=m, other=0.0)" if tensor else
             "read in an if statement (if cond: v = x[i], and else: v = 0.0), which reads only on the path taken"))
