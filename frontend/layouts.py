"""Register layouts and SMEM tilings, chosen by the compiler from how values are used.

Each op declares its layout rule (`ir.LayoutRule`); this pass reads only those.
Register tensors that meet in an elementwise op share a layout: values are grouped
(union-find) through elementwise ops, reshapes, loop carries, branches and the SMEM
buffers they are loaded from or stored to. Reductions and broadcasts relate a
group of vectors to a group of 2-D tiles: the vectors take the tile's layout with
the reduced or broadcast axis dropped (Mosaic GPU's `TiledLayout.reduce`), so a
row statistic is reduced and broadcast back without moving data.

A group's layout:
* WGMMA if it holds a tensor-core result (ml.dot) or touches a buffer the tensor
  cores read;
* ROWS if it is the tile of a reduction or a broadcast: each warp owns whole rows
  (or a quarter, half of one for short tiles), lanes run along the columns with
  16-byte vectors, so row reductions need no SMEM;
* STRIDED otherwise: contiguous 16-byte vectors over the flattened tensor. With several
  warpgroups (block=256 or more), a STRIDED group that only ops declaring `splits` touch
  (loads, stores, elementwise math, full reductions, loop carries) is split by its
  leading axis: each warpgroup holds and computes its own rows (Layout.wgs), instead of
  every warpgroup computing the whole tensor.

SMEM buffers a dot reads are tiled (8 rows x 128 bytes) and 128-byte swizzled, as
WGMMA requires; so are buffers only ever written and read in the WGMMA layout when
their shape allows, which makes the epilogue's register -> SMEM stores conflict-free.
"""
from __future__ import annotations

import dataclasses
import math

from . import errors as E, layout_memo, relayout
from . import hw
from . import ir
from .ir import LayoutRule
from .ops.control import WarpSpecialize
from .ops.gather import Gather, ScatterUpdate
from .ops.memory import ClusterRef, View
from .ops.shape import READ_2D_FIRST, Broadcast, Reduce, ReduceKind, Reshape
from .ops.permute import TransposeLoad, TransposeStore
from .windows import minor_strided, register_tile_window, window_vec
from .layout_errors import LayoutErrors, _is_tensor
from .swizzles import Swizzles, UnionFind as _UnionFind
from .column_index_hints import (column_gather_hint, column_scatter_hint, gather_columns_hint, narrow_gather_hint,
                                 scatter_columns_hint)
from .layout_hints import (broadcast_loops_hint, flat_gather_error, row_wise_hint, transposed_hint, single_row_statistic,
                           strided_window_hint)
from .types import Layout, LayoutKind, RefType, Space

NARROW_LANES = hw.NARROW_LANES       # (Layout.lanes of a ROWS tile narrower than a warp)


@dataclasses.dataclass(frozen=True)
class SmemLayout:
  tile: tuple[int, int]     # (8, 128 // itemsize)
  swizzle: int              # bytes


_READ_2D = ("read it 2-D: index the size-1 axes away where you load it (x.at[i][...] rather than"
            " x.at[ml.ds(i, 1)][...] or x[...] of a (1, m, n) array)")


class _Solver(LayoutErrors, Swizzles):
  def __init__(self, kernel, defs):
    self.kernel, self.defs = kernel, defs
    self.uf = _UnionFind()
    self.tensors: dict[int, ir.Value] = {}
    self.first_use: dict[int, ir.Op] = {}
    self.seeds, self.mma_roots = set(), set()
    self.dot_bytes = []        # (roots, bytes): each dot's SMEM roots and the bytes their swizzle must divide
    self.unit_vec = set()      # nodes read from or written to windows strided in their last dimension
    self.vec_limit = {}        # node -> what its window's geometry lets one vector move (window_vec)
    self.windowed = set()      # SMEM roots moved to or from registers through windows of their rows or columns
    self.tile_windows = []     # (node, root id, view): register transfers of such windows (register_tile_window)
    self.relations = []        # (child node, parent node, dropped axes, op)
    self.nosplit = set()       # tensors an op touches whose lowering takes them whole only
    self.warp_specialized = False
    self.strided_links = []    # classes joined by size-1 axis changes only: STRIDED, one vector length
    self.rows = 64 * (kernel.block // hw.WARPGROUP)   # WGMMA rows: warpgroups split them

  # ------------------------------------------------------------ collecting constraints
  def root(self, ref):
    d = self.defs.get(ref.id)
    return d.ref if isinstance(d, View) else ref

  def node(self, v):
    if _is_tensor(v):
      self.tensors[v.id] = v
      return ("v", v.id)
    return None

  def join(self, *vals):
    nodes = [n for n in map(self.node, vals) if n is not None]
    for n in nodes[1:]:
      self.uf.union(n, nodes[0])

  def _read_from(self, v) -> str | None:
    """The name of the ref `v` was loaded from (a plain or masked register load), else None."""
    d = self.defs.get(v.id)
    if d is None or type(d).__name__ not in ("Load", "MaskedLoad"):
      return None
    name = self.root(d.ref).name
    return name if (name or "").isidentifier() else None

  def smem_root(self, ref):
    """The SMEM buffer under a view and a peer's copy of it (ml.cluster_ref), or None."""
    d = self.defs.get(ref.id)
    while isinstance(d, (View, ClusterRef)):
      ref = d.ref
      d = self.defs.get(ref.id)
    t = ref.type
    return ref if isinstance(t, RefType) and t.space == Space.SMEM else None

  def window_of_tiles(self, ref) -> bool:
    """Whether `ref` is a window of its SMEM root's rows or columns (not only of its leading,
    stage, dimensions)."""
    root = self.smem_root(ref)
    d = self.defs.get(ref.id)
    if root is None or not isinstance(d, View) or not root.type.shape:
      return False
    return any(i.squeeze or i.start != 0 or i.size != n for i, n in zip(d.index[-2:], root.type.shape[-2:]))

  def local_smem(self, ref):
    t = ref.type
    return isinstance(t, RefType) and t.space == Space.SMEM and not t.remote

  def collect(self, memo=None):
    """Every op's constraints; with `memo` (layout_memo.py), each op's once, replayed while it stays in the kernel."""
    for o in ir.walk(self.kernel.body):
      if memo is None:
        self.collect_op(o)
      else:
        layout_memo.collect_op(self, o, memo)

  def collect_op(self, o):
    """One op's constraints (the solver's state it adds to)."""
    for r in o.results:
      self.first_use.setdefault(r.id, o)
    for v in o.operands():
      self.first_use.setdefault(v.id, o)
    rule = ir.traits_of(o).layout
    handler = _RULES.get(rule)
    if handler is None:
      raise E.InternalError(f"the layout pass has no rule {rule} (op {type(o).__name__})", o.loc)
    handler(self, o)
    if type(o).__name__ == "Slice" and o.x.type.shape[0] % 64 == 0 and o.x.type.shape[1] % hw.MMA_N_STEP == 0:
      self.seeds.add(self.node(o.x))   # column slices exist in the tensor-core layout only (not only a dot's A's)
    self.note_split(o)
    for ref, access in ir.traits_of(o).effects(o):
      if access in (ir.Access.REG_READ, ir.Access.REG_WRITE) and not any(map(_is_tensor, o.results)) \
          and self.window_of_tiles(ref):
        self.windowed.add(self.smem_root(ref).id)     # an element read or written (t[i, j]): untiled
    if isinstance(o, ScatterUpdate) and self.smem_root(o.ref) is not None:
      self.windowed.add(self.smem_root(o.ref).id)     # an atomic scatter's `red` at each element's own address

  def note_split(self, o):
    """Record the tensors of `o` that must stay whole in every warpgroup (Layout.wgs)."""
    self.warp_specialized |= isinstance(o, WarpSpecialize)
    whole = not ir.traits_of(o).splits or (isinstance(o, Reduce) and o.results and _is_tensor(o.result))
    if whole:
      self.nosplit |= {v.id for v in [*o.results, *o.operands()] if _is_tensor(v)}

  def _none(self, o):
    for r in o.results:
      self.node(r)

  def _elementwise(self, o):
    self.join(*o.results, *[v for v in o.operands() if _is_tensor(v)])

  def _fresh(self, o):
    for r in o.results:
      self.node(r)

  def _memory(self, o):
    (ref, _), = [(r, a) for r, a in ir.traits_of(o).effects(o)]
    self.join(*[v for v in [*o.results, *o.operands()] if _is_tensor(v)])   # value, mask, result
    strided = minor_strided(self.defs, ref)
    limit = 1 if strided else window_vec(self.defs, ref)
    for v in [*o.results, *o.operands()]:
      if _is_tensor(v):
        self.node(v)
        if limit is not None:
          self.vec_limit[("v", v.id)] = min(limit, self.vec_limit.get(("v", v.id), limit))
        if strided:
          self.unit_vec.add(("v", v.id))
        if self.window_of_tiles(ref):
          # A window of rows or columns moves in its own layout; its buffer stays untiled
          # (a tiled buffer's rows are not where a plain window reads them).
          self.windowed.add(self.smem_root(ref).id)
          d = self.defs.get(ref.id)
          if self.local_smem(ref) and d.ref is self.smem_root(ref):
            self.tile_windows.append((("v", v.id), d.ref, d))
        elif self.local_smem(ref) and len(self.root(ref).type.shape) >= 2 and not self.own_slice(ref, v):
          # (only a 2-D buffer may be tiled for the tensor cores: a vector's transfers each take
          # their own layout, so a row statistic stored may be read back as a column vector)
          self.uf.union(("v", v.id), ("smem", self.root(ref).id))

  def own_slice(self, ref, v) -> bool:
    """Whether `v` is a slice of fewer axes of a compiler scratch of 3 or more (`w = v[1]` of a (4, 8, 64) tile,
    through SMEM): it takes its own layout, a row-wise one where it is reduced, which the 3-D tile stored cannot."""
    root = self.root(ref)
    return (len(root.type.shape) >= 3 and len(v.type.shape) < len(root.type.shape)
            and root.id in getattr(self.kernel, "transient_ids", ()))

  def _dot(self, o):
    self.join(o.result, o.acc)
    self.seeds.add(("v", o.result.id))
    if _is_tensor(o.a):                 # A from registers: the WGMMA layout
      self.seeds.add(self.node(o.a))
    for v in o.operands():
      if isinstance(v.type, RefType):
        self.mma_roots.add(self.root(v).id)
    # the swizzle the dot's buffers share divides k's bytes and, for a B stored (k, n), n's (the minor
    # dimensions WGMMA steps through: mma_utils's tiling)
    size = o.b.type.dtype.itemsize
    k, n = o.b.type.shape
    self.dot_bytes.append(([self.root(v).id for v in (o.a, o.b) if isinstance(v.type, RefType)],
                           [k * size] + ([] if o.b.type.transposed else [n * size])))

  def _reduce(self, o):
    self.node(o.x)
    if o.results and _is_tensor(o.result):
      self.node(o.result)
      self.relations.append((("v", o.result.id), ("v", o.x.id), o.axes, o))

  def _broadcast(self, o):
    self.node(o.x)
    self.node(o.result)
    out, x = o.result.type.shape, o.x.type.shape
    axes = tuple(a for a in range(len(out)) if a not in o.dims) + tuple(
        d for n, d in zip(x, o.dims) if n == 1 and out[d] != 1)
    self.relations.append((("v", o.x.id), ("v", o.result.id), tuple(sorted(axes)), o))

  def _region(self, o):
    if o.regions == ("before", "body"):   # a while loop: both blocks' args and terminators too
      cond_vals = o.before.ops[-1].values
      for init, a, c, b, res, y in zip(o.inits, o.before.args, cond_vals, o.body.args, o.results,
                                       o.body.ops[-1].values):
        self.join(init, a, c, b, res, y)
    elif o.regions == ("body",):          # a loop: inits, body args, results and yields
      body = o.body
      for init, arg, res, y in zip(o.inits, body.args[1:], o.results, body.ops[-1].values):
        self.join(init, arg, res, y)
    else:                               # a branch: results and both yields
      yields = [getattr(o, r).ops[-1].values for r in o.regions]
      for res, *ys in zip(o.results, *yields):
        self.join(res, *ys)

  # ------------------------------------------------------------ deciding
  def solve(self):
    for r in self.mma_roots:
      self.seeds.add(("smem", r))
    from .absint import known_multiple, loop_counters
    loops = loop_counters(self.kernel.body) if self.tile_windows else {}
    swizzles = self.swizzles() if self.tile_windows else {}
    for n, root, view in self.tile_windows:     # whole tiles of a tensor-core operand: its layout
      # (the buffer's own tile: a narrower swizzle's where its rows are not 128 bytes, the (64, 96)
      # float16 im2col buffer of three 32-channel taps, whose tiles are 32 columns; probe 46h)
      swizzle = swizzles.get(root.id, hw.SWIZZLE)
      tile = (hw.TILE_ROWS, hw.tile_cols(root.type.dtype.itemsize, swizzle))
      if root.id in self.mma_roots and len(root.type.shape) == 2 and register_tile_window(
          view, tile, lambda x: known_multiple(x, self.defs, loops)):
        self.uf.union(n, ("smem", root.id))
    uf = self.uf
    layout: dict = {uf.find(s): Layout.WGMMA for s in self.seeds}
    rels = [(uf.find(c), uf.find(p), axes, o) for c, p, axes, o in self.relations]
    members: dict = {}
    for v in self.tensors.values():
      members.setdefault(uf.find(("v", v.id)), []).append(v)
    layout.update(self.whole_operand_tiles(members))

    def propagate():
      changed = True
      while changed:
        changed = False
        for c, p, axes, o in rels:
          if p in layout:
            want = layout[p].dropped(axes)
            if c not in layout:
              layout[c] = want
              changed = True
            elif layout[c] != want:
              self.conflict(c, p, axes, o, layout, members)
          elif c in layout and layout[c].drop:
            # The tile itself, unless the parent is a vector with size-1 axes added (v[:, None]).
            shapes = [v.type.shape for v in members.get(p, [])]
            vector = shapes and all(len(sh) == 2 and all(sh[a] == 1 for a in axes) for sh in shapes)
            layout[p] = layout[c].tile.dropped(axes) if vector else self.tile_of(layout[c], shapes)
            changed = True

    propagate()
    tiles = self.tile_classes(rels, members)
    for c, p, axes, o in rels:          # undecided tiles of reductions and broadcasts: ROWS
      if p not in layout and p in tiles:
        layout[p] = self.rows_layout(p, rels, members, o, tiles)
        propagate()
    for c, p, axes, o in rels:          # what no tile decided (vectors broadcast among themselves)
      if p not in layout and not self.unit_axes_only(p, rels, members, layout, tiles):
        vector = self.unit_axes_vector(p, rels, members, layout, tiles)
        for q in vector or (p,):
          layout[q] = vector[q] if vector else self.rows_layout(p, rels, members, o, tiles | {p})
        propagate()
    for p, vs in members.items():       # alone: an (n, 1) column loaded and stored, a transpose's (1, n)
      if p not in layout and any(math.prod(v.type.shape) % hw.WARPGROUP for v in vs) and (
          vector := self.unit_axes_vector(p, rels, members, layout, tiles)):
        layout.update(vector)
        propagate()
    self.layout = layout
    self.members = members

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

  # ------------------------------------------------------------ applying
  def apply(self):
    uf, layout = self.uf, self.layout
    strided_vec: dict = {}
    for v in self.tensors.values():
      cls = uf.find(("v", v.id))
      if cls not in layout:
        d = v.type.dtype
        n = math.prod(v.type.shape)
        vec = 16 // d.itemsize if d.bits >= 8 else 16
        while vec > 1 and n % (hw.WARPGROUP * vec):
          vec //= 2
        strided_vec[cls] = min(strided_vec.get(cls, vec), vec)
    unit = {uf.find(u) for u in self.unit_vec}    # classes moved to or from minor-strided windows
    for cls in unit & strided_vec.keys():
      strided_vec[cls] = 1
    for node, limit in self.vec_limit.items():    # windows whose rows or start break longer vectors
      cls = uf.find(node)
      if cls in strided_vec:
        while strided_vec[cls] > 1 and limit % strided_vec[cls]:
          strided_vec[cls] //= 2
    for comp in self.strided_links:      # reshaped into each other: one vector length
      vec = min(strided_vec.get(c, 16) for c in comp)
      for c in comp:
        if c in strided_vec:
          strided_vec[c] = vec
    for cls in list(strided_vec):        # short vectors: a column vector of a tile, held by the lanes
      vs = [v for v in self.members.get(cls, [])]
      short = vs and all(len(v.type.shape) == 1 for v in vs) and any(v.type.shape[0] % hw.WARPGROUP for v in vs)
      if short and cls in unit:          # that layout moves vectors of elements side by side
        short_vs = [v for v in vs if v.type.shape[0] % hw.WARPGROUP]   # blame the one the window moves
        v = next((v for v in short_vs if ("v", v.id) in self.unit_vec), short_vs[0])
        where = self.first_use.get(v.id)
        raise E.LayoutError(
            f"{v.name or 'this vector'} of shape {v.type.shape} comes from or goes to a window strided in"
            f" its last dimension (its elements are not next to each other), and such a window moves a"
            f" multiple of {hw.WARPGROUP} elements, one per thread", where.loc if where else self.kernel.loc,
            hint=strided_window_hint(v, sorted(vs, key=lambda u: ("v", u.id) not in self.unit_vec), self.defs))
      if short:
        lay = _vector_layout({v.type.shape[0] for v in vs}, [v.type.dtype for v in vs])
        if lay is not None:
          layout[cls] = lay
    split = self.split_classes(strided_vec)
    lays = [(v, layout.get(c) or split.get(c) or Layout(LayoutKind.STRIDED, vec=strided_vec[c]))
            for v in self.tensors.values() for c in [uf.find(("v", v.id))]]
    self.reshaped_mma_tile(layout)
    for v, lay in lays:     # every check before any tensor takes its layout (relayout.py may solve again)
      self.check(v, lay)
    for v, lay in lays: v.type = dataclasses.replace(v.type, layout=lay)

  def split_classes(self, strided_vec) -> dict:
    """STRIDED layouts split among the warpgroups, for the strided classes that allow it:
    every member's leading axis divides among them into parts of a multiple of 128 elements
    and only ops declaring `splits` touch it (a warp-specialised kernel splits nothing)."""
    wgs = self.kernel.block // hw.WARPGROUP
    out = {}
    if wgs == 1 or self.warp_specialized:
      return out
    for cls, vec in strided_vec.items():
      if cls in self.layout:
        continue
      vs = self.members.get(cls, [])
      if not vs or any(v.id in self.nosplit or not v.type.shape or v.type.shape[0] % wgs for v in vs):
        continue
      local = [math.prod(v.type.shape) // wgs for v in vs]
      if any(n % hw.WARPGROUP for n in local):
        continue
      while vec > 1 and any(n % (hw.WARPGROUP * vec) for n in local):
        vec //= 2
      out[cls] = Layout(LayoutKind.STRIDED, vec=vec, wgs=wgs)
    return out

  def smem_tilings(self):
    from .layout_checks import copies_take_tiles
    swizzles = self.swizzles()
    for alloc in self.kernel.smem:
      lay = self.layout.get(self.uf.find(("smem", alloc.id)))
      in_wgmma = lay is not None and lay.kind == LayoutKind.WGMMA and not lay.drop
      shape = alloc.type.shape
      rows, cols = (shape[-2:] + (0,))[:2] if len(shape) >= 2 else (0, 0)
      swizzle = swizzles.get(alloc.id, hw.SWIZZLE)
      tile_cols = hw.tile_cols(alloc.type.dtype.itemsize, swizzle)
      fits = len(shape) >= 2 and rows % hw.TILE_ROWS == 0 and cols % tile_cols == 0
      if alloc.id in self.mma_roots and not fits:
        raise E.MmaOperandError(
            f"{alloc.name} ({shape}) cannot be tiled for the tensor cores: it needs rows a"
            f" multiple of {hw.TILE_ROWS} and columns a multiple of {tile_cols}", self.kernel.loc,
            hint=f"allocate it with a shape like (64, {tile_cols})")
      if alloc.id in self.mma_roots or (in_wgmma and fits and alloc.id not in self.windowed
                                        and copies_take_tiles(self, alloc, (hw.TILE_ROWS, tile_cols))):
        self.kernel.smem_layouts[alloc.id] = SmemLayout((hw.TILE_ROWS, tile_cols), swizzle)


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


_RULES = {
    LayoutRule.NONE: _Solver._none,
    LayoutRule.ELEMENTWISE: _Solver._elementwise,
    LayoutRule.FRESH: _Solver._fresh,
    LayoutRule.MEMORY: _Solver._memory,
    LayoutRule.DOT: _Solver._dot,
    LayoutRule.REDUCE: _Solver._reduce,
    LayoutRule.BROADCAST: _Solver._broadcast,
    LayoutRule.REGION: _Solver._region,
}


def assign_layouts(kernel: ir.Kernel, defs, memo=None) -> None:
  """Every register tensor's layout and the tensor-core buffers' tilings; `memo`: a dict kept across the solves of
  one kernel (relayout.py's), in which each op's constraints are collected once."""
  s = _Solver(kernel, defs)
  s.collect(memo)
  s.solve()
  s.apply()
  s.smem_tilings()
