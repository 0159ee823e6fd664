"""Probe 53d: attention variants written from scratch, round 2 (split-KV decoding and its merge, MLA decode, sliding
windows, ALiBi, soft-capping, prefix-LM, block-sparse tables, varlen, tutorial 06's backward, cross-attention).

(1) A dot of n past 256 (DeepSeek MLA's `p @ kv` over 512 latent columns, Triton's `tl.dot(p.to(kv.dtype), kv)`,
Pallas's `jnp.dot(p, kv)`; a projection to 384 features) was MG501 whose hint split the buffer by hand: the compiler
writes the split itself now (frontend/ops/wide_dots.py), one dot a piece of at most 256 columns over views of the one
buffer, the products joined. (2) The split written by hand over windows of a TMA-loaded buffer in a pipelined loop,
`ml.dot(a_s, bt_s.at[0:256].T, acc0)`, was MG502: the window under the transposed view was taken for a read of its
own (frontend/pipeline_plan.py `unused_view`). (3) Where the joined product does not fit in SMEM (128 rows of 512
float32 columns), MG402's hint names the join and writes the split by hand (frontend/smem.py). (4) A register tile
that is the b of two dots (MLA's `ml.dot(qn, kv.T)` and `ml.dot(p, kv)`; tutorial 06's `ml.dot(k, qT)` and
`ml.dot(dsT, ml.trans(qT))`) was stored into SMEM once per dot: the decode of 64 heads and 64 keys held kv twice and
was MG402; one buffer serves both now (ops/dot_staging.py `staged_b`)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _attn(q, k, v, scale, mask=None):
  """softmax(q @ k.T * scale) @ v in float64, one head (q (m, d), k (n, d), v (n, dv)), and each row's LSE."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  s = q @ k.T * scale
  if mask is not None:
    s = np.where(mask, s, -np.inf)
  m = s.max(axis=1, keepdims=True)
  p = np.exp(s - m)
  return p @ v / p.sum(axis=1, keepdims=True), (m + np.log(p.sum(axis=1, keepdims=True)))[:, 0]


# ---------------------------------------------------------------- (1) MLA decode: p @ kv over 512 latent columns
def _mla_triton(block_h, block_n):
  """SGLang/FlashMLA-style decode, Triton register tiles: block_h query heads share one latent kv head."""
  @mg.mgpu_kernel(out_shape=lambda qn, qp, ckv, kpe, **kw: S(qn.shape, qn.dtype),
                  grid=lambda qn, qp, ckv, kpe, **kw: (qn.shape[0], qn.shape[1] // block_h))
  def mla_decode(QN, QP, CKV, KPE, O, *, sm_scale: ml.constexpr):
    b, hid = ml.program_id(0), ml.program_id(1)
    heads = hid * block_h + ml.arange(0, block_h)
    offs_c, offs_r = ml.arange(0, 512), ml.arange(0, 64)
    qn = ml.load(QN.at[b, heads[:, None], offs_c[None, :]])
    qp = ml.load(QP.at[b, heads[:, None], offs_r[None, :]])
    seq = CKV.shape[1]
    m_i = ml.full([block_h], -1e30, jnp.float32)
    l_i = ml.zeros([block_h], jnp.float32)
    acc = ml.zeros([block_h, 512], jnp.float32)
    for start in range(0, seq, block_n):
      offs_n = start + ml.arange(0, block_n)
      kv = ml.load(CKV.at[b, offs_n[:, None], offs_c[None, :]], mask=offs_n[:, None] < seq, other=0.0)
      kp = ml.load(KPE.at[b, offs_n[:, None], offs_r[None, :]], mask=offs_n[:, None] < seq, other=0.0)
      qk = (ml.dot(qn, kv.T) + ml.dot(qp, kp.T)) * sm_scale
      qk = ml.where(offs_n[None, :] < seq, qk, float("-inf"))
      m_new = ml.maximum(m_i, ml.max(qk, 1))
      alpha = ml.exp(m_i - m_new)
      p = ml.exp(qk - m_new[:, None])
      l_i = l_i * alpha + ml.sum(p, 1)
      acc = acc * alpha[:, None] + ml.dot(p.to(kv.dtype), kv)
      m_i = m_new
    ml.store(O.at[b, heads[:, None], offs_c[None, :]], (acc / l_i[:, None]).to(O.dtype))
  return mla_decode


def _mla_pallas(block_h, block_k):
  """The same decode as a Pallas port: whole-block reads of refs, jnp.dot, lax.fori_loop, the accumulator passed."""
  @mg.mgpu_kernel(out_shape=lambda qn, qp, ckv, kpe, **kw: S(qn.shape, qn.dtype),
                  grid=lambda qn, qp, ckv, kpe, **kw: (qn.shape[0], qn.shape[1] // block_h))
  def mla_pallas(qn_ref, qp_ref, ckv_ref, kpe_ref, o_ref, *, sm_scale: ml.constexpr):
    b, hs = ml.program_id(0), ml.ds(ml.program_id(1) * block_h, block_h)
    qn, qp = qn_ref[b, hs, :], qp_ref[b, hs, :]

    def body(i, carry):
      m, l, acc = carry
      ks = ml.ds(i * block_k, block_k)
      kv, kp = ckv_ref[b, ks, :], kpe_ref[b, ks, :]
      s = (jnp.dot(qn, kv.T, preferred_element_type=jnp.float32)
           + jnp.dot(qp, kp.T, preferred_element_type=jnp.float32)) * sm_scale
      m_new = jnp.maximum(m, s.max(axis=-1))
      alpha = jnp.exp(m - m_new)
      p = jnp.exp(s - m_new[:, None])
      acc = acc * alpha[:, None] + jnp.dot(p.astype(kv.dtype), kv, preferred_element_type=jnp.float32)
      return m_new, l * alpha + p.sum(axis=-1), acc

    init = (jnp.full((block_h,), -jnp.inf, jnp.float32), jnp.zeros((block_h,), jnp.float32),
            jnp.zeros((block_h, 512), jnp.float32))
    m, l, acc = jax.lax.fori_loop(0, ckv_ref.shape[1] // block_k, body, init)
    o_ref[b, hs, :] = (acc / l[:, None]).astype(o_ref.dtype)
  return mla_pallas


def _mla_args(heads, keys, seed=0):
  # (scaled in float32, then bfloat16: a NumPy bfloat16 array times a Python float is bfloat16 here but float32 with
  # the GPU machine's NumPy and ml_dtypes, where the kernel's dot of bfloat16 and float32 was MG104)
  return (rnd((1, heads, 512), seed, BF16), rnd((1, heads, 64), seed + 1, BF16),
          (rnd((1, keys, 512), seed + 2) * 0.5).astype(BF16), (rnd((1, keys, 64), seed + 3) * 2).astype(BF16))


def _mla_ref(qn, qp, ckv, kpe):
  q = np.concatenate([f32(qn[0]), f32(qp[0])], 1)
  return _attn(q, np.concatenate([f32(ckv[0]), f32(kpe[0])], 1), f32(ckv[0]), 1 / math.sqrt(576))[0][None]


MLA = [("triton, keys stored transposed", _mla_triton(16, 32), 16, 100),
       ("triton, keys stored as they are", _mla_triton(16, 64), 16, 100),
       ("pallas", _mla_pallas(16, 32), 32, 64),
       # kv read by two dots, `ml.dot(qn, kv.T)` and `ml.dot(p, kv)`, is stored into SMEM once (64 KiB, not twice)
       ("triton, 64 heads and 64 keys", _mla_triton(64, 64), 64, 128)]


@pytest.mark.parametrize("case", range(len(MLA)), ids=[c[0] for c in MLA])
def test_an_mla_decodes_p_at_kv_over_512_latent_columns_computes(case):
  _, kernel, heads, keys = MLA[case]
  args = _mla_args(heads, keys)
  got = kernel(*args, sm_scale=1 / math.sqrt(576), interpret=True)
  np.testing.assert_allclose(f32(got), _mla_ref(*args), atol=2e-2, rtol=2e-2)
  export(kernel, *args, sm_scale=1 / math.sqrt(576))


@mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, q.dtype), grid=lambda q, k, v, **kw: (q.shape[0] // 16,))
def head_dim_512(Q, K, V, O, *, sm_scale: ml.constexpr):
  """A head_dim of 512 (a decode's 16 query rows), the accumulator passed to the dot as Triton's tl.dot(p, v, acc)."""
  rows = ml.program_id(0) * 16 + ml.arange(0, 16)
  d = ml.arange(0, 512)
  q = ml.load(Q.at[rows[:, None], d[None, :]])
  m = ml.full([16], -1e30, jnp.float32)
  l = ml.zeros([16], jnp.float32)
  acc = ml.zeros([16, 512], jnp.float32)
  for s in range(0, K.shape[0], 64):
    cols = s + ml.arange(0, 64)
    k = ml.load(K.at[cols[:, None], d[None, :]])
    v = ml.load(V.at[cols[:, None], d[None, :]])
    qk = ml.dot(q, k.T) * sm_scale
    m_new = ml.maximum(m, ml.max(qk, 1))
    alpha = ml.exp(m - m_new)
    p = ml.exp(qk - m_new[:, None])
    l = l * alpha + ml.sum(p, 1)
    acc = ml.dot(p.to(v.dtype), v, acc * alpha[:, None])
    m = m_new
  ml.store(O.at[rows[:, None], d[None, :]], (acc / l[:, None]).to(O.dtype))


def test_a_head_dim_of_512_with_the_accumulator_passed_computes():
  q, k, v = rnd((32, 512), 1, F16), rnd((128, 512), 2, F16) * 0.5, rnd((128, 512), 3, F16)
  got = head_dim_512(q, k, v, sm_scale=1 / math.sqrt(512), interpret=True)
  np.testing.assert_allclose(f32(got), _attn(q, k, v, 1 / math.sqrt(512))[0], atol=2e-2, rtol=2e-2)
  export(head_dim_512, q, k, v, sm_scale=1 / math.sqrt(512))


# ---------------------------------------------------------------- (2) a projection to 384 features in a pipelined loop
def _projection(form):
  """nn.Linear's weights stored (n, k), a TMA pipeline over k: the dot whole, or split by hand over windows."""
  @mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32), grid=lambda a, bt: (a.shape[0] // 64,))
  def projection(a, bt, c):
    i = ml.program_id(0)
    a_s, bt_s = ml.smem((64, 64)), ml.smem((384, 64))
    if form == "whole":
      acc = ml.zeros((64, 384), F32)
    else:
      acc0, acc1 = ml.zeros((64, 192), F32), ml.zeros((64, 192), F32)
    for k in ml.range(a.shape[1] // 64, stages=2):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(bt.at[:, ml.ds(k * 64, 64)], bt_s)
      if form == "whole":
        acc = ml.dot(a_s, bt_s.T, acc)
      else:
        acc0 = ml.dot(a_s, bt_s.at[0:192].T, acc0)
        acc1 = ml.dot(a_s, bt_s.at[192:384].T, acc1)
    if form == "whole":
      c.at[ml.ds(i * 64, 64)][...] = acc
    else:
      c.at[ml.ds(i * 64, 64), ml.ds(0, 192)][...] = acc0
      c.at[ml.ds(i * 64, 64), ml.ds(192, 192)][...] = acc1
  return projection


PROJECTIONS = {form: _projection(form) for form in ("whole", "windows")}


@pytest.mark.parametrize("form", PROJECTIONS)
def test_a_384_feature_projection_in_a_pipelined_loop_computes(form):
  a, bt = rnd((128, 192), 4, F16), rnd((384, 192), 5, F16)
  got = PROJECTIONS[form](a, bt, interpret=True)
  np.testing.assert_allclose(f32(got), f32(a).astype(np.float64) @ f32(bt).T, atol=5e-2, rtol=1e-2)
  export(PROJECTIONS[form], a, bt)


# ---------------------------------------------------------------- (4) one register tile, two dots: stored once
BM, BN = 32, 64


@mg.mgpu_kernel(out_shape=lambda q, k, v, do, m, d, **kw: (S(k.shape, k.dtype), S(v.shape, v.dtype)),
                grid=lambda q, k, v, do, m, d, **kw: (k.shape[1] // BN, q.shape[0]))
def tutorial_dkdv(Q, K, V, DO, M, D, DK, DV, *, sm_scale: ml.constexpr):
  """Triton tutorial 06's dK/dV over q blocks, causal, M the row LSE in base 2: qT is the b of `ml.dot(k, qT)` and,
  transposed, of `ml.dot(dsT, ml.trans(qT))` (one SMEM buffer holds it for both)."""
  start_n, bhid = ml.program_id(0) * BN, ml.program_id(1)
  offs_n = start_n + ml.arange(0, BN)
  offs_k = ml.arange(0, Q.shape[2])
  k = ml.load(K.at[bhid, offs_n[:, None], offs_k[None, :]])
  v = ml.load(V.at[bhid, offs_n[:, None], offs_k[None, :]])
  dv = ml.zeros([BN, Q.shape[2]], dtype=jnp.float32)
  dk = ml.zeros([BN, Q.shape[2]], dtype=jnp.float32)
  for start_m in range(start_n, Q.shape[1], BM):
    offs_m = start_m + ml.arange(0, BM)
    qT = ml.load(Q.at[bhid, offs_m[None, :], offs_k[:, None]])
    m = ml.load(M.at[bhid, offs_m])
    pT = ml.math.exp2(ml.dot(k, qT) * (sm_scale * 1.4426950408889634) - m[None, :])
    pT = ml.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
    do = ml.load(DO.at[bhid, offs_m[:, None], offs_k[None, :]])
    dv += ml.dot(pT.to(jnp.float16), do)
    dpT = ml.dot(v, ml.trans(do)).to(jnp.float32)
    dsT = (pT * (dpT - ml.load(D.at[bhid, offs_m])[None, :])).to(jnp.float16)
    dk += ml.dot(dsT, ml.trans(qT))
  ml.store(DV.at[bhid, offs_n[:, None], offs_k[None, :]], dv.to(jnp.float16))
  ml.store(DK.at[bhid, offs_n[:, None], offs_k[None, :]], (dk * sm_scale).to(jnp.float16))


def _dkdv_case(seed=0, h=2, n=128, d=64):
  """Inputs of tutorial_dkdv and the float64 dK, dV of causal attention (by hand: dS = P * (dP - delta))."""
  q, k, v, do = (rnd((h, n, d), seed + i, F16) for i in range(4))
  scale = 1 / math.sqrt(d)
  dk, dv, lse, delta = (np.zeros((h, n, d)), np.zeros((h, n, d)), np.zeros((h, n)), np.zeros((h, n)))
  for z in range(h):
    qq, kk, vv, dd = (f32(x[z]).astype(np.float64) for x in (q, k, v, do))
    o, lse[z] = _attn(qq, kk, vv, scale, np.tril(np.ones((n, n), bool)))
    p = np.exp(np.where(np.tril(np.ones((n, n), bool)), qq @ kk.T * scale, -np.inf) - lse[z][:, None])
    delta[z] = (o.astype(np.float16).astype(np.float64) * dd).sum(1)
    ds = p * (dd @ vv.T - delta[z][:, None])
    dk[z], dv[z] = ds.T @ qq * scale, p.T @ dd
  args = (q, k, v, do, (lse / np.log(2)).astype(np.float32), delta.astype(np.float32))
  return args, scale, (dk, dv)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (x.shape[0] // 128,))
def wide_rows(x, w, o):
  """128 rows of 512 features a program: the product's join (128 x 512 float32) does not fit in SMEM."""
  rows = ml.ds(ml.program_id(0) * 128, 128)
  kv = w[...]
  o[rows, :] = ml.dot(x[rows, :], kv)


def test_a_wide_product_too_large_to_join_hints_an_accumulator_a_piece():
  expect(wide_rows, [S((256, 64), F16), S((64, 512), F16)], mg.SmemCapacityError, "ml.dot(x[rows, :], kv)",
         "the kernel's SMEM needs 262144 bytes (kv_s 64 KiB, wide dot scratch 256 KiB, plus barriers and alignment),"
         " more than the 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use",
         hint="split the dot by hand, or compute fewer rows per program: the largest buffer, wide dot scratch, joins"
              " the products of an ml.dot of more than 256 columns, which the tensor cores compute 256 columns at a"
              " time; one accumulator a piece needs no join (acc0 = ml.dot(a, b_s.at[:, 0:256], acc0), acc1 ="
              " ml.dot(a, b_s.at[:, 256:512], acc1), or b_s.at[0:256].T of a buffer stored (n, k)), each stored into"
              " its columns of the output")


@pytest.mark.gpu
def test_gpu_probe53d_kernels_match_interpret_mode_and_numpy():
  for _, kernel, heads, keys in MLA:
    args = _mla_args(heads, keys)
    got = kernel(*args, sm_scale=1 / math.sqrt(576))
    np.testing.assert_allclose(f32(got), f32(kernel(*args, sm_scale=1 / math.sqrt(576), interpret=True)),
                               atol=2e-2, rtol=2e-2)
    np.testing.assert_allclose(f32(got), _mla_ref(*args), atol=2e-2, rtol=2e-2)
  q, k, v = rnd((32, 512), 1, F16), rnd((128, 512), 2, F16) * 0.5, rnd((128, 512), 3, F16)
  np.testing.assert_allclose(f32(head_dim_512(q, k, v, sm_scale=1 / math.sqrt(512))),
                             _attn(q, k, v, 1 / math.sqrt(512))[0], atol=2e-2, rtol=2e-2)
  args, scale, want = _dkdv_case()
  got = tutorial_dkdv(*args, sm_scale=scale)
  for g, i, w in zip(got, tutorial_dkdv(*args, sm_scale=scale, interpret=True), want):
    np.testing.assert_allclose(f32(g), f32(i), atol=2e-2, rtol=2e-2)
    np.testing.assert_allclose(f32(g), w, atol=3e-2, rtol=3e-2)
  a, bt = rnd((128, 192), 4, F16), rnd((384, 192), 5, F16)
  for kernel in PROJECTIONS.values():
    np.testing.assert_allclose(f32(kernel(a, bt)), f32(a).astype(np.float64) @ f32(bt).T, atol=5e-2, rtol=1e-2)
