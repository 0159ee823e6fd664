"""Probe 72a's corpus, its first part: log-space dynamic programmes over a state vector carried in registers through
a run-time time loop, as warp-ctc, k2, pytorch-crf and HMM libraries port them: CTC's alpha and beta recursions
(shifts by one and two states, the skip mask, label gathers from the log-probabilities, run-time lengths), Viterbi
with argmax back-pointers and a backtrack, HMM forward / backward / posteriors (log space and scaled), CRF partition
functions and the gold path's score."""

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72a_common import F32, I32, NEG, S, lse_np, log_softmax_np, normal, registry, rng_of

CASES, case = registry()


# ---------------------------------------------------------------- CTC
def _ctc_inputs(seed, B=4, T=24, C=12, L=7, SP=32, var=False):
  r = rng_of(seed)
  lp = log_softmax_np(normal(seed, (B, T, C), 2.0))
  labels = r.integers(1, C, (B, L)).astype(np.int32)
  labels[:, 2] = labels[:, 1]                     # a repeat: the skip transition is closed there
  ll = (r.integers(L // 2, L + 1, B) if var else np.full(B, L)).astype(np.int32)
  il = (r.integers(T // 2, T + 1, B) if var else np.full(B, T)).astype(np.int32)
  ext = np.zeros((B, SP), np.int32)
  ext[:, 1:2 * L + 1:2] = labels
  return lp, ext, labels, ll, il


def ctc_alpha_np(lp, ext, ll, il):
  B, _, _ = lp.shape
  out = np.zeros(B, np.float32)
  for b in range(B):
    S_ = 2 * int(ll[b]) + 1
    e = ext[b, :S_]
    a = np.full(S_, -np.inf)
    a[0] = lp[b, 0, 0]
    a[1] = lp[b, 0, e[1]]
    for t in range(1, int(il[b])):
      a1 = np.concatenate([[-np.inf], a[:-1]])
      a2 = np.concatenate([[-np.inf, -np.inf], a[:-2]])
      ok = (e != 0) & (np.concatenate([[0, 0], e[:-2]]) != e)
      a2 = np.where(ok, a2, -np.inf)
      a = lse_np(a, a1, a2) + lp[b, t, e]
    out[b] = -np.logaddexp(a[S_ - 1], a[S_ - 2])
  return out


@mg.mgpu_kernel(out_shape=lambda lp, ext: S((lp.shape[0],), F32), grid=lambda lp, ext: (lp.shape[0],))
def ctc_alpha_roll(lp, ext, loss, *, L: ml.constexpr = 7):
  """warp-ctc's alpha recursion as a JAX author writes it: the state vector shifted by jnp.roll and masked, the
  skip allowed where the label differs from the one two states back, three-way logaddexp, a gather of the emission
  log-probs at the extended labels."""
  b = ml.program_id(0)
  T = lp.shape[1]
  e = ext[b, :]
  s = ml.arange(ext.shape[1])
  n_states = 2 * L + 1
  valid = s < n_states
  e2 = jnp.roll(e, 2)
  skip = (e != 0) & (e2 != e) & (s >= 2)
  alpha = jnp.where(s == 0, lp[b, 0, 0], jnp.where(s == 1, ml.load(lp.at[b, 0, e]), NEG))
  for t in range(1, T):
    a1 = jnp.where(s >= 1, jnp.roll(alpha, 1), NEG)
    a2 = jnp.where(skip, jnp.roll(alpha, 2), NEG)
    alpha = jnp.logaddexp(jnp.logaddexp(alpha, a1), a2) + ml.load(lp.at[b, t, e])
    alpha = jnp.where(valid, alpha, NEG)
  tail = jnp.where((s == n_states - 1) | (s == n_states - 2), alpha, NEG)
  loss[b] = -jax.nn.logsumexp(tail)


case("ctc_alpha_roll_logaddexp", ctc_alpha_roll,
     lambda sd: ((_ctc_inputs(sd)[0], _ctc_inputs(sd)[1]), {}),
     lambda lp, ext, L=7: ctc_alpha_np(lp, ext, np.full(lp.shape[0], L), np.full(lp.shape[0], lp.shape[1])), 1e-4)


@mg.mgpu_kernel(out_shape=lambda lp, ext, ll, il: S((lp.shape[0],), F32), grid=lambda lp, ext, ll, il: (lp.shape[0],))
def ctc_alpha_smem(lp, ext, ll, il, loss):
  """The CUDA port (warp-ctc's compute_alpha_kernel): alpha in SMEM, each step's neighbours read back at s - 1 and
  s - 2 under masks, the run-time input and label lengths read per sequence, the answer picked out of the last two
  states by the label length."""
  b = ml.program_id(0)
  SP = ext.shape[1]
  buf = ml.smem((SP,), jnp.float32)
  s = ml.arange(SP)
  e = ml.load(ext.at[b, s])
  e_prev2 = ml.load(ext.at[b, s - 2], mask=s >= 2, other=0)
  n_states = 2 * ll[b] + 1
  valid = s < n_states
  skip = (e != 0) & (e_prev2 != e) & (s >= 2)
  first = ml.load(lp.at[b, 0, e])
  alpha = ml.where(valid & (s < 2), first, NEG)
  buf[...] = alpha
  for t in range(1, il[b]):
    a0 = buf[...]
    a1 = ml.load(buf.at[s - 1], mask=s >= 1, other=NEG)
    a2 = ml.load(buf.at[s - 2], mask=skip, other=NEG)
    m = ml.maximum(a0, ml.maximum(a1, a2))
    new = m + ml.log(ml.exp(a0 - m) + ml.exp(a1 - m) + ml.exp(a2 - m)) + ml.load(lp.at[b, t, e])
    ml.debug_barrier()
    buf[...] = ml.where(valid, new, NEG)
  a = buf[...]
  last = ml.max(ml.where(s == n_states - 1, a, NEG))
  prev = ml.max(ml.where(s == n_states - 2, a, NEG))
  loss[b] = -jnp.logaddexp(last, prev)


def _ctc_var(sd):
  lp, ext, _, ll, il = _ctc_inputs(sd, var=True)
  return (lp, ext, ll, il), {}


case("ctc_alpha_smem_runtime_lengths", ctc_alpha_smem, _ctc_var, ctc_alpha_np, 1e-4)


def ctc_beta_np(lp, ext, L):
  B, T, _ = lp.shape
  S_ = 2 * L + 1
  out = np.zeros(B, np.float32)
  for b in range(B):
    e = ext[b, :S_]
    be = np.full(S_, -np.inf)
    be[S_ - 1] = lp[b, T - 1, 0]
    be[S_ - 2] = lp[b, T - 1, e[S_ - 2]]
    for t in range(T - 2, -1, -1):
      b1 = np.concatenate([be[1:], [-np.inf]])
      b2 = np.concatenate([be[2:], [-np.inf, -np.inf]])
      ok = (e != 0) & (np.concatenate([e[2:], [0, 0]]) != e)
      be = lse_np(be, b1, np.where(ok, b2, -np.inf)) + lp[b, t, e]
    out[b] = -np.logaddexp(be[0], be[1])
  return out


@mg.mgpu_kernel(out_shape=lambda lp, ext: S((lp.shape[0],), F32), grid=lambda lp, ext: (lp.shape[0],))
def ctc_beta_reverse(lp, ext, loss, *, L: ml.constexpr = 7):
  """The beta recursion backwards in time (`range(T - 2, -1, -1)`), the neighbours s + 1 and s + 2 by jnp.roll of
  -1 and -2 and a concatenate-shift, -inf as the fill (jnp.logaddexp of two -inf is -inf)."""
  b = ml.program_id(0)
  T = lp.shape[1]
  SP = ext.shape[1]
  n = 2 * L + 1
  s = ml.arange(SP)
  e = ext[b, :]
  e_next2 = jnp.roll(e, -2)
  skip = (e != 0) & (e_next2 != e) & (s + 2 < n)
  last = ml.load(lp.at[b, T - 1, e])
  beta = jnp.where((s == n - 1) | (s == n - 2), last, -jnp.inf)
  for t in range(T - 2, -1, -1):
    b1 = jnp.where(s + 1 < n, jnp.roll(beta, -1), -jnp.inf)
    b2 = ml.concatenate([beta[2:], ml.full((2,), -jnp.inf, jnp.float32)])
    b2 = jnp.where(skip, b2, -jnp.inf)
    beta = jnp.logaddexp(jnp.logaddexp(beta, b1), b2) + ml.load(lp.at[b, t, e])
    beta = jnp.where(s < n, beta, -jnp.inf)
  loss[b] = -jnp.logaddexp(beta[0], beta[1])


case("ctc_beta_reverse_time_neg_inf", ctc_beta_reverse,
     lambda sd: ((_ctc_inputs(sd)[0], _ctc_inputs(sd)[1]), {}),
     lambda lp, ext, L=7: ctc_beta_np(lp, ext, L), 1e-4)


# ---------------------------------------------------------------- HMM
def _hmm(seed, B=4, T=20, K=16, V=32):
  r = rng_of(seed)
  logA = log_softmax_np(normal(seed, (K, K)))
  logE = log_softmax_np(normal(seed + 1, (K, V)))
  logpi = log_softmax_np(normal(seed + 2, (K,)))
  obs = r.integers(0, V, (B, T)).astype(np.int32)
  return logA, logE, logpi, obs


def hmm_forward_np(logA, logE, logpi, obs):
  B, T = obs.shape
  out = np.zeros(B, np.float32)
  alphas = np.zeros((B, T, logA.shape[0]), np.float32)
  for b in range(B):
    a = logpi + logE[:, obs[b, 0]]
    alphas[b, 0] = a
    for t in range(1, T):
      x = a[:, None] + logA
      m = x.max(0)
      a = m + np.log(np.exp(x - m).sum(0)) + logE[:, obs[b, t]]
      alphas[b, t] = a
    m = a.max()
    out[b] = m + np.log(np.exp(a - m).sum())
  return out, alphas


@mg.mgpu_kernel(out_shape=lambda A, E, pi, obs: S((obs.shape[0],), F32), grid=lambda A, E, pi, obs: (obs.shape[0],))
def hmm_forward_log(logA, logE, logpi, obs, out):
  """The forward algorithm in log space: logsumexp over the previous state of alpha[:, None] + logA (a (K, K)
  tile reduced along axis 0), the emission column at the observation read from GMEM by a run-time index."""
  b = ml.program_id(0)
  A = logA[...]
  alpha = logpi[...] + logE[:, obs[b, 0]]
  for t in range(1, obs.shape[1]):
    alpha = ml.logsumexp(alpha[:, None] + A, axis=0) + logE[:, obs[b, t]]
  out[b] = ml.logsumexp(alpha)


case("hmm_forward_log_space", hmm_forward_log, lambda sd: (_hmm(sd), {}),
     lambda *a: hmm_forward_np(*a)[0], 1e-4)


@mg.mgpu_kernel(out_shape=lambda A, E, pi, obs: (S((obs.shape[0],), F32), S(obs.shape + (A.shape[0],), F32)),
                grid=lambda A, E, pi, obs: (obs.shape[0],))
def hmm_forward_scaled(logA, logE, logpi, obs, out, alphas):
  """Rabiner's scaled forward pass in probability space: alpha @ A as a vector-matrix product (jnp.dot), the scale
  c_t the sum, the log-likelihood the sum of log c_t; each step's normalised alpha stored (as log) per time step."""
  b = ml.program_id(0)
  A = jnp.exp(logA[...])
  E = jnp.exp(logE[...])
  a = jnp.exp(logpi[...]) * E[:, obs[b, 0]]
  c = jnp.sum(a)
  a = a / c
  ll = jnp.log(c)
  alphas[b, 0, :] = jnp.log(a) + ll
  for t in range(1, obs.shape[1]):
    a = jnp.dot(a, A) * E[:, obs[b, t]]
    c = jnp.sum(a)
    a = a / c
    ll = ll + jnp.log(c)
    alphas[b, t, :] = jnp.log(a) + ll
  out[b] = ll


case("hmm_forward_scaled_vecmat", hmm_forward_scaled, lambda sd: (_hmm(sd), {}), hmm_forward_np, 1e-4)


def hmm_posteriors_np(logA, logE, logpi, obs):
  _, alphas = hmm_forward_np(logA, logE, logpi, obs)
  B, T = obs.shape
  post = np.zeros_like(alphas)
  for b in range(B):
    be = np.zeros(logA.shape[0])
    for t in range(T - 1, -1, -1):
      g = alphas[b, t] + be
      post[b, t] = g - lse_np(*g)
      x = logA + (logE[:, obs[b, t]] + be)[None, :]
      be = x.max(1) + np.log(np.exp(x - x.max(1, keepdims=True)).sum(1))
  return post.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda A, E, pi, obs: S(obs.shape + (A.shape[0],), F32),
                grid=lambda A, E, pi, obs: (obs.shape[0],))
def hmm_forward_backward(logA, logE, logpi, obs, post):
  """Forward-backward posteriors: the forward pass keeps every alpha in an SMEM (T, K) buffer, the backward pass
  walks time down reading them back, logsumexp along axis 1 for beta; gamma normalised by its own logsumexp."""
  b = ml.program_id(0)
  T, K = obs.shape[1], logA.shape[0]
  A = logA[...]
  al = ml.smem((T, K), jnp.float32)
  alpha = logpi[...] + logE[:, obs[b, 0]]
  al[0, :] = alpha
  for t in range(1, T):
    alpha = ml.logsumexp(alpha[:, None] + A, axis=0) + logE[:, obs[b, t]]
    al[t, :] = alpha
  beta = ml.zeros((K,), jnp.float32)
  for t in range(T - 1, -1, -1):
    g = al[t, :] + beta
    post[b, t, :] = g - ml.logsumexp(g)
    beta = ml.logsumexp(A + (logE[:, obs[b, t]] + beta)[None, :], axis=1)


case("hmm_forward_backward_smem_alphas", hmm_forward_backward, lambda sd: (_hmm(sd), {}), hmm_posteriors_np, 1e-4)


# ---------------------------------------------------------------- Viterbi
def viterbi_np(em, trans, start, end):
  B, T, K = em.shape
  paths = np.zeros((B, T), np.int32)
  scores = np.zeros(B, np.float32)
  for b in range(B):
    sc = start + em[b, 0]
    bps = []
    for t in range(1, T):
      x = sc[:, None] + trans
      bps.append(x.argmax(0))
      sc = x.max(0) + em[b, t]
    sc = sc + end
    best = int(sc.argmax())
    scores[b] = sc[best]
    paths[b, T - 1] = best
    for t in range(T - 1, 0, -1):
      best = int(bps[t - 1][best])
      paths[b, t - 1] = best
  return scores, paths


def _crf(seed, B=4, T=16, K=16):
  return normal(seed, (B, T, K)), normal(seed + 1, (K, K), 0.5), normal(seed + 2, (K,)), normal(seed + 3, (K,))


@mg.mgpu_kernel(out_shape=lambda em, tr, st, en: (S((em.shape[0],), F32), S(em.shape[:2], I32)),
                grid=lambda em, tr, st, en: (em.shape[0],))
def viterbi_decode(em, trans, start, end, score, path):
  """pytorch-crf's _viterbi_decode: max and argmax of score[:, None] + trans along the previous tag, the back-pointers
  kept in an SMEM (T, K) int32 buffer, the best last tag by argmax, then the backtrack as a scalar loop over time
  reading bp[t, best]."""
  b = ml.program_id(0)
  T, K = em.shape[1], em.shape[2]
  tr = trans[...]
  bp = ml.smem((T, K), jnp.int32)
  sc = start[...] + em[b, 0, :]
  for t in range(1, T):
    x = sc[:, None] + tr
    bp[t, :] = ml.argmax(x, axis=0).astype(jnp.int32)
    sc = ml.max(x, axis=0) + em[b, t, :]
  sc = sc + end[...]
  best = ml.argmax(sc).astype(jnp.int32)
  score[b] = ml.max(sc)
  path[b, T - 1] = best
  for t in range(T - 1, 0, -1):
    best = bp[t, best]
    path[b, t - 1] = best


case("viterbi_decode_smem_backpointers", viterbi_decode, lambda sd: (_crf(sd), {}), viterbi_np, 1e-5)


def crf_logz_np(em, trans, start, end, lens):
  B, T, K = em.shape
  out = np.zeros(B, np.float32)
  for b in range(B):
    sc = start + em[b, 0]
    for t in range(1, int(lens[b])):
      x = sc[:, None] + trans + em[b, t][None, :]
      sc = np.log(np.exp(x - x.max(0)).sum(0)) + x.max(0)
    sc = sc + end
    out[b] = lse_np(*sc)
  return out


@mg.mgpu_kernel(out_shape=lambda em, tr, st, en, lens: S((em.shape[0],), F32),
                grid=lambda em, tr, st, en, lens: (em.shape[0],))
def crf_partition_masked(em, trans, start, end, lens, logz):
  """pytorch-crf's _compute_normalizer: every sequence runs T steps and keeps its old score past its length,
  `torch.where(mask[i], next_score, score)`; jax.nn.logsumexp along axis 0."""
  b = ml.program_id(0)
  n = lens[b]
  tr = trans[...]
  sc = start[...] + em[b, 0, :]
  for t in range(1, em.shape[1]):
    nxt = jax.nn.logsumexp(sc[:, None] + tr + em[b, t, :][None, :], axis=0)
    sc = jnp.where(t < n, nxt, sc)
  logz[b] = jax.nn.logsumexp(sc + end[...])


def _crf_lens(sd):
  em, tr, st, en = _crf(sd)
  return (em, tr, st, en, rng_of(sd).integers(4, em.shape[1] + 1, em.shape[0]).astype(np.int32)), {}


case("crf_partition_masked_lengths", crf_partition_masked, _crf_lens, crf_logz_np, 1e-4)


@mg.mgpu_kernel(out_shape=lambda em, tr, st, en, lens: S((em.shape[0],), F32),
                grid=lambda em, tr, st, en, lens: (em.shape[0] // 4,))
def crf_partition_batched(em, trans, start, end, lens, logz):
  """The same normaliser with 4 sequences a program, each sequence's (K, K) tile taken in an ml.static_range loop
  over the 4, their scores a carried list: the form MG204's hint wrote for the (4, K, K) broadcast reduced along
  axis 1 before probe 72a (which computes now: test_probe72a.py's crf_three_d)."""
  p = ml.program_id(0)
  tr = trans[...]
  scs = [start[...] + em[p * 4 + r, 0, :] for r in ml.static_range(4)]
  for t in range(1, em.shape[1]):
    for r in ml.static_range(4):
      nxt = jax.nn.logsumexp(scs[r][:, None] + tr + em[p * 4 + r, t, :][None, :], axis=0)
      scs[r] = jnp.where(t < lens[p * 4 + r], nxt, scs[r])
  for r in ml.static_range(4):
    logz[p * 4 + r] = jax.nn.logsumexp(scs[r] + end[...])


@mg.mgpu_kernel(out_shape=lambda em, tr, st, en, lens: S((em.shape[0],), F32),
                grid=lambda em, tr, st, en, lens: (em.shape[0] // 8,))
def crf_partition_batched_3d(em, trans, start, end, lens, logz):
  """8 sequences a program as the batched torch code holds them: a (8, K, K) score broadcast reduced along axis 1
  by jax.nn.logsumexp, the lengths' mask a (8, 1) column (4 a program computes too since probe 72a's fixes)."""
  p = ml.program_id(0)
  n = ml.load(lens.at[p * 8 + ml.arange(8)])
  tr = trans[...]
  sc = start[...][None, :] + em[ml.ds(p * 8, 8), 0, :]
  for t in range(1, em.shape[1]):
    x = sc[:, :, None] + tr[None, :, :] + em[ml.ds(p * 8, 8), t, :][:, None, :]
    sc = jnp.where((t < n)[:, None], jax.nn.logsumexp(x, axis=1), sc)
  logz[ml.ds(p * 8, 8)] = jax.nn.logsumexp(sc + end[...][None, :], axis=1)


def _crf_lens16(sd):
  em = normal(sd, (16, 12, 16))
  _, tr, st, en = _crf(sd)
  return (em, tr, st, en, rng_of(sd).integers(4, 13, 16).astype(np.int32)), {}


case("crf_partition_eight_a_program_3d", crf_partition_batched_3d, _crf_lens16, crf_logz_np, 1e-4)


def _crf_lens8(sd):
  em = normal(sd, (8, 12, 16))
  _, tr, st, en = _crf(sd)
  return (em, tr, st, en, rng_of(sd).integers(4, 13, 8).astype(np.int32)), {}


case("crf_partition_four_a_program", crf_partition_batched, _crf_lens8, crf_logz_np, 1e-4)


def crf_gold_np(em, trans, start, end, tags):
  B, T, _ = em.shape
  out = np.zeros(B, np.float32)
  for b in range(B):
    s = start[tags[b, 0]] + em[b, 0, tags[b, 0]]
    for t in range(1, T):
      s += trans[tags[b, t - 1], tags[b, t]] + em[b, t, tags[b, t]]
    out[b] = s + end[tags[b, T - 1]]
  return out


@mg.mgpu_kernel(out_shape=lambda em, tr, st, en, tags: S((em.shape[0],), F32),
                grid=lambda em, tr, st, en, tags: (em.shape[0] // 128,))
def crf_gold_score(em, trans, start, end, tags, out):
  """pytorch-crf's _compute_score vectorised over 128 sequences a program: the emission of each gold tag and the
  transition between consecutive tags are gathers at (seq, t, tag) and (prev, tag) index vectors."""
  p = ml.program_id(0)
  seq = p * 128 + ml.arange(128)
  prev = ml.load(tags.at[seq, 0])
  s = ml.load(start.at[prev]) + ml.load(em.at[seq, 0, prev])
  for t in range(1, em.shape[1]):
    cur = ml.load(tags.at[seq, t])
    s = s + ml.load(trans.at[prev, cur]) + ml.load(em.at[seq, t, cur])
    prev = cur
  out[ml.ds(p * 128, 128)] = s + ml.load(end.at[prev])


def _gold(sd):
  em, tr, st, en = _crf(sd, B=256, T=10, K=8)
  return (em, tr, st, en, rng_of(sd).integers(0, 8, (256, 10)).astype(np.int32)), {}


case("crf_gold_path_score_gathers", crf_gold_score, _gold, crf_gold_np, 1e-4)
