"""Export for CUDA on the CPU: each kernel lowers to StableHLO with its mosaic_gpu custom call."""
import jax
import jax.numpy as jnp
import pytest

import kernels as K

S = jax.ShapeDtypeStruct
DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]


def export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_double_exports_for_cuda(dtype):
  txt = export(K.double, S((1024, 64), dtype))
  assert "stablehlo.custom_call @mosaic_gpu" in txt


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_exports_for_cuda(dtype):
  assert "@mosaic_gpu" in export(K.fused, S((256, 64), dtype), S((256, 64), dtype))


@pytest.mark.parametrize("name,specs,kw", [
    ("row_block_sum", [S((512, 64), jnp.float16)], {"n": 4}),
    ("scale_odd_programs", [S((512, 64), jnp.float32)], {}),
    ("add_iota", [S((4096,), jnp.bfloat16)], {}),
    ("swap_pairs", [S((512, 64), jnp.float32)], {}),
], ids=str)
def test_control_flow_and_cluster_kernels_export(name, specs, kw):
  k = getattr(K, name)
  assert "@mosaic_gpu" in export(lambda *a: k(*a, **kw), *specs)


def test_export_inside_larger_jit_program():
  txt = export(lambda x: K.double(x * 3.0) + 1.0, S((256, 64), jnp.float32))
  assert "@mosaic_gpu" in txt and "stablehlo.add" in txt


def test_compiled_kernels_are_cached_per_shape_and_constexpr():
  k = K.row_block_sum
  k.check(S((256, 64), jnp.float16), n=2)
  n0 = len(k._cache)
  k.check(S((256, 64), jnp.float16), n=2)
  assert len(k._cache) == n0
  k.check(S((256, 64), jnp.float16), n=1)
  k.check(S((256, 64), jnp.bfloat16), n=1)
  assert len(k._cache) == n0 + 2
