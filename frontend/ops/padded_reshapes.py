"""Reshapes of a value computed padded (ops/padded_tiles.py's padded_reshape) that move its padding: a padded axis
split in two or merged back (probe 56g), a padded axis split into runs of k or merged with the axes after it
(probe 53e)."""
from __future__ import annotations

import math

from .padded_tiles import allowed


def window_reshape(cx, x, own, up, shape, padded):
  """A padded axis split in two, or two axes merged whose second is padded, the other axes as they are (Swin's 7x7
  windows: a window's 49 tokens as (7, 7) and back, `v.reshape(7, 7, c)` of a (49, c) read held as (52, c), or
  `(2, 7, 7, c)` to `(2, 49, c)`; probe 56g): a split is a strided view of x's scratch whose inner axis is held to
  the next length registers take (its extra elements those of the next run: padding, never stored), a merge the
  rows of each run joined along the axis; None for any other reshape."""
  r = len(own)
  q = next((q for q in range(r) if len(shape) == r + 1 and tuple(shape[:q]) == tuple(own[:q]) and
            tuple(shape[q + 2:]) == tuple(own[q + 1:]) and shape[q] * shape[q + 1] == own[q] and up[q] != own[q]),
           None)
  if q is not None and shape[q] > 1:
    from .permute import restride_tensor, row_major_strides
    a, b = shape[q], shape[q + 1]
    inner = len(shape) - 1 - (q + 1)            # (the axes after the split's inner one)
    bu = b if inner > 1 else -(-b // (4 if inner == 1 else 32)) * (4 if inner == 1 else 32)
    if (a - 1) * b + bu > up[q]:
      return None
    src = row_major_strides(up)
    held = tuple(up[:q]) + (a, bu) + tuple(up[q + 1:])
    with allowed(cx):
      out = restride_tensor(cx, x, held, 0, tuple(src[:q]) + (b * src[q], src[q]) + tuple(src[q + 1:]))
    if held != tuple(shape):
      cx.b.pad_tiles[out.id] = tuple(shape)
    return out
  q = next((q for q in range(1, r) if len(shape) == r - 1 and tuple(shape[:q - 1]) == tuple(own[:q - 1]) and
            tuple(shape[q:]) == tuple(own[q + 1:]) and shape[q - 1] == own[q - 1] * own[q] and up[q] != own[q] and
            up[q - 1] == own[q - 1] and 1 < own[q - 1] <= 64), None)
  if q is None:
    return None
  from .shape import concatenate, index_through_smem
  pre = (slice(None),) * (q - 1)
  return concatenate.rule(cx, [index_through_smem(cx, x, pre + (i,)) for i in range(own[q - 1])], q - 1)


def pairs_reshape(own, up, shape, q):
  """The padded shape of `shape`, a reshape of a value of own shape `own` held padded in `up` whose last padded axis
  `q` is split into runs of k (Triton's GPT-J pairs, `tl.split(tl.reshape(x, (h, d // 2, 2)))` of a (3, 80) tile of
  heads: (3, 40, 2), held (4, 64, 2)) or merged back with the unpadded axes after it (`tl.join(a, b).reshape(h, d)`),
  k dividing both its sizes so that the padding stays at the axis's end; None for any other reshape (probe 53e)."""
  if tuple(shape[:q]) != tuple(own[:q]):
    return None
  tail, rest = tuple(shape[q + 1:]), tuple(own[q + 1:])
  k, r = math.prod(tail), math.prod(rest)
  if len(shape) > q + 1 and not rest and k > 1 and own[q] % k == 0 and up[q] % k == 0 and shape[q] * k == own[q]:
    return tuple(up[:q]) + (up[q] // k,) + tail         # (split: c -> (c // k, c % k))
  if len(shape) == q + 1 and rest and tuple(up[q + 1:]) == rest and shape[q] == own[q] * r:
    return tuple(up[:q]) + (up[q] * r,)                 # (merged: (c, j) -> c * r + j)
  return None


def unit_reshape(cx, x, shape):
  """The shape, padded as `x` is, that a reshape of a value computed padded to `shape` of its own shape means where
  it only adds or removes size-1 axes (a 3-axis block pointer's (1, 7, 64) block made (7, 64), `ml.reshape(v, (7,
  64))` held as (1, 8, 64): probe 59a, it was MG204); else None."""
  from .padded_tiles import padded_table
  from .shape import _unit_axes_plan
  pads = padded_table(cx, x)
  if pads is None or (plan := _unit_axes_plan(pads[x.id], shape)) is None:
    return None
  removed, dims = plan
  held = list(shape)
  for j, n in zip(dims, (n for i, n in enumerate(x.type.shape) if i not in removed)):
    held[j] = n
  return tuple(held)
