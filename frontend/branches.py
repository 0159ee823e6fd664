"""A run-time `if`: both branches traced, each name rebound in either merged into an if-result
of one type (a Python number on one path takes the other path's dtype, as a loop carry does);
a name bound on one path only is unbound after it, so reading it there is an error at the read.
"""
from __future__ import annotations

import ast
import re

from . import errors as E
from . import ir
from .builder import Call
from .carried import (as_value, conversion, describe, initial_value, int_float_hint, is_carriable, is_weak, leaf_paths,
                      same_type, static_equal, structure, structure_shape, weak_dtype, widened_int_hint)
from .env import POISON, PoisonedUse, Unbound as _Unbound, read_after, rebound_names
from .ops import control as ctl
from .ops.base import Num, is_value
from .ops.memory import DSlice
from .types import RefType, TensorType, dtype_name, resolve


def static_if(tracer, node: ast.If, cond) -> None:
  """An if on a Python value: only the branch taken is traced. A branch skipped is remembered
  (where, the condition's text, its statements, the taken branch's), so an output it would have written that stays
  unwritten names the condition (MG602)."""
  taken, skipped = (node.body, node.orelse) if cond else (node.orelse, node.body)
  if skipped:
    tracer.__dict__.setdefault("static_skips", {}).setdefault(
        (node.lineno, node.col_offset), (tracer.loc(node), tracer.text(node.test), skipped, taken))
  tracer.run_body(taken)


def trace_if(tracer, node: ast.If, cond: ir.Value, bools_as_numbers: bool = False):
  """`bools_as_numbers`: a boolean scalar on one path meeting a number scalar on the other becomes that number
  (False is 0, True is 1: Python's value of `k or i < n`, an and/or's)."""
  loc, env, bld = tracer.loc(node), tracer.env, tracer.b
  before, where = dict(env), dict(tracer.where)
  branches = []
  tracer.ifs.append(node)
  try:
    for stmts in (node.body, node.orelse):
      tracer.env, tracer.where = dict(before), dict(where)
      blk = ir.Block()
      with bld.region(blk):
        tracer.run_body(stmts)
      branches.append((blk, tracer.env, tracer.where))
  finally:
    tracer.ifs.pop()
  tracer.env, tracer.where = env, where
  (then_blk, then_env, then_where), (else_blk, else_env, else_where) = branches
  names = rebound_names(node.body + node.orelse, before)
  dels = _deleted(tracer, node, before)         # `if c: del v`: v is unbound after the if on that path (probe 53b)
  names += [n for n in dels if n not in names]
  paths = _Paths(tracer, loc, before, where, (then_env, else_env), (then_where, else_where))
  results = []
  for n in names:
    a, b = then_env.get(n), else_env.get(n)
    if a is POISON or b is POISON:  # an error in a branch is already reported
      env[n] = POISON
      continue
    if n in dels and (isinstance(a, _Unbound) or isinstance(b, _Unbound)):
      env[n] = a if isinstance(a, _Unbound) and isinstance(b, _Unbound) else _Unbound(
          f"it is deleted on one path through the if at line {loc.lineno}",
          message=f"{n} is read after the run-time if at line {loc.lineno}, whose {'else' if dels[n][0] else 'body'}"
                  f" deletes it (`del {n}`, line {dels[n][1]}): on that path it has no value",
          hint=f"read {n} before the if, or del it on both paths (or after the if)")
      continue
    if a is b and a is not None:
      env[n] = a
      where[n] = then_where.get(n, loc)
      continue
    none = [v for v, e in ((a, then_env), (b, else_env)) if v is None and n in e]
    other = b if a is None else a
    if len(none) == 1 and is_carriable(other):
      # `acc = None` before the if and a register value or number on the other path: the name
      # can be neither after it.
      env[n] = _Unbound(
          f"it is None on one path through the if at line {loc.lineno}",
          message=f"{n} is None on one path through the if at line {loc.lineno} and {describe(other)}"
                  f" on the other; after a runtime if it must be a register value or a number on both",
          hint=f"start it as {initial_value(n, other)} before the if")
      continue
    if a is None or b is None or isinstance(a, _Unbound) or isinstance(b, _Unbound):
      loop = getattr(node, "loop_else", None)          # the if that runs a loop's else (frontend/jumps.py)
      env[n] = _Unbound(f"it is assigned in only one branch of the if at line {loc.lineno}" if loop is None else
                        f"it is assigned only in the else of the loop at line {tracer.loc(loop).lineno}, which a"
                        f" break skips")
      continue
    if static_equal(a, b):
      env[n] = a
      continue
    sa, sb = structure(a), structure(b)
    if sa is None or sb is None or structure_shape(a) != structure_shape(b):
      if not read_after(tracer.body, n, node):
        # a window, ref or other static value each branch binds for its own use only (`s = ml.ds(...)`
        # in each branch of a multi-tensor update): nothing reads it after the if, as Python allows
        env[n] = _Unbound(f"it is a different kind of value on each path through the if at line {loc.lineno}")
        continue
      k, at, notes = paths.culprit(n)
      if isinstance(getattr(a, "type", None), RefType) and isinstance(getattr(b, "type", None), RefType):
        ra, rb = (_written(tracer, stmts, n, r) for stmts, r in ((node.body, a), (node.orelse, b)))
        raise E.KernelTypeError(
            f"{n} is a different ref on each path through the if at line {loc.lineno}; a ref cannot be"
            f" chosen at run time", at, notes=notes,
            hint=f"read or write inside each branch instead (v = {ra}[...] in one, v = {rb}[...] in the"
                 f" other), index one ref with a run-time index (ref.at[ml.ds(i * n, n)]), or choose with"
                 f" an ml.constexpr (an if on it is static)")
      if callable(a) and callable(b):        # (a lambda, def or helper in each branch): an error where it is read
        env[n] = _Unbound(
            f"it is a different function on each path through the if at line {loc.lineno}",
            message=f"{n} is a different function on each path through the run-time if at line {loc.lineno}; a"
                    f" function cannot be chosen at run time",
            hint=f"call {n} inside each branch (r = {n}(v) in both), or call both after the if and select the"
                 f" values: ml.where(cond, f(v), g(v))")
        continue
      if k is None and isinstance(a, DSlice) and isinstance(b, DSlice) and a.size == b.size:
        raise E.KernelTypeError(
            f"{n} is a different window ml.ds(start, {a.size}) on each path through this if, and is read after it;"
            f" a window is made while compiling, so it cannot be chosen at run time", at, notes=notes,
            hint=f"choose its start in each branch ({n}_start = ... in both) and make the window after the if:"
                 f" {n} = ml.ds({n}_start, {a.size})")
      if k is None:
        raise E.KernelTypeError(
            f"{n} is {describe(a)} after one branch of this if and {describe(b)} after the other;"
            f" only register values and numbers (or tuples and lists of them) can differ between branches",
            at, hint=f"give {n} the same kind of value in both branches", notes=notes)
      here, there = (a, b) if k == 0 else (b, a)
      if describe(here) == describe(there):      # two dicts (or other static containers) that differ
        raise E.KernelTypeError(
            f"{n} is {describe(here)} on both paths through the if at line {loc.lineno}, rebound here to another"
            f" one; only register values and numbers (or tuples and lists of them) can differ between branches",
            at, notes=notes, hint=f"give the value that differs a name of its own (v = ... before the if and in"
                                  f" the branch) and build {n} after the if; or make {n} a tuple")
      raise E.KernelTypeError(
          f"{n} is {describe(here)} after this assignment but {describe(there)} on the other path through"
          f" the if at line {loc.lineno}; only register values and numbers (or tuples and lists of them) can"
          f" differ between branches", at, hint=f"give {n} the same kind of value on both paths", notes=notes)
    results.append((n, sa, sb))
    where[n] = loc
  then_vals, else_vals, leaf_names = [], [], []
  for n, (la, rebuild), (lb, _) in results:
    names = [n + p for p in leaf_paths(then_env.get(n))]
    for ln, a, b_ in zip(names, la, lb):
      with bld.region(then_blk):
        x = as_value(tracer, a, then_where.get(n, loc), dtype=weak_dtype(a, b_))
      with bld.region(else_blk):
        y = as_value(tracer, b_, else_where.get(n, loc), dtype=weak_dtype(b_, a))
      for num, made in ((a, x), (b_, y)):
        if is_weak(num) and not (isinstance(num, int) and num >= 2 ** 31):
          bld.weak.add(made.id)     # a Python number: weakly typed, so one on both paths stays weak (as lax.cond's)
      x, y = _weak_path(tracer, then_blk, x, y, loc), _weak_path(tracer, else_blk, y, x, loc)
      if bools_as_numbers:
        x, y = _bool_as_number(tracer, then_blk, x, y, loc), _bool_as_number(tracer, else_blk, y, x, loc)
      if not same_type(x, y, loc) and tracer.carried.get(ln) is None and not n.startswith(LAX_TEMP):
        # (not lax.cond's or lax.switch's result, which JAX refuses unless the branches' types are the same)
        x, y = _joined(tracer, then_blk, x, y, loc), _joined(tracer, else_blk, y, x, loc)
      if not same_type(x, y, loc):
        paths.mismatch(n, ln, (a, b_), (x, y))
      then_vals.append(x)
      else_vals.append(y)
      leaf_names.append(ln)
  with bld.region(then_blk):
    bld.emit(ctl.Yield, tuple(then_vals), loc=loc)
  with bld.region(else_blk):
    bld.emit(ctl.Yield, tuple(else_vals), loc=loc)
  res = bld.emit(ctl.If, cond, then_blk, else_blk, loc=loc,
                types=[v.type for v in then_vals], names=leaf_names)
  for r, x, y in zip(res.results, then_vals, else_vals):
    if x.id in bld.weak and y.id in bld.weak:     # a weak carry both paths leave weak stays so
      bld.weak.add(r.id)
  i = 0
  for n, (la, rebuild), _ in results:
    env[n] = rebuild(list(res.results[i:i + len(la)]))
    i += len(la)


def _deleted(tracer, node: ast.If, before) -> dict:
  """The names bound before the if that a `del` of its branches unbinds: name -> (whether in the else, line)."""
  out = {}
  for k, stmts in enumerate((node.body, node.orelse)):
    for s in stmts:
      for d in ast.walk(s):
        if isinstance(d, ast.Delete):
          for t in d.targets:
            if isinstance(t, ast.Name) and t.id in before and t.id not in out:
              out[t.id] = (k == 1, tracer.loc(d).lineno)
  return out


def _written(tracer, stmts, n, ref) -> str:
  """The expression a branch last assigns to `n` as the user wrote it (x.at[ml.ds(0, 128)]); `n`
  itself in a branch that leaves it as it was."""
  last = None
  for st in stmts:
    for a in ast.walk(st):
      if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id == n for t in a.targets):
        if last is None or (a.lineno, a.col_offset) > (last.lineno, last.col_offset):
          last = a
  if last is not None:
    return tracer.text(last.value)
  return ref.name if ref.name and ref.name.isidentifier() and ref.name != n else n   # as before the if


def _weak_path(tracer, blk, v, other, loc):
  """`v`, made on one path through an if, converted to `other`'s dtype where it stands for a Python
  number a loop carries (weakly typed, see _Widen)."""
  from .ops.elementwise import weak_to
  with tracer.b.region(blk):
    return weak_to(Call(tracer.b, loc), v, other)


def _bool_as_number(tracer, blk, v, other, loc):
  """`v`, a boolean scalar made on one path through an if, as a number of `other`'s dtype where that is a number
  scalar (Python's bool is an int: False is 0)."""
  from .ops.elementwise import astype
  from .short_circuit import is_bool_scalar, is_number_scalar
  if not (is_bool_scalar(v) and is_number_scalar(other)):
    return v
  with tracer.b.region(blk):
    return astype(Call(tracer.b, loc), v, resolve(other.type.dtype))


LAX_TEMP = "_lax"       # lax_flow's temporaries (`_lax3_r`): the results of lax.cond and lax.switch


def _join_dtype(da, db):
  """The dtype a name of dtypes `da` and `db` on an if's two paths holds after it, as jnp.where(c, a, b) promotes
  (probe 60c: it was MG003): jnp's result where it is one of the two and holds the other's values (a bool as 0 and
  1, a narrower integer of a wider one, a float of a wider float, an integer of float32, jnp's rounding past 2**24
  included, and an 8-bit one of a 16-bit float); None for the others (int32 with uint32, int32 with float16, a
  float8), whose MG003 stands."""
  from .dtypes import DType
  from .ops.promotion import jnp_result
  if not isinstance(da, DType) or not isinstance(db, DType) or da == db:
    return None
  r = jnp_result(da, db)
  if r not in (da, db) or DType.f8e4m3 in (da, db) or DType.f8e5m2 in (da, db):
    return None
  low = db if r == da else da
  if low == DType.bool_ or (low.is_int and r.is_int) or (low.is_float and r.is_float):
    return r
  return r if low.is_int and r.is_float and low.bits <= (32 if r.bits == 32 else 8) else None


def _joined(tracer, blk, v, other, loc):
  """`v`, one path's value of a name an if's paths give two dtypes (and one shape), converted in its path's block
  to the dtype they join in (_join_dtype), where that is not v's own; `v` itself otherwise."""
  from .ops.elementwise import astype
  tv, to = getattr(v, "type", None), getattr(other, "type", None)
  if not is_value(v) or not is_value(other) or isinstance(tv, RefType) or isinstance(to, RefType) or \
      getattr(tv, "shape", None) != getattr(to, "shape", None) or type(tv) is not type(to):
    return v
  d = _join_dtype(resolve(tv.dtype), resolve(to.dtype))
  if d is None or d == resolve(tv.dtype):
    return v
  with tracer.b.region(blk):
    return astype(Call(tracer.b, loc), v, d)


class _Paths:
  """The two paths through a runtime if, for reporting a name they leave different at the
  assignment that made it so."""

  def __init__(self, tracer, loc, before, where, envs, wheres):
    self.tracer, self.loc, self.before, self.where = tracer, loc, before, where
    self.envs, self.wheres = envs, wheres

  def rebinds(self, k, n) -> bool:
    return self.envs[k].get(n) is not self.before.get(n)

  def culprit(self, n, fits=None):
    """(branch, Loc, notes) of the assignment that makes `n` differ: the one branch that rebinds
    it, else the branch `fits` does not accept; (None, the if's Loc, both assignments) if neither
    stands out."""
    at = [self.wheres[k].get(n) if self.rebinds(k, n) else None for k in (0, 1)]
    k = None
    if at[0] is not None and at[1] is None:
      k = 0
    elif at[1] is not None and at[0] is None:
      k = 1
    elif fits is not None and fits[0] != fits[1]:
      k = 1 if fits[0] else 0
    if k is not None and at[k] is not None:
      return k, at[k], (f"{self.loc}: the if whose paths give {n} different types",)
    return None, self.loc, tuple(f"{a}: {n} is assigned here" for a in at if a is not None)

  def mismatch(self, n, ln, raw, vals):
    """Raise the error for leaf `ln` of `n` whose two paths give values `vals` of different types:
    a loop carry changed by one branch is MG005 at that branch's assignment."""
    carried = self.tracer.carried.get(ln)
    fits = None
    if carried is not None:
      fits = [same_type(carried[0], v, self.loc) for v in vals]
    elif ln in self.before and is_value(self.before[ln]):
      fits = [same_type(self.before[ln], v, self.loc) for v in vals]
    k, at, notes = self.culprit(n, fits)
    value = next((e.get(n) for e in (self.before, *self.envs) if type(e.get(n)) in (tuple, list)), None)
    if k is not None and carried is not None and fits[1 - k]:
      init, loop, start, value, first, _ = carried
      bad = vals[k]
      before = " before the loop" + ("" if first is loop else f" at line {first.lineno}")
      hint = (int_float_hint(n, value, ln, init, bad, None, start, before) or
              widened_int_hint(n, value, ln, init, bad, before) or
              f"convert it back after this assignment: {ln} = "
              + conversion(init.type.dtype, raw[k] if isinstance(raw[k], Num) else None).format(ln)
              if init.type.shape == bad.type.shape else f"keep {ln}'s shape fixed across iterations")
      raise E.LoopCarryTypeError(
          f"{ln} enters the loop as {describe(init)} but an iteration makes it {describe(bad)}", at,
          hint=hint, notes=(f"{loop}: the loop that carries {n}",) + notes)
    x, y = vals
    if k is None:
      i = 0 if int_float_hint(n, value, ln, x, y, raw[0]) else 1
      hint = (int_float_hint(n, value, ln, vals[i], vals[1 - i], raw[i], where=" in its branch")
              or "make both branches produce the same shape and dtype")
      num = next((j for j in (0, 1) if isinstance(raw[j], Num) and isinstance(vals[1 - j].type, TensorType)), None)
      if num is not None and ln == n:      # v = x[...] in one branch, v = 0.0 in the other
        t = vals[1 - num].type
        hint = f"make it a tensor in its branch: {n} = ml.full({t.shape}, {raw[num]!r}, jnp.{dtype_name(t.dtype)})"
      raise E.KernelTypeError(f"{ln} is {describe(x)} after one branch of this if and {describe(y)} after the other",
                              at, hint=hint, notes=notes)
    here, there = vals[k], vals[1 - k]
    hint = "make both paths produce the same shape and dtype"
    other = " on the other path" if self.rebinds(1 - k, n) else " before the if"
    fix = (int_float_hint(n, value, ln, there, here, raw[1 - k], where=other)
           or int_float_hint(n, value, ln, here, there, raw[k], where=" here"))
    if fix is not None:
      hint = fix
    elif here.type.shape == there.type.shape:
      hint = (f"convert it after this assignment: {ln} = "
              + conversion(there.type.dtype, raw[k] if isinstance(raw[k], Num) else None).format(ln))
    elif (isinstance(here.type, TensorType) and isinstance(raw[1 - k], Num) and ln == n
          and not self.rebinds(1 - k, n)):
      hint = (f"start {n} as a tensor before the if: {n} = ml.full({here.type.shape}, {raw[1 - k]!r},"
              f" jnp.{dtype_name(here.type.dtype)})")
    elif isinstance(there.type, TensorType) and isinstance(raw[k], Num) and ln == n:
      hint = f"make it a tensor here: {n} = ml.full({there.type.shape}, {raw[k]!r}, jnp.{dtype_name(there.type.dtype)})"
    raise E.KernelTypeError(
        f"{ln} is {describe(here)} after this assignment but {describe(there)} on the other path through the if at"
        f" line {self.loc.lineno}", at, hint=hint, notes=notes)


def ifexp_hint(tracer, node: ast.IfExp, test: str, scalar: bool = True) -> str:
  """The hint for `a if c else b` on a run-time `c` that if_expression does not trace: ml.where(c, a, b) for
  values; an if statement where a branch is a ref (which cannot be chosen at run time), or, for a scalar `c`
  (`scalar`; a tensor's elements choose with ml.where only), a tuple or a read (ml.where computes both sides,
  so a read the condition guards would still run)."""
  a, b = tracer.text(node.body), tracer.text(node.orelse)
  st = tracer.stmt
  target = st.targets[0] if isinstance(st, ast.Assign) and st.value is node else None
  name = ("v" if target is None else ", ".join(tracer.text(t) for t in target.elts)
          if isinstance(target, ast.Tuple) else tracer.text(target))
  sides = (node.body, node.orelse)
  if any(_names_ref(tracer, e) for e in sides):
    ra, rb = (f"{t}[...]" if _names_ref(tracer, e) else t for t, e in ((a, node.body), (b, node.orelse)))
    return (f"a ref cannot be chosen at run time: read (or write) it in each branch of an if statement,"
            f" if {test}: {name} = {ra}, and else: {name} = {rb}")
  if scalar and any(isinstance(e, (ast.Tuple, ast.List)) for e in sides):
    return f"use an if statement that assigns in both branches: if {test}: {name} = {a}, and else: {name} = {b}"
  if scalar and any(isinstance(n, ast.Subscript) for e in sides for n in ast.walk(e)):
    return (f"use an if statement, which reads only on the path taken: if {test}: {name} = {a}, and else:"
            f" {name} = {b} (ml.where({test}, {a}, {b}) would read on both paths)")
  if not scalar:        # (ml.where of Python numbers is weakly typed: x_bf16 * it stays bfloat16, as jnp's)
    if all(isinstance(e, (ast.Tuple, ast.List)) and len(e.elts) == len(node.body.elts) for e in sides):
      picks = ", ".join(f"ml.where({test}, {tracer.text(p)}, {tracer.text(q)})"
                        for p, q in zip(node.body.elts, node.orelse.elts))
      return f"a tensor condition chooses per element: select each item, ({picks})"
    return f"a tensor condition chooses per element: use ml.where({test}, {a}, {b})"
  return f"use ml.where({test}, {a}, {b}), or an if statement that assigns a name in both branches"


def _names_ref(tracer, e) -> bool:
  """Whether the expression `e` is a ref: a name bound to one, or a view (x.at[...])."""
  if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "at":
    return True
  v = tracer.env.get(e.id) if isinstance(e, ast.Name) else None
  return isinstance(getattr(v, "type", None), RefType)


def tensor_condition_hint(text: str, cond, word: str) -> str:
  """The hint for a register tensor as an `if`/`while` condition (`text`: as written): reduce it to one
  truth value, `if ml.any(v > 0):` or `ml.all`, or choose per element with ml.where."""
  from .dtypes import DType
  from .types import resolve
  t = text if resolve(cond.type.dtype) == DType.bool_ else f"{text} != 0"
  t = t if resolve(cond.type.dtype) == DType.bool_ or text.isidentifier() else f"({text}) != 0"
  return (f"a tensor holds one truth value per element: to branch on whether any (every) element holds, reduce it,"
          f" {word} ml.any({t}): (or ml.all({t})); to choose per element, select with"
          f" ml.where({t}, a, b) instead of branching")


_IFEXP = "the conditional expression"     # the hidden name a run-time `a if c else b` binds (see if_expression)


def if_expression(tracer, node: ast.IfExp, cond: ir.Value, name: str = _IFEXP, bound=None, bools_as_numbers=False):
  """`a if c else b` on a run-time boolean scalar `c`: the if statement `if c: t = a`, `else: t = b` traced as
  trace_if traces one (each branch computed only on its path, so `x[i] if i < n else 0.0` reads x[i] only where
  i < n; the two sides merged into one if-result as an if statement's names are, tuples of them too). Returns
  t, or None where the expression cannot be one (a walrus or lambda in a branch, whose binding would outlive
  it): the caller reports it. `name`: the value's name in messages (`a or b`'s); `bound`: hidden names the sides
  read (an operand already computed); `bools_as_numbers`: a boolean side meeting a number is that number (an
  and/or's, whose Python value `k or i < n` is an int)."""
  from .short_circuit import _simple
  if not _simple([node.body, node.orelse]) or any(_names_ref(tracer, e) for e in (node.body, node.orelse)):
    return None           # (a ref cannot be chosen at run time: ifexp_hint reads it in each branch)
  target = lambda: ast.copy_location(ast.Name(name, ast.Store()), node)   # noqa: E731
  stmt = ast.copy_location(ast.If(node.test, [ast.copy_location(ast.Assign([target()], node.body), node.body)],
                                  [ast.copy_location(ast.Assign([target()], node.orelse), node.orelse)]), node)
  for s in (stmt, *stmt.body, *stmt.orelse):
    s.end_lineno, s.end_col_offset = node.end_lineno, node.end_col_offset
  saved, st = tracer.env.get(name), getattr(tracer, "stmt", None)
  tracer.env.update(bound or {})
  try:
    trace_if(tracer, stmt, cond, bools_as_numbers)
  except E.KernelError as err:
    _ifexp_words(err, tracer, node, name)
    raise
  finally:
    tracer.stmt = st
  v = tracer.env.pop(name, None)
  for k in bound or ():
    tracer.env.pop(k, None)
  if saved is not None:
    tracer.env[name] = saved
  if v is POISON:
    raise PoisonedUse(name)           # a branch's error is already recorded
  if isinstance(v, _Unbound):        # None on one side (`x[...] if c else None`), or a ref, window or function
    message = re.sub(r" on (one|each) path through the (run-time )?if at line \d+", r" on \1 side",
                     v.message or f"{name} {v.why.removeprefix('it ')}").replace("after a runtime if", "after a run-time condition")
    none = "None on one" in v.why
    raise E.KernelTypeError(message, tracer.loc(node), hint=(
        "give the None side a value of the other's kind (0.0, or ml.zeros(shape, dtype) for a tensor)" if none else
        "give both sides the same kind of value (a register value or a number): a function, ref or window cannot be"
        " chosen at run time, so use it in each side (ml.exp(v) if c else ml.log(v))"))
  return v


def _ifexp_words(err, tracer, node: ast.IfExp, name: str) -> None:
  """A mismatch trace_if found between the sides of `a if c else b`, told of the expression's sides rather
  than of the if statement and the name it is traced as (an integer side to convert: the expression rewritten)."""
  if (m := re.search(re.escape(name) + r"\.astype\(jnp\.(\w+)\)", err.hint or "")) is not None:
    sides = [tracer.text(e) if isinstance(e, (ast.Name, ast.Call, ast.Subscript, ast.Attribute, ast.Constant))
             else f"({tracer.text(e)})" for e in (node.body, node.orelse)]
    floats = [isinstance(e, ast.Constant) and isinstance(e.value, float) for e in (node.body, node.orelse)]
    if floats.count(True) == 1:
      k = floats.index(False)
      sides[k] += f".astype(jnp.{m.group(1)})"
      err.hint = f"convert the integer side to a float: {sides[0]} if {tracer.text(node.test)} else {sides[1]}"
    else:
      err.hint = f"convert the integer side to a float: .astype(jnp.{m.group(1)}) on it"

  def words(t):
    for a, b in ((f"in its branch: {name} = ", "on its side: "), (f"give {name} the same kind of value in both"
                 " branches", "give both sides the same kind of value"), ("both branches", "both sides"),
                 ("after one branch of this if and", "on one side and"), ("after the other", "on the other"),
                 ("after this assignment but", "on this side but"), (f"{name} = ", "")):
      t = t.replace(a, b)
    return re.sub(r"on the other path through the if at line \d+", "on the other side", t)
  if name not in err.message + (err.hint or "") + "".join(err.notes):
    return
  err.message, err.hint = words(err.message), err.hint and words(err.hint)
  err.args = (err.message,)
  err.notes = tuple(n.replace(f"{name} is assigned here", f"a side of {name}")
                    for n in err.notes)
