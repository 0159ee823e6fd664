"""Small integer tables known while compiling, made again at a shape registers hold (probe 52e).

vLLM's AWQ kernels build the order of the nibbles in a packed int32 from aranges, at shapes no register tensor
holds, then stretch it over the weight tile:

    reverse_awq_order_tensor = ((tl.arange(0, 2) * 4)[None, :] + tl.arange(0, 4)[:, None]).reshape(8)
    shifts = tl.reshape(tl.broadcast_to((reverse_awq_order_tensor * 4)[None, :], (BK * (BN // 8), 8)), (BK, BN))

The (4, 2) grid was MG204 at its arange. Every element of such a tensor is known while compiling (aranges,
numbers, integer math, broadcasts and reshapes of them), so a reshape or a broadcast of one whose own shape no
register tensor holds into a shape one does is the table itself, made at that shape from a run of the last axis:
`j` (an arange), `a + c * j` where the table is that line, else the entries selected by `j % p` for a table
repeating every p elements along the last axis (at most MAX_PERIOD of them) and the same along the other axes.
The ops of the small grid are then used by nothing and dropped (ir.prune_dead) before layouts are assigned. Not in
a padded trace (ops/padded_tiles.py), which records shapes of its own.
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import DType
from ..types import TensorType, resolve

MAX_ELEMENTS = 1 << 16     # (a table's elements evaluated while compiling, at most)
MAX_PERIOD = 16            # (distinct entries selected along the last axis, at most)
_DEPTH = 24


def holds(shape) -> bool:
  """Whether a register tensor of `shape` exists (a multiple of 128 elements; a 1-D vector, of 8)."""
  n = math.prod(shape)
  return n > 0 and (n % 8 == 0 if len(shape) == 1 else n % 128 == 0)


def _int_dtype(v):
  d = resolve(getattr(getattr(v, "type", None), "dtype", None))
  return d if isinstance(d, DType) and d.is_int and d.bits <= 32 else None


def _small_grid(shape) -> bool:
  """A shape of two or more axes longer than 1 that no register tensor holds (AWQ's (4, 2))."""
  return sum(n > 1 for n in shape) > 1 and not holds(shape)


def static_value(b, v, depth=0, grids=None):
  """The elements of the integer tensor `v` as a NumPy int64 array where every one is known while compiling
  (ml.arange, static fills, integer +, -, *, //, %, shifts, bitwise ops, min, max of them, broadcasts and
  reshapes); else None. `grids` (a list) gets True for each small grid (`_small_grid`) met on the way."""
  from .elementwise import Arange, BinOp, Binary, Full
  from .shape import Broadcast, Reshape
  if isinstance(v, bool):
    return None
  if isinstance(v, int):
    return np.int64(v)
  t = getattr(v, "type", None)
  if not isinstance(t, TensorType) or _int_dtype(v) is None or depth > _DEPTH or math.prod(t.shape) > MAX_ELEMENTS:
    return None
  o = b.defining(v)
  shape = tuple(t.shape)
  if grids is not None and _small_grid(shape):
    grids.append(True)
  if isinstance(o, Arange):
    return np.broadcast_to(np.arange(shape[o.dim], dtype=np.int64).reshape(
        [n if k == o.dim else 1 for k, n in enumerate(shape)]), shape)
  if isinstance(o, Full):
    return None if isinstance(o.value, bool) or not isinstance(o.value, int) else np.full(shape, o.value, np.int64)
  if isinstance(o, Reshape):
    x = static_value(b, o.x, depth + 1, grids)
    return None if x is None else np.reshape(x, shape)
  if isinstance(o, Broadcast):
    x = static_value(b, o.x, depth + 1, grids)
    if x is None:
      return None
    spread = [1] * len(shape)
    for i, k in enumerate(o.dims):
      spread[k] = x.shape[i]
    return np.broadcast_to(np.reshape(x, spread), shape)
  if isinstance(o, Binary):
    lhs, rhs = static_value(b, o.lhs, depth + 1, grids), static_value(b, o.rhs, depth + 1, grids)
    if lhs is None or rhs is None:
      return None
    with np.errstate(all="ignore"):
      if o.kind in (BinOp.FLOORDIV, BinOp.MOD) and np.any(rhs == 0):
        return None
      if o.kind in (BinOp.SHL, BinOp.SHR) and (np.any(rhs < 0) or np.any(rhs >= 32)):
        return None
      fn = {BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply, BinOp.FLOORDIV: np.floor_divide,
            BinOp.MOD: np.mod, BinOp.MAX: np.maximum, BinOp.MIN: np.minimum, BinOp.AND: np.bitwise_and,
            BinOp.OR: np.bitwise_or, BinOp.XOR: np.bitwise_xor, BinOp.SHL: np.left_shift,
            BinOp.SHR: np.right_shift}.get(o.kind)
      if fn is None:
        return None
      out = np.broadcast_to(fn(lhs, rhs), shape).astype(np.int64)
    lo, hi = _int_dtype(v).int_range
    return out if out.size == 0 or (out.min() >= lo and out.max() <= hi) else None
  return None


def _line(row):
  """(a, c) where row[k] == a + c * k for every k; else None."""
  c = int(row[1] - row[0]) if row.size > 1 else 0
  return (int(row[0]), c) if np.array_equal(row, row[0] + c * np.arange(row.size)) else None


def _period(row):
  """The least p (dividing the row's length, at most MAX_PERIOD) with row[k] == row[k % p]; else None."""
  n = row.size
  for p in range(1, min(n, MAX_PERIOD) + 1):
    if n % p == 0 and np.array_equal(row, np.tile(row[:p], n // p)):
      return p
  return None


def filled(cx, x, shape, dims=None):
  """`x` reshaped (or, with `dims`, broadcast) to `shape` where it is a fill (filled anew at the shape: a
  one-element statistic's (1, 1) to (1,)) or a table `made_again` makes; else None."""
  from . import elementwise as ew
  if isinstance(made := cx.b.defining(x), ew.Full):
    return ew.full_(cx, shape, made.value, x.type.dtype)
  return made_again(cx, x, shape, dims)


def made_again(cx, x, shape, dims=None):
  """`x.reshape(shape)` (with `dims`, the result axis of each of x's axes: `x` broadcast to `shape`) made as the
  table it is (see the module) where `x` is an integer tensor known while compiling whose own shape no register
  tensor holds, made through a small grid (two axes longer than 1), and `shape` is one that does; else None."""
  from . import elementwise as ew
  from .elementwise import Arange, BinOp, CmpOp
  from .shape import broadcast_to_shape
  shape = tuple(shape)
  if holds(tuple(x.type.shape)) or not holds(shape) or getattr(cx.b, "pad_tiles", None) is not None:
    return None
  grids = []
  arr = static_value(cx.b, x, grids=grids)
  if arr is None or not grids:
    return None                   # (a row of an index vector, `cols[None, :]`, is broadcast as it was)
  if dims is None:
    arr = np.reshape(arr, shape)
  else:
    spread = [1] * len(shape)
    for i, k in enumerate(dims):
      spread[k] = arr.shape[i]
    arr = np.broadcast_to(np.reshape(arr, spread), shape)
  n = shape[-1]
  rows = arr.reshape(-1, n)
  if not (rows == rows[:1]).all():
    return None                   # (the table differs along another axis than the last)
  row, d = rows[0], x.type.dtype
  line, p = _line(row), _period(row)
  if line is None and p is None:
    return None
  if line is not None and line[1] == 0:
    return ew.full_(cx, shape, line[0], d)
  if not holds((n,)):
    return None
  j = cx.b.emit(Arange, 0, loc=cx.loc, types=[TensorType((n,), d)], names=[""]).result
  if line is not None:
    a, c = line
    out = j if c == 1 else ew.binary(cx, BinOp.MUL, j, c)
    out = out if a == 0 else ew.binary(cx, BinOp.ADD, out, a)
  else:
    m = j if p == n else ew.binary(cx, BinOp.MOD, j, p)
    out = ew.full_(cx, (n,), int(row[0]), d)
    for q in range(1, p):
      if row[q] != row[0]:
        out = ew.where_(cx, ew.compare(cx, CmpOp.EQ, m, q), int(row[q]), out)
  return out if len(shape) == 1 else broadcast_to_shape(cx, out, shape)


def affine_grid(cx, x, shape, perm=None):
  """`x.reshape(shape)` (with `perm`, the transpose `x.transpose(perm)`) of an integer table known while compiling,
  made at a small grid `shape` no register tensor holds as `a + sum(c_k * ml.arange along axis k)` where the table is
  that plane (`ml.trans(ml.arange(8).reshape(2, 4))`: 4 i + j... of a (4, 2) grid, which the vector's reshape was
  MG204 at, probe 52e): a grid of index aranges, as a user builds one, made again at a shape registers hold where it
  is reshaped or broadcast into one (made_again); else None (then the reshape or transpose as before)."""
  from . import elementwise as ew
  from .elementwise import Arange, BinOp
  shape = tuple(shape)
  if getattr(cx.b, "pad_tiles", None) is not None or not _small_grid(shape) or _int_dtype(x) is None:
    return None
  arr = static_value(cx.b, x)
  if arr is None:
    return None
  arr = np.transpose(arr, perm) if perm is not None else np.reshape(arr, shape)
  if tuple(arr.shape) != shape:
    return None
  a = int(arr.flat[0])
  coef = [int(np.take(arr, 1, axis=k).flat[0]) - a if n > 1 else 0 for k, n in enumerate(shape)]
  grids = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
  if not np.array_equal(arr, a + sum(c * g for c, g in zip(coef, grids))):
    return None
  d = x.type.dtype
  out = None
  for k, c in enumerate(coef):
    if c == 0:
      continue
    j = cx.b.emit(Arange, k, loc=cx.loc, types=[TensorType(shape, d)], names=[""]).result
    j = j if c == 1 else ew.binary(cx, BinOp.MUL, j, c)
    out = j if out is None else ew.binary(cx, BinOp.ADD, out, j)
  if out is None:
    return None
  return out if a == 0 else ew.binary(cx, BinOp.ADD, out, a)
