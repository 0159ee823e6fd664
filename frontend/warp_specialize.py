"""Warp specialisation of `for k in ml.range(n, stages=S, warp_specialize=True)`.

The kernel is split into two roles (one `WarpSpecialize` op; lowering/control.py runs
them on different warpgroups):

* the producer, one extra warpgroup with few registers, runs only what the loop's
  TMA loads need: the loops around the pipelined loop (their bounds and the scalar
  arithmetic of the load windows, cloned), and in place of the loop

      for k < trip: wait empty[k % S]; load iteration k into stage k % S (full barrier)

* the consumers (the kernel's `block` threads, with the producer's registers) run
  the whole kernel, with the loop's loads replaced by waits:

      for k < trip: wait full[k % S]; body on stage k % S; release a stage
      after it: release the last stage

A stage is released by every consumer thread arriving on `empty[stage]`
(a BarrierType value: S mbarriers of `block` arrivals). When dots or TMA stores read
the stage asynchronously, iteration k releases the stage of iteration k - 1 after
DotWait(1) / AwaitStores (the loop's last stage is released after it); when only
registers read it, iteration k releases its own stage at its end. The consumers
arrive once on every empty barrier before anything else, so the producer's first
pass through the stages does not wait. Both roles walk the stages in the same order,
across all iterations of the enclosing loops (a persistent kernel's tile loop), so
the producer loads the next tile while the consumers run this tile's epilogue.
Barriers the sync pass inserts inside a role meet that role's threads only, so an
op that needs every thread of the CTA or cluster (`ml.cluster_sync()`) is rejected.
"""
from __future__ import annotations

import dataclasses

from . import errors as E
from . import hw
from . import ir
from .dtypes import DType
from .ir import Access
from .ops.control import (LOOPS, AwaitStores, BarrierAlloc, BarrierArrive, BarrierWait, ClusterSync, For,
                          If, WarpSpecialize, Yield)
from .ops.elementwise import BinOp, Binary, CmpOp, Compare
from .ops.memory import ClusterRef, SmemAlloc, View, root_in
from .ops.mma import Dot, DotWait
from .pipeline import record
from .pipeline_plan import I32, arith, issue, make_plan, mod, multibuffer, pure_scalar, staged_body
from .pipeline_plan import stores_per_iteration
from .types import BarrierType, ScalarType, Space

BOOL = ScalarType(DType.bool_)


def warp_specialize(kernel: ir.Kernel, loop: For, em, result) -> None:
  if kernel.block + hw.WARPGROUP > hw.MAX_BLOCK:
    # (the CTA would launch with block + 128 threads: past the GPU's limit, the launch fails at run time)
    raise E.WarpSpecializeError(
        f"warp_specialize=True adds a producer warpgroup to the kernel's block={kernel.block} compute threads:"
        f" {kernel.block + hw.WARPGROUP} threads, more than a CTA may have ({hw.MAX_BLOCK})", loop.loc,
        hint=f"launch it with block={hw.MAX_BLOCK - hw.WARPGROUP} or fewer compute threads, or drop"
             f" warp_specialize=True")
  _hoist_branch_allocs(kernel)
  path = ir.path_to(kernel.body, loop)
  plan = make_plan(kernel, loop, em)
  multibuffer(kernel, plan, em)
  record(plan, plan.loop.body, result)
  loc, S = plan.loop.loc, plan.stages
  for buf in plan.loaded:
    if not any(o.results == (buf,) for o in kernel.body.ops):
      # reported at the ml.smem(...) the hint says to move, the loop in a note
      alloc = next((o for o in ir.walk(kernel.body) if isinstance(o, SmemAlloc) and o.results == (buf,)), None)
      raise E.WarpSpecializeError(     # (those under run-time ifs alone were moved to the top: _hoist_branch_allocs)
          f"{buf.name} is allocated inside a loop; a warp-specialised loop's buffers"
          f" must be allocated at the top of the kernel", alloc.loc if alloc is not None else loc,
          hint="move its ml.smem(...) to the top", notes=(f"{loc}: the warp-specialised loop",))
  _check_sources_not_written(kernel, plan, em, loop)
  empty = ir.Value(BarrierType(S, kernel.block // hw.WARPGROUP, _multicast_axis(plan)), "empty")
  alloc = em.defs[empty.id] = BarrierAlloc(loc, (empty,))

  consumer_ops = _consumer_loop(kernel, plan, empty, em)
  producer = ir.Block(_producer(kernel, plan, path, empty, em) + [Yield((), loc)])
  _replace(kernel.body, loop, consumer_ops, path)

  allocs = [o for o in kernel.body.ops if isinstance(o, SmemAlloc)]
  rest = [o for o in kernel.body.ops if not isinstance(o, SmemAlloc)]
  arrive_all = [BarrierArrive(empty, s, loc, sync=False) for s in range(S)]
  consumer = ir.Block(arrive_all + rest + [Yield((), loc)])
  _check_roles(consumer)
  regs = hw.consumer_registers(kernel.block // hw.WARPGROUP)
  kernel.body.ops[:] = allocs + [alloc, WarpSpecialize(
      producer, consumer, hw.PRODUCER_REGISTERS, regs, loc)]
  if empty.type.cluster_axis is not None:   # no CTA leaves while peers load into it or arrive on it
    kernel.body.ops.append(ClusterSync(loc))
  ir.prune_dead(kernel.body)


def _hoist_branch_allocs(kernel) -> None:
  """Moves the `ml.smem(...)` written under run-time ifs, but in no loop, to the top of the kernel, where a
  warp-specialised loop's buffers must be: an allocation is static, the same buffer wherever it is written.
  A varlen attention returns early for query tiles past its sequence (`if i * BQ >= n: return`), which puts
  the rest of the kernel, its buffers with it, in that if's else (MG503 until probe 46c)."""
  moved = []

  def visit(block):
    for o in block.ops:
      if not isinstance(o, If):
        continue
      for r in o.regions:
        inner = getattr(o, r)
        moved.extend(x for x in inner.ops if isinstance(x, SmemAlloc))
        inner.ops[:] = [x for x in inner.ops if not isinstance(x, SmemAlloc)]
        visit(inner)

  visit(kernel.body)
  kernel.body.ops[:0] = moved


def _check_sources_not_written(kernel, plan, em, loop) -> None:
  """The producer warpgroup starts loading at the kernel's start, ordered after nothing the
  compute warpgroups do outside the loop: a loop may not load arrays the kernel writes
  before it, or in an enclosing loop (whose next trips the producer loads ahead of). A write
  after the loop is after every load landed. Writes inside the loop are pipeline_plan's
  check_loads_of_written_memory's (MG502, by windows)."""
  root = lambda v: root_in(em.defs, v)
  alias = {kernel.inputs[i].value.id: kernel.outputs[o].value.id for i, o in (kernel.aliases or {}).items()}
  # `loop` is the loop as written (still in the kernel's body); plan.loop its normalised copy
  inside = {id(o) for o in ir.walk(loop.body)}
  path = ir.path_to(kernel.body, loop)
  outer = [o for o in path[:-1] if isinstance(o, LOOPS)]          # enclosing loops
  repeated = {id(x) for o in outer for x in ir.walk(o.body)}
  # the other branches of the ifs around the loop: never run with it in one trip
  others = {id(x) for o, down in zip(path, path[1:]) if not isinstance(o, LOOPS) for r in o.regions
            if down not in getattr(o, r).ops for x in ir.walk(getattr(o, r))}
  written, after = {}, False
  for o in ir.walk(kernel.body):
    after = after or o is loop
    if id(o) in inside or (after or id(o) in others) and id(o) not in repeated:
      continue
    for ref, acc in ir.traits_of(o).effects(o):
      if ref is not None and acc in (Access.REG_WRITE, Access.TMA_WRITE) and ref.type.space == Space.GMEM:
        written.setdefault(alias.get(root(ref).id, root(ref).id), o)
  for copy, _, _ in plan.sites:
    src = root(copy.src)
    w = written.get(alias.get(src.id, src.id))
    if w is not None:
      where = "in an enclosing loop" if id(w) in repeated else "before it"
      raise E.WarpSpecializeError(
          f"this warp-specialised loop loads from {src.name}, which the kernel writes {where} (line"
          f" {w.loc.lineno}); its producer warpgroup issues the loads from the kernel's start, ordered after"
          f" nothing the other warpgroups write, so it could read {src.name} before the writes land", copy.loc,
          hint=f"write {src.name} only after the loop (at the kernel's top level), pass what the kernel"
               f" computed to a second kernel, or drop warp_specialize=True")


def _multicast_axis(plan):
  """The cluster axis the loop's multicast loads share (their stages are freed cluster-wide)."""
  axes = {o.multicast for o, _, _ in plan.sites if o.multicast is not None}
  if len(axes) > 1:
    raise E.WarpSpecializeError(
        f"this loop multicasts loads along cluster axes {sorted(axes)}; one axis per loop is supported",
        plan.loop.loc, hint="multicast along one axis of the cluster")
  return axes.pop() if axes else None


def _replace(block, old, new_ops, path):
  """Put `new_ops` where `old` is (in whichever block of `path` holds it)."""
  for b in [block] + [getattr(o, r) for o in path for r in o.regions]:
    for i, o in enumerate(b.ops):
      if o is old:
        b.ops[i:i + 1] = new_ops
        return
  raise AssertionError("the warp-specialised loop is not in the kernel")


# ---------------------------------------------------------------- consumers
def _consumer_loop(kernel, plan, empty, em) -> list:
  """The loop with its loads replaced by waits and its stages released, and the ops around it."""
  loop, S, loc = plan.loop, plan.stages, plan.loop.loc
  body, stage = staged_body(em, plan)
  if Access.MMA_READ in plan.reads:
    body.ops.append(DotWait(1, loc))
  if Access.TMA_READ in plan.reads:
    body.ops.append(AwaitStores(True, loc, pending=stores_per_iteration(body)))
  regs = Access.REG_READ in plan.reads
  if plan.async_reads:           # the previous iteration's stage is free now
    with em.region(body):
      first = em.emit(Compare, CmpOp.GT, plan.iv, 0, loc=loc, types=[BOOL]).result
      prev = mod(em, em.emit(Binary, BinOp.ADD, plan.iv, S - 1, loc=loc, types=[I32]).result, S, loc)
    # DotWait and AwaitStores complete for the whole warpgroup: one thread may say so at once,
    # unless threads also read the stage into registers (other warps may still be reading it)
    release = If(first, ir.Block([BarrierArrive(empty, prev, loc, sync=regs), Yield((), loc)]),
                 ir.Block([Yield((), loc)]), loc, ())
    body.ops.append(release)
    if not plan.reads & {Access.REG_READ, Access.TMA_READ}:   # only dots read the stages: release_early may move it
      kernel.early_release = getattr(kernel, "early_release", ()) + (release,)    # (held: their ids stay theirs)
  else:                          # every thread has read this stage into registers
    body.ops.append(BarrierArrive(empty, stage, loc))
  body.ops.append(loop.body.ops[-1])
  ir.prune_dead(body)
  new_loop = dataclasses.replace(loop, body=body)
  for r in new_loop.results:
    em.defs[r.id] = new_loop
  after = []
  if plan.async_reads:           # release the last iteration's stage once it is read
    if Access.MMA_READ in plan.reads:
      after.append(DotWait(0, loc))
    if Access.TMA_READ in plan.reads:
      after.append(AwaitStores(True, loc))
    if isinstance(loop.stop, int):
      after += [BarrierArrive(empty, (loop.stop - 1) % S, loc, sync=regs)] if loop.stop > 0 else []
    else:
      then, cond = ir.Block(), ir.Block()
      with em.region(then):
        last = mod(em, arith(em, BinOp.SUB, loop.stop, 1, loc), S, loc)
      then.ops += [BarrierArrive(empty, last, loc, sync=regs), Yield((), loc)]
      with em.region(cond):
        ran = em.emit(Compare, CmpOp.GT, loop.stop, 0, loc=loc, types=[BOOL]).result
      after += cond.ops + [If(ran, then, ir.Block([Yield((), loc)]), loc, ())]
  return plan.pre + [new_loop] + after


def release_early(kernel) -> None:
  """Move each warp-specialised loop's release of the previous stage (only dots read its stages) up to
  the first wait in the body that retires every dot of the previous iteration: a `DotWait(p)` at the
  body's top level after at least `p` dots of this iteration were issued (each dot is one group, and
  groups retire in order). The sync pass placed those waits (before the first read of a dot's result,
  the scores of attention), so the producer may refill the stage from there rather than from the
  body's end: with the softmax between, nearly one iteration sooner, which is what lets two stages
  keep the tensor cores fed (it runs after the sync pass)."""
  marked = {id(o) for o in getattr(kernel, "early_release", ())}
  if not marked:
    return
  for loop in [o for o in ir.walk(kernel.body) if isinstance(o, LOOPS)]:
    ops = loop.body.ops
    at = next((i for i, o in enumerate(ops) if id(o) in marked), None)
    if at is None:
      continue
    issued, to = 0, None
    for i, o in enumerate(ops[:at]):
      if isinstance(o, DotWait) and o.pending <= issued:
        to = i + 1
        break
      issued += isinstance(o, Dot)       # (dots in nested blocks may not run: not counted)
    if to is None:
      continue
    deps, need = [], {id(v) for v in ops[at].operands() if isinstance(v, ir.Value)}
    need |= {id(v) for o in ir.walk(ops[at].then_block) for v in o.operands() if isinstance(v, ir.Value)}
    for o in reversed(ops[to:at]):       # the scalar ops that compute its condition and stage
      if any(id(r) in need for r in o.results):
        if not pure_scalar(o):
          break
        deps.append(o)
        need |= {id(v) for v in o.operands() if isinstance(v, ir.Value)}
    else:
      moved = deps[::-1] + [ops[at]]
      rest = [o for o in ops[to:at] if all(o is not m for m in moved)]
      ops[to:at + 1] = moved + rest


def _check_roles(consumer):
  for o in ir.walk(consumer):
    if isinstance(o, ClusterRef):
      raise E.WarpSpecializeError(
          "ml.cluster_ref in a kernel with a warp-specialised loop: a peer's SMEM is read or written safely"
          " only between ml.cluster_sync() calls, which such a kernel cannot make (its producer warpgroup"
          " never reaches them)", o.loc,
          hint="drop warp_specialize=True from the loop (then separate the peers' accesses with"
               " ml.cluster_sync()), or share loaded tiles with ml.copy(..., multicast=axis) instead")
    if any(a == Access.CLUSTER_BARRIER for _, a in ir.traits_of(o).effects(o)):
      raise E.WarpSpecializeError(
          "ml.cluster_sync() in a kernel with a warp-specialised loop: its producer warpgroup never"
          " reaches this barrier, so the kernel would hang", o.loc,
          hint="drop warp_specialize=True from the loop, or the cluster_sync")


# ---------------------------------------------------------------- producer
def _producer(kernel, plan, path, empty, em) -> list:
  """The loops around the pipelined loop, sliced to what its loads need, and the load loop."""
  defs = ir.def_table(kernel.body)       # still the loop as written: the plan's own ops win
  for o in plan.pre + list(ir.walk(plan.loop.body)):
    for r in o.results:
      defs[r.id] = o
  ivs = {id(o.body.args[0]) for o in path[:-1] if isinstance(o, For)}
  inputs = {id(p.value) for p in kernel.inputs}     # read-only while the kernel runs: both roles read them
  need = _needed(plan, path, defs, ivs, inputs)
  mapping: dict = {}
  return _slice_block(kernel.body.ops, path, 0, need, mapping, plan, empty, em)


def _needed(plan, path, defs, ivs, inputs) -> set:
  """Ids of the values the producer computes: bounds and conditions on the path, the trip
  count, the free values of the load windows, and what they are computed from (scalar
  arithmetic, and reads of the kernel's inputs, such as a sequence's length or a page-table
  entry)."""
  roots = []
  for o in path[:-1]:
    if not isinstance(o, (For, If)):      # a while loop: its condition is computed in the compute role
      raise E.WarpSpecializeError(
          "a warp-specialised loop inside a while loop: the producer warpgroup walks the for loops and"
          " ifs around the loop, not a while loop's condition", plan.loop.loc,
          hint="write the outer loop as a for loop over a trip count (for t in range(n):), or drop"
               " warp_specialize=True")
    roots += [o.start, o.stop, o.step] if isinstance(o, For) else [o.cond]
  roots.append(plan.loop.stop)
  inner = {id(a) for _, _, addr in plan.sites for a in addr}
  for _, _, addr in plan.sites:          # the producer never waits for what the consumers put in SMEM
    for op in addr:
      ref = next((v for v in op.operands() if isinstance(v, ir.Value)
                  and getattr(v.type, "space", None) == Space.SMEM), None)
      if ref is not None:
        raise E.WarpSpecializeError(
            f"a load window of this warp-specialised loop is read from {ref.name or 'an SMEM buffer'}"
            f" in SMEM; the producer warpgroup that issues the loads does not wait for what the"
            f" kernel copies into SMEM, so it would read it before it lands", op.loc,
            hint="read the window from the kernel's input (a page table in GMEM), or drop"
                 " warp_specialize=True")
  for _, view, addr in plan.sites:
    for op in list(addr) + ([view] if view is not None else []):
      roots += [v for v in op.operands() if v is not plan.iv and isinstance(v.type, ScalarType)]
  need, todo = set(), [v for v in roots if isinstance(v, ir.Value)]
  while todo:
    v = todo.pop()
    if id(v) in need:
      continue
    d = defs.get(v.id)
    if d is not None and id(d) in inner:
      continue
    need.add(id(v))
    if d is None:
      if id(v) in ivs or id(v) in inputs:
        continue
      if not isinstance(v.type, ScalarType):
        raise E.WarpSpecializeError(
            f"the loads of this warp-specialised loop depend on a value read from {v.name or 'a buffer'},"
            f" which the kernel writes; the producer warpgroup can only read the kernel's inputs",
            plan.loop.loc, hint="compute the load windows from program ids, loop indices, scalar"
                                " arithmetic and values read from inputs")
      raise E.WarpSpecializeError(
          f"the loads of this warp-specialised loop depend on {v.name or 'a value'}, which is carried"
          f" through an enclosing loop; the producer warpgroup can only recompute loop indices and"
          f" scalar arithmetic on them", plan.loop.loc, hint="compute the load windows from loop indices")
    if _repeatable_if(d):            # `a if c else b`, `c or d` of scalars: the if and its branches, repeated
      todo += [d.cond] + [x for y in _branch_ops(d) for x in y.operands() if isinstance(x, ir.Value)]
      continue
    if not pure_scalar(d):
      raise E.WarpSpecializeError(
          f"the loads or the trip count of this warp-specialised loop depend on {v.name or 'a value'},"
          f" computed by an operation the producer warpgroup cannot repeat", d.loc,
          hint="compute them from program ids, loop indices, scalar arithmetic and elements of the kernel's"
               " inputs read directly (lens[b], not a copy of lens in SMEM or registers, nor a reduction"
               " of it)")
    todo += [x for x in d.operands() if isinstance(x, ir.Value)]
  return need


def _branch_ops(o) -> list:
  return [x for g in o.regions for x in ir.walk(getattr(o, g))]


def _repeatable_if(d) -> bool:
  """An if of scalars the producer may repeat, as the tracer writes `a if c else b` and a run-time `c or d` (an If
  with scalar results whose branches hold only scalar arithmetic, reads of inputs' elements (a view and its
  ScalarRead) and such ifs; probe 63b: MG503 before)."""
  return (isinstance(d, If) and bool(d.results) and all(isinstance(r.type, ScalarType) for r in d.results)
          and all(isinstance(x, (Yield, View)) or pure_scalar(x) or _repeatable_if(x) for x in _branch_ops(d)))


def _clone_deep(o, mapping, em):
  """A copy of `o` with fresh results, its regions' ops copied too (an if of scalars `_repeatable_if` takes)."""
  blocks = {g: ir.Block([_clone_deep(x, mapping, em) for x in getattr(o, g).ops], args=getattr(o, g).args)
            for g in o.regions}
  c = ir.clone(o, mapping)
  if blocks:
    c = dataclasses.replace(c, **blocks)
  for r in c.results:
    em.defs[r.id] = c
  return c


def _slice_block(ops, path, depth, need, mapping, plan, empty, em) -> list:
  out = []
  target = path[depth]
  for o in ops:
    if o is target:
      out += _slice_op(o, path, depth, need, mapping, plan, empty, em)
      break
    if any(id(r) in need for r in o.results) and not isinstance(o, SmemAlloc):
      out.append(_clone_deep(o, mapping, em))
  return out


def _slice_op(o, path, depth, need, mapping, plan, empty, em) -> list:
  sub = lambda x: mapping.get(x, x) if isinstance(x, ir.Value) else x
  loc = o.loc
  if o is path[-1]:
    pre = [ir.clone(p, mapping) for p in plan.pre if any(id(r) in need for r in p.results)]
    for c in pre:
      for r in c.results:
        em.defs[r.id] = c
    k = ir.Value(I32, plan.iv.name)
    body = ir.Block(args=(k,))
    with em.region(body):
      stage = mod(em, k, plan.stages, loc)
    body.ops.append(BarrierWait(empty, stage, loc))
    issue(em, plan, body, k, mapping, stage)
    body.ops.append(Yield((), loc))
    return pre + [For(0, sub(plan.loop.stop), 1, (), body, loc, ())]
  if isinstance(o, For):
    iv = ir.Value(o.body.args[0].type, o.body.args[0].name)
    mapping[o.body.args[0]] = iv
    inner = _slice_block(o.body.ops, path, depth + 1, need, mapping, plan, empty, em)
    body = ir.Block(inner + [Yield((), loc)], args=(iv,))
    return [For(sub(o.start), sub(o.stop), sub(o.step), (), body, loc, ())]
  if isinstance(o, If):
    taken = o.then_block if _inside(o.then_block, path[depth + 1]) else o.else_block
    inner = ir.Block(_slice_block(taken.ops, path, depth + 1, need, mapping, plan, empty, em) + [Yield((), loc)])
    empty_b = ir.Block([Yield((), loc)])
    then_b, else_b = (inner, empty_b) if taken is o.then_block else (empty_b, inner)
    return [If(sub(o.cond), then_b, else_b, loc, ())]
  raise E.WarpSpecializeError(
      f"a warp-specialised loop inside {type(o).__name__.lower()} is not supported", o.loc,
      hint="put the loop in the kernel body, or in for loops and ifs")


def _inside(block, target) -> bool:
  return any(o is target for o in ir.walk(block))
