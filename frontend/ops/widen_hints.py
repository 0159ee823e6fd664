"""The hint for a 16-bit float sum stored or added into a float32 ref: sum in float32 (`ml.sum(v,
dtype=jnp.float32)`), where `.astype(jnp.float32)` of the result would keep its 16-bit rounding, or, for a loop
that carried a Python 0.0 plus 16-bit sums, which rounds at every trip, add float32 sums."""
from __future__ import annotations

import ast

from ..dtypes import DType
from ..types import resolve
from ..loc import expr_of

_NARROW = {DType.bf16: "bfloat16", DType.f16: "float16"}


def _sum_in_f32(text: str, dtype: str = "float32") -> str | None:
  """`ml.sum(v, axis=1)` (or `v.sum()`) as written, with dtype=jnp.float32 (`dtype`) added; None for other text."""
  e = expr_of(text)
  if e is None:
    return None
  if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "sum"
          and not any(k.arg == "dtype" for k in e.keywords) and len(e.args) <= (2 if _on_ml(e) else 1)):
    return None
  text = text.strip()
  return f"{text[:-1]}{', ' if e.args or e.keywords else ''}dtype=jnp.{dtype})"


def _on_ml(call) -> bool:
  return isinstance(call.func.value, ast.Name) and call.func.value.id == "ml"


def widen_hint(cx, value, dtype) -> str | None:
  """What to write where `value` (16-bit float) meets a float32 ref `dtype`, if it is a sum or a loop carry; or where
  a sum of 32-bit or narrower integers meets an int64 ref under jax_enable_x64 (jnp's sum is int64 there)."""
  d = resolve(value.type.dtype)
  if resolve(dtype) == DType.i64 and isinstance(d, DType) and d.is_int and d.bits <= 32 and cx.b.x64:
    fixed = _sum_in_f32(cx.named(value, ""), "int64")      # a sum of int32 into int64 (jnp's, under x64)
    return None if fixed is None else (
        f"sum in int64: {fixed} (jnp under jax_enable_x64 sums {d.value} in int64; a kernel's sum of {d.value} is"
        f" {d.value}, and .astype(jnp.int64) of it keeps its {d.value} wraparound)")
  narrow = _NARROW.get(d)
  if narrow is None or resolve(dtype) != DType.f32:
    return None
  text = cx.named(value, "")
  fixed = _sum_in_f32(text)
  if fixed is not None:
    return (f"sum in float32: {fixed} (a sum of {narrow} is {narrow}, as jnp's, and .astype(jnp.float32) of it"
            f" keeps its {narrow} rounding)")
  if type(cx.b.defining(value)).__name__ in ("For", "While") and text.isidentifier():
    return (f"{text} is carried through the loop in {narrow} (a Python number plus {narrow} sums is {narrow}, as in"
            f" jnp), so every trip rounds it to {narrow}: add float32 sums, ml.sum(..., dtype=jnp.float32), to a"
            f" float32 start, {text} = ml.full((), 0.0, jnp.float32)")
  return None
