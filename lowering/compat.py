"""What differs between jax 0.10.2 (CPU machines) and 0.11.2 (the H200), and small
arithmetic helpers Mosaic GPU does not provide for scalars."""
from __future__ import annotations

from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, math as mlir_math

from ..frontend.dtypes import DType


# Rounding to whole numbers: math-dialect ops (llvm.floor/ceil/trunc/roundeven: PTX cvt.rmi /
# rpi / rzi / rni). FragmentedArray.round is half away from zero, so `round` is roundeven here.
_ROUNDING = {"floor": mlir_math.floor, "ceil": mlir_math.ceil, "trunc": mlir_math.trunc,
             "round": mlir_math.roundeven}


def array_rounding(kind: str, x):
  return x._pointwise(_ROUNDING[kind])


def array_sqrt(x):
  if hasattr(fa.FragmentedArray, "sqrt"):      # 0.11.2
    return x.sqrt()
  return x._pointwise(mlir_math.sqrt)           # 0.10.2 has no FragmentedArray.sqrt


# Float -> integer conversions never give LLVM's fptosi/fptoui a NaN or a value outside the
# target's range: LLVM makes that result poison (not PTX cvt.rzi's saturated value), and folds it
# where the value is known (a NaN fill, a constant branch of a select sunk into the cast: the
# other branch's value then reaches every lane). So NaN becomes 0 and the value is clamped before
# the conversion; for 32 and 64 bits, whose largest value float32 cannot hold, values at or past
# 2**(bits-1) (2**bits unsigned) convert 0 and select the largest integer after it. The result
# is interpret mode's (and jnp's): truncated toward zero, saturated, NaN -> 0.
def _int_bounds(dst: DType) -> tuple[float, float]:
  """(lowest value, first float past the range) of integer `dst`: powers of two, exact in f32."""
  return (-2.0 ** (dst.bits - 1), 2.0 ** (dst.bits - 1)) if dst.is_signed else (0.0, 2.0 ** dst.bits)


def _array_float_to_int(x, dst: DType, dst_type: ir.Type):
  f32 = ir.F32Type.get()
  splat = lambda v, t=f32: fa.FragmentedArray.splat(arith.constant(t, v), x.shape, x.layout)
  x = (x != x).select(splat(0.0), x)                       # NaN -> 0
  lo, past = _int_bounds(dst)
  x = x.max(splat(lo))
  if dst.bits < 32:
    x = x.min(splat(past - 1.0))                            # (exact in float32)
    return x.astype(dst_type, is_signed=dst.is_signed)
  big = x >= splat(past)
  r = big.select(splat(0.0), x).astype(dst_type, is_signed=dst.is_signed)
  top = fa.FragmentedArray.splat(arith.constant(dst_type, int(past) - 1 if dst.is_signed else -1),
                                 x.shape, x.layout, is_signed=dst.is_signed)
  return big.select(top, r)


def _scalar_float_to_int(x: ir.Value, dst: DType, dst_type: ir.Type) -> ir.Value:
  zero = arith.constant(x.type, 0.0)
  x = arith.select(arith.cmpf(arith.CmpFPredicate.UNO, x, x), zero, x)     # NaN -> 0
  lo, past = _int_bounds(dst)
  x = arith.maximumf(x, arith.constant(x.type, lo))
  conv = arith.fptosi if dst.is_signed else arith.fptoui
  if dst.bits < 32:
    return conv(dst_type, arith.minimumf(x, arith.constant(x.type, past - 1.0)))
  big = arith.cmpf(arith.CmpFPredicate.OGE, x, arith.constant(x.type, past))
  r = conv(dst_type, arith.select(big, zero, x))
  return arith.select(big, arith.constant(dst_type, int(past) - 1 if dst.is_signed else -1), r)


def array_cast(x, src: DType, dst: DType, dst_type: ir.Type):
  # Mosaic GPU refuses float <-> float conversions between two narrow types
  # (f16 <-> bf16, f8 <-> 16-bit on some PTX versions); f32 is always a bridge.
  # f32 -> f8 is cvt.rn.satfinite: +-inf and finite overflow become +-max, NaN stays NaN.
  f32 = ir.F32Type.get()
  if src.is_float and dst.is_float and DType.f32 not in (src, dst):
    x = x.astype(f32)
  elif src.is_float and dst.is_int:
    if src != DType.f32:
      x = x.astype(f32, is_signed=None)
    return _array_float_to_int(x, dst, dst_type)
  elif (src.bits <= 8 or dst.is_float and dst.bits == 8) and src.is_float != dst.is_float:
    # (an integer of 16 bits or more -> float8 too: exact in f32 up to 2**24, far past float8's
    # range, so rounding once, as interpret mode does from the integer)
    x = x.astype(f32, is_signed=None)
  return x.astype(dst_type, is_signed=dst.is_signed)


def scalar_cast(x: ir.Value, src: DType, dst: DType, dst_type: ir.Type) -> ir.Value:
  # (Scalars never convert to or from 8-bit floats: the frontend rejects it, cast_problem.)
  if src == dst:
    return x
  if src.is_float and dst.is_float:
    if dst.bits == src.bits:        # bfloat16 <-> float16: through float32 (exact), rounded once
      x = arith.extf(ir.F32Type.get(), x)
      return arith.truncf(dst_type, x)
    return arith.extf(dst_type, x) if dst.bits > src.bits else arith.truncf(dst_type, x)
  if src.is_float:
    if src != DType.f32:
      x = arith.extf(ir.F32Type.get(), x)
    return _scalar_float_to_int(x, dst, dst_type)
  if dst.is_float:
    return (arith.sitofp if src.is_signed else arith.uitofp)(dst_type, x)
  if dst.bits > src.bits:
    return (arith.extsi if src.is_signed else arith.extui)(dst_type, x)
  if dst.bits < src.bits:
    return arith.trunci(dst_type, x)
  return x


def scalar_unary(kind: str, x: ir.Value, d: DType) -> ir.Value:
  if kind == "neg":
    return arith.negf(x) if d.is_float else arith.subi(arith.constant(x.type, 0), x)
  if kind == "not":
    return arith.xori(x, arith.constant(x.type, 1))
  if kind == "abs":
    return mlir_math.absf(x) if d.is_float else mlir_math.absi(x)
  if kind in _ROUNDING:
    return _ROUNDING[kind](x)
  return {"exp": mlir_math.exp, "exp2": mlir_math.exp2, "log": mlir_math.log, "log2": mlir_math.log2,
          "sqrt": mlir_math.sqrt, "rsqrt": mlir_math.rsqrt, "tanh": mlir_math.tanh,
          "sin": mlir_math.sin, "cos": mlir_math.cos, "erf": mlir_math.erf}[kind](x)
