"""Statistics over a middle axis of a 3-D (or wider) tile that keep too few elements for a register tensor.

`ml.max(v, axis=1, keepdims=True)` of a (2, 8, 32) tile keeps (2, 1, 32): 64 elements, which no register tensor
of that shape holds, and no 2-D reshape reduces a middle axis. What such a statistic is for is to broadcast back
(`v - m`, a softmax's or a layer norm's shift and scale), so the compiler also computes it spread along the
reduced axis, a tile of v's shape: the scan along the axis from its end holds the reduction at the axis's first
position, and a scan from the start of that position alone (the reduction's identity elsewhere) copies it along
the axis exactly. The statistic itself is its plain reduction, which nothing computes where only its broadcasts
use it (the dead-op pass drops it); elementwise math on statistics spread along one axis is done on their spread
tiles too, so `(v - mu) / ml.sqrt(var + eps)` broadcasts them back. Storing one whole is MG204 at the store,
whose hint reduces a leading index at a time.
"""
from __future__ import annotations

import math

from .. import errors as E, hw, ir
from ..types import TensorType
from . import elementwise as ew
from .base import is_value


def spread_reduce(cx, kind, x, axes, keepdims, what, hint):
  """The statistic of `x` over a middle axis or a run of them (`axes`) whose kept part is too few elements for a
  register tensor, with its spread tile recorded (see the module); None where it is no such reduction or x's
  2-D reshape has no row-wise layout to scan."""
  shape = tuple(x.type.shape)
  from .shape import Reduce, ReduceKind, Reshape
  if not axes or len(shape) < 3 or axes[0] < 1 or axes[-1] > len(shape) - 2 or axes[-1] - axes[0] + 1 != len(
      axes) or kind not in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN):
    return None
  a = axes[0]
  kept = tuple(n for i, n in enumerate(shape) if i not in axes)
  lead, run, trail = math.prod(shape[:a]), math.prod(shape[a:axes[-1] + 1]), math.prod(shape[axes[-1] + 1:])
  if not math.prod(kept) % hw.WARPGROUP or math.prod(shape) % hw.WARPGROUP or not hw.rows_fit(lead * run, trail):
    return None
  from .elementwise_fns import arange
  from .reduce import extreme_identity
  from .scan import ScanKind, scan
  from .shape import reshape_
  d = x.type.dtype
  y = x if len(axes) == 1 else reshape_(cx, x, (lead, run, trail))     # (a run of axes: as one, of the 3-D reshape)
  ya = a if len(axes) == 1 else 1
  total = scan(cx, ScanKind(kind.value), y, ya, True, what)              # the reduction at position 0 of the axis
  iota = reshape_(cx, arange.apply(cx, (y.type.shape[ya],), {}),
                  tuple(n if i == ya else 1 for i, n in enumerate(y.type.shape)))
  first = ew.compare(cx, ew.CmpOp.EQ, iota, 0)
  ident = 0 if kind == ReduceKind.SUM else extreme_identity(kind, d)
  full = reshape_(cx, scan(cx, ScanKind(kind.value), ew.where_(cx, first, total, ident), ya, False, what), shape)
  res = cx.b.emit(Reduce, kind, x, axes, loc=cx.loc, types=[TensorType(kept, d)], names=[cx.name]).result
  record(cx, res, full, axes, hint)
  if keepdims:
    res = cx.b.emit(Reshape, res, loc=cx.loc, types=[TensorType(tuple(1 if i in axes else n for i, n in enumerate(
        shape)), d)], names=[res.name]).result
    record(cx, res, full, axes, hint)
  return res


def record(cx, v, full, axes, hint) -> None:
  cx.b.spread[v.id] = (full, tuple(axes), hint)


def rehint(cx, v, x, axis, what):
  """`v`, with its store's hint (where it is a spread statistic) computed for the user's `x` and `what` (ml.var's
  last reduction is of the squared deviations, ml.argmax's of the compiler's indices); `v` itself."""
  if is_value(v) and v.id in cx.b.spread:
    from .reduce import _axes, _small_result_hint
    shape = tuple(x.type.shape)
    got = cx.b.spread[v.id]
    cx.b.spread[v.id] = got[:2] + (_small_result_hint(cx, x, shape, _axes(cx, axis, len(shape), what), what, False),)
  return v


def broadcast(cx, x, shape, dims):
  """The statistic `x` (of cx.b.spread) broadcast to `shape` (`dims`: the result axis of each of x's): its spread
  tile where that is the shape (x in its keepdims shape); with size-1 axes inserted (`m[:, None, :]`), its
  reshape, still spread; None for any other."""
  got = cx.b.spread[x.id]
  if math.prod(shape) == math.prod(x.type.shape):
    return reshaped(cx, x, shape)
  if tuple(got[0].type.shape) == tuple(shape) and len(x.type.shape) == len(shape) and tuple(dims) == tuple(
      range(len(shape))):
    return got[0]
  return refuse(cx, x, f"to broadcast to {tuple(shape)}")


def reshaped(cx, x, shape):
  """`x`, a statistic of cx.b.spread, reshaped to `shape` (`m[:, None]`): recorded as spread too where that is its
  kept shape or its keepdims one."""
  from .shape import Reshape
  got = cx.b.spread[x.id]
  full, axes = got[0].type.shape, got[1]
  if tuple(shape) not in (tuple(1 if i in axes else n for i, n in enumerate(full)),
                          tuple(n for i, n in enumerate(full) if i not in axes)):
    refuse(cx, x, f"to reshape to {tuple(shape)}")
  out = cx.b.emit(Reshape, x, loc=cx.loc, types=[TensorType(tuple(shape), x.type.dtype)], names=[x.name]).result
  cx.b.spread[out.id] = got
  return out


def along(cx, operands, out, make):
  """Where the tensor operands of the elementwise op that gave `out` are statistics spread along one axis into
  tiles of one shape (the others fills of their shape, numbers or scalars), `make(spread operands, that shape)`,
  recorded as `out`'s spread tile (a mean's `s / n`, a variance's `+ eps`, `ml.sqrt`, a select of them, a running
  max's `ml.maximum(m, s)` of its `ml.full` start)."""
  tensors = [v for v in operands if isinstance(v, ir.Value) and isinstance(v.type, TensorType)]
  got = [cx.b.spread[v.id] for v in tensors if v.id in cx.b.spread]
  if not got or any(v.type.shape != out.type.shape for v in tensors) or len(
      {(tuple(g[0].type.shape), g[1]) for g in got}) != 1:
    return out
  full = tuple(got[0][0].type.shape)
  from .small_regrid import at_spread

  def spread_of(v):
    if not (isinstance(v, ir.Value) and isinstance(v.type, TensorType)):
      return v
    if v.id in cx.b.spread:
      return cx.b.spread[v.id][0]
    if isinstance(o := cx.b.defining(v), ew.Full):
      return ew.full_(cx, full, o.value, v.type.dtype)
    return at_spread(cx, v, full, got[0][1])      # (per-batch lengths broadcast: at the tile's shape)
  ops = [spread_of(v) for v in operands]
  if any(v is None or isinstance(v, ir.Value) and isinstance(v.type, TensorType) and tuple(v.type.shape) != full
         for v in ops):
    return out
  cx.b.spread[out.id] = (make(ops, full), got[0][1], got[0][2])
  return out


def check_store(cx, ref, value) -> None:
  """A statistic spread along an axis stored whole: MG204 naming it (refuse)."""
  got = cx.b.spread.get(getattr(value, "id", None))
  if got is None or tuple(ref.type.shape) == tuple(got[0].type.shape):     # (broadcast back by the store: its tile)
    return
  from .shape import broadcast_shape
  try:
    if broadcast_shape(cx, [value.type.shape, ref.type.shape], "store", ["", ""]) != tuple(ref.type.shape):
      return          # (a shape the ref does not take: the store's mismatch, with its hint)
  except E.ShapeMismatchError:
    return
  refuse(cx, value, "to store", ref.name or "out")


def refuse(cx, value, use, out="out"):
  """MG204 naming the spread statistic `value`, which no register tensor holds for `use` (to store, reduce,
  reshape), with the hint of its reduction (or of storing it broadcast back into `out`)."""
  got = cx.b.spread[value.id]
  full, axes = tuple(got[0].type.shape), got[1]
  kept = tuple(n for i, n in enumerate(full) if i not in axes)
  name = cx.named(value, "m")
  raise E.LayoutError(
      f"{name} keeps axes of sizes {kept} around the reduced {_axes_text(axes)}: {math.prod(kept)} elements, too few"
      f" for a register tensor of that shape (a multiple of {hw.WARPGROUP}); it broadcasts back against the {full}"
      f" tile it reduces, but no register tensor holds it {use}", cx.loc, hint=got[2] or _broadcast_hint(
          name, out, full, axes, len(value.type.shape) == len(full)))


def _axes_text(axes) -> str:
  return f"axis {axes[0]}" if len(axes) == 1 else f"axes {tuple(axes)}"


def _broadcast_hint(name, out, full, axes, keepdims) -> str:
  """Storing statistic `name` broadcast back to the tile it reduces, which a register tensor holds."""
  name = name if name.isidentifier() or name.endswith(")") and "(" not in name[:-1] else f"({name})"
  expr = f"{name}[{', '.join('None' if i in axes else ':' for i in range(len(full)))}]" if not keepdims else name
  pick = ", ".join(("0:1" if keepdims else "0") if i in axes else ":" for i in range(len(full)))
  return (f"store it broadcast back, at the tile's shape: give {out} the shape {full} and write {out}[...] ="
          f" ml.broadcast_to({expr}, {full}), then take [{pick}] of the result outside the kernel (free in XLA)")
