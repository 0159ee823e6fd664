"""Probe 42v (a user's control flow and data-driven kernels): a `return` inside a run-time loop that sits
in an `if` (run-time or static; a search under a mode flag, one branch of an if/elif chain) ends the kernel
as a return in a top-level loop does (it was MG001, "return inside a runtime loop", or "return under a
run-time condition" for a while loop, whose hint did not apply)."""
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


def _search_data():
  x = np.minimum(np.random.default_rng(0).standard_normal(40), 1.0).astype(np.float32)
  x[17] = 3.0
  return x


# ---------------------------------------------------------------- return in a loop inside an if
@mg.mgpu_kernel(out_shape=lambda x, m: S((2,), I32), grid=(1,))
def first_hit_if(x, m, out):
  """The first element above 2 when m > 0 (a for loop under a run-time if), else -1."""
  out[1] = 5
  if m[...] > 0:
    for i in range(x.shape[0]):
      if x[i] > 2.0:
        out[0] = i
        return
  out[0] = -1


@mg.mgpu_kernel(out_shape=lambda x, m: S((2,), I32), grid=(1,))
def first_hit_while(x, m, out):
  """The same with a while loop."""
  out[1] = 5
  if m[...] > 0:
    i = 0
    while i < x.shape[0]:
      if x[i] > 2.0:
        out[0] = i
        return
      i += 1
  out[0] = -1


@mg.mgpu_kernel(out_shape=lambda x, m: S((2,), I32), grid=(1,))
def first_hit_static(x, m, out, *, search: ml.constexpr = True):
  """Under a static if (a constexpr)."""
  out[1] = 5
  if search:
    for i in range(x.shape[0]):
      if x[i] > 2.0:
        out[0] = i
        return
  out[0] = -1


def _first_hit_want(x, m):
  hit = np.flatnonzero(x > 2.0)
  return np.array([hit[0] if m > 0 and hit.size else -1, 5], np.int32)


@pytest.mark.parametrize("kernel", [first_hit_if, first_hit_while, first_hit_static])
def test_return_in_a_loop_inside_an_if_ends_the_kernel(kernel):
  x = _search_data()
  for xs, m in ((x, 1), (x, 0), (np.minimum(x, 1.0), 1)):
    if kernel is first_hit_static and m == 0:
      continue
    got = kernel(jnp.asarray(xs), jnp.int32(m), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), _first_hit_want(xs, m))
  assert "@mosaic_gpu" in _export(kernel, S((40,), F32), S((), I32))


@mg.mgpu_kernel(out_shape=lambda x, mode: x, grid=lambda x, mode: (x.shape[0] // 64,))
def per_tile_mode(x, mode, out):
  """An if/elif chain on a per-tile mode whose middle branch searches its tile's first column and returns."""
  i = ml.program_id(0)
  buf = ml.smem((64, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 64, 64)], buf)
  v = buf[...]
  md = mode[i]
  if md == 0:
    out.at[ml.ds(i * 64, 64)][...] = v
  elif md == 1:
    for r in range(64):
      if buf[r, 0] > 1.0:
        out.at[ml.ds(i * 64, 64)][...] = v * 0.0 + r.astype(jnp.float32)
        return
    out.at[ml.ds(i * 64, 64)][...] = -v
  else:
    out.at[ml.ds(i * 64, 64)][...] = v * 3.0


def _per_tile_data():
  x = np.random.default_rng(1).standard_normal((256, 32)).astype(np.float32)
  x[64:69, 0] = 0.0
  x[69, 0] = 2.0
  x[192:, 0] = np.minimum(x[192:, 0], 0.5)
  return x, np.array([0, 1, 2, 1], np.int32)


def _per_tile_want(x):
  w = x.copy().reshape(4, 64, 32)
  w[1], w[2], w[3] = 5.0, w[2] * 3, -w[3]
  return w.reshape(256, 32)


def test_return_in_a_loop_of_an_elif_branch():
  x, mode = _per_tile_data()
  got = per_tile_mode(jnp.asarray(x), jnp.asarray(mode), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _per_tile_want(x))
  assert "@mosaic_gpu" in _export(per_tile_mode, S(x.shape, F32), S((4,), I32))


@ml.inline
def _find_above(x, m):
  if m > 0:
    for i in range(x.shape[0]):
      if x[i] > 2.0:
        return i
  return -1


@mg.mgpu_kernel(out_shape=lambda x, m: S((), I32), grid=(1,))
def find_with_helper(x, m, out):
  out[...] = _find_above(x, m[...])


def test_helper_return_in_a_loop_inside_an_if():
  x = _search_data()
  for xs, m in ((x, 1), (x, 0), (np.minimum(x, 1.0), 1)):
    got = find_with_helper(jnp.asarray(xs), jnp.int32(m), interpret=True)
    assert int(got) == _first_hit_want(xs, m)[0]
  assert "@mosaic_gpu" in _export(find_with_helper, S((40,), F32), S((), I32))


@pytest.mark.gpu
def test_gpu_return_in_a_loop_inside_an_if():
  x = _search_data()
  for kernel in (first_hit_if, first_hit_while):
    for xs, m in ((x, 1), (x, 0), (np.minimum(x, 1.0), 1)):
      np.testing.assert_array_equal(np.asarray(kernel(jnp.asarray(xs), jnp.int32(m))), _first_hit_want(xs, m))
  x, mode = _per_tile_data()
  np.testing.assert_array_equal(np.asarray(per_tile_mode(jnp.asarray(x), jnp.asarray(mode))), _per_tile_want(x))
  got = find_with_helper(jnp.asarray(_search_data()), jnp.int32(1))
  assert int(got) == 17
