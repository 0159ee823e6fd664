"""Probe 69a's corpus, its second part: mixed precision and clipping as apex, torch.amp and optax write them:
loss-scale unscaling with an inf/nan flag (torch's _amp_foreach_non_finite_check_and_unscale_), the dynamic loss
scale's update, bf16 params with an f32 master copy, global-norm clipping as two passes (atomics, or a partials
buffer) then a scaling pass, stochastic rounding to bf16 from a counter-based hash, LAMB's per-tensor trust ratios,
multi-tensor steps over lists of buffers, a persistent-grid Adam. CASES as in probe69a_adam.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69a_lib import S, F32, BF16, I32, registrar, f32, bf16, rnd

BLOCK = 256
CASES = {}
case = registrar(CASES)


def _grid1(p, *a, **k):
  return (ml.cdiv(p.shape[0], BLOCK),)


# ---------------------------------------------------------------- unscale + found_inf (torch.amp), flag by atomic_max
@mg.mgpu_kernel(out_shape=lambda g, inv: (g, S((1,), F32)), grid=_grid1, input_output_aliases={0: 0})
def unscale_check(g_ptr, inv_scale_ptr, g_out, found_inf):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < g_ptr.shape[0]
  inv = ml.load(inv_scale_ptr)
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  bad = ~ml.isfinite(g) & mask
  ml.atomic_max(found_inf.at[0], ml.max(bad.to(jnp.float32)))
  ml.store(g_out.at[offs], g * inv, mask=mask)


def _unscale_make(with_inf):
  def make(seed):
    g = rnd(seed, 1000, 100.0)
    if with_inf:
      g[517] = np.inf
      g[3] = np.nan
    return (g, np.array([1 / 1024], np.float32)), {}
  return make


def _unscale_ref(g, inv):
  return f32(g * inv[0]), np.array([float(not np.all(np.isfinite(g)))], np.float32)


case("amp_unscale_found_inf", unscale_check, _unscale_make(True), _unscale_ref, 1e-6)
case("amp_unscale_all_finite", unscale_check, _unscale_make(False), _unscale_ref, 1e-6)


# ---------------------------------------------------------------- the same, the flag an int32 set by a plain store
@mg.mgpu_kernel(out_shape=lambda g, inv: (g, S((), I32)), grid=(1,))
def unscale_single_cta(g_ptr, inv_scale: ml.scalar, g_out, found_inf):
  n = g_ptr.shape[0]
  any_bad = ml.zeros((BLOCK,), jnp.int32)
  for start in range(0, n, BLOCK):
    offs = start + ml.arange(BLOCK)
    mask = offs < n
    g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
    any_bad = any_bad | (ml.isnan(g) | ml.isinf(g)).to(jnp.int32)
    ml.store(g_out.at[offs], g * inv_scale, mask=mask)
  found_inf[...] = ml.max(any_bad)


case("amp_unscale_single_cta_flag", unscale_single_cta,
     lambda seed: ((np.where(np.arange(700) == 650, np.float32(-np.inf), rnd(seed, 700)), 0.5), {}),
     lambda g, inv: (f32(g * np.float32(inv)), np.int32(not np.all(np.isfinite(g)))), 1e-6)


# ---------------------------------------------------------------- dynamic loss scale update (torch._amp_update_scale_)
@mg.mgpu_kernel(out_shape=lambda scale, tracker, found: (scale, tracker), grid=(1,),
                input_output_aliases={0: 0, 1: 1})
def update_scale(scale_ptr, tracker_ptr, found_ptr, scale_out, tracker_out, *, growth: ml.constexpr = 2.0,
                 backoff: ml.constexpr = 0.5, interval: ml.constexpr = 3):
  s = scale_ptr[0]
  t = tracker_ptr[0]
  if found_ptr[0] > 0.0:
    scale_out[0] = s * backoff
    tracker_out[0] = 0
  else:
    t = t + 1
    if t == interval:
      scale_out[0] = s * growth
      tracker_out[0] = 0
    else:
      scale_out[0] = s
      tracker_out[0] = t


def _scale_ref(s, t, f, growth=2.0, backoff=0.5, interval=3):
  if f[0] > 0:
    return f32([s[0] * backoff]), np.array([0], np.int32)
  t1 = t[0] + 1
  return (f32([s[0] * growth]), np.array([0], np.int32)) if t1 == interval else (f32(s), np.array([t1], np.int32))


for _f, _t in ((0.0, 1), (0.0, 0), (1.0, 2)):
  case(f"amp_update_scale_found{int(_f)}_tracker{_t}", update_scale,
       (lambda f, t: lambda seed: ((np.array([65536.0], np.float32), np.array([t], np.int32),
                                    np.array([f], np.float32)), {}))(_f, _t), _scale_ref, 0)


# ---------------------------------------------------------------- bf16 params, f32 master + moments, scaled grads
@mg.mgpu_kernel(out_shape=lambda p, mp, g, m, v, *a: (p, mp, m, v), grid=_grid1,
                input_output_aliases={0: 0, 1: 1, 3: 2, 4: 3})
def adam_master_weights(p_ptr, master_ptr, g_ptr, m_ptr, v_ptr, inv_scale: ml.scalar, lr: ml.scalar,
                        step: ml.scalar, p_out, master_out, m_out, v_out, *, b1: ml.constexpr = 0.9,
                        b2: ml.constexpr = 0.95, eps: ml.constexpr = 1e-8, wd: ml.constexpr = 0.1):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < p_ptr.shape[0]
  w = ml.load(master_ptr.at[offs], mask=mask, other=0.0)
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32) * inv_scale
  m = ml.load(m_ptr.at[offs], mask=mask, other=0.0)
  v = ml.load(v_ptr.at[offs], mask=mask, other=0.0)
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  mhat = m / (1 - b1 ** step)
  vhat = v / (1 - b2 ** step)
  w = w - lr * (mhat / (ml.sqrt(vhat) + eps) + wd * w)
  ml.store(master_out.at[offs], w, mask=mask)
  ml.store(p_out.at[offs], w.to(p_out.dtype), mask=mask)
  ml.store(m_out.at[offs], m, mask=mask)
  ml.store(v_out.at[offs], v, mask=mask)


def _master_ref(p, w, g, m, v, inv, lr, step, b1=0.9, b2=0.95, eps=1e-8, wd=0.1):
  g = f32(g).astype(np.float64) * inv
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  w = w - lr * (m / (1 - b1 ** step) / (np.sqrt(v / (1 - b2 ** step)) + eps) + wd * w)
  return f32(bf16(f32(w))), f32(w), f32(m), f32(v)


def _master_make(seed):
  n = 1100
  w = rnd(seed, n)
  return (bf16(w), w, bf16(rnd(seed + 1, n, 512.0)), rnd(seed + 2, n, 0.1), np.abs(rnd(seed + 3, n, 0.01)),
          1 / 512, 1e-3, 4), {}


case("adamw_bf16_params_f32_master", adam_master_weights, _master_make, _master_ref, 1e-4)


# ---------------------------------------------------------------- global norm, pass 1 by atomics, pass 2 scales
@mg.mgpu_kernel(out_shape=lambda g: S((1,), F32), grid=_grid1)
def sq_norm_atomic(g_ptr, total):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  g = ml.load(g_ptr.at[offs], mask=offs < g_ptr.shape[0], other=0.0).to(jnp.float32)
  ml.atomic_add(total.at[0], ml.sum(g * g))


@mg.mgpu_kernel(out_shape=lambda g, t, **k: g, grid=_grid1, input_output_aliases={0: 0})
def clip_by_total(g_ptr, total_ptr, g_out, *, max_norm: ml.constexpr):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < g_ptr.shape[0]
  norm = ml.sqrt(ml.load(total_ptr))
  coef = ml.minimum(max_norm / (norm + 1e-6), 1.0)
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  ml.store(g_out.at[offs], (g.to(jnp.float32) * coef).to(g_out.dtype), mask=mask)


class _TwoPass:
  """pass 1 then pass 2, called like one kernel."""
  def __init__(self, first, second):
    self.first, self.second = first, second

  def __call__(self, g, interpret=None, **kw):
    return self.second(g, self.first(g, interpret=interpret), interpret=interpret, **kw)


def _clip_ref(g, max_norm):
  norm = np.sqrt(np.sum(f32(g).astype(np.float64) ** 2))
  return f32(f32(g) * min(max_norm / (norm + 1e-6), 1.0))


case("clip_global_norm_atomic_two_pass", _TwoPass(sq_norm_atomic, clip_by_total),
     lambda seed: ((rnd(seed, 5000),), dict(max_norm=1.0)), _clip_ref, 1e-5)
case("clip_global_norm_atomic_bf16", _TwoPass(sq_norm_atomic, clip_by_total),
     lambda seed: ((bf16(rnd(seed, 3000)),), dict(max_norm=1.0)), _clip_ref, 1e-2)


# ---------------------------------------------------------------- global norm through a partials buffer
@mg.mgpu_kernel(out_shape=lambda g: S((ml.cdiv(g.shape[0], BLOCK),), F32), grid=_grid1)
def sq_norm_partials(g_ptr, partials):
  pid = ml.program_id(0)
  offs = pid * BLOCK + ml.arange(BLOCK)
  g = ml.load(g_ptr.at[offs], mask=offs < g_ptr.shape[0], other=0.0)
  partials[pid] = ml.sum(g * g)


@mg.mgpu_kernel(out_shape=lambda g, parts, **k: (g, S((), F32)), grid=_grid1)
def clip_from_partials(g_ptr, part_ptr, g_out, norm_out, *, max_norm: ml.constexpr, P: ml.constexpr = 32):
  pid = ml.program_id(0)
  po = ml.arange(P)
  parts = ml.load(part_ptr.at[po], mask=po < part_ptr.shape[0], other=0.0)
  norm = ml.sqrt(ml.sum(parts))
  scale = max_norm / ml.maximum(norm, max_norm)
  offs = pid * BLOCK + ml.arange(BLOCK)
  mask = offs < g_ptr.shape[0]
  ml.store(g_out.at[offs], ml.load(g_ptr.at[offs], mask=mask) * scale, mask=mask)
  if pid == 0:
    norm_out[...] = norm


class _Partials:
  def __call__(self, g, interpret=None, **kw):
    return clip_from_partials(g, sq_norm_partials(g, interpret=interpret), interpret=interpret, **kw)


def _clip_partials_ref(g, max_norm, P=32):
  norm = np.sqrt(np.sum(g.astype(np.float64) ** 2))
  return f32(g * (max_norm / max(norm, max_norm))), np.float32(norm)


case("clip_global_norm_partials", _Partials(), lambda seed: ((rnd(seed, 7000),), dict(max_norm=5.0)),
     _clip_partials_ref, 1e-5)


# ---------------------------------------------------------------- stochastic rounding f32 -> bf16 (counter hash)
@mg.mgpu_kernel(out_shape=lambda x, seed: S(x.shape, BF16), grid=_grid1)
def stochastic_round(x_ptr, seed: ml.scalar, out):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < x_ptr.shape[0]
  x = ml.load(x_ptr.at[offs], mask=mask, other=0.0)
  bits = x.to(jnp.uint32, bitcast=True)
  r = ml.randint(seed, offs) & 0xFFFF
  rounded = (bits + r) & 0xFFFF0000
  y = rounded.to(jnp.float32, bitcast=True).to(jnp.bfloat16)
  ml.store(out.at[offs], y, mask=mask)


def _sr_ref(x, seed):
  from mgpu_dsl.frontend.ops.random import philox_reference
  r = np.array([philox_reference(seed, 0, e)[0] for e in range(x.shape[0])], np.uint32) & 0xFFFF
  return bf16(((x.view(np.uint32) + r) & 0xFFFF0000).view(np.float32))


case("stochastic_round_bf16_philox", stochastic_round, lambda seed: ((rnd(seed, 600), 1234), {}), _sr_ref, 0)


# ---------------------------------------------------------------- the same with a hand-written integer hash
@mg.mgpu_kernel(out_shape=lambda x, seed: S(x.shape, BF16), grid=_grid1)
def stochastic_round_hash(x_ptr, seed: ml.scalar, out):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < x_ptr.shape[0]
  x = ml.load(x_ptr.at[offs], mask=mask, other=0.0)
  h = (offs.to(jnp.uint32) * 0x9E3779B1) ^ seed.to(jnp.uint32)
  h = h ^ (h >> 16)
  h = h * 0x85EBCA6B
  h = h ^ (h >> 13)
  bits = x.to(jnp.uint32, bitcast=True) + (h & 0xFFFF)
  y = (bits & 0xFFFF0000).to(jnp.float32, bitcast=True).to(jnp.bfloat16)
  ml.store(out.at[offs], y, mask=mask)


def _hash_ref(x, seed):
  with np.errstate(over="ignore"):
    h = (np.arange(x.shape[0], dtype=np.uint32) * np.uint32(0x9E3779B1)) ^ np.uint32(seed)
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    bits = x.view(np.uint32) + (h & np.uint32(0xFFFF))
  return bf16((bits & np.uint32(0xFFFF0000)).view(np.float32))


case("stochastic_round_bf16_hash", stochastic_round_hash, lambda seed: ((rnd(seed, 800), 99), {}), _hash_ref, 0)


# ---------------------------------------------------------------- AdamW on bf16 params with stochastic rounding
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a: (p, m, v), grid=_grid1, input_output_aliases={0: 0, 2: 1, 3: 2})
def adamw_bf16_sr(p_ptr, g_ptr, m_ptr, v_ptr, lr: ml.scalar, step: ml.scalar, seed: ml.scalar, p_out, m_out, v_out):
  offs = ml.program_id(0) * BLOCK + ml.arange(BLOCK)
  mask = offs < p_ptr.shape[0]
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32)
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32)
  m = 0.9 * ml.load(m_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32) + 0.1 * g
  v = 0.999 * ml.load(v_ptr.at[offs], mask=mask, other=0.0) + 0.001 * g * g
  upd = (m / (1 - 0.9 ** step)) / (ml.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
  p = p * (1 - lr * 0.01) - lr * upd
  bits = p.to(jnp.uint32, bitcast=True) + (ml.randint(seed, offs) >> 16)
  p_bf = (bits & 0xFFFF0000).to(jnp.float32, bitcast=True).to(jnp.bfloat16)
  ml.store(p_out.at[offs], p_bf, mask=mask)
  ml.store(m_out.at[offs], m.to(jnp.bfloat16), mask=mask)
  ml.store(v_out.at[offs], v, mask=mask)


def _adamw_sr_ref(p, g, m, v, lr, step, seed):
  from mgpu_dsl.frontend.ops.random import philox_reference
  p, g, m = f32(p), f32(g), f32(m)
  m = np.float32(0.9) * m + np.float32(0.1) * g
  v = np.float32(0.999) * v + np.float32(0.001) * g * g
  upd = (m / np.float32(1 - 0.9 ** step)) / (np.sqrt(v / np.float32(1 - 0.999 ** step)) + np.float32(1e-8))
  p = p * np.float32(1 - np.float32(lr) * np.float32(0.01)) - np.float32(lr) * upd
  r = np.array([philox_reference(seed, 0, e)[0] for e in range(p.shape[0])], np.uint32) >> 16
  return f32(bf16(((f32(p).view(np.uint32) + r) & 0xFFFF0000).view(np.float32))), f32(bf16(m)), f32(v)


case("adamw_bf16_stochastic_rounding", adamw_bf16_sr,
     lambda seed: ((bf16(rnd(seed, 700)), bf16(rnd(seed + 1, 700)), bf16(rnd(seed + 2, 700, 0.1)),
                    np.abs(rnd(seed + 3, 700, 0.01)), 1e-3, 3, 7), {}), _adamw_sr_ref, 1e-2)


# ---------------------------------------------------------------- LAMB: one program per tensor (trust ratio)
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a, **k: (p, m, v), grid=lambda p, *a, **k: (p.shape[0],),
                input_output_aliases={0: 0, 2: 1, 3: 2})
def lamb_per_row(p_ptr, g_ptr, m_ptr, v_ptr, step: ml.scalar, p_out, m_out, v_out, *, lr: ml.constexpr = 1e-2,
                 b1: ml.constexpr = 0.9, b2: ml.constexpr = 0.999, eps: ml.constexpr = 1e-6,
                 wd: ml.constexpr = 0.01):
  t = ml.program_id(0)
  n = p_ptr.shape[1]
  cols = ml.arange(0, 1024)
  mask = cols < n
  p = ml.load(p_ptr.at[t, cols], mask=mask, other=0.0)
  g = ml.load(g_ptr.at[t, cols], mask=mask, other=0.0)
  m = b1 * ml.load(m_ptr.at[t, cols], mask=mask, other=0.0) + (1 - b1) * g
  v = b2 * ml.load(v_ptr.at[t, cols], mask=mask, other=0.0) + (1 - b2) * g * g
  upd = (m / (1 - b1 ** step)) / (ml.sqrt(v / (1 - b2 ** step)) + eps) + wd * p
  w_norm = ml.sqrt(ml.sum(p * p))
  u_norm = ml.sqrt(ml.sum(upd * upd))
  ratio = ml.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, 1.0)
  ml.store(p_out.at[t, cols], p - lr * ratio * upd, mask=mask)
  ml.store(m_out.at[t, cols], m, mask=mask)
  ml.store(v_out.at[t, cols], v, mask=mask)


def _lamb_ref(p, g, m, v, step, lr=1e-2, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  upd = (m / (1 - b1 ** step)) / (np.sqrt(v / (1 - b2 ** step)) + eps) + wd * p
  wn = np.sqrt((p.astype(np.float64) ** 2).sum(1, keepdims=True))
  un = np.sqrt((upd.astype(np.float64) ** 2).sum(1, keepdims=True))
  r = np.where((wn > 0) & (un > 0), wn / np.where(un > 0, un, 1), 1.0)
  return f32(p - lr * r * upd), f32(m), f32(v)


def _lamb_make(seed):
  p = rnd(seed, (4, 1000))
  p[2] = 0.0
  return (p, rnd(seed + 1, (4, 1000)), rnd(seed + 2, (4, 1000), 0.1), np.abs(rnd(seed + 3, (4, 1000), 0.01)), 2), {}


case("lamb_trust_ratio_per_row", lamb_per_row, _lamb_make, _lamb_ref, 1e-4)


# ---------------------------------------------------------------- multi-tensor SGD over lists (foreach)
@mg.mgpu_kernel(out_shape=lambda ps, gs, **k: ps, grid=(2,))
def sgd_foreach(ps, gs, new_ps, *, lr: ml.constexpr = 0.1):
  pid = ml.program_id(0)
  for p, g, o in zip(ps, gs, new_ps):
    for start in range(pid * BLOCK, p.shape[0], ml.num_programs(0) * BLOCK):
      offs = start + ml.arange(BLOCK)
      mask = offs < p.shape[0]
      ml.store(o.at[offs], ml.load(p.at[offs], mask=mask) - lr * ml.load(g.at[offs], mask=mask), mask=mask)


case("sgd_foreach_lists", sgd_foreach,
     lambda seed: (([rnd(seed, 300), rnd(seed + 1, 1000), rnd(seed + 2, 64)],
                    [rnd(seed + 3, 300), rnd(seed + 4, 1000), rnd(seed + 5, 64)]), {}),
     lambda ps, gs, lr=0.1: tuple(f32(p - np.float32(lr) * g) for p, g in zip(ps, gs)), 1e-6)


# ---------------------------------------------------------------- persistent Adam, pipelined TMA tiles
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a: (p, m, v), grid=(4,))
def adam_persistent(p, g, m, v, lr: ml.scalar, step: ml.scalar, p_out, m_out, v_out):
  pid = ml.program_id(0)
  tiles = p.shape[0] // 32
  bc1 = 1.0 - 0.9 ** step
  bc2 = 1.0 - 0.999 ** step
  ps, gs, ms, vs = ml.smem((32, 128)), ml.smem((32, 128)), ml.smem((32, 128)), ml.smem((32, 128))
  po, mo, vo = ml.smem((32, 128)), ml.smem((32, 128)), ml.smem((32, 128))
  for t in ml.range(pid, tiles, ml.num_programs(0), stages=2):
    r = ml.ds(t * 32, 32)
    ml.copy(p.at[r, :], ps)
    ml.copy(g.at[r, :], gs)
    ml.copy(m.at[r, :], ms)
    ml.copy(v.at[r, :], vs)
    gg = gs[...]
    mm = 0.9 * ms[...] + 0.1 * gg
    vv = 0.999 * vs[...] + 0.001 * gg * gg
    po[...] = ps[...] - lr * (mm / bc1) / (ml.sqrt(vv / bc2) + 1e-8)
    mo[...] = mm
    vo[...] = vv
    ml.copy(po, p_out.at[r, :])
    ml.copy(mo, m_out.at[r, :])
    ml.copy(vo, v_out.at[r, :])


def _adam_p_ref(p, g, m, v, lr, step):
  m = 0.9 * m + 0.1 * g
  v = 0.999 * v + 0.001 * g * g
  return f32(p - lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)), f32(m), f32(v)


case("adam_persistent_tiles", adam_persistent,
     lambda seed: ((rnd(seed, (640, 128)), rnd(seed + 1, (640, 128)), rnd(seed + 2, (640, 128), 0.1),
                    np.abs(rnd(seed + 3, (640, 128), 0.01)), 1e-3, 5), {}), _adam_p_ref, 2e-5)
