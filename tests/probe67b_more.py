"""Probe 67b's corpus, its third part: pipelined chunk loads under a carried state, decode steps with states updated
in place (gated delta rule, causal_conv1d_update), a reversed cumsum, a scan over a pipelined buffer's rows in a
lax.fori_loop, cu_seqlens chunks copied by TMA, Mamba-2's SSD fused at chunk 128 on two warpgroups, fla's key-split
outputs added by atomics, and GLA written with jnp.einsum. tests/probe67b_cases.py gives their inputs and references."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe67b_kernels import F32, S, copy_chunk, la_chunk_step

# pipelined chunk loads into whole buffers, the state a dot accumulator carried
@mg.mgpu_kernel(out_shape=lambda q, k, v, WS: S(v.shape, F32), grid=lambda q, k, v, WS: (q.shape[0],))
def la_pipelined(q, k, v, o, WS: ml.constexpr):
  h = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  st_s = ml.smem((64, 64), q.dtype)
  state = ml.zeros((64, 64), F32)
  for c in ml.range(q.shape[1] // 64, stages=2, warp_specialize=WS):     # WS: a producer warpgroup issues the loads
    out, state = la_chunk_step(q, k, v, h, c, q_s, k_s, v_s, st_s, state)     # its copies lead the body: pipelined
    o.at[h, ml.ds(c * 64, 64)][...] = out


# gated delta decode with a bf16 state in memory, updated in place
@mg.mgpu_kernel(out_shape=lambda q, k, v, beta, g, st: (S(v.shape, F32), st), grid=lambda q, k, v, beta, g, st: (q.shape[0],),
                input_output_aliases={5: 1})
def gdn_decode(q, k, v, beta, g, st, o, st_out):
  h = ml.program_id(0)
  kt = k.at[h][...].astype(F32)
  kt = kt / jnp.linalg.norm(kt)
  s = st.at[h][...].astype(F32) * jnp.exp(g[h])
  v_new = v.at[h][...].astype(F32) - kt @ s
  s = s + beta[h] * jnp.outer(kt, v_new)
  o.at[h][...] = q.at[h][...].astype(F32) @ s
  st_out.at[h][...] = s.astype(st_out.dtype)

# causal_conv1d_update: conv_state (B, D, 3), x (B, D), w (D, 4)
@mg.mgpu_kernel(out_shape=lambda x, cs, w: (S(x.shape, F32), cs), grid=lambda x, cs, w: (x.shape[0],),
                input_output_aliases={1: 1})
def conv1d_update(x, cs, w, out, cs_out):
  b = ml.program_id(0)
  xt = x.at[b][...].astype(F32)
  win = jnp.concatenate([cs.at[b][...].astype(F32), xt[:, None]], axis=1)     # (D, 4)
  acc = jnp.sum(win * w[...], axis=1)
  out.at[b][...] = acc * jax.nn.sigmoid(acc)
  cs_out.at[b][...] = win[:, 1:].astype(cs_out.dtype)

# reverse cumsum: GLA's backward gate gradient dg = reverse cumsum of (q*dq - k*dk)
@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, F32), grid=lambda a, b: (a.shape[0],))
def rev_cumsum(a, b, out):
  h = ml.program_id(0)
  x = a.at[h][...] - b.at[h][...]
  out.at[h][...] = ml.cumsum(x, axis=0, reverse=True) + jnp.cumsum(x[::-1], axis=0)[::-1]

# pipelined buffer rows read Pallas-style x_s[r] inside a lax.fori_loop inside the pipelined loop
@mg.mgpu_kernel(out_shape=lambda x, a: S(x.shape, F32), grid=lambda x, a: (x.shape[1] // 128,))
def ema_scan_buffered(x, a, y):
  cols = ml.ds(ml.program_id(0) * 128, 128)
  x_s = ml.smem((64, 128), x.dtype)
  av = a.at[cols][...]
  h = ml.zeros((128,), F32)
  for blk in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(blk * 64, 64), cols], x_s)
    def body(r, h):
      h = av * h + x_s[r].astype(F32)
      y.at[blk * 64 + r, cols][...] = h
      return h
    h = jax.lax.fori_loop(0, 64, body, h)

# varlen chunked with TMA copies at the sequences' own offsets, rows past the end zeroed in registers
@mg.mgpu_kernel(out_shape=lambda q, k, v, cu: S(v.shape, F32), grid=lambda q, k, v, cu: (cu.shape[0] - 1,))
def la_varlen_tma(q, k, v, cu, o):
  b = ml.program_id(0)
  lo, hi = cu[b], cu[b + 1]
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  km_s, vm_s, st_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), q.dtype)
  i = ml.arange(64)
  state = ml.zeros((64, 64), F32)
  for t0 in range(lo, hi, 64):
    ml.copy(q.at[ml.ds(t0, 64)], q_s)
    ml.copy(k.at[ml.ds(t0, 64)], k_s)
    ml.copy(v.at[ml.ds(t0, 64)], v_s)
    live = (t0 + i < hi)[:, None]
    km_s[...] = ml.where(live, k_s[...], 0.0)
    vm_s[...] = ml.where(live, v_s[...], 0.0)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, km_s.T), 0.0)
    st_s[...] = state.astype(q.dtype)
    o.at[ml.ds(t0, 64)].store(ml.dot(q_s, st_s, ml.dot(att.astype(q.dtype), vm_s)), mask=live)
    state = ml.dot(km_s.T, vm_s, state)


# Mamba-2 SSD fused at chunk 128, block=256, state (N=128, P=64) carried, jnp segsum with -inf, ngroups
@mg.mgpu_kernel(out_shape=lambda x, a, b, c: S(x.shape, F32), grid=lambda x, a, b, c: (x.shape[0],), block=256)
def ssd_fused128(x, a, b, c, y):
  h = ml.program_id(0)
  g = h // (x.shape[0] // b.shape[0])            # B and C shared by the heads of a group (ngroups)
  x_s, b_s, c_s = ml.smem((128, 64), x.dtype), ml.smem((128, 128), b.dtype), ml.smem((128, 128), c.dtype)
  bd_s, st_s = ml.smem((128, 128), b.dtype), ml.smem((128, 64), x.dtype)
  state = jnp.zeros((128, 64), jnp.float32)
  i = jnp.arange(128)
  for ch in ml.range(x.shape[1] // 128):
    ml.copy(x.at[h, ml.ds(ch * 128, 128)], x_s)
    ml.copy(b.at[g, ml.ds(ch * 128, 128)], b_s)
    ml.copy(c.at[g, ml.ds(ch * 128, 128)], c_s)
    cs = jnp.cumsum(a.at[h, ml.ds(ch * 128, 128)][...])
    seg = jnp.where(i[:, None] >= i[None, :], cs[:, None] - cs[None, :], -jnp.inf)
    l = jnp.exp(seg)
    scores = ml.dot(c_s, b_s.T) * l
    st_s[...] = state.astype(x.dtype)
    y_off = jnp.exp(cs)[:, None] * ml.dot(c_s, st_s)
    y.at[h, ml.ds(ch * 128, 128)][...] = ml.dot(scores.astype(x.dtype), x_s, y_off)
    bd_s[...] = (b_s[...].astype(jnp.float32) * jnp.exp(cs[-1] - cs)[:, None]).astype(b.dtype)
    state = ml.dot(bd_s.T, x_s, state * jnp.exp(cs[-1]))

# fla NK split with atomic adds of each key block's share, ragged T
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[2] // 64, q.shape[0]))
def la_nk_atomic(q, k, v, o):
  i_k, bh = ml.program_id(0), ml.program_id(1)
  T = q.shape[1]
  q_s, k_s, v_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), q.dtype)
  i = ml.arange(64)
  state = ml.zeros((64, 64), F32)
  for c in ml.range(ml.cdiv(T, 64)):
    ml.copy(q.at[bh, ml.ds(c * 64, 64), ml.ds(i_k * 64, 64)], q_s)
    ml.copy(k.at[bh, ml.ds(c * 64, 64), ml.ds(i_k * 64, 64)], k_s)
    ml.copy(v.at[bh, ml.ds(c * 64, 64)], v_s)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T), 0.0)
    st_s[...] = state.astype(q.dtype)
    rows = c * 64 + i
    ml.atomic_add(o.at[bh, rows[:, None], i[None, :]], ml.dot(q_s, st_s, ml.dot(att.astype(q.dtype), v_s)), mask=rows[:, None] < T)
    state = ml.dot(k_s.T, v_s, state)

# Pallas style chunk with einsum for the state update and jnp.tril
@mg.mgpu_kernel(out_shape=lambda q, k, v, g: S(v.shape, F32), grid=lambda q, k, v, g: (q.shape[0],))
def gla_einsum(q_ref, k_ref, v_ref, g_ref, o_ref):
  h = ml.program_id(0)
  def body(c, state):
    sl = ml.ds(c * 64, 64)
    qc, kc, vc = q_ref[h, sl, :], k_ref[h, sl, :], v_ref[h, sl, :]
    gc = jnp.cumsum(g_ref[h, sl])
    s = jnp.einsum("id,jd->ij", qc, kc, preferred_element_type=jnp.float32)
    s = jnp.tril(s * jnp.exp(gc[:, None] - gc[None, :]))
    o = jnp.einsum("ij,jd->id", s.astype(vc.dtype), vc, preferred_element_type=jnp.float32)
    o = o + jnp.exp(gc)[:, None] * jnp.einsum("id,de->ie", qc, state.astype(qc.dtype), preferred_element_type=jnp.float32)
    o_ref[h, sl, :] = o
    kd = (kc.astype(jnp.float32) * jnp.exp(gc[-1] - gc)[:, None]).astype(kc.dtype)
    return state * jnp.exp(gc[-1]) + jnp.einsum("jd,je->de", kd, vc, preferred_element_type=jnp.float32)
  jax.lax.fori_loop(0, q_ref.shape[1] // 64, body, jnp.zeros((64, 64), jnp.float32))


# float32 inputs (TF32 dots) as fla runs them in float32: the state update's A is k_s.T and the output's B st_s is
# stored (k, n), both transposed once by the compiler (MG501 until probe 67b); att is a float32 register A
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def la_f32(q, k, v, o):
  h = ml.program_id(0)
  q_s, k_s, v_s, st_s = ml.smem((64, 64), F32), ml.smem((64, 64), F32), ml.smem((64, 64), F32), ml.smem((64, 64), F32)
  state = ml.zeros((64, 64), F32)
  i = ml.arange(64)
  for c in ml.range(q.shape[1] // 64):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T), 0.0)
    st_s[...] = state
    o.at[h, ml.ds(c * 64, 64)][...] = ml.dot(q_s, st_s, ml.dot(att, v_s))
    state = ml.dot(k_s.T, v_s, state)


# fla's head-last layout (B, T, H, K): windows q.at[b, ml.ds(c*64, 64), h] by TMA
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0], q.shape[2]))
def la_bthk(q, k, v, o):
  b, h = ml.program_id(0), ml.program_id(1)
  q_s, k_s, v_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), q.dtype)
  state = ml.zeros((64, 64), F32)
  i = ml.arange(64)
  T = q.shape[1]
  for c in ml.range(ml.cdiv(T, 64), stages=2):
    ml.copy(q.at[b, ml.ds(c * 64, 64), h], q_s)
    ml.copy(k.at[b, ml.ds(c * 64, 64), h], k_s)
    ml.copy(v.at[b, ml.ds(c * 64, 64), h], v_s)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T), 0.0)
    st_s[...] = state.astype(q.dtype)
    o.at[b, ml.ds(c * 64, 64), h].store(ml.dot(q_s, st_s, ml.dot(att.astype(q.dtype), v_s)), mask=(c * 64 + i)[:, None] < T)
    state = ml.dot(k_s.T, v_s, state)


# final state out through an SMEM buffer and a TMA store; initial state in by TMA
@mg.mgpu_kernel(out_shape=lambda k, v, s0: s0, grid=lambda k, v, s0: (k.shape[0],))
def state_tma(k, v, s0, sT):
  h = ml.program_id(0)
  k_s, v_s, s_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), F32)
  ml.copy(s0.at[h], s_s)
  state = s_s[...]
  for c in ml.range(k.shape[1] // 64, stages=2):
    ml.copy(k.at[h, ml.ds(c * 64, 64)], k_s)
    ml.copy(v.at[h, ml.ds(c * 64, 64)], v_s)
    state = ml.dot(k_s.T, v_s, state * 0.9)
  s_s[...] = state
  ml.copy(s_s, sT.at[h])


# fused recurrent with per-token rows loaded by TMA in a pipelined loop (1-row windows)
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def la_recurrent_tma(q, k, v, o):
  h = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((1, 64), q.dtype), ml.smem((1, 64), k.dtype), ml.smem((1, 64), v.dtype)
  s = ml.zeros((64, 64), F32)
  for t in ml.range(q.shape[1], stages=2):
    ml.copy(q.at[h, ml.ds(t, 1)], q_s)
    ml.copy(k.at[h, ml.ds(t, 1)], k_s)
    ml.copy(v.at[h, ml.ds(t, 1)], v_s)
    kt, vt, qt = k_s[0].astype(F32), v_s[0].astype(F32), q_s[0].astype(F32)
    s = s + kt[:, None] * vt[None, :]
    o.at[h, t][...] = ml.sum(qt[:, None] * s, axis=0)

# pointer style token loads, Triton's fused_recurrent (p_q += K each step)
@mg.mgpu_kernel(out_shape=lambda q, k, v, beta: S(v.shape, F32), grid=lambda q, k, v, beta: (q.shape[0],))
def delta_fused_recurrent_ptr(q, k, v, beta, o):
  i_bh = ml.program_id(0)
  o_k = ml.arange(0, 64)
  p_q = q.at[i_bh, 0, o_k]
  p_k = k.at[i_bh, 0, o_k]
  p_v = v.at[i_bh, 0, o_k]
  p_o = o.at[i_bh, 0, o_k]
  b_h = ml.zeros([64, 64], dtype=F32)
  for t in range(0, q.shape[1]):
    b_k = ml.load(p_k).to(F32)
    b_v = ml.load(p_v).to(F32)
    b_q = ml.load(p_q).to(F32)
    b_k = b_k / ml.sqrt(ml.sum(b_k * b_k) + 1e-6)
    b_beta = beta[i_bh, t]
    b_v_minus = ml.sum(b_h * b_k[:, None], axis=0)
    b_v = (b_v - b_v_minus) * b_beta
    b_h += b_k[:, None] * b_v[None, :]
    b_o = ml.sum(b_h * b_q[:, None], axis=0)
    ml.store(p_o, b_o.to(p_o.dtype.element_ty))
    p_q += 64
    p_k += 64
    p_v += 64
    p_o += 64

# lax.scan over 64 buffered steps of an EMA / diagonal SSM (h = a*h + x), xs a loaded tile
@mg.mgpu_kernel(out_shape=lambda x, a: S(x.shape, F32), grid=lambda x, a: (x.shape[1] // 128,))
def ema_lax_scan(x, a, y):
  cols = ml.ds(ml.program_id(0) * 128, 128)
  av = a.at[cols][...]
  h = jnp.zeros((128,), jnp.float32)
  for blk in range(x.shape[0] // 64):
    xs = x.at[ml.ds(blk * 64, 64), cols][...].astype(jnp.float32)
    def step(h, xt):
      h = av * h + xt
      return h, h
    h, ys = jax.lax.scan(step, h, xs)
    y.at[ml.ds(blk * 64, 64), cols][...] = ys


# retention with heads in the grid's second axis and batches in the first; decay from a per-head input table
@mg.mgpu_kernel(out_shape=lambda q, k, v, lg: S(v.shape, F32), grid=lambda q, k, v, lg: (q.shape[0], q.shape[1]))
def retention_table(q, k, v, lg, o):
  b, h = ml.program_id(0), ml.program_id(1)
  d = lg[h]
  s = ml.zeros((64, 64), F32)
  for t in range(q.shape[2]):
    s = ml.exp(d) * s + k.at[b, h, t][...].astype(F32)[:, None] * v.at[b, h, t][...].astype(F32)[None, :]
    o.at[b, h, t][...] = ml.sum(q.at[b, h, t][...].astype(F32)[:, None] * s, axis=0)


# fla chunk_simple_gla: chunk_fwd_h then chunk_fwd_o, (B, T, H, K) layout, block pointers with strides (H*K, 1)
@mg.mgpu_kernel(out_shape=lambda k, v, g, BT: S((k.shape[0], ml.cdiv(k.shape[1], BT), k.shape[2], k.shape[3], v.shape[3]), F32),
                grid=lambda k, v, g, BT: (1, 1, k.shape[0] * k.shape[2]))
def fla_fwd_h(k, v, g, h, BT: ml.constexpr):
  i_nh = ml.program_id(2)                          # (axes 0 and 1, fla's i_k and i_v, have one program: K, V whole)
  B, T, H, K = k.shape
  V = v.shape[3]
  i_n, i_h = i_nh // H, i_nh % H
  NT = ml.cdiv(T, BT)
  b_h = ml.zeros([K, V], dtype=F32)
  for i_t in range(NT):
    p_k = ml.make_block_ptr(k.at[i_n, :, i_h], (K, T), (1, H * K), (0, i_t * BT), (K, BT), (0, 1))
    p_v = ml.make_block_ptr(v.at[i_n, :, i_h], (T, V), (H * V, 1), (i_t * BT, 0), (BT, V), (1, 0))
    p_h = ml.make_block_ptr(h.at[i_n, i_t, i_h], (K, V), (V, 1), (0, 0), (K, V), (1, 0))
    ml.store(p_h, b_h.to(p_h.dtype.element_ty), boundary_check=(0, 1))
    b_k = ml.load(p_k, boundary_check=(0, 1))
    b_v = ml.load(p_v, boundary_check=(0, 1))
    last_idx = ml.minimum((i_t + 1) * BT, T) - 1
    b_g_last = g[i_n, last_idx, i_h]
    p_g = ml.make_block_ptr(g.at[i_n, :, i_h], (T,), (H,), (i_t * BT,), (BT,), (0,))
    b_g = ml.load(p_g, boundary_check=(0,))
    b_h *= ml.exp(b_g_last)
    b_v = (b_v * ml.exp(b_g_last - b_g)[:, None]).to(b_v.dtype)
    b_h += ml.dot(b_k, b_v)


@mg.mgpu_kernel(out_shape=lambda q, k, v, g, h, scale, BT: S(v.shape, F32),
                grid=lambda q, k, v, g, h, scale, BT: (1, ml.cdiv(q.shape[1], BT), q.shape[0] * q.shape[2]))
def fla_fwd_o(q, k, v, g, h, o, scale: ml.constexpr, BT: ml.constexpr):
  i_t, i_bh = ml.program_id(1), ml.program_id(2)  # (axis 0, fla's i_v, has one program)
  B, T, H, K = q.shape
  V = v.shape[3]
  i_b, i_h = i_bh // H, i_bh % H
  m_s = ml.arange(0, BT)[:, None] >= ml.arange(0, BT)[None, :]
  p_q = ml.make_block_ptr(q.at[i_b, :, i_h], (T, K), (H * K, 1), (i_t * BT, 0), (BT, K), (1, 0))
  p_k = ml.make_block_ptr(k.at[i_b, :, i_h], (K, T), (1, H * K), (0, i_t * BT), (K, BT), (0, 1))
  p_h = ml.make_block_ptr(h.at[i_b, i_t, i_h], (K, V), (V, 1), (0, 0), (K, V), (1, 0))
  b_q = ml.load(p_q, boundary_check=(0, 1))
  b_k = ml.load(p_k, boundary_check=(0, 1))
  b_h = ml.load(p_h, boundary_check=(0, 1))
  b_o = ml.dot(b_q, b_h.to(b_q.dtype))
  b_A = ml.dot(b_q, b_k)
  p_g = ml.make_block_ptr(g.at[i_b, :, i_h], (T,), (H,), (i_t * BT,), (BT,), (0,))
  b_g = ml.load(p_g, boundary_check=(0,))
  b_o = b_o * ml.exp(b_g)[:, None]
  b_A = b_A * ml.exp(b_g[:, None] - b_g[None, :])
  b_A = ml.where(m_s, b_A, 0)
  p_v = ml.make_block_ptr(v.at[i_b, :, i_h], (T, V), (H * V, 1), (i_t * BT, 0), (BT, V), (1, 0))
  p_o = ml.make_block_ptr(o.at[i_b, :, i_h], (T, V), (H * V, 1), (i_t * BT, 0), (BT, V), (1, 0))
  b_v = ml.load(p_v, boundary_check=(0, 1))
  b_o = b_o * scale + ml.dot(b_A.to(b_v.dtype), b_v) * scale
  ml.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))


def fla_simple_gla(q, k, v, g, interpret=False):
  """fla's chunk_simple_gla forward: g holds chunk-local cumsums of the log-gates (fla's chunk_local_cumsum)."""
  h = fla_fwd_h(k, v, g, interpret=interpret, BT=64)
  return fla_fwd_o(q, k, v, g, h, interpret=interpret, scale=1.0, BT=64)
