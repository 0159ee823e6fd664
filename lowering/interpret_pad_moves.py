"""Interpret mode's padding lanes (MG953, lowering/interpret_padding.py) through the ops that move a register
tensor's elements: transposes (`v.T`, a store through `buf.T`), permutes and strided slices, reshapes through
SMEM, rolls, flips and column slices; and through gathers whose indices are padding.

Each goes through a flat SMEM scratch the compiler allocates: a store of the tensor's elements (TransposeStore,
RelayoutStore) and a load of them in another order. The store keeps the lane states of what it wrote (and the
arrays whose data it held, interpret_padding's `fresh`), keyed by the scratch; the load takes them in the order
it takes the elements, with the same index arithmetic as its interpreter rule (lowering/shape.py). Before
probe 48f the load's result was data (REAL): a padded tile transposed, or stored through `buf.T`, and then
reduced gave wrong numbers with no error.

A gather (`t.at[ids, :][...]`, `v[ids]` of a register tensor) whose index lanes are padding (ids a masked load read
past its array's end, `other=0`) reads an element for no index there, row 0 of an embedding table: those lanes
are PAD (an embedding bag summing the rows of a tail of ids counted row 0 once per padding lane).
"""
from __future__ import annotations

import numpy as np

from ..frontend import ir
from ..frontend.ops.gather import Gather
from ..frontend.ops.permute import RestrideLoad, TransposeLoad, TransposeStore
from ..frontend.ops.register_gather import ScratchGather
from ..frontend.ops.roll import FlipLoad, RollLoad
from ..frontend.ops.column_slices import Slice
from ..frontend.relayout import RelayoutLoad, RelayoutStore
from . import interpret_padding as P


def _stored(cta, o):
  """TransposeStore / RelayoutStore: the lane states of `o.x` (in its shape), where they hold padding."""
  cta.scratch_lanes.pop(o.scratch.id, None)
  st = P.state(cta, o.x)
  src = P._source(cta, o.x)
  fresh = cta.fresh.get(o.x.id) if isinstance(o.x, ir.Value) else None
  if src is None or not isinstance(st, np.ndarray):
    return
  cta.scratch_lanes[o.scratch.id] = (np.broadcast_to(st, o.x.type.shape).copy(), src, fresh)


def _moved(index):
  """The rule of a load that reads the scratch's elements through `index(o, states)` (the stored tensor's
  states, in its own shape) -> the result's states."""
  def rule(cta, o):
    have = cta.scratch_lanes.get(o.scratch.id)
    if have is None:
      return
    st, src, fresh = have
    P._set(cta, o.result, np.ascontiguousarray(index(o, st)).astype(np.int8), src)
    if fresh:
      cta.fresh[o.result.id] = fresh
  return rule


def _restride(o, st):
  flat = st.reshape(-1)
  idx = np.indices(o.result.type.shape).reshape(len(o.result.type.shape), -1)
  pos = o.offset + sum(i * s for i, s in zip(idx, o.strides))
  return flat[pos].reshape(o.result.type.shape)


def _slice(cta, o):
  """`v[:, a:b]` of a padded tile: its columns' states."""
  st = P.state(cta, o.x)
  if isinstance(o.x, ir.Value) and o.x.id in cta.fresh:
    cta.fresh[o.result.id] = cta.fresh[o.x.id]
  if not isinstance(st, np.ndarray):
    if P._is(st, P.NEUTRAL):
      cta.neutral.add(o.result.id)
    return
  P._set(cta, o.result, np.broadcast_to(st, o.x.type.shape)[:, o.start:o.stop].copy(), P._source(cta, o.x))


def _index_pad(cta, indices, shape):
  """(where the index lanes of `indices` are padding, in `shape`, the load they came from) or (None, None)."""
  pad, src = None, None
  for ix in indices:
    st = P.state(cta, ix)
    if isinstance(st, np.ndarray) and P._source(cta, ix) is not None:
      p = np.broadcast_to(st, shape) == P.PAD
      if p.any():
        pad = p if pad is None else pad | p
        src = src or P._source(cta, ix)
  return pad, src


def _gather(cta, o):
  pad, src = _index_pad(cta, o.indices, o.result.type.shape)
  if pad is not None:
    cta.pad_gathers.setdefault(id(src), o)
    P._set(cta, o.result, np.where(pad, P.PAD, P.REAL).astype(np.int8), src)


def _scratch_gather(cta, o):
  """`v[ids]` of a register tensor: the states of the elements it picks, PAD where its index lanes are padding."""
  shape = o.result.type.shape
  have = cta.scratch_lanes.get(o.scratch.id)
  st = None
  if have is not None:
    st = have[0].reshape(-1)[np.asarray(cta.get(o.pos)).astype(np.int64)].reshape(shape)
  pad, src = _index_pad(cta, (o.pos,), shape)
  if pad is not None:
    cta.pad_gathers.setdefault(id(src), o)
    st = np.where(pad, P.PAD, st if st is not None else P.REAL)
  src = src or (have[1] if have is not None else None)
  if st is not None and src is not None:
    P._set(cta, o.result, np.asarray(st).astype(np.int8), src)


RULES = {
    Gather: _gather,
    ScratchGather: _scratch_gather,
    TransposeStore: _stored,
    RelayoutStore: _stored,
    TransposeLoad: _moved(lambda o, st: st.T),
    RelayoutLoad: _moved(lambda o, st: st.reshape(o.result.type.shape)),
    RestrideLoad: _moved(_restride),
    FlipLoad: _moved(lambda o, st: np.flip(st.reshape(o.result.type.shape), axis=o.axes)),
    RollLoad: _moved(lambda o, st: np.roll(st.reshape(o.result.type.shape) if o.axis is not None else st.reshape(-1),
                                           -o.shift, axis=o.axis).reshape(o.result.type.shape)),
    Slice: _slice,
}
