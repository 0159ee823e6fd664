"""Probe 29h (normalisation kernels as users write them: layer and RMS norm with fused residuals,
masked hidden sizes, Welford loops, backward kernels, softmax with temperature and causal masks,
log-softmax with NLL): the hints found not to work when followed, and their fixes."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml


S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- jnp's where= of ml.var, ml.std and ml.mean
@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0],), F32)), grid=lambda x: (x.shape[0] // 4,))
def masked_var(x, y, sd):
  i = ml.program_id(0)
  m = ml.arange(1024)[None, :] < x.shape[1]
  v = x.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].load(mask=m, other=0.0)
  var = ml.var(v, axis=1, where=m, keepdims=True)
  y.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].store(v * var, mask=m)
  sd.at[ml.ds(i * 4, 4)][...] = ml.std(v, axis=1, ddof=1, where=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def masked_mean(x, y):
  i = ml.program_id(0)
  m = ml.arange(1024)[None, :] < x.shape[1]
  v = x.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].load(mask=m, other=0.0)
  y.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].store(v - ml.mean(v, axis=1, where=m, keepdims=True), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0],), F32), x), grid=lambda x: (x.shape[0] // 4,))
def masked_stats_as_hinted(x, y, sd, z):
  i = ml.program_id(0)
  m = ml.arange(1024)[None, :] < x.shape[1]
  v = x.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].load(mask=m, other=0.0)
  mu = ml.sum(ml.where(m, v, 0), axis=1, keepdims=True) / ml.sum(ml.broadcast_to(m, v.shape), axis=1, keepdims=True).astype(jnp.float32)
  var = ml.sum(ml.where(m, (v - mu) ** 2, 0), axis=1, keepdims=True) / ml.sum(ml.broadcast_to(m, v.shape), axis=1, keepdims=True).astype(jnp.float32)
  y.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].store(v * var, mask=m)
  sd.at[ml.ds(i * 4, 4)][...] = ml.sqrt(ml.sum(ml.where(m, (v - mu) ** 2, 0), axis=1) / (ml.sum(ml.broadcast_to(m, v.shape), axis=1).astype(jnp.float32) - 1))
  z.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].store(v - ml.sum(ml.where(m, v, 0), axis=1, keepdims=True) / ml.sum(ml.broadcast_to(m, v.shape), axis=1, keepdims=True).astype(jnp.float32), mask=m)


def test_masked_var_std_and_mean_take_where_and_match_the_written_out_statistics():
  """ml.var(v, where=m) (jnp's where=, a masked hidden size's layer norm) was told only the signature,
  then (29h) hinted as the masked two-pass variance; since probe 39e ml.mean, ml.var and ml.std take
  where= themselves, with a (1, n) column mask too, and give what the written-out kernel gives."""
  spec = [S((8, 1000), F32)]
  x = np.random.default_rng(0).standard_normal((8, 1000)).astype(np.float32)
  y, sd = masked_var(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(np.asarray(y)[:, :1000], x * x.var(1, keepdims=True), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(sd, x.std(1, ddof=1), rtol=1e-5)
  z = masked_mean(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(z, x - x.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
  y2, sd2, z2 = masked_stats_as_hinted(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(y, y2, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(sd, sd2, rtol=1e-5)
  np.testing.assert_allclose(z, z2, rtol=1e-5, atol=1e-6)
  for k in (masked_var, masked_mean, masked_stats_as_hinted):
    jax.export.export(jax.jit(k), platforms=["cuda"])(*spec)


# ---------------------------------------------------------------- the target column of each row (NLL)
@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), F32), grid=lambda x, t: (x.shape[0] // 8,))
def nll_register_gather(x, t, loss):
  i = ml.program_id(0)
  ls = ml.log_softmax(x.at[ml.ds(i * 8, 8), :][...], axis=1)
  tg = t.at[ml.ds(i * 8, 8)][...]
  loss.at[ml.ds(i * 8, 8)][...] = -ls[ml.arange(8), tg]


@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), F32), grid=lambda x, t: (x.shape[0] // 8,))
def nll_take_along_axis(x, t, loss):
  i = ml.program_id(0)
  ls = ml.log_softmax(x.at[ml.ds(i * 8, 8), :][...], axis=1)
  tg = t.at[ml.ds(i * 8, 8)][...]
  loss.at[ml.ds(i * 8, 8)][...] = -ml.take_along_axis(ls, tg[:, None], axis=1)[:, 0]


@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), F32), grid=lambda x, t: (x.shape[0] // 8,))
def nll_as_hinted(x, t, loss):
  i = ml.program_id(0)
  ls = ml.log_softmax(x.at[ml.ds(i * 8, 8), :][...], axis=1)
  tg = t.at[ml.ds(i * 8, 8)][...]
  loss.at[ml.ds(i * 8, 8)][...] = -ml.sum(ml.where(ml.arange(256)[None, :] == tg[:, None], ls, 0), axis=1)


def test_one_element_per_row_of_a_register_tile_is_hinted_as_a_one_hot_select():
  """ls[ml.arange(8), tg] of a log-softmax tile (NLL's target column) was told only to gather from GMEM
  or go through SMEM, and ml.take_along_axis was "check the spelling"; both then wrote the one-hot select,
  which, followed, matches jnp's take_along_axis. Since probe 45f the register gather itself computes."""
  specs = [S((32, 256), F32), S((32,), jnp.int32)]
  rng = np.random.default_rng(1)      # (ml.take_along_axis is that select since probe 39a)
  x = rng.standard_normal((32, 256)).astype(np.float32)
  t = rng.integers(0, 256, 32).astype(np.int32)
  got = nll_register_gather(jnp.asarray(x), jnp.asarray(t), interpret=True)    # (a gather through SMEM since probe 45f)
  np.testing.assert_allclose(got, -jnp.take_along_axis(jax.nn.log_softmax(x, -1), t[:, None], 1)[:, 0],
                             rtol=1e-5, atol=1e-6)
  got = nll_take_along_axis(jnp.asarray(x), jnp.asarray(t), interpret=True)
  np.testing.assert_allclose(got, -jnp.take_along_axis(jax.nn.log_softmax(x, -1), t[:, None], 1)[:, 0],
                             rtol=1e-5, atol=1e-6)
  got = nll_as_hinted(jnp.asarray(x), jnp.asarray(t), interpret=True)
  want = -jnp.take_along_axis(jax.nn.log_softmax(x, -1), t[:, None], 1)[:, 0]
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  jax.export.export(jax.jit(nll_as_hinted), platforms=["cuda"])(*specs)


# ---------------------------------------------------------------- a one-row tile's statistic beside row statistics
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0] // 4,))
def masked_row_mean(x, o):
  i = ml.program_id(0)
  m = ml.arange(1024)[None, :] < x.shape[1]
  v = x.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].load(mask=m, other=0.0)
  o.at[ml.ds(i * 4, 4)][...] = ml.sum(v, axis=1) / ml.sum(m, axis=1).astype(F32)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x: (x.shape[0] // 4,))
def masked_row_mean_as_hinted(x, o, p):
  i = ml.program_id(0)
  m = ml.arange(1024)[None, :] < x.shape[1]
  v = x.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].load(mask=m, other=0.0)
  o.at[ml.ds(i * 4, 4)][...] = ml.sum(v, axis=1) / ml.sum(m).astype(F32)
  p.at[ml.ds(i * 4, 4)][...] = ml.sum(v, axis=1) / ml.sum(ml.broadcast_to(m, (4, 1024)), axis=1).astype(F32)


def test_a_one_row_tiles_statistic_beside_row_statistics_computes():
  """The count of a (1, 1024) column mask, ml.sum(m, axis=1), divided into the (4,) row sums was MG204 at
  the row sums, then (probe 29h) at the count with the two rewrites that work; since probe 48a a one-element
  tensor meeting a larger one of its dtype is its element, which meets any tensor, so it computes as written."""
  x = np.random.default_rng(2).standard_normal((8, 1000)).astype(np.float32)
  np.testing.assert_allclose(masked_row_mean(jnp.asarray(x), interpret=True), x.mean(1), rtol=1e-5, atol=1e-6)
  jax.export.export(jax.jit(masked_row_mean), platforms=["cuda"])(S((8, 1000), F32))
  o, p = masked_row_mean_as_hinted(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(o, x.mean(1), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(p, x.mean(1), rtol=1e-5, atol=1e-6)
  jax.export.export(jax.jit(masked_row_mean_as_hinted), platforms=["cuda"])(S((8, 1000), F32))


# ---------------------------------------------------------------- an ml.arange shorter than 8 lanes
@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), F32), grid=lambda x, t: (x.shape[0] // 4,))
def nll_four_rows(x, t, loss):
  i = ml.program_id(0)
  rows = i * 4 + ml.arange(4)
  tg = t.at[ml.ds(i * 4, 4)][...]
  loss.at[ml.ds(i * 4, 4)][...] = -x[rows, tg]         # a log-softmax's picked column, stored alone


@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), F32), grid=lambda x, t: (x.shape[0] // 4,))
def nll_four_rows_as_hinted(x, t, loss):
  i = ml.program_id(0)
  ok = ml.arange(8) < 4
  rows = ml.where(ok, i * 4 + ml.arange(8), x.shape[0])
  tg = t.at[ml.ds(i * 4, 8)].load(mask=ok, other=0)
  loss.at[ml.ds(i * 4, 8)].store(-x[rows, tg], mask=ok)


def test_a_short_arange_is_hinted_as_a_longer_masked_arange():
  """rows = i * 4 + ml.arange(4) indexing a gather whose 4 values are stored alone was MG204 with the hint
  to pad a masked load of `ref.at[ml.ds(start, 8)]`, which no ml.arange is; the hint then said to take 8 lanes of
  ml.arange and mask the rest, which compiles and matches jnp. Since probe 56g the padded trace gathers at the two
  padded index vectors (ops/padded_gathers.padded_points), so the kernel as first written computes too."""
  specs = [S((16, 256), F32), S((16,), jnp.int32)]
  rng = np.random.default_rng(3)
  x = rng.standard_normal((16, 256)).astype(np.float32)
  t = rng.integers(0, 256, 16).astype(np.int32)
  for k in (nll_four_rows, nll_four_rows_as_hinted):
    got = k(jnp.asarray(x), jnp.asarray(t), interpret=True)
    np.testing.assert_array_equal(got, -jnp.take_along_axis(x, t[:, None], 1)[:, 0])
    jax.export.export(jax.jit(k), platforms=["cuda"])(*specs)
