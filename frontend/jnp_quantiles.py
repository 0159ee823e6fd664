"""jnp's order statistics and NaN-skipping arg-reductions of register values, written in ml.* functions as jax
computes them: `jnp.quantile` and `jnp.percentile` along one static axis of a 1-D or 2-D tile at a static q (the
methods linear, lower, higher, nearest and midpoint: jax's _quantile, its indices and weights computed here in
float32 as jax computes them from q, the sorted elements picked by form_helpers.quantile), and `jnp.nanargmax` /
`jnp.nanargmin` (jax's: NaN replaced by -inf (inf) before ml.argmax (ml.argmin), -1 where every element is NaN).
Traced by jnp_calls.formula as the other SHAPED forms are (probe 52d; they were MG003)."""
from __future__ import annotations

import math

import numpy as np

from .jnp_forms import _dtype, _kind
from .jnp_math import _shape
from .jnp_stats import _kw, _static

_METHODS = {"linear": 0, "lower": 1, "higher": 2, "nearest": None, "midpoint": 3}


def _number(q):
  """A static q (a Python number or a NumPy scalar) as a float; None otherwise (a run-time q: its MG003)."""
  if isinstance(q, (bool, np.bool_)) or not isinstance(q, (int, float, np.integer, np.floating)):
    return None
  return float(q)


def _numbers(q):
  """The static qs of a sequence of them, `jnp.array([0.25, 0.75])` (a table: static_tables.py) or a list or tuple
  of numbers, as floats; None otherwise."""
  from .static_tables import known
  got = known(q)
  if got is not None:
    vals = got[2]
    return [float(v) for v in vals] if vals.ndim == 1 and (got[1].is_float or got[1].is_int) else None
  if isinstance(q, np.ndarray) and q.ndim == 1 and q.dtype.kind in "iuf":
    q = q.tolist()
  if isinstance(q, (list, tuple)) and q and len(q) <= _MAX_QS and all(_number(v) is not None for v in q):
    return [_number(v) for v in q]
  return None


_MAX_QS = 16      # quantiles of one call unrolled


def _quantile(percent, nan=False, median=False):
  one = _one_quantile(percent, nan, median)

  def make(a):
    """Several qs (`jnp.quantile(v, jnp.array([0.25, 0.75]))`, since probe 53b): each q's form, stacked along a
    new leading axis, as jnp's result is."""
    qs = None if median else _numbers(a["q"])
    if qs is None or len(qs) > _MAX_QS:
      return one(a)
    forms = [one({**a, "q": q}) for q in qs]
    if any(f is None for f in forms):
      return None
    args, shape = forms[0][1], _shape(a, a["a"])
    if len(shape) == 1 and not a["keepdims"]:     # (scalars: the vector of them, a select by position)
      form = forms[-1][0] if len(qs) > 1 else f"ml.where(ml.arange(1) == 0, {forms[0][0]}, {forms[0][0]})"
      for k in range(len(qs) - 2, -1, -1):
        form = f"ml.where(ml.arange({len(qs)}) == {k}, {forms[k][0]}, {form})"
      return form, args
    return "ml.stack([" + ", ".join(f for f, _ in forms) + "], axis=0)", args
  return make


def _one_quantile(percent, nan=False, median=False):
  def make(a):
    x, axis, keepdims = a["a"], a["axis"], a["keepdims"]
    method, q = ("midpoint", 0.5) if median else (a["method"], a["q"])     # (jnp.nanmedian: jax's nanquantile)
    q, shape = _number(q), _shape(a, x)
    if q is None or shape is None or len(shape) not in (1, 2) or _kind(x) not in ("float", "int") \
        or not isinstance(keepdims, (bool, np.bool_)) or method not in _METHODS:
      return None
    if axis is None and len(shape) == 1:
      axis = 0
    if not isinstance(axis, int) or isinstance(axis, bool) or not -len(shape) <= axis < len(shape):
      return None
    axis %= len(shape)
    n = shape[axis]
    f = np.float32
    qf = f(q) / f(100) if percent else f(q)        # (jnp.percentile: quantile(a, q / 100), in float32)
    d = str(_dtype(x))
    v = "{0}" if d == "float32" else "{0}.astype(ml.float32)"
    if nan:                                        # (the position depends on each row's count: form_helpers')
      from .form_helpers import nanquantile
      mode = 4 if _METHODS[method] is None else _METHODS[method]
      form = f"{{1}}({v}, {axis}, {float(qf)!r}, {n}, {mode}, {bool(keepdims)})"
      if _kind(x) == "float" and d != "float32":
        form = f"({form}).astype({{0}}.dtype)"
      return form, [x, nanquantile]
    pos = qf * f(n - 1)
    low, high = np.floor(pos), np.ceil(pos)
    hw = f(pos - low)
    lw = f(f(1) - hw)
    lo, hi = (int(min(max(v, 0), n - 1)) for v in (low, high))
    mode = _METHODS[method]
    if mode is None:                               # nearest: the lower one where the weight is at most 0.5
      mode = 1 if hw <= f(0.5) else 2
    form = f"{{1}}({v}, {axis}, {lo}, {hi}, {float(lw)!r}, {float(hw)!r}, {n}, {mode}, {bool(keepdims)})"
    if _kind(x) == "float" and d != "float32":
      form = f"({form}).astype({{0}}.dtype)"       # (jnp's result has the operand's float dtype)
    from .form_helpers import quantile
    return form, [x, quantile]
  return make


def _nanarg(kind):
  def make(a):
    x, axis, keepdims = a["a"], a["axis"], a["keepdims"]
    if keepdims is None:
      keepdims = False
    if not _static({"axis": axis, "keepdims": keepdims}, "axis", "keepdims") or isinstance(axis, (tuple, list)):
      return None
    tail = _kw(axis, keepdims)
    if _kind(x) != "float":
      return f"ml.{kind}({{0}}{tail})", [x]
    fill = -math.inf if kind == "argmax" else math.inf
    return (f"ml.where(ml.all(ml.isnan({{0}}){tail}), -1, ml.{kind}(ml.where(ml.isnan({{0}}), {{1}}, {{0}}){tail}))",
            [x, fill])
  return make


def _partition(arg):
  """jnp.partition / jnp.argpartition along a static axis of a 1-D or 2-D tile, as jax's: the kth + 1 smallest in
  ascending order (ties by position), then the rest: partition's in descending order (top_k's, NaN first), from a
  descending sort rolled by kth + 1 into place; argpartition's positions in their own order (jax ranks a proxy),
  the stable argsort of whether each element's rank is past kth. Floats' are jax's two top_ks' in its total order
  (-0.0 below +0.0, a NaN by its sign bit: form_helpers.partition and argpartition; probe 53c)."""
  def make(a):
    x, kth, axis = a["a"], a["kth"], a["axis"]
    shape = _shape(a, x)
    if shape is None or len(shape) not in (1, 2) or _kind(x) not in ("float", "int", "bool") or not isinstance(
        kth, int) or isinstance(kth, bool) or not isinstance(axis, int) or isinstance(axis, bool) \
        or not -len(shape) <= axis < len(shape):
      return None
    axis %= len(shape)
    n = shape[axis]
    if not -n <= kth < n:
      return None
    kth %= n
    idx = "" if len(shape) == 1 else "[:, None]" if axis == 0 else "[None, :]"
    if _kind(x) == "float":     # (jax's top_ks, in their total order of floats: probe 53c)
      from .form_helpers import argpartition, partition
      return "{3}({0}, {1}, {2})", [x, kth, axis, argpartition if arg else partition]
    if arg:      # (jax's top part: the other positions in their own order, top_k of a proxy of ones and zeros)
      rank = f"ml.argsort(ml.argsort({{0}}, axis={axis}), axis={axis})"
      return (f"ml.where(ml.arange({n}){idx} <= {kth}, ml.argsort({{0}}, axis={axis}),"
              f" ml.argsort(({rank} > {kth}).astype(ml.int32), axis={axis}))"), [x]
    return (f"ml.where(ml.arange({n}){idx} <= {kth}, ml.sort({{0}}, axis={axis}), ml.roll(ml.sort({{0}}, axis={axis},"
            f" descending=True), {kth + 1}, axis={axis}))"), [x]
  return make


def _approx_k(largest):
  """jax.lax.approx_max_k / approx_min_k along the last axis: the exact top k (what the approximation approximates;
  jax's own may miss some at its recall target), ml.top_k's, of -x for the smallest (floats)."""
  def make(a):
    x, k, dim = a["operand"], a["k"], a["reduction_dimension"]
    shape = _shape(a, x)
    if shape is None or not isinstance(k, int) or isinstance(k, bool) or not isinstance(dim, int) \
        or dim % len(shape) != len(shape) - 1 or a["aggregate_to_topk"] is not True:
      return None
    if largest:
      return "ml.top_k({0}, {1})", [x, k]
    if _kind(x) != "float":
      return None
    from .form_helpers import min_k
    return "{2}({0}, {1})", [x, k, min_k]
  return make


# (lib, name) -> (the parameters the form reads, its maker): merged into jnp_calls.SHAPED
QUANTILES = {
    ("jnp", "quantile"): (("a", "q", "axis", "method", "keepdims"),
                          _quantile(False)),
    ("jnp", "percentile"): (("a", "q", "axis", "method", "keepdims"),
                            _quantile(True)),
    ("jnp", "nanquantile"): (("a", "q", "axis", "method", "keepdims"), _quantile(False, nan=True)),
    ("jnp", "nanpercentile"): (("a", "q", "axis", "method", "keepdims"), _quantile(True, nan=True)),
    ("jnp", "nanmedian"): (("a", "axis", "keepdims"), _quantile(False, nan=True, median=True)),
    ("jnp", "partition"): (("a", "kth", "axis"), _partition(False)),
    ("jnp", "argpartition"): (("a", "kth", "axis"), _partition(True)),
    ("jax.lax", "approx_max_k"): (("operand", "k", "reduction_dimension", "recall_target",
                                   "reduction_input_size_override", "aggregate_to_topk"), _approx_k(True)),
    ("jax.lax", "approx_min_k"): (("operand", "k", "reduction_dimension", "recall_target",
                                   "reduction_input_size_override", "aggregate_to_topk"), _approx_k(False)),
    ("jnp", "nanargmax"): (("a", "axis", "keepdims"), _nanarg("argmax")),
    ("jnp", "nanargmin"): (("a", "axis", "keepdims"), _nanarg("argmin")),
}
