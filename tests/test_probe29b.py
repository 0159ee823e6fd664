"""Probe 29b (JAX citizenship): kernels used as ordinary JAX functions (jax.jit, jax.vmap,
jax.lax loops, jax_enable_x64, zero-size arrays, aliases), until one raised something other than
a located KernelError, rejected what jnp computes, or computed what jnp does not."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- outputs with no elements
@mg.mgpu_kernel(out_shape=lambda x: x)
def copy_whole(x, out):
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double_rows(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


@mg.mgpu_kernel(out_shape=lambda c, v: c, grid=(2,), input_output_aliases={0: 0})
def add_into(c, v, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = c.at[ml.ds(i * 128, 128)][...] + v.at[ml.ds(i * 128, 128)][...]


@pytest.mark.parametrize("shape", [(0, 128), (0,)], ids=str)
def test_a_static_grid_over_empty_outputs_returns_them_as_jnp_would(shape):
  """It was a LayoutError (x[...] has no elements): only a grid *callable* giving no programs
  skipped the launch, so grid=(1,) (the default) on an empty batch failed where jnp returns it."""
  z = jnp.zeros(shape, F32)
  for out in (copy_whole(z, interpret=True), jax.jit(lambda a: copy_whole(a, interpret=True))(z)):
    assert out.shape == shape and out.dtype == F32
  out = jax.vmap(lambda a: copy_whole(a, interpret=True))(jnp.zeros((3,) + shape, F32))
  assert out.shape == (3,) + shape
  assert "mosaic_gpu" not in _export(copy_whole, S(shape, F32))    # nothing to launch


def test_programs_over_outputs_with_an_empty_dimension_launch_nothing():
  """A grid of 2 programs over a (256, 0) array: each read a (128, 0) window (LayoutError)."""
  z = jnp.zeros((256, 0), F32)
  out = double_rows(z, interpret=True)
  assert out.shape == (256, 0) and out.dtype == F32
  out = add_into(z, z, interpret=True)          # an aliased empty output is its input
  assert out.shape == (256, 0)
  e = expect(copy_whole, [S((0, 128), F32)], mg.LaunchConfigError, "out_shape=",    # as the call: no kernel (probe 35f)
             "every output of this call is empty (out_shape gives (0, 128)): a call on arrays returns them without a"
             " launch, whatever the grid, and there is no kernel to check or build")
  assert "outputs have elements" in e.hint


# ---------------------------------------------------------------- Python lists as inputs
def _call_error(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def test_a_list_of_numbers_hints_one_array_and_following_it_works():
  """It hinted `jnp.stack(xs)` (a list of arrays' fix, with a name not the user's) for data."""
  rows = np.arange(256, dtype=np.float32).tolist()
  e = _call_error(lambda: double_rows(rows, interpret=True))
  assert type(e) is mg.SignatureError
  assert e.message == "double_rows: input 0 (x) is a list of 256 items; kernel inputs are arrays"
  assert e.hint == ("make the numbers one array first, as jnp functions need too: jnp.asarray(x) (with the"
                    " dtype you mean: jnp.asarray(x, jnp.float32))")
  np.testing.assert_array_equal(double_rows(jnp.asarray(rows, jnp.float32), interpret=True),
                                np.asarray(rows, np.float32) * 2)
  pair = _call_error(lambda: double_rows((jnp.zeros(256, F32), jnp.ones(256, F32)), interpret=True))
  assert pair.hint == "pass each array as its own argument, or stack them: jnp.stack(x)"


# ---------------------------------------------------------------- a grid from a run-time value
@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (n,))
def grid_of_scalar(x, n: ml.scalar, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


@mg.mgpu_kernel(out_shape=lambda x, *, n: x, grid=lambda x, *, n: (n,))
def grid_of_constexpr(x, out, *, n: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


def test_a_grid_of_a_run_time_value_names_it_in_the_users_words_eagerly_and_under_jit():
  """The message showed JAX's repr (JitTracer(~int32[]) under jax.jit, array(2, dtype=int32)
  eagerly), and the hint did not say the count becomes a constexpr."""
  x = jnp.arange(256, dtype=F32)
  for call in (lambda: grid_of_scalar(x, 2, interpret=True),
               lambda: jax.jit(lambda x, n: grid_of_scalar(x, n, interpret=True))(x, 2)):
    e = _call_error(call)
    assert type(e) is mg.LaunchConfigError
    assert e.message == ("grid must be 1 to 3 positive ints, got (a run-time int32 value,): a value known"
                         " only at run time (an ml.scalar or an array's element)")
    assert "n: ml.constexpr" in e.hint and "grid=lambda x, *, n: (n,)" in e.hint
  np.testing.assert_array_equal(grid_of_constexpr(x, n=2, interpret=True), np.asarray(x) * 2)   # the hint, followed


# ---------------------------------------------------------------- 0-d refs indexed with ()
@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((), x.dtype))
def total_plus(x, s, out):
  out[()] = ml.sum(x[...]) + s.at[()][...]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((), x.dtype))
def total_view(x, out):
  out.at[()][...] = ml.sum(x[...])


def test_a_0d_ref_indexed_with_an_empty_tuple_runs_in_interpret_mode():
  """out[()] = v (NumPy's way to write a 0-d array) and s.at[()] built, checked and exported,
  then interpret mode failed on the view: MG900 (range() arg 3 must not be zero)."""
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_allclose(total_plus(x, jnp.float32(2), interpret=True), np.asarray(x).sum() + 2)
  np.testing.assert_allclose(total_view(x, interpret=True), np.asarray(x).sum())
  xs = jnp.stack([x, 2 * x])
  np.testing.assert_allclose(jax.vmap(lambda a: total_plus(a, jnp.float32(1), interpret=True))(xs),
                             np.asarray(xs).sum(1) + 1)


# ---------------------------------------------------------------- copying and pickling kernels
def test_a_kernel_and_an_inline_helper_copy_and_pickle_as_functions_do():
  """copy.deepcopy of an object holding a kernel (a model, a config) raised TypeError: cannot pickle
  'module' object; pickle raised "it's not the same object as ...". Both now act as on the function:
  the kernel itself, or a reference by module and name."""
  import copy
  import pickle
  import examples_for_pickling as m
  holder = {"kernels": [m.double_it], "helper": m.twice}
  copied = copy.deepcopy(holder)
  assert copied["kernels"][0] is m.double_it and copied["helper"] is m.twice
  assert copy.copy(m.double_it) is m.double_it
  assert pickle.loads(pickle.dumps(m.double_it)) is m.double_it
  assert pickle.loads(pickle.dumps(m.twice)) is m.twice
  x = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(copied["kernels"][0](x, interpret=True), np.asarray(x) * 2)
  with pytest.raises(pickle.PicklingError, match="pickles by its name"):
    pickle.dumps(_local_kernel())


def _local_kernel():
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def local(x, out):
    out[...] = x[...]
  return local


# ---------------------------------------------------------------- JAX's debugging switches
@pytest.fixture
def tracer_leak_checks():
  before = jax.config.jax_check_tracer_leaks
  jax.config.update("jax_check_tracer_leaks", True)
  yield
  jax.config.update("jax_check_tracer_leaks", before)


def test_calls_under_jax_check_tracer_leaks_do_not_leak(tracer_leak_checks):
  """Under jax.jit and jax.vmap the out_shape callable ran in a jax.eval_shape whose result was
  kept as tracers: with jax_check_tracer_leaks on, a SignatureError ('Leaked trace ...')."""
  x = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(jax.jit(lambda a: double_rows(a, interpret=True))(x), np.asarray(x) * 2)
  xs = jnp.stack([x, x + 1])
  np.testing.assert_array_equal(jax.vmap(lambda a: double_rows(a, interpret=True))(xs), np.asarray(xs) * 2)
  double_rows.check(S((256,), F32))


def test_an_eager_interpret_call_under_a_transfer_guard_runs():
  """jax.transfer_guard("disallow") forbids implicit transfers: interpret mode's host run moved its
  results back with jnp.asarray, a JaxRuntimeError (Disallowed host-to-device transfer)."""
  x = jnp.arange(256, dtype=F32)
  with jax.transfer_guard("disallow"):
    out = double_rows(x, interpret=True)
  np.testing.assert_array_equal(out, np.asarray(x) * 2)
  assert isinstance(out, jax.Array) and out.dtype == F32


# ---------------------------------------------------------------- a typed PRNG key as an input
@mg.mgpu_kernel(out_shape=lambda x, seed: x, grid=lambda x, seed: (x.shape[0] // 256,))
def keep_half(x, seed: ml.scalar, out):
  i = ml.program_id(0)
  idx = i * 256 + ml.arange(256)
  out.at[ml.ds(i * 256, 256)][...] = ml.where(ml.rand(seed, idx) >= 0.5, x.at[ml.ds(i * 256, 256)][...], 0.0)


def test_a_typed_prng_key_hints_a_seed_drawn_from_it_and_following_it_works():
  """The hint listed the supported dtypes only (for key<fry>): nothing said how a key becomes a seed."""
  x = jnp.ones(512, F32)
  key = jax.random.key(0)
  e = _call_error(lambda: keep_half(x, key, interpret=True))
  assert type(e) is mg.SignatureError
  assert e.message == "keep_half: input 1 (seed) has dtype key<fry>, which kernels do not support"
  assert "jax.random.bits(seed, dtype=jnp.uint32)" in e.hint and "ml.rand(seed, offsets)" in e.hint
  seed = jax.random.bits(key, dtype=jnp.uint32)
  out = keep_half(x, seed, interpret=True)
  again = keep_half(x, jnp.uint32(int(seed)), interpret=True)
  np.testing.assert_array_equal(out, again)
  assert 0 < int((np.asarray(out) == 0).sum()) < 512


# ---------------------------------------------------------------- MG009's stop_gradient call
@mg.mgpu_kernel(out_shape=lambda t, ids: t)
def scale_by_ids(t, ids, out):
  out[...] = t[...] * ids[...].astype(t.dtype)


def test_the_stop_gradient_hint_passes_every_input_of_the_kernel():
  """The hint wrote scale_by_ids(jax.lax.stop_gradient(x)) for a kernel of two inputs (t, ids):
  followed, the call lacked an input."""
  t, ids = jnp.linspace(0, 1, 128, dtype=F32), jnp.arange(128, dtype=jnp.int32)
  e = _call_error(lambda: jax.grad(lambda t: scale_by_ids(t, ids, interpret=True).sum())(t))
  assert type(e) is mg.DifferentiationError
  assert e.hint.endswith("takes its inputs through jax.lax.stop_gradient: scale_by_ids(jax.lax.stop_gradient(t),"
                         " jax.lax.stop_gradient(ids)); see docs/autodiff.md")
  g = jax.grad(lambda t: (t * scale_by_ids(jax.lax.stop_gradient(t), jax.lax.stop_gradient(ids),
                                           interpret=True)).sum())(t)    # the hint, followed
  np.testing.assert_allclose(g, np.asarray(t) * np.arange(128), rtol=1e-6)


# ---------------------------------------------------------------- a Python number for a 0-d input
@mg.mgpu_kernel(out_shape=lambda x, s: x)
def add_scalar(x, s, out):
  out[...] = x[...] + s[...]


def test_a_python_number_for_a_0d_input_is_the_0d_array_jax_jit_makes():
  """A Python float for `s`, read with s[...], was MG006 eagerly but ran under jax.jit (weakly typed 0-d
  array); it runs both ways now (probe 41q), as a jnp function takes a Python number both ways."""
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(add_scalar(x, 3.0, interpret=True), np.asarray(x) + 3)
  np.testing.assert_array_equal(add_scalar(x, jnp.float32(3.0), interpret=True), np.asarray(x) + 3)
  np.testing.assert_array_equal(jax.jit(lambda x, s: add_scalar(x, s, interpret=True))(x, 3.0),
                                np.asarray(x) + 3)      # under jax.jit the number is already a 0-d array
