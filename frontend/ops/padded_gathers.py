"""Gathers and scatters at an index vector computed padded (ops/padded_tiles.py): the positions that sort an odd
read (`o = ml.argsort(e[...])` of 100 expert ids, held in 104 lanes) index a GMEM ref, `t[o, :]`, and scatter,
`out[o, :] = v`. A gather clamps the padding lanes' indices into the view as every index, so they read real elements,
and its result is padded as the index; a scatter adds a mask that keeps the padding lanes off, which would write."""
from __future__ import annotations

import numpy as np

from . import elementwise as ew
from .base import is_scalar, is_tensor


def padded_rows(cx, index):
  """The own length of a padded 1-D index vector that leads a gather's index (`x[o]`, `t[o, :]`, the other items
  slices), in a padded trace (ops/padded_tiles.py); None for any other index. Another index with a padded tensor
  ends the padded trace."""
  from .padded_tiles import PadAbort
  pads = getattr(cx.b, "pad_tiles", None)
  items = index if isinstance(index, tuple) else (index,)
  if pads is None or getattr(cx.b, "pad_ok", 0) or not any(getattr(i, "id", None) in pads for i in items):
    return None
  first = items[0]
  if not (is_tensor(first) and first.id in pads and len(first.type.shape) == 1 and all(
      isinstance(i, slice) or i is Ellipsis for i in items[1:])):
    raise PadAbort("gather")
  return pads[first.id][0]


def padded_points(cx, index):
  """The own shape of a gather's result where its index is padded integer tensors of one held shape beside static
  ints and run-time integer scalars, no slices (`tab[idx[...], h]` of a Swin window's (49, 49) relative positions
  read padded, at a head's column: probe 56g), in a padded trace; None for any other index. The gather clamps the
  padding lanes' indices as every index, so they read real elements; the result is padded as the indices."""
  from .padded_tiles import true_shape
  pads = getattr(cx.b, "pad_tiles", None)
  items = index if isinstance(index, tuple) else (index,)
  if pads is None or getattr(cx.b, "pad_ok", 0) or not any(getattr(i, "id", None) in pads for i in items):
    return None
  tensors = [i for i in items if is_tensor(i)]
  if len(tensors) == len(items) == 1 and len(tensors[0].type.shape) == 1:
    return None                       # (x[o] of an index vector: padded_rows)
  if not all(is_tensor(i) or is_scalar(i) or isinstance(i, int) and not isinstance(i, bool) for i in items):
    return None
  held = {tuple(i.type.shape) for i in tensors}
  if len(held) != 1 or any(i.id not in pads for i in tensors):
    return None
  own = {true_shape(cx.b, i) for i in tensors}
  return own.pop() if len(own) == 1 else None


def padded_scatter(cx, kind, iref, value, mask, what, own):
  """A scatter at a padded index vector (`out[o] = v` of the argsort of an odd read): the scatter under a mask that
  keeps the padding lanes off (they would write), its other operands padded alike (ops/padded_tiles.py)."""
  from . import padded_tiles
  from .base import BUILTINS
  from .gather import scatter
  first = (iref.index if isinstance(iref.index, tuple) else (iref.index,))[0]
  rank = len(iref.ref.type.shape)        # (the index vector's axis, then each other axis, a slice: padded_rows)
  lanes = ew.compare(cx, ew.CmpOp.LT, BUILTINS["arange"].rule(cx, first.type.shape[0]), own)
  if rank > 1:
    from .shape import expand
    lanes = expand(cx, lanes, (slice(None),) + (None,) * (rank - 1))
  with padded_tiles.allowed(cx):
    keep = lanes if mask is None else ew.binary(cx, ew.BinOp.AND, mask, lanes)
    return scatter(cx, kind, iref, value, keep, what)


def scatter_at_points(cx, kind, iref, value, mask, what, own):
  """A scatter at padded index tensors beside ints and scalars (padded_points: a Swin bias table's gradient,
  `ml.atomic_add(dtab.at[idx[...], h], g)` of a (49, 49) tile of indices read padded; probe 56g): under a mask that
  keeps the padding lanes off (they would write), the values padded alike."""
  from . import padded_tiles
  from .gather import scatter
  items = iref.index if isinstance(iref.index, tuple) else (iref.index,)
  held = tuple(next(i for i in items if is_tensor(i)).type.shape)
  lanes = padded_tiles.mask(cx, own, held)
  with padded_tiles.allowed(cx):
    keep = mask if lanes is None else lanes if mask is None else ew.binary(cx, ew.BinOp.AND, mask, lanes)
    return scatter(cx, kind, iref, value, keep, what)


def grid_points(cx, index, held=None):
  """(index, own shape, padded shape) of a gather or scatter at index grids (`ml.arange`, constants and scalars:
  `q.at[h[:, None], 2 * d[None, :]]`, the even columns of a rotary's few heads) whose (rows, cols) result no
  register layout takes ((4, 8), (2, 32): fewer than 128 elements, or rows not a multiple of 4 beside columns not a
  multiple of 128), in a padded trace: each index tensor made again at the shape padded as an odd read is (rows to
  a multiple of 4, columns of 32; index_grids._regrid), so that the gather is computed padded (its indices clamp
  into the view, so the padding lanes read real elements) and a scatter writes under the padding's mask (probe
  59b; MG204 at the gather before). `held`: a padded value's shape, that the scatter of it makes them at (a run of
  few rows' statistic, `ml.atomic_add(o.at[rows], v)` of rows = pid * 2 + ml.arange(2), 1-D too). None for any
  other index."""
  import math
  from .. import index_grids
  from ..dtypes import DType
  from .padded_masks import _Defs
  from .padded_tiles import _holds, _up
  pads = getattr(cx.b, "pad_tiles", None)
  items = index if isinstance(index, tuple) else (index,)
  if pads is None or getattr(cx.b, "pad_ok", 0):
    return None
  tensors = [i for i in items if is_tensor(i)]
  if not tensors or any(i.id in pads or len(i.type.shape) > 2 for i in tensors) or not all(
      is_tensor(i) or is_scalar(i) or isinstance(i, int) and not isinstance(i, bool) for i in items):
    return None
  try:
    shape = tuple(int(n) for n in np.broadcast_shapes(*(tuple(i.type.shape) for i in tensors)))
  except ValueError:
    return None
  if held is not None:
    if len(held) != len(shape) or any(u < n for u, n in zip(held, shape)):
      return None
    up = tuple(held)
  else:
    if len(shape) != 2 or 1 in shape or _holds(shape) and not (shape[0] % 4 and shape[1] % 128):
      return None
    up = _up(shape, DType.i32)
    if not _holds(up) or math.prod(up) > 4 * math.prod(shape) + 128:
      return None
  out, new, defs = [], [], _Defs(cx.b)
  for i in items:
    if not is_tensor(i):
      new.append(i)
      continue
    lead = len(shape) - len(i.type.shape)
    axes = tuple(lead + a if n != 1 else None for a, n in enumerate(i.type.shape))
    v = index_grids._regrid(defs, i, up, axes, out)
    if v is None:
      return None
    new.append(v)
  for o in out:
    cx.b.append(o)
  return tuple(new), shape, up


def grid_scatter(cx, kind, iref, value, mask, what):
  """A scatter of a value computed padded at index grids grid_points takes (`tl.store(o.at[h[:, None], 2 *
  d[None, :]], v)` of a rotary's few heads): at the grids made again at the value's padded shape, under the
  padding's mask (the padding lanes would write) and the user's mask recomputed there. None where it is no such
  scatter."""
  from . import padded_tiles
  from .gather import IndexedRef, scatter
  from .padded_masks import _mask_at
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(value, "id", None) not in pads or getattr(cx.b, "pad_ok", 0):
    return None
  own, held = pads[value.id], tuple(value.type.shape)
  grid = grid_points(cx, iref.index, held)
  if grid is None or grid[1] != own or grid[2] != held:
    return None
  index, _, up = grid
  with padded_tiles.allowed(cx):
    keep = padded_tiles.mask(cx, own, up) if mask is None else _mask_at(cx, mask, own, up)
    if keep is None:
      raise padded_tiles.PadAbort("scatter mask")
    return (scatter(cx, kind, IndexedRef(iref.ref, index), value, keep, what),)
