"""Strided slices of a register tensor along any one axis, with any static start and stop.

`v[..., a::k]` of a last axis k divides, from a start below k, is index_hints.strided_last_axis's (a reshape and an
index). A pooling window written as jnp would write it takes more: the rows of a tile (`v[0::2]`, `v[1::2, :]`: a
2x2 max pool's row pairs), a middle axis of a 3-D tile, a start past the step or a stop before the end (`w[:, 2:130:2]`
of a padded (16, 136) window: a stride-2 pool's third tap). Each is the static window of whole steps that holds the
slice's elements, `v[..., w:w + k * m, ...]` (through SMEM where it is not the whole axis), reshaped to `(..., m, k,
...)` and indexed at the slice's offset in each step, as `w.reshape(8, 2, 128)[:, 1, :]` (which the user may write)
is.
"""
from __future__ import annotations

import math

from .. import hw


def strided_axis(cx, x, index):
  """jnp's `x[index]` for an index of whole slices but one, a slice of static start, stop and step k > 1, along any
  axis of a tensor of 2 or more axes (the result of a multiple of 128 elements); None for any other index (the
  slice-step error reports it)."""
  from .shape import expand, index_through_smem, reshape_
  shape = tuple(x.type.shape)
  rank = len(shape)
  items = index if isinstance(index, tuple) else (index,)
  if rank < 2 or any(i is None for i in items) or sum(i is Ellipsis for i in items) > 1:
    return None
  dims = []
  for i in items:
    dims.extend([slice(None)] * (rank - (len(items) - 1)) if i is Ellipsis else [i])
  dims.extend([slice(None)] * (rank - len(dims)))
  if len(dims) != rank or not all(isinstance(i, slice) for i in dims):
    return None
  strided = [d for d, i in enumerate(dims) if i.step not in (None, 1)]
  if len(strided) != 1 or any(dims[d] != slice(None) for d in range(rank) if d != strided[0]):
    return None
  d = strided[0]
  s = dims[d]
  if not all(v is None or isinstance(v, int) and not isinstance(v, bool) for v in (s.start, s.stop, s.step)) \
      or s.step < 2:
    return None
  n, k = shape[d], s.step
  lo, hi, _ = s.indices(n)
  m = len(range(lo, hi, k))
  # the window [w, w + k * m) holds the slice's elements at offset j of each step: w = lo - j, inside the axis
  j = max(0, lo + k * m - n)
  out = shape[:d] + (m,) + shape[d + 1:]
  if m == 0 or j > min(lo, k - 1) or math.prod(out) % hw.WARPGROUP or math.prod(shape) % hw.WARPGROUP:
    return None
  w = lo - j
  if (w, w + k * m) != (0, n):
    window = shape[:d] + (k * m,) + shape[d + 1:]
    if math.prod(window) % hw.WARPGROUP:
      return None
    x = index_through_smem(cx, x, tuple(slice(w, w + k * m) if a == d else slice(None) for a in range(rank)))
  y = reshape_(cx, x, shape[:d] + (m, k) + shape[d + 1:])
  return expand(cx, y, (slice(None),) * (d + 1) + (j,))


def unheld_tile_error(cx, x):
  """MG204 for a strided slice of a tile that registers cannot hold whole (`v[:, ::2]` of a (5, 40) tile read from
  memory), which no padding of the slice's axis makes whole: the tile named, with the layout checks' hint for it
  (the masked window that holds it). It was an internal error (StopIteration looking for that padding)."""
  from .. import errors as E
  from ..layout_hints import read_window, small_tile_hint
  shape = tuple(x.type.shape)
  window = read_window(cx.b.defs, cx.b.defining(x))
  return E.LayoutError(
      f"{x.name or 'this tensor'} has shape {shape}: register tensors need a multiple of {hw.WARPGROUP} elements (one"
      f" per thread of a warpgroup)", cx.loc, hint=small_tile_hint(shape, window[0] if window else None, window))
