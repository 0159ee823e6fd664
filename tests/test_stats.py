"""Row statistics composed of reductions (frontend/ops/stats.py): ml.softmax, ml.log_softmax,
ml.logsumexp, ml.var, ml.std, ml.any, ml.all, against jax.nn and jnp in interpret mode, and
built for CUDA."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, *, op, axis: S(x.shape, x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else F32),
                grid=lambda x, *, op, axis: (x.shape[0] // 8,))
def rows(x, out, *, op: ml.constexpr, axis: ml.constexpr):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8)][...]
  if op == "softmax":
    out.at[ml.ds(i * 8, 8)][...] = ml.softmax(v, axis=axis)
  elif op == "log_softmax":
    out.at[ml.ds(i * 8, 8)][...] = ml.log_softmax(v, axis=axis)
  elif op == "softmax_where":
    keep = ml.arange(v.shape[1])[None, :] <= (i * 8 + ml.arange(8))[:, None]
    out.at[ml.ds(i * 8, 8)][...] = ml.softmax(v, axis=axis, where=keep)
  elif op == "log_softmax_where":
    keep = ml.arange(v.shape[1])[None, :] <= (i * 8 + ml.arange(8))[:, None]
    out.at[ml.ds(i * 8, 8)][...] = ml.log_softmax(v, axis=axis, where=keep)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 1, 0])
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
def test_softmax_and_log_softmax_match_jax_nn(op, axis, dtype):
  x = (rand.normal(rand.key(0), (16, 128), F32) * 30).astype(dtype)   # exp overflows unshifted
  x = x.at[2, 5].set(-jnp.inf)
  got = rows(x, op=op, axis=axis, interpret=True)
  want = getattr(jax.nn, op)(x.astype(F32), axis=axis if axis != 0 else 0)
  if axis == 0:                      # each program's 8 rows are its own softmax along axis 0
    want = jnp.concatenate([getattr(jax.nn, op)(x[k:k + 8].astype(F32), axis=0) for k in (0, 8)])
  assert got.dtype == dtype
  tol = 1e-5 if dtype == F32 else 1e-2
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want.astype(dtype), np.float32), rtol=tol, atol=tol)
  _export(lambda a: rows(a, op=op, axis=axis), S((16, 128), dtype))


@pytest.mark.parametrize("op", ["softmax_where", "log_softmax_where"])
def test_softmax_where_keeps_the_masked_elements_out(op):
  x = rand.normal(rand.key(1), (16, 128), F32) * 30
  got = rows(x, op=op, axis=-1, interpret=True)
  keep = jnp.arange(128)[None, :] <= jnp.arange(16)[:, None]
  fn = jax.nn.softmax if op == "softmax_where" else jax.nn.log_softmax
  np.testing.assert_allclose(got, fn(x, axis=-1, where=keep), rtol=1e-5, atol=1e-6)
  _export(lambda a: rows(a, op=op, axis=-1), S((16, 128), F32))


def test_softmax_of_rows_with_inf_follows_jax_nn():
  x = jnp.zeros((8, 128), F32).at[0].set(-jnp.inf).at[1, 3].set(jnp.inf)
  got = rows(x, op="softmax", axis=-1, interpret=True)
  np.testing.assert_array_equal(np.isnan(got), np.isnan(jax.nn.softmax(x, axis=-1)))


@mg.mgpu_kernel(out_shape=lambda x, *, axis, keepdims, ddof=0: (
                    jax.eval_shape(lambda a: jnp.var(a, axis=axis, keepdims=keepdims), x),) * 3,
                grid=(1,))
def stats(x, lse, var, std, *, axis: ml.constexpr, keepdims: ml.constexpr, ddof: ml.constexpr = 0):
  v = x[...]
  lse[...] = ml.logsumexp(v, axis=axis, keepdims=keepdims)
  var[...] = ml.var(v, axis=axis, keepdims=keepdims, ddof=ddof)
  std[...] = v.std(axis=axis, keepdims=keepdims, ddof=ddof)


@pytest.mark.parametrize("axis,keepdims", [(1, False), (-1, True), (0, False), (0, True)])
@pytest.mark.parametrize("dtype", [F32, jnp.float16, jnp.int32])
def test_logsumexp_var_and_std_match_jnp(axis, keepdims, dtype):
  x = rand.normal(rand.key(2), (16, 128), F32) * 20 + 3
  x = x.astype(dtype)
  if dtype == F32:
    x = x.at[4].set(-jnp.inf)                              # logsumexp of a row of -inf is -inf
  got = stats(x, axis=axis, keepdims=keepdims, ddof=1, interpret=True)
  xf = x.astype(F32)
  want = (jax.nn.logsumexp(xf, axis=axis, keepdims=keepdims), jnp.var(xf, axis=axis, keepdims=keepdims, ddof=1),
          jnp.std(xf, axis=axis, keepdims=keepdims, ddof=1))
  tol = 1e-5 if dtype != jnp.float16 else 2e-3
  for g, w in zip(got, want):
    assert g.dtype == (F32 if dtype == jnp.int32 else dtype)
    if dtype == F32 and axis == 0:                           # the -inf row makes every column's var NaN
      np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w.astype(g.dtype), np.float32), rtol=tol)
  _export(lambda a: stats(a, axis=axis, keepdims=keepdims, ddof=1), S((16, 128), dtype))


@mg.mgpu_kernel(out_shape=lambda x: S((4,), F32), grid=(1,))
def full_stats(x, out):
  v = x[...]
  out[0] = ml.logsumexp(v)
  out[1] = ml.var(v)
  out[2] = ml.std(v)
  out[3] = ml.any(v > 100.0).astype(jnp.float32) + 2.0 * ml.all(v > -100.0).astype(jnp.float32)


def test_full_reductions_are_scalars():
  x = rand.normal(rand.key(3), (8, 128), F32) * 5
  got = full_stats(x, interpret=True)
  want = [jax.nn.logsumexp(x), jnp.var(x), jnp.std(x), 0.0 + 2.0 * jnp.all(x > -100)]
  np.testing.assert_allclose(got, np.asarray(want, np.float32), rtol=1e-5)
  _export(full_stats, S((8, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x, *, op: x, grid=(1,))
def bad_stats(x, out, *, op: ml.constexpr):
  v = x[...]
  if op == "axis":
    out[...] = ml.softmax(v, axis=2)
  elif op == "f8":
    out[...] = ml.softmax(v.astype(jnp.float8_e4m3fn)).astype(jnp.float32)
  elif op == "ddof":
    out[...] = ml.var(v, axis=1, ddof=0.5)[:, None] + v


def test_mistakes_in_row_statistics_are_reported_at_the_call():
  spec = [S((8, 128), F32)]
  expect(bad_stats, spec, mg.IndexOutOfBoundsError, "ml.softmax(v, axis=2)",
         "ml.softmax: axis 2 is out of range for a tensor of rank 2", hint="axes run from -2 to 1", op="axis")
  expect(bad_stats, spec, mg.UnsupportedDtypeError, "ml.softmax(v.astype",
         "ml.softmax of float8_e4m3fn values is not supported",
         hint="convert first: v.astype(jnp.float8_e4m3fn).astype(jnp.float32)", op="f8")
  expect(bad_stats, spec, mg.KernelTypeError, "ml.var(v",
         "ml.var: ddof must be a static int, got 0.5", hint="ml.var(v, axis=1, ddof=1) for the unbiased estimate",
         op="ddof")


@pytest.mark.gpu
def test_gpu_row_statistics_match_jax():
  x = rand.normal(rand.key(4), (64, 256), F32) * 30
  for op, fn in (("softmax", jax.nn.softmax), ("log_softmax", jax.nn.log_softmax)):
    np.testing.assert_allclose(rows(x, op=op, axis=-1), fn(x, axis=-1), rtol=1e-4, atol=1e-5)
  keep = jnp.arange(256)[None, :] <= jnp.arange(64)[:, None]
  np.testing.assert_allclose(rows(x, op="softmax_where", axis=-1), jax.nn.softmax(x, axis=-1, where=keep),
                             rtol=1e-4, atol=1e-6)
  y = x[:16, :128].astype(jnp.bfloat16)
  got = stats(y, axis=1, keepdims=False, ddof=1)
  yf = y.astype(F32)
  for g, w in zip(got, (jax.nn.logsumexp(yf, axis=1), jnp.var(yf, axis=1, ddof=1), jnp.std(yf, axis=1, ddof=1))):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w.astype(jnp.bfloat16), np.float32), rtol=1e-2)
  np.testing.assert_allclose(full_stats(x[:8, :128] / 6),
                             [jax.nn.logsumexp(x[:8, :128] / 6), jnp.var(x[:8, :128] / 6), jnp.std(x[:8, :128] / 6),
                              2.0], rtol=1e-4)
