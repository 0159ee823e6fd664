"""Probe 71b's corpus, its second part: counter-based and small-state random number generators as cuRAND, Triton
and JAX authors write them: Philox4x32-10 by hand (umulhi) against ml.philox and ml.randint, splitmix64, PCG32 and
xorshift64* in int64 (jax_enable_x64: no uint64 here, so constants past 2**63 are written as int64 bits, as MG003's
hint says), xorshift32, an LCG, Wang's and the lowbias32 integer hashes, Tausworthe's combined generator, and
uniform floats made of the bits. Same CASES form as probe71b_hash.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71b_hash import S, U32, I32, rng_of, words, wrapping, rotl_np

CASES = {}
X64 = set()


def case(name, kernel, make, ref, tol=0, x64=False):
  CASES[name] = (kernel, make, ref, tol)
  if x64:
    X64.add(name)


# ---------------------------------------------------------------- Philox4x32-10
@wrapping
def philox_np(c, k, rounds=10):
  c = [x.astype(np.uint64) for x in c]
  k0, k1 = np.uint64(k[0]), np.uint64(k[1])
  m32 = np.uint64(0xFFFFFFFF)
  for _ in range(rounds):
    p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
    c = [((p1 >> np.uint64(32)) ^ c[1] ^ k0) & m32, p1 & m32, ((p0 >> np.uint64(32)) ^ c[3] ^ k1) & m32, p0 & m32]
    k0, k1 = (k0 + np.uint64(0x9E3779B9)) & m32, (k1 + np.uint64(0xBB67AE85)) & m32
  return tuple(v.astype(np.uint32) for v in c)


@mg.mgpu_kernel(out_shape=lambda c: (c, c, c, c))
def philox_by_hand(c, o0, o1, o2, o3, *, k0: ml.constexpr = 1234, k1: ml.constexpr = 0xDEADBEEF):
  """cuRAND's Philox round as Random123 writes it: the products' high words by ml.umulhi, the low words by `*`, the
  key bumped by Weyl constants (Python ints past 2**31 meeting uint32)."""
  c0 = c[...]
  c1, c2, c3 = ml.zeros_like(c0), ml.zeros_like(c0), ml.zeros_like(c0)
  a, b = ml.full(c0.shape, k0, U32), ml.full(c0.shape, k1, U32)
  for _ in ml.static_range(10):
    hi0, lo0 = ml.umulhi(c0, 0xD2511F53), c0 * 0xD2511F53
    hi1, lo1 = ml.umulhi(c2, 0xCD9E8D57), c2 * 0xCD9E8D57
    c0, c1, c2, c3 = hi1 ^ c1 ^ a, lo1, hi0 ^ c3 ^ b, lo0
    a, b = a + 0x9E3779B9, b + 0xBB67AE85
  o0[...], o1[...], o2[...], o3[...] = c0, c1, c2, c3


def _counters(seed):
  return (np.arange(256, dtype=np.uint32) * np.uint32(7919) + np.uint32(seed),), {}


case("philox4x32_10_by_hand_umulhi", philox_by_hand, _counters,
     lambda c: philox_np([c, 0 * c, 0 * c, 0 * c], (1234, 0xDEADBEEF)))


@mg.mgpu_kernel(out_shape=lambda c, seed: (c, c))
def philox_builtin(c, seed: ml.scalar, w0, r):
  """ml.philox at the counter (c, 0, 0, 0) and ml.randint at offset c: the same first word (Triton's tl.randint);
  the seed a uint32 passed past 2**31."""
  w0[...] = ml.philox(seed, c[...], 0, 0, 0)[0]
  r[...] = ml.randint(seed, c[...])


case("philox_builtin_and_randint_uint32_seed", philox_builtin,
     lambda s: ((_counters(s)[0][0], jnp.uint32(0xC0FFEE00 + s)), {}),
     lambda c, seed: (philox_np([c, 0 * c, 0 * c, 0 * c], (int(seed), 0))[0],) * 2)


@mg.mgpu_kernel(out_shape=lambda n: S((n.shape[0],), jnp.float32))
def uniform_from_bits(n, o, *, seed: ml.constexpr = 99):
  """A float in [0, 1) from the top 24 bits of a Philox word (cuRAND's _curand_uniform uses 2**-32; this is the
  exact 24-bit form), and its mean-zero twin."""
  w = ml.philox(seed, n[...], 0, 0, 0)[1]
  o[...] = (w >> 8).astype(jnp.float32) * (1.0 / 16777216.0) - 0.5


case("uniform_float_from_top_24_bits", uniform_from_bits, lambda s: ((np.arange(512, dtype=np.uint32),), {}),
     lambda n, seed=99: ((philox_np([n, 0 * n, 0 * n, 0 * n], (seed, 0))[1] >> np.uint32(8)).astype(np.float32)
                         * np.float32(1 / 16777216) - np.float32(0.5)))


@mg.mgpu_kernel(out_shape=lambda n: S((n.shape[0],), jnp.float32))
def uniform_mantissa_trick(n, o, *, seed: ml.constexpr = 5):
  """The exponent trick: 23 random bits under 1.0's exponent, viewed as a float32 in [1, 2), minus 1."""
  w = ml.randint(seed, n[...])
  o[...] = ml.bitcast((w >> 9) | 0x3F800000, jnp.float32) - 1.0


case("uniform_float_exponent_trick", uniform_mantissa_trick, lambda s: ((np.arange(512, dtype=np.uint32),), {}),
     lambda n, seed=5: ((philox_np([n, 0 * n, 0 * n, 0 * n], (seed, 0))[0] >> np.uint32(9)) | np.uint32(0x3F800000))
     .view(np.float32) - np.float32(1))


# ---------------------------------------------------------------- 64-bit generators in int64 (x64)
M64 = 2 ** 64


def _i64(c):
  """A uint64 constant as the int64 of its bits (MG003's hint: int64 wraps as uint64)."""
  return c - M64 if c >= 2 ** 63 else c


@mg.mgpu_kernel(out_shape=lambda x: x)
def splitmix64(x, o):
  """Vigna's splitmix64 finaliser of int64 states: the constants past 2**63 written as int64 bits (`C - 2**64`), the
  logical shifts by lax.shift_right_logical (>> of int64 is arithmetic)."""
  z = x[...] + (0x9E3779B97F4A7C15 - 2 ** 64)
  z = (z ^ jax.lax.shift_right_logical(z, 30)) * (0xBF58476D1CE4E5B9 - 2 ** 64)
  z = (z ^ jax.lax.shift_right_logical(z, 27)) * (0x94D049BB133111EB - 2 ** 64)
  o[...] = z ^ jax.lax.shift_right_logical(z, 31)


@wrapping
def _splitmix_ref(x):
  z = x.view(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
  z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
  z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return (z ^ (z >> np.uint64(31))).view(np.int64)


def _states(seed):
  return (rng_of(seed).integers(-2 ** 63, 2 ** 63 - 1, 256, dtype=np.int64),), {}


case("splitmix64_int64_bits_constants", splitmix64, _states, _splitmix_ref, x64=True)


@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, U32)))
def pcg32_step(x, state, out):
  """PCG32 (XSH-RR): the LCG step in int64 (6364136223846793005 fits), the output's xorshift and rotation in
  uint32 of the old state's bits, a run-time rotation amount (its left twin masked: (-rot) & 31)."""
  old = x[...]
  state[...] = old * 6364136223846793005 + 1442695040888963407
  xs = (jax.lax.shift_right_logical(jax.lax.shift_right_logical(old, 18) ^ old, 27)).astype(U32)
  rot = jax.lax.shift_right_logical(old, 59).astype(U32)
  out[...] = (xs >> rot) | (xs << ((0 - rot) & 31))


@wrapping
def _pcg_ref(x):
  u = x.view(np.uint64)
  new = (u * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)).view(np.int64)
  xs = (((u >> np.uint64(18)) ^ u) >> np.uint64(27)).astype(np.uint32)
  rot = (u >> np.uint64(59)).astype(np.uint32)
  return new, ((xs >> rot) | (xs << ((0 - rot) & np.uint32(31)))).astype(np.uint32)


case("pcg32_xsh_rr_int64_state", pcg32_step, _states, _pcg_ref, x64=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def xorshift64_star(x, o):
  """xorshift64*: three shifts (the right ones logical) and the multiplier 0x2545F4914F6CDD1D, four steps."""
  s = x[...]
  for _ in range(4):
    s ^= jax.lax.shift_right_logical(s, 12)
    s ^= s << 25
    s ^= jax.lax.shift_right_logical(s, 27)
  o[...] = s * 0x2545F4914F6CDD1D


@wrapping
def _xs64_ref(x):
  s = x.view(np.uint64).copy()
  for _ in range(4):
    s ^= s >> np.uint64(12)
    s ^= s << np.uint64(25)
    s ^= s >> np.uint64(27)
  return (s * np.uint64(0x2545F4914F6CDD1D)).view(np.int64)


case("xorshift64_star_int64", xorshift64_star, _states, _xs64_ref, x64=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, U32))
def int64_hash_to_u32(x, o):
  """A 64-bit key folded to 32 bits (Thomas Wang's 64-to-32 hash) with int64 shifts and `~`, then its low word."""
  k = x[...]
  k = ~k + (k << 18)
  k = k ^ jax.lax.shift_right_logical(k, 31)
  k = k * 21
  k = k ^ jax.lax.shift_right_logical(k, 11)
  k = k + (k << 6)
  k = k ^ jax.lax.shift_right_logical(k, 22)
  o[...] = k.astype(U32)


@wrapping
def _wang64_ref(x):
  k = x.view(np.uint64).copy()
  k = ~k + (k << np.uint64(18))
  k ^= k >> np.uint64(31)
  k = k * np.uint64(21)
  k ^= k >> np.uint64(11)
  k = k + (k << np.uint64(6))
  k ^= k >> np.uint64(22)
  return k.astype(np.uint32)


case("wang_hash64_to_32_int64", int64_hash_to_u32, _states, _wang64_ref, x64=True)


# ---------------------------------------------------------------- 32-bit generators and integer hashes
@mg.mgpu_kernel(out_shape=lambda x: x)
def xorshift32(x, o):
  """Marsaglia's xorshift32 (13, 17, 5), four steps, with augmented assignments on uint32."""
  s = x[...]
  for _ in range(4):
    s ^= s << 13
    s ^= s >> 17
    s ^= s << 5
  o[...] = s


def _xs32_ref(x):
  s = x.copy()
  for _ in range(4):
    s ^= s << np.uint32(13)
    s ^= s >> np.uint32(17)
    s ^= s << np.uint32(5)
  return s


case("xorshift32_four_steps", xorshift32, lambda s: ((words(s, 256) | np.uint32(1),), {}), _xs32_ref)


@mg.mgpu_kernel(out_shape=lambda x: x)
def lcg_numerical_recipes(x, o):
  """Numerical Recipes' LCG, state * 1664525 + 1013904223 wrapping in uint32, eight steps by a run-time loop."""
  s = x[...]
  for _ in range(8):
    s = s * 1664525 + 1013904223
  o[...] = s


@wrapping
def _lcg_ref(x):
  s = x.copy()
  for _ in range(8):
    s = (s * np.uint32(1664525) + np.uint32(1013904223)).astype(np.uint32)
  return s


case("lcg_uint32_eight_steps", lcg_numerical_recipes, lambda s: ((words(s, 256),), {}), _lcg_ref)


@mg.mgpu_kernel(out_shape=lambda x: x)
def wang_hash32_int32(x, o):
  """Wang's 32-bit hash of int32 seeds as a CUDA port writes it in unsigned ints: ml.bitcast to uint32, mixed,
  bitcast back (`seed ^ 61` and `* 9` wrap in uint32)."""
  s = ml.bitcast(x[...], U32)
  s = (s ^ 61) ^ (s >> 16)
  s *= 9
  s = s ^ (s >> 4)
  s *= 0x27d4eb2d
  s = s ^ (s >> 15)
  o[...] = ml.bitcast(s, I32)


@wrapping
def _wang32_ref(x):
  s = x.view(np.uint32).copy()
  s = (s ^ np.uint32(61)) ^ (s >> np.uint32(16))
  s = s * np.uint32(9)
  s ^= s >> np.uint32(4)
  s = s * np.uint32(0x27d4eb2d)
  s ^= s >> np.uint32(15)
  return s.view(np.int32)


case("wang_hash32_of_int32_seeds", wang_hash32_int32,
     lambda s: ((rng_of(s).integers(-2 ** 31, 2 ** 31 - 1, 256).astype(np.int32),), {}), _wang32_ref)


@mg.mgpu_kernel(out_shape=lambda x: x)
def lowbias32_int32_as_hint(x, o):
  """Wellons' lowbias32 on int32 values: `x * 0x7feb352d` fits int32, `x * 0x846ca68b` does not (MG003, whose hint
  computes in uint32: `x.astype(jnp.uint32)`), so the whole hash is in uint32 of the bits, as the hint writes."""
  h = x[...].astype(U32)
  h ^= h >> 16
  h *= 0x7feb352d
  h ^= h >> 15
  h *= 0x846ca68b
  h ^= h >> 16
  o[...] = h.astype(I32)


@wrapping
def _lowbias_ref(x):
  h = x.view(np.uint32).copy()
  h ^= h >> np.uint32(16)
  h = h * np.uint32(0x7feb352d)
  h ^= h >> np.uint32(15)
  h = h * np.uint32(0x846ca68b)
  h ^= h >> np.uint32(16)
  return h.view(np.int32)


case("lowbias32_in_uint32_bits", lowbias32_int32_as_hint,
     lambda s: ((rng_of(s).integers(-2 ** 31, 2 ** 31 - 1, 256).astype(np.int32),), {}), _lowbias_ref)


@mg.mgpu_kernel(out_shape=lambda a: S((a.shape[1],), U32))
def tausworthe_hybrid(a, o):
  """GPU Gems 3's hybrid Taus generator: three Tausworthe steps (masks past 2**31) and an LCG, xored; the four
  state words a column each of a (4, n) input."""
  z1, z2, z3, z4 = a[0, :], a[1, :], a[2, :], a[3, :]
  z1 = (((z1 << 13) ^ z1) >> 19) ^ ((z1 & 4294967294) << 12)
  z2 = (((z2 << 2) ^ z2) >> 25) ^ ((z2 & 4294967288) << 4)
  z3 = (((z3 << 3) ^ z3) >> 11) ^ ((z3 & 4294967280) << 17)
  z4 = 1664525 * z4 + 1013904223
  o[...] = z1 ^ z2 ^ z3 ^ z4


@wrapping
def _taus_ref(a):
  u = np.uint32
  z1, z2, z3, z4 = a
  z1 = (((z1 << u(13)) ^ z1) >> u(19)) ^ ((z1 & u(4294967294)) << u(12))
  z2 = (((z2 << u(2)) ^ z2) >> u(25)) ^ ((z2 & u(4294967288)) << u(4))
  z3 = (((z3 << u(3)) ^ z3) >> u(11)) ^ ((z3 & u(4294967280)) << u(17))
  z4 = u(1664525) * z4 + u(1013904223)
  return (z1 ^ z2 ^ z3 ^ z4).astype(np.uint32)


case("tausworthe_hybrid_generator", tausworthe_hybrid, lambda s: ((words(s, (4, 256)) | np.uint32(128),), {}),
     _taus_ref)


@mg.mgpu_kernel(out_shape=lambda x: x)
def xoshiro128_plus_plus(x, o):
  """xoshiro128++ of a (n, 4) state: its output rotl(s0 + s3, 7) + s0 and one state update, rotations static."""
  s0, s1, s2, s3 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
  res = ((s0 + s3) << 7 | (s0 + s3) >> 25) + s0
  t = s1 << 9
  s2 ^= s0
  s3 ^= s1
  s1 ^= s2
  s0 ^= s3
  s2 ^= t
  s3 = (s3 << 11) | (s3 >> 21)
  o[...] = jnp.stack([res, s1, s2, s3], axis=1)


@wrapping
def _xoshiro_ref(x):
  s0, s1, s2, s3 = (x[:, i].copy() for i in range(4))
  res = (rotl_np((s0 + s3).astype(np.uint32), 7) + s0).astype(np.uint32)
  t = s1 << np.uint32(9)
  s2 ^= s0
  s3 ^= s1
  s1 ^= s2
  s0 ^= s3
  s2 ^= t
  return np.stack([res, s1, s2, rotl_np(s3, 11)], 1)


case("xoshiro128pp_output_and_step", xoshiro128_plus_plus, lambda s: ((words(s, (128, 4)),), {}), _xoshiro_ref)


@mg.mgpu_kernel(out_shape=lambda x: x)
def triton_bitcast_hash(x, o):
  """A Triton port's integer hash of int32 keys: `x.to(tl.uint32, bitcast=True)`, mixed in uint32, bitcast back."""
  u = x[...].to(ml.uint32, bitcast=True)
  u = (u ^ (u >> 16)) * 0x45d9f3b
  u = (u ^ (u >> 16)) * 0x45d9f3b
  o[...] = (u ^ (u >> 16)).to(ml.int32, bitcast=True)


@wrapping
def _tb_ref(x):
  u = x.view(np.uint32).copy()
  for _ in range(2):
    u = (u ^ (u >> np.uint32(16))) * np.uint32(0x45d9f3b)
  return (u ^ (u >> np.uint32(16))).view(np.int32)


case("triton_to_bitcast_int32_hash", triton_bitcast_hash,
     lambda s: ((rng_of(s).integers(-2 ** 31, 2 ** 31 - 1, 256).astype(np.int32),), {}), _tb_ref)
