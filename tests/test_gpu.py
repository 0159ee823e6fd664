"""Numbers on the H200: every kernel against its jnp reference (run with -m gpu on a GPU)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels as K
import rand as rnd

pytestmark = pytest.mark.gpu
DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]
TOL = {jnp.float32: 1e-6, jnp.float16: 2e-3, jnp.bfloat16: 2e-2}


def rand(key, shape, dtype):
  return rnd.normal(rnd.key(key), shape, dtype)


def close(got, want, dtype):
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                             rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(128, 64), (1024, 64), (4096, 128), (256, 256)], ids=str)
def test_double_matches_jnp(shape, dtype):
  x = rand(0, shape, dtype)
  close(jax.jit(K.double)(x), x * 2, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(64, 64), (1024, 128)], ids=str)
def test_fused_elementwise_matches_jnp(shape, dtype):
  x, y = rand(1, shape, dtype), rand(2, shape, dtype)
  a, b = x.astype(jnp.float32), y.astype(jnp.float32)
  want = jnp.where(a > 0, jnp.exp(a) * b, jnp.maximum(a, b) - 1.0).astype(dtype)
  close(K.fused(x, y), want, dtype)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
@pytest.mark.parametrize("n", [1, 3, 8])
def test_runtime_loop_accumulates(n, dtype):
  x = rand(3, (128 * n, 64), dtype)
  want = x.astype(jnp.float32).reshape(n, 128, 64).sum(0)
  np.testing.assert_allclose(np.asarray(K.row_block_sum(x, n=n)), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_if_on_program_id():
  x = rand(4, (512, 64), jnp.float32)
  blocks = x.reshape(4, 128, 64)
  want = jnp.stack([-blocks[0], blocks[1] * 3, -blocks[2], blocks[3] * 3]).reshape(512, 64)
  close(K.scale_odd_programs(x), want, jnp.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gmem_register_io_with_arange(dtype):
  x = rand(5, (8192,), dtype)
  want = x + (jnp.arange(8192) % 1024).astype(dtype)
  close(K.add_iota(x), want, dtype)


def test_cluster_ref_reads_peer_smem():
  x = rand(6, (512, 64), jnp.float32)
  want = x.reshape(2, 2, 128, 64)[:, ::-1].reshape(512, 64)
  close(K.swap_pairs(x), want, jnp.float32)


def test_kernel_inside_jit_with_other_ops():
  x = rand(7, (1024, 64), jnp.float32)
  f = jax.jit(lambda x: K.double(x + 1.0).sum())
  np.testing.assert_allclose(float(f(x)), float(((x + 1.0) * 2).sum()), rtol=1e-5)
