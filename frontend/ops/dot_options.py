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
  implied = _check_precision(cx, a, b, precision)
  if implied is not None:         # a DotAlgorithmPreset's accumulation type (F16_F16_F16: float16)
    have = out_dtype or (resolve(acc.type.dtype) if is_value(acc) else None)
    if isinstance(have, DType) and have != implied:
      raise E.KernelTypeError(
          f"ml.dot's precision={_shown_precision(precision)} accumulates in {implied}, but its"
          f" {'acc' if out_dtype is None else word} is {have}", cx.loc,
          hint=f"drop precision= (the accumulator's dtype says how the product accumulates), or accumulate in"
               f" {implied}: preferred_element_type=jnp.{implied}")
    if have is None:
      out_dtype = implied
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


# jax.lax.DotAlgorithmPreset's names the tensor cores honour: (the operand dtype they read, the
# accumulator's dtype, None for any the dot takes); "f8" is either float8 type
_PRESETS = {
    "f16_f16_f32": (DType.f16, DType.f32), "f16_f16_f16": (DType.f16, DType.f16),
    "bf16_bf16_f32": (DType.bf16, DType.f32), "tf32_tf32_f32": (DType.f32, DType.f32),
    "any_f8_any_f8_f32": ("f8", DType.f32), "any_f8_any_f8_f32_fast_accum": ("f8", DType.f32),
    "any_f8_any_f8_any": ("f8", None), "any_f8_any_f8_any_fast_accum": ("f8", None),
}
# ... and those that ask for more than the tensor cores read or add in
_NOT_PRESETS = {
    "bf16_bf16_f32_x3": "float32 operands as three bfloat16 products", "bf16_bf16_f32_x6": "float32 operands as"
    " six bfloat16 products", "bf16_bf16_f32_x9": "float32 operands as nine bfloat16 products",
    "tf32_tf32_f32_x3": "float32 operands as three TF32 products", "f32_f32_f32": "float32 operands exactly",
    "bf16_bf16_bf16": "a bfloat16 accumulator", "f64_f64_f64": "float64",
}


def _shown_precision(precision) -> str:
  """`precision` as the kernel wrote it: lax.DotAlgorithmPreset.F16_F16_F32 is shown by its name."""
  if type(precision).__name__ == "DotAlgorithmPreset":
    return f"DotAlgorithmPreset.{precision.name}"
  return shown(precision)


def _check_preset(cx, a, b, name, precision):
  """A jax.lax.DotAlgorithmPreset (or its name): the accumulator dtype it asks for (None: the dot's own),
  or an error where its operand type is not the operands' or it asks for more than the tensor cores do."""
  dts = [resolve(v.type.dtype) for v in (a, b) if is_value(v) and hasattr(v.type, "dtype")]
  what = _shown_precision(precision)
  if name in _NOT_PRESETS:
    f32 = DType.f32 in dts
    raise E.UnsupportedDtypeError(
        f"ml.dot with precision={what}: it asks for {_NOT_PRESETS[name]}, which the tensor cores do not compute"
        f" (they read float32 operands as TF32 and 16- and 8-bit ones exactly, and add in float32, or float16"
        f" for 16- and 8-bit float operands)", cx.loc,
        hint=("drop precision=: bfloat16 products accumulate in float32; convert the result, .astype(jnp.bfloat16),"
              " where a bfloat16 one is wanted" if name == "bf16_bf16_bf16" else
              "drop precision= for what they do" + (f"; for more precision, {_SPLIT}" if f32 else "")))
  want, acc = _PRESETS[name]
  ok = (lambda d: isinstance(d, DType) and d.is_float and d.bits == 8) if want == "f8" else (lambda d: d == want)
  bad = next((v for v in (a, b) if is_value(v) and hasattr(v.type, "dtype") and isinstance(
      resolve(v.type.dtype), DType) and not ok(resolve(v.type.dtype))), None)
  if bad is not None:
    reads = "float8" if want == "f8" else "TF32 (float32)" if want == DType.f32 else str(want)
    d = resolve(bad.type.dtype)
    raise E.KernelTypeError(
        f"ml.dot's precision={what} multiplies {reads} operands, but {cx.named(bad, 'an operand')} is {d}", cx.loc,
        hint=f"drop precision=: the tensor cores read {d} operands " + ("as TF32" if d == DType.f32 else "exactly")
             + f" (or convert the operands to {reads.split(' ')[0]} before the call)")
  return acc


def _check_precision(cx, a, b, precision):
  """JAX's `precision=` (a lax.Precision, its name, or a pair of them; or a lax.DotAlgorithmPreset, or its
  name): the tensor cores read float32 operands as TF32 (lax.Precision.DEFAULT's meaning on the GPU), and
  8- and 16-bit ones exactly. Returns the accumulator's dtype a preset asks for (None: the dot's own)."""
  if precision is None:
    return None
  if not isinstance(precision, (tuple, list)):
    name = str(getattr(precision, "name", precision)).lower()
    if name in _PRESETS or name in _NOT_PRESETS:
      return _check_preset(cx, a, b, name, precision)
  parts = precision if isinstance(precision, (tuple, list)) else (precision,)
  names = [str(getattr(p, "name", p)).lower() for p in parts if p is not None]
  known = ("default", "fastest", "high", "bfloat16", "tensorfloat32", "bfloat16_3x") + _FULL_F32
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
