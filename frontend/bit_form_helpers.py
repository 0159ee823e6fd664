"""Helpers in the kernel language for the integer bit intrinsics (libdevice_bits.py, probe 71b): counts, the
lowest set bit and bit reversal of uint32 words, and of int64 values (no uint64 here) as their two uint32 halves.
Traced at each call as a user's @ml.inline helper is; a step's mistake is reported at the call (jnp_calls.formula
reads this file's name as form_helpers.py's)."""
from . import language as ml


@ml.inline
def popc32(u):
  """The set bits of a uint32 `u` (SWAR), uint32."""
  v = u - ((u >> 1) & 0x55555555)
  v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
  return (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24


@ml.inline
def clz32(u):
  """The leading zero bits of a uint32 `u` (32 for 0), uint32: every bit below the highest set one smeared, then
  the set bits counted."""
  u = u | (u >> 1)
  u = u | (u >> 2)
  u = u | (u >> 4)
  u = u | (u >> 8)
  u = u | (u >> 16)
  return 32 - popc32(u)


@ml.inline
def ffs32(u):
  """CUDA's __ffs of a uint32 `u`: the position of its lowest set bit, counted from 1 (0 for 0), uint32."""
  return ml.where(u == 0, 0, popc32((u & (0 - u)) - 1) + 1)


@ml.inline
def brev32(u):
  """The bits of a uint32 `u` in reverse order (CUDA's __brev), uint32."""
  u = ((u >> 1) & 0x55555555) | ((u & 0x55555555) << 1)
  u = ((u >> 2) & 0x33333333) | ((u & 0x33333333) << 2)
  u = ((u >> 4) & 0x0F0F0F0F) | ((u & 0x0F0F0F0F) << 4)
  u = ((u >> 8) & 0x00FF00FF) | ((u & 0x00FF00FF) << 8)
  return (u >> 16) | (u << 16)


@ml.inline
def popc64(x):
  """The set bits of an int64 `x`'s 64 bits, uint32: its halves' counts summed."""
  return popc32((x >> 32).astype(ml.uint32)) + popc32(x.astype(ml.uint32))


@ml.inline
def clz64(x):
  """The leading zero bits of an int64 `x`'s 64 bits (64 for 0), uint32."""
  hi = (x >> 32).astype(ml.uint32)
  return ml.where(hi == 0, 32 + clz32(x.astype(ml.uint32)), clz32(hi))


@ml.inline
def ffs64(x):
  """CUDA's __ffsll of an int64 `x`: its lowest set bit's position from 1 (0 for 0), uint32."""
  lo = x.astype(ml.uint32)
  hi = ffs32((x >> 32).astype(ml.uint32))
  return ml.where(lo != 0, ffs32(lo), ml.where(hi != 0, hi + 32, 0))


@ml.inline
def brev64(x):
  """CUDA's __brevll of an int64 `x`: its 64 bits reversed, int64 (the low half's reversal the high word)."""
  return (brev32(x.astype(ml.uint32)).astype(ml.int64) << 32) | brev32((x >> 32).astype(ml.uint32)).astype(ml.int64)


@ml.inline
def byte_perm(u, w, s):
  """CUDA's __byte_perm(x, y, s) of uint32 words `u` (x's bytes 0-3) and `w` (y's, 4-7): byte i of the result is
  the byte the selector's nibble i names (its low three bits), uint32."""
  out = u - u
  for i in range(4):
    sel = (s >> (4 * i)) & 7
    byte = (ml.where(sel < 4, u, w) >> ((sel & 3) * 8)) & 0xFF
    out = out | (byte << (8 * i))
  return out


@ml.inline
def mul64hi(x, y):
  """CUDA's __mul64hi of int64 `x`, `y`: the high 64 bits of their signed 128-bit product, from the products of
  their unsigned 32-bit halves (int64 arithmetic wraps as uint64's would), less the signed product's correction;
  int64."""
  m = 0xFFFFFFFF
  x0, x1, y0, y1 = x & m, (x >> 32) & m, y & m, (y >> 32) & m
  p00, p01, p10 = x0 * y0, x0 * y1, x1 * y0
  mid = ((p00 >> 32) & m) + (p01 & m) + (p10 & m)
  hi = x1 * y1 + ((p01 >> 32) & m) + ((p10 >> 32) & m) + ((mid >> 32) & m)
  return hi - ml.where(x < 0, y, 0) - ml.where(y < 0, x, 0)
