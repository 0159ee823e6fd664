"""Probe 17 (helpers auditing the docs' claims and register shapes): 8-bit max/min/argmax were
rejected though the docs said they work; a full reduction with keepdims=True was MG204; bf16
max and cummax gave -0.0 where jnp gives +0.0 in interpret mode; argmax(axis=None); and hints
that named variables the kernel does not have, or that could not fix the error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype), x))
def max_and_cummax(x, m, c):
  m[...] = ml.max(x[...], axis=1)
  c[...] = ml.cummax(x[...], axis=1)


@pytest.mark.parametrize("dt", [jnp.float32, jnp.float16, jnp.bfloat16])
def test_max_of_signed_zeros_is_positive_in_every_float(dt):
  """bfloat16 gave -0.0: the signed-zero rule skipped ml_dtypes' floats."""
  x = jnp.zeros((8, 128), dt).at[:, 64:].set(-0.0)
  m, c = max_and_cummax(x, interpret=True)
  assert not np.signbit(np.asarray(m, np.float32)).any()
  assert not np.signbit(np.asarray(c, np.float32)[:, -1]).any()


@mg.mgpu_kernel(out_shape=lambda x: (S((1,), x.dtype), S((x.shape[0],), x.dtype), S((x.shape[1],), x.dtype),
                                      S((x.shape[0],), I32), S((1,), I32)))
def narrow_extremes(x, a, b, c, d, e):
  t = x[...]
  a[0] = ml.max(t)
  b[...] = ml.min(t, axis=1)
  c[...] = ml.max(t, axis=0)
  d[...] = ml.argmin(t, axis=1)
  e[0] = ml.argmax(t[3])                       # axis=None of a vector: its index


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype), S((x.shape[0],), I32)))
def float8_rows(x, a, b):
  a[...] = ml.max(x[...], axis=1)
  b[...] = ml.argmax(x[...], axis=1)


@pytest.mark.parametrize("dt", [jnp.int8, jnp.uint8])
def test_8bit_max_min_and_arg_reductions(dt):
  """Were MG106 ('ml.max of int8 values is not supported'); they compute in 32 bits, exactly."""
  x = (rand.normal(rand.key(1), (8, 128)) * 50).astype(dt)
  got = narrow_extremes(x, interpret=True)
  want = (x.max()[None], x.min(1), x.max(0), jnp.argmin(x, 1), jnp.argmax(x[3])[None])
  for g, w in zip(got, want):
    assert g.dtype == w.dtype
    np.testing.assert_array_equal(g, w)
  jax.export.export(jax.jit(narrow_extremes), platforms=["cuda"])(S(x.shape, dt))


def test_float8_row_max_and_argmax():
  x = (rand.normal(rand.key(2), (8, 128)) * 20).astype(jnp.float8_e4m3fn)
  a, b = float8_rows(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(a, F32), np.asarray(x.astype(F32).max(1)))
  np.testing.assert_array_equal(b, jnp.argmax(x.astype(F32), 1))
  jax.export.export(jax.jit(float8_rows), platforms=["cuda"])(S(x.shape, jnp.float8_e4m3fn))


@mg.mgpu_kernel(out_shape=lambda x: (S((1, 1), x.dtype), S((1, 1), x.dtype), S((1, 1), F32), x))
def keepdims_everything(x, a, b, c, d):
  a[...] = ml.sum(x[...], keepdims=True)
  b[...] = ml.max(x[...], axis=(0, 1), keepdims=True)
  c[...] = ml.mean(x[...], keepdims=True)
  d[...] = x[...] - ml.max(x[...], axis=(-1, 0), keepdims=True)


def test_full_reductions_with_keepdims():
  """Were MG204 ('(1, 1): register tensors need a multiple of 128 elements')."""
  x = rand.normal(rand.key(0), (16, 64))
  got = keepdims_everything(x, interpret=True)
  want = (x.sum(keepdims=True), x.max(keepdims=True), x.mean(keepdims=True), x - x.max(keepdims=True))
  for g, w in zip(got, want):
    assert g.shape == w.shape
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(keepdims_everything), platforms=["cuda"])(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: (x, S((1,), I32)))
def argmax_of_a_tile(x, out, idx):
  out[...] = x[...]
  idx[0] = ml.argmax(x[...])


@mg.mgpu_kernel(out_shape=lambda x: (S((), I32), S((), I32), S((1, 1), I32)))
def flat_extremes(x, a, b, c):
  a[()] = ml.argmax(x[...])
  b[()] = x[...].argmin()
  c[...] = ml.argmax(x[...], keepdims=True)


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16, jnp.int8, jnp.uint8, jnp.bool_])
def test_argmax_of_a_tile_without_axis_is_jnps_flat_index(dtype):
  """It was MG003 (one static axis, or None for a 1-D tensor only): now the row-major index of the
  first extreme, as jnp.argmax(x), ties and NaNs included."""
  r = np.random.default_rng(5)
  for trial in range(3):
    x = jnp.asarray(r.integers(-40, 40, (64, 32)), dtype)           # small integers: many ties
    if trial == 2 and dtype == F32:
      x = x.at[40, 7].set(jnp.nan).at[50, 1].set(jnp.nan)          # the first NaN wins, as in jnp
    got = flat_extremes(x, interpret=True)
    want = (jnp.argmax(x), jnp.argmin(x), jnp.argmax(x, keepdims=True))
    for g, w in zip(got, want):
      assert np.shape(g) == np.shape(w)
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  idx = argmax_of_a_tile(jnp.asarray(r.standard_normal((8, 128)), F32), interpret=True)[1]
  assert idx.shape == (1,)
  jax.export.export(jax.jit(flat_extremes), platforms=["cuda"])(S((64, 32), dtype))


@pytest.mark.gpu
def test_gpu_argmax_of_a_tile_without_axis_matches_jnp():
  x = rand.normal(rand.key(3), (64, 32), F32).at[17, 9].set(9.0).at[60, 2].set(9.0)
  got = flat_extremes(x)
  assert [int(g.reshape(())) for g in got] == [int(jnp.argmax(x)), int(jnp.argmin(x)), int(jnp.argmax(x))]


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def loop_variable_after_the_loop(x, n, out):
  i = 0
  for i in range(n[0]):
    pass
  out[...] = x[...] + i


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def loop_variable_only_in_the_loop(x, n, out):
  for i in range(n[0]):
    pass
  out[...] = x[...] + i


def test_loop_variable_after_a_runtime_loop_hints_a_carry():
  """The hint said 'assign i before the branch or loop', which the kernel already did. (A loop
  variable bound before the loop is now Python's after it, the last index or its value before:
  tests/test_probe29e.py.)"""
  expect(loop_variable_only_in_the_loop, [S((128,), I32), S((1,), I32)], mg.UnboundNameError, "i\n",
         "i is possibly unbound here: i is the loop variable of the loop at line"
         f" {loop_variable_only_in_the_loop.fn.__code__.co_firstlineno + 2}, which is not defined after a"
         " runtime loop (it may run no trips)",
         hint="keep what you need in a variable the loop carries: last = 0 before the loop, last = i in its"
              " body, then use last after it")
  x = jnp.zeros((128,), I32)
  for n, last in ((4, 3), (0, 0)):
    np.testing.assert_array_equal(loop_variable_after_the_loop(x, jnp.array([n], I32), interpret=True), x + last)


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def tuple_leaf_changes_dtype(x, n, out):
  v = x[...]
  st = (v, (v, v))
  for _ in range(n[0]):
    st = (v, (v, v.astype(jnp.float16)))
  out[...] = st[0]


def test_a_carried_tuple_leaf_hint_rebuilds_the_tuple():
  """The hint said `st[1][1] = st[1][1].astype(...)`: an item of a tuple cannot be assigned."""
  expect(tuple_leaf_changes_dtype, [S((128,), F32), S((1,), I32)], mg.LoopCarryTypeError, "st = (v, (v, v.astype",
         "st[1][1] enters the loop as a float32 tensor of shape (128,) but an iteration makes it a float16 tensor of shape (128,)",
         hint="convert it back at the end of the body: st = (st[0], (st[1][0], st[1][1].astype(jnp.float32)))")


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_plus_column_statistic(x, out):
  t = x[...]
  out[...] = ml.max(t, axis=1) + ml.max(t, axis=0)


def test_two_reductions_in_two_layouts_say_so():
  """The message said the vector was 'used as a column vector of another tile' (nothing is broadcast)."""
  # the reduction's vector is now copied through SMEM for its uses (probe 33c; it was MG204)
  x = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)), F32)
  np.testing.assert_array_equal(row_plus_column_statistic(x, interpret=True), x.max(1) + x.max(0))


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def floor_divide(x, y, out):
  out[...] = x[...] // y[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def other_of_another_dtype(x, out):
  i = ml.program_id(0)
  out[...] = x.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 5, other=i)


def test_hints_name_the_kernels_own_values():
  """They said ml.where(d == 0, 1, d) and other=s.astype(...). An integer division by a run-time zero was MG950
  with that hint; since probe 57a it is jnp's (XLA's: x // 0 is -2, or -1 where x is 0)."""
  x = jnp.asarray(np.arange(-64, 64), I32)
  np.testing.assert_array_equal(floor_divide(x, jnp.zeros(128, I32), interpret=True), x // jnp.zeros(128, I32))
  expect(other_of_another_dtype, [S((128,), F32)], mg.DtypeMismatchError, "x.at[",
         "ml.load's other (int32) differs from x.at[ml.ds(0, 128)]'s dtype (float32)",
         hint="convert it: other=i.astype(jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def with_scalar(x, s: ml.scalar, out):
  out[...] = x[...] + s


def _indented_call():
  if True:
    return with_scalar(jnp.ones(128, I32), 2**31, interpret=True)


def test_a_call_site_error_points_at_the_call_not_its_indentation():
  with pytest.raises(mg.SignatureError) as e:
    _indented_call()
  assert e.value.filename == __file__
  assert e.value.col_offset == 11 and "return with_scalar(" in e.value.render()     # the call itself


@pytest.mark.gpu
def test_probe17_gpu():
  x = (rand.normal(rand.key(1), (8, 128)) * 50).astype(jnp.int8)
  got = jax.jit(narrow_extremes)(x)
  want = (x.max()[None], x.min(1), x.max(0), jnp.argmin(x, 1), jnp.argmax(x[3])[None])
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g, w)
  f = rand.normal(rand.key(0), (16, 64))
  got = jax.jit(keepdims_everything)(f)
  want = (f.sum(keepdims=True), f.max(keepdims=True), f.mean(keepdims=True), f - f.max(keepdims=True))
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
