"""Element types of the typed IR, as one enum and a few tables.

The frontend knows dtypes by numpy's names only (``np.dtype(x).name``), so it
accepts ``jnp.float16``, ``np.float16`` and ``ml.float16`` alike without
importing JAX.
"""
from __future__ import annotations

import enum
import importlib

import numpy as np


_NUMPY: dict = {}      # DType value -> numpy's dtype, made on first use
_HASH: dict = {}       # DType value -> that dtype's hash


class DType(enum.Enum):
  """An element type. The value is numpy's name for it."""
  f32 = "float32"
  f16 = "float16"
  bf16 = "bfloat16"
  f8e4m3 = "float8_e4m3fn"
  f8e5m2 = "float8_e5m2"
  i64 = "int64"
  i32 = "int32"
  i16 = "int16"
  i8 = "int8"
  u32 = "uint32"
  u16 = "uint16"
  u8 = "uint8"
  bool_ = "bool"

  def __str__(self):
    return self.value

  def __eq__(self, other):
    """Equal to the same type however written (jnp.float32, np.dtype("float32"), "float32"), as numpy's
    dtypes compare, so `x.dtype == jnp.float32` in a kernel means what it means in numpy."""
    if isinstance(other, DType):
      return self is other
    if isinstance(other, str):
      d = to_dtype_name(other)
    elif isinstance(other, (np.dtype, type)):
      d = to_dtype(other)
    else:
      return NotImplemented
    return NotImplemented if d is None else d is self

  def __hash__(self):
    # numpy's dtype's hash, so that a set or dict of DTypes finds x.dtype (numpy's) too
    h = _HASH.get(self.value)
    if h is None:
      h = _HASH[self.value] = hash(self.np)
    return h

  @property
  def np(self) -> np.dtype:
    """numpy's dtype (bfloat16 and float8 from ml_dtypes, which numpy learns of on its import)."""
    if self.value not in _NUMPY:
      importlib.import_module("ml_dtypes")     # registers bfloat16 and the float8 types with numpy
      _NUMPY[self.value] = np.dtype(self.value)
    return _NUMPY[self.value]

  @property
  def dtype(self) -> np.dtype:
    """numpy's dtype again: NumPy and JAX read an object's `.dtype` as the dtype it stands for, so `ml.float32`
    (Triton's `tl.float32`) is a dtype wherever they take one, `jax.ShapeDtypeStruct(shape, dtype)` of a Triton
    port's `dtype: tl.constexpr` in an out_shape callable, `jnp.zeros(n, ml.bfloat16)` (probe 57h; a TypeError,
    "Cannot interpret '<DType.f32: 'float32'>' as a data type", before)."""
    return self.np

  @property
  def float_max(self) -> float:
    """The largest finite value of a float dtype (448 for float8_e4m3fn, 57344 for float8_e5m2)."""
    import ml_dtypes
    return float(ml_dtypes.finfo(self.np).max)

  @property
  def bits(self) -> int:
    return _BITS[self]

  @property
  def itemsize(self) -> int:
    return max(1, self.bits // 8)

  @property
  def is_float(self) -> bool:
    return self in _FLOATS

  @property
  def is_int(self) -> bool:
    return self in _SIGNED or self in _UNSIGNED

  @property
  def int_range(self) -> tuple[int, int]:
    """(lowest, highest) value of an integer dtype."""
    return (-2 ** (self.bits - 1), 2 ** (self.bits - 1) - 1) if self.is_signed else (0, 2 ** self.bits - 1)

  def wrap(self, value: int) -> int:
    """A Python int as this integer dtype holds it: wrapped, as jnp converts a weak int (65536 is
    0 in int16, 70000 is 4464)."""
    m = 1 << self.bits
    v = value % m
    return v - m if self.is_signed and v >= m // 2 else v

  @property
  def is_signed(self) -> bool | None:
    """True/False for integers, False for bool (i1), None for floats: Mosaic's convention.

    Mosaic GPU's FragmentedArray insists on a signedness for every MLIR integer
    type, i1 included (its comparisons produce unsigned i1), and a bool widens
    with zero extension (True -> 1).
    """
    if self in _SIGNED:
      return True
    if self in _UNSIGNED or self == DType.bool_:
      return False
    return None

  @property
  def numpy_name(self) -> str:
    return self.value


_BITS = {
    DType.f32: 32, DType.f16: 16, DType.bf16: 16, DType.f8e4m3: 8,
    DType.f8e5m2: 8, DType.i64: 64, DType.i32: 32, DType.i16: 16, DType.i8: 8,
    DType.u32: 32, DType.u16: 16, DType.u8: 8, DType.bool_: 1,
}
FLOAT8 = frozenset({DType.f8e4m3, DType.f8e5m2})
_FLOATS = frozenset({DType.f32, DType.f16, DType.bf16}) | FLOAT8
_SIGNED = frozenset({DType.i64, DType.i32, DType.i16, DType.i8})
_UNSIGNED = frozenset({DType.u32, DType.u16, DType.u8})
_BY_NAME = {d.value: d for d in DType}

# What a Python scalar becomes when it has to stand alone (a loop counter, a
# constant): Python ints are int32 indices, floats are float32.
INDEX = DType.i32
PY_FLOAT = DType.f32

# Dtypes the TMA engine moves (frontend/tma.py); bool does not travel.
TMA_DTYPES = frozenset(DType)   # bool travels as its bytes (one an element)
# Register arithmetic is not available on 8-bit types (Mosaic GPU's FragmentedArray).
ARITH_DTYPES = frozenset(d for d in DType if d.bits >= 16)


def to_dtype(obj) -> DType | None:
  """The DType of a jnp/np dtype, scalar type or DType; None if it is not one."""
  if isinstance(obj, DType):
    return obj
  if isinstance(obj, (bool, int, float, str)) or obj is None:
    return None
  try:
    name = np.dtype(obj).name
  except (TypeError, ValueError):
    return None
  return _BY_NAME.get(name)


def to_dtype_name(name: str) -> DType | None:
  """The DType a string names as numpy reads it ("float16", "f4", "bfloat16"); None if none."""
  if name in _BY_NAME:
    return _BY_NAME[name]
  try:
    return _BY_NAME.get(np.dtype(name).name)
  except TypeError:
    return None


def from_name(name: str) -> DType:
  return _BY_NAME[name]
