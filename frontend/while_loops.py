"""`while` loops on run-time conditions (an scf.while), and those on Python values, run while tracing (what every
loop shares, its carries and body, is frontend/flow.py's, with `for` loops; split from it in probe 58c)."""
from __future__ import annotations

import ast

from . import errors as E
from . import ir, jumps, small_carries
from .ops.padded_meets import Refill
from .assign import holds_value
from .loop_bounds import check_while_ends
from .carried import Force, carries_of, force_number_tuples
from .dtypes import DType
from .env import POISON, assigned_names, rebound_names
from .flow import _Attempt, _Widen, _after_loop, _args, _bind, _inits, _trace_body, _with_else, weak_results
from .ops import control as ctl, padded_meets as padded_tiles
from .ops.base import is_value, value_words
from .ref_conditions import check_named_ref
from .short_circuit import as_condition
from .stmt_hints import one_element_hint
from .types import ScalarType

def trace_while(tracer, node: ast.While):
  """`while cond:` on a runtime boolean scalar: an scf.while whose `before` block evaluates the
  condition on the carried values and whose body updates them."""
  loc = tracer.loc(node)
  check_named_ref(tracer, node.test, "while")           # `while flag_ref:` (a ref is not a condition)
  if node.orelse:
    _with_else(tracer, node, trace_while, "while")
    return
  from .with_scopes import opened
  node = jumps.without_continue(opened(tracer, node))
  made = jumps.while_with_break(node)
  if made is not None:
    return jumps.run(tracer, made)
  if _unrolled_while(tracer, node):
    return
  assigned = rebound_names(node.body, tracer.env)
  check_while_ends(tracer, node, assigned)
  forced: set = set()
  widened: dict = {}
  while True:
    attempt = _Attempt(tracer)
    try:
      carries, res = _trace_while_once(tracer, node, loc, assigned, forced, widened)
    except Force as f:     # (a tuple of numbers the condition reads, made run-time by the body: carried)
      attempt.undo(tracer)
      forced |= f.names
      continue
    except (_Widen, small_carries.Spread, Refill) as w:     # (a carry of another dtype, or spread: traced again)
      attempt.undo(tracer)
      widened.update({w.leaf: w.dtype} if isinstance(w, _Widen) else {("refill", w.leaf): (w.shape, w.own)}
                     if isinstance(w, Refill) else {})
      continue
    grow = attempt.changed(tracer, assigned, carries) - forced
    if not grow:
      break
    attempt.undo(tracer)
    forced |= grow
  _finish_while(tracer, node, loc, assigned, carries, res)


STATIC_WHILE_TRIPS = 256     # trips of a while on Python values run while tracing, at most


def _unrolled_while(tracer, node) -> bool:
  """`while rem > 0: ... rem //= 2` on Python values the body changes with Python arithmetic (a
  Pallas epilogue halving its tile): run while tracing, as Python runs it, when the condition is a
  Python value on every trip. False, with nothing traced, when it is or becomes a run-time value
  (`done = False; while not done: done = x[i] > 0` is a run-time loop)."""
  attempt = _Attempt(tracer)
  for trip in range(STATIC_WHILE_TRIPS + 1):
    probe = ir.Block()
    with tracer.b.region(probe):
      cond = tracer.eval(node.test)
    if probe.ops or is_value(cond) or holds_value(cond):
      if trip:
        attempt.undo(tracer)
      return False
    if not cond:
      return True
    names = sorted({n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
                   & set(assigned_names([*node.body, node.test])))    # (r := r // 2) binds in the test
    exits = any(isinstance(n, (ast.Break, ast.Return)) for s in node.body for n in ast.walk(s))
    if trip == STATIC_WHILE_TRIPS or not names and not exits:
      attempt.undo(tracer)
      why = (f"after {trip} trips, the most a loop on Python values may take (it runs while the kernel is"
             f" traced, unrolled)" if names or exits else
             "and nothing in the loop changes it: a loop on Python values runs while the kernel is traced,"
             " and this one does not end")
      raise E.KernelTypeError(
          f"this while condition is still the Python value {cond!r} {why}", tracer.loc(node.test),
          hint="loop a static number of times with for ... in range(n) (or ml.static_range); compare"
               " runtime values in the condition (while i < n with n read from memory)")
    errors = len(tracer.errors)
    if not tracer.run_unrolled(node.body, node.test) or len(tracer.errors) > errors:
      return True
  return True


def _trace_while_once(tracer, node, loc, assigned, forced, widened):
  env, b = tracer.env, tracer.b
  carries = carries_of(env, assigned, forced)
  leaf_names = [ln for c in carries for ln in c.leaf_names]
  inits = small_carries.flattened(tracer, _inits(tracer, carries, loc, widened), loc)
  before, where = dict(env), dict(tracer.where)
  cond_args = _args(tracer, carries, inits, leaf_names, widened)
  cond_blk = ir.Block(args=cond_args)
  _bind(env, carries, cond_args)
  with b.region(cond_blk):
    _bind(env, carries, small_carries.shaped(b, loc, inits, cond_args))
    cond = tracer.eval(as_condition(node.test))   # (a break's rewritten test too)
    if not is_value(cond):
      force_number_tuples(env, node, assigned, forced, before)
      raise E.KernelTypeError(
          f"this while condition is the Python value {cond!r} when the loop starts; a while loop needs"
          f" a runtime condition", tracer.loc(node.test),
          hint="loop a static number of times with for ... in range(n) (or ml.static_range); compare"
               " runtime values in the condition (while i < n with n read from memory)")
    cond = tracer.one_element_condition(node.test, cond)
    if not isinstance(cond.type, ScalarType) or cond.type.dtype != DType.bool_:
      from .branches import tensor_condition_hint
      written = getattr(node, "written_test", node.test)      # a while with a break: the user's condition
      raise E.KernelTypeError(
          f"a while condition must be a boolean scalar, got {value_words(cond)}", tracer.loc(node.test),
          hint=f"compare it: while {tracer.nonzero(written)}:" if isinstance(cond.type, ScalarType) else
          one_element_hint(tracer, written, cond, "while") or
          tensor_condition_hint(tracer.text(written), cond, "while"))
    with padded_tiles.carrying(b, inits):
      b.emit(ctl.Condition, cond, cond_args, loc=loc)
  args_ = _args(tracer, carries, inits, leaf_names, widened)
  body = ir.Block(args=args_)
  _bind(env, carries, args_)
  poisoned = _trace_body(tracer, node, loc, body, carries, inits, args_)
  return carries, (before, where, poisoned, inits, cond_blk, body, leaf_names)


def _finish_while(tracer, node, loc, assigned, carries, res):
  before, where, poisoned, inits, cond_blk, body, leaf_names = res
  env, b = tracer.env, tracer.b
  _after_loop(tracer, node, loc, assigned, carries, before, poisoned, where)
  with padded_tiles.carrying(b, inits):
    res = b.emit(ctl.While, inits, cond_blk, body, loc=loc, types=[v.type for v in inits], names=leaf_names)
  padded_tiles.carried(b, inits, res.results)
  weak_results(b, res.results)
  _bind(env, carries, small_carries.shaped(b, loc, inits, res.results))
  for n in poisoned:
    env[n] = POISON
