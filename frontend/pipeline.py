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
from . import ir
from . import tma
from .dtypes import DType
from .types import RefType, ScalarType

BARRIER_GROUP = 32    # mbarriers in one Mosaic GPU barrier group
_PURE_SCALAR = (ir.Binary, ir.Constant, ir.Cast, ir.Unary, ir.Compare)


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
    if isinstance(o, ir.For) and o.stages > 1:
      out.extend(_pipeline(kernel, o, em, roots))
    else:
      out.append(o)
  block.ops[:] = out


def _uses(block, value) -> list:
  return [o for o in ir.walk(block) if value in o.operands()]


def _substitute(o, mapping):
  """`o` with its operands replaced through `mapping` (value -> value)."""
  changes = {}
  for f in dataclasses.fields(o):
    if f.name in ("loc", "results") or f.name in o.regions:
      continue
    v = getattr(o, f.name)
    if isinstance(v, ir.Value) and v in mapping:
      changes[f.name] = mapping[v]
    elif isinstance(v, tuple) and any(isinstance(x, (ir.Value, ir.Idx)) for x in v):
      changes[f.name] = tuple(_sub_one(x, mapping) for x in v)
  return dataclasses.replace(o, **changes) if changes else o


def _sub_one(x, mapping):
  if isinstance(x, ir.Value):
    return mapping.get(x, x)
  if isinstance(x, ir.Idx) and isinstance(x.start, ir.Value):
    return dataclasses.replace(x, start=mapping.get(x.start, x.start))
  return x


def _address_ops(body, view_op, iv):
  """The body ops computing `view_op`'s index operands, in order; None if impure."""
  defs = {r: o for o in body.ops for r in o.results}
  need, seen = [], set()

  def visit(v):
    if not isinstance(v, ir.Value) or v is iv or v not in defs or id(v) in seen:
      return True
    seen.add(id(v))
    o = defs[v]
    if not isinstance(o, _PURE_SCALAR) or not isinstance(v.type, ScalarType):
      return False
    ok = all(visit(x) for x in o.operands())
    need.append(o)
    return ok

  ok = all(visit(v) for v in view_op.operands() if v is not view_op.ref)
  return sorted(need, key=body.ops.index) if ok else None


def _pipeline(kernel, loop: ir.For, em, roots):
  S, loc, body = loop.stages, loop.loc, loop.body
  iv = body.args[0]
  if loop.start != 0 or loop.step != 1:
    raise E.PipelineError("a pipelined loop must count from 0 in steps of 1: ml.range(n, stages=...)", loc)
  defs = {r: o for o in ir.walk(kernel.body) for r in o.results}
  body_ops = set(map(id, body.ops))
  sites = []
  for o in body.ops:
    if not (isinstance(o, ir.Copy) and o.slot >= 0):
      continue
    alloc = defs.get(o.dst)
    view = defs.get(o.src)
    if not isinstance(alloc, ir.SmemAlloc) or id(alloc) in body_ops:
      continue
    others = [u for u in ir.walk(kernel.body) if o.dst in u.operands() and u is not o]
    if any(id(u) not in {id(x) for x in ir.walk(body)} for u in others):
      raise E.PipelineError(
          f"{o.dst.name} is loaded in a pipelined loop but also used outside it", o.loc,
          hint="give the loop its own buffers")
    if any(isinstance(u, (ir.Store, ir.View)) or (isinstance(u, ir.Copy) and u.dst is o.dst) for u in others):
      raise E.PipelineError(
          f"{o.dst.name} is loaded by TMA in a pipelined loop, so the loop may only read it whole"
          f" (ml.dot, ml.copy from it, or [...])", o.loc)
    addr = _address_ops(body, view, iv) if isinstance(view, ir.View) else []
    if addr is None:
      raise E.PipelineError(
          f"the window of this load depends on values computed in the loop body; a pipelined load's"
          f" window may depend only on the loop index and on values from before the loop", o.loc)
    if o.dst.type.nbytes % tma.SMEM_ALIGN:
      raise E.TmaLimitError(
          f"{o.dst.name or 'this buffer'} ({o.dst.type.nbytes} bytes) cannot get one copy per stage of"
          f" this pipelined loop: TMA needs each copy to start at a multiple of {tma.SMEM_ALIGN} bytes",
          o.loc, hint=f"make the buffer a multiple of {tma.SMEM_ALIGN} bytes, or use stages=1")
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
    if em.num_load_slots % BARRIER_GROUP + S > BARRIER_GROUP:   # keep a site's barriers in one group
      em.num_load_slots += BARRIER_GROUP - em.num_load_slots % BARRIER_GROUP
    new_slots[id(o)] = em.num_load_slots
    em.num_load_slots += S
  kernel.num_load_slots = em.num_load_slots

  def emit(cls, *args, types=(), **kw):
    return em.emit(cls, *args, loc=loc, types=types, **kw)

  def stage_view(buf, stage, block):
    with em.region(block):
      t = buf.type
      return emit(ir.View, buf, (ir.Idx(stage, 1, True),) + tuple(ir.Idx(0, n) for n in t.shape[1:]),
                  types=[RefType(t.shape[1:], t.dtype, t.space)], names=[buf.name]).result

  def issue(block, it):
    """Loads of iteration `it` (an int or a scalar value) into stage it % S, appended to block."""
    with em.region(block):
      stage = it % S if isinstance(it, int) else emit(
          ir.Binary, ir.BinOp.MOD, it, S, types=[ScalarType(DType.i32)]).result
      for o, view, addr in sites:
        mapping = {iv: it}
        for a in addr:
          new = _clone(a, mapping, em)
          block.ops.append(new)
        src = o.src
        if isinstance(view, ir.View):
          nv = _clone(view, mapping, em)
          block.ops.append(nv)
          src = nv.result
        dst = stage_view(o.dst, stage, block)
        block.ops.append(ir.Copy(src, dst, new_slots[id(o)], o.loc, stage=stage))

  prologue = []
  pro_block = ir.Block(prologue)
  for s in range(S - 1):
    if isinstance(loop.stop, int):
      if s < loop.stop:
        issue(pro_block, s)
    else:
      with em.region(pro_block):
        cond = emit(ir.Compare, ir.CmpOp.LT, s, loop.stop, types=[ScalarType(DType.bool_)]).result
      then_b, else_b = ir.Block(), ir.Block()
      issue(then_b, s)
      then_b.ops.append(ir.Yield((), loc))
      else_b.ops.append(ir.Yield((), loc))
      prologue.append(ir.If(cond, then_b, else_b, loc, ()))

  # The loop body: wait for this stage, run the body on it, refill the freed stage.
  new_body = ir.Block(args=body.args)
  with em.region(new_body):
    stage = emit(ir.Binary, ir.BinOp.MOD, iv, S, types=[ScalarType(DType.i32)]).result
  views = {o.dst: stage_view(o.dst, stage, new_body) for o, _, _ in sites}
  for o, _, _ in sites:
    new_body.ops.append(ir.WaitLoad(new_slots[id(o)], o.loc, stage=stage))
  moved = {id(o) for o, _, _ in sites}
  *rest, yld = body.ops
  for o in rest:
    if id(o) not in moved:
      new_body.ops.append(_substitute_deep(o, views))
  has_reads = any(isinstance(u, (ir.Load, ir.Copy)) for o in rest for u in ir.walk(ir.Block([o]))
                  if any(x in views.values() for x in u.operands()))
  new_body.ops.append(ir.DotWait(1, loc))
  if has_reads or kernel.block > 128:   # every warpgroup is done with the stage before it refills
    new_body.ops.append(ir.Barrier(loc))
  with em.region(new_body):
    nxt = emit(ir.Binary, ir.BinOp.ADD, iv, S - 1, types=[ScalarType(DType.i32)]).result
    cond = emit(ir.Compare, ir.CmpOp.LT, nxt, loop.stop, types=[ScalarType(DType.bool_)]).result
  then_b, else_b = ir.Block(), ir.Block()
  issue(then_b, nxt)
  then_b.ops.append(ir.Yield((), loc))
  else_b.ops.append(ir.Yield((), loc))
  new_body.ops.append(ir.If(cond, then_b, else_b, loc, ()))
  new_body.ops.append(yld)
  _prune_dead(new_body)
  new_loop = dataclasses.replace(loop, body=new_body)
  for r in new_loop.results:
    em.defs[r.id] = new_loop
  return prologue + [new_loop]


def _substitute_deep(o, mapping):
  o = _substitute(o, mapping)
  for r in o.regions:
    blk = getattr(o, r)
    blk.ops[:] = [_substitute_deep(x, mapping) for x in blk.ops]
  return o


def _clone(o, mapping, em):
  """A copy of pure op `o` with fresh results, operands through `mapping` (updated)."""
  new_results = tuple(ir.Value(r.type, r.name) for r in o.results)
  c = dataclasses.replace(_substitute(o, mapping), results=new_results)
  for old, new in zip(o.results, new_results):
    mapping[old] = new
    em.defs[new.id] = c
  return c


def _prune_dead(block):
  """Drop pure scalar and view ops whose results nothing uses (the moved loads' addresses)."""
  while True:
    used = {id(v) for o in ir.walk(block) for v in o.operands()}
    keep = [o for o in block.ops
            if not (isinstance(o, _PURE_SCALAR + (ir.View,)) and o.results
                    and not any(id(r) in used for r in o.results))]
    if len(keep) == len(block.ops):
      return
    block.ops[:] = keep
