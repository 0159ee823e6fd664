"""Probe 70a's corpus, its first part: predicate filters and stream compaction (a count pass, a scan between launches
and a scatter pass; an atomic ticket a block; a running base in one program), selection vectors, validity bitmaps
packed in uint32 words and Arrow's uint8 bytes (pack, unpack, popcount, AND of two, null-aware aggregates, COALESCE),
IN lists and CASE expressions, as cuDF, Crystal and HeavyDB authors write them.
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32, U32, U8 = jnp.float32, jnp.int32, jnp.uint32, jnp.uint8
CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def rng_of(seed):
  return np.random.default_rng(7000 + seed)


def pack_bits_np(m):
  """LSB-first uint32 words of a bool array (Arrow's and cuDF's bit order), padded with zeros."""
  m = np.asarray(m, bool)
  pad = (-len(m)) % 32
  b = np.concatenate([m, np.zeros(pad, bool)]).reshape(-1, 32).astype(np.uint64)
  return (b << np.arange(32, dtype=np.uint64)).sum(1).astype(np.uint32)


# ---------------------------------------------------------------- stream compaction: count, scan, scatter
@mg.mgpu_kernel(out_shape=lambda x, *, T, BLOCK: S((ml.cdiv(x.shape[0], BLOCK),), I32),
                grid=lambda x, *, T, BLOCK: (ml.cdiv(x.shape[0], BLOCK),))
def filter_count(x, counts, *, T: ml.constexpr, BLOCK: ml.constexpr):
  pid = ml.program_id(0)
  offs = pid * BLOCK + ml.arange(0, BLOCK)
  m = offs < x.shape[0]
  v = ml.load(x.at[offs], mask=m, other=0.0)
  counts[pid] = ml.sum((m & (v > T)).astype(I32))


@mg.mgpu_kernel(out_shape=lambda x, base, *, T, BLOCK: S(x.shape, x.dtype),
                grid=lambda x, base, *, T, BLOCK: (ml.cdiv(x.shape[0], BLOCK),))
def filter_scatter(x, base, out, *, T: ml.constexpr, BLOCK: ml.constexpr):
  pid = ml.program_id(0)
  offs = pid * BLOCK + ml.arange(0, BLOCK)
  m = offs < x.shape[0]
  v = ml.load(x.at[offs], mask=m, other=0.0)
  keep = m & (v > T)
  k = keep.astype(I32)
  pos = base[pid] + ml.cumsum(k) - k
  ml.store(out.at[pos], v, mask=keep)


def filter_compact(x, *, T, interpret=False):
  counts = filter_count(x, T=T, BLOCK=128, interpret=interpret)
  base = jnp.cumsum(counts) - counts
  return filter_scatter(x, base, T=T, BLOCK=128, interpret=interpret), jnp.sum(counts)


def _compact_ref(x, *, T):
  kept = x[x > T]
  return np.concatenate([kept, np.zeros(len(x) - len(kept), x.dtype)]), np.int32(len(kept))


case("filter_count_scan_scatter", filter_compact,
     lambda s: ((rng_of(s).standard_normal(1000).astype(np.float32),), dict(T=0.5)), _compact_ref, 0)


# ---------------------------------------------------------------- stream compaction: an atomic ticket a block
@mg.mgpu_kernel(out_shape=lambda k, v, *, BLOCK: (S(k.shape, k.dtype), S(v.shape, v.dtype), S((), I32)),
                grid=lambda k, v, *, BLOCK: (ml.cdiv(k.shape[0], BLOCK),))
def compact_pairs_ticket(keys, vals, ok, ov, count, *, BLOCK: ml.constexpr):
  """Rows (key, value) where key is even and value is positive; each block takes its place in the output with one
  atomic ticket (the output's order is the blocks' arrival order, sorted by the caller)."""
  offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=1)
  v = ml.load(vals.at[offs], mask=m, other=0.0)
  keep = m & (k % 2 == 0) & (v > 0.0)
  f = keep.astype(I32)
  base = ml.atomic_add(count, ml.sum(f))
  pos = base + ml.cumsum(f) - f
  ml.store(ok.at[pos], k, mask=keep)
  ml.store(ov.at[pos], v, mask=keep)


def compact_pairs(keys, vals, interpret=False):
  ok, ov, n = compact_pairs_ticket(keys, vals, BLOCK=128, interpret=interpret)
  order = jnp.argsort(jnp.where(jnp.arange(ok.shape[0]) < n, ok, jnp.iinfo(jnp.int32).max), stable=True)
  return ok[order], ov[order], n


def _pairs_make(seed):
  r = rng_of(seed)
  return (r.permutation(700).astype(np.int32), r.standard_normal(700).astype(np.float32)), {}


def _pairs_ref(k, v):
  keep = (k % 2 == 0) & (v > 0)
  n = int(keep.sum())
  order = np.argsort(k[keep], kind="stable")
  ok = np.concatenate([k[keep][order], np.zeros(len(k) - n, np.int32)])
  ov = np.concatenate([v[keep][order], np.zeros(len(k) - n, np.float32)])
  # the tail's zeros sort last as int32 max: their order is the tail's own
  return ok, ov, np.int32(n)


case("compact_pairs_atomic_ticket", compact_pairs, _pairs_make, _pairs_ref, 0)


# ---------------------------------------------------------------- a selection vector in one program
@mg.mgpu_kernel(out_shape=lambda x, *, LO, HI, BLOCK: (S(x.shape, I32), S((), I32)), grid=(1,))
def selection_vector(x, sel, count, *, LO: ml.constexpr, HI: ml.constexpr, BLOCK: ml.constexpr):
  """Row ids where LO <= x < HI (SQL's BETWEEN), a running base across the tiles of one program."""
  n = x.shape[0]
  base = 0
  for s in range(0, n, BLOCK):
    offs = s + ml.arange(0, BLOCK)
    m = offs < n
    v = ml.load(x.at[offs], mask=m, other=LO - 1)
    keep = m & (v >= LO) & (v < HI)
    f = keep.astype(I32)
    ml.store(sel.at[base + ml.cumsum(f) - f], offs, mask=keep)
    base += ml.sum(f)
  count[...] = base


def _sel_ref(x, *, LO, HI, **k):
  idx = np.nonzero((x >= LO) & (x < HI))[0].astype(np.int32)
  return np.concatenate([idx, np.zeros(len(x) - len(idx), np.int32)]), np.int32(len(idx))


case("selection_vector_between_running_base", selection_vector,
     lambda s: ((rng_of(s).integers(0, 100, 900).astype(np.int32),), dict(LO=20, HI=45, BLOCK=256)), _sel_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x, sel: S(sel.shape, x.dtype), grid=lambda x, sel: (ml.cdiv(sel.shape[0], 128),))
def gather_by_selection(x, sel, out):
  """The selection vector applied: a column gathered at the surviving row ids (cuDF's gather map)."""
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < sel.shape[0]
  ids = ml.load(sel.at[offs], mask=m, other=0)
  ml.store(out.at[offs], ml.load(x.at[ids], mask=m, other=0.0), mask=m)


case("gather_map_applied", gather_by_selection,
     lambda s: ((rng_of(s).standard_normal(500).astype(np.float32), rng_of(s + 1).integers(0, 500, 300).astype(np.int32)), {}),
     lambda x, sel: x[sel], 0)


# ---------------------------------------------------------------- validity bitmaps (uint32 words, LSB first)
@mg.mgpu_kernel(out_shape=lambda m: S((m.shape[0] // 32,), U32), grid=lambda m: (m.shape[0] // 1024,))
def pack_bitmap(m, words):
  """A bool column packed 32 rows a word (cuDF's valid_if): each program packs 1024 rows into 32 words."""
  pid = ml.program_id(0)
  bits = m.at[ml.ds(pid * 1024, 1024)][...].reshape(32, 32).astype(U32)
  sh = ml.arange(0, 32).astype(U32)
  words.at[ml.ds(pid * 32, 32)][...] = ml.sum(bits << sh[None, :], axis=1)


case("pack_bool_column_to_uint32_words", pack_bitmap, lambda s: ((rng_of(s).random(2048) < 0.3,), {}),
     lambda m: pack_bits_np(m), 0)


@mg.mgpu_kernel(out_shape=lambda w, *, N: S((N,), jnp.bool_), grid=lambda w, *, N: (ml.cdiv(N, 128),))
def unpack_bitmap(words, valid, *, N: ml.constexpr):
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = i < N
  w = ml.load(words.at[i >> 5], mask=m, other=0)
  ml.store(valid.at[i], ((w >> (i & 31).astype(U32)) & 1) != 0, mask=m)


def _unpack_make(seed):
  return (pack_bits_np(rng_of(seed).random(1000) < 0.6),), dict(N=1000)


def _unpack_ref(w, *, N):
  return ((w[np.arange(N) >> 5] >> (np.arange(N) & 31).astype(np.uint32)) & 1) != 0


case("unpack_uint32_bitmap_to_bools", unpack_bitmap, _unpack_make, _unpack_ref, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape, U32), S((), I32)), grid=lambda a, b: (ml.cdiv(a.shape[0], 128),))
def bitmap_and_popcount(a, b, out, count):
  """Two predicates' bitmaps ANDed (WHERE p AND q) and the survivors counted with popcount."""
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < a.shape[0]
  w = ml.load(a.at[offs], mask=m, other=0) & ml.load(b.at[offs], mask=m, other=0)
  ml.store(out.at[offs], w, mask=m)
  ml.atomic_add(count, ml.sum(jax.lax.population_count(w).astype(I32)))


def _and_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32), r.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32)), {}


def _popcount_np(w):
  return np.unpackbits(np.asarray(w, np.uint32).view(np.uint8)).sum()


case("bitmap_and_popcount", bitmap_and_popcount, _and_make,
     lambda a, b: (a & b, np.int32(_popcount_np(a & b))), 0)


@mg.mgpu_kernel(out_shape=lambda x, w: (S((), F32), S((), I32)), grid=lambda x, w: (ml.cdiv(x.shape[0], 256),))
def null_aware_sum_count(x, words, total, count):
  """SUM(x) and COUNT(x) over the rows the validity bitmap marks valid (nulls skipped, as SQL's aggregates do)."""
  i = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = i < x.shape[0]
  valid = m & (((words[i // 32] >> (i % 32).astype(U32)) & 1) == 1)
  v = ml.load(x.at[i], mask=valid, other=0.0)
  ml.atomic_add(total, ml.sum(v))
  ml.atomic_add(count, ml.sum(valid.astype(I32)))


def _nulls_make(seed):
  r = rng_of(seed)
  x = r.standard_normal(1000).astype(np.float32)
  return (x, pack_bits_np(r.random(1000) < 0.7)), {}


def _nulls_ref(x, w):
  valid = _unpack_ref(w, N=len(x))
  return np.float32(x[valid].astype(np.float64).sum()), np.int32(valid.sum())


case("null_aware_sum_and_count", null_aware_sum_count, _nulls_make, _nulls_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda vb, *, N: S((), I32), grid=lambda vb, *, N: (ml.cdiv(N, 512),))
def arrow_null_count(vb, nulls, *, N: ml.constexpr):
  """Arrow's validity bytes (uint8, LSB first): the null count of N rows (bits past N are not rows)."""
  i = ml.program_id(0) * 512 + ml.arange(0, 512)
  m = i < N
  byte = ml.load(vb.at[i >> 3], mask=m, other=0)
  bit = (byte >> (i & 7)) & 1
  ml.atomic_add(nulls, ml.sum(ml.where(m & (bit == 0), 1, 0)))


def _arrow_make(seed):
  m = rng_of(seed).random(1001) < 0.8
  return (np.packbits(m, bitorder="little"),), dict(N=1001)


case("arrow_validity_bytes_null_count", arrow_null_count, _arrow_make,
     lambda vb, *, N: np.int32(N - np.unpackbits(vb, bitorder="little")[:N].sum()), 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 8,), U8), grid=lambda x: (x.shape[0] // 1024,))
def predicate_to_arrow_bytes(x, out):
  """x > 0 packed into Arrow's LSB-first validity bytes, 8 rows a byte."""
  pid = ml.program_id(0)
  bits = (x.at[ml.ds(pid * 1024, 1024)][...] > 0.0).reshape(128, 8).astype(U8)
  out.at[ml.ds(pid * 128, 128)][...] = ml.sum(bits << ml.arange(0, 8).astype(U8)[None, :], axis=1).astype(U8)


case("predicate_packed_to_arrow_bytes", predicate_to_arrow_bytes,
     lambda s: ((rng_of(s).standard_normal(2048).astype(np.float32),), {}),
     lambda x: np.packbits(x > 0, bitorder="little"), 0)


@mg.mgpu_kernel(out_shape=lambda x, w, *, FILL: S(x.shape, x.dtype), grid=lambda x, w, *, FILL: (x.shape[0] // 128,))
def coalesce(x, words, out, *, FILL: ml.constexpr):
  """COALESCE(x, FILL): a null row (its validity bit clear) takes the fill value."""
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  wd = words.at[ml.ds(ml.program_id(0) * 4, 4)][...]
  bit = (wd[:, None] >> ml.arange(0, 32).astype(U32)[None, :]) & 1
  out.at[ml.ds(ml.program_id(0) * 128, 128)][...] = ml.where(bit.reshape(128) == 1, x[i], FILL)


case("coalesce_nulls_by_bitmap_words", coalesce,
     lambda s: ((rng_of(s).standard_normal(512).astype(np.float32), pack_bits_np(rng_of(s).random(512) < 0.5)), dict(FILL=-1.0)),
     lambda x, w, *, FILL: np.where(_unpack_ref(w, N=len(x)), x, np.float32(FILL)), 0)


@mg.mgpu_kernel(out_shape=lambda a, b, va, vb: (S(va.shape, U32), S(va.shape, U32)),
                grid=lambda a, b, va, vb: (a.shape[0] // 1024,))
def null_aware_less(a, b, va, vb, res, res_valid):
  """a < b in SQL's three-valued logic: the result is valid where both operands are; its value bits are packed
  where it is valid (cuDF's binary op with null masks)."""
  pid = ml.program_id(0)
  lt = (a.at[ml.ds(pid * 1024, 1024)][...] < b.at[ml.ds(pid * 1024, 1024)][...]).reshape(32, 32)
  w = ml.sum(lt.astype(U32) << ml.arange(0, 32).astype(U32)[None, :], axis=1)
  both = va.at[ml.ds(pid * 32, 32)][...] & vb.at[ml.ds(pid * 32, 32)][...]
  res.at[ml.ds(pid * 32, 32)][...] = w & both
  res_valid.at[ml.ds(pid * 32, 32)][...] = both


def _nl_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 10, 2048).astype(np.int32), r.integers(0, 10, 2048).astype(np.int32),
          pack_bits_np(r.random(2048) < 0.8), pack_bits_np(r.random(2048) < 0.8)), {}


case("null_aware_compare_packed", null_aware_less, _nl_make,
     lambda a, b, va, vb: (pack_bits_np(a < b) & va & vb, va & vb), 0)


# ---------------------------------------------------------------- IN lists and CASE expressions
@mg.mgpu_kernel(out_shape=lambda x, s: S(x.shape, jnp.bool_), grid=lambda x, s: (ml.cdiv(x.shape[0], 128),))
def in_list(x, s, out):
  """x IN (s0, s1, ...): a small list compared against every row."""
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < x.shape[0]
  v = ml.load(x.at[offs], mask=m, other=-1)
  ml.store(out.at[offs], ml.any(v[:, None] == s[...][None, :], axis=1), mask=m)


case("in_list_membership", in_list,
     lambda s: ((rng_of(s).integers(0, 50, 600).astype(np.int32), np.array([3, 7, 11, 19, 23, 29, 31, 41], np.int32)), {}),
     lambda x, s: np.isin(x, s), 0)


@mg.mgpu_kernel(out_shape=lambda p, q: S(p.shape, I32), grid=lambda p, q: (p.shape[0] // 256,))
def case_when(price, qty, out):
  """CASE WHEN price > 100 THEN 3 WHEN price > 10 AND qty >= 5 THEN 2 WHEN qty = 0 THEN 0 ELSE 1 END."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  p = price.at[r][...]
  q = qty.at[r][...]
  out.at[r][...] = ml.where(p > 100.0, 3, ml.where((p > 10.0) & (q >= 5), 2, ml.where(q == 0, 0, 1)))


def _case_ref(p, q):
  return np.select([p > 100, (p > 10) & (q >= 5), q == 0], [3, 2, 0], 1).astype(np.int32)


case("case_when_categories", case_when,
     lambda s: ((rng_of(s).uniform(0, 200, 512).astype(np.float32), rng_of(s).integers(0, 10, 512).astype(np.int32)), {}),
     _case_ref, 0)


@mg.mgpu_kernel(out_shape=lambda sd, p, d, q, *, LO, HI: S((), F32), grid=lambda sd, p, d, q, *, LO, HI: (ml.cdiv(sd.shape[0], 256),))
def tpch_q6(shipdate, price, disc, qty, revenue, *, LO: ml.constexpr, HI: ml.constexpr):
  """TPC-H Q6 (Crystal's fused select-aggregate): SUM(price * discount) WHERE shipdate in [LO, HI) AND discount
  BETWEEN 0.05 AND 0.07 AND quantity < 24, one atomic a block."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < shipdate.shape[0]
  d = ml.load(shipdate.at[offs], mask=m, other=0)
  dc = ml.load(disc.at[offs], mask=m, other=0.0)
  q = ml.load(qty.at[offs], mask=m, other=0)
  keep = m & (d >= LO) & (d < HI) & (dc >= 0.05) & (dc <= 0.07) & (q < 24)
  rev = ml.where(keep, ml.load(price.at[offs], mask=m, other=0.0) * dc, 0.0)
  ml.atomic_add(revenue, ml.sum(rev))


def _q6_make(seed):
  r = rng_of(seed)
  n = 3000
  return (r.integers(8000, 10000, n).astype(np.int32), r.uniform(1, 100, n).astype(np.float32),
          (r.integers(0, 11, n) / 100).astype(np.float32), r.integers(1, 51, n).astype(np.int32)), dict(LO=8766, HI=9131)


def _q6_ref(sd, p, d, q, *, LO, HI):
  keep = (sd >= LO) & (sd < HI) & (d >= np.float32(0.05)) & (d <= np.float32(0.07)) & (q < 24)
  return np.float32((p[keep].astype(np.float64) * d[keep]).sum())


case("tpch_q6_select_aggregate", tpch_q6, _q6_make, _q6_ref, 1e-5)
