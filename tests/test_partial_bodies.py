"""functools.partial of a helper over refs or register values, Pallas's way of handing a jax.lax body its refs
(`lax.fori_loop(0, n, functools.partial(body, x_ref=x_ref), init)`): the partial is a Python value holding them,
unwrapped where it is called (it was MG003 "partial cannot take a GMEM ref inside a kernel", probe 52f's leftover)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from locate import expect
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def add_row(j, acc, x_ref):
  return acc + x_ref[j]


@ml.inline
def add_scaled_row(j, acc, x_ref, scale):
  return acc + x_ref[j] * scale


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def fori_partial(x_ref, o_ref):
  o_ref[...] = lax.fori_loop(0, x_ref.shape[0], functools.partial(add_row, x_ref=x_ref),
                             jnp.zeros((x_ref.shape[1],), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def fori_partial_inline(x_ref, o_ref):
  w = x_ref[0] * 0 + 2.0                           # a register value bound too
  body = functools.partial(add_scaled_row, x_ref=x_ref, scale=w)
  o_ref[...] = lax.fori_loop(0, x_ref.shape[0], body, jnp.zeros((x_ref.shape[1],), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def partial_called(x_ref, o_ref):
  step = functools.partial(add_row, x_ref=x_ref)
  acc = ml.zeros((x_ref.shape[1],), jnp.float32)
  for j in range(x_ref.shape[0]):
    acc = step(j, acc)
  o_ref[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def partial_of_a_builtin(x_ref, o_ref):
  v = x_ref[...]
  clip_low = functools.partial(ml.maximum, v)      # a builtin bound to a register value
  o_ref[...] = clip_low(0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def partial_of_a_ref(x_ref, o_ref):
  f = functools.partial(x_ref, 0)                  # a ref is no function: the call's error, at this line
  o_ref[...] = f()


def _x(seed=0):
  return np.random.default_rng(seed).standard_normal((8, 128)).astype(np.float32)


CASES = [(fori_partial, lambda x: x.sum(0)), (fori_partial_inline, lambda x: 2 * x.sum(0)),
         (partial_called, lambda x: x.sum(0)), (partial_of_a_builtin, lambda x: np.maximum(x, 0.0))]


@pytest.mark.parametrize("k, want", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_partials_holding_refs_and_values_compute(k, want):
  x = _x()
  np.testing.assert_allclose(np.asarray(k(x, interpret=True)), want(x), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in jax.export.export(jax.jit(k), platforms=["cuda"])(S(x.shape, jnp.float32)).mlir_module()


def test_a_partial_of_a_ref_is_still_an_error_at_its_line():
  e = expect(partial_of_a_ref, [S((8, 128), jnp.float32)], mg.KernelTypeError, "functools.partial(x_ref, 0)",
             "partial cannot take a GMEM ref inside a kernel")
  assert e.hint


@pytest.mark.gpu
@pytest.mark.parametrize("k, want", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_gpu_partials_match_numpy(k, want):
  x = _x(1)
  np.testing.assert_allclose(np.asarray(jax.jit(k)(jnp.asarray(x))), want(x), rtol=1e-5, atol=1e-5)
