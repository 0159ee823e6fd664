"""Atomic updates on both backends.

On the GPU a tensor's update is Mosaic GPU's register atomics (`store_untiled` / `store_tiled`
with `atomic=`: `red` per register); a tensor every warpgroup holds whole (not split by rows)
is updated by warpgroup 0 only. A single element is one `red` by one thread of the CTA.
"""
from __future__ import annotations

import dataclasses

import jax.experimental.mosaic.gpu as mgpu
import numpy as np
from jaxlib.mlir import ir
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir.dialects import arith, llvm, scf, vector

from ..frontend.dtypes import DType
from ..frontend.ops.atomic import AtomicKind, AtomicUpdate, odd_pairs
from ..frontend.ops.elementwise import BinOp
from . import interpret_numerics as N
from .access import _scalar_indices
from .memory import _register_memref, _unaligned
from .mosaic import is_split, layout_of, operand, scalar_const
from .registry import interpret, lower

_PTX_TYPE = {DType.f32: ("f32", "f"), DType.i32: ("s32", "r"), DType.u32: ("u32", "r"),
             DType.f16: ("noftz.f16", "h"), DType.bf16: ("noftz.bf16", "h"), DType.i64: ("s64", "l")}


def _scalar_red(ptr, value, kind: AtomicKind, d: DType, smem: bool = False):
  """One `red` of `value` at `ptr` (a generic pointer, or a shared::cta one when `smem`)."""
  ty, constraint = _PTX_TYPE[d]
  if d == DType.i64 and kind == AtomicKind.ADD:     # (PTX's 64-bit integer add is .u64: the same bits)
    ty = "u64"
  if kind in (AtomicKind.AND, AtomicKind.OR, AtomicKind.XOR):    # (bitwise: PTX's .b32)
    ty = "b32"
  if constraint == "h":
    value = arith.bitcast(ir.IntegerType.get_signless(16), value)
  space, scope, ptr_c = (".shared::cta", "cta", "r") if smem else ("", "gpu", "l")
  llvm.inline_asm(ir.Type.parse("!llvm.void"), [ptr, value],
                  f"red{space}.relaxed.{scope}.{kind.value}.{ty} [$0], $1;", f"{ptr_c},{constraint}",
                  has_side_effects=True)


def _f32_extreme_red(ptr, value, kind: AtomicKind, smem: bool = False):
  """A float32 max or min at `ptr` (`red` has none) as two integer ones on the float's own bits, which
  order as the floats do: for max, a value of sign bit 0 is the larger float where its bits are the larger
  int32 (`red.max.s32`: a negative float in memory is a negative int32), one of sign bit 1 where its bits are
  the smaller uint32 (`red.min.u32`: a non-negative float in memory is below 2**31); min mirrors it. Each
  `red` alone leaves the float max (min) of memory and its operand, so they compose atomically; the
  operand the sign rules out, and both for a NaN (a NaN meeting a number leaves the number, as the float
  `red`s and interpret mode's fmax), are the operation's identity: no change."""
  i32 = ir.IntegerType.get_signless(32)
  c = lambda v: arith.constant(i32, v)
  bits = arith.bitcast(i32, value)
  nan = arith.cmpf(arith.CmpFPredicate.UNO, value, value)
  neg = arith.cmpi(arith.CmpIPredicate.slt, bits, c(0))
  pos = arith.andi(arith.xori(neg, arith.constant(ir.IntegerType.get_signless(1), 1)),
                   arith.xori(nan, arith.constant(ir.IntegerType.get_signless(1), 1)))
  neg = arith.andi(neg, arith.xori(nan, arith.constant(ir.IntegerType.get_signless(1), 1)))
  if kind == AtomicKind.MAX:     # identities: INT32_MIN for the signed max, 0xFFFFFFFF for the unsigned min
    _scalar_red(ptr, arith.select(pos, bits, c(-2 ** 31)), AtomicKind.MAX, DType.i32, smem=smem)
    _scalar_red(ptr, arith.select(neg, bits, c(-1)), AtomicKind.MIN, DType.u32, smem=smem)
  else:                          # identities: INT32_MAX for the signed min, 0 for the unsigned max
    _scalar_red(ptr, arith.select(pos, bits, c(2 ** 31 - 1)), AtomicKind.MIN, DType.i32, smem=smem)
    _scalar_red(ptr, arith.select(neg, bits, c(0)), AtomicKind.MAX, DType.u32, smem=smem)


def _red(ptr, value, kind: AtomicKind, d: DType, smem: bool = False):
  """One element's atomic `kind` (float32 max and min through their bits, _f32_extreme_red; 8- and 16-bit
  integers by a cas loop on their word, atomic_narrow.py)."""
  from .atomic_narrow import is_narrow, narrow_atom
  if is_narrow(d) or d in (DType.f16, DType.bf16) and kind in (AtomicKind.MAX, AtomicKind.MIN) and smem:
    narrow_atom(ptr, kind, d, value, smem=smem)
  elif d in (DType.f16, DType.bf16) and kind in (AtomicKind.MAX, AtomicKind.MIN):    # (one element: no `red`)
    from .atomic_rmw import _half_cas_loop
    _half_cas_loop(ptr, kind, value, ".relaxed.gpu")
  elif d == DType.f32 and kind != AtomicKind.ADD:
    _f32_extreme_red(ptr, value, kind, smem=smem)
  else:
    _scalar_red(ptr, value, kind, d, smem=smem)


def _first_replica(layout):
  """An i1: this thread holds the first copy of its registers (a layout that repeats values
  across lanes or warps, as row and column statistics do)."""
  i32 = ir.IntegerType.get_signless(32)
  tid = mgpu.utils.thread_idx()
  ok = arith.constant(ir.IntegerType.get_signless(1), 1)
  for idx, dims in ((arith.remui(tid, arith.constant(i32, 32)), layout.lane_dims),
                    (arith.remui(arith.divui(tid, arith.constant(i32, 32)), arith.constant(i32, 4)),
                     layout.warp_dims)):
    shape = [d.times if isinstance(d, fa.Replicated) else layout.tiled_tiling_shape[d] for d in dims]
    stride = 1
    for d, n in reversed(list(zip(dims, shape))):
      if isinstance(d, fa.Replicated):
        i = arith.remui(arith.divui(idx, arith.constant(i32, stride)), arith.constant(i32, n))
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, i, arith.constant(i32, 0)))
      stride *= n
  return ok


def _update_each_element(x, mem, kind, d):
  """One `red` per element this thread holds (f16/bf16 `red` updates pairs of elements, so a
  thread holding single ones, and the replicated layouts, update element by element)."""
  shape = tuple(x.shape)
  smem = mgpu.utils.is_smem_ref(mem)
  for idx, reg in zip(x.layout.thread_idxs(shape), x.registers.flat):
    n = ir.VectorType(reg.type).shape[0]
    for j in range(n):
      at = list(idx[:-1]) + [arith.addi(idx[-1], arith.constant(ir.IndexType.get(), j))]
      ptr = mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(at)))
      if smem:
        ptr = llvm.ptrtoint(ir.IntegerType.get_signless(32), ptr)
      v = vector.extract(reg, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([j]))
      _red(ptr, v, kind, d, smem=smem)


def _replicated_update(x, mem, kind, d):
  """Atomics of a tensor whose layout repeats values: each element once, by its first holder."""
  with ir.InsertionPoint(scf.IfOp(_first_replica(x.layout)).then_block):
    _update_each_element(x, mem, kind, d)
    scf.yield_([])


@lower(AtomicUpdate)
def _atomic_update(ctx, o):
  from .atomic_rmw import fenced, lower_fetch
  if not o.ref.type.shape and (o.results or o.kind in (AtomicKind.CAS, AtomicKind.XCHG) or o.sem != "relaxed"
                               or o.scope != "gpu"):
    return lower_fetch(ctx, o)                   # an `atom` (probe 48c: lowering/atomic_rmw.py)
  if o.ref.type.shape and o.sem != "relaxed":
    return fenced(ctx, o, lambda: _atomic_update(ctx, dataclasses.replace(o, sem="relaxed")))
  ref = ctx.get(o.ref)
  if not o.ref.type.shape:                       # one element: one thread
    mem, idx = _scalar_indices(ctx, ref)
    ptr = mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(idx)) if idx else mem)
    v = operand(ctx, o.value)
    v = v if isinstance(v, ir.Value) else scalar_const(v, o.ref.type.dtype)
    pred = ctx.tma_predicate if o.mask is None else arith.andi(ctx.tma_predicate, operand(ctx, o.mask))
    with ir.InsertionPoint(scf.IfOp(pred).then_block):       # (no `red` where a mask is off: probe 48c)
      _red(ptr, v, o.kind, o.ref.type.dtype)
      scf.yield_([])
    return
  t = o.value.type
  mem, tiled = _register_memref(ctx, ref, t)
  x = ctx.get(o.value)
  if o.results or o.kind in (AtomicKind.CAS, AtomicKind.XCHG):   # a window's old values (probe 49c)
    from .atomic_rmw import window_old_values
    return window_old_values(ctx, o, mem, x)

  def emit():
    if t.layout.drop:
      _replicated_update(x, mem, o.kind, t.dtype)
    elif tiled is None and (odd_pairs(t) or t.dtype == DType.f32 and o.kind != AtomicKind.ADD
                            or t.dtype == DType.i64 or t.dtype.is_int and t.dtype.bits < 32
                            or _unaligned(o, layout_of(t))):
      # f16/bf16 held one element per register; f32 max/min; int64 (`red.add.u64`, probe 50c); a window at a
      # start not proven a multiple of the vector length (vector `red` faults there, as a vector store does); 8-
      # and 16-bit integers (a cas loop each, probe 56b)
      _update_each_element(x, mem, o.kind, t.dtype)
    elif tiled is not None:
      x.store_tiled(mem, swizzle=tiled.swizzle, atomic=o.kind.value)
    else:
      x.store_untiled(mem, optimized=False, atomic=o.kind.value)

  once_per_cta(ctx, t, emit)


def once_per_cta(ctx, t, emit):
  """emit() by warpgroup 0 only when every warpgroup holds the tensor `t` whole (not split by
  rows), so that an update is applied once."""
  if ctx.num_warpgroups > 1 and not is_split(t):
    first = arith.cmpi(arith.CmpIPredicate.eq, ctx.wg, arith.constant(ir.IndexType.get(), 0))
    with ir.InsertionPoint(scf.IfOp(first).then_block):
      emit()
      scf.yield_([])
  else:
    emit()


def tma_reduction_op(kind: AtomicKind, d: DType) -> str:
  """Mosaic GPU's name for a TMA reduction of `kind` on `d` ("add", "max", "smax", "umin", ...)."""
  if kind == AtomicKind.ADD or d.is_float:
    return kind.value
  return ("s" if d.is_signed else "u") + kind.value


# ---------------------------------------------------------------- interpreter
def combine(kind: AtomicKind, d: DType, old, new):
  """What an atomic `kind` leaves in memory, in `d`'s numerics (narrow floats round once). Float
  max and min are the hardware's (`red.max`, TMA's reducing store, no `.NaN` qualifier): a NaN
  operand gives the other one, as np.fmax and np.fmin."""
  if d == DType.f32 and kind != AtomicKind.ADD:
    return _f32_extreme(kind, old, new)
  if d.is_float:
    c = N.compute_dtype(d)
    fn = {AtomicKind.MAX: np.fmax, AtomicKind.MIN: np.fmin}.get(kind) or N.FLOAT_BIN[_BIN[kind]]
    r = fn(np.asarray(old).astype(c), np.asarray(new).astype(c))
  else:
    r = N.INT_BIN[_BIN[kind]](np.asarray(old), np.asarray(new))
  return np.asarray(r).astype(N.np_dtype(d))


def _f32_extreme(kind: AtomicKind, old, new):
  """_f32_extreme_red's result: the float32 max (min) in the order of the bits' keys (sign and
  magnitude, so +0.0 above -0.0, and a NaN already in memory, an aliased input's, above +inf or below
  -inf by its sign bit), a NaN operand leaving memory as it is."""
  o, n = np.asarray(old, np.float32), np.asarray(new, np.float32)
  key = lambda v: (lambda b: np.where(b >= 0, b, b ^ np.int32(0x7FFFFFFF)))(v.view(np.int32))
  take = (key(n) > key(o)) if kind == AtomicKind.MAX else (key(n) < key(o))
  return np.where(take & ~np.isnan(n), n, o).astype(np.float32)


_BIN = {AtomicKind.ADD: BinOp.ADD, AtomicKind.MAX: BinOp.MAX, AtomicKind.MIN: BinOp.MIN, AtomicKind.AND: BinOp.AND,
        AtomicKind.OR: BinOp.OR, AtomicKind.XOR: BinOp.XOR}


@interpret(AtomicUpdate)
def _i_atomic_update(cta, o):
  from .interpret_sync import fetches, rmw, tensor_rmw
  if fetches(o):                 # (a cas, an xchg, an old value, an ordered update: probe 48c)
    return rmw(cta, o, combine)
  if o.results or o.kind in (AtomicKind.CAS, AtomicKind.XCHG):    # a window's old values (probe 49c)
    return tensor_rmw(cta, o, combine)
  if o.mask is not None and not bool(cta.get(o.mask)):      # a single element the mask keeps off: no access
    return None
  d = o.ref.type.dtype
  value = cta.operand(o.value, d)
  cta.update(cta.get(o.ref), lambda old: combine(o.kind, d, old, value), o)


def reduce_into_gmem(cta, dst, data, kind: AtomicKind, o):
  """A reducing TMA store: the part of the box inside the array combines with it atomically."""
  dst.check_view(o, cta.m.lead(dst), cta.batch_label)
  if (c := dst.clip()) is None:
    return
  cta.m.gmem_access(cta, dst, c[0], o, write=True, atomic=True)
  buf = cta.buffer(dst)
  buf[c[0]] = combine(kind, dst.root.type.dtype, buf[c[0]], data[c[1]])
