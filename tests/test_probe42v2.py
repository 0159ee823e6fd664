"""Probe 42v, part two (control flow and data-driven kernels): a pipelined loop's uint32 bounds all named in the
hint; `enumerate` of a run-time range; a list a run-time loop grows hinted to store each value; a continue before a
pipelined loop's loads moves them up (it was MG001)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _raises(kernel, *args):
  with pytest.raises(mg.KernelError) as info:
    kernel(*args, interpret=True)
  return info.value


# ---------------------------------------------------------------- a pipelined loop's uint32 bounds: every one converted
@mg.mgpu_kernel(out_shape=lambda x, lo, hi: S((64, x.shape[1]), F32), grid=(1,))
def tiles_between(x, lo, hi, out):
  buf = ml.smem((64, x.shape[1]))
  acc = ml.zeros((64, x.shape[1]), F32)
  for k in ml.range(lo[...], hi[...], 2, stages=3):
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    acc = acc + buf[...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, lo, hi: S((64, x.shape[1]), F32), grid=(1,))
def tiles_between_fixed(x, lo, hi, out):
  buf = ml.smem((64, x.shape[1]))
  acc = ml.zeros((64, x.shape[1]), F32)
  for k in ml.range(lo[...].astype(jnp.int32), hi[...].astype(jnp.int32), 2, stages=3):
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    acc = acc + buf[...]
  out[...] = acc


def test_the_hint_for_a_pipelined_loops_uint32_bounds_converts_each():
  x = np.random.default_rng(7).standard_normal((64 * 9, 128)).astype(np.float32)
  e = _raises(tiles_between, jnp.asarray(x), jnp.uint32(1), jnp.uint32(8))
  assert isinstance(e, mg.KernelTypeError) and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line_of("for k in ml.range(lo[...], hi[...], 2, stages=3):"), 11)
  assert "this loop's run-time bounds are uint32: a pipelined loop counts in int32" in str(e)
  assert e.hint == "convert them: lo[...].astype(jnp.int32), hi[...].astype(jnp.int32) (values below 2**31)"
  got = tiles_between_fixed(jnp.asarray(x), jnp.uint32(1), jnp.uint32(8), interpret=True)
  np.testing.assert_allclose(np.asarray(got), x.reshape(9, 64, 128)[1:8:2].sum(0), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- enumerate of a run-time range
@mg.mgpu_kernel(out_shape=lambda x, n: S((3,), F32), grid=(1,))
def weighted_by_position(x, n, out):
  s = 0.0
  for k, i in enumerate(range(2, n[...])):
    s += x[i] * k
  out[0] = s
  t = 0.0
  for k, i in enumerate(range(n[...] - 1, -1, -2), start=10):     # counting down, from 10
    t += x[i] * k
  out[1] = t
  u = 0.0
  for k, i in enumerate(range(n[...]), 1):
    if x[i] > 2.0:
      break
    u += x[i] * k
  out[2] = u


@mg.mgpu_kernel(out_shape=lambda x, n: S((64, x.shape[1]), F32), grid=(1,))
def weighted_tiles(x, n, out):
  buf = ml.smem((64, x.shape[1]))
  acc = ml.zeros((64, x.shape[1]), F32)
  for j, t in enumerate(ml.range(1, n[...], stages=2)):
    ml.copy(x.at[ml.ds(t * 64, 64)], buf)
    acc = acc + buf[...] * j.astype(jnp.float32)
  out[...] = acc


def _weighted_want(xs, n):
  u = 0.0
  for k, i in enumerate(range(n), 1):
    if xs[i] > 2.0:
      break
    u += xs[i] * k
  return [sum(xs[i] * k for k, i in enumerate(range(2, n))),
          sum(xs[i] * k for k, i in enumerate(range(n - 1, -1, -2), start=10)), u]


def test_enumerate_of_a_run_time_range():
  xs = (np.arange(20, dtype=np.float32) * 0.5 - 3).astype(np.float32)
  for n in (0, 3, 6, 19):
    got = weighted_by_position(jnp.asarray(xs), jnp.int32(n), interpret=True)
    np.testing.assert_allclose(np.asarray(got), _weighted_want(xs, n), rtol=1e-6, atol=1e-6)
  x = np.random.default_rng(8).standard_normal((64 * 6, 128)).astype(np.float32)
  got = weighted_tiles(jnp.asarray(x), jnp.int32(5), interpret=True)
  np.testing.assert_allclose(np.asarray(got), sum(x[t * 64:(t + 1) * 64] * j for j, t in enumerate(range(1, 5))),
                             rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(weighted_by_position, S((20,), F32), S((), I32))
  assert "@mosaic_gpu" in _export(weighted_tiles, S(x.shape, F32), S((), I32))


@pytest.mark.gpu
def test_gpu_enumerate_of_a_run_time_range():
  xs = (np.arange(20, dtype=np.float32) * 0.5 - 3).astype(np.float32)
  for n in (0, 6, 19):
    np.testing.assert_allclose(np.asarray(weighted_by_position(jnp.asarray(xs), jnp.int32(n))), _weighted_want(xs, n),
                               rtol=1e-6, atol=1e-6)
  x = np.random.default_rng(8).standard_normal((64 * 6, 128)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(weighted_tiles(jnp.asarray(x), jnp.int32(5))),
                             sum(x[t * 64:(t + 1) * 64] * j for j, t in enumerate(range(1, 5))), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- a list a run-time loop grows
@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), F32), grid=(1,))
def doubled_into_list(x, n, out):
  vals = []
  for i in range(n[...]):
    vals.append(x[i] * 2.0)                         # a run-time count: no list of it
  out[0] = vals[0]


@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), F32), grid=(1,))
def doubled_stored(x, n, out):
  for i in range(n[...]):
    out[i] = x[i] * 2.0
  for i in range(n[...], x.shape[0]):
    out[i] = 0.0


def test_a_list_a_run_time_loop_grows_is_hinted_to_store_each_value():
  x = jnp.asarray(np.arange(64, dtype=np.float32))
  e = _raises(doubled_into_list, x, jnp.int32(3))
  assert isinstance(e, mg.LoopCarryTypeError) and e.code == "MG005"
  assert (e.lineno, e.col_offset) == (_line_of("vals.append(x[i] * 2.0)"), 4)
  assert "vals is rebound inside a runtime loop to a list of 1" in str(e)
  assert e.hint.startswith("a run-time loop cannot change vals's length (its trips are not known while tracing): store"
                           " each trip's value instead, out[i] = x[i] * 2.0, and read the values back")
  want = np.zeros(64, np.float32)
  want[:3] = np.arange(3) * 2
  np.testing.assert_array_equal(np.asarray(doubled_stored(x, jnp.int32(3), interpret=True)), want)


# ---------------------------------------------------------------- a continue before a pipelined loop's loads
@mg.mgpu_kernel(out_shape=lambda pages, bt: S((bt.shape[0], 16, pages.shape[2]), F32),
                grid=lambda pages, bt: (bt.shape[0],))
def pages_skipping_holes(pages, bt, out):
  """A block table's -1 entries skipped before the page's load: the load moves up (a skipped trip loads
  the window at page -1, zeros, and drops it)."""
  b = ml.program_id(0)
  buf = ml.smem((16, pages.shape[2]))
  acc = ml.zeros((16, pages.shape[2]), F32)
  for j in ml.range(bt.shape[1], stages=2):
    if bt[b, j] < 0:
      continue
    ml.copy(pages.at[bt[b, j]], buf)
    acc = acc + buf[...]
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, skip, n: S((64, x.shape[1]), F32), grid=(1,))
def pairs_skipping(x, skip, n, out):
  """Two loads, each after its own continue."""
  b1 = ml.smem((64, x.shape[1]))
  b2 = ml.smem((64, x.shape[1]))
  acc = ml.zeros((64, x.shape[1]), F32)
  for k in ml.range(n[...] - 1, stages=3):
    if skip[k] != 0:
      continue
    ml.copy(x.at[ml.ds(k * 64, 64)], b1)
    if skip[k + 1] != 0:
      continue
    ml.copy(x.at[ml.ds((k + 1) * 64, 64)], b2)
    acc = acc + b1[...] - b2[...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, skip, n: S((64, x.shape[1]), F32), grid=(1,))
def skip_reads_the_buffer(x, skip, n, out):
  buf = ml.smem((64, x.shape[1]))
  acc = ml.zeros((64, x.shape[1]), F32)
  for k in ml.range(n[...], stages=2):
    if skip[k] != 0:
      acc = acc + buf[...]                          # the last trip's tile: the load cannot move above it
      continue
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    acc = acc + buf[...]
  out[...] = acc


def _pages_data():
  rng = np.random.default_rng(9)
  pages = rng.standard_normal((10, 16, 128)).astype(np.float32)
  bt = np.array([[0, -1, 3, 4], [-1, -1, -1, -1], [9, 8, -1, 1]], np.int32)
  want = np.stack([sum((pages[p] for p in row if p >= 0), np.zeros((16, 128), np.float32)) for row in bt])
  return pages, bt, want


def _pairs_data():
  x = np.random.default_rng(10).standard_normal((64 * 9, 128)).astype(np.float32)
  skip = np.array([0, 1, 0, 0, 1, 1, 0, 1, 0], np.int32)
  want = sum(x[k * 64:(k + 1) * 64] - x[(k + 1) * 64:(k + 2) * 64] for k in range(8) if not skip[k] and not skip[k + 1])
  return x, skip, want


def test_a_continue_before_a_pipelined_loops_loads_moves_them_up():
  pages, bt, want = _pages_data()
  got = pages_skipping_holes(jnp.asarray(pages), jnp.asarray(bt), interpret=True)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
  x, skip, want = _pairs_data()
  got = pairs_skipping(jnp.asarray(x), jnp.asarray(skip), jnp.int32(9), interpret=True)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(pages_skipping_holes, S(pages.shape, F32), S(bt.shape, I32))
  assert "@mosaic_gpu" in _export(pairs_skipping, S(x.shape, F32), S(skip.shape, I32), S((), I32))
  e = _raises(skip_reads_the_buffer, jnp.asarray(x), jnp.asarray(skip), jnp.int32(9))
  assert isinstance(e, mg.UnsupportedSyntaxError) and e.code == "MG001"
  assert (e.lineno, e.col_offset) == (_line_of("acc = acc + buf[...]                          # the last") + 1, 6)
  assert "continue before the loads of a pipelined loop is not supported in a kernel" in str(e)


@pytest.mark.gpu
def test_gpu_a_continue_before_a_pipelined_loops_loads():
  pages, bt, want = _pages_data()
  np.testing.assert_allclose(np.asarray(pages_skipping_holes(jnp.asarray(pages), jnp.asarray(bt))), want,
                             rtol=1e-5, atol=1e-5)
  x, skip, want = _pairs_data()
  np.testing.assert_allclose(np.asarray(pairs_skipping(jnp.asarray(x), jnp.asarray(skip), jnp.int32(9))), want,
                             rtol=1e-5, atol=1e-5)
