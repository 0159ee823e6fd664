"""Hints for the narrow formats quantised kernels meet that kernels have no dtype for: int4/uint4 and
float4_e2m1fn (two a byte: pack them into uint8), and float8_e8m0fnu (MX block scales: a biased
power-of-two exponent, the bits of a uint8)."""
from __future__ import annotations

_NIBBLES = ("int4", "uint4", "float4_e2m1fn")


def packed_hint(name: str | None, where: str, ref: str = "x") -> str | None:
  """`where`: "output" (an out_shape leaf), "input" (an argument) or "cast" (.astype in a kernel)."""
  if name in _NIBBLES:
    if where == "output":
      return (f"{name} packs two values a byte: make the output uint8 with half the last dimension, each byte"
              f" (hi << 4) | (lo & 0xF) of two values in int32 (element 2k in the low nibble), and view it"
              f" outside the kernel: jax.lax.bitcast_convert_type(y, jnp.{name}).reshape(shape)")
    if where == "input":
      return (f"{name} packs two values a byte: pass jax.lax.bitcast_convert_type({ref}.reshape(*{ref}.shape[:-1],"
              f" -1, 2), jnp.uint8) for it (element 2k in the low nibble) and unpack in the kernel: b ="
              f" {ref}[...].astype(jnp.int32), then b & 0xF and b >> 4"
              + (" (signed: (b << 28) >> 28 and (b << 24) >> 28)" if name == "int4" else ""))
    return (f"{name} is not a kernel dtype: keep the values in int32 and pack two a byte into a uint8"
            f" output, ((hi << 4) | (lo & 0xF)).astype(jnp.uint8)")
  if name in ("complex64", "complex128") and where == "cast":       # (probe 72b)
    return ("hold a complex value as its real and imaginary parts, two float32 tensors (a real x is (x,"
            " ml.zeros_like(x))), and write their products out: (ar * br - ai * bi, ar * bi + ai * br)")
  if name == "float8_e8m0fnu":
    if where == "output":
      return ("float8_e8m0fnu is a power of two's biased exponent: make the output uint8, e = ((ml.bitcast(s,"
              " jnp.uint32) >> 23) & 0xFF).astype(jnp.uint8) of a float32 power of two s, and view it outside"
              " the kernel: jax.lax.bitcast_convert_type(y, jnp.float8_e8m0fnu)")
    if where == "input":
      return (f"float8_e8m0fnu is a power of two's biased exponent: pass jax.lax.bitcast_convert_type({ref},"
              f" jnp.uint8) for it and rebuild the float32 scale in the kernel, ml.bitcast({ref}[...].astype(jnp.uint32)"
              f" << 23, jnp.float32) (exponents 1 to 254; 255 is NaN)")
    return ("float8_e8m0fnu is not a kernel dtype: compute the exponent as an integer, (ml.bitcast(s, jnp.uint32)"
            " >> 23) & 0xFF of a float32 power of two s, and store it as uint8")
  return None
