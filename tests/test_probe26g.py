"""Probe 26g (the docs' claims checked against the compiler): hints that led to a second error
(a loop carry started from a Python number meeting a tensor), a hint and a docs line that told to
compute a reduction's vector twice, and MG602 telling to launch more programs when a run-time
`if` skipped a program's write."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- carries started from a number
@mg.mgpu_kernel(out_shape=lambda x: x)
def int_carry_meets_tensor(x, o):
  acc = 0
  for c in range(2):
    acc = acc + x[...]
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def tensor_carry(x, o):                  # int_carry_meets_tensor's hint followed
  acc = ml.zeros((128,), jnp.float32)
  for c in range(2):
    acc = acc + x[...]
  o[...] = acc


def test_int_carry_meeting_a_tensor_hints_the_tensor_start():
  # the hint said acc = 0.0, which only led to MG005 (a scalar carry the loop makes a tensor),
  # whose hint is the tensor start
  # (since probe 33a acc + x computes in float32 as jnp's promotion does: the carry's change of type
  # is the error, at the same line, with the same tensor start)
  # (since probe 57g the range(2) loop is unrolled, as Python runs it: 0 + x + x; probe 57g's tests keep the MG005
  # and its hint for a run-time trip count)
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(int_carry_meets_tensor(x, interpret=True), 2 * x)
  _export(int_carry_meets_tensor, S((128,), F32))
  np.testing.assert_array_equal(tensor_carry(x, interpret=True), 2 * x)
  _export(tensor_carry, S((128,), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), x.dtype))
def keepdims_into_scalar_carry(x, d):
  v = x[...]
  t = 0.0
  for i in range(3):
    t = t + ml.sum(v, keepdims=True)
  d[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), x.dtype))
def scalar_carry(x, d):                  # keepdims_into_scalar_carry's hint followed
  v = x[...]
  t = 0.0
  for i in range(3):
    t = t + ml.sum(v)
  d[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), x.dtype))
def scalar_of_one_element(x, d):         # its other form
  v = x[...]
  t = 0.0
  for i in range(3):
    s = ml.sum(v, keepdims=True)
    t = t + s[0, 0]
  d[...] = t


def test_one_element_tensor_into_scalar_carry_keeps_the_scalar():
  # the hint was t = ml.zeros((1, 1), jnp.float32), and a loop cannot carry a one-element
  # tensor (MG204, whose hint says to carry the scalar); since probe 57g the range(3) loop is unrolled, as Python
  # runs it, so keepdims_into_scalar_carry computes too
  x = jnp.arange(8 * 128, dtype=F32).reshape(8, 128) / 1024
  for k in (scalar_carry, scalar_of_one_element, keepdims_into_scalar_carry):
    np.testing.assert_allclose(k(x, interpret=True), jnp.full((1, 1), 3 * x.sum()), rtol=1e-6)
    _export(k, S((8, 128), F32))


# ---------------------------------------------------------------- a row statistic as a column vector
@mg.mgpu_kernel(out_shape=lambda x: x)
def row_max_as_column(x, o):
  v = x[...]
  m = ml.max(v, axis=1)
  o[...] = v - m[:, None] + m        # (m[None, :] written out reads a copy of m: probe 33c)


@mg.mgpu_kernel(out_shape=lambda x: x)
def row_max_through_smem(x, o):          # row_max_as_column's hint followed
  v = x[...]
  m = ml.max(v, axis=1)
  tmp = ml.smem((64,), jnp.float32)
  tmp[...] = m
  o[...] = v - m[:, None] + tmp[...][None, :]


def test_reduction_used_as_row_and_column_hints_smem_not_twice():
  # the hint led with "compute the vector twice": a reduction computed again is a row statistic
  # again (MG204 once more)
  expect(row_max_as_column, [S((64, 64), F32)], mg.LayoutError, "v - m[:, None] + m",
         "m is used as a row statistic (one value per row) of one tile and as a column vector (one value"
         " per column) of another: a register vector lives in one of the two layouts",
         hint="pass one use through an SMEM vector: tmp = ml.smem((64,), jnp.float32); tmp[...] = m; then"
              " tmp[...] reads it in the layout its use needs (a reduction's vector has its tile's layout, so"
              " computing it again does not help)")
  x = rand.normal(rand.key(0), (64, 64), F32)
  m = x.max(axis=1)
  np.testing.assert_allclose(row_max_through_smem(x, interpret=True), x - m[:, None] + m[None, :], rtol=1e-6)
  _export(row_max_through_smem, S((64, 64), F32))


# ---------------------------------------------------------------- a write a run-time if skipped
@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=(2,))
def skipped_write(x, c, o):
  i = ml.program_id(0)
  if c[i] > 0:
    o.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...]


@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=(2,))
def written_on_every_path(x, c, o):      # skipped_write's hint followed
  i = ml.program_id(0)
  if c[i] > 0:
    o.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...]
  else:
    o.at[ml.ds(i * 64, 64)][...] = ml.zeros((64,), jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=(2,), input_output_aliases={0: 0})
def skipped_write_aliased(x, c, o):      # its other form
  i = ml.program_id(0)
  if c[i] > 0:
    o.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...] * 2


def test_write_skipped_by_runtime_if_says_so():
  # the grid's windows cover o; the hint was to launch more programs
  x, c = jnp.arange(128, dtype=F32), jnp.array([1, 0], jnp.int32)
  e = _raises(lambda: skipped_write(x, c, interpret=True))
  assert type(e) is mg.UncoveredOutputError and e.code == "MG602"
  assert (e.lineno, e.col_offset) == where(skipped_write, "o.at[ml.ds(i * 64, 64)][...] =")
  assert e.message == (
      "o[64:128] is never written: the write into o at line"
      f" {where(skipped_write, 'o.at[')[0]} is under the run-time condition at line"
      f" {where(skipped_write, 'if c[i]')[0]}, which skipped it in the programs whose windows hold these"
      " elements, and nothing else writes them, so 64 of 128 elements of o would stay uninitialised")
  assert e.hint == (
      "write o's window on every path: add an else: branch that writes the value meant for it there (zeros,"
      " or the input's values); or, to keep the old values where the condition is false, alias an input to o:"
      " @mgpu_kernel(..., input_output_aliases={input index: output index})")
  np.testing.assert_array_equal(written_on_every_path(x, c, interpret=True), jnp.where(jnp.arange(128) < 64, x, 0))
  _export(written_on_every_path, S((128,), F32), S((2,), jnp.int32))
  np.testing.assert_array_equal(skipped_write_aliased(x, c, interpret=True), jnp.where(jnp.arange(128) < 64, 2 * x, x))
  _export(skipped_write_aliased, S((128,), F32), S((2,), jnp.int32))
