"""What every pipelined loop needs, warp-specialised or not: the analysis of its body and
the multi-buffering (frontend/pipeline.py and frontend/warp_specialize.py build on it).

A `Plan` holds a loop rewritten to count trips from 0 (`ml.range(start, stop, step)` becomes
0 .. ceil((stop - start) / step) with the index recomputed at the top of the body), its load
sites (TMA loads at the top of the body, from windows that depend only on the index and on
values from before the loop), its store buffers (written whole from registers, then TMA-stored)
and how the body reads the loaded buffers. `multibuffer` gives each of those buffers one copy
per stage and each load site one barrier per stage.
"""
from __future__ import annotations

import ast
import dataclasses
import math
import operator

from . import errors as E
from . import hw
from . import ir
from .dtypes import DType
from .ir import Access
from .ops.access import ScalarLoad
from .ops.control import LOOPS, For, If, PositiveStep, WaitLoad
from .ops.elementwise import BinOp, Binary, Cast, CmpOp, Compare, Constant, Where
from .ops.memory import Copy, SmemAlloc, Store, View, is_load, root_in, staged
from .guarded_loads import hoist_guarded_loads, window_reads
from .pipeline_hazards import check_loads_of_written_memory
from .types import RefType, ScalarType, resolve

I32 = ScalarType(DType.i32)
U32 = ScalarType(DType.u32)
I64 = ScalarType(DType.i64)


@dataclasses.dataclass
class Plan:
  loop: For                 # counting 0 .. trip - 1 by 1
  pre: list                 # ops computing the trip count, to run before the loop
  stages: int
  sites: list               # [(load copy, its GMEM view op, the address ops)]
  loaded: list              # the loaded SMEM buffers
  stores: list              # the store buffers
  reads: set                # how the body reads the loaded buffers (Access kinds)
  slots: dict = dataclasses.field(default_factory=dict)   # id(load copy) -> its first barrier
  windows: dict = dataclasses.field(default_factory=dict)  # id(load copy) -> (buffer, View op) of a
                                                           # load into a static window of a buffer
  shapes: dict = dataclasses.field(default_factory=dict)   # buffer id -> its shape (one stage, unpadded)

  @property
  def iv(self):
    return self.loop.body.args[0]

  @property
  def async_reads(self) -> bool:
    """Dots or TMA stores read loaded stages after the iteration's own code has moved on."""
    return bool(self.reads & {Access.MMA_READ, Access.TMA_READ})


def make_plan(kernel, loop: For, em) -> Plan:
  """Normalise and analyse a pipelined loop; checks it (PipelineError, SmemCapacityError)."""
  S, written = loop.stages, loop          # (the loop as written: its place in the kernel's body)
  pre, loop = normalize(loop, em)
  body = loop.body
  hoist_guarded_loads(kernel, body)
  windows = {}
  sites = load_sites(kernel, body, body.args[0], windows, loop.warp_specialize)
  check_loads_of_written_memory(kernel, body, body.args[0], sites, S, unpipelined(loop.warp_specialize), pre,
                                ws=loop.warp_specialize, trips=loop.stop if isinstance(loop.stop, int) else None)
  if not sites:
    defs = ir.def_table(kernel.body)
    inner = {r.id: o for o in body.ops if isinstance(o, SmemAlloc) for r in o.results}
    filled = next((o for o in body.ops if isinstance(o, Copy) and root_in(defs, o.dst).id in inner), None)
    if filled is not None:
      buf = inner[root_in(defs, filled.dst).id].results[0]
      raise E.PipelineError(
          f"this pipelined loop's TMA load fills {buf.name or 'a buffer'}, which is allocated inside the loop: a"
          f" pipelined loop keeps {S} copies (stages) of each buffer it loads, so they must live across trips",
          filled.loc, hint=f"allocate {buf.name or 'the buffer'} before the loop: move its ml.smem(...) line"
                           f" above the for statement")
    guarded = next(((c, o) for o in body.ops if isinstance(o, If) for r in o.regions
                    for c in ir.walk(getattr(o, r)) if is_load(c)), None)
    if guarded is not None:
      table = next((r for r in guarded[1].regions for x in window_reads(getattr(guarded[1], r), guarded[0])), None)
      reads = window_reads(getattr(guarded[1], table), guarded[0]) if table else []
      if reads:       # (probe 56c: loads whose windows need no read under the if move out of it)
        read = reads[-1]
        raise E.PipelineError(
            "this pipelined loop's TMA load takes its window from a read of memory under a run-time if: a pipelined"
            f" loop issues every trip's loads ahead of it ({S - 1} trip{'s' if S > 2 else ''} early), before its if"
            " could decide, and the read may lie outside its array on the trips the if skips", guarded[0].loc,
            notes=(f"{read.loc}: the read", f"{guarded[1].loc}: the if"),
            hint="read the entry above the if at an index kept inside the table (ml.minimum(p, n - 1) for a table"
                 " of n entries), so that the loads may run on every trip while the if still skips the ml.dot; or"
                 " walk only the blocks that count (for p in ml.range(count, stages=s): k = indices[first + p]),"
                 f" as a block-sparse matmul does; or drop stages= for a plain loop, {_plain_loop(loop.loc)}")
      raise E.PipelineError(
          "this pipelined loop's TMA loads run under a run-time if: a pipelined loop issues every trip's loads"
          f" ahead of it ({S - 1} trip{'s' if S > 2 else ''} early), before its if could decide", guarded[0].loc,
          notes=(f"{guarded[1].loc}: the if",),
          hint="load on every trip, at the top of the body, and guard only what uses the tiles (ml.copy(...)"
               " lines above the if, the ml.dot under it); or walk only the blocks that count, from a list"
               " of their indices (for p in ml.range(count, stages=s): k = indices[first + p]), as a"
               f" block-sparse matmul does; or drop stages= for a plain loop, {_plain_loop(loop.loc)}")
    ring = _hand_ring(kernel, body)
    if ring is not None:
      copy, view = ring
      buf = view.ref.name or "the buffer"
      shape = tuple(i.size for i in view.index if not i.squeeze)
      raise E.PipelineError(
          f"this pipelined loop's TMA load fills a window of {buf} picked by the loop index (a ring of stages kept"
          f" by hand), but ml.range(..., stages={S}) keeps the ring itself: it pipelines loads into a whole buffer"
          f" (or static windows of one), of which it keeps {S} copies", copy.loc,
          notes=(f"{loop.loc}: the pipelined loop",),
          hint=f"load each trip's tile into a whole buffer, {buf}_k = ml.smem({shape}) before the loop and"
               f" ml.copy(..., {buf}_k), and read that, leaving the stages to the loop; or keep your ring and drop"
               f" stages= for a plain loop, {_plain_loop(loop.loc)}")
    raise E.PipelineError(
        "ml.range(..., stages=) found no TMA load to pipeline at the top level of this loop", loop.loc,
        hint=f"drop stages= for a plain loop, {_plain_loop(loop.loc)} (its loads into registers are not"
             f" pipelined); to pipeline, load the loop's tiles with ml.copy(gmem.at[...k...], buf) into"
             f" buffers allocated before the loop")
  loaded = list(dict.fromkeys(windows[id(o)][0] if id(o) in windows else o.dst for o, _, _ in sites))
  stores = store_buffers(kernel, body, loaded)
  reads = loaded_reads(kernel, body, loaded)
  if single_copy_stores(kernel, loaded, stores, S, len(sites), written):
    stores = []             # one copy each, synchronised as any SMEM buffer a TMA store reads
  check_fits(kernel, loaded + stores, S, len(sites), loop.loc, loop.warp_specialize, loop=written, once=stores)
  return Plan(loop, pre, S, sites, loaded, stores, reads, windows=windows)


def _hand_ring(kernel, body):
  """(the load, its destination's View op) of a TMA load at the top of a loop's body into a window of a
  buffer from before the loop at a start computed in the body (`a_s.at[k % 2]`, `a_s.at[ml.ds((k % 2) *
  64, 64)]`: stages the user keeps), or None."""
  defs = {**ir.def_table(kernel.body), **{r.id: o for o in ir.walk(body) for r in o.results}}
  inner = {r.id for o in ir.walk(body) for r in o.results} | {a.id for a in body.args}
  for o in body.ops:
    view = defs.get(o.dst.id) if is_load(o) else None
    if isinstance(view, View) and isinstance(defs.get(view.ref.id), SmemAlloc) and view.ref.id not in inner and any(
        isinstance(i.start, ir.Value) and i.start.id in inner for i in view.index):
      return o, view
  return None


def _plain_loop(loc) -> str:
  """The for statement at `loc` as written, without ml.range's keywords (stages=, ...)."""
  line = getattr(loc, "source_line", "") or ""
  text = line[getattr(loc, "col_offset", 0):].strip()
  try:
    it = ast.parse(text + "\n  pass").body[0]
  except SyntaxError:
    it = None
  if isinstance(it, ast.For) and isinstance(it.iter, ast.Call) and it.iter.keywords:
    seg = lambda n: ast.get_source_segment(text, n)
    parts = [seg(it.target), seg(it.iter.func), *(seg(a) for a in it.iter.args)]
    if all(parts):
      return f"for {parts[0]} in {parts[1]}({', '.join(parts[2:])}):"
  return "for k in ml.range(n):"


def loaded_reads(kernel, body, loaded) -> set:
  """How the body touches the loaded buffers (Access kinds), through views of them too: a dot
  that reads only `k_s.T` reads k_s (once it counted as no read, and the loop refilled the
  stage while the tensor cores still read it)."""
  defs = {r.id: o for o in ir.walk(kernel.body) for r in o.results}
  ids = {b.id for b in loaded}

  def root(v):
    while isinstance(defs.get(v.id), View):
      v = defs[v.id].ref
    return v

  return {a for u in ir.walk(body) for r, a in ir.traits_of(u).effects(u)
          if r is not None and root(r).id in ids}


@dataclasses.dataclass(frozen=True)
class Staged:
  """A pipelined loop's multi-buffering, for the SMEM budget's hint (frontend/smem.py)."""
  stages: int
  fewest: int          # the fewest stages the loop takes (2 when warp-specialised)
  buffers: frozenset   # ids of the buffers with one copy per stage
  loc: object          # the loop


def multibuffer(kernel, plan: Plan, em) -> None:
  """One copy per stage of each loaded and store buffer; S barriers per load site."""
  S = plan.stages
  kernel.pipelines.append(Staged(S, 2 if plan.loop.warp_specialize else 1,
                                 frozenset(b.id for b in plan.loaded + plan.stores), plan.loop.loc))
  for buf in plan.loaded + plan.stores:
    shape = buf.type.shape
    plan.shapes[buf.id] = shape
    buf.type = dataclasses.replace(buf.type, shape=(S, padded_lead(buf.type)) + tuple(shape[1:]))
  for o, _, _ in plan.sites:
    group = hw.MAX_BARRIERS_PER_GROUP
    if em.num_load_slots % group + S > group:   # keep a site's barriers in one group
      em.num_load_slots += group - em.num_load_slots % group
    plan.slots[id(o)] = em.num_load_slots
    em.num_load_slots += S
  kernel.num_load_slots = em.num_load_slots


def padded_lead(t) -> int:
  """The leading axis of one stage of a buffer of type `t`, padded so that each stage starts at a multiple of
  128 bytes, as TMA needs (a vector of 80 float32, 320 bytes, takes 96: 384 bytes a stage)."""
  lead = t.shape[0] if t.shape else 1
  row = t.nbytes // lead if lead else 0
  step = hw.TMA_SMEM_ALIGN // math.gcd(hw.TMA_SMEM_ALIGN, row) if row else 1
  return -(-lead // step) * step


def stage_bytes(t) -> int:
  """The bytes of one stage of a buffer of type `t` (padded_lead's rows)."""
  lead = t.shape[0] if t.shape else 1
  return t.nbytes // lead * padded_lead(t) if lead else t.nbytes


def stage_view(em, plan, buf, stage, loc):
  """`buf.at[stage]` of a multi-buffered buffer (emitted into em's current block), of the buffer's own shape."""
  shape = plan.shapes[buf.id]
  return em.emit(View, buf, (ir.Idx(stage, 1, True),) + tuple(ir.Idx(0, n) for n in shape),
                 loc=loc, types=[RefType(shape, buf.type.dtype, buf.type.space)], names=[buf.name]).result


def mod(em, x, n, loc):
  return x % n if isinstance(x, int) else em.emit(Binary, BinOp.MOD, x, n, loc=loc, types=[I32]).result


def issue(em, plan: Plan, block, it, mapping=None, stage=None):
  """The loads of iteration `it` (an int or a scalar) into stage it % S (or `stage`), appended
  to block; `mapping` maps values from outside the loop to the ones to use."""
  loc = plan.loop.loc
  with em.region(block):
    stage = mod(em, it, plan.stages, loc) if stage is None else stage
    for o, view, addr in plan.sites:
      m = dict(mapping or {})
      m[plan.iv] = it
      for a in addr:
        em.append(ir.clone(a, m))
      src = em.append(ir.clone(view, m)).result if isinstance(view, View) else o.src
      if id(o) in plan.windows:     # a static window of the buffer: the same window of the stage
        buf, window = plan.windows[id(o)]      # one view of the buffer: [stage, *window]
        view_op = ir.clone(window, {})
        dst = em.append(staged(view_op, stage)).result
      else:
        dst = stage_view(em, plan, o.dst, stage, loc)
      block.ops.append(Copy(src, dst, plan.slots[id(o)], o.loc, stage=stage, multicast=o.multicast))


def staged_body(em, plan: Plan):
  """(block, stage): the loop body on this iteration's stages: wait for its loads, then the
  user's ops (loads moved out) on the stage views; ends without a Yield."""
  loc = plan.loop.loc
  new = ir.Block(args=plan.loop.body.args)
  with em.region(new):
    stage = mod(em, plan.iv, plan.stages, loc)
    views = {buf: stage_view(em, plan, buf, stage, loc) for buf in plan.loaded + plan.stores}
  for o, _, _ in plan.sites:
    new.ops.append(WaitLoad(plan.slots[id(o)], o.loc, stage=stage))
  moved = {id(o) for o, _, _ in plan.sites}

  def restage(o):
    """`o` reading this iteration's stage: `buf.T` views get the stage index, others the stage view."""
    if isinstance(o, View) and o.ref in views:
      return staged(o, stage)
    o = ir.substitute(o, views)
    for r in o.regions:
      blk = getattr(o, r)
      blk.ops[:] = [restage(x) for x in blk.ops]
    return o

  new.ops.extend(restage(o) for o in plan.loop.body.ops[:-1] if id(o) not in moved)
  return new, stage


def whole_transpose(u) -> bool:
  """`buf.T` of a whole loaded buffer: the loop reads it whole (restaged like the buffer)."""
  return isinstance(u, View) and u.transpose and all(
      not i.squeeze and i.start == 0 and i.size == n for i, n in zip(u.index, u.ref.type.shape))


def _view_text(o) -> str | None:
  """The view `o` as the user wrote it (`t_s.at[1:33]`), or None."""
  line, a, b = o.loc.source_line, o.loc.col_offset, o.loc.end_col_offset
  text = line[a:b] if line and b is not None and o.loc.end_lineno == o.loc.lineno else ""
  return text if ".at[" in text else None


def register_window(kernel, u) -> bool:
  """A window of a loaded buffer that the loop only reads into registers (a stencil's rows above and
  below, `t_s.at[0:32][...]`, of a halo tile loaded whole; since probe 67b also a run-time one, a scan's
  row `x_s.at[r][...]` of an inner loop over the buffered steps): restaged like the buffer (the same
  window of this trip's stage), and read once the stage's load has landed."""
  if u.transpose:
    return False
  uses = _accesses(kernel, u)
  return bool(uses) and all(a == Access.REG_READ for a in uses)


def dot_window(kernel, u) -> bool:
  """A window of a loaded buffer that only ml.dot reads (a stage's K split into steps, `a_s.at[:, ml.ds(kk *
  64, 64)]`): restaged like the buffer (the window of this trip's stage), its dots awaited before the stage
  is refilled as the buffer's are; frontend/layout_checks.py checks that it covers whole tiles."""
  uses = _accesses(kernel, u)
  return bool(uses) and all(a == Access.MMA_READ for a in uses)


def unused_view(kernel, u) -> bool:
  """A view no op reads: the window `buf.at[0:256]` of `buf.at[0:256].T`, whose transposed view composes onto the
  buffer itself (so only that view is read; probe 53d: a dot over pieces of a loaded buffer was MG502)."""
  return not any(u.result in x.operands() for x in ir.walk(kernel.body))


def _accesses(kernel, u) -> list:
  """How the ops of the kernel access the view `u` (Access kinds)."""
  return [a for x in ir.walk(kernel.body) if u.result in x.operands()
          for r, a in ir.traits_of(x).effects(x) if r is u.result]


def stores_per_iteration(block) -> int:
  """TMA stores every iteration issues (each is one bulk async-group)."""
  return sum(1 for o in block.ops if isinstance(o, Copy) and not is_load(o))


def pure_scalar(o) -> bool:
  """An op the pipeliner may clone into the prologue or the refill (address arithmetic)."""
  return ir.traits_of(o).pure and all(isinstance(r.type, ScalarType) for r in o.results) and bool(o.results)


def arith(em, kind, a, b, loc, t=I32):
  """a `kind` b on scalars of type `t` (i32), folded when both are ints (Python semantics, as the DSL's)."""
  if isinstance(a, int) and isinstance(b, int):     # (only the one asked for: b may be 0)
    return {BinOp.ADD: operator.add, BinOp.SUB: operator.sub, BinOp.MUL: operator.mul,
            BinOp.FLOORDIV: operator.floordiv}[kind](a, b)
  if kind == BinOp.MUL and 1 in (a, b):
    return b if a == 1 else a
  if kind in (BinOp.ADD, BinOp.SUB) and b == 0:
    return a
  return em.emit(Binary, kind, a, b, loc=loc, types=[t]).result


def trip_count(em, start, stop, step, loc):
  """How many times `range(start, stop, step)` runs (step > 0), as an i32 scalar. The span is
  taken unsigned and the count as (span - 1) // step + 1 where stop > start, so bounds whose
  difference passes 2**31 (a persistent loop over 2**31 - 1 tiles) count right instead of wrapping."""
  if all(isinstance(x, int) for x in (start, stop, step)):
    return len(range(start, stop, step))
  emit = lambda op, *args, t=U32: em.emit(op, *args, loc=loc, types=[t]).result
  static = isinstance(start, int) and isinstance(stop, int)       # only the step is a run-time value
  if static:
    if stop <= start:
      return 0
    span = emit(Constant, stop - start)
  else:
    kind = stop.type if isinstance(start, int) else start.type
    span = stop if isinstance(start, int) and start == 0 else emit(Binary, BinOp.SUB, stop, start, t=kind)
    span = span if kind == U32 else emit(Cast, span)
  step = step if isinstance(step, int) else emit(Cast, step)
  quotient = em.emit(Binary, BinOp.FLOORDIV, emit(Binary, BinOp.SUB, span, 1), step, loc=loc, types=[U32],
                     nonzero=True).result     # (a pipelined loop's step is positive: no zero guard)
  count = emit(Binary, BinOp.ADD, quotient, 1)
  count = emit(Cast, count, t=I32)
  if static:
    return count
  return emit(Where, emit(Compare, CmpOp.GT, stop, start, t=ScalarType(DType.bool_)), count, 0, t=I32)


def wide_trip_count(em, start, stop, step, loc):
  """How many times `range(start, stop, step)` of int64 bounds (step > 0) runs, as an i32 scalar: counted
  in int64, so bounds past int32 count right; the count itself is a pipelined loop's int32, as for any
  other bounds (2**31 trips of TMA loads are out of reach of a launch)."""
  emit = lambda op, *args, t=I64: em.emit(op, *args, loc=loc, types=[t]).result
  static = isinstance(start, int) and isinstance(stop, int)       # only the step is a run-time value
  if static and stop <= start:
    return 0
  span = emit(Constant, stop - start) if static else arith(em, BinOp.SUB, stop, start, loc, I64)
  quotient = em.emit(Binary, BinOp.FLOORDIV, emit(Binary, BinOp.SUB, span, 1), step, loc=loc, types=[I64],
                     nonzero=True).result     # (step > 0: no zero guard)
  count = emit(Binary, BinOp.ADD, quotient, 1)
  if not static:
    count = emit(Where, emit(Compare, CmpOp.GT, stop, start, t=ScalarType(DType.bool_)), count, 0)
  return emit(Cast, count, t=I32)


def normalize(loop: For, em):
  """(ops before the loop, a loop counting 0 .. trip - 1 by 1 with the same meaning). A loop whose index
  is int64 (int64 bounds, jax_enable_x64) counts its trips in int32 too, as every pipelined loop's stage
  arithmetic does, and computes its int64 index from them: start + int64(trip) * step."""
  old_iv, *carried = loop.body.args
  wide = old_iv.type == I64
  if loop.start == 0 and loop.step == 1 and not wide:
    return [], loop
  loc, pre = loop.loc, ir.Block()
  step = loop.step
  with em.region(pre):
    if not isinstance(step, int):       # checked positive in interpret mode, as a plain loop's step
      step = em.emit(PositiveStep, step, loc=loc, types=[step.type], names=[step.name]).result
    trip = (wide_trip_count if wide else trip_count)(em, loop.start, loop.stop, step, loc)
  iv = ir.Value(I32, old_iv.name)
  body = ir.Block(args=(iv, *carried))
  t = I64 if wide else I32
  with em.region(body):
    trips = em.emit(Cast, iv, loc=loc, types=[I64]).result if wide else iv
    index = arith(em, BinOp.ADD, loop.start, arith(em, BinOp.MUL, trips, step, loc, t), loc, t)
  mapping = {old_iv: index}
  body.ops.extend(ir.substitute_deep(o, mapping) for o in loop.body.ops)
  return pre.ops, dataclasses.replace(loop, start=0, stop=trip, step=1, body=body)


def invariant_smem(kernel, body) -> set:
  """Ids of the SMEM buffers allocated before `body` that nothing in it writes: within the loop
  a read of one is as pure as a read of an input (a page table staged in SMEM before the loop)."""
  defs = {r: o for o in ir.walk(kernel.body) for r in o.results}
  root = lambda v: defs[v].ref if isinstance(defs.get(v), View) else v     # views compose onto roots
  inside = {id(o) for o in ir.walk(body)}
  written = {id(root(r)) for o in ir.walk(body) for r, a in ir.traits_of(o).effects(o)
             if a in (Access.REG_WRITE, Access.TMA_WRITE)}
  return {id(r) for r, o in defs.items()
          if isinstance(o, SmemAlloc) and id(o) not in inside and id(r) not in written}


def address_ops(body, view_op, iv, invariant=frozenset()):
  """The body ops computing `view_op`'s index operands, in order; None if impure or if they
  read a value the loop carries (the prefetch runs iterations ahead, before it is known).
  Windows of, and scalar reads from, the SMEM buffers in `invariant` count as pure."""
  defs = {r: o for o in body.ops for r in o.results}
  carried = {id(a) for a in body.args[1:]}

  def stable(o, v):
    if isinstance(o, View) and not o.transpose:      # a window of a buffer the loop never writes
      return id(o.ref) in invariant
    if isinstance(o, ScalarLoad) and isinstance(v.type, ScalarType):
      d = defs.get(o.ref)                            # a window made in the body, or a whole buffer
      return id(d.ref if isinstance(d, View) else o.ref) in invariant
    return False

  need, seen = [], set()

  def visit(v):
    if isinstance(v, ir.Value) and id(v) in carried:
      return False
    if not isinstance(v, ir.Value) or v is iv or v not in defs or id(v) in seen:
      return True
    seen.add(id(v))
    o = defs[v]
    if not stable(o, v) and (not pure_scalar(o) or not isinstance(v.type, ScalarType)):
      return False
    ok = all(visit(x) for x in o.operands())
    need.append(o)
    return ok

  ok = all(visit(v) for v in view_op.operands() if v is not view_op.ref)
  return sorted(need, key=body.ops.index) if ok else None


def load_windows(defs, body) -> dict:
  """View ops of SMEM buffers (allocated before the loop) at static windows, used only as the
  destinations of TMA loads at the top of the body: several loads filling one buffer."""
  top_loads = {id(o) for o in body.ops if is_load(o)}
  users: dict = {}
  for u in ir.walk(body):
    for v in u.operands():
      users.setdefault(v, []).append(u)
  out = {}
  for o in body.ops:
    if not (isinstance(o, View) and not o.transpose and isinstance(defs.get(o.ref), SmemAlloc)):
      continue
    if not all(isinstance(i.start, int) for i in o.index):
      continue
    uses = users.get(o.result, [])
    if uses and all(id(u) in top_loads and u.dst is o.result for u in uses):
      out[o.result] = o
  return out


def unpipelined(ws: bool) -> str:
  """How a hint says to run a loop unpipelined: a warp-specialised loop needs stages >= 2, so
  stages=1 works only without warp_specialize=True."""
  return "stages=1 without warp_specialize=True" if ws else "stages=1"


def load_sites(kernel, body, iv, windows: dict, ws: bool = False):
  """[(copy, its GMEM view op, the address ops)] of the loads to pipeline; checks them. Loads
  into static windows of a buffer are recorded in `windows` (id(copy) -> (buffer, View op))."""
  defs = {r: o for o in ir.walk(kernel.body) for r in o.results}
  # The body's own ops as normalize() rewrote them: a view whose start is the loop variable itself
  # reads the rewritten index (start + k * step), and so must the prefetch that clones it.
  defs.update({r: o for o in ir.walk(body) for r in o.results})
  body_ops = set(map(id, body.ops))
  in_body = {id(x) for x in ir.walk(body)}
  dst_views = load_windows(defs, body)
  invariant = invariant_smem(kernel, body)
  sites = []
  for o in body.ops:
    if not is_load(o):
      continue
    buf = dst_views[o.dst].ref if o.dst in dst_views else o.dst
    alloc, view = defs.get(buf), defs.get(o.src)
    if not isinstance(alloc, SmemAlloc) or id(alloc) in body_ops:
      continue
    if o.dst in dst_views:
      windows[id(o)] = (buf, dst_views[o.dst])
    others = [u for u in ir.walk(kernel.body) if buf in u.operands() and u is not o
              and not (isinstance(u, View) and u.result in dst_views)]
    outside = next((u for u in others if id(u) not in in_body), None)
    if outside is not None:     # reported where the buffer is used, not at the load
      raise E.PipelineError(
          f"{buf.name} is loaded in a pipelined loop but also used outside it", outside.loc,
          hint="give the loop its own buffers", notes=(f"{o.loc}: the pipelined load",))
    bad = next((u for u in others if isinstance(u, View) and not whole_transpose(u) and not unused_view(kernel, u)
                and not register_window(kernel, u) and not dot_window(kernel, u) or any(
        a in (Access.REG_WRITE, Access.TMA_WRITE) for r, a in ir.traits_of(u).effects(u) if r is buf)), None)
    if bad is not None:
      text = _view_text(bad) if isinstance(bad, View) else None
      raise E.PipelineError(
          f"{buf.name} is loaded by TMA in a pipelined loop, so the loop may only read it whole"
          f" (ml.dot, ml.copy from it, or [...]), read windows of it into registers, or pass windows"
          f" of it to ml.dot", bad.loc,
          hint=(f"load each window you need into its own buffer of that shape (ml.copy into its own ml.smem),"
                f" or read it whole ({buf.name}[...]) and slice the register value"
                + (f", or read the window into registers, {text}[...] (and store it from there)"
                   if text and not bad.transpose
                   and Access.MMA_READ not in _accesses(kernel, bad) else ""))
          if isinstance(bad, View) else
          "write results into a separate ml.smem buffer (the compiler multi-buffers it too)",
          notes=(f"{o.loc}: the pipelined load",))
    addr = address_ops(body, view, iv, invariant) if isinstance(view, View) else []
    if addr is None:
      raise E.PipelineError(
          "the window of this load depends on values computed in the loop body or carried from one"
          " iteration to the next; a pipelined load's window may depend only on the loop index and on"
          " values from before the loop", o.loc,
          hint=f"compute the window from the loop index (ml.ds(k * 64, 64)); an element of a register tensor at"
               f" the loop index (p[t]) is computed in the body (through SMEM), so read it from the array in"
               f" memory instead (ml.ds(perm[t], 1) of an input perm); or use {unpipelined(ws)}")
    sites.append((o, view, addr))
  return sites


def loop_bytes(bufs, stages, sites, slots_before, once=(), size=None):
  """The SMEM a pipelined loop's buffers `bufs` take at `stages`: a copy a stage, but one of those in `once` (store
  buffers that single_copy_stores keeps once); `size(buf)`, one copy's bytes (by default its padded stage)."""
  align = lambda n: -(-n // hw.SMEM_BUFFER_ALIGN) * hw.SMEM_BUFFER_ALIGN
  size = size or (lambda b: stage_bytes(b.type))
  barriers = (slots_before + stages * sites) * hw.MBARRIER_BYTES
  one = {id(b) for b in once}
  return align(barriers) + sum(align((1 if id(b) in one else stages) * size(b)) for b in bufs)


class _Beside:
  """The kernel's SMEM buffers other than a pipelined loop's `bufs`: `other`, the bytes of those live across the
  loop (a residual tile), which share the SMEM with its stages; `apart`, those used only before or after it (an
  epilogue's tile), which share the stages' bytes."""

  def __init__(self, kernel, bufs, loop):
    self.ids = ids = {id(b) for b in bufs}
    self.order = order = list(ir.walk(kernel.body))
    # (the outermost loop around the pipelined one: the SMEM plan keeps a loop's buffers live through it)
    whole = next((o for o in ir.path_to(kernel.body, loop) if isinstance(o, LOOPS)), loop)
    span = (order.index(whole), order.index(whole) + len(list(ir.walk(whole.body)))) if whole in order else None
    defs = {r.id: o for o in order for r in o.results}

    def during_loop(buf) -> bool:
      at = [i for i, o in enumerate(order) if not isinstance(o, SmemAlloc)
            and any(root_in(defs, v) is buf for v in o.operands() if isinstance(v, ir.Value))]
      return span is None or not at or not (max(at) < span[0] or min(at) > span[1])
    self.during_loop = during_loop
    mine = [o.result for o in order if isinstance(o, SmemAlloc) and id(o.result) not in ids
            and isinstance(resolve(o.result.type.dtype), DType)]
    self.other = sum(r.type.nbytes for r in mine if during_loop(r))
    self.apart = sum(r.type.nbytes for r in mine if not during_loop(r))


def single_copy_stores(kernel, loaded, stores, S, sites, loop) -> bool:
  """Whether the loop's store buffers take one copy rather than S: where S copies of them overflow the SMEM
  beside the kernel's other buffers and one copy fits (each trip's write then waits for the previous trip's TMA
  store to have read the buffer: the sync pass's wait, not the pipeline's deferred one)."""
  if not stores or S < 2:
    return False
  n = kernel.num_load_slots
  fits = lambda bufs: loop_bytes(bufs, S, sites, n) + _Beside(kernel, bufs, loop).other <= hw.SMEM_LIMIT
  return not fits(loaded + stores) and fits(loaded)


def check_fits(kernel, bufs, S, sites, loc, ws: bool = False, loop=None, once=()):
  """The loop's buffers, S copies each, all live at once: a clear error, at the loop, with the
  number of stages that fits (frontend/smem.py checks the whole kernel later). `once`: the loop's store buffers,
  which keep one copy where a copy a stage does not fit (single_copy_stores): the bytes, stage counts and tiles
  the error names count them once (probe 66a: it suggested stages=1 where stages=2 fits with one store copy)."""
  if loop_bytes(bufs, S, sites, kernel.num_load_slots) <= hw.SMEM_LIMIT:
    return
  need = loop_bytes(bufs, S, sites, kernel.num_load_slots, once)
  # the kernel's other buffers (a residual tile live across the loop) share the SMEM: the stage
  # count suggested must fit beside them, or the next build fails again at the buffers (MG402);
  # the buffers used before or after the loop share its bytes, but must fit themselves
  beside = _Beside(kernel, bufs, loop)
  other, apart = beside.other, beside.apart
  fits = [s for s in range(S - 1, 0, -1)
          if loop_bytes(bufs, s, sites, kernel.num_load_slots, once) + other <= hw.SMEM_LIMIT
          and apart + other + hw.SMEM_BUFFER_ALIGN <= hw.SMEM_LIMIT]
  from .smem import _alloc_loc
  from .stage_overflow import stages_error
  raise stages_error(kernel, loop, bufs, S, sites, loc, need, fits, other, unpipelined(ws), lambda b: _alloc_loc(kernel, b),
                     lambda: _no_stages_fit(beside.order, beside.ids, beside.during_loop, bufs, sites, kernel, other,
                                            ws), once=once)


def _no_stages_fit(order, ids, during_loop, bufs, sites, kernel, other, ws) -> str:
  """The hint where no stage count fits: what one stage of the loop's buffers and the kernel's other buffers live
  across the loop take (the largest named: a compiler scratch, the rows a dot of fewer than 64 padded, is not the
  user's own), and the loop's buffers to make smaller."""
  one = loop_bytes(bufs, 1, sites, kernel.num_load_slots)
  live = sorted((o.result for o in order if isinstance(o, SmemAlloc) and id(o.result) not in ids
                 and isinstance(resolve(o.result.type.dtype), DType) and during_loop(o.result)),
                key=lambda r: -r.type.nbytes)
  named = ", ".join(f"{r.name or 'a buffer'} {r.type.nbytes // 1024} KiB" for r in live[:4])
  more = f" and {len(live) - 4} more" if len(live) > 4 else ""
  loop_bufs = " and ".join(b.name or "the loop's buffer" for b in bufs)
  return (f"use smaller tiles: even unpipelined ({unpipelined(ws)}) the loop's buffers take {one} bytes and the"
          f" kernel's other buffers, live across the loop, {other} ({named}{more}): {one + other} in all; make"
          f" {loop_bufs} smaller (fewer rows a block), or the tiles those other buffers hold" if other else
          f"use smaller tiles: even unpipelined ({unpipelined(ws)}) the loop's buffers take {one} bytes; make"
          f" {loop_bufs} smaller (fewer rows a block)")


def store_buffers(kernel, body, loaded) -> list:
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
