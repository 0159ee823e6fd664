"""Masked atomics: Triton's `tl.atomic_add(ptr, v, mask=m)` as `ml.atomic_add(ref, v, mask=m)` (probe 47d).

An element the mask keeps off is updated with the operation's identity (0 for add, the lowest value
for max, the highest for min), which leaves memory as it is: the update of every element is the one
the call would make unmasked, so nothing new reaches lowering or the interpreter. Where the window may
leave the array (a run-time start, Triton's tail `offs = pid * BLOCK + tl.arange(0, BLOCK)` under
`mask=offs < n`), the call is the scatter at the window's positions, `out.at[start + ml.arange(size)]`,
whose updates outside the array are dropped, as jnp's scatter drops them: the elements the mask keeps
off never reach memory, and those it keeps past the end are dropped too (Triton would write them).
"""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import Space, dtype_name, resolve
from . import elementwise as ew
from .base import is_tensor, is_value, kind_of


def check_mask(cx, mask, shape, what):
  """`mask` as given (a bool tensor that broadcasts to `shape`, a bool scalar, or a Python bool)."""
  from .shape import broadcast_shape
  if isinstance(mask, bool):
    return mask
  if not (is_value(mask) and resolve(mask.type.dtype) == DType.bool_):
    got = (f"{dtype_name(mask.type.dtype)} values" if is_value(mask) and hasattr(mask.type, "dtype")
           else kind_of(mask))
    raise E.KernelTypeError(f"{what}'s mask must be a boolean tensor or scalar, got {got}", cx.loc,
                            hint="pass a comparison, mask=cols < n (the elements it keeps are updated; of a number"
                                 " mask, its nonzero elements: mask=m != 0)")
  if is_tensor(mask) and (len(mask.type.shape) > len(shape) or broadcast_shape(
      cx, [mask.type.shape, shape], what, ["the mask", "the window"]) != tuple(shape)):
    raise E.ShapeMismatchError(
        f"{what}'s mask of shape {mask.type.shape} does not fit the window's shape {tuple(shape)}", cx.loc,
        hint=f"a mask of shape {tuple(shape)}, or one that broadcasts to it"
             + (" (a mask of rows: m[:, None])" if len(shape) == 2 else ""))
  return mask


def select_identity(cx, kind, mask, value, d):
  """`value` where `mask` is on, the identity of `kind` on `d` where it is off (value already a tensor of
  the window's shape, or a scalar for one element)."""
  from .atomic import identity
  if mask is True:
    return value
  if mask is False:
    return ew.full_(cx, value.type.shape, identity(kind, d), d) if is_tensor(value) else identity(kind, d)
  return ew.where_(cx, mask, value, identity(kind, d))


def as_scatter(cx, ref):
  """The scatter `root.at[start + ml.arange(size), ...]` covering the GMEM window `ref` when the window
  may leave its array (a run-time start, or one past the end, also of an axis it takes one index of), else
  None. The axis that leaves is indexed by positions, the others keep their slices (so that a row's
  consecutive elements go in one vector `red`); where two axes leave, or the indexed axes are not neighbours,
  every axis is indexed by positions (a grid of them, `rows[:, None], cols[None, :]`). A squeezed axis keeps
  its index; positions and indices below 0, which jnp's scatter counts from the end, are kept off by `keep`.
  Returns (IndexedRef, keep) where keep is a bool tensor or None."""
  from .elementwise_fns import arange
  from .gather import IndexedRef
  from .memory import View
  from .run_stores import never_negative
  from .shape import reshape_
  t = ref.type
  o = cx.b.defining(ref)
  if t.space != Space.GMEM or t.remote or t.transposed or not isinstance(o, View) or o.within or o.transpose:
    return None
  root = o.ref
  leaves = lambda i, n: not (isinstance(i.start, int) and 0 <= i.start and i.start + i.size <= n)
  if not any(leaves(i, n) for i, n in zip(o.index, root.type.shape)) or not t.shape:
    return None
  from .memory import DSlice
  rank = len(t.shape)
  # One axis that leaves, the others' slices kept where the indexed axes (squeezed ones and that one) are
  # neighbours, so that NumPy's rule keeps the window's axis order: a row's consecutive elements then go
  # in one vector `red` (gather._plan's `contiguous`); else every axis by positions, a grid of them.
  out = [k for k, (i, n) in enumerate(zip(o.index, root.type.shape)) if not i.squeeze and leaves(i, n)]
  adv = sorted(out + [k for k, i in enumerate(o.index) if i.squeeze])
  sliced = len(out) == 1 and adv == list(range(adv[0], adv[-1] + 1))
  index, keep, axis = [], None, 0
  for k, (i, n) in enumerate(zip(o.index, root.type.shape)):
    if i.squeeze:                # (a row read from memory, out.at[e, :]: dropped where it leaves the array)
      index.append(i.start)
      if not never_negative(cx.b, i.start):
        off = ew.compare(cx, ew.CmpOp.GE, i.start, 0)
        keep = off if keep is None else ew.binary(cx, ew.BinOp.AND, keep, off)
      continue
    if sliced and k not in out:
      index.append(slice(None) if (i.start, i.size) == (0, n) else DSlice(i.start, i.size))
      axis += 1
      continue
    pos = arange.rule(cx, i.size)
    if not (isinstance(i.start, int) and i.start == 0):
      pos = ew.binary(cx, ew.BinOp.ADD, pos, i.start)
    if not never_negative(cx.b, i.start):
      off = ew.compare(cx, ew.CmpOp.GE, pos, 0)
      off = reshape_(cx, off, tuple(i.size if a == axis else 1 for a in range(rank))) if rank > 1 else off
      keep = off if keep is None else ew.binary(cx, ew.BinOp.AND, keep, off)
    if rank > 1 and not sliced:
      pos = reshape_(cx, pos, tuple(i.size if a == axis else 1 for a in range(rank)))
    index.append(pos)
    axis += 1
  return IndexedRef(root, tuple(index)), keep


def masked_element(cx, ref, mask):
  """The single element `ref` at a run-time index (`counts.at[e]`, e read from memory), where `mask` (a bool
  scalar) may keep it off because the index leaves the array (`mask=e < n`): the same element where the mask is
  on, element 0 of each such axis where it is off, which the identity then leaves as it is, so no update
  reaches outside the array (Triton's masked lane makes no access)."""
  from .memory import View, view
  o = cx.b.defining(ref)
  if (isinstance(mask, bool) or not isinstance(o, View) or o.within or ref.type.space != Space.GMEM
      or all(isinstance(i.start, int) for i in o.index)):
    return ref
  from .memory import DSlice
  index = tuple((ew.where_(cx, mask, i.start, 0) if not isinstance(i.start, int) else i.start) if i.squeeze
                else DSlice(i.start, i.size) for i in o.index)
  return view(cx, o.ref, index, ref.name or "")
