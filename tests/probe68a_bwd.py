"""Probe 68a's corpus, part three: a hand-written flash attention backward as Triton's fused-attention tutorial
writes it (a preprocess kernel for delta = rowsum(o * do), a dk/dv kernel looping over query blocks and a dq kernel
looping over key blocks, causal or not), and Gemma 2's softcapped logits' backward. Layout (heads, seq, d); lse is
the natural-log logsumexp of the scaled (softcapped) logits, (heads, seq)."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import kv_block, kv_grad_tile

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda o, do, **_: S(o.shape[:2], F32), grid=lambda o, do, *, bq, **_: (o.shape[1] // bq, o.shape[0]))
def bwd_preprocess(o, do, delta, *, bq: ml.constexpr):
  i, h = ml.program_id(0), ml.program_id(1)
  ot = o.at[h, ml.ds(i * bq, bq)][...].astype(F32)
  dot_ = do.at[h, ml.ds(i * bq, bq)][...].astype(F32)
  delta.at[h, ml.ds(i * bq, bq)][...] = ml.sum(ot * dot_, axis=1)


@ml.inline
def logits(q_s, k_s, scale, cap):
  """(the logits, d logits / d raw scaled score): softcapped where cap."""
  s = ml.dot(q_s, k_s.T) * scale
  if cap:
    t = ml.tanh(s / cap)
    return cap * t, 1.0 - t * t
  return s, None


@mg.mgpu_kernel(out_shape=lambda q, k, v, do, lse, delta, **_: (S(k.shape, k.dtype), S(v.shape, v.dtype)),
                grid=lambda q, k, *_, bkv, **__: (k.shape[1] // bkv, k.shape[0]))
def bwd_dkdv(q, k, v, do, lse, delta, dk, dv, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr,
             causal: ml.constexpr, cap: ml.constexpr = 0.0):
  """dK and dV of key block j: over the query blocks (from the diagonal on when causal),
  p = exp(s - lse), dv += p.T @ do, dp = do @ v.T, ds = p * (dp - delta), dk += ds.T @ q * scale."""
  j, h = ml.program_id(0), ml.program_id(1)
  k_s, v_s, q_s, do_s, dk_acc, dv_acc, cols = kv_grad_tile(k, v, h, j, bq, bkv, q)
  start = j * bkv // bq if causal else 0
  for i in ml.range(start, q.shape[1] // bq, stages=2):
    ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
    ml.copy(do.at[h, ml.ds(i * bq, bq)], do_s)
    m = lse.at[h, ml.ds(i * bq, bq)][...]
    di = delta.at[h, ml.ds(i * bq, bq)][...]
    s, dcap = logits(q_s, k_s, scale, cap)
    p = ml.exp(s - m[:, None])
    if causal:
      p = ml.where(cols <= i * bq + ml.arange(bq)[:, None], p, 0.0)
    dv_acc = ml.dot(p.astype(q.dtype).T, do_s, dv_acc)
    dp = ml.dot(do_s, v_s.T)
    ds = p * (dp - di[:, None])
    if cap:
      ds = ds * dcap
    dk_acc = ml.dot(ds.astype(q.dtype).T, q_s, dk_acc)
  dk.at[h, ml.ds(j * bkv, bkv)][...] = (dk_acc * scale).astype(dk.dtype)
  dv.at[h, ml.ds(j * bkv, bkv)][...] = dv_acc.astype(dv.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def bwd_dq(q, k, v, do, lse, delta, dq, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr,
           causal: ml.constexpr, cap: ml.constexpr = 0.0):
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, do_s = ml.smem((bq, d)), ml.smem((bq, d))
  ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
  ml.copy(do.at[h, ml.ds(i * bq, bq)], do_s)
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  m = lse.at[h, ml.ds(i * bq, bq)][...]
  di = delta.at[h, ml.ds(i * bq, bq)][...]
  rows = i * bq + ml.arange(bq)[:, None]
  dq_acc = ml.zeros((bq, d), F32)
  n = ml.cdiv((i + 1) * bq, bkv) if causal else k.shape[1] // bkv
  for j in ml.range(n, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    s, dcap = logits(q_s, k_s, scale, cap)
    p = ml.exp(s - m[:, None])
    if causal:
      p = ml.where(j * bkv + ml.arange(bkv)[None, :] <= rows, p, 0.0)
    ds = p * (ml.dot(do_s, v_s.T) - di[:, None])
    if cap:
      ds = ds * dcap
    dq_acc = ml.dot(ds.astype(q.dtype), k_s, dq_acc)
  dq.at[h, ml.ds(i * bq, bq)][...] = (dq_acc * scale).astype(dq.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v, do, m, delta, **_: (S(k.shape, k.dtype), S(v.shape, v.dtype)),
                grid=lambda q, k, *_, bkv, **__: (k.shape[1] // bkv, k.shape[0]))
def triton_dkdv_transposed(q, k, v, do, m, delta, dk, dv, *, bq: ml.constexpr, bkv: ml.constexpr,
                           scale: ml.constexpr, causal: ml.constexpr):
  """Triton's tutorial's _attn_bwd_dkdv as written there, in the transposed orientation: qkT = k @ qT, pT = exp2(qkT
  - m[None, :]) with m the base-2 logsumexp of q * scale * log2(e) (the tutorial's M), dv += pT @ do, dpT = v @ do.T,
  dsT = pT * (dpT - Di[None, :]), dk += dsT @ qT.T; the statistics broadcast along rows."""
  j, h = ml.program_id(0), ml.program_id(1)
  k_s, v_s, q_s, do_s, dk_acc, dv_acc, _ = kv_grad_tile(k, v, h, j, bq, bkv, q)
  c = scale * 1.4426950408889634
  offs_n = j * bkv + ml.arange(bkv)[:, None]
  for i in ml.range(j * bkv // bq if causal else 0, q.shape[1] // bq, stages=2):
    ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
    ml.copy(do.at[h, ml.ds(i * bq, bq)], do_s)
    m_i = m.at[h, ml.ds(i * bq, bq)][...]
    qkT = ml.dot(k_s, q_s.T)
    pT = ml.exp2(qkT * c - m_i[None, :])
    if causal:
      pT = ml.where(i * bq + ml.arange(bq)[None, :] >= offs_n, pT, 0.0)
    dv_acc = ml.dot(pT.astype(q.dtype), do_s, dv_acc)
    dpT = ml.dot(v_s, do_s.T)
    dsT = pT * (dpT - delta.at[h, ml.ds(i * bq, bq)][...][None, :])
    dk_acc = ml.dot(dsT.astype(q.dtype), q_s, dk_acc)
  dk.at[h, ml.ds(j * bkv, bkv)][...] = (dk_acc * scale).astype(dk.dtype)
  dv.at[h, ml.ds(j * bkv, bkv)][...] = dv_acc.astype(dv.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def triton_dq(q, k, v, do, m, delta, dq, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr,
              causal: ml.constexpr):
  """The tutorial's _attn_bwd_dq: kT and vT as transposed views, qk = q @ kT, p = exp2(qk - m[:, None]),
  dp = do @ vT, ds = p * (dp - Di[:, None]), dq += ds @ kT.T; m the base-2 logsumexp."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  do_s = ml.smem((bq, d))
  ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
  ml.copy(do.at[h, ml.ds(i * bq, bq)], do_s)
  m_i = m.at[h, ml.ds(i * bq, bq)][...]
  di = delta.at[h, ml.ds(i * bq, bq)][...]
  c = scale * 1.4426950408889634
  offs_m = i * bq + ml.arange(bq)[:, None]
  dq_acc = ml.zeros((bq, d), F32)
  for j in ml.range(ml.cdiv((i + 1) * bq, bkv) if causal else k.shape[1] // bkv, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    kT, vT = k_s.T, v_s.T
    p = ml.exp2(ml.dot(q_s, kT) * c - m_i[:, None])
    if causal:
      p = ml.where(offs_m >= j * bkv + ml.arange(bkv)[None, :], p, 0.0)
    ds = p * (ml.dot(do_s, vT) - di[:, None])
    dq_acc = ml.dot(ds.astype(q.dtype), kT.T, dq_acc)
  dq.at[h, ml.ds(i * bq, bq)][...] = (dq_acc * scale).astype(dq.dtype)
