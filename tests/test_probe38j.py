"""Probe 38j (sequential and scan kernels: cumsum/cumprod/cummax along rows and columns, exclusive and
reverse scans, linear recurrences carried through loops, RNN/GRU/LSTM cells, chunked linear attention,
log-step scans of shifts, segmented scans, running max/min, EMA, runtime trip counts)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _np_scan(kind, x, axis, reverse):
  f = {"sum": np.cumsum, "max": np.maximum.accumulate}[kind]
  x = np.flip(x, axis) if reverse else x
  y = f(x, axis=axis)
  return np.flip(y, axis) if reverse else y


# ---------------------------------------------------------------- scans along any axis of a 3-D (or wider) tile
@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def heads_over_time(x, csum, cmax):
  """A (heads, time, features) chunk scanned over time, the middle axis, as Mamba's heads are."""
  v = x[...]
  csum[...] = ml.cumsum(v, axis=1) - v                 # exclusive
  cmax[...] = ml.cummax(v, axis=-2, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def every_axis_4d(x, a, b, c):
  v = x[...]
  a[...] = ml.cumsum(v, axis=0)
  b[...] = v.cumsum(axis=2, reverse=True)
  c[...] = ml.cummax(v, axis=3)


def _heads_want(x):
  return np.cumsum(x, 1) - x, _np_scan("max", x, 1, True)


def _every_axis_want(x):
  return np.cumsum(x, 0), _np_scan("sum", x, 2, True), np.maximum.accumulate(x, 3)


@pytest.mark.parametrize("shape", [(4, 8, 64), (2, 128, 4), (3, 16, 32)])
def test_a_scan_along_a_middle_axis_scans_each_slab(shape):
  """Was MG003 ("takes a 1- or 2-D register tensor", hint: "x.at[...][...] of a 2-D window"): a scan along
  any axis of an N-D tile is now the 2-D scan of its reshape, a middle axis restarting every shape[axis]
  rows (the Scan op's `segment`, frontend/ops/scan.py, lowering/scan.py)."""
  x = np.random.default_rng(38).standard_normal(shape).astype(np.float32)
  for g, w in zip(heads_over_time(jnp.asarray(x), interpret=True), _heads_want(x)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  _export(heads_over_time, S(shape, F32))


def test_scans_along_every_axis_of_a_4d_tile():
  x = np.random.default_rng(39).standard_normal((2, 4, 8, 32)).astype(np.float32)
  for g, w in zip(every_axis_4d(jnp.asarray(x), interpret=True), _every_axis_want(x)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  _export(every_axis_4d, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("shape", [(4, 8, 64), (2, 128, 4), (3, 16, 32)])
def test_gpu_a_scan_along_a_middle_axis(shape):
  x = jnp.asarray(np.random.default_rng(38).standard_normal(shape).astype(np.float32))
  for g, i, w in zip(heads_over_time(x), heads_over_time(x, interpret=True), _heads_want(np.asarray(x))):
    np.testing.assert_array_equal(g, i)
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_scans_along_every_axis_of_a_4d_tile():
  x = jnp.asarray(np.random.default_rng(39).standard_normal((2, 4, 8, 32)).astype(np.float32))
  for g, i, w in zip(every_axis_4d(x), every_axis_4d(x, interpret=True), _every_axis_want(np.asarray(x))):
    np.testing.assert_array_equal(g, i)
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
