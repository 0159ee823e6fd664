"""Probe 60b's corpus, part a (registered in probe60b_common.CASES; tests/test_probe60b.py runs them)."""

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe_util import rnd
from probe60b_common import S, BF16, F32, _MODE, CASES, _export, close


# ================================================================ (b1)
# ---- Liger cross entropy: online lse over vocab chunks, grad written in place into the logits
@mg.mgpu_kernel(out_shape=lambda X, Y, *, n_non_ignore, ignore_index, label_smoothing, softcap, BLOCK_SIZE: (X, S((X.shape[0],), F32)),
                grid=lambda X, *a, **k: (X.shape[0],), input_output_aliases={0: 0})
def liger_ce(X_ptr, Y_ptr, dX_ptr, loss_ptr, *, n_non_ignore: tl.constexpr, ignore_index: tl.constexpr,
             label_smoothing: tl.constexpr, softcap: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  y = tl.load(Y_ptr.at[program_id])
  if y == ignore_index:
    for i in range(0, n_cols, BLOCK_SIZE):
      X_offsets = i + tl.arange(0, BLOCK_SIZE)
      tl.store(dX_ptr.at[program_id, X_offsets], 0.0, mask=X_offsets < n_cols)
    tl.store(loss_ptr.at[program_id], 0.0)
    return
  m = float("-inf")
  d = 0.0
  ori_X_y = tl.load(X_ptr.at[program_id, y]).cast(tl.float32)
  if softcap > 0:
    ori_X_y = softcap * tl.extra.cuda.libdevice.tanh(ori_X_y / softcap)
  scaled_x_sum = 0.0
  eps = label_smoothing / n_cols
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
    if softcap > 0:
      X_block = softcap * tl.extra.cuda.libdevice.tanh(X_block / softcap)
    block_max = tl.max(X_block)
    if label_smoothing > 0:
      scaled_x_sum += tl.sum(tl.where(X_offsets < n_cols, -eps * X_block, 0.0))
    m_new = tl.maximum(m, block_max)
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
    m = m_new
  lse = m + tl.log(d)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
    if softcap > 0:
      intermediate = tl.extra.cuda.libdevice.tanh(X_block / softcap)
      X_block = softcap * intermediate
    X_block = tl.exp(X_block - m) / d
    X_block += -eps
    X_block = tl.where(X_offsets != y, X_block, X_block - (1 - label_smoothing))
    X_block = X_block / n_non_ignore
    if softcap > 0:
      X_block = X_block * (1 - intermediate * intermediate)
    tl.store(dX_ptr.at[program_id, X_offsets], X_block, mask=X_offsets < n_cols)
  tl.debug_barrier()
  loss = lse - ori_X_y
  if label_smoothing > 0:
    smooth_loss = scaled_x_sum + label_smoothing * lse
    loss = loss * (1 - label_smoothing) + smooth_loss
  tl.store(loss_ptr.at[program_id], loss / n_non_ignore)

def ce_ref(x, y, ii, ls, sc, nni):
  x = np.asarray(x, np.float64)
  if sc > 0: z = sc * np.tanh(x / sc)
  else: z = x
  m = z.max(1, keepdims=True); lse = (m + np.log(np.exp(z - m).sum(1, keepdims=True)))[:, 0]
  p = np.exp(z - lse[:, None]); V = x.shape[1]
  n = np.arange(x.shape[0]); yy = np.where(y == ii, 0, y)
  loss = lse - z[n, yy]
  loss = loss * (1 - ls) + (ls * lse - ls / V * z.sum(1))
  g = p - ls / V; g[n, yy] -= 1 - ls; g /= nni
  if sc > 0: g *= 1 - (z / sc) ** 2
  ign = y == ii
  loss[ign] = 0; g[ign] = 0
  return g, loss / nni

def t_ce(V, dt, ls, sc, rows=5):
  x = (rnd((rows, V), 1) * 3).astype(dt); y = np.random.default_rng(2).integers(0, V, rows).astype(np.int32); y[1] = -100
  kw = dict(n_non_ignore=rows - 1, ignore_index=-100, label_smoothing=ls, softcap=sc, BLOCK_SIZE=4096 if V > 5000 else 1024)
  g, loss = liger_ce(x, y, **kw, **_MODE)
  wg, wl = ce_ref(x, y, -100, ls, sc, rows - 1)
  np.testing.assert_allclose(np.asarray(loss), wl, rtol=2e-3, atol=2e-3)
  np.testing.assert_allclose(np.asarray(g, np.float32), wg, rtol=3e-2, atol=3e-3 if dt == np.float32 else 1e-2)
  _export(liger_ce, x, y, **kw)

CASES["ce_32000_f32"] = lambda: t_ce(32000, np.float32, 0.0, 0.0)
CASES["ce_50257_bf16_ls"] = lambda: t_ce(50257, BF16, 0.1, 0.0, 3)
CASES["ce_1000_f16_softcap"] = lambda: t_ce(1000, np.float16, 0.0, 30.0, 7)

# ================================================================ (b2)

# ---- Liger swiglu fwd / bwd (bwd writes into its inputs in place)
@mg.mgpu_kernel(out_shape=lambda a, b, *, BLOCK_SIZE: a, grid=lambda a, b, **k: (a.shape[0],))
def swiglu_fwd(a_ptr, b_ptr, c_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0)
  n_cols = a_ptr.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  a_row = tl.load(a_ptr.at[program_id, col_offsets], mask=mask, other=0).to(tl.float32)
  b_row = tl.load(b_ptr.at[program_id, col_offsets], mask=mask, other=0)
  c_row = (a_row * tl.sigmoid(a_row)).cast(b_row.dtype) * b_row
  tl.store(c_ptr.at[program_id, col_offsets], c_row, mask=mask)

@mg.mgpu_kernel(out_shape=lambda dc, a, b, *, BLOCK_SIZE: (a, b), grid=lambda dc, *a, **k: (dc.shape[0],),
                input_output_aliases={1: 0, 2: 1})
def swiglu_bwd(dc_ptr, a_ptr, b_ptr, da_ptr, db_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0)
  n_cols = a_ptr.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  dc_row = tl.load(dc_ptr.at[program_id, col_offsets], mask=mask, other=0)
  a_row = tl.load(a_ptr.at[program_id, col_offsets], mask=mask, other=0).to(tl.float32)
  b_row = tl.load(b_ptr.at[program_id, col_offsets], mask=mask, other=0)
  sig_a = tl.sigmoid(a_row)
  silu_a = a_row * sig_a
  db_row = dc_row * silu_a
  da_row = dc_row * (silu_a * (1 - sig_a) + sig_a) * b_row
  tl.store(da_ptr.at[program_id, col_offsets], da_row, mask=mask)
  tl.store(db_ptr.at[program_id, col_offsets], db_row, mask=mask)

def t_swiglu(n, d, dt, BS):
  a, b, dc = rnd((n, d), 1, dt), rnd((n, d), 2, dt), rnd((n, d), 3, dt)
  c = swiglu_fwd(a, b, BLOCK_SIZE=BS, **_MODE)
  af = a.astype(np.float32); s = 1 / (1 + np.exp(-af))
  close(c, (af * s).astype(dt).astype(np.float32) * b.astype(np.float32), 2e-2 if dt != np.float32 else 1e-5)
  da, db = swiglu_bwd(dc, a, b, BLOCK_SIZE=BS, **_MODE)
  dcf, bf = dc.astype(np.float32), b.astype(np.float32)
  close(db, dcf * af * s, 3e-2 if dt != np.float32 else 1e-5)
  close(da, dcf * (af * s * (1 - s) + s) * bf, 3e-2 if dt != np.float32 else 1e-5)
  _export(swiglu_fwd, a, b, BLOCK_SIZE=BS); _export(swiglu_bwd, dc, a, b, BLOCK_SIZE=BS)

CASES["swiglu_f32_4096"] = lambda: t_swiglu(3, 4096, np.float32, 4096)
CASES["swiglu_bf16_11008"] = lambda: t_swiglu(5, 11008, BF16, 16384)
CASES["swiglu_f16_1000"] = lambda: t_swiglu(7, 1000, np.float16, 1024)

# ---- Unsloth geglu exact / approx
@mg.mgpu_kernel(out_shape=lambda e, g, *, BLOCK_SIZE, approx: e, grid=lambda e, g, *, BLOCK_SIZE, approx: (tl.cdiv(e.size, BLOCK_SIZE),))
def geglu_fwd(e, g, h, *, BLOCK_SIZE: tl.constexpr, approx: tl.constexpr):
  block_idx = tl.program_id(0)
  offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < e.shape[0]
  e_row = tl.load(e.at[offsets], mask=mask, other=0).to(tl.float32)
  g_row = tl.load(g.at[offsets], mask=mask, other=0)
  if approx:
    s = 0.7978845608028654
    f_row = 0.5 * e_row * (tl.math.tanh(s * e_row * (1.0 + 0.044715 * e_row * e_row)) + 1.0)
  else:
    f_row = 0.5 * e_row * (tl.math.erf(tl.math.rsqrt(2.0) * e_row) + 1.0)
  f_row = f_row.to(g_row.dtype)
  tl.store(h.at[offsets], f_row * g_row, mask=mask)

def t_geglu(n, dt, approx):
  e, g = rnd((n,), 4, dt), rnd((n,), 5, dt)
  h = geglu_fwd(e, g, BLOCK_SIZE=1024, approx=approx, **_MODE)
  ej = jnp.asarray(e, jnp.float32)
  f = jax.nn.gelu(ej, approximate=approx).astype(dt).astype(np.float32)
  close(h, f * g.astype(np.float32), 2e-2 if dt != np.float32 else 1e-5)
  _export(geglu_fwd, e, g, BLOCK_SIZE=1024, approx=approx)
CASES["geglu_exact_bf16"] = lambda: t_geglu(4096 * 3 + 17, BF16, False)
CASES["geglu_approx_f32"] = lambda: t_geglu(1000, np.float32, True)

# ---- Liger / Unsloth rope: q (bsz, seq, nh, hd), cos/sin (seq, hd)
@mg.mgpu_kernel(out_shape=lambda q, k, cos, sin, **kw: (q, k), grid=lambda q, *a, **kw: (q.shape[0] * q.shape[1],),
                input_output_aliases={0: 0, 1: 1})
def rope_fwd(q_ptr, k_ptr, cos, sin, q_out, k_out, *, pad_n_qh: tl.constexpr, pad_n_kh: tl.constexpr, pad_hd: tl.constexpr, BACKWARD_PASS: tl.constexpr = False):
  pid = tl.program_id(0)
  sl = q_ptr.shape[1]
  n_qh, n_kh, hd = q_ptr.shape[2], k_ptr.shape[2], q_ptr.shape[3]
  b = pid // sl
  s = pid % sl
  cos_offsets = tl.arange(0, pad_hd // 2)
  cos_mask = cos_offsets < hd // 2
  cos_row = tl.load(cos.at[s, cos_offsets], mask=cos_mask, other=0)
  sin_row = tl.load(sin.at[s, cos_offsets], mask=cos_mask, other=0)
  first_half_q_offsets = tl.arange(0, pad_n_qh)[:, None]
  first_half_k_offsets = tl.arange(0, pad_n_kh)[:, None]
  d1 = tl.arange(0, pad_hd // 2)[None, :]
  first_q_mask = (first_half_q_offsets < n_qh) & (d1 < hd // 2)
  first_k_mask = (first_half_k_offsets < n_kh) & (d1 < hd // 2)
  q_tile_1 = tl.load(q_ptr.at[b, s, first_half_q_offsets, d1], mask=first_q_mask, other=0).to(sin_row.dtype)
  k_tile_1 = tl.load(k_ptr.at[b, s, first_half_k_offsets, d1], mask=first_k_mask, other=0).to(sin_row.dtype)
  q_tile_2 = tl.load(q_ptr.at[b, s, first_half_q_offsets, d1 + hd // 2], mask=first_q_mask, other=0).to(sin_row.dtype)
  k_tile_2 = tl.load(k_ptr.at[b, s, first_half_k_offsets, d1 + hd // 2], mask=first_k_mask, other=0).to(sin_row.dtype)
  if not BACKWARD_PASS:
    new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
    new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
    new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
    new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
  else:
    new_q_tile_1 = q_tile_1 * cos_row + q_tile_2 * sin_row
    new_q_tile_2 = q_tile_2 * cos_row - q_tile_1 * sin_row
    new_k_tile_1 = k_tile_1 * cos_row + k_tile_2 * sin_row
    new_k_tile_2 = k_tile_2 * cos_row - k_tile_1 * sin_row
  tl.store(q_out.at[b, s, first_half_q_offsets, d1], new_q_tile_1, mask=first_q_mask)
  tl.store(q_out.at[b, s, first_half_q_offsets, d1 + hd // 2], new_q_tile_2, mask=first_q_mask)
  tl.store(k_out.at[b, s, first_half_k_offsets, d1], new_k_tile_1, mask=first_k_mask)
  tl.store(k_out.at[b, s, first_half_k_offsets, d1 + hd // 2], new_k_tile_2, mask=first_k_mask)

def t_rope(bsz, sl, nqh, nkh, hd, dt):
  q, k = rnd((bsz, sl, nqh, hd), 6, dt), rnd((bsz, sl, nkh, hd), 7, dt)
  th = np.arange(sl)[:, None] * (1e4 ** (-np.arange(hd // 2) / (hd // 2)))[None]
  cos = np.cos(np.concatenate([th, th], 1)).astype(dt); sin = np.sin(np.concatenate([th, th], 1)).astype(dt)
  kw = dict(pad_n_qh=1 << (nqh - 1).bit_length(), pad_n_kh=1 << (nkh - 1).bit_length(), pad_hd=1 << (hd - 1).bit_length())
  qo, ko = rope_fwd(q, k, cos, sin, **kw, **_MODE)
  def rot(x):
    x = x.astype(np.float32); c = cos.astype(np.float32)[None, :, None]; s_ = sin.astype(np.float32)[None, :, None]
    x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
    return np.concatenate([x1 * c[..., :hd // 2] - x2 * s_[..., :hd // 2], x2 * c[..., :hd // 2] + x1 * s_[..., :hd // 2]], -1)
  tol = 2e-2 if dt != np.float32 else 1e-5
  close(qo, rot(q), tol); close(ko, rot(k), tol)
  _export(rope_fwd, q, k, cos, sin, **kw)
CASES["rope_llama_bf16"] = lambda: t_rope(2, 5, 32, 8, 128, BF16)
CASES["rope_odd_f32"] = lambda: t_rope(1, 3, 6, 2, 64, np.float32)

# ================================================================ (b3)

# ---- Liger rms norm forward (llama casting: compute in f32), backward with rows_per_program dW partials
@mg.mgpu_kernel(out_shape=lambda X, W, *, eps, offset, BLOCK_SIZE: (X, S((X.shape[0],), F32)), grid=lambda X, W, **k: (X.shape[0],))
def rms_fwd(Y_ptr_in, W_ptr, Y_ptr, RSTD_ptr, *, eps: tl.constexpr, offset: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0).to(tl.int64)
  n_cols = Y_ptr_in.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  X_row = tl.load(Y_ptr_in.at[row_idx, col_offsets], mask=mask, other=0)
  X_row_dtype = X_row.dtype
  W_row = tl.load(W_ptr.at[col_offsets], mask=mask, other=0)
  X_row = X_row.to(tl.float32)
  mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
  rstd = tl.math.rsqrt(mean_square + eps)
  tl.store(RSTD_ptr.at[row_idx], rstd)
  X_row = X_row * rstd
  X_row = X_row.to(X_row_dtype)
  Y_row = X_row * (offset + W_row)
  tl.store(Y_ptr.at[row_idx, col_offsets], Y_row, mask=mask)

@mg.mgpu_kernel(out_shape=lambda dY, X, W, RSTD, *, rows_per_program, offset, BLOCK_SIZE: (X, S((tl.cdiv(X.shape[0], rows_per_program), X.shape[1]), F32)),
                grid=lambda dY, X, *a, rows_per_program, **k: (tl.cdiv(X.shape[0], rows_per_program),))
def rms_bwd(dY_ptr, X_ptr, W_ptr, RSTD_ptr, dX_ptr, dW_ptr, *, rows_per_program: tl.constexpr, offset: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  row_block_id = tl.program_id(0)
  n_rows, n_cols = X_ptr.shape
  row_start = row_block_id * rows_per_program
  row_end = min((row_block_id + 1) * rows_per_program, n_rows)
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  dW_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
  W_row = tl.load(W_ptr.at[col_offsets], mask=mask, other=0.0)
  W_row = W_row + offset
  for row_idx in range(row_start, row_end):
    dY_row = tl.load(dY_ptr.at[row_idx, col_offsets], mask=mask, other=0.0)
    X_row = tl.load(X_ptr.at[row_idx, col_offsets], mask=mask, other=0.0)
    rstd_row = tl.load(RSTD_ptr.at[row_idx])
    X_row = X_row.to(tl.float32)
    m = (dY_row * W_row).to(tl.float32)
    dX_row = rstd_row * m
    dX_row += (rstd_row) * (-(1 / n_cols) * rstd_row * rstd_row * tl.sum(m * X_row, axis=0) * X_row)
    dW_row += dY_row * (X_row * rstd_row).to(X_row.dtype)
    tl.store(dX_ptr.at[row_idx, col_offsets], dX_row.to(X_ptr.dtype.element_ty), mask=mask)
  tl.store(dW_ptr.at[row_block_id, col_offsets], dW_row, mask=mask)

def t_rms(n, d, dt, rpp):
  x, w, dy = rnd((n, d), 1, dt), rnd((d,), 2, dt), rnd((n, d), 3, dt)
  BS = 1 << (d - 1).bit_length()
  y, rstd = rms_fwd(x, w, eps=1e-6, offset=0.0, BLOCK_SIZE=BS, **_MODE)
  xf = x.astype(np.float64); r = 1 / np.sqrt((xf * xf).mean(1) + 1e-6)
  tol = 2e-2 if dt != np.float32 else 1e-4
  close(rstd, r, 1e-4); close(y, (xf * r[:, None]) * w.astype(np.float64), tol)
  dx, dwp = rms_bwd(dy, x, w, np.asarray(rstd), rows_per_program=rpp, offset=0.0, BLOCK_SIZE=BS, **_MODE)
  m = dy.astype(np.float64) * w.astype(np.float64)
  wdx = r[:, None] * m - r[:, None] ** 3 / d * (m * xf).sum(1, keepdims=True) * xf
  close(dx, wdx, tol * 5)
  close(np.asarray(dwp).sum(0), (dy.astype(np.float64) * xf * r[:, None]).sum(0), tol * 10)
  _export(rms_fwd, x, w, eps=1e-6, offset=0.0, BLOCK_SIZE=BS); _export(rms_bwd, dy, x, w, np.asarray(rstd), rows_per_program=rpp, offset=0.0, BLOCK_SIZE=BS)
CASES["rms_f32_4096"] = lambda: t_rms(9, 4096, np.float32, 4)
CASES["rms_bf16_odd"] = lambda: t_rms(7, 1000, BF16, 3)

# ---- Liger fused add rms norm: residual updated in place
@mg.mgpu_kernel(out_shape=lambda X, R, W, *, eps, BLOCK_SIZE: (X, R, S((X.shape[0],), F32)), grid=lambda X, *a, **k: (X.shape[0],),
                input_output_aliases={1: 1})
def fused_add_rms(X_ptr, R_ptr, W_ptr, Y_ptr, S_ptr, RSTD_ptr, *, eps: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  X_row = tl.load(X_ptr.at[row_idx, col_offsets], mask=mask, other=0)
  R_row = tl.load(R_ptr.at[row_idx, col_offsets], mask=mask, other=0)
  S_row = X_row + R_row
  tl.store(S_ptr.at[row_idx, col_offsets], S_row, mask=mask)
  S_row_dtype = S_row.dtype
  W_row = tl.load(W_ptr.at[col_offsets], mask=mask, other=0)
  S_row = S_row.to(tl.float32)
  mean_square = tl.sum(S_row * S_row, axis=0) / n_cols
  rstd = tl.rsqrt(mean_square + eps)
  tl.store(RSTD_ptr.at[row_idx], rstd)
  Y_row = (S_row * rstd).to(S_row_dtype) * W_row
  tl.store(Y_ptr.at[row_idx, col_offsets], Y_row, mask=mask)
def t_far(n, d, dt):
  x, r, w = rnd((n, d), 1, dt), rnd((n, d), 2, dt), rnd((d,), 3, dt)
  BS = 1 << (d - 1).bit_length()
  y, s, rs = fused_add_rms(x, r, w, eps=1e-6, BLOCK_SIZE=BS, **_MODE)
  sf = (x + r).astype(np.float64); rr = 1 / np.sqrt((sf ** 2).mean(1) + 1e-6)
  close(s, (x + r), 1e-6); close(rs, rr, 1e-4); close(y, sf * rr[:, None] * w.astype(np.float64), 3e-2 if dt != np.float32 else 1e-4)
  _export(fused_add_rms, x, r, w, eps=1e-6, BLOCK_SIZE=BS)
CASES["far_bf16_4096"] = lambda: t_far(5, 4096, BF16)
CASES["far_f16_odd"] = lambda: t_far(3, 2880, np.float16)

# ---- Liger DyT: tanh(alpha x) * gamma + beta
@mg.mgpu_kernel(out_shape=lambda x, alpha, gamma, beta, *, BLOCK_N: x, grid=lambda x, *a, **k: (x.shape[0],))
def dyt_fwd(x_ptr, alpha_ptr, gamma_ptr, beta_ptr, y_ptr, *, BLOCK_N: tl.constexpr):
  col = tl.arange(0, BLOCK_N)
  mask = col < x_ptr.shape[1]
  row_id = tl.cast(tl.program_id(0), tl.int64)
  alpha = tl.load(alpha_ptr.at[0])
  gamma = tl.load(gamma_ptr.at[col], mask=mask)
  beta = tl.load(beta_ptr.at[col], mask=mask)
  x = tl.load(x_ptr.at[row_id, col], mask=mask)
  y = gamma * tl.extra.cuda.libdevice.tanh((alpha * x).cast(tl.float32)) + beta
  tl.store(y_ptr.at[row_id, col], y, mask=mask)
def t_dyt(n, d, dt):
  x, a, g, b = rnd((n, d), 1, dt), np.array([0.5], np.float32).astype(dt), rnd((d,), 3, dt), rnd((d,), 4, dt)
  y = dyt_fwd(x, a, g, b, BLOCK_N=1 << (d - 1).bit_length(), **_MODE)
  close(y, g.astype(np.float32) * np.tanh(0.5 * x.astype(np.float32)) + b.astype(np.float32), 2e-2 if dt != np.float32 else 1e-5)
  _export(dyt_fwd, x, a, g, b, BLOCK_N=1 << (d - 1).bit_length())
CASES["dyt_bf16"] = lambda: t_dyt(6, 4096, BF16)
CASES["dyt_f32_odd"] = lambda: t_dyt(3, 777, np.float32)

# ---- Liger kl_div forward (reduction none, log_target False), chunked
@mg.mgpu_kernel(out_shape=lambda y_pred, y_true, *, BLOCK_SIZE, log_target, reduction: S((y_pred.shape[0],), F32) if reduction != "none" else y_pred,
                grid=lambda y, *a, **k: (y.shape[0],))
def kldiv_fwd(y_ptr, gt_ptr, loss_ptr, *, BLOCK_SIZE: tl.constexpr, log_target: tl.constexpr, reduction: tl.constexpr, eps: tl.constexpr = 1e-10):
  pid = tl.program_id(0).to(tl.int64)
  n_cols = y_ptr.shape[1]
  base_offsets = tl.arange(0, BLOCK_SIZE)
  loss_sum = 0.0
  for i in range(0, n_cols, BLOCK_SIZE):
    offsets = i + base_offsets
    mask = offsets < n_cols
    y = tl.load(y_ptr.at[pid, offsets], mask=mask, other=0.0)
    y_true = tl.load(gt_ptr.at[pid, offsets], mask=mask, other=0.0)
    if not log_target:
      loss = y_true * (tl.log(tl.maximum(y_true, eps)) - y)
    else:
      loss = tl.exp(y_true) * (y_true - y)
    if reduction == "none":
      tl.store(loss_ptr.at[pid, offsets], loss, mask=mask)
    else:
      loss_sum += tl.sum(loss, axis=0)
  if reduction != "none":
    tl.store(loss_ptr.at[pid], loss_sum)
def t_kl(n, V, lt, red):
  lp = np.log(np.random.default_rng(1).dirichlet(np.ones(V), n)).astype(np.float32)
  t = np.random.default_rng(2).dirichlet(np.ones(V), n).astype(np.float32)
  tt = np.log(t) if lt else t
  out = kldiv_fwd(lp, tt, BLOCK_SIZE=4096, log_target=lt, reduction=red, **_MODE)
  want = t * (np.log(np.maximum(t, 1e-10)) - lp) if not lt else t * (np.log(t) - lp)
  close(out, want if red == "none" else want.sum(1), 1e-4)
  _export(kldiv_fwd, lp, tt, BLOCK_SIZE=4096, log_target=lt, reduction=red)
CASES["kl_none"] = lambda: t_kl(3, 32000, False, "none")
CASES["kl_sum_logt"] = lambda: t_kl(5, 50257, True, "sum")

# ================================================================ (b4)

# ---- FlagGems sum over dim of (M, N, K) flattened, keepdim: pid over M*K, loop over N in chunks
@mg.mgpu_kernel(out_shape=lambda inp, *, M, N, K, BLOCK_M, BLOCK_N: S((M * K,), F32),
                grid=lambda inp, *, M, N, K, BLOCK_M, BLOCK_N: (tl.cdiv(M, BLOCK_M), K))
def sum_dim_kernel(inp, out, *, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
  pid_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
  pid_k = tl.program_id(1)
  _sum = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
  for off in range(0, N, BLOCK_N):
    n_offset = off + tl.arange(0, BLOCK_N)[None, :]
    offset = pid_m * N * K + n_offset * K + pid_k
    mask = (pid_m < M) & (n_offset < N)
    a = tl.load(inp.at[offset], mask=mask, other=0).to(tl.float32)
    _sum += a
  s = tl.sum(_sum, axis=1)[:, None]
  tl.store(out.at[pid_m * K + pid_k], s, mask=pid_m < M)
def t_sumdim(M, N, K, dt):
  x = rnd((M, N, K), 1, dt)
  kw = dict(M=M, N=N, K=K, BLOCK_M=4, BLOCK_N=64)
  o = sum_dim_kernel(x.reshape(-1), **kw, **_MODE)
  close(np.asarray(o).reshape(M, K), x.astype(np.float64).sum(1), 1e-3)
  _export(sum_dim_kernel, x.reshape(-1), **kw)
CASES["sumdim_mid"] = lambda: t_sumdim(5, 300, 3, np.float32)
CASES["sumdim_bf16"] = lambda: t_sumdim(8, 1000, 1, BF16)

# ---- FlagGems argmax over the last dim, chunked, with max-so-far and index
@mg.mgpu_kernel(out_shape=lambda inp, *, BLOCK_M, BLOCK_N: S((inp.shape[0],), jnp.int32),
                grid=lambda inp, *, BLOCK_M, BLOCK_N: (tl.cdiv(inp.shape[0], BLOCK_M),))
def argmax_kernel(inp, out_index, *, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
  M, N = inp.shape
  pid_m = tl.program_id(0)
  m_offset = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
  max_values = tl.full([BLOCK_M], dtype=tl.float32, value=float("-inf"))
  argmax_values = tl.full([BLOCK_M], dtype=tl.int32, value=0)
  for start_n in range(0, N, BLOCK_N):
    n_offset = start_n + tl.arange(0, BLOCK_N)
    offset = m_offset[:, None] * N + n_offset[None, :]
    mask = (m_offset[:, None] < M) & (n_offset[None, :] < N)
    inp_vals = tl.load(inp.reshape(-1).at[offset], mask=mask, other=-float("inf")) if False else tl.load(inp.at[m_offset[:, None], n_offset[None, :]], mask=mask, other=-float("inf"))
    local_max, local_argmax = tl.max(inp_vals.to(tl.float32), 1, return_indices=True, return_indices_tie_break_left=True)
    update = local_max > max_values
    max_values = tl.where(update, local_max, max_values)
    argmax_values = tl.where(update, start_n + local_argmax, argmax_values)
  tl.store(out_index.at[m_offset], argmax_values, mask=m_offset < M)
def t_argmax(M, N, dt):
  x = rnd((M, N), 2, dt)
  o = argmax_kernel(x, BLOCK_M=8, BLOCK_N=1024, **_MODE)
  np.testing.assert_array_equal(np.asarray(o), np.argmax(x.astype(np.float32), 1))
  _export(argmax_kernel, x, BLOCK_M=8, BLOCK_N=1024)
CASES["argmax_32000"] = lambda: t_argmax(13, 32000, np.float32)
CASES["argmax_bf16_odd"] = lambda: t_argmax(5, 3001, BF16)

# ---- FlagGems index_select dim 0 (rows), flat pointers with strides as arguments
@mg.mgpu_kernel(out_shape=lambda inp, index, *, BLOCK_M, BLOCK_N: S((index.shape[0] * inp.shape[1],), inp.dtype),
                grid=lambda inp, index, *, BLOCK_M, BLOCK_N: (tl.cdiv(index.shape[0], BLOCK_M), tl.cdiv(inp.shape[1], BLOCK_N)))
def index_select_kernel(inp, index, out, *, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
  M, N = index.shape[0], inp.shape[1]
  pid_x = tl.program_id(axis=0)
  pid_y = tl.program_id(axis=1)
  rows_offsets = pid_x * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
  rows_mask = rows_offsets < M
  cols_offsets = pid_y * BLOCK_N + tl.arange(0, BLOCK_N)
  cols_mask = cols_offsets < N
  block_mask = rows_mask & cols_mask
  out_off = rows_offsets * N + cols_offsets
  indices = tl.load(index.at[rows_offsets], mask=rows_mask, other=0)
  selected = tl.load(inp.at[indices, cols_offsets], mask=block_mask, other=0.0)
  tl.store(out.at[out_off], selected, mask=block_mask)
def t_isel(V, N, M, dt):
  t = rnd((V, N), 3, dt); idx = np.random.default_rng(4).integers(0, V, M).astype(np.int32)
  o = index_select_kernel(t, idx, BLOCK_M=4, BLOCK_N=128, **_MODE)
  np.testing.assert_array_equal(np.asarray(o).reshape(M, N), t[idx])
  _export(index_select_kernel, t, idx, BLOCK_M=4, BLOCK_N=128)
CASES["isel_f32"] = lambda: t_isel(100, 200, 7, np.float32)
CASES["isel_bf16_4096"] = lambda: t_isel(1000, 4096, 9, BF16)

# ---- FlagGems gather dim=1 with strides
@mg.mgpu_kernel(out_shape=lambda inp, index, *, BLOCK: S(index.shape, inp.dtype), grid=lambda inp, index, *, BLOCK: (index.shape[0],))
def gather_dim1(inp, index, out, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  n = index.shape[1]
  for off in range(0, n, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    mask = cols < n
    idx = tl.load(index.at[pid, cols], mask=mask, other=0)
    v = tl.load(inp.at[pid, idx], mask=mask, other=0)
    tl.store(out.at[pid, cols], v, mask=mask)
def t_gather(M, N, K, dt):
  x = rnd((M, N), 5, dt); idx = np.random.default_rng(6).integers(0, N, (M, K)).astype(np.int32)
  o = gather_dim1(x, idx, BLOCK=256, **_MODE)
  np.testing.assert_array_equal(np.asarray(o), np.take_along_axis(x, idx, 1))
  _export(gather_dim1, x, idx, BLOCK=256)
CASES["gather_f32"] = lambda: t_gather(5, 1000, 300, np.float32)
CASES["gather_f16"] = lambda: t_gather(3, 129, 1025, np.float16)

# ---- scatter_add dim=1 (atomic)
@mg.mgpu_kernel(out_shape=lambda base, index, src, *, BLOCK: base, grid=lambda base, *a, **k: (base.shape[0],), input_output_aliases={0: 0})
def scatter_add_dim1(base, index, src, out, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  n = index.shape[1]
  for off in range(0, n, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    mask = cols < n
    idx = tl.load(index.at[pid, cols], mask=mask, other=0)
    v = tl.load(src.at[pid, cols], mask=mask, other=0)
    tl.atomic_add(out.at[pid, idx], v, mask=mask, sem="relaxed")
def t_scat(M, N, K):
  b = rnd((M, N), 7); idx = np.random.default_rng(8).integers(0, N, (M, K)).astype(np.int32); s = rnd((M, K), 9)
  o = scatter_add_dim1(b, idx, s, BLOCK=128, **_MODE)
  want = b.copy(); np.add.at(want, (np.arange(M)[:, None].repeat(K, 1), idx), s)
  close(o, want, 1e-5)
  _export(scatter_add_dim1, b, idx, s, BLOCK=128)
CASES["scatter_add"] = lambda: t_scat(4, 500, 300)

# ================================================================ (b5)

# ---- cumsum along rows in blocks with a running carry (FlagGems-style scan)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: S(x.shape, F32), grid=lambda x, **k: (x.shape[0],))
def cumsum_rows(x_ptr, y_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  N = x_ptr.shape[1]
  acc = tl.zeros((), tl.float32) if False else 0.0
  for off in range(0, N, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr.at[pid, cols], mask=mask, other=0).to(tl.float32)
    c = tl.cumsum(x, axis=0) + acc
    tl.store(y_ptr.at[pid, cols], c, mask=mask)
    acc += tl.sum(x, axis=0)
def t_cs(M, N, dt):
  x = rnd((M, N), 2, dt)
  y = cumsum_rows(x, BLOCK=512, **_MODE)
  close(y, np.cumsum(x.astype(np.float64), 1), 1e-3)
  _export(cumsum_rows, x, BLOCK=512)
CASES["cumsum_f32"] = lambda: t_cs(3, 5000, np.float32)
CASES["cumsum_bf16"] = lambda: t_cs(5, 777, BF16)

# ---- cumprod via associative scan, whole row
def _mul(a, b):
  return a * b
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: x, grid=lambda x, **k: (x.shape[0],))
def cumprod_row(x_ptr, y_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  mask = cols < x_ptr.shape[1]
  x = tl.load(x_ptr.at[pid, cols], mask=mask, other=1.0)
  y = tl.associative_scan(x, 0, _mul)
  tl.store(y_ptr.at[pid, cols], y, mask=mask)
def t_cp():
  x = (1 + 0.01 * rnd((4, 300), 3)).astype(np.float32)
  close(cumprod_row(x, BLOCK=512, **_MODE), np.cumprod(x, 1), 1e-4); _export(cumprod_row, x, BLOCK=512)
CASES["cumprod"] = t_cp

# ---- var_mean Welford per row over chunks
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK_N, correction: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x, **k: (x.shape[0],))
def var_mean_welford(X, Var, Mean, *, BLOCK_N: tl.constexpr, correction: tl.constexpr):
  row = tl.program_id(0)
  N = X.shape[1]
  _mean = tl.zeros([BLOCK_N], dtype=tl.float32)
  _acc = tl.zeros([BLOCK_N], dtype=tl.float32)
  _count = tl.zeros([BLOCK_N], dtype=tl.int32)
  for off in range(0, N, BLOCK_N):
    cols = off + tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X.at[row, cols], mask=mask, other=0.0).to(tl.float32)
    count = _count + mask
    cnt = tl.maximum(count, 1)
    cur_mean = (_mean * _count + x) / cnt
    _acc += (x - cur_mean) * (x - _mean) * mask
    _mean = cur_mean
    _count = count
  def welford_func(mean_x, count_x, M_x, mean_y, count_y, M_y):
    count = count_x + count_y
    _count = tl.maximum(count, 1)
    mc_x = mean_x * count_x
    mc_y = mean_y * count_y
    mean = (mc_x + mc_y) / _count
    M = M_x + mc_x * mean_x + M_y + mc_y * mean_y - count * mean * mean
    return mean, count, M
  mean, count, acc = tl.reduce((_mean, _count, _acc), axis=0, combine_fn=welford_func)
  var = acc / (N - correction)
  tl.store(Mean.at[row], mean)
  tl.store(Var.at[row], var)
def t_vm(M, N, dt):
  x = (rnd((M, N), 4, dt) * 2 + 3).astype(dt)
  v, m = var_mean_welford(x, BLOCK_N=1024, correction=1, **_MODE)
  xf = x.astype(np.float64)
  close(m, xf.mean(1), 1e-4); close(v, xf.var(1, ddof=1), 1e-3)
  _export(var_mean_welford, x, BLOCK_N=1024, correction=1)
CASES["var_mean_f32"] = lambda: t_vm(3, 4096, np.float32)
CASES["var_mean_bf16_odd"] = lambda: t_vm(5, 2500, BF16)

# ---- dropout with tl.rand (philox), scale
@mg.mgpu_kernel(out_shape=lambda x, seed, *, p, BLOCK: x, grid=lambda x, seed, *, p, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def dropout_k(X, seed: tl.scalar, Y, *, p: tl.constexpr, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offsets = pid * BLOCK + tl.arange(0, BLOCK)
  mask = offsets < X.shape[0]
  x = tl.load(X.at[offsets], mask=mask, other=0.0)
  r = tl.rand(seed, offsets)
  keep = r > p
  y = tl.where(keep, x / (1 - p), 0.0)
  tl.store(Y.at[offsets], y, mask=mask)
def t_do():
  x = rnd((10007,), 5) + 10
  y = np.asarray(dropout_k(x, 123, p=0.3, BLOCK=1024, **_MODE))
  kept = y != 0
  assert 0.6 < kept.mean() < 0.8, kept.mean()
  close(y[kept], x[kept] / 0.7, 1e-5)
  _export(dropout_k, x, np.int32(123), p=0.3, BLOCK=1024)
CASES["dropout"] = t_do

# ---- nll_loss with weights and ignore_index, mean reduction via atomics
@mg.mgpu_kernel(out_shape=lambda x, t, w, *, ignore_index, BLOCK: (S((1,), F32), S((1,), F32)), grid=lambda x, *a, **k: (tl.cdiv(x.shape[0], k["BLOCK"]),))
def nll_loss_k(inp, tgt, w, out, total_w, *, ignore_index: tl.constexpr, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  N = inp.shape[0]
  offs = pid * BLOCK + tl.arange(0, BLOCK)
  mask_n = offs < N
  t = tl.load(tgt.at[offs], mask=mask_n, other=0)
  valid = mask_n & (t != ignore_index)
  t_safe = tl.where(valid, t, 0)
  ww = tl.load(w.at[t_safe], mask=valid, other=0).to(tl.float32)
  x = tl.load(inp.at[offs, t_safe], mask=valid, other=0).to(tl.float32)
  tl.atomic_add(out.at[0], tl.sum(-x * ww, axis=0))
  tl.atomic_add(total_w.at[0], tl.sum(ww, axis=0))
def t_nll(N, C):
  x = rnd((N, C), 6); t = np.random.default_rng(7).integers(0, C, N).astype(np.int32); t[::5] = -100; w = np.abs(rnd((C,), 8))
  o, tw = nll_loss_k(x, t, w, ignore_index=-100, BLOCK=128, **_MODE)
  v = t != -100
  close(tw, [w[t[v]].sum()], 1e-4); close(o, [-(x[v, t[v]] * w[t[v]]).sum()], 1e-4)
  _export(nll_loss_k, x, t, w, ignore_index=-100, BLOCK=128)
CASES["nll_loss"] = lambda: t_nll(300, 1000)
