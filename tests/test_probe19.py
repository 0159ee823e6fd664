"""Probe 19 (a helper reviewing this session's own changes, another writing data-movement
kernels): a one-element ml.full stored its raw Python number (2.5 into a float32 output from an
int32 tensor); float8_e5m2 max turned inf into 57344; math on a keepdims full reduction was MG900
at export; a masked SMEM store's holes outlived their loop trip; int64 gather indices wrapped
mod 2**32; and messages for Triton habits (an atomic's old value, jnp.take, narrow gathers)."""
import os
import subprocess
import sys
import textwrap

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


@mg.mgpu_kernel(out_shape=lambda x, *, dt: S((1,), dt))
def one_element_full(x, o, *, dt: ml.constexpr):
  o[...] = ml.full((1,), 3.7, I32)


def test_a_one_element_full_stores_its_typed_value():
  """Stored 3.7 raw: 2.5 landed in a float32 output, and 3.7 into int32 was an MG104."""
  np.testing.assert_array_equal(one_element_full(jnp.zeros(8), dt=I32, interpret=True), [3])
  expect(one_element_full, [S((8,), F32)], mg.StoreDtypeError, "o[...] =",
         "cannot store a scalar (int32) into o (GMEM, float32): no implicit conversion", dt=F32)


@mg.mgpu_kernel(out_shape=lambda x: S((8,), x.dtype))
def row_max(x, o):
  o[...] = ml.max(x[...], axis=1)


def test_float8_e5m2_max_keeps_inf_and_e4m3fn_keeps_nan():
  """e5m2's max went through float32 and back with the saturating cast: inf became 57344 (then it
  was refused; since the sixteenth session its infinities are put back by their bits)."""
  z = jnp.zeros((8, 128)).at[:, 5].set(jnp.inf).at[:, 9].set(300.0).astype(jnp.float8_e5m2)
  assert np.isposinf(np.asarray(row_max(z, interpret=True), F32)).all()
  x = jnp.zeros((8, 128)).at[:, 5].set(jnp.nan).at[:, 9].set(300.0).astype(jnp.float8_e4m3fn)
  assert np.isnan(np.asarray(row_max(x, interpret=True), F32)).all()
  y = jnp.zeros((8, 128)).at[:, 9].set(-300.0).at[:, 3].set(448.0).astype(jnp.float8_e4m3fn)
  np.testing.assert_array_equal(np.asarray(row_max(y, interpret=True), F32), np.full(8, 448.0))


@mg.mgpu_kernel(out_shape=lambda x: x)
def minus_twice_the_max(x, o):
  t = x[...]
  o[...] = t - ml.max(t, keepdims=True) * 2.0


@mg.mgpu_kernel(out_shape=lambda v: v)
def log_softmax_1d(v, o):
  t = v[...]
  z = t - ml.max(t, keepdims=True)
  o[...] = z - ml.log(ml.sum(ml.exp(z), keepdims=True))


def test_math_on_keepdims_reductions():
  """Was MG900 at export (2-D) and MG204 (1-D): a (1, 1) tensor made by math on the stretched scalar."""
  x = jnp.arange(1024, dtype=F32).reshape(8, 128)
  np.testing.assert_array_equal(minus_twice_the_max(x, interpret=True), x - x.max() * 2)
  v = jnp.arange(256, dtype=F32) / 50
  np.testing.assert_allclose(log_softmax_1d(v, interpret=True), jax.nn.log_softmax(v), atol=1e-5)
  jax.export.export(jax.jit(minus_twice_the_max), platforms=["cuda"])(S(x.shape, F32))
  jax.export.export(jax.jit(log_softmax_1d), platforms=["cuda"])(S(v.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def halves_over_trips(x, o):
  buf = ml.smem((128, 64), F32)
  rows = ml.arange(128)
  for t in range(3):        # trip 0 fills rows 0-63, trip 1 rows 64-127, trip 2 nothing
    buf.store(x[...], mask=(rows // 64 == t)[:, None])
  o[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 64),))
def masked_tail_reduced(x, o):
  i = ml.program_id(0)
  m = ((i * 64 + ml.arange(64)) < x.shape[0])[:, None]
  buf = ml.smem((64, 64), F32)
  buf.store(x.at[ml.ds(i * 64, 64), :].load(mask=m, other=0.0), mask=m)
  ml.copy(buf, o.at[ml.ds(i * 64, 64), :], reduce="add")


def test_masked_smem_store_holes_per_trip_and_reduce_copies():
  """A trip's holes were reused by the next trip (MG601 on a filled buffer), and a reduce= copy
  checked the rows past the array's end."""
  np.testing.assert_array_equal(halves_over_trips(jnp.ones((128, 64), F32), interpret=True), 1.0)
  np.testing.assert_array_equal(masked_tail_reduced(jnp.ones((100, 64), F32), interpret=True), 1.0)


@mg.mgpu_kernel(out_shape=lambda x: (x, S((128,), x.dtype)))
def index_vector_three_ways(x, out, v):
  r = ml.arange(128).astype(F32)
  t = x[...]
  out[...] = t + r[None, :] + r[:, None]
  v[...] = ml.sum(t, axis=1) + r


def test_an_index_vector_broadcast_both_ways_and_used_as_a_row_statistic():
  """The first orientation kept the original vector, which the row sum then also needed: MG204."""
  x = rand.normal(rand.key(0), (128, 128))
  o, v = index_vector_three_ways(x, interpret=True)
  r = jnp.arange(128.0)
  np.testing.assert_allclose(o, x + r[None] + r[:, None], atol=1e-5)
  np.testing.assert_allclose(v, x.sum(1) + r, atol=1e-4)
  jax.export.export(jax.jit(index_vector_three_ways), platforms=["cuda"])(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def bool_flag_given_an_int(x, n: ml.scalar, o):
  flag = False
  for j in range(n):
    flag = j
  o[...] = ml.where(flag != 0, x[...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def int_flag_given_a_bool(x, n: ml.scalar, o):
  flag = 0
  if n > 3:
    flag = True
  o[...] = x[...] + flag


def test_flag_hints_can_be_followed():
  """They said flag.astype(jnp.bool) (no such cast) and True.astype(jnp.int32)."""
  expect(bool_flag_given_an_int, [S((128,), F32), S((), I32)], mg.LoopCarryTypeError, "flag = j",
         "flag enters the loop as a bool scalar but an iteration makes it an int32 scalar",
         hint="convert it back at the end of the body: flag = flag != 0")
  # (a bool on one path of an if and an int32 on the other is the int32 after it, as jnp.where's: probe 60c)
  x = jnp.arange(128, dtype=F32)
  for n, flag in ((5, 1), (2, 0)):
    np.testing.assert_array_equal(int_flag_given_a_bool(x, n, interpret=True), x + flag)


@mg.mgpu_kernel(out_shape=lambda g, ids: S((16, 128), F32))
def atomic_old_value(g, ids, out):        # (a scatter's returns the old values since probe 49c)
  h = ml.smem((128, 128), F32)
  h[...] = ml.zeros((128, 128), F32)
  old = ml.atomic_add(h.at[:, :], g[...])
  out.at[0][...] = old[0] + 1.0


@mg.mgpu_kernel(out_shape=lambda t, ids: S((128, 128), F32))
def jnp_take(t, ids, out):
  out[...] = jnp.take(t, ids[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((128, 16), F32))
def narrow_gather(t, ids, out):
  out[...] = t[ids[...], :]


@mg.mgpu_kernel(out_shape=lambda t, ids: S((128, 16), F32))
def narrow_gather_as_hinted(t, ids, out):
  v = t[ids[...][:, None], ml.arange(32)[None, :]]
  out.at[ml.ds(0, 128), ml.ds(0, 32)].store(v, mask=ml.arange(32)[None, :] < 16)


def test_triton_data_movement_habits_get_hints_that_work():
  """old = tl.atomic_add(...) said "'NoneType' object is not subscriptable"; jnp.take said to write
  an @ml.inline helper; a 16-wide gather's hint offered a window that cannot exist."""
  ids = S((128,), I32)
  expect(atomic_old_value, [S((128, 128), F32), ids], mg.UnboundNameError, "old[0]",
         "old is None: ml.atomic_add(...) returns nothing here: an update of an SMEM window has no old value (each"
         " of its elements is held by one thread of the CTA; a scatter's and an output's return them, as Triton's"
         " tl.atomic_add)")
  e = expect(jnp_take, [S((100, 128), F32), ids], mg.KernelTypeError, "jnp.take(",
             "take cannot take a GMEM ref inside a kernel")
  assert e.hint == "write t[ids[...]] (NumPy's advanced indexing, a gather as jnp.take's)"    # (probe 45f)
  t = jnp.arange(1600, dtype=F32).reshape(100, 16)
  i = (jnp.arange(128) * 7 % 100).astype(I32)
  # (the narrow gather itself now reads 32 columns and keeps 16: test_probe36e)
  np.testing.assert_array_equal(narrow_gather(t, i, interpret=True), t[i])
  np.testing.assert_array_equal(narrow_gather_as_hinted(t, i, interpret=True), t[i])


@mg.mgpu_kernel(out_shape=lambda g, ids, s: S((100, 128), F32))
def scatter_through_a_view_past_the_end(g, ids, s, out):
  ml.atomic_add(out.at[ml.ds(s[0], 64), :].at[ids[...], :], g[...])


def test_a_scatter_out_of_its_array_says_indices_are_dropped():
  with pytest.raises(mg.OutOfBoundsError) as e:
    scatter_through_a_view_past_the_end(jnp.ones((64, 128)), jnp.arange(64, dtype=I32), jnp.array([80], I32),
                                        interpret=True)
  assert "its tensor indices outside the view are dropped" in e.value.hint


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def int_scalar_mask(x, n: ml.scalar, out):
  out[...] = x.at[ml.ds(0, 128)].load(mask=n, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def python_bool_mask(x, out):
  out[...] = x.at[ml.ds(0, 128)].load(mask=True, other=0.0) + x.at[ml.ds(0, 128)].load(mask=False, other=1.0)


def test_scalar_masks():
  expect(int_scalar_mask, [S((128,), F32), S((), I32)], mg.KernelTypeError, "x.at[",
         "ml.load's mask must be a boolean tensor or scalar, got an int32 scalar", hint="compare it: mask=n != 0")
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(python_bool_mask(x, interpret=True), x + 1)


_X64 = textwrap.dedent('''
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, mgpu_dsl as mg

    @mg.mgpu_kernel(out_shape=lambda t, ids: jax.ShapeDtypeStruct((ids.shape[0], t.shape[1]), t.dtype))
    def gather(t, ids, out):
        out[...] = t[ids[...], :]

    t = jnp.arange(100 * 128, dtype=jnp.float32).reshape(100, 128)
    ids = jnp.zeros(128, jnp.int64).at[0].set(2**32 + 5).at[1].set(-2**32 + 3).at[2].set(7)
    got = gather(t, ids, interpret=True)
    assert (got[0] == t[99]).all() and (got[1] == t[0]).all() and (got[2] == t[7]).all(), got[:3, 0]
    assert (got[3:] == t[0]).all()
    print("ok")
''')


def test_int64_gather_indices_saturate_not_wrap(tmp_path):
  """They were cast to int32: 2**32 + 5 read row 5; then MG003; since probe 47c (x64's default ints are int64)
  they saturate into int32, so an id past the array clamps as jnp's gather clamps it."""
  script = tmp_path / "x64.py"
  script.write_text(_X64)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off", JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
