"""Probe 68a's corpus, part four: kernels that fuse more (NSA's selection fused with its gather, gpt-oss's sink
gradient, Triton's dq by atomics, a GQA backward over the group's heads, T5's table from registers, a decode of one
token with GQA)."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import causal_dkdv_step, kv_block, kv_grad_tile, online_step, q_tile, softmax_state

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


@mg.mgpu_kernel(out_shape=lambda q, k, v, kc, **_: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def nsa_fused_select(q, k, v, kc, o, *, bq: ml.constexpr, bs: ml.constexpr, topk: ml.constexpr,
                     scale: ml.constexpr):
  """A query tile scores the compressed keys, picks its top-k blocks (ml.top_k of the tile's summed scores) and
  attends to them: the selected ids are a register vector, indexed by the loop counter."""
  i, h = ml.program_id(0), ml.program_id(1)
  d, nc = q.shape[2], kc.shape[1]
  q_s, k_s, v_s, kc_s = ml.smem((bq, d)), ml.smem((bs, d)), ml.smem((bs, d)), ml.smem((nc, d))
  ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
  ml.copy(kc.at[h], kc_s)
  blocks = ml.arange(nc)
  score = ml.sum(ml.dot(q_s, kc_s.T), axis=0)                          # (nc,)
  score = ml.where(blocks * bs <= i * bq, score, -1e30)
  score = ml.where(blocks == i * bq // bs, 1e30, score)               # the own block always
  vals, ids = ml.top_k(score, topk)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  for n in range(topk):
    blk = ids[n]
    kv_block(k, v, h, blk, bs, k_s, v_s)
    cols = blk * bs + ml.arange(bs)[None, :]
    s = ml.where((cols <= rows) & (vals[n] > -1e29), ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda o, do, lse, sinks: S(sinks.shape, F32), grid=lambda o, do, lse, sinks: (1,))
def sink_grad(o, do, lse, sinks, dsink):
  """gpt-oss's sink gradient: dsink_h = -sum_t p_sink(t) * delta(t), p_sink = exp(sink - lse) (lse with the sink)."""
  for h in range(o.shape[0]):
    delta = ml.sum(o.at[h][...].astype(F32) * do.at[h][...].astype(F32), axis=1)
    p = ml.exp(sinks[h].astype(F32) - lse.at[h][...])
    dsink[h] = -ml.sum(p * delta)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, F32),
                grid=lambda q, k, *_, bkv, **__: (k.shape[1] // bkv, q.shape[0]))
def dq_atomic(q, k, v, do, lse, delta, dq, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """Triton's fused backward's dq: each key block adds its share of every query block's dq atomically."""
  j, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  kv_block(k, v, h, j, bkv, k_s, v_s)
  q_s, do_s = ml.smem((bq, d)), ml.smem((bq, d))
  for i in ml.range(q.shape[1] // bq):
    ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
    ml.copy(do.at[h, ml.ds(i * bq, bq)], do_s)
    p = ml.exp(ml.dot(q_s, k_s.T) * scale - lse.at[h, ml.ds(i * bq, bq)][...][:, None])
    ds = p * (ml.dot(do_s, v_s.T) - delta.at[h, ml.ds(i * bq, bq)][...][:, None])
    ml.atomic_add(dq.at[h, ml.ds(i * bq, bq)], ml.dot(ds.astype(q.dtype), k_s) * scale)


@mg.mgpu_kernel(out_shape=lambda q, k, v, *_, **__: (S(k.shape, F32), S(v.shape, F32)),
                grid=lambda q, k, *_, bkv, **__: (k.shape[1] // bkv, k.shape[0]))
def gqa_dkdv(q, k, v, do, lse, delta, dk, dv, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """dK, dV of kv head hk summed over its g query heads (an outer loop over the group), causal."""
  j, hk = ml.program_id(0), ml.program_id(1)
  g = q.shape[0] // k.shape[0]
  k_s, v_s, q_s, do_s, dk_acc, dv_acc, cols = kv_grad_tile(k, v, hk, j, bq, bkv, q)
  for hh in range(g):
    h = hk * g + hh
    for i in ml.range(j * bkv // bq, q.shape[1] // bq, stages=2):
      dk_acc, dv_acc, _ = causal_dkdv_step(q, do, lse, delta, h, i, bq, q_s, do_s, k_s, v_s, cols, scale, dk_acc,
                                           dv_acc)
  dk.at[hk, ml.ds(j * bkv, bkv)][...] = dk_acc * scale
  dv.at[hk, ml.ds(j * bkv, bkv)][...] = dv_acc


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def t5_register_table(q, k, v, table, o, *, bq: ml.constexpr, bkv: ml.constexpr, num_buckets: ml.constexpr):
  """T5 with the head's bias column read into registers once and gathered per block (a bucket per offset,
  bidirectional, exact buckets only: |offset| clamped to num_buckets // 2 - 1)."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  col = table[...][:, h]                                          # (num_buckets,) in registers
  rows = i * bq + ml.arange(bq)[:, None]
  half = num_buckets // 2
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(k.shape[1] // bkv, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    rel = j * bkv + ml.arange(bkv)[None, :] - rows
    bucket = ml.where(rel > 0, half, 0) + ml.minimum(ml.abs(rel), half - 1)
    s = ml.dot(q_s, k_s.T) + col[bucket]
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v, lens, **_: S(q.shape, q.dtype),
                grid=lambda q, k, v, lens, **_: (k.shape[2], q.shape[0]))
def decode_gqa_one_token(q, k, v, lens, o, *, bkv: ml.constexpr, scale: ml.constexpr):
  """One new token a sequence, q (b, heads, d); cache (b, seq, kv_heads, d) with lengths; the kv head's g query
  heads as g rows (padded to a tile by the compiler)."""
  hk, b = ml.program_id(0), ml.program_id(1)
  g, d = q.shape[1] // k.shape[2], q.shape[2]
  qv = q.at[b, ml.ds(hk * g, g)][...]
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  n = lens[b]
  m, l, acc = softmax_state(g, d)
  for j in ml.range(ml.cdiv(n, bkv), stages=2):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    s = ml.where(j * bkv + ml.arange(bkv)[None, :] < n, ml.dot(qv, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[b, ml.ds(hk * g, g)][...] = (acc / l[:, None]).astype(o.dtype)
