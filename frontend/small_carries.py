"""Loop carries of small statistics of 3-D (or wider) tiles: a running max `m` of shape (2, 8, 1) of an online
softmax over a (2, 8, c) chunk of per-head rows holds 16 elements, too few for a register tensor of three axes.
Outside loops such a statistic is the vector of the 2-D reshape's rows (frontend/ops/reduce.py), reshaped: its
elementwise math is the vector's and it broadcasts back against the tile (frontend/ops/broadcast_nd.py). A
loop carries it as that vector too: the initial value and each trip's new value are flattened to `(n,)`, the
body and the code after the loop see the vector reshaped to the carry's shape (MG204 at the broadcast, before,
whose hint, indexing the carry by a leading axis, met another MG204 at its `ml.full`)."""
from __future__ import annotations

import math

from .builder import Call
from .ops.base import is_value
from .types import TensorType


def _small(v) -> bool:
  """A tensor no register tensor of its shape holds (3 or more axes, or 2 of which neither is 1: a (4, 8) row max of
  a (4, 8, c) tile), that a vector holds."""
  from .ops.broadcast_nd import small_shape
  if not (is_value(v) and isinstance(v.type, TensorType) and small_shape(v.type.shape)):
    return False
  return math.prod(v.type.shape) % 8 == 0


def flat(b, loc, v):
  """`v` as the `(n,)` vector it stands for: a small statistic's source, a fill's value as a vector fill,
  else its reshape."""
  from .ops import elementwise as ew
  from .ops.broadcast_nd import small_source
  from .ops.shape import Reshape
  n = math.prod(v.type.shape)
  src = small_source(b.defining, v)
  if src is not None and tuple(src.type.shape) == (n,):
    return src
  o = b.defining(v)
  if isinstance(o, ew.Full):
    return ew.full_(Call(b, loc), (n,), o.value, v.type.dtype)
  return b.emit(Reshape, v, loc=loc, types=[TensorType((n,), v.type.dtype)], names=[v.name]).result


def flattened(tracer, inits, loc) -> tuple:
  """A loop's initial values with the small ones as vectors (remembered with their shapes)."""
  b = tracer.b
  out = []
  for v in inits:
    if _small(v):
      shape, v = tuple(v.type.shape), flat(b, loc, v)
      b.small_carries[v.id] = shape
    out.append(v)
  return tuple(out)


def shaped(b, loc, inits, values) -> tuple:
  """`values` (the body's block arguments, or the loop's results) with those of small carries reshaped to the
  carry's shape (emitted where the builder is: the body's start, or after the loop)."""
  from .ops.shape import Reshape
  out = []
  for init, v in zip(inits, values):
    shape = b.small_carries.get(init.id) if is_value(init) else None
    out.append(v if shape is None else
               b.emit(Reshape, v, loc=loc, types=[TensorType(shape, v.type.dtype)], names=[v.name]).result)
  return tuple(out)


def yielded(b, loc, init, leaf):
  """A trip's new value of a carry, as the vector the loop carries where the carry is a small one of that shape."""
  shape = b.small_carries.get(init.id) if is_value(init) else None
  if shape is None or not (is_value(leaf) and isinstance(leaf.type, TensorType) and tuple(leaf.type.shape) == shape):
    return leaf
  return flat(b, loc, leaf)
