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

from . import errors as E, layout_memo
from . import hw
from . import ir
from .ir import LayoutRule
from .ops.control import WarpSpecialize
from .ops.gather import ScatterUpdate
from .ops.memory import ClusterRef, View
from .ops.shape import Reduce
from .windows import minor_strided, register_tile_window, window_vec
from .layout_errors import LayoutErrors, _is_tensor
from .swizzles import Swizzles, UnionFind as _UnionFind
from .layout_tiles import TileRules, _vector_layout
from .layout_hints import strided_window_hint
from .types import Layout, LayoutKind, RefType, Space



@dataclasses.dataclass(frozen=True)
class SmemLayout:
  tile: tuple[int, int]     # (8, 128 // itemsize)
  swizzle: int              # bytes




class _Solver(TileRules, LayoutErrors, Swizzles):
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
