"""jnp's static-size forms of data-dependent functions, as ragged JAX code writes them (probe 51d): the result's
length is a static `size=` (or `total_repeat_length=`), the data says which elements fill it.

- `jnp.repeat(a, repeats, axis, total_repeat_length=T)` with run-time repeats (a vector of lengths, or a scalar): the
  segment ids of a jagged batch, `jnp.repeat(jnp.arange(b), lens, total_repeat_length=t)`; jax's own definition,
  each output position's source the last element whose exclusive start lies at or before it
  (`ml.searchsorted(ml.cumsum(r) - r, ml.arange(T), side="right") - 1`), so positions past the repeats' sum take the
  last element, as jnp's;
- `jnp.where(c, size=n, fill_value=f)` of one argument: `jnp.nonzero(c, size=n, fill_value=f)` (jnp_forms.py);
- `jnp.extract(c, a, size=n, fill_value=f)` and `jnp.compress(c, a, axis, size=n, fill_value=f)`: the kept
  elements (rows) packed to the front, `fill_value` after them (stream compaction);
- `jnp.unique(a, size=n, fill_value=f, return_counts=...)`: the sorted values, each run's head (NaNs one run, as
  jnp's equal_nan) packed to the front; past the count `f`, else the smallest value (jnp's default); the counts
  of each run, 0 past it;
- `jnp.digitize(x, bins, right=False)` of register bins: jax's definition, `ml.searchsorted` on increasing bins,
  on the reversed ones for decreasing.

Each maker takes the call's arguments bound by the library's signature and gives (the form, its operands), or None
where the call is not the static-size form (a mapped call, `jnp.where(c, x, y)`, keeps its ml.* namesake) or an
argument is one the form cannot take (its MG003 stands). Traced as jnp_calls.SHAPED's forms are."""
from __future__ import annotations

import inspect

import numpy as np

from .jnp_dynamic import _int
from .jnp_forms import _kind, _nonzero, _shape
from .jnp_tables import FORMS as TABLE_FORMS


def _fill(fill, arr):
  """`fill` as jnp converts it to `arr`'s dtype: a finite float truncated for integers (jnp's astype: -2.5 is -2;
  an infinity or NaN: None, no form)."""
  if _kind(arr) == "int" and isinstance(fill, (float, np.floating)):
    return int(fill) if np.isfinite(fill) else None
  return fill


def _first(hit: str, size: int) -> str:
  """The positions of the first `size` true elements of the 1-D bool form `hit`, 0 past their count (jnp.nonzero's
  default fill): each kept element's rank names its slot (jnp_forms._nonzero's)."""
  return (f"ml.segment_sum(ml.arange({hit}.shape[0]), ml.where({hit}, ml.cumsum({hit}.astype(ml.int32)) - 1, -1),"
          f" num_segments={size})")


def _repeat(a):
  x, r, axis, total = a["a"], a["repeats"], a["axis"], a["total_repeat_length"]
  shape = _shape(x)
  own = a["_shape_of"](x) if shape is not None and a.get("_shape_of") else shape     # (unpadded in a padded trace)
  if total is None and shape is not None and len(shape) == 1 and own[0] % 8 and axis in (None, 0, -1) and _int(
      r) and r >= 1 and a.get("out_sharding") is None:
    # A vector of a length not a multiple of 8 repeated a static number of times (a block's scales under its
    # columns, jnp.repeat(s, 128) of 3 scales; jnp.repeat(v, 3) of 100): each output element's source, read as a
    # register gather, v[ml.arange(n * r) // r] (probe 52c: ml.repeat's joined (n, 1) columns were MG204 there)
    return f"{{0}}[ml.arange({own[0] * int(r)}) // {int(r)}]", [x]
  if not _int(total) or total < 1 or shape is None or not 1 <= len(shape) <= 2 or a.get("out_sharding") is not None:
    return None
  if axis is None and len(shape) == 1:
    axis = 0
  if not _int(axis) or not -len(shape) <= axis < len(shape):
    return None
  axis = int(axis) % len(shape)
  n = shape[axis]
  rs = _shape(r)
  if rs is not None and _kind(r) == "int" and rs == (n,):
    starts = "(ml.cumsum({1}.astype(ml.int32)) - {1}.astype(ml.int32))"
  elif (rs == () and _kind(r) == "int") or (_int(r) and r >= 0):
    starts = f"(ml.arange({n}) * {{1}})"
  else:
    return None
  idx = f"(ml.searchsorted({starts}, ml.arange({int(total)}), side='right') - 1)"
  return ("{0}[" + ("" if axis == 0 else ":, ") + idx + "]"), [x, r]


def _where(a):
  if a["x"] is not None or a["y"] is not None or a["size"] is None:
    return None
  return _nonzero("nonzero")({"a": a["condition"], "size": a["size"], "fill_value": a["fill_value"]})


def _packed(cond, arr, size, fill, rows: bool):
  """The elements (rows) of `arr` where the 1-D `cond` holds, packed to the front, `fill` past their count."""
  fill = _fill(fill, arr)
  if not _int(size) or size < 1 or _kind(fill) not in ("int", "float", "bool") or _shape(cond) is None:
    return None
  hit = "{0}" if _kind(cond) == "bool" else "({0} != 0)"
  keep = f"(ml.arange({int(size)}) < ml.sum({hit}.astype(ml.int32)))"
  got = f"{{1}}[{_first(hit, int(size))}]"
  return f"ml.where({keep}{'[:, None]' if rows else ''}, {got}, {{2}})", [cond, arr, fill]


def _extract(a):
  cond, arr = a["condition"], a["arr"]
  cs, xs = _shape(cond), _shape(arr)
  if cs is None or xs is None or int(np.prod(cs)) != int(np.prod(xs)) or a["size"] is None or _not_numbers(arr):
    return None
  flat = lambda s: "" if len(s) == 1 else ".reshape(-1)"
  got = _packed(cond, arr, a["size"], a["fill_value"], rows=False)
  if got is None:
    return None
  form, ops = got
  return form.replace("{0}", "{0}" + flat(cs)).replace("{1}[", "{1}" + flat(xs) + "["), ops


def _compress(a):
  cond, arr, axis = a["condition"], a["a"], a["axis"]
  cs, xs = _shape(cond), _shape(arr)
  if cs is None or xs is None or len(cs) != 1 or a["size"] is None or a["out"] is not None or _not_numbers(arr):
    return None
  if axis is None and len(xs) == 1 or axis in (0, -len(xs)) and len(xs) in (1, 2):
    if cs[0] != xs[0]:
      return None
    return _packed(cond, arr, a["size"], a["fill_value"], rows=len(xs) == 2)
  return None


def _not_numbers(arr) -> bool:
  """True where `arr` is no register value of numbers (the form takes none other)."""
  return _kind(arr) not in ("int", "float")


def _unique(a):
  x, size, fill = a["ar"], a["size"], _fill(a["fill_value"], a["ar"])
  shape = _shape(x)
  if (shape is None or not _int(size) or size < 1 or a["axis"] is not None or a["return_index"]
      or a["return_inverse"] or a["equal_nan"] is not True or _kind(x) not in ("int", "float")
      or fill is not None and _kind(fill) not in ("int", "float") or a["fill_value"] is not None and fill is None):
    return None
  flat = "{0}" if len(shape) == 1 else "{0}.reshape(-1)"
  size = int(size)
  nan = " & ~(ml.isnan(_s_) & ml.isnan(ml.roll(_s_, 1)))" if _kind(x) == "float" else ""
  head = f"((ml.arange(_s_.shape[0]) == 0) | ((_s_ != ml.roll(_s_, 1)){nan}))"
  vals = f"_s_[{_first('_h_', size)}]"
  if fill is not None:
    vals = f"ml.where(ml.arange({size}) < ml.sum(_h_.astype(ml.int32)), {vals}, {{1}})"
  counts = (f"ml.segment_sum(ml.full(_s_.shape, 1, ml.int32), ml.cumsum(_h_.astype(ml.int32)) - 1,"
            f" num_segments={size})")
  out = f"({vals}, {counts})" if a["return_counts"] else vals
  return f"(lambda _s_: (lambda _h_: {out})({head}))(ml.sort({flat}))", [x, fill]


def _digitize(a, pads=None):
  from .jnp_tables import _digitize_static       # bins of a static table: counted with its numbers
  if (got := _digitize_static(a, pads)) is not None:
    return got
  x, bins, right = a["x"], a["bins"], a["right"]
  if a["method"] is not None or not isinstance(right, (bool, np.bool_)) or _shape(bins) is None or len(
      _shape(bins)) != 1 or _shape(bins)[0] < 1 or _shape(x) is None:
    return None
  side = "'left'" if right else "'right'"
  return (f"ml.where({{1}}[-1] >= {{1}}[0], ml.searchsorted({{1}}, {{0}}, side={side}),"
          f" {{1}}.shape[0] - ml.searchsorted(ml.flip({{1}}, 0), {{0}}, side={side}))"), [x, bins]


# (lib, name) -> its maker; the call binds by the library's own signature
FORMS = {("jnp", "repeat"): _repeat, ("jnp", "where"): _where, ("jnp", "extract"): _extract,
         ("jnp", "compress"): _compress, ("jnp", "unique"): _unique, ("jnp", "digitize"): _digitize,
         **TABLE_FORMS}     # jnp.polyval, jnp.isin, jnp.interp of a register table: jnp_tables.py


def sized(tracer, cx, node, fn, lib, name, args, kwargs):
  """The static-size form of the call, traced; None where it is not one (the call goes on as before)."""
  make = FORMS.get((lib, name))
  if make is None:
    return None
  try:
    bound = inspect.signature(fn).bind(*args, **kwargs)
  except (TypeError, ValueError):
    return None
  bound.apply_defaults()
  pads = getattr(tracer.b, "pad_tiles", None) or {}     # (a padded trace's tables: their own lengths)
  if name == "repeat":      # (a vector computed padded: its own length)
    from .ops.padded_tiles import true_shape
    bound.arguments["_shape_of"] = lambda v: tuple(true_shape(tracer.b, v))
  got = make(dict(bound.arguments), pads) if (lib, name) in TABLE_FORMS or name == "digitize" else \
      make(dict(bound.arguments))
  if got is None:
    return None
  form, operands = got
  from .jnp_calls import trace_form
  from .ops.base import is_value
  return trace_form(tracer, node, form, operands, [cx.named(op, "") if is_value(op) else "" for op in operands])
