"""libdevice's float functions and conversions as a Triton port calls them (session 60): `tl.extra.cuda.libdevice.
sinh(x)`, `log10`, `erfinv`, `lgamma`, `normcdf`, `fmax`, `float2int_rn`, `float_as_int`, `saturatef`, ... Each was
MG002 ("has no attribute"), whose hint wrote a formula or said "check the spelling" of a name CUDA has, while the
kernel language computes each one: as the jnp / lax / jax.scipy.special function of the same meaning (`ALIASES`,
traced through that function's form), or as a form of ml functions here (`FORMS`), CUDA's meaning in float32:

- `exp10` / `fast_exp10f` are libdevice's powf of 10 (ml.pow); `saturatef` clamps to [0, 1] with NaN to 0, `fdim`
  is x - y above y, else +0 (NaN if either is), `rcp_rn` ml.div_rn(1, x), `fast_dividef` x / y; `remainder` is
  IEEE's (the quotient rounded to nearest even, exactly: special_helpers.ieee_remainder), not jnp.remainder's
  floored one, which the MG002 hint named;
- the conversions `float2int_{rn,rz,rd,ru}` (and `float2uint_*`, `float2ll_*`, `llrint`, `llround`) round as
  their suffix says (to nearest even, toward zero, down, up; llround halves away from zero), then convert;
  `int2float_rn`, `uint2float_rn`, `ll2float_rn` convert, rounding to nearest;
- the bit casts `float_as_int`, `float_as_uint`, `int_as_float`, `uint_as_float` are ml.bitcast;
- `sinpi`, `cospi` and `rhypot` are probe 72b's forms (libdevice_floats.py), part of this registry.

Directed roundings of arithmetic (`div_rz`, `sqrt_ru`, `add_rd`, ...) keep their MG002 hints (no directed rounding
here); so do names with no kernel form (`erfcx`, Bessel's j0 / y0), whose hints say so. Of Python numbers each
computes while tracing (`STATIC`), as CUDA would in float32, with IEEE's infinities and NaN where Python's math
raises."""
from __future__ import annotations

import math

from .jnp_forms import _dtype, _kind
from .libdevice_floats import FORMS as _TRIG

# libdevice's name -> the library function of the same meaning, whose kernel form it is traced through (probe 70b's
# C names nextafterf, copysignf, signbit, hypotf, ldexpf, scalbnf; add_rn, sub_rn, mul_rn, libdevice's __nv_fadd_rn,
# ...: + - * rounded to nearest, never fused, as the kernel's arithmetic is never contracted, design note 231)
ALIASES = {"nextafter": ("jnp", "nextafter"), "copysign": ("jnp", "copysign"), "signbit": ("jnp", "signbit"),
           "hypot": ("jnp", "hypot"), "ldexp": ("jnp", "ldexp"), "scalbn": ("jnp", "ldexp"), "add_rn": ("jnp", "add"),
           "sub_rn": ("jnp", "subtract"), "mul_rn": ("jnp", "multiply"),
           "sinh": ("jnp", "sinh"), "cosh": ("jnp", "cosh"), "acosh": ("jnp", "arccosh"),
           "asinh": ("jnp", "arcsinh"), "atanh": ("jnp", "arctanh"), "log10": ("jnp", "log10"),
           "fast_log10f": ("jnp", "log10"), "fmax": ("jnp", "fmax"), "fmin": ("jnp", "fmin"),
           "erfinv": ("jax.scipy.special", "erfinv"), "normcdf": ("jax.scipy.special", "ndtr"),
           "normcdfinv": ("jax.scipy.special", "ndtri"), "lgamma": ("jax.lax", "lgamma"),
           "tgamma": ("jax.scipy.special", "gamma"), "cyl_bessel_i0": ("jax.scipy.special", "i0"),
           "cyl_bessel_i1": ("jax.scipy.special", "i1")}

_ROUND = {"rn": "ml.round({0})", "rz": "{0}", "rd": "ml.floor({0})", "ru": "ml.ceil({0})"}
_TO = {"int": "ml.int32", "uint": "ml.uint32", "ll": "ml.int64"}


def _float(form):
  """A form of one float operand `x` (None for integers and booleans: their own hint stands)."""
  return lambda a: (form, [a["x"]]) if _kind(a["x"]) == "float" else None


def _convert(rounding, to):
  def make(a):
    if _kind(a["x"]) != "float":
      return None
    return f"{_ROUND[rounding]}.astype({_TO[to]})", [a["x"]]
  return make


def _llround(a):
  from .ops.triton_ops import ROUND_AWAY
  return ("{1}({0}).astype(ml.int64)", [a["x"], ROUND_AWAY]) if _kind(a["x"]) == "float" else None


def _to_float(a):
  if _kind(a["x"]) != "int" or _dtype(a["x"]) is None:
    return None
  return "{0}.astype(ml.float32)", [a["x"]]


def _bitcast(src, to):
  """float_as_int and its kin: ml.bitcast of a 32-bit operand of the kind the name says."""
  def make(a):
    d = _dtype(a["x"])
    if d is None or getattr(d, "itemsize", 0) != 4 or _kind(a["x"]) != src:
      return None
    return f"ml.bitcast({{0}}, {to})", [a["x"]]
  return make


def _fdim(a):
  x, y = a["x"], a["y"]
  if "float" not in (_kind(x), _kind(y)):
    return None
  return "ml.where({0} <= {1}, 0.0, {0} - {1})", [x, y]       # (a NaN operand: the comparison false, x - y NaN)


def _remainder(a):
  from . import special_helpers
  x, y = a["x"], a["y"]
  if "float" not in (_kind(x), _kind(y)) or not {_kind(x), _kind(y)} <= {"float", "int"}:
    return None
  return "{2}({0}, {1})", [x, y, special_helpers.ieee_remainder]


FORMS = {
    ("libdevice", "exp10"): (("x",), _float("ml.pow(10.0, {0})")),
    ("libdevice", "fast_exp10f"): (("x",), _float("ml.pow(10.0, {0})")),
    ("libdevice", "saturatef"): (("x",), _float("ml.where({0} > 0.0, ml.minimum({0}, 1.0), 0.0)")),
    ("libdevice", "rcp_rn"): (("x",), _float("ml.div_rn(1.0, {0})")),
    ("libdevice", "fdim"): (("x", "y"), _fdim),
    ("libdevice", "remainder"): (("x", "y"), _remainder),
    ("libdevice", "fast_dividef"): (("x", "y"), lambda a: ("{0} / {1}", [a["x"], a["y"]])
                                    if "float" in (_kind(a["x"]), _kind(a["y"])) else None),
    **{("libdevice", f"float2{to}_{r}"): (("x",), _convert(r, to)) for to in _TO for r in _ROUND},
    ("libdevice", "llrint"): (("x",), _convert("rn", "ll")),
    ("libdevice", "llround"): (("x",), _llround),
    **{("libdevice", f"{n}2float_rn"): (("x",), _to_float) for n in ("int", "uint", "ll")},
    ("libdevice", "float_as_int"): (("x",), _bitcast("float", "ml.int32")),
    ("libdevice", "float_as_uint"): (("x",), _bitcast("float", "ml.uint32")),
    ("libdevice", "int_as_float"): (("x",), _bitcast("int", "ml.float32")),
    ("libdevice", "uint_as_float"): (("x",), _bitcast("int", "ml.float32")),
}
FORMS.update(_TRIG)         # sinpi, cospi, rhypot: probe 72b's forms
NAMES = frozenset(n for _, n in FORMS)
PARAMS = {n: reads for (_, n), (reads, _) in FORMS.items()}


def _f32(v):
  import numpy as np
  with np.errstate(over="ignore"):
    return float(np.float32(v))


def _bits(v, src, dst):
  import numpy as np
  return np.array([v], src).view(dst)[0].item()


def _round_away(x):
  t = float(math.trunc(x))
  return t + math.copysign(1.0, x) if abs(x - t) >= 0.5 else t


def _ieee(fn, pole=None):
  """A math function of floats with IEEE's answers where Python's raise: `pole(x)` (lgamma(-1), log10(0) and
  atanh(1) are infinities) where it gives one, NaN elsewhere outside the domain (acosh(0.5), log10(-1)), an infinity
  past float64's range (sinh(1000))."""
  def f(*xs):
    if any(x != x for x in xs):
      return math.nan
    try:
      return fn(*xs)
    except OverflowError:
      return math.copysign(math.inf, xs[0]) if fn is math.sinh else math.inf
    except (ValueError, ZeroDivisionError):
      got = pole(*xs) if pole is not None else None
      return math.nan if got is None else got
  return f


def _erfinv(y):
  """erf's inverse in float64 (Newton's steps from Giles's start; float32's rounding follows): +-inf at +-1."""
  if y != y or abs(y) > 1:
    return math.nan
  if abs(y) == 1:
    return math.copysign(math.inf, y)
  w = -math.log((1 - y) * (1 + y))
  x = y * (1.5 + 0.25 * w) if w < 5 else math.copysign(math.sqrt(w) - 0.5, y)
  for _ in range(60):
    step = (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    x -= step
    if abs(step) <= 1e-16 * max(1.0, abs(x)):
      break
  return x


def _bessel_i(order):
  """I0 / I1 by their power series in float64 (inf past its range)."""
  def f(x):
    q, term, total = x * x / 4, 1.0 if order == 0 else x / 2, 0.0
    for k in range(1, 400):
      total += term
      term *= q / (k * (k + order))
      if not math.isfinite(total) or abs(term) <= 1e-17 * abs(total):
        break
    return total + term if math.isfinite(total) else math.copysign(math.inf, x) if order else math.inf
  return f


def _to_int(rounding, lo, hi):
  """A float's conversion as CUDA's cvt: rounded as the suffix says, NaN to 0, saturated to [lo, hi]."""
  def f(x):
    if x != x:
      return 0
    return int(min(max(rounding(x) if math.isfinite(x) else x, lo), hi))
  return f


_ZERO = lambda x: -math.inf if x == 0 else None         # (log10's pole)
_RANGES = {"int": (-2 ** 31, 2 ** 31 - 1), "uint": (0, 2 ** 32 - 1), "ll": (-2 ** 63, 2 ** 63 - 1)}
_ROUNDINGS = {"rn": round, "rz": math.trunc, "rd": math.floor, "ru": math.ceil}

# Of Python numbers (traced calls of static operands): CUDA's result of the float32 operands
STATIC = {
    "sinh": _ieee(math.sinh), "cosh": _ieee(math.cosh), "acosh": _ieee(math.acosh), "asinh": _ieee(math.asinh),
    "atanh": _ieee(math.atanh, lambda x: math.copysign(math.inf, x) if abs(x) == 1 else None),
    "log10": _ieee(math.log10, _ZERO), "fast_log10f": _ieee(math.log10, _ZERO),
    "lgamma": _ieee(math.lgamma, lambda x: math.inf if x == int(x) and x <= 0 else None),
    "tgamma": _ieee(math.gamma, lambda x: math.copysign(math.inf, x) if x == 0 else None), "erfinv": _erfinv,
    "normcdf": lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0)),
    "normcdfinv": lambda p: math.sqrt(2.0) * _erfinv(2 * p - 1) if p == p else math.nan,
    "cyl_bessel_i0": _bessel_i(0), "cyl_bessel_i1": _bessel_i(1),
    "fmax": lambda x, y: y if x != x else x if y != y else max(x, y),
    "fmin": lambda x, y: y if x != x else x if y != y else min(x, y),
    "exp10": _ieee(lambda x: 10.0 ** x), "fast_exp10f": _ieee(lambda x: 10.0 ** x),
    "saturatef": lambda x: min(max(x, 0.0), 1.0) if x == x else 0.0,
    "rcp_rn": lambda x: 1.0 / x if x else math.copysign(math.inf, x),
    "remainder": _ieee(math.remainder), "fdim": lambda x, y: x - y if x > y or x != x or y != y else 0.0,
    "fast_dividef": lambda x, y: x / y if y else math.nan if x == 0 or x != x else math.copysign(math.inf, x) * (
        math.copysign(1.0, y)),
    **{f"float2{to}_{r}": _to_int(_ROUNDINGS[r], *_RANGES[to]) for to in _TO for r in _ROUND},
    "llrint": _to_int(round, *_RANGES["ll"]), "llround": _to_int(_round_away, *_RANGES["ll"]),
    **{f"{n}2float_rn": float for n in ("int", "uint", "ll")},
    "float_as_int": lambda x: _bits(x, "float32", "int32"), "float_as_uint": lambda x: _bits(x, "float32", "uint32"),
    "int_as_float": lambda x: _bits(x % 2 ** 32, "uint32", "float32"),
    "uint_as_float": lambda x: _bits(x % 2 ** 32, "uint32", "float32"),
}


def _numpy(name, args):
  """An alias of a jnp function with no entry of STATIC: NumPy's namesake in float32 (ldexp's exponent an int)."""
  import numpy as np
  fn = getattr(np, ALIASES[name][1])
  with np.errstate(all="ignore"):
    return fn(*(a if isinstance(a, int) and i and fn is np.ldexp else np.float32(a) for i, a in enumerate(args))).item()


def static(name, *args):
  """libdevice's `name` of Python numbers, computed while tracing (float32 operands, as Triton makes of a
  number), with IEEE's NaN and infinities where Python's math raises."""
  if name not in STATIC:
    if name in ALIASES:
      return _numpy(name, args)
    from . import libdevice_floats
    return libdevice_floats.static(name, *args)
  fn = STATIC[name]
  if name.startswith(("int_as", "uint_as")):
    return fn(*args)
  out = fn(*(_f32(a) for a in args))
  return out if isinstance(out, int) else _f32(out)
