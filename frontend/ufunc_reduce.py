"""Reductions spelt as NumPy's and lax's generic ones, of register values (probe 52d; they were MG003 whose hint
said "use ml.reduce"): a ufunc's `.reduce` (`jnp.add.reduce(v, axis=1)`, `jnp.maximum.reduce`, `jnp.multiply`,
`jnp.logical_or`, `jnp.bitwise_xor`, `jnp.logaddexp`: the reduction jax's ufunc runs, ml.sum, ml.max, ml.any,
ml.logsumexp, ...; axis 0 unless told, as the ufunc's) and `.accumulate` (add, multiply, maximum, minimum: ml.cumsum,
ml.cumprod, ml.cummax, ml.cummin), of jnp's ufuncs and NumPy's alike; `jax.lax.reduce(x, init, computation,
dimensions)` of a known monoid (lax's, jnp's or operator's add, mul, max, min, and, or, xor) or of a combine of the
kernel's own along one dimension (ml.reduce), the init combined in as XLA's reduce does; and the bitwise reductions
that ml's have no counterpart for (lax.reduce_and / reduce_or / reduce_xor of integers, Triton's tl.xor_sum): an
ml.reduce (log2(n) steps through SMEM) of form_helpers' bit_and / bit_or / bit_xor, nested over several axes."""
from __future__ import annotations

from .dtypes import DType
from .jnp_forms import _dtype
from .jnp_stats import _axis_ok, _kw, _rank

_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "logical_and": "all",
           "logical_or": "any", "logical_xor": "xor", "bitwise_and": "bit_and", "bitwise_or": "bit_or",
           "bitwise_xor": "bit_xor", "logaddexp": "logsumexp"}
_ACCUMULATE = {"add": "cumsum", "multiply": "cumprod", "maximum": "cummax", "minimum": "cummin"}
# associative ufuncs with no ml scan of their own, accumulated as ml.associative_scan of the ufunc (probe 56f: a
# logcumsumexp, jnp.logaddexp.accumulate); subtract's or divide's accumulate is no scan and keeps its MG003
_SCANNED = ("logaddexp", "logaddexp2", "fmax", "fmin", "bitwise_and", "bitwise_or", "bitwise_xor", "gcd", "lcm", "hypot")
# lax.reduce's computation, by its name in lax, jnp or operator
_MONOIDS = {"add": "sum", "mul": "prod", "multiply": "prod", "max": "max", "maximum": "max", "min": "min",
            "minimum": "min", "bitwise_and": "bit_and", "and_": "bit_and", "bitwise_or": "bit_or", "or_": "bit_or",
            "bitwise_xor": "bit_xor", "xor": "bit_xor", "logical_and": "bit_and", "logical_or": "bit_or"}


def _reduce_params(a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=None):
  return dict(a=a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial, where=where)


def _accumulate_params(a, axis=0, dtype=None, out=None):
  return dict(a=a, axis=axis, dtype=dtype, out=out)


def bitwise(kind, x, axes, keepdims, k=1):
  """(form, operands) of the bitwise `kind` ('bit_and', 'bit_or', 'bit_xor') reduction of operand {0} over `axes`
  (a tuple, or None: every axis): ml.reduce of form_helpers' combine, operand {k}, one axis at a time from the
  last; None where x is not of integers or booleans."""
  from . import form_helpers
  d, rank = _dtype(x), _rank(x)
  if not isinstance(d, DType) or not (d.is_int or d == DType.bool_) or rank is None:
    return None
  axes = tuple(range(rank)) if axes is None else tuple(a % rank for a in axes)
  if rank > 1 and sorted(axes) == list(range(rank)):
    return (f"ml.reduce({{0}}, None, {{{k}}}, keep_dims={bool(keepdims)})", [x, getattr(form_helpers, kind)])
  from .ops.combine_reduce import merged_axes
  shape = tuple(getattr(x.type, "shape", ()))
  if not keepdims and (merged := merged_axes(shape, set(axes))) is not None:     # (one axis of a reshape)
    return f"ml.reduce({{0}}.reshape{merged[0]!r}, {merged[1]}, {{{k}}})", [x, getattr(form_helpers, kind)]
  form = "{0}"
  for ax in sorted(axes, reverse=True):
    form = f"ml.reduce({form}, {ax}, {{{k}}}, keep_dims={bool(keepdims)})"
  return form, [x, getattr(form_helpers, kind)]


def _axes(axis, rank):
  if axis is None:
    return None
  axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
  if not _axis_ok(axes) or not all(-rank <= a < rank for a in axes):
    return False
  return axes


def _ufunc_reduce(name, p):
  x, rank = p["a"], _rank(p["a"])
  kind, keep = _REDUCE.get(name), p["keepdims"]
  if kind is None or rank is None or p["out"] is not None or not isinstance(keep, bool):
    return None
  axes = _axes(p["axis"], rank)
  if axes is False:
    return None
  tail = _kw(None if axes is None else axes if len(axes) != 1 else axes[0], keep)
  plain = p["dtype"] is None and p["initial"] is None and p["where"] is None
  if kind in ("sum", "max", "min"):
    if kind != "sum" and p["dtype"] is not None:
      return None
    extra = "".join(f", {k}={{{i}}}" for i, k in enumerate(("dtype", "initial", "where"), 1) if p[k] is not None)
    return f"ml.{kind}({{0}}{tail}{extra})", [x, p["dtype"], p["initial"], p["where"]]
  if not plain:
    return None
  if kind in ("all", "any", "logsumexp"):
    return f"ml.{kind}({{0}}{tail})", [x]
  if kind == "xor":              # (logical_xor: whether an odd number of elements hold)
    return f"ml.sum({{0}} != 0{tail}) % 2 == 1", [x]
  if kind == "prod":
    from .jnp_stats import _prod
    return _prod({"a": x, "axis": axes if axes is None else axes[0] if len(axes) == 1 else axes, "keepdims": keep,
                  "promote_integers": True, "dtype": None})
  return bitwise(kind, x, axes, keep)


def _ufunc_accumulate(name, p, u=None):
  x, rank, kind = p["a"], _rank(p["a"]), _ACCUMULATE.get(name)
  if kind is None and name not in _SCANNED or rank is None or p["out"] is not None or p["dtype"] is not None:
    return None
  axis = p["axis"]
  if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
    return None
  if kind is None:
    return f"ml.associative_scan({{1}}, {{0}}, axis={axis % rank})", [x, u]
  d = _dtype(x)
  form = f"ml.{kind}({{0}}, axis={axis % rank})"
  if kind in ("cumsum", "cumprod") and isinstance(d, DType) and d.is_int and d.bits < 32:
    form = f"({form}).astype({{0}}.dtype)"       # (jnp's scans keep an 8- or 16-bit dtype, wrapping)
  return form, [x]


def ufunc_method(tracer, node, fn, args, kwargs):
  """The value of `jnp.add.reduce(v, axis=1)`, `np.maximum.accumulate(v, axis=1)`, ... of a register value (see the
  module); None where fn is no ufunc's reduce or accumulate, its arguments do not bind, or no form computes it."""
  from .assign import holds_value
  from .jnp_calls import trace_form
  u, method = getattr(fn, "__self__", None), getattr(fn, "__name__", None)
  if type(u).__name__ != "ufunc" or method not in ("reduce", "accumulate"):
    return None
  if not any(holds_value(a) for a in list(args) + list(kwargs.values())):
    return None
  try:
    p = (_reduce_params if method == "reduce" else _accumulate_params)(*args, **kwargs)
  except TypeError:
    return None
  name = getattr(u, "__name__", None)
  got = _ufunc_reduce(name, p) if method == "reduce" else _ufunc_accumulate(name, p, u)
  return None if got is None else trace_form(tracer, node, *got)


def lax_reduce(a):
  """jax.lax.reduce(operands, init_values, computation, dimensions) of one register tensor (see the module)."""
  from .jnp_calls import library
  x, init, comp, dims = a["operands"], a["init_values"], a["computation"], a["dimensions"]
  if isinstance(x, (tuple, list)):       # (several operands, an argmax's (values, indices): ml.reduce of the tuple)
    return _several(x, init, comp, dims)
  rank = _rank(x)
  if rank is None or not isinstance(dims, (tuple, list)) or not dims or _axes(tuple(dims), rank) in (None, False):
    return None
  dims = tuple(d % rank for d in dims)
  if isinstance(init, (tuple, list)):
    return None
  lib = library(comp) if callable(comp) else None
  name = lib[1] if lib is not None else getattr(comp, "__name__", None) if getattr(
      comp, "__module__", None) in ("_operator", "operator") else None
  kind = _MONOIDS.get(name)
  ax = dims[0] if len(dims) == 1 else dims
  if kind in ("sum", "max", "min"):
    return f"ml.{kind}({{0}}, axis={ax!r}, initial={{1}})", [x, init]
  if kind == "prod":
    from .jnp_stats import _prod
    got = _prod({"a": x, "axis": ax, "keepdims": False, "promote_integers": True, "dtype": None})
    return None if got is None else (f"({got[0]}) * {{{len(got[1])}}}", [*got[1], init])
  if kind is not None:
    got = bitwise(kind, x, dims, False)
    return None if got is None else (f"{{1}}({got[0]}, {{2}})", [x, got[1][1], init])
  if lib is not None or len(dims) != 1 or not callable(comp):
    return None                   # (a library function of no monoid here, or a combine over several dimensions)
  return f"{{1}}(ml.reduce({{0}}, {dims[0]}, {{1}}), {{2}})", [x, comp, init]


def _several(xs, inits, comp, dims):
  """lax.reduce of a tuple of tensors of one shape with a combine of the kernel's own (of two tuples, jax's) along
  one dimension: ml.reduce of the tuple, its result combined with the init values."""
  from .jnp_calls import library
  ranks = {_rank(x) for x in xs}
  if not xs or len(ranks) != 1 or None in ranks or not isinstance(inits, (tuple, list)) or len(inits) != len(xs) \
      or not callable(comp) or library(comp) is not None or not isinstance(dims, (tuple, list)) or len(dims) != 1:
    return None
  rank = ranks.pop()
  if not isinstance(dims[0], int) or isinstance(dims[0], bool) or not -rank <= dims[0] < rank:
    return None
  return f"{{1}}(ml.reduce({{0}}, {dims[0] % rank}, {{1}}), {{2}})", [tuple(xs), comp, tuple(inits)]


# (lib, name) -> (the parameters the form reads, its maker): merged into jnp_calls.SHAPED
REDUCTIONS = {
    ("jax.lax", "reduce"): (("operands", "init_values", "computation", "dimensions"), lax_reduce),
}
