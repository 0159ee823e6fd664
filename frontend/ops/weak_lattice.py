"""jnp's promotion lattice with its weak types (x64 off: a weak int is int32, a weak float float32), for operands
that are register values, Python numbers and NumPy or JAX scalars alike (probe 65a).

In jnp's lattice bool lies below the weak int `i*`, which lies below every integer and below the weak float `f*`;
`f*` lies below every float. So a weakly typed operand takes the dtype of a strong one of its kind or a higher one
(`w_i32~ + jnp.int8(3)` is int8, `w_f32~ * jnp.bfloat16(1.5)` bfloat16), and a weak float meeting strong integers
stays a weak float (`w_f32~ + t_u8` is a weak float32, as `jnp.where(m, 1.0, jnp.uint32(6))` is).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import DType, INDEX, PY_FLOAT
from ..types import resolve
from .base import is_value
from .promotion import jnp_result


def node(cx, v):
  """(dtype, weak) of an operand: a weak node's dtype is None and its kind 'int' or 'float' is returned as weak."""
  from .base import TypedFloat, TypedInt
  if is_value(v):
    d = resolve(v.type.dtype)
    if not isinstance(d, DType):      # (an SMEM buffer's dtype still inferred, `?buf`: the type rules' own path)
      return None, None
    if v.id in cx.b.weak and d != DType.bool_:
      return None, "float" if d.is_float else "int"
    return d, None
  if isinstance(v, (TypedFloat, TypedInt)):
    return v.dtype, None
  if isinstance(v, (bool, np.bool_)):
    return DType.bool_, None
  if isinstance(v, (int, float)):
    return None, "float" if isinstance(v, float) else "int"
  return None, None


def join(cx, operands):
  """(dtype, weak) of jnp's result of `operands`; None where an operand is not a number or register value, or
  the strong operands do not promote (the type rules' own errors then speak)."""
  strong, weak = [], set()
  for v in operands:
    d, k = node(cx, v)
    if d is None and k is None:
      return None
    if k is not None:
      weak.add(k)
    elif d != DType.bool_:
      strong.append(d)
  s = None
  for d in strong:
    s = d if s is None else jnp_result(s, d, x64=bool(cx.b is not None and cx.b.x64))
    if s is None:
      return None
  if not weak:
    return (s if s is not None else DType.bool_), False
  wk = "float" if "float" in weak else "int"
  if s is None or not isinstance(s, DType):
    return (PY_FLOAT if wk == "float" else INDEX), True
  if s.is_float or wk == "int":
    return s, False
  return PY_FLOAT, True          # a weak float meeting integers: a weak float


# jnp's functions that promote their operands together before computing (jnp.dot(w, x_bf16) of a weak float32 w is
# bfloat16, as `w @ x_bf16` is), whose ml forms, products and formulas take each operand's own dtype: a weakly
# typed operand is converted to the join first (weak_to_join). (Elementwise arithmetic, jnp.where, the joins and
# the reductions keep weak types themselves.)
PROMOTING = frozenset(("dot", "matmul", "inner", "vdot", "tensordot", "einsum", "kron", "outer", "copysign",
                       "logaddexp", "logaddexp2", "nextafter", "heaviside", "float_power", "hypot", "arctan2",
                       "atan2", "isclose"))


def weak_to_join(cx, operands) -> list:
  """`operands` with each weakly typed register value converted to jnp's join of the register values and numbers
  among them, where that join is strong and its dtype another (`jnp.dot(v_bool * 0.5, x_bf16)`: the weak float32
  operand as bfloat16, the diff fuzzer's class of session 57); the rest, and everything where the join is weak or
  there is none, as they are."""
  import dataclasses
  from .elementwise import astype
  nums = [v for v in operands if is_value(v) or isinstance(v, (int, float, np.number)) and not isinstance(v, bool)]
  if not any(is_value(v) and v.id in cx.b.weak for v in nums):
    return list(operands)
  j = join(cx, nums)
  if j is None or j[1]:
    return list(operands)
  at = dataclasses.replace(cx, name="")       # (the conversion is the compiler's: unnamed)
  return [astype(at, v, j[0]) if is_value(v) and v.id in cx.b.weak and resolve(v.type.dtype) != j[0] else v
          for v in operands]
