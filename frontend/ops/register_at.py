"""jnp's functional scatter into a register tensor at a vector of indices, `acc.at[ids].add(rows)`: an MoE
unpermute adding each expert's weighted rows back into their tokens (a token picked twice adds twice), a
histogram of register values, `counts.at[ids].add(1)`. Each is a segment reduction of the updates
(ops/segments.py) combined with the tensor: `.add` is `acc + ml.segment_sum(y, ids, n)`, `.max` / `.min` the
maximum / minimum with `ml.segment_max` / `segment_min`, `.mul` / `.multiply` the product with `ml.segment_prod`,
`.set` the updates where an index names an element (the inverse of a permutation, `inv.at[order].set(ml.arange(n))`;
where an index repeats, jnp keeps one of its updates, unspecified which: here the largest, `ml.segment_max`).
The ids follow jnp's: a negative one counts from the end once, one outside [-n, n) is dropped. An index of single
positions or static ranges, a static or run-time integer or a slice of static bounds for each axis (`ys.at[t].set(h)`
of a recurrence collecting its states, `v.at[:, 0].set(0.0)`, `v.at[1:-1].add(1.0)`), is the select by index the
MG003 hint wrote (probe 51i); a range's update by values of its own shape (`v.at[2:4].set(v[:2])`, a shift) is
padded to the tensor's shape first (probe 53b). Other indices and updates keep the error `acc.at` had."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import resolve
from . import elementwise as ew
from .base import Builtin, is_tensor, is_value
from .segments import SEGMENT_ROWS     # rows of a 2-D tensor a segment reduction fills


class RegisterAt:
  """`v.at` of a register tensor `v`; `error()` is the error it was before (for the updates it does not take)."""
  def __init__(self, value, error):
    self.value, self.error = value, error

  def index(self, index, cx=None):
    items = index if isinstance(index, tuple) else (index,)
    if cx is not None:
      _float_index(cx, items)
    if _point(items, self.value):
      return RegisterAtIndex(self, None, items + (slice(None),) * (len(self.value.type.shape) - len(items)))
    if _paired(items, self.value):
      return RegisterAtIndex(self, None, items, paired=True)
    ids, rest = items[0], items[1:]
    d = resolve(ids.type.dtype) if is_value(ids) and is_tensor(ids) else None
    if not (isinstance(d, DType) and d.is_int and len(ids.type.shape) == 1 and len(self.value.type.shape) in (1, 2)
            and len(items) <= len(self.value.type.shape)
            and all(s == slice(None) for s in rest)):
      raise self.error()
    return RegisterAtIndex(self, ids)


class RegisterAtIndex:
  """`v.at[ids]` of a register tensor at a vector of indices along its first axis; `v.at[t]`, `v.at[:, j]` at
  `items`, a static or run-time integer index (or `:`) for each axis, where `ids` is None."""
  def __init__(self, at, ids, items=None, paired=False):
    self.at, self.ids, self.items, self.paired = at, ids, items, paired

  def __getattr__(self, attr):
    if attr in ("get", *_UPDATES) and self.__dict__.get("paired"):
      from ..calls import _Method
      from .register_at_pairs import PAIR_GET, PAIR_UPDATES
      return _Method(PAIR_GET if attr == "get" else PAIR_UPDATES[attr], self)
    if attr == "get":          # jnp's v.at[idx].get(): v[idx] (probe 53b; it was MG003)
      from ..calls import _Method
      return _Method(_GET, self)
    if attr in _UPDATES:
      from ..calls import _Method
      return _Method(_UPDATES[attr] if self.ids is not None else _POINT_UPDATES[attr], self)
    raise self.at.error()


def _float_index(cx, items):
  """A float index, `v.at[v[0, 0]]` or `v.at[1.0]`, is a mistake (jnp's TypeError, "Indexer must have integer or
  boolean type"): MG003 saying so, as `v[v[0, 0]]` does (it was "a register tensor has no attribute 'at'",
  probe 51j)."""
  from ..types import dtype_name
  from .elementwise_checks import method_on
  for i in items:
    d = resolve(i.type.dtype) if is_value(i) else None
    if isinstance(i, float) or isinstance(d, DType) and d.is_float:
      text = cx.named(i, "") if is_value(i) else repr(i)
      what = dtype_name(d) if d is not None else "a Python float"
      name = (cx.text or "v.at").split(".at[")[0]
      raise E.KernelTypeError(
          f"an index of {name}.at must be an integer, got {text or 'a float'} ({what})", cx.loc,
          hint=f"convert it: {method_on(text or 'i')}.astype(jnp.int32)" if is_value(i) else
               f"index with an int: {name}.at[{int(i) if i == int(i) else 'i'}]")


def _paired(items, v) -> bool:
  """Whether `items` are two 1-D integer tensors of one length indexing a 2-D register tensor `v` (jnp's paired
  advanced index, `p.at[jnp.arange(n), labels].add(-1.0)`: a cross-entropy's gradient; probe 57f)."""
  from ..types import TensorType
  if not (isinstance(v.type, TensorType) and len(v.type.shape) == 2 and len(items) == 2):
    return False
  ok = lambda i: is_value(i) and is_tensor(i) and len(i.type.shape) == 1 and isinstance(
      d := resolve(i.type.dtype), DType) and d.is_int
  return ok(items[0]) and ok(items[1]) and items[0].type.shape == items[1].type.shape


def _point(items, v) -> bool:
  """Whether `items` index a register tensor `v` at single positions or static ranges: each a Python int or a
  run-time integer scalar, or a slice of static bounds, not all `:`, no more items than axes (jnp's
  `ys.at[t].set(h)`, `v.at[:, 0].add(y)`, `v.at[1:-1].add(1.0)`)."""
  from ..types import TensorType
  rank = len(v.type.shape)
  is_index = lambda i: isinstance(i, int) and not isinstance(i, bool) or is_value(i) and not is_tensor(i) and (
      isinstance(d := resolve(i.type.dtype), DType) and d.is_int)
  static = lambda b: b is None or isinstance(b, int) and not isinstance(b, bool)
  ranged = lambda i: isinstance(i, slice) and static(i.start) and static(i.stop) and i.step in (None, 1)
  return (0 < len(items) <= rank and isinstance(v.type, TensorType)
          and all(is_index(i) or ranged(i) for i in items) and any(i != slice(None) for i in items))


def _point_update(name):
  def rule(cx, at, values, *, mode=None, indices_are_sorted=False, unique_indices=False, wrap_negative_indices=True):
    from .elementwise_fns import arange
    from .padded_tiles import true_shape
    from .shape import broadcast_to_shape, expand
    v, items = at.at.value, at.items
    shape, d = tuple(v.type.shape), resolve(v.type.dtype)
    own = tuple(true_shape(cx.b, v))
    # (a tensor computed padded, x[...] of a (100,) input traced as 104 lanes: single positions only, by a number or
    # scalar, negative ones counted from its own end; its padded lanes never equal them, so they stay padding)
    points = all(not isinstance(i, slice) for i in items) and not (is_value(values) and is_tensor(values))
    if own != shape and not points or mode not in (None, "drop", "fill", "promise_in_bounds", "clip"):
      raise at.at.error()          # (a padded tensor's range; a mode jnp's update at one index does not take)
    clip = mode == "clip"          # (jnp's clip: the index clamped into the axis, never dropped; probe 57b)
    mask, kept, sub = None, [], []
    cond = lambda m, c: c if m is None else ew.binary(cx, ew.BinOp.AND, m, c)
    def along(k, n):
      r = arange.rule(cx, n)
      if own[k] != n:              # (the lanes of a padded axis: its own part the first own[k], as its reads')
        cx.b.pad_tiles[r.id] = (own[k],)
      return r if len(shape) == 1 else expand(cx, r, tuple(slice(None) if a == k else None for a in range(len(shape))))
    bounds = []                    # (lo, hi) of each kept axis: where a range's own update goes
    for k, (i, n) in enumerate(zip(items, shape)):
      if isinstance(i, slice):     # (static bounds, as Python's: negative from the end, clamped)
        lo, hi, _ = i.indices(n)
        kept.append(k)
        sub.append(max(0, hi - lo))
        bounds.append((lo, max(lo, hi)))
        if lo > 0:
          mask = cond(mask, ew.compare(cx, ew.CmpOp.GE, along(k, n), lo))
        if hi < n:
          mask = cond(mask, ew.compare(cx, ew.CmpOp.LT, along(k, n), hi))
        continue
      m = own[k]                   # (its own length: a padded one's lanes past it are padding)
      if isinstance(i, int):       # (static: jnp's negative index counts from the end once; outside, dropped)
        i = i + m if i < 0 and wrap_negative_indices else i
        i = min(max(i, 0), m - 1) if clip else i
        i = -1 if i >= m else i    # (past its own end: dropped, never a padding lane)
      else:
        if wrap_negative_indices:
          i = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, i, 0), ew.binary(cx, ew.BinOp.ADD, i, m), i)
        if clip:
          i = ew.binary(cx, ew.BinOp.MIN, ew.binary(cx, ew.BinOp.MAX, i, 0), m - 1)
        if resolve(i.type.dtype) != DType.i32:     # (a uint32 or int64 index, probe 57b: it was MG104 at the
          inside = ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.GE, i, 0),     # compare with the positions)
                             ew.compare(cx, ew.CmpOp.LT, i, m))
          i = ew.where_(cx, inside, ew.astype(cx, i, DType.i32), -1)      # (outside: dropped, as before)
      if not isinstance(i, int) and m != n:
        i = ew.where_(cx, ew.compare(cx, ew.CmpOp.GE, i, m), -1, i)
      mask = cond(mask, ew.compare(cx, ew.CmpOp.EQ, along(k, n), i))
    sub = tuple(sub)                  # the shape of v[items], which the update broadcasts to
    full = tuple(shape[k] for k in kept)
    y = values
    if mask is None:                  # (`.at[0:n]`: every element)
      mask = ew.full_(cx, (1,) * len(shape), True, DType.bool_)
    if is_value(y) and is_tensor(y):
      ys = tuple(y.type.shape)
      if not (len(ys) > len(sub) or any(a not in (1, b) for a, b in zip(ys[::-1], sub[::-1]))) and any(
          a not in (1, b) for a, b in zip(ys[::-1], full[::-1])):
        # rows of a range inside the tensor, `v.at[2:4].set(v[:2])` (probe 53b): the update stretched to the
        # range's shape, padded to the tensor's along each ranged axis so its elements sit where they go
        from .stacking import pad
        if ys != sub:
          y = broadcast_to_shape(cx, y, sub)
        y = pad.rule(cx, y, tuple((lo, n - hi) for (lo, hi), n in zip(bounds, full)))
        ys = tuple(y.type.shape)
      elif len(ys) > len(sub) or any(a not in (1, b) for a, b in zip(ys[::-1], sub[::-1])):
        t, _, r = _texts(cx.text)
        raise E.ShapeMismatchError(
            f"{t}: the update {r} of shape {ys} does not broadcast to the shape {sub} of the elements it updates",
            cx.loc,
            hint=f"give an update of shape {sub}, or one that broadcasts to it (a number, or a size-1 axis)")
      if ys != full:
        y = broadcast_to_shape(cx, y, full)
      if len(sub) < len(shape):
        y = expand(cx, y, tuple(slice(None) if a in kept else None for a in range(len(shape))))
    if is_value(y) and resolve(y.type.dtype) != d:
      y = ew.astype(cx, y, d)                 # (jnp converts the updates to the tensor's dtype)
    op = {"add": ew.BinOp.ADD, "max": ew.BinOp.MAX, "min": ew.BinOp.MIN, "mul": ew.BinOp.MUL,
          "multiply": ew.BinOp.MUL}.get(name)
    if op is ew.BinOp.ADD and d == DType.bool_:
      op = ew.BinOp.OR
    new = y if op is None else ew.binary(cx, op, v, y)
    out = ew.where_(cx, mask, new, v)
    if tuple(out.type.shape) != shape:
      out = broadcast_to_shape(cx, out, shape)
    return ew.astype(cx, out, d) if resolve(out.type.dtype) != d else out
  rule.__name__ = name
  rule.__doc__ = f"jnp's v.at[t].{name}(y) of a register tensor v at single positions: a select by index."
  return Builtin(rule, f"at.{name}")


def _update(kind, name):
  def rule(cx, at, values, *, mode=None, indices_are_sorted=False, unique_indices=False, wrap_negative_indices=True):
    from .segments import segment_max, segment_min, segment_prod, segment_sum
    from .shape import broadcast_to_shape
    from .padded_tiles import true_shape
    v, ids = at.at.value, at.ids
    n, d = true_shape(cx.b, v)[0], resolve(v.type.dtype)      # (jnp.zeros((300,)): padded to 304, its own 300)
    if mode not in (None, "drop", "fill", "promise_in_bounds", "clip"):
      raise E.KernelTypeError(f"{cx.text or 'this update'}: mode={mode!r} is not taken (ids outside the tensor are"
                              f" dropped, jnp's default)", cx.loc, hint=f"leave mode out: .at[ids].{name}(y)")
    if wrap_negative_indices:
      ids = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, ids, 0), ew.binary(cx, ew.BinOp.ADD, ids, n), ids)
    if mode == "clip":             # (jnp's clip: each id clamped into the tensor, never dropped; probe 57b)
      ids = ew.binary(cx, ew.BinOp.MIN, ew.binary(cx, ew.BinOp.MAX, ids, 0), n - 1)
    shape = tuple(ids.type.shape) + tuple(true_shape(cx.b, v)[1:])
    y = values if is_value(values) and is_tensor(values) else ew.full_(cx, shape, values, d)
    if tuple(y.type.shape) != shape:
      y = broadcast_to_shape(cx, y, shape)
    if resolve(y.type.dtype) != d:
      y = ew.astype(cx, y, d)                 # (jnp converts the updates to the tensor's dtype)
    if len(v.type.shape) == 2 and n > SEGMENT_ROWS:
      t, i, r = _texts(cx.text)
      raise E.KernelTypeError(
          f"{t} updates {n} rows of a register tile at a vector of indices: in registers, at most"
          f" {SEGMENT_ROWS} (one reduction of the updates a row)", cx.loc,
          hint=f"scatter the rows into the output atomically, ml.atomic_{_ATOMIC[kind]}(out.at[{i}, :], {r}) (an"
               f" output updated only by atomics starts at 0; ids outside it are dropped)" if kind in _ATOMIC else
               f"update {SEGMENT_ROWS} rows at a time: acc[s:s + {SEGMENT_ROWS}].at[{i} - s].{name}({r}) for s in"
               f" ml.static_range(0, {n}, {SEGMENT_ROWS})")
    if kind == "set":           # where an index repeats jnp keeps one of its updates, unspecified which: the largest
      got = segment_max.rule(cx, y, ids, num_segments=n)
      ones = ew.full_(cx, tuple(ids.type.shape) + (1,) * (len(shape) - 1), 1, DType.i32)
      hit = segment_max.rule(cx, broadcast_to_shape(cx, ones, shape) if len(shape) > 1 else ones, ids, num_segments=n)
      return ew.where_(cx, ew.compare(cx, ew.CmpOp.GT, hit, 0), got, v)
    seg = {"sum": segment_sum, "max": segment_max, "min": segment_min, "prod": segment_prod}[kind]
    got = seg.rule(cx, y, ids, num_segments=n)
    op = {"sum": ew.BinOp.ADD, "max": ew.BinOp.MAX, "min": ew.BinOp.MIN, "prod": ew.BinOp.MUL}[kind]
    if d == DType.bool_ and kind == "sum":
      op = ew.BinOp.OR
    return ew.binary(cx, op, v, got)
  rule.__name__ = name
  rule.__doc__ = f"jnp's v.at[ids].{name}(y) of a register tensor v: ml.segment_{kind} of y at ids, combined with v."
  return Builtin(rule, f"at.{name}")


def _texts(text):
  """(the call, its indices, its updates) as written, `acc.at[tok[...]].add(rows)`; generic names where the text
  is not so written."""
  import ast
  try:
    call = ast.parse((text or "").strip(), mode="eval").body
    sub = call.func.value
    items = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    return ast.unparse(call), ast.unparse(items[0]), ast.unparse(call.args[0])
  except (SyntaxError, AttributeError, IndexError):
    return text or "acc.at[ids]", "ids", "rows"


_ATOMIC = {"sum": "add", "max": "max", "min": "min"}

_UPDATES = {"set": _update("set", "set"), "add": _update("sum", "add"), "max": _update("max", "max"), "min": _update("min", "min"),
            "mul": _update("prod", "mul"), "multiply": _update("prod", "multiply")}
_POINT_UPDATES = {name: _point_update(name) for name in _UPDATES}


def _get_rule(cx, at, *, mode=None, fill_value=None, indices_are_sorted=False, unique_indices=False):
  """jnp's v.at[idx].get() of a register tensor v: v[idx], its elements at single positions and static ranges, or
  its rows at a vector of ids (a register gather)."""
  from .register_gather import register_gather
  from .shape import expand
  v = at.at.value
  fill = mode in ("fill", "drop")
  if mode not in (None, "promise_in_bounds", "clip") and not fill or fill_value is not None and not fill:
    raise at.at.error()
  if at.ids is None:          # (a static index past the axis: clamped, as jnp's get clamps it; filled with "fill")
    from .padded_tiles import true_shape
    own = tuple(true_shape(cx.b, v))
    items = tuple(min(max(i + m if i < 0 else i, 0), m - 1) if isinstance(i, int) and not -m <= i < m else i
                  for i, m in zip(at.items, own))
    got = expand(cx, v, items)
    return _point_fill(cx, v, at.items, got, fill_value) if fill else got
  got = register_gather(cx, v, at.ids, cx.name)
  if not fill or got is None:
    return got
  # mode="fill" (a lookup whose ids may lie outside the table, jnp's padding ids; probe 56e: it was MG003): the
  # rows of ids outside [-n, n) are fill_value, jnp's default NaN, the lowest signed or largest unsigned integer
  d = resolve(v.type.dtype)
  fill_value = _fill_of(d, fill_value)
  n = v.type.shape[0]
  ids = at.ids
  inside = ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.GE, ids, -n), ew.compare(cx, ew.CmpOp.LT, ids, n))
  if len(got.type.shape) == 2:
    inside = expand(cx, inside, (slice(None), None))
  return ew.where_(cx, inside, got, fill_value)


def _fill_of(d, fill_value):
  """jnp's fill_value of a read outside the tensor: NaN, the lowest signed or largest unsigned integer, True."""
  if fill_value is not None:
    return fill_value
  import numpy as np
  return True if d == DType.bool_ else float("nan") if d.is_float else \
      int(np.iinfo(d.np).min if d.is_signed else np.iinfo(d.np).max)


def _point_fill(cx, v, items, got, fill_value):
  """`v.at[i].get(mode="fill")` at single positions (probe 57b; it was MG003 "a register tensor has no attribute
  'at'"): the read where each index lies in [-n, n), fill_value (jnp's default NaN) elsewhere."""
  from .padded_tiles import true_shape
  own, d = tuple(true_shape(cx.b, v)), resolve(v.type.dtype)
  inside = None
  for i, m in zip(items, own):
    if isinstance(i, slice):
      continue
    if isinstance(i, int):
      if not -m <= i < m:
        return ew.full_(cx, tuple(got.type.shape) if is_tensor(got) else (), _fill_of(d, fill_value), d,
                        convert=True)
      continue
    c = ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.GE, i, -m), ew.compare(cx, ew.CmpOp.LT, i, m))
    inside = c if inside is None else ew.binary(cx, ew.BinOp.AND, inside, c)
  return got if inside is None else ew.where_(cx, inside, got, _fill_of(d, fill_value))


_GET = Builtin(_get_rule, "at.get")
