"""Scans of register tensors: `ml.cumsum`, `ml.cumprod`, `ml.cummax`, `ml.cummin` along an axis.

A scan moves values between threads, so it runs through an SMEM scratch the compiler allocates
(rows padded by 4 bytes, as for transposes): every thread stores its elements (along the last
axis: the totals of its register vectors, each scanned in registers first), then ceil(log2(n))
steps each add (multiply, take the max or min of) the element 2**k before, read back from the
scratch (Hillis and Steele), with a barrier between a step's reads and its writes
(lowering/scan.py). float16/bfloat16 sums and products run in float32 and round once; 8- and 16-bit
integer ones give int32 (uint32), as jnp.cumsum does. Interpret mode combines in the same order.
"""
from __future__ import annotations

import enum
import math

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..ir import Access, LayoutRule, Traits
from ..types import TensorType, dtype_name, resolve
from . import elementwise as ew
from .base import builtin, check_register_value, dtype_arg, is_tensor, kind_of, shown
from .scratches import row_scratch
from .shape import reshape_


class ScanKind(enum.Enum):
  SUM = "sum"
  PROD = "prod"
  MAX = "max"
  MIN = "min"


@ir.op(Traits(effects=lambda o: [(o.scratch, Access.REG_WRITE), (o.scratch, Access.REG_READ)],
              layout=LayoutRule.ELEMENTWISE, moves_elements=True))
class Scan(ir.Op):
  """The inclusive scan of the 1- or 2-D tensor `x` along `axis` (from the end if `reverse`),
  through `scratch` (flat: x's rows of n + pad elements; a 1-D x is one row). `segment`, along
  axis 0 of a 2-D x, restarts the scan every `segment` rows (a middle axis of a 3-D tensor, the
  2-D x its reshape); 0 is none."""
  kind: ScanKind
  x: ir.Value
  axis: int
  reverse: bool
  scratch: ir.Value
  pad: int
  segment: int
  loc: object
  results: tuple
  totals: tuple = ()        # (its position,) where its last element along the axis (the first, reversed) is read, a
  #                           product's (jnp.prod, ml.cumprod(v)[-1]); interpret mode checks padding there (MG953)


def _axis(cx, axis, rank, what, x=None):
  if axis is None:
    if rank == 1:
      return 0
    v = cx.named(x) if x is not None else "x"       # the tensor as the user wrote it
    from ..torch_hints import _atom        # (the receiver of .reshape, parenthesised where it needs it)
    raise E.KernelTypeError(f"{what} of a {rank}-D tensor needs an axis (jnp's axis=None flattens it)",
                            cx.loc, hint=f"{what}({v}, axis=1) scans each row; {what}({v}, axis=0) each column; jnp's"
                                         f" flattened scan is {what}({_atom(v)}.reshape(-1)), a 1-D vector")
  if not isinstance(axis, int) or isinstance(axis, bool):
    raise E.KernelTypeError(f"{what}: axis must be a static int, got {shown(axis)}", cx.loc,
                            hint=f"axis is a static int in [-{rank}, {rank})")
  if not -rank <= axis < rank:
    raise E.IndexOutOfBoundsError(f"{what}: axis {axis!r} is out of range for a tensor of rank {rank}", cx.loc,
                                  hint=f"axes run from {-rank} to {rank - 1}")     # (as ml.sum's)
  return axis % rank


def scan(cx, kind: ScanKind, x, axis, reverse, what, segment=0):
  check_register_value(cx, x, what)
  if not is_tensor(x):
    raise E.KernelTypeError(f"{what} takes a register tensor, got {kind_of(x)}", cx.loc,
                            hint=f"{what} scans a tensor: a scalar's scan is the scalar itself")
  if not isinstance(reverse, bool):
    raise E.KernelTypeError(f"{what}: reverse is a static bool, got {shown(reverse)}", cx.loc,
                            hint="reverse=True scans from the end")
  shape = x.type.shape
  axis = _axis(cx, axis, len(shape), what, x)
  from .small_scans import held_scan
  if len(shape) == 2 and (held := held_scan(cx, kind, x, axis, reverse, what, scan)) is not None:
    return held           # a small statistic held as a vector: row by row through SMEM (ops/small_scans.py)
  if len(shape) > 2:
    # Along any axis of a 3-D (or wider) tensor: the scan of its 2-D reshape, reshaped back. The axis
    # first or last is a plain scan of (axis, the rest) or (the rest, axis); a middle one scans the
    # columns of (the axes up to it, the rest) restarting every shape[axis] rows, so each slab of the
    # leading axes is scanned apart.
    lead, n, trail = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    flat, ax, seg = ((lead, n), 1, 0) if trail == 1 else ((n, trail), 0, 0) if lead == 1 else \
        ((lead * n, trail), 0, n)
    return reshape_(cx, scan(cx, kind, reshape_(cx, x, flat), ax, reverse, what, seg), shape)
  d = resolve(x.type.dtype)
  if not isinstance(d, DType):
    raise E.DtypeInferenceError(f"{what}: the dtype of {x.name or 'the tensor'} is not known yet", cx.loc,
                                hint="give its buffer, when you make it, the dtype of the data it will hold:"
                                     " ml.smem(shape, x.dtype) of an input x, or a dtype such as jnp.bfloat16")
  acc = d
  if d.is_float and d.bits == 8:              # no 8-bit float arithmetic: float32, rounded once
    acc = DType.f32
  elif kind in (ScanKind.SUM, ScanKind.PROD):
    if d in (DType.f16, DType.bf16):
      acc = DType.f32
    elif d == DType.bool_ or (d.is_int and d.bits < 32):
      acc = DType.u32 if d.is_int and not d.is_signed else DType.i32
  elif d == DType.bool_:       # a running or (max) or and (min), through SMEM as bytes, 0 or 1
    return ew.compare(cx, ew.CmpOp.NE, scan(cx, kind, ew.astype(cx, x, DType.i8), axis, reverse, what, segment), 0)
  if acc.bits > 32 and d == DType.i64 and not segment:
    # int64 under jax_enable_x64 (probe 51b): the Hillis and Steele steps of ml.associative_scan, each a 64-bit add
    # (multiply, max, min) of the tensor rolled by 2**k, where the Scan op's 32-bit scratch holds no 64-bit lane
    from .assoc_scan import combined_scan
    op = {ScanKind.SUM: ew.BinOp.ADD, ScanKind.PROD: ew.BinOp.MUL, ScanKind.MAX: ew.BinOp.MAX,
          ScanKind.MIN: ew.BinOp.MIN}[kind]
    return combined_scan(cx, op, [x], None, axis, reverse)
  if acc.bits > 32:
    from .elementwise_checks import method_on
    xs = method_on(cx.named(x))        # (x * 2 ** 31 is the receiver (x * 2 ** 31).astype: its parentheses)
    raise E.UnsupportedDtypeError(
        f"{what} of {dtype_name(d)}: 8- to 32-bit elements only", cx.loc,
        hint=f"scan in int32 and widen the result, {what}({xs}.astype(jnp.int32)"
             f"{'' if axis == 0 else f', axis={axis}'}).astype(jnp.int64), where the running values stay within int32"
        if d == DType.i64 else "scan a 32-bit tensor")
  v = x if acc == d else ew.astype(cx, x, acc)
  rows, n = (1, shape[0]) if len(shape) == 1 else shape
  # (a reduction over a middle axis of a 3-D tensor runs as this scan: its scratch is named for the user's op)
  scratch, pad = row_scratch(cx, rows, n, acc, "scan scratch" if what.startswith("ml.cum") or not segment
                             else "middle-axis reduction scratch")
  rounds = d.is_float and acc != d                                # back to the input's dtype, once
  emit = lambda y: cx.b.emit(Scan, kind, y, axis, reverse, scratch, pad, segment, loc=cx.loc,
                             types=[TensorType(shape, acc)], names=[None if rounds else cx.name]).result
  from .padded_tiles import reverse_scanned
  r = (reverse and reverse_scanned(cx, kind, v, axis, emit)) or emit(v)    # (an odd window read padded, from the end)
  return ew.narrowed(cx, r, d) if rounds else r     # (float8_e5m2's infinities kept, as jnp's astype)


def _typed_scan(cx, kind, x, axis, reverse, dtype, what):
  """jnp.cumsum's and jnp.cumprod's `dtype=`: the elements converted to it, scanned, and the result
  of that dtype (`ml.cumsum(keep, dtype=jnp.int32)` counts a mask; an 8-bit one wraps, as jnp's)."""
  d = dtype_arg(cx, dtype, f"{what}'s dtype", optional=True)
  if d is None or not is_tensor(x):
    return scan(cx, kind, x, axis, reverse, what)
  r = scan(cx, kind, ew.astype(cx, x, d), axis, reverse, what)
  return r if resolve(r.type.dtype) == d else ew.astype(cx, r, d)


@builtin(methods=("cumsum",))
def cumsum(cx, x, axis=None, reverse=False, dtype=None):
  """Inclusive cumulative sum along `axis` (jnp.cumsum, also its `dtype`; `reverse` as lax.cumsum)."""
  return _typed_scan(cx, ScanKind.SUM, x, axis, reverse, dtype, "ml.cumsum")


@builtin(methods=("cumprod",))
def cumprod(cx, x, axis=None, reverse=False, dtype=None):
  """Inclusive cumulative product along `axis` (jnp.cumprod, also its `dtype`)."""
  return _typed_scan(cx, ScanKind.PROD, x, axis, reverse, dtype, "ml.cumprod")


@builtin
def cummax(cx, x, axis=None, reverse=False):
  """Inclusive running maximum along `axis` (lax.cummax; NaN propagates, as jnp.maximum)."""
  return scan(cx, ScanKind.MAX, x, axis, reverse, "ml.cummax")


@builtin
def cummin(cx, x, axis=None, reverse=False):
  """Inclusive running minimum along `axis` (lax.cummin)."""
  return scan(cx, ScanKind.MIN, x, axis, reverse, "ml.cummin")


def mark_totals(b, x, index) -> None:
  """Where `x[index]` (a subscript of a register tensor) reads the last element of a scan along its axis (the first of
  a reverse scan: the scan's total, as jnp.prod and `ml.cumprod(v, axis=1)[:, -1]` take it), mark the scan, whose
  total interpret mode then checks as a reduction's (lowering/interpret_pad_scans.py)."""
  from .elementwise import Cast
  o = b.defs.get(getattr(x, "id", None))
  if isinstance(o, Cast) and not o.bitcast:     # (a 16-bit scan: computed in float32, rounded once)
    o = b.defs.get(getattr(o.x, "id", None))
  if not isinstance(o, Scan) or o.segment:
    return
  items = index if isinstance(index, tuple) else (index,)
  from .padded_tiles import true_shape
  rank = len(o.results[0].type.shape)
  if Ellipsis in items:
    k = items.index(Ellipsis)
    items = items[:k] + (slice(None),) * (rank + 1 - len(items)) + items[k + 1:]
  items = tuple(i for i in items if i is not None)
  if len(items) != rank:
    return
  own = true_shape(b, x)        # (a tile computed padded: the index counts its own elements, as the read does)
  n = own[o.axis] if len(own) == rank else o.results[0].type.shape[o.axis]
  last = 0 if o.reverse else n - 1
  at = items[o.axis]
  if isinstance(at, slice) and at.step in (None, 1):
    at = at.start if at.start is not None and (at.stop is None or at.stop == n) else None
  if isinstance(at, int) and not isinstance(at, bool) and -n <= at < n and at % n == last:
    object.__setattr__(o, "totals", (last,))     # (an annotation of the op in place, as start_multiple)
