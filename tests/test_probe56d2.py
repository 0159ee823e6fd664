"""Probe 56d's corpus: LLM sampling and decoding kernels as vLLM, SGLang and FlashInfer write them in Triton and
Pallas (temperature, soft-capping, penalties from count tables and packed prompt masks, min-p, top-k and top-p by a
sort or a bisection, Gumbel-max and exponential-race sampling from given noise, inverse-CDF sampling, speculative
decoding's accept test and residual, beam-search steps, greedy argmax and log-softmax of a 128k vocabulary in chunks
with a two-stage reduction, int64 and uint32 ids, masked vocabulary tails, per-row early exits). Each runs in
interpret mode against NumPy / jnp and builds for CUDA (probe_util.export). What failed is in test_probe56d.py."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import S, export, rnd

RNG = np.random.default_rng(56)
X = rnd((8, 1000), 0)
T8 = RNG.uniform(0.5, 2.0, 8).astype(np.float32)
P8 = RNG.dirichlet(np.ones(1000), 8).astype(np.float32)
U8 = RNG.uniform(1e-6, 1.0, (8, 1000)).astype(np.float32)


def _softmax(x):
  return np.asarray(jax.nn.softmax(jnp.asarray(x), -1))


@mg.mgpu_kernel(out_shape=lambda x, t: x, grid=lambda x, t: (x.shape[0], ml.cdiv(x.shape[1], 256)))
def temperature(x, t, o, *, cap: ml.constexpr = 30.0):
  r = ml.program_id(0)
  c = ml.program_id(1) * 256 + ml.arange(256)
  m = c < x.shape[1]
  v = ml.load(x.at[r, c], mask=m, other=0.0)
  ml.store(o.at[r, c], cap * jnp.tanh(v / t[r] / cap), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32), grid=lambda x: (x.shape[0],))
def greedy_chunks(x, o, *, BLOCK: ml.constexpr = 256):
  r = ml.program_id(0)
  acc_v = ml.full((BLOCK,), -float("inf"), jnp.float32)
  acc_i = ml.zeros((BLOCK,), jnp.int32)
  for s in range(0, x.shape[1], BLOCK):
    c = s + ml.arange(BLOCK)
    v = ml.load(x.at[r, c], mask=c < x.shape[1], other=-float("inf"))
    upd = v > acc_v
    acc_i = ml.where(upd, c, acc_i)
    acc_v = ml.where(upd, v, acc_v)
  o[r] = ml.min(ml.where(acc_v == ml.max(acc_v), acc_i, 2**31 - 1))


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], ml.cdiv(x.shape[1], 4096)), jnp.float32),
                                     S((x.shape[0], ml.cdiv(x.shape[1], 4096)), jnp.int32)),
                grid=lambda x: (x.shape[0], ml.cdiv(x.shape[1], 4096)))
def argmax_stage1(x, mv, mi):
  r, j = ml.program_id(0), ml.program_id(1)
  c = j * 4096 + ml.arange(4096)
  v = ml.load(x.at[r, c], mask=c < x.shape[1], other=-float("inf"))
  mv[r, j] = ml.max(v)
  mi[r, j] = ml.argmax(v) + j * 4096


@mg.mgpu_kernel(out_shape=lambda mv, mi: S((mv.shape[0],), jnp.int32), grid=lambda mv, mi: (mv.shape[0],))
def argmax_stage2(mv, mi, o):
  r = ml.program_id(0)
  c = ml.arange(64)
  m = c < mv.shape[1]
  v = ml.load(mv.at[r, c], mask=m, other=-float("inf"))
  ids = ml.load(mi.at[r, c], mask=m, other=0)
  o[r] = ids[ml.argmax(v)]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def log_softmax_chunks(x, o, *, BLOCK: ml.constexpr = 256):
  r = ml.program_id(0)
  m_i, l_i = -float("inf"), 0.0
  for s in range(0, x.shape[1], BLOCK):
    c = s + ml.arange(BLOCK)
    v = ml.load(x.at[r, c], mask=c < x.shape[1], other=-float("inf"))
    m_new = ml.maximum(m_i, ml.max(v))
    l_i = l_i * ml.exp(m_i - m_new) + ml.sum(ml.exp(v - m_new))
    m_i = m_new
  lse = m_i + ml.log(l_i)
  for s in range(0, x.shape[1], BLOCK):
    c = s + ml.arange(BLOCK)
    v = ml.load(x.at[r, c], mask=c < x.shape[1], other=0.0)
    ml.store(o.at[r, c], v - lse, mask=c < x.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], ml.cdiv(x.shape[1], 2048)), jnp.float32),) * 2,
                grid=lambda x: (x.shape[0], ml.cdiv(x.shape[1], 2048)))
def lse_partial(x, pm, ps):
  r, j = ml.program_id(0), ml.program_id(1)
  c = j * 2048 + ml.arange(2048)
  v = x.at[r, c].load(mask=c < x.shape[1], other=-float("inf"))
  mx = jnp.max(v)
  pm[r, j] = mx
  ps[r, j] = jnp.sum(jnp.exp(v - mx))


@mg.mgpu_kernel(out_shape=lambda x, pm, ps: x, grid=lambda x, pm, ps: (x.shape[0], ml.cdiv(x.shape[1], 2048)))
def lse_finish(x, pm, ps, o):
  r, j = ml.program_id(0), ml.program_id(1)
  k = ml.arange(128)
  m = pm.at[r, k].load(mask=k < pm.shape[1], other=-float("inf"))
  s = ps.at[r, k].load(mask=k < pm.shape[1], other=0.0)
  mx = jnp.max(m)
  lse = mx + jnp.log(jnp.sum(s * jnp.exp(m - mx)))
  c = j * 2048 + ml.arange(2048)
  v = x.at[r, c].load(mask=c < x.shape[1], other=0.0)
  o.at[r, c].store(v - lse, mask=c < x.shape[1])


@mg.mgpu_kernel(out_shape=lambda x, cnt, p, fp, pp: x, grid=lambda x, cnt, p, fp, pp: (x.shape[0], ml.cdiv(x.shape[1], 256)))
def penalties(x, cnt, p, fp, pp, o):
  r = ml.program_id(0)
  c = ml.program_id(1) * 256 + ml.arange(256)
  m = c < x.shape[1]
  v = x.at[r, c].load(mask=m, other=0.0)
  n = cnt.at[r, c].load(mask=m, other=0)
  v = ml.where(n > 0, ml.where(v > 0, v / p[r], v * p[r]), v)
  v = v - fp[r] * n.astype(jnp.float32) - pp[r] * (n > 0).astype(jnp.float32)
  o.at[r, c].store(v, mask=m)


@mg.mgpu_kernel(out_shape=lambda l, rp, pm, oc: l, grid=lambda l, rp, pm, oc: (l.shape[0], ml.cdiv(l.shape[1], 1024)))
def packed_penalty(logits_ptr, rep_ptr, prompt_mask_ptr, out_counts_ptr, out_ptr, *, BLOCK_SIZE: ml.constexpr = 1024):
  batch_idx, block_idx = ml.program_id(0), ml.program_id(1)
  block = block_idx * BLOCK_SIZE + ml.arange(BLOCK_SIZE)
  mask = block < logits_ptr.shape[1]
  logits = ml.load(logits_ptr.at[batch_idx, block], mask=mask).astype(jnp.float32)
  packed_block = block_idx * BLOCK_SIZE // 32 + ml.arange(BLOCK_SIZE // 32)
  packed_mask = ml.load(prompt_mask_ptr.at[batch_idx, packed_block], mask=packed_block < prompt_mask_ptr.shape[1],
                        other=0)
  prompt_bin_mask = ((packed_mask[:, None] >> ml.arange(32)[None, :]) & 1).astype(jnp.bool_).reshape(BLOCK_SIZE)
  counts = ml.load(out_counts_ptr.at[batch_idx, block], mask=mask, other=0)
  scale = ml.where(prompt_bin_mask | (counts > 0), rep_ptr[batch_idx], 1.0)
  logits *= ml.where(logits > 0, 1.0 / scale, scale)
  ml.store(out_ptr.at[batch_idx, block], logits, mask=mask)


@mg.mgpu_kernel(out_shape=lambda l, mp: l, grid=lambda l, mp: (l.shape[0],), input_output_aliases={0: 0})
def min_p_inplace(logits_ptr, min_p_ptr, out_ptr, *, BLOCK_SIZE: ml.constexpr = 256):
  req_idx = ml.program_id(0)
  vocab_size = logits_ptr.shape[1]
  min_p = min_p_ptr[req_idx]
  if min_p == 0.0:
    return
  max_val = float("-inf")
  for i in range(0, vocab_size, BLOCK_SIZE):
    block = i + ml.arange(BLOCK_SIZE)
    logits = ml.load(logits_ptr.at[req_idx, block], mask=block < vocab_size, other=float("-inf"))
    max_val = ml.max(ml.maximum(logits, max_val))
  threshold = max_val + ml.log(min_p)
  for i in range(0, vocab_size, BLOCK_SIZE):
    block = i + ml.arange(BLOCK_SIZE)
    logits = ml.load(logits_ptr.at[req_idx, block], mask=block < vocab_size, other=float("-inf"))
    ml.store(out_ptr.at[req_idx, block], ml.where(logits < threshold, float("-inf"), logits), mask=block < vocab_size)


@mg.mgpu_kernel(out_shape=lambda x, k: x, grid=lambda x, k: (x.shape[0] // 8,))
def top_k_rows(x, k, o):
  rows = ml.program_id(0) * 8 + ml.arange(8)
  c = ml.arange(1024)
  m = c[None, :] < x.shape[1]
  v = x.at[rows[:, None], c[None, :]].load(mask=m, other=-float("inf"))
  s = jnp.sort(v, axis=-1, descending=True)
  kth = s[jnp.arange(8), k.at[rows].load() - 1]
  o.at[rows[:, None], c[None, :]].store(jnp.where(v < kth[:, None], -jnp.inf, v), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], 16), jnp.float32), S((x.shape[0], 16), jnp.int32)),
                grid=lambda x: (x.shape[0],))
def top_k_long(x, ov, oi, *, BLOCK: ml.constexpr = 1024):
  r = ml.program_id(0)
  bv, bi = ml.full((16,), -float("inf"), jnp.float32), ml.zeros((16,), jnp.int32)
  for s in range(0, x.shape[1], BLOCK):
    c = s + ml.arange(BLOCK)
    cv, ci = jax.lax.top_k(ml.load(x.at[r, c], mask=c < x.shape[1], other=-float("inf")), 16)
    allv, alli = jnp.concatenate([bv, cv]), jnp.concatenate([bi, ci + s])
    bv, j = jax.lax.top_k(allv, 16)
    bi = alli[j]
  ov[r, :] = bv
  oi[r, :] = bi


@mg.mgpu_kernel(out_shape=lambda x, tp: x, grid=lambda x, tp: (x.shape[0],))
def top_p_bisect(x, tp, o, *, ITERS: ml.constexpr = 30):
  r = ml.program_id(0)
  c = ml.arange(1024)
  m = c < x.shape[1]
  v = x.at[r, c].load(mask=m, other=-float("inf"))
  p = ml.softmax(v)
  lo, hi = 0.0, ml.max(p)
  for _ in range(ITERS):
    mid = (lo + hi) * 0.5
    ok = ml.sum(ml.where(p >= mid, p, 0.0)) >= tp[r]
    lo, hi = ml.where(ok, mid, lo), ml.where(ok, hi, mid)
  o.at[r, c].store(ml.where(p >= lo, v, -float("inf")), mask=m)


@mg.mgpu_kernel(out_shape=lambda p, tp: p, grid=lambda p, tp: (p.shape[0],))
def top_p_renorm(p, tp, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  m = c < p.shape[1]
  q = p.at[r, c].load(mask=m, other=0.0)
  s = -jnp.sort(-q)
  cut = jnp.searchsorted(jnp.cumsum(s), tp[r])
  th = s[jnp.minimum(cut, p.shape[1] - 1)]
  q = jnp.where(q >= th, q, 0.0)
  o.at[r, c].store(q / jnp.sum(q), mask=m)


@mg.mgpu_kernel(out_shape=lambda x, u, t: S((x.shape[0],), jnp.int32), grid=lambda x, u, t: (x.shape[0],))
def gumbel_max(x, u, t, o, *, BLOCK: ml.constexpr = 256):
  r = ml.program_id(0)
  temp = t[r]
  best, arg = -float("inf"), 0
  for s in range(0, x.shape[1], BLOCK):
    c = s + ml.arange(BLOCK)
    m = c < x.shape[1]
    g = ml.load(x.at[r, c], mask=m, other=0.0) / temp - ml.log(-ml.log(ml.load(u.at[r, c], mask=m, other=0.5)))
    g = ml.where(m, g, -float("inf"))
    cm, ci = ml.max(g), ml.argmax(g) + s
    arg = ml.where(cm > best, ci, arg)
    best = ml.maximum(best, cm)
  o[r] = arg


@mg.mgpu_kernel(out_shape=lambda p, u: S((p.shape[0],), jnp.int32), grid=lambda p, u: (p.shape[0],))
def exponential_race(p, u, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  m = c < p.shape[1]
  o[r] = jnp.argmax(p.at[r, c].load(mask=m, other=0.0) / -jnp.log(u.at[r, c].load(mask=m, other=0.5)))


@mg.mgpu_kernel(out_shape=lambda p, u: S((p.shape[0],), jnp.int32), grid=lambda p, u: (p.shape[0],))
def inverse_cdf(p, u, o, *, BLOCK: ml.constexpr = 128):
  r = ml.program_id(0)
  target, acc, tok = u[r], 0.0, p.shape[1] - 1
  for s in range(0, p.shape[1], BLOCK):
    c = s + ml.arange(BLOCK)
    cdf = jnp.cumsum(ml.load(p.at[r, c], mask=c < p.shape[1], other=0.0)) + acc
    if cdf[BLOCK - 1] > target:
      tok = s + jnp.sum((cdf <= target).astype(jnp.int32))
      break
    acc = cdf[BLOCK - 1]
  o[r] = jnp.minimum(tok, p.shape[1] - 1)


@mg.mgpu_kernel(out_shape=lambda tp, dp, tok, u, ur: S(tok.shape[:1] + (tok.shape[1] + 1,), jnp.int32),
                grid=lambda tp, dp, tok, u, ur: (tp.shape[0],))
def speculative(tp, dp, tok, u, ur, o):
  b = ml.program_id(0)
  c = ml.arange(64)
  K = tok.shape[1]
  done = False
  for k in range(K + 1):
    o[b, k] = -1
  for k in range(K):
    if not done:
      t = tok[b, k]
      if u[b, k] * dp[b, k, t] < tp[b, k, t]:
        o[b, k] = t
      else:
        cdf = jnp.cumsum(jnp.maximum(tp.at[b, k, c].load() - dp.at[b, k, c].load(), 0.0))
        o[b, k] = jnp.minimum(jnp.sum((cdf <= ur[b] * cdf[-1]).astype(jnp.int32)), 63)
        done = True
  if not done:
    cdf = jnp.cumsum(tp.at[b, K, c].load())
    o[b, K] = jnp.minimum(jnp.sum((cdf <= ur[b] * cdf[-1]).astype(jnp.int32)), 63)


@mg.mgpu_kernel(out_shape=lambda s, lp: (S((s.shape[0], 8), jnp.float32), S((s.shape[0], 8), jnp.int32)),
                grid=lambda s, lp: (s.shape[0],))
def beam_step(s, lp, ov, oi, *, BLOCK: ml.constexpr = 1024):
  b = ml.program_id(0)
  W, V = lp.shape[1], lp.shape[2]
  bv, bi = ml.full((8,), -float("inf"), jnp.float32), ml.zeros((8,), jnp.int32)
  for w in range(W):
    for st in range(0, V, BLOCK):
      c = st + ml.arange(BLOCK)
      cv, ci = jax.lax.top_k(lp.at[b, w, c].load(mask=c < V, other=-float("inf")) + s[b, w], 8)
      av, ai = jnp.concatenate([bv, cv]), jnp.concatenate([bi, ci + st + w * V])
      bv, j = jax.lax.top_k(av, 8)
      bi = ai[j]
  ov[b, :] = bv
  oi[b, :] = bi


@mg.mgpu_kernel(out_shape=lambda x, done: S((x.shape[0],), jnp.int32), grid=lambda x, done: (x.shape[0],))
def greedy_early_exit(x, done, o, *, EOS: ml.constexpr = 2):
  r = ml.program_id(0)
  if done[r]:
    o[r] = EOS
    return
  c = ml.arange(1024)
  o[r] = ml.argmax(x.at[r, c].load(mask=c < x.shape[1], other=-float("inf")))


@mg.mgpu_kernel(out_shape=lambda x, bad: x, grid=lambda x, bad: (x.shape[0],), input_output_aliases={0: 0})
def ban_words(x, bad, o):
  r = ml.program_id(0)
  ml.store(o.at[r, bad.at[r, ml.arange(8)].load()], ml.full((8,), -float("inf"), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda toks: S((toks.shape[0], 1024), jnp.int32), grid=lambda toks: (toks.shape[0],))
def token_counts(toks, cnt):
  r = ml.program_id(0)
  cnt.at[r, :][...] = ml.zeros((1024,), jnp.int32)
  ml.atomic_add(cnt.at[r, toks.at[r, ml.arange(64)].load()], 1)


@mg.mgpu_kernel(out_shape=lambda l, t: S((l.shape[0],), jnp.int32), grid=lambda l, t: (l.shape[0],))
def token_rank(logits_ptr, token_ids_ptr, output_ptr, *, BLOCK_SIZE: ml.constexpr = 256):
  req_idx = ml.program_id(0)
  x = logits_ptr[req_idx, token_ids_ptr[req_idx]]
  n = 0
  for i in range(0, logits_ptr.shape[1], BLOCK_SIZE):
    block = i + ml.arange(BLOCK_SIZE)
    logits = ml.load(logits_ptr.at[req_idx, block], mask=block < logits_ptr.shape[1], other=float("-inf"))
    n += ml.sum((logits > x).astype(jnp.int32))
  output_ptr[req_idx] = n


@mg.mgpu_kernel(out_shape=lambda x, bits: S((x.shape[0],), jnp.int32), grid=lambda x, bits: (x.shape[0],))
def gumbel_bits(x, bits, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  m = c < x.shape[1]
  b = bits.at[r, c].load(mask=m, other=0)
  uf = jnp.maximum(((b >> 9) | 0x3F800000).view(jnp.float32) - 1.0, 1e-7)
  o[r] = jnp.argmax(x.at[r, c].load(mask=m, other=-float("inf")) - jnp.log(-jnp.log(uf)))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.float32), grid=lambda x: (x.shape[0],))
def entropy(x, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  m = c < x.shape[1]
  lp = ml.log_softmax(x.at[r, c].load(mask=m, other=-float("inf")))
  o[r] = -ml.sum(ml.where(m, ml.exp(lp) * lp, 0.0))


@mg.mgpu_kernel(out_shape=lambda x, vl: S((x.shape[0],), jnp.int32), grid=lambda x, vl: (x.shape[0],))
def ragged_argmax(x, vl, o):
  r = ml.program_id(0)
  n = vl[r]
  best, arg = -float("inf"), 0
  for s in range(0, n, 256):
    c = s + ml.arange(256)
    v = ml.load(x.at[r, c], mask=c < n, other=-float("inf"))
    if jnp.max(v) > best:
      best, arg = jnp.max(v), jnp.argmax(v) + s
  o[r] = arg


def _bisect_ref(x, tp):
  p, out = _softmax(x), []
  for i in range(len(x)):
    lo, hi = np.float32(0), p[i].max()
    for _ in range(30):
      mid = (lo + hi) * np.float32(0.5)
      lo, hi = (mid, hi) if p[i][p[i] >= mid].sum() >= tp[i] else (lo, mid)
    out.append(np.where(p[i] >= lo, x[i], -np.inf))
  return np.stack(out)


def _renorm_ref(p, tp):
  out = []
  for i in range(len(p)):
    s = -np.sort(-p[i])
    th = s[min(np.searchsorted(np.cumsum(s), tp[i]), p.shape[1] - 1)]
    q = np.where(p[i] >= th, p[i], 0)
    out.append(q / q.sum())
  return np.stack(out)


def _cdf_ref(p, u):
  out = []
  for i in range(len(p)):
    acc, tok = np.float32(0), p.shape[1] - 1
    for s in range(0, p.shape[1], 128):
      q = np.zeros(128, np.float32)
      q[:min(128, p.shape[1] - s)] = p[i, s:s + 128]
      cdf = np.cumsum(q, dtype=np.float32) + acc
      if cdf[-1] > u[i]:
        tok = s + (cdf <= u[i]).sum()
        break
      acc = cdf[-1]
    out.append(min(tok, p.shape[1] - 1))
  return np.array(out)


def _spec_ref(tp, dp, tok, u, ur):
  B, K = tok.shape
  o = -np.ones((B, K + 1), np.int32)
  for b in range(B):
    for k in range(K):
      t = tok[b, k]
      if u[b, k] * dp[b, k, t] < tp[b, k, t]:
        o[b, k] = t
        continue
      cdf = np.cumsum(np.maximum(tp[b, k] - dp[b, k], 0))
      o[b, k] = min((cdf <= ur[b] * cdf[-1]).sum(), 63)
      break
    else:
      cdf = np.cumsum(tp[b, K])
      o[b, K] = min((cdf <= ur[b] * cdf[-1]).sum(), 63)
  return o


def _cases():
  x_long = rnd((2, 128 * 1024 + 300), 1)
  pm, ps = (np.asarray(a) for a in lse_partial(x_long, interpret=True))
  mv, mi = (np.asarray(a) for a in argmax_stage1(x_long, interpret=True))
  cnt = RNG.integers(0, 3, (8, 1000)).astype(np.int32)
  bits = RNG.uniform(size=(4, 3000)) < 0.05
  padded = np.zeros((4, 96 * 32), bool)
  padded[:, :3000] = bits
  packed = (padded.reshape(4, 96, 32).astype(np.int64) << np.arange(32)).sum(-1).astype(np.uint32).view(np.int32)
  oc = (RNG.integers(0, 3, (4, 3000)) * (RNG.uniform(size=(4, 3000)) < 0.1)).astype(np.int32)
  xl, rp = rnd((4, 3000), 2), RNG.uniform(1.0, 2.0, 4).astype(np.float32)
  mp = np.array([0, 0.1, 0.2, 0, 0.05, 0.3, 0, 0.5], np.float32)
  k8 = RNG.integers(1, 100, 8).astype(np.int32)
  tp8 = RNG.uniform(0.3, 0.95, 8).astype(np.float32)
  K = 3
  tpr = RNG.dirichlet(np.ones(64), (8, K + 1)).astype(np.float32)
  dpr = RNG.dirichlet(np.ones(64), (8, K + 1)).astype(np.float32)
  tok = RNG.integers(0, 64, (8, K)).astype(np.int32)
  uk, ur = RNG.uniform(0, 1, (8, K)).astype(np.float32), RNG.uniform(0, 1, 8).astype(np.float32)
  sc, lpb = rnd((2, 4), 3), rnd((2, 4, 3000), 4)
  bad = np.stack([RNG.choice(1000, 8, replace=False) for _ in range(8)]).astype(np.int32)
  toks = RNG.integers(0, 1024, (8, 64)).astype(np.int32)
  rawbits = RNG.integers(0, 2**32, (8, 1000), dtype=np.uint64).astype(np.uint32)
  vl = RNG.integers(100, 1000, 8).astype(np.int32)
  tid = RNG.integers(0, 1000, 8).astype(np.uint32)
  dn = np.array([True, False] * 4)

  def banned(x, b):
    y = x.copy()
    y[np.arange(8)[:, None], b] = -np.inf
    return y

  def counted(t):
    o = np.zeros((8, 1024), np.int32)
    for i in range(8):
      np.add.at(o[i], t[i], 1)
    return o

  def packed_ref(l, rp, pm_, oc_):
    sc_ = np.where(bits | (oc_ > 0), rp[:, None], 1.0).astype(np.float32)
    return l * np.where(l > 0, np.float32(1.0) / sc_, sc_)

  def min_p_ref(x, mp_):
    thr = x.max(1) + np.log(np.where(mp_ == 0, 1, mp_))
    return np.where(mp_[:, None] == 0, x, np.where(x < thr[:, None], -np.inf, x))

  def top_k_ref(x, k):
    th = -np.sort(-x, 1)[np.arange(len(x)), k - 1]
    return np.where(x < th[:, None], -np.inf, x)

  def gumbel_bits_ref(x, b):
    uf = np.maximum(((b >> 9) | np.uint32(0x3F800000)).view(np.float32) - 1.0, 1e-7)
    return np.argmax(x - np.log(-np.log(uf)), 1)

  return [
      ("temperature_softcap", temperature, [X * 40, T8], lambda x, t: 30 * np.tanh(x / t[:, None] / 30), 1e-5),
      ("greedy_chunks", greedy_chunks, [X], lambda x: np.argmax(x, 1), 0),
      ("argmax_stage1", argmax_stage1, [x_long], lambda x: (mv, mi), 0),
      ("argmax_stage2", argmax_stage2, [mv, mi], lambda a, b: np.argmax(x_long, 1), 0),
      ("log_softmax_chunks", log_softmax_chunks, [X], lambda x: jax.nn.log_softmax(x, -1), 1e-5),
      ("lse_finish_two_stage", lse_finish, [x_long, pm, ps], lambda x, a, b: jax.nn.log_softmax(x, -1), 2e-5),
      ("penalties", penalties, [X, cnt, T8, T8 / 10, T8 / 5],
       lambda x, c, p, f, q: np.where(c > 0, np.where(x > 0, x / p[:, None], x * p[:, None]), x)
       - f[:, None] * c - q[:, None] * (c > 0), 1e-5),
      ("packed_penalty", packed_penalty, [xl, rp, packed, oc], packed_ref, 1e-6),
      ("min_p_inplace", min_p_inplace, [X, mp], min_p_ref, 0),
      ("top_k_rows", top_k_rows, [X, k8], top_k_ref, 0),
      ("top_k_long", top_k_long, [rnd((4, 5000), 5)], lambda x: jax.lax.top_k(x, 16), 0),
      ("top_p_bisect", top_p_bisect, [X, tp8], _bisect_ref, 0),
      ("top_p_renorm", top_p_renorm, [P8, tp8], _renorm_ref, 1e-5),
      ("gumbel_max", gumbel_max, [X, U8, T8], lambda x, u, t: np.argmax(x / t[:, None] - np.log(-np.log(u)), 1), 0),
      ("exponential_race", exponential_race, [P8, U8], lambda p, u: np.argmax(p / -np.log(u), 1), 0),
      ("inverse_cdf", inverse_cdf, [P8, RNG.uniform(0, 0.999, 8).astype(np.float32)], _cdf_ref, 0),
      ("speculative", speculative, [tpr, dpr, tok, uk, ur], _spec_ref, 0),
      ("beam_step", beam_step, [sc, lpb], lambda s, lp: jax.lax.top_k((lp + s[..., None]).reshape(2, -1), 8), 0),
      ("greedy_early_exit", greedy_early_exit, [X, dn], lambda x, d: np.where(d, 2, np.argmax(x, 1)), 0),
      ("ban_words", ban_words, [X, bad], banned, 0),
      ("token_counts", token_counts, [toks], counted, 0),
      ("token_rank_uint32", token_rank, [X, tid], lambda l, t: (l > l[np.arange(8), t][:, None]).sum(1), 0),
      ("gumbel_bits", gumbel_bits, [X, rawbits], gumbel_bits_ref, 0),
      ("entropy", entropy, [X], lambda x: -(_softmax(x) * np.asarray(jax.nn.log_softmax(x, -1))).sum(1), 1e-4),
      ("ragged_argmax", ragged_argmax, [X, vl], lambda x, v: np.array([np.argmax(x[i, :v[i]]) for i in range(8)]), 0),
  ]


CASES = _cases()


@pytest.mark.parametrize("name,kernel,args,ref,tol", CASES, ids=[c[0] for c in CASES])
def test_sampling_kernel_computes_and_builds(name, kernel, args, ref, tol):
  got, want = jax.tree.leaves(kernel(*args, interpret=True)), jax.tree.leaves(ref(*args))
  assert len(got) == len(want)
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)
  export(kernel, *args)


@pytest.mark.gpu
@pytest.mark.parametrize("name,kernel,args,ref,tol", CASES, ids=[c[0] for c in CASES])
def test_gpu_sampling_kernel(name, kernel, args, ref, tol):
  for g, w in zip(jax.tree.leaves(kernel(*args)), jax.tree.leaves(ref(*args))):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=max(tol, 1e-5),
                               atol=max(tol, 1e-5))


_X64 = textwrap.dedent('''
    import sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np, mgpu_dsl as mg
    from mgpu_dsl import language as ml
    sys.path.insert(0, {tests!r})
    from probe_util import export

    @mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), jnp.int64), grid=lambda x: (x.shape[0],))
    def argmax64(x, o):
      r = ml.program_id(0)
      best, arg = -float("inf"), jnp.int64(0)
      for s in range(0, x.shape[1], 256):
        c = s + ml.arange(256)
        v = ml.load(x.at[r, c], mask=c < x.shape[1], other=-float("inf"))
        arg = jnp.where(jnp.max(v) > best, jnp.argmax(v).astype(jnp.int64) + s, arg)
        best = jnp.maximum(jnp.max(v), best)
      o[r] = arg

    @mg.mgpu_kernel(out_shape=lambda lp, ids: jax.ShapeDtypeStruct(ids.shape, lp.dtype), grid=lambda lp, ids: (1,))
    def chosen(lp, ids, o):
      r = ml.arange(8)
      o[...] = lp.at[r, ids.at[r].load()].load()

    x = np.random.default_rng(0).standard_normal((8, 1000)).astype(np.float32)
    ids = np.random.default_rng(1).integers(0, 1000, 8).astype(np.int64)
    got = argmax64(x, interpret=True)
    assert got.dtype == jnp.int64 and (np.asarray(got) == np.argmax(x, 1)).all(), got
    assert (np.asarray(chosen(x, ids, interpret=True)) == x[np.arange(8), ids]).all()
    export(argmax64, x)
    export(chosen, x, ids)
    print("ok")
''')


def test_int64_ids_under_x64(tmp_path):
  """A greedy argmax stored as int64 ids and a gather at int64 token ids, with jax_enable_x64 (its own process)."""
  script = tmp_path / "x64.py"
  script.write_text(_X64.format(tests=os.path.dirname(os.path.abspath(__file__))))
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off", JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
