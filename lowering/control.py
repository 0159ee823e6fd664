"""Control and synchronisation ops on both backends: the grid, loops, branches, barriers, waits."""
from __future__ import annotations

import hashlib

import jax
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu, llvm, nvvm, scf

from ..frontend.ops.control import (AwaitStores, Barrier, ClusterSync, CommitShared, Condition, For,
                                    If, MultipleOf, NumPrograms, PositiveStep, ProgramId, Turn, WaitLoad, While,
                                    Yield, terminator_values)
from ..frontend.errors import InterpretError
from .memory import stage_of
from .mosaic import flat_types, i32, operand
from .registry import interpret, lower
from . import interpret_padding as P
from . import roles  # noqa: E402  (warp-specialised roles and barrier values: the same family)

_DIMS = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)


# ---------------------------------------------------------------- Mosaic GPU
@lower(ProgramId)
def _program_id(ctx, o):
  ctx.set(o.result, arith.index_cast(i32(), gpu.block_id(_DIMS[o.axis])))


@lower(NumPrograms)
def _num_programs(ctx, o):
  ctx.set(o.result, arith.index_cast(i32(), gpu.grid_dim(_DIMS[o.axis])))


@lower(For)
def _for(ctx, o):
  iv_dtype = o.body.args[0].type.dtype
  unsigned = getattr(iv_dtype, "is_int", False) and not iv_dtype.is_signed
  counts64 = getattr(iv_dtype, "bits", 32) == 64      # int64 bounds (jax_enable_x64): an int64 index
  bounds = [operand(ctx, x) for x in (o.start, o.stop, o.step)]
  # The counter steps past the last index before the loop ends: where that can pass 2**31 (run-time
  # bounds, or static ones near it) the loop counts in 64 bits, as Python's range would.
  wide = counts64 or any(not isinstance(x, int) for x in bounds) or bounds[1] + bounds[2] > 2 ** 31 - 1
  i64 = ir.IntegerType.get_signless(64)

  def bound(x):
    if isinstance(x, int):
      return arith.constant(i64 if wide else i32(), x)
    if counts64:
      return x                                           # (the frontend made every bound int64)
    return (arith.extui if unsigned else arith.extsi)(i64, x) if wide else x
  inits = [ctx.carried(v) for v in o.inits]
  flat, tree = jax.tree.flatten(inits)
  loop = scf.ForOp(*map(bound, bounds), flat)
  if unsigned and not wide:
    loop.operation.attributes["unsignedCmp"] = ir.UnitAttr.get()    # uint32 bounds past 2**31
  with ir.InsertionPoint(loop.body):
    iv, *args = o.body.args
    ctx.set(iv, arith.trunci(i32(), loop.induction_variable) if wide and not counts64 else loop.induction_variable)
    for a, v in zip(args, jax.tree.unflatten(tree, list(loop.inner_iter_args))):
      ctx.set(a, v)
    ctx.lower_block(o.body, yield_fn=lambda vals: scf.YieldOp(jax.tree.flatten(vals)[0]),
                    carried=True)
  for r, v in zip(o.results, jax.tree.unflatten(tree, list(loop.results))):
    ctx.set(r, v)


@lower(While)
def _while(ctx, o):
  flat, tree = jax.tree.flatten([ctx.carried(v) for v in o.inits])
  types = [v.type for v in flat]
  loop = scf.WhileOp(types, flat)
  before = loop.before.blocks.append(*types)
  with ir.InsertionPoint(before):
    for a, v in zip(o.before.args, jax.tree.unflatten(tree, list(before.arguments))):
      ctx.set(a, v)
    ctx.lower_block(o.before, carried=True, yield_fn=lambda vals: scf.ConditionOp(
        vals[0], jax.tree.flatten(vals[1:])[0]))
  after = loop.after.blocks.append(*types)
  with ir.InsertionPoint(after):
    for a, v in zip(o.body.args, jax.tree.unflatten(tree, list(after.arguments))):
      ctx.set(a, v)
    ctx.lower_block(o.body, carried=True, yield_fn=lambda vals: scf.YieldOp(jax.tree.flatten(vals)[0]))
  for r, v in zip(o.results, jax.tree.unflatten(tree, list(loop.results))):
    ctx.set(r, v)


@lower(If)
def _if(ctx, o):
  types = [t for r in o.results for t in flat_types(ctx, r.type)]
  op_ = scf.IfOp(ctx.get(o.cond), types, has_else=True)
  trees = []

  def yield_fn(vals):
    flat, tree = jax.tree.flatten(vals)
    trees.append(tree)
    scf.YieldOp(flat)

  with ir.InsertionPoint(op_.then_block):
    ctx.lower_block(o.then_block, yield_fn=yield_fn)
  with ir.InsertionPoint(op_.else_block):
    ctx.lower_block(o.else_block, yield_fn=yield_fn)
  for r, v in zip(o.results, jax.tree.unflatten(trees[0], list(op_.results))):
    ctx.set(r, v)


@lower(MultipleOf, PositiveStep)
def _multiple_of(ctx, o):
  ctx.set(o.result, ctx.get(o.x))      # a promise the frontend uses (checked in interpret mode); no code


@lower(Yield, Condition)
def _yield(ctx, o):
  raise AssertionError(f"{type(o).__name__} is lowered by its parent region")


@lower(WaitLoad)
def _wait_load(ctx, o):
  ctx.barrier(o.slot, o.stage).wait()


@lower(AwaitStores)
def _await_stores(ctx, o):
  nvvm.cp_async_bulk_wait_group(o.pending, read=o.read_only)
  ctx.thread_barrier()


@lower(CommitShared)
def _commit_shared(ctx, o):
  if not o.only_global:
    nvvm.fence_proxy(nvvm.ProxyKind.async_shared, space=nvvm.SharedSpace.shared_cta)
  if o.global_:
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [], "fence.proxy.async.global;", "", has_side_effects=True)
  ctx.thread_barrier()


@lower(Barrier)
def _barrier(ctx, o):
  ctx.thread_barrier()


@lower(Turn)
def _turn(ctx, o):
  ctx.turn(o.take, o.only)


@lower(ClusterSync)
def _cluster_sync(ctx, o):
  if _writes_peers(ctx.kernel):
    # A peer may next read what this CTA wrote into its SMEM through the async proxy (a TMA
    # store, ml.dot): order those generic-proxy writes first, as commit_shared does locally.
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [], "fence.proxy.async;", "", has_side_effects=True)
  nvvm.cluster_arrive(aligned=True)
  nvvm.cluster_wait(aligned=True)


def _writes_peers(kernel) -> bool:
  """Whether registers write another CTA's SMEM (ml.cluster_ref(...)[...] = v) anywhere."""
  from ..frontend import ir as kir
  from ..frontend.ir import Access
  return any(acc in (Access.REG_WRITE,) and ref is not None and getattr(ref.type, "remote", False)
             for o in kir.walk(kernel.body) for ref, acc in kir.traits_of(o).effects(o))


# ---------------------------------------------------------------- interpreter
@interpret(ProgramId)
def _i_program_id(cta, o):
  cta.set(o.result, np.asarray(cta.pid[o.axis], np.int32))


@interpret(NumPrograms)
def _i_num_programs(cta, o):
  cta.set(o.result, np.asarray(cta.m.kernel.grid[o.axis], np.int32))


def _check_step(step, loc):
  if step <= 0:
    raise InterpretError(f"this loop's run-time step is {step}: a loop counts upwards, so a run-time"
                         f" step must be positive (with a step of 0 or less the GPU would skip the"
                         f" loop or never end it)", loc,
                         hint="count down with range(n) and an index n - 1 - i inside the loop, or pass a"
                              " positive step")


@interpret(PositiveStep)
def _i_positive_step(cta, o):
  x = cta.get(o.x)
  _check_step(int(x), o.loc)
  cta.set(o.result, x)


@interpret(For)
def _i_for(cta, o):
  start, stop, step = (int(cta.operand(x)) for x in (o.start, o.stop, o.step))
  _check_step(step, o.loc)
  carried = [cta.get(v) for v in o.inits]
  iv, *args = o.body.args
  dt = iv.type.dtype
  if not range(start, stop, step):
    cta.m.skipped_branches.add(id(o.body))      # no trip here (for MG602's hint)
  handed = o.inits                  # (the values whose padding lanes the carries take: interpret_padding.py)
  for i in range(start, stop, step):
    cta.set(iv, np.asarray(i, np.int64 if getattr(dt, "bits", 32) == 64 else
                           np.uint32 if getattr(dt, "is_int", False) and not dt.is_signed else np.int32))
    for a, v in zip(args, carried):
      cta.set(a, v)
    _follow(cta, args, handed)
    carried = yield from cta.block(o.body)
    handed = terminator_values(o.body.ops[-1])
  for r, v in zip(o.results, carried):
    cta.set(r, v)
  _follow(cta, o.results, handed)


def _follow(cta, dsts, srcs):
  """Interpret mode's padding lanes (MG953) handed on with a loop's or branch's values."""
  if cta.m.track_pads and srcs is not None:
    P.carry(cta, dsts, srcs)


MAX_WHILE_ITERATIONS = 10 ** 7


def _loop_memory(o) -> tuple[bool, bool]:
  """(whether a trip of While `o` may write memory or wait on a cluster's peers, whether it reads memory).
  An atomic that returns the old value (a cas, an xchg; of a single element or a tensor) reads, and writes only
  where it changes an element, which the trip then counts (interpret_sync.py)."""
  from ..frontend import ir as fir
  from ..frontend.ops.atomic import AtomicUpdate
  from .interpret_sync import olds
  writes = reads = False
  for x in (*fir.walk(o.before), *fir.walk(o.body)):
    if isinstance(x, ClusterSync):
      writes = True
    if isinstance(x, AtomicUpdate) and olds(x):         # (a tensor's old values too: probe 50c)
      reads = True
      continue
    for _, kind in fir.traits_of(x).effects(x):
      if kind in (fir.Access.REG_READ, fir.Access.TMA_READ, fir.Access.MMA_READ):
        reads = True
      else:
        writes = True
  return writes, reads


def _same(a, b) -> bool:
  try:
    return all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True) for x, y in zip(a, b, strict=True))
  except (TypeError, ValueError):
    return False


def _cycled(seen: dict, vals, changes: int) -> bool:
  """Whether the values a trip hands on were handed on before with memory unchanged since (`changes`, the count of
  what the programs' atomics changed, the same): a trip of such a loop depends on nothing else, so it repeats that
  cycle forever (probe 70a: lanes probing a full hash table, each cas failing as the slots go round). Brent's cycle
  detection on a 16-byte digest of the state (loops carrying up to 64 KiB): one saved state, moved at powers of two,
  finds a cycle of any length within twice the trips to it and round it; a change of memory starts afresh."""
  try:
    arrays = [np.asarray(v) for v in vals]
    if sum(a.nbytes for a in arrays) > 1 << 16 or any(a.dtype == object for a in arrays):
      return False
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
      h.update(str(a.dtype).encode() + bytes(str(a.shape), "ascii"))
      h.update(np.ascontiguousarray(a).tobytes())
    key = h.digest()
  except (TypeError, ValueError):
    return False
  if seen.get("changes") != changes:
    seen.update(changes=changes, saved=None, power=1, steps=0)
  if key == seen["saved"]:
    return True
  seen["steps"] += 1
  if seen["steps"] >= seen["power"]:
    seen.update(saved=key, power=seen["power"] * 2, steps=0)
  return False


@interpret(While)
def _i_while(cta, o):
  vals = [cta.get(v) for v in o.inits]
  writes, reads = _loop_memory(o)
  handed = o.inits
  seen: dict = {}          # _cycled's state: the saved digest, its window, the count of memory changes it was saved at
  for trip in range(MAX_WHILE_ITERATIONS):
    changes = getattr(cta, "rmw_changes", 0)
    for a, v in zip(o.before.args, vals):
      cta.set(a, v)
    _follow(cta, o.before.args, handed)
    cond, *vals = yield from cta.block(o.before)
    handed = (terminator_values(o.before.ops[-1]) or [None])[1:]
    if not bool(cond):
      if trip == 0:
        cta.m.skipped_branches.add(id(o.body))  # no trip here (for MG602's hint)
      break
    for a, v in zip(o.body.args, vals):
      cta.set(a, v)
    _follow(cta, o.body.args, handed)
    before = vals
    vals = yield from cta.block(o.body)
    handed = terminator_values(o.body.ops[-1])
    same = _same(before, vals)
    cycled = not same and not writes and _cycled(seen, vals, getattr(cta.m, "changes", 0))
    if not writes and (same or cycled) and getattr(cta, "rmw_changes", 0) == changes:
      # A trip that changes neither what the loop carries nor memory: the next one is the same, forever
      # (no other program runs meanwhile in interpret mode; on the GPU one may, but nothing orders its
      # write before this read: a spin-wait on a flag another program sets, `while flags[i - 1] == 0: pass`;
      # a cas on a lock that an ended program holds: interpret_sync.spin_error). Where programs wait on each
      # other through atomics, this one steps aside for the others (interpret_sync.run_cooperative).
      from .interpret_sync import Spin, cycle_error, spin_error
      if not getattr(cta.m, "cooperative", False):
        raise cycle_error(cta, o, trip + 1) if cycled else spin_error(cta, o, reads)
      yield Spin(o, reads, cta.m.changes, trip + 1 if cycled else 0)
  else:
    raise InterpretError(f"this while loop ran {MAX_WHILE_ITERATIONS} iterations in program {cta.label}"
                         " without its condition failing: on the GPU it would hang", o.loc,
                         hint="check that the loop's body moves its condition towards False")
  for r, v in zip(o.results, vals):
    cta.set(r, v)
  _follow(cta, o.results, handed)


@interpret(If)
def _i_if(cta, o):
  taken = bool(cta.get(o.cond))
  cta.m.skipped_branches.add(id(o.else_block if taken else o.then_block))   # (for MG602's hint)
  blk = o.then_block if taken else o.else_block
  vals = yield from cta.block(blk)
  for r, v in zip(o.results, vals):
    cta.set(r, v)
  if vals:
    _follow(cta, o.results, terminator_values(blk.ops[-1]))


@interpret(MultipleOf)
def _i_multiple_of(cta, o):
  x = cta.get(o.x)
  if int(x) % o.multiple:
    raise InterpretError(
        f"ml.multiple_of promises a multiple of {o.multiple}, but {o.x.name or 'the value'} is {int(x)}"
        f" in program {cta.label}", o.loc,
        hint=f"promise only what holds in every program, or make the value a multiple of {o.multiple}")
  cta.set(o.result, x)


@interpret(Yield, Condition)
def _i_yield(cta, o):
  raise AssertionError(f"{type(o).__name__} is run by its parent region")


@interpret(WaitLoad)
def _i_wait_load(cta, o):
  barrier = o.slot + stage_of(cta, o.stage)
  yield from roles.wait_for_load(cta, barrier, o.loc)
  for key in [k for k, (slot, _) in cta.pending_load.items() if slot == barrier]:
    del cta.pending_load[key]


@interpret(AwaitStores)
def _i_await_stores(cta, o):
  cta.retire_stores(o.pending)
  if not o.read_only:                # the stores' GMEM writes are done too
    del cta.pending_gmem[:max(len(cta.pending_gmem) - o.pending, 0)]
  cta.touched.clear()


@interpret(CommitShared)
def _i_commit_shared(cta, o):
  cta.unfenced.clear()
  cta.touched.clear()


@interpret(Barrier)
def _i_barrier(cta, o):
  cta.touched.clear()


@interpret(Turn)
def _i_turn(cta, o):
  pass                               # scheduling only: interpret mode runs the warpgroups as one


@interpret(ClusterSync)
def _i_cluster_sync(cta, o):
  cta.touched.clear()
  cta.sync_loc = o.loc
  yield                              # the other CTAs of the cluster catch up here
