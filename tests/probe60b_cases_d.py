"""Probe 60b's corpus, part d (registered in probe60b_common.CASES; tests/test_probe60b.py runs them)."""

import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe_util import rnd
from probe60b_common import S, BF16, F32, _MODE, CASES, _export, close


# ================================================================ (b23)
_CASTING_MODE_NONE = tl.constexpr(-1)
_CASTING_MODE_LLAMA = tl.constexpr(0)
_CASTING_MODE_GEMMA = tl.constexpr(1)

@mg.mgpu_kernel(out_shape=lambda X, W, *, eps, casting_mode, BLOCK_SIZE: X, grid=lambda X, W, **k: (X.shape[0],))
def rms_modes(X_ptr, W_ptr, Y_ptr, *, eps: tl.constexpr, casting_mode: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  X_row = tl.load(X_ptr.at[row_idx, col_offsets], mask=mask, other=0)
  X_row_dtype = X_row.dtype
  W_row = tl.load(W_ptr.at[col_offsets], mask=mask, other=0)
  if casting_mode == _CASTING_MODE_LLAMA:
    X_row = X_row.to(tl.float32)
  if casting_mode == _CASTING_MODE_GEMMA:
    W_row = W_row.to(tl.float32)
    X_row = X_row.to(tl.float32)
  mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
  rstd = rsqrt_(mean_square + eps)
  X_row = X_row * rstd
  if casting_mode == _CASTING_MODE_LLAMA:
    X_row = X_row.to(X_row_dtype)
  Y_row = X_row * (1.0 + W_row) if casting_mode == _CASTING_MODE_GEMMA else X_row * W_row
  tl.store(Y_ptr.at[row_idx, col_offsets], Y_row, mask=mask)
rsqrt_ = tl.extra.cuda.libdevice.rsqrt
def t_rm(mode):
  x, w = rnd((5, 4096), 1, BF16), rnd((4096,), 2, BF16)
  y = rms_modes(x, w, eps=1e-6, casting_mode=mode, BLOCK_SIZE=4096, **_MODE)
  xf = x.astype(np.float64); r = 1 / np.sqrt((xf ** 2).mean(1) + 1e-6)
  want = xf * r[:, None] * ((1 + w.astype(np.float64)) if mode == 1 else w.astype(np.float64))
  close(y, want, 5e-2); _export(rms_modes, x, w, eps=1e-6, casting_mode=mode, BLOCK_SIZE=4096)
CASES["rms_llama"] = lambda: t_rm(0)
CASES["rms_gemma"] = lambda: t_rm(1)
CASES["rms_none"] = lambda: t_rm(-1)

# ---- DyT backward partial dgamma over BLOCK_M rows with a 2-D tile, dalpha per program
@mg.mgpu_kernel(out_shape=lambda x, a, g, dy, *, BLOCK_M, BLOCK_N: (x, S((tl.cdiv(x.shape[0], BLOCK_M), x.shape[1]), F32), S((tl.cdiv(x.shape[0], BLOCK_M),), F32)),
                grid=lambda x, *r, BLOCK_M, **k: (tl.cdiv(x.shape[0], BLOCK_M),))
def dyt_bwd(x_ptr, alpha_ptr, gamma_ptr, dy_ptr, dx_ptr, dgamma_ptr, dalpha_ptr, *, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
  M, N = x_ptr.shape
  pid = tl.program_id(0)
  rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
  cols = tl.arange(0, BLOCK_N)
  mask = (rows[:, None] < M) & (cols[None, :] < N)
  alpha = tl.load(alpha_ptr.at[0])
  gamma = tl.load(gamma_ptr.at[cols], mask=cols < N, other=0.0)
  x = tl.load(x_ptr.at[rows[:, None], cols[None, :]], mask=mask, other=0.0)
  dy = tl.load(dy_ptr.at[rows[:, None], cols[None, :]], mask=mask, other=0.0)
  t = tl.extra.cuda.libdevice.tanh(alpha * x)
  tl.store(dgamma_ptr.at[pid, cols], tl.sum(dy * t, axis=0), mask=cols < N)
  dt = dy * gamma[None, :] * (1 - t * t)
  tl.store(dx_ptr.at[rows[:, None], cols[None, :]], dt * alpha, mask=mask)
  tl.store(dalpha_ptr.at[pid], tl.sum(dt * x))
def t_db(M, N):
  x, dy = rnd((M, N), 1), rnd((M, N), 2); a = np.array([0.7], np.float32); g = rnd((N,), 3)
  dx, dg, da = dyt_bwd(x, a, g, dy, BLOCK_M=4, BLOCK_N=1 << (N - 1).bit_length(), **_MODE)
  t = np.tanh(0.7 * x); d = dy * g * (1 - t * t)
  close(dx, d * 0.7, 1e-5); close(np.asarray(dg).sum(0), (dy * t).sum(0), 1e-4); close(np.asarray(da).sum(), (d * x).sum(), 1e-3)
  _export(dyt_bwd, x, a, g, dy, BLOCK_M=4, BLOCK_N=1 << (N - 1).bit_length())
CASES["dyt_bwd"] = lambda: t_db(10, 1000)

# ---- FlagGems index_add along dim 0 with a 2-D atomic scatter; randint4x
@mg.mgpu_kernel(out_shape=lambda base, idx, src, *, BM, BN: base, grid=lambda base, idx, src, *, BM, BN: (tl.cdiv(idx.shape[0], BM), tl.cdiv(base.shape[1], BN)), input_output_aliases={0: 0})
def index_add(base, idx_ptr, src, out, *, BM: tl.constexpr, BN: tl.constexpr):
  r = tl.program_id(0) * BM + tl.arange(0, BM)
  c = tl.program_id(1) * BN + tl.arange(0, BN)
  rm = r < idx_ptr.shape[0]
  m = rm[:, None] & (c[None, :] < out.shape[1])
  idx = tl.load(idx_ptr.at[r], mask=rm, other=0)
  v = tl.load(src.at[r[:, None], c[None, :]], mask=m, other=0.0)
  tl.atomic_add(out.at[idx[:, None], c[None, :]], v, mask=m)
def t_ia():
  b = rnd((50, 300), 1); idx = np.random.default_rng(2).integers(0, 50, 77).astype(np.int32); s = rnd((77, 300), 3)
  o = index_add(b, idx, s, BM=8, BN=128, **_MODE)
  w = b.copy(); np.add.at(w, idx, s); close(o, w, 1e-5); _export(index_add, b, idx, s, BM=8, BN=128)
CASES["index_add"] = t_ia

@mg.mgpu_kernel(out_shape=lambda n, seed, *, BLOCK: S((4, n.shape[0]), jnp.uint32), grid=lambda n, seed, *, BLOCK: (tl.cdiv(n.shape[0], BLOCK),))
def randint4(n_ptr, seed: tl.scalar, o_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < n_ptr.shape[0]
  r0, r1, r2, r3 = tl.randint4x(seed, offs)
  tl.store(o_ptr.at[0, offs], r0, mask=m)
  tl.store(o_ptr.at[1, offs], r1, mask=m)
  tl.store(o_ptr.at[2, offs], r2, mask=m)
  tl.store(o_ptr.at[3, offs], r3, mask=m)
def t_r4():
  n = np.zeros(3000, np.float32); o = np.asarray(randint4(n, 5, BLOCK=1024, **_MODE))
  assert len(np.unique(o)) > 11990; _export(randint4, n, np.int32(5), BLOCK=1024)
CASES["randint4x"] = t_r4

# ================================================================ (b28)
@mg.mgpu_kernel(out_shape=lambda X, n, *, BLOCK_SIZE: S((X.shape[0],), F32), grid=lambda X, *a, **k: (X.shape[0],))
def lse_runtime_vocab(X_ptr, n_cols: tl.scalar, lse_ptr, *, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(0)
  m = float("-inf")
  d = 0.0
  for i in range(0, n_cols, BLOCK_SIZE):
    offs = i + tl.arange(0, BLOCK_SIZE)
    xb = tl.load(X_ptr.at[pid, offs], mask=offs < n_cols, other=float("-inf")).to(tl.float32)
    m_new = tl.maximum(m, tl.max(xb))
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(xb - m_new))
    m = m_new
  tl.store(lse_ptr.at[pid], m + tl.log(d))
def t(n):
  x = rnd((3, 32064), 1, BF16)
  o = lse_runtime_vocab(x, n, BLOCK_SIZE=4096, **_MODE)
  xf = x.astype(np.float64)[:, :n]; mm = xf.max(1)
  close(o, mm + np.log(np.exp(xf - mm[:, None]).sum(1)), 1e-4); _export(lse_runtime_vocab, x, np.int32(n), BLOCK_SIZE=4096)
CASES["lse_runtime_32000"] = lambda: t(32000)
CASES["lse_runtime_5"] = lambda: t(5)


# ================================================================ (b31: Liger's CE reading back the gradient it wrote)
_TRUE = tl.constexpr(1)
_FALSE = tl.constexpr(0)

@mg.mgpu_kernel(out_shape=lambda X, Y, *, n_non_ignore, ignore_index, label_smoothing, lse_square_scale, RETURN_Z_LOSS, BLOCK_SIZE:
                (X, S((X.shape[0],), F32), S((X.shape[0],), F32)), grid=lambda X, *a, **k: (X.shape[0],), input_output_aliases={0: 0})
def liger_ce_v1(X_in, Y_ptr, X_ptr, loss_ptr, z_loss_ptr, *, n_non_ignore: tl.constexpr, ignore_index: tl.constexpr,
                label_smoothing: tl.constexpr, lse_square_scale: tl.constexpr, RETURN_Z_LOSS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  y = tl.load(Y_ptr.at[program_id])
  if y == ignore_index:
    for i in range(0, n_cols, BLOCK_SIZE):
      X_offsets = i + tl.arange(0, BLOCK_SIZE)
      tl.store(X_ptr.at[program_id, X_offsets], 0.0, mask=X_offsets < n_cols)
    tl.store(loss_ptr.at[program_id], 0.0)
    tl.store(z_loss_ptr.at[program_id], 0.0)
    return
  m = float("-inf")
  d = 0.0
  ori_X_y = tl.load(X_ptr.at[program_id, y])
  scaled_x_sum = 0.0
  eps = label_smoothing / n_cols
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf"))
    block_max = tl.max(X_block)
    if label_smoothing > 0:
      scaled_x_sum += tl.sum(tl.where(X_offsets < n_cols, -eps * X_block, 0.0))
    m_new = tl.maximum(m, block_max)
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
    m = m_new
  lse = m + tl.log(d)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf"))
    X_block = tl.exp(X_block - m) / d - eps
    if lse_square_scale > 0:
      X_block += 2 * lse_square_scale * lse * X_block
    X_block = X_block / (n_non_ignore)
    tl.store(X_ptr.at[program_id, X_offsets], X_block, mask=X_offsets < n_cols)
  tl.debug_barrier()
  loss = lse - ori_X_y
  if label_smoothing > 0:
    smooth_loss = scaled_x_sum + label_smoothing * lse
    loss = loss * (1 - label_smoothing) + smooth_loss
  z_loss = lse_square_scale * lse * lse
  loss += z_loss
  X_y = tl.load(X_ptr.at[program_id, y])
  X_y += -(1 - label_smoothing) / (n_non_ignore)
  tl.store(loss_ptr.at[program_id], loss)
  if RETURN_Z_LOSS == _TRUE:
    tl.store(z_loss_ptr.at[program_id], z_loss)
  else:
    tl.store(z_loss_ptr.at[program_id], 0.0)
  tl.store(X_ptr.at[program_id, y], X_y)

def t_ce_v1(V, dt, rows, ls, zs):
  x = (rnd((rows, V), 1) * 2).astype(dt); y = np.random.default_rng(2).integers(0, V, rows).astype(np.int32); y[1] = -100
  nni = rows - 1
  g, loss, z = liger_ce_v1(x, y, n_non_ignore=nni, ignore_index=-100, label_smoothing=ls, lse_square_scale=zs, RETURN_Z_LOSS=1, BLOCK_SIZE=8192, **_MODE)
  xf = x.astype(np.float64); mm = xf.max(1); lse = mm + np.log(np.exp(xf - mm[:, None]).sum(1))
  p = np.exp(xf - lse[:, None]) - ls / V; p = p + 2 * zs * lse[:, None] * p; p /= nni
  r = np.arange(rows); yy = np.maximum(y, 0); p[r, yy] -= (1 - ls) / nni
  wl = (lse - xf[r, yy]) * (1 - ls) + (-ls / V * xf.sum(1) + ls * lse) + zs * lse ** 2
  ign = y == -100; p[ign] = 0; wl[ign] = 0
  close(loss, wl, 2e-3); close(g, p, 2e-3 if dt != np.float32 else 1e-6)
  _export(liger_ce_v1, x, y, n_non_ignore=nni, ignore_index=-100, label_smoothing=ls, lse_square_scale=zs, RETURN_Z_LOSS=1, BLOCK_SIZE=8192)
CASES["liger_ce_v1_f32"] = lambda: t_ce_v1(32000, np.float32, 4, 0.1, 1e-4)
CASES["liger_ce_v1_bf16"] = lambda: t_ce_v1(50257, BF16, 3, 0.0, 0.0)
