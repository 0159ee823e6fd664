"""Probe 67b's corpus, its first half: linear attention kernels (fla's chunked and recurrent linear attention, RetNet's
retention, gated linear attention, cu_seqlens batches, fla's Triton and Pallas-style ports) written as a kernel
engineer ports them, each with a plain reference (a NumPy loop over time or over chunks); probe67b_ssm.py holds the
rest. tests/test_probe67b.py runs them."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32


def f32(*ts):
  return [np.asarray(t, np.float32) for t in ts]


# ------------------------------------------------------------------ chunked causal linear attention (fla chunk_linear_attn)
@ml.inline
def copy_chunk(q, k, v, h, c, q_s, k_s, v_s):
  """Chunk c of head h of q, k and v into q_s, k_s and v_s (a chunk is q_s's rows)."""
  n = q_s.shape[0]
  ml.copy(q.at[h, ml.ds(c * n, n)], q_s)
  ml.copy(k.at[h, ml.ds(c * n, n)], k_s)
  ml.copy(v.at[h, ml.ds(c * n, n)], v_s)


@ml.inline
def la_chunk_step(q, k, v, h, c, q_s, k_s, v_s, st_s, state):
  """One chunk of causal linear attention: (its outputs, the state after it). The chunk is q_s's rows."""
  copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
  i = ml.arange(q_s.shape[0])
  att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T), 0.0)
  st_s[...] = state.astype(q.dtype)
  return ml.dot(q_s, st_s, ml.dot(att.astype(q.dtype), v_s)), ml.dot(k_s.T, v_s, state)


# chunks of C rows, head dims from the inputs: C = 64 at head_dim 64, and C = 128 at head_dim 128 on one warpgroup (the
# (128, 128) state and scores in registers together: a RegisterSpillWarning, as it should)
@mg.mgpu_kernel(out_shape=lambda q, k, v, C: S(v.shape, F32), grid=lambda q, k, v, C: (q.shape[0],))
def la_chunk(q, k, v, o, C: ml.constexpr):
  h = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((C, q.shape[2]), q.dtype), ml.smem((C, k.shape[2]), k.dtype), ml.smem((C, v.shape[2]), v.dtype)
  st_s = ml.smem((k.shape[2], v.shape[2]), q.dtype)
  state = ml.zeros((k.shape[2], v.shape[2]), F32)
  for c in ml.range(q.shape[1] // C):
    out, state = la_chunk_step(q, k, v, h, c, q_s, k_s, v_s, st_s, state)
    o.at[h, ml.ds(c * C, C)][...] = out


def scan_ref(q, k, v, step, s0=None):
  """(o, final states) of o_t = q_t S_t with S_t = step(S_{t-1}, head, t) over each head: the references' loop."""
  q = np.asarray(q, np.float32)
  h, t, dk = q.shape
  dv = v.shape[2]
  o = np.zeros((h, t, dv), np.float32)
  fin = np.zeros((h, dk, dv), np.float32)
  for hh in range(h):
    s = np.zeros((dk, dv), np.float32) if s0 is None else np.asarray(s0[hh], np.float32).copy()
    for tt in range(t):
      s = step(s, hh, tt)
      o[hh, tt] = q[hh, tt] @ s
    fin[hh] = s
  return o, fin


def la_ref(q, k, v, decay=None, s0=None):
  """o_t = q_t S_t, S_t = decay_t * S_{t-1} + k_t v_t^T (decay a scalar or a (dk,) vector a step)."""
  k, v = f32(k, v)

  def step(s, hh, tt):
    if decay is not None:
      d = np.asarray(decay[hh, tt], np.float32)
      s = (d[:, None] if d.ndim else d) * s
    return s + np.outer(k[hh, tt], v[hh, tt])
  return scan_ref(q, k, v, step, s0)


# the same at head_dim 128, chunk 64, with a length no multiple of the chunk (TMA zero-fills, the store is masked)
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def la_chunk_ragged(q, k, v, o):
  h = ml.program_id(0)
  T = q.shape[1]
  q_s, k_s, v_s = ml.smem((64, 128), q.dtype), ml.smem((64, 128), k.dtype), ml.smem((64, 128), v.dtype)
  st_s = ml.smem((128, 128), q.dtype)
  state = ml.zeros((128, 128), F32)
  for c in ml.range(ml.cdiv(T, 64)):
    out, state = la_chunk_step(q, k, v, h, c, q_s, k_s, v_s, st_s, state)
    o.at[h, ml.ds(c * 64, 64)].store(out, mask=(c * 64 + ml.arange(64))[:, None] < T)


# initial state in, final state out, chunk 128 at block=256 (two warpgroups split the rows)
@mg.mgpu_kernel(out_shape=lambda q, k, v, s0: (S(v.shape, F32), S(s0.shape, F32)), grid=lambda q, k, v, s0: (q.shape[0],),
                block=256)
def la_chunk128_states(q, k, v, s0, o, sT):
  h = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((128, 64), q.dtype), ml.smem((128, 64), k.dtype), ml.smem((128, 64), v.dtype)
  st_s = ml.smem((64, 64), q.dtype)
  state = s0.at[h][...]
  for c in ml.range(q.shape[1] // 128):
    out, state = la_chunk_step(q, k, v, h, c, q_s, k_s, v_s, st_s, state)
    o.at[h, ml.ds(c * 128, 128)][...] = out
  sT.at[h][...] = state


# ------------------------------------------------------------------ recurrent (one step a token) forms
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def la_recurrent(q, k, v, o):
  h = ml.program_id(0)
  s = ml.zeros((q.shape[2], v.shape[2]), F32)
  for t in range(q.shape[1]):
    kt = k.at[h, t][...].astype(F32)
    vt = v.at[h, t][...].astype(F32)
    s = s + kt[:, None] * vt[None, :]
    o.at[h, t][...] = ml.sum(q.at[h, t][...].astype(F32)[:, None] * s, axis=0)


# decode: one token, the state read and written in place (fla fused_recurrent with initial/final states)
@mg.mgpu_kernel(out_shape=lambda q, k, v, st: (S(v.shape, F32), st), grid=lambda q, k, v, st: (q.shape[0],),
                input_output_aliases={3: 1})
def la_decode(q, k, v, st, o, st_out):
  h = ml.program_id(0)
  s = st.at[h][...] + k.at[h][...].astype(F32)[:, None] * v.at[h][...].astype(F32)[None, :]
  o.at[h][...] = ml.sum(q.at[h][...].astype(F32)[:, None] * s, axis=0)
  st_out.at[h][...] = s


# RetNet's recurrent retention, per-head gamma = 1 - 2^(-5 - h)
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def retention_recurrent(q, k, v, o):
  h = ml.program_id(0)
  gamma = 1.0 - ml.exp2(-5.0 - h.astype(F32))
  s = ml.zeros((q.shape[2], v.shape[2]), F32)
  for t in range(q.shape[1]):
    s = gamma * s + k.at[h, t][...].astype(F32)[:, None] * v.at[h, t][...].astype(F32)[None, :]
    o.at[h, t][...] = ml.sum(q.at[h, t][...].astype(F32)[:, None] * s, axis=0)


def retnet_gammas(h):
  return (1.0 - 2.0 ** (-5.0 - np.arange(h))).astype(np.float32)


# RetNet's chunkwise retention: decay mask gamma^(i-j) from ml.arange, inter-chunk decay
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def retention_chunk(q, k, v, o):
  h = ml.program_id(0)
  lg = ml.log(1.0 - ml.exp2(-5.0 - h.astype(F32)))
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  qd_s, kd_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), q.dtype)
  i = ml.arange(64)
  dist = (i[:, None] - i[None, :]).astype(F32)
  dmask = ml.where(i[:, None] >= i[None, :], ml.exp(dist * lg), 0.0)
  qdec = ml.exp((i + 1).astype(F32) * lg)           # gamma^(i+1): the state's decay to row i
  kdec = ml.exp((63 - i).astype(F32) * lg)          # gamma^(C-1-j): key j's decay to the chunk's end
  state = ml.zeros((64, 64), F32)
  for c in ml.range(q.shape[1] // 64):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    qd_s[...] = (q_s[...].astype(F32) * qdec[:, None]).astype(q.dtype)
    kd_s[...] = (k_s[...].astype(F32) * kdec[:, None]).astype(k.dtype)
    att = ml.dot(q_s, k_s.T) * dmask
    st_s[...] = state.astype(q.dtype)
    o.at[h, ml.ds(c * 64, 64)][...] = ml.dot(qd_s, st_s, ml.dot(att.astype(q.dtype), v_s))
    state = ml.dot(kd_s.T, v_s, state * ml.exp(64.0 * lg))


def retention_ref(q, k, v):
  h, t = q.shape[:2]
  return la_ref(q, k, v, decay=np.broadcast_to(retnet_gammas(h)[:, None], (h, t)))[0]


# ------------------------------------------------------------------ gated linear attention
# a scalar log-gate a token (fla simple_gla, Mamba-2's SSD as one sequential kernel), cumsum within the chunk
@mg.mgpu_kernel(out_shape=lambda q, k, v, g: S(v.shape, F32), grid=lambda q, k, v, g: (q.shape[0],))
def simple_gla_chunk(q, k, v, g, o):
  h = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  qd_s, kd_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), q.dtype)
  i = ml.arange(64)
  state = ml.zeros((64, 64), F32)
  for c in ml.range(q.shape[1] // 64):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    gc = ml.cumsum(g.at[h, ml.ds(c * 64, 64)][...])
    last = gc[63]
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T) * ml.exp(gc[:, None] - gc[None, :]), 0.0)
    qd_s[...] = (q_s[...].astype(F32) * ml.exp(gc)[:, None]).astype(q.dtype)
    kd_s[...] = (k_s[...].astype(F32) * ml.exp(last - gc)[:, None]).astype(k.dtype)
    st_s[...] = state.astype(q.dtype)
    o.at[h, ml.ds(c * 64, 64)][...] = ml.dot(qd_s, st_s, ml.dot(att.astype(q.dtype), v_s))
    state = ml.dot(kd_s.T, v_s, state * ml.exp(last))


def simple_gla_ref(q, k, v, g):
  return la_ref(q, k, v, decay=np.exp(np.asarray(g, np.float32)))[0]


# per-channel log-gates (fla GLA), head_dim 128 keys, a ragged length
@mg.mgpu_kernel(out_shape=lambda q, k, v, g: S(v.shape, F32), grid=lambda q, k, v, g: (q.shape[0],))
def gla_chunk_ragged(q, k, v, g, o):
  h = ml.program_id(0)
  T = q.shape[1]
  q_s, k_s, v_s = ml.smem((64, 128), q.dtype), ml.smem((64, 128), k.dtype), ml.smem((64, 64), v.dtype)
  qg_s, kg_s, kd_s = ml.smem((64, 128), q.dtype), ml.smem((64, 128), k.dtype), ml.smem((64, 128), k.dtype)
  st_s = ml.smem((128, 64), q.dtype)
  i = ml.arange(64)
  state = ml.zeros((128, 64), F32)
  for c in ml.range(ml.cdiv(T, 64)):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    rows = c * 64 + i
    gt = g.at[h, ml.ds(c * 64, 64), :].load(mask=(rows < T)[:, None], other=0.0)
    gc = ml.cumsum(gt, axis=0)
    qg_s[...] = (q_s[...].astype(F32) * ml.exp(gc)).astype(q.dtype)
    kg_s[...] = (k_s[...].astype(F32) * ml.exp(-gc)).astype(k.dtype)
    last = gc[63]                                   # each channel's decay over the whole chunk
    kd_s[...] = (k_s[...].astype(F32) * ml.exp(last[None, :] - gc)).astype(k.dtype)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(qg_s, kg_s.T), 0.0)
    st_s[...] = state.astype(q.dtype)
    out = ml.dot(qg_s, st_s, ml.dot(att.astype(q.dtype), v_s))
    o.at[h, ml.ds(c * 64, 64)].store(out, mask=rows[:, None] < T)
    state = ml.dot(kd_s.T, v_s, state * ml.exp(last)[:, None])


def gla_ref(q, k, v, g):
  return la_ref(q, k, v, decay=np.exp(np.asarray(g, np.float32)))[0]


# recurrent GLA with per-channel gates, initial and final states
@mg.mgpu_kernel(out_shape=lambda q, k, v, g, s0: (S(v.shape, F32), s0), grid=lambda q, k, v, g, s0: (q.shape[0],))
def gla_recurrent(q, k, v, g, s0, o, sT):
  h = ml.program_id(0)
  s = s0.at[h][...]
  for t in range(q.shape[1]):
    s = ml.exp(g.at[h, t][...])[:, None] * s + k.at[h, t][...].astype(F32)[:, None] * v.at[h, t][...].astype(F32)[None, :]
    o.at[h, t][...] = ml.sum(q.at[h, t][...].astype(F32)[:, None] * s, axis=0)
  sT.at[h][...] = s


# ------------------------------------------------------------------ varlen (cu_seqlens) linear attention
# recurrent over each packed sequence, q/k/v (total, H, D), final states (B, H, D, D)
@mg.mgpu_kernel(out_shape=lambda q, k, v, cu: (S(v.shape, F32), S((cu.shape[0] - 1, q.shape[1], q.shape[2], v.shape[2]), F32)),
                grid=lambda q, k, v, cu: (cu.shape[0] - 1, q.shape[1]))
def la_recurrent_varlen(q, k, v, cu, o, sT):
  b, h = ml.program_id(0), ml.program_id(1)
  s = ml.zeros((q.shape[2], v.shape[2]), F32)
  for t in range(cu[b], cu[b + 1]):
    s = s + k.at[t, h][...].astype(F32)[:, None] * v.at[t, h][...].astype(F32)[None, :]
    o.at[t, h][...] = ml.sum(q.at[t, h][...].astype(F32)[:, None] * s, axis=0)
  sT.at[b, h][...] = s


def varlen_ref(q, k, v, cu, decay=None):
  q, k, v = f32(q, k, v)
  cu = np.asarray(cu)
  o = np.zeros(v.shape, np.float32)
  fin = np.zeros((len(cu) - 1, q.shape[1], q.shape[2], v.shape[2]), np.float32)
  for bb in range(len(cu) - 1):
    sl = slice(cu[bb], cu[bb + 1])
    tr = lambda t: np.swapaxes(t[sl], 0, 1)
    oo, ff = la_ref(tr(q), tr(k), tr(v), decay=None if decay is None else np.swapaxes(np.asarray(decay)[sl], 0, 1))
    o[sl] = np.swapaxes(oo, 0, 1)
    fin[bb] = ff
  return o, fin


# chunked over each packed sequence: chunks start at cu[b], the last one masked (rows of the next sequence
# loaded as zeros), a scalar gate per token and head (simple GLA)
@mg.mgpu_kernel(out_shape=lambda q, k, v, g, cu: S(v.shape, F32), grid=lambda q, k, v, g, cu: (cu.shape[0] - 1, q.shape[1]))
def gla_chunk_varlen(q, k, v, g, cu, o):
  b, h = ml.program_id(0), ml.program_id(1)
  lo, hi = cu[b], cu[b + 1]
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  qd_s, kd_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), q.dtype)
  i, d = ml.arange(64), ml.arange(64)
  state = ml.zeros((64, 64), F32)
  for t0 in range(lo, hi, 64):
    rows = t0 + i
    m = rows[:, None] < hi
    q_s[...] = ml.load(q.at[rows[:, None], h, d[None, :]], mask=m, other=0.0)
    k_s[...] = ml.load(k.at[rows[:, None], h, d[None, :]], mask=m, other=0.0)
    v_s[...] = ml.load(v.at[rows[:, None], h, d[None, :]], mask=m, other=0.0)
    gc = ml.cumsum(ml.load(g.at[rows, h], mask=rows < hi, other=0.0))
    last = gc[63]
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T) * ml.exp(gc[:, None] - gc[None, :]), 0.0)
    qd_s[...] = (q_s[...].astype(F32) * ml.exp(gc)[:, None]).astype(q.dtype)
    kd_s[...] = (k_s[...].astype(F32) * ml.exp(last - gc)[:, None]).astype(k.dtype)
    st_s[...] = state.astype(q.dtype)
    out = ml.dot(qd_s, st_s, ml.dot(att.astype(q.dtype), v_s))
    ml.store(o.at[rows[:, None], h, d[None, :]], out, mask=m)
    state = ml.dot(kd_s.T, v_s, state * ml.exp(last))


# ------------------------------------------------------------------ fla's Triton, ported line by line
# fused_chunk_linear_attn_fwd_kernel: block pointers, register tl.dot operands, K loaded transposed, the state
# converted for the dot, a final state stored; grid (V // BV, K // BK, B * H)
@mg.mgpu_kernel(out_shape=lambda q, k, v, scale, BT, BK, BV: (S((q.shape[2] // BK,) + v.shape, F32),
                                                               S((q.shape[0], q.shape[2], v.shape[2]), F32)),
                grid=lambda q, k, v, scale, BT, BK, BV: (v.shape[2] // BV, q.shape[2] // BK, q.shape[0]))
def fla_fused_chunk(q, k, v, o, ht, scale: ml.constexpr, BT: ml.constexpr, BK: ml.constexpr, BV: ml.constexpr):
  i_v, i_k, i_bh = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  T, K, V = q.shape[1], q.shape[2], v.shape[2]
  o_i = ml.arange(0, BT)
  m_s = o_i[:, None] >= o_i[None, :]
  b_h = ml.zeros([BK, BV], dtype=F32)
  p_q = ml.make_block_ptr(q.at[i_bh], (T, K), (K, 1), (0, i_k * BK), (BT, BK), (1, 0))
  p_k = ml.make_block_ptr(k.at[i_bh], (K, T), (1, K), (i_k * BK, 0), (BK, BT), (0, 1))
  p_v = ml.make_block_ptr(v.at[i_bh], (T, V), (V, 1), (0, i_v * BV), (BT, BV), (1, 0))
  p_o = ml.make_block_ptr(o.at[i_k, i_bh], (T, V), (V, 1), (0, i_v * BV), (BT, BV), (1, 0))   # o + (i_bh + i_k*B*H) * s_v_h
  for i in range(0, ml.cdiv(T, BT)):
    b_k = ml.load(p_k, boundary_check=(0, 1))
    b_v = ml.load(p_v, boundary_check=(0, 1))
    b_q = ml.load(p_q, boundary_check=(0, 1))
    b_q = (b_q * scale).to(b_k.dtype)
    b_s = ml.dot(b_q, b_k, allow_tf32=False)
    b_s = ml.where(m_s, b_s, 0)
    b_o = ml.dot(b_s.to(b_q.dtype), b_v, allow_tf32=False)
    b_o += ml.dot(b_q, b_h.to(b_q.dtype), allow_tf32=False)
    b_h = b_h + ml.dot(b_k, b_v, allow_tf32=False)
    ml.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))
    p_q = ml.advance(p_q, (BT, 0))
    p_k = ml.advance(p_k, (0, BT))
    p_v = ml.advance(p_v, (BT, 0))
    p_o = ml.advance(p_o, (BT, 0))
  p_final = ml.make_block_ptr(ht.at[i_bh], (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0))
  ml.store(p_final, b_h.to(p_final.dtype.element_ty), boundary_check=(0, 1))


# fla's chunk form split in two: chunk_fwd_h stores the state entering each chunk (bf16, (BH, NT, K, V)) with exp2
# log2-gates (fla's chunk_simple_gla with use_exp2), chunk_fwd_o computes each chunk's outputs in parallel from it
@mg.mgpu_kernel(out_shape=lambda k, v, g: S((k.shape[0], ml.cdiv(k.shape[1], 64), k.shape[2], v.shape[2]), k.dtype),
                grid=lambda k, v, g: (k.shape[0],))
def chunk_fwd_h(k, v, g, hs):
  bh = ml.program_id(0)
  T = k.shape[1]
  k_s, v_s, kd_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), k.dtype)
  i = ml.arange(64)
  b_h = ml.zeros((64, 64), F32)
  for c in ml.range(ml.cdiv(T, 64)):
    hs.at[bh, c][...] = b_h.astype(hs.dtype)
    ml.copy(k.at[bh, ml.ds(c * 64, 64)], k_s)
    ml.copy(v.at[bh, ml.ds(c * 64, 64)], v_s)
    gc = ml.cumsum(ml.load(g.at[bh, c * 64 + i], mask=c * 64 + i < T, other=0.0))
    g_last = gc[63]
    kd_s[...] = (k_s[...].astype(F32) * ml.exp2(g_last - gc)[:, None]).astype(k.dtype)
    b_h = ml.dot(kd_s.T, v_s, b_h * ml.exp2(g_last))


@mg.mgpu_kernel(out_shape=lambda q, k, v, g, hs: S(v.shape, F32), grid=lambda q, k, v, g, hs: (ml.cdiv(q.shape[1], 64), q.shape[0]))
def chunk_fwd_o(q, k, v, g, hs, o):
  c, bh = ml.program_id(0), ml.program_id(1)
  T = q.shape[1]
  q_s, k_s, v_s, h_s = (ml.smem((64, 64), t.dtype) for t in (q, k, v, hs))
  ml.copy(q.at[bh, ml.ds(c * 64, 64)], q_s)
  ml.copy(k.at[bh, ml.ds(c * 64, 64)], k_s)
  ml.copy(v.at[bh, ml.ds(c * 64, 64)], v_s)
  ml.copy(hs.at[bh, c], h_s)
  i = ml.arange(64)
  gc = ml.cumsum(ml.load(g.at[bh, c * 64 + i], mask=c * 64 + i < T, other=0.0))
  b_o = ml.dot(q_s, h_s) * ml.exp2(gc)[:, None]
  b_s = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T) * ml.exp2(gc[:, None] - gc[None, :]), 0.0)
  b_o = ml.dot(b_s.astype(v.dtype), v_s, b_o)
  ml.store(o.at[bh, ml.ds(c * 64, 64)], b_o, mask=(c * 64 + i)[:, None] < T)


def chunk_two(q, k, v, g, interpret=False):
  hs = chunk_fwd_h(k, v, g, interpret=interpret)
  return chunk_fwd_o(q, k, v, g, hs, interpret=interpret)


# ------------------------------------------------------------------ Pallas-style: jnp on register values, lax.fori_loop
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def la_pallas(q_ref, k_ref, v_ref, o_ref):
  h = ml.program_id(0)
  mask = jnp.tril(jnp.ones((64, 64), jnp.bool_))

  def body(c, state):
    qc = q_ref[h, ml.ds(c * 64, 64), :]
    kc = k_ref[h, ml.ds(c * 64, 64), :]
    vc = v_ref[h, ml.ds(c * 64, 64), :]
    s = jnp.where(mask, jnp.dot(qc, kc.T, preferred_element_type=jnp.float32), 0.0)
    out = jnp.dot(s.astype(qc.dtype), vc, preferred_element_type=jnp.float32)
    out = out + jnp.dot(qc, state.astype(qc.dtype), preferred_element_type=jnp.float32)
    o_ref[h, ml.ds(c * 64, 64), :] = out
    return state + jnp.dot(kc.T, vc, preferred_element_type=jnp.float32)

  jax.lax.fori_loop(0, q_ref.shape[1] // 64, body, jnp.zeros((64, 64), jnp.float32))


# RetNet's parallel form over a 128-token sequence: (q k^T * D) v with D[i, j] = gamma^(i - j), rows normalised by
# their absolute sums as RetNet's implementation does
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def retention_parallel(q_ref, k_ref, v_ref, o_ref):
  h = ml.program_id(0)
  gamma = 1.0 - jnp.exp2(-5.0 - h.astype(jnp.float32))
  n = jnp.arange(128)
  diff = (n[:, None] - n[None, :]).astype(jnp.float32)
  d = jnp.where(diff >= 0, gamma ** diff, 0.0)
  d = d / jnp.sqrt(jnp.sum(d, axis=1, keepdims=True))
  s = jnp.dot(q_ref[h], k_ref[h].T, preferred_element_type=jnp.float32) * d
  s = s / jnp.maximum(jnp.abs(jnp.sum(s, axis=1, keepdims=True)), 1.0)
  o_ref[h] = jnp.dot(s.astype(v_ref.dtype), v_ref[h], preferred_element_type=jnp.float32)


def retention_parallel_ref(q, k, v):
  q, k, v = f32(q, k, v)
  out = np.zeros(v.shape, np.float32)
  for h, gamma in enumerate(retnet_gammas(q.shape[0])):
    n = np.arange(q.shape[1])
    diff = (n[:, None] - n[None, :]).astype(np.float32)
    d = np.where(diff >= 0, np.float32(gamma) ** diff, 0.0)
    d = d / np.sqrt(d.sum(1, keepdims=True))
    s = q[h] @ k[h].T * d
    s = s / np.maximum(np.abs(s.sum(1, keepdims=True)), 1.0)
    out[h] = s @ v[h]
  return out


# Mamba-2's decode step (selective_state_update): state (H, P, N) in place, dt softplus, a scalar A a head
@mg.mgpu_kernel(out_shape=lambda st, x, dt, a, b, c, d: (S(x.shape, F32), st), grid=lambda st, x, dt, a, b, c, d: (x.shape[0],),
                input_output_aliases={0: 1})
def mamba2_state_update(st, x, dt, a, b, c, d, y, st_out):
  h = ml.program_id(0)
  delta = jax.nn.softplus(dt[h])
  xh = x.at[h][...].astype(F32)
  s = st.at[h][...] * jnp.exp(delta * a[h]) + (delta * xh)[:, None] * b[...].astype(F32)[None, :]
  st_out.at[h][...] = s
  y.at[h][...] = jnp.sum(s * c[...].astype(F32)[None, :], axis=-1) + d[h] * xh


def mamba2_update_ref(st, x, dt, a, b, c, d):
  st, x, dt, a, b, c, d = f32(st, x, dt, a, b, c, d)
  delta = np.logaddexp(0, dt)
  s = st * np.exp(delta * a)[:, None, None] + (delta[:, None] * x)[:, :, None] * b[None, None, :]
  return (s * c[None, None, :]).sum(-1) + d[:, None] * x, s


# two heads a program (grouped values sharing keys): the state a (2, 64, 64) tensor, a scan with lax.fori_loop
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (v.shape[0] // 2,))
def la_recurrent_two_heads(q, k, v, o):
  g = ml.program_id(0)

  def step(t, s):
    kt = k.at[g, t][...].astype(F32)
    vt = v.at[ml.ds(2 * g, 2), t][...].astype(F32)                   # (2, dv)
    s = s + kt[None, :, None] * vt[:, None, :]
    o.at[ml.ds(2 * g, 2), t][...] = jnp.sum(q.at[g, t][...].astype(F32)[None, :, None] * s, axis=1)
    return s

  jax.lax.fori_loop(0, q.shape[1], step, jnp.zeros((2, q.shape[2], v.shape[2]), F32))


def two_heads_ref(q, k, v):
  rep = lambda t: np.repeat(np.asarray(t, np.float32), 2, axis=0)
  return la_ref(rep(q), rep(k), v)[0]
