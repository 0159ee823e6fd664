"""Loops that count down, as Python's do: `for i in range(a, b, -s)` (a static negative step) and
`reversed(range(a, n))` of a run-time n, rewritten (as AST, before tracing) into the runtime loop
that counts its trips upwards and computes the index from them, `for k in range(count): i = a - k * s`.
A backward scan walks time backwards this way; everything after tracing sees an ordinary loop."""
from __future__ import annotations

import ast

from .ops.base import is_value


def descending(node, it, bounds, nodes):
  """`for i in range(a, b, -s)` (a static negative step: a backward scan; ml.range's too, its options
  kept) as the loop that counts up, `for k in range(count): i = a - k * s`, count = (a - b - 1) // s + 1 (no trips where a <= b);
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
    # (a - b - 1) // s + 1, at most 0 where a <= b: `(a - b + s - 1) // s` wrapped for a within s - 1
    # of 2**31 - 1 (range(n - 1, -1, -2**28) with n near 2**31 ran no trip)
    span = where(ast.BinOp(where(ast.BinOp(a, ast.Sub(), b)), ast.Sub(), where(ast.Constant(1))))
    count = where(ast.BinOp(where(ast.BinOp(span, ast.FloorDiv(), where(ast.Constant(-step)))), ast.Add(),
                            where(ast.Constant(1))))
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
