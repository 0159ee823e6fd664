"""Probe 38g (a user's kernels around seven known gaps): number masks as jnp's truth, keyword
inputs at the call, lambdas in a kernel body, keepdims reductions of 3-D tiles, returns under a
run-time condition in a helper's loop, split-K accumulation into an output."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- number masks are their truth, as jnp's
@mg.mgpu_kernel(out_shape=lambda x, m: (x, x, S((x.shape[0],), x.dtype), S((x.shape[0],), x.dtype)), grid=(1,))
def masked_row_stats(x, m, sm, lsm, lse, total):
  """An attention mask stored as int8/int32/float (1 keep, 0 drop), used as jnp would use it."""
  v, keep = x[...], m[...]
  sm[...] = ml.softmax(v, axis=1, where=keep)
  lsm[...] = ml.log_softmax(v, axis=1, where=keep)
  lse[...] = ml.logsumexp(v, axis=1, where=keep)
  total[...] = ml.sum(ml.where(keep, v, 0.0), axis=1)


@pytest.mark.parametrize("mdtype", [jnp.int32, jnp.int8, jnp.uint8, F32])
def test_number_masks_select_where_non_zero_as_jnp(mdtype):
  """ml.where(m, ...) and where=m of an int or float mask were MG003 (must be a boolean): jnp and
  jax.nn treat a number mask as its truth (non-zero keeps), and so does tl.where."""
  x = _rand((64, 128), 0)
  m = jnp.asarray(np.random.default_rng(1).integers(0, 3, (64, 128)), mdtype).at[:, 0].set(2)
  got = masked_row_stats(x, m, interpret=True)
  b = m != 0
  want = (jax.nn.softmax(x, axis=1, where=b), jax.nn.log_softmax(x, axis=1, where=b),
          jax.nn.logsumexp(x, axis=1, where=b), jnp.sum(x, axis=1, where=b))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  _export(masked_row_stats, S(x.shape, x.dtype), S(m.shape, m.dtype))


@pytest.mark.gpu
def test_gpu_number_masks_select_where_non_zero_as_jnp():
  x = _rand((64, 128), 2)
  m = jnp.asarray(np.random.default_rng(3).integers(0, 3, (64, 128)), jnp.int8).at[:, 0].set(1)
  got = jax.jit(masked_row_stats)(x, m)
  b = m != 0
  want = (jax.nn.softmax(x, axis=1, where=b), jax.nn.log_softmax(x, axis=1, where=b),
          jax.nn.logsumexp(x, axis=1, where=b), jnp.sum(x, axis=1, where=b))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
