"""Probe 72a's corpus, its third part: recurrent cells as cuDNN-replacement, Mamba / RWKV / xLSTM and minGRU repos
port them: LSTM and GRU steps with fused pointwise gates (the gate pre-activations precomputed, and the per-step
h @ W_hh as a small register matmul), time loops carrying h and c, minGRU's sequential and log-space parallel forms,
RWKV-4's WKV with its running max, RWKV-6's matrix state, xLSTM's sLSTM (exponential gates, stabiliser) and mLSTM
(a matrix memory), an IndRNN and a QRNN f-pooling. Each batch row (or block of rows) a program."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72a_common import F32, S, normal, registry, sigmoid_np

CASES, case = registry()


# ---------------------------------------------------------------- LSTM / GRU
def lstm_np(gx, whh, h0, c0):
  """gx: (T, B, 4H) precomputed x @ W_ih + b; whh: (H, 4H); gates in torch's order i, f, g, o."""
  T = gx.shape[0]
  H = h0.shape[1]
  h, c = h0.astype(np.float64), c0.astype(np.float64)
  hs = []
  for t in range(T):
    g = gx[t] + h @ whh
    i, f, gg, o = sigmoid_np(g[:, :H]), sigmoid_np(g[:, H:2 * H]), np.tanh(g[:, 2 * H:3 * H]), sigmoid_np(g[:, 3 * H:])
    c = f * c + i * gg
    h = o * np.tanh(c)
    hs.append(h)
  return np.stack(hs).astype(np.float32), c.astype(np.float32)


def _lstm(sd, T=12, B=64, H=32):
  return (normal(sd, (T, B, 4 * H)), normal(sd + 1, (H, 4 * H), 0.2), normal(sd + 2, (B, H)), normal(sd + 3, (B, H))), {}


@mg.mgpu_kernel(out_shape=lambda gx, w, h0, c0: (S((gx.shape[0],) + h0.shape, F32), c0),
                grid=lambda gx, w, h0, c0: (h0.shape[0] // 64,))
def lstm_layer(gx, whh, h0, c0, hs, c_out):
  """A persistent LSTM layer (cuDNN's persistent kernel, reduced): 64 batch rows a program, W_hh read once, each
  step's h @ W_hh by jnp.dot of registers, the gates sliced from the (64, 4H) pre-activations and fused."""
  p = ml.program_id(0)
  H = h0.shape[1]
  rows = ml.ds(p * 64, 64)
  w = whh[...]
  h, c = h0[rows, :], c0[rows, :]
  for t in range(gx.shape[0]):
    g = gx[t, rows, :] + jnp.dot(h, w)
    i = jax.nn.sigmoid(g[:, :H])
    f = jax.nn.sigmoid(g[:, H:2 * H])
    gg = jnp.tanh(g[:, 2 * H:3 * H])
    o = jax.nn.sigmoid(g[:, 3 * H:])
    c = f * c + i * gg
    h = o * jnp.tanh(c)
    hs[t, rows, :] = h
  c_out[rows, :] = c


TF32 = 1e-2       # jnp.dot of float32 registers is TF32 on the tensor cores (as XLA's GPU default and tl.dot): 12 steps

case("lstm_layer_register_matmul", lstm_layer, _lstm, lstm_np, TF32)


@mg.mgpu_kernel(out_shape=lambda gx, w, h0, c0: (S((gx.shape[0],) + h0.shape, F32), c0),
                grid=lambda gx, w, h0, c0: (h0.shape[0] // 64,))
def lstm_layer_ml_dot(gx, whh, h0, c0, hs, c_out):
  """The same layer as a Triton port writes it: W_hh staged in SMEM once, each step's product by ml.dot of the
  bfloat16-free float32 h (TF32 on the tensor cores in Triton; here float32 operands), the gates as four
  separate column windows of W_hh (four dots), sigmoid written out as 1 / (1 + exp(-x))."""
  p = ml.program_id(0)
  H = h0.shape[1]
  rows = ml.ds(p * 64, 64)
  h, c = h0[rows, :], c0[rows, :]
  for t in range(gx.shape[0]):
    pre = [gx[t, rows, k * H:(k + 1) * H] + jnp.dot(h, whh[:, k * H:(k + 1) * H]) for k in range(4)]
    i = 1.0 / (1.0 + jnp.exp(-pre[0]))
    f = 1.0 / (1.0 + jnp.exp(-pre[1]))
    o = 1.0 / (1.0 + jnp.exp(-pre[3]))
    c = f * c + i * jnp.tanh(pre[2])
    h = o * jnp.tanh(c)
    hs[t, rows, :] = h
  c_out[rows, :] = c


case("lstm_four_gate_dots", lstm_layer_ml_dot, _lstm, lstm_np, TF32)


def gru_np(gx, whh, bhh, h0):
  T = gx.shape[0]
  H = h0.shape[1]
  h = h0.astype(np.float64)
  hs = []
  for t in range(T):
    gh = h @ whh + bhh
    r = sigmoid_np(gx[t, :, :H] + gh[:, :H])
    z = sigmoid_np(gx[t, :, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gx[t, :, 2 * H:] + r * gh[:, 2 * H:])
    h = (1 - z) * n + z * h
    hs.append(h)
  return np.stack(hs).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda gx, w, b, h0: S((gx.shape[0],) + h0.shape, F32),
                grid=lambda gx, w, b, h0: (h0.shape[0] // 64,))
def gru_layer(gx, whh, bhh, h0, hs):
  """torch's GRU cell over time: the reset gate scales the hidden part of the candidate (r * (W_hn h + b_hn)), h
  carried, the bias broadcast from a (3H,) vector."""
  p = ml.program_id(0)
  H = h0.shape[1]
  rows = ml.ds(p * 64, 64)
  w, b = whh[...], bhh[...]
  h = h0[rows, :]
  for t in range(gx.shape[0]):
    x = gx[t, rows, :]
    gh = jnp.dot(h, w) + b[None, :]
    r = jax.nn.sigmoid(x[:, :H] + gh[:, :H])
    z = jax.nn.sigmoid(x[:, H:2 * H] + gh[:, H:2 * H])
    n = jnp.tanh(x[:, 2 * H:] + r * gh[:, 2 * H:])
    h = (1.0 - z) * n + z * h
    hs[t, rows, :] = h


case("gru_layer_reset_gate", gru_layer,
     lambda sd: ((normal(sd, (10, 64, 96)), normal(sd + 1, (32, 96), 0.2), normal(sd + 2, (96,)), normal(sd + 3, (64, 32))), {}),
     gru_np, TF32)


# ---------------------------------------------------------------- minGRU
def mingru_np(k, hh, h0):
  """minGRU (Feng et al. 2024): z = sigmoid(k), h_t = (1 - z) h_{t-1} + z g(h~), g(x) = x + 0.5 (x >= 0), sigmoid
  else; k, hh: (B, T, D)."""
  g = np.where(hh >= 0, hh + 0.5, sigmoid_np(hh))
  z = sigmoid_np(k)
  h = h0.astype(np.float64)
  out = np.zeros(k.shape, np.float64)
  for t in range(k.shape[1]):
    h = (1 - z[:, t]) * h + z[:, t] * g[:, t]
    out[:, t] = h
  return out.astype(np.float32)


def _mingru(sd, B=4, T=64, D=64):
  return (normal(sd, (B, T, D)), normal(sd + 1, (B, T, D)), np.abs(normal(sd + 2, (B, D))) + 0.1), {}


@mg.mgpu_kernel(out_shape=lambda k, hh, h0: k, grid=lambda k, hh, h0: (k.shape[0],))
def mingru_sequential(k, hh, h0, out):
  """minGRU's sequential mode: a (D,) state carried over time, g() a select."""
  b = ml.program_id(0)
  h = h0[b, :]
  for t in range(k.shape[1]):
    z = jax.nn.sigmoid(k[b, t, :])
    x = hh[b, t, :]
    g = jnp.where(x >= 0, x + 0.5, jax.nn.sigmoid(x))
    h = (1.0 - z) * h + z * g
    out[b, t, :] = h


case("mingru_sequential", mingru_sequential, _mingru, mingru_np, 1e-5)


@mg.mgpu_kernel(out_shape=lambda k, hh, h0: k, grid=lambda k, hh, h0: (k.shape[0],))
def mingru_log_space_scan(k, hh, h0, out):
  """minGRU's parallel mode (the paper's log-space Heinsen scan): log a = -softplus(k), log b = -softplus(-k) +
  log g(h~), h = exp(a* + logcumsumexp(log b - a*)) with a* = cumsum(log a) along time; h0 enters as the first
  log b term. One (T, D) tile a program."""
  b = ml.program_id(0)
  kk, x = k[b], hh[b]
  log_z = -jax.nn.softplus(-kk)
  log_1mz = -jax.nn.softplus(kk)
  log_g = jnp.where(x >= 0, jnp.log(jnp.maximum(x + 0.5, 1e-30)), -jax.nn.softplus(-x))
  a_star = jnp.cumsum(log_1mz, axis=0)
  log_h0 = jnp.log(h0[b, :])[None, :]
  lb = log_z + log_g - a_star
  lse = jax.lax.cumlogsumexp(lb, axis=0)
  out[b] = jnp.exp(a_star + jnp.logaddexp(log_h0, lse))


case("mingru_log_space_heinsen_scan", mingru_log_space_scan, _mingru, mingru_np, 2e-4)


# ---------------------------------------------------------------- RWKV
def wkv4_np(w, u, k, v):
  """RWKV-4's WKV (B, T, C), w the (negative) decay, u the bonus, as the CUDA kernel's stable form."""
  B, T, C = k.shape
  y = np.zeros((B, T, C), np.float64)
  for b in range(B):
    aa = np.zeros(C)
    bb = np.zeros(C)
    pp = np.full(C, -1e38)
    for t in range(T):
      kk, vv = k[b, t].astype(np.float64), v[b, t]
      ww = u + kk
      p = np.maximum(pp, ww)
      e1, e2 = np.exp(pp - p), np.exp(ww - p)
      y[b, t] = (e1 * aa + e2 * vv) / (e1 * bb + e2)
      ww = w + pp
      p = np.maximum(ww, kk)
      e1, e2 = np.exp(ww - p), np.exp(kk - p)
      aa = e1 * aa + e2 * vv
      bb = e1 * bb + e2
      pp = p
  return y.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda w, u, k, v: k, grid=lambda w, u, k, v: (k.shape[0],))
def rwkv4_wkv(w, u, k, v, y):
  """RWKV-4's wkv_cuda forward: per channel the running numerator aa, denominator bb and max exponent pp carried
  through time, each step a stabilised exp; -1e38 as the first max."""
  b = ml.program_id(0)
  C = k.shape[2]
  ww_, uu = w[...], u[...]
  aa = ml.zeros((C,), jnp.float32)
  bb = ml.zeros((C,), jnp.float32)
  pp = ml.full((C,), -1e38, jnp.float32)
  for t in range(k.shape[1]):
    kk, vv = k[b, t, :], v[b, t, :]
    ww = uu + kk
    p = ml.maximum(pp, ww)
    e1, e2 = ml.exp(pp - p), ml.exp(ww - p)
    y[b, t, :] = (e1 * aa + e2 * vv) / (e1 * bb + e2)
    ww = ww_ + pp
    p = ml.maximum(ww, kk)
    e1, e2 = ml.exp(ww - p), ml.exp(kk - p)
    aa = e1 * aa + e2 * vv
    bb = e1 * bb + e2
    pp = p


case("rwkv4_wkv_running_max", rwkv4_wkv,
     lambda sd: ((-np.exp(normal(sd, (64,)) * 0.5), normal(sd + 1, (64,)), normal(sd + 2, (4, 32, 64)),
                  normal(sd + 3, (4, 32, 64))), {}), wkv4_np, 2e-4)


def wkv6_np(r, k, v, w, u):
  """RWKV-6 per head: S (K, V) state, y_t = r_t (S + u k_t^T v_t), S = diag(w_t) S + k_t^T v_t."""
  B, T, K = r.shape
  V = v.shape[2]
  y = np.zeros((B, T, V))
  for b in range(B):
    Sm = np.zeros((K, V))
    for t in range(T):
      kv = np.outer(k[b, t], v[b, t])
      y[b, t] = r[b, t] @ (Sm + u[:, None] * kv)
      Sm = w[b, t][:, None] * Sm + kv
  return y.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda r, k, v, w, u: v, grid=lambda r, k, v, w, u: (r.shape[0],))
def rwkv6_matrix_state(r, k, v, w, u, y):
  """RWKV-6 (Finch) recurrent form, one head a program: the (K, V) state carried in registers, the outer product
  k^T v by broadcasting, the data-dependent decay w_t per key row, the bonus u; y_t = sum over keys of
  r_t[:, None] * (S + u * kv)."""
  b = ml.program_id(0)
  K, V = r.shape[2], v.shape[2]
  uu = u[...]
  Sm = ml.zeros((K, V), jnp.float32)
  for t in range(r.shape[1]):
    kv = k[b, t, :][:, None] * v[b, t, :][None, :]
    y[b, t, :] = jnp.sum(r[b, t, :][:, None] * (Sm + uu[:, None] * kv), axis=0)
    Sm = w[b, t, :][:, None] * Sm + kv


case("rwkv6_matrix_state_outer_products", rwkv6_matrix_state,
     lambda sd: ((normal(sd, (4, 16, 32)), normal(sd + 1, (4, 16, 32)), normal(sd + 2, (4, 16, 64)),
                  np.exp(-np.exp(normal(sd + 3, (4, 16, 32)) * 0.3)).astype(np.float32), normal(sd + 4, (32,))), {}),
     wkv6_np, 2e-4)


# ---------------------------------------------------------------- xLSTM
def slstm_np(zx, ix, fx, ox):
  """xLSTM's sLSTM pointwise recurrence with exponential gates and the stabiliser m (no recurrent matrices)."""
  B, T, D = zx.shape
  c = np.zeros((B, D))
  n = np.zeros((B, D))
  m = np.zeros((B, D))
  hs = np.zeros((B, T, D))
  for t in range(T):
    logf = -np.log1p(np.exp(-fx[:, t]))          # log sigmoid
    m_new = np.maximum(logf + m, ix[:, t])
    i = np.exp(ix[:, t] - m_new)
    f = np.exp(logf + m - m_new)
    c = f * c + i * np.tanh(zx[:, t])
    n = f * n + i
    m = m_new
    hs[:, t] = sigmoid_np(ox[:, t]) * c / n
  return hs.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda z, i, f, o: z, grid=lambda z, i, f, o: (z.shape[0] // 8,))
def slstm_pointwise(zx, ix, fx, ox, hs):
  """sLSTM's stabilised exponential gating, 8 sequences a program as (8, D) tiles: log-sigmoid forget gate by
  jax.nn.log_sigmoid, the stabiliser m a running max, c, n, m carried."""
  p = ml.program_id(0)
  rows = ml.ds(p * 8, 8)
  D = zx.shape[2]
  c = ml.zeros((8, D), jnp.float32)
  n = ml.zeros((8, D), jnp.float32)
  m = ml.zeros((8, D), jnp.float32)
  for t in range(zx.shape[1]):
    it = ix[rows, t, :]
    logf = jax.nn.log_sigmoid(fx[rows, t, :])
    m_new = jnp.maximum(logf + m, it)
    i = jnp.exp(it - m_new)
    f = jnp.exp(logf + m - m_new)
    c = f * c + i * jnp.tanh(zx[rows, t, :])
    n = f * n + i
    m = m_new
    hs[rows, t, :] = jax.nn.sigmoid(ox[rows, t, :]) * c / n


case("slstm_exponential_gates_stabiliser", slstm_pointwise,
     lambda sd: (tuple(normal(sd + j, (16, 20, 64)) for j in range(4)), {}), slstm_np, 2e-4)


def mlstm_np(q, k, v, ig, fg):
  """xLSTM's mLSTM recurrent form, one head: C (D, D) memory, n (D,) normaliser, m stabiliser scalar."""
  B, T, D = q.shape
  out = np.zeros((B, T, D))
  for b in range(B):
    C = np.zeros((D, D))
    n = np.zeros(D)
    m = 0.0
    for t in range(T):
      logf = -np.log1p(np.exp(-fg[b, t]))
      m_new = max(logf + m, ig[b, t])
      i = np.exp(ig[b, t] - m_new)
      f = np.exp(logf + m - m_new)
      kt = k[b, t] / np.sqrt(D)
      C = f * C + i * np.outer(v[b, t], kt)
      n = f * n + i * kt
      m = m_new
      h = C @ q[b, t]
      out[b, t] = h / max(abs(n @ q[b, t]), np.exp(-m))
  return out.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda q, k, v, i, f: q, grid=lambda q, k, v, i, f: (q.shape[0],))
def mlstm_recurrent(q, k, v, ig, fg, out):
  """mLSTM's step (the xlstm repo's recurrent kernel): scalar gates read per step, the stabiliser a scalar carry,
  the (D, D) memory updated by an outer product, h = C q as a row reduction, the normaliser max(|n.q|, exp(-m))."""
  b = ml.program_id(0)
  D = q.shape[2]
  C = ml.zeros((D, D), jnp.float32)
  n = ml.zeros((D,), jnp.float32)
  m = 0.0
  for t in range(q.shape[1]):
    logf = jax.nn.log_sigmoid(fg[b, t])
    m_new = jnp.maximum(logf + m, ig[b, t])
    i = jnp.exp(ig[b, t] - m_new)
    f = jnp.exp(logf + m - m_new)
    kt = k[b, t, :] / np.sqrt(D)
    C = f * C + i * (v[b, t, :][:, None] * kt[None, :])
    n = f * n + i * kt
    m = m_new
    qt = q[b, t, :]
    h = jnp.sum(C * qt[None, :], axis=1)
    out[b, t, :] = h / jnp.maximum(jnp.abs(jnp.sum(n * qt)), jnp.exp(-m))


case("mlstm_matrix_memory_scalar_gates", mlstm_recurrent,
     lambda sd: ((normal(sd, (4, 12, 32)), normal(sd + 1, (4, 12, 32)), normal(sd + 2, (4, 12, 32)),
                  normal(sd + 3, (4, 12)), normal(sd + 4, (4, 12)) + 2.0), {}), mlstm_np, 2e-4)


# ---------------------------------------------------------------- simple recurrent units
def indrnn_np(x, u, h0):
  h = h0.astype(np.float64)
  out = np.zeros(x.shape)
  for t in range(x.shape[1]):
    h = np.maximum(x[:, t] + u * h, 0)
    out[:, t] = h
  return out.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x, u, h0: x, grid=lambda x, u, h0: (x.shape[0] // 16, x.shape[2] // 64))
def indrnn(x, u, h0, out):
  """IndRNN (an elementwise recurrent weight, relu): a 2-D grid over batch blocks and channel blocks, (16, 64)
  tiles carried over time."""
  pb, pc = ml.program_id(0), ml.program_id(1)
  rows, cols = ml.ds(pb * 16, 16), ml.ds(pc * 64, 64)
  uu = u[cols]
  h = h0[rows, cols]
  for t in range(x.shape[1]):
    h = jax.nn.relu(x[rows, t, cols] + uu[None, :] * h)
    out[rows, t, cols] = h


case("indrnn_2d_grid_relu", indrnn,
     lambda sd: ((normal(sd, (32, 16, 128)), normal(sd + 1, (128,), 0.5), normal(sd + 2, (32, 128))), {}), indrnn_np)


def qrnn_np(z, f):
  h = np.zeros(z[:, 0].shape)
  out = np.zeros(z.shape)
  for t in range(z.shape[1]):
    ft = sigmoid_np(f[:, t])
    h = ft * h + (1 - ft) * np.tanh(z[:, t])
    out[:, t] = h
  return out.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda z, f: z, grid=lambda z, f: (z.shape[0],))
def qrnn_fo_pool(z, f, out):
  """QRNN's f-pooling (the CUDA `recurrent_forget_mult` kernel): one sequence a program, the (T, D) tiles read
  whole, rows taken one at a time in a time loop (z[t] of registers), h written back row by row into SMEM, the
  SMEM stored once."""
  b = ml.program_id(0)
  T, D = z.shape[1], z.shape[2]
  buf = ml.smem((T, D), jnp.float32)
  h = ml.zeros((D,), jnp.float32)
  for t in range(T):
    ft = jax.nn.sigmoid(f[b, t, :])
    h = ft * h + (1.0 - ft) * jnp.tanh(z[b, t, :])
    buf[t, :] = h
  ml.copy(buf, out.at[b])


case("qrnn_forget_mult_smem_rows", qrnn_fo_pool,
     lambda sd: ((normal(sd, (4, 32, 64)), normal(sd + 1, (4, 32, 64))), {}), qrnn_np)


def elman_np(x, W, U, b):
  h = np.zeros((x.shape[0], W.shape[0]))
  out = np.zeros((x.shape[0], x.shape[1], W.shape[0]))
  for t in range(x.shape[1]):
    h = np.tanh(h @ W.T + x[:, t] @ U.T + b)
    out[:, t] = h
  return out.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x, W, U, b: S(x.shape[:2] + (W.shape[0],), F32), grid=lambda x, W, U, b: (x.shape[0],))
def elman_rnn_matvec(x, W, U, b, out):
  """A vanilla (Elman) RNN one sequence a program, written as the textbook h = tanh(W @ h + U @ x_t + b): matrix-
  vector products of a (32, 32) and a (32, 16) weight with the carried h (MG204 before probe 72a: the product's
  own broadcast of h was taken for NumPy's alignment)."""
  p = ml.program_id(0)
  Wm, Um, bv = W[...], U[...], b[...]
  h = ml.zeros((W.shape[0],), jnp.float32)
  for t in range(x.shape[1]):
    h = jnp.tanh(Wm @ h + Um @ x[p, t, :] + bv)
    out[p, t, :] = h


case("elman_rnn_matvec_carry", elman_rnn_matvec,
     lambda sd: ((normal(sd, (4, 16, 16)), normal(sd + 1, (32, 32), 0.2), normal(sd + 2, (32, 16), 0.3),
                  normal(sd + 3, (32,), 0.1)), {}), elman_np, 1e-5)
