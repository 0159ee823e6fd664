"""`ml.sort((keys, values, ...), num_keys=1)`: jax.lax.sort of several operands (and `jax.lax.sort_key_val`), a
key-value sort: the tokens of an MoE batch ordered by their expert with their positions carried along, a sparse
row's column indices with its values.

No op of its own: one `Sort` of the first key gives the order (its positions), and every other operand is gathered
at them (a register gather through SMEM, `v[pos]`, or `ml.take_along_axis(v, pos, -1)` of rows). Several keys
sort as a stable sort does them one by one, the least significant first: each later sort takes the order so far
and keeps it among equal keys, so the result is ordered lexicographically by the keys (jax's `num_keys`). The sorted
first key is the sort's own values; the other keys are gathered like the values.

`sort_wide`: an int64 tensor (jax_enable_x64; probe 51n) sorts the same way as the pair of 32-bit keys it is, its
high word (signed) the more significant, its low word (unsigned) the less: the low words sorted first (with the
caller's order of ties), the high words gathered at that order and sorted stably, the low words gathered at the
result, and the two words joined again. Its positions are the composed order, as jnp.argsort's."""
from __future__ import annotations

import contextlib
import math

from .. import errors as E
from . import padded_tiles
from .padded_tiles import PadAbort
from .base import check_register_value, is_tensor, kind_of, shown


def _gather(cx, v, pos):
  """v at the positions `pos` along its last axis (v and pos of one shape), or None where no gather takes it."""
  from .register_gather import register_gather, take_along
  from .shape import reshape_
  shape = tuple(v.type.shape)
  if len(shape) == 1:
    return register_gather(cx, v, (pos,), cx.name)
  if len(shape) == 2:
    return take_along(cx, v, pos, 1)
  flat = (math.prod(shape[:-1]), shape[-1])
  got = take_along(cx, reshape_(cx, v, flat), reshape_(cx, pos, flat), 1)
  return None if got is None else reshape_(cx, got, shape)


def sort_together(cx, xs, axis, descending, num_keys):
  from .sort import sort_tensor
  if not xs:
    raise E.KernelTypeError("ml.sort of no operands", cx.loc, hint="pass the keys, then the values: ml.sort((k, v))")
  for x in xs:
    check_register_value(cx, x, "ml.sort")
    if not is_tensor(x):
      raise E.KernelTypeError(f"ml.sort sorts register tensors, got {kind_of(x)} among its operands", cx.loc,
                              hint="read each operand into registers first (v[...]), all of one shape")
  shape = tuple(xs[0].type.shape)
  if any(tuple(x.type.shape) != shape for x in xs):
    raise E.ShapeMismatchError("ml.sort's operands must have one shape, got "
                               + ", ".join(str(tuple(x.type.shape)) for x in xs), cx.loc,
                               hint="broadcast them first: ml.broadcast_to(v, k.shape)")
  if not isinstance(num_keys, int) or isinstance(num_keys, bool) or not 1 <= num_keys <= len(xs):
    raise E.KernelTypeError(f"ml.sort: num_keys is a static int from 1 to the {len(xs)} operands, got"
                            f" {shown(num_keys)}", cx.loc, hint="num_keys=1 sorts by the first operand")
  rank = len(shape)
  if isinstance(axis, int) and not isinstance(axis, bool) and rank and -rank <= axis < rank \
      and axis % rank != rank - 1:
    raise E.KernelTypeError(f"ml.sort sorts along the last axis; axis {axis} of a {rank}-D tensor is not it", cx.loc,
                            hint="transpose every operand first (v.T), and the results back")
  late = False             # ties keep their order, descending too (as jnp.argsort(descending=True))
  # A padded read's operands (100 tokens in 104 lanes): the sort keeps the padding where it is, so the gathers
  # take each padding lane's own element, and the results are padded as the operands (ops/padded_tiles.py).
  owns = {padded_tiles.true_shape(cx.b, x) for x in xs}
  own = owns.pop() if len(owns) == 1 else None
  if own is None:
    raise PadAbort("operands padded apart")
  padded = own != shape
  def gathered(v, at):
    with padded_tiles.allowed(cx) if padded else contextlib.nullcontext():
      got = _need(cx, _gather(cx, v, at), v)
    if padded:                    # (padded as its operands: the next sort keeps its padding in place)
      cx.b.pad_tiles[got.id] = own
    return got

  order, keys = None, list(xs[:num_keys])
  for k in reversed(keys):        # the least significant key first; each stable sort keeps the order so far
    key = k if order is None else gathered(k, order)
    vals, pos = sort_tensor(cx, key, axis, descending, "ml.sort", late_first=late)
    order = pos if order is None else gathered(order, pos)
  return tuple([vals] + [gathered(x, order) for x in xs[1:]])


def sort_wide(cx, x, axis, descending, what, late_first):
  """(values, int32 positions) of the int64 tensor `x` sorted along its last axis (1- or 2-D), as sort_tensor's."""
  from . import elementwise as ew
  from ..dtypes import DType
  from .sort import sort_tensor
  own = padded_tiles.true_shape(cx.b, x)
  padded = own != tuple(x.type.shape)
  def gathered(v, at):
    with padded_tiles.allowed(cx) if padded else contextlib.nullcontext():
      got = _need(cx, _gather(cx, v, at), x)
    if padded:
      cx.b.pad_tiles[got.id] = own
    return got
  def word(f):
    with padded_tiles.allowed(cx) if padded else contextlib.nullcontext():
      got = f()
    if padded:
      cx.b.pad_tiles[got.id] = own
    return got
  hi = word(lambda: ew.astype(cx, ew.binary(cx, ew.BinOp.SHR, x, 32), DType.i32))
  lo = word(lambda: ew.astype(cx, x, DType.u32))        # (the low 32 bits, unsigned)
  lo_sorted, first = sort_tensor(cx, lo, axis, descending, what, late_first)
  hi_sorted, second = sort_tensor(cx, gathered(hi, first), axis, descending, what, False)
  order, lo_final = gathered(first, second), gathered(lo_sorted, second)
  vals = word(lambda: ew.binary(cx, ew.BinOp.OR, ew.binary(cx, ew.BinOp.SHL, ew.astype(cx, hi_sorted, DType.i64), 32),
                                ew.astype(cx, lo_final, DType.i64)))
  return vals, order


def _need(cx, got, x):
  if got is None:
    raise E.LayoutError(
        f"ml.sort cannot carry {cx.named(x)} of shape {tuple(x.type.shape)} along: a register gather takes a"
        f" multiple of 128 elements (a 1-D vector a multiple of 8)", cx.loc,
        hint="sort the keys' positions, p = ml.argsort(keys), and gather each operand from the array it was read"
             " from, x[p] (a gather of a GMEM ref takes any shape)")
  return got
