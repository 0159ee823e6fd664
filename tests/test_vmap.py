"""jax.vmap of kernels: one launch over a batched grid (interpret mode, CUDA export, the GPU)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels as K
import rand as rnd
import mgpu_dsl as mg
import reduce_kernels as R
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def rand(key, shape):
  return rnd.normal(rnd.key(key), shape, jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128, 2, 1))
def uses_grid_y(x, out):
  """Axis 1 of the grid splits the columns, so vmap takes axis 2."""
  i, j = ml.program_id(0), ml.program_id(1)
  half = x.shape[1] // 2
  w = x.at[ml.ds(i * 128, 128), ml.ds(j * half, half)]
  out.at[ml.ds(i * 128, 128), ml.ds(j * half, half)][...] = w[...] * 3 + ml.num_programs(2).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128, 1, 2))
def uses_grid_z(x, out):
  i, k = ml.program_id(0), ml.program_id(2)
  half = x.shape[1] // 2
  out.at[ml.ds(i * 128, 128), ml.ds(k * half, half)][...] = \
      x.at[ml.ds(i * 128, 128), ml.ds(k * half, half)][...] + 1.0


def test_vmap_runs_one_batched_launch_in_interpret_mode():
  x = rand(0, (3, 256, 64))
  np.testing.assert_array_equal(jax.vmap(lambda a: K.double(a, interpret=True))(x), x * 2)


def test_vmap_inside_jit_with_row_statistics():
  x = rand(1, (4, 64, 256)) * 100
  f = jax.jit(jax.vmap(lambda a: R.softmax_rows(a, rows=8, interpret=True)))
  np.testing.assert_allclose(f(x), jax.nn.softmax(x, -1), rtol=1e-6, atol=1e-7)


def test_nested_vmap_and_axes_other_than_zero():
  x = rand(2, (2, 3, 128, 64))
  y = jax.vmap(jax.vmap(lambda a: K.double(a, interpret=True)))(x)
  np.testing.assert_array_equal(y, x * 2)
  xs = rand(3, (128, 5, 64))
  y = jax.vmap(lambda a: K.double(a, interpret=True), in_axes=1, out_axes=2)(xs)
  np.testing.assert_array_equal(y, jnp.moveaxis(xs * 2, 1, 2))


def test_unbatched_inputs_are_shared():
  x, w = rand(4, (6, 16, 256)), rand(5, (256,))
  y = jax.vmap(lambda a: R.scale_columns(a, w, interpret=True))(x)
  np.testing.assert_allclose(y, x * w + jnp.arange(256.0), rtol=1e-6, atol=1e-6)


def test_kernel_sees_its_own_grid_when_vmap_takes_an_axis():
  x = rand(6, (3, 256, 64))
  y = jax.vmap(lambda a: uses_grid_y(a, interpret=True))(x)
  np.testing.assert_array_equal(y, x * 3 + 1)      # num_programs(2) is still 1 inside


def test_a_kernel_using_all_free_axes_falls_back_to_a_loop():
  x = rand(7, (2, 256, 64))
  np.testing.assert_array_equal(jax.vmap(lambda a: uses_grid_z(a, interpret=True))(x), x + 1)
  y = jax.vmap(jax.vmap(lambda a: uses_grid_z(a, interpret=True)))(rand(8, (2, 2, 128, 64)))
  assert y.shape == (2, 2, 128, 64)


def test_vmapped_kernel_exports_for_cuda_as_one_custom_call():
  f = jax.jit(jax.vmap(K.double))
  txt = jax.export.export(f, platforms=["cuda"])(S((3, 256, 64), jnp.float32)).mlir_module()
  assert txt.count("@mosaic_gpu") == 1


def test_batched_specialisation_folds_the_batch_into_the_grid():
  jax.export.export(jax.jit(jax.vmap(K.double)), platforms=["cuda"])(S((5, 256, 64), jnp.float32))
  grids = [h["kernel"].grid for h in K.double._cache.values()]
  assert (2, 1, 5) in grids


@pytest.mark.gpu
def test_vmap_on_the_gpu_matches_interpret_mode():
  x = rand(9, (4, 512, 64))
  np.testing.assert_array_equal(jax.jit(jax.vmap(K.double))(x), x * 2)
  y = jax.jit(jax.vmap(lambda a: R.softmax_rows(a, rows=8)))(x * 50)
  np.testing.assert_allclose(y, jax.nn.softmax(x * 50, -1), rtol=1e-6, atol=1e-7)
  y = jax.vmap(jax.vmap(K.double))(rand(10, (2, 3, 256, 64)))
  assert y.shape == (2, 3, 256, 64)
  np.testing.assert_array_equal(jax.vmap(uses_grid_z)(x), x + 1)


# ---------------------------------------------------------------- edge batches (from a newcomer probe)
@mg.mgpu_kernel(out_shape=lambda cache, new: cache, input_output_aliases={0: 0})
def write_second_block(cache, new, out):
  out.at[128:256][...] = new[...]


def test_vmap_of_an_aliased_kernel_broadcasts_an_unbatched_aliased_input():
  """The aliased output is batched, so its input must be too (was an InternalError in interpret
  mode and a shape mismatch from Mosaic GPU when exported)."""
  cache, new = jnp.arange(512, dtype=jnp.float32), jnp.ones((2, 128), jnp.float32)
  got = jax.vmap(lambda c, n: write_second_block(c, n, interpret=True), in_axes=(None, 0))(cache, new)
  want = np.stack([np.asarray(cache)] * 2)
  want[:, 128:256] = 1.0
  np.testing.assert_array_equal(got, want)
  exported = jax.export.export(jax.jit(jax.vmap(write_second_block, in_axes=(None, 0))), platforms=["cuda"])(
      cache, new)
  assert exported.out_avals[0].shape == (2, 512)


def test_vmap_over_an_empty_batch_gives_empty_outputs():
  """Was a ZeroDivisionError from the batch's grid arithmetic."""
  x = jnp.zeros((0, 128), jnp.float32)
  got = jax.vmap(lambda a: write_second_block(jnp.zeros((512,)), a, interpret=True))(x)
  assert got.shape == (0, 512)
