"""Probe 68b's corpus, its fourth part: edges of the same kernels (K and N tails of a GPTQ GEMM under masks, an fp8
dot into a float16 accumulator, a persistent tile scheduler over ragged groups, vLLM's split-K of float16 atomics, a
split-K int4 GEMV) and the kernels of the classes fixed (a batch-1 GEMV's (1, k, n) product in a loop, AWQ's (2, 8)
zero words of two groups in one k tile beside its shift table). Same CASES form as probe68b_quant.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68b_quant import BF16, E4M3, F16, F32, I32, I8, S, _w8a8_ref, f32, int8_gemm_raw, pack_rows8, rng_of
from probe68b_fused import _gg_ref, expert_rows_dot, normal
from probe68b_more import fp8_tiles, splitk_atomics

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)



@mg.mgpu_kernel(out_shape=lambda a, qw, sc, **k: S((a.shape[0], sc.shape[1]), F32),
                grid=lambda a, qw, sc, *, BM, BN, **k: (ml.cdiv(a.shape[0], BM), ml.cdiv(sc.shape[1], BN)))
def gptq_tails(a_ptr, b_ptr, scales_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr, group: ml.constexpr):
  M, K = a_ptr.shape
  N = scales_ptr.shape[1]
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  acc = ml.zeros((BM, BN), F32)
  for k in range(0, ml.cdiv(K, BK)):
    rk = k * BK + ml.arange(0, BK)
    a = ml.load(a_ptr.at[rm[:, None], rk[None, :]], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = ml.load(b_ptr.at[(rk // 8)[:, None], rn[None, :]], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
    s = ml.load(scales_ptr.at[(rk // group)[:, None], rn[None, :]], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    w = ((((b >> ((rk % 8) * 4)[:, None]) & 0xF) - 8) * s).to(F16)
    acc = ml.dot(a, w, acc)
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))



def _tails_make(seed):
  r = rng_of(seed)
  K, N, g = 96, 100, 32
  q = r.integers(0, 16, (K, N + 4))
  s = np.asarray(jnp.asarray(r.random((K // g, N)) * 0.05, F16))
  return (normal(r, (5, K), F16), pack_rows8(q)[:, :N], s), dict(BM=16, BN=64, BK=64, group=g)


def _tails_ref(a, qw, s, *, group, **k):
  q = np.stack([(qw.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 1).reshape(-1, qw.shape[1])
  w = np.asarray(jnp.asarray((q.astype(np.float32) - 8) * np.repeat(f32(s), group, 0), F16))
  return f32(a) @ f32(w)


case("gptq_k_and_n_tails_masked", gptq_tails, _tails_make, _tails_ref, 1e-2)



def _f16acc_make(seed):
  r = rng_of(seed)
  return (normal(r, (64, 128), E4M3, 0.5), normal(r, (64, 128), E4M3, 0.5)), dict(ACC=F16)


case("fp8_f16_accumulator", fp8_tiles, _f16acc_make, lambda a, b, **k: f32(a) @ f32(b).T, 2e-2)


@mg.mgpu_kernel(out_shape=lambda x, w, offs, **k: S((x.shape[0], w.shape[2]), F32), grid=lambda x, w, offs, *, P, **k: (P,))
def grouped_persistent(x_ptr, w_ptr, offs_ptr, o_ptr, *, BM: ml.constexpr, P: ml.constexpr):
  """A tile scheduler over ragged groups: each program walks the global tile list, finding its group by a scan."""
  E, K, N = w_ptr.shape
  rn = ml.arange(0, N)
  rk = ml.arange(0, K)
  total = 0
  for e in ml.static_range(E):
    total += ml.cdiv(offs_ptr[e + 1] - offs_ptr[e], BM)
  t = ml.program_id(0)
  while t < total:
    e_of = 0
    first = 0
    seen = 0
    for e in ml.static_range(E):
      n_t = ml.cdiv(offs_ptr[e + 1] - offs_ptr[e], BM)
      if (seen <= t) & (t < seen + n_t):
        e_of = e
        first = seen
      seen += n_t
    start, stop = offs_ptr[e_of], offs_ptr[e_of + 1]
    rm = start + (t - first) * BM + ml.arange(0, BM)
    xa = ml.load(x_ptr.at[rm[:, None], rk[None, :]], mask=rm[:, None] < stop, other=0.0)
    wb = ml.load(w_ptr.at[e_of, rk[:, None], rn[None, :]])
    ml.store(o_ptr.at[rm[:, None], rn[None, :]], ml.dot(xa, wb), mask=rm[:, None] < stop)
    t += P


def _gp_make(seed):
  r = rng_of(seed)
  offs = np.concatenate([[0], np.cumsum([20, 0, 70, 38])]).astype(np.int32)
  return (normal(r, (128, 64), BF16), normal(r, (4, 64, 64), BF16, 0.2), offs), dict(BM=64, P=2)


case("grouped_gemm_persistent_scheduler", grouped_persistent, _gp_make, _gg_ref, 1e-5)



def _skf16_make(seed):
  r = rng_of(seed)
  return (normal(r, (64, 256), F16, 0.5), normal(r, (64, 256), F16, 0.5)), dict(SPLIT=2)


case("splitk_f16_atomics", splitk_atomics, _skf16_make, lambda a, b, **k: f32(a) @ f32(b).T, 2e-2)



@mg.mgpu_kernel(out_shape=lambda x, qw, s, **k: S((x.shape[0], qw.shape[1]), F32),
                grid=lambda x, qw, s, *, BN, SPLIT, **k: (qw.shape[1] // BN, SPLIT))
def gemv_splitk(x_ptr, qw_ptr, s_ptr, y_ptr, *, BN: ml.constexpr, BK: ml.constexpr, SPLIT: ml.constexpr):
  """Batch-1 int4 decode, K split among SPLIT programs adding atomically (a long K, a short N)."""
  K = x_ptr.shape[1]
  rn = ml.program_id(0) * BN + ml.arange(0, BN)
  per = K // SPLIT
  acc = ml.zeros((BN,), F32)
  for k in range(ml.program_id(1) * per, ml.program_id(1) * per + per, BK):
    rk = k + ml.arange(0, BK)
    p = ml.load(qw_ptr.at[(rk // 8)[:, None], rn[None, :]])
    w = (((p >> ((rk % 8) * 4)[:, None]) & 0xF) - 8).to(F32)
    xv = ml.load(x_ptr.at[0, rk]).to(F32)
    acc += ml.sum(w * xv[:, None], axis=0)
  ml.atomic_add(y_ptr.at[0, rn], acc * ml.load(s_ptr.at[rn]))


def _gvs_make(seed):
  r = rng_of(seed)
  q = r.integers(0, 16, (512, 64))
  return (normal(r, (1, 512), F16), pack_rows8(q), (r.random(64) * 0.1).astype(np.float32)), \
      dict(BN=32, BK=64, SPLIT=4)


def _gvs_ref(x, qw, s, **k):
  q = np.stack([(qw.view(np.uint32) >> (4 * i)) & 0xF for i in range(8)], 1).reshape(-1, qw.shape[1])
  return (f32(x) @ (q - 8.0)) * s[None]


case("gemv_int4_splitk_atomics", gemv_splitk, _gvs_make, _gvs_ref, 1e-5)


# ---------------------------------------------------------------- vLLM's Triton block-FP8 GEMM, ported line by line
@mg.mgpu_kernel(out_shape=lambda a, b, As, Bs, **k: S((a.shape[0], b.shape[0]), BF16),
                grid=lambda a, b, As, Bs, *, BLOCK_SIZE_M, BLOCK_SIZE_N, **k: (ml.cdiv(a.shape[0], BLOCK_SIZE_M) * ml.cdiv(b.shape[0], BLOCK_SIZE_N),))
def w8a8_block_fp8_matmul(A, B, As, Bs, C, *, group_n: ml.constexpr, group_k: ml.constexpr, BLOCK_SIZE_M: ml.constexpr,
                          BLOCK_SIZE_N: ml.constexpr, BLOCK_SIZE_K: ml.constexpr, GROUP_SIZE_M: ml.constexpr):
  """vLLM's _w8a8_block_fp8_matmul, ported: B (N, K) read as (K, N) tiles through pointer arithmetic."""
  M, K = A.shape
  N = B.shape[0]
  pid_m, pid_n = ml.grouped_ids(ml.program_id(axis=0), ml.cdiv(M, BLOCK_SIZE_M), ml.cdiv(N, BLOCK_SIZE_N),
                                group=GROUP_SIZE_M)        # (Triton's GROUP_SIZE_M swizzle of pid)
  offs_am = (pid_m * BLOCK_SIZE_M + ml.arange(0, BLOCK_SIZE_M)) % M
  offs_bsn = (pid_n * BLOCK_SIZE_N + ml.arange(0, BLOCK_SIZE_N)) % N
  offs_k = ml.arange(0, BLOCK_SIZE_K)
  accumulator = ml.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=jnp.float32)
  for k in range(0, ml.cdiv(K, BLOCK_SIZE_K)):
    kk = k * BLOCK_SIZE_K + offs_k
    a = ml.load(A.at[offs_am[:, None], kk[None, :]], mask=kk[None, :] < K, other=0.0)
    b = ml.load(B.at[offs_bsn[None, :], kk[:, None]], mask=kk[:, None] < K, other=0.0)
    k_start = k * BLOCK_SIZE_K
    offs_ks = k_start // group_k
    a_s = ml.load(As.at[offs_am, offs_ks])
    b_s = ml.load(Bs.at[offs_bsn // group_n, offs_ks])
    accumulator += ml.dot(a, b) * a_s[:, None] * b_s[None, :]
  c = accumulator.to(C.dtype)
  offs_cm = pid_m * BLOCK_SIZE_M + ml.arange(0, BLOCK_SIZE_M)
  offs_cn = pid_n * BLOCK_SIZE_N + ml.arange(0, BLOCK_SIZE_N)
  c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
  ml.store(C.at[offs_cm[:, None], offs_cn[None, :]], c, mask=c_mask)


def _bf8_make(bm, bn, bk):
  def make(seed):
    r = rng_of(seed)
    M, N, K = 80, 256, 256
    return (normal(r, (M, K), E4M3), normal(r, (N, K), E4M3), (r.random((M, K // 128)) + 0.5).astype(np.float32),
            (r.random((N // 128, K // 128)) + 0.5).astype(np.float32)), \
        dict(group_n=128, group_k=128, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8)
  return make


def _bf8_ref(a, b, sa, sb, **k):
  out = np.zeros((a.shape[0], b.shape[0]), np.float32)
  for kk in range(a.shape[1] // 128):
    part = f32(a)[:, kk * 128:(kk + 1) * 128] @ f32(b)[:, kk * 128:(kk + 1) * 128].T
    out += part * sa[:, kk:kk + 1] * np.repeat(sb[:, kk], 128)[None]
  return np.asarray(jnp.asarray(out, BF16))


case("vllm_w8a8_block_fp8_matmul", w8a8_block_fp8_matmul, _bf8_make(64, 128, 128), _bf8_ref, 1e-2)
case("vllm_w8a8_block_fp8_matmul_m16_bk64", w8a8_block_fp8_matmul, _bf8_make(16, 64, 64), _bf8_ref, 1e-2)


# ---------------------------------------------------------------- int8 weights (n, k) read as (k, n) tiles by pointers
def _kn_make(seed):
  r = rng_of(seed)
  return (r.integers(-128, 128, (80, 256)).astype(np.int8), r.integers(-128, 128, (256, 256)).astype(np.int8)), \
      dict(BM=16, BN=64, BK=64, B_NK=True)


case("int8_weights_read_as_kn_tiles", int8_gemm_raw, _kn_make,
     lambda a, b, **k: (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32), 0)


# ---------------------------------------------------------------- one program a quantisation group or a row (1-D tiles)
@mg.mgpu_kernel(out_shape=lambda y, **k: (S(y.shape, E4M3), S((y.size // k["group_size"],), F32)),
                grid=lambda y, *, group_size, **k: (y.size // group_size,))
def per_token_group_quant_fp8(y_ptr, y_q_ptr, y_s_ptr, *, group_size: ml.constexpr, BLOCK: ml.constexpr):
  """SGLang's _per_token_group_quant_fp8 on a flattened (tokens * hidden,) view: one program a group."""
  g_id = ml.program_id(0)
  cols = ml.arange(0, BLOCK)
  mask = cols < group_size
  y = ml.load(y_ptr.at[g_id * group_size + cols], mask=mask, other=0.0).to(jnp.float32)
  _absmax = ml.maximum(ml.max(ml.abs(y)), 1e-10)
  y_s = _absmax / 448.0
  y_q = ml.clamp(y / y_s, -448.0, 448.0).to(y_q_ptr.dtype)
  ml.store(y_q_ptr.at[g_id * group_size + cols], y_q, mask=mask)
  ml.store(y_s_ptr.at[g_id], y_s)


def _ptg_make(seed):
  return (normal(rng_of(seed), (8 * 256,), BF16, 3.0),), dict(group_size=128, BLOCK=128)


def _ptg_ref(y, **k):
  v = f32(y).reshape(-1, 128)
  s = np.asarray(jnp.maximum(jnp.abs(jnp.asarray(v)).max(1), 1e-10) / 448.0)
  return np.asarray(jnp.asarray(np.clip(v / s[:, None], -448, 448).reshape(-1), E4M3)), s


case("sglang_per_token_group_quant_fp8_1d", per_token_group_quant_fp8, _ptg_make, _ptg_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x, **k: (S(x.shape, jnp.int8), S((x.shape[0], 1), F32)), grid=lambda x, **k: (x.shape[0],))
def per_token_quant_int8(x_ptr, xq_ptr, scale_ptr, *, BLOCK: ml.constexpr):
  """vLLM's _per_token_quant_int8: one program a row, a power-of-two block over an odd hidden size."""
  N = x_ptr.shape[1]
  row_id = ml.program_id(0)
  cols = ml.arange(0, BLOCK)
  mask = cols < N
  x = ml.load(x_ptr.at[row_id, cols], mask=mask, other=0.0).to(jnp.float32)
  absmax = ml.maximum(ml.max(ml.abs(x)), 1e-10)
  scale_x = absmax / 127
  x_q = x * (127 / absmax)
  x_q = jnp.round(x_q).astype(jnp.int8)
  ml.store(xq_ptr.at[row_id, cols], x_q, mask=mask)
  ml.store(scale_ptr.at[row_id, 0], scale_x)


def _ptq_make(seed):
  return (normal(rng_of(seed), (6, 100), F16, 2.0),), dict(BLOCK=128)


def _ptq_ref(x, **k):
  xf = f32(x)
  am = np.maximum(np.abs(xf).max(1), 1e-10)
  return np.round(xf * (np.float32(127) / am)[:, None]).astype(np.int8), np.asarray(jnp.asarray(am) / 127)[:, None]


case("vllm_per_token_quant_int8_odd_hidden", per_token_quant_int8, _ptq_make, _ptq_ref, 0)


# ---------------------------------------------------------------- W8A8 persistent and warp-specialised on two warpgroups
@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb, **k: S((a.shape[0], b.shape[0]), BF16),
                grid=lambda a, b, sa, sb, **k: (min(4, (a.shape[0] // 128) * (b.shape[0] // 128)),), block=256)
def w8a8_persistent(a, b, sa, sb, c):
  """4 CTAs walk the (128, 128) tiles in grouped order; a producer warpgroup loads ahead, across tiles."""
  num_m, num_n = a.shape[0] // 128, b.shape[0] // 128
  a_s, b_s = ml.smem((128, 128), I8), ml.smem((128, 128), I8)
  for t in range(ml.program_id(0), num_m * num_n, ml.num_programs(0)):
    i, j = ml.grouped_ids(t, num_m, num_n, group=2)
    acc = ml.zeros((128, 128), I32)
    for k in ml.range(a.shape[1] // 128, stages=2, warp_specialize=True):
      ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 128, 128)], a_s)
      ml.copy(b.at[ml.ds(j * 128, 128), ml.ds(k * 128, 128)], b_s)
      acc = ml.dot(a_s, b_s.T, acc)
    y = acc.astype(F32) * sa.at[ml.ds(i * 128, 128)][...][:, None] * sb.at[ml.ds(j * 128, 128)][...][None, :]
    c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = y.astype(BF16)


def _w8p_make(seed):
  r = rng_of(seed)
  return (r.integers(-128, 128, (256, 384)).astype(np.int8), r.integers(-128, 128, (384, 384)).astype(np.int8),
          (r.random(256) * 0.01).astype(np.float32), (r.random(384) * 0.01).astype(np.float32)), {}


case("w8a8_persistent_warp_specialized", w8a8_persistent, _w8p_make, _w8a8_ref, 1e-2)


# ---------------------------------------------------------------- MoE: each expert's run found from the sorted expert ids
@mg.mgpu_kernel(out_shape=lambda x, w, ids, **k: S((x.shape[0], w.shape[2]), F32),
                grid=lambda x, w, ids, *, BM, **k: (w.shape[0], ml.cdiv(x.shape[0], BM)))
def moe_from_sorted_ids(x_ptr, w_ptr, ids_ptr, o_ptr, *, BM: ml.constexpr, BK: ml.constexpr,
                        SEARCH: ml.constexpr = False):
  """The token rows sorted by expert; expert e's run [start, stop) counted from the sorted ids (or searchsorted)."""
  e, t = ml.program_id(0), ml.program_id(1)
  ids = ids_ptr[...]
  if SEARCH:
    start, stop = ml.searchsorted(ids, e, side="left"), ml.searchsorted(ids, e, side="right")
  else:
    start, stop = ml.sum((ids < e).astype(jnp.int32)), ml.sum((ids <= e).astype(jnp.int32))
  if start + t * BM < stop:
    rm = start + t * BM + ml.arange(0, BM)
    ml.store(o_ptr.at[rm[:, None], ml.arange(0, w_ptr.shape[2])[None, :]],
             expert_rows_dot(x_ptr, w_ptr, e, rm, stop, BK), mask=rm[:, None] < stop)


def _sid_make(search):
  def make(seed):
    r = rng_of(seed)
    ids = np.repeat(np.arange(4), [20, 0, 70, 38]).astype(np.int32)
    return (normal(r, (128, 64), BF16), normal(r, (4, 64, 64), BF16, 0.2), ids), dict(BM=64, BK=64, SEARCH=search)
  return make


def _sid_ref(x, w, ids, **k):
  return _gg_ref(x, w, np.searchsorted(ids, np.arange(w.shape[0] + 1)).astype(np.int32))


case("moe_offsets_counted_from_sorted_ids", moe_from_sorted_ids, _sid_make(False), _sid_ref, 1e-5)
case("moe_offsets_by_searchsorted", moe_from_sorted_ids, _sid_make(True), _sid_ref, 1e-5)
