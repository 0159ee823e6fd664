"""float32 dots on the tensor cores, read as TF32 (WGMMA .tf32: K-major operands, float32
accumulator); interpret mode drops the same 13 low mantissa bits."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _out(a, bt):
  return jax.ShapeDtypeStruct((a.shape[0], bt.shape[0]), F32)


@mg.mgpu_kernel(out_shape=_out, grid=lambda a, bt: (a.shape[0] // 128, bt.shape[0] // 128))
def mm_tf32(a, bt, c):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 32), a.dtype), ml.smem((128, 32), bt.dtype)
  acc = ml.zeros((128, 128), F32)
  for k in ml.range(a.shape[1] // 32, stages=3):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 32, 32)], a_s)
    ml.copy(bt.at[ml.ds(j * 128, 128), ml.ds(k * 32, 32)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), F32), grid=(1,))
def mm_mn_major(a, b, c):
  a_s, b_s = ml.smem((128, 32), a.dtype), ml.smem((32, b.shape[1]), b.dtype)
  ml.copy(a.at[:, ml.ds(0, 32)], a_s)
  ml.copy(b.at[ml.ds(0, 32), :], b_s)
  c[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=_out, grid=(1,))
def mm_k16(a, bt, c):
  a_s, b_s = ml.smem((128, 16), a.dtype), ml.smem((128, 16), bt.dtype)
  ml.copy(a.at[:, ml.ds(0, 16)], a_s)
  ml.copy(bt.at[:, ml.ds(0, 16)], b_s)
  c[...] = ml.dot(a_s, b_s.T)


def tf32(x):
  return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def inputs(m, n, k, seed=0):
  a = rand.normal(rand.key(seed), (m, k), F32)
  bt = rand.normal(rand.key(seed + 1), (n, k), F32)
  return a, bt


def test_float32_dot_interpret_reads_tf32():
  a, bt = inputs(256, 256, 256)
  got = np.asarray(mm_tf32(a, bt, interpret=True), np.float64)
  want = tf32(a).astype(np.float64) @ tf32(bt).astype(np.float64).T
  full = np.asarray(a, np.float64) @ np.asarray(bt, np.float64).T
  assert np.abs(got - want).max() < 1e-4                    # TF32 products, float32 sums
  assert np.abs(got - full).max() > 1e-3                    # not float32 products


def test_float32_dot_lowers_to_tf32_wgmma_and_exports():
  specs = (S((256, 256), F32), S((256, 256), F32))
  assert "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32" in mm_tf32.mlir(*specs)
  assert "mosaic_gpu" in jax.export.export(jax.jit(mm_tf32), platforms=["cuda"])(*specs).mlir_module()


def test_float32_b_stored_k_by_n_is_transposed_by_the_compiler_and_a_narrow_one_rejected():
  """It was MG501 with the transposed form as its hint; since probe 67b the compiler transposes the tile once into an
  (n, k) buffer (as beside a register A, probe 51f). An n registers cannot fill 64 rows at a time keeps MG501."""
  a, b = rand.normal(rand.key(3), (128, 32), F32), rand.normal(rand.key(4), (32, 128), F32)
  np.testing.assert_allclose(mm_mn_major(a, b, interpret=True), tf32(a) @ tf32(b), rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(mm_mn_major), platforms=["cuda"])(S(a.shape, F32), S(b.shape, F32)).mlir_module()
  expect(mm_mn_major, (S((128, 32), F32), S((32, 48), F32)), mg.MmaOperandError, "ml.dot(a_s, b_s)",
         "ml.dot reads float32 operands K-major only, so b must be stored (n, k) and passed transposed;"
         " b_s is stored (k, n)",
         hint="load B's tile as (n, k), e.g. from a (n, k) array bt, and pass bt_s.T: ml.dot(a_s, bt_s.T)")


@mg.mgpu_kernel(out_shape=_out)
def mm_k4(a, bt, c):
  a_s, b_s = ml.smem((128, 4), a.dtype), ml.smem((128, 4), bt.dtype)
  ml.copy(a.at[:, ml.ds(0, 4)], a_s)
  ml.copy(bt.at[:, ml.ds(0, 4)], b_s)
  c[...] = ml.dot(a_s, b_s.T)


def test_float32_k_step_is_8_elements():
  """k = 16 float32 (64 bytes) takes the 64-byte swizzle (twenty-ninth session; it was MG501, the step
  128 bytes); 4 elements (16 bytes) are less than the narrowest swizzle."""
  a = rand.normal(rand.key(0), (128, 16), F32)
  bt = rand.normal(rand.key(1), (128, 16), F32)
  np.testing.assert_allclose(mm_k16(a, bt, interpret=True), tf32(a) @ tf32(bt).T, rtol=1e-5, atol=1e-5)
  expect(mm_k4, (S((128, 4), F32), S((128, 4), F32)), mg.MmaOperandError, "ml.dot(a_s, b_s.T)",
         "ml.dot needs k (the columns of a, the rows of b) to be a multiple of 8 (32 bytes of float32 elements), got 4")


@pytest.mark.gpu
def test_gpu_float32_k_of_16_matches_interpret_mode():
  a = rand.normal(rand.key(0), (128, 16), F32)
  bt = rand.normal(rand.key(1), (128, 16), F32)
  np.testing.assert_allclose(jax.jit(mm_k16)(a, bt), tf32(a) @ tf32(bt).T, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_gpu_float32_dot_matches_interpret_mode():
  a, bt = inputs(512, 384, 1024, seed=3)
  got = np.asarray(jax.jit(mm_tf32)(a, bt), np.float64)
  want = tf32(a).astype(np.float64) @ tf32(bt).astype(np.float64).T
  np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-3)
  np.testing.assert_allclose(got, mm_tf32(a, bt, interpret=True), rtol=1e-3, atol=2e-3)
