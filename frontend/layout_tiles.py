"""The tile rules of the layout solver: which register layout a group of tiles takes from the reductions and
broadcasts that relate it to vectors (ROWS parameters, a tensor-core tile's row and column vectors, size-1 axes),
and the errors where no layout serves (frontend/layouts.py's _Solver mixes this in)."""
from __future__ import annotations

import dataclasses
import math

from . import errors as E, hw, ir, relayout
from .ops.gather import Gather, ScatterUpdate
from .ops.shape import READ_2D_FIRST, Broadcast, Reduce, ReduceKind, Reshape
from .ops.permute import TransposeLoad, TransposeStore
from .column_index_hints import (column_gather_hint, column_scatter_hint, gather_columns_hint, narrow_gather_hint,
                                 scatter_columns_hint)
from .layout_hints import (broadcast_loops_hint, flat_gather_error, row_wise_hint, transposed_hint, single_row_statistic)
from .types import Layout, LayoutKind

NARROW_LANES = hw.NARROW_LANES       # (Layout.lanes of a ROWS tile narrower than a warp)

_READ_2D = ("read it 2-D: index the size-1 axes away where you load it (x.at[i][...] rather than"
            " x.at[ml.ds(i, 1)][...] or x[...] of a (1, m, n) array)")


class TileRules:
  """Mixed into the solver: reads its union-find (`uf`), groups and tensors."""

  def tile_of(self, vec: Layout, shapes) -> Layout:
    """The layout of a tile that a vector of layout `vec` is a row or column vector of. A tensor-core
    column vector is every warpgroup's whole, so a tile of it whose rows the warpgroups cannot split
    (`bias[None, :] + ml.zeros((64, n))`, or a 64-row tile reduced along its rows, at block=256) is
    held whole by every warpgroup, as a 64-row B tile is (was MG204, 'rows a multiple of 128')."""
    tile = vec.tile
    if (tile.kind == LayoutKind.WGMMA and 0 in vec.drop and self.rows > 64 and shapes
        and all(len(sh) == 2 and sh[0] % 64 == 0 for sh in shapes) and any(sh[0] % self.rows for sh in shapes)):
      return dataclasses.replace(tile, whole=True)
    return tile

  def whole_operand_tiles(self, members) -> dict:
    """Classes of tiles moved between registers and a buffer ml.dot reads, meeting no dot result,
    whose rows the warpgroups cannot split (64 rows of a dequantised B tile at block=256): every
    warpgroup computes and stores the whole tile (the same values), as other register code runs."""
    if self.rows == 64:
      return {}
    dotted = {self.uf.find(s) for s in self.seeds if s[0] == "v"}
    out = {}
    for cls in dotted:     # a dot of fewer rows than the warpgroups split (64 at block=256): each computes it whole
      shapes = [v.type.shape for v in members.get(cls, [])]
      if any(len(sh) == 2 and sh[0] % self.rows for sh in shapes):
        out[cls] = Layout(LayoutKind.WGMMA, whole=True)
    for r in self.mma_roots:
      cls = self.uf.find(("smem", r))
      shapes = [v.type.shape for v in members.get(cls, [])]
      if cls not in dotted and shapes and all(len(sh) == 2 and sh[0] % 64 == 0 for sh in shapes) and any(
          sh[0] % self.rows for sh in shapes):
        out[cls] = Layout(LayoutKind.WGMMA, whole=True)
    return out

  def unit_axes_only(self, p, rels, members, layout, tiles) -> bool:
    """Whether `p` is linked only to tensors that differ from it by size-1 axes (v[:, None],
    x.reshape((n, 1)), t[:, 0] of an (n, 1) tile), none of them laid out yet, each a multiple of
    128 elements: no element moves, so they all stay STRIDED (one vector length among them,
    `strided_links`) and those ops lower to reshapes."""
    comp = self.component(p, rels)
    if comp & tiles or any(c in layout for c in comp):
      return False
    vs = [v for c in comp for v in members.get(c, [])]
    if not vs or any(math.prod(v.type.shape) % hw.WARPGROUP for v in vs):
      return False
    self.strided_links.append(comp)
    return True

  def unit_axes_vector(self, p, rels, members, layout, tiles) -> dict | None:
    """As `unit_axes_only`, for a vector whose length is not a multiple of 128 with size-1 axes added
    on one side only (`v[:, None]`, or `v[None, :]`): no element moves, so its (n, 1) classes take a
    row statistic's layout, its (1, n) ones a column vector's, as if they met a tile."""
    comp = self.component(p, rels)
    vs = [v for c in comp for v in members.get(c, [])]
    shapes = {v.type.shape for v in vs}
    longs = {tuple(n for n in s if n != 1) for s in shapes}
    if comp & tiles or any(c in layout for c in comp) or len(longs) != 1 or len(longs.pop()) != 1 or any(
        len(s) > 2 for s in shapes) or len(sides := {s.index(1) for s in shapes if len(s) == 2}) != 1:
      return None
    n = max(vs[0].type.shape)
    lay = (Layout(LayoutKind.ROWS, (1,), 1, 16 // max(v.type.dtype.itemsize for v in vs)) if sides == {1}
           else _vector_layout({n}, [v.type.dtype for v in vs]))
    if n % 8 or lay is None:      # (1, n) of a multiple of 8 but not of 32: the tensor cores' column vector
      return None
    return {c: lay for c in comp if any(len(v.type.shape) == 2 for v in members.get(c, []))}

  def component(self, start, rels):
    """The classes linked to `start` through reductions and broadcasts."""
    links = {}                # (each class's neighbours once: a scan of every relation per class was quadratic)
    for c, p, _, _ in rels:
      links.setdefault(c, []).append(p)
      links.setdefault(p, []).append(c)
    seen, todo = {start}, [start]
    while todo:
      for b in links.get(todo.pop(), ()):
        if b not in seen:
          seen.add(b)
          todo.append(b)
    return seen

  def tile_classes(self, rels, members) -> set:
    """Classes that are real 2-D tiles: parents of a reduction or broadcast with more than one
    element along its axes (not a vector with size-1 axes added, like v[:, None])."""
    out = set()
    for _, q, axes, _ in rels:
      if any(len(v.type.shape) <= max(axes, default=-1) or any(v.type.shape[a] != 1 for a in axes)
             for v in members.get(q, [])):      # (a member of another rank: joined through a reshape)
        out.add(q)
    return out

  def rows_layout(self, p, rels, members, o, tile_set) -> Layout:
    """ROWS parameters that fit every tile and vector linked to class `p`."""
    comp = self.component(p, rels)
    parents = (tile_set & comp) or {p}
    tiles, vectors, dtypes = [], [], []
    for cls in comp:
      for v in members.get(cls, []):
        dtypes.append(v.type.dtype)
        if cls in parents:
          tiles.append(v)
        else:
          vectors.append(v)
    tiles.sort(key=lambda v: v.id)        # program order: the first mistake is the one reported
    vectors.sort(key=lambda v: v.id)      # (a set's order changed from one call to the next)
    bad = next((v for v in tiles if len(v.type.shape) != 2), None)
    self.reshaped_tile(bad, tiles)      # a reshape that moves a tile's elements between rows
    if bad is not None:
      # at the reduction or broadcast that makes it a row-wise tile, not where it was first read
      cls = self.uf.find(("v", bad.id))
      where = next((r for c, q, _, r in rels if cls in (c, q)), None) or self.first_use.get(bad.id)
      spread = next((r for c, q, _, r in rels if (c in comp or q in comp) and isinstance(r, Broadcast)
                     and len([n for n in r.result.type.shape if n != 1]) >= 2 and len(r.result.type.shape) > 2
                     and math.prod(r.result.type.shape) > math.prod(r.x.type.shape)),   # it stretches
                    None)
      if spread is not None:      # NumPy broadcasting into a 3-D (or more) result
        src, dst = spread.x.type.shape, spread.result.type.shape
        raise E.LayoutError(
            f"broadcasting {spread.x.name or 'a tensor'} of shape {src} to {dst}: broadcasting works into"
            f" 1-D and 2-D tensors, not {len(dst)}-D ones (a register tile keeps its rows in fixed threads)",
            spread.loc,
            hint=broadcast_loops_hint(spread.x.name, src, dst, spread.loc, [v.type.shape for v in tiles + vectors]))
      if len([n for n in bad.type.shape if n != 1]) <= 2:    # a tile with size-1 axes around it
        raise relayout.tagged(bad, E.LayoutError(
            f"{bad.name or 'this tensor'} of shape {bad.type.shape} meets a row-wise tile (reduced or"
            f" broadcast along its rows) through its size-1 axes; tiles are 2-D from where they are"
            f" read", where.loc if where else o.loc, hint=single_row_statistic(rels, comp, self.defs) or _READ_2D))
      raise E.LayoutError(
          f"{bad.name or 'this tensor'} of shape {bad.type.shape} is reduced or broadcast along an axis;"
          f" that works on 2-D tiles (and vectors), not on {len(bad.type.shape)}-D tensors",
          where.loc if where else o.loc,
          hint=READ_2D_FIRST)
    # 16-byte accesses of the widest dtype (Mosaic GPU reduces at most 128 bits a lane across warps),
    # one element when a member moves to or from a window strided in its last dimension.
    widest = 16 // max((d.itemsize for d in dtypes), default=4)
    # A float16/bfloat16 sum runs in float32: across warps (down the columns) its lanes then hold
    # twice the bits, so such tiles take at most 4 elements a lane.
    if any(isinstance(r, Reduce) and r.kind == ReduceKind.SUM and 0 in axes and r.x.type.dtype.itemsize == 2
           and r.x.type.dtype.is_float for _, q, axes, r in rels if q in comp):
      widest = min(widest, 16 // 4)
    if any(self.uf.find(u) in comp for u in self.unit_vec):
      widest = 1
    if (found := rows_params([v.type.shape for v in tiles], widest)) is not None:
      return found
    split = self.split_statistic(rels, parents, tiles, lambda shapes: rows_params(shapes, widest) is not None)
    split = relayout.CopyResult(split) if split is not None else (
        relayout.CopyUse(two) if (two := self.two_way_use(comp)) is not None else None)
    bad = next(v for v in tiles if v.type.shape[1] % hw.WARP or v.type.shape[0] % hw.WARPS_PER_WARPGROUP
               and v.type.shape[1] % (hw.WARPGROUP))
    # at the reduction or broadcast that makes it a row-wise tile (not where the tile was read)
    cls = self.uf.find(("v", bad.id))
    linked = [r for c, q, _, r in rels if q == cls]
    where = next((r for r in linked if isinstance(r, Reduce)), None) or next(iter(linked), None) \
        or self.first_use.get(bad.id)
    ids = {v.id for v in tiles}
    if isinstance(where, Reduce) and where.x.id in ids and where.x.type.shape == bad.type.shape:
      bad = where.x                # name the tile under the caret, not another of its class
    touching = [x for x in ir.walk(self.kernel.body) if isinstance(x, (Gather, ScatterUpdate))
                and any(u.id in ids for u in [*x.operands(), *x.results])]
    indexed = next(iter(touching), None)
    if indexed is not None and len(indexed.ref.type.shape) == 1 and len(bad.type.shape) == 2:
      # a 1-D table: the 2-D indices are the user's own arithmetic (rows[:, None] * n + ids), whose
      # broadcast of a column needs the columns
      message, hint = flat_gather_error(*bad.type.shape, scatter=isinstance(indexed, ScatterUpdate))
      raise E.LayoutError(message, indexed.loc, hint=hint)
    # (the gather or scatter whose own shape breaks the rule: another one of the web, a (16, 64) A tile gathered
    # beside the (64, 2) words of B, meets it, and its shape in the message did: probe 53a)
    indexed = next((x for x in touching if any(_off_rows(r.type.shape) for r in (*x.results, *x.operands())
                                               if getattr(r, "id", None) in ids)), None)
    if indexed is not None:        # the compiler's index grids, not a broadcast the user wrote
      where, verb = indexed, "gather" if isinstance(indexed, Gather) else "scatter"
      bad = next((r for r in (*indexed.results, *indexed.operands()) if getattr(r, "id", None) in ids
                  and _off_rows(r.type.shape)), bad)
      error = E.LayoutError(
          f"this {verb} of shape {bad.type.shape} spreads each row's index along the row: that needs"
          f" columns a multiple of {hw.WARP} (one per lane of a warp), and rows a multiple of"
          f" {hw.WARPS_PER_WARPGROUP} unless the columns are a multiple of {hw.WARPGROUP}"
          + _with_others(bad.type.shape, [v.type.shape for v in tiles]), where.loc,
          hint=(column_scatter_hint if verb == "scatter" else column_gather_hint)(indexed, bad.type.shape)
          or (scatter_columns_hint if verb == "scatter" else gather_columns_hint)(indexed, bad.type.shape[-1]))
      raise relayout.tagged(split, error) if split is not None else error
    stores = {t.scratch.id: t.x for t in ir.walk(self.kernel.body) if isinstance(t, TransposeStore)}
    flip = next((stores.get(u.scratch.id) for u in ir.walk(self.kernel.body) if isinstance(u, TransposeLoad)
                 and isinstance(where, Reduce) and u.results[0].id == where.x.id), None)    # ml.sum(t.T, ...)
    narrow = next((self.kernel.narrow_gathers[v.id] for v in tiles
                   if v.id in getattr(self.kernel, "narrow_gathers", {})), None)
    cols = bad.type.shape[1]
    lanes = next(n for n in NARROW_LANES if cols % n == 0)
    narrow_rows = (f"; rows of {cols} elements need rows a multiple of {hw.WARPS_PER_WARPGROUP * hw.WARP // lanes}"
                   f" ({lanes} lane{'s' * (lanes > 1)} a row)" if cols % hw.WARP else "")
    error = E.LayoutError(
        f"{bad.name or 'this tile'} of shape {bad.type.shape} is reduced or broadcast along its rows or"
        f" columns, which needs columns a multiple of {hw.WARP} (one per lane of a warp), and rows a"
        f" multiple of {hw.WARPS_PER_WARPGROUP} unless the columns are a multiple of {hw.WARPGROUP}{narrow_rows}",
        where.loc if where else o.loc,
        hint=(narrow is not None and narrow_gather_hint(*narrow)) or (flip is not None and transposed_hint(where, flip))
        or row_wise_hint(bad, dtypes, where if isinstance(where, Reduce) else None, self.defs, tiles))
    raise relayout.tagged(split, error) if split is not None else error

  def reshaped_tile(self, bad, tiles):
    """A tensor of another rank joined a row-wise tile through a reshape (say (8, 256) ->
    (2048,) after a broadcast along the rows, or (1, 100, 256) -> (100, 256) before a
    reduction): reported at the reshape, in its own shapes."""
    ids = {v.id for v in tiles}
    ones = lambda shape: tuple(n for n in shape if n != 1)
    for o in ir.walk(self.kernel.body):
      if not isinstance(o, Reshape):
        continue
      src, dst = o.x, o.results[0]
      if not ({src.id, dst.id} & ids) or (2 == len(src.type.shape) == len(dst.type.shape)
                                          and ones(src.type.shape) == ones(dst.type.shape)):
        continue
      if ones(src.type.shape) == ones(dst.type.shape):     # only size-1 axes change
        nd = src if len(src.type.shape) != 2 else dst
        raise relayout.tagged(o, E.LayoutError(
            f"reshape of {src.name or 'a tensor'} {src.type.shape} into {dst.type.shape}: the"
            f" {len(nd.type.shape)}-D side would join a row-wise tile (reduced or broadcast along its"
            f" rows, or meeting such a tile), and tiles are 2-D from where they are read", o.loc,
            hint=_READ_2D))
      tile = src if src.id in ids and len(src.type.shape) == 2 else dst
      raise relayout.tagged(o, E.LayoutError(
          f"reshape of {src.name or 'a tensor'} {src.type.shape} into {dst.type.shape}:"
          f" {tile.name or 'the 2-D side'} is a row-wise tile here (it is reduced or broadcast along"
          f" its rows, or meets such a tile), and a tile's rows live in fixed threads, so it can only"
          f" gain or lose size-1 axes", o.loc,
          hint=READ_2D_FIRST + " (results likewise: store them through a 2-D output and reshape outside)"))


def _off_rows(shape) -> bool:
  """Whether a 2-D tile of `shape` breaks the row-wise layouts' rule: columns a multiple of a warp's lanes, and rows a
  multiple of a warpgroup's warps unless the columns are a multiple of a warpgroup's threads."""
  return len(shape) == 2 and bool(shape[1] % hw.WARP or shape[0] % hw.WARPS_PER_WARPGROUP and shape[1] % hw.WARPGROUP)


def _with_others(shape, shapes) -> str:
  """The words that say why a gather's tile of `shape` that a narrow row layout would hold alone takes the wide rule:
  the tiles of `shapes` it shares its layout with (through index vectors or masks) fit none of its narrow ones."""
  rows, cols = shape
  narrow = [n for n in hw.NARROW_LANES if cols % n == 0 and rows % (hw.WARPGROUP // n) == 0]
  others = sorted({tuple(s) for s in shapes if len(s) == 2 and tuple(s) != tuple(shape) and not any(
      s[1] % n == 0 and s[0] % (hw.WARPGROUP // n) == 0 for n in narrow)})
  if not narrow or not others:
    return ""
  n = max(narrow)
  listed = " and ".join(str(s) for s in others[:3])
  return (f" (alone, its {cols} columns take {n} lane{'s' * (n > 1)} a row, rows a multiple of {hw.WARPGROUP // n};"
          f" it shares its layout with the tile{'s' * (len(others) > 1)} {listed} it meets through index vectors or"
          f" masks, which no such layout holds)")


def rows_params(shapes, widest) -> Layout | None:
  """The ROWS layout that holds every 2-D tile of `shapes` (vectors of at most `widest` elements a lane), or None."""
  R, C = [sh[0] for sh in shapes], [sh[1] for sh in shapes]
  for k in (1, 2, 4):
    if any(r % (hw.WARPS_PER_WARPGROUP // k) for r in R):
      continue
    for vec in (widest, widest // 2, widest // 4, 2, 1):
      if vec >= 1 and all(c % (hw.WARP * k * vec) == 0 for c in C):
        return Layout(LayoutKind.ROWS, (), k, vec)
  # Narrower than a warp (a router's 8 or 16 experts; 3 channels: a row a thread): `lanes` lanes a row, 32 // lanes rows a warp.
  for vec in (widest, widest // 2, widest // 4, 2, 1):
    for lanes in NARROW_LANES:
      if vec >= 1 and all(c % (lanes * vec) == 0 for c in C) and \
          not any(r % (hw.WARPS_PER_WARPGROUP * hw.WARP // lanes) for r in R):
        return Layout(LayoutKind.ROWS, (), 1, vec, lanes=lanes)
  return None


def _vector_layout(lengths, dtypes):
  """A layout for 1-D vectors of `lengths` too short for the strided layout: one value per lane
  (the column vector of a ROWS tile, warps holding copies), or the tensor cores' column vector."""
  widest = 16 // max(d.itemsize for d in dtypes)
  for vec in (widest, widest // 2, widest // 4, 2, 1):
    if vec >= 1 and all(n % (hw.WARP * vec) == 0 for n in lengths):
      return Layout(LayoutKind.ROWS, (0,), 1, vec)
  if all(n % hw.MMA_N_STEP == 0 for n in lengths):
    return Layout.COL
  return None
