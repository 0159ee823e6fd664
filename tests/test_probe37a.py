"""Probe 37a (decode and variant attention written by hand): split-K combines through
ml.logsumexp's b=, where= and return_sign= (jax.nn.logsumexp's keywords, rejected before)."""
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


# ---------------------------------------------------------------- logsumexp's b=, where=, return_sign=
@mg.mgpu_kernel(out_shape=lambda o_p, m_p, l_p: (S((o_p.shape[0], o_p.shape[2]), F32), S((o_p.shape[0],), F32)),
                grid=lambda o_p, m_p, l_p: (o_p.shape[0],))
def combine_splits(o_p, m_p, l_p, o, lse):
  """Flash-decoding's combine of one row's partial (unnormalised output, max, sum) per split: the
  row's lse is logsumexp(m, b=l) over the splits that saw keys (l > 0), each weighted by exp(m - lse)."""
  r = ml.program_id(0)
  m = m_p.at[r][...]
  l = l_p.at[r][...]
  total = ml.logsumexp(m, b=l, where=l > 0)
  w = ml.where(l > 0, ml.exp(m - total), 0.0)
  o.at[r][...] = ml.sum(o_p.at[r][...] * w[:, None], axis=0)
  lse[r] = total


def _split_decode(rows, splits, d, seed):
  """Partials of a decode over keys split `splits` ways, some splits empty (past a row's length)."""
  rng = np.random.default_rng(seed)
  logits = rng.standard_normal((rows, splits, 16)).astype(np.float32) * 40      # large logits
  v = rng.standard_normal((rows, splits, 16, d)).astype(np.float32)
  empty = rng.random((rows, splits)) < 0.3
  empty[:, 0] = False
  logits[empty] = -np.inf
  m = np.where(empty, -np.inf, logits.max(-1))
  p = np.where(empty[..., None], 0.0, np.exp(logits - np.where(empty, 0.0, m)[..., None]))
  parts = (np.einsum("rsk,rskd->rsd", p, v).astype(np.float32), m.astype(np.float32), p.sum(-1).astype(np.float32))
  flat = logits.reshape(rows, -1)
  want_lse = jax.nn.logsumexp(flat, axis=1)
  want_o = np.einsum("rk,rkd->rd", jax.nn.softmax(flat, axis=1), v.reshape(rows, -1, d))
  return parts, want_o, want_lse


def test_a_split_k_combine_takes_logsumexps_b_and_where():
  """`ml.logsumexp(m, b=l, where=l > 0)` was MG003 (unexpected keyword): jax.nn.logsumexp's b= and
  where= are taken, with its meaning (elements where b is 0 or where= is off left out)."""
  parts, want_o, want_lse = _split_decode(16, 8, 64, 0)
  o, lse = combine_splits(*parts, interpret=True)
  np.testing.assert_allclose(np.asarray(lse), want_lse, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(o), want_o, rtol=1e-4, atol=1e-5)
  _export(combine_splits, *(S(p.shape, p.dtype) for p in parts))


@pytest.mark.gpu
def test_gpu_a_split_k_combine_takes_logsumexps_b_and_where():
  parts, want_o, want_lse = _split_decode(64, 8, 128, 1)
  o, lse = jax.jit(combine_splits)(*parts)
  np.testing.assert_allclose(np.asarray(lse), want_lse, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(o), want_o, rtol=1e-4, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, b: (S((x.shape[0],), F32),) * 3 + (S((), x.dtype),), grid=(1,))
def scaled_lse(x, b, lse_b, lse_abs, sign, lse_all):
  v, s = x[...], b[...]
  lse_b[...] = ml.logsumexp(v, axis=1, b=s)
  lse_abs[...], sign[...] = ml.logsumexp(v, axis=1, b=s, return_sign=True)
  lse_all[...] = ml.logsumexp(v, b=0.5, where=v > 0)


@pytest.mark.parametrize("dtype", [F32, jnp.float16])
def test_logsumexp_b_return_sign_and_where_are_jax_nns(dtype):
  rng = np.random.default_rng(2)
  x = (rng.standard_normal((16, 128)) * 8).astype(dtype)
  b = rng.standard_normal((16, 128)).astype(np.float32)
  b[3] = 0.0                                    # every element left out: -inf
  b[4, :7] = 0.0
  x[5, 0] = np.inf                              # +inf where b is 0: left out, not NaN
  b[5, 0] = 0.0
  got = scaled_lse(x, b, interpret=True)
  xf = jnp.asarray(x)
  want = (jax.nn.logsumexp(xf, axis=1, b=b), *jax.nn.logsumexp(xf, axis=1, b=b, return_sign=True),
          jax.nn.logsumexp(xf, b=0.5, where=xf > 0))
  tol = 1e-5 if dtype == F32 else 2e-3
  for g, w in zip(got, want):
    assert g.dtype == w.dtype
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol)
  _export(scaled_lse, S(x.shape, dtype), S(b.shape, F32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, jnp.float16])
def test_gpu_logsumexp_b_return_sign_and_where_are_jax_nns(dtype):
  rng = np.random.default_rng(3)
  x = (rng.standard_normal((16, 128)) * 8).astype(dtype)
  b = rng.standard_normal((16, 128)).astype(np.float32)
  b[3] = 0.0
  got = jax.jit(scaled_lse)(x, b)
  xf = jnp.asarray(x)
  want = (jax.nn.logsumexp(xf, axis=1, b=b), *jax.nn.logsumexp(xf, axis=1, b=b, return_sign=True),
          jax.nn.logsumexp(xf, b=0.5, where=xf > 0))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=1e-5 if dtype == F32 else 2e-3)
