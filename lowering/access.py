"""Masked and scalar accesses on both backends.

On the GPU a masked access is predicated per register: each thread walks its registers
(`layout.thread_idxs` gives each one's first element) and a register whose mask lanes are all
on is one vector load or store, as an unmasked access would be; otherwise each element is
loaded or stored under its own `scf.if`, so a masked-off element's address is never
dereferenced. A scalar is `memref.load` by every thread (a uniform value) and `memref.store`
by every thread (the same value).
"""
from __future__ import annotations

import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, memref, scf, vector

from ..frontend.memory_errors import masked_outside_hint
from ..frontend.ops.access import MaskedLoad, MaskedStore, ScalarLoad, ScalarRead, ScalarStore
from ..frontend.dtypes import DType
from ..frontend.types import LayoutKind
from . import bool_memory as B
from . import interpret_numerics as N
from .interpret_memory import OutOfBoundsError, Ref
from .memory import _register_memref
from .mosaic import index, is_split, layout_of, operand, scalar_const, to_index
from .registry import interpret, lower


# ---------------------------------------------------------------- Mosaic GPU
def _registers(ctx, t, rank, n):
  """Per register (of `n` elements) of a tensor of type `t`: (the memref index of each of its
  elements, whether they are contiguous along the memref's last dimension)."""
  layout = layout_of(t)
  shape = ctx.local_shape(t)
  pad = [arith.constant(index(), 0)] * (rank - len(shape))     # size-1 axes folded away
  if t.layout.kind == LayoutKind.STRIDED and shape[-1] % n:   # a register crosses rows
    for lin in layout.linear_thread_idxs():
      elems = []
      for j in range(n):
        v, idx = arith.addi(lin, arith.constant(index(), j)), []
        for dim in reversed(shape):
          idx.append(arith.remui(v, arith.constant(index(), dim)))
          v = arith.divui(v, arith.constant(index(), dim))
        elems.append(pad + idx[::-1])
      yield elems, False
    return
  for idx in layout.thread_idxs(shape):
    idx = list(idx)
    yield [pad + idx[:-1] + [arith.addi(idx[-1], arith.constant(index(), j))] for j in range(n)], True


def _elem(reg, j):
  return vector.extract(reg, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([j]))


def _all_on(mreg, n):
  on = _elem(mreg, 0)
  for j in range(1, n):
    on = arith.andi(on, _elem(mreg, j))
  return on


def _load_register(mem, elems, contiguous, mreg, pass_thru):
  vty, n = pass_thru.type, len(elems)

  def one_by_one():
    out = pass_thru
    for j, idx in enumerate(elems):
      if_op = scf.IfOp(_elem(mreg, j), [vty], has_else=True)
      with ir.InsertionPoint(if_op.then_block):
        scf.yield_([vector.insert(memref.load(mem, idx), out, dynamic_position=[],
                                  static_position=ir.DenseI64ArrayAttr.get([j]))])
      with ir.InsertionPoint(if_op.else_block):
        scf.yield_([out])
      out = if_op.result
    return out

  if not contiguous:
    return one_by_one()
  if_op = scf.IfOp(_all_on(mreg, n), [vty], has_else=True)
  with ir.InsertionPoint(if_op.then_block):
    scf.yield_([vector.load(vty, mem, elems[0])])
  with ir.InsertionPoint(if_op.else_block):
    scf.yield_([one_by_one()])
  return if_op.result


def _store_register(mem, elems, contiguous, mreg, val):
  def one_by_one():
    for j, idx in enumerate(elems):
      with ir.InsertionPoint(scf.IfOp(_elem(mreg, j)).then_block):
        memref.store(_elem(val, j), mem, idx)
        scf.yield_([])

  if not contiguous:
    return one_by_one()
  if_op = scf.IfOp(_all_on(mreg, len(elems)), [], has_else=True)
  with ir.InsertionPoint(if_op.then_block):
    vector.store(val, mem, elems[0])
    scf.yield_([])
  with ir.InsertionPoint(if_op.else_block):
    one_by_one()
    scf.yield_([])


def _overruns(ctx, ref) -> bool:
  """A view of an untiled root whose static window starts before 0 or runs past the root's end
  (a masked access may): Mosaic GPU rejects such a slice, so the access indexes the root instead."""
  if not isinstance(ref, ctx.View) or ctx.smem_layout(ref) is not None:
    return False
  dims = ir.MemRefType(ref.ref.type).shape
  return any(isinstance(i.start, int) and not i.squeeze and (i.start < 0 or i.start + i.size > d)
             for i, d in zip(ref.index, dims))


def _masked_memref(ctx, ref, t):
  """(memref, registers) of a masked access: each register's element indices into the memref
  and whether they are contiguous along its last dimension."""
  if not _overruns(ctx, ref):
    mem, _ = _register_memref(ctx, ref, t)
    rank = len(ir.MemRefType(mem.type).shape)
    return mem, lambda n: _registers(ctx, t, rank, n)
  kept = [k for k, i in enumerate(ref.index) if not i.squeeze]
  # the value's size-1 axes its layout leaves out (a row statistic kept 2-D, (m, 1)): index 0
  folded = set(t.layout.drop) if len(t.layout.register_shape(t.shape)) < len(t.shape) else set()
  if len(kept) != len(t.shape) or len(t.layout.register_shape(t.shape)) != len(t.shape) - len(folded):
    raise NotImplementedError("a masked access of a window past the array's end that folds its"
                              " value's dimensions")
  starts = []
  for i in ref.index:
    s = operand(ctx, i.start)
    starts.append(arith.constant(index(), s) if isinstance(s, int) else to_index(s))
  if ctx.num_warpgroups > 1 and is_split(t):       # this warpgroup's rows
    per = ctx.local_shape(t)[0]
    k = kept[0]
    starts[k] = arith.addi(starts[k], arith.muli(ctx.wg, arith.constant(index(), per)))

  zero = arith.constant(index(), 0)

  def registers(n):
    for elems, contiguous in _registers(ctx, t, len(kept) - len(folded), n):
      out = []
      for idx in elems:
        it = iter(idx)
        full = iter([zero if d in folded else next(it) for d in range(len(t.shape))])
        out.append([st if i.squeeze else arith.addi(st, next(full)) for i, st in zip(ref.index, starts)])
      yield out, contiguous and not ref.index[-1].squeeze and len(t.shape) - 1 not in folded
  return ref.ref, registers


def _aligned(o, n) -> bool:
  """Whether masked access `o`'s window starts at a multiple of its registers' `n` elements
  (tma_starts.mark_register_starts); if not, a register goes element by element even where its mask
  is all on, since a misaligned vector access faults the GPU (lowering/memory.py's _unaligned)."""
  return o.start_multiple is None or o.start_multiple % n == 0


@lower(MaskedLoad)
def _masked_load(ctx, o):
  t = o.result.type
  mem, registers = _masked_memref(ctx, ctx.get(o.ref), t)
  mask = ctx.get(o.mask)
  other = operand(ctx, o.other)
  other = other if isinstance(other, ir.Value) else scalar_const(other, t.dtype)
  bool_ = t.dtype == DType.bool_        # a bool ref holds bytes (bool_memory)
  other = B.scalar_to_byte(other) if bool_ else other
  n = ir.VectorType(mask.registers.flat[0].type).shape[0]
  pass_thru = vector.broadcast(ir.VectorType.get((n,), B.mem_type(t.dtype)), other)
  regs = np.empty(mask.registers.shape, dtype=object)
  aligned = _aligned(o, n)
  for k, ((elems, contiguous), mreg) in enumerate(zip(registers(n), mask.registers.flat)):
    regs.flat[k] = _load_register(mem, elems, contiguous and aligned, mreg, pass_thru)
    regs.flat[k] = B.vector_from_bytes(regs.flat[k]) if bool_ else regs.flat[k]
  ctx.set(o.result, fa.FragmentedArray(_registers=regs, _layout=mask.layout, _is_signed=t.dtype.is_signed))


@lower(MaskedStore)
def _masked_store(ctx, o):
  t = o.value.type
  mem, registers = _masked_memref(ctx, ctx.get(o.ref), t)
  value, mask = ctx.get(o.value), ctx.get(o.mask)
  n = ir.VectorType(mask.registers.flat[0].type).shape[0]
  aligned = _aligned(o, n)
  for (elems, contiguous), mreg, val in zip(registers(n), mask.registers.flat,
                                            value.registers.flat):
    _store_register(mem, elems, contiguous and aligned, mreg, B.vector_to_bytes(val) if t.dtype == DType.bool_ else val)


def _scalar_indices(ctx, ref):
  """(root memref, index Values) of a one-element view (every dimension indexed) or 0-d root."""
  if isinstance(ref, ctx.View):
    idx = [operand(ctx, i.start) for i in ref.index]
    return ref.ref, [arith.constant(index(), i) if isinstance(i, int) else to_index(i) for i in idx]
  return ref, []


@lower(ScalarLoad)
def _scalar_load(ctx, o):
  mem, idx = _scalar_indices(ctx, ctx.get(o.ref))
  v = memref.load(mem, idx)
  ctx.set(o.result, B.scalar_from_byte(v) if o.ref.type.dtype == DType.bool_ else v)


@lower(ScalarRead)
def _scalar_read(ctx, o):
  v = memref.load(*_scalar_indices(ctx, ctx.View(ctx.get(o.ref), o.index, o.ref.id)))
  ctx.set(o.result, B.scalar_from_byte(v) if o.ref.type.dtype == DType.bool_ else v)


@lower(ScalarStore)
def _scalar_store(ctx, o):
  mem, idx = _scalar_indices(ctx, ctx.get(o.ref))
  v = operand(ctx, o.value)
  v = v if isinstance(v, ir.Value) else scalar_const(v, o.ref.type.dtype)
  memref.store(B.scalar_to_byte(v) if o.ref.type.dtype == DType.bool_ else v, mem, idx)


# ---------------------------------------------------------------- interpreter
def _coords(ref, shape):
  """Root coordinates of every element of `ref`'s window, broadcast to the window's shape."""
  out, axis = [], 0
  for s, n, sq in ref.win:
    if sq:
      out.append(np.full(shape, s))
    else:
      c = s + np.arange(n).reshape([n if a == axis else 1 for a in range(len(shape))])
      out.append(np.broadcast_to(c, shape))
      axis += 1
  return out


def _on_elements(cta, ref, mask, o, what):
  """Root coordinates of the elements the mask turns on; OutOfBoundsError if one is outside."""
  shape = mask.shape
  coords = _coords(ref, shape)
  inside = np.ones(shape, bool)
  for c, d in zip(coords, ref.root.type.shape):
    inside &= (c >= 0) & (c < d)
  bad = mask & ~inside
  if bad.any():
    pos = tuple(int(p) for p in np.argwhere(bad)[0])
    elem = [int(c[pos]) for c in coords]
    raise OutOfBoundsError(
        f"a masked {what} touches {ref.name}{elem}, outside {ref.name}'s shape {ref.root.type.shape}:"
        f" the mask is on there", o.loc, hint=masked_outside_hint(o.loc, ref.name, len(ref.root.type.shape) - cta.m.lead(ref),
                                                                 any(c < 0 for c in elem), next(
            k for k, (c, n) in enumerate(zip(elem, ref.root.type.shape)) if not 0 <= c < n) - cta.m.lead(ref))
        or "turn the mask off for elements outside the array (before index 0 or past its end)")
  on = tuple(c[mask] for c in coords)
  ref.check_view(o, cta.m.lead(ref), cta.batch_label, mask=on)
  return on


@interpret(MaskedLoad)
def _i_masked_load(cta, o):
  ref, mask = cta.get(o.ref), np.asarray(cta.get(o.mask), bool)
  d = o.result.type.dtype
  out = np.full(mask.shape, cta.operand(o.other, d), N.np_dtype(d))
  coords = _on_elements(cta, ref, mask, o, "load")
  if coords[0].size:
    cta.m.gmem_access(cta, ref, coords, o, write=False)
    out[mask] = cta.buffer(ref)[coords]
  cta.set(o.result, out)


@interpret(MaskedStore)
def _i_masked_store(cta, o):
  ref, mask = cta.get(o.ref), np.asarray(cta.get(o.mask), bool)
  coords = _on_elements(cta, ref, mask, o, "store")
  if coords[0].size:
    cta.m.gmem_access(cta, ref, coords, o, write=True)
    cta.buffer(ref)[coords] = np.asarray(cta.get(o.value))[mask]


@interpret(ScalarLoad)
def _i_scalar_load(cta, o):
  cta.set(o.result, np.asarray(cta.read(cta.get(o.ref), o)).reshape(()))


@interpret(ScalarRead)
def _i_scalar_read(cta, o):
  ref = Ref(o.ref, -1, tuple((int(cta.operand(i.start)), 1, True) for i in o.index))
  cta.set(o.result, np.asarray(cta.read(ref, o)).reshape(()))


@interpret(ScalarStore)
def _i_scalar_store(cta, o):
  ref = cta.get(o.ref)
  cta.write(ref, np.asarray(cta.operand(o.value, o.ref.type.dtype)).reshape(()), o)

