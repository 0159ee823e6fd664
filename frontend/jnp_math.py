"""Elementwise math of register values that ml has no function for, called as Pallas kernels call it: jnp's and lax's
hyperbolic functions (`sinh`, `cosh`, `arcsinh`/`asinh`, `arccosh`/`acosh`, `arctanh`/`atanh`), jnp's `deg2rad`/
`radians`, `rad2deg`/`degrees`, `sinc`, `logaddexp2` and `heaviside`, jax.scipy.special's `expit` and `logit`, and
jax.nn's `soft_sign`, `squareplus` and `glu`. Each is written as XLA computes it (the decomposition of the chlo op
jax lowers to, read from XLA's compiled HLO, or jax's own Python definition), in ml.* functions, so the numbers and
the dtype are jnp's: sinh and cosh of float16 or bfloat16 compute in float32 and round once (XLA upcasts them), and
so do the forms of jax's Python definitions (deg2rad, logit, soft_sign, squareplus: their constants rounded to the
operand's dtype first, as jax's weakly typed constants are), the inverse functions and sinc compute in the
operand's dtype, each step rounded (XLA does not); an integer or bool operand is
float32 first (jnp's inexact functions; lax's refuse one, and so do these forms: its MG003 stands). Traced by
jnp_calls.formula as the other SHAPED forms are: (the parameters a form reads, a function of the bound arguments
giving (the form, its operands) or None)."""
from __future__ import annotations

import math

from .activation_forms import widened, widened_pair
from .jnp_forms import _dtype, _kind

_LOG_HALF = math.log(0.5)
_LN2 = math.log(2.0)
# sqrt of the dtype's largest value (asinh's overflow bound) and half of it (acosh's), as XLA rounds them to the dtype
_SQRT_MAX = {"float32": 1.8446743e19, "float16": 255.875, "bfloat16": 1.83747e19}
_HALF_MAX = {"float32": 1.7014117e38, "float16": 32752.0, "bfloat16": 1.69477e38}


def _shape(a, x):
  """x's own shape (unpadded where the compiler computes it padded: a (5, 40) read), None for a number."""
  shape = getattr(getattr(x, "type", None), "shape", None)
  if shape is None or not isinstance(shape, tuple):
    return None
  return tuple(a["_shape_of"](x)) if "_shape_of" in a else shape


def _float(x, lax):
  """The dtype name of a float operand; 'float32' for jnp's integer or bool one; None for another (lax's)."""
  k = _kind(x)
  if k == "float" and _dtype(x) is not None:
    name = str(_dtype(x))
    return name if name in _SQRT_MAX else None
  return "float32" if k in ("int", "bool") and not lax and _dtype(x) is not None else None


def _operand(x, wide=False):
  """{0} as the form computes it: float32 first for an integer, bool, or (`wide`) 16-bit float operand."""
  return "{0}" if _kind(x) == "float" and (not wide or str(_dtype(x)) == "float32") else "{0}.astype(ml.float32)"


def _unary(make, lax=False, wide=False, jnp_level=False):
  """A form of one operand x: `make(X, dtype)` of the operand as computed (X), converted back where `wide`;
  `jnp_level` (jax's Python definition of jnp ops): a 16-bit operand's form in float32 with its constants rounded
  to the operand's dtype, rounded once (activation_forms.widened: XLA on the GPU)."""
  def form(a):
    x = a["x"]
    d = _float(x, lax)
    if d is None:
      return None
    if jnp_level and _kind(x) == "float" and d in ("float16", "bfloat16"):
      return widened(make("{0}", d), d), [x]
    body = make(_operand(x, wide), "float32" if wide else d)
    if wide and d != "float32":
      body = f"({body}).astype({{0}}.dtype)"         # sinh of float16: in float32, rounded once
    return body, [x]
  return form


def _sinh(x, d):
  e = f"ml.expm1({x})"
  return (f"ml.where(ml.abs({x}) < 1, ({e} + {e} / ({e} + 1)) * 0.5,"
          f" ml.exp({x} + {_LOG_HALF!r}) - ml.exp({_LOG_HALF!r} - {x}))")


def _cosh(x, d):
  return f"ml.exp({x} + {_LOG_HALF!r}) + ml.exp({_LOG_HALF!r} - {x})"


def _asinh(x, d):
  a = f"ml.abs({x})"
  sign = f"ml.where({x} > 0, 1, ml.where({x} < 0, -1, {x}))"
  return (f"{sign} * ml.where({a} >= {_SQRT_MAX[d]!r}, ml.log({a}) + {_LN2!r},"
          f" ml.log1p({a} + {x} * {x} / (ml.sqrt({x} * {x} + 1) + 1)))")


def _acosh(x, d):
  below = f"ml.sqrt({x} - 1)"
  return (f"ml.where({x} >= {_HALF_MAX[d]!r}, ml.log({x}) + {_LN2!r},"
          f" ml.log1p({below} * (ml.sqrt({x} + 1) + {below})))")


def _atanh(x, d):
  return f"ml.where(ml.abs({x}) > 1, float('nan'), (ml.log1p({x}) - ml.log1p(-{x})) * 0.5)"


_EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def _sinc(x, d):
  # jax 0.11's (the H200's): sin(u) / u of u = pi x, a Taylor series in u**2 where |u| < 1 (its terms down to the
  # dtype's eps), 0 at +-inf (jax 0.10 divided everywhere: NaN at +-inf, within an ulp or two elsewhere)
  coeffs = []
  for k in range(100):
    mag = 1.0 / math.factorial(2 * k + 1)
    coeffs.insert(0, (-1) ** k * mag)
    if mag <= _EPS[d]:
      break
  inf = f"(ml.abs({x}) == float('inf'))"
  u = f"ml.where({inf}, 1, {math.pi!r} * {x})"
  series_u = f"ml.where(ml.abs({u}) < 1, {u}, 0)"
  direct_u = f"ml.where(ml.abs({u}) < 1, ml.where({u} >= 0, 1, -1), {u})"
  series = repr(coeffs[0])
  for c in coeffs[1:]:
    series = f"({series}) * ({series_u} * {series_u}) + {c!r}"
  return f"ml.where({inf}, 0, ml.where(ml.abs({u}) < 1, {series}, ml.sin({direct_u}) / {direct_u}))"


def _pair(a):
  """(x1, x2, their common float dtype as jnp promotes them) where both are float (or one a Python number)."""
  x1, x2 = a["args"] if len(a.get("args", ())) == 2 else (a.get("x1"), a.get("x2"))
  ds = [_dtype(x) for x in (x1, x2) if _dtype(x) is not None]
  if not ds or any(_kind(x) != "float" for x in (x1, x2) if _dtype(x) is not None) or any(
      _dtype(x) is None and _kind(x) not in ("float", "int") for x in (x1, x2)):
    return None
  if len(ds) == 2 and ds[0] != ds[1]:
    from .ops.promotion import arithmetic_in
    up = arithmetic_in(ds[0], ds[1])
    return None if up is None else (x1, x2, up)
  return x1, x2, ds[0]


def _binary(make, wide=False):
  """A form of two float operands in their common dtype; `wide`: two of one 16-bit dtype (or one a Python number)
  in float32, rounded once (activation_forms.widened_pair)."""
  def form(a):
    got = _pair(a)
    if got is None:
      return None
    x1, x2, d = got
    conv = [f"{{{i}}}.astype({{2}})" if _dtype(x) is not None and _dtype(x) != d else f"{{{i}}}"
            for i, x in enumerate((x1, x2))]
    if wide and "astype" not in "".join(conv):
      f, ops = widened_pair(make(*conv), x1, x2)
      return f, [*ops, d]
    return make(*conv), [x1, x2, d]
  return form


def _logaddexp2(p, q):
  # lax's: the larger plus log1p(exp2(-|x1 - x2|)) / ln 2; x1 + x2 where the difference is NaN (equal infinities)
  return (f"ml.where(ml.isnan({p} - {q}), {p} + {q},"
          f" ml.maximum({p}, {q}) + {1 / _LN2!r} * ml.log1p(ml.exp2(-ml.abs({p} - {q}))))")


def _heaviside(p, q):
  # jnp's: 0 below zero, 1 above, x2 at zero, NaN at NaN
  return f"ml.where({p} < 0, 0, ml.where({p} > 0, 1, ml.where(ml.isnan({p}), {p}, {q})))"


def _glu(a):
  x, axis = a["x"], a["axis"]
  shape = _shape(a, x)
  if shape is None or _kind(x) != "float" or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
    return None
  axis %= len(shape)
  if shape[axis] % 2:
    return None
  h = shape[axis] // 2
  first = ", ".join(f":{h}" if i == axis else ":" for i in range(len(shape)))
  second = ", ".join(f"{h}:" if i == axis else ":" for i in range(len(shape)))
  return f"{{0}}[{first}] * ml.sigmoid({{0}}[{second}])", [x]


def _squareplus(a):
  x, b = a["x"], a["b"]
  if _kind(x) != "float" or _dtype(x) is None or isinstance(b, bool) or not isinstance(b, (int, float)):
    return None
  return widened("({0} + ml.sqrt({0} * {0} + {1})) / 2", str(_dtype(x))), [x, b]


def _cumlogsumexp(a):
  """lax.cumlogsumexp: an inclusive scan of lax's logaddexp (form_helpers.py; XLA combines in its own order: the
  sums agree to rounding), by ml.associative_scan."""
  from .form_helpers import logaddexp
  x, axis, reverse = a["operand"], a["axis"], a["reverse"]
  shape = _shape(a, x)
  if shape is None or _kind(x) != "float" or not isinstance(axis, int) or not isinstance(
      reverse, bool) or not -len(shape) <= axis < len(shape):
    return None
  return "ml.associative_scan({1}, {0}, reverse={2}, axis={3})", [x, logaddexp, reverse, axis % len(shape)]


def _median(a):
  """jnp.median along one axis of a 1-D or 2-D tile (form_helpers.median), or along the leading axis of a 3-D or wider
  tensor of at most 16 slices (form_helpers.median_of_slices); integers as float32, as jnp's."""
  from .form_helpers import MEDIAN_SLICES, median, median_of_slices
  x, axis, keepdims = a["a"], a["axis"], a["keepdims"]
  shape = _shape(a, x)
  if shape is not None and len(shape) >= 3 and axis in (0, -len(shape)) and 2 <= shape[0] <= MEDIAN_SLICES and \
      _kind(x) in ("float", "int") and a.get("out") is None and isinstance(keepdims, bool):
    n = shape[0]            # (a median filter's stacked shifts, HPSS: a sorting network of the slices; probe 72b)
    v = "{0}" if _kind(x) == "float" else "{0}.astype(ml.float32)"
    return f"{{1}}({v}, {n}, {(n - 1) // 2}, {n // 2}, {keepdims})", [x, median_of_slices]
  if shape is None or len(shape) not in (1, 2) or _kind(x) not in ("float", "int") or a.get("out") is not None \
      or not isinstance(keepdims, bool):
    return None
  if axis is None and len(shape) == 1:
    axis = 0
  if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
    return None
  axis %= len(shape)
  n = shape[axis]
  v = "{0}" if _kind(x) == "float" else "{0}.astype(ml.float32)"
  return f"{{1}}({v}, {axis}, {(n - 1) // 2}, {n // 2}, {n}, {keepdims})", [x, median]


def _select_n(a):
  """lax.select_n(which, *cases): cases[which]; a bool `which` picks cases[1] where it holds."""
  which, cases = a["which"], a["cases"]
  if not isinstance(cases, (tuple, list)) or not cases or _dtype(which) is None:
    return None
  kind = _kind(which)
  if kind == "bool" and len(cases) == 2:
    return "ml.where({0}, {2}, {1})", [which, *cases]
  if kind != "int" or len(cases) > 8:
    return None
  form = f"{{{len(cases)}}}"
  for i in range(len(cases) - 2, -1, -1):       # (an index past the last case is lax's undefined: the last case)
    form = f"ml.where({{0}} == {i}, {{{i + 1}}}, {form})"
  return form, [which, *cases]


_BITS_U32 = {"int32": "ml.bitcast({0}, ml.uint32)", "uint32": "{0}", "int16": "ml.bitcast({0}, ml.uint16).astype(ml.uint32)",
             "uint16": "{0}.astype(ml.uint32)", "int8": "ml.bitcast({0}, ml.uint8).astype(ml.uint32)",
             "uint8": "{0}.astype(ml.uint32)"}


def _bit_count(kind):
  """lax.population_count and lax.clz of 8- to 32-bit integers: the operand's bits zero-extended to uint32, counted
  by form_helpers' SWAR steps, in the operand's dtype."""
  def make(a):
    from . import form_helpers
    x = a["x"]
    u = _BITS_U32.get(str(_dtype(x)))
    if u is None:
      return None
    if kind == "clz":
      return f"{{1}}({{0}}, {u}, {int(str(_dtype(x)).lstrip('uint'))})", [x, form_helpers.clz]
    return f"{{1}}({{0}}, {u})", [x, form_helpers.population_count]
  return make


def _ends(a, x, shape, axis):
  """jnp.diff's prepend= and append= as parts concatenated to {0} along `axis` (probe 53i; they were MG003): a
  Python number (or a 0-d register value) broadcast to one slice of x, in x's dtype, as jnp broadcasts it (a float
  number meeting an integer x has no part: jnp would promote); a register tensor of x's rank and dtype as it is.
  (the form's text, the operands {1} and {2}, the axis's new length), or None."""
  form, ops, grown = "{0}", [x], shape[axis]
  one = tuple(1 if i == axis else n for i, n in enumerate(shape))
  for i, key in ((1, "prepend"), (2, "append")):
    v = a.get(key)
    ops.append(v)
    if v is None:
      continue
    vs = getattr(getattr(v, "type", None), "shape", None)
    if vs is None or vs == ():
      if vs is None and (_kind(v) not in ("int", "float") or _kind(v) == "float" and _kind(x) != "float"):
        return None
      part = f"ml.full({one!r}, {{{i}}}, {{0}}.dtype)"
      grown += 1
    elif len(vs) == len(shape) and _dtype(v) == _dtype(x) and all(
        m == n for j, (m, n) in enumerate(zip(_shape(a, v), shape)) if j != axis):
      part = f"{{{i}}}"
      grown += _shape(a, v)[axis]
    else:
      return None
    form = f"ml.concatenate([{part}, {form}], axis={axis})" if key == "prepend" else \
        f"ml.concatenate([{form}, {part}], axis={axis})"
  return form, ops, grown


def _diff(a):
  """jnp.diff along a static axis, n times: shifted slices subtracted (!= of bools), of x with prepend= and append=
  concatenated (_ends)."""
  x, n, axis = a["a"], a["n"], a["axis"]
  shape = _shape(a, x)
  if shape is None or not isinstance(n, int) or n < 0 or not isinstance(axis, int) or \
      not -len(shape) <= axis < len(shape):
    return None
  axis %= len(shape)
  ends = (a.get("prepend"), a.get("append")) != (None, None)
  got = _ends(a, x, shape, axis) if ends else ("{0}", [x], shape[axis])
  if got is None or n >= got[2]:
    return None
  op = "!=" if _kind(x) == "bool" else "-"
  later = ", ".join("1:" if i == axis else ":" for i in range(len(shape)))
  earlier = ", ".join(":-1" if i == axis else ":" for i in range(len(shape)))
  form = got[0]
  for _ in range(n):
    form = f"(({form})[{later}] {op} ({form})[{earlier}])"
  return form, got[1]


def _trapezoid(a):
  """jnp.trapezoid(y, x=None, dx=1.0, axis=-1) of a 1-D or 2-D float register y (probe 53i; it was MG003): a number
  dx as jax computes it, `dx * (sum(y) - 0.5 * (y[0] + y[-1]))` along the axis; sample points x (a 1-D register
  vector of y's dtype, a static table of jnp.linspace) as `0.5 * sum(w * y)`, each y's weight w the distance between
  its neighbours' points (the end ones' to their one neighbour), which is jax's `0.5 * sum(diff(x) * (y[1:] +
  y[:-1]))` regrouped (within rounding of it): the neighbours gathered from x, so that no tensor is sliced to an
  odd length (a (15,) or (15, 32) one, which a kernel padding another axis cannot hold)."""
  y, x, dx, axis = a["y"], a["x"], a["dx"], a["axis"]
  shape = _shape(a, y)
  if shape is None or len(shape) not in (1, 2) or _kind(y) != "float" or not isinstance(axis, int) or \
      not -len(shape) <= axis < len(shape) or shape[axis] < 2:
    return None
  axis %= len(shape)
  at = lambda i: f"[{i}]" if len(shape) == 1 else f"[{i}, :]" if axis == 0 else f"[:, {i}]"
  sum_ = "ml.sum({}, axis=%d)" % axis if len(shape) == 2 else "ml.sum({})"
  if x is None:
    if _kind(dx) not in ("int", "float") or getattr(dx, "type", None) is not None:
      return None
    return f"{{1}} * ({sum_.format('{0}')} - 0.5 * ({{0}}{at(0)} + {{0}}{at(-1)}))", [y, float(dx)]
  xs = _shape(a, x)
  if xs is None or len(xs) != 1 or xs[0] != shape[axis] or _dtype(x) != _dtype(y):
    return None
  n = xs[0]
  w = f"(lambda _i_: {{1}}[ml.minimum(_i_ + 1, {n - 1})] - {{1}}[ml.maximum(_i_ - 1, 0)])(ml.arange({n}))"
  wb = w if len(shape) == 1 else f"({w})[:, None]" if axis == 0 else f"({w})[None, :]"
  return f"0.5 * {sum_.format(wb + ' * {0}')}", [y, x]



def _einsum_one(a):
  """jnp.einsum of one operand: its axes summed away and permuted ('ij->ji', 'bhd->bd', 'ij->')."""
  from .einsum_general import diagonal_operand, explicit_spec
  spec, ops = a["subscripts"], a["operands"]
  if not isinstance(spec, str) or len(ops) != 1 or "," in spec:
    return None
  x = ops[0]
  shape = _shape(a, x)
  if (spec := explicit_spec(spec, [shape])) is None:     # ('ij', '...ij->...ji': the output and ellipsis written)
    return None
  if (diag := diagonal_operand(spec, shape)) is not None and a.get("preferred_element_type") is None:
    form, spec = diag                   # ('ii->i', 'ii': the diagonal, then its sum)
    return (form if spec[-1] != ">" else f"ml.sum({form})"), [x]
  ins, out = spec.split("->")
  if shape is None or len(ins) != len(shape) or len(set(ins)) != len(ins) or len(set(out)) != len(out) or \
      not set(out) <= set(ins) or any(a.get(k) is not None for k in ("out", "preferred_element_type")):
    return None
  form = "{0}"
  gone = tuple(i for i, c in enumerate(ins) if c not in out)
  if gone:
    form = f"ml.sum({form}, axis={gone if len(gone) > 1 else gone[0]})"
  kept = [c for c in ins if c in out]
  if kept != list(out):
    form = f"ml.transpose({form}, {tuple(kept.index(c) for c in out)})"
  return form, [x]


def _erf_inv(lax):
  """jax.scipy.special.erfinv / lax.erf_inv: form_helpers.erf_inv, in float32 (16-bit operands converted and the
  result rounded once, as XLA upcasts them; jnp's integer operand is float32 first)."""
  def make(a):
    from .form_helpers import erf_inv
    x = a["x"]
    d = _float(x, lax)
    if d is None:
      return None
    body = f"{{1}}({_operand(x, wide=True)})"
    return (body if _kind(x) != "float" or d == "float32" else f"{body}.astype({{0}}.dtype)"), [x, erf_inv]
  return make


def _select(a):
  """jnp.select(condlist, choicelist, default): the first condition that holds picks its choice (nested ml.where,
  as jnp's docstring writes it), the default elsewhere."""
  conds, choices, default = a["condlist"], a["choicelist"], a["default"]
  if not isinstance(conds, (tuple, list)) or not isinstance(choices, (tuple, list)) or not conds or \
      len(conds) != len(choices) or len(conds) > 16 or not any(_dtype(v) is not None for v in (*conds, *choices)):
    return None
  n = len(conds)
  form = f"{{{2 * n}}}"
  for i in range(n - 1, -1, -1):
    form = f"ml.where({{{i}}}, {{{n + i}}}, {form})"
  return form, [*conds, *choices, default]


def _cumulative_sum(a):
  """jnp.cumulative_sum (the array API's name) without include_initial: ml.cumsum along its axis (optional for a
  1-D tile only, as jnp's)."""
  x, axis = a["x"], a["axis"]
  shape = _shape(a, x)
  if shape is None or a["include_initial"] is not False or (axis is None and len(shape) != 1):
    return None
  return "ml.cumsum({0}, axis={1}, dtype={2})", [x, 0 if axis is None else axis, a["dtype"]]


def _nancum(op, fill):
  """jnp.nancumsum / nancumprod: the scan of the tile with its NaNs as `fill` (0 or 1), jax's definition."""
  def make(a):
    x, axis = a["a"], a["axis"]
    shape = _shape(a, x)
    if shape is None or a.get("out") is not None or (axis is None and len(shape) != 1) or _kind(x) not in (
        "float", "int", "bool"):
      return None
    v = f"ml.where(ml.isnan({{0}}), {fill}, {{0}})" if _kind(x) == "float" else "{0}"
    return f"ml.{op}({v}, axis={{1}}, dtype={{2}})", [x, 0 if axis is None else axis, a["dtype"]]
  return make


def _trace(a):
  """jnp.trace of a 2-D tile (a static offset, axes 0 and 1): the sum of its diagonal's elements."""
  x, offset = a["a"], a["offset"]
  shape = _shape(a, x)
  if shape is None or len(shape) != 2 or not isinstance(offset, int) or isinstance(offset, bool) or (
      a["axis1"], a["axis2"]) != (0, 1) or a.get("out") is not None or _kind(x) not in ("float", "int"):
    return None
  return ("ml.sum(ml.where(ml.arange({0}.shape[0])[:, None] + {1} == ml.arange({0}.shape[1])[None, :], {0}, 0),"
          " dtype={2})"), [x, offset, a["dtype"]]


_X = ("x",)
MATH = {
    ("jnp", "nancumsum"): (("a", "axis", "dtype", "out"), _nancum("cumsum", 0)),
    ("jnp", "nancumprod"): (("a", "axis", "dtype", "out"), _nancum("cumprod", 1)),
    ("jnp", "trace"): (("a", "offset", "axis1", "axis2", "dtype", "out"), _trace),
    ("jnp", "select"): (("condlist", "choicelist", "default"), _select),
    ("jnp", "cumulative_sum"): (("x", "axis", "dtype", "include_initial"), _cumulative_sum),
    ("jax.nn", "identity"): (_X, lambda a: None if _dtype(a["x"]) is None else ("{0}", [a["x"]])),
    **{("jnp", n): (_X, _unary(_sinh, wide=True)) for n in ("sinh",)},
    ("jax.lax", "sinh"): (_X, _unary(_sinh, lax=True, wide=True)),
    ("jnp", "cosh"): (_X, _unary(_cosh, wide=True)), ("jax.lax", "cosh"): (_X, _unary(_cosh, lax=True, wide=True)),
    **{("jnp", n): (_X, _unary(_asinh)) for n in ("arcsinh", "asinh")},
    **{("jnp", n): (_X, _unary(_acosh)) for n in ("arccosh", "acosh")},
    **{("jnp", n): (_X, _unary(_atanh)) for n in ("arctanh", "atanh")},
    ("jax.lax", "asinh"): (_X, _unary(_asinh, lax=True)), ("jax.lax", "acosh"): (_X, _unary(_acosh, lax=True)),
    ("jax.lax", "atanh"): (_X, _unary(_atanh, lax=True)),
    **{("jnp", n): (_X, _unary(lambda x, d: f"{x} * {math.pi / 180!r}", jnp_level=True)) for n in ("deg2rad", "radians")},
    **{("jnp", n): (_X, _unary(lambda x, d: f"{x} * {180 / math.pi!r}", jnp_level=True)) for n in ("rad2deg", "degrees")},
    ("jnp", "sinc"): (_X, _unary(_sinc)),
    ("jnp", "logaddexp2"): (("args",), _binary(_logaddexp2, wide=True)),
    ("jnp", "heaviside"): (("x1", "x2"), _binary(_heaviside)),
    ("jax.scipy.special", "expit"): (_X, _unary(lambda x, d: f"ml.sigmoid({x})")),
    ("jax.scipy.special", "logit"): (_X, _unary(lambda x, d: f"ml.log({x} / (1 - {x}))", jnp_level=True)),
    ("jax.nn", "soft_sign"): (_X, lambda a: None if _kind(a["x"]) != "float" else (
        widened("{0} / (ml.abs({0}) + 1)", str(_dtype(a["x"]))), [a["x"]])),
    ("jax.nn", "squareplus"): (("x", "b"), _squareplus),
    ("jax.nn", "glu"): (("x", "axis"), _glu),
    ("jax.lax", "cumlogsumexp"): (("operand", "axis", "reverse"), _cumlogsumexp),
    ("jnp", "median"): (("a", "axis", "out", "overwrite_input", "keepdims"), _median),
    ("jax.lax", "select_n"): (("which", "cases"), _select_n),
    ("jax.scipy.special", "erfinv"): (_X, _erf_inv(False)), ("jax.lax", "erf_inv"): (_X, _erf_inv(True)),
    ("jax.lax", "population_count"): (_X, _bit_count("popcount")), ("jax.lax", "clz"): (_X, _bit_count("clz")),
    ("jnp", "diff"): (("a", "n", "axis", "prepend", "append"), _diff),
    ("jnp", "trapezoid"): (("y", "x", "dx", "axis"), _trapezoid),
    ("jnp", "einsum"): (("subscripts", "operands", "out", "optimize", "precision", "preferred_element_type"),
                        _einsum_one),
    ("jax.nn", "sparse_plus"): (_X, lambda a: None if _kind(a["x"]) != "float" else (
        widened("ml.where({0} <= -1.0, 0.0, ml.where({0} >= 1.0, {0}, ({0} + 1.0) ** 2 / 4))", str(_dtype(a["x"]))),
        [a["x"]])),
    ("jax.nn", "sparse_sigmoid"): (_X, lambda a: None if _kind(a["x"]) != "float" else (
        widened("0.5 * ml.clip({0} + 1.0, 0.0, 2.0)", str(_dtype(a["x"]))), [a["x"]])),
}
