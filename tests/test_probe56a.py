"""Probe 56a (refusals the last session left; small linear algebra and quantised GEMMs). (1) jnp.linalg.inv, solve
and det of a float (n, n) register matrix, n not a multiple of 16 (4x4 to 15x15, 20x20), were MG003: the matrix,
read padded, is grown into the (16k, 16k) one with ones on the padding's diagonal (ops/padded_squares.py, through an
SMEM scratch) and solved by form_helpers.lu_solve, the result cut back to the padded (n, n) tile; solve of a 1-D b
(MG003 at any n) is its column; a stack (B, n, n) (MG003) is each matrix's call stacked (det's scalars selected into
a vector). jnp.pad of a padded tile to a width registers hold (a (12, 12) to (16, 16)) was MG204: the part held
wider than the join is cut to it (ops/padded_joins.py). A stack's (B, n) b stays MG003 with a hint."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct


def _well(shape, seed, dt=np.float32):
  n = shape[-1]
  return (rnd(shape, seed) + 3.0 * np.eye(n, dtype=np.float32)).astype(dt)


# ---------------------------------------------------------------- (1) linalg of any n, and of stacks
@mg.mgpu_kernel(out_shape=lambda a: a)
def inverse(a, o):
  o[...] = jnp.linalg.inv(a[...])


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def solve(a, b, o):
  o[...] = jnp.linalg.solve(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda a: S((8,), a.dtype))
def determinant(a, o):
  o[...] = ml.full((8,), jnp.linalg.det(a[...]), a.dtype)


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[:1], a.dtype))
def determinants(a, o):
  o[...] = jnp.linalg.det(a[...])


@pytest.mark.parametrize("n", [4, 5, 7, 8, 12, 15, 20])
def test_inv_and_det_of_any_n_match_numpy(n):
  a = _well((n, n), n)
  np.testing.assert_allclose(inverse(a, interpret=True), np.linalg.inv(a), rtol=2e-4, atol=2e-5)
  np.testing.assert_allclose(determinant(a, interpret=True), np.full(8, np.linalg.det(a)), rtol=2e-5)


@pytest.mark.parametrize("n,b", [(5, (5, 32)), (12, (12, 128)), (12, (12, 100)), (13, (13, 1)), (10, (10,)),
                                 (16, (16,)), (20, (20,))])
def test_solve_of_any_n_and_a_vector_b(n, b):
  a, y = _well((n, n), n), rnd(b, 2)
  np.testing.assert_allclose(solve(a, y, interpret=True), np.linalg.solve(a, y), rtol=2e-4, atol=2e-5)


def test_bfloat16_matrix_rounds_once():
  a = _well((10, 10), 1, jnp.bfloat16)
  np.testing.assert_array_equal(f32(inverse(a, interpret=True)),
                                f32(jnp.asarray(np.linalg.inv(f32(a)), jnp.bfloat16)))


@pytest.mark.parametrize("b,n", [(2, 16), (4, 6), (2, 12), (2, 3), (4, 2)])
def test_stacks_are_each_matrix_s_call(b, n):
  a = _well((b, n, n), b + n)
  np.testing.assert_allclose(inverse(a, interpret=True), np.linalg.inv(a), rtol=2e-4, atol=2e-5)
  np.testing.assert_allclose(determinants(a, interpret=True), np.linalg.det(a), rtol=2e-5)
  y = rnd((b, n, 32), 3)
  np.testing.assert_allclose(solve(a, y, interpret=True), np.linalg.solve(a, y), rtol=2e-4, atol=2e-5)


def test_linalg_builds_for_cuda():
  export(inverse, _well((12, 12), 1))
  export(determinant, _well((5, 5), 2))
  export(solve, _well((20, 20), 3), rnd((20, 32), 4))
  export(solve, _well((10, 10), 3), rnd((10,), 4))
  export(inverse, _well((2, 6, 6), 5))
  export(determinants, _well((4, 12, 12), 6))


def test_a_stack_s_vector_b_keeps_mg003_with_a_hint():
  e = expect(solve, [S((2, 6, 6), jnp.float32), S((2, 6), jnp.float32)], mg.KernelTypeError, "jnp.linalg.solve(",
             "solve cannot take a register tensor inside a kernel")
  assert "write b[..., None]" in e.hint


@mg.mgpu_kernel(out_shape=lambda a: S((16, 16), a.dtype))
def padded_to_16(a, o):
  n = a.shape[0]
  o[...] = jnp.pad(a[...], ((0, 16 - n), (0, 16 - n)), constant_values=0.5) * 2.0


@pytest.mark.parametrize("n", [4, 12, 15])
def test_pad_of_a_padded_tile_to_a_held_width(n):
  a = rnd((n, n), n)
  np.testing.assert_array_equal(padded_to_16(a, interpret=True), np.pad(a, ((0, 16 - n), (0, 16 - n)),
                                                                        constant_values=0.5) * 2)
  export(padded_to_16, a)


@pytest.mark.gpu
def test_linalg_and_pads_on_gpu():
  for n in (5, 12, 20):
    a = _well((n, n), n)
    np.testing.assert_allclose(inverse(a), np.linalg.inv(a), rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(solve(a, rnd((n,), 1)), np.linalg.solve(a, rnd((n,), 1)), rtol=2e-4, atol=2e-5)
  a = _well((4, 6, 6), 9)
  np.testing.assert_allclose(determinants(a), np.linalg.det(a), rtol=2e-5)
  a = rnd((12, 12), 1)
  np.testing.assert_array_equal(padded_to_16(a), np.pad(a, ((0, 4), (0, 4)), constant_values=0.5) * 2)
