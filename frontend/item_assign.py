"""Assigning an item of a list or dict bound to a name: `parts[0] = v`, `d["a"] = v` (probe 52b: lists;
probe 59c: dicts). A kernel's containers are values while tracing, so the name is bound to a new container with
that item replaced (or added, for a dict's new key), as `parts = parts[:0] + [v] + parts[1:]` or
`d = {**d, "a": v}`; loops carry the name and ifs merge it (env.rebound_names). Refused, as `+=` of a list is,
where another name still read holds the same container: Python would change it too.
"""
from __future__ import annotations

import ast

from .ops.base import is_value


def _static_key(k) -> bool:
  """Whether `k` is a key a kernel's dict can take while tracing: a Python str, int, bool, None or a tuple of them."""
  if isinstance(k, tuple):
    return all(_static_key(x) for x in k)
  return k is None or isinstance(k, (str, int, bool)) and not is_value(k)


def item_assigned(tracer, target, value) -> bool:
  """`idx[a] = v` of a list bound to a name, at a static int (an ml.static_range index: building an index tuple
  per axis), or `d[k] = v` of a dict at a static key: the name bound to the container with that item replaced.
  False for anything else (tuples, refs, run-time indices: subscript_target reports them)."""
  stmt = getattr(tracer, "stmt", None)
  if not (isinstance(target.value, ast.Name) and isinstance(stmt, (ast.Assign, ast.AugAssign))):
    return False
  name = target.value.id
  cur = tracer.env.get(name)
  if not isinstance(cur, (list, dict)):
    return False
  i = tracer.eval_index(target.slice)
  at = tracer.text(target.slice)
  aug = ast.copy_location(ast.AugAssign(target=ast.Name(id=name, ctx=ast.Store()), op=ast.Add(), value=stmt.value),
                          stmt)
  aug.written = f"{name}[{at}] = ..."
  if isinstance(cur, dict):
    if not _static_key(i):
      return False
    tracer._not_in_place(aug, cur, rebuilt=f"{name} = {{**{name}, {at}: v}}")
    tracer.env[name] = {**cur, i: value}
    tracer.where[name] = tracer.loc(stmt)
    return True
  if not isinstance(i, int) or isinstance(i, bool) or not -len(cur) <= i < len(cur):
    return False
  i %= len(cur)
  after = f"{i + 1}" if at.lstrip("-").isdigit() else f"{at} + 1"
  before = i if after[0].isdigit() else at
  tracer._not_in_place(aug, cur, rebuilt=f"{name} = {name}[:{before}] + [v] + {name}[{after}:]")
  tracer.env[name] = cur[:i] + [value] + cur[i + 1:]
  tracer.where[name] = tracer.loc(stmt)
  return True
