"""`ml.atomic_add` (max, min, and, or, xor) of a value the padded trace computes padded (ops/padded_tiles.py; probe
61b): split-K's small accumulators, an (8, 24) or (8, 8) `ml.dot` result no register tensor holds, added into an
output window of that shape by each program of the split. The plain trace held it as the vector of its elements,
which no layout takes at 192 or 64 elements (MG204 at the loop that carried it, about a (192,) vector the user never
wrote), and the padded trace stopped at the atomic. As padded_store does for a store: the update is issued over the
padded window under the mask of the value's own part (and the user's mask recomputed at the padded shape, as
padded_masks.py does a masked store's), so
lanes past its own shape, like a masked atomic's, are not issued; past the array's end the window is a scatter
(ops/atomic_masks.as_scatter), as any masked atomic's that may leave its array."""
from __future__ import annotations

from ..types import Space, TensorType
from .padded_tiles import PadAbort, allowed, mask, padded_table
from .padded_windows import grown_index, window_of


def padded_atomic(cx, atomic, kind, ref, value, user_mask, sem, scope):
  """(the update `atomic(cx, kind, window, value, mask, sem, scope)` over the padded window,) where `value` is padded
  and `ref` a GMEM window of its own shape; None where it is no such update (the plain path then)."""
  from .base import is_value
  from .memory import view
  pads = padded_table(cx, value) if is_value(value) and isinstance(value.type, TensorType) else None
  if pads is None or not is_value(ref) or getattr(ref.type, "space", None) != Space.GMEM:
    return None
  shape, up = pads[value.id], tuple(value.type.shape)
  if shape == up or tuple(ref.type.shape) != shape:
    return None
  root, index = window_of(cx, ref, len(shape))
  if root is None:
    raise PadAbort("atomic")
  with allowed(cx):
    keep = mask(cx, shape, up)
    if user_mask is not None and user_mask is not True:
      from .padded_masks import _mask_at          # (the user's mask recomputed at the padded shape: index grids)
      keep = _mask_at(cx, user_mask, shape, up)
      if keep is None:
        raise PadAbort("atomic")
    padded = view(cx, root, grown_index(index, up), ref.name or "")
    return (atomic(cx, kind, padded, value, keep, sem, scope),)
