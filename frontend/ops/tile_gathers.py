"""Gathers and scatters of whole rows of a 2-D ref at a 2-D tile of row indices, (t, k, d) values (probe 51d):
`y[pos, :]` of an MoE's (tokens, top-k) slots, `table[ids]` of an embedding bag's (batch, bag) ids, and Triton's
grid of them, `t.at[b[:, :, None], c[None, None, :]]`; `out[pos, :] = v` (an MoE's permutation, each token's row
into its k slots) and the atomic ones. A gather's or scatter's index grids give 1-D and 2-D results (gather._plan,
MG204 otherwise); these are the gather (scatter) of the tile's t * k indices (the grid with its two leading axes
merged), the values, mask and old values reshaped between (t, k, d) and (t * k, d), as jnp's, which the layout pass
takes as any 3-D reshape."""
from __future__ import annotations

import math

from ..types import resolve
from .base import is_tensor
from .memory import DSlice
from .shape import broadcast_to_shape, reshape_


def tile_gather(cx, ref, index, gather):
  """`ref[index]` read through `gather` with the tile's axes merged, reshaped to (t, k, ...); None where `index` is
  no such index."""
  tile = _rows_of_a_tile(ref, index)
  if tile is not None:     # y[p, :]: the rows of p flattened, then (t, k, d)
    ids, rest = tile
    out = gather(cx, ref, (reshape_(cx, ids, (math.prod(ids.type.shape),)),) + rest)
    return reshape_(cx, out, tuple(ids.type.shape) + tuple(out.type.shape[1:]))
  lead = _merged_grid(ref, index)
  if lead is not None:     # y[p[:, :, None], c[None, None, :]]: the grid with its two leading axes merged
    out = gather(cx, ref, tuple(reshape_(cx, i, (math.prod(i.type.shape[:2]), i.type.shape[2])) for i in index))
    return reshape_(cx, out, lead + tuple(out.type.shape[1:]))
  return None


def tile_scatter(cx, kind, iref, value, mask, what, cmp, scatter):
  """(the result of) `scatter` of `iref` with the tile's axes merged, the value, mask and cmp of (t, k, ...) reshaped
  to (t * k, ...) and old values back; None where `iref.index` is no such index."""
  ref, index = iref.ref, iref.index
  tile = _rows_of_a_tile(ref, index)
  lead = tuple(tile[0].type.shape) if tile is not None else _merged_grid(ref, index)
  if lead is None:
    return None
  if tile is not None:
    ids, rest = tile
    r = rest[0]
    width = r.size if isinstance(r, DSlice) else len(range(*r.indices(ref.type.shape[1])))
    shape = lead + (width,)
  else:
    shape = lead + (max(i.type.shape[2] for i in index),)
  if not all(v is None or not is_tensor(v) or _broadcasts(v.type.shape, shape) for v in (value, mask, cmp)):
    return None             # (values of another shape, `v` of (t, d) for (t, k, d): the scatter's MG204 and hint)
  if tile is not None:
    flat = (reshape_(cx, ids, (math.prod(lead),)),) + rest
  else:
    flat = tuple(reshape_(cx, i, (math.prod(i.type.shape[:2]), i.type.shape[2])) for i in index)

  def merged(v):
    if not is_tensor(v):
      return v              # (a number or a scalar: the scatter fills it)
    v = broadcast_to_shape(cx, v, shape) if tuple(v.type.shape) != shape else v
    return reshape_(cx, v, (math.prod(shape[:2]),) + tuple(shape[2:]))
  value = merged(value)
  mask, cmp = (None if m is None else merged(m) for m in (mask, cmp))
  from .gather import IndexedRef
  out = scatter(cx, kind, IndexedRef(ref, flat), value, mask=mask, what=what, cmp=cmp)
  return (out if out is None else reshape_(cx, out, shape),)


def _broadcasts(have, want) -> bool:
  """Whether NumPy broadcasts `have` to `want`."""
  have = (1,) * (len(want) - len(have)) + tuple(have)
  return len(have) == len(want) and all(a in (1, b) for a, b in zip(have, want))


def _rows_of_a_tile(ref, index):
  """(the index tile, the other items) of `y[p, :]` (or `y[p]`, `y[p, ml.ds(s, n)]`) where `p` is a 2-D integer tile
  and `y` a 2-D GMEM ref: whole rows at each of p's indices, a (t, k, d) result, as jnp's (an MoE's top-k outputs of
  each token, `y[pos, :]` of its (t, k) slots; probe 51d), read as the gather of p's t * k indices reshaped. None
  for any other index."""
  items = index if isinstance(index, tuple) else (index,)
  items = tuple(slice(None) if i is Ellipsis else i for i in items)
  if len(ref.type.shape) != 2 or not items or len(items) > 2 or not is_tensor(items[0]) or len(
      items[0].type.shape) != 2 or not getattr(resolve(items[0].type.dtype), "is_int", False):
    return None
  rest = items[1:] or (slice(None),)
  if not (isinstance(rest[0], DSlice) or isinstance(rest[0], slice) and rest[0].step in (None, 1)):
    return None
  return items[0], rest


def _merged_grid(ref, index):
  """The (t, k) leading axes of Triton's grid of a 2-D ref at a 2-D tile of row indices, `y[p[:, :, None],
  c[None, None, :]]` (index tensors of rank 3 whose two leading axes are each (t, k) or (1, 1)), which the gather
  of the grid with those axes merged, reshaped back, reads (probe 51d); None for any other index."""
  items = index if isinstance(index, tuple) else (index,)
  if len(ref.type.shape) != 2 or len(items) != 2 or not all(
      is_tensor(i) and len(i.type.shape) == 3 and getattr(resolve(i.type.dtype), "is_int", False) for i in items):
    return None
  leads = {tuple(i.type.shape[:2]) for i in items} - {(1, 1)}
  if len(leads) != 1 or 1 in next(iter(leads)):
    return None
  return next(iter(leads))
