"""Rolls and flips of tiles the padded trace holds padded (ops/padded_tiles.py: an odd tile computed in the next
shape a register layout holds, its own elements first): the padding must stay past the tile's own elements. Split
from ops/padded_tiles.py."""
from __future__ import annotations

from .padded_tiles import PadAbort, allowed, padded_table


def padded_roll(cx, x, shift, axis, redo):
  """`ml.roll(x, shift, axis)` of padded `x` (redo(v, s): the plain roll of v by s along `axis`, as the padded
  shape holds it): along a padded axis of n elements, its own element j is x's (j - s) % n, which the roll of the
  padded axis by s gives where j >= s and its roll by s - n where j < s (the padding, at the end, rolls past
  neither); along an unpadded axis the padding stays where it is. None where x is not padded (probe 46j)."""
  pads = padded_table(cx, x)
  if pads is None:
    return None
  own, up = pads[x.id], tuple(x.type.shape)
  if axis is None and len(up) > 1:
    raise PadAbort("roll")
  a = 0 if axis is None else axis
  n = own[a]
  with allowed(cx):
    if n == up[a]:
      out = redo(x, shift)
    elif shift % n == 0:
      out = x
    else:
      from .roll import _select_range
      s = shift % n
      out = _select_range(cx, up, a, 0, s, redo(x, s - n), redo(x, s))
  pads[out.id] = own
  return out


def padded_flip(cx, x, axes, redo):
  """`ml.flip(x, axes)` (or `x[::-1]`) of padded `x` (redo(v, axes): the plain flip of v): a padded axis of n
  elements in u flipped whole puts its own elements at [u - n, u), rolled back by n - u to the start, the padding
  after them (redo_roll through padded_roll's plain path); None where x is not padded (probe 46j)."""
  pads = padded_table(cx, x)
  if pads is None:
    return None
  from .roll import roll_tensor
  own, up = pads[x.id], tuple(x.type.shape)
  with allowed(cx):
    out = redo(x, tuple(axes))
    for a in axes:
      if own[a] != up[a]:
        out = roll_tensor(cx, out, own[a] - up[a], a, "")
  pads[out.id] = own
  return out
