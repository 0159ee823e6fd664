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
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, memref

from ..frontend.ops.scan import Scan, ScanKind
from . import interpret_numerics as N
from .mosaic import mlir_type
from .registry import interpret, lower
from .shape import _element_indices, _flat


def _identity(kind, d):
  if kind == ScanKind.SUM:
    return 0
  if kind == ScanKind.PROD:
    return 1
  if d.is_float:
    return float("-inf") if kind == ScanKind.MAX else float("inf")
  if d.is_signed:
    return -(2 ** (d.bits - 1)) if kind == ScanKind.MAX else 2 ** (d.bits - 1) - 1
  return 0 if kind == ScanKind.MAX else 2 ** d.bits - 1


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


@lower(Scan)
def _scan(ctx, o):
  t, d = o.x.type, o.x.type.dtype
  mem = ctx.memref(ctx.get(o.scratch))
  two_d = len(t.shape) == 2
  n = t.shape[-1]
  length = t.shape[o.axis]
  row = n + o.pad
  index = ir.IndexType.get()
  c = lambda v: arith.constant(index, v)
  ident = arith.constant(mlir_type(d), float(_identity(o.kind, d)) if d.is_float else _identity(o.kind, d))

  def coords(idx):
    return _element_indices(ctx, t, idx) if two_d else [c(0), idx[0]]

  def put(v, idx):
    i, j = coords(idx)
    memref.store(v, mem, [_flat(i, j, row)])

  x = ctx.get(o.x)
  steps = _steps(length)
  if steps:
    x.foreach(put)
  for k, s in enumerate(steps):
    ctx.thread_barrier()             # the step's reads see every thread's writes

    def step(v, idx, s=s):
      i, j = coords(idx)
      pos = [i, j][o.axis if two_d else 1]
      if o.reverse:
        valid = arith.cmpi(arith.CmpIPredicate.ult, arith.addi(pos, c(s)), c(length))
        other = arith.select(valid, arith.addi(pos, c(s)), pos)
      else:
        valid = arith.cmpi(arith.CmpIPredicate.uge, pos, c(s))
        other = arith.select(valid, arith.subi(pos, c(s)), pos)
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
  if np.issubdtype(a.dtype, np.floating):
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
  axis = o.axis
  with np.errstate(over="ignore", invalid="ignore"):
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
  cta.set(o.result, x)
