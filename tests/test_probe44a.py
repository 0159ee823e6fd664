"""Probe 44a (row statistics of 3-D and 4-D tiles, as softmax, layer norm and attention users write them): two
statistics over a middle run of axes of a 4-D tile meeting each other (ml.logsumexp(v, axis=(1, 2)): its max and
its log-sum) go through SMEM as one alone does (it was MG204 naming the internal (2, 1, 1, 64) statistic)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text, sub):
  with open(__file__) as f:
    return f.read().splitlines()[_line_of(text) - 1].index(sub)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _close(got, want, tol=1e-5):
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


# ---------------------------------------------------------------- statistics over a middle run of a 4-D tile, meeting
@mg.mgpu_kernel(out_shape=lambda x: (S((2, 64), F32), S((2, 1, 1, 64), F32), x, x), grid=(1,))
def middle_run_lse(x, a, b, c, d):
  v = x[...]                                    # (2, 2, 8, 64) over axes (1, 2): (2, 64) kept
  a[...] = ml.logsumexp(v, axis=(1, 2))
  b[...] = ml.logsumexp(v, axis=(1, 2), keepdims=True)
  c[...] = v - ml.logsumexp(v, axis=(1, 2), keepdims=True)
  m = ml.max(v, axis=(1, 2), keepdims=True)
  d[...] = ml.exp(v - m) / ml.sum(ml.exp(v - m), axis=(1, 2), keepdims=True) + m


def _middle_run_lse_want(x):
  m = jnp.max(x, (1, 2), keepdims=True)
  return (jax.nn.logsumexp(x, (1, 2)), jax.nn.logsumexp(x, (1, 2), keepdims=True),
          x - jax.nn.logsumexp(x, (1, 2), keepdims=True), jnp.exp(x - m) / jnp.sum(jnp.exp(x - m), (1, 2), keepdims=True) + m)


def test_statistics_over_a_middle_run_of_a_4d_tile_meet_each_other():
  """Each was MG204 'fn(v, axis=(1, 2)) of shape (2, 1, 1, 64) meets a row-wise tile': the second statistic's size-1
  axes (inserted into, or removed from, the 4-D tensor) joined the first one's tile, and the relayout pass sent
  only a reshape made by the culprit itself through SMEM."""
  x = _rand((2, 2, 8, 64), 1)
  _close(middle_run_lse(x, interpret=True), _middle_run_lse_want(x))
  assert "@mosaic_gpu" in _export(middle_run_lse, S(x.shape, F32))
