"""Probe 71a's corpus, its sixth part: more forms users write: a CSR-vector SpMV over a (rows, nonzeros) tile of
pointer grids, SpMM rows gathered onto the tensor cores, GAT with several heads (a (degree, heads) tile softmaxed
along its rows), a block's message aggregation by jax.ops.segment_sum, a CSR to CSC transpose, GraphSAGE's neighbour
sampling and uniform random walks by ml.rand, PageRank inside lax.fori_loop, majority-vote label propagation by
ml.bincount, a block-sparse attention's block mask skipping tiles, 2:4 pruning by jnp.argsort, union-find roots by a
while loop, segment max by jax.ops.segment_max and an int64-offset SpMV.
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71a_spmv import F16, F32, I32, S, _csr_ref, csr_dense, random_csr, rng_of
from probe71a_traverse import sym_graph

CASES = {}
X64 = {"csr_spmv_int64_row_pointers"}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- CSR-vector SpMV over a (rows, nonzeros) tile
@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, **k: S((rp.shape[0] - 1,), F32),
                grid=lambda rp, c, v, x, *, BR, **k: (ml.cdiv(rp.shape[0] - 1, BR),))
def csr_spmv_tile(rowptr, cols, vals, x, y, *, BR: ml.constexpr, BNZ: ml.constexpr):
  """BR rows a program, BNZ nonzeros of each at a time: offsets start[:, None] + ml.arange(BNZ)[None, :] masked by
  each row's end, the products summed along the rows."""
  n = rowptr.shape[0] - 1
  rows = ml.program_id(0) * BR + ml.arange(0, BR)
  rm = rows < n
  start = ml.load(rowptr.at[rows], mask=rm, other=0)
  end = ml.load(rowptr.at[rows + 1], mask=rm, other=0)
  longest = ml.max(end - start)
  acc = ml.zeros((BR,), F32)
  for k in range(0, longest, BNZ):
    offs = start[:, None] + k + ml.arange(0, BNZ)[None, :]
    m = offs < end[:, None]
    c = ml.load(cols.at[offs], mask=m, other=0)
    acc += ml.sum(ml.load(vals.at[offs], mask=m, other=0.0) * ml.load(x.at[c], mask=m, other=0.0), axis=1)
  ml.store(y.at[rows], acc, mask=rm)


def _tile_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 45, 120, 70)
  return (rp, c, v, r.standard_normal(120).astype(np.float32)), dict(BR=16, BNZ=32)


case("csr_spmv_vector_rows_by_nonzeros_tile", csr_spmv_tile, _tile_make, _csr_ref, 1e-5)


# ---------------------------------------------------------------- SpMM: 64 gathered rows of B on the tensor cores
@mg.mgpu_kernel(out_shape=lambda rp, c, v, b: S((rp.shape[0] - 1, b.shape[1]), F32), grid=lambda rp, c, v, b: (ml.cdiv(rp.shape[0] - 1, 64),))
def csr_spmm_dense_block_dot(rowptr, cols, vals, b, out):
  """A block of 64 rows a program, densified over 64 columns of B at a time ((64, 64) f16 A tile from the CSR rows'
  nonzeros that fall in it), times B's rows on the tensor cores: a row-block SpMM of a banded matrix."""
  i = ml.program_id(0)
  n = rowptr.shape[0] - 1
  rows = i * 64 + ml.arange(0, 64)
  rm = rows < n
  start = ml.load(rowptr.at[rows], mask=rm, other=0)
  end = ml.load(rowptr.at[rows + 1], mask=rm, other=0)
  acc = ml.zeros((64, b.shape[1]), F32)
  for kb in range(b.shape[0] // 64):
    a = ml.zeros((64, 64), F32)
    for t in range(8):
      e = start + t
      m = e < end
      c = ml.load(cols.at[e], mask=m, other=-1)
      v = ml.load(vals.at[e], mask=m, other=0.0)
      a += ml.where((c[:, None] - kb * 64) == ml.arange(0, 64)[None, :], v[:, None], 0.0)
    acc = ml.dot(a.astype(F16), b.at[ml.ds(kb * 64, 64), :][...], acc)
  ml.store(out.at[rows[:, None], ml.arange(0, b.shape[1])[None, :]], acc, mask=rm[:, None])


def _spmm_dot_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 100, 128, 8)
  v = np.asarray(jnp.asarray(v, F16)).astype(np.float32)
  b = np.asarray(jnp.asarray(r.standard_normal((128, 64)) * 0.5, F16))
  return (rp, c, v, b), {}


case("csr_spmm_densified_row_block_wgmma", csr_spmm_dense_block_dot, _spmm_dot_make,
     lambda rp, c, v, b: csr_dense(rp, c, v, 128) @ b.astype(np.float64), 1e-3)


# ---------------------------------------------------------------- GAT with several heads
@mg.mgpu_kernel(out_shape=lambda rp, src, asrc, adst: S((src.shape[0], asrc.shape[1]), F32), grid=lambda rp, src, asrc, adst: (rp.shape[0] - 1,))
def gat_multihead_alpha(rowptr, src, a_src, a_dst, alpha, *, MAXDEG: ml.constexpr = 32):
  """alpha[e, h] = softmax over node v's in-edges of leaky_relu(a_src[src[e], h] + a_dst[v, h]), H = 8 heads: a
  (MAXDEG, 8) tile softmaxed along axis 0 (PyG's GATConv, heads=8)."""
  v = ml.program_id(0)
  H = a_src.shape[1]
  start, end = rowptr[v], rowptr[v + 1]
  e = start + ml.arange(0, MAXDEG)
  m = e < end
  nb = ml.load(src.at[e], mask=m, other=0)
  h = ml.arange(0, H)
  s = ml.load(a_src.at[nb[:, None], h[None, :]], mask=m[:, None], other=0.0) + a_dst.at[v, :][...][None, :]
  s = jax.nn.leaky_relu(s, 0.2)
  a = jax.nn.softmax(ml.where(m[:, None], s, float("-inf")), axis=0)
  ml.store(alpha.at[e[:, None], h[None, :]], a, mask=m[:, None])


def _gatm_make(seed):
  r = rng_of(seed)
  rp, src, _ = random_csr(r, 30, 30, 20, 1)
  return (rp, src, r.standard_normal((30, 8)).astype(np.float32), r.standard_normal((30, 8)).astype(np.float32)), {}


def _gatm_ref(rp, src, asrc, adst):
  dst = np.repeat(np.arange(len(rp) - 1), np.diff(rp))
  s = asrc[src].astype(np.float64) + adst[dst]
  s = np.where(s > 0, s, 0.2 * s)
  out = np.zeros_like(s)
  for i in range(len(rp) - 1):
    t = s[rp[i]:rp[i + 1]]
    if len(t):
      p = np.exp(t - t.max(0))
      out[rp[i]:rp[i + 1]] = p / p.sum(0)
  return out


case("gat_eight_heads_softmax_along_edges", gat_multihead_alpha, _gatm_make, _gatm_ref, 1e-5)


# ---------------------------------------------------------------- a block's messages reduced by jax.ops.segment_sum
@mg.mgpu_kernel(out_shape=lambda src, dst, x, *, n: S((n, x.shape[1]), F32), grid=lambda src, dst, x, **k: (ml.cdiv(src.shape[0], 128),))
def block_segment_sum_messages(src, dst, x, out, *, n: ml.constexpr):
  """Edges sorted by destination: a block of 128 messages summed per destination in registers (jax.ops.segment_sum
  relative to the block's first destination, at most 128 of them), each row then added once."""
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < src.shape[0]
  d = ml.load(dst.at[e], mask=m, other=0)
  first = ml.min(ml.where(m, d, n))
  msg = ml.load(x.at[ml.load(src.at[e], mask=m, other=0)[:, None], ml.arange(0, x.shape[1])[None, :]], mask=m[:, None], other=0.0)
  sums = jax.ops.segment_sum(msg, ml.where(m, d - first, -1), num_segments=128)
  rows = first + ml.arange(0, 128)
  ml.atomic_add(out.at[rows, :], sums, mask=(rows < n)[:, None])


def _bss_make(seed):
  r = rng_of(seed)
  dst = np.sort(r.integers(0, 90, 500)).astype(np.int32)
  return (r.integers(0, 90, 500).astype(np.int32), dst, r.standard_normal((90, 32)).astype(np.float32)), dict(n=90)


def _bss_ref(src, dst, x, *, n):
  out = np.zeros((n, x.shape[1]))
  np.add.at(out, dst, x[src].astype(np.float64))
  return out


case("block_messages_jax_ops_segment_sum", block_segment_sum_messages, _bss_make, _bss_ref, 1e-5)


# ---------------------------------------------------------------- CSR to CSC: count, scan (jnp), scatter
@mg.mgpu_kernel(out_shape=lambda rp, c, *, n_cols: S((n_cols,), I32), grid=lambda rp, c, **k: (ml.cdiv(c.shape[0], 256),))
def column_counts(rowptr, cols, counts, *, n_cols: ml.constexpr):
  e = ml.program_id(0) * 256 + ml.arange(0, 256)
  ml.atomic_add(counts.at[ml.load(cols.at[e], mask=e < cols.shape[0], other=0)], 1, mask=e < cols.shape[0])


@mg.mgpu_kernel(out_shape=lambda rp, c, v, cp: (S(c.shape, I32), S(v.shape, F32), S((cp.shape[0] - 1,), I32)),
                grid=lambda rp, c, v, cp: (rp.shape[0] - 1,))
def csc_scatter(rowptr, cols, vals, colptr, row_idx, csc_vals, fill):
  r = ml.program_id(0)
  for s in range(rowptr[r], rowptr[r + 1], 32):
    e = s + ml.arange(0, 32)
    m = e < rowptr[r + 1]
    c = ml.load(cols.at[e], mask=m, other=0)
    slot = ml.load(colptr.at[c], mask=m, other=0) + ml.atomic_add(fill.at[c], 1, mask=m)
    ml.store(row_idx.at[slot], ml.full((32,), 0, I32) + r, mask=m)
    ml.store(csc_vals.at[slot], ml.load(vals.at[e], mask=m, other=0.0), mask=m)


def csr_to_csc(rp, c, v, *, n_cols, interpret=None):
  counts = column_counts(rp, c, n_cols=n_cols, interpret=interpret)
  colptr = jnp.concatenate([jnp.zeros((1,), I32), jnp.cumsum(counts)]).astype(I32)
  ri, cv, _ = csc_scatter(rp, c, v, colptr, interpret=interpret)
  key = jnp.repeat(jnp.arange(n_cols), counts, total_repeat_length=c.shape[0]) * (rp.shape[0]) + ri
  order = jnp.argsort(key)
  return colptr, ri[order], cv[order]


def _csc_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 40, 50, 20)
  return (rp, c, v), dict(n_cols=50)


def _csc_ref(rp, c, v, *, n_cols):
  rows = np.repeat(np.arange(len(rp) - 1), np.diff(rp))
  order = np.lexsort((rows, c))
  return (np.concatenate([[0], np.cumsum(np.bincount(c, minlength=n_cols))]).astype(np.int32), rows[order].astype(np.int32),
          v[order])


case("csr_to_csc_count_scan_scatter", csr_to_csc, _csc_make, _csc_ref, 0)


# ---------------------------------------------------------------- neighbour sampling and random walks by ml.rand
@mg.mgpu_kernel(out_shape=lambda rp, c, seeds, *, K, seed: S((seeds.shape[0], K), I32), grid=lambda rp, c, seeds, **k: (seeds.shape[0],))
def sample_neighbours(rowptr, cols, seeds, out, *, K: ml.constexpr, seed: ml.constexpr):
  """GraphSAGE's uniform sampler with replacement: K neighbours of each seed node (-1 for a node without any)."""
  i = ml.program_id(0)
  v = seeds[i]
  start, deg = rowptr[v], rowptr[v + 1] - rowptr[v]
  u = ml.rand(seed, i * K + ml.arange(0, K))
  pick = ml.minimum((u * deg.to(F32)).to(I32), ml.maximum(deg - 1, 0))
  nb = ml.load(cols.at[start + pick], mask=ml.full((K,), 0, I32) < deg, other=-1)
  out.at[i, :][...] = nb


def _samp_make(seed):
  rp, c = sym_graph(seed, n=60, m=150)
  return (rp, c, np.arange(0, 60, 3, dtype=np.int32)), dict(K=16, seed=5)


def _samp_ref(rp, c, seeds, *, K, seed):
  """Each sample in its node's neighbour list (or -1 where the list is empty): membership, not values (ml.rand's
  stream is the kernel's own)."""
  return np.zeros((len(seeds), K), np.int32)


def _samp_check(rp, c, seeds, *, K, seed, interpret=None):
  got = np.asarray(sample_neighbours(rp, c, seeds, K=K, seed=seed, interpret=interpret))
  ok = np.array([[(g in set(c[rp[v]:rp[v + 1]])) if rp[v + 1] > rp[v] else g == -1 for g in row]
                 for v, row in zip(seeds, got)])
  return np.where(ok, 0, 1).astype(np.int32)


_samp_check.steps = lambda rp, c, seeds, *, K, seed: [(sample_neighbours, (rp, c, seeds), dict(K=K, seed=seed))]
case("graphsage_uniform_neighbour_sampling_rand", _samp_check, _samp_make, _samp_ref, 0)


@mg.mgpu_kernel(out_shape=lambda rp, c, st, *, L, seed: S((st.shape[0], L), I32), grid=lambda rp, c, st, **k: (ml.cdiv(st.shape[0], 128),))
def random_walks(rowptr, cols, starts, walks, *, L: ml.constexpr, seed: ml.constexpr):
  """DeepWalk's uniform walks, a lane a walker: L steps, each to a random neighbour (a dead end stays)."""
  w = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = w < starts.shape[0]
  v = ml.load(starts.at[w], mask=m, other=0)
  for t in ml.static_range(L):
    ml.store(walks.at[w, t], v, mask=m)
    s = ml.load(rowptr.at[v], mask=m, other=0)
    deg = ml.load(rowptr.at[v + 1], mask=m, other=0) - s
    u = ml.rand(seed, w * L + t)
    k = ml.minimum((u * deg.to(F32)).to(I32), ml.maximum(deg - 1, 0))
    v = ml.where(deg > 0, ml.load(cols.at[s + k], mask=m & (deg > 0), other=0), v)


def _walk_check(rp, c, st, *, L, seed, interpret=None):
  got = np.asarray(random_walks(rp, c, st, L=L, seed=seed, interpret=interpret))
  bad = np.zeros(got.shape, np.int32)
  for i, row in enumerate(got):
    bad[i, 0] = row[0] != st[i]
    for t in range(1, L):
      a, b = row[t - 1], row[t]
      bad[i, t] = not (b in set(c[rp[a]:rp[a + 1]]) or (rp[a + 1] == rp[a] and a == b))
  return bad


_walk_check.steps = lambda rp, c, st, *, L, seed: [(random_walks, (rp, c, st), dict(L=L, seed=seed))]
case("deepwalk_uniform_random_walks_rand", _walk_check, lambda s: (sym_graph(s, n=60, m=150) + (np.arange(200, dtype=np.int32) % 60,), dict(L=6, seed=3)),
     lambda rp, c, st, *, L, seed: np.zeros((len(st), L), np.int32), 0)


# ---------------------------------------------------------------- PageRank inside lax.fori_loop
@mg.mgpu_kernel(out_shape=lambda rp, c, pr, od: S(pr.shape, F32), grid=lambda rp, c, pr, od: (ml.cdiv(pr.shape[0], 64),))
def pagerank_rows(rowptr, src, pr, out_deg, new_pr, *, MAXDEG: ml.constexpr = 32):
  v = ml.program_id(0) * 64 + ml.arange(0, 64)
  n = pr.shape[0]
  m = v < n
  s = ml.load(rowptr.at[v], mask=m, other=0)
  e = ml.load(rowptr.at[v + 1], mask=m, other=0)
  acc = ml.zeros((64,), F32)
  for t in range(MAXDEG):
    k = s + t
    km = k < e
    u = ml.load(src.at[k], mask=km, other=0)
    acc += ml.where(km, ml.load(pr.at[u]) / ml.load(out_deg.at[u]).to(F32), 0.0)
  ml.store(new_pr.at[v], 0.15 / n + 0.85 * acc, mask=m)


def pagerank_fori(rp, src, od, *, iters, interpret=None):
  n = rp.shape[0] - 1
  return jax.lax.fori_loop(0, iters, lambda i, pr: pagerank_rows(rp, src, pr, od, interpret=interpret),
                           jnp.full((n,), 1.0 / n, F32))


def _prf_make(seed):
  rp, c = sym_graph(seed, n=100, m=300)
  return (rp, c, np.maximum(np.diff(rp), 1).astype(np.int32)), dict(iters=6)


def _prf_ref(rp, c, od, *, iters):
  n = len(rp) - 1
  pr = np.full(n, 1.0 / n)
  for _ in range(iters):
    pr = np.array([0.15 / n + 0.85 * sum(pr[u] / od[u] for u in c[rp[v]:rp[v + 1]]) for v in range(n)])
  return pr


case("pagerank_in_lax_fori_loop", pagerank_fori, _prf_make, _prf_ref, 1e-5)


# ---------------------------------------------------------------- majority-vote label propagation by ml.bincount
@mg.mgpu_kernel(out_shape=lambda rp, c, lab, *, L: lab, grid=lambda rp, c, lab, **k: (lab.shape[0],))
def label_majority(rowptr, cols, labels, out, *, L: ml.constexpr, MAXDEG: ml.constexpr = 32):
  """Each node takes the most frequent label among its neighbours (the smallest on ties; its own where it has
  none): the neighbours' labels counted by ml.bincount of length L, then ml.argmax."""
  v = ml.program_id(0)
  e = rowptr[v] + ml.arange(0, MAXDEG)
  m = e < rowptr[v + 1]
  nl = ml.load(labels.at[ml.load(cols.at[e], mask=m, other=0)], mask=m, other=-1)
  counts = ml.bincount(ml.where(m, nl, L), length=L)
  best = ml.argmax(counts)
  out[v] = ml.where(rowptr[v + 1] > rowptr[v], best, labels[v])


def _maj_make(seed):
  rp, c = sym_graph(seed, n=60, m=150)
  return (rp, c, rng_of(seed).integers(0, 8, 60).astype(np.int32)), dict(L=8)


def _maj_ref(rp, c, lab, *, L):
  out = lab.copy()
  for v in range(len(rp) - 1):
    nb = c[rp[v]:rp[v + 1]]
    if len(nb):
      out[v] = np.argmax(np.bincount(lab[nb], minlength=L))
  return out


case("label_propagation_majority_bincount_argmax", label_majority, _maj_make, _maj_ref, 0)


# ---------------------------------------------------------------- block-sparse attention scores: a block mask
@mg.mgpu_kernel(out_shape=lambda lay, q, k: S((q.shape[0], k.shape[0]), F32), grid=lambda lay, q, k: (lay.shape[0], lay.shape[1]))
def block_sparse_scores(layout, q, k, s):
  """S = Q K^T on the (64, 64) blocks the layout keeps (Triton's blocksparse matmul's SDD), the others 0."""
  i, j = ml.program_id(0), ml.program_id(1)
  if layout[i, j] != 0:
    s.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = ml.dot(q.at[ml.ds(i * 64, 64), :][...], k.at[ml.ds(j * 64, 64), :][...].T)
  else:
    s.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = ml.zeros((64, 64), F32)


def _bs_make(seed):
  r = rng_of(seed)
  lay = (r.random((3, 4)) < 0.5).astype(np.int32)
  return (lay, np.asarray(jnp.asarray(r.standard_normal((192, 64)) * 0.3, F16)),
          np.asarray(jnp.asarray(r.standard_normal((256, 64)) * 0.3, F16))), {}


def _bs_ref(lay, q, k):
  full = q.astype(np.float64) @ k.astype(np.float64).T
  return full * np.kron(lay, np.ones((64, 64)))


case("block_sparse_sdd_scores_layout_skip", block_sparse_scores, _bs_make, _bs_ref, 1e-3)


# ---------------------------------------------------------------- 2:4 pruning by jnp.argsort in the kernel
@mg.mgpu_kernel(out_shape=lambda w: w, grid=lambda w: (w.shape[0] // 16,))
def prune_2_4_argsort(w, out):
  """Zero the two smallest magnitudes of every group of four (jnp.argsort of -|w| along the group, stable)."""
  r = ml.program_id(0) * 16
  g = w.at[ml.ds(r, 16), :][...].reshape(16, w.shape[1] // 4, 4)
  order = jnp.argsort(-jnp.abs(g.astype(F32)), axis=-1)
  rank = jnp.argsort(order, axis=-1)
  out.at[ml.ds(r, 16), :][...] = jnp.where(rank < 2, g, 0).reshape(16, w.shape[1])


def _prune_ref(w):
  g = w.astype(np.float32).reshape(w.shape[0], -1, 4)
  rank = np.argsort(np.argsort(-np.abs(g), axis=2, kind="stable"), axis=2, kind="stable")
  return np.where(rank < 2, w.reshape(g.shape), 0).reshape(w.shape)


case("sparsity_2_4_prune_jnp_argsort", prune_2_4_argsort,
     lambda s: ((np.asarray(jnp.asarray(rng_of(s).standard_normal((32, 128)), F16)),), {}), _prune_ref, 0)


# ---------------------------------------------------------------- union-find roots by a while loop a lane
@mg.mgpu_kernel(out_shape=lambda p: p, grid=lambda p: (ml.cdiv(p.shape[0], 128),))
def find_roots(parent, root):
  """Each lane follows its node's parent pointers to the root (Shiloach-Vishkin's compress step): a while loop until
  no lane moves."""
  v = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = v < parent.shape[0]
  cur = ml.where(m, v, 0)
  nxt = ml.load(parent.at[cur], mask=m, other=0)
  while ml.any(nxt != cur):
    cur = nxt
    nxt = ml.load(parent.at[cur], mask=m, other=0)
  ml.store(root.at[v], cur, mask=m)


def _roots_make(seed):
  r = rng_of(seed)
  n = 300
  parent = np.array([r.integers(0, i) if i and r.random() < 0.8 else i for i in range(n)], np.int32)
  return (parent,), {}


def _roots_ref(parent):
  out = parent.copy()
  for v in range(len(parent)):
    x = v
    while parent[x] != x:
      x = parent[x]
    out[v] = x
  return out


case("union_find_roots_while_any", find_roots, _roots_make, _roots_ref, 0)


# ---------------------------------------------------------------- segment max of a block by jax.ops.segment_max
@mg.mgpu_kernel(out_shape=lambda seg, x, *, G: S((G,), F32), grid=lambda seg, x, **k: (ml.cdiv(x.shape[0], 256),))
def block_segment_max(seg, x, out, *, G: ml.constexpr):
  i = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = i < x.shape[0]
  g = ml.load(seg.at[i], mask=m, other=-1)
  part = jax.ops.segment_max(ml.load(x.at[i], mask=m, other=0.0), g, num_segments=G)
  ml.atomic_max(out.at[ml.arange(0, G)], part)


def _smax_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 30, 1000).astype(np.int32), r.standard_normal(1000).astype(np.float32)), dict(G=32)


def _smax_ref(seg, x, *, G):
  out = np.full(G, -np.inf)
  np.maximum.at(out, seg, x.astype(np.float64))
  return out


case("segment_max_jax_ops_then_atomic_max", block_segment_max, _smax_make, _smax_ref, 0)


# ---------------------------------------------------------------- int64 row pointers (x64)
@mg.mgpu_kernel(out_shape=lambda rp, c, v, x: S((rp.shape[0] - 1,), F32), grid=lambda rp, c, v, x: (rp.shape[0] - 1,))
def csr_spmv_int64(rowptr, cols, vals, x, y):
  """cuSPARSE's 64-bit index CSR: int64 row pointers, int32 columns."""
  row = ml.program_id(0)
  start, end = rowptr[row], rowptr[row + 1]
  acc = ml.zeros((64,), F32)
  for s in range(start, end, 64):
    e = s + ml.arange(0, 64)
    m = e < end
    acc += ml.load(vals.at[e], mask=m, other=0.0) * ml.load(x.at[ml.load(cols.at[e], mask=m, other=0)], mask=m, other=0.0)
  y[row] = ml.sum(acc)


def _i64_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 20, 100, 90)
  return (rp.astype(np.int64), c, v, r.standard_normal(100).astype(np.float32)), {}


case("csr_spmv_int64_row_pointers", csr_spmv_int64, _i64_make, _csr_ref, 1e-5)


# ---------------------------------------------------------------- connected components of a small graph in one CTA
@mg.mgpu_kernel(out_shape=lambda src, dst, *, n: S((n,), I32), grid=(1,))
def cc_one_cta(src, dst, lab, *, n: ml.constexpr):
  """A molecule-sized graph in one CTA: labels in SMEM lowered by atomic_min over the edges until none changes. The
  buffer is n rounded up to a multiple of 8 (a (100,) one read whole is MG204: design note 233)."""
  NP = ml.cdiv(n, 8) * 8
  L = ml.smem((NP,), I32)
  L[...] = ml.arange(0, NP)
  changed = True
  while changed:
    old = L[...]
    for s in range(0, src.shape[0], 128):
      e = s + ml.arange(0, 128)
      m = e < src.shape[0]
      u = ml.load(src.at[e], mask=m, other=0)
      w = ml.load(dst.at[e], mask=m, other=0)
      lo = ml.minimum(L[u], L[w])
      ml.atomic_min(L.at[u], lo, mask=m)
      ml.atomic_min(L.at[w], lo, mask=m)
    changed = ml.any(L[...] != old)
  lab[...] = L.at[ml.ds(0, n)][...]


def _cc1_make(seed):
  r = rng_of(seed)
  n = 100
  return (r.integers(0, n, 70).astype(np.int32), r.integers(0, n, 70).astype(np.int32)), dict(n=n)


def _cc1_ref(src, dst, *, n):
  parent = list(range(n))

  def find(x):
    while parent[x] != x:
      x = parent[x]
    return x
  for a, b in zip(src, dst):
    ra, rb = find(a), find(b)
    if ra != rb:
      parent[max(ra, rb)] = min(ra, rb)
  return np.array([find(v) for v in range(n)], np.int32)


case("connected_components_one_cta_smem_labels", cc_one_cta, _cc1_make, _cc1_ref, 0)
