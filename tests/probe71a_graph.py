"""Probe 71a's corpus, its fourth part: graph statistics and sparse construction as cuGraph, Gunrock and cuSPARSE
authors write them: triangle counting by sorted adjacency intersection (a binary search a lane, a two-pointer merge
in scalars), Jaccard coefficients, degree histograms (log2 bins by atomics, an SMEM histogram merged), edge list to CSR
(count, scan, scatter by atomic tickets; a one-program scan), SpGEMM's row-size upper bound and exact row sizes by a
bitmap, and 2:4 structured sparsity (compress to values and 2-bit indices, decompress).
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71a_spmv import F16, F32, I32, S, random_csr, rng_of
from probe71a_traverse import sym_graph

CASES = {}
U32 = jnp.uint32


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def _edges_upper(rp, cols):
  src = np.repeat(np.arange(len(rp) - 1), np.diff(rp))
  keep = src < cols
  return src[keep].astype(np.int32), cols[keep].astype(np.int32)


def _triangles_ref(rp, cols):
  n = len(rp) - 1
  adj = [set(cols[rp[v]:rp[v + 1]]) for v in range(n)]
  return sum(len(adj[u] & adj[v]) for u in range(n) for v in adj[u] if u < v) // 3


# ---------------------------------------------------------------- triangle counting: a binary search a lane
@mg.mgpu_kernel(out_shape=lambda rp, c, eu, ev: S((), I32), grid=lambda rp, c, eu, ev: (eu.shape[0],))
def triangles_binary_search(rowptr, cols, eu, ev, count):
  """An edge (u, v), u < v, a program: each neighbour w > v of u (32 at a time) is looked up in v's sorted list by a
  lane's binary search; each triangle u < v < w is counted once."""
  u, v = eu[ml.program_id(0)], ev[ml.program_id(0)]
  vs, ve = rowptr[v], rowptr[v + 1]
  total = 0
  for s in range(rowptr[u], rowptr[u + 1], 32):
    e = s + ml.arange(0, 32)
    m = e < rowptr[u + 1]
    w = ml.load(cols.at[e], mask=m, other=0)
    lo = ml.full((32,), 0, I32) + vs
    hi = ml.full((32,), 0, I32) + ve
    for _ in ml.static_range(8):
      mid = (lo + hi) // 2
      go = (lo < hi) & (ml.load(cols.at[mid], mask=lo < hi, other=0) < w)
      lo, hi = ml.where(go, mid + 1, lo), ml.where(go | (lo >= hi), hi, mid)
    hit = m & (w > v) & (lo < ve) & (ml.load(cols.at[lo], mask=lo < ve, other=-1) == w)
    total += ml.sum(hit.to(I32))
  ml.atomic_add(count, total)


def _tri_make(seed):
  rp, c = sym_graph(seed, n=40, m=200)
  eu, ev = _edges_upper(rp, c)
  return (rp, c, eu, ev), {}


case("triangles_edge_per_program_binary_search", triangles_binary_search, _tri_make,
     lambda rp, c, eu, ev: np.int32(_triangles_ref(rp, c)), 0)


@mg.mgpu_kernel(out_shape=lambda rp, c: S((rp.shape[0] - 1,), I32), grid=lambda rp, c: (rp.shape[0] - 1,))
def triangles_merge_per_vertex(rowptr, cols, tri):
  """A vertex u a program: for each neighbour v > u, a scalar two-pointer merge of the sorted lists above v counts
  the w with u < v < w adjacent to both (CUDA's intersect of two sorted ranges)."""
  u = ml.program_id(0)
  t = 0
  for e in range(rowptr[u], rowptr[u + 1]):
    v = cols[e]
    if v > u:
      i, j = rowptr[u], rowptr[v]
      iend, jend = rowptr[u + 1], rowptr[v + 1]
      while (i < iend) & (j < jend):
        a, b = cols[i], cols[j]
        if a == b:
          if a > v:
            t += 1
          i += 1
          j += 1
        elif a < b:
          i += 1
        else:
          j += 1
  tri[u] = t


def _tri_vertex_ref(rp, c):
  n = len(rp) - 1
  adj = [set(c[rp[v]:rp[v + 1]]) for v in range(n)]
  return np.array([sum(1 for v in adj[u] if v > u for w in adj[u] & adj[v] if w > v) for u in range(n)], np.int32)


case("triangles_vertex_two_pointer_merge", triangles_merge_per_vertex, lambda s: (sym_graph(s, n=40, m=200), {}),
     _tri_vertex_ref, 0)


# ---------------------------------------------------------------- Jaccard similarity of each edge
@mg.mgpu_kernel(out_shape=lambda rp, c, eu, ev: S(eu.shape, F32), grid=lambda rp, c, eu, ev: (ml.cdiv(eu.shape[0], 128),))
def jaccard_edges(rowptr, cols, eu, ev, out, *, MAXDEG: ml.constexpr = 16):
  """cuGraph's Jaccard: |N(u) & N(v)| / |N(u) | N(v)|, a lane an edge: u's neighbours walked to MAXDEG, each searched
  in v's list by ml.searchsorted over the whole column array (a lane's own range by its bounds)."""
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < eu.shape[0]
  u = ml.load(eu.at[e], mask=m, other=0)
  v = ml.load(ev.at[e], mask=m, other=0)
  us, ue = ml.load(rowptr.at[u]), ml.load(rowptr.at[u + 1])
  vs, ve = ml.load(rowptr.at[v]), ml.load(rowptr.at[v + 1])
  inter = ml.zeros((128,), I32)
  for t in range(MAXDEG):
    k = us + t
    w = ml.load(cols.at[k], mask=k < ue, other=-1)
    lo, hi = vs, ve
    for _ in ml.static_range(5):
      mid = (lo + hi) // 2
      go = (lo < hi) & (ml.load(cols.at[mid], mask=lo < hi, other=0) < w)
      lo, hi = ml.where(go, mid + 1, lo), ml.where(go | (lo >= hi), hi, mid)
    inter += ((k < ue) & (lo < ve) & (ml.load(cols.at[lo], mask=lo < ve, other=-2) == w)).to(I32)
  union = (ue - us) + (ve - vs) - inter
  ml.store(out.at[e], inter.to(F32) / ml.maximum(union, 1).to(F32), mask=m)


def _jac_make(seed):
  rp, c = sym_graph(seed, n=50, m=150)
  eu, ev = _edges_upper(rp, c)
  return (rp, c, eu, ev), {}


def _jac_ref(rp, c, eu, ev):
  adj = [set(c[rp[v]:rp[v + 1]]) for v in range(len(rp) - 1)]
  return np.array([len(adj[u] & adj[v]) / max(len(adj[u] | adj[v]), 1) for u, v in zip(eu, ev)], np.float32)


case("jaccard_edges_lane_binary_search", jaccard_edges, _jac_make, _jac_ref, 1e-6)


# ---------------------------------------------------------------- degree histograms
@mg.mgpu_kernel(out_shape=lambda rp: S((32,), I32), grid=lambda rp: (ml.cdiv(rp.shape[0] - 1, 256),))
def degree_log2_histogram(rowptr, hist):
  """Bins of floor(log2(degree)) + 1 (0 for isolated vertices), by count-leading-zeros, added with atomics."""
  v = ml.program_id(0) * 256 + ml.arange(0, 256)
  n = rowptr.shape[0] - 1
  m = v < n
  deg = ml.load(rowptr.at[v + 1], mask=m, other=0) - ml.load(rowptr.at[v], mask=m, other=0)
  b = 32 - jax.lax.clz(deg)
  ml.atomic_add(hist.at[b], 1, mask=m)


def _deg_make(seed):
  r = rng_of(seed)
  lens = (2 ** r.uniform(0, 9, 700)).astype(np.int64) * (r.random(700) < 0.9)
  return (np.concatenate([[0], np.cumsum(lens)]).astype(np.int32),), {}


def _deg_ref(rp):
  d = np.diff(rp)
  b = np.where(d > 0, np.floor(np.log2(np.maximum(d, 1))).astype(np.int64) + 1, 0)
  return np.bincount(b, minlength=32).astype(np.int32)


case("degree_log2_histogram_clz_atomics", degree_log2_histogram, _deg_make, _deg_ref, 0)


@mg.mgpu_kernel(out_shape=lambda rp, *, B: S((B,), I32), grid=lambda rp, **k: (ml.cdiv(rp.shape[0] - 1, 512),))
def degree_histogram_smem(rowptr, hist, *, B: ml.constexpr):
  """Degrees clipped to B - 1, counted in a CTA's SMEM histogram, merged with one atomic a bin."""
  v = ml.program_id(0) * 512 + ml.arange(0, 512)
  m = v < rowptr.shape[0] - 1
  deg = ml.load(rowptr.at[v + 1], mask=m, other=0) - ml.load(rowptr.at[v], mask=m, other=0)
  h = ml.smem((B,), I32)
  h[...] = ml.zeros((B,), I32)
  ml.atomic_add(h.at[ml.minimum(deg, B - 1)], 1, mask=m)
  ml.atomic_add(hist.at[ml.arange(0, B)], h[...])


def _degs_ref(rp, *, B):
  return np.bincount(np.minimum(np.diff(rp), B - 1), minlength=B).astype(np.int32)


case("degree_histogram_smem_merged", degree_histogram_smem, lambda s: (_deg_make(s)[0], dict(B=64)), _degs_ref, 0)


# ---------------------------------------------------------------- edge list to CSR: count, scan, scatter
@mg.mgpu_kernel(out_shape=lambda src, *, n: S((n,), I32), grid=lambda src, **k: (ml.cdiv(src.shape[0], 256),))
def coo_count(src, counts, *, n: ml.constexpr):
  e = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = e < src.shape[0]
  ml.atomic_add(counts.at[ml.load(src.at[e], mask=m, other=0)], 1, mask=m)


@mg.mgpu_kernel(out_shape=lambda c: S((c.shape[0] + 1,), I32), grid=(1,))
def exclusive_scan_one_program(counts, rowptr):
  """One program scans the counts 256 at a time with a carried total (rowptr[0] = 0)."""
  n = counts.shape[0]
  carry = 0
  rowptr[0] = 0
  for s in range(0, n, 256):
    i = s + ml.arange(0, 256)
    c = ml.load(counts.at[i], mask=i < n, other=0)
    inc = ml.cumsum(c) + carry
    ml.store(rowptr.at[i + 1], inc, mask=i < n)
    carry = carry + ml.sum(c)


@mg.mgpu_kernel(out_shape=lambda src, dst, rp: (S(dst.shape, I32), S((rp.shape[0] - 1,), I32)),
                grid=lambda src, dst, rp: (ml.cdiv(src.shape[0], 256),))
def coo_scatter(src, dst, rowptr, cols, fill):
  """Each edge takes a slot in its source's row by an atomic ticket on the row's fill count."""
  e = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = e < src.shape[0]
  u = ml.load(src.at[e], mask=m, other=0)
  slot = ml.atomic_add(fill.at[u], 1, mask=m)
  ml.store(cols.at[ml.load(rowptr.at[u], mask=m, other=0) + slot], ml.load(dst.at[e], mask=m, other=0), mask=m)


def coo_to_csr(src, dst, *, n, interpret=None):
  rp = exclusive_scan_one_program(coo_count(src, n=n, interpret=interpret), interpret=interpret)
  cols, _ = coo_scatter(src, dst, rp, interpret=interpret)
  rows = jnp.repeat(jnp.arange(n), jnp.diff(rp), total_repeat_length=src.shape[0])
  return rp, cols[jnp.lexsort((cols, rows))]          # each row's columns sorted (the ticket order is the GPU's)


coo_to_csr.steps = lambda src, dst, *, n: [(coo_count, (src,), dict(n=n)), (exclusive_scan_one_program, (np.zeros(n, np.int32),), {}),
                                           (coo_scatter, (src, dst, np.zeros(n + 1, np.int32)), {})]


def _coo_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 300, 2000).astype(np.int32), r.integers(0, 300, 2000).astype(np.int32)), dict(n=300)


def _coo_ref(src, dst, *, n):
  order = np.lexsort((dst, src))
  return np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(np.int32), dst[order]


case("edge_list_to_csr_count_scan_scatter", coo_to_csr, _coo_make, _coo_ref, 0)


# ---------------------------------------------------------------- SpGEMM row sizes
@mg.mgpu_kernel(out_shape=lambda arp, ac, brp: S((arp.shape[0] - 1,), I32), grid=lambda arp, ac, brp: (arp.shape[0] - 1,))
def spgemm_row_upper_bound(a_rowptr, a_cols, b_rowptr, ub):
  """cuSPARSE's first SpGEMM pass: an upper bound of row i of A @ B's nonzeros, the sum of B's row lengths over A's
  row i."""
  i = ml.program_id(0)
  acc = ml.zeros((64,), I32)
  for s in range(a_rowptr[i], a_rowptr[i + 1], 64):
    e = s + ml.arange(0, 64)
    m = e < a_rowptr[i + 1]
    k = ml.load(a_cols.at[e], mask=m, other=0)
    acc += ml.where(m, ml.load(b_rowptr.at[k + 1]) - ml.load(b_rowptr.at[k]), 0)
  ub[i] = ml.sum(acc)


def _spgemm_make(seed):
  r = rng_of(seed)
  arp, ac, _ = random_csr(r, 30, 40, 12)
  brp, bc, _ = random_csr(r, 40, 256, 20)
  return (arp, ac, brp, bc), {}


def _ub_ref(arp, ac, brp, bc=None):
  return np.array([sum(brp[k + 1] - brp[k] for k in ac[arp[i]:arp[i + 1]]) for i in range(len(arp) - 1)], np.int32)


case("spgemm_row_size_upper_bound", lambda arp, ac, brp, bc, interpret=None: spgemm_row_upper_bound(arp, ac, brp, interpret=interpret),
     _spgemm_make, _ub_ref, 0)


@mg.mgpu_kernel(out_shape=lambda arp, ac, brp, bc, *, N: S((arp.shape[0] - 1,), I32), grid=lambda arp, ac, brp, bc, **k: (arp.shape[0] - 1,))
def spgemm_row_size_bitmap(a_rowptr, a_cols, b_rowptr, b_cols, nnz, *, N: ml.constexpr):
  """Exact row sizes of A @ B for B of N columns: a CTA's SMEM bitmap of N bits set by atomic_or for every column of
  every B row A's row i names, then popcounted."""
  i = ml.program_id(0)
  bits = ml.smem((N // 32,), U32)
  bits[...] = ml.zeros((N // 32,), U32)
  for e in range(a_rowptr[i], a_rowptr[i + 1]):
    k = a_cols[e]
    for s in range(b_rowptr[k], b_rowptr[k + 1], 32):
      j = s + ml.arange(0, 32)
      m = j < b_rowptr[k + 1]
      c = ml.load(b_cols.at[j], mask=m, other=0)
      ml.atomic_or(bits.at[c // 32], (1 << (c % 32)).to(U32), mask=m)
  nnz[i] = ml.sum(jax.lax.population_count(bits[...]).to(I32))


def _exact_ref(arp, ac, brp, bc, *, N):
  return np.array([len({int(c) for k in ac[arp[i]:arp[i + 1]] for c in bc[brp[k]:brp[k + 1]]}) for i in range(len(arp) - 1)], np.int32)


case("spgemm_exact_row_sizes_smem_bitmap", spgemm_row_size_bitmap, lambda s: (_spgemm_make(s)[0], dict(N=256)), _exact_ref, 0)


# ---------------------------------------------------------------- 2:4 structured sparsity
@mg.mgpu_kernel(out_shape=lambda w: (S((w.shape[0], w.shape[1] // 2), w.dtype), S((w.shape[0], w.shape[1] // 4), jnp.uint8)),
                grid=lambda w: (w.shape[0] // 32,))
def compress_2_4(w, vals, meta):
  """Keep the two largest magnitudes of every group of four (ties to the lower index), in their order; the metadata
  byte of a group holds the two kept indices, 2 bits each (low bits first)."""
  r = ml.program_id(0) * 32
  g = w.at[ml.ds(r, 32), :][...].reshape(32, w.shape[1] // 4, 4)
  a = ml.abs(g.astype(F32))
  j = ml.arange(0, 4)[None, None, :]
  rank = ml.zeros(g.shape, I32)
  for k in ml.static_range(4):
    ak = a[:, :, k][:, :, None]
    rank += ((ak > a) | ((ak == a) & (k < j))).to(I32)
  keep = rank < 2
  first = ml.min(ml.where(keep, j, 4), axis=2)
  second = ml.max(ml.where(keep, j, -1), axis=2)
  v0 = ml.sum(ml.where(j == first[:, :, None], g, 0), axis=2)
  v1 = ml.sum(ml.where(j == second[:, :, None], g, 0), axis=2)
  vals.at[ml.ds(r, 32), :][...] = ml.join(v0, v1).reshape(32, w.shape[1] // 2).astype(w.dtype)
  meta.at[ml.ds(r, 32), :][...] = (first | (second << 2)).astype(jnp.uint8)


def _c24_make(seed):
  r = rng_of(seed)
  return (np.asarray(jnp.asarray(r.standard_normal((64, 128)), F16)),), {}


def _c24_ref(w):
  g = w.astype(np.float32).reshape(w.shape[0], -1, 4)
  order = np.argsort(-np.abs(g), axis=2, kind="stable")[:, :, :2]
  idx = np.sort(order, axis=2)
  vals = np.take_along_axis(w.reshape(g.shape), idx, axis=2).reshape(w.shape[0], -1)
  return vals, (idx[:, :, 0] | (idx[:, :, 1] << 2)).astype(np.uint8)


case("sparsity_2_4_compress_values_and_meta", compress_2_4, _c24_make, _c24_ref, 0)


@mg.mgpu_kernel(out_shape=lambda v, m: S((v.shape[0], v.shape[1] * 2), v.dtype), grid=lambda v, m: (v.shape[0] // 32,))
def decompress_2_4(vals, meta, w):
  r = ml.program_id(0) * 32
  G = meta.shape[1]
  md = meta.at[ml.ds(r, 32), :][...].astype(I32)
  i0, i1 = md & 3, (md >> 2) & 3
  v = vals.at[ml.ds(r, 32), :][...].reshape(32, G, 2)
  j = ml.arange(0, 4)[None, None, :]
  out = ml.where(j == i0[:, :, None], v[:, :, 0][:, :, None], 0) + ml.where(j == i1[:, :, None], v[:, :, 1][:, :, None], 0)
  w.at[ml.ds(r, 32), :][...] = out.reshape(32, G * 4).astype(w.dtype)


def _d24_make(seed):
  v, m = _c24_ref(*_c24_make(seed)[0])
  return (v, m), {}


def _d24_ref(v, m):
  i0, i1 = (m & 3).astype(np.int64), ((m >> 2) & 3).astype(np.int64)
  out = np.zeros((v.shape[0], m.shape[1], 4), v.dtype)
  np.put_along_axis(out, i0[:, :, None], v.reshape(v.shape[0], -1, 2)[:, :, :1], axis=2)
  np.put_along_axis(out, i1[:, :, None], v.reshape(v.shape[0], -1, 2)[:, :, 1:], axis=2)
  return out.reshape(v.shape[0], -1)


case("sparsity_2_4_decompress", decompress_2_4, _d24_make, _d24_ref, 0)
