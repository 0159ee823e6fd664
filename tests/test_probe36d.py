"""Probe 36d (program structure and control flow as a Python programmer writes it): loop variables
the body rebinds, `and`/`or` of run-time booleans, `while 1:` with a break, ... each compared with
Python (or jnp) in interpret mode and exported for CUDA."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32
X = jnp.arange(1024, dtype=F32).reshape(8, 128) / 100


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- a loop variable the body rebinds
@mg.mgpu_kernel(out_shape=lambda x, n: S((8,), I32))
def rebound_loop_variable(x, n: ml.scalar, out):
  j = 7
  for j in range(n):
    j = j * 10
  k = 3
  for k in range(1, n, 2):
    if x[k, 0] > 2.0:
      k = -k
  m = 0
  for m in range(n):
    m += 100
  out[...] = ml.where(ml.arange(8) == 0, j, ml.where(ml.arange(8) == 1, k, m))


def _rebound_want(n):
  j, k, m = 7, 3, 0
  for j in range(n):
    j = j * 10
  for k in range(1, n, 2):
    if float(X[k, 0]) > 2.0:
      k = -k
  for m in range(n):
    m += 100
  return np.array([j, k] + [m] * 6, np.int32)


def test_a_loop_variable_the_body_rebinds_is_what_the_last_trip_left_after_the_loop():
  """It was the last index (40 came out as 4): the loop computed the index after it, ignoring the body's
  own binding, as Python's `for j in range(n): j = j * 10` leaves 10 * (n - 1)."""
  for n in (0, 1, 5, 8):
    np.testing.assert_array_equal(np.asarray(rebound_loop_variable(X, n, interpret=True)), _rebound_want(n))
  assert "mosaic_gpu" in str(_export(rebound_loop_variable, S((8, 128), F32), S((), I32)))


@pytest.mark.gpu
def test_gpu_rebound_loop_variable_matches_python():
  for n in (0, 1, 5, 8):
    np.testing.assert_array_equal(np.asarray(jax.jit(rebound_loop_variable)(X, n)), _rebound_want(n))


# ---------------------------------------------------------------- and / or of run-time booleans
@mg.mgpu_kernel(out_shape=lambda x, n: S((8,), I32))
def guarded_reads(x, n: ml.scalar, out):
  i = 0
  while i < n and x[i, 0] < 5.0:         # x[n, 0] is never read: n may be x's length
    i += 1
  c = 0
  for r in range(8):
    if r >= n or x[r, 0] > 2.0 or x[r, 1] < 0.0:
      c += 1
  hit = 0
  for r in range(8):
    hit += (r < n and x[r, 3] > 1.0) and True
  out[...] = ml.where(ml.arange(8) == 0, i, ml.where(ml.arange(8) == 1, c, hit))


def _guarded_want(n):
  x = np.asarray(X)
  i = 0
  while i < n and x[i, 0] < 5.0:
    i += 1
  c = sum(1 for r in range(8) if r >= n or x[r, 0] > 2.0 or x[r, 1] < 0.0)
  hit = sum(1 for r in range(8) if r < n and x[r, 3] > 1.0)
  return np.array([i, c] + [hit] * 6, np.int32)


def test_and_or_of_run_time_booleans_short_circuit_as_python():
  """They were MG001 ('and'/'or' on run-time scalars), whose hint `(i < n) & (x[i, 0] < 5.0)` reads
  x[n, 0], past the array, where Python's `and` never does."""
  for n in (0, 3, 8):
    np.testing.assert_array_equal(np.asarray(guarded_reads(X, n, interpret=True)), _guarded_want(n))
  assert "mosaic_gpu" in str(_export(guarded_reads, S((8, 128), F32), S((), I32)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def tensor_or(x, out):
  v = x[...]
  out[...] = ml.where((v > 1.0) or (v < 0.5), v, 0.0)


def test_or_of_register_tensors_is_still_hinted_as_the_elementwise_or():
  expect(tensor_or, [S((8, 128), F32)], mg.UnsupportedSyntaxError, "(v > 1.0) or (v < 0.5)",
         "'and'/'or' on register values is not supported in a kernel",
         hint="use & and | on booleans (both sides are computed): (v > 1.0) | (v < 0.5)")


@pytest.mark.gpu
def test_gpu_short_circuit_and_or_match_python():
  for n in (0, 3, 8):
    np.testing.assert_array_equal(np.asarray(jax.jit(guarded_reads)(X, n)), _guarded_want(n))


# ---------------------------------------------------------------- while 1: with a break
@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def while_one(x, out):
  i = 0
  while 1:
    i += 1
    if x[i, 0] > 3.0:
      break
  out[...] = i


def test_while_one_with_a_break_runs_as_while_true():
  """It was MG003: the flag a break sets False met the loop's condition 1 (an int) on the other path."""
  assert int(while_one(X, interpret=True)) == 3
  assert "mosaic_gpu" in str(_export(while_one, S((8, 128), F32)))
