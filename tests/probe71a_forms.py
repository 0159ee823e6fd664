"""Probe 71a's corpus, its seventh part: the everyday spellings of graph kernels' small steps, as Pallas and jnp users
write them: degrees by jnp.diff of a whole read of the row pointers, a frontier of uint8 flags, int16 column indices,
counts and ranks of bool masks by jnp.sum / jnp.cumsum, a whole-array gather of x at the columns, a row of odd length
read whole, the edge list's source ids from the row pointers by jnp.searchsorted, a ticket taken under a scalar mask.
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71a_spmv import F32, I32, S, _csr_ref, random_csr, rng_of
from probe71a_traverse import sym_graph

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


@mg.mgpu_kernel(out_shape=lambda rp: S((rp.shape[0] - 1,), I32), grid=(1,))
def degrees_jnp_diff(rowptr, deg):
  """All degrees at once: jnp.diff of the whole row pointers (61 of them: an odd read)."""
  deg[...] = jnp.diff(rowptr[...])


case("degrees_jnp_diff_whole_read", degrees_jnp_diff, lambda s: ((sym_graph(s)[0],), {}), lambda rp: np.diff(rp), 0)


@mg.mgpu_kernel(out_shape=lambda rp, c, f: S((rp.shape[0] - 1,), jnp.uint8), grid=lambda rp, c, f: (rp.shape[0] - 1,))
def frontier_u8_neighbours(rowptr, cols, front, nxt):
  """Gunrock's char frontier: a vertex is in the next frontier where some neighbour's flag is set."""
  v = ml.program_id(0)
  hit = 0
  for s in range(rowptr[v], rowptr[v + 1], 32):
    e = s + ml.arange(0, 32)
    m = e < rowptr[v + 1]
    f = ml.load(front.at[ml.load(cols.at[e], mask=m, other=0)], mask=m, other=0)
    hit = hit | ml.max(f)
  nxt[v] = (hit != 0).astype(jnp.uint8)


def _fu8_make(seed):
  rp, c = sym_graph(seed)
  return (rp, c, (rng_of(seed).random(60) < 0.2).astype(np.uint8)), {}


def _fu8_ref(rp, c, f):
  return np.array([int(any(f[u] for u in c[rp[v]:rp[v + 1]])) for v in range(len(rp) - 1)], np.uint8)


case("frontier_uint8_flags_max", frontier_u8_neighbours, _fu8_make, _fu8_ref, 0)


@mg.mgpu_kernel(out_shape=lambda rp, c, v, x: S((rp.shape[0] - 1,), F32), grid=lambda rp, c, v, x: (rp.shape[0] - 1,))
def csr_spmv_int16_cols(rowptr, cols, vals, x, y):
  """Compressed column indices (int16, a graph of fewer than 32768 nodes)."""
  row = ml.program_id(0)
  acc = ml.zeros((32,), F32)
  for s in range(rowptr[row], rowptr[row + 1], 32):
    e = s + ml.arange(0, 32)
    m = e < rowptr[row + 1]
    c = ml.load(cols.at[e], mask=m, other=0)
    acc += ml.load(vals.at[e], mask=m, other=0.0) * x[c]
  y[row] = jnp.sum(acc)


def _i16_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 20, 3000, 60)
  return (rp, c.astype(np.int16), v, r.standard_normal(3000).astype(np.float32)), {}


case("csr_spmv_int16_column_indices", csr_spmv_int16_cols, _i16_make,
     lambda rp, c, v, x: _csr_ref(rp, c.astype(np.int32), v, x), 1e-5)


@mg.mgpu_kernel(out_shape=lambda f: (S((), I32), S(f.shape, I32)), grid=(1,))
def bool_counts_and_ranks(flags, count, rank):
  """How many flags are set (jnp.sum of bools) and each set flag's slot (jnp.cumsum of bools minus one)."""
  f = flags[...]
  count[...] = jnp.sum(f)
  rank[...] = jnp.where(f, jnp.cumsum(f) - 1, -1)


def _bool_ref(f):
  return np.int32(f.sum()), np.where(f, np.cumsum(f) - 1, -1).astype(np.int32)


case("bool_sum_and_cumsum_ranks", bool_counts_and_ranks, lambda s: ((rng_of(s).random(256) < 0.3,), {}), _bool_ref, 0)


@mg.mgpu_kernel(out_shape=lambda c, v, x: S(c.shape, F32), grid=(1,))
def products_whole_gather(cols, vals, x, prod):
  """Every nonzero's product at once (a COO SpMV's first step): x gathered at all columns, x[cols[...]]."""
  prod[...] = vals[...] * x[cols[...]]


def _pw_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 77, 512).astype(np.int32), r.standard_normal(512).astype(np.float32),
          r.standard_normal(77).astype(np.float32)), {}


case("coo_products_whole_gather", products_whole_gather, _pw_make, lambda c, v, x: v * x[c], 0)


@mg.mgpu_kernel(out_shape=lambda rp, *, nnz: S((nnz,), I32), grid=lambda rp, *, nnz: (ml.cdiv(nnz, 128),))
def csr_row_ids_searchsorted(rowptr, rows, *, nnz: ml.constexpr):
  """The COO row of each nonzero from the row pointers: jnp.searchsorted(rowptr, e, side='right') - 1."""
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  ml.store(rows.at[e], jnp.searchsorted(rowptr[...], e, side="right") - 1, mask=e < nnz)


def _rid_make(seed):
  rp, _ = sym_graph(seed)
  return (rp,), dict(nnz=int(rp[-1]))


case("csr_row_ids_jnp_searchsorted_whole_pointers", csr_row_ids_searchsorted, _rid_make,
     lambda rp, *, nnz: np.repeat(np.arange(len(rp) - 1), np.diff(rp)).astype(np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda d, t, q0: (q0, S((), I32)), grid=lambda d, t, q0: (d.shape[0],), input_output_aliases={2: 0})
def enqueue_if(dist, target, queue_in, queue, qlen):
  """A program a vertex: one whose distance equals the target takes a ticket (a scalar atomic under a scalar mask)
  and writes itself there. The queue's tail no ticket reaches keeps the input's values (MG602's hint: an aliased
  input; the CUDA port leaves it as it was)."""
  v = ml.program_id(0)
  hit = dist[v] == target[...]
  slot = ml.atomic_add(qlen, 1, mask=hit)
  if hit:
    queue[slot] = v


def enqueue_sorted(d, t, interpret=None):
  q, n = enqueue_if(d, t, jnp.full(d.shape, -1, I32), interpret=interpret)
  return jnp.sort(jnp.where(jnp.arange(q.shape[0]) < n, q, 1 << 30)), n


enqueue_sorted.steps = lambda d, t: [(enqueue_if, (d, t, np.full(d.shape, -1, np.int32)), {})]


def _enq_ref(d, t):
  hits = np.flatnonzero(d == t)
  q = np.full(len(d), 1 << 30, np.int64)
  q[:len(hits)] = hits
  return q, np.int32(len(hits))


case("enqueue_ticket_under_scalar_mask", enqueue_sorted,
     lambda s: ((rng_of(s).integers(0, 4, 50).astype(np.int32), np.int32(2)), {}), _enq_ref, 0)
