"""Probe 38i (training-step fused kernels: fused Adam/SGD/Lion updates in place, global-norm clipping,
cross-entropy with label smoothing and ignore_index, activation and norm backwards, int4 dequantisation
into a dot, loss scaling with inf/NaN checks, bf16/f32 master weights).

A window or other static value (`s = ml.ds(...)`) that each branch of a run-time `if`, or each trip of a
run-time loop, binds for its own use was an error at the `if` (MG003, "s is a Python DSlice after one
branch of this if and a Python DSlice after the other") or the loop (MG005), though nothing read it
after them: a multi-tensor optimizer step that picks its tensor by program id was rejected."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs, **kw):
  return jax.export.export(jax.jit(lambda *a: fn(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()


def _rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- a window per branch, per trip
@mg.mgpu_kernel(out_shape=lambda a, b, ga, gb: (a, b), input_output_aliases={0: 0, 1: 1},
                grid=lambda a, b, ga, gb: (a.shape[0] // 512 + b.shape[0] // 512,))
def multi_tensor_sgd(a, b, ga, gb, ao, bo):
  pid = ml.program_id(0)
  na = a.shape[0] // 512
  if pid < na:
    s = ml.ds(pid * 512, 512)
    ao.at[s][...] = a.at[s][...] - 0.1 * ga.at[s][...]
  else:
    s = ml.ds((pid - na) * 512, 512)
    bo.at[s][...] = b.at[s][...] - 0.1 * gb.at[s][...]


def test_a_window_bound_in_each_branch_for_its_own_use_compiles_and_computes():
  a, b, ga, gb = _rnd(1024, 0), _rnd(1536, 1), _rnd(1024, 2), _rnd(1536, 3)
  got = multi_tensor_sgd(a, b, ga, gb, interpret=True)
  np.testing.assert_allclose(np.asarray(got[0]), a - np.float32(0.1) * ga, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(got[1]), b - np.float32(0.1) * gb, rtol=1e-6)
  assert "mosaic_gpu" in _export(multi_tensor_sgd, *(S(v.shape, F32) for v in (a, b, ga, gb))).lower()


@pytest.mark.gpu
def test_multi_tensor_sgd_on_the_gpu():
  a, b, ga, gb = _rnd(1024, 0), _rnd(1536, 1), _rnd(1024, 2), _rnd(1536, 3)
  got = multi_tensor_sgd(*(jnp.asarray(v) for v in (a, b, ga, gb)))
  np.testing.assert_allclose(np.asarray(got[0]), a - np.float32(0.1) * ga, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(got[1]), b - np.float32(0.1) * gb, rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda a: a)
def window_per_trip(a, out):
  s = ml.ds(0, 512)
  out.at[s][...] = a.at[s][...]
  for c in range(1, a.shape[0] // 512):
    if c % 2 == 0:
      s = ml.ds(c * 512, 512)
      out.at[s][...] = a.at[s][...] * 2
    else:
      s = ml.ds(c * 512, 512)
      out.at[s][...] = a.at[s][...] * 3


def test_a_window_rebound_on_each_trip_of_a_runtime_loop_compiles_and_computes():
  a = _rnd(2048, 4)
  want = a * np.repeat(np.array([1, 3, 2, 3], np.float32), 512)
  np.testing.assert_allclose(np.asarray(window_per_trip(a, interpret=True)), want, rtol=1e-6)
  assert "mosaic_gpu" in _export(window_per_trip, S((2048,), F32)).lower()


@mg.mgpu_kernel(out_shape=lambda a: a)
def window_read_after_loop(a, out):
  s = ml.ds(0, 512)
  for c in range(a.shape[0] // 512):
    s = ml.ds(c * 512, 512)
    out.at[s][...] = a.at[s][...] * 2
  out.at[s][...] = a.at[s][...]


@mg.mgpu_kernel(out_shape=lambda a: a)
def window_read_before_rebinding(a, out):
  s = ml.ds(0, 512)
  for c in range(1, a.shape[0] // 512 + 1):
    out.at[s][...] = a.at[s][...] * 2
    s = ml.ds(c * 512, 512)


@pytest.mark.parametrize("kernel, at", [(window_read_after_loop, "s = ml.ds(c"),
                                        (window_read_before_rebinding, "s = ml.ds(c")])
def test_a_window_a_later_trip_or_statement_reads_is_still_reported(kernel, at):
  expect(kernel, [S((2048,), F32)], mg.LoopCarryTypeError, at,
         "s is rebound inside a runtime loop to a window ml.ds(start, size); only register values and numbers"
         " can change across iterations",
         hint="use ml.static_range to unroll the loop, or compute it before the loop")


@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[0] // 512,))
def window_chosen_at_run_time(a, out):
  pid = ml.program_id(0)
  if pid % 2 == 0:
    s = ml.ds(pid * 512, 512)
  else:
    s = ml.ds((pid ^ 1) * 512 + 512, 512)
  out.at[s][...] = a.at[s][...] * 2


@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[0] // 512,))
def window_chosen_followed(a, out):
  pid = ml.program_id(0)
  if pid % 2 == 0:
    s_start = pid * 512
  else:
    s_start = (pid ^ 1) * 512 + 512
  s = ml.ds(s_start, 512)
  out.at[s][...] = a.at[s][...] * 2


def test_a_window_chosen_by_a_runtime_if_and_read_after_it_says_how_to_choose_its_start():
  line = where(window_chosen_at_run_time, "if pid % 2")[0]
  e = expect(window_chosen_at_run_time, [S((2048,), F32)], mg.KernelTypeError, "if pid % 2",
             f"s is a different window ml.ds(start, 512) on each path through this if, and is read after it; a"
             f" window is made while compiling, so it cannot be chosen at run time",
             hint="choose its start in each branch (s_start = ... in both) and make the window after the if:"
                  " s = ml.ds(s_start, 512)")
  assert e.notes == tuple(f"{e.filename}:{line + k}:4: s is assigned here" for k in (1, 3))
  a = _rnd(2048, 5)
  np.testing.assert_allclose(np.asarray(window_chosen_followed(a, interpret=True)), a * 2, rtol=1e-6)
  assert "mosaic_gpu" in _export(window_chosen_followed, S((2048,), F32)).lower()
