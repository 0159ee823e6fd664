"""Probe 69a's corpus, its first part: fused optimizer steps as PyTorch (fused/foreach), apex and optax write them
over flat parameter buffers: Adam, AdamW, Lion, SGD with momentum and Nesterov, Adagrad, RMSprop, AMSGrad, EMA,
gradient accumulation; hyper-parameters as ml.scalar arguments, 0-d and (1,) arrays, constexprs; step-count bias
correction with pow. tests/test_probe69a.py runs them. CASES maps a name to (kernel, make(seed) -> (args,
constexprs), reference(*args, **constexprs), tolerance); a tolerance of 0 is bit-exact."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69a_lib import BF16, registrar, f32, rnd

BLOCK = 256
CASES = {}
case = registrar(CASES)


def _grid1(p, *a, **k):
  return (ml.cdiv(p.shape[0], BLOCK),)


def _same3(p, g, m, v, *a, **k):
  return (p, m, v)


# ---------------------------------------------------------------- Adam, hyper-parameters as ml.scalar (torch fused)
@mg.mgpu_kernel(out_shape=_same3, grid=_grid1, input_output_aliases={0: 0, 2: 1, 3: 2})
def adam_scalar(p_ptr, g_ptr, m_ptr, v_ptr, lr: ml.scalar, beta1: ml.scalar, beta2: ml.scalar, eps: ml.scalar,
                step: ml.scalar, p_out, m_out, v_out):
  pid = ml.program_id(0)
  offs = pid * BLOCK + ml.arange(0, BLOCK)
  mask = offs < p_ptr.shape[0]
  p, g, m, v = (ml.load(ref.at[offs], mask=mask) for ref in (p_ptr, g_ptr, m_ptr, v_ptr))
  m = beta1 * m + (1.0 - beta1) * g
  v = beta2 * v + (1.0 - beta2) * g * g
  bc1 = 1.0 - beta1 ** step
  bc2 = 1.0 - beta2 ** step
  step_size = lr / bc1
  denom = ml.sqrt(v) / ml.sqrt(bc2) + eps
  p = p - step_size * m / denom
  ml.store(p_out.at[offs], p, mask=mask)
  ml.store(m_out.at[offs], m, mask=mask)
  ml.store(v_out.at[offs], v, mask=mask)


def _adam_ref(p, g, m, v, lr, b1, b2, eps, step, wd=0.0, decoupled=False):
  p, g, m, v = map(np.float64, (p, g, m, v))
  if wd and not decoupled:
    g = g + wd * p
  if wd and decoupled:
    p = p * (1 - lr * wd)
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  mh, vh = m / (1 - b1 ** step), v / (1 - b2 ** step)
  return f32(p - lr * mh / (np.sqrt(vh) + eps)), f32(m), f32(v)


def _adam_make(n):
  def make(seed):
    return (rnd(seed, n), rnd(seed + 1, n), rnd(seed + 2, n, 0.1), np.abs(rnd(seed + 3, n, 0.01)),
            1e-3, 0.9, 0.999, 1e-8, 7), {}
  return make


case("adam_scalar_hparams", adam_scalar, _adam_make(1000), lambda p, g, m, v, lr, b1, b2, e, s: _adam_ref(
    p, g, m, v, lr, b1, b2, e, s), 2e-5)
case("adam_scalar_hparams_exact_blocks", adam_scalar, _adam_make(1024), lambda p, g, m, v, lr, b1, b2, e, s: _adam_ref(
    p, g, m, v, lr, b1, b2, e, s), 2e-5)


# ---------------------------------------------------------------- AdamW, hyper-parameters as 0-d arrays, step as (1,)
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a: (p, m, v), grid=_grid1, input_output_aliases={0: 0, 2: 1, 3: 2})
def adamw_arrays(p_ptr, g_ptr, m_ptr, v_ptr, lr_ptr, wd_ptr, step_ptr, p_out, m_out, v_out,
                 *, beta1: ml.constexpr = 0.9, beta2: ml.constexpr = 0.999, eps: ml.constexpr = 1e-8):
  pid = ml.program_id(0)
  offs = pid * BLOCK + ml.arange(0, BLOCK)
  mask = offs < p_ptr.shape[0]
  lr = lr_ptr[...]
  wd = wd_ptr[...]
  step = ml.load(step_ptr).to(jnp.float32)
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0)
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  m = ml.load(m_ptr.at[offs], mask=mask, other=0.0)
  v = ml.load(v_ptr.at[offs], mask=mask, other=0.0)
  p = p * (1.0 - lr * wd)
  m = m * beta1 + g * (1.0 - beta1)
  v = v * beta2 + g * g * (1.0 - beta2)
  m_hat = m / (1.0 - ml.pow(beta1, step))
  v_hat = v / (1.0 - ml.pow(beta2, step))
  p = p - lr * m_hat / (ml.sqrt(v_hat) + eps)
  ml.store(p_out.at[offs], p, mask=mask)
  ml.store(m_out.at[offs], m, mask=mask)
  ml.store(v_out.at[offs], v, mask=mask)


def _adamw_make(seed):
  n = 777
  return (rnd(seed, n), rnd(seed + 1, n), rnd(seed + 2, n, 0.1), np.abs(rnd(seed + 3, n, 0.01)),
          np.float32(1e-3), np.float32(0.01), np.array([5], np.int32)), {}


case("adamw_0d_and_1elem_arrays", adamw_arrays, _adamw_make,
     lambda p, g, m, v, lr, wd, st, **k: _adam_ref(p, g, m, v, float(lr), 0.9, 0.999, 1e-8, int(st[0]),
                                                     float(wd), True), 2e-5)


# ---------------------------------------------------------------- Adam with L2 weight decay, step as a 0-d int array
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a, **k: (p, m, v), grid=_grid1)
def adam_l2_step0d(p_ptr, g_ptr, m_ptr, v_ptr, step_ptr, p_out, m_out, v_out, *, lr: ml.constexpr,
                   wd: ml.constexpr, b1: ml.constexpr = 0.9, b2: ml.constexpr = 0.999, eps: ml.constexpr = 1e-8):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < p_ptr.shape[0]
  step = step_ptr[...]
  p = p_ptr.at[offs].load(mask=mask, other=0.0)
  g = g_ptr.at[offs].load(mask=mask, other=0.0) + wd * p
  m = b1 * m_ptr.at[offs].load(mask=mask, other=0.0) + (1 - b1) * g
  v = b2 * v_ptr.at[offs].load(mask=mask, other=0.0) + (1 - b2) * g * g
  for out, val in ((p_out, p - (lr / (1 - b1 ** step)) * m / (ml.sqrt(v / (1 - b2 ** step)) + eps)),
                   (m_out, m), (v_out, v)):
    out.at[offs].store(val, mask=mask)


def _adam_l2_make(seed):
  n = 600
  return (rnd(seed, n), rnd(seed + 1, n), rnd(seed + 2, n, 0.1), np.abs(rnd(seed + 3, n, 0.01)),
          np.int32(3)), dict(lr=1e-2, wd=0.1)


case("adam_l2_int_step_0d", adam_l2_step0d, _adam_l2_make,
     lambda p, g, m, v, st, lr, wd: _adam_ref(p, g, m, v, lr, 0.9, 0.999, 1e-8, int(st), wd, False), 2e-5)


# ---------------------------------------------------------------- Lion (lucidrains' Triton kernel)
@mg.mgpu_kernel(out_shape=lambda p, g, m, *a: (p, m), grid=_grid1, input_output_aliases={0: 0, 2: 1})
def lion_step(p_ptr, grad_ptr, exp_avg_ptr, lr: ml.scalar, wd: ml.scalar, beta1: ml.scalar, beta2: ml.scalar,
              p_out, exp_avg_out):
  pid = ml.program_id(0)
  offsets = pid * BLOCK + ml.arange(0, BLOCK)
  mask = offsets < p_ptr.shape[0]
  p = ml.load(p_ptr.at[offsets], mask=mask)
  grad = ml.load(grad_ptr.at[offsets], mask=mask)
  exp_avg = ml.load(exp_avg_ptr.at[offsets], mask=mask)
  p = p * (1 - lr * wd)
  diff = exp_avg - grad
  update = diff * beta1 + grad
  can_update = update != 0
  update_sign = ml.where(update > 0, -lr, lr)
  p = p + update_sign * can_update
  exp_avg = diff * beta2 + grad
  ml.store(p_out.at[offsets], p, mask=mask)
  ml.store(exp_avg_out.at[offsets], exp_avg, mask=mask)


def _lion_ref(p, g, m, lr, wd, b1, b2):
  p = p * np.float32(1 - np.float32(lr) * np.float32(wd))
  upd = (m - g) * np.float32(b1) + g
  p = p + np.where(upd > 0, -np.float32(lr), np.float32(lr)) * (upd != 0)
  return f32(p), f32((m - g) * np.float32(b2) + g)


def _lion_make(seed):
  n = 2000
  g = rnd(seed + 1, n)
  g[:5] = 0.0
  m = rnd(seed + 2, n)
  m[:5] = 0.0
  return (rnd(seed, n), g, m, 1e-4, 0.01, 0.9, 0.99), {}


case("lion_lucidrains", lion_step, _lion_make, _lion_ref, 1e-5)


# ---------------------------------------------------------------- SGD with momentum, dampening, nesterov (torch)
@mg.mgpu_kernel(out_shape=lambda p, g, buf, **k: (p, buf), grid=_grid1, input_output_aliases={0: 0, 2: 1})
def sgd_momentum(p_ptr, g_ptr, buf_ptr, p_out, buf_out, *, lr: ml.constexpr, momentum: ml.constexpr,
                 dampening: ml.constexpr, weight_decay: ml.constexpr, nesterov: ml.constexpr,
                 first_step: ml.constexpr = False):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < p_ptr.shape[0]
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0)
  d_p = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  if weight_decay != 0:
    d_p = d_p + weight_decay * p
  if momentum != 0:
    if first_step:
      buf = d_p
    else:
      buf = ml.load(buf_ptr.at[offs], mask=mask, other=0.0) * momentum + (1 - dampening) * d_p
    if nesterov:
      d_p = d_p + momentum * buf
    else:
      d_p = buf
    ml.store(buf_out.at[offs], buf, mask=mask)
  p = p - lr * d_p
  ml.store(p_out.at[offs], p, mask=mask)


def _sgd_ref(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, first_step=False):
  g = g + np.float32(weight_decay) * p if weight_decay else g
  b = g if first_step else buf * np.float32(momentum) + np.float32(1 - dampening) * g
  d = g + np.float32(momentum) * b if nesterov else b
  return f32(p - np.float32(lr) * d), f32(b)


def _sgd_make(**kw):
  def make(seed):
    n = 1500
    return (rnd(seed, n), rnd(seed + 1, n), rnd(seed + 2, n)), kw
  return make


case("sgd_momentum_nesterov", sgd_momentum, _sgd_make(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=1e-4,
                                                      nesterov=True), _sgd_ref, 1e-5)
case("sgd_momentum_dampening", sgd_momentum, _sgd_make(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.0,
                                                       nesterov=False), _sgd_ref, 1e-5)
case("sgd_momentum_first_step", sgd_momentum, _sgd_make(lr=0.05, momentum=0.8, dampening=0.0, weight_decay=0.0,
                                                        nesterov=False, first_step=True), _sgd_ref, 1e-5)


# ---------------------------------------------------------------- Adagrad and RMSprop (centered), TMA windows in SMEM
@mg.mgpu_kernel(out_shape=lambda p, g, s, **k: (p, s), grid=lambda p, g, s, **k: (p.shape[0] // 128,))
def adagrad_tma(p, g, s, p_out, s_out, *, lr: ml.constexpr, eps: ml.constexpr = 1e-10):
  i = ml.program_id(0)
  pb, gb, sb = ml.smem((128, p.shape[1])), ml.smem((128, p.shape[1])), ml.smem((128, p.shape[1]))
  ml.copy(p.at[ml.ds(i * 128, 128)], pb)
  ml.copy(g.at[ml.ds(i * 128, 128)], gb)
  ml.copy(s.at[ml.ds(i * 128, 128)], sb)
  gr = gb[...]
  ssum = sb[...] + gr * gr
  sb[...] = ssum
  pb[...] = pb[...] - lr * gr / (ml.sqrt(ssum) + eps)
  ml.copy(pb, p_out.at[ml.ds(i * 128, 128)])
  ml.copy(sb, s_out.at[ml.ds(i * 128, 128)])


def _adagrad_ref(p, g, s, lr, eps=1e-10):
  s2 = s + g * g
  return f32(p - np.float32(lr) * g / (np.sqrt(s2) + np.float32(eps))), f32(s2)


case("adagrad_tma_2d", adagrad_tma, lambda seed: ((rnd(seed, (256, 64)), rnd(seed + 1, (256, 64)),
                                                    np.abs(rnd(seed + 2, (256, 64)))), dict(lr=0.01)), _adagrad_ref,
     1e-5)


@mg.mgpu_kernel(out_shape=lambda p, g, sq, ga, mom, **k: (p, sq, ga, mom), grid=_grid1,
                input_output_aliases={0: 0, 2: 1, 3: 2, 4: 3})
def rmsprop_centered(p_ptr, g_ptr, sq_ptr, ga_ptr, mom_ptr, p_out, sq_out, ga_out, mom_out, *, lr: ml.constexpr,
                     alpha: ml.constexpr = 0.99, eps: ml.constexpr = 1e-8, momentum: ml.constexpr = 0.9):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < p_ptr.shape[0]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  sq = alpha * ml.load(sq_ptr.at[offs], mask=mask, other=0.0) + (1 - alpha) * g * g
  ga = alpha * ml.load(ga_ptr.at[offs], mask=mask, other=0.0) + (1 - alpha) * g
  avg = ml.sqrt(sq - ga * ga) + eps
  buf = momentum * ml.load(mom_ptr.at[offs], mask=mask, other=0.0) + g / avg
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0) - lr * buf
  ml.store(p_out.at[offs], p, mask=mask)
  ml.store(sq_out.at[offs], sq, mask=mask)
  ml.store(ga_out.at[offs], ga, mask=mask)
  ml.store(mom_out.at[offs], buf, mask=mask)


def _rmsprop_ref(p, g, sq, ga, mom, lr, alpha=0.99, eps=1e-8, momentum=0.9):
  a = np.float32(alpha)
  sq = a * sq + (1 - a) * g * g
  ga = a * ga + (1 - a) * g
  buf = np.float32(momentum) * mom + g / (np.sqrt(sq - ga * ga) + np.float32(eps))
  return f32(p - np.float32(lr) * buf), f32(sq), f32(ga), f32(buf)


case("rmsprop_centered", rmsprop_centered,
     lambda seed: ((rnd(seed, 900), rnd(seed + 1, 900), np.abs(rnd(seed + 2, 900)) + 1.0, rnd(seed + 3, 900, 0.1),
                    rnd(seed + 4, 900)), dict(lr=0.01)), _rmsprop_ref, 1e-4)


# ---------------------------------------------------------------- AMSGrad (max of second moments)
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, vm, *a: (p, m, v, vm), grid=_grid1)
def adam_amsgrad(p_ptr, g_ptr, m_ptr, v_ptr, vmax_ptr, lr: ml.scalar, step: ml.scalar, p_out, m_out, v_out, vmax_out):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < p_ptr.shape[0]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  m = 0.9 * ml.load(m_ptr.at[offs], mask=mask, other=0.0) + 0.1 * g
  v = 0.999 * ml.load(v_ptr.at[offs], mask=mask, other=0.0) + 0.001 * g * g
  vmax = ml.maximum(ml.load(vmax_ptr.at[offs], mask=mask, other=0.0), v)
  bc1 = 1.0 - 0.9 ** step
  bc2 = 1.0 - 0.999 ** step
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0) - lr / bc1 * m / (ml.sqrt(vmax / bc2) + 1e-8)
  ml.store(p_out.at[offs], p, mask=mask)
  ml.store(m_out.at[offs], m, mask=mask)
  ml.store(v_out.at[offs], v, mask=mask)
  ml.store(vmax_out.at[offs], vmax, mask=mask)


def _ams_ref(p, g, m, v, vm, lr, step):
  m = 0.9 * m + 0.1 * g
  v = 0.999 * v + 0.001 * g * g
  vm = np.maximum(vm, v)
  p = p - lr / (1 - 0.9 ** step) * m / (np.sqrt(vm / (1 - 0.999 ** step)) + 1e-8)
  return f32(p), f32(m), f32(v), f32(vm)


case("adam_amsgrad", adam_amsgrad, lambda seed: ((rnd(seed, 513), rnd(seed + 1, 513), rnd(seed + 2, 513, 0.1),
                                                   np.abs(rnd(seed + 3, 513, 0.01)), np.abs(rnd(seed + 4, 513, 0.01)),
                                                   1e-3, 10), {}), _ams_ref, 2e-5)


# ---------------------------------------------------------------- EMA of weights (bf16 params, f32 shadow)
@mg.mgpu_kernel(out_shape=lambda ema, p, d: ema, grid=_grid1, input_output_aliases={0: 0})
def ema_update(ema_ptr, p_ptr, decay_ptr, ema_out):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < ema_ptr.shape[0]
  decay = ml.load(decay_ptr)
  e = ml.load(ema_ptr.at[offs], mask=mask)
  p = ml.load(p_ptr.at[offs], mask=mask).to(jnp.float32)
  e = e - (1.0 - decay) * (e - p)
  ml.store(ema_out.at[offs], e, mask=mask)


def _ema_ref(e, p, d):
  d = d.reshape(())
  return f32(e - (np.float32(1) - d) * (e - f32(p)))


case("ema_bf16_params_f32_shadow", ema_update,
     lambda seed: ((rnd(seed, 3000), np.asarray(jnp.asarray(rnd(seed + 1, 3000), BF16)),
                    np.array([0.999], np.float32)), {}), _ema_ref, 1e-6)


# ---------------------------------------------------------------- gradient accumulation: f32 += bf16 (micro-batches)
@mg.mgpu_kernel(out_shape=lambda acc, g, **k: acc, grid=_grid1, input_output_aliases={0: 0})
def grad_accum(acc_ptr, g_ptr, acc_out, *, scale: ml.constexpr = 1.0):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < acc_ptr.shape[0]
  acc = ml.load(acc_out.at[offs], mask=mask)
  acc += ml.load(g_ptr.at[offs], mask=mask).to(jnp.float32) * scale
  ml.store(acc_out.at[offs], acc, mask=mask)


case("grad_accum_bf16_into_f32", grad_accum,
     lambda seed: ((rnd(seed, 1234), np.asarray(jnp.asarray(rnd(seed + 1, 1234), BF16))), dict(scale=0.25)),
     lambda a, g, scale: f32(a + f32(g) * np.float32(scale)), 1e-6)
