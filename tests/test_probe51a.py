"""Probe 51a (nothing silently wrong, what probe 50f left). Kernels that compiled, ran and gave wrong numbers with
nothing said:

- `ml.program_id(1)` on a grid of one axis (`grid=(n,)`) was 0 in every program, as Triton's, with no word: the
  kernel wrote one tile n times. Now MG203 at the ml.program_id (the grid's axes as written reach the trace:
  mgpu_dsl/kernel.py, frontend/ops/control.py); a grid written with the axis, `grid=(n, 1)`, keeps its 0.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- ml.program_id of an axis the grid lacks
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def rows_by_second_axis(x, out):
  i = ml.program_id(0)
  j = ml.program_id(1)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + j


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64))
def tiles_by_third_axis(x, out):
  i, j, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = x.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] * (b + 1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=4)
def int_grid_second_axis(x, out):
  pid = ml.program_id(axis=1)
  out.at[ml.ds(pid * 128, 128)][...] = x.at[ml.ds(pid * 128, 128)][...]


def test_program_id_of_an_axis_a_grid_of_fewer_axes_lacks_is_mg203():
  expect(rows_by_second_axis, [S((512,), F32)], mg.IndexOutOfBoundsError, "ml.program_id(1)",
         "ml.program_id(1) reads grid axis 1, but the grid has 1 axis: it would be 0 in every program",
         hint="the grid's programs are ml.program_id(0); to launch programs along axis 1 too, give the grid 2 extents,"
              " grid=(n0, n1) (or a callable returning them), or write 0 where 0 is meant")
  expect(tiles_by_third_axis, [S((128, 128), F32)], mg.IndexOutOfBoundsError, "ml.program_id(2)",
         "ml.program_id(2) reads grid axis 2, but the grid has 2 axes: it would be 0 in every program",
         hint="the grid's programs are ml.program_id(0) and ml.program_id(1); to launch programs along axis 2 too, give"
              " the grid 3 extents, grid=(n0, n1, n2) (or a callable returning them), or write 0 where 0 is meant")
  expect(int_grid_second_axis, [S((512,), F32)], mg.IndexOutOfBoundsError, "ml.program_id(axis=1)",
         "ml.program_id(1) reads grid axis 1, but the grid has 1 axis: it would be 0 in every program")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64, 1))
def tiles_with_written_third_axis(x, out):
  i, j, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = x.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] * (b + 1)


def test_program_id_of_an_axis_written_with_one_program_stays_zero():
  """The same specialisation key for the grids (2, 2) and (2, 2, 1) would share one trace: the axes are in it."""
  x = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
  np.testing.assert_array_equal(tiles_with_written_third_axis(x, interpret=True), x)
  tiles_with_written_third_axis.check(S((128, 128), F32))
