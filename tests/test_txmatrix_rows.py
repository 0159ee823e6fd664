"""Register transfers of SMEM windows whose rows are off 16 bytes move as plain vector loads and stores, never
ldmatrix / stmatrix (session 37): from jax 0.11 Mosaic GPU's tiled transfers use those for 32-bit registers of
fragment-like layouts, and they take 16-byte aligned rows only (probe 46a's odd fills and copies faulted the H200
with CUDA_ERROR_MISALIGNED_ADDRESS). On jax 0.10, which has no such transfers, the windows' MLIR is checked for
the same absence; on jax 0.11 the aligned control shows the check sees them."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
HAS_TXMATRIX = tuple(map(int, jax.__version__.split(".")[:2])) >= (0, 11)


def _txmatrix_lines(mlir: str) -> int:
  return len(re.findall(r"nvvm\.(ldmatrix|stmatrix)", mlir))


def _kernel(start, size, load):
  """A bfloat16 SMEM buffer filled whole, then `size` elements at `start` stored (or read) as a column vector."""
  @mg.mgpu_kernel(out_shape=lambda x: S((64,), x.dtype))
  def k(x, o):
    buf = ml.smem((64,), x.dtype)
    buf[...] = x[0:64]
    if load:
      o[...] = x[0:64]
      o[0:size] = buf[start:start + size]
    else:
      buf[start:start + size] = ml.full((size,), 2.0, x.dtype)
      o[...] = buf[...]
  return k


@pytest.mark.parametrize("load", [False, True], ids=["store", "load"])
@pytest.mark.parametrize("start", [42, 4, 28])
def test_windows_off_sixteen_bytes_move_without_txmatrix(start, load):
  k = _kernel(start, 8, load)
  spec = S((64,), jnp.bfloat16)
  whole = _kernel(0, 8, load).mlir(spec)          # the same kernel at an aligned start
  moved = k.mlir(spec)
  # the window's own transfer adds no ldmatrix / stmatrix to those of the aligned whole-buffer transfers
  assert _txmatrix_lines(moved) <= _txmatrix_lines(whole) - (1 if HAS_TXMATRIX else 0)
  x = np.random.default_rng(start).standard_normal(64).astype(jnp.bfloat16)
  want = np.asarray(x, np.float32)
  if load:
    want = want.copy()
    want[:8] = np.asarray(x, np.float32)[start:start + 8]
  else:
    want = want.copy()
    want[start:start + 8] = 2.0
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True), np.float32), want)


@pytest.mark.skipif(not HAS_TXMATRIX, reason="jax 0.10 has no ldmatrix/stmatrix transfers")
def test_aligned_windows_keep_txmatrix():
  assert _txmatrix_lines(_kernel(0, 8, False).mlir(S((64,), jnp.bfloat16))) >= 2
  assert _txmatrix_lines(_kernel(16, 8, True).mlir(S((64,), jnp.bfloat16))) >= 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32, jnp.float16])
def test_gpu_windows_off_sixteen_bytes_match_interpret(dtype):
  x = np.random.default_rng(9).standard_normal(64).astype(dtype)
  for start in (42, 4, 28, 3, 0):
    for load in (False, True):
      k = _kernel(start, 8, load)
      np.testing.assert_array_equal(np.asarray(jax.jit(k)(jnp.asarray(x)), np.float32),
                                    np.asarray(k(x, interpret=True), np.float32))
