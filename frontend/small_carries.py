"""Loop carries of small statistics of 3-D (or wider) tiles: a running max `m` of shape (2, 8, 1) of an online
softmax over a (2, 8, c) chunk of per-head rows holds 16 elements, too few for a register tensor of three axes.
Outside loops such a statistic is the vector of the 2-D reshape's rows (frontend/ops/reduce.py), reshaped: its
elementwise math is the vector's and it broadcasts back against the tile (frontend/ops/broadcast_nd.py). A
loop carries it as that vector too: the initial value and each trip's new value are flattened to `(n,)`, the
body and the code after the loop see the vector reshaped to the carry's shape (MG204 at the broadcast, before,
whose hint, indexing the carry by a leading axis, met another MG204 at its `ml.full`).

A small statistic over a middle axis (frontend/ops/spread.py: a running max `m = ml.maximum(m, ml.max(v, axis=1,
keepdims=True))` of (2, 1, 32) over (2, 8, 32) chunks) is carried as its spread tile instead: the first trace meets
it at the yield (`Spread`), and the loop is traced again carrying the tile, its initial fill made at the tile's
shape; the body and the code after the loop see the statistic spread into the carried tile."""
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


class Spread(Exception):
  """A carry that a loop's body makes a small statistic spread along an axis: the loop is traced again."""


def _spread_init(b, loc, v, key):
  """The initial value `v` of a carry the loop carries spread (b.spread_leaves[key]), as its tile: a spread
  statistic's, or a fill at the tile's shape; None where v is neither (it is carried as it was)."""
  from .ops import elementwise as ew
  shape, axes, hint = b.spread_leaves[key]
  got = b.spread.get(v.id) if is_value(v) else None
  o = b.defining(v) if is_value(v) else None
  if got is not None and tuple(got[0].type.shape) == shape and got[1] == axes:
    full = got[0]
  elif isinstance(o, ew.Full) and isinstance(v.type, TensorType) and tuple(v.type.shape) in (
      tuple(1 if i in axes else n for i, n in enumerate(shape)), tuple(n for i, n in enumerate(shape) if i not in axes)):
    # (a keepdims fill, or one of the statistic without its reduced axes: acc = ml.zeros((2, 32)) summing
    # ml.sum(v, axis=1) of (2, 16, 32) chunks)
    full = ew.full_(Call(b, loc), shape, o.value, v.type.dtype)
  else:
    return None
  b.spread_carried[full.id] = (tuple(v.type.shape), axes, hint)
  return full


def flattened(tracer, inits, loc) -> tuple:
  """A loop's initial values with the small ones as vectors (remembered with their shapes), those of a shape the
  loop carries spread (see the module) as their tiles."""
  b = tracer.b
  out = []
  from .ops import few_stats
  for v in inits:
    key = (loc.lineno, loc.col_offset, tuple(getattr(v.type, "shape", ())) if is_value(v) else None)
    if key in b.spread_leaves and (full := _spread_init(b, loc, v, key)) is not None:
      out.append(full)
      continue
    if key in b.few_leaves and (packed := few_stats.pack(b, loc, v)) is not None:
      out.append(packed)         # (a few-element statistic: its elements packed, ops/few_stats.py)
      continue
    if _small(v):
      shape, v = tuple(v.type.shape), flat(b, loc, v)
      b.small_carries[v.id] = shape
    elif _one(v) and b.one_elements:
      shape, v = tuple(v.type.shape), _element(b, loc, v)
      b.one_carries[v.id] = shape
    out.append(v)
  return tuple(out)


def _one(v) -> bool:
  """A one-element tensor ((1,), (1, 1): a running max of one query row, `m = ml.full((1,), -inf)`), which no
  register tensor holds by itself: a loop carries its element, a scalar, and the body and the code after the loop
  see that scalar stretched to the carry's shape (probe 48a; it was MG204 at the loop)."""
  return is_value(v) and isinstance(v.type, TensorType) and len(v.type.shape) > 0 and math.prod(v.type.shape) == 1


def as_written(b, init):
  """A loop's initial value as the user wrote it, for messages: a one-element tensor the loop carries as its
  element is that tensor (a stand-in of its shape)."""
  if is_value(init) and init.id in b.one_carries:
    from . import ir
    return ir.Value(TensorType(b.one_carries[init.id], init.type.dtype), init.name)
  return init


def _element(b, loc, v):
  from .ops.one_element import element_of
  return element_of(Call(b, loc), v)


def shaped(b, loc, inits, values) -> tuple:
  """`values` (the body's block arguments, or the loop's results) with those of small carries reshaped to the
  carry's shape (emitted where the builder is: the body's start, or after the loop)."""
  from .ops.shape import Reduce, ReduceKind, Reshape
  from .ops import few_stats
  out = []
  for init, v in zip(inits, values):
    if is_value(init) and init.id in b.few_carried:         # (a few-element statistic packed into the vector)
      out.append(few_stats.unpack(b, loc, v, b.few_carried[init.id]))
      continue
    if is_value(init) and init.id in b.spread_carried:      # (the statistic spread into the carried tile)
      shape, axes, hint = b.spread_carried[init.id]
      kept = tuple(n for i, n in enumerate(v.type.shape) if i not in axes)
      m = b.emit(Reduce, ReduceKind.MAX, v, axes, loc=loc, types=[TensorType(kept, v.type.dtype)],
                 names=[v.name]).result
      if tuple(shape) != kept:
        m = b.emit(Reshape, m, loc=loc, types=[TensorType(shape, v.type.dtype)], names=[v.name]).result
      b.spread[m.id] = (v, axes, hint)
      out.append(m)
      continue
    if is_value(init) and init.id in b.one_carries:        # (a one-element tensor: its element carried)
      from .ops import elementwise as ew
      out.append(ew.full_(Call(b, loc), b.one_carries[init.id], v, v.type.dtype))
      continue
    shape = b.small_carries.get(init.id) if is_value(init) else None
    out.append(v if shape is None else
               b.emit(Reshape, v, loc=loc, types=[TensorType(shape, v.type.dtype)], names=[v.name]).result)
    if (want := b.spread_leaves.get((loc.lineno, loc.col_offset, shape))) is not None:
      b.spread_wanted[out[-1].id] = want      # (an inner loop's, whose start an enclosing loop carries as a vector)
  return tuple(out)


def _spread_in(b, v):
  """(spread shape, axes, hint) of a statistic that elementwise math of `v`'s shape makes `v` of (ml.maximum(m, s)
  of the carry m and a spread statistic s; or an inner loop's carry it could not spread), else None."""
  from .ops.elementwise import ELEMENTWISE_OPS
  todo, seen = [v], set()
  while todo:
    x = todo.pop()
    if not is_value(x) or x.id in seen or not isinstance(x.type, TensorType) or x.type.shape != v.type.shape:
      continue
    seen.add(x.id)
    if x.id in b.spread:
      return (tuple(b.spread[x.id][0].type.shape),) + b.spread[x.id][1:]
    if x.id in b.spread_wanted:
      return b.spread_wanted[x.id]
    o = b.defining(x)
    todo.extend(o.operands() if isinstance(o, ELEMENTWISE_OPS) else ())
  return None


def yielded(b, loc, init, leaf):
  """A trip's new value of a carry, as the vector the loop carries where the carry is a small one of that shape,
  as its spread tile where the loop carries it spread (see the module; Spread where the loop does not yet)."""
  from .ops import few_stats
  if is_value(init) and init.id in b.one_carries:
    if is_value(leaf) and isinstance(leaf.type, TensorType) and tuple(leaf.type.shape) == b.one_carries[init.id]:
      return _element(b, loc, leaf)
    return leaf                # (else the loop's type check names the carry)
  if is_value(init) and init.id in b.few_carried:
    return few_stats.pack(b, loc, leaf) or leaf        # (else the loop's type check names the carry)
  if is_value(init) and is_value(leaf) and (shape := few_stats.carried_shape(b, init)) and (
      (loc.lineno, loc.col_offset, shape) not in b.few_leaves) and getattr(leaf.type, "shape", None) == shape and (
      few_stats.derivable(b, loc, leaf)) and (init.id not in b.small_carries or few_stats.involves(b, leaf)):
    # (a vector carry stays one unless a few-element statistic meets it)
    b.few_leaves.add((loc.lineno, loc.col_offset, shape))
    raise Spread()
  got = b.spread.get(leaf.id) if is_value(leaf) else None
  if is_value(init) and init.id in b.spread_carried:
    if got is not None and tuple(got[0].type.shape) == tuple(init.type.shape):
      return got[0]
    o = b.defining(leaf) if is_value(leaf) else None
    from .ops import elementwise as ew
    return ew.full_(Call(b, loc), init.type.shape, o.value, leaf.type.dtype) if isinstance(o, ew.Full) else leaf
  key = (loc.lineno, loc.col_offset, b.small_carries.get(init.id) if is_value(init) else None)
  if key[2] is not None and key not in b.spread_leaves and tuple(getattr(leaf.type, "shape", ())) == key[2] and (
      got := _spread_in(b, leaf)) is not None:      # (every carry of that shape: a running max and sum)
    b.spread_leaves[key] = got
    raise Spread()
  shape = b.small_carries.get(init.id) if is_value(init) else None
  if shape is None or not (is_value(leaf) and isinstance(leaf.type, TensorType) and tuple(leaf.type.shape) == shape):
    return leaf
  return flat(b, loc, leaf)
