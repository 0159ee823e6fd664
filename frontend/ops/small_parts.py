"""Small tensors reduced along an axis, or indexed off a run, element by element.

A tensor too small for a register tensor of its shape is held otherwise: as the vector of its elements typed with
its shape (a small statistic, frontend/ops/reduce.py; a small window read whole, frontend/ops/small_loads.py), or as
elementwise math of broadcasts and index grids that is recomputed at the shape of the tile it meets (a (2, 8, 1)
mask of per-row lengths, frontend/ops/small_regrid.py). Reduced along an axis (`ml.sum(seg, axis=1)` of (2, 8)
segment ids, `ml.sum(mask, axis=1)` of the (2, 8, 1) mask, to count the lengths), or indexed by a column
(`seg[:, 3]`), no layout holds what it is made of, so each was MG204. The result has few elements: each is a full
reduction of the elements it keeps (the others replaced by the reduction's identity), or the element it picks, a
scalar; the result is made of those scalars (`assemble`): at most FEW_KEPT of them (or FEW_SCALARS, no vector's
count) are a few-element statistic (frontend/ops/few_stats.py), a multiple of 8 the vector of them, typed with the
result's shape.
"""
from __future__ import annotations

import itertools
import math

from .. import hw, ir
from ..dtypes import DType
from ..types import TensorType, resolve
from . import elementwise as ew
from .elementwise_fns import arange

MAX_PARTS = 64        # at most this many results computed a scalar at a time
FEW_SCALARS = 32      # at most this many, no vector's count (not a multiple of 8), held as a few-element statistic


def assemble(cx, shape, parts, flat=None):
  """A tensor of `shape` holding the scalars `parts` (row-major): a few-element statistic of at most FEW_KEPT (`flat`:
  shape's flat_grid, where made), else the vector of them (a multiple of 8) typed with the shape; None for any other
  count."""
  from . import few_stats
  from .reduce import FEW_KEPT
  from .shape import Reshape, reshape_
  shape, k = tuple(shape), len(parts)
  if k <= FEW_KEPT or k % 8 and k <= FEW_SCALARS:
    res = ew.stretch(cx, shape, parts[-1])
    if k > 1:
      flat = flat if flat is not None else flat_grid(cx, shape)
      for j in reversed(range(k - 1)):
        res = ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, flat, j), parts[j], res)
    few_stats.record(cx, res, parts)
    return res
  if k % 8 or k > MAX_PARTS:
    return None
  iota = arange.apply(cx, (k,), {})
  vec = ew.stretch(cx, (k,), parts[-1])
  for j in reversed(range(k - 1)):
    vec = ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, iota, j), parts[j], vec)
  if len(shape) == 1:
    return vec
  from .broadcast_nd import small_shape
  if small_shape(shape) or math.prod(shape) % hw.WARPGROUP:
    return cx.b.emit(Reshape, vec, loc=cx.loc, types=[TensorType(shape, vec.type.dtype)], names=[cx.name]).result
  return reshape_(cx, vec, shape)


def flat_grid(cx, shape):
  """The row-major index of each element of `shape`, an index grid."""
  from .shape import reshape_
  flat, stride = None, 1
  for a in reversed(range(len(shape))):
    if shape[a] == 1:
      continue
    iota = reshape_(cx, arange.apply(cx, (shape[a],), {}), tuple(n if i == a else 1 for i, n in enumerate(shape)))
    term = iota if stride == 1 else ew.binary(cx, ew.BinOp.MUL, iota, stride)
    flat = term if flat is None else ew.binary(cx, ew.BinOp.ADD, term, flat)
    stride *= shape[a]
  return flat


def held_vector(cx, x):
  """The (n,) vector of small `x`'s elements in row-major order where x is held as one; else None."""
  from .broadcast_nd import small_shape, small_source
  shape = tuple(x.type.shape)
  if not small_shape(shape) or x.id in cx.b.spread or x.id in cx.b.few_stats:
    return None
  src = small_source(cx.b.defining, x)
  return src if src is not None and len(src.type.shape) == 1 and src.type.shape[0] == math.prod(shape) else None


def reduce_small(cx, kind, x, axes, keepdims, what):
  """`what`(x, axis=axes) of a small `x` along some of its axes (see the module): each result the full reduction
  of x where the kept axes' index is its own; None where x is no such tensor or the result holds too many."""
  from .reduce import ReduceKind, extreme_identity, reduce
  shape = tuple(x.type.shape)
  kept = [i for i in range(len(shape)) if i not in axes]
  k = math.prod(shape[i] for i in kept)
  if not axes or k > MAX_PARTS or kind not in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN):
    return None
  out = tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)
  if k > FEW_SCALARS and k % 8:
    return None
  if kept and (parts := few_parts(cx, x)) is not None:    # (a few-element statistic or window: its scalars combined)
    return assemble(cx, out, _combined(cx, kind, parts, x, shape, kept))
  vec = held_vector(cx, x)
  if not kept:          # (all of a small mask: all of its elements' vector; a held one's is reduce's own)
    from .small_flat import flat_values
    from .broadcast_nd import small_shape
    flat = flat_values(cx, x) if vec is None and small_shape(shape) and not math.prod(shape) % 8 else None
    res = reduce(cx, kind, flat, None, False, what) if flat is not None else None
    return res if res is None or not keepdims else ew.full_(cx, out, res, res.type.dtype)
  grid = None
  if vec is not None:
    at = _vector_grids(cx, shape, kept)
  else:
    grid = _regridded(cx, x)
    if grid is None:
      return None
    at = _tile_grids(cx, shape, kept, tuple(grid.type.shape))
  src = vec if vec is not None else grid
  d = resolve(src.type.dtype)
  if kind == ReduceKind.SUM and isinstance(d, DType) and (d == DType.bool_ or d.is_int and d.bits < 32):
    src = ew.astype(cx, src, DType.i32 if d == DType.bool_ or d.is_signed else DType.u32)   # (as jnp.sum)
    d = resolve(src.type.dtype)
  ident = 0 if kind == ReduceKind.SUM else extreme_identity(kind, d)
  parts = []
  for j in range(k):
    hit = at(j)
    parts.append(reduce(cx, kind, ew.where_(cx, hit, src, ident) if hit is not None else src, None, False, what))
  return assemble(cx, out, parts)


def few_parts(cx, x):
  """The scalars of small `x`'s elements (row-major) where x is a few-element statistic or window, or elementwise math
  of them (frontend/ops/few_stats.py); None for any other."""
  from . import few_stats
  from .broadcast_nd import small_shape
  if x.id in cx.b.few_stats:
    return list(cx.b.few_stats[x.id])
  if not small_shape(tuple(x.type.shape)) or not few_stats.involves(cx.b, x) or few_stats._scalars(
      cx, x, {}, probe=True) is None:
    return None
  return [p if isinstance(p, ir.Value) else ew.full_(cx, (), p, x.type.dtype)
          for p in few_stats._scalars(cx, x, {}, probe=False)]


def _combined(cx, kind, parts, x, shape, kept):
  """The results of reducing the few-element `x` (its scalars `parts`) along all but the `kept` axes."""
  from .reduce import ReduceKind
  d = resolve(x.type.dtype)
  if kind == ReduceKind.SUM and isinstance(d, DType) and (d == DType.bool_ or d.is_int and d.bits < 32):
    parts = [ew.astype(cx, p, DType.i32 if d == DType.bool_ or d.is_signed else DType.u32) for p in parts]
  op = {ReduceKind.SUM: ew.BinOp.ADD, ReduceKind.MAX: ew.BinOp.MAX, ReduceKind.MIN: ew.BinOp.MIN}[kind]
  groups = {}
  for f, p in enumerate(parts):
    at = [(f // math.prod(shape[a + 1:])) % shape[a] for a in range(len(shape))]
    j = 0
    for a in kept:
      j = j * shape[a] + at[a]
    groups[j] = p if j not in groups else ew.binary(cx, op, groups[j], p)
  return [groups[j] for j in range(len(groups))]


def _vector_grids(cx, shape, kept):
  """j -> whether each element of the (n,) vector of `shape`'s elements has kept-axes index j."""
  n = math.prod(shape)
  iota = arange.apply(cx, (n,), {})
  idx = None
  kstride = 1
  for a in reversed(kept):
    stride = math.prod(shape[a + 1:])
    term = ew.binary(cx, ew.BinOp.FLOORDIV, iota, stride) if stride > 1 else iota
    if a > 0:
      term = ew.binary(cx, ew.BinOp.MOD, term, shape[a])
    if kstride > 1:
      term = ew.binary(cx, ew.BinOp.MUL, term, kstride)
    idx = term if idx is None else ew.binary(cx, ew.BinOp.ADD, idx, term)
    kstride *= shape[a]
  return lambda j: ew.compare(cx, ew.CmpOp.EQ, idx, j)


def _tile_grids(cx, shape, kept, tile):
  """j -> whether each element of `tile` (shape's size-1 axes stretched) has kept-axes index j of `shape` and index
  0 along the stretched axes (each of x's elements counted once)."""
  from .shape import reshape_
  def axis_grid(a):
    return reshape_(cx, arange.apply(cx, (tile[a],), {}), tuple(n if i == a else 1 for i, n in enumerate(tile)))
  stretched = [a for a in range(len(shape)) if shape[a] == 1 and tile[a] != 1]
  first = None
  for a in stretched:
    c = ew.compare(cx, ew.CmpOp.EQ, axis_grid(a), 0)
    first = c if first is None else ew.binary(cx, ew.BinOp.AND, first, c)
  grids = {a: axis_grid(a) for a in kept if shape[a] != 1}

  def at(j):
    hit, rest = first, j
    for a in reversed(kept):
      if shape[a] != 1:
        c = ew.compare(cx, ew.CmpOp.EQ, grids[a], rest % shape[a])
        hit = c if hit is None else ew.binary(cx, ew.BinOp.AND, hit, c)
      rest //= shape[a]
    return hit
  return at


def _regridded(cx, x):
  """`x`, a small tensor of elementwise math of broadcasts and index grids (a mask of per-row lengths), recomputed
  at the smallest tile a register tensor holds, its size-1 axes stretched alike; None where it is no such one."""
  from .broadcast_nd import index_only, small_shape
  from .small_regrid import _at
  shape = tuple(x.type.shape)
  if not small_shape(shape) or len(shape) < 3 or 1 not in shape or index_only(cx.b.defining, x):
    return None
  c = hw.WARPGROUP // math.gcd(math.prod(shape), hw.WARPGROUP)
  while c <= hw.WARPGROUP:          # (the smallest whose broadcasts a row-wise layout takes)
    tile = tuple(n if n != 1 else c for n in shape)
    if _at(cx, x, tile, {}, probe=True) is not None:
      return _at(cx, x, tile, {}, probe=False)
    c *= 2
  return None


def pick(cx, x, idx):
  """Elements of small `x` (held as a vector) that are no run of its row-major order (`seg[:, 3]`, `v[:, i[0]]`),
  indices `idx` (static ints and slices, one an axis, or run-time integer scalars: as jnp's, a negative one counts
  from the end and one past either end is clamped, probe 46a), each read through SMEM as a scalar (or selected
  among a few-element statistic's scalars), assembled into the index's shape; None where an index is of another
  kind or they are too many."""
  shape = tuple(x.type.shape)
  if not all(isinstance(i, (int, slice)) or _runtime_index(i) for i in idx):
    return None
  element = _element_getter(cx, x, runtime=any(_runtime_index(i) for i in idx))
  if element is None:
    return None
  ranges = [range(*i.indices(n)) if isinstance(i, slice) else [i if isinstance(i, int) else _clamped(cx, i, n)]
            for i, n in zip(idx, shape)]
  out = tuple(len(r) for i, r in zip(idx, ranges) if isinstance(i, slice))
  k = math.prod(out)
  if k > MAX_PARTS or (k > FEW_SCALARS and k % 8):
    return None
  strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
  parts = [element(_flat(cx, e, strides)) for e in itertools.product(*ranges)]
  return assemble(cx, out or (1,), parts) if out else parts[0]


def _runtime_index(i) -> bool:
  """A run-time integer scalar (an index read from memory, a loop counter)."""
  from ..types import ScalarType
  return isinstance(i, ir.Value) and isinstance(i.type, ScalarType) and getattr(resolve(i.type.dtype), "is_int", False)


def _clamped(cx, i, n):
  """A run-time index of an axis of `n` as jnp's gather takes it: negative ones count from the end, then clamped
  into [0, n)."""
  from .index_operands import index_operand
  i = index_operand(cx, i)
  i = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, i, 0), ew.binary(cx, ew.BinOp.ADD, i, n), i)
  return ew.binary(cx, ew.BinOp.MIN, ew.binary(cx, ew.BinOp.MAX, i, 0), n - 1)


def _flat(cx, e, strides):
  """The row-major flat index of the element at `e` (ints, or run-time scalars among them)."""
  flat = 0
  for i, s in zip(e, strides):
    if isinstance(i, int):
      flat = flat + i * s if isinstance(flat, int) else (ew.binary(cx, ew.BinOp.ADD, flat, i * s) if i * s else flat)
      continue
    term = ew.binary(cx, ew.BinOp.MUL, i, s) if s != 1 else i
    flat = term if isinstance(flat, int) and flat == 0 else ew.binary(cx, ew.BinOp.ADD, term, flat)
  return flat


def arg_small(cx, x, a, kind):
  """ml.argmax (kind MAX) or ml.argmin of small `x` (held as a vector) along axis `a`: for each result, the
  extreme of the elements it keeps, then the least index along `a` of those equal to it (or NaN, as jnp);
  None where x is no such tensor or the result holds too many."""
  from .arg_reduce import _comparable, _hits
  from .reduce import ReduceKind, extreme_identity, reduce
  vec = held_vector(cx, x)
  shape = tuple(x.type.shape)
  kept = [i for i in range(len(shape)) if i != a]
  k = math.prod(shape[i] for i in kept)
  if k <= FEW_SCALARS and (parts := few_parts(cx, x)) is not None:    # (a few-element window or statistic)
    return assemble(cx, tuple(shape[i] for i in kept), _few_args(cx, kind, parts, shape, a))
  if vec is None or k > MAX_PARTS or k > FEW_SCALARS and k % 8:
    return None
  vec = _comparable(cx, vec)
  at = _vector_grids(cx, shape, kept)
  iota = arange.apply(cx, (math.prod(shape),), {})
  stride = math.prod(shape[a + 1:])
  along = ew.binary(cx, ew.BinOp.FLOORDIV, iota, stride) if stride > 1 else iota
  along = ew.binary(cx, ew.BinOp.MOD, along, shape[a]) if a > 0 else along
  ident = extreme_identity(kind, resolve(vec.type.dtype))
  parts = []
  for j in range(k):
    hit = at(j)
    best = reduce(cx, kind, ew.where_(cx, hit, vec, ident), None, False)
    first = ew.binary(cx, ew.BinOp.AND, hit, _hits(cx, vec, best))
    parts.append(reduce(cx, ReduceKind.MIN, ew.where_(cx, first, along, shape[a]), None, False))
  return assemble(cx, tuple(shape[i] for i in kept), parts)


def _few_args(cx, kind, parts, shape, a):
  """argmax (kind MAX) or argmin along axis `a` of the few-element `x`, from its scalars: each group's extreme, then
  the least position along `a` equal to it (or NaN, as jnp)."""
  from .arg_reduce import _comparable, _hits
  from .reduce import ReduceKind
  op = ew.BinOp.MAX if kind == ReduceKind.MAX else ew.BinOp.MIN
  groups = {}
  for f, p in enumerate(parts):
    at = [(f // math.prod(shape[d + 1:])) % shape[d] for d in range(len(shape))]
    groups.setdefault(tuple(at[:a] + at[a + 1:]), []).append((at[a], _comparable(cx, p)))
  out = []
  for key in sorted(groups):
    best = None
    for _, p in groups[key]:
      best = p if best is None else ew.binary(cx, op, best, p)
    idx = shape[a]
    for pos, p in reversed(groups[key]):
      idx = ew.where_(cx, _hits(cx, p, best), pos, idx)
    out.append(idx)
  return out


def transpose_small(cx, x):
  """`x.T` of a small 2-D `x` held as a vector or as scalars: its elements picked in the transpose's order, assembled;
  None where x is no such tensor."""
  element = _element_getter(cx, x) if len(x.type.shape) == 2 else None
  if element is None or math.prod(x.type.shape) > MAX_PARTS:
    return None
  r, c = x.type.shape
  return assemble(cx, (c, r), [element(i * c + j) for j in range(c) for i in range(r)])


def _element_getter(cx, x, runtime=False):
  """j -> the scalar of small `x`'s flat element j: its few-element statistic's scalar (`runtime`: j may be a
  run-time scalar, selected among them), or its vector's element read through SMEM; None where x is held neither
  way."""
  from .shape import index_through_smem
  if (parts := few_parts(cx, x)) is not None:
    if runtime:
      return lambda j: parts[j] if isinstance(j, int) else _select(cx, parts, j)
    return lambda j: parts[j]
  vec = held_vector(cx, x)
  return None if vec is None else (lambda j: index_through_smem(cx, vec, (j,)))


def _select(cx, parts, j):
  """The scalar parts[j] of a run-time index j (in range): a chain of selects."""
  out = parts[-1]
  for k in reversed(range(len(parts) - 1)):
    out = ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, j, k), parts[k], out)
  return out
