"""Register rolls: `jnp.roll` of a register tensor along one axis by a static shift, written as
`ml.roll(v, shift, axis)` or as the concatenation of its windows (`ml.concatenate([v[:, s:], v[:, :s]],
axis=1)`, a register roll by -s).

The windows of such a concatenation are often not register tensors of their own (`v[:, 3:]` of a
(64, 128) tile is 125 columns wide, MG204), and need not be: `concatenate` recognises parts that are
static windows of one tensor, in rotated order along the joined axis, and reads the tensor rolled
instead (windows at other offsets, a stencil's repeated or reflected edge, or windows of other tensors
of the same shape, a previous chunk's last column, each read rolled by their own shift and selected in
by index). Every thread stores its elements at their row-major positions in a flat SMEM scratch
(RelayoutStore, as a reshape through SMEM), a barrier (the sync pass's), and every thread loads the
elements of the result's layout from the positions rolled along the axis (RollLoad). The windows'
own reads, unused, are dropped before layouts are chosen.
"""
from __future__ import annotations

import math

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..ir import LayoutRule, Traits
from ..types import RefType, TensorType, resolve
from .base import builtin, check_register_value, is_tensor, is_value, kind_of, shown
from ..triton_semantics import NOT_GIVEN


def _effects(o):
  return [(o.scratch, ir.Access.REG_READ)]


@ir.op(Traits(effects=_effects, layout=LayoutRule.FRESH, moves_elements=True))
class RollLoad(ir.Op):
  """Read the row-major elements of the flat `scratch` as the result's shape, rolled: element
  `[..., j, ...]` (j along `axis`) is the scratch's `[..., (j + shift) % n, ...]` (with `axis` None,
  flat element j is the scratch's `(j + shift) % size`)."""
  scratch: ir.Value
  axis: int
  shift: int
  loc: object
  results: tuple


def roll_tensor(cx, x, shift: int, axis: int, name=""):
  """`jnp.roll(x, shift, axis)` of a register tensor (a static shift; axis a static int, or None:
  the flattened tensor's roll)."""
  from ..relayout import RelayoutStore
  from .scratches import scratch
  from .shape import via_bytes
  from .padded_rolls import padded_roll
  if (kept := padded_roll(cx, x, shift, axis, lambda v, s: roll_tensor(cx, v, s, axis, name))) is not None:
    return kept               # (an odd read computed padded: rolled along its own length)
  t = x.type
  n = math.prod(t.shape) if axis is None else t.shape[axis]
  if shift % n == 0:
    return x
  if resolve(t.dtype) == DType.bool_:            # through SMEM as bytes, 0 or 1
    return via_bytes(cx, x, lambda b: roll_tensor(cx, b, shift, axis, name))
  buf = scratch(cx, (math.prod(t.shape),), t.dtype, "roll scratch")
  cx.b.emit(RelayoutStore, buf, x, loc=cx.loc, types=[])
  return cx.b.emit(RollLoad, buf, axis, (-shift) % n, loc=cx.loc, types=[TensorType(t.shape, t.dtype)],
                   names=[name or cx.name]).result


def record_window(cx, result, x, index) -> None:
  """Note that register value `result` is the static window `index` (slices, one per axis) of `x`
  (a register tensor, or a ref whose windows were read: then the window's Load, `at`)."""
  windows = cx.b.__dict__.setdefault("register_windows", {})
  full = tuple(index) + tuple(slice(0, n) for n in x.type.shape[len(index):])
  if len(full) == len(x.type.shape) and all(isinstance(i, slice) and i.step in (None, 1) and all(
      b is None or isinstance(b, int) and not isinstance(b, bool) for b in (i.start, i.stop)) for i in full):
    windows[result.id] = (x, tuple(i.indices(n)[:2] for i, n in zip(full, x.type.shape)))


def record_ref_window(cx, result, ref, index) -> None:
  """`ref[a:b, ...]` read into `result`: a window of the ref, as record_window's (read again whole,
  rolled, where nothing wrote memory since the window was read)."""
  if is_value(result) and is_tensor(result) and isinstance(index, tuple | slice):
    record_window(cx, result, ref, index if isinstance(index, tuple) else (index,))


def _unchanged_since(cx, values) -> bool:
  """Whether the ops of this block since the first of `values` was made write no memory (so a ref
  read again now holds what its windows read)."""
  ops = cx.b.block.ops
  made = [k for k, o in enumerate(ops) if any(r in values for r in o.results)]
  if len(made) != len(values):
    return False
  return all(ir.traits_of(o).pure or all(a == ir.Access.REG_READ for _, a in ir.traits_of(o).effects(o))
             for o in ops[min(made):])


def as_roll(cx, xs, axis):
  """`ml.concatenate(xs, axis)` as rolls where its parts are windows, whole along the other axes, of
  tensors of the result's shape, or constant fills (`[ml.zeros((m, 1)), v[:, :-1]]`, a shift with
  padding). Windows of one tensor following each other around `axis` (`[v[s:], v[:s]]`) are one roll;
  windows at other offsets (an edge repeated, `[v[:, :1], v[:, :-1]]`, or reflected, `[v[:, 1:2],
  v[:, :-1]]`) or of other tensors of that shape (the previous chunk's last column, `[prev[:, -1:],
  cur[:, :-1]]`) are each their tensor rolled by their own shift, and each part other than the first
  roll's, fills too, is selected in by index. Else None."""
  windows = cx.b.__dict__.get("register_windows", {})
  parts = [windows.get(p.id) or _fill(cx, p) for p in xs]
  if any(p is None for p in parts) or all(src is None for src, _ in parts):
    return None
  loaded = {}
  for src, _ in parts:         # windows read from a ref: the ref read whole, where it still holds them
    if src is not None and isinstance(src.type, RefType) and src.id not in loaded:
      if not _unchanged_since(cx, [p for p, (s, _) in zip(xs, parts) if s is not None and s.id == src.id]):
        return None
      loaded[src.id] = None
  shape = tuple(next(src for src, _ in parts if src is not None).type.shape)
  if any(src is not None and tuple(src.type.shape) != shape for src, _ in parts):
    return None
  n, pos, segments = shape[axis], 0, []     # (lo, hi, (source, shift) or None, fill value) along the axis
  for p, (src, w) in zip(xs, parts):
    k = p.type.shape[axis]
    if src is None:
      segments.append((pos, pos + k, None, w))
    elif any(w[d] != (0, shape[d]) for d in range(len(shape)) if d != axis):
      return None
    else:
      segments.append((pos, pos + k, (src.id, (w[axis][0] - pos) % n), None))
    pos += k
  if pos != n:
    return None
  from .transfers import load
  for rid in loaded:
    loaded[rid] = load(cx, next(src for src, _ in parts if src is not None and src.id == rid))
  source = {src.id: loaded.get(src.id, src) for src, _ in parts if src is not None}
  keys = list(dict.fromkeys(key for _, _, key, _ in segments if key is not None))
  one = len(keys) == 1 and all(key is not None for _, _, key, _ in segments)
  rolled = {key: roll_tensor(cx, source[key[0]], -key[1], axis, cx.name if one else "") for key in keys}
  out = rolled[keys[0]]
  for lo, hi, key, value in segments:
    if key != keys[0]:
      out = _select_range(cx, shape, axis, lo, hi, value if key is None else rolled[key], out)
  return out


def _select_range(cx, shape, axis, lo, hi, value, out):
  """`value` where the index along `axis` is in [lo, hi), else `out`."""
  from . import elementwise as ew
  at = cx.b.emit(ew.Arange, axis, loc=cx.loc, types=[TensorType(shape, DType.i32)]).result
  inside = ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.GE, at, lo), ew.compare(cx, ew.CmpOp.LT, at, hi))
  return ew.where_(cx, inside, value, out)


def _fill(cx, p):
  """(None, value) for a part made by ml.full or ml.zeros of a Python number, else None."""
  from .elementwise import Full
  o = cx.b.defining(p)
  if isinstance(o, Full) and isinstance(o.value, (int, float)) and not isinstance(o.value, bool):
    return None, o.value
  return None


@builtin
def roll(cx, x, shift, axis=None):
  """`jnp.roll(x, shift, axis)` of a register tensor: a static int `shift`, and `axis` a static int or
  None (the flattened tensor rolled, as jnp's), through an SMEM scratch."""
  check_register_value(cx, x, "ml.roll")
  if not is_tensor(x):
    raise E.KernelTypeError(f"ml.roll rolls a register tensor, got {kind_of(x)}", cx.loc,
                            hint="ml.roll(v, 1, axis=0)")
  shape = x.type.shape
  rank = len(shape)
  if isinstance(shift, (tuple, list)) or isinstance(axis, (tuple, list)):
    return _rolls(cx, x, shift, axis)
  if axis is not None and (not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank):
    raise E.KernelTypeError(f"ml.roll: axis must be a static int in [-{rank}, {rank}) or None, got {shown(axis)}",
                            cx.loc, hint="name the axis: ml.roll(v, 1, axis=-1) (axis=None rolls the flattened tensor)")
  if (got := _run_time_roll(cx, x, shift, axis)) is not None:
    return got
  if not isinstance(shift, int) or isinstance(shift, bool):
    a = rank - 1 if axis is None else axis % rank
    n = shape[a]
    idx = ", ".join(f"(ml.arange({n}) - s) % {n}" if d == a else ":" for d in range(rank))
    raise E.KernelTypeError(f"ml.roll needs a static int shift, got {shown(shift)}", cx.loc,
                            hint=f"roll by a Python int (a constexpr, a shape); for a run-time shift s, gather the"
                                 f" values rolled from the ref they came from: ref[{idx}]")
  if axis is None and rank > 1:
    return roll_tensor(cx, x, shift, None, cx.name)
  return roll_tensor(cx, x, shift, 0 if axis is None else axis % rank, cx.name)


def _at_run_time(x, shift, axis) -> bool:
  """Whether _run_time_roll takes this roll: an integer scalar shift along one axis (a vector's when None)."""
  from .base import is_scalar
  return (is_scalar(shift) and isinstance(d := resolve(shift.type.dtype), DType) and d.is_int
          and (axis is not None or len(x.type.shape) == 1))


def _run_time_roll(cx, x, shift, axis):
  """jnp.roll by a run-time integer scalar (a ring buffer's `jnp.roll(cache, pos, axis=0)`, probe 57d; it was
  MG003): the register gather of `(ml.arange(n) - shift) % n` along the axis (a vector's, or the named one's), as
  jnp's dynamic roll; None for anything else (a flattened roll of a wider tensor keeps its MG003)."""
  from .elementwise import binary
  from .elementwise_fns import arange
  from .elementwise_ops import BinOp
  from .register_gather import register_gather
  if not _at_run_time(x, shift, axis):
    return None
  rank = len(x.type.shape)
  a = 0 if axis is None else axis % rank
  n = x.type.shape[a]
  if str(resolve(shift.type.dtype)) != "int32":     # (int64, uint32, int16: taken modulo n first, then int32)
    from .elementwise import astype
    shift = astype(cx, binary(cx, BinOp.MOD, shift, n), DType.i32)
  idx = binary(cx, BinOp.MOD, binary(cx, BinOp.SUB, arange.rule(cx, n), shift), n)
  return register_gather(cx, x, tuple(idx if i == a else slice(None) for i in range(rank)), cx.name)


def _rolls(cx, x, shift, axis):
  """jnp.roll of several axes at once, `jnp.roll(v, (-2, -2), axis=(0, 1))` (Swin's cyclic shift of an (h, w, c)
  tile): `shift` and `axis` broadcast against each other as jnp's do, and each pair rolls in turn (a repeated axis
  rolls by the sum); a tuple of shifts with `axis=None` rolls the flattened tensor by their sum, as jnp's."""
  shifts = list(shift) if isinstance(shift, (tuple, list)) else [shift]
  if axis is None:
    if all(isinstance(s, int) and not isinstance(s, bool) for s in shifts):
      return roll.rule(cx, x, sum(shifts), None)
    total = next(s for s in shifts if not isinstance(s, int) or isinstance(s, bool))
    if not _at_run_time(x, total, None):
      return roll.rule(cx, x, total, None)       # (its MG003, naming that shift)
    from .elementwise import binary
    from .elementwise_ops import BinOp
    for s in shifts:                 # run-time shifts (probe 57d): the roll by their sum, as jnp's
      total = total if s is total else binary(cx, BinOp.ADD, total, s)
    return roll.rule(cx, x, total, None)
  axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
  if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)) or not axes:
    raise E.KernelTypeError(
        f"ml.roll: {len(shifts)} shifts {shown(shift)} and {len(axes)} axes {shown(axis)} do not pair up (jnp.roll"
        f" broadcasts them against each other)", cx.loc,
        hint="give one shift per axis, ml.roll(v, (1, 2), axis=(0, 1)), or one shift for every axis named")
  n = max(len(shifts), len(axes))
  shifts, axes = shifts * (n // len(shifts)), axes * (n // len(axes))
  for s, a in zip(shifts, axes):
    x = roll.rule(cx, x, s, a)
  return x


# ---------------------------------------------------------------- flips
@ir.op(Traits(effects=_effects, layout=LayoutRule.FRESH, moves_elements=True))
class FlipLoad(ir.Op):
  """Read the row-major elements of the flat `scratch` as the result's shape, reversed along `axes`:
  element `[..., j, ...]` (j along an axis of `axes`, of size n) is the scratch's `[..., n - 1 - j, ...]`."""
  scratch: ir.Value
  axes: tuple
  loc: object
  results: tuple


def flip_tensor(cx, x, axes: tuple, name=""):
  """`jnp.flip(x, axes)` of a register tensor, through an SMEM scratch as a roll (a store, a barrier,
  a load of the reversed positions)."""
  from ..relayout import RelayoutStore
  from .scratches import scratch
  from .shape import via_bytes
  from .padded_rolls import padded_flip
  t = x.type
  axes = tuple(a for a in sorted(set(axes)) if t.shape[a] > 1)
  if not axes:
    return x
  if (kept := padded_flip(cx, x, axes, lambda v, a: flip_tensor(cx, v, a, name))) is not None:
    return kept               # (an odd read computed padded: reversed along its own length)
  if resolve(t.dtype) == DType.bool_:            # through SMEM as bytes, 0 or 1
    return via_bytes(cx, x, lambda b: flip_tensor(cx, b, axes, name))
  buf = scratch(cx, (math.prod(t.shape),), t.dtype, "flip scratch")
  cx.b.emit(RelayoutStore, buf, x, loc=cx.loc, types=[])
  return cx.b.emit(FlipLoad, buf, axes, loc=cx.loc, types=[TensorType(t.shape, t.dtype)],
                   names=[name or cx.name]).result


def reversed_axes(x, index):
  """The axes `index` reverses where it is a register tensor's `v[::-1]`, `v[:, ::-1]`, `v[..., ::-1]`
  (whole axes reversed, the others whole), else None."""
  items = index if isinstance(index, tuple) else (index,)
  rank = len(x.type.shape)
  if sum(i is Ellipsis for i in items) > 1 or not all(i is Ellipsis or isinstance(i, slice) for i in items):
    return None
  if any(isinstance(i, slice) and (i.start is not None or i.stop is not None or i.step not in (None, 1, -1))
         for i in items):
    return None
  if Ellipsis in items:
    k = items.index(Ellipsis)
    items = items[:k] + (slice(None),) * (rank - len(items) + 1) + items[k + 1:]
  if len(items) > rank:
    return None
  axes = tuple(a for a, i in enumerate(items) if i.step == -1)
  return axes or None


@builtin(methods=("flip",))
def flip(cx, x, axis=None, dim=NOT_GIVEN):
  """`jnp.flip(x, axis)` of a register tensor: `axis` a static int, a tuple of them, or None (every
  axis), through an SMEM scratch (as ml.roll). Triton's keyword `dim=` is Triton's `tl.flip(x, dim)`: one
  axis, None the last (probe 58d). `ml.flip(v)` of a tensor of two or more axes flips them all, as jnp.flip;
  in a kernel ported from Triton (its module imports the language as `tl`) that is a TritonSemanticsWarning, as
  Triton's `tl.flip(v)` flips the last axis only."""
  check_register_value(cx, x, "ml.flip")
  if not is_tensor(x):
    raise E.KernelTypeError(f"ml.flip reverses a register tensor, got {kind_of(x)}", cx.loc,
                            hint="ml.flip(v, axis=0)")
  rank = len(x.type.shape)
  if dim is not NOT_GIVEN:
    if axis is not None:
      raise E.KernelTypeError("ml.flip takes axis= (jnp's) or dim= (Triton's), not both", cx.loc,
                              hint=f"ml.flip({cx.named(x, 'v')}, axis={shown(axis)})")
    axis = rank - 1 if dim is None else dim
  elif axis is None and rank > 1 and getattr(cx.b, "triton_port", False):
    from ..triton_semantics import flip_warning
    flip_warning(cx, cx.named(x, "v"), rank)
  axes = tuple(range(rank)) if axis is None else axis if isinstance(axis, (tuple, list)) else (axis,)
  if not all(isinstance(a, int) and not isinstance(a, bool) and -rank <= a < rank for a in axes):
    raise E.KernelTypeError(f"ml.flip: axis must be a static int in [-{rank}, {rank}), a tuple of them or None,"
                            f" got {shown(axis)}", cx.loc,
                            hint=f"name the axis: ml.flip({cx.named(x, 'v')}, axis={rank - 1})")
  return flip_tensor(cx, x, tuple(a % rank for a in axes), cx.name)


def check_window_uses(kernel) -> None:
  """A tensor-core tile's window off its 8-column tiles exists only as a part of a concatenation read
  as a roll: one still used once unused ops are gone is the MG204 `slice_columns` kept for it."""
  from .column_slices import Slice
  for o in ir.walk(kernel.body):
    if isinstance(o, Slice) and o.misaligned:
      raise E.LayoutError(o.misaligned[0], o.loc, hint=o.misaligned[1])
