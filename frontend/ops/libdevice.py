"""Triton's libdevice math (`tl.math.*`, `libdevice.*`, tutorial 07) as `ml.` builtins: asin,
acos, atan, atan2, tan, cbrt, expm1, log1p, erfc, pow, isinf, isfinite; and fmod (C's exact remainder).

The transcendental ones are MLIR math ops, which the GPU pipeline lowers to libdevice's `__nv_*f`
functions (as it does `ml.erf`); 16-bit operands compute in float32 and round once (as libdevice
has only float32 and float64 forms, and as interpret mode computes them). `isinf` and `isfinite` are
comparisons.
"""
from __future__ import annotations

import math as pymath

from ..dtypes import DType
from ..types import resolve
from .base import builtin, check_binary_operands, check_register_value, is_value, named_builtin
from .number_math import binary_of_numbers
from .elementwise import BinOp, CmpOp, _widened, astype, binary, compare, unary, UnOp

_PYTHON = {"asin": "math.asin", "acos": "math.acos", "atan": "math.atan", "tan": "math.tan",
           "cbrt": "math.cbrt", "expm1": "math.expm1", "log1p": "math.log1p", "erfc": "math.erfc", "atan2": "math.atan2",
           "pow": "math.pow", "fmod": "math.fmod"}


def _narrow(x):
  """The 16-bit float dtype of a register value, which computes in float32, else None."""
  d = resolve(x.type.dtype) if is_value(x) else None
  return d if isinstance(d, DType) and d in (DType.f16, DType.bf16) else None


def _unary_fn(kind: UnOp, doc: str):
  def rule(cx, x):
    narrow = _narrow(x)
    if narrow is None:
      return unary(cx, kind, x)
    return astype(cx, unary(cx, kind, astype(cx, x, DType.f32)), narrow)
  return named_builtin(rule, kind.value.name, doc)


asin = _unary_fn(UnOp.ASIN, "Elementwise arcsine (floating point; libdevice's asinf): NaN outside [-1, 1].")
acos = _unary_fn(UnOp.ACOS, "Elementwise arccosine (floating point; libdevice's acosf): NaN outside [-1, 1].")
atan = _unary_fn(UnOp.ATAN, "Elementwise arctangent (floating point; libdevice's atanf).")
tan = _unary_fn(UnOp.TAN, "Elementwise tangent (floating point; libdevice's tanf).")
cbrt = _unary_fn(UnOp.CBRT, "Elementwise cube root (floating point; libdevice's cbrtf): negative for negative x.")
expm1 = _unary_fn(UnOp.EXPM1, "Elementwise exp(x) - 1, accurate for small x (floating point; libdevice's expm1f).")
log1p = _unary_fn(UnOp.LOG1P, "Elementwise log(1 + x), accurate for small x (floating point; libdevice's log1pf).")
erfc = _unary_fn(UnOp.ERFC, "Elementwise 1 - erf(x), accurate where erf(x) is near 1, as jax.scipy.special.erfc"
                            " (floating point; libdevice's erfcf).")


def _wide_binary(cx, kind, a, b, what):
  """a `kind` b, 16-bit floats computed in float32 and rounded once. A Python number is first the
  16-bit value jnp's weak typing makes it (ml.fmod(x_f16, 0.3) divides by float16's 0.2998, as
  jnp.fmod does), then float32: it was float32's 0.3."""
  narrow = _narrow(a) or _narrow(b)
  if narrow is None or any(is_value(v) and resolve(v.type.dtype) != narrow for v in (a, b)):
    return binary(cx, kind, a, b, what)      # (mixed dtypes: binary's own error)
  wide = _widened(cx, (a, b), DType.f32, narrow, what, saturate=False)
  return astype(cx, binary(cx, kind, *wide, what), narrow)


def float_pow(cx, a, b):
  """`a ** b` of a float register value and a float (a number or a value of a's dtype): powf."""
  return _wide_binary(cx, BinOp.POW, a, b, "**")


def _binary_fn(kind: BinOp, name: str, doc: str):
  def rule(cx, a, b):
    if (v := binary_of_numbers(f"ml.{name}", a, b)) is not None:   # ml.atan2(1.0, 2.0): computed now (probe 60b)
      return v
    check_binary_operands(cx, a, b, f"ml.{name}", f"compute it in Python while the kernel is traced:"
                                                  f" {_PYTHON[name]}({a!r}, {b!r}) (import math)")
    return _wide_binary(cx, kind, a, b, f"ml.{name}")
  return named_builtin(rule, name, doc)


atan2 = _binary_fn(BinOp.ATAN2, "atan2", "Elementwise arctangent of y / x in the quadrant of (x, y), as jnp.arctan2"
                                         " (floating point; libdevice's atan2f): `ml.atan2(y, x)`.")
fmod = _binary_fn(BinOp.FMOD, "fmod", "Elementwise C remainder x - trunc(x / y) * y, exactly, as jnp.fmod and lax.rem:"
                                     " the sign of x (`%` takes y's); of floats (16-bit ones in float32, exact) and"
                                     " integers (a zero integer divisor is undefined, as for //).")
pow_ = _binary_fn(BinOp.POW, "pow", "Elementwise x ** y for register x and y, as C's powf and jnp.power of floats"
                                    " (floating point; libdevice's powf): `ml.pow(x, y)`.")



def _test_dtype(cx, x, name):
  check_register_value(cx, x, f"ml.{name}")
  return resolve(x.type.dtype) if is_value(x) else None


@builtin
def isinf(cx, x):
  """Elementwise test for +-inf (a boolean tensor), as jnp.isinf; False for integers. Comparisons only, so
  8-bit values too."""
  d = _test_dtype(cx, x, "isinf")
  if d is None:
    return pymath.isinf(x)
  if isinstance(d, DType) and not d.is_float:
    return compare(cx, CmpOp.NE, x, x)
  return binary(cx, BinOp.OR, compare(cx, CmpOp.EQ, x, float("inf")), compare(cx, CmpOp.EQ, x, float("-inf")))


@builtin
def isfinite(cx, x):
  """Elementwise test for a finite value (neither inf nor NaN), as jnp.isfinite; True for integers.
  Comparisons only, so 8-bit values too."""
  d = _test_dtype(cx, x, "isfinite")
  if d is None:
    return pymath.isfinite(x)
  if isinstance(d, DType) and not d.is_float:
    return compare(cx, CmpOp.EQ, x, x)
  inf = binary(cx, BinOp.OR, compare(cx, CmpOp.EQ, x, float("inf")), compare(cx, CmpOp.EQ, x, float("-inf")))
  return binary(cx, BinOp.AND, compare(cx, CmpOp.EQ, x, x), unary(cx, UnOp.NOT, inf))
