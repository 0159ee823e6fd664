"""Which elements of a buffer a set of windows covers, computed on a coarse grid of cells.

Windows are boxes (a low and a high bound per dimension). Every bound and the buffer's
shape are multiples of a cell size per dimension (their gcd), so a boolean mask over
cells holds the union exactly while staying small: a (8192, 8192) output written in
(128, 128) tiles is a (64, 64) mask. Used by the compile-time checks (frontend/checks.py)
and by interpret mode's report of unwritten outputs; both describe what is missing with
`describe`.
"""
from __future__ import annotations

import numpy as np

MAX_CELLS = 50_000_000     # cells marked at once; beyond it the union is not computed (unknown)


def _distinct(a: np.ndarray, inverse: bool):
  """np.unique(a, axis=0, return_index=True[, return_inverse]) of the int array `a`, through one
  integer key a row (np.unique(axis=0) sorts structured rows slowly)."""
  lo = a.min(axis=0)
  span = a.max(axis=0) - lo + 1
  if np.prod(span.astype(np.float64)) >= 2.0 ** 62:
    return np.unique(a, axis=0, return_index=True, return_inverse=inverse)
  key = np.zeros(len(a), np.int64)
  for d in range(a.shape[1]):         # one integer per row: sorting it is fast
    key = key * span[d] + (a[:, d] - lo[d])
  _, first, *inv = np.unique(key, return_index=True, return_inverse=inverse)
  return (a[first], first, *inv)


def unique_rows(a: np.ndarray):
  """(distinct rows of the int array `a`, the index of each one's first occurrence)."""
  if len(a) <= 1:
    return a, np.arange(len(a))
  if (a == a[0]).all():
    return a[:1], np.zeros(1, np.int64)
  return _distinct(a, False)


def group_rows(a: np.ndarray):
  """(distinct rows of the int array `a`, the index of each row's distinct row)."""
  if len(a) == 0 or (a == a[0]).all():
    return a[:1], np.zeros(len(a), np.int64)
  u, _, inv = _distinct(a, True)
  return u, inv.reshape(-1)


class Boxes:
  """A union of boxes in a buffer of `shape`."""

  def __init__(self, shape):
    self.shape = tuple(shape)
    self.lo: list[np.ndarray] = []     # (n, ndim) int64 arrays
    self.hi: list[np.ndarray] = []
    self.overflow = False              # too many to compute: the union is unknown
    self._gcd = np.asarray(self.shape, np.int64)    # of the shape and every bound so far
    self._cache = None                 # (cell size, mask, how many of self.lo it holds)

  def add(self, lo: np.ndarray, hi: np.ndarray) -> None:
    """Add boxes (rows of `lo`, `hi`), clipped to the buffer; empty ones are dropped."""
    shape = np.asarray(self.shape, np.int64)
    lo, hi = np.clip(lo, 0, shape), np.clip(hi, 0, shape)
    keep = np.all(hi > lo, axis=1)
    if keep.any():
      both = unique_rows(np.concatenate([lo[keep], hi[keep]], axis=1))[0]
      self.lo.append(both[:, :len(self.shape)])
      self.hi.append(both[:, len(self.shape):])
      self._gcd = np.gcd.reduce(np.concatenate([self._gcd[None], self.lo[-1], self.hi[-1]]), axis=0)

  def __bool__(self):
    return bool(self.lo)

  def cells(self, extra=()) -> np.ndarray:
    """The cell size per dimension: the gcd of the shape, every bound and the (n, ndim) `extra`."""
    vals = [self._gcd[None]] + [np.asarray(e, np.int64) for e in extra]
    return np.maximum(np.gcd.reduce(np.concatenate(vals), axis=0), 1)

  def mask(self, g: np.ndarray) -> np.ndarray | None:
    """Covered cells at cell size `g` (a bool array of shape // g); None when too large. The mask
    is kept: the boxes added since are painted onto it (at the same cell size)."""
    key = tuple(int(x) for x in g)
    if self._cache is not None and self._cache[0] == key:
      _, m, done = self._cache
    else:
      m, done = np.zeros(tuple(n // c for n, c in zip(self.shape, key)), bool), 0
    if len(self.lo) > done:
      both = unique_rows(np.concatenate([np.concatenate(self.lo[done:]), np.concatenate(self.hi[done:])],
                                        axis=1))[0]
      lo, hi = both[:, :len(key)] // g, both[:, len(key):] // g
      counts = hi - lo
      if int(np.prod(counts, axis=1).sum()) > MAX_CELLS:
        self.overflow = True
        return None
      sizes, inv = group_rows(counts)
      for k, size in enumerate(sizes):
        rows = lo[inv == k]
        idx = []
        for d, n in enumerate(size):
          shape = [len(rows)] + [1] * len(size)
          shape[d + 1] = int(n)
          idx.append((rows[:, d][:, None] + np.arange(n)[None]).reshape(shape))
        m[tuple(idx)] = True
    self._cache = (key, m, len(self.lo))
    return m


def describe(name: str, shape, missing: np.ndarray, g) -> tuple[str, int]:
  """(`name[a:b, ...]`, a box of missing elements, and how many are missing in all) from a cell
  mask. The box starts at the first missing element and grows while every element in it is
  missing, so the text is true of each element it names."""
  lo = [int(c) for c in np.argwhere(missing)[0]]
  hi = [c + 1 for c in lo]
  for d in reversed(range(missing.ndim)):
    while hi[d] < missing.shape[d]:
      grown = tuple(slice(a, b + 1 if e == d else b) for e, (a, b) in enumerate(zip(lo, hi)))
      if not missing[grown].all():
        break
      hi[d] += 1
  g = np.asarray(g, np.int64)
  parts = [":" if a == 0 and b * c == n else f"{a * c}:{b * c}" for a, b, c, n in zip(lo, hi, g, shape)]
  count = int(missing.sum()) * int(np.prod(g))
  return f"{name}[{', '.join(parts)}]", count
