"""On the H200: interpret mode and the GPU agree on the same random inputs, kernel by kernel."""
import os
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import kernels as K

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import matmul as ex  # noqa: E402
import rand as rnd

pytestmark = pytest.mark.gpu


def rand(key, shape, dtype):
  return rnd.normal(rnd.key(key), shape, dtype)


CASES = [
    ("double", K.double, lambda: [rand(0, (1024, 64), jnp.float32)], {}, 0.0),
    ("fused_bf16", K.fused, lambda: [rand(1, (256, 64), jnp.bfloat16), rand(2, (256, 64), jnp.bfloat16)], {}, 1e-2),
    ("row_block_sum", K.row_block_sum, lambda: [rand(3, (512, 64), jnp.float16)], {"n": 4}, 1e-6),
    ("scale_odd_programs", K.scale_odd_programs, lambda: [rand(4, (512, 64), jnp.float32)], {}, 0.0),
    ("add_iota", K.add_iota, lambda: [rand(5, (4096,), jnp.float16)], {}, 0.0),
    ("swap_pairs", K.swap_pairs, lambda: [rand(6, (512, 64), jnp.float32)], {}, 0.0),
    ("matmul_f16", ex.matmul, lambda: [rand(7, (256, 128), jnp.float16), rand(8, (128, 256), jnp.float16)],
     {"bm": 128, "bn": 256, "stages": 2}, 2e-3),
    ("matmul_bf16", ex.matmul, lambda: [rand(9, (256, 256), jnp.bfloat16), rand(10, (256, 128), jnp.bfloat16)],
     {"bm": 128, "bn": 128, "stages": 3}, 1e-2),
]


@pytest.mark.parametrize("name,kernel,make_args,kw,tol", CASES, ids=[c[0] for c in CASES])
def test_interpreter_and_gpu_agree(name, kernel, make_args, kw, tol):
  args = make_args()
  gpu = np.asarray(kernel(*args, **kw), np.float32)
  cpu = np.asarray(kernel(*args, interpret=True, **kw), np.float32)
  assert np.isfinite(gpu).all() and np.isfinite(cpu).all()
  np.testing.assert_allclose(cpu, gpu, rtol=tol, atol=tol)
