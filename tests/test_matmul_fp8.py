"""8-bit matmuls (examples/matmul_fp8.py): FP8 e4m3/e5m2 and int8 with per-tensor, per-row and
per-column scales in interpret mode and against jnp.dot on the GPU; the WGMMA instruction in the
Mosaic GPU module; and the K-major rule for 8-bit operands, checked at the user's line."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import matmul_fp8 as ex  # noqa: E402

S = jax.ShapeDtypeStruct
E4M3, E5M2, I8 = jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.int8
DTYPES = [E4M3, E5M2, I8]


def rel(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  return np.linalg.norm(got - want) / np.linalg.norm(want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("scales", ["tensor", "row_col"])
def test_interpret_matches_jnp_dot(dtype, scales):
  a, bt, rows, cols = ex.random_operands(jax.random.key(1), 256, 128, 256, dtype)
  sa, sb = (0.25, 3.0) if scales == "tensor" else (rows, cols)
  got = ex.scaled_matmul(a, bt, sa, sb, out_dtype=jnp.float32, interpret=True, bn=128)
  assert got.shape == (256, 128) and got.dtype == jnp.float32
  assert rel(got, ex.reference(a, bt, sa, sb, jnp.float32)) < 1e-6


@pytest.mark.parametrize("dtype,instr", [(E4M3, "f32.e4m3.e4m3"), (E5M2, "f32.e5m2.e5m2"), (I8, "s32.s8.s8")],
                         ids=["e4m3", "e5m2", "int8"])
def test_module_uses_the_8bit_wgmma_with_k_major_operands(dtype, instr):
  specs = [S((512, 256), dtype), S((256, 256), dtype), S((512,), jnp.float32), S((256,), jnp.float32)]
  acc = jnp.int32 if dtype == I8 else jnp.float32
  text = ex.matmul_scaled.mlir(*specs, acc_dtype=acc)
  assert f"wgmma.mma_async.sync.aligned.m64n256k32.{instr}" in text
  jax.export.export(jax.jit(lambda *x: ex.matmul_scaled(*x, acc_dtype=acc)), platforms=["cuda"])(*specs)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("shape", [(1024, 768, 512), (4096, 4096, 4096)], ids=str)
def test_gpu_matches_jnp_dot(dtype, shape):
  m, n, k = shape
  a, bt, rows, cols = ex.random_operands(jax.random.key(2), m, n, k, dtype)
  got = jax.jit(lambda *x: ex.scaled_matmul(*x, out_dtype=jnp.float32))(a, bt, rows, cols)
  want = ex.reference(a, bt, rows, cols, jnp.float32)
  # int8 sums exactly; Hopper's FP8 tensor cores accumulate with fewer mantissa bits than float32.
  tol = 1e-6 if dtype == I8 else 2e-3
  assert rel(got, want) < tol
  if m <= 1024:
    assert rel(got, ex.scaled_matmul(a, bt, rows, cols, out_dtype=jnp.float32, interpret=True)) < tol


def test_cluster_pairs_share_bt_tiles_by_multicast():
  a, bt, rows, cols = ex.random_operands(jax.random.key(3), 512, 256, 256, E4M3)
  got = ex.scaled_matmul(a, bt, rows, cols, out_dtype=jnp.float32, interpret=True, bn=128, cluster_m=2)
  assert rel(got, ex.reference(a, bt, rows, cols, jnp.float32)) < 1e-6
  specs = [S((512, 256), E4M3), S((256, 256), E4M3), S((512,), jnp.float32), S((256,), jnp.float32)]
  assert "multicast_mask" in ex.matmul_scaled.mlir(*specs, cluster_m=2)      # one load for the pair
  assert "multicast_mask" not in ex.matmul_scaled.mlir(*specs)
  jax.export.export(jax.jit(lambda *x: ex.matmul_scaled(*x, cluster_m=2)), platforms=["cuda"])(*specs)


def test_cluster_needs_pairs_of_row_tiles():
  a, bt, rows, cols = ex.random_operands(jax.random.key(3), 384, 256, 256, E4M3)
  with pytest.raises(mg.SignatureError, match=r"m = 384 must be a multiple of cluster_m \* bm = 256"):
    ex.scaled_matmul(a, bt, rows, cols, interpret=True, cluster_m=2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [E4M3, I8], ids=lambda d: jnp.dtype(d).name)
def test_gpu_cluster_matches_jnp_dot(dtype):
  a, bt, rows, cols = ex.random_operands(jax.random.key(4), 2048, 1024, 1024, dtype)
  got = jax.jit(lambda *x: ex.scaled_matmul(*x, out_dtype=jnp.float32, cluster_m=2))(a, bt, rows, cols)
  assert rel(got, ex.reference(a, bt, rows, cols, jnp.float32)) < (1e-6 if dtype == I8 else 2e-3)


# ---------------------------------------------------------------- the K-major rule
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def fp8_b_not_transposed(a, b, out):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


def test_8bit_b_stored_k_by_n_is_rejected_with_the_transposed_layout_hint():
  """Of n a multiple of 64 the compiler transposes B once into a K-major buffer (since probe 68a: FA3's float8
  p @ v); of other n it is MG501, whose hint loads B transposed."""
  e = expect(fp8_b_not_transposed, [S((64, 128), E4M3), S((128, 32), E4M3)], mg.MmaOperandError,
             "ml.dot(a_s, b_s)", "ml.dot reads float8_e4m3fn operands K-major only, so b must be stored (n, k)"
             " and passed transposed; b_s is stored (k, n)")
  assert "ml.dot(a_s, bt_s.T)" in e.hint and ", acc)" not in e.hint     # (the call has no accumulator)
  r = np.random.default_rng(4)
  a, b = (jnp.asarray(r.standard_normal(s), E4M3) for s in ((64, 128), (128, 64)))
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  np.testing.assert_allclose(np.asarray(fp8_b_not_transposed(a, b, interpret=True)), want, rtol=1e-5, atol=1e-4)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[1], b.shape[0]), jnp.int32))
def int8_a_transposed(a, b, out):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s.T, b_s.T)


def test_8bit_transposed_a_is_rejected():
  e = expect(int8_a_transposed, [S((128, 64), I8), S((64, 128), I8)], mg.MmaOperandError,
             "ml.dot(a_s.T, b_s.T)", "ml.dot reads int8 operands K-major only, so a must be stored (m, k);"
             " a_s.T is a transposed view")
  assert e.hint == ("pass a buffer stored (m, k): transpose the array outside the kernel (x.T in the caller, which"
                    " XLA fuses), or transpose the tile once in the kernel, a_mk = ml.smem((64, 128)); a_mk[...] ="
                    " a_s.T[...] (through registers), and pass ml.dot(a_mk, ...)")


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32))
def int8_float_acc(a, b, out):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s.T, ml.zeros((64, 64), jnp.float32))


def test_int8_dot_accumulating_in_float32_is_rejected():
  e = expect(int8_float_acc, [S((64, 128), I8), S((64, 128), I8)], mg.UnsupportedDtypeError,
             "ml.dot(a_s, b_s.T, ml.zeros((64, 64), jnp.float32))",
             "ml.dot accumulates int8 products in int32, not float32")
  assert e.hint == "accumulate in jnp.int32: acc = ml.zeros((64, 64), jnp.int32)"


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32))
def fp8_short_k(a, b, out):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s.T)


def _short_k_reference(a, b):
  return np.asarray(a, np.float32) @ np.asarray(b, np.float32).T


def test_8bit_k_must_be_a_multiple_of_32():
  """k = 64 and 32 (64 and 32 bytes) take the narrower swizzles (twenty-ninth session; they were MG501);
  16 bytes are less than the narrowest, and were MG501 until probe 47e, which pads k with zeros in registers."""
  for k in (64, 32, 16):
    a = rand.normal(rand.key(0), (64, k), E5M2)
    b = rand.normal(rand.key(1), (64, k), E5M2)
    np.testing.assert_allclose(fp8_short_k(a, b, interpret=True), _short_k_reference(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("k", [32, 64, 96])
def test_gpu_8bit_short_k_matches_the_reference(k):
  a = rand.normal(rand.key(0), (64, k), E4M3)
  b = rand.normal(rand.key(1), (64, k), E4M3)
  np.testing.assert_allclose(jax.jit(fp8_short_k)(a, b), _short_k_reference(a, b), rtol=2e-3, atol=2e-2)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32))
def fp8_register_a(a, b, out):
  b_s = ml.smem(b.shape)
  ml.copy(b, b_s)
  x = a[...]
  out[...] = ml.dot(x, b_s.T)


def test_8bit_a_from_registers_computes():
  """It was MG106 (store it in SMEM); since probe 46b the tensor cores read it from registers."""
  a = rand.normal(rand.key(0), (64, 128), E4M3)
  b = rand.normal(rand.key(1), (64, 128), E4M3)
  np.testing.assert_allclose(fp8_register_a(a, b, interpret=True), _short_k_reference(a, b), rtol=1e-5, atol=1e-5)
