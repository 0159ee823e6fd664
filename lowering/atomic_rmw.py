"""Atomics that return the old value, and ordered ones (frontend/ops/atomic_rmw.py; probe 48c).

A single GMEM element's cas, xchg, or add/max/min whose value is used, or whose `sem=` is not relaxed, is one
PTX `atom` issued by one thread of the CTA. Around it the CTA's threads meet: before, so that a release orders
every thread's earlier accesses (a barrier is a CTA-scope fence, and PTX's release is cumulative); after, so
that every thread's later accesses follow an acquire; the old value goes through an SMEM word between the two
barriers (and a third keeps the word from being reused while a thread still reads it). A release also
awaits this thread's TMA stores (`cp.async.bulk.wait_group 0`, the thread that issues them) and orders the
async proxy's writes before it (`fence.proxy.async.global`); an acquire orders later TMA loads after it.
"""
from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, llvm, memref, scf
import jax.experimental.mosaic.gpu as mgpu

from ..frontend.dtypes import DType
from ..frontend.ops.atomic import AtomicKind
from .access import _scalar_indices
from .mosaic import operand, scalar_const

_OPS = {AtomicKind.CAS: "cas.b32", AtomicKind.XCHG: "exch.b32"}


def _asm(text: str, args=(), constraints: str = "", result=None):
  return llvm.inline_asm(result or ir.Type.parse("!llvm.void"), list(args), text, constraints,
                         has_side_effects=True)


def _bits(v, d: DType):
  """A 32-bit value as the register PTX's `atom` takes: an i32 (a float32's bits for cas and exch)."""
  return arith.bitcast(ir.IntegerType.get_signless(32), v) if d == DType.f32 else v


def atom(ptr, kind: AtomicKind, d: DType, value, cmp=None, sem="acq_rel", scope="gpu"):
  """The old value of the element at the generic pointer `ptr` after one `atom`."""
  i32 = ir.IntegerType.get_signless(32)
  order = f".{sem}.{scope}"
  if kind in _OPS:
    args = [ptr, _bits(value, d)] + ([_bits(cmp, d)] if kind == AtomicKind.CAS else [])
    text = f"atom{order}.{_OPS[kind]} $0, [$1], $2" + (", $3;" if kind == AtomicKind.CAS else ";")
    if kind == AtomicKind.CAS:      # PTX's order: [a] == b ? c : [a]
      args = [ptr, _bits(cmp, d), _bits(value, d)]
    old = _asm(text, args, "=r,l,r" + (",r" if kind == AtomicKind.CAS else ""), i32)
    return arith.bitcast(ir.F32Type.get(), old) if d == DType.f32 else old
  if d == DType.f32:                # (add only: hw.ATOMIC_FETCH)
    return _asm(f"atom{order}.add.f32 $0, [$1], $2;", [ptr, value], "=f,l,f", ir.F32Type.get())
  ty = ("s32" if d == DType.i32 else "u32") if kind != AtomicKind.ADD else ("s32" if d == DType.i32 else "u32")
  return _asm(f"atom{order}.{kind.value}.{ty} $0, [$1], $2;", [ptr, value], "=r,l,r", i32)


def _const(ctx, x, d):
  v = operand(ctx, x)
  return v if isinstance(v, ir.Value) else scalar_const(v, d)


def lower_fetch(ctx, o):
  """A single GMEM element's atomic `o` by one thread, its old value handed to all (when used)."""
  d = o.ref.type.dtype
  mem, idx = _scalar_indices(ctx, ctx.get(o.ref))
  ptr = mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(idx)) if idx else mem)
  value = _const(ctx, o.value, d)
  cmp = _const(ctx, o.cmp, d) if o.cmp is not None else None
  # (an xchg's mask; an add's, max's or min's selected the identity, the old value's update, in the frontend)
  mask = operand(ctx, o.mask) if o.kind == AtomicKind.XCHG and o.mask is not None else None
  release, acquire = o.sem in ("release", "acq_rel"), o.sem in ("acquire", "acq_rel")
  fetched = bool(o.results) and o.scratch is not None
  word = ctx.get(o.scratch) if fetched else None
  zero = arith.constant(ir.IndexType.get(), 0)
  if release or fetched:
    ctx.thread_barrier()
  with ir.InsertionPoint(scf.IfOp(ctx.tma_predicate).then_block):
    if release:        # this thread's TMA stores land, and the async proxy's writes come before the release
      _asm("cp.async.bulk.wait_group 0;")
      _asm("fence.proxy.async.global;")
    if mask is not None:    # an xchg where the mask is on; where off, a cas of the value for itself (no change)
      if_op = scf.IfOp(mask, [value.type], has_else=True)
      with ir.InsertionPoint(if_op.then_block):
        scf.yield_([atom(ptr, o.kind, d, value, cmp, o.sem, o.scope)])
      with ir.InsertionPoint(if_op.else_block):
        scf.yield_([atom(ptr, AtomicKind.CAS, d, value, value, o.sem, o.scope)])
      old = if_op.result
    else:
      old = atom(ptr, o.kind, d, value, cmp, o.sem, o.scope)
    if acquire:
      _asm("fence.proxy.async.global;")
    if fetched:
      memref.store(old, word, [zero])
    scf.yield_([])
  if fetched or acquire:
    ctx.thread_barrier()
  if fetched:
    ctx.set(o.results[0], memref.load(word, [zero]))
    ctx.thread_barrier()


def fenced(ctx, o, emit):
  """emit() (a tensor's atomics, `red` by each thread) ordered by `o.sem`: the CTA's threads meet and fence at
  `o.scope` before a release's updates and after an acquire's."""
  release, acquire = o.sem in ("release", "acq_rel"), o.sem in ("acquire", "acq_rel")
  if release:
    ctx.thread_barrier()
    _asm(f"fence.acq_rel.{o.scope};")
  emit()
  if acquire:
    _asm(f"fence.acq_rel.{o.scope};")
    ctx.thread_barrier()
