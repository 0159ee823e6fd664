"""jax.lax functions of register values ml has no namesake for, as forms of ml functions with lax's meaning (the
forms their MG003 hints wrote): `lax.sign`, `lax.round` (lax's default rounds half away from zero, unlike
ml.round's ties to even), `lax.reduce_max/min/sum(x, axes)`, `lax.broadcast_in_dim`, `lax.is_finite`, `lax.div`
(C's division of integers, toward zero; x / 0 is -1, XLA's), `lax.rem` (ml.fmod, but x % 0 is x, XLA's),
`lax.iota`, `lax.sort` (of several operands too) and `lax.sort_key_val`, `lax.rev`, `lax.slice`, and the shifts
`lax.shift_right_logical` / `shift_right_arithmetic` by a static amount. jnp_calls.SHAPED takes them, as
jnp_forms.FORMS."""
from __future__ import annotations

import numpy as np

from .jnp_forms import _dtype, _kind, _shape


def _ints(t) -> tuple | None:
  t = tuple(t) if isinstance(t, (tuple, list)) else None
  return t if t is not None and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in t) else None


def _round(a):
  x, how = a["x"], int(a["rounding_method"])
  if _kind(x) != "float" or how not in (0, 1):
    return None
  if how == 1:
    return "ml.round({0})", [x]          # TO_NEAREST_EVEN: ml.round's
  # AWAY_FROM_ZERO: the whole part, one further from zero where the fraction (exact: x - trunc(x)) is half or more
  return ("ml.where(ml.abs({0} - ml.trunc({0})) >= 0.5, ml.trunc({0}) + ml.where({0} < 0, -1.0, 1.0),"
          " ml.trunc({0}))"), [x]


def _reduce(fn):
  def make(a):
    axes = _ints(a["axes"])
    return None if axes is None else (f"ml.{fn}({{0}}, axis={{1}})", [a["operand"], axes])
  return make


def _broadcast_in_dim(a):
  x, shape, dims = a["operand"], _ints(a["shape"]), _ints(a["broadcast_dimensions"])
  have = _shape(x)
  if have is None or shape is None or dims is None or len(dims) != len(have) or list(dims) != sorted(dims) or \
      a.get("out_sharding") is not None:
    return None
  idx = ", ".join(":" if i in dims else "None" for i in range(len(shape)))
  return f"ml.broadcast_to({{0}}[{idx}], {{1}})", [x, shape]


def _div(a):
  x, y = a["x"], a["y"]
  if _dtype(x) is None and _dtype(y) is None:
    return None
  if "float" in (_kind(x), _kind(y)):
    return "{0} / {1}", [x, y]
  # C's division toward zero: the floored quotient, one up where it was rounded down past zero
  form = "ml.where((({0} % {1}) != 0) & (({0} < 0) != ({1} < 0)), {0} // {1} + 1, {0} // {1})"
  d = _dtype(y)
  if d is not None and getattr(d, "is_signed", False):
    form = f"ml.where({{1}} == 0, -1, {form})"     # XLA's x / 0: -1, where jnp's floor moved it to -2
  return form, [x, y]


def _rem(a):
  """lax.rem: C's remainder, ml.fmod, but x where an integer divisor is 0 (XLA's x % 0; ml.fmod's is jnp.fmod's
  0)."""
  x, y = a["x"], a["y"]
  if _dtype(x) is None and _dtype(y) is None:
    return None
  if _kind(y) == "int" and _dtype(y) is not None:
    return "ml.where({1} == 0, {0}, ml.fmod({0}, {1}))", [x, y]
  return "ml.fmod({0}, {1})", [x, y]


def _iota(a):
  size = a["size"]
  if not isinstance(size, (int, np.integer)) or size <= 0:
    return None
  return "ml.arange({0}).astype({1})", [int(size), a["dtype"]]


def _sort(a):
  x, keys = a["operand"], a["num_keys"]
  if isinstance(x, (tuple, list)):       # several operands, sorted by the first num_keys (ops/sort_together.py)
    if not x or any(_dtype(v) is None for v in x):
      return None
    ops = ", ".join(f"{{{i}}}" for i in range(len(x)))
    return f"ml.sort(({ops},), axis={{{len(x)}}}, num_keys={{{len(x) + 1}}})", [*x, a["dimension"], keys]
  if _dtype(x) is None or keys != 1:
    return None
  return "ml.sort({0}, axis={1})", [x, a["dimension"]]


def _sort_key_val(a):
  k, v = a["keys"], a["values"]
  if _dtype(k) is None or _dtype(v) is None:
    return None
  return "ml.sort(({0}, {1}), axis={2})", [k, v, a["dimension"]]


def _rev(a):
  dims = _ints(a["dimensions"])
  return None if dims is None else ("ml.flip({0}, axis={1})", [a["operand"], dims])


def _slice(a):
  x, lo, hi = a["operand"], _ints(a["start_indices"]), _ints(a["limit_indices"])
  steps = (1,) * len(lo or ()) if a["strides"] is None else _ints(a["strides"])
  have = _shape(x)
  if have is None or lo is None or hi is None or steps is None or not len(have) == len(lo) == len(hi) == len(steps):
    return None
  idx = ", ".join(f"{s}:{e}" + (f":{k}" if k != 1 else "") for s, e, k in zip(lo, hi, steps))
  return f"{{0}}[{idx}]", [x]


_UNSIGNED = {"int8": "ml.uint8", "int16": "ml.uint16", "int32": "ml.uint32"}
_SIGNED = {"uint8": "ml.int8", "uint16": "ml.int16", "uint32": "ml.int32"}


def _shift(logical):
  def make(a):
    x, n = a["x"], a["y"]
    d = str(_dtype(x))
    if _kind(x) != "int" or not isinstance(n, (int, np.integer)) or isinstance(n, bool):
      return None                  # (a run-time amount: its MG003 hint)
    if d == "int64":               # (no uint64 twin: 64-bit hashes, fmix64 and splitmix64, compute in int64)
      n = int(n)                   # (an amount past the width, or negative, is lax's: read as unsigned)
      if not logical:
        return "{0} >> {1}", [x, n if 0 <= n < 64 else 63]
      if n == 0:
        return "{0}", [x]
      return ("ml.zeros_like({0})", [x]) if not 0 < n < 64 else ("({0} >> {1}) & {2}", [x, n, (1 << (64 - n)) - 1])
    twin = (_UNSIGNED if logical else _SIGNED).get(d)
    if twin is None:               # >> is already logical on unsigned types and arithmetic on signed ones
      return ("{0} >> {1}", [x, int(n)]) if d in (_SIGNED if logical else _UNSIGNED) else None
    return f"ml.bitcast(ml.bitcast({{0}}, {twin}) >> {{1}}, {{2}})", [x, int(n), _dtype(x)]
  return make


FORMS = {
    ("jax.lax", "sign"): (("x",), lambda a: None if _dtype(a["x"]) is None else (
        "ml.where({0} > 0, 1, ml.where({0} < 0, -1, {0}))", [a["x"]])),
    ("jax.lax", "round"): (("x", "rounding_method"), _round),
    **{("jax.lax", f"reduce_{n}"): (("operand", "axes"), _reduce(n)) for n in ("max", "min", "sum")},
    ("jax.lax", "broadcast_in_dim"): (("operand", "shape", "broadcast_dimensions", "out_sharding"), _broadcast_in_dim),
    ("jax.lax", "is_finite"): (("x",), lambda a: ("ml.isfinite({0})", [a["x"]])),
    ("jax.lax", "div"): (("x", "y"), _div),
    ("jax.lax", "rem"): (("x", "y"), _rem),
    ("jax.lax", "iota"): (("dtype", "size"), _iota),
    ("jax.lax", "sort"): (("operand", "dimension", "is_stable", "num_keys"), _sort),
    ("jax.lax", "sort_key_val"): (("keys", "values", "dimension", "is_stable"), _sort_key_val),
    ("jax.lax", "rev"): (("operand", "dimensions"), _rev),
    ("jax.lax", "slice"): (("operand", "start_indices", "limit_indices", "strides"), _slice),
    ("jax.lax", "shift_right_logical"): (("x", "y"), _shift(True)),
    ("jax.lax", "shift_right_arithmetic"): (("x", "y"), _shift(False)),
    # (a kernel has no derivative (docs/autodiff.md): what stop_gradient holds back is its operand; probe 57f)
    ("jax.lax", "stop_gradient"): (("x",), lambda a: None if _dtype(a["x"]) is None else ("{0}", [a["x"]])),
}
