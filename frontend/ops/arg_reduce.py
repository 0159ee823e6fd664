"""ml.argmax and ml.argmin: the index of the first extreme along an axis (NaN the extreme, as jnp's), as the
reductions of reduce.py compute it (the extreme, then the least index where it is met); of a whole tensor, the
index into it flattened."""
from __future__ import annotations

import math

from .. import errors as E
from ..dtypes import DType
from . import elementwise as ew
from .elementwise_checks import method_on
from .elementwise_fns import arange
from .base import builtin, check_register_value, is_tensor, shown
from .shape import ReduceKind, reshape_
from . import padded_tiles, small_parts
from .spread import rehint
from .reduce import _axes, _flat_plan, keep_arg, reduce
from ..types import resolve


def _arg(cx, x, axis, kind, what):
  check_register_value(cx, x, what)
  if is_tensor(x) and axis is None and len(x.type.shape) == 1:
    axis = 0                                    # as jnp: the index into the (already flat) vector
  if is_tensor(x) and axis is None and len(x.type.shape) > 1:
    return _flat_arg(cx, x, kind, what)
  if not is_tensor(x) or not isinstance(axis, int) or isinstance(axis, bool):
    rank = len(x.type.shape) if is_tensor(x) else 2
    name = method_on(cx.named(x, "x")) if is_tensor(x) else "x"
    hint = f"{what}({name}, axis={rank - 1})"
    if not is_tensor(x):
      hint = f"{what} indexes a tensor: the index into a scalar would be 0"
    raise E.KernelTypeError(f"{what} takes a register tensor and one static axis or None", cx.loc, hint=hint)
  shape = x.type.shape
  (a,) = _axes(cx, axis, len(shape), what)
  if (few := small_parts.arg_small(cx, x, a, kind)) is not None:
    return few               # (a small tensor held as a vector: each index a scalar, ops/small_parts.py)
  if len(shape) > 2 and a in (0, len(shape) - 1) and _flat_plan(shape, (a,)) is None:
    reduce(cx, kind, x, axis, False, what=what)   # (indices too few for a tensor of the kept shape: its MG204)
  given, x = x, _comparable(cx, x)
  best = reduce(cx, kind, x, axis, True, what=what)     # (the axis as the user wrote it, for messages)
  iota = arange.apply(cx, (shape[a],), {})
  iota = reshape_(cx, iota, tuple(n if i == a else 1 for i, n in enumerate(shape)))
  hits = _hits(cx, x, best)
  own = padded_tiles.true_shape(cx.b, hits)      # an odd read computed padded: the indices past its own
  if own != tuple(shape):                        # elements are padding, which the least index never takes
    with padded_tiles.allowed(cx):               # (a real one holds the extreme), and its reduction drops
      picked = ew.where_(cx, hits, iota, shape[a])
    cx.b.pad_tiles[picked.id] = own
  else:
    picked = ew.where_(cx, hits, iota, shape[a])
  r = reduce(cx, ReduceKind.MIN, picked, a, False)
  return rehint(cx, r, given, a, what)     # (a small middle-axis one, ops/spread.py: its store's hint of the argmax)


def _flat_arg(cx, x, kind, what):
  """jnp's index into the flattened tile (row-major) of its first extreme: the extreme over
  everything, then the least flat index of the elements equal to it (or NaN, as jnp)."""
  shape = x.type.shape
  if math.prod(shape) >= 2 ** 31:
    raise E.KernelTypeError(f"{what} of a tile of {math.prod(shape)} elements: the flat index would not fit"
                            f" int32", cx.loc, hint=f"{what}(..., axis=...) along one axis")
  own = padded_tiles.true_shape(cx.b, x)          # an odd read computed padded: its own shape's flat indices
  x = _comparable(cx, x)
  best = reduce(cx, kind, x, None, False, what=what)
  flat, stride = None, 1
  for a in reversed(range(len(shape))):           # sum over axes of iota_a * stride_a, broadcast
    iota = arange.apply(cx, (shape[a],), {})
    iota = reshape_(cx, iota, tuple(n if i == a else 1 for i, n in enumerate(shape)))
    term = iota if stride == 1 else ew.binary(cx, ew.BinOp.MUL, iota, stride)
    flat = term if flat is None else ew.binary(cx, ew.BinOp.ADD, term, flat)
    stride *= own[a]
  hits = _hits(cx, x, best)
  if own == tuple(shape):
    return reduce(cx, ReduceKind.MIN, ew.where_(cx, hits, flat, stride), None, False)
  with padded_tiles.allowed(cx):                  # (the padding's indices, which count the padded width, are
    picked = ew.where_(cx, hits, flat, stride)    # dropped by the reduction: the least index is a real one)
  cx.b.pad_tiles[picked.id] = own
  return reduce(cx, ReduceKind.MIN, picked, None, False)


def _hits(cx, x, best):
  """x == best, and NaNs: a NaN is the extreme, as in jnp (max and min propagate it, and x == NaN is
  never true)."""
  hit = ew.compare(cx, ew.CmpOp.EQ, x, best)
  d = resolve(x.type.dtype)
  if isinstance(d, DType) and d.is_float:
    hit = ew.binary(cx, ew.BinOp.OR, hit, ew.compare(cx, ew.CmpOp.NE, x, x))
  return hit


def _comparable(cx, x):
  """Bools and 8-bit values as 32-bit ones (exact), which the reductions compare."""
  d0 = resolve(x.type.dtype)
  if d0 == DType.bool_:      # as jnp: the first True (argmax) or False (argmin)
    return ew.astype(cx, x, DType.i32)
  if isinstance(d0, DType) and d0.bits < 16:    # 8-bit: compared in 32 bits (exact)
    return ew.astype(cx, x, DType.f32 if d0.is_float else DType.i32 if d0.is_signed else DType.u32)
  return x


@builtin(methods=("argmax",))
def argmax(cx, x, axis=None, keepdims=False, tie_break_left=True):
  """The index of the first maximum of `x` along `axis` (int32); axis=None: the index into the
  flattened `x` (row-major, as jnp); with keepdims, that axis kept with size 1 (jnp's,
  `ml.argmax(x, axis=1)[:, None]`). Triton's `tie_break_left=True` is that first index."""
  _left(cx, tie_break_left, "ml.argmax", x, axis)
  return _kept(cx, _arg(cx, x, axis, ReduceKind.MAX, "ml.argmax"), x, axis, keepdims, "ml.argmax")


@builtin(methods=("argmin",))
def argmin(cx, x, axis=None, keepdims=False, tie_break_left=True):
  """The index of the first minimum of `x` along `axis` (int32); see ml.argmax."""
  _left(cx, tie_break_left, "ml.argmin", x, axis)
  return _kept(cx, _arg(cx, x, axis, ReduceKind.MIN, "ml.argmin"), x, axis, keepdims, "ml.argmin")


def _left(cx, left, what, x, axis):
  """Triton's tie_break_left=: True is the first index of the extreme value (what the index is here)."""
  if left is True:
    return
  xs = method_on(cx.named(x, "x")) if is_tensor(x) else "x"
  ax = axis if isinstance(axis, int) and not isinstance(axis, bool) else "axis"
  raise E.KernelTypeError(f"{what}'s tie_break_left= must be True, got {shown(left)}: the index here is the first"
                          f" one", cx.loc,
                          hint=f"for the last index of the extreme value, take the first of the flipped axis:"
                               f" {xs}.shape[{ax}] - 1 - {what}(ml.flip({xs}, {ax}), {ax})" if left is False else
                               "drop tie_break_left= (the first index of the extreme value, Triton's"
                               " tie_break_left=True)")


def _kept(cx, r, x, axis, keepdims, what):
  if not keep_arg(cx, keepdims, what, x, axis):
    return r
  from .shape import expand
  rank = len(x.type.shape)
  a = (0 if axis is None else axis) % rank
  if rank == 1 or axis is None:        # one index, kept as a (1, ...) tensor: a scalar stretched
    return ew.full_(cx, (1,) * rank, r, DType.i32)
  return expand(cx, r, tuple(None if k == a else slice(None) for k in range(rank)))
