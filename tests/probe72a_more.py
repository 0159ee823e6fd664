"""Probe 72a's corpus, its fifth part: decoding and filtering steps around the recurrences: beam-search steps (top-k
over beams x vocab with jax.lax.top_k, length penalties, back-pointers gathered into the token history), CTC greedy
decoding (argmax, repeats and blanks collapsed by a prefix sum used as offsets), a Viterbi over an HMM in log space
with run-time lengths, a Kalman filter's predict / update written per element (128 tracks a program), Mamba's selective scan of a
16-state SSM, and many edit-distance pairs a program as (pairs, m) tiles."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72a_common import F32, I32, S, log_softmax_np, normal, registry, rng_of

CASES, case = registry()


# ---------------------------------------------------------------- beam search
def beam_np(logp, scores, lens, alpha=0.6):
  B, K, V = logp.shape
  new_scores = np.zeros((B, K), np.float32)
  beams = np.zeros((B, K), np.int32)
  toks = np.zeros((B, K), np.int32)
  for b in range(B):
    cand = (scores[b][:, None] + logp[b]).reshape(-1)
    lp = ((5.0 + lens[b] + 1) / 6.0) ** alpha
    norm = cand / lp
    order = np.argsort(-norm, kind="stable")[:K]
    new_scores[b] = cand[order]
    beams[b], toks[b] = order // V, order % V
  return new_scores, beams, toks


def _beam(sd, B=4, K=4, V=128):
  return (log_softmax_np(normal(sd, (B, K, V), 2.0)), normal(sd + 1, (B, K)) - 5.0,
          rng_of(sd).integers(1, 20, B).astype(np.int32)), {}


@mg.mgpu_kernel(out_shape=lambda lp, sc, ln: (sc, S(sc.shape, I32), S(sc.shape, I32)),
                grid=lambda lp, sc, ln: (lp.shape[0],))
def beam_step_top_k(logp, scores, lens, new_scores, beams, tokens, *, alpha: ml.constexpr = 0.6):
  """One beam-search step as fairseq / HF write it: candidates scores[:, None] + logp over (beams, vocab), flattened,
  normalised by GNMT's length penalty ((5 + len) / 6) ** alpha, jax.lax.top_k of the beams' count, the beam the
  index // V and the token % V; the raw scores gathered back at the chosen indices."""
  b = ml.program_id(0)
  K, V = logp.shape[1], logp.shape[2]
  cand = scores[b, :][:, None] + logp[b]
  flat = cand.reshape(K * V)
  lp = ((5.0 + (lens[b] + 1).astype(jnp.float32)) / 6.0) ** alpha
  _, idx = jax.lax.top_k(flat / lp, K)
  new_scores[b, :] = flat[idx]
  beams[b, :] = idx // V
  tokens[b, :] = idx % V


case("beam_step_top_k_length_penalty", beam_step_top_k, _beam, beam_np, 1e-5)


def beam_history_np(hist, beams, toks, t):
  out = hist.copy()
  for b in range(hist.shape[0]):
    out[b] = hist[b, beams[b]]
    out[b, :, t] = toks[b]
  return out


@mg.mgpu_kernel(out_shape=lambda h, bm, tk: h, grid=lambda h, bm, tk: (h.shape[0],))
def beam_reorder_history(hist, beams, toks, out, *, t: ml.constexpr = 5):
  """The back-pointers applied: each new beam's token history is its parent's row (a row gather hist[b, beams]),
  with step t's token written in; Python's int t a constexpr."""
  b = ml.program_id(0)
  rows = hist[b, beams[b, :], :]
  col = ml.arange(hist.shape[2])[None, :]
  out[b] = jnp.where(col == t, toks[b, :][:, None], rows)


case("beam_reorder_history_gather", beam_reorder_history,
     lambda sd: ((rng_of(sd).integers(0, 100, (4, 8, 32)).astype(np.int32),
                  rng_of(sd + 1).integers(0, 8, (4, 8)).astype(np.int32),
                  rng_of(sd + 2).integers(0, 100, (4, 8)).astype(np.int32)), {}),
     lambda h, bm, tk, t=5: beam_history_np(h, bm, tk, t), 0)


def finished_np(scores, toks, fin, eos=2):
  s = np.where(fin != 0, scores, np.where(toks == eos, scores, scores))
  newfin = (fin != 0) | (toks == eos)
  best = np.where(newfin, s, -np.inf).max(axis=1)
  return s.astype(np.float32), newfin.astype(np.int32), best.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda s, t, f: (s, f, S((s.shape[0],), F32)), grid=(1,))
def beam_finished_mask(scores, toks, fin, s_out, f_out, best):
  """Finished-hypothesis bookkeeping over a (batch, beams) tile: EOS sets a flag, the best finished score per batch
  row a masked max (-inf where none finished)."""
  s, t, f = scores[...], toks[...], fin[...]
  done = (f != 0) | (t == 2)
  s_out[...] = s
  f_out[...] = done.astype(jnp.int32)
  best[...] = jnp.max(jnp.where(done, s, -jnp.inf), axis=1)


case("beam_finished_masked_max", beam_finished_mask,
     lambda sd: ((normal(sd, (8, 16)), rng_of(sd).integers(0, 6, (8, 16)).astype(np.int32),
                  (rng_of(sd + 1).random((8, 16)) < 0.2).astype(np.int32)), {}), finished_np, 0)


# ---------------------------------------------------------------- CTC greedy decoding
def ctc_greedy_np(lp, blank=0):
  B, T, _ = lp.shape
  out = np.full((B, T), -1, np.int32)
  n = np.zeros(B, np.int32)
  for b in range(B):
    best = lp[b].argmax(-1)
    keep = (best != blank) & np.concatenate([[True], best[1:] != best[:-1]])
    v = best[keep]
    out[b, :len(v)] = v
    n[b] = len(v)
  return out, n


@mg.mgpu_kernel(out_shape=lambda lp: (S(lp.shape[:2], I32), S((lp.shape[0],), I32)), grid=lambda lp: (lp.shape[0],))
def ctc_greedy_decode(lp, out, count):
  """Best path decoding: argmax over the vocabulary per frame, a frame kept where it is not blank and differs from
  the previous frame (jnp.roll), the kept labels scattered to an exclusive prefix sum of the keep flags."""
  b = ml.program_id(0)
  best = jnp.argmax(lp[b], axis=1).astype(jnp.int32)
  t = ml.arange(best.shape[0])
  keep = (best != 0) & ((t == 0) | (best != jnp.roll(best, 1)))
  pos = jnp.cumsum(keep.astype(jnp.int32)) - 1
  out[b, :] = ml.full(best.shape, -1, jnp.int32)
  ml.store(out.at[b, pos], best, mask=keep)
  count[b] = jnp.sum(keep.astype(jnp.int32))


case("ctc_greedy_decode_collapse", ctc_greedy_decode,
     lambda sd: ((log_softmax_np(normal(sd, (4, 64, 16), 2.0)),), {}), ctc_greedy_np, 0)


# ---------------------------------------------------------------- HMM Viterbi with lengths
def hmm_viterbi_np(logA, logE, logpi, obs, lens):
  B, T = obs.shape
  K = logA.shape[0]
  paths = np.zeros((B, T), np.int32)
  for b in range(B):
    n = int(lens[b])
    d = logpi + logE[:, obs[b, 0]]
    bp = np.zeros((T, K), np.int32)
    for t in range(1, n):
      x = d[:, None] + logA
      bp[t] = x.argmax(0)
      d = x.max(0) + logE[:, obs[b, t]]
    s = int(d.argmax())
    paths[b, n - 1] = s
    for t in range(n - 1, 0, -1):
      s = int(bp[t, s])
      paths[b, t - 1] = s
    paths[b, n:] = -1
  return paths


@mg.mgpu_kernel(out_shape=lambda A, E, pi, obs, lens: S(obs.shape, I32),
                grid=lambda A, E, pi, obs, lens: (obs.shape[0],))
def hmm_viterbi_lengths(logA, logE, logpi, obs, lens, path):
  """Viterbi over a discrete HMM with each sequence's length read at run time: back-pointers in SMEM, the loop
  bounds run-time scalars, the padding of the path -1 (a row of -1 stored first, then the backtrack's scalars)."""
  b = ml.program_id(0)
  T, K = obs.shape[1], logA.shape[0]
  n = lens[b]
  A = logA[...]
  bp = ml.smem((T, K), jnp.int32)
  d = logpi[...] + logE[:, obs[b, 0]]
  for t in range(1, n):
    x = d[:, None] + A
    bp[t, :] = jnp.argmax(x, axis=0).astype(jnp.int32)
    d = jnp.max(x, axis=0) + logE[:, obs[b, t]]
  path[b, :] = ml.full((T,), -1, jnp.int32)
  s = jnp.argmax(d).astype(jnp.int32)
  path[b, n - 1] = s
  for t in range(n - 1, 0, -1):
    s = bp[t, s]
    path[b, t - 1] = s


def _hmm_lens(sd, B=4, T=24, K=16, V=32):
  r = rng_of(sd)
  return (log_softmax_np(normal(sd, (K, K))), log_softmax_np(normal(sd + 1, (K, V))), log_softmax_np(normal(sd + 2, (K,))),
          r.integers(0, V, (B, T)).astype(np.int32), r.integers(2, T + 1, B).astype(np.int32)), {}


case("hmm_viterbi_runtime_lengths", hmm_viterbi_lengths, _hmm_lens, hmm_viterbi_np, 0)


# ---------------------------------------------------------------- Kalman filter
def kalman_np(zs, F, H, Q, R, x0, P0):
  B, T, _ = zs.shape
  xs = np.zeros((B, T, F.shape[0]))
  for b in range(B):
    x, P = x0[b].astype(np.float64), P0.astype(np.float64)
    for t in range(T):
      x = F @ x
      P = F @ P @ F.T + Q
      y = zs[b, t] - H @ x
      Sm = H @ P @ H.T + R
      K = P @ H.T @ np.linalg.inv(Sm)
      x = x + K @ y
      P = (np.eye(len(x)) - K @ H) @ P
      xs[b, t] = x
  return xs.astype(np.float32)


def _kalman(sd, B=128, T=8):
  dt = 0.1
  F = np.array([[1, dt], [0, 1]], np.float32)
  H = np.array([[1, 0]], np.float32)
  Q = np.array([[1e-3, 0], [0, 1e-2]], np.float32)
  R = np.array([[0.25]], np.float32)
  zs = normal(sd, (B, T, 1)) * 0.5 + np.linspace(0, 1, T, dtype=np.float32)[None, :, None]
  return (zs.astype(np.float32), F, H, Q, R, normal(sd + 1, (B, 2)), np.eye(2, dtype=np.float32)), {}


@mg.mgpu_kernel(out_shape=lambda zs, F, H, Q, R, x0, P0: S(zs.shape[:2] + (2,), F32),
                grid=lambda zs, F, H, Q, R, x0, P0: (zs.shape[0] // 128,))
def kalman_constant_velocity(zs, F, H, Q, R, x0, P0, xs):
  """A batched 2-state constant-velocity Kalman filter (filterpy's predict / update written out per element, as the
  CUDA port keeps each track's state in a thread): 128 tracks a program, the 2x2 covariance as three vectors
  (P symmetric), the model matrices read as scalars; the 1x1 innovation inverted by a division."""
  p = ml.program_id(0)
  tr = ml.ds(p * 128, 128)
  f01, q00, q11, r = F[0, 1], Q[0, 0], Q[1, 1], R[0, 0]
  x0_, x1 = x0[tr, 0], x0[tr, 1]
  p00 = ml.full((128,), 1.0, jnp.float32) * P0[0, 0]
  p01 = ml.full((128,), 1.0, jnp.float32) * P0[0, 1]
  p11 = ml.full((128,), 1.0, jnp.float32) * P0[1, 1]
  for t in range(zs.shape[1]):
    x0_ = x0_ + f01 * x1
    n00 = p00 + 2.0 * f01 * p01 + f01 * f01 * p11 + q00
    n01 = p01 + f01 * p11
    n11 = p11 + q11
    s = n00 + r
    k0, k1 = n00 / s, n01 / s
    y = zs[tr, t, 0] - x0_
    x0_, x1 = x0_ + k0 * y, x1 + k1 * y
    p00, p01, p11 = (1.0 - k0) * n00, (1.0 - k0) * n01, n11 - k1 * n01
    xs[tr, t, 0] = x0_
    xs[tr, t, 1] = x1


case("kalman_constant_velocity_batched", kalman_constant_velocity, _kalman, kalman_np, 1e-4)


# ---------------------------------------------------------------- Mamba selective scan
def selective_scan_np(u, delta, A, Bm, Cm, D):
  """Mamba's selective scan, one (channel block) of a sequence: u, delta (T, Dc); A (Dc, N); B, C (T, N)."""
  T, Dc = u.shape
  x = np.zeros((Dc, A.shape[1]))
  ys = np.zeros((T, Dc))
  for t in range(T):
    dA = np.exp(delta[t][:, None] * A)
    x = dA * x + (delta[t] * u[t])[:, None] * Bm[t][None, :]
    ys[t] = x @ Cm[t] + D * u[t]
  return ys.astype(np.float32)


def _ssm(sd, T=32, Dc=64, N=16):
  return (normal(sd, (T, Dc)), np.log1p(np.exp(normal(sd + 1, (T, Dc)))).astype(np.float32),
          -np.exp(normal(sd + 2, (Dc, N)) * 0.5).astype(np.float32), normal(sd + 3, (T, N)), normal(sd + 4, (T, N)),
          normal(sd + 5, (Dc,))), {}


@mg.mgpu_kernel(out_shape=lambda u, d, A, B, C, D: u, grid=(1,))
def selective_scan_sequential(u, delta, A, Bm, Cm, D, y):
  """mamba_ssm's selective_scan reference loop in a kernel: the (Dc, N) state of 16 states a channel carried over
  time, discretised per step (exp(delta A), delta B u), read out by C_t along the states."""
  Am, Dv = A[...], D[...]
  x = ml.zeros(Am.shape, jnp.float32)
  for t in range(u.shape[0]):
    dt = delta[t, :]
    ut = u[t, :]
    x = jnp.exp(dt[:, None] * Am) * x + (dt * ut)[:, None] * Bm[t, :][None, :]
    y[t, :] = jnp.sum(x * Cm[t, :][None, :], axis=1) + Dv * ut


case("mamba_selective_scan_16_states", selective_scan_sequential, _ssm, selective_scan_np, 1e-4)


# ---------------------------------------------------------------- many pairs a program
def hamming_lev_np(a, b):
  from probe72a_align import lev_np
  return lev_np(a, b)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0],), I32), grid=lambda a, b: (a.shape[0] // 16,))
def levenshtein_pairs_tile(a, b, out):
  """16 pairs a program as (16, m) tiles (batched edit distance for short strings, a row a pair): the row's prefix
  min along axis 1, the diagonal by a roll along axis 1, a column of a's characters per step."""
  p = ml.program_id(0)
  rows = ml.ds(p * 16, 16)
  m = b.shape[1]
  j = (ml.arange(m) + 1)[None, :]
  bj = b[rows, :]
  row = ml.broadcast_to(j, (16, m))
  for i in range(1, a.shape[1] + 1):
    ai = a[rows, i - 1]
    diag = jnp.where(j == 1, i - 1, jnp.roll(row, 1, axis=1))
    t = jnp.minimum(row + 1, diag + (ai[:, None] != bj).astype(jnp.int32))
    t = jnp.minimum(t, i + j)
    row = ml.cummin(t - j, axis=1) + j
  out[rows] = row[:, m - 1]


def _pairs(sd):
  r = rng_of(sd)
  a = r.integers(0, 4, (32, 24)).astype(np.int32)
  b = r.integers(0, 4, (32, 32)).astype(np.int32)
  return (a, b), {}


case("levenshtein_sixteen_pairs_a_tile", levenshtein_pairs_tile, _pairs, hamming_lev_np, 0)
