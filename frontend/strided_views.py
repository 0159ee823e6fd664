"""Strided views of refs, `x.at[::2]`, `o.at[1::2]`, `x.at[0, ::-1]` (probe 46a): numpy's basic slicing with static
steps, which a view in memory (a window of consecutive elements) cannot be. Such a view is held as its ref and
index, and read or written whole as the plain subscript is, `x.at[::2][...]` as `x[::2]` (the step-1 window that
covers it, then the strided view of that in registers) and `o.at[1::2][...] = v` as `o[1::2] = v` (the plain
scatter at those positions, GMEM outputs); a static view or index of it (`x.at[::2].at[0:8]`, `x.at[1::2][3]`)
composes with it, as numpy's slices do; a masked access, a TMA copy or any other use is a KernelTypeError that
says to index the ref itself (they were MG003 at the `.at`)."""
from __future__ import annotations

from . import errors as E


class StridedView:
  """`ref.at[index]` where a static slice of `index` steps by other than 1."""
  KIND = "a strided view of a ref"

  def __init__(self, ref, index, text: str):
    self.ref, self.index, self.text = ref, index, text


def is_strided(index) -> bool:
  """An index of static slices (ints, `...` beside) one of which steps by other than 1 (not 0)."""
  items = index if isinstance(index, tuple) else (index,)
  static = lambda b: b is None or isinstance(b, int) and not isinstance(b, bool)
  return any(isinstance(i, slice) and all(map(static, (i.start, i.stop, i.step))) and i.step not in (None, 0, 1)
             for i in items)


def strided_error(view: StridedView, what: str, loc) -> E.KernelError:
  """A use of a strided view other than reading or writing it whole, at `loc`."""
  idx = view.text[view.text.index(".at[") + 4:-1] if ".at[" in view.text else "::k"
  ref = view.text[:view.text.index(".at[")] if ".at[" in view.text else "x"
  return E.KernelTypeError(
      f"{view.text} is a strided view (its elements are not consecutive in memory): it is read whole ([...]) or"
      f" written whole ([...] = v), not {what}", loc,
      hint=f"index the ref itself in one subscript, {ref}[{idx}] (a read) or {ref}[{idx}] = v (a write of a GMEM"
           f" output); for a masked or TMA access, move the step-1 window that covers the elements and slice the"
           f" register tensor, or give the array an axis of the step outside the kernel (x.reshape(..., n // k, k))"
           f" and index it with an int")


def _dims(view: StridedView) -> list:
  """The view's index an item per dimension of its ref (`...` and missing trailing axes as whole slices)."""
  shape = tuple(view.ref.type.shape)
  items = view.index if isinstance(view.index, tuple) else (view.index,)
  dims = []
  for i in items:
    dims.extend([slice(None)] * (len(shape) - (len(items) - 1)) if i is Ellipsis else [i])
  return dims + [slice(None)] * (len(shape) - len(dims))


def strided_shape(view: StridedView) -> tuple:
  """The shape numpy gives `ref[index]` (ints drop their axis; `...` and missing trailing axes are whole)."""
  shape = tuple(view.ref.type.shape)
  return tuple(len(range(*i.indices(n))) for i, n in zip(_dims(view), shape) if isinstance(i, slice))


def strided_attribute(tracer, view: StridedView, attr: str, node):
  """`.shape`, `.ndim`, `.size`, `.dtype` of a strided view, as numpy's of `ref[index]`; any other attribute
  (`.load`, `.store`, `.at`, `.T`) the error that says to index the ref itself."""
  import math

  from .types import resolve
  if attr in ("shape", "ndim", "size"):
    shape = strided_shape(view)
    return shape if attr == "shape" else len(shape) if attr == "ndim" else math.prod(shape)
  if attr == "at":
    return AtOf(view)
  if attr == "dtype":
    d = resolve(view.ref.type.dtype)
    if hasattr(d, "np"):
      return d.np
  raise strided_error(view, f"used through .{attr}", tracer.loc(node))


def compose(view: StridedView, index):
  """The index of the ref that `view[index]` (or `view.at[index]`) names, where both are static (ints and slices,
  `...`): Python's ranges compose as numpy's slices do (`x.at[::2].at[0:8]` is `x.at[0:16:2]`, `x.at[1::2][3]` is
  `x.at[7]`); a run-time integer scalar indexes an axis the view takes whole (`x.at[:, :, ::2].at[p]` is `x[p, :,
  ::2]`, probe 58b: it was MG003), where the plain subscript checks it as any run-time index, and a window `ml.ds(a, n)`
  of a static start is the slice `a:a + n`; None for anything else
  (a run-time start, an index tensor, a run-time index of a part of an axis), and where `index` leaves the view."""
  shape = tuple(view.ref.type.shape)
  dims = _dims(view)
  inner = index if isinstance(index, tuple) else (index,)
  inner = tuple(_static_window(i) for i in inner)
  free = [d for d, i in enumerate(dims) if isinstance(i, slice)]
  static = lambda b: b is None or isinstance(b, int) and not isinstance(b, bool)
  if sum(i is Ellipsis for i in inner) > 1 or not all(
      i is Ellipsis or isinstance(i, (int, _Window)) and not isinstance(i, bool) or _scalar(i) or isinstance(i, slice) and
      all(map(static, (i.start, i.stop, i.step))) and i.step != 0 for i in inner):
    return None
  flat = []
  for i in inner:
    flat.extend([slice(None)] * (len(free) - (len(inner) - 1)) if i is Ellipsis else [i])
  if len(flat) > len(free):
    return None
  flat.extend([slice(None)] * (len(free) - len(flat)))
  out = list(dims)
  for d, i in zip(free, flat):
    r = range(*dims[d].indices(shape[d]))
    if _scalar(i):
      if r != range(shape[d]):
        if not _covering(r, shape[d]):
          return None
        i = Stepped(i, r.start, r.step)   # x.at[::-1].at[p]: x[n - 1 - p] (probe 59a: it was MG003)
      out[d] = i
    elif isinstance(i, int):
      if not -len(r) <= i < len(r):
        return None
      out[d] = r[i]
    else:
      if isinstance(i, _Window):
        if len(r[i.start:i.stop]) != i.stop - i.start:
          return None
        i = slice(i.start, i.stop)
      r = r[i]
      out[d] = slice(r.start, r.stop if r.stop >= 0 else None, r.step) if len(r) else slice(0, 0)
  return tuple(out)


def _covering(r: range, n: int) -> bool:
  """Whether a run-time index `p` of the view's axis `r` (of an axis of n elements) is inside the array exactly
  where it is inside the view: the whole axis reversed (`::-1`), or any step whose first element is within one step
  of the axis' start and whose last within one step of its end (`::2` of an odd n, `1::2` of an even one, `::-2`),
  so that the plain subscript's bounds check of `start + p * step` is the view's. A part of the axis
  (`x.at[2:6:2].at[p]`) is not: a p past the view could land inside the array."""
  if not len(r):
    return False
  first, last, k = r[0], r[-1], abs(r.step)
  lo, hi = min(first, last), max(first, last)
  return lo < k and hi >= n - k


class Stepped:
  """The element `start + p * step` of the ref's axis that a run-time index `p` of a strided view names; the
  subscript builds it as integer arithmetic on p (`build`) before indexing the ref."""
  def __init__(self, p, start, step):
    self.p, self.start, self.step = p, start, step

  def build(self, cx):
    from .ops.elementwise import binary
    from .ops.elementwise_ops import BinOp
    at = binary(cx, BinOp.MUL, self.p, self.step) if self.step != 1 else self.p
    return binary(cx, BinOp.ADD, at, self.start) if self.start else at


def built(cx, index):
  """`index` (a tuple of compose) with its Stepped items built as integer scalars at `cx`."""
  if not isinstance(index, tuple) or not any(isinstance(i, Stepped) for i in index):
    return index
  return tuple(i.build(cx) if isinstance(i, Stepped) else i for i in index)


def _static_window(i):
  """`ml.ds(a, n)` of a static start as the slice `a:a + n` (it composes as one; probe 58b), anything else as is."""
  from .ops.memory import DSlice
  if isinstance(i, DSlice) and isinstance(i.start, int) and not isinstance(i.start, bool) and i.start >= 0:
    return _Window(i.start, i.start + i.size)
  return i


class _Window:
  """A static `ml.ds` window inside a strided view's axis: the slice `start:stop`, which must not be cut short (a
  window leaving the view is out of bounds, not clipped as a slice is)."""
  def __init__(self, start, stop):
    self.start, self.stop, self.step = start, stop, None


def window_leaving(view: StridedView, index, loc) -> E.KernelError | None:
  """The IndexOutOfBoundsError of a static `ml.ds` window of `view` that runs past the view's axis (`x.at[1,
  0::2].at[ml.ds(30, 8)]` of 32 rows: rows 30..37), where compose found no index; None for any other index."""
  dims = _dims(view)
  free = [d for d, i in enumerate(dims) if isinstance(i, slice)]
  items = [_static_window(i) for i in (index if isinstance(index, tuple) else (index,))]
  if Ellipsis in items or len(items) > len(free):
    return None
  shape = tuple(view.ref.type.shape)
  for d, i in zip(free, items):
    n = len(range(*dims[d].indices(shape[d])))
    if isinstance(i, _Window) and i.stop > n:
      return E.IndexOutOfBoundsError(
          f"the window ml.ds({i.start}, {i.stop - i.start}) runs past the end of {view.text}, which holds {n}"
          f" elements along that axis", loc,
          hint=f"start it at most at {n - (i.stop - i.start)}, or index the ref itself in one subscript")
  return None


def part_indexed(view: StridedView, index, loc) -> E.KernelError | None:
  """The KernelTypeError of a run-time index of a strided axis that takes part of its axis (`x.at[2:6:2].at[p]`:
  a p past the view could name an element of the array outside it, which no bounds check would see), naming the
  element to index the ref with; None for any other index."""
  dims = _dims(view)
  free = [d for d, i in enumerate(dims) if isinstance(i, slice)]
  items = index if isinstance(index, tuple) else (index,)
  if Ellipsis in items or len(items) > len(free):
    return None
  shape = tuple(view.ref.type.shape)
  for d, i in zip(free, items):
    r = range(*dims[d].indices(shape[d]))
    if _scalar(i) and r != range(shape[d]) and not _covering(r, shape[d]):
      p = getattr(i, "name", None) or "p"
      return E.KernelTypeError(
          f"{view.text} takes elements {r.start}, {r.start + r.step}, ... of an axis of {shape[d]}: a run-time index"
          f" of it is not composed, since an index past the view's {len(r)} elements could name an element of the"
          f" array outside it that no bounds check sees", loc,
          hint=f"index the ref itself with the element you mean, {r.start} + {p} * {r.step}"
               f" (bounding {p} to 0..{len(r) - 1} yourself), or take the view's elements whole with [...]")
  return None


def _scalar(i) -> bool:
  """Whether `i` is a run-time scalar of the kernel (an IR value of shape ()): its dtype is checked where the ref is
  indexed by it."""
  from .types import RefType
  t = getattr(i, "type", None)
  return getattr(t, "shape", None) == () and not isinstance(t, RefType)


class AtOf:
  """`.at` of a strided view: subscripting it composes the indices (or says to index the ref itself)."""
  def __init__(self, view):
    self.view = view
