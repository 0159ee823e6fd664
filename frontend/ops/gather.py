"""Gathers: a GMEM ref indexed by register tensors of indices (NumPy's advanced indexing).

    rows = ids.at[ml.ds(i * 64, 64)][...]          # (64,) int32, read from memory
    out.at[ml.ds(i * 64, 64), :][...] = table[rows, :]    # (64, d): row rows[r] of table

Every index is an integer tensor, a scalar or a Python int, and they broadcast together as in
NumPy; slices (`:`, `a:b`, `ml.ds`) add the axes they span, after the indices' axes when the
indices are adjacent and before a slice, else in NumPy's order. Each thread loads its own
elements (a vector load for consecutive elements of a row, else one load an element). Indices
follow jnp's gather: a negative index counts from the end of the view indexed, and indices past
it clamp to its last element, so no read leaves the view (a few integer ops an index, on the
index vector before it is broadcast). Indices are int32 or uint32 (narrower ones widen).
"""
from __future__ import annotations

import dataclasses
import math

from .. import errors as E
from .. import hw
from .. import ir
from ..dtypes import DType
from ..ir import Access, LayoutRule, Traits
from ..types import Space, TensorType, dtype_name, resolve
from . import elementwise as ew
from .elementwise_checks import method_on
from .elementwise_fns import arange
from .atomic import COMBINE_KINDS, AtomicKind, AtomicUpdate, check_dtype, check_target, identity
from .base import Num, is_scalar, is_tensor, is_value, kind_of, one_element, shown
from .index_operands import index_operand
from .memory import DSlice, View, empty_dim_hint
from .shape import broadcast_shape, broadcast_to_shape
from .tile_gathers import tile_gather, tile_scatter


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_READ)], layout=LayoutRule.ELEMENTWISE,
              moves_elements=True))   # each thread reads the elements its indices name
class Gather(ir.Op):
  """result[e] = ref[indices[0][e], indices[1][e], ...] for every element e of the result:
  `indices` holds one entry per dimension of the root ref `ref`, each an int32 tensor of the
  result's shape, an integer scalar or a Python int."""
  ref: ir.Value
  indices: tuple
  loc: object
  results: tuple
  # The last index is a slice's span along the result's last axis, 16-byte aligned in start and
  # size, in rows of a multiple of 16 bytes: a register's consecutive elements are one vector load.
  contiguous: bool = False
  # The window over `ref` of the view indexed (`t.at[ml.ds(s, 64)][ids]`), if any: the indices are
  # clamped to it, so it must lie inside `ref` (frontend/checks.py proves it where it can).
  view: tuple = ()
  # A masked load of it (`t.at[ids].load(mask=m, other=0)`): lanes whose indices leave the view may be meant
  # (frontend/gather_bounds.py checks unmasked gathers only).
  masked: bool = False


def _in_range(cx, i, n):
  """jnp's gather semantics for an index of a dimension of size n: a negative index counts from
  the end, then indices clamp into [0, n). No index reads outside the view."""
  if resolve(i.type.dtype).is_signed:
    # i + (n where i < 0): an index near 2**31 - 1 plus n would wrap (harmless, not selected, but
    # frontend/overflow.py would see an index arithmetic past int32)
    i = ew.binary(cx, ew.BinOp.ADD, i, ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, i, 0), n, 0))
    i = ew.binary(cx, ew.BinOp.MAX, i, 0)
  return ew.binary(cx, ew.BinOp.MIN, i, n - 1)


def _inside(cx, i, n):
  """A bool of i's shape: the index (negative ones counting from the end) falls in [0, n)."""
  if resolve(i.type.dtype).is_signed:
    return ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.GE, i, -n), ew.compare(cx, ew.CmpOp.LT, i, n))
  return ew.compare(cx, ew.CmpOp.LT, i, n)


def has_tensor_index(index) -> bool:
  items = index if isinstance(index, tuple) else (index,)
  return any(is_tensor(i) for i in items)


def _advanced(i) -> bool:
  return is_value(i) or (isinstance(i, int) and not isinstance(i, bool))


class IndexedRef:
  """`ref.at[ids, :]`: a ref indexed by tensors of indices (not a ref: no data moves). It is read
  (`[...]`, a gather) or updated atomically (`ml.atomic_add(out.at[ids, :], v)`, a scatter)."""
  KIND = "a ref indexed by tensors (ref.at[ids, ...])"

  def __init__(self, ref, index):
    self.ref, self.index = ref, index

  # (frontend/carried.py: a loop carries a pointer block, `a_ptrs += BLOCK_K` (frontend/pointer_steps.py), as its
  # indices; the ref and the index's form are static)
  def carry_leaves(self) -> tuple:
    return tuple(i for i in self._items() if _advanced(i))

  def with_leaves(self, leaves) -> "IndexedRef":
    it = iter(leaves)
    items = tuple(next(it) if _advanced(i) else i for i in self._items())
    return IndexedRef(self.ref, items if isinstance(self.index, tuple) else items[0])

  def static_key(self) -> tuple:
    return ("IndexedRef", self.ref.id, tuple("leaf" if _advanced(i) else repr(i) for i in self._items()))

  def _items(self) -> tuple:
    return self.index if isinstance(self.index, tuple) else (self.index,)


@dataclasses.dataclass
class _Plan:
  root: ir.Value
  per_dim: list             # one index operand per root dimension (int, scalar Value or int tensor)
  out_shape: tuple
  contiguous: bool
  inside: ir.Value | None   # scatters: a bool tensor, the elements whose indices were in range
  view: tuple              # the window over root of the view indexed, or ()
  keep: int = 0             # a widened gather's columns to keep (0: all of them)
  columns: bool = False     # widened by padding its index vector (t[:, cols]), not a slice (t[ids, :])


def gather(cx, ref, index, name="", masked=False, keep=None):
  """`ref[index]` where some index is a register tensor (`masked`: read by a masked load, `keep` its mask where
  it is a tensor of the indices' shape)."""
  from . import padded_tiles
  from .padded_gathers import grid_points, padded_points, padded_rows
  if (out := _smem_gather(cx, ref, index, name, keep)) is not None:
    return out
  if (out := tile_gather(cx, ref, index, gather)) is not None:     # y[p, :] of a (t, k) index tile: (t, k, d)
    return out
  if (points := padded_points(cx, index)) is not None:     # tab[idx, h] of a padded tile of indices
    with padded_tiles.allowed(cx):
      out = _gather(cx, ref, index, name, masked)
    cx.b.pad_tiles[out.id] = points
    return out
  if (grid := grid_points(cx, index)) is not None:        # q[h[:, None], 2 * d[None, :]] of a few heads (probe 59b)
    with padded_tiles.allowed(cx):
      out = _gather(cx, ref, grid[0], name, masked)
    cx.b.pad_tiles[out.id] = grid[1]
    return out
  own = padded_rows(cx, index)
  if own is not None:     # x[o] of an index vector computed padded (an argsort of 100 ids): the gather clamps the
    with padded_tiles.allowed(cx):           # padding lanes' indices into the view too; the result is padded as o
      out = _gather(cx, ref, index, name, masked)
    cx.b.pad_tiles[out.id] = (own,) + tuple(out.type.shape[1:])
    return out
  return _gather(cx, ref, index, name, masked)


def _smem_gather(cx, ref, index, name, keep=None):
  """`buf[ids]` of an SMEM buffer (a bitonic stage's partner `s[i ^ j]`, an FFT's bit reversal, a table a CTA staged;
  probe 69b, MG003 before): the gather from its whole read, through the register gather's flat scratch
  (ops/register_gather.py: jnp's indices, clamped), so the sync pass orders it after the buffer's writes as any
  read; None where the ref is not SMEM or the register gather does not take the index's form (MG003 then)."""
  if ref.type.space != Space.SMEM or ref.type.remote:
    return None
  from .register_gather import register_gather
  from .transfers import load
  got = _from_buffer(cx, ref, index, name, keep)
  if got is not None:
    return got
  whole = load(cx, ref)
  if len(ref.type.shape) >= 2:
    cx.b.gathered_reads.add(whole.id)     # (what MG601 says where it reads cells not written yet: probe 72a)
  return register_gather(cx, whole, index, name)


def _from_buffer(cx, ref, index, name, keep=None):
  """`buf[ids]` of a whole 1-D SMEM buffer (x cached in SMEM for a SpMV's `xs[c]`, a bitonic partner) at a tensor of
  indices registers hold: each element loaded straight from the buffer (the register gather's ScratchGather, with
  the buffer as its scratch: no whole read, no copy), jnp's indices clamped; None for other forms."""
  from .memory import View
  from .register_gather import ScratchGather, _clamped
  ids = index[0] if isinstance(index, tuple) and len(index) == 1 else index
  t, d = ref.type, resolve(ref.type.dtype)
  if len(t.shape) != 1 or t.transposed or isinstance(cx.b.defining(ref), View) or not is_tensor(ids):
    return None
  n, shape, pads = math.prod(ids.type.shape), tuple(ids.type.shape), getattr(cx.b, "pad_tiles", None)
  if not isinstance(d, DType) or d == DType.bool_ or d.bits > 32 or not isinstance(resolve(ids.type.dtype), DType) \
      or not resolve(ids.type.dtype).is_int or not (n % hw.WARPGROUP == 0 or len(shape) == 1 and n % 8 == 0) \
      or (pads is not None and ids.id in pads):
    return None
  pos = _clamped(cx, ids, t.shape[0])
  keep = keep if is_tensor(keep) and tuple(keep.type.shape) == shape else None
  return cx.b.emit(ScratchGather, ref, pos, loc=cx.loc, types=[TensorType(shape, t.dtype)],
                   names=[name or cx.name], used=keep).result


def _gather(cx, ref, index, name="", masked=False):
  p = _plan(cx, ref, index, "gather")
  out = cx.b.emit(Gather, p.root, tuple(p.per_dim), loc=cx.loc, types=[TensorType(p.out_shape, ref.type.dtype)],
                  names=[name if not p.keep else ""], contiguous=p.contiguous, view=p.view,
                  masked=masked).result
  if p.keep:             # rows read wider than asked (each row's index spread over a warp's lanes): the
    from .shape import index_through_smem     # columns asked for, through an SMEM scratch
    saved, cx.name = cx.name, name
    try:
      out = index_through_smem(cx, out, (slice(None), slice(0, p.keep)))
    finally:
      cx.name = saved
    if not p.columns:    # (its hint widens a row gather's slice)
      cx.b.narrow_gathers[out.id] = (ref.name or "t", p.keep, p.out_shape[1])
  return out


def _plan(cx, ref, index, what, smem=False):
  """The index operands of `ref[index]` over the root ref. A gather clamps indices into the view
  (jnp's gather); a scatter (`what == "scatter"`) also returns which elements' indices were
  inside, since jnp's scatter drops updates at indices outside. `smem`: a scatter, which also updates an SMEM
  buffer (a CTA's histogram, `red.shared::cta`; probe 46k; of two axes or more since probe 47d, where the layout
  pass leaves the buffer untiled: atomic.check_atomic_layouts; a plain one, `s[perm] = v`, since probe 69b)."""
  t = ref.type
  if (t.space != Space.GMEM and not (smem and t.space == Space.SMEM)) or t.remote or t.transposed:
    name = ref.name or "this ref"
    raise E.KernelTypeError(
        f"{name} is indexed with a tensor of indices (a {what}): only GMEM refs and the CTA's own SMEM buffers"
        f" (not a peer's, not transposed) {what}",
        cx.loc, hint=(f"read it into registers and gather from them, v = {name}[...]; v[ids] (a transposed view's"
                      f" read is transposed too), or gather from the kernel's GMEM parameter itself (table[ids, :])"
                      if what == "gather" else
                      "scatter into a GMEM output: ml.atomic_add(out.at[ids], values) (an output updated only"
                      " by atomics starts at 0; a histogram is ml.atomic_add(counts.at[ids], 1)), or into the"
                      " CTA's own SMEM buffer: buf[ids] = values, ml.atomic_add(h.at[ids], 1)"))
  items = index if isinstance(index, tuple) else (index,)
  if sum(1 for i in items if i is Ellipsis) > 1:
    raise E.KernelTypeError("an index can hold at most one '...'", cx.loc, hint="table[ids, ...]")
  if Ellipsis in items:
    k = items.index(Ellipsis)
    items = items[:k] + (slice(None),) * (len(t.shape) - len(items) + 1) + items[k + 1:]
  if None in [i for i in items if not is_value(i)]:    # (None beside indices next to each other: subscripts.none_axes)
    d = next(d for d, i in enumerate(items) if i is None and not is_value(i))
    raise E.KernelTypeError(
        f"cannot index {ref.name or 'a ref'} with None (dimension {d}) between its tensors of indices and ints",
        cx.loc, hint="gather without the None and insert the size-1 axis in the result (r[:, None] or"
                     " ml.expand_dims(r, axis)): a None between them moves their axes first in NumPy")
  if len(items) > len(t.shape):
    raise E.IndexOutOfBoundsError(f"too many indices for {ref.name or 'ref'} of rank {len(t.shape)}:"
                                  f" got {len(items)}", cx.loc, hint=f"it has shape {t.shape}")
  items = items + (slice(None),) * (len(t.shape) - len(items))

  # Each dimension: an advanced index (tensor, scalar, int) or the aranged span of a slice.
  adv, spans = [], {}
  for d, (i, n) in enumerate(zip(items, t.shape)):
    if is_tensor(i):
      dt = resolve(i.type.dtype)
      if dt == DType.bool_:
        raise E.KernelTypeError(
            f"{ref.name or 'the ref'} is indexed with a bool tensor: selecting by a mask gives a shape that"
            f" depends on the data, which a kernel's tensors cannot have", cx.loc,
            hint="keep the shape and select: ml.where(mask, x, 0), or read and write with a mask:"
                 " ref.at[...].load(mask=m, other=0), ref.at[...].store(v, mask=m)")
      if not (isinstance(dt, DType) and dt.is_int):
        name = i.name if (i.name or "").isidentifier() else None
        raise E.KernelTypeError(
            f"a {what}'s indices are integers, got {i.name or kind_of(i)} ({dtype_name(dt)}) for dimension"
            f" {d} of {ref.name or 'the ref'}",
            cx.loc, hint=f"convert them: {name or 'ids'}.astype(jnp.int32)")
      adv.append(d)
    elif isinstance(i, bool) or i is None:
      raise E.KernelTypeError(f"cannot index a ref with {i!r} (dimension {d})", cx.loc,
                              hint="index with integer tensors, ints, slices or ml.ds(start, size)")
    elif _advanced(i):
      if isinstance(i, int) and not -n <= i < n:
        raise E.IndexOutOfBoundsError(f"index {i} is out of bounds for dimension {d} of"
                                      f" {ref.name or 'the ref'} (size {n})", cx.loc,
                                      hint=f"it has size {n}" if n else empty_dim_hint(ref.name or "the ref", d))
      adv.append(d)
    elif isinstance(i, slice):
      if i.step not in (None, 1) or not all(x is None or isinstance(x, int) for x in (i.start, i.stop)):
        raise E.KernelTypeError("a gather's slices are static with a step of 1", cx.loc,
                                hint="use ml.ds(start, size) for a run-time start")
      start, stop, _ = slice(i.start, i.stop).indices(n)
      if stop <= start:
        raise E.IndexOutOfBoundsError(f"slice {i.start}:{i.stop} of dimension {d} is empty", cx.loc,
                                      hint=f"dimension {d} has size {n}" if n else empty_dim_hint(ref.name or "the ref", d))
      spans[d] = (start, stop - start)
    elif isinstance(i, DSlice):
      if not isinstance(i.size, int) or i.size <= 0 or i.size > n:
        raise E.KernelTypeError(f"ml.ds size must be a positive static int up to {n}, got {shown(i.size)}",
                                cx.loc, hint="the size of a window is fixed when the kernel is compiled")
      spans[d] = (index_operand(cx, i.start), i.size)
    else:
      raise E.KernelTypeError(f"cannot index with {kind_of(i)}", cx.loc,
                              hint="index with integer tensors, ints, slices or ml.ds(start, size)")

  tensors = [items[d] for d in adv if is_tensor(items[d])]
  b = broadcast_shape(cx, [x.type.shape for x in tensors], "a gather's indices",
                      [x.name or "an index" for x in tensors])
  adjacent = adv == list(range(adv[0], adv[0] + len(adv))) if adv else True
  where = adv[0] if adjacent and adv else 0     # NumPy: adjacent indices' axes stay in place
  slice_dims = [d for d in range(len(t.shape)) if d in spans]
  before = [d for d in slice_dims if adjacent and d < where]
  after = [d for d in slice_dims if d not in before]
  out_shape = tuple(spans[d][1] for d in before) + b + tuple(spans[d][1] for d in after)
  if not out_shape:
    raise E.KernelTypeError("this index reads one element: a gather reads a tensor of them", cx.loc,
                            hint="read a single element with ref[i, j]")
  if len([n for n in out_shape if n != 1]) > 2:      # its index grids would broadcast into 3-D
    lead = next(d for d in range(len(t.shape)) if d in spans or d in adv)
    n = spans[lead][1] if lead in spans else None
    grid = [x for x in tensors if len(x.type.shape) == 2]     # ids of shape (64, 2): a top-2's experts
    if n is None and len(grid) == 1 and len(tensors) == 1:
      nm = grid[0].name if grid[0].name and "\n" not in grid[0].name else "ids"
      nm = nm if nm.replace("[...]", "").isidentifier() else f"({nm})"
      cols = grid[0].type.shape[1]
      raise E.LayoutError(
          f"this {what} gives a {len(out_shape)}-D result {out_shape}: a {what} (its index grids broadcast"
          f" together) gives 1-D and 2-D tensors", cx.loc,
          hint=f"take the {cols} columns of the index tile {nm} one at a time, a 2-D {what} a trip: for k in"
               f" ml.static_range({cols}): index with {nm}[:, k] (a vector of {grid[0].type.shape[0]} indices) in"
               f" place of {nm}" + (", with the values for that column" if what == "scatter" else ""))
    raise E.LayoutError(
        f"this {what} gives a {len(out_shape)}-D result {out_shape}: a {what} (its index grids broadcast"
        f" together) gives 1-D and 2-D tensors", cx.loc,
        hint=(f"take dimension {lead} in an ml.static_range loop, a 2-D {what} a trip: for c in"
              f" ml.static_range({n}): index dimension {lead} with c (a slice becomes that int)" if n else
              f"index one dimension with an int in an ml.static_range loop, a 2-D {what} a trip"))
  axis_of = {d: k for k, d in enumerate(before)}
  axis_of.update({d: len(before) + len(b) + k for k, d in enumerate(after)})
  keep, last = 0, len(t.shape) - 1
  if what == "gather" and not before and len(b) == 1 and after == [last] and len(out_shape) == 2 and (
      _narrow(out_shape)) and math.prod(out_shape) % hw.WARPGROUP == 0:      # (a result registers hold)
    # `cos[pos, :]` of rows 40 wide (RoPE's half of a head of 80): each row's index is spread over the
    # 32 lanes of a warp, so the rows are read 32 (or 128) wide, their columns past the asked ones
    # clamped into the view, and the asked columns taken after (gather() above)
    keep = out_shape[1]
    wide = _wide(out_shape)
    spans[last] = (spans[last][0], wide)
    out_shape = (out_shape[0], wide)
  tensor_dims = [d for d in adv if is_tensor(items[d])]
  columns = (what == "gather" and not keep and len(before) == 1 and not after and len(b) == 1
             and len(tensor_dims) == 1 and len(out_shape) == 2 and out_shape[1] % 8 == 0
             and _spread_width(out_shape) != out_shape[1] and math.prod(out_shape) % hw.WARPGROUP == 0)
  if columns:
    # `t[:, cols]` (a column gather) of columns no row layout holds (fewer than a warp's 32, or rows
    # not a multiple of 4 or 2 with 32s or 64s): the index vector padded with index 0 to the narrowest
    # width one holds, the asked columns kept after (gather())
    keep = out_shape[1]
    out_shape = (out_shape[0], _spread_width(out_shape))

  view = cx.b.defining(ref)
  root, root_index = (view.ref, view.index) if isinstance(view, View) else (ref, None)
  per_dim, inside = [], None
  for d, i in enumerate(items):
    if d in spans:
      start, size = spans[d]
      if keep and d == last:       # the widened columns clamp to the view's last
        x = arange.rule(cx, size)
        x = ew.binary(cx, ew.BinOp.ADD, x, start) if not (isinstance(start, int) and start == 0) else x
        per_dim.append(broadcast_to_shape(cx, ew.binary(cx, ew.BinOp.MIN, x, t.shape[d] - 1), out_shape,
                                          (axis_of[d],)))
        continue
      x = broadcast_to_shape(cx, arange.rule(cx, size), out_shape, (axis_of[d],))
      per_dim.append(ew.binary(cx, ew.BinOp.ADD, x, start) if not (isinstance(start, int) and start == 0) else x)
    elif is_tensor(i):
      if resolve(i.type.dtype) == DType.i64:     # jax_enable_x64's default ints (jnp.array([3, 1]), argsort):
        # saturated into int32, not wrapped (2**32 + 5 would be 5): every dimension is below 2**31, so an id past
        # int32's range lies outside it either way, and _in_range / _inside treat it as jnp's gather does
        i = ew.binary(cx, ew.BinOp.MIN, ew.binary(cx, ew.BinOp.MAX, i, -2 ** 31), 2 ** 31 - 1)
        i = ew.astype(cx, i, DType.i32)
      if resolve(i.type.dtype) not in (DType.i32, DType.u32):
        i = ew.astype(cx, i, DType.u32 if not resolve(i.type.dtype).is_signed else DType.i32)
      if columns:                               # padded with index 0 (always inside the view)
        from .shape import concatenate
        pad = ew.full_(cx, (out_shape[1] - i.type.shape[0],), 0, resolve(i.type.dtype), "ml.zeros")
        i = concatenate.rule(cx, [i, pad], 0)
      dims = tuple(len(before) + len(b) - len(i.type.shape) + k for k in range(len(i.type.shape)))
      if what == "scatter":
        ok = _inside(cx, i, t.shape[d])
        ok = broadcast_to_shape(cx, ok, out_shape, dims)
        inside = ok if inside is None else ew.binary(cx, ew.BinOp.AND, inside, ok)
      i = _in_range(cx, i, t.shape[d])        # on the index vector, before it is broadcast
      per_dim.append(broadcast_to_shape(cx, i, out_shape, dims))
    elif isinstance(i, int):
      per_dim.append(i % t.shape[d])
    else:
      i = index_operand(cx, i)
      if what == "scatter":
        ok = _inside(cx, i, t.shape[d])         # a scalar: it broadcasts in the AND below
        inside = ok if inside is None else ew.binary(cx, ew.BinOp.AND, inside, ok)
      per_dim.append(_in_range(cx, i, t.shape[d]))
  if root_index is not None:                 # a window: its starts added, its squeezed axes put back
    it = iter(per_dim)
    full = []
    for p in root_index:
      if p.squeeze:
        full.append(p.start)
        continue
      x = next(it)
      if isinstance(p.start, int) and p.start == 0:
        full.append(x)
      elif isinstance(x, int) and isinstance(p.start, int):
        full.append(x + p.start)
      else:
        full.append(ew.binary(cx, ew.BinOp.ADD, x, p.start))
    per_dim = full
  per_dim = [x if isinstance(x, int) or not is_value(x) or isinstance(x.type, TensorType)
             or resolve(x.type.dtype) in (DType.i32, DType.u32) else ew.astype(cx, x, DType.i32) for x in per_dim]
  if not any(is_tensor(x) for x in per_dim):
    raise E.KernelTypeError("a gather needs a tensor of indices", cx.loc, hint="table[ids, :]")
  nbytes = resolve(t.dtype).bits // 8 if isinstance(resolve(t.dtype), DType) else 0
  contiguous = (not keep and last in spans and axis_of[last] == len(out_shape) - 1 and nbytes
                and (_start_multiple(cx, spans, root_index, last) * nbytes) % 16 == 0
                and (root.type.shape[-1] * nbytes) % 16 == 0 and (out_shape[-1] * nbytes) % 16 == 0)
  return _Plan(root, per_dim, out_shape, bool(contiguous), inside, tuple(root_index or ()), keep, columns)


def _narrow(shape) -> bool:
  """A 2-D gather result whose rows' lanes cannot hold it: columns not a multiple of a warp's 32,
  or rows not a multiple of 4 with columns not a multiple of 128."""
  return bool(shape[1] % hw.WARP or shape[0] % hw.WARPS_PER_WARPGROUP and shape[1] % hw.WARPGROUP)


def _spread_width(shape) -> int:
  """The fewest columns, at least shape[1], that a layout spreading each row over a warp's lanes
  holds for shape[0] rows: a multiple of 32 * k where k warps share a row (k = 1, 2, 4 for rows a
  multiple of 4, 2, 1); shape[1] itself where one does."""
  r, c = shape
  return min(-(-c // (hw.WARP * k)) * hw.WARP * k for k in (1, 2, 4) if r % (hw.WARPS_PER_WARPGROUP // k) == 0)


def _wide(shape) -> int:
  """The columns such a result is read at: 32s, or 128s where its rows are not a multiple of 4."""
  unit = hw.WARP if shape[0] % hw.WARPS_PER_WARPGROUP == 0 else hw.WARPGROUP
  return -(-shape[1] // unit) * unit


def _start_multiple(cx, spans, root_index, last) -> int:
  """A number the root start of the last dimension's span is always a multiple of (0: always 0;
  1: nothing known): the span's start plus the view's, by frontend/absint.py's divisibility."""
  from ..absint import known_multiple
  starts = [spans[last][0]]
  if root_index is not None:
    p = root_index[-1]
    if p.squeeze:
      return 1
    starts.append(p.start)
  m = 0
  for x in starts:
    m = math.gcd(m, known_multiple(x, cx.b.defs))
  return m


# ---------------------------------------------------------------- scatters (atomic)


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_WRITE)], layout=LayoutRule.ELEMENTWISE,
              moves_elements=True))   # each thread writes the elements its indices name
class ScatterUpdate(AtomicUpdate):
  """`ml.atomic_<kind>(ref.at[indices], value)`: each element of `value` combined atomically into
  the root ref `ref` at its own indices (one operand per root dimension, as Gather's); the
  passes treat it as the atomic update it is. Elements whose indices fell outside carry the
  operation's identity (jnp's scatter drops them). A plain scatter (kind SET, `out[ids, :] = v`)
  stores instead, only the elements `mask` keeps (indices inside, and a store's own mask)."""
  indices: tuple = ()
  contiguous: bool = False     # as Gather's: a row's consecutive elements, one vector `red` a register
  view: tuple = ()             # as Gather's: the window of the view indexed, which must lie inside `ref`
  mask: ir.Value | None = None  # SET: a bool tensor of the value's shape, the elements stored


def scatter(cx, kind: AtomicKind, iref: IndexedRef, value, mask=None, what=None, cmp=None):
  """`ml.atomic_<kind>(ref.at[indices], value)`, or with kind SET the plain scatter `ref[indices] = value`
  (`ref.at[indices].store(value, mask=m)`): jnp's `.at[indices].add/max/min/set`, dropping indices outside."""
  from ..infer import unify
  what, ref = what or f"ml.atomic_{kind.value}", iref.ref
  if (got := tile_scatter(cx, kind, iref, value, mask, what, cmp, scatter)) is not None:
    return got[0]            # out[p, :] = v of a (t, k) index tile and (t, k, d) values
  from .padded_gathers import grid_scatter, padded_points, padded_rows, padded_scatter, scatter_at_points
  if (points := padded_points(cx, iref.index)) is not None:     # tab.at[idx, h] of a padded tile of indices
    return scatter_at_points(cx, kind, iref, value, mask, what, points)
  if (own := padded_rows(cx, iref.index)) is not None:
    return padded_scatter(cx, kind, iref, value, mask, what, own)
  if (got := grid_scatter(cx, kind, iref, value, mask, what)) is not None:
    return got[0]            # a padded value at index grids of few heads (probe 59b)
  check_target(cx, cx.b, ref, what)
  p = _plan(cx, ref, iref.index, "scatter", smem=True)
  if math.prod(p.out_shape) == 1:        # ml.arange(1) positions: one element has no register layout
    raise E.KernelTypeError(
        f"{what} through one index ({ref.name or 'the ref'} indexed to shape {p.out_shape}) updates a single"
        f" element: a scatter updates a tensor of them", cx.loc,
        hint=f"update the element with a scalar index and value: {what}({ref.name or 'out'}.at[i], s), under"
             f" `if 0 <= i < n:` where i may fall outside (s a scalar: ml.sum(x), or v[0] of a one-element v)")
  d = resolve(ref.type.dtype)
  if kind in COMBINE_KINDS:          # (a plain scatter stores any dtype; a cas's and an xchg's: atomic_fetch.py)
    from .elementwise_checks import _call_args
    written = _call_args(cx.text or "", 2)
    if ref.type.space == Space.SMEM:
      from .atomic import check_smem_scatter_dtype
      check_smem_scatter_dtype(cx, kind, d, ref, written, what)
    check_dtype(cx, kind, d, hw.ATOMIC_ELEMENT, what, "through a tensor of indices (one element at a time)",
                words=(*written, ref.name or None) if written else None)
  if isinstance(value, Num) or is_scalar(value):
    from .atomic import number_into
    value = number_into(cx, what, value, d, ref.name or "the ref")
    value = ew.full_(cx, p.out_shape, value, ref.type.dtype, what)
  elif not is_tensor(value) and kind == AtomicKind.SET:      # out[1::2] = src: a plain scatter's value (probe 46a)
    src = value.name if is_value(value) and (value.name or "").isidentifier() else "src"
    raise E.KernelTypeError(f"{what} stores a register value, got {kind_of(value)}", cx.loc,
                            hint=f"read the ref into registers first: ... = {src}[...]")
  elif not is_tensor(value):
    raise E.KernelTypeError(f"{what} adds a register value, got {kind_of(value)}", cx.loc,
                            hint=f"read refs first: {what}(out.at[ids, :], src[...])")
  elif value.type.shape != p.out_shape:
    if broadcast_shape(cx, [value.type.shape, p.out_shape], what,
                       [value.name or "the value", "the indexed elements"]) != p.out_shape:
      raise E.ShapeMismatchError(
          f"{what} of a tensor of shape {value.type.shape} into {ref.name or 'a ref'} indexed to shape"
          f" {p.out_shape}", cx.loc, hint="the value takes the shape the indices give (as ref[indices] has)")
    value = broadcast_to_shape(cx, value, p.out_shape)
  if unify(ref.type.dtype, value.type.dtype, cx.loc, what) is None:
    raise E.DtypeMismatchError(
        f"{what} of {value.name or 'a value'} ({dtype_name(value.type.dtype)}) into {ref.name or 'a ref'}"
        f" ({dtype_name(ref.type.dtype)}): dtypes differ", cx.loc,
        hint=f"convert explicitly: ({cx.named(value, 'value')}).astype(jnp.{dtype_name(ref.type.dtype)})")
  if cmp is not None:                # (a cas's expected values: of the value's shape and dtype)
    from .atomic_fetch import as_values
    cmp = as_values(cx, what, cmp, value, "cmp")
  keep = None
  if kind == AtomicKind.SET:
    keep = _stored_elements(cx, p.inside, mask, p.out_shape, what)
  elif (keep := _stored_elements(cx, p.inside, mask, p.out_shape, what)) is not None and kind in COMBINE_KINDS:
    value = ew.where_(cx, keep, value, identity(kind, d))   # (off, or outside: the identity, no change)
  # the old values of a scatter's elements (Triton's `old = tl.atomic_add(ptrs, 1)`, a CTA's ranks in its SMEM
  # histogram; probe 49c): its result, dropped with `keep` where nothing uses it (atomic_rmw.plan_fetch_scratch),
  # so that such a scatter is the `red`s it was; a cas's and an xchg's (ops/atomic_fetch.py) always have one
  fetch = kind != AtomicKind.SET and p.root.type.space in (Space.GMEM, Space.SMEM) and not p.root.type.remote
  o = cx.b.emit(ScatterUpdate, kind, p.root, value, loc=cx.loc, types=[TensorType(p.out_shape, d)] if fetch else [],
                names=[cx.name or ""] if fetch else [], indices=tuple(p.per_dim), contiguous=p.contiguous,
                view=p.view, mask=keep if fetch or kind == AtomicKind.SET else None, cmp=cmp)
  return o.result if fetch else None


def _stored_elements(cx, inside, mask, shape, what):
  """The elements a plain scatter stores, as a bool tensor of `shape`: those whose indices were inside
  (`inside`, a tensor or a scalar) and that the store's `mask` keeps; None when that is all of them."""
  from .shape import broadcast_shape
  if mask is not None:
    if not (is_value(mask) and resolve(mask.type.dtype) == DType.bool_) and not isinstance(mask, bool):
      raise E.KernelTypeError(f"{what}'s mask must be a boolean tensor, got {kind_of(mask)}", cx.loc,
                              hint="pass a comparison: mask=ids < n")
    if is_tensor(mask) and broadcast_shape(cx, [mask.type.shape, shape], what, ["the mask", "the indexed elements"]) != shape:
      raise E.ShapeMismatchError(f"{what}'s mask of shape {mask.type.shape} does not fit the indexed elements' shape"
                                 f" {shape}", cx.loc, hint=f"a mask of shape {shape}, or one that broadcasts to it"
                                 + (" (a mask of rows: m[:, None])" if len(shape) == 2 else ""))
  keep = inside
  if mask is not None and mask is not True:
    keep = mask if keep is None else ew.binary(cx, ew.BinOp.AND, keep, mask)
  if keep is None:
    return None
  if not is_tensor(keep) or keep.type.shape != shape:
    keep = ew.where_(cx, keep, ew.full_(cx, shape, True, DType.bool_), False)
  return keep


def _gather_load(cx, iref, mask=None, other=0):
  """`table.at[ids, :].load(mask=m, other=0)`: Triton's `tl.load(ptr + offs, mask=m, other=0)` at
  computed places, a gather with the masked-off elements `other`. The gather reads every element
  (its indices clamp into the view, so no read leaves it) and the mask selects after it: the same
  result, with the same memory traffic as `ml.where(m, table[ids, :], other)`."""
  from .shape import broadcast_shape
  v = gather(cx, iref.ref, iref.index, cx.name, masked=mask is not None and mask is not True,
             keep=mask if is_tensor(mask) and resolve(mask.type.dtype) == DType.bool_ else None)
  if mask is None:
    return v
  table = iref.ref.name or "the ref"
  if not (is_value(mask) and resolve(mask.type.dtype) == DType.bool_) and not isinstance(mask, bool):
    m = cx.named(mask, "m") if is_value(mask) else shown(mask)
    raise E.KernelTypeError(f"the gather's mask must be a boolean tensor, got {kind_of(mask)}", cx.loc,
                            hint=f"compare it: mask={method_on(m)} != 0" if is_value(mask) else
                            "pass a comparison: mask=ids != pad")
  shape = v.type.shape
  if is_tensor(mask) and broadcast_shape(cx, [mask.type.shape, shape], "the gather's load",
                                         ["the mask", "the gather"]) != shape:
    raise E.ShapeMismatchError(f"the gather's mask of shape {mask.type.shape} does not fit the gather's shape"
                               f" {shape}", cx.loc, hint=f"a mask of shape {shape}, or one that broadcasts to it"
                               + (" (a mask of rows: m[:, None])" if len(shape) == 2 else ""))
  d = resolve(v.type.dtype)
  from .access import whole_other
  if d.is_int:          # other=0.0 on uint8 data: 0 (probe 67a); a bool table's float other stays an error below
    other = whole_other(cx, other, d, table, "the gather's other")
  if is_value(other) and resolve(other.type.dtype) != d or isinstance(other, float) and not d.is_float:
    raise E.DtypeMismatchError(
        f"the gather's other ({cx.named(other) if is_value(other) else shown(other)}) is not {dtype_name(d)},"
        f" the dtype of {table}", cx.loc,
        hint=f"convert it: other={method_on(cx.named(other, 'o'))}.astype(jnp.{dtype_name(d)})" if is_value(other)
        else f"other={bool(other) and other == other} ({table} holds bool)" if d == DType.bool_
        else f"other={int(other) if other == other and abs(other) != float('inf') else 0} (an int: {table} holds"
             f" {dtype_name(d)})")
  if isinstance(mask, bool):          # a static mask: every element, or none (other)
    return v if mask else ew.full_(cx, shape, other, d)
  return ew.where_(cx, mask, v, other)


def scattered(cx, iref) -> bool:
  """Whether some index tensor of `iref` is not a run of consecutive positions (`off + ml.arange(n)`,
  Triton's x_ptr + offs), whose load is a window's (the hint says so) rather than a gather's."""
  from .index_hints import RUN_ONLY, _run_of, run_start
  items = iref.index if isinstance(iref.index, tuple) else (iref.index,)
  run = lambda i: (run_start(cx.b, i) is not None if one_element(i.type.shape) else  # (a one-element run at any
                   _run_of(cx.b, i) is not None or run_start(cx.b, i, RUN_ONLY) is not None)  # start: probe 52e)
  return any(is_tensor(i) and not run(i) for i in items)


def run_window(cx, iref, name=""):
  """The window `x.at[ml.ds(s, n), ...]` that `x.at[offs, ...]` covers where every index tensor is a run,
  `offs = s + ml.arange(n)` (Triton's `x_ptr + offs`; a grid `rows[:, None]`, `cols[None, :]`, or of more axes,
  in the ref's axis order), with the gather's shape and element order: what `ml.load(x.at[offs], mask=m,
  other=0)` and `ml.store(o.at[offs], v, mask=m)` move. None for any other index (a gather, a scatter)."""
  from .index_hints import run_start
  from .memory import view
  items = iref.index if isinstance(iref.index, tuple) else (iref.index,)
  tensors = [k for k, i in enumerate(items) if is_tensor(i)]
  advanced = [k for k, i in enumerate(items) if is_tensor(i) or is_scalar(i)
              or isinstance(i, int) and not isinstance(i, bool)]
  if not tensors or advanced != list(range(advanced[0], advanced[-1] + 1)):
    return None                    # (NumPy moves the dimensions of split advanced indices to the front)
  window = list(items)
  pads = getattr(cx.b, "pad_tiles", None) if not getattr(cx.b, "pad_ok", 0) else None
  for t, k in enumerate(tensors):
    shape = tuple(items[k].type.shape)
    run = run_start(cx.b, items[k], cx)
    own = pads.get(items[k].id) if pads is not None else None
    if own is not None and run is not None and run[1] == math.prod(shape) and sum(n != 1 for n in own) <= 1:
      shape, run = tuple(own), (run[0], math.prod(own))   # (a run of an odd ml.arange made padded: the window of its
                                                          # own length, which the padded load and store grow; 71a)
    if run is None or (shape != (run[1],) if len(tensors) == 1 else
                       len(shape) != len(tensors) or shape[t] != run[1] or math.prod(shape) != run[1]):
      return None
    window[k] = DSlice(run[0], run[1])
  return view(cx, iref.ref, tuple(window), name)


def _scatter_store(cx, iref, value, mask=None):
  """`out.at[ids, :].store(v, mask=m)`: Triton's `tl.store(ptr + offs, v, mask=m)` at computed places, a
  plain scatter of the elements the mask keeps."""
  if mask is False:
    return None
  return scatter(cx, AtomicKind.SET, iref, value, mask, what="the scatter")


def root_id(b, ref) -> int:
  from .memory import root
  return root(b, ref).id


def writable(b, ref) -> bool:
  """Whether the kernel may write `ref`'s memory: an output's, SMEM's, or an input's that input_output_aliases
  makes an output's (written through either parameter, as a window is: the scatters, pointer-block stores and
  atomics of vLLM's in-place rotary embedding and penalties, through the input as Triton writes its pointer)."""
  r = root_id(b, ref)
  return r not in b.read_only or r in getattr(b, "aliased", ())


def scatter_store():
  """The `.store` of a ref indexed by tensors (bound to it as a method)."""
  from .base import Builtin
  return Builtin(_scatter_store, "store")


def gather_load():
  """The `.load` of a ref indexed by tensors (bound to it as a method)."""
  from .base import Builtin
  return Builtin(_gather_load, "load")

