"""Probe 69a's corpus, its fifth part: the rest of a training step's kernels: a non-finite guard that skips the
update (fp16 params), stochastic rounding by Triton's round-toward-zero cast and a uniform draw, Newton-Schulz on a
tall matrix (transposed first), 8-bit blocks held as a 2-D tile, a global norm over a list of tensors with per-tensor
norms, jnp and lax spellings inside kernels, a TMA reduce-add gradient accumulation, cross-entropy's backward of
per-row upstream gradients with a z-loss, Kahan-compensated bf16 AdamW, bitsandbytes' code table staged in SMEM.
CASES as in probe69a_adam.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69a_lib import NS, ns_reference, S, F32, BF16, registrar, f32, bf16, rnd

CASES = {}
case = registrar(CASES)


def _g(p, *a, **k):
  return (ml.cdiv(p.shape[0], 512),)


# ---------------------------------------------------------------- fp16 params: skip the step where found_inf is set
@mg.mgpu_kernel(out_shape=lambda p, g, m, f, *a: (p, m), grid=_g, input_output_aliases={0: 0, 2: 1})
def sgd_skip_nonfinite(p_ptr, g_ptr, m_ptr, found_inf_ptr, lr: ml.scalar, p_out, m_out):
  offs = ml.program_id(0) * 512 + ml.arange(512)
  mask = offs < p_ptr.shape[0]
  skip = ml.load(found_inf_ptr) > 0
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32)
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32)
  m = 0.9 * ml.load(m_ptr.at[offs], mask=mask, other=0.0) + g
  new_p = p - lr * m
  ml.store(p_out.at[offs], ml.where(skip, p, new_p).to(jnp.float16), mask=mask)
  ml.store(m_out.at[offs], ml.where(skip, ml.load(m_ptr.at[offs], mask=mask, other=0.0), m), mask=mask)


def _skip_ref(p, g, m, f, lr):
  if f[0] > 0:
    return p, m
  m2 = np.float32(0.9) * m + f32(g)
  return (f32(p) - np.float32(lr) * m2).astype(np.float16), m2


for _f in (0.0, 1.0):
  case(f"sgd_skip_step_found_inf{int(_f)}", sgd_skip_nonfinite,
       (lambda f: lambda seed: ((rnd(seed, 1300).astype(np.float16), rnd(seed + 1, 1300).astype(np.float16),
                                 rnd(seed + 2, 1300), np.array([f], np.float32), 0.01), {}))(_f), _skip_ref, 1e-3)


# ---------------------------------------------------------------- stochastic rounding: rtz cast, then up with p = frac
@mg.mgpu_kernel(out_shape=lambda x, seed: S(x.shape, BF16), grid=_g)
def stochastic_round_rtz(x_ptr, seed: ml.scalar, out):
  offs = ml.program_id(0) * 512 + ml.arange(512)
  mask = offs < x_ptr.shape[0]
  x = ml.load(x_ptr.at[offs], mask=mask, other=0.0)
  lo = ml.cast(x, jnp.bfloat16, fp_downcast_rounding="rtz")
  lo32 = lo.to(jnp.float32)
  away = (lo32.to(jnp.int32, bitcast=True) + 0x10000).to(jnp.float32, bitcast=True)
  frac = (x - lo32) / (away - lo32)
  u = ml.rand(seed, offs)
  y = ml.where(u < frac, away, lo32)
  ml.store(out.at[offs], y.to(jnp.bfloat16), mask=mask)


def _sr_rtz_ref(x, seed):
  from mgpu_dsl.frontend.ops.random import philox_reference
  bits = np.array([philox_reference(seed, 0, e)[0] for e in range(x.shape[0])], np.uint32).view(np.int32)
  u = np.where(bits < 0, ~bits, bits).astype(np.float32) * np.float32(4.6566127342e-10)
  lo32 = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
  away = (lo32.view(np.int32) + np.int32(0x10000)).view(np.float32)
  frac = (x - lo32) / (away - lo32)
  return bf16(np.where(u < frac, away, lo32))


case("stochastic_round_rtz_uniform", stochastic_round_rtz, lambda seed: ((rnd(seed, 1000), 5), {}), _sr_rtz_ref, 0)


# ---------------------------------------------------------------- Newton-Schulz of a tall matrix: transposed first
@mg.mgpu_kernel(out_shape=lambda g, **k: g, grid=(1,))
def muon_tall(g_ptr, out_ptr, *, steps: ml.constexpr = 2):
  a, b, c = NS
  x = g_ptr[...].astype(jnp.float32)
  tall = g_ptr.shape[0] > g_ptr.shape[1]
  if tall:
    x = x.T
  x = x / (jnp.sqrt(jnp.sum(x * x)) + 1e-7)
  xb = x.astype(jnp.bfloat16)
  for _ in range(steps):
    A = jnp.dot(xb, xb.T, preferred_element_type=jnp.float32)
    B = b * A + c * jnp.dot(A.astype(jnp.bfloat16), A.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
    xb = (a * xb.astype(jnp.float32) + jnp.dot(B.astype(jnp.bfloat16), xb, preferred_element_type=jnp.float32)
          ).astype(jnp.bfloat16)
  if tall:
    out_ptr[...] = xb.T
  else:
    out_ptr[...] = xb


case("muon_newton_schulz_tall_128x64", muon_tall, lambda seed: ((bf16(rnd(seed, (128, 64))),), {}),
     lambda g, steps=2: ns_reference(g, steps, tall=True),
     3e-2)


# ---------------------------------------------------------------- 8-bit blocks as rows of a 2-D tile
NB = 4


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int8), S((x.shape[0] // 256,), F32)),
                grid=lambda x: (x.shape[0] // (256 * NB),))
def quantize_blocks_2d(x_ptr, q_ptr, absmax_ptr):
  pid = ml.program_id(0)
  rows = pid * NB + ml.arange(NB)
  cols = ml.arange(256)
  x = ml.load(x_ptr.at[rows[:, None] * 256 + cols[None, :]])
  amax = ml.max(ml.abs(x), axis=1)
  q = ml.round(x / amax[:, None] * 127.0).to(jnp.int8)
  ml.store(q_ptr.at[rows[:, None] * 256 + cols[None, :]], q)
  ml.store(absmax_ptr.at[rows], amax)


def _qb2_ref(x):
  xb = x.reshape(-1, 256)
  amax = np.abs(xb).max(1)
  return np.round(xb / amax[:, None] * np.float32(127.0)).astype(np.int8).reshape(-1), amax


case("quantize_blocks_2d_tile", quantize_blocks_2d, lambda seed: ((rnd(seed, 4096),), {}), _qb2_ref, 0)


# ---------------------------------------------------------------- global norm over a list: total and per-tensor
@mg.mgpu_kernel(out_shape=lambda gs: (S((), F32), S((len(gs),), F32)), grid=(4,))
def multi_tensor_l2norm(gs, total, per_tensor):
  pid = ml.program_id(0)
  for t, g in enumerate(gs):
    acc = ml.zeros((256,), jnp.float32)
    for start in range(pid * 256, g.shape[0], ml.num_programs(0) * 256):
      offs = start + ml.arange(256)
      v = ml.load(g.at[offs], mask=offs < g.shape[0], other=0.0).to(jnp.float32)
      acc += v * v
    s = ml.sum(acc)
    ml.atomic_add(per_tensor.at[t], s)
    ml.atomic_add(total, s)


def _mtn_ref(gs):
  per = np.array([np.sum(f32(g).astype(np.float64) ** 2) for g in gs], np.float32)
  return np.float32(per.astype(np.float64).sum()), per


case("multi_tensor_l2norm_list", multi_tensor_l2norm,
     lambda seed: (([rnd(seed, 3000), bf16(rnd(seed + 1, 700)), rnd(seed + 2, 100)],), {}), _mtn_ref, 1e-5)


# ---------------------------------------------------------------- jnp / lax spellings of Adam inside a kernel
@mg.mgpu_kernel(out_shape=lambda p, g, m, v, *a: (p, m, v), grid=lambda p, *a: (p.shape[0] // 128,))
def adam_jnp_spelling(p_ref, g_ref, m_ref, v_ref, step: ml.scalar, p_out, m_out, v_out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  g = g_ref[r, :]
  m = jnp.add(0.9 * m_ref[r, :], 0.1 * g)
  v = 0.999 * v_ref[r, :] + 0.001 * jnp.square(g)
  t = step.astype(jnp.float32)
  mhat = m / (1.0 - jnp.power(0.9, t))
  vhat = v / (1.0 - jnp.power(0.999, t))
  upd = mhat * jax.lax.rsqrt(vhat + 1e-16)
  p_out[r, :] = jnp.where(jnp.isfinite(upd), p_ref[r, :] - 1e-3 * upd, p_ref[r, :])
  m_out[r, :] = m
  v_out[r, :] = v


def _adam_jnp_ref(p, g, m, v, step):
  m = 0.9 * m + 0.1 * g
  v = 0.999 * v + 0.001 * g * g
  upd = (m / (1 - 0.9 ** step)) / np.sqrt(v / (1 - 0.999 ** step) + 1e-16)
  return f32(p - 1e-3 * upd), f32(m), f32(v)


case("adam_jnp_lax_spelling", adam_jnp_spelling,
     lambda seed: ((rnd(seed, (256, 32)), rnd(seed + 1, (256, 32)), rnd(seed + 2, (256, 32), 0.1),
                    np.abs(rnd(seed + 3, (256, 32), 0.01)), 3), {}), _adam_jnp_ref, 2e-5)


# ---------------------------------------------------------------- gradient accumulation by TMA reduce-add
@mg.mgpu_kernel(out_shape=lambda acc, g: acc, grid=lambda acc, g: (acc.shape[0] // 64,), input_output_aliases={0: 0})
def grad_accum_tma_reduce(acc, g, acc_out):
  r = ml.ds(ml.program_id(0) * 64, 64)
  gs = ml.smem((64, g.shape[1]), g.dtype)
  fs = ml.smem((64, g.shape[1]), jnp.float32)
  ml.copy(g.at[r, :], gs)
  fs[...] = gs[...].astype(jnp.float32)
  ml.copy(fs, acc_out.at[r, :], reduce="add")


case("grad_accum_tma_reduce_add", grad_accum_tma_reduce,
     lambda seed: ((rnd(seed, (256, 64)), bf16(rnd(seed + 1, (256, 64)))), {}),
     lambda a, g: f32(a + f32(g)), 1e-6)


# ---------------------------------------------------------------- cross-entropy backward with upstream grads, z-loss
@mg.mgpu_kernel(out_shape=lambda x, y, dl, **k: x, grid=lambda x, *a, **k: (x.shape[0] // 4,))
def ce_backward_zloss(x_ptr, y_ptr, dloss_ptr, dx_ptr, *, smoothing: ml.constexpr = 0.05,
                      z_coef: ml.constexpr = 1e-4):
  rows = ml.program_id(0) * 4 + ml.arange(4)
  V = x_ptr.shape[1]
  cols = ml.arange(512)
  cm = cols[None, :] < V
  x = ml.load(x_ptr.at[rows[:, None], cols[None, :]], mask=cm, other=-float("inf")).to(jnp.float32)
  y = ml.load(y_ptr.at[rows])
  lse = ml.logsumexp(x, axis=1)
  p = ml.exp(x - lse[:, None])
  dl = ml.load(dloss_ptr.at[rows])
  target = ml.where(cols[None, :] == y[:, None], 1.0 - smoothing, 0.0) + smoothing / V
  dx = (p - target + 2.0 * z_coef * lse[:, None] * p) * dl[:, None]
  ml.store(dx_ptr.at[rows[:, None], cols[None, :]], dx.to(dx_ptr.dtype), mask=cm)


def _ceb_ref(x, y, dl, smoothing=0.05, z_coef=1e-4):
  x64 = f32(x).astype(np.float64)
  V = x.shape[1]
  m = x64.max(1, keepdims=True)
  lse = m + np.log(np.exp(x64 - m).sum(1, keepdims=True))
  p = np.exp(x64 - lse)
  t = np.full_like(x64, smoothing / V)
  t[np.arange(x.shape[0]), y] += 1 - smoothing
  return ((p - t + 2 * z_coef * lse * p) * dl[:, None]).astype(x.dtype)


case("ce_backward_zloss_v500", ce_backward_zloss,
     lambda seed: ((rnd(seed, (16, 500), 2.0), np.random.default_rng(seed).integers(0, 500, 16).astype(np.int32),
                    rnd(seed + 1, 16)), {}), _ceb_ref, 1e-5)


# ---------------------------------------------------------------- Kahan-compensated bf16 AdamW, AnyPrecision
@mg.mgpu_kernel(out_shape=lambda p, c, g, m, v, *a: (p, c, m, v), grid=_g, input_output_aliases={0: 0, 1: 1, 3: 2, 4: 3})
def adamw_kahan_bf16(p_ptr, comp_ptr, g_ptr, m_ptr, v_ptr, lr: ml.scalar, step: ml.scalar,
                     p_out, comp_out, m_out, v_out):
  offs = ml.program_id(0) * 512 + ml.arange(512)
  mask = offs < p_ptr.shape[0]
  p = ml.load(p_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32)
  comp = ml.load(comp_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32)
  g = ml.load(g_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32)
  m = (0.9 * ml.load(m_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32) + 0.1 * g)
  v = (0.999 * ml.load(v_ptr.at[offs], mask=mask, other=0.0).to(jnp.float32) + 0.001 * g * g)
  upd = lr * (m / (1 - 0.9 ** step)) / (ml.sqrt(v / (1 - 0.999 ** step)) + 1e-8) + lr * 0.01 * p
  exact = p - upd + comp
  p_new = exact.to(jnp.bfloat16)
  ml.store(p_out.at[offs], p_new, mask=mask)
  ml.store(comp_out.at[offs], (exact - p_new.to(jnp.float32)).to(jnp.bfloat16), mask=mask)
  ml.store(m_out.at[offs], m.to(jnp.bfloat16), mask=mask)
  ml.store(v_out.at[offs], v.to(jnp.bfloat16), mask=mask)


def _kahan_ref(p, c, g, m, v, lr, step):
  p, c, g, m, v = map(f32, (p, c, g, m, v))
  lr = np.float32(lr)
  m = np.float32(0.9) * m + np.float32(0.1) * g
  v = np.float32(0.999) * v + np.float32(0.001) * g * g
  upd = lr * (m / np.float32(1 - 0.9 ** step)) / (np.sqrt(v / np.float32(1 - 0.999 ** step)) + np.float32(1e-8)) \
      + lr * np.float32(0.01) * p
  exact = p - upd + c
  pn = bf16(exact)
  return pn, bf16(exact - f32(pn)), bf16(m), bf16(v)


case("adamw_kahan_bf16", adamw_kahan_bf16,
     lambda seed: ((bf16(rnd(seed, 1000)), bf16(rnd(seed + 1, 1000, 1e-3)), bf16(rnd(seed + 2, 1000)),
                    bf16(rnd(seed + 3, 1000, 0.1)), bf16(np.abs(rnd(seed + 4, 1000, 0.01))), 1e-3, 2), {}),
     _kahan_ref, 1e-2)


# ---------------------------------------------------------------- bitsandbytes' code table staged in SMEM, gathered
@mg.mgpu_kernel(out_shape=lambda q, a, code: S(q.shape, F32), grid=lambda q, a, code: (q.shape[0] // 256,))
def dequant_code_smem(q_ptr, absmax_ptr, code_ptr, out_ptr):
  b = ml.program_id(0)
  code_s = ml.smem((256,), jnp.float32)
  ml.copy(code_ptr, code_s)
  q = q_ptr.at[ml.ds(b * 256, 256)][...].astype(jnp.int32)
  out_ptr.at[ml.ds(b * 256, 256)][...] = code_s[q] * absmax_ptr[b]


def _dq_make(seed):
  r = np.random.default_rng(seed)
  return (r.integers(0, 256, 1024).astype(np.uint8), np.abs(rnd(seed, 4)) + 0.1,
          np.sort(r.uniform(-1, 1, 256)).astype(np.float32)), {}


# (MG003 when probe 69a ran, "only GMEM refs gather"; since probe 69b an SMEM buffer gathers: a case of the corpus)
case("dequant_code_table_smem_gather", dequant_code_smem, _dq_make,
     lambda q, a, code: f32(code[q.astype(np.int64)] * np.repeat(a, 256)), 0)


@mg.mgpu_kernel(out_shape=lambda q, a, code: S(q.shape, F32), grid=lambda q, a, code: (q.shape[0] // 256,))
def dequant_code_gmem(q_ptr, absmax_ptr, code_ptr, out_ptr):     # the same table gathered from GMEM
  b = ml.program_id(0)
  q = q_ptr.at[ml.ds(b * 256, 256)][...].astype(jnp.int32)
  out_ptr.at[ml.ds(b * 256, 256)][...] = code_ptr[q] * absmax_ptr[b]


case("dequant_code_table_gmem_gather", dequant_code_gmem, _dq_make,
     lambda q, a, code: f32(code[q.astype(np.int64)] * np.repeat(a, 256)), 0)


# ---------------------------------------------------------------- label-smoothed CE in jnp's words, odd vocabulary
@mg.mgpu_kernel(out_shape=lambda x, y, **k: S((x.shape[0],), F32), grid=(1,))
def ce_jnp_take_along(x_ref, y_ref, loss_ref, *, smoothing: ml.constexpr = 0.1):
  logp = jax.nn.log_softmax(x_ref[...].astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(logp, y_ref[...][:, None], axis=-1)[:, 0]
  loss_ref[...] = (1.0 - smoothing) * nll - smoothing * jnp.mean(logp, axis=-1)


def _ce_jnp_ref(x, y, smoothing=0.1):
  lp = np.asarray(jax.nn.log_softmax(f32(x).astype(np.float64), -1))
  return f32((1 - smoothing) * -np.take_along_axis(lp, y[:, None], -1)[:, 0] - smoothing * lp.mean(-1))


def _ce_jnp_make(v, dtype=np.float32):
  def make(seed):
    return (rnd(seed, (16, v), 3.0).astype(dtype), np.random.default_rng(seed).integers(0, v, 16).astype(np.int32)), {}
  return make


for _v in (100, 128, 1000):
  case(f"ce_jnp_take_along_axis_v{_v}", ce_jnp_take_along, _ce_jnp_make(_v), _ce_jnp_ref, 1e-5)


# ---------------------------------------------------------------- top-3 of a router's odd width, by index columns
@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, F32), grid=(1,))
def take_three_per_row(x_ref, i_ref, out):
  out[...] = ml.take_along_axis(x_ref[...] * 2.0, i_ref[...], axis=1)


case("take_along_three_per_row_odd_width", take_three_per_row,
     lambda seed: ((rnd(seed, (16, 60)), np.random.default_rng(seed).integers(0, 60, (16, 3)).astype(np.int32)), {}),
     lambda x, i: np.take_along_axis(x * np.float32(2), i, 1), 0)
