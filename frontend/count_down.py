"""Loops that count down, as Python's do: `for i in range(a, b, -s)` (a static negative step) and
`reversed(range(a, n))` of a run-time n, rewritten (as AST, before tracing) into the runtime loop
that counts its trips upwards and computes the index from them, `for k in range(count): i = a - k * s`.
A backward scan walks time backwards this way; everything after tracing sees an ordinary loop."""
from __future__ import annotations

import ast

from .ops.base import is_value


def descending(node, it, bounds, nodes):
  """`for i in range(a, b, -s)` (a static negative step: a backward scan; ml.range's too, its options
  kept) as the loop that counts up, `for k in range(count): i = a - k * s`, count = (a - b - 1) // s + 1 (no trips where a <= b),
  computed without wrapping;
  None where a bound spread from a tuple has no expression to count with."""
  start, stop, step = bounds
  exprs = []
  for value, expr in zip((start, stop), nodes[:2]):
    if isinstance(value, int):
      expr = ast.Constant(value)
    elif expr is None:
      return None
    exprs.append(expr)
  a, b = exprs
  k = f"{node.target.id}'s trip"          # (not an identifier: no name of the kernel's; messages show it)
  where = lambda n: ast.copy_location(n, it)
  if isinstance(start, int) and isinstance(stop, int):
    count = where(ast.Constant(len(range(start, stop, step))))
  else:
    # (a - b - 1) // s + 1 where a > b, else 0, without computing a - b, which wraps where the bounds are
    # far apart (range(2**31 - 1, -2**31 + 5, -2**30) ran no trip, range(-2**31 + 10, 2**31 - 1, -3) four):
    # with a = qa * s + ra and b = qb * s + rb (floor division, 0 <= r < s) it is qa - qb + (ra > rb), whose
    # terms fit the counter's type; times (a > b), which also keeps unsigned bounds with a <= b from wrapping
    op = lambda x, o, y: where(ast.BinOp(x, o, y))
    gt = lambda x, y: where(ast.Compare(x, [ast.Gt()], [y]))
    s = where(ast.Constant(-step))
    q = lambda x: op(x, ast.FloorDiv(), s)
    r = lambda x: op(x, ast.Mod(), s)
    count = op(op(op(q(a), ast.Sub(), q(b)), ast.Add(), gt(r(a), r(b))), ast.Mult(), gt(a, b))
  index = ast.copy_location(ast.Assign(
      targets=[ast.copy_location(ast.Name(node.target.id, ast.Store()), node.target)],
      value=where(ast.BinOp(a, ast.Add(), where(ast.BinOp(where(ast.Name(k, ast.Load())), ast.Mult(),
                                                               where(ast.Constant(step))))))), node.target)
  loop = ast.For(target=ast.copy_location(ast.Name(k, ast.Store()), node.target),
                 iter=where(ast.Call(it.func, [count], it.keywords)), body=[index, *node.body], orelse=[],
                 type_comment=None)
  return ast.fix_missing_locations(ast.copy_location(loop, node))


def reversed_range(tracer, node, it):
  """`for c in reversed(range(a, n))` with a run-time bound, as `for c in range(n - 1, a - 1, -1)`
  (a static reversed range stays a static sequence, unrolled); None for any other form."""
  if len(it.args) != 1 or it.keywords or not isinstance(it.args[0], ast.Call):
    return None
  inner = it.args[0]
  if tracer.eval(inner.func) is not range or inner.keywords or not 1 <= len(inner.args) <= 2 or any(
      isinstance(a, ast.Starred) for a in inner.args):
    return None
  if not any(is_value(x) for x in tracer.eval_spread(inner.args)):
    return None
  a, n = (ast.Constant(0), inner.args[0]) if len(inner.args) == 1 else inner.args
  where = lambda e: ast.copy_location(e, inner)
  bounds = [where(ast.BinOp(n, ast.Sub(), where(ast.Constant(1)))), where(ast.BinOp(a, ast.Sub(), where(ast.Constant(1)))),
            where(ast.Constant(-1))]
  loop = ast.For(target=node.target, iter=ast.copy_location(ast.Call(inner.func, bounds, []), it), body=node.body,
                 orelse=node.orelse, type_comment=None)
  return ast.fix_missing_locations(ast.copy_location(loop, node))


def rebound_index(node, before):
  """`for j in range(...)` whose body rebinds `j` (`j = j * 10`, `j += 1`) and where `j` held an
  integer before the loop: as Python leaves it, `j` after the loop is what the last trip's body bound
  it to (the index the loop computes would be wrong), so the loop runs on a name of its own and `j`
  is an ordinary name it carries, `for t in range(...): j = t`. None for any other loop (a `j` not
  bound before, or bound to something else, stays undefined after the loop, as before)."""
  from .env import assigned_names
  name = node.target.id
  if name not in assigned_names(node.body):
    return None
  from .types import ScalarType, resolve
  int_scalar = (is_value(before) and isinstance(before.type, ScalarType)
                and getattr(resolve(before.type.dtype), "is_int", False))
  if not (type(before) is int or int_scalar):
    return None
  k = f"{name}'s index"                   # (not an identifier: no name of the kernel's)
  index = ast.copy_location(ast.Assign(targets=[ast.copy_location(ast.Name(name, ast.Store()), node.target)],
                                       value=ast.copy_location(ast.Name(k, ast.Load()), node.target)),
                            node.target)
  loop = ast.For(target=ast.copy_location(ast.Name(k, ast.Store()), node.target), iter=node.iter,
                 body=[index, *node.body], orelse=node.orelse, type_comment=None)
  return ast.fix_missing_locations(ast.copy_location(loop, node))


def over_rows(tracer, node):
  """`for row in x:` of a ref (a kernel parameter, an SMEM buffer or a window of one) walks its first axis,
  as Python iterates an array: the runtime loop `for i in range(x.shape[0]): row = x.at[i]`; so does
  `for i, row in enumerate(x):`, with `i` the index. None for anything else."""
  from .types import RefType
  it, target = node.iter, node.target
  counted = (isinstance(it, ast.Call) and len(it.args) == 1 and not it.keywords
             and not isinstance(it.args[0], ast.Starred) and isinstance(it.func, ast.Name)
             and tracer.eval(it.func) is enumerate)
  ref_node = it.args[0] if counted else it
  if counted and not (isinstance(target, ast.Tuple) and len(target.elts) == 2
                      and all(isinstance(e, ast.Name) for e in target.elts)):
    return None
  if not counted and not isinstance(target, ast.Name):
    return None
  plain = isinstance(ref_node, (ast.Name, ast.Attribute)) or isinstance(ref_node, ast.Subscript) and isinstance(
      ref_node.value, ast.Attribute) and ref_node.value.attr == "at"
  if not plain:
    return None        # (x, y), range(n), zip(...), x[...]: evaluated once, by the caller, as before
  seq = tracer.eval(ref_node)
  if not (is_value(seq) and isinstance(seq.type, RefType) and seq.type.shape):
    return None
  index, row_target = (target.elts if counted else (None, target))
  k = index.id if counted else f"{target.id}'s row"    # (not an identifier: no name of the kernel's)
  where = lambda n: ast.copy_location(n, ref_node)
  length = where(ast.Subscript(where(ast.Attribute(ref_node, "shape", ast.Load())), where(ast.Constant(0)),
                               ast.Load()))
  row = ast.copy_location(ast.Assign(
      targets=[ast.copy_location(ast.Name(row_target.id, ast.Store()), row_target)],
      value=where(ast.Subscript(where(ast.Attribute(ref_node, "at", ast.Load())), where(ast.Name(k, ast.Load())),
                                ast.Load()))), row_target)
  loop = ast.For(target=ast.copy_location(ast.Name(k, ast.Store()), index or target),
                 iter=ast.copy_location(ast.Call(where(ast.Name("range", ast.Load())), [length], []), it),
                 body=[row, *node.body], orelse=node.orelse, type_comment=None)
  return ast.fix_missing_locations(ast.copy_location(loop, node))
