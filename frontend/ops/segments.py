"""Segment reductions and histograms of register values: `ml.segment_sum`, `ml.segment_max`, `ml.segment_min`
(jax.ops's, which a kernel's `jax.ops.segment_sum(v, ids, num_segments=n)` computes as), `ml.bincount` (jnp's, with
a static `length=`) and `ml.histogram` (Triton's `tl.histogram(x, num_bins, mask=None)`): an MoE router's tokens
per expert, a block's partial sums per segment before one atomic add each, a graph's messages per node.

No op of their own: each segment's result is a reduction over the elements whose id is that segment, a one-hot table
`ids[:, None] == segment[None, :]` (the elements down its rows, up to 128 segments across its columns, a multiple of
32: one per lane of a warp) selecting the data or the reduction's identity, reduced along its rows; more segments
take more such tables, joined. 2-D data `(n, d)` reduces one row of the result a segment (at most 256 segments, each
a select and a reduction of the whole tile: an MoE unpermute's 128 tokens, a graph's 100 nodes; past that, MG003's
hint scatters the rows into the output atomically; probe 57a, it was 64). The ids follow jax's: an id outside [0,
num_segments) is dropped (jax.ops' default mode, a negative one too: no count from the end), `mode="clip"` clamps it
into range; jnp.bincount counts a negative value in bin 0 and drops one past its length; Triton's histogram counts
values in [0, num_bins). An empty segment holds the identity, as jax's: 0 for a sum, the lowest value (-inf) for a
max, the highest for a min. The result has the data's dtype (counts: int32, jnp's default int). A count of segments
no register vector holds (not a multiple of 8: 10 experts) is a padded result where the padded trace takes it
(ops/padded_tiles.py), as ml.top_k's k columns are."""
from __future__ import annotations

import contextlib

from .. import errors as E
from ..dtypes import DType
from ..types import resolve
from . import elementwise as ew
from . import padded_tiles
from .base import builtin, check_register_value, is_tensor, kind_of, named_builtin, shown
from .shape import ReduceKind

_CHUNK = 128          # segments a one-hot table holds across its columns
SEGMENT_ROWS = 256    # segments of 2-D data: one reduction of the whole tile each (probe 57a: was 64)
LOOP_TERMS = 1 << 19  # segments times elements of 2-D data past which the segments are a run-time loop (probe 58a)


def _count(cx, n, what, param, example):
  """A static number of segments or bins (it sets the result's shape)."""
  if n is None:
    raise E.KernelTypeError(f"{what} needs {param}=: it sets the result's shape, and jax's default (the largest"
                            f" id, plus one) depends on the data", cx.loc,
                            hint=f"pass it as a Python int or a constexpr: {example} (ids past it are dropped)")
  if not isinstance(n, int) or isinstance(n, bool) or n < 1:
    got = "a run-time value" if hasattr(n, "type") else shown(n)
    raise E.KernelTypeError(f"{what} takes {param} as a static int of at least 1 (it sets the result's shape), got"
                            f" {got}", cx.loc, hint=f"pass a Python int or a constexpr: {example}")
  return n


def _ids(cx, ids, n, what, name, clip=False):
  """int32 positions of 1-D integer `ids` among n segments, -1 for those dropped (outside [0, n), unless `clip`)."""
  check_register_value(cx, ids, what)
  d = resolve(ids.type.dtype) if is_tensor(ids) else None
  if d is None or len(ids.type.shape) != 1 or not isinstance(d, DType) or not d.is_int:
    got = f"{kind_of(ids)}" + (f" of shape {tuple(ids.type.shape)} and dtype {d}" if is_tensor(ids) else "")
    hint = (f"convert them: {cx.named(ids, name)}.astype(jnp.int32)" if is_tensor(ids) and len(ids.type.shape) == 1
            else f"pass them as a vector: {cx.named(ids, name)}.reshape(-1) (and the data alike)" if is_tensor(ids)
            else f"read them into registers as a vector ({name}[...])")
    raise E.KernelTypeError(f"{what} takes {name} as a 1-D integer tensor, got {got}", cx.loc, hint=hint)
  C, B = ew.CmpOp, ew.BinOp
  if clip:
    ids = ew.binary(cx, B.MIN, ew.binary(cx, B.MAX, ids, 0), n - 1) if d.is_signed else ew.binary(cx, B.MIN, ids, n - 1)
  keep = ew.compare(cx, C.LT, ids, n)
  if d.is_signed:
    keep = ew.binary(cx, B.AND, keep, ew.compare(cx, C.GE, ids, 0))
  pos = ew.astype(cx, ew.where_(cx, keep, ids, 0), DType.i32) if d != DType.i32 else ids
  return ew.where_(cx, keep, pos, -1)


PROD = "prod"         # segment_prod: no ReduceKind of its own, the last row of a running product (ml.cumprod's)


def _reduce_rows(cx, kind, table, keep):
  """The reduction (kind) of the 2-D `table` along its rows (axis 0): a product is the last row of the running
  one, ml.cumprod(table, axis=0)[-1] (jnp.prod's form)."""
  from .reduce import reduce
  from .scan import ScanKind, scan
  from .shape import expand
  if kind != PROD:
    return reduce(cx, kind, table, 0, keep)
  run = scan(cx, ScanKind.PROD, table, 0, False, "ml.segment_prod")
  return expand(cx, run, (slice(-1, None) if keep else -1, slice(None)))


def _identity(kind, d):
  from .reduce import extreme_identity
  if kind == PROD:
    return True if d == DType.bool_ else 1.0 if d.is_float else 1
  if kind == ReduceKind.SUM:
    return False if d == DType.bool_ else 0.0 if d.is_float else 0
  return extreme_identity(kind, d)


def _table(cx, kind, data, pos, n, what):
  """The reduction (kind) of `data`'s elements (1-D, or the rows of 2-D data) at each of n segments `pos` names."""
  from .base import BUILTINS
  from .shape import concatenate, expand
  d = resolve(data.type.dtype)
  ident = _identity(kind, d)
  col = expand(cx, pos, (slice(None), None))                       # (N, 1)
  if len(data.type.shape) == 2 and (out := _looped(cx, kind, data, pos, n, ident)) is not None:
    return out if resolve(out.type.dtype) == d else ew.astype(cx, out, d)
  if len(data.type.shape) == 2:
    rows = [_reduce_rows(cx, kind, ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, col, s), data, ident), True)
            for s in range(n)]
    out = rows[0] if n == 1 else concatenate.rule(cx, rows, 0)
    return out if resolve(out.type.dtype) == d else ew.astype(cx, out, d)
  vals = expand(cx, data, (slice(None), None))
  up = -(-n // 32) * 32
  parts = []
  for c0 in range(0, up, _CHUNK):
    w = min(_CHUNK, up - c0)
    seg = BUILTINS["arange"].rule(cx, w)
    seg = expand(cx, seg if c0 == 0 else ew.binary(cx, ew.BinOp.ADD, seg, c0), (None, slice(None)))
    parts.append(_reduce_rows(cx, kind, ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, col, seg), vals, ident), False))
  out = parts[0] if len(parts) == 1 else concatenate.rule(cx, parts, 0)
  if resolve(out.type.dtype) != d:
    out = ew.astype(cx, out, d)
  return _first(cx, out, n, what)


def _looped(cx, kind, data, pos, n, ident):
  """The (n, d) rows of a 2-D segment reduction of LOOP_TERMS or more (segments times the tile's elements) as a
  run-time loop over the segments (form_helpers.segment_rows: each trip's row stored into an SMEM scratch at its
  offset, read back whole), or None: fewer terms (their rows unrolled, as before: a few segments cost less so), a
  tile computed padded or of bools, a result no register tile holds as it is, or no traced call to trace the loop
  in."""
  from ..form_helpers import segment_rows
  from .reduce import max_, min_, sum_
  d = resolve(data.type.dtype)
  rows, cols = data.type.shape
  if n * rows * cols < LOOP_TERMS or d == DType.bool_ or cx.calls is None or (n * cols) % 128 or tuple(
      padded_tiles.true_shape(cx.b, data)) != (rows, cols):
    return None                   # ((n, cols) no register tile holds: the rows joined, padded where they go)
  reduce = {ReduceKind.SUM: sum_, ReduceKind.MAX: max_, ReduceKind.MIN: min_}.get(kind)
  return cx.invoke(segment_rows, [data, pos, n, ident, reduce])


def _first(cx, out, n, what):
  """The first n of the segments' vector `out`: padded to a multiple of 8 (its own length n) where n is not one,
  as ml.top_k keeps its k columns (in the padded trace; before it, MG204, which starts that trace)."""
  from .shape import expand, index_through_smem
  up = -(-n // 8) * 8
  have = out.type.shape[0]
  padded = up != n
  if padded and getattr(cx.b, "pad_tiles", None) is None:
    raise E.LayoutError(
        f"{what} of {n} segments gives a ({n},) vector, which no register tensor holds (a 1-D vector holds a"
        f" multiple of 8 elements)", cx.loc,
        hint=f"take {up} segments (ids past {n - 1} are dropped the same) and store the first {n} under a mask:"
             f" out.at[ml.ds(0, {up})].store(s, mask=ml.arange({up}) < {n}) (the window may run past out's end:"
             f" masked elements are never written)")
  if up != have:
    with padded_tiles.allowed(cx) if padded else contextlib.nullcontext():
      out = (expand if up % 32 == 0 else index_through_smem)(cx, out, (slice(0, up),))
  if padded:
    cx.b.pad_tiles[out.id] = (n,)
  return out


def _data(cx, data, pos, what, name="data"):
  check_register_value(cx, data, what)
  if not is_tensor(data) or len(data.type.shape) not in (1, 2) or data.type.shape[0] != pos.type.shape[0]:
    got = kind_of(data) + (f" of shape {tuple(data.type.shape)}" if is_tensor(data) else "")
    raise E.KernelTypeError(f"{what} takes {name} as a 1-D or 2-D tensor of one element or row an id"
                            f" ({pos.type.shape[0]}), got {got}", cx.loc,
                            hint="pass the data the ids label: a vector of their length, or a tile of their rows")


def _modes(cx, mode, what):
  """Whether jax's scatter mode clips the ids (None and 'drop', 'fill', 'promise_in_bounds' drop them)."""
  name = str(getattr(mode, "name", mode)).lower() if mode is not None else "fill_or_drop"
  if name in ("clip",):
    return True
  if name in ("drop", "fill", "fill_or_drop", "promise_in_bounds"):
    return False
  raise E.KernelTypeError(f"{what} takes mode as one of jax's scatter modes ('drop', 'clip', 'promise_in_bounds'),"
                          f" got {shown(mode)}", cx.loc, hint="leave it out: ids outside the segments are dropped")


def _segment(kind, name):
  def rule(cx, data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
           bucket_size=None, mode=None):
    what = f"ml.{name}"
    n = _count(cx, num_segments, what, "num_segments", f"{what}(data, ids, num_segments=16)")
    clip = _modes(cx, mode, what)
    pos = _ids(cx, segment_ids, n, what, "segment_ids", clip)
    _data(cx, data, pos, what)
    if len(data.type.shape) == 2 and n > SEGMENT_ROWS:
      raise E.KernelTypeError(
          f"{what} of 2-D data reduces the tile once per segment, at most {SEGMENT_ROWS}; got num_segments={n}",
          cx.loc,
          hint=f"scatter the rows atomically, ml.atomic_{kind.value if kind != ReduceKind.SUM else 'add'}"
               f"(out.at[ids, :], data), into an output of {n} rows (ids outside it masked off)" if kind != PROD else
               f"take the segments {SEGMENT_ROWS} at a time: ml.segment_prod(data, ids - s,"
               f" num_segments={SEGMENT_ROWS}) for s in"
               f" ml.static_range(0, {n}, {SEGMENT_ROWS}) (ids outside each range are dropped), stored into their rows")
    return _table(cx, kind, data, pos, n, what)
  word = getattr(kind, "value", kind)
  return named_builtin(rule, name, f"jax.ops.{name}(data, segment_ids, num_segments): the {word} of the elements"
                                   f" (or rows) of each segment, ids outside [0, num_segments) dropped, an empty"
                                   f" segment the {word}'s identity.")


segment_sum = _segment(ReduceKind.SUM, "segment_sum")
segment_max = _segment(ReduceKind.MAX, "segment_max")
segment_min = _segment(ReduceKind.MIN, "segment_min")
segment_prod = _segment(PROD, "segment_prod")


@builtin
def bincount(cx, x, weights=None, minlength=0, *, length=None):
  """jnp.bincount(x, weights, length=n): how many of the integers `x` (or the sum of their weights) fall in each
  of n bins; a negative value counts in bin 0, one of n or more is dropped (jnp's)."""
  if length is None:
    raise E.KernelTypeError("ml.bincount needs length=: it sets the result's shape, and jnp's default (the largest"
                            " value, plus one) depends on the data", cx.loc,
                            hint="pass the number of bins, ml.bincount(ids, length=8) (values past it are dropped);"
                                 " or count into an output, ml.atomic_add(counts.at[ids], ml.full(ids.shape, 1,"
                                 " jnp.int32)) into a zeroed output (one updated only by atomics starts at 0)")
  n = _count(cx, length, "ml.bincount", "length", "ml.bincount(ids, length=8)")
  check_register_value(cx, x, "ml.bincount")
  if is_tensor(x) and isinstance(resolve(x.type.dtype), DType) and resolve(x.type.dtype).is_signed:
    x = ew.binary(cx, ew.BinOp.MAX, x, 0)                  # jnp's clip(x, 0)
  pos = _ids(cx, x, n, "ml.bincount", "x")
  data = ew.full_(cx, tuple(pos.type.shape), 1, DType.i32) if weights is None else weights
  _data(cx, data, pos, "ml.bincount", "weights")
  if len(data.type.shape) != 1:
    raise E.KernelTypeError(f"ml.bincount takes weights as one per value, shape {tuple(pos.type.shape)}, got"
                            f" {tuple(data.type.shape)}", cx.loc, hint="pass a vector of weights, one per value")
  return _table(cx, ReduceKind.SUM, data, pos, n, "ml.bincount")


@builtin
def histogram(cx, x, num_bins, mask=None):
  """Triton's tl.histogram(x, num_bins, mask=None): int32 counts of the integers `x` in bins 0 to num_bins - 1
  (values outside them, and where `mask` is off, are not counted)."""
  n = _count(cx, num_bins, "ml.histogram", "num_bins", "ml.histogram(ids, 16)")
  check_register_value(cx, x, "ml.histogram")
  d = resolve(x.type.dtype) if is_tensor(x) else None
  if not isinstance(d, DType) or not d.is_int:
    raise E.KernelTypeError(f"ml.histogram counts integers (bins of width 1 from 0), got {kind_of(x)}"
                            + (f" of {d}" if d is not None else ""), cx.loc,
                            hint="compute each value's bin first, e.g. ml.floor((v - lo) / width).astype(jnp.int32)")
  pos = _ids(cx, x, n, "ml.histogram", "x")
  ones = ew.full_(cx, tuple(pos.type.shape), 1, DType.i32)
  if mask is not None:
    check_register_value(cx, mask, "ml.histogram")
    if not is_tensor(mask) or tuple(mask.type.shape) != tuple(pos.type.shape):
      raise E.KernelTypeError(f"ml.histogram takes mask as a boolean tensor of x's shape {tuple(pos.type.shape)}, got"
                              f" {kind_of(mask)}" + (f" of shape {tuple(mask.type.shape)}" if is_tensor(mask) else ""),
                              cx.loc, hint="ml.histogram(x, n, mask=offs < n_elements)")
    ones = ew.where_(cx, ew.truth(cx, mask), ones, 0)
  return _table(cx, ReduceKind.SUM, ones, pos, n, "ml.histogram")
