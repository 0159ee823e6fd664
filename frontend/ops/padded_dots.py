"""`ml.dot` in the padded trace of odd reads (ops/padded_tiles.py; probe 48a): a GQA decode's group of query
heads read whole, `q[h]` of (8, 40) or (4, 72), padded to (8, 64) or (4, 96), times a block of keys, and the
(G, d) product of probabilities and values that an accumulator padded as the group is adds (`acc = acc *
alpha[:, None] + ml.dot(p, v_blk)`). A dot ended the padded trace, so such kernels failed with MG204 at the
accumulator, which no register tensor holds at (8, 40).

The dot is computed at padded shapes, as a user pads it by hand: the contraction axis k of both operands taken to
the longer of their padded lengths with zeros in the padding (a padded operand's padding, which math may have
changed since its masked read, replaced by zeros: zero columns of A meet zero rows of B, so the product is
unchanged), A's rows grown with zero rows and B's columns with zero columns to the padded shape of the product
(rows a multiple of 4, columns of 32, as a read of that shape is padded), and the product recorded padded with its
own (m, n). Rows of A and columns of B past their own part only make rows and columns of the product past its own
part, which stores never write. Only ops that already lower: selects, concatenations with zeros, and ml.dot itself
(whose own paddings of m, k and n, ops/small_dots.py, then apply)."""
from __future__ import annotations

from ..dtypes import DType
from ..types import RefType, TensorType, resolve
from .base import is_value
from .padded_tiles import _holds, _up, allowed, mask


def padded_dot(cx, a, b, acc, out_dtype, dot_rule):
  """`acc + a @ b` at padded shapes (see the module) where the trace is padded and an operand is padded or the
  product's own shape is one no register tensor holds; None otherwise (the plain dot)."""
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0):
    return None
  if not all(is_value(x) and isinstance(x.type, (RefType, TensorType)) and len(x.type.shape) == 2 for x in (a, b)):
    return None
  own_a, own_b = (tuple(pads.get(x.id, x.type.shape)) for x in (a, b))
  (m, k), (k2, n) = own_a, own_b
  padded_a, padded_b = own_a != tuple(a.type.shape), own_b != tuple(b.type.shape)
  if k != k2 or not (padded_a or padded_b or not _holds((m, n))):
    return None
  a, b = (rows_padded(cx, x) for x in (a, b))    # (an SMEM operand no register tensor holds, (40, 24): row by row)
  padded_a, padded_b = padded_a or a.id in pads, padded_b or b.id in pads
  if acc is not None and not (is_value(acc) and isinstance(acc.type, TensorType)
                              and tuple(pads.get(acc.id, acc.type.shape)) == (m, n)):
    return None               # (the dot's own checks report it)
  rows, cols = (m, n) if _holds((m, n)) else _up((m, n), None)
  rows = max(rows, a.type.shape[0] if padded_a else 0)
  cols = max(cols, b.type.shape[1] if padded_b else 0)
  deep = max(a.type.shape[1], b.type.shape[0])
  from .transfers import load
  with allowed(cx):
    x = load(cx, a) if isinstance(a.type, RefType) else a
    y = load(cx, b) if isinstance(b.type, RefType) else b
    x = _zeroed(cx, x, (m, k)) if padded_a else x
    y = _zeroed(cx, y, (k, n)) if padded_b else y
    x, y = _grown(cx, x, (rows, deep)), _grown(cx, y, (deep, cols))
    if acc is not None and out_dtype is None:     # (the product in the accumulator's dtype, as small_m_dot's: a
      out_dtype = resolve(acc.type.dtype)         # float16 one was float32 + float16, MG104; probe 61b)
    out = dot_rule(cx, x, y, None, out_dtype=out_dtype)
  if tuple(out.type.shape) != (m, n):
    pads[out.id] = (m, n)
  if acc is None:
    return out
  from .elementwise import BinOp, binary
  return binary(cx, BinOp.ADD, acc, out)


def rows_padded(cx, x):
  """`x`, or, in a padded trace, for an SMEM buffer of 2-D `x` no register tensor holds (a (40, 24) weight tile
  ml.dot's B or `w_s[...]`: MG204) whose rows registers hold (a multiple of 8 elements, up to 128 rows), its rows
  copied into a scratch of the padded shape beside zeros and read back whole, recorded padded with x's own shape
  (probe 50a)."""
  from .elementwise import full_
  from .memory import view
  from .scratches import scratch
  from .transfers import load, store
  t = getattr(x, "type", None)
  if getattr(cx.b, "pad_tiles", None) is None or not isinstance(t, RefType) or t.space.name != "SMEM" \
      or getattr(t, "transposed", False) or t.remote or len(t.shape) != 2:
    return x
  (h, d), dt = tuple(t.shape), resolve(t.dtype)
  if _holds((h, d)) or d % 8 or h > 128 or not isinstance(dt, DType):
    return x
  up = _up((h, d), dt)
  if not _holds(up):
    return x
  with allowed(cx):
    buf = scratch(cx, up, t.dtype, f"{x.name or 'b'} padded to {up}")
    for r in range(h):
      store(cx, view(cx, buf, (r, slice(0, d))), load(cx, view(cx, x, (r, slice(None)))))
    if up[1] > d:
      store(cx, view(cx, buf, (slice(0, up[0]), slice(d, up[1]))), full_(cx, (up[0], up[1] - d), 0, t.dtype))
    if up[0] > h:
      store(cx, view(cx, buf, (slice(h, up[0]), slice(0, d))), full_(cx, (up[0] - h, d), 0, t.dtype))
    out = load(cx, buf)
  cx.b.pad_tiles[out.id] = (h, d)
  return out


def _zeroed(cx, x, own):
  """Padded register tensor `x` with zeros in its padding (outside its own shape `own`)."""
  from .elementwise import where_
  m = mask(cx, own, tuple(x.type.shape))
  return x if m is None else where_(cx, m, x, 0)


def _grown(cx, x, shape):
  """Register tensor `x` with zero rows and columns appended up to `shape` (x itself where it has that shape)."""
  from .small_dots import _pad
  for axis in (0, 1):
    if x.type.shape[axis] < shape[axis]:
      x = _pad(cx, x, axis, shape[axis])
  return x
