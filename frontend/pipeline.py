"""Software pipelining of `for k in ml.range(n, stages=S)` loops.

The TMA loads at the top of such a loop's body (frontend/pipeline_plan.py finds and
checks them) are issued `d` iterations ahead, into S copies of each loaded buffer
with S barriers per load site:

    prologue:   for s < min(d, n): load iteration s into stage s
    for k:      wait for stage k % S
                body (reads stage k % S; writes store stage k % S, TMA-stores it)
                guard: the stage refilled next is no longer read
                if k + d < n: load iteration k + d into stage (k + d) % S
                (guard and refill at the body's end, or earlier: see below)

d = S when the loaded buffers are only read into registers (reads end inside
the iteration, so the refill reuses this iteration's stage after a barrier);
d = S - 1 when dots or TMA stores read them asynchronously (the refill reuses
the previous iteration's stage once its dots and stores retire: DotWait(1),
AwaitStores(pending=stores per iteration)). When only dots read them and the body
reads a dot's result, the guard and refill move up to just before that first read
(`early_refill`): the wait there retires the previous iteration's dots, so the
next loads are issued while the rest of this iteration runs.

Buffers the body writes whole from registers and then TMA-stores (store
buffers) get S copies too: iteration k writes stage k % S, and the sync pass
defers the wait on that stage's previous store to just before the write, allowing
(S - 1) * (stores per iteration) newer stores to stay in flight
(`Pipelined.deferred`). The loaded buffers' waits are explicit here
(`Pipelined.explicit`); the sync pass leaves them alone.

A loop with `warp_specialize=True` is rewritten by frontend/warp_specialize.py instead.
"""
from __future__ import annotations

import dataclasses

from . import errors as E
from . import hw
from . import ir
from .dtypes import DType
from .ir import Access
from .ops.control import LOOPS, AwaitStores, Barrier, For, If, Yield
from .ops.elementwise import BinOp, Binary, CmpOp, Compare
from .ops.memory import Copy, SmemAlloc, View
from .ops.mma import DotWait
from .pipeline_plan import I32, issue, make_plan, multibuffer, staged_body, stores_per_iteration
from .types import ScalarType, Space


@dataclasses.dataclass
class Pipelined:
  """What the sync pass needs to know about the pipelined loops."""
  explicit: set = dataclasses.field(default_factory=set)    # loaded roots: waits inserted here
  deferred: dict = dataclasses.field(default_factory=dict)  # store-buffer root id -> stores left in flight


def pipeline_loops(kernel: ir.Kernel, em) -> Pipelined:
  """Rewrite every pipelined loop of `kernel` (the warp-specialised one last)."""
  out, specialized = Pipelined(), []
  _own_buffers(kernel, em)
  _rewrite_block(kernel, kernel.body, em, out, specialized)
  if specialized:
    from .warp_specialize import warp_specialize
    if len(specialized) > 1 and all(o.loc == specialized[0].loc for o in specialized):
      raise E.WarpSpecializeError(
          f"a kernel may have one warp-specialised loop, and this one is traced {len(specialized)} times: an"
          f" ml.static_range loop (or a Python loop over a static sequence) around it copies it once a trip,"
          f" as does an @ml.inline helper holding it called more than once",
          specialized[0].loc,
          hint="make the outer loop a run-time loop, for r in range(n): ..., which keeps one warp-specialised"
               " loop inside it; or call the helper once")
    if len(specialized) > 1:
      raise E.WarpSpecializeError(
          "a kernel may have one warp-specialised loop; this is a second one", specialized[1].loc,
          notes=(f"{specialized[0].loc}: the first one",),
          hint="keep warp_specialize=True on the main loop only")
    warp_specialize(kernel, specialized[0], em, out)
  _check_multicasts(kernel.body, in_producer=False)
  return out


def _own_buffers(kernel, em) -> None:
  """Pipelined loops that load one buffer one after the other (the two phases of a causal
  attention's loop over keys) each get a buffer of their own, allocated just before the loop:
  each is multi-buffered for its own stages, and the SMEM planner lets them share memory (their
  lifetimes do not overlap). A buffer also used outside those loops stays as it is (the
  pipelining reports it)."""
  loops = []          # (block, loop) of every pipelined loop

  def walk(block):
    for o in block.ops:
      if isinstance(o, For) and o.stages > 1:
        loops.append((block, o))
      for r in o.regions:
        walk(getattr(o, r))
  walk(kernel.body)
  if len(loops) < 2:
    return
  defs = {r.id: o for o in ir.walk(kernel.body) for r in o.results}

  def root(v):
    while isinstance(defs.get(v.id), View):
      v = defs[v.id].ref
    return v

  loaded = {}          # alloc value -> the loops that TMA-load it at their top level
  for _, loop in loops:
    for o in loop.body.ops:
      if isinstance(o, Copy) and o.dst.type.space == Space.SMEM and isinstance(defs.get(root(o.dst).id), SmemAlloc):
        loaded.setdefault(root(o.dst), [])
        if not any(l is loop for l in loaded[root(o.dst)]):
          loaded[root(o.dst)].append(loop)
  for buf, users in loaded.items():
    if len(users) < 2:
      continue
    inside = {id(x) for loop in users for x in ir.walk(loop.body)}
    if any(buf in x.operands() and id(x) not in inside for x in ir.walk(kernel.body)):
      continue
    alloc = defs[buf.id]
    for loop in users[1:]:
      block = next(b for b, l in loops if l is loop)
      new = ir.Value(buf.type, buf.name)
      op = SmemAlloc(loc=alloc.loc, results=(new,))
      em.defs[new.id] = op
      kernel.smem.append(new)
      loop.body.ops[:] = [ir.substitute_deep(x, {buf: new}) for x in loop.body.ops]
      for x in ir.walk(loop.body):   # the passes after this one find each view's buffer through
        for r in x.results:          # em.defs: point them at the rewritten ops (the layout pass
          em.defs[r.id] = x          # tiled the first loop's buffer for the second loop's dot)
      block.ops.insert(next(i for i, x in enumerate(block.ops) if x is loop), op)


def _check_multicasts(block, *, in_producer):
  from .ops.control import WarpSpecialize
  for o in block.ops:
    if isinstance(o, Copy) and o.multicast is not None and not in_producer:
      raise E.WarpSpecializeError(
          "ml.copy(..., multicast=) is supported for the loads of a warp-specialised loop only", o.loc,
          hint="load it in a loop ml.range(n, stages=s, warp_specialize=True), or drop multicast=")
    for r in o.regions:
      _check_multicasts(getattr(o, r), in_producer=in_producer or (isinstance(o, WarpSpecialize)
                                                                   and r == "producer"))


def _rewrite_block(kernel, block, em, out, specialized, in_loop=False):
  ops = []
  for o in block.ops:
    for r in o.regions:
      _rewrite_block(kernel, getattr(o, r), em, out, specialized, in_loop or isinstance(o, LOOPS))
    if isinstance(o, For) and o.stages > 1 and o.warp_specialize:
      specialized.append(o)
      ops.append(o)
    elif isinstance(o, For) and o.stages > 1:
      ops.extend(_pipeline(kernel, o, em, out, nested=in_loop))
    else:
      ops.append(o)
  block.ops[:] = ops


def early_refill(body, plan):
  """(index, pending) where the refill may go before the body's end: just before the first op
  that reads the result of a dot issued in this iteration (not as another dot's accumulator).
  Waiting there for that dot (`pending` newer ones stay in flight) retires every dot of the
  previous iteration, the only readers of the stage refilled, so the next loads are issued
  while this iteration still computes (with two stages, a whole iteration earlier). None when
  the body also reads the loaded buffers by TMA (TMA_WRITE: the loop's own loads), or when a
  nested region comes first."""
  if plan.reads - {Access.MMA_READ, Access.REG_READ, Access.TMA_WRITE} or Access.MMA_READ not in plan.reads:
    return None
  dots = []
  for i, o in enumerate(body.ops):
    if o.regions:
      return None
    issues = any(a == Access.MMA_ISSUE for _, a in ir.traits_of(o).effects(o))
    reads = [v for v in o.operands() if not (issues and v is getattr(o, "acc", None))]
    hit = [j for j, d in enumerate(dots) if any(v is d for v in reads)]
    if hit:
      return i, len(dots) - 1 - max(hit)
    if issues:
      dots.append(o.results[0] if o.results else None)
  return None


def record(plan, body, result: Pipelined):
  """The loaded roots the loop synchronises itself; the store buffers' deferred waits."""
  result.explicit |= {buf.id for buf in plan.loaded}
  for buf in plan.stores:
    result.deferred[buf.id] = (plan.stages - 1) * stores_per_iteration(body)


def _pipeline(kernel, loop: For, em, result: Pipelined, nested=False):
  plan = make_plan(kernel, loop, em)
  multibuffer(kernel, plan, em)
  S, loop, loc = plan.stages, plan.loop, plan.loop.loc
  ahead = S - 1 if plan.async_reads else S          # iterations a load is issued ahead of its use

  def guarded(block, cond_lhs, fill):
    """`if cond_lhs < trip: fill(...)` appended to block."""
    with em.region(block):
      cond = em.emit(Compare, CmpOp.LT, cond_lhs, loop.stop, loc=loc, types=[ScalarType(DType.bool_)]).result
    then_b = ir.Block()
    fill(then_b)
    then_b.ops.append(Yield((), loc))
    block.ops.append(If(cond, then_b, ir.Block([Yield((), loc)]), loc, ()))

  # The prologue: a loop over the first min(ahead, trip) iterations (one copy of the load code).
  prologue = ir.Block(list(plan.pre))
  if nested and Access.TMA_READ in plan.reads:
    # the loop runs again (an outer loop's next trip): its last trips' TMA stores of the stages they loaded may
    # still be reading them, and the prologue refills those stages (probe 66a: MG951 in interpret mode, a race on
    # the GPU); the body's own waits keep the last trip's stores in flight
    prologue.ops.append(AwaitStores(True, loc, pending=0))
  with em.region(prologue):
    first = min(ahead, loop.stop) if isinstance(loop.stop, int) else em.emit(
        Binary, BinOp.MIN, loop.stop, ahead, loc=loc, types=[I32]).result
  it = ir.Value(I32, "prologue")
  fill = ir.Block(args=(it,))
  issue(em, plan, fill, it)
  fill.ops.append(Yield((), loc))
  prologue.ops.append(For(0, first, 1, (), fill, loc, ()))

  # The body: wait for this stage, run the body on it, refill a free stage.
  new_body, _ = staged_body(em, plan)
  record(plan, new_body, result)
  early = early_refill(new_body, plan)
  tail = ir.Block()
  if early is not None:                 # as soon as the previous iteration's dots have retired
    at, pending = early
    tail.ops.append(DotWait(pending, loc))
  elif Access.MMA_READ in plan.reads:
    tail.ops.append(DotWait(1, loc))
  if Access.TMA_READ in plan.reads:     # includes a barrier
    tail.ops.append(AwaitStores(True, loc, pending=stores_per_iteration(new_body)))
  elif Access.REG_READ in plan.reads or (Access.MMA_READ in plan.reads and kernel.block > hw.WARPGROUP):
    tail.ops.append(Barrier(loc))       # every thread is done with the stage before it refills
  with em.region(tail):
    nxt = em.emit(Binary, BinOp.ADD, plan.iv, ahead, loc=loc, types=[I32]).result
  guarded(tail, nxt, lambda b: issue(em, plan, b, nxt))
  if early is None:
    new_body.ops.extend(tail.ops)
  else:
    new_body.ops[at:at] = tail.ops
  new_body.ops.append(loop.body.ops[-1])
  ir.prune_dead(new_body)
  new_loop = dataclasses.replace(loop, body=new_body)
  for r in new_loop.results:
    em.defs[r.id] = new_loop
  return prologue.ops + [new_loop]
