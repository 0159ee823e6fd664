"""Small windows read whole, held as the vector of their elements.

A window of fewer elements than a warpgroup has threads over two axes, neither of them 1, or over three or more (the
(2, 8) segment ids of a segment sum, the (8, 2) expert ids of a top-2 MoE router, a (1, 1, 1, 32) bias), is too small
for a register tensor of its shape (a multiple of 128 elements), so `seg = ids[...]` was MG204 with a hint that loaded
a larger masked tile. Such a window is read as a
small statistic is held (frontend/ops/reduce.py): the (n,) vector of its elements in row-major order, typed with its
shape, so elementwise math, broadcasting against a tile (`seg[:, :, None] == k` of a (2, 8, 32) tile), indexing
(`seg[1]`) and stores take it as they take a statistic. Its rows are read into an SMEM scratch, a vector at a time
where the last axis holds whole vectors and an element at a time where it does not (at most FEW_ELEMENTS), and
the vector is read back from there.
"""
from __future__ import annotations

import itertools
import math

from .. import hw, ir
from ..types import TensorType
from .small_stores import FEW_ELEMENTS, MAX_ROWS, VECTOR


def plan(shape, smem=False) -> str | None:
  """How a window of `shape` too small for a register tensor is read: 'rows' (a vector a row), 'elements' (an
  element at a time), 'few' (at most FEW_SCALARS elements, no vector's count: a few-element statistic of their
  scalars, the (3, 5) one's 15), or None
  (a shape a register tensor takes, or one nothing holds). An SMEM window (`smem`: the scratch `v[0]` of a
  (2, 3, 64) tile is read from) of more than 128 elements, not a multiple of 128, is read a row at a time too."""
  from .broadcast_nd import small_shape
  from .small_parts import FEW_SCALARS
  shape = tuple(shape)
  n = math.prod(shape)
  if small_shape(shape) and n <= FEW_SCALARS and n % VECTOR or len(shape) > 1 and n == shape[-1] < VECTOR:
    return "few"          # (and a row of fewer than 8: a group's (1, 4) AWQ zero words, BLOCK_N = 32, probe 52e)
  if smem and small_shape(shape) and n > hw.WARPGROUP and shape[-1] % VECTOR == 0 and n // shape[-1] <= MAX_ROWS:
    return "rows"
  if not small_shape(shape) or n % VECTOR or n > hw.WARPGROUP:     # (a larger GMEM one: read padded, padded_tiles.py)
    return None
  if shape[-1] % VECTOR == 0 and n // shape[-1] <= MAX_ROWS:
    return "rows"
  return "elements" if n <= FEW_ELEMENTS else None


def load_small(cx, ref, name=""):
  """`ref[...]` of a small window (see the module) as its elements' vector typed with its shape; None where the
  window is no such one."""
  from ..types import Space
  how = plan(ref.type.shape, ref.type.space == Space.SMEM)
  if how is None or cx.b.small_loads is None:     # (None: traced again with windows read as tiles, compile.trace)
    return None
  cx.b.small_loads.append(cx.loc)
  from .access import scalar_load, scalar_store
  from .memory import view
  from .scratches import scratch
  from .shape import Reshape
  from .transfers import load, store
  shape, n = tuple(ref.type.shape), math.prod(ref.type.shape)
  if how == "few":
    from .small_parts import assemble
    return assemble(cx, shape, [scalar_load(cx, view(cx, ref, idx, ref.name))
                                for idx in itertools.product(*(range(m) for m in shape))])
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


def masked_load_small(cx, ref, mask, other):
  """`ref.load(mask=m, other=o)` of a small GMEM window (see the module): its elements read one at a time, each at
  indices clamped into the array (a masked window may run past its end), then selected by the mask at the small
  shape (frontend/ops/small_flat.py); None where the window is no such one."""
  shape = tuple(ref.type.shape)
  if plan(shape) in (None, "few") or cx.b.small_loads is None:
    return None
  from .access import scalar_load, scalar_store
  from .elementwise import where_
  from .memory import view
  from .scratches import scratch
  from .shape import Reshape
  from .transfers import load
  cx.b.small_loads.append(cx.loc)
  n = math.prod(shape)
  buf = scratch(cx, (n,), ref.type.dtype, f"{ref.name or 'window'} scratch")
  for k, idx in enumerate(itertools.product(*(range(m) for m in shape))):
    scalar_store(cx, view(cx, buf, (k,), buf.name), scalar_load(cx, _clamped_element(cx, ref, idx)))
  vec = load(cx, buf, cx.name)
  v = cx.b.emit(Reshape, vec, loc=cx.loc, types=[TensorType(shape, vec.type.dtype)], names=[cx.name]).result
  return where_(cx, mask, v, other)


def _clamped_element(cx, ref, idx):
  """Element `idx` of the window `ref`, its index over the root clamped into the root's bounds (an element a mask
  keeps off may lie past the array's end; its read must not)."""
  from .elementwise import BinOp, binary
  from .memory import add_index, view, window
  root, index = window(cx.b, ref)
  if index is None:
    return view(cx, ref, tuple(idx), ref.name)
  at, it = [], iter(idx)
  for p, n in zip(index, root.type.shape):
    i = p.start if p.squeeze else add_index(cx, p.start, next(it))
    at.append(min(max(i, 0), n - 1) if isinstance(i, int) else binary(cx, BinOp.MAX, binary(cx, BinOp.MIN, i, n - 1), 0))
  return view(cx, root, tuple(at), ref.name)


def masked_store_small(cx, ref, value, mask) -> bool:
  """`ref.store(v, mask=m)` of a small value (held as a vector, or math the small shape evaluates at its elements)
  into a GMEM window of its shape: each element stored under a run-time if on its mask element (the window may run
  past the array's end); False where it is no such store."""
  from .broadcast_nd import small_shape
  from .small_flat import flat_values
  from .small_parts import held_vector
  shape = tuple(ref.type.shape)
  n = math.prod(shape)
  if not small_shape(shape) or n > FEW_ELEMENTS or tuple(getattr(value.type, "shape", ())) != shape:
    return False
  vec = held_vector(cx, value)
  if vec is None:
    return False
  cond = held_vector(cx, mask) if tuple(mask.type.shape) == shape else None
  cond = cond if cond is not None else flat_values(cx, _shaped(cx, mask, shape))
  if cond is None:
    return False
  from .shape import index_through_smem
  for k, idx in enumerate(itertools.product(*(range(m) for m in shape))):
    _store_if(cx, index_through_smem(cx, cond, (k,)), ref, idx, index_through_smem(cx, vec, (k,)))
  return True


def _store_if(cx, c, ref, idx, s):
  """ref[idx] = s where the run-time boolean c holds (a plain store where c is True)."""
  from .access import scalar_store
  from .control import If, Yield
  from .memory import view
  if c is True:
    scalar_store(cx, view(cx, ref, idx, ref.name), s)
    return
  then_blk, else_blk = ir.Block(), ir.Block()
  with cx.b.region(then_blk):
    scalar_store(cx, view(cx, ref, idx, ref.name), s)
    cx.b.emit(Yield, (), loc=cx.loc)
  with cx.b.region(else_blk):
    cx.b.emit(Yield, (), loc=cx.loc)
  cx.b.emit(If, c, then_blk, else_blk, loc=cx.loc, types=[], names=[])


def _shaped(cx, mask, shape):
  from .shape import broadcast_to_shape
  return mask if tuple(mask.type.shape) == shape else broadcast_to_shape(cx, mask, shape)


def masked_few(cx, ref, mask, other=None, value=None) -> object:
  """A masked load (`value` None: the loaded few-element statistic, else None) or store (True, else False) of a
  window of at most FEW_SCALARS elements (see plan's 'few'), an element at a time: a load selects each element's
  scalar, read at indices clamped into the array, by its mask element; a store writes each under an if on it."""
  from .small_flat import element_of
  shape = tuple(ref.type.shape)
  at = list(itertools.product(*(range(m) for m in shape)))
  if plan(shape) != "few" or cx.b.small_loads is None:
    return None if value is None else False
  conds = [element_of(cx, mask, idx) for idx in at]
  vals = [element_of(cx, value, idx) for idx in at] if value is not None else []
  if any(c is None for c in conds) or any(v is None for v in vals):
    return None if value is None else False
  from .access import scalar_load
  from .elementwise import where_
  if value is None:
    cx.b.small_loads.append(cx.loc)
    from .elementwise import full_
    from .small_parts import assemble
    fill = other if isinstance(other, ir.Value) else full_(cx, (), other, ref.type.dtype)
    parts = [fill if c is False else scalar_load(cx, _clamped_element(cx, ref, idx)) for c, idx in zip(conds, at)]
    return assemble(cx, shape, [p if c is True or c is False else where_(cx, c, p, fill)
                                for c, p in zip(conds, parts)])
  for c, s, idx in zip(conds, vals, at):
    if c is not False:
      _store_if(cx, c, ref, idx, s)
  return True
