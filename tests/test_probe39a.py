"""Probe 39a (a user's kernels around nine known gaps): Python's truth of run-time numbers in if/while
conditions, slices of run-time bounds and static size, keepdims statistics of small 3-D tiles, ..."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- number conditions are their truth
@mg.mgpu_kernel(out_shape=lambda x, n, f: x, grid=(1,))
def truthy(x, n, f, out):
  """A Triton author's flags and counters read from memory, tested as Python tests them."""
  v = x[...]
  if n[0]:
    v = v * 2.0
  if not n[1]:
    v = v + 10.0
  if f[0]:
    v = v - 0.5
  k = n[2]
  while k:
    v = v + 1.0
    k = k - 1
  c = n[2]
  while c and n[3]:
    v = v * 1.5
    c -= 1
    if c == 1:
      break
  if n[0] > 0 and n[3]:
    v = -v
  out[...] = v


def _truthy_want(x, n, f):
  v = np.asarray(x)
  if n[0]:
    v = v * 2.0
  if not n[1]:
    v = v + 10.0
  if f[0]:
    v = v - 0.5
  v = v + n[2]
  c = n[2]
  while c and n[3]:
    v = v * 1.5
    c -= 1
    if c == 1:
      break
  if n[0] > 0 and n[3]:
    v = -v
  return v


_TRUTHY_CASES = (([0, 1, 2, 3], [0.0]), ([5, 0, 3, 0], [np.nan]), ([1, 3, 0, 2], [-0.0]), ([-2, 0, 4, 1], [2.5]))


@pytest.mark.parametrize("nd", [jnp.int32, jnp.uint8])
def test_number_conditions_are_their_truth(nd):
  """`if n[0]:`, `while k:`, `not n[1]`, `while c and n[3]:` (with a break) of int scalars, `if f[0]:` of a
  float: MG003 (compare it) or MG001 (use & and |); as Python, a number's truth is that it is not zero."""
  x = _rand((128, 64), 0)
  for nn, ff in _TRUTHY_CASES:
    n, f = np.asarray(nn).astype(nd), np.asarray(ff, np.float32)
    got = truthy(x, jnp.asarray(n), jnp.asarray(f), interpret=True)
    np.testing.assert_allclose(np.asarray(got), _truthy_want(x, n.tolist(), ff), rtol=1e-6)
  _export(truthy, S(x.shape, F32), S((4,), nd), S((1,), F32))


@pytest.mark.gpu
def test_gpu_number_conditions_are_their_truth():
  x = _rand((128, 64), 1)
  for nn, ff in _TRUTHY_CASES:
    got = jax.jit(truthy)(x, jnp.asarray(nn, I32), jnp.asarray(ff, F32))
    np.testing.assert_allclose(np.asarray(got), _truthy_want(x, nn, ff), rtol=1e-6)


# ---------------------------------------------------------------- run-time slices of static size
@mg.mgpu_kernel(out_shape=lambda x, s: (S((64, x.shape[1]), x.dtype), S((64, 64), x.dtype), S((64, x.shape[1]), x.dtype)),
                grid=(1,))
def windows_at(x, s, rows, square, staged):
  """x[start:start + 64] as a Pallas/NumPy author writes a window at a run-time offset: read into registers,
  on two axes, and copied by TMA."""
  start = s[0]
  rows[...] = x[start:start + 64, :]
  square[...] = x[start:64 + start, start + 8:start + 72]
  buf = ml.smem((64, x.shape[1]))
  ml.copy(x.at[2 * start:2 * (start + 32)], buf)
  staged[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def program_rows(x, out):
  pid = ml.program_id(0)
  out[pid * 64:(pid + 1) * 64] = x[pid * 64:(pid + 1) * 64] * 3.0


def test_run_time_slices_of_static_size_are_windows():
  """`x[s:s + 64]` and `x[pid * 64:(pid + 1) * 64]` were MG003 (slice bounds must be static ints) whose
  hint knew the size: the slice is the window ml.ds(s, 64)."""
  x = _rand((256, 128), 2)
  got = windows_at(x, jnp.asarray([40], I32), interpret=True)
  for g, w in zip(got, (x[40:104], x[40:104, 48:112], x[80:144])):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  np.testing.assert_array_equal(np.asarray(program_rows(x, interpret=True)), np.asarray(x * 3.0))
  _export(windows_at, S(x.shape, F32), S((1,), I32))
  _export(program_rows, S(x.shape, F32))


def test_run_time_slice_past_the_end_is_ml_ds_out_of_bounds():
  """Such a window past the array's end reads as ml.ds's does: interpret mode's OutOfBoundsError, at the slice."""
  x = _rand((256, 128), 3)
  with pytest.raises(mg.OutOfBoundsError) as info:
    windows_at(x, jnp.asarray([220], I32), interpret=True)
  assert info.value.lineno == _line_of("rows[...] = x[start:start + 64, :]")


@pytest.mark.gpu
def test_gpu_run_time_slices_of_static_size_are_windows():
  x = _rand((256, 128), 4)
  got = jax.jit(windows_at)(x, jnp.asarray([40], I32))
  for g, w in zip(got, (x[40:104], x[40:104, 48:112], x[80:144])):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  np.testing.assert_array_equal(np.asarray(jax.jit(program_rows)(x)), np.asarray(x * 3.0))


# ---------------------------------------------------------------- ** of 8-bit integers
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x), grid=(1,))
def powers_8bit(x, sq, cube, one, mixed):
  """A quantised tile's squares (an int8 L2 term), as jnp writes them: products wrapping mod 2**8."""
  v = x[...]
  sq[...] = v ** 2
  cube[...] = v ** 3
  one[...] = v ** 0
  mixed[...] = (v // 3) ** 5 + v % 7


@pytest.mark.parametrize("dt", [jnp.int8, jnp.uint8])
def test_integer_powers_of_8bit_tiles_wrap_as_jnps(dt):
  """`v ** 2` of an int8 tile was MG106 (no register arithmetic on 8-bit types) though its products (`v * v`)
  compute in 32 bits and wrap back as jnp's."""
  x = (np.arange(256).reshape(2, 128) - (128 if dt == jnp.int8 else 0)).astype(dt)
  got = powers_8bit(jnp.asarray(x), interpret=True)
  xj = jnp.asarray(x)
  for g, w in zip(got, (xj ** 2, xj ** 3, xj ** 0, (xj // 3) ** 5 + xj % 7)):
    assert g.dtype == dt
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  _export(powers_8bit, S(x.shape, dt))


@pytest.mark.gpu
def test_gpu_integer_powers_of_8bit_tiles_wrap_as_jnps():
  xj = jnp.asarray((np.arange(256).reshape(2, 128) - 128).astype(np.int8))
  for g, w in zip(jax.jit(powers_8bit)(xj), (xj ** 2, xj ** 3, xj ** 0, (xj // 3) ** 5 + xj % 7)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
