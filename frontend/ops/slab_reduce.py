"""A reduction over leading axes whose result no register tensor holds, slab by slab.

`ml.sum(x[...], axis=0)` of a (2, 3, 64) tile is the 2-D reduction of its (2, 192) reshape, which no row-wise layout
holds (fewer than 4 rows, and 192 columns, not whole warpgroups); its (3, 64) result is no register tensor either,
so it was MG204 ("partial reductions work on 1-D and 2-D tensors"), and so was the hint's `v[0] + v[1]`. The tile
goes through an SMEM scratch; each row of the result is its slabs' rows (1-D vectors of the last axis) combined
elementwise, and the result is the vector of those rows typed with its shape, as a small statistic is held
(frontend/ops/reduce.py): elementwise math takes it, and a store writes it a row at a time."""
from __future__ import annotations

import itertools
import math

from .. import hw
from ..dtypes import DType
from ..types import TensorType, resolve

MAX_SLABS = 16       # at most this many slabs combined


def leading_slabs(cx, kind, x, axes, keepdims):
  """The reduction `kind` of `x` over its leading `axes` (see the module); None where it is no such one."""
  from . import elementwise as ew
  from .broadcast_nd import small_shape
  from .shape import ReduceKind, Reshape
  from .small_stores import MAX_ROWS, VECTOR
  shape, k = tuple(x.type.shape), len(axes)
  if keepdims or len(shape) < 3 or tuple(sorted(axes)) != tuple(range(k)) or k >= len(shape) - 1:
    return None
  kept = shape[k:]
  red, rows, run = math.prod(shape[:k]), math.prod(kept[:-1]), kept[-1]
  if hw.rows_fit(red, math.prod(kept)) or not small_shape(kept) or run % VECTOR or rows > MAX_ROWS or \
      red > MAX_SLABS or kind not in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN):
    return None
  d = resolve(x.type.dtype)
  if not isinstance(d, DType):
    return None
  if kind == ReduceKind.SUM and (d == DType.bool_ or d.is_int and d.bits < 32):     # (as jnp.sum)
    x = ew.astype(cx, x, DType.i32 if d == DType.bool_ or d.is_signed else DType.u32)
  elif d == DType.bool_:
    return None
  from .memory import view
  from .scratches import scratch
  from .transfers import load, store
  op = {ReduceKind.SUM: ew.BinOp.ADD, ReduceKind.MAX: ew.BinOp.MAX, ReduceKind.MIN: ew.BinOp.MIN}[kind]
  buf = scratch(cx, shape, x.type.dtype, f"{x.name or 'tile'} scratch")
  store(cx, buf, x)
  out = scratch(cx, (rows * run,), x.type.dtype, f"{x.name or 'tile'} result scratch")
  for r, at in enumerate(itertools.product(*(range(n) for n in kept[:-1]))):
    acc = None
    for lead in itertools.product(*(range(n) for n in shape[:k])):
      row = load(cx, view(cx, buf, (*lead, *at, slice(None)), buf.name))
      acc = row if acc is None else ew.binary(cx, op, acc, row)
    store(cx, view(cx, out, (slice(r * run, (r + 1) * run),), out.name), acc)
  vec = load(cx, out, cx.name)
  return cx.b.emit(Reshape, vec, loc=cx.loc, types=[TensorType(kept, vec.type.dtype)], names=[cx.name]).result
