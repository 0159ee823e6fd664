"""Probe 68a's corpus, part six: shapes and idioms further from examples/attention.py: DeepSeek's prefill (q and k of
head_dim 192 = 128 + 64 rope, v of 128), head_dim 80 and 96, cross-attention at ragged lengths, block=256 with two
warpgroups and sinks, a chunked prefill over a paged prefix then the new tokens causally, a whole-row softmax with
jax.nn.softmax(where=), an einsum for the scores, and the key loop as lax.fori_loop carrying (m, l, acc)."""
import math

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import kv_block, online_step, q_tile, softmax_state

S = jax.ShapeDtypeStruct
F32, BF16, F16, I32 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32


@mg.mgpu_kernel(out_shape=lambda q, k, v, **_: S(q.shape[:2] + v.shape[2:], q.dtype),
                grid=lambda q, k, v, *, bq, **_: (ml.cdiv(q.shape[1], bq), q.shape[0]),
                block=lambda q, k, v, *, bq, **_: 256 if bq == 128 else 128)
def prefill_qk_v_dims(q, k, v, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """q, k (heads, seq, 192), v (heads, seq, 128): causal, any length (partial tiles masked)."""
  i, h = ml.program_id(0), ml.program_id(1)
  t, dqk, dv = q.shape[1], q.shape[2], v.shape[2]
  q_s, k_s, v_s = ml.smem((bq, dqk)), ml.smem((bkv, dqk)), ml.smem((bkv, dv))
  ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, dv)
  for j in ml.range(ml.cdiv(ml.minimum((i + 1) * bq, t), bkv), stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.where((cols <= rows) & (cols < t), ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o_s = ml.smem((bq, dv))
  o_s[...] = (acc / l[:, None]).astype(o.dtype)
  ml.copy(o_s, o.at[h, ml.ds(i * bq, bq)])


@mg.mgpu_kernel(out_shape=lambda q, k, v, **_: S(q.shape, q.dtype),
                grid=lambda q, k, v, *, bq, **_: (ml.cdiv(q.shape[1], bq), q.shape[0]))
def cross_ragged(q, k, v, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """Cross-attention, (heads, seq, d) at lengths no multiple of the tiles (q 100, kv 77), head_dim from the input."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(ml.cdiv(k.shape[1], bkv), stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    s = ml.where(j * bkv + ml.arange(bkv)[None, :] < k.shape[1], ml.dot(q_s, k_s.T) * scale, -math.inf)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  q_s[...] = (acc / l[:, None]).astype(o.dtype)
  ml.copy(q_s, o.at[h, ml.ds(i * bq, bq)])


@mg.mgpu_kernel(out_shape=lambda q, k, v, sinks, **_: S(q.shape, q.dtype),
                grid=lambda q, *_, **__: (q.shape[1] // 128, q.shape[0]), block=256)
def sinks_two_warpgroups(q, k, v, sinks, o, *, bkv: ml.constexpr, scale: ml.constexpr):
  """gpt-oss's sinks with 128-row tiles on two warpgroups, base-2 exponentials with approx=True, the running max
  starting at the sink's logit (the sink folded in up front)."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  c = scale * 1.4426950408889634
  q_s, k_s, v_s = q_tile(q, h, i, 128, bkv)
  rows = i * 128 + ml.arange(128)[:, None]
  m = ml.full((128,), sinks[h] * 1.4426950408889634, F32)
  l = ml.full((128,), 1.0, F32)
  acc = ml.zeros((128, d), F32)
  for j in ml.range(ml.cdiv((i + 1) * 128, bkv), stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    s = ml.where(j * bkv + ml.arange(bkv)[None, :] <= rows, ml.dot(q_s, k_s.T) * c, -math.inf)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    alpha = ml.exp2(m - m_new, approx=True)
    p = ml.exp2(s - m_new[:, None], approx=True)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  q_s[...] = (acc / l[:, None]).astype(o.dtype)
  ml.copy(q_s, o.at[h, ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda q, k, v, kp, vp, tables, plen, **_: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def chunked_prefill(q, k, v, kp, vp, tables, plen, o, *, bq: ml.constexpr, scale: ml.constexpr):
  """A chunk of new tokens (heads, chunk, d) attends to a cached prefix of plen tokens in pages (heads, pages, page,
  d) through a block table, then to the chunk itself causally: two loops, one online softmax."""
  i, h = ml.program_id(0), ml.program_id(1)
  d, page = q.shape[2], kp.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, page)
  n = plen[0]
  m, l, acc = softmax_state(bq, d)
  for j in ml.range(ml.cdiv(n, page), stages=2):
    ml.copy(kp.at[h, tables[j]], k_s)
    ml.copy(vp.at[h, tables[j]], v_s)
    s = ml.where(j * page + ml.arange(page)[None, :] < n, ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  rows = i * bq + ml.arange(bq)[:, None]
  for j in ml.range(ml.cdiv((i + 1) * bq, page), stages=2):
    kv_block(k, v, h, j, page, k_s, v_s)
    s = ml.where(j * page + ml.arange(page)[None, :] <= rows, ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v, valid: S(q.shape, q.dtype), grid=lambda q, k, v, valid: (q.shape[0],))
def whole_row_softmax(q, k, v, valid, o):
  """Short sequences (64 queries, 128 keys) a head: the whole score row in registers, jax.nn.softmax with where= of
  a key padding mask (valid (heads, 128) bool), the scores by jnp.einsum, o by jnp.dot."""
  h = ml.program_id(0)
  qt, kt, vt = q.at[h][...], k.at[h][...], v.at[h][...]
  s = jnp.einsum("qd,kd->qk", qt, kt, preferred_element_type=F32) / math.sqrt(q.shape[2])
  mask = valid.at[h][...][None, :]
  p = jax.nn.softmax(s, axis=-1, where=mask)
  p = jnp.where(mask, p, 0.0)
  o.at[h][...] = jnp.dot(p.astype(v.dtype), vt, preferred_element_type=F32).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v, **_: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def fori_attention(q, k, v, o, *, bq: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """The key loop as Pallas writes it: lax.fori_loop over key blocks carrying (m, l, acc), reads of the refs'
  windows inside (pl.ds's form), non-causal."""
  i, h = ml.program_id(0), ml.program_id(1)
  qt = q.at[h, ml.ds(i * bq, bq)][...]

  def body(j, carry):
    m, l, acc = carry
    kt = k.at[h, ml.ds(j * bkv, bkv)][...]
    vt = v.at[h, ml.ds(j * bkv, bkv)][...]
    s = jnp.dot(qt, kt.T, preferred_element_type=F32) * scale
    m_new = jnp.maximum(m, s.max(axis=1))
    alpha = jnp.exp(m - m_new)
    p = jnp.exp(s - m_new[:, None])
    l = l * alpha + p.sum(axis=1)
    acc = acc * alpha[:, None] + jnp.dot(p.astype(vt.dtype), vt, preferred_element_type=F32)
    return m_new, l, acc

  init = (jnp.full((bq,), -jnp.inf, F32), jnp.zeros((bq,), F32), jnp.zeros((bq, q.shape[2]), F32))
  m, l, acc = jax.lax.fori_loop(0, k.shape[1] // bkv, body, init)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)
