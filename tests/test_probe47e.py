"""Probe 47e (decode-time and small-M dots): `ml.dot` of fewer rows than a tensor-core tile (a GQA group of
query heads, a GEMV batch, a (32, 32) matmul of a batch), which was MG501, is padded to the tile's rows by
the compiler (frontend/ops/small_dots.py)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16 = jnp.float32, jnp.float16, jnp.bfloat16


def _spec(x):
  return S(x.shape, x.dtype)


def _export(kernel, *args, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  text = jax.export.export(fn, platforms=["cuda"])(*[_spec(a) for a in args]).mlir_module()
  assert "mosaic_gpu" in text
  return text


def _rand(shape, dtype, seed, scale=1.0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype)


def _f32(x):
  return np.asarray(x, np.float32)


# ---------------------------------------------------------------- GQA decode: the group's query heads as M
def _gqa_decode(g, bkv, stages):
  """One program per (sequence, kv head): the g query heads sharing the kv head are the rows of q @ k.T
  (an SMEM A of g rows) and of p @ v (a register A of g rows, with an accumulator): flash-decoding's split."""
  @mg.mgpu_kernel(out_shape=lambda q, k, v: (S(q.shape, F32), S(q.shape[:2], F32)),
                  grid=lambda q, k, v: (q.shape[0], k.shape[2]))
  def gqa_decode(q, k, v, o, lse):          # q (b, heads, d); k, v (b, len, kv_heads, d)
    b, h = ml.program_id(0), ml.program_id(1)
    d = q.shape[2]
    q_s = ml.smem((g, d))
    k_s = ml.smem((bkv, d))
    v_s = ml.smem((bkv, d))
    ml.copy(q.at[b, ml.ds(h * g, g), :], q_s)
    m_i = ml.full((g,), -jnp.inf, F32)
    l_i = ml.zeros((g,), F32)
    acc = ml.zeros((g, d), F32)
    for j in ml.range(k.shape[1] // bkv, stages=stages):
      ml.copy(k.at[b, ml.ds(j * bkv, bkv), h, :], k_s)
      ml.copy(v.at[b, ml.ds(j * bkv, bkv), h, :], v_s)
      s = ml.dot(q_s, k_s.T) * (1.0 / math.sqrt(d))
      m_new = ml.maximum(m_i, ml.max(s, axis=1))
      alpha = ml.exp(m_i - m_new)
      p = ml.exp(s - m_new[:, None])
      l_i = l_i * alpha + ml.sum(p, axis=1)
      acc = ml.dot(p.astype(v.dtype), v_s, acc * alpha[:, None])
      m_i = m_new
    o.at[b, ml.ds(h * g, g), :][...] = acc / l_i[:, None]
    lse.at[b, ml.ds(h * g, g)][...] = m_i + ml.log(l_i)
  return gqa_decode


def _gqa_inputs(g, kv_heads, length, d, dtype, seed):
  return (_rand((2, g * kv_heads, d), dtype, seed, 2.0), _rand((2, length, kv_heads, d), dtype, seed + 1, 2.0),
          _rand((2, length, kv_heads, d), dtype, seed + 2))


def _gqa_want(q, k, v):
  g = q.shape[1] // k.shape[2]
  kk, vv = (np.repeat(_f32(x), g, axis=2) for x in (k, v))
  s = np.einsum("bhd,blhd->bhl", _f32(q), kk) / math.sqrt(q.shape[2])
  lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
  return np.einsum("bhl,blhd->bhd", np.exp(s - lse[..., None]), vv), lse


_GQA = [(8, 64, 1, 2, 128, BF16), (4, 64, 2, 1, 64, F16), (16, 128, 2, 1, 128, BF16)]


@pytest.mark.parametrize("g,bkv,stages,kv_heads,d,dtype", _GQA[:2])
def test_gqa_decode_with_the_groups_heads_as_rows_matches_jnp(g, bkv, stages, kv_heads, d, dtype):
  """`ml.dot(q_s, k_s.T)` of 8 query heads was MG501 ("m a multiple of 64"), as was `ml.dot(p, v_s, acc)` of
  their probabilities: both are padded to 64 rows now, and the decode is jnp's attention (and its lse)."""
  args = _gqa_inputs(g, kv_heads, 256, d, dtype, 1)
  kernel = _gqa_decode(g, bkv, stages)
  o, lse = kernel(*args, interpret=True)
  want_o, want_lse = _gqa_want(*args)
  np.testing.assert_allclose(np.asarray(o), want_o, atol=3e-2, rtol=3e-2)
  np.testing.assert_allclose(np.asarray(lse), want_lse, atol=3e-2, rtol=1e-3)
  _export(kernel, *args)


def test_the_padding_buffers_are_named_after_the_users_dot_where_smem_runs_out():
  """Three stages of 128-token K and V tiles leave no room for the padded rows' scratches: the SMEM message names
  them after the kernel's own operands and calls, not `concatenate scratch` and `tensor scratch` (ml.concatenate
  and a row window, which the kernel never wrote)."""
  specs = [_spec(x) for x in _gqa_inputs(8, 1, 512, 128, BF16, 3)]
  expect(_gqa_decode(8, 128, 3), specs, mg.SmemCapacityError, "ml.dot(q_s, k_s.T)",   # (its padding: past the limit)
         "the kernel's SMEM needs 232448 bytes (q_s 2 KiB, k_s 96 KiB, v_s 96 KiB, q_s padded to 64 rows 16 KiB, the"
         " 64-row product of ml.dot(q_s, k_s.T) scratch 32 KiB, p.astype(v.dtype) padded to 64 rows 16 KiB, the 64-row"
         " product of ml.dot(p.astype(v.dtype), v_s, acc * alpha[:, None]) scratch 32 KiB, plus barriers and"
         " alignment), more than the 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use",
         hint="use stages=2, or smaller tiles")


# ---------------------------------------------------------------- GEMV batches, split K, small batched matmuls
def _gemv(rows, bn, bk, stages, block=128):
  """x (rows, K) @ w (K, N) in bfloat16 with a float32 accumulator and a bfloat16 result, K in a loop."""
  @mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), BF16), grid=lambda x, w: (w.shape[1] // bn,),
                  block=block)
  def gemv(x, w, o):
    j = ml.program_id(0)
    x_s = ml.smem((rows, bk))
    w_s = ml.smem((bk, bn))
    acc = ml.zeros((rows, bn), F32)
    for k in ml.range(x.shape[1] // bk, stages=stages):
      ml.copy(x.at[:, ml.ds(k * bk, bk)], x_s)
      ml.copy(w.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], w_s)
      acc = ml.dot(x_s, w_s, acc)
    o.at[:, ml.ds(j * bn, bn)][...] = acc.astype(o.dtype)
  return gemv


_GEMV = [(1, 128, 64, 1, 128), (4, 128, 64, 2, 128), (16, 64, 128, 2, 256), (96, 128, 64, 1, 128)]


@pytest.mark.parametrize("rows,bn,bk,stages,block", _GEMV[:3])
def test_gemv_batches_of_1_to_16_rows_match_jnp(rows, bn, bk, stages, block):
  """Decode's x @ W for a batch of 1, 4 or 16 tokens (also pipelined, and at block=256, where both warpgroups
  compute the padded 64 rows): was MG501; matches jnp with a bfloat16 result."""
  x, w = _rand((rows, 256), BF16, 2), _rand((256, 256), BF16, 3)
  kernel = _gemv(rows, bn, bk, stages, block)
  got = kernel(x, w, interpret=True)
  np.testing.assert_allclose(_f32(got), _f32(jnp.asarray(_f32(x) @ _f32(w), BF16)), rtol=2e-2, atol=2e-2)
  _export(kernel, x, w)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], a.shape[1], b.shape[2]), F32), grid=lambda a, b: (a.shape[0],))
def batched_small(a, b, o):
  """(B, 32, 32) @ (B, 32, 32): one program per batch element, a dot of 32 rows."""
  i = ml.program_id(0)
  a_s = ml.smem(a.shape[1:])
  b_s = ml.smem(b.shape[1:])
  ml.copy(a.at[i], a_s)
  ml.copy(b.at[i], b_s)
  o.at[i][...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[0]), F32 if x.dtype != jnp.int8 else jnp.int32))
def linear_k_major(x, w, o):
  """x @ w.T of a torch Linear's (n, k) weight: the K-major form float32 (TF32) and 8-bit operands need."""
  x_s = ml.smem(x.shape)
  w_s = ml.smem(w.shape)
  ml.copy(x, x_s)
  ml.copy(w, w_s)
  o[...] = ml.dot(x_s, w_s.T)


def test_small_batched_matmuls_and_k_major_operands_of_every_dtype_match_jnp():
  """32 rows of a batched (32, 32) matmul, and 8 rows of float32 (TF32, whose padded A the compiler stores in
  an SMEM tile: the tensor cores read TF32 from SMEM only), int8 at k = 32 (too short for a register A: also
  stored) and float8 operands: each was MG501."""
  a, b = _rand((3, 32, 32), F16, 4), _rand((3, 32, 32), F16, 5)
  np.testing.assert_allclose(np.asarray(batched_small(a, b, interpret=True)),
                             np.einsum("bmk,bkn->bmn", _f32(a), _f32(b)), rtol=1e-3, atol=1e-3)
  _export(batched_small, a, b)
  tf32 = lambda v: (np.asarray(v, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
  x, w = _rand((8, 64), F32, 6), _rand((64, 64), F32, 7)
  np.testing.assert_allclose(np.asarray(linear_k_major(x, w, interpret=True)), tf32(x) @ tf32(w).T, rtol=1e-5,
                             atol=1e-4)
  _export(linear_k_major, x, w)
  rng = np.random.default_rng(8)
  xi, wi = (jnp.asarray(rng.integers(-128, 128, s), jnp.int8) for s in ((8, 32), (64, 32)))
  np.testing.assert_array_equal(np.asarray(linear_k_major(xi, wi, interpret=True)),
                                np.asarray(xi, np.int32) @ np.asarray(wi, np.int32).T)
  _export(linear_k_major, xi, wi)
  x8, w8 = _rand((16, 64), jnp.float8_e4m3fn, 9), _rand((64, 64), jnp.float8_e4m3fn, 10)
  np.testing.assert_allclose(np.asarray(linear_k_major(x8, w8, interpret=True)), _f32(x8) @ _f32(w8).T,
                             rtol=1e-5, atol=1e-4)
  _export(linear_k_major, x8, w8)


@pytest.mark.gpu
@pytest.mark.parametrize("g,bkv,stages,kv_heads,d,dtype", _GQA)
def test_gpu_gqa_decode_with_the_groups_heads_as_rows(g, bkv, stages, kv_heads, d, dtype):
  args = _gqa_inputs(g, kv_heads, 512, d, dtype, 11)
  o, lse = jax.jit(_gqa_decode(g, bkv, stages))(*args)
  want_o, want_lse = _gqa_want(*args)
  np.testing.assert_allclose(np.asarray(o), want_o, atol=3e-2, rtol=3e-2)
  np.testing.assert_allclose(np.asarray(lse), want_lse, atol=3e-2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,bn,bk,stages,block", _GEMV)
def test_gpu_gemv_batches(rows, bn, bk, stages, block):
  x, w = _rand((rows, 512), BF16, 12), _rand((512, 256), BF16, 13)
  got = jax.jit(_gemv(rows, bn, bk, stages, block))(x, w)
  np.testing.assert_allclose(_f32(got), _f32(jnp.asarray(_f32(x) @ _f32(w), BF16)), rtol=2e-2, atol=2e-1)


@pytest.mark.gpu
def test_gpu_small_batched_matmuls_and_k_major_operands():
  a, b = _rand((5, 32, 32), F16, 14), _rand((5, 32, 32), F16, 15)
  np.testing.assert_allclose(np.asarray(jax.jit(batched_small)(a, b)), np.einsum("bmk,bkn->bmn", _f32(a), _f32(b)),
                             rtol=1e-2, atol=1e-2)
  x, w = _rand((8, 64), F32, 16), _rand((64, 64), F32, 17)
  np.testing.assert_allclose(np.asarray(jax.jit(linear_k_major)(x, w)), np.asarray(linear_k_major(x, w, interpret=True)),
                             rtol=1e-3, atol=1e-3)
  rng = np.random.default_rng(18)
  xi, wi = (jnp.asarray(rng.integers(-128, 128, s), jnp.int8) for s in ((8, 32), (64, 32)))
  np.testing.assert_array_equal(np.asarray(jax.jit(linear_k_major)(xi, wi)),
                                np.asarray(xi, np.int32) @ np.asarray(wi, np.int32).T)
  x8, w8 = _rand((16, 64), jnp.float8_e4m3fn, 19), _rand((64, 64), jnp.float8_e4m3fn, 20)
  np.testing.assert_allclose(np.asarray(jax.jit(linear_k_major)(x8, w8)), _f32(x8) @ _f32(w8).T, rtol=2e-3, atol=0.1)


# ---------------------------------------------------------------- k and n the tensor cores do not step by
@mg.mgpu_kernel(out_shape=lambda x, w, *, bt: S((x.shape[0], w.shape[0] if bt else w.shape[1]), F32))
def odd_sizes(x, w, o, *, bt: ml.constexpr):
  """x (m, k) @ w (k, n), or @ w.T of a torch Linear's (n, k) weight, TMA-copied into buffers of their shapes."""
  x_s = ml.smem(x.shape)
  w_s = ml.smem(w.shape)
  ml.copy(x, x_s)
  ml.copy(w, w_s)
  o[...] = ml.dot(x_s, w_s.T) if bt else ml.dot(x_s, w_s)


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, F32))
def attention_head_dim(q, k, v, o):
  """Attention over 128 keys of a head_dim of 40 or 72 (bfloat16: not a multiple of 32 bytes): k of q @ k.T, n of
  p @ v; the scale from the shape is the real head_dim."""
  q_s, k_s, v_s = ml.smem(q.shape), ml.smem(k.shape), ml.smem(v.shape)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  ml.copy(v, v_s)
  s = ml.dot(q_s, k_s.T) / math.sqrt(q.shape[1])
  p = ml.exp(s - ml.max(s, axis=1)[:, None])
  o[...] = ml.dot(p.astype(v.dtype), v_s) / ml.sum(p, axis=1)[:, None]


_ODD = [((64, 40), (40, 64), False, BF16), ((8, 72), (64, 72), True, BF16), ((64, 64), (64, 24), False, F16),
        ((16, 64), (64, 8), False, BF16), ((64, 16), (64, 16), True, jnp.float8_e5m2)]


def _odd_want(x, w, bt):
  return _f32(x) @ (_f32(w).T if bt else _f32(w))


def _attention_want(q, k, v):
  s = _f32(q) @ _f32(k).T / math.sqrt(q.shape[1])
  p = np.exp(s - s.max(1, keepdims=True))
  return p @ _f32(v) / p.sum(1, keepdims=True)


def test_a_k_or_n_the_tensor_cores_do_not_step_by_is_padded_with_zeros():
  """k of 40 or 72 bfloat16 (80, 144 bytes), 16 float8 (16 bytes), and n of 8 or 24 of a b stored (k, n) (16 and 48
  bytes: no swizzle takes them) were MG501 with a hint to pad outside the kernel: the compiler now pads them with
  zeros in registers (zero columns of a meet zero rows of b; b's zero columns give product columns it drops)."""
  for i, (sa, sb, bt, dt) in enumerate(_ODD):
    x, w = _rand(sa, dt, 50 + i), _rand(sb, dt, 60 + i)
    np.testing.assert_allclose(np.asarray(odd_sizes(x, w, bt=bt, interpret=True)), _odd_want(x, w, bt), rtol=1e-3,
                               atol=1e-3)
  _export(odd_sizes, *(_rand(s, BF16, 0) for s in _ODD[1][:2]), bt=True)
  _export(odd_sizes, *(_rand(s, F16, 0) for s in _ODD[2][:2]), bt=False)
  for d in (40, 72):
    q, k, v = _rand((64, d), BF16, 70), _rand((128, d), BF16, 71), _rand((128, d), BF16, 72)
    np.testing.assert_allclose(np.asarray(attention_head_dim(q, k, v, interpret=True)), _attention_want(q, k, v),
                               rtol=3e-2, atol=3e-2)
  _export(attention_head_dim, q, k, v)
  # n of 100 keys passed transposed (rows no multiple of 8) is not padded: its 100-column window of the product
  # would take no tensor-core layout. MG501 and its hint stand.
  expect(odd_sizes, [S((64, 64), F16), S((100, 64), F16)], mg.MmaOperandError, "ml.dot(x_s, w_s.T)",
         "ml.dot needs n (columns of b) to be a multiple of 8 and at most 256, got 100", bt=True)


@pytest.mark.gpu
def test_gpu_a_k_or_n_padded_with_zeros():
  for i, (sa, sb, bt, dt) in enumerate(_ODD):
    x, w = _rand(sa, dt, 80 + i), _rand(sb, dt, 90 + i)
    np.testing.assert_allclose(np.asarray(jax.jit(lambda a, b: odd_sizes(a, b, bt=bt))(x, w)), _odd_want(x, w, bt),
                               rtol=1e-2, atol=2e-2)
  for d in (40, 72):
    q, k, v = _rand((64, d), BF16, 100), _rand((128, d), BF16, 101), _rand((128, d), BF16, 102)
    np.testing.assert_allclose(np.asarray(jax.jit(attention_head_dim)(q, k, v)), _attention_want(q, k, v),
                               rtol=3e-2, atol=3e-2)


# ---------------------------------------------------------------- a register B operand, stored into SMEM by the compiler


@mg.mgpu_kernel(out_shape=lambda x, wq, sc: S((x.shape[0], wq.shape[1]), BF16), grid=lambda x, wq, sc: (wq.shape[1] // 64,))
def w8a16_decode(x, wq, sc, o):
  """W8A16 GEMV: the int8 weight tile dequantised in registers is B (Triton's tl.dot(x, w.to(bf16) * s))."""
  j = ml.program_id(0)
  x_s = ml.smem((x.shape[0], 64))
  acc = ml.zeros((x.shape[0], 64), F32)
  for k in range(x.shape[1] // 64):
    ml.copy(x.at[:, ml.ds(k * 64, 64)], x_s)
    w = (wq.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)][...].astype(F32) * sc.at[ml.ds(j * 64, 64)][...][None, :])
    acc = ml.dot(x_s, w.astype(x.dtype), acc)
  o.at[:, ml.ds(j * 64, 64)][...] = acc.astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
def scores_of_registers(q, k, o):
  """Triton's tl.dot(q, tl.trans(k)) of tiles loaded into registers: k (n, k) is stored as it is and read
  transposed, never moved twice."""
  o[...] = ml.dot(q[...], k[...].T) * 0.125


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[0]), F32 if x.dtype != jnp.int8 else jnp.int32))
def k_major_register_b(x, w, o):
  """float32 and int8 B from registers: the tensor cores read them K-major, stored (n, k)."""
  x_s = ml.smem(x.shape)
  ml.copy(x, x_s)
  o[...] = ml.dot(x_s, w[...].T)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def narrow_register_b(x, w, o):
  x_s = ml.smem(x.shape)
  ml.copy(x, x_s)
  o[...] = ml.dot(x_s, w[...] * 2)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[0]), F32))
def narrow_k_major_register_b(x, w, o):
  x_s = ml.smem(x.shape)
  ml.copy(x, x_s)
  o[...] = ml.dot(x_s, (w[...] * 2).T)


def _w8a16_inputs(rows, seed):
  rng = np.random.default_rng(seed)
  x = _rand((rows, 128), BF16, seed)
  wq = jnp.asarray(rng.integers(-127, 128, (128, 128)), jnp.int8)
  sc = jnp.asarray(rng.random(128) * 0.02, F32)
  w = _f32(jnp.asarray(_f32(wq) * _f32(sc)[None, :], BF16))
  return (x, wq, sc), _f32(jnp.asarray(_f32(x) @ w, BF16))


def test_a_register_b_is_stored_into_smem_for_the_tensor_cores():
  """A register B (a dequantised weight tile, a tile loaded as Triton loads it, its transpose, float32 and int8
  tiles) was MG501 ("operand b must be an SMEM buffer"): the compiler now stores it into an SMEM buffer the dot
  reads, (k, n) as it is for 16 bits, (n, k) read as its view .T for K-major dtypes and for a transpose."""
  for rows in (64, 8):
    args, want = _w8a16_inputs(rows, 21)
    np.testing.assert_allclose(_f32(w8a16_decode(*args, interpret=True)), want, rtol=2e-2, atol=2e-2)
  _export(w8a16_decode, *args)
  q, k = _rand((64, 64), F16, 22), _rand((128, 64), F16, 23)
  np.testing.assert_allclose(np.asarray(scores_of_registers(q, k, interpret=True)), _f32(q) @ _f32(k).T * 0.125,
                             rtol=1e-3, atol=1e-3)
  assert "TransposeLoad" not in scores_of_registers.typed_ir(_spec(q), _spec(k))   # k stored as loaded
  _export(scores_of_registers, q, k)
  tf32 = lambda v: (np.asarray(v, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
  x, w = _rand((8, 64), F32, 24), _rand((128, 64), F32, 25)
  np.testing.assert_allclose(np.asarray(k_major_register_b(x, w, interpret=True)), tf32(x) @ tf32(w).T,
                             rtol=1e-5, atol=1e-4)
  _export(k_major_register_b, x, w)
  rng = np.random.default_rng(26)
  xi, wi = (jnp.asarray(rng.integers(-128, 128, s), jnp.int8) for s in ((64, 64), (64, 64)))
  np.testing.assert_array_equal(np.asarray(k_major_register_b(xi, wi, interpret=True)),
                                np.asarray(xi, np.int32) @ np.asarray(wi, np.int32).T)
  x, w = _rand((64, 32), BF16, 27), _rand((32, 128), BF16, 28)     # k = 32: stored transposed (n = 128)
  np.testing.assert_allclose(np.asarray(narrow_register_b(x, w, interpret=True)), _f32(x) @ (2 * _f32(w)),
                             rtol=1e-3, atol=1e-3)
  _export(narrow_register_b, x, w)


def test_a_register_b_no_buffer_can_take_from_registers_is_padded_to_64_rows():
  """b (32, 32) from registers: registers fill a tensor-core buffer 64 rows at a time, and neither of its
  sizes is 64. This was MG501 with a hint padding k by hand; since probe 49a the compiler pads it (a 16-bit b along
  k, with zero columns of a; a float32 one along n, its product's first n columns kept). A float32 b of n not a
  multiple of 8 keeps the MG501 (its column window would take no tensor-core layout)."""
  tf32 = lambda v: (np.asarray(v, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
  x, w = _rand((64, 32), BF16, 40), _rand((32, 32), BF16, 41)
  np.testing.assert_allclose(np.asarray(narrow_register_b(x, w, interpret=True)), _f32(x) @ (2 * _f32(w)),
                             rtol=1e-3, atol=1e-3)
  _export(narrow_register_b, x, w)
  x, w = _rand((64, 64), F32, 42), _rand((32, 64), F32, 43)
  np.testing.assert_allclose(np.asarray(narrow_k_major_register_b(x, w, interpret=True)), tf32(x) @ tf32(2 * w).T,
                             rtol=1e-5, atol=1e-4)
  _export(narrow_k_major_register_b, x, w)
  expect(narrow_k_major_register_b, (S((64, 64), F32), S((20, 64), F32)), mg.MmaOperandError, "ml.dot(x_s, (w",
         "ml.dot stores a register operand b into SMEM for the tensor cores 64 rows at a time, but n (20) of b"
         " (64, 20) is not a multiple of 64 (float32 operands are read K-major, stored (n, k))",
         hint="copy b's tile into an SMEM buffer by TMA, which fills any rows (bt_s = ml.smem((20, 64));"
              " ml.copy(bt.at[...], bt_s); ml.dot(..., bt_s.T)), and apply the math to a or to the product instead"
              " (a scale of b's columns: the product times it)")


def _triton_gqa(block_h, block_n, g):
  """Triton's grouped decode (`_fwd_grouped_kernel_stage1`): BLOCK_H rows of query heads loaded under a mask of the
  group's g heads, K and V tiles loaded into registers, tl.dot(q, k.T) and tl.dot(p, v) of register tiles."""
  @mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, F32), grid=lambda q, k, v: (q.shape[0], k.shape[2]))
  def triton_gqa(q, k, v, o):
    b, kvh = ml.program_id(0), ml.program_id(1)
    d = q.shape[2]
    mask_h = ml.arange(block_h) < g
    qv = q.at[b, ml.ds(kvh * g, block_h), :].load(mask=mask_h[:, None], other=0.0)
    e_max = ml.full((block_h,), -1e30, F32)
    e_sum = ml.zeros((block_h,), F32)
    acc = ml.zeros((block_h, d), F32)
    for start in range(0, k.shape[1], block_n):
      kt = k.at[b, ml.ds(start, block_n), kvh, :][...]
      vt = v.at[b, ml.ds(start, block_n), kvh, :][...]
      qk = ml.dot(qv, kt.T) * (1.0 / math.sqrt(d))
      n_max = ml.maximum(ml.max(qk, axis=1), e_max)
      re = ml.exp(e_max - n_max)
      p = ml.exp(qk - n_max[:, None])
      acc = acc * re[:, None] + ml.dot(p.astype(vt.dtype), vt)
      e_sum = e_sum * re + ml.sum(p, axis=1)
      e_max = n_max
    o.at[b, ml.ds(kvh * g, block_h), :].store(acc / e_sum[:, None], mask=mask_h[:, None])
  return triton_gqa


_TRITON_GQA = [(16, 64, 4, 64), (16, 32, 8, 128)]


@pytest.mark.parametrize("block_h,block_n,g,d", _TRITON_GQA)
def test_triton_style_grouped_decode_of_register_tiles_matches_jnp(block_h, block_n, g, d):
  """16 rows of heads (Triton's smallest tl.dot) with 4 or 8 of them real: both dots have a register A of 16 rows
  and a register B (k.T of a (32, 128) tile, n = 32, is stored as the (128, 32) tile it is; v as it is)."""
  args = _gqa_inputs(g, 2, 128, d, F16, 40)
  kernel = _triton_gqa(block_h, block_n, g)
  np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True)), _gqa_want(*args)[0], atol=3e-2, rtol=3e-2)
  _export(kernel, *args)


@pytest.mark.gpu
@pytest.mark.parametrize("block_h,block_n,g,d", _TRITON_GQA)
def test_gpu_triton_style_grouped_decode(block_h, block_n, g, d):
  args = _gqa_inputs(g, 2, 256, d, F16, 41)
  np.testing.assert_allclose(np.asarray(jax.jit(_triton_gqa(block_h, block_n, g))(*args)), _gqa_want(*args)[0],
                             atol=3e-2, rtol=3e-2)


@pytest.mark.gpu
def test_gpu_a_register_b_stored_into_smem():
  for rows in (64, 8):
    args, want = _w8a16_inputs(rows, 31)
    np.testing.assert_allclose(_f32(jax.jit(w8a16_decode)(*args)), want, rtol=2e-2, atol=5e-2)
  q, k = _rand((64, 64), F16, 32), _rand((128, 64), F16, 33)
  np.testing.assert_allclose(np.asarray(jax.jit(scores_of_registers)(q, k)), _f32(q) @ _f32(k).T * 0.125,
                             rtol=1e-2, atol=1e-2)
  x, w = _rand((8, 64), F32, 34), _rand((128, 64), F32, 35)
  np.testing.assert_allclose(np.asarray(jax.jit(k_major_register_b)(x, w)),
                             np.asarray(k_major_register_b(x, w, interpret=True)), rtol=1e-3, atol=1e-3)
  rng = np.random.default_rng(36)
  xi, wi = (jnp.asarray(rng.integers(-128, 128, s), jnp.int8) for s in ((64, 64), (64, 64)))
  np.testing.assert_array_equal(np.asarray(jax.jit(k_major_register_b)(xi, wi)),
                                np.asarray(xi, np.int32) @ np.asarray(wi, np.int32).T)
  x, w = _rand((64, 32), BF16, 37), _rand((32, 128), BF16, 38)
  np.testing.assert_allclose(np.asarray(jax.jit(narrow_register_b)(x, w)), _f32(x) @ (2 * _f32(w)), rtol=1e-2,
                             atol=1e-2)
