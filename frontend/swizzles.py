"""The swizzle of each tensor-core operand in SMEM (a mixin of the layout solver, frontend/layouts.py): the
widest that divides the minor bytes its dots step through, and (probe 46h) the columns of the register windows
an im2col tile is built of."""
from __future__ import annotations

import math

from . import hw


class UnionFind:
  """Disjoint sets (path halving): the solver's classes of values and buffers that must agree."""
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


class Swizzles:
  """Reads the solver's kernel, defs, dot_bytes, mma_roots and tile_windows."""

  def swizzles(self) -> dict:
    """Each tensor-core buffer's swizzle: the widest dividing the minor bytes of every buffer its dots
    share (through any dot), and of those dots' k (and an MN-major B's n); 128 bytes unless one is narrower."""
    groups = UnionFind()
    need: dict = {}
    for roots, nbytes in self.dot_bytes:
      for r in roots:
        groups.union(roots[0], r)
      need.setdefault(roots[0], []).extend(nbytes)
    for alloc in self.kernel.smem:
      if alloc.id in self.mma_roots and len(alloc.type.shape) >= 2:
        need.setdefault(alloc.id, []).append(alloc.type.shape[-1] * alloc.type.dtype.itemsize)
    common: dict = {}
    for r, nbytes in need.items():
      g = groups.find(r)
      common[g] = math.gcd(common.get(g, 0), *nbytes)
    narrow = dict(common)      # with the columns of the register windows stored into or read from them
    for r, nbytes in self.window_bytes().items():
      if r in need:
        narrow[groups.find(r)] = math.gcd(narrow[groups.find(r)], *nbytes)
    return {r: hw.swizzle_for(narrow[groups.find(r)]) or hw.swizzle_for(common[groups.find(r)]) or hw.SWIZZLE
            for r in need}

  def window_bytes(self) -> dict:
    """Root id -> the bytes of the columns (width and start) of each register window of a 2-D tensor-core
    operand (an im2col tile built tap by tap, `a_s[:, k * c:(k + 1) * c] = x.at[...][...]`): the operand takes
    the widest swizzle that divides them too, so that each window is whole tiles (a (64, 128) float16 buffer of
    four 32-channel taps is tiled in 64-byte tiles, as one of three taps, (64, 96), is already; probe 46h).
    Where no swizzle divides them (a window of 8 bytes), the operand keeps its own and the window is MG204."""
    if not self.tile_windows:
      return {}
    from .absint import known_multiple, loop_counters
    loops = loop_counters(self.kernel.body)
    out: dict = {}
    for _, root, view in self.tile_windows:
      if root.id not in self.mma_roots or len(root.type.shape) != 2 or view.transpose:
        continue
      col, size = view.index[-1], root.type.dtype.itemsize
      if col.squeeze:
        continue
      start = col.start if isinstance(col.start, int) else known_multiple(col.start, self.defs, loops)
      out.setdefault(root.id, []).extend([col.size * size, start * size])
    return out
