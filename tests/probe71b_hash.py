"""Probe 71b's corpus, its first part: hash and cipher rounds over uint32 words as CUDA (hashcat's), Triton and
JAX authors port them: SHA-256, SHA-1 and MD5 compressions of one block a row, ChaCha20 and Salsa20 blocks, an AES
round by T-tables in SMEM and by GMEM gathers, CRC32 by table and bit by bit, xxHash32, MurmurHash3, FNV-1a (vector
and scalar loops), Jenkins' one-at-a-time and djb2 over bytes. Each case: (kernel, make(seed) -> (args, kwargs),
reference(*args, **kwargs), tolerance), the reference NumPy's (bit for bit: tolerance 0)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
U8, U32, I32, I64 = jnp.uint8, jnp.uint32, jnp.int32, jnp.int64
CASES = {}


def case(name, kernel, make, ref, tol=0):
  CASES[name] = (kernel, make, ref, tol)


def rng_of(seed):
  return np.random.default_rng(7100 + seed)


def words(seed, shape):
  return rng_of(seed).integers(0, 2 ** 32, shape, dtype=np.uint64).astype(np.uint32)


def wrapping(f):
  """A NumPy reference whose uint32 products and sums wrap (as the GPU's), without NumPy's overflow warnings."""
  def ref(*a, **k):
    with np.errstate(over="ignore"):
      return f(*a, **k)
  return ref


def rotl_np(v, n):
  return ((v << np.uint32(n)) | (v >> np.uint32(32 - n))).astype(np.uint32)


def rotr_np(v, n):
  return ((v >> np.uint32(n)) | (v << np.uint32(32 - n))).astype(np.uint32)


def rotr(v, n):
  return (v >> n) | (v << (32 - n))


def rotl(v, n):
  return (v << n) | (v >> (32 - n))


# ---------------------------------------------------------------- SHA-256, SHA-1, MD5: one 64-byte block a row
K256 = np.array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2], np.uint32)
H256 = (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)


@mg.mgpu_kernel(out_shape=lambda m: S((m.shape[0], 8), U32))
def sha256_block(m, o):
  """hashcat's SHA-256 compression: the schedule as a list of 64 word vectors, K a module NumPy table of 64 uint32."""
  w = [m[:, i] for i in range(16)]
  for t in range(16, 64):
    s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
    s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
    w.append(w[t - 16] + s0 + w[t - 7] + s1)
  a, b, c, d, e, f, g, h = [ml.full((m.shape[0],), v, U32) for v in H256]
  for t in range(64):
    t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K256[t] + w[t]
    t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))
    h, g, f, e, d, c, b, a = g, f, e, d + t1, c, b, a, t1 + t2
  for i, v in enumerate((a, b, c, d, e, f, g, h)):
    o[:, i] = v + H256[i]


@wrapping
def _sha256_ref(m):
  w = [m[:, i].copy() for i in range(16)]
  for t in range(16, 64):
    s0 = rotr_np(w[t - 15], 7) ^ rotr_np(w[t - 15], 18) ^ (w[t - 15] >> np.uint32(3))
    s1 = rotr_np(w[t - 2], 17) ^ rotr_np(w[t - 2], 19) ^ (w[t - 2] >> np.uint32(10))
    w.append((w[t - 16] + s0 + w[t - 7] + s1).astype(np.uint32))
  a, b, c, d, e, f, g, h = [np.full(m.shape[0], v, np.uint32) for v in H256]
  for t in range(64):
    t1 = h + (rotr_np(e, 6) ^ rotr_np(e, 11) ^ rotr_np(e, 25)) + ((e & f) ^ (~e & g)) + K256[t] + w[t]
    t2 = (rotr_np(a, 2) ^ rotr_np(a, 13) ^ rotr_np(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))
    h, g, f, e, d, c, b, a = g, f, e, (d + t1).astype(np.uint32), c, b, a, (t1 + t2).astype(np.uint32)
  return np.stack([(v + np.uint32(h0)).astype(np.uint32) for v, h0 in zip((a, b, c, d, e, f, g, h), H256)], 1)


def _one_block_sha256(seed):
  """A real message: 'abc' padded into one block (FIPS 180's first example), then random blocks."""
  m = words(seed, (128, 16))
  m[0] = 0
  m[0, 0], m[0, 15] = 0x61626380, 24
  return (m,), {}


case("sha256_compress_block_rows", sha256_block, _one_block_sha256, _sha256_ref)


@mg.mgpu_kernel(out_shape=lambda m: S((m.shape[0], 5), U32))
def sha1_block(m, o):
  """SHA-1: the 80-word schedule a rolling window of 16 (w[t % 16]). `for t in range(80)` is a run-time loop (past
  the 64 trips a list-indexing body unrolls), MG003 at `w[(t - 3) % 16]`, whose hint unrolls it: ml.static_range."""
  h0 = (0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0)
  w = [m[:, i] for i in range(16)]
  a, b, c, d, e = [ml.full((m.shape[0],), v, U32) for v in h0]
  for t in ml.static_range(80):
    if t >= 16:
      w[t % 16] = rotl(w[(t - 3) % 16] ^ w[(t - 8) % 16] ^ w[(t - 14) % 16] ^ w[t % 16], 1)
    if t < 20:
      f, k = (b & c) | (~b & d), 0x5A827999
    elif t < 40:
      f, k = b ^ c ^ d, 0x6ED9EBA1
    elif t < 60:
      f, k = (b & c) | (b & d) | (c & d), 0x8F1BBCDC
    else:
      f, k = b ^ c ^ d, 0xCA62C1D6
    a, b, c, d, e = rotl(a, 5) + f + e + k + w[t % 16], a, rotl(b, 30), c, d
  o[...] = jnp.stack([a + h0[0], b + h0[1], c + h0[2], d + h0[3], e + h0[4]], axis=1)


@wrapping
def _sha1_ref(m):
  h0 = (0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0)
  w = [m[:, i].copy() for i in range(16)]
  a, b, c, d, e = [np.full(m.shape[0], v, np.uint32) for v in h0]
  for t in range(80):
    if t >= 16:
      w[t % 16] = rotl_np(w[(t - 3) % 16] ^ w[(t - 8) % 16] ^ w[(t - 14) % 16] ^ w[t % 16], 1)
    f, k = ((b & c) | (~b & d), 0x5A827999) if t < 20 else (b ^ c ^ d, 0x6ED9EBA1) if t < 40 else \
        ((b & c) | (b & d) | (c & d), 0x8F1BBCDC) if t < 60 else (b ^ c ^ d, 0xCA62C1D6)
    a, b, c, d, e = (rotl_np(a, 5) + f + e + np.uint32(k) + w[t % 16]).astype(np.uint32), a, rotl_np(b, 30), c, d
  return np.stack([(v + np.uint32(x)).astype(np.uint32) for v, x in zip((a, b, c, d, e), h0)], 1)


def _sha1_make(seed):
  import hashlib
  m = words(seed, (128, 16))
  m[0] = 0
  m[0, 0], m[0, 15] = 0x61626380, 24          # 'abc': checked against hashlib below
  want = np.frombuffer(hashlib.sha1(b"abc").digest(), ">u4")
  assert (_sha1_ref(m)[0] == want).all()
  return (m,), {}


case("sha1_compress_block_rows", sha1_block, _sha1_make, _sha1_ref)

KMD5 = [int(abs(np.sin(i + 1)) * 2 ** 32) & 0xFFFFFFFF for i in range(64)]
RMD5 = [7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4 + [6, 10, 15, 21] * 4


@mg.mgpu_kernel(out_shape=lambda m: S((m.shape[0], 4), U32))
def md5_block(m, o):
  """MD5's 64 steps, constants Python ints past 2**31 (a list, indexed by the unrolled step), message words by
  g's static schedule."""
  a0, b0, c0, d0 = [ml.full((m.shape[0],), v, U32) for v in (0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476)]
  a, b, c, d = a0, b0, c0, d0
  for i in range(64):
    if i < 16:
      f, g = (b & c) | (~b & d), i
    elif i < 32:
      f, g = (d & b) | (~d & c), (5 * i + 1) % 16
    elif i < 48:
      f, g = b ^ c ^ d, (3 * i + 5) % 16
    else:
      f, g = c ^ (b | ~d), (7 * i) % 16
    f = f + a + KMD5[i] + m[:, g]
    a, d, c = d, c, b
    b = b + rotl(f, RMD5[i])
  o[...] = jnp.stack([a0 + a, b0 + b, c0 + c, d0 + d], axis=1)


@wrapping
def _md5_ref(m):
  a0, b0, c0, d0 = [np.full(m.shape[0], v, np.uint32) for v in (0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476)]
  a, b, c, d = a0, b0, c0, d0
  for i in range(64):
    f, g = ((b & c) | (~b & d), i) if i < 16 else ((d & b) | (~d & c), (5 * i + 1) % 16) if i < 32 else \
        (b ^ c ^ d, (3 * i + 5) % 16) if i < 48 else (c ^ (b | ~d), (7 * i) % 16)
    f = (f + a + np.uint32(KMD5[i]) + m[:, g]).astype(np.uint32)
    a, d, c = d, c, b
    b = (b + rotl_np(f, RMD5[i])).astype(np.uint32)
  return np.stack([a0 + a, b0 + b, c0 + c, d0 + d], 1).astype(np.uint32)


def _md5_make(seed):
  import hashlib
  m = words(seed, (128, 16))
  m[0] = 0
  m[0, 0], m[0, 14] = 0x80636261, 24          # 'abc', little-endian words
  want = np.frombuffer(hashlib.md5(b"abc").digest(), "<u4")
  assert (_md5_ref(m)[0] == want).all()
  return (m,), {}


case("md5_compress_block_rows", md5_block, _md5_make, _md5_ref)


# ---------------------------------------------------------------- ChaCha20, Salsa20
def quarter(s, a, b, c, d):
  """ChaCha's quarter round on a list of word vectors, returning the new list (lists are values in a kernel: a
  helper that assigns s[a] in place is MG003, whose hint writes this)."""
  s = list(s)
  s[a] = s[a] + s[b]
  s[d] = rotl(s[d] ^ s[a], 16)
  s[c] = s[c] + s[d]
  s[b] = rotl(s[b] ^ s[c], 12)
  s[a] = s[a] + s[b]
  s[d] = rotl(s[d] ^ s[a], 8)
  s[c] = s[c] + s[d]
  s[b] = rotl(s[b] ^ s[c], 7)
  return s


def double_round(s):
  for q in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
            (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
    s = quarter(s, *q)
  return s


def _chacha_init(key, ctr, n, full, zeros):
  return ([full((n,), c, U32) for c in (0x61707865, 0x3320646e, 0x79622d32, 0x6b206574)]
          + [full((n,), key[i], U32) for i in range(8)] + [ctr, zeros((n,), U32), zeros((n,), U32), zeros((n,), U32)])


@mg.mgpu_kernel(out_shape=lambda key, ctr: S((ctr.shape[0], 16), U32))
def chacha20_block(key, ctr, o):
  """RFC 8439's block function, a counter a row: 10 double rounds by a Python loop, the key words 8 scalars."""
  init = _chacha_init(key, ctr[...], ctr.shape[0], ml.full, ml.zeros)
  s = init
  for _ in range(10):
    s = double_round(s)
  for i in range(16):
    o[:, i] = s[i] + init[i]


@mg.mgpu_kernel(out_shape=lambda key, ctr: S((ctr.shape[0], 16), U32))
def chacha20_fori(key, ctr, o):
  """The same rounds in a lax.fori_loop carrying the 16 words as a tuple (a JAX port's)."""
  init = tuple(_chacha_init(key, ctr[...], ctr.shape[0], ml.full, ml.zeros))
  s = jax.lax.fori_loop(0, 10, lambda _, st: tuple(double_round(st)), init)
  o[...] = jnp.stack([s[i] + init[i] for i in range(16)], axis=1)


@wrapping
def _chacha_ref(key, ctr):
  init = _chacha_init(key, ctr, ctr.shape[0], lambda sh, v, d: np.full(sh, v, np.uint32),
                      lambda sh, d: np.zeros(sh, np.uint32))
  s = list(init)

  def q(a, b, c, d):
    for x, y, z, r in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
      s[x] = (s[x] + s[y]).astype(np.uint32)
      s[z] = rotl_np(s[z] ^ s[x], r)
  for _ in range(10):
    for qq in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
               (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
      q(*qq)
  return np.stack([(s[i] + init[i]).astype(np.uint32) for i in range(16)], 1)


def _chacha_make(seed):
  return (words(seed, 8), np.arange(128, dtype=np.uint32) + np.uint32(seed * 1000)), {}


case("chacha20_block_per_counter", chacha20_block, _chacha_make, _chacha_ref)
case("chacha20_fori_loop_tuple_carry", chacha20_fori, _chacha_make, _chacha_ref)


@mg.mgpu_kernel(out_shape=lambda x: x)
def salsa20_8(x, o):
  """scrypt's Salsa20/8 core over (n, 16) rows: the state a list rebuilt each step, rotations by Python ints."""
  s = [x[:, i] for i in range(16)]
  for _ in range(4):
    for a, b, c, d in ((0, 4, 8, 12), (5, 9, 13, 1), (10, 14, 2, 6), (15, 3, 7, 11),
                       (0, 1, 2, 3), (5, 6, 7, 4), (10, 11, 8, 9), (15, 12, 13, 14)):
      s[b] ^= rotl(s[a] + s[d], 7)
      s[c] ^= rotl(s[b] + s[a], 9)
      s[d] ^= rotl(s[c] + s[b], 13)
      s[a] ^= rotl(s[d] + s[c], 18)
  for i in range(16):
    o[:, i] = s[i] + x[:, i]


@wrapping
def _salsa_ref(x):
  s = [x[:, i].copy() for i in range(16)]
  for _ in range(4):
    for a, b, c, d in ((0, 4, 8, 12), (5, 9, 13, 1), (10, 14, 2, 6), (15, 3, 7, 11),
                       (0, 1, 2, 3), (5, 6, 7, 4), (10, 11, 8, 9), (15, 12, 13, 14)):
      s[b] ^= rotl_np((s[a] + s[d]).astype(np.uint32), 7)
      s[c] ^= rotl_np((s[b] + s[a]).astype(np.uint32), 9)
      s[d] ^= rotl_np((s[c] + s[b]).astype(np.uint32), 13)
      s[a] ^= rotl_np((s[d] + s[c]).astype(np.uint32), 18)
  return np.stack([(s[i] + x[:, i]).astype(np.uint32) for i in range(16)], 1)


case("salsa20_8_core_rows", salsa20_8, lambda s: ((words(s, (128, 16)),), {}), _salsa_ref)


# ---------------------------------------------------------------- AES round by T-tables
def _aes_sbox():
  """FIPS 197's S-box: the inverse in GF(2^8) (x^254) through the affine map."""
  def mul(a, b):
    r = 0
    while b:
      r, a, b = r ^ (a if b & 1 else 0), ((a << 1) ^ (0x11B if a & 0x80 else 0)) & 0xFF, b >> 1
    return r
  out = []
  for x in range(256):
    inv = 1
    for _ in range(254):
      inv = mul(inv, x)
    inv = inv if x else 0
    out.append(inv ^ 0x63 ^ (((inv << 1) | (inv >> 7)) & 0xFF) ^ (((inv << 2) | (inv >> 6)) & 0xFF)
               ^ (((inv << 3) | (inv >> 5)) & 0xFF) ^ (((inv << 4) | (inv >> 4)) & 0xFF))
  return np.array(out, np.uint32)


SBOX = _aes_sbox()
_XT = ((SBOX << 1) ^ np.where(SBOX & 0x80, 0x1B, 0)) & 0xFF
TE0 = ((_XT << 24) | (SBOX << 16) | (SBOX << 8) | (_XT ^ SBOX)).astype(np.uint32)


@mg.mgpu_kernel(out_shape=lambda s, te, k: s)
def aes_round_smem_table(s, te, k, o):
  """One AES round of a (n, 4) state of column words: Te0 staged into SMEM (a CUDA kernel's __shared__ table), the
  other three tables its rotations; the round key 4 scalars."""
  t = ml.smem((256,), U32)
  ml.copy(te, t)
  for c in range(4):
    o[:, c] = (t[s[:, c] >> 24] ^ rotr(t[(s[:, (c + 1) % 4] >> 16) & 255], 8)
               ^ rotr(t[(s[:, (c + 2) % 4] >> 8) & 255], 16) ^ rotr(t[s[:, (c + 3) % 4] & 255], 24) ^ k[c])


@mg.mgpu_kernel(out_shape=lambda s, te, k: s)
def aes_round_gmem_gather(s, te, k, o):
  """The same round gathering Te0 from GMEM (`te[idx]`, a read-only table through L1)."""
  for c in range(4):
    o[:, c] = (te[s[:, c] >> 24] ^ rotr(te[(s[:, (c + 1) % 4] >> 16) & 255], 8)
               ^ rotr(te[(s[:, (c + 2) % 4] >> 8) & 255], 16) ^ rotr(te[s[:, (c + 3) % 4] & 255], 24) ^ k[c])


def _aes_ref(s, te, k):
  cols = [te[s[:, c] >> 24] ^ rotr_np(te[(s[:, (c + 1) % 4] >> 16) & 255], 8)
          ^ rotr_np(te[(s[:, (c + 2) % 4] >> 8) & 255], 16) ^ rotr_np(te[s[:, (c + 3) % 4] & 255], 24) ^ k[c]
          for c in range(4)]
  return np.stack(cols, 1).astype(np.uint32)


def _aes_make(seed):
  return (words(seed, (128, 4)), TE0, words(seed + 1, 4)), {}


case("aes_round_ttable_in_smem", aes_round_smem_table, _aes_make, _aes_ref)
case("aes_round_ttable_gmem_gather", aes_round_gmem_gather, _aes_make, _aes_ref)


# ---------------------------------------------------------------- CRC32 (IEEE, reflected)
def _crc_table():
  t = np.zeros(256, np.uint32)
  for i in range(256):
    c = i
    for _ in range(8):
      c = (0xEDB88320 ^ (c >> 1)) if c & 1 else c >> 1
    t[i] = c
  return t


CRC_TABLE = _crc_table()


def _crc_ref(d, *t):
  import zlib
  return np.array([zlib.crc32(row.tobytes()) for row in d], np.uint32)


def _crc_make(seed):
  return (rng_of(seed).integers(0, 256, (128, 24)).astype(np.uint8), CRC_TABLE), {}


@mg.mgpu_kernel(out_shape=lambda d, t: S((d.shape[0],), U32))
def crc32_table_gmem(d, t, o):
  """Sarwate's byte-at-a-time CRC32, a message a row: the table gathered from GMEM at int32 indices."""
  c = ml.full((d.shape[0],), 0xFFFFFFFF, U32)
  for j in range(d.shape[1]):
    c = t[((c ^ d[:, j].astype(U32)) & 0xFF).astype(I32)] ^ (c >> 8)
  o[...] = c ^ 0xFFFFFFFF


@mg.mgpu_kernel(out_shape=lambda d, t: S((d.shape[0],), U32))
def crc32_table_smem(d, t, o):
  """The same, the table in SMEM indexed by uint32 values, ~c for the final xor, `c ^= byte` of a uint8 column."""
  ts = ml.smem((256,), U32)
  ml.copy(t, ts)
  c = ml.full((d.shape[0],), 0xFFFFFFFF, U32)
  for j in range(d.shape[1]):
    c = ts[(c ^ d[:, j]) & 0xFF] ^ (c >> 8)
  o[...] = ~c


@mg.mgpu_kernel(out_shape=lambda d, t: S((d.shape[0],), U32))
def crc32_bitwise_mask(d, t, o):
  """Bit by bit, branch-free: the polynomial masked by -(c & 1)."""
  c = ml.full((d.shape[0],), 0xFFFFFFFF, U32)
  for j in range(d.shape[1]):
    c = c ^ d[:, j].astype(U32)
    for _ in range(8):
      c = (c >> 1) ^ (0xEDB88320 & (0 - (c & 1)))
  o[...] = c ^ 0xFFFFFFFF


@mg.mgpu_kernel(out_shape=lambda d, t: S((d.shape[0],), U32))
def crc32_bitwise_where(d, t, o):
  """Bit by bit by a select: `jnp.where(c & 1, POLY, 0)` of two numbers is int32 in jnp (MG003: 0xEDB88320 does
  not fit), so the constant is written as the hint says, jnp.uint32(0xEDB88320)."""
  c = ml.full((d.shape[0],), 0xFFFFFFFF, U32)
  for j in range(d.shape[1]):
    c ^= d[:, j]
    for _ in range(8):
      c = (c >> 1) ^ jnp.where(c & 1, jnp.uint32(0xEDB88320), 0)
  o[...] = c ^ 0xFFFFFFFF


@mg.mgpu_kernel(out_shape=lambda d, t: S((d.shape[0],), U32))
def crc32_module_table(d, t, o):
  """The table a module constant (CUDA's `__constant__ uint32_t crc_table[256]`), indexed by a tensor: a register
  table of its 256 numbers (MG003 "pass the table as an input" before probe 71b, past 64 numbers)."""
  c = ml.full((d.shape[0],), 0xFFFFFFFF, U32)
  for j in range(d.shape[1]):
    c = CRC_TABLE[(c ^ d[:, j]) & 0xFF] ^ (c >> 8)
  o[...] = ~c


case("crc32_table_in_gmem", crc32_table_gmem, _crc_make, _crc_ref)
case("crc32_table_module_constant", crc32_module_table, _crc_make, _crc_ref)
case("crc32_table_in_smem", crc32_table_smem, _crc_make, _crc_ref)
case("crc32_bitwise_masked_polynomial", crc32_bitwise_mask, _crc_make, _crc_ref)
case("crc32_bitwise_where_uint32_constant", crc32_bitwise_where, _crc_make, _crc_ref)


# ---------------------------------------------------------------- xxHash32, MurmurHash3, FNV-1a, one-at-a-time, djb2
P1, P2, P3, P4, P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1


@mg.mgpu_kernel(out_shape=lambda w: S((w.shape[0],), U32))
def xxhash32_16_bytes(w, o, *, seed: ml.constexpr = 7):
  """xxHash32 of 16-byte keys (four words a row, under its 16-byte stripe: the short path) and its avalanche."""
  h = ml.full((w.shape[0],), (seed + P5 + 16) % 2 ** 32, U32)
  for i in range(4):
    h = rotl(h + w[:, i] * P3, 17) * P4
  h ^= h >> 15
  h *= P2
  h ^= h >> 13
  h *= P3
  h ^= h >> 16
  o[...] = h


@wrapping
def _xxh_ref(w, seed=7):
  h = np.full(w.shape[0], (seed + P5 + 16) % 2 ** 32, np.uint32)
  for i in range(4):
    h = (rotl_np((h + w[:, i] * np.uint32(P3)).astype(np.uint32), 17) * np.uint32(P4)).astype(np.uint32)
  for s, p in ((15, P2), (13, P3)):
    h = ((h ^ (h >> np.uint32(s))) * np.uint32(p)).astype(np.uint32)
  return h ^ (h >> np.uint32(16))


case("xxhash32_16_byte_keys", xxhash32_16_bytes, lambda s: ((words(s, (256, 4)),), {}), _xxh_ref)


@mg.mgpu_kernel(out_shape=lambda w: S((w.shape[0],), U32))
def murmur3_x86_32(w, o, *, seed: ml.constexpr = 42):
  """MurmurHash3_x86_32 of keys of w.shape[1] words, a key a row (RAPIDS' MurmurHash3_32 of fixed-width rows)."""
  h = ml.full((w.shape[0],), seed, U32)
  for i in range(w.shape[1]):
    k = rotl(w[:, i] * 0xcc9e2d51, 15) * 0x1b873593
    h = rotl(h ^ k, 13) * 5 + 0xe6546b64
  h ^= w.shape[1] * 4
  h ^= h >> 16
  h *= 0x85ebca6b
  h ^= h >> 13
  h *= 0xc2b2ae35
  o[...] = h ^ (h >> 16)


@wrapping
def _murmur_ref(w, seed=42):
  import struct
  out = []
  for row in w:               # the reference byte-wise, from the key's bytes (little-endian words)
    data, h = struct.pack(f"<{len(row)}I", *row), seed
    for i in range(0, len(data), 4):
      k = (int.from_bytes(data[i:i + 4], "little") * 0xcc9e2d51) & 0xFFFFFFFF
      k = (((k << 15) | (k >> 17)) * 0x1b873593) & 0xFFFFFFFF
      h ^= k
      h = ((((h << 13) | (h >> 19)) & 0xFFFFFFFF) * 5 + 0xe6546b64) & 0xFFFFFFFF
    h ^= len(data)
    for s, m in ((16, 0x85ebca6b), (13, 0xc2b2ae35)):
      h = ((h ^ (h >> s)) * m) & 0xFFFFFFFF
    out.append(h ^ (h >> 16))
  return np.array(out, np.uint32)


case("murmur3_x86_32_fixed_rows", murmur3_x86_32, lambda s: ((words(s, (128, 3)),), {}), _murmur_ref)


@mg.mgpu_kernel(out_shape=lambda b: S((b.shape[0],), U32))
def fnv1a_bytes_rows(b, o):
  """FNV-1a over a row of bytes: the offset basis 2166136261 and prime 16777619 as Python ints meeting uint32."""
  h = ml.full((b.shape[0],), 2166136261, U32)
  for j in range(b.shape[1]):
    h = (h ^ b[:, j]) * 16777619
  o[...] = h


def _fnv_ref(b):
  out = []
  for row in b:
    h = 2166136261
    for x in row:
      h = ((h ^ int(x)) * 16777619) & 0xFFFFFFFF
    out.append(h)
  return np.array(out, np.uint32)


case("fnv1a_bytes_a_row", fnv1a_bytes_rows, lambda s: ((rng_of(s).integers(0, 256, (128, 20)).astype(np.uint8),), {}),
     _fnv_ref)


@mg.mgpu_kernel(out_shape=lambda b: S((1,), U32))
def fnv1a_scalar_loop(b, o):
  """A single string's FNV-1a in a run-time loop over its bytes (a scalar carry started from a Python int past
  2**31, a thread's serial hash)."""
  h = 2166136261
  for i in ml.range(b.shape[0]):
    h = (h ^ b[i]) * 16777619
  o[0] = h


case("fnv1a_scalar_runtime_loop", fnv1a_scalar_loop,
     lambda s: ((rng_of(s).integers(0, 256, 57).astype(np.uint8),), {}), lambda b: _fnv_ref(b[None, :]))


@mg.mgpu_kernel(out_shape=lambda b: S((1,), U32))
def fnv1a_fori_uint32_carry(b, o):
  """The same in a lax.fori_loop whose carry starts as jnp.uint32(2166136261)."""
  o[0] = jax.lax.fori_loop(0, b.shape[0], lambda i, h: (h ^ b[i]) * 16777619, jnp.uint32(2166136261))


case("fnv1a_scalar_fori_loop", fnv1a_fori_uint32_carry,
     lambda s: ((rng_of(s).integers(0, 256, 33).astype(np.uint32),), {}), lambda b: _fnv_ref(b[None, :]))


@mg.mgpu_kernel(out_shape=lambda b: S((b.shape[0],), U32))
def one_at_a_time(b, o):
  """Jenkins' one-at-a-time hash of a row of bytes (shifts left wrap in uint32)."""
  h = ml.zeros((b.shape[0],), U32)
  for j in range(b.shape[1]):
    h += b[:, j]
    h += h << 10
    h ^= h >> 6
  h += h << 3
  h ^= h >> 11
  h += h << 15
  o[...] = h


def _oaat_ref(b):
  out = []
  for row in b:
    h = 0
    for x in row:
      h = (h + int(x)) & 0xFFFFFFFF
      h = (h + (h << 10)) & 0xFFFFFFFF
      h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    out.append((h + (h << 15)) & 0xFFFFFFFF)
  return np.array(out, np.uint32)


case("jenkins_one_at_a_time", one_at_a_time, lambda s: ((rng_of(s).integers(0, 256, (128, 12)).astype(np.uint8),), {}),
     _oaat_ref)


@mg.mgpu_kernel(out_shape=lambda b: S((b.shape[0],), U32))
def djb2_xor(b, o):
  """Bernstein's djb2a, h * 33 ^ c, started at 5381 (int32 arithmetic in the C original; uint32 here)."""
  h = ml.full((b.shape[0],), 5381, U32)
  for j in range(b.shape[1]):
    h = ((h << 5) + h) ^ b[:, j].astype(U32)
  o[...] = h


def _djb2_ref(b):
  out = []
  for row in b:
    h = 5381
    for x in row:
      h = ((h * 33) & 0xFFFFFFFF) ^ int(x)
    out.append(h)
  return np.array(out, np.uint32)


case("djb2a_bytes", djb2_xor, lambda s: ((rng_of(s).integers(0, 256, (128, 16)).astype(np.uint8),), {}), _djb2_ref)
