"""Probe 68b's corpus, its fourth part: edges of the same kernels (K and N tails of a GPTQ GEMM under masks, an fp8
dot into a float16 accumulator, a persistent tile scheduler over ragged groups, vLLM's split-K of float16 atomics, a
split-K int4 GEMV) and the kernels of the classes fixed (a batch-1 GEMV's (1, k, n) product in a loop, AWQ's (2, 8)
zero words of two groups in one k tile beside its shift table). Same CASES form as probe68b_quant.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68b_quant import BF16, E4M3, F16, F32, S, f32, pack_rows8, rng_of
from probe68b_fused import _gg_ref, normal
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
