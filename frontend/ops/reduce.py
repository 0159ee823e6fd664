"""Reductions of register tensors: ml.sum, ml.mean, ml.max, ml.min (ml.argmax and ml.argmin: arg_reduce.py).

A partial reduction keeps a 2-D tile's rows or columns as a vector (`ml.max(s, axis=1)` is one
value per row); a full reduction gives a scalar, usable in scalar math and in a runtime `if`
(with keepdims=True, that scalar stretched to (1, ..., 1)). The IR op is shape.Reduce, which
shape's reshapes also emit; frontend/layouts.py chooses the layouts that make it possible.
"""
from __future__ import annotations

import dataclasses
import math

from .. import errors as E, hw
from .. import ir
from ..dtypes import DType, FLOAT8
from ..types import ScalarType, TensorType, dtype_name, resolve
from . import elementwise as ew
from .elementwise_checks import method_on
from .base import builtin, check_register_value, is_tensor, is_value, kind_of, shown
from .product_hints import product_hint as _product_hint
from .shape import READ_2D_FIRST, Reduce, ReduceKind, Reshape, reshape_
from . import padded_tiles, small_parts, small_regrid
from .slab_reduce import leading_slabs
from .spread import refuse, spread_reduce
from .reduce_hints import _reshape_hint, _slices_hint, _small_result_hint  # (spread.py imports one from here)

# ---------------------------------------------------------------- reductions
def _axes(cx, axis, rank, what):
  if axis is None:
    return tuple(range(rank))
  axes = axis if isinstance(axis, tuple) else (axis,)
  out = []
  for a in axes:
    if not isinstance(a, int) or isinstance(a, bool):
      pair = {"ml.max": "ml.maximum", "ml.min": "ml.minimum"}.get(what)
      tensor = isinstance(a, ir.Value)
      from .elementwise_checks import _call_args
      two = _call_args(cx.text or "", 2) or ("a", "b")       # Liger's tl.max(m, blk_max) of two scalars
      raise E.KernelTypeError(f"{what}: axis must be a static int or a tuple of them, got"
                              f" {kind_of(a) if tensor else repr(a)}", cx.loc,
                              hint=f"{what} reduces one tensor; the elementwise {what[3:]} of two is"
                                   f" {pair}({two[0]}, {two[1]})"
                              if pair and tensor else "e.g. axis=1 (along each row) or axis=None (everything)")
    if not -rank <= a < rank:
      raise E.IndexOutOfBoundsError(
          f"{what}: axis {a} is out of range for a tensor of rank {rank}", cx.loc,
          hint=f"axes run from {-rank} to {rank - 1}")
    out.append(a % rank)
  if len(set(out)) != len(out):
    raise E.KernelTypeError(f"{what}: axis {axis} repeats an axis", cx.loc, hint="name each axis once")
  return tuple(sorted(out))


def keep_arg(cx, keepdims, what, x=None, axis=None):
  """`keepdims` as a bool. A dtype (jnp's third positional argument of sum, mean, var and std is
  dtype; ours is keepdims) or a register value is rejected: it was taken as True."""
  import numpy as np
  if isinstance(keepdims, (bool, np.bool_)) or (isinstance(keepdims, int) and keepdims in (0, 1)):
    return bool(keepdims)
  from ..dtypes import to_dtype
  src = method_on(cx.named(x)) if is_tensor(x) else "x"
  ax = f"axis={axis!r}" if axis is not None else "axis=None"
  if to_dtype(keepdims) is not None and not isinstance(keepdims, (int, float, str)):
    d = shown(keepdims)
    if what in ("ml.argmax", "ml.argmin"):
      hint = f"{what}'s third argument is keepdims; its indices are int32: {what}({src}, {ax}).astype({d})"
    else:
      fix = f"{what}({src}, {ax}, dtype={d})" if what == "ml.sum" else f"{what}({src}.astype({d}), {ax})"
      hint = f"{what}'s third argument is keepdims" + (" (jnp's is dtype)" if what in ("ml.sum", "ml.mean") else "") + f": {fix}"
  else:
    hint = f"keepdims=True keeps the reduced axes with size 1: {what}({src}, {ax}, keepdims=True)"
  raise E.KernelTypeError(f"{what}: keepdims must be True or False, got {shown(keepdims)}", cx.loc, hint=hint)


def reduce(cx, kind: ReduceKind, x, axis, keepdims, what=None):
  what = what or f"ml.{kind.value}"
  check_register_value(cx, x, what)
  if not is_tensor(x):
    return _of_scalar(cx, kind, x, axis, what)
  if x.id in cx.b.spread:        # (a small middle-axis statistic: held spread, for broadcasting back)
    refuse(cx, x, f"to reduce ({what})")
  shape = x.type.shape
  axes = _axes(cx, axis, len(shape), what)
  if (padded := padded_tiles.unpadded_reduce(cx, kind, x, axes, keepdims)) is not None:
    return padded_tiles.reduced(cx, lambda: reduce(cx, kind, padded[0], axis, keepdims, what), padded[1])
  if (few := small_parts.reduce_small(cx, kind, x, axes, keepdims, what)) is not None:
    return few             # (a small tensor held as a vector, or a small mask: each result a full reduction)
  small_regrid.check_reduce(cx, x, axes, axis, keepdims, what)      # (a small mask reduced along an axis: MG204, in its words)
  if len(axes) == len(shape) and not keepdims and len(shape) > 1 and math.prod(shape) % hw.WARPGROUP \
      and isinstance(op := cx.b.defining(x), Reshape) and len(op.x.type.shape) == 1:
    # All of a small statistic (a (1, 2, 16) row max of a tile, the vector of its 2-D reshape's rows, typed
    # with that shape): all of that vector.
    return reduce(cx, kind, op.x, None, False, what)
  if keepdims and len(axes) == len(shape):      # jnp's (1, ..., 1): the scalar, stretched where it is used
    res = reduce(cx, kind, x, axis, False, what)
    return ew.full_(cx, (1,) * len(shape), res, res.type.dtype)
  d = resolve(x.type.dtype)
  given = x
  if d == DType.bool_ and kind in (ReduceKind.MAX, ReduceKind.MIN):   # (jnp's: whether any holds; whether all do)
    r = reduce(cx, kind, ew.astype(cx, x, DType.i32), axis, keepdims, what)
    return ew.compare(cx, ew.CmpOp.NE, r, 0)
  if kind == ReduceKind.SUM and d == DType.bool_:      # as jnp.sum: booleans count as 0 and 1, in int32
    x = ew.astype(cx, x, DType.i32)
    d = DType.i32
  if kind == ReduceKind.SUM and isinstance(d, DType) and d.is_int and d.bits < 32:
    # As jnp.sum: narrow integers accumulate in, and give, int32 (uint32 if unsigned); a
    # 16-bit accumulator wrapped (128 x 1000 summed to -3072).
    x = ew.astype(cx, x, DType.i32 if d.is_signed else DType.u32)
    d = resolve(x.type.dtype)
  # Every kept axis of size 1 where no row-wise layout holds the tile ((1, 1, k) decode scores, an (n, 1) column,
  # the one row of a (1, 64) tile): one element a result, the full reduction stretched to the result's shape.
  one_each = (len(axes) < len(shape) and all(n == 1 for i, n in enumerate(shape) if i not in axes)
              and (len(shape) > 2 or shape[-1] == 1 or not hw.rows_fit(*shape)))
  if kind != ReduceKind.SUM and d in FLOAT8 and one_each:     # (an 8-bit float scalar the GPU cannot make)
    src, ax = method_on(cx.named(given)), f"axis={axis!r}"
    raise E.UnsupportedDtypeError(
        f"{what} over {ax} of a {dtype_name(d)} tensor of shape {shape} is one element: an 8-bit float scalar,"
        f" which the GPU cannot make (a float8 tensor keeps its dtype along an axis of several results)", cx.loc,
        hint=f"convert first and keep the result in float32: {what}({src}.astype(jnp.float32), {ax}), stored into a"
             f" float32 output")
  if (kind != ReduceKind.SUM and isinstance(d, DType) and d != DType.bool_ and d.bits < 16
      and (d.is_int or d.is_float and len(axes) < len(shape))):
    # 8-bit max and min: in 32 bits (exact), then back to the dtype, as jnp keeps it (float8_e5m2's
    # infinities kept: `astype` gives jnp's values past the range). Not for a full reduction of a
    # float8 (an 8-bit float scalar cannot be made on the GPU).
    wide = ew.astype(cx, x, DType.f32 if d.is_float else DType.i32 if d.is_signed else DType.u32)
    return ew.narrowed(cx, reduce(cx, kind, wide, axis, keepdims, what), d)
  one = ew.one_element_scalar(cx, x)
  if one is not None:
    # One element (a full reduction with keepdims=True, ml.full((1, 1), s)): its reduction is that
    # element, as a scalar or stretched again (such a tensor is not held in registers by itself).
    out = tuple(1 for i in range(len(shape)) if keepdims or i not in axes)
    return ew.stretch(cx, out, one) if out else one
  if one_each:       # (an (n, 1) column has no row-wise layout; no register tensor holds one element by itself)
    res = reduce(cx, kind, x, None, False, what)
    return ew.stretch(cx, tuple(1 for i in range(len(shape)) if keepdims or i not in axes), res)
  if isinstance(d, DType) and (d == DType.bool_ or d.bits < 16):
    src = method_on(cx.named(given))
    if d.is_float and kind != ReduceKind.SUM:     # max/min of float8: along an axis only
      raise E.UnsupportedDtypeError(
          f"{what} of all of a {dtype_name(d)} tensor is not supported: the result would be an 8-bit float scalar,"
          f" which the GPU cannot make (along an axis it keeps the dtype)", cx.loc,
          hint=f"convert first, {what}({src}.astype(jnp.float32))"
               + (f"; or reduce along an axis, {what}({src}, axis=1)" if len(shape) > 1 else ""))
    raise E.UnsupportedDtypeError(
        f"{what} of {dtype_name(d)} values is not supported", cx.loc,
        hint=f"convert first: {src}.astype(jnp.float32)")
  if (squeezed := _unit_squeezed(cx, kind, x, shape, axes, keepdims, what)) is not None:
    return squeezed
  nbytes = math.prod(shape) * (d.itemsize if isinstance(d, DType) else 4)
  if len(shape) == 3 and nbytes > hw.SMEM_LIMIT and (hint := _product_hint(cx, given, shape, axes, kind)):
    # (a broadcast product too large for the SMEM scratch that its broadcast and this reduction move it through)
    raise E.SmemCapacityError(
        f"{what} over axis {axis} of the broadcast product {shape} ({nbytes} bytes) moves the product between"
        f" threads through SMEM, more than the {hw.SMEM_LIMIT} bytes ({hw.SMEM_WORDS}) a kernel's buffers can use",
        cx.loc, hint=hint)
  if len(axes) < len(shape) and len(shape) > 2 and (plan := _flat_shape(shape, axes)) is not None and (
      keepdims or len(shape) - len(axes) > 2 or _flat_plan(shape, axes) is not None
      or not _product_hint(cx, given, shape, axes, kind)):       # (a small product's reduction: ml.dot's hint)
    # A leading or trailing run of axes of a 3-D (or wider) tensor: the 2-D reduction of its reshape
    # (through SMEM where the layouts need it), reshaped back, as the user would write it; with keepdims,
    # to the tensor's rank (a group softmax's (r, n, 1) statistic, which broadcasts along its last axis). A kept
    # shape of fewer than 128 elements is the vector of the 2-D tile's rows typed with that shape (a small
    # statistic: elementwise math, size-1 axes inserted and broadcasts back take it, a store is MG204); so is one
    # of three or more axes without keepdims (the (1, 2, 16) row max of per-head scores, then m[..., None]).
    rows, cols, lead, kept = plan
    back = tuple(1 if i in axes else n for i, n in enumerate(shape)) if keepdims else kept
    res = reduce(cx, kind, reshape_(cx, x, (rows, cols)), 0 if lead else 1, False, what)
    if math.prod(kept) % hw.WARPGROUP and (keepdims or len(kept) > 1):
      return cx.b.emit(Reshape, res, loc=cx.loc, types=[TensorType(back, res.type.dtype)], names=[res.name]).result
    return reshape_(cx, res, back)
  if (slabs := leading_slabs(cx, kind, x, axes, keepdims)) is not None:    # ((2, 3, 64) over axis 0: slab by slab)
    return slabs
  if keepdims and len(axes) < len(shape) and len(shape) > 2 and (few := _few_kept(cx, kind, x, shape, axes, what)):
    return few
  if (spread := spread_reduce(cx, kind, x, axes, keepdims, what, _small_result_hint(cx, given, shape, axes, what,
                                                                                     False))) is not None:
    return spread          # (a middle axis whose kept part is too small: spread back along it, ops/spread.py)
  if (outer := _outer_runs(shape, axes)) is not None:   # (the 3-D reshape's (0, 2) vector, typed with the shape)
    res = reduce(cx, kind, reshape_(cx, x, outer), (0, 2), False, what)
    back = tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)
    return cx.b.emit(Reshape, res, loc=cx.loc, types=[TensorType(back, res.type.dtype)], names=[res.name]).result
  if (hint := _small_result_hint(cx, given, shape, axes, what, keepdims)) is not None:
    # (a result of two or more axes with fewer than 128 elements, over axes no 2-D reshape reduces)
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    raise E.LayoutError(
        f"{what} over axis {axis} of a {len(shape)}-D tensor {shape} keeps axes of sizes {kept}: {math.prod(kept)}"
        f" elements, too few for a register tensor of more than one axis (a multiple of 128; a 1-D vector may hold"
        f" any multiple of 8)", cx.loc, hint=hint)
  if len(axes) == 1 and len(shape) > 2 and 0 < axes[0] < len(shape) - 1:
    # A middle axis of a 3-D (or wider) tensor (time in a (heads, time, d) chunk): the scan along it from
    # the end, each slab of the axes before it apart, holds the reduction at the axis's first position.
    from .scan import ScanKind, scan
    from .shape import index_through_smem
    a = axes[0]
    res = index_through_smem(cx, scan(cx, ScanKind(kind.value), x, a, True, what),
                             tuple(0 if k == a else slice(None) for k in range(len(shape))))
    return reshape_(cx, res, tuple(1 if k == a else n for k, n in enumerate(shape))) if keepdims else res
  if 1 < len(axes) < len(shape) and len(shape) > 2 and (order := _split_order(shape, axes)) is not None:
    # Axes that are no run of leading or trailing ones (a per-channel max over (0, 2) of an (h, c, w) tile): the
    # last of them reduced first, then the others; or, where that leaves too few elements for a register tensor
    # and one axis is kept (an (8,) statistic of a (4, 8, 32) tile), the others first, then the last. Each is a
    # reduction the compiler takes (sums and extremes combine in any order, as jnp's do).
    first, then = order
    part = reduce(cx, kind, x, first, False, what)
    res = reduce(cx, kind, part, then, False, what)
    return reshape_(cx, res, tuple(1 if i in axes else n for i, n in enumerate(shape))) if keepdims else res
  if not keepdims and len(axes) < len(shape) and len(shape) > 2 and (few := _few_kept(cx, kind, x, shape, axes, what,
                                                                                     False)):
    return few             # (the (2,) channel sums of a (2, 32, 2) tile: the few full reductions, probe 53a)
  if len(axes) < len(shape) and len(shape) > 2 and not (prod := _product_hint(cx, given, shape, axes, kind)) and (
      few := _few_hint(cx, given, shape, axes, what)):
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    sizes = f"axes of sizes {kept}" if len(kept) > 1 else f"an axis of size {kept[0]}"
    raise E.LayoutError(
        f"{what} over axis {axis} of a {len(shape)}-D tensor {shape} keeps {sizes}: {math.prod(kept)} elements, too"
        f" few for a register vector (a multiple of 8)", cx.loc, hint=few)
  if len(axes) < len(shape) and len(shape) > 2 and not prod and (moved := _axes_first(cx, kind, x, axes, what)):
    return reshape_(cx, moved, tuple(1 if i in axes else n for i, n in enumerate(shape))) if keepdims else moved
  if len(axes) < len(shape) and len(shape) > 2:
    raise E.LayoutError(
        f"{what} over axis {axis} of a {len(shape)}-D tensor {shape}: partial reductions work on"
        f" 1-D and 2-D tensors", cx.loc,
        hint=prod or _slices_hint(cx, kind, given, shape, axes, keepdims, what)
        or _reshape_hint(cx, given, shape, axes, what) or READ_2D_FIRST)
  if len(axes) == len(shape):
    res = cx.b.emit(Reduce, kind, x, axes, loc=cx.loc, types=[ScalarType(x.type.dtype)],
                    names=[cx.name]).result
    return ew.full_(cx, (1,) * len(shape), res, x.type.dtype) if keepdims else res
  out = tuple(n for i, n in enumerate(shape) if i not in axes)
  res = cx.b.emit(Reduce, kind, x, axes, loc=cx.loc, types=[TensorType(out, x.type.dtype)],
                  names=[cx.name]).result
  if keepdims:
    res = reshape_(cx, res, tuple(1 if i in axes else n for i, n in enumerate(shape)))
  return res


def _unit_squeezed(cx, kind, x, shape, axes, keepdims, what):
  """A 3-D (or wider) tensor whose axes but two or fewer are of size 1 (a decode GEMV's (1, k, n) broadcast product
  of a batch of one token, `ml.sum(x[:, :, None] * w[None, :, :], axis=1)`), reduced along some of its other axes:
  the reduction of its 2-D (or 1-D) squeeze, reshaped to the result's shape; None otherwise. (Probe 68b: the middle
  axis's scan below held the (1, n) result as a row of the 3-D tensor, MG204 where a loop carried it.)"""
  big = [i for i, n in enumerate(shape) if n != 1]
  if len(shape) < 3 or len(big) > 2 or not any(i in axes for i in big) or all(i in axes for i in big):
    return None
  kept = tuple(n for i, n in enumerate(shape) if keepdims or i not in axes)
  inner = tuple(shape[i] for i in big)
  res = reduce(cx, kind, reshape_(cx, x, inner), tuple(k for k, i in enumerate(big) if i in axes), False, what)
  return reshape_(cx, res, tuple(1 if keepdims and i in axes else n for i, n in enumerate(shape)
                                 if keepdims or i not in axes)) if kept != res.type.shape else res


def _bare(what) -> str:
  """The op's name in `what` (`ml.sum`, or `.sum` for the method): `sum`."""
  return what.lstrip(".").removeprefix("ml.")


def _as_call(what) -> str:
  """`what` as a function call's name: the method `.sum` is `ml.sum`."""
  return f"ml{what}" if what.startswith(".") else what


FEW_KEPT = 8      # a keepdims statistic of at most this many elements no plan holds: as many masked full reductions


def _few_kept(cx, kind, x, shape, axes, what, keepdims=True):
  """A sum, max or min of a 3-D (or wider) `x` over axes no 2-D reshape or split order reduces, whose statistic holds
  at most FEW_KEPT elements (the (1, 2, 1) channel sums of a (4, 2, 32) tile): each element the full reduction of x
  where the kept axes' index is its own, selected into an index grid of the statistic's shape, which broadcasts back
  wherever it meets the tile (frontend/index_grids.py); without keepdims, into a grid of the kept shape (its (2,)
  sums, probe 53a); None for any other."""
  kept = [i for i in range(len(shape)) if i not in axes]
  if kind not in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN) or math.prod(shape[i] for i in kept) > FEW_KEPT:
    return None
  out = tuple(1 if i in axes else n for i, n in enumerate(shape))
  flat = small_parts.flat_grid(cx, out)      # (the kept axes' row-major index, an index grid of the statistic's shape)
  ident = 0 if kind == ReduceKind.SUM else extreme_identity(kind, resolve(x.type.dtype))
  parts = [reduce(cx, kind, ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, flat, j), x, ident), None, False, what)
           for j in range(math.prod(out))]
  if not keepdims:
    out = tuple(shape[i] for i in kept)
    flat = small_parts.flat_grid(cx, out)
  return small_parts.assemble(cx, out, parts, flat)     # (stored whole: an element at a time, ops/few_stats.py)


def _few_hint(cx, x, shape, axes, what):
  """How to compute a result of at most FEW_KEPT elements no plan holds (the (2,) channel sums of a (4, 2, 32)
  tile; too few for a register vector): each element a full reduction with where=, stored one at a time; None
  for a reduction that takes no where= or any other result."""
  kept = [i for i in range(len(shape)) if i not in axes]
  if math.prod(shape[i] for i in kept) > FEW_KEPT or _bare(what) not in ("sum", "max", "min", "mean", "var", "std",
                                                                        "logsumexp"):
    return None
  src = cx.named(x)
  names = "jkl"[:len(kept)] if len(kept) <= 3 else None
  if names is None:
    return None
  grid = lambda a: "ml.arange({})[{}]".format(shape[a], ", ".join(":" if i == a else "None" for i in range(len(shape))))
  mask = " & ".join(f"({grid(a)} == {n})" for a, n in zip(kept, names)) if len(kept) > 1 else f"{grid(kept[0])} == j"
  loops = "".join(f"for {n} in ml.static_range({shape[a]}): " for a, n in zip(kept, names))
  return (f"compute each element as the full reduction of the elements it keeps and store it alone, {loops}out[{', '.join(names)}] ="
          f" {_as_call(what)}({src}, where={mask}); or keep the reduced axes, keepdims=True, for a statistic that"
          f" broadcasts back against {src}")


def _outer_runs(shape, axes):
  """The 3-D shape of a reduction over a leading and a trailing run of axes around kept ones too few for a register
  tensor ((0, 3) of a (2, 2, 8, 64) tile: (2, 16, 64)) whose (0, 2) reduction the compiler takes; else None."""
  n, kept = len(shape), [i for i in range(len(shape)) if i not in axes]
  if n < 4 or len(kept) < 2 or kept[0] == 0 or kept[-1] == n - 1 or kept[-1] - kept[0] + 1 != len(kept) or not (
      math.prod(shape[i] for i in kept) % hw.WARPGROUP):
    return None
  out = (math.prod(shape[:kept[0]]), math.prod(shape[i] for i in kept), math.prod(shape[kept[-1] + 1:]))
  return out if _split_order(out, (0, 2)) is not None and hw.rows_fit(out[1], out[2]) else None


def _axes_first(cx, kind, x, axes, what):
  """The reduction of a 3-D (or wider) tensor over axes no plan above takes, every order of them leaving too few
  elements for a register tensor (a (2, 32, 2) tile over axes (0, 2): 64 left either way), as the reduction of its
  leading run once they are moved first: x permuted through SMEM, its kept axes in their order ((2, 2, 32), reduced
  over (0, 1) as its (4, 32) reshape along axis 0, probe 53a; a (2, 16, 2, 2) one over (0, 2) keeps the small (16, 2)
  statistic of its (4, 32) reshape's columns); None where x holds no register tensor or no 2-D reshape of the moved
  tile reduces (the error below stands)."""
  from .permute import permute_tensor
  shape = tuple(x.type.shape)
  kept = tuple(i for i in range(len(shape)) if i not in axes)
  moved = tuple(shape[i] for i in axes + kept)
  lead = tuple(range(len(axes)))
  if math.prod(shape) % hw.WARPGROUP or _flat_shape(moved, lead) is None:
    return None
  return reduce(cx, kind, permute_tensor(cx, x, tuple(axes) + kept), lead, False, what)


def _split_order(shape, axes):
  """(axes reduced first, the axes of what they leave reduced then) of a reduction over axes that are no
  leading or trailing run, each step leaving a multiple of 128 elements (a register tensor), one axis, or, where
  the tensor's last axis goes last, the rows of its 2-D reshape (the (2, 8) max over axes (1, 3) of a (2, 2, 8, 64)
  tile); None where no order does."""
  left = lambda gone: math.prod(n for i, n in enumerate(shape) if i not in gone)
  if left((axes[-1],)) % hw.WARPGROUP == 0:
    return axes[-1], axes[:-1]
  if left(axes[:-1]) % hw.WARPGROUP == 0 and (len(shape) - len(axes) == 1 or axes[-1] == len(shape) - 1 and hw.rows_fit(
      left(axes), shape[-1])):
    # (one axis left, or the last axis reduced last: the rows of a 2-D reshape, a small statistic where few)
    return axes[:-1], axes[-1] - len(axes[:-1])
  return None


def _flat_shape(shape, axes):
  """(rows, cols, whether the reduced axes lead, the kept shape) of the 2-D tile a reduction over a
  leading or trailing run of axes reduces (one a row-wise layout holds: hw.rows_fit); None for any other."""
  n = len(shape)
  lead = tuple(range(len(axes))) == tuple(sorted(axes))
  trail = tuple(range(n - len(axes), n)) == tuple(sorted(axes))
  if not (lead or trail):
    return None
  red = math.prod(shape[a] for a in axes)
  kept = tuple(shape[a] for a in range(n) if a not in axes)
  rows, cols = (red, math.prod(kept)) if lead else (math.prod(kept), red)
  if not hw.rows_fit(rows, cols):   # (narrow rows too: groups of 8 of a (r, n, 8) tile)
    return None
  return rows, cols, lead, kept


def _flat_plan(shape, axes):
  """_flat_shape's tile, where the compiler reduces it itself: a kept shape of 2 or more axes a multiple
  of 128 elements, as a result reshaped back must hold; None for any other."""
  plan = _flat_shape(shape, axes)
  if plan is None or len(plan[3]) > 1 and math.prod(plan[3]) % hw.WARPGROUP:
    return None
  return plan


def _of_scalar(cx, kind, x, axis, what):
  """jnp's reduction of a 0-d value (a full reduction's scalar, reduced again): the value itself, in
  the dtype the reduction gives (a sum of a bool or an 8- or 16-bit integer in 32 bits)."""
  if isinstance(axis, ir.Value) or isinstance(axis, (float, bool)):
    _axes(cx, axis, 1, what)     # tl.max(m, blk_max) of two scalars: its error names ml.maximum (probe 60b)
  if isinstance(x, (bool, int, float)) and axis in (None, ()):      # a Python number: itself
    return int(x) if kind == ReduceKind.SUM and isinstance(x, bool) else x
  if not isinstance(getattr(x, "type", None), ScalarType) or axis not in (None, ()):
    scalar = isinstance(getattr(x, "type", None), ScalarType)
    raise E.KernelTypeError(
        f"{what} reduces a register tensor, got {kind_of(x)}" + (f" and axis={axis!r} (a scalar has no axes)"
                                                               if scalar else ""), cx.loc,
        hint=f"{what}({cx.named(x)}) with no axis is the scalar itself" if scalar else
        f"read the ref into registers first: {what}(ref[...], axis=...)")
  d = resolve(x.type.dtype)
  if kind == ReduceKind.SUM and isinstance(d, DType) and (d == DType.bool_ or d.is_int and d.bits < 32):
    return ew.astype(cx, x, DType.u32 if d != DType.bool_ and not d.is_signed else DType.i32)
  return x


@builtin(methods=("sum",))
def sum_(cx, x, axis=None, keepdims=False, dtype=None, where=None, initial=None, promote_integers=True):
  """The sum of `x` over `axis` (an int, a tuple, or None for all: a scalar).

  `ml.sum(x, axis=1)` of an (m, n) tile is the (m,) vector of row sums. float16 and
  bfloat16 values are summed in float32 and rounded once, as `jnp.sum` does; 8- and 16-bit
  integers are summed in, and give, int32 (uint32 if unsigned), as `jnp.sum` does. `dtype`, as
  jnp's: the elements converted to it first, and a result of that dtype (`ml.sum(m, dtype=jnp.int32)`).
  `where=` (a mask that broadcasts to x, a number mask by its truth): the elements it keeps, as jnp's;
  `initial=` (a number or scalar) is added to the sum, as jnp's; `promote_integers=False` sums 8- and 16-bit
  integers in their own dtype (wrapping), as jnp's (`v.sum(promote_integers=False)`, since probe 53b).
  """
  from .base import dtype_arg
  if promote_integers is False and dtype is None and is_tensor(x):
    xd = resolve(x.type.dtype)
    if isinstance(xd, DType) and xd.is_int and xd.bits < 32:
      dtype = xd
  x = kept_only(cx, x, where, False if is_tensor(x) and resolve(x.type.dtype) == DType.bool_ else 0, "ml.sum", True)
  keepdims = keep_arg(cx, keepdims, "ml.sum", x, axis)
  d = dtype_arg(cx, dtype, "ml.sum's dtype", optional=True)
  if d is None or not is_tensor(x):
    return _with_initial(cx, ReduceKind.SUM, reduce(cx, ReduceKind.SUM, x, axis, keepdims), initial, "ml.sum", x, axis)
  r = reduce(cx, ReduceKind.SUM, ew.astype(cx, x, d), axis, keepdims)
  return _with_initial(cx, ReduceKind.SUM, r if resolve(r.type.dtype) == d else ew.astype(cx, r, d), initial, "ml.sum",
                       x, axis)


def _with_initial(cx, kind, r, initial, what, x, axis):
  """A reduction's result `r` (of `x` over `axis`) combined with jnp's `initial=` (added to a sum, the max or
  min with a max or min: what an empty reduction gives); `r` itself without one."""
  if initial is None:
    return r
  call = f"{what}({cx.named(x, 'x')}" + ("" if axis is None else f", axis={axis!r}")
  if is_tensor(initial) or not isinstance(initial, (int, float)) and not isinstance(getattr(initial, "type", None),
                                                                                   ScalarType):
    pair = {ReduceKind.SUM: "{} + {}", ReduceKind.MAX: "ml.maximum({}, {})", ReduceKind.MIN: "ml.minimum({}, {})"}
    raise E.KernelTypeError(f"{what}: initial= takes a number or a scalar, got {kind_of(initial)}", cx.loc,
                            hint=f"combine a tensor after the reduction: {pair[kind].format(call + ')', cx.named(initial))}"
                            if is_tensor(initial) else f"a number: {call}, initial=0)")
  d = resolve(r.type.dtype) if isinstance(getattr(r, "type", None), (ScalarType, TensorType)) else None
  # jnp converts initial to the result's dtype (jnp.max(ints, initial=c) stays int; a float16 sum stays float16)
  if isinstance(getattr(initial, "type", None), ScalarType) and d is not None and resolve(initial.type.dtype) != d:
    initial = ew.astype(cx, initial, d)
  elif d == DType.bool_:
    initial = bool(initial)
  elif isinstance(d, DType) and d.is_int and isinstance(initial, float):
    lo, hi = d.int_range
    if not (initial.is_integer() and lo <= initial <= hi):
      raise E.DtypeMismatchError(
          f"{what}'s initial ({initial}) is no {dtype_name(d)} value, the result's dtype", cx.loc,
          hint=f"a whole number in {dtype_name(d)}'s range ({lo}..{hi}), or convert first for a float result:"
               f" {what}({method_on(cx.named(x, 'x'))}.astype(jnp.float32)"
               + ("" if axis is None else f", axis={axis!r}") + f", initial={initial})")
    initial = int(initial)
  op = {ReduceKind.SUM: ew.BinOp.ADD, ReduceKind.MAX: ew.BinOp.MAX, ReduceKind.MIN: ew.BinOp.MIN}[kind]
  return ew.binary(cx, op, r, initial)


def extreme_identity(kind, d):
  """What a max (kind MAX) or min of dtype `d` ignores: its lowest (highest) value, -inf (inf) for floats,
  False (True) for booleans."""
  from .atomic import AtomicKind, identity
  if d == DType.bool_:
    return kind == ReduceKind.MIN
  return identity(AtomicKind.MAX if kind == ReduceKind.MAX else AtomicKind.MIN, d)


def kept_only(cx, x, where, identity, what, grow=False, axis=None):
  """`x` with `identity` where the mask `where` is off (jnp's `where=` of a reduction), broadcast to x's
  shape; `x` itself without one. `grow`: x may broadcast to the mask's shape too, as jnp's sum, max, min,
  any and all select before reducing (`ml.max(v[:, None], axis=0, where=ids[:, None] == ml.arange(n)[None, :])`,
  a segment max: n columns); jnp's mean, var and std count the mask at x's shape, so there it is an error."""
  if where is None:
    return x
  check_register_value(cx, x, what)
  if not is_tensor(where) or not is_tensor(x):
    raise E.KernelTypeError(f"{what}: where= takes a mask tensor that broadcasts to a tensor x, got {kind_of(where)}"
                            f" for {kind_of(x)}", cx.loc, hint=f"{what}(v, axis=1, where=ml.arange(n)[None, :] < k)")
  from .shape import broadcast_shape
  joint = broadcast_shape(cx, [where.type.shape, x.type.shape], f"{what}'s where=",
                          [cx.named(where, "the mask"), cx.named(x, "x")], (where, x))
  if joint != x.type.shape and not grow:
    raise E.ShapeMismatchError(f"{what}'s where= of shape {where.type.shape} does not broadcast to x's {x.type.shape}",
                               cx.loc, hint=f"{what} counts the elements the mask keeps of x's own shape, as jnp's:"
                               f" broadcast x to the mask's first, {what}(ml.broadcast_to({cx.named(x, 'x')}, {joint}),"
                               + ("" if axis is None else f" axis={axis!r},") + f" where={cx.named(where, 'm')})")
  return ew.where_(cx, where, x, identity)


def stat_dtype(cx, x, dtype, what):
  """jnp's `dtype=` of a mean, var or std: (x converted to the dtype it computes in, the result's dtype), as
  jnp's: a float dtype's own, float16 and bfloat16 computing in float32 (`jnp.mean(v_bf16, dtype=jnp.float32)`
  sums the elements in float32 and gives float32; `jnp.var(v, dtype=jnp.bfloat16)` computes in float32 and
  rounds once); (x, None) without one."""
  from .base import dtype_arg
  d = dtype_arg(cx, dtype, f"{what}'s dtype", optional=True)
  if d is None:
    return x, None
  if not d.is_float or d.bits < 16:
    src = method_on(cx.named(x)) if is_tensor(x) else "x"
    raise E.UnsupportedDtypeError(
        f"{what} with dtype={dtype_name(d)} is not supported (a mean, var or std computes in a float of 16 bits"
        f" or more)", cx.loc, hint=f"give a float dtype, {what}({src}, dtype=jnp.float32), or convert the result:"
        f" {what}({src}).astype(jnp.{dtype_name(d)})")
  c = DType.f32 if d.bits == 16 else d
  if is_value(x) and isinstance(getattr(x, "type", None), (ScalarType, TensorType)) and resolve(x.type.dtype) != c:
    x = ew.astype(dataclasses.replace(cx, name=x.name or cx.named(x)), x, c)
  return x, d


def as_stat_dtype(cx, r, d):
  """A statistic `r` in the dtype `d` that jnp's `dtype=` asked for (itself without one)."""
  if d is None or not is_value(r) or resolve(r.type.dtype) == d:
    return r
  return ew.astype(cx, r, d)


@builtin(methods=("mean",))
def mean(cx, x, axis=None, keepdims=False, where=None, dtype=None):
  """The mean of `x` over `axis`: `ml.sum` divided by the number of elements, as `jnp.mean`
  (integers give float32; float16/bfloat16 are summed and divided in float32, rounded once).
  `where=` (a mask that broadcasts to x): the mean of the elements it keeps (NaN where it keeps none).
  `dtype=`, as jnp's: the elements converted to it (float16 and bfloat16 to float32) and summed, the mean
  given in it (`ml.mean(v_bf16, axis=1, dtype=jnp.float32)`)."""
  check_register_value(cx, x, "ml.mean")
  if dtype is not None:
    y, d = stat_dtype(cx, x, dtype, "ml.mean")
    return as_stat_dtype(cx, mean.rule(cx, y, axis, keepdims, where), d)
  keepdims = keep_arg(cx, keepdims, "ml.mean", x, axis)
  if where is not None and not is_tensor(x):
    kept_only(cx, x, where, 0, "ml.mean")          # (a scalar has no elements to keep: an error)
  if not is_tensor(x):     # a scalar's mean is itself, integers and booleans as float32
    x = _of_scalar(cx, ReduceKind.MAX, x, axis, "ml.mean")
    if not isinstance(getattr(x, "type", None), ScalarType):
      return float(x)
    return x if resolve(x.type.dtype).is_float else ew.astype(cx, x, DType.f32)
  d = resolve(x.type.dtype)
  if isinstance(d, DType) and d.is_float and d.bits < 16:     # as ml.sum of float8 (jnp's mean rounds in f8)
    raise E.UnsupportedDtypeError(
        f"ml.mean of {dtype_name(d)} values is not supported", cx.loc,
        hint=f"convert first: {method_on(cx.named(x))}.astype(jnp.float32)")
  if where is not None:
    return masked_mean(cx, x, where, axis, keepdims, "ml.mean")
  axes = _axes(cx, axis, len(x.type.shape), "ml.mean")
  n = math.prod(padded_tiles.true_shape(cx.b, x)[a] for a in axes)     # (a padded tile's count: its own)
  if keepdims and len(axes) == len(x.type.shape):   # jnp's (1, ..., 1): the scalar mean, stretched
    res = mean.rule(cx, x, axis, False)
    return ew.full_(cx, (1,) * len(x.type.shape), res, res.type.dtype)
  if isinstance(d, DType) and d != DType.f32:
    # ints and bools -> float32; narrow floats round once at the end (the copy named as x: messages
    # about the tile reduced name the user's value, not the mean's result)
    x = ew.astype(dataclasses.replace(cx, name=x.name or cx.named(x)), x, DType.f32)
  s = reduce(cx, ReduceKind.SUM, x, axis, keepdims, what="ml.mean")
  m = ew.binary(cx, ew.BinOp.DIV, s, float(n))
  if isinstance(d, DType) and d.is_float and d != DType.f32:
    m = ew.astype(cx, m, d)
  return m


@builtin(methods=("max",))
def max_(cx, x, axis=None, keepdims=False, initial=None, where=None, return_indices=False,
         return_indices_tie_break_left=True):
  """The maximum of `x` over `axis` (None: everything, a scalar); NaN if any is NaN. jnp's `where=`:
  of the elements it keeps (the dtype's lowest value, -inf, where it keeps none); `initial=`: the
  maximum with it too. Triton's `return_indices=True`: the pair (ml.max, ml.argmax) of one axis."""
  return _extreme(cx, ReduceKind.MAX, x, axis, keepdims, initial, where, "ml.max",
                  (return_indices, return_indices_tie_break_left))


@builtin(methods=("min",))
def min_(cx, x, axis=None, keepdims=False, initial=None, where=None, return_indices=False,
         return_indices_tie_break_left=True):
  """The minimum of `x` over `axis` (None: everything, a scalar); NaN if any is NaN; `where=`,
  `initial=` and `return_indices=` as ml.max's (inf, or the dtype's highest value, where the mask keeps
  nothing)."""
  return _extreme(cx, ReduceKind.MIN, x, axis, keepdims, initial, where, "ml.min",
                  (return_indices, return_indices_tie_break_left))


def _extreme(cx, kind, x, axis, keepdims, initial, where, what, indices=(False, True)):
  if indices != (False, True):
    return _with_indices(cx, kind, x, axis, keepdims, initial, where, what, *indices)
  if where is not None:
    check_register_value(cx, x, what)
    x = kept_only(cx, x, where, extreme_identity(kind, resolve(x.type.dtype)) if is_tensor(x) else 0, what, True)
  r = reduce(cx, kind, x, axis, keep_arg(cx, keepdims, what, x, axis), what)
  return _with_initial(cx, kind, r, initial, what, x, axis)


def masked_mean(cx, x, where, axis, keepdims, what):
  """jnp.mean(x, axis, where=m): the sum of the elements the mask keeps over their count, in float32
  (rounded once to a 16-bit float x's dtype); NaN where it keeps none."""
  d = resolve(x.type.dtype)
  y = x if d == DType.f32 else ew.astype(dataclasses.replace(cx, name=x.name or cx.named(x)), x, DType.f32)
  s = reduce(cx, ReduceKind.SUM, kept_only(cx, y, where, 0.0, what, axis=axis), axis, keepdims, what)
  ones = ew.full_(cx, y.type.shape, 1.0, DType.f32)
  m = ew.binary(cx, ew.BinOp.DIV, s, reduce(cx, ReduceKind.SUM, kept_only(cx, ones, where, 0.0, what), axis,
                                            keepdims, what))
  return ew.astype(cx, m, d) if d.is_float and d != DType.f32 else m


def _with_indices(cx, kind, x, axis, keepdims, initial, where, what, indices, left):
  """Triton's `tl.max(x, axis, return_indices=True)` (and tl.min's): the extreme and the index of its
  first occurrence along `axis`, the pair ml.max / ml.argmax computes (Triton's tie_break_left=True,
  its default; NaN is the extreme, as both take it)."""
  arg = "ml.arg" + what[3:]
  for name, v in (("return_indices", indices), ("return_indices_tie_break_left", left)):
    if not isinstance(v, bool):
      raise E.KernelTypeError(f"{what}'s {name}= must be a static bool, got {shown(v)}", cx.loc,
                              hint=f"{name}=True or False (a Python bool or a constexpr)")
  if not indices:
    return _extreme(cx, kind, x, axis, keepdims, initial, where, what)
  xs = method_on(cx.named(x, "x")) if is_tensor(x) else "x"
  if where is not None or initial is not None:
    given = "where=" if where is not None else "initial="
    ident = "float('-inf')" if kind == ReduceKind.MAX else "float('inf')"
    raise E.KernelTypeError(f"{what}(..., return_indices=True) takes no {given}", cx.loc,
                            hint=f"select first, with the reduction's identity where the mask is off:"
                                 f" v = ml.where(m, {xs}, {ident}); {what}(v, axis, return_indices=True)")
  if not left:
    raise E.KernelTypeError(f"{what}(..., return_indices_tie_break_left=False): the index here is the first one",
                            cx.loc, hint=f"drop return_indices_tie_break_left= ({arg} takes the first index of the"
                                         f" extreme value); for the last, x.shape[axis] - 1 - {arg}(ml.flip(x, axis),"
                                         f" axis)")
  value = _extreme(cx, kind, x, axis, keepdims, None, None, what)
  from .arg_reduce import argmax, argmin
  index = (argmax if kind == ReduceKind.MAX else argmin).rule(cx, x, axis, keepdims)
  return value, index
