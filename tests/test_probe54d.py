"""Probe 54d (ops users reach for that were MG003). (1) jnp.linalg.solve, inv and det of a float (n, n) register
matrix, n a multiple of 16: Gauss-Jordan elimination with partial pivoting (form_helpers.lu_solve); a smaller one
keeps MG003, its hint the scalar closed form. (2) jnp.piecewise of register values, jax's rule (the last condition
that holds chooses; constants and an otherwise function). (3) jnp.kron of two 1-D or two 2-D tiles. (4)
jnp.histogram(x, bins=n, range=(lo, hi)) with n a multiple of 8: jax's float32 edges, a count a bin."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- (1) linalg of register matrices
@mg.mgpu_kernel(out_shape=lambda a: a)
def inverse(a, o):
  o[...] = jnp.linalg.inv(a[...])


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def solve(a, b, o):
  o[...] = jnp.linalg.solve(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda a: jax.ShapeDtypeStruct((16,), jnp.float32))
def determinant(a, o):
  o[...] = jnp.full((16,), jnp.linalg.det(a[...]), jnp.float32)


def test_inv_solve_det_match_jnp():
  a = rnd((16, 16), 0)                               # (a general matrix: pivoting needed)
  np.testing.assert_allclose(inverse(a, interpret=True), np.linalg.inv(a), rtol=2e-3, atol=2e-3)
  a32, b = rnd((32, 32), 1) + 6 * np.eye(32, dtype=np.float32), rnd((32, 64), 2)
  np.testing.assert_allclose(solve(a32, b, interpret=True), jnp.linalg.solve(a32, b), rtol=1e-3, atol=1e-4)
  d = determinant(a, interpret=True)
  np.testing.assert_allclose(d, np.full(16, np.linalg.det(a.astype(np.float64))), rtol=1e-3)
  p = np.eye(16, dtype=np.float32)[::-1].copy()      # (an exchange matrix: 8 swaps, its det +1; one more, -1)
  p[[0, 1]] = p[[1, 0]]
  np.testing.assert_allclose(determinant(p * 2, interpret=True), np.full(16, np.linalg.det(p * 2)), rtol=1e-5)


def test_linalg_builds_for_cuda():
  export(inverse, rnd((16, 16), 0))
  export(solve, rnd((32, 32), 0), rnd((32, 64), 1))


def test_small_matrix_computes_padded():
  a = rnd((5, 5), 1) + 3 * np.eye(5, dtype=np.float32)
  np.testing.assert_allclose(inverse(a, interpret=True), np.linalg.inv(a), rtol=1e-4, atol=1e-5)   # (MG003 before
                                                                                   # probe 56a: padded to 16x16)


def test_det_of_2x2_and_3x3_is_jax_s_closed_form():
  for n, dt in ((2, np.float32), (3, np.float32), (3, jnp.bfloat16)):
    a = rnd((n, n), 30 + n, dt)
    # (jax's formula; XLA may fuse its multiply-adds, jax 0.11.2's CPU does: within an ulp of the dtype)
    np.testing.assert_allclose(f32(determinant(a, interpret=True)), np.full(16, f32(jnp.linalg.det(a))),
                               rtol=2 * float(jnp.finfo(dt).eps), atol=0)
  export(determinant, rnd((3, 3), 33))


# ---------------------------------------------------------------- (2) jnp.piecewise
@mg.mgpu_kernel(out_shape=lambda x: x)
def leaky_square(x, o):
  v = x[...]
  o[...] = jnp.piecewise(v, [v < 0, v >= 0], [lambda t: t * 0.1, lambda t: t * t])


@mg.mgpu_kernel(out_shape=lambda x: x)
def clipped_cube(x, o):
  v = x[...]
  o[...] = jnp.piecewise(v, [v < -1, (v >= -1) & (v < 1), v > 0.5], [-1.0, lambda t: t ** 3, jnp.tanh, 2.0])


def test_piecewise_is_jax_s():
  x = rnd((128,), 3)
  ref = jnp.piecewise(x, [x < 0, x >= 0], [lambda t: t * 0.1, lambda t: t * t])
  np.testing.assert_allclose(leaky_square(x, interpret=True), ref, rtol=1e-6)
  x = rnd((8, 64), 4, np.float16) * np.float16(2)   # (overlapping conditions: the last that holds; an otherwise)
  ref = jnp.piecewise(jnp.asarray(x), [x < -1, (x >= -1) & (x < 1), x > 0.5], [-1.0, lambda t: t ** 3, jnp.tanh,
                                                                                 2.0])
  out = clipped_cube(x, interpret=True)
  assert out.dtype == jnp.float16
  np.testing.assert_allclose(f32(out), f32(ref), rtol=2e-3, atol=2e-3)
  export(clipped_cube, x)


# ---------------------------------------------------------------- (3) jnp.kron
@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct(tuple(m * p for m, p in zip(a.shape, b.shape)),
                                                              jnp.promote_types(a.dtype, b.dtype)))
def kron(a, b, o):
  o[...] = jnp.kron(a[...], b[...])


def test_kron_of_tiles():
  a, b = rnd((4, 8), 5), rnd((4, 16), 6)
  np.testing.assert_allclose(kron(a, b, interpret=True), np.kron(a, b), rtol=1e-6)
  a, b = rnd((2, 2), 7, jnp.bfloat16), rnd((16, 32), 8)
  np.testing.assert_allclose(kron(a, b, interpret=True), np.kron(f32(a), b), rtol=1e-6)
  a, b = rnd((16,), 9), rnd((16,), 10)
  np.testing.assert_allclose(kron(a, b, interpret=True), np.kron(a, b), rtol=1e-6)
  export(kron, rnd((4, 8), 5), rnd((4, 16), 6))


# ---------------------------------------------------------------- (4) jnp.histogram
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8,), jnp.float32))
def histogram(x, o):
  h, e = jnp.histogram(x[...], bins=8, range=(-2., 2.))
  o[...] = h * (e[1] - e[0])


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((16,), jnp.float32))
def density(x, o):
  o[...] = jnp.histogram(x[...], bins=16, range=(0, 1), density=True)[0]


def test_histogram_is_jax_s():
  x = rnd((256,), 11)
  x[:9] = np.asarray(jnp.linspace(-2., 2., 9))      # (each edge, the last in the last bin) and a NaN in none
  x[9] = np.nan
  h, e = jnp.histogram(x, bins=8, range=(-2., 2.))
  np.testing.assert_array_equal(histogram(x, interpret=True), h * (e[1] - e[0]))
  x = np.random.default_rng(12).random((8, 64)).astype(np.float32)
  np.testing.assert_allclose(density(x, interpret=True), jnp.histogram(x, bins=16, range=(0, 1), density=True)[0],
                             rtol=1e-6)
  export(histogram, rnd((256,), 11))


@pytest.mark.gpu
def test_forms_on_gpu():
  a = rnd((16, 16), 0)
  np.testing.assert_allclose(inverse(a), inverse(a, interpret=True), rtol=2e-3, atol=2e-3)
  x = rnd((256,), 11)
  np.testing.assert_array_equal(histogram(x), histogram(x, interpret=True))
  x = rnd((8, 64), 4, np.float16) * np.float16(2)
  np.testing.assert_allclose(f32(clipped_cube(x)), f32(clipped_cube(x, interpret=True)), rtol=2e-3, atol=2e-3)
  a, b = rnd((4, 8), 5), rnd((4, 16), 6)
  np.testing.assert_allclose(kron(a, b), np.kron(a, b), rtol=1e-6)


# ---------------------------------------------------------------- (5) jnp.convolve of a bfloat16 row and float32 taps
@mg.mgpu_kernel(out_shape=lambda x, w: jax.ShapeDtypeStruct((x.shape[0] + w.shape[0] - 1,), jnp.float32))
def smooth(x, w, o):
  o[...] = jnp.convolve(x[...], w[...])                # (jnp promotes both to float32)


@mg.mgpu_kernel(out_shape=lambda x, w: jax.ShapeDtypeStruct(x.shape, jnp.float32))
def matched(x, w, o):
  o[...] = jnp.correlate(x[...], w[...], mode="same")


def test_convolution_of_two_float_dtypes_is_float32_s():
  x, w = rnd((128,), 13, jnp.bfloat16), rnd((5,), 14)
  np.testing.assert_allclose(smooth(x, w, interpret=True), jnp.convolve(x, w), rtol=1e-5, atol=1e-6)
  x, w = rnd((256,), 15, np.float16), rnd((3,), 16, jnp.bfloat16)
  np.testing.assert_allclose(matched(x, w, interpret=True), jnp.correlate(x, w, mode="same"), rtol=1e-5, atol=1e-6)
  export(smooth, rnd((128,), 13, jnp.bfloat16), rnd((5,), 14))


# ---------------------------------------------------------------- (6) a window's size from a static grid
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (2, x.shape[1] // 128))
def blocks_of_the_grid(x, o):
  bm, bn = x.shape[0] // ml.num_programs(0), x.shape[1] // ml.num_programs(1)
  i, j = ml.program_id(0), ml.program_id(1)
  o.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)].store(x.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)].load() + 1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def halves(x, o):
  n = ml.cdiv(x.shape[0], ml.num_programs(0))
  o[ml.ds(ml.program_id(0) * n, n)] = ml.exp(x[ml.ds(ml.program_id(0) * n, n)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def too_wide(x, o):
  n = x.shape[0] * ml.num_programs(0)
  o[ml.ds(0, n)] = x[ml.ds(0, n)]


def test_window_size_from_num_programs_of_a_static_grid():
  x = rnd((16, 256), 17)
  np.testing.assert_array_equal(blocks_of_the_grid(x, interpret=True), x + 1)
  x = rnd((256,), 18)
  np.testing.assert_allclose(halves(x, interpret=True), np.exp(x), rtol=1e-6)
  export(blocks_of_the_grid, rnd((16, 256), 17))
  expect(too_wide, [S((256,), jnp.float32)], mg.IndexOutOfBoundsError, "x[ml.ds(0, n)]",   # (still a mistake)
         "ml.ds(0, 512) is out of bounds for dimension 0 of x (size 256)")


# ---------------------------------------------------------------- (7) NumPy's index grids of any size in a kernel
@mg.mgpu_kernel(out_shape=lambda x: x)
def plus_identity(x, o):
  o[...] = x[...] + np.eye(64)                       # (float64 in NumPy: float32 in the kernel, as jnp.asarray)


@mg.mgpu_kernel(out_shape=lambda s: s)
def causal_bias(s, o):
  o[...] = s[...] + (1 - np.tri(64, 128, 0)) * -1e9 + np.tri(64, 128, -1, np.int32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def plus_positions(x, o):
  o[...] = x[...] * np.arange(0, 512, 2)


def test_numpy_grids_of_more_than_64_elements():
  x = rnd((64, 64), 19)
  np.testing.assert_array_equal(plus_identity(x, interpret=True), x + np.eye(64, dtype=np.float32))
  s = rnd((64, 128), 20)
  ref = s + np.float32(1 - np.tri(64, 128, 0)) * np.float32(-1e9) + np.tri(64, 128, -1, np.float32)
  np.testing.assert_array_equal(causal_bias(s, interpret=True), ref)
  x = rnd((256,), 21)
  np.testing.assert_array_equal(plus_positions(x, interpret=True), x * np.arange(0, 512, 2, dtype=np.float32))
  export(causal_bias, s)
