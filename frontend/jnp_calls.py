"""jnp, jax.nn and jax.lax functions called in a kernel's body (Pallas's style: `jnp.exp(v)`, `jnp.sum(v,
axis=1, keepdims=True)`, `jax.nn.silu(v)`, `jnp.zeros((8, 128), jnp.float32)`) compute as their ml.* namesake
where ml's function is jnp's. The call is bound by the library's own signature (its keyword names, its
defaults: jnp.cumsum's axis=None flattens, lax.cumsum's is 0), each argument renamed to ml's parameter and
passed explicitly, so the meaning is the library's. An argument ml does not take (out=, dtype= of jnp.mean,
lax's accuracy=) is refused by name unless it is the library's default; a call whose meaning ml has not
(jnp.where(c), jnp.dot of register values) is left to calls.py's MG003 and its hint. jax.nn's activations ml
has no function for compute as activation_forms' formulas (those the hints write), traced at the call."""
from __future__ import annotations

import ast
import inspect

import numpy as np

from . import errors as E
from .env import names_restored
from .activation_forms import ACTIVATIONS, ACTIVATION_PARAMS, GELU_EXACT, promoted, widened
from .held_library import _public
from .jnp_stats import STATS, jnp_prod
from .jnp_forms import FORMS, OPERATORS
from .jnp_bits import BITS
from .jnp_scipy import SCIPY
from .jnp_special import SPECIAL
from .jnp_numerics import NUMERICS
from .jnp_ndimage import NDIMAGE
from .jnp_linalg import LINALG
from .jnp_compose import COMPOSE
from .jnp_math import MATH
from .jnp_quantiles import QUANTILES
from .window_forms import WINDOWS
from .ufunc_reduce import REDUCTIONS
from .jnp_pad import PAD
from .jnp_moves import MOVES
from .jnp_grids import FORMS as GRIDS
from .libdevice_bits import int64_forms
from .libdevice_math import FORMS as LIBDEVICE_MATH
from .jnp_signal import FORMS as SIGNAL
from .lax_forms import FORMS as LAX_FORMS

# the library functions that are ml's: (module as users spell it) -> {its name: ml's name}
_UNARY = ("abs", "acos", "asin", "atan", "cbrt", "ceil", "cos", "exp", "exp2", "expm1", "floor", "isfinite", "isinf",
          "isnan", "log", "log1p", "log2", "sin", "sqrt", "tan", "tanh", "trunc")
_JNP = {**{n: n for n in _UNARY + (
    "atan2", "fmod", "pow", "maximum", "minimum", "clip", "where", "round", "all", "any", "argmax", "argmin", "max",
    "min", "mean", "sum", "std", "var", "cumsum", "cumprod", "flip", "roll", "reshape", "ravel", "transpose",
    "broadcast_to", "concatenate", "sort", "argsort", "full", "zeros", "squeeze", "repeat",
    "searchsorted", "bincount", "split")},
        "absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arctan2": "atan2",
        "power": "pow", "amax": "max", "amin": "min", "around": "round", "fix": "trunc"}
_NN = {"sigmoid": "sigmoid", "softmax": "softmax", "log_softmax": "log_softmax", "logsumexp": "logsumexp",
       "tanh": "tanh"}
_LAX = {**{n: n for n in _UNARY if n not in ("isfinite", "isinf", "isnan", "log2", "trunc")},
        "rsqrt": "rsqrt", "erf": "erf", "erfc": "erfc", "atan2": "atan2", "pow": "pow", "max": "maximum",
        "min": "minimum", "argmax": "argmax", "argmin": "argmin", "cumsum": "cumsum", "cumprod": "cumprod",
        "cummax": "cummax", "cummin": "cummin", "concatenate": "concatenate", "reshape": "reshape",
        "transpose": "transpose", "top_k": "top_k", "full": "full", "logistic": "sigmoid",
        "associative_scan": "associative_scan", "squeeze": "squeeze"}
_OPS = {n: n for n in ("segment_sum", "segment_max", "segment_min", "segment_prod")}      # jax.ops's (frontend/ops/segments.py)
MAPPED = {"jnp": _JNP, "jax.nn": _NN, "jax.lax": _LAX, "jax.ops": _OPS,
          "jax.scipy.special": {"logsumexp": "logsumexp", "erf": "erf", "erfc": "erfc"}}

# jnp's functions of inexact values: an integer or bool operand computes in float32 (lax's refuse it)
INEXACT = frozenset(("exp", "exp2", "expm1", "log", "log1p", "log2", "sin", "cos", "tan", "tanh", "sqrt", "cbrt",
                     "acos", "asin", "atan", "rsqrt", "erf", "erfc", "sigmoid", "logsumexp"))
# (softmax and log_softmax of integers shift in the integer dtype first, as jax.nn's: ops/stats._int_shift)
# jnp's functions of two operands that promote them to an inexact dtype (promote_args_inexact): integer and bool
# tiles are float32 first, or the other operand's float dtype (probe 49b: jnp.arctan2 of int32 tiles was MG106,
# jnp.copysign, hypot, heaviside, logaddexp2, nextafter and isclose of them MG003)
BINARY_INEXACT = frozenset(("arctan2", "atan2", "copysign", "hypot", "heaviside", "logaddexp", "logaddexp2",
                            "nextafter", "isclose"))


def inexact_operands(cx, args, kwargs):
  """(args, kwargs) with the integer and bool register values converted as jnp's promote_args_inexact converts
  them: to the float dtype of a float operand, float32 where there is none."""
  from .ops import elementwise as ew
  from .ops.base import is_value
  from .ops.promotion import arithmetic_in
  from .dtypes import DType
  from .types import resolve
  from .jnp_forms import _kind
  vals = [v for v in list(args) + list(kwargs.values()) if is_value(v) and _kind(v) in ("float", "int", "bool")]
  floats = [resolve(v.type.dtype) for v in vals if _kind(v) == "float"]
  if not any(_kind(v) in ("int", "bool") for v in vals):
    return args, kwargs
  to = DType.f32
  if floats:
    to = floats[0]
    for d in floats[1:]:
      to = arithmetic_in(to, d) or to

  def conv(v):
    return ew.astype(cx, v, to) if is_value(v) and _kind(v) in ("int", "bool") else v
  return [conv(a) for a in args], {k: conv(v) for k, v in kwargs.items()}


# jnp's functions of two operands whose forms compute on register values only (probe 53h: jnp.copysign(1.0, v),
# jnp.copysign(v, -1.0), jnp.hypot(v, 3.0), jnp.heaviside(0.5, v), jnp.isclose(v, 1.0), jnp.ldexp(1.0, n) were MG003)
NUMBER_OPERANDS = {"copysign": ("x1", "x2"), "hypot": ("x1", "x2"), "heaviside": ("x1", "x2"), "isclose": ("a", "b"),
                   "ldexp": ("x1",)}


def number_operands(cx, name, args, kwargs):
  """(args, kwargs) with a Python number among `name`'s operands (NUMBER_OPERANDS) filled into a tensor of the
  register operand's shape, in its float dtype (jnp's weakly typed number), float32 beside an integer or bool one
  (jnp's promote_args_inexact); unchanged where no operand is a register value, or none is a number."""
  from .ops.base import BUILTINS, is_value
  from .dtypes import DType
  from .jnp_forms import _kind
  from .types import resolve
  params = ("x1", "x2") if name != "isclose" else ("a", "b")
  ops = [args[i] if i < len(args) else kwargs.get(p) for i, p in enumerate(params)]
  vals = [v for v in ops if is_value(v)]
  if not vals or not any(_kind(v) in ("int", "float") and not is_value(v) for v in ops):
    return args, kwargs
  like = next((v for v in vals if _kind(v) == "float"), vals[0])
  d = resolve(like.type.dtype) if _kind(like) == "float" else DType.f32
  shape = tuple(getattr(like.type, "shape", ()))
  args, kwargs = list(args), dict(kwargs)
  for i, p in enumerate(params):
    v = ops[i]
    if p not in NUMBER_OPERANDS[name] or is_value(v) or _kind(v) not in ("int", "float"):
      continue
    t = BUILTINS["full"].apply(cx, [shape, v], {"dtype": d})
    if i < len(args):
      args[i] = t
    else:
      kwargs[p] = t
  return args, kwargs


# the library's parameter names as ml's
_RENAMES = {"a": "x", "ary": "x", "arr": "x", "array": "x", "m": "x", "operand": "x", "arrays": "xs", "operands": "xs",
            "fill_value": "value", "dimension": "axis", "new_sizes": "shape", "permutation": "axes"}
_BY_NAME = {"where": {"condition": "cond", "x": "a", "y": "b"}, "arange": {"start": "n"},
            "atan2": {"x1": "a", "x2": "b", "x": "a", "y": "b"}, "pow": {"x1": "a", "x2": "b", "x": "a", "y": "b"},
            "fmod": {"x1": "a", "x2": "b"}, "maximum": {"x": "a", "y": "b"}, "minimum": {"x": "a", "y": "b"},
            "clip": {"x": "x", "a_min": "min", "a_max": "max"}, "squeeze": {"dimensions": "axis"}}
# arguments that keep their meaning only at one value: lax.argmax's index_dtype, lax.reshape's dimensions
_ONLY = {("jax.lax", "argmax", "index_dtype"): "int32", ("jax.lax", "argmin", "index_dtype"): "int32",
         ("jnp", "reshape", "order"): "C", ("jnp", "ravel", "order"): "C"}
# the results the library computes as operators
_OPERATORS = {"add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}", "divide": "{0} / {1}",
              "true_divide": "{0} / {1}", "negative": "-{0}", "square": "{0} * {0}", "mul": "{0} * {1}",
              "sub": "{0} - {1}", "div": None, "neg": "-{0}"}


# Functions of the frontend's own that stand for a library function a method names (`v.prod(axis=1)` is
# jnp.prod(v, axis=1): jnp_stats.jnp_prod), so the frontend need not import jax to trace them
STAND_INS: dict = {}


def library(fn) -> tuple[str, str] | None:
  """(the module as users spell it, the function's name) of a jnp / jax.nn / jax.lax / jax.scipy.special
  function; None for others (NumPy's and math's compute static values)."""
  if (got := STAND_INS.get(fn)) is not None:
    return got
  name, mod = getattr(fn, "__name__", None), getattr(fn, "__module__", None) or ""
  if name is None or not mod.startswith("jax"):
    return None
  lib = ("jax.nn", "") if mod == "jax._src.ops.special" else _public(mod)     # (jax.nn.logsumexp's module)
  if lib is None:
    return None
  lib = "jax.scipy.special" if lib[0].startswith("jax.scipy.special") else lib[0]
  return lib, name


def maps(fn) -> bool:
  """Whether a kernel computes `fn` (of register values or static ones) as ml's function or a formula."""
  got = library(fn)
  return got is not None and (got[1] in MAPPED.get(got[0], {}) or _form(*got) is not None)


def _ndim(v):
  shape = getattr(getattr(v, "type", None), "shape", None)
  return None if shape is None else len(shape)


def _axes(axis, ndim):
  """Static axes (an int or a tuple of them) of an ndim-axis result, from the end where negative; None if not."""
  axes = axis if isinstance(axis, (tuple, list)) else (axis,)
  if ndim is None or not all(isinstance(a, int) and -ndim <= a < ndim for a in axes):
    return None
  out = tuple(a % ndim for a in axes)
  return out if len(set(out)) == len(out) else None


def _index(ndim, new):
  """The index that puts size-1 axes at `new` of an ndim-axis result: v[:, None]."""
  return ", ".join("None" if i in new else ":" for i in range(ndim))


def _iota(a):
  shape, d = a["shape"], a["dimension"]
  if not (isinstance(shape, (tuple, list)) and all(isinstance(n, int) for n in shape)) or not (
      isinstance(d, int) and 0 <= d < len(shape)) or a.get("sharding") is not None:
    return None
  idx = _index(len(shape), [i for i in range(len(shape)) if i != d])
  return f"ml.broadcast_to(ml.arange({shape[d]})[{idx}], {tuple(shape)!r}).astype({{0}})", [a["dtype"]]


def _like(value):
  def form(a):
    if a.get("shape") is not None:
      return None
    fill = "{1}" if value is None else value
    kind = "ml.zeros({0}.shape, {D})" if value == "0" else f"ml.full({{0}}.shape, {fill}, {{D}})"
    dtype = "{0}.dtype" if a.get("dtype") is None else "{2}"
    return kind.replace("{D}", dtype), [a["a"], a.get("fill_value"), a.get("dtype")]
  return form


def _expand(a):
  n = _ndim(a["a"])
  axes = _axes(a["axis"], None if n is None else n + (len(a["axis"]) if isinstance(a["axis"], (tuple, list)) else 1))
  return None if axes is None else (f"{{0}}[{_index(n + len(axes), axes)}]", [a["a"]])


def _stack(a):
  xs = a["arrays"]
  if not isinstance(xs, (tuple, list)) or not xs or a.get("dtype") is not None:
    return None
  n = _ndim(xs[0])
  axes = _axes(a["axis"], None if n is None else n + 1)
  if axes is None:
    return None
  idx = _index(n + 1, axes)
  return f"ml.concatenate([{', '.join(f'{{{i}}}[{idx}]' for i in range(len(xs)))}], axis={axes[0]})", list(xs)


def stacked_array(a):
  """jnp.array / jnp.asarray of a list or tuple of register values of one shape: their stack (probe 52b; called
  by jnp_forms' forms of jnp.array and jnp.asarray)."""
  xs = a["object"]
  if not isinstance(xs, (tuple, list)) or not xs or not all(_ndim(x) is not None for x in xs) or \
      a.get("order") not in (None, "K", "A", "C") or a.get("ndmin") not in (None, 0) or \
      a.get("device") is not None or a.get("out_sharding") is not None:
    return None
  got = _stack({"arrays": xs, "axis": 0})
  if got is None or a.get("dtype") is None:
    return got
  return f"({got[0]}).astype({{{len(xs)}}})", [*got[1], a["dtype"]]


def _permute(a, src, dst):
  n = _ndim(a)
  s, d = _axes(src, n), _axes(dst, n)
  if s is None or d is None or len(s) != len(d):
    return None
  order = [i for i in range(n) if i not in s]
  for dd, ss in sorted(zip(d, s)):
    order.insert(dd, ss)
  return f"ml.transpose({{0}}, {tuple(order)!r})", [a]


def _swap(a):
  n, x1, x2 = _ndim(a["a"]), a["axis1"], a["axis2"]
  if _axes(x1, n) is None or _axes(x2, n) is None:
    return None
  order = list(range(n))
  i, j = x1 % n, x2 % n
  order[i], order[j] = order[j], order[i]
  return f"ml.transpose({{0}}, {tuple(order)!r})", [a["a"]]


# the library's calls written as an ml.* form of their arguments: (lib, name) -> (the parameters the form reads,
# a function of the bound arguments giving (the form, its operands {0}, {1}, ...), or None where it has none)
SHAPED = {
    ("jax.lax", "broadcasted_iota"): (("dtype", "shape", "dimension", "sharding"), _iota),
    ("jnp", "zeros_like"): (("a", "dtype", "shape"), _like("0")), ("jnp", "ones_like"): (("a", "dtype", "shape"), _like("1")),
    ("jnp", "full_like"): (("a", "fill_value", "dtype", "shape"), _like(None)),
    ("jnp", "expand_dims"): (("a", "axis"), _expand), ("jnp", "stack"): (("arrays", "axis", "dtype"), _stack),
    ("jnp", "swapaxes"): (("a", "axis1", "axis2"), _swap),
    ("jnp", "moveaxis"): (("a", "source", "destination"), lambda a: _permute(a["a"], a["source"], a["destination"])),
    ("jax.lax", "select"): (("pred", "on_true", "on_false"), lambda a: ("ml.where({0}, {1}, {2})",
                                                                        [a["pred"], a["on_true"], a["on_false"]])),
    ("jnp", "sign"): (("x",), lambda a: ("ml.where({0} > 0, 1, ml.where({0} < 0, -1, {0}))", [a["x"]])),
}


SHAPED.update(FORMS)          # jnp.fmin, jnp.logical_and, lax.clamp, jnp.arange(128.0), ...: jnp_forms.py
SHAPED.update(LAX_FORMS)      # lax.round, lax.reduce_max, lax.broadcast_in_dim, lax.div, lax.slice, ...: lax_forms.py
_OPERATORS.update(OPERATORS)  # jnp.equal, jnp.bitwise_and, lax.shift_left, jnp.floor_divide, lax.rem, ...
STAND_INS[jnp_prod] = ("jnp", "prod")
SHAPED.update(STATS)          # jnp's statistics (jnp.linalg.norm, jnp.nanmean, ...): jnp_stats.py, after the forms
SHAPED.update(MATH)           # jnp.sinh, jnp.arctanh, jnp.sinc, jax.nn.glu, ...: jnp_math.py
SHAPED.update(QUANTILES)      # jnp.quantile, jnp.percentile, jnp.nanargmax, jnp.nanargmin: jnp_quantiles.py
SHAPED.update(WINDOWS)        # jax.lax.reduce_window of a register tile (pooling): window_forms.py
SHAPED.update(REDUCTIONS)     # jax.lax.reduce of a monoid or a combine of the kernel's: ufunc_reduce.py
SHAPED.update(BITS)           # jnp.nextafter, jnp.frexp, lax.reduce_precision, lax.lgamma, ...: jnp_bits.py
SHAPED.update(SCIPY)          # jax.scipy.special.xlogy, entr, ndtr, jnp.divmod, jnp.vdot, ...: jnp_scipy.py
SHAPED.update(SPECIAL)        # jax.scipy.special.beta, betaln, comb, poch, jnp.i0, ... (probe 56f): jnp_special.py
SHAPED.update(NUMERICS)       # jnp.gradient, jnp.cumulative_sum / cumulative_prod (probe 56f): jnp_numerics.py
SHAPED.update(NDIMAGE)        # jax.scipy.ndimage.map_coordinates (probe 57g): jnp_ndimage.py
SHAPED.update(PAD)            # jnp.pad of a register tensor (probe 51g): jnp_pad.py
SHAPED.update(LINALG)         # jax.scipy.linalg.solve_triangular, jnp.linalg.solve/inv/det (53f, 54d): jnp_linalg.py
SHAPED.update(COMPOSE)        # jnp.piecewise, jnp.kron of register values (probe 54d): jnp_compose.py
SHAPED.update(MOVES)          # jnp.hstack, jnp.array_split, jnp.rot90, lax.dynamic_slice, ... (probe 52c): jnp_moves.py
SHAPED.update(GRIDS)          # jnp.eye, jnp.tri, jnp.indices, jnp.meshgrid (probe 53i): jnp_grids.py
int64_forms(SHAPED)           # libdevice's popc, clz, ffs, brev, byte_perm, hadd; int64 popcounts (71b): libdevice_bits.py
SHAPED.update(LIBDEVICE_MATH)  # libdevice's exp10, saturatef, fdim, float2int_rn, float_as_int, ... : libdevice_math.py
SHAPED.update(SIGNAL)         # jnp.unwrap, jnp.angle of real values (probe 72b): jnp_signal.py


def _form(lib, name):
  if (lib, name) in SHAPED:
    return SHAPED[lib, name]
  if lib == "jax.nn" and (name in ACTIVATIONS or name == "gelu"):
    return ACTIVATIONS.get(name, "")
  if lib in ("jnp", "jax.lax") and _OPERATORS.get(name):
    return _OPERATORS[name]
  return None


def _default(p):
  return None if p.default is inspect.Parameter.empty else p.default


def _same(a, b):
  try:
    return type(a) is type(b) and bool(a == b)
  except Exception:
    return False


def _refuse(cx, shown, ml_name, key, value):
  """MG003 naming an argument of `shown` (jnp.exp) ml's counterpart (ml_name; None: jax.nn's formula) lacks."""
  if key == "out":
    why = "a kernel writes a result by storing it: out[...] = " + f"{shown}(...)"
  elif key == "dtype":
    why = f"convert the operand or the result instead: ml.{ml_name}(x).astype(dtype)"
  elif key == "step":
    why = "count and scale: start + step * ml.arange(n) (n the count of values)"
  elif ml_name is None:
    why = f"drop it, or write the formula with ml.* functions ({key}= changes what it computes)"
  else:
    why = f"drop it, or write the call with ml.* functions (ml.{ml_name} has no {key}=)"
  where = f"ml.{ml_name}" if ml_name else "its formula in ml.* functions"
  raise E.KernelTypeError(f"{shown}'s {key}= has no counterpart in a kernel, where {shown} computes as {where}",
                          cx.loc, hint=why)


def _dtype_of(v):
  """A register value's DType (None for anything else)."""
  from .dtypes import DType
  from .types import resolve
  d = resolve(getattr(getattr(v, "type", None), "dtype", None)) if getattr(v, "type", None) is not None else None
  return d if isinstance(d, DType) else None


def bind(cx, fn, args, kwargs):
  """(ml's function name, its positional arguments, its keyword arguments) for the call, or None where jnp's
  meaning is not ml's (then calls.py's MG003 stands). Refuses an argument ml does not take by name."""
  from .ops.base import BUILTINS
  lib, name = library(fn)
  ml_name = MAPPED[lib][name]
  ours = BUILTINS[ml_name]
  shown = f"{lib}.{name}"
  if ml_name == "associative_scan":     # ml's takes jax's arguments as they are (and Triton's)
    return ml_name, list(args), dict(kwargs)
  try:
    sig = inspect.signature(fn)
  except (TypeError, ValueError):
    return None
  try:
    bound = sig.bind(*args, **kwargs)
  except TypeError:
    unknown = [k for k in kwargs if k not in sig.parameters]
    if unknown:          # jnp.exp(v, out=o): name the argument
      _refuse(cx, shown, ml_name, unknown[0], kwargs[unknown[0]])
    return None
  given = dict(bound.arguments)
  mine = ours.__signature__.parameters
  order = [p for p in mine.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  pos, kw = [], {}
  renames = {**_RENAMES, **_BY_NAME.get(ml_name, {})}
  for p in sig.parameters.values():
    if p.kind is p.VAR_POSITIONAL:        # jnp.maximum(a, b): a ufunc's *args, ml's leading parameters
      vals = given.get(p.name, ())
      if len(vals) > len(order):
        return None
      kw.update({q.name: v for q, v in zip(order, vals)})
      continue
    if p.kind is p.VAR_KEYWORD:
      if given.get(p.name):
        _refuse(cx, shown, ml_name, next(iter(given[p.name])), None)
      continue
    there = p.name in given
    value = given[p.name] if there else _default(p)
    if (lib, name, p.name) in _ONLY:
      if there and str(getattr(value, "__name__", value)) not in (str(_ONLY[lib, name, p.name]), "None"):
        _refuse(cx, shown, ml_name, p.name, value)
      continue
    if p.name == "promote_integers" and ml_name == "sum":
      d = _dtype_of(given.get("a"))          # (False: a narrow int sum in its own dtype, wrapping, as jnp's; of
      if value is False and d is not None and d.is_int and d.bits < 32 and kw.get("dtype") is None:
        kw["dtype"] = d                      # floats, bools and 32-bit ints nothing changes: probe 52d)
      continue
    target = renames.get(p.name, p.name) if renames.get(p.name, p.name) in mine else p.name
    if target not in mine:
      if there and value is not _default(p) and not (value is None and _default(p) is None):
        _refuse(cx, shown, ml_name, p.name, value)
      continue
    q = mine[target]
    if q.kind is q.VAR_POSITIONAL:        # ml.transpose(x, *axes)
      if value is not None:
        kw["__var__"] = tuple(value)
      continue
    if not there and q.default is inspect.Parameter.empty and value is None:
      return None       # jnp.where(c): one argument, a meaning ml has not
    if value is None and _default(p) is None and q.default is not inspect.Parameter.empty:
      continue          # jnp.zeros(s, dtype=None): ml's default is the library's
    if not there and q.default is not inspect.Parameter.empty and _same(value, q.default):
      continue
    kw[target] = value
  tail = kw.pop("__var__", ())
  for q in order:          # positional while contiguous (ml.transpose(x, *axes) takes its axes after x)
    if q.name not in kw or q.kind is q.KEYWORD_ONLY:
      break
    pos.append(kw.pop(q.name))
  if tail and len(pos) < len(order):
    return None
  pos += list(tail)
  return ml_name, pos, kw


def _bad_arguments(cx, shown, sig, arguments):
  """A form's maker could not take the call's static arguments (lax.expand_dims(v, 2), whose dimensions are a
  tuple; jnp.permute_dims(v, w) of a register value for its axes): a KernelTypeError at the call naming the
  arguments and the library's signature (session 60: each was an internal error, the maker's TypeError)."""
  from .ops.base import is_value
  shown_args = ", ".join(f"{k}={kind_of_operand(v) if is_value(v) else repr(v)}" for k, v in arguments.items())
  params = ", ".join(p.name for p in sig.parameters.values() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
  raise E.KernelTypeError(f"{shown} does not take these arguments: {shown_args}", cx.loc,
                          hint=f"call it as {shown}({params}) with arguments of the kinds jax documents: the arrays"
                               f" register values, the other parameters static Python values (a tuple of ints for"
                               f" axes or dimensions)") from None


def formula(tracer, cx, node, fn, args, kwargs):
  """jax.nn.silu(v), jax.nn.gelu(v, approximate=False), jax.nn.leaky_relu(v, 0.1), jnp.add(a, b): the
  formula activation_forms writes (the hints' own), traced at the call with the arguments bound by the
  library's signature; None where they do not bind. Another argument (jnp.add's out= or where=) is refused
  by name unless it is the library's default."""
  lib, name = library(fn)
  shown = f"{lib}.{name}"
  try:
    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
  except TypeError:
    unknown = [k for k in kwargs if k not in sig.parameters]
    if unknown:
      _refuse(cx, shown, None, unknown[0], kwargs[unknown[0]])
    return None
  except ValueError:
    return None
  given = dict(bound.arguments)
  params = list(sig.parameters.values())
  if (lib, name) in SHAPED:      # jnp.expand_dims(v, 1), lax.broadcasted_iota(jnp.int32, (8, 128), 1)
    reads, make = SHAPED[lib, name]
    bound.apply_defaults()
    from .ops.padded_tiles import true_shape
    # (`_shape_of`: a value's own shape, unpadded where it is computed padded, for the forms that read shapes)
    try:
      got = make({**bound.arguments, "_shape_of": lambda x: true_shape(tracer.b, x), "_fn": fn})   # (`_fn`: the
                                                                                   # library's function, per item)
    except (TypeError, ValueError, IndexError, KeyError):
      _bad_arguments(cx, shown, sig, bound.arguments)
    if got is None:
      return None
    (form, operands), rest = got, [p for p in params if p.name not in reads]
  elif params and params[0].kind is params[0].VAR_POSITIONAL:     # a ufunc's (*args, out=None, where=None)
    operands, rest = list(given.pop(params[0].name, ())), params[1:]
  else:         # the operands: the first parameter (two for a binary operator, lax.add(x, y))
    k = 2 if lib != "jax.nn" and "{1}" in _OPERATORS[name] else 1
    if any(p.name not in given for p in params[:k]):
      return None
    operands, rest = [given.pop(p.name) for p in params[:k]], params[k:]
  if (lib, name) in SHAPED:
    pass
  elif lib == "jax.nn":
    form = ACTIVATIONS.get(name)
    if name == "gelu":
      approximate = given.pop("approximate", True)
      if not isinstance(approximate, (bool, np.bool_)):
        return None          # (a run-time flag: its MG003)
      form = ACTIVATIONS["gelu"] if approximate else GELU_EXACT
    if name in ACTIVATION_PARAMS:
      key, default = ACTIVATION_PARAMS[name]
      operands.append(given.pop(key, float(default)))
    d = str(getattr(getattr(operands[0], "type", None), "dtype", ""))
    if d in ("float16", "bfloat16"):        # (in float32, rounded once: XLA's; a Python float parameter as jax's)
      form = widened(form, d)
      if len(operands) > 1 and isinstance(operands[1], float):
        operands[1] = float(np.asarray(operands[1], operands[0].type.dtype.np))
    form = promoted(name, form, d)        # (an integer or bool operand: in float32 first, as jax.nn's)
  else:
    form = _OPERATORS[name]
    if name == "square" and operands and str(getattr(getattr(operands[0], "type", None), "dtype", "")) == "bool":
      form = "{0}.astype(ml.int32) * {0}.astype(ml.int32)"       # (jnp.square of a bool tensor is int32)
    if len(operands) < 1 + ("{1}" in form) or len(operands) > 1 + ("{1}" in form):
      return None
  for p in rest:           # every other argument at its default
    if p.name in given and not (given[p.name] is None and _default(p) is None):
      _refuse(cx, shown, None, p.name, given[p.name])
  from .ops.base import is_value
  try:
    out = trace_form(tracer, node, form, operands, [cx.named(op, "") if is_value(op) else "" for op in operands])
    if name == "arange" and operands[3] is None:     # jnp.arange(a, b, s) of ints: int64 in jnp under x64, exact
      from .ops.default_ints import mark          # here (its stop fits int32, or the form refused it)
      mark(cx.b, "arange", out)
    return out
  except E.KernelError as e:          # (a form_helpers helper's step: reported at the call, in the call's words)
    if not (e.filename or "").endswith("form_helpers.py") or isinstance(e, E.InternalError):
      raise
    what = ", ".join(f"{kind_of_operand(op)}" for op in operands if is_value(op))
    raise type(e)(f"{shown} of {what} is not computed in a kernel: {e.message}", cx.loc, hint=e.hint) from None


def kind_of_operand(v) -> str:
  """`a float32 (8, 100) tensor`, for messages about a call's operands."""
  t = getattr(v, "type", None)
  return f"a {getattr(t, 'dtype', '')} {tuple(getattr(t, 'shape', ()))} tensor"


def trace_form(tracer, node, form, operands, names=()):
  """The value of `form` (ml.* functions of {0}, {1}, ...) of `operands`, traced at the call `node`; a mistake
  it reports names each operand as the user wrote it (`names`, where known) rather than the form's own
  temporary."""
  temps = [f"_jnp_arg{i}_" for i in range(len(operands))]
  tree = ast.parse(form.replace("ml.", "_jnp_ml_.").format(*temps), mode="eval").body
  # (messages quote the form's expressions as the user wrote them: the whole form as the call, its parts with
  # each temporary as its operand's text and ml.* as ml.*, not `_jnp_ml_.arange(_jnp_arg0_)`: probe 50b)
  shown = {t: name or _operand_text(op) for t, name, op in zip(temps, list(names) + [""] * len(temps), operands)}
  shown["_jnp_ml_."] = "ml."
  for n in ast.walk(tree):
    n.lineno, n.col_offset = node.lineno, node.col_offset
    n.end_lineno, n.end_col_offset = node.end_lineno, node.end_col_offset
    n.mgpu_shown = shown
  tree.mgpu_text = tracer.text(node)
  from . import language
  with names_restored(tracer.env, temps + ["_jnp_ml_"]):     # (the form's temporaries: unbound again after it)
    tracer.env.update(dict(zip(temps, operands)), _jnp_ml_=language)
    try:
      out = tracer.eval(tree)
      for v in out if isinstance(out, tuple) else (out,):
        if "_jnp_" in (getattr(v, "name", None) or ""):     # named as the user wrote the call, not as the form
          v.name = tracer.text(node)
      return out
    except E.KernelError as e:
      for t, name in shown.items():
        e.message, e.hint = e.message.replace(t, name), e.hint and e.hint.replace(t, name)
      import re                 # ("ml.max: axis 2 ..." of lax.reduce_max(v, axes=(2,)): the function called)
      ml_name = re.match(r"ml\.(\w+)[: ]", e.message)
      called = tracer.text(node.func) if isinstance(node, ast.Call) else ""
      if ml_name and called and not called.startswith("ml.") and f"ml.{ml_name.group(1)}(" in form:
        e.message = f"{called} (as ml.{ml_name.group(1)}){e.message[len(ml_name.group(1)) + 3:]}"
      elif called and not called.startswith("ml."):   # ("- on v of shape (8, 64) and ...": the form's operator)
        from .inline import _as_called
        _as_called(e, called)
      e.args = (e.message,)
      raise


def _operand_text(v) -> str:
  """A form's operand that is no traced value, as a message writes it: `4`, `jnp.float32`, `(4, 4)`."""
  from .dtypes import DType
  if isinstance(v, DType):
    return f"jnp.{v.value}"
  if isinstance(v, np.dtype) or isinstance(v, type) and isinstance(getattr(v, "dtype", None), np.dtype):
    return f"jnp.{np.dtype(v if isinstance(v, np.dtype) else v.dtype).name}"
  if isinstance(v, (bool, int, float, tuple, str, type(None))):
    return repr(v)
  import re
  from .ir import Value    # a traced value the user named (`xv`, `w[...]`, `k_s.T`): its name (probe 68a: every one
  name = v.name if isinstance(v, Value) else ""     # was `x`, so `jnp.dot(xv, wv)`'s buffers were `x_s`, `x padded`)
  return name if name and "_jnp_" not in name and re.fullmatch(r"[A-Za-z_][\w.]*(\[[^\]]*\])*", name) else "x"
