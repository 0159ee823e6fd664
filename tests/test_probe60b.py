"""Probe 60b: kernels of the open-source Triton op libraries (FlagGems' ATen ops, Liger-Kernel's fused losses and
norms, Unsloth's rope, cross-entropy and GLUs) written the way their authors write them, ported with `from mgpu_dsl
import language as tl` (refs indexed where Triton adds offsets to pointers, `x_ptr.at[row, cols]`), each against a
NumPy / jnp reference in interpret mode and exported for CUDA, at realistic and odd shapes (vocabularies of 32000,
50257 and 128256 columns in chunks, hidden 4096 and 11008, odd row counts, bfloat16 / float16 / float32).

Fixed classes (each was refused though the authors write it):
(1) Math functions of Python numbers: Unsloth's `tl.math.erf(tl.math.rsqrt(2.0) * x)`, a GELU's
    `tl.sqrt(2.0 / math.pi)`, `tl.exp(float("-inf"))`, `ml.atan2(1.0, 2.0)` were MG003 "should be computed in Python";
    they are float32 numbers computed while tracing, as Triton's scalar tensor and jnp's weak float32 compute them
    (frontend/ops/number_math.py).
(2) A helper of static arguments whose body calls the language (FlagGems' `tle.program_id(0)`, a module of
    `def program_id(axis): return tl.program_id(axis).to(tl.int64)`; a lambda, a namespace's function, a static
    method) ran as Python and failed at its own line with MG003 "can only be used inside an @mgpu_kernel function";
    it is traced as an inline helper (frontend/calls.py static_call).
(3) `tl.range(..., num_stages=s)` over register loads whose body calls a module-level alias of a library function
    (Liger's `from triton.language.extra.libdevice import tanh`) or a plain helper was taken for a loop that might
    make TMA loads: MG502 "found no TMA load to pipeline"; such names are seen through (frontend/loop_bounds.py).

The refusals kept (right, with what to write): a store into an input (MG303, alias an output), Triton's pointer
arithmetic (MG003, index the ref), `num_warps=` at the call (MG006, block=), a bfloat16 tile times a float32 0-d
input (MG104: jnp's result depends on what the call passes), an int32 `tl.scalar` stride times an int64 program id
(MG104), a sum over lanes a load filled with -inf (MG953, interpret mode)."""
import math
import types

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe_util import export, rnd

S = jax.ShapeDtypeStruct
BF16 = ml_dtypes.bfloat16
F32 = jnp.float32
_MODE = {"interpret": True}           # the GPU twin empties it: the same checks on the device
CASES = {}
tanh = tl.extra.cuda.libdevice.tanh   # Liger's `from triton.language.extra.libdevice import tanh`
rsqrt = tl.extra.cuda.libdevice.rsqrt
libdevice = tl.extra.cuda.libdevice
tle = types.SimpleNamespace(program_id=lambda axis: tl.program_id(axis).to(tl.int64))   # FlagGems' tle module


def _export(kernel, *args, **kw):
  if _MODE:
    export(kernel, *args, **kw)


def close(a, b, tol=1e-5):
  np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=tol, atol=tol)


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

# ================================================================ (b11)

def _gelu_tanh(x):
  sqrt_2_over_pi = 0.7978845608028654
  x_cubed = x * x * x
  tanh_arg = sqrt_2_over_pi * (x + 0.044715 * x_cubed)
  return 0.5 * x * (1 + tanh(tanh_arg))

# ---- Liger geglu forward+backward with a module-level libdevice alias and helper
@mg.mgpu_kernel(out_shape=lambda dc, a, b, *, BLOCK_SIZE: (a, b, a), grid=lambda dc, *x, **k: (dc.shape[0],))
def geglu_bwd(dc_ptr, a_ptr, b_ptr, da_ptr, db_ptr, c_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = a_ptr.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  dc_row = tl.load(dc_ptr.at[program_id, col_offsets], mask=mask, other=0)
  a_row = tl.load(a_ptr.at[program_id, col_offsets], mask=mask, other=0).to(tl.float32)
  b_row = tl.load(b_ptr.at[program_id, col_offsets], mask=mask, other=0)
  sqrt_2_over_pi = tl.sqrt(2.0 / math.pi)
  a_cubed = a_row * a_row * a_row
  tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
  tanh_result = tanh(tanh_arg)
  geglu_a = 0.5 * a_row * (1 + tanh_result)
  db_row = dc_row * geglu_a
  term1 = 0.5 * (1 + tanh_result)
  tanh_sq = tanh_result * tanh_result
  term2 = 0.5 * a_row * (1 - tanh_sq) * (sqrt_2_over_pi * (1 + 3 * 0.044715 * a_row * a_row))
  da_row = dc_row * b_row * (term1 + term2)
  tl.store(da_ptr.at[program_id, col_offsets], da_row, mask=mask)
  tl.store(db_ptr.at[program_id, col_offsets], db_row, mask=mask)
  tl.store(c_ptr.at[program_id, col_offsets], _gelu_tanh(a_row).to(b_row.dtype) * b_row, mask=mask)
def t_gg(n, d, dt):
  dc, a, b = rnd((n, d), 1, dt), rnd((n, d), 2, dt), rnd((n, d), 3, dt)
  da, db, c = geglu_bwd(dc, a, b, BLOCK_SIZE=1 << (d - 1).bit_length(), **_MODE)
  af = jnp.asarray(a, jnp.float32); g, vjp = jax.vjp(lambda t: jax.nn.gelu(t, approximate=True), af)
  dcf, bf = dc.astype(np.float32), b.astype(np.float32)
  tol = 3e-2 if dt != np.float32 else 1e-5
  close(db, dcf * np.asarray(g), tol); close(da, np.asarray(vjp(jnp.asarray(dcf * bf))[0]), tol)
  close(c, np.asarray(g).astype(dt).astype(np.float32) * bf, tol)
  _export(geglu_bwd, dc, a, b, BLOCK_SIZE=1 << (d - 1).bit_length())
CASES["geglu_bwd_f32"] = lambda: t_gg(3, 1000, np.float32)
CASES["geglu_bwd_bf16"] = lambda: t_gg(2, 11008, BF16)

# ---- nonzero via a prefix sum of the mask and a data-dependent scatter (single program)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), jnp.int32), S((1,), jnp.int32)), grid=(1,))
def nonzero_k(x_ptr, idx_ptr, cnt_ptr, *, BLOCK: tl.constexpr):
  N = x_ptr.shape[0]
  base = 0
  for off in range(0, N, BLOCK):
    offs = off + tl.arange(0, BLOCK)
    inb = offs < N
    v = tl.load(x_ptr.at[offs], mask=inb, other=0)
    nz = (v != 0) & inb
    pos = tl.cumsum(nz.to(tl.int32), axis=0) - 1 + base
    tl.store(idx_ptr.at[pos], offs, mask=nz)
    tl.store(idx_ptr.at[offs], -1, mask=inb & False) if False else None
    base += tl.sum(nz.to(tl.int32), axis=0)
  tl.store(cnt_ptr.at[0], base)
  for off in range(0, N, BLOCK):
    offs = off + tl.arange(0, BLOCK)
    tl.store(idx_ptr.at[offs], -1, mask=(offs >= base) & (offs < N))
def t_nz(N):
  x = (np.random.default_rng(1).random(N) > 0.6).astype(np.float32) * rnd((N,), 2)
  idx, cnt = nonzero_k(x, BLOCK=1024, **_MODE)
  want = np.nonzero(x)[0]
  assert int(np.asarray(cnt)[0]) == len(want)
  np.testing.assert_array_equal(np.asarray(idx)[:len(want)], want)
  assert (np.asarray(idx)[len(want):] == -1).all()
  _export(nonzero_k, x, BLOCK=1024)
CASES["nonzero"] = lambda: t_nz(5000)

# ---- unique_consecutive of a sorted vector: shifted loads, flags, cumsum, scatter
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, S((1,), jnp.int32)), grid=(1,))
def unique_sorted(x_ptr, out_ptr, n_ptr, *, BLOCK: tl.constexpr):
  N = x_ptr.shape[0]
  offs = tl.arange(0, BLOCK)
  mask = offs < N
  cur = tl.load(x_ptr.at[offs], mask=mask, other=0)
  prev = tl.load(x_ptr.at[offs - 1], mask=mask & (offs > 0), other=0)
  flag = ((cur != prev) | (offs == 0)) & mask
  pos = tl.cumsum(flag.to(tl.int32), 0) - 1
  tl.store(out_ptr.at[pos], cur, mask=flag)
  n = tl.sum(flag.to(tl.int32), 0)
  tl.store(out_ptr.at[offs], tl.zeros_like(cur), mask=(offs >= n) & mask)
  tl.store(n_ptr.at[0], n)
def t_uq(N):
  x = np.sort(np.random.default_rng(3).integers(0, N // 3, N)).astype(np.int32)
  o, n = unique_sorted(x, BLOCK=1 << (N - 1).bit_length(), **_MODE)
  u = np.unique(x); assert int(np.asarray(n)[0]) == len(u)
  np.testing.assert_array_equal(np.asarray(o)[:len(u)], u)
  _export(unique_sorted, x, BLOCK=1 << (N - 1).bit_length())
CASES["unique_sorted"] = lambda: t_uq(1000)

# ---- tl.range with num_stages, while loop over a data-dependent count, rsqrt alias of a Python number
@mg.mgpu_kernel(out_shape=lambda x, n, *, BLOCK: x, grid=lambda x, n, **k: (x.shape[0],))
def ranges(x_ptr, n_ptr, y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  for off in tl.range(0, N, BLOCK, num_stages=3):
    cols = off + tl.arange(0, BLOCK)
    v = tl.load(x_ptr.at[row, cols], mask=cols < N, other=0.0)
    tl.store(y_ptr.at[row, cols], v * rsqrt(4.0), mask=cols < N)
def t_rg():
  x = rnd((3, 1000), 6); n = np.array([3], np.int32)
  close(ranges(x, n, BLOCK=256, **_MODE), x * 0.5); _export(ranges, x, n, BLOCK=256)
CASES["ranges_rsqrt_number"] = t_rg

# ================================================================ (b14)

# ---- FlagGems column reduction (dim 0, keepdim): program per column block, loop over rows
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK_M, BLOCK_N: (S((1, x.shape[1]), F32), S((1, x.shape[1]), jnp.int32)), grid=lambda x, *, BLOCK_M, BLOCK_N: (tl.cdiv(x.shape[1], BLOCK_N),))
def col_reduce(inp, out, cnt_out, *, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
  M, N = inp.shape
  cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
  acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
  cnt = tl.zeros([BLOCK_N], tl.int32)
  for m0 in range(0, M, BLOCK_M):
    rows = m0 + tl.arange(0, BLOCK_M)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    v = tl.load(inp.at[rows[:, None], cols[None, :]], mask=mask, other=0.0).to(tl.float32)
    acc += v * v
    cnt += tl.sum(v != 0, axis=0)
  tl.store(out.at[0, cols], tl.sqrt(tl.sum(acc, axis=0)), mask=cols < N)
  tl.store(cnt_out.at[0, cols], cnt, mask=cols < N)
def t_cr(M, N, dt):
  x = rnd((M, N), 1, dt); x[x.astype(np.float32) < -1] = 0
  o, c = col_reduce(x, BLOCK_M=16, BLOCK_N=64, **_MODE)
  close(o, np.sqrt((x.astype(np.float64) ** 2).sum(0, keepdims=True)), 1e-4)
  np.testing.assert_array_equal(np.asarray(c), (x != 0).sum(0, keepdims=True))
  _export(col_reduce, x, BLOCK_M=16, BLOCK_N=64)
CASES["col_reduce_f32"] = lambda: t_cr(1000, 300, np.float32)
CASES["col_reduce_bf16"] = lambda: t_cr(33, 4096, BF16)

# ---- FlagGems two-stage mean: partials to a mid buffer, then a second kernel over mid_size
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: S((tl.cdiv(x.shape[0], BLOCK),), F32), grid=lambda x, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def mean_stage1(inp, mid, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offset = pid * BLOCK + tl.arange(0, BLOCK)
  x = tl.load(inp.at[offset], mask=offset < inp.shape[0], other=0.0).to(tl.float32)
  tl.store(mid.at[pid], tl.sum(x))
@mg.mgpu_kernel(out_shape=lambda mid, *, N, BLOCK_MID: S((), F32), grid=(1,))
def mean_stage2(mid, out, *, N: tl.constexpr, BLOCK_MID: tl.constexpr):
  offset = tl.arange(0, BLOCK_MID)
  v = tl.load(mid.at[offset], mask=offset < mid.shape[0], other=0.0)
  tl.store(out, tl.sum(v) / N)
def t_mean(N, dt):
  x = rnd((N,), 2, dt)
  mid = mean_stage1(x, BLOCK=1024, **_MODE)
  ms = mid.shape[0]
  o = mean_stage2(mid, N=N, BLOCK_MID=1 << (ms - 1).bit_length(), **_MODE)
  close(o, x.astype(np.float64).mean(), 1e-5)
  _export(mean_stage1, x, BLOCK=1024); _export(mean_stage2, np.asarray(mid), N=N, BLOCK_MID=1 << (ms - 1).bit_length())
CASES["mean_two_stage"] = lambda: t_mean(100003, np.float32)
CASES["mean_two_stage_bf16"] = lambda: t_mean(4099, BF16)

# ---- FlagGems triu / tril with a diagonal, all/any reductions of booleans, prod via tl.reduce
def _prod(a, b):
  return a * b
@mg.mgpu_kernel(out_shape=lambda x, *, diagonal, BLOCK_N: (x, S((x.shape[0],), jnp.bool_), S((x.shape[0],), jnp.bool_), S((x.shape[0],), F32)),
                grid=lambda x, **k: (x.shape[0],))
def triu_any_all_prod(x_ptr, o_ptr, any_ptr, all_ptr, prod_ptr, *, diagonal: tl.constexpr, BLOCK_N: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  cols = tl.arange(0, BLOCK_N)
  mask = cols < N
  x = tl.load(x_ptr.at[row, cols], mask=mask, other=0.0)
  tl.store(o_ptr.at[row, cols], tl.where(cols >= row + diagonal, x, 0.0), mask=mask)
  nz = (x != 0) & mask
  tl.store(any_ptr.at[row], tl.max(nz.to(tl.int32), axis=0) > 0)
  tl.store(all_ptr.at[row], tl.min(tl.where(mask, nz, True).to(tl.int1), axis=0))
  p = tl.load(x_ptr.at[row, cols], mask=mask, other=1.0)
  tl.store(prod_ptr.at[row], tl.reduce(p, 0, _prod))
def t_triu(M, N):
  x = (1 + 0.05 * rnd((M, N), 3)).astype(np.float32); x[1] = 0; x[2, 5] = 0
  o, a, al, p = triu_any_all_prod(x, diagonal=1, BLOCK_N=1 << (N - 1).bit_length(), **_MODE)
  np.testing.assert_array_equal(np.asarray(o), np.triu(x, 1))
  np.testing.assert_array_equal(np.asarray(a), (x != 0).any(1)); np.testing.assert_array_equal(np.asarray(al), (x != 0).all(1))
  close(p, np.prod(x.astype(np.float64), 1), 1e-4)
  _export(triu_any_all_prod, x, diagonal=1, BLOCK_N=1 << (N - 1).bit_length())
CASES["triu_any_all_prod"] = lambda: t_triu(6, 100)

# ---- vector norms: inf, -inf, 0, 2 of rows chunked; NaN checks with x != x
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: S((x.shape[0], 4), F32), grid=lambda x, **k: (x.shape[0],))
def norms(x_ptr, o_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  mx = tl.full([BLOCK], float("-inf"), tl.float32)
  mn = tl.full([BLOCK], float("inf"), tl.float32)
  nz = tl.zeros([BLOCK], tl.float32)
  sq = tl.zeros([BLOCK], tl.float32)
  has_nan = tl.zeros([BLOCK], tl.int32)
  for off in range(0, N, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    m = cols < N
    v = tl.load(x_ptr.at[row, cols], mask=m, other=0.0).to(tl.float32)
    a = tl.abs(v)
    mx = tl.maximum(mx, tl.where(m, a, float("-inf")))
    mn = tl.minimum(mn, tl.where(m, a, float("inf")))
    nz += (v != 0).to(tl.float32)
    sq += v * v
    has_nan |= (v != v).to(tl.int32)
  l2 = tl.sqrt(tl.sum(sq))
  l2 = tl.where(tl.max(has_nan) > 0, float("nan"), l2)
  tl.store(o_ptr.at[row, 0], tl.max(mx))
  tl.store(o_ptr.at[row, 1], tl.min(mn))
  tl.store(o_ptr.at[row, 2], tl.sum(nz))
  tl.store(o_ptr.at[row, 3], l2)
def t_norms(M, N, dt):
  x = rnd((M, N), 4, dt); x[0, 3] = 0; x[1, 7] = np.nan
  o = np.asarray(norms(x, BLOCK=512, **_MODE))
  xf = np.abs(x.astype(np.float64))
  close(o[:, 0], np.max(xf, 1), 1e-6); close(o[:, 2], (x != 0).sum(1), 0)
  close(o[[0] + list(range(2, M)), 3], np.sqrt((xf ** 2).sum(1))[[0] + list(range(2, M))], 1e-4)
  assert np.isnan(o[1, 3])
  _export(norms, x, BLOCK=512)
CASES["norms_f32"] = lambda: t_norms(4, 3000, np.float32)
CASES["norms_f16"] = lambda: t_norms(3, 700, np.float16)


# ================================================================ (b15)

# ---- FlagGems softmax inner: TILE_M rows per program, masked rows all -inf (NaN rows never stored)
@mg.mgpu_kernel(out_shape=lambda x, *, TILE_M, TILE_N: x, grid=lambda x, *, TILE_M, TILE_N: (tl.cdiv(x.shape[0], TILE_M),))
def softmax_inner(input_ptr, output_ptr, *, TILE_M: tl.constexpr, TILE_N: tl.constexpr):
  M, N = input_ptr.shape
  pid_m = tl.program_id(0)
  m_offsets = pid_m * TILE_M + tl.arange(0, TILE_M)
  n_offsets = tl.arange(0, TILE_N)
  mask = (m_offsets[:, None] < M) & (n_offsets[None, :] < N)
  inp = tl.load(input_ptr.at[m_offsets[:, None], n_offsets[None, :]], mask=mask, other=-float("inf")).to(tl.float32)
  m = tl.max(inp, 1)
  e = tl.exp(inp - m[:, None])
  z = tl.sum(e, 1)
  out = e / z[:, None]
  tl.store(output_ptr.at[m_offsets[:, None], n_offsets[None, :]], out, mask=mask)
def t_si(M, N, dt, TM):
  x = rnd((M, N), 1, dt)
  o = softmax_inner(x, TILE_M=TM, TILE_N=1 << (N - 1).bit_length(), **_MODE)
  xf = x.astype(np.float64); e = np.exp(xf - xf.max(1, keepdims=True))
  close(o, e / e.sum(1, keepdims=True), 1e-2 if dt != np.float32 else 1e-5)
  _export(softmax_inner, x, TILE_M=TM, TILE_N=1 << (N - 1).bit_length())
CASES["softmax_inner_f32"] = lambda: t_si(13, 1000, np.float32, 4)
CASES["softmax_inner_bf16"] = lambda: t_si(5, 128, BF16, 8)

# ---- a guard return at the top, ignore_index as a run-time scalar, n_cols a run-time scalar loop bound
@mg.mgpu_kernel(out_shape=lambda x, y, n_rows, ii, *, BLOCK: S((x.shape[0],), F32), grid=lambda x, *a, **k: (x.shape[0] + 3,))
def guarded(x_ptr, y_ptr, n_rows: tl.scalar, ignore_index: tl.scalar, out_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  if pid >= n_rows:
    return
  n_cols = x_ptr.shape[1]
  y = tl.load(y_ptr.at[pid])
  if y == ignore_index:
    tl.store(out_ptr.at[pid], 0.0)
    return
  acc = tl.zeros([BLOCK], tl.float32)
  for off in range(0, n_cols, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    acc += tl.load(x_ptr.at[pid, cols], mask=cols < n_cols, other=0.0)
  tl.store(out_ptr.at[pid], tl.sum(acc, axis=0) - tl.load(x_ptr.at[pid, y]))
def t_g():
  x = rnd((6, 1000), 2); y = np.array([1, -100, 3, 999, 0, 5], np.int32)
  o = guarded(x, y, 6, -100, BLOCK=256, **_MODE)
  w = x.sum(1) - x[np.arange(6), np.maximum(y, 0)]; w[1] = 0
  close(o, w, 1e-4); _export(guarded, x, y, np.int32(6), np.int32(-100), BLOCK=256)
CASES["guarded"] = t_g

# ---- bf16 atomic add (embedding grad in bf16), 2-D cumsum along rows with reverse
@mg.mgpu_kernel(out_shape=lambda ids, g, w0, *, BLOCK: w0, grid=lambda ids, *a, **k: (ids.shape[0],), input_output_aliases={2: 0})
def bf16_atomic(ids, g, w0, w, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  m = cols < g.shape[1]
  t = tl.load(ids.at[pid])
  tl.atomic_add(w.at[t, cols], tl.load(g.at[pid, cols], mask=m, other=0.0), mask=m)
def t_ba():
  ids = np.array([0, 2, 0, 1, 2, 2], np.int32); g = rnd((6, 300), 3, BF16); w0 = np.zeros((3, 300), BF16)
  o = bf16_atomic(ids, g, w0, BLOCK=512, **_MODE)
  want = np.zeros((3, 300), np.float32); np.add.at(want, ids, g.astype(np.float32))
  close(o, want, 3e-2); _export(bf16_atomic, ids, g, w0, BLOCK=512)
CASES["bf16_atomic"] = t_ba

@mg.mgpu_kernel(out_shape=lambda x, *, BM, BN: (x, x), grid=lambda x, *, BM, BN: (tl.cdiv(x.shape[0], BM),))
def cumsum2d(x_ptr, o_ptr, r_ptr, *, BM: tl.constexpr, BN: tl.constexpr):
  rows = tl.program_id(0) * BM + tl.arange(0, BM)
  cols = tl.arange(0, BN)
  mask = (rows[:, None] < x_ptr.shape[0]) & (cols[None, :] < x_ptr.shape[1])
  x = tl.load(x_ptr.at[rows[:, None], cols[None, :]], mask=mask, other=0.0)
  tl.store(o_ptr.at[rows[:, None], cols[None, :]], tl.cumsum(x, axis=1), mask=mask)
  tl.store(r_ptr.at[rows[:, None], cols[None, :]], tl.cumsum(x, axis=1, reverse=True), mask=mask)
def t_c2():
  x = rnd((10, 100), 4)
  o, r = cumsum2d(x, BM=4, BN=128, **_MODE)
  close(o, np.cumsum(x, 1), 1e-5); close(r, np.cumsum(x[:, ::-1], 1)[:, ::-1], 1e-5); _export(cumsum2d, x, BM=4, BN=128)
CASES["cumsum2d"] = t_c2

# ---- Liger qwen2vl mrope style: sections picked by tl.where over column ranges
@mg.mgpu_kernel(out_shape=lambda q, cos, sin, *, sec_t, sec_h, pad_hd: q, grid=lambda q, *a, **k: (q.shape[0],))
def mrope(q_ptr, cos, sin, o_ptr, *, sec_t: tl.constexpr, sec_h: tl.constexpr, pad_hd: tl.constexpr):
  pid = tl.program_id(0)
  n_h, hd = q_ptr.shape[1], q_ptr.shape[2]
  d = tl.arange(0, pad_hd // 2)
  dm = d < hd // 2
  t_cos = tl.load(cos.at[0, pid, d], mask=dm, other=0)
  h_cos = tl.load(cos.at[1, pid, d], mask=dm, other=0)
  w_cos = tl.load(cos.at[2, pid, d], mask=dm, other=0)
  t_sin = tl.load(sin.at[0, pid, d], mask=dm, other=0)
  h_sin = tl.load(sin.at[1, pid, d], mask=dm, other=0)
  w_sin = tl.load(sin.at[2, pid, d], mask=dm, other=0)
  t_mask = d < sec_t
  h_mask = (sec_t <= d) & (d < sec_t + sec_h)
  c = tl.where(t_mask, t_cos, tl.where(h_mask, h_cos, w_cos))
  s = tl.where(t_mask, t_sin, tl.where(h_mask, h_sin, w_sin))
  hh = tl.arange(0, 16)[:, None]
  m2 = (hh < n_h) & dm[None, :]
  q1 = tl.load(q_ptr.at[pid, hh, d[None, :]], mask=m2, other=0)
  q2 = tl.load(q_ptr.at[pid, hh, d[None, :] + hd // 2], mask=m2, other=0)
  tl.store(o_ptr.at[pid, hh, d[None, :]], q1 * c - q2 * s, mask=m2)
  tl.store(o_ptr.at[pid, hh, d[None, :] + hd // 2], q2 * c + q1 * s, mask=m2)
def t_mr():
  T, H, D = 5, 12, 128
  q = rnd((T, H, D), 5); cos = rnd((3, T, D // 2), 6); sin = rnd((3, T, D // 2), 7)
  o = mrope(q, cos, sin, sec_t=16, sec_h=24, pad_hd=128, **_MODE)
  d = np.arange(D // 2); sel = np.where(d < 16, 0, np.where(d < 40, 1, 2))
  c = cos[sel, :, d].T[:, None]; s = sin[sel, :, d].T[:, None]
  q1, q2 = q[..., :D // 2], q[..., D // 2:]
  close(o, np.concatenate([q1 * c - q2 * s, q2 * c + q1 * s], -1), 1e-5)
  _export(mrope, q, cos, sin, sec_t=16, sec_h=24, pad_hd=128)
CASES["mrope"] = t_mr

# ================================================================ (b16)
tle = types.SimpleNamespace(program_id=lambda axis: tl.program_id(axis).to(tl.int64))

@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, x, x, x, x, x), grid=lambda x, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def libfuncs(x_ptr, a, b, c, d, e, f, *, BLOCK: tl.constexpr):
  pid = tle.program_id(0)
  offs = pid * BLOCK + tl.arange(0, BLOCK)
  m = offs < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offs], mask=m, other=0.0)
  tl.store(a.at[offs], tl.where(libdevice.isnan(x), 0.0, x), mask=m)
  tl.store(b.at[offs], libdevice.pow(tl.abs(x), 1.5), mask=m)
  tl.store(c.at[offs], libdevice.nearbyint(x * 3), mask=m)
  tl.store(d.at[offs], libdevice.trunc(x * 3), mask=m)
  tl.store(e.at[offs], tl.where(x > 0, x, 0.5 * (tl.exp(x) - 1)), mask=m)
  tl.store(f.at[offs], tl.math.fast_expf(x) + tl.math.floor(x), mask=m)
def t_lf():
  x = rnd((3000,), 1) * 2; x[5] = np.nan
  a, b, c, d, e, f = libfuncs(x, BLOCK=1024, **_MODE)
  xx = np.where(np.isnan(x), 0, x)
  close(a, xx); close(np.asarray(b)[np.arange(3000) != 5], (np.abs(x) ** 1.5)[np.arange(3000) != 5], 1e-5)
  close(c, np.rint(x * 3)); close(d, np.trunc(x * 3)); close(e, np.where(x > 0, x, 0.5 * np.expm1(x)), 1e-5)
  close(np.asarray(f)[np.arange(3000) != 5], (np.exp(x) + np.floor(x))[np.arange(3000) != 5], 1e-5)
  _export(libfuncs, x, BLOCK=1024)
CASES["libfuncs"] = t_lf

# ---- bernoulli with a tensor p, randint bits
@mg.mgpu_kernel(out_shape=lambda p, seed, *, BLOCK: (S(p.shape, jnp.bool_), S(p.shape, jnp.uint32)), grid=lambda p, seed, *, BLOCK: (tl.cdiv(p.shape[0], BLOCK),))
def bernoulli(p_ptr, seed: tl.scalar, out_ptr, bits_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < p_ptr.shape[0]
  p = tl.load(p_ptr.at[offs], mask=m, other=0.0)
  r = tl.rand(seed, offs)
  tl.store(out_ptr.at[offs], r < p, mask=m)
  tl.store(bits_ptr.at[offs], tl.randint(seed, offs), mask=m)
def t_be():
  p = np.linspace(0, 1, 20000).astype(np.float32)
  o, bits = bernoulli(p, 7, BLOCK=1024, **_MODE)
  o = np.asarray(o)
  assert abs(o[:10000].mean() - 0.25) < 0.03 and abs(o[10000:].mean() - 0.75) < 0.03
  assert np.asarray(bits).std() > 1e8
  _export(bernoulli, p, np.int32(7), BLOCK=1024)
CASES["bernoulli"] = t_be

# ---- gelu with a string constexpr approximate, tl.trans / tl.reshape of a tile
@mg.mgpu_kernel(out_shape=lambda x, *, approximate, BM, BN: S((x.shape[1], x.shape[0]), x.dtype), grid=(1,))
def gelu_t(x_ptr, o_ptr, *, approximate: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
  r = tl.arange(0, BM)
  c = tl.arange(0, BN)
  x = tl.load(x_ptr.at[r[:, None], c[None, :]]).to(tl.float32)
  if approximate == "tanh":
    y = 0.5 * x * (1 + libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
  else:
    y = 0.5 * x * (1 + libdevice.erf(x * 0.7071067811865476))
  tl.store(o_ptr.at[c[:, None], r[None, :]], tl.trans(y).to(o_ptr.dtype.element_ty))
def t_gt(appr):
  x = rnd((64, 128), 2)
  o = gelu_t(x, approximate=appr, BM=64, BN=128, **_MODE)
  close(o, np.asarray(jax.nn.gelu(x, approximate=appr == "tanh")).T, 1e-5); _export(gelu_t, x, approximate=appr, BM=64, BN=128)
CASES["gelu_t_none"] = lambda: t_gt("none")
CASES["gelu_t_tanh"] = lambda: t_gt("tanh")

# ---- 3-D block: (B, H, D) tile per program with a head mask
@mg.mgpu_kernel(out_shape=lambda x, *, BB, BH, BD: S((x.shape[0], x.shape[1]), F32), grid=lambda x, *, BB, **k: (tl.cdiv(x.shape[0], BB),))
def norms3d(x_ptr, o_ptr, *, BB: tl.constexpr, BH: tl.constexpr, BD: tl.constexpr):
  B, H, D = x_ptr.shape
  b = tl.program_id(0) * BB + tl.arange(0, BB)
  h = tl.arange(0, BH)
  d = tl.arange(0, BD)
  mask = (b[:, None, None] < B) & (h[None, :, None] < H) & (d[None, None, :] < D)
  x = tl.load(x_ptr.at[b[:, None, None], h[None, :, None], d[None, None, :]], mask=mask, other=0.0)
  n = tl.sqrt(tl.sum(x * x, axis=2))
  tl.store(o_ptr.at[b[:, None], h[None, :]], n, mask=(b[:, None] < B) & (h[None, :] < H))
def t_n3(B, H, D):
  x = rnd((B, H, D), 3)
  o = norms3d(x, BB=2, BH=1 << (H - 1).bit_length(), BD=1 << (D - 1).bit_length(), **_MODE)
  close(o, np.sqrt((x ** 2).sum(2)), 1e-5); _export(norms3d, x, BB=2, BH=1 << (H - 1).bit_length(), BD=1 << (D - 1).bit_length())
CASES["norms3d"] = lambda: t_n3(5, 8, 128)
CASES["norms3d_odd"] = lambda: t_n3(3, 6, 100)

# ================================================================ (b18)

def _stats(x, n, EPS: tl.constexpr = 1e-5):
  mean = tl.sum(x, axis=0) / n
  xc = x - mean
  return mean, tl.rsqrt(tl.sum(xc * xc, axis=0) / n + EPS)

# ---- helper with a constexpr default returning a tuple; Unsloth CE backward with a conditional scalar binding
@mg.mgpu_kernel(out_shape=lambda logits, labels, dloss, lse, *, BLOCK_SIZE: logits, grid=lambda l, *a, **k: (l.shape[0],))
def unsloth_ce_bwd(logits_ptr, labels_ptr, dloss_ptr, lse_ptr, dx_ptr, *, BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0)
  V = logits_ptr.shape[1]
  label_idx = tl.load(labels_ptr.at[row_idx]).to(tl.int32)
  if label_idx != -100:
    dloss = tl.load(dloss_ptr.at[row_idx])
  else:
    dloss = 0.0
  lse = tl.load(lse_ptr.at[row_idx])
  for off in range(0, V, BLOCK_SIZE):
    col_offsets = off + tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < V
    x = tl.load(logits_ptr.at[row_idx, col_offsets], mask=mask, other=-float("inf")).to(tl.float32)
    y = tl.exp(x - lse)
    y = tl.where(col_offsets == label_idx, y - 1.0, y)
    tl.store(dx_ptr.at[row_idx, col_offsets], dloss * y, mask=mask)
def t_ucb(n, V, dt):
  x = rnd((n, V), 1, dt); y = np.random.default_rng(2).integers(0, V, n).astype(np.int32); y[2] = -100
  xf = x.astype(np.float64); m = xf.max(1); lse = (m + np.log(np.exp(xf - m[:, None]).sum(1))).astype(np.float32); dl = rnd((n,), 3)
  g = unsloth_ce_bwd(x, y, dl, lse, BLOCK_SIZE=4096, **_MODE)
  p = np.exp(xf - lse[:, None]); p[np.arange(n), np.maximum(y, 0)] -= (y >= 0); w = p * np.where(y >= 0, dl, 0)[:, None]
  close(g, w, 2e-2 if dt != np.float32 else 1e-5); _export(unsloth_ce_bwd, x, y, dl, lse, BLOCK_SIZE=4096)
CASES["unsloth_ce_bwd_bf16"] = lambda: t_ucb(5, 32000, BF16)

@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x, **k: (x.shape[0],))
def stats_helper(x_ptr, m_ptr, r_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[row, cols], mask=cols < x_ptr.shape[1], other=0.0)
  mean, rstd = _stats(tl.where(cols < x_ptr.shape[1], x, 0.0), x_ptr.shape[1]) if False else (None, None)
  mean = tl.sum(x, axis=0) / x_ptr.shape[1]
  xc = tl.where(cols < x_ptr.shape[1], x - mean, 0.0)
  rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / x_ptr.shape[1] + 1e-5)
  tl.store(m_ptr.at[row], mean)
  tl.store(r_ptr.at[row], rstd)
def t_sh():
  x = rnd((3, 4096), 4)
  m, r = stats_helper(x, BLOCK=4096, **_MODE)
  close(m, x.mean(1), 1e-5); close(r, 1 / np.sqrt(x.var(1) + 1e-5), 1e-4)
  m2, r2 = stats_helper2(x, BLOCK=4096, **_MODE)
  close(m2, x.mean(1), 1e-5); close(r2, 1 / np.sqrt(x.var(1) + 1e-5), 1e-4)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x, **k: (x.shape[0],))
def stats_helper2(x_ptr, m_ptr, r_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[row, cols])
  mean, rstd = _stats(x, x_ptr.shape[1])
  tl.store(m_ptr.at[row], mean)
  tl.store(r_ptr.at[row], rstd)
CASES["stats_helper"] = t_sh

# ---- sort positional (dim, descending), argmin over axis 1, repeat_interleave, nearest upsample with float->int index
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, S((x.shape[0],), jnp.int32)), grid=(1,))
def sort_argmin(x_ptr, s_ptr, a_ptr, *, BLOCK: tl.constexpr):
  r = tl.arange(0, x_ptr.shape[0])
  c = tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[r[:, None], c[None, :]])
  tl.store(s_ptr.at[r[:, None], c[None, :]], tl.sort(x, 1, True))
  tl.store(a_ptr.at[r], tl.argmin(x, axis=1))
def t_sa():
  x = rnd((8, 256), 5)
  s, a = sort_argmin(x, BLOCK=256, **_MODE)
  np.testing.assert_array_equal(np.asarray(s), -np.sort(-x, 1)); np.testing.assert_array_equal(np.asarray(a), x.argmin(1))
  _export(sort_argmin, x, BLOCK=256)
CASES["sort_positional_argmin"] = t_sa

@mg.mgpu_kernel(out_shape=lambda x, *, reps, BLOCK: S((x.shape[0] * reps,), x.dtype), grid=lambda x, *, reps, BLOCK: (tl.cdiv(x.shape[0] * reps, BLOCK),))
def repeat_interleave(x_ptr, o_ptr, *, reps: tl.constexpr, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < o_ptr.shape[0]
  tl.store(o_ptr.at[offs], tl.load(x_ptr.at[offs // reps], mask=m), mask=m)
def t_ri():
  x = rnd((1001,), 6); o = repeat_interleave(x, reps=3, BLOCK=1024, **_MODE)
  np.testing.assert_array_equal(np.asarray(o), np.repeat(x, 3)); _export(repeat_interleave, x, reps=3, BLOCK=1024)
CASES["repeat_interleave"] = t_ri

@mg.mgpu_kernel(out_shape=lambda x, *, OH, OW, BLOCK: S((x.shape[0], OH, OW), x.dtype), grid=lambda x, *, OH, OW, BLOCK: (x.shape[0], tl.cdiv(OH * OW, BLOCK)))
def upsample_nearest(x_ptr, o_ptr, *, OH: tl.constexpr, OW: tl.constexpr, BLOCK: tl.constexpr):
  nc = tl.program_id(0)
  IH, IW = x_ptr.shape[1], x_ptr.shape[2]
  idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
  m = idx < OH * OW
  oh = idx // OW
  ow = idx % OW
  ih = tl.minimum((oh * (IH / OH)).to(tl.int32), IH - 1)
  iw = tl.minimum((ow * (IW / OW)).to(tl.int32), IW - 1)
  v = tl.load(x_ptr.at[nc, ih, iw], mask=m)
  tl.store(o_ptr.at[nc, oh, ow], v, mask=m)
def t_up():
  x = rnd((3, 7, 9), 7); o = upsample_nearest(x, OH=14, OW=27, BLOCK=256, **_MODE)
  ih = np.minimum((np.arange(14) * np.float32(7 / 14)).astype(int), 6); iw = np.minimum((np.arange(27) * np.float32(9 / 27)).astype(int), 8)
  np.testing.assert_array_equal(np.asarray(o), x[:, ih][:, :, iw]); _export(upsample_nearest, x, OH=14, OW=27, BLOCK=256)
CASES["upsample_nearest"] = t_up

# ================================================================ (b21)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, S((1,), jnp.int32)), grid=lambda x, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def int64_things(x_ptr, y_ptr, cnt_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
  mask = offsets < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offsets], mask=mask, other=0.0)
  cnt = tl.zeros([BLOCK], tl.int64)
  cnt += (x > 0).to(tl.int64)
  tl.store(y_ptr.at[offsets], tl.full([BLOCK], 1.5, dtype=x_ptr.dtype.element_ty) * x, mask=mask)
  tl.atomic_add(cnt_ptr.at[0], tl.sum(cnt).to(tl.int32))
def t_i64():
  x = rnd((3000,), 1); y, c = int64_things(x, BLOCK=1024, **_MODE)
  close(y, 1.5 * x); assert int(np.asarray(c)[0]) == (x > 0).sum(); _export(int64_things, x, BLOCK=1024)
CASES["int64_things"] = t_i64

# ---- Liger CE with weight, z-loss and label smoothing together; HAS_WEIGHT with a weight tensor
@mg.mgpu_kernel(out_shape=lambda X, Y, W, *, lse_square_scale, label_smoothing, BLOCK_SIZE: (S((X.shape[0],), F32), S((X.shape[0],), F32)), grid=lambda X, *a, **k: (X.shape[0],))
def ce_zloss(X_ptr, Y_ptr, weight_ptr, loss_ptr, z_loss_ptr, *, lse_square_scale: tl.constexpr, label_smoothing: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  y = tl.load(Y_ptr.at[program_id])
  m = float("-inf")
  d = 0.0
  ori_X_y = tl.load(X_ptr.at[program_id, y]).cast(tl.float32)
  weight_y = tl.load(weight_ptr.at[y]).cast(tl.float32)
  scaled_x_sum = 0.0
  eps = label_smoothing / n_cols
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
    block_max = tl.max(X_block)
    if label_smoothing > 0:
      weight_block = tl.load(weight_ptr.at[X_offsets], mask=X_offsets < n_cols)
      scaled_x_sum += tl.sum(tl.where(X_offsets < n_cols, -eps * X_block * weight_block, 0.0))
    m_new = tl.maximum(m, block_max)
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
    m = m_new
  lse = m + tl.log(d)
  loss = (lse - ori_X_y) * weight_y
  if label_smoothing > 0:
    loss = loss * (1 - label_smoothing) + scaled_x_sum + label_smoothing * lse * eps * 0
  z_loss = lse_square_scale * lse * lse
  loss += z_loss
  tl.store(loss_ptr.at[program_id], loss)
  tl.store(z_loss_ptr.at[program_id], z_loss)
def t_z():
  V = 50257; x = rnd((3, V), 1) * 2; y = np.array([5, 100, 50000], np.int32); w = np.abs(rnd((V,), 2))
  l, z = ce_zloss(x, y, w, lse_square_scale=1e-4, label_smoothing=0.1, BLOCK_SIZE=8192, **_MODE)
  xf = x.astype(np.float64); m = xf.max(1); lse = m + np.log(np.exp(xf - m[:, None]).sum(1))
  wl = (lse - xf[np.arange(3), y]) * w[y] * 0.9 - (0.1 / V) * (xf * w).sum(1) + 1e-4 * lse ** 2
  close(z, 1e-4 * lse ** 2, 1e-4); close(l, wl, 1e-3); _export(ce_zloss, x, y, w, lse_square_scale=1e-4, label_smoothing=0.1, BLOCK_SIZE=8192)
CASES["ce_zloss"] = t_z

# ---- soft-label CE (FlagGems, class-probability targets) over (N, C) with chunks
@mg.mgpu_kernel(out_shape=lambda x, t, *, BLOCK: S((x.shape[0],), F32), grid=lambda x, *a, **k: (x.shape[0],))
def soft_ce(x_ptr, t_ptr, o_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  C = x_ptr.shape[1]
  tmp_max = tl.zeros([BLOCK], tl.float32) - float("inf")
  tmp_sum = tl.zeros([BLOCK], tl.float32)
  for off in range(0, C, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    x = tl.load(x_ptr.at[pid, cols], mask=cols < C, other=-float("inf")).to(tl.float32)
    cur_max = tl.maximum(tmp_max, x)
    cur_exp = tl.exp(x - cur_max)
    tmp_sum = tmp_sum * tl.exp(tmp_max - cur_max) + cur_exp
    tmp_max = cur_max
  final_max = tl.max(tmp_max)
  tmp_sum = tmp_sum * tl.exp(tmp_max - final_max)
  lse = final_max + tl.log(tl.sum(tmp_sum))
  acc = tl.zeros([BLOCK], tl.float32)
  for off in range(0, C, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    x = tl.load(x_ptr.at[pid, cols], mask=cols < C, other=0.0).to(tl.float32)
    t = tl.load(t_ptr.at[pid, cols], mask=cols < C, other=0.0).to(tl.float32)
    acc += t * (lse - x)
  tl.store(o_ptr.at[pid], tl.sum(acc))
def t_sc():
  x = rnd((4, 1000), 3); t = np.random.default_rng(4).dirichlet(np.ones(1000), 4).astype(np.float32)
  o = soft_ce(x, t, BLOCK=256, **_MODE)
  xf = x.astype(np.float64); lse = np.log(np.exp(xf).sum(1))
  close(o, (t * (lse[:, None] - xf)).sum(1), 1e-4); _export(soft_ce, x, t, BLOCK=256)
CASES["soft_ce"] = t_sc


# ================================================================ (b22)
@mg.mgpu_kernel(out_shape=lambda x, v, vp, *, BLOCK: (x, x, x), grid=lambda x, *a, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def fills(x_ptr, value: tl.scalar, value_ptr, f_ptr, m_ptr, k_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offs], mask=m, other=0.0)
  tl.store(f_ptr.at[offs], tl.full([BLOCK], value, tl.float32), mask=m)
  v2 = tl.load(value_ptr)
  tl.store(m_ptr.at[offs], tl.where(x > 0, v2, x), mask=m)
  mx = tl.max(x, axis=0, keep_dims=True)
  tl.store(k_ptr.at[offs], x - mx + tl.broadcast_to(mx, [BLOCK]) * 0, mask=m)
def t_f():
  x = rnd((3000,), 1); vp = np.array(2.5, np.float32)
  f, mm, k = fills(x, -1.25, vp, BLOCK=1024, **_MODE)
  close(f, np.full(3000, -1.25)); close(mm, np.where(x > 0, 2.5, x))
  blk = np.concatenate([np.full(1024, x[i:i + 1024].max()) for i in range(0, 3000, 1024)])[:3000]
  close(k, x - blk); _export(fills, x, np.float32(-1.25), vp, BLOCK=1024)
CASES["fills"] = t_f

# ---- Unsloth layernorm backward
@mg.mgpu_kernel(out_shape=lambda dY, X, W, b, r, mu, *, BLOCK_SIZE: X, grid=lambda dY, *a, **k: (dY.shape[0],))
def unsloth_ln_bwd(dY, X, W, b, r, mu, dX, *, BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0)
  n_cols = X.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  dY_row = tl.load(dY.at[row_idx, col_offsets], mask=mask, other=0).to(tl.float32)
  X_row = tl.load(X.at[row_idx, col_offsets], mask=mask, other=0).to(tl.float32)
  W_row = tl.load(W.at[col_offsets], mask=mask, other=0).to(tl.float32)
  inv_var = tl.load(r.at[row_idx]).to(tl.float32)
  mean = tl.load(mu.at[row_idx]).to(tl.float32)
  normed = (X_row - mean) * inv_var
  dY_W = dY_row * W_row
  dX_row = dY_W - tl.sum(dY_W, axis=0) / n_cols - normed * tl.sum(dY_W * normed, axis=0) / n_cols
  dX_row = dX_row * inv_var
  tl.store(dX.at[row_idx, col_offsets], dX_row, mask=mask)
def t_ulb(n, d, dt):
  x, w, b, dy = (rnd((n, d), 1, dt) + 1).astype(dt), rnd((d,), 2, dt), rnd((d,), 3, dt), rnd((n, d), 4, dt)
  xf = x.astype(np.float64); mu = xf.mean(1); r = 1 / np.sqrt(xf.var(1) + 1e-5)
  dx = unsloth_ln_bwd(dy, x, w, b, r.astype(np.float32), mu.astype(np.float32), BLOCK_SIZE=1 << (d - 1).bit_length(), **_MODE)
  nm = (xf - mu[:, None]) * r[:, None]; dyw = dy.astype(np.float64) * w.astype(np.float64)
  want = (dyw - dyw.mean(1, keepdims=True) - nm * (dyw * nm).mean(1, keepdims=True)) * r[:, None]
  close(dx, want, 3e-2 if dt != np.float32 else 1e-4)
  _export(unsloth_ln_bwd, dy, x, w, b, r.astype(np.float32), mu.astype(np.float32), BLOCK_SIZE=1 << (d - 1).bit_length())
CASES["unsloth_ln_bwd_bf16"] = lambda: t_ulb(5, 4096, BF16)
CASES["unsloth_ln_bwd_f32"] = lambda: t_ulb(3, 999, np.float32)

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


# ================================================================ the corpus: every kernel above against its reference
_NAMES = list(CASES)
_GROUPS = {f"{_NAMES[i]}..{_NAMES[min(i + 12, len(_NAMES) - 1)]}": _NAMES[i:i + 13] for i in range(0, len(_NAMES), 13)}


@pytest.mark.parametrize("group", list(_GROUPS))
def test_library_kernels_match_their_references_and_export(group):
  """Thirteen kernels a test (each about 0.1 to 0.5 s: the slow tier holds them all)."""
  for name in _GROUPS[group]:
    try:
      CASES[name]()
    except Exception as e:
      raise AssertionError(f"{name}: {type(e).__name__}: {e}") from e


# ================================================================ (1) math of Python numbers
@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, F32), S(x.shape, jnp.int32)))
def number_math(x_ptr, o_ptr, f_ptr, i_ptr):
  x = x_ptr[...]
  o_ptr[...] = x * tl.math.rsqrt(2.0) + tl.sqrt(2.0 / math.pi) + tl.exp(float("-inf"))
  f_ptr[...] = tl.zeros(x.shape, tl.float32) + tl.atan2(1.0, 2.0) + tl.math.pow(2.0, 0.5) + tl.fmod(-7.5, 2.0) \
      + tl.log(4)
  i_ptr[...] = tl.zeros(x.shape, tl.int32) + tl.abs(-3) + tl.fmod(-7, 3)


def test_math_of_python_numbers_is_float32_computed_while_tracing():
  """Each was MG003 "tl.rsqrt of a Python number should be computed in Python". Triton makes the number a float32
  scalar tensor, jnp a weak float32: the float32 value, which leaves a bfloat16 tile bfloat16 (jnp's weak typing)."""
  x = rnd((256,), 1, BF16)
  o, f, i = number_math(x, interpret=True)
  assert o.dtype == BF16
  c1, c2 = float(np.float32(1 / np.sqrt(np.float32(2.0)))), float(np.float32(np.sqrt(np.float32(2.0 / math.pi))))
  want = jnp.asarray(x) * c1 + c2 + 0.0                       # jnp's weak Python floats: bfloat16 steps
  np.testing.assert_array_equal(np.asarray(o, np.float32), np.asarray(want, np.float32))
  f32 = np.float32
  np.testing.assert_array_equal(np.asarray(f), np.full(256, f32(np.arctan2(f32(1), f32(2))) + f32(np.sqrt(f32(2)))
                                                     + f32(np.fmod(f32(-7.5), f32(2))) + f32(np.log(f32(4)))))
  np.testing.assert_array_equal(np.asarray(i), np.full(256, 3 + int(math.fmod(-7, 3)), np.int32))   # 3 + -1
  export(number_math, x)


# ================================================================ (2) helpers of static arguments calling the language
import probe60b_tle  # noqa: E402  (a module of helpers, FlagGems' tle)


def _pid_def(axis):
  return tl.program_id(axis).to(tl.int64)


class _Ext:
  @staticmethod
  def program_id(axis):
    return tl.program_id(axis).to(tl.int64)


_pid_lambda = lambda axis: tl.program_id(axis).to(tl.int64)      # noqa: E731
_HELPERS = {"module": probe60b_tle.program_id, "namespace_def": types.SimpleNamespace(program_id=_pid_def).program_id,
            "namespace_lambda": tle.program_id, "lambda": _pid_lambda, "staticmethod": _Ext.program_id}


@mg.mgpu_kernel(out_shape=lambda x, *, pid: (x, S((1,), jnp.int32)), grid=lambda x, **k: (x.shape[0] // 128,))
def tle_kernel(x_ptr, o_ptr, n_ptr, *, pid: tl.constexpr):
  p = pid(0)
  offs = p * 128 + tl.arange(0, 128)
  tl.store(o_ptr.at[offs], tl.load(x_ptr.at[offs]) + p.to(tl.float32))
  tl.store(n_ptr.at[0], probe60b_tle.num_programs(0).to(tl.int32), mask=p == 0)


@pytest.mark.parametrize("how", list(_HELPERS))
def test_a_helper_of_static_arguments_calling_the_language_is_traced(how):
  """FlagGems' `tle.program_id(0)` ran as Python on its static argument, and `tl.program_id` there raised MG003
  "can only be used inside an @mgpu_kernel function" at the helper's line: it is an inline helper now."""
  x = rnd((512,), 2)
  o, n = tle_kernel(x, pid=_HELPERS[how], interpret=True)
  np.testing.assert_array_equal(np.asarray(o), x + np.repeat(np.arange(4, dtype=np.float32), 128))
  assert int(np.asarray(n)[0]) == 4
  if how == "module":
    export(tle_kernel, x, pid=_HELPERS[how])


def _fails_in_python(n):
  return tl.zeros((n,), tl.float32) if n > 0 else [][0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_helper_error(x_ptr, o_ptr):
  o_ptr[...] = x_ptr[...] + _fails_in_python(0)


def test_a_static_helpers_own_python_error_is_still_reported_as_one():
  with pytest.raises(mg.KernelTypeError) as info:
    static_helper_error.check(S((128,), F32))
  e = info.value
  assert (e.lineno - static_helper_error.fn.__code__.co_firstlineno, e.col_offset) == (2, 28)
  assert "_fails_in_python(...) of static values failed while tracing: IndexError" in str(e)


# ================================================================ (3) num_stages= over register loads
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: x, grid=lambda x, **k: (x.shape[0],))
def staged_helper_loop(x_ptr, y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  for off in tl.range(0, N, BLOCK, num_stages=2):
    cols = off + tl.arange(0, BLOCK)
    v = tl.load(x_ptr.at[row, cols], mask=cols < N, other=0.0)
    tl.store(y_ptr.at[row, cols], _gelu_tanh(v) * rsqrt(4.0), mask=cols < N)


def test_num_stages_over_register_loads_sees_through_library_aliases_and_helpers():
  """A bare `tanh(...)` (Liger's libdevice import) or a plain helper in the loop was taken for a call that might
  make a TMA load, so num_stages=2 asked for a pipeline: MG502 "found no TMA load to pipeline"."""
  x = rnd((3, 1000), 3)
  y = staged_helper_loop(x, BLOCK=256, interpret=True)
  close(y, np.asarray(jax.nn.gelu(x, approximate=True)) * 0.5, 1e-5)
  export(staged_helper_loop, x, BLOCK=256)
  from mgpu_dsl.frontend.loop_bounds import _helper_makes_no_load, _library_function

  def copies(a, b):
    tl.copy(a, b)

  def calls_copies(a, b):
    return copies(a, b)
  assert _library_function(tanh) and _library_function(np.exp) and not _library_function(tl.copy)
  assert _helper_makes_no_load(_gelu_tanh) and not _helper_makes_no_load(copies)
  assert not _helper_makes_no_load(calls_copies) and not _helper_makes_no_load(print)


# ================================================================ (4) Triton's debugging names, tl.assume, autotune keys
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def debugging_names(x_ptr, o_ptr):
  pid = tl.program_id(0)
  tl.assume(pid >= 0)
  offs = pid * 128 + tl.arange(0, 128)
  v = tl.load(x_ptr.at[offs])
  tl.static_print("BLOCK", 128, v)
  tl.device_print("pid", pid)
  tl.store(o_ptr.at[offs], v * 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def assume_of_a_number(x_ptr, o_ptr):
  tl.assume(x_ptr[...])
  o_ptr[...] = x_ptr[...]


def test_static_print_device_print_and_assume_are_tritons(capsys):
  """Each was MG002 "tl has no attribute ..." whose hint wrote print(...) or dropped tl.assume."""
  x = rnd((256,), 5)
  np.testing.assert_array_equal(np.asarray(debugging_names(x, interpret=True)), x * 2)
  out = capsys.readouterr().out.splitlines()
  assert out.count("BLOCK 128 tensor<128, float32>") == 1             # once, while tracing (a value: its type)
  assert "[program (0, 0, 0)] pid 0" in out and "[program (1, 0, 0)] pid 1" in out
  export(debugging_names, x)
  e, line, col = _error(lambda: assume_of_a_number.check(S((128,), F32)), assume_of_a_number)
  assert (type(e), e.code, line, col) == (mg.KernelTypeError, "MG003", 2, 12)
  assert "tl.assume takes a condition (a comparison), got" in str(e) and e.hint == "tl.assume(pid >= 0)"


@mg.mgpu_kernel(out_shape=lambda x, n, *, BLOCK: x, grid=lambda x, n, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def keyed(x_ptr, n: tl.scalar, o_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < x_ptr.shape[0]
  tl.store(o_ptr.at[offs], tl.load(x_ptr.at[offs], mask=m) + n, mask=m)


def test_autotune_takes_tritons_key_of_argument_names():
  """FlagGems' `@triton.autotune(configs=..., key=["M", "N"])`: it was MG006 "key= must be a callable"."""
  tuned = mg.autotune(configs=[dict(BLOCK=256), dict(BLOCK=1024)], key=["M", "n"])(keyed)
  x = rnd((3000,), 6)
  np.testing.assert_array_equal(np.asarray(tuned(x, 2.0, interpret=True)), x + 2)
  k1, k2 = (tuned._tuning_key([x, v], {}) for v in (2.0, 3.0))
  assert k1 != k2                      # a named run-time scalar separates tunings, as Triton's key
  plain = mg.autotune(configs=[dict(BLOCK=256)])(keyed)
  assert plain._tuning_key([x, 2.0], {}) == plain._tuning_key([x, 3.0], {})


# ================================================================ (6) a dtype called on a number: Liger's online softmax
@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK_SIZE: X, grid=lambda X, **k: (X.shape[0],))
def liger_softmax_multi_block(X_ptr, Y_ptr, *, BLOCK_SIZE: tl.constexpr):
  row_id = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  offs = tl.arange(0, BLOCK_SIZE)
  m = tl.float32(-float("inf"))
  d = tl.float32(0.0)
  for start in tl.range(0, n_cols, BLOCK_SIZE):
    idx = start + offs
    mask = idx < n_cols
    xblk = tl.load(X_ptr.at[row_id, idx], mask=mask, other=-float("inf"), cache_modifier=".ca")
    blk_max = tl.max(xblk, axis=0)
    new_m = tl.maximum(m, blk_max)
    d = d * tl.exp(m - new_m) + tl.sum(tl.exp(xblk - new_m), axis=0)
    m = new_m
  for start in tl.range(0, n_cols, BLOCK_SIZE):
    idx = start + offs
    mask = idx < n_cols
    xblk = tl.load(X_ptr.at[row_id, idx], mask=mask, other=-float("inf"), cache_modifier=".ca")
    tl.store(Y_ptr.at[row_id, idx], (tl.exp(xblk - m) / d).to(Y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S(x.shape, jnp.int32), x))
def dtype_calls(x_ptr, f_ptr, i_ptr, b_ptr):
  x = x_ptr[...]
  f_ptr[...] = x * tl.float32(0.1)                  # a float32 scalar: bfloat16 * float32 is float32, as jnp's
  i_ptr[...] = tl.zeros(x.shape, tl.int32) + tl.int32(7)
  b_ptr[...] = x * tl.bfloat16(0.1)                 # a bfloat16 scalar: 0.1 rounded to bfloat16 first


def test_a_dtype_called_on_a_number_is_a_scalar_of_that_dtype():
  """Liger's multi-block softmax starts its online max and sum as `tl.float32(-float("inf"))`, `tl.float32(0.0)`:
  MG003 "tl.float32 is not callable". A number given to a dtype is that dtype's scalar, as jnp.float32(c) is."""
  x = rnd((3, 70000), 7, BF16)
  y = liger_softmax_multi_block(x, BLOCK_SIZE=8192, interpret=True)
  xf = x.astype(np.float64)
  e = np.exp(xf - xf.max(1, keepdims=True))
  close(y, e / e.sum(1, keepdims=True), 1e-3)
  export(liger_softmax_multi_block, x, BLOCK_SIZE=8192)
  v = rnd((256,), 8, BF16)
  f, i, b = dtype_calls(v, interpret=True)
  np.testing.assert_array_equal(np.asarray(f), v.astype(np.float32) * np.float32(0.1))
  np.testing.assert_array_equal(np.asarray(i), np.full(256, 7, np.int32))
  np.testing.assert_array_equal(np.asarray(b, np.float32), np.asarray(jnp.asarray(v) * jnp.bfloat16(0.1), np.float32))


@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK_SIZE: S((X.shape[0],), F32), grid=lambda X, **k: (X.shape[0],))
def max_of_two_scalars(X_ptr, o_ptr, *, BLOCK_SIZE: tl.constexpr):
  m = tl.float32(-float("inf"))
  blk_max = tl.max(tl.load(X_ptr.at[tl.program_id(0), tl.arange(0, BLOCK_SIZE)]), axis=0)
  new_m = tl.max(m, blk_max)
  tl.store(o_ptr.at[tl.program_id(0)], new_m)


# ================================================================ refusals kept: what to write instead
@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK: S((X.shape[0],), F32), grid=lambda X, **k: (X.shape[0],))
def grad_into_input(X_ptr, loss_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offs = tl.arange(0, BLOCK)
  x = tl.load(X_ptr.at[pid, offs], mask=offs < X_ptr.shape[1], other=0.0)
  tl.store(X_ptr.at[pid, offs], x * 2, mask=offs < X_ptr.shape[1])
  tl.store(loss_ptr.at[pid], tl.sum(x))


@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK: X, grid=lambda X, **k: (X.shape[0],))
def pointer_offsets(X_ptr, Y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  offs = tl.arange(0, BLOCK)
  x = tl.load(X_ptr + row * 100 + offs, mask=offs < 100)
  tl.store(Y_ptr.at[row, offs], x, mask=offs < 100)


@mg.mgpu_kernel(out_shape=lambda X, g, *, BLOCK_SIZE: X, grid=lambda X, *a, **k: (X.shape[0],), input_output_aliases={0: 0})
def element_mul_f32_scalar(X_in, grad_output_ptr, X_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  grad_output = tl.load(grad_output_ptr)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols)
    tl.store(X_ptr.at[program_id, X_offsets], X_block * grad_output, mask=X_offsets < n_cols)


@mg.mgpu_kernel(out_shape=lambda x, stride, n_cols, *, BLOCK: x, grid=lambda x, stride, n_cols, *, BLOCK: (7,))
def int64_row_times_stride(X_ptr, X_stride: tl.scalar, n_cols: tl.scalar, Y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0).to(tl.int64)
  cols = tl.arange(0, BLOCK)
  x = tl.load(X_ptr.at[row * X_stride + cols], mask=cols < n_cols, other=0.0)
  tl.store(Y_ptr.at[row * X_stride + cols], x, mask=cols < n_cols)


@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK_SIZE: S((X.shape[0],), F32), grid=lambda X, **k: (X.shape[0],))
def smoothing_over_padding(X_ptr, loss_ptr, *, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  scaled_x_sum = 0.0
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[pid, X_offsets], mask=X_offsets < n_cols, other=float("-inf"))
    scaled_x_sum += tl.sum(-0.1 * X_block)
  tl.store(loss_ptr.at[pid], scaled_x_sum)


def _error(fn, kernel):
  with pytest.raises(mg.KernelError) as info:
    fn()
  e = info.value
  return e, e.lineno - kernel.fn.__code__.co_firstlineno, e.col_offset


def test_refusals_the_libraries_meet_say_what_to_write():
  x = rnd((3, 100), 4)
  e, line, col = _error(lambda: grad_into_input.check(S((3, 100), F32), BLOCK=128), grad_into_input)
  assert (type(e), e.code, line, col) == (mg.InputWriteError, "MG303", 5, 2)
  assert "cannot write into X_ptr: it is an input of the kernel, and inputs are read-only" in str(e)
  assert e.hint.endswith("alias it: input_output_aliases={0: 1}")
  e, line, col = _error(lambda: pointer_offsets.check(S((3, 100), F32), BLOCK=128), pointer_offsets)
  assert (type(e), e.code, line, col) == (mg.KernelTypeError, "MG003", 4, 14)
  assert "got X_ptr (GMEM ref) plus the offset row * 100: a ref is not a pointer" in str(e)
  assert "a row, X_ptr.at[row] (for x_ptr + row * stride)" in e.hint
  e, line, col = _error(lambda: element_mul_f32_scalar.check(S((3, 1000), BF16), S((), F32), BLOCK_SIZE=512),
                        element_mul_f32_scalar)
  assert (type(e), e.code, line, col) == (mg.DtypeMismatchError, "MG104", 8, 46)
  assert e.hint.startswith("convert the scalar, grad_output.astype(jnp.bfloat16)")
  e, line, col = _error(lambda: int64_row_times_stride.check(S((700,), F32), S((), jnp.int32), S((), jnp.int32),
                                                             BLOCK=128), int64_row_times_stride)
  assert (type(e), e.code, line, col) == (mg.DtypeMismatchError, "MG104", 4, 23)
  assert "* on row (int64) and X_stride (int32)" in str(e) and "X_stride.astype(jnp.int64)" in e.hint
  with pytest.raises(mg.SignatureError, match="has no constexpr parameter 'num_warps'") as info:
    grad_into_input(x, BLOCK=128, num_warps=8, interpret=True)
  assert "threads per CTA are block= (a multiple of 128: num_warps=4 is block=128)" in info.value.hint
  e, line, col = _error(lambda: max_of_two_scalars.check(S((3, 128), F32), BLOCK_SIZE=128), max_of_two_scalars)
  assert (type(e), e.code, line, col) == (mg.KernelTypeError, "MG003", 4, 10)      # Liger's tl.max(m, blk_max)
  assert "tl.max: axis must be a static int or a tuple of them, got a scalar" in str(e)
  assert e.hint == "tl.max reduces one tensor; the elementwise max of two is tl.maximum(m, blk_max)"
  e, line, col = _error(lambda: smoothing_over_padding(x, BLOCK_SIZE=64, interpret=True), smoothing_over_padding)
  assert (type(e), e.code, line, col) == (mg.MaskedReductionError, "MG953", 8, 20)
  assert e.hint == "reduce only the lanes the mask keeps: tl.sum(-0.1 * X_block, where=X_offsets < n_cols)"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ce_50257_bf16_ls", "ce_1000_f16_softcap", "ce_inplace_f32_128256",
                                  "unsloth_ce_chunks_bf16", "unsloth_ce_bwd_bf16", "ce_zloss", "geglu_exact_bf16",
                                  "geglu_bwd_bf16", "rope_llama_bf16", "unsloth_rope_f16_hd64", "rms_bf16_odd",
                                  "far_f16_odd", "argmax_32000", "gather_f16", "scatter_add", "var_mean_bf16_odd",
                                  "lsm_dim1_bf16", "sparsemax_odd", "topk_f32", "embedding_f32_odd", "group_norm_odd",
                                  "batchnorm_stats_bf16", "nonzero", "unique_sorted", "lora_down_f16_r32_oddK",
                                  "softmax_inner_bf16", "libfuncs", "norms3d_odd", "bf16_atomic", "ranges_rsqrt_number",
                                  "upsample_nearest", "mean_two_stage", "liger_ce_v1_f32", "liger_ce_v1_bf16"])
def test_library_kernel_on_the_gpu(name):
  saved = dict(_MODE)
  _MODE.clear()
  try:
    CASES[name]()
  finally:
    _MODE.update(saved)
