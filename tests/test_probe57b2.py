"""Probe 57b's corpus of dynamic-programming and recurrent kernels, kept as a guard (all but two computed right before
the probe's fixes; `ctc_scan_tuple`, a lax.scan over jnp.arange(1, T), and `linrec_time_scan_rows`, one over reads of
ref windows, are its classes (1) and (2)): CTC's alpha recursion in log space (rolls for the blank/label interleave, per-row input and label lengths,
-inf or -1e30 masking, a batched (4, 128) tile, every step's alphas stored, the backward beta, a lax.scan with a tuple
carry, extended labels by stack/reshape and repeat), Viterbi with backpointers in an output, in SMEM (int32, int8)
and through fori_loop and scans, backtracked by loops and while loops, HMM forward in log space and scaled,
Levenshtein / Needleman-Wunsch (with a traceback) / Smith-Waterman / LCS / DTW by rows (the left dependency as a
cumulative min or max) and by anti-diagonal wavefronts, a banded edit distance with an early break, RNN-T's lattice
by anti-diagonals and by rows as a logcumsumexp, LSTM and GRU cells and sequences (gates from ml.dot / jnp.dot,
lengths as masks, a bidirectional step gathered per row), minGRU / minLSTM by associative scans and in log space,
linear recurrences in blocks with a carry, running argmax carries, reverse scans and NaN argmaxes. Each is run in
interpret mode against NumPy / jnp and built for CUDA. Found and not fixed: a one-column slice of a tile kept 2-D,
`hb[:, -1:]` (MG204, whose hint takes the column as a vector: `linrec_blocks_cumprod` writes `hb[:, BT - 1][:, None]`)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32
BF16 = jnp.bfloat16
NEG = -1e30


def sig(v):
  return 1 / (1 + np.exp(-v))


# ---------------------------------------------------------------- c1

# ------------------------------------------------------------------ CTC
def ctc_ref(lp, lab, il, ll, blank=0):
  out = []
  for b in range(lp.shape[0]):
    l = lab[b, :ll[b]]
    ext = [blank]
    for c in l: ext += [int(c), blank]
    L = len(ext)
    a = np.full(L, -np.inf)
    a[0] = lp[b, 0, ext[0]]
    if L > 1: a[1] = lp[b, 0, ext[1]]
    for t in range(1, il[b]):
      n = np.full(L, -np.inf)
      for s in range(L):
        v = [a[s]]
        if s >= 1: v.append(a[s-1])
        if s >= 2 and ext[s] != blank and ext[s] != ext[s-2]: v.append(a[s-2])
        n[s] = np.logaddexp.reduce(v) + lp[b, t, ext[s]]
      a = n
    out.append(-np.logaddexp(a[L-1], a[L-2] if L > 1 else -np.inf))
  return np.array(out, np.float32)

def ctc_inputs(B=4, T=50, C=20, Smax=12, seed=0):
  r = np.random.default_rng(seed)
  x = r.standard_normal((B, T, C)).astype(np.float32)
  lp = (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(np.float32)
  lab = r.integers(1, C, (B, Smax)).astype(np.int32)
  ll = r.integers(1, Smax + 1, (B,)).astype(np.int32)
  il = r.integers(T // 2, T + 1, (B,)).astype(np.int32)
  il = np.maximum(il, 2 * ll + 1).astype(np.int32)
  return lp, lab, il, ll

def lse3(a, b, c):
  m = ml.maximum(ml.maximum(a, b), c)
  return m + ml.log(ml.exp(a - m) + ml.exp(b - m) + ml.exp(c - m))

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0],), F32), grid=lambda lp, lab, il, ll: (lp.shape[0],))
def ctc_roll(lp, lab, il, ll, out):
  b = ml.program_id(0)
  s = ml.arange(128)
  SL = lab.shape[1]
  li = ml.clip((s - 1) // 2, 0, SL - 1)
  ext = ml.where(s % 2 == 1, lab[b, li], 0)
  ext2 = ml.roll(ext, 2, axis=0)
  skip = (s % 2 == 1) & (s >= 3) & (ext != ext2)
  L = 2 * ll[b] + 1
  valid = s < L
  alpha = ml.where(s < 2, lp[b, 0, ext], NEG)
  alpha = ml.where(valid, alpha, NEG)
  for t in range(1, il[b]):
    a1 = ml.where(s >= 1, ml.roll(alpha, 1, axis=0), NEG)
    a2 = ml.where(skip, ml.roll(alpha, 2, axis=0), NEG)
    alpha = lse3(alpha, a1, a2) + lp[b, t, ext]
    alpha = ml.where(valid, alpha, NEG)
  last = ml.max(ml.where(s == L - 1, alpha, NEG))
  prev = ml.max(ml.where(s == L - 2, alpha, NEG))
  out[b] = -jnp.logaddexp(last, prev)

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0],), F32), grid=lambda lp, lab, il, ll: (lp.shape[0],))
def ctc_jnp_inf(lp, lab, il, ll, out):
  b = ml.program_id(0)
  s = jnp.arange(128)
  SL = lab.shape[1]
  li = jnp.clip((s - 1) // 2, 0, SL - 1)
  ext = jnp.where(s % 2 == 1, lab[b, li], 0)
  skip = (s % 2 == 1) & (s >= 3) & (ext != jnp.roll(ext, 2))
  L = 2 * ll[b] + 1
  valid = s < L
  alpha = jnp.where((s < 2) & valid, lp[b, 0, ext], -jnp.inf)
  def body(t, alpha):
    a1 = jnp.where(s >= 1, jnp.roll(alpha, 1), -jnp.inf)
    a2 = jnp.where(skip, jnp.roll(alpha, 2), -jnp.inf)
    new = jnp.logaddexp(jnp.logaddexp(alpha, a1), a2) + lp[b, t, ext]
    return jnp.where(valid, new, -jnp.inf)
  alpha = lax.fori_loop(1, il[b], body, alpha)
  out[b] = -jnp.logaddexp(alpha[L - 1], alpha[L - 2])

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0],), F32), grid=lambda lp, lab, il, ll: (lp.shape[0] // 4,))
def ctc_batched(lp, lab, il, ll, out):
  """4 batch rows a program as a (4, 128) tile, each row its own input length (masks from lengths)."""
  b0 = ml.program_id(0) * 4
  rows = b0 + ml.arange(4)
  s = ml.arange(128)[None, :]
  SL = lab.shape[1]
  li = ml.clip((s - 1) // 2, 0, SL - 1)
  ext = ml.where(s % 2 == 1, lab[rows[:, None], li], 0)
  skip = (s % 2 == 1) & (s >= 3) & (ext != ml.roll(ext, 2, axis=1))
  L = 2 * ll[rows] + 1
  T = il[rows]
  valid = s < L[:, None]
  alpha = ml.where((s < 2) & valid, lp[rows[:, None], 0, ext], NEG)
  Tmax = ml.max(T)
  for t in range(1, Tmax):
    a1 = ml.where(s >= 1, ml.roll(alpha, 1, axis=1), NEG)
    a2 = ml.where(skip, ml.roll(alpha, 2, axis=1), NEG)
    new = lse3(alpha, a1, a2) + lp[rows[:, None], t, ext]
    alpha = ml.where(valid & (t < T)[:, None], new, alpha)
  last = ml.max(ml.where(s == (L - 1)[:, None], alpha, NEG), axis=1)
  prev = ml.max(ml.where(s == (L - 2)[:, None], alpha, NEG), axis=1)
  out[ml.ds(b0, 4)] = -jnp.logaddexp(last, prev)

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0], lp.shape[1], 128), F32), grid=lambda lp, lab, il, ll: (lp.shape[0],))
def ctc_alphas(lp, lab, il, ll, al):
  """stores every step's alpha (a (T, 128) lattice per row), as a loss's backward pass needs them."""
  b = ml.program_id(0)
  s = ml.arange(128)
  li = ml.clip((s - 1) // 2, 0, lab.shape[1] - 1)
  ext = ml.where(s % 2 == 1, lab[b, li], 0)
  skip = (s % 2 == 1) & (s >= 3) & (ext != ml.roll(ext, 2))
  valid = s < 2 * ll[b] + 1
  alpha = ml.where((s < 2) & valid, lp[b, 0, ext], NEG)
  al[b, 0, :] = alpha
  for t in range(1, lp.shape[1]):
    a1 = ml.where(s >= 1, ml.roll(alpha, 1), NEG)
    a2 = ml.where(skip, ml.roll(alpha, 2), NEG)
    alpha = ml.where(valid, lse3(alpha, a1, a2) + lp[b, t, ext], NEG)
    al[b, t, :] = alpha

def ctc_alphas_ref(lp, lab, il, ll):
  B, T, _ = lp.shape
  out = np.full((B, T, 128), NEG, np.float64)
  for b in range(B):
    l = lab[b, :ll[b]]
    ext = [0]
    for c in l: ext += [int(c), 0]
    L = len(ext)
    a = np.full(L, -np.inf); a[0] = lp[b, 0, 0]; a[1] = lp[b, 0, ext[1]]
    out[b, 0, :L] = a
    for t in range(1, T):
      n = np.full(L, -np.inf)
      for s in range(L):
        v = [a[s]]
        if s >= 1: v.append(a[s-1])
        if s >= 2 and ext[s] != 0 and ext[s] != ext[s-2]: v.append(a[s-2])
        n[s] = np.logaddexp.reduce(v) + lp[b, t, ext[s]]
      a = n
      out[b, t, :L] = a
  return np.maximum(out, NEG)

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0],), F32), grid=lambda lp, lab, il, ll: (lp.shape[0],))
def ctc_beta(lp, lab, il, ll, out):
  """the backward recursion: beta from the end of the row's input, shifts the other way."""
  b = ml.program_id(0)
  s = ml.arange(128)
  li = ml.clip((s - 1) // 2, 0, lab.shape[1] - 1)
  ext = ml.where(s % 2 == 1, lab[b, li], 0)
  L = 2 * ll[b] + 1
  skip = (s % 2 == 1) & (s + 2 < L) & (ext != ml.roll(ext, -2))
  valid = s < L
  T = il[b]
  beta = ml.where((s >= L - 2) & valid, lp[b, T - 1, ext], NEG)
  for t in range(T - 2, -1, -1):
    b1 = ml.where(s + 1 < L, ml.roll(beta, -1), NEG)
    b2 = ml.where(skip, ml.roll(beta, -2), NEG)
    beta = ml.where(valid, lse3(beta, b1, b2) + lp[b, t, ext], NEG)
  out[b] = -jnp.logaddexp(beta[0], beta[1])

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0],), F32), grid=lambda lp, lab, il, ll: (lp.shape[0],))
def ctc_scan_tuple(lp, lab, il, ll, out):
  """lax.scan with a tuple carry (alpha, step count, running max) over a fixed T, lengths as a mask."""
  b = ml.program_id(0)
  s = jnp.arange(128)
  li = jnp.clip((s - 1) // 2, 0, lab.shape[1] - 1)
  ext = jnp.where(s % 2 == 1, lab[b, li], 0)
  skip = (s % 2 == 1) & (s >= 3) & (ext != jnp.roll(ext, 2))
  L = 2 * ll[b] + 1
  valid = s < L
  Tb = il[b]
  a0 = jnp.where((s < 2) & valid, lp[b, 0, ext], NEG)
  def step(carry, t):
    alpha, n = carry
    a1 = jnp.where(s >= 1, jnp.roll(alpha, 1), NEG)
    a2 = jnp.where(skip, jnp.roll(alpha, 2), NEG)
    new = jnp.where(valid, lse3(alpha, a1, a2) + lp[b, t, ext], NEG)
    live = t < Tb
    return (jnp.where(live, new, alpha), n + live.astype(jnp.int32)), None
  (alpha, n), _ = lax.scan(step, (a0, 1), jnp.arange(1, lp.shape[1]))
  out[b] = -jnp.logaddexp(jnp.max(jnp.where(s == L - 1, alpha, NEG)), jnp.max(jnp.where(s == L - 2, alpha, NEG)))

# ------------------------------------------------------------------ Viterbi
def viterbi_ref(e, A):
  T, N = e.shape
  d = e[0].astype(np.float64); bps = np.zeros((T, N), np.int32)
  for t in range(1, T):
    sc = d[:, None] + A
    bps[t] = sc.argmax(0); d = sc.max(0) + e[t]
  path = np.zeros(T, np.int32); path[-1] = d.argmax()
  for t in range(T - 1, 0, -1): path[t - 1] = bps[t, path[t]]
  return path, bps

@mg.mgpu_kernel(out_shape=lambda e, A: (S((e.shape[0],), jnp.int32), S(e.shape, jnp.int32)))
def viterbi(e, A, path, bp):
  T, N = e.shape
  logA = A[...]
  delta = e[0, :]
  bp[0, :] = ml.zeros((N,), jnp.int32)
  for t in range(1, T):
    sc = delta[:, None] + logA
    bp[t, :] = ml.argmax(sc, axis=0)
    delta = ml.max(sc, axis=0) + e[t, :]
  st = ml.argmax(delta)
  path[T - 1] = st
  for t in range(T - 1, 0, -1):
    st = bp[t, st]
    path[t - 1] = st

@mg.mgpu_kernel(out_shape=lambda e, A: S((e.shape[0],), jnp.int32))
def viterbi_smem_bp(e, A, path):
  """backpointers kept in SMEM, backtracked from there."""
  T, N = e.shape
  bps = ml.smem((T, N), jnp.int32)
  logA = A[...]
  delta = e[0, :]
  bps[0, :] = ml.zeros((N,), jnp.int32)
  for t in range(1, T):
    sc = delta[:, None] + logA
    bps[t, :] = jnp.argmax(sc, axis=0).astype(jnp.int32)
    delta = jnp.max(sc, axis=0) + e[t, :]
  st = jnp.argmax(delta).astype(jnp.int32)
  path[T - 1] = st
  for t in range(T - 1, 0, -1):
    st = bps[t, st]
    path[t - 1] = st

@mg.mgpu_kernel(out_shape=lambda e, A, lens: S(e.shape[:2], jnp.int32), grid=lambda e, A, lens: (e.shape[0],))
def viterbi_batched_lengths(e, A, lens, path):
  b = ml.program_id(0)
  _, T, N = e.shape
  n = lens[b]
  bps = ml.smem((T, N), jnp.int32)
  logA = A[...]
  delta = e[b, 0, :]
  for t in range(1, n):
    sc = delta[:, None] + logA
    bps[t, :] = ml.argmax(sc, axis=0)
    delta = ml.max(sc, axis=0) + e[b, t, :]
  st = ml.argmax(delta)
  path[b, :] = ml.full((T,), -1, jnp.int32)
  path[b, n - 1] = st
  for t in range(n - 1, 0, -1):
    st = bps[t, st]
    path[b, t - 1] = st

def viterbi_batched_ref(e, A, lens):
  out = np.full(e.shape[:2], -1, np.int32)
  for b in range(e.shape[0]):
    out[b, :lens[b]] = viterbi_ref(e[b, :lens[b]], A)[0]
  return out

@mg.mgpu_kernel(out_shape=lambda e, A: S((e.shape[0],), jnp.int32))
def viterbi_fori(e, A, path):
  T, N = e.shape
  bps = ml.smem((T, N), jnp.int32)
  logA = A[...]
  def fwd(t, delta):
    sc = delta[:, None] + logA
    bps[t, :] = jnp.argmax(sc, axis=0)
    return jnp.max(sc, axis=0) + e[t, :]
  delta = lax.fori_loop(1, T, fwd, e[0, :])
  last = jnp.argmax(delta)
  path[T - 1] = last
  def back(k, st):
    t = T - 1 - k
    st = bps[t, st]
    path[t - 1] = st
    return st
  lax.fori_loop(0, T - 1, back, last)

@mg.mgpu_kernel(out_shape=lambda e, A: S((), F32))
def viterbi_score(e, A, best):
  """max-plus via a (N, N) tile of the transition per step, the best score only."""
  T, N = e.shape
  delta = e[0, :]
  for t in range(1, T):
    delta = jnp.max(delta[:, None] + A[...], axis=0) + e[t, :]
  best[...] = jnp.max(delta)

def vscore_ref(e, A):
  d = e[0].astype(np.float64)
  for t in range(1, e.shape[0]): d = (d[:, None] + A).max(0) + e[t]
  return np.float32(d.max())

# ------------------------------------------------------------------ HMM forward (log-sum-exp over states)
@mg.mgpu_kernel(out_shape=lambda e, A: S((1,), F32))
def hmm_forward(e, A, out):
  T, N = e.shape
  la = e[0, :]
  logA = A[...]
  for t in range(1, T):
    la = jax.nn.logsumexp(la[:, None] + logA, axis=0) + e[t, :]
  out[0] = jax.nn.logsumexp(la)

def hmm_ref(e, A):
  from scipy.special import logsumexp
  la = e[0].astype(np.float64)
  for t in range(1, e.shape[0]): la = logsumexp(la[:, None] + A, axis=0) + e[t]
  return np.array([logsumexp(la)], np.float32)

@mg.mgpu_kernel(out_shape=lambda e, A: S((1,), F32))
def hmm_scaled(e, A, out):
  """probability space with per-step scaling (the sum's log accumulated in a scalar carry)."""
  T, N = e.shape
  P = ml.exp(A[...])
  a = ml.exp(e[0, :])
  c = ml.sum(a)
  a = a / c
  ll = ml.log(c)
  for t in range(1, T):
    a = ml.sum(a[:, None] * P, axis=0) * ml.exp(e[t, :])
    c = ml.sum(a)
    a = a / c
    ll += ml.log(c)
  out[0] = ll

def vinputs(T=40, N=64, seed=1):
  r = np.random.default_rng(seed)
  e = r.standard_normal((T, N)).astype(np.float32)
  A = np.log(r.dirichlet(np.ones(N), N)).astype(np.float32)
  return e, A

CASES_c1 = [
  ("ctc_roll", ctc_roll, ctc_inputs, ctc_ref, 1e-3, {}),
  ("ctc_jnp_inf", ctc_jnp_inf, ctc_inputs, ctc_ref, 1e-3, {}),
  ("ctc_batched", ctc_batched, lambda: ctc_inputs(B=8, seed=2), ctc_ref, 1e-3, {}),
  ("ctc_alphas", ctc_alphas, lambda: ctc_inputs(T=24, seed=3), ctc_alphas_ref, 1e-3, {}),
  ("ctc_beta", ctc_beta, lambda: ctc_inputs(seed=4), ctc_ref, 1e-3, {}),
  ("ctc_scan_tuple", ctc_scan_tuple, lambda: ctc_inputs(T=30, seed=5), ctc_ref, 1e-3, {}),
  ("viterbi", viterbi, vinputs, viterbi_ref, 0, {}),
  ("viterbi_smem_bp", viterbi_smem_bp, vinputs, lambda e, A: viterbi_ref(e, A)[0], 0, {}),
  ("viterbi_batched_lengths", viterbi_batched_lengths,
   lambda: (np.random.default_rng(7).standard_normal((4, 32, 64)).astype(np.float32), vinputs()[1], np.array([32, 5, 17, 1], np.int32)),
   viterbi_batched_ref, 0, {}),
  ("viterbi_fori", viterbi_fori, vinputs, lambda e, A: viterbi_ref(e, A)[0], 0, {}),
  ("viterbi_score", viterbi_score, vinputs, vscore_ref, 1e-4, {}),
  ("hmm_forward", hmm_forward, vinputs, hmm_ref, 1e-3, {}),
  ("hmm_scaled", hmm_scaled, vinputs, hmm_ref, 1e-3, {}),
]

# ---------------------------------------------------------------- c2

def lev(a, b):
  d = np.arange(len(b) + 1)
  for i in range(1, len(a) + 1):
    n = np.zeros_like(d); n[0] = i
    for j in range(1, len(b) + 1):
      n[j] = min(d[j] + 1, n[j - 1] + 1, d[j - 1] + (a[i - 1] != b[j - 1]))
    d = n
  return d[len(b)]

def strings(B=4, n=100, seed=0, alpha=4):
  r = np.random.default_rng(seed)
  a = r.integers(0, alpha, (B, 128)).astype(np.int32)
  b = r.integers(0, alpha, (B, 128)).astype(np.int32)
  la = r.integers(1, n, (B,)).astype(np.int32)
  lb = r.integers(1, n, (B,)).astype(np.int32)
  return a, b, la, lb

def lev_ref(a, b, la, lb):
  return np.array([lev(a[k, :la[k]], b[k, :lb[k]]) for k in range(a.shape[0])], np.int32)

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), I32), grid=lambda a, b, la, lb: (a.shape[0],))
def lev_rows_cummin(a, b, la, lb, out):
  """row by row: the left dependency as a cumulative min of (tmp - j) plus j."""
  k = ml.program_id(0)
  j = ml.arange(128)
  bj = b[k, ml.maximum(j - 1, 0)]
  prev = j
  for i in range(1, la[k] + 1):
    ai = a[k, i - 1]
    cost = ml.where(bj == ai, 0, 1)
    diag = ml.roll(prev, 1)
    tmp = ml.minimum(prev + 1, diag + cost)
    tmp = ml.where(j == 0, i, tmp)
    prev = ml.cummin(tmp - j) + j
  out[k] = ml.sum(ml.where(j == lb[k], prev, 0))

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), I32), grid=lambda a, b, la, lb: (a.shape[0],))
def lev_antidiag(a, b, la, lb, out):
  """anti-diagonal wavefront: D[i][d - i] for i = 0..127, two diagonals carried."""
  k = ml.program_id(0)
  i = ml.arange(128)
  n, m = la[k], lb[k]
  ai = a[k, ml.maximum(i - 1, 0)]
  d2 = ml.where(i == 0, 0, 10**6)             # diagonal 0: D[0][0]
  d1 = ml.where(i == 0, 1, ml.where(i == 1, 1, 10**6))   # diagonal 1: D[0][1], D[1][0]
  for d in range(2, n + m + 1):
    jj = d - i
    bj = b[k, ml.clip(jj - 1, 0, 127)]
    cost = ml.where(ai == bj, 0, 1)
    up = ml.roll(d1, 1)                       # D[i-1][j]
    diag = ml.roll(d2, 1)                     # D[i-1][j-1]
    val = ml.minimum(ml.minimum(up + 1, d1 + 1), diag + cost)
    val = ml.where(i == 0, jj, ml.where(jj == 0, i, val))
    val = ml.where((jj >= 0) & (i <= n) & (jj <= m), val, 10**6)
    d2, d1 = d1, val
  out[k] = jnp.sum(jnp.where(i == n, d1, 0))

def nw(a, b, match=2, mis=-1, gap=-2):
  d = np.arange(len(b) + 1) * gap
  for i in range(1, len(a) + 1):
    n = np.zeros_like(d); n[0] = i * gap
    for j in range(1, len(b) + 1):
      n[j] = max(d[j] + gap, n[j - 1] + gap, d[j - 1] + (match if a[i - 1] == b[j - 1] else mis))
    d = n
  return d[len(b)]

def sw(a, b, match=2, mis=-1, gap=-2):
  d = np.zeros(len(b) + 1); best = 0
  for i in range(1, len(a) + 1):
    n = np.zeros_like(d)
    for j in range(1, len(b) + 1):
      n[j] = max(0, d[j] + gap, n[j - 1] + gap, d[j - 1] + (match if a[i - 1] == b[j - 1] else mis))
    d = n; best = max(best, d.max())
  return best

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), F32), grid=lambda a, b, la, lb: (a.shape[0],))
def needleman_wunsch(a, b, la, lb, out, gap: ml.constexpr = -2.0):
  k = ml.program_id(0)
  j = ml.arange(128)
  jf = j.astype(F32)
  bj = b[k, ml.maximum(j - 1, 0)]
  prev = jf * gap
  def row(i, prev):
    ai = a[k, i - 1]
    sc = jnp.where(bj == ai, 2.0, -1.0)
    tmp = jnp.maximum(prev + gap, jnp.roll(prev, 1) + sc)
    tmp = jnp.where(j == 0, i * gap, tmp)
    return lax.cummax(tmp - jf * gap, axis=0) + jf * gap
  prev = lax.fori_loop(1, la[k] + 1, row, prev)
  out[k] = jnp.max(jnp.where(j == lb[k], prev, -1e30))

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), F32), grid=lambda a, b, la, lb: (a.shape[0],))
def smith_waterman_antidiag(a, b, la, lb, out):
  k = ml.program_id(0)
  i = ml.arange(128)
  n, m = la[k], lb[k]
  ai = a[k, ml.maximum(i - 1, 0)]
  h2 = ml.zeros((128,), F32)
  h1 = ml.zeros((128,), F32)
  best = 0.0
  for d in range(2, n + m + 1):
    jj = d - i
    bj = b[k, ml.clip(jj - 1, 0, 127)]
    sc = ml.where(ai == bj, 2.0, -1.0)
    h = ml.maximum(ml.maximum(ml.roll(h2, 1) + sc, 0.0), ml.maximum(ml.roll(h1, 1) - 2.0, h1 - 2.0))
    inside = (i >= 1) & (i <= n) & (jj >= 1) & (jj <= m)
    h = ml.where(inside, h, 0.0)
    best = ml.maximum(best, ml.max(h))
    h2, h1 = h1, h
  out[k] = best

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), F32), grid=lambda a, b, la, lb: (a.shape[0],))
def smith_waterman_rows(a, b, la, lb, out):
  """row by row: the left gap chain as a cumulative max; an early exit once the row's scores are all 0 ... not
  really (kept simple): the best score tracked as a scalar carry beside the row."""
  k = ml.program_id(0)
  j = ml.arange(128)
  jf = j.astype(F32)
  bj = b[k, ml.maximum(j - 1, 0)]
  inb = (j >= 1) & (j <= lb[k])
  prev = ml.zeros((128,), F32)
  best = ml.zeros((), F32)
  for i in range(1, la[k] + 1):
    ai = a[k, i - 1]
    sc = ml.where(bj == ai, 2.0, -1.0)
    tmp = ml.maximum(ml.maximum(prev - 2.0, ml.roll(prev, 1) + sc), 0.0)
    tmp = ml.where(inb, tmp, 0.0)
    cur = ml.cummax(tmp + 2.0 * jf) - 2.0 * jf
    cur = ml.where(inb, ml.maximum(cur, tmp), 0.0)
    best = ml.maximum(best, ml.max(cur))
    prev = cur
  out[k] = best

def dtw_ref(x, y):
  n, m = len(x), len(y)
  D = np.full((n + 1, m + 1), np.inf); D[0, 0] = 0
  for i in range(1, n + 1):
    for j in range(1, m + 1):
      D[i, j] = abs(x[i - 1] - y[j - 1]) + min(D[i - 1, j], D[i, j - 1], D[i - 1, j - 1])
  return D[n, m]

@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), F32), grid=lambda x, y: (x.shape[0],))
def dtw_antidiag(x, y, out):
  """dynamic time warping of two series of 127 points: anti-diagonals of the cost lattice."""
  k = ml.program_id(0)
  n = x.shape[1]
  i = ml.arange(128)
  xi = x[k, ml.clip(i - 1, 0, n - 1)]
  INF = 1e30
  d2 = ml.where(i == 0, 0.0, INF)
  d1 = ml.full((128,), INF, F32)
  for d in range(2, 2 * n + 1):
    jj = d - i
    yj = y[k, ml.clip(jj - 1, 0, n - 1)]
    c = ml.abs(xi - yj)
    v = c + ml.minimum(ml.minimum(ml.roll(d1, 1), d1), ml.roll(d2, 1))
    v = ml.where((i >= 1) & (i <= n) & (jj >= 1) & (jj <= n), v, INF)
    d2, d1 = d1, v
  out[k] = ml.sum(ml.where(i == n, d1, 0.0))

def lcs_ref(a, b, la, lb):
  out = []
  for k in range(a.shape[0]):
    x, y = a[k, :la[k]], b[k, :lb[k]]
    d = np.zeros(len(y) + 1, int)
    for i in range(1, len(x) + 1):
      n = np.zeros_like(d)
      for j in range(1, len(y) + 1):
        n[j] = d[j - 1] + 1 if x[i - 1] == y[j - 1] else max(d[j], n[j - 1])
      d = n
    out.append(d[len(y)])
  return np.array(out, np.int32)

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), I32), grid=lambda a, b, la, lb: (a.shape[0],))
def lcs_rows(a, b, la, lb, out):
  k = ml.program_id(0)
  j = ml.arange(128)
  bj = b[k, ml.maximum(j - 1, 0)]
  prev = ml.zeros((128,), I32)
  i = 0
  while i < la[k]:
    ai = a[k, i]
    tmp = ml.where((bj == ai) & (j >= 1), ml.roll(prev, 1) + 1, prev)
    prev = ml.cummax(tmp)
    i += 1
  out[k] = jnp.take(prev, lb[k])

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), I32), grid=lambda a, b, la, lb: (a.shape[0],))
def lev_banded_early_exit(a, b, la, lb, out, K: ml.constexpr = 20):
  """edit distance capped at K: stops as soon as a whole row passes K (early exit by break)."""
  k = ml.program_id(0)
  j = ml.arange(128)
  m = lb[k]
  bj = b[k, ml.maximum(j - 1, 0)]
  prev = j
  res = K + 1
  done = False
  for i in range(1, la[k] + 1):
    ai = a[k, i - 1]
    tmp = ml.minimum(prev + 1, ml.roll(prev, 1) + ml.where(bj == ai, 0, 1))
    tmp = ml.where(j == 0, i, tmp)
    prev = ml.cummin(tmp - j) + j
    if ml.min(ml.where(j <= m, prev, 10**6)) > K:
      done = True
      break
  if not done:
    res = ml.minimum(ml.sum(ml.where(j == m, prev, 0)), K + 1)
  out[k] = res

def lev_capped(a, b, la, lb, K=20):
  return np.minimum(lev_ref(a, b, la, lb), K + 1)

# ------------------------------------------------------------------ RNN-T lattice
def rnnt_ref(blank, y, T, U):
  out = []
  for b in range(blank.shape[0]):
    t_, u_ = T[b], U[b]
    al = np.full((t_, u_ + 1), -np.inf)
    al[0, 0] = 0
    for t in range(t_):
      for u in range(u_ + 1):
        if t == 0 and u == 0: continue
        v = []
        if t > 0: v.append(al[t - 1, u] + blank[b, t - 1, u])
        if u > 0: v.append(al[t, u - 1] + y[b, t, u - 1])
        al[t, u] = np.logaddexp.reduce(v)
    out.append(-(al[t_ - 1, u_] + blank[b, t_ - 1, u_]))
  return np.array(out, np.float32)

def rnnt_inputs(B=4, T=40, U=20, seed=3):
  r = np.random.default_rng(seed)
  blank = np.log(r.uniform(0.05, 0.9, (B, T, 128))).astype(np.float32)
  y = np.log(r.uniform(0.05, 0.9, (B, T, 128))).astype(np.float32)
  Ts = r.integers(U, T + 1, (B,)).astype(np.int32); Us = r.integers(1, U + 1, (B,)).astype(np.int32)
  return blank, y, Ts, Us

@mg.mgpu_kernel(out_shape=lambda bl, y, T, U: S((bl.shape[0],), F32), grid=lambda bl, y, T, U: (bl.shape[0],))
def rnnt_antidiag(bl, y, T, U, out):
  """alpha over anti-diagonals d = t + u, a vector over u: alpha[t, u] from alpha[t-1, u] (same u, last diagonal) and
  alpha[t, u-1] (u - 1, last diagonal)."""
  b = ml.program_id(0)
  u = ml.arange(128)
  Tb, Ub = T[b], U[b]
  NEG = -1e30
  alpha = ml.where(u == 0, 0.0, NEG)
  for d in range(1, Tb + Ub):
    t = d - u
    tc = ml.clip(t, 0, bl.shape[1] - 1)
    from_t = alpha + bl[b, ml.clip(t - 1, 0, bl.shape[1] - 1), u]
    from_u = ml.roll(alpha, 1) + y[b, tc, ml.maximum(u - 1, 0)]
    from_t = ml.where(t >= 1, from_t, NEG)
    from_u = ml.where(u >= 1, from_u, NEG)
    m = ml.maximum(from_t, from_u)
    new = m + ml.log(ml.exp(from_t - m) + ml.exp(from_u - m))
    alpha = ml.where((t >= 0) & (t < Tb) & (u <= Ub), new, NEG)
  fin = ml.sum(ml.where(u == Ub, alpha + bl[b, Tb - 1, u], 0.0))
  out[b] = -fin

@mg.mgpu_kernel(out_shape=lambda bl, y, T, U: S((bl.shape[0],), F32), grid=lambda bl, y, T, U: (bl.shape[0],))
def rnnt_rows_logcumsumexp(bl, y, T, U, out):
  """alpha a row t at a time: the u recursion alpha[t,u] = logaddexp(p[u], alpha[t,u-1] + y[t,u-1]) solved as
  C[u] + logcumsumexp(p - C) with C the exclusive cumsum of y's row."""
  b = ml.program_id(0)
  u = ml.arange(128)
  Tb, Ub = T[b], U[b]
  live = u <= Ub
  yrow = ml.where(live & (u >= 1), ml.roll(y[b, 0, :], 1), 0.0)
  C = ml.cumsum(yrow)
  alpha = ml.where(live, C, -1e30)
  for t in range(1, Tb):
    p = alpha + bl[b, t - 1, :]
    yrow = ml.where(live & (u >= 1), ml.roll(y[b, t, :], 1), 0.0)
    C = jnp.cumsum(yrow)
    alpha = C + lax.cumlogsumexp(ml.where(live, p - C, -1e30))
    alpha = ml.where(live, alpha, -1e30)
  out[b] = -ml.max(ml.where(u == Ub, alpha + bl[b, Tb - 1, :], -1e30))

CASES_c2 = [
  ("lev_rows_cummin", lev_rows_cummin, strings, lev_ref, 0, {}),
  ("lev_antidiag", lev_antidiag, lambda: strings(seed=1), lev_ref, 0, {}),
  ("needleman_wunsch", needleman_wunsch, lambda: strings(seed=2),
   lambda a, b, la, lb: np.array([nw(a[k, :la[k]], b[k, :lb[k]]) for k in range(4)], np.float32), 1e-4, {}),
  ("smith_waterman_antidiag", smith_waterman_antidiag, lambda: strings(seed=3),
   lambda a, b, la, lb: np.array([sw(a[k, :la[k]], b[k, :lb[k]]) for k in range(4)], np.float32), 1e-4, {}),
  ("smith_waterman_rows", smith_waterman_rows, lambda: strings(seed=4),
   lambda a, b, la, lb: np.array([sw(a[k, :la[k]], b[k, :lb[k]]) for k in range(4)], np.float32), 1e-4, {}),
  ("dtw_antidiag", dtw_antidiag, lambda: (np.random.default_rng(5).standard_normal((4, 127)).astype(np.float32),
                                          np.random.default_rng(6).standard_normal((4, 127)).astype(np.float32)),
   lambda x, y: np.array([dtw_ref(x[k], y[k]) for k in range(4)], np.float32), 1e-3, {}),
  ("lcs_rows", lcs_rows, lambda: strings(seed=7), lcs_ref, 0, {}),
  ("lev_banded_early_exit", lev_banded_early_exit, lambda: strings(seed=8, alpha=3), lev_capped, 0, {}),
  ("rnnt_antidiag", rnnt_antidiag, rnnt_inputs, lambda bl, y, T, U: rnnt_ref(bl, y, T, U), 1e-3, {}),
  ("rnnt_rows_logcumsumexp", rnnt_rows_logcumsumexp, lambda: rnnt_inputs(seed=4), lambda bl, y, T, U: rnnt_ref(bl, y, T, U), 1e-3, {}),
]

# ---------------------------------------------------------------- c3

def rn(shape, seed, scale=1.0, dt=np.float32):
  return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dt)

# ----------------------------------------------------------- LSTM cell, one step, gates from two dots
@mg.mgpu_kernel(out_shape=lambda x, h, c, wx, wh, b: (h, c), grid=lambda x, h, c, wx, wh, b: (x.shape[0] // 64,))
def lstm_cell(x, h, c, wx, wh, b, h_out, c_out):
  r = ml.ds(ml.program_id(0) * 64, 64)
  H = h.shape[1]
  g = ml.dot(x[r, :], wx[...]) + ml.dot(h[r, :], wh[...]) + b[...][None, :]
  i, f, gg, o = g[:, 0:H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:4 * H]
  cn = ml.sigmoid(f) * c[r, :] + ml.sigmoid(i) * ml.tanh(gg)
  c_out[r, :] = cn
  h_out[r, :] = ml.sigmoid(o) * ml.tanh(cn)

def lstm_ref(x, h, c, wx, wh, b):
  g = x.astype(np.float32) @ wx.astype(np.float32) + h.astype(np.float32) @ wh.astype(np.float32) + b
  H = h.shape[1]
  i, f, gg, o = g[:, :H], g[:, H:2*H], g[:, 2*H:3*H], g[:, 3*H:]
  cn = sig(f) * c + sig(i) * np.tanh(gg)
  return sig(o) * np.tanh(cn), cn

def lstm_in(B=128, D=64, H=64, seed=0, dt=np.float32):
  return (rn((B, D), seed, dt=dt), rn((B, H), seed+1, dt=dt), rn((B, H), seed+2), rn((D, 4*H), seed+3, 0.1, dt),
          rn((H, 4*H), seed+4, 0.1, dt), rn((4*H,), seed+5, 0.1))

@mg.mgpu_kernel(out_shape=lambda x, h, c, wx, wh, b: (h, c), grid=lambda x, h, c, wx, wh, b: (x.shape[0] // 64,))
def lstm_cell_split(x, h, c, wx, wh, b, h_out, c_out):
  """jnp.split of the gates, jax.nn activations."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  g = jnp.dot(x[r, :], wx[...], preferred_element_type=jnp.float32) + jnp.dot(h[r, :], wh[...], preferred_element_type=jnp.float32) + b[...]
  i, f, gg, o = jnp.split(g, 4, axis=-1)
  cn = jax.nn.sigmoid(f) * c[r, :] + jax.nn.sigmoid(i) * jnp.tanh(gg)
  c_out[r, :] = cn
  h_out[r, :] = (jax.nn.sigmoid(o) * jnp.tanh(cn)).astype(h_out.dtype)

# ----------------------------------------------------------- LSTM over time: h, c carried, x_t @ Wx each step
@mg.mgpu_kernel(out_shape=lambda x, wx, wh, b: S((x.shape[0], x.shape[1], wh.shape[0]), F32))
def lstm_seq(x, wx, wh, b, hs):
  T, B, D = x.shape
  H = wh.shape[0]
  h = ml.zeros((B, H), F32)
  c = ml.zeros((B, H), F32)
  for t in range(T):
    g = ml.dot(x[t], wx[...]) + ml.dot(h.astype(BF16), wh[...]) + b[...][None, :]
    i, f, gg, o = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
    c = ml.sigmoid(f) * c + ml.sigmoid(i) * ml.tanh(gg)
    h = ml.sigmoid(o) * ml.tanh(c)
    hs[t] = h

def lstm_seq_ref(x, wx, wh, b):
  T, B, _ = x.shape; H = wh.shape[0]
  h = np.zeros((B, H), np.float32); c = np.zeros((B, H), np.float32); out = []
  for t in range(T):
    hb = np.asarray(jnp.asarray(h).astype(BF16).astype(F32))
    g = x[t].astype(np.float32) @ wx.astype(np.float32) + hb @ wh.astype(np.float32) + b
    i, f, gg, o = g[:, :H], g[:, H:2*H], g[:, 2*H:3*H], g[:, 3*H:]
    c = sig(f) * c + sig(i) * np.tanh(gg); h = sig(o) * np.tanh(c); out.append(h)
  return np.stack(out)

def lstm_seq_in(T=8, B=64, D=64, H=64):
  bf = lambda a: np.asarray(jnp.asarray(a).astype(BF16))
  return bf(rn((T, B, D), 10)), bf(rn((D, 4*H), 11, 0.1)), bf(rn((H, 4*H), 12, 0.1)), rn((4*H,), 13, 0.1)

@mg.mgpu_kernel(out_shape=lambda x, wx, wh, b, lens: S((x.shape[1], wh.shape[0]), F32))
def lstm_seq_lengths_fori(x, wx, wh, b, lens, h_last):
  """per-row lengths: rows past their length keep their state; tuple carry (h, c) through fori_loop."""
  T, B, D = x.shape
  H = wh.shape[0]
  L = lens[...]
  def step(t, hc):
    h, c = hc
    g = jnp.dot(x[t], wx[...], preferred_element_type=F32) + jnp.dot(h.astype(BF16), wh[...], preferred_element_type=F32) + b[...]
    i, f, gg, o = jnp.split(g, 4, axis=1)
    cn = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
    hn = jax.nn.sigmoid(o) * jnp.tanh(cn)
    live = (t < L)[:, None]
    return jnp.where(live, hn, h), jnp.where(live, cn, c)
  h, c = lax.fori_loop(0, T, step, (jnp.zeros((B, H), F32), jnp.zeros((B, H), F32)))
  h_last[...] = h

def lstm_len_ref(x, wx, wh, b, lens):
  T, B, _ = x.shape; H = wh.shape[0]
  h = np.zeros((B, H), np.float32); c = np.zeros((B, H), np.float32)
  for t in range(T):
    hb = np.asarray(jnp.asarray(h).astype(BF16).astype(F32))
    g = x[t].astype(np.float32) @ wx.astype(np.float32) + hb @ wh.astype(np.float32) + b
    i, f, gg, o = g[:, :H], g[:, H:2*H], g[:, 2*H:3*H], g[:, 3*H:]
    cn = sig(f) * c + sig(i) * np.tanh(gg); hn = sig(o) * np.tanh(cn)
    live = (t < lens)[:, None]
    h = np.where(live, hn, h); c = np.where(live, cn, c)
  return h

# ----------------------------------------------------------- GRU
@mg.mgpu_kernel(out_shape=lambda x, h, wx, wh, bx, bh: h, grid=lambda x, h, wx, wh, bx, bh: (x.shape[0] // 64,))
def gru_cell(x, h, wx, wh, bx, bh, h_out):
  r = ml.ds(ml.program_id(0) * 64, 64)
  H = h.shape[1]
  hv = h[r, :]
  gx = ml.dot(x[r, :], wx[...]) + bx[...][None, :]
  gh = ml.dot(hv, wh[...]) + bh[...][None, :]
  rg = ml.sigmoid(gx[:, :H] + gh[:, :H])
  z = ml.sigmoid(gx[:, H:2 * H] + gh[:, H:2 * H])
  n = ml.tanh(gx[:, 2 * H:] + rg * gh[:, 2 * H:])
  h_out[r, :] = (1 - z) * n + z * hv

def gru_ref(x, h, wx, wh, bx, bh):
  H = h.shape[1]
  gx = x @ wx + bx; gh = h @ wh + bh
  rg = sig(gx[:, :H] + gh[:, :H]); z = sig(gx[:, H:2*H] + gh[:, H:2*H]); n = np.tanh(gx[:, 2*H:] + rg * gh[:, 2*H:])
  return (1 - z) * n + z * h

def gru_in():
  return rn((128, 64), 20), rn((128, 64), 21), rn((64, 192), 22, 0.1), rn((64, 192), 23, 0.1), rn((192,), 24, 0.1), rn((192,), 25, 0.1)

@mg.mgpu_kernel(out_shape=lambda x, wx, wh: S((x.shape[0], x.shape[1], wh.shape[0]), F32))
def gru_seq_scan(x, wx, wh, hs):
  """lax.scan over the time axis of a whole read (T <= 64: unrolled), ys stacked."""
  T, B, D = x.shape
  H = wh.shape[0]
  def step(h, xt):
    gx = jnp.dot(xt, wx[...], preferred_element_type=F32)
    gh = jnp.dot(h.astype(BF16), wh[...], preferred_element_type=F32)
    r = jax.nn.sigmoid(gx[:, :H] + gh[:, :H])
    z = jax.nn.sigmoid(gx[:, H:2 * H] + gh[:, H:2 * H])
    n = jnp.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
    h = (1 - z) * n + z * h
    return h, h
  _, ys = lax.scan(step, jnp.zeros((B, H), F32), x[...])
  hs[...] = ys

def gru_seq_ref(x, wx, wh):
  T, B, _ = x.shape; H = wh.shape[0]
  h = np.zeros((B, H), np.float32); out = []
  for t in range(T):
    hb = np.asarray(jnp.asarray(h).astype(BF16).astype(F32))
    gx = x[t].astype(np.float32) @ wx.astype(np.float32); gh = hb @ wh.astype(np.float32)
    r = sig(gx[:, :H] + gh[:, :H]); z = sig(gx[:, H:2*H] + gh[:, H:2*H]); n = np.tanh(gx[:, 2*H:] + r * gh[:, 2*H:])
    h = (1 - z) * n + z * h; out.append(h)
  return np.stack(out)

def gru_seq_in(T=4, B=64, D=64, H=64):
  bf = lambda a: np.asarray(jnp.asarray(a).astype(BF16))
  return bf(rn((T, B, D), 30)), bf(rn((D, 3*H), 31, 0.1)), bf(rn((H, 3*H), 32, 0.1))

# ----------------------------------------------------------- minGRU / minLSTM parallel scans
def lin_scan_ref(a, b, axis=1, h0=None):
  a = np.moveaxis(a, axis, 0).astype(np.float64); b = np.moveaxis(b, axis, 0).astype(np.float64)
  h = np.zeros(a.shape[1:]) if h0 is None else h0.astype(np.float64)
  out = []
  for t in range(a.shape[0]):
    h = a[t] * h + b[t]; out.append(h)
  return np.moveaxis(np.stack(out), 0, axis)

@mg.mgpu_kernel(out_shape=lambda z, hh: z)
def mingru_assoc(z, hh, out):
  zt = jax.nn.sigmoid(z[...])
  a, b = 1 - zt, zt * hh[...]
  def comb(l, r):
    return l[0] * r[0], r[0] * l[1] + r[1]
  out[...] = lax.associative_scan(comb, (a, b), axis=1)[1]

@mg.mgpu_kernel(out_shape=lambda z, hh: z)
def mingru_time_axis0(z, hh, out):
  """time along axis 0 of a (T, D) tile."""
  zt = ml.sigmoid(z[...])
  a, b = 1 - zt, zt * hh[...]
  _, h = ml.associative_scan((a, b), 0, lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1]))
  out[...] = h

@mg.mgpu_kernel(out_shape=lambda f, i, hh: f)
def minlstm_assoc(f, i, hh, out):
  ft, it = jax.nn.sigmoid(f[...]), jax.nn.sigmoid(i[...])
  s = ft + it
  a, b = ft / s, it / s * hh[...]
  out[...] = lax.associative_scan(lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1]), (a, b), axis=-1)[1]

@mg.mgpu_kernel(out_shape=lambda z, hh: z)
def mingru_log_space(z, hh, out):
  """Heinsen's log-space scan: log h = a* + logcumsumexp(log b - a*), a* = cumsum(log a)."""
  log_z = -jax.nn.softplus(-z[...])
  log_a = -jax.nn.softplus(z[...])
  hv = hh[...]
  log_h_tilde = jnp.where(hv >= 0, jnp.log(jax.nn.relu(hv) + 0.5), -jax.nn.softplus(-hv))
  a_star = jnp.cumsum(log_a, axis=1)
  log_h = a_star + lax.cumlogsumexp(log_z + log_h_tilde - a_star, axis=1)
  out[...] = jnp.exp(log_h)

def g_np(x):
  return np.where(x >= 0, x + 0.5, sig(x))

def mingru_log_ref(z, hh):
  zt = sig(z.astype(np.float64))
  return lin_scan_ref(1 - zt, zt * g_np(hh.astype(np.float64)))

@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[0] // 8,))
def linrec_blocks(a, b, out, BT: ml.constexpr = 128):
  """h_t = a_t h_{t-1} + b_t over long rows, BT columns at a time, the carry passed between blocks."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  h = ml.zeros((8,), F32)
  for k in range(a.shape[1] // BT):
    c = ml.ds(k * BT, BT)
    A, Bv = ml.associative_scan((a[r, c], b[r, c]), 1, lambda l, q: (l[0] * q[0], q[0] * l[1] + q[1]))
    hb = A * h[:, None] + Bv
    out[r, c] = hb
    h = hb[:, BT - 1]

@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[0] // 8,))
def linrec_blocks_cumprod(a, b, out, BT: ml.constexpr = 128):
  """same, the block's scan as cumprod and a cumsum of b / cumprod (a in (0.9, 1))."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  h = jnp.zeros((8, 1), F32)
  for k in range(a.shape[1] // BT):
    c = ml.ds(k * BT, BT)
    P = jnp.cumprod(a[r, c], axis=1)
    hb = P * (h + jnp.cumsum(b[r, c] / P, axis=1))
    out[r, c] = hb
    h = hb[:, BT - 1][:, None]

@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def linrec_time_rows(a, b, out):
  """time along the rows of a (L, D) array: a plain loop over t, a (128,) slice of D per program."""
  c = ml.ds(ml.program_id(0) * 128, 128)
  h = ml.zeros((128,), F32)
  for t in range(a.shape[0]):
    h = a[t, c] * h + b[t, c]
    out[t, c] = h

@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def linrec_time_scan_rows(a, b, out):
  """lax.scan over whole reads (L > 64: the run-time loop form), storing each step itself."""
  c = ml.ds(ml.program_id(0) * 128, 128)
  def f(h, ab):
    at, bt, t = ab
    h = at * h + bt
    out[t, c] = h
    return h, None
  lax.scan(f, jnp.zeros((128,), F32), (a[:, c], b[:, c], jnp.arange(a.shape[0])))

@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def linrec_chunks_of_16(a, b, out):
  """chunks of 16 time rows: a (16, 128) tile scanned along axis 0, the carry a (128,) row."""
  c = ml.ds(ml.program_id(0) * 128, 128)
  h = ml.zeros((1, 128), F32)
  for k in range(a.shape[0] // 16):
    rows = ml.ds(k * 16, 16)
    A, Bv = ml.associative_scan((a[rows, c], b[rows, c]), 0, lambda l, q: (l[0] * q[0], q[0] * l[1] + q[1]))
    hb = A * h + Bv
    out[rows, c] = hb
    h = hb[15:16, :]

@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def linrec_reverse(a, b, out):
  """backward recurrence h_t = a_t h_{t+1} + b_t (a reverse scan, as a backward pass is)."""
  c = ml.ds(ml.program_id(0) * 128, 128)
  h = ml.zeros((128,), F32)
  for t in reversed(range(a.shape[0])):
    h = a[t, c] * h + b[t, c]
    out[t, c] = h

def ab_in(shape=(16, 512), seed=40):
  r = np.random.default_rng(seed)
  return r.uniform(0.9, 1.0, shape).astype(np.float32), r.standard_normal(shape).astype(np.float32)

CASES_c3 = [
  ("lstm_cell", lstm_cell, lstm_in, lstm_ref, 2e-2, {}),
  ("lstm_cell_bf16", lstm_cell, lambda: lstm_in(dt=np.float32), lstm_ref, 2e-2, {}),
  ("lstm_cell_split", lstm_cell_split, lstm_in, lstm_ref, 2e-2, {}),
  ("lstm_seq", lstm_seq, lstm_seq_in, lstm_seq_ref, 2e-2, {}),
  ("lstm_seq_lengths_fori", lstm_seq_lengths_fori, lambda: lstm_seq_in(T=6) + (np.array([6, 1, 3, 0] * 16, np.int32),), lstm_len_ref, 2e-2, {}),
  ("gru_cell", gru_cell, gru_in, gru_ref, 2e-2, {}),
  ("gru_seq_scan", gru_seq_scan, gru_seq_in, gru_seq_ref, 2e-2, {}),
  ("mingru_assoc", mingru_assoc, lambda: (rn((8, 256), 50), rn((8, 256), 51)),
   lambda z, hh: lin_scan_ref(1 - sig(z), sig(z) * hh), 1e-4, {}),
  ("mingru_time_axis0", mingru_time_axis0, lambda: (rn((64, 128), 52), rn((64, 128), 53)),
   lambda z, hh: lin_scan_ref(1 - sig(z), sig(z) * hh, axis=0), 1e-4, {}),
  ("minlstm_assoc", minlstm_assoc, lambda: (rn((8, 256), 54), rn((8, 256), 55), rn((8, 256), 56)),
   lambda f, i, hh: lin_scan_ref(sig(f) / (sig(f) + sig(i)), sig(i) / (sig(f) + sig(i)) * hh), 1e-4, {}),
  ("mingru_log_space", mingru_log_space, lambda: (rn((8, 256), 57), rn((8, 256), 58)), mingru_log_ref, 1e-3, {}),
  ("linrec_blocks", linrec_blocks, ab_in, lin_scan_ref, 1e-3, {}),
  ("linrec_blocks_cumprod", linrec_blocks_cumprod, ab_in, lin_scan_ref, 1e-3, {}),
  ("linrec_time_rows", linrec_time_rows, lambda: ab_in((300, 256), 41), lambda a, b: lin_scan_ref(a, b, 0), 1e-3, {}),
  ("linrec_time_scan_rows", linrec_time_scan_rows, lambda: ab_in((300, 256), 42), lambda a, b: lin_scan_ref(a, b, 0), 1e-3, {}),
  ("linrec_chunks_of_16", linrec_chunks_of_16, lambda: ab_in((128, 256), 43), lambda a, b: lin_scan_ref(a, b, 0), 1e-3, {}),
  ("linrec_reverse", linrec_reverse, lambda: ab_in((100, 128), 44),
   lambda a, b: lin_scan_ref(a[::-1], b[::-1], 0)[::-1], 1e-3, {}),
]

# ---------------------------------------------------------------- c6

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0],), F32), grid=lambda lp, lab, il, ll: (lp.shape[0],))
def ctc_stack_interleave(lp, lab, il, ll, out):
  """extended labels by stacking blanks with the labels and flattening, as jax/optax write them."""
  b = ml.program_id(0)
  l = lab[b, :]                                   # (64,)
  ext = jnp.stack([jnp.zeros_like(l), l], axis=1).reshape(-1)   # (128,): blank, l0, blank, l1, ...
  s = jnp.arange(128)
  skip = (s % 2 == 1) & (s >= 3) & (ext != jnp.roll(ext, 2))
  L = 2 * ll[b] + 1
  valid = s < L
  alpha = jnp.where((s < 2) & valid, lp[b, 0, ext], -jnp.inf)
  for t in range(1, il[b]):
    a1 = jnp.where(s >= 1, jnp.roll(alpha, 1), -jnp.inf)
    a2 = jnp.where(skip, jnp.roll(alpha, 2), -jnp.inf)
    alpha = jnp.where(valid, jnp.logaddexp(jnp.logaddexp(alpha, a1), a2) + lp[b, t, ext], -jnp.inf)
  out[b] = -jnp.logaddexp(jnp.max(jnp.where(s == L - 1, alpha, -jnp.inf)), jnp.max(jnp.where(s == L - 2, alpha, -jnp.inf)))

@mg.mgpu_kernel(out_shape=lambda lp, lab, il, ll: S((lp.shape[0],), F32), grid=lambda lp, lab, il, ll: (lp.shape[0],))
def ctc_repeat(lp, lab, il, ll, out):
  """ext = where(odd, repeat(labels, 2)...) ; logsumexp over a stacked (3, 128)."""
  b = ml.program_id(0)
  l = lab[b, :]
  s = jnp.arange(128)
  rep = jnp.repeat(l, 2)                          # (128,): l0, l0, l1, l1, ...
  ext = jnp.where(s % 2 == 1, jnp.roll(rep, 1), 0)
  skip = (s % 2 == 1) & (s >= 3) & (ext != jnp.roll(ext, 2))
  L = 2 * ll[b] + 1
  valid = s < L
  alpha = jnp.where((s < 2) & valid, lp[b, 0, ext], -1e30)
  for t in range(1, il[b]):
    a1 = jnp.where(s >= 1, jnp.roll(alpha, 1), -1e30)
    a2 = jnp.where(skip, jnp.roll(alpha, 2), -1e30)
    alpha = jnp.where(valid, jax.nn.logsumexp(jnp.stack([alpha, a1, a2]), axis=0) + lp[b, t, ext], -1e30)
  out[b] = -jnp.logaddexp(alpha[L - 1], alpha[L - 2])

def ctc_in64(seed=0):
  lp, lab, il, ll = ctc_inputs(B=4, T=50, C=20, Smax=12, seed=seed)
  lab = np.pad(lab, ((0, 0), (0, 52)), constant_values=1).astype(np.int32)
  return lp, lab, il, ll

@mg.mgpu_kernel(out_shape=lambda e, A: S((e.shape[1],), F32))
def lse_all_neginf_cols(e, A, out):
  """columns of -inf (forbidden transitions): jax.nn.logsumexp gives -inf there, not NaN."""
  la = jnp.where(jnp.arange(e.shape[1]) % 3 == 0, -jnp.inf, e[0, :])
  Am = jnp.where((jnp.arange(A.shape[1]) % 5 == 0)[None, :], -jnp.inf, A[...])
  out[...] = jax.nn.logsumexp(la[:, None] + Am, axis=0)

def lse_cols_ref(e, A):
  la = np.where(np.arange(e.shape[1]) % 3 == 0, -np.inf, e[0])
  Am = np.where((np.arange(A.shape[1]) % 5 == 0)[None, :], -np.inf, A)
  return np.asarray(jax.nn.logsumexp(jnp.asarray(la[:, None] + Am), axis=0))

@mg.mgpu_kernel(out_shape=lambda e, A: S((e.shape[0],), I32))
def viterbi_int8_bp(e, A, path):
  """backpointers kept as int8 in SMEM (N = 64 fits), backtracked by reading them back."""
  T, N = e.shape
  bps = ml.smem((T, N), jnp.int8)
  logA = A[...]
  delta = e[0, :]
  for t in range(1, T):
    sc = delta[:, None] + logA
    bps[t, :] = jnp.argmax(sc, axis=0).astype(jnp.int8)
    delta = jnp.max(sc, axis=0) + e[t, :]
  st = jnp.argmax(delta)
  path[T - 1] = st
  for t in range(T - 1, 0, -1):
    st = bps[t, st].astype(jnp.int32)
    path[t - 1] = st

@mg.mgpu_kernel(out_shape=lambda e, A: S((e.shape[0],), I32))
def viterbi_while_backtrack(e, A, path):
  T, N = e.shape
  bps = ml.smem((T, N), jnp.int32)
  delta = e[0, :]
  for t in range(1, T):
    sc = delta[:, None] + A[...]
    bps[t, :] = jnp.argmax(sc, axis=0)
    delta = jnp.max(sc, axis=0) + e[t, :]
  st = jnp.argmax(delta)
  t = T - 1
  while t > 0:
    path[t] = st
    st = bps[t, st]
    t -= 1
  path[0] = st

@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), I32)))
def running_argmax_carry(x, best, where_):
  """the best value over time and the step it came at, carried as scalars per row... per row vectors."""
  R, T = x.shape
  bv = jnp.full((R,), -jnp.inf, F32)
  bi = jnp.zeros((R,), I32)
  for t in range(T):
    v = x[:, t]
    better = v > bv
    bv = jnp.where(better, v, bv)
    bi = jnp.where(better, t, bi)
  best[...] = bv
  where_[...] = bi

@mg.mgpu_kernel(out_shape=lambda x: (S((1,), F32), S((1,), I32)))
def running_argmax_scalar(x, best, where_):
  bv = -jnp.inf
  bi = 0
  for t in range(x.shape[0]):
    v = x[t]
    if v > bv:
      bv = v
      bi = t
  best[0] = bv
  where_[0] = bi

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), jnp.int16), grid=lambda a, b, la, lb: (a.shape[0],))
def lev_int16(a, b, la, lb, out):
  k = ml.program_id(0)
  j = jnp.arange(128, dtype=jnp.int16)
  bj = b[k, ml.maximum(jnp.arange(128) - 1, 0)]
  prev = j
  for i in range(1, la[k] + 1):
    ai = a[k, i - 1]
    tmp = jnp.minimum(prev + 1, jnp.roll(prev, 1) + (bj != ai).astype(jnp.int16))
    tmp = jnp.where(j == 0, i.astype(jnp.int16), tmp)
    prev = lax.cummin(tmp - j, axis=0) + j
  out[k] = jnp.sum(jnp.where(j == lb[k], prev, 0)).astype(jnp.int16)

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0],), I32), grid=lambda a, b, la, lb: (a.shape[0],))
def lev_uint8_strings(a, b, la, lb, out):
  """strings as uint8 bytes; indices computed in uint32."""
  k = ml.program_id(0)
  j = jnp.arange(128)
  bj = b[k, jnp.maximum(j - 1, 0)]
  prev = j
  for i in range(1, la[k] + 1):
    ai = a[k, i - 1]
    tmp = jnp.minimum(prev + 1, jnp.roll(prev, 1) + jnp.where(bj == ai, 0, 1))
    tmp = jnp.where(j == 0, i, tmp)
    prev = lax.cummin(tmp - j) + j
  out[k] = prev[lb[k]]

def strings_u8(seed=0):
  a, b, la, lb = strings(seed=seed)
  return a.astype(np.uint8) + 200, b.astype(np.uint8) + 200, la, lb

@mg.mgpu_kernel(out_shape=lambda a, b, la, lb: S((a.shape[0], 2), I32), grid=lambda a, b, la, lb: (a.shape[0],))
def nw_traceback(a, b, la, lb, out):
  """global alignment with a traceback: the direction of each cell stored (as int8) in SMEM, then walked back
  from (n, m) with a while loop of two run-time conditions, counting matches and gaps."""
  k = ml.program_id(0)
  j = jnp.arange(128)
  bj = b[k, jnp.maximum(j - 1, 0)]
  n, m = la[k], lb[k]
  dirs = ml.smem((128, 128), jnp.int8)
  prev = j * -2
  dirs[0, :] = jnp.full((128,), 2, jnp.int8)
  for i in range(1, n + 1):
    ai = a[k, i - 1]
    diag = jnp.roll(prev, 1) + jnp.where(bj == ai, 2, -1)
    up = prev - 2
    tmp = jnp.maximum(up, diag)
    tmp = jnp.where(j == 0, -2 * i, tmp)
    cur = lax.cummax(tmp + 2 * j) - 2 * j       # left moves
    d = jnp.where(cur == diag, 0, jnp.where(cur == up, 1, 2))
    d = jnp.where(j == 0, 1, d)
    dirs[i, :] = d.astype(jnp.int8)
    prev = cur
  i, jj = n, m
  matches, gaps = 0, 0
  while i > 0 or jj > 0:
    dd = dirs[i, jj]
    if dd == 0:
      matches += (a[k, i - 1] == b[k, jj - 1]).astype(I32)
      i -= 1
      jj -= 1
    elif dd == 1:
      gaps += 1
      i -= 1
    else:
      gaps += 1
      jj -= 1
  out[k, 0] = matches
  out[k, 1] = gaps

def nw_tb_ref(a, b, la, lb):
  res = []
  for k in range(a.shape[0]):
    x, y = a[k, :la[k]], b[k, :lb[k]]
    n, m = len(x), len(y)
    D = np.zeros((n + 1, m + 1), int); Dr = np.zeros((n + 1, m + 1), int)
    D[0] = -2 * np.arange(m + 1); Dr[0] = 2
    for i in range(1, n + 1):
      D[i, 0] = -2 * i; Dr[i, 0] = 1
      for j in range(1, m + 1):
        diag = D[i-1, j-1] + (2 if x[i-1] == y[j-1] else -1); up = D[i-1, j] - 2; left = D[i, j-1] - 2
        v = max(diag, up, left); D[i, j] = v
        Dr[i, j] = 0 if v == diag else 1 if v == up else 2
    i, j, mt, g = n, m, 0, 0
    while i > 0 or j > 0:
      d = Dr[i, j]
      if d == 0: mt += int(x[i-1] == y[j-1]); i -= 1; j -= 1
      elif d == 1: g += 1; i -= 1
      else: g += 1; j -= 1
    res.append([mt, g])
  return np.array(res, np.int32)

@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (x.shape[1] // 128,))
def rnn_runtime_T(x, n: ml.scalar, out):
  """an Elman RNN over a run-time number of steps passed as ml.scalar."""
  c = ml.ds(ml.program_id(0) * 128, 128)
  h = jnp.zeros((128,), F32)
  for t in range(n):
    h = jnp.tanh(0.5 * h + x[t, c])
  out[c] = h

def rnn_T_ref(x, n):
  h = np.zeros(x.shape[1])
  for t in range(n): h = np.tanh(0.5 * h + x[t])
  return h


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 128,))
def fori_unroll(x, out):
  c = ml.ds(ml.program_id(0) * 128, 128)
  def body(t, h):
    h = 0.9 * h + x[t, c]
    out[t, c] = h
    return h
  lax.fori_loop(0, x.shape[0], body, jnp.zeros((128,), F32), unroll=4)

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 128,))
def scan_none_reverse(x, out):
  c = ml.ds(ml.program_id(0) * 128, 128)
  def f(carry, _):
    h, t = carry
    t = t - 1
    h = 0.9 * h + x[t, c]
    out[t, c] = h
    return (h, t), None
  lax.scan(f, (jnp.zeros((128,), F32), x.shape[0]), None, length=x.shape[0])

def ema_ref(x, rev=False):
  xs = x[::-1] if rev else x
  h = np.zeros(x.shape[1]); out = []
  for t in range(x.shape[0]): h = 0.9 * h + xs[t]; out.append(h)
  out = np.stack(out)
  return out[::-1] if rev else out

@mg.mgpu_kernel(out_shape=lambda x, wx, wh, b, lens: S((x.shape[0], x.shape[1], wh.shape[0]), F32))
def bilstm_bwd_lengths(x, wx, wh, b, lens, hs):
  """the backward direction of a bidirectional RNN with lengths: row r reads its step L[r] - 1 - t, gathered per
  row; steps past a row's length are zero."""
  T, B, D = x.shape
  H = wh.shape[0]
  L = lens[...]
  rows = jnp.arange(B)
  h = jnp.zeros((B, H), F32)
  for t in range(T):
    tt = jnp.maximum(L - 1 - t, 0)
    xt = x[tt[:, None], rows[:, None], jnp.arange(D)[None, :]]
    g = jnp.tanh(jnp.dot(xt, wx[...], preferred_element_type=F32) + jnp.dot(h.astype(jnp.bfloat16), wh[...], preferred_element_type=F32) + b[...])
    live = (t < L)[:, None]
    h = jnp.where(live, g, h)
    hs[t] = jnp.where(live, h, 0.0)

def bil_ref(x, wx, wh, b, lens):
  T, B, D = x.shape; H = wh.shape[0]
  h = np.zeros((B, H), np.float32); out = np.zeros((T, B, H), np.float32)
  for t in range(T):
    tt = np.maximum(lens - 1 - t, 0)
    xt = x[tt, np.arange(B)].astype(np.float32)
    hb = np.asarray(jnp.asarray(h).astype(jnp.bfloat16).astype(F32))
    g = np.tanh(xt @ wx.astype(np.float32) + hb @ wh.astype(np.float32) + b)
    live = (t < lens)[:, None]
    h = np.where(live, g, h); out[t] = np.where(live, h, 0)
  return out

def bil_in():
  bf = lambda a: np.asarray(jnp.asarray(a).astype(jnp.bfloat16))
  return bf(rn((6, 64, 64), 90)), bf(rn((64, 64), 91, 0.1)), bf(rn((64, 64), 92, 0.1)), rn((64,), 93, 0.1), np.random.default_rng(9).integers(0, 7, 64).astype(np.int32)

@mg.mgpu_kernel(out_shape=lambda h, w: S((h.shape[0], w.shape[1]), F32))
def gru_wide_gates(h, w, out):
  """H = 128: gates (64, 384) from one dot, n past 256."""
  g = jnp.dot(h[...], w[...], preferred_element_type=F32)
  H = h.shape[1]
  r, z, n = g[:, :H], g[:, H:2 * H], g[:, 2 * H:]
  out[...] = jnp.concatenate([jax.nn.sigmoid(r), jax.nn.sigmoid(z), jnp.tanh(n)], axis=1)

def gru_wide_ref(h, w):
  g = h.astype(np.float32) @ w.astype(np.float32); H = h.shape[1]
  return np.concatenate([sig(g[:, :H]), sig(g[:, H:2*H]), np.tanh(g[:, 2*H:])], 1)

CASES_c6 = [
  ("ctc_stack_interleave", ctc_stack_interleave, ctc_in64, ctc_ref, 1e-3, {}),
  ("ctc_repeat", ctc_repeat, lambda: ctc_in64(1), ctc_ref, 1e-3, {}),
  ("lse_all_neginf_cols", lse_all_neginf_cols, vinputs, lse_cols_ref, 1e-4, {}),
  ("viterbi_int8_bp", viterbi_int8_bp, vinputs, lambda e, A: viterbi_ref(e, A)[0], 0, {}),
  ("viterbi_while_backtrack", viterbi_while_backtrack, vinputs, lambda e, A: viterbi_ref(e, A)[0], 0, {}),
  ("running_argmax_carry", running_argmax_carry, lambda: (rn((128, 40), 94),), lambda x: (x.max(1), x.argmax(1)), 0, {}),
  ("running_argmax_scalar", running_argmax_scalar, lambda: (rn((40,), 95),), lambda x: (x.max(keepdims=True), np.array([x.argmax()])), 0, {}),
  ("lev_int16", lev_int16, lambda: strings(seed=9), lev_ref, 0, {}),
  ("lev_uint8_strings", lev_uint8_strings, lambda: strings_u8(10), lev_ref, 0, {}),
  ("nw_traceback", nw_traceback, lambda: strings(seed=11), nw_tb_ref, 0, {}),
  ("rnn_runtime_T", rnn_runtime_T, lambda: (rn((50, 256), 96), np.int32(37)), rnn_T_ref, 1e-5, {}),
  ("fori_unroll", fori_unroll, lambda: (rn((50, 256), 97),), ema_ref, 1e-5, {}),
  ("scan_none_reverse", scan_none_reverse, lambda: (rn((100, 128), 98),), lambda x: ema_ref(x, True), 1e-4, {}),
  ("bilstm_bwd_lengths", bilstm_bwd_lengths, bil_in, bil_ref, 2e-2, {}),
  ("gru_wide_gates", gru_wide_gates, lambda: (np.asarray(jnp.asarray(rn((64, 128), 99)).astype(jnp.bfloat16)), np.asarray(jnp.asarray(rn((128, 384), 100, 0.1)).astype(jnp.bfloat16))), gru_wide_ref, 2e-2, {}),
]

# ---------------------------------------------------------------- c11

def nan_in():
  x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
  x[3, 5] = np.nan; x[7, 0] = np.nan; x[9, 127] = np.nan; x[:, 64] = np.nan
  x[12, :] = -np.inf
  return (x,)

@mg.mgpu_kernel(out_shape=lambda x: (S((16,), I32), S((128,), I32), S((16,), I32), S((16, 1), I32)))
def argmax_nan(x, r, c, mn, kd):
  v = x[...]
  r[...] = jnp.argmax(v, axis=1)
  c[...] = jnp.argmax(v, axis=0)
  mn[...] = jnp.argmin(v, axis=1)
  kd[...] = jnp.argmax(v, axis=1, keepdims=True)

def argmax_nan_ref(x):
  v = jnp.asarray(x)
  return (np.asarray(jnp.argmax(v, 1)), np.asarray(jnp.argmax(v, 0)), np.asarray(jnp.argmin(v, 1)), np.asarray(jnp.argmax(v, 1, keepdims=True)))

@mg.mgpu_kernel(out_shape=lambda z, h: z)
def mingru_bf16(z, h, out):
  zt = jax.nn.sigmoid(z[...])
  a, b = 1 - zt, zt * h[...]
  out[...] = lax.associative_scan(lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1]), (a, b), axis=1)[1]

def mingru_bf16_ref(z, h):
  zt = jax.nn.sigmoid(jnp.asarray(z)); a, b = 1 - zt, zt * jnp.asarray(h)
  return np.asarray(lax.associative_scan(lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1]), (a, b), axis=1)[1])

@mg.mgpu_kernel(out_shape=lambda a, b, c: c)
def assoc3(a, b, c, out):
  def comb(l, r):
    return l[0] * r[0], r[0] * l[1] + r[1], jnp.maximum(l[2], r[2])
  _, h, m = lax.associative_scan(comb, (a[...], b[...], c[...]), axis=1)
  out[...] = h + m

def assoc3_ref(a, b, c):
  def comb(l, r):
    return l[0] * r[0], r[0] * l[1] + r[1], jnp.maximum(l[2], r[2])
  _, h, m = lax.associative_scan(comb, (jnp.asarray(a), jnp.asarray(b), jnp.asarray(c)), axis=1)
  return np.asarray(h + m)

@mg.mgpu_kernel(out_shape=lambda x: x)
def logaddexp_bf16(x, o):
  v = x[...]
  o[...] = jnp.logaddexp(v, jnp.roll(v, 1, axis=1))

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 128,))
def scan_unroll_true(x, o):
  c = ml.ds(ml.program_id(0) * 128, 128)
  def f(h, t):
    h = 0.9 * h + x[t, c]
    o[t, c] = h
    return h, None
  lax.scan(f, jnp.zeros((128,), F32), jnp.arange(x.shape[0]), unroll=True)

def ema(x):
  h = np.zeros(x.shape[1]); out = []
  for t in range(x.shape[0]): h = 0.9 * h + x[t]; out.append(h)
  return np.stack(out)

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32))
def fori_python_list_carry(x, o):
  def body(t, c):
    h, m = c
    return [0.5 * h + x[t, :], jnp.maximum(m, x[t, :])]
  h, m = lax.fori_loop(0, x.shape[0], body, [jnp.zeros((128,), F32), jnp.full((128,), -jnp.inf)])
  o[...] = h + m

def flc_ref(x):
  h = np.zeros(128); m = np.full(128, -np.inf)
  for t in range(x.shape[0]): h = 0.5 * h + x[t]; m = np.maximum(m, x[t])
  return h + m

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32))
def fori_dict_carry(x, o):
  def body(t, c):
    return {"h": 0.5 * c["h"] + x[t, :], "n": c["n"] + 1}
  c = lax.fori_loop(0, x.shape[0], body, {"h": jnp.zeros((128,), F32), "n": 0})
  o[...] = c["h"] / c["n"]

@mg.mgpu_kernel(out_shape=lambda e, A: S((e.shape[0],), I32))
def viterbi_scan_ys(e, A, path):
  """forward with lax.scan stacking the backpointers (T <= 64: unrolled), backtrack with a reverse scan."""
  T, N = e.shape
  def fwd(delta, et):
    sc = delta[:, None] + A[...]
    return jnp.max(sc, axis=0) + et, jnp.argmax(sc, axis=0)
  delta, bps = lax.scan(fwd, e[0, :], e[...][1:])
  last = jnp.argmax(delta)
  def back(st, bp):
    prev = jnp.sum(jnp.where(jnp.arange(N) == st, bp, 0))
    return prev, st
  first, rest = lax.scan(back, last, bps, reverse=True)
  path[0] = first
  path[1:] = rest

CASES_c11 = [
  ("argmax_nan", argmax_nan, nan_in, argmax_nan_ref, 0, {}),
  ("mingru_bf16", mingru_bf16, lambda: (np.asarray(jnp.asarray(np.random.default_rng(1).standard_normal((8, 256))).astype(BF16)), np.asarray(jnp.asarray(np.random.default_rng(2).standard_normal((8, 256))).astype(BF16))), mingru_bf16_ref, 3e-2, {}),
  ("assoc3", assoc3, lambda: tuple(np.random.default_rng(k).standard_normal((8, 128)).astype(np.float32) for k in (3, 4, 5)), assoc3_ref, 1e-3, {}),
  ("logaddexp_bf16", logaddexp_bf16, lambda: (np.asarray(jnp.asarray(np.random.default_rng(6).standard_normal((8, 128)) * 10).astype(BF16)),), lambda x: np.asarray(jnp.logaddexp(jnp.asarray(x), jnp.roll(jnp.asarray(x), 1, axis=1))), 1e-2, {}),
  ("scan_unroll_true", scan_unroll_true, lambda: (np.random.default_rng(7).standard_normal((100, 128)).astype(np.float32),), ema, 1e-4, {}),
  ("fori_python_list_carry", fori_python_list_carry, lambda: (np.random.default_rng(8).standard_normal((50, 128)).astype(np.float32),), flc_ref, 1e-5, {}),
  ("fori_dict_carry", fori_dict_carry, lambda: (np.random.default_rng(9).standard_normal((50, 128)).astype(np.float32),), lambda x: ema_half(x), 1e-5, {}),
  ("viterbi_scan_ys", viterbi_scan_ys, lambda: vinputs(T=33), lambda e, A: viterbi_ref(e, A)[0], 0, {}),
]
def ema_half(x):
  h = np.zeros(128)
  for t in range(x.shape[0]): h = 0.5 * h + x[t]
  return h / x.shape[0]


CASES = [c for c in CASES_c1 + CASES_c2 + CASES_c3 + CASES_c6 + CASES_c11]


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _compare(got, want, tol):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kernel,make,ref,tol,kw", CASES, ids=[c[0] for c in CASES])
def test_theme_kernel_matches_numpy_and_builds(name, kernel, make, ref, tol, kw):
  args = make()
  _compare(kernel(*args, interpret=True, **kw), ref(*args), tol)
  export(kernel, *args, **kw)


_ON_GPU = ("ctc_roll", "ctc_batched", "ctc_beta", "viterbi", "viterbi_smem_bp", "hmm_forward", "lev_rows_cummin",
           "lev_antidiag", "smith_waterman_antidiag", "dtw_antidiag", "rnnt_antidiag", "rnnt_rows_logcumsumexp",
           "lstm_cell", "lstm_seq", "gru_seq_scan", "mingru_assoc", "linrec_blocks", "nw_traceback", "argmax_nan")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("name,kernel,make,ref,tol,kw", [c for c in CASES if c[0] in _ON_GPU], ids=list(_ON_GPU))
def test_theme_kernel_on_the_gpu(name, kernel, make, ref, tol, kw):
  args = make()
  _compare(jax.jit(functools.partial(kernel, **kw))(*args), ref(*args), max(tol, 2e-3))
