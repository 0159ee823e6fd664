"""Masked accesses of odd 2-D windows, computed padded (probe 48g).

Triton's tile of few heads, `q.at[b, t, heads[:, None], d]` loaded with `mask=(heads[:, None] < n_kh) &
(d < hd // 2)` (Liger's RoPE with 2 or 3 KV heads and a head_dim of 64: a (2, 32) tile), is a window no
register tensor holds, or whose rows no row-wise layout takes, where a row of cos broadcast along it needs one:
it was MG204 at the mask, while the same window read whole (`q.at[b, t][...]`) computes padded
(padded_tiles.py). In a padded trace such a masked load now reads the padded window too, under the user's mask
recomputed at the padded shape (it is made of `ml.arange`, constants and scalars: index_grids._regrid) and the
padding's own mask; a mask of data read whole beside it (`keep[t, h, d] != 0`) is padded by the trace itself and
taken as it is. A masked store of a padded value into such a window writes under the same two masks. Any other
mask, or a tensor `other`, keeps the load as it was (the padded trace then ends as before).
"""
from __future__ import annotations

from ..types import Space, TensorType, resolve
from ..dtypes import DType


class _Defs(dict):
  """The builder's defining ops, as index_grids._regrid reads them (new ops recorded too)."""
  def __init__(self, b):
    super().__init__()
    self.b = b

  def get(self, key, default=None):
    return super().get(key) or self.b.defs.get(key, default)


def _window(cx, ref):
  """(shape, padded shape, root, starts) of a GMEM window the padded trace pads (as padded_tiles.padded_load
  decides), or None."""
  from . import padded_tiles as pt
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or ref.type.space != Space.GMEM:
    return None
  t = ref.type
  shape, k, d = tuple(t.shape), len(t.shape), resolve(t.dtype)
  if k < 2 or not isinstance(d, DType) or getattr(t, "transposed", False):
    return None
  rows = isinstance(pads, pt.RowPads) and k == 2 and shape[0] % 4 and shape[1] % 128
  if pt._holds(shape) and not rows:
    return None
  up = pt._up(shape, d)
  if up == shape or not pt._holds(up):
    return None
  root, index = pt._window_of(cx, ref, k)
  if root is None or root.type.space != Space.GMEM:
    return None
  return shape, up, root, index


def _mask_at(cx, mask, shape, up):
  """The user's `mask` (of `shape`) recomputed at `up`, and'ed with the padding's mask; None where the mask is
  made of anything but index grids, constants and scalars."""
  from .. import index_grids
  from .elementwise import BinOp, binary
  from . import padded_tiles as pt
  if not isinstance(getattr(mask, "type", None), TensorType):
    return None
  if pt.true_shape(cx.b, mask) == shape and tuple(mask.type.shape) == up:
    m = mask                   # (a mask computed padded itself: a flag read whole beside the window)
    inside = pt.mask(cx, shape, up)
    return m if inside is None else binary(cx, BinOp.AND, m, inside)
  if tuple(mask.type.shape) != shape:
    return None
  out = []
  m = index_grids._regrid(_Defs(cx.b), mask, up, tuple(range(len(up))), out)
  if m is None:
    return None
  for o in out:
    cx.b.append(o)
  inside = pt.mask(cx, shape, up)
  return m if inside is None else binary(cx, BinOp.AND, m, inside)


def _padded_view(cx, ref, root, index, up):
  from .memory import view
  from .padded_tiles import grown_index
  return view(cx, root, grown_index(index, up), ref.name or "")


def padded_masked_load(cx, ref, mask, other):
  """`ref.load(mask=m, other=o)` of an odd GMEM window in a padded trace: the padded window read under `m`
  recomputed at its shape and the padding's mask (see the module); None where it is no such load."""
  from . import padded_tiles as pt
  from .access import _masked_read
  win = _window(cx, ref) or _padded_run(cx, ref, mask) or _short_run(cx, ref)
  if win is None or isinstance(getattr(other, "type", None), TensorType):
    return None
  shape, up, root, index = win
  with pt.allowed(cx):
    m = _mask_at(cx, mask, shape, up)
    if m is None:
      return None
    out = _masked_read(cx, _padded_view(cx, ref, root, index, up), m, other)
  cx.b.pad_tiles[out.id] = shape
  return out


def padded_masked_store(cx, ref, value, mask) -> bool:
  """`ref.store(v, mask=m)` of a padded value into an odd GMEM window of its own shape: into the padded window
  under `m` recomputed there and the padding's mask; False where it is no such store."""
  from . import padded_tiles as pt
  from .access import masked_store
  pads = pt.padded_table(cx, value)
  if pads is None:
    return False
  if len(ref.type.shape) == 1 and pads[value.id] == tuple(value.type.shape) == tuple(ref.type.shape):
    del pads[value.id]     # (a statistic along a padded axis, its own shape: stored as it is, as padded_store does)
    return False
  win = _window(cx, ref) or _run_window(cx, ref, value, pads)
  if win is None or pads[value.id] != win[0] or tuple(value.type.shape) != win[1]:
    return False
  shape, up, root, index = win
  with pt.allowed(cx):
    m = _mask_at(cx, mask, shape, up)
    if m is None:
      raise pt.PadAbort("masked store")
    masked_store(cx, _padded_view(cx, ref, root, index, up), value, m)
  return True


def padded_mask(cx, mask) -> bool:
  """Whether `mask` is a value the padded trace computes padded (a flag read whole beside the window): a masked
  access under it goes through padded_masked_load / padded_masked_store before its mask is fitted to the window."""
  pads = getattr(cx.b, "pad_tiles", None)
  return pads is not None and getattr(mask, "id", None) in pads and not getattr(cx.b, "pad_ok", 0)


def _run_window(cx, ref, value, pads):
  """(shape, padded shape, root, starts) of a 1-D GMEM window of n elements (a run of rows, `o.at[rows]` of rows =
  pid * R + ml.arange(R)) that `value`, a statistic of R rows of a tile computed padded (R to a multiple of 4), is
  stored into: the window grown to the value's padded length, which the padded store writes under the user's mask
  recomputed there and the padding's mask (probe 59b: `ml.store(o.at[rows], ml.sum(v, axis=1), mask=rows < M)` of
  a (2, 32) tile was MG204 at the arange). None where it is no such store."""
  from . import padded_tiles as pt
  if getattr(cx.b, "pad_ok", 0) or ref.type.space != Space.GMEM or len(ref.type.shape) != 1 \
      or getattr(ref.type, "transposed", False) or not isinstance(resolve(ref.type.dtype), DType):
    return None
  shape, up = tuple(ref.type.shape), tuple(value.type.shape)
  if len(up) != 1 or pads.get(value.id) != shape or up[0] <= shape[0]:
    return None
  root, index = pt._window_of(cx, ref, 1)
  if root is None or root.type.space != Space.GMEM:
    return None
  return shape, up, root, index


def _padded_run(cx, ref, mask):
  """(shape, padded shape, root, starts) of a 1-D GMEM window of n elements read under a mask the padded trace
  computes padded at its own length n (Triton's `ml.load(x.at[offs], mask=offs < n, other=0)` of `offs = s +
  ml.arange(4)`, a BSR block's 4 columns or a row's two pointers: the arange made padded, ArangePads), padded as the
  mask is (probe 71a: the mask of (8,) was MG202 against the (4,) window, and the kernel MG204 at the arange); None
  otherwise."""
  from . import padded_tiles as pt
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or ref.type.space != Space.GMEM or len(ref.type.shape) != 1 \
      or getattr(ref.type, "transposed", False) or not isinstance(resolve(ref.type.dtype), DType) \
      or not isinstance(getattr(mask, "type", None), TensorType) or len(mask.type.shape) != 1:
    return None
  n, up = ref.type.shape[0], tuple(mask.type.shape)
  if pads.get(mask.id) != (n,) or up[0] <= n:
    return None
  root, index = pt._window_of(cx, ref, 1)
  if root is None or root.type.space != Space.GMEM:
    return None
  return (n,), up, root, index


def _short_run(cx, ref):
  """(shape, padded shape, root, starts) of a 1-D GMEM window of n elements, n not a multiple of 8, read under a mask
  in a padded trace (the per-row statistics of a run of rows, `mu.at[rows]` of rows = pid * 2 + ml.arange(2), read
  beside a (2, 32) tile padded to (4, 32)), n not a multiple of 4 either: padded as that tile's rows are, to 4 below 4
  elements and to a multiple of 8 above (probe 59b: as its (2,) MaskedLoad it had no layout, and the padded trace
  ended). None otherwise."""
  from . import padded_tiles as pt
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or ref.type.space != Space.GMEM or len(ref.type.shape) != 1 \
      or getattr(ref.type, "transposed", False) or not isinstance(resolve(ref.type.dtype), DType):
    return None
  n = ref.type.shape[0]
  if n % 4 == 0 or resolve(ref.type.dtype).bits < 16:
    return None           # (4 or 12 rows: the statistics of a tile of as many rows, which registers hold as they are)
  up = (4,) if n < 4 else (-(-n // 8) * 8,)
  root, index = pt._window_of(cx, ref, 1)
  if root is None or root.type.space != Space.GMEM:
    return None
  return (n,), up, root, index
