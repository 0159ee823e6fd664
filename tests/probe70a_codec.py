"""Probe 70a's corpus, its eighth part: decoding and sketches (Parquet's bit-packed integers, zigzag and delta
decoding, dictionary decoding, HyperLogLog registers by clz and atomic max, a count-min sketch, LIKE '%pat%' over
offsets) and an LSD radix sort of four launches pairs, as cuDF's Parquet reader, its sort and HeavyDB's approximate
aggregates do. Same CASES form as probe70a_filter.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70a_filter import I32, U32, S, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def bitpack_np(v, b):
  bits = ((v[:, None] >> np.arange(b)) & 1).astype(np.uint8).ravel()
  bits = np.concatenate([bits, np.zeros((-len(bits)) % 32, np.uint8)])
  return (bits.reshape(-1, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype(np.uint32)


@mg.mgpu_kernel(out_shape=lambda w, *, B, N: S((N,), U32), grid=lambda w, *, B, N: (N // 128,))
def bit_unpack(words, out, *, B: ml.constexpr, N: ml.constexpr):
  """Parquet's bit-packed values of B bits (LSB first across uint32 words): a value straddling two words takes the
  next word's low bits. The run-time shift `hi << (32 - sh)` reaches 32 where sh is 0 (MG950 in interpret mode: a
  shift past the width is undefined on the GPU), so it is written as MG950's hint writes it."""
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  bit = i * B
  lo = words[bit // 32]
  hi = ml.load(words.at[bit // 32 + 1], mask=bit // 32 + 1 < words.shape[0], other=0)
  sh = (bit % 32).astype(U32)
  v = (lo >> sh) | ml.where(sh > 0, hi << ml.minimum(32 - sh, 31), 0)
  out[i] = v & ((1 << B) - 1)


def _bu_make(seed):
  v = rng_of(seed).integers(0, 2**5, 512).astype(np.uint32)
  return (bitpack_np(v, 5),), dict(B=5, N=512)


def _bu_ref(w, *, B, N):
  bits = np.unpackbits(w.view(np.uint8), bitorder="little")[:N * B].reshape(N, B)
  return (bits.astype(np.uint32) << np.arange(B, dtype=np.uint32)).sum(1).astype(np.uint32)


case("parquet_bit_unpack_5_bits", bit_unpack, _bu_make, _bu_ref, 0)


@mg.mgpu_kernel(out_shape=lambda z, base: S(z.shape, I32), grid=(1,))
def zigzag_delta_decode(z, base, out):
  """DELTA_BINARY_PACKED's last steps: zigzag-decoded deltas (n >> 1) ^ -(n & 1) of uint32 bits, then the running
  sum from the block's first value."""
  u = ml.bitcast(z[...], U32)
  d = ml.bitcast((u >> 1) ^ (0 - (u & 1)), I32)
  out[...] = base[...] + ml.cumsum(d)


def _zz_make(seed):
  r = rng_of(seed)
  d = r.integers(-1000, 1000, 256).astype(np.int32)
  z = ((d.astype(np.int64) << 1) ^ (d.astype(np.int64) >> 31)).astype(np.uint32).view(np.int32)
  return (z, np.int32(12345)), {}


def _zz_ref(z, base):
  u = z.view(np.uint32)
  d = ((u >> 1) ^ (0 - (u & 1)).astype(np.uint32)).view(np.int32)
  return (base + np.cumsum(d.astype(np.int64))).astype(np.int32)


case("zigzag_delta_decode", zigzag_delta_decode, _zz_make, _zz_ref, 0)


@mg.mgpu_kernel(out_shape=lambda codes, d: S(codes.shape, d.dtype), grid=lambda codes, d: (ml.cdiv(codes.shape[0], 512),))
def dict_decode(codes, dictionary, out):
  """A dictionary-encoded column (uint16 codes) back to its float values; code 0xFFFF is null (NaN here)."""
  offs = ml.program_id(0) * 512 + ml.arange(0, 512)
  m = offs < codes.shape[0]
  c = ml.load(codes.at[offs], mask=m, other=0).astype(I32)
  v = ml.load(dictionary.at[c], mask=m & (c != 0xFFFF), other=0.0)
  ml.store(out.at[offs], ml.where(c == 0xFFFF, float("nan"), v), mask=m)


def _dd_make(seed):
  r = rng_of(seed)
  c = r.integers(0, 300, 1500).astype(np.uint16)
  c[r.random(1500) < 0.1] = 0xFFFF
  return (c, r.standard_normal(300).astype(np.float32)), {}


case("dictionary_decode_uint16_codes", dict_decode, _dd_make,
     lambda c, d: np.where(c == 0xFFFF, np.nan, d[np.minimum(c, 299)]).astype(np.float32), 0)


@mg.mgpu_kernel(out_shape=lambda k: S((64,), I32), grid=lambda k: (k.shape[0] // 256,))
def hll_registers(keys, regs):
  """HyperLogLog with 64 registers: the hash's top 6 bits pick the register, the leading zeros of the rest (clz)
  plus one its rank, kept by atomic max (registers no key reached stay at int32's lowest: the caller's zero)."""
  k = keys.at[ml.ds(ml.program_id(0) * 256, 256)][...]
  h = ml.bitcast(k, U32) * 0x9E3779B1
  rank = jnp.minimum(jax.lax.clz(h << 6), 26).astype(I32) + 1
  ml.atomic_max(regs.at[(h >> 26).astype(I32)], rank)


def _hll_ref(k):
  h = (k.astype(np.uint32) * np.uint32(0x9E3779B1)).astype(np.uint32)
  rest = (h << np.uint32(6)).astype(np.uint32)
  clz = np.array([32 - int(x).bit_length() for x in rest])
  out = np.full(64, np.iinfo(np.int32).min, np.int32)
  np.maximum.at(out, h >> 26, np.minimum(clz, 26) + 1)
  return out


case("hyperloglog_registers_clz_atomic_max", hll_registers,
     lambda s: ((rng_of(s).integers(-2**31, 2**31 - 1, 1024).astype(np.int32),), {}), _hll_ref, 0)


@mg.mgpu_kernel(out_shape=lambda k, *, D, W: S((D, W), I32), grid=lambda k, *, D, W: (ml.cdiv(k.shape[0], 256),))
def count_min(keys, sketch, *, D: ml.constexpr, W: ml.constexpr):
  """A count-min sketch: D rows, each with its own multiplicative hash into W counters."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < keys.shape[0]
  h = ml.bitcast(ml.load(keys.at[offs], mask=m, other=0), U32)
  for d in ml.static_range(D):
    col = ((h * (2 * d + 1) * 0x9E3779B1) >> 20).astype(I32) % W
    ml.atomic_add(sketch.at[d, col], 1, mask=m)


def _cm_ref(k, *, D, W):
  out = np.zeros((D, W), np.int32)
  h = k.astype(np.uint32)
  for d in range(D):
    col = ((h * np.uint32(2 * d + 1) * np.uint32(0x9E3779B1)).astype(np.uint32) >> np.uint32(20)).astype(np.int64) % W
    np.add.at(out[d], col, 1)
  return out


case("count_min_sketch_rows", count_min, lambda s: ((rng_of(s).integers(0, 500, 2000).astype(np.int32),), dict(D=4, W=100)),
     _cm_ref, 0)


@mg.mgpu_kernel(out_shape=lambda off, c, p: S((off.shape[0] - 1,), jnp.bool_), grid=lambda off, c, p: (off.shape[0] - 1,))
def like_contains(off, chars, pat, out):
  """s LIKE '%pat%' of strings up to 64 bytes: every start position against the pattern, a (64, P) gather."""
  s = ml.program_id(0)
  a, b = off[s], off[s + 1]
  P = pat.shape[0]
  st = ml.arange(0, 64)
  j = ml.arange(0, P)
  pos = a + st[:, None] + j[None, :]
  ok = st[:, None] + P <= b - a
  ch = ml.load(chars.at[pos], mask=ok & (pos < b), other=0)
  out[s] = ml.any(ml.all(ok & (ch == pat[...][None, :]), axis=1))


def _lc_make(seed):
  r = rng_of(seed)
  strs = [bytes(r.integers(97, 100, r.integers(0, 60)).astype(np.uint8)) for _ in range(40)]
  off = np.concatenate([[0], np.cumsum([len(x) for x in strs])]).astype(np.int32)
  return (off, np.frombuffer(b"".join(strs), np.uint8).copy(), np.frombuffer(b"abca", np.uint8).copy()), {}


case("like_contains_pattern", like_contains, _lc_make,
     lambda off, c, p: np.array([bytes(p) in bytes(c[off[i]:off[i + 1]]) for i in range(len(off) - 1)]), 0)


# ---------------------------------------------------------------- an LSD radix sort of int32 keys (cuDF's order by)
@mg.mgpu_kernel(out_shape=lambda k, *, SHIFT: S((k.shape[0] // 256, 256), I32), grid=lambda k, *, SHIFT: (k.shape[0] // 256,))
def radix_block_counts(keys, counts, *, SHIFT: ml.constexpr):
  """Each block's digit counts, in an SMEM histogram."""
  pid = ml.program_id(0)
  h = ml.smem((256,), I32)
  h[...] = ml.zeros((256,), I32)
  u = ml.bitcast(keys.at[ml.ds(pid * 256, 256)][...], U32) ^ 0x80000000
  ml.atomic_add(h.at[((u >> SHIFT) & 0xFF).astype(I32)], 1)
  counts.at[pid][...] = h[...]


@mg.mgpu_kernel(out_shape=lambda k, base, *, SHIFT: S(k.shape, k.dtype), grid=lambda k, base, *, SHIFT: (k.shape[0] // 256,))
def radix_block_scatter(keys, base, out, *, SHIFT: ml.constexpr):
  """A stable pass: the block's keys ordered by digit (a stable argsort), each key's rank among its digit's keys in
  the block is its place in that order minus its digit's first place; the digit's base for this block comes from the
  scan of every block's counts (digit-major) between launches."""
  pid = ml.program_id(0)
  k = keys.at[ml.ds(pid * 256, 256)][...]
  d = ((ml.bitcast(k, U32) ^ 0x80000000) >> SHIFT & 0xFF).astype(I32)
  order = ml.argsort(d)
  ds_ = d[order]
  i = ml.arange(0, 256)
  first = ml.cummax(ml.where((i == 0) | (ds_ != ml.roll(ds_, 1)), i, 0))
  b = base.at[pid][...]
  out[b[ds_] + i - first] = k[order]


def radix_sort(keys, interpret=False):
  for shift in (0, 8, 16, 24):
    c = radix_block_counts(keys, SHIFT=shift, interpret=interpret)
    flat = c.T.reshape(-1)
    base = (jnp.cumsum(flat) - flat).reshape(256, -1).T
    keys = radix_block_scatter(keys, base, SHIFT=shift, interpret=interpret)
  return keys


case("lsd_radix_sort_four_passes", radix_sort,
     lambda s: ((rng_of(s).integers(-2**31, 2**31 - 1, 1024, dtype=np.int64).astype(np.int32),), {}), lambda k: np.sort(k), 0)
