"""Tuples and lists of register values carried through runtime loops, `while` and `if`: each leaf
is one loop value; the structure may not change across iterations or between branches."""
import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


@mg.mgpu_kernel(out_shape=lambda x: S((3, 64), F32))
def per_group_sums(x, out):
  accs = [ml.zeros((64,), F32) for j in range(3)]
  for i in range(x.shape[0]):
    accs = [accs[j] + x.at[i, j][...] for j in ml.static_range(3)]
  for j in ml.static_range(3):
    out.at[j][...] = accs[j]


def test_a_list_of_vectors_is_carried_through_a_runtime_loop():
  x = rand.normal(rand.key(0), (5, 3, 64), F32)
  np.testing.assert_allclose(per_group_sums(x, interpret=True), x.sum(0), rtol=1e-5, atol=1e-5)
  text = jax.export.export(jax.jit(per_group_sums), platforms=["cuda"])(x).mlir_module()
  assert "mosaic_gpu" in text


@mg.mgpu_kernel(out_shape=lambda x, n: S((2, 64), F32))
def nested_while(x, n, out):
  st = (ml.zeros((64,), F32), [ml.zeros((64,), F32), 0])
  i = 0
  while i < n[0]:
    a, (b, c) = st
    if i % 2 == 0:
      st = (a + x.at[i, 0][...], [b, c + 1])
    else:
      st = (a, [b + x.at[i, 1][...], c])
    i = i + 1
  out.at[0][...] = st[0]
  out.at[1][...] = st[1][0] + st[1][1].astype(F32)


def test_nested_tuples_are_carried_through_while_and_if():
  x = rand.normal(rand.key(1), (5, 2, 64), F32)
  got = nested_while(x, jnp.array([5], I32), interpret=True)
  np.testing.assert_allclose(got[0], x[0::2, 0].sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got[1], x[1::2, 1].sum(0) + 3, rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((64,), F32))
def tuple_becomes_vector(x, out):
  st = (ml.zeros((64,), F32), ml.zeros((64,), F32))
  for i in range(4):
    st = st[0] + x.at[i][...]
  out[...] = st


def test_a_carried_tuple_that_becomes_a_vector_is_reported_at_the_assignment():
  expect(tuple_becomes_vector, [S((4, 64), F32)], mg.LoopCarryTypeError, "st = st[0] +",
         "st changes from a tuple of 2 values to a float32 tensor of shape (64,) inside the loop",
         hint="keep st a tuple of the same length, of register values or numbers")


@mg.mgpu_kernel(out_shape=lambda x: S((64,), F32))
def leaf_changes_dtype(x, out):
  st = [ml.zeros((64,), F32), ml.zeros((64,), F32)]
  for i in range(4):
    st = [st[0], x.at[i][...]]
  out[...] = st[0] + st[1].astype(F32)


def test_a_leaf_changing_dtype_is_named_by_its_index():
  expect(leaf_changes_dtype, [S((4, 64), jnp.float16)], mg.LoopCarryTypeError, "st = [st[0], x",
         "st[1] enters the loop as a float32 tensor of shape (64,) but an iteration makes it a float16 tensor of shape (64,)",
         hint="convert it back at the end of the body: st = [st[0], st[1].astype(jnp.float32)]")


@mg.mgpu_kernel(out_shape=lambda x: S((64,), F32), grid=(2,))
def branches_differ_in_length(x, out):
  st = (ml.zeros((64,), F32), ml.zeros((64,), F32))
  if ml.program_id(0) == 0:
    st = (x[...], x[...])
  else:
    st = (x[...],)
  out[...] = st[0]


def test_branches_giving_tuples_of_different_lengths_are_reported():
  expect(branches_differ_in_length, [S((64,), F32)], mg.KernelTypeError, "if ml.program_id(0) == 0:",
         "st is a tuple of 2 after one branch of this if and a tuple of 1 after the other; only register"
         " values and numbers (or tuples and lists of them) can differ between branches",
         hint="give st the same kind of value in both branches")


@mg.mgpu_kernel(out_shape=lambda x: S((64,), F32))
def static_tuple_unchanged(x, out):
  shape = (64,)
  acc = ml.zeros(shape, F32)
  for i in range(4):
    shape = (64,)
    acc = acc + x.at[i][...]
  out[...] = acc + ml.zeros(shape, F32)


def test_a_tuple_of_numbers_rebound_to_itself_stays_static():
  x = rand.normal(rand.key(2), (4, 64), F32)
  np.testing.assert_allclose(static_tuple_unchanged(x, interpret=True), x.sum(0), rtol=1e-5, atol=1e-5)


@ml.inline
def _shifted_row(x, out, i, shift=None):
  """An optional tuple argument of run-time values, tested with `is None` / `is not None`."""
  if shift is None:
    out.at[i][...] = x.at[i][...]
  else:
    s, t = shift
    out.at[i][...] = x.at[i][...] * 2.0 + (s + t).astype(F32)
  if shift is not None:
    out.at[i][...] = out.at[i][...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (x.shape[0],))
def optional_tuple(x, out):
  i = ml.program_id(0)
  if i % 2 == 0:
    _shifted_row(x, out, i)
  else:
    _shifted_row(x, out, i, (i, i + 1))


def test_is_none_of_a_tuple_holding_run_time_values_is_static():
  """`shift is None` where shift is a tuple of run-time scalars: Python's identity test (was MG001,
  "comparing tuples that hold runtime values")."""
  x = rand.normal(rand.key(1), (4, 64), F32)
  want = np.array(x)
  for i in (1, 3):
    want[i] = want[i] * 2.0 + (2 * i + 1) + 1.0
  np.testing.assert_allclose(optional_tuple(x, interpret=True), want, rtol=1e-6)
  assert "mosaic_gpu" in jax.export.export(jax.jit(optional_tuple), platforms=["cuda"])(x).mlir_module()
