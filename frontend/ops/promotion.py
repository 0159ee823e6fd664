"""jnp's promotion of a value's dtype with a strongly typed (NumPy or JAX) scalar's, without
64-bit types: the rule elementwise.common applies to `x * jnp.float32(c)`."""
from __future__ import annotations

from ..dtypes import DType


def exact_in(py, have: DType, d: DType) -> bool:
  """Whether the `have` scalar `py` converts to `d` and back unchanged."""
  import numpy as np
  try:
    v = np.array(py, dtype=have.numpy_name)
    if have.is_int and d.is_int:       # by value: int16 -1 goes to uint16 and back through a wrap
      lo, hi = d.int_range
      return lo <= int(v) <= hi
    with np.errstate(invalid="ignore", over="ignore"):      # (NaN or inf to an integer: not exact)
      return bool(v.astype(d.numpy_name).astype(have.numpy_name) == v)
  except (TypeError, ValueError, OverflowError):
    return False


def jnp_result(t: DType, s: DType, x64: bool = False) -> DType | None:
  """The dtype jnp computes `t` (a value's dtype) with a strongly typed scalar of dtype `s` in,
  without 64-bit types (an int64 scalar is int32); None where its lattice leaves 32 bits. With `x64`
  (jax_enable_x64) an int64 scalar stays int64, so an integer meeting one computes in int64 as jnp's
  (`x_i32 + jnp.int64(5)`, `x_u32 * np.int64(3)`)."""
  if x64 and s == DType.i64 and (t.is_int or t == DType.bool_):
    return DType.i64
  s = {DType.i64: DType.i32}.get(s, s)
  if s == t:
    return t
  if t.is_float != s.is_float:           # an integer meets a float: the float's dtype
    return t if t.is_float else s
  if t.is_float:                         # float16 with bfloat16 is float32 in jnp
    return max(t, s, key=lambda d: d.bits) if t.bits != s.bits else DType.f32
  if t.is_signed == s.is_signed:
    return max(t, s, key=lambda d: d.bits)
  signed, unsigned = (t, s) if t.is_signed else (s, t)
  if signed.bits > unsigned.bits:
    return signed
  wider = {8: DType.i16, 16: DType.i32}.get(unsigned.bits)    # uint8 with int8: int16, as jnp
  return wider


_NO_PROMOTION = ("&", "|", "^", "<<", ">>")     # jnp's bitwise ops take no floats
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_WIDTHS = (DType.f32, DType.f16, DType.bf16)


def compared_in(da: DType, db: DType) -> DType | None:
  """The dtype jnp compares two values of different integer (or float) dtypes in, where that is exact in a
  dtype the kernel has: the wider of one signedness, the signed side where it is wider, the next signed width
  for uint8/uint16 against a signed side (`off_i16[mid] <= row_i32` in int32, `x_f16 < y_f32` in float32); an
  int64 side takes any other integer. None where jnp leaves 32 bits (int32 with uint32: int64 values only with
  jax_enable_x64, int32 without it, where uint32's upper half wraps) and for float8 (no register arithmetic)."""
  if da.is_int and db.is_int:
    if DType.i64 in (da, db):
      return DType.i64
    r = jnp_result(da, db)
    return r if r is not None and r.bits <= 32 else None
  if da in _WIDTHS and db in _WIDTHS:
    return jnp_result(da, db)
  return None


def implicit(da: DType, db: DType, what: str) -> DType | None:
  """The dtype two register values of different dtypes compute in where jnp's promotion makes it
  one of them, and the compiler follows: a bool or integer meeting a float takes the float's dtype
  (`v * mask`, `x / i`), a bool meeting an integer the integer's, two floats or two integers jnp's promotion
  of them (arithmetic_in: `x_bf16 * s_f32` is float32). None where jnp's leaves 32 bits or meets float8 (where
  registers do no arithmetic), and for bitwise operators and shifts; a comparison, whose result is a boolean
  whatever the operands' dtype, compares as jnp's do (compared_in)."""
  if da == db:
    return None
  if what in _NO_PROMOTION:     # bits of two integers (or an integer and a bool): jnp's promotion of them
    if not (da.is_int or da == DType.bool_) or not (db.is_int or db == DType.bool_):
      return None
    return db if da == DType.bool_ else da if db == DType.bool_ else arithmetic_in(da, db)
  if what in _COMPARISONS and da != DType.bool_ and db != DType.bool_:
    if (da.is_int and db.is_int) or (da.is_float and db.is_float):
      return compared_in(da, db)
  for x, y in ((da, db), (db, da)):
    if x in (DType.f32, DType.f16, DType.bf16) and (y.is_int or y == DType.bool_):
      return x
    if x.is_int and y == DType.bool_:
      return x
  return arithmetic_in(da, db)


def arithmetic_in(da: DType, db: DType) -> DType | None:
  """The dtype jnp computes two register values of different float (or integer) dtypes in, where the kernel has
  it: the wider float (float16 with bfloat16: float32; `x_bf16 + jnp.zeros(s, jnp.float32)` is float32, as
  jnp's), the wider integer of one signedness, the signed side where it is wider, the next signed width for
  uint8/uint16 against a signed side (uint8 with int8: int16). None where jnp leaves 32 bits (int32 with uint32,
  int64 beside an unsigned type) and for float8 (no register arithmetic): converted explicitly."""
  if da in _WIDTHS and db in _WIDTHS:
    return jnp_result(da, db)
  if da.is_int and db.is_int and DType.i64 not in (da, db):
    r = jnp_result(da, db)
    return r if r is not None and r.bits <= 32 else None
  if da.is_int and db.is_int:
    return DType.i64          # (int64 only with jax_enable_x64, where jnp's int32 + int64 is int64)
  return None
