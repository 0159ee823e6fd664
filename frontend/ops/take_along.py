"""`ml.take_along_axis` (jnp.take_along_axis): of a GMEM ref, a gather (ops/gather.py) at the indices along the axis
and each other axis's positions; of a register tile with one index a row (NLL's target column of a log-softmax
tile), a select in registers; of an SMEM buffer or a register tile with a few indices a row (a top-k's k), one
select each; other register tiles through an SMEM scratch (ops/register_gather.py). Split from ops/gather.py."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import RefType, Space, TensorType, resolve
from .base import builtin, is_tensor, is_value, kind_of
from .elementwise_fns import arange
from .gather import _in_range, gather
from .shape import reshape_


# ---------------------------------------------------------------- ml.take_along_axis
@builtin
def take_along_axis(cx, arr, indices, axis):
  """jnp.take_along_axis(arr, indices, axis) of a GMEM ref `arr` and an integer register tensor `indices` of its
  rank (each other axis the ref's size, or 1 to broadcast): the elements at `indices` along `axis`."""
  if _one_per_row(arr, indices, axis):
    return _selected(cx, arr, indices, axis)
  if _few_per_row(cx, arr, indices, axis):
    return _each_selected(cx, arr, indices, axis)
  from .register_gather import take_along
  read = cx.named(arr, "")           # (x[...] of a ref: the hint gathers from the ref itself)
  if is_tensor(arr) and not (read.endswith("[...]") and read[:-5].isidentifier()) and (
      got := take_along(cx, arr, indices, axis)) is not None:
    return got                      # a tile computed in registers: through an SMEM scratch (probe 45f)
  from .register_gather import input_read
  if not (is_value(arr) and isinstance(arr.type, RefType)) and (ref := input_read(cx, arr, big=False)) is not None:
    return take_along_axis.rule(cx, ref, indices, axis)     # (x_ref[...] of an input: from x_ref itself; probe 53b)
  if not (is_value(arr) and isinstance(arr.type, RefType)):
    text, ids = cx.named(arr, ""), cx.named(indices, "ids")
    read = text[:-5] if text.endswith("[...]") and text[:-5].isidentifier() else ""
    raise E.KernelTypeError(
        f"ml.take_along_axis gathers from a GMEM ref (a kernel parameter), got {kind_of(arr)}", cx.loc,
        hint=(f"gather from the ref itself: ml.take_along_axis({read}, {ids}, axis={axis})" if read else
              "gather from the array the values came from (a kernel input); for computed values, give the kernel"
              " one more output as scratch, write them there and gather from it (the compiler syncs the threads"
              " between; with several programs, each its own rows of it)"))
  shape = arr.type.shape
  d = resolve(indices.type.dtype) if is_value(indices) and isinstance(indices.type, TensorType) else None
  if not isinstance(d, DType) or not d.is_int or len(indices.type.shape) != len(shape):
    raise E.KernelTypeError(
        f"ml.take_along_axis needs an integer register tensor of indices of the ref's rank ({len(shape)}), got"
        f" {kind_of(indices)}", cx.loc,
        hint="read the indices into registers, ids = idx[...], with as many axes as the ref (size 1 where they"
             " broadcast)")
  if not isinstance(axis, int) or isinstance(axis, bool) or not -len(shape) <= axis < len(shape):
    raise E.KernelTypeError(f"ml.take_along_axis's axis must be a static int below {len(shape)}, got {axis!r}",
                            cx.loc, hint=f"ml.take_along_axis(x, ids, axis={len(shape) - 1})")
  axis %= len(shape)
  ishape = indices.type.shape
  bad = next((k for k in range(len(shape)) if k != axis and ishape[k] not in (1, shape[k])), None)
  if bad is not None:
    raise E.ShapeMismatchError(
        f"ml.take_along_axis: the indices' axis {bad} has {ishape[bad]} elements, the ref's {shape[bad]}", cx.loc,
        hint=f"give the indices {shape[bad]} elements (or 1, to broadcast) along axis {bad}, as jnp requires")
  index = []
  for k, n in enumerate(shape):
    if k == axis:
      index.append(indices)
    else:     # the position along axis k, broadcast against the indices (NumPy's advanced indexing)
      index.append(reshape_(cx, arange.apply(cx, (n,), {}), tuple(n if j == k else 1 for j in range(len(shape)))))
  return gather(cx, arr, tuple(index), cx.name)


@builtin(name="gather")
def tl_gather(cx, src, index, axis):
  """Triton's `tl.gather(src, index, axis)` (Triton 3.2): the elements of `src` at `index` along `axis`, each other
  axis's position kept (`out[i, j] = src[index[i, j], j]` along axis 0), which is jnp.take_along_axis's meaning:
  ml.take_along_axis's rules (of a register tensor or a GMEM ref). Was MG002 (its hint read from GMEM)."""
  if all(is_value(v) and hasattr(v.type, "shape") for v in (src, index)) and \
      len(index.type.shape) != len(src.type.shape):
    text, ids = cx.named(src, "src"), cx.named(index, "ids")
    rows = ", ".join([ids] + [":"] * (len(src.type.shape) - 1))
    raise E.ShapeMismatchError(
        f"ml.gather (Triton's tl.gather) takes indices of src's rank, {len(src.type.shape)}, got indices of"
        f" shape {tuple(index.type.shape)}", cx.loc,
        hint=f"for whole slices of {text} at {ids} along axis {axis}, index it: {text}[{rows}]" if axis in (0, -len(
            src.type.shape)) else "give the indices src's rank (size 1 where they broadcast), as tl.gather does")
  return take_along_axis.rule(cx, src, index, axis)


def _one_per_row(arr, indices, axis) -> bool:
  """A register tile (m, n) with one index a row (m, 1) along axis 1 (or a column's (1, n) along axis 0): NLL's
  target column of a log-softmax tile, which a select takes in registers; so is a 3-D or wider tensor's last axis
  with one index a row, (b, t, 1) of (b, t, v) (a batch of sequences' label log-probs, probe 57f)."""
  if not (is_value(arr) and isinstance(arr.type, TensorType) and len(arr.type.shape) >= 2 and is_value(indices)
          and isinstance(indices.type, TensorType) and isinstance(axis, int) and not isinstance(axis, bool)
          and -len(arr.type.shape) <= axis < len(arr.type.shape)):
    return False
  d = resolve(arr.type.dtype)
  if len(arr.type.shape) > 2:
    one = tuple(arr.type.shape[:-1]) + (1,)
    return axis % len(arr.type.shape) == len(one) - 1 and tuple(indices.type.shape) == one and isinstance(
        d, DType) and d != DType.bool_ and isinstance(resolve(indices.type.dtype), DType) and resolve(
        indices.type.dtype).is_int
  m, n = arr.type.shape
  one = (m, 1) if axis % 2 == 1 else (1, n)
  return indices.type.shape == one and isinstance(d, DType) and d != DType.bool_ \
      and isinstance(resolve(indices.type.dtype), DType) and resolve(indices.type.dtype).is_int


def _selected(cx, arr, indices, axis):
  """The element at each row's index (column's, for axis 0): the max of a select that keeps it alone (the others
  the dtype's lowest), so its dtype, -0.0 and NaN are its own; an index out of range keeps none (the lowest)."""
  import numpy as np
  from . import elementwise as ew
  from .reduce import ReduceKind, reduce
  rank = len(arr.type.shape)
  a = axis % rank
  d = resolve(arr.type.dtype)
  n = arr.type.shape[a]
  pos = reshape_(cx, arange.apply(cx, (n,), {}), tuple(n if k == a else 1 for k in range(rank)))
  pads = getattr(cx.b, "pad_tiles", None)
  own = pads.get(arr.id) if pads is not None else None
  if own is not None and own[a] != n:        # a padded trace's tile (a (16, 100) row of logits held as (16, 128)):
    pads[pos.id] = tuple(own[a] if k == a else 1 for k in range(rank))     # the positions padded alike (probe 69a)
    n = own[a]
  low = float("-inf") if d.is_float else int(np.iinfo(d.np).min)
  indices = _in_range(cx, indices, n)        # jnp's: a negative index counts from the end (clamped as a gather's)
  if resolve(indices.type.dtype) != DType.i32:     # 8-, 16- or 64-bit, unsigned: compared as int32 positions
    indices = ew.astype(cx, indices, DType.i32)
  kept = ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, pos, indices), arr, low)
  return reduce(cx, ReduceKind.MAX, kept, a, True, what="ml.take_along_axis")


_FEW = 64    # index columns (rows) taken one select each over the whole tile: a top-k's k (probe 41s: 16 left a
#              top-32 of an SMEM buffer with a GMEM-gather hint that did not fit it); more are a gather (of an SMEM
#              buffer too since probe 69b, which was MG003 with the hint to gather from GMEM)


def _few_per_row(cx, arr, indices, axis) -> bool:
  """An SMEM buffer (m, n), or a register tile that is not a read of a GMEM ref (which gathers), with a few
  integer indices a row (m, k) along axis 1 (a column's (k, n) along axis 0): k one-per-row selects."""
  if not (is_value(arr) and is_value(indices) and isinstance(indices.type, TensorType)
          and isinstance(axis, int) and not isinstance(axis, bool) and -2 <= axis < 2):
    return False
  t = arr.type
  if isinstance(t, RefType):
    if t.space != Space.SMEM or t.remote or len(t.shape) != 2:
      return False
  elif not isinstance(t, TensorType) or len(t.shape) != 2:
    return False
  else:
    text = cx.named(arr, "")
    if text.endswith("[...]") and text[:-5].isidentifier():     # x[...] of a ref: gather from the ref itself
      return False
  d, di = resolve(t.dtype), resolve(indices.type.dtype)
  a = axis % 2
  other = 1 - a
  return (isinstance(d, DType) and d != DType.bool_ and isinstance(di, DType) and di.is_int
          and len(indices.type.shape) == 2 and indices.type.shape[other] == t.shape[other]
          and 1 <= indices.type.shape[a] <= _FEW)


def _each_selected(cx, arr, indices, axis):
  """ml.take_along_axis of an SMEM buffer or a register tile with k indices a row: each index column's select
  (`_selected`, exact: the element itself), joined along the axis."""
  from .shape import concatenate, index_through_smem
  from .transfers import load
  if isinstance(arr.type, RefType):
    arr = load(cx, arr)
  a = axis % 2
  pads = getattr(cx.b, "pad_tiles", None)
  k = (pads.get(indices.id) or indices.type.shape)[a] if pads is not None else indices.type.shape[a]
  parts = []                # (k: the indices' own count, where a padded trace holds them padded: (16, 3) as (16, 32))
  for j in range(k):
    col = index_through_smem(cx, indices, (slice(None), j) if a == 1 else (j,))
    col = reshape_(cx, col, (col.type.shape[0], 1) if a == 1 else (1, col.type.shape[0]))
    parts.append(_selected(cx, arr, col, a))
  return parts[0] if k == 1 else concatenate.apply(cx, (parts,), {"axis": a})
