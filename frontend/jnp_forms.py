"""jnp and jax.lax functions ml has no namesake for (jnp's statistics, logaddexp and linalg.norm among them, are
jnp_stats.py's), written as a form of ml.* functions of their operands (the forms the MG003 hints of missing.py
wrote), and NumPy's functions of register values as their jnp twins. Each form is jax's own definition where it has
one (`jnp.fmin` is `where((x1 < x2) | isnan(x2), x1, x2)`), so the numbers and the result dtype are jnp's; a call
whose arguments the form cannot take (`jnp.arange(0.0, 1.0, 0.1)`, whose float32 values jnp rounds from float64, a
run-time `lax.integer_pow` exponent) has no form, and its MG003 hint stands. Forms are traced by jnp_calls.formula
as jnp_calls.SHAPED's are: (the parameters the form reads, a function of the bound arguments giving (the form, its
operands) or None)."""
from __future__ import annotations

import sys

import numpy as np
from .activation_forms import widened, widened_pair


def _dtype(x):
  """The dtype of a register value (its resolved DType), None for a Python number or an unresolved dtype."""
  t = getattr(x, "type", None)
  if t is None:
    return None
  from .types import resolve
  return getattr(t, "dtype", None) and resolve(t.dtype)


def _kind(x) -> str | None:
  """'float', 'int' or 'bool' of a register value or a Python number; None otherwise."""
  d = _dtype(x)
  if d is not None:
    return "bool" if getattr(d, "name", "") == "bool" or str(d) == "bool" else \
        "float" if getattr(d, "is_float", False) else "int" if getattr(d, "is_int", False) else None
  if isinstance(x, (bool, np.bool_)):
    return "bool"
  if isinstance(x, (int, np.integer)):
    return "int"
  if isinstance(x, (float, np.floating)):
    return "float"
  return None


def _pair(a, names=("x1", "x2")):
  """The two operands of a binary function: a ufunc's *args, or its named parameters."""
  xs = a["args"] if "args" in a else tuple(a.get(n) for n in names)
  return list(xs) if len(xs) == 2 and all(_kind(x) is not None for x in xs) else None


def _nan_free(x) -> bool:
  """A Python number that is not NaN (its own NaN test is static: no select on it)."""
  return _dtype(x) is None and not (isinstance(x, (float, np.floating)) and x != x)


def _fmin_fmax(op):
  def make(a):
    xs = _pair(a)
    if xs is None:
      return None
    nan = "" if _nan_free(xs[1]) else " | ({1} != {1})"
    return f"ml.where(({{0}} {op} {{1}}){nan}, {{0}}, {{1}})", xs       # jax's own: x1 unless x2 is less (or NaN)
  return make


def _truth(i, x):
  """Operand `i` as a boolean, as jnp's logical functions take it (non-zero, NaN included)."""
  return f"{{{i}}}" if _kind(x) == "bool" else f"({{{i}}} != 0)"


def _logical(op):
  def make(a):
    xs = _pair(a) if op != "~" else [a["x"]]
    if xs is None or any(_kind(x) is None for x in xs):
      return None
    xs = [bool(x) if _dtype(x) is None else x for x in xs]     # a Python number's truth, now
    if op == "~":
      return f"~{_truth(0, xs[0])}", xs
    return f"{_truth(0, xs[0])} {op} {_truth(1, xs[1])}", xs
  return make


def _inexact(x, form):
  """`form` of operand {0} where an integer or bool operand is float32 first (jnp's inexact functions)."""
  return form.replace("{0}", "{0}.astype(ml.float32)") if _kind(x) in ("int", "bool") else form


def _integer_pow(a):
  y = a["y"]
  if not isinstance(y, (int, np.integer)) or isinstance(y, bool):
    return None
  return "{0} ** {1}", [a["x"], int(y)]


def _tile(a):
  x, reps = a["A"], a["reps"]
  reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
  shape = getattr(getattr(x, "type", None), "shape", None)
  if shape is None or not all(isinstance(r, (int, np.integer)) and r >= 1 for r in reps) or len(reps) < len(shape):
    return None
  form = "{0}"
  if len(reps) > len(shape):       # jnp.tile prepends axes of 1 to the operand
    form = f"{form}.reshape({(1,) * (len(reps) - len(shape)) + tuple(shape)!r})"
  for axis, r in enumerate(reps):
    if r > 1:
      form = f"ml.concatenate([{', '.join([form] * int(r))}], axis={axis})"
  return form, [x]


def _exact_f32(values) -> bool:
  with np.errstate(all="ignore"):
    return bool(np.all(values.astype(np.float32).astype(np.float64) == values))


def _arange(a):
  """jnp.arange of static numbers: the count and jnp's dtype (float32 where any is a float, else int32, or
  `dtype=`), as start + step * ml.arange(n). A float step or start whose values float32 holds exactly is exact
  here as in jnp (which rounds np.arange's float64 values); another (0.1) is no form."""
  start, stop, step, dtype = a["start"], a["stop"], a["step"], a["dtype"]
  if stop is None:
    start, stop = 0, start
  step = 1 if step is None else step
  nums = (start, stop, step)
  if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in nums) or \
      step == 0 or a.get("device") is not None or a.get("out_sharding") is not None:
    return None
  floats = any(isinstance(v, (float, np.floating)) for v in nums)
  n = len(np.arange(start, stop, step))
  if n == 0:
    return None
  idx = np.arange(n, dtype=np.float64)
  if floats and not (_exact_f32(idx * step) and _exact_f32(start + idx * step) and _exact_f32(np.float64(step))
                     and _exact_f32(np.float64(start))):
    return None
  base = "ml.arange({0})"
  from .dtypes import DType, to_dtype, to_dtype_name
  named = to_dtype_name(dtype) if isinstance(dtype, str) else to_dtype(dtype)
  wide = not floats and (named == DType.i64 or dtype is int)     # (int: int64 with jax_enable_x64, as jnp's)
  if floats:
    base = f"{base}.astype(ml.float32)"
  elif wide:         # (jnp.arange(2 ** 40, 2 ** 40 + 64, dtype=jnp.int64): counted in int64, its start past int32)
    base = f"{base}.astype({{3}})"
  if step != 1:
    base = f"{base} * {{1}}"
  if start != 0:
    base = f"{{2}} + {base}"
  form = base if dtype is None and not floats or wide else f"({base}).astype({{3}})" if dtype is not None else base
  cast = step if not floats else float(step)
  return form, [n, cast, float(start) if floats else start, dtype]


_BITS = {"float32": "ml.int32", "float16": "ml.int16", "bfloat16": "ml.int16"}
_MAX = {"float32": float(np.finfo(np.float32).max), "float16": 65504.0, "bfloat16": 3.3895313892515355e38}


def _signbit(a):
  x = a["x"]
  bits = _BITS.get(str(_dtype(x)))
  return None if bits is None else (f"ml.bitcast({{0}}, {bits}) < 0", [x])      # (-0.0 too, as jnp.signbit)


def _nan_to_num(a):
  x, d = a["x"], str(_dtype(a["x"]))
  if _kind(x) in ("int", "bool"):
    return "{0}", [x]
  if d not in _MAX or not all(isinstance(v, (int, float)) or v is None for v in (a["nan"], a["posinf"], a["neginf"])):
    return None
  hi = _MAX[d] if a["posinf"] is None else float(a["posinf"])
  lo = -_MAX[d] if a["neginf"] is None else float(a["neginf"])
  return ("ml.where({0} != {0}, {1}, ml.where({0} == float('inf'), {2}, ml.where({0} == -float('inf'), {3}, {0})))",
          [x, float(a["nan"]), hi, lo])


def _shape(x):
  return getattr(getattr(x, "type", None), "shape", None)


def _triangle(op):
  def make(a):
    m, k = a["m"], a["k"]
    shape = _shape(m)
    if shape is None or len(shape) != 2 or not isinstance(k, (int, np.integer)) or isinstance(k, bool):
      return None
    rows, cols = shape
    return (f"ml.where(ml.arange({cols})[None, :] {op} ml.arange({rows})[:, None] + {int(k)}, {{0}}, 0)", [m])
  return make


def _outer(a):
  x, y = a["a"], a["b"]
  if any(_shape(v) is None or len(_shape(v)) != 1 for v in (x, y)):
    return None
  return "{0}[:, None] * {1}[None, :]", [x, y]


def _hypot(a):
  xs = _pair(a)
  if xs is None or any(_kind(x) != "float" for x in xs):
    return None
  # jax's: the larger of |x1|, |x2| times sqrt(1 + (smaller / larger)**2), 0 where the larger is, inf where either is
  return widened_pair("ml.where(ml.isinf({0}) | ml.isinf({1}), float('inf'),"
                      " ml.where(ml.maximum(ml.abs({0}), ml.abs({1})) == 0, ml.maximum(ml.abs({0}), ml.abs({1})),"
                      " ml.maximum(ml.abs({0}), ml.abs({1})) * ml.sqrt(1 + (ml.minimum(ml.abs({0}), ml.abs({1}))"
                      " / ml.where(ml.maximum(ml.abs({0}), ml.abs({1})) == 0, 1, ml.maximum(ml.abs({0}),"
                      " ml.abs({1})))) ** 2)))", *xs)


def _copysign(a):
  xs = _pair(a)
  if xs is None or _dtype(xs[1]) is None or _dtype(xs[0]) is None or _kind(xs[0]) != "float":
    return None
  bits = _BITS.get(str(_dtype(xs[1])))
  if bits is None:
    return None
  x = "{0}"
  if _dtype(xs[0]) != _dtype(xs[1]):        # jnp's promotion of the two (bfloat16 with float32: float32)
    from .ops.promotion import arithmetic_in
    up = arithmetic_in(_dtype(xs[0]), _dtype(xs[1])) if _kind(xs[1]) == "float" else _dtype(xs[0])
    if up is None:
      return None
    x = "{0}.astype({2})"
    xs = [*xs, up]
  return f"ml.where(ml.bitcast({{1}}, {bits}) < 0, -ml.abs({x}), ml.abs({x}))", xs


def _isclose(a):
  x, y = a["a"], a["b"]
  if not all(_kind(v) == "float" for v in (x, y)) or not all(
      isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a["rtol"], a["atol"])):
    return None
  nan = " | (ml.isnan({0}) & ml.isnan({1}))" if a["equal_nan"] else ""
  # jax's: |a - b| <= atol + rtol * |b| where neither is infinite, equal infinities, never a NaN (unless equal_nan)
  return ("(((ml.abs({0} - {1}) <= {3} + {2} * ml.abs({1})) & ~(ml.isinf({0}) | ml.isinf({1}))"
          " | (ml.isinf({0}) & ml.isinf({1}) & ({0} == {1}))) & ~(ml.isnan({0}) | ml.isnan({1}))" + nan + ")"), \
      [x, y, float(a["rtol"]), float(a["atol"])]


def _allclose(a):
  """jnp.allclose: every element jnp.isclose (a scalar bool; probe 53i, it was MG003)."""
  got = _isclose(a)
  return None if got is None else (f"ml.all({got[0]})", got[1])


def _array_equal(a):
  """jnp.array_equal of two register tensors of one shape: every element equal (NaN too where equal_nan)."""
  x, y, nan = a["a1"], a["a2"], a["equal_nan"]
  if _shape(x) is None or _shape(y) is None or tuple(_shape(x)) != tuple(_shape(y)) or not isinstance(
      nan, (bool, np.bool_)) or _kind(x) is None or _kind(y) is None:
    return None
  same = "({0} == {1}) | (({0} != {0}) & ({1} != {1}))" if nan and "float" in (_kind(x), _kind(y)) else "{0} == {1}"
  return f"ml.all({same})", [x, y]


def _one_hot(a):
  """jax.nn.one_hot of ids of any rank (an MoE router's (tokens, k) top-k experts: (tokens, k, experts)), the
  classes along `axis`: the ids with a size-1 axis there compared with the classes' index vector (an id outside
  [0, n), negative too, matches none: a row of zeros, as jax's)."""
  x, n, dtype, axis = a["x"], a["num_classes"], a["dtype"], a["axis"]
  shape = _shape(x)
  if shape is None or not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not isinstance(
      axis, (int, np.integer)) or isinstance(axis, bool) or not -len(shape) - 1 <= axis <= len(shape):
    return None
  rank, at = len(shape) + 1, int(axis) % (len(shape) + 1)
  ids = ", ".join("None" if k == at else ":" for k in range(rank))
  classes = ", ".join(":" if k == at else "None" for k in range(rank))
  return (f"({{0}}[{ids}] == ml.arange({{1}})[{classes}]).astype({{2}})",
          [x, int(n), "float32" if dtype is None else dtype])


def _as(kind):
  def make(a):
    if a.get("sharding") is not None or a.get("weak_type"):
      return None
    return f"ml.{kind}({{0}}, {{1}})", [a["operand"], a["new_dtype"]]
  return make


def _nonzero(kind):
  """jnp.nonzero / flatnonzero / argwhere with a static size= (an MoE capacity's token slots, the kept elements of
  a mask packed to the front): each kept element's rank among them (an exclusive count, ml.cumsum) names the slot
  its flat index goes to, summed per slot by ml.segment_sum (ranks past size dropped, an empty slot 0, jnp's
  default fill; another fill_value where the slot is past the count); 2-D indices split by the row width."""
  def make(a):
    x, size, fill = a["a"], a["size"], a["fill_value"]
    shape = _shape(x)
    if shape is None or len(shape) not in (1, 2) or not isinstance(size, (int, np.integer)) or isinstance(
        size, bool) or size < 1 or not (fill is None or isinstance(fill, (int, np.integer)) and not isinstance(
            fill, bool)):
      return None
    hit = "{0}" if _kind(x) == "bool" else "({0} != 0)"
    flat = hit if len(shape) == 1 else f"{hit}.reshape(-1)"
    idx = (f"ml.segment_sum(ml.arange({{0}}.size), ml.where({flat}, ml.cumsum({flat}.astype(ml.int32)) - 1, -1),"
           f" num_segments={int(size)})")
    filled = fill not in (None, 0)
    keep = f"ml.arange({int(size)}) < ml.sum({flat}.astype(ml.int32))"
    if kind == "flatnonzero" or len(shape) == 1:
      idx = f"ml.where({keep}, {idx}, {int(fill)})" if filled else idx
      out = {"flatnonzero": "{i}", "nonzero": "({i},)", "argwhere": "{i}[:, None]"}[kind]
      return out.format(i=idx), [x]
    # (the fill goes into each coordinate, as jnp's: a row and a column of -1, not -1 split by the row width)
    row, col = "_i_ // {0}.shape[1]", "_i_ % {0}.shape[1]"
    if filled:
      row, col = (f"ml.where(_k_, {c}, {int(fill)})" for c in (row, col))
    out = {"nonzero": f"({row}, {col})",
           "argwhere": f"ml.concatenate([({row})[:, None], ({col})[:, None]], axis=1)"}[kind]
    return f"(lambda _i_, _k_: {out})({idx}, {keep if filled else 'None'})", [x]
  return make


def _take(a):
  """jnp.take(v, ids) of a 1-D register vector (mode None or "fill", jnp's default): the register gather v[ids],
  fill_value (NaN, or the dtype's lowest integer, as jnp's default) where an index lies outside [-n, n) (inside,
  a negative one counts from the end, as jnp's)."""
  x, ids, axis, mode, fill = a["a"], a["indices"], a["axis"], a["mode"], a["fill_value"]
  shape, d = _shape(x), _dtype(x)
  if shape is None or len(shape) != 1 or _shape(ids) is None or axis not in (None, 0) or mode not in (
      None, "fill") or d is None or _kind(x) not in ("float", "int") or a["out"] is not None:
    return None
  if fill is None:
    fill = float("nan") if _kind(x) == "float" else int(np.iinfo(str(d)).min if d.is_signed else np.iinfo(str(d)).max)
  return "ml.where(({1} >= -{0}.shape[0]) & ({1} < {0}.shape[0]), {0}[{1}], {2})", [x, ids, fill]


FORMS = {
    ("jnp", "take"): (("a", "indices", "axis", "out", "mode", "unique_indices", "indices_are_sorted", "fill_value"),
                      _take),
    ("jnp", "nonzero"): (("a", "size", "fill_value"), _nonzero("nonzero")),
    ("jnp", "flatnonzero"): (("a", "size", "fill_value"), _nonzero("flatnonzero")),
    ("jnp", "argwhere"): (("a", "size", "fill_value"), _nonzero("argwhere")),
    ("jnp", "fmin"): (("x1", "x2"), _fmin_fmax("<")), ("jnp", "fmax"): (("x1", "x2"), _fmin_fmax(">")),
    ("jnp", "reciprocal"): (("x",), lambda a: ("1 / {0}", [a["x"]])),
    **{("jnp", f"logical_{n}"): (("args", "x1", "x2"), _logical(op)) for n, op in (("and", "&"), ("or", "|"),
                                                                                  ("xor", "^"))},
    ("jnp", "logical_not"): (("x",), _logical("~")),
    ("jax.lax", "clamp"): (("min", "x", "max"), lambda a: ("ml.clip({1}, {0}, {2})", [a["min"], a["x"], a["max"]])),
    ("jax.lax", "integer_pow"): (("x", "y"), _integer_pow),
    ("jax.lax", "convert_element_type"): (("operand", "new_dtype", "weak_type", "sharding"), _as("cast")),
    ("jax.lax", "bitcast_convert_type"): (("operand", "new_dtype"), _as("bitcast")),
    ("jax.lax", "expand_dims"): (("array", "dimensions"), lambda a: ("ml.expand_dims({0}, {1})",
                                                                     [a["array"], tuple(a["dimensions"])])),
    ("jnp", "log10"): (("x",), lambda a: (_inexact(a["x"], widened("ml.log({0}) * 0.4342944819032518",
                                                                  str(_dtype(a["x"])))), [a["x"]])),
    ("jnp", "tile"): (("A", "reps"), _tile),
    ("jnp", "rint"): (("x",), lambda a: (_inexact(a["x"], "ml.round({0})"), [a["x"]])),
    ("jnp", "signbit"): (("x",), _signbit),
    ("jnp", "nan_to_num"): (("x", "copy", "nan", "posinf", "neginf"), _nan_to_num),
    ("jnp", "tril"): (("m", "k"), _triangle("<=")), ("jnp", "triu"): (("m", "k"), _triangle(">=")),
    ("jnp", "outer"): (("a", "b"), _outer), ("jnp", "hypot"): (("x1", "x2"), _hypot),
    ("jnp", "copysign"): (("x1", "x2"), _copysign),
    ("jnp", "isclose"): (("a", "b", "rtol", "atol", "equal_nan"), _isclose),
    ("jnp", "allclose"): (("a", "b", "rtol", "atol", "equal_nan"), _allclose),
    ("jnp", "array_equal"): (("a1", "a2", "equal_nan"), _array_equal),
    ("jax.nn", "one_hot"): (("x", "num_classes", "dtype", "axis"), _one_hot),
    ("jnp", "asarray"): (("a", "dtype"), lambda a: _stacked({**a, "object": a["a"]}) if isinstance(a["a"], (
        tuple, list)) else None if _dtype(a["a"]) is None else (
        "{0}" if a["dtype"] is None else "{0}.astype({1})", [a["a"], a["dtype"]])),
    ("jnp", "arange"): (("start", "stop", "step", "dtype", "device", "out_sharding"), _arange),
    ("jnp", "array"): (("object", "dtype", "copy", "order", "ndmin", "device", "out_sharding"), lambda a: _stacked(
        a) if isinstance(a["object"], (tuple, list)) else None if (
        _dtype(a["object"]) is None or a["ndmin"] or a["order"] not in (None, "K", "A", "C") or a["device"] is not None
        or a["out_sharding"] is not None) else ("{0}" if a["dtype"] is None else "{0}.astype({1})",
                                                [a["object"], a["dtype"]])),     # (a register value: asarray's)
    ("jnp", "astype"): (("x", "dtype", "copy", "device"), lambda a: None if a["device"] is not None else (
        "{0}.astype({1})", [a["x"], a["dtype"]])),     # the array API's function of x.astype(dtype)
}

def _stacked(a):
  """jnp.array([t0, t1]) of register values: their stack (probe 52b)."""
  from .jnp_calls import stacked_array
  return stacked_array(a)


# jnp's and lax's functions that are an operator of the DSL, which computes it as jnp does (jnp_calls._OPERATORS)
OPERATORS = {
    **{n: f"{{0}} {op} {{1}}" for n, op in (
        ("equal", "=="), ("not_equal", "!="), ("greater", ">"), ("greater_equal", ">="), ("less", "<"),
        ("less_equal", "<="), ("eq", "=="), ("ne", "!="), ("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="),
        ("bitwise_and", "&"), ("bitwise_or", "|"), ("bitwise_xor", "^"), ("left_shift", "<<"), ("right_shift", ">>"),
        ("shift_left", "<<"), ("floor_divide", "//"), ("remainder", "%"), ("mod", "%"))},
    "bitwise_not": "~{0}", "invert": "~{0}", "positive": "+{0}", "rem": "ml.fmod({0}, {1})",
}


def numpy_twin(fn, args, kwargs):
  """jnp's function of NumPy's name (`np.exp`, `np.maximum`, `np.sum`) where a register value is among the
  arguments and jax.numpy is loaded (the kernel's caller imported jax; the frontend imports no jax): NumPy's
  function of a register value computes as jnp's does. None otherwise (np.sqrt(2.0) is a static number)."""
  mod, name = getattr(fn, "__module__", None) or "", getattr(fn, "__name__", None)
  numpy = mod == "numpy" or mod.startswith("numpy.") or type(fn).__module__ == "numpy"    # (jnp's ufuncs: jax's)
  if not numpy or name is None:
    return None
  from .assign import holds_value
  if not any(holds_value(x) for x in list(args) + list(kwargs.values())):
    return None
  jnp = sys.modules.get("jax.numpy")
  twin = getattr(jnp, name, None) if jnp is not None else None
  return twin if callable(twin) and twin is not fn else None
