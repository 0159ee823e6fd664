"""Gathers from register tensors: `v[ids]`, `v[:, ids]`, `v[rows, cols]` and `ml.take_along_axis(v, ids, axis)` of a
tensor computed in registers (jnp's gather: negative indices count from the end, indices past either end are
clamped), where a gather from GMEM (frontend/ops/gather.py) has no ref to read.

The tensor goes through a flat SMEM scratch of its size (RelayoutStore: every thread stores its elements at their
row-major positions), a barrier (the sync pass's), and every thread loads the element at the position that the
indices name, computed in registers at the result's shape (ScratchGather, elementwise with those positions).
"""
from __future__ import annotations

import math

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..ir import LayoutRule, Traits
from ..types import TensorType, resolve
from . import elementwise as ew
from .base import is_scalar, is_tensor
from .out_names import stored_into


def _effects(o):
  return [(o.scratch, ir.Access.REG_READ)]


@ir.op(Traits(effects=_effects, layout=LayoutRule.ELEMENTWISE, moves_elements=True))
class ScratchGather(ir.Op):
  """Element `i` of the result is element `pos[i]` of the flat `scratch` (`pos` an int32 tensor of the result's
  shape, every position inside the scratch). `used`: a masked load's mask (a bool tensor of the result's shape),
  the elements it uses, which interpret mode checks were written (its other lanes read clamped positions it
  drops: a wavefront's cells not computed yet, probe 72a); None: every element is used."""
  scratch: ir.Value
  pos: ir.Value
  loc: object
  results: tuple
  used: object = None


def _int_tensor(i) -> bool:
  return is_tensor(i) and isinstance(d := resolve(i.type.dtype), DType) and d.is_int


def _static_int(i) -> bool:
  return isinstance(i, int) and not isinstance(i, bool)


def _int_scalar(i) -> bool:
  """A run-time integer scalar (a program id, a loop index: `tab[ids, h]` of a head's bias column, probe 56g)."""
  return is_scalar(i) and isinstance(d := resolve(i.type.dtype), DType) and d.is_int


def _items(x, index):
  """`index` over x's axes (`...` and missing trailing axes as `:`), or None where it holds anything but whole
  slices, integer tensors and static ints, or its tensors and ints are not next to each other."""
  items = index if isinstance(index, tuple) else (index,)
  rank = len(x.type.shape)
  if sum(i is Ellipsis for i in items) > 1:
    return None
  full = []
  for i in items:
    full.extend([slice(None)] * (rank - (len(items) - 1)) if i is Ellipsis else [i])
  full.extend([slice(None)] * (rank - len(full)))
  if len(full) != rank or not all(i == slice(None) or _int_tensor(i) or _static_int(i) or _int_scalar(i)
                                  for i in full):
    return None
  adv = [d for d, i in enumerate(full) if i != slice(None)]
  if not adv or adv != list(range(adv[0], adv[-1] + 1)) or not any(is_tensor(full[d]) for d in adv):
    return None
  return full, adv


def _broadcast_shapes(shapes):
  rank = max(len(s) for s in shapes)
  out = []
  for k in range(rank):
    sizes = {s[k - rank + len(s)] for s in shapes if k - rank + len(s) >= 0} - {1}
    if len(sizes) > 1:
      return None
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


def input_read(cx, x, big=True):
  """The kernel input `x` is a whole read of (`w_ref[...]`), where that read would not fit a thread's registers
  (more than 8 x 255 a thread across the CTA: MG403) or its gather's SMEM scratch (MG402), and the input cannot
  change (not aliased to an output); else None. A gather from such a read is the gather from the input itself,
  which reads only the rows its ids name (probe 53b: `w_ref[...][ids]` of an embedding table was MG403, whose hint
  wrote `w_ref[ids, :]`). `big=False`: of any size."""
  from ..types import RefType, Space
  from .memory import Load
  d = cx.b.defs.get(getattr(x, "id", None))
  if not isinstance(d, Load) or d.merge or d.keep is not None or not isinstance(d.ref.type, RefType):
    return None
  ref = d.ref
  if ref.type.space != Space.GMEM or ref.id not in cx.b.read_only or ref.id in cx.b.aliased or \
      tuple(ref.type.shape) != tuple(x.type.shape):
    return None
  from .. import hw
  t = resolve(ref.type.dtype)
  size = math.prod(x.type.shape) * getattr(t, "itemsize", 4)
  return ref if not big or size / 4 / max(1, cx.b.threads) > _SLACK * 255 or size > hw.SMEM_LIMIT else None


_SLACK = 8       # carried_registers.REGISTER_SLACK: a tile past 8x a thread's 255 registers is MG403


def register_gather(cx, x, index, name=""):
  """`x[index]` of a register tensor where the index holds integer tensors (jnp's gather), or None where this
  index form is not one it takes (the caller's error then)."""
  if (ref := input_read(cx, x)) is not None:
    from .gather import gather
    return gather(cx, ref, index, name)
  plan = _items(x, index)
  if plan is None:
    return None
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is not None and not getattr(cx.b, "pad_ok", 0) and any(
      getattr(v, "id", None) in pads for v in (x, *plan[0])):
    return _padded_vector(cx, x, plan[0], name)
  full, adv = plan
  shape = tuple(x.type.shape)
  bshape = _broadcast_shapes([tuple(full[d].type.shape) for d in adv if is_tensor(full[d])])
  if bshape is None:
    return None
  pre, post = shape[:adv[0]], shape[adv[-1] + 1:]
  out = pre + bshape + post
  if len(out) > 2 and len(adv) == 1 and len(bshape) == 1:      # one axis indexed: gathered rows of a 2-D view
    return _rows_of(cx, x, adv[0], full[adv[0]], name)
  n = math.prod(out)
  if n % 128 and not (len(out) == 1 and n % 8 == 0):
    if len(out) == 1 and pads is None:     # (an odd vector, v[o] of 100 sorted ids: the padded trace takes it)
      raise E.LayoutError(f"a gather of {n} elements from {cx.named(x, 'a register tensor')} gives a ({n},) vector,"
                          f" which no register tensor holds (a 1-D vector holds a multiple of 8 elements)", cx.loc,
                          hint=f"gather {-(-n // 8) * 8} indices (the vector padded), and store the first {n} under"
                               f" a mask: {stored_into(cx)}.at[ml.ds(0, {-(-n // 8) * 8})].store(v, mask=ml.arange({-(-n // 8) * 8})"
                               f" < {n})")
    if len(out) == 2 and out == bshape and pads is None:    # (a (3, 40) tile of indices into a table, as jnp.interp's,
      up = (-(-out[0] // 4) * 4, -(-out[1] // 32) * 32)   # or a Swin bias table's column: the padded trace takes it)
      raise E.LayoutError(f"a gather from {cx.named(x, 'a register tensor')} at a {out} tile of indices gives {n}"
                          f" elements, which no register tensor holds (a tile holds a multiple of 128)", cx.loc,
                          hint=f"read the indices padded to {up} under a mask (other=0) and gather at them, then"
                               f" store only the first {out} of the result under that mask,"
                               f" (ml.arange({up[0]})[:, None] < {out[0]}) & (ml.arange({up[1]})[None, :] < {out[1]}):"
                               f" the padding holds no real elements")
    return None
  strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
  pos, offset = None, 0
  for d, i in enumerate(full):
    if _static_int(i):              # (jnp's clamping of a static index too)
      offset += min(max(i + shape[d] if i < 0 else i, 0), shape[d] - 1) * strides[d]
      continue
    if _int_scalar(i):              # a run-time one: clamped alike, added to every position
      term = _clamped(cx, i, shape[d])
      term = term if strides[d] == 1 else ew.binary(cx, ew.BinOp.MUL, term, strides[d])
      offset = term if isinstance(offset, int) and not offset else ew.binary(cx, ew.BinOp.ADD, term, offset)
      continue
    if i == slice(None):            # a whole axis: its coordinate at the result's shape
      axis = d if d < adv[0] else d - (adv[-1] + 1) + len(pre) + len(bshape)
      coord = cx.b.emit(ew.Arange, axis, loc=cx.loc, types=[TensorType(out, DType.i32)]).result
    else:                           # jnp's: from the end where negative, clamped into the axis
      k = _clamped(cx, i, shape[d])
      dims = tuple(range(len(pre) + len(bshape) - len(i.type.shape), len(pre) + len(bshape)))
      from .shape import broadcast_to_shape
      coord = broadcast_to_shape(cx, k, out, dims)
      cx.b.index_broadcasts.add(coord.id)     # (its layout conflicts take a copy: no slip of NumPy's alignment)
    term = coord if strides[d] == 1 else ew.binary(cx, ew.BinOp.MUL, coord, strides[d])
    pos = term if pos is None else ew.binary(cx, ew.BinOp.ADD, pos, term)
  if not isinstance(offset, int) or offset:
    pos = ew.binary(cx, ew.BinOp.ADD, pos, offset)
  return gather_positions(cx, x, pos, name)


def _clamped(cx, i, n):
  """Integer index `i` (a tensor or a scalar) as jnp's gather takes it: int32, from the end where negative, clamped
  into an axis of `n` (shape._clamped_index, which also clamps a uint32 or int64 index past int32)."""
  from .shape import _clamped_index
  return _clamped_index(cx, i, n)


def _padded_vector(cx, x, full, name):
  """`x[index]` of integer tensors, static ints and run-time integer scalars (no slices) where x or an index tensor is
  computed padded (ops/padded_tiles.py: an odd read of 100 tokens, its argsort; a (3, 40) tile of positions in a
  table, jnp.interp's, probe 54a; a Swin bias table of (2w - 1)**2 rows at a head's column, `tab[idx, h]`, probe
  56g): each index clamped into x's own length along its axis, as jnp's, so padding lanes read x's own elements;
  the positions those of x's held (padded) shape; the result padded as the index tensors. Any other form with a
  padded operand ends the padded trace."""
  from . import padded_tiles
  from .padded_tiles import PadAbort
  tensors = [i for i in full if is_tensor(i)]
  if any(i == slice(None) for i in full if not is_tensor(i)) or not tensors:
    raise PadAbort("register gather")
  held = _broadcast_shapes([tuple(i.type.shape) for i in tensors])
  if held is None or any(tuple(i.type.shape) != held for i in tensors if i.id in cx.b.pad_tiles):
    raise PadAbort("register gather")
  own = _broadcast_shapes([padded_tiles.true_shape(cx.b, i) if i.id in cx.b.pad_tiles else tuple(i.type.shape)
                           for i in tensors])
  shape, xown = tuple(x.type.shape), padded_tiles.true_shape(cx.b, x)
  strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
  with padded_tiles.allowed(cx):
    pos, offset = None, 0
    for d, i in enumerate(full):
      if _static_int(i):
        offset += min(max(i + xown[d] if i < 0 else i, 0), xown[d] - 1) * strides[d]
        continue
      k = _clamped(cx, i, xown[d])
      if is_tensor(k) and tuple(k.type.shape) != held:
        from .shape import broadcast_to_shape
        k = broadcast_to_shape(cx, k, held, tuple(range(len(held) - len(k.type.shape), len(held))))
      term = k if strides[d] == 1 else ew.binary(cx, ew.BinOp.MUL, k, strides[d])
      if is_tensor(term):
        pos = term if pos is None else ew.binary(cx, ew.BinOp.ADD, pos, term)
      else:
        offset = term if isinstance(offset, int) and not offset else ew.binary(cx, ew.BinOp.ADD, term, offset)
    if not isinstance(offset, int) or offset:
      pos = ew.binary(cx, ew.BinOp.ADD, pos, offset)
    out = gather_positions(cx, x, pos, name)
  if own != held:
    cx.b.pad_tiles[out.id] = own
  return out


def _rows_of(cx, x, a, ids, name):
  """`x[..., ids, ...]` (a vector of indices along axis `a` of a 3-D or wider tensor) as rows gathered from the 2-D
  view of x with axis `a` first (permuted through SMEM where it is not), permuted back: the index is broadcast in
  2-D only, where register layouts take it."""
  from .permute import permute_tensor
  from .shape import reshape_
  shape = tuple(x.type.shape)
  rest = tuple(n for d, n in enumerate(shape) if d != a)
  first = permute_tensor(cx, x, (a,) + tuple(d for d in range(len(shape)) if d != a))
  rows = register_gather(cx, reshape_(cx, first, (shape[a], math.prod(rest))), (ids, slice(None)))
  got = reshape_(cx, rows, (ids.type.shape[0],) + rest)
  back = tuple(range(1, a + 1)) + (0,) + tuple(range(a + 1, len(shape)))
  return permute_tensor(cx, got, back, name)


def take_along(cx, x, ids, axis):
  """`ml.take_along_axis(v, ids, axis)` of a register tensor (jnp's: ids of v's rank and size along the other axes),
  as `v[ids]` of a vector (a sort's order taken from the row it sorted, probe 56d) or `v[ml.arange(m)[:, None], ids]`
  (axis 1) / `v[ids, ml.arange(n)[None, :]]` (axis 0) of a tile, each other axis its positions in N-D; None for
  other forms."""
  rank = len(x.type.shape) if is_tensor(x) else 0
  if not (rank and _int_tensor(ids) and len(ids.type.shape) == rank and _static_int(axis) and -rank <= axis < rank):
    return None
  a = axis % rank
  if any(ids.type.shape[k] != x.type.shape[k] for k in range(rank) if k != a):
    return None
  index = tuple(ids if k == a else cx.b.emit(ew.Arange, k, loc=cx.loc, types=[TensorType(tuple(ids.type.shape),
                                                                                          DType.i32)]).result
                for k in range(rank))
  return register_gather(cx, x, index, cx.name)


def gather_positions(cx, x, pos, name=""):
  """The elements of register tensor `x` at the flat positions `pos` (an int32 tensor, each inside x)."""
  from ..relayout import RelayoutStore
  from .scratches import scratch
  from .shape import via_bytes
  t = x.type
  if x.id in cx.b.spread:       # (a small middle-axis statistic held spread: ops/spread.py)
    from .spread import refuse
    refuse(cx, x, "to gather from")
  if resolve(t.dtype) == DType.bool_:            # through SMEM as bytes, 0 or 1
    return via_bytes(cx, x, lambda b: gather_positions(cx, b, pos, name))
  if isinstance(resolve(t.dtype), DType) and resolve(t.dtype).bits > 32:
    raise E.UnsupportedDtypeError("a gather from a register tensor of 64-bit elements: 8- to 32-bit elements only",
                                  cx.loc, hint="convert to a 32-bit dtype first")
  buf = scratch(cx, (math.prod(t.shape),), t.dtype, "gather scratch")
  cx.b.emit(RelayoutStore, buf, x, loc=cx.loc, types=[])
  return cx.b.emit(ScratchGather, buf, pos, loc=cx.loc, types=[TensorType(tuple(pos.type.shape), t.dtype)],
                   names=[name or cx.name]).result
