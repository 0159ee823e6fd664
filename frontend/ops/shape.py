"""Shape ops on register tensors: broadcasting, reshapes, indexing, concatenation, transposes,
and the Reduce op (its builtins, ml.sum and the others, are in reduce.py; column slices of tensor-core
tiles, the Slice op, in column_slices.py).

Broadcasting follows NumPy: shapes align at the trailing axes and size-1 axes
stretch; `x[:, None]` and `x[None, :]` insert axes. frontend/layouts.py chooses register
layouts that make each of them possible without moving data through SMEM where it can.
"""
from __future__ import annotations

import enum
import math

from .. import errors as E, hw, ir
from ..dtypes import DType
from ..ir import LayoutRule, Traits
from ..types import ScalarType, TensorType, dtype_name, resolve
from ..infer import unify
from ..shape_hints import align_hint, insert_axes_hint, window_hint, outer_hint, padded_for, scalar_reshape_hint
from . import elementwise as ew, padded_meets, padded_tiles, static_tiles
from .base import builtin, check_register_value, is_tensor, is_value, kind_of, static_shape, unroll_hint, shown
from .vector_views import check_vector_reshape, held_reshape
from .window_hints import register_window_hint
from .broadcast_nd import (copied_axes, flattened_plan, flattens, index_small, kept_last_plan, small_shape, small_source,
                           trailing_first, two_step_plan, unit_result_axes)
from .scratches import scratch
from .column_slices import slice_columns
from .permute import transpose_tensor
from .spread import broadcast as spread_broadcast, refuse as spread_refuse, reshaped as spread_reshaped
from .small_regrid import regrid
from .scalar_shapes import scalar_reshaped
from .elementwise_checks import method_on


class ReduceKind(enum.Enum):
  SUM = "sum"
  MAX = "max"
  MIN = "min"


@ir.op(Traits(layout=LayoutRule.BROADCAST, pure=True))
class Broadcast(ir.Op):
  """`x` repeated along the result's other axes: x's axis i is the result's axis dims[i] (where
  x has size 1 and the result more, it stretches). NumPy broadcasting aligns trailing axes;
  `x[:, None]` puts a new axis after x's."""
  x: ir.Value
  dims: tuple
  loc: object
  results: tuple


@ir.op(Traits(layout=LayoutRule.ELEMENTWISE, pure=True))
class Reshape(ir.Op):
  """`x` with another shape of the same size (size-1 axes inserted or removed, or a strided
  tensor's shape changed); no data moves."""
  x: ir.Value
  loc: object
  results: tuple


@ir.op(Traits(layout=LayoutRule.REDUCE, pure=True, splits=True))   # full reductions only
class Reduce(ir.Op):
  """`x` reduced over `axes` (all of them: a scalar). `scratch`: SMEM for a reduction across
  warps, set by frontend/smem.py's scratch planning once layouts are known."""
  kind: ReduceKind
  x: ir.Value
  axes: tuple
  loc: object
  results: tuple
  scratch: ir.Value | None = None


# ---------------------------------------------------------------- broadcasting
def broadcast_shape(cx, shapes, what, names, values=()):
  """NumPy's broadcast of `shapes`; a ShapeMismatchError naming both shapes when impossible."""
  rank = max(len(s) for s in shapes)
  out = []
  for d in range(rank):
    sizes = {s[d - rank + len(s)] for s in shapes if d - rank + len(s) >= 0}
    big = sizes - {1}
    if len(big) > 1:
      (a, na), (b, nb) = [(s, n) for s, n in zip(shapes, names)
                          if d - rank + len(s) >= 0 and s[d - rank + len(s)] != 1][:2]
      sa, sb, pad = a[d - rank + len(a)], b[d - rank + len(b)], padded_for(cx.b, names, values)   # (a 3-channel tile read padded)
      raise E.ShapeMismatchError(
          f"{what} on {na} of shape {a} and {nb} of shape {b}: the shapes do not broadcast"
          f" (axis {d} of the result would be both {sa} and {sb})",
          cx.loc, hint="shapes broadcast as in NumPy: trailing axes align and size-1 axes stretch;"
                       + (pad(sa, sb, nb, d - rank + len(b)) if sa > sb else pad(sb, sa, na, d - rank + len(a)))
                       + (window_hint(na, nb) or insert_axes_hint(a, na, b, nb) or outer_hint(a, na, b, nb, what) or align_hint(a, na, b, nb)
                          or " insert axes with v[:, None] or v[None, :]"))
    out.append(big.pop() if big else 1)
  return tuple(out)


READ_2D_FIRST = ("read the tensor in the 2-D shape you reduce: reshape the array outside the kernel"
                 " (x.reshape(-1, c), free in XLA) and load 2-D windows of it, or load each leading index"
                 " 2-D (x.at[i][...]) in an ml.static_range loop; a register tile cannot be reshaped into one")


def broadcast_to_shape(cx, x, shape, dims=None):
  """`x` broadcast to `shape` (no op when it already has it; a filled tensor is filled anew).
  `dims`: the result axis of each of x's axes; NumPy's trailing alignment by default."""
  shape = tuple(shape)
  if x.type.shape == shape:
    return x
  dims = tuple(range(len(shape) - len(x.type.shape), len(shape))) if dims is None else tuple(dims)
  if (made := static_tiles.filled(cx, x, shape, dims)) is not None:
    return made       # (a fill filled anew; an integer table known while compiling made at the shape: probe 52e)
  if x.id in cx.b.spread and (spread := spread_broadcast(cx, x, shape, dims)) is not None:
    return spread           # (a small middle-axis statistic broadcast back: its spread tile, ops/spread.py)
  flat = flattened_plan(x.type.shape, shape, dims)      # into 3-D: a 2-D broadcast between reshapes
  if flat is not None and flattens(cx.b.defining, x):
    return reshape_(cx, broadcast_to_shape(cx, reshape_(cx, x, flat[0]), flat[1]), shape)
  mid = two_step_plan(x.type.shape, shape, dims) if flat is None else None
  if mid is not None and flattens(cx.b.defining, x):      # leading and trailing axes stretched: one run, then the other
    return broadcast_to_shape(cx, broadcast_to_shape(cx, x, mid), shape)
  if (again := regrid(cx, x, shape, dims, early=True)) is not None:
    return again      # (a mask whose own broadcast no layout takes, meeting its tile: at the tile's shape)
  copies = copied_axes(x.type.shape, shape, dims) if flat is None else None
  if copies and flattens(cx.b.defining, x) and (mid := trailing_first(x.type.shape, shape, dims)) is not None:
    return broadcast_to_shape(cx, broadcast_to_shape(cx, x, mid), shape)    # (a small x: its trailing axes first)
  if copies and flattens(cx.b.defining, x) and math.prod(x.type.shape) % hw.WARPGROUP == 0:
    y = reshape_(cx, x, (1,) * (len(shape) - len(x.type.shape)) + tuple(x.type.shape))
    for k in copies:                # a middle axis stretched: copies of x along it, through SMEM
      y = concatenate.rule(cx, [y] * shape[k], k)
    return broadcast_to_shape(cx, y, shape)
  name = x.name if math.prod(shape) == math.prod(x.type.shape) else None   # (a repeat of x is not x)
  if math.prod(shape) == math.prod(x.type.shape) and len(x.type.shape) > 2 and len(shape) > 3:
    return reshape_(cx, x, shape)     # (size-1 axes inserted into 4-D or wider, as such a reshape does)
  if (again := regrid(cx, x, shape, dims)) is not None:
    return again      # (a small mask of per-row lengths meeting its tile: computed at the tile's shape, ops/small_regrid.py)
  if (fewer := unit_result_axes(x.type.shape, shape, dims)) is not None and flattens(cx.b.defining, x):
    return reshape_(cx, broadcast_to_shape(cx, reshape_(cx, x, fewer[0]), *fewer[1:]), shape)  # (size-1 axes out)
  if (last := kept_last_plan(x.type.shape, shape, dims)) is not None and flattens(cx.b.defining, x):
    from .permute import permute_tensor       # (kept axes between stretched ones, no plan above: probe 53a)
    moved = reshape_(cx, broadcast_to_shape(cx, reshape_(cx, x, last[0]), last[1]), last[2])
    return permute_tensor(cx, moved, last[3], name or "")
  return cx.b.emit(Broadcast, x, dims, loc=cx.loc, types=[TensorType(shape, x.type.dtype)], names=[name]).result


def broadcast_operands(cx, operands, what):
  """The operands with every tensor broadcast to their common shape, and that shape (None: no
  tensor among them)."""
  tensors = [x for x in operands if is_tensor(x)]
  if not tensors:
    return tuple(operands), None
  names = [cx.named(x, "a tensor") for x in tensors]     # the user's text where it is an operand
  from .one_element import one_element_operands
  if (lone := one_element_operands(cx, operands, tensors)) is not None:
    operands, tensors = lone, [x for x in lone if is_tensor(x)]
  if getattr(cx.b, "pad_tiles", None) is not None:       # (a row of a padded tile's own width: widened, probe 46j)
    from .padded_meets import widen_rows, widen_to_hold
    operands = widen_to_hold(cx, widen_rows(cx, operands))     # (a result no layout holds: grown too, probe 53a)
    tensors = [x for x in operands if is_tensor(x)]
  shape = broadcast_shape(cx, [x.type.shape for x in tensors], what, names, tensors)
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is not None and any(is_tensor(x) and x.id in pads and x.type.shape != shape for x in operands):
    from .padded_tiles import allowed
    with allowed(cx):       # (a padded one into 3-D, through reshapes of its padded axes: recorded by `stretched`)
      out = tuple(broadcast_to_shape(cx, x, shape) if is_tensor(x) else x for x in operands)
  else:
    out = tuple(broadcast_to_shape(cx, x, shape) if is_tensor(x) else x for x in operands)
  if getattr(cx.b, "pad_tiles", None) is not None:      # (a padded statistic stretched by a reshape: still padded)
    from .padded_meets import stretched
    stretched(cx, operands, out, shape)
  return out, shape


def reshape_(cx, x, shape):
  check_register_value(cx, x, "reshape")
  if not is_tensor(x):
    if is_value(x) and isinstance(x.type, ScalarType):
      return scalar_reshaped(cx, x, shape)
    raise E.KernelTypeError(f"reshape needs a register tensor, got {kind_of(x)}", cx.loc,
                            hint=scalar_reshape_hint(cx.named(x, "s"), shape))
  shape = static_shape(cx, shape, "reshape")
  if math.prod(shape) != math.prod(x.type.shape):
    raise E.ShapeMismatchError(
        f"cannot reshape {x.name or 'a tensor'} of shape {x.type.shape} ({math.prod(x.type.shape)}"
        f" elements) to {shape} ({math.prod(shape)} elements)", cx.loc,
        hint="a reshape keeps the number of elements")
  if shape == x.type.shape:
    return x
  if x.id in cx.b.spread:     # (a small middle-axis statistic, m[:, None]: still spread, ops/spread.py)
    return spread_reshaped(cx, x, shape)
  if (made := static_tiles.filled(cx, x, shape) or static_tiles.affine_grid(cx, x, shape)) is not None:
    return made     # filled anew ((1, 1) to (1,)); an integer table known while compiling: AWQ's order, probe 52e
  if held_reshape(cx, x, shape):   # (a few-element vector shaped (4, 4): as a small statistic, ops/vector_views.py)
    return cx.b.emit(Reshape, x, loc=cx.loc, types=[TensorType(shape, x.type.dtype)], names=[x.name]).result
  check_vector_reshape(cx, x, shape)      # (192,) into (2, 96): no register tensor holds it
  if len(shape) == 2 and shape == x.type.shape[::-1] and 1 in shape and math.prod(shape) % hw.WARPGROUP and (
      resolve(x.type.dtype) != DType.bool_):
    return transpose_tensor(cx, x, x.name or "")   # (n, 1) <-> (1, n): laid out apart unless n fills warpgroups
  made = cx.b.defining(x)
  if isinstance(made, Reshape) or isinstance(made, Broadcast) and \
      math.prod(made.x.type.shape) == math.prod(x.type.shape):
    # A reshape of a reshape (or of a broadcast that only added size-1 axes) reshapes the
    # original: `m[:, None]` then `.reshape(-1)` is `m` again, in the layout `m` has; a small statistic
    # ((4, 8, 1): its vector typed with that shape, frontend/ops/reduce.py) stays one, (4, 8) or (4, 8, 1, 1).
    if sum(n != 1 for n in shape) > 1 and math.prod(shape) % hw.WARPGROUP and (src := small_source(cx.b.defining, x)):
      return cx.b.emit(Reshape, src, loc=cx.loc, types=[TensorType(shape, x.type.dtype)], names=[x.name]).result
    from .padded_tiles import keep_reshaped
    return keep_reshaped(cx, x, reshape_(cx, made.x, shape))
  plan = _unit_axes_plan(x.type.shape, shape)
  if plan is None or not _reducible(x) or min(len(x.type.shape), len(shape)) > 2 and max(len(x.type.shape), len(shape)) > 3:
    # (size-1 axes of a 4-D tensor or wider, to or from 3 or more: no 2-D tile the layouts relate it to)
    return cx.b.emit(Reshape, x, loc=cx.loc, types=[TensorType(shape, x.type.dtype)],
                     names=[x.name]).result
  return _change_unit_axes(cx, x, shape, *plan)


def _unit_axes_plan(old, new):
  """(removed axes of `old`, result axis of each kept axis) when `new` only adds or removes
  size-1 axes of `old` (in order); None for any other reshape."""
  i = j = 0
  removed, dims = [], []
  while i < len(old) or j < len(new):
    if i < len(old) and j < len(new) and old[i] == new[j]:
      dims.append(j)
      i, j = i + 1, j + 1
    elif j < len(new) and new[j] == 1:
      j += 1
    elif i < len(old) and old[i] == 1:
      removed.append(i)
      i += 1
    else:
      return None
  return tuple(removed), tuple(dims)


def _change_unit_axes(cx, x, shape, removed, dims):
  """Drop `removed` size-1 axes (a sum over one element), then put the rest at `dims`."""
  if removed and len(removed) < len(x.type.shape):
    kept = tuple(n for i, n in enumerate(x.type.shape) if i not in removed)
    x = cx.b.emit(Reduce, ReduceKind.SUM, x, removed, loc=cx.loc, types=[TensorType(kept, x.type.dtype)],
                  names=[x.name]).result
  return broadcast_to_shape(cx, x, shape, dims)


def _reducible(x) -> bool:
  d = resolve(x.type.dtype)
  return not isinstance(d, DType) or (d != DType.bool_ and d.bits >= 16)


def _is_int_index(i) -> bool:
  if isinstance(i, bool):
    return False
  if isinstance(i, int):
    return True
  return is_value(i) and isinstance(i.type, ScalarType) and isinstance(resolve(i.type.dtype), DType) \
      and resolve(i.type.dtype).is_int


def _plain_slice(i) -> bool:
  return (isinstance(i, slice) and all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                       for v in (i.start, i.stop)) and i.step in (None, 1))


def _one_per_row_hint(cx, x, index) -> str:
  """For t[rows, ids] of a 2-D register tile with two index vectors (jnp's one element per row, the
  target column of a log-softmax row): the one-hot select that picks it in registers, in the user's
  names; "" for other indexings."""
  vec = lambda i: is_value(i) and isinstance(i.type, TensorType) and len(i.type.shape) == 1 \
      and resolve(i.type.dtype) != DType.bool_
  if len(x.type.shape) != 2 or len(index) != 2 or not all(vec(i) for i in index) \
      or index[0].type.shape != index[1].type.shape or index[0].type.shape[0] != x.type.shape[0]:
    return ""
  ids, n, t = cx.named(index[1], "ids"), x.type.shape[1], cx.named(x, "t")
  return (f"to take one element per row (row r's column {ids}[r]), select it with a one-hot mask and sum the"
          f" rows: ml.sum(ml.where(ml.arange({n})[None, :] == {ids}[:, None], {t}, 0), axis=1); or ")


def _check_register_index(cx, x, index, rank, kept):
  """The index mistakes of a register tensor that have a message of their own."""
  name = x.name or "the tensor"
  for i in index:
    if is_value(i) and isinstance(i.type, TensorType):
      d = resolve(i.type.dtype)
      if d == DType.bool_:
        raise E.KernelTypeError(
            f"{name}[mask]: a boolean mask selects a data-dependent number of elements, and a register tensor"
            f" has a static shape", cx.loc,
            hint=f"keep the shape and zero the rest: ml.where(mask, {name}, 0); to pack the selected elements,"
                 f" compute their positions with ml.cumsum(mask.astype(jnp.int32)) and scatter")
      raise E.KernelTypeError(
          f"{name} is indexed by a tensor of indices in a form a register gather does not take: integer tensors"
          f" next to each other and whole axes (v[ids], v[:, ids], v[rows, cols]), giving a multiple of 128"
          f" elements (a 1-D vector a multiple of 8)", cx.loc,
          hint=_one_per_row_hint(cx, x, index) + f"gather from the array the values came from (x[ids] of an input);"
               f" for computed values, give the kernel one more output as scratch, write them there and gather"
               f" from it: scratch[...] = {name}, then scratch[ids] (the compiler syncs the threads between; with several programs, each its own row of it)")
    if is_value(i) and isinstance(i.type, ScalarType) and not _is_int_index(i):
      raise E.KernelTypeError(
          f"an index of {name} must be an integer, got {cx.named(i, '') or 'a scalar'}"
          f" ({dtype_name(resolve(i.type.dtype))})",
          cx.loc, hint=f"convert it: {method_on(cx.named(i, 'i'))}.astype(jnp.int32)")
    if isinstance(i, slice) and is_value(i.start) != is_value(i.stop) and i.step is None and \
        (len(x.type.shape) == 1 or len(index) == len(x.type.shape)):
      raise E.KernelTypeError(      # s[:k] of a run-time k (a top k's prefix of a sorted row): a run-time length
          f"a window of {name} needs static bounds; {cx.named(i.start if is_value(i.start) else i.stop, 'its bound')}"
          f" is a run-time value, so its length is too, and a register tensor has a static shape", cx.loc,
          hint=unroll_hint(cx.b, i.start if is_value(i.start) else i.stop, _masked_window_hint(cx, x, index, i, name)))
    if isinstance(i, slice) and any(is_value(v) for v in (i.start, i.stop)):
      raise E.KernelTypeError(
          f"a window of {name} needs static bounds; this one starts or ends at a run-time value", cx.loc,
          hint=unroll_hint(cx.b, next(v for v in (i.start, i.stop) if is_value(v)), register_window_hint(
                           cx, x, index, name) or "read the window from a ref: ref.at[ml.ds(i, size)][...] (store the tensor into an"
                           " ml.smem buffer first), or select elements with integer indices"))
  if kept > rank:
    raise E.IndexOutOfBoundsError(f"too many indices for {name}, a tensor of rank {rank}: {kept}", cx.loc,
                                  hint="use one index or ':' per axis, and None for each new axis")


def _masked_window_hint(cx, x, index, i, name):
  """Keep the whole axis and mask the positions outside `x[i]`'s window of a run-time length (probe 56d)."""
  axis = next(a for a, j in enumerate(index) if j is i)
  n = x.type.shape[axis]
  pos = f"ml.arange({n})" + ("" if len(x.type.shape) == 1 else
                             "[" + ", ".join(":" if a == axis else "None" for a in range(len(x.type.shape))) + "]")
  conds = ([f"{pos} >= {cx.named(i.start, 'start')}"] if i.start is not None else []) + \
      ([f"{pos} < {cx.named(i.stop, 'stop')}"] if i.stop is not None else [])
  keep = " & ".join(f"({c})" for c in conds) if len(conds) > 1 else conds[0]
  return (f"keep the whole of {name} and mask the positions outside the window: ml.where({keep}, {name}, fill),"
          f" fill what the use ignores (0 for a sum, float('inf') for a min, float('-inf') for a max)")


def _unit_squeeze(shape, index):
  """The shape `x[index]` has when `index` only inserts axes (None), keeps them (:) and takes
  index 0 or -1 of size-1 axes (static ints), at least one such; None otherwise."""
  out, axis, took = [], 0, False
  for i in index:
    if i is None:
      out.append(1)
    elif isinstance(i, slice) and i == slice(None):
      if axis >= len(shape):
        return None
      out.append(shape[axis])
      axis += 1
    elif isinstance(i, int) and not isinstance(i, bool) and axis < len(shape) and shape[axis] == 1 and i in (0, -1):
      axis, took = axis + 1, True
    else:
      return None
  return tuple(out) + tuple(shape[axis:]) if took else None


def _element_index(index, rank) -> bool:
  """Whether `index` picks elements, rows or a static window: integers (static or run-time
  scalars) and static slices of step 1, one entry per axis at most, not all of them `:`."""
  return (len(index) <= rank and all(_is_int_index(i) or _plain_slice(i) for i in index)
          and any(not (isinstance(i, slice) and i == slice(None)) for i in index))


def _may_hold_dot_result(cx, x) -> bool:
  """Whether `x` may be computed from an ml.dot result (so be in the tensor-core layout, whose
  columns slice in registers): an op on the way is a dot, a loop or branch holding one, or a
  value with no defining op here (a loop's carried value)."""
  from .mma import Dot
  seen, todo = set(), [x]
  while todo:
    v = todo.pop()
    if v.id in seen:
      continue
    seen.add(v.id)
    o = cx.b.defining(v)
    if o is None:
      if isinstance(v.type, TensorType):
        return True
      continue
    if isinstance(o, Dot) or any(isinstance(y, Dot) for r in o.regions for y in ir.walk(getattr(o, r))):
      return True
    todo += [u for u in o.operands() if is_value(u) and isinstance(u.type, TensorType)]
  return False


def via_bytes(cx, x, fn):
  """`fn` (a move through an SMEM scratch) of a bool tensor, on its int8 copy (0 or 1), compared
  back with 0: the scratch holds the bytes a bool ref holds."""
  return ew.compare(cx, ew.CmpOp.NE, fn(ew.astype(cx, x, DType.i8)), 0)


def index_through_smem(cx, x, index):
  """`v[i]`, `v[i, j]`, `m[i]`, `m[:, j]`, `v[a:b]`, `m[a:b]` of a register tensor: its elements live in other threads,
  so the tensor goes through an SMEM scratch the compiler allocates (a store, a barrier the sync
  pass puts in, and a read of the element or the row; a column is a row of the transpose). Indices as jnp's: negative ones count from
  the end; a run-time one past either end is clamped; a static one past the end is an error."""
  from .memory import view
  from .transfers import load, store
  from .padded_tiles import padded_index
  if (kept := padded_index(cx, x, index, lambda idx, v=x: index_through_smem(cx, v, idx))) is not None:
    return kept                 # (a padded trace: the half of a tile of heads read padded, probe 46d)
  if x.id in cx.b.spread:     # (a small middle-axis statistic, held spread for broadcasting back: ops/spread.py)
    spread_refuse(cx, x, "to index")
  if resolve(x.type.dtype) == DType.bool_:      # through SMEM as bytes, 0 or 1
    out = via_bytes(cx, x, lambda b: index_through_smem(cx, b, index))
    if all(isinstance(i, slice) for i in index):
      from .roll import record_window    # (ml.concatenate of rotated windows reads x rolled)
      record_window(cx, out, x, [slice(*i.indices(n)[:2]) for i, n in zip(index, x.type.shape)])
    return out
  shape = x.type.shape
  if len(shape) == 2 and len(index) == 2 and index[0] == slice(None) and _is_int_index(index[1]) and not (
      small_shape(shape) and small_source(cx.b.defining, x) is not None):   # a column: a row of x.T (not of a small one)
    j, n = index[1], shape[1]
    if isinstance(j, int) and not -n <= j < n:
      raise E.IndexOutOfBoundsError(f"index {j} is out of range for axis 1 of {x.name or 'the tensor'} {shape}",
                                    cx.loc, hint=f"indices of axis 1 run from {-n} to {n - 1}")
    return index_through_smem(cx, transpose_tensor(cx, x), (j,))
  idx = []
  for dim, (i, n) in enumerate(zip(index, shape)):
    if isinstance(i, slice):
      lo, hi, _ = i.indices(n)
      if hi <= lo:
        raise E.IndexOutOfBoundsError(
            f"{cx.text or (x.name or 'the tensor') + '[...]'} selects no elements along axis {dim}"
            f" ({'' if i.start is None else i.start}:{'' if i.stop is None else i.stop} of {n})",
            cx.loc, hint="a register tensor needs some elements: select a non-empty range")
      idx.append(slice(lo, hi))
    elif isinstance(i, int):
      if not -n <= i < n:
        raise E.IndexOutOfBoundsError(
            f"index {i} is out of range for axis {dim} of {x.name or 'the tensor'} {shape}", cx.loc,
            hint=f"indices of axis {dim} run from {-n} to {n - 1}")
      idx.append(i % n)
    elif _is_int_index(i):
      idx.append(_clamped_index(cx, i, n))
    else:
      idx.append(i)
  if (small := index_small(cx, x, tuple(idx))) is not None:    # (a small statistic: its vector's elements)
    return small
  buf, block = cx.b.index_scratch.get(x.id, (None, None))   # one store serves every index of x in its block
  if block is not cx.b.block:
    buf = scratch(cx, shape, x.type.dtype, f"{x.name or 'tensor'} scratch")
    store(cx, buf, x)
    cx.b.index_scratch[x.id] = (buf, cx.b.block)
  out = load(cx, view(cx, buf, tuple(idx)), cx.name)
  if all(isinstance(i, slice) for i in idx):
    from .roll import record_window    # (ml.concatenate of rotated windows reads x rolled)
    record_window(cx, out, x, idx)
  return out


def _clamped_index(cx, i, n):
  """The run-time index `i` of an axis of `n` elements, as jnp's: a negative one counts from the end,
  one past either end clamps. Wrapped and clamped in its own dtype, then made int32: a uint32 index of
  2**31 or more (or an int64 one past int32) is past the end, not the negative int32 its low bits are."""
  d = resolve(i.type.dtype)
  if d.bits < 32:                  # 8- and 16-bit: widened by signedness
    i, d = ew.astype(cx, i, DType.i32), DType.i32
  if d.is_signed:
    # i + (n where i < 0), not i + n selected: near 2**31 that wraps (frontend/overflow.py would report it)
    i = ew.binary(cx, ew.BinOp.ADD, i, ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, i, 0), n, 0))
    i = ew.binary(cx, ew.BinOp.MAX, i, 0)
  i = ew.binary(cx, ew.BinOp.MIN, i, n - 1)
  return i if d == DType.i32 else ew.astype(cx, i, DType.i32)


def _whole_slices(shape, index):
  """`index` with static slices that cover a whole axis (`acc[0:128, cols]` of 128 rows) written as
  `:`, which selects the same elements and moves none (a narrower slice goes through SMEM)."""
  if Ellipsis in index:
    return index
  out, dims = [], iter(shape)
  for i in index:
    n = next(dims, None) if i is not None else None
    if (isinstance(i, slice) and n is not None and i != slice(None) and i.step in (None, 1)
        and all(v is None or isinstance(v, int) and not isinstance(v, bool) for v in (i.start, i.stop))
        and i.indices(n)[:2] == (0, n)):
      i = slice(None)
    out.append(i)
  return tuple(out)


def expand(cx, x, index):
  """`x[:, None]`, `x[None, :]`, `x[..., None]`: a register tensor with size-1 axes inserted;
  `x[:, a:b]`: static columns of a tensor-core tile (`slice_columns`)."""
  index = _whole_slices(x.type.shape, index if isinstance(index, tuple) else (index,))
  from .padded_meets import one_line, row_grown
  x = row_grown(cx, x, index)        # (a padded vector made a grid's row: its padding to whole warps)
  if (one := one_line(cx, x, index)) is not None:
    return one                       # (`x[:, j:j + 1]` of a padded trace's tile: its column, ops/padded_meets.py)
  if (len(index) == 2 and index[0] == slice(None) and isinstance(index[1], slice)
      and index[1] != slice(None) and len(x.type.shape) == 2):
    if any(is_value(v) for v in (index[1].start, index[1].stop)):
      _check_register_index(cx, x, index, 2, 2)     # x[:, c * 64:(c + 1) * 64]: its run-time bounds' error
    if _plain_slice(index[1]) and not _may_hold_dot_result(cx, x):
      return index_through_smem(cx, x, index)       # strided or row layouts: through SMEM
    return slice_columns(cx, x, index[1])
  if sum(1 for i in index if i is Ellipsis) > 1:
    raise E.KernelTypeError("an index can hold at most one '...'", cx.loc, hint="x[..., None]")
  kept = sum(1 for i in index if i is not None and i is not Ellipsis)
  rank = len(x.type.shape)
  _check_register_index(cx, x, index, rank, kept)
  if Ellipsis in index:          # '...' stands for the axes the rest leaves out
    k = index.index(Ellipsis)
    index = index[:k] + (slice(None),) * (rank - kept) + index[k + 1:]
    kept = rank
  squeezed = _unit_squeeze(x.type.shape, index)
  one = ew.one_element_scalar(cx, x) if squeezed is not None else None
  if one is not None:            # t[0, 0] of a full reduction with keepdims=True: its scalar
    return ew.stretch(cx, squeezed, one) if squeezed else one
  if squeezed == ():             # t[0, 0] of another one-element tensor (one a loop carries): its one
    from .reduce import reduce   # element, as ml.max(t) reads it (where such a carry is refused, at the loop)
    return reduce(cx, ReduceKind.MAX, x, None, False, "the element")
  if squeezed is not None:       # t[:, 0] of an (n, 1) tile, v[None][0]: no element moves
    return reshape_(cx, x, squeezed)
  if _element_index(index, rank):
    return index_through_smem(cx, x, index)
  if None in index and not any(is_value(i) or isinstance(i, bool) for i in index) and any(
      isinstance(i, int) or isinstance(i, slice) and i != slice(None) for i in index):
    # a[:64, None], t[:, 0, None]: NumPy's slice or element and new axes at once, one after the other
    picked = expand(cx, x, tuple(i for i in index if i is not None))
    return expand(cx, picked, tuple(slice(None) if isinstance(i, slice) else i for i in index
                                    if not isinstance(i, int)))
  if any(not (i is None or i is Ellipsis or (isinstance(i, slice) and i == slice(None))) for i in index):
    raise E.UnsupportedSyntaxError(
        "this index of a register tensor is not supported: a register tensor takes integer indices (an"
        " element, a row or a column: x[i, j], x[i], x[:, j]), static windows (x[a:b], x[i, a:b], x[:, a:b]),"
        " and x[:, None]-style axis insertion, one kind at a time", cx.loc,
        hint="slice the ref before reading it: ref.at[...][...] (store a computed tensor into an ml.smem"
             " buffer first), select with ml.where, or insert axes with x[:, None]")
  index = index + (slice(None),) * (rank - kept)
  shape, dims, it = [], [], iter(x.type.shape)
  for i in index:
    if i is None:
      shape.append(1)
    else:
      dims.append(len(shape))
      shape.append(next(it))
  for n in it:
    dims.append(len(shape))
    shape.append(n)
  return broadcast_to_shape(cx, x, tuple(shape), tuple(dims))


@builtin
def broadcast_to(cx, x, shape):
  """`x` repeated to `shape` as NumPy broadcasts: `ml.broadcast_to(row_max[:, None], (m, n))`."""
  check_register_value(cx, x, "ml.broadcast_to")
  shape = static_shape(cx, shape, "ml.broadcast_to")
  if not is_value(x) or is_value(x) and not is_tensor(x):
    dt = x.type.dtype if is_value(x) else None
    if dt is None:
      raise E.KernelTypeError("ml.broadcast_to of a Python number: use ml.full(shape, value, dtype)",
                              cx.loc, hint="ml.full(shape, 1.0, jnp.float32)")
    return ew.full_(cx, shape, x, dt)
  got = broadcast_shape(cx, [padded_tiles.true_shape(cx.b, x), shape], "ml.broadcast_to", [x.name or "x", "the shape"])
  if got != shape:
    raise E.ShapeMismatchError(f"ml.broadcast_to cannot make {x.type.shape} into {shape}", cx.loc,
                               hint="only size-1 and missing leading axes stretch")
  return padded_meets.broadcast_to(cx, x, shape, broadcast_to_shape)      # (in a padded trace: padded, probe 52e)


@builtin
def cat(cx, input, other, can_reorder=False):
  """Triton's `tl.cat(a, b, can_reorder=False)`: `b`'s elements after `a`'s, along the first axis (Triton's 1-D
  tensors: `ml.concatenate([a, b])`, whose order `can_reorder=True` allows). New in probe 58d (it was MG002)."""
  _reorder(cx, can_reorder, "cat")
  return concatenate.rule(cx, [input, other], 0)


@builtin
def concatenate(cx, xs, axis=0):
  """Register tensors joined along `axis` (jnp.concatenate): `ml.concatenate([-x2, x1], axis=1)`.

  The parts go into an SMEM scratch the compiler allocates, each into its window, and the
  result is read back whole (a store per part, a barrier, a load). One dtype for every part."""
  if not isinstance(xs, (list, tuple)) or not xs:
    raise E.KernelTypeError(f"ml.concatenate takes a list or tuple of register tensors, got {kind_of(xs)}",
                            cx.loc, hint="ml.concatenate([a, b], axis=1)")
  for x in xs:
    check_register_value(cx, x, "ml.concatenate")
    if not is_tensor(x):
      raise E.KernelTypeError(f"ml.concatenate joins register tensors, got {kind_of(x)}", cx.loc,
                              hint="make a number a tensor first: ml.full(shape, value, dtype)")
  rank = len(xs[0].type.shape)
  if any(len(x.type.shape) != rank for x in xs):
    raise E.ShapeMismatchError(
        f"ml.concatenate of tensors of ranks {[len(x.type.shape) for x in xs]}: the parts need one rank", cx.loc,
        hint="insert axes first: v[:, None]")
  if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
    raise E.KernelTypeError(f"ml.concatenate: axis must be a static int in [-{rank}, {rank}), got {shown(axis)}",
                            cx.loc, hint="ml.concatenate([a, b], axis=-1) joins along the last axis")
  axis %= rank
  from .padded_joins import padded_concatenate
  if (kept := padded_concatenate(cx, xs, axis, lambda: concatenate.rule(cx, xs, axis))) is not None:
    return kept                 # (a padded trace: rotated halves of a tile of heads read padded, probe 46d)
  for x in xs[1:]:
    if any(n != m for d, (n, m) in enumerate(zip(x.type.shape, xs[0].type.shape)) if d != axis):
      raise E.ShapeMismatchError(
          f"ml.concatenate along axis {axis} of {xs[0].name or 'a tensor'} {xs[0].type.shape} and"
          f" {x.name or 'a tensor'} {x.type.shape}: the other axes differ", cx.loc,
          hint="the parts agree on every axis but the one they are joined along")
  dt = xs[0].type.dtype
  for x in xs[1:]:
    if unify(dt, x.type.dtype, cx.loc, "ml.concatenate part") is None:
      raise E.DtypeMismatchError(
          f"ml.concatenate of {dtype_name(resolve(dt))} and {dtype_name(resolve(x.type.dtype))} parts: one dtype"
          f" for every part", cx.loc, hint=f"convert the parts to one dtype first, e.g. part.astype(jnp.{dtype_name(resolve(dt))})")
  from .roll import as_roll
  rolled = as_roll(cx, xs, axis)                 # [v[:, s:], v[:, :s]]: v rolled, the windows unused
  if rolled is not None:
    return rolled
  if resolve(dt) == DType.bool_:                 # through SMEM as bytes, 0 or 1
    parts = [ew.astype(cx, x, DType.i8) for x in xs]
    return ew.compare(cx, ew.CmpOp.NE, concatenate.rule(cx, parts, axis), 0)
  from .memory import view
  from .transfers import load, store
  shape = list(xs[0].type.shape)
  shape[axis] = sum(x.type.shape[axis] for x in xs)
  buf = scratch(cx, shape, dt, "concatenate scratch")
  at = 0
  for x in xs:
    n = x.type.shape[axis]
    index = tuple(slice(at, at + n) if dim == axis else slice(None) for dim in range(rank))
    if axis == 0 and (src := _stacked(cx, x, axis)) is not None:    # a[None] (jnp.stack's part): a, into its slice
      index, x = index[:axis] + (at,) + index[axis + 1:], src
    store(cx, view(cx, buf, index), x)
    at += n
  return load(cx, buf, cx.name)


def _stacked(cx, x, axis):
  """The tensor `x` is made from by a size-1 axis inserted at `axis` (`a[None]`, `a.reshape(1, m, n)`), where it has
  two axes or more of its own, else None: stored as it is into its slice of a concatenation's scratch (stored with
  the size-1 axis, a (1, m, n) tile would share the (k, m, n) scratch's layout class, which the layout pass reads as a
  broadcast along the new axis)."""
  made = cx.b.defining(x)
  if not (isinstance(made, (Broadcast, Reshape)) and x.type.shape[axis] == 1 and is_tensor(made.x)):
    return None
  src = made.x
  squeezed = tuple(x.type.shape[:axis]) + tuple(x.type.shape[axis + 1:])
  if tuple(src.type.shape) != squeezed or sum(d != 1 for d in squeezed) < 2:
    return None
  return src


def _reorder(cx, can_reorder, what):
  """Triton's `can_reorder=` of tl.reshape / tl.ravel / tl.cat: a static bool, a licence the row-major order uses."""
  if not isinstance(can_reorder, bool):
    raise E.KernelTypeError(f"ml.{what}'s can_reorder= is a static bool, got {kind_of(can_reorder)}", cx.loc,
                            hint=f"leave it out: ml.{what} keeps the elements' row-major order (Triton's"
                                 f" can_reorder=False; True allows it too)")


@builtin(methods=("reshape",))
def reshape(cx, x, shape, *more, can_reorder=False):
  """`x` with another shape of the same size: `x.reshape((m, 1))`, `x.reshape(m, 1)`,
  `ml.reshape(x, (n,))`; one size may be -1 (the rest of the elements), as in NumPy. Triton's `can_reorder=` (a
  static bool) is taken: the elements keep their row-major order, which either value allows (probe 58d).

  Inserting or removing size-1 axes always works; other reshapes of tensor-core or row-reduction
  tiles (whose rows live in fixed threads) go through an SMEM scratch the compiler allocates.
  """
  if more or isinstance(shape, int):
    shape = (shape, *more)
  _reorder(cx, can_reorder, "reshape")
  from .padded_tiles import padded_reshape
  if (kept := padded_reshape(cx, x, shape, lambda up: reshape_(cx, x, up))) is not None:
    return kept                 # (a padded trace: a tile of heads read padded, its pairs interleaved back)
  from .padded_meets import rows_of_vector
  if (rows := rows_of_vector(cx, x, shape)) is not None:
    return rows                 # (a padded trace: a vector's rows no register tensor holds, padded)
  if isinstance(shape, tuple) and shape.count(-1) == 1 and is_tensor(x) and all(
      isinstance(n, int) and not isinstance(n, bool) for n in shape):
    rest = math.prod(n for n in shape if n != -1)
    total = math.prod(x.type.shape)
    if rest > 0 and total % rest == 0:
      shape = tuple(total // rest if n == -1 else n for n in shape)
    elif rest > 0:               # (as NumPy: "cannot reshape array of size 8192 into shape (3,newaxis)")
      raise E.ShapeMismatchError(
          f"cannot reshape {x.name or 'a tensor'} of shape {x.type.shape} ({total} elements) to {shape}:"
          f" {total} is not a multiple of {rest}", cx.loc,
          hint="a reshape keeps the number of elements: the sizes besides -1 must divide it")
  return reshape_(cx, x, shape)


@builtin(methods=("ravel", "flatten"))
def ravel(cx, x, order="C", can_reorder=False):
  """`x` as one axis in row-major order, as jnp.ravel and NumPy's `x.ravel()` / `x.flatten()`: the reshape
  `x.reshape((x.size,))` (a register tensor is a value: a copy and a view are the same thing here). Triton's
  `can_reorder=` is taken, as ml.reshape's."""
  check_register_value(cx, x, "ravel")
  _reorder(cx, can_reorder, "ravel")
  if not is_tensor(x):
    if is_value(x) and isinstance(x.type, ScalarType):
      return scalar_reshaped(cx, x, (1,))       # (jnp's ravel of a 0-d array)
    raise E.KernelTypeError(f"ravel needs a register tensor, got {kind_of(x)}", cx.loc,
                            hint=scalar_reshape_hint(cx.named(x, "s"), (1,)))
  if order != "C":
    raise E.KernelTypeError(f"ravel takes order='C' (row-major) in a kernel, got order={order!r}", cx.loc,
                            hint=f"order='F' is the ravel of the transpose: ml.transpose({cx.named(x, 'x')}).ravel()")
  return reshape_(cx, x, (math.prod(x.type.shape),))
