"""A short 1-D read reduced whole, `ml.sum(partials[...])` of a (g,) array of per-program partials (g not a
multiple of 8: no register vector holds it, MG204): the same window read padded to the next multiple of 8
under a mask, the reduction's identity in the padding (masked lanes touch no memory past the array's end).
The unpadded read, used by nothing else, is pruned."""
from __future__ import annotations

from ..dtypes import DType
from ..types import Space, resolve


def padded_whole_read(cx, kind, x, axes):
  """`x` read again padded to a multiple of 8 (a register vector) for the full reduction `kind` of it,
  where `x` is a whole unmasked read of a 1-D GMEM array or of a window along the last axis of one (a row
  `x.at[i, :]`, a batch element under jax.vmap); else None."""
  from .elementwise import Cast, astype
  from .memory import DSlice, Load, View, view
  shape = x.type.shape
  if len(shape) != 1 or axes != (0,) or shape[0] < 2 or shape[0] % 8 == 0:
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
  if win is None:                       # the whole of a 1-D parameter
    root, index = load.ref, (0,)
  elif isinstance(win, View) and not win.transpose and not win.index[-1].squeeze and all(
      i.squeeze for i in win.index[:-1]):     # a window along the last axis (a row, an element of a batch under vmap)
    root, index = win.ref, tuple(i.start for i in win.index)
  else:
    return None
  if len(root.type.shape) != len(index) or root.type.space != Space.GMEM:
    return None
  from .access import _masked_read
  from .elementwise import CmpOp, compare
  from .elementwise_fns import arange
  from .shape import ReduceKind
  n, up = shape[0], -(-shape[0] // 8) * 8
  lo, hi = d.int_range if not d.is_float else (float("-inf"), float("inf"))
  other = {ReduceKind.SUM: 0, ReduceKind.MAX: lo, ReduceKind.MIN: hi}[kind]
  padded = view(cx, root, (*index[:-1], DSlice(index[-1], up)), load.ref.name or "")
  out = _masked_read(cx, padded, compare(cx, CmpOp.LT, arange.rule(cx, up), n), other)
  if not hasattr(cx.b, "padded_reads"):
    cx.b.padded_reads = {}
  cx.b.padded_reads[out.id] = x.id          # (layout hints: what reduces x, where x is used otherwise too)
  return out
