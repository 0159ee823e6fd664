"""Probe 47g: Triton tutorials and Liger / FlagGems kernels ported whole. Their everyday spellings were hints
(MG003, MG001, MG501): `x.to(dtype)` and `x.cast(dtype)`, Triton's dtype names (`tl.int1`), `tl.max(x, axis,
return_indices=True)`, `a and b` of masks, and `tl.dot(a, b)` of a B tile loaded into registers. Each is now
the kernel it obviously means."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return str(jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module())


def _rng(seed):
  return np.random.default_rng(seed)


# ---------------------------------------------------------------- .to / .cast (Liger's swiglu and rms norm)
@mg.mgpu_kernel(out_shape=lambda a, b, *, BLOCK_SIZE: b, grid=lambda a, b, **k: (a.shape[0],))
def swiglu_forward(a_ptr, b_ptr, c_ptr, *, BLOCK_SIZE: ml.constexpr):
  program_id = ml.program_id(0).to(jnp.int64)
  n_cols = a_ptr.shape[1]
  col_offsets = ml.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  a_row = ml.load(a_ptr.at[program_id, col_offsets], mask=mask, other=0).to(jnp.float32)
  b_row = ml.load(b_ptr.at[program_id, col_offsets], mask=mask, other=0)
  c_row = (a_row * ml.sigmoid(a_row)).cast(b_row.dtype) * b_row
  ml.store(c_ptr.at[program_id, col_offsets], c_row, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, *, how: S(x.shape, I32 if how != "f8" else jnp.float8_e5m2))
def triton_casts(x, out, *, how: ml.constexpr):
  v = x[...]
  if how == "bits":
    out[...] = v.to(jnp.int32, bitcast=True)
  elif how == "f8":
    out[...] = v.to(ml.float8e5)
  else:
    out[...] = (v > 0).to(ml.int1).to(jnp.int32) + v.cast(jnp.int32)


def test_to_and_cast_are_astype():
  a = jnp.asarray(_rng(0).standard_normal((6, 300)), BF16)
  b = jnp.asarray(_rng(1).standard_normal((6, 300)), BF16)
  want = jax.nn.silu(a.astype(F32)).astype(BF16) * b
  got = swiglu_forward(a, b, BLOCK_SIZE=512, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-2, atol=1e-2)
  assert "mosaic_gpu" in _export(swiglu_forward, S((6, 300), BF16), S((6, 300), BF16), BLOCK_SIZE=512)
  x = jnp.asarray(_rng(2).standard_normal(256) * 4, F32)
  np.testing.assert_array_equal(triton_casts(x, how="bits", interpret=True), np.asarray(x).view(np.int32))
  np.testing.assert_array_equal(triton_casts(x, how="int", interpret=True), (x > 0) + x.astype(I32))
  np.testing.assert_array_equal(np.asarray(triton_casts(x, how="f8", interpret=True)).view(np.uint8),
                                np.asarray(x.astype(jnp.float8_e5m2)).view(np.uint8))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def keep_dims_and_zeros_like(x, out):
  r = ml.program_id(0) * 8 + ml.arange(0, 8)
  c = ml.arange(0, 128)
  v = ml.load(x.at[r[:, None], c[None, :]])
  acc = ml.zeros_like(v)
  acc += ml.exp(v - ml.max(v, axis=1, keep_dims=True))
  ml.store(out.at[r[:, None], c[None, :]], acc / ml.sum(acc, axis=1, keep_dims=True) + ml.zeros_like(v, dtype=F32))


def test_keep_dims_and_zeros_like_are_tritons():
  x = jnp.asarray(_rng(20).standard_normal((16, 128)), F32)
  np.testing.assert_allclose(np.asarray(keep_dims_and_zeros_like(x, interpret=True)), jax.nn.softmax(x, axis=1),
                             rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _export(keep_dims_and_zeros_like, S((16, 128), F32))


# ---------------------------------------------------------------- tl.rand / tl.randn numbers (the dropout tutorial)
@mg.mgpu_kernel(out_shape=lambda x, seed, *, p: x, grid=lambda x, seed, *, p: (ml.cdiv(x.shape[0], 1024),))
def seeded_dropout(x_ptr, seed: ml.scalar, output_ptr, *, p: ml.constexpr):
  offsets = ml.program_id(axis=0) * 1024 + ml.arange(0, 1024)
  mask = offsets < x_ptr.shape[0]
  x = ml.load(x_ptr.at[offsets], mask=mask)
  random = ml.rand(seed, offsets)
  ml.store(output_ptr.at[offsets], ml.where(random > p, x / (1 - p), 0.0), mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, seed: (x,) * 4)
def normals(x, seed: ml.scalar, n, n0, n1, n3):
  offs = ml.arange(0, x.shape[0])
  n[...] = ml.randn(seed, offs)
  a, b, _, d = ml.randn4x(seed, offs)
  n0[...], n1[...], n3[...] = a, b, d


def _triton_uniform(words):
  """triton.language.random.uint_to_uniform_float of uint32 words."""
  i = np.asarray(words, np.uint64).astype(np.uint32).view(np.int32)
  return np.where(i < 0, ~i, i).astype(np.float32) * np.float32(4.6566127342e-10)


def _box_muller(u1, u2):
  r = np.sqrt(np.float32(-2.0) * np.log(np.maximum(np.float32(1e-7), u1)))
  th = np.float32(6.283185307179586) * u2
  return r * np.cos(th), r * np.sin(th)


def test_rand_and_randn_are_tritons_numbers():
  from mgpu_dsl.lowering.random import philox_numpy
  x = jnp.asarray(_rng(23).standard_normal(3000), F32)
  words = philox_numpy(7, 0, np.arange(3000))
  keep = _triton_uniform(words[0]) > 0.3
  got = np.asarray(seeded_dropout(x, 7, p=0.3, interpret=True))
  # (x / (1 - p) of a constexpr p: jnp's product by float32(1 / 0.7), as XLA rewrites the division; probe 53h)
  np.testing.assert_array_equal(got, np.where(keep, np.asarray(x) * (np.float32(1) / np.float32(0.7)), 0.0))
  u = [_triton_uniform(w) for w in philox_numpy(11, 0, np.arange(256))]
  n, n0, n1, n3 = (np.asarray(v) for v in normals(jnp.zeros((256,), F32), 11, interpret=True))
  (c0, s0), (_, s1) = _box_muller(u[0], u[1]), _box_muller(u[2], u[3])
  for got, want in ((n, c0), (n0, c0), (n1, s0), (n3, s1)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in _export(normals, S((256,), F32), S((), I32))


# ---------------------------------------------------------------- return_indices (FlagGems' argmax, argmin)
def _partials(inp, *, BLOCK_SIZE, KIND):
  n = ml.cdiv(inp.shape[0], BLOCK_SIZE)
  return S((n,), F32), S((n,), I32)


@mg.mgpu_kernel(out_shape=_partials, grid=lambda inp, *, BLOCK_SIZE, KIND: (ml.cdiv(inp.shape[0], BLOCK_SIZE),))
def arg_stage1(inp, mid_value, mid_index, *, BLOCK_SIZE: ml.constexpr, KIND: ml.constexpr):
  pid = ml.program_id(0)
  offset = pid * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  mask = offset < inp.shape[0]
  if KIND == "max":
    val = ml.load(inp.at[offset], mask=mask, other=-float("inf"))
    best, index = ml.max(val, axis=0, return_indices=True)
  else:
    val = ml.load(inp.at[offset], mask=mask, other=float("inf"))
    best, index = ml.min(val, 0, return_indices=True, return_indices_tie_break_left=True)
  ml.store(mid_value.at[pid], best)
  ml.store(mid_index.at[pid], index + pid * BLOCK_SIZE)


@mg.mgpu_kernel(out_shape=lambda inp, **k: S((inp.shape[0], inp.shape[2]), I32),
                grid=lambda inp, *, BLOCK_M, BLOCK_N: (ml.cdiv(inp.shape[0], BLOCK_M), inp.shape[2]))
def argmax_dim(inp, out_index, *, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr):
  M, N, K = inp.shape
  pid_m = ml.program_id(0)
  pid_k = ml.program_id(1)
  m_offset = pid_m * BLOCK_M + ml.arange(0, BLOCK_M)
  max_values = ml.full([BLOCK_M], dtype=F32, value=float("-inf"))
  argmax_values = ml.full([BLOCK_M], dtype=I32, value=0)
  for start_n in range(0, N, BLOCK_N):
    n_offset = start_n + ml.arange(0, BLOCK_N)
    mask = m_offset[:, None] < M and n_offset[None, :] < N
    vals = ml.load(inp.at[m_offset[:, None], n_offset[None, :], pid_k], mask=mask, other=-float("inf"))
    local_max, local_argmax = ml.max(vals, 1, return_indices=True, return_indices_tie_break_left=True)
    update = local_max > max_values
    max_values = ml.where(update, local_max, max_values)
    argmax_values = ml.where(update, start_n + local_argmax, argmax_values)
  ml.store(out_index.at[m_offset, pid_k], argmax_values, mask=m_offset < M)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), I32))
def argmax_tie_left(x, out):
  out[...] = ml.argmax(x[...], axis=1, tie_break_left=True)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def masked_return_indices(x, out):
  v = x[...]
  best, at = ml.max(v, axis=1, where=v > 0, return_indices=True)
  out[...] = best


def test_return_indices_is_the_value_and_its_first_index():
  x = jnp.asarray(np.round(_rng(3).standard_normal(3000) * 3), F32)      # many ties
  for kind, arg in (("max", np.argmax), ("min", np.argmin)):
    val, idx = arg_stage1(x, BLOCK_SIZE=1024, KIND=kind, interpret=True)
    blocks = [np.asarray(x)[i:i + 1024] for i in range(0, 3000, 1024)]
    np.testing.assert_array_equal(idx, [i * 1024 + arg(b) for i, b in enumerate(blocks)])
    np.testing.assert_array_equal(val, [b.max() if kind == "max" else b.min() for b in blocks])
  x3 = jnp.asarray(np.round(_rng(4).standard_normal((20, 100, 3))), F32)
  np.testing.assert_array_equal(argmax_dim(x3, BLOCK_M=8, BLOCK_N=64, interpret=True), np.argmax(x3, axis=1))
  assert "mosaic_gpu" in _export(argmax_dim, S((20, 100, 3), F32), BLOCK_M=8, BLOCK_N=64)
  x2 = np.round(_rng(5).standard_normal((8, 128))).astype(np.float32)
  np.testing.assert_array_equal(argmax_tie_left(x2, interpret=True), np.argmax(x2, axis=1))


def test_return_indices_with_a_mask_says_to_select_first():
  expect(masked_return_indices, [S((8, 128), F32)], mg.KernelTypeError, "ml.max(v,",
         "ml.max(..., return_indices=True) takes no where=",
         hint="select first, with the reduction's identity where the mask is off: v = ml.where(m, v, float('-inf'));"
              " ml.max(v, axis, return_indices=True)")


# ---------------------------------------------------------------- `and` / `or` / `not` of masks (FlagGems)
@mg.mgpu_kernel(out_shape=lambda inp, m, value, **k: inp,
                grid=lambda inp, m, value, *, BLOCK_SIZE: (ml.cdiv(inp.shape[0], BLOCK_SIZE),))
def masked_fill(inp, expand_mask, value: ml.scalar, out, *, BLOCK_SIZE: ml.constexpr):
  N = inp.shape[0]
  offsets = ml.program_id(axis=0) * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  mask = offsets < N
  fill_mask = ml.load(expand_mask.at[offsets], mask=mask, other=0).to(ml.int1)
  cur_inp = ml.load(inp.at[offsets], mask=(not fill_mask) and mask, other=0)
  ml.store(out.at[offsets], cur_inp, mask=(not fill_mask) and mask)
  ml.store(out.at[offsets], value, mask=fill_mask and mask)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (ml.cdiv(x.shape[0], 128),))
def scalar_and_mask(x, n: ml.scalar, out):
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(0, 128)
  m = offs < x.shape[0]
  v = ml.load(x.at[offs], mask=m, other=0.0)
  keep = pid < n and v > 0 or v < -1
  ml.store(out.at[offs], ml.where(keep, v, 0.0), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x)
def number_and_mask(x, out):
  v = x[...]
  out[...] = ml.where((v > 0) and ml.arange(0, 256), v, 0.0)


def test_and_or_not_of_masks_are_elementwise():
  x = jnp.asarray(_rng(6).standard_normal(1000), F32)
  fm = _rng(7).random(1000) < 0.3
  for m in (jnp.asarray(fm), jnp.asarray(fm, jnp.int8)):
    np.testing.assert_array_equal(masked_fill(x, m, 2.5, BLOCK_SIZE=256, interpret=True), np.where(fm, 2.5, x))
  assert "mosaic_gpu" in _export(masked_fill, S((1000,), F32), S((1000,), jnp.bool_), S((), F32), BLOCK_SIZE=256)
  pid = np.arange(1000) // 128
  for n in (0, 3):
    want = np.where((pid < n) & (x > 0) | (x < -1), x, 0)
    np.testing.assert_array_equal(scalar_and_mask(x, n, interpret=True), want)
  # a number beside a mask keeps its MG001: Triton's `and` of it would be its truth, spelt `!= 0` here
  expect(number_and_mask, [S((256,), F32)], mg.UnsupportedSyntaxError, "(v > 0) and",
         "'and'/'or' on register values is not supported in a kernel",
         hint="use & and | on booleans (both sides are computed): (v > 0) & ml.arange(0, 256)")


# ---------------------------------------------------------------- tl.dot of a B tile in registers
@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), a.dtype),
                grid=lambda a, b, *, BLOCK_M, BLOCK_N, BLOCK_K: (ml.cdiv(a.shape[0], BLOCK_M) * ml.cdiv(b.shape[1], BLOCK_N),))
def matmul_kernel(a_ptr, b_ptr, c_ptr, *, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr, BLOCK_K: ml.constexpr):
  """The Triton tutorial's matmul, its pointer blocks as index grids: the rows and columns it reads wrap (`% M`), the
  ones it stores are masked (a row past A's end read unmasked is MG203)."""
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  pid = ml.program_id(0)
  num_pid_n = ml.cdiv(N, BLOCK_N)
  pid_m = pid // num_pid_n
  pid_n = pid % num_pid_n
  offs_am = (pid_m * BLOCK_M + ml.arange(0, BLOCK_M)) % M
  offs_bn = (pid_n * BLOCK_N + ml.arange(0, BLOCK_N)) % N
  offs_cm = pid_m * BLOCK_M + ml.arange(0, BLOCK_M)
  offs_cn = pid_n * BLOCK_N + ml.arange(0, BLOCK_N)
  offs_k = ml.arange(0, BLOCK_K)
  accumulator = ml.zeros((BLOCK_M, BLOCK_N), dtype=F32)
  for k in range(0, ml.cdiv(K, BLOCK_K)):
    a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :] + k * BLOCK_K], mask=offs_k[None, :] < K - k * BLOCK_K,
                other=0.0)
    b = ml.load(b_ptr.at[offs_k[:, None] + k * BLOCK_K, offs_bn[None, :]], mask=offs_k[:, None] < K - k * BLOCK_K,
                other=0.0)
    accumulator = ml.dot(a, b, accumulator)
  c = accumulator.to(c_ptr.dtype)
  ml.store(c_ptr.at[offs_cm[:, None], offs_cn[None, :]], c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], a.shape[1], b.shape[2]), a.dtype),
                grid=lambda a, b, *, TILE: (ml.cdiv(a.shape[1], TILE), ml.cdiv(b.shape[2], TILE), a.shape[0]))
def bmm(A, B, O, *, TILE: ml.constexpr):
  batch, M, K = A.shape
  N = B.shape[2]
  pid_b = ml.program_id(2)
  offs_m = ml.program_id(0) * TILE + ml.arange(0, TILE)
  offs_n = ml.program_id(1) * TILE + ml.arange(0, TILE)
  o = ml.zeros((TILE, TILE), dtype=F32)
  for k0 in range(0, K, TILE):
    kk = k0 + ml.arange(0, TILE)
    a = ml.load(A.at[pid_b, offs_m[:, None], kk[None, :]], mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
    b = ml.load(B.at[pid_b, kk[:, None], offs_n[None, :]], mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    o += ml.dot(a, b)
  ml.store(O.at[pid_b, offs_m[:, None], offs_n[None, :]], o.to(O.dtype), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), a.dtype),
                grid=lambda a, b, **k: (ml.cdiv(a.shape[0], 64) * ml.cdiv(b.shape[1], 64),))
def matmul_masked_n(a_ptr, b_ptr, c_ptr, *, BLOCK_K: ml.constexpr):
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  pid_m = ml.program_id(0) // ml.cdiv(N, 64)
  pid_n = ml.program_id(0) % ml.cdiv(N, 64)
  offs_am = pid_m * 64 + ml.arange(0, 64)
  offs_bn = pid_n * 64 + ml.arange(0, 64)
  offs_k = ml.arange(0, BLOCK_K)
  n_ok = offs_bn[None, :] < N      # one (1, 64) mask for the B tile and the product (written twice, each use has
  acc = ml.zeros((64, 64), dtype=F32)     # its own copy since probe 51e, and BLOCK_K=32 computes: test_probe51e)
  for k in range(0, ml.cdiv(K, BLOCK_K)):
    a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :] + k * BLOCK_K], mask=offs_k[None, :] < K - k * BLOCK_K,
                other=0.0)
    b = ml.load(b_ptr.at[offs_k[:, None] + k * BLOCK_K, offs_bn[None, :]],
                mask=(offs_k[:, None] < K - k * BLOCK_K) & n_ok, other=0.0)
    acc = ml.dot(a, b, acc)
  ml.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc.to(c_ptr.dtype), mask=(offs_am[:, None] < M) & n_ok)


def _mm(a, b):
  return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


@pytest.mark.parametrize("block_k", [32, 64])
def test_a_dot_of_a_register_b_tile_stages_it_in_smem(block_k):
  a = jnp.asarray(_rng(8).standard_normal((128, 96)), F16)
  b = jnp.asarray(_rng(9).standard_normal((96, 128)), F16)
  got = matmul_kernel(a, b, BLOCK_M=64, BLOCK_N=64, BLOCK_K=block_k, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), _mm(a, b), rtol=2e-2, atol=5e-2)
  assert "mosaic_gpu" in _export(matmul_kernel, S((128, 96), F16), S((96, 128), F16), BLOCK_M=64, BLOCK_N=64,
                                 BLOCK_K=block_k)


def test_a_tf32_dot_of_two_register_tiles_stages_both():
  """float32 tiles (Triton's TF32 tl.dot): A is read from SMEM only, B K-major: both staged."""
  a = jnp.asarray(_rng(24).standard_normal((128, 96)), F32)
  b = jnp.asarray(_rng(25).standard_normal((96, 128)), F32)
  got = matmul_kernel(a, b, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, interpret=True)
  np.testing.assert_allclose(np.asarray(got), _mm(a, b), rtol=2e-2, atol=1e-1)
  assert "mosaic_gpu" in _export(matmul_kernel, S((128, 96), F32), S((96, 128), F32), BLOCK_M=64, BLOCK_N=64,
                                 BLOCK_K=32)


def test_a_batched_dot_of_register_tiles():
  a = jnp.asarray(_rng(10).standard_normal((3, 100, 64)), BF16)
  b = jnp.asarray(_rng(11).standard_normal((3, 64, 80)), BF16)
  got = bmm(a, b, TILE=64, interpret=True)
  want = np.einsum("bmk,bkn->bmn", np.asarray(a, np.float32), np.asarray(b, np.float32))
  np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2e-2, atol=1e-1)
  assert "mosaic_gpu" in _export(bmm, S((3, 100, 64), BF16), S((3, 64, 80), BF16), TILE=64)


def test_a_short_register_b_tile_tied_to_the_result_says_which_k_tile():
  expect(matmul_masked_n, [S((128, 96), F16), S((96, 130), F16)], mg.LayoutError, "offs_k[:, None] < K",
         "offs_k of shape (32, 1) meets a tensor-core result, so it must be 2-D with rows a multiple of 64 (64 per"
         " warpgroup) and columns a multiple of 8 (or a vector of its rows or columns)",
         hint="ml.dot's b, b of shape (32, 64), comes from registers, and the compiler stores it into SMEM for the"
              " tensor cores, 64 rows a warpgroup: use a k tile of 64 (BLOCK_K=64), or copy b's tile into an SMEM"
              " buffer with ml.copy (TMA, zeros past the array's end) and pass the buffer", BLOCK_K=32)
  a = jnp.asarray(_rng(12).standard_normal((128, 96)), F16)
  b = jnp.asarray(_rng(13).standard_normal((96, 130)), F16)
  got = matmul_masked_n(a, b, BLOCK_K=64, interpret=True)      # the hint followed
  np.testing.assert_allclose(np.asarray(got, np.float32), _mm(a, b), rtol=2e-2, atol=5e-2)


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), a.dtype),
                grid=lambda a, b, *, NUM_SMS, **k: (NUM_SMS,))
def matmul_persistent(a_ptr, b_ptr, c_ptr, *, BLOCK_M: ml.constexpr, BLOCK_N: ml.constexpr, BLOCK_K: ml.constexpr,
                      GROUP_SIZE_M: ml.constexpr, NUM_SMS: ml.constexpr):
  """The Triton tutorial's persistent matmul (its pointer version), max_contiguous and multiple_of kept."""
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  num_pid_m = ml.cdiv(M, BLOCK_M)
  num_pid_n = ml.cdiv(N, BLOCK_N)
  num_pid_in_group = GROUP_SIZE_M * num_pid_n
  offs_k_for_mask = ml.arange(0, BLOCK_K)
  for tile_id in ml.range(ml.program_id(axis=0), num_pid_m * num_pid_n, NUM_SMS):
    first_pid_m = tile_id // num_pid_in_group * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    offs_am = ml.where(pid_m * BLOCK_M + ml.arange(0, BLOCK_M) < M, pid_m * BLOCK_M + ml.arange(0, BLOCK_M), 0)
    offs_bn = ml.where(pid_n * BLOCK_N + ml.arange(0, BLOCK_N) < N, pid_n * BLOCK_N + ml.arange(0, BLOCK_N), 0)
    offs_am = ml.max_contiguous(ml.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = ml.max_contiguous(ml.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    accumulator = ml.zeros((BLOCK_M, BLOCK_N), dtype=F32)
    for ki in range(ml.cdiv(K, BLOCK_K)):
      offs_k = ki * BLOCK_K + ml.arange(0, BLOCK_K)
      a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :]], mask=offs_k_for_mask[None, :] < K - ki * BLOCK_K,
                  other=0.0)
      b = ml.load(b_ptr.at[offs_k[:, None], offs_bn[None, :]], mask=offs_k_for_mask[:, None] < K - ki * BLOCK_K,
                  other=0.0)
      accumulator = ml.dot(a, b, accumulator)
    offs_cm = pid_m * BLOCK_M + ml.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + ml.arange(0, BLOCK_N)
    ml.store(c_ptr.at[offs_cm[:, None], offs_cn[None, :]], accumulator.to(F16),
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def test_the_persistent_matmul_tutorial():
  a = jnp.asarray(_rng(21).standard_normal((200, 128)), F16)
  b = jnp.asarray(_rng(22).standard_normal((128, 192)), F16)
  meta = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_SIZE_M=8, NUM_SMS=4)
  got = matmul_persistent(a, b, interpret=True, **meta)
  np.testing.assert_allclose(np.asarray(got, np.float32), _mm(a, b), rtol=2e-2, atol=5e-2)
  assert "mosaic_gpu" in _export(matmul_persistent, S((200, 128), F16), S((128, 192), F16), **meta)


@pytest.mark.gpu
@pytest.mark.parametrize("block_k", [32, 64])
def test_gpu_dot_of_a_register_b_tile(block_k):
  a = jnp.asarray(_rng(14).standard_normal((200, 96)), F16)
  b = jnp.asarray(_rng(15).standard_normal((96, 192)), F16)
  got = jax.jit(lambda a, b: matmul_kernel(a, b, BLOCK_M=64, BLOCK_N=64, BLOCK_K=block_k))(a, b)
  np.testing.assert_allclose(np.asarray(got, np.float32), _mm(a, b), rtol=2e-2, atol=5e-2)
  a3 = jnp.asarray(_rng(16).standard_normal((3, 100, 64)), BF16)
  b3 = jnp.asarray(_rng(17).standard_normal((3, 64, 80)), BF16)
  a32, b32 = a.astype(F32), b.astype(F32)
  got = jax.jit(lambda a, b: matmul_kernel(a, b, BLOCK_M=64, BLOCK_N=64, BLOCK_K=block_k))(a32, b32)
  np.testing.assert_allclose(np.asarray(got), np.asarray(matmul_kernel(a32, b32, BLOCK_M=64, BLOCK_N=64, BLOCK_K=block_k,
                                                                       interpret=True)), rtol=1e-3, atol=1e-2)
  meta = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=block_k, GROUP_SIZE_M=8, NUM_SMS=4)
  got = jax.jit(lambda a, b: matmul_persistent(a, b, **meta))(a, b)
  np.testing.assert_allclose(np.asarray(got, np.float32), _mm(a, b), rtol=2e-2, atol=5e-2)
  got3 = jax.jit(lambda a, b: bmm(a, b, TILE=64))(a3, b3)
  np.testing.assert_allclose(np.asarray(got3, np.float32), np.asarray(bmm(a3, b3, TILE=64, interpret=True), np.float32),
                             rtol=2e-2, atol=1e-1)


@pytest.mark.gpu
def test_gpu_triton_spellings_match_interpret_mode():
  x = jnp.asarray(_rng(18).standard_normal(3000), F32)
  # (the same bits keep the same elements; x / (1 - p) is the GPU's division, within an ulp or two of NumPy's)
  got, want = np.asarray(seeded_dropout(x, 7, p=0.3)), np.asarray(seeded_dropout(x, 7, p=0.3, interpret=True))
  np.testing.assert_array_equal(got == 0, want == 0)
  np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)
  for g, i in zip(normals(jnp.zeros((256,), F32), 11), normals(jnp.zeros((256,), F32), 11, interpret=True)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(i), rtol=1e-5, atol=1e-5)
  for kind in ("max", "min"):
    for g, i in zip(arg_stage1(x, BLOCK_SIZE=1024, KIND=kind), arg_stage1(x, BLOCK_SIZE=1024, KIND=kind, interpret=True)):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(i))
  fm = jnp.asarray(_rng(19).random(1000) < 0.3)
  x1 = x[:1000]
  np.testing.assert_array_equal(np.asarray(masked_fill(x1, fm, 2.5, BLOCK_SIZE=256)), np.where(fm, 2.5, x1))
