"""`a or b` and `a and b` of run-time boolean scalars, short-circuiting as Python's do: the operands
after one that decides are computed only where it does not (`if i >= n or x[i] < 0: break` reads
`x[i]` only where `i < n`). The rest of the expression runs under a run-time if whose result is the
boolean (frontend/branches.py's If op, with one result)."""
from __future__ import annotations

import ast

from . import ir
from .builder import Call
from .dtypes import DType
from .ops import control as ctl
from .ops import elementwise as ew
from .ops.base import is_value
from .types import ScalarType, resolve


def is_bool_scalar(v) -> bool:
  return is_value(v) and isinstance(v.type, ScalarType) and resolve(v.type.dtype) == DType.bool_


def _simple(rest) -> bool:
  """Whether the operands left can be computed under an if: no name bound (a walrus) or helper
  traced inside them, whose effects would outlive the branch."""
  return not any(isinstance(n, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom))
                 for r in rest for n in ast.walk(r))


def as_condition(test):
  """`test`, an if's or while's condition, with its and/or marked (also under `not`): their run-time
  number operands count by their truth there (`if n and k:`), where Python's and/or would give one of
  the numbers."""
  todo = [test]
  while todo:
    t = todo.pop()
    if isinstance(t, ast.BoolOp):
      t.condition = True
      todo.extend(t.values)
    elif isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
      todo.append(t.operand)
  return test


def is_number_scalar(v) -> bool:
  """A run-time scalar of a number dtype (not a boolean)."""
  d = resolve(v.type.dtype) if is_value(v) and isinstance(v.type, ScalarType) else None
  return isinstance(d, DType) and d != DType.bool_


def short_circuit(tracer, node: ast.BoolOp, i: int, v):
  """The value of `node` whose operand `i` evaluated to the run-time boolean scalar `v`: the
  operands after it computed under a run-time if where `v` does not decide (False for `or`, True for
  `and`). The rest a number scalar (`i < n and x[i]`): Python's value, that number where it is computed, else
  `v` as one (False is 0). None where they cannot be (a walrus among them, or a result that is not a scalar
  or a Python number): the caller reports the expression."""
  rest_nodes = node.values[i + 1:]
  if not _simple(rest_nodes):
    return None
  rest = rest_nodes[0] if len(rest_nodes) == 1 else ast.copy_location(ast.BoolOp(node.op, rest_nodes), rest_nodes[0])
  condition = getattr(node, "condition", False)     # (an if's or while's: number operands by their truth)
  if isinstance(rest, ast.BoolOp):
    rest.condition = condition
  is_and = isinstance(node.op, ast.And)
  b, loc = tracer.b, tracer.loc(node)
  decided, computed = ir.Block(), ir.Block()
  env, where = dict(tracer.env), dict(tracer.where)
  weak = False
  with b.region(computed):
    r = tracer.eval(rest)
    if isinstance(r, bool) or condition and isinstance(r, (int, float)):
      r = ew.constant(Call(b, tracer.loc(rest)), bool(r), DType.bool_)
    elif condition and is_number_scalar(r):
      r = ew.truth(Call(b, tracer.loc(rest)), r)
    elif type(r) in (int, float):        # `c and 2.5`: Python's value, weakly typed as jnp's
      r, weak = ew.constant(Call(b, tracer.loc(rest)), r), True
    if not (is_bool_scalar(r) or is_number_scalar(r)):
      tracer.and_or_rest = r          # for not_boolean_hint
      tracer.env.clear()
      tracer.env.update(env)
      tracer.where = where
      return None
    b.emit(ctl.Yield, (r,), loc=loc)
  with b.region(decided):   # (a number after it: v as that number, False as 0 and True as 1, as Python's bool is an int)
    d = v if is_bool_scalar(r) else ew.astype(Call(b, loc), v, resolve(r.type.dtype))
    b.emit(ctl.Yield, (d,), loc=loc)
  then_blk, else_blk = (computed, decided) if is_and else (decided, computed)
  out = b.emit(ctl.If, v, then_blk, else_blk, loc=loc, types=[ScalarType(resolve(r.type.dtype))], names=[""]).result
  if weak or r.id in b.weak:
    b.weak.add(out.id)
  return out


def number_and_or(tracer, node: ast.BoolOp, i: int, v):
  """The value of `node` whose operand `i` evaluated to the run-time number scalar `v` (not in a condition, where
  only truth counts): Python's, `v if v else rest` for `or`, `rest if v else v` for `and` (`k or 1`, `n and
  x[n]`), the rest computed only where `v` does not decide, as the conditional expression does
  (branches.if_expression). None where that cannot be (the caller reports the expression)."""
  from .branches import if_expression
  rest_nodes = node.values[i + 1:]
  if not _simple(rest_nodes):
    return None
  rest = rest_nodes[0] if len(rest_nodes) == 1 else ast.copy_location(ast.BoolOp(node.op, rest_nodes), rest_nodes[0])
  here = node.values[i]
  held = here if isinstance(here, ast.Name) else ast.copy_location(ast.Name(f"({tracer.text(here)})", ast.Load()), here)
  held.end_lineno, held.end_col_offset = here.end_lineno, here.end_col_offset     # (a hidden name: not recomputed)
  body, orelse = (held, rest) if isinstance(node.op, ast.Or) else (rest, held)
  expr = ast.copy_location(ast.IfExp(here, body, orelse), node)
  expr.end_lineno, expr.end_col_offset = node.end_lineno, node.end_col_offset
  cond = ew.truth(Call(tracer.b, tracer.loc(here)), v)
  return if_expression(tracer, expr, cond, name=f"`{tracer.text(node)}`",
                       bound={} if held is here else {held.id: v}, bools_as_numbers=True)


def any_all(cx, is_any: bool, items):
  """Python's `any(...)`/`all(...)` of a static list or tuple of run-time boolean scalars and Python
  values (`any([i < 0, i >= n])`: the list is built first, so every item is computed, as in Python):
  their `|` (or `&`), a static item deciding while tracing. None where an item is another run-time
  value (a tensor: the caller's message)."""
  if not all(is_bool_scalar(v) or not is_value(v) for v in items) or any(
      isinstance(v, (tuple, list, dict)) for v in items):
    return None
  static = [bool(v) for v in items if not is_value(v)]
  if (any(static) if is_any else not all(static)):
    return is_any                 # a True among any's items (a False among all's) decides
  out = None
  for v in items:
    if is_value(v):
      out = v if out is None else ew.binary(cx, ew.BinOp.OR if is_any else ew.BinOp.AND, out, v)
  return (not is_any) if out is None else out


def not_boolean_hint(tracer, node: ast.BoolOp, i: int) -> str | None:
  """The hint for `i < n and x[i]`, whose operand after the run-time boolean is a number or a scalar, not
  a boolean: compare it, or select with ml.where; None where short_circuit declined for another reason
  (a walrus)."""
  rest = node.values[i + 1:]
  r = getattr(tracer, "and_or_rest", None)
  if not _simple(rest) or len(rest) != 1 or is_value(r) and not isinstance(r.type, ScalarType):
    return None           # (a tensor: the caller's `&` hint broadcasts the boolean)
  a, b = tracer.text(node.values[i]), tracer.text(rest[0])
  pick = f"ml.where({a}, {b}, 0)" if isinstance(node.op, ast.And) else f"ml.where({a}, 1, {b})"
  simple = isinstance(rest[0], (ast.Name, ast.Call, ast.Subscript, ast.Attribute, ast.Constant))
  return (f"a run-time and/or here takes booleans: compare the value ({b if simple else f'({b})'} != 0, as Python's"
          f" truth), or pick a"
          f" value with {pick}")
