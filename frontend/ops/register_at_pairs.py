"""jnp's functional update of a 2-D register tensor at paired vectors of indices, `p.at[rows, cols].op(y)` (probe 57f;
it was MG003, whose hint wrote a select that did not broadcast): a cross-entropy's gradient written as JAX code writes
it, `jax.nn.softmax(x).at[jnp.arange(n), labels].add(-1.0)`, a one-hot `jnp.zeros((n, v)).at[jnp.arange(n), y].set(1.0)`.
Element k of the update goes to (rows[k], cols[k]); the indices follow jnp's: a negative one counts from the end
once, one outside its axis is dropped (so a label of -100 below -v, an ignore index, updates nothing; one of -100
within a wider row counts from its end, as jnp's). Where `rows` is the tensor's own row index (an `ml.arange(m)` of
its m rows, `jnp.arange(x.shape[0])`), each row takes its one update by a select in registers; other rows go through
ops/register_at.py's row updates (a segment reduction of each update's row, the column's element alone, at most
segments.SEGMENT_ROWS rows, duplicates combined as jnp's). `.get()` is the gather `v[rows, cols]`, with mode="fill"'s fill_value outside."""
from __future__ import annotations

import numpy as np

from .. import errors as E
from ..dtypes import DType
from ..types import resolve
from . import elementwise as ew
from .base import Builtin, is_tensor, is_value
from .segments import SEGMENT_ROWS as _ROWS     # rows a segment reduction fills (ops/register_at.py's)


def _own_rows(cx, rows, m) -> bool:
  """Whether `rows` is [0, 1, ..., m): an ml.arange of the tensor's m rows (jnp.arange's too)."""
  from .elementwise_ops import Arange
  op = cx.b.defining(rows) if hasattr(cx.b, "defining") else None
  return isinstance(op, Arange) and tuple(rows.type.shape) == (m,) and not (
      getattr(cx.b, "pad_tiles", None) is not None and rows.id in cx.b.pad_tiles)


def _wrapped(cx, i, n, wrap):
  """jnp's index: a negative one counts from the end once (where `wrap`); one outside [0, n) matches nothing."""
  if wrap and resolve(i.type.dtype).is_signed:
    i = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, i, 0), ew.binary(cx, ew.BinOp.ADD, i, n), i)
  return i


def _identity(op, d):
  if op == "add":
    return 0
  if op in ("mul", "multiply"):
    return 1
  lo = float("-inf") if d.is_float else int(np.iinfo(d.np).min)
  hi = float("inf") if d.is_float else int(np.iinfo(d.np).max)
  return lo if op in ("max", "set") else hi


def _pair_update(name):
  def rule(cx, at, values, *, mode=None, indices_are_sorted=False, unique_indices=False, wrap_negative_indices=True):
    from .elementwise_fns import arange
    from .register_at import _UPDATES, RegisterAtIndex, _texts
    from .segments import segment_max
    from .shape import expand
    v, (rows, cols) = at.at.value, at.items
    (m, n), d = tuple(v.type.shape), resolve(v.type.dtype)
    from .padded_tiles import true_shape
    if mode not in (None, "drop", "fill", "promise_in_bounds") or d == DType.bool_ or tuple(
        true_shape(cx.b, v)) != (m, n):
      raise at.at.error()          # (a tile computed padded: its own columns are not the lanes' count)
    k = rows.type.shape[0]
    y = values
    if is_value(y) and is_tensor(y):
      if tuple(y.type.shape) not in ((k,), (1,)):
        t, _, r = _texts(cx.text)
        raise E.ShapeMismatchError(
            f"{t}: the update {r} of shape {tuple(y.type.shape)} does not broadcast to the shape ({k},) of the"
            f" elements it updates", cx.loc, hint=f"give one update an index pair: a ({k},) vector, or a number")
      y = expand(cx, y, (slice(None), None))
    elif not is_value(y) and not isinstance(y, (int, float, bool, np.number)):
      raise at.at.error()
    if is_value(y) and resolve(y.type.dtype) != d:
      y = ew.astype(cx, y, d)                 # (jnp converts the updates to the tensor's dtype)
    cols = _wrapped(cx, cols, n, wrap_negative_indices)
    hit = ew.compare(cx, ew.CmpOp.EQ, expand(cx, arange.rule(cx, n), (None, slice(None))),
                     expand(cx, cols, (slice(None), None)))          # (k, n): each update's column
    op = {"add": ew.BinOp.ADD, "max": ew.BinOp.MAX, "min": ew.BinOp.MIN, "mul": ew.BinOp.MUL,
          "multiply": ew.BinOp.MUL}.get(name)
    if k == m and _own_rows(cx, rows, m):     # row i's update is the i-th: a select in registers
      new = y if op is None else ew.binary(cx, op, v, y)
      out = ew.where_(cx, hit, new, v)
      return ew.astype(cx, out, d) if resolve(out.type.dtype) != d else out
    if m > _ROWS:
      t, i, r = _texts(cx.text)
      j = _second(cx.text)
      raise E.KernelTypeError(
          f"{t} updates {m} rows of a register tile at paired index vectors: in registers, at most {_ROWS} (one"
          f" reduction of the updates a row), unless the rows are the tile's own, ml.arange({m})", cx.loc,
          hint=f"where each row takes the update of its own index, index the rows with ml.arange({m}) (a select a"
               f" row); else scatter into the output atomically, ml.atomic_{_ATOMIC.get(name, 'add')}(out.at[{i},"
               f" {j}], {r})" if name in _ATOMIC else
               f"where each row takes the update of its own index, index the rows with ml.arange({m}) (a select a"
               f" row); else update {_ROWS} rows at a time")
    rowwise = RegisterAtIndex(at.at, rows)     # (k, n) rows of updates, the identity off each one's column
    if name != "set":
      upd = ew.where_(cx, hit, y, _identity(name, d))
      return _UPDATES[name].rule(cx, rowwise, upd, wrap_negative_indices=wrap_negative_indices)
    r = _wrapped(cx, rows, m, wrap_negative_indices)
    got = segment_max.rule(cx, ew.where_(cx, hit, y, _identity("set", d)), r, num_segments=m)
    count = segment_max.rule(cx, ew.astype(cx, hit, DType.i32), r, num_segments=m)
    return ew.where_(cx, ew.compare(cx, ew.CmpOp.GT, count, 0), ew.astype(cx, got, d), v)
  rule.__name__ = name
  rule.__doc__ = f"jnp's v.at[rows, cols].{name}(y) of a 2-D register tensor v at paired index vectors."
  return Builtin(rule, f"at.{name}")


def _pair_get(cx, at, *, mode=None, fill_value=None, indices_are_sorted=False, unique_indices=False):
  """jnp's v.at[rows, cols].get(): the gather v[rows, cols]; mode="fill" gives fill_value (NaN, the lowest signed or
  largest unsigned integer, True) where a pair lies outside the tensor."""
  from .register_gather import register_gather
  v, (rows, cols) = at.at.value, at.items
  if mode not in (None, "promise_in_bounds", "clip", "fill", "drop") or fill_value is not None and mode not in (
      "fill", "drop"):
    raise at.at.error()
  got = register_gather(cx, v, (rows, cols), cx.name)
  if got is None:
    raise at.at.error()
  if mode not in ("fill", "drop"):
    return got
  d = resolve(v.type.dtype)
  if fill_value is None:
    fill_value = True if d == DType.bool_ else float("nan") if d.is_float else \
        int(np.iinfo(d.np).min if d.is_signed else np.iinfo(d.np).max)
  inside = None
  for i, n in zip((rows, cols), v.type.shape):
    c = ew.compare(cx, ew.CmpOp.LT, i, n)
    if resolve(i.type.dtype).is_signed:
      c = ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.GE, i, -n), c)
    inside = c if inside is None else ew.binary(cx, ew.BinOp.AND, inside, c)
  return ew.where_(cx, inside, got, fill_value)


_ATOMIC = {"add": "add", "max": "max", "min": "min"}


def _second(text) -> str:
  """The column index of `v.at[rows, cols].op(y)` as written; `cols` where the text is not so written."""
  import ast
  try:
    return ast.unparse(ast.parse((text or "").strip(), mode="eval").body.func.value.slice.elts[1])
  except (SyntaxError, AttributeError, IndexError):
    return "cols"


PAIR_UPDATES = {name: _pair_update(name) for name in ("set", "add", "max", "min", "mul", "multiply")}
PAIR_GET = Builtin(_pair_get, "at.get")
