"""Triton's operators whose meaning mgpu_dsl's differ from, in a kernel ported from Triton (probe 58d).

mgpu_dsl's `//` and `%` are Python's and jnp's: the quotient floored, the remainder of the divisor's sign. Triton's
are C's (`arith.divsi` / `remsi`, and `frem` for floats' `%`): the quotient truncated toward zero, the remainder of
the dividend's sign. Both agree where neither operand is negative, which is how ported kernels use them (`offs //
N`, `pid % GROUP`); elsewhere (`(offs - 1) // 2`, `idx % n` of ids read from memory) the port computes another
result than Triton's, silently. A kernel whose module imports the language as Triton's `tl` gets a
`TritonSemanticsWarning` at such an operator when the compiler cannot show both operands never negative (program
ids and counts, aranges, loop counters counting up from such a value, unsigned values, non-negative constants, and
sums, products, quotients, remainders, minima, maxima, shifts, ands and ors, broadcasts, reshapes and widening
conversions of those), naming both spellings: `lax.div` / `lax.rem` (`ml.fmod`) for Triton's, `jnp.floor_divide` /
`jnp.remainder` for jnp's, which say which is meant and warn no more. The operators keep jnp's meaning: a kernel
module that imports the language as `ml` is jnp's and Pallas's, and one whose values cannot be negative is both."""
from __future__ import annotations

import ast

from . import errors as E
from .dtypes import DType
from .types import ScalarType, TensorType, resolve


class _NotGiven:
  """A keyword the call left out (Triton's `dim=`, whose None means the last axis), shown as None in signatures."""
  def __repr__(self):
    return "None"


NOT_GIVEN = _NotGiven()


def _language(v) -> bool:
  return getattr(v, "__name__", None) in ("mgpu_dsl.language", "mgpu_dsl.frontend.language")


def is_triton_port(scope) -> bool:
  """Whether the kernel's module names the language `tl` (`from mgpu_dsl import language as tl`): Triton's habit."""
  return isinstance(scope, dict) and _language(scope.get("tl"))


def never_negative(b, v, depth: int = 0) -> bool:
  """Whether `v` (a number, or a register scalar or tensor) is at least 0 in every element and program."""
  from .ops.control import MultipleOf, NumPrograms, ProgramId
  from .ops.elementwise_ops import Arange, BinOp, Binary, Cast, Constant, Full, Unary, UnOp, Where
  from .ops.shape import Broadcast, Reshape
  if isinstance(v, bool):
    return True
  if isinstance(v, (int, float)):
    return v >= 0
  if depth > 12 or not isinstance(getattr(v, "type", None), (ScalarType, TensorType)):
    return False
  d = resolve(v.type.dtype)
  if not isinstance(d, DType):
    return False
  if d.is_int and not d.is_signed or d == DType.bool_ or v.id in getattr(b, "nonneg_scalars", ()):
    return True
  if v.id in b.counts_from:
    return never_negative(b, b.counts_from[v.id], depth + 1)
  o = b.defining(v)
  up = lambda x: never_negative(b, x, depth + 1)
  if isinstance(o, (ProgramId, NumPrograms, Arange)):
    return True
  if isinstance(o, Constant):
    return not isinstance(o.value, (int, float)) or o.value >= 0
  if isinstance(o, (MultipleOf, Broadcast, Reshape)):
    return up(o.x)
  if isinstance(o, Full):
    return up(o.value)
  if isinstance(o, Cast):
    src = resolve(o.x.type.dtype)
    widens = isinstance(src, DType) and (src.is_float or src == DType.bool_ or src.is_signed and src.bits <= d.bits
                                         or not src.is_signed and src.bits < d.bits)
    return not o.bitcast and widens and up(o.x)
  if isinstance(o, Unary):
    return o.kind == UnOp.ABS and d.is_float
  if isinstance(o, Where):
    return up(o.on_true) and up(o.on_false)
  if isinstance(o, Binary):
    if o.kind in (BinOp.ADD, BinOp.MUL, BinOp.FLOORDIV, BinOp.MOD, BinOp.MIN, BinOp.SHR, BinOp.AND, BinOp.OR,
                  BinOp.DIV):
      return up(o.lhs) and up(o.rhs)
    if o.kind == BinOp.MAX:
      return up(o.lhs) or up(o.rhs)
  return False


def check_division(tracer, node, op, result) -> None:
  """The TritonSemanticsWarning of `a // b` or `a % b` (`node`, an ast.BinOp or AugAssign; `result` what it
  computed) in a Triton port, where an operand may be negative (see the module's docstring): kept in the builder,
  and issued by `warn_divisions` once the grid evaluation has said which scalars are never negative."""
  from .ops.elementwise_ops import BinOp, Binary
  b = tracer.b
  o = b.defining(result) if getattr(result, "type", None) is not None else None
  if not isinstance(o, Binary) or o.kind not in (BinOp.FLOORDIV, BinOp.MOD) or not is_triton_port(tracer.scope) \
      or hasattr(node, "mgpu_shown"):        # (a composed form's operator, jnp_calls.trace_form: jnp's by name)
    return
  d = resolve(result.type.dtype)
  if not isinstance(d, DType) or not (d.is_int and d.is_signed or d.is_float and op is ast.Mod):
    return
  if never_negative(b, o.lhs) and never_negative(b, o.rhs):
    return
  left, right = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
  wrap = lambda t: f"({t})" if any(ch in t for ch in " +-*/%<>&|^~") and not t.startswith("(") else t
  b.triton_divisions = getattr(b, "triton_divisions", [])
  b.triton_divisions.append((o, wrap(tracer.text(left)), wrap(tracer.text(right)), op, d, tracer.loc(node)))


def warn_divisions(b, nonneg_scalars) -> None:
  """The TritonSemanticsWarnings of the divisions `check_division` kept, each issued unless the grid evaluation
  knew the scalars it stands on non-negative in every program and trip (`nonneg_scalars`, frontend/checks.py:
  `min(num_pid_m - first_pid_m, GROUP_M)` of Triton's grouped tile order is a count, `K - k * BK` of a k loop a
  remainder; probe 62d), as it knows program ids and aranges while tracing."""
  b.nonneg_scalars = nonneg_scalars
  try:
    for o, a, c, op, d, loc in getattr(b, "triton_divisions", ()):
      if never_negative(b, o.lhs) and never_negative(b, o.rhs):
        continue
      signed = " or ".join(t for t, v in ((a, o.lhs), (c, o.rhs)) if not never_negative(b, v))   # (what may be <0)
      if op is ast.FloorDiv:
        said = (f"{a} // {c} floors, as Python's and jnp's (-7 // 2 is -4); Triton's // truncates toward zero (-3),"
                f" so where {signed} is negative this port computes another quotient than Triton's")
        hint = (f"for Triton's quotient write lax.div({a}, {c}) (from jax import lax); for the floor, say so:"
                f" jnp.floor_divide({a}, {c})")
      else:
        what = "-7 % 2 is 1" if d.is_int else "-7.5 % 2.0 is 0.5"
        theirs = "-1" if d.is_int else "-1.5"
        said = (f"{a} % {c} takes the divisor's sign, as Python's and jnp's ({what}); Triton's % takes the"
                f" dividend's ({theirs}: C's remainder), so where {signed} is negative this port computes another"
                f" remainder than Triton's")
        hint = (f"for Triton's remainder write tl.fmod({a}, {c}) (C's, lax.rem's); for the divisor's sign, say so:"
                f" jnp.remainder({a}, {c})")
      E.warn(E.KernelError(said, loc, hint=hint + "; or silence this with warnings.filterwarnings('ignore',"
                                                  " category=mg.TritonSemanticsWarning)"),
             category=E.TritonSemanticsWarning)
  finally:
    b.triton_divisions = []


def flip_warning(cx, text: str, rank: int) -> None:
  """The TritonSemanticsWarning of `tl.flip(v)` (no axis) of a tensor of `rank` >= 2 in a Triton port: jnp.flip's
  every axis here, Triton's last axis there."""
  every = ", ".join(str(a) for a in range(rank))
  E.warn(E.KernelError(
      f"tl.flip({text}) flips every axis of the {rank}-D tensor, as jnp.flip; Triton's tl.flip({text}) flips the last"
      f" axis only, so this port computes another result than Triton's", cx.loc,
      hint=f"for Triton's, name the axis: tl.flip({text}, {rank - 1}) (or dim=None, Triton's keyword); for every"
           f" axis, say so: tl.flip({text}, axis=({every}))"),
         category=E.TritonSemanticsWarning)
