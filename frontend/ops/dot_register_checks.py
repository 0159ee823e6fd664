"""`ml.dot`'s shape and dtype checks of register operands, in the user's words (probe 51f).

A register B (Triton's `tl.dot(q, tl.trans(k))` and `tl.dot(p, v)` of loaded tiles, the tutorials' attention) is
stored by the compiler into an SMEM buffer of its own (ops/dot_staging.py, ops/small_dots.py), a float32 register A
beside it too; the checks that follow in ops/mma.py name operands by the buffers they read, so a mistake in such a
call was reported in the compiler's words: `ml.dot of q (64, 64) and k_s (32, 64)` with the hint `k_s views a buffer
stored (k, n) = (64, 32): pass the buffer itself, ml.dot(q, the buffer)`, or a dtype mismatch whose hint allocated
the compiler's `v_s` anew. These checks run first, on the operands as the call wrote them, and their hints fix the
call: `ml.dot(q, k.T)`, `v` itself in place of `ml.trans(v)`, `p.to(jnp.float16)`.
"""
from __future__ import annotations

import ast

from .. import errors as E
from ..dtypes import DType
from ..types import RefType, TensorType, dtype_name, resolve
from .base import is_value
from ..loc import expr_of

_TRANSPOSES = ("ml.trans", "ml.transpose", "jnp.transpose", "tl.trans", "ml.permute", "jnp.permute_dims")


def _regs(x) -> bool:
  return is_value(x) and isinstance(x.type, TensorType) and len(x.type.shape) == 2


def _two_d(x) -> bool:
  return is_value(x) and isinstance(x.type, (TensorType, RefType)) and len(x.type.shape) == 2


def _text(cx, x, default) -> str:
  return cx.named(x, "") or x.name or default


def _acc_text(cx, acc) -> str:
  if acc is None:
    return ""
  t = cx.named(acc, "acc")
  return f", {t if len(t) <= 40 else 'acc'}"


def untransposed(text: str) -> str | None:
  """`v` of `ml.trans(v)`, `v.T`, `jnp.transpose(v)`, `ml.permute(v, (1, 0))`: the tensor a transpose reads, as
  written, or None where `text` is not a transpose of a name."""
  node = expr_of(text)
  if node is None:
    return None
  if isinstance(node, ast.Attribute) and node.attr == "T":
    inner = node.value
  elif isinstance(node, ast.Call) and ast.unparse(node.func) in _TRANSPOSES and node.args:
    inner = node.args[0]
  else:
    return None
  return ast.unparse(inner)


def converted(text: str, dtype) -> str:
  """`text` converted to `dtype` in the user's spelling: a conversion already there (`p.to(jnp.bfloat16)`,
  `p.astype(q.dtype)`) takes the new dtype in its place, Triton's `.to` kept as `.to`."""
  d = dtype_name(dtype)
  node = expr_of(text)
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "astype") \
      and len(node.args) == 1 and not node.keywords:
    return f"{ast.unparse(node.func.value)}.{node.func.attr}(jnp.{d})"
  simple = text.replace("_", "a").replace(".", "a").replace("[...]", "").isalnum()
  return f"{text if simple else f'({text})'}.astype(jnp.{d})"


def check_register_operands(cx, a, b, acc):
  """Inner dimensions of `a` (m, k) and `b` (k, n) where either is a register tensor the compiler stages into SMEM
  (checked before the staging, in the call's words)."""
  if not (_two_d(a) and _two_d(b) and (_regs(b) or _regs(a) and resolve(a.type.dtype) == DType.f32)):
    return
  (m, k), (k2, n) = a.type.shape, b.type.shape
  if k == k2:
    return
  an, bn = _text(cx, a, "a"), _text(cx, b, "b")
  tail = _acc_text(cx, acc)
  hint = f"a is (m, k) and b is (k, n): here a's k is {k}, b's rows {k2}"
  if _regs(b):
    inner = untransposed(bn)
    if inner is not None and n == k:
      hint = (f"{bn} is the transpose of {inner} {(n, k2)}, which is (k, n) already: pass {inner} itself,"
              f" ml.dot({an}, {inner}{tail})")
    elif n == k:
      b_t = f"{bn}.T" if bn.replace("_", "a").isalnum() else f"ml.trans({bn})"
      hint = (f"{bn} {(k2, n)} is (n, k), as a K tile loaded by rows is: pass its transpose, ml.dot({an}, {b_t}{tail})"
              f" (Triton's tl.trans; the compiler stores it into SMEM as it is and reads the transposed view)")
  elif m == k2 and isinstance(a.type, TensorType):
    hint = f"{an} {(m, k)} is (k, m): pass its transpose, ml.dot({an}.T, {bn}{tail})"
  raise E.ShapeMismatchError(
      f"ml.dot of {an} {(m, k)} and {bn} {(k2, n)}: inner dimensions differ", cx.loc, hint=hint)


def check_register_dtypes(cx, a, b, acc):
  """Both operands of one dtype, where `b` is a register tensor the compiler stores into SMEM: the hint converts
  in registers (a TMA copy does not convert; a register tile converts for free beside the staging)."""
  if not (_two_d(a) and _regs(b)):
    return
  da, db = resolve(a.type.dtype), resolve(b.type.dtype)
  if not (isinstance(da, DType) and isinstance(db, DType)) or da == db:
    return
  an, bn = _text(cx, a, "a"), _text(cx, b, "b")
  tail = _acc_text(cx, acc)
  a_regs = isinstance(a.type, TensorType)
  if db in (DType.f16, DType.bf16, DType.f32) and da.is_float and a_regs:
    fix = f"convert {an} to {dtype_name(db)} in registers: ml.dot({converted(an, db)}, {bn}{tail})"
  elif da in (DType.f16, DType.bf16, DType.f32) and (db.is_float or db.bits == 8):
    fix = f"convert {bn} to {dtype_name(da)} in registers: ml.dot({an}, {converted(bn, da)}{tail})"
  else:
    fix = (f"convert both to bfloat16 in registers: ml.dot({converted(an, DType.bf16) if a_regs else an},"
           f" {converted(bn, DType.bf16)}{tail})")
  raise E.DtypeMismatchError(
      f"ml.dot of {an} ({dtype_name(da)}) and {bn} ({dtype_name(db)}): both operands must have one dtype", cx.loc,
      hint=f"{fix} (the tensor cores multiply operands of one dtype; the compiler stores a register b into SMEM"
           f" for them)")
