"""Probe 69b's corpus, its third part: bitonic sort stages and a merge-path merge, Monte-Carlo estimation with a
counter-based hash RNG, integer hashing and bloom filters, segmented reductions with head flags, and reductions that
CUDA writes in float64. Same CASES form as probe69b_sparse.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69b_sparse import F32, I32, S, rng_of

U32 = jnp.uint32
CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- bitonic sort
@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=lambda x, *, BLOCK, **k: (x.shape[0] // BLOCK,))
def bitonic_stage(x, o, *, K: ml.constexpr, J: ml.constexpr, BLOCK: ml.constexpr):
  """One compare-exchange stage of the global bitonic network (i with i ^ J, ascending where i & K == 0)."""
  i = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
  p = i ^ J
  a = x[i]
  b = x[p]
  up = (i & K) == 0
  lower = i < p
  o[i] = ml.where(lower == up, ml.minimum(a, b), ml.maximum(a, b))


def bitonic_sort(x, interpret=False):
  n = x.shape[0]
  k = 2
  while k <= n:
    j = k // 2
    while j >= 1:
      x = bitonic_stage(x, K=k, J=j, BLOCK=64, interpret=interpret)
      j //= 2
    k *= 2
  return x


case("bitonic_sort_global_stages", bitonic_sort, lambda s: ((rng_of(s).standard_normal(256).astype(np.float32),), {}),
     lambda x: np.sort(x), 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def bitonic_rows(x, o):
  """A row sorted in registers by the whole bitonic network, partners read by register gathers."""
  N = x.shape[1]
  i = ml.arange(0, N)
  v = x.at[ml.program_id(0)][...]
  k = 2
  while k <= N:
    j = k // 2
    while j >= 1:
      p = v[i ^ j]
      keep_min = ((i & k) == 0) == ((i & j) == 0)
      v = ml.where(keep_min, ml.minimum(v, p), ml.maximum(v, p))
      j //= 2
    k *= 2
  o.at[ml.program_id(0)][...] = v


case("bitonic_rows_register_gathers", bitonic_rows, lambda s: ((rng_of(s).integers(-100, 100, (4, 64)).astype(np.int32),), {}),
     lambda x: np.sort(x, axis=1), 0)


# ---------------------------------------------------------------- merges
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] + b.shape[0],), a.dtype), grid=lambda a, b: (ml.cdiv(a.shape[0], 64),))
def merge_by_ranks(a, b, o):
  """Each element's output slot is its index plus its rank in the other array (ties: a's before b's)."""
  i = ml.program_id(0) * 64 + ml.arange(0, 64)
  av = a[i]
  bv = b[i]
  bs = b[...]
  as_ = a[...]
  o[i + ml.searchsorted(bs, av, side="left")] = av
  o[i + ml.searchsorted(as_, bv, side="right")] = bv


def _merge_make(seed):
  r = rng_of(seed)
  return (np.sort(r.integers(0, 50, 128)).astype(np.int32), np.sort(r.integers(0, 50, 128)).astype(np.int32)), {}


case("merge_by_ranks_searchsorted", merge_by_ranks, _merge_make, lambda a, b: np.sort(np.concatenate([a, b]), kind="stable"), 0)


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0] + b.shape[0],), a.dtype),
                grid=lambda a, b, *, BLOCK: ((a.shape[0] + b.shape[0]) // BLOCK,))
def merge_path(a, b, o, *, BLOCK: ml.constexpr):
  """Merge path: a binary search on the diagonal finds where this program's output starts, then a serial merge."""
  na = a.shape[0]
  nb = b.shape[0]
  diag = ml.program_id(0) * BLOCK
  lo = ml.maximum(0, diag - nb)
  hi = ml.minimum(diag, na)
  while lo < hi:
    mid = (lo + hi) // 2
    if a[mid] <= b[diag - 1 - mid]:
      lo = mid + 1
    else:
      hi = mid
  ia = lo
  ib = diag - lo
  for t in range(BLOCK):
    take_a = (ib >= nb) | ((ia < na) & (a[ml.minimum(ia, na - 1)] <= b[ml.minimum(ib, nb - 1)]))
    if take_a:
      o[diag + t] = a[ia]
      ia += 1
    else:
      o[diag + t] = b[ib]
      ib += 1


case("merge_path_binary_search_then_serial", merge_path, lambda s: (_merge_make(s)[0], dict(BLOCK=32)),
     lambda a, b, **k: np.sort(np.concatenate([a, b]), kind="stable"), 0)


# ---------------------------------------------------------------- hashing, RNG, Monte Carlo
def _fmix32_np(h):
  h = h.astype(np.uint32)
  h ^= h >> np.uint32(16)
  h = (h * np.uint32(0x85EBCA6B)).astype(np.uint32)
  h ^= h >> np.uint32(13)
  h = (h * np.uint32(0xC2B2AE35)).astype(np.uint32)
  h ^= h >> np.uint32(16)
  return h


@ml.inline
def fmix32(h):
  h ^= h >> 16
  h *= 0x85EBCA6B
  h ^= h >> 13
  h *= 0xC2B2AE35
  h ^= h >> 16
  return h


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def murmur_fmix(x, o):
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  o[i] = fmix32(x[i])


case("murmur3_fmix32_uint32", murmur_fmix, lambda s: ((rng_of(s).integers(0, 2 ** 32, 512, dtype=np.uint64).astype(np.uint32),), {}),
     lambda x: _fmix32_np(x), 0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, U32), grid=lambda x: (x.shape[0] // 128,))
def murmur_fmix_int32(x, o):
  """The same hash of int32 keys, converted to uint32 first (CUDA's (unsigned)key)."""
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  o[i] = fmix32(x[i].astype(U32))


case("murmur3_fmix32_of_int32_keys", murmur_fmix_int32,
     lambda s: ((rng_of(s).integers(-2 ** 31, 2 ** 31, 512).astype(np.int32),), {}), lambda x: _fmix32_np(x.view(np.uint32)), 0)


@mg.mgpu_kernel(out_shape=lambda **k: S((1,), I32), grid=lambda **k: (k["P"],))
def monte_carlo_pi(c, *, P: ml.constexpr, N: ml.constexpr, SEED: ml.constexpr):
  """Points from a counter-based hash RNG (fmix32 of the counter), counted inside the circle, summed by one atomic."""
  idx = (ml.program_id(0) * N + ml.arange(0, N)).astype(U32)
  hx = fmix32(idx * 2 + SEED)
  hy = fmix32(idx * 2 + 1 + SEED)
  x = (hx >> 8).astype(F32) * (1.0 / 16777216.0)
  y = (hy >> 8).astype(F32) * (1.0 / 16777216.0)
  inside = ml.sum((x * x + y * y <= 1.0).astype(I32))
  ml.atomic_add(c.at[0], inside)


def _mc_ref(*, P, N, SEED):
  idx = np.arange(P * N, dtype=np.uint32)
  x = (_fmix32_np(idx * np.uint32(2) + np.uint32(SEED)) >> np.uint32(8)).astype(np.float32) * np.float32(1 / 16777216)
  y = (_fmix32_np(idx * np.uint32(2) + np.uint32(1 + SEED)) >> np.uint32(8)).astype(np.float32) * np.float32(1 / 16777216)
  return np.array([np.sum(x * x + y * y <= 1)], np.int32)


case("monte_carlo_pi_hash_rng", monte_carlo_pi, lambda s: ((), dict(P=4, N=256, SEED=12345 + s)), _mc_ref, 0)


@mg.mgpu_kernel(out_shape=lambda **k: S((k["P"],), F32), grid=lambda **k: (k["P"],))
def monte_carlo_integral(o, *, P: ml.constexpr, N: ml.constexpr):
  """Per-program estimates of the integral of exp(-x^2) on [0, 1] with Philox uniforms (ml.rand)."""
  offs = ml.program_id(0) * N + ml.arange(0, N)
  u = ml.rand(2024, offs)
  o[ml.program_id(0)] = ml.sum(ml.exp(-u * u)) / N


def _mci_ref(*, P, N):
  return np.full(P, 0.746824, np.float32)


case("monte_carlo_integral_philox", monte_carlo_integral, lambda s: ((), dict(P=4, N=4096)), _mci_ref, 2e-2)


@mg.mgpu_kernel(out_shape=lambda keys, **k: S((k["WORDS"],), U32), grid=lambda keys, **k: (keys.shape[0] // 128,))
def bloom_insert(keys, bits, *, WORDS: ml.constexpr, HASHES: ml.constexpr):
  k = keys.at[ml.ds(ml.program_id(0) * 128, 128)][...].astype(U32)
  for h in ml.static_range(HASHES):
    pos = fmix32(k ^ ((0x9E3779B9 * (h + 1)) % 2 ** 32)) % (WORDS * 32)
    ml.atomic_or(bits.at[(pos >> 5).astype(I32)], (ml.full((128,), 1, U32) << (pos & 31)))


@mg.mgpu_kernel(out_shape=lambda q, bits, **k: S(q.shape, jnp.bool_), grid=lambda q, bits, **k: (q.shape[0] // 128,))
def bloom_query(q, bits, hit, *, HASHES: ml.constexpr):
  k = q.at[ml.ds(ml.program_id(0) * 128, 128)][...].astype(U32)
  ok = ml.full((128,), True, jnp.bool_)
  for h in ml.static_range(HASHES):
    pos = fmix32(k ^ ((0x9E3779B9 * (h + 1)) % 2 ** 32)) % (bits.shape[0] * 32)
    word = bits[(pos >> 5).astype(I32)]
    ok = ok & (((word >> (pos & 31)) & 1) == 1)
  hit.at[ml.ds(ml.program_id(0) * 128, 128)][...] = ok


def bloom_roundtrip(keys, queries, interpret=False):
  bits = bloom_insert(keys, WORDS=64, HASHES=3, interpret=interpret)
  return bits, bloom_query(queries, bits, HASHES=3, interpret=interpret)


def _bloom_ref(keys, queries):
  bits = np.zeros(64, np.uint32)
  for h in range(3):
    pos = _fmix32_np(keys.view(np.uint32) ^ np.uint32((0x9E3779B9 * (h + 1)) % 2 ** 32)) % np.uint32(64 * 32)
    np.bitwise_or.at(bits, (pos >> 5).astype(np.int64), np.uint32(1) << (pos & np.uint32(31)))
  ok = np.ones(queries.shape, bool)
  for h in range(3):
    pos = _fmix32_np(queries.view(np.uint32) ^ np.uint32((0x9E3779B9 * (h + 1)) % 2 ** 32)) % np.uint32(64 * 32)
    ok &= ((bits[(pos >> 5).astype(np.int64)] >> (pos & np.uint32(31))) & np.uint32(1)) == 1
  return bits, ok


def _bloom_make(seed):
  r = rng_of(seed)
  keys = r.integers(0, 2 ** 31, 256).astype(np.int32)
  return (keys, np.concatenate([keys[:64], r.integers(0, 2 ** 31, 64).astype(np.int32)])), {}


case("bloom_filter_insert_and_query", bloom_roundtrip, _bloom_make, _bloom_ref, 0)


# ---------------------------------------------------------------- segmented reductions with head flags
@ml.inline
def seg_combine(fa, va, fb, vb):
  return fa | fb, ml.where(fb, vb, va + vb)


@mg.mgpu_kernel(out_shape=lambda v, f: S(v.shape, F32), grid=lambda v, f: (v.shape[0],))
def segmented_scan_rows(v, f, o):
  """An inclusive segmented sum along each row: head flags restart the sum (an associative scan of pairs)."""
  vals = v.at[ml.program_id(0)][...]
  flags = f.at[ml.program_id(0)][...] != 0
  _, s = ml.associative_scan((flags, vals), 0, seg_combine)
  o.at[ml.program_id(0)][...] = s


def _segscan_np(v, f):
  out = np.zeros_like(v, dtype=np.float64)
  for r in range(v.shape[0]):
    acc = 0.0
    for j in range(v.shape[1]):
      acc = v[r, j] if (f[r, j] or j == 0) else acc + v[r, j]
      out[r, j] = acc
  return out


def _segscan_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((4, 128)).astype(np.float32), (r.random((4, 128)) < 0.1).astype(np.int32)), {}


case("segmented_scan_head_flags", segmented_scan_rows, _segscan_make, _segscan_np, 1e-5)


@mg.mgpu_kernel(out_shape=lambda v, f, base, **k: S((k["NSEG"],), F32), grid=lambda v, f, base, **k: (v.shape[0] // 128,))
def segmented_sum_atomics(v, f, seg_base, o, *, NSEG: ml.constexpr):
  """Segment ids from a cumsum of head flags (plus the block's first id, from a previous pass), sums by atomics."""
  b = ml.program_id(0)
  flags = f.at[ml.ds(b * 128, 128)][...]
  ids = ml.cumsum(flags, axis=0) - 1 + seg_base[b]
  ml.atomic_add(o.at[ids], v.at[ml.ds(b * 128, 128)][...])


def _segsum_make(seed):
  r = rng_of(seed)
  f = (r.random(512) < 0.05).astype(np.int32)
  f[0] = 1
  base = np.concatenate([[0], np.cumsum(f.reshape(-1, 128).sum(1))[:-1]]).astype(np.int32)
  return (r.standard_normal(512).astype(np.float32), f, base), dict(NSEG=int(f.sum()))


def _segsum_ref(v, f, base, **k):
  ids = np.cumsum(f) - 1
  return np.bincount(ids, weights=v, minlength=int(f.sum())).astype(np.float32)


case("segmented_sum_by_flag_cumsum_atomics", segmented_sum_atomics, _segsum_make, _segsum_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda v, f: S(v.shape, F32), grid=lambda v, f: (v.shape[0],))
def segmented_max_rows(v, f, o):
  """A segmented running max by a combine of (flag, value) pairs written with lax.associative_scan."""
  vals = v.at[ml.program_id(0)][...]
  flags = f.at[ml.program_id(0)][...] != 0

  def comb(a, b):
    return a[0] | b[0], ml.where(b[0], b[1], ml.maximum(a[1], b[1]))
  _, s = jax.lax.associative_scan(comb, (flags, vals))
  o.at[ml.program_id(0)][...] = s


def _segmax_np(v, f):
  out = np.zeros_like(v)
  for r in range(v.shape[0]):
    acc = -np.inf
    for j in range(v.shape[1]):
      acc = v[r, j] if (f[r, j] or j == 0) else max(acc, v[r, j])
      out[r, j] = acc
  return out


case("segmented_max_lax_associative_scan", segmented_max_rows, _segscan_make, _segmax_np, 0)


# ---------------------------------------------------------------- float64 reductions
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0] // 64,))
def row_sums_f64(x, o):
  rows = ml.program_id(0) * 64 + ml.arange(0, 64)
  o[rows] = ml.sum(x.at[ml.ds(ml.program_id(0) * 64, 64), :][...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.float32), grid=lambda x: (x.shape[0] // 64,))
def kahan_row_sums(x, o):
  """Compensated (Kahan) float32 sums, the usual replacement of a float64 accumulator on a GPU without fast FP64."""
  s = ml.zeros((64,), F32)
  c = ml.zeros((64,), F32)
  for k in range(x.shape[1] // 32):
    y = ml.sum(x.at[ml.ds(ml.program_id(0) * 64, 64), ml.ds(k * 32, 32)][...], axis=1) - c
    t = s + y
    c = (t - s) - y
    s = t
  o.at[ml.ds(ml.program_id(0) * 64, 64)][...] = s


case("kahan_row_sums_f32", kahan_row_sums, lambda s: ((rng_of(s).random((128, 256)).astype(np.float32),), {}),
     lambda x: np.sum(x.astype(np.float64), axis=1), 1e-6)
