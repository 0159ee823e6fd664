"""Reductions and shape ops on both backends: Reduce, Broadcast, Reshape.

Reductions use Mosaic GPU's `FragmentedArray.reduce`: within each warp by shuffles
where the layout puts a reduced axis on lanes and registers only, through the SMEM
scratch the frontend planned where it spans warps. float16/bfloat16 sums run in
float32 and round once (as jnp.sum).
"""
from __future__ import annotations

import math

import jax.experimental.mosaic.gpu as mgpu
from jax.experimental.mosaic.gpu import fragmented_array as fa
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu, memref, vector

from ..frontend import errors as E
from ..frontend import hw
from ..frontend.dtypes import DType
from ..frontend.smem import exchange_slots
from ..frontend.ops.column_slices import Slice
from ..frontend.ops.shape import Broadcast, Reduce, ReduceKind, Reshape
from ..frontend.ops.permute import RestrideLoad, TransposeLoad, TransposeStore
from ..frontend.ops.register_gather import ScratchGather
from ..frontend.ops.roll import FlipLoad, RollLoad
from ..frontend.relayout import RelayoutLoad, RelayoutStore
from ..frontend.types import LayoutKind, ScalarType
from . import interpret_numerics as N
from .bool_memory import array_from_bytes, array_to_bytes, i8
from .mosaic import is_split, layout_of, mlir_type
from .interpret_overflow import check_half_sum
from .registry import interpret, lower

_OPS = {ReduceKind.SUM: "add", ReduceKind.MAX: "max", ReduceKind.MIN: "min"}


def _upcast(o) -> bool:
  return o.kind == ReduceKind.SUM and o.x.type.dtype in (DType.f16, DType.bf16)


# ---------------------------------------------------------------- Mosaic GPU
@lower(Reduce)
def _reduce(ctx, o):
  x, xt = ctx.get(o.x), o.x.type
  if o.results and not isinstance(o.result.type, ScalarType) and all(xt.shape[a] == 1 for a in o.axes) \
      and tuple(x.shape) == ctx.local_shape(o.result.type):
    ctx.set(o.result, x)          # size-1 axes the register layout already leaves out
    return
  if o.results and not isinstance(o.result.type, ScalarType) and xt.layout.kind == LayoutKind.STRIDED \
      and all(xt.shape[a] == 1 for a in o.axes):
    ctx.set(o.result, x.reshape(ctx.local_shape(o.result.type)))    # size-1 axes of a strided tensor
    return
  if _upcast(o):
    x = x.astype(ir.F32Type.get())
  full = len(o.axes) == len(xt.shape)
  axes = tuple(range(len(x.shape))) if full else o.axes
  scratch = whole = None
  parts = exchange_slots(ctx.kernel, o)       # warpgroups combining their parts, or 0
  plan = ctx.kernel.smem_plan
  shared = getattr(plan, "shared_scratch", False)
  if o.scratch is not None:
    scratch = whole = ctx.memref(ctx.get(o.scratch))
    if ctx.num_warpgroups > 1:     # each warpgroup its slice (frontend/smem.py: where, when shared)
      n = (plan.scratch_stride // o.scratch.type.dtype.itemsize if shared
           else (o.scratch.type.shape[0] - parts) // ctx.num_warpgroups)
      start = arith.muli(ctx.wg, arith.constant(ir.IndexType.get(), n))
      scratch = mgpu.memref_slice(scratch, mgpu.ds(start, n))
  flip = SIGN_FLIP and o.kind != ReduceKind.SUM and xt.dtype.is_int and xt.dtype.is_signed
  if flip:
    x = _sign_flipped(x, xt.dtype, signed=False)
  r = x.reduce(_OPS[o.kind], axes, scratch)
  if flip:
    r = _sign_flipped(r, xt.dtype, signed=True)
  if scratch is not None and shared:
    mgpu.utils.warpgroup_barrier()   # every thread of the warpgroup done reading its slice first
  d = o.result.type.dtype
  plus_zero = o.kind == ReduceKind.SUM and xt.dtype.is_float and _summed(xt.shape, o.axes) > 1   # _i_reduce
  if full:
    v = r.registers.item()
    if parts:                     # each warpgroup reduced its rows: combine the parts
      base = (ctx.num_warpgroups * plan.scratch_stride // o.scratch.type.dtype.itemsize if shared
              else o.scratch.type.shape[0] - parts)
      v = _combine_parts(ctx, o, v, whole, base, parts)
    if plus_zero:
      v = arith.addf(v, arith.constant(v.type, 0.0))
    if _upcast(o):
      v = arith.truncf(mlir_type(d), v)
    ctx.set(o.result, v)
    return
  if parts:                       # a column statistic of a tile the warpgroups split by rows
    base = (ctx.num_warpgroups * plan.scratch_stride // o.scratch.type.dtype.itemsize if shared
            else o.scratch.type.shape[0] - parts)
    r = _combine_columns(ctx, o, r, whole, base, parts)
  if plus_zero:
    r = r + 0.0
  if _upcast(o):
    r = r.astype(mlir_type(d))
  ctx.set(o.result, r)


# ptxas (jax 0.11.2's, on the H100 of session 52) gets an int32 max or min wrong when a negation feeds it
# and the reduction goes on across lanes by shuffles: `v = -x; ml.max(v, axis=1)` gave rows results from
# other rows' elements (probe_s52_neg.py: right PTX, wrong results, `neg.s32` from inline asm too; `1 - x`
# right; design note 216). Signed min / max reduce instead as unsigned of the sign-flipped bits (the signed
# order of x is the unsigned order of x ^ 0x80000000), flipped back after: one LOP3 an element before, one
# a result after.
SIGN_FLIP = True


def _sign_flipped(x, d, signed):
  """`x` (a FragmentedArray of signed `d`) with its sign bits flipped, read as `signed` or not."""
  y = x ^ -(1 << (d.bits - 1))
  return fa.FragmentedArray(_registers=y.registers, _layout=y.layout, _is_signed=signed)


def _combine_columns(ctx, o, r, scratch, base, parts):
  """The column statistic `r` of a tensor-core tile whose rows the warpgroups split: each
  warpgroup's part holds its own rows' statistic, in the same registers of the same threads of
  every warpgroup (the layout repeats per warpgroup, and over the warps of one), so lane l of each
  warp stores its registers at slot (warpgroup, l) (its warps store the same values), and every
  thread combines the slots of its lane in warpgroup order (probe 62a; before, MG204)."""
  if not all(isinstance(w, fa.Replicated) for w in r.layout.warp_dims):
    raise E.InternalError(f"a column statistic's layout is not replicated over warps: {r.layout}", o.loc)
  regs = list(r.registers.flat)
  vec = [ir.VectorType(v.type).shape[0] if isinstance(v.type, ir.VectorType) else 1 for v in regs]
  per = sum(vec)
  if ctx.num_warpgroups * hw.WARP * per > parts:
    raise E.InternalError(f"a column statistic's exchange needs {ctx.num_warpgroups} x {hw.WARP} x {per}"
                          f" elements, its scratch has {parts}", o.loc)
  index = ir.IndexType.get()
  lane = arith.remui(gpu.thread_id(gpu.Dimension.x), arith.constant(index, hw.WARP))

  def at(part, k):           # part: a warpgroup's number, static or this warpgroup's (ctx.wg)
    first = (arith.constant(index, base + part * hw.WARP * per) if isinstance(part, int) else
             arith.addi(arith.constant(index, base), arith.muli(part, arith.constant(index, hw.WARP * per))))
    return [arith.addi(arith.addi(first, arith.muli(lane, arith.constant(index, per))), arith.constant(index, k))]

  offs = np.cumsum([0] + vec[:-1]).tolist()
  for v, k in zip(regs, offs):
    (vector.store if isinstance(v.type, ir.VectorType) else memref.store)(v, scratch, at(ctx.wg, k))
  ctx.thread_barrier()
  acc = None
  for p in range(ctx.num_warpgroups):
    vals = [vector.load(v.type, scratch, at(p, k)) if isinstance(v.type, ir.VectorType) else memref.load(scratch, at(p, k))
            for v, k in zip(regs, offs)]
    acc = vals if acc is None else [_combined(o, a, x) for a, x in zip(acc, vals)]
  ctx.thread_barrier()            # every part read before a warpgroup reduces here again
  out = np.empty(r.registers.shape, dtype=object)
  out.flat[:] = acc
  return fa.FragmentedArray(_registers=out, _layout=r.layout, _is_signed=r.is_signed)


def _combine_parts(ctx, o, v, scratch, base, parts):
  """The reduction of the warpgroups' partial results `v` (each uniform in its warpgroup),
  through the scratch's `parts` slots from `base`, combined in warpgroup order in every thread."""
  index = ir.IndexType.get()
  memref.store(v, scratch, [arith.addi(ctx.wg, arith.constant(index, base))])
  ctx.thread_barrier()
  vals = [memref.load(scratch, [arith.constant(index, base + p)]) for p in range(parts)]
  ctx.thread_barrier()            # every part read before a warpgroup reduces here again
  acc = vals[0]
  for x in vals[1:]:
    acc = _combined(o, acc, x)
  return acc


def _combined(o, acc, x):
  """Two parts of reduction `o` (scalars or register vectors) combined."""
  d = o.x.type.dtype
  if o.kind == ReduceKind.SUM:
    return arith.addf(acc, x) if d.is_float else arith.addi(acc, x)
  if d.is_float:
    return (arith.maximumf if o.kind == ReduceKind.MAX else arith.minimumf)(acc, x)
  if o.kind == ReduceKind.MAX:
    return (arith.maxsi if d.is_signed else arith.maxui)(acc, x)
  return (arith.minsi if d.is_signed else arith.minui)(acc, x)


@lower(Broadcast)
def _broadcast(ctx, o):
  x, t, xt = ctx.get(o.x), o.result.type, o.x.type
  shape = ctx.local_shape(t)
  if tuple(x.shape) == tuple(shape) and xt.layout == t.layout:
    ctx.set(o.result, x)          # only size-1 axes the register layout leaves out
    return
  if xt.layout.kind == LayoutKind.STRIDED and t.layout.kind == LayoutKind.STRIDED \
      and math.prod(shape) == math.prod(x.shape):
    ctx.set(o.result, x.reshape(shape))      # size-1 axes inserted: no element moves
    return
  if xt.layout.kind == LayoutKind.STRIDED:
    dims = tuple(range(len(shape) - len(x.shape), len(shape)))
  else:
    dims = tuple(i for i in range(len(shape)) if i not in xt.layout.drop)
  ctx.set(o.result, x.broadcast_in_dim(shape, dims, layout_of(t)))


@lower(Reshape)
def _reshape(ctx, o):
  x, t = ctx.get(o.x), o.result.type
  shape = ctx.local_shape(t)
  ctx.set(o.result, x if tuple(x.shape) == tuple(shape) else x.reshape(shape))


@lower(Slice)
def _slice(ctx, o):
  ctx.set(o.result, ctx.get(o.x)[:, o.start:o.stop])


def _element_indices(ctx, t, idx):
  """(row, column) index Values of a 2-D tensor's element from FragmentedArray.foreach's `idx`
  (squeezed axes put back, this warpgroup's row offset added where warpgroups split the rows)."""
  index = ir.IndexType.get()
  idx = list(idx)
  cols = ctx.local_shape(t)[-1]
  if len(idx) == 2 and cols % 16:
    # foreach adds a register vector's element number to the last index alone, so in a strided
    # tile whose rows are not a whole number of vectors (vectors hold up to 16 elements) an
    # element past a row's end is the next row's: carry it (a (1024, 2) tile's columns were wrong).
    n = arith.constant(index, cols)
    idx = [arith.addi(idx[0], arith.divui(idx[1], n)), arith.remui(idx[1], n)]
  for a in sorted(t.layout.drop):
    idx.insert(a, arith.constant(index, 0))
  idx[0] = _global_row(ctx, t, idx[0])
  return idx


def _global_row(ctx, t, i):
  """Index `i` along a tensor's first axis, counted from this warpgroup's first row where
  warpgroups split the tensor by rows (FragmentedArray.foreach counts each warpgroup's from 0)."""
  if ctx.num_warpgroups > 1 and is_split(t):
    index = ir.IndexType.get()
    return arith.addi(i, arith.muli(ctx.wg, arith.constant(index, ctx.local_shape(t)[0])))
  return i


def _vector_coords(ctx, t, idx):
  """(0, position) index Values of a 1-D tensor's element from FragmentedArray.foreach's `idx`, this
  warpgroup's offset added where warpgroups split the vector (a tensor-core tile's row statistic at
  block=256: each warpgroup holds its own rows' values, and foreach counts them from 0)."""
  return [arith.constant(ir.IndexType.get(), 0), _global_row(ctx, t, idx[0])]


def _flat(i, j, row):
  index = ir.IndexType.get()
  return arith.addi(arith.muli(i, arith.constant(index, row)), j)


@lower(TransposeStore)
def _transpose_store(ctx, o):
  mem, t = ctx.memref(ctx.get(o.scratch)), o.x.type
  row = t.shape[1] + o.pad

  def put(v, idx):
    i, j = _element_indices(ctx, t, idx)
    memref.store(v, mem, [_flat(i, j, row)])

  ctx.get(o.x).foreach(put)


def _scratch_array(ctx, o, position):
  """`o`'s result (a register array) read element by element from its flat scratch `o.scratch` at `position(t,
  idx)` (an index value) of each element `idx`; a bool result from the bytes an SMEM bool buffer holds."""
  mem, t = ctx.memref(ctx.get(o.scratch)), o.result.type
  bool_ = t.dtype == DType.bool_
  zero = arith.constant(i8() if bool_ else mlir_type(t.dtype), 0.0 if t.dtype.is_float else 0)
  base = fa.FragmentedArray.splat(zero, ctx.local_shape(t), layout_of(t), is_signed=t.dtype.is_signed)
  x = base.foreach(lambda _, idx: memref.load(mem, [position(t, idx)]), create_array=True,
                   is_signed=t.dtype.is_signed)
  return array_from_bytes(x) if bool_ else x


@lower(TransposeLoad)
def _transpose_load(ctx, o):
  row = o.result.type.shape[0] + o.pad            # the stored tensor's rows are the result's columns

  def position(t, idx):
    r, c = _element_indices(ctx, t, idx)
    return _flat(c, r, row)

  ctx.set(o.result, _scratch_array(ctx, o, position))


def _flat_index(ctx, t, idx, roll=None, flip=()):
  """The row-major position of a tensor's element from FragmentedArray.foreach's `idx` (size-1
  axes put back, this warpgroup's row offset added). foreach adds a register vector's element
  number to the last index alone, which the flat position absorbs: no carry is needed."""
  index = ir.IndexType.get()
  idx = list(idx)
  if len(idx) < len(t.shape):     # a 2-D row or column vector: its size-1 axis (a 1-D vector has none)
    for a in sorted(t.layout.drop):
      idx.insert(a, arith.constant(index, 0))
  idx[0] = _global_row(ctx, t, idx[0])
  assert len(idx) == len(t.shape), (idx, t)
  if roll is not None and roll[0] is not None:    # (axis, shift): the index along axis moved, modulo its size
    idx[roll[0]] = _moved(idx[roll[0]], roll[1], t.shape[roll[0]])
  flat, stride = None, 1
  for i, n in reversed(list(zip(idx, t.shape))):
    term = i if stride == 1 else arith.muli(i, arith.constant(index, stride))
    flat = term if flat is None else arith.addi(flat, term)
    stride *= n
  if roll is not None and roll[0] is None:        # (None, shift): the flat index moved
    flat = _moved(flat, roll[1], stride)
  for a in flip:        # reversed along a: coordinate c (from the flat position, which absorbed any carry)
    step = math.prod(t.shape[a + 1:])             # becomes n - 1 - c, the flat position moving by (n - 1 - 2c) * step
    c = arith.remui(arith.divui(flat, arith.constant(index, step)), arith.constant(index, t.shape[a]))
    back = arith.muli(c, arith.constant(index, 2 * step))
    flat = arith.subi(arith.addi(flat, arith.constant(index, (t.shape[a] - 1) * step)), back)
  return flat


def _moved(i, shift, n):
  """(i + shift) % n of an index 0 <= i < n, for 0 < shift < n."""
  index = ir.IndexType.get()
  moved = arith.addi(i, arith.constant(index, shift))
  past = arith.cmpi(arith.CmpIPredicate.uge, moved, arith.constant(index, n))
  return arith.select(past, arith.subi(moved, arith.constant(index, n)), moved)


@lower(RelayoutStore)
def _relayout_store(ctx, o):
  mem, t = ctx.memref(ctx.get(o.scratch)), o.x.type
  x = ctx.get(o.x)
  if t.dtype == DType.bool_:          # an SMEM bool buffer holds bytes (bool_memory)
    x = array_to_bytes(x)
  x.foreach(lambda v, idx: memref.store(v, mem, [_flat_index(ctx, t, idx)]))


@lower(RelayoutLoad)
def _relayout_load(ctx, o):
  ctx.set(o.result, _scratch_array(ctx, o, lambda t, idx: _flat_index(ctx, t, idx)))


@lower(RollLoad)
def _roll_load(ctx, o):
  ctx.set(o.result, _scratch_array(ctx, o, lambda t, idx: _flat_index(ctx, t, idx, (o.axis, o.shift))))


@lower(FlipLoad)
def _flip_load(ctx, o):
  ctx.set(o.result, _scratch_array(ctx, o, lambda t, idx: _flat_index(ctx, t, idx, flip=o.axes)))


@lower(RestrideLoad)
def _restride_load(ctx, o):
  ctx.set(o.result, _scratch_array(ctx, o, lambda t, idx: _restrided(ctx, t, idx, o)))


def _restrided(ctx, t, idx, o):
  """The scratch position of result element `idx`: its coordinates taken back from its row-major position
  (which absorbed foreach's vector element), then offset + sum(coordinate * stride)."""
  index = ir.IndexType.get()
  flat = _flat_index(ctx, t, idx)
  pos = arith.constant(index, o.offset)
  for k, (n, s) in enumerate(zip(t.shape, o.strides)):
    step = math.prod(t.shape[k + 1:])
    c = flat if k == 0 else arith.remui(flat, arith.constant(index, n * step))
    if step > 1:
      c = arith.divui(c, arith.constant(index, step))
    if n > 1 and s:
      pos = arith.addi(pos, arith.muli(c, arith.constant(index, s)))
  return pos


@lower(ScratchGather)
def _scratch_gather(ctx, o):
  mem, t = ctx.memref(ctx.get(o.scratch)), o.result.type
  index = ir.IndexType.get()
  ctx.set(o.result, ctx.get(o.pos).foreach(lambda v, _: memref.load(mem, [arith.index_cast(index, v)]),
                                           create_array=True, is_signed=t.dtype.is_signed))


# ---------------------------------------------------------------- interpreter
@interpret(FlipLoad)
def _i_flip_load(cta, o):
  x = np.asarray(cta.read(cta.get(o.scratch), o)).reshape(o.result.type.shape)
  cta.set(o.result, np.flip(x, axis=o.axes).copy())


@interpret(RestrideLoad)
def _i_restride_load(cta, o):
  x = np.asarray(cta.read(cta.get(o.scratch), o)).reshape(-1)
  idx = np.indices(o.result.type.shape).reshape(len(o.result.type.shape), -1)
  pos = o.offset + sum(i * s for i, s in zip(idx, o.strides))
  cta.set(o.result, x[pos].reshape(o.result.type.shape))


@interpret(ScratchGather)
def _i_scratch_gather(cta, o):
  ref = cta.get(o.scratch)
  keep = o.used
  if keep is None:
    x = np.asarray(cta.read(ref, o)).reshape(-1)
  else:        # a masked load's gather: only the elements its mask keeps must have been written (probe 72a)
    x = np.asarray(cta.read(ref, o, check=False)).reshape(-1)
    pos = np.asarray(cta.get(o.pos)).astype(np.int64).reshape(-1)
    used = np.zeros(x.shape, bool)
    used[pos[np.asarray(cta.get(keep)).reshape(-1).astype(bool)]] = True
    if ref.owner >= 0 and ref.owner == cta.rank:
      cta.check_filled(ref, o, box=used.reshape(np.shape(cta.buffer(ref)[ref.index])))
  cta.set(o.result, x[np.asarray(cta.get(o.pos)).astype(np.int64)].reshape(o.result.type.shape))


@interpret(RollLoad)
def _i_roll_load(cta, o):
  x = np.asarray(cta.read(cta.get(o.scratch), o)).reshape(o.result.type.shape)
  cta.set(o.result, np.roll(x, -o.shift, axis=o.axis))       # (axis None: the flattened roll, as jnp's)


@interpret(RelayoutStore)
def _i_relayout_store(cta, o):
  cta.write(cta.get(o.scratch), np.asarray(cta.get(o.x)).reshape(-1), o)


@interpret(RelayoutLoad)
def _i_relayout_load(cta, o):
  cta.set(o.result, np.asarray(cta.read(cta.get(o.scratch), o)).reshape(o.result.type.shape))


@interpret(TransposeStore)
def _i_transpose_store(cta, o):
  ref = cta.get(o.scratch)
  m, n = o.x.type.shape
  flat = np.zeros((m, n + o.pad), N.np_dtype(o.x.type.dtype))
  flat[:, :n] = cta.get(o.x)
  cta.write(ref, flat.reshape(-1), o)


@interpret(TransposeLoad)
def _i_transpose_load(cta, o):
  n, m = o.result.type.shape
  flat = cta.read(cta.get(o.scratch), o).reshape(m, n + o.pad)
  cta.set(o.result, np.ascontiguousarray(flat[:, :n].T))


@interpret(Slice)
def _i_slice(cta, o):
  cta.set(o.result, np.array(cta.get(o.x)[:, o.start:o.stop]))


def _summed(shape, axes) -> int:
  """The number of elements each result of a reduction over `axes` combines."""
  return math.prod(shape[a] for a in axes)


@interpret(Reduce)
def _i_reduce(cta, o):
  x, d = cta.get(o.x), o.x.type.dtype
  if o.kind == ReduceKind.SUM:
    c = np.float32 if d.is_float else N.np_dtype(d)
    r = np.sum(x.astype(c), axis=o.axes, dtype=c)
    check_half_sum(cta, o, x, r)      # (a float16 sum past 65504: interpret_overflow.py)
    if d.is_float and _summed(x.shape, o.axes) > 1:
      # jnp's sign of zero: a float sum of several elements is +0.0 where it is zero (XLA starts from
      # its +0.0 init value, so -0.0 + -0.0 is +0.0; Mosaic GPU's reduction combines the elements
      # alone, so its lowering adds +0.0 too), and a sum of one element is that element (-0.0 stays;
      # the lowering moves nothing), where numpy gives +0.0.
      r = np.asarray(r) + c(0.0)
    elif d.is_float:
      r = x.astype(c).reshape(np.shape(r))
  else:
    r = N.ieee_reduce(o.kind == ReduceKind.MAX, x, o.axes)
  cta.set(o.result, np.asarray(r).astype(N.np_dtype(d)))


@interpret(Broadcast)
def _i_broadcast(cta, o):
  out = o.result.type.shape
  x = cta.get(o.x).reshape([o.x.type.shape[o.dims.index(a)] if a in o.dims else 1 for a in range(len(out))])
  cta.set(o.result, np.array(np.broadcast_to(x, out)))


@interpret(Reshape)
def _i_reshape(cta, o):
  cta.set(o.result, cta.get(o.x).reshape(o.result.type.shape))
