"""Reductions and shape ops on both backends: Reduce, Broadcast, Reshape.

Reductions use Mosaic GPU's `FragmentedArray.reduce`: within each warp by shuffles
where the layout puts a reduced axis on lanes and registers only, through the SMEM
scratch the frontend planned where it spans warps. float16/bfloat16 sums run in
float32 and round once (as jnp.sum).
"""
from __future__ import annotations

import jax.experimental.mosaic.gpu as mgpu
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from ..frontend.dtypes import DType
from ..frontend.ops.shape import Broadcast, Reduce, ReduceKind, Reshape, Slice
from ..frontend.types import LayoutKind, ScalarType
from . import interpret_numerics as N
from .mosaic import layout_of, mlir_type
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
  if _upcast(o):
    x = x.astype(ir.F32Type.get())
  full = len(o.axes) == len(xt.shape)
  axes = tuple(range(len(x.shape))) if full else o.axes
  scratch = None
  if o.scratch is not None:
    scratch = ctx.memref(ctx.get(o.scratch))
    if ctx.num_warpgroups > 1:
      n = o.scratch.type.shape[0] // ctx.num_warpgroups
      start = arith.muli(ctx.wg, arith.constant(ir.IndexType.get(), n))
      scratch = mgpu.memref_slice(scratch, mgpu.ds(start, n))
  r = x.reduce(_OPS[o.kind], axes, scratch)
  d = o.result.type.dtype
  if full:
    v = r.registers.item()
    if _upcast(o):
      v = arith.truncf(mlir_type(d), v)
    ctx.set(o.result, v)
    return
  if _upcast(o):
    r = r.astype(mlir_type(d))
  ctx.set(o.result, r)


@lower(Broadcast)
def _broadcast(ctx, o):
  x, t, xt = ctx.get(o.x), o.result.type, o.x.type
  shape = ctx.local_shape(t)
  if tuple(x.shape) == tuple(shape) and xt.layout == t.layout:
    ctx.set(o.result, x)          # only size-1 axes the register layout leaves out
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


# ---------------------------------------------------------------- interpreter
@interpret(Slice)
def _i_slice(cta, o):
  cta.set(o.result, np.array(cta.get(o.x)[:, o.start:o.stop]))


@interpret(Reduce)
def _i_reduce(cta, o):
  x, d = cta.get(o.x), o.x.type.dtype
  if o.kind == ReduceKind.SUM:
    c = np.float32 if d.is_float else N.np_dtype(d)
    r = np.sum(x.astype(c), axis=o.axes, dtype=c)
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
