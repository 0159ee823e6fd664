"""Memory: the memory ops (SMEM buffers, views, cluster refs, register loads and stores, TMA copies)
and the rules of buffers and views: `ml.smem`, `ml.ds`, indices and `.at[...]` windows (checked
against their bounds), `.T` views, `ml.cluster_ref`.

The rules that move data through refs (`ref[...]`, `ref[...] = v`, `ml.copy`) are in transfers.py. An index
operand (a window's start, a loop bound) and the errors of what is not one are index_operands.py.
SMEM buffers allocated without a dtype take it from their uses (frontend/infer.py).
"""
from __future__ import annotations

import dataclasses

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..ir import Access, LayoutRule, Traits
from ..types import DTypeVar, RefType, Space, TensorType, dtype_name, resolve
from .base import builtin, dtype_arg, is_ref, is_value, kind_of, static_shape, shown
from .index_operands import index_operand
from .index_hints import (fixed_length, runtime_size_error, runtime_slice_error, slice_step_error, static_index_hint,
                          static_slice_hint, strided_ds_error, window_outside_hint)
from .scatter_hints import atomic_static_hint


def _copy_effects(o):
  return [(o.src, Access.TMA_READ), (o.dst, Access.TMA_WRITE)]


@ir.op(Traits())
class SmemAlloc(ir.Op):
  """An SMEM buffer; lives for the whole kernel (frontend/smem.py plans where)."""
  loc: object
  results: tuple


@ir.op(Traits(pure=True))
class View(ir.Op):
  """A window of a root ref (a parameter, an SmemAlloc or a ClusterRef).

  `transpose` marks `buf.T`: the window's two dimensions swapped, with no data moved
  (only ml.dot reads such views: the tensor cores take the operand transposed).
  `within`: the windows over the root of the views this one was taken from (a root's rank of
  `ir.Idx`es each, outermost first), where they end inside the root: a window of a view may
  leave it only where the view reaches the root's end (see view(); interpret mode checks it).
  """
  ref: ir.Value
  index: tuple
  loc: object
  results: tuple
  transpose: bool = False
  within: tuple = ()


@ir.op(Traits(pure=True))
class ClusterRef(ir.Op):
  """The same SMEM buffer in another CTA of the cluster (`cta` along `axis`)."""
  ref: ir.Value
  cta: ir.Operand
  axis: int
  loc: object
  results: tuple


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_READ)], layout=LayoutRule.MEMORY,
              splits=True))
class Load(ir.Op):
  """Read a whole ref (GMEM or SMEM) into registers. `merge`: the read of a masked SMEM store
  (ml.store(buf, v, mask=m) keeps the old elements where m is off), which may read elements
  nothing wrote: they are written back unchanged, and stay unwritten. `keep`: the read of a
  masked SMEM load (selected in registers): ((lo, hi), ...) over the window's dimensions, the box
  of the elements its mask (known while compiling) keeps, the rest read and dropped; () where the
  mask is known only at run time."""
  ref: ir.Value
  loc: object
  results: tuple
  merge: bool = False
  keep: tuple | None = None
  start_multiple: int | None = None   # (tma_starts.mark_register_starts: what each window row's offset is a multiple of)


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_WRITE)], layout=LayoutRule.MEMORY,
              splits=True))
class Store(ir.Op):
  """Write a register tensor (same shape and dtype) into a ref."""
  ref: ir.Value
  value: ir.Value
  loc: object
  results: tuple = ()
  start_multiple: int | None = None   # (as Load's)


@ir.op(Traits(effects=_copy_effects))
class Copy(ir.Op):
  """An asynchronous TMA copy, GMEM -> SMEM or SMEM -> GMEM.

  `slot` numbers the copy sites that load SMEM; each has its own barrier. A
  pipelined copy (frontend/pipeline.py) uses barrier `slot + stage`. A load with
  `multicast=axis` is the same window in every CTA of the cluster along that axis:
  each loads a share and the TMA engine delivers it to all of them.
  """
  src: ir.Value
  dst: ir.Value
  slot: int
  loc: object
  results: tuple = ()
  stage: ir.Operand = 0
  reduce: object = None       # an atomic.AtomicKind: the TMA engine reduces into GMEM (a store only)
  multicast: int | None = None
  row_blocks: bool = False    # (tma_starts.row_blocks: a tiled buffer's rows copied a row of tiles at a time)
  tile_blocks: bool = False   # (layout_checks.by_tile_blocks: a tiled buffer loaded a tile at a time, ragged columns)


def is_load(o) -> bool:
  """A TMA copy that lands in SMEM."""
  return isinstance(o, Copy) and o.slot >= 0


def root_in(defs: dict, ref: ir.Value) -> ir.Value:
  """The parameter, SMEM buffer or cluster ref a view looks into, from a def table (value id ->
  op): views compose onto their root when made."""
  d = defs.get(ref.id)
  return d.ref if isinstance(d, View) else ref


def root(b, ref: ir.Value) -> ir.Value:
  """root_in for the ops a builder has made."""
  return root_in(b.defs, ref)


def window(b, ref: ir.Value):
  """(root ref, index over the root) of a view; (ref, None) for a whole root."""
  d = b.defining(ref)
  return (d.ref, d.index) if isinstance(d, View) else (ref, None)


# ---------------------------------------------------------------- refs and views
@dataclasses.dataclass(frozen=True)
class DSlice:
  """`ml.ds(start, size)`: a window of `size` elements from a (possibly dynamic) start."""
  start: object
  size: int
  texts: tuple = dataclasses.field(default=("", ""), compare=False, repr=False)   # the user's text of each
  KIND = "a window ml.ds(start, size)"         # (kind_of: in messages)


@builtin
def ds(cx, start, size, stride=None):
  """A dynamic slice for `ref.at[...]`: `x.at[ml.ds(i * 128, 128), :]`. A stride (Pallas's
  `pl.ds(start, size, stride)`) of 1 is the same window; a static one with a static start and size is the
  strided slice `start:start + (size - 1) * stride + 1:stride` (a strided view, read or written whole, as
  `x.at[::2]`); any other is an error with the fix."""
  static = lambda v: isinstance(v, int) and not isinstance(v, bool)
  if static(stride) and stride > 1 and static(start) and start >= 0 and static(size) and size > 0:
    return slice(start, start + (size - 1) * stride + 1, stride)
  if stride is not None and not (isinstance(stride, int) and not isinstance(stride, bool) and stride == 1):
    raise strided_ds_error(cx, stride)
  texts = tuple(cx.named(x, "") if is_value(x) else "" for x in (start, size))
  return DSlice(start, size, texts)


ds.rule.refused = ("stride",)        # (usage hints show ml.ds(start, size))


@builtin
def smem(cx, shape, dtype=None):
  """An SMEM buffer. Without `dtype`, it is inferred from the buffer's uses.

  `buf = ml.smem((128, 64))` then `ml.copy(x.at[...], buf)` makes `buf` x's dtype.
  """
  shape = static_shape(cx, shape, "ml.smem")
  dtype = dtype_arg(cx, dtype, "ml.smem", optional=True)
  if dtype is None:
    dtype = DTypeVar(cx.name or "buffer", cx.loc)
  from .split_k import alloc

  def emit(shape, name):
    v = cx.b.emit(SmemAlloc, loc=cx.loc, types=[RefType(shape, dtype, Space.SMEM)], names=[name]).result
    cx.b.allocs.append(v)
    return v
  return alloc(cx, shape, dtype, emit) or emit(shape, cx.name)    # (split along K: a ragged K, probe 59a)


def add_index(cx, a, b):
  from .elementwise import BinOp, binary
  if isinstance(a, int) and isinstance(b, int):
    return a + b
  if isinstance(a, int) and a == 0:
    return b
  if isinstance(b, int) and b == 0:
    return a
  return binary(cx, BinOp.ADD, a, b)


def normalize_index(cx, shape, index, name, *, past_end=False, access=""):
  """Per-dimension `ir.Idx`es of `index` over `shape`. With `past_end` (GMEM refs), an
  `ml.ds` window may run past the end of its dimension: TMA copies read zeros there and drop
  writes, masked register accesses skip it, and an unmasked register access is rejected."""
  if not isinstance(index, tuple):
    index = (index,)
  n_ell = sum(1 for i in index if i is Ellipsis)
  if n_ell > 1:
    raise E.KernelTypeError("an index can hold at most one '...'", cx.loc, hint="ref.at[i, ...]")
  if n_ell:
    k = index.index(Ellipsis)
    index = index[:k] + (slice(None),) * (len(shape) - len(index) + 1) + index[k + 1:]
  if None in [i for i in index if not is_value(i)]:     # (a view's None: the plain read's is subscripts.none_axes)
    d = next(d for d, i in enumerate(index) if i is None and not is_value(i))
    raise E.KernelTypeError(
        f"cannot index a ref with None (dimension {d}): a view of {name or 'a ref'} has the ref's own axes", cx.loc,
        hint=f"index {name or 'the ref'} without None and give the value the size-1 axis: a plain read takes None"
             f" as jnp's ({name or 'ref'}[i, None, :] is {name or 'ref'}[i][None, :]); a value written drops it"
             f" (v[0])")
  if len(index) > len(shape):
    raise E.IndexOutOfBoundsError(
        f"too many indices for {name or 'ref'} of rank {len(shape)}: got {len(index)}", cx.loc,
        hint=f"{name or 'the ref'} has shape {shape}")
  index = index + (slice(None),) * (len(shape) - len(index))
  from .control import For, If, While
  for d, i in enumerate(index):
    if isinstance(i, slice) and any(is_value(x) for x in (i.start, i.stop)):
      # `x[s:s + 64]` (also `pid * B:(pid + 1) * B`): a size the same whatever the run-time start is, the
      # window ml.ds(s, 64) (its run-time stop, past the end or not, ml.ds's)
      size = fixed_length(cx, i.start, i.stop) if is_value(i.start) and i.step in (None, 1) else None
      if size is None or not 0 < size <= shape[d]:
        from .window_hints import strided_window_error
        raise strided_window_error(cx, index, d, shape, name or "ref", access) or runtime_slice_error(
            cx, index, d, shape, name or "ref", access, past_end)
      index = index[:d] + (DSlice(i.start, size, (cx.named(i.start, ""), "")),) + index[d + 1:]
    if isinstance(i, DSlice) and is_value(i.size) and (g := _grid_size(cx, i.size)) is not None and g > 0:
      index = index[:d] + (dataclasses.replace(i, size=g),) + index[d + 1:]     # (the grid's static extents)
      continue
    if isinstance(i, DSlice) and is_value(i.size) and not isinstance(cx.b.defining(i.size), (For, If, While)):
      raise runtime_size_error(cx, index, d, shape, name or "ref", access)     # (a merged int: _one_index says why)
  return tuple(_one_index(cx, d, i, n, name or "ref", past_end, len(shape))
               for d, (i, n) in enumerate(zip(index, shape)))


def empty_dim_hint(name, d):
  """The hint for an index into a dimension of size 0, where no window (masked or not) has an
  element: the empty case is the caller's, outside the kernel."""
  return (f"{name} is empty along dimension {d} in this call: handle that case outside the kernel (when"
          f" {name}.shape[{d}] == 0, make the outputs there, e.g. with jnp.zeros) and call the kernel only on"
          f" non-empty arrays")


def _one_index(cx, d, i, n, name, past_end=False, rank=1):
  hint = f"dimension {d} of {name} has size {n}" if n else empty_dim_hint(name, d)
  if isinstance(i, bool) or i is None:
    raise E.KernelTypeError(f"cannot index a ref with {i!r} (dimension {d})", cx.loc,
                            hint="index refs with ints, slices or ml.ds(start, size)")
  if isinstance(i, int):
    if not -n <= i < n:
      raise E.IndexOutOfBoundsError(f"index {i} is out of bounds for dimension {d} of {name} (size {n})",
                                    cx.loc, hint=static_index_hint(i, n, d, name, cx.loc) if n else hint)
    return ir.Idx(i % n, 1, True)
  if isinstance(i, slice):
    if i.step not in (None, 1):
      raise slice_step_error(cx, i.step, d, rank, start=i.start)
    if not all(x is None or (isinstance(x, int) and not isinstance(x, bool)) for x in (i.start, i.stop)):
      raise E.KernelTypeError("slice bounds must be static ints; for a dynamic start use ml.ds(start, size)",
                              cx.loc, hint="x.at[ml.ds(i * 128, 128)]")
    start, stop, _ = slice(i.start, i.stop).indices(n)
    if i.start is not None and not -n <= i.start <= n or i.stop is not None and not -n <= i.stop <= n:
      raise E.IndexOutOfBoundsError(
          f"slice {i.start if i.start is not None else ''}:{i.stop if i.stop is not None else ''} is out of bounds"
          f" for dimension {d} of {name} (size {n})", cx.loc,
          hint=static_slice_hint(i, n, d, name) if n else hint)
    if stop <= start and not (n == 0 and i.start is None and i.stop is None):   # (x.at[b, :] of an empty row: empty)
      raise E.IndexOutOfBoundsError(f"slice {i.start if i.start is not None else ''}:{i.stop if i.stop is not None else ''}"
                                    f" of dimension {d} is empty", cx.loc,
                                    hint=static_slice_hint(i, n, d, name) if n else hint)
    return ir.Idx(start, stop - start)
  if isinstance(i, DSlice):
    size = i.size
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
      from .control import For, If, While
      made = cx.b.defining(size) if is_value(size) else None
      why = ""
      if isinstance(made, If):           # a Python int given different values in a runtime if's branches
        why = (f": {size!r} differs between the branches of the if at line {made.loc.lineno}, so it is a"
               f" run-time value after it")
      elif isinstance(made, (For, While)):
        why = f": {size!r} changes in the loop at line {made.loc.lineno}, so it is a run-time value"
      raise E.KernelTypeError(f"ml.ds size must be a positive static int, got {shown(size)}{why}", cx.loc,
                              hint="the size of a window is fixed when the kernel is compiled" + (
                                  "; choose it with an ml.constexpr (an if on one is static), or take the"
                                  " larger window with a mask" if why else ""))
    if size > n and not past_end:
      raise E.IndexOutOfBoundsError(f"ml.ds size {size} exceeds dimension {d} of {name} (size {n})",
                                    cx.loc, hint=hint)
    start = index_operand(cx, i.start)
    # A GMEM window may leave the array on either side as long as part of it is inside: masked
    # register accesses touch only the elements their mask turns on (an unmasked access of it is
    # check_in_bounds's error). A window wholly outside has no element a mask could keep.
    first, last = (1 - size, n - 1) if past_end else (0, n - size)
    if isinstance(start, int) and not first <= start <= last:
      if not past_end and 0 <= start < n:      # an SMEM window partly past the buffer's end
        hint += (f"; an SMEM buffer's windows stay inside it, masked or not (only GMEM windows may run past"
                 f" the end): allocate {name} with room for the whole window ({start + size} elements along"
                 f" dimension {d})")
      elif past_end and n:                     # a GMEM window wholly outside: nothing for a mask to keep
        hint = window_outside_hint(cx.loc, name, d, n, start, size)
      elif not past_end and start < 0 and size <= n:    # an SMEM window before the buffer's start
        hint += (f"; an SMEM buffer's windows start inside it (ml.ds's start is not counted from the end, as a"
                 f" negative slice bound is): for its last {size} elements write ml.ds({n - size}, {size}) (or"
                 f" {name}.at[{-size}:]); for a halo before the data, allocate {name} with {-start} more"
                 f" element{'s' if start < -1 else ''} along dimension {d}, fill it from {-start} on, and shift"
                 f" its windows by {-start}")
      raise E.IndexOutOfBoundsError(
          f"ml.ds({start}, {size}) is out of bounds for dimension {d} of {name} (size {n})", cx.loc, hint=hint)
    return ir.Idx(start, size)
  if is_value(i):
    return ir.Idx(index_operand(cx, i), 1, True)
  if isinstance(i, float):      # x.shape[0] / 2: Python's / gives a float even of two ints
    raise E.KernelTypeError(f"cannot index with {kind_of(i)}; use ints, static slices or ml.ds(start, size)",
                            cx.loc, hint=f"an index is an integer: divide with // (e.g. {name}.shape[{d}] // 2,"
                                         f" not {name}.shape[{d}] / 2), or convert with int(...)")
  listed = (f"; to read (or scatter into) the elements a list names, pass it in as an int32 array and index"
            f" with that tensor, a gather: {name}[ids[...]] with ids = jnp.array({list(i)}, jnp.int32)"
            if isinstance(i, (list, tuple)) and i and all(isinstance(k, int) for k in i) else "")
  raise E.KernelTypeError(f"cannot index with {kind_of(i)}; use ints, static slices or ml.ds(start, size)",
                          cx.loc, hint=f"index {name} with ints, static slices (a:b) or windows"
                                       f" {name}.at[ml.ds(start, size)]{listed}")


def view(cx, ref: ir.Value, index, name=""):
  """`ref.at[index]`: a window of `ref`, composed onto the root ref."""
  if not is_ref(ref):
    raise E.KernelTypeError(f".at[...] needs a ref, got {kind_of(ref)}", cx.loc,
                            hint="views are windows of kernel parameters and ml.smem buffers")
  if ref.type.transposed:
    raise E.KernelTypeError(
        f"{ref.name or 'this view'} is transposed (.T); slice a buffer before transposing it, not after",
        cx.loc, hint="buf.at[stage].T instead of buf.T.at[stage]")
  idx = normalize_index(cx, ref.type.shape, index, ref.name or name, past_end=ref.type.space == Space.GMEM,
                        access=cx.access or ("read" if root(cx.b, ref).id in cx.b.read_only else ""))
  parent = cx.b.defining(ref)
  within = ()
  if isinstance(parent, View):      # compose onto the root
    new, it = [], iter(idx)
    for p in parent.index:
      if p.squeeze:
        new.append(p)
        continue
      n = next(it)
      new.append(ir.Idx(add_index(cx, p.start, n.start), n.size, n.squeeze))
    _check_inside_view(cx, ref, parent, idx, new)
    within = parent.within + (parent.index if ends_inside(parent.index, parent.ref.type.shape) else ())
    idx, ref = tuple(new), parent.ref
  shape = tuple(i.size for i in idx if not i.squeeze)
  t = RefType(shape, ref.type.dtype, ref.type.space, ref.type.remote)
  return cx.b.emit(View, ref, idx, loc=cx.loc, types=[t], names=[name], within=within).result


def staged(o: View, stage) -> View:
  """The view `o` of a buffer made multi-buffered: the same window of stage `stage`."""
  r, first = len(o.index), ir.Idx(stage, 1, True)
  within = sum(((first,) + o.within[k:k + r] for k in range(0, len(o.within), r)), ())
  return dataclasses.replace(o, index=(first,) + o.index, within=within)


def ends_inside(index, shape) -> bool:
  """Whether a window (over a root of `shape`) may end inside the root on some side: one whose
  windows must then stay inside it there (TMA and masks stop only at the root's own ends)."""
  return any(not i.squeeze and not (isinstance(i.start, int) and i.start <= 0 and i.start + i.size >= n)
             for i, n in zip(index, shape))


def _root_text(root, index) -> str | None:
  """`x.at[...]` of a window over the root `x`, as the user would write it; None where a run-time
  start has no name to show."""
  parts = []
  for i, n in zip(index, root.type.shape):
    if isinstance(i.start, int):
      parts.append(str(i.start) if i.squeeze else ":" if (i.start, i.size) == (0, n)
                   else f"ml.ds({i.start}, {i.size})")
    elif i.start.name:
      parts.append(i.start.name if i.squeeze else f"ml.ds({i.start.name}, {i.size})")
    else:
      return None
  while parts and parts[-1] == ":":
    parts.pop()
  return f"{root.name}.at[{', '.join(parts)}]" if parts else root.name


def _check_inside_view(cx, ref, parent, idx, composed):
  """MG203 for a window `idx` of the view `ref` statically known to leave it where the view ends
  inside its root: TMA would read (and masks let through) the root's elements there, which are
  not the view's. Past the root's own end (or before its start) a window may go, as a root's."""
  root, it, k = parent.ref, iter(idx), 0
  for p, n, c in zip(parent.index, root.type.shape, composed):
    if p.squeeze:
      continue
    i, dim = next(it), k
    k += 1
    if i.squeeze or not (isinstance(i.start, int) and isinstance(p.start, int)):
      continue
    before, past = i.start < 0 and p.start > 0, i.start + i.size > p.size and p.start + p.size < n
    if not (before or past):
      continue
    vname, rname = ref.name or "the view", root.name or "the array"
    rank = sum(1 for j in idx if not j.squeeze)
    axis = sum(1 for j in idx[:dim] if not j.squeeze)
    axes = "" if rank == 1 else "[" + ", ".join(":" if j == axis else "None" for j in range(rank)) + "]"
    on = [f"ml.arange({i.size}){axes} >= {-i.start}"] if i.start < 0 else []
    on += [f"ml.arange({i.size}){axes} < {p.size - i.start}"] if i.start + i.size > p.size else []
    mask = on[0] if len(on) == 1 else " & ".join(f"({m})" for m in on)
    whole = _root_text(root, composed)
    where = f"{whole}" if whole else f"{rname}.at[...] with ml.ds({c.start}, {i.size}) in dimension {dim}"
    raise E.IndexOutOfBoundsError(
        f"ml.ds({i.start}, {i.size}) is out of bounds for dimension {dim} of {vname} (size {p.size}), which"
        f" {'starts' if before else 'ends'} inside {rname}: a window may leave a view only where the view"
        f" reaches {rname}'s {'start' if before else 'end'}", cx.loc,
        hint=f"TMA copies and masks stop only at {rname}'s own ends, not a view's: window {rname} itself,"
             f" {where}, with a mask that keeps the view's part (.load(mask={mask}, other=0),"
             f" .store(value, mask={mask})), or make the view as large as the window")


def static_overrun(b, ref: ir.Value):
  """(dim, start, size, extent) of a statically known part of `ref`'s window past its root's
  end, or None (GMEM windows may run past the end; see normalize_index)."""
  root_ref, index = window(b, ref)
  for d, (i, n) in enumerate(zip(index or (), root_ref.type.shape)):
    if isinstance(i.start, int) and (i.start < 0 or i.start + i.size > n):
      return d, i.start, i.size, n
  return None


def check_in_bounds(cx, ref, what):
  """An unmasked register access must stay inside the array (only TMA and masks handle the end).
  `what` is "read", "write", or the atomic's name (`ml.atomic_max`)."""
  over = static_overrun(cx.b, ref)
  if over is not None:
    d, start, size, n = over
    name = root(cx.b, ref).name or "the ref"
    from ..memory_errors import run_overrun, window_overrun     # (x.at[offs] of Triton's offsets: their mask)
    run = run_overrun(cx.loc, name, *window(cx.b, ref), what) if what in ("read", "write") else None
    run = run or window_overrun(cx, ref, name, over, what)     # (a held window, a block pointer: the user's words)
    if run is not None:
      raise run
    if n == 0:           # no element to keep: no mask or TMA copy helps
      hint = empty_dim_hint(name, d)
    elif what.startswith("ml.atomic_"):   # an atomic has no mask: an index tensor drops the elements outside
      root_ref, index = window(cx.b, ref)
      text = cx.operands.get(ref) if cx.operands is not None else None
      hint = atomic_static_hint(what, root_ref, index, d, start, size, n, text)
    elif start < 0:      # a mask keeps the elements before 0 untouched; TMA windows start aligned
      _, index = window(cx.b, ref)
      k, rank = sum(1 for i in index[:d] if not i.squeeze), len(ref.type.shape)
      axes = "" if rank == 1 else "[" + ", ".join(":" if j == k else "None" for j in range(rank)) + "]"
      on = f"ml.arange({size}){axes} >= {-start}"
      op = (f"ref.load(mask={on}, other=0)" if what == "read" else f"ref.store(value, mask={on})"
            if what == "write" else "ref.load(mask=...) / ref.store(value, mask=...)")
      hint = f"a register {what} must stay inside the array: mask it to the elements inside: {op}"
    else:                # (the masked form of the user's access: a read stays a read)
      op = ("ref.load(mask=..., other=0)" if what == "read" else "ref.store(value, mask=...)" if what == "write"
            else "ref.load(mask=...) / ref.store(value, mask=...)")
      hint = (f"a register {what} must stay inside the array: copy the window with ml.copy (TMA reads"
              f" zeros past the end and drops writes there), or mask it: {op}")
    raise E.IndexOutOfBoundsError(
        f"ml.ds({start}, {size}) is out of bounds for dimension {d} of {name} (size {n})", cx.loc, hint=hint)


def transpose(cx, ref, name=""):
  """`buf.T`: a transposed view of a 2-D SMEM window, for ml.dot operands. No data moves:
  the tensor cores read the operand transposed (`ml.dot(q_s, k_s.T)`)."""
  if not is_ref(ref):
    raise E.KernelTypeError(
        f".T of {kind_of(ref)}: only SMEM buffers (and views of them) have a transposed view", cx.loc,
        hint="transpose the operand in SMEM: ml.dot(q_s, k_s.T); a register tensor's x.T is"
             " ml.transpose(x)")
  t = ref.type
  if t.space != Space.SMEM or t.remote:
    where = "another CTA's SMEM" if t.remote else f"{t.space} refs"
    x = ref.name or "x"
    known = isinstance(resolve(t.dtype), DType) and all(isinstance(n, int) for n in t.shape)
    alloc = f"buf = ml.smem({tuple(t.shape)}, jnp.{dtype_name(t.dtype)})" if known else "buf = ml.smem(shape, dtype)"
    alloc += f"; buf[...] = {x}[...]" if t.remote else f"; ml.copy({x}, buf)"    # no TMA from a peer's SMEM
    raise E.KernelTypeError(
        f"{ref.name or 'this ref'}.T: only this CTA's SMEM buffers have a transposed view, not {where}", cx.loc,
        hint=f"copy it into this CTA's SMEM ({alloc}) and use buf.T: ml.dot(a_s, buf.T) reads it transposed"
             f" and moves no data, buf.T[...] reads it into registers; {x}[...].T also transposes in registers"
             " (but ml.dot's b comes from SMEM only)")
  if len(t.shape) != 2:
    raise E.KernelTypeError(
        f"{ref.name or 'this ref'}.T: .T transposes 2-D windows, got shape {t.shape}", cx.loc,
        hint="index the leading dimensions away first: buf.at[stage].T")
  d = cx.b.defining(ref)
  parent, index = (d.ref, d.index) if isinstance(d, View) else (ref, tuple(ir.Idx(0, n) for n in t.shape))
  flip = not (isinstance(d, View) and d.transpose)
  nt = RefType(t.shape[::-1], t.dtype, t.space, transposed=flip)
  return cx.b.emit(View, parent, index, loc=cx.loc, types=[nt], names=[name], transpose=flip).result


def check_not_transposed(cx, ref, what):
  """Transposed views exist for the tensor cores only; memory ops move windows as stored."""
  if is_ref(ref) and ref.type.transposed:
    raise E.KernelTypeError(
        f"cannot {what} {ref.name or 'a transposed view'}: TMA copies move windows as they are stored;"
        f" a transposed view (.T) is an ml.dot operand, or read and written from registers", cx.loc,
        hint="copy the buffer itself, and transpose in registers: buf.T[...] (or ml.transpose(buf[...]))"
             " reads it transposed, buf.T[...] = x writes x transposed" + (_dot_view_hint(ref) if "into" in what else ""))


def _dot_view_hint(ref) -> str:
  """For a tile the tensor cores read transposed: the copy as stored, the view at ml.dot."""
  base = (ref.name or "").removesuffix(".T")
  if not base.isidentifier():
    return ""
  return f"; for the tensor cores, copy into {base} as stored and pass {base}.T to ml.dot (no data moves)"


def untransposed(cx, ref):
  """The window a transposed view `buf.T` shows, as stored."""
  d = cx.b.defining(ref)
  t = ref.type
  if not isinstance(cx.b.defining(d.ref), View) and tuple(d.ref.type.shape) == tuple(t.shape[::-1]) and all(
      not i.squeeze and isinstance(i.start, int) and i.start == 0 for i in d.index):
    return d.ref                    # the whole buffer (a pipelined stage is read whole, not through a view)
  return cx.b.emit(View, d.ref, d.index, loc=cx.loc, types=[RefType(t.shape[::-1], t.dtype, t.space)],
                   names=[ref.name], transpose=False).result


@builtin
def cluster_ref(cx, buf, cta, axis=0):
  """The SMEM buffer `buf` of CTA `cta` (along cluster `axis`) in this CTA's cluster.

  Synchronise with `ml.cluster_sync()` before reading what the peer wrote.
  """
  if not is_ref(buf) or buf.type.space != Space.SMEM or buf.type.remote:
    what = f"{buf.name or 'it'} ({buf.type.space})" if is_ref(buf) else kind_of(buf)
    if is_value(buf) and isinstance(buf.type, TensorType):
      name = buf.name if (buf.name or "").isidentifier() else "v"
      hint = (f"only SMEM is shared within a cluster: store the tensor first, buf = ml.smem({buf.type.shape},"
              f" jnp.{dtype_name(buf.type.dtype)}); buf[...] = {name}; ml.cluster_sync(); then"
              f" ml.cluster_ref(buf, cta)[...]")
    else:
      hint = "only SMEM is shared within a cluster; copy GMEM data into an ml.smem buffer first"
    raise E.ClusterRefError(f"ml.cluster_ref needs an SMEM buffer of this CTA, got {what}", cx.loc, hint=hint)
  if not isinstance(axis, int) or not 0 <= axis <= 2:
    raise E.KernelTypeError(f"cluster axis must be 0, 1 or 2, got {shown(axis)}", cx.loc,
                            hint="ml.cluster_ref(buf, cta, axis=0)")
  cluster = cx.b.cluster
  if cluster[axis] == 1:
    raise E.ClusterRefError(
        f"ml.cluster_ref along axis {axis}, but the kernel's cluster is {cluster}", cx.loc,
        hint=f"launch with @mgpu_kernel(..., cluster={(1,) * axis + (2,)}) or larger along that axis,"
             f" and put ml.cluster_sync() between the peers' writes of {buf.name or 'the buffer'} and"
             f" these reads, and again after the last read (a CTA must not exit while a peer reads its SMEM)")
  if isinstance(cta, int) and not 0 <= cta < cluster[axis]:
    raise E.IndexOutOfBoundsError(
        f"CTA {cta} is outside the cluster's {cluster[axis]} CTAs along axis {axis}", cx.loc,
        hint=f"CTAs of the cluster are numbered 0 to {cluster[axis] - 1} along axis {axis}")
  cta = index_operand(cx, cta)
  t = RefType(buf.type.shape, buf.type.dtype, Space.SMEM, remote=True)
  return cx.b.emit(ClusterRef, buf, cta, axis, loc=cx.loc, types=[t], names=[cx.text]).result




def _grid_size(cx, v):
  """A window's size computed from the grid's static extents (`x.shape[0] // ml.num_programs(0)`, Pallas's and
  Triton's block of a fixed grid, ml.cdiv of it too; probe 54d) as a Python int: ops/access.static_tensor with
  ml.num_programs; None where it depends on anything else (its MG003 stands)."""
  grid = getattr(cx.b, "static_grid", None)
  if grid is None:
    return None
  from .access import static_tensor
  got = static_tensor(cx, v, grid=grid)
  return int(got) if got is not None and got.shape == () and got.dtype.kind in "iu" else None
