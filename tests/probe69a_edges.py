"""Probe 69a's corpus, its sixth part: the edges of the same kernels: two warpgroups (block=256) splitting an Adam
tile, a pipelined in-place Adam over aliased buffers, Newton-Schulz at 128x128, hyper-parameters of mixed dtypes
(a bf16 0-d lr, a 0-d int step passed as a Python int, beta read from memory raised to a run-time step),
Triton's libdevice pow of an int step, clipping by value, a looped two-pass global-norm clip in one program,
Adafactor over several programs (row sums per program, column sums by atomics). CASES as in probe69a_adam.py."""
import math

import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69a_lib import NS, ns_reference, S, F32, registrar, f32, bf16, rnd

CASES = {}
case = registrar(CASES)


def _adam_ref(p, g, m, v, lr, step, b1=0.9, b2=0.999, eps=1e-8):
  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g * g
  return f32(p - lr * (m / (1 - b1 ** step)) / (np.sqrt(v / (1 - b2 ** step)) + eps)), f32(m), f32(v)


def _adam4(seed, shape, step=3):
  return (rnd(seed, shape), rnd(seed + 1, shape), rnd(seed + 2, shape, 0.1), np.abs(rnd(seed + 3, shape, 0.01)),
          1e-3, step)


# ---------------------------------------------------------------- block=256: two warpgroups split the rows
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a: (p, m, v), grid=lambda p, *a: (p.shape[0] // 128,), block=256)
def adam_two_warpgroups(p, g, m, v, lr: ml.scalar, step: ml.scalar, p_out, m_out, v_out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  gg = g[r, :]
  mm = 0.9 * m[r, :] + 0.1 * gg
  vv = 0.999 * v[r, :] + 0.001 * gg * gg
  p_out[r, :] = p[r, :] - lr * (mm / (1.0 - 0.9 ** step)) / (ml.sqrt(vv / (1.0 - 0.999 ** step)) + 1e-8)
  m_out[r, :] = mm
  v_out[r, :] = vv


case("adam_block256_two_warpgroups", adam_two_warpgroups, lambda seed: (_adam4(seed, (256, 128)), {}), _adam_ref,
     2e-5)


# ---------------------------------------------------------------- pipelined in-place SGD writing its loaded tile
@mg.mgpu_kernel(out_shape=lambda p, g: p, grid=(3,), input_output_aliases={0: 0})
def sgd_inplace_pipelined(p, g, p_out):
  ps, gs = ml.smem((32, 128)), ml.smem((32, 128))
  for t in ml.range(ml.program_id(0), p.shape[0] // 32, ml.num_programs(0), stages=2):
    ml.copy(p.at[ml.ds(t * 32, 32), :], ps)
    ml.copy(g.at[ml.ds(t * 32, 32), :], gs)
    ps[...] = ps[...] - 0.01 * gs[...]
    ml.copy(ps, p_out.at[ml.ds(t * 32, 32), :])


# (refused, MG502: a pipelined TMA tile is read-only in its loop; tests/test_probe69a.py checks the hint, and
# probe69a_amp.adam_persistent follows it)


# ---------------------------------------------------------------- Newton-Schulz 128x128, the Gram matrix in registers
@mg.mgpu_kernel(out_shape=lambda g, **k: g, grid=(1,))
def muon_128(g_ptr, out_ptr, *, steps: ml.constexpr = 2):
  a, b, c = NS
  x = g_ptr[...].astype(jnp.float32)
  xb = (x * ml.rsqrt(ml.sum(x * x) + 1e-14)).astype(jnp.bfloat16)
  for _ in range(steps):
    A = ml.dot(xb, ml.trans(xb))
    Ab = A.to(jnp.bfloat16)
    B = (b * A + c * ml.dot(Ab, Ab)).to(jnp.bfloat16)
    xb = (a * xb.to(jnp.float32) + ml.dot(B, xb)).to(jnp.bfloat16)
  out_ptr[...] = xb


case("muon_newton_schulz_128x128", muon_128, lambda seed: ((bf16(rnd(seed, (128, 128))),), {}),
     lambda g, steps=2: ns_reference(g, steps, 1e-14, inside=True),
     3e-2)


# ---------------------------------------------------------------- mixed-dtype hyper-parameters
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, lr, b1, st: (p, m, v), grid=lambda p, *a: (ml.cdiv(p.shape[0], 256),))
def adam_mixed_hparams(p_ptr, g_ptr, m_ptr, v_ptr, lr_ptr, beta1_ptr, step_ptr, p_out, m_out, v_out):
  offs = ml.program_id(0) * 256 + ml.arange(256)
  mask = offs < p_ptr.shape[0]
  lr = lr_ptr[...].astype(jnp.float32)
  b1 = beta1_ptr[0]
  step = step_ptr[...]
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0)
  m = b1 * ml.load(m_ptr.at[offs], mask=mask, other=0.0) + (1 - b1) * g
  v = 0.999 * ml.load(v_ptr.at[offs], mask=mask, other=0.0) + 0.001 * g * g
  bc1 = 1 - b1 ** step
  bc2 = 1 - 0.999 ** (step + 0)
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0) - lr * (m / bc1) / (ml.sqrt(v / bc2) + 1e-8)
  ml.store(p_out.at[offs], p, mask=mask)
  ml.store(m_out.at[offs], m, mask=mask)
  ml.store(v_out.at[offs], v, mask=mask)


def _mixed_make(seed):
  p, g, m, v, _, _ = _adam4(seed, 1000)
  return (p, g, m, v, np.asarray(jnp.bfloat16(1e-3)), np.array([0.9], np.float32), 4), {}


def _mixed_ref(p, g, m, v, lr, b1, step):
  return _adam_ref(p, g, m, v, float(f32(lr)), int(step), b1=float(b1[0]))


case("adam_bf16_lr_beta_from_memory_int_step", adam_mixed_hparams, _mixed_make, _mixed_ref, 2e-5)


# ---------------------------------------------------------------- libdevice pow of an int step
@mg.mgpu_kernel(out_shape=lambda m, v, st: S(m.shape, F32), grid=lambda m, *a: (ml.cdiv(m.shape[0], 256),))
def adam_direction_libdevice(m_ptr, v_ptr, step: ml.scalar, out):
  offs = ml.program_id(0) * 256 + ml.arange(256)
  mask = offs < m_ptr.shape[0]
  bc1 = 1.0 - ml.extra.cuda.libdevice.pow(0.9, step)
  bc2 = 1.0 - ml.math.pow(0.999, step)
  m = ml.load(m_ptr.at[offs], mask=mask, other=0.0)
  v = ml.load(v_ptr.at[offs], mask=mask, other=0.0)
  ml.store(out.at[offs], (m / bc1) / (ml.sqrt(v) / math.sqrt(1.0) / ml.sqrt(bc2) + 1e-8), mask=mask)


case("adam_direction_libdevice_pow_int_step", adam_direction_libdevice,
     lambda seed: ((rnd(seed, 700, 0.1), np.abs(rnd(seed + 1, 700, 0.01)), 5), {}),
     lambda m, v, s: f32((m / (1 - 0.9 ** s)) / (np.sqrt(v) / np.sqrt(1 - 0.999 ** s) + 1e-8)), 2e-5)


# ---------------------------------------------------------------- clip by value, then SGD
@mg.mgpu_kernel(out_shape=lambda p, g, **k: p, grid=lambda p, *a, **k: (ml.cdiv(p.shape[0], 256),))
def sgd_clip_value(p_ptr, g_ptr, out, *, clip: ml.constexpr = 0.5, lr: ml.constexpr = 0.1):
  offs = ml.program_id(0) * 256 + ml.arange(256)
  mask = offs < p_ptr.shape[0]
  g = ml.clamp(ml.load(g_ptr.at[offs], mask=mask, other=0.0), -clip, clip)
  ml.store(out.at[offs], ml.load(p_ptr.at[offs], mask=mask, other=0.0) - lr * g, mask=mask)


case("sgd_clip_by_value", sgd_clip_value, lambda seed: ((rnd(seed, 999), rnd(seed + 1, 999)), {}),
     lambda p, g, clip=0.5, lr=0.1: f32(p - np.float32(lr) * np.clip(g, -clip, clip)), 1e-6)


# ---------------------------------------------------------------- one program: norm loop, then scaling loop
@mg.mgpu_kernel(out_shape=lambda g, **k: (g, S((), F32)), grid=(1,))
def clip_norm_one_program(g_ptr, out, norm_out, *, max_norm: ml.constexpr = 1.0, B: ml.constexpr = 512):
  n = g_ptr.shape[0]
  acc = ml.zeros((B,), jnp.float32)
  for s in range(0, n, B):
    o = s + ml.arange(B)
    x = ml.load(g_ptr.at[o], mask=o < n, other=0.0).to(jnp.float32)
    acc += x * x
  norm = ml.sqrt(ml.sum(acc))
  coef = ml.minimum(max_norm / (norm + 1e-6), 1.0)
  for s in range(0, n, B):
    o = s + ml.arange(B)
    ml.store(out.at[o], (ml.load(g_ptr.at[o], mask=o < n, other=0.0) * coef).to(out.dtype), mask=o < n)
  norm_out[...] = norm


def _cnop_ref(g, max_norm=1.0, B=512):
  nrm = np.sqrt(np.sum(f32(g).astype(np.float64) ** 2))
  return (f32(g) * min(max_norm / (nrm + 1e-6), 1.0)).astype(g.dtype), np.float32(nrm)


case("clip_norm_one_program_bf16", clip_norm_one_program, lambda seed: ((bf16(rnd(seed, 5000)),), {}), _cnop_ref,
     1e-2)


# ---------------------------------------------------------------- Adafactor stats over several programs
@mg.mgpu_kernel(out_shape=lambda g: (S((g.shape[0],), F32), S((g.shape[1],), F32)),
                grid=lambda g: (g.shape[0] // 32,))
def adafactor_stats(g_ptr, row_ptr, col_ptr):
  i = ml.program_id(0)
  g = g_ptr.at[ml.ds(i * 32, 32), :][...].astype(jnp.float32)
  g2 = g * g + 1e-30
  row_ptr.at[ml.ds(i * 32, 32)][...] = ml.sum(g2, axis=1) / g_ptr.shape[1]
  ml.atomic_add(col_ptr.at[:], ml.sum(g2, axis=0) / g_ptr.shape[0])


def _afs_ref(g):
  g2 = f32(g).astype(np.float64) ** 2 + 1e-30
  return f32(g2.mean(1)), f32(g2.mean(0))


case("adafactor_stats_atomic_columns", adafactor_stats, lambda seed: ((bf16(rnd(seed, (128, 192))),), {}), _afs_ref,
     1e-5)
