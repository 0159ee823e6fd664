"""Python's builtins on run-time scalars, as Python computes them on the same numbers where that differs from the
elementwise ml.* function a tensor takes: `max(a, b)` of float scalars is Python's `b if b > a else a` (the first
of equal values, -0.0 in max(-0.0, 0.0); a NaN kept only where it comes first), not ml.maximum's."""
from __future__ import annotations

import math

from .ops import elementwise as ew
from .ops.base import is_value
from .types import ScalarType, resolve


def _scalar(v) -> bool:
  """A run-time scalar or a Python number (not a tensor, a tuple, ...)."""
  return is_value(v) and isinstance(v.type, ScalarType) or type(v) in (int, float, bool)


def min_max(cx, is_max: bool, out, v):
  """`max(out, v)` (`min`) of run-time values: Python's rule on two scalars of a float dtype (`v` only where it
  is greater, as Python's max keeps the first of equal values and skips a later NaN); elementwise ml.maximum
  (ml.minimum) otherwise (integers, where the two agree; tensors, which Python's max does not take)."""
  kind, what = (ew.BinOp.MAX, "max") if is_max else (ew.BinOp.MIN, "min")     # (messages name the builtin called)
  if not (_scalar(out) and _scalar(v)):
    return ew.binary(cx, kind, out, v, what)
  (a, b), _, dt = ew.common(cx, out, v, what)
  d = resolve(dt)
  if not getattr(d, "is_float", False):
    return ew.binary(cx, kind, out, v, what)
  take = ew.compare(cx, ew.CmpOp.GT if is_max else ew.CmpOp.LT, b, a)
  return ew.where_(cx, take, b, a)


def member(cx, a, items, negate: bool):
  """`a in items` (`not in` where `negate`) of a run-time scalar or a Python number and a static tuple, list or set
  of them, one of them run-time: Python's, whether `a == item` for some item, `|` of the comparisons (each a
  comparison, so computing them all is Python's value); a Python item equal to a Python `a` decides while tracing.
  None where an item (or `a`) is another kind of value (a tensor: the caller's message)."""
  if type(items) is range:
    return _in_range(cx, a, items, negate)
  if type(items) not in (tuple, list, set, frozenset) or not all(_scalar(v) for v in (a, *items)):
    return None
  out = None
  for v in items:
    if not is_value(a) and not is_value(v):
      if a == v:
        return not negate
      continue
    eq = ew.compare(cx, ew.CmpOp.EQ, a, v)
    out = eq if out is None else ew.binary(cx, ew.BinOp.OR, out, eq)
  if out is None:
    return negate                 # no item equal (an empty tuple): False, True for `not in`
  return ew.unary(cx, ew.UnOp.NOT, out) if negate else out


def _in_range(cx, a, r: range, negate: bool):
  """`k in range(lo, hi, step)` of a run-time integer scalar: Python's, k within the bounds and a whole number of
  steps from lo (not every item compared). None for another value (a float, whose `in` compares each item)."""
  if not (is_value(a) and isinstance(a.type, ScalarType) and getattr(resolve(a.type.dtype), "is_int", False)):
    return None
  if len(r) == 0:
    return negate
  lo, last = r[0], r[-1]
  low, high = (lo, last) if r.step > 0 else (last, lo)
  inside = ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.GE, a, low), ew.compare(cx, ew.CmpOp.LE, a, high))
  if abs(r.step) != 1:
    on = ew.compare(cx, ew.CmpOp.EQ, ew.binary(cx, ew.BinOp.MOD, ew.binary(cx, ew.BinOp.SUB, a, low), abs(r.step)), 0)
    inside = ew.binary(cx, ew.BinOp.AND, inside, on)
  return ew.unary(cx, ew.UnOp.NOT, inside) if negate else inside


def type_test(cx, fn, args, texts):
  """`isinstance(v, T)` or `type(v)` where `v` holds run-time values: Python's answer where `v` is a static
  container of them (`isinstance(pair, tuple)`, its type known while tracing); a KernelTypeError where `v` is a
  run-time value itself, whose Python type (a traced value's) says nothing of its dtype: its static dtype hinted."""
  import builtins

  from . import errors as E
  from .carried import describe
  from .types import RefType, dtype_name
  v = args[0]
  if not is_value(v):
    return fn(*args)
  types = args[1] if len(args) == 2 and isinstance(args[1], tuple) else args[1:2]
  if fn is builtins.isinstance and types and all(t in (list, tuple, dict, set, str, bytes, type(None)) for t in types):
    return False       # (isinstance(g, list) of jnp.gradient's result: a value is no container, in jax's trace too)
  name = texts[0] if texts else "v"
  call = f"{fn.__name__}({', '.join(texts)})"
  d = resolve(v.type.dtype)
  kind = "jnp.floating" if getattr(d, "is_float", False) else "jnp.integer"
  test = (f"jnp.issubdtype({name}.dtype, {kind})" if fn is builtins.isinstance else
          f"{name}.dtype == jnp.{dtype_name(d)}")
  what = "ref" if isinstance(v.type, RefType) else "value"
  raise E.KernelTypeError(
      f"{call} of a run-time {what}: {name} is {describe(v)}, traced while compiling, so its Python type does not"
      f" tell its dtype or shape", cx.loc,
      hint=f"test its dtype or shape, which are static (an if on them is decided while tracing): {test}, or"
           f" {name}.ndim == 0 for a scalar")


def round_int(cx, x, ndigits: int):
  """Python's (and NumPy's) `round(i, -k)` of integers: to the nearest multiple of 10**k, halves to the even
  multiple (round(25, -1) is 20, round(35, -1) 40); jnp.round does not take negative decimals of integers. In
  32 bits for narrower types, converted back (wrapping, as NumPy's conversion does)."""
  from .dtypes import DType
  d = resolve(x.type.dtype)
  m = 10 ** -ndigits
  w = x if d.bits == 32 else ew.astype(cx, x, DType.i32)
  if m > (2 ** 32 - 1 if d == DType.u32 else 2 ** 31 - 1):      # every value rounds to 0 (|x| < m / 2)
    out = ew.binary(cx, ew.BinOp.MUL, w, 0)
  else:
    r = ew.binary(cx, ew.BinOp.MOD, w, m)       # 0 <= r < m (floor mod)
    base = ew.binary(cx, ew.BinOp.SUB, w, r)
    half = ew.binary(cx, ew.BinOp.SUB, r, m - m // 2)      # r - m/2 without 2 * r's overflow (m is even)
    odd = ew.compare(cx, ew.CmpOp.NE, ew.binary(cx, ew.BinOp.MOD, ew.binary(cx, ew.BinOp.FLOORDIV, base, m), 2), 0)
    up = ew.binary(cx, ew.BinOp.OR, ew.compare(cx, ew.CmpOp.GT, half, 0),
                   ew.binary(cx, ew.BinOp.AND, ew.compare(cx, ew.CmpOp.EQ, half, 0), odd))
    out = ew.where_(cx, up, ew.binary(cx, ew.BinOp.ADD, base, m), base)
  return out if d.bits == 32 else ew.astype(cx, out, d)


def is_float_scalar(x) -> bool:
  """A run-time float scalar (not a tensor)."""
  d = resolve(x.type.dtype) if is_value(x) and isinstance(x.type, ScalarType) else None
  return getattr(d, "is_float", False)


def round_to_int(cx, x):
  """Python's `round(f)` (no ndigits, or None) of a float scalar: an int, the nearest whole number with halves to
  the even one (round(2.5) is 2, as jnp.round), as an int32, so that `x[round(f)]` indexes. Past int32's range
  (and of NaN or inf, where Python raises) the conversion's result (saturated; NaN 0), as .astype(jnp.int32)."""
  from .dtypes import DType
  return ew.astype(cx, ew.unary(cx, ew.UnOp.ROUND, x), DType.i32)


def builtin_arguments(cx, fn, args, kwargs, call: str) -> None:
  """Python's TypeError for a builtin called on run-time values with arguments its signature does not take
  (`abs(f, i)` computed abs(f) and dropped i): KernelTypeError naming the signature."""
  import inspect

  from . import errors as E
  try:
    sig = inspect.signature(fn)
  except (TypeError, ValueError):      # (min, max, int, bool, ...: no signature to check)
    return
  try:
    sig.bind(*args, **kwargs)
  except TypeError as e:
    shown = str(sig).replace(", /", "").replace("/, ", "").replace(", *,", ",")
    raise E.KernelTypeError(f"{call}: {e} for Python's {fn.__name__}{shown}", cx.loc,
                            hint=f"call it as Python does: {fn.__name__}{shown}") from None


_FORMATS = ("str", "repr", "hex", "bin", "oct", "chr", "ord", "format", "hash", "bytes")


def builtin_value_hint(fn, args, texts) -> str | None:
  """The hint for a Python builtin that has no meaning on a run-time value in a kernel (which the generic message
  would tell to decorate as an @ml.inline helper): what the value takes instead. None for the others."""
  from .types import TensorType
  name = getattr(fn, "__name__", "")
  v = args[0] if args else None
  first = texts[0] if texts else "v"
  if name in _FORMATS:
    return (f"{name}(...) makes a Python object while tracing, when a run-time value has no value yet: format run-time"
            f" values in print(f'...') (print(f'{{{first}}}')), or convert numbers with .astype")
  if name == "complex":
    return "kernels have no complex dtype: keep the real and imaginary parts as two float values"
  if name == "len" and is_value(v) and isinstance(v.type, ScalarType):
    return "a scalar has no length (Python's TypeError); len(t) of a register tensor is its first dimension"
  if name == "pow" and len(args) == 3:
    return (f"pow(a, b, mod) is not computed on run-time values: write ({first} ** {texts[1]}) % {texts[2]} (the power"
            f" wraps at 32 bits, so for large exponents multiply and reduce step by step)")
  if name == "int" and len(args) == 2:
    return f"int(x, base) parses a string: convert a number with int({first}) or {first}.astype(jnp.int32)"
  if name in ("list", "tuple", "sorted", "set", "frozenset", "enumerate", "reversed") and is_value(v):
    if isinstance(v.type, ScalarType):
      return "a scalar is not iterable (Python's TypeError)"
    if isinstance(v.type, TensorType) and name == "sorted":
      return f"sorted(...) of a register tensor is Python's iteration: sort it with ml.sort({first})"
    return None
  if name == "sorted" and isinstance(v, (tuple, list)):
    return ("sorted(...) of run-time values orders them while tracing, when they have no value yet: for two,"
            " (min(a, b), max(a, b)); for more, put them in a tensor and ml.sort it")
  return None


MATH_TO_INT = {math.floor: ew.UnOp.FLOOR, math.ceil: ew.UnOp.CEIL, math.trunc: ew.UnOp.TRUNC}


def math_to_int(tracer, node, fn):
  """Python's `math.floor(f)`, `math.ceil(f)`, `math.trunc(f)` of a run-time scalar: an int, as Python's, so that
  `x[math.floor(f * n)]` indexes (they were MG003, `ml.floor` hinted, whose float result no index takes). Of a
  float scalar the whole number as an int32 (past int32's range, NaN and inf, where Python raises, the
  conversion's result, as `.astype(jnp.int32)`); of an integer or bool scalar the number itself. Of a true
  division of integers (`math.ceil(n / 64)`) the exact integer quotient, `n // 64` or `ml.cdiv(n, 64)`, not
  the float32 one (which rounds past 2**24); trunc of such a quotient goes through float32 as `int(n / 64)`
  does. None where the argument is no run-time scalar: the call goes on as before (static numbers compute
  in Python; a tensor keeps its hint, ml.floor)."""
  import ast

  from .dtypes import DType
  from .ops.base import BUILTINS
  arg = node.args[0]
  if fn is not math.trunc and isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div):
    a, b = tracer.eval(arg.left), tracer.eval(arg.right)
    if all(_scalar(v) and _is_int(v) for v in (a, b)) and (is_value(a) or is_value(b)):
      if fn is math.floor:
        return tracer.binop(ast.FloorDiv, a, b, ast.copy_location(ast.BinOp(arg.left, ast.FloorDiv(), arg.right),
                                                                  arg))
      return BUILTINS["cdiv"].apply(tracer.cx(node, values=[a, b], operands=[arg.left, arg.right]), [a, b], {})
    x = tracer.binop(ast.Div, a, b, arg)
  else:
    x = tracer.eval(arg)
  if not (is_value(x) and isinstance(x.type, ScalarType)):
    return None if not is_value(x) else tracer.call(node, fn, [x], {})
  cx = tracer.cx(node, values=[x], operands=[arg])
  d = resolve(x.type.dtype)
  if not getattr(d, "is_float", False):
    return x if d != DType.bool_ else ew.astype(cx, x, DType.i32)
  return ew.astype(cx, ew.unary(cx, MATH_TO_INT[fn], x), DType.i32)


def _is_int(v) -> bool:
  """An integer (or bool) scalar or Python int."""
  from .dtypes import DType
  if is_value(v):
    d = resolve(v.type.dtype)
    return getattr(d, "is_int", False) or d == DType.bool_
  return type(v) in (int, bool)


def number_as_scalar(cx, v):
  """A Python number, or a NumPy or JAX scalar (a TypedFloat or TypedInt), as the run-time scalar a tensor method
  converts (probe 57h): `eps.to(x.dtype)` of Liger's RMSNorm, where Triton's `eps` is a float32 kernel argument,
  `jnp.float32(eps).astype(x.dtype)`. Its dtype is the scalar's own (NumPy's, JAX's), else Triton's of a Python
  number: float32 for a float, int32 for an int, bool for a bool."""
  from .dtypes import DType
  d = getattr(v, "dtype", None)
  if not isinstance(d, DType):
    d = DType.bool_ if isinstance(v, bool) else DType.f32 if isinstance(v, float) else DType.i32
  return ew.constant(cx, v, d)
