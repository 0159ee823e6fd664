"""Probe 44d: memory accesses at offsets the GPU may find misaligned. A misaligned vector load or store
faults the H200 (CUDA_ERROR_MISALIGNED_ADDRESS, and the process's CUDA context with it), so every
register transfer moves a register's vector at once only where each of its rows starts at a multiple of
the vector (tma_starts.mark_register_starts); the GPU tests of kernels that faulted, or would fault,
without their fix are each in a function of their own (named test_gpu_..._would_fault)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

F32, F16, I8 = jnp.float32, jnp.float16, jnp.int8


def _vector_window_accesses(text):
  """Vector loads and stores of a 2-D window of a GMEM array (a strided memref)."""
  return len(re.findall(r"vector\.(?:load|store) [^\n]*strided<\[\d+, 1\][^\n]*vector<[2-9]x", text))


# ---------------------------------------------------------------- rows of a window a row stride apart
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8, 128), x.dtype))
def masked_rows(x, out):
  r = ml.arange(8)
  out[...] = x.at[0:8, 0:128].load(mask=(r < 7)[:, None], other=0)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8,), jnp.float32))
def row_sums(x, out):
  out[...] = ml.sum(x.at[0:8, 0:128][...].astype(jnp.float32), axis=1)


def _odd_rows(cols, dtype):
  return jnp.asarray((np.arange(64 * cols) % 97 - 40).reshape(64, cols).astype(dtype))


def _masked_rows_ref(x):
  want = np.asarray(x)[0:8, 0:128].copy()
  want[7] = 0
  return want


def test_a_masked_window_of_rows_off_the_vector_alignment_is_read_element_by_element():
  """A 2-D masked load of a window whose rows are 129 int8 (130 float16) elements apart read each row
  with 4-element vectors: every other row's vectors were misaligned (a fault on the GPU), though the
  window starts at 0. Rows 132 float32 elements apart (16-byte multiples) keep their vectors."""
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    assert re.search(rf"maskedload [^\n]* start_multiple={cols} ", masked_rows.typed_ir(x))
    assert _vector_window_accesses(masked_rows.mlir(x)) == 0
    np.testing.assert_array_equal(masked_rows(x, interpret=True), _masked_rows_ref(x))
  assert _vector_window_accesses(masked_rows.mlir(_odd_rows(132, np.float32))) == 2


@mg.mgpu_kernel(out_shape=lambda a, b, o: jax.ShapeDtypeStruct(o.shape, o.dtype), input_output_aliases={2: 0})
def dot_into_odd_rows(a, b, o, out):
  sa, sb = ml.smem((64, 64), jnp.float16), ml.smem((64, 64), jnp.float16)
  ml.copy(a, sa)
  ml.copy(b, sb)
  out.at[:, 0:64][...] = ml.dot(sa, sb).astype(jnp.float16)


def test_row_wise_and_tensor_core_tiles_of_rows_off_the_vector_alignment_compile():
  """A row reduction of a window of odd rows, and an ml.dot result stored into the first 64 columns of
  rows of 65 float16, were MG900 "Mosaic GPU failed while compiling this Load (Store) operation: Tiled
  strides must be a multiple of the vector length": they now go element by element."""
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    row_sums.check(x)
    np.testing.assert_allclose(row_sums(x, interpret=True),
                               np.asarray(x)[0:8, 0:128].astype(np.float32).sum(1), rtol=1e-6)
  a, b, o = _dot_operands()
  dot_into_odd_rows.check(a, b, o)
  np.testing.assert_allclose(dot_into_odd_rows(a, b, o, interpret=True), _dot_ref(a, b, o), rtol=1e-3)


def _dot_operands():
  rng = np.random.default_rng(0)
  a, b = (jnp.asarray(rng.integers(-3, 4, (64, 64)).astype(np.float16)) for _ in range(2))
  return a, b, jnp.asarray(rng.integers(-3, 4, (64, 65)).astype(np.float16))


def _dot_ref(a, b, o):
  want = np.asarray(o).copy()
  want[:, 0:64] = (np.asarray(a, np.float32) @ np.asarray(b, np.float32)).astype(np.float16)
  return want


@pytest.mark.gpu
def test_gpu_masked_window_of_odd_rows_would_fault():
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    np.testing.assert_array_equal(masked_rows(x), _masked_rows_ref(x))


@pytest.mark.gpu
def test_gpu_row_wise_and_tensor_core_tiles_of_odd_rows():
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    np.testing.assert_allclose(row_sums(x), np.asarray(x)[0:8, 0:128].astype(np.float32).sum(1), rtol=1e-6)
  a, b, o = _dot_operands()
  np.testing.assert_allclose(dot_into_odd_rows(a, b, o), _dot_ref(a, b, o), rtol=1e-3)
