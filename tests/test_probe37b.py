"""Probe 37b (ragged and data-dependent kernels: grouped matmul, segment sums, histograms, top-k,
gathers and scatters by index arrays, scans, data-dependent loops): a column gather `t[:, cols]`
whose (rows, len(cols)) tile each row's lanes cannot hold was MG204, where the row gather
`t[ids, :]` of the same shape widens itself; and the hints of column gathers and scatters the
registers cannot hold at all were a row gather's (`t[ids[:, None], ml.arange(...)]`), which,
followed, computed other elements."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _take_columns(t, c):             # jnp's gather: negative indices from the end, the rest clamped
  c = np.asarray(c).astype(np.int64)
  n = t.shape[-1]
  return np.asarray(t)[..., np.clip(np.where(c < 0, c + n, c), 0, n - 1)]


# ---------------------------------------------------------------- column gathers widened
@mg.mgpu_kernel(out_shape=lambda t, c: S((t.shape[0], c.shape[0]), t.dtype), grid=lambda t, c: (1,))
def gather_columns(t, c, out):
  out[...] = t[:, c[...]]


@mg.mgpu_kernel(out_shape=lambda t, c, s: S((16, c.shape[0]), t.dtype), grid=lambda t, c, s: (1,))
def gather_columns_of_view(t, c, s, out):
  out[...] = t.at[ml.ds(s[0], 16), 3, :][:, c[...]]


COLUMN_CASES = [((64, 128), 40, F32, jnp.int32), ((128, 100), 8, jnp.bfloat16, jnp.int16),
                ((16, 300), 24, jnp.float16, jnp.uint8), ((32, 50), 16, jnp.int32, jnp.uint32)]


def _column_case(shape, n, dtype, idtype, seed=0):
  rng = np.random.default_rng(seed)
  t = jnp.asarray(rng.standard_normal(shape) * 10).astype(dtype)
  low = 0 if idtype in (jnp.uint8, jnp.uint32) else -shape[1]
  return t, jnp.asarray(rng.integers(low, shape[1] + 20, n)).astype(idtype)


@pytest.mark.parametrize("shape,n,dtype,idtype", COLUMN_CASES)
def test_a_column_gather_of_narrow_columns_is_widened_as_a_row_gather_is(shape, n, dtype, idtype):
  t, c = _column_case(shape, n, dtype, idtype)
  np.testing.assert_array_equal(np.asarray(gather_columns(t, c, interpret=True)), _take_columns(t, c))
  assert "mosaic_gpu" in str(_export(gather_columns, S(shape, dtype), S((n,), idtype)))


def test_a_column_gather_of_a_view_is_widened_inside_the_view():
  rng = np.random.default_rng(1)
  t = jnp.asarray(rng.standard_normal((40, 5, 64)), F32)
  c = jnp.asarray(rng.integers(-64, 64, 40), jnp.int32)
  got = gather_columns_of_view(t, c, jnp.array([9], jnp.int32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _take_columns(t[9:25, 3, :], c))
  _export(gather_columns_of_view, S((40, 5, 64), F32), S((40,), jnp.int32), S((1,), jnp.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,n,dtype,idtype", COLUMN_CASES)
def test_gpu_a_widened_column_gather_matches_jnp(shape, n, dtype, idtype):
  t, c = _column_case(shape, n, dtype, idtype, seed=2)
  np.testing.assert_array_equal(np.asarray(jax.jit(gather_columns)(t, c)), _take_columns(t, c))
  t3 = jnp.asarray(np.random.default_rng(3).standard_normal((40, 5, 64)), F32)
  c3 = jnp.asarray(np.random.default_rng(4).integers(-64, 64, 40), jnp.int32)
  got = jax.jit(gather_columns_of_view)(t3, c3, jnp.array([9], jnp.int32))
  np.testing.assert_array_equal(np.asarray(got), _take_columns(t3[9:25, 3, :], c3))


# ---------------------------------------------------------------- hints of column gathers and scatters
@mg.mgpu_kernel(out_shape=lambda t, c: S((t.shape[0], c.shape[0]), t.dtype), grid=lambda t, c: (1,))
def gather_columns_odd_rows(t, c, out):
  out[...] = t[:, c[...]]


@mg.mgpu_kernel(out_shape=lambda t, c: S((t.shape[0], c.shape[0]), t.dtype), grid=lambda t, c: (1,))
def gather_columns_as_hinted(t, c, out):
  cols = c.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 32, other=0)
  v = t[:, cols]
  out.at[:, ml.ds(0, 128)].store(v, mask=ml.arange(128)[None, :] < 32)


@mg.mgpu_kernel(out_shape=lambda v, c: S((v.shape[0], 300), v.dtype), grid=lambda v, c: (1,))
def scatter_columns(v, c, out):
  ml.atomic_add(out.at[:, c[...]], v[...])


@mg.mgpu_kernel(out_shape=lambda v, c: S((v.shape[0], 300), v.dtype), grid=lambda v, c: (1,))
def scatter_columns_as_hinted(v, c, out):
  cols = c.at[ml.ds(0, 64)].load(mask=ml.arange(64) < 40, other=out.shape[1])
  vals = v.at[:, ml.ds(0, 64)].load(mask=ml.arange(64)[None, :] < 40, other=0)
  ml.atomic_add(out.at[:, cols], vals)


def test_a_column_gather_registers_cannot_hold_hints_a_widened_index_vector_that_works():
  expect(gather_columns_odd_rows, [S((50, 128), F32), S((32,), jnp.int32)], mg.LayoutError, "t[:, c[...]]",
         "this gather of shape (50, 32) spreads each row's index along the row: that needs columns a multiple of"
         " 32 (one per lane of a warp), and rows a multiple of 4 unless the columns are a multiple of 128",
         hint="widen the index vector to 128 entries, which each row's lanes hold, and keep 32 columns at the"
              " store: cols = c.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 32, other=0); v = t[:, cols] (index 0"
              " where the mask is off); out.at[:, ml.ds(0, 128)].store(v, mask=ml.arange(128)[None, :] < 32) (the"
              " window may run past out's last column: masked elements are never written)")
  rng = np.random.default_rng(5)
  t = jnp.asarray(rng.standard_normal((50, 128)), F32)
  c = jnp.asarray(rng.integers(0, 128, 32), jnp.int32)
  np.testing.assert_array_equal(np.asarray(gather_columns_as_hinted(t, c, interpret=True)), _take_columns(t, c))
  _export(gather_columns_as_hinted, S((50, 128), F32), S((32,), jnp.int32))


def test_a_column_scatter_hints_a_widened_index_vector_past_the_end_that_works():
  expect(scatter_columns, [S((64, 40), F32), S((40,), jnp.int32)], mg.LayoutError, "ml.atomic_add(",
         "this scatter of shape (64, 40) spreads each row's index along the row: that needs columns a multiple of"
         " 32 (one per lane of a warp), and rows a multiple of 4 unless the columns are a multiple of 128",
         hint="widen the index vector to 64 entries, which each row's lanes hold, the extra ones past out's last"
              " column (where a scatter drops its updates): cols = c.at[ml.ds(0, 64)].load(mask=ml.arange(64) < 40,"
              " other=out.shape[1]); vals = v.at[:, ml.ds(0, 64)].load(mask=ml.arange(64)[None, :] < 40, other=0);"
              " ml.atomic_add(out.at[:, cols], vals)")
  rng = np.random.default_rng(6)
  v = jnp.asarray(rng.standard_normal((64, 40)), F32)
  c = jnp.asarray(rng.integers(0, 300, 40), jnp.int32)
  want = np.zeros((64, 300), np.float32)
  np.add.at(want, (slice(None), np.asarray(c)), np.asarray(v))
  np.testing.assert_allclose(np.asarray(scatter_columns_as_hinted(v, c, interpret=True)), want, rtol=1e-6, atol=1e-6)
  _export(scatter_columns_as_hinted, S((64, 40), F32), S((40,), jnp.int32))
