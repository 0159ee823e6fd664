"""Masked and scalar accesses on both backends.

On the GPU a masked access is predicated per register: each thread walks its registers
(`layout.thread_idxs` gives the first element of each), and a register whose mask lanes are
all on is one vector load or store; otherwise `vector.maskedload` / `vector.maskedstore`
(LLVM's masked intrinsics, scalarised into predicated accesses), so a masked-off element's
address is never dereferenced. A scalar is `memref.load` by every thread (a uniform value)
and `memref.store` by every thread (the same value).
"""
from __future__ import annotations

import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, memref, scf, vector

from ..frontend.ops.access import MaskedLoad, MaskedStore, ScalarLoad, ScalarRead, ScalarStore
from ..frontend.types import LayoutKind
from . import interpret_numerics as N
from .interpret_memory import OutOfBoundsError, Ref
from .memory import _register_memref
from .mosaic import index, layout_of, mlir_type, operand, scalar_const, to_index
from .registry import interpret, lower


# ---------------------------------------------------------------- Mosaic GPU
def _element_groups(ctx, t):
  """Per register: (index of its first element, number of contiguous elements along the last
  dimension), or per element when a strided register crosses rows."""
  layout = layout_of(t)
  shape = ctx.local_shape(t)
  if t.layout.kind == LayoutKind.STRIDED and shape[-1] % t.layout.vec:
    return layout, shape, None
  return layout, shape, list(layout.thread_idxs(shape))


def _index_tuple(ctx, idx, mem_rank):
  """thread_idxs give the register shape's indices; the memref may have the window's rank."""
  idx = list(idx)
  return [arith.constant(index(), 0)] * (mem_rank - len(idx)) + idx


def _all_on(mreg):
  return vector.reduction(ir.IntegerType.get_signless(1), vector.CombiningKind.AND, mreg)


def _masked_vector_load(mem, idx, mreg, pass_thru):
  vty = pass_thru.type
  if_op = scf.IfOp(_all_on(mreg), [vty], has_else=True)
  with ir.InsertionPoint(if_op.then_block):
    scf.yield_([vector.load(vty, mem, idx)])
  with ir.InsertionPoint(if_op.else_block):
    scf.yield_([vector.maskedload(vty, mem, idx, mreg, pass_thru)])
  return if_op.result


def _masked_vector_store(mem, idx, mreg, val):
  if_op = scf.IfOp(_all_on(mreg), [], has_else=True)
  with ir.InsertionPoint(if_op.then_block):
    vector.store(val, mem, idx)
    scf.yield_([])
  with ir.InsertionPoint(if_op.else_block):
    vector.maskedstore(mem, idx, mreg, val)
    scf.yield_([])


def _elem(reg, j):
  return vector.extract(reg, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([j]))


def _split(reg, n):
  """The n one-element vectors of register `reg`."""
  one = ir.VectorType.get((1,), ir.VectorType(reg.type).element_type)
  return [vector.broadcast(one, _elem(reg, j)) for j in range(n)]


def _strided_element_idxs(layout, shape):
  """Per register, the index of each of its elements (strided registers crossing rows)."""
  i = index()
  for lin in layout.linear_thread_idxs():
    out = []
    for j in range(layout.vec_size):
      v, res = arith.addi(lin, arith.constant(i, j)), []
      for dim in reversed(shape):
        res.append(arith.remui(v, arith.constant(i, dim)))
        v = arith.divui(v, arith.constant(i, dim))
      out.append(res[::-1])
    yield out


@lower(MaskedLoad)
def _masked_load(ctx, o):
  t = o.result.type
  mem, _ = _register_memref(ctx, ctx.get(o.ref), t)
  rank = len(ir.MemRefType(mem.type).shape)
  mask = ctx.get(o.mask)
  layout, shape, groups = _element_groups(ctx, t)
  ety = mlir_type(t.dtype)
  other = operand(ctx, o.other)
  other = other if isinstance(other, ir.Value) else scalar_const(other, t.dtype)
  regs = np.empty(layout.registers_shape(shape), dtype=object)
  vlen = ir.VectorType(mask.registers.flat[0].type).shape[0]
  if groups is not None:
    pass_thru = vector.broadcast(ir.VectorType.get((vlen,), ety), other)
    for k, (idx, mreg) in enumerate(zip(groups, mask.registers.flat)):
      regs.flat[k] = _masked_vector_load(mem, _index_tuple(ctx, idx, rank), mreg, pass_thru)
  else:
    one = ir.VectorType.get((1,), ety)
    pass_thru = vector.broadcast(one, other)
    for k, (idxs, mreg) in enumerate(zip(_strided_element_idxs(layout, shape), mask.registers.flat)):
      parts = [_masked_vector_load(mem, _index_tuple(ctx, idx, rank), m, pass_thru)
               for idx, m in zip(idxs, _split(mreg, vlen))]
      regs.flat[k] = _concat(parts, ir.VectorType.get((vlen,), ety))
  ctx.set(o.result, fa.FragmentedArray(_registers=regs, _layout=layout, _is_signed=t.dtype.is_signed))


def _concat(parts, vty):
  out = vector.broadcast(vty, _elem(parts[0], 0))
  for j, p in enumerate(parts[1:], 1):
    out = vector.insert(_elem(p, 0), out, dynamic_position=[],
                        static_position=ir.DenseI64ArrayAttr.get([j]))
  return out


@lower(MaskedStore)
def _masked_store(ctx, o):
  t = o.value.type
  mem, _ = _register_memref(ctx, ctx.get(o.ref), t)
  rank = len(ir.MemRefType(mem.type).shape)
  value, mask = ctx.get(o.value), ctx.get(o.mask)
  layout, shape, groups = _element_groups(ctx, t)
  vlen = ir.VectorType(mask.registers.flat[0].type).shape[0]
  if groups is not None:
    for idx, mreg, val in zip(groups, mask.registers.flat, value.registers.flat):
      _masked_vector_store(mem, _index_tuple(ctx, idx, rank), mreg, val)
  else:
    for idxs, mreg, val in zip(_strided_element_idxs(layout, shape), mask.registers.flat, value.registers.flat):
      for idx, m, v in zip(idxs, _split(mreg, vlen), _split(val, vlen)):
        _masked_vector_store(mem, _index_tuple(ctx, idx, rank), m, v)


def _scalar_indices(ctx, ref):
  """(root memref, index Values) of a one-element view (every dimension indexed) or 0-d root."""
  if isinstance(ref, ctx.View):
    idx = [operand(ctx, i.start) for i in ref.index]
    return ref.ref, [arith.constant(index(), i) if isinstance(i, int) else to_index(i) for i in idx]
  return ref, []


@lower(ScalarLoad)
def _scalar_load(ctx, o):
  mem, idx = _scalar_indices(ctx, ctx.get(o.ref))
  ctx.set(o.result, memref.load(mem, idx))


@lower(ScalarRead)
def _scalar_read(ctx, o):
  ctx.set(o.result, memref.load(*_scalar_indices(ctx, ctx.View(ctx.get(o.ref), o.index, o.ref.id))))


@lower(ScalarStore)
def _scalar_store(ctx, o):
  mem, idx = _scalar_indices(ctx, ctx.get(o.ref))
  v = operand(ctx, o.value)
  memref.store(v if isinstance(v, ir.Value) else scalar_const(v, o.ref.type.dtype), mem, idx)


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
        f" the mask is on there", o.loc, hint="turn the mask off for elements past the array's end")
  return tuple(c[mask] for c in coords)


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

