"""Size-1 axes inserted and removed (v[:, None], x.reshape((n, 1)), t[:, 0] of an (n, 1) tile,
'...' in such indices): no element moves, so they work on any vector of a multiple of 128
elements, lowered as reshapes of the strided layout (probe 15: MG204 and MG900 before)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32

@ml.inline
def ellipsis_then_column(v):
  return v[..., None][:, 0]


@ml.inline
def insert_then_column(v):
  return v[:, None][:, 0]


@ml.inline
def reshape_then_column(v):
  return v.reshape((128, 1))[:, 0]


@ml.inline
def insert_then_ellipsis_index(v):
  return v[:, None][..., 0]


@ml.inline
def row_then_index(v):
  return v[None, :][0]


@ml.inline
def insert_then_reshape(v):
  return v[:, None].reshape((128,))


@ml.inline
def double_insert(v):
  return v[None, :, None][0, :, 0] * 2.0


CASES = {f.__name__: f for f in (ellipsis_then_column, insert_then_column, reshape_then_column,
                                 insert_then_ellipsis_index, row_then_index, insert_then_reshape, double_insert)}


def _kernel(body):
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def k(x, o):
    o[...] = body(x[...])
  return k


@pytest.mark.parametrize("name", CASES)
def test_unit_axis_round_trips_interpret_and_export(name):
  k = _kernel(CASES[name])
  x = jnp.arange(128.0, dtype=F32)
  want = x * 2.0 if name == "double_insert" else x
  np.testing.assert_array_equal(k(x, interpret=True), want)
  text = k.mlir(S((128,), F32))
  assert "vector.store" in text and "xf32, #gpu.address_space<workgroup>" not in text   # no SMEM trip
  jax.export.export(jax.jit(k), platforms=["cuda"])(S((128,), F32))


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], 1), x.dtype), S((1, x.shape[0]), x.dtype)))
def as_column_and_row(x, col, row):
  col[...] = x[...].reshape((x.shape[0], 1)) + 1.0
  row[...] = x[...][None, :]


@pytest.mark.parametrize("n", [128, 1024])
def test_vector_stored_as_a_column_or_row(n):
  x = rand.normal(rand.key(0), (n,), F32)
  c, r = as_column_and_row(x, interpret=True)
  np.testing.assert_array_equal(c, x[:, None] + 1.0)
  np.testing.assert_array_equal(r, x[None, :])
  jax.export.export(jax.jit(as_column_and_row), platforms=["cuda"])(S((n,), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def column_tile_to_vector(x, o):
  t = x[...]                       # (n, 1)
  o[...] = t[:, 0] * 3.0


def test_column_tile_indexed_to_a_vector():
  x = rand.normal(rand.key(1), (256, 1), F32)
  np.testing.assert_array_equal(column_tile_to_vector(x, interpret=True), x[:, 0] * 3.0)
  jax.export.export(jax.jit(column_tile_to_vector), platforms=["cuda"])(S((256, 1), F32))


@pytest.mark.gpu
def test_unit_axes_gpu():
  x = jnp.arange(128.0, dtype=F32)
  for name, body in CASES.items():
    want = x * 2.0 if name == "double_insert" else x
    np.testing.assert_array_equal(jax.jit(_kernel(body))(x), want, err_msg=name)
  x = rand.normal(rand.key(0), (1024,), F32)
  c, r = jax.jit(as_column_and_row)(x)
  np.testing.assert_array_equal(c, x[:, None] + 1.0)
  np.testing.assert_array_equal(r, x[None, :])
  y = rand.normal(rand.key(1), (256, 1), F32)
  np.testing.assert_array_equal(jax.jit(column_tile_to_vector)(y), y[:, 0] * 3.0)
