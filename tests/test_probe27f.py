"""Shape, layout and reduction ops on register tensors of awkward shapes (a probe of the
27th session): reductions of one-column tiles, size-1 axes added to vectors of any multiple
of 8 elements, long expressions named in messages, reductions of transposed tiles. Interpret
mode against numpy, the CUDA export, and located diagnostics."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from locate import builds, expect

S = jax.ShapeDtypeStruct


def spec(a):
  return S(a.shape, a.dtype)


def rand(shape, dtype=np.float32, seed=0):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def exported(kernel, *arrays):
  return jax.export.export(jax.jit(kernel), platforms=["cuda"])(*map(spec, arrays)).mlir_module()


# ------------------------------------------------ an (n, 1) column reduced along its rows
@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.float32))
def column_sum(x, out):
  out[...] = ml.sum(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), jnp.float32))
def column_mean_kept(x, out):
  out[...] = ml.mean(x[...], axis=0, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int32))
def column_argmax(x, out):
  out[...] = ml.argmax(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def column_minus_max(x, out):
  v = x[...]
  out[...] = v - ml.max(v, axis=0, keepdims=True)


@pytest.mark.parametrize("kernel, ref", [
    (column_sum, lambda x: x.sum(0)),
    (column_mean_kept, lambda x: x.mean(0, keepdims=True)),
    (column_argmax, lambda x: x.argmax(0)),
    (column_minus_max, lambda x: x - x.max(0, keepdims=True)),
], ids=["sum", "mean_keepdims", "argmax", "minus_max"])
@pytest.mark.parametrize("rows", [128, 1024])
def test_column_reduced_along_rows(kernel, ref, rows):
  x = rand((rows, 1))
  got = np.asarray(kernel(jnp.asarray(x), interpret=True))
  np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in str(exported(kernel, x))


# ---------------------- size-1 axes added to a vector whose length is not a multiple of 128
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 1), x.dtype))
def as_column(x, out):
  out[...] = x[...][:, None]


@mg.mgpu_kernel(out_shape=lambda x: S((1, x.shape[0]), x.dtype))
def as_row(x, out):
  out[...] = x[...].reshape(1, x.shape[0]) * 2.0


@mg.mgpu_kernel(out_shape=lambda x, c: c)
def column_plus_loaded_column(x, c, out):
  out[...] = x[...][:, None] + c[...]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 1), x.dtype))
def column_through_smem(x, out):
  t = ml.smem((x.shape[0], 1), jnp.float32)
  t[...] = x[...][:, None]
  out[...] = ml.cumsum(t[...], axis=0)


@pytest.mark.parametrize("n", [8, 64, 192, 320, 1000])
def test_vector_with_unit_axis(n):
  x, c = rand((n,)), rand((n, 1), seed=1)
  for kernel, args, want in [(as_column, [x], x[:, None]),
                             (column_plus_loaded_column, [x, c], x[:, None] + c),
                             (column_through_smem, [x], np.cumsum(x)[:, None]),
                             (as_row, [x], 2 * x[None, :])]:
    got = np.asarray(kernel(*map(jnp.asarray, args), interpret=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert "mosaic_gpu" in str(exported(kernel, *args))


# ------------------------------------- messages name a long expression on one line, as written
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2), jnp.float32))
def two_row_statistics(x, out):
  v = x[...]
  out[...] = ml.concatenate([ml.max(v, axis=1)[:, None], ml.min(v, axis=1)[:, None]], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2), jnp.float32))
def two_row_statistics_narrowed(x, out):
  v = x[...]
  out[...] = ml.concatenate([ml.max(v, axis=1)[:, None], ml.min(v, axis=1)[:, None]], axis=1).astype(jnp.float16)


def test_a_long_expression_is_named_on_one_line():
  text = "ml.concatenate([ml.max(v, axis=1)[:, None], ml.min(v, axis=1)[:, None]], axis=1).astype(jnp.float16)"
  expect(two_row_statistics_narrowed, [S((32, 128), jnp.float32)], mg.StoreDtypeError, "out[...]",
         f"cannot store {text} (float16) into out (GMEM, float32): no implicit conversion")
  for rows in (17, 33):      # read padded; (33, 2) was MG204 before probe 53's padded statistics
    x = np.random.default_rng(rows).standard_normal((rows, 128)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(two_row_statistics(x, interpret=True)), np.stack([x.max(1), x.min(1)], 1))


# --------------------------------------- a reduction of a transposed tile too narrow for lanes
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), jnp.float32))
def column_max_through_transpose(x, out):
  t = x[...]
  out[...] = ml.max(t.T, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), jnp.float32))
def column_max(x, out):          # the hint, followed
  t = x[...]
  out[...] = ml.max(t, axis=0)


def test_reducing_a_narrow_transposed_tile_compiles():
  builds(column_max_through_transpose, S((8, 128), jnp.float32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  x = rand((8, 128))
  np.testing.assert_array_equal(np.asarray(column_max(jnp.asarray(x), interpret=True)), x.max(0))
  assert "mosaic_gpu" in str(exported(column_max, x))
