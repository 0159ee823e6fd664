"""Probe 68b's corpus, its third part: more formats and fusions (W4A8 with an int8 tensor-core dot, FP8 weight-only,
e5m2, a dynamic per-tensor FP8 quantiser's amax pass, DeepGEMM's transposed activation scales, a GEMM with a fused
per-row FP8 quantise epilogue, int8 split-K into int32 atomics, an int8-weight MoE, LoRA's expand with per-token
adapters, the GPTQ dequantise kernel and Marlin-style N-packed words). Same CASES form as probe68b_quant.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68b_quant import BF16, E4M3, E5M2, F16, F32, I32, I8, S, f32, pack_cols8, pack_rows8, rng_of
from probe68b_fused import expert_rows_dot, normal

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def unpack_rows8(qw):
  return np.stack([(qw.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 1).reshape(-1, qw.shape[1])


def unpack_cols8(p):
  return np.stack([(p.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 2).reshape(p.shape[0], -1)


# ---------------------------------------------------------------- W4A8 (QServe-like): int4 weights widened to int8, int32 dot
@mg.mgpu_kernel(out_shape=lambda a, qw, sa, sw, **k: S((a.shape[0], qw.shape[0]), F16),
                grid=lambda a, qw, sa, sw, *, bm, bn, **k: (a.shape[0] // bm, qw.shape[0] // bn))
def w4a8(a, qw, sa, sw, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
  """a (m, k) int8 per-token; qw (n, k // 8) int32, eight k-consecutive nibbles a word, symmetric (zero 8)."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, w_s = ml.smem((bm, bk), I8), ml.smem((bn, bk), I8)
  shifts = (ml.arange(0, bk) % 8) * 4
  acc = ml.zeros((bm, bn), I32)
  for k in ml.range(a.shape[1] // bk):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    words = qw.at[ml.ds(j * bn, bn), ml.ds(k * (bk // 8), bk // 8)][...]
    q = ((ml.repeat(words, 8, axis=1) >> shifts[None, :]) & 0xF) - 8
    w_s[...] = q.astype(I8)
    acc = ml.dot(a_s, w_s.T, acc)
  y = acc.astype(F32) * sa.at[ml.ds(i * bm, bm)][...][:, None] * sw.at[ml.ds(j * bn, bn)][...][None, :]
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = y.astype(F16)


def _w4a8_make(seed):
  r = rng_of(seed)
  q = r.integers(0, 16, (128, 256))
  return (r.integers(-128, 128, (64, 256)).astype(np.int8), pack_cols8(q), (r.random(64) * 0.01).astype(np.float32),
          (r.random(128) * 0.01).astype(np.float32)), dict(bm=64, bn=64, bk=64)


def _w4a8_ref(a, qw, sa, sw, **k):
  w = unpack_cols8(qw).astype(np.int64) - 8
  acc = a.astype(np.int64) @ w.T
  return np.asarray(jnp.asarray(acc.astype(np.float32) * sa[:, None] * sw[None, :], F16))


case("w4a8_int8_dot", w4a8, _w4a8_make, _w4a8_ref, 1e-2)


# ---------------------------------------------------------------- FP8 weight-only (W8A16 with e4m3 weights), per-channel
@mg.mgpu_kernel(out_shape=lambda a, w, s, **k: S((a.shape[0], w.shape[1]), BF16),
                grid=lambda a, w, s, *, bm, bn, **k: (a.shape[0] // bm, w.shape[1] // bn))
def fp8_weight_only(a, w, s, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, w_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), BF16)
  acc = ml.zeros((bm, bn), F32)
  for k in ml.range(a.shape[1] // bk):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    w_s[...] = w.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)][...].astype(BF16)
    acc = ml.dot(a_s, w_s, acc)
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = (acc * s.at[ml.ds(j * bn, bn)][...][None, :]).astype(BF16)


def _fwo_make(seed):
  r = rng_of(seed)
  return (normal(r, (64, 256), BF16), normal(r, (256, 128), E4M3), (r.random(128) * 0.05).astype(np.float32)), \
      dict(bm=64, bn=64, bk=64)


case("fp8_weight_only_bf16_act", fp8_weight_only, _fwo_make,
     lambda a, w, s, **k: np.asarray(jnp.asarray((f32(a) @ f32(w)) * s[None, :], BF16)), 1e-2)


@mg.mgpu_kernel(out_shape=lambda a, b, *, ACC=F32: S((a.shape[0], b.shape[0]), ACC),
                grid=lambda a, b, **k: (a.shape[0] // 64, b.shape[0] // 64))
def fp8_tiles(a, b, c, *, ACC: ml.constexpr = F32):
  """a (m, k) @ b (n, k).T of 8-bit floats into an ACC accumulator (float32, or float16), stored as it is."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64), a.dtype), ml.smem((64, 64), b.dtype)
  acc = ml.zeros((64, 64), ACC)
  for k in ml.range(a.shape[1] // 64):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(j * 64, 64), ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


def _e5_make(seed):
  r = rng_of(seed)
  return (normal(r, (64, 128), E5M2), normal(r, (128, 128), E5M2)), {}


case("fp8_e5m2_gemm", fp8_tiles, _e5_make, lambda a, b: f32(a) @ f32(b).T, 1e-5)


# ---------------------------------------------------------------- dynamic per-tensor FP8: the amax pass, then the scaled cast
@mg.mgpu_kernel(out_shape=lambda x, **k: S((1,), F32), grid=lambda x, *, BM, **k: (ml.cdiv(x.shape[0], BM),))
def amax_pass(x_ptr, amax_ptr, *, BM: ml.constexpr):
  M, N = x_ptr.shape
  rows = ml.program_id(0) * BM + ml.arange(0, BM)
  cols = ml.arange(0, N)
  x = ml.load(x_ptr.at[rows[:, None], cols[None, :]], mask=rows[:, None] < M, other=0.0).to(F32)
  ml.atomic_max(amax_ptr.at[0], ml.max(ml.abs(x)))


@mg.mgpu_kernel(out_shape=lambda x, amax, **k: S(x.shape, E4M3), grid=lambda x, amax, *, BM, **k: (ml.cdiv(x.shape[0], BM),))
def scaled_cast(x_ptr, amax_ptr, q_ptr, *, BM: ml.constexpr):
  M, N = x_ptr.shape
  rows = ml.program_id(0) * BM + ml.arange(0, BM)
  cols = ml.arange(0, N)
  scale = 448.0 / ml.maximum(amax_ptr[0], 1e-12)
  x = ml.load(x_ptr.at[rows[:, None], cols[None, :]], mask=rows[:, None] < M, other=0.0).to(F32)
  ml.store(q_ptr.at[rows[:, None], cols[None, :]], (x * scale).to(E4M3), mask=rows[:, None] < M)


def dynamic_fp8(x, *, BM, interpret=None):
  amax = amax_pass(x, BM=BM, interpret=interpret)
  return scaled_cast(x, amax, BM=BM, interpret=interpret), amax


def _dyn_make(seed):
  return (normal(rng_of(seed), (50, 128), BF16, 2.0),), dict(BM=16)


def _dyn_ref(x, **k):
  amax = np.float32(np.abs(f32(x)).max())
  scale = np.float32(448.0) / amax
  return np.asarray(jnp.asarray(f32(x) * scale, E4M3)), np.array([amax], np.float32)


case("fp8_dynamic_per_tensor_two_kernels", dynamic_fp8, _dyn_make, _dyn_ref, 0)


# ---------------------------------------------------------------- DeepGEMM: activation scales stored (k / 128, m), read along m
@mg.mgpu_kernel(out_shape=lambda a, b, sat, sb, **k: S((a.shape[0], b.shape[0]), BF16),
                grid=lambda a, b, sat, sb, *, bm, bn, **k: (a.shape[0] // bm, b.shape[0] // bn))
def deepgemm_scales_t(a, b, sat, sb, c, *, bm: ml.constexpr, bn: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s, sa_s = ml.smem((bm, 128), E4M3), ml.smem((bn, 128), E4M3), ml.smem((bm,), F32)
  acc = ml.zeros((bm, bn), F32)
  for k in ml.range(a.shape[1] // 128, stages=2):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * 128, 128)], a_s)
    ml.copy(b.at[ml.ds(j * bn, bn), ml.ds(k * 128, 128)], b_s)
    ml.copy(sat.at[k, ml.ds(i * bm, bm)], sa_s)
    part = ml.dot(a_s, b_s.T)
    acc += part * sa_s[...][:, None] * sb[j, k]
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = acc.astype(BF16)


def _dg_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 256), E4M3), normal(r, (128, 256), E4M3), (r.random((2, 128)) + 0.5).astype(np.float32),
          (r.random((1, 2)) + 0.5).astype(np.float32)), dict(bm=64, bn=128)


def _dg_ref(a, b, sat, sb, **k):
  out = np.zeros((a.shape[0], b.shape[0]), np.float32)
  for kk in range(2):
    out += (f32(a)[:, kk * 128:(kk + 1) * 128] @ f32(b)[:, kk * 128:(kk + 1) * 128].T) * sat[kk][:, None] * sb[0, kk]
  return np.asarray(jnp.asarray(out, BF16))


case("fp8_deepgemm_transposed_act_scales", deepgemm_scales_t, _dg_make, _dg_ref, 1e-2)


# ---------------------------------------------------------------- GEMM with a fused per-row FP8 quantise epilogue
@mg.mgpu_kernel(out_shape=lambda x, w, **k: (S((x.shape[0], w.shape[1]), E4M3), S((x.shape[0],), F32)),
                grid=lambda x, w, *, bm, **k: (x.shape[0] // bm,))
def gemm_relu_quant_rows(x, w, q, s, *, bm: ml.constexpr, bk: ml.constexpr):
  i = ml.program_id(0)
  x_s, w_s = ml.smem((bm, bk), BF16), ml.smem((bk, w.shape[1]), BF16)
  acc = ml.zeros((bm, w.shape[1]), F32)
  for k in ml.range(x.shape[1] // bk, stages=2):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(w.at[ml.ds(k * bk, bk), :], w_s)
    acc = ml.dot(x_s, w_s, acc)
  y = ml.maximum(acc, 0.0)
  scale = ml.maximum(ml.max(y, axis=1), 1e-6) / 448.0
  q.at[ml.ds(i * bm, bm)][...] = (y / scale[:, None]).astype(E4M3)
  s.at[ml.ds(i * bm, bm)][...] = scale


def _grq_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 128), BF16), normal(r, (128, 128), BF16, 0.2)), dict(bm=64, bk=64)


def _grq_ref(x, w, **k):
  y = np.maximum(f32(x) @ f32(w), 0)
  s = np.asarray(jnp.maximum(jnp.asarray(y.max(1)), 1e-6) / 448.0)
  return np.asarray(jnp.asarray(y / s[:, None], E4M3)), s


case("gemm_relu_fp8_row_quant_epilogue", gemm_relu_quant_rows, _grq_make, _grq_ref, 7e-2)


# ---------------------------------------------------------------- split-K into atomics of the output's dtype: int8's int32 sums
# (exact), vLLM's AWQ SPLIT_K of float16 adds
@mg.mgpu_kernel(out_shape=lambda a, b, *, SPLIT: S((a.shape[0], b.shape[0]), I32 if a.dtype == I8 else F16),
                grid=lambda a, b, *, SPLIT, **k: (a.shape[0] // 64, b.shape[0] // 64, SPLIT))
def splitk_atomics(a, b, c, *, SPLIT: ml.constexpr):
  """b (n, k), K-major: the int8 tensor cores read it so, and float16 ones read its view b_s.T too."""
  i, j, s = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  steps = a.shape[1] // 64 // SPLIT
  a_s, b_s = ml.smem((64, 64), a.dtype), ml.smem((64, 64), b.dtype)
  acc = ml.zeros((64, 64), I32 if a.dtype == I8 else F32)
  for t in ml.range(steps):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds((s * steps + t) * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(j * 64, 64), ml.ds((s * steps + t) * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  ml.atomic_add(c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)], acc.astype(c.dtype))


def _i8sk_make(seed):
  r = rng_of(seed)
  return (r.integers(-128, 128, (64, 512)).astype(np.int8), r.integers(-128, 128, (128, 512)).astype(np.int8)), \
      dict(SPLIT=4)


case("int8_splitk_int32_atomics", splitk_atomics, _i8sk_make,
     lambda a, b, **k: (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32), 0)


# ---------------------------------------------------------------- MoE with int8 weights (W8A16 experts), per-expert scales
@mg.mgpu_kernel(out_shape=lambda x, w, s, offs, **k: S((x.shape[0], w.shape[2]), BF16),
                grid=lambda x, w, s, offs, *, BM, **k: (w.shape[0], ml.cdiv(x.shape[0], BM)))
def moe_w8a16(x_ptr, w_ptr, s_ptr, offs_ptr, o_ptr, *, BM: ml.constexpr, BK: ml.constexpr):
  e, t = ml.program_id(0), ml.program_id(1)
  start, stop = offs_ptr[e], offs_ptr[e + 1]
  if start + t * BM < stop:
    rm = start + t * BM + ml.arange(0, BM)
    rn = ml.arange(0, w_ptr.shape[2])
    acc = expert_rows_dot(x_ptr, w_ptr, e, rm, stop, BK)          # int8 weights converted to x's bfloat16
    ml.store(o_ptr.at[rm[:, None], rn[None, :]], (acc * ml.load(s_ptr.at[e, rn])[None, :]).to(BF16),
             mask=rm[:, None] < stop)


def _moe8_make(seed):
  r = rng_of(seed)
  sizes = np.array([33, 64, 0, 31])
  offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
  return (normal(r, (128, 128), BF16), r.integers(-128, 128, (4, 128, 64)).astype(np.int8),
          (r.random((4, 64)) * 0.01).astype(np.float32), offs), dict(BM=64, BK=64)


def _moe8_ref(x, w, s, offs, **k):
  out = np.zeros((x.shape[0], w.shape[2]), np.float32)
  for e in range(w.shape[0]):
    out[offs[e]:offs[e + 1]] = (f32(x[offs[e]:offs[e + 1]]) @ f32(w[e])) * s[e][None, :]
  return np.asarray(jnp.asarray(out, BF16))


case("moe_w8a16_ragged_experts", moe_w8a16, _moe8_make, _moe8_ref, 1e-2)


# ---------------------------------------------------------------- punica's expand: y += t @ B[lora id of each token], rank 16
@mg.mgpu_kernel(out_shape=lambda y, t, lb, ids, **k: S(y.shape, F32),
                grid=lambda y, t, lb, ids, *, BM, BN, **k: (ml.cdiv(y.shape[0], BM), y.shape[1] // BN))
def lora_expand(y_ptr, t_ptr, lb_ptr, seg_ptr, o_ptr, *, BM: ml.constexpr, BN: ml.constexpr):
  """Tokens sorted by adapter: seg (L + 1,) offsets; the program's BM tokens lie in one adapter's run (BM divides
  each run here), whose (R, N) B is read whole along R."""
  M, N = y_ptr.shape
  R = lb_ptr.shape[1]
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  rm = pid_m * BM + ml.arange(0, BM)
  rn = pid_n * BN + ml.arange(0, BN)
  rr = ml.arange(0, R)
  lora = 0
  for l in ml.static_range(lb_ptr.shape[0]):
    if seg_ptr[l] <= pid_m * BM:
      lora = l
  t = ml.load(t_ptr.at[rm[:, None], rr[None, :]], mask=rm[:, None] < M, other=0.0).to(F16)
  b = ml.load(lb_ptr.at[lora, rr[:, None], rn[None, :]])
  y = ml.load(y_ptr.at[rm[:, None], rn[None, :]], mask=rm[:, None] < M, other=0.0)
  ml.store(o_ptr.at[rm[:, None], rn[None, :]], y + ml.dot(t, b), mask=rm[:, None] < M)


def _lx_make(seed):
  r = rng_of(seed)
  seg = np.array([0, 64, 64, 128], np.int32)
  return (r.standard_normal((128, 128)).astype(np.float32), np.asarray(normal(r, (128, 16), F16), np.float32),
          normal(r, (3, 16, 128), F16, 0.1), seg), dict(BM=64, BN=64)


def _lx_ref(y, t, lb, seg, **k):
  out = y.copy()
  for l in range(lb.shape[0]):
    out[seg[l]:seg[l + 1]] += f32(t[seg[l]:seg[l + 1]]) @ f32(lb[l])
  return out


case("lora_expand_per_adapter_runs", lora_expand, _lx_make, _lx_ref, 1e-5)


# ---------------------------------------------------------------- the GPTQ dequantise kernel (K-packed words to float16)
@mg.mgpu_kernel(out_shape=lambda qw, qz, sc, **k: S((qw.shape[0] * 8, qw.shape[1]), F16),
                grid=lambda qw, qz, sc, *, BK, BN, **k: (qw.shape[0] * 8 // BK, qw.shape[1] // BN))
def gptq_dequant(qw_ptr, qz_ptr, sc_ptr, w_ptr, *, BK: ml.constexpr, BN: ml.constexpr, group: ml.constexpr):
  rk = ml.program_id(0) * BK + ml.arange(0, BK)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  p = ml.load(qw_ptr.at[(rk // 8)[:, None], rn[None, :]])
  q = (p >> ((rk % 8) * 4)[:, None]) & 0xF
  g = rk // group
  z = (ml.load(qz_ptr.at[g[:, None], (rn // 8)[None, :]]) >> ((rn % 8) * 4)[None, :]) & 0xF
  s = ml.load(sc_ptr.at[g[:, None], rn[None, :]])
  ml.store(w_ptr.at[rk[:, None], rn[None, :]], ((q - z) * s).to(F16))


def _gdq_make(seed):
  r = rng_of(seed)
  q, z = r.integers(0, 16, (256, 128)), r.integers(0, 16, (4, 128))
  s = np.asarray(jnp.asarray(r.random((4, 128)) * 0.02 + 0.01, F16))
  return (pack_rows8(q), pack_cols8(z), s), dict(BK=32, BN=64, group=64)


def _gdq_ref(qw, qz, s, **k):
  q, z = unpack_rows8(qw).astype(np.int64), unpack_cols8(qz).astype(np.int64)
  return np.asarray(jnp.asarray((q - np.repeat(z, 64, 0)) * np.repeat(f32(s), 64, 0), F16))


case("gptq_dequantize_kernel", gptq_dequant, _gdq_make, _gdq_ref, 0)


# ---------------------------------------------------------------- N-packed symmetric int4 through TMA words (Marlin-like)
@mg.mgpu_kernel(out_shape=lambda a, qw, sc, **k: S((a.shape[0], qw.shape[1] * 8), F16),
                grid=lambda a, qw, sc, *, bm, bn, **k: (a.shape[0] // bm, qw.shape[1] * 8 // bn))
def marlin_like(a, qw, sc, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, group: ml.constexpr,
                stages: ml.constexpr = 2):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, q_s, w_s = ml.smem((bm, bk), F16), ml.smem((bk, bn // 8), I32), ml.smem((bk, bn), F16)
  shifts = (ml.arange(0, bn) % 8) * 4
  acc = ml.zeros((bm, bn), F32)
  for k in ml.range(a.shape[1] // bk, stages=stages):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(qw.at[ml.ds(k * bk, bk), ml.ds(j * (bn // 8), bn // 8)], q_s)
    q = ((jnp.repeat(q_s[...], 8, axis=1) >> shifts[None, :]) & 0xF) - 8
    s = sc.at[k * bk // group, ml.ds(j * bn, bn)][...]
    w_s[...] = (q.astype(F16) * s[None, :])
    acc = ml.dot(a_s, w_s, acc)
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = acc.astype(F16)


def _ml_make(seed):
  r = rng_of(seed)
  q = r.integers(0, 16, (256, 128))
  s = np.asarray(jnp.asarray(r.random((2, 128)) * 0.02 + 0.01, F16))
  return (normal(r, (64, 256), F16), pack_cols8(q), s), dict(bm=64, bn=128, bk=64, group=128)


def _ml_ref(a, qw, s, **k):
  w = np.asarray(jnp.asarray((unpack_cols8(qw).astype(np.float32) - 8) * np.repeat(f32(s), 128, 0), F16))
  return np.asarray(jnp.asarray(f32(a) @ f32(w), F16))


case("marlin_like_n_packed_sym", marlin_like, _ml_make, _ml_ref, 1e-2)
case("marlin_like_n_packed_sym_3_stages", marlin_like, lambda seed: (_ml_make(seed)[0], dict(bm=64, bn=128, bk=64,
                                                                                           group=128, stages=3)),
     _ml_ref, 1e-2)


# ---------------------------------------------------------------- explicit GELU formulas (tanh with its constants; erf)
@mg.mgpu_kernel(out_shape=lambda x, w, b, **k: S((x.shape[0], w.shape[1]), F32),
                grid=lambda x, w, b, *, BM, BN, **k: (ml.cdiv(x.shape[0], BM), w.shape[1] // BN))
def gemm_gelu_formulas(x_ptr, w_ptr, b_ptr, o_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr,
                       TANH: ml.constexpr):
  M, K = x_ptr.shape
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  acc = ml.zeros((BM, BN), F32)
  for k in range(0, K, BK):
    rk = k + ml.arange(0, BK)
    acc = ml.dot(ml.load(x_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0.0),
                 ml.load(w_ptr.at[rk[:, None], rn[None, :]]), acc)
  y = acc + ml.load(b_ptr.at[rn])[None, :].to(F32)
  if TANH:
    y = 0.5 * y * (1.0 + ml.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))
  else:
    y = 0.5 * y * (1.0 + ml.erf(y * 0.7071067811865476))
  ml.store(o_ptr.at[rm[:, None], rn[None, :]], y, mask=rm[:, None] < M)


def _gf_make(tanh):
  def make(seed):
    r = rng_of(seed)
    return (normal(r, (70, 128), F16), normal(r, (128, 64), F16, 0.2), normal(r, (64,), F16)), \
        dict(BM=64, BN=64, BK=64, TANH=tanh)
  return make


def _gf_ref(x, w, b, *, TANH, **k):
  y = jnp.asarray(f32(x) @ f32(w) + f32(b)[None, :])
  return np.asarray(jax.nn.gelu(y, approximate=bool(TANH)))


case("gelu_tanh_formula_epilogue", gemm_gelu_formulas, _gf_make(True), _gf_ref, 1e-5)
case("gelu_erf_formula_epilogue", gemm_gelu_formulas, _gf_make(False), _gf_ref, 1e-5)


# ---------------------------------------------------------------- row softmax of a ragged row (n = 100 of a 128-wide tile)
@mg.mgpu_kernel(out_shape=lambda x, w, **k: S((x.shape[0], w.shape[1]), F32),
                grid=lambda x, w, *, BM, **k: (ml.cdiv(x.shape[0], BM),))
def gemm_softmax_masked(x_ptr, w_ptr, o_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
  M, K = x_ptr.shape
  N = w_ptr.shape[1]
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.arange(0, BN)
  acc = ml.zeros((BM, BN), F32)
  for k in range(0, K, BK):
    rk = k + ml.arange(0, BK)
    a = ml.load(x_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0.0)
    b = ml.load(w_ptr.at[rk[:, None], rn[None, :]], mask=rn[None, :] < N, other=0.0)
    acc = ml.dot(a, b, acc)
  s = ml.where(rn[None, :] < N, acc, -float("inf"))
  p = ml.exp(s - ml.max(s, axis=1)[:, None])
  ml.store(o_ptr.at[rm[:, None], rn[None, :]], p / ml.sum(p, axis=1)[:, None], mask=(rm[:, None] < M) & (rn[None, :] < N))


def _gsm_make(seed):
  r = rng_of(seed)
  return (normal(r, (80, 64), F16), normal(r, (64, 100), F16, 0.3)), dict(BM=64, BN=128, BK=64)


def _gsm_ref(x, w, **k):
  y = f32(x) @ f32(w)
  p = np.exp(y - y.max(1, keepdims=True))
  return p / p.sum(1, keepdims=True)


case("softmax_epilogue_ragged_row", gemm_softmax_masked, _gsm_make, _gsm_ref, 1e-5)


# ---------------------------------------------------------------- fused add + RMS-norm epilogue, both outputs stored
@mg.mgpu_kernel(out_shape=lambda x, w, res, g, **k: (S(res.shape, BF16), S(res.shape, BF16)),
                grid=lambda x, w, res, g, *, bm, **k: (x.shape[0] // bm,))
def gemm_add_rmsnorm(x, w, res, g, h, out, *, bm: ml.constexpr, bk: ml.constexpr):
  i = ml.program_id(0)
  x_s, w_s = ml.smem((bm, bk), BF16), ml.smem((bk, w.shape[1]), BF16)
  acc = ml.zeros((bm, w.shape[1]), F32)
  for k in ml.range(x.shape[1] // bk):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(w.at[ml.ds(k * bk, bk), :], w_s)
    acc = ml.dot(x_s, w_s, acc)
  hid = acc + res.at[ml.ds(i * bm, bm)][...].astype(F32)
  h.at[ml.ds(i * bm, bm)][...] = hid.astype(BF16)
  var = jnp.mean(hid * hid, axis=-1, keepdims=True)
  out.at[ml.ds(i * bm, bm)][...] = (hid * jax.lax.rsqrt(var + 1e-5) * g[...].astype(F32)).astype(BF16)


def _gar_make(seed):
  r = rng_of(seed)
  return (normal(r, (128, 64), BF16), normal(r, (64, 128), BF16, 0.2), normal(r, (128, 128), BF16),
          normal(r, (128,), BF16)), dict(bm=64, bk=64)


def _gar_ref(x, w, res, g, **k):
  hid = f32(x) @ f32(w) + f32(res)
  return (np.asarray(jnp.asarray(hid, BF16)),
          np.asarray(jnp.asarray(hid / np.sqrt((hid * hid).mean(-1, keepdims=True) + 1e-5) * f32(g), BF16)))


case("gemm_fused_add_rmsnorm_two_outputs", gemm_add_rmsnorm, _gar_make, _gar_ref, 1e-2)


# ---------------------------------------------------------------- MoE combine: expert rows scattered back to tokens by atomics
@mg.mgpu_kernel(out_shape=lambda y, pos, wts, **k: S((pos.shape[0], y.shape[1]), F32),
                grid=lambda y, pos, wts, *, BT, **k: (ml.cdiv(pos.shape[0], BT),))
def moe_combine(y_ptr, pos_ptr, w_ptr, o_ptr, *, BT: ml.constexpr):
  """y (T * top_k, d): expert outputs in sorted order; pos (T, top_k): each token's rows; o[t] = sum_k w * y[pos]."""
  T, top_k = pos_ptr.shape
  D = y_ptr.shape[1]
  rt = ml.program_id(0) * BT + ml.arange(0, BT)
  rd = ml.arange(0, D)
  for k in ml.static_range(top_k):
    p = ml.load(pos_ptr.at[rt, k], mask=rt < T, other=0)
    w = ml.load(w_ptr.at[rt, k], mask=rt < T, other=0.0)
    v = ml.load(y_ptr.at[p[:, None], rd[None, :]], mask=(rt < T)[:, None], other=0.0)
    ml.atomic_add(o_ptr.at[rt[:, None], rd[None, :]], v * w[:, None], mask=(rt < T)[:, None])


def _mc_make(seed):
  r = rng_of(seed)
  T, k = 40, 2
  pos = r.permutation(T * k).reshape(T, k).astype(np.int32)
  return (r.standard_normal((T * k, 64)).astype(np.float32), pos, r.random((T, k)).astype(np.float32)), dict(BT=16)


def _mc_ref(y, pos, w, **k):
  return (y[pos] * w[:, :, None]).sum(1)


case("moe_combine_scatter_atomic", moe_combine, _mc_make, _mc_ref, 1e-5)


# ---------------------------------------------------------------- asymmetric per-token int8 quantisation (zero points)
@mg.mgpu_kernel(out_shape=lambda x, **k: (S(x.shape, I8), S((x.shape[0],), F32), S((x.shape[0],), I32)),
                grid=lambda x, *, BM, **k: (x.shape[0] // BM,))
def quant_azp(x, q, s, z, *, BM: ml.constexpr):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * BM, BM)][...].astype(F32)
  lo, hi = ml.min(v, axis=1), ml.max(v, axis=1)
  scale = (hi - lo) / 255.0
  azp = jnp.round(-128.0 - lo / scale).astype(I32)
  qv = jnp.clip(jnp.round(v / scale[:, None]) + azp[:, None].astype(F32), -128, 127)
  q.at[ml.ds(i * BM, BM)][...] = qv.astype(I8)
  s.at[ml.ds(i * BM, BM)][...] = scale
  z.at[ml.ds(i * BM, BM)][...] = azp


def _qa_make(seed):
  return (normal(rng_of(seed), (64, 128), BF16, 2.0),), dict(BM=16)


def _qa_ref(x, **k):
  v = f32(x)
  lo, hi = v.min(1), v.max(1)
  scale = np.asarray(jnp.asarray(hi - lo) / 255.0)          # a constant divisor: XLA's product by its reciprocal
  azp = np.round(np.float32(-128.0) - lo / scale).astype(np.int32)
  q = np.clip(np.round(v / scale[:, None]) + azp[:, None].astype(np.float32), -128, 127).astype(np.int8)
  return q, scale, azp


case("w8a8_quant_per_token_asymmetric", quant_azp, _qa_make, _qa_ref, 0)


# ---------------------------------------------------------------- signed int4 nibbles, sign-extended by shifts (torchao)
@mg.mgpu_kernel(out_shape=lambda a, qw, sc, **k: S((a.shape[0], qw.shape[1] * 8), BF16),
                grid=lambda a, qw, sc, *, BM, BN, **k: (ml.cdiv(a.shape[0], BM), qw.shape[1] * 8 // BN))
def int4_signed(a_ptr, qw_ptr, s_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
  """qw (k, n // 8) int32: nibble i of word c is column 8c + i, a two's complement int4 in -8..7; per-channel scales."""
  acc = ml.zeros((BM, BN), F32)
  M, K = a_ptr.shape
  rm, rn = ml.program_id(0) * BM + ml.arange(0, BM), ml.program_id(1) * BN + ml.arange(0, BN)
  for k in range(K // BK):
    rk = k * BK + ml.arange(0, BK)
    p = ml.load(qw_ptr.at[rk[:, None], (rn // 8)[None, :]])
    q = (p << (28 - (rn % 8) * 4)[None, :]) >> 28
    a = ml.load(a_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0.0)
    acc = ml.dot(a, q.to(BF16), acc)
  s = ml.load(s_ptr.at[rn])
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], (acc * s[None, :]).to(BF16), mask=rm[:, None] < M)


def _i4s_make(seed):
  r = rng_of(seed)
  q = r.integers(-8, 8, (128, 64))
  return (normal(r, (8, 128), BF16), pack_cols8(q & 0xF), (r.random(64) * 0.1).astype(np.float32)), \
      dict(BM=64, BN=64, BK=64)


def _i4s_ref(a, qw, s, **k):
  q = unpack_cols8(qw).astype(np.int64)
  q = np.where(q >= 8, q - 16, q)
  return np.asarray(jnp.asarray((f32(a) @ q) * s[None, :], BF16))


case("int4_signed_sign_extend_shifts", int4_signed, _i4s_make, _i4s_ref, 1e-2)


# ---------------------------------------------------------------- decode on the tensor cores: 4 tokens a dot of padded rows
@mg.mgpu_kernel(out_shape=lambda x, qw, s, **k: S((x.shape[0], qw.shape[1]), F16),
                grid=lambda x, qw, s, *, bn, **k: (qw.shape[1] // bn,))
def gemv_int4_mma(x, qw, s, y, *, bn: ml.constexpr, bk: ml.constexpr):
  """A batch of B tokens (fewer than 64 rows, padded by the compiler) times uint8-pair int4 weights (k // 2, n)."""
  j = ml.program_id(0)
  x_s, w_s = ml.smem((x.shape[0], bk), F16), ml.smem((bk, bn), F16)
  acc = ml.zeros((x.shape[0], bn), F32)
  for k in ml.range(x.shape[1] // bk):
    ml.copy(x.at[:, ml.ds(k * bk, bk)], x_s)
    p = qw.at[ml.ds(k * (bk // 2), bk // 2), ml.ds(j * bn, bn)][...].astype(I32)
    q = ml.join(p & 0xF, p >> 4)                      # (bk // 2, bn, 2): rows 2r and 2r + 1
    q = jnp.transpose(q, (0, 2, 1)).reshape(bk, bn) - 8
    w_s[...] = q.astype(F16)
    acc = ml.dot(x_s, w_s, acc)
  y.at[:, ml.ds(j * bn, bn)][...] = (acc * s.at[ml.ds(j * bn, bn)][...][None, :]).astype(F16)


def _gim_make(seed):
  r = rng_of(seed)
  q = r.integers(0, 16, (256, 128))
  qw = (q[0::2] | (q[1::2] << 4)).astype(np.uint8)
  return (normal(r, (4, 256), F16), qw, (r.random(128) * 0.02).astype(np.float32)), dict(bn=64, bk=64)


def _gim_ref(x, qw, s, **k):
  q = np.stack([qw & 0xF, qw >> 4], 1).reshape(-1, qw.shape[1]).astype(np.float32) - 8
  return np.asarray(jnp.asarray((f32(x) @ q) * s[None, :], F16))


case("gemv_int4_tensor_cores_batch4", gemv_int4_mma, _gim_make, _gim_ref, 1e-2)
