"""Short columns of a GMEM array moved through registers, computed padded (probe 51g).

A window of n elements (a multiple of 8, not of 128) whose elements lie apart in memory, a view that indexes the
array's last axis away, is Mamba's per-tap read of a conv weight or state, `w.at[d, k]` with `d = pd * BD +
ml.arange(BD)` of a (D, 4) weight (a channel block of 64), Triton's `tl.load(w_ptr + d * W + k, mask=d < D)`, or
`s.at[ml.ds(i * 64, 64), 0][...]`. Such a window moves one element a thread, so a multiple of 128 of them, and it
was MG204 at the mask (where `x[:, j]` of a static slice gathers, probe 46a). It is now moved as the window of the
next multiple of 128 elements from the same start, under the mask of its first n (and the user's mask, recomputed
at that length where it is made of `ml.arange`, constants and scalars, else extended with False): the extra
elements are never read or written (the access is predicated; a GMEM window may run past the array under a mask),
and a read keeps its first n elements (through an SMEM scratch), a store writes the value extended with zeros. So
the bounds checks are those of the window as written: an unmasked one past the end is still an
IndexOutOfBoundsError, a masked-on element outside the array interpret mode's OutOfBoundsError.
"""
from __future__ import annotations

from .. import hw
from ..dtypes import DType
from ..types import Space, TensorType, resolve
from . import elementwise as ew


def _plan(cx, ref, odd=False):
  """(n, padded length, root, index of the padded window) of a short minor-strided GMEM column `ref`, or None;
  `odd`: of any length n (a padded trace's, which reads it padded to a multiple of 8), else a multiple of 8."""
  from ..windows import minor_strided
  from .base import is_ref
  from .memory import DSlice, View
  if not is_ref(ref):
    return None
  t = ref.type
  if t.space != Space.GMEM or t.remote or t.transposed or len(t.shape) != 1:
    return None
  n, d = t.shape[0], resolve(t.dtype)
  if n % hw.WARPGROUP == 0 or n % 8 and not odd or not isinstance(d, DType) or d == DType.bool_:
    return None
  win = cx.b.defining(ref)
  if not isinstance(win, View) or win.transpose or cx.b.defining(win.ref) is not None \
      or not minor_strided(cx.b.defs, ref):
    return None
  kept = [k for k, i in enumerate(win.index) if not i.squeeze]
  if len(kept) != 1:
    return None
  wide = -(-n // hw.WARPGROUP) * hw.WARPGROUP
  index = tuple(DSlice(i.start, wide) if k == kept[0] else i.start for k, i in enumerate(win.index))
  return n, wide, win.ref, index


def _padded_mask(cx, mask, n, wide, length=None):
  """The (wide,) mask of the first n elements, and'ed with `mask` (None, a bool scalar or a (length,) tensor, n
  elements by default) recomputed at `wide` elements where it is made of index grids, constants and scalars, else
  extended with False."""
  length = n if length is None else length
  from .elementwise_fns import arange
  inside = ew.compare(cx, ew.CmpOp.LT, arange.apply(cx, (wide,), {}), n)
  if mask is None or mask is True:
    return inside
  if not (hasattr(mask, "type") and isinstance(mask.type, TensorType)):
    return ew.binary(cx, ew.BinOp.AND, inside, mask)          # (a scalar condition: broadcast by the and)
  from .. import index_grids
  from .padded_masks import _Defs
  out = []
  m = index_grids._regrid(_Defs(cx.b), mask, (wide,), (0,), out) if tuple(mask.type.shape) == (length,) else None
  if m is not None:
    for o in out:
      cx.b.append(o)
  else:
    from .shape import broadcast_to_shape, concatenate
    if tuple(mask.type.shape) != (length,):
      mask = broadcast_to_shape(cx, mask, (length,))
    m = concatenate.rule(cx, [mask, ew.full_(cx, (wide - length,), False, DType.bool_)], 0)
  return ew.binary(cx, ew.BinOp.AND, inside, m)


def read(cx, ref, mask=None, other=0, keep=None):
  """`ref[...]` (mask None) or `ref.load(mask=m, other=o)` of a short strided GMEM column, read padded (see the
  module); None where `ref` is no such window. `keep`: the elements the result keeps, more than the column's in a
  padded trace (the padding `other`, as padded_tiles.padded_load's)."""
  p = _plan(cx, ref, odd=keep is not None)
  if p is None:
    return None
  from .access import _masked_read
  from .memory import view
  from .shape import index_through_smem
  n, wide, root, index = p
  name, cx.name = cx.name, ""
  try:
    v = _masked_read(cx, view(cx, root, index, ref.name or ""), _padded_mask(cx, mask, n, wide), other)
  finally:
    cx.name = name
  return index_through_smem(cx, v, (slice(0, keep or n),))


def write(cx, ref, value, mask=None, padded=False) -> bool:
  """`ref[...] = value` (mask None) or `ref.store(value, mask=m)` of an (n,) register tensor of `ref`'s dtype into a
  short strided GMEM column, written padded (see the module); False where `ref` is no such window. `padded`: the
  value is a padded trace's, longer than the column (its mask, of the value's length, keeps the column's)."""
  p = _plan(cx, ref, odd=padded)
  if p is None or not (hasattr(value, "type") and isinstance(value.type, TensorType)) \
      or len(value.type.shape) != 1 or not (value.type.shape[0] >= ref.type.shape[0] if padded
                                            else value.type.shape == ref.type.shape):
    return False
  from .access import masked_store
  from .memory import view
  from .shape import concatenate
  n, wide, root, index = p
  d = resolve(value.type.dtype)
  length = value.type.shape[0]
  grown = concatenate.rule(cx, [value, ew.full_(cx, (wide - length,), 0, d)], 0) if length < wide else value
  masked_store(cx, view(cx, root, index, ref.name or ""), grown, _padded_mask(cx, mask, n, wide, length))
  return True



def _plane(cx, ref):
  """(root, the view's index) of a GMEM window `ref` of its array that indexes the array's last axis away (a column,
  or a plane of 2 or more axes, `x.at[:, :, 0]` of (4, 48, 3)), or None."""
  from ..windows import minor_strided
  from .memory import View
  t = ref.type
  win = cx.b.defining(ref)
  if t.space != Space.GMEM or t.remote or t.transposed or not isinstance(win, View) or win.transpose \
      or cx.b.defining(win.ref) is not None or not minor_strided(cx.b.defs, ref) \
      or len([i for i in win.index if not i.squeeze]) != len(t.shape):
    return None
  return win.ref, win.index


def _padded_trace(cx, ref):
  """(shape, padded shape, the trace's record) where the kernel is traced padded and `ref` is a short column of
  an odd length, or a window of 2 or more axes no register tensor holds, either indexing its array's last axis away
  (which padded_tiles.padded_load / padded_store do not take); else None."""
  pads = getattr(cx.b, "pad_tiles", None)
  t = getattr(ref, "type", None)
  shape = tuple(getattr(t, "shape", ()))
  if pads is None or getattr(cx.b, "pad_ok", 0) or not shape or not hasattr(t, "space"):
    return None
  from . import padded_tiles as pt
  d = resolve(t.dtype)
  if pt._holds(shape) or not isinstance(d, DType) or d == DType.bool_:
    return None
  up = pt._up(shape, d, isinstance(pads, pt.WideVectors))
  if len(shape) == 1 and _plan(cx, ref, odd=True) is None or len(shape) > 1 and (
      _plane(cx, ref) is None or not pt._holds(up)):
    return None
  return shape, up, pads


def _padded_view(cx, ref, up):
  """The window of `ref`'s array that `ref` starts, of the padded shape `up` (a GMEM window may run past the end)."""
  from .memory import DSlice, view
  root, index = _plane(cx, ref)
  sizes = iter(up)
  return view(cx, root, tuple(i.start if i.squeeze else DSlice(i.start, next(sizes)) for i in index), ref.name or "")


def padded_read(cx, ref):
  """`ref[...]` of a short column of odd length (60 rows) or of a plane no register tensor holds ((4, 48)) in a
  padded trace: read padded (the padding 0) and recorded so; None where it is no such read."""
  got = _padded_trace(cx, ref)
  if got is None:
    return None
  from .access import _mask_arg, _masked_read
  from .padded_tiles import allowed, mask
  shape, up, pads = got
  with allowed(cx):
    if len(shape) == 1:
      out = read(cx, ref, keep=up[0])
    else:
      wide = _padded_view(cx, ref, up)
      out = _masked_read(cx, wide, _mask_arg(cx, wide, mask(cx, shape, up), "ml.load"), 0)
  pads[out.id] = shape
  return out


def padded_write(cx, ref, value) -> bool:
  """`ref[...] = value` of a padded value of the window's own shape into a short column of odd length or a plane,
  under the padding's mask; False where it is no such store."""
  got = _padded_trace(cx, ref)
  if got is None or cx.b.pad_tiles.get(getattr(value, "id", None)) != got[0] or tuple(value.type.shape) != got[1]:
    return False
  from .access import masked_store
  from .padded_tiles import allowed, mask
  shape, up, _ = got
  with allowed(cx):
    if len(shape) > 1:
      masked_store(cx, _padded_view(cx, ref, up), value, mask(cx, shape, up))
      return True
    return write(cx, ref, value, mask(cx, shape, up), padded=True)
