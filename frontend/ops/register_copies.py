"""`ml.copy` between GMEM and SMEM that TMA cannot do for its alignment alone (probe 47d): rows not 16 bytes
apart (int8 rows of 40, a float16 head dimension of 36), a window's last dimension not a multiple of 16
bytes, or a constant start off a 16-byte boundary. The copy goes through registers instead, as SMEM -> SMEM
does: a register read of the window and a register write of it, under a mask of the part inside the array
where the window may leave it, so it keeps TMA's meaning (a load fills what lies past the array's end with
zeros, a store writes only what lies inside). Copies TMA cannot do for another reason keep their errors, and
so do the ones this cannot route (multicast, reduce=, a copy in a pipelined loop, `ml.range(..., stages=)`
or a warp-specialised one, which needs its TMA loads, a run-time start that may be negative, windows of
more than two axes, more than 256 elements along an axis, or a number of elements that is not a multiple of
128, the threads of a warpgroup)."""
from __future__ import annotations

import math

from .. import hw
from ..dtypes import DType
from ..types import Space, resolve
from . import elementwise as ew


def routed(cx, src, dst, gwin, reduce, multicast) -> bool:
  """Whether the copy src -> dst goes through registers (see the module's docstring); `gwin`: (root, index) of
  its GMEM side."""
  from .run_stores import never_negative
  if (reduce is not None or multicast is not None or src.type.remote or dst.type.remote
      or getattr(cx.b, "pipelining", 0)):        # (a pipelined loop needs its TMA loads)
    return False
  d = resolve(src.type.dtype)
  if not isinstance(d, DType) or d == DType.bool_:
    return False
  root, index = gwin
  full = root.type.shape
  if index is None:
    from .. import ir
    index = tuple(ir.Idx(0, n) for n in full)
  if not index or index[-1].squeeze:
    return False
  size = d.itemsize
  start = index[-1].start
  misaligned = ((index[-1].size * size) % hw.TMA_ALIGN or len(full) > 1 and (full[-1] * size) % hw.TMA_ALIGN
                or isinstance(start, int) and (start * size) % hw.TMA_ALIGN)
  box = [i.size for i in index if not i.squeeze]
  return bool(misaligned and len(box) <= 2 and max(box) <= hw.TMA_MAX_BOX and math.prod(box) % hw.WARPGROUP == 0
              and all(never_negative(cx.b, i.start) for i in index))


def register_copy(cx, src, dst, gwin):
  """The copy src -> dst through registers, masked where the GMEM window may leave its array."""
  from .access import load_, store_
  mask = _inside(cx, gwin, src if src.type.space == Space.GMEM else dst)
  store_.rule(cx, dst, load_.rule(cx, src, mask, 0) if src.type.space == Space.GMEM else load_.rule(cx, src),
              mask if dst.type.space == Space.GMEM else None)


def _inside(cx, gwin, ref):
  """A bool tensor of the window's shape, its elements inside the array, or None where all of them are."""
  from .elementwise_fns import arange
  from .shape import reshape_
  root, index = gwin
  if index is None:
    return None
  rank = len(ref.type.shape)
  mask, axis = None, 0
  for i, n in zip(index, root.type.shape):
    if i.squeeze:
      continue
    if not (isinstance(i.start, int) and i.start + i.size <= n):
      pos = ew.compare(cx, ew.CmpOp.LT, ew.binary(cx, ew.BinOp.ADD, arange.rule(cx, i.size), i.start), n)
      if rank > 1:
        pos = reshape_(cx, pos, tuple(i.size if a == axis else 1 for a in range(rank)))
      mask = pos if mask is None else ew.binary(cx, ew.BinOp.AND, mask, pos)
    axis += 1
  if mask is not None and mask.type.shape != tuple(ref.type.shape):
    from .shape import broadcast_to_shape
    mask = broadcast_to_shape(cx, mask, tuple(ref.type.shape))
  return mask
