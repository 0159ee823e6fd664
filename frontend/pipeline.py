"""Software pipelining of `for k in ml.range(n, stages=S)` loops.

The TMA loads at the top of such a loop's body (copies of a GMEM window that
depends only on `k` and on values from before the loop, into an SMEM buffer
used only in the loop) are issued `d` iterations ahead, into S copies of the
buffer (a leading stage dimension) with S barriers per load site:

    prologue:   load iterations 0 .. d-1 into stages 0 .. d-1
    for k:      wait for stage k % S
                body (reads stage k % S; writes store stage k % S, TMA-stores it)
                guard: the stage refilled next is no longer read
                if k + d < n: load iteration k + d into stage (k + d) % S

d = S when the loaded buffers are only read into registers (reads end inside
the iteration, so the refill reuses this iteration's stage after a barrier);
d = S - 1 when dots or TMA stores read them asynchronously (the refill reuses
the previous iteration's stage once its dots and stores retire: DotWait(1),
AwaitStores(pending=stores per iteration)).

Buffers the body writes whole from registers and then TMA-stores (store
buffers) get S copies too: iteration k writes stage k % S, and the sync pass
defers the wait on that stage's previous store to just before the write, allowing
(S - 1) * (stores per iteration) newer stores to stay in flight
(`Pipelined.deferred`). The loaded buffers' waits are explicit here
(`Pipelined.explicit`); the sync pass leaves them alone.

A loop `ml.range(start, stop, step, stages=S)` is first rewritten to count
0 .. trip - 1 (trip = ceil((stop - start) / step), a runtime value if any bound
is), its index recomputed as start + k * step at the top of the body.
"""
from __future__ import annotations

import dataclasses

from . import errors as E
from . import hw
from . import ir
from .dtypes import DType
from .ir import Access
from .ops.control import AwaitStores, Barrier, For, If, WaitLoad, Yield
from .ops.elementwise import BinOp, Binary, CmpOp, Compare
from .ops.memory import Copy, SmemAlloc, Store, View, is_load
from .ops.mma import DotWait
from .types import RefType, ScalarType

I32 = ScalarType(DType.i32)


@dataclasses.dataclass
class Pipelined:
  """What the sync pass needs to know about the pipelined loops."""
  explicit: set = dataclasses.field(default_factory=set)    # loaded roots: waits inserted here
  deferred: dict = dataclasses.field(default_factory=dict)  # store-buffer root id -> stores left in flight


def pipeline_loops(kernel: ir.Kernel, em) -> Pipelined:
  """Rewrite every pipelined loop of `kernel`."""
  out = Pipelined()
  _rewrite_block(kernel, kernel.body, em, out)
  return out


def _rewrite_block(kernel, block, em, out):
  ops = []
  for o in block.ops:
    for r in o.regions:
      _rewrite_block(kernel, getattr(o, r), em, out)
    if isinstance(o, For) and o.stages > 1:
      ops.extend(_pipeline(kernel, o, em, out))
    else:
      ops.append(o)
  block.ops[:] = ops


def _pure_scalar(o) -> bool:
  """An op the pipeliner may clone into the prologue or the refill (address arithmetic)."""
  return ir.traits_of(o).pure and all(isinstance(r.type, ScalarType) for r in o.results) and bool(o.results)


def _arith(em, kind, a, b, loc):
  """a `kind` b on i32 scalars, folded when both are ints (Python semantics, as the DSL's)."""
  if isinstance(a, int) and isinstance(b, int):
    return {BinOp.ADD: a + b, BinOp.SUB: a - b, BinOp.MUL: a * b, BinOp.FLOORDIV: a // b}[kind]
  if kind == BinOp.MUL and 1 in (a, b):
    return b if a == 1 else a
  if kind in (BinOp.ADD, BinOp.SUB) and b == 0:
    return a
  return em.emit(Binary, kind, a, b, loc=loc, types=[I32]).result


def _normalize(loop: For, em):
  """(ops before the loop, a loop counting 0 .. trip - 1 by 1 with the same meaning)."""
  if loop.start == 0 and loop.step == 1:
    return [], loop
  loc, pre = loop.loc, ir.Block()
  with em.region(pre):
    span = _arith(em, BinOp.SUB, loop.stop, loop.start, loc)
    trip = _arith(em, BinOp.FLOORDIV, _arith(em, BinOp.ADD, span, _arith(em, BinOp.SUB, loop.step, 1, loc), loc),
                  loop.step, loc)
  old_iv, *carried = loop.body.args
  iv = ir.Value(I32, old_iv.name)
  body = ir.Block(args=(iv, *carried))
  with em.region(body):
    index = _arith(em, BinOp.ADD, loop.start, _arith(em, BinOp.MUL, iv, loop.step, loc), loc)
  mapping = {old_iv: index}
  body.ops.extend(ir.substitute_deep(o, mapping) for o in loop.body.ops)
  return pre.ops, dataclasses.replace(loop, start=0, stop=trip, step=1, body=body)


def _address_ops(body, view_op, iv):
  """The body ops computing `view_op`'s index operands, in order; None if impure."""
  defs = {r: o for o in body.ops for r in o.results}
  need, seen = [], set()

  def visit(v):
    if not isinstance(v, ir.Value) or v is iv or v not in defs or id(v) in seen:
      return True
    seen.add(id(v))
    o = defs[v]
    if not _pure_scalar(o) or not isinstance(v.type, ScalarType):
      return False
    ok = all(visit(x) for x in o.operands())
    need.append(o)
    return ok

  ok = all(visit(v) for v in view_op.operands() if v is not view_op.ref)
  return sorted(need, key=body.ops.index) if ok else None


def _load_sites(kernel, body, iv):
  """[(copy, its GMEM view op, the address ops)] of the loads to pipeline; checks them."""
  defs = {r: o for o in ir.walk(kernel.body) for r in o.results}
  body_ops = set(map(id, body.ops))
  in_body = {id(x) for x in ir.walk(body)}
  sites = []
  for o in body.ops:
    if not is_load(o):
      continue
    alloc, view = defs.get(o.dst), defs.get(o.src)
    if not isinstance(alloc, SmemAlloc) or id(alloc) in body_ops:
      continue
    others = [u for u in ir.walk(kernel.body) if o.dst in u.operands() and u is not o]
    if any(id(u) not in in_body for u in others):
      raise E.PipelineError(
          f"{o.dst.name} is loaded in a pipelined loop but also used outside it", o.loc,
          hint="give the loop its own buffers")
    if any(any(a in (Access.REG_WRITE, Access.TMA_WRITE) for r, a in ir.traits_of(u).effects(u)
               if r is o.dst) or isinstance(u, View) for u in others):
      raise E.PipelineError(
          f"{o.dst.name} is loaded by TMA in a pipelined loop, so the loop may only read it whole"
          f" (ml.dot, ml.copy from it, or [...])", o.loc,
          hint="write results into a separate ml.smem buffer (the compiler multi-buffers it too)")
    addr = _address_ops(body, view, iv) if isinstance(view, View) else []
    if addr is None:
      raise E.PipelineError(
          f"the window of this load depends on values computed in the loop body; a pipelined load's"
          f" window may depend only on the loop index and on values from before the loop", o.loc)
    _check_stage_alignment(o.dst, o.loc)
    sites.append((o, view, addr))
  return sites


def _check_stage_alignment(buf, loc):
  if buf.type.nbytes % hw.TMA_SMEM_ALIGN:
    raise E.TmaLimitError(
        f"{buf.name or 'this buffer'} ({buf.type.nbytes} bytes) cannot get one copy per stage of"
        f" this pipelined loop: TMA needs each copy to start at a multiple of {hw.TMA_SMEM_ALIGN} bytes",
        loc, hint=f"make the buffer a multiple of {hw.TMA_SMEM_ALIGN} bytes, or use stages=1")


def _loop_bytes(bufs, stages, sites, slots_before):
  align = lambda n: -(-n // hw.SMEM_BUFFER_ALIGN) * hw.SMEM_BUFFER_ALIGN
  barriers = (slots_before + stages * sites) * hw.MBARRIER_BYTES
  return align(barriers) + sum(align(stages * b.type.nbytes) for b in bufs)


def _check_fits(kernel, bufs, S, sites, loc):
  """The loop's buffers, S copies each, all live at once: a clear error, at the loop, with the
  number of stages that fits (frontend/smem.py checks the whole kernel later)."""
  need = _loop_bytes(bufs, S, sites, kernel.num_load_slots)
  if need <= hw.SMEM_LIMIT:
    return
  fits = [s for s in range(S - 1, 1, -1) if _loop_bytes(bufs, s, sites, kernel.num_load_slots) <= hw.SMEM_LIMIT]
  per_stage = ", ".join(f"{b.name or '?'} {b.type.nbytes // 1024} KiB" for b in bufs)
  raise E.SmemCapacityError(
      f"with stages={S} this loop's buffers need {need} bytes ({per_stage} per stage, {S} copies each),"
      f" more than the {hw.SMEM_LIMIT} bytes (227 KiB) a CTA can use", loc,
      hint=(f"use stages={fits[0]} ({_loop_bytes(bufs, fits[0], sites, kernel.num_load_slots)} bytes)"
            f" or smaller tiles" if fits else "use smaller tiles"))


def _store_buffers(kernel, body, loaded) -> list:
  """SMEM buffers the body writes whole from registers before any other use and TMA-stores whole,
  used nowhere else: each iteration may use its own copy."""
  in_body = {id(x) for x in ir.walk(body)}
  body_ops = set(map(id, body.ops))
  out = []
  for alloc in (o for o in ir.walk(kernel.body) if isinstance(o, SmemAlloc)):
    buf = alloc.result
    if buf in loaded or id(alloc) in in_body or buf.type.nbytes % hw.TMA_SMEM_ALIGN:
      continue
    uses = [u for u in ir.walk(kernel.body) if buf in u.operands()]
    if not uses or any(id(u) not in in_body or isinstance(u, View) for u in uses):
      continue
    first = uses[0]
    stored = any(isinstance(u, Copy) and not is_load(u) and u.src is buf and id(u) in body_ops for u in uses)
    if stored and isinstance(first, Store) and first.ref is buf and id(first) in body_ops:
      out.append(buf)
  return out


def _pipeline(kernel, loop: For, em, result: Pipelined):
  S = loop.stages
  pre, loop = _normalize(loop, em)
  loc, body = loop.loc, loop.body
  iv = body.args[0]
  sites = _load_sites(kernel, body, iv)
  if not sites:
    raise E.PipelineError(
        "ml.range(..., stages=) found no TMA load to pipeline at the top level of this loop", loc,
        hint="load the loop's tiles with ml.copy(gmem.at[...k...], buf) into buffers allocated before the loop")
  loaded = [o.dst for o, _, _ in sites]
  stores = _store_buffers(kernel, body, loaded)
  reads = {a for u in ir.walk(body) for r, a in ir.traits_of(u).effects(u) if r in loaded}
  async_reads = bool(reads & {Access.MMA_READ, Access.TMA_READ})
  _check_fits(kernel, loaded + stores, S, len(sites), loc)
  ahead = S - 1 if async_reads else S          # iterations a load is issued ahead of its use

  # Multi-buffer each loaded and store buffer; give each load site S barriers.
  slots = {}
  for buf in loaded + stores:
    buf.type = dataclasses.replace(buf.type, shape=(S,) + buf.type.shape)
  for o, _, _ in sites:
    result.explicit.add(o.dst.id)
    group = hw.MAX_BARRIERS_PER_GROUP
    if em.num_load_slots % group + S > group:   # keep a site's barriers in one group
      em.num_load_slots += group - em.num_load_slots % group
    slots[id(o)] = em.num_load_slots
    em.num_load_slots += S
  kernel.num_load_slots = em.num_load_slots

  def stage_view(buf, stage):
    t = buf.type
    return em.emit(View, buf, (ir.Idx(stage, 1, True),) + tuple(ir.Idx(0, n) for n in t.shape[1:]),
                   loc=loc, types=[RefType(t.shape[1:], t.dtype, t.space)], names=[buf.name]).result

  def issue(block, it):
    """Loads of iteration `it` (an int or a scalar value) into stage it % S, appended to block."""
    with em.region(block):
      stage = it % S if isinstance(it, int) else em.emit(Binary, BinOp.MOD, it, S, loc=loc, types=[I32]).result
      for o, view, addr in sites:
        mapping = {iv: it}
        for a in addr:
          em.append(ir.clone(a, mapping))
        src = em.append(ir.clone(view, mapping)).result if isinstance(view, View) else o.src
        block.ops.append(Copy(src, stage_view(o.dst, stage), slots[id(o)], o.loc, stage=stage))

  def guarded(block, cond_lhs, fill):
    """`if cond_lhs < trip: fill(...)` appended to block."""
    with em.region(block):
      cond = em.emit(Compare, CmpOp.LT, cond_lhs, loop.stop, loc=loc, types=[ScalarType(DType.bool_)]).result
    then_b = ir.Block()
    fill(then_b)
    then_b.ops.append(Yield((), loc))
    block.ops.append(If(cond, then_b, ir.Block([Yield((), loc)]), loc, ()))

  # The prologue: a loop over the first min(ahead, trip) iterations (one copy of the load code).
  prologue = ir.Block(list(pre))
  with em.region(prologue):
    first = min(ahead, loop.stop) if isinstance(loop.stop, int) else em.emit(
        Binary, BinOp.MIN, loop.stop, ahead, loc=loc, types=[I32]).result
  it = ir.Value(I32, "prologue")
  fill = ir.Block(args=(it,))
  issue(fill, it)
  fill.ops.append(Yield((), loc))
  prologue.ops.append(For(0, first, 1, (), fill, loc, ()))

  # The body: wait for this stage, run the body on it, refill a free stage.
  new_body = ir.Block(args=body.args)
  with em.region(new_body):
    stage = em.emit(Binary, BinOp.MOD, iv, S, loc=loc, types=[I32]).result
    views = {buf: stage_view(buf, stage) for buf in loaded + stores}
  for o, _, _ in sites:
    new_body.ops.append(WaitLoad(slots[id(o)], o.loc, stage=stage))
  moved = {id(o) for o, _, _ in sites}
  *rest, yld = body.ops
  new_body.ops.extend(ir.substitute_deep(o, views) for o in rest if id(o) not in moved)
  per_iteration = sum(1 for o in new_body.ops if isinstance(o, Copy) and not is_load(o))
  for buf in stores:
    result.deferred[buf.id] = (S - 1) * per_iteration
  if Access.MMA_READ in reads:
    new_body.ops.append(DotWait(1, loc))
  if Access.TMA_READ in reads:     # includes a barrier
    new_body.ops.append(AwaitStores(True, loc, pending=per_iteration))
  elif Access.REG_READ in reads or (Access.MMA_READ in reads and kernel.block > hw.WARPGROUP):
    new_body.ops.append(Barrier(loc))   # every thread is done with the stage before it refills
  with em.region(new_body):
    nxt = em.emit(Binary, BinOp.ADD, iv, ahead, loc=loc, types=[I32]).result
  guarded(new_body, nxt, lambda b: issue(b, nxt))
  new_body.ops.append(yld)
  ir.prune_dead(new_body)
  new_loop = dataclasses.replace(loop, body=new_body)
  for r in new_loop.results:
    em.defs[r.id] = new_loop
  return prologue.ops + [new_loop]
