"""Reshapes that move a tile's elements between threads, through an SMEM scratch.

A reshape is free where both sides keep the strided layout (contiguous vectors over the
flattened tensor): no element moves. A row-wise tile (reduced or broadcast along its rows,
layouts.py's ROWS) keeps each row in fixed threads, so reshaping it other than by size-1 axes
(int4 nibbles interleaved after a per-row scale, `(v * s[:, None]).reshape(n, 2)`; a loaded row
viewed as groups and reduced per group, `x.at[r][...].reshape(g, 128)`), or joining it to a 3-D
tensor (`lo[..., None]` for ml.concatenate's interleave), was MG204. The layout pass tags those
errors with the reshape (`tagged`); `assign_layouts_relayout` then sends that one reshape through
SMEM, as a transpose goes: every thread stores its elements at their row-major positions in a
flat scratch, a barrier (the sync pass's), every thread loads the elements of the result's
layout. Both sides then take their layouts apart, and the layouts are solved again. Kernels
whose layouts the pass solves at once are left exactly as they were.
"""
from __future__ import annotations

import dataclasses
import math

from . import errors as E
from . import ir
from .ir import LayoutRule, Traits
from .ops.memory import SmemAlloc
from .ops.shape import Broadcast, Reduce, ReduceKind, Reshape
from .dtypes import DType
from .types import RefType, Space, TensorType


def _effects(o):
  return [(o.scratch, ir.Access.REG_WRITE if isinstance(o, RelayoutStore) else ir.Access.REG_READ)]


@ir.op(Traits(effects=_effects, moves_elements=True))
class RelayoutStore(ir.Op):
  """Write the tensor `x` into the flat `scratch` in row-major order."""
  scratch: ir.Value
  x: ir.Value
  loc: object
  results: tuple = ()


@ir.op(Traits(effects=_effects, layout=LayoutRule.FRESH, moves_elements=True))
class RelayoutLoad(ir.Op):
  """Read the row-major elements of the flat `scratch` as the result's shape (in its own layout)."""
  scratch: ir.Value
  loc: object
  results: tuple


class CopyUse:
  """A culprit: the vector `op.x` that the broadcast `op` stretches is also used in another layout
  (a row statistic of one tile and a column vector of another: segsum's `cs[:, None] - cs[None, :]`
  of a computed `cs`). That use reads a copy made through SMEM, which takes its own layout."""
  def __init__(self, op):
    self.op = op


class CopyResult:
  """A culprit: the vector the reduction `op` gives (a row statistic of its tile) meets a vector of
  another layout in elementwise math (`ml.sum(v, axis=1) + ml.max(v, axis=0)`). Its uses read a copy
  made through SMEM, which takes the layout they need."""
  def __init__(self, op):
    self.op = op


def tagged(culprit, error: E.KernelError) -> E.KernelError:
  """`error`, marked as one a reshape through SMEM would avoid: `culprit` is the Reshape op, or the
  tensor of another rank joined to a row-wise tile (the op that made it is found here)."""
  error.relayout = culprit
  return error


def _movable(o) -> bool:
  """A reshape, a broadcast that only inserts size-1 axes (`lo[..., None]`), or a reduction that only removes
  them (reshape_'s, a (2, 1, 1, 64) statistic made (2, 64)): the same elements."""
  if not isinstance(o, (Reshape, Broadcast, Reduce)) or not isinstance(o.x.type, TensorType):
    return False
  if isinstance(o, Reduce) and not (isinstance(o.result.type, TensorType) and o.kind == ReduceKind.SUM
                                    and all(o.x.type.shape[a] == 1 for a in o.axes)):
    return False
  if isinstance(o, Broadcast) and math.prod(o.x.type.shape) != math.prod(o.result.type.shape):
    return False
  return math.prod(o.x.type.shape) > 0


def _find(kernel, culprit):
  """(block, position) of the op to send through SMEM, or None."""
  for o, block in _blocks(kernel.body):
    if o is culprit and _movable(o):
      return block, block.ops.index(o)
  if not isinstance(culprit, ir.Value):
    return None
  # the tensor of another rank: the reshape or axis insertion that made it, else the one it feeds
  # that brings it to the tile's rank
  made = [(o, b) for o, b in _blocks(kernel.body) if _movable(o) and culprit in o.results]
  fed = [(o, b) for o, b in _blocks(kernel.body) if _movable(o) and o.x is culprit]
  ones = lambda shape: tuple(n for n in shape if n != 1)
  for o, block in made + fed:
    src, dst = o.x.type.shape, o.result.type.shape
    if len(src) != len(dst) or ones(src) != ones(dst):
      return block, block.ops.index(o)
  # a tensor in its layout (computed elementwise from it, or it from them) reshaped elsewhere: a
  # per-group scale `s = ml.max(g.reshape(r * n, c), axis=1).reshape(r, n)` scaled and stretched as
  # `s[:, :, None]`, or two reductions' vectors reshaped and added
  # (or size-1 axes that join a 2-D tile's vector to a tensor of 3 or more axes: two middle-axis statistics of a
  # (2, 2, 8, 64) tile, each a (2, 64) tile made (2, 1, 1, 64), added, as ml.logsumexp's max and log-sum are)
  moves = lambda o: _movable(o) and (ones(o.x.type.shape) != ones(o.result.type.shape) or (
      len(o.x.type.shape) <= 2 < len(o.result.type.shape) or len(o.result.type.shape) <= 2 < len(o.x.type.shape)))
  # (a masked load or store joins its mask, value and result in one layout too: a tile loaded under an
  # index-grid mask, `k.at[...].load(mask=(idx < n)[:, None])`, is reached from the mask's arange)
  same = lambda o: ir.traits_of(o).layout in (LayoutRule.ELEMENTWISE, LayoutRule.MEMORY) and not _movable(o)
  # (else a size-1 axis added to or removed from a statistic that meets the culprit: two last-axis statistics
  # of a (1, r, c) tile, each the (r,) vector made (1, r), subtracted, as ml.logsumexp's max and log-sum are)
  ranked = lambda o: _movable(o) and len(o.x.type.shape) != len(o.result.type.shape)
  ops = list(_blocks(kernel.body))
  seen, todo, fallback = {culprit.id}, [culprit], None
  while todo:
    v, near = todo.pop(), []
    for o, block in ops:
      if any(r is v for r in o.results):
        if moves(o):
          return block, block.ops.index(o)
        fallback = fallback or (ranked(o) and (block, block.ops.index(o))) or None
        near += o.operands() if same(o) else []
      elif any(x is v for x in o.operands()):
        if moves(o) and o.x is v:
          return block, block.ops.index(o)
        near += o.results if same(o) else []
    for n in near:
      if isinstance(n, ir.Value) and isinstance(n.type, TensorType) and n.type.shape == v.type.shape and n.id not in seen:
        seen.add(n.id)
        todo.append(n)
  return fallback


def _blocks(block):
  for o in list(block.ops):
    yield o, block
    for r in o.regions:
      yield from _blocks(getattr(o, r))


def _through_smem(kernel, defs, block, i) -> None:
  o = block.ops[i]
  x, res = o.x, o.result
  v = _scratch(kernel, defs, x, o.loc, "reshape scratch")
  if block is kernel.body:
    i += 1
  store = RelayoutStore(v, x, o.loc)
  load = RelayoutLoad(v, o.loc, (res,))
  block.ops[i:i + 1] = [store, load]
  defs[res.id] = load


def _copy_use(kernel, defs, use: CopyUse):
  """Give the broadcast `use.op` a copy of its operand made through SMEM; None if it is gone."""
  o = use.op
  block = _block_of(kernel, o)
  if block is None:
    return None
  x = o.x
  v = _scratch(kernel, defs, x, o.loc)
  copy = ir.Value(TensorType(x.type.shape, x.type.dtype), x.name)
  load = RelayoutLoad(v, o.loc, (copy,))
  defs[copy.id] = load
  new = dataclasses.replace(o, x=copy)
  for r in new.results:
    defs[r.id] = new
  i = block.ops.index(o)
  block.ops[i:i + 1] = [RelayoutStore(v, x, o.loc), load, new]
  return True


def _copy_result(kernel, defs, use: CopyResult):
  """Give every use of the reduction `use.op`'s vector a copy made through SMEM; None if it is gone."""
  o = use.op
  block = _block_of(kernel, o)
  if block is None:
    return None
  r = o.results[0]
  v = _scratch(kernel, defs, r, o.loc)
  copy = ir.Value(TensorType(r.type.shape, r.type.dtype), r.name)
  mapping = {r: copy}
  kernel.body.ops[:] = [ir.substitute_deep(x, mapping) for x in kernel.body.ops]
  load = RelayoutLoad(v, o.loc, (copy,))
  i = block.ops.index(o)
  block.ops[i + 1:i + 1] = [RelayoutStore(v, r, o.loc), load]
  for x in ir.walk(kernel.body):
    for res in x.results:
      defs[res.id] = x
  return True


def _pair_atomics(kernel, defs) -> bool:
  """A float16/bfloat16 atomic max or min of a tensor the threads hold one element each of (a column
  amax, `ml.atomic_max(out, ml.max(ml.abs(v), axis=0))`): Hopper's `red` max and min update pairs of
  neighbouring elements, so the value is read through SMEM into the plain layout, which holds pairs
  where it has a multiple of 256 elements (check_atomic_layouts reports the others). Whether any was."""
  from .ops.atomic import AtomicKind, AtomicUpdate, odd_pairs
  from .ops.atomic_fetch import shared_olds
  done = False
  for o, block in list(_blocks(kernel.body)):
    t = getattr(o, "value", None)
    t = t.type if isinstance(t, ir.Value) else None
    if isinstance(o, AtomicUpdate) and isinstance(t, TensorType) and o.scratch is None and shared_olds(kernel, o):
      # (a tensor's old values that threads other than the `atom`'s hold too: handed through SMEM, probe 49c)
      new = dataclasses.replace(o, scratch=_scratch(kernel, defs, o.value, o.loc, "atomic values"))
      block.ops[block.ops.index(o)] = new
      defs[o.results[0].id] = new
      continue
    if not (isinstance(o, AtomicUpdate) and o.kind != AtomicKind.ADD and isinstance(t, TensorType)
            and o.ref.type.shape and t.dtype in (DType.f16, DType.bf16) and math.prod(t.shape) % 256 == 0
            and odd_pairs(t) and not isinstance(defs.get(o.value.id), RelayoutLoad)):
      continue
    x = o.value
    v = _scratch(kernel, defs, x, o.loc)
    copy = ir.Value(TensorType(x.type.shape, x.type.dtype), x.name)
    load = RelayoutLoad(v, o.loc, (copy,))
    defs[copy.id] = load
    i = block.ops.index(o)
    block.ops[i:i + 1] = [RelayoutStore(v, x, o.loc), load, dataclasses.replace(o, value=copy)]
    done = True
  return done


def _block_of(kernel, o):
  """The block that holds the op `o`, or None if it is gone."""
  return next((block for op, block in _blocks(kernel.body) if op is o), None)


def _scratch(kernel, defs, x, loc, name="vector scratch"):
  """A flat SMEM buffer of `x`'s elements, allocated at the kernel's start (a transient buffer)."""
  v = ir.Value(RefType((math.prod(x.type.shape),), x.type.dtype, Space.SMEM), name)
  alloc = SmemAlloc(loc, (v,))
  defs[v.id] = alloc
  kernel.smem.append(v)
  kernel.transient_ids = frozenset(getattr(kernel, "transient_ids", frozenset()) | {v.id})
  kernel.body.ops.insert(0, alloc)
  return v


SOLVES = [0]     # layout solves `assign_layouts_relayout` ran since import, one per conflict moved (tests count them)


def assign_layouts_relayout(kernel, defs, assign) -> None:
  """`assign(kernel, defs, memo)` (layouts.assign_layouts); each reshape it reports as moving a row-wise
  tile's elements goes through SMEM instead, and so does each broadcast of a vector that another
  use gives another layout (`CopyUse`), and each float16/bfloat16 atomic max or min of a statistic held
  one element a thread (`_pair_atomics`); then the layouts are solved again (`memo`: the ops' constraints, collected
  once across the solves, frontend/layout_memo.py)."""
  memo = None      # (most kernels are solved at once: recording what their ops add would only cost)
  tries = 64 + sum(_movable(o) for o, _ in _blocks(kernel.body))   # (each reshape at most once: Triton's bitonic
  for n in range(tries):                                             # sort of 256 moves 100 through SMEM)
    memo = {} if n == 1 else memo
    try:
      SOLVES[0] += 1
      assign(kernel, defs, memo)
      if not _pair_atomics(kernel, defs):
        return None
      continue
    except E.LayoutError as e:
      culprit = getattr(e, "relayout", None)
      if isinstance(culprit, (CopyUse, CopyResult)):
        if (_copy_use if isinstance(culprit, CopyUse) else _copy_result)(kernel, defs, culprit) is None:
          raise
        continue
      where = _find(kernel, culprit) if culprit is not None else None
      if where is None:
        raise
      _through_smem(kernel, defs, *where)
  SOLVES[0] += 1
  return assign(kernel, defs, memo)
