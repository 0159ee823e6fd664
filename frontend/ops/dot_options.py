"""Triton's `tl.dot` keywords on `ml.dot`: `out_dtype` (the accumulator's dtype), `input_precision`
and `allow_tf32` (float32 operands are read as TF32, Triton's default; its IEEE and 3xTF32 modes
are not the tensor cores'), `max_num_imprecise_acc` (None only); and JAX's: `preferred_element_type`
(jnp.dot's and lax.dot_general's name of `out_dtype`, as a Pallas kernel writes it) and `precision`."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import resolve
from .base import dtype_arg, is_value, shown

_SPLIT = ("split each float32 operand into its TF32 part and the rest, hi = ml.bitcast(ml.bitcast(x, jnp.uint32) &"
          " 0xFFFFE000, jnp.float32) and lo = x - hi, each stored in its own SMEM buffer, and add the three dots"
          " ml.dot(a_hi, b_hi) + ml.dot(a_hi, b_lo) + ml.dot(a_lo, b_hi) (Triton's tf32x3, about float32's accuracy)")


# jax.lax.Precision's names (and the strings JAX takes) that ask float32 operands for more than TF32
_FULL_F32 = ("highest", "float32")


def check_dot_options(cx, a, b, acc, out_dtype, input_precision, allow_tf32, max_num_imprecise_acc,
                      preferred_element_type=None, precision=None):
  """`out_dtype` as a DType (or None); an error for the options the tensor cores cannot honour."""
  word = "out_dtype"
  if preferred_element_type is not None:
    pet = dtype_arg(cx, preferred_element_type, "ml.dot's preferred_element_type")
    if out_dtype is not None and dtype_arg(cx, out_dtype, "ml.dot's out_dtype") != pet:
      raise E.KernelTypeError(
          f"ml.dot got out_dtype={dtype_arg(cx, out_dtype, 'out_dtype')} and preferred_element_type={pet}: they"
          f" name the same thing, the accumulator's dtype", cx.loc, hint="pass one of them")
    out_dtype, word = pet, "preferred_element_type"
  if out_dtype is not None:
    out_dtype = dtype_arg(cx, out_dtype, f"ml.dot's {word}")
    have = resolve(acc.type.dtype) if is_value(acc) else None
    if isinstance(have, DType) and have != out_dtype:
      raise E.KernelTypeError(
          f"ml.dot's {word}={out_dtype} differs from its acc's dtype ({have}): the product accumulates in"
          f" acc's dtype", cx.loc, hint=f"drop {word} (the result is {have}), or convert after the dot:"
                                        f" ml.dot(a, b, acc).astype(jnp.{out_dtype})")
  _check_precision(cx, a, b, precision)
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


def _check_precision(cx, a, b, precision):
  """JAX's `precision=` (a lax.Precision, its name, or a pair of them): the tensor cores read float32
  operands as TF32 (lax.Precision.DEFAULT's meaning on the GPU), and 8- and 16-bit ones exactly."""
  if precision is None:
    return
  parts = precision if isinstance(precision, (tuple, list)) else (precision,)
  names = [str(getattr(p, "name", p)).lower() for p in parts if p is not None]
  known = ("default", "fastest", "high", "bfloat16", "tensorfloat32") + _FULL_F32
  bad = next((n for n in names if n not in known), None)
  if bad is not None:
    raise E.KernelTypeError(f"ml.dot's precision={shown(precision)} is not one of jax.lax.Precision's", cx.loc,
                            hint="leave precision out (float32 operands are read as TF32, 16- and 8-bit ones"
                                 " exactly)")
  f32 = any(is_value(v) and resolve(v.type.dtype) == DType.f32 for v in (a, b))
  if f32 and any(n in _FULL_F32 for n in names):
    raise E.UnsupportedDtypeError(
        f"ml.dot with precision={shown(precision)}: the tensor cores read float32 operands as TF32 (10 mantissa"
        f" bits), lax.Precision.DEFAULT's meaning on the GPU", cx.loc,
        hint=f"drop precision for TF32; for more precision, {_SPLIT}")
