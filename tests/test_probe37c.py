"""Probe 37c (row statistics and normalisation as a Triton or Pallas user writes them: softmax and
log-softmax along rows and columns, layer/RMS/group norm forward and backward, cross-entropy, Welford
variance, narrow and 3-D tiles, integer and boolean reductions)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rows(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- a long row staged in SMEM, one row of a buffer a chunk
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def long_row_softmax(x, out):        # each 1024-wide chunk of the row loaded into one row of x_s
  i = ml.program_id(0)
  n = x.shape[1] // 1024
  x_s = ml.smem((n, 1024), x.dtype)
  for c in ml.static_range(n):
    ml.copy(x.at[ml.ds(i, 1), ml.ds(c * 1024, 1024)], x_s.at[ml.ds(c, 1)])
  v = x_s[...].astype(F32)
  e = ml.exp(v - ml.max(v))
  out.at[i][...] = (e / ml.sum(e)).reshape(n * 1024).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def long_row_rms(x, out):            # the row of x_s indexed by an int
  i = ml.program_id(0)
  n = x.shape[1] // 1024
  x_s = ml.smem((n, 1024), x.dtype)
  for c in ml.static_range(n):
    ml.copy(x.at[i, ml.ds(c * 1024, 1024)], x_s.at[c])
  v = x_s[...].astype(F32)
  out.at[i][...] = (v * ml.rsqrt(ml.mean(v * v) + 1e-6)).reshape(n * 1024).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def long_row_softmax_followed(x, out):
  i = ml.program_id(0)
  n = x.shape[1] // 1024
  x_s = ml.smem((n, 1024), x.dtype)
  for c in ml.static_range(n):
    for k in ml.static_range(4):
      ml.copy(x.at[ml.ds(i, 1), ml.ds(c * 1024 + k * 256, 256)], x_s.at[ml.ds(c, 1), ml.ds(k * 256, 256)])
  m = ml.full((), -jnp.inf, F32)
  s = ml.full((), 0.0, F32)
  for c in ml.static_range(n):
    blk = x_s.at[c][...].astype(F32)
    mn = ml.maximum(m, ml.max(blk))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(blk - mn))
    m = mn
  for c in ml.static_range(n):
    x_s.at[c][...] = (ml.exp(x_s.at[c][...].astype(F32) - m) / s).astype(x.dtype)
  for c in ml.static_range(n):
    for k in ml.static_range(4):
      ml.copy(x_s.at[ml.ds(c, 1), ml.ds(k * 256, 256)], out.at[ml.ds(i, 1), ml.ds(c * 1024 + k * 256, 256)])


def test_tma_box_split_hint_keeps_the_buffer_views_own_index():
  """The MG401 hint for a window wider than a TMA box named windows of the whole buffer,
  `x_s.at[:, ml.ds(k * 256, 256)]` (every row of it: another shape than the copy's) where the copy
  went into one row of it, `x_s.at[ml.ds(c, 1)]` or `x_s.at[c]`; it now keeps that index."""
  spec = [S((4, 4096), jnp.bfloat16)]
  expect(long_row_softmax, spec, mg.TmaLimitError, "ml.copy(x.at[ml.ds(i, 1)",
         "TMA copies move at most 256 elements along each dimension; this window is (1, 1024)",
         hint="copy it in pieces of at most 256 along that dimension into windows of the buffer,"
              " x_s.at[ml.ds(c, 1), ml.ds(k * 256, 256)] (and the same window of the array,"
              " x.at[ml.ds(i, 1), ml.ds(c * 1024 + k * 256, 256)]) for k in ml.static_range(4)")
  expect(long_row_rms, spec, mg.TmaLimitError, "ml.copy(x.at[i,",
         "TMA copies move at most 256 elements along each dimension; this window is (1024,)",
         hint="copy it in pieces of at most 256 along that dimension into windows of the buffer,"
              " x_s.at[c, ml.ds(k * 256, 256)] (and the same window of the array,"
              " x.at[i, ml.ds(c * 1024 + k * 256, 256)]) for k in ml.static_range(4)")
  x = _rows((4, 4096), jnp.bfloat16)
  got = long_row_softmax_followed(x, interpret=True)
  ref = jax.nn.softmax(x.astype(F32), axis=1)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(ref), rtol=1e-2, atol=1e-6)
  long_row_softmax_followed.check(*spec)
