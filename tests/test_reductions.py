"""Reductions, broadcasting and row statistics: numbers in interpret mode (against jnp), CUDA
export on the CPU, and the GPU against the interpreter (-m gpu)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand as rnd
import mgpu_dsl as mg
from mgpu_dsl import language as ml
import reduce_kernels as R

S = jax.ShapeDtypeStruct


def rand(key, shape, dtype=jnp.float32, scale=1.0):
  return jnp.asarray((rnd.numpy_normal(key, shape) * scale).astype(jnp.dtype(dtype)))


def ref_softmax(x):
  return jax.nn.softmax(x.astype(jnp.float32), axis=1).astype(x.dtype)


# (name, kernel, args, constexprs, reference, tolerance)
CASES = [
    ("softmax_8_rows_f32", R.softmax_rows, lambda: [rand(0, (64, 512), scale=1e4)], {"rows": 8},
     lambda x: ref_softmax(x), 1e-6),
    ("softmax_1_row_f32", R.softmax_rows, lambda: [rand(1, (16, 1024), scale=1e4)], {"rows": 1},
     lambda x: ref_softmax(x), 1e-6),
    ("softmax_2_rows_bf16", R.softmax_rows, lambda: [rand(2, (16, 512), jnp.bfloat16, 30.0)], {"rows": 2},
     lambda x: ref_softmax(x), 1e-2),
    ("column_sums", R.column_sums, lambda: [rand(3, (64, 256), jnp.bfloat16)], {},
     lambda x: x.astype(jnp.float32).sum(0), 1e-4),
    ("center_if_positive", R.center_if_positive, lambda: [rand(4, (8, 256)) + 0.5], {},
     lambda x: x - x.sum() / x.size, 1e-5),
    ("row_stats", R.row_stats, lambda: [rand(5, (32, 256), jnp.float16)], {},
     lambda x: (x.astype(jnp.float32).mean(1), jnp.argmax(x.astype(jnp.float32), 1)), 1e-5),
    ("chunked_row_max", R.chunked_row_max, lambda: [rand(6, (16, 1024))], {},
     lambda x: x.max(1), 0.0),
    ("dot_row_softmax", R.dot_row_softmax, lambda: [rand(7, (64, 64), jnp.float16, 3.0),
                                                    rand(8, (64, 64), jnp.float16, 3.0)], {},
     lambda a, b: jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((64, 64), bool)),
                                           a.astype(jnp.float32) @ b.astype(jnp.float32), -1e30), axis=1),
     2e-3),
    ("scale_columns", R.scale_columns, lambda: [rand(9, (16, 256)), rand(10, (256,))], {},
     lambda x, w: x * w[None, :] + jnp.arange(256, dtype=jnp.float32), 1e-6),
]
IDS = [c[0] for c in CASES]


def _close(got, want, tol):
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kernel,make_args,kw,ref,tol", CASES, ids=IDS)
def test_interpret_matches_jnp(name, kernel, make_args, kw, ref, tol):
  args = make_args()
  _close(kernel(*args, interpret=True, **kw), ref(*args), tol)


@pytest.mark.parametrize("name,kernel,make_args,kw,ref,tol", CASES, ids=IDS)
def test_exports_for_cuda(name, kernel, make_args, kw, ref, tol):
  specs = [S(a.shape, a.dtype) for a in make_args()]
  txt = jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()
  assert "@mosaic_gpu" in txt


def test_softmax_without_the_max_would_overflow():
  x = rand(0, (8, 512), scale=1e4)
  with np.errstate(over="ignore"):            # the overflow is the point
    assert not np.isfinite(np.exp(np.asarray(x))).all()
  assert np.isfinite(np.asarray(R.softmax_rows(x, rows=8, interpret=True))).all()


def test_row_statistics_take_the_tiles_row_layout():
  ir = R.softmax_rows.typed_ir(S((64, 512), jnp.float32), rows=8)
  assert "tensor<8x512, float32, rows1x4>" in ir and "tensor<8, float32, rows1x4_row>" in ir
  assert "scratch=None" in ir            # rows reduce within each warp: no SMEM


def test_single_rows_spread_warps_across_the_row_and_reduce_through_smem():
  ir = R.softmax_rows.typed_ir(S((16, 1024), jnp.float32), rows=1)
  assert "rows4x" in ir and "scratch=%" in ir


@pytest.mark.gpu
@pytest.mark.parametrize("name,kernel,make_args,kw,ref,tol", CASES, ids=IDS)
def test_gpu_matches_interpret_and_jnp(name, kernel, make_args, kw, ref, tol):
  args = make_args()
  got = kernel(*args, **kw)
  _close(got, kernel(*args, interpret=True, **kw), max(tol, 1e-5))
  _close(got, ref(*args), max(tol, 1e-5))


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0],))
def one_row_times_vector(x, w, out):
  """A (1, n) tile times w[None, :] of the same shape: no broadcast needed, the vector still
  becomes a tile (a regression: the shapes matched, so the layouts were once joined)."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i, 1), :][...]
  m = ml.max(v, axis=1, keepdims=True)
  out.at[ml.ds(i, 1), :][...] = (v - m) * w[...][None, :]


def test_a_vector_reshaped_to_a_tiles_shape_meets_the_tile():
  x, w = rand(11, (4, 4096)), rand(12, (4096,))
  got = one_row_times_vector(x, w, interpret=True)
  np.testing.assert_allclose(got, (x - x.max(1, keepdims=True)) * w, rtol=1e-6, atol=1e-6)
  one_row_times_vector.check(S((4, 4096), jnp.float32), S((4096,), jnp.float32))


def test_size_one_axes_removed_by_reshape():
  @mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), jnp.float32), grid=(1,))
  def row_sums(x, out):
    s = ml.sum(x[...], axis=1, keepdims=True)      # (m, 1)
    out[...] = s.reshape((x.shape[0],))
  x = rand(13, (8, 256))
  np.testing.assert_allclose(row_sums(x, interpret=True), x.sum(1), rtol=1e-5, atol=1e-5)
  row_sums.check(S((8, 256), jnp.float32))


def test_short_vectors_not_tied_to_a_tile_live_on_the_lanes():
  @mg.mgpu_kernel(out_shape=lambda w: jax.ShapeDtypeStruct((64,), jnp.float32), grid=(1,))
  def centre(w, out):
    v = w[...]
    out[...] = v - ml.sum(v) / 64
  w = rand(14, (64,))
  np.testing.assert_allclose(centre(w, interpret=True), w - w.mean(), rtol=1e-5, atol=1e-6)
  assert "_col>" in centre.typed_ir(S((64,), jnp.float32))
  centre.check(S((64,), jnp.float32))
