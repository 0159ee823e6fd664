"""Probe 71b's corpus, its fourth part: packed data as compression and retrieval kernels hold it: Bloom filters
(insert by atomic or, query), bitsets' set operations, rank and select, bit-packing and unpacking of 1- to 7-bit
fields (frame-of-reference, delta), varint (LEB128) and zigzag, base64 over uint8, Hamming distances of packed
binary embeddings, jnp.packbits / unpackbits. Same CASES form as probe71b_hash.py."""
import base64

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71b_hash import S, U8, U32, I32, rng_of, words, wrapping
from probe71b_bits import pop_np

CASES = {}


def case(name, kernel, make, ref, tol=0):
  CASES[name] = (kernel, make, ref, tol)


SEEDS = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D)
NBITS = 4096 * 32


# ---------------------------------------------------------------- Bloom filters
@mg.mgpu_kernel(out_shape=lambda k, z: z, grid=lambda k, z: (k.shape[0] // 256,), input_output_aliases={1: 0})
def bloom_insert_into(keys, zeros, bits):
  """k = 3 hashes a key, each setting one bit of a 4096-word filter by ml.atomic_or of `1 << (pos & 31)` (RAPIDS'
  bloom_filter add), into the caller's zeroed filter (an input aliased to the output: programs' atomics are not
  ordered after a zeroing by one program)."""
  k = keys.at[ml.ds(ml.program_id(0) * 256, 256)][...]
  for seed in SEEDS:
    h = (k ^ seed) * 0x27D4EB2F
    pos = (h ^ (h >> 15)) & (NBITS - 1)
    ml.atomic_or(bits.at[(pos >> 5).astype(I32)], ml.full(k.shape, 1, U32) << (pos & 31))


@wrapping
def _bloom_np(k):
  bits = np.zeros(4096, np.uint32)
  for seed in SEEDS:
    h = (k ^ np.uint32(seed)) * np.uint32(0x27D4EB2F)
    pos = (h ^ (h >> np.uint32(15))) & np.uint32(NBITS - 1)
    np.bitwise_or.at(bits, (pos >> np.uint32(5)).astype(np.int64), np.uint32(1) << (pos & np.uint32(31)))
  return bits


case("bloom_filter_insert_atomic_or", bloom_insert_into,
     lambda s: ((words(s, 1024), np.zeros(4096, np.uint32)), {}), lambda k, z: _bloom_np(k))


@mg.mgpu_kernel(out_shape=lambda k, b: S(k.shape, jnp.bool_), grid=lambda k, b: (k.shape[0] // 256,))
def bloom_query(keys, bits, hit):
  """The query: every hash's bit set, gathered words tested with `&`, the answers and-ed (bools)."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  k = keys.at[r][...]
  ok = ml.full(k.shape, True, jnp.bool_)
  for seed in SEEDS:
    h = (k ^ seed) * 0x27D4EB2F
    pos = (h ^ (h >> 15)) & (NBITS - 1)
    ok = ok & ((bits[(pos >> 5).astype(I32)] >> (pos & 31)) & 1 == 1)
  hit.at[r][...] = ok


@wrapping
def _bloom_query_ref(k, bits):
  ok = np.ones(len(k), bool)
  for seed in SEEDS:
    h = (k ^ np.uint32(seed)) * np.uint32(0x27D4EB2F)
    pos = (h ^ (h >> np.uint32(15))) & np.uint32(NBITS - 1)
    ok &= ((bits[(pos >> np.uint32(5)).astype(np.int64)] >> (pos & np.uint32(31))) & np.uint32(1)) == 1
  return ok


def _bloom_query_make(seed):
  inserted = words(seed, 512)
  return (np.concatenate([inserted, words(seed + 9, 512)]), _bloom_np(inserted)), {}


case("bloom_filter_query", bloom_query, _bloom_query_make, _bloom_query_ref)


# ---------------------------------------------------------------- bitsets
@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, S((1,), I32), S((1,), I32)))
def bitset_ops(a, b, both, either_not, n_both, jaccard_den):
  """Two bitsets of uint32 words: and, or of a with ~b, and the popcounts of the intersection and union summed
  (jnp.sum of lax.population_count, as int32)."""
  x, y = a[...], b[...]
  both[...] = x & y
  either_not[...] = x | ~y
  n_both[0] = jnp.sum(jax.lax.population_count(x & y).astype(I32))
  jaccard_den[0] = jnp.sum(jax.lax.population_count(x | y).astype(I32))


case("bitset_and_or_not_popcount_sums", bitset_ops, lambda s: ((words(s, 512), words(s + 1, 512)), {}),
     lambda a, b: (a & b, a | ~b, np.array([pop_np(a & b).sum()], np.int32), np.array([pop_np(a | b).sum()], np.int32)))


@mg.mgpu_kernel(out_shape=lambda b: (S(b.shape, I32), S(b.shape, I32)))
def rank_select(b, rank, mid):
  """Rank: the set bits before each word (an exclusive cumsum of popcounts, a succinct bitvector's rank directory);
  select within a word: the position of its middle set bit by a binary search of popcounts of low masks."""
  w = b[...]
  c = jax.lax.population_count(w).astype(I32)
  rank[...] = jnp.cumsum(c) - c
  k = c >> 1
  pos = ml.zeros(w.shape, I32)
  for s in (16, 8, 4, 2, 1):
    low = jax.lax.population_count(w & ((ml.full(w.shape, 1, U32) << (pos + s).astype(U32)) - 1)).astype(I32)
    pos = ml.where(low <= k, pos + s, pos)
  mid[...] = pos


def _rank_select_ref(b):
  c = pop_np(b)
  mids = []
  for t in b:
    ones = [i for i in range(32) if int(t) >> i & 1]
    mids.append(ones[len(ones) >> 1] if ones else 31)
  return (np.cumsum(c) - c).astype(np.int32), np.array(mids, np.int32)


case("bitvector_rank_and_select_in_word", rank_select, lambda s: ((words(s, 512),), {}), _rank_select_ref)


# ---------------------------------------------------------------- bit packing
def pack_np(v, b):
  bits = ((v[:, None].astype(np.uint64) >> np.arange(b, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8).ravel()
  bits = np.concatenate([bits, np.zeros((-len(bits)) % 32, np.uint8)])
  return (bits.reshape(-1, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype(np.uint32)


@mg.mgpu_kernel(out_shape=lambda w, *, B, N: S((N,), U32))
def unpack_bits(w, out, *, B: ml.constexpr, N: ml.constexpr):
  """N values of B bits (1 to 7) packed LSB-first across uint32 words, a value straddling two words: its word and
  the next, shifted by a run-time amount (the left shift's amount clamped as MG950's hint writes it)."""
  i = ml.arange(N)
  bit = (i * B).astype(U32)
  lo = w[(bit >> 5).astype(I32)]
  nxt = (bit >> 5).astype(I32) + 1
  hi = ml.load(w.at[nxt], mask=nxt < w.shape[0], other=0)
  sh = bit & 31
  out[...] = ((lo >> sh) | ml.where(sh > 0, hi << ml.minimum(32 - sh, 31), 0)) & ((1 << B) - 1)


def _unpack_make(b):
  def make(seed):
    v = rng_of(seed).integers(0, 2 ** b, 1024).astype(np.uint32)
    return (pack_np(v, b),), dict(B=b, N=1024)
  return make


def _unpack_ref(w, *, B, N):
  bits = np.unpackbits(w.view(np.uint8), bitorder="little")[:N * B].reshape(N, B)
  return (bits.astype(np.uint32) << np.arange(B, dtype=np.uint32)).sum(1).astype(np.uint32)


for _b in (1, 3, 5, 7):
  case(f"unpack_{_b}_bit_fields", unpack_bits, _unpack_make(_b), _unpack_ref)


@mg.mgpu_kernel(out_shape=lambda v: S((v.shape[0],), U32))
def pack_nibbles(v, o):
  """Eight 4-bit values a row packed into a word: each shifted to its place and or-reduced along the row
  (jnp.bitwise_or.reduce), the shift amounts a uint32 arange (uint32 >> int32 is MG104)."""
  x = v[...]
  o[...] = jnp.bitwise_or.reduce(x << (jnp.arange(8, dtype=U32) * 4)[None, :], axis=1)


case("pack_nibbles_or_reduce", pack_nibbles, lambda s: ((rng_of(s).integers(0, 16, (256, 8)).astype(np.uint32),), {}),
     lambda v: np.bitwise_or.reduce(v << (np.arange(8, dtype=np.uint32) * 4), axis=1))


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[0], 8), U32))
def unpack_nibbles(p, o):
  """The unpacking: each word shifted right by a row of amounts, broadcast, masked."""
  o[...] = (p[...][:, None] >> (ml.arange(8).astype(U32)[None, :] * 4)) & 0xF


case("unpack_nibbles_broadcast_shift", unpack_nibbles, lambda s: ((words(s, 256),), {}),
     lambda p: (p[:, None] >> (np.arange(8, dtype=np.uint32) * 4)) & np.uint32(0xF))


@mg.mgpu_kernel(out_shape=lambda codes, base: S((codes.shape[0], 8), I32))
def for_delta_decode(codes, base, o):
  """Frame-of-reference with delta coding: a row's eight 4-bit deltas unpacked from a word, prefix-summed along
  the row (jnp.cumsum) and added to the row's reference value."""
  d = ((codes[...][:, None] >> (ml.arange(8)[None, :] * 4).astype(U32)) & 0xF).astype(I32)
  o[...] = base[...][:, None] + jnp.cumsum(d, axis=1)


case("frame_of_reference_delta_decode", for_delta_decode,
     lambda s: ((words(s, 128), rng_of(s).integers(-10 ** 6, 10 ** 6, 128).astype(np.int32)), {}),
     lambda c, b: (b[:, None] + np.cumsum(((c[:, None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15).astype(np.int32),
                                          axis=1)).astype(np.int32))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, U32), x))
def zigzag(x, enc, dec):
  """Zigzag encoding of int32 ((n << 1) ^ (n >> 31), arithmetic) into uint32 and back ((u >> 1) ^ -(u & 1))."""
  n = x[...]
  u = ml.bitcast((n << 1) ^ (n >> 31), U32)
  enc[...] = u
  dec[...] = ml.bitcast((u >> 1) ^ (0 - (u & 1)), I32)


case("zigzag_encode_decode", zigzag,
     lambda s: ((np.concatenate([np.array([0, -1, 1, 2 ** 31 - 1, -2 ** 31], np.int32),
                                 rng_of(s).integers(-2 ** 31, 2 ** 31 - 1, 251).astype(np.int32)]),), {}),
     lambda x: (((x.astype(np.int64) << 1) ^ (x.astype(np.int64) >> 31)).astype(np.uint32), x))


def _leb128(v):
  out = np.zeros((len(v), 5), np.uint8)
  for r, t in enumerate(v):
    t, j = int(t), 0
    while True:
      b, t = t & 0x7F, t >> 7
      out[r, j], j = b | (0x80 if t else 0), j + 1
      if not t:
        break
  return out


@mg.mgpu_kernel(out_shape=lambda e: S((e.shape[0],), U32))
def varint_decode(e, o):
  """LEB128 varints of up to five bytes a row (protobuf's uint32): each byte's seven bits in place while the
  previous bytes' continuation bits were set."""
  acc = ml.zeros((e.shape[0],), U32)
  going = ml.full((e.shape[0],), True, jnp.bool_)
  for j in range(5):
    b = e[:, j].astype(U32)
    acc = ml.where(going, acc | ((b & 0x7F) << (7 * j)), acc)
    going = going & ((b & 0x80) != 0)
  o[...] = acc


_VALUES = np.concatenate([np.array([0, 1, 127, 128, 2 ** 32 - 1], np.uint32), words(3, 123)])
case("varint_leb128_decode", varint_decode, lambda s: ((_leb128(_VALUES),), {}), lambda e: _VALUES)


# ---------------------------------------------------------------- base64
ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8).copy()


def _b64_ref(raw, *alpha):
  return np.frombuffer(base64.b64encode(raw.tobytes()), np.uint8).reshape(raw.shape[0], 4)


def _raw(seed):
  return rng_of(seed).integers(0, 256, (128, 3)).astype(np.uint8)


@mg.mgpu_kernel(out_shape=lambda r, a: S((r.shape[0], 4), U8))
def base64_encode_table(r, alpha, o):
  """Three bytes a row to four characters: the 24 bits in a uint32, each 6-bit index gathered from the alphabet
  (a uint8 input)."""
  w = (r[:, 0].astype(U32) << 16) | (r[:, 1].astype(U32) << 8) | r[:, 2].astype(U32)
  for j in range(4):
    o[:, j] = alpha[((w >> (18 - 6 * j)) & 63).astype(I32)]


case("base64_encode_alphabet_gather", base64_encode_table, lambda s: ((_raw(s), ALPHABET), {}), _b64_ref)


@mg.mgpu_kernel(out_shape=lambda r: S((r.shape[0], 4), U8))
def base64_encode_arith(r, o):
  """The same in uint8 arithmetic only: the indices of uint8 shifts and masks, the characters by ranges (uint8
  adds wrap: i - 4 of the digits, as jnp's)."""
  b0, b1, b2 = r[:, 0], r[:, 1], r[:, 2]
  for j, i in enumerate((b0 >> 2, ((b0 & 3) << 4) | (b1 >> 4), ((b1 & 15) << 2) | (b2 >> 6), b2 & 63)):
    o[:, j] = ml.where(i < 26, i + 65, ml.where(i < 52, i + 71, ml.where(i < 62, i - 4, ml.where(i == 62, 43, 47))))


case("base64_encode_uint8_ranges", base64_encode_arith, lambda s: ((_raw(s),), {}), _b64_ref)


@mg.mgpu_kernel(out_shape=lambda e: S((e.shape[0], 3), U8))
def base64_decode(e, o):
  """Four characters a row back to three bytes: each character's value by ranges (int32), the 24 bits split."""
  c = e[...].astype(I32)
  v = ml.where((c >= 65) & (c <= 90), c - 65, ml.where((c >= 97) & (c <= 122), c - 71,
               ml.where((c >= 48) & (c <= 57), c + 4, ml.where(c == 43, 62, 63))))
  w = (v[:, 0] << 18) | (v[:, 1] << 12) | (v[:, 2] << 6) | v[:, 3]
  o[:, 0] = (w >> 16).astype(U8)
  o[:, 1] = ((w >> 8) & 255).astype(U8)
  o[:, 2] = (w & 255).astype(U8)


case("base64_decode_ranges", base64_decode, lambda s: ((_b64_ref(_raw(s)),), {}),
     lambda e: np.frombuffer(base64.b64decode(e.tobytes()), np.uint8).reshape(e.shape[0], 3))


# ---------------------------------------------------------------- Hamming distances, packbits
@mg.mgpu_kernel(out_shape=lambda q, d: S((q.shape[0], d.shape[0]), I32))
def hamming_all_pairs(q, d, o):
  """Binary embeddings (256 bits: 8 uint32 words) of queries against a database: xor, popcount, summed over words
  (FAISS's IndexBinaryFlat scan), in int32."""
  acc = ml.zeros((q.shape[0], d.shape[0]), I32)
  for k in range(q.shape[1]):
    acc += jax.lax.population_count(q[:, k][:, None] ^ d[:, k][None, :]).astype(I32)
  o[...] = acc


case("hamming_distance_all_pairs_packed", hamming_all_pairs, lambda s: ((words(s, (16, 8)), words(s + 1, (128, 8))), {}),
     lambda q, d: pop_np(q[:, None, :] ^ d[None, :, :]).sum(2).astype(np.int32))


POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], np.uint8)


@mg.mgpu_kernel(out_shape=lambda q, d: S((q.shape[0], d.shape[0]), I32))
def hamming_bytes_lut(q, d, o):
  """Byte-packed codes (32 bytes: 256 bits) compared by a popcount lookup table of the xor's bytes (a module's
  256-entry NumPy table indexed by a uint8 tensor, as CPU code and older GPU kernels count bits)."""
  acc = ml.zeros((q.shape[0], d.shape[0]), I32)
  for k in range(q.shape[1]):
    acc += POPCOUNT8[q[:, k][:, None] ^ d[:, k][None, :]].astype(I32)
  o[...] = acc


case("hamming_bytes_popcount_lut", hamming_bytes_lut,
     lambda s: ((rng_of(s).integers(0, 256, (16, 32)).astype(np.uint8), rng_of(s + 1).integers(0, 256, (64, 32))
                 .astype(np.uint8)), {}),
     lambda q, d: POPCOUNT8[q[:, None, :] ^ d[None, :, :]].astype(np.int32).sum(2).astype(np.int32))


@mg.mgpu_kernel(out_shape=lambda q, d: S((q.shape[0],), I32))
def hamming_nearest(q, d, o):
  """Each query's nearest database row by Hamming distance: libdevice's popc of the xor, summed per pair, argmin."""
  dist = ml.zeros((q.shape[0], d.shape[0]), I32)
  for k in range(q.shape[1]):
    dist += ml.extra.cuda.libdevice.popc(q[:, k][:, None] ^ d[:, k][None, :])
  o[...] = jnp.argmin(dist, axis=1).astype(I32)


case("hamming_nearest_neighbour_popc", hamming_nearest, lambda s: ((words(s, (16, 8)), words(s + 1, (128, 8))), {}),
     lambda q, d: np.argmin(pop_np(q[:, None, :] ^ d[None, :, :]).sum(2), axis=1).astype(np.int32))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 8), U8))
def sign_bits_packbits(x, o):
  """1-bit quantisation of float embeddings (sign bits), packed 8 a byte by jnp.packbits along the rows."""
  o[...] = jnp.packbits(x[...] > 0, axis=1)


case("sign_bits_packbits", sign_bits_packbits, lambda s: ((rng_of(s).standard_normal((32, 128)).astype(np.float32),), {}),
     lambda x: np.packbits(x > 0, axis=1))


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[0], p.shape[1] * 8), jnp.float32))
def unpackbits_to_signs(p, o):
  """The bytes back to +-1.0 per bit (jnp.unpackbits, little bit order)."""
  o[...] = jnp.unpackbits(p[...], axis=1, bitorder="little").astype(jnp.float32) * 2.0 - 1.0


case("unpackbits_to_plus_minus_one", unpackbits_to_signs,
     lambda s: ((rng_of(s).integers(0, 256, (32, 16)).astype(np.uint8),), {}),
     lambda p: np.unpackbits(p, axis=1, bitorder="little").astype(np.float32) * 2 - 1)


# ---------------------------------------------------------------- checksums of compressed streams
def _crc16_ref(d):
  out = []
  for row in d:
    c = 0xFFFF
    for b in row:
      c ^= int(b) << 8
      for _ in range(8):
        c = ((c << 1) ^ 0x1021) & 0xFFFF if c & 0x8000 else (c << 1) & 0xFFFF
    out.append(c)
  return np.array(out, np.uint16)


@mg.mgpu_kernel(out_shape=lambda d: S((d.shape[0],), jnp.uint16))
def crc16_ccitt(d, o):
  """CRC-16/CCITT-FALSE bit by bit in uint16 (shifts left wrap in 16 bits, as jnp's), a message a row."""
  c = ml.full((d.shape[0],), 0xFFFF, jnp.uint16)
  for j in range(d.shape[1]):
    c ^= d[:, j].astype(jnp.uint16) << 8
    for _ in range(8):
      c = ml.where((c & 0x8000) != 0, (c << 1) ^ 0x1021, c << 1)
  o[...] = c


case("crc16_ccitt_uint16_bitwise", crc16_ccitt, lambda s: ((rng_of(s).integers(0, 256, (128, 8)).astype(np.uint8),), {}),
     _crc16_ref)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), U32))
def adler32(x, o):
  """zlib's Adler-32 of a row of bytes: two running sums modulo 65521 in uint32."""
  a = ml.full((x.shape[0],), 1, U32)
  b = ml.zeros((x.shape[0],), U32)
  for j in range(x.shape[1]):
    a = (a + x[:, j]) % 65521
    b = (b + a) % 65521
  o[...] = (b << 16) | a


def _adler_ref(x):
  import zlib
  return np.array([zlib.adler32(row.tobytes()) for row in x], np.uint32)


case("adler32_rows", adler32, lambda s: ((rng_of(s).integers(0, 256, (128, 40)).astype(np.uint8),), {}), _adler_ref)
