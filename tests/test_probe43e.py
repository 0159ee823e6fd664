"""Probe 43e (programs that talk to each other through GMEM: split-K with atomics, grid reductions,
counters, flags, look-back scans): a read in a `while` loop's condition (or in its first trip) was
never checked against other programs' writes and atomic updates, so a spin-wait on a flag or a counter
another program sets (`while flags[i - 1] == 0: pass`, a grid barrier on an atomic counter) exported for
CUDA, where it can hang; it is now the RaceError a plain read there is, with a hint that says why."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32

SPIN = ("a program cannot wait for another's write (a spin-wait on GMEM may never end: the GPU runs programs"
        " in no set order, not all at once, and nothing orders a plain read after another program's write); ")


@mg.mgpu_kernel(out_shape=lambda x, f: (S((8,), I32), S((1024,), F32)), grid=lambda x, f: (8,),
                input_output_aliases={1: 0})
def look_back(x, f, flags, out):      # flags start at 0: each program waits for its predecessor's flag
  i = ml.program_id(0)
  if i > 0:
    while flags[i - 1] == 0:
      pass
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
  flags[i] = 1


def test_a_spin_wait_on_another_programs_flag_is_a_race():
  """Exported for CUDA (a hang on the GPU when the predecessor is not resident); interpret mode said MG951."""
  expect(look_back, [S((1024,), F32), S((8,), I32)], mg.RaceError, "flags[i - 1]",
         "program (1, 0, 0) reads flags[0] while program (0, 0, 0) writes flags[0]: programs run in no fixed"
         " order, so the value read depends on timing",
         hint=SPIN + "programs do not wait for each other, so an output written by other programs cannot be read"
              " in the same launch: read it in a second kernel, or compute the value in this program from the"
              " inputs")


@mg.mgpu_kernel(out_shape=lambda x: (S((), I32), S((1024,), F32)), grid=lambda x: (8,))
def grid_barrier(x, count, out):          # a grid-wide barrier on a counter between two phases
  i = ml.program_id(0)
  ml.atomic_add(count, 1)
  while count[...] < ml.num_programs(0):
    pass
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0


def test_a_grid_barrier_on_an_atomic_counter_is_a_race():
  expect(grid_barrier, [S((1024,), F32)], mg.RaceError, "count[...]",
         "count is read here while other programs may still be adding to it with atomics: programs run in no"
         " fixed order, so the value read depends on timing",
         hint=SPIN + "an output that programs update with atomics holds the total only once the kernel has"
              " ended: read it in a second kernel (or in JAX after the call)")


@mg.mgpu_kernel(out_shape=lambda x: S((8,), I32), grid=lambda x: (8,))
def polls_in_the_body(x, flags):
  i = ml.program_id(0)
  flags[i] = 1
  k = 0
  while k < 10:                             # runs its first trip in every program
    k += flags[(i + 7) % 8] + 1
  flags[i] = k


def test_a_read_in_the_first_trip_of_a_while_is_checked():
  expect(polls_in_the_body, [S((1024,), F32)], mg.RaceError, "flags[(i + 7) % 8]",
         "program (1, 0, 0) reads flags[0] while program (0, 0, 0) writes flags[0]: programs run in no fixed"
         " order, so the value read depends on timing")
  # while reads of the program's own writes stay correct (the first test of a condition is certain now)
  x = jnp.asarray(np.array([1, -1, 2, -2, 0, 3, 1, 1], np.float32))
  np.testing.assert_array_equal(own_flag(x, interpret=True), np.where(np.asarray(x) > 0, 10, 13))
  jax.export.export(jax.jit(own_flag), platforms=["cuda"])(S((8,), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((8,), I32), grid=lambda x: (8,))
def own_flag(x, flags):
  i = ml.program_id(0)
  flags[i] = 3
  while flags[i] > 0 and x[i] > 0.0:        # reads only what this program wrote
    flags[i] = flags[i] - 1
  flags[i] = flags[i] + 10



@mg.mgpu_kernel(out_shape=lambda x, f, ids: S((8,), I32), grid=lambda x, f, ids: (8,), input_output_aliases={1: 0})
def waits_for(x, f, ids, flags):     # each program waits for the flag of the program ids names
  i = ml.program_id(0)
  p = ids[i]
  while flags[p] == 0:
    pass
  flags[i] = 1


def test_a_spin_wait_in_interpret_mode_is_reported_at_once():
  """The element waited for is data, so only interpret mode can see it; it ran programs one after another
  and spun 10 ** 7 trips (minutes) in program 0, whose successor sets the flag, before saying anything."""
  import time
  t = time.monotonic()
  with pytest.raises(mg.InterpretError) as info:
    waits_for(jnp.ones((8,), F32), jnp.zeros((8,), I32), jnp.asarray([1, 2, 3, 4, 5, 6, 7, 0], I32),
              interpret=True)
  e = info.value
  assert time.monotonic() - t < 60
  assert (e.lineno, e.col_offset) == where(waits_for, "while flags[p]")
  assert e.message == ("this while loop never ends in program (0, 0, 0): a trip changes neither what it carries"
                       " nor any memory, so its condition stays true")
  assert e.hint.startswith(SPIN)
