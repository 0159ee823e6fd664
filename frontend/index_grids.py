"""Index masks computed at the tile's own shape where the tile must keep the strided layout.

A mask written as Triton users write it, `rows[:, None] < n` (a vector of row indices
broadcast along the columns), is a broadcast: it gives the tile it meets a layout whose rows
live in fixed threads (layouts.py). Such a tile cannot be reshaped other than by size-1 axes, so
a masked load followed by `v.reshape(16 * 64, 2)` (unpacking int4 nibbles, packing pairs) was
MG204, while the same kernel without the mask compiled. The mask's values depend only on
`ml.arange`, constants and scalars, so this pass recomputes such a broadcast at the result's
shape: each `ml.arange` becomes an iota along the axis it is broadcast to (a size-1 axis that
is stretched becomes 0), the arithmetic follows elementwise. It does so only for tiles that
meet a reshape changing more than size-1 axes (or a 3-D tensor), leaving every other kernel's layouts as they were.
"""
from __future__ import annotations

import dataclasses
import math

from . import hw, ir
from .layouts import _UnionFind
from .ops.elementwise_ops import ELEMENTWISE_OPS, Arange, Full, remade
from .ops.shape import Broadcast, Reshape
from .types import TensorType

_TIED = (ir.LayoutRule.ELEMENTWISE, ir.LayoutRule.MEMORY)


def _blocks(block: ir.Block):
  for o in block.ops:
    yield o, block
    for r in o.regions:
      yield from _blocks(getattr(o, r))


def _tensor(v) -> bool:
  return isinstance(v, ir.Value) and isinstance(v.type, TensorType)


def _real_reshape(o) -> bool:
  squeeze = lambda s: tuple(d for d in s if d != 1)
  return squeeze(o.x.type.shape) != squeeze(o.result.type.shape)


class _Classes(_UnionFind):
  """Tensors tied by ops whose results and tensor operands share a layout."""

  def __init__(self, kernel):
    super().__init__()
    for o in ir.walk(kernel.body):
      if ir.traits_of(o).layout in _TIED:
        vs = [v for v in (*o.operands(), *o.results) if _tensor(v)]
        for a, b in zip(vs, vs[1:]):
          self.union(a.id, b.id)


def _regrid(defs, v, shape, axes, out: list):
  """`v` (a tensor of ml.arange, constants and scalars) recomputed at `shape`: `axes[i]` is
  the axis of `shape` that v's axis i runs along (None: v's axis has size 1, stretched). The
  new ops are appended to `out`; None where `v` is made otherwise."""
  if not _tensor(v):
    return v
  d = defs.get(v.id)
  t = TensorType(shape, v.type.dtype)
  if isinstance(d, Arange):
    if axes[d.dim] is None:
      new = Full(0, d.loc, (ir.Value(t, v.name),))
    else:
      new = Arange(axes[d.dim], d.loc, (ir.Value(t, v.name),))
  elif isinstance(d, Full):
    new = Full(d.value, d.loc, (ir.Value(t, v.name),))
  elif isinstance(d, Broadcast):
    inner = [axes[k] if d.x.type.shape[i] == d.result.type.shape[k] else None for i, k in enumerate(d.dims)]
    return _regrid(defs, d.x, shape, inner, out)
  elif isinstance(d, ELEMENTWISE_OPS):
    new = remade(d, v, t, lambda x: _regrid(defs, x, shape, axes, out))
    if new is None:
      return None
  else:
    return None
  defs[new.results[0].id] = new
  out.append(new)
  return new.results[0]


def _row_wise_fits(shape) -> bool:
  """Whether a 2-D tile can take layouts.py's row-wise layout (32 lanes along its columns)."""
  if len(shape) != 2 or 1 in shape or math.prod(shape) % hw.WARPGROUP:
    return True            # (a row or column vector, or a tile too small for the strided layout)
  rows, cols = shape
  return any(rows % (hw.WARPS_PER_WARPGROUP // k) == 0 and cols % (hw.WARP * k) == 0 for k in (1, 2, 4))


def grid_index_masks(kernel: ir.Kernel, defs: dict) -> None:
  classes = _Classes(kernel)
  strided = {classes.find(o.x.id) for o in ir.walk(kernel.body) if isinstance(o, Reshape) and _real_reshape(o)}
  strided |= {classes.find(x.id) for o in ir.walk(kernel.body)        # 3-D tensors and what makes them
              if any(_tensor(v) and len(v.type.shape) > 2 for v in o.results)
              for x in (*o.operands(), *o.results) if _tensor(x)}
  # a tile too narrow for a row-wise layout (columns not a multiple of 32): a mask or index grid
  # broadcast into it would make it one, so it is computed at the tile's shape instead
  strided |= {classes.find(o.result.id) for o in ir.walk(kernel.body)
              if isinstance(o, Broadcast) and not _row_wise_fits(o.result.type.shape)}
  if not strided:
    return
  changed = False
  for o, block in list(_blocks(kernel.body)):
    if not (isinstance(o, Broadcast) and classes.find(o.result.id) in strided):
      continue
    shape = o.result.type.shape
    axes = [k if o.x.type.shape[i] == shape[k] else None for i, k in enumerate(o.dims)]
    ops: list = []
    v = _regrid(defs, o.x, shape, axes, ops)
    if v is None:
      continue
    # the broadcast's result, now computed elementwise at its shape
    last = ops[-1]
    last = dataclasses.replace(last, results=(o.result,))
    defs[o.result.id] = last
    ops[-1] = last
    at = next(k for k, x in enumerate(block.ops) if x is o)
    block.ops[at:at + 1] = ops
    changed = True
  if changed:
    ir.prune_dead(kernel.body)
