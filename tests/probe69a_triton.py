"""Probe 69a's corpus, its fourth part: kernels as Triton authors write them (`from mgpu_dsl import language as tl`,
pointer arithmetic `tl.load(p_ptr + offsets, mask=...)`, `n_elements` and strides passed as arguments,
`.to(out_ptr.dtype.element_ty)`): Liger's fused linear cross-entropy's loss kernel (label smoothing, a looped online
softmax over the vocabulary and the gradient written into the logits), torch's found_inf flag set by a plain store, a
single-kernel global norm finished by the last program's ticket, apex's two-stage LAMB with per-tensor norms
accumulated by atomics, EMA with a warm-up, Lion on bf16. CASES as in probe69a_adam.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe69a_lib import S, F32, BF16, I32, registrar, f32, bf16, rnd

CASES = {}
case = registrar(CASES)


def _g(p, *a, BLOCK_SIZE=1024, **k):
  return (tl.cdiv(p.shape[0], BLOCK_SIZE),)


# ---------------------------------------------------------------- torch-style fused AdamW, pointer arithmetic
@mg.mgpu_kernel(out_shape=lambda p, g, *a, **k: p, grid=_g)
def fused_adamw_ptr(params_ptr, grads_ptr, lr, p_out_ptr, *, BLOCK_SIZE: tl.constexpr = 1024):
  """Refused (MG003 at each `ptr + offsets`, tests/test_probe69a.py); fused_adamw_at writes what its hint says."""
  offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < params_ptr.shape[0]
  params = tl.load(params_ptr + offsets, mask=mask)
  grads = tl.load(grads_ptr + offsets, mask=mask)
  tl.store(p_out_ptr + offsets, params - tl.load(lr) * grads, mask=mask)


@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a, **k: (p, m, v), grid=_g, input_output_aliases={0: 0, 2: 1, 3: 2})
def fused_adamw_at(params_ptr, grads_ptr, exp_avg_ptr, exp_avg_sq_ptr, lr, beta1, beta2, eps, weight_decay, step,
                    p_out_ptr, m_out_ptr, v_out_ptr, *, BLOCK_SIZE: tl.constexpr = 1024):
  pid = tl.program_id(axis=0)
  n_elements = params_ptr.shape[0]
  block_start = pid * BLOCK_SIZE
  offsets = block_start + tl.arange(0, BLOCK_SIZE)
  mask = offsets < n_elements
  params = tl.load(params_ptr.at[offsets], mask=mask)
  grads = tl.load(grads_ptr.at[offsets], mask=mask)
  exp_avg = tl.load(exp_avg_ptr.at[offsets], mask=mask)
  exp_avg_sq = tl.load(exp_avg_sq_ptr.at[offsets], mask=mask)
  lr_v = tl.load(lr)
  b1 = tl.load(beta1)
  b2 = tl.load(beta2)
  eps_v = tl.load(eps)
  wd = tl.load(weight_decay)
  step_v = tl.load(step)
  params = params * (1 - lr_v * wd)
  exp_avg = exp_avg * b1 + (1 - b1) * grads
  exp_avg_sq = exp_avg_sq * b2 + (1 - b2) * grads * grads
  bias_correction1 = 1 - tl.math.pow(b1, step_v)
  bias_correction2 = 1 - tl.math.pow(b2, step_v)
  step_size = lr_v / bias_correction1
  bias_correction2_sqrt = tl.sqrt(bias_correction2)
  denom = tl.sqrt(exp_avg_sq) / bias_correction2_sqrt + eps_v
  params = params - step_size * exp_avg / denom
  tl.store(p_out_ptr.at[offsets], params.to(p_out_ptr.dtype.element_ty), mask=mask)
  tl.store(m_out_ptr.at[offsets], exp_avg, mask=mask)
  tl.store(v_out_ptr.at[offsets], exp_avg_sq, mask=mask)


def _fadam_make(seed):
  n = 3000
  one = lambda x, dt=np.float32: np.array([x], dt)
  return (rnd(seed, n), rnd(seed + 1, n), rnd(seed + 2, n, 0.1), np.abs(rnd(seed + 3, n, 0.01)), one(1e-3),
          one(0.9), one(0.999), one(1e-8), one(0.01), one(6.0)), {}


def _fadam_ref(p, g, m, v, lr, b1, b2, eps, wd, step, **k):
  lr, b1, b2, eps, wd, step = (float(x[0]) for x in (lr, b1, b2, eps, wd, step))
  p = p * (1 - lr * wd)
  m = m * b1 + (1 - b1) * g
  v = v * b2 + (1 - b2) * g * g
  return f32(p - lr / (1 - b1 ** step) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** step) + eps)), f32(m), f32(v)


case("torch_fused_adamw_at_offsets", fused_adamw_at, _fadam_make, _fadam_ref, 2e-5)


# ---------------------------------------------------------------- found_inf set by a plain store where a block has inf
@mg.mgpu_kernel(out_shape=lambda g, inv, **k: (g, S((1,), F32)), grid=_g, input_output_aliases={0: 0})
def unscale_found_inf_store(g_ptr, inv_scale_ptr, g_out_ptr, found_inf_ptr, *, BLOCK_SIZE: tl.constexpr = 1024):
  pid = tl.program_id(0)
  offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < g_ptr.shape[0]
  g = tl.load(g_ptr.at[offsets], mask=mask, other=0.0).to(tl.float32)
  inv_scale = tl.load(inv_scale_ptr)
  g = g * inv_scale
  has_inf = tl.sum((g != g) | (tl.abs(g) == float("inf"))) > 0
  if has_inf:
    tl.store(found_inf_ptr, 1.0)
  tl.store(g_out_ptr.at[offsets], g.to(g_out_ptr.dtype.element_ty), mask=mask)


def _fi_make(seed):
  g = bf16(rnd(seed, 5000, 10.0))
  g = g.copy()
  g[4100] = np.inf
  return (g, np.array([0.125], np.float32)), {}


def _fi_ref(g, inv, **k):
  return bf16(f32(g) * inv[0]), np.array([1.0], np.float32)


case("amp_found_inf_plain_store", unscale_found_inf_store, _fi_make, _fi_ref, 1e-2)


# ---------------------------------------------------------------- single-kernel global norm: the last ticket scales
@mg.mgpu_kernel(out_shape=lambda g, **k: (g, S((1,), F32), S((1,), I32)), grid=_g)
def clip_grad_norm_ticket(g_ptr, out_ptr, total_ptr, count_ptr, *, max_norm: tl.constexpr,
                          BLOCK_SIZE: tl.constexpr = 1024):
  pid = tl.program_id(0)
  n = g_ptr.shape[0]
  offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < n
  g = tl.load(g_ptr.at[offsets], mask=mask, other=0.0)
  tl.atomic_add(total_ptr, tl.sum(g * g))
  ticket = tl.atomic_add(count_ptr, 1)
  if ticket == tl.num_programs(0) - 1:
    total = tl.atomic_add(total_ptr, 0.0)
    coef = tl.minimum(max_norm / (tl.sqrt(total) + 1e-6), 1.0)
    for start in range(0, n, BLOCK_SIZE):
      o = start + tl.arange(0, BLOCK_SIZE)
      mk = o < n
      tl.store(out_ptr.at[o], tl.load(g_ptr.at[o], mask=mk, other=0.0) * coef, mask=mk)


def _ticket_ref(g, max_norm, **k):
  tot = np.sum(g.astype(np.float64) ** 2)
  return f32(g * min(max_norm / (np.sqrt(tot) + 1e-6), 1.0)), f32([tot]), np.array([-(-g.shape[0] // 1024)], np.int32)


case("clip_grad_norm_last_ticket", clip_grad_norm_ticket, lambda seed: ((rnd(seed, 4500),), dict(max_norm=2.0)),
     _ticket_ref, 1e-5)


# ---------------------------------------------------------------- apex LAMB stage 1: update, per-tensor norms (atomics)
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, tid, nt, *a, **k: (p, m, v, S((nt.shape[0] * 2,), F32)),
                grid=lambda p, *a, **k: (tl.cdiv(p.shape[0], 512),))
def lamb_stage1(p_ptr, g_ptr, m_ptr, v_ptr, tensor_id_ptr, ntensors_like, step, upd_ptr, m_out, v_out, norms_ptr,
                *, b1: tl.constexpr = 0.9, b2: tl.constexpr = 0.999, eps: tl.constexpr = 1e-6,
                wd: tl.constexpr = 0.01):
  pid = tl.program_id(0)
  offs = pid * 512 + tl.arange(0, 512)
  mask = offs < p_ptr.shape[0]
  t = tl.load(tensor_id_ptr.at[pid])
  p = tl.load(p_ptr.at[offs], mask=mask, other=0.0)
  g = tl.load(g_ptr.at[offs], mask=mask, other=0.0)
  m = b1 * tl.load(m_ptr.at[offs], mask=mask, other=0.0) + (1 - b1) * g
  v = b2 * tl.load(v_ptr.at[offs], mask=mask, other=0.0) + (1 - b2) * g * g
  stp = tl.load(step)
  u = (m / (1 - b1 ** stp)) / (tl.sqrt(v / (1 - b2 ** stp)) + eps) + wd * p
  tl.store(upd_ptr.at[offs], u, mask=mask)
  tl.store(m_out.at[offs], m, mask=mask)
  tl.store(v_out.at[offs], v, mask=mask)
  tl.atomic_add(norms_ptr.at[t * 2], tl.sum(p * p))
  tl.atomic_add(norms_ptr.at[t * 2 + 1], tl.sum(u * u))


@mg.mgpu_kernel(out_shape=lambda p, u, tid, norms, **k: p, grid=lambda p, *a, **k: (tl.cdiv(p.shape[0], 512),),
                input_output_aliases={0: 0})
def lamb_stage2(p_ptr, u_ptr, tensor_id_ptr, norms_ptr, p_out, *, lr: tl.constexpr = 1e-2):
  pid = tl.program_id(0)
  offs = pid * 512 + tl.arange(0, 512)
  mask = offs < p_ptr.shape[0]
  t = tl.load(tensor_id_ptr.at[pid])
  w_norm = tl.sqrt(tl.load(norms_ptr.at[t * 2]))
  u_norm = tl.sqrt(tl.load(norms_ptr.at[t * 2 + 1]))
  ratio = tl.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)
  p = tl.load(p_ptr.at[offs], mask=mask)
  tl.store(p_out.at[offs], p - lr * ratio * tl.load(u_ptr.at[offs], mask=mask), mask=mask)


class _Lamb:
  def __call__(self, p, g, m, v, tid, nt, step, interpret=None):
    u, m2, v2, norms = lamb_stage1(p, g, m, v, tid, nt, step, interpret=interpret)
    return lamb_stage2(p, u, tid, norms, interpret=interpret), m2, v2


def _lamb2_make(seed):
  sizes = [1024, 512, 1536]            # chunks of 512, each in one tensor
  n = sum(sizes)
  tid = np.repeat(np.arange(3), [s // 512 for s in sizes]).astype(np.int32)
  return (rnd(seed, n), rnd(seed + 1, n), rnd(seed + 2, n, 0.1), np.abs(rnd(seed + 3, n, 0.01)), tid,
          np.zeros(3, np.float32), np.array([3.0], np.float32)), {}


def _lamb2_ref(p, g, m, v, tid, nt, step, lr=1e-2, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
  s = float(step[0])
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  u = (m / (1 - b1 ** s)) / (np.sqrt(v / (1 - b2 ** s)) + eps) + wd * p
  el = np.repeat(tid, 512)
  out = p.astype(np.float64).copy()
  for t in range(3):
    k = el == t
    wn, un = np.linalg.norm(p[k].astype(np.float64)), np.linalg.norm(u[k].astype(np.float64))
    out[k] = p[k] - lr * (wn / un) * u[k]
  return f32(out), f32(m), f32(v)


case("apex_lamb_two_stage_tensor_ids", _Lamb(), _lamb2_make, _lamb2_ref, 1e-4)


# ---------------------------------------------------------------- EMA with warm-up decay from the step count
@mg.mgpu_kernel(out_shape=lambda e, p, s, **k: e, grid=_g, input_output_aliases={0: 0})
def ema_warmup(ema_ptr, p_ptr, step_ptr, out_ptr, *, max_decay: tl.constexpr = 0.9999,
               BLOCK_SIZE: tl.constexpr = 1024):
  offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < ema_ptr.shape[0]
  step = tl.load(step_ptr).to(tl.float32)
  decay = tl.minimum(max_decay, (1.0 + step) / (10.0 + step))
  e = tl.load(ema_ptr.at[offsets], mask=mask)
  p = tl.load(p_ptr.at[offsets], mask=mask).to(tl.float32)
  tl.store(out_ptr.at[offsets], decay * e + (1.0 - decay) * p, mask=mask)


def _ema_w_ref(e, p, s, max_decay=0.9999):
  d = np.float32(min(max_decay, (1.0 + float(s)) / (10.0 + float(s))))
  return f32(d * e + (np.float32(1) - d) * f32(p))


case("ema_warmup_decay", ema_warmup, lambda seed: ((rnd(seed, 2500), f32(bf16(rnd(seed + 1, 2500))).astype(np.float16),
                                                    np.int32(20)), {}), _ema_w_ref, 1e-6)


# ---------------------------------------------------------------- Lion on bf16 params and bf16 momentum
@mg.mgpu_kernel(out_shape=lambda p, g, m, *a, **k: (p, m), grid=_g, input_output_aliases={0: 0, 2: 1})
def lion_bf16(p_ptr, g_ptr, m_ptr, lr, wd, p_out, m_out, *, beta1: tl.constexpr = 0.9, beta2: tl.constexpr = 0.99,
              BLOCK_SIZE: tl.constexpr = 1024):
  offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offs < p_ptr.shape[0]
  p = tl.load(p_ptr.at[offs], mask=mask).to(tl.float32)
  g = tl.load(g_ptr.at[offs], mask=mask).to(tl.float32)
  m = tl.load(m_ptr.at[offs], mask=mask).to(tl.float32)
  lr_ = tl.load(lr)
  c = beta1 * m + (1 - beta1) * g
  sign = tl.where(c > 0, 1.0, tl.where(c < 0, -1.0, 0.0))
  p = p * (1 - lr_ * tl.load(wd)) - lr_ * sign
  m = beta2 * m + (1 - beta2) * g
  tl.store(p_out.at[offs], p.to(tl.bfloat16), mask=mask)
  tl.store(m_out.at[offs], m.to(m_out.dtype.element_ty), mask=mask)


def _lion_bf_ref(p, g, m, lr, wd, beta1=0.9, beta2=0.99, BLOCK_SIZE=1024):
  p, g, m = f32(p), f32(g), f32(m)
  lr, wd = np.float32(lr), np.float32(wd)
  c = np.float32(beta1) * m + np.float32(1 - beta1) * g
  p = p * (1 - lr * wd) - lr * np.sign(c)
  m = np.float32(beta2) * m + np.float32(1 - beta2) * g
  return bf16(p), bf16(m)


case("lion_bf16_states", lion_bf16, lambda seed: ((bf16(rnd(seed, 1500)), bf16(rnd(seed + 1, 1500)),
                                                   bf16(rnd(seed + 2, 1500)), np.float32(1e-3), np.float32(0.1)), {}),
     _lion_bf_ref, 1e-2)


# ---------------------------------------------------------------- Liger-style cross entropy: looped online softmax
@mg.mgpu_kernel(out_shape=lambda X, Y, **k: (X, S((X.shape[0],), F32)), grid=lambda X, Y, **k: (X.shape[0],),
                input_output_aliases={0: 0})
def liger_cross_entropy(X_ptr, Y_ptr, X_out, loss_ptr, *, ignore_index: tl.constexpr = -100,
                        label_smoothing: tl.constexpr = 0.1, BLOCK_SIZE: tl.constexpr = 256):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  n_non_ignore = tl.sum((tl.load(Y_ptr.at[tl.arange(0, 64)], mask=tl.arange(0, 64) < Y_ptr.shape[0],
                                 other=ignore_index) != ignore_index).to(tl.float32))
  y = tl.load(Y_ptr.at[program_id])
  if y == ignore_index:
    for i in range(0, n_cols, BLOCK_SIZE):
      X_offsets = i + tl.arange(0, BLOCK_SIZE)
      tl.store(X_out.at[program_id, X_offsets], 0.0, mask=X_offsets < n_cols)
    tl.store(loss_ptr.at[program_id], 0.0)
  else:
    m_lane = tl.full((BLOCK_SIZE,), float("-inf"), tl.float32)     # a running max and sum per lane, merged last
    d_lane = tl.zeros((BLOCK_SIZE,), tl.float32)
    x_lane = tl.zeros((BLOCK_SIZE,), tl.float32)
    ori_X_y = tl.load(X_ptr.at[program_id, y]).cast(tl.float32)
    eps = label_smoothing / n_cols
    for i in range(0, n_cols, BLOCK_SIZE):
      cols = i + tl.arange(0, BLOCK_SIZE)
      xb = tl.load(X_ptr.at[program_id, cols], mask=cols < n_cols, other=float("-inf")).cast(tl.float32)
      m_next = tl.maximum(m_lane, xb)
      d_lane = d_lane * tl.exp(m_lane - tl.where(m_next == float("-inf"), 0.0, m_next)) + tl.where(
          cols < n_cols, tl.exp(xb - m_next), 0.0)
      m_lane = m_next
      x_lane += tl.where(cols < n_cols, xb, 0.0)
    m = tl.max(m_lane)
    d = tl.sum(d_lane * tl.exp(m_lane - m))
    scaled_x_sum = -eps * tl.sum(x_lane)
    lse = m + tl.log(d)
    for i in range(0, n_cols, BLOCK_SIZE):
      X_offsets = i + tl.arange(0, BLOCK_SIZE)
      X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).cast(
          tl.float32)
      X_block = (tl.exp(X_block - m) / d - eps) / n_non_ignore
      X_block = tl.where(X_offsets != y, X_block, X_block - (1 - label_smoothing) / n_non_ignore)
      tl.store(X_out.at[program_id, X_offsets], X_block.to(X_out.dtype.element_ty), mask=X_offsets < n_cols)
    loss = lse - ori_X_y
    if label_smoothing > 0:
      smooth_loss = scaled_x_sum + label_smoothing * lse
      loss = loss * (1 - label_smoothing) + smooth_loss
    tl.store(loss_ptr.at[program_id], loss / n_non_ignore)


def _liger_ref(x, y, ignore_index=-100, label_smoothing=0.1, BLOCK_SIZE=256):
  x64 = f32(x).astype(np.float64)
  n, V = x.shape
  valid = y != ignore_index
  nv = valid.sum()
  m = x64.max(1, keepdims=True)
  e = np.exp(x64 - m)
  d = e.sum(1, keepdims=True)
  lse = (m + np.log(d))[:, 0]
  yy = np.where(valid, y, 0)
  eps = label_smoothing / V
  loss = (lse - x64[np.arange(n), yy]) * (1 - label_smoothing) + (-eps * x64.sum(1) + label_smoothing * lse)
  grad = (e / d - eps) / nv
  grad[np.arange(n), yy] -= (1 - label_smoothing) / nv
  grad = np.where(valid[:, None], grad, 0.0)
  return grad.astype(x.dtype), f32(np.where(valid, loss / nv, 0.0))


def _liger_make(dtype, V):
  def make(seed):
    r = np.random.default_rng(seed)
    y = r.integers(0, V, 12).astype(np.int32)
    y[5] = -100
    return (np.asarray(jnp.asarray(rnd(seed, (12, V), 2.0), dtype)), y), {}
  return make


case("liger_cross_entropy_f32_v1000", liger_cross_entropy, _liger_make(F32, 1000), _liger_ref, 1e-5)
case("liger_cross_entropy_bf16_v2051", liger_cross_entropy, _liger_make(BF16, 2051), _liger_ref, 2e-2)
