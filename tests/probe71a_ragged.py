"""Probe 71a's corpus, its fifth part: jagged (ragged) tensors as offsets + values, as FBGEMM's jagged ops, PyTorch's
nested tensors and TorchRec authors write them: jagged to padded dense and back, a jagged sum / mean / max over each
sequence, a jagged softmax, jagged-dense elementwise, a jagged @ dense batched matmul on the tensor cores, embedding
bag sums by offsets, keyed-jagged lengths to offsets, and segment ids from offsets.
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71a_spmv import F16, F32, I32, S, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def _jagged(seed, b=6, max_len=50, d=64, dtype=np.float32, min_len=0):
  r = rng_of(seed)
  lens = r.integers(min_len, max_len + 1, b)
  off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  return r, off, r.standard_normal((int(off[-1]), d)).astype(dtype)


def _pad_ref(off, v, *, L, fill=0.0):
  out = np.full((len(off) - 1, L, v.shape[1]), fill, v.dtype)
  for b in range(len(off) - 1):
    n = min(off[b + 1] - off[b], L)
    out[b, :n] = v[off[b]:off[b] + n]
  return out


# ---------------------------------------------------------------- jagged to padded dense
@mg.mgpu_kernel(out_shape=lambda off, v, *, L, BL: S((off.shape[0] - 1, L, v.shape[1]), v.dtype),
                grid=lambda off, v, *, L, BL: (off.shape[0] - 1, ml.cdiv(L, BL)))
def jagged_to_padded(offsets, values, out, *, L: ml.constexpr, BL: ml.constexpr):
  """FBGEMM's jagged_to_padded_dense: rows past a sequence's length (or past L: truncated) are 0."""
  b, t = ml.program_id(0), ml.program_id(1)
  start = offsets[b]
  n = ml.minimum(offsets[b + 1] - start, L)
  pos = t * BL + ml.arange(0, BL)
  rows = values.at[ml.ds(start + t * BL, BL), :].load(mask=(pos < n)[:, None], other=0.0)
  ml.store(out.at[b, ml.ds(t * BL, BL), :], rows, mask=(pos < L)[:, None])


def _j2p_make(seed):
  _, off, v = _jagged(seed)
  return (off, v), dict(L=40, BL=16)


case("jagged_to_padded_dense_truncating", jagged_to_padded, _j2p_make, lambda off, v, *, L, BL: _pad_ref(off, v, L=L), 0)


@mg.mgpu_kernel(out_shape=lambda off, d, **k: S((k["total"], d.shape[2]), d.dtype), grid=lambda off, d, **k: (off.shape[0] - 1,))
def padded_to_jagged(offsets, dense, values, *, total: ml.constexpr):
  """dense_to_jagged: each sequence's first len rows back into the values, 16 at a time."""
  b = ml.program_id(0)
  start, end = offsets[b], offsets[b + 1]
  for s in range(0, end - start, 16):
    pos = s + ml.arange(0, 16)
    rows = dense.at[b, ml.ds(s, 16), :].load(mask=(pos < dense.shape[1])[:, None], other=0.0)
    ml.store(values.at[ml.ds(start + s, 16), :], rows, mask=(start + pos < end)[:, None])


def _p2j_make(seed):
  r, off, v = _jagged(seed, max_len=40)
  return (off, _pad_ref(off, v, L=40)), dict(total=int(off[-1]))


case("padded_dense_to_jagged", padded_to_jagged, _p2j_make,
     lambda off, d, *, total: np.concatenate([d[b, :off[b + 1] - off[b]] for b in range(len(off) - 1)]), 0)


# ---------------------------------------------------------------- jagged reductions
@mg.mgpu_kernel(out_shape=lambda off, v: (S((off.shape[0] - 1, v.shape[1]), F32),) * 3, grid=lambda off, v: (off.shape[0] - 1,))
def jagged_sum_mean_max(offsets, values, sums, means, maxs):
  b = ml.program_id(0)
  start, end = offsets[b], offsets[b + 1]
  s = ml.zeros((values.shape[1],), F32)
  mx = ml.full((values.shape[1],), float("-inf"), F32)
  for c in range(start, end, 32):
    pos = c + ml.arange(0, 32)
    t = values.at[ml.ds(c, 32), :].load(mask=(pos < end)[:, None], other=0.0).astype(F32)
    s += ml.sum(t, axis=0)
    mx = ml.maximum(mx, ml.max(ml.where((pos < end)[:, None], t, float("-inf")), axis=0))
  n = end - start
  sums.at[b, :][...] = s
  means.at[b, :][...] = s / ml.maximum(n, 1).to(F32)
  maxs.at[b, :][...] = ml.where(n > 0, mx, 0.0)


def _jred_make(seed):
  _, off, v = _jagged(seed, dtype=np.float16)
  return (off, v), {}


def _jred_ref(off, v):
  segs = [v[off[b]:off[b + 1]].astype(np.float64) for b in range(len(off) - 1)]
  return (np.stack([s.sum(0) for s in segs]), np.stack([s.mean(0) if len(s) else np.zeros(v.shape[1]) for s in segs]),
          np.stack([s.max(0) if len(s) else np.zeros(v.shape[1]) for s in segs]))


case("jagged_sum_mean_max_f16_values", jagged_sum_mean_max, _jred_make, _jred_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda off, x: x, grid=lambda off, x: (off.shape[0] - 1,))
def jagged_softmax(offsets, x, out, *, MAXLEN: ml.constexpr = 128):
  """FBGEMM's jagged_softmax over each sequence's positions (a 1-D jagged tensor), the sequence in one tile."""
  b = ml.program_id(0)
  start, end = offsets[b], offsets[b + 1]
  pos = start + ml.arange(0, MAXLEN)
  m = pos < end
  t = ml.load(x.at[pos], mask=m, other=float("-inf"))
  ml.store(out.at[pos], ml.softmax(t, where=m), mask=m)


def _jsm_make(seed):
  r = rng_of(seed)
  lens = r.integers(1, 120, 7)
  off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  return (off, (r.standard_normal(int(off[-1])) * 3).astype(np.float32)), {}


def _jsm_ref(off, x):
  out = np.zeros(len(x))
  for b in range(len(off) - 1):
    t = x[off[b]:off[b + 1]].astype(np.float64)
    out[off[b]:off[b + 1]] = np.exp(t - t.max()) / np.exp(t - t.max()).sum()
  return out


case("jagged_softmax_one_tile_where", jagged_softmax, _jsm_make, _jsm_ref, 1e-6)


# ---------------------------------------------------------------- jagged-dense elementwise (a dense row per sequence)
@mg.mgpu_kernel(out_shape=lambda off, v, y: v, grid=lambda off, v, y: (ml.cdiv(v.shape[0], 64),))
def jagged_dense_mul(offsets, values, y, out):
  """jagged_dense_elementwise_mul with y (B, L, D): each value row times y at its sequence and position; the
  sequence found by ml.searchsorted on the offsets."""
  rows = ml.program_id(0) * 64 + ml.arange(0, 64)
  m = rows < values.shape[0]
  b = ml.searchsorted(offsets, rows, side="right") - 1
  p = rows - ml.load(offsets.at[b])
  cols = ml.arange(0, values.shape[1])
  yv = ml.load(y.at[b[:, None], p[:, None], cols[None, :]], mask=m[:, None] & (p < y.shape[1])[:, None], other=0.0)
  v = ml.load(values.at[rows[:, None], cols[None, :]], mask=m[:, None], other=0.0)
  ml.store(out.at[rows[:, None], cols[None, :]], v * yv, mask=m[:, None])


def _jdm_make(seed):
  r, off, v = _jagged(seed, max_len=30)
  return (off, v, r.standard_normal((6, 30, 64)).astype(np.float32)), {}


def _jdm_ref(off, v, y):
  b = np.repeat(np.arange(len(off) - 1), np.diff(off))
  p = np.arange(len(v)) - off[b]
  return v * y[b, p]


case("jagged_dense_elementwise_mul_searchsorted", jagged_dense_mul, _jdm_make, _jdm_ref, 0)


# ---------------------------------------------------------------- jagged @ dense on the tensor cores
@mg.mgpu_kernel(out_shape=lambda off, x, w: S((x.shape[0], w.shape[2]), F32),
                grid=lambda off, x, w: (off.shape[0] - 1, ml.cdiv(x.shape[0], 64)))
def jagged_dense_bmm(offsets, x, w, out):
  """Each sequence b's rows times its own weight w[b] (K, N): tile t of the sequence's rows a program, the tile's
  rows past the sequence masked at the store (a grid of the longest case; programs past the end do nothing)."""
  b, t = ml.program_id(0), ml.program_id(1)
  start, end = offsets[b], offsets[b + 1]
  if start + t * 64 < end:
    rows = start + t * 64 + ml.arange(0, 64)
    a = x.at[ml.ds(start + t * 64, 64), :].load(mask=(rows < end)[:, None], other=0.0)
    acc = ml.dot(a, w.at[b][...])
    ml.store(out.at[ml.ds(start + t * 64, 64), :], acc, mask=(rows < end)[:, None])


def _jbmm_make(seed):
  r = rng_of(seed)
  lens = np.array([70, 0, 130, 5], np.int64)
  off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  x = np.asarray(jnp.asarray(r.standard_normal((int(off[-1]), 64)) * 0.3, F16))
  w = np.asarray(jnp.asarray(r.standard_normal((4, 64, 64)) * 0.3, F16))
  return (off, x, w), {}


def _jbmm_ref(off, x, w):
  b = np.repeat(np.arange(len(off) - 1), np.diff(off))
  return np.einsum("nk,nkj->nj", x.astype(np.float64), w[b].astype(np.float64))


case("jagged_dense_bmm_wgmma_masked_tiles", jagged_dense_bmm, _jbmm_make, _jbmm_ref, 1e-3)


# ---------------------------------------------------------------- embedding bags by offsets
@mg.mgpu_kernel(out_shape=lambda off, ids, t, w: S((off.shape[0] - 1, t.shape[1]), F32), grid=lambda off, ids, t, w: (off.shape[0] - 1,))
def embedding_bag_sum(offsets, ids, table, weights, out):
  """TorchRec's per-sample weighted embedding bag: sum of w * table[id] over the bag, 16 ids at a time."""
  b = ml.program_id(0)
  start, end = offsets[b], offsets[b + 1]
  acc = ml.zeros((table.shape[1],), F32)
  for s in range(start, end, 16):
    e = s + ml.arange(0, 16)
    m = e < end
    i = ml.load(ids.at[e], mask=m, other=0)
    wt = ml.load(weights.at[e], mask=m, other=0.0)
    acc += ml.sum(table[i, :].astype(F32) * wt[:, None], axis=0)
  out.at[b, :][...] = acc


def _bag_make(seed):
  r = rng_of(seed)
  lens = r.integers(0, 40, 8)
  off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  n = int(off[-1])
  return (off, r.integers(0, 500, n).astype(np.int32), np.asarray(jnp.asarray(r.standard_normal((500, 128)), jnp.bfloat16)),
          r.random(n).astype(np.float32)), {}


def _bag_ref(off, ids, t, w):
  t = np.asarray(t, np.float64)
  return np.stack([(t[ids[off[b]:off[b + 1]]] * w[off[b]:off[b + 1], None]).sum(0) for b in range(len(off) - 1)])


case("embedding_bag_weighted_sum_bf16_table", embedding_bag_sum, _bag_make, _bag_ref, 1e-5)


# ---------------------------------------------------------------- keyed jagged: lengths to offsets; segment ids
@mg.mgpu_kernel(out_shape=lambda lens: S((lens.shape[0] + 1,), I32), grid=(1,))
def lengths_to_offsets(lens, off):
  """asynchronous_complete_cumsum: offsets with a leading 0, the lengths' inclusive scan after it (one tile)."""
  n = lens.shape[0]
  c = lens[...]
  off[0] = 0
  off.at[ml.ds(1, n)][...] = ml.cumsum(c)


case("lengths_to_offsets_complete_cumsum", lengths_to_offsets,
     lambda s: ((rng_of(s).integers(0, 30, 256).astype(np.int32),), {}),
     lambda lens: np.concatenate([[0], np.cumsum(lens)]).astype(np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda off, *, total: S((total,), I32), grid=lambda off, **k: (off.shape[0] - 1,))
def offsets_to_segment_ids(offsets, seg, *, total: ml.constexpr):
  """Each sequence writes its index over its positions (FBGEMM's offsets_range / segment ids of a jagged batch)."""
  b = ml.program_id(0)
  start, end = offsets[b], offsets[b + 1]
  for s in range(start, end, 128):
    pos = s + ml.arange(0, 128)
    ml.store(seg.at[pos], ml.full((128,), 0, I32) + b, mask=pos < end)


def _segid_make(seed):
  _, off, _ = _jagged(seed, b=9, max_len=300, d=1)
  return (off,), dict(total=int(off[-1]))


case("offsets_to_segment_ids_runs", offsets_to_segment_ids, _segid_make,
     lambda off, *, total: np.repeat(np.arange(len(off) - 1), np.diff(off)).astype(np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda off, *, total: S((total,), I32), grid=lambda off, **k: (ml.cdiv(k["total"], 128),))
def segment_ids_by_repeat(offsets, seg, *, total: ml.constexpr):
  """The same with jnp in the kernel: the lengths repeated by jnp.repeat with a static total (the batch's, 256 a
  program: each program its block of positions)."""
  b = offsets.shape[0] - 1
  lens = offsets.at[ml.ds(1, b)][...] - offsets.at[ml.ds(0, b)][...]
  ids = jnp.repeat(jnp.arange(b), lens, total_repeat_length=total)
  seg.at[ml.ds(ml.program_id(0) * 128, 128)][...] = ids[ml.program_id(0) * 128 + ml.arange(0, 128)]


def _segrep_make(seed):
  r = rng_of(seed)
  lens = r.integers(0, 80, 8)
  lens[-1] += 512 - lens.sum() if lens.sum() < 512 else 0
  lens = lens[:8]
  off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  total = int(off[-1]) // 128 * 128
  return (off,), dict(total=total)


case("segment_ids_jnp_repeat_total", segment_ids_by_repeat, _segrep_make,
     lambda off, *, total: np.repeat(np.arange(len(off) - 1), np.diff(off)).astype(np.int32)[:total], 0)
