"""Probe 70a's corpus, its fifth part: window functions over partitions (running sums a program a partition with a
carried total, a segmented scan of (flag, value) pairs, LAG / LEAD, ROW_NUMBER, RANK and DENSE_RANK, NTILE, a moving
average, FIRST_VALUE, an UNBOUNDED FOLLOWING sum and a median) and joins on sorted keys (match counts by a binary search of the other side, the pairs
materialised at scanned offsets, an intersection of unique keys), as DuckDB's and Polars' window and merge-join
operators compute them. Same CASES form as probe70a_filter.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70a_filter import F32, I32, S, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def _parts(r, n, max_len):
  """Partition offsets (a prefix of lengths, empty partitions included) covering n rows."""
  lens = []
  while sum(lens) < n:
    lens.append(int(r.integers(0, max_len + 1)))
  lens[-1] -= sum(lens) - n
  return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


def _per_part(po, fn, x):
  out = np.zeros(len(x), np.float64)
  for a, b in zip(po[:-1], po[1:]):
    out[a:b] = fn(x[a:b], a, b)
  return out


# ---------------------------------------------------------------- running sums per partition
@mg.mgpu_kernel(out_shape=lambda po, x: S(x.shape, F32), grid=lambda po, x: (po.shape[0] - 1,))
def running_sum_partition(po, x, out):
  """SUM(x) OVER (PARTITION BY p ORDER BY t ROWS UNBOUNDED PRECEDING): a program a partition, chunk by chunk with
  the total so far carried."""
  p = ml.program_id(0)
  start = po[p]
  end = po[p + 1]
  carry = 0.0
  for c in range(start, end, 128):
    offs = c + ml.arange(0, 128)
    m = offs < end
    v = ml.load(x.at[offs], mask=m, other=0.0)
    ml.store(out.at[offs], carry + ml.cumsum(v), mask=m)
    carry += ml.sum(v)


def _rs_make(seed):
  r = rng_of(seed)
  return (_parts(r, 1500, 400), r.standard_normal(1500).astype(np.float32)), {}


case("running_sum_program_a_partition", running_sum_partition, _rs_make,
     lambda po, x: _per_part(po, lambda v, a, b: np.cumsum(v.astype(np.float64)), x), 1e-5)


@mg.mgpu_kernel(out_shape=lambda pid, x: S(x.shape, F32), grid=lambda pid, x: (x.shape[0] // 512,))
def segmented_scan_block(part, x, out):
  """Within a block of 512 rows, a running sum that restarts where the partition id changes: an associative scan of
  (head flag, value) pairs (blocks start their own segments: the caller's partitions align to blocks)."""
  i = ml.program_id(0) * 512 + ml.arange(0, 512)
  p = part[i]
  prev = ml.load(part.at[i - 1], mask=(i % 512) > 0, other=-1)
  head = p != prev
  v = x[i]

  def combine(a, b):
    fa, va = a
    fb, vb = b
    return fa | fb, ml.where(fb, vb, va + vb)

  _, s = ml.associative_scan((head, v), 0, combine)
  out[i] = s


def _ss_make(seed):
  r = rng_of(seed)
  lens = r.integers(1, 60, 200)
  p = np.repeat(np.arange(200), lens)[:1024].astype(np.int32)
  p[512:] += 1000                                           # no partition spans the blocks
  return (p, r.standard_normal(1024).astype(np.float32)), {}


def _ss_ref(p, x):
  out = np.zeros(len(x))
  for i in range(len(x)):
    out[i] = x[i] + (out[i - 1] if i % 512 and p[i] == p[i - 1] else 0)
  return out


case("segmented_scan_flag_value_pairs", segmented_scan_block, _ss_make, _ss_ref, 1e-5)


# ---------------------------------------------------------------- LAG / LEAD, ROW_NUMBER, RANK, DENSE_RANK, NTILE
@mg.mgpu_kernel(out_shape=lambda p, x, *, D: (S(x.shape, F32), S(x.shape, F32)), grid=lambda p, x, *, D: (ml.cdiv(x.shape[0], 128),))
def lag_lead(part, x, lag, lead, *, D: ml.constexpr):
  """LAG(x, 1, D) and LEAD(x, 1, D) OVER (PARTITION BY p): the neighbour's value where it is in the same partition."""
  n = x.shape[0]
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = i < n
  p = ml.load(part.at[i], mask=m, other=-1)
  pp = ml.load(part.at[i - 1], mask=m & (i >= 1), other=-2)
  pn = ml.load(part.at[i + 1], mask=i + 1 < n, other=-2)
  xp = ml.load(x.at[i - 1], mask=m & (i >= 1), other=0.0)
  xn = ml.load(x.at[i + 1], mask=i + 1 < n, other=0.0)
  ml.store(lag.at[i], ml.where(pp == p, xp, D), mask=m)
  ml.store(lead.at[i], ml.where(pn == p, xn, D), mask=m)


def _ll_make(seed):
  r = rng_of(seed)
  return (np.repeat(np.arange(100), r.integers(1, 8, 100))[:400].astype(np.int32), r.standard_normal(400).astype(np.float32)), dict(D=-99.0)


def _ll_ref(p, x, *, D):
  lag = np.full(len(x), D, np.float32)
  lead = np.full(len(x), D, np.float32)
  same = p[1:] == p[:-1]
  lag[1:][same] = x[:-1][same]
  lead[:-1][same] = x[1:][same]
  return lag, lead


case("lag_lead_within_partition", lag_lead, _ll_make, _ll_ref, 0)


@mg.mgpu_kernel(out_shape=lambda po, v: (S(v.shape, I32), S(v.shape, I32), S(v.shape, I32)), grid=lambda po, v: (po.shape[0] - 1,))
def ranks(po, v, row_number, rank, dense_rank):
  """ROW_NUMBER, RANK and DENSE_RANK OVER (PARTITION BY p ORDER BY v), v sorted within each partition of at most
  256 rows: a peer group starts where v changes; RANK is its first row's number (a running max), DENSE_RANK the
  groups counted so far."""
  p = ml.program_id(0)
  start = po[p]
  end = po[p + 1]
  i = start + ml.arange(0, 256)
  m = i < end
  x = ml.load(v.at[i], mask=m, other=0)
  prev = ml.load(v.at[i - 1], mask=m & (i > start), other=0)
  head = m & ((i == start) | (x != prev))
  rn = i - start + 1
  ml.store(row_number.at[i], rn, mask=m)
  ml.store(rank.at[i], ml.cummax(ml.where(head, rn, 0)), mask=m)
  ml.store(dense_rank.at[i], ml.cumsum(head.astype(I32)), mask=m)


def _rank_make(seed):
  r = rng_of(seed)
  po = _parts(r, 800, 256)
  v = r.integers(0, 20, 800)
  for a, b in zip(po[:-1], po[1:]):
    v[a:b] = np.sort(v[a:b])
  return (po, v.astype(np.int32)), {}


def _rank_ref(po, v):
  rn, rk, dr = (np.zeros(len(v), np.int32) for _ in range(3))
  for a, b in zip(po[:-1], po[1:]):
    x = v[a:b]
    rn[a:b] = np.arange(1, b - a + 1)
    rk[a:b] = np.searchsorted(x, x, side="left") + 1
    dr[a:b] = np.searchsorted(np.unique(x), x) + 1
  return rn, rk, dr


case("row_number_rank_dense_rank", ranks, _rank_make, _rank_ref, 0)


@mg.mgpu_kernel(out_shape=lambda po, *, N, T: S((N,), I32), grid=lambda po, *, N, T: (po.shape[0] - 1,))
def ntile(po, out, *, N: ml.constexpr, T: ml.constexpr):
  """NTILE(T) OVER (PARTITION BY p): SQL's buckets, the first (count % T) of them one row longer."""
  p = ml.program_id(0)
  start = po[p]
  cnt = po[p + 1] - start
  q, rem = cnt // T, cnt % T
  for c in range(0, cnt, 128):
    j = c + ml.arange(0, 128)
    big = rem * (q + 1)
    t = ml.where(j < big, j // ml.maximum(q + 1, 1), rem + (j - big) // ml.maximum(q, 1))
    ml.store(out.at[start + j], t + 1, mask=j < cnt)


def _ntile_ref(po, *, N, T):
  out = np.zeros(N, np.int32)
  for a, b in zip(po[:-1], po[1:]):
    c = b - a
    if c:
      out[a:b] = np.concatenate([np.full(len(s), k + 1) for k, s in enumerate(np.array_split(np.arange(c), T))])
  return out


case("ntile_within_partition", ntile, lambda s: ((_parts(rng_of(s), 700, 300),), dict(N=700, T=4)), _ntile_ref, 0)


@mg.mgpu_kernel(out_shape=lambda p, x: S(x.shape, F32), grid=lambda p, x: (ml.cdiv(x.shape[0], 128),))
def moving_avg3(part, x, out):
  """AVG(x) OVER (PARTITION BY p ROWS 2 PRECEDING): the previous two rows where they share the partition."""
  n = x.shape[0]
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = i < n
  p = ml.load(part.at[i], mask=m, other=0)
  s = ml.load(x.at[i], mask=m, other=0.0)
  c = ml.full((128,), 1.0, F32)
  for k in ml.static_range(1, 3):
    same = m & (i >= k) & (ml.load(part.at[i - k], mask=m & (i >= k), other=-1) == p)
    s += ml.where(same, ml.load(x.at[i - k], mask=same, other=0.0), 0.0)
    c += same.astype(F32)
  ml.store(out.at[i], s / c, mask=m)


def _ma_ref(p, x):
  out = np.zeros(len(x))
  for i in range(len(x)):
    w = [x[j] for j in range(max(0, i - 2), i + 1) if p[j] == p[i]]
    out[i] = np.mean(np.float64(w))
  return out


case("moving_average_two_preceding", moving_avg3, lambda s: (_ll_make(s)[0], {}),
     lambda p, x, **k: _ma_ref(p, x), 1e-6)


@mg.mgpu_kernel(out_shape=lambda po, x: (S(x.shape, F32), S(x.shape, F32)), grid=lambda po, x: (po.shape[0] - 1,))
def first_last_value(po, x, first, last):
  """FIRST_VALUE(x) and LAST_VALUE(x) OVER the whole partition, broadcast to its rows."""
  p = ml.program_id(0)
  start = po[p]
  end = po[p + 1]
  if end > start:
    f = x[start]
    l = x[end - 1]
    for c in range(start, end, 128):
      offs = c + ml.arange(0, 128)
      m = offs < end
      ml.store(first.at[offs], ml.full((128,), f, F32), mask=m)
      ml.store(last.at[offs], ml.full((128,), l, F32), mask=m)


case("first_and_last_value_broadcast", first_last_value, _rs_make,
     lambda po, x: (_per_part(po, lambda v, a, b: np.full(b - a, v[0]), x), _per_part(po, lambda v, a, b: np.full(b - a, v[-1]), x)), 0)


# ---------------------------------------------------------------- joins on sorted keys
@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape, I32), S(a.shape, I32)), grid=lambda a, b: (ml.cdiv(a.shape[0], 128),))
def merge_join_counts(a, b, lo, cnt):
  """For each left key, the range of equal right keys: two vector binary searches over b in GMEM, a static number of
  halvings (lower and upper bound), each lane gathering its own midpoint."""
  nb = b.shape[0]
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = i < a.shape[0]
  k = ml.load(a.at[i], mask=m, other=0)
  l1 = ml.zeros((128,), I32)
  h1 = ml.full((128,), nb, I32)
  l2 = ml.zeros((128,), I32)
  h2 = ml.full((128,), nb, I32)
  for _ in ml.static_range(nb.bit_length()):
    m1 = (l1 + h1) // 2
    v1 = ml.load(b.at[ml.minimum(m1, nb - 1)])
    go1 = (l1 < h1) & (v1 < k)
    l1, h1 = ml.where(go1, m1 + 1, l1), ml.where(go1 | (l1 >= h1), h1, m1)
    m2 = (l2 + h2) // 2
    v2 = ml.load(b.at[ml.minimum(m2, nb - 1)])
    go2 = (l2 < h2) & (v2 <= k)
    l2, h2 = ml.where(go2, m2 + 1, l2), ml.where(go2 | (l2 >= h2), h2, m2)
  ml.store(lo.at[i], l1, mask=m)
  ml.store(cnt.at[i], l2 - l1, mask=m)


def _mj_make(seed):
  r = rng_of(seed)
  return (np.sort(r.integers(0, 300, 500)).astype(np.int32), np.sort(r.integers(0, 300, 700)).astype(np.int32)), {}


def _mj_ref(a, b):
  lo = np.searchsorted(b, a, "left")
  return lo.astype(np.int32), (np.searchsorted(b, a, "right") - lo).astype(np.int32)


case("merge_join_match_ranges_binary_search", merge_join_counts, _mj_make, _mj_ref, 0)


@mg.mgpu_kernel(out_shape=lambda lo, cnt, off, *, TOTAL: (S((TOTAL,), I32), S((TOTAL,), I32)),
                grid=lambda lo, cnt, off, *, TOTAL: (ml.cdiv(TOTAL, 128),))
def merge_join_pairs(lo, cnt, off, li, ri, *, TOTAL: ml.constexpr):
  """The join's pairs: output row q belongs to the left row whose scanned offset range holds it (a search of the
  inclusive offsets), and its right row is that left row's first match plus q's place in the range."""
  q = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = q < TOTAL
  ends = off[...]
  left = ml.searchsorted(ends, q, side="right")
  first = ends[left] - cnt[...][left]
  ml.store(li.at[q], left, mask=m)
  ml.store(ri.at[q], lo[...][left] + q - first, mask=m)


def merge_join(a, b, *, TOTAL, interpret=False):
  """TOTAL, the join's size, is known to the caller (a first launch's count read back): the output's shape."""
  lo, cnt = merge_join_counts(a, b, interpret=interpret)
  return merge_join_pairs(lo, cnt, jnp.cumsum(cnt), TOTAL=TOTAL, interpret=interpret)


def _mjp_make(seed):
  r = rng_of(seed)
  a, b = np.sort(r.integers(0, 200, 256)).astype(np.int32), np.sort(r.integers(0, 200, 300)).astype(np.int32)
  return (a, b), dict(TOTAL=int(_mj_ref(a, b)[1].sum()))


def _mjp_ref(a, b, **k):
  pairs = [(i, j) for i in range(len(a)) for j in range(np.searchsorted(b, a[i]), np.searchsorted(b, a[i], "right"))]
  return np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32)


case("merge_join_pairs_materialised", merge_join, _mjp_make, _mjp_ref, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape, a.dtype), S((), I32)), grid=lambda a, b: (ml.cdiv(a.shape[0], 256),))
def intersect_sorted(a, b, out, count):
  """The intersection of two sorted unique key columns: each key of a kept where searchsorted finds it in b."""
  i = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = i < a.shape[0]
  k = ml.load(a.at[i], mask=m, other=0)
  bs = b[...]
  pos = ml.minimum(ml.searchsorted(bs, k), b.shape[0] - 1)
  hit = m & (bs[pos] == k)
  h = hit.astype(I32)
  base = ml.atomic_add(count, ml.sum(h))
  ml.store(out.at[base + ml.cumsum(h) - h], k, mask=hit)


def intersect(a, b, interpret=False):
  o, n = intersect_sorted(a, b, interpret=interpret)
  return jnp.sort(jnp.where(jnp.arange(o.shape[0]) < n, o, jnp.iinfo(jnp.int32).max)), n


def _is_make(seed):
  r = rng_of(seed)
  return (np.sort(r.choice(3000, 700, replace=False)).astype(np.int32), np.sort(r.choice(3000, 512, replace=False)).astype(np.int32)), {}


def _is_ref(a, b):
  c = np.intersect1d(a, b)
  return np.concatenate([c, np.full(len(a) - len(c), np.iinfo(np.int32).max)]).astype(np.int32), np.int32(len(c))


case("intersect_sorted_unique_keys", intersect, _is_make, _is_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S((x.shape[0] // 256,), F32)), grid=lambda x: (x.shape[0] // 256,))
def following_and_median(x, following, median):
  """SUM(x) OVER (ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) of each block (a reversed cumsum), and the
  block's MEDIAN (PERCENTILE_CONT(0.5)) from its sorted values."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  v = x.at[r][...]
  following.at[r][...] = ml.cumsum(v, reverse=True)
  s = ml.sort(v)
  median[ml.program_id(0)] = (s[127] + s[128]) * 0.5


def _fm_ref(x):
  f = np.concatenate([np.cumsum(x[b:b + 256][::-1].astype(np.float64))[::-1] for b in range(0, len(x), 256)])
  return f, np.array([np.median(x[b:b + 256]) for b in range(0, len(x), 256)])


case("unbounded_following_sum_and_median", following_and_median,
     lambda s: ((rng_of(s).standard_normal(512).astype(np.float32),), {}), _fm_ref, 1e-5)
