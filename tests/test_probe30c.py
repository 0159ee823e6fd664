"""Probe 30c (a differential sweep of register layouts, benchmarks/probe_layouts.py): kernels whose
register layouts interpret mode does not model, checked against jnp, exported for CUDA, and on the
GPU compared with interpret mode."""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- ml.arange grids in the strided layout
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def grid3(x, out):
  a, b, c = x.shape
  g = ml.arange(a)[:, None, None] * 10000 + ml.arange(b)[None, :, None] * 100 + ml.arange(c)[None, None, :]
  out[...] = g + x[...]


@mg.mgpu_kernel(out_shape=lambda x, *, R: S((x.shape[0] * x.shape[1],), x.dtype),
                grid=lambda x, *, R: (ml.cdiv(x.shape[0], R),))
def masked_flatten(x, out, *, R: ml.constexpr):
  i = ml.program_id(0)
  r = i * R + ml.arange(R)
  v = x.at[ml.ds(i * R, R), :].load(mask=r[:, None] < x.shape[0], other=0)
  w = x.shape[1]
  out.at[ml.ds(i * R * w, R * w)].store(v.reshape(R * w), mask=i * R * w + ml.arange(R * w) < out.shape[0])


def _grid3_want(shape):
  a, b, c = shape
  return np.arange(a)[:, None, None] * 10000 + np.arange(b)[None, :, None] * 100 + np.arange(c)


def _mosaic_strided_starts(shape, vec):
  """The flat offset of each register's first element in Mosaic GPU's WGStridedFragLayout, per
  thread of the warpgroup (its linear_thread_idxs)."""
  regs = int(np.prod(shape)) // (128 * vec)
  return [[tid * vec + r * 128 * vec for r in range(regs)] for tid in range(128)]


_INT_OPS = types.SimpleNamespace(addi=lambda a, b: a + b, divui=lambda a, b: a // b,
                                 remui=lambda a, b: a % b, const=lambda v: v)


@pytest.mark.parametrize("shape,vec", [((4, 64, 2), 4), ((8, 64, 1), 4), ((16, 8, 8), 16), ((256, 2), 4),
                                       ((2, 64, 3), 1)])
def test_an_arange_of_a_strided_tile_indexes_each_element_of_a_register_that_crosses_rows(shape, vec):
  """It was silently wrong on the GPU: Mosaic's broadcasted_iota takes indices from foreach, which
  adds a register's element number to the last index alone, so in (4, 64, 2) int32 (vectors of 4)
  the third and fourth elements of a register had columns 2 and 3 and the first row's index. The
  lowering computes each element's index from its flat offset; here evaluated on integers over
  Mosaic's thread mapping."""
  from mgpu_dsl.lowering.elementwise import iota_registers
  want = np.indices(shape).reshape(len(shape), -1)
  for dim in range(len(shape)):
    for starts in _mosaic_strided_starts(shape, vec):
      got = iota_registers(starts, vec, shape, dim, _INT_OPS)
      for lin, elems in zip(starts, got):
        assert elems == [int(want[dim, lin + j]) for j in range(vec)]


@pytest.mark.parametrize("shape", [(4, 64, 2), (8, 64, 1), (2, 64, 3)])
def test_a_three_d_index_grid_exports_and_interprets(shape):
  x = jnp.arange(np.prod(shape), dtype=jnp.int32).reshape(shape) % 7
  got = np.asarray(grid3(x, interpret=True))
  np.testing.assert_array_equal(got, _grid3_want(shape) + np.asarray(x))
  _export(grid3, S(shape, jnp.int32))
  # registers of (4, 64, 2) and (8, 64, 1) int32 hold 4 elements crossing rows: their indices
  # are built element by element (Mosaic's iota inserts into an undefined vector instead)
  assert ("vector.from_elements" in grid3.mlir(S(shape, jnp.int32))) == (shape[-1] % 4 != 0 and shape[-1] != 3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4, 64, 2), (8, 64, 1), (2, 64, 3), (16, 8, 8), (4, 32, 24)])
def test_gpu_three_d_index_grid_matches_numpy(shape):
  x = jnp.zeros(shape, jnp.int32)
  np.testing.assert_array_equal(np.asarray(grid3(x)), _grid3_want(shape))


@pytest.mark.gpu
@pytest.mark.parametrize("w", [1, 2, 3, 4])
def test_gpu_row_masked_narrow_tile_flattens_as_numpy(w):
  x = jnp.arange(300 * w, dtype=jnp.int32).reshape(300, w)
  np.testing.assert_array_equal(np.asarray(masked_flatten(x, R=256)), np.asarray(x).reshape(-1))
