"""Probe 60b's corpus, part b (registered in probe60b_common.CASES; tests/test_probe60b.py runs them)."""

import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe_util import rnd
from probe60b_common import S, BF16, F32, _MODE, CASES, _export, close


# ================================================================ (b6)

# ---- FlagGems log_softmax over dim 1 of (M, N, K): program per (m, k-block), chunked N twice
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK_N, BLOCK_K: x, grid=lambda x, *, BLOCK_N, BLOCK_K: (x.shape[0], tl.cdiv(x.shape[2], BLOCK_K)))
def log_softmax_dim1(inp, out, *, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
  M, N, K = inp.shape
  pid_m = tl.program_id(0)
  pid_k = tl.program_id(1)
  k_offsets = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
  m = tl.full([BLOCK_N, BLOCK_K], value=float("-inf"), dtype=tl.float32)
  z = tl.full([BLOCK_N, BLOCK_K], value=0.0, dtype=tl.float32)
  for start_n in range(0, N, BLOCK_N):
    n_offsets = start_n + tl.arange(0, BLOCK_N)
    mask = (n_offsets[:, None] < N) & (k_offsets[None, :] < K)
    inp_v = tl.load(inp.at[pid_m, n_offsets[:, None], k_offsets[None, :]], mask=mask, other=-float("inf")).to(tl.float32)
    m_new = tl.maximum(inp_v, m)
    all_neg_inf = m_new == float("-inf")
    z = tl.where(all_neg_inf, z, z * tl.exp(m - m_new) + tl.exp(inp_v - m_new))
    m = m_new
  m_reduced = tl.max(m, 0)
  z = tl.sum(z * tl.exp(m - m_reduced[None, :]), 0)
  m = m_reduced
  for start_n in range(0, N, BLOCK_N):
    n_offsets = start_n + tl.arange(0, BLOCK_N)
    mask = (n_offsets[:, None] < N) & (k_offsets[None, :] < K)
    inp_v = tl.load(inp.at[pid_m, n_offsets[:, None], k_offsets[None, :]], mask=mask, other=-float("inf")).to(tl.float32)
    o = inp_v - m[None, :] - tl.log(z[None, :])
    tl.store(out.at[pid_m, n_offsets[:, None], k_offsets[None, :]], o, mask=mask)
def t_lsm(M, N, K, dt, BN, BK):
  x = rnd((M, N, K), 1, dt)
  o = log_softmax_dim1(x, BLOCK_N=BN, BLOCK_K=BK, **_MODE)
  xf = x.astype(np.float64); mx = xf.max(1, keepdims=True)
  close(o, xf - mx - np.log(np.exp(xf - mx).sum(1, keepdims=True)), 2e-2 if dt != np.float32 else 1e-4)
  _export(log_softmax_dim1, x, BLOCK_N=BN, BLOCK_K=BK)
CASES["lsm_dim1_f32"] = lambda: t_lsm(2, 100, 50, np.float32, 32, 64)
CASES["lsm_dim1_bf16"] = lambda: t_lsm(3, 1000, 7, BF16, 128, 8)

# ---- Liger jsd (beta) forward+grad, chunked
@mg.mgpu_kernel(out_shape=lambda X, Y, *, beta, n_non_ignore, BLOCK_SIZE: (X, X), grid=lambda X, *a, **k: (X.shape[0],))
def jsd_kernel(X_ptr, Y_ptr, loss_ptr, dX_ptr, *, beta: tl.constexpr, n_non_ignore: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  for i in range(0, n_cols, BLOCK_SIZE):
    offsets = i + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_cols
    X = tl.load(X_ptr.at[pid, offsets], mask=mask, other=float("-inf")).to(tl.float32)
    Y = tl.load(Y_ptr.at[pid, offsets], mask=mask, other=float("-inf")).to(tl.float32)
    if beta == 0.0:
      Y_max = tl.max(Y, axis=0)
      Y_shifted = Y - Y_max
      Y_prob = tl.exp(Y_shifted) * tl.exp(Y_max)
      loss = Y_prob * (Y - X)
      dX = -Y_prob
    elif beta == 1.0:
      X_max = tl.max(X, axis=0)
      X_prob = tl.exp(X - X_max) * tl.exp(X_max)
      loss = X_prob * (X - Y)
      dX = loss + X_prob
    else:
      max_val = tl.maximum(tl.max(X, axis=0), tl.max(Y, axis=0))
      X_shifted = X - max_val
      Y_shifted = Y - max_val
      exp_max = tl.exp(max_val)
      Q = tl.exp(X_shifted) * exp_max
      P = tl.exp(Y_shifted) * exp_max
      beta_P = beta * P
      one_minus_beta_Q = (1 - beta) * Q
      M = beta_P + one_minus_beta_Q
      log_M = tl.log(M)
      loss = beta_P * Y + one_minus_beta_Q * X - M * log_M
      dX = one_minus_beta_Q * (X - log_M)
    scale = 1.0 / n_non_ignore
    loss = loss * scale
    dX = dX * scale
    tl.store(loss_ptr.at[pid, offsets], loss, mask=mask)
    tl.store(dX_ptr.at[pid, offsets], dX, mask=mask)
def t_jsd(n, V, beta):
  X = np.log(np.random.default_rng(1).dirichlet(np.ones(V), n)).astype(np.float32)
  Y = np.log(np.random.default_rng(2).dirichlet(np.ones(V), n)).astype(np.float32)
  loss, dX = jsd_kernel(X, Y, beta=beta, n_non_ignore=n, BLOCK_SIZE=8192, **_MODE)
  Q, P = np.exp(X.astype(np.float64)), np.exp(Y.astype(np.float64))
  if beta == 0.0: wl = P * (Y - X); wd = -P
  elif beta == 1.0: wl = Q * (X - Y); wd = wl + Q
  else:
    Mm = beta * P + (1 - beta) * Q; wl = beta * P * Y + (1 - beta) * Q * X - Mm * np.log(Mm); wd = (1 - beta) * Q * (X - np.log(Mm))
  close(loss, wl / n, 1e-4); close(dX, wd / n, 1e-4)
  _export(jsd_kernel, X, Y, beta=beta, n_non_ignore=n, BLOCK_SIZE=8192)
CASES["jsd_half"] = lambda: t_jsd(3, 32000, 0.5)
CASES["jsd_0"] = lambda: t_jsd(2, 5000, 0.0)

# ---- Liger tvd
@mg.mgpu_kernel(out_shape=lambda p, q, *, BLOCK_SIZE: (p, p), grid=lambda p, *a, **k: (p.shape[0],))
def tvd_kernel(p_ptr, q_ptr, loss_ptr, grads_ptr, *, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(0).to(tl.int64)
  n_cols = p_ptr.shape[1]
  for i in range(0, n_cols, BLOCK_SIZE):
    offsets = i + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_cols
    p = tl.load(p_ptr.at[pid, offsets], mask=mask, other=0.0)
    q = tl.load(q_ptr.at[pid, offsets], mask=mask, other=0.0)
    tv_loss = 0.5 * tl.abs(p - q)
    grad_res = tl.where(p > q, 0.5, -0.5)
    tl.store(loss_ptr.at[pid, offsets], tv_loss, mask=mask)
    tl.store(grads_ptr.at[pid, offsets], grad_res, mask=mask)
def t_tvd():
  p, q = rnd((5, 3333), 1), rnd((5, 3333), 2)
  l, g = tvd_kernel(p, q, BLOCK_SIZE=1024, **_MODE)
  close(l, 0.5 * np.abs(p - q)); close(g, np.where(p > q, 0.5, -0.5)); _export(tvd_kernel, p, q, BLOCK_SIZE=1024)
CASES["tvd"] = t_tvd

# ---- FlagGems topk (values and indices of the last axis, small k) and sort
@mg.mgpu_kernel(out_shape=lambda x, *, k, BLOCK: (S((x.shape[0], k), x.dtype), S((x.shape[0], k), jnp.int32)), grid=lambda x, **kw: (x.shape[0],))
def topk_row(x_ptr, v_ptr, i_ptr, *, k: tl.constexpr, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[pid, cols], mask=cols < x_ptr.shape[1], other=float("-inf"))
  v, i = tl.top_k(x, k)
  kk = tl.arange(0, k)
  tl.store(v_ptr.at[pid, kk], v)
  tl.store(i_ptr.at[pid, kk], i)
def t_topk(n, V, k, dt):
  x = rnd((n, V), 3, dt)
  v, i = topk_row(x, k=k, BLOCK=1 << (V - 1).bit_length(), **_MODE)
  order = np.argsort(-x.astype(np.float32), 1, kind="stable")[:, :k]
  np.testing.assert_array_equal(np.asarray(i), order); np.testing.assert_array_equal(np.asarray(v), np.take_along_axis(x, order, 1))
  _export(topk_row, x, k=k, BLOCK=1 << (V - 1).bit_length())
CASES["topk_f32"] = lambda: t_topk(4, 1000, 8, np.float32)
CASES["topk_bf16"] = lambda: t_topk(3, 128, 2, BF16)

# ---- Liger sparsemax forward: sort descending, cumsum, support size
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: x, grid=lambda x, **k: (x.shape[0],))
def sparsemax_fwd(x_ptr, o_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  n_cols = x_ptr.shape[1]
  offs = tl.arange(0, BLOCK)
  mask = offs < n_cols
  x = tl.load(x_ptr.at[pid, offs], mask=mask, other=-float("inf")).to(tl.float32)
  z_sorted = tl.sort(x, descending=True)
  z_valid = tl.where(mask, z_sorted, 0.0)
  cssv = tl.cumsum(z_valid, 0)
  r = (offs + 1).to(tl.float32)
  support = (z_sorted * r > (cssv - 1)) & mask
  k = tl.sum(support.to(tl.int32), 0)
  k_f = k.to(tl.float32)
  s = tl.sum(tl.where(support, z_sorted, 0.0), 0)
  tau = (s - 1) / k_f
  y = tl.maximum(x - tau, 0.0)
  tl.store(o_ptr.at[pid, offs], y.to(o_ptr.dtype.element_ty), mask=mask)
def t_sm(n, V):
  x = rnd((n, V), 4) * 2
  o = sparsemax_fwd(x, BLOCK=1 << (V - 1).bit_length(), **_MODE)
  z = -np.sort(-x, 1); css = np.cumsum(z, 1); r = np.arange(1, V + 1)
  sup = z * r > css - 1; kk = sup.sum(1); tau = (np.take_along_axis(css, kk[:, None] - 1, 1)[:, 0] - 1) / kk
  close(o, np.maximum(x - tau[:, None], 0), 1e-5)
  _export(sparsemax_fwd, x, BLOCK=1 << (V - 1).bit_length())
CASES["sparsemax_odd"] = lambda: t_sm(5, 300)
CASES["sparsemax_1024"] = lambda: t_sm(2, 1024)

# ================================================================ (b7)

# ---- Liger CE variant: the gradient read and written through the aliased output only
@mg.mgpu_kernel(out_shape=lambda X, Y, *, BLOCK_SIZE: (X, S((X.shape[0],), F32)), grid=lambda X, *a, **k: (X.shape[0],),
                input_output_aliases={0: 0})
def ce_inplace(X_in, Y_ptr, X_ptr, loss_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  y = tl.load(Y_ptr.at[program_id])
  m = float("-inf")
  d = 0.0
  ori_X_y = tl.load(X_ptr.at[program_id, y]).cast(tl.float32)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
    block_max = tl.max(X_block)
    m_new = tl.maximum(m, block_max)
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
    m = m_new
  lse = m + tl.log(d)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
    X_block = tl.exp(X_block - m) / d
    X_block = tl.where(X_offsets != y, X_block, X_block - 1)
    tl.store(X_ptr.at[program_id, X_offsets], X_block, mask=X_offsets < n_cols)
  tl.debug_barrier()
  tl.store(loss_ptr.at[program_id], lse - ori_X_y)
def t_cei(n, V, dt):
  x = (rnd((n, V), 1) * 2).astype(dt); y = np.random.default_rng(3).integers(0, V, n).astype(np.int32)
  g, l = ce_inplace(x, y, BLOCK_SIZE=4096, **_MODE)
  xf = x.astype(np.float64); m = xf.max(1, keepdims=True); lse = m[:, 0] + np.log(np.exp(xf - m).sum(1))
  p = np.exp(xf - lse[:, None]); p[np.arange(n), y] -= 1
  close(l, lse - xf[np.arange(n), y], 2e-3); close(g, p, 1e-2 if dt != np.float32 else 1e-5)
  _export(ce_inplace, x, y, BLOCK_SIZE=4096)
CASES["ce_inplace_f32_128256"] = lambda: t_cei(3, 128256, np.float32)
CASES["ce_inplace_bf16"] = lambda: t_cei(5, 50257, BF16)

# ---- Unsloth chunked CE: lse per (row, chunk) with softcapping and logit scaling
@mg.mgpu_kernel(out_shape=lambda logits, labels, *, N_CHUNKS, BLOCK_SIZE, SOFTCAP, LOGIT_SCALE: (S((logits.shape[0],), F32), S((logits.shape[0], N_CHUNKS), F32)),
                grid=lambda logits, labels, *, N_CHUNKS, **k: (logits.shape[0], N_CHUNKS))
def unsloth_chunked_ce(logits_ptr, labels_ptr, loss_ptr, logsumexp_ptr, *, N_CHUNKS: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                       SOFTCAP: tl.constexpr, LOGIT_SCALE: tl.constexpr):
  row_idx = tl.program_id(0)
  chunk_idx = tl.program_id(1)
  VOCAB_SIZE = logits_ptr.shape[1]
  col_offsets = chunk_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < VOCAB_SIZE
  label_idx = tl.load(labels_ptr.at[row_idx]).to(tl.int32)
  logits = tl.load(logits_ptr.at[row_idx, col_offsets], mask=mask, other=-float("inf")).to(tl.float32)
  if LOGIT_SCALE != 0:
    logits = LOGIT_SCALE * logits
  if SOFTCAP != 0:
    logits = SOFTCAP * tl.math.tanh(logits / SOFTCAP)
  c = tl.max(logits, 0)
  logsumexp = c + tl.log(tl.sum(tl.exp(logits - c), 0))
  if chunk_idx == 0:
    if label_idx != -100:
      x = tl.load(logits_ptr.at[row_idx, label_idx]).to(tl.float32)
      if LOGIT_SCALE != 0:
        x = LOGIT_SCALE * x
      if SOFTCAP != 0:
        x = SOFTCAP * tl.math.tanh(x / SOFTCAP)
      loss = -1.0 * x
    else:
      loss = 0.0
    tl.store(loss_ptr.at[row_idx], loss)
  tl.store(logsumexp_ptr.at[row_idx, chunk_idx], logsumexp)
def t_uce(n, V, dt):
  BS = 65536 // 4
  NC = -(-V // BS)
  x = (rnd((n, V), 5) * 3).astype(dt); y = np.random.default_rng(6).integers(0, V, n).astype(np.int32); y[0] = -100
  loss, lse = unsloth_chunked_ce(x, y, N_CHUNKS=NC, BLOCK_SIZE=BS, SOFTCAP=30.0, LOGIT_SCALE=0.5, **_MODE)
  z = 30 * np.tanh(0.5 * x.astype(np.float64) / 30)
  tot = np.log(np.exp(np.asarray(lse, np.float64)).sum(1))
  m = z.max(1, keepdims=True)
  close(tot, m[:, 0] + np.log(np.exp(z - m).sum(1)), 1e-3)
  wl = -z[np.arange(n), np.where(y < 0, 0, y)]; wl[y == -100] = 0
  close(loss, wl, 1e-3)
  _export(unsloth_chunked_ce, x, y, N_CHUNKS=NC, BLOCK_SIZE=BS, SOFTCAP=30.0, LOGIT_SCALE=0.5)
CASES["unsloth_ce_chunks_bf16"] = lambda: t_uce(3, 128256, BF16)

# ---- Unsloth rope with ROPE_GROUP_SIZE head loops, flat pointers with row strides
@mg.mgpu_kernel(out_shape=lambda Q, cos, sin, *, n_heads, head_dim, seqlen, BLOCK_SIZE, ROPE_GROUP_SIZE: Q,
                grid=lambda Q, cos, sin, *, n_heads, ROPE_GROUP_SIZE, **k: (Q.shape[0], tl.cdiv(n_heads, ROPE_GROUP_SIZE)))
def unsloth_rope(Q, cos, sin, Qo, *, n_heads: tl.constexpr, head_dim: tl.constexpr, seqlen: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                 ROPE_GROUP_SIZE: tl.constexpr):
  row_position = tl.program_id(0)
  group_head_position = tl.program_id(1)
  col_offsets = tl.arange(0, BLOCK_SIZE)
  half_head_dim = head_dim // 2
  mask = col_offsets < half_head_dim
  sin1 = tl.load(sin.at[(row_position % seqlen), half_head_dim * 0 + col_offsets], mask=mask, other=0)
  cos1 = tl.load(cos.at[(row_position % seqlen), half_head_dim * 0 + col_offsets], mask=mask, other=0)
  head_start = group_head_position * ROPE_GROUP_SIZE
  head_end = min((head_start + ROPE_GROUP_SIZE), n_heads)
  for k in range(head_start, head_end):
    offs_q1 = k * head_dim + col_offsets
    offs_q2 = k * head_dim + col_offsets + half_head_dim
    Q1 = tl.load(Q.at[row_position, offs_q1], mask=mask, other=0).to(sin1.dtype)
    Q2 = tl.load(Q.at[row_position, offs_q2], mask=mask, other=0).to(sin1.dtype)
    tl.store(Qo.at[row_position, offs_q1], Q1 * cos1 - Q2 * sin1, mask=mask)
    tl.store(Qo.at[row_position, offs_q2], Q2 * cos1 + Q1 * sin1, mask=mask)
def t_ur(rows, seqlen, nh, hd, dt):
  q = rnd((rows, nh * hd), 1, dt)
  th = np.arange(seqlen)[:, None] * (1e4 ** (-np.arange(hd // 2) / (hd // 2)))[None]
  cos, sin = np.cos(th).astype(np.float32), np.sin(th).astype(np.float32)
  kw = dict(n_heads=nh, head_dim=hd, seqlen=seqlen, BLOCK_SIZE=1 << (hd // 2 - 1).bit_length(), ROPE_GROUP_SIZE=4)
  o = unsloth_rope(q, cos, sin, **kw, **_MODE)
  qf = q.astype(np.float32).reshape(rows, nh, hd); c = cos[np.arange(rows) % seqlen][:, None]; s = sin[np.arange(rows) % seqlen][:, None]
  want = np.concatenate([qf[..., :hd // 2] * c - qf[..., hd // 2:] * s, qf[..., hd // 2:] * c + qf[..., :hd // 2] * s], -1).reshape(rows, -1)
  close(o, want, 2e-2 if dt != np.float32 else 1e-5)
  _export(unsloth_rope, q, cos, sin, **kw)
CASES["unsloth_rope_bf16"] = lambda: t_ur(6, 3, 10, 128, BF16)
CASES["unsloth_rope_f16_hd64"] = lambda: t_ur(5, 5, 7, 64, np.float16)

# ---- fast_lora style: (M, r) = X (M, K) @ A (K, r), small r, K loop, tl.dot in registers
@mg.mgpu_kernel(out_shape=lambda X, A, *, BM, BK: S((X.shape[0], A.shape[1]), F32), grid=lambda X, A, *, BM, BK: (tl.cdiv(X.shape[0], BM),))
def lora_down(X, A, O, *, BM: tl.constexpr, BK: tl.constexpr):
  pid = tl.program_id(0)
  M, K = X.shape
  R = A.shape[1]
  rm = pid * BM + tl.arange(0, BM)
  rr = tl.arange(0, R)
  acc = tl.zeros((BM, R), dtype=tl.float32)
  for k in range(0, tl.cdiv(K, BK)):
    rk = k * BK + tl.arange(0, BK)
    a = tl.load(X.at[rm[:, None], rk[None, :]], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(A.at[rk[:, None], rr[None, :]], mask=rk[:, None] < K, other=0.0)
    acc += tl.dot(a, b)
  tl.store(O.at[rm[:, None], rr[None, :]], acc, mask=rm[:, None] < M)
def t_lora(M, K, R, dt):
  x, a = rnd((M, K), 1, dt), rnd((K, R), 2, dt)
  o = lora_down(x, a, BM=64, BK=64, **_MODE)
  close(o, x.astype(np.float64) @ a.astype(np.float64), 3e-2)
  _export(lora_down, x, a, BM=64, BK=64)
CASES["lora_down_bf16_r16"] = lambda: t_lora(100, 4096, 16, BF16)
CASES["lora_down_f16_r32_oddK"] = lambda: t_lora(64, 1000, 32, np.float16)

# ================================================================ (b8)

# ---- embedding forward with padding_idx, backward with atomics
@mg.mgpu_kernel(out_shape=lambda ids, W, *, BLOCK_N, padding_idx: S((ids.shape[0], W.shape[1]), W.dtype), grid=lambda ids, W, **k: (ids.shape[0], tl.cdiv(W.shape[1], k["BLOCK_N"])))
def embedding_fwd(ids_ptr, W_ptr, out_ptr, *, BLOCK_N: tl.constexpr, padding_idx: tl.constexpr):
  pid = tl.program_id(axis=0)
  pid_n = tl.program_id(axis=1)
  D = W_ptr.shape[1]
  cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
  cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK_N), BLOCK_N)
  mask = cols < D
  tok = tl.load(ids_ptr.at[pid])
  row = tl.load(W_ptr.at[tok, cols], mask=mask & (tok != padding_idx), other=0.0)
  tl.store(out_ptr.at[pid, cols], row, mask=mask)
@mg.mgpu_kernel(out_shape=lambda ids, dY, dW0, *, BLOCK_N: dW0, grid=lambda ids, dY, dW0, **k: (ids.shape[0],), input_output_aliases={2: 0})
def embedding_bwd(ids_ptr, dY_ptr, dW_in, dW_ptr, *, BLOCK_N: tl.constexpr):
  pid = tl.program_id(0)
  D = dY_ptr.shape[1]
  tok = tl.load(ids_ptr.at[pid])
  for off in tl.static_range(0, 4):
    cols = off * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < D
    g = tl.load(dY_ptr.at[pid, cols], mask=mask, other=0.0)
    tl.atomic_add(dW_ptr.at[tok, cols], g, mask=mask)
def t_emb(n, V, D, dt):
  W = rnd((V, D), 1, dt); ids = np.random.default_rng(2).integers(0, V, n).astype(np.int32); ids[1] = 0
  o = embedding_fwd(ids, W, BLOCK_N=256, padding_idx=0, **_MODE)
  want = W[ids].copy(); want[ids == 0] = 0
  np.testing.assert_array_equal(np.asarray(o), want)
  _export(embedding_fwd, ids, W, BLOCK_N=256, padding_idx=0)
  dY = rnd((n, D), 3); dW0 = np.zeros((V, D), np.float32)
  dW = embedding_bwd(ids, dY, dW0, BLOCK_N=D // 4 if D % 4 == 0 else 256, **_MODE)
  wd = np.zeros((V, D)); np.add.at(wd, ids, dY)
  close(dW, wd, 1e-5)
  _export(embedding_bwd, ids, dY, dW0, BLOCK_N=D // 4 if D % 4 == 0 else 256)
CASES["embedding_bf16"] = lambda: t_emb(9, 100, 1024, BF16)
CASES["embedding_f32_odd"] = lambda: t_emb(7, 33, 1000, np.float32)

# ---- Liger group norm forward: program per (batch, group), chunked over hidden per group
@mg.mgpu_kernel(out_shape=lambda X, W, B, *, num_groups, eps, BLOCK_SIZE: (X, S((X.shape[0], num_groups), F32), S((X.shape[0], num_groups), F32)),
                grid=lambda X, W, B, *, num_groups, **k: (X.shape[0], num_groups))
def group_norm_fwd(X_ptr, W_ptr, B_ptr, Y_ptr, Mean_ptr, RSTD_ptr, *, num_groups: tl.constexpr, eps: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  batch_idx = tl.program_id(0)
  group_idx = tl.program_id(1)
  num_channels, hidden_size = X_ptr.shape[1], X_ptr.shape[2]
  channels_per_group = num_channels // num_groups
  hidden_size_per_group = channels_per_group * hidden_size
  s = 0.0
  squared_sum = 0.0
  for i in tl.range(0, hidden_size_per_group, BLOCK_SIZE):
    hidden_size_offsets = i + tl.arange(0, BLOCK_SIZE)
    mask = hidden_size_offsets < hidden_size_per_group
    c = group_idx * channels_per_group + hidden_size_offsets // hidden_size
    h = hidden_size_offsets % hidden_size
    X = tl.load(X_ptr.at[batch_idx, c, h], mask=mask, other=0.0)
    s += tl.sum(X)
    squared_sum += tl.sum(X * X)
  m = s / hidden_size_per_group
  variance = squared_sum / hidden_size_per_group - m * m
  rstd = tl.rsqrt(variance + eps)
  for channel_idx in tl.range(group_idx * channels_per_group, (group_idx + 1) * channels_per_group):
    W = tl.load(W_ptr.at[channel_idx])
    B = tl.load(B_ptr.at[channel_idx])
    for i in range(0, hidden_size, BLOCK_SIZE):
      hidden_size_offsets = i + tl.arange(0, BLOCK_SIZE)
      mask = hidden_size_offsets < hidden_size
      X = tl.load(X_ptr.at[batch_idx, channel_idx, hidden_size_offsets], mask=mask, other=m)
      Y = (X - m) * rstd * W + B
      tl.store(Y_ptr.at[batch_idx, channel_idx, hidden_size_offsets], Y, mask=mask)
  tl.store(Mean_ptr.at[batch_idx, group_idx], m)
  tl.store(RSTD_ptr.at[batch_idx, group_idx], rstd)
def t_gn(Bsz, C, H, G):
  x = rnd((Bsz, C, H), 1) * 2 + 1; w = rnd((C,), 2); b = rnd((C,), 3)
  y, mean, rstd = group_norm_fwd(x, w, b, num_groups=G, eps=1e-5, BLOCK_SIZE=512, **_MODE)
  xg = x.astype(np.float64).reshape(Bsz, G, -1); mu = xg.mean(2); var = xg.var(2); r = 1 / np.sqrt(var + 1e-5)
  close(mean, mu, 1e-4); close(rstd, r, 1e-3)
  close(y, ((xg - mu[..., None]) * r[..., None]).reshape(Bsz, C, H) * w[:, None] + b[:, None], 1e-3)
  _export(group_norm_fwd, x, w, b, num_groups=G, eps=1e-5, BLOCK_SIZE=512)
CASES["group_norm"] = lambda: t_gn(2, 8, 300, 4)
CASES["group_norm_odd"] = lambda: t_gn(3, 6, 1000, 3)

# ---- batch norm stats per channel over (N, HW), persistent loop over channels with num_programs
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK_N, BLOCK_HW: (S((x.shape[1],), F32), S((x.shape[1],), F32)), grid=(4,))
def batchnorm_stats(x_ptr, mean_ptr, var_ptr, *, BLOCK_N: tl.constexpr, BLOCK_HW: tl.constexpr):
  N, C, HW = x_ptr.shape
  for c in range(tl.program_id(0), C, tl.num_programs(0)):
    acc = tl.zeros((BLOCK_N, BLOCK_HW), tl.float32)
    acc2 = tl.zeros((BLOCK_N, BLOCK_HW), tl.float32)
    for n0 in range(0, N, BLOCK_N):
      for h0 in range(0, HW, BLOCK_HW):
        rn = n0 + tl.arange(0, BLOCK_N)
        rh = h0 + tl.arange(0, BLOCK_HW)
        msk = (rn[:, None] < N) & (rh[None, :] < HW)
        v = tl.load(x_ptr.at[rn[:, None], c, rh[None, :]], mask=msk, other=0.0).to(tl.float32)
        acc += v
        acc2 += v * v
    cnt = N * HW
    mean = tl.sum(acc) / cnt
    var = tl.sum(acc2) / cnt - mean * mean
    tl.store(mean_ptr.at[c], mean)
    tl.store(var_ptr.at[c], var)
def t_bn(N, C, HW, dt):
  x = (rnd((N, C, HW), 4) + 0.5).astype(dt)
  m, v = batchnorm_stats(x, BLOCK_N=4, BLOCK_HW=128, **_MODE)
  xf = x.astype(np.float64); close(m, xf.mean((0, 2)), 1e-4); close(v, xf.var((0, 2)), 1e-3)
  _export(batchnorm_stats, x, BLOCK_N=4, BLOCK_HW=128)
CASES["batchnorm_stats"] = lambda: t_bn(3, 10, 200, np.float32)
CASES["batchnorm_stats_bf16"] = lambda: t_bn(5, 7, 49, BF16)

# ================================================================ (b9)

# ---- DyT with alpha as a one-element ref loaded without an index; positional mask/other
@mg.mgpu_kernel(out_shape=lambda x, alpha, *, BLOCK: x, grid=lambda x, *a, **k: (x.shape[0],))
def scalar_ptr_load(x_ptr, alpha_ptr, y_ptr, *, BLOCK: tl.constexpr):
  col = tl.arange(0, BLOCK)
  mask = col < x_ptr.shape[1]
  row = tl.program_id(0)
  alpha = tl.load(alpha_ptr)
  x = tl.load(x_ptr.at[row, col], mask, 0.0)
  tl.store(y_ptr.at[row, col], tl.math.tanh(alpha * x), mask)
def t_spl(shape_a):
  x = rnd((3, 300), 1); a = np.full(shape_a, 0.7, np.float32)
  y = scalar_ptr_load(x, a, BLOCK=512, **_MODE)
  close(y, np.tanh(0.7 * x), 1e-6); _export(scalar_ptr_load, x, a, BLOCK=512)
CASES["scalar_ptr_load_1"] = lambda: t_spl((1,))
CASES["scalar_ptr_load_0d"] = lambda: t_spl(())

# ---- Liger element_mul in place by a loaded grad_output scalar
@mg.mgpu_kernel(out_shape=lambda X, g, *, BLOCK_SIZE: X, grid=lambda X, *a, **k: (X.shape[0],), input_output_aliases={0: 0})
def element_mul(X_in, grad_output_ptr, X_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  grad_output = tl.load(grad_output_ptr)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols)
    tl.store(X_ptr.at[program_id, X_offsets], X_block * grad_output, mask=X_offsets < n_cols)
def t_em(dt):
  x = rnd((3, 50257), 2, dt); g = np.array(0.25, np.float32)
  y = element_mul(x, g, BLOCK_SIZE=8192, **_MODE)
  close(y, x.astype(np.float32) * 0.25, 1e-2 if dt != np.float32 else 0); _export(element_mul, x, g, BLOCK_SIZE=8192)
CASES["element_mul_f32"] = lambda: t_em(np.float32)

# ---- Unsloth swiglu backward: three buffers updated in place
@mg.mgpu_kernel(out_shape=lambda DW, e, g, *, BLOCK_SIZE: (DW, e, g), grid=lambda DW, *a, BLOCK_SIZE: (tl.cdiv(DW.size, BLOCK_SIZE),),
                input_output_aliases={0: 0, 1: 1, 2: 2})
def unsloth_swiglu_bwd(DW_in, e_in, g_in, DW, e, g, *, BLOCK_SIZE: tl.constexpr):
  block_idx = tl.program_id(0)
  offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < DW.shape[0]
  DW_row = tl.load(DW.at[offsets], mask=mask, other=0)
  e_row = tl.load(e.at[offsets], mask=mask, other=0).to(tl.float32)
  g_row = tl.load(g.at[offsets], mask=mask, other=0)
  se_row = tl.sigmoid(e_row)
  f_row = se_row * e_row
  f_row = f_row.to(DW_row.dtype)
  h_row = f_row * g_row
  df_row = DW_row * f_row
  dg_row = DW_row * g_row
  de_row = dg_row.to(tl.float32) * se_row * (1.0 + e_row * (1.0 - se_row))
  de_row = de_row.to(DW_row.dtype)
  tl.store(DW.at[offsets], h_row, mask=mask)
  tl.store(e.at[offsets], df_row, mask=mask)
  tl.store(g.at[offsets], de_row, mask=mask)
def t_usb(n, dt):
  DW, e, g = rnd((n,), 1, dt), rnd((n,), 2, dt), rnd((n,), 3, dt)
  h, df, de = unsloth_swiglu_bwd(DW, e, g, BLOCK_SIZE=1024, **_MODE)
  ef = e.astype(np.float32); se = 1 / (1 + np.exp(-ef)); f = (se * ef).astype(dt).astype(np.float32)
  Df, gf = DW.astype(np.float32), g.astype(np.float32)
  tol = 3e-2 if dt != np.float32 else 1e-5
  close(h, f * gf, tol); close(df, Df * f, tol); close(de, Df * gf * se * (1 + ef * (1 - se)), tol)
  _export(unsloth_swiglu_bwd, DW, e, g, BLOCK_SIZE=1024)
CASES["unsloth_swiglu_bwd_bf16"] = lambda: t_usb(4096 * 11 + 5, BF16)

# ---- FlagGems where / clamp / masked_fill / fill (flat, 1-D grid)
@mg.mgpu_kernel(out_shape=lambda x, y, m, lo, *, value, BLOCK: (x, x, x, x), grid=lambda x, *a, BLOCK, **k: (tl.cdiv(x.shape[0], BLOCK),))
def pointwise(x_ptr, y_ptr, m_ptr, lo_ptr, w_ptr, c_ptr, mf_ptr, f_ptr, *, value: tl.constexpr, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offs = pid * BLOCK + tl.arange(0, BLOCK)
  mask = offs < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offs], mask=mask)
  y = tl.load(y_ptr.at[offs], mask=mask)
  m = tl.load(m_ptr.at[offs], mask=mask, other=0).to(tl.int1)
  lo = tl.load(lo_ptr.at[offs], mask=mask)
  tl.store(w_ptr.at[offs], tl.where(m, x, y), mask=mask)
  tl.store(c_ptr.at[offs], tl.minimum(tl.maximum(x, lo), 1.0), mask=mask)
  tl.store(mf_ptr.at[offs], tl.where(m, value, x), mask=mask)
  tl.store(f_ptr.at[offs], tl.full([BLOCK], value, tl.float32), mask=mask)
def t_pw(n, dt):
  x, y, lo = rnd((n,), 1, dt), rnd((n,), 2, dt), rnd((n,), 3, dt) - 1
  m = (np.random.default_rng(4).random(n) > 0.5).astype(np.int8)
  w, c, mf, f = pointwise(x, y, m, lo, value=-3.5, BLOCK=1024, **_MODE)
  mb = m.astype(bool)
  close(w, np.where(mb, x, y)); close(c, np.minimum(np.maximum(x, lo), 1.0)); close(mf, np.where(mb, -3.5, x)); close(f, np.full(n, -3.5))
  _export(pointwise, x, y, m, lo, value=-3.5, BLOCK=1024)
CASES["pointwise_f16"] = lambda: t_pw(5000, np.float16)
CASES["pointwise_f32"] = lambda: t_pw(1023, np.float32)

# ---- FlagGems flip / repeat(tile) / pad constant, index arithmetic on the input side
@mg.mgpu_kernel(out_shape=lambda x, *, reps, pad, BLOCK: (x, S((x.shape[0], x.shape[1] * reps), x.dtype), S((x.shape[0], x.shape[1] + 2 * pad), x.dtype)),
                grid=lambda x, **k: (x.shape[0],))
def flip_tile_pad(x_ptr, f_ptr, t_ptr, p_ptr, *, reps: tl.constexpr, pad: tl.constexpr, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  for off in range(0, N, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    mask = cols < N
    v = tl.load(x_ptr.at[row, N - 1 - cols], mask=mask, other=0)
    tl.store(f_ptr.at[row, cols], v, mask=mask)
  for off in range(0, N * reps, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    mask = cols < N * reps
    v = tl.load(x_ptr.at[row, cols % N], mask=mask, other=0)
    tl.store(t_ptr.at[row, cols], v, mask=mask)
  for off in range(0, N + 2 * pad, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    src = cols - pad
    inb = (src >= 0) & (src < N)
    v = tl.load(x_ptr.at[row, src], mask=inb, other=0)
    tl.store(p_ptr.at[row, cols], v, mask=cols < N + 2 * pad)
def t_ftp(M, N, dt):
  x = rnd((M, N), 5, dt)
  f, t, p = flip_tile_pad(x, reps=3, pad=5, BLOCK=256, **_MODE)
  np.testing.assert_array_equal(np.asarray(f), x[:, ::-1]); np.testing.assert_array_equal(np.asarray(t), np.tile(x, (1, 3)))
  np.testing.assert_array_equal(np.asarray(p), np.pad(x, ((0, 0), (5, 5))))
  _export(flip_tile_pad, x, reps=3, pad=5, BLOCK=256)
CASES["flip_tile_pad_f32"] = lambda: t_ftp(3, 1000, np.float32)
CASES["flip_tile_pad_bf16"] = lambda: t_ftp(4, 77, BF16)

# ---- FlagGems arange (float start/step) and linspace
@mg.mgpu_kernel(out_shape=lambda *, N, start, step, BLOCK: S((N,), F32), grid=lambda *, N, BLOCK, **k: (tl.cdiv(N, BLOCK),))
def arange_k(out_ptr, *, N: tl.constexpr, start: tl.constexpr, step: tl.constexpr, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  idx = pid * BLOCK + tl.arange(0, BLOCK)
  tl.store(out_ptr.at[idx], start + idx * step, mask=idx < out_ptr.shape[0])
def t_ar():
  o = arange_k(N=1000, start=0.5, step=0.25, BLOCK=256, **_MODE)
  close(o, 0.5 + np.arange(1000) * 0.25)
  _export(arange_k, N=1000, start=0.5, step=0.25, BLOCK=256)

# ================================================================ (b10)

# ---- int64 flat offsets (Liger's program_id.to(tl.int64) on a flat view)
@mg.mgpu_kernel(out_shape=lambda X, *, n_cols, BLOCK: X, grid=lambda X, *, n_cols, BLOCK: (X.shape[0] // n_cols,))
def flat64(X_ptr, Y_ptr, *, n_cols: tl.constexpr, BLOCK: tl.constexpr):
  row = tl.program_id(0).to(tl.int64)
  for off in range(0, n_cols, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X_ptr.at[row * n_cols + cols], mask=mask, other=0.0)
    tl.store(Y_ptr.at[row * n_cols + cols], x + 1, mask=mask)
def t_f64():
  x = rnd((5 * 3000,), 2)
  close(flat64(x, n_cols=3000, BLOCK=1024, **_MODE), x + 1); _export(flat64, x, n_cols=3000, BLOCK=1024)
CASES["flat64"] = t_f64

# ---- Liger layer norm with BLOCK_M rows per program, keep_dims, 2-D tiles
@mg.mgpu_kernel(out_shape=lambda X, W, B, *, eps, BLOCK_M, BLOCK_N: (X, S((X.shape[0],), F32), S((X.shape[0],), F32)),
                grid=lambda X, *a, BLOCK_M, **k: (tl.cdiv(X.shape[0], BLOCK_M),))
def ln_rows(X, W, B, Y, Mean, RSTD, *, eps: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
  n_rows, n_cols = X.shape
  rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
  cols = tl.arange(0, BLOCK_N)
  rmask = rows < n_rows
  cmask = cols < n_cols
  mask = rmask[:, None] & cmask[None, :]
  x = tl.load(X.at[rows[:, None], cols[None, :]], mask=mask, other=0.0).to(tl.float32)
  mean = tl.sum(x, axis=1, keep_dims=True) / n_cols
  xc = tl.where(mask, x - mean, 0.0)
  var = tl.sum(xc * xc, axis=1) / n_cols
  rstd = 1.0 / tl.sqrt(var + eps)
  w = tl.load(W.at[cols], mask=cmask, other=0.0)
  b = tl.load(B.at[cols], mask=cmask, other=0.0)
  y = xc * rstd[:, None] * w[None, :] + b[None, :]
  tl.store(Y.at[rows[:, None], cols[None, :]], y, mask=mask)
  tl.store(Mean.at[rows], tl.reshape(mean, (BLOCK_M,)), mask=rmask)
  tl.store(RSTD.at[rows], rstd, mask=rmask)
def t_lnr(M, N, dt, BM):
  x, w, b = (rnd((M, N), 1, dt) * 2 + 1).astype(dt), rnd((N,), 2, dt), rnd((N,), 3, dt)
  BN = 1 << (N - 1).bit_length()
  y, mu, rs = ln_rows(x, w, b, eps=1e-5, BLOCK_M=BM, BLOCK_N=BN, **_MODE)
  xf = x.astype(np.float64); m = xf.mean(1); r = 1 / np.sqrt(xf.var(1) + 1e-5)
  close(mu, m, 1e-4); close(rs, r, 1e-3); close(y, (xf - m[:, None]) * r[:, None] * w.astype(np.float64) + b.astype(np.float64), 3e-2 if dt != np.float32 else 1e-4)
  _export(ln_rows, x, w, b, eps=1e-5, BLOCK_M=BM, BLOCK_N=BN)
CASES["ln_rows_f32"] = lambda: t_lnr(37, 1000, np.float32, 4)
CASES["ln_rows_bf16"] = lambda: t_lnr(10, 4096, BF16, 2)

# ---- CE with an optional class weight (None) and reduction as a string constexpr
@mg.mgpu_kernel(out_shape=lambda X, Y, Wt, *, reduction, BLOCK_SIZE: S((X.shape[0],), F32), grid=lambda X, *a, **k: (X.shape[0],))
def ce_weight(X_ptr, Y_ptr, weight_ptr, loss_ptr, *, reduction: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  y = tl.load(Y_ptr.at[pid])
  m = float("-inf")
  d = 0.0
  for i in range(0, n_cols, BLOCK_SIZE):
    offs = i + tl.arange(0, BLOCK_SIZE)
    xb = tl.load(X_ptr.at[pid, offs], mask=offs < n_cols, other=float("-inf")).to(tl.float32)
    m_new = tl.maximum(m, tl.max(xb, 0))
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(xb - m_new), 0)
    m = m_new
  loss = m + tl.log(d) - tl.load(X_ptr.at[pid, y]).to(tl.float32)
  if weight_ptr is not None:
    loss = loss * tl.load(weight_ptr.at[y])
  if reduction == "mean":
    loss = loss / X_ptr.shape[0]
  tl.store(loss_ptr.at[pid], loss)
def t_cw(with_w):
  x = rnd((6, 32000), 1); y = np.random.default_rng(2).integers(0, 32000, 6).astype(np.int32); w = np.abs(rnd((32000,), 3)) if with_w else None
  l = ce_weight(x, y, w, reduction="mean", BLOCK_SIZE=8192, **_MODE)
  xf = x.astype(np.float64); m = xf.max(1); want = m + np.log(np.exp(xf - m[:, None]).sum(1)) - xf[np.arange(6), y]
  if with_w: want = want * w[y]
  close(l, want / 6, 1e-4)
  _export(ce_weight, *[a for a in (x, y, w) if a is not None], reduction="mean", BLOCK_SIZE=8192) if with_w else None
CASES["ce_weight"] = lambda: t_cw(True)
CASES["ce_noweight"] = lambda: t_cw(False)

# ---- atomic_max of floats across programs (amax for a quantiser)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: S((1,), F32), grid=lambda x, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def amax_k(x_ptr, o_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[offs], mask=offs < x_ptr.shape[0], other=0.0)
  tl.atomic_max(o_ptr.at[0], tl.max(tl.abs(x), axis=0))
def t_amax():
  x = rnd((10001,), 4)
  close(amax_k(x, BLOCK=1024, **_MODE), [np.abs(x).max()]); _export(amax_k, x, BLOCK=1024)
CASES["amax"] = t_amax
