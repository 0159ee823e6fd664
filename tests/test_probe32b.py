"""Probe 32b (a regression hunt on break/continue, loop-else, walrus whiles, bool relayouts, flat
argmax, 64-bit narrowing, interpret errors under jit, partial kernels and autotune pickling,
combined with vmap/jit, nested and pipelined loops)."""
import functools
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


# ---------------------------------------------------------------- jax.vmap of NumPy 64-bit arrays
@mg.mgpu_kernel(out_shape=lambda x: x)
def plus_one(x, out):
  out[...] = x[...] + 1


def test_vmap_over_numpy_int64_and_float64_arrays_takes_them_as_jax_does():
  """An eager call took np.arange(128) (int64 values that fit int32) as JAX takes it; under
  jax.vmap the custom_vmap rule saw the NumPy array itself and refused it as an int64 *spec*
  (MG006 'give the spec as jnp.int32'), where jnp's own vmap computes."""
  a = np.arange(256).reshape(2, 128)
  got = jax.vmap(lambda v: plus_one(v, interpret=True))(a)
  assert got.dtype == jnp.int32
  np.testing.assert_array_equal(got, a + 1)
  f = np.linspace(0.0, 1.0, 256).reshape(2, 128)
  got = jax.vmap(lambda v: plus_one(v, interpret=True))(f)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, (f + 1).astype(np.float32))


def test_vmap_over_numpy_int64_values_int32_cannot_hold_is_refused_as_an_eager_call_is():
  a = np.arange(256).reshape(2, 128) * 2 ** 40
  with pytest.raises(mg.SignatureError) as info:
    jax.vmap(lambda v: plus_one(v, interpret=True))(a)
  e = info.value
  assert e.message.startswith("plus_one: input 0 (x) is a NumPy int64 array holding ")
  assert "which int32 cannot hold" in e.message
  assert e.hint.endswith("else pass values int32 holds")


@pytest.mark.gpu
def test_gpu_vmap_over_numpy_int64_matches_interpret_mode():
  a = np.arange(256).reshape(2, 128)
  np.testing.assert_array_equal(jax.vmap(plus_one)(a), jax.vmap(lambda v: plus_one(v, interpret=True))(a))


# ---------------------------------------------------------------- pickling kernels bound under another name
def _scale_rows(x, out, *, scale: ml.constexpr = 1.0, bn: ml.constexpr = 128):
  i = ml.program_id(0)
  out.at[ml.ds(i * bn, bn)][...] = x.at[ml.ds(i * bn, bn)][...] * scale


def _rows_grid(x, bn=128, **kw):
  return (x.shape[0] // bn,)


partial_kernel = mg.mgpu_kernel(functools.partial(_scale_rows, scale=2.0), out_shape=lambda x, **kw: x,
                                grid=_rows_grid)
called_kernel = mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=_rows_grid)(_scale_rows)
tuned_partial = mg.autotune(configs=[dict(bn=128), dict(bn=256)])(
    mg.mgpu_kernel(functools.partial(_scale_rows, scale=3.0), out_shape=lambda x, **kw: x, grid=_rows_grid))


def test_a_kernel_bound_at_top_level_under_another_name_pickles_by_that_name():
  """A kernel made by calling mg.mgpu_kernel (on a functools.partial, as Pallas kernels are passed,
  or on a plain function) and an autotuned one of it, bound at a module's top level, raised
  PicklingError ("<module>._scale_rows is not this kernel": the name of the function it wraps)."""
  for k in (partial_kernel, called_kernel, tuned_partial, tuned_partial.kernel):
    assert pickle.loads(pickle.dumps(k)) is k
  x = jnp.arange(512, dtype=F32)
  np.testing.assert_array_equal(pickle.loads(pickle.dumps(partial_kernel))(x, interpret=True), np.asarray(x) * 2)
  np.testing.assert_array_equal(pickle.loads(pickle.dumps(tuned_partial))(x, interpret=True), np.asarray(x) * 3)


# ---------------------------------------------------------------- an inner loop's else holding a jump
@mg.mgpu_kernel(out_shape=lambda x: S((2,), I32))
def first_above_two(x, out):
  fi = -1
  fj = -1
  for i in range(x.shape[0]):
    for j in range(x.shape[1]):
      if x[i, j] > 2.0:
        fi = i
        fj = j
        break
    else:
      continue          # the inner loop ran out: next row
    break               # it broke: so does the outer one
  out[0] = fi
  out[1] = fj


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def rows_without_a_peak(x, out):
  c = 0
  for i in range(x.shape[0]):
    j = 0
    while j < x.shape[1]:
      if x[i, j] > 2.0:
        break
      j += 1
    else:
      c += 1
      continue
    c += 100 * j
  out[...] = c


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def columns_until_a_clean_row(x, out):
  c = 0
  for i in range(x.shape[0]):
    j = 0
    while j < x.shape[1]:
      if x[i, j] > 2.0:
        break
      j += 1
    else:
      break             # a row without a peak ends the outer loop
    c += j
  out[...] = c


def _reference(kind, x):
  fi = fj = -1
  c = 0
  for i in range(x.shape[0]):
    j = 0
    while j < x.shape[1]:
      if x[i, j] > 2.0:
        break
      j += 1
    else:
      if kind == "first":
        continue
      if kind == "count":
        c += 1
        continue
      break
    if kind == "first":
      fi, fj = i, j
      break
    c += 100 * j if kind == "count" else j
  return np.array([fi, fj], np.int32) if kind == "first" else c


def test_an_inner_loops_else_may_continue_or_break_the_outer_loop():
  """`for j ...: if c: break` then `else: continue` and `break` (the idiom that leaves two loops) was
  MG001 "continue is not supported in a kernel"; with an inner while, `else: break` was MG001 "break
  in a pipelined loop or one with a run-time step" (it was neither)."""
  rng = np.random.default_rng(0)
  for seed in range(3):
    x = rng.standard_normal((16, 16)).astype(np.float32) * (0.8 + 0.4 * seed)
    np.testing.assert_array_equal(first_above_two(jnp.asarray(x), interpret=True), _reference("first", x))
    assert int(rows_without_a_peak(jnp.asarray(x), interpret=True)) == _reference("count", x)
    assert int(columns_until_a_clean_row(jnp.asarray(x), interpret=True)) == _reference("clean", x)
  x = np.zeros((16, 16), np.float32)
  np.testing.assert_array_equal(first_above_two(jnp.asarray(x), interpret=True), [-1, -1])
  for k in (first_above_two, rows_without_a_peak, columns_until_a_clean_row):
    k.check(S((16, 16), F32))


@pytest.mark.gpu
def test_gpu_an_inner_loops_else_jumping_matches_interpret_mode():
  x = jnp.asarray(np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32))
  for k in (first_above_two, rows_without_a_peak, columns_until_a_clean_row):
    np.testing.assert_array_equal(k(x), k(x, interpret=True))
