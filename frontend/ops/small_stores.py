"""Small statistics stored whole, a row at a time.

A statistic of a 3-D tile that keeps too few elements for a register tensor of its shape is held otherwise:
- the row max of a (2, 8, 64) tile, `ml.max(v, axis=2)` of shape (2, 8), is the (16,) vector of its (16, 64)
  reshape's rows typed with its shape (frontend/ops/reduce.py; a keepdims (2, 8, 1) one too);
- a statistic over a middle axis, `ml.sum(v, axis=1, keepdims=True)` of a (2, 8, 32) tile, is held spread back
  along that axis, a tile of v's shape (frontend/ops/spread.py).
Stored whole into a ref of its own shape, each was MG204 with a hint to store it otherwise. Both are stored as the
runs of its last axis they hold: the vector's runs (one store when it is all one run), the spread tile's rows at the
first position of the reduced axes, each read through SMEM as `m[i]` reads a tensor's row, into the ref's row
`out.at[i]`. A last axis too short for a vector (not a multiple of 8 elements) stores a statistic of at most
FEW_ELEMENTS elements an element at a time (the (20, 4) axis-2 sums of a (20, 4, 128) tile: 80 of them; it was MG204
past 64).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..types import TensorType
from .base import is_value

VECTOR = 8            # a 1-D register vector holds a multiple of 8 elements
FEW_ELEMENTS = 256    # at most this many elements stored (or read, ops/small_loads.py) one at a time
MAX_ROWS = 64         # at most this many row stores


def plan(cx, ref, value):
  """How `value`, stored whole into `ref` of its shape, is stored a row at a time: ('vector', its source vector) or
  ('spread', its spread tile, the reduced axes); None where it is neither kind of statistic or its rows do not fit."""
  if not (is_value(value) and isinstance(value.type, TensorType)) or tuple(value.type.shape) != tuple(ref.type.shape):
    return None
  shape = tuple(value.type.shape)
  got = cx.b.spread.get(value.id)
  if got is not None:
    full, axes = got[0], tuple(got[1])
    last = full.type.shape[-1]
    if last % VECTOR or math.prod(shape) // last > MAX_ROWS or axes[-1] == len(full.type.shape) - 1:
      return None
    return ("spread", full, axes)
  from .broadcast_nd import small_shape, small_source
  src = small_source(cx.b.defining, value) if small_shape(shape) else None
  if src is None or len(src.type.shape) != 1 or math.prod(src.type.shape) != math.prod(shape):
    return None
  run = _run(shape)
  if run % VECTOR and math.prod(shape) > FEW_ELEMENTS or not run % VECTOR and math.prod(shape) // run > MAX_ROWS:
    return None
  return ("vector", src)


def store_rows(cx, ref, value, how) -> None:
  """Store `value` (`how`: its plan) into `ref` of its shape, a row (or an element) at a time."""
  from .memory import view
  from .shape import index_through_smem
  from .transfers import store
  shape = tuple(value.type.shape)
  if how[0] == "spread":
    full, axes = how[1], how[2]
    keep = len(shape) == len(full.type.shape)
    for idx in itertools.product(*(range(n) for n in shape[:-1])):
      at = iter(idx)     # (the spread tile's index: 0 along the reduced axes, where the statistic is)
      src = tuple(0 if a in axes and not keep else next(at) for a in range(len(full.type.shape) - 1))
      row = index_through_smem(cx, full, src + (slice(None),))
      store(cx, view(cx, ref, idx + (slice(None),), ref.name), row)
    return
  vec, run = how[1], _run(shape)
  k = max((a for a, n in enumerate(shape) if n != 1), default=len(shape) - 1)
  if run % VECTOR:                       # (a short last axis: an element at a time)
    from .access import scalar_store
    for flat, idx in enumerate(itertools.product(*(range(n) for n in shape))):
      scalar_store(cx, view(cx, ref, idx, ref.name), index_through_smem(cx, vec, (flat,)))
    return
  for r, idx in enumerate(itertools.product(*(range(n) for n in shape[:k]))):
    row = vec if run == math.prod(shape) else index_through_smem(cx, vec, (slice(r * run, (r + 1) * run),))
    store(cx, view(cx, ref, idx + (slice(None),) + (0,) * (len(shape) - k - 1), ref.name), row)


def _run(shape) -> int:
  """The length of the runs a row at a time stores: the last axis longer than 1 (a keepdims (2, 8, 1) one's 8)."""
  return next((n for n in reversed(shape) if n != 1), 1)


def store_masked_rows(cx, ref, value, how, mask) -> bool:
  """`ml.store(out.at[...], m, mask=...)` of a small statistic `m` (`how`: its plan) under a mask of ml.arange,
  constants and scalars (a tail's `(rows[:, None] < n) & (cols[None, :] < k)`, broadcast to `ref`'s shape): each
  row stored as store_rows stores it, under the mask's row computed at the row's shape (the mask, too small for a
  register tensor of its own, is never held whole); rows too short for a vector are stored an element at a time, the
  elements a mask known while compiling keeps. False, storing nothing, where the mask is made otherwise (or is not
  known while compiling, for such short rows)."""
  from .access import masked_store, static_tensor
  from .memory import view, window
  from .shape import index_through_smem
  shape = tuple(value.type.shape)
  if how[0] == "spread":
    k, rows = len(shape) - 1, list(itertools.product(*(range(n) for n in shape[:-1])))
  else:
    k = max((a for a, n in enumerate(shape) if n != 1), default=len(shape) - 1)
    rows = list(itertools.product(*(range(n) for n in shape[:k])))
  known = static_tensor(cx, mask)      # (the mask's values where known while compiling: rows it keeps off are skipped)
  if how[0] == "vector" and _run(shape) % VECTOR:
    if known is None:                  # (rows too short for a vector: the elements a static mask keeps, one at a time)
      return False
    from .access import scalar_store
    for flat, idx in enumerate(itertools.product(*(range(n) for n in shape))):
      if np.broadcast_to(known, shape)[idx]:
        scalar_store(cx, view(cx, ref, idx, ref.name), index_through_smem(cx, how[1], (flat,)))
    return True
  parts = []
  for r, idx in enumerate(rows):
    at = idx + (slice(None),) + (0,) * (len(shape) - k - 1)
    if known is not None and not np.broadcast_to(known, shape)[at].any():
      continue
    out = view(cx, ref, at, ref.name)
    root, index = window(cx.b, out)
    if any(isinstance(i.start, int) and not -i.size < i.start < n for i, n in zip(index or (), root.type.shape)):
      return False       # (a row wholly past the array's end under a mask not known while compiling)
    ops: list = []
    axes = [("row",) if a == k else ("at", idx[a] if a < len(idx) else 0) for a in range(len(shape))]
    part = _mask_row(cx.b.defining, {}, mask, (shape[k],), axes, ops)
    if part is None:
      return False
    parts.append((r, idx, out, part, ops))
  for r, idx, out, part, ops in parts:
    for o in ops:
      cx.b.append(o)
    if how[0] == "spread":
      at = iter(idx)     # (the spread tile's index: 0 along the reduced axes, where the statistic is)
      full, axes = how[1], how[2]
      keep = len(shape) == len(full.type.shape)
      src = tuple(0 if a in axes and not keep else next(at) for a in range(len(full.type.shape) - 1))
      row = index_through_smem(cx, full, src + (slice(None),))
    else:
      vec, run = how[1], shape[k]
      row = vec if run == math.prod(shape) else index_through_smem(cx, vec, (slice(r * run, (r + 1) * run),))
    masked_store(cx, out, row, part)
  return True


def _mask_row(defining, made, v, shape, axes, out: list):
  """`v` (a tensor of ml.arange, constants and scalars) at one row, computed at the row's `shape`: `axes[i]` says
  what v's axis i is there, ('row',) the row's axis or ('at', j) the index j; the new ops are appended to `out`
  (`made`: their results' ops). None where `v` is made otherwise (frontend/index_grids.py's _regrid, at a row)."""
  from .. import ir
  from ..types import TensorType
  from .elementwise_ops import ELEMENTWISE_OPS, Arange, Full, remade
  from .shape import Broadcast
  if not (isinstance(v, ir.Value) and isinstance(v.type, TensorType)):
    return v
  d = made.get(v.id) or defining(v)
  t = TensorType(shape, v.type.dtype)
  if isinstance(d, Arange):
    new = Arange(0, d.loc, (ir.Value(t, v.name),)) if axes[d.dim] == ("row",) else \
        Full(axes[d.dim][1], d.loc, (ir.Value(t, v.name),))
  elif isinstance(d, Full):
    new = Full(d.value, d.loc, (ir.Value(t, v.name),))
  elif isinstance(d, Broadcast):
    inner = [axes[k] if d.x.type.shape[i] == d.result.type.shape[k] else ("at", 0) for i, k in enumerate(d.dims)]
    return _mask_row(defining, made, d.x, shape, inner, out)
  elif isinstance(d, ELEMENTWISE_OPS):
    new = remade(d, v, t, lambda x: _mask_row(defining, made, x, shape, axes, out))
    if new is None:
      return None
  else:
    return None
  made[new.results[0].id] = new
  out.append(new)
  return new.results[0]
