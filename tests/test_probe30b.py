"""Probe 30b (classic GPU kernels a CUDA programmer writes first: stencils, histograms, scans,
reductions with atomics, matrix-vector products, SpMV, sorts by hand, image ops, integer bit
tricks, n-body forces and distance matrices): what the probe's kernels found."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- the SMEM hint names the vector's dtype
@mg.mgpu_kernel(out_shape=lambda x: S((128, 128), F32))
def smem_vector_both_ways(x, out):
  buf = ml.smem((128,), F32)
  buf[...] = x[...] * 2.0
  idx = ml.arange(128)
  v = buf.load(mask=idx < 100, other=0.0)
  out[...] = v[:, None] - v[None, :]


@mg.mgpu_kernel(out_shape=lambda x: S((128, 128), F32))
def smem_vector_hint_followed(x, out):
  buf = ml.smem((128,), F32)
  buf[...] = x[...] * 2.0
  idx = ml.arange(128)
  v = buf.load(mask=idx < 100, other=0.0)
  tmp = ml.smem((128,), jnp.float32)
  tmp[...] = v
  out[...] = v[:, None] - tmp[...][None, :]


def test_the_smem_hint_of_a_layout_conflict_names_the_vectors_dtype_not_its_masks():
  """The hint allocated `tmp = ml.smem((128,), jnp.int32)` for a float32 vector: it took the dtype
  of the first vector of the conflict's class, here the index vector of the load's mask."""
  e = expect(smem_vector_both_ways, [S((128,), F32)], mg.LayoutError, "v[None, :]",
             "v is used as a row statistic (one value per row) of one tile and as a column vector (one"
             " value per column) of another: a register vector lives in one of the two layouts")
  assert "tmp = ml.smem((128,), jnp.float32); tmp[...] = v;" in e.hint
  x = np.arange(128, dtype=np.float32)
  v = np.where(x < 100, 2 * x, 0).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(smem_vector_hint_followed(x, interpret=True)), v[:, None] - v[None, :])
