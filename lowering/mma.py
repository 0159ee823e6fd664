"""Tensor-core ops on both backends: Dot (WGMMA) and DotWait."""
from __future__ import annotations

import jax.experimental.mosaic.gpu as mgpu
import numpy as np
from jaxlib.mlir.dialects import nvvm

from ..frontend.ops.mma import Dot, DotWait
from . import interpret_numerics as N
from .mosaic import mlir_type
from .registry import interpret, lower


@lower(Dot)
def _dot(ctx, o):
  m, n = ctx.local_shape(o.result.type)
  acc = ctx.carried(o.acc) if o.acc is not None else mgpu.WGMMAAccumulator.zero(
      m, n, mlir_type(o.result.type.dtype))
  a, b = ctx.get(o.a), ctx.get(o.b)
  tiled = ctx.smem_layout(a)
  a_rows = ctx.my_rows(ctx.memref(a), o.a.type.shape[0], tiled)
  res = mgpu.wgmma(acc, a_rows, ctx.memref(b), swizzle=tiled.swizzle)
  nvvm.wgmma_commit_group_sync_aligned()
  ctx.set(o.result, res)


@lower(DotWait)
def _dot_wait(ctx, o):
  nvvm.wgmma_wait_group_sync_aligned(o.pending)


@interpret(Dot)
def _i_dot(cta, o):
  """acc + a @ b: products summed in float32 (as WGMMA does), rounded to the acc dtype; the
  group stays in flight, reading a and b, until a DotWait retires it."""
  a, b = cta.get(o.a), cta.get(o.b)
  x = cta.read(a, o, "mma_read").astype(np.float32)
  y = cta.read(b, o, "mma_read").astype(np.float32)
  t = o.result.type
  acc = cta.get(o.acc).astype(np.float32) if o.acc is not None else np.float32(0)
  r = (acc + x @ y).astype(N.np_dtype(t.dtype))
  cta.dots.append((r, {(a.owner, a.root.id, a.part), (b.owner, b.root.id, b.part)}, o.loc))
  cta.set(o.result, r)


@interpret(DotWait)
def _i_dot_wait(cta, o):
  del cta.dots[:max(0, len(cta.dots) - o.pending)]
