"""Probe 57h's corpus: normalisation kernels forward and backward that computed and built before the probe's fixes
(kept as a guard). Triton's tutorial layer norm (forward over column blocks, two passes; backward dx fused with
dw/db partial sums under a lock array; the dw/db second kernel), rows per program under masks (weight-less and
bias-less), Inductor's tl.reduce of Welford (mean, m2, weight) triples, two-kernel backward partials and atomics,
Liger's RMSNorm forward and backward (casting modes, Gemma's offset), fused add + RMSNorm with the residual updated
in place, GroupNorm over (N, C, HW), BatchNorm training (per-block (count, mean, M2) partials merged by Chan's
formula with the running statistics updated in place; a one-kernel form with atomics and a ticket; backward),
Pallas-style jnp.mean / jnp.var rows (a group's reshape), TMA-pipelined statistics, an Apex-style persistent dgamma;
hidden sizes 1 to 16384 (768, 1000, 5120, 12288), float16 / bfloat16 inputs with float32 statistics. Each runs in
interpret mode against NumPy in float64 and is exported for CUDA. Found and not fixed here (probe 59b fixed it): a row
statistic of fewer than 8 rows stored through `o.at[rows]` (rows = pid * R + ml.arange(R)) from a tile of fewer than
128 elements (MG204 at the arange, whose hint takes 8 lanes under a mask)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl import language as tl

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = ml_dtypes.bfloat16


def rnd(shape, seed, dt=np.float32, scale=1.0, off=0.0):
  return (np.random.default_rng(seed).standard_normal(shape) * scale + off).astype(dt)


def ln(x, w=None, b=None, eps=1e-5):
  """(y, mean, rstd) of a layer norm over the last axis, in float64."""
  xf = np.asarray(x, np.float64)
  mu = xf.mean(-1, keepdims=True)
  rs = 1 / np.sqrt(((xf - mu) ** 2).mean(-1, keepdims=True) + eps)
  y = (xf - mu) * rs
  y = y if w is None else y * np.asarray(w, np.float64)
  y = y if b is None else y + np.asarray(b, np.float64)
  return y, mu[..., 0], rs[..., 0]


def stats(x):
  _, mu, rs = ln(x)
  return mu.astype(np.float32), rs.astype(np.float32)


def ln_bwd(x, w, dy, mu, rs):
  """(dx, dy * xhat, dy) of a layer norm, in float64 (the last two per row)."""
  xf, g = np.asarray(x, np.float64), np.asarray(dy, np.float64)
  xhat = (xf - mu[:, None]) * rs[:, None]
  wdy = g * np.asarray(w, np.float64)
  dx = (wdy - xhat * (xhat * wdy).mean(-1, keepdims=True) - wdy.mean(-1, keepdims=True)) * rs[:, None]
  return dx, g * xhat, g


def parts(rows, n, step):
  return np.stack([rows[i:i + step].sum(0) for i in range(0, n, step)])


def rms(x, w=None, eps=1e-6, offset=0.0):
  xf = np.asarray(x, np.float64)
  rs = 1 / np.sqrt((xf * xf).mean(-1, keepdims=True) + eps)
  return (xf * rs if w is None else xf * rs * (offset + np.asarray(w, np.float64))), rs[..., 0]


# ---------------------------------------------------------------- Triton's tutorial layer norm
@mg.mgpu_kernel(out_shape=lambda X, W, B, BLOCK_SIZE: (X, S((X.shape[0],), F32), S((X.shape[0],), F32)),
                grid=lambda X, W, B, BLOCK_SIZE: (X.shape[0],))
def tri_ln_fwd(X, W, B, Y, Mean, Rstd, BLOCK_SIZE: tl.constexpr):
  row = tl.program_id(0)
  N = X.shape[1]
  _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
  for off in range(0, N, BLOCK_SIZE):
    cols = off + tl.arange(0, BLOCK_SIZE)
    _mean += tl.load(X.at[row, cols], mask=cols < N, other=0.).to(tl.float32)
  mean = tl.sum(_mean, axis=0) / N
  _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
  for off in range(0, N, BLOCK_SIZE):
    cols = off + tl.arange(0, BLOCK_SIZE)
    x = tl.load(X.at[row, cols], mask=cols < N, other=0.).to(tl.float32)
    x = tl.where(cols < N, x - mean, 0.)
    _var += x * x
  rstd = 1 / tl.sqrt(tl.sum(_var, axis=0) / N + 1e-5)
  tl.store(Mean.at[row], mean)
  tl.store(Rstd.at[row], rstd)
  for off in range(0, N, BLOCK_SIZE):
    cols = off + tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X.at[row, cols], mask=mask, other=0.).to(tl.float32)
    tl.store(Y.at[row, cols], (x - mean) * rstd * tl.load(W.at[cols], mask=mask) + tl.load(B.at[cols], mask=mask),
             mask=mask)


@mg.mgpu_kernel(out_shape=lambda X, DY, W, Mean, Rstd, *, GROUP_SIZE_M, BLOCK_SIZE_N: (
    X, S((GROUP_SIZE_M, X.shape[1]), F32), S((GROUP_SIZE_M, X.shape[1]), F32), S((2 * GROUP_SIZE_M,), jnp.int32)),
    grid=lambda X, *a, **k: (X.shape[0],))
def tri_ln_bwd_dx(X, DY, W, Mean, Rstd, DX, DW, DB, Lock, *, GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
  row = tl.program_id(0)
  N = X.shape[1]
  cols = tl.arange(0, BLOCK_SIZE_N)
  mask = cols < N
  lock_id = row % GROUP_SIZE_M
  x = tl.load(X.at[row, cols], mask=mask, other=0).to(tl.float32)
  dy = tl.load(DY.at[row, cols], mask=mask, other=0).to(tl.float32)
  w = tl.load(W.at[cols], mask=mask).to(tl.float32)
  rstd = tl.load(Rstd.at[row])
  xhat = tl.where(mask, (x - tl.load(Mean.at[row])) * rstd, 0.)
  wdy = tl.where(mask, w * dy, 0.)
  c1 = tl.sum(xhat * wdy, axis=0) / N
  c2 = tl.sum(wdy, axis=0) / N
  tl.store(DX.at[row, cols], (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
  partial_dw = (dy * xhat).to(w.dtype)
  partial_db = dy.to(w.dtype)
  while tl.atomic_cas(Lock.at[lock_id], 0, 1) == 1:
    pass
  count = tl.load(Lock.at[lock_id + GROUP_SIZE_M])
  if count == 0:
    tl.atomic_xchg(Lock.at[lock_id + GROUP_SIZE_M], 1)
  else:
    partial_dw += tl.load(DW.at[lock_id, cols], mask=mask)
    partial_db += tl.load(DB.at[lock_id, cols], mask=mask)
  tl.store(DW.at[lock_id, cols], partial_dw, mask=mask)
  tl.store(DB.at[lock_id, cols], partial_db, mask=mask)
  tl.atomic_xchg(Lock.at[lock_id], 0)


@mg.mgpu_kernel(out_shape=lambda DW, DB, *, BLOCK_SIZE_M, BLOCK_SIZE_N: (S((DW.shape[1],), F32),) * 2,
                grid=lambda DW, DB, *, BLOCK_SIZE_M, BLOCK_SIZE_N: (tl.cdiv(DW.shape[1], BLOCK_SIZE_N),))
def tri_ln_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, *, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
  M, N = DW.shape
  cols = tl.program_id(0) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
  dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
  db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
  for i in range(0, M, BLOCK_SIZE_M):
    rows = i + tl.arange(0, BLOCK_SIZE_M)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    dw += tl.load(DW.at[rows[:, None], cols[None, :]], mask=mask, other=0.)
    db += tl.load(DB.at[rows[:, None], cols[None, :]], mask=mask, other=0.)
  tl.store(FINAL_DW.at[cols], tl.sum(dw, axis=0), mask=cols < N)
  tl.store(FINAL_DB.at[cols], tl.sum(db, axis=0), mask=cols < N)


# ---------------------------------------------------------------- rows per program, Welford, partials, atomics
@mg.mgpu_kernel(out_shape=lambda x, w, b, *, BLOCK_N, ROWS: (x, S((x.shape[0],), F32), S((x.shape[0],), F32)),
                grid=lambda x, w, b, *, BLOCK_N, ROWS: (ml.cdiv(x.shape[0], ROWS),))
def ln_rows(x, w, b, y, mean_o, rstd_o, *, BLOCK_N: ml.constexpr, ROWS: ml.constexpr):
  M, N = x.shape
  rows = ml.program_id(0) * ROWS + ml.arange(ROWS)
  cols = ml.arange(BLOCK_N)
  m = (rows[:, None] < M) & (cols[None, :] < N)
  v = ml.load(x.at[rows[:, None], cols[None, :]], mask=m, other=0.0).astype(F32)
  mu = ml.sum(v, axis=1) / N
  xc = ml.where(m, v - mu[:, None], 0.0)
  rs = ml.rsqrt(ml.sum(xc * xc, axis=1) / N + 1e-5)
  out = xc * rs[:, None]
  if w is not None:
    out = out * ml.load(w.at[cols], mask=cols < N, other=0.0).astype(F32)[None, :]
  if b is not None:
    out = out + ml.load(b.at[cols], mask=cols < N, other=0.0).astype(F32)[None, :]
  ml.store(y.at[rows[:, None], cols[None, :]], out.astype(y.dtype), mask=m)
  ml.store(mean_o.at[rows], mu, mask=rows < M)
  ml.store(rstd_o.at[rows], rs, mask=rows < M)


def welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
  delta = mean_2 - mean_1
  new_weight = weight_1 + weight_2
  w2_over_w = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
  return mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight


@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), F32),) * 2, grid=lambda x, *, BLOCK: (x.shape[0] // 4,))
def welford_reduce(x, mean_o, var_o, *, BLOCK: ml.constexpr):
  rows = tl.program_id(0) * 4 + tl.arange(0, 4)
  N = x.shape[1]
  m_acc, m2_acc, w_acc = tl.zeros((4, BLOCK), tl.float32), tl.zeros((4, BLOCK), tl.float32), tl.zeros((4, BLOCK), tl.float32)
  for off in range(0, N, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    msk = cols[None, :] < N
    v = tl.load(x.at[rows[:, None], cols[None, :]], mask=msk, other=0.0).to(tl.float32)
    delta = v - m_acc
    new_w = w_acc + 1.0
    new_m = m_acc + delta / new_w
    m2_acc = tl.where(msk, m2_acc + delta * (v - new_m), m2_acc)
    m_acc = tl.where(msk, new_m, m_acc)
    w_acc = tl.where(msk, new_w, w_acc)
  mean, m2, w = tl.reduce((m_acc, m2_acc, w_acc), 1, welford_combine)
  tl.store(mean_o.at[rows], mean)
  tl.store(var_o.at[rows], m2 / w)


@mg.mgpu_kernel(out_shape=lambda x, dy, w, mean, rstd, *, ROWS_PER, BLOCK_N: (
    x, S((ml.cdiv(x.shape[0], ROWS_PER), x.shape[1]), F32), S((ml.cdiv(x.shape[0], ROWS_PER), x.shape[1]), F32)),
    grid=lambda x, *a, ROWS_PER, BLOCK_N: (ml.cdiv(x.shape[0], ROWS_PER),))
def ln_bwd_partial(x, dy, w, mean, rstd, dx, dw_p, db_p, *, ROWS_PER: ml.constexpr, BLOCK_N: ml.constexpr):
  pid = ml.program_id(0)
  M, N = x.shape
  cols = ml.arange(BLOCK_N)
  cm = cols < N
  wv = ml.load(w.at[cols], mask=cm, other=0.0).astype(F32)
  dw_acc, db_acc = ml.zeros((BLOCK_N,), F32), ml.zeros((BLOCK_N,), F32)
  for row in range(pid * ROWS_PER, ml.minimum(pid * ROWS_PER + ROWS_PER, M)):
    g = ml.load(dy.at[row, cols], mask=cm, other=0.0).astype(F32)
    rs = rstd[row]
    xhat = ml.where(cm, (ml.load(x.at[row, cols], mask=cm, other=0.0).astype(F32) - mean[row]) * rs, 0.0)
    wdy = g * wv
    c1, c2 = ml.sum(xhat * wdy) / N, ml.sum(wdy) / N
    ml.store(dx.at[row, cols], ((wdy - (xhat * c1 + c2)) * rs).astype(dx.dtype), mask=cm)
    dw_acc += g * xhat
    db_acc += g
  ml.store(dw_p.at[pid, cols], dw_acc, mask=cm)
  ml.store(db_p.at[pid, cols], db_acc, mask=cm)


@mg.mgpu_kernel(out_shape=lambda x, dy, mean, rstd, *, BLOCK_N: (S((x.shape[1],), F32),) * 2,
                grid=lambda x, *a, BLOCK_N: (x.shape[0],))
def ln_dwdb_atomic(x, dy, mean, rstd, dw, db, *, BLOCK_N: ml.constexpr):
  row = ml.program_id(0)
  N = x.shape[1]
  for off in range(0, N, BLOCK_N):
    cols = off + ml.arange(BLOCK_N)
    cm = cols < N
    xhat = (ml.load(x.at[row, cols], mask=cm, other=0.0).astype(F32) - mean[row]) * rstd[row]
    g = ml.load(dy.at[row, cols], mask=cm, other=0.0).astype(F32)
    ml.atomic_add(dw.at[cols], g * xhat, mask=cm)
    ml.atomic_add(db.at[cols], g, mask=cm)


# ---------------------------------------------------------------- Liger's RMSNorm, fused add + RMSNorm
@mg.mgpu_kernel(out_shape=lambda X, W, *, eps, offset, casting_mode, BLOCK_SIZE: (X, S((X.shape[0],), F32)),
                grid=lambda X, W, **k: (X.shape[0],))
def liger_rms_fwd(X, W, Y, RSTD, *, eps: tl.constexpr, offset: tl.constexpr, casting_mode: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0)
  n_cols = X.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  X_row = tl.load(X.at[row_idx, col_offsets], mask=mask, other=0)
  X_row_dtype = X_row.dtype
  W_row = tl.load(W.at[col_offsets], mask=mask, other=0)
  if casting_mode == 0:            # llama
    X_row = X_row.to(tl.float32)
  if casting_mode == 1:            # gemma
    W_row = W_row.to(tl.float32)
    X_row = X_row.to(tl.float32)
  rstd = tl.rsqrt(tl.sum(X_row * X_row, axis=0) / n_cols + eps)
  tl.store(RSTD.at[row_idx], rstd)
  X_row = X_row * rstd
  if casting_mode == 0:
    X_row = X_row.to(X_row_dtype)
  Y_row = X_row * (offset + W_row)
  if casting_mode == 1:
    Y_row = Y_row.to(X_row_dtype)
  tl.store(Y.at[row_idx, col_offsets], Y_row, mask=mask)


@mg.mgpu_kernel(out_shape=lambda dY, X, W, RSTD, *, rows_per_program, offset, BLOCK_SIZE: (
    X, S((ml.cdiv(X.shape[0], rows_per_program), X.shape[1]), F32)),
    grid=lambda dY, X, W, RSTD, *, rows_per_program, offset, BLOCK_SIZE: (ml.cdiv(X.shape[0], rows_per_program),))
def liger_rms_bwd(dY, X, W, RSTD, dX, dW, *, rows_per_program: tl.constexpr, offset: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr):
  row_block_id = tl.program_id(0)
  n_rows, n_cols = X.shape
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  dW_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
  W_row = tl.load(W.at[col_offsets], mask=mask, other=0.0) + offset
  for row_idx in range(row_block_id * rows_per_program, min((row_block_id + 1) * rows_per_program, n_rows)):
    dY_row = tl.load(dY.at[row_idx, col_offsets], mask=mask, other=0.0)
    X_row = tl.load(X.at[row_idx, col_offsets], mask=mask, other=0.0).to(tl.float32)
    rstd_row = tl.load(RSTD.at[row_idx])
    m = (dY_row * W_row).to(tl.float32)
    dX_row = rstd_row * m
    dX_row += rstd_row * (-(1 / n_cols) * rstd_row * rstd_row * tl.sum(m * X_row, axis=0) * X_row)
    dW_row += dY_row * (X_row * rstd_row)
    tl.store(dX.at[row_idx, col_offsets], dX_row.to(X.dtype), mask=mask)
  tl.store(dW.at[row_block_id, col_offsets], dW_row, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, residual, w, *, BLOCK: (x, residual), grid=lambda x, *a, BLOCK: (x.shape[0],),
                input_output_aliases={1: 1})
def fused_add_rms(x, residual, w, out, res_out, *, BLOCK: ml.constexpr):
  row = ml.program_id(0)
  N = x.shape[1]
  acc = ml.zeros((BLOCK,), F32)
  for off in range(0, N, BLOCK):
    cols = off + ml.arange(BLOCK)
    m = cols < N
    v = ml.load(x.at[row, cols], mask=m, other=0.0).astype(F32) + \
        ml.load(residual.at[row, cols], mask=m, other=0.0).astype(F32)
    ml.store(res_out.at[row, cols], v.astype(res_out.dtype), mask=m)
    acc += v * v
  r = ml.rsqrt(ml.sum(acc) / N + 1e-6)
  for off in range(0, N, BLOCK):
    cols = off + ml.arange(BLOCK)
    m = cols < N
    v = ml.load(res_out.at[row, cols], mask=m, other=0.0).astype(F32)      # the residual written in place
    ml.store(out.at[row, cols], (v * r * ml.load(w.at[cols], mask=m, other=0.0).astype(F32)).astype(out.dtype), mask=m)


# ---------------------------------------------------------------- GroupNorm, InstanceNorm
@mg.mgpu_kernel(out_shape=lambda x, w, b, *, G, BLOCK_C, BLOCK_HW: (x, S((x.shape[0], G), F32), S((x.shape[0], G), F32)),
                grid=lambda x, w, b, *, G, BLOCK_C, BLOCK_HW: (x.shape[0], G))
def gn_fwd(x, w, b, y, mean_o, rstd_o, *, G: ml.constexpr, BLOCK_C: ml.constexpr, BLOCK_HW: ml.constexpr):
  n, g = ml.program_id(0), ml.program_id(1)
  HW, cpg = x.shape[2], x.shape[1] // G
  chans = g * cpg + ml.arange(BLOCK_C)
  cm = ml.arange(BLOCK_C) < cpg
  s = ml.zeros((BLOCK_C, BLOCK_HW), F32)
  for off in range(0, HW, BLOCK_HW):
    hw = off + ml.arange(BLOCK_HW)
    s += ml.load(x.at[n, chans[:, None], hw[None, :]], mask=cm[:, None] & (hw[None, :] < HW), other=0.0).astype(F32)
  mu = ml.sum(s) / (cpg * HW)
  q = ml.zeros((BLOCK_C, BLOCK_HW), F32)
  for off in range(0, HW, BLOCK_HW):
    hw = off + ml.arange(BLOCK_HW)
    m = cm[:, None] & (hw[None, :] < HW)
    d = ml.where(m, ml.load(x.at[n, chans[:, None], hw[None, :]], mask=m, other=0.0).astype(F32) - mu, 0.0)
    q += d * d
  rs = ml.rsqrt(ml.sum(q) / (cpg * HW) + 1e-5)
  mean_o[n, g] = mu
  rstd_o[n, g] = rs
  wv = ml.load(w.at[chans], mask=cm, other=0.0).astype(F32)
  bv = ml.load(b.at[chans], mask=cm, other=0.0).astype(F32)
  for off in range(0, HW, BLOCK_HW):
    hw = off + ml.arange(BLOCK_HW)
    m = cm[:, None] & (hw[None, :] < HW)
    v = ml.load(x.at[n, chans[:, None], hw[None, :]], mask=m, other=0.0).astype(F32)
    ml.store(y.at[n, chans[:, None], hw[None, :]], ((v - mu) * rs * wv[:, None] + bv[:, None]).astype(y.dtype), mask=m)


def gn(x, w, b, G):
  N, C, HW = x.shape
  y, mu, rs = ln(np.asarray(x, np.float64).reshape(N, G, -1))
  y = y.reshape(N, C, HW)
  return y * np.asarray(w, np.float64)[:, None] + np.asarray(b, np.float64)[:, None], mu, rs


# ---------------------------------------------------------------- BatchNorm training
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK_M, BLOCK_C: (S((ml.cdiv(x.shape[0], BLOCK_M), x.shape[1]), F32),) * 3,
                grid=lambda x, *, BLOCK_M, BLOCK_C: (ml.cdiv(x.shape[0], BLOCK_M), ml.cdiv(x.shape[1], BLOCK_C)))
def bn_partial(x, cnt_p, mean_p, m2_p, *, BLOCK_M: ml.constexpr, BLOCK_C: ml.constexpr):
  pm = ml.program_id(0)
  M, C = x.shape
  rows = pm * BLOCK_M + ml.arange(BLOCK_M)
  cols = ml.program_id(1) * BLOCK_C + ml.arange(BLOCK_C)
  msk = (rows[:, None] < M) & (cols[None, :] < C)
  v = ml.load(x.at[rows[:, None], cols[None, :]], mask=msk, other=0.0).astype(F32)
  n = ml.sum(msk.astype(F32), axis=0)
  mean = ml.sum(v, axis=0) / n
  d = ml.where(msk, v - mean[None, :], 0.0)
  ml.store(cnt_p.at[pm, cols], n, mask=cols < C)
  ml.store(mean_p.at[pm, cols], mean, mask=cols < C)
  ml.store(m2_p.at[pm, cols], ml.sum(d * d, axis=0), mask=cols < C)


@mg.mgpu_kernel(out_shape=lambda cnt, mean, m2, rmean, rvar, *, BLOCK_C, momentum: (
    S((cnt.shape[1],), F32), S((cnt.shape[1],), F32), rmean, rvar),
    grid=lambda cnt, *a, BLOCK_C, momentum: (ml.cdiv(cnt.shape[1], BLOCK_C),), input_output_aliases={3: 2, 4: 3})
def bn_merge(cnt, mean, m2, rmean, rvar, mean_o, invstd_o, rmean_o, rvar_o, *, BLOCK_C: ml.constexpr,
             momentum: ml.constexpr):
  P, C = cnt.shape
  cols = ml.program_id(0) * BLOCK_C + ml.arange(BLOCK_C)
  cm = cols < C
  n_a, mu_a, m2_a = ml.zeros((BLOCK_C,), F32), ml.zeros((BLOCK_C,), F32), ml.zeros((BLOCK_C,), F32)
  for p in range(P):              # Chan's merge of the partial (count, mean, M2) triples
    n_b = ml.load(cnt.at[p, cols], mask=cm, other=0.0)
    n = n_a + n_b
    delta = ml.load(mean.at[p, cols], mask=cm, other=0.0) - mu_a
    frac = ml.where(n > 0, n_b / n, 0.0)
    mu_a = mu_a + delta * frac
    m2_a = m2_a + ml.load(m2.at[p, cols], mask=cm, other=0.0) + delta * delta * n_a * frac
    n_a = n
  ml.store(mean_o.at[cols], mu_a, mask=cm)
  ml.store(invstd_o.at[cols], ml.rsqrt(m2_a / n_a + 1e-5), mask=cm)
  ml.store(rmean_o.at[cols], (1 - momentum) * ml.load(rmean.at[cols], mask=cm, other=0.0) + momentum * mu_a, mask=cm)
  ml.store(rvar_o.at[cols], (1 - momentum) * ml.load(rvar.at[cols], mask=cm, other=0.0) + momentum * m2_a / (n_a - 1.0),
           mask=cm)


def bn_partials(x, bm):
  xf = np.asarray(x, np.float64)
  blocks = [xf[i:i + bm] for i in range(0, x.shape[0], bm)]
  return (np.stack([np.full(x.shape[1], len(b)) for b in blocks]), np.stack([b.mean(0) for b in blocks]),
          np.stack([((b - b.mean(0)) ** 2).sum(0) for b in blocks]))


def bn_merge_case(M, C, BM, BC, seed):
  x = rnd((M, C), seed, np.float32, 2.0, 3.0)
  c, m, q = (a.astype(np.float32) for a in bn_partials(x, BM))
  rm, rv = rnd((C,), seed + 1), np.abs(rnd((C,), seed + 2))

  def ref(c, m, q, rm, rv):
    xf = np.asarray(x, np.float64)
    return xf.mean(0), 1 / np.sqrt(xf.var(0) + 1e-5), 0.9 * rm + 0.1 * xf.mean(0), 0.9 * rv + 0.1 * xf.var(0, ddof=1)
  return (bn_merge, lambda: (c, m, q, rm, rv), ref, 1e-4, dict(BLOCK_C=BC, momentum=0.1))


@mg.mgpu_kernel(out_shape=lambda x, rm, rv, *, BM, momentum: (S((x.shape[1],), F32), S((x.shape[1],), F32),
                                                               S((), jnp.int32), S((x.shape[1],), F32),
                                                               S((x.shape[1],), F32), rm, rv),
                grid=lambda x, *a, BM, momentum: (ml.cdiv(x.shape[0], BM),), input_output_aliases={1: 5, 2: 6})
def bn_ticket(x, rm, rv, s_acc, q_acc, count, mean_o, invstd_o, rm_o, rv_o, *, BM: ml.constexpr,
              momentum: ml.constexpr):
  """One kernel: every program adds its sums atomically; the last one (its ticket) finishes the statistics."""
  M, C = x.shape
  rows = ml.program_id(0) * BM + ml.arange(BM)
  v = ml.load(x.at[rows[:, None], ml.arange(C)[None, :]], mask=rows[:, None] < M, other=0.0).astype(F32)
  ml.atomic_add(s_acc.at[:], ml.sum(v, axis=0))
  ml.atomic_add(q_acc.at[:], ml.sum(v * v, axis=0))
  if ml.atomic_add(count, 1) == ml.num_programs(0) - 1:
    mu = s_acc[...] / M
    var = q_acc[...] / M - mu * mu
    mean_o[...] = mu
    invstd_o[...] = ml.rsqrt(var + 1e-5)
    rm_o[...] = (1 - momentum) * rm[...] + momentum * mu
    rv_o[...] = (1 - momentum) * rv[...] + momentum * var * M / (M - 1)


def bn_ticket_ref(x, rm, rv):
  xf = np.asarray(x, np.float64)
  return (xf.sum(0), (xf * xf).sum(0), -(-x.shape[0] // 64), xf.mean(0), 1 / np.sqrt(xf.var(0) + 1e-5),
          0.9 * rm + 0.1 * xf.mean(0), 0.9 * rv + 0.1 * xf.var(0, ddof=1))


@mg.mgpu_kernel(out_shape=lambda x, dy, mean, invstd, w, *, BLOCK_M, BLOCK_C: (x, S((x.shape[1],), F32), S((x.shape[1],), F32)),
                grid=lambda x, *a, BLOCK_M, BLOCK_C: (ml.cdiv(x.shape[1], BLOCK_C),))
def bn_bwd(x, dy, mean, invstd, w, dx, dw, db, *, BLOCK_M: ml.constexpr, BLOCK_C: ml.constexpr):
  M, C = x.shape
  cols = ml.program_id(0) * BLOCK_C + ml.arange(BLOCK_C)
  cm = cols < C
  mu, rs, wv = (ml.load(r.at[cols], mask=cm, other=0.0) for r in (mean, invstd, w))
  sdy, sdyx = ml.zeros((BLOCK_M, BLOCK_C), F32), ml.zeros((BLOCK_M, BLOCK_C), F32)
  for r0 in range(0, M, BLOCK_M):
    rows = r0 + ml.arange(BLOCK_M)
    msk = (rows[:, None] < M) & cm[None, :]
    v = ml.load(x.at[rows[:, None], cols[None, :]], mask=msk, other=0.0).astype(F32)
    g = ml.load(dy.at[rows[:, None], cols[None, :]], mask=msk, other=0.0).astype(F32)
    sdy += g
    sdyx += ml.where(msk, g * (v - mu[None, :]), 0.0)
  sum_dy, sum_dy_xmu = ml.sum(sdy, axis=0), ml.sum(sdyx, axis=0)
  ml.store(db.at[cols], sum_dy, mask=cm)
  ml.store(dw.at[cols], sum_dy_xmu * rs, mask=cm)
  for r0 in range(0, M, BLOCK_M):
    rows = r0 + ml.arange(BLOCK_M)
    msk = (rows[:, None] < M) & cm[None, :]
    v = ml.load(x.at[rows[:, None], cols[None, :]], mask=msk, other=0.0).astype(F32)
    g = ml.load(dy.at[rows[:, None], cols[None, :]], mask=msk, other=0.0).astype(F32)
    xhat = (v - mu[None, :]) * rs[None, :]
    d = (wv * rs)[None, :] * (g - sum_dy[None, :] / M - xhat * (sum_dy_xmu * rs)[None, :] / M)
    ml.store(dx.at[rows[:, None], cols[None, :]], d.astype(dx.dtype), mask=msk)


def bn_bwd_case(M, C, dt, BM, BC, seed):
  x = rnd((M, C), seed, dt, 2.0, 1.0)
  xf = np.asarray(x, np.float64)
  mu, rs = xf.mean(0), 1 / np.sqrt(xf.var(0) + 1e-5)

  def ref(x, dy, m, r, w):
    g = np.asarray(dy, np.float64)
    xhat = (xf - mu) * rs
    return w * rs * (g - g.mean(0) - xhat * (g * xhat).mean(0)), (g * xhat).sum(0), g.sum(0)
  return (bn_bwd, lambda: (x, rnd((M, C), seed + 1, dt), mu.astype(np.float32), rs.astype(np.float32), rnd((C,), seed + 2)),
          ref, 1e-3 if dt == np.float32 else 3e-2, dict(BLOCK_M=BM, BLOCK_C=BC))


# ---------------------------------------------------------------- jnp spellings, TMA, persistent grids, SMEM rows
@mg.mgpu_kernel(out_shape=lambda x, w, b: x, grid=lambda x, w, b: (x.shape[0] // 4,))
def pl_ln(x_ref, w_ref, b_ref, o_ref):
  r = ml.ds(ml.program_id(0) * 4, 4)
  x = x_ref[r, :].astype(jnp.float32)
  y = (x - jnp.mean(x, axis=-1, keepdims=True)) * jax.lax.rsqrt(jnp.var(x, axis=-1, keepdims=True) + 1e-5)
  o_ref[r, :] = (y * w_ref[...] + b_ref[...]).astype(o_ref.dtype)


@mg.mgpu_kernel(out_shape=lambda x, w, b, *, G: x, grid=lambda x, w, b, *, G: (x.shape[0],))
def gn_reshape(x_ref, w_ref, b_ref, o_ref, *, G: ml.constexpr):
  n = ml.program_id(0)
  C, HW = x_ref.shape[1], x_ref.shape[2]
  xg = x_ref[n].astype(jnp.float32).reshape(G, (C // G) * HW)
  mean = jnp.mean(xg, axis=1, keepdims=True)
  y = ((xg - mean) * jax.lax.rsqrt(jnp.var(xg, axis=1, keepdims=True) + 1e-5)).reshape(C, HW)
  o_ref[n] = (y * w_ref[...][:, None] + b_ref[...][:, None]).astype(o_ref.dtype)


@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), F32),) * 2, grid=lambda x, *, BLOCK: (x.shape[0] // 8,))
def stats_tma(x, mean_o, var_o, *, BLOCK: ml.constexpr):
  r = ml.ds(ml.program_id(0) * 8, 8)
  N = x.shape[1]
  buf = ml.smem((8, BLOCK), x.dtype)
  s, q = ml.zeros((8, BLOCK), F32), ml.zeros((8, BLOCK), F32)
  for k in ml.range(ml.cdiv(N, BLOCK), stages=2):      # the last window's columns past N arrive as zeros
    ml.copy(x.at[r, ml.ds(k * BLOCK, BLOCK)], buf)
    v = buf[...].astype(F32)
    s += v
    q += v * v
  mu = ml.sum(s, axis=1) / N
  mean_o[r] = mu
  var_o[r] = ml.sum(q, axis=1) / N - mu * mu


@mg.mgpu_kernel(out_shape=lambda x, dy, mean, rstd, *, P, BLOCK: (S((P, x.shape[1]), F32),) * 2,
                grid=lambda x, dy, mean, rstd, *, P, BLOCK: (P,))
def apex_dgamma(x, dy, mean, rstd, dg, db, *, P: ml.constexpr, BLOCK: ml.constexpr):
  pid = ml.program_id(0)
  M, N = x.shape
  cols = ml.arange(BLOCK)
  cm = cols < N
  ag, ab = ml.zeros((BLOCK,), F32), ml.zeros((BLOCK,), F32)
  for row in ml.range(pid, M, ml.num_programs(0)):        # a persistent walk over the rows
    g = ml.load(dy.at[row, cols], mask=cm, other=0.0).astype(F32)
    ag += g * (ml.load(x.at[row, cols], mask=cm, other=0.0).astype(F32) - mean[row]) * rstd[row]
    ab += g
  ml.store(dg.at[pid, cols], ag, mask=cm)
  ml.store(db.at[pid, cols], ab, mask=cm)


# ---------------------------------------------------------------- the cases
def _tri_fwd(n, d, dt, blk, seed):
  tol = 1e-4 if dt == np.float32 else 2e-2
  return (tri_ln_fwd, lambda: (rnd((n, d), seed, dt, 2.0, 0.5), rnd((d,), seed + 1, dt), rnd((d,), seed + 2, dt)),
          ln, tol, dict(BLOCK_SIZE=blk))


def _tri_bwd(n, d, dt, g, blk, seed):
  def make():
    x = rnd((n, d), seed, dt, 2.0, 0.5)
    return (x, rnd((n, d), seed + 1, dt), rnd((d,), seed + 2)) + stats(x)

  def ref(x, dy, w, mu, rs):
    dx, dw, db = ln_bwd(x, w, dy, mu, rs)
    return dx, np.stack([dw[k::g].sum(0) for k in range(g)]), np.stack([db[k::g].sum(0) for k in range(g)]), None
  return (tri_ln_bwd_dx, make, ref, 1e-3 if dt == np.float32 else 3e-2, dict(GROUP_SIZE_M=g, BLOCK_SIZE_N=blk))


def _rows(n, d, dt, blk, rows, seed, w=True, b=True):
  return (ln_rows, lambda: (rnd((n, d), seed, dt, 1.5, -0.3), rnd((d,), seed + 1, dt) if w else None,
                            rnd((d,), seed + 2, dt) if b else None),
          ln, 1e-4 if dt == np.float32 else 2e-2, dict(BLOCK_N=blk, ROWS=rows))


def _partial(n, d, dt, rp, blk, seed):
  def make():
    x = rnd((n, d), seed, dt, 2.0, 0.5)
    return (x, rnd((n, d), seed + 1, dt), rnd((d,), seed + 2, dt)) + stats(x)

  def ref(x, dy, w, mu, rs):
    dx, dw, db = ln_bwd(x, w, dy, mu, rs)
    return dx, parts(dw, n, rp), parts(db, n, rp)
  return (ln_bwd_partial, make, ref, 1e-3 if dt == np.float32 else 3e-2, dict(ROWS_PER=rp, BLOCK_N=blk))


def _atomic(n, d, dt, blk, seed):
  def make():
    x = rnd((n, d), seed, dt, 2.0, 0.5)
    return (x, rnd((n, d), seed + 1, dt)) + stats(x)
  return (ln_dwdb_atomic, make, lambda x, dy, mu, rs: tuple(a.sum(0) for a in ln_bwd(x, x[0], dy, mu, rs)[1:]), 1e-3,
          dict(BLOCK_N=blk))


def _liger_fwd(d, dt, mode, offset, blk, seed):
  return (liger_rms_fwd, lambda: (rnd((4, d), seed, dt), rnd((d,), seed + 1, dt)), lambda x, w: rms(x, w, 1e-6, offset),
          1e-4 if dt == np.float32 else 3e-2, dict(eps=1e-6, offset=offset, casting_mode=mode, BLOCK_SIZE=blk))


def _liger_bwd(n, d, dt, rpp, blk, seed, offset=0.0):
  def make():
    x = rnd((n, d), seed, dt)
    return rnd((n, d), seed + 1, dt), x, rnd((d,), seed + 2, dt), rms(x)[1].astype(np.float32)

  def ref(dy, x, w, rs):
    xf, g, r = np.asarray(x, np.float64), np.asarray(dy, np.float64), rs.astype(np.float64)[:, None]
    m = g * (np.asarray(w, np.float64) + offset)
    return r * m - r ** 3 / d * (m * xf).sum(-1, keepdims=True) * xf, parts(g * xf * r, n, rpp)
  return (liger_rms_bwd, make, ref, 1e-3 if dt == np.float32 else 5e-2,
          dict(rows_per_program=rpp, offset=offset, BLOCK_SIZE=blk))


def _fused_add(d, dt, blk, seed):
  def ref(x, r, w):
    s = (np.asarray(x, np.float32) + np.asarray(r, np.float32)).astype(dt)
    return rms(s, w)[0], s
  return (fused_add_rms, lambda: (rnd((4, d), seed, dt), rnd((4, d), seed + 1, dt), rnd((d,), seed + 2, dt)), ref,
          1e-4 if dt == np.float32 else 3e-2, dict(BLOCK=blk))


def _gn(N, C, HW, G, dt, bc, bhw, seed):
  return (gn_fwd, lambda: (rnd((N, C, HW), seed, dt, 2.0, 1.0), rnd((C,), seed + 1, dt), rnd((C,), seed + 2, dt)),
          lambda x, w, b: gn(x, w, b, G), 1e-4 if dt == np.float32 else 3e-2, dict(G=G, BLOCK_C=bc, BLOCK_HW=bhw))


CASES = {
    "tri_ln_fwd_1000": _tri_fwd(4, 1000, np.float32, 256, 1),
    "tri_ln_fwd_768": _tri_fwd(4, 768, np.float32, 256, 2),
    "tri_ln_fwd_5120_f16": _tri_fwd(3, 5120, np.float16, 1024, 3),
    "tri_ln_fwd_12288_bf16": _tri_fwd(2, 12288, BF16, 2048, 4),
    "tri_ln_fwd_1": _tri_fwd(4, 1, np.float32, 128, 5),
    "tri_ln_fwd_16384": _tri_fwd(2, 16384, np.float32, 4096, 6),
    "tri_ln_fwd_12288_f16_one_block": _tri_fwd(2, 12288, np.float16, 16384, 7),
    "tri_ln_bwd_dx_1000": _tri_bwd(16, 1000, np.float32, 4, 1024, 8),
    "tri_ln_bwd_dx_768_bf16": _tri_bwd(12, 768, BF16, 4, 1024, 9),
    "tri_ln_bwd_dwdb_37x768": (tri_ln_bwd_dwdb, lambda: (rnd((37, 768), 10), rnd((37, 768), 11)),
                               lambda a, b: (a.astype(np.float64).sum(0), b.astype(np.float64).sum(0)), 1e-4,
                               dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=128)),
    "ln_rows_10x1000": _rows(10, 1000, np.float32, 1024, 4, 12),
    "ln_rows_16x768_bf16": _rows(16, 768, BF16, 1024, 8, 13),
    "ln_rows_7x100_f16_no_weight": _rows(7, 100, np.float16, 128, 8, 14, w=False),
    "ln_rows_7x96_no_affine": _rows(7, 96, np.float32, 128, 8, 15, w=False, b=False),
    "ln_rows_8x5_no_bias": _rows(8, 5, np.float32, 8, 8, 16, b=False),
    "ln_rows_5x1000_two_rows": _rows(5, 1000, np.float32, 1024, 2, 17),
    "welford_reduce_1000": (welford_reduce, lambda: (rnd((8, 1000), 21, np.float32, 2.0, 5.0),),
                            lambda x: (x.astype(np.float64).mean(1), x.astype(np.float64).var(1)), 1e-4, dict(BLOCK=256)),
    "ln_bwd_partial_10x1000": _partial(10, 1000, np.float32, 4, 1024, 22),
    "ln_bwd_partial_16x5120_bf16": _partial(16, 5120, BF16, 8, 8192, 23),
    "ln_dwdb_atomic_5x12288": _atomic(5, 12288, np.float32, 2048, 24),
    "liger_rms_fwd_1000_llama": _liger_fwd(1000, np.float32, 0, 0.0, 1024, 25),
    "liger_rms_fwd_5120_bf16_gemma": _liger_fwd(5120, BF16, 1, 1.0, 8192, 26),
    "liger_rms_bwd_16x768_bf16_offset": _liger_bwd(16, 768, BF16, 8, 1024, 27, offset=1.0),
    "liger_rms_bwd_7x12288": _liger_bwd(7, 12288, np.float32, 3, 16384, 28),
    "fused_add_rms_12288_bf16": _fused_add(12288, BF16, 2048, 29),
    "fused_add_rms_1000_f16": _fused_add(1000, np.float16, 256, 30),
    "gn_fwd_64x1000_g32": _gn(2, 64, 1000, 32, np.float32, 2, 256, 31),
    "gn_fwd_320x64_g32_bf16": _gn(2, 320, 64, 32, BF16, 16, 64, 32),
    "gn_fwd_30x100_g3": _gn(2, 30, 100, 3, np.float32, 16, 128, 33),
    "bn_partial_50x3_bf16": (bn_partial, lambda: (rnd((50, 3), 35, BF16, 2.0, 3.0),), lambda x: bn_partials(x, 32), 1e-3,
                             dict(BLOCK_M=32, BLOCK_C=16)),
    "bn_merge_1000x96": bn_merge_case(1000, 96, 64, 64, 36),
    "bn_merge_50x3": bn_merge_case(50, 3, 8, 16, 37),
    "bn_ticket_1000x96_bf16": (bn_ticket, lambda: (rnd((1000, 96), 38, BF16, 1.0, 2.0), rnd((96,), 39),
                                                   np.abs(rnd((96,), 40))),
                               bn_ticket_ref, 1e-2, dict(BM=64, momentum=0.1)),
    "bn_bwd_1000x96": bn_bwd_case(1000, 96, np.float32, 64, 64, 41),
    "bn_bwd_100x3_bf16": bn_bwd_case(100, 3, BF16, 32, 16, 42),
    "pl_ln_1000": (pl_ln, lambda: (rnd((8, 1000), 43), rnd((1000,), 44), rnd((1000,), 45)), lambda *a: ln(*a)[0], 1e-4, {}),
    "pl_ln_12288_bf16": (pl_ln, lambda: (rnd((4, 12288), 46, BF16), rnd((12288,), 47, BF16), rnd((12288,), 48, BF16)),
                         lambda *a: ln(*a)[0], 2e-2, {}),
    "pl_ln_7": (pl_ln, lambda: (rnd((8, 7), 49), rnd((7,), 50), rnd((7,), 51)), lambda *a: ln(*a)[0], 1e-4, {}),
    "gn_reshape_32x100": (gn_reshape, lambda: (rnd((2, 32, 100), 53), rnd((32,), 54), rnd((32,), 55)),
                          lambda x, w, b: gn(x, w, b, 8)[0], 1e-4, dict(G=8)),
    "stats_tma_1000": (stats_tma, lambda: (rnd((16, 1000), 57, np.float32, 1.0, 2.0),),
                       lambda x: (x.astype(np.float64).mean(1), x.astype(np.float64).var(1)), 1e-3, dict(BLOCK=256)),
    "apex_dgamma_37x1000": (apex_dgamma, lambda: (rnd((37, 1000), 58), rnd((37, 1000), 59), rnd((37,), 60),
                                                  np.abs(rnd((37,), 61))),
                            lambda x, dy, mu, rs: tuple(np.stack([a[p::8].sum(0) for p in range(8)])
                                                        for a in ln_bwd(x, x[0], dy, mu, rs)[1:]),
                            1e-4, dict(P=8, BLOCK=1024)),
}


def _check(got, want, tol):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    if w is not None:
      np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)


def export(kernel, *args, **kw):
  """`kernel` checked and exported for CUDA at the shapes and dtypes of `args` (None for an input left out)."""
  specs = [None if a is None else S(np.shape(a), a.dtype) for a in args]
  kernel.check(*specs, **kw)
  jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs)


@pytest.mark.parametrize("name", list(CASES))
def test_theme_kernel_matches_numpy_and_builds(name):
  kernel, make, ref, tol, kw = CASES[name]
  args = make()
  _check(kernel(*args, interpret=True, **kw), ref(*args), tol)
  export(kernel, *args, **kw)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (ml.cdiv(x.shape[0], 2),))
def two_row_sums(x, o):
  rows = ml.program_id(0) * 2 + ml.arange(2)
  cols = ml.arange(32)
  m = (rows[:, None] < x.shape[0]) & (cols[None, :] < x.shape[1])
  v = ml.load(x.at[rows[:, None], cols[None, :]], mask=m, other=0.0)
  ml.store(o.at[rows], ml.sum(v, axis=1), mask=rows < x.shape[0])


def test_a_few_rows_statistic_through_a_run_of_rows_computes():
  """A (2,) row statistic of a (2, 32) tile stored through `o.at[rows]`: MG204 at the arange until probe 59b, which
  stores it from the padded trace (the run grown to the tile's 4 padded rows, under the mask)."""
  x = np.random.default_rng(3).standard_normal((9, 20)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(two_row_sums(x, interpret=True)), x.sum(1), rtol=1e-5, atol=1e-5)
  export(two_row_sums, x)


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in CASES if n.startswith(("tri_", "liger_", "fused_", "gn_fwd", "bn_", "ln_rows"))])
def test_theme_kernel_on_the_gpu(name):
  kernel, make, ref, tol, kw = CASES[name]
  args = make()
  _check(jax.jit(lambda *a: kernel(*a, **kw))(*args), ref(*args), max(tol, 2e-3))
