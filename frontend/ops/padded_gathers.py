"""Gathers and scatters at an index vector computed padded (ops/padded_tiles.py): the positions that sort an odd
read (`o = ml.argsort(e[...])` of 100 expert ids, held in 104 lanes) index a GMEM ref, `t[o, :]`, and scatter,
`out[o, :] = v`. A gather clamps the padding lanes' indices into the view as every index, so they read real elements,
and its result is padded as the index; a scatter adds a mask that keeps the padding lanes off, which would write."""
from __future__ import annotations

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
