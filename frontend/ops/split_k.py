"""A tensor-core operand buffer wider than one swizzle tile along K, loaded from an array whose K is no whole number of
tiles (probe 59a): `a_s = ml.smem((64, 128))` filled by `ml.copy(a.at[rows, ml.ds(k * 128, 128)], a_s)` from an `a`
of K = 1000 float16 columns, then `ml.dot(a_s, b_s)`. Such a buffer is tiled (8, 64) for the tensor cores, and a TMA
copy into tiles tiles the GMEM array too, which then needs K a multiple of 64 (MG401: Mosaic GPU would round the
array down and drop its last columns). A buffer one tile wide is copied as plain swizzled rows, whatever the array's
width (`layout_checks.one_tile_column`), so the kernel that fails so is traced again (compile.trace) with each such
buffer, and the dot's other operand, made of buffers one tile wide along K (`Split`): a copy into it is one copy per
part (the same window, `ml.ds(start + t * 64, 64)` along K), and an `ml.dot` of it is one dot per part, accumulated
in order (`acc = ml.dot(a1, b1, ml.dot(a0, b0, acc))`), as layout_checks.split_load's hint writes by hand. Any other
use of such a buffer ends the retry (the first trace's error stands), but (probe 60c) its whole read into registers
(`a_s[...]`: the parts read and concatenated), its whole write (`a_s[...] = v`: each part its columns) and a TMA copy
of it into a GMEM window (one copy per part)."""
from __future__ import annotations

from .. import errors as E


class SplitAbort(E.KernelTypeError):
  """A use of a split buffer other than copies, `.T`, `ml.dot` and whole reads and writes: the split retry is given
  up."""


class Split:
  """An SMEM buffer held as `parts`, each `w` wide along `axis` (1: columns, an A operand's K; 0: rows, a B's K);
  `transposed`: its `.T`."""
  KIND = "an SMEM buffer split along K"

  def __init__(self, parts, axis, w, shape, name, transposed=False):
    self.parts, self.axis, self.w, self.shape, self.name, self.transposed = parts, axis, w, shape, name, transposed

  @property
  def T(self):
    return Split(self.parts, self.axis, self.w, self.shape, self.name, not self.transposed)

  def k_axis(self) -> int:
    """The axis of the operand as the dot sees it (after `.T`) that the parts split."""
    return 1 - self.axis if self.transposed else self.axis


def key(loc) -> tuple:
  return (getattr(loc, "filename", None), getattr(loc, "lineno", None), getattr(loc, "col_offset", None))


def alloc(cx, shape, dtype, emit):
  """`ml.smem(shape)` at a site the split retry splits: the parts, or None (the buffer as it is)."""
  plan = getattr(cx.b, "split_k", None)
  if not plan or (got := plan.get(key(cx.loc))) is None:
    return None
  axis, w = got
  shape = tuple(shape)
  if len(shape) != 2 or shape[axis] % w or shape[axis] <= w:
    return None
  part = tuple(w if d == axis else n for d, n in enumerate(shape))
  name = cx.name or "buf"
  parts = [emit(part, f"{name}{t}") for t in range(shape[axis] // w)]
  return Split(parts, axis, w, shape, name)


def attribute(cx, s: Split, attr):
  if attr == "T":
    return s.T
  if attr == "shape":
    return s.shape[::-1] if s.transposed else s.shape
  raise SplitAbort(f"{s.name} is split along K here; .{attr} of it is not taken", cx.loc)


def copy(cx, src, dst, rule):
  """`ml.copy(src, dst)` of a GMEM window into a split buffer, or of a split buffer into a GMEM window (probe 60c, a
  TMA store of it): each part from (into) its window of the GMEM side."""
  from .memory import DSlice, view
  into = isinstance(dst, Split)
  buf, other = (dst, src) if into else (src, dst)
  if isinstance(other, Split) or buf.transposed:
    raise SplitAbort("a split buffer is copied whole, into it or out of it", cx.loc)
  t = getattr(other, "type", None)
  if t is None or len(t.shape) != 2 or str(t.space) != "GMEM":
    raise SplitAbort("a split buffer is copied into from a GMEM window, or into one", cx.loc)
  for k, part in enumerate(buf.parts):
    idx = tuple(DSlice(k * buf.w, buf.w) if d == buf.axis else slice(None) for d in range(2))
    window = view(cx, other, idx, f"{other.name or 'x'}[part {k}]")
    rule(cx, window, part) if into else rule(cx, part, window)


def _whole(index) -> bool:
  return index is Ellipsis or index == () or (isinstance(index, tuple) and len(index) == 2 and all(
      isinstance(i, slice) and i == slice(None) for i in index)) or index == slice(None)


def read(cx, s: Split, index, read_part):
  """`s[...]` of a split buffer into registers (probe 60c): its parts read (`read_part`) and concatenated along the
  split axis, transposed for `s.T[...]`; a part of it ends the retry."""
  from .shape import concatenate
  if not _whole(index):
    raise SplitAbort(f"{s.name} is split along K here; it is read whole, {s.name}[...]", cx.loc)
  v = concatenate.rule(cx, [read_part(p) for p in s.parts], s.axis)
  if s.transposed:
    from .permute import transpose_tensor
    v = transpose_tensor(cx, v)
  return v


def write(cx, s: Split, index, value, write_part):
  """`s[...] = value` of a register tile into a split buffer (probe 60c): each part its columns (rows) of the value
  (`write_part(part, piece)`); a part of it, or its `.T`, ends the retry."""
  from .shape import expand
  if not _whole(index) or s.transposed or tuple(getattr(getattr(value, "type", None), "shape", ())) != s.shape:
    raise SplitAbort(f"{s.name} is split along K here; it is written whole, {s.name}[...] = v", cx.loc)
  for k, p in enumerate(s.parts):
    write_part(p, expand(cx, value, tuple(slice(k * s.w, (k + 1) * s.w) if d == s.axis else slice(None)
                                          for d in range(2))))


def dot(cx, a, b, acc, rule, **kw):
  """`ml.dot(a, b, acc)` where a (K its columns) or b (K its rows) is split: one dot per part, accumulated in order;
  the other operand split alike, or a plain SMEM buffer (its windows along K)."""
  from .memory import DSlice, transpose, view
  parts = []
  for x, k_axis in ((a, 1), (b, 0)):
    if isinstance(x, Split):
      if x.k_axis() != k_axis:
        raise SplitAbort("a split buffer meets the dot along another axis than K", cx.loc)
      parts.append(list(x.parts) if not x.transposed else [transpose(cx, p, f"{p.name}.T") for p in x.parts])
      w = x.w
    else:
      parts.append(None)
  n = len(next(p for p in parts if p is not None))
  for i, (x, k_axis) in enumerate(((a, 1), (b, 0))):
    if parts[i] is None:
      t = getattr(x, "type", None)
      if t is None or str(getattr(t, "space", "")) != "SMEM" or getattr(t, "transposed", False) \
          or t.shape[k_axis] != n * w:
        raise SplitAbort("a split buffer's dot partner is no plain SMEM buffer", cx.loc)
      parts[i] = [view(cx, x, tuple(DSlice(j * w, w) if d == k_axis else slice(None) for d in range(2)),
                       f"{x.name or 'b'}[part {j}]") for j in range(n)]
  if len(parts[0]) != len(parts[1]):
    raise SplitAbort("the dot's operands are split into different numbers of parts", cx.loc)
  for pa, pb in zip(*parts):
    acc = rule(cx, pa, pb, acc, **kw)
  return acc
