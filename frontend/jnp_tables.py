"""jnp's functions of a small table, in a kernel (probe 51n): `jnp.polyval(c, x)`, `jnp.isin(x, t)` and
`jnp.interp(x, xp, fp)` of a 1-D register table (a static one, `jnp.array([...])`, is a register vector since
static_tables.py) and a register `x`, as jax defines them:

- `jnp.polyval(p, x)`: Horner's rule from jnp's zero, `y = 0 * x + p[0]`, then `y = y * x + p[k]`, in the operands'
  promoted dtype (jnp's promote_dtypes: int32 operands both stay int32);
- `jnp.isin(element, test_elements, invert=False)`: `element == t[0] | element == t[1] | ...` (`~` of it inverted);
- `jnp.interp(x, xp, fp, left=None, right=None)`: jax's _interp, the segment `i` of each x
  `ml.clip(ml.searchsorted(xp, x, side='right'), 1, n - 1)`, the line through its knots (fp[i - 1] where the knots
  are closer than np.spacing(eps)), `left` / `right` (fp[0], fp[-1] by default) outside xp; 'extrapolate' of either
  extends the end segment's line. `period=` keeps its MG003.

Makers as jnp_sized.py's: the call's arguments bound by jnp's signature give (the form, its operands), or None
(the call's MG003 stands)."""
from __future__ import annotations

import numpy as np

from .jnp_forms import _dtype, _kind, _shape
from .static_tables import known

MAX = 256        # table lengths unrolled (isin, polyval), as static_tables.MAX


def _table(t, pads) -> int | None:
  """The length of the 1-D register table `t` (its own, in a padded trace: `pads`), or None where it is not one of
  at most MAX elements."""
  s = _shape(t)
  s = tuple(pads.get(t.id, s)) if s is not None else None
  return s[0] if s is not None and len(s) == 1 and 1 <= s[0] <= MAX and _kind(t) in ("int", "float", "bool") \
      else None


_WIDTH = {"float32": 3, "float16": 1, "bfloat16": 1}


def _inexact(a, b) -> str | None:
  """The dtype value jnp's promote_dtypes_inexact gives DTypes `a` and `b` (None where it is no float)."""
  fa, fb = a is not None and a.is_float, b is not None and b.is_float
  if a is None or b is None:
    return None
  if fa and fb:
    return a.value if a == b else "float32" if a.bits < 64 and b.bits < 64 else None
  return a.value if fa else b.value if fb else "float32"


def _promoted(a, b) -> str | None:
  """The dtype value jnp's promote_dtypes gives DTypes `a` and `b` (integers stay integers: jnp.polyval of int32
  operands is int32); None where this does not say."""
  if a is None or b is None:
    return None
  if a.is_int and b.is_int:
    return a.value if a == b else None if a.is_signed != b.is_signed else max(a, b, key=lambda d: d.bits).value
  return _inexact(a, b)


def _static_polyval(p, x, got):
  texts, d, _ = got
  common = _promoted(d, _dtype(x))
  if common is None or _kind(x) not in ("int", "float"):
    return None
  xs = "{0}" if _dtype(x).value == common else f"{{0}}.astype(ml.{common})"
  y = f"({xs} * 0 + {texts[0]})"
  for c in texts[1:]:
    y = f"({y} * {xs} + {c})"
  return y, [x]


def _static_isin(e, got, invert):
  texts, d, _ = got
  if d.value == "bool" or _kind(e) not in ("int", "float"):
    return None
  es = "{0}.astype(ml.float32)" if d.is_float and _kind(e) == "int" else "{0}"
  hit = "(" + " | ".join(f"({es} == {c})" for c in dict.fromkeys(texts)) + ")"
  return ("~" + hit if invert else hit), [e]


def _polyval(a, pads):
  p, x = a["p"], a["x"]
  if known(p) is not None and _shape(x) is not None:       # jnp.polyval(jnp.array([...]), x): its numbers
    return _static_polyval(p, x, known(p))
  if _listed(p) is not None and _shape(x) is not None:     # jnp.polyval([0.5, -1.0, 2.0], x): as jnp.asarray's
    form, ops = _static_polyval(p, x, _listed(p)) or (None, None)
    return None if form is None else (form, ops)
  n = _table(p, pads)
  if n is None or _shape(x) is None or _kind(x) not in ("int", "float") or _kind(p) not in ("int", "float") or (
      a.get("unroll", 16) not in (None,) and not isinstance(a.get("unroll", 16), int)):
    return None
  xs = "{1}"                # (jnp.polyval promotes as jnp's arithmetic: ints stay ints)
  y = f"({xs} * 0 + {{0}}[0])"
  for k in range(1, n):
    y = f"({y} * {xs} + {{0}}[{k}])"
  return y, [p, x]


def _isin(a, pads):
  e, t, invert = a["element"], a["test_elements"], a["invert"]
  if _shape(e) is None or not isinstance(invert, (bool, np.bool_)) or a.get("method", "auto") not in (
      "auto", "compare_all"):
    return None
  if known(t) is not None:                                 # jnp.isin(x, jnp.array([1, 5, 7])): its numbers
    return _static_isin(e, known(t), invert)
  if _kind(t) in ("int", "float", "bool") and _shape(t) is None:      # a Python number
    hit = "({0} == {1})"
  else:
    n = _table(t, pads)
    if n is None:
      return None
    hit = "(" + " | ".join(f"({{0}} == {{1}}[{k}])" for k in range(n)) + ")"
  return ("~" + hit if invert else hit), [e, t]


def _float(x) -> str:
  """The inexact dtype jnp promotes `x` to (float32 of integers), as an ml name."""
  d = _dtype(x)
  return f"ml.{d.value}" if _kind(x) == "float" else "ml.float32"


def _end(v, default: str, given: str) -> str | None:
  """The form of interp's `left` / `right`: its default, the number given, None for 'extrapolate' (the end
  segment's line), "bad" for what the form cannot take."""
  if v is None:
    return default
  if isinstance(v, str):
    return None if v == "extrapolate" else "bad"
  return given if _kind(v) in ("int", "float") and _shape(v) in (None, ()) else "bad"


def _eps(common: str) -> float:
  """jax's interp's tolerance of two knots, np.spacing(eps) of the dtype."""
  import ml_dtypes
  return float(np.spacing(ml_dtypes.finfo(np.dtype(common[3:])).eps))


def _static_interp(x, xp, fp, left, right):
  """jnp.interp of static knots (jnp.array tables): the segment of each x found by comparisons with the knots (jax
  searches xp, side='right', clipped to 1..n-1: on increasing knots the last k with x >= xp[k - 1]), its line's
  numbers computed here in the dtypes jnp computes them in; None where the form does not hold them (fp of another
  dtype than x's and xp's common one: the register form)."""
  (xt, xd, xv), (ft, fd, fv) = known(xp), known(fp)
  common = _inexact(xd, _dtype(x))
  if common is None or _inexact(fd, fd) != common or len(xt) != len(ft):
    return None
  from .dtypes import DType
  npd = DType(common).np
  xk, fk = xv.astype(npd), fv.astype(npd)
  lit = lambda v: repr(float(v)) if np.isfinite(float(v)) else f"float({str(float(v))!r})"
  eps = _eps("ml." + common)
  xs = "{0}" if _dtype(x).value == common else f"{{0}}.astype(ml.{common})"
  f = None
  for k in range(1, len(xk)):
    dx, df = (xk[k] - xk[k - 1]).astype(npd), (fk[k] - fk[k - 1]).astype(npd)
    seg = lit(fk[k - 1]) if abs(float(dx)) <= eps else \
        f"({lit(fk[k - 1])} + (({xs} - {lit(xk[k - 1])}) / {lit(dx)}) * {lit(df)})"
    f = seg if f is None else f"ml.where({xs} >= {lit(xk[k - 1])}, {seg}, {f})"
  if left != "none":
    f = f"ml.where({xs} < {lit(xk[0])}, {lit(fk[0]) if left is None else left}, {f})"
  if right != "none":
    f = f"ml.where({xs} > {lit(xk[-1])}, {lit(fk[-1]) if right is None else right}, {f})"
  return f


def _interp(a, pads):
  x, xp, fp = a["x"], a["xp"], a["fp"]
  if known(xp) is not None and known(fp) is not None and _shape(x) is not None and _kind(x) in ("int", "float") \
      and a["period"] is None:       # jnp.interp(x, jnp.array([...]), jnp.array([...])): their numbers
    ends = [None if v is None else "none" if v == "extrapolate" else "bad" if isinstance(v, str) or _kind(v) not in (
        "int", "float") or _shape(v) not in (None, ()) else f"{{{i}}}" for v, i in ((a["left"], 3), (a["right"], 4))]
    form = None if "bad" in ends else _static_interp(x, xp, fp, *ends)
    if form is not None:
      return form, [x, xp, fp, a["left"], a["right"]]
  n = _table(xp, pads)
  if (n is None or n < 2 or _table(fp, pads) != n or _shape(x) is None or a["period"] is not None
      or "bool" in (_kind(x), _kind(xp), _kind(fp)) or _kind(x) is None):
    return None
  left, right = _end(a["left"], "_fp_[0]", "{3}"), _end(a["right"], "_fp_[-1]", "{4}")
  if "bad" in (left, right):
    return None
  fx, fxp, ffp = _float(x), _float(xp), _float(fp)
  common = fx if fx == fxp else "ml.float32"       # (promote_dtypes_inexact(x, xp): 16-bit pairs of one dtype)
  cast = lambda v, i, d: f"{{{i}}}" if _dtype(v) is not None and _dtype(v).value == d[3:] else f"{{{i}}}.astype({d})"
  eps = repr(_eps(common))
  f = (f"(lambda _i_: (lambda _dx_, _x0_, _f0_: ml.where(ml.abs(_dx_) <= {eps}, _f0_, _f0_ + ((_x_ - _x0_) /"
       f" ml.where(ml.abs(_dx_) <= {eps}, 1, _dx_)) * (_fp_[_i_] - _f0_)))(_xp_[_i_] - _xp_[_i_ - 1],"
       f" _xp_[_i_ - 1], _fp_[_i_ - 1]))(ml.clip(ml.searchsorted(_xp_, _x_, side='right'), 1, {n - 1}))")
  if left is not None:
    f = f"ml.where(_x_ < _xp_[0], {left}, {f})"
  if right is not None:
    f = f"ml.where(_x_ > _xp_[-1], {right}, {f})"
  form = f"(lambda _x_, _xp_, _fp_: {f})({cast(x, 0, common)}, {cast(xp, 1, common)}, {cast(fp, 2, ffp)})"
  return form, [x, xp, fp, a["left"], a["right"]]


def _count(q, got, side: str) -> str | None:
  """jnp.searchsorted(table, q, side) of a static table as a sum of comparisons with its numbers (any shape of
  queries), in jax's total order: NaN after every number (a NaN query counts them all), -0.0 equal to 0.0."""
  texts, d, vals = got
  if _kind(q) not in ("int", "float") or d.value == "bool":
    return None
  nan = _kind(q) == "float"
  terms = []
  for t, v in zip(texts, vals.tolist()):
    if isinstance(v, float) and v != v:          # a NaN knot: after every number, equal to a NaN query
      if side == "right" and nan:
        terms.append("ml.isnan({0})")
      continue
    c = f"({t} {'<' if side == 'left' else '<='} {{0}})"
    terms.append(f"({c} | ml.isnan({{0}}))" if nan else c)
  return "(" + " + ".join(f"{t}.astype(ml.int32)" for t in terms) + ")" if terms else None


def _searchsorted(a, pads):
  t, q, side = a["a"], a["v"], a["side"]
  if known(t) is None or _shape(q) is None or side not in ("left", "right") or a.get("sorter") is not None or \
      a.get("method", "scan") not in ("scan", "scan_unrolled", "sort", "compare_all"):
    return None                  # (a register table's search: ml.searchsorted's, as mapped)
  form = _count(q, known(t), side)
  return None if form is None else (form, [q])


def _digitize_static(a, pads):
  x, bins, right = a["x"], a["bins"], a["right"]
  got = known(bins)
  if got is None or _shape(x) is None or a["method"] is not None or not isinstance(right, (bool, np.bool_)):
    return None
  side = "left" if right else "right"
  texts, d, vals = got
  if vals[-1] >= vals[0]:
    form = _count(x, got, side)
  else:                          # decreasing bins: searched flipped, counted from the end (jax's digitize)
    form = _count(x, (texts[::-1], d, vals[::-1]), side)
    form = form and f"({len(texts)} - {form})"
  return None if form is None else (form, [x])


def _convolve(a, pads):
  """jnp.convolve(x, taps, mode='same') of a 1-D register x and a static table of taps (jnp.array([0.25, 0.5, 0.25])):
  the taps' sum over x shifted, zero outside it (a Gaussian or box filter of a row); None for any other call."""
  x, w, mode = a["a"], a["v"], a["mode"]
  got, s = known(w), _shape(x)
  if got is None or mode != "same" or s is None or len(s) != 1 or tuple(pads.get(x.id, s)) != tuple(s) or \
      _kind(x) != "float" or got[1].value == "bool" or len(got[0]) > s[0] or a.get("precision") is not None or \
      a.get("preferred_element_type") is not None:
    return None
  texts, n, k = got[0], s[0], len(got[0])
  common = _inexact(got[1], _dtype(x))
  if common is None or common != _dtype(x).value:
    return None
  terms = []
  for j, t in enumerate(texts):
    sh = (k - 1) // 2 - j                        # out[i] takes x[i + sh] * w[j]
    shifted = "{0}" if sh == 0 else (f"ml.where((ml.arange({n}) + {sh} >= 0) & (ml.arange({n}) + {sh} < {n}),"
                                    f" ml.roll({{0}}, {-sh}), 0)")
    terms.append(f"{t} * {shifted}")
  return "(" + " + ".join(terms) + ")", [x]


def _taps(w, x, pads):
  """The taps of a 1-D convolution of the float register vector `x` as texts of the form (a static table's numbers,
  or `{1}[j]` of a register vector of x's dtype), or None."""
  got = known(w)
  if got is not None:
    common = _inexact(got[1], _dtype(x)) if got[1].value != "bool" else None
    return list(got[0]) if common == _dtype(x).value else None
  k = _table(w, pads)
  if k is None or _dtype(w) != _dtype(x):
    return None
  return [f"{{1}}[{j}]" for j in range(k)]


def _mixed(x, w) -> bool:
  """A float register row and float register taps of two dtypes whose promotion is float32 (jnp's: bfloat16 and
  float32, float16 and bfloat16): the convolution is float32's, of both converted (probe 54d)."""
  dx, dw = _dtype(x), _dtype(w)
  if dx is None or dw is None or dx == dw or not getattr(dx, "is_float", False) or \
      not getattr(dw, "is_float", False):
    return False
  from .ops.promotion import arithmetic_in
  return str(arithmetic_in(dx, dw)) == "float32"


_TAPS_MAX = 32     # taps unrolled by the full and valid modes (a stencil's, a short filter's)


def _convolution(flip):
  """jnp.convolve (flip False) and jnp.correlate (flip True: the taps reversed, jnp's definition for real numbers)
  of a 1-D float register vector x of n elements and k <= n taps (a static table or a register vector), any mode
  (probe 53i: 'full' and 'valid', register taps, and correlate were MG003): out[i] = sum_j w[j] * x[i + s - j] with
  s = 0 ('full', n + k - 1 elements), (k - 1) // 2 ('same', n) or k - 1 ('valid', n - k + 1), x zero outside itself
  (concatenated zeros; for 'same' x rolled and masked), summed over the taps in order; float16 and bfloat16 in float32, rounded once (XLA's
  convolution accumulates in float32)."""
  def make(a, pads):
    x, w, mode = a["a"], a["v"], a["mode"]
    s = _shape(x)
    if not flip and mode == "same" and known(w) is not None:
      return _convolve(a, pads)          # (probe 51n's form, unchanged)
    if s is None or len(s) != 1 or tuple(pads.get(x.id, s)) != tuple(s) or _kind(x) != "float" or \
        mode not in ("full", "same", "valid") or a.get("precision") is not None or \
        a.get("preferred_element_type") is not None:
      return None
    taps, mixed = _taps(w, x, pads), _mixed(x, w)
    if mixed:           # (probe 54d: a bfloat16 row and float32 taps, jnp's promotion: both in float32)
      k = _table(w, pads)
      taps = None if k is None else [f"{{1}}[{j}].astype(ml.float32)" for j in range(k)]
    n = s[0]
    if taps is None or not 1 <= len(taps) <= min(n, _TAPS_MAX):
      return None
    k = len(taps)
    if flip:
      taps = taps[::-1]
    start = {"full": 0, "same": (k - 1) // 2, "valid": k - 1}[mode]
    length = {"full": n + k - 1, "same": n, "valid": n - k + 1}[mode]
    wide = str(_dtype(x)) in ("float16", "bfloat16") or bool(mixed)
    xs = "{0}.astype(ml.float32)" if wide else "{0}"
    out = "ml.float32" if mixed else "{0}.dtype"
    if mode == "same":          # (x rolled and masked, as _convolve's: no tensor of another length than n)
      terms = []
      for j, t in enumerate(taps):
        sh = start - j
        terms.append(f"{t} * " + ("_x_" if sh == 0 else f"ml.where((ml.arange({n}) + {sh} >= 0) & (ml.arange({n}) +"
                                                         f" {sh} < {n}), ml.roll(_x_, {-sh}), 0)"))
      form = f"(lambda _x_: {' + '.join(terms)})({xs})"
      return (f"({form}).astype({out})" if wide else form), [x, w]
    front, back = max(0, k - 1 - start), max(0, length - 1 + start - (n - 1))
    parts = [f"ml.zeros(({m},), {'ml.float32' if wide else '{0}.dtype'})" for m in (front, back)]
    if front or back:
      xs = f"ml.concatenate([{', '.join(p for p, m in zip([parts[0], xs, parts[1]], [front, 1, back]) if m)}])"
    terms = []
    for j, t in enumerate(taps):
      lo = front + start - j
      terms.append(f"{t} * _xp_[{lo}:{lo + length}]")
    form = f"(lambda _xp_: {' + '.join(terms)})({xs})"
    return (f"({form}).astype({out})" if wide else form), [x, w]
  return make


def _listed(p):
  """A list or tuple of Python numbers (`jnp.polyval([0.5, -1.0, 2.0], x)`) as a static table's (texts, DType,
  numbers): float32 where any is a float, else int32 (jnp.asarray of it without x64); None otherwise."""
  from .dtypes import DType
  from .static_tables import _number
  if not isinstance(p, (list, tuple)) or not 1 <= len(p) <= MAX or not all(
      isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, (bool, np.bool_)) for c in p):
    return None
  d = DType.f32 if any(isinstance(c, (float, np.floating)) for c in p) else DType.i32
  vals = np.asarray(p, dtype=d.np)
  if d == DType.i32 and any(int(c) != int(v) for c, v in zip(p, vals.tolist())):
    return None
  return [_number(v, d) for v in vals.tolist()], d, vals


def _scipy_signal(flip):
  """jax.scipy.signal.convolve / correlate of two 1-D tiles, direct (method 'auto' or 'direct'): jnp.convolve's and
  jnp.correlate's numbers in every mode (jax's 1-D definition; probe 72b: they were MG003)."""
  make = _convolution(flip)

  def scipy_make(a, pads):
    if a.get("method") not in ("auto", "direct"):
      return None
    return make({"a": a["in1"], "v": a["in2"], "mode": a["mode"], "precision": a.get("precision"),
                 "preferred_element_type": None}, pads)
  return scipy_make


FORMS = {("jnp", "polyval"): _polyval, ("jnp", "convolve"): _convolution(False),
         ("jax.scipy.signal", "convolve"): _scipy_signal(False), ("jax.scipy.signal", "correlate"): _scipy_signal(True),
         ("jnp", "correlate"): _convolution(True), ("jnp", "isin"): _isin,
         ("jnp", "interp"): _interp,
         ("jnp", "searchsorted"): _searchsorted}
