"""Register layouts and SMEM tilings, chosen by the compiler from how values are used.

Register tensors that meet in one operation must share a layout. Values are
grouped (union-find) through elementwise ops, loop carries, branches and the
SMEM buffers they are loaded from or stored to; a group holding a tensor-core
result (ml.dot) or touching a buffer the tensor cores read takes the WGMMA
layout, every other group the strided layout.

SMEM buffers a dot reads are tiled (8 rows x 128 bytes) and 128-byte swizzled,
as WGMMA requires; so are buffers only ever written and read in the WGMMA
layout when their shape allows, which makes the epilogue's register -> SMEM
stores conflict-free.
"""
from __future__ import annotations

import dataclasses
import math

from . import errors as E
from . import ir
from .types import Layout, RefType, Space, TensorType

SWIZZLE = 128   # bytes


@dataclasses.dataclass(frozen=True)
class SmemLayout:
  tile: tuple[int, int]     # (8, 128 // itemsize)
  swizzle: int              # bytes


def _is_tensor(x) -> bool:
  return isinstance(x, ir.Value) and isinstance(x.type, TensorType)


class _UnionFind:
  def __init__(self):
    self.parent = {}

  def find(self, x):
    self.parent.setdefault(x, x)
    while self.parent[x] != x:
      self.parent[x] = self.parent[self.parent[x]]
      x = self.parent[x]
    return x

  def union(self, a, b):
    self.parent[self.find(a)] = self.find(b)


def assign_layouts(kernel: ir.Kernel, defs) -> None:
  uf = _UnionFind()
  tensors: dict[int, ir.Value] = {}
  first_use: dict[int, ir.Op] = {}

  def root(ref):
    d = defs.get(ref.id)
    return d.ref if isinstance(d, ir.View) else ref

  def node(v):
    if isinstance(v, ir.Value) and isinstance(v.type, TensorType):
      tensors[v.id] = v
      return ("v", v.id)
    return None

  def join(*vals):
    nodes = [n for n in map(node, vals) if n is not None]
    for n in nodes[1:]:
      uf.union(n, nodes[0])

  seeds, mma_roots = set(), set()
  broadcasts = []   # (vector operand, the op's 2-D result): the vector runs along the columns
  for o in ir.walk(kernel.body):
    for r in o.results:
      first_use.setdefault(r.id, o)
    if isinstance(o, (ir.Binary, ir.Compare)):
      shape = o.result.type.shape
      full = [x for x in (o.lhs, o.rhs) if not _is_tensor(x) or x.type.shape == shape]
      for x in (o.lhs, o.rhs):
        if _is_tensor(x) and x.type.shape != shape:
          node(x)
          broadcasts.append((x, o))
      join(o.result, *full)
    elif isinstance(o, ir.Where):
      join(o.result, o.cond, o.on_true, o.on_false)
    elif isinstance(o, (ir.Unary, ir.Cast)):
      join(o.result, o.x)
    elif isinstance(o, ir.Load) and isinstance(o.ref.type, RefType):
      node(o.result)
      if o.ref.type.space == Space.SMEM and not o.ref.type.remote:
        uf.union(("v", o.result.id), ("smem", root(o.ref).id))
    elif isinstance(o, ir.Store):
      node(o.value)
      if o.ref.type.space == Space.SMEM and not o.ref.type.remote:
        uf.union(("v", o.value.id), ("smem", root(o.ref).id))
    elif isinstance(o, ir.Dot):
      join(o.result, o.acc)
      seeds.add(("v", o.result.id))
      mma_roots |= {root(o.a).id, root(o.b).id}
    elif isinstance(o, ir.For):
      for init, arg, res, y in zip(o.inits, o.body.args[1:], o.results, o.body.ops[-1].values):
        join(init, arg, res, y)
    elif isinstance(o, ir.If):
      for res, a, b in zip(o.results, o.then_block.ops[-1].values, o.else_block.ops[-1].values):
        join(res, a, b)
    else:
      for r in o.results:
        node(r)
  for r in mma_roots:
    seeds.add(("smem", r))
  wgmma = {uf.find(s) for s in seeds}

  col = set()
  for vec, o in broadcasts:
    if uf.find(("v", o.result.id)) not in wgmma:
      raise E.LayoutError(
          f"broadcasting {vec.name or 'a vector'} {vec.type.shape} across the rows of a"
          f" {o.result.type.shape} tile works on tensor-core (ml.dot) tiles only, for now", o.loc,
          hint="add the vector to an ml.dot result, e.g. acc + bias_vec")
    col.add(uf.find(("v", vec.id)))
  for v in tensors.values():
    cls = uf.find(("v", v.id))
    if cls in col:
      if cls in wgmma or len(v.type.shape) != 1 or v.type.shape[0] % 8:
        o = first_use.get(v.id)
        raise E.LayoutError(
            f"{v.name or 'this tensor'} {v.type.shape} is used both as a column vector and as a"
            f" tile", o.loc if o else kernel.loc, hint="keep the bias-like vector separate")
      if isinstance(first_use.get(v.id), ir.Arange):
        raise E.LayoutError("ml.arange cannot be broadcast across a tensor-core tile yet",
                            first_use[v.id].loc)
      v.type = dataclasses.replace(v.type, layout=Layout.COL)
      continue
    if cls not in wgmma and math.prod(v.type.shape) % 128:
      o = first_use.get(v.id)
      raise E.LayoutError(
          f"{v.name or 'this tensor'} has shape {v.type.shape}: register tensors need a multiple of"
          f" 128 elements (one per thread of a warpgroup)", o.loc if o else kernel.loc,
          hint="work on larger tiles, e.g. (128,) or (8, 16)")
    if cls in wgmma:
      t = v.type
      rows = 64 * (kernel.block // 128)    # warpgroups split the rows
      if len(t.shape) != 2 or t.shape[0] % rows or t.shape[1] % 8:
        o = first_use.get(v.id)
        raise E.LayoutError(
            f"{v.name or 'this tensor'} of shape {t.shape} meets a tensor-core result, so it must be"
            f" 2-D with rows a multiple of {rows} (64 per warpgroup) and columns a multiple of 8",
            o.loc if o else kernel.loc,
            hint="keep values that combine with ml.dot results in the dot's (m, n) tile shape"
                 + (", or use fewer warpgroups (block=)" if rows > 64 else ""))
      if isinstance(first_use.get(v.id), ir.Arange):
        raise E.LayoutError("ml.arange cannot combine with a tensor-core result yet",
                            first_use[v.id].loc)
      v.type = dataclasses.replace(t, layout=Layout.WGMMA)

  for alloc in kernel.smem:
    in_wgmma = uf.find(("smem", alloc.id)) in wgmma   # (column vectors stay untiled)
    rows, cols = (alloc.type.shape[-2:] + (0,))[:2] if len(alloc.type.shape) >= 2 else (0, 0)
    tile_cols = SWIZZLE // alloc.type.dtype.itemsize
    fits = len(alloc.type.shape) >= 2 and rows % 8 == 0 and cols % tile_cols == 0
    if alloc.id in mma_roots and not fits:
      raise E.MmaOperandError(
          f"{alloc.name} ({alloc.type.shape}) cannot be tiled for the tensor cores: it needs rows a"
          f" multiple of 8 and columns a multiple of {tile_cols}", kernel.loc)
    if alloc.id in mma_roots or (in_wgmma and fits):
      kernel.smem_layouts[alloc.id] = SmemLayout((8, tile_cols), SWIZZLE)
  _check_tiled_views(kernel, defs)
  _check_tiled_copies(kernel, defs)


def _check_tiled_copies(kernel, defs) -> None:
  """TMA copies of tiled buffers copy whole (8, 128-byte) tiles of the GMEM array.

  Mosaic GPU tiles the GMEM array the same way (TileTransform), so its last two
  dimensions must be multiples of the tile (or smaller than it), and a window must
  start on a tile boundary: a window starting inside a tile reads zeros silently.
  """
  def root(v):
    d = defs.get(v.id)
    return (d.ref, d.index) if isinstance(d, ir.View) else (v, None)

  for o in ir.walk(kernel.body):
    if not isinstance(o, ir.Copy):
      continue
    smem, gmem = (o.dst, o.src) if o.dst.type.space == Space.SMEM else (o.src, o.dst)
    layout = kernel.smem_layouts.get(root(smem)[0].id)
    if layout is None or gmem.type.space != Space.GMEM:
      continue
    array, index = root(gmem)
    shape = array.type.shape
    tiles = f"({layout.tile[0]}, {layout.tile[1]})"
    for d, t in zip(range(len(shape) - 2, len(shape)), layout.tile):
      if shape[d] > t and shape[d] % t:
        raise E.TmaLimitError(
            f"{root(smem)[0].name} is tiled {tiles} for the tensor cores, so TMA copies whole tiles"
            f" of {array.name}; {array.name}'s dimension {d} ({shape[d]}) must then be a multiple"
            f" of {t}", o.loc, hint=f"pad {array.name} to a multiple of {tiles} in its last two dimensions")
      start = index[d].start if index is not None else 0
      if isinstance(start, int) and start % t:
        raise E.TmaLimitError(
            f"{root(smem)[0].name} is tiled {tiles} for the tensor cores, so TMA copies whole tiles of"
            f" {array.name}; this window starts at {start} in dimension {d}, inside a tile", o.loc,
            hint=f"start windows at multiples of {t} in that dimension")


def _check_tiled_views(kernel, defs) -> None:
  """Views of tiled buffers may only pick whole leading slices (pipeline stages)."""
  for o in ir.walk(kernel.body):
    if isinstance(o, ir.View) and o.ref.id in kernel.smem_layouts:
      full = o.ref.type.shape
      inner = o.index[-2:]
      if any(i.squeeze or i.size != n or i.start != 0 for i, n in zip(inner, full[-2:])):
        raise E.LayoutError(
            f"{o.result.name or 'this view'} slices the rows or columns of {o.ref.name}, which is tiled"
            f" for the tensor cores", o.loc,
            hint="index only the leading (stage) dimensions of a buffer ml.dot reads")
