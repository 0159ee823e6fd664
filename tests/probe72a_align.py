"""Probe 72a's corpus, its second part: sequence alignment and distance DPs as parasail, cuDTW, pytorch-softdtw-cuda
and GPU edit-distance authors write them: Levenshtein row by row (a row's left dependency as a prefix min), along
anti-diagonal wavefronts (two diagonals carried in registers, shifted by one lane; and the whole table in SMEM with
gathers and scatters per diagonal), Needleman-Wunsch with a substitution table, Smith-Waterman (linear gaps and
Gotoh's affine gaps), LCS, DTW and soft-DTW, each pair of sequences a program."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72a_common import F32, I32, S, normal, registry, rng_of

CASES, case = registry()


def _strings(seed, B=4, n=32, m=32, alpha=4):
  r = rng_of(seed)
  a = r.integers(0, alpha, (B, n)).astype(np.int32)
  b = a[:, :m].copy() if m <= n else r.integers(0, alpha, (B, m)).astype(np.int32)
  flip = r.random((B, m)) < 0.3
  b[flip] = r.integers(0, alpha, flip.sum())
  return a, b


def lev_np(a, b, sub=None, gap=1):
  B, n = a.shape
  m = b.shape[1]
  out = np.zeros(B, np.int32)
  for p in range(B):
    D = np.zeros((n + 1, m + 1), np.int64)
    D[:, 0] = np.arange(n + 1) * gap
    D[0, :] = np.arange(m + 1) * gap
    for i in range(1, n + 1):
      for j in range(1, m + 1):
        c = (a[p, i - 1] != b[p, j - 1]) if sub is None else sub[a[p, i - 1], b[p, j - 1]]
        D[i, j] = min(D[i - 1, j] + gap, D[i, j - 1] + gap, D[i - 1, j - 1] + c)
    out[p] = D[n, m]
  return out


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0],), I32), grid=lambda a, b: (a.shape[0],))
def levenshtein_rows_cummin(a, b, out):
  """Row by row with the row's left-to-right dependency as a prefix minimum (the GPU edit-distance trick): t[j] =
  min(D[i-1][j] + 1, D[i-1][j-1] + cost), then D[i][j] = min_k (t[k] + j - k) = cummin(t - j) + j; the previous
  row's D[i-1][j-1] by a shift of one lane (jnp.roll, the first lane the boundary i - 1)."""
  p = ml.program_id(0)
  n, m = a.shape[1], b.shape[1]
  j = ml.arange(m) + 1                      # columns 1..m; column 0 is the boundary D[i][0] = i
  bj = b[p, :]
  row = j                                   # D[0][j] = j
  for i in range(1, n + 1):
    ai = a[p, i - 1]
    diag = jnp.where(j == 1, i - 1, jnp.roll(row, 1))
    t = jnp.minimum(row + 1, diag + (ai != bj).astype(jnp.int32))
    t = jnp.minimum(t, i + j)               # the boundary D[i][0] = i reaches column j at cost j
    row = ml.cummin(t - j) + j
  out[p] = row[m - 1]


case("levenshtein_rows_prefix_min", levenshtein_rows_cummin, lambda sd: (_strings(sd), {}), lev_np, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0],), I32), grid=lambda a, b: (a.shape[0],))
def levenshtein_wavefront_registers(a, b, out):
  """Anti-diagonal wavefront (cuDTW's and GPU Levenshtein's schedule): lane k holds row i = k + 1, the diagonals
  d - 1 and d - 2 carried in registers, D[i-1][.] the previous diagonal shifted one lane by concatenate, the
  character b[j - 1] at j = d - i gathered from GMEM under a mask."""
  p = ml.program_id(0)
  n, m = a.shape[1], b.shape[1]
  k = ml.arange(n)
  i = k + 1
  ai = a[p, :]
  prev2 = ml.zeros((n,), jnp.int32)
  prev1 = ml.zeros((n,), jnp.int32)
  for d in range(2, n + m + 1):
    j = d - i
    ok = (j >= 1) & (j <= m)
    bj = ml.load(b.at[p, j - 1], mask=ok, other=-1)
    up = jnp.where(k == 0, j, ml.concatenate([ml.zeros((1,), jnp.int32), prev1[:-1]]))
    left = jnp.where(j == 1, i, prev1)
    dg = jnp.where(k == 0, j - 1, jnp.where(j == 1, i - 1, ml.concatenate([ml.zeros((1,), jnp.int32), prev2[:-1]])))
    cur = jnp.minimum(jnp.minimum(up, left) + 1, dg + (ai != bj).astype(jnp.int32))
    prev2, prev1 = prev1, jnp.where(ok, cur, 0)
  out[p] = prev1[n - 1]


case("levenshtein_wavefront_registers", levenshtein_wavefront_registers, lambda sd: (_strings(sd), {}), lev_np, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0],), I32), grid=lambda a, b: (a.shape[0],))
def levenshtein_wavefront_smem_table(a, b, out):
  """The whole (n + 1, m + 1) table in SMEM (as a CUDA kernel keeps it for a traceback), flat as CUDA indexes it,
  D[i * (m + 1) + j]: boundaries stored first, then per anti-diagonal three masked gathers at (i-1, j), (i, j-1),
  (i-1, j-1) and a masked scatter of the new cells. (A 2-D (n + 1, m + 1) buffer is MG601 at the gathers: the
  compiler reads the whole buffer for a 2-D gather, and the diagonals not yet computed are garbage; note 236.)"""
  p = ml.program_id(0)
  n, m = a.shape[1], b.shape[1]
  w = m + 1
  D = ml.smem(((n + 1) * w,), jnp.int32)
  r = ml.arange(n + 1)
  ml.store(D.at[r * w], r)
  ml.store(D.at[ml.arange(m + 1)], ml.arange(m + 1))
  i = ml.arange(n) + 1
  ai = a[p, :]
  for d in range(2, n + m + 1):
    j = d - i
    ok = (j >= 1) & (j <= m)
    bj = ml.load(b.at[p, j - 1], mask=ok, other=-1)
    up = ml.load(D.at[(i - 1) * w + j], mask=ok, other=0)
    left = ml.load(D.at[i * w + j - 1], mask=ok, other=0)
    dg = ml.load(D.at[(i - 1) * w + j - 1], mask=ok, other=0)
    cur = jnp.minimum(jnp.minimum(up, left) + 1, dg + (ai != bj).astype(jnp.int32))
    ml.store(D.at[i * w + j], cur, mask=ok)
  out[p] = D[n * w + m]


case("levenshtein_wavefront_smem_table", levenshtein_wavefront_smem_table, lambda sd: (_strings(sd), {}), lev_np, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0],), I32), grid=lambda a, b: (a.shape[0],))
def levenshtein_scalar_smem_row(a, b, out):
  """The textbook single-row CUDA loop one thread runs (a small pair): scalar reads and writes of an SMEM row,
  `prev` the diagonal kept in a scalar, nested run-time loops."""
  p = ml.program_id(0)
  n, m = a.shape[1], b.shape[1]
  row = ml.smem((m + 1,), jnp.int32)
  row[...] = ml.arange(m + 1)
  for i in range(1, n + 1):
    prev = row[0]
    row[0] = i
    ai = a[p, i - 1]
    for j in range(1, m + 1):
      old = row[j]
      cost = ml.where(ai == b[p, j - 1], 0, 1)
      row[j] = ml.minimum(ml.minimum(old + 1, row[j - 1] + 1), prev + cost)
      prev = old
  out[p] = row[m]


case("levenshtein_scalar_smem_row", levenshtein_scalar_smem_row, lambda sd: (_strings(sd, n=12, m=9), {}), lev_np, 0)


def nw_np(a, b, sub, gap):
  B, n = a.shape
  m = b.shape[1]
  out = np.zeros(B, np.float32)
  for p in range(B):
    H = np.zeros((n + 1, m + 1), np.float64)
    H[:, 0] = -gap * np.arange(n + 1)
    H[0, :] = -gap * np.arange(m + 1)
    for i in range(1, n + 1):
      for j in range(1, m + 1):
        H[i, j] = max(H[i - 1, j - 1] + sub[a[p, i - 1], b[p, j - 1]], H[i - 1, j] - gap, H[i, j - 1] - gap)
    out[p] = H[n, m]
  return out


def _protein(sd, B=4, n=48, m=40):
  r = rng_of(sd)
  sub = np.round(normal(sd, (20, 20)) * 2).astype(np.float32)
  sub = (sub + sub.T) / 2 + 4 * np.eye(20, dtype=np.float32)
  return (r.integers(0, 20, (B, n)).astype(np.int32), r.integers(0, 20, (B, m)).astype(np.int32), sub), {}


@mg.mgpu_kernel(out_shape=lambda a, b, sub: S((a.shape[0],), F32), grid=lambda a, b, sub: (a.shape[0],))
def needleman_wunsch_cummax(a, b, sub, out, *, gap: ml.constexpr = 2.0):
  """Global alignment with a BLOSUM-like table (parasail's row-parallel scan): each row's substitution scores a
  gather sub[a_i, b_j] of the (20, 20) table, the left dependency a prefix max of t[j] + gap * j."""
  p = ml.program_id(0)
  n, m = a.shape[1], b.shape[1]
  j = ml.arange(m) + 1
  jf = j.astype(jnp.float32)
  bj = b[p, :]
  row = -gap * jf
  for i in range(1, n + 1):
    s = ml.load(sub.at[a[p, i - 1], bj])
    diag = jnp.where(j == 1, -gap * (i - 1), jnp.roll(row, 1))
    t = jnp.maximum(diag + s, row - gap)
    t = jnp.maximum(t, -gap * (i + jf))            # from the boundary column H[i][0] = -gap * i
    row = ml.cummax(t + gap * jf) - gap * jf
  out[p] = row[m - 1]


case("needleman_wunsch_substitution_gather", needleman_wunsch_cummax, _protein,
     lambda a, b, sub, gap=2.0: nw_np(a, b, sub, gap), 1e-5)


def sw_np(a, b, sub, go, ge=None):
  """Smith-Waterman's best local score; linear gaps (ge None) or Gotoh's affine gaps (open go, extend ge)."""
  B, n = a.shape
  m = b.shape[1]
  out = np.zeros(B, np.float32)
  for p in range(B):
    H = np.zeros((n + 1, m + 1))
    E = np.full((n + 1, m + 1), -1e9)
    F = np.full((n + 1, m + 1), -1e9)
    for i in range(1, n + 1):
      for j in range(1, m + 1):
        s = sub[a[p, i - 1], b[p, j - 1]]
        if ge is None:
          H[i, j] = max(0, H[i - 1, j - 1] + s, H[i - 1, j] - go, H[i, j - 1] - go)
        else:
          E[i, j] = max(E[i, j - 1] - ge, H[i, j - 1] - go)
          F[i, j] = max(F[i - 1, j] - ge, H[i - 1, j] - go)
          H[i, j] = max(0, H[i - 1, j - 1] + s, E[i, j], F[i, j])
    out[p] = H.max()
  return out


@mg.mgpu_kernel(out_shape=lambda a, b, sub: S((a.shape[0],), F32), grid=lambda a, b, sub: (a.shape[0],))
def smith_waterman_linear(a, b, sub, out, *, gap: ml.constexpr = 3.0):
  """Local alignment, linear gaps: the row's max with 0, its left gaps a prefix max, the best score a running
  max over rows (ml.max of each row into a carried scalar)."""
  p = ml.program_id(0)
  n, m = a.shape[1], b.shape[1]
  jf = (ml.arange(m) + 1).astype(jnp.float32)
  bj = b[p, :]
  row = ml.zeros((m,), jnp.float32)
  best = 0.0
  for i in range(n):
    s = ml.load(sub.at[a[p, i], bj])
    diag = ml.concatenate([ml.zeros((1,), jnp.float32), row[:-1]])
    t = jnp.maximum(jnp.maximum(diag + s, row - gap), 0.0)
    row = ml.cummax(t + gap * jf) - gap * jf
    best = jnp.maximum(best, ml.max(row))
  out[p] = best


case("smith_waterman_linear_gaps", smith_waterman_linear, _protein,
     lambda a, b, sub, gap=3.0: sw_np(a, b, sub, gap), 1e-5)


@mg.mgpu_kernel(out_shape=lambda a, b, sub: S((a.shape[0],), F32), grid=lambda a, b, sub: (a.shape[0],))
def smith_waterman_affine_wavefront(a, b, sub, out, *, go: ml.constexpr = 5.0, ge: ml.constexpr = 1.0):
  """Gotoh's affine gaps along anti-diagonals (parasail's striped wavefront reduced to lanes): H, E, F of the last
  two diagonals carried, each shifted one lane for the row above, the substitution gathered at (a_i, b_{d-i})."""
  p = ml.program_id(0)
  n, m = a.shape[1], b.shape[1]
  k = ml.arange(n)
  i = k + 1
  ai = a[p, :]
  NEG = -1e9
  zero = ml.zeros((n,), jnp.float32)
  H1, H2, E1, F1 = zero, zero, zero + NEG, zero + NEG
  best = ml.zeros((n,), jnp.float32)
  for d in range(2, n + m + 1):
    j = d - i
    ok = (j >= 1) & (j <= m)
    bj = ml.load(b.at[p, j - 1], mask=ok, other=0)
    s = ml.load(sub.at[ai, bj])
    up_h = jnp.where(k == 0, 0.0, jnp.roll(H1, 1))
    up_f = jnp.where(k == 0, NEG, jnp.roll(F1, 1))
    dg = jnp.where(k == 0, 0.0, jnp.roll(H2, 1))
    left_h = jnp.where(j == 1, 0.0, H1)
    left_e = jnp.where(j == 1, NEG, E1)
    E = jnp.maximum(left_e - ge, left_h - go)
    F = jnp.maximum(up_f - ge, up_h - go)
    H = jnp.maximum(jnp.maximum(0.0, dg + s), jnp.maximum(E, F))
    H = jnp.where(ok, H, 0.0)
    best = jnp.maximum(best, H)
    H2, H1, E1, F1 = H1, H, jnp.where(ok, E, NEG), jnp.where(ok, F, NEG)
  out[p] = jnp.max(best)


case("smith_waterman_affine_wavefront", smith_waterman_affine_wavefront,
     lambda sd: _protein(sd, n=32, m=24),
     lambda a, b, sub, go=5.0, ge=1.0: sw_np(a, b, sub, go, ge), 1e-5)


def lcs_np(a, b):
  B, n = a.shape
  m = b.shape[1]
  out = np.zeros(B, np.int32)
  for p in range(B):
    L = np.zeros((n + 1, m + 1), np.int32)
    for i in range(1, n + 1):
      for j in range(1, m + 1):
        L[i, j] = L[i - 1, j - 1] + 1 if a[p, i - 1] == b[p, j - 1] else max(L[i - 1, j], L[i, j - 1])
    out[p] = L[n, m]
  return out


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0],), I32), grid=lambda a, b: (a.shape[0],))
def lcs_rows_cummax(a, b, out):
  """Longest common subsequence row by row: a match takes the diagonal plus one, the rest the prefix max along the
  row (rows are non-decreasing), the diagonal a shift by a concatenate of a zero."""
  p = ml.program_id(0)
  bj = b[p, :]
  row = ml.zeros(bj.shape, jnp.int32)
  for i in range(a.shape[1]):
    diag = ml.concatenate([ml.zeros((1,), jnp.int32), row[:-1]])
    t = jnp.where(bj == a[p, i], diag + 1, row)
    row = ml.cummax(t)
  out[p] = row[-1]


case("lcs_rows_prefix_max", lcs_rows_cummax, lambda sd: (_strings(sd, n=40, m=64), {}), lcs_np, 0)


def dtw_np(x, y, gamma=None):
  B, n, _ = x.shape
  m = y.shape[1]
  out = np.zeros(B, np.float32)
  for p in range(B):
    C = ((x[p][:, None, :] - y[p][None, :, :]) ** 2).sum(-1).astype(np.float64)
    R = np.full((n + 1, m + 1), np.inf)
    R[0, 0] = 0
    for i in range(1, n + 1):
      for j in range(1, m + 1):
        t = np.array([R[i - 1, j - 1], R[i - 1, j], R[i, j - 1]])
        if gamma is None:
          R[i, j] = C[i - 1, j - 1] + t.min()
        else:
          z = -t / gamma
          mx = z.max()
          R[i, j] = C[i - 1, j - 1] - gamma * (mx + np.log(np.exp(z - mx).sum()))
    out[p] = R[n, m]
  return out


def _series(sd, B=4, n=32, m=32, f=4):
  return (normal(sd, (B, n, f)), normal(sd + 1, (B, m, f))), {}


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), F32), grid=lambda x, y: (x.shape[0],))
def dtw_wavefront(x, y, out):
  """cuDTW's anti-diagonal DTW: the squared distances of the (n, m) pair computed once as a tile (the x rows
  against y's, by ||x||^2 + ||y||^2 - 2 x.y), stored in SMEM, each diagonal's costs gathered from it; inf as the
  boundary."""
  p = ml.program_id(0)
  n, m = x.shape[1], y.shape[1]
  xs, ys = x[p], y[p]
  C = ml.smem((n, m), jnp.float32)
  C[...] = ml.sum(xs * xs, axis=1)[:, None] + ml.sum(ys * ys, axis=1)[None, :] \
      - 2.0 * jnp.dot(xs, ys.T)
  k = ml.arange(n)
  inf = jnp.inf
  R1 = ml.full((n,), inf, jnp.float32)
  R2 = ml.full((n,), inf, jnp.float32)
  for d in range(2, n + m + 1):
    j = d - (k + 1)
    ok = (j >= 1) & (j <= m)
    c = ml.load(C.at[k, j - 1], mask=ok, other=0.0)
    up = jnp.where(k == 0, inf, jnp.roll(R1, 1))
    dg = jnp.where(k == 0, jnp.where(j == 1, 0.0, inf), jnp.roll(R2, 1))
    left = jnp.where(j == 1, inf, R1)
    R = c + jnp.minimum(dg, jnp.minimum(up, left))
    R2, R1 = R1, jnp.where(ok, R, inf)
  out[p] = R1[n - 1]


case("dtw_wavefront_smem_costs", dtw_wavefront, _series, dtw_np, 1e-4)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), F32), grid=lambda x, y: (x.shape[0],))
def soft_dtw_wavefront(x, y, out, *, gamma: ml.constexpr = 0.5):
  """pytorch-softdtw-cuda's forward: the soft minimum -gamma * logsumexp(-r / gamma) of the three neighbours
  along anti-diagonals, the costs gathered from GMEM rows per cell (||x_i - y_j||^2 over 4 features, unrolled)."""
  p = ml.program_id(0)
  n, m = x.shape[1], y.shape[1]
  k = ml.arange(n)
  BIG = 1e10
  R1 = ml.full((n,), BIG, jnp.float32)
  R2 = ml.full((n,), BIG, jnp.float32)
  for d in range(2, n + m + 1):
    j = d - (k + 1)
    ok = (j >= 1) & (j <= m)
    jc = jnp.clip(j - 1, 0, m - 1)
    c = ml.zeros((n,), jnp.float32)
    for f in ml.static_range(x.shape[2]):
      diff = ml.load(x.at[p, k, f]) - ml.load(y.at[p, jc, f])
      c = c + diff * diff
    r0 = jnp.where(k == 0, jnp.where(j == 1, 0.0, BIG), jnp.roll(R2, 1))
    r1 = jnp.where(k == 0, BIG, jnp.roll(R1, 1))
    r2 = jnp.where(j == 1, BIG, R1)
    z = -jnp.stack([r0, r1, r2]) / gamma
    smin = -gamma * jax.nn.logsumexp(z, axis=0)
    R2, R1 = R1, jnp.where(ok, c + smin, BIG)
  out[p] = R1[n - 1]


def _sdtw_ref(x, y, gamma=0.5):
  return dtw_np(x, y, gamma)


case("soft_dtw_wavefront_logsumexp", soft_dtw_wavefront, lambda sd: _series(sd, n=16, m=24), _sdtw_ref, 1e-4)
