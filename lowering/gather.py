"""Gathers and atomic scatters on both backends: every thread loads (or `red`s into) its own
elements of a GMEM ref, at the indices its registers of the index tensors hold (one access an
element, or a vector load for a row's consecutive elements; the index tensors and the values
share a layout, so the registers line up)."""
from __future__ import annotations

import jax.experimental.mosaic.gpu as mgpu
import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, llvm, memref, scf, vector

from ..frontend.dtypes import DType
from ..frontend.ops.atomic import AtomicKind
from ..frontend.ops.gather import Gather, ScatterUpdate
from ..frontend.types import TensorType
from .access import _store_register
from .atomic import _first_replica, _red, combine, once_per_cta
from .interpret_memory import OutOfBoundsError
from .bool_memory import mem_type, scalar_from_byte, scalar_to_byte, vector_from_bytes
from .registry import interpret, lower


def _element(reg, e):
  if not isinstance(reg.type, ir.VectorType):
    return reg
  return vector.extract(reg, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([e]))


def _as_index(v, unsigned=False):
  index = ir.IndexType.get()
  if isinstance(v, int):
    return arith.constant(index, v)
  return (arith.index_castui if unsigned else arith.index_cast)(index, v)


def _unsigned(i) -> bool:
  return not isinstance(i, int) and not i.type.dtype.is_signed


def _uniform(parts, indices):
  """Index values shared by every element (ints, scalars); None where an index is a tensor."""
  return [None if isinstance(p, fa.FragmentedArray) else _as_index(p, _unsigned(i)) for p, i in zip(parts, indices)]


def _at(uniform, parts, indices, k, e):
  """The index of each root dimension for element `e` of register `k` (ints and scalars from
  `uniform`, or cast here when it is None)."""
  return [_as_index(p, _unsigned(i)) if not isinstance(p, fa.FragmentedArray) and uniform is None
          else uniform[j] if not isinstance(p, fa.FragmentedArray)
          else _as_index(_element(p.registers[k], e), _unsigned(i))
          for j, (p, i) in enumerate(zip(parts, indices))]


@lower(Gather)
def _gather(ctx, o):
  mem = ctx.memref(ctx.get(o.ref))
  t = o.result.type
  parts = [ctx.get(i) if not isinstance(i, int) else i for i in o.indices]
  arrays = [p for p, i in zip(parts, o.indices) if not isinstance(i, int) and isinstance(i.type, TensorType)]
  like = arrays[0]
  elem_ty = mem_type(t.dtype)        # bytes for bool (bool_memory)
  regs = np.empty(like.registers.shape, dtype=object)
  for k in np.ndindex(like.registers.shape):
    first = like.registers[k]
    n = ir.VectorType(first.type).shape[0] if isinstance(first.type, ir.VectorType) else 1
    uniform = _uniform(parts, o.indices)
    if o.contiguous and n > 1:      # consecutive last indices: one vector load at the first
      regs[k] = vector.load(ir.VectorType.get((n,), elem_ty), mem, _at(uniform, parts, o.indices, k, 0))
      continue
    out = None if n == 1 and not isinstance(first.type, ir.VectorType) else \
        vector.broadcast(ir.VectorType.get((n,), elem_ty), arith.constant(elem_ty, 0.0 if t.dtype.is_float else 0))
    for e in range(n):
      v = memref.load(mem, _at(uniform, parts, o.indices, k, e))
      if out is None:
        out = v
      else:
        out = vector.insert(v, out, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([e]))
    regs[k] = out
  if t.dtype == DType.bool_:
    for k in np.ndindex(regs.shape):
      regs[k] = (vector_from_bytes if isinstance(regs[k].type, ir.VectorType) else scalar_from_byte)(regs[k])
  ctx.set(o.result, fa.FragmentedArray(_registers=regs, _layout=like.layout, _is_signed=t.dtype.is_signed))


def _check_inside(cta, ref, coords, o):
  """OutOfBoundsError where an index the frontend does not clamp (a view's run-time row or
  window start, `t.at[b][ids]`, `t.at[ml.ds(s, 8)][ids]`) leaves the buffer: the GPU would
  read or write outside it."""
  shape = cta.buffer(ref).shape
  for axis, (c, n) in enumerate(zip(coords, shape)):
    bad = (c < 0) | (c >= n)
    if bad.any():
      i = int(c[np.argmax(bad)])
      raise OutOfBoundsError(
          f"this {'gather' if isinstance(o, Gather) else 'scatter'} reaches {ref.name}[..., {i}, ...] along axis"
          f" {axis}, outside {ref.name}'s shape {tuple(shape)}", o.loc,
          hint="check the run-time row or ml.ds start of the view it indexes (the view itself must lie inside"
               " the array; " + ("its tensor indices are clamped to the view, as jnp's gather does)"
                                 if isinstance(o, Gather) else "its tensor indices outside the view are dropped)"))


@interpret(Gather)
def _i_gather(cta, o):
  """Every tensor index is inside the view indexed (the frontend clamps them, as jnp's gather
  does); the view's own run-time row or ml.ds start is checked as a plain access's is."""
  ref = cta.get(o.ref)
  shape = o.result.type.shape
  coords = tuple(np.broadcast_to(np.asarray(i if isinstance(i, int) else cta.get(i), np.int64), shape).reshape(-1)
                 for i in o.indices)
  _check_inside(cta, ref, coords, o)
  cta.m.gmem_access(cta, ref, coords, o, write=False)
  cta.set(o.result, np.asarray(cta.buffer(ref)[coords]).reshape(shape))


# ---------------------------------------------------------------- scatters
@lower(ScatterUpdate)
def _scatter(ctx, o):
  mem = ctx.memref(ctx.get(o.ref))
  t = o.value.type
  d = t.dtype
  x = ctx.get(o.value)
  parts = [ctx.get(i) if not isinstance(i, int) else i for i in o.indices]

  keep = ctx.get(o.mask) if o.mask is not None else None
  smem = mgpu.utils.is_smem_ref(mem)
  if o.results or o.kind in (AtomicKind.CAS, AtomicKind.XCHG):   # the old values (probe 49c): one `atom` each
    from .atomic_rmw import old_values
    place = lambda k, e: _generic(mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(_at(None, parts, o.indices,
                                                                                        k, e)))), smem)
    ctx.set(o.results[0], old_values(ctx, o, x, place, keep, ctx.get(o.cmp) if o.cmp is not None else None))
    return

  def emit():
    for k in np.ndindex(x.registers.shape):
      reg = x.registers[k]
      n = ir.VectorType(reg.type).shape[0] if isinstance(reg.type, ir.VectorType) else 1
      if o.kind == AtomicKind.SET:
        places = [_at(None, parts, o.indices, k, e) for e in range(n)]
        if o.contiguous and n > 1 and keep is None:     # a row's consecutive elements, 16-byte aligned
          vector.store(reg, mem, places[0])
        elif o.contiguous and n > 1:                     # one vector store where the mask keeps them all
          _store_register(mem, places, True, keep.registers[k], reg)
        else:
          _store_each(mem, places, [_element(reg, e) if d != DType.bool_ else scalar_to_byte(_element(reg, e))
                                    for e in range(n)],
                      None if keep is None else [_element(keep.registers[k], e) for e in range(n)])
        continue
      if smem:                  # a CTA's SMEM buffer: red.shared::cta at the 32-bit shared address
        for e in range(n):
          ptr = mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(_at(None, parts, o.indices, k, e))))
          _red(llvm.ptrtoint(ir.IntegerType.get_signless(32), ptr), _element(reg, e), o.kind, d, smem=True)
        continue
      if o.contiguous and n in (2, 4) and d == DType.f32 and o.kind == AtomicKind.ADD and not t.layout.drop:
        ptr = mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(_at(None, parts, o.indices, k, 0))))
        _vector_red_f32(ptr, [_element(reg, e) for e in range(n)])   # sm_90's red.v2/.v4.f32
        continue
      for e in range(n):
        ptr = mgpu.utils.memref_ptr(mgpu.memref_slice(mem, tuple(_at(None, parts, o.indices, k, e))))
        _red(ptr, _element(reg, e), o.kind, d)     # (float32 max and min: two integer reds on the bits)

  def first_copy():           # a layout repeating values: each element once, by its first holder
    if t.layout.drop:
      with ir.InsertionPoint(scf.IfOp(_first_replica(x.layout)).then_block):
        emit()
        scf.yield_([])
    else:
      emit()

  once_per_cta(ctx, t, first_copy)


def _generic(ptr, smem: bool):
  """A generic pointer (an SMEM element's cast from the shared space), as a generic `atom` takes."""
  return llvm.addrspacecast(llvm.PointerType.get(), ptr) if smem else ptr


def _store_each(mem, places, values, keep):
  """A plain scatter's stores of one register's elements, each under its `keep` bit where given."""
  for e, (at, v) in enumerate(zip(places, values)):
    if keep is None:
      memref.store(v, mem, at)
      continue
    with ir.InsertionPoint(scf.IfOp(keep[e]).then_block):
      memref.store(v, mem, at)
      scf.yield_([])


def _vector_red_f32(ptr, values):
  """One `red.global.add.v{2,4}.f32` of consecutive float32 elements at `ptr` (16- or 8-byte
  aligned: the frontend's `contiguous` proves it)."""
  n = len(values)
  regs = ", ".join(f"${k + 1}" for k in range(n))
  llvm.inline_asm(ir.Type.parse("!llvm.void"), [ptr, *values],
                  f"red.relaxed.gpu.global.add.v{n}.f32 [$0], {{{regs}}};", "l" + ",f" * n,
                  has_side_effects=True)


@interpret(ScatterUpdate)
def _i_scatter(cta, o):
  ref = cta.get(o.ref)
  shape = o.value.type.shape
  d = o.value.type.dtype
  coords = [np.broadcast_to(np.asarray(i if isinstance(i, int) else cta.get(i), np.int64), shape).reshape(-1)
            for i in o.indices]
  value = np.asarray(cta.get(o.value)).reshape(-1)
  if o.kind == AtomicKind.SET:        # a plain scatter: the elements its mask keeps, in order (a later
    if o.mask is not None:            # element at a repeated place wins, as one of them does on the GPU)
      keep = np.broadcast_to(np.asarray(cta.get(o.mask), bool), shape).reshape(-1)
      coords, value = [c[keep] for c in coords], value[keep]
    _check_inside(cta, ref, coords, o)
    buf = cta.buffer(ref)
    if ref.owner >= 0:                # an SMEM buffer's (probe 69b): a write of it, its elements now written
      cta.smem_sync(ref, o, "write")
      cta.m.smem_phase(cta, ref, o, write=True)
      cta.m.ctas[ref.owner].filled[ref.root.id][tuple(coords)] = True
    held = np.ascontiguousarray(buf[tuple(coords)])
    new = np.ascontiguousarray(np.asarray(value, buf.dtype))
    same = (held.view(np.uint8).reshape(len(held), -1) == new.view(np.uint8).reshape(len(new), -1)).all(1) \
        if len(new) else None        # (the bits already there: another program's write of them is no race)
    cta.m.gmem_access(cta, ref, tuple(coords), o, write=True, same=same)    # (two programs' stores to one place
    buf[tuple(coords)] = value                                              # race, unless they store one value)
    return
  if o.results or o.kind in (AtomicKind.CAS, AtomicKind.XCHG):    # the old values (probe 49c)
    keep = (np.broadcast_to(np.asarray(cta.get(o.mask), bool), shape).reshape(-1) if o.mask is not None
            else np.ones(value.size, bool))
    _check_inside(cta, ref, [c[keep] for c in coords], o)
    cta.m.gmem_access(cta, ref, tuple(c[keep] for c in coords), o, write=True, atomic=True)
    from .interpret_sync import scatter_rmw
    return scatter_rmw(cta, o, cta.buffer(ref), coords, value, shape, combine, keep)
  _check_inside(cta, ref, coords, o)
  cta.m.gmem_access(cta, ref, tuple(coords), o, write=True, atomic=True)
  buf = cta.buffer(ref)
  for e in range(value.size):               # one element at a time: repeated indices accumulate
    at = tuple(int(c[e]) for c in coords)
    buf[at] = combine(o.kind, d, buf[at], value[e])
