"""Probe 68b's corpus, its first half: weight-only and 8-bit quantised GEMMs as LLM serving stacks write them (GPTQ's
and AWQ's Triton kernels, torchao's uint8 nibble pairs, Marlin's symmetric int4, vLLM's W8A8 and its per-token
quantise kernel, FP8 with per-tensor and DeepSeek-V3's 128x128 block scales), each with a NumPy reference; the
second half is probe68b_fused.py. tests/test_probe68b.py runs them. CASES maps a name to
(kernel, make(seed) -> (args, constexprs), reference(*args, **constexprs), tolerance); a tolerance of 0 is bit-exact."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32, I8, U8 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.int8, jnp.uint8
E4M3, E5M2 = jnp.float8_e4m3fn, jnp.float8_e5m2
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
CASES = {}


def f32(x):
  return np.asarray(x, np.float32)


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- packing helpers (the host side of each format)
def pack_rows8(q):
  """GPTQ: (k, n) nibbles into (k // 8, n) int32 words, row 8r + i in bits 4i.."""
  k, n = q.shape
  q = q.reshape(k // 8, 8, n).astype(np.uint32)
  out = np.zeros((k // 8, n), np.uint32)
  for i in range(8):
    out |= q[:, i] << (4 * i)
  return out.view(np.int32)


def pack_cols8(q, order=range(8)):
  """(r, n) nibbles into (r, n // 8) int32 words, column 8c + order[i] in bits 4i.. (AWQ's order: AWQ_ORDER)."""
  r, n = q.shape
  q = q.reshape(r, n // 8, 8)[:, :, list(order)].astype(np.uint32)
  out = np.zeros((r, n // 8), np.uint32)
  for i in range(8):
    out |= q[:, :, i] << (4 * i)
  return out.view(np.int32)


def rng_of(seed):
  return np.random.default_rng(seed)


def w4_problem(seed, m, k, n, g, sym=False):
  r = rng_of(seed)
  q = r.integers(0, 16, (k, n))
  z = np.full((k // g, n), 8) if sym else r.integers(0, 16, (k // g, n))
  s = np.asarray(jnp.asarray(r.random((k // g, n)) * 0.02 + 0.01, F16))
  w = (q - np.repeat(z, g, 0)) * np.repeat(f32(s), g, 0)
  a = np.asarray(jnp.asarray(r.standard_normal((m, k)), F16))
  return a, q, z, s, w


# ---------------------------------------------------------------- GPTQ W4A16 (Triton's gptq matmul: K-packed words)
def _grid_mn(a, *rest, BM, BN, **k):
  n = rest[-1].shape[1] if rest[-1].ndim == 2 else rest[0].shape[1]
  return (ml.cdiv(a.shape[0], BM) * ml.cdiv(n, BN),)


@mg.mgpu_kernel(out_shape=lambda a, qw, qz, sc, **k: S((a.shape[0], sc.shape[1]), F16),
                grid=lambda a, qw, qz, sc, *, BM, BN, **k: (ml.cdiv(a.shape[0], BM) * ml.cdiv(sc.shape[1], BN),))
def gptq_matmul(a_ptr, b_ptr, zeros_ptr, scales_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr,
                BK: ml.constexpr, group_size: ml.constexpr):
  M, K = a_ptr.shape
  N = scales_ptr.shape[1]
  pid_m, pid_n = ml.program_id(0) // ml.cdiv(N, BN), ml.program_id(0) % ml.cdiv(N, BN)
  offs_am, offs_bn, offs_k = pid_m * BM + ml.arange(0, BM), pid_n * BN + ml.arange(0, BN), ml.arange(0, BK)
  shifter = (offs_k % 8) * 4
  zeros_shifter = (offs_bn % 8) * 4
  acc = ml.zeros((BM, BN), dtype=jnp.float32)
  for k in range(0, K // BK):
    kk = k * BK + offs_k
    a = ml.load(a_ptr.at[offs_am[:, None], kk[None, :]], mask=offs_am[:, None] < M, other=0.0)
    b = ml.load(b_ptr.at[(kk // 8)[:, None], offs_bn[None, :]])
    g = (k * BK) // group_size
    scales = ml.load(scales_ptr.at[g, offs_bn])
    zeros = ml.load(zeros_ptr.at[g, offs_bn // 8])
    zeros = (zeros >> zeros_shifter) & 0xF
    b = (b >> shifter[:, None]) & 0xF
    b = ((b - zeros[None, :]) * scales[None, :]).to(jnp.float16)
    acc += ml.dot(a, b)
  ml.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc.to(jnp.float16), mask=offs_am[:, None] < M)


def _gptq_make(m, g, sym):
  def make(seed):
    a, q, z, s, w = w4_problem(seed, m, 256, 128, g, sym)
    return (a, pack_rows8(q), pack_cols8(z), s), dict(BM=64, BN=64, BK=g if g <= 64 else 64, group_size=g)
  return make


def _w4_ref(a, *rest, **k):
  return None     # replaced per case


def _gptq_ref(a, qw, qz, s, **k):
  kk, n = qw.shape[0] * 8, qw.shape[1]
  q = np.stack([(qw.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 1).reshape(kk, n).astype(np.int64)
  z = np.stack([(qz.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 2).reshape(qz.shape[0], n).astype(np.int64)
  g = kk // s.shape[0]
  w = ((q - np.repeat(z, g, 0)) * np.repeat(f32(s), g, 0)).astype(np.float16)
  return f32(a) @ f32(w)


for _g in (32, 64, 128):
  case(f"gptq_asym_g{_g}", gptq_matmul, _gptq_make(100, _g, False), _gptq_ref, 1e-2)
case("gptq_sym_g128_decode", gptq_matmul, _gptq_make(3, 128, True), _gptq_ref, 1e-2)


# ---------------------------------------------------------------- GPTQ act-order: a g_idx gather of scales and zeros
@mg.mgpu_kernel(out_shape=lambda a, qw, qz, sc, gi, **k: S((a.shape[0], sc.shape[1]), F16),
                grid=lambda a, qw, qz, sc, gi, *, BM, BN, **k: (ml.cdiv(a.shape[0], BM), ml.cdiv(sc.shape[1], BN)))
def gptq_act_order(a_ptr, b_ptr, zeros_ptr, scales_ptr, g_idx_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr,
                   BK: ml.constexpr):
  M, K = a_ptr.shape
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  offs_am = pid_m * BM + ml.arange(0, BM)
  offs_bn = pid_n * BN + ml.arange(0, BN)
  offs_k = ml.arange(0, BK)
  acc = ml.zeros((BM, BN), dtype=jnp.float32)
  for k in range(0, K // BK):
    kk = k * BK + offs_k
    a = ml.load(a_ptr.at[offs_am[:, None], kk[None, :]], mask=offs_am[:, None] < M, other=0.0)
    b = ml.load(b_ptr.at[(kk // 8)[:, None], offs_bn[None, :]])
    g_idx = ml.load(g_idx_ptr.at[kk])
    scales = ml.load(scales_ptr.at[g_idx[:, None], offs_bn[None, :]])
    zeros = ml.load(zeros_ptr.at[g_idx[:, None], (offs_bn // 8)[None, :]])
    zeros = (zeros >> ((offs_bn % 8) * 4)[None, :]) & 0xF
    b = (b >> ((kk % 8) * 4)[:, None]) & 0xF
    b = ((b - zeros) * scales).to(jnp.float16)
    acc += ml.dot(a, b)
  ml.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc.to(jnp.float16), mask=offs_am[:, None] < M)


def _act_make(seed):
  a, q, z, s, w = w4_problem(seed, 70, 256, 128, 64)
  g_idx = rng_of(seed + 7).permutation(np.repeat(np.arange(4), 64)).astype(np.int32)
  return (a, pack_rows8(q), pack_cols8(z), s, g_idx), dict(BM=64, BN=64, BK=64)


def _act_ref(a, qw, qz, s, g_idx, **k):
  kk, n = qw.shape[0] * 8, qw.shape[1]
  q = np.stack([(qw.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 1).reshape(kk, n).astype(np.int64)
  z = np.stack([(qz.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 2).reshape(qz.shape[0], n).astype(np.int64)
  w = ((q - z[g_idx]) * f32(s)[g_idx]).astype(np.float16)
  return f32(a) @ f32(w)


case("gptq_act_order_g64", gptq_act_order, _act_make, _act_ref, 1e-2)


# ---------------------------------------------------------------- AWQ through TMA: packed words in SMEM, unpacked in registers
@mg.mgpu_kernel(out_shape=lambda a, qw, qz, sc, **k: S((a.shape[0], sc.shape[1]), F16),
                grid=lambda a, qw, qz, sc, *, bm, bn, **k: (a.shape[0] // bm, sc.shape[1] // bn))
def awq_tma(a, qw, qz, sc, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, group: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((bm, bk), F16)
  q_s = ml.smem((bk, bn // 8), I32)
  w_s = ml.smem((bk, bn), F16)
  order = ((ml.arange(0, 2) * 4)[None, :] + ml.arange(0, 4)[:, None]).reshape(8)
  shifts = ml.broadcast_to((order * 4)[None, :], (bk * (bn // 8), 8)).reshape(bk, bn)
  acc = ml.zeros((bm, bn), F32)
  for k in ml.range(a.shape[1] // bk):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(qw.at[ml.ds(k * bk, bk), ml.ds(j * (bn // 8), bn // 8)], q_s)
    g, ng = k * bk // group, max(bk // group, 1)         # the tile's first group, and its groups
    words = ml.repeat(q_s[...], 8, axis=1)
    z = ml.repeat(qz.at[ml.ds(g, ng), ml.ds(j * (bn // 8), bn // 8)][...], 8, axis=1)
    s = sc.at[ml.ds(g, ng), ml.ds(j * bn, bn)][...]
    if ng > 1:
      z, s = ml.repeat(z, group, axis=0), ml.repeat(s, group, axis=0)
    w = (((words >> shifts) & 0xF) - ((z >> shifts) & 0xF)) * s
    w_s[...] = w.astype(F16)
    acc = ml.dot(a_s, w_s, acc)
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = acc.astype(F16)


def _awq_make(g, bk=64, bn=64):
  def make(seed):
    a, q, z, s, w = w4_problem(seed, 128, 256, 128, g)
    return (a, pack_cols8(q, AWQ_ORDER), pack_cols8(z, AWQ_ORDER), s), dict(bm=64, bn=bn, bk=bk, group=g)
  return make


def _awq_ref(a, qw, qz, s, **k):
  rev = np.argsort(AWQ_ORDER)

  def unpack(p):
    u = np.stack([(p.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 2)[:, :, rev]
    return u.reshape(p.shape[0], -1).astype(np.int64)
  q, z = unpack(qw), unpack(qz)
  g = q.shape[0] // s.shape[0]
  w = ((q - np.repeat(z, g, 0)) * np.repeat(f32(s), g, 0)).astype(np.float16)
  return f32(a) @ f32(w)


for _g in (32, 64, 128):
  case(f"awq_tma_g{_g}", awq_tma, _awq_make(_g), _awq_ref, 1e-2)
case("awq_tma_g32_bk128_bn128", awq_tma, _awq_make(32, 128, 128), _awq_ref, 1e-2)     # (4, 16) words: four groups
case("awq_tma_g16_bk64", awq_tma, _awq_make(16), _awq_ref, 1e-2)                     # (4, 8) words


# ---------------------------------------------------------------- torchao / bitsandbytes style: two nibbles per uint8
@mg.mgpu_kernel(out_shape=lambda a, qw, sc, **k: S((a.shape[0], qw.shape[1] * 2), BF16),
                grid=lambda a, qw, sc, *, bm, bn, **k: (a.shape[0] // bm, qw.shape[1] * 2 // bn))
def w4_uint8_pairs(a, qw, sc, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, group: ml.constexpr):
  """qw (k, n // 2) uint8: column 2c in the low nibble, 2c + 1 in the high; symmetric (zero 8), bf16 scales."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, w_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), BF16)
  acc = ml.zeros((bm, bn), F32)
  for k in ml.range(a.shape[1] // bk):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    p = qw.at[ml.ds(k * bk, bk), ml.ds(j * (bn // 2), bn // 2)][...].astype(I32)
    lo = (p & 0xF) - 8
    hi = (p >> 4) - 8
    q = ml.interleave(lo, hi)
    s = sc.at[k * bk // group, ml.ds(j * bn, bn)][...]
    w_s[...] = (q.astype(F32) * s.astype(F32)[None, :]).astype(BF16)
    acc = ml.dot(a_s, w_s, acc)
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = acc.astype(BF16)


def _pairs_make(seed):
  r = rng_of(seed)
  q = r.integers(0, 16, (256, 128))
  qw = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
  s = np.asarray(jnp.asarray(r.random((4, 128)) * 0.02 + 0.01, BF16))
  a = np.asarray(jnp.asarray(r.standard_normal((128, 256)), BF16))
  return (a, qw, s), dict(bm=64, bn=128, bk=64, group=64)


def _pairs_ref(a, qw, s, **k):
  q = np.stack([qw & 0xF, qw >> 4], 2).reshape(qw.shape[0], -1).astype(np.int64) - 8
  w = np.asarray(jnp.asarray(q * np.repeat(f32(s), 64, 0), BF16))
  return f32(a) @ f32(w)


case("w4_uint8_pairs", w4_uint8_pairs, _pairs_make, _pairs_ref, 1e-2)


# ---------------------------------------------------------------- uint8 packed along K (two k rows a byte), Marlin-like symmetric
@mg.mgpu_kernel(out_shape=lambda a, qw, sc, **k: S((a.shape[0], qw.shape[1]), F16),
                grid=lambda a, qw, sc, *, BM, BN, **k: (ml.cdiv(a.shape[0], BM), qw.shape[1] // BN))
def w4_k_pairs(a_ptr, qw_ptr, s_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
  """qw (k // 2, n) uint8: row 2r in the low nibble, row 2r + 1 in the high; per-channel scales s (n,)."""
  M, K = a_ptr.shape
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  acc = ml.zeros((BM, BN), F32)
  for k in range(K // BK):
    rk = k * BK + ml.arange(0, BK)
    a = ml.load(a_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0.0)
    p = ml.load(qw_ptr.at[(rk // 2)[:, None], rn[None, :]]).to(jnp.int32)
    q = (p >> ((rk % 2) * 4)[:, None]) & 0xF
    acc = ml.dot(a, (q - 8).to(jnp.float16), acc)
  s = ml.load(s_ptr.at[rn])
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], (acc * s[None, :].to(jnp.float32)).to(jnp.float16),
           mask=rm[:, None] < M)


def _kpairs_make(seed):
  r = rng_of(seed)
  q = r.integers(0, 16, (256, 128))
  qw = (q[0::2] | (q[1::2] << 4)).astype(np.uint8)
  s = np.asarray(jnp.asarray(r.random(128) * 0.02 + 0.01, F16))
  a = np.asarray(jnp.asarray(r.standard_normal((40, 256)), F16))
  return (a, qw, s), dict(BM=64, BN=64, BK=64)


def _kpairs_ref(a, qw, s, **k):
  q = np.stack([qw & 0xF, qw >> 4], 1).reshape(-1, qw.shape[1]).astype(np.int64) - 8
  return (f32(a) @ q) * f32(s)[None, :]


case("w4_k_pairs_marlin_sym", w4_k_pairs, _kpairs_make, _kpairs_ref, 1e-2)


# ---------------------------------------------------------------- W8A16: int8 weights, per-channel scales in the epilogue
@mg.mgpu_kernel(out_shape=lambda a, w, s, **k: S((a.shape[0], w.shape[1]), BF16),
                grid=lambda a, w, s, *, bm, bn, **k: (a.shape[0] // bm, w.shape[1] // bn))
def w8a16(a, w, s, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
  acc = ml.zeros((bm, bn), F32)
  a_s, w8_s, w_s = ml.smem((bm, bk), BF16), ml.smem((bk, bn), I8), ml.smem((bk, bn), BF16)
  i, j = ml.program_id(0), ml.program_id(1)
  for k in ml.range(a.shape[1] // bk, stages=2):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(w.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], w8_s)
    w_s[...] = w8_s[...].astype(BF16)
    acc = ml.dot(a_s, w_s, acc)
  scale = s.at[ml.ds(j * bn, bn)][...]
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = (acc * scale[None, :]).astype(BF16)


def _w8a16_make(seed):
  r = rng_of(seed)
  a = np.asarray(jnp.asarray(r.standard_normal((128, 256)), BF16))
  w = r.integers(-128, 128, (256, 128)).astype(np.int8)
  return (a, w, (r.random(128) * 0.01).astype(np.float32)), dict(bm=64, bn=128, bk=64)


case("w8a16_per_channel", w8a16, _w8a16_make, lambda a, w, s, **k: (f32(a) @ f32(w)) * s[None, :], 1e-2)


# ---------------------------------------------------------------- W8A8: the per-token quantise kernel, then the int8 GEMM
@mg.mgpu_kernel(out_shape=lambda x, **k: (S(x.shape, I8), S((x.shape[0],), F32)),
                grid=lambda x, *, BM, **k: (ml.cdiv(x.shape[0], BM),))
def quant_per_token(x_ptr, q_ptr, s_ptr, *, BM: ml.constexpr):
  M, K = x_ptr.shape
  rows = ml.program_id(0) * BM + ml.arange(0, BM)
  cols = ml.arange(0, K)
  x = ml.load(x_ptr.at[rows[:, None], cols[None, :]], mask=rows[:, None] < M, other=0.0).to(jnp.float32)
  amax = ml.max(ml.abs(x), axis=1)
  scale = ml.maximum(amax, 1e-10) / 127.0
  q = ml.clamp(jnp.round(x / scale[:, None]), -128.0, 127.0).to(jnp.int8)
  ml.store(q_ptr.at[rows[:, None], cols[None, :]], q, mask=rows[:, None] < M)
  ml.store(s_ptr.at[rows], scale, mask=rows < M)


def _quant_make(seed):
  x = np.asarray(jnp.asarray(rng_of(seed).standard_normal((100, 256)) * 3, BF16))
  return (x,), dict(BM=16)


def _quant_ref(x, **k):
  # jnp's, not NumPy's: XLA divides by a constant as the product by its reciprocal (so does the kernel, design note 163)
  x = jnp.asarray(x, F32)
  s = jnp.maximum(jnp.abs(x).max(1), 1e-10) / 127.0
  # the quotient NumPy's (IEEE's), as interpret mode's: XLA multiplies by the broadcast scale's reciprocal instead
  q = np.clip(np.round(f32(x) / np.asarray(s)[:, None]), -128, 127).astype(np.int8)
  return q, np.asarray(s)


case("w8a8_quant_per_token", quant_per_token, _quant_make, _quant_ref, 0)


@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb, **k: S((a.shape[0], b.shape[0]), BF16),
                grid=lambda a, b, sa, sb, *, bm, bn, **k: (a.shape[0] // bm, b.shape[0] // bn))
def w8a8_gemm(a, b, sa, sb, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
  """a (m, k) int8 per-token quantised, b (n, k) int8 per-channel: c = (a @ b.T) * sa[:, None] * sb[None, :]."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((bm, bk)), ml.smem((bn, bk))
  acc = ml.zeros((bm, bn), I32)
  for k in ml.range(a.shape[1] // bk, stages=3):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(b.at[ml.ds(j * bn, bn), ml.ds(k * bk, bk)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  y = acc.astype(F32) * sa.at[ml.ds(i * bm, bm)][...][:, None] * sb.at[ml.ds(j * bn, bn)][...][None, :]
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = y.astype(BF16)


def _w8a8_make(seed):
  r = rng_of(seed)
  a = r.integers(-128, 128, (128, 256)).astype(np.int8)
  b = r.integers(-128, 128, (128, 256)).astype(np.int8)
  return (a, b, (r.random(128) * 0.01).astype(np.float32), (r.random(128) * 0.01).astype(np.float32)), \
      dict(bm=64, bn=64, bk=128)


def _w8a8_ref(a, b, sa, sb, **k):
  acc = a.astype(np.int64) @ b.astype(np.int64).T
  return np.asarray(jnp.asarray(acc.astype(np.float32) * sa[:, None] * sb[None, :], BF16))


case("w8a8_gemm_tma", w8a8_gemm, _w8a8_make, _w8a8_ref, 1e-2)


@mg.mgpu_kernel(out_shape=lambda a, b, *, B_NK=False, **k: S((a.shape[0], b.shape[0 if B_NK else 1]), I32),
                grid=lambda a, b, *, BM, BN, B_NK=False, **k: (ml.cdiv(a.shape[0], BM), b.shape[0 if B_NK else 1] // BN))
def int8_gemm_raw(a_ptr, b_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr,
                  B_NK: ml.constexpr = False):
  """Triton's int8 tl.dot of two loaded tiles, b stored (k, n), or (n, k) (B_NK) read as (k, n) tiles by its pointers
  (vLLM's int8 GEMMs): the int32 accumulator stored as is (bit-exact)."""
  acc = ml.zeros((BM, BN), dtype=jnp.int32)
  M, K = a_ptr.shape
  rm, rn = ml.program_id(0) * BM + ml.arange(0, BM), ml.program_id(1) * BN + ml.arange(0, BN)
  for k in range(0, K, BK):
    rk = k + ml.arange(0, BK)
    a = ml.load(a_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0)
    b = ml.load(b_ptr.at[rn[None, :], rk[:, None]]) if B_NK else ml.load(b_ptr.at[rk[:, None], rn[None, :]])
    acc += ml.dot(a, b)
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], acc, mask=rm[:, None] < M)


def _int8_raw_make(seed):
  r = rng_of(seed)
  return (r.integers(-128, 128, (72, 256)).astype(np.int8), r.integers(-128, 128, (256, 64)).astype(np.int8)), \
      dict(BM=64, BN=64, BK=64)


case("int8_gemm_register_operands", int8_gemm_raw, _int8_raw_make,
     lambda a, b, **k: (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb, azp, **k: S((a.shape[0], b.shape[0]), F32),
                grid=lambda a, b, sa, sb, azp, *, bm, bn, **k: (a.shape[0] // bm, b.shape[0] // bn))
def w8a8_azp(a, b, sa, sb, azp, c, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr):
  """vLLM's asymmetric activations (per-token zero points azp): c = sa * sb * (a @ b.T - azp * colsum(b))."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((bm, bk), I8), ml.smem((bn, bk), I8)
  acc = ml.zeros((bm, bn), I32)
  bsum = ml.zeros((bn,), I32)
  for k in ml.range(a.shape[1] // bk):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(b.at[ml.ds(j * bn, bn), ml.ds(k * bk, bk)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
    bsum = bsum + ml.sum(b_s[...].astype(I32), axis=1)
  z = azp.at[ml.ds(i * bm, bm)][...]
  acc = acc - z[:, None] * bsum[None, :]
  c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = (acc.astype(F32) * sa.at[ml.ds(i * bm, bm)][...][:, None]
                                                      * sb.at[ml.ds(j * bn, bn)][...][None, :])


def _azp_make(seed):
  (a, b, sa, sb), kw = _w8a8_make(seed)
  return (a, b, sa, sb, rng_of(seed + 1).integers(-20, 20, 128).astype(np.int32)), kw


def _azp_ref(a, b, sa, sb, azp, **k):
  acc = a.astype(np.int64) @ b.astype(np.int64).T - azp[:, None].astype(np.int64) * b.astype(np.int64).sum(1)[None]
  return acc.astype(np.float32) * sa[:, None] * sb[None, :]


case("w8a8_azp_asymmetric", w8a8_azp, _azp_make, _azp_ref, 1e-5)
