"""Probe 68a's corpus, part seven: quantised and block-sparse attention: FA3's float8 forward (e4m3 q, k, v with
descale factors; p in float8 for p @ v), SageAttention's int8 q @ k.T with per-block scales (int32 accumulation) and a
bfloat16 p @ v, and a block-sparse mask read per block (`if mask[i, j]:` around the copies and dots of a pipelined
loop, BigBird's / FlexAttention's block mask)."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import kv_block, online_step, q_tile, softmax_state

S = jax.ShapeDtypeStruct
F32, BF16, I32, I8, E4M3 = jnp.float32, jnp.bfloat16, jnp.int32, jnp.int8, jnp.float8_e4m3fn


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, BF16),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def fp8_attention(q, k, v, descale, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """q, k, v float8_e4m3 (heads, seq, d) with descales (3,) float32 (q's, k's, v's); p rescaled by 448 into e4m3."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  c = scale * descale[0] * descale[1]
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(k.shape[1] // bkv, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    s = ml.dot(q_s, k_s.T) * c
    m, l, acc = online_step(m, l, acc, s, v_s, E4M3, p_scale=448.0)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc * (descale[2] / 448.0) / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, BF16),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def sage_int8(q, k, v, qs, ks, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """SageAttention: int8 q, k (heads, seq, d) with a float32 scale per block (heads, seq // bq) and (heads, seq //
  bkv); q @ k.T accumulated in int32 and dequantised; v bfloat16."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = ml.smem((bq, d), I8), ml.smem((bkv, d), I8), ml.smem((bkv, d), BF16)
  ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
  qsc = qs[h, i]
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(k.shape[1] // bkv, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    s = ml.dot(q_s, k_s.T).astype(F32) * (qsc * ks[h, j] * scale)
    m, l, acc = online_step(m, l, acc, s, v_s, BF16)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def block_sparse(q, k, v, bmask, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr,
                 stages: ml.constexpr):
  """A (seq // bq, seq // bkv) int32 block mask: key block j is attended by query block i where bmask[i, j] != 0
  (the diagonal always set), skipped otherwise, under a run-time if inside the (pipelined) loop."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(k.shape[1] // bkv, stages=stages):
    if bmask[i, j] != 0:
      kv_block(k, v, h, j, bkv, k_s, v_s)
      s = ml.dot(q_s, k_s.T) * scale
      m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)
