"""Probe 70a's corpus, its third part: run-length encoding and decoding, unique / distinct, top-N, string kernels over
offset arrays of uint8 bytes (lengths, upper and lower case, prefix match, a byte counted, FNV-1a hashes), as cuDF's
strings column and Polars-GPU kernels do. Same CASES form as probe70a_filter.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70a_filter import F32, I32, U32, U8, S, rng_of, pack_bits_np

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- run-length encoding
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype), S(x.shape, I32), S((), I32)), grid=(1,))
def rle_encode_block(x, values, lengths, nruns):
  """One block: a run starts where the value changes; its id is the heads so far; the value lands at the id and the
  run's length is its end minus its start (the next head's position)."""
  n = x.shape[0]
  i = ml.arange(0, n)
  v = x[...]
  prev = ml.load(x.at[i - 1], mask=i > 0, other=0)
  head = (i == 0) | (v != prev)
  rid = ml.cumsum(head.astype(I32)) - 1
  ml.store(values.at[rid], v, mask=head)
  ml.atomic_add(lengths.at[rid], 1)
  nruns[...] = ml.sum(head.astype(I32))


def _rle_ref(x):
  head = np.concatenate([[True], x[1:] != x[:-1]])
  starts = np.nonzero(head)[0]
  lens = np.diff(np.concatenate([starts, [len(x)]]))
  pad = len(x) - len(starts)
  return (np.concatenate([x[starts], np.zeros(pad, x.dtype)]), np.concatenate([lens, np.zeros(pad, int)]),
          np.int32(len(starts)))


def _runs(r, n, hi):
  return np.repeat(r.integers(0, hi, n), r.integers(1, 6, n))[:n]


case("rle_encode_one_block", rle_encode_block, lambda s: ((_runs(rng_of(s), 512, 4).astype(np.int32),), {}), _rle_ref, 0)


@mg.mgpu_kernel(out_shape=lambda v, ends, *, N: S((N,), v.dtype), grid=lambda v, ends, *, N: (ml.cdiv(N, 128),))
def rle_decode(values, ends, out, *, N: ml.constexpr):
  """Each output row finds its run by a binary search of the runs' inclusive ends."""
  p = ml.program_id(0) * 128 + ml.arange(0, 128)
  run = ml.searchsorted(ends[...], p, side="right")
  ml.store(out.at[p], values[run], mask=p < N)


def _rld_make(seed):
  r = rng_of(seed)
  lens = r.integers(1, 9, 128)
  return (r.standard_normal(128).astype(np.float32), np.cumsum(lens).astype(np.int32)), dict(N=int(lens.sum()))


case("rle_decode_searchsorted_ends", rle_decode, _rld_make,
     lambda v, ends, *, N: np.repeat(v, np.diff(np.concatenate([[0], ends]))), 0)


@mg.mgpu_kernel(out_shape=lambda v, ln: S((1024,), v.dtype), grid=lambda v, ln: (v.shape[0],))
def rle_decode_runs(values, lengths, out):
  """The other port: one program a run, its start by a scan of the lengths before it, writing its rows."""
  r = ml.program_id(0)
  ls = lengths[...]
  start = ml.sum(ml.where(ml.arange(0, lengths.shape[0]) < r, ls, 0))
  n = lengths[r]
  offs = start + ml.arange(0, 16)
  ml.store(out.at[offs], ml.full((16,), values[r], values.dtype), mask=ml.arange(0, 16) < n)


def _rldr_make(seed):
  r = rng_of(seed)
  lens = np.full(128, 8)
  lens[r.permutation(128)[:64]] = r.integers(1, 16, 64)
  lens[-1] += 1024 - lens.sum()
  return (r.integers(0, 100, 128).astype(np.int32), lens.astype(np.int32)), {}


def _rldr_fix(s):
  (v, ln), kw = _rldr_make(s)
  if ln[-1] < 1 or ln[-1] > 16:               # keep every run between 1 and 16 rows
    ln = np.full(128, 8, np.int32)
  return (v, ln), kw


case("rle_decode_program_a_run", rle_decode_runs, _rldr_fix, lambda v, ln: np.repeat(v, ln), 0)


# ---------------------------------------------------------------- unique / distinct
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype), S((), I32)), grid=(1,))
def unique_sorted(x, out, count):
  """DISTINCT of a sorted column: the heads compacted, tile by tile with a running count."""
  n = x.shape[0]
  base = 0
  for s in range(0, n, 256):
    offs = s + ml.arange(0, 256)
    m = offs < n
    v = ml.load(x.at[offs], mask=m, other=0)
    prev = ml.load(x.at[offs - 1], mask=m & (offs > 0), other=0)
    head = m & ((offs == 0) | (v != prev))
    h = head.astype(I32)
    ml.store(out.at[base + ml.cumsum(h) - 1], v, mask=head)
    base += ml.sum(h)
  count[...] = base


def _uniq_ref(x):
  u = np.unique(x)
  return np.concatenate([u, np.zeros(len(x) - len(u), x.dtype)]), np.int32(len(u))


case("unique_of_sorted_running_count", unique_sorted,
     lambda s: ((np.sort(rng_of(s).integers(-300, 300, 1000)).astype(np.int32),), {}), _uniq_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x, *, DOMAIN: (S((DOMAIN // 32,), U32), S((), I32)),
                grid=lambda x, *, DOMAIN: (ml.cdiv(x.shape[0], 256),))
def distinct_bitset(x, bits, first_seen, *, DOMAIN: ml.constexpr):
  """COUNT(DISTINCT x) over a small domain: a bit a value set with atomic OR; a lane whose bit was clear before is
  the first to see its value, so the count is those lanes summed."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < x.shape[0]
  v = ml.load(x.at[offs], mask=m, other=0)
  bit = ml.full((256,), 1, U32) << (v % 32).astype(U32)
  old = ml.atomic_or(bits.at[v // 32], bit, mask=m)
  ml.atomic_add(first_seen, ml.sum((m & ((old & bit) == 0)).astype(I32)))


def _dist_ref(x, *, DOMAIN):
  m = np.zeros(DOMAIN, bool)
  m[x] = True
  return pack_bits_np(m), np.int32(m.sum())


case("count_distinct_atomic_or_bitset", distinct_bitset,
     lambda s: ((rng_of(s).integers(0, 700, 2000).astype(np.int32),), dict(DOMAIN=1024)), _dist_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_), grid=lambda x: (x.shape[0] // 256,))
def first_occurrence_flags(x, out):
  """Within each block of 256 rows, is this row the first of its value (a block-local DISTINCT marker)?"""
  v = x.at[ml.ds(ml.program_id(0) * 256, 256)][...]
  i = ml.arange(0, 256)
  dup = ml.any((v[:, None] == v[None, :]) & (i[None, :] < i[:, None]), axis=1)
  out.at[ml.ds(ml.program_id(0) * 256, 256)][...] = ~dup


def _first_ref(x):
  out = np.zeros(len(x), bool)
  for b in range(0, len(x), 256):
    _, idx = np.unique(x[b:b + 256], return_index=True)
    out[b + idx] = True
  return out


case("first_occurrence_in_block", first_occurrence_flags,
     lambda s: ((rng_of(s).integers(0, 100, 512).astype(np.int32),), {}), _first_ref, 0)


# ---------------------------------------------------------------- top-N (ORDER BY ... LIMIT)
@mg.mgpu_kernel(out_shape=lambda x, *, K: (S((ml.cdiv(x.shape[0], 256), K), F32), S((ml.cdiv(x.shape[0], 256), K), I32)),
                grid=lambda x, *, K: (ml.cdiv(x.shape[0], 256),))
def topk_blocks(x, vals, idx, *, K: ml.constexpr):
  pid = ml.program_id(0)
  offs = pid * 256 + ml.arange(0, 256)
  v = ml.load(x.at[offs], mask=offs < x.shape[0], other=float("-inf"))
  tv, ti = ml.top_k(v, K)
  vals.at[pid][...] = tv
  idx.at[pid][...] = ti + pid * 256


@mg.mgpu_kernel(out_shape=lambda v, i, *, K: (S((K,), F32), S((K,), I32)), grid=(1,))
def topk_merge(vals, idx, out_v, out_i, *, K: ml.constexpr):
  cv = vals[...].reshape(-1)
  ci = idx[...].reshape(-1)
  tv, ti = ml.top_k(cv, K)
  out_v[...] = tv
  out_i[...] = ci[ti]


def top_n(x, *, K, interpret=False):
  v, i = topk_blocks(x, K=K, interpret=interpret)
  return topk_merge(v, i, K=K, interpret=interpret)


def _topn_ref(x, *, K):
  order = np.argsort(-x, kind="stable")[:K]
  return x[order], order.astype(np.int32)


case("top_n_blocks_then_merge", top_n, lambda s: ((rng_of(s).permutation(2000).astype(np.float32) * 0.5,), dict(K=16)),
     _topn_ref, 0)


@mg.mgpu_kernel(out_shape=lambda k, v, *, K: (S((K,), I32), S((K,), F32)), grid=(1,))
def order_by_limit(keys, vals, out_k, out_v, *, K: ml.constexpr):
  """ORDER BY vals DESC LIMIT K over a small table in one program: argsort, then gather both columns."""
  v = vals[...]
  order = ml.argsort(v, descending=True)[:K]
  out_k[...] = keys[...][order]
  out_v[...] = v[order]


def _obl_ref(k, v, *, K):
  o = np.argsort(-v, kind="stable")[:K]
  return k[o], v[o]


case("order_by_desc_limit_argsort", order_by_limit,
     lambda s: ((rng_of(s).integers(0, 10**6, 512).astype(np.int32), rng_of(s + 1).permutation(512).astype(np.float32)), dict(K=10)),
     _obl_ref, 0)


# ---------------------------------------------------------------- strings: offsets and uint8 bytes
def _strings(r, n, maxlen=24, alphabet=b"abcdefXYZ_ 019,"):
  lens = r.integers(0, maxlen + 1, n)
  off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  chars = np.frombuffer(bytes(alphabet), np.uint8)[r.integers(0, len(alphabet), int(off[-1]))]
  return off, chars.copy()


@mg.mgpu_kernel(out_shape=lambda off: S((off.shape[0] - 1,), I32), grid=lambda off: (ml.cdiv(off.shape[0] - 1, 128),))
def str_lengths(off, out):
  """LENGTH(s) from the offsets column: off[i + 1] - off[i]."""
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = i < off.shape[0] - 1
  ml.store(out.at[i], ml.load(off.at[i + 1], mask=m, other=0) - ml.load(off.at[i], mask=m, other=0), mask=m)


case("string_lengths_from_offsets", str_lengths, lambda s: ((_strings(rng_of(s), 300)[0],), {}), lambda off: np.diff(off), 0)


@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, U8), grid=lambda c: (ml.cdiv(c.shape[0], 512),))
def str_upper(chars, out):
  """UPPER(s) over the chars buffer (ASCII): offsets unchanged."""
  offs = ml.program_id(0) * 512 + ml.arange(0, 512)
  m = offs < chars.shape[0]
  b = ml.load(chars.at[offs], mask=m, other=0)
  ml.store(out.at[offs], ml.where((b >= ord("a")) & (b <= ord("z")), b - 32, b), mask=m)


def _upper_ref(c):
  return np.where((c >= 97) & (c <= 122), c - 32, c).astype(np.uint8)


case("string_upper_ascii_bytes", str_upper, lambda s: ((_strings(rng_of(s), 300)[1],), {}), _upper_ref, 0)


@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, U8), grid=lambda c: (c.shape[0] // 1024,))
def str_lower_bitwise(chars, out):
  """LOWER(s) the bit-twiddling way: set bit 5 of upper-case letters."""
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  b = chars.at[r][...]
  is_up = (b >= 65) & (b <= 90)
  out.at[r][...] = b | (is_up.astype(U8) << 5)


case("string_lower_bit_five", str_lower_bitwise,
     lambda s: ((np.frombuffer(bytes(rng_of(s).integers(32, 127, 2048).astype(np.uint8)), np.uint8).copy(),), {}),
     lambda c: np.where((c >= 65) & (c <= 90), c | 32, c).astype(np.uint8), 0)


@mg.mgpu_kernel(out_shape=lambda off, c, p: S((off.shape[0] - 1,), jnp.bool_), grid=lambda off, c, p: (ml.cdiv(off.shape[0] - 1, 64),))
def str_starts_with(off, chars, pat, out):
  """s LIKE 'pat%': each of 64 strings compares its first P bytes with the pattern (a (64, P) gather of bytes)."""
  i = ml.program_id(0) * 64 + ml.arange(0, 64)
  m = i < off.shape[0] - 1
  start = ml.load(off.at[i], mask=m, other=0)
  ln = ml.load(off.at[i + 1], mask=m, other=0) - start
  P = pat.shape[0]
  j = ml.arange(0, P)
  ok = m[:, None] & (j[None, :] < ln[:, None])
  b = ml.load(chars.at[start[:, None] + j[None, :]], mask=ok, other=0)
  eq = ok & (b == pat[...][None, :])
  ml.store(out.at[i], ml.all(eq, axis=1) & (ln >= P), mask=m)


def _sw_make(seed):
  r = rng_of(seed)
  off, c = _strings(r, 200, alphabet=b"ab")
  return (off, c, np.frombuffer(b"abab" * 2, np.uint8).copy()[:8]), {}


def _sw_ref(off, c, p):
  return np.array([bytes(c[off[i]:off[i + 1]]).startswith(bytes(p)) for i in range(len(off) - 1)])


def _sw_make_short(seed):
  r = rng_of(seed)
  off, c = _strings(r, 200, maxlen=6, alphabet=b"ab")
  return (off, c, np.frombuffer(b"ab", np.uint8).copy()), {}


case("string_starts_with_pattern_8", str_starts_with, _sw_make, _sw_ref, 0)
case("string_starts_with_pattern_2", str_starts_with, _sw_make_short, _sw_ref, 0)


@mg.mgpu_kernel(out_shape=lambda off, c, *, CH: S((off.shape[0] - 1,), I32), grid=lambda off, c, *, CH: (off.shape[0] - 1,))
def str_count_char(off, chars, out, *, CH: ml.constexpr):
  """How many times the byte CH occurs in each string: a program a string, its bytes in chunks of 128."""
  s = ml.program_id(0)
  start = off[s]
  end = off[s + 1]
  acc = 0
  for c in range(start, end, 128):
    offs = c + ml.arange(0, 128)
    b = ml.load(chars.at[offs], mask=offs < end, other=0)
    acc += ml.sum((b == CH).astype(I32))
  out[s] = acc


def _cc_make(seed):
  off, c = _strings(rng_of(seed), 40, maxlen=300)
  return (off, c), dict(CH=ord(","))


case("string_count_byte_chunks", str_count_char, _cc_make,
     lambda off, c, *, CH: np.array([(c[off[i]:off[i + 1]] == CH).sum() for i in range(len(off) - 1)], np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda off, c: S((off.shape[0] - 1,), U32), grid=lambda off, c: (off.shape[0] - 1,))
def str_fnv1a(off, chars, out):
  """FNV-1a 32 of each string, byte by byte in a scalar loop (cuDF's hash of a strings column)."""
  s = ml.program_id(0)
  h = ml.full((), 2166136261, U32)
  for p in range(off[s], off[s + 1]):
    h = (h ^ chars[p].astype(U32)) * 16777619
  out[s] = h


def _fnv_ref(off, c):
  out = []
  for i in range(len(off) - 1):
    h = 2166136261
    for b in c[off[i]:off[i + 1]]:
      h = ((h ^ int(b)) * 16777619) % 2**32
    out.append(h)
  return np.array(out, np.uint32)


case("string_fnv1a_hash_scalar_loop", str_fnv1a, lambda s: (_strings(rng_of(s), 30), {}), _fnv_ref, 0)


@mg.mgpu_kernel(out_shape=lambda off, c: S((off.shape[0] - 1,), I32), grid=lambda off, c: (ml.cdiv(off.shape[0] - 1, 128),))
def str_to_int(off, chars, out):
  """CAST(s AS INT) of short decimal strings (at most 9 digits, an optional leading '-'): a (128, 10) gather of
  the bytes, each digit weighted by its power of ten from the string's end."""
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = i < off.shape[0] - 1
  start = ml.load(off.at[i], mask=m, other=0)
  ln = ml.load(off.at[i + 1], mask=m, other=0) - start
  j = ml.arange(0, 16)
  inside = m[:, None] & (j[None, :] < ln[:, None])
  b = ml.load(chars.at[start[:, None] + j[None, :]], mask=inside, other=48).astype(I32)
  neg = b[:, 0] == ord("-")
  digit = inside & (b >= 48) & (b <= 57)
  e = ln[:, None] - 1 - j[None, :]
  w = ml.where(digit, (b - 48) * (10 ** ml.minimum(e, 9).astype(I32)), 0)
  v = ml.sum(w, axis=1)
  ml.store(out.at[i], ml.where(neg, -v, v), mask=m)


def _sti_make(seed):
  r = rng_of(seed)
  nums = r.integers(-10**8, 10**8, 200)
  strs = [str(int(x)).encode() for x in nums]
  off = np.concatenate([[0], np.cumsum([len(s) for s in strs])]).astype(np.int32)
  return (off, np.frombuffer(b"".join(strs), np.uint8).copy()), {}


case("string_to_int_digits_weighted", str_to_int, _sti_make,
     lambda off, c: np.array([int(bytes(c[off[i]:off[i + 1]])) for i in range(len(off) - 1)], np.int32), 0)
