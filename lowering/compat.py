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


def int_range(d: DType) -> tuple[float, float]:
  """The range of integer type `d` (8 or 16 bits), exact in float32."""
  return (-2.0 ** (d.bits - 1), 2.0 ** (d.bits - 1) - 1) if d.is_signed else (0.0, 2.0 ** d.bits - 1)


def _narrow_int(dst: DType) -> bool:
  """A float -> `dst` conversion PTX has no saturating instruction for: NVPTX converts to 8 bits
  through a 16-bit cvt and a truncation (200.0 -> -56 in int8), so the lowering clamps first."""
  return dst.is_int and dst.bits < 32


def array_cast(x, src: DType, dst: DType, dst_type: ir.Type):
  # Mosaic GPU refuses float <-> float conversions between two narrow types
  # (f16 <-> bf16, f8 <-> 16-bit on some PTX versions); f32 is always a bridge.
  # f32 -> f8 is cvt.rn.satfinite: +-inf and finite overflow become +-max, NaN stays NaN.
  f32 = ir.F32Type.get()
  if src.is_float and dst.is_float and DType.f32 not in (src, dst):
    x = x.astype(f32)
  elif src.is_float and _narrow_int(dst):
    # Saturate as cvt.rzi does for 32 bits: clamp in float32 (exact bounds; max/min keep a NaN,
    # which the conversion makes 0), then convert the value, now in range.
    if src != DType.f32:
      x = x.astype(f32, is_signed=None)
    lo, hi = int_range(dst)
    x = x.max(fa.FragmentedArray.splat(arith.constant(f32, lo), x.shape, x.layout))
    x = x.min(fa.FragmentedArray.splat(arith.constant(f32, hi), x.shape, x.layout))
  elif src.bits <= 8 and src.is_float != dst.is_float:
    x = x.astype(f32, is_signed=None)
  return x.astype(dst_type, is_signed=dst.is_signed)


def _scalar_clamp(x: ir.Value, lo: float, hi: float) -> ir.Value:
  """max(min(x, hi), lo) in x's float type; NaN stays NaN (maximumf / minimumf propagate it)."""
  return arith.minimumf(arith.maximumf(x, arith.constant(x.type, lo)), arith.constant(x.type, hi))


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
    if _narrow_int(dst):            # clamp in float32 (exact bounds), as the tensors do
      if src != DType.f32:
        x = arith.extf(ir.F32Type.get(), x)
      x = _scalar_clamp(x, *int_range(dst))
    return (arith.fptosi if dst.is_signed else arith.fptoui)(dst_type, x)
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
