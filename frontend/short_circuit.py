"""`a or b` and `a and b` of run-time boolean scalars, short-circuiting as Python's do: the operands
after one that decides are computed only where it does not (`if i >= n or x[i] < 0: break` reads
`x[i]` only where `i < n`). The rest of the expression runs under a run-time if whose result is the
boolean (frontend/branches.py's If op, with one result)."""
from __future__ import annotations

import ast
import re

from . import errors as E
from . import ir
from .builder import Call
from .dtypes import DType
from .ops import control as ctl
from .ops import elementwise as ew
from .ops.base import is_value
from .types import ScalarType, resolve


def is_bool_scalar(v) -> bool:
  return is_value(v) and isinstance(v.type, ScalarType) and resolve(v.type.dtype) == DType.bool_


def _simple(rest, walrus: bool = False) -> bool:
  """Whether the operands left can be computed under an if: no name bound (a walrus, unless `walrus`: the
  caller carries it out of the if) or helper traced inside them, whose effects would outlive the branch."""
  kinds = (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom) + (() if walrus else (ast.NamedExpr,))
  return not any(isinstance(n, kinds) for r in rest for n in ast.walk(r))


def _walrus_values(tracer, names, loc, before):
  """The values the walrus names `names` hold after the operands that bind them (Python numbers made values):
  None where one is not a run-time scalar or a number (a tensor, or a name a nested if left unbound), or held
  another kind of value before them (`before`, the names bound then), which the path skipping them keeps."""
  out = []
  for n in names:
    if n in before and not (type(before[n]) in (int, float, bool) or is_value(before[n]) and isinstance(
        before[n].type, ScalarType)):
      return None
    w = tracer.env.get(n)
    if type(w) in (int, float, bool):
      w = ew.constant(Call(tracer.b, loc), w)
    if not (is_value(w) and isinstance(w.type, ScalarType)):
      return None
    was = before.get(n)
    if (isinstance(was, float) or is_value(was) and getattr(resolve(was.type.dtype), "is_float", False)) and not \
        getattr(resolve(w.type.dtype), "is_float", False):
      return None        # (a float before, an integer after: no one dtype holds both)
    out.append(w)
  return out


def _kept(tracer, before, w, loc):
  """A walrus name's value on the path that skips its operand, of `w`'s type: what it held before (`before`, a
  scalar or a number), as in Python, converted to `w`'s dtype; 0 where it was unbound (`before` None: Python would
  leave it so, and reading it there is a NameError, not checked here)."""
  d = resolve(w.type.dtype)
  cx = Call(tracer.b, loc)
  if is_value(before):
    return ew.astype(cx, before, d)
  if type(before) in (int, float, bool):
    return ew.constant(cx, before, d)
  return ew.constant(cx, False if d == DType.bool_ else 0, d)


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
  if not _simple(rest_nodes, walrus=True):
    return None
  bound = sorted({n.target.id for r in rest_nodes for n in ast.walk(r) if isinstance(n, ast.NamedExpr)
                  and isinstance(n.target, ast.Name)})    # `i < n and (v := x[i]) > 0`: v carried out of the if
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
    walrus = _walrus_values(tracer, bound, loc, env) if is_bool_scalar(r) or is_number_scalar(r) else None
    if walrus is None:
      tracer.and_or_rest = r          # for not_boolean_hint
      tracer.env.clear()
      tracer.env.update(env)
      tracer.where = where
      return None
    b.emit(ctl.Yield, (r, *walrus), loc=loc)
  with b.region(decided):   # (a number after it: v as that number, False 0 and True 1, as Python's bool is an int)
    d = v if is_bool_scalar(r) else ew.astype(Call(b, loc), v, resolve(r.type.dtype))
    b.emit(ctl.Yield, (d, *(_kept(tracer, env.get(n), w, loc) for n, w in zip(bound, walrus))), loc=loc)
  then_blk, else_blk = (computed, decided) if is_and else (decided, computed)
  res = b.emit(ctl.If, v, then_blk, else_blk, loc=loc, types=[ScalarType(resolve(r.type.dtype)),
               *(w.type for w in walrus)], names=["", *bound])
  for n, value in zip(bound, res.results[1:]):
    tracer.env[n], tracer.where[n] = value, loc
  out = res.results[0]
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
  try:
    return if_expression(tracer, expr, cond, name=f"`{tracer.text(node)}`",
                         bound={} if held is here else {held.id: v}, bools_as_numbers=True)
  except E.KernelTypeError as err:      # `f and x[...]`: a scalar on one path, a tensor on the other
    if re.search(r"tensor of shape .* on (one side|the other)", err.message) and " scalar " in err.message:
      a, b = tracer.text(here), tracer.text(rest)
      a = a if isinstance(here, (ast.Name, ast.Call, ast.Subscript, ast.Attribute)) else f"({a})"
      holds = isinstance(node.op, ast.And)
      err.hint = (f"Python's value here is {b} where {a} is {'non-zero' if holds else '0'}, else {a}: pick it per"
                  f" element with ml.where({a} != 0, {b + ', ' + a if holds else a + ', ' + b})")
    raise


def tensor_and_or(tracer, node: ast.BoolOp, i: int, v):
  """`m and k` (`or`) where operand `i` evaluated to a boolean register tensor `v`, or to a boolean run-time
  scalar that Python's short-circuit cannot keep (an operand after it is a tensor): Triton's elementwise
  logical and (or) of the masks, `m & k`, every operand computed (FlagGems' `(not fill) and mask`, `rows < M
  and cols < N`, `pid < n and offs < N`). Only where every operand left is a boolean (a tensor, a run-time
  scalar or a Python bool) and one at least a tensor: None otherwise (numbers: the caller's error writes
  `!= 0`)."""
  from .types import TensorType
  if not (is_value(v) and resolve(v.type.dtype) == DType.bool_):
    return None
  out, tensors = v, isinstance(v.type, TensorType)
  op = ew.BinOp.AND if isinstance(node.op, ast.And) else ew.BinOp.OR
  for sub in node.values[i + 1:]:
    w = tracer.eval(sub)
    if not (isinstance(w, bool) or is_value(w) and resolve(w.type.dtype) == DType.bool_):
      return None
    tensors = tensors or is_value(w) and isinstance(w.type, TensorType)
    out = ew.binary(tracer.cx(node, "", (out, w), (node.values[i], sub)), op, out, w)
  return out if tensors else None


def any_all(cx, is_any: bool, items):
  """Python's `any(...)`/`all(...)` of a static list or tuple of run-time boolean scalars and Python
  values (`any([i < 0, i >= n])`: the list is built first, so every item is computed, as in Python):
  their `|` (or `&`), a static item deciding while tracing. None where an item is another run-time
  value (a tensor: the caller's message). A number scalar is its truth, as Python's all() takes it
  (`all([i < n, s])`: s != 0; probe 59c, it was MG003)."""
  items = [ew.truth(cx, v) if is_number_scalar(v) else v for v in items]
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


def walrus_hint(tracer, node: ast.BoolOp, i: int) -> str | None:
  """The hint for a walrus among the operands after the run-time boolean operand `i` that short_circuit could not
  carry out of its if (its name a float before and an integer after, a tensor, None): the name keeps its old value
  where the operand is skipped, so it must hold one kind of scalar; None where there is no walrus."""
  names = sorted({n.target.id for r in node.values[i + 1:] for n in ast.walk(r) if isinstance(n, ast.NamedExpr)})
  if not names:
    return None
  n = names[0]
  return (f"{n} := ... runs only where {tracer.text(node.values[i])} does not decide, and {n} keeps what it held"
          f" elsewhere, so both must be scalars of one dtype: start {n} before this line as a scalar of the dtype it"
          f" is bound to (or use another name)")


def not_boolean_hint(tracer, node: ast.BoolOp, i: int) -> str | None:
  """The hint for `i < n and x[i]`, whose operand after the run-time boolean is a number or a scalar, not
  a boolean: compare it, or select with ml.where; None where short_circuit declined for another reason
  (a walrus)."""
  rest = node.values[i + 1:]
  r = getattr(tracer, "and_or_rest", None)
  tensor = is_value(r) and not isinstance(r.type, ScalarType)
  if not _simple(rest) or len(rest) != 1 or tensor and resolve(getattr(r.type, "dtype", DType.bool_)) == DType.bool_:
    return None           # (a boolean tensor: the caller's `&` hint broadcasts the boolean)
  a, b = tracer.text(node.values[i]), tracer.text(rest[0])
  pick = f"ml.where({a}, {b}, 0)" if isinstance(node.op, ast.And) else f"ml.where({a}, 1, {b})"
  if tensor:              # `c and x[...]`: Python's value is the tensor or the boolean, which ml.where picks
    is_and = isinstance(node.op, ast.And)
    return (f"Python's value here is {b} where {a} {'holds' if is_and else 'does not hold'}, else {a} itself"
            f" ({'False, 0' if is_and else 'True, 1'}): pick it per element with {pick}")
  simple = isinstance(rest[0], (ast.Name, ast.Call, ast.Subscript, ast.Attribute, ast.Constant))
  return (f"a run-time and/or here takes booleans: compare the value ({b if simple else f'({b})'} != 0, as Python's"
          f" truth), or pick a"
          f" value with {pick}")


_PURE_CALLS = ("len", "abs", "min", "max", "int", "float", "bool", "round", "cdiv")


def may_read(nodes) -> bool:
  """Whether computing the expressions `nodes` may read memory or bind a name: a subscript (not of a `.shape`),
  a walrus, or a call (not of a builtin on numbers, nor ml.cdiv), so a chained comparison computes them only
  where the comparisons before them hold, as Python's chain does."""
  for n in (n for r in nodes for n in ast.walk(r)):
    if isinstance(n, ast.NamedExpr) or isinstance(n, ast.Subscript) and not (
        isinstance(n.value, ast.Attribute) and n.value.attr in ("shape", "strides")):
      return True
    if isinstance(n, ast.Call):
      f = n.func
      if (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None) not in _PURE_CALLS:
        return True
  return False


def chain_rest(tracer, node: ast.Compare, k: int, held, so_far):
  """The rest of the chained comparison `node` after its comparison `k` (whose right side evaluated to `held`),
  the run-time boolean scalar `so_far` holding all before: computed only where `so_far` holds (`-1 < i < s[i]`
  never reads s[-3]), as Python's `a < b and b < c` with b computed once. None where it cannot be (the caller
  computes it, combined with &)."""
  here = node.comparators[k]
  name = ast.copy_location(ast.Name(f"({tracer.text(here)})", ast.Load()), here)
  name.end_lineno, name.end_col_offset = here.end_lineno, here.end_col_offset    # (a hidden name: not recomputed)
  rest = ast.copy_location(ast.Compare(name, node.ops[k + 1:], node.comparators[k + 1:]), here)
  rest.end_lineno, rest.end_col_offset = node.end_lineno, node.end_col_offset
  both = ast.copy_location(ast.BoolOp(ast.And(), [node.left, rest]), node)
  both.end_lineno, both.end_col_offset = node.end_lineno, node.end_col_offset
  saved = tracer.env.get(name.id)
  tracer.env[name.id] = held
  try:
    return short_circuit(tracer, both, 0, so_far)
  finally:
    tracer.env.pop(name.id, None)
    if saved is not None:
      tracer.env[name.id] = saved

