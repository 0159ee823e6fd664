"""Probe 56b, widened: the scatters and atomics users write, each run in interpret mode against jnp and built for
CUDA. Histograms and weighted bincounts, scatter max/min/mean with duplicate indices, segment sums of rows, unique
counts, counting-sort ranks and a radix sort's pass, spin locks (Triton's layer-norm backward) and tickets, in int32,
float32 and the 8- and 16-bit integers (probe 56b's cas loops). Found here: interpret mode's cas of int8 or uint8
elements by a tensor of places (`ml.atomic_cas(o.at[ids], 0, v)`) was MG900 (a KeyError in its bitwise compare).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export

S = jax.ShapeDtypeStruct
F32, I32, I16, I8, U16, U8 = jnp.float32, jnp.int32, jnp.int16, jnp.int8, jnp.uint16, jnp.uint8


def _ints(lo, hi, shape, seed, dtype=np.int32):
  return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def _normal(shape, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ranks(k):
  seen, out = {}, []
  for v in np.asarray(k).tolist():
    out.append(seen.get(v, 0))
    seen[v] = seen.get(v, 0) + 1
  return np.array(out)


@mg.mgpu_kernel(out_shape=lambda ids: S((64,), I32), grid=lambda ids: (ids.shape[0] // 128,))
def histogram(ids, h):
  i = ml.program_id(0)
  ml.atomic_add(h.at[ids[ml.ds(i * 128, 128)]], 1)


@mg.mgpu_kernel(out_shape=lambda ids, w: S((64,), F32), grid=lambda ids, w: (ids.shape[0] // 128,))
def weighted_bincount(ids, w, h):
  i = ml.program_id(0)
  ml.atomic_add(h.at[ids[ml.ds(i * 128, 128)]], w[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda ids, w: (S((64,), F32), S((64,), F32)), grid=lambda ids, w: (ids.shape[0] // 128,))
def scatter_max_min(ids, w, hi, lo):
  i = ml.program_id(0)
  k = ids[ml.ds(i * 128, 128)]
  ml.atomic_max(hi.at[k], w[ml.ds(i * 128, 128)])
  ml.atomic_min(lo.at[k], w[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda ids, w: (S((16,), F32), S((16,), F32), S((16,), F32), S((1,), I32)), grid=(4,))
def scatter_mean_by_ticket(ids, w, s, c, m, t):
  i = ml.program_id(0)
  k = ids[ml.ds(i * 128, 128)]
  ml.atomic_add(s.at[k], w[ml.ds(i * 128, 128)])
  ml.atomic_add(c.at[k], 1.0)
  if ml.atomic_add(t.at[0], 1) == ml.num_programs(0) - 1:       # the last program divides
    m[...] = s[...] / ml.maximum(c[...], 1.0)


@mg.mgpu_kernel(out_shape=lambda seg, x: S((8, x.shape[1]), x.dtype), grid=lambda seg, x: (x.shape[0] // 16,))
def segment_rows(seg, x, o):
  i = ml.program_id(0)
  ml.atomic_add(o.at[seg[ml.ds(i * 16, 16)], :], x[ml.ds(i * 16, 16), :])


@mg.mgpu_kernel(out_shape=lambda ids: (S((64,), I32), S((1,), I32)), grid=(1,))
def unique_count(ids, seen, n):
  old = ml.atomic_xchg(seen.at[ids[...]], ml.full((128,), 1, I32))
  ml.atomic_add(n.at[0], ml.sum((old == 0).astype(I32)))


@mg.mgpu_kernel(out_shape=lambda k: (S(k.shape, I32), S((16,), I32)), grid=(1,))
def radix_pass(k, o, cnt, *, shift: ml.constexpr):
  kv = k[...]
  d = (kv >> shift) & 15
  r = ml.atomic_add(cnt.at[d], 1)           # (ranks among equal digits, in the order the atomics ran: a stable
                                            # pass in interpret mode, which runs them in order)
  tot = jnp.bincount(d, length=16)
  o[(jnp.cumsum(tot) - tot)[d] + r] = kv


@mg.mgpu_kernel(out_shape=lambda k: S((16,), I32), grid=lambda k: (k.shape[0] // 128,))
def radix_digit_histogram(k, h, *, shift: ml.constexpr):
  i = ml.program_id(0)
  ml.atomic_add(h.at[(k[ml.ds(i * 128, 128)] >> shift) & 15], 1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((8, 16), I32), grid=lambda a, b: (a.shape[0] // 128,))
def joint_histogram(a, b, h):
  i = ml.program_id(0)
  ml.atomic_add(h.at[a[ml.ds(i * 128, 128)], b[ml.ds(i * 128, 128)]], 1)


@mg.mgpu_kernel(out_shape=lambda ids: S((64,), I32), grid=lambda ids: ((ids.shape[0] + 127) // 128,))
def tail_histogram(ids, h):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  k = ids.at[ml.ds(i * 128, 128)].load(mask=offs < ids.shape[0], other=0)
  ml.atomic_add(h.at[k], 1, mask=offs < ids.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: (S((2, 128), F32), S((4,), I8)), grid=lambda x: (x.shape[0] // 128,))
def group_lock_int8(x, o, lock):
  i = ml.program_id(0)
  g = i % 2
  part = x[ml.ds(i * 128, 128)]
  while ml.atomic_cas(lock.at[g], 0, 1) == 1:
    pass
  if lock[g + 2] == 0:
    o[g, :] = part
  else:
    o[g, :] = o[g, :] + part
  ml.atomic_xchg(lock.at[g + 2], 1)
  ml.atomic_xchg(lock.at[g], 0)


@mg.mgpu_kernel(out_shape=lambda ids: S((128,), I16), grid=lambda ids: (ids.shape[0] // 512,))
def smem_histogram_flushed(ids, h):
  i = ml.program_id(0)
  buf = ml.smem((128,), I16)
  buf[...] = ml.zeros((128,), I16)
  for j in range(4):
    ml.atomic_add(buf.at[ids[ml.ds(i * 512 + j * 128, 128)]], 1)
  ml.atomic_add(h.at[...], buf[...])


@mg.mgpu_kernel(out_shape=lambda ids, v: (S((16,), v.dtype), S((128,), v.dtype)), grid=(1,))
def first_writer_wins(ids, v, o, old):
  old[...] = ml.atomic_cas(o.at[ids[...]], ml.zeros((128,), v.dtype), v[...])


@mg.mgpu_kernel(out_shape=lambda ids, v: S((16,), v.dtype), grid=(1,))
def scatter_xor(ids, v, o):
  ml.atomic_xor(o.at[ids[...]], v[...])


@mg.mgpu_kernel(out_shape=lambda x: S((4,), I8), grid=(4,))
def masked_scalar_int8(x, o):
  i = ml.program_id(0)
  ml.atomic_add(o.at[i], x[i], mask=x[i] > 0)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), I16), grid=lambda x: (x.shape[0] // 128,))
def released_window_int16(x, o):
  i = ml.program_id(0)
  ml.atomic_add(o.at[...], x[ml.ds(i * 128, 128)], sem="release")


@mg.mgpu_kernel(out_shape=lambda e: S((16,), I32), grid=(1,))
def routed_counts(e, o):                  # an MoE router's (tokens, k) experts
  ml.atomic_add(o.at[e[...]], 1)


@mg.mgpu_kernel(out_shape=lambda k: S(k.shape, I8), grid=(1,))
def smem_ranks_int8(k, r):
  buf = ml.smem((16,), I8)
  buf[...] = ml.zeros((16,), I8)
  r[...] = ml.atomic_add(buf.at[k[...]], 1)


@mg.mgpu_kernel(out_shape=lambda x: S((8,), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def row_maxima_narrow(x, o):              # a row statistic the threads hold singly
  i = ml.program_id(0)
  ml.atomic_max(o.at[...], ml.max(x[ml.ds(i * 8, 8), :], axis=1))


def _first_writer(ids, v):
  o, old = np.zeros(16, v.dtype), np.zeros(len(v), v.dtype)
  for e in range(len(v)):
    old[e] = o[ids[e]]
    if o[ids[e]] == 0:
      o[ids[e]] = v[e]
  return o, old


def _cases():
  ids, ids16 = _ints(0, 64, 1024, 1), _ints(0, 16, 512, 2)
  w, w16 = _normal(1024, 3), _normal(512, 4)
  seg, x = np.sort(_ints(0, 8, 64, 5)), _normal((64, 128), 6)
  seg16 = _ints(0, 8, 64, 7)
  x16 = _ints(-50, 50, (64, 128), 8, np.int16)
  q, k = _ints(0, 64, 128, 9), _ints(0, 256, 128, 10)
  a, b = _ints(0, 8, 512, 11), _ints(0, 16, 512, 12)
  tail = _ints(0, 64, 300, 13)
  lk = _normal(512, 14)
  sid = _ints(0, 128, 2048, 15)
  perm = np.concatenate([np.random.default_rng(16).permutation(16).astype(np.int32)] * 8)
  v8 = (np.arange(128) % 100 + 1).astype(np.int8)
  u8 = _ints(0, 255, 128, 17, np.uint8)
  s8 = np.array([3, -2, 5, 0], np.int8)
  r16 = _ints(-100, 100, 512, 18, np.int16)
  sm, cm = np.bincount(ids16, w16, 16).astype(np.float32), np.bincount(ids16, minlength=16).astype(np.float32)
  xor = np.zeros(16, np.uint8)
  for e in range(128):
    xor[ids16[e]] ^= u8[e]
  lk4 = lk.reshape(4, 128)
  e2 = _ints(0, 16, (64, 2), 19)
  k16 = _ints(0, 16, 128, 20)
  xu = _ints(0, 255, (16, 128), 21, np.uint8)
  return [
      ("histogram", histogram, (ids,), {}, np.bincount(ids, minlength=64)),
      ("weighted_bincount", weighted_bincount, (ids, w), {}, np.bincount(ids, w, 64)),
      ("scatter_max_min", scatter_max_min, (ids % 48, w), {},
       (jnp.full(64, -jnp.inf).at[ids % 48].max(w), jnp.full(64, jnp.inf).at[ids % 48].min(w))),
      ("scatter_mean_by_ticket", scatter_mean_by_ticket, (ids16, w16), {}, (sm, cm, sm / np.maximum(cm, 1), [4])),
      ("segment_rows_f32", segment_rows, (seg, x), {}, jax.ops.segment_sum(x, seg, 8)),
      ("segment_rows_int16", segment_rows, (seg16, x16), {}, jnp.zeros((8, 128), I16).at[seg16].add(x16)),
      ("unique_count", unique_count, (q,), {},
       ((np.bincount(q, minlength=64) > 0).astype(np.int32), [len(np.unique(q))])),
      ("radix_pass", radix_pass, (k,), {"shift": 4},
       (k[np.argsort((k >> 4) & 15, kind="stable")], np.bincount((k >> 4) & 15, minlength=16))),
      ("radix_digit_histogram", radix_digit_histogram, (sid,), {"shift": 3}, np.bincount((sid >> 3) & 15, minlength=16)),
      ("joint_histogram", joint_histogram, (a, b), {}, jnp.zeros((8, 16), I32).at[a, b].add(1)),
      ("tail_histogram", tail_histogram, (tail,), {}, np.bincount(tail, minlength=64)),
      ("group_lock_int8", group_lock_int8, (lk,), {},
       (np.stack([lk4[0::2].sum(0), lk4[1::2].sum(0)]), np.array([0, 0, 1, 1], np.int8))),
      ("smem_histogram_flushed", smem_histogram_flushed, (sid,), {}, np.bincount(sid, minlength=128).astype(np.int16)),
      ("first_writer_wins_int8", first_writer_wins, (perm, v8), {}, _first_writer(perm, v8)),
      ("first_writer_wins_int32", first_writer_wins, (perm, v8.astype(np.int32)), {},
       _first_writer(perm, v8.astype(np.int32))),
      ("scatter_xor_uint8", scatter_xor, (ids16[:128], u8), {}, xor),
      ("masked_scalar_int8", masked_scalar_int8, (s8,), {}, np.maximum(s8, 0).astype(np.int8)),
      ("released_window_int16", released_window_int16, (r16,), {}, r16.reshape(4, 128).sum(0).astype(np.int16)),
      ("routed_counts", routed_counts, (e2,), {}, np.bincount(e2.ravel(), minlength=16)),
      ("smem_ranks_int8", smem_ranks_int8, (k16,), {}, _ranks(k16).astype(np.int8)),
      ("row_maxima_uint8", row_maxima_narrow, (xu,), {}, np.maximum(xu[:8].max(1), xu[8:].max(1))),
  ]


_CASES = {c[0]: c[1:] for c in _cases()}


@pytest.mark.parametrize("name", list(_CASES))
def test_scatters_and_atomics_match_jnp_and_build_for_cuda(name):
  kernel, args, kw, want = _CASES[name]
  got = kernel(*args, interpret=True, **kw)
  got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-5, atol=1e-4)
  export(kernel, *args, **kw)
