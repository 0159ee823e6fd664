"""The geometry of a window a register transfer moves: how far apart its elements are in the
root array, and so how many one vector of a Mosaic GPU strided transfer may carry; whether it is made of
whole tiles of a buffer tiled for the tensor cores."""
from __future__ import annotations

import math

from . import hw
from .ops.memory import ClusterRef, View


def view_chain(defs: dict, ref) -> list:
  """The views from `ref` back to its root, outermost first; through a peer's buffer
  (ml.cluster_ref of a view, which has the view's geometry)."""
  chain, d = [], defs.get(ref.id)
  while isinstance(d, (View, ClusterRef)):
    if isinstance(d, View):
      chain.append(d)
    d = defs.get(d.ref.id)
  return chain


def minor_strided(defs: dict, ref) -> bool:
  """Whether a window's elements are apart in its last dimension: a view that indexes its
  root's last dimension away (x.at[:, :, 0] of an (n, d, 2) array). Vectors of such a
  window would read neighbours that are not its elements: it moves one element at a time."""
  chain = view_chain(defs, ref)
  last_kept = True                    # the root's last dimension is still a dimension of the view
  for view in reversed(chain):        # from the root outwards
    if last_kept and view.index and view.index[-1].squeeze and not view.transpose:
      kept = [d for d, i in enumerate(view.index) if not i.squeeze]
      shape = view.ref.type.shape
      # x.at[:, 0] of an (n, 1) x: its elements are still next to each other (every dimension after
      # the last kept one has size 1); x.at[:, 0, 0] of an (n, d, 1) x: d apart
      if not kept or any(shape[j] != 1 for j in range(kept[-1] + 1, len(shape))):
        last_kept = False
  return not last_kept and bool(chain) and any(not i.squeeze for i in chain[0].index)


def window_vec(defs: dict, ref) -> int | None:
  """The most elements one vector of a register transfer of window `ref` may move (None: any):
  it must divide the window's last extent, the steps of its other dimensions and its static
  start in the root array (Mosaic GPU's strided transfers), as in x.at[:, 0:2] of (n, 3) rows."""
  chain = view_chain(defs, ref)
  if not chain or any(view.transpose for view in chain):
    return None
  shape = chain[-1].ref.type.shape
  steps = [math.prod(shape[i + 1:]) for i in range(len(shape))]
  dims, offset = list(zip(steps, shape)), 0
  for view in reversed(chain):        # from the root outwards
    if len(view.index) != len(dims):
      return None
    offset += sum(i.start * st for (st, _), i in zip(dims, view.index) if isinstance(i.start, int))
    dims = [(st, i.size) for (st, _), i in zip(dims, view.index) if not i.squeeze]
  dims = [(st, n) for st, n in dims if n != 1]       # size-1 axes are folded away
  if not dims:
    return None
  if dims[-1][0] != 1:
    return 1
  return math.gcd(dims[-1][1], offset, *(st for st, _ in dims[:-1]))


def whole_tiles(index, tile, multiple=None) -> bool:
  """Whether the last two entries of a view's index are windows of whole tiles: static, or (given
  `multiple`, a run-time start -> a number its every value is a multiple of) at run-time starts
  proven multiples of the tile (`a_s.at[ml.ds(ml.multiple_of(r, 64), 64)]`, `(k % stages) * 64`)."""
  def on_tile(start, t):
    if isinstance(start, int):
      return start % t == 0
    return multiple is not None and multiple(start) % t == 0
  return all(not i.squeeze and on_tile(i.start, t) and i.size % t == 0 for i, t in zip(index[-2:], tile))


def register_tile_window(view, tile, multiple=None) -> bool:
  """Whether a register load or store may move view `view` of a buffer tiled for the tensor cores, in
  the WGMMA layout (an im2col tile built tap by tap, `a_s.at[:, ml.ds(t * c, c)][...] = v`): windows of
  whole tiles, static or (given `multiple`, as whole_tiles) at run-time starts proven multiples of the
  tile (Mosaic GPU's tiled transfers take a memref sliced by whole tiles at a run-time start:
  lowering/kernel.py's _tile_slice), rows a multiple of a warpgroup's WGMMA rows, not transposed."""
  return (not view.transpose and whole_tiles(view.index, tile, multiple) and view.index[-2].size % hw.MMA_M == 0
          and not any(i.squeeze for i in view.index[-2:]))
