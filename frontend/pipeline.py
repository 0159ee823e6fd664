"""Software pipelining of `for k in ml.range(n, stages=S)` loops.

The TMA loads at the top of such a loop's body (copies of a GMEM window that
depends only on `k` and on values from outside the loop, into an SMEM buffer
used only in the loop) are moved `S - 1` iterations ahead:

    prologue:   load iterations 0 .. S-2 into stages 0 .. S-2
    for k:      wait for stage k % S
                body (its dots read stage k % S; they run asynchronously)
                wait until only this iteration's dots run (so stage (k-1) % S is free)
                if k + S - 1 < n: load iteration k + S - 1 into stage (k + S - 1) % S

Each buffer gets S copies (a leading stage dimension) and each load site S
barriers. The sync pass leaves these buffers alone: their waits are explicit.
"""
from __future__ import annotations

import dataclasses

from . import errors as E
from . import hw
from . import ir
from .dtypes import DType
from .ops.control import Barrier, For, If, WaitLoad, Yield
from .ops.elementwise import BinOp, Binary, CmpOp, Compare
from .ops.memory import Copy, SmemAlloc, View, is_load
from .ops.mma import DotWait
from .types import RefType, ScalarType


def _pure_scalar(o) -> bool:
  """An op the pipeliner may clone into the prologue or the refill (address arithmetic)."""
  return ir.traits_of(o).pure and all(isinstance(r.type, ScalarType) for r in o.results) and bool(o.results)


def pipeline_loops(kernel: ir.Kernel, em) -> set[int]:
  """Rewrite every pipelined loop of `kernel`; returns the ids of the multi-buffered roots."""
  roots: set[int] = set()
  _rewrite_block(kernel, kernel.body, em, roots)
  return roots


def _rewrite_block(kernel, block, em, roots):
  out = []
  for o in block.ops:
    for r in o.regions:
      _rewrite_block(kernel, getattr(o, r), em, roots)
    if isinstance(o, For) and o.stages > 1:
      out.extend(_pipeline(kernel, o, em, roots))
    else:
      out.append(o)
  block.ops[:] = out


def _uses(block, value) -> list:
  return [o for o in ir.walk(block) if value in o.operands()]


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


def _pipeline(kernel, loop: For, em, roots):
  S, loc, body = loop.stages, loop.loc, loop.body
  iv = body.args[0]
  if loop.start != 0 or loop.step != 1:
    raise E.PipelineError("a pipelined loop must count from 0 in steps of 1: ml.range(n, stages=...)", loc)
  defs = {r: o for o in ir.walk(kernel.body) for r in o.results}
  body_ops = set(map(id, body.ops))
  sites = []
  for o in body.ops:
    if not is_load(o):
      continue
    alloc = defs.get(o.dst)
    view = defs.get(o.src)
    if not isinstance(alloc, SmemAlloc) or id(alloc) in body_ops:
      continue
    others = [u for u in ir.walk(kernel.body) if o.dst in u.operands() and u is not o]
    if any(id(u) not in {id(x) for x in ir.walk(body)} for u in others):
      raise E.PipelineError(
          f"{o.dst.name} is loaded in a pipelined loop but also used outside it", o.loc,
          hint="give the loop its own buffers")
    if any(any(a in (ir.Access.REG_WRITE, ir.Access.TMA_WRITE) for r, a in ir.traits_of(u).effects(u)
               if r is o.dst) or isinstance(u, View) for u in others):
      raise E.PipelineError(
          f"{o.dst.name} is loaded by TMA in a pipelined loop, so the loop may only read it whole"
          f" (ml.dot, ml.copy from it, or [...])", o.loc)
    addr = _address_ops(body, view, iv) if isinstance(view, View) else []
    if addr is None:
      raise E.PipelineError(
          f"the window of this load depends on values computed in the loop body; a pipelined load's"
          f" window may depend only on the loop index and on values from before the loop", o.loc)
    if o.dst.type.nbytes % hw.TMA_SMEM_ALIGN:
      raise E.TmaLimitError(
          f"{o.dst.name or 'this buffer'} ({o.dst.type.nbytes} bytes) cannot get one copy per stage of"
          f" this pipelined loop: TMA needs each copy to start at a multiple of {hw.TMA_SMEM_ALIGN} bytes",
          o.loc, hint=f"make the buffer a multiple of {hw.TMA_SMEM_ALIGN} bytes, or use stages=1")
    sites.append((o, view, addr))
  if not sites:
    raise E.PipelineError(
        "ml.range(..., stages=) found no TMA load to pipeline at the top level of this loop", loc,
        hint="load the loop's tiles with ml.copy(gmem.at[...k...], buf) into buffers allocated before the loop")

  # Multi-buffer each loaded buffer and give each site S barriers.
  new_slots = {}
  for o, _, _ in sites:
    t = o.dst.type
    o.dst.type = dataclasses.replace(t, shape=(S,) + t.shape)
    roots.add(o.dst.id)
    group = hw.MAX_BARRIERS_PER_GROUP
    if em.num_load_slots % group + S > group:   # keep a site's barriers in one group
      em.num_load_slots += group - em.num_load_slots % group
    new_slots[id(o)] = em.num_load_slots
    em.num_load_slots += S
  kernel.num_load_slots = em.num_load_slots

  def emit(cls, *args, types=(), **kw):
    return em.emit(cls, *args, loc=loc, types=types, **kw)

  def stage_view(buf, stage, block):
    with em.region(block):
      t = buf.type
      return emit(View, buf, (ir.Idx(stage, 1, True),) + tuple(ir.Idx(0, n) for n in t.shape[1:]),
                  types=[RefType(t.shape[1:], t.dtype, t.space)], names=[buf.name]).result

  def issue(block, it):
    """Loads of iteration `it` (an int or a scalar value) into stage it % S, appended to block."""
    with em.region(block):
      stage = it % S if isinstance(it, int) else emit(
          Binary, BinOp.MOD, it, S, types=[ScalarType(DType.i32)]).result
      for o, view, addr in sites:
        mapping = {iv: it}
        for a in addr:
          em.append(ir.clone(a, mapping))
        src = o.src
        if isinstance(view, View):
          src = em.append(ir.clone(view, mapping)).result
        dst = stage_view(o.dst, stage, block)
        block.ops.append(Copy(src, dst, new_slots[id(o)], o.loc, stage=stage))

  prologue = []
  pro_block = ir.Block(prologue)
  for s in range(S - 1):
    if isinstance(loop.stop, int):
      if s < loop.stop:
        issue(pro_block, s)
    else:
      with em.region(pro_block):
        cond = emit(Compare, CmpOp.LT, s, loop.stop, types=[ScalarType(DType.bool_)]).result
      then_b, else_b = ir.Block(), ir.Block()
      issue(then_b, s)
      then_b.ops.append(Yield((), loc))
      else_b.ops.append(Yield((), loc))
      prologue.append(If(cond, then_b, else_b, loc, ()))

  # The loop body: wait for this stage, run the body on it, refill the freed stage.
  new_body = ir.Block(args=body.args)
  with em.region(new_body):
    stage = emit(Binary, BinOp.MOD, iv, S, types=[ScalarType(DType.i32)]).result
  views = {o.dst: stage_view(o.dst, stage, new_body) for o, _, _ in sites}
  for o, _, _ in sites:
    new_body.ops.append(WaitLoad(new_slots[id(o)], o.loc, stage=stage))
  moved = {id(o) for o, _, _ in sites}
  *rest, yld = body.ops
  for o in rest:
    if id(o) not in moved:
      new_body.ops.append(ir.substitute_deep(o, views))
  has_reads = any(a in (ir.Access.REG_READ, ir.Access.TMA_READ)
                  for o in rest for u in ir.walk(ir.Block([o])) for r, a in ir.traits_of(u).effects(u)
                  if r in views or r in views.values())   # the body as written reads the buffers
  new_body.ops.append(DotWait(1, loc))
  if has_reads or kernel.block > hw.WARPGROUP:   # every warpgroup is done with the stage before it refills
    new_body.ops.append(Barrier(loc))
  with em.region(new_body):
    nxt = emit(Binary, BinOp.ADD, iv, S - 1, types=[ScalarType(DType.i32)]).result
    cond = emit(Compare, CmpOp.LT, nxt, loop.stop, types=[ScalarType(DType.bool_)]).result
  then_b, else_b = ir.Block(), ir.Block()
  issue(then_b, nxt)
  then_b.ops.append(Yield((), loc))
  else_b.ops.append(Yield((), loc))
  new_body.ops.append(If(cond, then_b, else_b, loc, ()))
  new_body.ops.append(yld)
  ir.prune_dead(new_body)
  new_loop = dataclasses.replace(loop, body=new_body)
  for r in new_loop.results:
    em.defs[r.id] = new_loop
  return prologue + [new_loop]
