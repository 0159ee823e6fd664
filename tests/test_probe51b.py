"""Probe 51b (ops users expect that were still MG003 or off jnp's numbers): jax.nn's activations of float16 and
bfloat16 (silu, hard_swish, softplus, mish, selu, soft_sign, squareplus) and jnp.log10 computed in float32 and
rounded once, their constants rounded to the dtype as jax's are (XLA on the GPU; each step was rounded to 16 bits:
silu(bf16) was off by an ulp in a third of the elements, log10 computed log(x) / ln 10, not jax's log(x) * 1/ln 10),
and jnp.gcd / jnp.lcm of integer tiles (were MG003) as a fixed number of Euclid steps (Lame's bound for the dtype)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml  # noqa: F401

S = jax.ShapeDtypeStruct
BF, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32


def _specs(*arrays):
  return [S(a.shape, a.dtype) for a in arrays]


def _export(kernel, *arrays):
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*_specs(*arrays))


# ---------------------------------------------------------------- 16-bit activations: in float32, rounded once
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype),) * 8)
def activations(x_ref, silu, hswish, softplus, mish, selu, softsign, squareplus, log10):
  x = x_ref[...]
  silu[...] = jax.nn.silu(x)
  hswish[...] = jax.nn.hard_swish(x)
  softplus[...] = jax.nn.softplus(x)
  mish[...] = jax.nn.mish(x)
  selu[...] = jax.nn.selu(x)
  softsign[...] = jax.nn.soft_sign(x)
  squareplus[...] = jax.nn.squareplus(x)
  log10[...] = jnp.log10(jnp.abs(x))


def _once(x):
  """The functions of x in float32, each constant of jax's definitions rounded to x's dtype, rounded once."""
  c = lambda v: np.float32(np.asarray(v, x.dtype))
  v = np.asarray(x, np.float32)
  fs = (jax.nn.silu, jax.nn.hard_swish, jax.nn.softplus, jax.nn.mish,
        lambda v: c(1.0507009873554805) * jnp.where(v > 0, v, c(1.6732632423543772) * jnp.expm1(v)),
        jax.nn.soft_sign, jax.nn.squareplus,
        lambda v: jnp.log(jnp.abs(v)) * c(0.4342944819032518))
  return [np.asarray(jax.jit(f)(v)).astype(x.dtype) for f in fs]


def _x(dtype, seed, n=1024):
  x = (np.random.default_rng(seed).standard_normal(n) * 4).astype(dtype)
  x[:6] = [0, -0, -3, 3, -20, 9]
  return x


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_16_bit_activations_compute_in_float32_and_round_once(dtype):
  x = _x(dtype, 1)
  for n, (got, want) in enumerate(zip(activations(x, interpret=True), _once(x))):
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32), err_msg=str(n))
  _export(activations, x)


def test_float32_log10_is_jaxs_product():
  x = np.random.default_rng(2).uniform(0.01, 1e4, 1024).astype(np.float32)
  x[:4] = [10, 100, 1000, 1e-3]
  got = activations(x, interpret=True)[7]
  np.testing.assert_array_equal(got, np.log(x) * np.float32(0.4342944819032518))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_16_bit_activations_on_the_gpu_are_xlas(dtype):
  x = _x(dtype, 3, 4096)
  wants = jax.jit(lambda v: (jax.nn.silu(v), jax.nn.hard_swish(v), jax.nn.softplus(v), jax.nn.mish(v),
                             jax.nn.selu(v), jax.nn.soft_sign(v), jax.nn.squareplus(v),
                             jnp.log10(jnp.abs(v))))(jnp.asarray(x))
  eps = float(jnp.finfo(dtype).eps)
  for n, (got, want) in enumerate(zip(activations(x), wants)):     # (XLA's libdevice against ours: an ulp at most)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=eps, atol=eps / 64,
                               err_msg=str(n))


# ---------------------------------------------------------------- jnp.gcd / jnp.lcm: Euclid's steps, unrolled
@mg.mgpu_kernel(out_shape=lambda x, y: (S(x.shape, x.dtype),) * 3)
def gcd_lcm(x_ref, y_ref, g, l, g12):
  x, y = x_ref[...], y_ref[...]
  g[...] = jnp.gcd(x, y)
  l[...] = jnp.lcm(x, y)
  g12[...] = jnp.gcd(x, 12)


def _pairs(dtype, seed, n=512):
  info = np.iinfo(dtype)
  rng = np.random.default_rng(seed)
  x, y = (rng.integers(max(info.min + 1, -2 ** 31), info.max, n, dtype=np.int64).astype(dtype) for _ in range(2))
  x[:4], y[:4] = [0, 0, 5, 1], [0, 7, 0, 1]
  big = {np.int32: (1836311903, 1134903170), np.int8: (89, 55), np.uint8: (233, 144), np.int16: (28657, 17711)}
  x[4], y[4] = big[dtype]       # (consecutive Fibonacci numbers: the most steps Euclid takes in the dtype)
  x[64:], y[64:] = x[64:] // 7 * 6, y[64:] // 7 * 4        # (common factors)
  return x, y


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int16])
def test_gcd_and_lcm_are_jnps(dtype):
  x, y = _pairs(dtype, 4)
  g, l, g12 = gcd_lcm(x, y, interpret=True)
  np.testing.assert_array_equal(g, np.gcd(x, y))
  np.testing.assert_array_equal(l, jnp.lcm(x, y))          # (jnp's wraps as numpy's does)
  np.testing.assert_array_equal(g12, np.gcd(x, dtype(12)))
  assert g.dtype == x.dtype
  if dtype in (np.int32, np.int8):
    _export(gcd_lcm, x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_gcd_and_lcm_on_the_gpu(dtype):
  x, y = _pairs(dtype, 5, 2048)
  for got, want in zip(gcd_lcm(x, y), gcd_lcm(x, y, interpret=True)):
    np.testing.assert_array_equal(got, want)
