"""jnp's and lax's bit-level float functions and lax's special functions of register values, as jax computes them
(probe 49b): `jnp.nextafter` / `lax.nextafter`, `jnp.frexp`, `jnp.ldexp`, `lax.reduce_precision`, `jnp.float_power`,
`jnp.fabs`, `jnp.modf`, `jnp.signbit` of integers and bools, `jnp.isposinf` / `jnp.isneginf`, `jnp.bitwise_count`, lax's shifts right by a run-time
amount, `lax.lgamma` / `jax.scipy.special.gammaln` and `lax.digamma` / `jax.scipy.special.digamma` (XLA's Lanczos
expansions), and `jax.nn.standardize`. Forms as jnp_math's are (the parameters a form reads, a function of the bound
arguments giving (the form, its operands) or None: MG003 and its hint stand); those needing a value several times
call bit_helpers' or special_helpers' @ml.inline functions."""
from __future__ import annotations

import numpy as np

from .jnp_forms import _dtype, _kind
from .jnp_forms import _signbit as _float_signbit
from .jnp_math import _BITS_U32, _pair, _shape
from .lax_forms import _shift as _static_shift

# a float's integer twin, mantissa bits, exponent-field mask, exponent bias and smallest normal value, as jnp's finfo
_LAYOUT = {"float32": ("ml.int32", 23, 0xFF, 127, 2.0 ** -126), "float16": ("ml.int16", 10, 0x1F, 15, 2.0 ** -14),
           "bfloat16": ("ml.int16", 7, 0xFF, 127, 2.0 ** -126)}
_WIDTH = {"float32": ("ml.uint32", 32, 8, 23), "float16": ("ml.uint16", 16, 5, 10), "bfloat16": ("ml.uint16", 16, 8, 7)}
_TOP = {"ml.int32": 2 ** 31 - 1, "ml.int16": 2 ** 15 - 1}


def _inexact(x):
  """(the form of x as jnp's inexact functions compute it, its dtype name): integers and bools as float32."""
  k, d = _kind(x), _dtype(x)
  if d is None:
    return None
  if k == "float":
    return ("{0}", str(d)) if str(d) in _LAYOUT else None
  return ("{0}.astype(ml.float32)", "float32") if k in ("int", "bool") else None


def _nextafter(a):
  from .bit_helpers import nextafter
  got = _pair({"x1": a.get("x", a.get("x1")), "x2": a.get("y", a.get("x2"))})
  if got is None or str(got[2]) not in _LAYOUT:
    return None
  x1, x2, d = got
  it = _LAYOUT[str(d)][0]
  tensor = "{0}" if _dtype(x1) is not None else "{1}"
  conv = [f"{{{i}}}.astype({{2}})" if _dtype(x) is not None and _dtype(x) != d else
          f"ml.full({tensor}.shape, {{{i}}}, {{2}})" if _dtype(x) is None else f"{{{i}}}"
          for i, x in enumerate((x1, x2))]           # (a number towards a tensor: the tensor's shape and dtype)
  return f"{{3}}({conv[0]}, {conv[1]}, {it}, {_TOP[it]})", [x1, x2, d, nextafter]


_SUBNORMAL = {"float32": 2.0 ** -149, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}


def _spacing(a):
  from .bit_helpers import spacing
  got = _inexact(a["x"])
  if got is None:
    return None
  form, d = got
  it = _LAYOUT[d][0]
  return f"{{1}}({form}, {it}, {_TOP[it]}, {_SUBNORMAL[d]!r}, {d == 'float16'})", [a["x"], spacing]


def _frexp(a):
  from .bit_helpers import frexp
  got = _inexact(a["x"])
  if got is None:
    return None
  form, d = got
  it, nmant, mask, bias, tiny = _LAYOUT[d]
  return f"{{1}}({form}, {it}, {nmant}, {mask}, {bias}, {tiny!r})", [a["x"], frexp]


def _ldexp(a):
  from .bit_helpers import ldexp
  x, n = a["x1"], a["x2"]
  got = _inexact(x)
  if got is None or _kind(n) not in ("int", "bool") or (_dtype(n) is None and isinstance(n, (bool, np.bool_))):
    return None              # (a float exponent: jnp's ValueError)
  form, d = got
  it, nmant, mask, bias, tiny = _LAYOUT[d]
  n_form = "{1}.astype(" + d.join(("ml.", ")")) if _dtype(n) is not None else "{1}"
  return f"{{2}}({form}, {n_form}, {it}, {nmant}, {mask}, {bias}, {tiny!r})", [x, n if _dtype(n) is not None else
                                                                               float(n), ldexp]


def _reduce_precision(a):
  from .bit_helpers import reduce_precision
  x, e, m = a["operand"], a["exponent_bits"], a["mantissa_bits"]
  if _kind(x) != "float" or str(_dtype(x)) not in _WIDTH or not all(
      isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (e, m)) or e < 1 or m < 0:
    return None
  ut, nbits, src_e, src_m = _WIDTH[str(_dtype(x))]
  return f"{{1}}({{0}}, {ut}, {nbits}, {src_e}, {src_m}, {int(e)}, {int(m)})", [x, reduce_precision]


def _float_power(a):
  """jnp.float_power: lax.pow of the operands promoted to an inexact dtype (float32 for integers: no float64)."""
  x, y = a["x"], a["y"]
  ds = [_dtype(v) for v in (x, y) if _dtype(v) is not None]
  if not ds or any(_kind(v) not in ("float", "int", "bool") for v in (x, y)):
    return None
  floats = [str(_dtype(v)) for v in (x, y) if _dtype(v) is not None and _kind(v) == "float"]
  if len(floats) == 2 and floats[0] != floats[1]:
    from .ops.promotion import arithmetic_in
    d = arithmetic_in(*[_dtype(v) for v in (x, y)])
    if d is None:
      return None
    d = str(d)
  else:
    d = floats[0] if floats else "float32"
  conv = [f"{{{i}}}.astype(ml.{d})" if _dtype(v) is not None and str(_dtype(v)) != d else
          f"float({{{i}}})" if _dtype(v) is None else f"{{{i}}}" for i, v in enumerate((x, y))]
  return f"ml.pow({conv[0]}, {conv[1]})", [x, y]


def _signbit(a):
  """jnp.signbit: x < 0 of integers, False of bools (and of unsigned types), floats' sign bit (jnp_forms')."""
  x = a["x"]
  k = _kind(x)
  if _dtype(x) is None or k not in ("int", "bool"):
    return _float_signbit(a)
  if k == "bool" or str(_dtype(x)).startswith("uint"):
    return "ml.full({0}.shape, False, ml.bool_)", [x]
  return "{0} < 0", [x]


def _isinf_of(sign: str):
  """jnp.isposinf / jnp.isneginf: x == +-inf of floats, False of integers and bools (as jnp's full_like)."""
  def form(a):
    x = a["x"]
    if _dtype(x) is None or a.get("out") is not None:
      return None
    if _kind(x) in ("int", "bool"):
      return "ml.full({0}.shape, False, ml.bool_)", [x]
    if _kind(x) != "float":
      return None
    return f"{{0}} == float('{sign}inf')", [x]
  return form


def _bitwise_count(a):
  """jnp.bitwise_count: lax.population_count of abs(x), as uint8 (jnp_math's SWAR count)."""
  from . import form_helpers
  x = a["x"]
  u = _BITS_U32.get(str(_dtype(x)))
  if u is None or _kind(x) != "int":
    return None
  return f"{{1}}(ml.abs({{0}}), {u.replace('{0}', 'ml.abs({0})')}).astype(ml.uint8)", [x, form_helpers.population_count]


def _shift_run_time(logical):
  """lax's shift right by a run-time amount n (of x's dtype): lax's meaning for every n, x >> n clamped into
  0..bits-1 (an amount past the width, or negative, read as unsigned: 0 logically, the sign fill arithmetically)."""
  static = _static_shift(logical)

  def make(a):
    x, n = a["x"], a["y"]
    d = str(_dtype(x))
    if _dtype(n) is None:
      return static(a)         # (a Python int amount: lax_forms')
    if _kind(x) != "int" or str(_dtype(n)) != d or d not in _TWINS and d != "int64":
      return None
    if d == "int64":             # (no uint64 twin: the arithmetic shift's sign bits masked off)
      far, amount = "(({1} < 0) | ({1} >= 64))", "ml.minimum(ml.maximum({1}, 0), 63)"
      if logical:
        return f"ml.where({far}, 0, ({{0}} >> {amount}) & ~((-1 << (63 - {amount})) << 1))", [x, n]
      return f"ml.where({far}, {{0}} >> 63, {{0}} >> {amount})", [x, n]
    bits, twin = _TWINS[d]
    signed = not d.startswith("u")
    out = "(({0} < 0) | ({0} >= {B}))" if signed else "({0} >= {B})"
    amount = f"ml.minimum(ml.maximum({{1}}, 0), {bits - 1})" if signed else f"ml.minimum({{1}}, {bits - 1})"
    amount_twin = f"ml.bitcast({amount}, {twin})"
    far = out.replace("{0}", "{1}").replace("{B}", str(bits))
    if logical == signed:        # a logical shift of a signed type or an arithmetic one of an unsigned type
      shifted = f"ml.bitcast(ml.bitcast({{0}}, {twin}) >> {amount_twin}, {{0}}.dtype)"
    else:
      shifted = f"{{0}} >> {amount}"
    if logical:
      return f"ml.where({far}, 0, {shifted})", [x, n]
    return f"ml.where({far}, {{0}} >> {bits - 1}, {shifted})" if signed else \
        f"ml.where({far}, ml.bitcast(ml.bitcast({{0}}, {twin}) >> {bits - 1}, {{0}}.dtype), {shifted})", [x, n]
  return make


_TWINS = {"int32": (32, "ml.uint32"), "uint32": (32, "ml.int32"), "int16": (16, "ml.uint16"),
          "uint16": (16, "ml.int16"), "int8": (8, "ml.uint8"), "uint8": (8, "ml.int8")}


def _modf(a):
  got = _inexact(a["x"])
  if got is None or a.get("out") is not None:
    return None
  x = got[0]
  whole = f"ml.where({x} >= 0, ml.floor({x}), ml.ceil({x}))"
  return f"({x} - {whole}, {whole})", [a["x"]]


def _standardize(a):
  """jax.nn.standardize's "fast" algorithm: (x - mean) * rsqrt(max(mean(x * x) - mean ** 2, 0) + epsilon)."""
  x, axis, eps = a["x"], a["axis"], a["epsilon"]
  shape = _shape(a, x)
  if shape is None or _kind(x) != "float" or a.get("where") is not None or a.get("algorithm", "fast") not in (
      "fast", "stable") or isinstance(eps, bool) or not isinstance(eps, (int, float)):
    return None
  axes = axis if isinstance(axis, (tuple, list)) else (axis,)
  if axis is not None and not all(isinstance(v, int) and -len(shape) <= v < len(shape) for v in axes):
    return None
  ax = "None" if axis is None else repr(tuple(v % len(shape) for v in axes)) if isinstance(axis, (tuple, list)) \
      else repr(axis % len(shape))
  mean = f"ml.mean({{0}}, axis={ax}, keepdims=True)" if a.get("mean") is None else "{1}"
  if a.get("variance") is not None:
    var = "{2}"
  elif a.get("algorithm", "fast") == "stable":
    var = f"ml.mean(({{0}} - {mean}) * ({{0}} - {mean}), axis={ax}, keepdims=True)"
  else:
    var = f"ml.maximum(ml.mean({{0}} * {{0}}, axis={ax}, keepdims=True) - {mean} * {mean}, 0)"
  return f"({{0}} - {mean}) * ml.rsqrt({var} + {float(eps)!r})", [x, a.get("mean"), a.get("variance")]


def _scaled(name):
  """jax.scipy.special.i0 / i1: exp(|x|) times i0e / i1e, in float32 (16-bit rounded once, jnp's integers as
  float32), as jax defines them."""
  def form(a):
    from . import special_helpers
    x = a["x"]
    k, d = _kind(x), _dtype(x)
    if d is None or k not in ("float", "int", "bool") or (k == "float" and str(d) not in _LAYOUT):
      return None
    v = "{0}" if k == "float" and str(d) == "float32" else "{0}.astype(ml.float32)"
    body = f"ml.exp(ml.abs({v})) * {{1}}({v})"
    return (f"({body}).astype({{0}}.dtype)" if k == "float" and str(d) != "float32" else body), [
        x, getattr(special_helpers, name)]
  return form


def _special(name):
  """lax.lgamma / digamma (and jax.scipy.special's gammaln / digamma, which jnp's integers reach as float32): XLA's
  expansion in float32, a 16-bit operand converted first and the result rounded once (as XLA upcasts it)."""
  def make(lax):
    def form(a):
      from . import special_helpers
      x = a["x"]
      k, d = _kind(x), _dtype(x)
      if d is None or k not in ("float", "int", "bool") or (lax and k != "float") or (
          k == "float" and str(d) not in _LAYOUT):
        return None
      body = "{1}({0}.astype(ml.float32))" if str(d) != "float32" else "{1}({0})"
      if k == "float" and str(d) != "float32":
        body = f"{body}.astype({{0}}.dtype)"
      return body, [x, getattr(special_helpers, name)]
    return form
  return make


def _float32_only(name, arg):
  """jax.scipy.special.ndtri / log_ndtr: special_helpers' form of a float32 operand (jax's TypeError for another
  dtype, 16-bit included: MG003 stands)."""
  def form(a):
    from . import special_helpers
    x = a[arg]
    if str(_dtype(x)) != "float32" or _kind(x) != "float" or a.get("series_order", 3) != 3:
      return None
    return "{1}({0})", [x, getattr(special_helpers, name)]
  return form


_XY = ("x", "y")
BITS = {
    ("jnp", "nextafter"): (_XY, _nextafter), ("jax.lax", "nextafter"): (("x1", "x2"), _nextafter),
    ("jnp", "spacing"): (("x",), _spacing), ("jnp", "frexp"): (("x",), _frexp), ("jnp", "ldexp"): (("x1", "x2"), _ldexp),
    ("jax.lax", "reduce_precision"): (("operand", "exponent_bits", "mantissa_bits"), _reduce_precision),
    ("jnp", "float_power"): (_XY, _float_power),
    ("jnp", "fabs"): (("x",), lambda a: None if _inexact(a["x"]) is None else (
        f"ml.abs({_inexact(a['x'])[0]})", [a["x"]])),
    ("jnp", "modf"): (("x", "out"), _modf),
    ("jnp", "signbit"): (("x",), _signbit), ("jnp", "bitwise_count"): (("x",), _bitwise_count),
    ("jnp", "isposinf"): (("x", "out"), _isinf_of("")), ("jnp", "isneginf"): (("x", "out"), _isinf_of("-")),
    ("jax.lax", "shift_right_logical"): (_XY, _shift_run_time(True)),
    ("jax.lax", "shift_right_arithmetic"): (_XY, _shift_run_time(False)),
    ("jax.lax", "lgamma"): (("x",), _special("lgamma")(True)),
    ("jax.lax", "digamma"): (("x",), _special("digamma")(True)),
    ("jax.scipy.special", "gammaln"): (("x",), _special("lgamma")(False)),
    ("jax.scipy.special", "digamma"): (("x",), _special("digamma")(False)),
    ("jax.lax", "bessel_i0e"): (("x",), _special("i0e")(True)), ("jax.lax", "bessel_i1e"): (("x",), _special("i1e")(True)),
    ("jax.scipy.special", "i0e"): (("x",), _special("i0e")(False)),
    ("jax.scipy.special", "i1e"): (("x",), _special("i1e")(False)),
    ("jax.scipy.special", "gamma"): (("x",), _special("gamma")(False)),
    ("jax.scipy.special", "i0"): (("x",), _scaled("i0e")), ("jax.scipy.special", "i1"): (("x",), _scaled("i1e")),
    ("jax.scipy.special", "ndtri"): (("p",), _float32_only("ndtri", "p")),
    ("jax.scipy.special", "log_ndtr"): (("x", "series_order"), _float32_only("log_ndtr", "x")),
    ("jax.nn", "standardize"): (("x", "axis", "mean", "variance", "epsilon", "where", "algorithm"), _standardize),
}
