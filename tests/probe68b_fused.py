"""Probe 68b's corpus, its second half: FP8 GEMMs (per-tensor and DeepSeek-V3's 128x128 block scales, the per-token-
group quantise kernel, an fp8 output with its amax by atomics), fused dual GEMMs (SwiGLU), GEMM epilogues (bias + GELU
+ residual, row softmax, row RMS-norm), split-K (atomics; a workspace and a reduce kernel), a stream-K walk, grouped
GEMMs over ragged groups (MoE), LoRA and decode GEMVs, each with a NumPy reference. Same CASES form as
probe68b_quant.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68b_quant import E4M3, F16, F32, BF16, S, f32, pack_rows8, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def normal(r, shape, dtype, scale=1.0):
  return np.asarray(jnp.asarray(r.standard_normal(shape) * scale, dtype))


# ---------------------------------------------------------------- FP8, per-tensor scales (scalars in GMEM)
@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb, **k: S((a.shape[0], b.shape[0]), BF16),
                grid=lambda a, b, sa, sb, *, bm, bn, **k: (a.shape[0] // bm * (b.shape[0] // bn),))
def fp8_per_tensor(a, b, sa, sb, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
  i, j = ml.grouped_ids(ml.program_id(0), a.shape[0] // bm, b.shape[0] // bn, group=2)
  a_s, b_s = ml.smem((bm, bk), E4M3), ml.smem((bn, bk), E4M3)
  acc = ml.zeros((bm, bn), F32)
  for k in ml.range(a.shape[1] // bk, stages=2):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(b.at[ml.ds(j * bn, bn), ml.ds(k * bk, bk)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = (acc * (sa[0] * sb[0])).astype(BF16)


def _fp8_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 256), E4M3), normal(r, (128, 256), E4M3), np.array([0.5], np.float32),
          np.array([0.25], np.float32)), dict(bm=64, bn=64, bk=128)


case("fp8_per_tensor", fp8_per_tensor, _fp8_make,
     lambda a, b, sa, sb, **k: np.asarray(jnp.asarray((f32(a) @ f32(b).T) * (sa[0] * sb[0]), BF16)), 1e-2)


# ---------------------------------------------------------------- DeepSeek-V3: 1x128 activation groups, 128x128 weight blocks
@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb, **k: S((a.shape[0], b.shape[0]), BF16),
                grid=lambda a, b, sa, sb, *, BM, BN, **k: (ml.cdiv(a.shape[0], BM), b.shape[0] // BN))
def fp8_block_scaled(a, b, sa, sb, c, *, BM: ml.constexpr, BN: ml.constexpr):
  """a (m, k) fp8 with sa (m, k / 128); b (n, k) fp8 with sb (n / 128, k / 128); BK = 128, one scale a k step."""
  i, j = ml.program_id(0), ml.program_id(1)
  BK = 128
  a_s, b_s = ml.smem((BM, BK), E4M3), ml.smem((BN, BK), E4M3)
  rows = i * BM + ml.arange(0, BM)
  acc = ml.zeros((BM, BN), F32)
  for k in ml.range(a.shape[1] // BK, stages=2):
    ml.copy(a.at[ml.ds(i * BM, BM), ml.ds(k * BK, BK)], a_s)
    ml.copy(b.at[ml.ds(j * BN, BN), ml.ds(k * BK, BK)], b_s)
    s_a = ml.load(sa.at[rows, k], mask=rows < a.shape[0], other=0.0)
    s_b = sb[j * BN // 128, k]
    acc += ml.dot(a_s, b_s.T) * s_a[:, None] * s_b
  c.at[ml.ds(i * BM, BM), ml.ds(j * BN, BN)][...] = acc.astype(BF16)


def _block_make(seed):
  r = rng_of(seed)
  a, b = normal(r, (128, 384), E4M3), normal(r, (256, 384), E4M3)
  return (a, b, (r.random((128, 3)) + 0.5).astype(np.float32), (r.random((2, 3)) + 0.5).astype(np.float32)), \
      dict(BM=64, BN=128)


def _block_ref(a, b, sa, sb, **k):
  a, b = f32(a), f32(b)
  out = np.zeros((a.shape[0], b.shape[0]), np.float32)
  for kk in range(a.shape[1] // 128):
    part = a[:, kk * 128:(kk + 1) * 128] @ b[:, kk * 128:(kk + 1) * 128].T
    out += part * sa[:, kk:kk + 1] * np.repeat(sb[:, kk], 128)[None, :]
  return np.asarray(jnp.asarray(out, BF16))


case("fp8_deepseek_block_scaled", fp8_block_scaled, _block_make, _block_ref, 1e-2)


# ---------------------------------------------------------------- SGLang's per_token_group_quant_fp8 (group 128)
@mg.mgpu_kernel(out_shape=lambda x, **k: (S(x.shape, E4M3), S((x.shape[0], x.shape[1] // 128), F32)),
                grid=lambda x, *, ROWS, **k: (x.shape[0] // ROWS, x.shape[1] // 128))
def fp8_group_quant(x, q, s, *, ROWS: ml.constexpr):
  i, g = ml.program_id(0), ml.program_id(1)
  v = x.at[ml.ds(i * ROWS, ROWS), ml.ds(g * 128, 128)][...].astype(F32)
  amax = ml.maximum(ml.max(ml.abs(v), axis=1), 1e-10)
  scale = amax / 448.0
  q.at[ml.ds(i * ROWS, ROWS), ml.ds(g * 128, 128)][...] = ml.clamp(v / scale[:, None], -448.0, 448.0).astype(E4M3)
  s.at[ml.ds(i * ROWS, ROWS), g][...] = scale


def _gq_make(seed):
  return (normal(rng_of(seed), (64, 256), BF16, 3.0),), dict(ROWS=16)


def _gq_ref(x, **k):
  v = jnp.asarray(x, F32).reshape(64, 2, 128)
  s = jnp.maximum(jnp.abs(v).max(2), 1e-10) / 448.0
  q = np.clip(np.asarray(v) / np.asarray(s)[:, :, None], -448, 448)       # IEEE quotients, as interpret mode's
  return np.asarray(jnp.asarray(q.reshape(64, 256), E4M3)), np.asarray(s)


case("fp8_per_token_group_quant", fp8_group_quant, _gq_make, _gq_ref, 0)


# ---------------------------------------------------------------- fp8 output and its amax, by atomics (delayed scaling)
@mg.mgpu_kernel(out_shape=lambda a, b, sc, **k: (S((a.shape[0], b.shape[1]), E4M3), S((1,), F32)),
                grid=lambda a, b, sc, *, bm, bn, **k: (a.shape[0] // bm, b.shape[1] // bn))
def gemm_fp8_out_amax(a, b, sc, c, amax, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), BF16)
  acc = ml.zeros((bm, bn), F32)
  for k in ml.range(a.shape[1] // bk, stages=2):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(b.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  ml.atomic_max(amax.at[0], ml.max(ml.abs(acc)))
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = ml.clamp(acc * sc[0], -448.0, 448.0).astype(E4M3)


def _amax_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 128), BF16), normal(r, (128, 128), BF16), np.array([4.0], np.float32)), \
      dict(bm=64, bn=64, bk=64)


def _amax_ref(a, b, sc, **k):
  y = f32(a) @ f32(b)
  return np.asarray(jnp.asarray(np.clip(y * sc[0], -448, 448), E4M3)), np.array([np.abs(y).max()], np.float32)


case("gemm_fp8_out_amax_atomic", gemm_fp8_out_amax, _amax_make, _amax_ref, 1e-5)


# ---------------------------------------------------------------- SwiGLU: silu(x @ w_gate) * (x @ w_up), one kernel
@mg.mgpu_kernel(out_shape=lambda x, wg, wu, **k: S((x.shape[0], wg.shape[1]), BF16),
                grid=lambda x, wg, wu, *, bm, bn, **k: (x.shape[0] // bm, wg.shape[1] // bn))
def swiglu(x, wg, wu, o, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, WS: ml.constexpr = False):
  """WS: the loop warp-specialised (a producer warpgroup issues the three loads three trips ahead)."""
  i, j = ml.program_id(0), ml.program_id(1)
  x_s, g_s, u_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), BF16), ml.smem((bk, bn), BF16)
  gate = ml.zeros((bm, bn), F32)
  up = ml.zeros((bm, bn), F32)
  for k in ml.range(x.shape[1] // bk, stages=3 if WS else 2, warp_specialize=WS):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(wg.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], g_s)
    ml.copy(wu.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], u_s)
    gate = ml.dot(x_s, g_s, gate)
    up = ml.dot(x_s, u_s, up)
  o.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = (jax.nn.silu(gate) * up).astype(BF16)


def _swiglu_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 256), BF16), normal(r, (256, 128), BF16, 0.1), normal(r, (256, 128), BF16, 0.1)), \
      dict(bm=64, bn=64, bk=64)


def _swiglu_ref(x, wg, wu, **k):
  g, u = f32(x) @ f32(wg), f32(x) @ f32(wu)
  return np.asarray(jnp.asarray(g / (1 + np.exp(-g)) * u, BF16))


case("swiglu_dual_gemm", swiglu, _swiglu_make, _swiglu_ref, 1e-2)
case("swiglu_dual_gemm_warp_specialized", swiglu, lambda seed: (_swiglu_make(seed)[0], dict(bm=64, bn=64, bk=64, WS=True)),
     _swiglu_ref, 1e-2)


@mg.mgpu_kernel(out_shape=lambda x, w, **k: S((x.shape[0], w.shape[1] // 2), F16),
                grid=lambda x, w, *, BM, BN, **k: (ml.cdiv(x.shape[0], BM), w.shape[1] // 2 // BN))
def swiglu_packed(x_ptr, w_ptr, o_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
  """Triton style, gate and up packed side by side in one (k, 2 n) weight, both tiles loaded with pointers."""
  M, K = x_ptr.shape
  N = o_ptr.shape[1]
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  acc_g = ml.zeros((BM, BN), F32)
  acc_u = ml.zeros((BM, BN), F32)
  for k in range(0, K, BK):
    rk = k + ml.arange(0, BK)
    xt = ml.load(x_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0.0)
    acc_g = ml.dot(xt, ml.load(w_ptr.at[rk[:, None], rn[None, :]]), acc_g)
    acc_u = ml.dot(xt, ml.load(w_ptr.at[rk[:, None], (rn + N)[None, :]]), acc_u)
  y = acc_g * ml.sigmoid(acc_g) * acc_u
  ml.store(o_ptr.at[rm[:, None], rn[None, :]], y.to(F16), mask=rm[:, None] < M)


def _swp_make(seed):
  r = rng_of(seed)
  return (normal(r, (50, 128), F16), normal(r, (128, 256), F16, 0.1)), dict(BM=64, BN=64, BK=64)


def _swp_ref(x, w, **k):
  y = f32(x) @ f32(w)
  g, u = y[:, :128], y[:, 128:]
  return np.asarray(jnp.asarray(g / (1 + np.exp(-g)) * u, F16))


case("swiglu_packed_pointer_loads", swiglu_packed, _swp_make, _swp_ref, 1e-2)


# ---------------------------------------------------------------- epilogues: bias + GELU + residual
def _epi_kernel(approximate):
  @mg.mgpu_kernel(out_shape=lambda x, w, bias, res, **k: S(res.shape, BF16),
                  grid=lambda x, w, bias, res, *, bm, bn, **k: (x.shape[0] // bm, w.shape[1] // bn))
  def gemm_bias_gelu_residual(x, w, bias, res, o, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
    i, j = ml.program_id(0), ml.program_id(1)
    x_s, w_s, r_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), BF16), ml.smem((bm, bn), BF16)
    ml.copy(res.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)], r_s)
    acc = ml.zeros((bm, bn), F32)
    for k in ml.range(x.shape[1] // bk, stages=2):
      ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
      ml.copy(w.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], w_s)
      acc = ml.dot(x_s, w_s, acc)
    y = acc + bias.at[ml.ds(j * bn, bn)][...].astype(F32)[None, :]
    y = jax.nn.gelu(y, approximate=approximate) + r_s[...].astype(F32)
    o.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = y.astype(BF16)
  return gemm_bias_gelu_residual


def _epi_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 128), BF16), normal(r, (128, 128), BF16, 0.1), normal(r, (128,), BF16),
          normal(r, (128, 128), BF16)), dict(bm=64, bn=64, bk=64)


def _epi_ref(approximate):
  def ref(x, w, bias, res, **k):
    y = jnp.asarray(f32(x) @ f32(w) + f32(bias)[None, :])
    return np.asarray((jax.nn.gelu(y, approximate=approximate) + jnp.asarray(res, F32)).astype(BF16))
  return ref


case("epilogue_bias_gelu_tanh_residual", _epi_kernel(True), _epi_make, _epi_ref(True), 1e-2)
case("epilogue_bias_gelu_erf_residual", _epi_kernel(False), _epi_make, _epi_ref(False), 1e-2)


# ---------------------------------------------------------------- epilogues over whole rows: softmax, RMS-norm
@mg.mgpu_kernel(out_shape=lambda x, w, **k: S((x.shape[0], w.shape[1]), F32),
                grid=lambda x, w, *, bm, **k: (x.shape[0] // bm,))
def gemm_row_softmax(x, w, o, *, bm: ml.constexpr, bk: ml.constexpr):
  i = ml.program_id(0)
  n = w.shape[1]
  x_s, w_s = ml.smem((bm, bk), F16), ml.smem((bk, n), F16)
  acc = ml.zeros((bm, n), F32)
  for k in ml.range(x.shape[1] // bk):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(w.at[ml.ds(k * bk, bk), :], w_s)
    acc = ml.dot(x_s, w_s, acc)
  m = ml.max(acc, axis=1)
  p = ml.exp(acc - m[:, None])
  o.at[ml.ds(i * bm, bm)][...] = p / ml.sum(p, axis=1)[:, None]


def _sm_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 128), F16), normal(r, (128, 128), F16, 0.2)), dict(bm=64, bk=64)


def _sm_ref(x, w, **k):
  y = f32(x) @ f32(w)
  p = np.exp(y - y.max(1, keepdims=True))
  return p / p.sum(1, keepdims=True)


case("epilogue_row_softmax", gemm_row_softmax, _sm_make, _sm_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, w, g, **k: S((x.shape[0], w.shape[1]), BF16),
                grid=lambda x, w, g, *, bm, **k: (x.shape[0] // bm,), block=256)
def gemm_row_rmsnorm(x, w, g, o, *, bm: ml.constexpr, bk: ml.constexpr, eps: ml.constexpr = 1e-6):
  i = ml.program_id(0)
  n = w.shape[1]
  x_s, w_s = ml.smem((bm, bk), BF16), ml.smem((bk, n), BF16)
  acc = ml.zeros((bm, n), F32)
  for k in ml.range(x.shape[1] // bk, stages=2):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(w.at[ml.ds(k * bk, bk), :], w_s)
    acc = ml.dot(x_s, w_s, acc)
  rstd = ml.rsqrt(ml.mean(acc * acc, axis=1) + eps)
  o.at[ml.ds(i * bm, bm)][...] = (acc * rstd[:, None] * g[...].astype(F32)[None, :]).astype(BF16)


def _rms_make(seed):
  r = rng_of(seed)
  return (normal(r, (256, 128), BF16), normal(r, (128, 256), BF16, 0.1), normal(r, (256,), BF16)), \
      dict(bm=128, bk=64)


def _rms_ref(x, w, g, **k):
  y = f32(x) @ f32(w)
  return np.asarray(jnp.asarray(y / np.sqrt((y * y).mean(1, keepdims=True) + 1e-6) * f32(g)[None], BF16))


case("epilogue_row_rmsnorm_block256", gemm_row_rmsnorm, _rms_make, _rms_ref, 1e-2)


# ---------------------------------------------------------------- split-K: atomics into float32; a workspace and a reduce
def _splitk_out(a, b, *, SPLIT, WORKSPACE=False, **k):
  return S((SPLIT, a.shape[0], b.shape[1]) if WORKSPACE else (a.shape[0], b.shape[1]), F32)


@mg.mgpu_kernel(out_shape=_splitk_out,
                grid=lambda a, b, *, bm, bn, SPLIT, **k: (a.shape[0] // bm, b.shape[1] // bn, SPLIT))
def splitk(a, b, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, SPLIT: ml.constexpr,
           WORKSPACE: ml.constexpr = False):
  """Program (i, j, s) sums the s-th of SPLIT runs of k steps of tile (i, j): added atomically into c, or stored
  into the workspace c[s] that a second kernel reduces."""
  i, j, s = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  steps = a.shape[1] // bk // SPLIT
  a_s, b_s = ml.smem((bm, bk), F16), ml.smem((bk, bn), F16)
  acc = ml.zeros((bm, bn), F32)
  for t in ml.range(steps, stages=2):
    k = s * steps + t
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(b.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  if WORKSPACE:
    c.at[s, ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = acc
  else:
    ml.atomic_add(c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)], acc)


def _sk_make(seed):
  r = rng_of(seed)
  return (normal(r, (64, 512), F16), normal(r, (512, 128), F16)), dict(bm=64, bn=64, bk=64, SPLIT=4)


case("splitk_atomic_add_f32", splitk, _sk_make, lambda a, b, **k: f32(a) @ f32(b), 1e-5)


@mg.mgpu_kernel(out_shape=lambda ws, **k: S(ws.shape[1:], F16), grid=lambda ws, *, BM, **k: (ws.shape[1] // BM,))
def splitk_reduce(ws_ptr, c_ptr, *, BM: ml.constexpr):
  SPLIT, M, N = ws_ptr.shape
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.arange(0, N)
  acc = ml.zeros((BM, N), F32)
  for s in range(SPLIT):
    acc += ml.load(ws_ptr.at[s, rm[:, None], rn[None, :]])
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], acc.to(F16))


def splitk_two_kernels(a, b, *, bm, bn, bk, SPLIT, interpret=None):
  ws = splitk(a, b, bm=bm, bn=bn, bk=bk, SPLIT=SPLIT, WORKSPACE=True, interpret=interpret)
  return splitk_reduce(ws, BM=16, interpret=interpret)


case("splitk_workspace_then_reduce_kernel", splitk_two_kernels, _sk_make,
     lambda a, b, **k: np.asarray(jnp.asarray(f32(a) @ f32(b), F16)), 1e-2)


# ---------------------------------------------------------------- stream-K: each program a run of (tile, k-step) iterations
@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b, *, P, **k: (P,))
def stream_k(a, b, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, P: ml.constexpr):
  tiles_n = b.shape[1] // bn
  ksteps = a.shape[1] // bk
  total = a.shape[0] // bm * tiles_n * ksteps
  per = ml.cdiv(total, P)
  pid = ml.program_id(0)
  it, end = pid * per, ml.minimum(pid * per + per, total)
  a_s, b_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), BF16)
  while it < end:
    tile = it // ksteps
    k0 = it % ksteps
    k1 = ml.minimum(ksteps, k0 + end - it)
    i, j = tile // tiles_n, tile % tiles_n
    acc = ml.zeros((bm, bn), F32)
    for k in range(k0, k1):
      ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
      ml.copy(b.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], b_s)
      acc = ml.dot(a_s, b_s, acc)
    ml.atomic_add(c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)], acc)
    it += k1 - k0


def _stk_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 320), BF16), normal(r, (320, 128), BF16)), dict(bm=64, bn=64, bk=64, P=3)


case("stream_k_walk", stream_k, _stk_make, lambda a, b, **k: f32(a) @ f32(b), 1e-5)


# ---------------------------------------------------------------- grouped GEMM over ragged groups (MoE expert offsets)
@ml.inline
def expert_rows_dot(x_ptr, w_ptr, e, rm, stop, BK):
  """x's rows rm (those below `stop`) times expert e's (k, n) weights, in float32; the weights converted to x's
  dtype (an int8 expert's)."""
  acc = ml.zeros((rm.shape[0], w_ptr.shape[2]), F32)
  rn = ml.arange(0, w_ptr.shape[2])
  for k in range(0, w_ptr.shape[1], BK):
    rk = k + ml.arange(0, BK)
    xa = ml.load(x_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < stop, other=0.0)
    acc = ml.dot(xa, ml.load(w_ptr.at[e, rk[:, None], rn[None, :]]).to(x_ptr.dtype), acc)
  return acc


@mg.mgpu_kernel(out_shape=lambda x, w, offs, **k: S((x.shape[0], w.shape[2]), F32),
                grid=lambda x, w, offs, *, BM, **k: (w.shape[0], ml.cdiv(x.shape[0], BM)))
def grouped_gemm(x_ptr, w_ptr, offs_ptr, o_ptr, *, BM: ml.constexpr, BK: ml.constexpr):
  """offs (E + 1,): expert e's tokens are rows offs[e]:offs[e + 1] of x (sorted by expert). Program (e, t) does the
  t-th BM-row tile of expert e's rows, if it has one."""
  e, t = ml.program_id(0), ml.program_id(1)
  start, stop = offs_ptr[e], offs_ptr[e + 1]
  if start + t * BM < stop:
    rm = start + t * BM + ml.arange(0, BM)
    rn = ml.arange(0, w_ptr.shape[2])
    ml.store(o_ptr.at[rm[:, None], rn[None, :]], expert_rows_dot(x_ptr, w_ptr, e, rm, stop, BK),
             mask=rm[:, None] < stop)


def _gg_make(seed):
  r = rng_of(seed)
  sizes = np.array([20, 0, 70, 38])
  offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
  return (normal(r, (128, 64), BF16), normal(r, (4, 64, 64), BF16, 0.2), offs), dict(BM=64, BK=64)


def _gg_ref(x, w, offs, **k):
  out = np.zeros((x.shape[0], w.shape[2]), np.float32)
  for e in range(w.shape[0]):
    out[offs[e]:offs[e + 1]] = f32(x[offs[e]:offs[e + 1]]) @ f32(w[e])
  return out


case("grouped_gemm_ragged_offsets", grouped_gemm, _gg_make, _gg_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, w, tw, st, eid, **k: S((tw.shape[0], w.shape[1]), F32),
                grid=lambda x, w, tw, st, eid, *, BM, BN, **k: (st.shape[0] // BM, w.shape[1] // BN))
def fused_moe(a_ptr, b_ptr, topk_w_ptr, sorted_ids_ptr, expert_ids_ptr, c_ptr, *, BM: ml.constexpr,
              BN: ml.constexpr, BK: ml.constexpr, top_k: ml.constexpr):
  """vLLM's fused_moe: sorted_ids lists the (token, slot) pairs t * top_k + s grouped by expert, padded with
  num_valid (a pad id) to BM per expert; expert_ids gives each BM block's expert; b (E, N, K) is K-major."""
  num_valid = topk_w_ptr.shape[0]
  K = a_ptr.shape[1]
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  offs_token = ml.load(sorted_ids_ptr.at[pid_m * BM + ml.arange(0, BM)])
  token_mask = offs_token < num_valid
  expert = expert_ids_ptr[pid_m]
  offs_bn = pid_n * BN + ml.arange(0, BN)
  acc = ml.zeros((BM, BN), F32)
  for k in range(0, K, BK):
    offs_k = k + ml.arange(0, BK)
    a = ml.load(a_ptr.at[(offs_token // top_k)[:, None], offs_k[None, :]], mask=token_mask[:, None], other=0.0)
    b = ml.load(b_ptr.at[expert, offs_bn[None, :], offs_k[:, None]])
    acc += ml.dot(a, b)
  w = ml.load(topk_w_ptr.at[offs_token], mask=token_mask, other=0.0)
  acc = acc * w[:, None]
  ml.store(c_ptr.at[offs_token[:, None], offs_bn[None, :]], acc, mask=token_mask[:, None])


def _moe_make(seed):
  r = rng_of(seed)
  T, top_k, E, BM = 24, 2, 4, 64
  experts = np.stack([r.choice(E, top_k, replace=False) for _ in range(T)])
  flat = experts.reshape(-1)
  sorted_ids, expert_ids = [], []
  for e in range(E):
    ids = list(np.nonzero(flat == e)[0])
    if not ids:
      continue
    ids += [T * top_k] * (-len(ids) % BM)
    sorted_ids += ids
    expert_ids += [e] * (len(ids) // BM)
  args = (normal(r, (T, 128), F16), normal(r, (E, 64, 128), F16, 0.1), r.random(T * top_k).astype(np.float32),
          np.array(sorted_ids, np.int32), np.array(expert_ids, np.int32))
  return args, dict(BM=BM, BN=64, BK=64, top_k=top_k)


def _moe_ref(x, w, tw, st, eid, *, top_k, **k):
  out = np.zeros((tw.shape[0], w.shape[1]), np.float32)
  for b, e in enumerate(eid):
    for p in st[b * 64:(b + 1) * 64]:
      if p < tw.shape[0]:
        out[p] = (f32(x[p // top_k]) @ f32(w[e]).T) * tw[p]
  return out


case("fused_moe_sorted_token_ids", fused_moe, _moe_make, _moe_ref, 1e-5)


# ---------------------------------------------------------------- LoRA: base GEMM plus (x @ A) @ B, rank 16
@mg.mgpu_kernel(out_shape=lambda x, w, la, lb, **k: S((x.shape[0], w.shape[1]), BF16),
                grid=lambda x, w, la, lb, *, bm, bn, **k: (x.shape[0] // bm, w.shape[1] // bn))
def lora_fused(x, w, la, lb, o, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, scale: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  r = la.shape[1]
  x_s, w_s, a_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), BF16), ml.smem((bk, r), BF16)
  b_s = ml.smem((r, bn), BF16)
  ml.copy(lb.at[:, ml.ds(j * bn, bn)], b_s)
  acc = ml.zeros((bm, bn), F32)
  t = ml.zeros((bm, r), F32)
  for k in ml.range(x.shape[1] // bk, stages=2):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(w.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], w_s)
    ml.copy(la.at[ml.ds(k * bk, bk), :], a_s)
    acc = ml.dot(x_s, w_s, acc)
    t = ml.dot(x_s, a_s, t)
  acc = ml.dot((t * scale).astype(BF16), b_s, acc)
  o.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = acc.astype(BF16)


def _lora_make(rank):
  def make(seed):
    r = rng_of(seed)
    return (normal(r, (128, 256), BF16), normal(r, (256, 128), BF16, 0.1), normal(r, (256, rank), BF16, 0.1),
            normal(r, (rank, 128), BF16, 0.1)), dict(bm=64, bn=64, bk=64, scale=0.5)
  return make


def _lora_ref(x, w, la, lb, *, scale, **k):
  t = np.asarray(jnp.asarray((f32(x) @ f32(la)) * scale, BF16))
  return np.asarray(jnp.asarray(f32(x) @ f32(w) + f32(t) @ f32(lb), BF16))


for _r in (8, 16, 64):
  case(f"lora_fused_rank{_r}", lora_fused, _lora_make(_r), _lora_ref, 1e-2)


@mg.mgpu_kernel(out_shape=lambda x, la, **k: S((x.shape[0], la.shape[1]), F32),
                grid=lambda x, la, *, BM, **k: (ml.cdiv(x.shape[0], BM),))
def lora_shrink(x_ptr, a_ptr, t_ptr, *, BM: ml.constexpr, BK: ml.constexpr):
  """punica's sgmv shrink: t = x @ A (rank 8: n of 8, a dot the tensor cores pad)."""
  acc = ml.zeros((BM, a_ptr.shape[1]), F32)
  M, K = x_ptr.shape
  rm, rr = ml.program_id(0) * BM + ml.arange(0, BM), ml.arange(0, a_ptr.shape[1])
  for k in range(0, K, BK):
    rk = k + ml.arange(0, BK)
    acc += ml.dot(ml.load(x_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0.0),
                  ml.load(a_ptr.at[rk[:, None], rr[None, :]]))
  ml.store(t_ptr.at[rm[:, None], rr[None, :]], acc, mask=rm[:, None] < M)


def _shrink_make(seed):
  r = rng_of(seed)
  return (normal(r, (30, 128), F16), normal(r, (128, 8), F16, 0.1)), dict(BM=64, BK=64)


case("lora_shrink_rank8", lora_shrink, _shrink_make, lambda x, a, **k: f32(x) @ f32(a), 1e-5)


# ---------------------------------------------------------------- decode GEMVs: batch 1-8, memory-bound
@mg.mgpu_kernel(out_shape=lambda x, w, **k: S((x.shape[0], w.shape[0]), F32),
                grid=lambda x, w, *, BN, **k: (w.shape[0] // BN,))
def gemv_bf16(x_ptr, w_ptr, y_ptr, *, BN: ml.constexpr, BK: ml.constexpr):
  """y = x @ w.T for a few tokens, w (n, k) row-major: each program BN rows of w, a k loop of products summed."""
  B, K = x_ptr.shape
  rn = ml.program_id(0) * BN + ml.arange(0, BN)
  for b in ml.static_range(B):
    acc = ml.zeros((BN,), F32)
    for k in range(0, K, BK):
      rk = k + ml.arange(0, BK)
      w = ml.load(w_ptr.at[rn[:, None], rk[None, :]]).to(F32)
      xv = ml.load(x_ptr.at[b, rk]).to(F32)
      acc += ml.sum(w * xv[None, :], axis=1)
    ml.store(y_ptr.at[b, rn], acc)


def _gemv_make(b):
  def make(seed):
    r = rng_of(seed)
    return (normal(r, (b, 256), BF16), normal(r, (128, 256), BF16)), dict(BN=32, BK=128)
  return make


for _b in (1, 3):
  case(f"gemv_bf16_batch{_b}", gemv_bf16, _gemv_make(_b), lambda x, w, **k: f32(x) @ f32(w).T, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, qw, s, **k: S((x.shape[0], qw.shape[1]), F16),
                grid=lambda x, qw, s, *, BN, **k: (qw.shape[1] // BN,))
def gemv_int4(x_ptr, qw_ptr, s_ptr, y_ptr, *, BN: ml.constexpr, BK: ml.constexpr, group: ml.constexpr):
  """Decode with GPTQ-packed int4 weights (k // 8, n), symmetric, per-group scales: the batch of B tokens a (B, BK)
  tile; each k step's weights unpacked once and used by every token."""
  B, K = x_ptr.shape
  rn = ml.program_id(0) * BN + ml.arange(0, BN)
  rb = ml.arange(0, B)
  acc = ml.zeros((B, BN), F32)
  for k in range(0, K, BK):
    rk = k + ml.arange(0, BK)
    p = ml.load(qw_ptr.at[(rk // 8)[:, None], rn[None, :]])
    q = ((p >> ((rk % 8) * 4)[:, None]) & 0xF) - 8
    s = ml.load(s_ptr.at[k // group, rn])
    w = q.to(F32) * s[None, :].to(F32)                          # (BK, BN)
    xv = ml.load(x_ptr.at[rb[:, None], rk[None, :]]).to(F32)     # (B, BK)
    acc += ml.sum(xv[:, :, None] * w[None, :, :], axis=1)
  ml.store(y_ptr.at[rb[:, None], rn[None, :]], acc.to(F16))


def _gi4_make(b):
  def make(seed):
    r = rng_of(seed)
    q = r.integers(0, 16, (256, 128))
    s = np.asarray(jnp.asarray(r.random((2, 128)) * 0.02 + 0.01, F16))
    return (normal(r, (b, 256), F16), pack_rows8(q), s), dict(BN=32, BK=32, group=128)
  return make


def _gi4_ref(x, qw, s, **k):
  q = np.stack([(qw.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 1).reshape(-1, qw.shape[1])
  w = (q.astype(np.float32) - 8) * np.repeat(f32(s), 128, 0)
  return np.asarray(jnp.asarray(f32(x) @ w, F16))


for _b in (1, 4, 8):
  case(f"gemv_int4_batch{_b}", gemv_int4, _gi4_make(_b), _gi4_ref, 1e-2)


@mg.mgpu_kernel(out_shape=lambda x, w, s, **k: S((x.shape[0], w.shape[0]), F32),
                grid=lambda x, w, s, *, BN, **k: (w.shape[0] // BN,))
def gemv_int8(x, w, s, y, *, BN: ml.constexpr):
  """W8A16 decode through TMA-free register reads: w (n, k) int8 rows, per-channel scales, batch of 8 tokens."""
  j = ml.program_id(0)
  wt = w.at[ml.ds(j * BN, BN), :][...].astype(F32)          # (BN, K)
  for b in ml.static_range(x.shape[0]):
    xv = x.at[b, :][...].astype(F32)
    y.at[b, ml.ds(j * BN, BN)][...] = ml.sum(wt * xv[None, :], axis=1) * s.at[ml.ds(j * BN, BN)][...]


def _gi8_make(seed):
  r = rng_of(seed)
  return (normal(r, (8, 256), BF16), r.integers(-128, 128, (128, 256)).astype(np.int8),
          (r.random(128) * 0.01).astype(np.float32)), dict(BN=16)


case("gemv_int8_batch8", gemv_int8, _gi8_make, lambda x, w, s, **k: (f32(x) @ f32(w).T) * s[None, :], 1e-5)
