"""Loops that count down, as Python's do: `for i in range(a, b, -s)` (a static negative step) and
`reversed(range(a, n))` of a run-time n, rewritten (as AST, before tracing) into the runtime loop
that counts its trips upwards and computes the index from them, `for k in range(count): i = a - k * s`.
A backward scan walks time backwards this way; everything after tracing sees an ordinary loop."""
from __future__ import annotations

import ast

from .ops.base import is_value


def descending(tracer, node, it, bounds, nodes):
  """`for i in range(a, b, -s)` (a static negative step: a backward scan; ml.range's too, its options
  kept) as the loop that counts up, `for k in range(count): i = a - k * s`, count = (a - b - 1) // s + 1 (no trips where a <= b),
  computed without wrapping. The run-time bounds, evaluated once (and widened to 32 bits) as Python
  evaluates range's arguments, are bound to names of their own: the body may rebind the names the bound
  expressions read (`for r in range(m - 1, -1, -1): ...; m -= 1`, or the loop variable itself)."""
  start, stop, step = bounds
  exprs = []
  for what, value, expr in zip(("start", "stop"), (start, stop), nodes[:2]):
    if isinstance(value, int):
      exprs.append(ast.Constant(value))
      continue
    key = f"{node.target.id}'s {what}"    # (not an identifier: no name of the kernel's)
    tracer.env[key], tracer.where[key] = value, tracer.loc(it)
    exprs.append(ast.copy_location(ast.Name(key, ast.Load()), expr if expr is not None else it))
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
  """`for c in reversed(range(a, n))` with a run-time bound, as the loop that counts up,
  `for k in range((n - a) * (n > a)): c = n - 1 - k`, its bounds evaluated once (widened to 32 bits)
  and bound to names of their own (as descending's), so unsigned bounds never wrap (`range(n - 1, a - 1,
  -1)` of a uint32 a = 0 ran no trip); a static reversed range stays a static sequence, unrolled; None
  for any other form."""
  from .ops.index_operands import index_operand
  from .types import resolve
  if len(it.args) != 1 or it.keywords or not isinstance(it.args[0], ast.Call) or not isinstance(node.target, ast.Name):
    return None
  inner = it.args[0]
  if tracer.eval(inner.func) is not range or inner.keywords or not 1 <= len(inner.args) <= 2 or any(
      isinstance(a, ast.Starred) for a in inner.args):
    return None
  values = tracer.eval_spread(inner.args)
  if not any(is_value(x) for x in values):
    return None
  where = lambda e: ast.copy_location(e, inner)
  nodes = [where(ast.Constant(0)), inner.args[0]] if len(inner.args) == 1 else list(inner.args)
  values = [0, values[0]] if len(values) == 1 else list(values)
  exprs = []
  for what, x, e in zip(("start", "stop"), values, nodes):
    x = index_operand(tracer.cx(it, values=[x], operands=[e]), x, bound=True) if not isinstance(x, bool) else x
    if isinstance(x, int):
      exprs.append(where(ast.Constant(x)))
      continue
    key = f"{node.target.id}'s {what}"    # (not an identifier: no name of the kernel's)
    tracer.env[key], tracer.where[key] = x, tracer.loc(it)
    exprs.append(ast.copy_location(ast.Name(key, ast.Load()), e))
  kinds = {resolve(x.type.dtype) for x in values if is_value(x)}
  a, n = exprs
  if len(kinds) > 1:         # (bounds of two types: the loop's own error names them)
    bounds = [where(ast.BinOp(n, ast.Sub(), where(ast.Constant(1)))),
              where(ast.BinOp(a, ast.Sub(), where(ast.Constant(1)))), where(ast.Constant(-1))]
    loop = ast.For(target=node.target, iter=ast.copy_location(ast.Call(inner.func, bounds, []), it), body=node.body,
                   orelse=node.orelse, type_comment=None)
    return ast.fix_missing_locations(ast.copy_location(loop, node))
  k = f"{node.target.id}'s trip"
  count = where(ast.BinOp(where(ast.BinOp(n, ast.Sub(), a)), ast.Mult(), where(ast.Compare(n, [ast.Gt()], [a]))))
  index = ast.copy_location(ast.Assign(
      targets=[ast.copy_location(ast.Name(node.target.id, ast.Store()), node.target)],
      value=where(ast.BinOp(where(ast.BinOp(n, ast.Sub(), where(ast.Constant(1)))), ast.Sub(),
                            where(ast.Name(k, ast.Load()))))), node.target)
  loop = ast.For(target=ast.copy_location(ast.Name(k, ast.Store()), node.target),
                 iter=ast.copy_location(ast.Call(inner.func, [count], []), it), body=[index, *node.body],
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


def _plain(n) -> bool:
  """An expression cheap to evaluate twice (a name, an attribute, a window `x.at[...]`)."""
  return isinstance(n, (ast.Name, ast.Attribute)) or isinstance(n, ast.Subscript) and isinstance(
      n.value, ast.Attribute) and n.value.attr == "at"


def _rows_of(tracer, it, target):
  """(ref expressions, their targets, reversed) of `x`, `zip(x, y)`, `reversed(x)` iterated into `target`;
  None where it is not that."""
  if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords and it.args and not any(
      isinstance(a, ast.Starred) for a in it.args):
    fn = tracer.eval(it.func)
    if fn is zip and isinstance(target, ast.Tuple) and len(target.elts) == len(it.args) and all(
        isinstance(e, ast.Name) for e in target.elts) and all(_plain(a) for a in it.args):
      return list(it.args), list(target.elts), False
    if fn is reversed and len(it.args) == 1 and isinstance(target, ast.Name) and _plain(it.args[0]):
      return [it.args[0]], [target], True
    return None
  if isinstance(target, ast.Name) and _plain(it):
    return [it], [target], False
  return None


def over_rows(tracer, node):
  """`for row in x:` of a ref (a kernel parameter, an SMEM buffer or a window of one) walks its first axis,
  as Python iterates an array: the runtime loop `for k in range(x.shape[0]): row = x.at[k]`; so do
  `zip(x, y)` (as far as the shorter), `reversed(x)` and `enumerate(...)` of them (`i = k + start`, its
  start by position or keyword). None for anything else."""
  from .types import RefType
  it, target, index, start = node.iter, node.target, None, None
  if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.args
          and not any(isinstance(a, ast.Starred) for a in it.args) and tracer.eval(it.func) is enumerate):
    if not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name)
            and len(it.args) <= 2 and all(k.arg == "start" for k in it.keywords)):
      return None
    index, target = target.elts
    start = it.args[1] if len(it.args) == 2 else it.keywords[0].value if it.keywords else None
    it = it.args[0]
  found = _rows_of(tracer, it, target)
  if found is None:
    return None
  refs, targets, rev = found
  values = [tracer.eval(r) for r in refs]
  if not all(is_value(v) and isinstance(v.type, RefType) and v.type.shape for v in values):
    return None
  n = min(v.type.shape[0] for v in values)
  k = f"{targets[0].id}'s row"            # (not an identifier: no name of the kernel's)
  at = lambda e: ast.copy_location(e, node.iter)
  count = at(ast.Name(k, ast.Load()))
  body = []
  if index is not None:
    if start is not None and is_value(first := tracer.eval(start)):   # evaluated once, as enumerate's start
      key = f"{index.id}'s start"
      tracer.env[key], tracer.where[key] = first, tracer.loc(start)
      start = ast.copy_location(ast.Name(key, ast.Load()), start)
    i = count if start is None else at(ast.BinOp(count, ast.Add(), start))
    body.append(ast.copy_location(ast.Assign(targets=[ast.copy_location(ast.Name(index.id, ast.Store()), index)],
                                             value=i), index))
  for r, t, v in zip(refs, targets, values):
    key = f"{t.id}'s array"               # the ref iterated, as Python's iter(x) holds it
    tracer.env[key], tracer.where[key] = v, tracer.loc(r)
    r = ast.copy_location(ast.Name(key, ast.Load()), r)
    body.append(ast.copy_location(ast.Assign(
        targets=[ast.copy_location(ast.Name(t.id, ast.Store()), t)],
        value=at(ast.Subscript(at(ast.Attribute(r, "at", ast.Load())), count, ast.Load()))), t))
  bounds = [at(ast.Constant(n - 1)), at(ast.Constant(-1)), at(ast.Constant(-1))] if rev else [at(ast.Constant(n))]
  loop = ast.For(target=ast.copy_location(ast.Name(k, ast.Store()), targets[0]),
                 iter=at(ast.Call(at(ast.Name("range", ast.Load())), bounds, [])),
                 body=[*body, *node.body], orelse=node.orelse, type_comment=None)
  return ast.fix_missing_locations(ast.copy_location(loop, node))


def _minus_one(e) -> bool:
  try:
    return e is not None and ast.literal_eval(e) == -1
  except (ValueError, SyntaxError, TypeError):
    return False


def rewritten_iter(tracer, node):
  """The loop `node` over another spelling of a range, as the statement that runs it: `for i in (A if c
  else B)` is `if c: for i in A: ... else: for i in B: ...` (c static, or a run-time scalar: each path
  runs its own loop, as Python's picks its iterable first), and `for i in range(...)[::-1]` is `for i in
  reversed(range(...))` (a run-time bound too; `reversed(range(a, n, s))` is `range(a, n, s)[::-1]`), another slice of a run-time range is the range of its elements
  (see _sliced_range), `reversed(ml.range(a, n, s, stages=k))` the runtime loop from its last element
  (see _reversed_runtime_loop), `for k, i in enumerate(range(a, n, s), start=c)` of a run-time
  range is `for i in range(a, n, s): k = (i - a) // s + c` (see _enumerated_range). None for any other iterator."""
  import copy
  it = node.iter
  if (isinstance(it, ast.Call) and len(it.args) >= 1 and isinstance(it.args[0], ast.IfExp)
          and tracer.eval(it.func) in (enumerate, reversed)):      # enumerate(A if c else B): each path's
    pick = it.args[0]
    wrap = [ast.copy_location(ast.Call(it.func, [b, *it.args[1:]], it.keywords), it) for b in (pick.body, pick.orelse)]
    it = ast.copy_location(ast.IfExp(test=pick.test, body=wrap[0], orelse=wrap[1]), it)

  def loop(over, body=node.body, orelse=node.orelse):
    new = ast.For(target=copy.deepcopy(node.target), iter=over, body=body, orelse=orelse, type_comment=None)
    return ast.fix_missing_locations(ast.copy_location(new, node))
  if isinstance(it, ast.IfExp):
    other = loop(it.orelse, copy.deepcopy(node.body), copy.deepcopy(node.orelse))
    return ast.fix_missing_locations(ast.copy_location(ast.If(test=it.test, body=[loop(it.body)], orelse=[other]), node))
  if (made := _enumerated_range(tracer, node, it, loop)) is not None:
    return made
  if (isinstance(it, ast.Subscript) and isinstance(it.value, ast.Call) and isinstance(it.slice, ast.Slice)
      and it.slice.lower is None and it.slice.upper is None and _minus_one(it.slice.step)
      and tracer.eval(it.value.func) is range and len(it.value.args) <= 2):    # (a step: _sliced_range's)
    rev = ast.copy_location(ast.Call(func=ast.copy_location(ast.Name(id="reversed", ctx=ast.Load()), it), args=[it.value],
                                     keywords=[]), it)
    return loop(rev) if tracer.eval(rev.func) is reversed else None
  if (isinstance(it, ast.Call) and len(it.args) == 1 and not it.keywords and isinstance(it.args[0], ast.Call)
      and len(it.args[0].args) == 3 and tracer.eval(it.func) is reversed and tracer.eval(it.args[0].func) is range):
    it = ast.copy_location(ast.Subscript(value=it.args[0], ctx=ast.Load(), slice=ast.copy_location(ast.Slice(
        step=ast.copy_location(ast.Constant(-1), it)), it)), it)    # reversed(range(a, n, s)) is range(a, n, s)[::-1]
  if (made := _sliced_range(tracer, node, it, loop)) is not None:
    return made
  return _reversed_runtime_loop(tracer, node, it, loop)


def _static_int(tracer, e):
  """The int a slice part is (None where it is left out); False where it is not a static int."""
  if e is None:
    return None
  v = tracer.eval(e)
  return v if v is None or (isinstance(v, int) and not isinstance(v, bool)) else False


def _sliced_range(tracer, node, it, loop):
  """`for i in range(a, n, s)[lo:hi:t]` of a run-time bound, a static step s > 0 and static slice parts
  (t != 0), or a static s < 0 with a step alone (`reversed(range(n, 0, -2))`): the range of the same elements,
  range(a + s * lo, ml.minimum(n, a + s * hi), s * t), a negative part counted from the run-time length
  (ml.cdiv(n - a, s)) as Python's; [::-k] counts down from the last. The bounds are evaluated once, before the loop.
  None for any other form (a static range is Python's own, sliced while tracing)."""
  from .ops import elementwise_fns as fns
  if not (isinstance(it, ast.Subscript) and isinstance(it.value, ast.Call) and isinstance(it.slice, ast.Slice)):
    return None
  inner = it.value
  if (tracer.eval(inner.func) is not range or not 1 <= len(inner.args) <= 3 or inner.keywords
          or any(isinstance(a, ast.Starred) for a in inner.args)):
    return None
  lo, hi, t = (_static_int(tracer, e) for e in (it.slice.lower, it.slice.upper, it.slice.step))
  if False in (lo, hi, t) or t == 0 or (t is not None and t < 0 and (lo, hi) != (None, None)):
    return None
  from .ops.index_operands import index_operand
  from .types import DType, resolve
  values = tracer.eval_spread(inner.args)
  step = values[2] if len(values) == 3 else 1
  if not any(is_value(v) for v in values) or not isinstance(step, int) or isinstance(step, bool) or step == 0:
    return None
  if step < 0 and (lo, hi) != (None, None) or step < 0 and t is None:
    return None       # (a negative step: only its reversal, `reversed(range(n, 0, -2))`, or every t-th element)
  values = [index_operand(tracer.cx(inner, values=[v], operands=[e]), v, bound=True) if not isinstance(v, bool) else v
            for v, e in zip(values, inner.args)]                  # (8- and 16-bit bounds widened to int32)
  if any(is_value(v) and resolve(v.type.dtype) == DType.u32 for v in values):
    return None        # (uint32 bounds: n - 1 of n = 0 would wrap)
  a, b = (values[0], values[1]) if len(values) > 1 else (0, values[0])
  where, bound = _binder(tracer, node, it, inner)

  def fn(f, *args):
    key = f"ml.{f}"
    tracer.env[key], tracer.where[key] = getattr(fns, f), tracer.loc(it)
    return where(ast.Call(ast.Name(key, ast.Load()), list(args), []))
  A, B = bound(a, "start"), bound(b, "stop")
  num = lambda k: where(ast.Constant(k))
  op = lambda x, o, y: where(ast.BinOp(x, o, y))
  if step < 0:        # range(a, b, -s)[::-t] counts up from its last element, a - s * (len - 1), to a;
    # [::t] is range(a, b, -s * t)
    if t > 0:
      return loop(where(ast.Call(inner.func, [A, B, num(step * t)], [])))
    length = fn("cdiv", op(A, ast.Sub(), B), num(-step)) if step != -1 else op(A, ast.Sub(), B)
    last = op(A, ast.Sub(), op(num(-step), ast.Mult(), op(length, ast.Sub(), num(1))))
    return loop(where(ast.Call(inner.func, [last, op(A, ast.Add(), num(1)), num(step * t)], [])))
  length = fn("cdiv", op(B, ast.Sub(), A), num(step)) if step != 1 else op(B, ast.Sub(), A)
  if t is not None and t < 0:         # [::-k]: from the last element down, k apart
    last = op(A, ast.Add(), op(num(step), ast.Mult(), op(length, ast.Sub(), num(1))))
    return loop(where(ast.Call(inner.func, [last if step != 1 else op(B, ast.Sub(), num(1)), op(A, ast.Sub(), num(step)),
                                            num(step * t)], [])))
  if lo is None or lo == 0:
    start = A
  elif lo > 0:
    start = op(A, ast.Add(), num(step * lo))
  elif step == 1:
    start = fn("maximum", op(B, ast.Add(), num(lo)), A)
  else:
    start = op(A, ast.Add(), op(num(step), ast.Mult(), fn("maximum", op(length, ast.Add(), num(lo)), num(0))))
  if hi is None:
    stop = B
  elif hi >= 0:
    stop = fn("minimum", B, op(A, ast.Add(), num(step * hi)))
  elif step == 1:
    stop = op(B, ast.Add(), num(hi))
  else:
    stop = op(A, ast.Add(), op(num(step), ast.Mult(), op(length, ast.Add(), num(hi))))
  rng = where(ast.Call(inner.func, [start, stop, num(step * (t or 1))], []))
  return loop(rng)


def _binder(tracer, node, anchor, inner):
  """(where, bound) of a rewritten loop header: `where(e)` places a new AST node at `anchor`; `bound(v, role)` is
  a number as a constant, a run-time value as a name the body cannot rebind ("i's start")."""
  where = lambda e: ast.fix_missing_locations(ast.copy_location(e, anchor))
  counter = node.target.id if isinstance(node.target, ast.Name) else "range"

  def bound(v, role):
    if not is_value(v):
      return where(ast.Constant(v))
    key = f"{counter}'s {role}"                       # (no identifier: the body cannot rebind it)
    tracer.env[key], tracer.where[key] = v, tracer.loc(inner)
    return where(ast.Name(key, ast.Load()))
  return where, bound


def _enumerated_range(tracer, node, it, loop):
  """`for k, i in enumerate(range(a, n, s), c)` (or of ml.range, its options kept) with a run-time bound and a
  static step: the loop over the range alone, its position computed from its index first in each trip, `k = (i - a)
  // s + c`. The bounds are evaluated once, before the loop, in Python's order, and a run-time start is bound to a
  name of its own (the body may rebind the names it reads). None for any other form."""
  from .ops import control as ctl
  if not (isinstance(it, ast.Call) and tracer.eval(it.func) is enumerate and it.args and len(it.args) <= 2
          and all(k.arg == "start" for k in it.keywords) and len(it.args) + len(it.keywords) <= 2
          and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2
          and all(isinstance(e, ast.Name) for e in node.target.elts) and isinstance(it.args[0], ast.Call)):
    return None
  inner = it.args[0]
  if tracer.eval(inner.func) not in (range, ctl.range) or not 1 <= len(inner.args) <= 3 or any(
      isinstance(a, ast.Starred) for a in inner.args):
    return None
  values = tracer.eval_spread(inner.args)
  step = values[2] if len(values) == 3 else 1
  static = not any(is_value(v) for v in values) and tracer.eval(inner.func) is range
  if static or not isinstance(step, int) or isinstance(step, bool) or step == 0:
    return None        # a static range (enumerate unrolls it), or a run-time step (the loop's own error); an
    #                    ml.range of static bounds is a run-time loop too (probe 59c: it was MG001)
  start_node = it.args[1] if len(it.args) == 2 else it.keywords[0].value if it.keywords else None
  first = tracer.eval(start_node) if start_node is not None else 0
  where = lambda e: ast.copy_location(e, inner)
  args = []
  for k, (v, e) in enumerate(zip(values, inner.args)):
    if is_value(v):
      key = f"{node.target.elts[1].id}'s {('start', 'stop', 'step')[k if len(values) > 1 else 1]}"  # (no identifier)
      tracer.env[key], tracer.where[key] = v, tracer.loc(e)
      args.append(where(ast.Name(key, ast.Load())))
    else:
      args.append(e)
  a = args[0] if len(args) > 1 else where(ast.Constant(0))
  pos = where(ast.Name(node.target.elts[1].id, ast.Load()))
  if not (isinstance(a, ast.Constant) and a.value == 0):
    pos = where(ast.BinOp(pos, ast.Sub(), a))
  if step != 1:
    pos = where(ast.BinOp(pos, ast.FloorDiv(), where(ast.Constant(step))))
  if start_node is not None and not (isinstance(first, int) and first == 0):
    pos = where(ast.BinOp(pos, ast.Add(), start_node))
  count = ast.copy_location(ast.Assign(targets=[ast.copy_location(ast.Name(node.target.elts[0].id, ast.Store()),
                                                                  node.target.elts[0])], value=pos), node.target)
  rng = ast.copy_location(ast.Call(inner.func, args, inner.keywords), inner)
  made = loop(rng, [count, *node.body])
  made.target = ast.copy_location(ast.Name(node.target.elts[1].id, ast.Store()), node.target.elts[1])
  return made


def _reversed_runtime_loop(tracer, node, it, loop):
  """`for i in reversed(ml.range(a, n, s, stages=k))` (a static step, its options kept): the runtime loop over the
  same elements from the last, ml.range(a + s * (ml.cdiv(n - a, s) - 1), a - 1, -s, stages=k) (for s < 0 counting
  up to a), its bounds evaluated once. None for any other form, and for uint32 bounds (a - 1 of a = 0 would wrap)."""
  from .ops import control as ctl, elementwise_fns as fns
  from .ops.index_operands import index_operand
  from .types import DType, resolve
  if not (isinstance(it, ast.Call) and len(it.args) == 1 and not it.keywords and isinstance(it.args[0], ast.Call)
          and tracer.eval(it.func) is reversed):
    return None
  inner = it.args[0]
  if tracer.eval(inner.func) is not ctl.range or not 1 <= len(inner.args) <= 3 or any(
      isinstance(a, ast.Starred) for a in inner.args) or any(k.arg is None for k in inner.keywords):
    return None
  values = tracer.eval_spread(inner.args)
  step = values[2] if len(values) == 3 else 1
  if not isinstance(step, int) or isinstance(step, bool) or step == 0:
    return None
  values = [index_operand(tracer.cx(inner, values=[v], operands=[e]), v, bound=True) if not isinstance(v, bool) else v
            for v, e in zip(values, inner.args)]                  # (8- and 16-bit bounds widened to int32)
  if any(is_value(v) and resolve(v.type.dtype) == DType.u32 for v in values):
    return None
  where, bound = _binder(tracer, node, inner, inner)
  a, b = (values[0], values[1]) if len(values) > 1 else (0, values[0])
  tracer.env["ml.cdiv"], tracer.where["ml.cdiv"] = fns.cdiv, tracer.loc(it)
  A, B = bound(a, "start"), bound(b, "stop")
  num = lambda k: where(ast.Constant(k))
  op = lambda x, o, y: where(ast.BinOp(x, o, y))
  s = abs(step)
  span = op(B, ast.Sub(), A) if step > 0 else op(A, ast.Sub(), B)
  count = where(ast.Call(where(ast.Name("ml.cdiv", ast.Load())), [span, num(s)], [])) if s != 1 else span
  last = op(A, ast.Add() if step > 0 else ast.Sub(), op(num(s), ast.Mult(), op(count, ast.Sub(), num(1))))
  if step == 1:
    last = op(B, ast.Sub(), num(1))
  stop = op(A, ast.Sub() if step > 0 else ast.Add(), num(1))
  return loop(where(ast.Call(inner.func, [last, stop, num(-step)], inner.keywords)))
