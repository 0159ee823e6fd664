"""Probe 51e: matrix-product kernels as Triton and Pallas users write them.

(1) A decode GEMM of few rows (M = 1..16 tokens, BLOCK_M 16 or 32) whose B tile and stored product are masked with
the same column vector (`rn[None, :] < N` in the B load and in the store) was MG204 at the accumulator: one index
vector reached a (64, n) B tile and the (16, n) product, which take two layouts. remat.py now gives each broadcast of
an index vector its own copy where they reach tiles of different shapes, as it did for two orientations. (2) jnp.dot,
jnp.matmul, `@`, lax.dot_general and jnp.einsum of int8 or float8 register tiles (a Pallas W8A8 or FP8 kernel's
`jnp.dot(x, w, preferred_element_type=jnp.int32)`) were MG003, a float8 one a broadcast product that overflowed SMEM
at a line of the compiler's: they compute as ml.dot. int8 tiles without preferred_element_type= (jnp's int8 result)
keep their MG003, whose hint asks for the int32 sums. (3) jnp.dot of float32 tiles whose rows or columns are not a
multiple of 64 ((200, 64) by (64, 64), (64, 128) by (128, 40)) was a broadcast product in registers (tens of
seconds to compile, or MG204 at a line of the compiler's): past 2**18 multiply-adds it is ml.dot, which stages and
pads them. (4) Triton's 3-D tl.dot of (z, m, k) and (z, k, n) tiles was MG501: one dot per batch element, stacked.
(5) Triton's `tl.permute` and the methods `x.permute(...)`, `x.trans()` (an int4 unpack's `ml.join(lo, hi).permute(0,
2, 1)`) were MG003: they are ml.transpose."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32, I8, E4 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.int8, jnp.float8_e4m3fn


def _rng(seed):
  return np.random.default_rng(seed)


def _normal(shape, seed, dtype, scale=1.0):
  return jnp.asarray((_rng(seed).standard_normal(shape) * scale).astype(np.float32)).astype(dtype)


def _ints(shape, seed, lo=-100, hi=100):
  return jnp.asarray(_rng(seed).integers(lo, hi, shape), I8)


def _f32(a):
  return np.asarray(a, np.float32)


def _i64(a):
  return np.asarray(a, np.int64)


def _export(kernel, *args, **kw):
  specs = [S(np.shape(a), a.dtype) for a in args]
  kernel.check(*specs, **kw)
  text = str(jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs).mlir_module())
  assert "mosaic_gpu" in text


# ---------------------------------------------------------------- (1) few-row products beside masked B tiles
@mg.mgpu_kernel(out_shape=lambda x, w, s, **k: S((x.shape[0], w.shape[1]), BF16),
                grid=lambda x, w, s, *, BM, BN, BK: (ml.cdiv(x.shape[0], BM), ml.cdiv(w.shape[1], BN)))
def w8a16(x_ptr, w_ptr, s_ptr, o_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
  """A weight-only int8 decode GEMM: few tokens, per-channel scales, every tile masked."""
  M, K = x_ptr.shape
  N = w_ptr.shape[1]
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  rk = ml.arange(0, BK)
  acc = ml.zeros((BM, BN), dtype=ml.float32)
  for k in range(0, ml.cdiv(K, BK)):
    x = ml.load(x_ptr.at[rm[:, None], k * BK + rk[None, :]], mask=(rm[:, None] < M) & (k * BK + rk[None, :] < K),
                other=0.0)
    w = ml.load(w_ptr.at[k * BK + rk[:, None], rn[None, :]], mask=(k * BK + rk[:, None] < K) & (rn[None, :] < N),
                other=0)
    acc += ml.dot(x, w.to(ml.bfloat16))
  s = ml.load(s_ptr.at[rn], mask=rn < N, other=0.0)
  ml.store(o_ptr.at[rm[:, None], rn[None, :]], (acc * s[None, :]).to(ml.bfloat16),
           mask=(rm[:, None] < M) & (rn[None, :] < N))


@mg.mgpu_kernel(out_shape=lambda a, w, sc, **k: S((a.shape[0], w.shape[1]), F16),
                grid=lambda a, w, sc, *, BM, BN, BK: (ml.cdiv(a.shape[0], BM), ml.cdiv(w.shape[1], BN)))
def w4a16(a_ptr, w_ptr, s_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
  """int4 weights packed two to a byte along K (the low nibble the even k), group scales of 128 rows."""
  M, K = a_ptr.shape
  N = w_ptr.shape[1]
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  rk = ml.arange(0, BK)
  acc = ml.zeros((BM, BN), dtype=ml.float32)
  for k in range(0, K // BK):
    a = ml.load(a_ptr.at[rm[:, None], k * BK + rk[None, :]], mask=rm[:, None] < M, other=0.0)
    wq = ml.load(w_ptr.at[(k * BK + rk[:, None]) // 2, rn[None, :]], mask=rn[None, :] < N, other=0)
    w = ((wq >> ((rk % 2) * 4)[:, None]) & 0xF).to(ml.float32) - 8.0
    sc = ml.load(s_ptr.at[(k * BK) // 128, rn], mask=rn < N, other=0.0)
    acc = ml.dot(a, (w * sc[None, :]).to(ml.float16), acc)
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], acc.to(ml.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _w8a16_case(m, seed):
  x = _normal((m, 200), seed, BF16)
  w = _ints((200, 96), seed + 1, -127, 128)
  s = jnp.asarray(_rng(seed + 2).uniform(0.001, 0.01, 96), F32)
  return (x, w, s), (_f32(x) @ _f32(w)) * _f32(s)[None]


def _w4a16_case(m, seed):
  q = _rng(seed).integers(0, 16, (256, 72))
  packed = jnp.asarray((q[0::2] | (q[1::2] << 4)).astype(np.uint8).view(np.int8))
  sc = jnp.asarray(_rng(seed + 1).uniform(0.01, 0.02, (2, 72)), F32)
  a = _normal((m, 256), seed + 2, F16)
  w = jnp.asarray((q - 8) * np.repeat(_f32(sc), 128, axis=0), F16)
  return (a, packed, sc), _f32(a) @ _f32(w)


@pytest.mark.parametrize("m,bm", [(1, 16), (5, 16), (20, 32)])
def test_a_decode_gemm_masked_by_one_column_vector(m, bm):
  args, want = _w8a16_case(m, 3 * m)
  got = w8a16(*args, BM=bm, BN=64, BK=64, interpret=True)
  np.testing.assert_allclose(_f32(got), want, rtol=2e-2, atol=2e-2)
  _export(w8a16, *args, BM=bm, BN=64, BK=64)


def test_an_int4_dequant_gemm_of_few_rows():
  args, want = _w4a16_case(16, 40)
  got = w4a16(*args, BM=16, BN=64, BK=64, interpret=True)
  np.testing.assert_allclose(_f32(got), want, rtol=3e-2, atol=3e-2)
  _export(w4a16, *args, BM=16, BN=64, BK=64)


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), F16),
                grid=lambda a, b, *, BK: (ml.cdiv(a.shape[0], 64), ml.cdiv(b.shape[1], 64)))
def masked_bk32(a_ptr, b_ptr, c_ptr, *, BK: ml.constexpr):
  """The tutorial's loop with a k tile of 32 (B staged transposed) and N masked in the B load and in the store."""
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  offs_am = ml.program_id(0) * 64 + ml.arange(0, 64)
  offs_bn = ml.program_id(1) * 64 + ml.arange(0, 64)
  offs_k = ml.arange(0, BK)
  acc = ml.zeros((64, 64), dtype=F32)
  for k in range(0, ml.cdiv(K, BK)):
    a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :] + k * BK], mask=offs_k[None, :] < K - k * BK, other=0.0)
    b = ml.load(b_ptr.at[offs_k[:, None] + k * BK, offs_bn[None, :]],
                mask=(offs_k[:, None] < K - k * BK) & (offs_bn[None, :] < N), other=0.0)
    acc = ml.dot(a, b, acc)
  ml.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc.to(c_ptr.dtype),
           mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


def test_a_k_tile_of_32_masked_along_n_computes():
  a, b = _normal((128, 96), 12, F16), _normal((96, 130), 13, F16)
  got = masked_bk32(a, b, BK=32, interpret=True)
  np.testing.assert_allclose(_f32(got), _f32(a) @ _f32(b), rtol=2e-2, atol=5e-2)
  _export(masked_bk32, a, b, BK=32)


# ---------------------------------------------------------------- (2) jnp products of 8-bit tiles
@mg.mgpu_kernel(out_shape=lambda x, w, *, bm, bn, bk, nt, od: S((x.shape[0], w.shape[0] if nt else w.shape[1]), od),
                grid=lambda x, w, *, bm, bn, bk, nt, od: (x.shape[0] // bm, (w.shape[0] if nt else w.shape[1]) // bn))
def pallas_q(x_ref, w_ref, o_ref, *, bm: ml.constexpr, bn: ml.constexpr, bk: ml.constexpr, nt: ml.constexpr,
             od: ml.constexpr):
  """A Pallas-style quantised matmul: jnp.dot (or dot_general of w stored (n, k)) in a fori_loop over K."""
  i, j = ml.program_id(0), ml.program_id(1)
  def body(k, acc):
    xs = x_ref[ml.ds(i * bm, bm), ml.ds(k * bk, bk)]
    if nt:
      ws = w_ref[ml.ds(j * bn, bn), ml.ds(k * bk, bk)]
      return acc + lax.dot_general(xs, ws, (((1,), (1,)), ((), ())), preferred_element_type=od)
    ws = w_ref[ml.ds(k * bk, bk), ml.ds(j * bn, bn)]
    return acc + jnp.dot(xs, ws, preferred_element_type=od)
  acc = lax.fori_loop(0, x_ref.shape[1] // bk, body, jnp.zeros((bm, bn), od))
  o_ref[ml.ds(i * bm, bm), ml.ds(j * bn, bn)] = acc


@pytest.mark.parametrize("nt", [False, True])
def test_int8_jnp_products_are_exact_int32_dots(nt):
  x, w = _ints((128, 256), 20), _ints((256, 128), 21)
  wt = jnp.asarray(np.asarray(w).T.copy())
  got = pallas_q(x, wt if nt else w, bm=64, bn=64, bk=128, nt=nt, od=I32, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _i64(x) @ _i64(w))
  _export(pallas_q, x, wt if nt else w, bm=64, bn=64, bk=128, nt=nt, od=I32)


@pytest.mark.parametrize("nt", [False, True])
def test_float8_jnp_products_are_dots(nt):
  x, w = _normal((128, 256), 22, E4), _normal((256, 128), 23, E4)
  wt = jnp.asarray(np.asarray(w).T.copy())
  got = pallas_q(x, wt if nt else w, bm=64, bn=64, bk=128, nt=nt, od=F32, interpret=True)
  np.testing.assert_allclose(np.asarray(got), _f32(x) @ _f32(w), rtol=1e-3, atol=1e-3)
  _export(pallas_q, x, wt if nt else w, bm=64, bn=64, bk=128, nt=nt, od=F32)


def _out3(x, w, *, how):
  if how == "einsum3":
    return S((x.shape[0], x.shape[1], w.shape[2]), I32)
  return S((x.shape[0], w.shape[1]), {"at": E4, "bf16": F32, "einsum": I32, "plain": I32}[how])


@mg.mgpu_kernel(out_shape=_out3)
def spellings(x_ref, w_ref, o_ref, *, how: ml.constexpr):
  x, w = x_ref[...], w_ref[...]
  if how == "at":                  # jnp's float8 result: the float32 sums rounded once
    o_ref[...] = x @ w
  elif how == "bf16":
    o_ref[...] = jnp.dot(x, w, preferred_element_type=jnp.bfloat16).astype(jnp.float32)
  elif how == "einsum":
    o_ref[...] = jnp.einsum("mk,kn->mn", x, w, preferred_element_type=jnp.int32)
  elif how == "einsum3":
    o_ref[...] = jnp.einsum("bmk,bkn->bmn", x, w, preferred_element_type=jnp.int32)
  else:
    o_ref[...] = jnp.dot(x, w).astype(jnp.int32)


def test_other_spellings_of_8_bit_products():
  x8, w8 = _normal((64, 128), 24, E4), _normal((128, 64), 25, E4)
  want = _f32(x8) @ _f32(w8)
  got = spellings(x8, w8, how="at", interpret=True)
  np.testing.assert_array_equal(_f32(got), _f32(jnp.asarray(want).astype(E4)))
  got = spellings(x8, w8, how="bf16", interpret=True)
  np.testing.assert_allclose(_f32(got), _f32(jnp.asarray(want).astype(BF16)), rtol=1e-2, atol=1e-2)
  xi, wi = _ints((8, 64), 26), _ints((64, 24), 27)          # few rows, 24 columns: padded by ml.dot
  np.testing.assert_array_equal(spellings(xi, wi, how="einsum", interpret=True), _i64(xi) @ _i64(wi))
  x3, w3 = _ints((2, 64, 64), 28), _ints((2, 64, 64), 29)
  np.testing.assert_array_equal(spellings(x3, w3, how="einsum3", interpret=True),
                                np.einsum("bmk,bkn->bmn", _i64(x3), _i64(w3)))
  _export(spellings, x8, w8, how="at")
  _export(spellings, x3, w3, how="einsum3")


def test_an_int8_product_without_a_result_dtype_asks_for_int32():
  expect(spellings, [S((64, 128), I8), S((128, 64), I8)], mg.KernelTypeError, "jnp.dot(x, w)",
         "dot cannot take a register tensor inside a kernel",
         hint="jnp's product of int8 tiles is int8 (its int32 sums wrapped): ask for the sums, jnp.dot(x, w,"
              " preferred_element_type=jnp.int32), computed on the tensor cores as ml.dot", how="plain")


# ---------------------------------------------------------------- (3) float32 tiles of rows or columns not of 64
@mg.mgpu_kernel(out_shape=lambda x, w, b: S((x.shape[0], w.shape[1]), F32))
def f32_linear(x_ref, w_ref, b_ref, o_ref):
  y = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32) + b_ref[...][None, :]
  o_ref[...] = jnp.maximum(y, 0.0)


def test_float32_products_of_odd_tiles_are_tf32_dots():
  m, k, n = 200, 64, 64
  x, w, b = _normal((m, k), m, F32), _normal((k, n), n, F32), _normal((n,), 7, F32)
  got = f32_linear(x, w, b, interpret=True)
  # TF32 (the tensor cores' float32): interpret mode drops the same mantissa bits, so compare loosely with NumPy
  np.testing.assert_allclose(np.asarray(got), np.maximum(_f32(x) @ _f32(w) + _f32(b)[None], 0), rtol=2e-2, atol=5e-2)
  _export(f32_linear, x, w, b)


# ---------------------------------------------------------------- (4) Triton's 3-D tl.dot
@mg.mgpu_kernel(out_shape=lambda a, b, *, smem: S((a.shape[0], a.shape[1], b.shape[2]), F32),
                grid=lambda a, b, *, smem: (1,))
def bmm3(a_ptr, b_ptr, c_ptr, *, smem: ml.constexpr):
  z, m, k = a_ptr.shape
  offs_z, offs_m, offs_k = ml.arange(0, z), ml.arange(0, m), ml.arange(0, k)
  offs_n = ml.arange(0, b_ptr.shape[2])
  if smem:
    a_s, b_s = ml.smem(a_ptr.shape, a_ptr.dtype), ml.smem(b_ptr.shape, b_ptr.dtype)
    ml.copy(a_ptr, a_s)
    ml.copy(b_ptr, b_s)
    c_ptr[...] = ml.dot(a_s, b_s)
  else:
    a = ml.load(a_ptr.at[offs_z[:, None, None], offs_m[None, :, None], offs_k[None, None, :]])
    b = ml.load(b_ptr.at[offs_z[:, None, None], offs_k[None, :, None], offs_n[None, None, :]])
    acc = ml.zeros((z, m, b_ptr.shape[2]), dtype=ml.float32)
    acc = ml.dot(a, b, acc)
    ml.store(c_ptr.at[offs_z[:, None, None], offs_m[None, :, None], offs_n[None, None, :]], acc)


@pytest.mark.parametrize("smem", [False, True])
def test_a_3d_dot_is_one_dot_per_batch_element(smem):
  a, b = _normal((2, 64, 64), 30, F16), _normal((2, 64, 32), 31, F16)
  got = bmm3(a, b, smem=smem, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.einsum("bmk,bkn->bmn", _f32(a), _f32(b)), rtol=2e-2, atol=3e-2)
  _export(bmm3, a, b, smem=smem)


# ---------------------------------------------------------------- (5) Triton's permute and trans methods
@mg.mgpu_kernel(out_shape=lambda a, w, sc: S((a.shape[0], w.shape[1]), F16), grid=lambda a, w, sc: (1,))
def w4_join_permute(a_ptr, w_ptr, s_ptr, c_ptr):
  """int4 packed along K (low nibble the even k): each byte's two nibbles joined, then moved into consecutive rows."""
  M, K = a_ptr.shape
  BK, BN = 64, w_ptr.shape[1]
  rm, rk, rk2, rn = ml.arange(0, 16), ml.arange(0, BK), ml.arange(0, BK // 2), ml.arange(0, BN)
  acc = ml.zeros((16, BN), dtype=ml.float32)
  for k in range(0, K // BK):
    a = ml.load(a_ptr.at[rm[:, None], k * BK + rk[None, :]], mask=rm[:, None] < M, other=0.0)
    wp = ml.load(w_ptr.at[k * (BK // 2) + rk2[:, None], rn[None, :]])
    lo = (wp & 0xF).to(ml.float16) - 8.0
    hi = ((wp >> 4) & 0xF).to(ml.float16) - 8.0
    w = ml.join(lo, hi).permute(0, 2, 1).reshape(BK, BN)
    acc = ml.dot(a, w, acc)
  s = ml.load(s_ptr.at[rn])
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], (acc * s[None, :]).to(ml.float16), mask=rm[:, None] < M)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1], x.shape[0]), x.dtype), S(x.shape, x.dtype)))
def permute_spellings(x_ptr, t_ptr, p_ptr):
  v = x_ptr[...]
  t_ptr[...] = v.trans()
  p_ptr[...] = ml.permute(v.permute(1, 0), (1, 0))


def test_permute_and_trans_are_tritons():
  q = _rng(50).integers(0, 16, (128, 64))
  packed = jnp.asarray((q[0::2] | (q[1::2] << 4)).astype(np.uint8).view(np.int8))
  sc = jnp.asarray(_rng(51).uniform(0.01, 0.02, 64), F32)
  a = _normal((5, 128), 52, F16)
  got = w4_join_permute(a, packed, sc, interpret=True)
  np.testing.assert_allclose(_f32(got), (_f32(a) @ (q - 8).astype(np.float32)) * _f32(sc)[None], rtol=3e-2, atol=3e-2)
  _export(w4_join_permute, a, packed, sc)
  x = _normal((64, 128), 53, F32)
  t, p = permute_spellings(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(t), np.asarray(x).T)
  np.testing.assert_array_equal(np.asarray(p), np.asarray(x))


# ---------------------------------------------------------------- the H200
@pytest.mark.gpu
def test_gpu_products_match_numpy():
  for m, bm in ((1, 16), (5, 16), (20, 32)):
    args, want = _w8a16_case(m, 3 * m)
    got = jax.jit(lambda *a: w8a16(*a, BM=bm, BN=64, BK=64))(*args)
    np.testing.assert_allclose(_f32(got), want, rtol=2e-2, atol=2e-2)
  args, want = _w4a16_case(16, 40)
  np.testing.assert_allclose(_f32(jax.jit(lambda *a: w4a16(*a, BM=16, BN=64, BK=64))(*args)), want, rtol=3e-2,
                             atol=3e-2)
  a, b = _normal((128, 96), 12, F16), _normal((96, 130), 13, F16)
  np.testing.assert_allclose(_f32(jax.jit(lambda a, b: masked_bk32(a, b, BK=32))(a, b)), _f32(a) @ _f32(b),
                             rtol=2e-2, atol=5e-2)
  x, w = _ints((128, 256), 20), _ints((256, 128), 21)
  for nt in (False, True):
    wa = jnp.asarray(np.asarray(w).T.copy()) if nt else w
    got = jax.jit(lambda x, w: pallas_q(x, w, bm=64, bn=64, bk=128, nt=nt, od=I32))(x, wa)
    np.testing.assert_array_equal(np.asarray(got), _i64(x) @ _i64(w))
  x8, w8 = _normal((128, 256), 22, E4), _normal((256, 128), 23, E4)
  got = jax.jit(lambda x, w: pallas_q(x, w, bm=64, bn=64, bk=128, nt=False, od=F32))(x8, w8)
  np.testing.assert_allclose(np.asarray(got), _f32(x8) @ _f32(w8), rtol=2e-2, atol=0.1)    # Hopper's FP8 sums
  x3, w3 = _ints((2, 64, 64), 28), _ints((2, 64, 64), 29)
  np.testing.assert_array_equal(jax.jit(lambda x, w: spellings(x, w, how="einsum3"))(x3, w3),
                                np.einsum("bmk,bkn->bmn", _i64(x3), _i64(w3)))
  a, b = _normal((2, 64, 64), 30, F16), _normal((2, 64, 32), 31, F16)
  for smem in (False, True):
    np.testing.assert_allclose(np.asarray(jax.jit(lambda a, b: bmm3(a, b, smem=smem))(a, b)),
                               np.einsum("bmk,bkn->bmn", _f32(a), _f32(b)), rtol=2e-2, atol=3e-2)
  q = _rng(50).integers(0, 16, (128, 64))
  packed = jnp.asarray((q[0::2] | (q[1::2] << 4)).astype(np.uint8).view(np.int8))
  sc, a = jnp.asarray(_rng(51).uniform(0.01, 0.02, 64), F32), _normal((5, 128), 52, F16)
  np.testing.assert_allclose(_f32(jax.jit(w4_join_permute)(a, packed, sc)),
                             (_f32(a) @ (q - 8).astype(np.float32)) * _f32(sc)[None], rtol=3e-2, atol=3e-2)
  for m, k, n in ((200, 64, 64), (64, 128, 40), (16, 256, 24)):
    x, w, b = _normal((m, k), m, F32), _normal((k, n), n, F32), _normal((n,), 7, F32)
    got = jax.jit(f32_linear)(x, w, b)
    np.testing.assert_allclose(np.asarray(got), np.asarray(f32_linear(x, w, b, interpret=True)), rtol=1e-3, atol=1e-2)
