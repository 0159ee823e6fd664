"""The matmul example: it exports for CUDA on the CPU and matches jnp.dot on the GPU."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import matmul as ex  # noqa: E402
import rand

S = jax.ShapeDtypeStruct
DTYPES = [jnp.float16, jnp.bfloat16]
CONFIGS = [dict(bm=128, bn=256, stages=3), dict(bm=128, bn=128, stages=4)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
def test_matmul_exports_for_cuda(dtype, cfg):
  specs = [S((512, 256), dtype), S((256, 512), dtype)]
  txt = jax.export.export(jax.jit(lambda a, b: ex.matmul(a, b, **cfg)), platforms=["cuda"])(*specs)
  assert "@mosaic_gpu" in txt.mlir_module()


def test_fused_epilogue_exports_for_cuda():
  specs = [S((256, 128), jnp.bfloat16), S((128, 256), jnp.bfloat16), S((256, 256), jnp.bfloat16)]
  jax.export.export(jax.jit(ex.matmul_residual_relu), platforms=["cuda"])(*specs)


def test_pipelined_matmul_multibuffers_its_tiles_and_tiles_them_for_wgmma():
  specs = [S((256, 512), jnp.float16), S((512, 256), jnp.float16)]
  ir_text = ex.matmul.typed_ir(*specs, bm=128, bn=256, stages=3)
  assert "ref<SMEM, 3x128x64, float16>" in ir_text and "ref<SMEM, 3x64x256, float16>" in ir_text
  assert "dotwait pending=1" in ir_text and "stages=3" in ir_text


def rel_err(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  return np.linalg.norm(got - want) / np.linalg.norm(want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(128, 256, 64), (256, 512, 128), (1024, 768, 512), (2048, 2048, 4096)],
                         ids=str)
@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
def test_matmul_matches_jnp_dot(shape, dtype, cfg):
  m, n, k = shape
  if n % cfg["bn"]:
    pytest.skip("n not a multiple of the tile")
  ka, kb = rand.split(rand.key(m + n + k))
  a = rand.normal(ka, (m, k), dtype)
  b = rand.normal(kb, (k, n), dtype)
  got = jax.jit(lambda a, b: ex.matmul(a, b, **cfg))(a, b)
  assert got.dtype == dtype
  assert rel_err(got, jnp.dot(a, b, preferred_element_type=jnp.float32)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_residual_relu_matches_jnp(dtype):
  ka, kb, kr = rand.split(rand.key(3), 3)
  a = rand.normal(ka, (512, 256), dtype)
  b = rand.normal(kb, (256, 512), dtype)
  r = rand.normal(kr, (512, 512), dtype)
  want = jnp.maximum(jnp.dot(a, b, preferred_element_type=jnp.float32) + r.astype(jnp.float32), 0)
  assert rel_err(ex.matmul_residual_relu(a, b, r), want) < 1e-2


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipelined_matmul_interprets_without_races(stages):
  ka, kb = rand.split(rand.key(stages))
  a = rand.normal(ka, (128, 512), jnp.bfloat16)
  b = rand.normal(kb, (512, 128), jnp.bfloat16)
  got = ex.matmul(a, b, bm=128, bn=128, stages=stages, interpret=True)
  assert rel_err(got, jnp.dot(a, b, preferred_element_type=jnp.float32)) < 1e-2


def bias_gelu_reference(a, b, bias):
  x = jnp.dot(a, b, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
  return jax.nn.gelu(x, approximate=True)


def test_bias_epilogue_broadcasts_a_column_vector_and_interprets():
  ka, kb, kc = rand.split(rand.key(11), 3)
  a = rand.normal(ka, (256, 128), jnp.bfloat16)
  b = rand.normal(kb, (128, 256), jnp.bfloat16)
  bias = rand.normal(kc, (256,), jnp.bfloat16)
  text = ex.matmul_bias_gelu.typed_ir(a, b, bias, stages=2)
  assert "tensor<256, float32, wgmma_col>" in text
  got = ex.matmul_bias_gelu(a, b, bias, stages=2, interpret=True)
  assert rel_err(got, bias_gelu_reference(a, b, bias)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bias_gelu_epilogue_matches_jnp(dtype):
  ka, kb, kc = rand.split(rand.key(12), 3)
  a = rand.normal(ka, (512, 256), dtype)
  b = rand.normal(kb, (256, 512), dtype)
  bias = rand.normal(kc, (512,), dtype)
  assert rel_err(ex.matmul_bias_gelu(a, b, bias), bias_gelu_reference(a, b, bias)) < 1e-2
