"""Probe 28c (stencils, convolutions, pooling and windowed access): masked halo stores and masked
halo reads of an aliased input left out of the compile-time race proof (the export accepted what
interpret mode rejected), and hints for the natural forms of windowed access that, followed
literally, failed again: a small tile's window moved to 0 or past its SMEM buffer, a halo TMA
window starting off 16 bytes, a strided TMA window, `v[1::2]` hinted as `[0::2]`."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _three(x):
  p = np.pad(np.asarray(x), 1)
  return p[:-2] + p[1:-1] + p[2:]


# ---------------------------------------------------------------- masked halos in the race proof
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def halo_store(x, out):
  i = ml.program_id(0)
  idx = i * 128 - 8 + ml.arange(144)
  inside = (idx >= 0) & (idx < x.shape[0])
  v = x.at[ml.ds(i * 128 - 8, 144)].load(mask=inside, other=0.0)
  out.at[ml.ds(i * 128 - 8, 144)].store(v, mask=inside)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def own_part_store(x, out):              # the halo read, only the program's own part written
  i = ml.program_id(0)
  idx = i * 128 - 8 + ml.arange(144)
  v = x.at[ml.ds(i * 128 - 8, 144)].load(mask=(idx >= 0) & (idx < x.shape[0]), other=0.0)
  out.at[ml.ds(i * 128 - 8, 144)].store(v * 2, mask=(idx >= i * 128) & (idx < i * 128 + 128))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), input_output_aliases={0: 0})
def in_place_stencil(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  left = x.at[ml.ds(i * 128 - 1, 128)].load(mask=idx >= 1, other=0.0)
  out.at[ml.ds(i * 128, 128)][...] = left + x.at[ml.ds(i * 128, 128)][...]


def test_masked_halo_stores_that_overlap_are_a_race_while_compiling():
  # the masks are known while compiling, so the elements they keep are certain writes
  expect(halo_store, [S((512,), F32)], mg.RaceError, "out.at[ml.ds(i * 128 - 8, 144)].store(",
         "program (0, 0, 0) and program (1, 0, 0) both write out[120]: programs run in no fixed order, so the"
         " result depends on timing")
  x = jnp.asarray(np.random.default_rng(0).standard_normal(512), F32)
  np.testing.assert_array_equal(own_part_store(x, interpret=True), np.asarray(x) * 2)
  _export(own_part_store, S((512,), F32))


def test_a_masked_halo_read_of_an_aliased_input_is_a_race_while_compiling():
  expect(in_place_stencil, [S((512,), F32)], mg.RaceError, "x.at[ml.ds(i * 128 - 1, 128)].load(",
         "program (1, 0, 0) reads x[127], the memory of out (aliased), while program (0, 0, 0) writes out[127]:"
         " programs run in no fixed order, so the value read depends on timing")
