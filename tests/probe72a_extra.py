"""Probe 72a's corpus, its sixth part: more of the same forms at other shapes and dtypes: CTC's alpha for 8
sequences a program as (8, S) tiles rolled along axis 1, an HMM forward of bfloat16 emissions, a CRF's
forward-backward marginals, Viterbi with transitions read transposed (argmax along axis 1), run lengths of ones by
a reset scan, a running maximum drawdown, exclusive prefix sums two ways, lengths to offsets by a scalar loop, and
Mamba-2's chunk states passed between chunks by scalar decays."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72a_common import F32, I32, S, lse_np, normal, registry, rng_of
from probe72a_dp import _crf, _ctc_inputs, _hmm, ctc_alpha_np, hmm_forward_np, viterbi_np

CASES, case = registry()


@mg.mgpu_kernel(out_shape=lambda lp, ext: S((lp.shape[0],), F32), grid=lambda lp, ext: (lp.shape[0] // 8,))
def ctc_alpha_tile(lp, ext, loss, *, L: ml.constexpr = 7):
  """CTC's alpha for 8 sequences a program: (8, S) state tiles, shifted along axis 1 by jnp.roll, the emissions
  gathered at (sequence, t, label) index grids."""
  p = ml.program_id(0)
  rows = p * 8 + ml.arange(8)
  SP = ext.shape[1]
  n = 2 * L + 1
  s = ml.arange(SP)[None, :]
  e = ext[ml.ds(p * 8, 8), :]
  skip = (e != 0) & (jnp.roll(e, 2, axis=1) != e) & (s >= 2)
  em0 = ml.load(lp.at[rows[:, None], 0, e])
  alpha = jnp.where(s < 2, em0, -jnp.inf)
  for t in range(1, lp.shape[1]):
    a1 = jnp.where(s >= 1, jnp.roll(alpha, 1, axis=1), -jnp.inf)
    a2 = jnp.where(skip, jnp.roll(alpha, 2, axis=1), -jnp.inf)
    alpha = jnp.logaddexp(jnp.logaddexp(alpha, a1), a2) + ml.load(lp.at[rows[:, None], t, e])
    alpha = jnp.where(s < n, alpha, -jnp.inf)
  loss[ml.ds(p * 8, 8)] = -jax.nn.logsumexp(jnp.where((s == n - 1) | (s == n - 2), alpha, -jnp.inf), axis=1)


def _ctc8(sd):
  lp, ext, *_ = _ctc_inputs(sd, B=16)
  return (lp, ext), {}


case("ctc_alpha_eight_sequences_a_tile", ctc_alpha_tile, _ctc8,
     lambda lp, ext, L=7: ctc_alpha_np(lp, ext, np.full(lp.shape[0], L), np.full(lp.shape[0], lp.shape[1])), 1e-4)


@mg.mgpu_kernel(out_shape=lambda A, E, pi, obs: S((obs.shape[0],), F32), grid=lambda A, E, pi, obs: (obs.shape[0],))
def hmm_forward_bf16_emissions(logA, logE, logpi, obs, out):
  """The log-space forward pass with the emission table in bfloat16 (a model's half-precision weights): the column
  converted to float32 before it meets the float32 alpha."""
  b = ml.program_id(0)
  A = logA[...]
  alpha = logpi[...] + logE[:, obs[b, 0]].astype(jnp.float32)
  for t in range(1, obs.shape[1]):
    alpha = jax.nn.logsumexp(alpha[:, None] + A, axis=0) + logE[:, obs[b, t]].astype(jnp.float32)
  out[b] = jax.nn.logsumexp(alpha)


def _hmm_bf16(sd):
  A, E, pi, obs = _hmm(sd)
  return (A, E.astype(jnp.bfloat16), pi, obs), {}


case("hmm_forward_bfloat16_emissions", hmm_forward_bf16_emissions, _hmm_bf16,
     lambda A, E, pi, obs: hmm_forward_np(A, np.asarray(E, np.float32), pi, obs)[0], 1e-4)


def crf_marginals_np(em, trans, start, end):
  B, T, K = em.shape
  out = np.zeros((B, T, K), np.float32)
  for b in range(B):
    al = np.zeros((T, K))
    a = start + em[b, 0]
    al[0] = a
    for t in range(1, T):
      x = a[:, None] + trans
      a = x.max(0) + np.log(np.exp(x - x.max(0)).sum(0)) + em[b, t]
      al[t] = a
    be = end.astype(np.float64)
    z = lse_np(*(al[T - 1] + be))
    for t in range(T - 1, -1, -1):
      out[b, t] = np.exp(al[t] + be - z)
      x = trans + (em[b, t] + be)[None, :]
      be = x.max(1) + np.log(np.exp(x - x.max(1, keepdims=True)).sum(1))
  return out


@mg.mgpu_kernel(out_shape=lambda em, tr, st, en: em, grid=lambda em, tr, st, en: (em.shape[0],))
def crf_marginals(em, trans, start, end, marg):
  """A linear-chain CRF's tag marginals by forward-backward (the alphas kept in SMEM, the backward pass reading
  them), the partition function from the last alpha; the backward's broadcast written on an expression."""
  b = ml.program_id(0)
  T, K = em.shape[1], em.shape[2]
  tr = trans[...]
  al = ml.smem((T, K), jnp.float32)
  a = start[...] + em[b, 0, :]
  al[0, :] = a
  for t in range(1, T):
    a = jax.nn.logsumexp(a[:, None] + tr, axis=0) + em[b, t, :]
    al[t, :] = a
  be = end[...]
  z = jax.nn.logsumexp(a + be)
  for t in range(T - 1, -1, -1):
    marg[b, t, :] = jnp.exp(al[t, :] + be - z)
    be = jax.nn.logsumexp(tr + (em[b, t, :] + be)[None, :], axis=1)


case("crf_forward_backward_marginals", crf_marginals, lambda sd: (_crf(sd), {}), crf_marginals_np, 1e-4)


@mg.mgpu_kernel(out_shape=lambda em, tr, st, en: (S((em.shape[0],), F32), S(em.shape[:2], I32)),
                grid=lambda em, tr, st, en: (em.shape[0],))
def viterbi_transposed(em, trans, start, end, score, path):
  """Viterbi with the transition tile read transposed (trans.T[next, prev], AllenNLP's viterbi_decode orientation):
  max and argmax along axis 1; back-pointers in SMEM, the backtrack a scalar loop."""
  b = ml.program_id(0)
  T, K = em.shape[1], em.shape[2]
  trT = trans[...].T
  bp = ml.smem((T, K), jnp.int32)
  sc = start[...] + em[b, 0, :]
  for t in range(1, T):
    x = trT + sc[None, :]
    bp[t, :] = jnp.argmax(x, axis=1).astype(jnp.int32)
    sc = jnp.max(x, axis=1) + em[b, t, :]
  sc = sc + end[...]
  best = jnp.argmax(sc).astype(jnp.int32)
  score[b] = jnp.max(sc)
  path[b, T - 1] = best
  for t in range(T - 1, 0, -1):
    best = bp[t, best]
    path[b, t - 1] = best


case("viterbi_transposed_argmax_axis1", viterbi_transposed, lambda sd: (_crf(sd), {}), viterbi_np, 1e-5)


def run_lengths_np(x):
  out = np.zeros(x.shape, np.int32)
  for r in range(x.shape[0]):
    c = 0
    for t in range(x.shape[1]):
      c = c + 1 if x[r, t] else 0
      out[r, t] = c
  return out


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32), grid=lambda x: (x.shape[0] // 8,))
def run_lengths_of_ones(x, out):
  """Consecutive ones counted with a reset at each zero: the position minus the last zero's position, that last
  position a cummax of where(x == 0, t, -1)."""
  rows = ml.ds(ml.program_id(0) * 8, 8)
  v = x[rows, :]
  t = ml.arange(v.shape[1])[None, :]
  last_zero = ml.cummax(jnp.where(v == 0, t, -1), axis=1)
  out[rows, :] = t - last_zero


case("run_lengths_reset_by_cummax", run_lengths_of_ones,
     lambda sd: (((rng_of(sd).random((16, 128)) < 0.7).astype(np.int32),), {}), run_lengths_np, 0)


def drawdown_np(p):
  peak = np.maximum.accumulate(p, axis=1)
  return ((p - peak) / peak).astype(np.float32), ((p - peak) / peak).min(axis=1).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda p: (p, S((p.shape[0],), F32)), grid=lambda p: (p.shape[0] // 8,))
def max_drawdown(prices, dd, worst):
  """A running maximum (cummax) and the drawdown from it, with the worst drawdown per series."""
  rows = ml.ds(ml.program_id(0) * 8, 8)
  v = prices[rows, :]
  d = (v - ml.cummax(v, axis=1)) / ml.cummax(v, axis=1)
  dd[rows, :] = d
  worst[rows] = jnp.min(d, axis=1)


case("max_drawdown_running_max", max_drawdown,
     lambda sd: ((np.exp(np.cumsum(normal(sd, (16, 256), 0.02), axis=1)).astype(np.float32),), {}), drawdown_np, 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=lambda x: (x.shape[0] // 8,))
def exclusive_cumsums(x, ex1, ex2):
  """Exclusive prefix sums two ways: the inclusive scan minus the element, and the inclusive scan shifted right by
  a concatenate of a zero column."""
  rows = ml.ds(ml.program_id(0) * 8, 8)
  v = x[rows, :]
  inc = jnp.cumsum(v, axis=1)
  ex1[rows, :] = inc - v
  ex2[rows, :] = ml.concatenate([ml.zeros((8, 1), jnp.int32), inc[:, :-1]], axis=1)


case("exclusive_cumsum_two_ways", exclusive_cumsums,
     lambda sd: ((rng_of(sd).integers(0, 10, (16, 128)).astype(np.int32),), {}),
     lambda x: ((np.cumsum(x, 1) - x).astype(np.int32),) * 2, 0)


@mg.mgpu_kernel(out_shape=lambda n: S((n.shape[0] + 1,), I32), grid=(1,))
def lengths_to_offsets_scalar(lens, offs):
  """Offsets from lengths as a CUDA thread writes them, one scalar at a time in a run-time loop (offs[i + 1] =
  offs[i] + lens[i]), the running total carried as a scalar."""
  run = 0
  offs[0] = 0
  for i in range(lens.shape[0]):
    run = run + lens[i]
    offs[i + 1] = run


case("lengths_to_offsets_scalar_loop", lengths_to_offsets_scalar,
     lambda sd: ((rng_of(sd).integers(0, 50, 100).astype(np.int32),), {}),
     lambda n: np.concatenate([[0], np.cumsum(n)]).astype(np.int32), 0)


def ssd_states_np(states, decay):
  """Mamba-2's state passing: h_c = exp(decay_c) * h_{c-1} + states_c over chunks; (C, N, P) states, (C,) decays."""
  h = np.zeros(states.shape[1:])
  out = np.zeros(states.shape)
  for c in range(states.shape[0]):
    h = np.exp(decay[c]) * h + states[c]
    out[c] = h
  return out.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda st, dc: st, grid=(1,))
def ssd_state_passing(states, decay, out):
  """Mamba-2 (SSD)'s inter-chunk recurrence (the `_state_passing_fwd` Triton kernel): each chunk's (N, P) state
  added to the previous one decayed by a scalar exp(decay[c]) read per chunk."""
  h = ml.zeros(states.shape[1:], jnp.float32)
  for c in range(states.shape[0]):
    h = jnp.exp(decay[c]) * h + states[c]
    out[c] = h


case("ssd_state_passing_scalar_decay", ssd_state_passing,
     lambda sd: ((normal(sd, (8, 16, 64)), -np.abs(normal(sd + 1, (8,)))), {}), ssd_states_np, 1e-5)
