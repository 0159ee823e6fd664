"""Bit manipulation a kernel writes out itself, in the words of the call it replaces: a logical right shift of
a signed or 8-bit value (jnp.right_shift, lax.shift_right_logical), and the SWAR forms of a population count or a
count of leading zeros (no such instruction here)."""
from __future__ import annotations

from .formula_hints import operand as _operand


def _logical_shift(x: str, n: str, d) -> str:
  """`x` (as written, of integer dtype `d`) shifted right logically by `n` (an operand as written), in
  what a kernel offers: >> is logical on unsigned types and arithmetic on signed ones, so a signed
  value goes through its unsigned twin; 8-bit values through int32 (no 8-bit shifts); int64, which
  has no unsigned twin, clears the top n bits that >> filled with its sign."""
  from .missing import _const
  ox = _operand(x)
  if d.bits == 8:
    if not d.is_signed:
      return f"({ox}.astype(jnp.int32) >> {n}).astype(jnp.uint8)"
    return f"(ml.bitcast({x}, jnp.uint8).astype(jnp.int32) >> {n}).astype(jnp.int8)"
  if not d.is_signed:
    return f"{ox} >> {n}"
  if d.bits == 64:
    k = _const(n)
    if isinstance(k, int) and 0 < k < 64:
      return f"({ox} >> {n}) & {hex((1 << (64 - k)) - 1)}"
    return f"({ox} >> {n}) & ~((ml.full({ox}.shape, -2 ** 63, jnp.int64) >> {n}) << 1)"
  return f"ml.bitcast(ml.bitcast({x}, jnp.uint{d.bits}) >> {n}, jnp.int{d.bits})"


_POPCOUNT = ("v = u - ((u >> 1) & 0x55555555); v = (v & 0x33333333) + ((v >> 2) & 0x33333333);"
             " count = (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24")
_SMEAR = "u = u | (u >> 1); u = u | (u >> 2); u = u | (u >> 4); u = u | (u >> 8); u = u | (u >> 16)"


def _as_uint32(x: str, d) -> str:
  """`x` (as written, of integer dtype `d`, None if unknown) as a uint32 of its bits, zero-extended."""
  if d is None or d.bits == 32:
    return _operand(x) if d is not None and not d.is_signed else f"ml.bitcast({x}, jnp.uint32)"
  return (f"{_operand(x)}.astype(jnp.uint32)" if not d.is_signed else
          f"ml.bitcast({x}, jnp.uint{d.bits}).astype(jnp.uint32)")


def bit_count_hint(name: str, x: str, d=None) -> str:
  """No population count or count of leading zeros instruction: the SWAR forms on a uint32 `u`
  (`x`: the operand as written, `d` its integer dtype where known)."""
  clz = name == "clz"
  what = "clz" if clz else "population count"
  steps = f"{_SMEAR} (every bit below the highest one set); {_POPCOUNT}" if clz else _POPCOUNT
  if d is not None and d.bits == 64:
    ox = _operand(x)
    halves = f"hi = ({ox} >> 32).astype(jnp.uint32), lo = ({ox} & 0xFFFFFFFF).astype(jnp.uint32)"
    how = ("clz = ml.where(hi == 0, 32 + that of lo, that of hi), each 32 - count" if clz else
           "the sum of both counts")
    return f"no {what} here: {halves}; for each as u, {steps}; {how}"
  width = d.bits if d is not None and d.bits < 32 else 32
  tail = f"; clz = {width} - count" if clz else ""
  return f"no {what} here: u = {_as_uint32(x, d)}; {steps}{tail}"


def lax_count_hint(attr: str, args) -> str:
  """The hint of a missing `ml.<attr>` bit count (ml.popc, ml.clz, Triton's and CUDA's names) called with `args` (as
  written, or None): lax's function of the same meaning, which kernels compute for 8- to 32-bit integers (probe 71a;
  the hint was the SWAR steps `bit_count_hint` writes, which lax.population_count computes)."""
  import re
  one = args is not None and len(args) == 1 and not re.match(r"\s*\w+\s*=[^=]", args[0])
  x = args[0].strip() if one else "x"
  clz = attr in ("clz", "count_leading_zeros")
  fn = "clz" if clz else "population_count"
  cuda = "__clz" if clz else "__popc"
  return (f"no ml.{attr}: jax.lax.{fn}({x}) (of 8- to 32-bit integers, in their dtype, as CUDA's {cuda};"
          f" Triton's libdevice.{'clz' if clz else 'popc'} is the same)")
