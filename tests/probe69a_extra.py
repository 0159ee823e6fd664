"""Probe 69a's corpus, its seventh part: optimizers past Adam as their reference implementations write them (Adan's
three moments, Sophia's clipped Hessian step, schedule-free AdamW's interpolation, Lookahead's slow weights on a
run-time step, SWA's running average), gradient noise from `ml.randn`, and 1-bit Adam's sign compression with error
feedback. CASES as in probe69a_adam.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69a_lib import S, F32, registrar, f32, rnd

B = 256
CASES = {}
case = registrar(CASES)


def _g(p, *a, **k):
  return (ml.cdiv(p.shape[0], B),)


# ---------------------------------------------------------------- Adan (Xie et al.): three moments, the gradient's step
@mg.mgpu_kernel(out_shape=lambda p, g, gp, m, v, n, *a: (p, m, v, n), grid=_g)
def adan_step(p_ptr, g_ptr, gprev_ptr, m_ptr, v_ptr, n_ptr, lr: ml.scalar, step: ml.scalar, p_out, m_out, v_out, n_out,
              *, b1: ml.constexpr = 0.02, b2: ml.constexpr = 0.08, b3: ml.constexpr = 0.01, wd: ml.constexpr = 0.02,
              eps: ml.constexpr = 1e-8):
  offs = ml.program_id(0) * B + ml.arange(B)
  mask = offs < p_ptr.shape[0]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  diff = g - ml.load(gprev_ptr.at[offs], mask=mask, other=0.0)
  m = (1 - b1) * ml.load(m_ptr.at[offs], mask=mask, other=0.0) + b1 * g
  v = (1 - b2) * ml.load(v_ptr.at[offs], mask=mask, other=0.0) + b2 * diff
  u = g + (1 - b2) * diff
  n = (1 - b3) * ml.load(n_ptr.at[offs], mask=mask, other=0.0) + b3 * u * u
  bc1, bc2, bc3 = 1 - (1 - b1) ** step, 1 - (1 - b2) ** step, 1 - (1 - b3) ** step
  upd = (m / bc1 + (1 - b2) * v / bc2) / (ml.sqrt(n / bc3) + eps)
  p = (ml.load(p_ptr.at[offs], mask=mask, other=0.0) - lr * upd) / (1 + lr * wd)
  for o, val in ((p_out, p), (m_out, m), (v_out, v), (n_out, n)):
    ml.store(o.at[offs], val, mask=mask)


def _adan_ref(p, g, gp, m, v, n, lr, step, b1=0.02, b2=0.08, b3=0.01, wd=0.02, eps=1e-8):
  d = g - gp
  m = (1 - b1) * m + b1 * g
  v = (1 - b2) * v + b2 * d
  n = (1 - b3) * n + b3 * (g + (1 - b2) * d) ** 2
  bc1, bc2, bc3 = (1 - (1 - b) ** step for b in (b1, b2, b3))
  upd = (m / bc1 + (1 - b2) * v / bc2) / (np.sqrt(n / bc3) + eps)
  return f32((p - lr * upd) / (1 + lr * wd)), f32(m), f32(v), f32(n)


case("adan_three_moments", adan_step,
     lambda seed: ((rnd(seed, 900), rnd(seed + 1, 900), rnd(seed + 2, 900), rnd(seed + 3, 900, 0.1),
                    rnd(seed + 4, 900, 0.1), np.abs(rnd(seed + 5, 900, 0.01)), 1e-3, 4), {}), _adan_ref, 2e-5)


# ---------------------------------------------------------------- Sophia: EMA of the Hessian estimate, clipped ratio
@mg.mgpu_kernel(out_shape=lambda p, g, m, h, *a, **k: (p, m), grid=_g, input_output_aliases={0: 0, 2: 1})
def sophia_step(p_ptr, g_ptr, m_ptr, h_ptr, lr: ml.scalar, bs: ml.scalar, p_out, m_out, *,
                b1: ml.constexpr = 0.965, rho: ml.constexpr = 0.04, wd: ml.constexpr = 0.1, eps: ml.constexpr = 1e-15):
  offs = ml.program_id(0) * B + ml.arange(B)
  mask = offs < p_ptr.shape[0]
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0) * (1 - lr * wd)
  m = b1 * ml.load(m_ptr.at[offs], mask=mask, other=0.0) + (1 - b1) * ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  h = ml.load(h_ptr.at[offs], mask=mask, other=0.0)
  ratio = ml.clamp(ml.abs(m) / (rho * bs * h + eps), 0.0, 1.0)
  ml.store(p_out.at[offs], p - lr * ml.where(m > 0, 1.0, ml.where(m < 0, -1.0, 0.0)) * ratio, mask=mask)
  ml.store(m_out.at[offs], m, mask=mask)


def _sophia_ref(p, g, m, h, lr, bs, b1=0.965, rho=0.04, wd=0.1, eps=1e-15):
  p = p * np.float32(1 - np.float32(lr) * np.float32(wd))
  m = np.float32(b1) * m + np.float32(1 - b1) * g
  ratio = np.clip(np.abs(m) / (np.float32(rho) * np.float32(bs) * h + np.float32(eps)), 0, 1)
  return f32(p - np.float32(lr) * np.sign(m) * ratio), f32(m)


case("sophia_clipped_hessian", sophia_step,
     lambda seed: ((rnd(seed, 1000), rnd(seed + 1, 1000), rnd(seed + 2, 1000, 0.1), np.abs(rnd(seed + 3, 1000)),
                    1e-3, 480.0), {}), _sophia_ref, 1e-5)


# ---------------------------------------------------------------- schedule-free AdamW (Defazio et al.)
@mg.mgpu_kernel(out_shape=lambda y, z, x, v, g, *a: (y, z, x, v), grid=_g)
def schedule_free_adamw(y_ptr, z_ptr, x_ptr, v_ptr, g_ptr, lr: ml.scalar, ckp1: ml.scalar, step: ml.scalar,
                        y_out, z_out, x_out, v_out, *, b1: ml.constexpr = 0.9, b2: ml.constexpr = 0.999,
                        eps: ml.constexpr = 1e-8, wd: ml.constexpr = 0.0):
  offs = ml.program_id(0) * B + ml.arange(B)
  mask = offs < y_ptr.shape[0]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  v = b2 * ml.load(v_ptr.at[offs], mask=mask, other=0.0) + (1 - b2) * g * g
  denom = ml.sqrt(v / (1 - b2 ** step)) + eps
  y = ml.load(y_ptr.at[offs], mask=mask, other=0.0)
  z = ml.load(z_ptr.at[offs], mask=mask, other=0.0) - lr * (g / denom + wd * y)
  x = (1 - ckp1) * ml.load(x_ptr.at[offs], mask=mask, other=0.0) + ckp1 * z
  y = (1 - b1) * z + b1 * x
  for o, val in ((y_out, y), (z_out, z), (x_out, x), (v_out, v)):
    ml.store(o.at[offs], val, mask=mask)


def _sf_ref(y, z, x, v, g, lr, ckp1, step, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
  v = b2 * v + (1 - b2) * g * g
  z = z - lr * (g / (np.sqrt(v / (1 - b2 ** step)) + eps) + wd * y)
  x = (1 - ckp1) * x + ckp1 * z
  return f32((1 - b1) * z + b1 * x), f32(z), f32(x), f32(v)


case("schedule_free_adamw", schedule_free_adamw,
     lambda seed: ((rnd(seed, 700), rnd(seed + 1, 700), rnd(seed + 2, 700), np.abs(rnd(seed + 3, 700, 0.01)),
                    rnd(seed + 4, 700), 1e-2, 0.2, 5), {}), _sf_ref, 2e-5)


# ---------------------------------------------------------------- Lookahead: slow weights every k steps (run-time if)
@mg.mgpu_kernel(out_shape=lambda fast, slow, st, **k: (fast, slow), grid=_g, input_output_aliases={0: 0, 1: 1})
def lookahead_sync(fast_ptr, slow_ptr, step_ptr, fast_out, slow_out, *, k: ml.constexpr = 5,
                   alpha: ml.constexpr = 0.5):
  offs = ml.program_id(0) * B + ml.arange(B)
  mask = offs < fast_ptr.shape[0]
  if step_ptr[0] % k == 0:
    slow = ml.load(slow_ptr.at[offs], mask=mask)
    slow = slow + alpha * (ml.load(fast_ptr.at[offs], mask=mask) - slow)
    ml.store(slow_out.at[offs], slow, mask=mask)
    ml.store(fast_out.at[offs], slow, mask=mask)


def _la_ref(fast, slow, st, k=5, alpha=0.5):
  if st[0] % k:
    return fast, slow
  s = slow + np.float32(alpha) * (fast - slow)
  return f32(s), f32(s)


for _st in (10, 7):
  case(f"lookahead_step{_st}", lookahead_sync,
       (lambda st: lambda seed: ((rnd(seed, 600), rnd(seed + 1, 600), np.array([st], np.int32)), {}))(_st),
       _la_ref, 1e-6)


# ---------------------------------------------------------------- SWA: running average with n_averaged
@mg.mgpu_kernel(out_shape=lambda avg, p, n: avg, grid=_g, input_output_aliases={0: 0})
def swa_update(avg_ptr, p_ptr, n_ptr, avg_out):
  offs = ml.program_id(0) * B + ml.arange(B)
  mask = offs < avg_ptr.shape[0]
  n = n_ptr[...].to(jnp.float32)
  avg = ml.load(avg_ptr.at[offs], mask=mask)
  ml.store(avg_out.at[offs], avg + (ml.load(p_ptr.at[offs], mask=mask) - avg) / (n + 1.0), mask=mask)


case("swa_running_average", swa_update, lambda seed: ((rnd(seed, 500), rnd(seed + 1, 500), np.int32(3)), {}),
     lambda a, p, n: f32(a + (p - a) / np.float32(int(n) + 1)), 1e-6)


# ---------------------------------------------------------------- gradient noise: g + sigma * N(0, 1) (counter-based)
@mg.mgpu_kernel(out_shape=lambda g, seed, s: g, grid=_g)
def gradient_noise(g_ptr, seed: ml.scalar, sigma: ml.scalar, out):
  offs = ml.program_id(0) * B + ml.arange(B)
  mask = offs < g_ptr.shape[0]
  ml.store(out.at[offs], ml.load(g_ptr.at[offs], mask=mask) + sigma * ml.randn(seed, offs), mask=mask)


def _noise_ref(g, seed, sigma):
  from mgpu_dsl.frontend.ops.random import philox_reference
  words = np.array([philox_reference(seed, 0, e)[:2] for e in range(g.shape[0])], np.uint32).view(np.int32)
  u = np.where(words < 0, ~words, words).astype(np.float32) * np.float32(4.6566127342e-10)
  u1 = np.maximum(u[:, 0], np.float32(1e-7))
  return f32(g + np.float32(sigma) * (np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u[:, 1])).astype(np.float32))


case("gradient_noise_randn", gradient_noise, lambda seed: ((rnd(seed, 700), 17, 0.01), {}), _noise_ref, 1e-5)


# ---------------------------------------------------------------- 1-bit Adam: sign compression with error feedback
@mg.mgpu_kernel(out_shape=lambda m, e: (S(m.shape, jnp.int8), S((m.shape[0] // B,), F32), e), grid=_g,
                input_output_aliases={1: 2})
def onebit_compress(m_ptr, err_ptr, sign_out, scale_out, err_out):
  blk = ml.program_id(0)
  offs = blk * B + ml.arange(B)
  x = ml.load(m_ptr.at[offs]) + ml.load(err_ptr.at[offs])
  scale = ml.sum(ml.abs(x)) / B
  sign = ml.where(x >= 0, 1, -1)
  ml.store(sign_out.at[offs], sign.to(jnp.int8))
  ml.store(err_out.at[offs], x - scale * sign.to(jnp.float32))
  scale_out[blk] = scale


def _onebit_ref(m, e):
  x = (m + e).reshape(-1, B)
  scale = (np.abs(x).astype(np.float64).sum(1) / B).astype(np.float32)
  sign = np.where(x >= 0, 1, -1)
  return sign.astype(np.int8).reshape(-1), scale, f32(x - scale[:, None] * sign).reshape(-1)


case("onebit_adam_error_feedback", onebit_compress, lambda seed: ((rnd(seed, 1024), rnd(seed + 1, 1024, 0.1)), {}),
     _onebit_ref, 1e-5)
