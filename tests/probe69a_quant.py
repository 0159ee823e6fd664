"""Probe 69a's corpus, its third part: 8-bit optimizers (bitsandbytes' block-wise Adam, linear and dynamic-code
states), Adafactor's factored second moment, Muon's Newton-Schulz iteration, label-smoothed cross-entropy forward and
backward with the gradient written in place, and a few state layouts (a NamedTuple of moments, a per-element decay
mask, a run-time `maximize` flag). CASES as in probe69a_adam.py."""
import jax
import jax.numpy as jnp
import numpy as np
from typing import NamedTuple

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69a_lib import NS, ns_reference, S, F32, BF16, I8, registrar, f32, bf16, rnd

QB = 256
CASES = {}
case = registrar(CASES)


# ---------------------------------------------------------------- 8-bit Adam, linear block-wise states
@mg.mgpu_kernel(out_shape=lambda p, g, q1, q2, a1, a2, *a: (p, q1, q2, a1, a2),
                grid=lambda p, *a: (ml.cdiv(p.shape[0], QB),), input_output_aliases={0: 0, 2: 1, 3: 2, 4: 3, 5: 4})
def adam8bit_linear(p_ptr, g_ptr, q1_ptr, q2_ptr, absmax1_ptr, absmax2_ptr, lr: ml.scalar, step: ml.scalar,
                    p_out, q1_out, q2_out, absmax1_out, absmax2_out, *, b1: ml.constexpr = 0.9,
                    b2: ml.constexpr = 0.999, eps: ml.constexpr = 1e-8):
  blk = ml.program_id(0)
  offs = blk * QB + ml.arange(0, QB)
  mask = offs < p_ptr.shape[0]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0)
  m = ml.load(q1_ptr.at[offs], mask=mask, other=0).to(jnp.float32) * (absmax1_ptr[blk] / 127.0)
  v = ml.load(q2_ptr.at[offs], mask=mask, other=0).to(jnp.float32) * (absmax2_ptr[blk] / 255.0)
  m = b1 * m + (1.0 - b1) * g
  v = b2 * v + (1.0 - b2) * g * g
  p = p - lr * (m / (1.0 - b1 ** step)) / (ml.sqrt(v / (1.0 - b2 ** step)) + eps)
  new_a1 = ml.max(ml.abs(m))
  new_a2 = ml.max(v)
  q1 = ml.round(m / ml.maximum(new_a1, 1e-12) * 127.0).to(jnp.int8)
  q2 = ml.round(v / ml.maximum(new_a2, 1e-12) * 255.0).to(jnp.uint8)
  ml.store(p_out.at[offs], p, mask=mask)
  ml.store(q1_out.at[offs], q1, mask=mask)
  ml.store(q2_out.at[offs], q2, mask=mask)
  absmax1_out[blk] = new_a1
  absmax2_out[blk] = new_a2


def _a8_make(n):
  def make(seed):
    r = np.random.default_rng(seed)
    nb = -(-n // QB)
    return (rnd(seed, n), rnd(seed + 1, n), r.integers(-127, 128, n).astype(np.int8),
            r.integers(0, 256, n).astype(np.uint8), np.abs(rnd(seed + 2, nb, 0.1)) + 0.01,
            np.abs(rnd(seed + 3, nb, 0.01)) + 0.001, 1e-3, 4), {}
  return make


def _a8_ref(p, g, q1, q2, a1, a2, lr, step, b1=0.9, b2=0.999, eps=1e-8):
  n = p.shape[0]
  blk = np.arange(n) // QB
  m = q1.astype(np.float32) * (a1 / np.float32(127.0))[blk]
  v = q2.astype(np.float32) * (a2 / np.float32(255.0))[blk]
  m = np.float32(b1) * m + np.float32(1 - b1) * g
  v = np.float32(b2) * v + np.float32(1 - b2) * g * g
  p = p - np.float32(lr) * (m / np.float32(1 - b1 ** step)) / (
      np.sqrt(v / np.float32(1 - b2 ** step)) + np.float32(eps))
  nb = a1.shape[0]
  na1 = np.array([np.abs(m[blk == b]).max() for b in range(nb)], np.float32)
  na2 = np.array([v[blk == b].max() for b in range(nb)], np.float32)
  nq1 = np.round(m / np.maximum(na1, 1e-12)[blk] * 127).astype(np.int8)
  nq2 = np.round(v / np.maximum(na2, 1e-12)[blk] * 255).astype(np.uint8)
  return f32(p), nq1, nq2, na1, na2


case("adam8bit_blockwise_linear", adam8bit_linear, _a8_make(1000), _a8_ref, 1e-4)


# ---------------------------------------------------------------- 8-bit Adam with bitsandbytes' dynamic code table
@mg.mgpu_kernel(out_shape=lambda p, g, q1, a1, code, *a: (p, q1, a1),
                grid=lambda p, *a: (ml.cdiv(p.shape[0], QB),), input_output_aliases={0: 0, 2: 1, 3: 2})
def momentum8bit_dynamic(p_ptr, g_ptr, q1_ptr, absmax_ptr, code_ptr, lr: ml.scalar, p_out, q1_out, absmax_out,
                         *, beta: ml.constexpr = 0.9):
  blk = ml.program_id(0)
  offs = blk * QB + ml.arange(0, QB)
  mask = offs < p_ptr.shape[0]
  code = ml.load(code_ptr.at[ml.arange(0, 256)])
  qi = ml.load(q1_ptr.at[offs], mask=mask, other=128).to(jnp.int32)
  m = ml.load(code_ptr.at[qi]) * absmax_ptr[blk]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  m = beta * m + g
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0) - lr * m
  amax = ml.max(ml.where(mask, ml.abs(m), 0.0))
  x = m / amax
  hi = ml.minimum(ml.searchsorted(code, x), 255)
  lo = ml.maximum(hi - 1, 0)
  c_hi = ml.load(code_ptr.at[hi])
  c_lo = ml.load(code_ptr.at[lo])
  q = ml.where(ml.abs(x - c_lo) <= ml.abs(c_hi - x), lo, hi)
  ml.store(p_out.at[offs], p, mask=mask)
  ml.store(q1_out.at[offs], q.to(jnp.uint8), mask=mask)
  absmax_out[blk] = amax


def _dyn_code():
  # a sorted 256-entry signed code (bitsandbytes' create_dynamic_map is sorted and spans [-1, 1])
  x = np.linspace(-1.0, 1.0, 256) ** 3
  x[127] = 0.0
  return np.sort(x).astype(np.float32)


def _dyn_make(seed):
  n = 700
  r = np.random.default_rng(seed)
  nb = -(-n // QB)
  return (rnd(seed, n), rnd(seed + 1, n), r.integers(0, 256, n).astype(np.uint8),
          np.abs(rnd(seed + 2, nb)) + 0.1, _dyn_code(), 1e-2), {}


def _dyn_ref(p, g, q1, a1, code, lr, beta=0.9):
  blk = np.arange(p.shape[0]) // QB
  m = code[q1.astype(np.int64)] * a1[blk]
  m = np.float32(beta) * m + g
  p = p - np.float32(lr) * m
  amax = np.array([np.abs(m[blk == b]).max() for b in range(a1.shape[0])], np.float32)
  x = m / amax[blk]
  hi = np.minimum(np.searchsorted(code, x, side="left"), 255)
  lo = np.maximum(hi - 1, 0)
  q = np.where(np.abs(x - code[lo]) <= np.abs(code[hi] - x), lo, hi).astype(np.uint8)
  return f32(p), q, amax


case("momentum8bit_dynamic_code", momentum8bit_dynamic, _dyn_make, _dyn_ref, 0)


# ---------------------------------------------------------------- blockwise quantise / dequantise alone
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I8), S((x.shape[0] // QB,), F32)),
                grid=lambda x: (x.shape[0] // QB,))
def quantize_blockwise(x_ptr, q_ptr, absmax_ptr):
  b = ml.program_id(0)
  x = x_ptr.at[ml.ds(b * QB, QB)][...]
  amax = ml.max(ml.abs(x))
  q_ptr.at[ml.ds(b * QB, QB)][...] = ml.clamp(ml.round(x * (127.0 / amax)), -127.0, 127.0).astype(jnp.int8)
  absmax_ptr[b] = amax


def _qb_ref(x):
  xb = x.reshape(-1, QB)
  amax = np.abs(xb).max(1).astype(np.float32)
  return np.clip(np.round(xb * (np.float32(127.0) / amax[:, None])), -127, 127).astype(np.int8).reshape(-1), amax


case("quantize_blockwise_int8", quantize_blockwise, lambda seed: ((rnd(seed, 2048),), {}), _qb_ref, 0)


# ---------------------------------------------------------------- Adafactor (factored second moment), one program
@mg.mgpu_kernel(out_shape=lambda p, g, r, c, **k: (p, r, c), grid=(1,))
def adafactor_factored(p_ptr, g_ptr, r_ptr, c_ptr, p_out, r_out, c_out, *, lr: ml.constexpr = 1e-2,
                       b2: ml.constexpr = 0.8, eps1: ml.constexpr = 1e-30, clip: ml.constexpr = 1.0):
  g = g_ptr[...]
  g2 = g * g + eps1
  r = b2 * r_ptr[...] + (1 - b2) * ml.sum(g2, axis=1) / g2.shape[1]
  c = b2 * c_ptr[...] + (1 - b2) * ml.sum(g2, axis=0) / g2.shape[0]
  v = r[:, None] * c[None, :] / ml.sum(r) * r.shape[0]
  u = g * ml.rsqrt(v)
  rms = ml.sqrt(ml.sum(u * u) / u.size)
  u = u / ml.maximum(1.0, rms / clip)
  p_out[...] = p_ptr[...] - lr * u
  r_out[...] = r
  c_out[...] = c


def _adafactor_ref(p, g, r, c, lr=1e-2, b2=0.8, eps1=1e-30, clip=1.0):
  g2 = g.astype(np.float64) ** 2 + eps1
  r = b2 * r + (1 - b2) * g2.mean(1)
  c = b2 * c + (1 - b2) * g2.mean(0)
  v = r[:, None] * c[None, :] / r.mean()
  u = g / np.sqrt(v)
  u = u / max(1.0, np.sqrt((u ** 2).mean()) / clip)
  return f32(p - lr * u), f32(r), f32(c)


case("adafactor_factored_64x128", adafactor_factored,
     lambda seed: ((rnd(seed, (64, 128)), rnd(seed + 1, (64, 128)), np.abs(rnd(seed + 2, 64)) + 0.1,
                    np.abs(rnd(seed + 3, 128)) + 0.1), {}), _adafactor_ref, 1e-4)


# ---------------------------------------------------------------- Muon: Newton-Schulz in bf16 on tensor cores
@mg.mgpu_kernel(out_shape=lambda g, **k: g, grid=(1,))
def muon_newton_schulz(g_ptr, out_ptr, *, steps: ml.constexpr = 5, eps: ml.constexpr = 1e-7):
  a, b, c = NS
  x = g_ptr[...].astype(jnp.float32)
  x = x / (ml.sqrt(ml.sum(x * x)) + eps)
  xb = x.astype(jnp.bfloat16)
  for _ in range(steps):
    A = ml.dot(xb, xb.T)
    Ab = A.astype(jnp.bfloat16)
    B = b * A + c * ml.dot(Ab, Ab)
    xb = (a * xb.astype(jnp.float32) + ml.dot(B.astype(jnp.bfloat16), xb)).astype(jnp.bfloat16)
  out_ptr[...] = xb


def _ns_make(shape):
  return lambda seed: ((bf16(rnd(seed, shape)),), {})


def _ns_ref(g, steps=5, eps=1e-7):
  return ns_reference(g, steps, eps)


case("muon_newton_schulz_64x64", muon_newton_schulz, _ns_make((64, 64)), _ns_ref, 3e-2)
case("muon_newton_schulz_64x128", muon_newton_schulz, _ns_make((64, 128)), _ns_ref,
     3e-2)


# ---------------------------------------------------------------- Muon with X in SMEM, the Gram matrix from SMEM
@mg.mgpu_kernel(out_shape=lambda g, **k: g, grid=(1,))
def muon_ns_smem(g_ptr, out_ptr, *, steps: ml.constexpr = 3):
  a, b, c = NS
  xs = ml.smem(g_ptr.shape, jnp.bfloat16)
  As = ml.smem((g_ptr.shape[0], g_ptr.shape[0]), jnp.bfloat16)
  ml.copy(g_ptr, xs)
  x = xs[...].astype(jnp.float32)
  xs[...] = (x * ml.rsqrt(ml.sum(x * x) + 1e-14)).astype(jnp.bfloat16)
  for _ in range(steps):
    A = ml.dot(xs, xs.T)
    As[...] = A.astype(jnp.bfloat16)
    B = b * A + c * ml.dot(As, As)
    As[...] = B.astype(jnp.bfloat16)
    xs[...] = (a * xs[...].astype(jnp.float32) + ml.dot(As, xs)).astype(jnp.bfloat16)
  ml.copy(xs, out_ptr)


case("muon_newton_schulz_smem_64x128", muon_ns_smem, _ns_make((64, 128)),
     lambda g, steps=3: ns_reference(g, steps, 1e-14, inside=True),
     3e-2)


# ---------------------------------------------------------------- label-smoothed cross-entropy, fwd + bwd in place
@mg.mgpu_kernel(out_shape=lambda x, y, **k: (x, S((x.shape[0],), F32)), grid=lambda x, y, **k: (x.shape[0],),
                input_output_aliases={0: 0})
def ce_label_smoothing(logits_ptr, labels_ptr, grad_ptr, loss_ptr, *, smoothing: ml.constexpr = 0.1,
                       ignore_index: ml.constexpr = -100, BV: ml.constexpr = 1024):
  row = ml.program_id(0)
  V = logits_ptr.shape[1]
  cols = ml.arange(0, BV)
  mask = cols < V
  y = labels_ptr[row]
  x = ml.load(logits_ptr.at[row, cols], mask=mask, other=-float("inf")).to(jnp.float32)
  m = ml.max(x)
  e = ml.exp(x - m)
  d = ml.sum(e)
  lse = m + ml.log(d)
  x_y = ml.sum(ml.where(cols == y, x, 0.0))
  sum_x = ml.sum(ml.where(mask, x, 0.0))
  eps = smoothing / V
  loss = lse - (1.0 - smoothing) * x_y - eps * sum_x
  n_valid = ml.sum((ml.load(labels_ptr.at[ml.arange(0, 128)], mask=ml.arange(0, 128) < labels_ptr.shape[0],
                            other=ignore_index) != ignore_index).to(jnp.float32))
  grad = (e / d - eps - ml.where(cols == y, 1.0 - smoothing, 0.0)) / n_valid
  valid = y != ignore_index
  grad = ml.where(valid, grad, 0.0)
  ml.store(grad_ptr.at[row, cols], grad.to(grad_ptr.dtype), mask=mask)
  loss_ptr[row] = ml.where(valid, loss, 0.0)


def _ce_ref(x, y, smoothing=0.1, ignore_index=-100, BV=1024):
  x64 = f32(x).astype(np.float64)
  n, V = x.shape
  m = x64.max(1, keepdims=True)
  e = np.exp(x64 - m)
  d = e.sum(1, keepdims=True)
  lse = (m + np.log(d))[:, 0]
  valid = y != ignore_index
  yy = np.where(valid, y, 0)
  xy = x64[np.arange(n), yy]
  loss = lse - (1 - smoothing) * xy - smoothing / V * x64.sum(1)
  oh = np.zeros_like(x64)
  oh[np.arange(n), yy] = 1.0
  grad = (e / d - smoothing / V - (1 - smoothing) * oh) / valid.sum()
  grad = np.where(valid[:, None], grad, 0.0)
  return grad.astype(x.dtype), f32(np.where(valid, loss, 0.0))


def _ce_make(dtype):
  def make(seed):
    r = np.random.default_rng(seed)
    y = r.integers(0, 1000, 16).astype(np.int32)
    y[3] = -100
    return (np.asarray(jnp.asarray(rnd(seed, (16, 1000), 3.0), dtype)), y), {}
  return make


case("ce_label_smoothing_fwd_bwd_f32", ce_label_smoothing, _ce_make(F32), _ce_ref, 1e-5)
case("ce_label_smoothing_fwd_bwd_bf16", ce_label_smoothing, _ce_make(BF16), _ce_ref, 2e-2)


# ---------------------------------------------------------------- Adam over a NamedTuple state, decay mask, maximize
class AdamState(NamedTuple):
  m: jax.Array
  v: jax.Array


@mg.mgpu_kernel(out_shape=lambda p, g, s, dm, *a: (p, AdamState(s.m, s.v)),
                grid=lambda p, *a: (ml.cdiv(p.shape[0], 256),))
def adam_state_tuple(p_ptr, g_ptr, state, decay_mask, lr: ml.scalar, maximize: ml.scalar, new_p, new_s):
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  mask = offs < p_ptr.shape[0]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  if maximize:
    g = -g
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0)
  dec = ml.load(decay_mask.at[offs], mask=mask, other=0) != 0
  p = ml.where(dec, p * (1.0 - lr * 0.1), p)
  m = 0.9 * ml.load(state.m.at[offs], mask=mask, other=0.0) + 0.1 * g
  v = 0.999 * ml.load(state.v.at[offs], mask=mask, other=0.0) + 0.001 * g * g
  ml.store(new_p.at[offs], p - lr * m / (ml.sqrt(v) + 1e-8), mask=mask)
  ml.store(new_s.m.at[offs], m, mask=mask)
  ml.store(new_s.v.at[offs], v, mask=mask)


def _state_ref(p, g, s, dm, lr, maximize):
  g = -g if maximize else g
  p = np.where(dm != 0, p * np.float32(1 - np.float32(lr) * np.float32(0.1)), p)
  m = np.float32(0.9) * s.m + np.float32(0.1) * g
  v = np.float32(0.999) * s.v + np.float32(0.001) * g * g
  return f32(p - np.float32(lr) * m / (np.sqrt(v) + np.float32(1e-8))), f32(m), f32(v)


def _state_make(maximize):
  def make(seed):
    n = 600
    r = np.random.default_rng(seed)
    return (rnd(seed, n), rnd(seed + 1, n), AdamState(rnd(seed + 2, n, 0.1), np.abs(rnd(seed + 3, n, 0.01))),
            r.integers(0, 2, n).astype(np.uint8), 1e-3, maximize), {}
  return make


case("adam_namedtuple_state_decay_mask", adam_state_tuple, _state_make(False), _state_ref, 2e-5)
case("adam_namedtuple_state_maximize", adam_state_tuple, _state_make(True), _state_ref, 2e-5)


# ---------------------------------------------------------------- optax-style AdamW over a dict of params: jax.tree
class Moments(NamedTuple):
  mu: dict
  nu: dict


@mg.mgpu_kernel(out_shape=lambda p, g, s, *a: (p, Moments(s.mu, s.nu)), grid=(1,))
def optax_adamw_tree(params, grads, state, lr: ml.scalar, count: ml.scalar, new_params, new_state, *,
                     b1: ml.constexpr = 0.9, b2: ml.constexpr = 0.999, eps: ml.constexpr = 1e-8,
                     wd: ml.constexpr = 1e-4, max_norm: ml.constexpr = 1.0):
  g = jax.tree.map(lambda r: r[...], grads)
  norm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(g)))
  g = jax.tree.map(lambda x: x * jnp.minimum(1.0, max_norm / (norm + 1e-6)), g)        # clip_by_global_norm
  mu = jax.tree.map(lambda m, x: b1 * m[...] + (1 - b1) * x, state.mu, g)
  nu = jax.tree_util.tree_map(lambda v, x: b2 * v[...] + (1 - b2) * x * x, state.nu, g)
  bc1, bc2 = 1 - b1 ** count, 1 - b2 ** count
  upd = jax.tree.map(lambda m, v, p: -lr * ((m / bc1) / (jnp.sqrt(v / bc2) + eps) + wd * p[...]), mu, nu, params)
  for k in params:
    new_params[k][...] = params[k][...] + upd[k]
    new_state.mu[k][...] = mu[k]
    new_state.nu[k][...] = nu[k]


def _optax_make(seed):
  shapes = {"w": (64, 128), "b": (128,), "ln": (256,)}
  p = {k: rnd(seed + i, s) for i, (k, s) in enumerate(shapes.items())}
  g = {k: rnd(seed + 10 + i, s) for i, (k, s) in enumerate(shapes.items())}
  st = Moments({k: rnd(seed + 20 + i, s, 0.1) for i, (k, s) in enumerate(shapes.items())},
               {k: np.abs(rnd(seed + 30 + i, s, 0.01)) for i, (k, s) in enumerate(shapes.items())})
  return (p, g, st, 1e-3, 3), {}


def _optax_ref(p, g, st, lr, count, b1=0.9, b2=0.999, eps=1e-8, wd=1e-4, max_norm=1.0):
  norm = np.sqrt(sum((x.astype(np.float64) ** 2).sum() for x in g.values()))
  g = {k: x * min(1.0, max_norm / (norm + 1e-6)) for k, x in g.items()}
  mu = {k: b1 * st.mu[k] + (1 - b1) * g[k] for k in g}
  nu = {k: b2 * st.nu[k] + (1 - b2) * g[k] ** 2 for k in g}
  new = {k: p[k] - lr * ((mu[k] / (1 - b1 ** count)) / (np.sqrt(nu[k] / (1 - b2 ** count)) + eps) + wd * p[k])
         for k in p}
  return ({k: f32(v) for k, v in new.items()}, Moments({k: f32(v) for k, v in mu.items()},
                                                       {k: f32(v) for k, v in nu.items()}))


case("optax_adamw_jax_tree_map", optax_adamw_tree, _optax_make, _optax_ref, 2e-5)
