"""Probe 51n: constant tables and int64 sorts in kernels. `jnp.array([1.0, 2.0, 4.0])`, `jnp.asarray(...)` and
`np.array(...)` of Python numbers built in a kernel (polynomial coefficients, bin edges, the values of jnp.isin, the
knots of jnp.interp) were MG003 ("returned an array of shape (3,) while tracing"): they are register vectors in jnp's
dtype now, and jnp.polyval, jnp.isin and jnp.interp (MG003 of any register operand) take them; jnp.sort, jnp.argsort
and ml.sort of int64 under jax_enable_x64 (MG106) sort the two 32-bit words as a pair of keys."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, BF = jnp.float32, jnp.bfloat16
COEFFS = [0.25, -1.5, 2.0, 0.125, 1.0]
EDGES = [-1.0, -0.25, 0.0, 0.5, 1.5]
XP, FP = [-2.0, -0.5, 0.0, 0.0, 1.0, 2.5], [1.0, 0.5, -1.0, 2.0, 3.0, -0.5]


def _specs(*arrays):
  return [S(a.shape, a.dtype) for a in arrays]


def _export(kernel, *arrays):
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*_specs(*arrays))


def _x(shape, dtype=np.float32, seed=0):
  x = (np.random.default_rng(seed).standard_normal(shape) * 1.5).astype(dtype)
  x.flat[:8] = [-3.0, 0.0, 0.5, 1.5, 3.0, -0.25, -0.0, np.nan]     # (outside the knots, on them, NaN)
  return x


# ---------------------------------------------------------------- tables of constants, in the functions of them
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S(x.shape, jnp.bool_), S(x.shape, jnp.int32),
                                     S(x.shape, jnp.int32), S(x.shape, F32), S(x.shape, jnp.bool_)))
def tables(x_ref, pv, hit, dig, ss, itp, miss):
  x = x_ref[...]
  pv[...] = jnp.polyval(jnp.array(COEFFS), x)
  hit[...] = jnp.isin(jnp.round(x * 2), jnp.array([-1.0, 1.0, 3.0]))
  dig[...] = jnp.digitize(x, np.array(EDGES))
  ss[...] = jnp.searchsorted(jnp.asarray(EDGES), x, side="left") + jnp.digitize(x, np.array(EDGES[::-1]), right=True)
  itp[...] = jnp.interp(x, jnp.array(XP), jnp.array(FP))
  miss[...] = jnp.isin(jnp.where(jnp.isnan(x), 0, x * 2).astype(jnp.int32), np.array([0, 2, -3, 2]), invert=True)


def _tables_of(x):
  e = jnp.array(EDGES)
  return (jnp.polyval(jnp.array(COEFFS), x), jnp.isin(jnp.round(x * 2), jnp.array([-1.0, 1.0, 3.0])),
          jnp.digitize(x, e), jnp.searchsorted(e, x, side="left") + jnp.digitize(x, e[::-1], right=True),
          jnp.interp(x, jnp.array(XP), jnp.array(FP)),
          jnp.isin(jnp.where(jnp.isnan(x), 0, x * 2).astype(jnp.int32), jnp.array([0, 2, -3, 2]), invert=True))


def _same(got, want):
  for g, w in zip(got, want):
    assert np.asarray(g).dtype == np.asarray(w).dtype
    if np.asarray(w).dtype.kind == "f":
      np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=1e-5, atol=1e-5)
    else:
      np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("shape,dtype", [((256,), np.float32), ((16, 128), np.float32),
                                         ((256,), ml_dtypes.bfloat16)])
def test_constant_tables_in_polyval_isin_digitize_searchsorted_interp(shape, dtype):
  x = _x(shape, dtype)
  _same(tables(x, interpret=True), _tables_of(x))
  if dtype == np.float32 and len(shape) == 1:
    _export(tables, x)


# ---------------------------------------------------------------- the user's own loops over a table
@mg.mgpu_kernel(out_shape=lambda x, t: (S(x.shape, x.dtype),) * 3 + (S(t.shape, jnp.float32), S(t.shape, t.dtype)))
def own_loops(x_ref, t_ref, a, b, c, d, e):
  x = x_ref[...]
  coeffs = jnp.array(COEFFS)
  y = jnp.zeros_like(x)
  for cf in coeffs:                  # Horner's rule over the table's numbers
    y = y * x + cf
  a[...] = y
  z = jnp.zeros_like(x)
  for k in range(len(COEFFS)):       # ... or its elements by index
    z = z * x + coeffs[k]
  b[...] = z
  c[...] = x * jnp.sum(coeffs) + coeffs[-1]
  lut = jnp.array([0.0, 0.5, 0.25, 2.0, 1.0, -1.0, 3.0, 4.0, 8.0, 9.0, 1e30, -0.0])
  d[...] = lut[t_ref[...]] + jnp.convolve(   # (a lookup at run-time indices, a filter's taps)
      lut[t_ref[...]], jnp.array([0.25, 0.5, 0.125, 0.125]), mode="same")
  e[...] = jnp.polyval(jnp.array([1, -2, 3]), t_ref[...])       # (of ints, int32 as jnp's)


def test_loops_and_lookups_over_a_constant_table():
  x = _x((256,))
  t = np.random.default_rng(3).integers(0, 12, 128).astype(np.int32)
  lut = np.array([0.0, 0.5, 0.25, 2.0, 1.0, -1.0, 3.0, 4.0, 8.0, 9.0, 1e30, -0.0], np.float32)
  c = jnp.array(COEFFS)
  _same(own_loops(x, t, interpret=True),
        (jnp.polyval(c, x), jnp.polyval(c, x), x * jnp.sum(c) + c[-1],
         lut[t] + np.convolve(lut[t], [0.25, 0.5, 0.125, 0.125], mode="same").astype(np.float32),
         jnp.polyval(jnp.array([1, -2, 3]), t)))
  _export(own_loops, x, t)


# ---------------------------------------------------------------- jnp.interp's ends, and tables of any length
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype),) * 3)
def interp_ends(x_ref, a, b, c):
  x = x_ref[...]
  xp, fp = jnp.array([-1.0, 0.0, 1.0]), jnp.array([1.0, 2.0, -1.0])
  a[...] = jnp.interp(x, xp, fp, left=0.0, right=5)
  b[...] = jnp.interp(x, xp, fp, left="extrapolate", right="extrapolate")
  knots = ml.arange(3).astype(jnp.float32) - 1.0            # a run-time table of 3 (a padded trace's vector)
  c[...] = jnp.interp(x, knots, knots * knots) + jnp.polyval(knots, x) + jnp.isin(x, knots).astype(jnp.float32)


def test_interp_ends_and_a_register_table_of_odd_length():
  x = _x((256,))
  xp, fp = jnp.array([-1.0, 0.0, 1.0]), jnp.array([1.0, 2.0, -1.0])
  k = jnp.arange(3.0) - 1.0
  _same(interp_ends(x, interpret=True),
        (jnp.interp(x, xp, fp, left=0.0, right=5), jnp.interp(x, xp, fp, left="extrapolate", right="extrapolate"),
         jnp.interp(x, k, k * k) + jnp.polyval(k, x) + jnp.isin(x, k).astype(jnp.float32)))
  _export(interp_ends, x)


# ---------------------------------------------------------------- what stays an error
@mg.mgpu_kernel(out_shape=lambda x: x)
def vector_table(x_ref, o_ref):
  w = np.array([1.0, 2.0, 4.0])
  o_ref[...] = x_ref[...] * jnp.sum(w) + w[-1]


@mg.mgpu_kernel(out_shape=lambda x: x)
def matrix_table(x_ref, o_ref):
  w = jnp.array([[1.0, 2.0], [3.0, 4.0]])
  o_ref[...] = x_ref[...] * w[0, 1]


def test_a_1d_table_becomes_a_vector_and_a_2d_one_keeps_its_mg003():
  x = _x((256,))
  np.testing.assert_array_equal(vector_table(x, interpret=True), x * np.float32(7.0) + np.float32(4.0))
  # (since probe 53b a 2-D table is a register tile of its numbers too)
  np.testing.assert_array_equal(matrix_table(x, interpret=True), x * np.float32(2.0))


# ---------------------------------------------------------------- int64 sorts under jax_enable_x64 (were MG106)
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype), S(x.shape, jnp.int64), S(x.shape, x.dtype),
                                     S(x.shape, jnp.int64), S(x.shape, x.dtype)))
def int64_sorts(x_ref, a, b, c, d, e):
  x = x_ref[...]
  a[...] = jnp.sort(x)
  b[...] = jnp.argsort(x)
  c[...] = jnp.sort(x, descending=True)
  d[...] = jnp.argsort(x, descending=True)
  e[...] = ml.sort(x, axis=-1)


def _int64s(shape, seed, ties=False):
  r = np.random.default_rng(seed)
  x = (r.integers(-3, 3, shape) * 2 ** 32 + r.integers(0, 3, shape) if ties else
       r.integers(-2 ** 40, 2 ** 40, shape)).astype(np.int64)
  x.flat[:6] = [2 ** 63 - 1, -2 ** 63, 0, -1, 2 ** 32, 2 ** 32 - 1]       # (words' signs and carries)
  return x


def _int64_sorts_of(x):
  return (np.sort(x, -1), np.argsort(x, -1, kind="stable"), jnp.sort(x, descending=True),
          jnp.argsort(x, descending=True), np.sort(x, -1))


@pytest.mark.parametrize("shape,ties", [((256,), False), ((100,), True), ((8, 40), True), ((4, 128), False)])
def test_int64_sorts_under_x64(shape, ties):
  x = _int64s(shape, 1, ties)
  with jax.enable_x64(True):
    for got, want in zip(int64_sorts(x, interpret=True), _int64_sorts_of(x)):
      assert got.dtype == np.int64
      np.testing.assert_array_equal(got, want)
    if shape == (100,):
      _export(int64_sorts, x)


@mg.mgpu_kernel(out_shape=lambda k, v: (S(k.shape, k.dtype), S(v.shape, v.dtype)))
def int64_key_val(k_ref, v_ref, ko, vo):
  ko[...], vo[...] = jax.lax.sort_key_val(k_ref[...], v_ref[...])


def test_int64_keys_carry_values():
  k, v = _int64s((256,), 2, ties=True), _x((256,))
  with jax.enable_x64(True):
    got = int64_key_val(k, v, interpret=True)
    for g, w in zip(got, jax.lax.sort_key_val(k, v)):
      np.testing.assert_array_equal(g, w)
    _export(int64_key_val, k, v)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_tables_and_int64_sorts_on_the_gpu():
  x = _x((16, 128))
  _same(tables(x), _tables_of(x))
  x1 = _x((256,))
  t = np.random.default_rng(3).integers(0, 12, 128).astype(np.int32)
  _same(own_loops(x1, t), own_loops(x1, t, interpret=True))
  _same(interp_ends(x1), interp_ends(x1, interpret=True))
  with jax.enable_x64(True):
    for shape in ((256,), (100,), (8, 40)):
      x = _int64s(shape, 4, ties=True)
      for got, want in zip(int64_sorts(x), _int64_sorts_of(x)):
        np.testing.assert_array_equal(np.asarray(got), want)
    k, v = _int64s((256,), 5, ties=True), _x((256,))
    for g, w in zip(int64_key_val(k, v), jax.lax.sort_key_val(k, v)):
      np.testing.assert_array_equal(np.asarray(g), w)
