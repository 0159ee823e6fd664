"""Elementwise math too small for a register tensor, recomputed at the shape of the tile it meets.

A mask of per-row lengths over a padded batch, `ml.arange(8)[None, :, None] < n[...][:, None, None]` with n of shape
(2,), is a (2, 8, 1) tensor: 16 elements, which no register tensor of that shape holds, and no 2-D reshape makes
(it is no reduction's vector). What it is for is to meet a tile it broadcasts to (`x.load(mask=mask)` of a (2, 8, 32)
window, `ml.where(mask, v, 0)`), so where such a tensor is broadcast to a shape a register tensor holds, its
elementwise math is done again at that shape: each operand broadcast there (the lengths as `ml.broadcast_to(n[...][:,
None, None], (2, 8, 32))` would, through the 2-D reshape frontend/ops/broadcast_nd.py plans; an index grid as
frontend/index_grids.py recomputes it), the compare, arithmetic, casts and selects after them. The small ops are then
dead and dropped. It was MG204 'broadcasting n[...] of shape (2, 1, 1) to (2, 8, 1)', with a hint that did this by hand.
"""
from __future__ import annotations

import math

from .. import errors as E, hw, ir
from ..types import TensorType
from .elementwise import ELEMENTWISE_OPS


def regrid(cx, x, shape, dims, *, early=False):
  """`x` (a tensor too small for a register tensor of its shape, computed elementwise from broadcasts and index grids)
  recomputed at `shape`, which a register tensor holds (`dims`: the result axis of each of x's, NumPy's trailing
  alignment); None where x is not made so. `early`: instead, x is a 3-D (or wider) tensor a register tensor holds
  whose math broadcasts a source along axes no 2-D broadcast takes (`ml.arange(64)[None, None, :] < n[...][:, None,
  None]` of (2, 1, 64): the lengths stretched along a last axis of 64 in 2 rows), met by a tile it broadcasts to."""
  from .broadcast_nd import index_only, small_shape
  shape, src = tuple(shape), tuple(x.type.shape)
  if (small_shape(src) == early or early and len(shape) < 3 or math.prod(shape) % hw.WARPGROUP
      or len(src) != len(shape) or tuple(dims) != tuple(range(len(shape))) or index_only(cx.b.defining, x)
      or early and not _unplanned(cx, x)):
    return None
  return _at(cx, x, shape, {}, probe=True) is not None and _at(cx, x, shape, {}, probe=False) or None


def _at(cx, v, shape, memo, probe):
  """`v` (of the small shape, a tensor or not) at `shape`; True for one that can be where `probe` (nothing emitted);
  None where it cannot."""
  from .broadcast_nd import index_only
  from .shape import Broadcast, broadcast_to_shape
  if not (isinstance(v, ir.Value) and isinstance(v.type, TensorType)):
    return v
  if v.id in memo:
    return memo[v.id]
  o = cx.b.defining(v)
  out = None
  if index_only(cx.b.defining, v):         # (an index grid: broadcast, frontend/index_grids.py recomputes it)
    out = True if probe else broadcast_to_shape(cx, v, shape)
  elif isinstance(o, Broadcast) and not _small(o.x) and _plans(o.x, o.dims, shape):
    # a source a register tensor holds (the lengths' (2,) vector, made (2, 1, 1), stretched to (2, 8, 1)): broadcast
    # straight there, as the 2-D broadcast of frontend/ops/broadcast_nd.py's plans
    out = True if probe else broadcast_to_shape(cx, _ranked(cx, o.x, o.dims, len(shape)), shape)
  elif isinstance(o, ELEMENTWISE_OPS) and all(
      not isinstance(x.type, TensorType) or tuple(x.type.shape) == tuple(v.type.shape) for x in o.operands()):
    each = [_at(cx, x, shape, memo, probe) for x in o.operands()]
    if all(e is not None for e in each):
      if probe:
        out = True
      else:
        mapping = {x: e for x, e in zip(o.operands(), each) if isinstance(x.type, TensorType)}
        out = cx.b.append(ir.retyped(o, mapping, lambda r: TensorType(shape, r.type.dtype))).results[0]
  memo[v.id] = out
  return out


def _unplanned(cx, x) -> bool:
  """Whether the elementwise math making `x` (of one shape) broadcasts a tensor into it that no 2-D broadcast takes."""
  from .broadcast_nd import index_only
  from .shape import Broadcast
  todo, seen = [x], set()
  while todo:
    v = todo.pop()
    if not (isinstance(v, ir.Value) and isinstance(v.type, TensorType)) or v.id in seen or v.type.shape != x.type.shape:
      continue
    seen.add(v.id)
    o = cx.b.defining(v)
    if isinstance(o, Broadcast) and math.prod(o.x.type.shape) < math.prod(v.type.shape) and not index_only(
        cx.b.defining, v) and not _plans(o.x, o.dims, tuple(v.type.shape)) and v.id not in cx.b.spread:
      return True
    if isinstance(o, ELEMENTWISE_OPS):
      todo.extend(o.operands())
  return False


def _plans(x, dims, shape) -> bool:
  """Whether `x`, its axis i made axis dims[i] of `shape`, broadcasts there as a 2-D broadcast between reshapes."""
  from .broadcast_nd import flattened_plan, two_step_plan
  ranked = [1] * len(shape)
  for i, d in enumerate(dims):
    ranked[d] = x.type.shape[i]
  every = tuple(range(len(shape)))
  return flattened_plan(tuple(ranked), shape, every) is not None or two_step_plan(tuple(ranked), shape, every) is not None


def at_spread(cx, v, full, axes):
  """`v`, an operand of elementwise math with a statistic spread along `axes` into a tile of shape `full` (v of the
  statistic's keepdims or kept shape), at that tile's shape: where v is a broadcast of a smaller tensor (per-batch
  lengths `n[...][:, None, None]` meeting a (2, 1, 32) statistic, a masked mean's divisor) or an index grid; None for
  any other."""
  from .broadcast_nd import index_only
  from .shape import Broadcast, broadcast_to_shape
  full, shape = tuple(full), tuple(v.type.shape)
  into = list(range(len(full))) if len(shape) == len(full) else [a for a in range(len(full)) if a not in axes]
  o = cx.b.defining(v)
  if isinstance(o, Broadcast) and math.prod(o.x.type.shape) < math.prod(shape):
    dims = tuple(into[d] for d in o.dims)
    return broadcast_to_shape(cx, _ranked(cx, o.x, dims, len(full)), full)
  if len(shape) == len(full) and index_only(cx.b.defining, v):
    return broadcast_to_shape(cx, v, full)
  return None


def _small(x) -> bool:
  """Whether tensor `x` is too small for a register tensor of its shape, over 3 or more axes (a (2, 1, 1) one is the
  (2,) vector with axes inserted: not small here, its source is taken)."""
  from .broadcast_nd import small_shape
  return small_shape(tuple(x.type.shape)) and len([n for n in x.type.shape if n != 1]) > 1


def _ranked(cx, x, dims, rank):
  """`x` with size-1 axes inserted so that its axis i is axis dims[i] of a tensor of `rank` axes."""
  from .shape import Broadcast
  if len(x.type.shape) == rank and tuple(dims) == tuple(range(rank)):
    return x
  shape = [1] * rank
  for i, d in enumerate(dims):
    shape[d] = x.type.shape[i]
  return cx.b.emit(Broadcast, x, tuple(dims), loc=cx.loc, types=[TensorType(tuple(shape), x.type.dtype)],
                   names=[x.name]).result


def check_reduce(cx, x, axes, axis, keepdims, what) -> None:
  """A tensor too small for a register tensor of its shape that is no statistic (a (2, 8, 1) mask of per-row lengths,
  `ml.sum(mask.astype(jnp.float32), axis=1)` to count them) reduced along an axis whose result keeps more than one
  element: MG204 naming it, whose hint reduces it at the shape of the tile it masks (it was MG204 naming the compiler's
  SMEM scratch, whose hint stored it as a vector)."""
  from ..tile_pad_hints import check_read_tile
  from .broadcast_nd import index_only, small_shape, small_source
  check_read_tile(cx, x, axes, what)      # (a 3-D tile read from memory that no register tensor holds)
  shape = tuple(x.type.shape)
  kept = [n for i, n in enumerate(shape) if i not in axes]
  if (len(axes) == len(shape) or math.prod(kept) <= 1 or not small_shape(shape) or len(shape) < 3
      or small_source(cx.b.defining, x) is not None or x.id in cx.b.few_stats or index_only(cx.b.defining, x)
      or 1 not in shape):
    return
  if _at(cx, x, tuple(n if n != 1 else hw.WARPGROUP for n in shape), {}, probe=True) is None:
    return            # (not a mask made of broadcasts: broadcast to a tile, it would not compute either)
  name = cx.named(x, "m")
  tile = tuple(n if n != 1 else "c" for n in shape)
  tile_text = "(" + ", ".join(str(n) for n in tile) + ")"
  ax = f"axis={axis!r}" + (", keepdims=True" if keepdims else "")
  raise E.LayoutError(
      f"{cx.text or what + '(' + name + ', ' + ax + ')'} reduces a tensor of shape {shape}: {math.prod(shape)} elements, too few for a register"
      f" tensor of that shape (a multiple of {hw.WARPGROUP}), and no statistic held otherwise", cx.loc,
      hint=f"reduce it at the shape of the tile it masks (c that tile's size along each size-1 axis):"
           f" {what}(ml.broadcast_to({name}, {tile_text}), {ax}), which computes it there")
