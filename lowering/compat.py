"""What differs between jax 0.10.2 (CPU machines) and 0.11.2 (the H200), and small
arithmetic helpers Mosaic GPU does not provide for scalars."""
from __future__ import annotations

from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, math as mlir_math

from ..frontend.dtypes import DType


def array_sqrt(x):
  if hasattr(fa.FragmentedArray, "sqrt"):      # 0.11.2
    return x.sqrt()
  return x._pointwise(mlir_math.sqrt)           # 0.10.2 has no FragmentedArray.sqrt


def array_cast(x, src: DType, dst: DType, dst_type: ir.Type):
  # Mosaic GPU refuses float <-> float conversions between two narrow types
  # (f16 <-> bf16, f8 <-> 16-bit on some PTX versions); f32 is always a bridge.
  if src.is_float and dst.is_float and DType.f32 not in (src, dst):
    x = x.astype(ir.F32Type.get())
  elif src.bits <= 8 and src.is_float != dst.is_float:
    x = x.astype(ir.F32Type.get(), is_signed=None)
  return x.astype(dst_type, is_signed=dst.is_signed)


def scalar_cast(x: ir.Value, src: DType, dst: DType, dst_type: ir.Type) -> ir.Value:
  if src == dst:
    return x
  if src.is_float and dst.is_float:
    return arith.extf(dst_type, x) if dst.bits > src.bits else arith.truncf(dst_type, x)
  if src.is_float:
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
  return {"exp": mlir_math.exp, "exp2": mlir_math.exp2, "log": mlir_math.log, "log2": mlir_math.log2,
          "sqrt": mlir_math.sqrt, "rsqrt": mlir_math.rsqrt, "tanh": mlir_math.tanh,
          "sin": mlir_math.sin, "cos": mlir_math.cos, "erf": mlir_math.erf}[kind](x)
