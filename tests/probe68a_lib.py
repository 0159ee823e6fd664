"""Probe 68a's corpus: the pieces its attention kernels share, as a kernel engineer keeps them in a helper module
(@ml.inline helpers: the online softmax's state and step, a query tile and its key and value buffers, a key block's
copies; and dropout's counter-based hash, a plain function that kernels and the jnp references both call)."""
import math

import jax.numpy as jnp

from mgpu_dsl import language as ml

F32, U32 = jnp.float32, jnp.uint32


@ml.inline
def online_step(m, l, acc, s, v, dtype, p_scale=1.0):
  """The online softmax's update by one block of scaled, masked logits s (natural exponentials); p (times
  p_scale, FA3's float8 range) in `dtype` into the tensor cores."""
  m_new = ml.maximum(m, ml.max(s, axis=1))
  alpha = ml.exp(m - m_new)
  p = ml.exp(s - m_new[:, None])
  l = l * alpha + ml.sum(p, axis=1)
  acc = ml.dot((p * p_scale if p_scale != 1.0 else p).astype(dtype), v, acc * alpha[:, None])
  return m_new, l, acc


@ml.inline
def softmax_state(rows, d):
  """(running max at a finite floor, running sum, output accumulator) of `rows` rows of width d."""
  return ml.full((rows,), -1e30, F32), ml.zeros((rows,), F32), ml.zeros((rows, d), F32)


@ml.inline
def q_tile(q, h, i, bq, bkv):
  """SMEM for query tile i of head h of q (heads, seq, d), loaded, and for a key and a value block."""
  d = q.shape[2]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
  return q_s, k_s, v_s


@ml.inline
def kv_block(k, v, h, j, bkv, k_s, v_s):
  """Key and value block j of head h (heads, seq, d) into k_s and v_s."""
  ml.copy(k.at[h, ml.ds(j * bkv, bkv)], k_s)
  ml.copy(v.at[h, ml.ds(j * bkv, bkv)], v_s)


def hash_keep(seed, h, rows, cols, seq, p_drop):
  """A counter-based hash (murmur3's finaliser) of (seed, head, row, col): keep with probability 1 - p_drop."""
  x = (seed + (h * seq + rows) * seq + cols).astype(U32)
  x = x ^ (x >> 16)
  x = x * jnp.uint32(0x85EBCA6B)
  x = x ^ (x >> 13)
  x = x * jnp.uint32(0xC2B2AE35)
  x = x ^ (x >> 16)
  return (x >> 8).astype(F32) * (1.0 / (1 << 24)) >= p_drop


def t5_bucket(rel, num_buckets, max_distance, bidirectional):
  """T5's _relative_position_bucket of rel = key - query (an int32 tensor; a plain function: kernels and the
  references call it)."""
  ret = 0
  n = -rel
  if bidirectional:
    num_buckets //= 2
    ret = ret + jnp.where(n < 0, num_buckets, 0)
    n = jnp.abs(n)
  else:
    n = jnp.maximum(n, 0)
  max_exact = num_buckets // 2
  large = max_exact + (jnp.log(n.astype(F32) / max_exact + 1e-6) / math.log(max_distance / max_exact)
                       * (num_buckets - max_exact)).astype(jnp.int32)
  large = jnp.minimum(large, num_buckets - 1)
  return ret + jnp.where(n < max_exact, n, large)


@ml.inline
def kv_grad_tile(k, v, h, j, bq, bkv, q):
  """A backward's key block j of head h: its K and V loaded, buffers for a query block's q and do, the dK and dV
  accumulators, and the block's key positions as a row."""
  d = q.shape[2]
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  kv_block(k, v, h, j, bkv, k_s, v_s)
  q_s, do_s = ml.smem((bq, d)), ml.smem((bq, d))
  return k_s, v_s, q_s, do_s, ml.zeros((bkv, d), F32), ml.zeros((bkv, d), F32), j * bkv + ml.arange(bkv)[None, :]


@ml.inline
def causal_dkdv_step(q, do, lse, delta, h, i, bq, q_s, do_s, k_s, v_s, cols, scale, dk_acc, dv_acc):
  """Query block i's share of a causal backward's dK and dV: (dk_acc, dv_acc, ds)."""
  ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
  ml.copy(do.at[h, ml.ds(i * bq, bq)], do_s)
  p = ml.exp(ml.dot(q_s, k_s.T) * scale - lse.at[h, ml.ds(i * bq, bq)][...][:, None])
  p = ml.where(cols <= i * bq + ml.arange(bq)[:, None], p, 0.0)
  dv_acc = ml.dot(p.astype(q.dtype).T, do_s, dv_acc)
  ds = p * (ml.dot(do_s, v_s.T) - delta.at[h, ml.ds(i * bq, bq)][...][:, None])
  return ml.dot(ds.astype(q.dtype).T, q_s, dk_acc), dv_acc, ds
