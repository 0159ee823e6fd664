"""Probe 54a (odd shapes still MG204/MG003, what probes 53a-i left). What was refused:

- `ml.searchsorted(t[...], q[...])` (and jnp.searchsorted, jnp.digitize) of a register table and a 2-D tile of
  queries not a multiple of 128 elements ((2, 16), (5, 40), (3, 24)) was MG003: the tile, read padded, is counted
  flattened as a (16, 32) one was since probe 53i (frontend/ops/search.py), a table read padded (100 sorted
  knots) counting its own elements only;
- a gather from a register vector at such a tile of indices (`tv[q[...]]` of a (3, 40) tile, jnp.interp's
  `_xp_[_i_]`) was MG003 ("a form a register gather does not take"): the padded trace gathers at the padded tile
  (frontend/ops/register_gather.py), and where no trace takes it, it is MG204 at the gather with a padding hint.
"""
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import S, export, f32, rnd

F32, I32 = jnp.float32, jnp.int32


def _gpu():
  import jax
  return any(d.platform == "gpu" for d in jax.devices())


# ---------------------------------------------------------------- searchsorted of odd tiles of queries
@mg.mgpu_kernel(out_shape=lambda t, q: (S(q.shape, I32), S(q.shape, I32)))
def search_tile(t, q, lo, hi):
  tv = t[...]
  lo[...] = ml.searchsorted(tv, q[...])
  hi[...] = jnp.searchsorted(tv, q[...], side="right")


@mg.mgpu_kernel(out_shape=lambda t, q: S(q.shape, I32))
def bucket_tile(t, q, o):
  o[...] = jnp.digitize(q[...], t[...]).astype(I32)


SEARCH_CASES = [(128, (2, 16)), (128, (5, 40)), (64, (3, 24)), (100, (2, 16)), (40, (6, 20))]


def _queries(n, shape, seed):
  t = np.sort(np.round(rnd((n,), seed) * 4) / 4)           # (ties: left and right differ)
  q = np.round(rnd(shape, seed + 1) * 4) / 4
  return t.astype(np.float32), q.astype(np.float32)


@pytest.mark.parametrize("n,shape", SEARCH_CASES)
def test_searchsorted_of_an_odd_tile_of_queries(n, shape):
  t, q = _queries(n, shape, 0)
  lo, hi = search_tile(t, q, interpret=True)
  np.testing.assert_array_equal(np.asarray(lo), np.searchsorted(t, q, side="left"))
  np.testing.assert_array_equal(np.asarray(hi), np.searchsorted(t, q, side="right"))
  np.testing.assert_array_equal(np.asarray(bucket_tile(t, q, interpret=True)), np.digitize(q, t))


@pytest.mark.parametrize("n,shape", [(128, (5, 40)), (100, (2, 16))])
def test_searchsorted_of_an_odd_tile_builds_for_cuda(n, shape):
  t, q = _queries(n, shape, 1)
  export(search_tile, t, q)
  export(bucket_tile, t, q)


# ---------------------------------------------------------------- gathers from a register vector at odd tiles
@mg.mgpu_kernel(out_shape=lambda t, q: S(q.shape, t.dtype))
def look_up(t, q, o):
  tv = jnp.exp(t[...])
  o[...] = tv[q[...] % t.shape[0]] + q[...].astype(t.dtype)


@mg.mgpu_kernel(out_shape=lambda xp, fp, x: S(x.shape, F32))
def interp_tile(xp, fp, x, o):
  o[...] = jnp.interp(x[...], xp[...], fp[...])


@pytest.mark.parametrize("n,shape", [(128, (3, 40)), (100, (5, 24)), (64, (2, 16))])
def test_register_gather_at_an_odd_tile_of_indices(n, shape):
  t = rnd((n,), 2)
  q = np.random.default_rng(3).integers(-50, 1000, shape).astype(np.int32)
  got = look_up(t, q, interpret=True)
  np.testing.assert_allclose(f32(got), np.exp(t)[q % n] + q, rtol=1e-6)


@pytest.mark.parametrize("shape", [(3, 40), (2, 16)])
def test_interp_of_an_odd_tile(shape):
  xp = np.sort(rnd((128,), 4)) * 3
  fp = rnd((128,), 5)
  x = rnd(shape, 6) * 4
  got = interp_tile(xp, fp, x, interpret=True)
  np.testing.assert_allclose(f32(got), np.interp(x, xp, fp), rtol=1e-5, atol=1e-6)


def test_odd_gathers_build_for_cuda():
  q = np.random.default_rng(7).integers(0, 100, (3, 40)).astype(np.int32)
  export(look_up, rnd((100,), 8), q)
  export(interp_tile, np.sort(rnd((128,), 4)), rnd((128,), 5), rnd((5, 24), 6))


@mg.mgpu_kernel(out_shape=lambda t, q: S((40, 3), t.dtype))
def look_up_regrouped(t, q, o):
  tv = t[...] * 2.0
  o[...] = tv[q[...]].reshape(40, 3)


def test_a_gather_at_an_odd_tile_no_trace_takes_is_mg204_with_its_padding():
  expect(look_up_regrouped, [S((128,), F32), S((3, 40), I32)], mg.LayoutError, "tv[q[...]]",
         "a gather from tv at a (3, 40) tile of indices gives 120 elements, which no register tensor holds (a tile"
         " holds a multiple of 128)",
         hint="read the indices padded to (4, 64) under a mask (other=0) and gather at them, then store only the first"
              " (3, 40) of the result under that mask, (ml.arange(4)[:, None] < 3) & (ml.arange(64)[None, :] < 40):"
              " the padding holds no real elements")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_odd_tiles_of_queries_and_indices():
  t, q = _queries(100, (5, 40), 9)
  lo, hi = search_tile(t, q)
  np.testing.assert_array_equal(np.asarray(lo), np.searchsorted(t, q, side="left"))
  np.testing.assert_array_equal(np.asarray(hi), np.searchsorted(t, q, side="right"))
  np.testing.assert_array_equal(np.asarray(bucket_tile(t, q)), np.digitize(q, t))
  ids = np.random.default_rng(10).integers(-50, 1000, (3, 40)).astype(np.int32)
  tt = rnd((100,), 11)
  np.testing.assert_allclose(f32(look_up(tt, ids)), np.exp(tt)[ids % 100] + ids, rtol=1e-5)
  xp, fp, x = np.sort(rnd((128,), 4)) * 3, rnd((128,), 5), rnd((2, 16), 6) * 4
  np.testing.assert_allclose(f32(interp_tile(xp, fp, x)), np.interp(x, xp, fp), rtol=1e-5, atol=1e-5)
