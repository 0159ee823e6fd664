"""Probe 62d: block-scaled and low-precision GEMMs as DeepSeek, vLLM and SGLang write them in Triton, ported with
`from mgpu_dsl import language as tl`: DeepSeek-V3's fp8 GEMM with 1x128 activation scales and 128x128 weight
scales applied to a fresh `tl.dot` per k block (as written, pointer blocks stepped by `a_ptrs += BLOCK_SIZE_K`, and
indexed anew per k block; SGLang's column-major activation scales), vLLM's per-tensor / per-channel scaled fp8 GEMM
with a bias, int8 W8A8 with per-token and per-channel scales, and weight-only GEMMs (int4 nibbles in uint8 bytes
with group-wise scales and zero points; GPTQ's int4 in int32 words; int8 per channel), each against NumPy on exact
inputs in interpret mode and exported for CUDA, with GPU twins.

Class fixed (design note 211): Triton's pointer increment of a pointer block held in a variable, `a_ptrs +=
BLOCK_K` (DeepSeek-V3's `fp8_gemm_kernel`, every Triton GEMM's `b_ptrs += BLOCK_K * stride_bk`), was Python's own
error ("unsupported operand type(s) for +: 'IndexedRef' and 'int'", MG003, hint "static values compute as in
Python"). A static step now moves the block's indices (split over the ref's row-major strides: Triton's address
where the index stays inside its axis; a run-time step split while running); a loop carries the block; a product, a
block indexed by slices are located MG003s with hints (frontend/pointer_steps.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from locate import expect
from probe_util import S, export, f32

F8 = jnp.float8_e4m3fn
R = np.random.default_rng(62)


def q8(shape, dtype=F8):
  """Halves in [-2, 2]: exact in float8 (and every product and block sum exact in float32)."""
  return (R.integers(-4, 5, shape) / 2).astype(np.float32).astype(dtype)


def pow2(shape):
  return (2.0 ** R.integers(-3, 2, shape)).astype(np.float32)


def block_scaled_want(a, b, a_s, b_s, gk=128, gn=128):
  """sum over k blocks of (a_blk @ b_blk.T) * a_s[:, kb] * b_s[n // gn, kb], in float32 (a (M, K), b (N, K))."""
  af, bf = f32(a), f32(b)
  m, k = af.shape
  acc = np.zeros((m, bf.shape[0]), np.float32)
  for t in range(k // gk):
    sl = slice(t * gk, (t + 1) * gk)
    acc += (af[:, sl] @ bf[:, sl].T) * a_s[:, t][:, None] * np.repeat(b_s[:, t], gn)[None, :bf.shape[0]]
  return acc


def _bf16(x):
  return f32(jnp.asarray(x).astype(jnp.bfloat16))


# ---------------------------------------------------------------- DeepSeek-V3's fp8 GEMM, as written
def _grid_mn(a, b, *rest, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, **k):
  return (tl.cdiv(a.shape[0], BLOCK_SIZE_M), tl.cdiv(b.shape[0], BLOCK_SIZE_N))


@mg.mgpu_kernel(out_shape=lambda a, b, a_s, b_s, **k: S((a.shape[0], b.shape[0]), jnp.bfloat16), grid=_grid_mn)
def ds_fp8_gemm(a_ptr, b_ptr, a_s_ptr, b_s_ptr, c_ptr, *, BLOCK_SIZE_M: tl.constexpr = 128,
                BLOCK_SIZE_N: tl.constexpr = 128, BLOCK_SIZE_K: tl.constexpr = 128):
  """DeepSeek-V3 inference/kernel.py's fp8_gemm_kernel: pointer blocks stepped each k block, a fresh dot scaled."""
  M, K = a_ptr.shape
  N = b_ptr.shape[0]
  pid_m = tl.program_id(axis=0)
  pid_n = tl.program_id(axis=1)
  k = tl.cdiv(K, BLOCK_SIZE_K)
  offs_m = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
  offs_n = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
  offs_k = tl.arange(0, BLOCK_SIZE_K)
  a_ptrs = a_ptr.at[offs_m[:, None], offs_k[None, :]]
  b_ptrs = b_ptr.at[offs_n[None, :], offs_k[:, None]]
  a_s_ptrs = a_s_ptr.at[offs_m, 0]
  b_s_ptrs = b_s_ptr.at[offs_n // BLOCK_SIZE_K, 0]
  accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
  for i in range(k):
    a = tl.load(a_ptrs, mask=offs_k[None, :] < K - i * BLOCK_SIZE_K, other=0.0)
    b = tl.load(b_ptrs, mask=offs_k[:, None] < K - i * BLOCK_SIZE_K, other=0.0)
    a_s = tl.load(a_s_ptrs)
    b_s = tl.load(b_s_ptrs)
    accumulator += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
    a_ptrs += BLOCK_SIZE_K
    b_ptrs += BLOCK_SIZE_K
    a_s_ptrs += 1
    b_s_ptrs += 1
  c = accumulator.to(c_ptr.dtype)
  offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
  offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
  tl.store(c_ptr.at[offs_m[:, None], offs_n[None, :]], c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@mg.mgpu_kernel(out_shape=lambda a, b, a_s, b_s, **k: S((a.shape[0], b.shape[0]), jnp.float16), grid=_grid_mn)
def sglang_fp8_gemm_colmajor(A, B, As, Bs, C, *, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                             BLOCK_SIZE_K: tl.constexpr = 128, group_n: tl.constexpr = 128):
  """SGLang's w8a8 block fp8 matmul with column-major activation scales As (K/128, M), a pipelined k loop."""
  M, K = A.shape
  N = B.shape[0]
  offs_am = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
  offs_bn = tl.program_id(1) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
  offs_k = tl.arange(0, BLOCK_SIZE_K)
  acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
  for k in tl.range(0, tl.cdiv(K, BLOCK_SIZE_K), num_stages=3):
    a = tl.load(A.at[offs_am[:, None], k * BLOCK_SIZE_K + offs_k[None, :]],
                mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
    b = tl.load(B.at[offs_bn[None, :], k * BLOCK_SIZE_K + offs_k[:, None]],
                mask=(offs_bn[None, :] < N) & (offs_k[:, None] < K - k * BLOCK_SIZE_K), other=0.0)
    a_s = tl.load(As.at[k, offs_am], mask=offs_am < M, other=0.0)
    b_s = tl.load(Bs.at[offs_bn // group_n, k], mask=offs_bn < N, other=0.0)
    acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
  tl.store(C.at[offs_am[:, None], offs_bn[None, :]], acc.to(tl.float16),
           mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


def _block_args(m, n, k):
  return q8((m, k)), q8((n, k)), pow2((m, k // 128)), pow2((-(-n // 128), k // 128))


DS_CASES = [(256, 256, 512), (100, 384, 256), (128, 200, 384)]


@pytest.mark.parametrize("m,n,k", DS_CASES)
def test_deepseek_fp8_gemm_as_written(m, n, k):
  args = _block_args(m, n, k)
  got = ds_fp8_gemm(*args, interpret=True)
  np.testing.assert_array_equal(f32(got), _bf16(block_scaled_want(*args)))
  export(ds_fp8_gemm, *args)


@pytest.mark.parametrize("m,n,k,bm,bn", [(64, 128, 256, 64, 128), (100, 256, 384, 64, 64), (256, 256, 256, 128, 64)])
def test_sglang_fp8_gemm_column_major_scales(m, n, k, bm, bn):
  a, b, a_s, b_s = _block_args(m, n, k)
  args = (a, b, np.ascontiguousarray(a_s.T), b_s)
  got = sglang_fp8_gemm_colmajor(*args, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, interpret=True)
  want = block_scaled_want(a, b, a_s, b_s).astype(np.float16)
  np.testing.assert_array_equal(f32(got), f32(want))
  export(sglang_fp8_gemm_colmajor, *args, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn)


# ---------------------------------------------------------------- vLLM's scaled fp8 GEMM (per tensor / per channel)
def _grid_flat(a, b, *rest, BM=64, BN=128, **k):
  return (tl.cdiv(a.shape[0], BM) * tl.cdiv(b.shape[1], BN),)


@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb, bias, **k: S((a.shape[0], b.shape[1]), jnp.bfloat16), grid=_grid_flat)
def scaled_mm(a_ptr, b_ptr, scale_a_ptr, scale_b_ptr, bias_ptr, c_ptr, *, BM: tl.constexpr = 64,
              BN: tl.constexpr = 128, BK: tl.constexpr = 64):
  """vLLM's triton_scaled_mm: scale_a (1, 1) or (M, 1), scale_b (1, 1) or (N, 1), a bias, b stored (K, N)."""
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  pid = tl.program_id(0)
  num_pid_n = tl.cdiv(N, BN)
  pid_m = pid // num_pid_n
  pid_n = pid % num_pid_n
  offs_am = pid_m * BM + tl.arange(0, BM)
  offs_bn = pid_n * BN + tl.arange(0, BN)
  offs_k = tl.arange(0, BK)
  masks_am = offs_am < M
  masks_bn = offs_bn < N
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for k in range(0, tl.cdiv(K, BK)):
    masks_k = offs_k < K
    a = tl.load(a_ptr.at[offs_am[:, None], offs_k[None, :]], mask=masks_am[:, None] & masks_k[None, :], other=0.0)
    b = tl.load(b_ptr.at[offs_k[:, None], offs_bn[None, :]], mask=masks_k[:, None] & masks_bn[None, :], other=0.0)
    acc = tl.dot(a, b, acc, out_dtype=tl.float32)
    offs_k += BK
  if scale_a_ptr.shape[0] == 1:
    acc = acc * tl.load(scale_a_ptr.at[0, 0])
  else:
    acc = acc * tl.load(scale_a_ptr.at[offs_am[:, None], tl.arange(0, 1)[None, :]], mask=masks_am[:, None])
  if scale_b_ptr.shape[0] == 1:
    acc = acc * tl.load(scale_b_ptr.at[0, 0])
  else:
    acc = acc * tl.load(scale_b_ptr.at[offs_bn[:, None], tl.arange(0, 1)[None, :]], mask=masks_bn[:, None]).T
  acc += tl.load(bias_ptr.at[offs_bn], mask=masks_bn)[None, :]
  tl.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc.to(c_ptr.dtype), mask=masks_am[:, None] & masks_bn[None, :])


def _scaled_mm_case(m, n, k, per):
  sa, sb = (pow2((1, 1)), pow2((1, 1))) if per == "tensor" else (pow2((m, 1)), pow2((n, 1)))
  return q8((m, k)), q8((k, n)), sa, sb, pow2((n,))


def _scaled_mm_want(a, b, sa, sb, bias):
  return _bf16((f32(a) @ f32(b)) * sa.reshape(-1, 1) * sb.reshape(1, -1) + bias[None, :])


@pytest.mark.parametrize("m,n,k,per", [(128, 256, 256, "tensor"), (128, 256, 256, "channel"), (70, 200, 192, "tensor"),
                                       (70, 200, 192, "channel")])
def test_vllm_scaled_fp8_mm(m, n, k, per):
  args = _scaled_mm_case(m, n, k, per)
  np.testing.assert_array_equal(f32(scaled_mm(*args, interpret=True)), _scaled_mm_want(*args))
  export(scaled_mm, *args)


# ---------------------------------------------------------------- int8 W8A8, per token and per channel
def _grid_64(a, b, *rest, **k):
  return (tl.cdiv(a.shape[0], 64), tl.cdiv(b.shape[0], 64))


def _grid_kn(a, b, *rest, **k):          # (b packed along K: N is its second axis)
  return (tl.cdiv(a.shape[0], 64), tl.cdiv(b.shape[1], 64))


@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb, **k: S((a.shape[0], b.shape[0]), jnp.float16), grid=_grid_64)
def w8a8_int8(A, B, As, Bs, C, *, BM: tl.constexpr = 64, BN: tl.constexpr = 64, BK: tl.constexpr = 64):
  """SGLang's per-token x per-channel int8 GEMM: int32 accumulator, scales in the epilogue, b stored (N, K)."""
  M, K = A.shape
  N = B.shape[0]
  rm = tl.program_id(0) * BM + tl.arange(0, BM)
  rn = tl.program_id(1) * BN + tl.arange(0, BN)
  rk = tl.arange(0, BK)
  acc = tl.zeros((BM, BN), dtype=tl.int32)
  for k in range(tl.cdiv(K, BK)):
    a = tl.load(A.at[rm[:, None], rk[None, :]], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
    b = tl.load(B.at[rn[None, :], rk[:, None]], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0)
    acc += tl.dot(a, b, out_dtype=tl.int32)
    rk += BK
  sa = tl.load(As.at[rm], mask=rm < M, other=0.0)
  sb = tl.load(Bs.at[rn], mask=rn < N, other=0.0)
  c = acc.to(tl.float32) * sa[:, None] * sb[None, :]
  tl.store(C.at[rm[:, None], rn[None, :]], c.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _w8a8_case(m, n, k):
  return (R.integers(-128, 128, (m, k)).astype(np.int8), R.integers(-128, 128, (n, k)).astype(np.int8),
          pow2((m,)) * np.float32(2.0 ** -12), pow2((n,)))


def _w8a8_want(a, b, sa, sb):
  y = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.float32)
  return (y * sa[:, None] * sb[None, :]).astype(np.float16)


@pytest.mark.parametrize("m,n,k", [(128, 128, 256), (50, 192, 160)])
def test_int8_w8a8_per_token_per_channel(m, n, k):
  args = _w8a8_case(m, n, k)
  np.testing.assert_array_equal(f32(w8a8_int8(*args, interpret=True)), f32(_w8a8_want(*args)))
  export(w8a8_int8, *args)


# ---------------------------------------------------------------- weight-only int4 / int8 dequantisation GEMMs
@mg.mgpu_kernel(out_shape=lambda x, qw, sc, z, **k: S((x.shape[0], qw.shape[1]), jnp.float16), grid=_grid_kn)
def w4a16_bytes(X, QW, SC, Z, O, *, BM: tl.constexpr = 64, BN: tl.constexpr = 64, BK: tl.constexpr = 64,
                G: tl.constexpr = 64):
  """int4 weights two to a uint8 byte along K (low nibble first), group-wise scales and zero points, dequantised in
  registers to float16 for the dot."""
  M, K = X.shape
  N = QW.shape[1]
  rm = tl.program_id(0) * BM + tl.arange(0, BM)
  rn = tl.program_id(1) * BN + tl.arange(0, BN)
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for k0 in range(0, K, BK):
    rk = k0 + tl.arange(0, BK)
    x = tl.load(X.at[rm[:, None], rk[None, :]], mask=rm[:, None] < M, other=0.0)
    packed = tl.load(QW.at[(rk // 2)[:, None], rn[None, :]], mask=rn[None, :] < N, other=0)
    w = (packed.to(tl.int32) >> ((rk % 2) * 4)[:, None]) & 0xF
    s = tl.load(SC.at[k0 // G, rn], mask=rn < N, other=0.0)
    z = tl.load(Z.at[k0 // G, rn], mask=rn < N, other=0).to(tl.int32)
    wd = ((w - z[None, :]).to(tl.float32) * s[None, :].to(tl.float32)).to(tl.float16)
    acc = tl.dot(x, wd, acc)
  tl.store(O.at[rm[:, None], rn[None, :]], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _w4_bytes_want(x, qw, sc, z, G=64):
  q = qw.astype(np.int32)
  w = np.empty((q.shape[0] * 2, q.shape[1]), np.int32)
  w[0::2], w[1::2] = q & 0xF, q >> 4
  wd = f32(((w - np.repeat(z.astype(np.int32), G, 0)) * np.repeat(f32(sc), G, 0)).astype(np.float16))
  return (f32(x) @ wd).astype(np.float16)


def _w4_bytes_case(m, n, k):
  return ((R.integers(-4, 5, (m, k)) / 4).astype(np.float16), R.integers(0, 256, (k // 2, n)).astype(np.uint8),
          (2.0 ** R.integers(-4, 0, (k // 64, n))).astype(np.float16), R.integers(0, 16, (k // 64, n)).astype(np.uint8))


@mg.mgpu_kernel(out_shape=lambda x, qw, sc, qz, **k: S((x.shape[0], qw.shape[1]), jnp.float16), grid=_grid_kn)
def gptq_gemm(a_ptr, b_ptr, scales_ptr, zeros_ptr, c_ptr, *, BM: tl.constexpr = 64, BN: tl.constexpr = 64,
              BK: tl.constexpr = 64, groupsize: tl.constexpr = 128):
  """GPTQ's Triton GEMM: eight int4 to an int32 word along K, zeros packed along N (stored minus one), pointer blocks
  stepped by `b_ptrs += (BK // 8) * N` (a whole number of rows of b)."""
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  offs_am = tl.program_id(0) * BM + tl.arange(0, BM)
  offs_bn = tl.program_id(1) * BN + tl.arange(0, BN)
  offs_k = tl.arange(0, BK)
  a_ptrs = a_ptr.at[offs_am[:, None], offs_k[None, :]]
  a_mask = offs_am[:, None] < M
  b_ptrs = b_ptr.at[(offs_k[:, None] // 8), offs_bn[None, :]]
  shifter = (offs_k % 8) * 4
  zeros_shifter = (offs_bn % 8) * 4
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for k in range(0, K // BK):
    g_id = k * BK // groupsize
    scales = tl.load(scales_ptr.at[g_id, offs_bn])
    zeros = (tl.load(zeros_ptr.at[g_id, offs_bn // 8]) >> zeros_shifter) & 0xF
    zeros = zeros + 1
    a = tl.load(a_ptrs, mask=a_mask, other=0.0)
    b = (tl.load(b_ptrs) >> shifter[:, None]) & 0xF
    b = (b - zeros[None, :]).to(tl.float16) * scales[None, :]
    acc += tl.dot(a, b)
    a_ptrs += BK
    b_ptrs += (BK // 8) * N
  tl.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc.to(tl.float16), mask=a_mask & (offs_bn[None, :] < N))


def _nibbles(words, axis):
  u = words.view(np.uint32)
  return np.stack([(u >> (4 * i)) & 0xF for i in range(8)], axis + 1).reshape(
      *(u.shape[:axis] + (-1,) + u.shape[axis + 1:])).astype(np.int32)


def _gptq_want(x, qw, sc, qz, G=128):
  w, z = _nibbles(qw, 0), _nibbles(qz, 1) + 1
  wd = f32((w - np.repeat(z, G, 0)).astype(np.float16) * np.repeat(sc, G, 0))
  return (f32(x) @ wd).astype(np.float16)


def _gptq_case(m, n, k):
  words = lambda s: R.integers(0, 2 ** 32, s, dtype=np.uint64).astype(np.uint32).view(np.int32)
  return ((R.integers(-4, 5, (m, k)) / 8).astype(np.float16), words((k // 8, n)),
          (2.0 ** R.integers(-6, -3, (k // 128, n))).astype(np.float16), words((k // 128, n // 8)))


@mg.mgpu_kernel(out_shape=lambda x, w, s, **k: S((x.shape[0], w.shape[0]), jnp.bfloat16), grid=_grid_64)
def w8a16(X, W, SC, O, *, BM: tl.constexpr = 64, BN: tl.constexpr = 64, BK: tl.constexpr = 64):
  """int8 weights (N, K) per output channel, bfloat16 activations: the weights converted in registers; pointer
  blocks stepped along K."""
  M, K = X.shape
  N = W.shape[0]
  offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
  offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
  offs_k = tl.arange(0, BK)
  x_ptrs = X.at[offs_m[:, None], offs_k[None, :]]
  w_ptrs = W.at[offs_n[None, :], offs_k[:, None]]
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for _ in range(K // BK):
    acc += tl.dot(tl.load(x_ptrs, mask=offs_m[:, None] < M, other=0.0),
                  tl.load(w_ptrs, mask=offs_n[None, :] < N, other=0).to(tl.bfloat16))
    x_ptrs += BK
    w_ptrs += BK
  s = tl.load(SC.at[offs_n], mask=offs_n < N, other=0.0)
  tl.store(O.at[offs_m[:, None], offs_n[None, :]], (acc * s[None, :]).to(tl.bfloat16),
           mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _w8a16_case(m, n, k):
  return ((R.integers(-4, 5, (m, k)) / 4).astype(jnp.bfloat16), R.integers(-128, 128, (n, k)).astype(np.int8),
          pow2((n,)) * np.float32(2.0 ** -6))


def _w8a16_want(x, w, s):
  return _bf16((f32(x) @ f32(w).T) * s[None, :])


WEIGHT_ONLY = [(w4a16_bytes, _w4_bytes_case, _w4_bytes_want), (gptq_gemm, _gptq_case, _gptq_want),
               (w8a16, _w8a16_case, _w8a16_want)]


@pytest.mark.parametrize("which", range(len(WEIGHT_ONLY)))
@pytest.mark.parametrize("m,n,k", [(64, 128, 256), (17, 192, 512)])
def test_weight_only_dequant_gemms(which, m, n, k):
  kernel, case, want = WEIGHT_ONLY[which]
  args = case(m, n, k)
  np.testing.assert_array_equal(f32(kernel(*args, interpret=True)), f32(want(*args)))
  export(kernel, *args)


# ---------------------------------------------------------------- pointer blocks stepped: Triton's flat address
@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), jnp.float32), grid=_grid_kn)
def steps_by_rows(a_ptr, b_ptr, c_ptr, *, BM: tl.constexpr = 64, BN: tl.constexpr = 64, BK: tl.constexpr = 32):
  """b stored (K, N): `b_ptrs += BK * stride_bk` moves BK rows, `a_ptrs += BK * stride_ak` BK columns."""
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  stride_ak, stride_bk = 1, N
  offs_am = tl.program_id(0) * BM + tl.arange(0, BM)
  offs_bn = tl.program_id(1) * BN + tl.arange(0, BN)
  offs_k = tl.arange(0, BK)
  a_ptrs = a_ptr.at[offs_am[:, None], offs_k[None, :]]
  b_ptrs = b_ptr.at[offs_k[:, None], offs_bn[None, :]]
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for k in range(0, tl.cdiv(K, BK)):
    a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BK), other=0.0)
    b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BK) & (offs_bn[None, :] < N), other=0.0)
    acc = tl.dot(a, b, acc)
    a_ptrs += BK * stride_ak
    b_ptrs += BK * stride_bk
  tl.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc, mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


@mg.mgpu_kernel(out_shape=lambda x: S((1, 128), jnp.float32), grid=(1,))
def steps_back(x_ptr, o_ptr):
  """A block walked from the end (`ptrs -= 128`), one stepped by a run-time scalar (`x.at[offs] + s`, 1-D)."""
  n = x_ptr.shape[0]
  offs = tl.arange(0, 128)
  ptrs = x_ptr.at[n - 128 + offs]
  acc = tl.zeros((128,), tl.float32)
  for i in range(n // 128):
    acc += tl.load(ptrs) * (i + 1)
    ptrs -= 128
  shifted = x_ptr.at[offs] + (tl.program_id(0) + 64)
  acc += tl.load(shifted)
  tl.store(o_ptr.at[0, offs], acc)


def test_pointer_blocks_step_as_tritons_addresses():
  x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
  flat, r, c = x.reshape(-1), np.arange(4)[:, None], np.arange(32)[None, :]
  want = np.stack([flat[r * 64 + c + 80], flat[(4 + r) * 64 + 32 + c - 80], flat[r * 64 + c + r * 65]])
  np.testing.assert_array_equal(np.asarray(steps_at_run_time(x, interpret=True)), want)
  export(steps_at_run_time, x)
  a, b = (R.integers(-4, 5, (100, 96)) / 4).astype(np.float16), (R.integers(-4, 5, (96, 80)) / 4).astype(np.float16)
  np.testing.assert_array_equal(f32(steps_by_rows(a, b, interpret=True)), f32(a) @ f32(b))
  export(steps_by_rows, a, b)
  a, b = (R.integers(-4, 5, (128, 256)) / 4).astype(np.float16), (R.integers(-4, 5, (128, 256)) / 4).astype(np.float16)
  want = f32(a) @ f32(b).T
  want[64:] *= 2
  np.testing.assert_array_equal(np.asarray(steps_in_while_and_if(a, b, interpret=True)), want)
  export(steps_in_while_and_if, a, b)
  x = (R.integers(-8, 8, 512) / 4).astype(np.float32)
  want = (x.reshape(4, 128)[::-1] * np.arange(1, 5, dtype=np.float32)[:, None]).sum(0) + x[64:192]
  np.testing.assert_array_equal(f32(steps_back(x, interpret=True)), want[None])
  export(steps_back, x)


@mg.mgpu_kernel(out_shape=lambda x: S((3, 4, 32), x.dtype), grid=(1,))
def steps_at_run_time(x_ptr, o_ptr):
  """Run-time steps of a 2-D block, split over its axes while running: a scalar either way, a tensor of steps."""
  rows = tl.arange(0, 4)
  cols = tl.arange(0, 32)
  ptrs = x_ptr.at[rows[:, None], cols[None, :]]
  s = (tl.program_id(0) + 1) * x_ptr.shape[1] + 16           # one row and 16 columns on
  tl.store(o_ptr.at[0, rows[:, None], cols[None, :]], tl.load(ptrs + s))
  back = x_ptr.at[(4 + rows)[:, None], (32 + cols)[None, :]]
  tl.store(o_ptr.at[1, rows[:, None], cols[None, :]], tl.load(back - s))
  per_row = (rows * x_ptr.shape[1] + rows)[:, None]          # row r: r rows and r columns on
  tl.store(o_ptr.at[2, rows[:, None], cols[None, :]], tl.load(ptrs + per_row))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32),
                grid=lambda a, b: (a.shape[0] // 64, b.shape[0] // 64))
def steps_in_while_and_if(a_ptr, b_ptr, c_ptr):
  """Blocks carried by a pipelined loop (`a_ptrs = a_ptrs + 64`, `64 + b_ptrs`), a while loop, and an if."""
  K = a_ptr.shape[1]
  offs_m = tl.program_id(0) * 64 + tl.arange(0, 64)
  offs_n = tl.program_id(1) * 64 + tl.arange(0, 64)
  offs_k = tl.arange(0, 64)
  a_ptrs = a_ptr.at[offs_m[:, None], offs_k[None, :]]
  b_ptrs = b_ptr.at[offs_n[None, :], offs_k[:, None]]
  acc = tl.zeros((64, 64), tl.float32)
  for k in tl.range(0, K // 128, num_stages=2):
    acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
    a_ptrs = a_ptrs + 64
    b_ptrs = 64 + b_ptrs
  k = K // 2
  while k < K:
    acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
    a_ptrs += 64
    b_ptrs += 64
    k += 64
  c_ptrs = c_ptr.at[offs_m[:, None], offs_n[None, :]]
  if tl.program_id(0) % 2 == 1:
    c_ptrs -= 64 * c_ptr.shape[1]
    acc = acc * 2
  tl.store(c_ptrs + 64 * c_ptr.shape[1] * (tl.program_id(0) % 2), acc)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def block_times_two(x_ptr, o_ptr):
  offs = tl.arange(0, 64)
  ptrs = x_ptr.at[offs[:, None], offs[None, :]]
  y = ptrs * 2
  tl.store(o_ptr.at[offs[:, None], offs[None, :]], y)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def block_of_slices(x_ptr, o_ptr):
  offs = tl.arange(0, 64)
  ptrs = x_ptr.at[offs, :]
  ptrs += 64
  tl.store(o_ptr.at[offs[:, None], offs[None, :]], tl.load(ptrs))


def test_pointer_steps_with_no_address_are_located():
  spec = [S((64, 64), jnp.float32)]
  expect(block_times_two, spec, mg.KernelTypeError, "ptrs * 2",
         "ptrs is a block of x_ptr's elements (Triton's pointer block): it moves by an integer added to it or"
         " subtracted from it (ptrs += BLOCK_K), and ptrs * 2 is neither",
         hint="to compute with the elements, load them first: tl.load(ptrs, mask=..., other=0) * ...")
  expect(block_of_slices, spec, mg.KernelTypeError, "ptrs += 64",
         "ptrs indexes x_ptr with slices or fewer indices than its 2 axes, so it has no one element per address to"
         " move by 64",
         hint="give every axis an index (a run of offsets or a number), x_ptr.at[rows[:, None], cols[None, :]], or"
              " move the offsets themselves: offs_k += BLOCK_K")


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_probe62d_gemms_on_the_gpu():
  for m, n, k in DS_CASES:
    args = _block_args(m, n, k)
    np.testing.assert_allclose(f32(jax.jit(ds_fp8_gemm)(*args)), _bf16(block_scaled_want(*args)), rtol=2e-2, atol=2e-2)
  a, b, a_s, b_s = _block_args(100, 256, 384)
  got = jax.jit(lambda *x: sglang_fp8_gemm_colmajor(*x, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64))(a, b, a_s.T.copy(), b_s)
  np.testing.assert_allclose(f32(got), f32(block_scaled_want(a, b, a_s, b_s).astype(np.float16)), rtol=2e-2, atol=2e-2)
  for per in ("tensor", "channel"):
    args = _scaled_mm_case(70, 200, 192, per)
    np.testing.assert_allclose(f32(jax.jit(scaled_mm)(*args)), _scaled_mm_want(*args), rtol=2e-2, atol=2e-2)
  args = _w8a8_case(50, 192, 160)
  np.testing.assert_array_equal(f32(jax.jit(w8a8_int8)(*args)), f32(_w8a8_want(*args)))
  for kernel, case, want in WEIGHT_ONLY:
    args = case(17, 192, 512)
    np.testing.assert_allclose(f32(jax.jit(kernel)(*args)), f32(want(*args)), rtol=1e-2, atol=1e-2)
  a, b = (R.integers(-4, 5, (100, 96)) / 4).astype(np.float16), (R.integers(-4, 5, (96, 80)) / 4).astype(np.float16)
  np.testing.assert_array_equal(f32(jax.jit(steps_by_rows)(a, b)), f32(a) @ f32(b))
  a, b = (R.integers(-4, 5, (128, 256)) / 4).astype(np.float16), (R.integers(-4, 5, (128, 256)) / 4).astype(np.float16)
  want = f32(a) @ f32(b).T
  want[64:] *= 2
  np.testing.assert_array_equal(np.asarray(jax.jit(steps_in_while_and_if)(a, b)), want)
  x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
  np.testing.assert_array_equal(np.asarray(jax.jit(steps_at_run_time)(x)), np.asarray(steps_at_run_time(x, interpret=True)))
