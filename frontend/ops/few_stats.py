"""Keepdims statistics of a few elements stored whole.

A keepdims sum, max or min of at most FEW_KEPT elements over axes no 2-D reshape reduces (the (1, 2, 1) channel
sums of a (4, 2, 32) tile, frontend/ops/reduce.py's _few_kept) is that many full reductions, scalars, selected
into an index grid of the statistic's shape, which broadcasts back wherever it meets the tile. No register tensor
holds so few elements, so `out[...] = ml.sum(v, axis=(0, 2), keepdims=True)` into a (1, 2, 1) output was MG204
naming "this tensor" with a hint to use tiles of 128 elements. Stored whole into a ref of its own shape, such a
statistic, and elementwise math of such statistics and numbers (`ml.mean`'s division, `ml.std`'s square root,
`ml.logsumexp`'s log and add), is stored an element at a time: each element's math done on its scalars.
"""
from __future__ import annotations

import math

from .. import ir
from ..types import ScalarType, TensorType
from .base import is_value


def record(cx, res, parts) -> None:
  """`res`, a statistic made of the scalars `parts` (in its row-major order)."""
  cx.b.few_stats[res.id] = tuple(parts)


def storable(cx, ref, value) -> bool:
  """Whether `value`, stored whole into `ref` of its shape, is stored an element at a time: a few-element statistic
  (see the module), the vector of a 2-D reshape's rows typed with its shape of at most FEW_KEPT elements (a small
  statistic, frontend/ops/reduce.py), or elementwise math of them and fills (not fills alone)."""
  from .broadcast_nd import small_source
  from .small_parts import FEW_SCALARS
  if not (is_value(value) and isinstance(value.type, TensorType) and tuple(value.type.shape) == tuple(ref.type.shape)
          and math.prod(value.type.shape) <= FEW_SCALARS):    # (every store asks: the cheap tests first; a (3, 5)
    return False                                              # window read whole is one, ops/small_loads.py)
  return ((involves(cx.b, value) or small_source(cx.b.defining, value) is not None)
          and _scalars(cx, value, {}, probe=True) is not None)


def store_whole(cx, ref, value) -> None:
  """Store `value` (storable) an element at a time: scalar math on its statistics' scalars, a small statistic's
  vector elements read through SMEM."""
  from .access import scalar_store
  from .memory import view
  shape = tuple(value.type.shape)
  at = [tuple((k // math.prod(shape[d + 1:])) % n for d, n in enumerate(shape)) for k in range(math.prod(shape))]
  for idx, s in zip(at, _scalars(cx, value, {}, probe=False)):
    scalar_store(cx, view(cx, ref, idx, ref.name), s)


def _scalars(cx, v, memo, probe, loose=False):
  """The scalars (or numbers) of `v`'s elements, row-major, where v is a few-element statistic or elementwise math
  of such statistics, small statistics' vectors of at most FEW_KEPT elements, fills and numbers of v's shape; None
  for any other. `probe`: only whether they exist (no op is emitted); `loose`: a loop's block argument counted as
  one (its carry, before the loop carries it packed)."""
  from .broadcast_nd import index_small, small_shape, small_source
  from .reduce import FEW_KEPT
  from .elementwise import ELEMENTWISE_OPS, Full
  if not is_value(v) or not isinstance(v.type, TensorType):
    return v
  if v.id in memo:
    return memo[v.id]
  n = math.prod(v.type.shape)
  out = None
  o = cx.b.defining(v)
  shape = tuple(v.type.shape)
  if v.id in cx.b.few_stats:
    out = list(cx.b.few_stats[v.id])
  elif n <= FEW_KEPT and small_shape(shape) and (src := small_source(cx.b.defining, v)) is not None and len(
      src.type.shape) == 1:
    at = [tuple((k // math.prod(shape[d + 1:])) % m for d, m in enumerate(shape)) for k in range(n)]
    out = [None] * n if probe else [index_small(cx, v, idx) for idx in at]
  elif loose and o is None:
    out = [None] * n
  elif isinstance(o, Full):
    out = [o.value] * n
  elif isinstance(o, ELEMENTWISE_OPS) and all(
      not isinstance(x.type, TensorType) or tuple(x.type.shape) == tuple(v.type.shape) for x in o.operands()):
    each = [_scalars(cx, x, memo, probe, loose) for x in o.operands()]     # (a scalar operand: itself)
    if all(e is not None for e in each):
      out = [None] * n if probe else [_scalar_op(cx, o, k, each) for k in range(n)]
  memo[v.id] = out
  return out


def _scalar_op(cx, o, k, each):
  """The op `o` on the k-th scalars of its operands (`each`: their elements, or a scalar operand itself)."""
  from .elementwise import full_
  mapping = {}
  for x, e in zip(o.operands(), each):
    if isinstance(x.type, TensorType):       # (a fill's number: a scalar of its dtype, as the op's operand)
      mapping[x] = e[k] if is_value(e[k]) else full_(cx, (), e[k], x.type.dtype)
  return cx.b.append(ir.retyped(o, mapping, lambda r: ScalarType(r.type.dtype))).results[0]


# ---------------------------------------------------------------- carried by loops
# A loop whose body makes a carry of at most FEW_KEPT elements (its start an `ml.zeros((1, 2, 1))` fill) a few-element
# statistic (per-channel sums over chunks) carries it packed into a (128,) vector, one element a position: the
# first trace meets it at the yield (small_carries.Spread), the loop is traced again carrying the vector; the body
# and the code after the loop read its elements back through SMEM, the statistic rebuilt from them.
PACK = 128


def carried_shape(b, init):
  """The shape of a carry a loop could carry packed (`init` the loop's initial value), else None."""
  shape = b.small_carries.get(init.id) or tuple(getattr(init.type, "shape", ()))
  from .broadcast_nd import small_shape
  from .reduce import FEW_KEPT
  return tuple(shape) if 1 < math.prod(shape) <= FEW_KEPT and small_shape(shape) else None


def derivable(b, loc, leaf) -> bool:
  """Whether `leaf`'s elements are scalars of few-element statistics (the loop's own carry counted as one)."""
  from ..builder import Call
  return _scalars(Call(b, loc), leaf, {}, probe=True, loose=True) is not None


def involves(b, v) -> bool:
  """Whether elementwise math of `v`'s shape makes `v` of a few-element statistic (of b.few_stats)."""
  from .elementwise import ELEMENTWISE_OPS
  todo, seen = [v], set()
  while todo:
    x = todo.pop()
    if not is_value(x) or x.id in seen or not isinstance(x.type, TensorType):
      continue
    seen.add(x.id)
    if x.id in b.few_stats:
      return True
    o = b.defining(x)
    todo.extend(o.operands() if isinstance(o, ELEMENTWISE_OPS) else ())
  return False


def pack(b, loc, v):
  """The (128,) vector of `v`'s elements (a fill, a few-element statistic, elementwise math of them), recorded as
  a packed carry of v's shape; None where v is none of those."""
  from ..builder import Call
  cx = Call(b, loc)
  parts = _scalars(cx, v, {}, probe=True) and _scalars(cx, v, {}, probe=False)
  if parts is None:
    return None
  from .elementwise import CmpOp, compare, full_, where_
  from .elementwise_fns import arange
  iota = arange.apply(cx, (PACK,), {})
  out = full_(cx, (PACK,), 0, v.type.dtype)
  for k, s in enumerate(parts):
    out = where_(cx, compare(cx, CmpOp.EQ, iota, k), s, out)
  b.few_carried[out.id] = tuple(v.type.shape)
  return out


def unpack(b, loc, vec, shape):
  """The few-element statistic of `shape` packed into the carried vector `vec` (its elements through SMEM)."""
  from ..builder import Call
  from .elementwise import CmpOp, compare, stretch, where_
  from .shape import index_through_smem
  from .small_parts import flat_grid
  cx = Call(b, loc)
  parts = [index_through_smem(cx, vec, (k,)) for k in range(math.prod(shape))]
  flat = flat_grid(cx, shape)
  res = stretch(cx, shape, parts[-1])
  for j in reversed(range(len(parts) - 1)):
    res = where_(cx, compare(cx, CmpOp.EQ, flat, j), parts[j], res)
  record(cx, res, parts)
  return res
