"""Probe 70a's corpus, its second part: group-by aggregation (dense keys by GMEM atomics, a CTA's private SMEM table
merged, sort-based groups from head flags, mean and variance in a finishing launch, TPC-H Q1's four groups), hash
tables with open addressing and linear probing (atomic CAS inserts, a hash group-by, a join's build and probe, semi
and anti joins) and radix partitioning (digit histograms, a stable partition scatter), as cuDF, Crystal and HeavyDB
authors write them. Same CASES form as probe70a_filter.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70a_filter import F32, I32, U32, S, rng_of

CASES = {}
EMPTY = -1


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- dense-key group-by with GMEM atomics
@mg.mgpu_kernel(out_shape=lambda k, v, *, G: (S((G,), F32), S((G,), I32), S((G,), F32), S((G,), F32)),
                grid=lambda k, v, *, G: (ml.cdiv(k.shape[0], 256),))
def groupby_dense_atomics(keys, vals, sums, counts, mins, maxs, *, G: ml.constexpr):
  """SELECT k, SUM(v), COUNT(*), MIN(v), MAX(v) GROUP BY k, keys already dense in [0, G)."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  v = ml.load(vals.at[offs], mask=m, other=0.0)
  ml.atomic_add(sums.at[k], v, mask=m)
  ml.atomic_add(counts.at[k], 1, mask=m)
  ml.atomic_min(mins.at[k], v, mask=m)
  ml.atomic_max(maxs.at[k], v, mask=m)


def _gb_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 24, 3000).astype(np.int32), r.standard_normal(3000).astype(np.float32)), dict(G=32)


def _gb_ref(k, v, *, G):
  sums = np.zeros(G, np.float64)
  np.add.at(sums, k, v)
  mins = np.full(G, np.inf, np.float32)
  maxs = np.full(G, -np.inf, np.float32)
  np.minimum.at(mins, k, v)
  np.maximum.at(maxs, k, v)
  return sums.astype(np.float32), np.bincount(k, minlength=G).astype(np.int32), mins, maxs


case("groupby_dense_sum_count_min_max", groupby_dense_atomics, _gb_make, _gb_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda k, v, *, G: (S((G,), F32), S((G,), I32)), grid=lambda k, v, *, G: (ml.cdiv(k.shape[0], 512),))
def groupby_smem_private(keys, vals, sums, counts, *, G: ml.constexpr):
  """Each CTA aggregates its rows into a private SMEM table, then merges it into the global one (one atomic a group
  a CTA instead of one a row)."""
  hs = ml.smem((G,), F32)
  hc = ml.smem((G,), I32)
  hs[...] = ml.zeros((G,), F32)
  hc[...] = ml.zeros((G,), I32)
  offs = ml.program_id(0) * 512 + ml.arange(0, 512)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  ml.atomic_add(hs.at[k], ml.load(vals.at[offs], mask=m, other=0.0), mask=m)
  ml.atomic_add(hc.at[k], 1, mask=m)
  ml.atomic_add(sums.at[:], hs[...])
  ml.atomic_add(counts.at[:], hc[...])


case("groupby_smem_private_table_merged", groupby_smem_private, _gb_make,
     lambda k, v, *, G: _gb_ref(k, v, G=G)[:2], 1e-5)


@mg.mgpu_kernel(out_shape=lambda k, v, *, G: (S((G,), F32), S((G,), F32), S((G,), I32)),
                grid=lambda k, v, *, G: (ml.cdiv(k.shape[0], 256),))
def moments_pass(keys, vals, s1, s2, n, *, G: ml.constexpr):
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  v = ml.load(vals.at[offs], mask=m, other=0.0)
  ml.atomic_add(s1.at[k], v, mask=m)
  ml.atomic_add(s2.at[k], v * v, mask=m)
  ml.atomic_add(n.at[k], 1, mask=m)


@mg.mgpu_kernel(out_shape=lambda s1, s2, n: (S(s1.shape, F32), S(s1.shape, F32)), grid=(1,))
def moments_finish(s1, s2, n, mean, var):
  """AVG and VAR_SAMP from the sums: NULL (NaN here) for an empty group, and for VAR_SAMP of one row."""
  c = n[...].astype(F32)
  mu = s1[...] / c
  mean[...] = ml.where(n[...] > 0, mu, float("nan"))
  var[...] = ml.where(n[...] > 1, (s2[...] - c * mu * mu) / (c - 1.0), float("nan"))


def groupby_mean_var(keys, vals, *, G, interpret=False):
  s1, s2, n = moments_pass(keys, vals, G=G, interpret=interpret)
  return moments_finish(s1, s2, n, interpret=interpret)


def _mv_ref(k, v, *, G):
  mean = np.full(G, np.nan)
  var = np.full(G, np.nan)
  for g in range(G):
    x = v[k == g].astype(np.float64)
    if len(x):
      mean[g] = x.mean()
    if len(x) > 1:
      var[g] = x.var(ddof=1)
  return mean, var


def _mv_make(seed):
  r = rng_of(seed)
  k = r.integers(0, 20, 2000).astype(np.int32)
  k[k == 7] = 8
  k[:1] = 9
  k[k == 9] = 10
  k[0] = 9                            # group 9 has one row, group 7 none
  return (k, (r.standard_normal(2000) + 3).astype(np.float32)), dict(G=32)


case("groupby_mean_var_two_launches", groupby_mean_var, _mv_make, _mv_ref, 1e-4)


# ---------------------------------------------------------------- sort-based group-by: head flags, ids by a scan
@mg.mgpu_kernel(out_shape=lambda k: S((ml.cdiv(k.shape[0], 256),), I32), grid=lambda k: (ml.cdiv(k.shape[0], 256),))
def count_heads(keys, counts):
  pid = ml.program_id(0)
  offs = pid * 256 + ml.arange(0, 256)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  prev = ml.load(keys.at[offs - 1], mask=m & (offs > 0), other=0)
  counts[pid] = ml.sum((m & ((offs == 0) | (k != prev))).astype(I32))


@mg.mgpu_kernel(out_shape=lambda k, v, b: (S(k.shape, k.dtype), S(v.shape, F32), S(k.shape, I32)),
                grid=lambda k, v, b: (ml.cdiv(k.shape[0], 256),))
def reduce_by_key(keys, vals, base, ukeys, sums, sizes):
  """Sorted keys: a group starts where the key changes; its id is the heads counted so far (the blocks' counts
  scanned between launches); sums and sizes by atomics at the id, the key written at its head."""
  pid = ml.program_id(0)
  offs = pid * 256 + ml.arange(0, 256)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  prev = ml.load(keys.at[offs - 1], mask=m & (offs > 0), other=0)
  head = m & ((offs == 0) | (k != prev))
  gid = base[pid] + ml.cumsum(head.astype(I32)) - 1
  ml.store(ukeys.at[gid], k, mask=head)
  ml.atomic_add(sums.at[gid], ml.load(vals.at[offs], mask=m, other=0.0), mask=m)
  ml.atomic_add(sizes.at[gid], 1, mask=m)


def sorted_groupby(keys, vals, interpret=False):
  c = count_heads(keys, interpret=interpret)
  uk, s, n = reduce_by_key(keys, vals, jnp.cumsum(c) - c, interpret=interpret)
  return uk, s, n, jnp.sum(c)


def _rbk_make(seed):
  r = rng_of(seed)
  return (np.sort(r.integers(-50, 200, 1500)).astype(np.int32), r.standard_normal(1500).astype(np.float32)), {}


def _rbk_ref(k, v):
  u, start, cnt = np.unique(k, return_index=True, return_counts=True)
  sums = np.add.reduceat(v.astype(np.float64), start)
  pad = len(k) - len(u)
  return (np.concatenate([u, np.zeros(pad, np.int32)]), np.concatenate([sums, np.zeros(pad)]),
          np.concatenate([cnt, np.zeros(pad, int)]), np.int32(len(u)))


case("sort_based_reduce_by_key", sorted_groupby, _rbk_make, _rbk_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda rf, ls, q, p, d: (S((4,), F32), S((4,), F32), S((4,), F32), S((4,), I32)),
                grid=lambda rf, ls, q, p, d: (ml.cdiv(rf.shape[0], 256),))
def tpch_q1(rf, ls, qty, price, disc, sum_qty, sum_price, sum_disc_price, count):
  """TPC-H Q1's four groups (returnflag x linestatus), reduced in the block first, one atomic a group a block."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < rf.shape[0]
  g = ml.load(rf.at[offs], mask=m, other=0) * 2 + ml.load(ls.at[offs], mask=m, other=0)
  q = ml.load(qty.at[offs], mask=m, other=0.0)
  p = ml.load(price.at[offs], mask=m, other=0.0)
  dp = p * (1.0 - ml.load(disc.at[offs], mask=m, other=0.0))
  for j in ml.static_range(4):
    sel = m & (g == j)
    ml.atomic_add(sum_qty.at[j], ml.sum(ml.where(sel, q, 0.0)))
    ml.atomic_add(sum_price.at[j], ml.sum(ml.where(sel, p, 0.0)))
    ml.atomic_add(sum_disc_price.at[j], ml.sum(ml.where(sel, dp, 0.0)))
    ml.atomic_add(count.at[j], ml.sum(sel.astype(I32)))


def _q1_make(seed):
  r = rng_of(seed)
  n = 2500
  return (r.integers(0, 2, n).astype(np.int32), r.integers(0, 2, n).astype(np.int32), r.integers(1, 50, n).astype(np.float32),
          r.uniform(100, 1000, n).astype(np.float32), (r.integers(0, 11, n) / 100).astype(np.float32)), {}


def _q1_ref(rf, ls, q, p, d):
  g = rf * 2 + ls
  out = [np.zeros(4) for _ in range(3)] + [np.zeros(4, np.int32)]
  for j in range(4):
    s = g == j
    out[0][j] = q[s].astype(np.float64).sum()
    out[1][j] = p[s].astype(np.float64).sum()
    out[2][j] = (p[s].astype(np.float64) * (1 - d[s].astype(np.float64))).sum()
    out[3][j] = s.sum()
  return tuple(out)


case("tpch_q1_four_groups", tpch_q1, _q1_make, _q1_ref, 1e-5)


# ---------------------------------------------------------------- open addressing, linear probing, CAS inserts
@ml.inline
def hash32(k, mask):
  """murmur3's fmix32 of an int32 key, masked to the table's power-of-two capacity."""
  h = ml.bitcast(k, U32)
  h ^= h >> 16
  h *= 0x85EBCA6B
  h ^= h >> 13
  h *= 0xC2B2AE35
  h ^= h >> 16
  return (h & mask).astype(I32)


def hash32_np(k, mask):
  h = k.astype(np.uint32)
  h ^= h >> np.uint32(16)
  h = (h * np.uint32(0x85EBCA6B)).astype(np.uint32)
  h ^= h >> np.uint32(13)
  h = (h * np.uint32(0xC2B2AE35)).astype(np.uint32)
  h ^= h >> np.uint32(16)
  return (h & np.uint32(mask)).astype(np.int32)


def table_np(keys, cap):
  """The table a serial insert in key order builds (the slots a key lands in depend on the order; the set of keys in
  each probe chain does not, so the references compare what is found, not where)."""
  t = np.full(cap, EMPTY, np.int32)
  for k in keys:
    s = hash32_np(np.array([k]), cap - 1)[0]
    while t[s] != EMPTY and t[s] != k:
      s = (s + 1) & (cap - 1)
    t[s] = k
  return t


@mg.mgpu_kernel(out_shape=lambda k, v, t: (S(t.shape, I32), S(t.shape, F32), S(t.shape, I32)),
                grid=lambda k, v, t: (ml.cdiv(k.shape[0], 128),), input_output_aliases={2: 0})
def hash_groupby(keys, vals, table_in, table, sums, counts):
  """A hash group-by over arbitrary int32 keys: each lane inserts its key with atomic CAS, probing linearly until it
  finds an empty slot or its key, then adds its value at that slot (table_in: all EMPTY, updated in place)."""
  cap = table.shape[0]
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  slot = hash32(k, cap - 1)
  active = m
  while ml.sum(active.astype(I32)) > 0:
    old = ml.atomic_cas(table.at[slot], EMPTY, ml.where(active, k, EMPTY))
    found = (old == EMPTY) | (old == k)
    active = active & ~found
    slot = ml.where(active, (slot + 1) & (cap - 1), slot)
  ml.atomic_add(sums.at[slot], ml.load(vals.at[offs], mask=m, other=0.0), mask=m)
  ml.atomic_add(counts.at[slot], 1, mask=m)


def _hg_make(seed):
  r = rng_of(seed)
  universe = r.choice(10**6, 60, replace=False).astype(np.int32) - 500000
  return (universe[r.integers(0, 60, 1000)], r.standard_normal(1000).astype(np.float32), np.full(128, EMPTY, np.int32)), {}


def hash_groupby_by_key(keys, vals, table_in, interpret=False):
  """The table's groups, ordered by key (slots differ between insert orders)."""
  t, s, c = hash_groupby(keys, vals, table_in, interpret=interpret)
  order = jnp.argsort(jnp.where(t == EMPTY, jnp.iinfo(jnp.int32).max, t))
  return t[order], s[order], c[order]


def _hg_ref(keys, vals, table_in):
  u = np.unique(keys)
  sums = np.array([vals[keys == x].astype(np.float64).sum() for x in u])
  cnt = np.array([(keys == x).sum() for x in u], np.int32)
  pad = len(table_in) - len(u)
  return (np.concatenate([u, np.full(pad, EMPTY, np.int32)]), np.concatenate([sums, np.zeros(pad)]),
          np.concatenate([cnt, np.zeros(pad, np.int32)]))


case("hash_groupby_cas_linear_probing", hash_groupby_by_key, _hg_make, _hg_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda k, t: (S(t.shape, I32), S(t.shape, I32)), grid=lambda k, t: (ml.cdiv(k.shape[0], 128),),
                input_output_aliases={1: 0})
def join_build(keys, table_in, table, payload):
  """A hash join's build side (unique keys): the key by CAS, the row id stored at the slot it won."""
  cap = table.shape[0]
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  slot = hash32(k, cap - 1)
  active = m
  while ml.any(active):
    old = ml.atomic_cas(table.at[slot], EMPTY, ml.where(active, k, EMPTY))
    won = active & (old == EMPTY)
    ml.store(payload.at[slot], offs, mask=won)
    active = active & ~won
    slot = ml.where(active, (slot + 1) & (cap - 1), slot)


@mg.mgpu_kernel(out_shape=lambda p, t, pl: S(p.shape, I32), grid=lambda p, t, pl: (ml.cdiv(p.shape[0], 128),))
def join_probe(probe, table, payload, match):
  """The probe side: each lane walks its chain until its key or an empty slot; the build row id, or -1."""
  cap = table.shape[0]
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < probe.shape[0]
  k = ml.load(probe.at[offs], mask=m, other=0)
  slot = hash32(k, cap - 1)
  res = ml.full((128,), -1, I32)
  active = m
  while ml.any(active):
    tk = table[slot]
    hit = active & (tk == k)
    res = ml.where(hit, payload[slot], res)
    active = active & (tk != k) & (tk != EMPTY)
    slot = (slot + 1) & (cap - 1)
  ml.store(match.at[offs], res, mask=m)


def hash_join(build, probe, table_in, interpret=False):
  t, pl = join_build(build, table_in, interpret=interpret)
  return join_probe(probe, t, pl, interpret=interpret)


def _hj_make(seed):
  r = rng_of(seed)
  build = r.choice(5000, 300, replace=False).astype(np.int32)
  probe = r.integers(0, 5000, 700).astype(np.int32)
  return (build, probe, np.full(1024, EMPTY, np.int32)), {}


def _hj_ref(build, probe, table_in):
  where = {int(k): i for i, k in enumerate(build)}
  return np.array([where.get(int(k), -1) for k in probe], np.int32)


case("hash_join_build_cas_then_probe", hash_join, _hj_make, _hj_ref, 0)


@mg.mgpu_kernel(out_shape=lambda p, t: (S(p.shape, jnp.bool_), S((), I32)), grid=lambda p, t: (ml.cdiv(p.shape[0], 256),))
def semi_anti_join(probe, table, semi, anti_count):
  """EXISTS (semi join) as a bool column, and NOT EXISTS (anti join) counted, against a built table."""
  cap = table.shape[0]
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < probe.shape[0]
  k = ml.load(probe.at[offs], mask=m, other=0)
  slot = hash32(k, cap - 1)
  found = ml.zeros((256,), jnp.bool_)
  active = m
  for _ in range(cap):
    tk = table[slot]
    found = found | (active & (tk == k))
    active = active & (tk != k) & (tk != EMPTY)
    slot = (slot + 1) & (cap - 1)
  ml.store(semi.at[offs], found, mask=m)
  ml.atomic_add(anti_count, ml.sum((m & ~found).astype(I32)))


def _sa_make(seed):
  r = rng_of(seed)
  build = r.choice(3000, 200, replace=False).astype(np.int32)
  return (r.integers(0, 3000, 600).astype(np.int32), table_np(build, 512)), {}


def _sa_ref(probe, table):
  s = np.isin(probe, table[table != EMPTY])
  return s, np.int32((~s).sum())


case("semi_and_anti_join_static_probe_bound", semi_anti_join, _sa_make, _sa_ref, 0)


# ---------------------------------------------------------------- radix partitioning
@mg.mgpu_kernel(out_shape=lambda k, *, SHIFT: S((256,), I32), grid=lambda k, *, SHIFT: (ml.cdiv(k.shape[0], 512),))
def radix_histogram(keys, hist, *, SHIFT: ml.constexpr):
  """The digit histogram of a radix pass over int32 keys (the sign bit flipped so negatives order first)."""
  offs = ml.program_id(0) * 512 + ml.arange(0, 512)
  m = offs < keys.shape[0]
  u = ml.bitcast(ml.load(keys.at[offs], mask=m, other=0), U32) ^ 0x80000000
  d = ((u >> SHIFT) & 0xFF).astype(I32)
  ml.atomic_add(hist.at[d], 1, mask=m)


def _radix_ref(k, *, SHIFT):
  u = k.astype(np.uint32) ^ np.uint32(0x80000000)
  return np.bincount((u >> np.uint32(SHIFT)) & np.uint32(0xFF), minlength=256).astype(np.int32)


case("radix_digit_histogram_sign_flipped", radix_histogram,
     lambda s: ((rng_of(s).integers(-2**31, 2**31, 5000, dtype=np.int64).astype(np.int32),), dict(SHIFT=24)), _radix_ref, 0)


@mg.mgpu_kernel(out_shape=lambda k, *, P, BLOCK: S((ml.cdiv(k.shape[0], BLOCK), P), I32),
                grid=lambda k, *, P, BLOCK: (ml.cdiv(k.shape[0], BLOCK),))
def partition_counts(keys, counts, *, P: ml.constexpr, BLOCK: ml.constexpr):
  pid = ml.program_id(0)
  offs = pid * BLOCK + ml.arange(0, BLOCK)
  m = offs < keys.shape[0]
  part = hash32(ml.load(keys.at[offs], mask=m, other=0), P - 1)
  counts.at[pid][...] = ml.sum((m[:, None] & (part[:, None] == ml.arange(0, P)[None, :])).astype(I32), axis=0)


@mg.mgpu_kernel(out_shape=lambda k, base, *, P, BLOCK: S(k.shape, k.dtype),
                grid=lambda k, base, *, P, BLOCK: (ml.cdiv(k.shape[0], BLOCK),))
def partition_scatter(keys, base, out, *, P: ml.constexpr, BLOCK: ml.constexpr):
  """A stable hash partition: each row's place is its partition's base for this block plus the rows of its partition
  before it in the block (a rank by a (BLOCK, BLOCK) comparison)."""
  pid = ml.program_id(0)
  offs = pid * BLOCK + ml.arange(0, BLOCK)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  part = hash32(k, P - 1)
  i = ml.arange(0, BLOCK)
  before = (part[:, None] == part[None, :]) & (i[None, :] < i[:, None]) & m[None, :]
  rank = ml.sum(before.astype(I32), axis=1)
  b = base.at[pid][...]
  ml.store(out.at[b[part] + rank], k, mask=m)


def hash_partition(keys, *, P, interpret=False):
  c = partition_counts(keys, P=P, BLOCK=128, interpret=interpret)
  flat = c.T.reshape(-1)                              # partition-major, then block
  base = (jnp.cumsum(flat) - flat).reshape(P, -1).T
  return partition_scatter(keys, base, P=P, BLOCK=128, interpret=interpret)


def _hp_ref(k, *, P):
  part = hash32_np(k, P - 1)
  return k[np.argsort(part, kind="stable")]


case("hash_partition_stable_two_launches", hash_partition,
     lambda s: ((rng_of(s).integers(-10**6, 10**6, 1000).astype(np.int32),), dict(P=8)), _hp_ref, 0)
