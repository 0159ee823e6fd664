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
  from .atomic_narrow import is_narrow, narrow_atom
  if is_narrow(d):                  # (int8 to uint16: a cas loop on the element's 32-bit word, probe 56b)
    return narrow_atom(ptr, kind, d, value, cmp, order)
  if d == DType.i64:                # (jax_enable_x64's ints, probe 49c: the .b64/.u64/.s64 forms, "l" registers)
    ty = {AtomicKind.CAS: "cas.b64", AtomicKind.XCHG: "exch.b64", AtomicKind.ADD: "add.u64"}.get(kind,
                                                                                               f"{kind.value}.s64")
    args = [ptr, cmp, value] if kind == AtomicKind.CAS else [ptr, value]
    text = f"atom{order}.{ty} $0, [$1], $2" + (", $3;" if kind == AtomicKind.CAS else ";")
    return _asm(text, args, "=l,l,l" + (",l" if kind == AtomicKind.CAS else ""), ir.IntegerType.get_signless(64))
  if d in (DType.f16, DType.bf16):  # (probe 50c: atom.add.noftz.f16 / .bf16 and atom.cas.b16, "h" registers)
    return _half_atom(ptr, kind, d, value, cmp, order)
  if kind in _OPS:
    args = [ptr, _bits(value, d)] + ([_bits(cmp, d)] if kind == AtomicKind.CAS else [])
    text = f"atom{order}.{_OPS[kind]} $0, [$1], $2" + (", $3;" if kind == AtomicKind.CAS else ";")
    if kind == AtomicKind.CAS:      # PTX's order: [a] == b ? c : [a]
      args = [ptr, _bits(cmp, d), _bits(value, d)]
    old = _asm(text, args, "=r,l,r" + (",r" if kind == AtomicKind.CAS else ""), i32)
    return arith.bitcast(ir.F32Type.get(), old) if d == DType.f32 else old
  if d == DType.f32 and kind != AtomicKind.ADD:
    return _f32_extreme_atom(ptr, kind, value, order)
  if d == DType.f32:
    return _asm(f"atom{order}.add.f32 $0, [$1], $2;", [ptr, value], "=f,l,f", ir.F32Type.get())
  ty = "b32" if kind in (AtomicKind.AND, AtomicKind.OR, AtomicKind.XOR) else "s32" if d == DType.i32 else "u32"
  return _asm(f"atom{order}.{kind.value}.{ty} $0, [$1], $2;", [ptr, value], "=r,l,r", i32)


def _half_atom(ptr, kind: AtomicKind, d: DType, value, cmp, order: str):
  """A float16 or bfloat16 element's add or cas with its old value: the float's 16 bits in an "h" register (a
  cas compares bits, as the 32-bit one does)."""
  i16 = ir.IntegerType.get_signless(16)
  ty = value.type
  b = lambda v: arith.bitcast(i16, v)
  if kind == AtomicKind.CAS:      # PTX's order: [a] == b ? c : [a]
    old = _asm(f"atom{order}.cas.b16 $0, [$1], $2, $3;", [ptr, b(cmp), b(value)], "=h,l,h,h", i16)
  elif kind in (AtomicKind.XCHG, AtomicKind.MAX, AtomicKind.MIN):
    old = _half_cas_loop(ptr, kind, value, order)
  else:
    name = "f16" if d == DType.f16 else "bf16"
    old = _asm(f"atom{order}.add.noftz.{name} $0, [$1], $2;", [ptr, b(value)], "=h,l,h", i16)
  return arith.bitcast(ty, old)


def _half_cas_loop(ptr, kind: AtomicKind, value, order: str):
  """A float16 or bfloat16 element's xchg, max or min with its old value (probe 53c; PTX has no 16-bit atom exch,
  max or min): `atom.cas.b16` of the element's own 16 bits in a loop, until the bits it finds are the ones its new
  value was computed from; those are the old value. The first cas (of the value for itself: no change unless
  equal) reads the element. A max takes the value where it is >= the element's or the element is a NaN and the
  value is not, a min likewise: np.fmax's and np.fmin's order of operands (combine's in interpret mode). The bits
  are compared as integers, so a NaN ends the loop too."""
  i16 = ir.IntegerType.get_signless(16)
  ty = value.type
  vb = arith.bitcast(i16, value)
  cas = lambda cmp, new: _asm(f"atom{order}.cas.b16 $0, [$1], $2, $3;", [ptr, cmp, new], "=h,l,h,h", i16)
  start = cas(vb, vb)
  loop = scf.WhileOp([i16], [start])
  before = loop.before.blocks.append(i16)
  with ir.InsertionPoint(before):
    seen = before.arguments[0]
    if kind == AtomicKind.XCHG:
      new = vb
    else:
      a = arith.bitcast(ty, seen)
      pred = arith.CmpFPredicate.OGE if kind == AtomicKind.MAX else arith.CmpFPredicate.OLE
      take = arith.ori(arith.cmpf(pred, value, a), arith.andi(arith.cmpf(arith.CmpFPredicate.UNO, a, a),
                                                              arith.cmpf(arith.CmpFPredicate.ORD, value, value)))
      new = arith.select(take, vb, seen)
    old = cas(seen, new)
    scf.condition(arith.cmpi(arith.CmpIPredicate.ne, old, seen), [old])
  after = loop.after.blocks.append(i16)
  with ir.InsertionPoint(after):
    scf.yield_([after.arguments[0]])
  return loop.results[0]


def _f32_extreme_atom(ptr, kind: AtomicKind, value, order: str):
  """A float32 max or min with its old value (probe 49c; Triton's own): one integer `atom` on the float's bits,
  which order as the floats do (as atomic._f32_extreme_red's two `red`s): for max, a value of sign bit 0 is
  `atom.max.s32` and one of sign bit 1 `atom.min.u32` (min mirrors it); a NaN is the signed one's identity (no
  change: a NaN meeting a number leaves the number). Each returns the element's bits before it."""
  i32, i1 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
  bits = arith.bitcast(i32, value)
  nan = arith.cmpf(arith.CmpFPredicate.UNO, value, value)
  neg = arith.andi(arith.cmpi(arith.CmpIPredicate.slt, bits, arith.constant(i32, 0)),
                   arith.xori(nan, arith.constant(i1, 1)))
  signed, unsigned = ("max.s32", "min.u32") if kind == AtomicKind.MAX else ("min.s32", "max.u32")
  identity = arith.constant(i32, -2 ** 31 if kind == AtomicKind.MAX else 2 ** 31 - 1)
  if_op = scf.IfOp(neg, [i32], has_else=True)
  with ir.InsertionPoint(if_op.then_block):
    scf.yield_([_asm(f"atom{order}.{unsigned} $0, [$1], $2;", [ptr, bits], "=r,l,r", i32)])
  with ir.InsertionPoint(if_op.else_block):
    scf.yield_([_asm(f"atom{order}.{signed} $0, [$1], $2;", [ptr, arith.select(nan, identity, bits)], "=r,l,r",
                     i32)])
  return arith.bitcast(ir.F32Type.get(), if_op.result)


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


# ---------------------------------------------------------------- a tensor's old values (probe 49c)
def _zero(ty):
  return arith.constant(ty, 0 if isinstance(ty, ir.IntegerType) else 0.0)


def old_values(ctx, o, x, place, keep=None, cmp=None):
  """The old values of the tensor atomic `o` (a window's or a scatter's, `x` its value as a FragmentedArray):
  one relaxed `atom` per element each thread holds, at the generic pointer `place(k, e)` of element `e` of
  register `k`, skipped (0 read) where the bool FragmentedArray `keep` is off; returned in `x`'s layout. Where
  other threads hold the elements too (`o.scratch`, ops/atomic_fetch.shared_olds), the first holder of each
  runs its `atom` and stores the old value into the scratch at its row-major place; then every thread reads
  its elements back, the CTA's threads meeting before the stores, between and after."""
  import numpy as np
  from jax.experimental.mosaic.gpu import fragmented_array as fa
  from jaxlib.mlir.dialects import vector
  d = o.value.type.dtype
  regs = np.empty(x.registers.shape, dtype=object)
  elem = lambda r, e: r if not isinstance(r.type, ir.VectorType) else vector.extract(
      r, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([e]))
  index = ir.IndexType.get()
  if o.scratch is not None:
    from .atomic import _first_replica
    from .mosaic import is_split
    word = ctx.get(o.scratch)
    shape = tuple(x.shape)
    firsts = list(x.layout.thread_idxs(shape))
    strides = [int(np.prod(shape[a + 1:])) for a in range(len(shape))]

    def flat(k, e):
      idx = firsts[list(np.ndindex(x.registers.shape)).index(k)]
      at = arith.constant(index, e)
      for i, s in zip(idx, strides):
        at = arith.addi(at, arith.muli(i, arith.constant(index, s)))
      return at

    first = _first_replica(x.layout) if o.value.type.layout.drop else arith.constant(ir.IntegerType.get_signless(1), 1)
    if ctx.num_warpgroups > 1 and not is_split(o.value.type):
      first = arith.andi(first, arith.cmpi(arith.CmpIPredicate.eq, ctx.wg, arith.constant(index, 0)))
    ctx.thread_barrier()     # (the scratch may share memory with a buffer other threads still read)
    with ir.InsertionPoint(scf.IfOp(first).then_block):
      for k in np.ndindex(x.registers.shape):
        reg = x.registers[k]
        n = ir.VectorType(reg.type).shape[0] if isinstance(reg.type, ir.VectorType) else 1
        for e in range(n):
          memref.store(_one_old(o, d, elem, x, k, e, place, keep, cmp), word, [flat(k, e)])
      scf.yield_([])
    ctx.thread_barrier()
  for k in np.ndindex(x.registers.shape):
    reg = x.registers[k]
    n = ir.VectorType(reg.type).shape[0] if isinstance(reg.type, ir.VectorType) else 1
    olds = [memref.load(word, [flat(k, e)]) if o.scratch is not None else
            _one_old(o, d, elem, x, k, e, place, keep, cmp) for e in range(n)]
    if not isinstance(reg.type, ir.VectorType):
      regs[k] = olds[0]
      continue
    out = vector.broadcast(reg.type, _zero(ir.VectorType(reg.type).element_type))
    for e, v in enumerate(olds):
      out = vector.insert(v, out, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([e]))
    regs[k] = out
  if o.scratch is not None:      # (no thread stores into the scratch again before every thread has read it)
    ctx.thread_barrier()
  return fa.FragmentedArray(_registers=regs, _layout=x.layout, _is_signed=d.is_signed if d.is_int else None)


def _one_old(o, d, elem, x, k, e, place, keep, cmp):
  """The old value of element `e` of register `k` after its `atom` (0 where `keep` is off: no `atom`)."""
  v = elem(x.registers[k], e)
  c = elem(cmp.registers[k], e) if cmp is not None else None
  run = lambda: atom(place(k, e), o.kind, d, v, c, "relaxed", o.scope)
  if keep is None:
    return run()
  if_op = scf.IfOp(elem(keep.registers[k], e), [v.type], has_else=True)
  with ir.InsertionPoint(if_op.then_block):
    scf.yield_([run()])
  with ir.InsertionPoint(if_op.else_block):
    scf.yield_([_zero(v.type)])
  return if_op.result


def window_old_values(ctx, o, mem, x):
  """A GMEM window's atomic with its old values (ops/atomic_fetch.py): each element at its place in `mem`."""
  import numpy as np
  shape = tuple(x.shape)
  firsts = list(x.layout.thread_idxs(shape))
  index = ir.IndexType.get()
  flat = {k: i for i, k in enumerate(np.ndindex(x.registers.shape))}

  def place(k, e):
    idx = firsts[flat[k]]
    at = list(idx[:-1]) + [arith.addi(idx[-1], arith.constant(index, e))]
    return mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(at)))

  keep = ctx.get(o.mask) if o.mask is not None else None
  cmp = ctx.get(o.cmp) if o.cmp is not None else None
  ctx.set(o.results[0], old_values(ctx, o, x, place, keep, cmp))
