"""Probe 48e (ragged and data-dependent kernels: MoE routing and grouped matmuls, segments, histograms, sorts,
searches). `ml.searchsorted` of a scalar query past a ref's last element read one element past its end (the
unrolled binary search reads on after it has finished); jax.ops.segment_sum / segment_max / segment_min,
jnp.bincount, Triton's tl.histogram and jnp.searchsorted of register values were MG003 / MG002 hints."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32


def _spec(x):
  return S(x.shape, x.dtype)


def _export(kernel, *args, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  text = jax.export.export(fn, platforms=["cuda"])(*[_spec(a) for a in args]).mlir_module()
  assert "mosaic_gpu" in text
  return text


def _rng(seed):
  return np.random.default_rng(seed)


# ---------------------------------------------------------------- ml.searchsorted of a scalar past the end
@mg.mgpu_kernel(out_shape=lambda ids: S((8,), F32), grid=lambda ids: (8,))
def segment_counts(ids, out):              # segment g of the sorted ids is searchsorted(g):searchsorted(g, right)
  g = ml.program_id(0)
  lo = ml.searchsorted(ids, g)
  hi = ml.searchsorted(ids, g, side="right")
  out[g] = (hi - lo).astype(F32)


@mg.mgpu_kernel(out_shape=lambda off, q: S(q.shape, I32), grid=lambda off, q: (q.shape[0],))
def find_groups(off, q, out):              # which group of the offsets each query row falls in
  i = ml.program_id(0)
  out[i] = ml.searchsorted(off, q[i], side="right") - 1


def _counts_want(ids):
  return np.bincount(ids, minlength=8)[:8].astype(np.float32)


def test_searchsorted_of_a_scalar_after_every_element_stays_inside_the_array():
  """The last segment's end (side='right' of the largest id) and a query past every offset were interpret mode's
  OutOfBoundsError at the search (ids[1000]): the unrolled search read a[mid] with mid = len(a) once finished,
  on the GPU a read past the array. mid is clamped now; the answers are jnp's."""
  ids = jnp.asarray(np.sort(_rng(0).integers(0, 8, 1000)), I32)
  np.testing.assert_array_equal(segment_counts(ids, interpret=True), _counts_want(np.asarray(ids)))
  off = jnp.asarray([0, 4, 4, 10, 20], I32)
  q = jnp.asarray([0, 3, 4, 25, 20, -1, 19, 10], I32)
  np.testing.assert_array_equal(find_groups(off, q, interpret=True), np.searchsorted(off, q, side="right") - 1)
  sizes = jnp.asarray([0, 0, 7], I32)             # a query past a one-group table of no rows
  np.testing.assert_array_equal(find_groups(sizes, q, interpret=True), np.searchsorted(sizes, q, side="right") - 1)
  text = segment_counts.mlir(_spec(ids))
  assert "arith.minsi" in text
  _export(find_groups, off, q)


@pytest.mark.gpu
def test_gpu_searchsorted_of_a_scalar_after_every_element():
  ids = jnp.asarray(np.sort(_rng(1).integers(0, 8, 4096)), I32)
  np.testing.assert_array_equal(jax.jit(segment_counts)(ids), _counts_want(np.asarray(ids)))
  off = jnp.asarray([0, 4, 4, 10, 20], I32)
  q = jnp.asarray([0, 3, 4, 25, 20, -1, 19, 10], I32)
  np.testing.assert_array_equal(jax.jit(find_groups)(off, q), np.searchsorted(off, q, side="right") - 1)
