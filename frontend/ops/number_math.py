"""Math functions of Python numbers in a kernel: Unsloth's `tl.math.erf(tl.math.rsqrt(2.0) * x)`, a GELU's
`tl.sqrt(2.0 / math.pi)`, `tl.exp(float("-inf"))`, `ml.atan2(1.0, 2.0)`, jnp's `jnp.exp(-1.5)` (probe 60b; each was
MG003 "should be computed in Python"). Triton makes the number a float32 scalar tensor and computes it there; jnp
makes it a weakly typed float32 and computes it there. Both results are the float32 value, which meets register
values as a number does (`rsqrt(2.0) * x_bf16` stays bfloat16 under jnp's weak typing). So the compiler computes it
while tracing, in float32 (NumPy's float32 functions, one rounding: the GPU's libdevice may differ in the last bit,
as interpret mode's do for tensors) and gives back a Python float. Integers stay integers where jnp's result is one
(`ml.abs(-3)`, `ml.fmod(7, 3)`); `not` of a number, and anything that is not an int or a float, keep their errors.
No IR of its own: the result is a number."""
from __future__ import annotations

import math as pymath

import numpy as np


def _number(x) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def _f32(value) -> float:
  return float(np.float32(value))


def unary_of_number(kind, x):
  """`kind` (an elementwise_ops.UnOp) of the Python number `x`, computed now; None where it stays an error."""
  if not _number(x) or kind.value.name == "not":
    return None
  if isinstance(x, int) and not kind.value.floats_only:       # -3, abs(-3): an int, as jnp's weak int
    return -x if kind.value.name == "neg" else abs(x)
  with np.errstate(all="ignore"):
    return _f32(np.asarray(kind.value.numpy(np.float32(x))))


_BINARY = {"ml.atan2": np.arctan2, "ml.pow": np.power, "ml.fmod": np.fmod}


def binary_of_numbers(what: str, a, b):
  """The two-operand math builtin `what` (ml.atan2, ml.pow, ml.fmod) of two Python numbers, computed now; None where
  it stays an error (an integer fmod by 0, which jnp leaves to the platform)."""
  fn = _BINARY.get(what)
  if fn is None or not (_number(a) and _number(b)):
    return None
  if what == "ml.fmod" and isinstance(a, int) and isinstance(b, int):
    return None if b == 0 else int(pymath.fmod(a, b))        # C's remainder of ints: the dividend's sign
  with np.errstate(all="ignore"):
    return _f32(fn(np.float32(a), np.float32(b)))


_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "max": np.maximum, "min": np.minimum}


def arithmetic_of_numbers(op: str, a, b):
  """`a op b` of two Python numbers (bools as ints) a builtin's composition meets (ml.sigmoid(0.5)'s 1 / (1 + e),
  ml.softplus(-2)'s max(x, 0), ml.fdiv(1.0, 3.0)), computed now: float32 where either is a float or the op is true
  division, as Triton's scalars and jnp's weak float32; an int of ints. None for other ops (session 60: they were an
  internal error, "binary op on two Python values")."""
  fn = _ARITH.get(op)
  if fn is None or not all(isinstance(v, (int, float)) for v in (a, b)):
    return None
  if isinstance(a, int) and isinstance(b, int) and op != "/":
    return int(fn(int(a), int(b)))
  with np.errstate(all="ignore"):
    return _f32(fn(np.float32(a), np.float32(b)))
