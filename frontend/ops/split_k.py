"""A tensor-core operand buffer wider than one swizzle tile along K, loaded from an array whose K is no whole number of
tiles (probe 59a): `a_s = ml.smem((64, 128))` filled by `ml.copy(a.at[rows, ml.ds(k * 128, 128)], a_s)` from an `a`
of K = 1000 float16 columns, then `ml.dot(a_s, b_s)`. Such a buffer is tiled (8, 64) for the tensor cores, and a TMA
copy into tiles tiles the GMEM array too, which then needs K a multiple of 64 (MG401: Mosaic GPU would round the
array down and drop its last columns). A buffer one tile wide is copied as plain swizzled rows, whatever the array's
width (`layout_checks.one_tile_column`), so the kernel that fails so is traced again (compile.trace) with each such
buffer, and the dot's other operand, made of buffers one tile wide along K (`Split`): a copy into it is one copy per
part (the same window, `ml.ds(start + t * 64, 64)` along K), and an `ml.dot` of it is one dot per part, accumulated
in order (`acc = ml.dot(a1, b1, ml.dot(a0, b0, acc))`), as layout_checks.split_load's hint writes by hand. Any other
use of such a buffer ends the retry (the first trace's error stands)."""
from __future__ import annotations

from .. import errors as E


class SplitAbort(E.KernelTypeError):
  """A use of a split buffer other than a copy into it, `.T` and `ml.dot`: the split retry is given up."""


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
  """`ml.copy(src, dst)` of a GMEM window into a split buffer: each part from its window of `src`."""
  from .memory import DSlice, view
  if not isinstance(dst, Split) or isinstance(src, Split) or dst.transposed:
    raise SplitAbort("a split buffer is only copied into", cx.loc)
  t = getattr(src, "type", None)
  if t is None or len(t.shape) != 2 or str(t.space) != "GMEM":
    raise SplitAbort("a split buffer is copied into from a GMEM window", cx.loc)
  for k, part in enumerate(dst.parts):
    idx = tuple(DSlice(k * dst.w, dst.w) if d == dst.axis else slice(None) for d in range(2))
    rule(cx, view(cx, src, idx, f"{src.name or 'x'}[part {k}]"), part)


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
