"""The hints of integer arithmetic's mistakes, written out in the user's operands: divisors and
shift amounts that can be out of range (every lane computes, also one a select discards), Python
ints that fit only uint32, and Triton's pointer arithmetic."""
from __future__ import annotations

from ..dtypes import DType


def unsigned_hint(value, dtype, name, op, value_right=True):
  """The hint for a signed integer meeting a Python int that fits only uint32 (Knuth's hash
  `ids * 2654435761`, a mask `x & 0xFFFFFFFF`): compute in uint32; None for other cases."""
  if not (isinstance(value, int) and 2 ** 31 <= value < 2 ** 32 and isinstance(dtype, DType) and dtype.is_int
          and dtype not in (DType.u32, DType.i64) and op in ("+", "-", "*", "&", "|", "^")):
    return None
  x = name if name.replace("[...]", "").replace(".", "").replace("_", "").isalnum() else f"({name})"
  u = f"{x}.astype(jnp.uint32)"
  expr = f"{u} {op} {value}" if value_right else f"{value} {op} {u}"
  return (f"{value} fits uint32: compute in uint32, {expr} (int32's bits unchanged, as jnp converts; .astype(jnp.int32)"
          f" converts back)")


def int64_hint(value, dtype, name, op, value_right=True):
  """The hint for an integer value meeting a Python int past 32 bits (`i % 2**32`, `t // 10**10`):
  compute in int64, which takes 64-bit constants (a float would fail for //, % and bitwise ops,
  and round for the others); None where it does not apply."""
  ops = ("+", "-", "*", "//", "%", "&", "|", "^", "<", "<=", ">", ">=", "==", "!=")
  if not (isinstance(value, int) and not isinstance(value, bool) and -2 ** 63 <= value < 2 ** 63
          and isinstance(dtype, DType) and dtype.is_int and dtype != DType.i64 and op in ops):
    return None
  x = name if name.replace("[...]", "").replace(".", "").replace("_", "").isalnum() else f"({name})"
  w = f"{x}.astype(jnp.int64)"
  expr = f"{w} {op} {value}" if value_right else f"{value} {op} {w}"
  return f"compute in int64, which holds {value}: {expr} (then .astype(...) back to the type you store)"


def pointer_hint(name, off) -> str:
  """What Triton's `ptr + offsets` becomes: the window the offsets cover (start + ml.arange(n)),
  for a load, a store and an atomic; any other offsets index the ref (a gather)."""
  n = off.type.shape[-1] if len(off.type.shape) == 1 else None
  w = f"{name}.at[ml.ds(start, {n})]" if n else f"{name}.at[ml.ds(start, n)]"
  return (f"for offsets start + ml.arange({n or 'n'}), take the window they cover: load {w}.load(mask=mask,"
          f" other=0.0), store ml.store({w}, value, mask=mask), atomics ml.atomic_add({w}, value); other"
          f" offsets index it, {name}[offsets] (a gather); to add to {name}'s values, read it first: {name}[...] + ...")


def divisor_guard(x: str, op: str, d: str, call: str = "") -> str:
  """How to divide `x` by a `d` that can be 0 (with `op`, or the builtin `call`: ml.cdiv): every
  lane divides (integer division by zero is undefined even where a select discards it), so the
  zeros are replaced first."""
  safe = f"ml.where({d} == 0, 1, {d})"
  q = f"{call}({x}, {safe})" if call else f"{x} {op} {safe}"
  return (f"a divisor that can be 0 must be replaced where it is: ml.where({d} == 0, 0, {q})"
          f" (the outer ml.where sets the lanes where {d} == 0, to 0 or the value you want)")


def shift_guard(x: str, op: str, s: str, d, negative: bool) -> str:
  """How to shift `x` by amounts `s` some of which lie outside 0..bits-1: every lane shifts
  (an out-of-range shift is undefined even where a select discards it), so the amount is clamped
  first; jnp gives 0 beyond the width, or the sign fill for >> of a signed type."""
  top = d.bits - 1
  amount = f"ml.clip({s}, 0, {top})" if negative else f"ml.minimum({s}, {top})"
  ok = f"({s} >= 0) & ({s} < {d.bits})" if negative else f"{s} < {d.bits}"
  guarded = f"ml.where({ok}, {x} {op} {amount}, 0)"
  if op == ">>" and d.is_signed and not negative:
    return (f"clamp the amount: {x} >> {amount} (amounts of {d.bits} or more then give the sign fill, as jnp's"
            f" >>), or {guarded} for 0 there")
  jnp_zero = op == "<<" or not d.is_signed        # (jnp's >> of a signed type fills with the sign)
  return (f"clamp the amount and set the lanes it was out of range in: {guarded}"
          f" ({'0 there, as jnp gives' if jnp_zero else 'or the value you want there'})")


