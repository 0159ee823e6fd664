"""Probe 67b's corpus, its second half: the delta rule and gated delta rule, Mamba-1's selective scan, Mamba-2's SSD,
causal conv1d, and harder schedules (chunk 128 at head_dim 128, pipelined chunk loads, a backward, sub-chunks).
tests/test_probe67b.py runs them through tests/probe67b_cases.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe67b_kernels import F32, S, copy_chunk, f32, la_ref, scan_ref


# ------------------------------------------------------------------ the delta rule (DeltaNet) and gated delta rule
# recurrent: S = S (I - beta k k^T) + beta k v^T, i.e. v_new = v - S^T k, S += beta k v_new^T (fla fused_recurrent)
@mg.mgpu_kernel(out_shape=lambda q, k, v, beta: S(v.shape, F32), grid=lambda q, k, v, beta: (q.shape[0],))
def delta_recurrent(q, k, v, beta, o):
  h = ml.program_id(0)
  s = ml.zeros((q.shape[2], v.shape[2]), F32)
  for t in range(q.shape[1]):
    kt = k.at[h, t][...].astype(F32)
    kt = kt / ml.sqrt(ml.sum(kt * kt) + 1e-6)        # L2-normalised keys, as DeltaNet's
    v_new = v.at[h, t][...].astype(F32) - ml.sum(kt[:, None] * s, axis=0)
    s = s + beta[h, t] * kt[:, None] * v_new[None, :]
    o.at[h, t][...] = ml.sum(q.at[h, t][...].astype(F32)[:, None] * s, axis=0)


def delta_ref(q, k, v, beta, g=None, s0=None, normalize=True):
  k, v, beta = f32(k, v, beta)

  def step(s, hh, tt):
    kt = k[hh, tt] / np.sqrt(np.sum(k[hh, tt] ** 2) + 1e-6) if normalize else k[hh, tt]
    if g is not None:
      s = np.exp(np.float32(g[hh, tt])) * s
    return s + beta[hh, tt] * np.outer(kt, v[hh, tt] - kt @ s)
  return scan_ref(q, k, v, step, s0)


# gated delta rule (Gated DeltaNet): S = alpha_t S first; head_dim 128 values, initial and final states
@mg.mgpu_kernel(out_shape=lambda q, k, v, beta, g, s0: (S(v.shape, F32), s0),
                grid=lambda q, k, v, beta, g, s0: (q.shape[0],))
def gated_delta_recurrent(q, k, v, beta, g, s0, o, sT):
  h = ml.program_id(0)
  s = s0.at[h][...]
  for t in range(q.shape[1]):
    kt = k.at[h, t][...].astype(F32)
    kt = kt * ml.rsqrt(ml.sum(kt * kt) + 1e-6)
    s = s * ml.exp(g[h, t])
    v_new = v.at[h, t][...].astype(F32) - ml.sum(kt[:, None] * s, axis=0)
    s = s + beta[h, t] * kt[:, None] * v_new[None, :]
    o.at[h, t][...] = ml.sum(q.at[h, t][...].astype(F32)[:, None] * s, axis=0)
  sT.at[h][...] = s


# chunked delta rule, WY representation: T = (I + tril(diag(beta) K K^T, -1))^-1 by forward substitution (fla's
# solve_tril loop over rows, as Triton writes it), w = T beta K, u = T beta V; then per chunk v' = u - w S,
# o = q S + tril(q k^T) v', S += k^T v'. Keys come L2-normalised.
@mg.mgpu_kernel(out_shape=lambda q, k, v, beta: S(v.shape, F32), grid=lambda q, k, v, beta: (q.shape[0],))
def delta_chunk(q, k, v, beta, o):
  h = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  kb_s, vb_s, t_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), k.dtype)
  w_s, u_s, st_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), k.dtype)
  state, i = ml.zeros((64, 64), F32), ml.arange(64)
  for c in ml.range(q.shape[1] // 64):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    b = beta.at[h, ml.ds(c * 64, 64)][...]
    kb_s[...] = (k_s[...].astype(F32) * b[:, None]).astype(k.dtype)
    vb_s[...] = (v_s[...].astype(F32) * b[:, None]).astype(v.dtype)
    a = -ml.where(i[:, None] > i[None, :], ml.dot(kb_s, k_s.T), 0.0)
    for r in range(1, 64):
      row = ml.sum(ml.where(i[:, None] == r, a, 0.0), axis=0)
      row = row + ml.sum(row[:, None] * a, axis=0) * (i < r)
      a = ml.where(i[:, None] == r, row[None, :], a)
    t_s[...] = (a + ml.where(i[:, None] == i[None, :], 1.0, 0.0)).astype(k.dtype)
    w_s[...] = ml.dot(t_s, kb_s).astype(k.dtype)
    u = ml.dot(t_s, vb_s)
    st_s[...] = state.astype(k.dtype)
    u_s[...] = (u - ml.dot(w_s, st_s)).astype(v.dtype)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T), 0.0)
    o.at[h, ml.ds(c * 64, 64)][...] = ml.dot(q_s, st_s, ml.dot(att.astype(q.dtype), u_s))
    state = ml.dot(k_s.T, u_s, state)


# ------------------------------------------------------------------ Mamba-1 selective scan
# x, dt, z (B, T, D); A (D, N) stored transposed (N, D); B, C (B, T, N); D, dt_bias (D,). State (N, 128 channels).
@mg.mgpu_kernel(out_shape=lambda x, dt, at, b, c, d, dtb, z: S(x.shape, F32),
                grid=lambda x, dt, at, b, c, d, dtb, z: (x.shape[0], x.shape[2] // 128))
def mamba_scan(x, dt, at, b, c, d, dtb, z, y):
  bi, cols = ml.program_id(0), ml.ds(ml.program_id(1) * 128, 128)
  a_v = at.at[:, cols][...]
  d_v, bias = d.at[cols][...], dtb.at[cols][...]
  h = ml.zeros((at.shape[0], 128), F32)
  for t in range(x.shape[1]):
    delta = ml.softplus(dt.at[bi, t, cols][...].astype(F32) + bias)
    xt = x.at[bi, t, cols][...].astype(F32)
    h = ml.exp(delta[None, :] * a_v) * h + b.at[bi, t][...].astype(F32)[:, None] * (delta * xt)[None, :]
    yt = ml.sum(c.at[bi, t][...].astype(F32)[:, None] * h, axis=0) + d_v * xt
    zt = z.at[bi, t, cols][...].astype(F32)
    y.at[bi, t, cols][...] = yt * zt * ml.sigmoid(zt)


def mamba_ref(x, dt, at, b, c, d, dtb, z, h0=None):
  x, dt, at, b, c, d, dtb = f32(x, dt, at, b, c, d, dtb)
  z = None if z is None else np.asarray(z, np.float32)
  bsz, t, dd = x.shape
  y = np.zeros(x.shape, np.float32)
  fin = np.zeros((bsz, at.shape[0], dd), np.float32)
  for bb in range(bsz):
    h = np.zeros((at.shape[0], dd), np.float32) if h0 is None else np.asarray(h0[bb], np.float32).copy()
    for tt in range(t):
      delta = np.logaddexp(0, dt[bb, tt] + dtb).astype(np.float32)
      h = np.exp(delta[None, :] * at) * h + b[bb, tt][:, None] * (delta * x[bb, tt])[None, :]
      yt = c[bb, tt] @ h + d * x[bb, tt]
      y[bb, tt] = yt if z is None else yt * z[bb, tt] / (1 + np.exp(-z[bb, tt]))
    fin[bb] = h
  return y, fin


# the channels-first state (128 channels, 16 states) as the Mamba CUDA kernel holds it; h0 in, final state out
@mg.mgpu_kernel(out_shape=lambda x, dt, a, b, c, h0: (S(x.shape, F32), h0),
                grid=lambda x, dt, a, b, c, h0: (x.shape[0], x.shape[2] // 128))
def mamba_scan_dn(x, dt, a, b, c, h0, y, hT):
  bi, cols = ml.program_id(0), ml.ds(ml.program_id(1) * 128, 128)
  a_v = a.at[cols, :][...]
  h = h0.at[bi, cols, :][...]
  for t in range(x.shape[1]):
    delta = ml.softplus(dt.at[bi, t, cols][...])
    h = ml.exp(delta[:, None] * a_v) * h + (delta * x.at[bi, t, cols][...])[:, None] * b.at[bi, t][...][None, :]
    y.at[bi, t, cols][...] = ml.sum(h * c.at[bi, t][...][None, :], axis=1)
  hT.at[bi, cols, :][...] = h


def mamba_dn_ref(x, dt, a, b, c, h0):
  y, fin = mamba_ref(x, dt - 0.0, np.asarray(a).T, b, c, np.zeros(x.shape[2], np.float32),
                     np.zeros(x.shape[2], np.float32), None,
                     h0=np.swapaxes(np.asarray(h0), 1, 2))
  return y, np.swapaxes(fin, 1, 2)


# ------------------------------------------------------------------ Mamba-2 SSD: chunk states, state passing, outputs
# x (H, T, P) bf16, a (H, T) log-decays (dt * A), b, c (H, T, N) bf16. Chunk 64, N = P = 64.
@mg.mgpu_kernel(out_shape=lambda x, a, b: S((x.shape[0], x.shape[1] // 64, b.shape[2], x.shape[2]), F32),
                grid=lambda x, a, b: (x.shape[0], x.shape[1] // 64))
def ssd_chunk_state(x, a, b, st):
  h, c = ml.program_id(0), ml.program_id(1)
  x_s, b_s, xd_s = ml.smem((64, 64), x.dtype), ml.smem((64, 64), b.dtype), ml.smem((64, 64), x.dtype)
  ml.copy(x.at[h, ml.ds(c * 64, 64)], x_s)
  ml.copy(b.at[h, ml.ds(c * 64, 64)], b_s)
  cs = ml.cumsum(a.at[h, ml.ds(c * 64, 64)][...])
  xd_s[...] = (x_s[...].astype(F32) * ml.exp(cs[63] - cs)[:, None]).astype(x.dtype)
  st.at[h, c][...] = ml.dot(b_s.T, xd_s)            # sum_j exp(cs_last - cs_j) b_j x_j^T: (N, P)


@mg.mgpu_kernel(out_shape=lambda st, a: st, grid=lambda st, a: (st.shape[0],))
def ssd_state_passing(st, a, prev):
  h = ml.program_id(0)
  s = ml.zeros(st.shape[2:], F32)
  for c in range(st.shape[1]):
    prev.at[h, c][...] = s                             # the state entering chunk c
    s = ml.exp(ml.sum(a.at[h, ml.ds(c * 64, 64)][...])) * s + st.at[h, c][...]


@mg.mgpu_kernel(out_shape=lambda x, a, b, c, prev: S(x.shape, F32), grid=lambda x, a, b, c, prev: (x.shape[0], x.shape[1] // 64))
def ssd_chunk_scan(x, a, b, c, prev, y):
  h, j = ml.program_id(0), ml.program_id(1)
  x_s, b_s, c_s = ml.smem((64, 64), x.dtype), ml.smem((64, 64), b.dtype), ml.smem((64, 64), c.dtype)
  p_s = ml.smem((64, 64), x.dtype)
  ml.copy(x.at[h, ml.ds(j * 64, 64)], x_s)
  ml.copy(b.at[h, ml.ds(j * 64, 64)], b_s)
  ml.copy(c.at[h, ml.ds(j * 64, 64)], c_s)
  p_s[...] = prev.at[h, j][...].astype(x.dtype)
  cs = ml.cumsum(a.at[h, ml.ds(j * 64, 64)][...])
  i = ml.arange(64)
  s = ml.where(i[:, None] >= i[None, :], ml.dot(c_s, b_s.T) * ml.exp(cs[:, None] - cs[None, :]), 0.0)
  y.at[h, ml.ds(j * 64, 64)][...] = ml.exp(cs)[:, None] * ml.dot(c_s, p_s) + ml.dot(s.astype(x.dtype), x_s)


def ssd_ref(x, a, b, c):
  """y_t = c_t^T S_t, S_t = exp(a_t) S_{t-1} + b_t x_t^T: simple GLA with q = c, k = b, v = x."""
  return la_ref(c, b, x, decay=np.exp(np.asarray(a, np.float32)))[0]


def ssd_three(x, a, b, c, interpret=False):
  st = ssd_chunk_state(x, a, b, interpret=interpret)
  prev = ssd_state_passing(st, a, interpret=interpret)
  return ssd_chunk_scan(x, a, b, c, prev, interpret=interpret)


# ------------------------------------------------------------------ causal conv1d (Mamba's, width 4) with SiLU
# x (B, T, D), w (D, 4), bias (D,): out[t] = silu(bias + sum_k w[:, k] x[t - 3 + k]); tiles of 64 steps x 128 channels
@mg.mgpu_kernel(out_shape=lambda x, w, bias: S(x.shape, F32),
                grid=lambda x, w, bias: (x.shape[0], ml.cdiv(x.shape[1], 64), x.shape[2] // 128))
def causal_conv1d(x, w, bias, out):
  bi, t0, d0 = ml.program_id(0), ml.program_id(1) * 64, ml.program_id(2) * 128
  cols = d0 + ml.arange(128)
  acc = ml.zeros((64, 128), F32) + bias.at[ml.ds(d0, 128)][...][None, :]
  for k in ml.static_range(4):
    rows = t0 - 3 + k + ml.arange(64)
    xv = ml.load(x.at[bi, rows[:, None], cols[None, :]], mask=(rows[:, None] >= 0) & (rows[:, None] < x.shape[1]),
                 other=0.0)
    acc += xv.astype(F32) * w.at[ml.ds(d0, 128), k][...][None, :]
  rows = t0 + ml.arange(64)
  ml.store(out.at[bi, rows[:, None], cols[None, :]], acc * ml.sigmoid(acc), mask=rows[:, None] < x.shape[1])


def conv_ref(x, w, bias, cu=None):
  x, w, bias = f32(x, w, bias)
  xs = x if x.ndim == 3 else x[None]
  bounds = [(0, xs.shape[1])] if cu is None else list(zip(np.asarray(cu)[:-1], np.asarray(cu)[1:]))
  out = np.zeros(xs.shape, np.float32)
  for bb in range(xs.shape[0]):
    for lo, hi in bounds:
      for t in range(lo, hi):
        acc = bias.copy()
        for k in range(4):
          if t - 3 + k >= lo:
            acc = acc + w[:, k] * xs[bb, t - 3 + k]
        out[bb, t] = acc / (1 + np.exp(-acc))
  return out if x.ndim == 3 else out[0]


# the same over packed sequences (cu_seqlens): a sequence's taps never reach into the one before
@mg.mgpu_kernel(out_shape=lambda x, w, bias, cu: S(x.shape, F32),
                grid=lambda x, w, bias, cu: (cu.shape[0] - 1, ml.cdiv(x.shape[0], 64), x.shape[1] // 128))
def causal_conv1d_varlen(x, w, bias, cu, out):
  b, d0 = ml.program_id(0), ml.program_id(2) * 128
  lo, hi = cu[b], cu[b + 1]
  t0 = lo + ml.program_id(1) * 64
  if t0 < hi:
    cols = d0 + ml.arange(128)
    acc = ml.zeros((64, 128), F32) + bias.at[ml.ds(d0, 128)][...][None, :]
    for k in ml.static_range(4):
      rows = t0 - 3 + k + ml.arange(64)
      xv = ml.load(x.at[rows[:, None], cols[None, :]], mask=(rows[:, None] >= lo) & (rows[:, None] < hi), other=0.0)
      acc += xv.astype(F32) * w.at[ml.ds(d0, 128), k][...][None, :]
    rows = t0 + ml.arange(64)
    ml.store(out.at[rows[:, None], cols[None, :]], acc * ml.sigmoid(acc), mask=rows[:, None] < hi)


# ------------------------------------------------------------------ harder shapes and schedules
# pipelined chunk loads (stages=2) under the carried state, retention's decays
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def retention_pipelined(q, k, v, o):
  h = ml.program_id(0)
  lg = ml.log(1.0 - ml.exp2(-5.0 - h.astype(F32)))
  q_s, k_s, v_s = ml.smem((2, 64, 64), q.dtype), ml.smem((2, 64, 64), k.dtype), ml.smem((2, 64, 64), v.dtype)
  qd_s, kd_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), q.dtype)
  i = ml.arange(64)
  dmask = ml.where(i[:, None] >= i[None, :], ml.exp((i[:, None] - i[None, :]).astype(F32) * lg), 0.0)
  state = ml.zeros((64, 64), F32)
  for c in ml.range(q.shape[1] // 64, stages=2):
    st = c % 2
    ml.copy(q.at[h, ml.ds(c * 64, 64)], q_s.at[st])
    ml.copy(k.at[h, ml.ds(c * 64, 64)], k_s.at[st])
    ml.copy(v.at[h, ml.ds(c * 64, 64)], v_s.at[st])
    qd_s[...] = (q_s.at[st][...].astype(F32) * ml.exp((i + 1).astype(F32) * lg)[:, None]).astype(q.dtype)
    kd_s[...] = (k_s.at[st][...].astype(F32) * ml.exp((63 - i).astype(F32) * lg)[:, None]).astype(k.dtype)
    att = ml.dot(q_s.at[st], k_s.at[st].T) * dmask
    st_s[...] = state.astype(q.dtype)
    o.at[h, ml.ds(c * 64, 64)][...] = ml.dot(qd_s, st_s, ml.dot(att.astype(q.dtype), v_s.at[st]))
    state = ml.dot(kd_s.T, v_s.at[st], state * ml.exp(64.0 * lg))


# Mamba-1 as its CUDA kernel schedules it: 64 steps of x and dt copied into SMEM by TMA (pipelined), then the
# sequential scan over the buffered rows; B, C (T, N) shared across channels
@mg.mgpu_kernel(out_shape=lambda x, dt, at, b, c: S(x.shape, F32), grid=lambda x, dt, at, b, c: (x.shape[1] // 128,))
def mamba_scan_buffered(x, dt, at, b, c, y):
  cols = ml.ds(ml.program_id(0) * 128, 128)
  x_s, dt_s = ml.smem((64, 128), x.dtype), ml.smem((64, 128), dt.dtype)
  a_v = at.at[:, cols][...]
  h = ml.zeros((at.shape[0], 128), F32)
  for blk in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(blk * 64, 64), cols], x_s)
    ml.copy(dt.at[ml.ds(blk * 64, 64), cols], dt_s)
    for r in range(64):
      t = blk * 64 + r
      delta = ml.softplus(dt_s.at[r][...].astype(F32))
      h = ml.exp(delta[None, :] * a_v) * h + b.at[t][...][:, None] * (delta * x_s.at[r][...].astype(F32))[None, :]
      y.at[t, cols][...] = ml.sum(c.at[t][...][:, None] * h, axis=0)


def mamba_buffered_ref(x, dt, at, b, c):
  n = x.shape[1]
  y, _ = mamba_ref(np.asarray(x, np.float32)[None], np.asarray(dt, np.float32)[None], at, np.asarray(b)[None],
                   np.asarray(c)[None], np.zeros(n, np.float32), np.zeros(n, np.float32), None)
  return y[0]


# Mamba's parallel scan within a block of steps: h_t = a_t h_{t-1} + b_t by ml.associative_scan over time, the
# block's last state carried to the next block
@mg.mgpu_kernel(out_shape=lambda x, dt, a, b, c: S(x.shape, F32), grid=lambda x, dt, a, b, c: (x.shape[1] // 128,))
def mamba_assoc_scan(x, dt, a, b, c, y):
  cols = ml.ds(ml.program_id(0) * 128, 128)
  a_v = a.at[cols][...]
  carry = ml.zeros((128,), F32)

  def combine(left, right):
    return left[0] * right[0], right[0] * left[1] + right[1]

  for blk in range(x.shape[0] // 64):
    rows = ml.ds(blk * 64, 64)
    delta = ml.softplus(dt.at[rows, cols][...])
    da = ml.exp(delta * a_v[None, :])
    dbx = delta * x.at[rows, cols][...] * b.at[rows][...][:, None]
    acum, hs = ml.associative_scan(combine, (da, dbx), axis=0)
    hs = hs + acum * carry[None, :]
    y.at[rows, cols][...] = hs * c.at[rows][...][:, None]
    carry = hs[63]


def mamba_assoc_ref(x, dt, a, b, c):
  x, dt, a, b, c = f32(x, dt, a, b, c)
  h = np.zeros(x.shape[1], np.float32)
  y = np.zeros(x.shape, np.float32)
  for t in range(x.shape[0]):
    delta = np.logaddexp(0, dt[t])
    h = np.exp(delta * a) * h + delta * x[t] * b[t]
    y[t] = h * c[t]
  return y


# the linear attention backward's dk, dv: a reversed chunk loop carrying dS = sum over later chunks of q^T do
@mg.mgpu_kernel(out_shape=lambda q, k, v, do: (S(k.shape, F32), S(v.shape, F32)), grid=lambda q, k, v, do: (q.shape[0],))
def la_chunk_bwd_dkdv(q, k, v, do, dk, dv):
  h = ml.program_id(0)
  q_s, k_s, v_s, do_s = (ml.smem((64, 64), t.dtype) for t in (q, k, v, do))
  ds_s = ml.smem((64, 64), q.dtype)
  i = ml.arange(64)
  d_state = ml.zeros((64, 64), F32)
  for c in ml.range(q.shape[1] // 64 - 1, -1, -1):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    ml.copy(do.at[h, ml.ds(c * 64, 64)], do_s)
    ds_s[...] = d_state.astype(q.dtype)
    a_t = ml.where(i[:, None] <= i[None, :], ml.dot(k_s, q_s.T), 0.0)          # (k q^T) masked: key j, query i >= j
    s_t = ml.where(i[:, None] <= i[None, :], ml.dot(v_s, do_s.T), 0.0)         # (v do^T)
    dv.at[h, ml.ds(c * 64, 64)][...] = ml.dot(a_t.astype(q.dtype), do_s, ml.dot(k_s, ds_s))
    dk.at[h, ml.ds(c * 64, 64)][...] = ml.dot(s_t.astype(q.dtype), q_s, ml.dot(v_s, ds_s.T))
    d_state = ml.dot(q_s.T, do_s, d_state)


def la_bwd_ref(q, k, v, do):
  def loss(k, v):
    def step(s, inp):
      qt, kt, vt = inp
      s = s + jnp.outer(kt, vt)
      return s, qt @ s
    o = jax.vmap(lambda q, k, v: jax.lax.scan(step, jnp.zeros((q.shape[1], v.shape[1])), (q, k, v))[1])(
        jnp.asarray(q, F32), k, v)
    return jnp.sum(o * jnp.asarray(do, F32))
  return tuple(np.asarray(t) for t in jax.grad(loss, argnums=(0, 1))(jnp.asarray(k, F32), jnp.asarray(v, F32)))


# ------------------------------------------------------------------ more of the family
# gated delta rule, chunked (fla chunk_gated_delta_rule): gates cumsum'd within the chunk, A = tril(beta_i k_i k_j
# exp(g_i - g_j), -1), solved by forward substitution; w = T beta K exp(g), u = T beta V; the state decays by
# exp(g_last) a chunk. Keys come L2-normalised. Initial state in, final state out.
@mg.mgpu_kernel(out_shape=lambda q, k, v, beta, g, s0: (S(v.shape, F32), s0), grid=lambda q, k, v, beta, g, s0: (q.shape[0],))
def gated_delta_chunk(q, k, v, beta, g, s0, o, sT):
  h = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  kb_s, vb_s, t_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), k.dtype)
  w_s, u_s, st_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), k.dtype)
  qg_s, kd_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype)
  i = ml.arange(64)
  state = s0.at[h][...]
  for c in ml.range(q.shape[1] // 64):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    b = beta.at[h, ml.ds(c * 64, 64)][...]
    gc = ml.cumsum(g.at[h, ml.ds(c * 64, 64)][...])
    last = gc[63]
    kb_s[...] = (k_s[...].astype(F32) * b[:, None]).astype(k.dtype)
    vb_s[...] = (v_s[...].astype(F32) * b[:, None]).astype(v.dtype)
    decay = ml.exp(gc[:, None] - gc[None, :])
    a = -ml.where(i[:, None] > i[None, :], ml.dot(kb_s, k_s.T) * decay, 0.0)
    for r in range(1, 64):
      row = ml.sum(ml.where(i[:, None] == r, a, 0.0), axis=0)
      row = row + ml.sum(row[:, None] * a, axis=0) * (i < r)
      a = ml.where(i[:, None] == r, row[None, :], a)
    t_s[...] = (a + ml.where(i[:, None] == i[None, :], 1.0, 0.0)).astype(k.dtype)
    kb_s[...] = (kb_s[...].astype(F32) * ml.exp(gc)[:, None]).astype(k.dtype)
    w_s[...] = ml.dot(t_s, kb_s).astype(k.dtype)
    st_s[...] = state.astype(k.dtype)
    u_s[...] = (ml.dot(t_s, vb_s) - ml.dot(w_s, st_s)).astype(v.dtype)
    qg_s[...] = (q_s[...].astype(F32) * ml.exp(gc)[:, None]).astype(q.dtype)
    kd_s[...] = (k_s[...].astype(F32) * ml.exp(last - gc)[:, None]).astype(k.dtype)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T) * decay, 0.0)
    o.at[h, ml.ds(c * 64, 64)][...] = ml.dot(qg_s, st_s, ml.dot(att.astype(q.dtype), u_s))
    state = ml.dot(kd_s.T, u_s, state * ml.exp(last))
  sT.at[h][...] = state


@ml.inline
def wy_row(a, i, r):
  """Row r of the forward substitution (rows above it solved): a[r] + a[r] @ a below the diagonal."""
  row = a[r] + ml.sum(a[r][:, None] * a, axis=0) * (i < r)
  return ml.where(i[:, None] == r, row[None, :], a)


# the delta rule's forward substitution over rows of the register tile (a[r], a run-time row), unrolled
# (ml.static_range: a ModuleSizeWarning, as it should) or a run-time loop (the warning's hint followed)
@mg.mgpu_kernel(out_shape=lambda k, beta, UNROLL: S((k.shape[0], 64, 64), F32), grid=lambda k, beta, UNROLL: (k.shape[0],))
def wy_inverse(k, beta, t_out, UNROLL: ml.constexpr):
  h = ml.program_id(0)
  k_s, kb_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), k.dtype)
  ml.copy(k.at[h, ml.ds(0, 64)], k_s)
  kb_s[...] = (k_s[...].astype(F32) * beta.at[h, ml.ds(0, 64)][...][:, None]).astype(k.dtype)
  i = ml.arange(64)
  a = -ml.where(i[:, None] > i[None, :], ml.dot(kb_s, k_s.T), 0.0)
  if UNROLL:
    for r in ml.static_range(1, 64):
      a = wy_row(a, i, r)
  else:
    for r in ml.range(1, 64):
      a = wy_row(a, i, r)
  t_out.at[h][...] = a + ml.where(i[:, None] == i[None, :], 1.0, 0.0)


def wy_inverse_ref(k, beta):
  k, beta = f32(k, beta)
  out = []
  for h in range(k.shape[0]):
    kk = k[h, :64]
    a = np.tril((beta[h, :64, None] * kk) @ kk.T, -1)
    out.append(np.linalg.inv(np.eye(64, dtype=np.float32) + a))
  return np.stack(out)


# linear attention with its normaliser (Katharopoulos et al.): o_t = q_t S_t / (q_t z_t), z_t = sum k; the feature
# map elu + 1 applied in the kernel; a tuple (S, z) carried
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def la_normalised_recurrent(q, k, v, o):
  h = ml.program_id(0)
  carry = (ml.zeros((q.shape[2], v.shape[2]), F32), ml.zeros((q.shape[2],), F32))
  for t in range(q.shape[1]):
    s, z = carry
    kt = jax.nn.elu(k.at[h, t][...].astype(F32)) + 1.0
    qt = jax.nn.elu(q.at[h, t][...].astype(F32)) + 1.0
    s = s + kt[:, None] * v.at[h, t][...].astype(F32)[None, :]
    z = z + kt
    o.at[h, t][...] = ml.sum(qt[:, None] * s, axis=0) / (ml.sum(qt * z) + 1e-6)
    carry = (s, z)


def la_normalised_ref(q, k, v):
  elu1 = lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))) + 1.0
  q, k, v = f32(q, k, v)
  o = la_ref(elu1(q), elu1(k), v)[0]
  z = np.cumsum(elu1(k), axis=1)
  return o / (np.sum(elu1(q) * z, -1, keepdims=True) + 1e-6)


# Mamba-1 over packed sequences (cu_seqlens), an initial state a sequence, 64 channels a program
@mg.mgpu_kernel(out_shape=lambda x, dt, at, b, c, cu, h0: (S(x.shape, F32), h0),
                grid=lambda x, dt, at, b, c, cu, h0: (cu.shape[0] - 1, x.shape[1] // 64))
def mamba_scan_varlen(x, dt, at, b, c, cu, h0, y, hT):
  s, cols = ml.program_id(0), ml.ds(ml.program_id(1) * 64, 64)
  a_v = at.at[:, cols][...]
  h = h0.at[s, :, cols][...]
  for t in range(cu[s], cu[s + 1]):
    delta = ml.softplus(dt.at[t, cols][...])
    h = ml.exp(delta[None, :] * a_v) * h + b.at[t][...][:, None] * (delta * x.at[t, cols][...])[None, :]
    y.at[t, cols][...] = ml.sum(c.at[t][...][:, None] * h, axis=0)
  hT.at[s, :, cols][...] = h


def mamba_varlen_ref(x, dt, at, b, c, cu, h0):
  cu = np.asarray(cu)
  y = np.zeros(x.shape, np.float32)
  fin = np.zeros(h0.shape, np.float32)
  z = np.zeros(x.shape[1], np.float32)
  for s in range(len(cu) - 1):
    sl = slice(cu[s], cu[s + 1])
    yy, ff = mamba_ref(np.asarray(x)[None, sl], np.asarray(dt)[None, sl], at, np.asarray(b)[None, sl],
                       np.asarray(c)[None, sl], z, z, None, h0=np.asarray(h0)[s:s + 1])
    y[sl], fin[s] = yy[0], ff[0]
  return y, fin


# Lightning attention's intra/inter split with a per-head slope decay, chunk 64, a 16-row sub-chunk loop for the
# diagonal blocks (fla's GLA intra kernel tiles the chunk into 16-row pieces)
@mg.mgpu_kernel(out_shape=lambda q, k, v, slope: S(v.shape, F32), grid=lambda q, k, v, slope: (q.shape[0],))
def lightning_subchunk(q, k, v, slope, o):
  h = ml.program_id(0)
  lg = -slope[h]
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  qd_s, kd_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), q.dtype)
  i = ml.arange(64)
  j = ml.arange(16)
  sub = ml.where(j[:, None] >= j[None, :], ml.exp((j[:, None] - j[None, :]).astype(F32) * lg), 0.0)
  state = ml.zeros((64, 64), F32)
  for c in ml.range(q.shape[1] // 64):
    copy_chunk(q, k, v, h, c, q_s, k_s, v_s)
    qd_s[...] = (q_s[...].astype(F32) * ml.exp((i + 1).astype(F32) * lg)[:, None]).astype(q.dtype)
    kd_s[...] = (k_s[...].astype(F32) * ml.exp((63 - i).astype(F32) * lg)[:, None]).astype(k.dtype)
    st_s[...] = state.astype(q.dtype)
    inter = ml.dot(qd_s, st_s)
    for sc in ml.static_range(4):
      rows = ml.ds(sc * 16, 16)
      diag = ml.dot(q_s.at[rows], k_s.at[rows].T) * sub
      o.at[h, ml.ds(c * 64 + sc * 16, 16)][...] = inter[sc * 16:(sc + 1) * 16] + ml.dot(diag.astype(q.dtype), v_s.at[rows])
    state = ml.dot(kd_s.T, v_s, state * ml.exp(64.0 * lg))


def lightning_ref(q, k, v, slope):
  """Retention with decay exp(-slope) within 16-token blocks only for the diagonal (the kernel's sub-chunk form):
  o_i = sum_{j <= i, same 16-block or earlier chunk} ... computed from its own terms."""
  q, k, v, slope = f32(q, k, v, slope)
  h, t, _ = q.shape
  o = np.zeros(v.shape, np.float32)
  for hh in range(h):
    lam = np.exp(-slope[hh])
    for ti in range(t):
      acc = np.zeros(v.shape[2], np.float32)
      c0, b0 = ti // 64 * 64, ti // 16 * 16
      for tj in list(range(0, c0)) + list(range(b0, ti + 1)):
        acc += lam ** (ti - tj) * (q[hh, ti] @ k[hh, tj]) * v[hh, tj]
      o[hh, ti] = acc
  return o


# chunked delta rule over cu_seqlens: rows past a sequence's end loaded as zeros (beta 0 there), final states out
@mg.mgpu_kernel(out_shape=lambda q, k, v, beta, cu: (S(v.shape, F32), S((cu.shape[0] - 1, 64, 64), F32)),
                grid=lambda q, k, v, beta, cu: (cu.shape[0] - 1,))
def delta_chunk_varlen(q, k, v, beta, cu, o, sT):
  b = ml.program_id(0)
  lo, hi = cu[b], cu[b + 1]
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  kb_s, vb_s, t_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), k.dtype)
  w_s, u_s, st_s = ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), k.dtype)
  state, i, d = ml.zeros((64, 64), F32), ml.arange(64), ml.arange(64)
  for t0 in range(lo, hi, 64):
    rows, m = t0 + i, (t0 + i)[:, None] < hi
    q_s[...] = ml.load(q.at[rows[:, None], d[None, :]], mask=m, other=0.0)
    k_s[...] = ml.load(k.at[rows[:, None], d[None, :]], mask=m, other=0.0)
    v_s[...] = ml.load(v.at[rows[:, None], d[None, :]], mask=m, other=0.0)
    bt = ml.load(beta.at[rows], mask=rows < hi, other=0.0)
    kb_s[...] = (k_s[...].astype(F32) * bt[:, None]).astype(k.dtype)
    vb_s[...] = (v_s[...].astype(F32) * bt[:, None]).astype(v.dtype)
    a = -ml.where(i[:, None] > i[None, :], ml.dot(kb_s, k_s.T), 0.0)
    for r in ml.range(1, 64):
      a = wy_row(a, i, r)
    t_s[...] = (a + ml.where(i[:, None] == i[None, :], 1.0, 0.0)).astype(k.dtype)
    w_s[...] = ml.dot(t_s, kb_s).astype(k.dtype)
    st_s[...] = state.astype(k.dtype)
    u_s[...] = (ml.dot(t_s, vb_s) - ml.dot(w_s, st_s)).astype(v.dtype)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(q_s, k_s.T), 0.0)
    ml.store(o.at[rows[:, None], d[None, :]], ml.dot(q_s, st_s, ml.dot(att.astype(q.dtype), u_s)), mask=m)
    state = ml.dot(k_s.T, u_s, state)
  sT.at[b][...] = state
