"""Probe 41r: memory hazards a kernel author makes by mistake (nothing silently wrong): an atomic
update of an SMEM buffer nothing filled, overlapping program windows whose step is shorter than
their block."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from locate import expect

F32 = jax.ShapeDtypeStruct((1024,), jnp.float32)
I32 = jax.ShapeDtypeStruct((1024,), jnp.int32)


def _export(kernel, *specs):
  return jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- atomics into unfilled SMEM
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def smem_atomic_add_unfilled(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  ml.atomic_add(buf, x.at[ml.ds(i * 128, 128)][...])
  out.at[ml.ds(i * 128, 128)][...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def smem_atomic_max_unfilled(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.int32)
  ml.atomic_max(buf, x.at[ml.ds(i * 128, 128)][...])
  out.at[ml.ds(i * 128, 128)][...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def smem_atomic_add_filled(x, out):          # the hint followed
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  buf[...] = ml.zeros(buf.shape, buf.dtype)
  ml.atomic_add(buf, x.at[ml.ds(i * 128, 128)][...])
  ml.atomic_add(buf, x.at[ml.ds(i * 128, 128)][...])
  out.at[ml.ds(i * 128, 128)][...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def smem_atomic_max_filled(x, out):          # the hint followed
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.int32)
  buf[...] = ml.full(buf.shape, -2147483648, buf.dtype)
  ml.atomic_max(buf, x.at[ml.ds(i * 128, 128)][...])
  out.at[ml.ds(i * 128, 128)][...] = buf[...]


def test_an_atomic_update_of_smem_nothing_filled_is_rejected_while_compiling():
  # (the CUDA export accepted it: the GPU adds into garbage)
  e = expect(smem_atomic_add_unfilled, [F32], mg.UninitializedReadError, "ml.atomic_add(buf",
             "buf is read before anything writes it: SMEM starts with garbage",
             hint="ml.atomic_add combines with what buf holds, and SMEM starts with garbage: fill buf first,"
                  " buf[...] = ml.zeros(buf.shape, buf.dtype), on every path to this update")
  with pytest.raises(mg.UninitializedReadError):
    _export(smem_atomic_add_unfilled, F32)
  expect(smem_atomic_max_unfilled, [I32], mg.UninitializedReadError, "ml.atomic_max(buf",
         "buf is read before anything writes it: SMEM starts with garbage",
         hint="ml.atomic_max combines with what buf holds, and SMEM starts with garbage: fill buf first,"
              " buf[...] = ml.full(buf.shape, -2147483648, buf.dtype), on every path to this update")
  assert e.end_lineno == e.lineno
  # the hints followed: compile and compute
  x = jnp.arange(1024, dtype=jnp.float32) - 300
  np.testing.assert_array_equal(np.asarray(smem_atomic_add_filled(x, interpret=True)), np.asarray(2 * x))
  xi = jnp.arange(1024, dtype=jnp.int32) - 300
  np.testing.assert_array_equal(np.asarray(smem_atomic_max_filled(xi, interpret=True)), np.asarray(xi))
  assert "mosaic_gpu" in _export(smem_atomic_add_filled, F32)
  assert "mosaic_gpu" in _export(smem_atomic_max_filled, I32)


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 128,))
def smem_atomic_add_maybe_filled(x, s, out):
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  if s[0] > 0:
    buf[...] = ml.zeros((128,), jnp.float32)
  ml.atomic_add(buf, x.at[ml.ds(i * 128, 128)][...])
  out.at[ml.ds(i * 128, 128)][...] = buf[...]


def test_interpret_mode_names_the_atomic_fill_where_a_run_time_branch_skipped_it():
  x = jnp.arange(1024, dtype=jnp.float32)
  np.testing.assert_array_equal(np.asarray(smem_atomic_add_maybe_filled(x, jnp.ones(1, jnp.int32), interpret=True)),
                                np.asarray(x))
  with pytest.raises(mg.UninitializedReadError) as info:
    smem_atomic_add_maybe_filled(x, jnp.zeros(1, jnp.int32), interpret=True)
  e = info.value
  assert e.lineno == smem_atomic_add_maybe_filled.fn.__code__.co_firstlineno + 6 and e.col_offset == 2
  assert e.message == "buf[:] is read in program (0, 0, 0) before anything writes it: SMEM starts with garbage"
  assert e.hint == ("ml.atomic_add combines with what buf holds, and SMEM starts with garbage: fill buf first,"
                    " buf[...] = ml.zeros(buf.shape, buf.dtype), on every path to this update")


# ---------------------------------------------------------------- windows stepped by less than their size
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (9,))
def overlapping_runs_masked(x, out):
  pid = ml.program_id(0)
  offs = pid * 120 + ml.arange(128)
  m = offs < x.shape[0]
  ml.store(out.at[offs], ml.load(x.at[offs], mask=m, other=0.0) * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (9,))
def overlapping_runs_fixed(x, out):            # the hint followed
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(128)
  m = offs < x.shape[0]
  ml.store(out.at[offs], ml.load(x.at[offs], mask=m, other=0.0) * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (8,))
def overlapping_scatter_runs(x, out):
  pid = ml.program_id(0)
  offs = pid * 120 + ml.arange(128)
  out[offs] = x[offs] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (8,))
def overlapping_scatter_runs_fixed(x, out):     # the hint followed
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(128)
  out[offs] = x[offs] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (9,))
def overlapping_tma_windows(x, out):
  pid = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  ml.copy(x.at[ml.ds(pid * 120, 128)], buf)
  ml.copy(buf, out.at[ml.ds(pid * 120, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (8, 2))
def overlapping_rows_2d(x, out):
  r = ml.program_id(0)
  c = ml.program_id(1)
  out.at[ml.ds(r * 120, 128), ml.ds(c * 64, 64)][...] = x.at[ml.ds(r * 120, 128), ml.ds(c * 64, 64)][...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def ragged_tiles_fixed(x, out):                 # test_safety_params's overlapping_tiles, its hint followed
  i = ml.program_id(0)
  m = i * 128 + ml.arange(128) < 416
  out.at[ml.ds(i * 128, 128)].store(x.at[ml.ds(i * 128, 128)].load(mask=m, other=0.0), mask=m)


STEP = ("the programs' windows of out start 120 apart ({}) but each writes 128 elements, so neighbours overlap by 8:"
        " step them by their size, {}{}, and the inputs' windows the same way")
LAUNCH = ", launching ml.cdiv(1024, 128) = 8 programs along grid axis 0"


def test_overlapping_windows_name_the_step_as_the_fix():
  expect(overlapping_runs_masked, [F32], mg.RaceError, "ml.store(out",
         "program (0, 0, 0) and program (1, 0, 0) both write out[120]: programs run in no fixed order, so the"
         " result depends on timing", hint=STEP.format("pid * 120", "pid * 128", LAUNCH))
  expect(overlapping_tma_windows, [F32], mg.RaceError, "ml.copy(buf",
         "program (0, 0, 0) and program (1, 0, 0) both write out[120]: programs run in no fixed order, so the"
         " result depends on timing", hint=STEP.format("pid * 120", "pid * 128", LAUNCH))
  # a 2-D grid, whose windows fall short of the end too: the step is named first
  expect(overlapping_rows_2d, [jax.ShapeDtypeStruct((1024, 128), jnp.float32)], mg.UncoveredOutputError,
         "out.at[", "out[968:1024, :] is never written: none of the 16 programs of grid (8, 2) writes it, so 7168"
         " of 131072 elements of out would stay uninitialised", hint=STEP.format("r * 120", "r * 128", ""))
  # a run of positions indexing out: the window's store (probe 42u; a scatter, found in interpret mode, before)
  x = jnp.arange(1024, dtype=jnp.float32)
  with pytest.raises(mg.UncoveredOutputError) as info:
    overlapping_scatter_runs(x, interpret=True)
  assert info.value.hint == STEP.format("pid * 120", "pid * 128", "")
  # the hints followed
  np.testing.assert_array_equal(np.asarray(overlapping_runs_fixed(x, interpret=True)), np.asarray(2 * x))
  np.testing.assert_array_equal(np.asarray(overlapping_scatter_runs_fixed(x, interpret=True)), np.asarray(2 * x))
  assert "mosaic_gpu" in _export(overlapping_runs_fixed, F32)
  assert "mosaic_gpu" in _export(overlapping_scatter_runs_fixed, F32)
  x = jnp.arange(416, dtype=jnp.float32)
  np.testing.assert_array_equal(np.asarray(ragged_tiles_fixed(x, interpret=True)), np.asarray(x))
  assert "mosaic_gpu" in _export(ragged_tiles_fixed, jax.ShapeDtypeStruct((416,), jnp.float32))


# ---------------------------------------------------------------- SMEM written on another program's path
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def smem_written_on_the_other_branch(x, out):
  pid = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  if pid % 2 == 0:
    buf[...] = x.at[ml.ds(pid * 128, 128)][...]
    out.at[ml.ds(pid * 128, 128)][...] = buf[...]
  else:
    out.at[ml.ds(pid * 128, 128)][...] = buf[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def smem_written_before_the_branch(x, out):    # the hint followed: filled on every path
  pid = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  buf[...] = x.at[ml.ds(pid * 128, 128)][...]
  if pid % 2 == 0:
    out.at[ml.ds(pid * 128, 128)][...] = buf[...]
  else:
    out.at[ml.ds(pid * 128, 128)][...] = buf[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def smem_half_filled_in_program_0(x, out):
  pid = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  buf.at[0:64][...] = x.at[ml.ds(pid * 128, 64)][...]
  if pid > 0:
    buf.at[64:128][...] = x.at[ml.ds(pid * 128 + 64, 64)][...]
  out.at[ml.ds(pid * 128, 128)][...] = buf[...]


def test_smem_another_programs_branch_wrote_is_unwritten_in_this_program():
  # (SMEM is each CTA's own: program 0's write does not fill program 1's buffer; the export accepted it)
  expect(smem_written_on_the_other_branch, [F32], mg.UninitializedReadError, "buf[...] * 2",
         "buf is read in program (1, 0, 0) before anything writes it: SMEM starts with garbage",
         hint="fill buf first, with ml.copy(x.at[...], buf) or buf[...] = value, on every path to this read")
  with pytest.raises(mg.UninitializedReadError):
    _export(smem_written_on_the_other_branch, F32)
  expect(smem_half_filled_in_program_0, [F32], mg.UninitializedReadError, "buf[...]\n",
         "buf[64:128] is read in program (0, 0, 0) before anything writes it: SMEM starts with garbage",
         hint="fill buf first, with ml.copy(x.at[...], buf) or buf[...] = value, on every path to this read")
  x = jnp.arange(1024, dtype=jnp.float32)
  want = jnp.where((jnp.arange(1024) // 128) % 2 == 0, x, 2 * x)
  np.testing.assert_array_equal(np.asarray(smem_written_before_the_branch(x, interpret=True)), np.asarray(want))
  assert "mosaic_gpu" in _export(smem_written_before_the_branch, F32)
