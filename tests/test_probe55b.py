"""Probe 55b (small refusals probes 54a and 54d left). (1) jnp.linalg.inv and solve of a 2x2 or 3x3 register
matrix (MG003 before): the adjugate over the determinant of its scalar elements (form_helpers.small_solve), b 1-D
or 2-D, of any float dtype; a 5x5 keeps its MG003 and hint. (2) A static NumPy call of a static NumPy call,
`np.triu(np.ones((64, 64)), 1)` written inline (the inner np.ones was MG003 as its own call): the inner one's
array is handed to the outer call, whose result grid_pattern builds; an inner array beside a register value keeps
its MG003."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- (1) linalg of 2x2 and 3x3 matrices
@mg.mgpu_kernel(out_shape=lambda a: a)
def inverse(a, o):
  o[...] = jnp.linalg.inv(a[...])


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def solve(a, b, o):
  o[...] = jnp.linalg.solve(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda m, p: S(p.shape, jnp.float32))
def unproject(m, p, o):                       # a colour / camera transform undone: inv(M) @ points
  mi = jnp.linalg.inv(m[...])
  pts = p[...].astype(jnp.float32)
  r = ml.arange(3)[:, None]
  rows = [mi[i, 0] * pts[0] + mi[i, 1] * pts[1] + mi[i, 2] * pts[2] for i in range(3)]
  o[...] = ml.where(r == 0, rows[0][None, :], ml.where(r == 1, rows[1][None, :], rows[2][None, :]))


def _well(n, seed, dt=np.float32):
  return (rnd((n, n), seed) + 2.5 * np.eye(n, dtype=np.float32)).astype(dt)


def test_inv_of_2x2_and_3x3_matches_numpy():
  for n, dt, tol in ((2, np.float32, 1e-5), (3, np.float32, 1e-5), (3, jnp.bfloat16, 3e-2)):
    a = _well(n, n, dt)
    np.testing.assert_allclose(f32(inverse(a, interpret=True)), np.linalg.inv(f32(a)), rtol=tol, atol=tol)


def test_solve_of_2x2_and_3x3_matches_numpy():
  for n, shape in ((2, (2, 32)), (3, (3,)), (3, (3, 100)), (3, (3, 8))):
    a, b = _well(n, 10 + n), rnd(shape, 20 + n)
    np.testing.assert_allclose(solve(a, b, interpret=True), np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
  m, p = _well(3, 5), rnd((3, 128), 6, jnp.bfloat16)
  np.testing.assert_allclose(unproject(m, p, interpret=True), np.linalg.inv(m) @ f32(p), rtol=1e-4, atol=1e-4)


def test_small_linalg_builds_for_cuda():
  export(inverse, _well(3, 1))
  export(solve, _well(2, 2), rnd((2, 100), 3))
  export(unproject, _well(3, 5), rnd((3, 128), 6))


def test_a_5x5_computes_padded():           # (MG003 with a padding hint before probe 56a)
  a = _well(5, 7)
  np.testing.assert_allclose(inverse(a, interpret=True), np.linalg.inv(a), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- (2) a static NumPy call of a static NumPy call
@mg.mgpu_kernel(out_shape=lambda x: x)
def strict_upper(x, o):
  o[...] = x[...] * np.triu(np.ones((64, 64)), 1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def causal_bias(x, o):
  bias = jnp.triu(jnp.full((64, 64), -1e4), 1)
  o[...] = x[...] + bias


@mg.mgpu_kernel(out_shape=lambda x: x)
def lower_keep(x, o):
  m = np.tril(np.ones((64, 128), dtype=np.float32), -2)
  o[...] = ml.where(m > 0, x[...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def ones_beside_a_value(x, o):
  o[...] = jnp.maximum(x[...], np.ones((64, 64)))


def test_nested_static_numpy_calls_build_their_grids():
  x = rnd((64, 64), 0)
  np.testing.assert_array_equal(strict_upper(x, interpret=True), x * np.triu(np.ones((64, 64), np.float32), 1))
  np.testing.assert_array_equal(causal_bias(x, interpret=True), x + np.triu(np.full((64, 64), -1e4, np.float32), 1))
  w = rnd((64, 128), 1)
  np.testing.assert_array_equal(lower_keep(w, interpret=True), np.tril(w, -2))
  export(strict_upper, x)
  export(lower_keep, w)
  expect(ones_beside_a_value, [S((64, 64), jnp.float32)], mg.KernelTypeError, "np.ones(",
         "np.ones(...) returned an array of shape (64, 64) while tracing; a kernel's tensors are built with ml.*"
         " functions", hint="write ml.full((64, 64), 1, jnp.float32)")


# ---------------------------------------------------------------- (3) jnp.kron of a small a
@mg.mgpu_kernel(out_shape=lambda a, b: S(tuple(np.multiply(a.shape, b.shape)), jnp.result_type(a.dtype, b.dtype)))
def kron(a, b, o):
  o[...] = jnp.kron(a[...], b[...])


def test_kron_of_a_small_a_is_its_scalars_times_b():
  for sa, sb, dt in (((4,), (32,), np.float32), ((3,), (128,), jnp.bfloat16), ((2, 2), (4, 32), np.float32)):
    a, b = rnd(sa, 1, dt), rnd(sb, 2, dt)
    np.testing.assert_array_equal(f32(kron(a, b, interpret=True)), f32(jnp.kron(a, b)))
  a, b = np.arange(1, 5, dtype=np.int32), np.arange(32, dtype=np.int32)
  np.testing.assert_array_equal(kron(a, b, interpret=True), np.kron(a, b))
  export(kron, rnd((4,), 1), rnd((32,), 2))


# ---------------------------------------------------------------- (4) an integer product of a few padded rows
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.int32))
def int_dot(a, b, o):
  o[...] = jnp.dot(a[...], b[...])


def test_int32_dot_of_a_few_padded_rows_matches_numpy():
  for m, k, n in ((2, 20, 16), (2, 24, 16), (3, 20, 32), (1, 20, 16)):
    g = np.random.default_rng(k + m)
    a, b = g.integers(-50, 50, (m, k)).astype(np.int32), g.integers(-50, 50, (k, n)).astype(np.int32)
    np.testing.assert_array_equal(int_dot(a, b, interpret=True), a @ b)
  export(int_dot, np.ones((2, 20), np.int32), np.ones((20, 16), np.int32))


# ---------------------------------------------------------------- (5) a static call's arguments are traced once
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def tanh_of_dot(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = jnp.tanh(ml.dot(a_s, b_s))


def test_a_jnp_call_of_a_traced_argument_traces_it_once():
  """(4)'s nested static arrays first evaluated every call argument of a jnp function raw, then again where the
  outer call took a register value: ml.dot inside jnp.tanh was two tensor-core products."""
  ir = tanh_of_dot.typed_ir(S((64, 64), jnp.float16), S((64, 64), jnp.float16))
  assert sum(" = dot " in line for line in ir.splitlines()) == 1, ir
  a, b = rnd((64, 64), 3, np.float16), rnd((64, 64), 4, np.float16)
  want = np.tanh(a.astype(np.float32) @ b.astype(np.float32))
  np.testing.assert_allclose(np.asarray(tanh_of_dot(a, b, interpret=True)), want, rtol=2e-3, atol=2e-3)
