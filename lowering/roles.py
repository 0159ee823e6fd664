"""Warp-specialised roles and the compiler's barrier values, on both backends.

On the GPU the producer warpgroup (the last one) and the compute warpgroups run their
regions of a `WarpSpecialize` op after trading registers (setmaxnreg). The interpreter
runs the two regions as coroutines of one CTA: each runs until it waits for something
the other has not done yet (a barrier phase, a TMA load); when neither can move, the
kernel would hang on the GPU, and that is reported at the waits.
"""
from __future__ import annotations

import dataclasses

import jax.experimental.mosaic.gpu as mgpu
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, nvvm, scf

from ..frontend import hw
from ..frontend.ops.control import BarrierAlloc, BarrierArrive, BarrierWait, WarpSpecialize
from ..frontend.errors import InterpretError
from .mosaic import operand
from .registry import interpret, lower

CollectiveBarrierRef = getattr(mgpu, "CollectiveBarrierRef", None) or mgpu.utils.CollectiveBarrierRef


# ---------------------------------------------------------------- Mosaic GPU
@lower(WarpSpecialize)
def _warp_specialize(ctx, o):
  i32 = ir.IntegerType.get_signless(32)
  producer = arith.constant(i32, ctx.kernel.block // hw.WARPGROUP)
  is_producer = arith.cmpi(arith.CmpIPredicate.eq, mgpu.warpgroup_idx(sync=True), producer)
  branch = scf.IfOp(is_producer, [], has_else=True)
  for block, role, regs, action in (
      (branch.then_block, "producer", o.producer_regs, nvvm.SetMaxRegisterAction.decrease),
      (branch.else_block, "consumer", o.consumer_regs, nvvm.SetMaxRegisterAction.increase)):
    with ir.InsertionPoint(block):
      nvvm.setmaxregister(regs, action)
      with ctx.in_role(role):
        ctx.lower_block(getattr(o, role), yield_fn=lambda vals: None)
      scf.YieldOp([])


@lower(BarrierAlloc)
def _barrier_alloc(ctx, o):
  ctx.set(o.result, ctx.role_barriers[o.result.id])


def _barrier(ctx, o):
  index = operand(ctx, o.index)
  return ctx.get(o.barrier)[index]


@lower(BarrierArrive)
def _barrier_arrive(ctx, o):
  bar = _barrier(ctx, o)
  if o.sync:
    mgpu.utils.warpgroup_barrier()   # one thread arrives for its warpgroup: all must be done
  if isinstance(bar, CollectiveBarrierRef):
    bar.arrive()                     # arrives for the warpgroup on this CTA's and the peers' barrier
  else:
    bar.arrive(predicate=mgpu.single_thread_predicate(mgpu.ThreadSubset.WARPGROUP))


@lower(BarrierWait)
def _barrier_wait(ctx, o):
  _barrier(ctx, o).wait()


# ---------------------------------------------------------------- interpreter
@dataclasses.dataclass
class Blocked:
  """What a role coroutine yields when it must wait for the other role."""
  loc: object
  what: str


@dataclasses.dataclass
class Barriers:
  """`count` mbarriers: completed phases per barrier, waits per (role, barrier)."""
  completed: list
  waits: dict = dataclasses.field(default_factory=dict)


@interpret(WarpSpecialize)
def _i_warp_specialize(cta, o):
  running = {"producer": cta.block(o.producer), "consumer": cta.block(o.consumer)}
  blocked = {}
  while running:
    before = cta.steps
    for role in list(running):      # the producer first: it runs as far ahead as it may
      cta.role = role
      try:
        blocked[role] = next(running[role])
      except StopIteration:
        del running[role]
        blocked.pop(role, None)
    cta.role = None
    if running and cta.steps == before:
      waits = [blocked[r] for r in running]
      raise InterpretError(
          f"the kernel hangs: the {' and the '.join(running)} {'wait' if len(running) > 1 else 'waits'}"
          f" for each other ({waits[0].what})", waits[0].loc,
          notes=tuple(f"{w.loc}: {w.what}" for w in waits[1:]),
          hint="the compiler builds the roles' barriers; an IR that hangs is a bug in mgpu_dsl, please"
               " report it")


@interpret(BarrierAlloc)
def _i_barrier_alloc(cta, o):
  cta.set(o.result, Barriers([0] * o.result.type.count))


@interpret(BarrierArrive)
def _i_barrier_arrive(cta, o):
  cta.get(o.barrier).completed[int(cta.operand(o.index))] += 1   # every warpgroup of the role arrives
  cta.touched.clear()                # and releases its accesses to whoever waits for the phase
  if cta.role is not None:           # the other role runs at once: a stage released while a dot of this
    yield Blocked(o.loc, "arrived")  # role may still read it is refilled under that dot (a RaceError)


@interpret(BarrierWait)
def _i_barrier_wait(cta, o):
  bar, i = cta.get(o.barrier), int(cta.operand(o.index))
  n = bar.waits.get((cta.role, i), 0)
  while bar.completed[i] <= n:
    if cta.role is None:
      raise InterpretError("the kernel hangs: it waits on a barrier nothing arrives on", o.loc,
                           hint="this barrier is the compiler's; a kernel that reaches this is a bug in"
                                " mgpu_dsl, please report it")
    yield Blocked(o.loc, f"waiting for phase {n} of barrier {i}")
  bar.waits[(cta.role, i)] = n + 1


def wait_for_load(cta, barrier: int, loc):
  """In a role, a WaitLoad waits until the producer has issued the load it waits for."""
  while cta.role is not None and cta.issued.get(barrier, 0) <= cta.waited.get(barrier, 0):
    yield Blocked(loc, f"waiting for a TMA load on barrier {barrier}")
  cta.waited[barrier] = cta.waited.get(barrier, 0) + 1
