"""Structured control flow: `for` loops and what every loop shares (its carries, its body, what it leaves bound);
`while` loops are frontend/while_loops.py's, a run-time `if` frontend/branches.py's.

A name rebound inside a loop or branch becomes a loop-carried value or an
if-result; its type may not change. A name bound on only some paths is marked
unbound, so reading it later is an error at that read.
"""
from __future__ import annotations

import ast
import copy
import math

from . import errors as E
from . import contraction, ir, jumps, small_carries, static_tables
from .ops.padded_meets import Refill, refill, refill_for
from .assign import DICT_VIEWS
from .loop_bounds import check_static_bounds, check_wrapped_range, may_load
from .builder import Call
from .carried import (as_value, carries_of, carry_slices, conversion, describe, int_float_hint, is_carriable, is_weak,
                      list_change_hint, none_start_hint, rebuilt, same_type, start_kind, static_equal, structure,
                      structure_shape, widened_int_hint)
from .count_down import descending, over_rows, rebound_index, reversed_range, rewritten_iter
from .dtypes import DType
from .env import POISON, PoisonedUse, Unbound as _Unbound, assigned_names, atomic_targets, read_after, rebound_names
from .auto_unroll import retried_unrolled, unrollable
from .ops import control as ctl, elementwise as ew, padded_meets as padded_tiles
from .ops.base import Num, is_value
from .ops.elementwise import astype
from .ops.elementwise_checks import method_on
from .ops.index_operands import index_operand
from .types import RefType, ScalarType, TensorType, dtype_name, resolve


class _Attempt:
  """A loop traced once more: what tracing its body added to the builder and tracer, undone. A
  tuple of numbers the body changes (st = (st[0] + 1, 0), st = (j, 1)) is known only after tracing
  it; the loop is then traced again with that tuple carried. One rebound to the same static value
  (shape = (64,), shp = v.shape) stays static."""

  def __init__(self, tracer):
    b = tracer.b
    self.ops, self.allocs, self.slots = len(b.block.ops), len(b.allocs), b.num_load_slots
    self.errors, self.env, self.where = len(tracer.errors), dict(tracer.env), dict(tracer.where)

  def changed(self, tracer, assigned, carries) -> set:
    carried = {c.name for c in carries}
    out = set()
    for n in assigned:
      old, new = self.env.get(n), tracer.env.get(n)
      if (n in carried or old is None or new is POISON or (type(old) not in (tuple, list, dict)
                                                           and not hasattr(old, "carry_leaves"))
          or structure(old) is None or any(is_value(l) for l in structure(old)[0])):
        continue
      if not static_equal(old, new) and structure(new) is not None \
          and structure_shape(new) == structure_shape(old):
        out.add(n)
    return out

  def undo(self, tracer):
    b = tracer.b
    del b.block.ops[self.ops:]
    del b.allocs[self.allocs:]
    b.num_load_slots = self.slots
    del tracer.errors[self.errors:]
    tracer.env.clear()
    tracer.env.update(self.env)
    tracer.where = dict(self.where)


def _small_int_bound(tracer, cut) -> bool:
  """Whether the cut trip count of jumps.pipelined_break (its header's stop) is an int or a signed integer scalar of
  32 bits or fewer (or a narrower unsigned one), which a pipelined loop counts in: evaluated once, then undone.
  Otherwise (a float or uint32 bound, or one whose evaluation fails) the break keeps its MG001, which quotes the
  user's own text rather than the cut's."""
  attempt = _Attempt(tracer)
  try:
    stop = tracer.eval(cut.iter.args[0 if len(cut.iter.args) == 1 else 1])
  except (E.KernelError, PoisonedUse):      # (a name an earlier error poisoned: the loop as written reports it)
    stop = None
  ok = (type(stop) is int or is_value(stop) and isinstance(stop.type, ScalarType)
        and resolve(stop.type.dtype) in (DType.i32, DType.i16, DType.i8, DType.u16, DType.u8))
  attempt.undo(tracer)
  return ok


def weak_results(b, results) -> None:
  """A loop's results weakly typed where jnp's are: the carry entered as a weak value (a Python number, `acc = 0.0`)
  and each trip leaves it weak (`acc * 0.5 + 1`), as JAX's loops keep a weak carry's weak type (probe 65a; they
  were strong: `acc + x_f16` after the loop was float32)."""
  for r, weak in zip(results, getattr(b, "weak_yields", ())):
    if weak:
      b.weak.add(r.id)
  b.weak_yields = ()


def _bind(env, carries, values) -> None:
  """Bind each carried name to its slice of `values` (rebuilt into its tuple or list)."""
  i = 0
  for c in carries:
    env[c.name] = c.rebuild(list(values[i:i + len(c.leaves)]))
    i += len(c.leaves)


def trace_for(tracer, node: ast.For):
  loc = tracer.loc(node)
  if node.orelse:
    _with_else(tracer, node, trace_for, "for")
    return
  if (alt := rewritten_iter(tracer, node)) is not None:   # (A if c else B), range(n)[::-1]: an if of loops, reversed
    return tracer.visit(alt)
  from .with_scopes import opened
  written, node = node, jumps.without_continue(opened(tracer, node))    # (a break under a named scope's with)
  it = node.iter
  fn = tracer.eval(it.func) if isinstance(it, ast.Call) else None
  if fn is reversed and (down := reversed_range(tracer, node, it)) is not None:
    return trace_for(tracer, down)      # reversed(range(a, n)) of a run-time n: range(n - 1, a - 1, -1)
  if fn not in (range, ctl.static_range, ctl.range):
    check_wrapped_range(tracer, node, it, fn)
    if (rows := over_rows(tracer, node)) is not None:
      return trace_for(tracer, rows)      # for row in x: of a ref, over its first axis at run time
    seq = tracer.eval(it)             # a static sequence (a tuple, a list, enumerate/zip of them): unrolled
    if (hasattr(seq, "__next__") or isinstance(seq, (range, dict, *DICT_VIEWS))) and not is_value(seq):
      seq = tuple(seq)                # (r = ml.static_range(4) then for i in r: a Python range; d.items())
    seq = static_tables.numbers(seq)      # for c in jnp.array([...]): its numbers, typed as jnp's elements
    if isinstance(seq, (tuple, list)) and isinstance(node.target, (ast.Name, ast.Tuple, ast.List)):
      def bind(v):
        tracer.stmt = node
        tracer.assign(node.target, v, it)
      return jumps.run_unrolled_trips(tracer, node, seq, bind)
    if is_value(seq) and isinstance(seq.type, TensorType) and seq.type.shape:
      v, n = tracer.text(it), node.target.id if isinstance(node.target, ast.Name) else "row"
      tracer.unsupported(it, "iterating over a register tensor",
                         hint=f"loop over its rows by index, for r in ml.static_range({v}.shape[0]): {n} = {v}[r]"
                              f" (or iterate the ref it was read from, for {n} in ref:, each row a ref to read with"
                              f" {n}[...]); whole-tensor math (ml.sum({v}, axis=0)) needs no loop")
  if not isinstance(node.target, ast.Name):
    tracer.unsupported(node.target, "unpacking in a for target",
                       hint="loop over one index: for i in range(n); unpacking works over a static tuple or"
                            " list (for i, c in enumerate((1.0, 2.0)))")
  if fn not in (range, ctl.static_range, ctl.range):
    tracer.unsupported(it, "iterating over anything but range(...), ml.range(...), ml.static_range(...)"
                       " or a static tuple or list",
                       hint="loop over indices: for i in range(n), or unroll with ml.static_range(n)")
  if it.keywords and fn is not ctl.range:
    called = "ml.static_range" if fn is ctl.static_range else "range"
    pipeline = any(k.arg in ("stages", "warp_specialize", "pingpong", "num_stages") for k in it.keywords)
    tracer.unsupported(it, f"keywords in {called}(...)",
                       hint="only ml.range takes stages= (and warp_specialize=, pingpong=): for t in"
                            " ml.range(n, stages=2) pipelines the loop's loads; ml.static_range unrolls" if pipeline
                            else f"{called} takes its bounds by position: {called}(start, stop, step)")
  plain = None if may_load(tracer, node.body) else \
      f"for {node.target.id} in {tracer.text(ast.Call(func=it.func, args=it.args, keywords=[]))}"
  stages, specialize, pingpong = ctl.range_options(it.keywords, tracer.eval, tracer.loc, tracer.loc(it), plain)
  if (stages > 1 or specialize or pingpong) and node is not written and (
      hoisted := jumps.pipelined_continue(tracer, written)) is not None:
    return trace_for(tracer, hoisted)       # its loads moved up before the continue
  if (stages > 1 or specialize or pingpong) and (cut := jumps.pipelined_break(tracer, node)) is not None \
      and _small_int_bound(tracer, cut):
    return trace_for(tracer, cut)           # `if k >= n: break` first: the trip count cut at n
  args = tracer.eval_spread(it.args)
  if not 1 <= len(args) <= 3:
    raise E.KernelTypeError(f"range takes 1 to 3 arguments, got {len(args)}", tracer.loc(it),
                            hint="range(stop), range(start, stop) or range(start, stop, step)")
  start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
  name = node.target.id
  from .auto_unroll import unrolled     # tiles[j], outs.append(v) in a range(4) of static bounds: as Python runs it
  fn = unrolled(tracer, node, fn, (start, stop, step), id(written) in getattr(tracer, "unroll_loops", ()))
  if fn is not ctl.static_range and (kept := rebound_index(node, tracer.env.get(name))) is not None:
    return trace_for(tracer, kept)      # the body rebinds the loop variable: it is carried, as Python keeps it
  if fn is ctl.static_range:
    if not all(isinstance(x, int) for x in (start, stop, step)):
      raise E.KernelTypeError("ml.static_range needs static int bounds; use range() for runtime bounds",
                              tracer.loc(it), hint="unroll over Python ints (shapes, constexprs); loop over"
                                                   " runtime values with range(...)")
    if step == 0:
      raise E.KernelTypeError("ml.static_range's step is 0", tracer.loc(it), hint="use a non-zero step, as range() does")
    trips, before = range(start, stop, step), len(tracer.b.defs)

    def bind(k):
      if k:
        check_unrolling(tracer, it, len(trips), k, len(tracer.b.defs) - before)
      tracer.env[name], tracer.where[name] = trips[k], loc
    jumps.run_unrolled_trips(tracer, node, range(len(trips)), bind)
    if len(trips):
      check_unrolling(tracer, it, len(trips), len(trips), len(tracer.b.defs) - before)
    return
  nodes = _bound_nodes(it, len(args))
  bounds, texts, wide = [], [n and tracer.text(n) for n in nodes], []
  for k, x in enumerate((start, stop, step)):
    if not (isinstance(x, int) and not isinstance(x, bool)):
      cx = tracer.cx(it, values=[x], operands=[nodes[k]]) if nodes[k] else Call(tracer.b, tracer.loc(it))
      x = index_operand(cx, x, bound=True)   # 8- and 16-bit ones widen to int32
      if x.id in tracer.b.weak and x.type.dtype == DType.i64:    # a Python int (jax_enable_x64's weak int64):
        x = astype(cx, x, DType.i32)          # the loop's int32, as jnp keeps a weak int in the other side's type
      if x.type.dtype.bits != 32:    # the loop counts in i32 (scf.for needs one type)
        wide.append((texts[k] or x.name, x))
    bounds.append(x)
  if wide:          # an int64 bound (jax_enable_x64): the loop counts in int64, as lax.fori_loop's and Triton's
    bounds = [astype(Call(tracer.b, tracer.loc(it)), x, DType.i64) if isinstance(x, ir.Value) else x for x in bounds]
  start, stop, step = bounds
  kinds = {x.type.dtype for x in bounds if isinstance(x, ir.Value)}
  counter = DType.i64 if wide else DType.u32 if DType.u32 in kinds else DType.i32   # uint32 past 2**31: unsigned
  if counter == DType.u32 and (len(kinds) > 1 or stages > 1):
    u = [method_on(t or x.name or "n") for x, t in zip(bounds, texts)
         if isinstance(x, ir.Value) and x.type.dtype == DType.u32]
    i32 = [t or x.name or "i" for x, t in zip(bounds, texts) if isinstance(x, ir.Value) and x.type.dtype == DType.i32]
    raise E.KernelTypeError(
        "this loop's run-time bounds are uint32" + (" and int32" if len(kinds) > 1 else "")
        + (": a pipelined loop counts in int32" if stages > 1 else ": a loop counts in one integer type"),
        tracer.loc(it), hint=(f"convert {'it' if len(u) == 1 else 'them'}: {', '.join(f'{t}.astype(jnp.int32)' for t in u)}"
                              if stages > 1 else f"convert the bounds to one type: {u[0]}.astype(jnp.int32)") + " (values below 2**31)"
                             + ("" if stages > 1 else f", or make every bound uint32 ({method_on(i32[0])}"
                                                      f".astype(jnp.uint32), of values of at least 0)"
                                if i32 else ", or make every bound uint32"))
  if isinstance(step, int) and step < 0 and fn in (range, ctl.range):
    check_static_bounds(tracer, it, (start, stop, step), counter)
    return trace_for(tracer, descending(tracer, node, it, (start, stop, step), nodes))
  if isinstance(step, int) and step == 0:        # (Python's range(a, b, 0) raises ValueError too)
    raise E.KernelTypeError("range() arg 3 must not be zero: a step of 0 never reaches the end", tracer.loc(it),
                            hint="step by a positive count to count up, range(a, b, 1), or a negative one to count"
                                 " down, range(b - 1, a - 1, -1)")
  if isinstance(step, int) and step <= 0:
    raise E.KernelTypeError(f"range() in a kernel counts upwards: a step of {step} is not supported", tracer.loc(it),
                            hint="count upwards and compute the descending index inside: for k in range(n):"
                                 " c = n - 1 - k")
  check_static_bounds(tracer, it, (start, stop, step), counter)
  if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int) and stop <= start:
    names = getattr(tracer.b, "empty_loop_names", set())     # buffers used only in its body
    tracer.b.empty_loop_names = names | {n.id for st in node.body for n in ast.walk(st)   # are not
                                         if isinstance(n, ast.Name)}                      # "never used"
    tracer.b.empty_loop_atomics = {**getattr(tracer.b, "empty_loop_atomics", {}), **atomic_targets(node.body)}
    contraction.empty_dot_loop(tracer, node, it)
    return        # empty (a run-time step is still emitted: interpret mode checks it is positive)
  if stages == 1 and not specialize and not pingpong:
    first = ew.constant(Call(tracer.b, loc), start, counter) if isinstance(start, int) else start
    made = jumps.for_with_break(tracer, node, first, stop, step)
    if made is not None:
      return jumps.run(tracer, made)

  b = tracer.b
  assigned = [n for n in rebound_names(node.body, tracer.env) if n != name]
  forced: set = set()
  widened: dict = {}
  while True:
    attempt = _Attempt(tracer)
    env = tracer.env
    carries = carries_of(env, assigned, forced)
    leaf_names = [ln for c in carries for ln in c.leaf_names]
    inits = small_carries.flattened(tracer, _inits(tracer, carries, loc, widened), loc)
    iv = ir.Value(ScalarType(counter), getattr(tracer, "shown_names", {}).get(name, name))   # (lax_flow's
    # temporaries named as the user's body names them: `i` of lax.fori_loop's `def body(i, c)`, in later checks)
    tracer.b.loop_indices.add(iv.id)
    tracer.b.counts_from[iv.id] = start
    if all(isinstance(x, int) for x in (start, stop, step)) and fn is range and not name.endswith("'s row"):
      shown = name[:-len("'s index")] if name.endswith("'s index") else name    # (frontend/count_down.py's names)
      tracer.b.static_loops[iv.id] = (shown, loc.lineno, tracer.text(it))     # for e in range(2): run time
      tracer.b.weak.add(iv.id)    # (a Python int, as lax.fori_loop's ~int32 counter too: weak; probe 57g)
    args_ = _args(tracer, carries, inits, leaf_names, widened)
    body = ir.Block(args=(iv, *args_))
    before, where = dict(env), dict(tracer.where)
    _bind(env, carries, args_)
    env[name] = iv
    piped = stages > 1 or bool(specialize) or bool(pingpong)     # (copies in it stay TMA: register_copies)
    tracer.b.pipelining = getattr(tracer.b, "pipelining", 0) + piped
    try:
      poisoned = _trace_body(tracer, node, loc, body, carries, inits, args_)
    except E.LoopCarryTypeError as e:      # (acc = 0.0 made a tensor in a range(2): Python's loop, unrolled)
      if not retried_unrolled(tracer, e, loc, fn, (start, stop, step), piped, attempt.undo, written):
        raise
      return trace_for(tracer, written)
    except (_Widen, small_carries.Spread, Refill) as w:     # (a carry of another dtype, or spread: traced again)
      attempt.undo(tracer)
      widened.update({w.leaf: w.dtype} if isinstance(w, _Widen) else {("refill", w.leaf): (w.shape, w.own)}
                     if isinstance(w, Refill) else {})
      continue
    finally:
      tracer.b.pipelining -= piped
    grow = attempt.changed(tracer, assigned, carries) - forced
    if not grow:
      break
    attempt.undo(tracer)
    forced |= grow
  _after_loop(tracer, node, loc, assigned, carries, before, poisoned, where)
  with padded_tiles.carrying(b, inits):
    res = b.emit(ctl.For, start, stop, step, inits, body, loc=loc,
                  types=[v.type for v in inits], names=leaf_names, stages=stages, warp_specialize=specialize,
                  pingpong=pingpong)
  padded_tiles.carried(b, inits, res.results)
  weak_results(b, res.results)
  _bind(env, carries, small_carries.shaped(b, loc, inits, res.results))
  for n in poisoned:
    env[n] = POISON
  after = _index_after(tracer, loc, before.get(name), (start, stop, step), counter)
  env[name] = after if after is not None else _Unbound(
      f"{name} is the loop variable of the loop at line {loc.lineno}, which is not"
      f" defined after a runtime loop (it may run no trips)",
      hint=f"keep what you need in a variable the loop carries: last = 0 before the loop,"
           f" last = {name} in its body, then use last after it")


def _index_after(tracer, loc, old, bounds, counter):
  """A loop variable bound before its runtime loop, as Python leaves it after the loop: the last
  index where the loop ran a trip, else its value before (`i = 0; for i in range(n): ...`). None
  where it was not bound before to an integer of the counter's type (or a Python int)."""
  start, stop, step = bounds
  if type(old) is int and (counter == DType.i32 and -2 ** 31 <= old < 2 ** 31 or counter == DType.i64):
    pass
  elif not (is_value(old) and isinstance(old.type, ScalarType) and resolve(old.type.dtype) == counter):
    return None
  cx = Call(tracer.b, loc)
  py = {ew.BinOp.SUB: int.__sub__, ew.BinOp.ADD: int.__add__, ew.BinOp.MUL: int.__mul__,
        ew.BinOp.FLOORDIV: int.__floordiv__}

  def b(k, x, y):           # Python ints stay Python ints (a loop over range(4): its last index is 3)
    return py[k](x, y) if isinstance(x, int) and isinstance(y, int) else ew.binary(cx, k, x, y)
  if counter == DType.i32 and not (isinstance(start, int) and isinstance(stop, int)) and not (
      isinstance(step, int) and step < 0):
    # in uint32, where stop - start is exact (int32 wrapped it past 2**31: range(-5, n, s) with n near
    # 2**31 gave another last index); the last index itself fits int32, so the wrap back is exact
    u = lambda x: x % 2 ** 32 if isinstance(x, int) else ew.astype(cx, x, DType.u32)
    span = b(ew.BinOp.SUB, b(ew.BinOp.SUB, u(stop), u(start)), 1)
    last = ew.astype(cx, b(ew.BinOp.ADD, u(start), b(ew.BinOp.MUL, b(ew.BinOp.FLOORDIV, span, u(step)), u(step))),
                     DType.i32)
  else:
    span = b(ew.BinOp.SUB, b(ew.BinOp.SUB, stop, start), 1)
    last = b(ew.BinOp.ADD, start, b(ew.BinOp.MUL, b(ew.BinOp.FLOORDIV, span, step), step))
  if isinstance(start, int) and isinstance(stop, int):    # (an empty one left the name as it was)
    return ew.constant(cx, last, counter) if isinstance(last, int) else last    # a scalar, as in the body
  return ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, start, stop), last, old)


class _Widen(Exception):
  """A Python number a loop carries (t = 0.0) that its body makes another dtype of its kind (a
  bfloat16 scalar): the loop is traced again carrying that dtype, as JAX's loops promote a weakly
  typed carry to the body's dtype."""

  def __init__(self, leaf, dtype):
    super().__init__(leaf)
    self.leaf, self.dtype = leaf, dtype


def _inits(tracer, carries, loc, widened=None):
  """The loop's initial values; a number that cannot be a constant is reported where it was
  assigned, with a note at the loop. `widened`: leaf name -> the dtype a number takes."""
  out = []
  for c in carries:
    at = tracer.where.get(c.name, loc)
    for ln, l in zip(c.leaf_names, c.leaves):
      if (r := (widened or {}).get(("refill", ln))) is not None and is_value(l):
        out.append(refill(Call(tracer.b, at), l, *r))       # (a fill made again at a padded shape)
        continue
      d = (widened or {}).get(ln)
      if d is None and isinstance(l, int) and not isinstance(l, bool) and 2 ** 31 <= l < 2 ** 32:
        d = DType.u32                        # s = 3000000000: fits uint32 only, as jnp's weak int would
      if d is not None and is_value(l):      # a weak carry of an enclosing loop (see _args)
        out.append(ew.astype(Call(tracer.b, at), l, d))
        continue
      out.append(as_value(tracer, l, at, note=f"{loc}: the loop that carries {c.name}", dtype=d))
  return tuple(out)


def _widens(init, leaf) -> bool:
  """Whether a weakly typed carry entering as `init` takes `leaf`'s dtype: a scalar of the same kind
  (or a tensor of the same shape: a select between Python numbers, m = ml.where(v > 0, 1.0, 0.0))."""
  same = (isinstance(init.type, ScalarType) and isinstance(leaf.type, ScalarType)
          or not isinstance(init.type, ScalarType) and not isinstance(leaf.type, ScalarType)
          and init.type.shape == leaf.type.shape)
  return (same
          and ew.weak_kind(init.type.dtype) is not None
          and ew.weak_kind(init.type.dtype) == ew.weak_kind(leaf.type.dtype))


def _args(tracer, carries, inits, leaf_names, widened):
  """The body's block arguments; one standing for a Python number whose dtype is still open is
  weakly typed (frontend/ops/elementwise.py weak_to)."""
  args_ = tuple(ir.Value(v.type, n) for v, n in zip(inits, leaf_names))
  starts = [l for c in carries for l in c.leaves]
  for a, l, ln in zip(args_, starts, leaf_names):
    big = isinstance(l, int) and not isinstance(l, bool) and l >= 2 ** 31   # uint32 only: never narrowed
    if (is_weak(l) and not big or is_value(l) and l.id in tracer.b.weak) and ln not in widened:
      tracer.b.weak.add(a.id)
  padded_tiles.carried(tracer.b, inits, args_)      # (odd reads computed padded: their carries too, probe 47a)
  return args_


def _with_else(tracer, node, trace, word) -> None:
  """`for ... else:` / `while ... else:`: the else runs once the loop ends, as Python runs it (a
  `return` in an unrolled loop skips it); with a `break`, under a test of a flag the break sets
  (frontend/jumps.py), MG001 where the break sits elsewhere than in if branches."""
  made = jumps.else_with_break(node) if jumps.holds(node.body, (ast.Break,)) else None
  if made is not None:
    return jumps.run(tracer, made)
  if jumps.holds(node.body, (ast.Break,)):
    tracer.unsupported(node, f"{word} ... else with a break in the loop",
                       hint="set a flag where the loop breaks (found = 1) and put the else body after the loop"
                            " under if found == 0:")
  loop = copy.copy(node)
  loop.orelse = []
  trace(tracer, loop)
  if tracer.jump is None:
    tracer.run_body(node.orelse)


def _bound_nodes(it, n) -> list:
  """The expressions of a range's start, stop and step as the user wrote them (None for one left
  out, or spread from a tuple)."""
  if len(it.args) != n or any(isinstance(a, ast.Starred) for a in it.args):
    return [None, None, None]
  return [None, it.args[0], None] if n == 1 else (list(it.args) + [None])[:3]


def _carried(outer, ln, init, loc, start, c, arg) -> tuple:
  """What the body knows of carry leaf `ln`: (entry value, loop Loc, the Python number it started
  as, its tuple or list, the Loc of the loop it started at, the body's block argument). A leaf that
  enters this loop as an enclosing loop's block argument (`t = 0`, then two nested loops add to it)
  started where that loop's did."""
  value = c.value if c.container else None
  if is_value(start) and ln in outer and outer[ln][5] is start:
    return (init, loc, outer[ln][2], value, outer[ln][4], arg)
  return (init, loc, start, value, loc, arg)


def _trace_body(tracer, node, loc, body: ir.Block, carries, inits, args_) -> set:
  """Trace a loop's body into `body` (its carries bound to `args_`) and end it with a Yield of
  the new carries, each checked against its type on entry. Returns the poisoned names."""
  env, b = tracer.env, tracer.b
  poisoned = set()
  carried = tracer.carried
  tracer.carried = {**carried, **{ln: _carried(carried, ln, init, loc, start, c, arg) for c in carries
                                  for ln, init, start, arg in zip(c.leaf_names, carry_slices(inits, carries, c),
                                                                  c.leaves, carry_slices(args_, carries, c))}}
  tracer.loops.append(None)
  try:
    with b.region(body):
      _bind(env, carries, small_carries.shaped(b, loc, inits, args_))     # (small statistics: as vectors)
      tracer.run_body(node.body)
  finally:
    tracer.loops.pop()
    tracer.carried = carried
  with b.region(body):
    yields, weak = [], []
    i = 0
    for c in carries:
      k = len(c.leaves)
      init_leaves, arg_leaves = inits[i:i + k], args_[i:i + k]
      i += k
      n, new = c.name, env[c.name]
      if new is POISON:           # its error is reported; keep the IR well formed
        poisoned.add(n)
        yields.extend(arg_leaves)
        weak.extend(False for _ in arg_leaves)
        continue
      where = _rebinding_loc(tracer, node, n)
      st = structure(new)
      if c.container and (st is None or len(st[0]) != k
                          or structure_shape(new) != structure_shape(c.value)):
        raise E.LoopCarryTypeError(
            f"{n} changes from {describe(c.value)} values to {describe(new)} inside the loop", where,
            hint=f"keep {n} a {type(c.value).__name__} of the same length, of register values or numbers",
            notes=(f"{loc}: the loop that carries {n}",))
      new_leaves = st[0] if c.container else [new]
      for ln, init, leaf, start, arg in zip(c.leaf_names, init_leaves, new_leaves, c.leaves, arg_leaves):
        if not is_carriable(leaf):
          raise E.LoopCarryTypeError(
              f"{ln} changes from {describe(init)} to {describe(leaf)} inside the loop", where,
              hint=f"keep {ln} the same kind of value in every iteration",
              notes=(f"{loc}: the loop that carries {n}",))
        raw_leaf = leaf
        leaf = as_value(tracer, leaf, where, note=f"{loc}: the loop that carries {n}")
        leaf = small_carries.yielded(b, loc, init, leaf)      # (a small statistic: the vector carried)
        refill_for(b, ln, init, leaf)         # (a padded trace's fill at another padded shape: traced again)
        if not same_type(init, leaf, loc) and arg.id in b.weak and _widens(init, leaf):
          raise _Widen(ln, leaf.type.dtype)
        if not same_type(init, leaf, loc):
          init = small_carries.as_written(b, init)      # (a one-element tensor carried as its element: as written)
          d1 = resolve(leaf.type.dtype)
          outer = tracer.carried.get(ln)        # t = 0 before two nested loops: where it started
          if is_value(start) and outer is not None and outer[5] is start and type(outer[2]) is int:
            start, first = outer[2], f" at line {outer[4].lineno}"
          else:
            first = ""
          if (isinstance(start, int) and not isinstance(start, bool) and isinstance(d1, DType) and d1.is_float
              and init.type.shape == leaf.type.shape):
            hint = (f"start it as a float before the loop{first}: "
                    + rebuilt(n, c.value if c.container else None, ln, repr(float(start)))
                    + " (a Python int starts an int32 carry)")   # acc = 0 summing floats: converting back truncates
          elif int_float_hint(n, c.value if c.container else None, ln, init, leaf, None):
            hint = int_float_hint(n, c.value if c.container else None, ln, init, leaf, None, where=" before the loop")
          elif widened_int_hint(n, c.value if c.container else None, ln, init, leaf, f" before the loop{first}"):
            hint = widened_int_hint(n, c.value if c.container else None, ln, init, leaf, f" before the loop{first}")
          elif init.type.shape == leaf.type.shape:
            hint = "convert it back at the end of the body: " + rebuilt(
                n, c.value if c.container else None, ln,
                conversion(init.type.dtype, raw_leaf if isinstance(raw_leaf, Num) else None))
          elif not init.type.shape and isinstance(leaf.type, TensorType) and math.prod(leaf.type.shape) == 1:
            # t = 0.0, then t += ml.sum(v, keepdims=True): a loop cannot carry a one-element tensor
            # (MG204), so keep the scalar
            index = ", ".join("0" for _ in leaf.type.shape)
            hint = (f"keep {ln} a scalar: add full reductions without keepdims=True ({ln} = {ln} + ml.sum(...)),"
                    f" or the scalar of a one-element tensor s, s[{index}] ({ln} = {ln} + s[{index}])")
          elif not init.type.shape and isinstance(leaf.type, TensorType):    # acc = 0.0, then acc += dot
            # m = -1e30, then m = ml.maximum(m, ml.max(t, axis=1)): keep the start value (zeros would
            # turn a running max into max(0, ...))
            value = start            # the number the user started it at
            nonzero = isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0
            text = f"float('{value}')" if isinstance(value, float) and not math.isfinite(value) else repr(value)
            made = (f"ml.full({leaf.type.shape}, {text}, jnp.{dtype_name(leaf.type.dtype)})" if nonzero else
                    f"ml.zeros({leaf.type.shape}, jnp.{dtype_name(leaf.type.dtype)})")
            hint = f"start it as a tensor of that shape before the loop: {ln} = {made}"
          else:
            hint = f"keep {ln}'s shape fixed across iterations"
          raise unrollable(E.LoopCarryTypeError(
              f"{ln} enters the loop as {describe(init)} but an iteration makes it {describe(leaf)}", where,
              hint=hint, notes=(f"{loc}: the loop that carries {n}",)), loc, init, leaf)
        yields.append(leaf)
        weak.append(arg.id in b.weak and (is_weak(raw_leaf) or is_value(raw_leaf) and raw_leaf.id in b.weak))
    with padded_tiles.carrying(b, inits, yields):
      b.emit(ctl.Yield, tuple(yields), loc=loc)
  b.weak_yields = tuple(weak)       # (weak_results: the loop's results)
  return poisoned


def _after_loop(tracer, node, loc, assigned, carries, before, poisoned, where) -> None:
  """Names the body bound that the loop does not carry: unbound after it, or unchanged. A name
  bound before the loop to a ref or a Python object that the body rebinds is reported at the
  body's assignment."""
  env = tracer.env
  carried = [c.name for c in carries]
  body_where, tracer.where = tracer.where, where
  for n in carried:
    tracer.where[n] = loc
  for n in assigned:
    if n in carried:
      continue
    if before.get(n) is POISON or env.get(n) is POISON:
      poisoned.add(n)
      continue
    bound_before = n in before and not isinstance(before[n], _Unbound)
    if bound_before and before[n] is not env.get(n) and not static_equal(before[n], env.get(n)):
      new = env.get(n)
      if is_carriable(new) and not is_carriable(before[n]) and structure(before[n]) is None:
        # `acc = None` before the loop, `acc = ml.dot(a_s, b_s, acc)` inside (Triton's habit): the
        # loop could carry acc if it started as a register value or a number.
        raise E.LoopCarryTypeError(
            f"{n} starts this runtime loop as {start_kind(before[n])} and the loop makes it"
            f" {describe(new)}; a runtime loop carries a value only if it starts as a register value"
            f" or a number", body_where.get(n, loc),
            hint=none_start_hint(n, new, node.body, "the loop"),
            notes=(f"{loc}: the runtime loop",))
      is_ref = isinstance(getattr(new, "type", None), RefType)
      if isinstance(new, _Unbound) or not read_after(tracer.body, n, node):
        # a window, ref or other static value each trip binds afresh before reading it, read by nothing
        # after the loop (`sl = ml.ds(c * 512, 512)` in the body of a kernel with an `sl` before it; an inner
        # `for row in x2` of an outer `for row in x1`'s target, probe 60c)
        env[n] = new if isinstance(new, _Unbound) else _Unbound(
            f"it is rebound inside the runtime loop at line {loc.lineno} to {describe(new)}, which a runtime"
            f" loop cannot carry")
        continue
      if is_ref and _for_target(node, n):     # (an inner `for row in x2` of an outer loop's `row`: probe 60c)
        hint = (f"{n} is read again after this loop (on a later trip of a loop around it, or after it), where"
                f" Python would see the ref this `for {n} in ...` left in it: give this loop's variable a name of"
                f" its own (for {n}2 in ...)")
      elif is_ref:
        hint = (f"a loop cannot switch {n} to another buffer or window: allocate buffers once before the loop"
                f" and index them with the loop's index (buf.at[ml.ds(i * n, n)]), or unroll it with"
                f" ml.static_range")
      else:
        hint = list_change_hint(tracer, n, before[n], new, node)
      raise E.LoopCarryTypeError(
          f"{n} is rebound inside a runtime loop to {describe(new)}; only register values and"
          f" numbers can change across iterations", body_where.get(n, loc), hint=hint,
          notes=(f"{loc}: the runtime loop",))
    if not bound_before:
      env[n] = _Unbound(f"it is only assigned inside the loop at line {loc.lineno}")
    else:
      env[n] = before[n]


def _for_target(loop, name) -> bool:
  """Whether `loop` is, or its body holds, a `for` loop binding `name` as its target (`for row in x`, traced as a
  loop over `row's row` that binds row first)."""
  return any(isinstance(s, ast.For) and any(isinstance(t, ast.Name) and t.id in (name, f"{name}'s row")
                                            for t in ast.walk(s.target)) for s in ast.walk(loop))


# Values an ml.static_range may unroll into a kernel (each costs about a millisecond to trace and
# build): past it the loop is reported once its first UNROLL_SAMPLE trips show it would be.
UNROLLED_VALUES = 65_536
UNROLL_SAMPLE = 16


def check_unrolling(tracer, it, trips, done, made, what="this ml.static_range") -> None:
  """MG003 at `it` when `trips` unrolled trips of a body that made `made` values in its first
  `done` would make more than UNROLLED_VALUES (a run-time loop traces its body once); `what` unrolls
  (a static range's loop, a comprehension)."""
  if done < min(trips, UNROLL_SAMPLE) or made * trips <= UNROLLED_VALUES * done:
    return
  expect = made * trips // done
  raise E.KernelTypeError(
      f"{what} unrolls its body {trips} times while tracing, about {expect} values: more than"
      f" the {UNROLLED_VALUES} an unrolled loop may make (each is traced and compiled separately)",
      tracer.loc(it), hint="loop at run time, for i in range(...) with the same bounds (its body is traced"
                           " once), or unroll fewer trips: ml.static_range for the few trips that need static"
                           " indices")



def _rebinding_loc(tracer, loop, name: str):
  """Where the loop body last assigns `name` (the statement that changes its type): the assignment
  traced last, else the last one in the source (a branch of a static if that was not taken is not)."""
  at, span = tracer.where.get(name), tracer.loc(loop)
  if (at is not None and getattr(at, "filename", None) == span.filename
      and span.lineno <= getattr(at, "lineno", 0) <= (span.end_lineno or span.lineno)):
    return at
  last = None
  for stmt in ast.walk(loop):
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and name in assigned_names([stmt]):
      if last is None or (stmt.lineno, stmt.col_offset) > (last.lineno, last.col_offset):
        last = stmt
  return tracer.loc(last if last is not None else loop)


def __getattr__(name):
  """`flow.trace_while` and `flow.STATIC_WHILE_TRIPS`, which moved to while_loops.py (probe 58c; it imports this
  module's carries, so it is imported when first asked for)."""
  if name in ("trace_while", "STATIC_WHILE_TRIPS"):
    from . import while_loops
    return getattr(while_loops, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
