"""Numerics of interpret mode: what each typed-IR dtype and arithmetic op means in numpy.

Kept apart from the interpreter so the GPU-matching rules are in one place:
narrow floats (f16, bf16, f8 via ml_dtypes) compute in float32 and round back
after every op, as the GPU rounds per instruction; integers wrap; `//` and `%`
floor (Python's rules, which the lowering follows too); comparisons give bool;
float -> int casts truncate toward zero and saturate (PTX cvt.rzi).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..frontend.dtypes import DType
from ..frontend.ops.elementwise import BinOp as B, CmpOp as C, UnOp as U


def np_dtype(d: DType) -> np.dtype:
  return np.dtype(getattr(ml_dtypes, d.numpy_name, d.numpy_name))


def compute_dtype(d: DType) -> np.dtype:
  """Narrow floats compute in float32 and round back after each op."""
  return np.dtype(np.float32) if d.is_float and d.bits < 32 else np_dtype(d)


def poison(shape, d: DType) -> np.ndarray:
  """Never-written memory: NaN for floats, the most negative (or largest unsigned) int, True."""
  if d.is_float:
    v = np.nan
  elif d == DType.bool_:
    v = True
  else:
    info = np.iinfo(np_dtype(d))
    v = info.min if d.is_signed else info.max
  return np.full(shape, v, np_dtype(d))


def const(x, d: DType) -> np.ndarray:
  """A Python scalar as a value of `d` (arith.constant: rounded for floats, wrapped for ints)."""
  if d.is_float:
    return np.asarray(np.float64(x)).astype(np_dtype(d))
  if d == DType.bool_:
    return np.asarray(bool(x))
  return np.asarray(np.int64(int(x))).astype(np_dtype(d))


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  """arith casts: float -> int truncates and saturates, NaN -> 0 (PTX cvt.rzi); ints wrap."""
  nd = np_dtype(dst)
  if src == dst:
    return x
  if src.is_float and not dst.is_float:
    f = np.trunc(x.astype(np.float64))
    info = np.iinfo(nd)
    hi, lo = f >= float(info.max), f <= float(info.min)
    out = np.where(hi | lo | np.isnan(f), 0, f).astype(nd)
    return np.where(hi, info.max, np.where(lo, info.min, out)).astype(nd)
  return x.astype(np.float64).astype(nd) if dst.is_float else x.astype(nd)


def bitcast(x: np.ndarray, dst: DType) -> np.ndarray:
  return np.asarray(x).view(np_dtype(dst))


def _shift_right(a, b):
  return np.right_shift(a, b)    # arithmetic for signed, logical for unsigned, as shrsi / shrui


def ieee_maximum(a, b):
  """NaN-propagating maximum with -0.0 < +0.0 (the GPU's maximumf, jnp.maximum); numpy's
  returns its first operand for two zeros."""
  r = np.maximum(a, b)
  return np.where((a == 0) & (b == 0), np.add(a, b), r)           # -0 + +0 = +0; -0 + -0 = -0


def ieee_minimum(a, b):
  r = np.minimum(a, b)
  return np.where((a == 0) & (b == 0), -np.add(-a, -b), r)        # -0 if either zero is negative


def ieee_reduce(kind_max: bool, x, axis):
  """max or min of x over `axis`, with the signed-zero rule of ieee_maximum / ieee_minimum."""
  r = (np.max if kind_max else np.min)(x, axis=axis)
  if not np.issubdtype(x.dtype, np.floating):
    return r
  zero = np.asarray(x) == 0
  keep = ~np.signbit(x) if kind_max else np.signbit(x)     # the zero that wins
  won = np.any(zero & keep, axis=axis)
  return np.where((r == 0) & won, np.abs(r) if kind_max else -np.abs(r), r).astype(r.dtype)


FLOAT_BIN = {B.ADD: np.add, B.SUB: np.subtract, B.MUL: np.multiply, B.DIV: np.divide,
             B.MAX: ieee_maximum, B.MIN: ieee_minimum, B.MOD: np.mod,
             B.FLOORDIV: lambda a, b: np.floor(np.divide(a, b))}
INT_BIN = {B.ADD: np.add, B.SUB: np.subtract, B.MUL: np.multiply, B.FLOORDIV: np.floor_divide,
           B.MOD: np.mod, B.MAX: np.maximum, B.MIN: np.minimum, B.AND: np.bitwise_and,
           B.OR: np.bitwise_or, B.XOR: np.bitwise_xor, B.SHL: np.left_shift, B.SHR: _shift_right}
CMP = {C.LT: np.less, C.LE: np.less_equal, C.GT: np.greater, C.GE: np.greater_equal,
       C.EQ: np.equal, C.NE: np.not_equal}
INT_UN = {U.NEG: np.negative, U.ABS: np.abs, U.NOT: np.logical_not}


def float_unary(kind, x):
  return np.asarray(kind.value.numpy(x)).astype(x.dtype)
