"""`x ** y` in a kernel, as jnp computes it where that is cheap and exact, composed from the
elementwise family's ops (frontend/ops/elementwise.py): products by repeated squaring for static
integer powers, ml.sqrt for 0.5, XLA's pow (libdevice's powf) for a float exponent.
"""
from __future__ import annotations


import numpy as np

from .. import errors as E
from ..dtypes import DType
from ..types import ScalarType, TensorType, resolve
from .base import check_register_value, is_value
from .elementwise import BinOp, CmpOp, Constant, UnOp, astype, binary, compare, full_, unary, where_
from .elementwise_checks import check_dtype_support
from .libdevice import float_pow


def _one(cx, x):
  """1 in `x`'s shape and dtype (x ** 0, 1.0 ** t: 1 even where x is NaN, as jnp)."""
  if isinstance(x.type, ScalarType):
    return cx.b.emit(Constant, 1, loc=cx.loc, types=[ScalarType(x.type.dtype)], names=[cx.name]).result
  return full_(cx, x.type.shape, 1, x.type.dtype, "**")


def _sqrt_as_pow(cx, x):
  """x ** 0.5 as jnp's pow (IEEE's and libdevice's powf): sqrt(x), but +0.0 at -0.0 and +inf at -inf (where
  sqrt gives -0.0 and NaN; probe 53h): those two lanes take the square root of |x|."""
  edge = binary(cx, BinOp.OR, compare(cx, CmpOp.EQ, x, 0), compare(cx, CmpOp.EQ, x, float("-inf")))
  return unary(cx, UnOp.SQRT, where_(cx, edge, unary(cx, UnOp.ABS, x), x))


def _int_power(cx, x, n: int):
  """x ** n for a static int n, as lax.integer_pow (what jnp's x ** n is): binary exponentiation
  by repeated squaring, 1 / x ** -n for a negative n. The same products in the same order, so
  the results are jnp's bit for bit."""
  if n == 0:
    return _one(cx, x)
  neg, n = n < 0, abs(n)
  acc = None
  while n:
    if n & 1:
      acc = x if acc is None else binary(cx, BinOp.MUL, acc, x)
    n >>= 1
    if n:
      x = binary(cx, BinOp.MUL, x, x)
  return binary(cx, BinOp.DIV, 1, acc) if neg else acc


def _int_int_power(cx, x, n):
  """x ** n of an integer run-time exponent n, as jnp.power computes it (its _pow_int_int): acc
  starts at 0 where x == 0 and n != 0, else 1; six steps multiply it by x where bit k of n is set,
  squaring x (wrapping in the dtype) between them. Only the exponent's low six bits count (larger
  powers of a base other than 0 and +-1 wrap to 0 anyway), as in jnp: 3 ** -1 is 3 ** 63."""
  from .elementwise import CmpOp, compare, where_
  d = resolve(n.type.dtype)
  if not is_value(x):
    x = d.wrap(x)                         # a Python int base takes the exponent's type, as jnp's weak int
  zero = compare(cx, CmpOp.NE, n, 0) if is_value(x) or x == 0 else None
  if zero is not None and is_value(x):
    zero = binary(cx, BinOp.AND, compare(cx, CmpOp.EQ, x, 0), zero)
  acc = where_(cx, zero, 0, 1) if zero is not None else full_(cx, n.type.shape, 1, d, "**") \
      if isinstance(n.type, TensorType) else _one(cx, n)
  for k in range(6):
    bit = compare(cx, CmpOp.NE, binary(cx, BinOp.AND, binary(cx, BinOp.SHR, n, k) if k else n, 1), 0)
    acc = where_(cx, bit, binary(cx, BinOp.MUL, acc, x), acc)
    if k < 5:
      x = binary(cx, BinOp.MUL, x, x) if is_value(x) else d.wrap(x * x)
  return acc


def _as_weak_float(c, d) -> float:
  """The Python number `c` rounded to the float dtype `d` (to nearest, ties to even), as a weakly
  typed number meeting a `d` tensor is in jnp."""
  if d == DType.f16:
    return float(np.float16(c))
  if d == DType.bf16:
    bits = int(np.float32(c).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return float(np.uint32(bits).view(np.float32))
  if d == DType.f32:
    return float(np.float32(c))
  return float(c)


def _number_base_power(cx, c, t, t_text):
  """c ** t for a Python number c and a float register value t: powf, as jnp.power; 16-bit floats
  compute in float32 and round once."""
  d = resolve(t.type.dtype)
  if isinstance(d, DType) and d.is_int and isinstance(c, int) and not isinstance(c, bool):
    return _int_int_power(cx, c, t)       # 3 ** n of integers: jnp's integer power
  if isinstance(d, DType) and not d.is_float:
    shown = f"({c!r})" if c < 0 else repr(c)
    if c == -1:
      fix = f"(-1) ** k of integers k is a sign: ml.where({t_text} % 2 == 0, 1.0, -1.0)"
    else:
      fix = (f"convert the exponent (the result is then a float): {shown} ** {t_text}.astype(jnp.float32)"
             + (f"; 2 ** {t_text} of integers is 1 << {t_text}" if c == 2 else ""))
    raise E.UnsupportedDtypeError(
        f"{shown} ** {t_text}: an exponent held in registers must be floating point, got {d}", cx.loc, hint=fix)
  check_dtype_support(cx, t.type.dtype, "**", floats_only=True, x=t)
  if _as_weak_float(c, d) == 1:
    return _one(cx, t)                    # 1 ** t is 1, NaN and inf included (jnp.power)
  # XLA's pow (libdevice's powf), as jnp's c ** t: exact where the result is (3.0 ** 5.0 is 243, where
  # exp2(5 * log2(3)) was 242.99997), a negative base to an integral t signed, NaN to another t, 0 ** t
  # 0, 1 or inf; c is rounded to t's dtype as jnp's weak typing does (float_pow)
  return float_pow(cx, float(c), t)


def _typed_operands(cx, a, b):
  """A NumPy or JAX scalar meeting a register value (`x_i32 ** jnp.bfloat16(1.5)`, `np.int16(-4) ** t_u8`): the value
  converted to the dtype jnp's lattice gives the pair (bfloat16, int16), the scalar then a plain number of it
  (probe 65a: the scalar's dtype was ignored, float32 and uint8 there)."""
  from .base import TypedFloat, TypedInt
  from .weak_lattice import join
  if not (is_value(a) != is_value(b) and isinstance(b if is_value(a) else a, (TypedFloat, TypedInt))):
    return a, b
  j = join(cx, (a, b))
  v, n = (a, b) if is_value(a) else (b, a)
  if j is None:
    return a, b
  if not j[1] and j[0] != resolve(v.type.dtype):
    v = astype(cx, v, j[0])
  n = n.item()
  return (v, n) if is_value(a) else (n, v)


def power(cx, a, b, a_text="x", b_text="y"):
  """`a ** b` as jnp computes it where that is cheap and exact:

  - a register value to a static int n: products by repeated squaring, as lax.integer_pow (bit
    for bit jnp's x ** n); 1 for n == 0; 1 / x ** -n for negative n (floats only); a whole float
    n (x ** 3.0, on floats) is the same products, jnp's x ** 3 (not jnp's x ** 3.0, XLA's pow,
    which rounds once and can differ by an ulp);
  - a float register value to 0.5: ml.sqrt, of |x| at -0.0 and -inf (jnp's pow gives 0.0 and inf
    there, sqrt -0.0 and nan);
  - a Python number c to a float register value t: XLA's pow (libdevice's powf), as jnp.
  An integer or bool value meeting a Python float (`n ** 0.5`, `2.0 ** n`) is float32 first, as jnp
  promotes it. Anything else is an error whose hint is the exp2/log2 form."""
  from .base import TypedFloat, TypedInt
  from .elementwise import weak_as_jnp
  from .weak_lattice import join
  out = _power(cx, a, b, a_text, b_text)
  # jnp's weak types through `**`: to a Python number, the lattice's (i16 ** -1.5, w ** 2 weak), but a bool to an
  # int (m ** 2: int32); to a value, weak only where both sides are weak values (w ** w; not w ** i16, 3 ** wi)
  if is_value(b):
    weak = is_value(a) and a.id in cx.b.weak and b.id in cx.b.weak
  else:
    j = join(cx, (a, b))
    weak = bool(j and j[1]) and not (is_value(a) and resolve(a.type.dtype) == DType.bool_ and isinstance(b, int)) \
        and not isinstance(b, (TypedFloat, TypedInt))
  return weak_as_jnp(cx, (a, b), out, weak=weak)


def _power(cx, a, b, a_text, b_text):
  check_register_value(cx, a, "**")
  check_register_value(cx, b, "**")
  a, b = _typed_operands(cx, a, b)
  pa = a_text if a_text.isidentifier() else f"({a_text})"
  if not is_value(b):
    n = b
    d = resolve(a.type.dtype)
    if isinstance(b, float) and isinstance(d, DType) and not d.is_float:
      a, d = astype(cx, a, DType.f32), DType.f32     # jnp: an integer (or bool) value ** a Python float is float32
    if d == DType.bool_ and isinstance(b, int) and not isinstance(b, bool):
      a, d = astype(cx, a, DType.i32), DType.i32     # jnp: a bool value ** a Python int is int32 (probe 57e)
    if d == DType.bool_:
      raise E.UnsupportedDtypeError(f"** on boolean values ({a_text})", cx.loc,
                                    hint=f"convert first: {pa}.astype(jnp.int32) ** {b!r}")
    if isinstance(b, float) and b.is_integer() and isinstance(d, DType) and d.is_float:
      n = int(b)                         # x ** 3.0: the products of x ** 3 (jnp's pow can differ by an ulp)
    if isinstance(n, int):
      if not (isinstance(d, DType) and d.is_int):   # (8-bit integers: products wrapping as jnp's, in 32 bits)
        check_dtype_support(cx, a.type.dtype, "**", x=a)
      if n < 0 and isinstance(d, DType) and not d.is_float:
        raise E.UnsupportedDtypeError(
            f"{pa} ** {b!r}: integers cannot be raised to negative powers (as in jnp)", cx.loc,
            hint=f"compute in floating point: {pa}.astype(jnp.float32) ** {b!r}")
      return _int_power(cx, a, n)
    if isinstance(d, DType) and not d.is_float:        # (0.5 too: ml.sqrt takes floats)
      raise E.UnsupportedDtypeError(
          f"{pa} ** {b!r}: a float exponent needs a floating-point base, got {d}", cx.loc,
          hint=f"convert first: {pa}.astype(jnp.float32) ** {b!r}")
    if b == 0.5:
      check_dtype_support(cx, a.type.dtype, "**", floats_only=True, x=a)
      return _sqrt_as_pow(cx, a)
    check_dtype_support(cx, a.type.dtype, "**", floats_only=True, x=a)
    return float_pow(cx, a, b)              # XLA's pow (libdevice's powf), as jnp's x ** 1.5
  pb = b_text if b_text.isidentifier() else f"({b_text})"
  if not is_value(a):
    e = resolve(b.type.dtype)
    if isinstance(a, float) and isinstance(e, DType) and not e.is_float:
      b = astype(cx, b, DType.f32)         # jnp: a Python float ** an integer (or bool) value is float32
    elif isinstance(a, int) and not isinstance(a, bool) and e == DType.bool_:
      b = astype(cx, b, DType.i32)         # jnp: a Python int ** a bool value is int32 (probe 57e; MG106 before)
    return _number_base_power(cx, a, b, pb)
  d, e = resolve(a.type.dtype), resolve(b.type.dtype)
  if isinstance(d, DType) and d.is_int and isinstance(e, DType) and e.is_int and d == e:
    return _int_int_power(cx, a, b)       # x ** n of integers: jnp's integer power
  if isinstance(d, DType) and not d.is_float and isinstance(e, DType):
    # jnp.power of two register values of other dtypes (probe 57e; MG106 before): both promoted as jnp's
    # binary ops promote them, then jnp's integer power (a bool pair in int32) or XLA's pow
    from .elementwise import common
    (pa_, pb_), _, r = common(cx, a, b, "**")
    r = resolve(r)
    if r == DType.bool_:
      pa_, pb_, r = astype(cx, pa_, DType.i32), astype(cx, pb_, DType.i32), DType.i32
    if isinstance(r, DType) and r.is_int:
      return _int_int_power(cx, pa_, pb_)
    if isinstance(r, DType) and r.is_float:
      check_dtype_support(cx, r, "**", floats_only=True, x=pa_)
      return float_pow(cx, pa_, pb_)
  if isinstance(d, DType) and not d.is_float:
    raise E.UnsupportedDtypeError(
        f"{pa} ** {pb}: an exponent held in registers needs a floating-point base, got {d}", cx.loc,
        hint=f"convert the base (the result is then a float): {pa}.astype(jnp.float32) ** {pb}")
  if isinstance(e, DType) and isinstance(d, DType) and not e.is_float:
    b = astype(cx, b, d)                    # jnp.power(float, int array): the exponent as the base's float
  return float_pow(cx, a, b)                # XLA's pow (libdevice's powf)
