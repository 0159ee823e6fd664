"""`continue` and `break` of loops, as structured control flow.

A `continue` (of any loop) under an `if` is the rest of the body moved into the other path of
that `if`: `if c: A; continue` then `R` is `if c: A else: R`, which a run-time `if` traces as
it traces any other (a static one picks its path, as before).

A `break` of a run-time loop (a `while`, or a `for` over a run-time `range` with a static step)
ends it through a flag (so does a `while` whose condition binds a name with `:=`, evaluated in the
body's scope that way): the loop becomes a `while` on a name the body computes, the break sets
the flag and skips the rest of the body (as a `continue` does), and the next trip's condition is
computed only where no break was taken, so it never reads what the break guarded. A `for` counts
its own index: `for i in range(a, b, s)` is `i = k` on each trip of `while k < b: ...; k += s`.

The names this adds are not identifiers (`(break at line 12)`), so they meet no name of the
kernel's. An inner loop whose `else` holds a jump of the outer loop is opened into its flagged form
first (the else after it under `if not broke:`). Jumps that sit anywhere else but in `if` branches
keep their MG001.
"""
from __future__ import annotations

import ast
import copy

JUMPS = (ast.Break, ast.Continue)


def holds(stmts, kinds) -> bool:
  """Whether `stmts` (a loop's body) hold a jump of `kinds` of that loop (not of an inner loop)."""
  for st in stmts:
    if isinstance(st, kinds):
      return True
    if isinstance(st, (ast.For, ast.While)):
      if holds(st.orelse, kinds):
        return True
    elif isinstance(st, (ast.If, ast.With, ast.Try)):
      if any(holds(getattr(st, f, []), kinds) for f in ("body", "orelse", "finalbody")):
        return True
      if isinstance(st, ast.Try) and any(holds(h.body, kinds) for h in st.handlers):
        return True
  return False


def _at(new, old):
  return ast.fix_missing_locations(ast.copy_location(new, old))


def _set(name, value, at):
  value = value if isinstance(value, ast.AST) else _at(ast.Constant(value=value), at)
  return _at(ast.Assign(targets=[_at(ast.Name(id=name, ctx=ast.Store()), at)], value=value), at)


def _structured(stmts, rest, kinds, flag, fallback=None):
  """`stmts` followed by `rest` (already without jumps), each jump of `kinds` turned into the
  paths that skip what follows it (a break also sets `flag`); None where one cannot be. A helper's
  return in a loop (`fallback`: the value its last return gives, known before the loop) sets `flag`,
  bound to `fallback` before the loop, so the loop carries it."""
  for k, s in enumerate(stmts):
    returns = kinds == (ast.Return,) and (flag is None or fallback is not None)
    looped = returns and isinstance(s, (ast.For, ast.While)) and _deep_return(s.body)
    if not looped and not holds([s], kinds) and not (returns and isinstance(s, (ast.If, ast.For, ast.While))
                                                      and loop_return([s])):
      continue
    head = list(stmts[:k])
    if looped:       # a kernel's return inside a loop: it breaks out of it (skipping its else) and the rest
      done = f"(returned in the loop at line {s.lineno})"
      loop = copy.copy(s)
      loop.body = _guarded(s, done, flag)
      opened = _else_opened(loop) if s.orelse else [loop]
      if opened is None:
        return None
      # (`rest`, what follows an if around the loop, is skipped by the return too)
      rest_of_it = _at(ast.If(test=_at(ast.Name(id=done, ctx=ast.Load()), s), body=[_at(ast.Pass(), s)],
                              orelse=opened[2:] + list(stmts[k + 1:]) + list(rest)), s)
      first = [_set(flag, copy.deepcopy(fallback), s)] if flag is not None else []
      return _structured(head + first + [_set(done, False, s)] + opened[:2] + [rest_of_it], [], kinds, flag, fallback)
    after = _structured(stmts[k + 1:], rest, kinds, flag, fallback)
    if after is None:
      return None
    if isinstance(s, (ast.For, ast.While)):     # its else holds the jump: `for ...: ... else: continue`
      opened = _else_opened(s)
      return None if opened is None else _structured(head + opened + list(stmts[k + 1:]), rest, kinds, flag, fallback)
    if isinstance(s, (ast.Continue, ast.Return)):
      return head + ([] if isinstance(s, ast.Continue) or flag is None else [_set(flag, s.value or None, s)])
    if isinstance(s, ast.Break):
      return head + [_set(flag, True, s)]
    if not isinstance(s, ast.If):
      return None
    then, other = _structured(s.body, after, kinds, flag, fallback), _structured(s.orelse, after, kinds, flag, fallback)
    if then is None or other is None:
      return None
    return head + [_at(ast.If(test=s.test, body=then or [_at(ast.Pass(), s)], orelse=other), s)]
  return list(stmts) + rest


def _copies_after_continue(stmts):
  """The first continue of the loop whose body is `stmts` that an `ml.copy` follows, or None."""
  for k, st in enumerate(stmts):
    if holds([st], (ast.Continue,)):
      rest = stmts[k:] if not isinstance(st, ast.Continue) else stmts[k + 1:]
      if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "copy"
             for r in rest for n in ast.walk(r)):
        return _first(stmts[k:], ast.Continue)
  return None


def _is_copy(st) -> bool:
  """Whether statement `st` is a bare `ml.copy(src, dst)` (or `copy(...)`) call."""
  f = st.value.func if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
  return (isinstance(f, ast.Attribute) and f.attr == "copy" or isinstance(f, ast.Name) and f.id == "copy") \
      and len(st.value.args) >= 2


def _hoisted_loads(node):
  """The pipelined loop `node` with the `ml.copy` loads its body makes at the top level after a statement
  that holds a continue moved up before that statement (`if skip[k]: continue`, then the loads): the loads
  issue on every trip anyway, ahead of the body, so a skipped trip's load is made and not read. Each load
  keeps its place among the others; None where one cannot move: a statement it passes assigns a name the
  load reads, or touches its destination (reads the buffer the load fills), or a load sits deeper."""
  from .env import assigned_names
  body = node.body
  k = next(i for i, st in enumerate(body) if holds([st], (ast.Continue,)))
  tail, moved, passed = body[k:], [], []
  for st in tail:
    if not _is_copy(st):
      if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "copy" for n in ast.walk(st)):
        return None
      passed.append(st)
      continue
    reads = {n.id for n in ast.walk(st) if isinstance(n, ast.Name)} - {"ml"}
    dst = {n.id for n in ast.walk(st.value.args[1]) if isinstance(n, ast.Name)} - {"ml"}
    touched = {n.id for p in passed for n in ast.walk(p) if isinstance(n, ast.Name)}
    if reads & set(assigned_names(passed)) or dst & touched:
      return None
    moved.append(st)
  new = copy.copy(node)
  new.body = body[:k] + moved + passed
  return new


def pipelined_continue(tracer, node):
  """A pipelined loop's loads stay at its top level: where a continue comes before them, the loop with
  the loads moved up before it (_hoisted_loads), or MG001 where they cannot move."""
  if _copies_after_continue(node.body) is not None and (hoisted := _hoisted_loads(node)) is not None:
    return hoisted
  if (at := _copies_after_continue(node.body)) is not None:
    from . import errors as E
    raise E.UnsupportedSyntaxError(
        "continue before the loads of a pipelined loop is not supported in a kernel", tracer.loc(at),
        hint="a pipelined loop (ml.range with stages=) issues its loads on every trip, ahead of it: issue them"
             " first and skip the rest of the body after them (move the continue below the ml.copy), or drop"
             " stages= for a plain loop")


def _substituted(form, node, at, **more):
  """The expression `form` (Python text) with each name N replaced by a copy of `node` (and each of `more`'s names by
  a copy of its node), located at `at`."""
  nodes = {"N": node, **more}

  class Sub(ast.NodeTransformer):
    def visit_Name(self, n):
      return copy.deepcopy(nodes[n.id]) if n.id in nodes else n
  made = ast.parse(form, mode="eval").body
  for n in ast.walk(made):        # (the form's own nodes at `at`: its text is no line of the kernel's)
    ast.copy_location(n, at)
  return Sub().visit(made)


def _scaled_index(e, name):
  """c where `e` is the loop index `name` (c = 1) or `name * c` (`c * name`) of a positive int c; else None."""
  if isinstance(e, ast.Name) and e.id == name:
    return 1
  if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
    for x, y in ((e.left, e.right), (e.right, e.left)):
      if isinstance(x, ast.Name) and x.id == name and isinstance(y, ast.Constant) and type(y.value) is int \
          and y.value > 0:
        return y.value
  return None


def pipelined_break(tracer, node):
  """A pipelined loop (`node`, its header evaluated: stages=, warp_specialize= or pingpong=) whose body begins with a
  break on its own index, `if k >= n: break` (`k > n`, `n <= k`, `n < k`, and `k * c` for `k` with c a positive int:
  `if k * 64 >= n: break`), `n` not assigned in the body: the loop with
  its trip count cut there instead, `for k in ml.range(start, min(stop, n), step, stages=...)` and the rest of the
  body. A pipelined loop runs every trip of its count (its loads are issued trips ahead), so a break cannot end one;
  this break only names the trips that run. None for any other loop (the break's MG001 stays): a step that is not a
  positive int, a break deeper in the body or beside others, an `n` the body computes, or `min` shadowed."""
  from .env import assigned_names
  body, it, t = node.body, node.iter, node.target
  first = body[0] if body else None
  if not (isinstance(t, ast.Name) and isinstance(it, ast.Call) and 1 <= len(it.args) <= 3 and not node.orelse
          and isinstance(first, ast.If) and not first.orelse and len(first.body) == 1
          and isinstance(first.body[0], ast.Break) and not holds(body[1:], (ast.Break,))):
    return None
  test = first.test
  if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
    return None
  a, op, b = test.left, test.ops[0], test.comparators[0]
  if isinstance(op, (ast.GtE, ast.Gt)) and (c := _scaled_index(a, t.id)):
    bound, strict = b, isinstance(op, ast.Gt)
  elif isinstance(op, (ast.LtE, ast.Lt)) and (c := _scaled_index(b, t.id)):
    bound, strict = a, isinstance(op, ast.Lt)
  else:
    return None
  if len(it.args) == 3 and not (isinstance(it.args[2], ast.Constant) and isinstance(it.args[2].value, int)
                                and not isinstance(it.args[2].value, bool) and it.args[2].value > 0):
    return None
  names = {n.id for n in ast.walk(bound) if isinstance(n, ast.Name)}
  if t.id in names or names & set(assigned_names(body)) or any(isinstance(n, ast.NamedExpr) for n in ast.walk(bound)):
    return None
  if any(f in tracer.env or f in tracer.scope or f in tracer.local_names for f in ("min", "max")):
    return None
  # the trips before the first index the break takes, with no sum that can wrap where the break's compare would not:
  # k >= n: n; k > n: max(n, n + 1) (n + 1 wraps only at the type's largest value, where every trip runs);
  # k * c >= n: cdiv(n, c) as n // c + min(n % c, 1); k * c > n: n // c + 1
  form = {(1, False): "N", (1, True): "max(N, N + 1)"}.get((c, strict),
                                                            f"N // {c} + 1" if strict else f"N // {c} + min(N % {c}, 1)")
  bound = _substituted(form, bound, test)
  args = list(it.args)
  k = 0 if len(args) == 1 else 1
  args[k] = _substituted("min(S, N)", bound, test, S=args[k])
  new = copy.copy(node)
  new.iter = _at(ast.Call(func=it.func, args=args, keywords=it.keywords), it)
  new.body = body[1:] or [_at(ast.Pass(), first)]
  return new


def without_continue(node):
  """The loop `node` with the continues of its body under ifs turned into those ifs' other paths
  (itself where it has none, or one that cannot be)."""
  if not holds(node.body, (ast.Continue,)):
    return node
  body = _structured(node.body, [], (ast.Continue,), None)
  if body is None:
    return node
  new = copy.copy(node)
  new.body = body
  return new


def _flagged_while(node, test, first, step):
  """The statements that run `node`'s body (with a break) until `test` fails or a break is
  taken: the flags set, then a while on them; `first` runs at the start of each trip, `step`
  at its end, where no break was taken."""
  line = node.lineno
  go, brk = f"(loop at line {line})", f"(break at line {line})"
  written = test
  if isinstance(test, ast.Constant) and not isinstance(test.value, bool):
    test = _at(ast.Constant(bool(test.value)), test)   # `while 1:`: the flag a break sets False is a bool
  elif not isinstance(test, ast.Constant):             # `while k:` of a number: its truth, as the flag
    from .short_circuit import as_condition
    test = _at(ast.Call(func=_at(ast.Name(id="bool", ctx=ast.Load()), test), args=[as_condition(test)], keywords=[]), test)
  body = _structured(node.body, [], JUMPS, brk)
  if body is None:
    return None
  name = _at(ast.Name(id=brk, ctx=ast.Load()), node)
  tail = [*step, _at(ast.If(test=name, body=[_set(go, False, node)], orelse=[_set(go, test, test)]), node)]
  loop = _at(ast.While(test=_at(ast.Name(id=go, ctx=ast.Load()), test), body=[*first, *body, *tail],
                       orelse=[]), node)
  loop.written_test = written         # what its messages quote (frontend/flow.py trace_while)
  return [_set(brk, False, node), _set(go, test, test), loop], (go, brk)


def while_with_break(node):
  """`while c:` whose body breaks, or whose condition binds a name (`while (k := n[i]) > 2:`, which
  the body then sees, as in Python): (statements, hidden names), or None."""
  walrus = any(isinstance(n, ast.NamedExpr) for n in ast.walk(node.test))
  if node.orelse or not (walrus or holds(node.body, (ast.Break,))):
    return None
  return _flagged_while(node, node.test, [], [])


def for_with_break(tracer, node, start, stop, step):
  """`for i in range(start, stop, step)` (bounds evaluated; a static step or ml.num_programs) whose body
  breaks: (statements, hidden names), with the counter and bound bound in tracer.env; or None."""
  from .ops.control import NumPrograms    # a persistent loop's stride: positive, as a static step
  if node.orelse or not holds(node.body, (ast.Break,)) or not (
      isinstance(step, int) or isinstance(tracer.b.defining(step), NumPrograms)):
    return None
  line, it = node.lineno, node.iter
  count, end = f"(index of the loop at line {line})", f"(end of the loop at line {line})"
  stride = f"(step of the loop at line {line})"

  def name(n, ctx=ast.Load):
    return _at(ast.Name(id=n, ctx=ctx()), it)
  test = _at(ast.Compare(left=name(count), ops=[ast.Lt()], comparators=[name(end)]), it)
  first = [_at(ast.Assign(targets=[_at(ast.Name(id=node.target.id, ctx=ast.Store()), node.target)],
                          value=name(count)), node.target)]
  bump = [_at(ast.AugAssign(target=name(count, ast.Store), op=ast.Add(),
                            value=_at(ast.Constant(value=step), it) if isinstance(step, int) else name(stride)), it)]
  made = _flagged_while(node, test, first, bump)
  if made is None:
    return None
  specialised = _specialised(node.body)
  if specialised is not None:      # a while around it: the producer warpgroup walks only for loops
    from . import errors as E
    jump = _first(node.body, ast.Break)
    word = "return" if getattr(jump, "from_return", False) else "break"     # a return leaves the loop as a break
    raise E.UnsupportedSyntaxError(
        f"{word} in a loop around a warp-specialised loop (line {tracer.loc(specialised).lineno}) is not supported in a"
        f" kernel", tracer.loc(jump),
        hint="the producer warpgroup walks every trip of the for loops around a warp-specialised loop, and its"
             f" loads cannot depend on a flag they carry: count the trips before the loop instead, for t in"
             f" range(count) with count computed from what the {word} tests (ml.minimum(n[0] + 1, 4)), or drop"
             " warp_specialize=True")
  tracer.env[count], tracer.env[end], tracer.env[stride] = start, stop, step
  stmts, hidden = made
  return stmts, (*hidden, count, end, stride)


def _flag_breaks(stmts, flag):
  """`stmts` with each break of their loop preceded by `flag = True` (None where one sits elsewhere
  than in if branches)."""
  out = []
  for s in stmts:
    if isinstance(s, ast.Break):
      out += [_set(flag, True, s), s]
    elif isinstance(s, ast.If) and holds([s], (ast.Break,)):
      then, other = _flag_breaks(s.body, flag), _flag_breaks(s.orelse, flag)
      if then is None or other is None:
        return None
      out.append(_at(ast.If(test=s.test, body=then, orelse=other), s))
    elif isinstance(s, (ast.For, ast.While)) and holds([s], (ast.Break,)):   # in its else
      opened = _else_opened(s)
      inner = None if opened is None else _flag_breaks(opened, flag)
      if inner is None:
        return None
      out += inner
    elif holds([s], (ast.Break,)):
      return None
    else:
      out.append(s)
  return out


def _else_opened(node):
  """An inner loop whose else holds a jump of the loop around it (`for j ...: if ...: break` then
  `else: continue`, the idiom that breaks out of two loops) as statements that run its else where
  Python does, after the loop, under `if not broke:`, each break of its own setting `broke` first; None
  where one of its own breaks sits elsewhere than in if branches."""
  flag = f"(broke out of the loop at line {node.lineno})"
  body = _flag_breaks(node.body, flag)
  if body is None:
    return None
  loop = copy.copy(node)
  loop.body, loop.orelse = body, []
  test = _at(ast.UnaryOp(op=ast.Not(), operand=_at(ast.Name(id=flag, ctx=ast.Load()), node)), node)
  after = _at(ast.If(test=test, body=node.orelse, orelse=[]), node.orelse[0])
  after.loop_else = node                     # its messages say what it is (loop_else_words)
  return [_set(flag, False, node), loop, after]


def loop_else_words(err, node, loc) -> None:
  """A mistake of the `if not broke:` that runs a loop's else (two paths giving a name different
  types), told as the loop's else: the user wrote no if there."""
  line, loop = loc(node).lineno, loc(node.loop_else).lineno
  said = f"the else of the loop at line {loop}, which a break skips"

  def words(t):
    return (t.replace(f"through the if at line {line}", f"through {said}").replace(
        f"the if at line {line}", said).replace("the if whose paths give", f"{said}; its paths give").replace(
        "after one branch of this if and", "after the loop's else and").replace(" after the other", " where a break"
                                                                                   " skipped it"))
  err.message = words(err.message)
  err.args = (err.message,)
  err.notes = tuple(words(n) for n in err.notes)


def else_with_break(node):
  """`for ... else:` / `while ... else:` whose body breaks: the else under `if not broke:` after
  the loop, each break setting `broke` first, as Python runs the else only where no break ended
  the loop: (statements, hidden names), or None."""
  opened = _else_opened(node)
  return None if opened is None else (opened, (f"(broke out of the loop at line {node.lineno})",))


def _specialised(stmts):
  """A loop header `ml.range(..., warp_specialize=...)` or `pingpong=` in `stmts`, or None."""
  for st in stmts:
    for n in ast.walk(st):
      if isinstance(n, ast.For) and isinstance(n.iter, ast.Call) and any(
          k.arg in ("warp_specialize", "pingpong") and not (isinstance(k.value, ast.Constant) and not k.value.value)
          for k in n.iter.keywords):
        return n
  return None


def _first(stmts, kind):
  """The first jump of `kind` of the loop whose body is `stmts` (not of an inner loop)."""
  for st in stmts:
    if isinstance(st, kind):
      return st
    for f in ("body", "orelse") if isinstance(st, ast.If) else ("orelse",) if isinstance(st, (ast.For, ast.While)) else ():
      found = _first(getattr(st, f), kind)
      if found is not None:
        return found
  return None


def run(tracer, made) -> None:
  """Trace the statements of a loop made above, then forget its hidden names."""
  stmts, hidden = made
  try:
    for st in stmts:
      tracer.run_stmt(st)
  finally:
    for n in hidden:
      tracer.env.pop(n, None)
      tracer.where.pop(n, None)


def unrolled_with_break(node):
  """An unrolled loop (`ml.static_range`, a static tuple) whose body breaks: (flag, body), each
  trip's body run under `if flag: pass else: ...` and each break setting the flag and skipping the
  rest of its trip, so a break under a run-time condition skips the trips after it at run time (a
  static one sets a Python flag, and the unrolling stops); None where a break sits elsewhere than
  in if branches."""
  if not holds(node.body, (ast.Break,)):
    return None
  flag = f"(break of the unrolled loop at line {node.lineno})"
  body = _structured(node.body, [], (ast.Break,), flag)
  if body is None:
    return None
  return flag, body


def run_unrolled_trips(tracer, node, trips, bind) -> None:
  """Trace `node`'s body once per trip (`bind(v)` binds the loop's target to trip value `v`), a
  run-time break skipping the trips after it (unrolled_with_break). After a run-time break the
  loop's names (its target) hold the trip the break left them at, as in Python: each trip's guarded
  body copies them into hidden names, which the run-time ifs merge into scalars (a name of another
  kind, a ref of a loop over refs, is not defined after such a loop)."""
  made = unrolled_with_break(node)
  if made is None:
    for v in trips:
      bind(v)
      if not tracer.run_unrolled(node.body):
        break
    return
  flag, body = made
  names = sorted(assigned_names_of(node.target))
  kept = {n: f"(loop variable {n} of the unrolled loop at line {node.lineno})" for n in names}
  test = _at(ast.Name(id=flag, ctx=ast.Load()), node)
  tracer.env[flag] = False
  try:
    for v in trips:
      bind(v)
      copies = [_set(kept[n], _at(ast.Name(id=n, ctx=ast.Load()), node), node) for n in names
                if _mergeable(tracer.env.get(n))]
      guarded = [_at(ast.If(test=test, body=[_at(ast.Pass(), node)], orelse=copies + body), node)]
      if not tracer.run_unrolled(guarded) or tracer.env.get(flag) is True:
        break
    if tracer.env.get(flag) is not False:         # a run-time break: the names where it left them
      for n in names:
        if kept[n] in tracer.env:
          tracer.env[n] = tracer.env[kept[n]]
        else:
          tracer.env.pop(n, None)
  finally:
    for h in (flag, *kept.values()):
      tracer.env.pop(h, None)
      tracer.where.pop(h, None)


def _mergeable(v) -> bool:
  """Whether a loop variable's value can differ between the paths of a run-time if (a number, a
  register value): a static int index, a float weight."""
  from .ops.base import is_value
  return isinstance(v, (int, float)) or is_value(v)


def assigned_names_of(target) -> set:
  """The names a for loop's target binds (`i`, `(i, w)`)."""
  return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _ends_in_return(stmts) -> bool:
  """Whether every path through `stmts` ends in a return (at their end, or in both branches of an if)."""
  last = stmts[-1] if stmts else None
  return isinstance(last, ast.Return) or (
      isinstance(last, ast.If) and _ends_in_return(last.body) and _ends_in_return(last.orelse))


def own_nodes(node):
  """The nodes of statement `node` (ast.walk's) but those inside the functions and classes it defines (a
  helper's `def` in the body, a lambda: their returns are theirs, not the body's; probe 59c)."""
  todo = [node]
  while todo:
    n = todo.pop()
    yield n
    if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
      todo.extend(ast.iter_child_nodes(n))


def _deep_return(stmts) -> bool:
  return any(isinstance(n, ast.Return) for st in stmts for n in own_nodes(st))


def loop_return(stmts) -> bool:
  """Whether `stmts` hold, at their level or in the branches of ifs, a `for` or `while` whose body
  returns (`if m > 0: for i in range(n): if x[i] > 0: return`): the return leaves that loop and the
  rest of the kernel, the code after the ifs too. A loop's else holding such a loop counts too (probe 59c:
  `for row in x: ... else: while ...: if c: return` was MG001)."""
  return any(isinstance(st, (ast.For, ast.While)) and (_deep_return(st.body) or loop_return(st.orelse))
             or isinstance(st, ast.If) and (loop_return(st.body) or loop_return(st.orelse)) for st in stmts)


def _unrolled(loop) -> bool:
  """Whether `loop` is one the tracer unrolls (ml.static_range, a static tuple, zip or enumerate of them),
  whose trips a run-time condition cannot end but may skip: not a `range`/`ml.range` loop or a while."""
  if isinstance(loop, ast.While):
    return False
  f = loop.iter.func if isinstance(loop.iter, ast.Call) else None
  name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
  return name not in ("range",)


def _returned(loop):
  """What leaves `loop` once a return set `done`: a break, or in an unrolled loop, whose trips run at
  trace time, a continue (each later trip then skips its body: see _return_breaks)."""
  return ast.Continue if _unrolled(loop) else ast.Break


def _return_breaks(stmts, done, loop, value=None):
  """The body `stmts` of `loop` whose returns become `done = True` (a helper's, `value` = what it
  returns, first) and a jump out of the loop, and whose inner loops holding one are followed by
  `if done:` that jump."""
  jump = _returned(loop)
  out = []
  for st in stmts:
    if isinstance(st, ast.Return):
      j = _at(jump(), st)
      j.from_return = True      # (for messages: the user wrote a return)
      out += ([_set(value, st.value or None, st)] if value is not None else []) + [_set(done, True, st), j]
    elif isinstance(st, ast.If) and _deep_return([st]):
      out.append(_at(ast.If(test=st.test, body=_return_breaks(st.body, done, loop, value) or [_at(ast.Pass(), st)],
                            orelse=_return_breaks(st.orelse, done, loop, value)), st))
    elif isinstance(st, (ast.For, ast.While)) and _deep_return([st]):
      inner = copy.copy(st)
      inner.body, inner.orelse = _guarded(st, done, value), _return_breaks(st.orelse, done, loop, value)   # (its else: this loop's)
      out += [inner, _at(ast.If(test=_at(ast.Name(id=done, ctx=ast.Load()), st), body=[_at(jump(), st)],
                                orelse=[]), st)]
    else:
      out.append(st)
  return out


def _guarded(loop, done, value=None):
  """`loop`'s body with its returns made jumps; an unrolled loop's trips after one skip their body."""
  body = _return_breaks(loop.body, done, loop, value)
  if not _unrolled(loop):
    return body
  skip = _at(ast.If(test=_at(ast.Name(id=done, ctx=ast.Load()), loop), body=[_at(ast.Continue(), loop)], orelse=[]),
             loop)
  return [skip] + body


def _fallback(body, params=()):
  """A helper's last return value where it can be computed before the first loop that returns (its
  names bound before it, parameters `params` too, or only there): what such a loop's flag starts from. Every path after the loop
  overwrites it (a return in the loop, or the last return), so it only gives the carry its type. None
  where it cannot be computed there."""
  last = body[-1] if body else None
  k = next((k for k, s in enumerate(body) if isinstance(s, (ast.For, ast.While, ast.If)) and _deep_return([s])), None)
  if not isinstance(last, ast.Return) or last.value is None or k is None:
    return None
  from .env import assigned_names
  reads = {n.id for n in ast.walk(last.value) if isinstance(n, ast.Name)}
  if reads & (set(assigned_names(body[k:-1])) - set(assigned_names(body[:k])) - set(params)) or any(isinstance(n, (ast.Call, ast.NamedExpr, ast.Lambda, ast.Await))
                                                    and not _pure_call(n) for n in ast.walk(last.value)):
    return None
  return last.value


def _pure_call(n) -> bool:
  """A call a fallback may make before the loop: ml.*/jnp-style maths of values, not a helper's (which
  may write refs) or a read of memory the loop may write."""
  return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
      and n.func.value.id in ("ml", "jnp", "np", "math")


def without_return(body, value=None, params=()):
  """A kernel's (`value` None) or an @ml.inline helper's body whose returns sit in if branches, with
  the rest of the body moved into the other path of each such if, as `continue` is in a loop: `if c:
  A; return` then `R` is `if c: A else: R`, which a run-time `if` traces as any other. A helper's
  `return v` becomes `value = v`, returned at the end (only where every path returns). The body itself
  where there is no such return (or a kernel returns a value, or a path of a helper falls off its end:
  their errors stay). `params`: a helper's parameters, bound before its body (probe 59c: a last return
  reading one the loop updates, `return v - 1.0` after `v = v + 1.0` in it, was MG001)."""
  fallback = _fallback(body, params) if value is not None else None
  if not any(isinstance(s, (ast.If, ast.For, ast.While)) and holds([s], (ast.Return,)) for s in body) and not (
      (value is None or fallback is not None) and loop_return(body)):
    return body
  returns = [n for s in body for n in own_nodes(s) if isinstance(n, ast.Return)]
  if value is None and any(r.value is not None for r in returns) or value is not None and not _ends_in_return(body):
    return body
  out = _structured(body, [], (ast.Return,), value, fallback)
  if out is None:
    return body
  if value is None:
    return out
  at = body[-1]
  return out + [_at(ast.Return(value=_at(ast.Name(id=value, ctx=ast.Load()), at)), at)]
