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
