"""jnp's statistics that ml has no function of its own for, called on register values in a kernel (Pallas's style):
`jnp.linalg.norm(v, axis=-1, keepdims=True)`, `jnp.linalg.vector_norm`, `jnp.nansum`, `jnp.nanmean`, `jnp.nanmax`,
`jnp.nanmin`, `jnp.nanvar`, `jnp.nanstd`, `jnp.ptp`, `jnp.count_nonzero`, `jnp.average`, `jnp.logaddexp` and
`jnp.prod`, and jax.lax's `reduce_max`, `reduce_min`, `reduce_sum`, `reduce_prod`, `reduce_and` and
`reduce_or`. Each is written as jnp's own source computes it, in ml.* reductions and elementwise math (forms of
the call's operands, jnp_calls.SHAPED's kind, traced at the call), so layouts, interpret mode and lowering need
nothing new. A call whose meaning has no such form here (a matrix 2-norm, an SVD's; a product over two axes)
gives None, and keeps its MG003 and hint (shape_hints, nan_name_hints). Before probe 47h each was MG003 whose
hint wrote the same formula."""
from __future__ import annotations

import math

import numpy as np

from .dtypes import DType
from .types import resolve


def _dtype(v):
  """The resolved dtype of a register value; None for a Python number."""
  t = getattr(v, "type", None)
  d = resolve(t.dtype) if t is not None and hasattr(t, "dtype") else None
  return d if isinstance(d, DType) else None


def _rank(v):
  shape = getattr(getattr(v, "type", None), "shape", None)
  return None if shape is None else len(shape)


def _is_float(v):
  d = _dtype(v)
  return d is not None and d.is_float


def _axis_ok(axis):
  return axis is None or isinstance(axis, int) and not isinstance(axis, bool) or isinstance(axis, (tuple, list)) and all(
      isinstance(a, int) and not isinstance(a, bool) for a in axis)


def _kw(axis, keepdims):
  """`, axis=1, keepdims=True` as the form passes them (nothing for the defaults)."""
  out = "" if axis is None else f", axis={tuple(axis) if isinstance(axis, list) else axis!r}"
  return out + (", keepdims=True" if keepdims is True else "")


def _static(a, *names):
  """Whether the call's arguments `names` are static (axis, keepdims, ddof): the forms write them as text."""
  return all(_axis_ok(a[n]) if n == "axis" else isinstance(a[n], (bool, np.bool_)) if n == "keepdims" else
             isinstance(a[n], int) and not isinstance(a[n], bool) for n in names)


def _inexact(v):
  """The form of operand {0} converted as jnp's promote_dtypes_inexact converts it: integers and booleans to
  float32 (as `{0}.astype({9})`, {9} float32), floats as they are."""
  return "{0}" if _is_float(v) or _dtype(v) is None else "{0}.astype({9})"


def _f32():
  return DType.f32


def _np(d):
  """A kernel dtype as a form's .astype or dtype= takes it (frontend's own DType: no jax here)."""
  return d


def _nan_reduction(kind):
  """jnp.nansum / nanmax / nanmin: the reduction of the elements with NaN replaced by its identity (a max or
  min where every element is NaN is NaN, unless initial= is given), as jnp's _nan_reduction; integers and
  booleans reduce as they are."""
  def make(a):
    if not _static(a, "axis", "keepdims"):
      return None
    x, tail = a["a"], _kw(a["axis"], a["keepdims"])
    extra = ", dtype={1}" if kind == "sum" and a.get("dtype") is not None else ""
    extra += ", initial={2}" if a.get("initial") is not None else ""
    extra += ", where={3}" if a.get("where") is not None else ""
    ops = [x, a.get("dtype"), a.get("initial"), a.get("where"), -math.inf if kind == "max" else math.inf, math.nan]
    if not _is_float(x):
      return f"ml.{kind}({{0}}{tail}{extra})", ops
    ident = "0" if kind == "sum" else "{4}"
    out = f"ml.{kind}(ml.where(ml.isnan({{0}}), {ident}, {{0}}){tail}{extra})"
    if kind != "sum" and a.get("initial") is None:
      out = f"ml.where(ml.all(ml.isnan({{0}}){tail}), {{5}}, {out})"
    return out, ops
  return make


def _nan_stat(kind):
  """jnp.nanmean / nanvar / nanstd: ml's mean, var or std of the elements that are not NaN (and that where=
  keeps; nanvar's and nanstd's mean= passed on): NaN where none is (or where their count is at most ddof), as
  jnp's; integers and booleans as jnp's mean, var and std of them."""
  def make(a):
    if not _static(a, "axis", "keepdims") or kind != "mean" and not _static(a, "ddof"):
      return None
    x, tail = a["a"], _kw(a["axis"], a["keepdims"])
    tail += f", ddof={a['ddof']}" if kind != "mean" and a["ddof"] else ""
    tail += ", dtype={1}" if a.get("dtype") is not None else ""
    tail += ", mean={3}" if a.get("mean") is not None else ""
    if not _is_float(x):
      keep = ", where={2}" if a.get("where") is not None else ""
    else:
      keep = ", where=~ml.isnan({0})" + (" & {2}" if a.get("where") is not None else "")
    return f"ml.{kind}({{0}}{tail}{keep})", [x, a.get("dtype"), a.get("where"), a.get("mean")]
  return make


def _ptp(a):
  if not _static(a, "axis", "keepdims"):
    return None
  tail = _kw(a["axis"], a["keepdims"])
  return f"ml.max({{0}}{tail}) - ml.min({{0}}{tail})", [a["a"]]


def _count_nonzero(a):
  """jnp.count_nonzero: the count of nonzero (true) elements, int32."""
  if not _static(a, "axis", "keepdims"):
    return None
  tail = _kw(a["axis"], a["keepdims"])
  mask = "{0}" if _dtype(a["a"]) == DType.bool_ else "({0} != 0)"
  return f"ml.sum({mask}{tail}, dtype={{1}})", [a["a"], DType.i32]


def _average(a):
  """jnp.average: the mean without weights; with them, sum(a * w) / sum(w) over the axis, the weights of a's
  shape or, 1-D, along the one axis (both converted as jnp promotes them: integers to float32, two float
  dtypes to float32). `returned=True` (probe 52d): also the sum of the weights (the count without them), in the
  average's dtype and shape, as jnp's."""
  if not _static(a, "axis", "keepdims"):
    return None
  returned = a.get("returned", False)
  if returned is not False:
    if returned is not True or a.get("weights") is not None and _rank(a["weights"]) != _rank(a["a"]):
      return None
    got = _average({**a, "returned": False})
    if got is None:
      return None
    form, ops = got
    if a.get("weights") is None:           # (the count: the mean of ones, exact, of the average's dtype and shape)
      total = f"ml.zeros_like({form}) + ml.sum(ml.zeros_like({form}) + 1.0)" if a["axis"] is None else (
          f"ml.zeros_like({form}) + {_count(a)}")
      return f"({form}, {total})", ops
    w = form[form.rindex("ml.sum("):]           # (the denominator, sum(w) over the axis)
    return f"({form}, ml.zeros_like({form}) + {w})", ops
  x, w, axis, tail = a["a"], a["weights"], a["axis"], _kw(a["axis"], a["keepdims"])
  if w is None:
    return f"ml.mean({{0}}{tail})", [x]
  dx, dw, rank = _dtype(x), _dtype(w), _rank(x)
  if dx is None or dw is None or rank is None:
    return None
  if dx == dw and dx.is_float:
    conv = ("{0}", "{1}")
  elif dx.is_float and not dw.is_float:
    conv = ("{0}", "{1}.astype({2})")
  elif dw.is_float and not dx.is_float:
    conv = ("{0}.astype({3})", "{1}")
  else:
    conv = ("{0}.astype({4})" if dx != DType.f32 else "{0}", "{1}.astype({4})" if dw != DType.f32 else "{1}")
  ops = [x, w, _np(dx), _np(dw), _f32()]
  if _rank(w) == rank:
    return f"ml.sum({conv[0]} * {conv[1]}{tail}) / ml.sum({conv[1]}{tail})", ops
  if _rank(w) != 1 or not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
    return None
  ax = axis % rank       # 1-D weights along the axis: their total (a scalar) divides every sum, as jnp's
  wx = f"{conv[1]}[{', '.join(':' if i == ax else 'None' for i in range(rank))}]" if rank > 1 else conv[1]
  return f"ml.sum({conv[0]} * {wx}{tail}) / ml.sum({conv[1]})", ops


def _count(a):
  """The number of elements jnp.average's axis reduces (a static axis of a tensor of known shape)."""
  shape = getattr(getattr(a["a"], "type", None), "shape", ())
  axes = a["axis"] if isinstance(a["axis"], (tuple, list)) else (a["axis"],)
  n = 1
  for ax in axes:
    n *= shape[ax]
  return f"{float(n)!r}"


def _logaddexp(a):
  """jnp.logaddexp(x1, x2): lax's, the larger plus log1p(exp(-|x1 - x2|)), x1 + x2 where the difference is NaN
  (equal infinities, NaN); integers computed in float32."""
  xs = a["args"]
  if len(xs) != 2:
    return None
  d0, d1 = _dtype(xs[0]), _dtype(xs[1])
  conv = []
  for i, (d, other) in enumerate(((d0, d1), (d1, d0))):
    if d is not None and (not d.is_float or other is not None and other.is_float and other != d):
      conv.append(f"{{{i}}}.astype({{2}})")       # jnp's promotion: float32 for integers and mixed floats
    else:
      conv.append(f"{{{i}}}")
  p, q = conv
  form = f"ml.where(ml.isnan({p} - {q}), {p} + {q}, ml.maximum({p}, {q}) + ml.log1p(ml.exp(-ml.abs({p} - {q}))))"
  from .activation_forms import widened_pair      # (16-bit: in float32, rounded once, as XLA on the GPU)
  form, ops = widened_pair(form, xs[0], xs[1])
  return form, [*ops, _f32()]


def _inf(o):
  try:
    return o is not None and not isinstance(o, (str, bool)) and math.isinf(float(o))
  except (TypeError, ValueError):
    return False


def _vector_norm(x, order, axis, keepdims, conv="{0}"):
  """A vector norm's form: jnp.linalg.vector_norm's, by order (2, 1, +-inf, 0, another number p)."""
  tail = _kw(axis, keepdims)
  if order is None or isinstance(order, (int, float)) and not isinstance(order, bool) and order == 2:
    return f"ml.sqrt(ml.sum({conv} * {conv}{tail}))"
  if _inf(order):
    return f"ml.{'max' if float(order) > 0 else 'min'}(ml.abs({conv}){tail})"
  if isinstance(order, (int, float)) and not isinstance(order, bool) and order == 0:
    return f"ml.sum({conv} != 0{tail}, dtype={{8}})"
  if isinstance(order, (int, float)) and not isinstance(order, bool) and order == 1:
    return f"ml.sum(ml.abs({conv}){tail})"
  if isinstance(order, (int, float)) and not isinstance(order, bool) and math.isfinite(order):
    return f"ml.pow(ml.sum(ml.pow(ml.abs({conv}), {float(order)!r}){tail}), {1.0 / order!r})"
  return None


def _norm(a):
  """jnp.linalg.norm(x, ord, axis, keepdims): an L2 or Frobenius norm, a vector norm along one axis (or of a
  1-D x), a matrix's 1-, -1-, inf- and -inf-norms over two axes, as jnp's source computes them; None for the
  2-norm, -2-norm and nuclear norm of a matrix (singular values)."""
  x, order, axis, keep = a["x"], a["ord"], a["axis"], a["keepdims"]
  rank, conv = _rank(x), _inexact(x)
  if rank is None or not _static(a, "axis", "keepdims") or _dtype(x) is None:
    return None
  ops = [x] + [None] * 7 + [_np(_dtype(x)) if _is_float(x) else _f32(), _f32()]
  if axis is None and order is None:
    return f"ml.sqrt(ml.sum({conv} * {conv}{_kw(None, keep)}))", ops
  axes = tuple(range(rank)) if axis is None else tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
  if not all(-rank <= i < rank for i in axes) or len(set(i % rank for i in axes)) != len(axes):
    return None
  axes = tuple(i % rank for i in axes)
  if len(axes) == 1:
    form = _vector_norm(x, 2 if order is None else order, axes[0], keep, conv)
    return None if form is None else (form, ops)
  if len(axes) != 2:
    return None
  r, c = axes
  if order is None or order in ("f", "fro"):
    return f"ml.sqrt(ml.sum({conv} * {conv}{_kw(axes, keep)}))", ops
  if order in (1, -1) and not isinstance(order, bool):
    inner, outer = r, (c - 1 if not keep and c > r else c)
  elif _inf(order):
    inner, outer = c, (r - 1 if not keep and r > c else r)
  else:
    return None
  kind = "max" if float(order) > 0 else "min"
  return f"ml.{kind}(ml.sum(ml.abs({conv}){_kw(inner, keep)}){_kw(outer, keep)})", ops


def _matrix_norm(a):
  """jnp.linalg.matrix_norm(x, keepdims=False, ord='fro'): jnp.linalg.norm over the last two axes (probe 52d)."""
  rank = _rank(a["x"])
  if rank is None or rank < 2:
    return None
  return _norm({"x": a["x"], "ord": a["ord"], "axis": (rank - 2, rank - 1), "keepdims": a["keepdims"]})


def _vector_norm_call(a):
  """jnp.linalg.vector_norm(x, axis=None, keepdims=False, ord=2): of every element where axis is None."""
  x = a["x"]
  if not _static(a, "axis", "keepdims") or not _is_float(x):
    return None
  form = _vector_norm(x, a["ord"], a["axis"], a["keepdims"])
  return None if form is None else (form, [x] + [None] * 7 + [_np(_dtype(x))])


def _prod(a):
  """jnp.prod along one axis (or of a 1-D x): the last element of the running product along it (ml.cumprod,
  whose 8- and 16-bit integers and booleans give int32 as jnp.prod's promotion does), as its hint wrote it."""
  x, axis, keep = a["a"], a["axis"], a["keepdims"]
  rank = _rank(x)
  promote = a.get("promote_integers")
  if rank is None or not _static(a, "axis", "keepdims") or not isinstance(promote, (bool, np.bool_)):
    return None
  if axis is None and rank == 1:
    axis = 0
  if isinstance(axis, (tuple, list)) and len(axis) == 1:
    axis = axis[0]
  if not isinstance(axis, int) or not -rank <= axis < rank:
    return None
  ax = axis % rank
  idx = ", ".join(("-1:" if keep else "-1") if i == ax else ":" for i in range(rank))
  dt = ", dtype={1}" if a.get("dtype") is not None else ""
  d = _dtype(x)
  if not promote and dt == "" and d is not None and d.is_int and d.bits < 32:
    dt = ", dtype={1}"            # (promote_integers=False: a narrow int product in its own dtype, as jnp's)
    return f"ml.cumprod({{0}}, axis={ax}{dt})[{idx}]", [x, d]
  return f"ml.cumprod({{0}}, axis={ax}{dt})[{idx}]", [x, a.get("dtype")]


def _nanprod(a):
  """jnp.nanprod: jnp.prod's form of the elements with NaN replaced by 1 (integers as jnp.prod's; probe 52d)."""
  got = _prod({**a, "promote_integers": True})
  if got is None or not _is_float(a["a"]):
    return got
  form, ops = got
  return form.replace("{0}", "ml.where(ml.isnan({0}), 1.0, {0})", 1), ops


def _lax_reduce(kind):
  """jax.lax.reduce_max / reduce_min / reduce_sum / reduce_prod over `axes`, keeping the operand's dtype (an int8
  sum wraps in int8, as lax's); reduce_and / reduce_or of booleans are ml.all / ml.any, of integers (and
  reduce_xor of either) bitwise reductions (ufunc_reduce.bitwise, probe 52d)."""
  def make(a):
    x, axes = a["operand"], a["axes"]
    d, rank = _dtype(x), _rank(x)
    if d is None or rank is None or not isinstance(axes, (tuple, list)) or not _axis_ok(tuple(axes)):
      return None
    axes = tuple(axes)
    if kind in ("all", "any", "xor"):
      if kind != "xor" and d == DType.bool_:
        return f"ml.{kind}({{0}}, axis={axes!r})", [x]
      from .ufunc_reduce import bitwise      # (of integers, bitwise; xor of booleans too: probe 52d)
      return bitwise({"all": "bit_and", "any": "bit_or", "xor": "bit_xor"}[kind], x, axes, False)
    if kind == "prod":
      if len(axes) != 1:
        return None
      made = _prod({"a": x, "axis": axes[0], "keepdims": False, "promote_integers": True, "dtype": d})
      return made
    if d == DType.bool_:
      return None
    return f"ml.{kind}({{0}}, axis={axes!r}" + (", dtype={1})" if kind == "sum" else ")"), [x, d]
  return make


def jnp_prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None, promote_integers=True):
  """jnp.prod's parameters, for the method `v.prod(axis=1)` of a register tensor (tracer/subscripts.py binds it
  to v): traced as jnp.prod's form (jnp_calls.STAND_INS), without importing jax into the frontend."""
  raise NotImplementedError("traced, never called")


def _scipy_softmax(kind):
  """jax.scipy.special.softmax / log_softmax: jax.nn's over `axis`, whose default here is every axis (probe 52d)."""
  def make(a):
    x, axis = a["x"], a["axis"]
    rank = _rank(x)
    if rank is None or not _axis_ok(axis):
      return None
    axis = tuple(range(rank)) if axis is None else tuple(axis) if isinstance(axis, (tuple, list)) else axis
    return f"ml.{kind}({{0}}, axis={axis!r})", [x]
  return make


def _vecdot(a):
  """jnp.vecdot / jnp.linalg.vecdot of real register tensors of one dtype (the array API's; a contrastive loss's
  or a cosine's row dot products, probe 57f): the sum of their product along `axis` (broadcast first, as jnp's);
  16-bit floats multiplied and summed in float32 and rounded once, as XLA's dot. Was MG003."""
  x, y, axis = a["x1"], a["x2"], a["axis"]
  d, e = _dtype(x), _dtype(y)
  if d is None or d != e or d == DType.bool_ or a.get("precision") is not None or a.get(
      "preferred_element_type") is not None or not isinstance(axis, int) or isinstance(axis, bool):
    return None
  if d.is_float and d.bits < 32:
    return f"ml.sum({{0}}.astype(jnp.float32) * {{1}}.astype(jnp.float32), axis={axis}).astype({{0}}.dtype)", [x, y]
  return f"ml.sum({{0}} * {{1}}, axis={axis})", [x, y]


# (lib, name) -> (the parameters the form reads, its maker): merged into jnp_calls.SHAPED
STATS = {
    ("jax.scipy.special", "softmax"): (("x", "axis"), _scipy_softmax("softmax")),
    ("jax.scipy.special", "log_softmax"): (("x", "axis"), _scipy_softmax("log_softmax")),
    ("jnp", "nansum"): (("a", "axis", "dtype", "keepdims", "initial", "where"), _nan_reduction("sum")),
    ("jnp", "nanmax"): (("a", "axis", "keepdims", "initial", "where"), _nan_reduction("max")),
    ("jnp", "nanmin"): (("a", "axis", "keepdims", "initial", "where"), _nan_reduction("min")),
    ("jnp", "nanmean"): (("a", "axis", "dtype", "keepdims", "where"), _nan_stat("mean")),
    ("jnp", "nanvar"): (("a", "axis", "dtype", "ddof", "keepdims", "where", "mean"), _nan_stat("var")),
    ("jnp", "nanstd"): (("a", "axis", "dtype", "ddof", "keepdims", "where", "mean"), _nan_stat("std")),
    ("jnp", "ptp"): (("a", "axis", "keepdims"), _ptp),
    ("jnp", "count_nonzero"): (("a", "axis", "keepdims"), _count_nonzero),
    ("jnp", "average"): (("a", "axis", "weights", "keepdims", "returned"), _average),
    ("jnp", "nanprod"): (("a", "axis", "dtype", "keepdims"), _nanprod),
    ("jnp", "logaddexp"): (("args",), _logaddexp),
    **{(lib, "vecdot"): (("x1", "x2", "axis", "precision", "preferred_element_type"), _vecdot)
       for lib in ("jnp", "jnp.linalg")},
    ("jnp.linalg", "norm"): (("x", "ord", "axis", "keepdims"), _norm),
    ("jnp.linalg", "matrix_norm"): (("x", "keepdims", "ord"), _matrix_norm),
    ("jnp.linalg", "vector_norm"): (("x", "axis", "keepdims", "ord"), _vector_norm_call),
    ("jnp", "prod"): (("a", "axis", "dtype", "keepdims", "promote_integers"), _prod),
    **{("jax.lax", f"reduce_{k}"): (("operand", "axes"), _lax_reduce(v)) for k, v in (
        ("max", "max"), ("min", "min"), ("sum", "sum"), ("prod", "prod"), ("and", "all"), ("or", "any"), ("xor", "xor"))},
}
