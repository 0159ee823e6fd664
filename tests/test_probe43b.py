"""Probe 43b (known debts of numerics, control flow and matmul hints): `c ** t` of a Python number and a
float register value was exp2(t * log2(c)) (3.0 ** 5.0 gave 242.99997, jnp 243; a negative or zero base was
an error): it is XLA's pow (libdevice's powf) as jnp's, in interpret mode and on the GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32, BF16 = jnp.float16, jnp.float32, jnp.bfloat16


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text):
  with open(__file__) as f:
    line = next(line for line in f if text in line and "_line_of" not in line and "_col_of" not in line)
  return line.index(text)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _bits_equal(a, b):
  a, b = np.asarray(a).astype(np.float32), np.asarray(b).astype(np.float32)
  return np.array_equal(a, b, equal_nan=True)


# ---------------------------------------------------------------- c ** t of a Python number c
@mg.mgpu_kernel(out_shape=lambda t: t)
def powers_of_three(t, out):
  out[...] = 3.0 ** t[...]


@mg.mgpu_kernel(out_shape=lambda t: t)
def signed_powers(t, out):
  v = t[...]
  out[...] = (-2.0) ** v + 0.0 ** v + 10.0 ** v


@mg.mgpu_kernel(out_shape=lambda n: S(n.shape, F32))
def int_exponents(n, out):
  out[...] = 2.5 ** n[...] + (-1.5) ** n[...]


def _exponents(dtype):
  t = jnp.tile(jnp.arange(-4, 12, dtype=F32), 8) + jnp.repeat(jnp.array([0, .5, .25, 0, 0, 0, 0, 0], F32), 16)
  return t.at[-1].set(jnp.nan).at[-2].set(jnp.inf).at[-3].set(-jnp.inf).astype(dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_number_base_power_is_jnp_pow(dtype):
  t = _exponents(dtype)
  assert _bits_equal(powers_of_three(t, interpret=True), 3.0 ** t)          # 243 at t = 5, not 242.99997
  assert _bits_equal(signed_powers(t, interpret=True), (-2.0) ** t + 0.0 ** t + 10.0 ** t)
  assert "math.powf" in _export(powers_of_three, S(t.shape, dtype))


def test_number_base_power_of_int_exponent():
  n = jnp.arange(128, dtype=jnp.int32) % 20 - 5
  assert _bits_equal(int_exponents(n, interpret=True), 2.5 ** n + (-1.5) ** n)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_number_base_power_gpu(dtype):
  t = _exponents(dtype)
  np.testing.assert_allclose(np.asarray(powers_of_three(t)).astype(np.float32),
                             np.asarray(3.0 ** t).astype(np.float32), rtol=2e-7 if dtype == F32 else 1e-3)
  np.testing.assert_allclose(np.asarray(signed_powers(t)).astype(np.float32),
                             np.asarray((-2.0) ** t + 0.0 ** t + 10.0 ** t).astype(np.float32),
                             rtol=2e-7 if dtype == F32 else 1e-3)
  n = jnp.arange(128, dtype=jnp.int32) % 20 - 5
  np.testing.assert_allclose(np.asarray(int_exponents(n)), np.asarray(2.5 ** n + (-1.5) ** n), rtol=2e-7)
