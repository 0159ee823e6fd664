"""Probe 71a's corpus, its second part: GNN message passing as PyG, DGL and cuGraph-ops authors write it: segment
sum / max / mean / softmax over CSR offsets (GCN, GraphSAGE mean, GIN, GAT's edge softmax and aggregation), scatter
aggregation with atomics (sum, max, mean in two launches, DGL's edge softmax in three), GCN's symmetric
normalisation from atomic degrees, a graph-level readout by a batch vector.
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71a_spmv import F32, I32, S, random_csr, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def _graph(seed, n=40, d=64, max_deg=12, min_deg=0):
  """A CSR graph by destination (rowptr over dst, col = src), features (n, d), edge weights."""
  r = rng_of(seed)
  rp, src, w = random_csr(r, n, n, max_deg, min_deg)
  return r, rp, src, w, r.standard_normal((n, d)).astype(np.float32)


def _dst_of(rp):
  return np.repeat(np.arange(len(rp) - 1), np.diff(rp)).astype(np.int32)


def _seg(rp, vals, op, empty):
  out = []
  for i in range(len(rp) - 1):
    v = vals[rp[i]:rp[i + 1]]
    out.append(op(v, axis=0) if len(v) else np.full(vals.shape[1:], empty, np.float64))
  return np.stack(out)


# ---------------------------------------------------------------- GCN aggregation: weighted segment sum of rows
@mg.mgpu_kernel(out_shape=lambda rp, src, w, x: S((rp.shape[0] - 1, x.shape[1]), F32), grid=lambda rp, src, w, x: (rp.shape[0] - 1,))
def gcn_aggregate(rowptr, src, w, x, out):
  """A node a program: out[v] = sum over in-edges e of w[e] * x[src[e]], 16 neighbours' rows at a time."""
  v = ml.program_id(0)
  start, end = rowptr[v], rowptr[v + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for s in range(start, end, 16):
    e = s + ml.arange(0, 16)
    m = e < end
    nb = ml.load(src.at[e], mask=m, other=0)
    we = ml.load(w.at[e], mask=m, other=0.0)
    acc += ml.sum(we[:, None] * x[nb, :], axis=0)
  out.at[v, :][...] = acc


def _gcn_make(seed):
  _, rp, src, w, x = _graph(seed)
  return (rp, src, w, x), {}


case("gcn_csr_weighted_segment_sum", gcn_aggregate, _gcn_make,
     lambda rp, src, w, x: _seg(rp, w[:, None].astype(np.float64) * x[src], np.sum, 0.0), 1e-5)


# ---------------------------------------------------------------- GraphSAGE mean, one neighbour row at a time
@mg.mgpu_kernel(out_shape=lambda rp, src, x: S((rp.shape[0] - 1, x.shape[1]), F32), grid=lambda rp, src, x: (rp.shape[0] - 1,))
def sage_mean(rowptr, src, x, out):
  v = ml.program_id(0)
  start, end = rowptr[v], rowptr[v + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for e in range(start, end):
    acc += x.at[src[e], :][...]
  deg = end - start
  out.at[v, :][...] = acc / ml.maximum(deg, 1).to(F32)


def _sage_make(seed):
  _, rp, src, _, x = _graph(seed)
  return (rp, src, x), {}


case("sage_mean_row_loop_empty_nodes_zero", sage_mean, _sage_make,
     lambda rp, src, x: _seg(rp, x[src].astype(np.float64), np.mean, 0.0), 1e-5)


# ---------------------------------------------------------------- segment max (max pooling); PyG fills empty with 0
@mg.mgpu_kernel(out_shape=lambda rp, src, x: S((rp.shape[0] - 1, x.shape[1]), F32), grid=lambda rp, src, x: (rp.shape[0] - 1,))
def sage_max_pool(rowptr, src, x, out):
  v = ml.program_id(0)
  start, end = rowptr[v], rowptr[v + 1]
  acc = ml.full((x.shape[1],), float("-inf"), F32)
  for s in range(start, end, 8):
    e = s + ml.arange(0, 8)
    m = e < end
    nb = ml.load(src.at[e], mask=m, other=0)
    rows = ml.load(x.at[nb[:, None], ml.arange(0, x.shape[1])[None, :]], mask=m[:, None], other=float("-inf"))
    acc = ml.maximum(acc, ml.max(rows, axis=0))
  out.at[v, :][...] = ml.where(end > start, acc, 0.0)


case("sage_max_pool_masked_minus_inf", sage_max_pool, _sage_make,
     lambda rp, src, x: _seg(rp, x[src].astype(np.float64), np.max, 0.0), 0)


# ---------------------------------------------------------------- GIN: (1 + eps) x + sum
@mg.mgpu_kernel(out_shape=lambda rp, src, x, **k: S((rp.shape[0] - 1, x.shape[1]), F32),
                grid=lambda rp, src, x, *, BN, **k: (ml.cdiv(rp.shape[0] - 1, BN),))
def gin_aggregate(rowptr, src, x, out, *, BN: ml.constexpr, MAXDEG: ml.constexpr, eps: ml.constexpr = 0.1):
  """BN nodes a program, each lane group walking its node's edges to a static longest degree (CSR-scalar over rows)."""
  nodes = ml.program_id(0) * BN + ml.arange(0, BN)
  nm = nodes < rowptr.shape[0] - 1
  start = ml.load(rowptr.at[nodes], mask=nm, other=0)
  end = ml.load(rowptr.at[nodes + 1], mask=nm, other=0)
  cols = ml.arange(0, x.shape[1])
  acc = (1.0 + eps) * ml.load(x.at[nodes[:, None], cols[None, :]], mask=nm[:, None], other=0.0)
  for t in range(MAXDEG):
    e = start + t
    m = e < end
    nb = ml.load(src.at[e], mask=m, other=0)
    acc += ml.load(x.at[nb[:, None], cols[None, :]], mask=m[:, None], other=0.0)
  ml.store(out.at[nodes[:, None], cols[None, :]], acc, mask=nm[:, None])


def _gin_make(seed):
  _, rp, src, _, x = _graph(seed, n=50, max_deg=10)
  return (rp, src, x), dict(BN=16, MAXDEG=10)


case("gin_block_of_nodes_static_degree", gin_aggregate, _gin_make,
     lambda rp, src, x, **k: 1.1 * x.astype(np.float64) + _seg(rp, x[src].astype(np.float64), np.sum, 0.0), 1e-5)


# ---------------------------------------------------------------- GAT: edge softmax over incoming edges and aggregation
@mg.mgpu_kernel(out_shape=lambda rp, src, asrc, adst, h: (S((rp.shape[0] - 1, h.shape[1]), F32), S(src.shape, F32)),
                grid=lambda rp, src, asrc, adst, h: (rp.shape[0] - 1,))
def gat_softmax_aggregate(rowptr, src, a_src, a_dst, h, out, alpha, *, MAXDEG: ml.constexpr = 32):
  """A node's in-edges in one tile of MAXDEG: e = leaky_relu(a_src[src] + a_dst[v]), alpha = softmax over them, out =
  sum alpha * h[src]."""
  v = ml.program_id(0)
  start, end = rowptr[v], rowptr[v + 1]
  e = start + ml.arange(0, MAXDEG)
  m = e < end
  nb = ml.load(src.at[e], mask=m, other=0)
  s = ml.load(a_src.at[nb], mask=m, other=0.0) + a_dst[v]
  s = ml.where(s > 0, s, 0.2 * s)
  s = ml.where(m, s, float("-inf"))
  p = ml.exp(s - ml.max(s))
  a = p / ml.sum(p)
  ml.store(alpha.at[e], a, mask=m)
  out.at[v, :][...] = ml.sum(ml.where(m, a, 0.0)[:, None] * h[nb, :], axis=0)


def _gat_make(seed):
  r, rp, src, _, h = _graph(seed, n=30, max_deg=20, min_deg=1)
  return (rp, src, r.standard_normal(30).astype(np.float32), r.standard_normal(30).astype(np.float32), h), {}


def _gat_ref(rp, src, asrc, adst, h):
  dst = _dst_of(rp)
  s = asrc[src].astype(np.float64) + adst[dst]
  s = np.where(s > 0, s, 0.2 * s)
  alpha = np.zeros_like(s)
  for i in range(len(rp) - 1):
    t = s[rp[i]:rp[i + 1]]
    if len(t):
      p = np.exp(t - t.max())
      alpha[rp[i]:rp[i + 1]] = p / p.sum()
  return _seg(rp, alpha[:, None] * h[src], np.sum, 0.0), alpha


case("gat_edge_softmax_and_aggregate_one_tile", gat_softmax_aggregate, _gat_make, _gat_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda rp, s: S(s.shape, F32), grid=lambda rp, s: (rp.shape[0] - 1,))
def segment_softmax_online(rowptr, scores, out):
  """Segment softmax of any length: an online max and sum over chunks of 32, then a second pass writing."""
  v = ml.program_id(0)
  start, end = rowptr[v], rowptr[v + 1]
  mx = float("-inf")
  sm = 0.0
  for c in range(start, end, 32):
    e = c + ml.arange(0, 32)
    t = ml.load(scores.at[e], mask=e < end, other=float("-inf"))
    new = ml.maximum(mx, ml.max(t))
    sm = sm * ml.exp(mx - new) + ml.sum(ml.exp(t - new))
    mx = new
  for c in range(start, end, 32):
    e = c + ml.arange(0, 32)
    t = ml.load(scores.at[e], mask=e < end, other=0.0)
    ml.store(out.at[e], ml.exp(t - mx) / sm, mask=e < end)


def _ssm_make(seed):
  r = rng_of(seed)
  rp, _, s = random_csr(r, 25, 200, 90, 1)
  return (rp, s * 4), {}


def _ssm_ref(rp, s):
  out = np.zeros(len(s))
  for i in range(len(rp) - 1):
    t = s[rp[i]:rp[i + 1]].astype(np.float64)
    if len(t):
      out[rp[i]:rp[i + 1]] = np.exp(t - t.max()) / np.exp(t - t.max()).sum()
  return out


case("segment_softmax_online_two_pass", segment_softmax_online, _ssm_make, _ssm_ref, 1e-5)


# ---------------------------------------------------------------- scatter aggregation with atomics (edge-parallel)
@mg.mgpu_kernel(out_shape=lambda src, dst, x, *, n: S((n, x.shape[1]), F32), grid=lambda src, dst, x, **k: (ml.cdiv(src.shape[0], 64),))
def scatter_add_messages(src, dst, x, out, *, n: ml.constexpr):
  """PyG's propagate with aggr='add': edge e sends x[src[e]] to dst[e]."""
  e = ml.program_id(0) * 64 + ml.arange(0, 64)
  m = e < src.shape[0]
  s = ml.load(src.at[e], mask=m, other=0)
  d = ml.load(dst.at[e], mask=m, other=0)
  ml.atomic_add(out.at[d, :], x[s, :], mask=m[:, None])


def _edges_make(seed, n=50, ne=700, d=64):
  r = rng_of(seed)
  return (r.integers(0, n, ne).astype(np.int32), r.integers(0, n, ne).astype(np.int32),
          r.standard_normal((n, d)).astype(np.float32)), dict(n=n)


def _scatter_ref(src, dst, x, *, n, op=np.add, init=0.0):
  out = np.full((n, x.shape[1]), init, np.float64)
  op.at(out, dst, x[src].astype(np.float64))
  return out


case("scatter_add_edge_parallel_atomics", scatter_add_messages, _edges_make, _scatter_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda src, dst, x, *, n: S((n, x.shape[1]), F32), grid=lambda src, dst, x, **k: (ml.cdiv(src.shape[0], 64),))
def scatter_max_messages(src, dst, x, out, *, n: ml.constexpr):
  e = ml.program_id(0) * 64 + ml.arange(0, 64)
  m = e < src.shape[0]
  s = ml.load(src.at[e], mask=m, other=0)
  d = ml.load(dst.at[e], mask=m, other=0)
  ml.atomic_max(out.at[d, :], x[s, :], mask=m[:, None])


case("scatter_max_edge_parallel_atomics", scatter_max_messages, _edges_make,
     lambda src, dst, x, *, n: _scatter_ref(src, dst, x, n=n, op=np.maximum, init=-np.inf), 0)


@mg.mgpu_kernel(out_shape=lambda src, dst, x, *, n: (S((n, x.shape[1]), F32), S((n,), F32)),
                grid=lambda src, dst, x, **k: (ml.cdiv(src.shape[0], 64),))
def scatter_sum_count(src, dst, x, sums, counts, *, n: ml.constexpr):
  e = ml.program_id(0) * 64 + ml.arange(0, 64)
  m = e < src.shape[0]
  s = ml.load(src.at[e], mask=m, other=0)
  d = ml.load(dst.at[e], mask=m, other=0)
  ml.atomic_add(sums.at[d, :], x[s, :], mask=m[:, None])
  ml.atomic_add(counts.at[d], 1.0, mask=m)


@mg.mgpu_kernel(out_shape=lambda sums, counts: sums, grid=lambda sums, counts: (ml.cdiv(sums.shape[0], 16),))
def divide_by_count(sums, counts, out):
  rows = ml.program_id(0) * 16 + ml.arange(0, 16)
  m = rows < sums.shape[0]
  c = ml.load(counts.at[rows], mask=m, other=1.0)
  cols = ml.arange(0, sums.shape[1])
  t = ml.load(sums.at[rows[:, None], cols[None, :]], mask=m[:, None], other=0.0)
  ml.store(out.at[rows[:, None], cols[None, :]], t / ml.maximum(c, 1.0)[:, None], mask=m[:, None])


def scatter_mean(src, dst, x, *, n, interpret=None):
  s, c = scatter_sum_count(src, dst, x, n=n, interpret=interpret)
  return divide_by_count(s, c, interpret=interpret)


case("scatter_mean_two_launches", scatter_mean, _edges_make,
     lambda src, dst, x, *, n: _scatter_ref(src, dst, x, n=n) / np.maximum(np.bincount(dst, minlength=n), 1)[:, None], 1e-5)


# ---------------------------------------------------------------- DGL's edge softmax by atomics, three launches
@mg.mgpu_kernel(out_shape=lambda dst, s, *, n: S((n,), F32), grid=lambda dst, s, **k: (ml.cdiv(dst.shape[0], 128),))
def edge_max(dst, s, mx, *, n: ml.constexpr):
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < dst.shape[0]
  ml.atomic_max(mx.at[ml.load(dst.at[e], mask=m, other=0)], ml.load(s.at[e], mask=m, other=0.0), mask=m)


@mg.mgpu_kernel(out_shape=lambda dst, s, mx: (S(s.shape, F32), S(mx.shape, F32)), grid=lambda dst, s, mx: (ml.cdiv(dst.shape[0], 128),))
def edge_exp_sum(dst, s, mx, p, denom):
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < dst.shape[0]
  d = ml.load(dst.at[e], mask=m, other=0)
  ex = ml.exp(ml.load(s.at[e], mask=m, other=0.0) - mx[d])
  ml.store(p.at[e], ex, mask=m)
  ml.atomic_add(denom.at[d], ex, mask=m)


@mg.mgpu_kernel(out_shape=lambda dst, p, denom: S(p.shape, F32), grid=lambda dst, p, denom: (ml.cdiv(dst.shape[0], 128),))
def edge_normalise(dst, p, denom, out):
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < dst.shape[0]
  ml.store(out.at[e], ml.load(p.at[e], mask=m, other=0.0) / denom[ml.load(dst.at[e], mask=m, other=0)], mask=m)


def dgl_edge_softmax(dst, s, *, n, interpret=None):
  mx = edge_max(dst, s, n=n, interpret=interpret)
  p, denom = edge_exp_sum(dst, s, mx, interpret=interpret)
  return edge_normalise(dst, p, denom, interpret=interpret)


def _es_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 60, 900).astype(np.int32), (r.standard_normal(900) * 3).astype(np.float32)), dict(n=60)


def _es_ref(dst, s, *, n):
  mx = np.full(n, -np.inf)
  np.maximum.at(mx, dst, s.astype(np.float64))
  p = np.exp(s - mx[dst])
  den = np.zeros(n)
  np.add.at(den, dst, p)
  return p / den[dst]


case("dgl_edge_softmax_three_launches", dgl_edge_softmax, _es_make, _es_ref, 1e-5)


# ---------------------------------------------------------------- GCN normalisation: degrees by atomics, then weights
@mg.mgpu_kernel(out_shape=lambda src, dst, *, n: S((n,), F32), grid=lambda src, dst, **k: (ml.cdiv(dst.shape[0], 256),))
def in_degree(src, dst, deg, *, n: ml.constexpr):
  e = ml.program_id(0) * 256 + ml.arange(0, 256)
  ml.atomic_add(deg.at[ml.load(dst.at[e], mask=e < dst.shape[0], other=0)], 1.0, mask=e < dst.shape[0])


@mg.mgpu_kernel(out_shape=lambda src, dst, deg: S(src.shape, F32), grid=lambda src, dst, deg: (ml.cdiv(dst.shape[0], 256),))
def gcn_norm(src, dst, deg, w):
  """w = deg^-1/2[src] * deg^-1/2[dst], self loops counted in deg (deg + 1), as PyG's gcn_norm."""
  e = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = e < dst.shape[0]
  ds = ml.load(deg.at[ml.load(src.at[e], mask=m, other=0)]) + 1.0
  dd = ml.load(deg.at[ml.load(dst.at[e], mask=m, other=0)]) + 1.0
  ml.store(w.at[e], ml.rsqrt(ds) * ml.rsqrt(dd), mask=m)


def gcn_norm_pipeline(src, dst, *, n, interpret=None):
  return gcn_norm(src, dst, in_degree(src, dst, n=n, interpret=interpret), interpret=interpret)


def _gcnn_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 80, 1000).astype(np.int32), r.integers(0, 80, 1000).astype(np.int32)), dict(n=80)


def _gcnn_ref(src, dst, *, n):
  deg = np.bincount(dst, minlength=n) + 1.0
  return 1 / np.sqrt(deg[src]) / np.sqrt(deg[dst])


case("gcn_norm_atomic_degrees_rsqrt", gcn_norm_pipeline, _gcnn_make, _gcnn_ref, 1e-6)


# ---------------------------------------------------------------- graph readout: global mean pool by a batch vector
@mg.mgpu_kernel(out_shape=lambda b, x, *, G: (S((G, x.shape[1]), F32), S((G,), I32)), grid=lambda b, x, **k: (ml.cdiv(b.shape[0], 32),))
def global_pool_sums(batch, x, sums, counts, *, G: ml.constexpr):
  rows = ml.program_id(0) * 32 + ml.arange(0, 32)
  m = rows < batch.shape[0]
  g = ml.load(batch.at[rows], mask=m, other=0)
  t = ml.load(x.at[rows[:, None], ml.arange(0, x.shape[1])[None, :]], mask=m[:, None], other=0.0)
  ml.atomic_add(sums.at[g, :], t, mask=m[:, None])
  ml.atomic_add(counts.at[g], 1, mask=m)


def global_mean_pool(batch, x, *, G, interpret=None):
  s, c = global_pool_sums(batch, x, G=G, interpret=interpret)
  return s / jnp.maximum(c, 1)[:, None].astype(F32)


def _pool_make(seed):
  r = rng_of(seed)
  return (np.sort(r.integers(0, 6, 150)).astype(np.int32), r.standard_normal((150, 64)).astype(np.float32)), dict(G=8)


def _pool_ref(b, x, *, G):
  s = np.zeros((G, x.shape[1]))
  np.add.at(s, b, x.astype(np.float64))
  return s / np.maximum(np.bincount(b, minlength=G), 1)[:, None]


case("global_mean_pool_sorted_batch", global_mean_pool, _pool_make, _pool_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda ptr, x: S((ptr.shape[0] - 1, x.shape[1]), F32), grid=lambda ptr, x: (ptr.shape[0] - 1,))
def global_max_pool_ptr(ptr, x, out):
  """The same readout from the batch's offsets (PyG's ptr): a graph a program, max over its nodes' rows in tiles."""
  g = ml.program_id(0)
  start, end = ptr[g], ptr[g + 1]
  acc = ml.full((x.shape[1],), float("-inf"), F32)
  for s in range(start, end, 16):
    rows = s + ml.arange(0, 16)
    t = x.at[ml.ds(s, 16), :].load(mask=(rows < end)[:, None], other=float("-inf"))
    acc = ml.maximum(acc, ml.max(t, axis=0))
  out.at[g, :][...] = acc


def _maxpool_make(seed):
  r = rng_of(seed)
  sizes = r.integers(1, 40, 6)
  ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
  return (ptr, r.standard_normal((int(ptr[-1]), 64)).astype(np.float32)), {}


case("global_max_pool_by_ptr_tiles", global_max_pool_ptr, _maxpool_make,
     lambda ptr, x: _seg(ptr, x.astype(np.float64), np.max, 0.0), 0)
