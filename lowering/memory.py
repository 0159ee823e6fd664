"""Memory ops on both backends: SMEM buffers, views, register reads and writes, TMA copies."""
from __future__ import annotations

import dataclasses

import numpy as np

import jax.experimental.mosaic.gpu as mgpu
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu, llvm, memref, vector

from ..frontend import errors as E
from ..frontend import hw
from ..frontend import ir as kir
from ..frontend.dtypes import DType
from ..frontend.ops.memory import ClusterRef, Copy, Load, SmemAlloc, Store, View
from ..frontend.tma import wide_piece
from ..frontend.types import LayoutKind
from .bool_memory import array_from_bytes, array_to_bytes
from .interpret_memory import OutOfBoundsError, Ref
from .mosaic import index, is_split, layout_of, operand, to_index
from .registry import interpret, lower


# ---------------------------------------------------------------- Mosaic GPU
@lower(SmemAlloc)
def _smem_alloc(ctx, o):
  ctx.set(o.result, ctx.smem_refs[o.result.id])


@lower(View)
def _view(ctx, o):
  base = ctx.get(o.ref)      # a root or a peer's copy of one (ml.cluster_ref): its root's tiling
  ctx.set(o.result, ctx.View(base, o.index, ctx.root_ids.get(id(base), o.ref.id), o.transpose))


@lower(ClusterRef)
def _cluster_ref(ctx, o):
  dim = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)[o.axis]
  cta = operand(ctx, o.cta)
  cta = arith.constant(index(), cta) if isinstance(cta, int) else to_index(cta)
  src = ctx.get(o.ref)
  peer = mgpu.utils.get_cluster_ref(ctx.memref(src), dim, cta)
  rid = src.root_id if isinstance(src, ctx.View) else ctx.root_ids.get(id(src))
  if rid is not None:       # the peer's buffer is laid out as ours: the same tiling and swizzle
    ctx.root_ids[id(peer)] = rid
  ctx.set(o.result, peer)


def _register_memref(ctx, ref, t):
  """The memref a register transfer of a tensor of type `t` reads or writes: size-1 axes of a
  row or column vector folded away, this warpgroup's rows of a split tile."""
  tiled = ctx.smem_layout(ref)
  mem = ctx.memref(ref)
  shape = t.layout.register_shape(t.shape)
  if tiled is None and len(ir.MemRefType(mem.type).shape) != len(shape):   # (m, 1) held as (m,)
    mem = mgpu.memref_slice(mem, tuple(0 if i in t.layout.drop else slice(None)
                                       for i in range(len(t.shape))))
  if is_split(t):
    mem = ctx.my_rows(mem, shape[0], tiled)
  return mem, tiled


def _local(mem) -> bool:
  """Whether `mem` is this CTA's SMEM: Mosaic GPU's optimized tiled transfers take only that;
  a peer's buffer (`ml.cluster_ref`, a generic address) goes element by element."""
  return mgpu.utils.is_smem_ref(ir.MemRefType(mem.type))


def _as_one_tile(mem):
  """`mem` with as many leading unit dimensions as it has dimensions: one tile of a tiled
  transfer. (Mosaic GPU's load_untiled reshapes, which fails on strided windows.)"""
  for _ in range(len(ir.MemRefType(mem.type).shape)):
    mem = mgpu.utils.memref_unsqueeze(mem, 0)
  return mem


def _minor_strided(mem, layout) -> bool:
  """Whether a tiled-layout register transfer of `mem` must go element by element: its vectors run
  along a last dimension that is not contiguous (a column of a GMEM array read as the column vector
  of a tensor-core tile, `s.at[ml.ds(j * 128, 128), k][...][None, :]`), which Mosaic GPU's tiled
  transfers reject (they move each register's vector at once)."""
  if not isinstance(layout, fa.TiledLayout) or layout.vector_length == 1:
    return False
  strides, _ = ir.MemRefType(mem.type).get_strides_and_offset()
  return bool(strides) and strides[-1] != 1


def _vec(layout) -> int:
  """The elements a register holds along the last dimension (a tiled layout's vector, a strided one's)."""
  return getattr(layout, "vector_length", None) or layout.vec_size


def _unaligned(o, layout) -> bool:
  """Whether register transfer `o`'s window may start a row off its vectors' alignment: the offset of
  each of its rows (its start, and its rows' strides in the root) is not proven a multiple of the vector
  length (tma_starts.mark_register_starts); then it goes element by element, since a misaligned vector
  load or store faults the GPU."""
  return o.start_multiple is not None and o.start_multiple % _vec(layout) != 0


def _rows_aligned(o, mem) -> bool:
  """Whether every row of register transfer `o`'s window `mem` (an untiled SMEM or GMEM memref) starts at a
  multiple of 16 bytes. From jax 0.11 on, Mosaic GPU's load_tiled / store_tiled move the registers of a layout
  that looks like a tensor-core fragment (32 bits a register: two 16-bit elements, one 32-bit) with ldmatrix /
  stmatrix where the buffer is SMEM, and those take 16-byte aligned rows only: an 8-element column vector stored
  at element 42 of a bfloat16 buffer, or read from element 3 of a float32 one, faulted the H200
  (CUDA_ERROR_MISALIGNED_ADDRESS, session 37). Elsewhere the registers move as plain vector loads and stores
  (_plain_load, _plain_store), which need only the vector's alignment (`_unaligned`)."""
  ty = ir.MemRefType(mem.type)
  bits = mgpu.utils.bitwidth(ty.element_type)
  strides, offset = ty.get_strides_and_offset()
  dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
  if any(s == dynamic or s * bits % 128 for s, n in zip(strides[:-1], ty.shape[:-1]) if n != 1):
    return False
  if offset != dynamic:
    return offset * bits % 128 == 0
  return o.start_multiple is not None and o.start_multiple * bits % 128 == 0


def _plain_load(vector_type, ptr):
  """A register's plain vector load (a function other than llvm.load itself: load_tiled then skips ldmatrix)."""
  return llvm.load(vector_type, ptr)


def _plain_store(value, mem):
  """FragmentedArray.store_tiled without stmatrix: each register a plain vector store (see _rows_aligned)."""
  shape = tuple(value.shape)
  for get, _update, _idx, ptr in fa.FragmentedArray.transfer_tiled(mem, 16, value.layout, shape, False):
    reg = get(value.registers)
    ty = ir.VectorType(reg.type)
    if isinstance(ty.element_type, ir.FloatType) and mgpu.utils.bitwidth(ty.element_type) <= 8:
      reg = vector.bitcast(ir.VectorType.get(ty.shape, ir.IntegerType.get_signless(mgpu.utils.bitwidth(ty.element_type))), reg)
    llvm.store(reg, ptr)


def _element_loads(mem, t, layout, signed):
  """`mem` read into `layout` with one scalar load an element (see _minor_strided, _unaligned)."""
  shape = tuple(ir.MemRefType(mem.type).shape)
  vec = _vec(layout)
  regs = []
  for idx in layout.thread_idxs(shape):
    elems = [memref.load(mem, [*idx[:-1], arith.addi(idx[-1], arith.constant(ir.IndexType.get(), e))])
             for e in range(vec)]
    regs.append(vector.from_elements(ir.VectorType.get((vec,), elems[0].type), elems))
  registers = np.empty(layout.registers_shape(shape), dtype=object)
  registers.flat[:] = regs
  return fa.FragmentedArray(_registers=registers, _layout=layout, _is_signed=signed)


def _element_stores(value, mem):
  """`value` written into `mem` with one scalar store an element (see _minor_strided, _unaligned)."""
  shape = tuple(ir.MemRefType(mem.type).shape)
  vec = _vec(value.layout)
  for reg, idx in zip(value.registers.flat, value.layout.thread_idxs(shape)):
    for e in range(vec):
      x = vector.extract(reg, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([e]))
      memref.store(x, mem, [*idx[:-1], arith.addi(idx[-1], arith.constant(ir.IndexType.get(), e))])


@lower(Load)
def _load(ctx, o):
  t = o.result.type
  mem, tiled = _register_memref(ctx, ctx.get(o.ref), t)
  signed = t.dtype.is_signed
  if tiled is not None:
    x = fa.FragmentedArray.load_tiled(mem, swizzle=tiled.swizzle, is_signed=signed, optimized=_local(mem))
  elif _minor_strided(mem, layout_of(t)) or _unaligned(o, layout_of(t)):
    x = _element_loads(mem, t, layout_of(t), signed)
  elif t.layout.kind == LayoutKind.STRIDED:
    x = fa.FragmentedArray.load_strided(mem, is_signed=signed, vec_size=t.layout.vec)
  else:
    one = _as_one_tile(mem)
    load = {} if _rows_aligned(o, one) else {"_load_fun": _plain_load}
    x = fa.FragmentedArray.load_tiled(one, swizzle=16, layout=layout_of(t), optimized=False, is_signed=signed,
                                      **load)
  ctx.set(o.result, array_from_bytes(x) if t.dtype == DType.bool_ else x)


@lower(Store)
def _store(ctx, o):
  mem, tiled = _register_memref(ctx, ctx.get(o.ref), o.value.type)
  value, t = ctx.get(o.value), o.value.type
  if t.dtype == DType.bool_:       # a bool ref holds bytes (bool_memory)
    value = array_to_bytes(value)
  if tiled is not None:
    value.store_tiled(mem, swizzle=tiled.swizzle, optimized=_local(mem))
  elif _minor_strided(mem, value.layout) or _unaligned(o, value.layout):
    _element_stores(value, mem)
  elif t.layout.kind == LayoutKind.STRIDED:
    value.store_untiled(mem, optimized=False)
  else:
    one = _as_one_tile(mem)
    if _rows_aligned(o, one):
      value.store_tiled(one, swizzle=16, optimized=False)
    else:
      _plain_store(value, one)


@lower(Copy)
def _copy(ctx, o):
  src, dst = ctx.get(o.src), ctx.get(o.dst)
  smem = dst if o.slot >= 0 else src
  tiled = ctx.smem_layout(smem)
  if o.tile_blocks:
    return _copy_tile_blocks(ctx, o, smem, src, tiled)
  if o.row_blocks:
    return _copy_row_blocks(ctx, o, smem, src if o.slot >= 0 else dst, tiled)
  kw = {} if tiled is None else dict(gmem_transform=mgpu.TileTransform(tiled.tile),
                                     swizzle=tiled.swizzle)
  gview = src if o.slot >= 0 else dst
  box = [i.size for i in gview.index if not i.squeeze] if isinstance(gview, ctx.View) else None
  smem_mem = ctx.memref(smem)
  if tiled is not None and box is not None and box[-1] == tiled.tile[1]:
    # One column of tiles: the same bytes as the box's swizzled rows (frontend one_tile_column).
    kw = dict(swizzle=tiled.swizzle)
    smem_mem = mgpu.memref_reshape(smem_mem, tuple(box))
  if tiled is None and (box or ir.MemRefType(gview.type).shape)[-1] > hw.TMA_MAX_BOX:
    kw, smem_mem = _wide_rows(gview, smem_mem, o.loc)
  if o.slot >= 0:   # GMEM -> SMEM
    gmem, gslice = ctx.gmem_window(src)
    if o.multicast is not None:
      kw["collective"] = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)[o.multicast]
    ctx.launch.async_copy(src_ref=gmem, dst_ref=smem_mem, gmem_slice=gslice,
                          barrier=ctx.barrier(o.slot, o.stage), predicate=ctx.tma_predicate, **kw)
  else:
    if o.reduce is not None:
      from .atomic import tma_reduction_op
      kw["reduction_op"] = tma_reduction_op(o.reduce, o.dst.type.dtype)
    gmem, gslice = ctx.gmem_window(dst)
    ctx.launch.async_copy(src_ref=smem_mem, dst_ref=gmem, gmem_slice=gslice,
                          predicate=ctx.tma_predicate, **kw)


def _wide_rows(gview, smem_mem, loc):
  """(async_copy's keywords, the buffer's memref) of an untiled copy whose last axis is wider than a TMA box
  (frontend/tma.py's wide_piece): the array's last axis tiled by the piece width and the buffer's unfolded
  into (pieces, width), the same bytes, so one box moves the window (probe 56c)."""
  root = gview.ref if hasattr(gview, "index") else gview
  full = tuple(ir.MemRefType(root.type).shape)
  index = gview.index if hasattr(gview, "index") else tuple(kir.Idx(0, n) for n in full)
  elem = ir.MemRefType(root.type).element_type
  w = wide_piece(full, index, mgpu.utils.bitwidth(elem) // 8)
  if w is None:
    raise E.InternalError(f"a TMA copy of a window {tuple(i.size for i in index)} wider than a box", loc)
  rank = ir.MemRefType(smem_mem.type).rank
  return dict(gmem_transform=mgpu.TileTransform((w,))), mgpu.memref_unfold(smem_mem, rank - 1, (None, w))


def _window_start(gslice, d):
  """Where a GMEM window's dimension `d` starts: a static slice's start, or a run-time (or negative) one."""
  first = gslice[d]
  base = first.base if isinstance(first, mgpu.utils.DynamicSlice) else first.start
  return arith.constant(index(), base) if isinstance(base, int) else to_index(base)


def _blocks_of(ctx, o, smem, gview, what):
  """(GMEM memref, window slice, the window's kept dims, SMEM memref, its shape (..., rows / t0, columns / t1, t0, t1),
  the count of its leading unit dims) of a copy of a tiled buffer by blocks of tiles."""
  gmem, gslice = ctx.gmem_window(gview)
  kept = [k for k, i in enumerate(gview.index) if not i.squeeze]
  smem_mem = ctx.memref(smem)
  shape = list(ir.MemRefType(smem_mem.type).shape)
  lead = len(shape) - 4
  if lead < 0 or any(s != 1 for s in shape[:lead]):
    raise E.InternalError(f"a copy {what} into SMEM of shape {shape}", o.loc)
  return gmem, gslice, kept, smem_mem, shape, lead


def _expect_all(ctx, o, smem_mem, shape):
  """The load's barrier, told to expect the whole buffer's bytes once (its copies arrive on it without arriving)."""
  itemsize = mgpu.utils.bitwidth(ir.MemRefType(smem_mem.type).element_type) // 8
  barrier = ctx.barrier(o.slot, o.stage)
  barrier.arrive_expect_tx(int(np.prod(shape)) * itemsize, predicate=ctx.tma_predicate)
  return barrier


def _copy_tile_blocks(ctx, o, smem, gview, tiled):
  """A TMA load into a buffer tiled (t0, t1) for the tensor cores whose GMEM columns are not whole tiles of the array
  (B of a matmul stored (K, N) at N = 328), or whose start is no tile's (the frontend's layout_checks.by_tile_blocks
  sets `o.tile_blocks`): one copy per (t0, t1) tile of the window, each a box one tile wide, which is the tile's
  swizzled rows (as a copy of one column of tiles is), so the array is not tiled and its rows and columns past the
  end read zeros, as any TMA window's. The copies arrive on the load's barrier once, with all their bytes."""
  t0, t1 = tiled.tile
  gmem, gslice, kept, smem_mem, shape, lead = _blocks_of(ctx, o, smem, gview, "a tile at a time")
  r0, c0 = _window_start(gslice, kept[-2]), _window_start(gslice, kept[-1])
  barrier = _expect_all(ctx, o, smem_mem, shape)
  for k in range(shape[-4]):
    rows = mgpu.ds(arith.addi(r0, arith.constant(index(), k * t0)), t0)
    for m in range(shape[-3]):
      cols = mgpu.ds(arith.addi(c0, arith.constant(index(), m * t1)), t1)
      sl = list(gslice)
      sl[kept[-2]], sl[kept[-1]] = rows, cols
      tile = mgpu.memref_slice(smem_mem, (*(slice(None),) * lead, k, m))
      ctx.launch.async_copy(src_ref=gmem, dst_ref=tile, gmem_slice=tuple(sl), barrier=barrier, arrive=False,
                            swizzle=tiled.swizzle, predicate=ctx.tma_predicate)


def _copy_row_blocks(ctx, o, smem, gview, tiled):
  """A TMA copy of a buffer tiled (t0, t1) for the tensor cores whose GMEM rows are not whole tiles of the array
  (a sequence of 100 keys), or whose load starts inside a tile (a cu_seqlens offset; the frontend's
  layout_checks.by_row_blocks sets `o.row_blocks`): one copy per t0 rows of the window. Each fills one row of
  tiles of the buffer, (C / t1, t0, t1) in SMEM, from the array viewed as (C / t1 column tiles, rows, t1)
  (TileTransform of the columns alone, then the column tiles before the rows), so the array need not be tiled by
  rows and any row starts a block; rows past the end read zeros and are not written, as any TMA window's. A
  load's blocks arrive on its barrier once, with all their bytes; a store's commit one bulk group."""
  t0, t1 = tiled.tile
  gmem, gslice, kept, smem_mem, shape, lead = _blocks_of(ctx, o, smem, gview, "by rows of tiles")
  r, blocks = kept[-2], shape[-4]
  n = len(kept)                                                # the window's dims, then the column tiles
  perm = (*range(n - 2), n - 1, n - 2, n)
  kw = dict(gmem_transform=(mgpu.TileTransform((t1,)), mgpu.TransposeTransform(perm)), swizzle=tiled.swizzle)
  start = _window_start(gslice, r)
  load = o.slot >= 0
  if load:
    barrier = _expect_all(ctx, o, smem_mem, shape)
  for k in range(blocks):
    rows = mgpu.ds(arith.addi(start, arith.constant(index(), k * t0)), t0)
    sl = (*gslice[:r], rows, *gslice[r + 1:])
    dst_block = mgpu.memref_slice(smem_mem, (*(slice(None),) * lead, k))
    if load:
      ctx.launch.async_copy(src_ref=gmem, dst_ref=dst_block, gmem_slice=sl, barrier=barrier, arrive=False,
                            predicate=ctx.tma_predicate, **kw)
    else:
      ctx.launch.async_copy(src_ref=dst_block, dst_ref=gmem, gmem_slice=sl, arrive=k == blocks - 1,
                            predicate=ctx.tma_predicate, **kw)


# ---------------------------------------------------------------- interpreter
@interpret(SmemAlloc)
def _i_smem_alloc(cta, o):
  cta.set(o.result, Ref.whole(o.result, cta.rank))


def _compose(cta, base, index) -> tuple:
  """The window `index` of the ref `base` (a root, or a ClusterRef of a view), over base's root."""
  it, win = iter(index), []
  for s, n, sq in base.win:
    if sq:
      win.append((s, n, sq))
      continue
    i = next(it)
    win.append((s + int(cta.operand(i.start)), i.size, i.squeeze))
  return tuple(win)


@interpret(View)
def _i_view(cta, o):
  base = cta.get(o.ref)
  win, shape, r = _compose(cta, base, o.index), base.root.type.shape, len(o.index)
  bounds = None
  outer = [base.win] + [_compose(cta, base, o.within[k:k + r]) for k in range(0, len(o.within), r or 1) if r]
  if base.bounds or any(o.within) or base.win != Ref.whole(base.root, base.owner).win:
    bounds = list(base.bounds or ((0, d) for d in shape))
    for w in outer:                  # the part of the root inside every view it was taken from
      bounds = [(max(lo, min(max(s, 0), d)), min(hi, max(min(s + n, d), 0)))
                for (lo, hi), (s, n, _), d in zip(bounds, w, shape)]
  cta.set(o.result, Ref(base.root, base.owner, win, o.transpose, tuple(bounds or ()), o.result.name))


@interpret(ClusterRef)
def _i_cluster_ref(cta, o):
  base, c = cta.get(o.ref), cta.m.kernel.cluster
  k = int(cta.operand(o.cta))
  if not 0 <= k < c[o.axis]:
    raise OutOfBoundsError(f"CTA {k} is outside the cluster's {c[o.axis]} CTAs along axis {o.axis}", o.loc,
                           hint="check the CTA index given to ml.cluster_ref")
  coords = [cta.rank % c[0], cta.rank // c[0] % c[1], cta.rank // (c[0] * c[1])]
  coords[o.axis] = k
  cta.set(o.result, dataclasses.replace(base, owner=coords[0] + c[0] * (coords[1] + c[1] * coords[2]),
                                        transposed=False))


@interpret(Load)
def _i_load(cta, o):
  ref = cta.get(o.ref)
  cta.set(o.result, cta.read(ref, o, check=not o.merge and not o.keep).reshape(o.result.type.shape))
  if o.keep and ref.owner == cta.rank and all(b > a for a, b in o.keep):    # only what the mask keeps is used
    cta.check_filled(ref, o, tuple(slice(a, b) for a, b in o.keep))
  if o.merge and ref.owner >= 0:     # elements nothing wrote: kept unwritten by the masked store
    holes = ~cta.m.ctas[ref.owner].filled[ref.root.id][ref.index]
    cta.holes.pop(o.result.id, None)   # (a loop's earlier trip may have left its own)
    if holes.any():
      cta.holes[o.result.id] = holes.reshape(o.result.type.shape)


@interpret(Store)
def _i_store(cta, o):
  cta.write(cta.get(o.ref), cta.get(o.value), o, holes=cta.holes.pop(o.value.id, None))


def stage_of(cta, stage) -> int:
  return int(cta.get(stage)) if isinstance(stage, kir.Value) else stage


@interpret(Copy)
def _i_copy(cta, o):
  src, dst = cta.get(o.src), cta.get(o.dst)
  if src.owner == cta.rank and dst.owner < 0:   # SMEM -> GMEM: only the elements inside GMEM are read
    data = cta.read(src, o, "tma_read", check=False)
    if (c := dst.clip()) is not None:
      cta.check_filled(src, o, c[1])
  else:
    data = cta.read(src, o, "tma_read")
  if dst.owner < 0:
    cta.store_sync(dst, o)
  if o.reduce is not None:
    from .atomic import reduce_into_gmem
    reduce_into_gmem(cta, dst, data, o.reduce, o)
  else:
    cta.write(dst, data, o, "tma_write")
  if dst.owner >= 0:                 # GMEM -> SMEM lands at the matching WaitLoad
    barrier = o.slot + stage_of(cta, o.stage)
    cta.pending_load[(dst.root.id, dst.part)] = (barrier, o.loc)
    cta.issued[barrier] = cta.issued.get(barrier, 0) + 1
    if o.multicast is not None:      # every peer along the axis must load this same window
      cta.multicasts.append((o.slot, src.win, o))
  else:                              # SMEM -> GMEM reads SMEM, and writes GMEM, until AwaitStores
    cta.pending_store.append(((src.root.id, src.part), o.loc))
    cta.pending_gmem.append((cta.m.canon.get(dst.root.id, dst.root.id), dst.part, o.loc, o.reduce))
