"""Elementwise ops on both backends: constants, arithmetic, comparisons, math, casts, fills, iotas.

`//` and `%` floor on both (Python's rules: the remainder takes the divisor's sign).
"""
from __future__ import annotations

import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, vector
from jaxlib.mlir.dialects import math as mlir_math

from ..frontend import ir as kir
from ..frontend.dtypes import DType
from ..frontend.ops.arith_hints import shift_guard
from ..frontend.ops.elementwise import (Arange, BinOp, Binary, Cast, CmpOp, Compare, Constant, Full,
                                        UnOp, Unary, Where)
from ..frontend.types import ScalarType, TensorType
from . import compat
from . import float_divmod as FD
from . import interpret_numerics as N
from ..frontend.errors import InterpretError
from .fast_math import EX2_PTX
from .index_compare import lower_compare
from .mosaic import as_array, asm_per_element, is_split, layout_of, mlir_type, operand, scalar_const
from .registry import interpret, lower


# ---------------------------------------------------------------- Mosaic GPU
@lower(Constant)
def _constant(ctx, o):
  ctx.set(o.result, scalar_const(o.value, o.result.type.dtype))


def _floor_mod_scalar(a, b):
  r = arith.remsi(a, b)
  zero = arith.constant(a.type, 0)
  wrong_sign = arith.cmpi(arith.CmpIPredicate.slt, arith.xori(r, b), zero)
  fix = arith.andi(arith.cmpi(arith.CmpIPredicate.ne, r, zero), wrong_sign)
  return arith.select(fix, arith.addi(r, b), r)


def _floor_mod_array(a, b):
  r = a % b                                      # remsi: the dividend's sign
  fix = (r != 0) & ((r ^ b) < 0)
  return fix.select(r + b, r)


def _minus_one_safe_scalar(kind, f):
  """Signed `f` (floordivsi, remsi or the floor mod) of scalars with a divisor of -1 taken apart:
  LLVM's sdiv and srem of the lowest value by -1 are undefined behaviour (the quotient overflows),
  where jnp's `x // -1` is -x (wrapping: INT_MIN // -1 is INT_MIN) and `x % -1` is 0. The divisor
  becomes 1 there, and the quotient is negated back."""
  def op(a, b):
    minus1 = arith.cmpi(arith.CmpIPredicate.eq, b, arith.constant(b.type, -1))
    r = f(a, arith.select(minus1, arith.constant(b.type, 1), b))
    if kind == BinOp.FLOORDIV:
      r = arith.select(minus1, arith.subi(arith.constant(a.type, 0), a), r)
    return r
  return op


def _zero_safe_scalar(kind, f, signed):
  """Integer `f` (//, % or fmod) of scalars with a zero divisor taken apart, as jnp's (interpret_numerics.by_zero):
  LLVM's division by zero is undefined behaviour. The divisor becomes 1 there (so % and fmod give jnp's 0), and
  the quotient jnp's: -1 (all bits set), or for signed types -2 where the dividend is not 0."""
  def op(a, b):
    zero = arith.cmpi(arith.CmpIPredicate.eq, b, arith.constant(b.type, 0))
    r = f(a, arith.select(zero, arith.constant(b.type, 1), b))
    if kind == BinOp.FLOORDIV:
      on_zero = arith.constant(a.type, -1)
      if signed:
        nonzero = arith.cmpi(arith.CmpIPredicate.ne, a, arith.constant(a.type, 0))
        on_zero = arith.select(nonzero, arith.constant(a.type, -2), on_zero)
      r = arith.select(zero, on_zero, r)
    return r
  return op


def _zero_safe_array(kind, f, signed):
  """_zero_safe_scalar's guard for FragmentedArrays."""
  def op(a, b):
    zero = b == 0
    splat = lambda v: fa.FragmentedArray.splat(arith.constant(b.mlir_dtype, v), b.shape, b.layout, is_signed=signed)
    r = f(a, zero.select(splat(1), b))
    if kind == BinOp.FLOORDIV:
      on_zero = (a != 0).select(splat(-2), splat(-1)) if signed else splat(-1)
      r = zero.select(on_zero, r)
    return r
  return op


def _minus_one_safe_array(kind, f):
  """_minus_one_safe_scalar's guard for signed FragmentedArrays."""
  def op(a, b):
    minus1 = b == -1
    one = fa.FragmentedArray.splat(arith.constant(b.mlir_dtype, 1), b.shape, b.layout, is_signed=True)
    r = f(a, minus1.select(one, b))
    return minus1.select(-a, r) if kind == BinOp.FLOORDIV else r
  return op


_SIGNED_DIVISIONS = (BinOp.FLOORDIV, BinOp.MOD, BinOp.FMOD)


def _needs_minus_one_guard(o) -> bool:
  """A signed //, % or fmod whose divisor may be -1 (a value, or the number -1)."""
  return o.kind in _SIGNED_DIVISIONS and (isinstance(o.rhs, kir.Value) or o.rhs == -1)


def _needs_zero_guard(o) -> bool:
  """An integer //, % or fmod whose divisor may be 0 (a value the grid evaluation did not find non-zero in every
  program, frontend/absint.py: a constant 0 is the frontend's error)."""
  return o.kind in _SIGNED_DIVISIONS and isinstance(o.rhs, kir.Value) and not o.nonzero


def _div_rn(a, b):
  """float32 a / b rounded to nearest (PTX's div.rn; arith.divf compiles to an approximate division)."""
  return asm_per_element("div.rn.f32 $0, $1, $2;", "=f,f,f", a, b)


def _sqrt_rn(x):
  """float32 sqrt rounded to nearest (PTX's sqrt.rn), as jnp.sqrt and NumPy compute it. math.sqrt becomes libdevice's
  __nv_sqrtf, whose __CUDA_PREC_SQRT reflection Mosaic GPU leaves at 0: sqrt.approx.f32, a last bit off the root in
  about a fifth of the values (design note 231)."""
  return asm_per_element("sqrt.rn.f32 $0, $1;", "=f,f", x)


def _sqrt(x):
  """A float array's sqrt by sqrt.rn.f32; 16-bit floats widened first and rounded once (exact: float32 has more
  than twice their bits)."""
  f32 = ir.F32Type.get()
  if x.mlir_dtype == f32:
    return x._pointwise(_sqrt_rn)
  if x.mlir_dtype in (ir.F16Type.get(), ir.BF16Type.get()):
    return x.astype(f32)._pointwise(_sqrt_rn).astype(x.mlir_dtype)
  return compat.array_sqrt(x)


def _mulhi(signed: bool):
  """The high 32 bits of the product of 32-bit integers (PTX's mul.hi, one instruction per element)."""
  asm = f"mul.hi.{'s' if signed else 'u'}32 $0, $1, $2;"
  return lambda a, b: asm_per_element(asm, "=r,r,r", a, b)


_SCALAR_INT = {BinOp.ADD: arith.addi, BinOp.SUB: arith.subi, BinOp.MUL: arith.muli,
               BinOp.FLOORDIV: arith.floordivsi, BinOp.MOD: _floor_mod_scalar, BinOp.FMOD: arith.remsi,
               BinOp.MAX: arith.maxsi, BinOp.MIN: arith.minsi,
               BinOp.AND: arith.andi, BinOp.OR: arith.ori, BinOp.XOR: arith.xori,
               BinOp.SHL: arith.shli, BinOp.SHR: arith.shrsi, BinOp.MULHI: _mulhi(True)}
_SCALAR_UINT = {**_SCALAR_INT, BinOp.FLOORDIV: arith.divui, BinOp.MOD: arith.remui, BinOp.FMOD: arith.remui,
                BinOp.MAX: arith.maxui, BinOp.MIN: arith.minui, BinOp.SHR: arith.shrui, BinOp.MULHI: _mulhi(False)}
_SCALAR_FLOAT = {BinOp.ADD: arith.addf, BinOp.SUB: arith.subf, BinOp.MUL: arith.mulf,
                 BinOp.DIV: arith.divf, BinOp.MAX: arith.maximumf, BinOp.MIN: arith.minimumf,
                 BinOp.ATAN2: mlir_math.atan2, BinOp.POW: mlir_math.powf, BinOp.DIV_RN: _div_rn}
_ARRAY = {BinOp.ADD: lambda a, b: a + b, BinOp.SUB: lambda a, b: a - b,
          BinOp.MUL: lambda a, b: a * b, BinOp.DIV: lambda a, b: a / b,
          BinOp.FLOORDIV: lambda a, b: a // b, BinOp.MOD: _floor_mod_array, BinOp.FMOD: lambda a, b: a % b,
          BinOp.MAX: lambda a, b: a.max(b), BinOp.MIN: lambda a, b: a.min(b),
          BinOp.AND: lambda a, b: a & b, BinOp.OR: lambda a, b: a | b,
          BinOp.ATAN2: lambda a, b: a._pointwise(mlir_math.atan2, b),
          BinOp.POW: lambda a, b: a._pointwise(mlir_math.powf, b),
          BinOp.DIV_RN: lambda a, b: a._pointwise(_div_rn, b),
          BinOp.XOR: lambda a, b: a ^ b, BinOp.SHL: lambda a, b: a << b, BinOp.SHR: lambda a, b: a >> b}
# A float sum, difference or product of arrays, rounded on its own as interpret mode and jnp's eager ops round it.
# FragmentedArray's operators mark them `fastmath<contract>`, which lets LLVM fuse a product into the add or
# subtraction it feeds (one fma.rn.f32, the product unrounded): Dekker's split `t - (t - a)` of `t = 4097 * a` became
# `a`, TwoProd's `(ah * bh - p) + ...` and Horner's steps differed from interpret mode, `s - s` of `s = v * v` gave
# the product's rounding error (design note 231). Without the flag LLVM's NVPTX backend emits `mul.rn` / `add.rn`,
# which ptxas does not contract either; `ml.fma(a, b, c)` is the fused form where a kernel wants it.
_ROUNDED = {BinOp.ADD: arith.addf, BinOp.SUB: arith.subf, BinOp.MUL: arith.mulf}
_CMP_ARRAY = {CmpOp.LT: lambda a, b: a < b, CmpOp.LE: lambda a, b: a <= b,
              CmpOp.GT: lambda a, b: a > b, CmpOp.GE: lambda a, b: a >= b,
              CmpOp.EQ: lambda a, b: a == b, CmpOp.NE: lambda a, b: a != b}


def _operand_dtype(o):
  return next(x.type.dtype for x in (o.lhs, o.rhs) if isinstance(x, kir.Value))


def _scalar_operands(ctx, o, d):
  return [operand(ctx, x) if isinstance(x, kir.Value) else scalar_const(x, d) for x in (o.lhs, o.rhs)]


@lower(Binary)
def _binary(ctx, o):
  t, d = o.result.type, o.result.type.dtype
  if isinstance(t, ScalarType):
    a, b = _scalar_operands(ctx, o, d)
    if d.is_float and o.kind in (BinOp.FLOORDIV, BinOp.MOD, BinOp.FMOD):     # as a splat array's one register
      a, b = (fa.FragmentedArray.splat(v, (1,), is_signed=None) for v in (a, b))
      ctx.set(o.result, _float_divmod(o, a, b, d).registers.item())
      return
    table = _SCALAR_FLOAT if d.is_float else _SCALAR_INT if d.is_signed else _SCALAR_UINT
    f = table[o.kind]
    if d.is_int and _needs_zero_guard(o):
      f = _zero_safe_scalar(o.kind, f, d.is_signed)
    if d.is_int and d.is_signed and _needs_minus_one_guard(o):
      f = _minus_one_safe_scalar(o.kind, f)
    ctx.set(o.result, f(a, b))
    return
  a = as_array(ctx, operand(ctx, o.lhs), t, d)
  b = as_array(ctx, operand(ctx, o.rhs), t, d)
  if d.is_float and o.kind in (BinOp.FLOORDIV, BinOp.MOD, BinOp.FMOD):
    ctx.set(o.result, _float_divmod(o, a, b, d))
    return
  if o.kind == BinOp.MULHI:
    ctx.set(o.result, a._pointwise(_mulhi(d.is_signed), b))
    return
  f = (lambda x, y: x % y) if o.kind == BinOp.MOD and not d.is_signed else _ARRAY[o.kind]
  if d.is_float and o.kind in _ROUNDED:
    f = lambda x, y, op=_ROUNDED[o.kind]: x._pointwise(op, y)
  if d.is_int and _needs_zero_guard(o):
    f = _zero_safe_array(o.kind, f, d.is_signed)
  if d.is_int and d.is_signed and _needs_minus_one_guard(o):
    f = _minus_one_safe_array(o.kind, f)
  ctx.set(o.result, f(a, b))


def _float_divmod(o, a, b, d):
  """Float //, % (jnp's) or ml.fmod (C's; 16-bit operands arrive widened to float32) of arrays."""
  n = FD.steps(d, o.rhs if isinstance(o.rhs, (int, float)) else None)
  return FD.fmod(a, b, n) if o.kind == BinOp.FMOD else FD.floor_divmod(o.kind, a, b, d, n)


_FPRED = {CmpOp.LT: "OLT", CmpOp.LE: "OLE", CmpOp.GT: "OGT", CmpOp.GE: "OGE", CmpOp.EQ: "OEQ", CmpOp.NE: "UNE"}


@lower(Compare)
def _compare(ctx, o):
  d = _operand_dtype(o)
  t = o.result.type
  if isinstance(t, ScalarType):
    a, b = _scalar_operands(ctx, o, d)
    if d.is_float:
      ctx.set(o.result, arith.cmpf(getattr(arith.CmpFPredicate, _FPRED[o.kind]), a, b))
    else:
      s = "s" if d.is_signed else "u"
      pred = {CmpOp.LT: s + "lt", CmpOp.LE: s + "le", CmpOp.GT: s + "gt",
              CmpOp.GE: s + "ge", CmpOp.EQ: "eq", CmpOp.NE: "ne"}[o.kind]
      ctx.set(o.result, arith.cmpi(getattr(arith.CmpIPredicate, pred), a, b))
    return
  if not d.is_float and (grid := lower_compare(ctx, o, d)) is not None:   # index grids (causal masks)
    ctx.set(o.result, grid)
    return
  like = TensorType(t.shape, d, t.layout)
  a = as_array(ctx, operand(ctx, o.lhs), like, d)
  b = as_array(ctx, operand(ctx, o.rhs), like, d)
  ctx.set(o.result, _CMP_ARRAY[o.kind](a, b))


_LIBDEVICE = {UnOp.ASIN: mlir_math.asin, UnOp.ACOS: mlir_math.acos, UnOp.ATAN: mlir_math.atan,
              UnOp.TAN: mlir_math.tan, UnOp.CBRT: mlir_math.cbrt, UnOp.EXPM1: mlir_math.expm1,
              UnOp.LOG1P: mlir_math.log1p, UnOp.ERFC: mlir_math.erfc}
_ARRAY_UNARY = {**{k: (lambda x, f=f: x._pointwise(f)) for k, f in _LIBDEVICE.items()},
                UnOp.NEG: lambda x: -x, UnOp.NOT: lambda x: x == False,  # noqa: E712
                UnOp.SQRT: _sqrt, UnOp.ABS: lambda x: x.abs(),
                **{k: (lambda x, n=k.value.name: compat.array_rounding(n, x))
                   for k in (UnOp.FLOOR, UnOp.CEIL, UnOp.TRUNC, UnOp.ROUND)}}


# The hardware's approximate instructions, as FragmentedArray emits them for tensors (`approx=True`),
# for scalars: one instruction, so a scalar and a tensor of the same values agree (interpret mode's
# float_unary models the instruction for both).
_APPROX_PTX = {UnOp.EXP2_APPROX: EX2_PTX}


@lower(Unary)
def _unary(ctx, o):
  x = ctx.get(o.x)
  if isinstance(o.result.type, ScalarType):
    if o.kind.value.approx:     # the tensors' instruction (math.exp2 would keep what .ftz flushes)
      ctx.set(o.result, asm_per_element(_APPROX_PTX[o.kind], "=f,f", x))
      return
    if o.kind == UnOp.SQRT and x.type in (ir.F32Type.get(), ir.F16Type.get(), ir.BF16Type.get()):
      wide = x if x.type == ir.F32Type.get() else arith.extf(ir.F32Type.get(), x)
      r = _sqrt_rn(wide)
      ctx.set(o.result, r if x.type == ir.F32Type.get() else arith.truncf(x.type, r))
      return
    ctx.set(o.result, _LIBDEVICE[o.kind](x) if o.kind in _LIBDEVICE else
            compat.scalar_unary(o.kind.value.name, x, o.x.type.dtype))
    return
  kw = {"approx": True} if o.kind.value.approx else {}
  fn = _ARRAY_UNARY.get(o.kind) or (lambda v: getattr(v, o.kind.value.name)(**kw))
  ctx.set(o.result, fn(x))


@lower(Where)
def _where(ctx, o):
  t = o.result.type
  if isinstance(t, ScalarType):
    a, b = (operand(ctx, x) if isinstance(x, kir.Value) else scalar_const(x, t.dtype)
            for x in (o.on_true, o.on_false))
    ctx.set(o.result, arith.select(ctx.get(o.cond), a, b))
    return
  cond = as_array(ctx, ctx.get(o.cond), TensorType(t.shape, DType.bool_, t.layout), DType.bool_)
  a = as_array(ctx, operand(ctx, o.on_true), t, t.dtype)
  b = as_array(ctx, operand(ctx, o.on_false), t, t.dtype)
  ctx.set(o.result, cond.select(a, b))


@lower(Cast)
def _cast(ctx, o):
  x, src, dst = ctx.get(o.x), o.x.type.dtype, o.result.type.dtype
  if o.bitcast:
    if mlir_type(src) == mlir_type(dst):     # int32 <-> uint32: same bits, new signedness
      ctx.set(o.result, x if isinstance(o.result.type, ScalarType) else fa.FragmentedArray(
          _registers=x.registers, _layout=x.layout, _is_signed=dst.is_signed))
    elif isinstance(o.result.type, ScalarType):
      ctx.set(o.result, arith.bitcast(mlir_type(dst), x))
    else:
      ctx.set(o.result, x.bitcast(mlir_type(dst), output_is_signed=dst.is_signed if dst.is_int else None))
    return
  if isinstance(o.result.type, ScalarType):
    ctx.set(o.result, compat.scalar_cast(x, src, dst, mlir_type(dst)))
    return
  if src == dst:
    ctx.set(o.result, x)
    return
  ctx.set(o.result, compat.array_cast(x, src, dst, mlir_type(dst)))


@lower(Full)
def _full(ctx, o):
  t = o.result.type
  v = operand(ctx, o.value)
  if not isinstance(v, ir.Value):
    v = scalar_const(v, t.dtype)
  ctx.set(o.result, fa.FragmentedArray.splat(v, ctx.local_shape(t), layout_of(t),
                                             is_signed=t.dtype.is_signed))


def iota_registers(starts, vec, shape, dim, A):
  """Per register of a strided tensor of `shape` (its first elements' flat offsets `starts`), the
  index along `dim` of each of its `vec` elements, with integer ops `A` (addi, divui, remui, const).
  Mosaic's `broadcasted_iota` takes them from `foreach`, which adds an element's number to the last
  index alone: where rows are not a whole number of vectors ((4, 64, 2) int32, vectors of 4) the
  elements past a row's end got the next column numbers instead of the next row's."""
  stride = int(np.prod(shape[dim + 1:], dtype=np.int64))
  return [[A.remui(A.divui(A.addi(lin, A.const(j)), A.const(stride)), A.const(shape[dim])) for j in range(vec)]
          for lin in starts]


class _IndexOps:
  addi, divui, remui = staticmethod(arith.addi), staticmethod(arith.divui), staticmethod(arith.remui)

  @staticmethod
  def const(v):
    return arith.constant(ir.IndexType.get(), v)


def _strided_iota(ty, shape, dim, layout, signed):
  def cast(idx):
    if isinstance(ty, ir.FloatType):
      return arith.uitofp(ty, arith.index_cast(ir.IntegerType.get_signless(32), idx))
    return arith.index_cast(ty, idx)
  regs = [vector.from_elements(ir.VectorType.get((layout.vec_size,), ty), [cast(i) for i in elems])
          for elems in iota_registers(layout.linear_thread_idxs(), layout.vec_size, shape, dim, _IndexOps)]
  registers = np.empty(layout.registers_shape(shape), dtype=object)
  registers.flat[:] = regs
  return fa.FragmentedArray(_registers=registers, _layout=layout, _is_signed=signed)


@lower(Arange)
def _arange(ctx, o):
  t = o.result.type
  shape = ctx.local_shape(t)
  layout = layout_of(t)
  # A row or column vector's size-1 axis is squeezed from its registers (Layout.register_shape): the iota runs
  # along the axis's place among those kept, and along the squeezed axis itself it is all zeros (probe 57d: a
  # register gather's (1, n) positions, `arange dim=1`, failed in Mosaic GPU, "`dimension` must be smaller than
  # the rank").
  dropped = t.layout.drop if len(t.shape) == 2 and len(shape) == 1 else ()
  dim = o.dim - sum(1 for d in dropped if d < o.dim)
  if o.dim in dropped:
    x = fa.FragmentedArray.splat(arith.constant(mlir_type(t.dtype), 0.0 if t.dtype.is_float else 0), shape,
                                 layout, is_signed=t.dtype.is_signed)
  elif isinstance(layout, fa.WGStridedFragLayout) and len(shape) > 1 and shape[-1] % layout.vec_size:
    x = _strided_iota(mlir_type(t.dtype), shape, dim, layout, t.dtype.is_signed)
  else:
    x = fa.FragmentedArray.broadcasted_iota(mlir_type(t.dtype), shape, dim, layout,
                                            is_signed=t.dtype.is_signed)
  if is_split(t) and ctx.wg is not None and o.dim == 0:   # this warpgroup's rows
    start = arith.muli(arith.index_cast(ir.IntegerType.get_signless(32), ctx.wg),
                       arith.constant(ir.IntegerType.get_signless(32), shape[0]))
    if t.dtype.is_float:
      start = arith.sitofp(mlir_type(t.dtype), start)
    elif t.dtype.bits != 32:
      start = arith.trunci(mlir_type(t.dtype), start) if t.dtype.bits < 32 else arith.extsi(mlir_type(t.dtype), start)
    x = x + fa.FragmentedArray.splat(start, shape, layout_of(t), is_signed=t.dtype.is_signed)
  ctx.set(o.result, x)


# ---------------------------------------------------------------- interpreter
@interpret(Constant)
def _i_constant(cta, o):
  cta.set(o.result, N.const(o.value, o.result.type.dtype))


def _operand_texts(o, rhs: str):
  """How hints name a Binary's operands: the user's names ("a" and `rhs` for unnamed values)."""
  a_, b_ = (x.name if isinstance(x, kir.Value) and x.name else str(x) if not isinstance(x, kir.Value)
            else n for x, n in ((o.lhs, "a"), (o.rhs, rhs)))
  return (t if t.isidentifier() or t.endswith("]") and "(" not in t else f"({t})" for t in (a_, b_))


@interpret(Binary)
def _i_binary(cta, o):
  d = o.result.type.dtype
  a, b = cta.operand(o.lhs, d), cta.operand(o.rhs, d)
  if d.is_float and o.kind in (BinOp.FLOORDIV, BinOp.MOD, BinOp.FMOD):
    r = N.float_divmod(o.kind, a, b, d)
  elif d.is_float:
    c = N.compute_dtype(d)
    r = N.FLOAT_BIN[o.kind](a.astype(c), b.astype(c))
  else:
    if o.kind in (BinOp.SHL, BinOp.SHR) and np.any((b < 0) | (b >= d.bits)):
      a_, s_ = _operand_texts(o, "s")
      raise InterpretError(f"a shift by an amount outside 0..{d.bits - 1} (undefined on the GPU)", o.loc,
                           hint=shift_guard(a_, o.kind.value, s_, d, negative=bool(np.any(b < 0))))
    r = N.INT_BIN[o.kind](a, b)
  cta.set(o.result, np.asarray(r).astype(N.np_dtype(d)))


@interpret(Compare)
def _i_compare(cta, o):
  d = _operand_dtype(o)
  c = N.compute_dtype(d)
  a, b = cta.operand(o.lhs, d).astype(c), cta.operand(o.rhs, d).astype(c)
  cta.set(o.result, np.asarray(N.CMP[o.kind](a, b)))


@interpret(Unary)
def _i_unary(cta, o):
  x, d = cta.get(o.x), o.x.type.dtype
  if d.is_float:
    r = N.float_unary(o.kind, x.astype(N.compute_dtype(d)))
  else:
    r = N.INT_UN[o.kind](x)
  cta.set(o.result, np.asarray(r).astype(N.np_dtype(d)))


@interpret(Where)
def _i_where(cta, o):
  t = o.result.type
  r = np.where(cta.get(o.cond), cta.operand(o.on_true, t.dtype), cta.operand(o.on_false, t.dtype))
  cta.set(o.result, np.array(np.broadcast_to(r, t.shape), N.np_dtype(t.dtype)))
  cta.holes.pop(o.result.id, None)     # (a loop's earlier trip may have left its own)
  if isinstance(o.on_false, kir.Value) and (h := cta.holes.get(o.on_false.id)) is not None:
    holes = np.broadcast_to(h & ~np.asarray(cta.get(o.cond), bool), t.shape)   # a masked SMEM store's merge
    if holes.any():
      cta.holes[o.result.id] = holes


@interpret(Cast)
def _i_cast(cta, o):
  x = cta.get(o.x)
  if o.bitcast:
    cta.set(o.result, N.bitcast(x, o.result.type.dtype))
  else:
    cta.set(o.result, np.asarray(N.cast(x, o.x.type.dtype, o.result.type.dtype)))


@interpret(Full)
def _i_full(cta, o):
  t = o.result.type
  cta.set(o.result, np.full(t.shape, cta.operand(o.value, t.dtype), N.np_dtype(t.dtype)))


@interpret(Arange)
def _i_arange(cta, o):
  t = o.result.type
  shape = [1] * len(t.shape)
  shape[o.dim] = t.shape[o.dim]
  r = np.arange(t.shape[o.dim]).reshape(shape)
  cta.set(o.result, np.array(np.broadcast_to(r, t.shape), N.np_dtype(t.dtype)))

