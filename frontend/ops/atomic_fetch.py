"""The old values of a tensor's atomics, and cas and xchg of a tensor of elements (probe 49c).

Triton's atomics on a block of pointers return the block of old values: an MoE permutation's slot of each
token, `pos = tl.atomic_add(counts + expert_ids, 1)`, a window's `old = tl.atomic_max(ptrs, v)`, and
`tl.atomic_cas(locks + offs, 0, 1)` / `tl.atomic_xchg(ptrs, v, mask=m)` of a vector. An atomic of a GMEM window
or of a scatter's elements (`out.at[ids]`) is emitted with a tensor result of the value's shape and, where a
mask keeps elements off (or a scatter's index leaves the array), the bool tensor `mask` of the elements updated;
atomic_rmw.plan_fetch_scratch drops both where nothing uses the result, so such an add, max or min is the `red`s
it was. Where it is used, each thread runs one relaxed PTX `atom` for each element it holds (lowering/
atomic_rmw.py) and the result keeps the value's layout; an element the mask keeps off gets no `atom` and reads
0. A cas and an xchg always take this path. The updates are relaxed (no ordering among the elements, as
Triton's on the GPU); a single element's atomic orders them. SMEM windows keep their plain updates (one
thread holds each element: no old value is needed).
"""
from __future__ import annotations

import math

from .. import errors as E
from .. import hw
from ..dtypes import DType
from ..infer import unify
from ..types import Space, TensorType, dtype_name, resolve
from .atomic import COMBINE_KINDS, AtomicKind, AtomicUpdate, number_into
from .base import Num, is_ref, is_scalar, is_value, kind_of


def as_values(cx, what: str, x, like, role: str):
  """`x` (a number, a scalar or a tensor that broadcasts) as a tensor of `like`'s shape and dtype."""
  from .elementwise import full_
  from .shape import broadcast_shape, broadcast_to_shape
  d, shape = resolve(like.type.dtype), like.type.shape
  x = number_into(cx, what, x, d, role)
  if not (isinstance(x, Num) or is_value(x)) or is_ref(x):
    raise E.KernelTypeError(f"{what}'s {role} must be a number, a scalar or a tensor, got {kind_of(x)}", cx.loc,
                            hint=f"read refs first: {role}[...]")
  if is_value(x) and unify(d, x.type.dtype, cx.loc, what) is None:
    raise E.DtypeMismatchError(
        f"{what}'s {role} {x.name or ''} ({dtype_name(x.type.dtype)}) and the elements ({dtype_name(d)}): dtypes"
        f" differ", cx.loc, hint=f"convert it: ({cx.named(x, role)}).astype(jnp.{dtype_name(d)})")
  if isinstance(x, Num) or is_scalar(x):
    return full_(cx, shape, x, d, what)
  if x.type.shape != shape:
    if broadcast_shape(cx, [x.type.shape, shape], what, [x.name or f"the {role}", "the elements"]) != shape:
      raise E.ShapeMismatchError(f"{what}'s {role} of shape {x.type.shape} does not fit the elements' shape {shape}",
                                 cx.loc, hint=f"a {role} of shape {shape}, or one that broadcasts to it")
    x = broadcast_to_shape(cx, x, shape)
  return x


def _mask_tensor(cx, keep, shape):
  """A window's mask (None, a Python bool, a bool scalar or a tensor that broadcasts) as None or a bool tensor
  of `shape`."""
  from .elementwise import full_, where_
  from .shape import broadcast_to_shape
  if keep is None or keep is True:
    return None
  if keep is False or is_scalar(keep):
    return full_(cx, shape, False, DType.bool_) if keep is False else \
        where_(cx, keep, full_(cx, shape, True, DType.bool_), False)
  return keep if keep.type.shape == shape else broadcast_to_shape(cx, keep, shape)


def window_update(cx, kind: AtomicKind, ref, value, keep, sem: str, scope: str, cmp=None):
  """Emit the atomic `kind` of the tensor `value` into the window `ref` (checked), with its old values as the
  result where `ref` is GMEM; `keep` (the caller's mask, checked) is carried for them."""
  t = ref.type
  if t.space != Space.GMEM:
    cx.b.emit(AtomicUpdate, kind, ref, value, loc=cx.loc, sem=sem, scope=scope)
    return None
  keep = _mask_tensor(cx, keep, t.shape)
  return cx.b.emit(AtomicUpdate, kind, ref, value, loc=cx.loc, types=[TensorType(t.shape, resolve(t.dtype))],
                   names=[cx.name or ""], sem=sem, scope=scope, cmp=cmp,
                   mask=keep if is_value(keep) else None).result


def tensor_rmw(cx, kind: AtomicKind, ref, val, cmp, mask, sem: str, scope: str, what: str):
  """`ml.atomic_cas(locks.at[offs], 0, 1)`, `ml.atomic_xchg(out.at[ml.ds(s, n)], v, mask=m)`: the cas or xchg of
  each element of a GMEM window or of a scatter's elements, returning the old values (0 where `mask` is off)."""
  from .atomic import check_target
  from .atomic_masks import as_scatter, check_mask
  from .atomic_rmw import check_fetch_dtype, unordered_scatter
  from .elementwise import BinOp, binary
  from .gather import IndexedRef, scatter
  from .memory import check_in_bounds
  target = ref.ref if isinstance(ref, IndexedRef) else ref
  own_scatter = isinstance(ref, IndexedRef) and target.type.space == Space.SMEM and not target.type.remote
  if (target.type.space != Space.GMEM or target.type.remote) and not own_scatter:
    # (a scatter at computed places of the CTA's own buffer, a shared-memory hash table's CAS insert, is the GMEM
    # scatter's `atom` per element at its generic address since probe 70a; a window's elements are one thread's each)
    raise E.KernelTypeError(
        f"{what} of a tensor of elements in {'another CTA' if target.type.remote else 'an SMEM buffer'}: it"
        f" updates elements of an output (GMEM)", cx.loc,
        hint="a CTA's own threads each hold their elements: read them, select and store plainly between barriers,"
             " old = buf[...]; buf[...] = ml.where(old == cmp, val, old)")
  check_target(cx, cx.b, target, what)
  check_fetch_dtype(cx, kind, target.type.dtype, what)
  if isinstance(ref, IndexedRef):
    unordered_scatter(cx, what, sem)
    return scatter(cx, kind, ref, val, mask=mask, what=what, cmp=cmp)
  if mask is not None and mask is not True and (s := as_scatter(cx, ref)) is not None:
    mask = check_mask(cx, mask, ref.type.shape, what)     # a window that may leave the array: its positions
    unordered_scatter(cx, what, sem)
    iref, on = s
    if on is not None:
      mask = on if mask is True else binary(cx, BinOp.AND, on, mask)
    return scatter(cx, kind, iref, val, mask=mask, what=what, cmp=cmp)
  check_in_bounds(cx, ref, what)
  like = _Like(ref.type.shape, ref.type.dtype)
  val = as_values(cx, what, val, like, "val")
  cmp = as_values(cx, what, cmp, like, "cmp") if cmp is not None else None
  keep = check_mask(cx, mask, ref.type.shape, what) if mask is not None else None
  return window_update(cx, kind, ref, val, keep, sem or "relaxed", scope, cmp=cmp)


class _Like:
  """A stand-in with a tensor's type (shape, dtype) for as_values."""
  def __init__(self, shape, dtype):
    self.type = TensorType(tuple(shape), dtype)


def is_tensor_target(ref) -> bool:
  """Whether an atomic_cas/xchg target is a tensor of elements (a scatter, or a window of more than one)."""
  from .gather import IndexedRef
  return isinstance(ref, IndexedRef) or is_ref(ref) and bool(ref.type.shape) and math.prod(ref.type.shape) > 1


def plan_tensor(o, used: set):
  """plan_fetch_scratch's rule for a tensor's atomic `o` with a result: `o` itself (its dtype checked), or the op
  without its result, mask and cmp where nothing uses the old values of an add, max or min (its `red`s as before)."""
  import dataclasses
  if o.kind in COMBINE_KINDS and o.results[0].id not in used:
    return dataclasses.replace(o, results=(), mask=None, cmp=None)
  d = resolve(o.ref.type.dtype)
  if d not in hw.ATOMIC_FETCH[o.kind.value]:
    ok = hw.dtype_list(hw.ATOMIC_FETCH[o.kind.value])
    raise E.UnsupportedDtypeError(
        f"the old values ml.atomic_{o.kind.value} returns are not supported on {dtype_name(d)}: Hopper's atom"
        f" {o.kind.value} takes {ok}", o.loc,
        hint="use the update as a statement (its values unused: the `red` takes " + dtype_name(d) + "), or update an"
             " int32 or float32 output to have them" if o.kind in COMBINE_KINDS else
             "make the array int32, uint32 or float32")
  return o


def shared_olds(kernel, o) -> bool:
  """After the layout pass: whether the old values of the tensor atomic `o` are held by threads other than the
  ones that run its `atom`s (each element's runs in one thread): a replicated layout (a row or column statistic,
  a vector of fewer than 128 elements) or, with several warpgroups, a tensor each holds whole (warpgroup 0 runs
  them). relayout._pair_atomics then gives `o` an SMEM scratch of its elements, through which lowering/
  atomic_rmw.py hands them to the others."""
  if not (isinstance(o, AtomicUpdate) and o.results and isinstance(o.results[0].type, TensorType)):
    return False
  from ..types import LayoutKind
  lay = o.value.type.layout
  wgs = max(1, kernel.block // hw.WARPGROUP) if isinstance(kernel.block, int) else 1
  split = lay.wgs > 1 or lay.kind == LayoutKind.WGMMA and not lay.drop and not lay.whole
  return bool(lay.drop) or (wgs > 1 and not split)


def pallas_target(cx, args):
  """Pallas's `pl.atomic_add(x_ref, idx, val)` (and max, min, xchg; probe 49c) written `ml.atomic_add(x_ref, idx,
  val)`, whose second argument is the index, where Triton's (ours) is the value and its third the mask: the
  window `x_ref.at[idx]` (a scatter where idx holds an integer tensor), or None where the call is Triton's (a
  third argument that is a bool, or a second that is no index)."""
  from .arith_hints import is_index
  from .gather import IndexedRef, has_tensor_index
  from .memory import view
  ref, idx, val = args
  if not is_ref(ref) or isinstance(val, bool) or is_value(val) and resolve(val.type.dtype) == DType.bool_:
    return None
  whole = lambda i: isinstance(i, int) and not isinstance(i, bool) or is_value(i) and isinstance(
      resolve(i.type.dtype), DType) and resolve(i.type.dtype).is_int
  if not (is_index(idx) or whole(idx) or isinstance(idx, tuple) and idx and all(whole(i) or is_index(i) for i in idx)):
    return None
  if has_tensor_index(idx):
    return IndexedRef(ref, idx if isinstance(idx, tuple) else (idx,))
  return view(cx, ref, idx, f"{ref.name or 'x_ref'}.at[...]")
