"""Triton's `tl.dot` keywords on `ml.dot`: `out_dtype` (the accumulator's dtype), `input_precision`
and `allow_tf32` (float32 operands are read as TF32, Triton's default; its IEEE and 3xTF32 modes
are not the tensor cores'), `max_num_imprecise_acc` (None only)."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import resolve
from .base import dtype_arg, is_value, shown

_SPLIT = ("split each float32 operand into its TF32 part and the rest, hi = ml.bitcast(ml.bitcast(x, jnp.uint32) &"
          " 0xFFFFE000, jnp.float32) and lo = x - hi, each stored in its own SMEM buffer, and add the three dots"
          " ml.dot(a_hi, b_hi) + ml.dot(a_hi, b_lo) + ml.dot(a_lo, b_hi) (Triton's tf32x3, about float32's accuracy)")


def check_dot_options(cx, a, b, acc, out_dtype, input_precision, allow_tf32, max_num_imprecise_acc):
  """`out_dtype` as a DType (or None); an error for the options the tensor cores cannot honour."""
  if out_dtype is not None:
    out_dtype = dtype_arg(cx, out_dtype, "ml.dot's out_dtype")
    have = resolve(acc.type.dtype) if is_value(acc) else None
    if isinstance(have, DType) and have != out_dtype:
      raise E.KernelTypeError(
          f"ml.dot's out_dtype={out_dtype} differs from its acc's dtype ({have}): the product accumulates in"
          f" acc's dtype", cx.loc, hint=f"drop out_dtype (the result is {have}), or convert after the dot:"
                                        f" ml.dot(a, b, acc).astype(jnp.{out_dtype})")
  if input_precision is not None and not isinstance(input_precision, str):
    raise E.KernelTypeError(f"ml.dot's input_precision must be a string, got {shown(input_precision)}", cx.loc,
                            hint='input_precision="tf32" (the default), or leave it out')
  if allow_tf32 is not None and not isinstance(allow_tf32, bool):
    raise E.KernelTypeError(f"ml.dot's allow_tf32 must be True or False, got {allow_tf32!r}", cx.loc,
                            hint="leave it out (float32 operands are read as TF32)")
  ieee = (input_precision or "tf32").lower() != "tf32" or allow_tf32 is False
  f32 = any(is_value(v) and resolve(v.type.dtype) == DType.f32 for v in (a, b))
  if ieee and f32:
    what = f'input_precision="{input_precision}"' if input_precision else "allow_tf32=False"
    raise E.UnsupportedDtypeError(
        f"ml.dot with {what}: the tensor cores read float32 operands as TF32 (10 mantissa bits), Triton's"
        f' default input_precision="tf32"', cx.loc, hint=f"drop {what} for TF32; for more precision, {_SPLIT}")
  if max_num_imprecise_acc is not None:
    raise E.KernelTypeError(
        f"ml.dot's max_num_imprecise_acc={max_num_imprecise_acc!r} is not supported: Hopper's float8 dots add"
        f" their products with fewer mantissa bits than float32 (see the docs' Tensor cores table)", cx.loc,
        hint="drop it; for long k, sum partial dots of a few k steps each in a float32 register accumulator:"
             " acc = acc + ml.dot(a_s, b_s.T)")
  return out_dtype
