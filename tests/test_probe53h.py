"""Probe 53h: elementwise edge semantics that must match jnp bit for bit.

1. jnp's functions of two operands one of which is a Python number (`jnp.copysign(1.0, v)`, `jnp.copysign(v, -1.0)`,
   `jnp.hypot(v, 3.0)`, `jnp.heaviside(0.5, v)`, `jnp.isclose(v, 1.0)`, `jnp.ldexp(1.5, n)`) were MG003: their forms
   computed on register values only. The number is now a tensor of the register operand's shape and float dtype.
2. `x ** 0.5` was ml.sqrt, -0.0 at -0.0 and NaN at -inf, where jnp's pow gives 0.0 and inf; and interpret mode's
   `jnp.power(x, 0.5)` (powf on the GPU) took NumPy's sqrt fast path, with the same two edges.

Inputs keep subnormals out: jnp on the CPU flushes them, the GPU (and interpret mode) keeps them.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
FLOATS = [jnp.float32, jnp.float16, jnp.bfloat16]
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, np.nan, -np.nan, np.inf, -np.inf, 1e-7, -1e-7, 3.0, -3.0,
         100.0, -100.0, 1.5, -1.5]


def edge_input(dt, n=256, seed=0):
  x = np.random.default_rng(seed).normal(size=n).astype(np.float32) * 4
  x[:len(EDGES)] = EDGES
  x[1::37] = -0.0
  return jnp.asarray(x).astype(dt)


def same(got, want):
  """Equal elementwise with the sign of zeros, NaN matching NaN."""
  g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
  bad = ~(((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w)))
  assert not bad.any(), f"differ at {np.flatnonzero(bad)[:8]}: got {g[bad][:8]}, want {w[bad][:8]}"


def close_or_same(got, want, rtol):
  """Equal where either is non-finite or zero (with the sign of zeros), else within `rtol`."""
  g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
  edge = ~np.isfinite(w) | (w == 0)
  same(g[edge], w[edge])
  np.testing.assert_allclose(g[~edge], w[~edge], rtol=rtol)


# ------------------------------------------------------------------ 1. Python numbers beside register values
def _like(a):
  return S(a.shape, a.dtype)


@mg.mgpu_kernel(out_shape=lambda x: (_like(x),) * 6)
def copysigns(x, o1, o2, o3, o4, o5, o6):
  v = x[...]
  o1[...] = jnp.copysign(1.0, v)          # the sign of v on 1.0
  o2[...] = jnp.copysign(v, -1.0)         # -|v|
  o3[...] = jnp.copysign(v, -0.0)         # -0.0 has a sign
  o4[...] = jnp.copysign(2, v)            # a Python int: weakly typed, v's float dtype
  o5[...] = jnp.copysign(v, 0.0)
  o6[...] = jnp.copysign(v[0], 1.5) + jnp.copysign(-2.5, v)    # a scalar, then a number first


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: jnp.dtype(d).name)
def test_copysign_of_a_python_number_as_jnp(dt):
  x = edge_input(dt)
  got = copysigns(x, interpret=True)
  want = (jnp.copysign(1.0, x), jnp.copysign(x, -1.0), jnp.copysign(x, -0.0), jnp.copysign(2, x),
          jnp.copysign(x, 0.0), jnp.copysign(x[0], 1.5) + jnp.copysign(-2.5, x))
  for g, w in zip(got, want):
    assert g.dtype == w.dtype
    same(g, w)


@mg.mgpu_kernel(out_shape=lambda x, n: (_like(x), _like(x), S(x.shape, jnp.bool_), S(x.shape, jnp.bool_),
                                        S(n.shape, jnp.float32), S(n.shape, jnp.float32)))
def number_pairs(x, n, hy, hv, c1, c2, ld, cs):
  v = x[...]
  hy[...] = jnp.hypot(v, 3.0)
  hv[...] = jnp.heaviside(0.5, v) + jnp.heaviside(v, 0.25)
  c1[...] = jnp.isclose(v, 1.0)
  c2[...] = jnp.isclose(-3.0, v, rtol=0.1, atol=0.5)
  ld[...] = jnp.ldexp(1.5, n[...] % 12 - 6)        # float32, as jnp's promote_args_inexact
  cs[...] = jnp.copysign(n[...], -1)               # an int tensor: float32 first


@pytest.mark.filterwarnings("ignore::mgpu_dsl.PrecisionWarning")     # (isclose's atol 1e-8 in float16)
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: jnp.dtype(d).name)
def test_hypot_heaviside_isclose_ldexp_of_a_python_number_as_jnp(dt):
  x = edge_input(dt, seed=1)
  n = jnp.asarray(np.random.default_rng(2).integers(-50, 50, 256), jnp.int32)
  hy, hv, c1, c2, ld, cs = number_pairs(x, n, interpret=True)
  # (hypot: jax's formula, whose division and square root jnp on the CPU may round an ulp apart)
  close_or_same(hy, jnp.hypot(x, 3.0), rtol=1e-6 if dt == jnp.float32 else 8e-3)
  assert hy.dtype == dt and hv.dtype == dt
  same(hv, jnp.heaviside(0.5, x) + jnp.heaviside(x, 0.25))
  np.testing.assert_array_equal(c1, jnp.isclose(x, 1.0))
  np.testing.assert_array_equal(c2, jnp.isclose(-3.0, x, rtol=0.1, atol=0.5))
  same(ld, jnp.ldexp(1.5, n % 12 - 6))
  same(cs, jnp.copysign(n, -1))


# ------------------------------------------------------------------ 2. x ** 0.5 at -0.0 and -inf
@mg.mgpu_kernel(out_shape=lambda x: (_like(x),) * 4)
def half_powers(x, o1, o2, o3, o4):
  v = x[...]
  o1[...] = v ** 0.5
  o2[...] = jnp.power(v, 0.5)
  o3[...] = lax.pow(v, 0.5)
  o4[...] = jnp.sqrt(v)                  # (sqrt keeps -0.0, as jnp.sqrt)


@mg.mgpu_kernel(out_shape=lambda x: S((16,), x.dtype))
def half_powers_s(x, out):
  for i in ml.static_range(16):
    out[i] = x[i] ** 0.5


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: jnp.dtype(d).name)
def test_power_one_half_at_minus_zero_and_minus_inf_as_jnp(dt):
  x = edge_input(dt, seed=3)
  p1, p2, p3, sq = half_powers(x, interpret=True)
  want = x ** 0.5
  assert np.asarray(want.astype(jnp.float32))[1] == 0 and not np.signbit(np.asarray(want.astype(jnp.float32))[1])
  for g in (p1, p2, p3):
    assert g.dtype == dt
    close_or_same(g, want, rtol=1e-6 if dt == jnp.float32 else 8e-3)
  same(sq, jnp.sqrt(x))
  same(half_powers_s(x, interpret=True), x[:16] ** 0.5)


# ------------------------------------------------------------------ GPU: the same kernels on the H200
def _gpu(k, *args):
  return jax.jit(lambda *a: k(*a))(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: jnp.dtype(d).name)
def test_gpu_number_operands_as_jnp(dt):
  x = edge_input(dt)
  for g, i in zip(_gpu(copysigns, x), copysigns(x, interpret=True)):
    same(g, i)
  x = edge_input(dt, seed=1)
  n = jnp.asarray(np.random.default_rng(2).integers(-50, 50, 256), jnp.int32)
  got, ref = _gpu(number_pairs, x, n), number_pairs(x, n, interpret=True)
  close_or_same(got[0], ref[0], rtol=1e-6 if dt == jnp.float32 else 8e-3)
  for g, i in zip(got[1:], ref[1:]):
    same(g, i)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: jnp.dtype(d).name)
def test_gpu_power_one_half_as_jnp(dt):
  x = edge_input(dt, seed=3)
  want = np.asarray(x.astype(jnp.float32)) ** np.float32(0.5)   # (NumPy's power of a float32 array by a scalar: sqrt)
  xs = np.asarray(x.astype(jnp.float32))
  want = np.where(xs == -np.inf, np.inf, np.where(xs == 0, 0.0, want)).astype(np.float32)
  for g in _gpu(half_powers, x)[:3]:
    close_or_same(np.asarray(g.astype(jnp.float32)), jnp.asarray(want).astype(dt).astype(jnp.float32),
                  rtol=1e-6 if dt == jnp.float32 else 8e-3)
  close_or_same(np.asarray(_gpu(half_powers_s, x).astype(jnp.float32)),
                jnp.asarray(want[:16]).astype(dt).astype(jnp.float32), rtol=1e-6 if dt == jnp.float32 else 8e-3)


@pytest.mark.filterwarnings("ignore::mgpu_dsl.PrecisionWarning")
def test_the_kernels_build_for_cuda():
  from probe_util import export
  x = np.zeros(256, jnp.bfloat16)
  export(copysigns, x)
  export(number_pairs, x, np.zeros(256, np.int32))
  export(half_powers, x)
  export(half_powers_s, np.zeros(256, np.float32))


# ------------------------------------------------------------------ 3. jnp.round(x, decimals) as XLA computes it
@mg.mgpu_kernel(out_shape=lambda x: (_like(x),) * 4)
def round_decimals(x, o2, o3, o1, om1):
  v = x[...]
  o2[...] = jnp.round(v, 2)
  o3[...] = jnp.round(v, decimals=3)
  o1[...] = v.round(1)
  om1[...] = jnp.round(v, -1)


@mg.mgpu_kernel(out_shape=lambda x: S((16,), x.dtype))
def round_decimals_s(x, out):
  for i in ml.static_range(16):
    out[i] = jnp.round(x[i], 2)


def test_round_to_decimals_is_jnps_bit_for_bit():
  """jnp's division by 10**n is XLA's product by the float32 reciprocal (the quotient was an ulp away in about a
  fifth of the values: jnp.round(-1.19, 2) is -1.1899999 in jnp, was -1.19)."""
  x = jnp.asarray(np.random.default_rng(5).normal(size=256).astype(np.float32) * 30)
  for g, n in zip(round_decimals(x, interpret=True), (2, 3, 1, -1)):
    same(g, jnp.round(x, n))
  same(round_decimals_s(x, interpret=True), jnp.round(x[:16], 2))


@pytest.mark.gpu
def test_gpu_round_to_decimals_as_jnp():
  x = jnp.asarray(np.random.default_rng(5).normal(size=256).astype(np.float32) * 30)
  for g, n in zip(_gpu(round_decimals, x), (2, 3, 1, -1)):
    same(g, jnp.round(x, n))      # (jnp computed on the CPU: XLA's product there and on the GPU)
  same(_gpu(round_decimals_s, x), jnp.round(x[:16], 2))


# ------------------------------------------------------------------ 4. x / c as jnp's product by the reciprocal
@mg.mgpu_kernel(out_shape=lambda x: (_like(x),) * 5)
def by_constants(x, o1, o2, o3, o4, o5, *, c: ml.constexpr = 10.0):
  v = x[...]
  o1[...] = v / 3.0
  o2[...] = jnp.divide(v, 7)
  o3[...] = v / c
  o4[...] = jnp.true_divide(v, 0.1)
  o5[...] = (v * 2.0 + 1.0) / 1.7         # (no sum of products: the GPU would fuse one into an fma)


@mg.mgpu_kernel(out_shape=lambda x: S((16,), x.dtype))
def by_constants_s(x, out):
  for i in ml.static_range(16):
    out[i] = x[i] / 3.0


def _by_constants_ref(x, c=10.0):
  return (x / 3.0, jnp.divide(x, 7), x / c, jnp.true_divide(x, 0.1), (x * 2.0 + 1.0) / 1.7)


@pytest.mark.parametrize("dt", [jnp.float32, jnp.float16], ids=lambda d: jnp.dtype(d).name)
def test_division_by_a_number_is_jnps_bit_for_bit(dt):
  """jnp's x / 3.0 is XLA's x * float32(1 / 3) (an ulp off the quotient in a third of the values; float16's by the
  float16 reciprocal); the kernel's was the quotient (bfloat16, which XLA widens first, keeps it)."""
  x = edge_input(dt, seed=6)
  for g, w in zip(by_constants(x, interpret=True), _by_constants_ref(x)):
    assert g.dtype == w.dtype
    same(g, w)
  for g, w in zip(by_constants(x, c=0.3, interpret=True), _by_constants_ref(x, c=0.3)):
    same(g, w)
  same(by_constants_s(x, interpret=True), x[:16] / 3.0)


def test_division_by_a_number_lowers_to_a_product():
  text = by_constants_s.mlir(S((256,), jnp.float32))
  assert "arith.mulf" in text and "arith.divf" not in text


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [jnp.float32, jnp.float16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_division_by_a_number_as_jnp(dt):
  x = edge_input(dt, seed=6)
  # (jnp under jax.jit, where XLA rewrites x / c to the product by the reciprocal in the dtype on the GPU as on the
  # CPU; eagerly on the GPU, float16's c is an operand and the quotient is IEEE's: session 44's H100,
  # docs/logs/div_const_session44_h100.log. Session 43 took the eager quotient for the GPU's rule.)
  for g, w in zip(_gpu(by_constants, x), jax.jit(_by_constants_ref)(x)):
    same(g, w)
  same(_gpu(by_constants_s, x), jax.jit(lambda v: v / 3.0)(x[:16]))
