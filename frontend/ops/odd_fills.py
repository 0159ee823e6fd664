"""A number or scalar stored into a window no register tensor holds (probe 46a): `o[0:33] = 0`, `o[:, 3:40] = -1`,
`o[...] = 0.5` of a (100,) or (3, 24, 40) output, `buf[5:50] = 0` in SMEM. Such a store was MG204 (the value is
made at the window's shape, which needs a multiple of 8 elements for a vector and of 128 for a tile); storing the
same value twice is harmless, so the window is covered by a few windows that registers hold, overlapping at its
end: along the last axis [0:n // 8 * 8] and [n - 8:n], along the one before it whole multiples of the rows a tile
of that width needs (128 // gcd(width, 128)), likewise overlapping, or single rows where there are fewer, and
leading axes one index at a time; rows under 8 wide an element at a time (at most CAP elements). Every piece lies
inside the window, so no access leaves the buffer. A value made by `ml.zeros`, `ml.full` or `ml.ones` at such a
shape and stored whole (`o[...] = ml.zeros(o.shape)`) is stored as its number (the unused tensor is dropped before
layouts are chosen); a window of another buffer read whole at such a shape and stored at once is copied in the
same pieces (`copy_pieces`)."""
from __future__ import annotations

import itertools
import math

CAP = 64          # pieces at most (each a store); a window that needs more keeps its error


def held(shape) -> bool:
  """Whether a register tensor holds `shape` as a plain vector or tile (a multiple of 8 or of 128 elements)."""
  n = math.prod(shape)
  return n > 0 and (n % 8 == 0 if len(shape) == 1 else n % 128 == 0)


def _cover(n: int, m: int):
  """[(start, stop)] of lengths a multiple of `m` covering [0, n), the second overlapping the first; None if n < m."""
  if n % m == 0:
    return [(0, n)]
  if n < m:
    return None
  return [(0, n // m * m), (n - m, n)]


def fill_pieces(shape):
  """The indices (ints and static slices) of windows registers hold that cover a window of `shape` (which they do
  not hold), at most CAP of them; None where there is no such cover (a last axis under 8 wide, more pieces)."""
  shape = tuple(shape)
  if not shape or held(shape) or 0 in shape:
    return None
  if len(shape) == 1:
    cols = _cover(shape[0], 8)
    return [(slice(a, b),) for a, b in cols] if cols else None
  *lead, rows, width = shape
  cols = _cover(width, 8)
  if cols is None:           # rows under 8 wide ((5, 7)): an element at a time, where they are few
    return list(itertools.product(*map(range, shape))) if math.prod(shape) <= CAP else None
  out = []
  for at in itertools.product(*map(range, lead)):
    for a, b in cols:
      spans = _cover(rows, hw_rows(b - a))
      for r in ([slice(c, d) for c, d in spans] if spans else range(rows)):
        out.append(tuple(at) + (r, slice(a, b)))
        if len(out) > CAP:
          return None
  return out


def hw_rows(width: int) -> int:
  """The rows a tile `width` wide needs so that it holds a multiple of 128 elements (one per thread)."""
  from .. import hw
  return hw.WARPGROUP // math.gcd(width, hw.WARPGROUP)


def fill_of(cx, ref_type, value):
  """`value`'s fill number or scalar where it is a tensor `ml.full` made at the window's shape, which no register
  tensor holds, in the window's dtype (the store fills the window with it instead); else `value` itself (a dtype
  that differs keeps its error)."""
  from . import elementwise as ew
  from .base import is_value
  from ..types import TensorType, resolve
  from .padded_tiles import true_shape
  shape = tuple(ref_type.shape)
  if not (is_value(value) and isinstance(value.type, TensorType) and true_shape(cx.b, value) == shape) \
      or held(shape) or resolve(value.type.dtype) != resolve(ref_type.dtype):
    return value
  o = cx.b.defs.get(value.id)
  return o.value if isinstance(o, ew.Full) and o.value is not None else value


def copy_pieces(cx, ref, value) -> bool:
  """`o[0:33] = buf[3:36]`, `o[...] = v[0:9, 0:9]` (a register slice, read from its SMEM scratch): a window read
  whole, just now (the last op), at a shape no register tensor holds, stored into a window of that shape and dtype
  of another buffer: read and stored piece by piece as fill_pieces covers it, each piece the same window of both
  (pieces overlap, so a source that is the destination's own buffer is left alone: a later piece would read what
  an earlier one wrote). False where it is no such copy (the store goes on, and reports what it reports)."""
  from .base import is_value
  from .gather import root_id
  from ..ir import traits_of
  from .memory import Load, View, view
  from .transfers import load, store
  from ..types import Space, TensorType, resolve
  t = ref.type
  if not (is_value(value) and isinstance(value.type, TensorType) and tuple(value.type.shape) == tuple(t.shape)) \
      or held(t.shape) or resolve(value.type.dtype) != resolve(t.dtype):
    return False
  o = cx.b.defs.get(value.id)
  ops = cx.b.block.ops
  at = next((k for k in range(len(ops) - 1, -1, -1) if ops[k] is o), None)
  if not isinstance(o, Load) or o.merge or o.keep is not None or at is None \
      or not all(isinstance(p, View) or traits_of(p).pure and not p.regions for p in ops[at + 1:]) \
      or root_id(cx.b, o.ref) == root_id(cx.b, ref) or (pieces := fill_pieces(t.shape)) is None:
    return False
  src = root_id(cx.b, o.ref)
  if o.ref.type.space == Space.GMEM and (src not in cx.b.read_only or src in getattr(cx.b, "aliased", ())):
    return False        # (an output read back, or an input aliased to one, may be the destination's memory)
  for idx in pieces:
    store(cx, view(cx, ref, idx, ref.name), load(cx, view(cx, o.ref, idx, o.ref.name)))
  return True


def stored_in_pieces(cx, ref, value, up) -> bool:
  """`xs[...] = v` of a value computed padded (held as `up`) into an SMEM buffer of its own shape, `xs =
  ml.smem((7, 64))`, to be copied out by TMA or read back (probe 59a: it was MG204): stored whole into the compiler's
  scratch, then its own part copied into the buffer in the windows `fill_pieces` covers it with (rows 0:6 and 5:7 of
  a (7, 64) tile); False where no such cover exists."""
  from .memory import view
  from .padded_tiles import allowed
  from .scratches import scratch
  from .transfers import load, store
  if (pieces := fill_pieces(ref.type.shape)) is None and held(tuple(ref.type.shape)) and 0 not in ref.type.shape:
    pieces = [tuple(slice(0, n) for n in ref.type.shape)]    # (one piece: a padded (256, 32) product's own (256, 24)
  if pieces is None:                                         # part, which registers hold; probe 61b, seed 914)
    return False
  with allowed(cx):
    buf = scratch(cx, up, value.type.dtype, f"{value.name or 'tensor'} scratch")
    store(cx, buf, value)
  for idx in pieces:
    store(cx, view(cx, ref, idx, ref.name), load(cx, view(cx, buf, idx, buf.name)))
  return True
