"""A pipelined loop's TMA loads run trips ahead: loads of GMEM that the same loop writes (an
output read back, an input aliased to an output) are rejected where a write may land in a
window before the original program read it (frontend/pipeline_hazards.py), and kept where the
windows of different trips cannot meet (in-place updates, tile by tile)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
BM, BN = 8, 128
X = S((64, BN), jnp.float32)


def running_sum_reference(x):
  o, acc = np.array(x), np.zeros((BM, BN), np.float32)
  for t in range(x.shape[0] // BM - 1):
    acc = acc + o[t * BM:(t + 1) * BM]
    o[(t + 1) * BM:(t + 2) * BM] = acc
  return o


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def running_from_out(x, out, *, stages: ml.constexpr = 3):
  x_s = ml.smem((BM, BN))
  o_s = ml.smem((BM, BN))
  acc = ml.zeros((BM, BN), jnp.float32)
  for t in ml.range(x.shape[0] // BM - 1, stages=stages):
    ml.copy(out.at[ml.ds(t * BM, BM)], x_s)          # the tile the previous trip stored
    acc = acc + x_s[...]
    o_s[...] = acc
    ml.copy(o_s, out.at[ml.ds((t + 1) * BM, BM)])


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def running_from_aliased_input(x, out, *, stages: ml.constexpr = 3):
  x_s = ml.smem((BM, BN))
  acc = ml.zeros((BM, BN), jnp.float32)
  for t in ml.range(x.shape[0] // BM - 1, stages=stages):
    ml.copy(x.at[ml.ds(t * BM, BM)], x_s)
    acc = acc + x_s[...]
    out.at[ml.ds((t + 1) * BM, BM)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def scale_in_place(x, out, *, stages: ml.constexpr = 3):
  x_s = ml.smem((BM, BN))
  for t in ml.range(1, x.shape[0] // BM, stages=stages):
    ml.copy(x.at[ml.ds(t * BM, BM)], x_s)            # each trip writes back only its own tile
    out.at[ml.ds(t * BM, BM)][...] = x_s[...] * 2


def test_a_pipelined_load_of_what_the_previous_trip_stored_is_rejected():
  e = expect(running_from_out, [X], mg.PipelineError, "ml.copy(out.at[ml.ds(t * BM, BM)], x_s)",
             "this pipelined load reads out, which the loop writes: with stages=3 it is issued up to"
             " 2 trip(s) early, before those writes")
  assert "stages=1" in e.hint and e.notes and "the write" in e.notes[0]


def test_an_input_aliased_to_the_output_counts_as_the_output():
  expect(running_from_aliased_input, [X], mg.PipelineError, "ml.copy(x.at[ml.ds(t * BM, BM)], x_s)",
         "this pipelined load reads x, which the loop writes (through out, its alias): with stages=2"
         " it is issued up to 1 trip(s) early, before those writes", stages=2)


@pytest.mark.parametrize("kernel", [running_from_out, running_from_aliased_input])
def test_one_stage_reads_back_what_the_loop_wrote(kernel):
  x = jnp.arange(64 * BN, dtype=jnp.float32).reshape(64, BN) / 100
  np.testing.assert_allclose(np.asarray(kernel(x, stages=1, interpret=True)), running_sum_reference(np.asarray(x)),
                             rtol=1e-6)


def test_in_place_tiles_that_no_other_trip_touches_stay_pipelined():
  x = rand.normal(rand.key(0), (64, BN), jnp.float32)
  want = np.asarray(x).copy()
  want[BM:] *= 2
  np.testing.assert_array_equal(np.asarray(scale_in_place(x, interpret=True)), want)
  assert "stages=3" in scale_in_place.typed_ir(X)


@pytest.mark.gpu
def test_gpu_in_place_tiles_pipelined():
  x = rand.normal(rand.key(1), (64, BN), jnp.float32)
  want = np.asarray(x).copy()
  want[BM:] *= 2
  np.testing.assert_array_equal(np.asarray(jax.jit(scale_in_place)(x)), want)
