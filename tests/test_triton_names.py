"""Triton's `tl.gather(src, index, axis)` (Triton 3.2's register gather) and `tl.sqrt_rn` (session 60): each was
MG002, gather's hint reading from GMEM instead. tl.gather is jnp.take_along_axis's meaning; checked in interpret
mode against NumPy's, and exported for CUDA."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x, i, j: (x, x, x, x))
def gathers(x, i, j, along_rows, along_cols, of_ref, root):
  v = x[...] * 2.0
  along_cols[...] = ml.gather(v, i[...], axis=1)     # out[r, c] = v[r, i[r, c]]
  along_rows[...] = ml.gather(v, j[...], 0)          # out[r, c] = v[j[r, c], c]
  of_ref[...] = ml.gather(x, i[...], axis=1)
  root[...] = ml.sqrt_rn(ml.abs(v))


def test_tl_gather_is_take_along_axis():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((8, 128)).astype(np.float32)
  i = rng.integers(0, 128, (8, 128)).astype(np.int32)
  j = rng.integers(0, 8, (8, 128)).astype(np.int32)
  rows, cols, ref, root = gathers(x, i, j, interpret=True)
  np.testing.assert_array_equal(np.asarray(cols), np.take_along_axis(2 * x, i, axis=1))
  np.testing.assert_array_equal(np.asarray(rows), np.take_along_axis(2 * x, j, axis=0))
  np.testing.assert_array_equal(np.asarray(ref), np.take_along_axis(x, i, axis=1))
  np.testing.assert_array_equal(np.asarray(root), np.sqrt(np.abs(2 * x)))
  specs = [S(a.shape, a.dtype) for a in (x, i, j)]
  assert "mosaic_gpu" in jax.export.export(jax.jit(gathers), platforms=["cuda"])(*specs).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, i, j: (x, x))
def broadcast_pair(x, i, j, a, b):
  p, q = ml.broadcast(x[0][None, :], x[:, 0:1][...])
  a[...] = p
  b[...] = q * 1.0


def test_tl_broadcast_gives_both_at_the_common_shape():
  """Triton's `tl.broadcast(a, b)` was MG002 (its hint wrote the pair of ml.broadcast_to)."""
  x = np.random.default_rng(2).standard_normal((8, 128)).astype(np.float32)
  i = np.zeros((8, 128), np.int32)
  a, b = broadcast_pair(x, i, i, interpret=True)
  p, q = np.broadcast_arrays(x[0][None, :], x[:, 0:1])
  np.testing.assert_array_equal(np.asarray(a), p)
  np.testing.assert_array_equal(np.asarray(b), q)


@mg.mgpu_kernel(out_shape=lambda x, i: x)
def gather_bad_axis(x, i, o):
  o[...] = ml.gather(x[...], i[...], axis=2)


def test_tl_gather_axis_out_of_range_is_at_the_call():
  with pytest.raises(mg.KernelTypeError) as info:
    gather_bad_axis.typed_ir(S((8, 128), jnp.float32), S((8, 128), jnp.int32))
  e = info.value
  assert e.filename == __file__ and e.lineno == gather_bad_axis.__wrapped__.__code__.co_firstlineno + 2
  assert "axis" in e.message and "axis=1" in e.hint, (e.message, e.hint)


@pytest.mark.gpu
def test_gpu_matches_interpret():
  rng = np.random.default_rng(1)
  x = rng.standard_normal((8, 128)).astype(np.float32)
  i = rng.integers(0, 128, (8, 128)).astype(np.int32)
  j = rng.integers(0, 8, (8, 128)).astype(np.int32)
  for g, w in zip(gathers(x, i, j), gathers(x, i, j, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
