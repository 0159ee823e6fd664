"""What a name in a kernel can be bound to besides values, and which names statements bind."""
from __future__ import annotations

import ast
import contextlib


class Unbound:
  """A name that is not bound on every path to here (or is None on some: `message` and `hint`
  then replace the default ones)."""
  def __init__(self, why: str, message: str | None = None, hint: str | None = None):
    self.why = why
    self.message, self.hint = message, hint


class _Poison:
  """The value of a name whose defining statement failed (its error is already recorded).

  Reading it abandons the reading statement silently, so one mistake is reported
  once, not again at every later use.
  """
  def __repr__(self):
    return "<poisoned>"


POISON = _Poison()


class PoisonedUse(Exception):
  """A statement read a poisoned name: skip it without a new error."""


_MISSING = object()


@contextlib.contextmanager
def names_restored(env: dict, names):
  """For a block that binds `names` in `env` for a while (a comprehension's targets, the temporaries of a
  jnp call's form): afterwards each is bound as before, or unbound again (a poisoned name stays poisoned)."""
  saved = {n: env.get(n, _MISSING) for n in names}
  try:
    yield
  finally:
    for n, was in saved.items():
      if was is _MISSING:
        env.pop(n, None)
      else:
        env[n] = was


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


def local_names(stmts) -> set[str]:
  """The names a function body makes local, as Python does: those it assigns (not in nested
  functions or comprehensions, which have scopes of their own), less `global`/`nonlocal` ones."""
  out: set[str] = set()
  declared: set[str] = set()

  def visit(node):
    if isinstance(node, (ast.Global, ast.Nonlocal)):
      declared.update(node.names)
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
      out.add(node.id)
    for child in ast.iter_child_nodes(node):
      if not isinstance(child, _SCOPES):
        visit(child)
  for s in stmts:
    visit(s)
  return out - declared


def appended_list(stmt) -> str | None:
  """`hs` of a statement `hs.append(v)` or `hs.extend(vs)` (one argument), else None: a kernel's lists are
  values, so the statement binds hs to a new list, as `hs += [v]` does."""
  if isinstance(stmt, ast.Expr) and isinstance(call := stmt.value, ast.Call) and isinstance(call.func, ast.Attribute) \
      and call.func.attr in ("append", "extend") and isinstance(call.func.value, ast.Name) and len(call.args) == 1 \
      and not call.keywords and not isinstance(call.args[0], ast.Starred):
    return call.func.value.id
  return None


def assigned_names(stmts) -> list[str]:
  """Names bound by assignment anywhere in `stmts` (nested blocks included), in order."""
  out: list[str] = []

  def visit(node):
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in out:
      out.append(node.id)
    if (lst := appended_list(node)) is not None and lst not in out:
      out.append(lst)            # `hs.append(v)` rebinds hs, as `hs += [v]` does (frontend/tracer.py)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in out:
      out.append(node.name)      # `def sq(...)` binds sq (an error in a kernel: its uses are not others)
    for child in ast.iter_child_nodes(node):
      visit(child)

  for s in stmts:
    visit(s)
  return out


def rebound_names(stmts, env) -> list[str]:
  """assigned_names, and the lists and dicts `stmts` assign items of (`st[1] = st[1] + v`, which binds st to a new
  list: frontend/item_assign.py), for loops to carry and ifs to merge; `env` tells lists from refs (`out[i] = v` rebinds
  nothing)."""
  out = assigned_names(stmts)
  for s in stmts:
    for node in ast.walk(s):
      if isinstance(node, (ast.Assign, ast.AugAssign)):      # (st[1] += v too: probe 52b)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
          if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and isinstance(env.get(t.value.id), (list, dict)) \
              and t.value.id not in out:
            out.append(t.value.id)
  return out


def read_after(stmts, name: str, stmt) -> bool:
  """Whether a function body `stmts` reads `name` after `stmt`: further on in its text, or
  anywhere in a loop around `stmt` (the next trip reads it), except, for an `if` statement or a
  loop, reads in a branch of it (or its body) that assigns `name` before them (`s = ml.ds(...)`
  opening each branch)."""
  end = (stmt.end_lineno, stmt.end_col_offset)
  loops = [n for s in stmts for n in ast.walk(s)
           if isinstance(n, (ast.For, ast.While)) and n.lineno <= stmt.lineno <= n.end_lineno]
  fresh = _assigned_first(stmt, name) if loops and isinstance(stmt, (ast.If, ast.For, ast.While)) else set()
  fresh |= _loop_bound(stmts, name, stmt)
  for s in stmts:
    for n in ast.walk(s):
      if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in fresh and (
          (n.lineno, n.col_offset) >= end or any(l.lineno <= n.lineno <= l.end_lineno for l in loops)):
        return True
  return False


def _loop_bound(stmts, name: str, stmt) -> set[int]:
  """The reads of `name` that a `for` loop whose target binds it rebinds before they run again, whatever `stmt`
  left in it (probe 60c: an outer `for row in x1` and an inner run-time loop holding another `for row in x2`):
  those in the body of such a loop that does not hold `stmt` (every path from `stmt` enters it through its head),
  and those whose innermost loop around both them and `stmt` is one (its next trip rebinds the name first)."""
  def binds(loop):
    return isinstance(loop, ast.For) and any(
        isinstance(t, ast.Name) and t.id in (name, f"{name}'s row") for t in ast.walk(loop.target))

  def holds(loop, n):        # (by position: the tracer's statements may be rewritten copies of the user's)
    first, last = loop.body[0], loop.body[-1]
    return (first.lineno, first.col_offset) <= (n.lineno, n.col_offset) and \
        (n.end_lineno, n.end_col_offset) <= (last.end_lineno, last.end_col_offset)

  def same(a, b):
    return (a.lineno, a.col_offset, a.end_lineno, a.end_col_offset) == (b.lineno, b.col_offset, b.end_lineno,
                                                                        b.end_col_offset)

  loops = [n for s in stmts for n in ast.walk(s) if isinstance(n, (ast.For, ast.While))]
  out = set()
  for s in stmts:
    for n in ast.walk(s):
      if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
        continue
      around = [lp for lp in loops if holds(lp, n)]
      if any(binds(lp) and not holds(lp, stmt) for lp in around):
        out.add(id(n))
        continue
      both = [lp for lp in around if same(lp, stmt) or holds(lp, stmt)]
      inner = max(both, key=lambda lp: (lp.lineno, lp.col_offset), default=None)
      if inner is not None and binds(inner):
        out.add(id(n))
  return out


def _assigned_first(node, name: str) -> set[int]:
  """The reads of `name` in the branches of an `if` (the body of a loop) that a plain assignment of
  it earlier in the same branch (a statement of the branch itself) has rebound: they never see an
  earlier trip's value."""
  out: set[int] = set()
  for branch in ((node.body, node.orelse) if isinstance(node, ast.If) else (node.body,)):
    bound = False
    for s in branch:
      if bound:
        out.update(id(n) for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == name)
      elif isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None and not any(
          isinstance(n, ast.Name) and n.id == name for n in ast.walk(s.value)) and any(
          isinstance(t, ast.Name) and t.id == name for t in (s.targets if isinstance(s, ast.Assign) else [s.target])):
        bound = True
  return out


_ATOMICS = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min", "atomic_cas": "cas", "atomic_xchg": "exch"}


def atomic_targets(body) -> dict:
  """Name -> kind ("add", "max", "min") of the refs that atomics (ml.atomic_add(out.at[...], v),
  ml.copy(buf, out.at[...], reduce="add")) in statements not traced (a loop of no trips) update."""
  out = {}
  for n in (n for st in body for n in ast.walk(st) if isinstance(n, ast.Call)):
    f = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
    red = next((k.value.value for k in n.keywords if k.arg == "reduce" and isinstance(k.value, ast.Constant)), None)
    kind, target = (_ATOMICS.get(f), n.args[0] if n.args else None) if f in _ATOMICS else \
        (red, n.args[1] if len(n.args) > 1 else None) if f == "copy" else (None, None)
    while isinstance(target, (ast.Subscript, ast.Attribute)):      # out.at[ids, :] -> out
      target = target.value
    if kind in ("add", "max", "min", "cas", "exch") and isinstance(target, ast.Name):
      out[target.id] = kind
  return out
