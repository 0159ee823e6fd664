"""Probe 70a's corpus, its sixth part: the forms that push further (a CTA's hash table in SMEM, 64-bit keys with CAS
inserts and fmix64 hashes, one key a program probing a scalar chain, jnp's own calls in kernels (cumsum of bools,
count_nonzero, searchsorted, bincount), Crystal's star join with dimension lookups, a block's sort-based group-by by
segment sums, strings compared byte by byte, a block compacted into SMEM then copied out, a build side staged in
SMEM and probed by gathers, an SMEM bloom filter, LargeString's int64 offsets). Same CASES form as
probe70a_filter.py; the cases named in X64 run with jax_enable_x64."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70a_filter import F32, I32, S, rng_of
from probe70a_groupby import EMPTY, hash32, table_np

I64 = jnp.int64
CASES = {}
X64 = set()


def case(name, kernel, make, ref, tol, x64=False):
  CASES[name] = (kernel, make, ref, tol)
  if x64:
    X64.add(name)


# ---------------------------------------------------------------- 64-bit keys
@ml.inline
def fmix64(k):
  """murmur3's fmix64 in int64 (kernels have no uint64: products wrap alike, and uint64's >> is lax's logical
  shift; MG106's hint for k.astype(jnp.uint64) writes it so)."""
  k ^= jax.lax.shift_right_logical(k, 33)
  k *= 0xFF51AFD7ED558CCD - 2**64
  k ^= jax.lax.shift_right_logical(k, 33)
  k *= 0xC4CEB9FE1A85EC53 - 2**64
  k ^= jax.lax.shift_right_logical(k, 33)
  return k


def fmix64_np(k):
  k = k.astype(np.uint64)
  with np.errstate(over="ignore"):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
  return k.view(np.int64)


@mg.mgpu_kernel(out_shape=lambda k: S(k.shape, I64), grid=lambda k: (k.shape[0] // 128,))
def hash64(keys, out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = fmix64(keys.at[r][...])


case("fmix64_of_int64_keys_logical_shifts", hash64, lambda s: ((rng_of(s).integers(-2**62, 2**62, 256),), {}),
     lambda k: fmix64_np(k), 0, x64=True)


@mg.mgpu_kernel(out_shape=lambda k, t: S(t.shape, I64), grid=lambda k, t: (ml.cdiv(k.shape[0], 128),), input_output_aliases={1: 0})
def insert64(keys, table_in, table):
  """A hash set of int64 keys: CAS inserts of 64-bit elements, the slot from fmix64's low bits."""
  cap = table.shape[0]
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  slot = (fmix64(k) & (cap - 1)).astype(I32)
  active = m
  while ml.any(active):
    old = ml.atomic_cas(table.at[slot], -1, ml.where(active, k, -1))
    active = active & (old != -1) & (old != k)
    slot = ml.where(active, (slot + 1) & (cap - 1), slot)


def _ins64_make(seed):
  r = rng_of(seed)
  u = r.integers(-2**62, 2**62, 90)
  return (u[r.integers(0, 90, 300)], np.full(256, -1, np.int64)), {}


def insert64_sorted(keys, table_in, interpret=False):
  return jnp.sort(insert64(keys, table_in, interpret=interpret))


def _ins64_ref(keys, t):
  u = np.unique(keys)
  return np.sort(np.concatenate([u, np.full(len(t) - len(u), -1)]))


case("hash_set_int64_keys_cas", insert64_sorted, _ins64_make, _ins64_ref, 0, x64=True)


@mg.mgpu_kernel(out_shape=lambda k, v, *, G: S((G,), I64), grid=lambda k, v, *, G: (ml.cdiv(k.shape[0], 256),))
def count_int64(keys, w, counts, *, G: ml.constexpr):
  """SUM(w) GROUP BY k of int64 weights (counts past 2**31)."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < keys.shape[0]
  ml.atomic_add(counts.at[ml.load(keys.at[offs], mask=m, other=0)], ml.load(w.at[offs], mask=m, other=0), mask=m)


def _c64_ref(k, w, *, G):
  out = np.zeros(G, np.int64)
  np.add.at(out, k, w)
  return out


case("groupby_int64_sums_atomic", count_int64,
     lambda s: ((rng_of(s).integers(0, 16, 1000).astype(np.int32), rng_of(s).integers(0, 2**40, 1000)), dict(G=16)), _c64_ref, 0, x64=True)


# ---------------------------------------------------------------- one key a program: a scalar probe chain
@mg.mgpu_kernel(out_shape=lambda p, t: S(p.shape, I32), grid=lambda p, t: (p.shape[0],))
def probe_scalar(probe, table, pos):
  """One probe key a program (a CUDA thread's loop, ported as a program's): walk the chain until the key or EMPTY."""
  cap = table.shape[0]
  k = probe[ml.program_id(0)]
  slot = hash32(k, cap - 1)
  while (table[slot] != k) & (table[slot] != EMPTY):
    slot = (slot + 1) & (cap - 1)
  pos[ml.program_id(0)] = ml.where(table[slot] == k, slot, -1)


def _ps_make(seed):
  r = rng_of(seed)
  b = r.choice(1000, 100, replace=False).astype(np.int32)
  return (r.integers(0, 1000, 64).astype(np.int32), table_np(b, 128)), {}


def _ps_ref(p, t):
  return np.array([int(np.nonzero(t == k)[0][0]) if (t == k).any() else -1 for k in p], np.int32)


case("probe_one_key_a_program_scalar_while", probe_scalar, _ps_make, _ps_ref, 0)


# ---------------------------------------------------------------- a CTA's hash table in SMEM
@mg.mgpu_kernel(out_shape=lambda k, v, *, CAP: (S((ml.cdiv(k.shape[0], 256), CAP), I32), S((ml.cdiv(k.shape[0], 256), CAP), F32)),
                grid=lambda k, v, *, CAP: (ml.cdiv(k.shape[0], 256),))
def smem_hash_groupby(keys, vals, out_keys, out_sums, *, CAP: ml.constexpr):
  """cuDF's shared-memory hash group-by: a block's keys inserted into an SMEM table by CAS, sums by SMEM atomics,
  the table written out a block (merged by the caller)."""
  pid = ml.program_id(0)
  tk = ml.smem((CAP,), I32)
  ts = ml.smem((CAP,), F32)
  tk[...] = ml.full((CAP,), EMPTY, I32)
  ts[...] = ml.zeros((CAP,), F32)
  offs = pid * 256 + ml.arange(0, 256)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  slot = hash32(k, CAP - 1)
  active = m
  while ml.any(active):
    old = ml.atomic_cas(tk.at[slot], EMPTY, ml.where(active, k, EMPTY))
    active = active & (old != EMPTY) & (old != k)
    slot = ml.where(active, (slot + 1) & (CAP - 1), slot)
  ml.atomic_add(ts.at[slot], ml.load(vals.at[offs], mask=m, other=0.0), mask=m)
  out_keys.at[pid][...] = tk[...]
  out_sums.at[pid][...] = ts[...]


def smem_groupby_merged(keys, vals, *, CAP, interpret=False):
  k, s = smem_hash_groupby(keys, vals, CAP=CAP, interpret=interpret)
  k, s = k.reshape(-1), s.reshape(-1)
  big = jnp.iinfo(jnp.int32).max
  u = jnp.where(k == EMPTY, big, k)
  groups = jnp.unique(u, size=64, fill_value=big)
  return groups, jax.ops.segment_sum(s, jnp.searchsorted(groups, u), num_segments=64)


def _shg_make(seed):
  r = rng_of(seed)
  u = r.choice(10**5, 40, replace=False).astype(np.int32)
  return (u[r.integers(0, 40, 700)], r.standard_normal(700).astype(np.float32)), dict(CAP=128)


def _shg_ref(k, v, *, CAP):
  u = np.unique(k)
  sums = np.array([v[k == x].astype(np.float64).sum() for x in u])
  keys = np.concatenate([u, np.full(64 - len(u), np.iinfo(np.int32).max)])
  return keys, np.concatenate([sums, np.zeros(64 - len(u))])


case("smem_hash_groupby_cas_in_shared", smem_groupby_merged, _shg_make, _shg_ref, 1e-5)


# ---------------------------------------------------------------- jnp's own calls in kernels
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S((), I32)), grid=(1,))
def jnp_compaction(x, idx, count):
  """A compaction written with jnp: positions by jnp.cumsum of the bool mask, the count by jnp.count_nonzero."""
  v = x[...]
  keep = (v % 3 == 0) & (v > 10)
  pos = jnp.cumsum(keep) - 1
  ml.store(idx.at[pos], jnp.arange(x.shape[0], dtype=jnp.int32), mask=keep)
  count[...] = jnp.count_nonzero(keep)


def _jc_ref(x):
  i = np.nonzero((x % 3 == 0) & (x > 10))[0]
  return np.concatenate([i, np.zeros(len(x) - len(i), int)]).astype(np.int32), np.int32(len(i))


case("jnp_cumsum_of_bool_and_count_nonzero", jnp_compaction,
     lambda s: ((rng_of(s).integers(0, 100, 512).astype(np.int32),), {}), _jc_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x, e: S((e.shape[0] - 1,), I32), grid=(1,))
def jnp_histogram_edges(x, edges, counts):
  """Counts in the bins of sorted edges (a range partition's boundaries): jnp.searchsorted, then jnp.bincount."""
  b = jnp.searchsorted(edges[...], x[...], side="right") - 1
  nb = edges.shape[0] - 1
  counts[...] = jnp.bincount(jnp.where((b >= 0) & (b < nb), b, nb), length=nb + 1)[:nb]


def _jh_ref(x, e):
  b = np.searchsorted(e, x, side="right") - 1
  ok = (b >= 0) & (b < len(e) - 1)
  return np.bincount(b[ok], minlength=len(e) - 1).astype(np.int32)


case("range_partition_counts_jnp_searchsorted_bincount", jnp_histogram_edges,
     lambda s: ((rng_of(s).integers(-20, 120, 1024).astype(np.int32), np.arange(0, 129, 8, dtype=np.int32)[:17]), {}), _jh_ref, 0)


# ---------------------------------------------------------------- Crystal's star join (SSB Q2.1's shape)
@mg.mgpu_kernel(out_shape=lambda lo_p, lo_s, lo_d, rev, p_brand, s_region, d_year: S((8, 64), F32),
                grid=lambda lo_p, lo_s, lo_d, rev, p_brand, s_region, d_year: (ml.cdiv(lo_p.shape[0], 256),))
def star_join(lo_part, lo_supp, lo_date, lo_rev, p_brand, s_region, d_year, agg):
  """Fact rows probe three dimensions by perfect hashing (the key is the row: -1 where the dimension's filter failed),
  then SUM(revenue) GROUP BY (year, brand) into a dense (years, brands) table by atomics."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < lo_part.shape[0]
  brand = ml.load(p_brand.at[ml.load(lo_part.at[offs], mask=m, other=0)], mask=m, other=-1)
  region_ok = ml.load(s_region.at[ml.load(lo_supp.at[offs], mask=m, other=0)], mask=m, other=-1) == 1
  year = ml.load(d_year.at[ml.load(lo_date.at[offs], mask=m, other=0)], mask=m, other=1992) - 1992
  keep = m & (brand >= 0) & region_ok
  ml.atomic_add(agg.at[year, brand], ml.load(lo_rev.at[offs], mask=m, other=0.0), mask=keep)


def _star_make(seed):
  r = rng_of(seed)
  n = 2000
  p_brand = np.where(r.random(300) < 0.5, r.integers(0, 64, 300), -1).astype(np.int32)
  s_region = r.integers(0, 5, 50).astype(np.int32)
  d_year = (1992 + r.integers(0, 8, 400)).astype(np.int32)
  return (r.integers(0, 300, n).astype(np.int32), r.integers(0, 50, n).astype(np.int32), r.integers(0, 400, n).astype(np.int32),
          r.uniform(0, 100, n).astype(np.float32), p_brand, s_region, d_year), {}


def _star_ref(lp, ls, ld, rev, pb, sr, dy):
  agg = np.zeros((8, 64))
  keep = (pb[lp] >= 0) & (sr[ls] == 1)
  np.add.at(agg, (dy[ld][keep] - 1992, pb[lp][keep]), rev[keep])
  return agg


case("ssb_star_join_perfect_hash_2d_groups", star_join, _star_make, _star_ref, 1e-5)


# ---------------------------------------------------------------- a block's sort-based group-by
@mg.mgpu_kernel(out_shape=lambda k, v: (S(k.shape, I32), S(k.shape, F32), S((k.shape[0] // 256,), I32)),
                grid=lambda k, v: (k.shape[0] // 256,))
def block_sort_groupby(keys, vals, gkeys, gsums, ngroups):
  """Each block sorts its (key, value) rows by key (argsort, then gathers), finds the heads, and sums each group by
  ml.segment_sum of the group ids; the block's groups are written at the block's rows."""
  pid = ml.program_id(0)
  r = ml.ds(pid * 256, 256)
  k = keys.at[r][...]
  order = ml.argsort(k)
  ks = k[order]
  vs = vals.at[r][...][order]
  i = ml.arange(0, 256)
  head = (i == 0) | (ks != ml.roll(ks, 1))
  gid = ml.cumsum(head.astype(I32)) - 1
  gsums.at[r][...] = ml.segment_sum(vs, gid, num_segments=256)
  gkeys.at[r][...] = ml.segment_max(ks, gid, num_segments=256)
  ngroups[pid] = ml.sum(head.astype(I32))


def _bsg_ref(k, v):
  gk, gs, ng = np.zeros(len(k), np.int32), np.zeros(len(k)), []
  for b in range(0, len(k), 256):
    u = np.unique(k[b:b + 256])
    gk[b:b + 256] = np.iinfo(np.int32).min
    gk[b:b + len(u)] = u
    gs[b:b + len(u)] = [v[b:b + 256][k[b:b + 256] == x].astype(np.float64).sum() for x in u]
    ng.append(len(u))
  return gk, gs, np.array(ng, np.int32)


case("block_sort_then_segment_sums", block_sort_groupby,
     lambda s: ((rng_of(s).integers(0, 40, 512).astype(np.int32), rng_of(s).standard_normal(512).astype(np.float32)), {}), _bsg_ref, 1e-5)


# ---------------------------------------------------------------- strings compared byte by byte
@mg.mgpu_kernel(out_shape=lambda ao, ac, bo, bc: S((ao.shape[0] - 1,), I32), grid=lambda ao, ac, bo, bc: (ao.shape[0] - 1,))
def str_compare(a_off, a_chars, b_off, b_chars, out):
  """strcmp's sign of two string columns, row by row: the first differing byte in chunks of 32, else the lengths."""
  s = ml.program_id(0)
  a0, b0 = a_off[s], b_off[s]
  la, lb = a_off[s + 1] - a0, b_off[s + 1] - b0
  n = ml.minimum(la, lb)
  res = 0
  c = 0
  while (res == 0) & (c < n):
    j = c + ml.arange(0, 32)
    ok = j < n
    x = ml.load(a_chars.at[a0 + j], mask=ok, other=0).astype(I32)
    y = ml.load(b_chars.at[b0 + j], mask=ok, other=0).astype(I32)
    diff = ok & (x != y)
    first = ml.min(ml.where(diff, j, 2**30))
    d = ml.sum(ml.where(j == first, x - y, 0))
    res = ml.where(d > 0, 1, ml.where(d < 0, -1, 0))
    c += 32
  out[s] = ml.where(res != 0, res, ml.where(la > lb, 1, ml.where(la < lb, -1, 0)))


def _sc_make(seed):
  r = rng_of(seed)
  strs_a, strs_b = [], []
  for i in range(60):
    base = bytes(r.integers(97, 100, r.integers(0, 80)).astype(np.uint8))
    other = bytearray(base)
    if other and r.random() < 0.6:
      other[r.integers(0, len(other))] = int(r.integers(97, 100))
    elif r.random() < 0.5:
      other = other[:len(other) // 2]
    strs_a.append(base)
    strs_b.append(bytes(other))
  pack = lambda ss: (np.concatenate([[0], np.cumsum([len(x) for x in ss])]).astype(np.int32),
                     np.frombuffer(b"".join(ss) or b"\0", np.uint8).copy())
  return (*pack(strs_a), *pack(strs_b)), {}


def _sc_ref(ao, ac, bo, bc):
  out = []
  for i in range(len(ao) - 1):
    a, b = bytes(ac[ao[i]:ao[i + 1]]), bytes(bc[bo[i]:bo[i + 1]])
    out.append((a > b) - (a < b))
  return np.array(out, np.int32)


case("string_compare_strcmp_sign", str_compare, _sc_make, _sc_ref, 0)


# ---------------------------------------------------------------- a block compacted into SMEM, then copied out
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype), S((x.shape[0] // 256,), I32)), grid=lambda x: (x.shape[0] // 256,))
def compact_via_smem(x, out, counts):
  """Each block's survivors gathered at the front of an SMEM tile (the rest zero), then one TMA store of the tile:
  the caller reads counts[b] rows of block b."""
  pid = ml.program_id(0)
  buf = ml.smem((256,), x.dtype)
  buf[...] = ml.zeros((256,), x.dtype)
  v = x.at[ml.ds(pid * 256, 256)][...]
  keep = ml.abs(v) > 1.0
  f = keep.astype(I32)
  ml.store(buf.at[ml.cumsum(f) - f], v, mask=keep)
  ml.copy(buf, out.at[ml.ds(pid * 256, 256)])
  counts[pid] = ml.sum(f)


def _cvs_ref(x):
  out, cnt = np.zeros_like(x), []
  for b in range(0, len(x), 256):
    k = x[b:b + 256][np.abs(x[b:b + 256]) > 1]
    out[b:b + len(k)] = k
    cnt.append(len(k))
  return out, np.array(cnt, np.int32)


case("block_compaction_into_smem_then_tma_store", compact_via_smem,
     lambda s: ((rng_of(s).standard_normal(1024).astype(np.float32),), {}), _cvs_ref, 0)


# ---------------------------------------------------------------- a built table staged in SMEM, an SMEM bloom filter
@mg.mgpu_kernel(out_shape=lambda p, t: S(p.shape, I32), grid=lambda p, t: (p.shape[0] // 256,))
def probe_smem_table(probe, table, out):
  """A small build side staged in SMEM by TMA (a broadcast join), then probed by gathers from the buffer in the
  lanes' `while ml.any(active)` loop."""
  cap = table.shape[0]
  ts = ml.smem((cap,), I32)
  ml.copy(table, ts)
  k = probe.at[ml.ds(ml.program_id(0) * 256, 256)][...]
  slot = hash32(k, cap - 1)
  res = ml.full((256,), -1, I32)
  active = ml.full((256,), True, jnp.bool_)
  while ml.any(active):
    tk = ts[slot]
    res = ml.where(active & (tk == k), slot, res)
    active = active & (tk != k) & (tk != EMPTY)
    slot = (slot + 1) & (cap - 1)
  out.at[ml.ds(ml.program_id(0) * 256, 256)][...] = res


def _pst_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 5000, 512).astype(np.int32), table_np(r.choice(5000, 300, replace=False).astype(np.int32), 1024)), {}


case("probe_table_staged_in_smem", probe_smem_table, _pst_make,
     lambda p, t: np.array([int(np.nonzero(t == k)[0][0]) if (t == k).any() else -1 for k in p], np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda k: S((64,), jnp.uint32), grid=lambda k: (k.shape[0] // 256,))
def smem_bloom(keys, bits):
  """A bloom filter's bits set in a CTA's SMEM words by atomic OR, then ORed into the global filter."""
  b = ml.smem((64,), jnp.uint32)
  b[...] = ml.zeros((64,), jnp.uint32)
  h = ml.bitcast(keys.at[ml.ds(ml.program_id(0) * 256, 256)][...], jnp.uint32) * 0x9E3779B1
  pos = (h >> 21).astype(I32)
  ml.atomic_or(b.at[pos // 32], ml.full((256,), 1, jnp.uint32) << (pos % 32).astype(jnp.uint32))
  ml.atomic_or(bits.at[:], b[...])


def _sb_ref(keys):
  h = (keys.astype(np.uint32) * np.uint32(0x9E3779B1)).astype(np.uint32)
  pos = (h >> 21).astype(np.int64)
  out = np.zeros(64, np.uint32)
  np.bitwise_or.at(out, pos // 32, np.uint32(1) << (pos % 32).astype(np.uint32))
  return out


case("bloom_filter_smem_words_atomic_or", smem_bloom,
     lambda s: ((rng_of(s).integers(-2**31, 2**31 - 1, 512, dtype=np.int64).astype(np.int32),), {}), _sb_ref, 0)


@mg.mgpu_kernel(out_shape=lambda off, c: S((off.shape[0] - 1,), I32), grid=lambda off, c: (ml.cdiv(off.shape[0] - 1, 64),))
def large_string_prefix_sum(off, chars, out):
  """Arrow's LargeString (int64 offsets): the sum of each string's first four bytes, a (64, 4) gather at int64
  places."""
  i = ml.program_id(0) * 64 + ml.arange(0, 64)
  m = i < off.shape[0] - 1
  start = ml.load(off.at[i], mask=m, other=0)
  j = ml.arange(0, 4)
  b = ml.load(chars.at[start[:, None] + j[None, :]], mask=m[:, None], other=0)
  ml.store(out.at[i], ml.sum(b.astype(I32), axis=1), mask=m)


def _ls_make(seed):
  r = rng_of(seed)
  strs = [bytes(r.integers(97, 100, r.integers(4, 30)).astype(np.uint8)) for _ in range(100)]
  off = np.concatenate([[0], np.cumsum([len(x) for x in strs])]).astype(np.int64)
  return (off, np.frombuffer(b"".join(strs), np.uint8).copy()), {}


case("large_string_int64_offsets_gather", large_string_prefix_sum, _ls_make,
     lambda off, c: np.array([int(c[off[i]:off[i] + 4].astype(int).sum()) for i in range(len(off) - 1)], np.int32), 0, x64=True)
