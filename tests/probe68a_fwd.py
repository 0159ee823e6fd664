"""Probe 68a's corpus, part two: forward attention variants as model authors write them (gpt-oss sinks,
StreamingLLM, Gemma 2 softcapping, GQA/MQA, varlen with separate query and key offsets, prefix-LM and document
masks, T5 relative position buckets, dropout by a counter-based hash). Layout (heads, seq, d) unless said."""
import math

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import hash_keep, kv_block, online_step, q_tile, softmax_state, t5_bucket

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32, U32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.uint32


def _out(q, *_, **__):
  return S(q.shape, q.dtype)


def _grid(q, *_, bq, **__):
  return (q.shape[1] // bq, q.shape[0])


# ---------------------------------------------------------------- gpt-oss: a learned sink logit a head
@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def sink_attention(q, k, v, sinks, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr,
                   window: ml.constexpr = 0):
  """softmax over [q @ k.T * scale, sink_h] with the sink column dropped: the sink adds exp(sink - m) to the
  denominator at the end (gpt-oss's reference). Causal, and with `window` a sliding window (gpt-oss's alternating
  layers)."""
  i, h = ml.program_id(0), ml.program_id(1)
  hk = h // (q.shape[0] // k.shape[0])
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  lo = ml.maximum(i * bq - window + 1, 0) // bkv if window else 0
  for j in ml.range(lo, ml.cdiv((i + 1) * bq, bkv), stages=2):
    kv_block(k, v, hk, j, bkv, k_s, v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    keep = cols <= rows
    if window:
      keep = keep & (cols > rows - window)
    s = ml.where(keep, ml.dot(q_s, k_s.T) * scale, -math.inf)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  sink = sinks[h].astype(F32)
  m_fin = ml.maximum(m, sink)
  l = l * ml.exp(m - m_fin) + ml.exp(sink - m_fin)
  acc = acc * ml.exp(m - m_fin)[:, None]
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


# ---------------------------------------------------------------- StreamingLLM: sink tokens + a window
@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def streaming_attention(q, k, v, o, *, bq: ml.constexpr, bkv: ml.constexpr, n_sink: ml.constexpr,
                        window: ml.constexpr, scale: ml.constexpr):
  """Query t sees keys 0..n_sink-1 and t - window + 1 .. t: the first key block, then the window's blocks."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  m, l, acc = softmax_state(bq, d)
  rows = i * bq + ml.arange(bq)[:, None]
  lo = ml.maximum(ml.maximum(i * bq - window + 1, 0) // bkv, 1)      # block 0 (the sinks) is done first
  hi = ml.cdiv((i + 1) * bq, bkv)
  ml.copy(k.at[h, ml.ds(0, bkv)], k_s)
  ml.copy(v.at[h, ml.ds(0, bkv)], v_s)
  cols = ml.arange(bkv)[None, :]
  s = ml.where(((cols < n_sink) | (cols > rows - window)) & (cols <= rows), ml.dot(q_s, k_s.T) * scale, -1e30)
  m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  for j in ml.range(lo, hi):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.where((cols <= rows) & (cols > rows - window), ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


# ---------------------------------------------------------------- Gemma 2 softcapping, forward with lse
def _out_lse(q, *_, **__):
  return S(q.shape, q.dtype), S(q.shape[:2], F32)


@mg.mgpu_kernel(out_shape=_out_lse, grid=_grid)
def softcap_fwd(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, cap: ml.constexpr, scale: ml.constexpr,
                causal: ml.constexpr):
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  n = ml.cdiv((i + 1) * bq, bkv) if causal else k.shape[1] // bkv
  for j in ml.range(n, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    s = cap * jnp.tanh(ml.dot(q_s, k_s.T) * scale / cap)
    if causal:
      s = jnp.where(j * bkv + ml.arange(bkv)[None, :] <= rows, s, -jnp.inf)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)
  lse.at[h, ml.ds(i * bq, bq)][...] = m + jnp.log(l)


# ---------------------------------------------------------------- GQA / MQA, the kv head from program_id
@mg.mgpu_kernel(out_shape=lambda q, k, v, **_: S(q.shape, q.dtype),
                grid=lambda q, k, v, *, bq, **_: (q.shape[1] // (bq // (q.shape[2] // k.shape[2])), k.shape[2], q.shape[0]))
def gqa_group_rows(q, k, v, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """(batch, seq, heads, d) layout; each program one kv head (program_id(1)) and bq // g positions of all g query
  heads sharing it, packed as the bq rows of one tile (position-major), so K and V are read once per group."""
  i, hk, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  g, d = q.shape[2] // k.shape[2], q.shape[3]
  npos = bq // g
  q_t = q.at[b, ml.ds(i * npos, npos), ml.ds(hk * g, g), :][...].reshape(bq, d)
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  pos = i * npos + ml.arange(bq)[:, None] // g
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(ml.cdiv((i + 1) * npos, bkv), stages=2):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    s = ml.where(j * bkv + ml.arange(bkv)[None, :] <= pos, ml.dot(q_t, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[b, ml.ds(i * npos, npos), ml.ds(hk * g, g), :][...] = (acc / l[:, None]).reshape(npos, g, d).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v, **_: S(q.shape, q.dtype),
                grid=lambda q, k, v, *, bq, **_: (q.shape[1] // bq, q.shape[0]))
def mqa_heads(q, k, v, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """MQA: q (heads, seq, d), one shared (seq, d) k and v; the head from program_id(1)."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(k.shape[0] // bkv, stages=3):
    ml.copy(k.at[ml.ds(j * bkv, bkv)], k_s)
    ml.copy(v.at[ml.ds(j * bkv, bkv)], v_s)
    m, l, acc = online_step(m, l, acc, ml.dot(q_s, k_s.T) * scale, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


# ---------------------------------------------------------------- varlen with separate q and k offsets
@mg.mgpu_kernel(out_shape=lambda q, k, v, cu_q, cu_k, **_: S(q.shape, q.dtype),
                grid=lambda q, k, v, cu_q, cu_k, *, max_q, bq, **_: (ml.cdiv(max_q, bq), q.shape[1], cu_q.shape[0] - 1))
def varlen_qk(q, k, v, cu_q, cu_k, o, *, max_q: ml.constexpr, bq: ml.constexpr, bkv: ml.constexpr,
              scale: ml.constexpr):
  """(total, heads, d) packed; sequence b's queries cu_q[b]:cu_q[b+1] against its keys cu_k[b]:cu_k[b+1],
  bottom-right causal (query r sees keys up to r + nk - nq), as flash_attn_varlen_func."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  d = q.shape[2]
  q0, k0 = cu_q[b], cu_k[b]
  nq, nk = cu_q[b + 1] - q0, cu_k[b + 1] - k0
  if i * bq < nq:
    rows = i * bq + ml.arange(bq)
    qt = q.at[ml.ds(q0 + i * bq, bq), h, :].load(mask=(rows < nq)[:, None], other=0.0)
    k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
    m, l, acc = softmax_state(bq, d)
    last = ml.minimum((i + 1) * bq + nk - nq, nk)
    for j in ml.range(ml.cdiv(last, bkv)):
      ml.copy(k.at[ml.ds(k0 + j * bkv, bkv), h, :], k_s)
      ml.copy(v.at[ml.ds(k0 + j * bkv, bkv), h, :], v_s)
      cols = j * bkv + ml.arange(bkv)[None, :]
      keep = (cols < nk) & (cols <= rows[:, None] + nk - nq)
      s = ml.where(keep, ml.dot(qt, k_s.T) * scale, -1e30)
      m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
    out = acc / ml.maximum(l, 1e-30)[:, None]
    o.at[ml.ds(q0 + i * bq, bq), h, :].store(out.astype(o.dtype), mask=(rows < nq)[:, None])


# ---------------------------------------------------------------- prefix-LM and document masks from segment ids
@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def prefix_doc_attention(q, k, v, seg, prefix, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """Packed documents (seg ids per position, nondecreasing) each a prefix-LM: key c is seen by query r when they
  share a document and (c <= r or c is inside the document's prefix: c - doc start < prefix[doc])."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  seg_q = seg.at[ml.ds(i * bq, bq)][...]
  m, l, acc = softmax_state(bq, d)
  rows = i * bq + ml.arange(bq)[:, None]
  for j in ml.range(k.shape[1] // bkv, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    seg_k = seg.at[ml.ds(j * bkv, bkv)][...]
    cols = j * bkv + ml.arange(bkv)[None, :]
    start = ml.searchsorted(seg[...], seg_k)                 # each key's document start
    in_prefix = cols - start[None, :] < prefix[seg_k][None, :]
    keep = (seg_q[:, None] == seg_k[None, :]) & ((cols <= rows) | in_prefix)
    s = ml.where(keep, ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


# ---------------------------------------------------------------- T5 relative position buckets
@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def t5_bias_attention(q, k, v, table, o, *, bq: ml.constexpr, bkv: ml.constexpr, num_buckets: ml.constexpr,
                      max_distance: ml.constexpr, bidirectional: ml.constexpr):
  """T5: no scaling, a learned bias table (num_buckets, heads) indexed by the bucket of key - query."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(k.shape[1] // bkv, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    bucket = t5_bucket(cols - rows, num_buckets, max_distance, bidirectional)
    s = ml.dot(q_s, k_s.T) + table[bucket, h]
    if not bidirectional:
      s = ml.where(cols <= rows, s, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


# ---------------------------------------------------------------- dropout by a counter-based hash
@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def dropout_attention(q, k, v, seed, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr,
                      p_drop: ml.constexpr):
  """Dropout on the normalised probabilities: the row sum l counts every key, the accumulator only kept ones,
  scaled by 1 / (1 - p)."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  sd = seed[0]
  for j in ml.range(k.shape[1] // bkv, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.dot(q_s, k_s.T) * scale
    m_new = ml.maximum(m, ml.max(s, axis=1))
    alpha = ml.exp(m - m_new)
    p = ml.exp(s - m_new[:, None])
    l = l * alpha + ml.sum(p, axis=1)
    keep = hash_keep(sd, h, rows, cols, q.shape[1], p_drop)
    pd = ml.where(keep, p * (1.0 / (1.0 - p_drop)), 0.0)
    acc = ml.dot(pd.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)
