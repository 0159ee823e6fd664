"""A short read reduced whole, `ml.sum(partials[...])` of a (g,) array of per-program partials (g not a
multiple of 8: no register vector holds it, MG204), or of a (g0, g1) one of a 2-D grid (not a multiple of 128
elements): the same window read padded (to a multiple of 8; to rows a multiple of 4 and columns of 32) under a
mask, the reduction's identity in the padding (masked lanes touch no memory past the array's end). The unpadded
read, used by nothing else, is pruned."""
from __future__ import annotations

import math

from .. import hw
from ..dtypes import DType
from ..types import Space, resolve


def padded_whole_read(cx, kind, x, axes):
  """`x` read again padded (a register tensor) for the full reduction `kind` of it, where `x` is a whole
  unmasked read of a 1-D or 2-D GMEM array or of a window along its last axes (a row `x.at[i, :]`, a batch
  element under jax.vmap); else None."""
  from .elementwise import Cast, astype
  from .memory import DSlice, Load, View, view
  shape, k = x.type.shape, len(x.type.shape)
  if k == 1 and (axes != (0,) or shape[0] < 2 or shape[0] % 8 == 0):
    return None
  if k == 2 and (axes != (0, 1) or math.prod(shape) % hw.WARPGROUP == 0) or k not in (1, 2):
    return None
  cast = cx.b.defining(x)
  if isinstance(cast, Cast) and not cast.bitcast and isinstance(resolve(x.type.dtype), DType):
    # converted first (ml.sum(p[...].astype(jnp.float32)), a sum's dtype=): the read padded, then converted (the
    # identity of its dtype converts to a value the reduction ignores: casts are monotone, and saturate)
    inner = padded_whole_read(cx, kind, cast.x, axes)
    return None if inner is None else astype(cx, inner, resolve(x.type.dtype))
  load, d = cx.b.defining(x), resolve(x.type.dtype)
  if not (isinstance(load, Load) and not load.merge and load.keep is None and isinstance(d, DType)
          and d != DType.bool_ and d.bits >= 16):
    return None
  win = cx.b.defining(load.ref)
  if win is None:                       # the whole of a parameter
    root, index = load.ref, (0,) * k
  elif isinstance(win, View) and not win.transpose and not any(i.squeeze for i in win.index[-k:]) and all(
      i.squeeze for i in win.index[:-k]):     # a window along the last axes (a row, an element of a batch under vmap)
    root, index = win.ref, tuple(i.start for i in win.index)
  else:
    return None
  if len(root.type.shape) != len(index) or root.type.space != Space.GMEM:
    return None
  from .access import _mask_arg, _masked_read
  from .elementwise import BinOp, CmpOp, binary, compare
  from .elementwise_fns import arange
  from .shape import ReduceKind, expand
  up = (-(-shape[0] // 8) * 8,) if k == 1 else (-(-shape[0] // 4) * 4, -(-shape[1] // 32) * 32)
  keep = [compare(cx, CmpOp.LT, arange.rule(cx, u), n) for u, n in zip(up, shape)]
  mask = keep[0] if k == 1 else binary(cx, BinOp.AND, expand(cx, keep[0], (slice(None), None)),
                                       expand(cx, keep[1], (None, slice(None))))
  lo, hi = d.int_range if not d.is_float else (float("-inf"), float("inf"))
  other = {ReduceKind.SUM: 0, ReduceKind.MAX: lo, ReduceKind.MIN: hi}[kind]
  padded = view(cx, root, (*index[:-k], *(DSlice(i, u) for i, u in zip(index[-k:], up))), load.ref.name or "")
  out = _masked_read(cx, padded, _mask_arg(cx, padded, mask, "ml.load"), other)
  if not hasattr(cx.b, "padded_reads"):
    cx.b.padded_reads = {}
  cx.b.padded_reads[out.id] = x.id          # (layout hints: what reduces x, where x is used otherwise too)
  return out
