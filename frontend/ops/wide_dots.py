"""`ml.dot` of an n past the 256 columns one WGMMA instruction computes, written out in ops that exist (probe 53d):
an MLA decode's `ml.dot(p.to(kv.dtype), kv)` over 512 latent columns (Triton's `tl.dot`, Pallas's `jnp.dot`, both of
which take any n), a head_dim of 512, a projection to 320 or 384 features.

By the time a dot gets here its B is an SMEM window (a register B was stored into a buffer of the compiler's by
dot_staging.staged_b): B's columns are split into pieces of at most 256 (equal ones where they are multiples of n's
step, 2 x 192 for 384, 3 x 192 for 576; else 256s and the rest), each piece a view of the same buffer (the rows of
an (n, k) buffer read through `.T`, or the columns of a (k, n) one: no data moves), one dot a piece, and the
products joined along the columns (through an SMEM scratch, `wide dot scratch`, as ml.concatenate joins). An accumulator is added to the joined
product after (each piece computed in the accumulator's dtype). Column j of a product reads column j of B only, so
the pieces are the whole's columns. No IR op of its own: layouts, interpret mode and lowering need nothing new.
Before, MG501 (`ml.dot needs n ... at most 256, got 512`) whose hint split the buffer by hand (probe 51k)."""
from __future__ import annotations

from .. import hw
from ..types import RefType, Space, TensorType, resolve
from .base import is_value


def pieces(n: int, n_step: int) -> list[int] | None:
  """The widths n splits into, each at most 256 and a multiple of `n_step` (None if there are none such)."""
  q, r = divmod(n, hw.MMA_N_MAX)
  count = q + (r > 0)
  sizes = ([n // count] * count if n % count == 0 and (n // count) % n_step == 0 else
           [hw.MMA_N_MAX] * q + ([r] if r else []))
  return None if any(w % n_step for w in sizes) else sizes


def wide_n_dot(cx, a, b, acc, out_dtype, n_step, dot_rule):
  """`acc + a @ b` for an SMEM `b` (k, n), n past 256, as the join of the dots of its column pieces (see the
  module), or None where it is not written out so (MG501 stands)."""
  from .memory import transpose, untransposed, view
  from .small_dots import plus_acc
  t = b.type
  if not (isinstance(t, RefType) and t.space == Space.SMEM and not t.remote and len(t.shape) == 2):
    return None
  if acc is not None and not (is_value(acc) and isinstance(acc.type, TensorType)
                              and tuple(acc.type.shape) == (a.type.shape[0], t.shape[1])):
    return None
  n = t.shape[1]
  sizes = pieces(n, n_step)
  if sizes is None:
    return None
  name = cx.name
  cx.name = ""                   # (only the result takes the name it is bound to)
  try:
    base = untransposed(cx, b) if t.transposed else b
    parts, lo = [], 0
    for w in sizes:
      if t.transposed:           # rows lo..lo+w of the (n, k) buffer, read transposed
        piece = transpose(cx, view(cx, base, (slice(lo, lo + w), slice(None))))
      else:                      # columns lo..lo+w of the (k, n) buffer
        piece = view(cx, base, (slice(None), slice(lo, lo + w)))
      parts.append(dot_rule(cx, a, piece, None, out_dtype=out_dtype if acc is None else resolve(acc.type.dtype)))
      lo += w
    return plus_acc(cx, lambda: _joined(cx, parts, sizes), acc, name)
  finally:
    cx.name = name


def _joined(cx, parts, sizes):
  """The products `parts` side by side: each stored into its columns of an SMEM scratch, read back whole (named
  `wide dot scratch`, which MG402's hint knows: frontend/smem.py)."""
  from .memory import view
  from .scratches import scratch
  from .transfers import load, store
  m = parts[0].type.shape[0]
  buf = scratch(cx, (m, sum(sizes)), parts[0].type.dtype, WIDE_SCRATCH)
  lo = 0
  for part, w in zip(parts, sizes):
    store(cx, view(cx, buf, (slice(None), slice(lo, lo + w))), part)
    lo += w
  return load(cx, buf, cx.name)


WIDE_SCRATCH = "wide dot scratch"
