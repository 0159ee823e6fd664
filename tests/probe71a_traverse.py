"""Probe 71a's corpus, its third part: graph traversal and iterative analytics as Gunrock and cuGraph authors write
them: BFS level-synchronous steps (top-down from a frontier queue with atomic visited flags and an atomic queue
ticket; vertex-parallel from a bool frontier; bottom-up with an early exit; a visited bitmap by atomic_or), PageRank
(pull by CSR, push by atomics, the dangling mass and the L1 change by scalar atomics), connected components (min-label
hooking by atomic_min, pointer jumping), label propagation, Bellman-Ford relaxation by float atomic_min, k-core
peeling, Jones-Plassmann colouring rounds. Multi-step algorithms run their launches from a Python loop, as a host
driver does; queues whose order is the GPU's to choose are sorted by the wrappers.
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe71a_spmv import F32, I32, S, rng_of

CASES = {}
U32 = jnp.uint32


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def sym_graph(seed, n=60, m=150):
  """An undirected graph as a symmetric CSR without self loops or repeats (rowptr, cols sorted within rows)."""
  r = rng_of(seed)
  a = r.integers(0, n, m)
  b = r.integers(0, n, m)
  keep = a != b
  e = np.unique(np.concatenate([np.stack([a[keep], b[keep]], 1), np.stack([b[keep], a[keep]], 1)]), axis=0)
  rowptr = np.concatenate([[0], np.cumsum(np.bincount(e[:, 0], minlength=n))]).astype(np.int32)
  return rowptr, e[:, 1].astype(np.int32)


def bfs_levels(rp, cols, src):
  n = len(rp) - 1
  dist = np.full(n, -1, np.int32)
  dist[src] = 0
  front = [src]
  lvl = 0
  while front:
    nxt = []
    for u in front:
      for v in cols[rp[u]:rp[u + 1]]:
        if dist[v] < 0:
          dist[v] = lvl + 1
          nxt.append(v)
    front, lvl = nxt, lvl + 1
  return dist


# ---------------------------------------------------------------- BFS top-down: frontier queue, cas visited, ticket
@mg.mgpu_kernel(out_shape=lambda rp, c, q, qn, d, lvl: (d, S(c.shape, I32), S((), I32)), grid=lambda rp, c, q, qn, d, lvl: (q.shape[0],),
                input_output_aliases={4: 0})
def bfs_top_down_step(rowptr, cols, queue, qlen, dist_in, lvl: ml.scalar, dist, next_q, next_len):
  """A frontier vertex a program; its neighbours 32 at a time claim dist by cas (-1 -> lvl + 1), and the lanes that
  won take slots in the next queue from one atomic ticket."""
  i = ml.program_id(0)
  if i < qlen[...]:
    u = queue[i]
    for s in range(rowptr[u], rowptr[u + 1], 32):
      e = s + ml.arange(0, 32)
      m = e < rowptr[u + 1]
      v = ml.load(cols.at[e], mask=m, other=0)
      old = ml.atomic_cas(dist.at[v], -1, ml.where(m, lvl + 1, -1))
      won = m & (old == -1)
      base = ml.atomic_add(next_len, ml.sum(won.to(I32)))
      slot = base + ml.cumsum(won.to(I32)) - 1
      ml.store(next_q.at[slot], v, mask=won)


def bfs_top_down(rp, cols, *, src, interpret=None):
  n = rp.shape[0] - 1
  dist = jnp.full((n,), -1, I32).at[src].set(0)
  queue = jnp.zeros((cols.shape[0],), I32).at[0].set(src)
  qlen = jnp.int32(1)
  for lvl in range(n):
    if int(qlen) == 0:
      break
    dist, nq, nl = bfs_top_down_step(rp, cols, queue, qlen, dist, lvl, interpret=interpret)
    queue, qlen = nq, nl
  return dist


def _steps_bfs(step, *extra):
  def steps(rp, cols, *, src):
    n = rp.shape[0] - 1
    return [(step, (rp, cols) + tuple(e(n, cols) for e in extra) + (np.int32(0),), {})]
  return steps


bfs_top_down.steps = _steps_bfs(bfs_top_down_step, lambda n, c: np.zeros(c.shape[0], np.int32), lambda n, c: np.int32(1),
                                lambda n, c: np.full(n, -1, np.int32))


def _bfs_make(seed):
  rp, c = sym_graph(seed)
  return (rp, c), dict(src=3)


case("bfs_top_down_queue_cas_ticket", bfs_top_down, _bfs_make, lambda rp, c, *, src: bfs_levels(rp, c, src), 0)


# ---------------------------------------------------------------- BFS vertex-parallel from a bool frontier
@mg.mgpu_kernel(out_shape=lambda rp, c, f, d, lvl: (S(f.shape, jnp.bool_), d), grid=lambda rp, c, f, d, lvl: (ml.cdiv(f.shape[0], 128),),
                input_output_aliases={3: 1})
def bfs_frontier_step(rowptr, cols, front, dist_in, lvl: ml.scalar, next_front, dist):
  """A lane a vertex; frontier vertices walk their neighbours to the block's largest degree, marking unvisited ones
  with atomic_min (the level is the same from every writer)."""
  u = ml.program_id(0) * 128 + ml.arange(0, 128)
  n = front.shape[0]
  um = u < n
  f = ml.load(front.at[u], mask=um, other=False)
  start = ml.load(rowptr.at[u], mask=um, other=0)
  deg = ml.where(f, ml.load(rowptr.at[u + 1], mask=um, other=0) - start, 0)
  for t in range(ml.max(deg)):
    m = t < deg
    v = ml.load(cols.at[start + t], mask=m, other=0)
    seen = ml.load(dist_in.at[v], mask=m, other=0)
    go = m & (seen < 0)
    ml.atomic_max(dist.at[v], lvl + 1, mask=go)
  ml.store(next_front.at[u], ml.load(dist.at[u], mask=um, other=0) == lvl + 1, mask=um)


def bfs_frontier(rp, cols, *, src, interpret=None):
  n = rp.shape[0] - 1
  dist = jnp.full((n,), -1, I32).at[src].set(0)
  front = jnp.zeros((n,), bool).at[src].set(True)
  for lvl in range(n):
    if not bool(jnp.any(front)):
      break
    front, dist = bfs_frontier_step(rp, cols, front, dist, lvl, interpret=interpret)
  return dist


bfs_frontier.steps = _steps_bfs(bfs_frontier_step, lambda n, c: np.zeros(n, bool), lambda n, c: np.full(n, -1, np.int32))
case("bfs_vertex_parallel_bool_frontier", bfs_frontier, _bfs_make, lambda rp, c, *, src: bfs_levels(rp, c, src), 0)


# ---------------------------------------------------------------- BFS bottom-up with an early exit
@mg.mgpu_kernel(out_shape=lambda rp, c, f, d, lvl: (S(f.shape, jnp.bool_), d), grid=lambda rp, c, f, d, lvl: (f.shape[0],))
def bfs_bottom_up_step(rowptr, cols, front, dist_in, lvl: ml.scalar, next_front, dist):
  """A vertex a program: an unvisited vertex scans its neighbours for one in the frontier and stops at the first."""
  v = ml.program_id(0)
  d = dist_in[v]
  found = False
  if d < 0:
    e = rowptr[v]
    while e < rowptr[v + 1]:
      if front[cols[e]]:
        found = True
        break
      e += 1
  dist[v] = ml.where(found, lvl + 1, d)
  next_front[v] = found


def bfs_bottom_up(rp, cols, *, src, interpret=None):
  n = rp.shape[0] - 1
  dist = jnp.full((n,), -1, I32).at[src].set(0)
  front = jnp.zeros((n,), bool).at[src].set(True)
  for lvl in range(n):
    if not bool(jnp.any(front)):
      break
    front, dist = bfs_bottom_up_step(rp, cols, front, dist, lvl, interpret=interpret)
  return dist


bfs_bottom_up.steps = _steps_bfs(bfs_bottom_up_step, lambda n, c: np.zeros(n, bool), lambda n, c: np.full(n, -1, np.int32))
case("bfs_bottom_up_while_break", bfs_bottom_up, _bfs_make, lambda rp, c, *, src: bfs_levels(rp, c, src), 0)


# ---------------------------------------------------------------- visited bitmap by atomic_or (Gunrock's bitmask)
@mg.mgpu_kernel(out_shape=lambda rp, c, q: (S((ml.cdiv(rp.shape[0] - 1, 32),), U32), S(c.shape, I32), S((), I32)),
                grid=lambda rp, c, q: (q.shape[0],))
def expand_with_bitmap(rowptr, cols, queue, visited, out_q, out_len):
  """One expansion from a queue of distinct sources (-1 padded): a neighbour is enqueued by the lane whose atomic_or
  first set its bit (sources' own bits are not preset here: a source reached from another source is enqueued too)."""
  u = queue[ml.program_id(0)]
  if u >= 0:
    for s in range(rowptr[u], rowptr[u + 1], 32):
      e = s + ml.arange(0, 32)
      m = e < rowptr[u + 1]
      v = ml.load(cols.at[e], mask=m, other=0)
      bit = (1 << (v % 32)).to(U32)
      old = ml.atomic_or(visited.at[v // 32], bit, mask=m)
      first = m & ((old & bit) == 0)
      base = ml.atomic_add(out_len, ml.sum(first.to(I32)))
      ml.store(out_q.at[base + ml.cumsum(first.to(I32)) - 1], v, mask=first)


def expand_sorted(rp, cols, q, interpret=None):
  bits, oq, ol = expand_with_bitmap(rp, cols, q, interpret=interpret)
  return bits, jnp.sort(jnp.where(jnp.arange(oq.shape[0]) < ol, oq, jnp.iinfo(jnp.int32).max))


def _exp_make(seed):
  rp, c = sym_graph(seed)
  q = np.full(8, -1, np.int32)
  q[:5] = [0, 7, 11, 20, 33]
  return (rp, c, q), {}


def _exp_ref(rp, c, q):
  n = len(rp) - 1
  reach = sorted({int(v) for u in q if u >= 0 for v in c[rp[u]:rp[u + 1]]})
  words = np.zeros((n + 31) // 32, np.uint64)
  for v in reach:
    words[v // 32] |= np.uint64(1) << np.uint64(v % 32)
  oq = np.full(c.shape[0], np.iinfo(np.int32).max, np.int64)
  oq[:len(reach)] = reach
  return words.astype(np.uint32), oq


case("expand_visited_bitmap_atomic_or", expand_sorted, _exp_make, _exp_ref, 0)


# ---------------------------------------------------------------- PageRank pull over in-edges
@mg.mgpu_kernel(out_shape=lambda rp, c, pr, od, **k: S(pr.shape, F32), grid=lambda rp, c, pr, od, **k: (pr.shape[0],))
def pagerank_pull(rowptr, src, pr, out_deg, new_pr, *, damping: ml.constexpr = 0.85):
  v = ml.program_id(0)
  n = pr.shape[0]
  acc = ml.zeros((32,), F32)
  for s in range(rowptr[v], rowptr[v + 1], 32):
    e = s + ml.arange(0, 32)
    m = e < rowptr[v + 1]
    u = ml.load(src.at[e], mask=m, other=0)
    acc += ml.load(pr.at[u], mask=m, other=0.0) / ml.load(out_deg.at[u], mask=m, other=1).to(F32)
  new_pr[v] = (1.0 - damping) / n + damping * ml.sum(acc)


def pagerank(rp, src, out_deg, *, iters, interpret=None):
  n = rp.shape[0] - 1
  pr = jnp.full((n,), 1.0 / n, F32)
  for _ in range(iters):
    pr = pagerank_pull(rp, src, pr, out_deg, interpret=interpret)
  return pr


def _pr_make(seed):
  rp, c = sym_graph(seed, n=50, m=200)
  deg = np.diff(rp).astype(np.int32)
  return (rp, c, np.maximum(deg, 1)), dict(iters=5)


def _pr_ref(rp, c, od, *, iters, d=0.85):
  n = len(rp) - 1
  pr = np.full(n, 1.0 / n)
  for _ in range(iters):
    new = np.zeros(n)
    for v in range(n):
      new[v] = (1 - d) / n + d * sum(pr[u] / od[u] for u in c[rp[v]:rp[v + 1]])
    pr = new
  return pr


case("pagerank_pull_five_iterations", pagerank, _pr_make, _pr_ref, 1e-5)


# ---------------------------------------------------------------- PageRank push with the dangling mass and L1 change
@mg.mgpu_kernel(out_shape=lambda rp, c, pr: (S(pr.shape, F32), S((), F32)), grid=lambda rp, c, pr: (pr.shape[0],))
def pagerank_push(rowptr, cols, pr, contrib, dangling):
  """A source vertex a program pushes pr / out_degree to its out-neighbours; a vertex without edges adds its rank to
  the dangling mass."""
  u = ml.program_id(0)
  deg = rowptr[u + 1] - rowptr[u]
  share = pr[u] / ml.maximum(deg, 1).to(F32)
  if deg == 0:
    ml.atomic_add(dangling, pr[u])
  for s in range(rowptr[u], rowptr[u + 1], 32):
    e = s + ml.arange(0, 32)
    m = e < rowptr[u + 1]
    ml.atomic_add(contrib.at[ml.load(cols.at[e], mask=m, other=0)], share, mask=m)


@mg.mgpu_kernel(out_shape=lambda c, d, pr, **k: (S(pr.shape, F32), S((), F32)), grid=lambda c, d, pr, **k: (ml.cdiv(pr.shape[0], 128),))
def pagerank_finish(contrib, dangling, pr, new_pr, l1, *, damping: ml.constexpr = 0.85):
  v = ml.program_id(0) * 128 + ml.arange(0, 128)
  n = pr.shape[0]
  m = v < n
  new = (1.0 - damping) / n + damping * (ml.load(contrib.at[v], mask=m, other=0.0) + dangling[...] / n)
  ml.store(new_pr.at[v], new, mask=m)
  ml.atomic_add(l1, ml.sum(ml.where(m, ml.abs(new - ml.load(pr.at[v], mask=m, other=0.0)), 0.0)))


def pagerank_push_iters(rp, cols, *, iters, interpret=None):
  n = rp.shape[0] - 1
  pr = jnp.full((n,), 1.0 / n, F32)
  for _ in range(iters):
    c, d = pagerank_push(rp, cols, pr, interpret=interpret)
    pr, l1 = pagerank_finish(c, d, pr, interpret=interpret)
  return pr, l1


def _prp_make(seed):
  r = rng_of(seed)
  n = 70
  lens = np.where(r.random(n) < 0.15, 0, r.integers(1, 6, n))
  rp = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  cols = np.concatenate([r.choice(n, l, replace=False) for l in lens]).astype(np.int32)
  return (rp, cols), dict(iters=4)


def _prp_ref(rp, cols, *, iters, d=0.85):
  n = len(rp) - 1
  pr = np.full(n, 1.0 / n)
  for _ in range(iters):
    c = np.zeros(n)
    dang = 0.0
    for u in range(n):
      deg = rp[u + 1] - rp[u]
      if deg == 0:
        dang += pr[u]
      for v in cols[rp[u]:rp[u + 1]]:
        c[v] += pr[u] / deg
    new = (1 - d) / n + d * (c + dang / n)
    l1 = np.abs(new - pr).sum()
    pr = new
  return pr, l1


case("pagerank_push_dangling_l1_atomics", pagerank_push_iters, _prp_make, _prp_ref, 1e-5)


# ---------------------------------------------------------------- connected components: hooking and pointer jumping
@mg.mgpu_kernel(out_shape=lambda src, dst, lab: lab, grid=lambda src, dst, lab: (ml.cdiv(src.shape[0], 128),), input_output_aliases={2: 0})
def cc_hook(src, dst, labels_in, labels):
  """Edge-parallel min-label hooking: each edge pulls both ends' labels down to the smaller one."""
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < src.shape[0]
  u = ml.load(src.at[e], mask=m, other=0)
  v = ml.load(dst.at[e], mask=m, other=0)
  lu = ml.load(labels_in.at[u], mask=m, other=0)
  lv = ml.load(labels_in.at[v], mask=m, other=0)
  lo = ml.minimum(lu, lv)
  ml.atomic_min(labels.at[u], lo, mask=m)
  ml.atomic_min(labels.at[v], lo, mask=m)


@mg.mgpu_kernel(out_shape=lambda lab: lab, grid=lambda lab: (ml.cdiv(lab.shape[0], 128),))
def cc_jump(labels, out):
  """Pointer jumping: label = label[label] until it stops changing (a lane's own loop)."""
  v = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = v < labels.shape[0]
  l = ml.load(labels.at[v], mask=m, other=0)
  nxt = ml.load(labels.at[l], mask=m, other=0)
  while ml.any(nxt != l):
    l = nxt
    nxt = ml.load(labels.at[l], mask=m, other=0)
  ml.store(out.at[v], l, mask=m)


def connected_components(src, dst, *, n, rounds, interpret=None):
  lab = jnp.arange(n, dtype=I32)
  for _ in range(rounds):
    lab = cc_jump(cc_hook(src, dst, lab, interpret=interpret), interpret=interpret)
  return lab


def _cc_make(seed):
  r = rng_of(seed)
  n = 90
  src = r.integers(0, n, 60).astype(np.int32)
  dst = r.integers(0, n, 60).astype(np.int32)
  return (src, dst), dict(n=n, rounds=16)   # (8 left seed 1's labels 4 where 3 is the root: the GPU twin's seed)


def _cc_ref(src, dst, *, n, rounds):
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


case("connected_components_hook_and_jump", connected_components, _cc_make, _cc_ref, 0)


# ---------------------------------------------------------------- label propagation (min of neighbours' labels, pull)
@mg.mgpu_kernel(out_shape=lambda rp, c, lab: (lab, S((), I32)), grid=lambda rp, c, lab: (lab.shape[0],))
def label_prop_min(rowptr, cols, labels, out, changed):
  v = ml.program_id(0)
  best = labels[v]
  for e in range(rowptr[v], rowptr[v + 1]):
    best = ml.minimum(best, labels[cols[e]])
  out[v] = best
  if best != labels[v]:
    ml.atomic_add(changed, 1)


def label_propagation(rp, cols, *, interpret=None):
  lab = jnp.arange(rp.shape[0] - 1, dtype=I32)
  while True:
    lab, ch = label_prop_min(rp, cols, lab, interpret=interpret)
    if int(ch) == 0:
      return lab


label_propagation.steps = lambda rp, cols: [(label_prop_min, (rp, cols, np.arange(len(rp) - 1, dtype=np.int32)), {})]


def _lp_ref(rp, cols):
  n = len(rp) - 1
  src = np.repeat(np.arange(n), np.diff(rp))
  return _cc_ref(src.astype(np.int32), cols, n=n, rounds=0)


case("label_propagation_min_until_no_change", label_propagation, lambda s: (sym_graph(s, n=50, m=40), {}), _lp_ref, 0)


# ---------------------------------------------------------------- Bellman-Ford relaxation by float atomic_min
@mg.mgpu_kernel(out_shape=lambda src, dst, w, d, d0: d, grid=lambda src, dst, w, d, d0: (ml.cdiv(src.shape[0], 128),),
                input_output_aliases={4: 0})
def sssp_relax(src, dst, w, dist_in, dist_start, dist):
  """dist_in is the distances before the launch, passed twice: once read (MG951's hint: an aliased output that
  atomics update is no input to read), once aliased to the output the relaxations lower."""
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < src.shape[0]
  du = ml.load(dist_in.at[ml.load(src.at[e], mask=m, other=0)], mask=m, other=float("inf"))
  cand = du + ml.load(w.at[e], mask=m, other=0.0)
  ml.atomic_min(dist.at[ml.load(dst.at[e], mask=m, other=0)], cand, mask=m & (cand < float("inf")))


def bellman_ford(src, dst, w, *, n, s, interpret=None):
  dist = jnp.full((n,), jnp.inf, F32).at[s].set(0.0)
  for _ in range(n - 1):
    new = sssp_relax(src, dst, w, dist, dist, interpret=interpret)
    if bool(jnp.all(new == dist)):
      break
    dist = new
  return dist


bellman_ford.steps = lambda src, dst, w, *, n, s: [(sssp_relax, (src, dst, w, np.zeros(n, np.float32),
                                                                  np.zeros(n, np.float32)), {})]


def _bf_make(seed):
  r = rng_of(seed)
  n, m = 40, 160
  return (r.integers(0, n, m).astype(np.int32), r.integers(0, n, m).astype(np.int32),
          r.integers(1, 20, m).astype(np.float32)), dict(n=n, s=0)


def _bf_ref(src, dst, w, *, n, s):
  d = np.full(n, np.inf)
  d[s] = 0
  for _ in range(n):
    for a, b, c in zip(src, dst, w):
      d[b] = min(d[b], d[a] + c)
  return d


case("bellman_ford_float_atomic_min", bellman_ford, _bf_make, _bf_ref, 0)


# ---------------------------------------------------------------- k-core peeling step
@mg.mgpu_kernel(out_shape=lambda rp, c, deg, alive, d0, **k: (deg, alive), grid=lambda rp, c, deg, alive, d0, **k: (alive.shape[0],),
                input_output_aliases={4: 0})
def kcore_peel(rowptr, cols, deg_in, alive_in, deg_start, deg, alive, *, k: ml.constexpr):
  """A vertex still alive with degree below k is removed and takes one from each live neighbour's degree (the
  degrees passed twice, as MG951's hint says: read before the launch, updated in the aliased copy)."""
  v = ml.program_id(0)
  peel = alive_in[v] & (deg_in[v] < k)
  alive[v] = alive_in[v] & ~peel
  if peel:
    for s in range(rowptr[v], rowptr[v + 1], 32):
      e = s + ml.arange(0, 32)
      m = e < rowptr[v + 1]
      u = ml.load(cols.at[e], mask=m, other=0)
      ml.atomic_add(deg.at[u], -1, mask=m & ml.load(alive_in.at[u], mask=m, other=False))


def kcore(rp, cols, *, k, interpret=None):
  deg = jnp.diff(rp).astype(I32)
  alive = jnp.ones((rp.shape[0] - 1,), bool)
  for _ in range(rp.shape[0]):
    d2, a2 = kcore_peel(rp, cols, deg, alive, deg, k=k, interpret=interpret)
    if bool(jnp.all(a2 == alive)):
      break
    deg, alive = d2, a2
  return alive


kcore.steps = lambda rp, cols, *, k: [(kcore_peel, (rp, cols, np.diff(rp).astype(np.int32), np.ones(len(rp) - 1, bool),
                                                np.diff(rp).astype(np.int32)), dict(k=k))]


def _kcore_ref(rp, cols, *, k):
  n = len(rp) - 1
  alive = np.ones(n, bool)
  while True:
    deg = np.array([sum(alive[u] for u in cols[rp[v]:rp[v + 1]]) for v in range(n)])
    rm = alive & (deg < k)
    if not rm.any():
      return alive
    alive &= ~rm


case("kcore_peeling_rounds", kcore, lambda s: (sym_graph(s, n=60, m=160), dict(k=3)), _kcore_ref, 0)


# ---------------------------------------------------------------- Jones-Plassmann colouring rounds
@mg.mgpu_kernel(out_shape=lambda rp, c, w, col: col, grid=lambda rp, c, w, col: (col.shape[0],))
def jp_color_round(rowptr, cols, weight, colors, out):
  """An uncoloured vertex whose weight beats every uncoloured neighbour's takes the smallest colour no neighbour has
  (neighbours' colours OR-ed into a 32-bit mask; the first clear bit by popcount of the trailing ones)."""
  v = ml.program_id(0)
  c = colors[v]
  if c < 0:
    wins = True
    used = 0
    for e in range(rowptr[v], rowptr[v + 1]):
      u = cols[e]
      cu = colors[u]
      if cu < 0:
        if (weight[u] > weight[v]) | ((weight[u] == weight[v]) & (u > v)):
          wins = False
      else:
        used = used | (1 << cu)
    if wins:
      c = ml.libdevice.popc((~used & (used + 1)) - 1)
  out[v] = c


def jp_coloring(rp, cols, w, *, interpret=None):
  colors = jnp.full((rp.shape[0] - 1,), -1, I32)
  while bool(jnp.any(colors < 0)):
    colors = jp_color_round(rp, cols, w, colors, interpret=interpret)
  return colors


jp_coloring.steps = lambda rp, cols, w: [(jp_color_round, (rp, cols, w, np.full(len(rp) - 1, -1, np.int32)), {})]


def _jp_make(seed):
  rp, c = sym_graph(seed, n=60, m=150)
  return (rp, c, rng_of(seed).integers(0, 1000, 60).astype(np.int32)), {}


def _jp_ref(rp, cols, w):
  n = len(rp) - 1
  colors = np.full(n, -1)
  while (colors < 0).any():
    new = colors.copy()
    for v in range(n):
      if colors[v] >= 0:
        continue
      nb = cols[rp[v]:rp[v + 1]]
      if all(colors[u] >= 0 or (w[u], u) < (w[v], v) for u in nb):
        used = {colors[u] for u in nb if colors[u] >= 0}
        new[v] = min(set(range(33)) - used)
    colors = new
  return colors


case("jones_plassmann_colouring_rounds", jp_coloring, _jp_make, _jp_ref, 0)
