"""Scans, sorts and transposes of a small 2-D statistic held as the vector of its elements.

A statistic no register tensor holds (the (8, 40) sum over the leading axis of a (4, 8, 40) tile, frontend/ops/
slab_reduce.py; a (5, 24) one) is held as its (r * c,) vector, typed with its shape (note 85). `ml.cumsum(t, axis=1)`
(or 0), `jnp.cumsum`, `ml.cummax`, `jnp.sort`, `jax.lax.top_k` and `t.T` of one were MG204 at its definition: the
layout pass gave the vector the scan's, sort's or transpose's row-wise layout, which no (r, c) tile of fewer than 128
elements a row takes. Here the vector goes through an SMEM scratch instead, as leading_slabs' rows do: along its
rows, each row is a window of the vector, scanned (or sorted) as a 1-D vector and stored back into a result scratch;
along its columns, the running combination of the rows (each a vector, combined elementwise), each stored. A
transpose gathers the vector's elements in the transpose's order (ops/register_gather.py). The result is the vector
read whole, typed with its shape again: a statistic held as before, which elementwise math, stores and further
reductions take.
"""
from __future__ import annotations

from ..dtypes import DType
from ..types import TensorType, resolve

MAX_LINES = 64          # at most this many rows (or columns) scanned, combined or stored one at a time


def _held(cx, x):
  """(r, c) and the vector of `x`'s elements where x is a 2-D small statistic held as one; else None."""
  from .small_parts import held_vector
  t = getattr(x, "type", None)
  if not isinstance(t, TensorType) or len(t.shape) != 2 or not isinstance(resolve(t.dtype), DType):
    return None
  vec = held_vector(cx, x)
  return None if vec is None else (tuple(t.shape), vec)


def _typed(cx, vec, shape):
  """The vector `vec` typed with `shape` (held as it is: a small statistic)."""
  from .shape import Reshape
  return cx.b.emit(Reshape, vec, loc=cx.loc, types=[TensorType(shape, vec.type.dtype)], names=[cx.name]).result


def held_scan(cx, kind, x, axis, reverse, what, scan):
  """The scan `kind` of `x` along `axis` (0 or 1) where x is a 2-D statistic held as a vector; None otherwise.
  `scan`: ops/scan.scan, for the rows' 1-D scans."""
  from . import elementwise as ew
  from .memory import view
  from .scan import ScanKind
  from .scratches import scratch
  from .small_stores import VECTOR
  from .transfers import load, store
  held = _held(cx, x)
  if held is None:
    return None
  (r, c), vec = held
  if axis == 1 and (c % VECTOR or r > MAX_LINES) or axis == 0 and (c % VECTOR or r > MAX_LINES):
    return None
  name = x.name or "the statistic"
  buf = scratch(cx, (r * c,), vec.type.dtype, f"{name} scan scratch")
  store(cx, buf, vec)
  row = lambda i: load(cx, view(cx, buf, (slice(i * c, (i + 1) * c),), buf.name))
  outs = []
  if axis == 1:
    outs = [scan(cx, kind, row(i), 0, reverse, what) for i in range(r)]
  else:
    op = {ScanKind.SUM: ew.BinOp.ADD, ScanKind.PROD: ew.BinOp.MUL, ScanKind.MAX: ew.BinOp.MAX,
          ScanKind.MIN: ew.BinOp.MIN}.get(kind)
    d = resolve(vec.type.dtype)
    if op is None or d == DType.bool_ or d.bits == 8 or d.bits > 32:
      return None
    acc_d = DType.f32 if d in (DType.f16, DType.bf16) or d.is_float and d.bits == 8 else \
        (DType.u32 if not d.is_signed else DType.i32) if d.is_int and d.bits < 32 and kind in (
            ScanKind.SUM, ScanKind.PROD) else d
    acc, done = None, {}
    for i in (range(r - 1, -1, -1) if reverse else range(r)):
      v = row(i)
      v = v if acc_d == d else ew.astype(cx, v, acc_d)
      acc = v if acc is None else ew.binary(cx, op, acc, v)
      done[i] = acc
    outs = [done[i] if acc_d == d or d.is_int else ew.astype(cx, done[i], d) for i in range(r)]
  out_d = outs[0].type.dtype
  res = scratch(cx, (r * c,), out_d, f"{name} scan result scratch")
  for i, v in enumerate(outs):
    store(cx, view(cx, res, (slice(i * c, (i + 1) * c),), res.name), v)
  return _typed(cx, load(cx, res, None), (r, c))


def held_transpose(cx, x):
  """`x.T` of a 2-D statistic held as a vector: the vector's elements gathered in the transpose's order (element f of
  the (c, r) result is element (f % r) * c + f // r), held as a vector again; None where x is no such statistic."""
  from . import elementwise as ew
  from .elementwise_fns import arange
  from .register_gather import gather_positions
  held = _held(cx, x)
  if held is None:
    return None
  (r, c), vec = held
  f = arange.rule(cx, r * c)
  pos = ew.binary(cx, ew.BinOp.ADD, ew.binary(cx, ew.BinOp.MUL, ew.binary(cx, ew.BinOp.MOD, f, r), c),
                  ew.binary(cx, ew.BinOp.FLOORDIV, f, r))
  return _typed(cx, gather_positions(cx, vec, pos, None), (c, r))


def held_sort(cx, x, descending, what, late_first, sort_tensor):
  """(values, positions) of `x` sorted along its rows where x is a 2-D statistic held as a vector (each row a 1-D
  sort through SMEM, as held_scan's rows); None otherwise. `sort_tensor`: ops/sort.sort_tensor."""
  from .memory import view
  from .scratches import scratch
  from .small_stores import VECTOR
  from .transfers import load, store
  held = _held(cx, x)
  if held is None:
    return None
  (r, c), vec = held
  if c % VECTOR or r > MAX_LINES:
    return None
  name = x.name or "the statistic"
  buf = scratch(cx, (r * c,), vec.type.dtype, f"{name} sort scratch")
  store(cx, buf, vec)
  rows = [sort_tensor(cx, load(cx, view(cx, buf, (slice(i * c, (i + 1) * c),), buf.name)), -1, descending, what,
                      late_first) for i in range(r)]
  out = []
  for k, label in ((0, "values"), (1, "positions")):
    res = scratch(cx, (r * c,), rows[0][k].type.dtype, f"{name} sorted {label} scratch")
    for i, parts in enumerate(rows):
      store(cx, view(cx, res, (slice(i * c, (i + 1) * c),), res.name), parts[k])
    out.append(_typed(cx, load(cx, res, None), (r, c)))
  return tuple(out)
