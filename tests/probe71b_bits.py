"""Probe 71b's corpus, its third part: bit manipulation as CUDA intrinsics and Triton's libdevice name it and as
jnp / lax write it: popcount, clz, ctz, ffs, bit reverse and byte swap (libdevice's popc, clz, ffs, brev,
byte_perm, hadd; lax.population_count / clz; SWAR by hand), rotates by static and run-time amounts, 64-bit funnel
shifts, Morton (2-D, 3-D) and Hilbert codes, Gray codes, parity, next power of two, bitsets (and, or, xor,
popcount, rank and select over packed words), of uint32, int32, uint8 and int64. Same CASES form as
probe71b_hash.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71b_hash import S, U8, U32, I32, I64, rng_of, words, wrapping

CASES = {}
X64 = set()
ld = ml.extra.cuda.libdevice


def case(name, kernel, make, ref, tol=0, x64=False):
  CASES[name] = (kernel, make, ref, tol)
  if x64:
    X64.add(name)


def edge_words(seed, n=256):
  w = words(seed, n)
  w[:6] = [0, 1, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, 0x00010000]
  return w


def pop_np(v, bits=32):
  return np.array([bin(int(t) % 2 ** bits).count("1") for t in np.ravel(v)]).reshape(np.shape(v))


def clz_np(v, bits=32):
  return np.array([bits - (int(t) % 2 ** bits).bit_length() for t in np.ravel(v)]).reshape(np.shape(v))


def ffs_np(v, bits=32):
  return np.array([((int(t) % 2 ** bits) & -(int(t) % 2 ** bits)).bit_length() for t in np.ravel(v)])


def brev_np(v, bits=32):
  return np.array([int(f"{int(t) % 2 ** bits:0{bits}b}"[::-1], 2) for t in np.ravel(v)], np.uint64)


# ---------------------------------------------------------------- counts: libdevice, lax, SWAR
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32),) * 4 + (x,))
def libdevice_counts(x, pc, lz, fs, tz, rev):
  """Triton's libdevice intrinsics of int32 words (a Triton port's `tl.extra.cuda.libdevice.popc(x)`): popc, clz,
  ffs and the count of trailing zeros as ffs - 1 (32 for 0), brev; int32 results, as CUDA's."""
  v = x[...]
  pc[...] = ld.popc(v)
  lz[...] = ld.clz(v)
  f = ld.ffs(v)
  fs[...] = f
  tz[...] = ml.where(f == 0, 32, f - 1)
  rev[...] = ld.brev(v)


def _ld_counts_ref(x):
  f = ffs_np(x).astype(np.int32)
  return (pop_np(x).astype(np.int32), clz_np(x).astype(np.int32), f, np.where(f == 0, 32, f - 1).astype(np.int32),
          brev_np(x).astype(np.uint32).view(np.int32))


case("libdevice_popc_clz_ffs_brev_int32", libdevice_counts, lambda s: ((edge_words(s).view(np.int32),), {}),
     _ld_counts_ref)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, S(x.shape, U8)))
def lax_counts(x, pc, lz, bc):
  """jax.lax.population_count and clz of uint32 (in its dtype) and jnp.bitwise_count (uint8), as a JAX port."""
  v = x[...]
  pc[...] = jax.lax.population_count(v)
  lz[...] = jax.lax.clz(v)
  bc[...] = jnp.bitwise_count(v)


case("lax_population_count_clz_uint32", lax_counts, lambda s: ((edge_words(s),), {}),
     lambda x: (pop_np(x).astype(np.uint32), clz_np(x).astype(np.uint32), pop_np(x).astype(np.uint8)))


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def small_int_counts(x, pc, lz):
  """lax's counts of uint8 bytes: within the byte's 8 bits (clz of 1 is 7), in uint8."""
  v = x[...]
  pc[...] = jax.lax.population_count(v)
  lz[...] = jax.lax.clz(v)


case("lax_counts_of_uint8", small_int_counts,
     lambda s: ((rng_of(s).integers(0, 256, 512).astype(np.uint8),), {}),
     lambda x: (pop_np(x, 8).astype(np.uint8), clz_np(x, 8).astype(np.uint8)))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S(x.shape, I32), x, x))
def int64_counts(x, pc, lz, pc_lax, rev):
  """The 64-bit intrinsics of int64 words (jax_enable_x64): libdevice's popcll / clzll (int32 counts), brevll, and
  lax.population_count of int64 (in int64); each the two 32-bit halves' (MG003 before probe 71b)."""
  v = x[...]
  pc[...] = ld.popcll(v)
  lz[...] = ld.clzll(v)
  pc_lax[...] = jax.lax.population_count(v)
  rev[...] = ld.brevll(v)


def _i64_words(seed):
  w = rng_of(seed).integers(-2 ** 63, 2 ** 63 - 1, 256, dtype=np.int64)
  w[:4] = [0, -1, 1, 1 << 40]
  return (w,), {}


case("int64_popcll_clzll_brevll", int64_counts, _i64_words,
     lambda x: (pop_np(x, 64).astype(np.int32), clz_np(x, 64).astype(np.int32), pop_np(x, 64).astype(np.int64),
                brev_np(x, 64).view(np.int64)), x64=True)


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def swar_counts(x, pc, tz):
  """The SWAR popcount by hand (as a CUDA kernel without __popc writes it) and the trailing zeros of the lowest set
  bit isolated by `v & -v` of a uint32 (unary minus wraps)."""
  v = x[...]
  u = v - ((v >> 1) & 0x55555555)
  u = (u & 0x33333333) + ((u >> 2) & 0x33333333)
  pc[...] = (((u + (u >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24
  tz[...] = jax.lax.population_count((v & -v) - 1)


@wrapping
def _swar_ref(x):
  return pop_np(x).astype(np.uint32), pop_np((x & (0 - x)) - np.uint32(1)).astype(np.uint32)


case("swar_popcount_and_ctz_by_isolation", swar_counts, lambda s: ((edge_words(s),), {}), _swar_ref)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def byte_swaps(x, sw, perm, rev):
  """A byte swap three ways: shifts and masks, libdevice's byte_perm(x, 0, 0x0123), and the bytes reversed by
  bitcasting to (n, 4) uint8, flipping the last axis and bitcasting back."""
  v = x[...]
  sw[...] = (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24)
  perm[...] = ld.byte_perm(v, 0, 0x0123)
  rev[...] = ml.bitcast(jnp.flip(ml.bitcast(v, U8), axis=1), U32)


case("byte_swap_shifts_byte_perm_bitcast", byte_swaps, lambda s: ((edge_words(s),), {}),
     lambda x: (x.byteswap(),) * 3)


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, a))
def halving_adds(a, b, h, r, u):
  """libdevice's halving adds of int32 and uint32 words (no overflow of the sum): hadd, rhadd and uhadd."""
  h[...] = ld.hadd(a[...], b[...])
  r[...] = ld.rhadd(a[...], b[...])
  u[...] = ml.bitcast(ld.uhadd(ml.bitcast(a[...], U32), ml.bitcast(b[...], U32)), I32)


case("libdevice_halving_adds", halving_adds,
     lambda s: ((edge_words(s).view(np.int32), edge_words(s + 1).view(np.int32)[::-1].copy()), {}),
     lambda a, b: (((a.astype(np.int64) + b) >> 1).astype(np.int32), ((a.astype(np.int64) + b + 1) >> 1).astype(np.int32),
                   ((a.view(np.uint32).astype(np.uint64) + b.view(np.uint32)) >> 1).astype(np.uint32).view(np.int32)))


# ---------------------------------------------------------------- rotates and funnel shifts
@mg.mgpu_kernel(out_shape=lambda x, s: (x, x))
def rotate_run_time(x, s, left, right):
  """Rotations by a run-time amount per element (CUDA's __funnelshift_l(x, x, s)): the other shift's amount masked
  `(32 - n) & 31` so it stays in 0..31 (n = 0 is then x | x)."""
  v, n = x[...], s[...] & 31
  left[...] = (v << n) | (v >> ((32 - n) & 31))
  right[...] = (v >> n) | (v << ((32 - n) & 31))


def _rot_ref(x, s):
  n = s & np.uint32(31)
  m = (np.uint32(32) - n) & np.uint32(31)
  return ((x << n) | (x >> m)).astype(np.uint32), ((x >> n) | (x << m)).astype(np.uint32)


case("rotate_by_run_time_amounts", rotate_run_time, lambda s: ((edge_words(s), words(s + 1, 256)), {}), _rot_ref)


@mg.mgpu_kernel(out_shape=lambda hi, lo, s: hi)
def funnel_shift_int64(hi, lo, s, o):
  """__funnelshift_r(lo, hi, s): the 64-bit hi:lo shifted right by s & 31, its low word, through int64 (x64)."""
  both = (hi[...].astype(I64) << 32) | lo[...].astype(I64)
  o[...] = jax.lax.shift_right_logical(both, (s[...] & 31).astype(I64)).astype(U32)


def _funnel_ref(hi, lo, s):
  both = (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)
  return (both >> (s & np.uint32(31)).astype(np.uint64)).astype(np.uint32)


case("funnel_shift_right_through_int64", funnel_shift_int64,
     lambda s: ((edge_words(s), words(s + 1, 256), words(s + 2, 256)), {}), _funnel_ref, x64=True)


@mg.mgpu_kernel(out_shape=lambda hi, lo, s: hi)
def funnel_shift_u32(hi, lo, s, o):
  """The same funnel shift in uint32 only: lo >> n | hi << (32 - n), the left part selected away where n is 0 (its
  amount clamped to 31: MG950 in interpret mode otherwise, a shift past the width)."""
  n = s[...] & 31
  o[...] = (lo[...] >> n) | ml.where(n > 0, hi[...] << ml.minimum(32 - n, 31), 0)


case("funnel_shift_right_uint32_select", funnel_shift_u32,
     lambda s: ((edge_words(s), words(s + 1, 256), words(s + 2, 256)), {}), _funnel_ref)


# ---------------------------------------------------------------- Morton, Hilbert, Gray
def _part1by1(v):
  v = v & 0x0000FFFF
  v = (v | (v << 8)) & 0x00FF00FF
  v = (v | (v << 4)) & 0x0F0F0F0F
  v = (v | (v << 2)) & 0x33333333
  return (v | (v << 1)) & 0x55555555


def _compact1by1(v):
  v = v & 0x55555555
  v = (v | (v >> 1)) & 0x33333333
  v = (v | (v >> 2)) & 0x0F0F0F0F
  v = (v | (v >> 4)) & 0x00FF00FF
  return (v | (v >> 8)) & 0x0000FFFF


@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, x))
def morton2d(x, y, code, dx, dy):
  """A 2-D Morton (Z-order) code of 16-bit coordinates by a helper of magic masks, and back."""
  c = _part1by1(x[...]) | (_part1by1(y[...]) << 1)
  code[...] = c
  dx[...] = _compact1by1(c)
  dy[...] = _compact1by1(c >> 1)


def _morton_ref(x, y):
  c = np.array([sum((((int(a) >> i) & 1) << (2 * i)) | (((int(b) >> i) & 1) << (2 * i + 1)) for i in range(16))
                for a, b in zip(x, y)], np.uint32)
  return c, x, y


case("morton2d_encode_decode", morton2d,
     lambda s: ((words(s, 256) & np.uint32(0xFFFF), words(s + 1, 256) & np.uint32(0xFFFF)), {}), _morton_ref)


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[0],), U32))
def morton3d_from_floats(p, o):
  """Karras' 30-bit 3-D Morton code of points in [0, 1)^3 (LBVH construction): each coordinate scaled to 10 bits,
  spread by multiplications with masks, interleaved."""
  def expand(v):
    v = (v * 0x00010001) & 0xFF0000FF
    v = (v * 0x00000101) & 0x0F00F00F
    v = (v * 0x00000011) & 0xC30C30C3
    return (v * 0x00000005) & 0x49249249
  q = ml.minimum(ml.maximum(p[...] * 1024.0, 0.0), 1023.0).astype(U32)
  o[...] = expand(q[:, 0]) * 4 + expand(q[:, 1]) * 2 + expand(q[:, 2])


@wrapping
def _morton3_ref(p):
  q = np.minimum(np.maximum(p * np.float32(1024), 0), 1023).astype(np.uint32)
  def ex(v):
    for m, k in ((0x00010001, 0xFF0000FF), (0x101, 0x0F00F00F), (0x11, 0xC30C30C3), (5, 0x49249249)):
      v = (v * np.uint32(m)) & np.uint32(k)
    return v
  return (ex(q[:, 0]) * np.uint32(4) + ex(q[:, 1]) * np.uint32(2) + ex(q[:, 2])).astype(np.uint32)


case("morton3d_30_bit_of_unit_points", morton3d_from_floats,
     lambda s: ((rng_of(s).random((256, 3)).astype(np.float32),), {}), _morton3_ref)


@mg.mgpu_kernel(out_shape=lambda d: (d, d))
def hilbert_d2xy(d, xo, yo, *, n: ml.constexpr = 1024):
  """Hilbert curve index to (x, y) on an n x n grid (Wikipedia's d2xy), the quadrant rotation by selects, the
  levels by a static loop over s = 1, 2, 4, ..."""
  t = d[...]
  x = ml.zeros_like(t)
  y = ml.zeros_like(t)
  s = 1
  while s < n:
    rx = (t >> 1) & 1
    ry = (t ^ rx) & 1
    flip = (ry == 0) & (rx == 1)
    x, y = ml.where(flip, s - 1 - x, x), ml.where(flip, s - 1 - y, y)
    x, y = ml.where(ry == 0, y, x), ml.where(ry == 0, x, y)
    x, y = x + s * rx, y + s * ry
    t = t >> 2
    s *= 2
  xo[...] = x
  yo[...] = y


def _hilbert_ref(d, n=1024):
  xs, ys = [], []
  for t in d:
    t, x, y, s = int(t), 0, 0, 1
    while s < n:
      rx = 1 & (t // 2)
      ry = 1 & (t ^ rx)
      if ry == 0:
        if rx == 1:
          x, y = s - 1 - x, s - 1 - y
        x, y = y, x
      x, y, t, s = x + s * rx, y + s * ry, t // 4, s * 2
    xs.append(x)
    ys.append(y)
  return np.array(xs, np.int32), np.array(ys, np.int32)


case("hilbert_index_to_xy", hilbert_d2xy, lambda s: ((rng_of(s).integers(0, 1024 * 1024, 256).astype(np.int32),), {}),
     _hilbert_ref)


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def gray_codes(x, g, back):
  """Gray code x ^ (x >> 1) and its inverse by the prefix xor of shifts 1, 2, 4, 8, 16."""
  v = x[...]
  gg = v ^ (v >> 1)
  g[...] = gg
  b = gg
  for s in (1, 2, 4, 8, 16):
    b = b ^ (b >> s)
  back[...] = b


case("gray_code_and_inverse", gray_codes, lambda s: ((edge_words(s),), {}), lambda x: (x ^ (x >> np.uint32(1)), x))


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def parity_pow2(x, par, nxt, low):
  """Parity by folding xors, the next power of two (v - 1 smeared, + 1; 0 stays 0), the lowest set bit v & -v."""
  v = x[...]
  p = v ^ (v >> 16)
  p = p ^ (p >> 8)
  p = p ^ (p >> 4)
  par[...] = (0x6996 >> (p & 0xF)) & 1
  u = v - 1
  for s in (1, 2, 4, 8, 16):
    u |= u >> s
  nxt[...] = u + 1
  low[...] = v & (~v + 1)


@wrapping
def _parity_ref(x):
  nxt = np.array([0 if t == 0 else (1 << (int(t) - 1).bit_length()) % 2 ** 32 for t in x], np.uint32)
  return (pop_np(x) & 1).astype(np.uint32), nxt, x & (0 - x)


case("parity_next_pow2_lowest_bit", parity_pow2, lambda s: ((edge_words(s),), {}), _parity_ref)
