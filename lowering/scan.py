"""Scans on both backends (frontend/ops/scan.py): Hillis and Steele through the SMEM scratch.

Every thread stores its elements; then each step k reads, for each of its elements, the value
2**k before it along the axis (after it, reversed) and combines it with its own, and stores
the result for the next step, with a barrier (of the CTA, or of the warp-specialised role)
between a step's reads and its writes. Warpgroups that hold the same elements (a tensor not
split among them) store the same values: the redundancy is harmless. Interpret mode combines
in the same order, so results match bit for bit.
"""
from __future__ import annotations

import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, memref, vector

from ..frontend.ops.atomic import AtomicKind, identity
from ..frontend.ops.scan import Scan, ScanKind
from ..frontend.types import LayoutKind
from . import interpret_numerics as N
from .mosaic import mlir_type
from .registry import interpret, lower
from .shape import _element_indices, _flat, _vector_coords


def _identity(kind, d):
  """The value that leaves an element unchanged when combined with it (the atomics' for sum,
  max and min)."""
  if kind == ScanKind.PROD:
    return 1
  return identity(AtomicKind.ADD if kind == ScanKind.SUM else AtomicKind(kind.value), d)


def _identity_const(kind, d):
  return arith.constant(mlir_type(d), float(_identity(kind, d)) if d.is_float else _identity(kind, d))


def _combine(kind, d, a, b):
  if d.is_float:
    f = {ScanKind.SUM: arith.addf, ScanKind.PROD: arith.mulf, ScanKind.MAX: arith.maximumf,
         ScanKind.MIN: arith.minimumf}[kind]
  elif d.is_signed:
    f = {ScanKind.SUM: arith.addi, ScanKind.PROD: arith.muli, ScanKind.MAX: arith.maxsi,
         ScanKind.MIN: arith.minsi}[kind]
  else:
    f = {ScanKind.SUM: arith.addi, ScanKind.PROD: arith.muli, ScanKind.MAX: arith.maxui,
         ScanKind.MIN: arith.minui}[kind]
  return f(a, b)


def _steps(n):
  return [1 << k for k in range(max(0, (n - 1).bit_length()))]


def _partner(pos, dist, length, reverse, segment=0):
  """(valid, where): the position `dist` before `pos` along the axis (after it, reversed), and
  whether it exists (within `pos`'s segment of `segment` positions, where one is given); where it
  does not, `pos` itself (a harmless address; the value is unused)."""
  index = ir.IndexType.get()
  d = arith.constant(index, dist)
  at = arith.remui(pos, arith.constant(index, segment)) if segment else pos     # the place in its segment
  if reverse:
    valid = arith.cmpi(arith.CmpIPredicate.ult, arith.addi(at, d), arith.constant(index, segment or length))
    return valid, arith.select(valid, arith.addi(pos, d), pos)
  valid = arith.cmpi(arith.CmpIPredicate.uge, at, d)
  return valid, arith.select(valid, arith.subi(pos, d), pos)


def _vec(t) -> int:
  """Elements in each register vector along the scanned last axis, when the fast path applies
  (both backends decide the same way, so their combining orders match): 1 otherwise."""
  lay = t.layout
  if lay.drop:
    return 1
  v = 2 if lay.kind == LayoutKind.WGMMA else lay.vec
  return v if v > 1 and t.shape[-1] % v == 0 else 1


def _scan_vectors(ctx, o, vec):
  """Along the last axis, each register's `vec` consecutive elements scanned in registers first;
  then Hillis and Steele over the vectors' totals through the scratch (steps of vec elements);
  then each vector combined with the scanned total of the vector before it."""
  t, d = o.x.type, o.x.type.dtype
  mem = ctx.memref(ctx.get(o.scratch))
  two_d = len(t.shape) == 2
  n = t.shape[-1]
  row = n + o.pad
  index = ir.IndexType.get()
  c = lambda v: arith.constant(index, v)
  ident = _identity_const(o.kind, d)
  x = ctx.get(o.x)
  elem = lambda r, e: vector.extract(r, dynamic_position=[], static_position=ir.DenseI64ArrayAttr.get([e]))
  regs, where = [], []
  for idx, k in zip(x.layout.thread_idxs(x.shape), np.ndindex(x.registers.shape)):
    es = [elem(x.registers[k], e) for e in range(vec)]
    order = range(vec - 2, -1, -1) if o.reverse else range(1, vec)
    for e in order:
      es[e] = _combine(o.kind, d, es[e + 1] if o.reverse else es[e - 1], es[e])
    i, j0 = _element_indices(ctx, t, idx) if two_d else _vector_coords(ctx, t, idx)
    jt = j0 if o.reverse else arith.addi(j0, c(vec - 1))      # where the vector's total lives
    regs.append((k, es))
    where.append((i, jt))
  totals = [es[0] if o.reverse else es[-1] for _, es in regs]

  def store_totals():
    for tot, (i, jt) in zip(totals, where):
      memref.store(tot, mem, [_flat(i, jt, row)])

  def neighbour(i, jt, dist):
    valid, other = _partner(jt, dist, n, o.reverse)
    return arith.select(valid, memref.load(mem, [_flat(i, other, row)]), ident)

  store_totals()
  for s in _steps(n // vec):
    ctx.thread_barrier()
    totals = [_combine(o.kind, d, tot, neighbour(i, jt, s * vec)) for tot, (i, jt) in zip(totals, where)]
    ctx.thread_barrier()
    store_totals()
  ctx.thread_barrier()
  out = np.empty(x.registers.shape, dtype=object)
  for (k, es), (i, jt) in zip(regs, where):
    prev = neighbour(i, jt, vec)
    es = [_combine(o.kind, d, prev, e) for e in es]
    out[k] = vector.from_elements(ir.VectorType.get((vec,), mlir_type(d)), es)
  ctx.set(o.result, fa.FragmentedArray(_registers=out, _layout=x.layout, _is_signed=x.is_signed))


def _scan_columns(ctx, o, vec):
  """Along axis 0 of a 2-D tensor whose registers are vectors along its rows: Hillis and Steele
  on whole register vectors, each combined with the vector `s` rows before it, the same order as
  element by element (a (384, 128) tile's steps were emitted per element: 5-15 s to compile). The
  scratch is used unpadded here (rows of n, a multiple of vec), so every vector is aligned."""
  t, d = o.x.type, o.x.type.dtype
  mem = ctx.memref(ctx.get(o.scratch))
  n, length = t.shape[-1], t.shape[0]
  x = ctx.get(o.x)
  vty = ir.VectorType.get((vec,), mlir_type(d))
  ident = vector.broadcast(vty, _identity_const(o.kind, d))
  keys = list(np.ndindex(x.registers.shape))
  where = [_element_indices(ctx, t, idx) for idx in x.layout.thread_idxs(x.shape)]
  regs = [x.registers[k] for k in keys]

  def store_all():
    for r, (i, j) in zip(regs, where):
      vector.store(r, mem, [_flat(i, j, n)])

  steps = _steps(o.segment or length)
  if steps:
    store_all()
  for k, s in enumerate(steps):
    ctx.thread_barrier()             # the step's reads see every thread's writes
    new = []
    for r, (i, j) in zip(regs, where):
      valid, other = _partner(i, s, length, o.reverse, o.segment)
      nb = arith.select(valid, vector.load(vty, mem, [_flat(other, j, n)]), ident)
      new.append(_combine(o.kind, d, r, nb))
    regs = new
    if k + 1 < len(steps):
      ctx.thread_barrier()           # every read of this step is done before it is overwritten
      store_all()
  out = np.empty(x.registers.shape, dtype=object)
  for k, r in zip(keys, regs):
    out[k] = r
  ctx.set(o.result, fa.FragmentedArray(_registers=out, _layout=x.layout, _is_signed=x.is_signed))


@lower(Scan)
def _scan(ctx, o):
  if o.axis == len(o.x.type.shape) - 1 and (vec := _vec(o.x.type)) > 1:
    return _scan_vectors(ctx, o, vec)
  if o.axis == 0 and len(o.x.type.shape) == 2 and (vec := _vec(o.x.type)) > 1:
    return _scan_columns(ctx, o, vec)
  t, d = o.x.type, o.x.type.dtype
  mem = ctx.memref(ctx.get(o.scratch))
  two_d = len(t.shape) == 2
  n = t.shape[-1]
  length = t.shape[o.axis]
  row = n + o.pad
  ident = _identity_const(o.kind, d)

  def coords(idx):
    return _element_indices(ctx, t, idx) if two_d else _vector_coords(ctx, t, idx)

  def put(v, idx):
    i, j = coords(idx)
    memref.store(v, mem, [_flat(i, j, row)])

  x = ctx.get(o.x)
  steps = _steps(o.segment or length)
  if steps:
    x.foreach(put)
  for k, s in enumerate(steps):
    ctx.thread_barrier()             # the step's reads see every thread's writes

    def step(v, idx, s=s):
      i, j = coords(idx)
      pos = [i, j][o.axis if two_d else 1]
      valid, other = _partner(pos, s, length, o.reverse, o.segment)
      at = _flat(other, j, row) if (two_d and o.axis == 0) else _flat(i, other, row)
      nb = arith.select(valid, memref.load(mem, [at]), ident)
      return _combine(o.kind, d, v, nb)

    x = x.foreach(step, create_array=True, is_signed=d.is_signed if d.is_int else None)
    if k + 1 < len(steps):
      ctx.thread_barrier()           # every read of this step is done before it is overwritten
      x.foreach(put)
  ctx.set(o.result, x)


# ---------------------------------------------------------------- interpreter
def _np_combine(kind, a, b):
  if kind == ScanKind.SUM:
    return a + b
  if kind == ScanKind.PROD:
    return a * b
  if N.is_floating(a.dtype):
    return N.ieee_maximum(a, b) if kind == ScanKind.MAX else N.ieee_minimum(a, b)
  return np.maximum(a, b) if kind == ScanKind.MAX else np.minimum(a, b)


@interpret(Scan)
def _i_scan(cta, o):
  d = o.x.type.dtype
  x = np.array(cta.get(o.x), N.np_dtype(d))
  ref = cta.get(o.scratch)
  rows = 1 if x.ndim == 1 else x.shape[0]
  scratch = np.zeros((rows, x.shape[-1] + o.pad), N.np_dtype(d))
  scratch[:, :x.shape[-1]] = x.reshape(rows, -1)
  cta.write(ref, scratch.reshape(-1), o)       # the scratch's traffic, for the race checks
  cta.set(o.result, scanned(o, x, d))


def scanned(o, x, d):
  """The scan `o` of the array `x` (of `d`), combined in the GPU's order (interpret_pad_scans.py scans again)."""
  axis = o.axis
  vec = _vec(o.x.type) if axis == x.ndim - 1 else 1
  shape = x.shape
  if o.segment:                   # each segment of rows scanned apart: the rows of a (k, segment, n) view
    x, axis = x.reshape(-1, o.segment, shape[-1]), 1
  with np.errstate(over="ignore", invalid="ignore"):
    if vec > 1:
      return _i_scan_vectors(o, x, vec, d)
    for s in _steps(x.shape[axis]):
      nb = np.full_like(x, _identity(o.kind, d))
      src = [slice(None)] * x.ndim
      dst = [slice(None)] * x.ndim
      if o.reverse:
        src[axis], dst[axis] = slice(s, None), slice(None, -s)
      else:
        src[axis], dst[axis] = slice(None, -s), slice(s, None)
      nb[tuple(dst)] = x[tuple(src)]
      x = _np_combine(o.kind, x, nb).astype(x.dtype)
  return x.reshape(shape)


def _shifted(a, s, reverse, fill):
  """a moved s places along its last axis (towards the end; towards the start if reverse)."""
  out = np.full_like(a, fill)
  if reverse:
    out[..., :-s] = a[..., s:]
  else:
    out[..., s:] = a[..., :-s]
  return out


def _i_scan_vectors(o, x, vec, d):
  """_scan_vectors's order: within each vector, over the vectors' totals, then the vector before."""
  ident = _identity(o.kind, d)
  loc = x.reshape(*x.shape[:-1], x.shape[-1] // vec, vec).copy()
  order = range(vec - 2, -1, -1) if o.reverse else range(1, vec)
  for e in order:
    loc[..., e] = _np_combine(o.kind, loc[..., e + 1] if o.reverse else loc[..., e - 1], loc[..., e])
  tot = loc[..., 0] if o.reverse else loc[..., -1]
  for s in _steps(tot.shape[-1]):
    tot = _np_combine(o.kind, tot, _shifted(tot, s, o.reverse, ident)).astype(tot.dtype)
  prev = _shifted(tot, 1, o.reverse, ident)
  return _np_combine(o.kind, prev[..., None], loc).astype(x.dtype).reshape(x.shape)
