"""Probe 41r: memory hazards a kernel author makes by mistake (nothing silently wrong): an atomic
update of an SMEM buffer nothing filled, overlapping program windows whose step is shorter than
their block."""
import functools

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
