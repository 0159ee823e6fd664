"""Probe 56a (refusals the last session left; small linear algebra and quantised GEMMs). (1) jnp.linalg.inv, solve
and det of a float (n, n) register matrix, n not a multiple of 16 (4x4 to 15x15, 20x20), were MG003: the matrix,
read padded, is grown into the (16k, 16k) one with ones on the padding's diagonal (ops/padded_squares.py, through an
SMEM scratch) and solved by form_helpers.lu_solve, the result cut back to the padded (n, n) tile; solve of a 1-D b
(MG003 at any n) is its column; a stack (B, n, n) (MG003) is each matrix's call stacked (det's scalars selected into
a vector). jnp.pad of a padded tile to a width registers hold (a (12, 12) to (16, 16)) was MG204: the part held
wider than the join is cut to it (ops/padded_joins.py). A stack's (B, n) b stays MG003 with a hint. (2) int32
jnp.dot of operands a padded trace holds padded, 9 rows or more ((12, 20) by (20, 16), (100, 24) by (24, 16)), was
MG204: both are grown into plain tiles of whole chunks and the product cut back (jnp_einsum._grown_ints); one too
large for chunks at once, (130, 20) by (20, 64) read padded or a plain (144, 32) by (32, 64), in pieces of b's
columns (MG204 before). (3) A
loop-carried index vector (`offsets_k += BK`) stretched both ways, into the rows of one tile and the columns of
another, tied the tiles into one layout that neither shape fits (vLLM's AWQ GEMM at BLOCK_M=16, BLOCK_N=16 or 32,
BLOCK_K=64: MG204 at B's (64, 2) gather of words): one use now reads a copy through SMEM, as a vector computed once
and stretched both ways already did (layout_errors.two_way_use). (4) solve_triangular of any n from 2, and the new
jnp.linalg.cholesky / jax.scipy.linalg.cholesky, slogdet (logs summed), cho_factor / cho_solve and matrix_power (all
MG003 before); pinv and the other decompositions keep MG003, with a hint naming what computes. (5) A slice bound
floor-divided by a constant that divides its coefficients (`qw[g * group // 2:(g + 1) * group // 2]`) was MG003:
it is linear now (index_hints._linear). (6) An int8 register A of k a multiple of 32, not of 64 (Triton's int8
GEMM at BLOCK_K=32) was MG501: it is staged into SMEM (dot_staging.staged_a). (7) Kernels probed and already right
(GPTQ act-order, int4 groups, W8A8, Gram matrices, least squares, CholeskyQR, Kalman, Newton-Schulz, power
iteration)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, f32, rnd
import test_probe52e as awq

S = jax.ShapeDtypeStruct


def _well(shape, seed, dt=np.float32):
  n = shape[-1]
  return (rnd(shape, seed) + 3.0 * np.eye(n, dtype=np.float32)).astype(dt)


# ---------------------------------------------------------------- (1) linalg of any n, and of stacks
@mg.mgpu_kernel(out_shape=lambda a: a)
def inverse(a, o):
  o[...] = jnp.linalg.inv(a[...])


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def solve(a, b, o):
  o[...] = jnp.linalg.solve(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda a: S((8,), a.dtype))
def determinant(a, o):
  o[...] = ml.full((8,), jnp.linalg.det(a[...]), a.dtype)


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[:1], a.dtype))
def determinants(a, o):
  o[...] = jnp.linalg.det(a[...])


@pytest.mark.parametrize("n", [4, 5, 7, 8, 12, 15, 20])
def test_inv_and_det_of_any_n_match_numpy(n):
  a = _well((n, n), n)
  np.testing.assert_allclose(inverse(a, interpret=True), np.linalg.inv(a), rtol=2e-4, atol=2e-5)
  np.testing.assert_allclose(determinant(a, interpret=True), np.full(8, np.linalg.det(a)), rtol=2e-5)


@pytest.mark.parametrize("n,b", [(5, (5, 32)), (12, (12, 128)), (12, (12, 100)), (13, (13, 1)), (10, (10,)),
                                 (16, (16,)), (20, (20,))])
def test_solve_of_any_n_and_a_vector_b(n, b):
  a, y = _well((n, n), n), rnd(b, 2)
  np.testing.assert_allclose(solve(a, y, interpret=True), np.linalg.solve(a, y), rtol=2e-4, atol=2e-5)


def test_bfloat16_matrix_rounds_once():
  a = _well((10, 10), 1, jnp.bfloat16)
  np.testing.assert_array_equal(f32(inverse(a, interpret=True)),
                                f32(jnp.asarray(np.linalg.inv(f32(a)), jnp.bfloat16)))


@pytest.mark.parametrize("b,n", [(2, 16), (4, 6), (2, 12), (2, 3), (4, 2)])
def test_stacks_are_each_matrix_s_call(b, n):
  a = _well((b, n, n), b + n)
  np.testing.assert_allclose(inverse(a, interpret=True), np.linalg.inv(a), rtol=2e-4, atol=2e-5)
  np.testing.assert_allclose(determinants(a, interpret=True), np.linalg.det(a), rtol=2e-5)
  y = rnd((b, n, 32), 3)
  np.testing.assert_allclose(solve(a, y, interpret=True), np.linalg.solve(a, y), rtol=2e-4, atol=2e-5)


def test_linalg_builds_for_cuda():
  export(inverse, _well((12, 12), 1))
  export(determinant, _well((5, 5), 2))
  export(solve, _well((20, 20), 3), rnd((20, 32), 4))
  export(solve, _well((10, 10), 3), rnd((10,), 4))
  export(inverse, _well((2, 6, 6), 5))
  export(determinants, _well((4, 12, 12), 6))


def test_a_stack_s_vector_b_keeps_mg003_with_a_hint():
  e = expect(solve, [S((2, 6, 6), jnp.float32), S((2, 6), jnp.float32)], mg.KernelTypeError, "jnp.linalg.solve(",
             "solve cannot take a register tensor inside a kernel")
  assert "write b[..., None]" in e.hint


@mg.mgpu_kernel(out_shape=lambda a: S((16, 16), a.dtype))
def padded_to_16(a, o):
  n = a.shape[0]
  o[...] = jnp.pad(a[...], ((0, 16 - n), (0, 16 - n)), constant_values=0.5) * 2.0


@pytest.mark.parametrize("n", [4, 12, 15])
def test_pad_of_a_padded_tile_to_a_held_width(n):
  a = rnd((n, n), n)
  np.testing.assert_array_equal(padded_to_16(a, interpret=True), np.pad(a, ((0, 16 - n), (0, 16 - n)),
                                                                        constant_values=0.5) * 2)
  export(padded_to_16, a)


@pytest.mark.gpu
def test_linalg_and_pads_on_gpu():
  for n in (5, 12, 20):
    a = _well((n, n), n)
    np.testing.assert_allclose(inverse(a), np.linalg.inv(a), rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(solve(a, rnd((n,), 1)), np.linalg.solve(a, rnd((n,), 1)), rtol=2e-4, atol=2e-5)
  a = _well((4, 6, 6), 9)
  np.testing.assert_allclose(determinants(a), np.linalg.det(a), rtol=2e-5)
  a = rnd((12, 12), 1)
  np.testing.assert_array_equal(padded_to_16(a), np.pad(a, ((0, 4), (0, 4)), constant_values=0.5) * 2)


# ---------------------------------------------------------------- (2) integer products of many padded rows
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.int32))
def int_dot(a, b, o):
  o[...] = jnp.dot(a[...], b[...], preferred_element_type=jnp.int32)


@pytest.mark.parametrize("m,k,n,dt", [(12, 20, 16, np.int32), (9, 20, 16, np.int32), (72, 40, 32, np.int32),
                                      (100, 24, 16, np.int32), (12, 20, 16, np.int8), (72, 40, 32, np.int8),
                                      (130, 20, 64, np.int32), (144, 32, 64, np.int32)])
def test_int_dot_of_many_padded_rows_is_exact(m, k, n, dt):
  g = np.random.default_rng(m + k)
  a, b = g.integers(-100, 100, (m, k)).astype(dt), g.integers(-100, 100, (k, n)).astype(dt)
  np.testing.assert_array_equal(int_dot(a, b, interpret=True), a.astype(np.int32) @ b.astype(np.int32))


def test_int_dot_of_padded_rows_builds_for_cuda():
  export(int_dot, np.ones((12, 20), np.int32), np.ones((20, 16), np.int32))
  export(int_dot, np.ones((100, 24), np.int32), np.ones((24, 16), np.int32))
  export(int_dot, np.ones((144, 32), np.int32), np.ones((32, 64), np.int32))     # (b's columns in pieces)


# ---------------------------------------------------------------- (3) a carried index vector stretched both ways
@mg.mgpu_kernel(out_shape=lambda a, b, **k: (S((a.shape[0],), jnp.float32), S((b.shape[1],), jnp.float32)))
def row_and_column_sums(a_ptr, b_ptr, ra, cb, *, BK: ml.constexpr):
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  rm, rn, rk = ml.arange(0, M), ml.arange(0, N), ml.arange(0, BK)
  acc_a, acc_b = ml.zeros((M,), ml.float32), ml.zeros((N,), ml.float32)
  for k in range(0, ml.cdiv(K, BK)):
    x = ml.load(a_ptr.at[rm[:, None], rk[None, :]], mask=rk[None, :] < K, other=0.0)
    w = ml.load(b_ptr.at[rk[:, None], rn[None, :]], mask=rk[:, None] < K, other=0.0)
    acc_a += ml.sum(x, axis=1)
    acc_b += ml.sum(w, axis=0)
    rk += BK
  ra[...] = acc_a
  cb[...] = acc_b


def test_a_carried_index_vector_stretched_both_ways():
  a, b = rnd((16, 256), 1), rnd((256, 4), 2)
  ra, cb = row_and_column_sums(a, b, BK=64, interpret=True)
  np.testing.assert_allclose(ra, a.sum(1), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(cb, b.sum(0), rtol=1e-5, atol=1e-4)
  export(row_and_column_sums, a, b, BK=64)


@pytest.mark.parametrize("m,bn", [(5, 16), (5, 32), (20, 32)])
def test_awq_gemm_block_m_16_block_k_64(m, bn):
  args, ref = awq._awq_gemm_case(m, 7)
  kw = dict(BM=16, BN=bn, BK=64, SPLIT_K=1, group_size=128)
  np.testing.assert_allclose(f32(awq.awq_gemm(*args, **kw, interpret=True)), ref, rtol=3e-2, atol=3e-2)
  export(awq.awq_gemm, *args, **kw)


@pytest.mark.gpu
def test_padded_int_dots_and_carried_vectors_on_gpu():
  g = np.random.default_rng(0)
  a, b = g.integers(-100, 100, (100, 24)).astype(np.int32), g.integers(-100, 100, (24, 16)).astype(np.int32)
  np.testing.assert_array_equal(int_dot(a, b), a @ b)
  a, b = rnd((16, 256), 1), rnd((256, 4), 2)
  ra, cb = row_and_column_sums(a, b, BK=64)
  np.testing.assert_allclose(cb, b.sum(0), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(ra, a.sum(1), rtol=1e-5, atol=1e-4)
  for m, bn in ((5, 16), (20, 32)):
    args, ref = awq._awq_gemm_case(m, 7)
    out = awq.awq_gemm(*args, BM=16, BN=bn, BK=64, SPLIT_K=1, group_size=128)
    np.testing.assert_allclose(f32(out), ref, rtol=3e-2, atol=3e-2)


# ---------------------------------------------------------------- (4) more small linear algebra
@mg.mgpu_kernel(out_shape=lambda a, b, **k: b)
def tri_solve(a, b, o, *, lower: ml.constexpr, trans: ml.constexpr, unit: ml.constexpr):
  o[...] = jax.scipy.linalg.solve_triangular(a[...], b[...], lower=lower, trans=trans, unit_diagonal=unit)


@pytest.mark.parametrize("n,m", [(12, 32), (5, 8), (3, 16), (20, 100)])
@pytest.mark.parametrize("lower,trans,unit", [(True, 0, False), (False, 1, True), (False, 0, False)])
def test_solve_triangular_of_any_n(n, m, lower, trans, unit):
  a, b = _well((n, n), n), rnd((n, m), 1)
  t = np.tril(a) if lower else np.triu(a)
  if unit:
    t = t - np.diag(np.diag(t)) + np.eye(n, dtype=np.float32)
  want = np.linalg.solve(t.T if trans else t, b)
  np.testing.assert_allclose(tri_solve(a, b, lower=lower, trans=trans, unit=unit, interpret=True), want,
                             rtol=1e-4, atol=1e-4 * np.abs(want).max())


@mg.mgpu_kernel(out_shape=lambda a: a)
def cholesky(a, o):
  o[...] = jnp.linalg.cholesky(a[...])


@mg.mgpu_kernel(out_shape=lambda a: a)
def cholesky_upper(a, o):
  o[...] = jax.scipy.linalg.cholesky(a[...])


def _spd(shape, seed):
  x = rnd(shape, seed)
  return (x @ np.swapaxes(x, -1, -2) / shape[-1] + np.eye(shape[-1], dtype=np.float32)).astype(np.float32)


@pytest.mark.parametrize("shape", [(16, 16), (12, 12), (5, 5), (3, 3), (32, 32), (2, 8, 8)])
def test_cholesky_matches_numpy(shape):
  a = _spd(shape, 1)
  want = np.linalg.cholesky(a)
  np.testing.assert_allclose(cholesky(a, interpret=True), want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(cholesky_upper(a, interpret=True), np.swapaxes(want, -1, -2), rtol=1e-5, atol=1e-6)


def test_a_matrix_not_positive_definite_is_nan_as_jax_s():
  a = _spd((16, 16), 2)
  a[3, 3] = -5.0
  assert np.isnan(cholesky(a, interpret=True)).any() and np.isnan(np.asarray(jnp.linalg.cholesky(a))).any()


@mg.mgpu_kernel(out_shape=lambda a: (S((8,), jnp.float32), S((8,), jnp.float32)))
def slogdet(a, s_o, l_o):
  s, l = jnp.linalg.slogdet(a[...])
  s_o[...] = ml.full((8,), s, jnp.float32)
  l_o[...] = ml.full((8,), l, jnp.float32)


@pytest.mark.parametrize("n,scale,flip", [(16, 1.0, True), (12, 1.0, False), (5, 1.0, True), (64, 40.0, False)])
def test_slogdet_sums_logs(n, scale, flip):
  a = rnd((n, n), n) * scale        # (64 x 40: |det| ~ e^334, past float32: the logs are summed)
  if flip:
    a[0] = -a[0]
  s, l = slogdet(a, interpret=True)
  ws, wl = np.linalg.slogdet(a.astype(np.float64))
  np.testing.assert_array_equal(s, np.full(8, ws, np.float32))
  np.testing.assert_allclose(l, np.full(8, wl), rtol=1e-5)


def test_more_linalg_builds_for_cuda():
  export(tri_solve, _well((12, 12), 1), rnd((12, 32), 2), lower=False, trans=1, unit=False)
  export(cholesky, _spd((12, 12), 3))
  export(cholesky_upper, _spd((2, 8, 8), 4))
  export(slogdet, rnd((12, 12), 5))


@pytest.mark.gpu
def test_more_linalg_on_gpu():
  a = _spd((12, 12), 3)
  np.testing.assert_allclose(cholesky(a), np.linalg.cholesky(a), rtol=1e-5, atol=1e-6)
  a, b = _well((12, 12), 1), rnd((12, 32), 2)
  np.testing.assert_allclose(tri_solve(a, b, lower=True, trans=0, unit=False), np.linalg.solve(np.tril(a), b),
                             rtol=1e-4, atol=1e-4)
  s, l = slogdet(rnd((12, 12), 5))
  np.testing.assert_allclose(l, np.full(8, np.linalg.slogdet(rnd((12, 12), 5))[1]), rtol=1e-5)


# ---------------------------------------------------------------- (5) quantised GEMMs: GPTQ act-order, int4 groups
def _grid(a, qw, sc, qz, g, *, BM, BN, BK):
  return (ml.cdiv(a.shape[0], BM) * ml.cdiv(qw.shape[1], BN),)

@mg.mgpu_kernel(out_shape=lambda a, qw, sc, qz, g, **k: S((a.shape[0], qw.shape[1]), jnp.float16), grid=_grid)
def gptq_matmul(a_ptr, b_ptr, scales_ptr, zeros_ptr, g_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr,
                BK: ml.constexpr):
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  bits, maxq, per = 4, 15, 8
  pid = ml.program_id(0)
  num_pid_n = ml.cdiv(N, BN)
  pid_m = pid // num_pid_n
  pid_n = pid % num_pid_n
  offs_am = pid_m * BM + ml.arange(0, BM)
  offs_bn = pid_n * BN + ml.arange(0, BN)
  offs_k = ml.arange(0, BK)
  a_mask = offs_am[:, None] < M
  shifter = (offs_k % per) * bits
  zeros_shifter = (offs_bn % per) * bits
  acc = ml.zeros((BM, BN), dtype=jnp.float32)
  for k in range(0, ml.cdiv(K, BK)):
    g_idx = ml.load(g_ptr.at[offs_k])
    scales = ml.load(scales_ptr.at[g_idx[:, None], offs_bn[None, :]])
    zeros = ml.load(zeros_ptr.at[g_idx[:, None], (offs_bn // per)[None, :]])
    zeros = (zeros >> zeros_shifter[None, :]) & maxq
    zeros = zeros + 1
    a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :]], mask=a_mask, other=0.0)
    b = ml.load(b_ptr.at[(offs_k // per)[:, None], offs_bn[None, :]])
    b = (b >> shifter[:, None]) & maxq
    b = ((b - zeros) * scales).astype(jnp.float16)
    acc += ml.dot(a, b)
    offs_k += BK
  c_mask = (offs_am[:, None] < M) & (offs_bn[None, :] < N)
  ml.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc.astype(jnp.float16), mask=c_mask)

def _gptq_problem(m, k, n, g, seed, act_order=True):
  rng = np.random.default_rng(seed)
  q = rng.integers(0, 16, (k, n)).astype(np.uint32)
  ngroups = k // g
  gidx = (np.arange(k) // g).astype(np.int32)
  if act_order: gidx = rng.permutation(gidx).astype(np.int32)
  z = rng.integers(0, 15, (ngroups, n)).astype(np.uint32)
  s = (rng.random((ngroups, n)) * 0.02 + 0.01).astype(np.float16)
  qw = np.zeros((k // 8, n), np.uint32)
  for i in range(8): qw |= q[i::8] << (4 * i)
  qz = np.zeros((ngroups, n // 8), np.uint32)
  for i in range(8): qz |= z[:, i::8] << (4 * i)
  w = (q.astype(np.float32) - (z[gidx] + 1)) * s[gidx].astype(np.float32)
  a = rng.standard_normal((m, k)).astype(np.float16)
  return (a, qw.view(np.int32), s, qz.view(np.int32), gidx), a.astype(np.float32) @ w


@pytest.mark.parametrize("m,k,n,g,bm,bn,bk", [(16, 256, 128, 64, 64, 64, 64), (5, 256, 128, 128, 16, 64, 64),
                                              (40, 256, 128, 32, 64, 64, 32), (5, 256, 64, 64, 16, 32, 64)])
def test_gptq_act_order_matmul(m, k, n, g, bm, bn, bk):
  args, ref = _gptq_problem(m, k, n, g, 1)
  out = gptq_matmul(*args, BM=bm, BN=bn, BK=bk, interpret=True)
  np.testing.assert_allclose(f32(out), ref, rtol=2e-2, atol=2e-2)
  if m == 5:
    export(gptq_matmul, *args, BM=bm, BN=bn, BK=bk)


@mg.mgpu_kernel(out_shape=lambda x, qw, s, **k: S((x.shape[0], qw.shape[1]), jnp.float32))
def int4_group(x_ref, qw_ref, s_ref, o_ref, *, group: ml.constexpr):
  # qw: (K // 2, N) uint8 holding two nibbles (low: even k, high: odd k); s: (K // group, N) per-group scale
  q = qw_ref[...].astype(jnp.int32)
  lo = (q & 0xF) - 8
  hi = (q >> 4) - 8
  w = jnp.stack([lo, hi], axis=1).reshape(-1, q.shape[1]).astype(jnp.float32)
  sc = jnp.repeat(s_ref[...].astype(jnp.float32), group, axis=0)
  o_ref[...] = jnp.dot(x_ref[...].astype(jnp.float32), w * sc)

@mg.mgpu_kernel(out_shape=lambda x, qw, s, **k: S((x.shape[0], qw.shape[1]), jnp.float32))
def int4_group_loop(x_ref, qw_ref, s_ref, o_ref, *, group: ml.constexpr):
  K = x_ref.shape[1]
  acc = jnp.zeros((x_ref.shape[0], qw_ref.shape[1]), jnp.float32)
  for g in range(K // group):
    q = qw_ref[g * group // 2:(g + 1) * group // 2, :].astype(jnp.int32)
    w = jnp.stack([(q & 0xF) - 8, (q >> 4) - 8], axis=1).reshape(group, q.shape[1]).astype(jnp.float16)
    part = jnp.dot(x_ref[:, g * group:(g + 1) * group], w, preferred_element_type=jnp.float32)
    acc = acc + part * s_ref[g, :].astype(jnp.float32)[None, :]
  o_ref[...] = acc

def _int4_problem(m, k, n, g, seed):
  rng = np.random.default_rng(seed)
  q = rng.integers(0, 16, (k, n)).astype(np.uint8)
  qw = (q[0::2] | (q[1::2] << 4)).astype(np.uint8)
  s = (rng.random((k // g, n)) * 0.1 + 0.01).astype(np.float16)
  x = rng.standard_normal((m, k)).astype(np.float16)
  w = (q.astype(np.float32) - 8) * np.repeat(s.astype(np.float32), g, 0)
  return (x, qw, s), x.astype(np.float32) @ w


@pytest.mark.parametrize("kernel", [int4_group, int4_group_loop])
@pytest.mark.parametrize("m,k,n,g", [(8, 128, 64, 32), (5, 96, 40, 32), (3, 64, 48, 16), (64, 256, 128, 128)])
def test_int4_group_quantised(kernel, m, k, n, g):
  args, ref = _int4_problem(m, k, n, g, 1)
  np.testing.assert_allclose(kernel(*args, group=g, interpret=True), ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())


def test_int4_groups_build_for_cuda():
  args, _ = _int4_problem(5, 96, 40, 32, 1)
  export(int4_group, *args, group=32)
  export(int4_group_loop, *args, group=32)


@mg.mgpu_kernel(out_shape=lambda x: S((32,), jnp.float32))
def halves(x, o):
  acc = ml.zeros((32,), jnp.float32)
  for i in range(x.shape[0] // 32):
    acc += x[i * 64 // 2:(i + 1) * 64 // 2]
  o[...] = acc


def test_a_slice_of_a_floor_divided_run_time_start_is_a_window():
  """`g * group // 2:(g + 1) * group // 2` (two nibbles a byte) was MG003, its hint a masked window of the whole
  dimension: the floor division of a linear form whose coefficients it divides is linear (index_hints._linear)."""
  x = rnd((256,), 1)
  np.testing.assert_allclose(halves(x, interpret=True), x.reshape(-1, 32).sum(0), rtol=1e-5, atol=1e-5)
  export(halves, x)


@pytest.mark.gpu
def test_quantised_gemms_on_gpu():
  args, ref = _gptq_problem(5, 256, 64, 64, 1)
  np.testing.assert_allclose(f32(gptq_matmul(*args, BM=16, BN=32, BK=64)), ref, rtol=2e-2, atol=2e-2)
  args, ref = _int4_problem(5, 96, 40, 32, 1)
  np.testing.assert_allclose(int4_group_loop(*args, group=32), ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())
  x = rnd((256,), 1)
  np.testing.assert_allclose(halves(x), x.reshape(-1, 32).sum(0), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- (6) an int8 register A of k 32 (Triton's BLOCK_K=32)
@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), jnp.int32),
                grid=lambda a, b, *, BM, BN, BK: (ml.cdiv(a.shape[0], BM), ml.cdiv(b.shape[1], BN)))
def int8_matmul(a_ptr, b_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr):
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  rm = ml.program_id(0) * BM + ml.arange(0, BM)
  rn = ml.program_id(1) * BN + ml.arange(0, BN)
  acc = ml.zeros((BM, BN), dtype=jnp.int32)
  for k in range(0, ml.cdiv(K, BK)):
    rk = k * BK + ml.arange(0, BK)
    a = ml.load(a_ptr.at[rm[:, None], rk[None, :]], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0)
    b = ml.load(b_ptr.at[rk[:, None], rn[None, :]], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
    acc += ml.dot(a, b, out_dtype=jnp.int32)
  ml.store(c_ptr.at[rm[:, None], rn[None, :]], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("m,k,n,bm,bk", [(100, 96, 64, 64, 32), (72, 128, 128, 64, 64), (130, 32, 64, 128, 32),
                                         (64, 96, 64, 64, 96), (5, 96, 64, 16, 32)])
def test_int8_matmul_of_block_k_32(m, k, n, bm, bk):
  g = np.random.default_rng(m)
  a, b = g.integers(-100, 100, (m, k)).astype(np.int8), g.integers(-100, 100, (k, n)).astype(np.int8)
  np.testing.assert_array_equal(int8_matmul(a, b, BM=bm, BN=64, BK=bk, interpret=True),
                                a.astype(np.int32) @ b.astype(np.int32))
  if bk % 64:
    export(int8_matmul, a, b, BM=bm, BN=64, BK=bk)


@pytest.mark.gpu
def test_int8_matmul_of_block_k_32_on_gpu():
  g = np.random.default_rng(1)
  a, b = g.integers(-100, 100, (100, 96)).astype(np.int8), g.integers(-100, 100, (96, 64)).astype(np.int8)
  np.testing.assert_array_equal(int8_matmul(a, b, BM=64, BN=64, BK=32), a.astype(np.int32) @ b.astype(np.int32))
  np.testing.assert_array_equal(int8_matmul(a, b, BM=16, BN=64, BK=32), a.astype(np.int32) @ b.astype(np.int32))


# ---------------------------------------------------------------- the first trace's error at a padded call
@mg.mgpu_kernel(out_shape=lambda a, v: (a, S((v.shape[0],), v.dtype)))
def inverse_beside_a_mistake(a, v, o, p):
  o[...] = jnp.linalg.inv(a[...])
  p[...] = jnp.sort(v[...].reshape(10, 10), axis=0).reshape(100)


def test_a_padded_call_beside_another_error_says_so():
  e = expect(inverse_beside_a_mistake, [S((12, 12), jnp.float32), S((100,), jnp.float32)], mg.LayoutError,
             "jnp.linalg.inv(", "this call's (12, 12) tile is no register tensor as it is; it is computed read"
             " padded, as (12, 32) under a mask, in a trace that another error of this kernel stopped",
             hint="fix the kernel's other errors, listed after this one: then this call computes")
  assert "reshape of v[...], a vector of 100 elements, into (10, 10)" in str(e)


# ---------------------------------------------------------------- (7) probed and already right
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[1], b.shape[1]), jnp.float32))
def lstsq_normal(a, b, o):
  A = a[...]
  o[...] = jnp.linalg.solve(A.T @ A, A.T @ b[...])

@mg.mgpu_kernel(out_shape=lambda x, m, p: S((x.shape[0],), jnp.float32))
def mahalanobis(x, mu, prec, o):    # rows of x (100, 12) against a mean and precision via cholesky
  L = jnp.linalg.cholesky(prec[...])
  d = x[...] - mu[...][None, :]
  y = d @ L
  o[...] = jnp.sum(y * y, axis=1)

@mg.mgpu_kernel(out_shape=lambda P, H, R: P)
def kalman_cov(P, H, R, o):          # P (4,4), H (2,4), R (2,2): P - P H^T (H P H^T + R)^-1 H P
  p, h = P[...], H[...]
  s = h @ p @ h.T + R[...]
  k = p @ h.T @ jnp.linalg.inv(s)
  o[...] = p - k @ h @ p

@mg.mgpu_kernel(out_shape=lambda a: a)
def newton_schulz(a, o):
  A = a[...]
  n = A.shape[0]
  X = A.T / (jnp.max(jnp.sum(jnp.abs(A), axis=0)) * jnp.max(jnp.sum(jnp.abs(A), axis=1)))
  I = jnp.eye(n, dtype=jnp.float32)
  for _ in range(30):
    X = X @ (2 * I - A @ X)
  o[...] = X

@mg.mgpu_kernel(out_shape=lambda a: S((8,), jnp.float32))
def power_iter(a, o):
  A = a[...]
  v = jnp.ones((A.shape[0],), jnp.float32)
  for _ in range(50):
    w = jnp.sum(A * v[None, :], axis=1)
    v = w / jnp.sqrt(jnp.sum(w * w))
  lam = jnp.sum(v * jnp.sum(A * v[None, :], axis=1))
  o[...] = jnp.full((8,), lam)

@mg.mgpu_kernel(out_shape=lambda x, w, sx, sw: S((x.shape[0], w.shape[1]), jnp.float16))
def w8a8(x, w, sx, sw, o):    # SmoothQuant: int8 x int8 -> int32, per-token and per-channel scales
  acc = jnp.dot(x[...], w[...], preferred_element_type=jnp.int32)
  o[...] = (acc.astype(jnp.float32) * sx[...][:, None] * sw[...][None, :]).astype(jnp.float16)

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[1]), jnp.float32))
def qr_r(x, o):                    # R of a thin QR by Cholesky of the Gram matrix (CholeskyQR)
  v = x[...]
  o[...] = jnp.linalg.cholesky(v.T @ v).T


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[1]), jnp.float32))
def gram(x, o):
  v = x[...].astype(jnp.float32)
  o[...] = v.T @ v


def _rel(got, want):
  return np.abs(f32(got) - want).max() / np.abs(want).max()


def test_linear_algebra_users_write_already_computes():
  a, b = rnd((64, 16), 1), rnd((64, 16), 2)
  assert _rel(lstsq_normal(a, b, interpret=True), np.linalg.lstsq(a, b, rcond=None)[0]) < 1e-3
  x, mu, c = rnd((128, 12), 3), rnd((12,), 4), rnd((12, 12), 5)
  prec = (c @ c.T / 12 + np.eye(12)).astype(np.float32)
  y = (x - mu) @ np.linalg.cholesky(prec)
  assert _rel(mahalanobis(x, mu, prec, interpret=True), (y * y).sum(1)) < 1e-4
  c = rnd((4, 4), 6)
  p, h, r = (c @ c.T + np.eye(4)).astype(np.float32), rnd((2, 4), 7), np.eye(2, dtype=np.float32)
  k = p @ h.T @ np.linalg.inv(h @ p @ h.T + r)
  assert _rel(kalman_cov(p, h, r, interpret=True), p - k @ h @ p) < 5e-3      # (TF32 products of padded tiles)
  a = rnd((16, 16), 8) + 4 * np.eye(16, dtype=np.float32)
  assert _rel(newton_schulz(a, interpret=True), np.linalg.inv(a)) < 1e-2
  s = (lambda c: (c @ c.T).astype(np.float32))(rnd((16, 16), 9))
  assert _rel(power_iter(s, interpret=True), np.full(8, np.linalg.eigvalsh(s).max())) < 1e-3
  x = rnd((128, 16), 10)
  assert _rel(qr_r(x, interpret=True), np.linalg.cholesky(x.T @ x).T) < 1e-4
  for shape in ((64, 16), (100, 16), (64, 12)):
    x = rnd(shape, 11)
    assert _rel(gram(x, interpret=True), x.T @ x) < 2e-3
  export(mahalanobis, rnd((128, 12), 3), mu, prec)
  export(kalman_cov, p, h, r)
  export(qr_r, rnd((128, 16), 10))


@pytest.mark.parametrize("m", [64, 72, 5])
def test_w8a8_with_per_token_scales(m):
  g = np.random.default_rng(m)
  xq, wq = g.integers(-127, 127, (m, 64)).astype(np.int8), g.integers(-127, 127, (64, 128)).astype(np.int8)
  sx, sw = (g.random(m) * 0.01).astype(np.float32), (g.random(128) * 0.01).astype(np.float32)
  want = (xq.astype(np.int32) @ wq.astype(np.int32)) * sx[:, None] * sw[None, :]
  assert _rel(w8a8(xq, wq, sx, sw, interpret=True), want) < 2e-3


# ---------------------------------------------------------------- (8) matrix_power, cho_factor / cho_solve; decompositions
@mg.mgpu_kernel(out_shape=lambda a, **k: a)
def matrix_power(a, o, *, n: ml.constexpr):
  o[...] = jnp.linalg.matrix_power(a[...], n)


@mg.mgpu_kernel(out_shape=lambda a, b, **k: b)
def cho_solve(a, b, o, *, lower: ml.constexpr):
  c = jax.scipy.linalg.cho_factor(a[...], lower=lower)
  o[...] = jax.scipy.linalg.cho_solve(c, b[...])


@mg.mgpu_kernel(out_shape=lambda a: a)
def inverse_by_cholesky(a, o):
  low = jnp.linalg.cholesky(a[...])
  y = jax.scipy.linalg.solve_triangular(low, jnp.eye(a.shape[0], dtype=jnp.float32), lower=True)
  o[...] = jax.scipy.linalg.solve_triangular(low.T, y, lower=False)


@mg.mgpu_kernel(out_shape=lambda a: a)
def pseudo_inverse(a, o):
  o[...] = jnp.linalg.pinv(a[...])


@pytest.mark.parametrize("shape,n", [((12, 12), 3), ((16, 16), 4), ((5, 5), 7)])
def test_matrix_power_by_squaring(shape, n):
  a = np.random.default_rng(n).integers(-2, 3, shape).astype(np.int32)
  np.testing.assert_array_equal(matrix_power(a, n=n, interpret=True), np.linalg.matrix_power(a, n))
  x = rnd(shape, n) * 0.5
  assert _rel(matrix_power(x, n=n, interpret=True), np.linalg.matrix_power(x, n)) < 1e-2    # (TF32 products)


@pytest.mark.parametrize("n", [12, 16, 5])
@pytest.mark.parametrize("lower", [True, False])
def test_cho_factor_and_cho_solve(n, lower):
  a, b = _spd((n, n), n), rnd((n, 32), 1)
  np.testing.assert_allclose(cho_solve(a, b, lower=lower, interpret=True), np.linalg.solve(a, b), rtol=1e-4,
                             atol=1e-4)
  np.testing.assert_allclose(inverse_by_cholesky(a, interpret=True), np.linalg.inv(a), rtol=1e-4, atol=1e-5)


def test_cholesky_forms_build_for_cuda():
  export(cho_solve, _spd((12, 12), 1), rnd((12, 32), 2), lower=True)
  export(inverse_by_cholesky, _spd((12, 12), 1))
  export(matrix_power, rnd((12, 12), 1), n=3)


def test_a_decomposition_keeps_mg003_naming_what_computes():
  e = expect(pseudo_inverse, [S((12, 12), jnp.float32)], mg.KernelTypeError, "jnp.linalg.pinv(",
             "pinv cannot take a register tensor inside a kernel")
  assert e.hint.startswith("kernels factor a register matrix by elimination only") and "jnp.linalg.inv(a)" in e.hint


@pytest.mark.gpu
def test_cholesky_forms_on_gpu():
  a, b = _spd((12, 12), 1), rnd((12, 32), 2)
  np.testing.assert_allclose(cho_solve(a, b, lower=False), np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
  x = np.random.default_rng(3).integers(-2, 3, (12, 12)).astype(np.int32)
  np.testing.assert_array_equal(matrix_power(x, n=3), np.linalg.matrix_power(x, 3))


# ---------------------------------------------------------------- a computed matrix's padding is not the matrix's
@mg.mgpu_kernel(out_shape=lambda a: (a, S((8,), jnp.float32)))
def shifted(a, o, d):
  o[...] = jnp.linalg.inv(a[...] + 1.0)                 # (1.0 in the padding of a (12, 12) read as (12, 32) too)
  d[...] = ml.full((8,), jnp.linalg.det(a[...] - 0.5), jnp.float32)


@pytest.mark.parametrize("n", [5, 12])
def test_a_computed_matrix_s_padding_is_cleared(n):
  a = _well((n, n), n)
  inv, det = shifted(a, interpret=True)
  np.testing.assert_allclose(inv, np.linalg.inv(a + 1.0), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(det, np.full(8, np.linalg.det(a - 0.5)), rtol=1e-5)
