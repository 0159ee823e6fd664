"""Gathers and scatters at an index vector computed padded (ops/padded_tiles.py): the positions that sort an odd
read (`o = ml.argsort(e[...])` of 100 expert ids, held in 104 lanes) index a GMEM ref, `t[o, :]`, and scatter,
`out[o, :] = v`. A gather clamps the padding lanes' indices into the view as every index, so they read real elements,
and its result is padded as the index; a scatter adds a mask that keeps the padding lanes off, which would write."""
from __future__ import annotations

from . import elementwise as ew
from .base import is_tensor


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
