"""Probe 68a's corpus, part eight: DeepSeek-V3.2's sparse attention (the lightning indexer's scores, top-k tokens a
query, attention over the gathered latent rows), MLA's weight absorption in the kernel (q_nope @ W_UK per head),
NSA's compression by a linear layer over each block's flattened keys, and RoPE fused into the attention's prologue."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import kv_block, online_step, softmax_state

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


@mg.mgpu_kernel(out_shape=lambda qi, ki, w, *, topk, **_: S((qi.shape[0], topk), I32),
                grid=lambda qi, *_, bq, **__: (qi.shape[0] // bq,))
def lightning_indexer(qi, ki, w, idx, *, bq: ml.constexpr, topk: ml.constexpr):
  """DSA's indexer: I[t, s] = sum_j w[t, j] * relu(q_j[t] . k[s]) over index heads j (qi (t, heads, d), ki (t, d),
  w (t, heads)), causal, then the top-k keys of each query (-1 where a query has fewer keys)."""
  i = ml.program_id(0)
  k_s = ml.smem(ki.shape)
  ml.copy(ki, k_s)
  rows = i * bq + ml.arange(bq)[:, None]
  score = ml.zeros((bq, ki.shape[0]), F32)
  for j in ml.static_range(qi.shape[1]):
    q_s = ml.smem((bq, qi.shape[2]))
    ml.copy(qi.at[ml.ds(i * bq, bq), j, :], q_s)
    wj = w.at[ml.ds(i * bq, bq), j][...]
    score += wj[:, None] * ml.maximum(ml.dot(q_s, k_s.T), 0.0)
  score = ml.where(ml.arange(ki.shape[0])[None, :] <= rows, score, -1e30)
  vals, ids = ml.top_k(score, topk)
  idx.at[ml.ds(i * bq, bq)][...] = ml.where(vals > -1e29, ids, -1)


@mg.mgpu_kernel(out_shape=lambda q, kv, idx, *, dv, **_: S(q.shape[:2] + (dv,), q.dtype),
                grid=lambda q, kv, idx, **_: (q.shape[0],))
def dsa_sparse_mla(q, kv, idx, o, *, dv: ml.constexpr, bn: ml.constexpr, scale: ml.constexpr):
  """A query token's heads (q (t, h, 576)) against its top-k latent rows (kv (t, 576)) gathered by index
  (idx (t, topk), -1 none), 64 selected rows a step, V the first dv columns; dv in pieces of bn."""
  t = ml.program_id(0)
  h, d, topk = q.shape[1], q.shape[2], idx.shape[1]
  q_s = ml.smem((h, d))
  ml.copy(q.at[t], q_s)
  kv_s = ml.smem((64, d))
  m, l, acc = softmax_state(h, dv)
  for c in range(topk // 64):
    ids = idx.at[t, ml.ds(c * 64, 64)][...]
    kv_s[...] = kv[ml.maximum(ids, 0), :]
    s = ml.where(ids[None, :] >= 0, ml.dot(q_s, kv_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, kv_s.at[:, ml.ds(0, dv)], q.dtype)
  o.at[t][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda qn, wuk: S((qn.shape[0], qn.shape[1], wuk.shape[2]), qn.dtype),
                grid=lambda qn, wuk: (qn.shape[1],))
def mla_absorb(qn, wuk, ql):
  """MLA's weight absorption: ql[:, h] = qn[:, h] @ W_UK[h], (tokens, heads, 128) by (heads, 128, 512), a head a
  program, the 512 output columns a dot each 256."""
  h = ml.program_id(0)
  a_s = ml.smem((qn.shape[0], qn.shape[2]))
  ml.copy(qn.at[:, h, :], a_s)
  w_s = ml.smem(wuk.shape[1:])
  ml.copy(wuk.at[h], w_s)
  ql.at[:, h, :][...] = ml.dot(a_s, w_s).astype(ql.dtype)


@mg.mgpu_kernel(out_shape=lambda k, w, *, bs: S((k.shape[0], k.shape[1] // bs, w.shape[1]), k.dtype),
                grid=lambda k, w, *, bs: (k.shape[0],))
def nsa_compress_mlp(k, w, kc, *, bs: ml.constexpr):
  """NSA's compression by a linear layer: kc[h, c] = flatten(k[h, c*bs:(c+1)*bs]) @ W, W (bs * d, d), the blocks
  read as rows of a (blocks, bs * d) view."""
  h = ml.program_id(0)
  nc, d = k.shape[1] // bs, k.shape[2]
  x = k.at[h][...].reshape(nc, bs * d)
  kc.at[h][...] = jnp.dot(x, w[...], preferred_element_type=F32).astype(kc.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def rope_attention(q, k, v, cos, sin, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """RoPE fused into attention: q's tile and each key block rotated in registers (half-split form) before their
  dots; causal; cos, sin (seq, d // 2)."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  half = d // 2

  def rot(x, c, s):
    x1, x2 = x[:, :half], x[:, half:]
    return ml.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)

  qr = rot(q.at[h, ml.ds(i * bq, bq)][...].astype(F32), cos.at[ml.ds(i * bq, bq)][...],
           sin.at[ml.ds(i * bq, bq)][...]).astype(q.dtype)
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(ml.cdiv((i + 1) * bq, bkv)):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    kr = rot(k_s[...].astype(F32), cos.at[ml.ds(j * bkv, bkv)][...], sin.at[ml.ds(j * bkv, bkv)][...])
    s = ml.where(j * bkv + ml.arange(bkv)[None, :] <= rows, ml.dot(qr, kr.astype(q.dtype).T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)
