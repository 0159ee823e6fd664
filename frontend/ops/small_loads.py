"""Small windows read whole, held as the vector of their elements.

A window of fewer elements than a warpgroup has threads over two or more axes, none of them 1 (the (2, 8) segment ids of a segment sum, the
(8, 2) expert ids of a top-2 MoE router), is too small for a register tensor of its shape (a multiple of 128
elements), so `seg = ids[...]` was MG204 with a hint that loaded a larger masked tile. Such a window is read as a
small statistic is held (frontend/ops/reduce.py): the (n,) vector of its elements in row-major order, typed with its
shape, so elementwise math, broadcasting against a tile (`seg[:, :, None] == k` of a (2, 8, 32) tile), indexing
(`seg[1]`) and stores take it as they take a statistic. Its rows are read into an SMEM scratch, a vector at a time
where the last axis holds whole vectors and an element at a time where it does not (at most FEW_ELEMENTS), and
the vector is read back from there.
"""
from __future__ import annotations

import itertools
import math

from .. import hw
from ..types import TensorType
from .small_stores import FEW_ELEMENTS, MAX_ROWS, VECTOR


def plan(shape) -> str | None:
  """How a window of `shape` too small for a register tensor is read: 'rows' (a vector a row), 'elements' (an
  element at a time), or None (a shape a register tensor takes, or one no vector holds)."""
  from .broadcast_nd import small_shape
  shape = tuple(shape)
  n = math.prod(shape)
  if not small_shape(shape) or n % VECTOR or n > hw.WARPGROUP:     # (a larger one: its MG204 hint pads it)
    return None
  if shape[-1] % VECTOR == 0 and n // shape[-1] <= MAX_ROWS:
    return "rows"
  return "elements" if n <= FEW_ELEMENTS else None


def load_small(cx, ref, name=""):
  """`ref[...]` of a small window (see the module) as its elements' vector typed with its shape; None where the
  window is no such one."""
  how = plan(ref.type.shape)
  if how is None or cx.b.small_loads is None:     # (None: traced again with windows read as tiles, compile.trace)
    return None
  cx.b.small_loads.append(cx.loc)
  from .access import scalar_load, scalar_store
  from .memory import view
  from .scratches import scratch
  from .shape import Reshape
  from .transfers import load, store
  shape, n = tuple(ref.type.shape), math.prod(ref.type.shape)
  buf = scratch(cx, (n,), ref.type.dtype, f"{ref.name or 'window'} scratch")
  if how == "rows":
    run = shape[-1]
    for r, idx in enumerate(itertools.product(*(range(k) for k in shape[:-1]))):
      row = load(cx, view(cx, ref, idx + (slice(None),), ref.name))
      store(cx, view(cx, buf, (slice(r * run, (r + 1) * run),), buf.name), row)
  else:
    for k, idx in enumerate(itertools.product(*(range(m) for m in shape))):
      scalar_store(cx, view(cx, buf, (k,), buf.name), scalar_load(cx, view(cx, ref, idx, ref.name)))
  vec = load(cx, buf, name)
  return cx.b.emit(Reshape, vec, loc=cx.loc, types=[TensorType(shape, vec.type.dtype)], names=[name]).result
