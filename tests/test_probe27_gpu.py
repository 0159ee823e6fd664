"""The eighteenth session's new forms on the GPU (each checked in interpret mode and by CUDA export in
tests/test_probe27[a-k].py): int8 dots of the integer n, reductions of (n, 1) columns, size-1 axes on
vectors of a multiple of 8 elements, cluster syncs inside a branch waiting for the loads before them,
the cluster swap with its final sync, and a Triton tail mask that covers the output."""
import jax.numpy as jnp
import numpy as np
import pytest

import test_probe27e as e
import test_probe27f as f
import test_probe27i as i
import test_probe27j as j

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [8, 24, 48, 144])
def test_gpu_int8_dot_of_the_integer_n(n):
  a, b = e._ints((64, 128), 0), e._ints((n, 128), 1)
  got = np.asarray(e.int8_abt(a, b))
  np.testing.assert_array_equal(got, np.asarray(a, np.int64) @ np.asarray(b, np.int64).T)


@pytest.mark.parametrize("kernel, ref", [
    (f.column_sum, lambda x: x.sum(0)),
    (f.column_argmax, lambda x: x.argmax(0)),
    (f.column_minus_max, lambda x: x - x.max(0, keepdims=True)),
], ids=["sum", "argmax", "minus_max"])
def test_gpu_column_reduced_along_rows(kernel, ref):
  x = f.rand((1024, 1))
  np.testing.assert_allclose(np.asarray(kernel(jnp.asarray(x))), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [8, 64, 192, 1000])
def test_gpu_vector_with_unit_axis(n):
  x, c = f.rand((n,)), f.rand((n, 1), seed=1)
  for kernel, args, want in [(f.as_column, [x], x[:, None]),
                             (f.column_plus_loaded_column, [x, c], x[:, None] + c),
                             (f.as_row, [x], 2 * x[None, :])]:
    got = np.asarray(kernel(*map(jnp.asarray, args)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gpu_cluster_syncs_in_a_branch_and_at_the_end():
  x = j._x()
  np.testing.assert_array_equal(np.asarray(j.sync_on_both_sides(x)), j._swapped(x))
  np.testing.assert_array_equal(np.asarray(j.final_sync(x)), j._swapped(x))
  np.testing.assert_array_equal(np.asarray(j.peer_in_cluster(x)), j._swapped(x))


def test_gpu_tail_mask_covering_the_output():
  x = np.arange(1000, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(i._tail(0)(jnp.asarray(x))), x * 2)
