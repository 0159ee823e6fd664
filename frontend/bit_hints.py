"""Bit manipulation a kernel writes out itself, in the words of the call it replaces: a logical right shift of
a signed or 8-bit value (jnp.right_shift, lax.shift_right_logical), and where a population count or a count of
leading zeros is (libdevice's and lax's, probe 71b)."""
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


def bit_count_hint(name: str, x: str, d=None, shown=None) -> str:
  """The population count or count of leading zeros (`name`: "clz" or another count's name) of `x` (the operand as
  written, `d` its dtype where known): libdevice's intrinsic (an int32 count, CUDA's) or lax's (in x's dtype), which
  compute since probe 71b (this hint wrote their SWAR steps out before); of a float, its bits. `shown`: the name the
  kernel called (ml.<shown>), where not the intrinsic's."""
  clz = name == "clz"
  f, lax = ("clz", "clz") if clz else ("popc", "population_count")
  if d is not None and d.is_float:
    bits = "jnp.uint16" if d.bits == 16 else "jnp.uint32"
    return (f"{'clz' if clz else 'a population count'} counts an integer's bits: of {_operand(x)}'s bits,"
            f" jax.lax.{lax}(ml.bitcast({x}, {bits}))")
  zero = ", 32 for 0, 64 of an int64's 0" if clz else ""
  return (f"no ml.{shown or f}: libdevice's, ml.extra.cuda.libdevice.{f}({x}) (CUDA's __{f}: an int32 count{zero}), or"
          f" jax.lax.{lax}({x}) (the count in {_operand(x)}'s dtype)")


def lax_count_hint(attr: str, args) -> str:
  """The hint of a missing `ml.<attr>` bit count (ml.popc, ml.clz, Triton's and CUDA's names) called with `args` (as
  written, or None): bit_count_hint's calls, which compute (probes 71a-b; the hint was the SWAR steps written out)."""
  import re
  one = args is not None and len(args) == 1 and not re.match(r"\s*\w+\s*=[^=]", args[0])
  x = args[0].strip() if one else "x"
  clz = attr in ("clz", "count_leading_zeros", "clzll")
  return bit_count_hint("clz" if clz else "popc", x, shown=attr)
