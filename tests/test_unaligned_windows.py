"""Masked register loads and stores and register atomics of a window at a run-time start (design note 79
extended): where nothing proves the start a multiple of the registers' vector length, each element is its
own access, since a misaligned vector access faults the GPU (CUDA_ERROR_MISALIGNED_ADDRESS, which takes
the process's CUDA context with it); `ml.multiple_of` keeps the vectors."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

F32, F16 = jnp.float32, jnp.float16
X = jnp.asarray(np.arange(512, dtype=np.float32) / 7 - 20)
S3 = jnp.array([3], jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((256,), x.dtype))
def masked_load(x, s, out):
  i = s[0]
  out[...] = ml.load(x.at[ml.ds(i, 256)], mask=ml.arange(256) < 200, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((256,), x.dtype))
def masked_load_proven(x, s, out):
  i = ml.multiple_of(s[0], 8)
  out[...] = ml.load(x.at[ml.ds(i, 256)], mask=ml.arange(256) < 200, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((512,), x.dtype))
def masked_store(x, s, out):
  out[...] = ml.zeros((512,), x.dtype)
  i = s[0]
  out.at[ml.ds(i, 256)].store(x[0:256] * 2, mask=ml.arange(256) < 250)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((512,), jnp.float32))
def atomic_window(x, s, out):
  out[...] = ml.zeros((512,), jnp.float32)
  ml.atomic_add(out.at[ml.ds(s[0], 256)], x[0:256])


def _vector_accesses(text, op):
  """Vector loads or stores of a memref at a run-time offset (a window's)."""
  return len(re.findall(rf"vector\.{op} [^\n]*offset: \?[^\n]*vector<[2-9]x", text))


def _masked_load_ref(x, i):
  return np.where(np.arange(256) < 200, np.asarray(x)[i:i + 256], 0)


def test_a_masked_load_at_an_unproven_start_is_read_element_by_element():
  assert re.search(r"maskedload [^\n]* start_multiple=1 ", masked_load.typed_ir(X, S3))
  assert _vector_accesses(masked_load.mlir(X, S3), "load") == 0
  assert _vector_accesses(masked_load_proven.mlir(X, S3), "load") == 1
  np.testing.assert_array_equal(masked_load(X, S3, interpret=True), _masked_load_ref(X, 3))


def test_a_masked_store_at_an_unproven_start_is_written_element_by_element():
  assert _vector_accesses(masked_store.mlir(X, S3), "store") == 0
  got = masked_store(X, S3, interpret=True)
  want = np.zeros(512, np.float32)
  want[3:253] = np.asarray(X)[0:250] * 2
  np.testing.assert_array_equal(got, want)


def test_a_register_atomic_at_an_unproven_start_updates_each_element():
  text = atomic_window.mlir(X, S3)
  assert "start_multiple=1" in atomic_window.typed_ir(X, S3)
  assert ".v2.f32" not in text and "add.f32 [$0], $1;" in text
  want = np.zeros(512, np.float32)
  want[3:259] = np.asarray(X)[0:256]
  np.testing.assert_array_equal(atomic_window(X, S3, interpret=True), want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, F16])
def test_gpu_masked_and_atomic_windows_at_odd_starts(dtype):
  x = X.astype(dtype)
  for i in (3, 5, 8):
    s = jnp.array([i], jnp.int32)
    np.testing.assert_array_equal(masked_load(x, s), _masked_load_ref(x, i))
    want = np.zeros(512, np.asarray(x).dtype)
    want[i:i + 250] = np.asarray(x)[0:250] * 2
    np.testing.assert_array_equal(masked_store(x, s), want)
    got = atomic_window(X, s)
    want = np.zeros(512, np.float32)
    want[i:i + 256] = np.asarray(X)[0:256]
    np.testing.assert_array_equal(got, want)
