"""Where each SMEM buffer lives, and the budget of 227 KiB less 16 bytes (hw.SMEM_LIMIT says why).

The layout is fixed here (the lowering follows it) so the budget check sees
every byte the kernel will use: one 8-byte mbarrier per TMA load site first,
then each buffer at a 1024-byte boundary (what 128-byte swizzled TMA needs).

Buffers whose lifetimes do not overlap share memory (a matmul's epilogue tile
reuses its pipeline's stages). A lifetime runs from a buffer's first access to
its last, widened to whole loops; a buffer whose last access is a TMA load that
nothing reads afterwards lives to the kernel's end, where that load is awaited
(inside a loop that reads the buffer, the next iteration awaits it). Other
asynchronous work running past a lifetime (a dot, a TMA store) is handled by the
sync pass, which treats buffers sharing memory as one (`SmemPlan.group`).
"""
from __future__ import annotations

import dataclasses

from . import hw
from . import ir
from .dtypes import DType
from .ops.control import LOOPS, BarrierAlloc
from .ops.memory import ClusterRef, SmemAlloc, View, is_load
from .ops.shape import Reduce, ReduceKind
from .types import LayoutKind, RefType, Space, TensorType

SMEM_LIMIT = hw.SMEM_LIMIT
BUFFER_ALIGN = hw.SMEM_BUFFER_ALIGN
MBARRIER_BYTES = hw.MBARRIER_BYTES
# Mosaic GPU's reduction across warps stores warps x lanes x vector length elements per step;
# twice that lets two steps share a barrier.
SCRATCH_STEPS = 2


@dataclasses.dataclass(frozen=True)
class SmemPlan:
  barrier_bytes: int
  offsets: tuple[int, ...]     # byte offset of each kernel.smem buffer
  total: int
  group: dict                  # buffer value id -> id of the group of buffers sharing its memory
  # The reductions' scratches share one place (a kernel that did not fit otherwise): the
  # lowering then ends each such reduction with a warpgroup barrier before the next one writes.
  # Each warpgroup's slice of every scratch starts at warpgroup x scratch_stride bytes, and the
  # exchange slots at warpgroups x scratch_stride, in a place of scratch_region bytes.
  shared_scratch: bool = False
  scratch_stride: int = 0
  scratch_region: int = 0


def _align(n, a):
  return (n + a - 1) // a * a


def lifetimes(kernel, defs) -> dict[int, tuple[int, int]]:
  """Buffer value id -> (first, last) op index in program order, loops taken whole."""
  span: dict[int, list[int]] = {}
  index = 0

  def root_of(v):
    d = defs.get(v.id)
    return d.ref if isinstance(d, (View, ClusterRef)) else v

  def visit(block, loop_span, loops=()):
    nonlocal index
    for o in block.ops:
      start = index
      index += 1
      inner = loops + (id(o),) if isinstance(o, LOOPS) else loops
      if isinstance(o, LOOPS) and loop_span is None:   # a loop: its buffers live through it
        first, last = start, start + sum(1 for r in o.regions for _ in ir.walk(getattr(o, r)))
        for r in o.regions:
          visit(getattr(o, r), (first, last), inner)
        touched = {root_of(v).id: False for r in o.regions for x in ir.walk(getattr(o, r))
                   for v in x.operands() if isinstance(v.type, RefType)}
        for r in o.regions:
          for x in ir.walk(getattr(o, r)):
            for v in x.operands():
              if isinstance(v.type, RefType) and not is_load(x):
                touched[root_of(v).id] = True
        for rid, read in touched.items():   # loaded in the loop and never read there: in flight after it
          async_last[rid] = not read
      else:
        for r in o.regions:
          visit(getattr(o, r), loop_span, inner)
      here = loop_span or (start, start)
      if isinstance(o, SmemAlloc):     # a buffer lives from its first use (or here, if unused)
        allocated[o.result.id] = here
        if loops:
          local[o.result.id] = loops
      used = [v for v in o.operands() if isinstance(v.type, RefType)]
      for v in used:
        rid = root_of(v).id
        lo, hi = span.setdefault(rid, [here[0], here[1]])
        span[rid] = [min(lo, here[0]), max(hi, here[1])]
        own.setdefault(rid, []).append((start, loops, is_load(o)))
        if loop_span is None:
          async_last[rid] = is_load(o)

  allocated: dict = {}
  async_last: dict = {}    # buffer id -> whether its last access so far is a TMA load
  local: dict = {}         # buffer id -> the loops enclosing its allocation, if inside one
  own: dict = {}           # buffer id -> [(op index, enclosing loops, a TMA load)] of its uses
  visit(kernel.body, None)
  transient = getattr(kernel, "transient_ids", frozenset())
  for rid in transient:
    # A compiler scratch (written whole, then read, by one builtin: a scan, a concatenation) used only
    # in one loop's body, made there or before the loop (the relayout pass's, allocated at the kernel's
    # start): it lives from its first use to its last, not the whole loop (a body's scans, and the
    # scratches of a float32 product computed in registers each trip, share memory). A user's ml.smem in
    # a loop body keeps the whole loop: its data may be meant for a later trip (filled on the first trip only).
    uses, loops = own.get(rid, []), local.get(rid, ())
    if uses and uses[0][1][:len(loops)] == loops and len(uses[0][1]) > len(loops) - (rid in local) and all(
        u[1] == uses[0][1] for u in uses) and not max(uses)[2]:
      span[rid] = [min(u[0] for u in uses), max(u[0] for u in uses)]
  for rid, last_is_copy in async_last.items():
    if last_is_copy:       # the load may still be landing at the kernel's end: nothing may share it
      span[rid][1] = max(span[rid][1], index)
  for bid, here in allocated.items():
    span.setdefault(bid, list(here))
  for sid in kernel.scratch_ids:     # reduction scratch never shares memory
    span[sid] = [0, index]
  return {k: tuple(v) for k, v in span.items()}


def barrier_count(kernel) -> int:
  """mbarriers: one per TMA load site (and stage), and the compiler's barrier values."""
  return kernel.num_load_slots + sum(o.result.type.count for o in kernel.body.ops if isinstance(o, BarrierAlloc))


def plan_smem(kernel, defs=None) -> SmemPlan:
  barrier_bytes = barrier_count(kernel) * MBARRIER_BYTES
  life = lifetimes(kernel, defs or {})
  size_of = {b.id: b.type.nbytes for b in kernel.smem}
  nbytes = lambda b: size_of[b.id]
  # Reduction scratches live through the whole kernel, sharing memory with nothing (but with each
  # other in _place_sharing_scratch): when they alone overflow, only that placement can fit.
  scratch_fits = sum(size_of.get(sid, 0) for sid in kernel.scratch_ids) <= SMEM_LIMIT
  placed, total = _place(kernel.smem, life, barrier_bytes, nbytes) if scratch_fits else ([], SMEM_LIMIT + 1)
  if total > SMEM_LIMIT and scratch_fits:   # largest first may pad a buffer another order would not
    placed, total = min([(placed, total)] + [_place(kernel.smem, life, barrier_bytes, nbytes,
                                                    order=o) for o in ("as_allocated", "unaligned_last")],
                        key=lambda p: p[1])
  shared, stride, region = False, 0, 0
  if total > SMEM_LIMIT and len(kernel.scratch_ids) > 1:
    placed, total, stride, region = _place_sharing_scratch(kernel, life, barrier_bytes)
    shared = True
  if total > SMEM_LIMIT and not placed:      # (the scratches alone overflow: say how much they all need)
    placed, total = _place(kernel.smem, life, barrier_bytes, nbytes)
  offsets = {bid: off for bid, off, _, _ in placed}
  if total > SMEM_LIMIT:
    from .smem_overflow import overflow_error
    raise overflow_error(kernel, life, barrier_bytes, total, *_fewer_stages_hint(kernel, life, barrier_bytes))
  return SmemPlan(barrier_bytes, tuple(offsets[b.id] for b in kernel.smem), total,
                  _groups(placed), shared, stride, region)


def _groups(placed) -> dict:
  """Buffer id -> the id of its group, the first placed of the buffers whose bytes overlap, directly
  or through others (a sweep by offset: each run of overlapping byte ranges is a group)."""
  runs, end = [], None
  for i in sorted(range(len(placed)), key=lambda i: placed[i][1:3]):
    off, stop = placed[i][1:3]
    if end is None or off >= end:
      runs.append([])
      end = stop
    end = max(end, stop)
    runs[-1].append(i)
  return {placed[i][0]: placed[min(run)][0] for run in runs for i in run}


def _place_sharing_scratch(kernel, life, barrier_bytes):
  """_place with every reduction scratch in one place: reductions run one after another, each
  done with its scratch when it returns. Warpgroups run ahead of each other, so one may start the
  next reduction while another still reads its part of the last: every warpgroup's slice starts at
  the same byte (warpgroup x the largest slice) in every scratch, and the exchange slots after all
  slices, so each warpgroup only ever touches its own bytes (and the exchange, between CTA barriers).
  (placed, total, slice stride, region bytes)."""
  warpgroups = kernel.block // hw.WARPGROUP
  scratch = [b for b in kernel.smem if b.id in kernel.scratch_ids]
  item = lambda b: b.type.dtype.itemsize
  stride = _align(max((b.type.shape[0] - kernel.scratch_ids[b.id]) // warpgroups * item(b) for b in scratch), 16)
  region = warpgroups * stride + max(kernel.scratch_ids[b.id] * item(b) for b in scratch)
  big = scratch[0]
  placed, total = _place([b for b in kernel.smem if b.id not in kernel.scratch_ids or b is big], life,
                         barrier_bytes, lambda b: region if b is big else b.type.nbytes)
  at = next(off for bid, off, _, _ in placed if bid == big.id)
  placed += [(b.id, at, at + region, life.get(b.id, (0, 0))) for b in scratch if b is not big]
  return placed, total, stride, region


def _place(bufs, life, barrier_bytes, nbytes, order="largest_first"):
  """[(buffer id, offset, end, lifetime)] of `bufs` (largest first; or as allocated; or largest
  first with the sizes that are not whole KiB last, so only the last one's end is unaligned), each
  at the lowest offset free of the buffers live with it, and the bytes they span."""
  placed: list[tuple[int, int, int, tuple]] = []
  base = _align(barrier_bytes, BUFFER_ALIGN)
  key = {"largest_first": lambda b: -nbytes(b),
         "unaligned_last": lambda b: (nbytes(b) % BUFFER_ALIGN != 0, -nbytes(b))}.get(order)
  for buf in (bufs if key is None else sorted(bufs, key=key)):
    lt, size = life.get(buf.id, (0, 0)), nbytes(buf)
    live = sorted((o, e) for _, o, e, l in placed if l[0] <= lt[1] and lt[0] <= l[1])
    off = base
    for o, e in live:
      if off + size <= o:
        break
      off = max(off, _align(e, BUFFER_ALIGN))
    placed.append((buf.id, off, off + size, lt))
  return placed, max([e for _, _, e, _ in placed], default=barrier_bytes)


# MG402's hint where the largest buffer is one of these scratches of the compiler's, by its name.
_SCRATCH_HINTS = {
    "middle-axis reduction scratch":
        "reduce fewer elements per program (a smaller tile, or one static slice of the leading axis at a"
        " time): a reduction over the middle axis of a 3-D tensor runs as a scan of the whole tensor"
        " through {it}, middle-axis reduction scratch; a product summed over the middle"
        " axis, ml.sum(a[:, :, None] * b[None, :, :], axis=1), is a @ b, which ml.dot computes on the"
        " tensor cores (a of 64 rows or more)",
    "reshape scratch":
        "reshape fewer rows per program: {it}, reshape scratch, holds the whole tile a"
        " reshape moves between threads (a row-wise tile: reduced or broadcast along its rows); or"
        " reshape before the reduction or broadcast, or outside the kernel (free in XLA)",
    "wide dot scratch":
        "split the dot by hand, or compute fewer rows per program: {it}, wide dot scratch, joins"
        " the products of an ml.dot of more than 256 columns, which the tensor cores compute 256 columns at a"
        " time; one accumulator a piece needs no join (acc0 = ml.dot(a, b_s.at[:, 0:{p0}], acc0), acc1 ="
        " ml.dot(a, b_s.at[:, {p0}:{p01}], acc1), or b_s.at[0:{p0}].T of a buffer stored (n, k)), each stored into"
        " its columns of the output",
    "page gather scratch":
        "copy the pages into an SMEM buffer by TMA instead of gathering them into registers: {it}, page gather"
        " scratch, joins the pages a gather {pages}[{ids}] reads, as large as they are (and ml.dot stores them into"
        " SMEM once more); buf = ml.smem({shape}), then for k in ml.static_range({n}): ml.copy({pages}.at[{ids}[k]],"
        " buf.at[ml.ds(k * {page}, {page})]), and pass buf (buf.T for keys) to ml.dot; fewer pages a step where that"
        " is still too large (examples/paged_attention.py)",
}


def _wide_pieces(kernel) -> tuple[int, int]:
  """The first two column pieces the compiler split a wide dot's n into (2 x 192 of 384, 256 and 256 of 512:
  ops/wide_dots.py), read from the kernel's largest wide dot scratch (probe 68b; the hint is given only where one
  is)."""
  from .ops.wide_dots import pieces
  n = max((b for b in kernel.smem if b.name == "wide dot scratch"), key=lambda b: b.type.nbytes).type.shape[-1]
  sizes = pieces(n, 16) or pieces(n, 8) or [hw.MMA_N_MAX, n - hw.MMA_N_MAX]
  return sizes[0], sizes[0] + sizes[1]


def _scratch_text(kernel, name, it) -> str:
  """_SCRATCH_HINTS' hint of the scratch `name`, in the user's names where it has them (a page gather's, a wide
  dot's column pieces)."""
  pages, ids, n, shape = ("pages", "ids", "n", ("page_size", "head_dim"))
  for bid, got in getattr(kernel, "page_gathers", {}).items():
    if any(b.id == bid and b.name == name for b in kernel.smem):
      pages, ids, n, shape = got
  p0, p01 = _wide_pieces(kernel) if name == "wide dot scratch" else (0, 0)
  return _SCRATCH_HINTS[name].format(it=it, pages=pages, ids=ids, n=n, page=shape[0], p0=p0, p01=p01,
                                     shape=f"({n * shape[0] if isinstance(n, int) else 'n * page_size'}, "
                                           + ", ".join(str(k) for k in shape[1:]) + ")")


def _fewer_stages_hint(kernel, life, barrier_bytes):
  """(hint, notes) of an SMEM overflow: the largest stage count of the pipelined loops that fits
  with the rest of the kernel's buffers, when one does (the loops all cut to at most that many;
  barriers counted as for the stages asked for, so the count named fits)."""
  loops = kernel.pipelines
  if not loops:
    big = max(kernel.smem, key=lambda b: b.type.nbytes, default=None)
    if big is not None and big.name in ("scan scratch", "sort keys", "sort positions"):
      what = "scan" if big.name.startswith("scan") else "sort"
      more = (", or scan blocks of columns in a loop, carrying each row's running total into the next"
              if what == "scan" else "")
      return (f"{what} fewer rows per program{more}: the largest buffer, {big.name}, holds every row being"
              f" {what}{'ned' if what == 'scan' else 'ed'} (the whole rows: reading pieces of them does not"
              f" help)"), ()
    if big is not None and big.name in _SCRATCH_HINTS:
      return _scratch_text(kernel, big.name, "the largest buffer"), ()
    if (hint := _scratch_hint(kernel, life, barrier_bytes)) is not None:
      return hint, ()
    if big is not None and (big.name or "").endswith(("scratch", "sort keys", "sort positions")):
      return (f"use smaller tiles: the largest buffer, {big.name}, is one the compiler allocates to move a"
              f" register tensor's elements between threads (indexing, slicing, sorting, transposing, scanning"
              f" it); read such pieces straight from the ref instead (ref.at[rows, ml.ds(a, n)][...])"), ()
    return _live_with_scratch_hint(kernel, life, barrier_bytes, big) or "use smaller tiles", ()
  stages = {bid: p.stages for p in loops for bid in p.buffers}
  fewest = max(p.fewest for p in loops)
  for s in range(max(p.stages for p in loops) - 1, fewest - 1, -1):
    nbytes = lambda b: b.type.nbytes // stages[b.id] * min(s, stages[b.id]) if b.id in stages else b.type.nbytes
    if _place(kernel.smem, life, barrier_bytes, nbytes)[1] <= SMEM_LIMIT:
      unpipelined = " (no loads ahead of use: the loop then runs unpipelined)" if s == 1 else ""
      where = "" if len(loops) == 1 else " in the pipelined loops"
      return (f"use stages={s}{where}{unpipelined}, or smaller tiles",
              tuple(f"{p.loc}: a pipelined loop with stages={p.stages}" for p in loops if p.stages > s))
  if (hint := _scratch_hint(kernel, life, barrier_bytes)) is not None:
    return hint, ()
  if fewest == 2:
    return "use smaller tiles (a warp-specialised loop needs stages of at least 2)", ()
  return "use smaller tiles", ()


def _scratch_hint(kernel, life, barrier_bytes) -> str | None:
  """_SCRATCH_HINTS' hint of a scratch of the compiler's without which the kernel fits, though it is not the largest
  buffer or the kernel has pipelined loops (an MLA decode's 512-column p @ v joined through a wide dot scratch beside
  its stages: cutting the user's tiles, the other hint, cannot help, since rows under 64 are padded back; probe 68a)."""
  for name in _SCRATCH_HINTS:
    those = [b for b in kernel.smem if b.name == name]
    if those and _place(kernel.smem, life, barrier_bytes, lambda b: 0 if b in those else b.type.nbytes)[1] <= SMEM_LIMIT:
      return _scratch_text(kernel, name, f"a buffer of {sum(b.type.nbytes for b in those) // 1024} KiB without which the"
                           f" kernel fits")
  return None


_SCRATCH = ("scratch", "sort keys", "sort positions")


def _live_with_scratch_hint(kernel, life, barrier_bytes, big) -> str | None:
  """The user's largest buffer is still live while a scratch the compiler allocates (a transpose's,
  a sort's) is in use, and the two sharing memory would fit: say so, with the op that needs the scratch.
  Buffers whose lifetimes do not overlap share memory, so reading what the kernel needs from the buffer
  into registers before that op is the fix."""
  if big is None or (big.name or "").endswith(_SCRATCH):
    return None
  lt = life.get(big.id, (0, 0))
  overlap = [b for b in kernel.smem if (b.name or "").endswith(_SCRATCH) and b.id not in kernel.scratch_ids
             and (o := life.get(b.id, (0, 0)))[0] <= lt[1] and lt[0] <= o[1]]
  if not overlap or _place(kernel.smem, life, barrier_bytes,
                           lambda b: 0 if b in overlap else b.type.nbytes)[1] > SMEM_LIMIT:
    return None
  first = min(overlap, key=lambda b: life.get(b.id, (0, 0))[0])
  loc = _alloc_loc(kernel, first)
  line = f"line {loc.lineno}" if loc is not None and loc is not kernel.loc else "that op"
  return (f"{big.name} ({big.type.nbytes} bytes) is still in use where the compiler needs a {first.name}"
          f" ({first.type.nbytes} bytes) for {line}: read what the kernel needs from {big.name} into registers"
          f" before {line}, and the two share memory (buffers whose lifetimes do not overlap do); or use"
          f" smaller tiles")


def _alloc_loc(kernel, buf):
  for o in ir.walk(kernel.body):
    if isinstance(o, SmemAlloc) and o.result is buf:
      return o.loc
  return kernel.loc


def needs_scratch(o: Reduce) -> bool:
  """Whether Mosaic GPU reduces `o` across warps (through SMEM): all but a tile's rows
  reduced within each warp."""
  lay = o.x.type.layout
  if lay.kind == LayoutKind.STRIDED and all(o.x.type.shape[a] == 1 for a in o.axes) and o.results \
      and isinstance(o.result.type, TensorType):
    return False                 # size-1 axes removed: a reshape (lowering/shape.py)
  within_warp = (len(o.x.type.shape) == 2 and o.axes == (1,) and not lay.drop
                 and (lay.kind == LayoutKind.WGMMA or (lay.kind == LayoutKind.ROWS and lay.warps_per_row == 1)))
  return not within_warp


def scratch_dtype(o: Reduce) -> DType:
  d = o.x.type.dtype
  return DType.f32 if o.kind == ReduceKind.SUM and d in (DType.f16, DType.bf16) else d


def exchange_slots(kernel, o: Reduce) -> int:
  """Scratch slots, one a warpgroup, through which the warpgroups combine their parts of a full
  reduction of a tensor they split by rows (a Layout.wgs strided tensor; a tensor-core tile or
  its row statistic: a warp-specialised kernel's compute warpgroups meet at their own barrier, and
  in a ping-pong loop's body pingpong.py rejects the places where one warpgroup holds the turn,
  where they could not meet); for a column statistic of a tensor-core tile split by rows
  (`column_exchange`), a warp's registers of its part a warpgroup; 0 for any other reduction."""
  warpgroups = kernel.block // hw.WARPGROUP
  lay = o.x.type.layout
  full = len(o.axes) == len(o.x.type.shape) and not (o.results and isinstance(o.result.type, TensorType))
  if warpgroups > 1 and column_exchange(kernel, o):
    return warpgroups * hw.WARP * column_elems(o)
  if warpgroups == 1 or not full:
    return 0
  if lay.wgs > 1:
    return warpgroups
  split_tile = lay.kind == LayoutKind.WGMMA and 0 not in lay.drop and not lay.whole
  return warpgroups if split_tile else 0


def column_exchange(kernel, o: Reduce) -> bool:
  """Whether `o` reduces the rows of a tensor-core tile that several warpgroups split by rows into
  a vector of its columns (`ml.sum(acc, axis=0)`): each warpgroup reduces its own rows and the
  parts meet in SMEM (lowering/shape.py `_combine_columns`, probe 62a; before, MG204)."""
  lay = o.x.type.layout
  return (kernel.block > hw.WARPGROUP and len(o.x.type.shape) == 2 and tuple(o.axes) == (0,)
          and lay.kind == LayoutKind.WGMMA and not lay.drop and not lay.whole
          and o.results and isinstance(o.result.type, TensorType) and o.x.type.dtype.bits >= 16)


def column_elems(o: Reduce) -> int:
  """The elements of a column statistic of a tensor-core tile each thread holds: two of every
  8 columns (Mosaic GPU's WGMMA layout with its rows reduced, replicated over the rows' lanes)."""
  return -(-o.x.type.shape[1] // 8) * 2


def plan_scratch(kernel, builder) -> None:
  """Give every reduction across warps its SMEM scratch (one per warpgroup)."""
  warpgroups = kernel.block // hw.WARPGROUP

  def visit(block):
    for i, o in enumerate(block.ops):
      for r in o.regions:
        visit(getattr(o, r))
      if isinstance(o, Reduce) and o.scratch is None and needs_scratch(o):
        lay = o.x.type.layout
        vec = 2 if lay.kind == LayoutKind.WGMMA else lay.vec
        elems = hw.WARPGROUP * max(vec, 1) * SCRATCH_STEPS
        parts = exchange_slots(kernel, o)
        t = RefType((elems * warpgroups + parts,), scratch_dtype(o), Space.SMEM)
        v = ir.Value(t, "reduction scratch")
        alloc = SmemAlloc(o.loc, (v,))
        builder.defs[v.id] = alloc
        allocs.append(alloc)
        kernel.smem.append(v)
        kernel.scratch_ids[v.id] = parts
        block.ops[i] = dataclasses.replace(o, scratch=v)
        for res in o.results:
          builder.defs[res.id] = block.ops[i]

  allocs = []
  visit(kernel.body)
  kernel.body.ops[:0] = allocs
