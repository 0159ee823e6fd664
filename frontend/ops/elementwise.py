"""Elementwise math: the type rules of the ops (constants, arithmetic, comparisons, math functions,
selects, casts, fills): promotion, weak Python numbers, 8-bit values widened, one-element folding. The ops
themselves and their kinds (BinOp, CmpOp, the UnOp table of math functions) are declared in elementwise_ops.py
and re-exported here (`ew.Binary`, `ew.BinOp`); the dtype checks and the hints' wording are in
elementwise_checks.py, the `ml.` builtins that call them in elementwise_fns.py.

Operands of different shapes broadcast as in NumPy (frontend/ops/shape.py inserts
the `Broadcast`); Python numbers are weakly typed (they take the dtype of the
tensor they meet); two tensors of different dtypes are converted where jnp's promotion makes one of them the
other's (promotion.implicit: a bool or integer meeting a float, a bool meeting an integer; two integers or two
floats in a comparison only), else never implicitly.
"""
from __future__ import annotations

import dataclasses
import math as pymath

import numpy as np

from .. import errors as E
from ..dtypes import DType, FLOAT8, INDEX, PY_FLOAT
from .arith_hints import divisor_guard, int64_hint, unsigned_hint
from ..infer import unify
from ..types import DTypeVar, ScalarType, TensorType, dtype_name, resolve
from .base import Num, a_an, check_register_value, is_value, kind_of, one_element, static_shape, shown
from .promotion import exact_in, implicit, jnp_result
from .mask_product import mask_product
from .const_division import reciprocal
from .float_constants import check_python_float
from .narrow8 import _wide, _widened, narrowed  # noqa: F401  (ew.narrowed: reduce, scan, sort; libdevice)
from .elementwise_checks import (_check_integer_meets_float, _check_pointer_arithmetic, _convert_hint,
                                 _python_math_hint, cast_problem, check_dtype_support, check_python_int, method_on,
                                 int64_index_hint, scalar_param_hint)
from . import elementwise_ops
from .elementwise_ops import Binary, BinOp, Cast, CmpOp, Compare, Constant, Full, Unary, UnOp, Where

# elementwise_ops' tables and ops that this module's rules do not use, re-exported with the rest (`ew.Arange`)
ELEMENTWISE_OPS, PURE_ELEMENTWISE, PURE_FRESH = (elementwise_ops.ELEMENTWISE_OPS, elementwise_ops.PURE_ELEMENTWISE,
                                                 elementwise_ops.PURE_FRESH)
Arange, UnaryDef = elementwise_ops.Arange, elementwise_ops.UnaryDef

_FLOAT_ONLY = {BinOp.ATAN2, BinOp.POW, BinOp.DIV_RN}
_INT_ONLY = {BinOp.AND, BinOp.OR, BinOp.XOR, BinOp.SHL, BinOp.SHR, BinOp.MULHI}
# Mosaic GPU allows these on 8-bit integers (bitwise ops and equality need no arithmetic).
_WRAPPING = {BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.FLOORDIV, BinOp.MOD, BinOp.FMOD}
_BITWISE_8BIT = {BinOp.AND, BinOp.OR, BinOp.XOR, CmpOp.EQ, CmpOp.NE}
# On booleans, as numpy and jnp compute them (results stay bool): * is and, max is or, min is and.
_BOOL_AS_LOGIC = {BinOp.MUL: BinOp.AND, BinOp.MAX: BinOp.OR, BinOp.MIN: BinOp.AND}


# ---------------------------------------------------------------- type rules
def result_type(shape, dtype):
  return ScalarType(dtype) if shape is None else TensorType(shape, dtype)


def constant(cx, value, dtype=None):
  dtype = dtype or (PY_FLOAT if isinstance(value, float) else
                    DType.bool_ if isinstance(value, bool) else INDEX)
  check_python_int(cx, value, dtype, "this constant")
  return cx.b.emit(Constant, value, loc=cx.loc, types=[ScalarType(dtype)]).result


def common(cx, a, b, what):
  """(operands, shape, dtype) of a binary op: tensors broadcast to one shape, weak
  Python numbers take the other side's dtype."""
  from .shape import broadcast_operands
  if what == "+":
    _check_pointer_arithmetic(cx, a, b)
  check_register_value(cx, a, what)
  check_register_value(cx, b, what)
  a, b = weak_to(cx, a, b), weak_to(cx, b, a)
  # Named before broadcasting: a broadcast operand is not the value the user wrote.
  names = [cx.named(x, kind_of(x)) for x in (a, b)]
  (a, b), shape = broadcast_operands(cx, (a, b), what)
  da, db = (x.type.dtype if is_value(x) else None for x in (a, b))
  if da is None and db is None:
    raise E.InternalError("binary op on two Python values reached the type rules", cx.loc)
  if da is None or db is None:
    dt, py = (da, b) if db is None else (db, a)
    rdt = resolve(dt)
    v = a if db is None else b
    if v.id in cx.b.weak and hasattr(py, "dtype") and weak_kind(rdt) is not None:
      from .weak_lattice import join       # a weakly typed value meeting a NumPy or JAX scalar takes its dtype
      j = join(cx, (v, py))                # where jnp's lattice does: w_i32~ // np.int16(3) is int16 (probe 65a)
      if j is not None and not j[1] and j[0] != rdt:
        v = astype(cx, v, j[0])
        return ((v, b) if db is None else (a, v)), shape, j[0]
    up = _typed_number_dtype(cx, py, rdt, names[1] if db is None else names[0],
                             names[0] if db is None else names[1], what)
    if up is not None:            # as jnp: the value computes in the scalar's wider dtype
      if db is None:
        a = astype(cx, a, up)
      else:
        b = astype(cx, b, up)
      return (a, b), shape, up
    other = names[0] if db is None else names[1]
    check_python_int(cx, py, dt, what, hint=unsigned_hint(py, rdt, other, what, db is None)
                     or int64_hint(py, rdt, other, what, db is None))
    check_python_float(cx, py, rdt, other, what)        # (1e5 or -1e30 meeting float16: inf, a warning)
    if rdt == DType.bool_ and isinstance(py, int) and not isinstance(py, bool):
      # As jnp: a boolean meeting a Python int computes in int32 (m & 6 is 0 or 0, not m & True).
      if db is None:
        a = _weakly(cx, astype(cx, a, DType.i32))
      else:
        b = _weakly(cx, astype(cx, b, DType.i32))
      return (a, b), shape, DType.i32
    if isinstance(py, float) and isinstance(rdt, DType) and not rdt.is_float:
      # As jnp: an integer (or bool) operand meeting a Python float computes in float32, weakly
      # typed (i * 0.5 meeting a float16 value is float16 there: the result takes its dtype).
      if db is None:
        a = _weakly(cx, astype(cx, a, DType.f32))
      else:
        b = _weakly(cx, astype(cx, b, DType.f32))
      return (a, b), shape, DType.f32
    return (a, b), shape, dt
  if isinstance(resolve(da), DType) and isinstance(resolve(db), DType) and (
      up := implicit(resolve(da), resolve(db), what)) is not None and not _weak_in_jnp(cx, (a, b), da, db, what) \
      and (up not in (resolve(da), resolve(db)) or not _same_kind(resolve(da), resolve(db))
           or _narrow_carry(cx, a, b, da, db, names) is None):
    # as jnp: v * mask, x / i, x_bf16 * s_f32 (not a float16 loop carry meeting float32: its type would change;
    # an int carry meeting floats computes, and the carry's change of type is MG005, whose hint starts it a float)
    return tuple(x if resolve(x.type.dtype) == up else astype(cx, x, up) for x in (a, b)), shape, up
  dt = unify(da, db, cx.loc, what)
  if dt is None:
    # (a loop carry started from a Python int meeting floats computes in the float's dtype, as jnp:
    # the carry's change of type is MG005, whose hint starts it as a float)
    hint = _narrow_carry(cx, a, b, da, db, names) or scalar_param_hint(cx, (a, b), names, (da, db), what) \
        or int64_index_hint(cx, (a, b), names, (da, db)) or _convert_hint(names, da, db, what)
    raise E.DtypeMismatchError(
        f"{what} on {names[0]} ({dtype_name(da)}) and {names[1]} ({dtype_name(db)}):"
        f" dtypes differ and are never converted implicitly", cx.loc, hint=hint)
  return (a, b), shape, dt


def _same_kind(da, db) -> bool:
  """Whether two dtypes are both floats or both integers (the pairs jnp's promotion widens within a kind)."""
  return isinstance(da, DType) and isinstance(db, DType) and (da.is_float and db.is_float or da.is_int and db.is_int)


def _narrow_carry(cx, a, b, da, db, names) -> str | None:
  """The hint for a loop carry (acc, float16) meeting a value of a wider dtype (float32): converting acc in the
  body, or computing in the wider dtype as jnp's promotion does, changes its type from one trip to the next
  (MG005, as jax.lax.fori_loop's), so the hint says where to choose the carry's dtype instead. None otherwise."""
  def carry(x):    # a block argument by a plain name (a loop carry), not a loop index
    return is_value(x) and cx.b.defining(x) is None and x.name and x.id not in cx.b.loop_indices \
        and x.name.isidentifier()
  if not (isinstance(da, DType) and isinstance(db, DType)):
    return None
  narrow = next((x for x in (a, b) if carry(x) and x.name == names[0 if x is a else 1]), None)
  if narrow is None:
    return None
  dn, do = (da, db) if narrow is a else (db, da)
  other = names[1 if narrow is a else 0]
  if jnp_result(dn, do) != do:
    return None
  n, ns = narrow.name, tuple(getattr(narrow.type, "shape", ()))
  eg = f" (e.g. ml.zeros({ns}, jnp.{dtype_name(do)}))" if ns else ""
  return (f"if {n} is carried by a loop as {dtype_name(dn)}: to compute in {dtype_name(do)}, make it"
          f" {dtype_name(do)} where it starts before the loop{eg} and"
          f" convert it after the loop, {n}.astype(jnp.{dtype_name(dn)}); to keep it {dtype_name(dn)},"
          f" convert the other side: {method_on(other)}.astype(jnp.{dtype_name(dn)})")


def _weak_in_jnp(cx, values, da, db, what) -> bool:
  """Whether two floats (or two integers) of different dtypes include an ml.scalar parameter or a 0-d input's
  value (`x_f16 * alpha`): jnp's result then depends on what the call passes (a Python number is weak and keeps
  float16, a float32 array gives float32), so it stays MG104, whose hint chooses (scalar_param_hint).
  Not where the other side's dtype is the promotion's (`acc_f32 * scale` of a bfloat16 0-d `scale`, `offs_i64 +
  s[...]` of an int32 one): a weak scalar takes that dtype and an array promotes to it, so jnp gives it either way
  (probe 52f); except an int32 ml.scalar meeting int64 with jax_enable_x64, where a Python int through jax.jit is
  its low 32 bits only (scalar_param_hint says so). Without x64 the int32 holds the value passed exactly (a Python
  int past int32 is refused, by the call or by jax.jit), so Liger's `tl.program_id(0).to(tl.int64) * stride`
  computes in int64, as jnp's promotion and Triton's do (probe 61b)."""
  from .elementwise_checks import _of_scalar_param
  da, db = resolve(da), resolve(db)
  if what in _COMPARISON_WHATS or da.is_float != db.is_float or DType.bool_ in (da, db):
    return False
  kinds = [_of_scalar_param(cx, v) for v in values]
  if not any(kinds):
    return False
  if all(kinds):
    return True
  k = 0 if kinds[0] else 1
  ds, do = (da, db) if k == 0 else (db, da)
  if ds == DType.i64 and do.is_int and do.bits < 64 and kinds[k] == "param":
    return False      # (an int64 ml.scalar is an int64 array passed, a Python int being int32: jnp gives int64)
  if implicit(ds, do, what) != do:
    return True
  return do == DType.i64 and ds.is_int and ds.bits < 64 and kinds[k] == "param" and bool(cx.b.x64)


_COMPARISON_WHATS = ("<", "<=", ">", ">=", "==", "!=")


def _weakly(cx, v):
  """`v` (an operand converted for a Python number of a higher kind, m + 1, i * 0.5), weakly typed:
  jnp's result is (bool with a Python int gives a weak int32, an integer with a Python float a weak float32)."""
  cx.b.weak.add(v.id)
  return v


def weak_kind(d):
  """'float' or 'int' for the dtypes a weakly typed Python float or int may take, else None."""
  d = resolve(d)
  if not isinstance(d, DType) or d == DType.bool_:
    return None
  return "float" if d.is_float else "int" if d.is_int else None


def weak_to(cx, w, other):
  """`w` converted to `other`'s dtype where `w` stands for a Python number a loop carries
  (frontend/flow.py) and `other` is a register value of a dtype of its kind: weakly typed, as
  the number itself would be (t = 0.0 carried, then t + ml.sum(x) of bfloat16 x)."""
  if not (is_value(w) and is_value(other) and w.id in cx.b.weak and other.id not in cx.b.weak):
    return w
  return weak_as(cx, w, resolve(other.type.dtype), other.type)


def weak_as(cx, w, do, like=None):
  """A weakly typed `w` in dtype `do` (of a value of type `like`, a store's ref where None), where
  jnp converts it: a dtype of its kind, or a float one for a select or fill of Python ints. Stored (`like` None),
  an index jnp gives as int64 (x64: ops/default_ints.py) widens into an int64 ref."""
  if like is None:
    from .default_ints import stored_as
    w = stored_as(cx, w, do)
  if not (is_value(w) and w.id in cx.b.weak):
    return w
  dw = resolve(w.type.dtype)
  select = isinstance(cx.b.defining(w), (Where, Full)) and (weak_kind(dw), weak_kind(do)) == ("int", "float")
  if dw == do or weak_kind(dw) is None or weak_kind(dw) != weak_kind(do) and not select:
    return w      # (a select or fill of Python ints meets floats as jnp's: x * ml.where(m, 1, -1) is x's dtype)
  if do in FLOAT8 and isinstance(w.type, ScalarType):   # no scalar float8 conversion: as a tensor
    if not isinstance(like, TensorType):
      return w
    from .shape import broadcast_to
    w = broadcast_to.rule(cx, w, like.shape)
  return astype(cx, w, do)


def _typed_number_dtype(cx, py, d, py_name, name, what):
  """A NumPy or JAX scalar (jnp.float32(c)) keeps its dtype, as in jnp: None where jnp computes
  in the register value's dtype `d` (the scalar is then a constant of it), else the dtype jnp
  promotes both to (the value is converted, as jnp does); MG104 where jnp's promotion leaves
  32 bits (uint32 with int32)."""
  from .base import TypedFloat, TypedInt
  want = py.dtype if isinstance(py, (TypedFloat, TypedInt)) else None
  if want is None or not isinstance(d, DType):
    return None
  promoted = jnp_result(d, want, x64=bool(cx.b is not None and cx.b.x64))
  if promoted == d or what in {c.value for c in CmpOp} and exact_in(py, want, d):
    return None   # (a comparison with a value the operand's dtype holds exactly: the same booleans)
  if promoted is not None:
    return promoted
  import numpy as np
  try:
    text = str(np.dtype(want.numpy_name).type(py))     # 1.001, not float32's 1.0010000467300415
  except TypeError:
    text = repr(py + 0)
  # (only uint32 with int32 or int64 gets here: jnp computes them in int64, with jax_enable_x64;
  # converting the value to int32 would wrap uint32 values of 2**31 or more negative)
  to = DType.f32 if d.is_float or want.is_float else DType.i64
  wide = "float64" if d.is_float or want.is_float else "int64"
  fits = d.is_float or not want.is_int or d.int_range[0] <= int(py) <= d.int_range[1]
  raise E.DtypeMismatchError(
      f"{what} on {name} ({dtype_name(d)}) and the {dtype_name(want)} scalar {text}: a NumPy or JAX scalar"
      f" keeps its dtype, and jnp computes these two in {wide}, which is not implicit here", cx.loc,
      hint=(f"write the Python number {text} to compute in {dtype_name(d)}, or convert the value:" if fits else
            f"{text} is outside {dtype_name(d)}: convert the value:")
           + f" {method_on(name)}.astype(jnp.{dtype_name(to)})")


def binary(cx, kind: BinOp, a, b, what=None, via=()):
  out = _binary(cx, kind, a, b, what, via)
  return weak_as_jnp(cx, (a, b), out)


def weak_as_jnp(cx, operands, out, weak=None):
  """`out` weakly typed where jnp's result of `operands` is (`w * m`, `w * wf` of weak w and wf), whichever path
  computed it; strong where jnp's is, also where a path computed it through a weak step (`w / np.float32(2)` as
  `w * 0.5`; probe 65a): a weak operand returned as it is is copied first."""
  if not is_value(out) or resolve(out.type.dtype) == DType.bool_:
    return out
  from .weak_lattice import join
  j = join(cx, operands)
  if j is not None and weak is not None:
    j = (j[0], weak)                            # (the caller's rule: `**`'s)
  if j is not None and j[1]:
    cx.b.weak.add(out.id)
  elif j is not None and out.id in cx.b.weak and resolve(out.type.dtype) == j[0]:
    if any(out is v for v in operands):
      return astype(cx, out, j[0])             # (a strong copy: the operand stays weak)
    cx.b.weak.discard(out.id)
  return out


def _binary(cx, kind: BinOp, a, b, what=None, via=()):
  what = what or (kind.value if kind not in (BinOp.MAX, BinOp.MIN) else f"ml.{kind.name.lower()}imum")
  if not is_value(a) and not is_value(b):
    from .number_math import arithmetic_of_numbers
    if (v := arithmetic_of_numbers(kind.value, a, b)) is not None:
      return v                # (a builtin's composition of numbers: ml.sigmoid(0.5)'s steps, computed now)
  folded = _fold_one_element(cx, (a, b), lambda sa, sb: binary(cx, kind, sa, sb, what))
  if folded is not None:
    return folded
  a0, b0 = a, b          # as the user gave them, for hints
  (a, b), shape, dt = common(cx, a, b, what)
  d = resolve(dt)
  if kind in (BinOp.MAX, BinOp.MIN) and (wide := _wide(d)) is not None:
    # 8-bit max/min (a uint8 image's max-pooling): in 32 bits, converted back exactly
    return narrowed(cx, binary(cx, kind, *_widened(cx, (a, b), wide, d, what, shape), what), d)
  if kind in (BinOp.SHL, BinOp.SHR) and isinstance(d, DType) and d.is_int and isinstance(b, int) and is_value(a):
    # A static amount as jnp's: converted to the type (65537 is 1 in int16), and outside 0..bits-1
    # lax's shift past the width: 0, or the sign fill for >> of a signed type (the GPU's shift by
    # such an amount is undefined, so the compiler writes jnp's result; run-time amounts: clamp them).
    b = d.wrap(b)
    if not 0 <= b < d.bits:
      if kind != BinOp.SHR or not d.is_signed:
        return binary(cx, BinOp.AND, a, 0, what)
      b = d.bits - 1
  if kind in _WRAPPING | {BinOp.SHL, BinOp.SHR} and isinstance(d, DType) and d.is_int and (wide := _wide(d)):
    # 8-bit integer arithmetic (an int8/uint8 offset or count read from memory, a byte's bit fields): in 32
    # bits (sign- or zero-extended), wrapped back to the 8-bit type, which is jnp's result (its + - * // % << >>
    # wrap modulo 2**8 the same way)
    if kind == BinOp.FLOORDIV and not d.is_signed:
      wide = DType.u32            # (uint8 // 0 is jnp's 255: uint32's all ones, where int32's floor gives -2)
    return narrowed(cx, binary(cx, kind, *_widened(cx, (a, b), wide, d, what, shape, saturate=False), what, via), d)
  if kind == BinOp.MUL and (masked := mask_product(cx, a0, b0, a, b, shape, d)) is not None:
    return masked                       # x * mask: jnp's (XLA's) select, frontend/ops/mask_product.py
  if kind == BinOp.DIV and isinstance(d, DType) and not d.is_float:
    # As jnp: true division of integers (or bools) computes in float32.
    a, b = (astype(cx, x, DType.f32) if is_value(x) else float(x) for x in (a, b))
    dt = d = DType.f32
  if kind == BinOp.DIV and is_value(a) and not is_value(b) and (r := reciprocal(b, d)) is not None:
    kind, b = BinOp.MUL, r              # x / 3.0: jnp's (XLA's) product by the reciprocal, const_division.py
  # the operand hints name: one of the dtype itself before a weakly typed carry that took it (s + c[q])
  x = next((v for v in (a0, b0) if is_value(v) and v.id not in cx.b.weak), None) or next(
      (v for v in (a0, b0) if is_value(v)), None)
  if kind in _INT_ONLY and isinstance(d, DType) and d.is_float:
    _check_integer_meets_float(cx, a0, b0, what)
  pair = (a0, b0) if all(is_value(v) and v.id not in cx.b.weak for v in (a0, b0)) else None   # (u8 + u8)
  check_dtype_support(cx, dt, what, ints_only=kind in _INT_ONLY, floats_only=kind in _FLOAT_ONLY,
                      bitwise=kind in _BITWISE_8BIT, x=x, pair=pair)
  if d == DType.bool_ and kind in _BOOL_AS_LOGIC:     # as numpy's and jnp's: bool * bool is and, max is or
    kind = _BOOL_AS_LOGIC[kind]
  if d == DType.bool_ and kind not in (BinOp.AND, BinOp.OR, BinOp.XOR):
    raise E.UnsupportedDtypeError(f"{what} on boolean values", cx.loc,
                                  hint="for logic use & | ^; to count or compute, convert first:"
                                       f" {method_on(cx.named(x, 'm'))}.astype(jnp.int32) (or jnp.float32)")
  if kind in (BinOp.FLOORDIV, BinOp.MOD, BinOp.FMOD) and isinstance(d, DType) and d.is_int and isinstance(b, int) \
      and d.wrap(b) == 0:
    if b != 0:     # a Python int wraps to the operand's type (65536 is 0 in int16): the divisor is 0
      wide = "int32" if -2 ** 31 <= b < 2 ** 31 else "uint32"
      raise E.KernelTypeError(f"{what} by {b} on {d}: {b} wraps to 0 in {d} (as jnp converts it), and integer"
                              f" division by zero is undefined on the GPU", cx.loc,
                              hint=f"compute in a type that holds {b}: {method_on(cx.named(a0))}.astype(jnp.{wide})"
                                   f" {what} {b}")
    raise E.KernelTypeError(f"{what} by 0 on {d}: integer division by zero is undefined on the GPU", cx.loc,
                            hint=f"divide by a non-zero constant; {divisor_guard(method_on(cx.named(a0)), what, 'd')}")
  from .broadcast_nd import through_small_reshape
  out = through_small_reshape(cx, (a, b), lambda o, s: cx.b.emit(
      Binary, kind, *o, loc=cx.loc, types=[result_type(s, dt)], names=[cx.name], via=via).result) \
      or cx.b.emit(Binary, kind, a, b, loc=cx.loc, types=[result_type(shape, dt)], names=[cx.name], via=via).result
  weak = cx.b.weak
  if weak and all(not is_value(v) or v.id in weak for v in (a, b)) and resolve(dt) == resolve(next(
      v for v in (a, b) if is_value(v)).type.dtype):
    weak.add(out.id)              # t * 0.5 of a weak t stays weak
  return out


def compare(cx, kind: CmpOp, a, b):
  folded = _fold_one_element(cx, (a, b), lambda sa, sb: compare(cx, kind, sa, sb))
  if folded is not None:
    return folded
  x = next((v for v in (a, b) if is_value(v)), None)      # as the user gave it, for hints
  (a, b), shape, dt = common(cx, a, b, kind.value)
  wide = _wide(resolve(dt))
  if wide is not None and not (kind in _BITWISE_8BIT and resolve(dt).is_int):     # (fp8 == by value, not bits)
    (a, b), dt = _widened(cx, (a, b), wide, resolve(dt), kind.value, shape, saturate=False), wide     # 8-bit order: in 32 bits, exactly
  check_dtype_support(cx, dt, kind.value, bitwise=kind in _BITWISE_8BIT, x=x)
  from .broadcast_nd import through_small_reshape
  return through_small_reshape(cx, (a, b), lambda o, s: cx.b.emit(
      Compare, kind, *o, loc=cx.loc, types=[result_type(s, DType.bool_)], names=[cx.name]).result) \
      or cx.b.emit(Compare, kind, a, b, loc=cx.loc, types=[result_type(shape, DType.bool_)], names=[cx.name]).result


def unary(cx, kind: UnOp, x):
  what = "-" if kind == UnOp.NEG else "not" if kind == UnOp.NOT else f"ml.{kind.value.name}"
  check_register_value(cx, x, what)
  if not is_value(x):
    from .number_math import unary_of_number
    if (v := unary_of_number(kind, x)) is not None:    # tl.math.rsqrt(2.0): float32, computed now (probe 60b)
      return v
    raise E.KernelTypeError(f"{what} of a Python number should be computed in Python", cx.loc,
                            hint=_python_math_hint(cx, kind, x))
  folded = _fold_one_element(cx, (x,), lambda s: unary(cx, kind, s))
  if folded is not None:
    return folded
  d = resolve(x.type.dtype)
  if kind == UnOp.ABS and isinstance(d, DType) and (d == DType.bool_ or d.is_int and not d.is_signed):
    return x              # as jnp.abs (a scalar's math.absi would read the bits as signed: |0xFFFFFFFF| = 1)
  if kind in (UnOp.NEG, UnOp.ABS) and isinstance(d, DType) and d.is_int and (wide := _wide(d)) is not None:
    return narrowed(cx, unary(cx, kind, astype(cx, x, wide)), d)     # 8-bit: in 32 bits, wrapped back, as jnp's
  if kind in (UnOp.NEG, UnOp.ABS) and d in FLOAT8 and isinstance(x.type, TensorType):
    # float8 -x and abs (an amax of float8 data): the sign bit flipped or cleared, exactly jnp's (NaN stays NaN)
    from .elementwise_fns import bitcast
    bits = binary(cx, BinOp.XOR if kind == UnOp.NEG else BinOp.AND, bitcast.rule(cx, x, DType.u8),
                  0x80 if kind == UnOp.NEG else 0x7F)
    return bitcast.rule(cx, bits, d)
  if kind == UnOp.NOT:
    if isinstance(d, DType) and d != DType.bool_:
      raise E.UnsupportedDtypeError(f"'not' on {d}; use it on booleans (comparisons)", cx.loc,
                                    hint=f"compare first: {method_on(cx.named(x))} != 0")
  elif kind == UnOp.NEG and d == DType.bool_:     # (1-bit subtraction from 0 is the identity)
    raise E.UnsupportedDtypeError("- on boolean values", cx.loc,
                                  hint=f"for logic use ~{method_on(cx.named(x, 'm'))} (not); to negate numbers, convert first:"
                                       f" -{method_on(cx.named(x, 'm'))}.astype(jnp.int32)")
  else:
    check_dtype_support(cx, x.type.dtype, what, floats_only=kind.value.floats_only, x=x)
  from .broadcast_nd import through_small_reshape
  out = through_small_reshape(cx, (x,), lambda o, s: cx.b.emit(
      Unary, kind, *o, loc=cx.loc, types=[TensorType(s, x.type.dtype)], names=[cx.name]).result) \
      or cx.b.emit(Unary, kind, x, loc=cx.loc, types=[x.type], names=[cx.name]).result
  if x.id in cx.b.weak:
    cx.b.weak.add(out.id)     # ml.exp of a weak value stays weak, as jnp's
  return out


def where_(cx, cond, a, b):
  from .shape import broadcast_operands
  folded = _fold_one_element(cx, (cond, a, b), lambda c, x, y: where_(cx, c, x, y))
  if folded is not None:
    return folded
  check_register_value(cx, cond, "ml.where")
  weak = _weak_select(cx, a, b)
  if isinstance(cond, (bool, int, float, np.bool_, np.number)):   # ml.where(causal, -1e30, 0.0) of a constexpr,
    cond = constant(cx, bool(cond), DType.bool_)   # jnp.where(dx == 1, fx, 1 - fx) of an unrolled corner: a constant
    # condition, as jnp's and tl.where's (broadcast and promoted alike; probe 57g, MG003 before); a Python number by
    # its truth, jnp.where(c, a, b) of a count c = 0 (probe 59c, MG003 before)
  if not is_value(cond):
    raise E.KernelTypeError(
        f"ml.where's condition must be a boolean (a comparison), got {kind_of(cond)}", cx.loc,
        hint="compare to make one: ml.where(x > 0, x, 0.0)")
  cond = truth(cx, cond)          # a number tensor selects where it is non-zero, as jnp.where's and tl.where's
  if not is_value(a) and not is_value(b):   # two Python numbers: their default dtype
    check_register_value(cx, a, "ml.where")
    check_register_value(cx, b, "ml.where")
    dt = (DType.bool_ if isinstance(a, bool) and isinstance(b, bool) else
          PY_FLOAT if isinstance(a, float) or isinstance(b, float) else INDEX)
    from .weak_lattice import join
    if (j := join(cx, (a, b))) is not None:
      dt = j[0]            # as jnp's lattice: jnp.where(m, jnp.int8(3), 2) is int8, (m, 1.5, np.uint8(4)) weak float32
    for v in (a, b):
      check_python_int(cx, v, dt, "ml.where")
  else:
    (a, b), _, dt = common(cx, a, b, "ml.where")
  x = next((v for v in (a, b) if is_value(v)), None)
  if (wide := _wide(resolve(dt))) is not None:       # an 8-bit select: in 32 bits, converted back exactly
    shape = next((v.type.shape for v in (cond, a, b) if is_value(v) and isinstance(v.type, TensorType)), None)
    return narrowed(cx, where_(cx, cond, *_widened(cx, (a, b), wide, resolve(dt), "ml.where", shape)), resolve(dt))
  (cond, a, b), shape = broadcast_operands(cx, (cond, a, b), "ml.where")
  check_dtype_support(cx, dt, "ml.where", x=x)
  # All scalars (a run-time condition between scalars or numbers): a scalar select.
  rtype = ScalarType(dt) if shape is None else TensorType(shape, dt)
  from .broadcast_nd import through_small_reshape
  out = through_small_reshape(cx, (cond, a, b), lambda o, s: cx.b.emit(
      Where, *o, loc=cx.loc, types=[TensorType(s, dt)], names=[cx.name]).result) \
      or cx.b.emit(Where, cond, a, b, loc=cx.loc, types=[rtype], names=[cx.name]).result
  if weak:
    cx.b.weak.add(out.id)     # jnp.where(m, 1.0, 0.5) is weakly typed: x_bf16 * it is bfloat16, as in jnp
  return out


def truth(cx, x):
  """A register value as a boolean: itself if boolean, else where it is non-zero (NaN too), as
  jnp's truthiness of a condition or mask (`jnp.where(m, ...)`, `where=m` of an int mask)."""
  return x if resolve(x.type.dtype) == DType.bool_ else compare(cx, CmpOp.NE, x, 0)


def _weak_select(cx, a, b) -> bool:
  """Whether a select between `a` and `b` is weakly typed, as jnp's lattice says (weak_lattice.join): bool lies
  below the weak types, so `jnp.where(m, m, 94)` is a weak int32 and meeting uint8 later it is uint8 (probe 57e's
  fuzzer), and a weak float meeting strong integers stays weak (probe 65a)."""
  from .weak_lattice import join
  j = join(cx, (a, b))
  return bool(j is not None and j[1])


def astype(cx, x, dtype):
  check_register_value(cx, x, ".astype")
  if not is_value(x):
    return constant(cx, x, dtype)
  if not isinstance(dtype, DType):
    raise E.KernelTypeError(f".astype needs a dtype such as jnp.float16, got {shown(dtype)}", cx.loc,
                            hint=f"{method_on(cx.named(x))}.astype(jnp.float32)")
  src = resolve(x.type.dtype)
  if src == dtype:               # of a weakly typed loop carry: a value of that dtype, as jnp's astype gives
    return x if x.id not in cx.b.weak else cx.b.emit(Cast, x, loc=cx.loc, types=[x.type], names=[cx.name]).result
  folded = _fold_one_element(cx, (x,), lambda s: astype(cx, s, dtype))
  if folded is not None:
    return folded
  if dtype == DType.bool_:      # jnp's x.astype(bool): whether x is non-zero (NaN too, as x != 0)
    return compare(cx, CmpOp.NE, x, 0)
  if isinstance(x.type, ScalarType) and src in FLOAT8 and dtype not in FLOAT8:
    from .elementwise_fns import f8_scalar_to_f32
    wide = f8_scalar_to_f32(cx, x, src)
    return wide if dtype == DType.f32 else astype(cx, wide, dtype)
  why = cast_problem(src, dtype, scalar=isinstance(x.type, ScalarType)) if isinstance(src, DType) else None
  if why:
    f8 = isinstance(x.type, ScalarType) and (src in FLOAT8 or dtype in FLOAT8)
    raise E.UnsupportedDtypeError(
        f"cannot cast {x.name or 'this value'} from {src} to {dtype}: {why}", cx.loc,
        hint="convert tensors instead: read a window into registers (x.at[ml.ds(i, 128)][...]) and cast"
             " that, or keep scalars in float32" if f8 else
             f"cast in two steps: ({cx.named(x, '') or x.name or 'x'}).astype(jnp.float32).astype(jnp.{dtype})")
  from .float8_overflow import jnp_float8
  return jnp_float8(cx, x, dtype, lambda v: saturating_cast(cx, v, dtype)) if dtype in FLOAT8 else \
      saturating_cast(cx, x, dtype)


def saturating_cast(cx, x, dtype):
  """The Cast op: to float8 the GPU's cvt.rn.satfinite (past the range +-max, NaN stays NaN); `astype`
  gives jnp's values around it."""
  if resolve(x.type.dtype) == dtype:
    return x
  from .broadcast_nd import small_cast
  return small_cast(cx, x, dtype) or cx.b.emit(Cast, x, loc=cx.loc, types=[_like(x.type, dtype)], names=[cx.name]).result


def _like(t, dtype):
  return dataclasses.replace(t, dtype=dtype)


def _fold_one_element(cx, operands, op):
  """`op` on the scalars of one-element ml.full tensors (numbers and scalars as they are), the
  result stretched back to the tensors' shape; None unless every tensor operand is one."""
  tensors = [v for v in operands if is_value(v) and isinstance(v.type, TensorType)]
  if not tensors:
    return None
  scalars = {id(v): one_element_scalar(cx, v) for v in tensors}
  if any(s is None for s in scalars.values()):
    return None
  shape = max((v.type.shape for v in tensors), key=len)
  res = op(*[scalars.get(id(v), v) if is_value(v) and isinstance(v.type, TensorType) else v for v in operands])
  return stretch(cx, shape, res)


def one_element_scalar(cx, v):
  """The scalar a one-element tensor made by ml.full holds (a full reduction with keepdims=True,
  `ml.full((1, 1), s, dtype)`), typed as the tensor, or None. Such a tensor cannot be held in
  registers by itself, so math on it is done on the scalar and stretched again (`stretch`)."""
  if not (is_value(v) and isinstance(v.type, TensorType) and one_element(v.type.shape)):
    return None
  made = cx.b.defining(v)
  if not isinstance(made, Full):
    return None
  return _scalar_full(cx, made.value, v.type.dtype, "ml.full")


def stretch(cx, shape, scalar):
  return full_(cx, shape, scalar, scalar.type.dtype) if is_value(scalar) else scalar


def full_(cx, shape, value, dtype, what="ml.full", convert=False):
  """A tensor of `shape` holding `value`; a scalar of another dtype is converted with `convert`
  (ml.full, as jnp.full), else an error naming `what` (a store, an atomic: no implicit conversion)."""
  if isinstance(shape, (tuple, list)) and len(shape) == 0 and isinstance(dtype, DType):
    return _scalar_full(cx, value, dtype, what)      # ml.full((), v, dtype): a scalar, as jnp's 0-d array
  shape = static_shape(cx, shape, what)
  if not isinstance(dtype, (DType, DTypeVar)):
    raise E.KernelTypeError(f"{what} needs a dtype such as jnp.float32, got {shown(dtype)}", cx.loc,
                            hint="ml.full(shape, 1.0, jnp.float32)")
  if is_value(value):
    if not isinstance(value.type, ScalarType):
      raise E.KernelTypeError(f"ml.full's value must be a number or a scalar, got {kind_of(value)}", cx.loc,
                              hint="to repeat a vector along a new axis use ml.broadcast_to")
    if unify(value.type.dtype, dtype, cx.loc, what) is None:
      if not convert:
        vd, name = dtype_name(value.type.dtype), value.name if (value.name or "").isidentifier() else "s"
        raise E.DtypeMismatchError(
            f"{what} of {a_an(vd)} scalar as {dtype_name(dtype)}: no implicit"
            f" conversion", cx.loc, hint=f"convert it first: {name}.astype(jnp.{dtype_name(dtype)})")
      value = astype(cx, value, dtype)          # ml.full(shape, i, jnp.float32): as jnp.full
  elif not isinstance(value, Num):
    raise E.KernelTypeError(f"ml.full's value must be a number or a scalar, got {kind_of(value)}", cx.loc,
                            hint="ml.full(shape, 0.0, jnp.float32)")
  else:
    check_python_int(cx, value, dtype, what)
    if convert:
      value = f8_number(value, dtype)
  from .padded_tiles import padded_fill
  return padded_fill(cx, shape, dtype, lambda up: cx.b.emit(Full, value, loc=cx.loc, types=[TensorType(up, dtype)],
                                                           names=[cx.name]).result)


def f8_number(value, dtype):
  """A Python number as ml.full (and a store, ml.where, other=) converts it to a float8 type: as jnp.full,
  from float64, rounded once (1000.0 is NaN in float8_e4m3fn, -1e5 -inf in float8_e5m2); other dtypes and
  NaN as they are."""
  if dtype not in FLOAT8 or value != value:
    return value
  try:
    value = float(value)
  except OverflowError:           # an int past float's range: an infinity
    value = pymath.inf if value > 0 else -pymath.inf
  with np.errstate(over="ignore"):
    return float(np.asarray(value, np.float64).astype(dtype.np))


def _scalar_full(cx, value, dtype, what):
  """A CTA-uniform scalar of `dtype` holding `value` (a Python number or a scalar)."""
  if is_value(value) and isinstance(value.type, ScalarType):
    return astype(cx, value, dtype) if value.type.dtype != dtype else value
  if not isinstance(value, Num) or is_value(value):
    raise E.KernelTypeError(f"{what}'s value must be a number or a scalar, got {kind_of(value)}", cx.loc,
                            hint="ml.full((), 0.0, jnp.float32)")
  check_python_int(cx, value, dtype, what)
  if dtype.is_float:
    v = float(f8_number(value, dtype))
  elif dtype == DType.bool_:
    v = bool(value)
  elif isinstance(value, float):       # as a cast (and jnp.full) converts: NaN -> 0, out of range saturates
    lo, hi = dtype.int_range
    v = 0 if value != value else int(min(max(value, lo), hi))
  else:
    v = int(value)
  return cx.b.emit(Constant, v, loc=cx.loc, types=[ScalarType(dtype)], names=[cx.name]).result
