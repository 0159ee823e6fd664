"""Probe 40o (mgpu_dsl as a JAX citizen: a kernel next to jax.jit's ahead-of-time methods, vmap, grad through
custom_vjp, scan/cond, export, donation, x64, specs; and the errors each gives when misused)."""
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line(fn, text):
  """(line, column) of the first line of `fn` holding `text`."""
  lines, first = inspect.getsourcelines(fn)
  k = next(i for i, s in enumerate(lines) if text in s)
  return first + k, lines[k].index(text)


# ---------------------------------------------------------------- jax.jit's ahead-of-time methods on a kernel
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=lambda x, *, bm=128: (x.shape[0] // bm,))
def scaled(x, out, *, bm: ml.constexpr = 128):
  i = ml.program_id(0)
  out.at[ml.ds(i * bm, bm)][...] = x.at[ml.ds(i * bm, bm)][...] * 2.0


def test_a_kernel_lowers_traces_and_evaluates_shapes_as_a_jitted_function_does():
  """`kernel.lower(x)` (as `jax.jit(f).lower(x)`), `.trace` and `.eval_shape` were a raw AttributeError on a
  kernel; they are jax.jit's, with the constexprs bound, and take arrays or specs."""
  x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
  lowered = scaled.lower(x, bm=64, interpret=True)
  assert isinstance(lowered, jax.stages.Lowered)
  np.testing.assert_array_equal(lowered.compile()(x), x * 2.0)
  traced = scaled.trace(S((256, 64), F32), bm=64)
  assert isinstance(traced, jax.stages.Traced) and "mgpu_dsl_call[kernel=scaled]" in str(traced.jaxpr)   # (its Mosaic
  assert "mosaic_gpu" in traced.lower(lowering_platforms=("cuda",)).as_text()        # GPU module built when lowered)
  assert scaled.eval_shape(S((512, 64), jnp.bfloat16), bm=64) == S((512, 64), jnp.bfloat16)
  assert scaled.eval_shape(x) == jax.eval_shape(scaled, x)


def test_a_mistake_through_the_ahead_of_time_methods_is_at_the_users_call():
  with pytest.raises(mg.SignatureError) as e:
    scaled.eval_shape(S((256, 64), F32), bn=64)
  line, col = _line(test_a_mistake_through_the_ahead_of_time_methods_is_at_the_users_call, "scaled.eval_shape(")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert "has no constexpr parameter 'bn'" in e.value.message and "bm" in e.value.hint


@pytest.mark.gpu
def test_a_kernel_lowered_and_compiled_ahead_of_time_runs_on_the_gpu():
  x = rand.normal(rand.key(0), (256, 64), F32)
  np.testing.assert_array_equal(scaled.lower(x, bm=64).compile()(x), x * 2.0)


# ---------------------------------------------------------------- a clamped program id updating an array in place
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128) + 1,), input_output_aliases={0: 0})
def inc_clamped(x, out):
  i = ml.minimum(ml.program_id(0), x.shape[0] // 128 - 1)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128) + 1,), input_output_aliases={0: 0})
def inc_clamped_followed(x, out):
  if ml.program_id(0) > x.shape[0] // 128 - 1:
    return
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (x.shape[0] // 128,), input_output_aliases={0: 0})
def inc_clamped_data(x, n, out):
  i = ml.minimum(ml.program_id(0), n[0] // 128 - 1)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (x.shape[0] // 128,), input_output_aliases={0: 0})
def inc_clamped_data_followed(x, n, out):
  if ml.program_id(0) > n[0] // 128 - 1:
    return
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + 1.0


def test_a_clamped_program_id_in_place_hints_ending_the_extra_programs():
  """With the output aliased to its input, the programs past a clamped program id's bound read the last
  tile while another writes it: a read race, whose hint was that outputs cannot be read back; it is now the
  clamp's (end the extra programs), as for the same kernel without the alias, and followed it is correct."""
  x = np.random.default_rng(1).standard_normal((512, 64)).astype(np.float32)
  with pytest.raises(mg.RaceError) as e:
    inc_clamped.check(S(x.shape, F32))
  line, col = _line(inc_clamped, "x.at[ml.ds(i * 128, 128)][...] + 1.0")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert "reads x[384, 0], the memory of out (aliased)" in e.value.message
  assert e.value.hint.startswith("ml.program_id(0) is clamped with ml.minimum") and \
      "if ml.program_id(0) > x.shape[0] // 128 - 1: return" in e.value.hint
  np.testing.assert_array_equal(inc_clamped_followed(x, interpret=True), x + 1.0)
  inc_clamped_followed.check(S(x.shape, F32))


def test_a_clamped_program_id_from_data_in_place_hints_ending_the_extra_programs():
  x = np.random.default_rng(2).standard_normal((512, 64)).astype(np.float32)
  n = np.array([256], np.int32)
  with pytest.raises(mg.RaceError) as e:
    inc_clamped_data(x, n, interpret=True)
  line, col = _line(inc_clamped_data, "x.at[ml.ds(i * 128, 128)][...] + 1.0")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert "both access x[128, 0], and one writes it" in e.value.message
  assert "if ml.program_id(0) > n[0] // 128 - 1: return" in e.value.hint
  want = x.copy()
  want[:256] += 1.0
  np.testing.assert_array_equal(inc_clamped_data_followed(x, n, interpret=True), want)


@pytest.mark.gpu
def test_a_clamped_program_id_in_place_followed_on_the_gpu():
  x = rand.normal(rand.key(1), (512, 64), F32)
  np.testing.assert_array_equal(jax.jit(inc_clamped_followed)(x), x + 1.0)
  n = jnp.array([256], jnp.int32)
  np.testing.assert_array_equal(jax.jit(inc_clamped_data_followed)(x, n), x.at[:256].add(1.0))


# ---------------------------------------------------------------- a jnp / jax.nn function passed as a constexpr
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=lambda x, **kw: (x.shape[0] // 128,))
def activated(x, out, *, act: ml.constexpr):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = act(v)


GELU = "ml.inline(lambda v: 0.5 * v * (1 + ml.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3))))"
_FOLLOWED = {      # what each hint passes, as the user writes it
    "gelu": ml.inline(lambda v: 0.5 * v * (1 + ml.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))),
    "tanh": ml.tanh,
    "gelu-erf": ml.inline(lambda v: 0.5 * v * ml.erfc(-v * 0.7071067811865476)),
    "max-partial": functools.partial(ml.max, axis=1, keepdims=True),
    "soft_sign": ml.inline(lambda v: v / (1 + ml.abs(v))),
}


@pytest.mark.parametrize("act, shown", [(jax.scipy.special.dawsn, "jax.scipy.special.dawsn")], ids=["dawsn"])
def test_a_library_function_passed_as_a_constexpr_is_reported_at_its_call(act, shown):
  """`act=jax.nn.gelu` called as act(v) was reported as `gelu` (a partial by its repr, with an address), hinting
  the formula to write in place of act(v), which loses the choice; the hint passed ml's counterpart (or an
  ml.inline lambda of jax.nn's formula) for act at the call, and the call's note names the value as written.
  (Functions ml has, or whose formula a form writes, compute as such since probe 46i: the next test; jax.nn's
  soft_sign, the case here until probe 48b, among them; so are sparse_plus, erfinv and nextafter (49b), which took its
  place for a while, spacing (50e) and jnp.i0 (56f).)"""
  x = np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32)
  with pytest.raises(mg.KernelTypeError) as e:
    activated(x, act=act, interpret=True)
  line, col = _line(activated, "act(v)")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert e.value.message == f"act ({shown}) cannot take a register tensor inside a kernel"
  assert "@ml.inline" in e.value.hint
  assert any(f"act={shown})" in n for n in e.value.notes)


@pytest.mark.parametrize("case, act", [
    ("gelu", jax.nn.gelu), ("tanh", jnp.tanh), ("gelu-erf", functools.partial(jax.nn.gelu, approximate=False)),
    ("max-partial", functools.partial(jnp.max, axis=1, keepdims=True)), ("soft_sign", jax.nn.soft_sign)],
    ids=["gelu", "tanh", "gelu-erf", "max-partial", "soft_sign"])
def test_a_library_function_passed_as_a_constexpr_computes_as_the_library_does(case, act):
  """The values the hints passed (ml's counterpart, jax.nn's formula) are what the library function computes as."""
  x = np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32)
  want = np.broadcast_to(act(x), x.shape)
  for a in (act, _FOLLOWED[case]):
    np.testing.assert_allclose(activated(x, act=a, interpret=True), want, rtol=1e-5, atol=1e-5)


ACT = jax.nn.silu


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def activated_global(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = ACT(x.at[ml.ds(i * 128, 128)][...])


def test_a_library_function_bound_to_a_global_computes_as_the_library_does():
  x = np.random.default_rng(5).standard_normal((256, 64)).astype(np.float32)
  np.testing.assert_allclose(activated_global(x, interpret=True), jax.nn.silu(x), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_the_ml_values_the_hints_pass_on_the_gpu():
  x = rand.normal(rand.key(4), (256, 64), F32)
  gelu = ml.inline(lambda v: 0.5 * v * (1 + ml.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3))))
  np.testing.assert_allclose(jax.jit(functools.partial(activated, act=gelu))(x), jax.nn.gelu(x), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(jax.jit(functools.partial(activated, act=ml.tanh))(x), jnp.tanh(x), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- jax.grad of a kernel without a backward
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def squared(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = v * v


def test_jax_grad_of_a_kernel_without_a_backward_notes_the_call_it_differentiates():
  """MG009 of jax.grad is raised when JAX transposes, after the kernel call returned: it named the kernel's
  def only (jax.jvp's, raised in the call, had the call's note); it now notes the user's call too."""
  x = np.ones((256, 64), np.float32)
  loss = lambda x: squared(x, interpret=True).sum()
  with pytest.raises(mg.DifferentiationError) as e:
    jax.grad(loss)(x)
  line, col = _line(squared, "def squared")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert e.value.message == "jax cannot differentiate the kernel squared: mgpu_dsl kernels have no automatic derivative"
  at, at_col = _line(test_jax_grad_of_a_kernel_without_a_backward_notes_the_call_it_differentiates,
                     "squared(x, interpret=True)")
  assert f"{__file__}:{at}:{at_col}: the call that jax differentiates" in e.value.notes
  assert "jax.lax.stop_gradient" in e.value.hint
  with pytest.raises(mg.DifferentiationError) as e:       # jax.jvp: the call's own note, once
    jax.jvp(lambda x: squared(x, interpret=True), (x,), (x,))
  assert len([n for n in e.value.notes if ": the call" in n]) == 1


@pytest.mark.skipif(any(d.platform == "gpu" for d in jax.devices()), reason="on a GPU the kernel lowers")
def test_lowering_for_the_cpu_notes_the_users_call():
  """MG010 raised by the CPU lowering (jax.jit(f)(x), kernel.lower(x)) named the kernel's def only; it notes the
  call that compiles it too, and the hint's interpret=True lowers and runs."""
  x = np.ones((256, 64), np.float32)
  with pytest.raises(mg.NoGpuError) as e:
    scaled.lower(x, bm=64)
  line, col = _line(scaled, "def scaled")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert e.value.message.endswith("but the call is being compiled for cpu: JAX sees no GPU here")
  at, at_col = _line(test_lowering_for_the_cpu_notes_the_users_call, "scaled.lower(x, bm=64)")
  assert e.value.notes == (f"{__file__}:{at}:{at_col}: the call compiled for cpu",)
  assert e.value.hint.startswith("pass interpret=True")
  np.testing.assert_array_equal(scaled.lower(x, bm=64, interpret=True).compile()(x), x * 2.0)


@mg.autotune(configs=[{"bm": 64}, {"bm": 128}])
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=lambda x, *, bm: (x.shape[0] // bm,))
def scaled_tuned(x, out, *, bm: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * bm, bm)][...] = x.at[ml.ds(i * bm, bm)][...] * 2.0


def test_an_autotuned_kernel_lowers_and_evaluates_shapes_as_a_jitted_function_does():
  x = np.random.default_rng(5).standard_normal((256, 64)).astype(np.float32)
  assert scaled_tuned.eval_shape(S((256, 64), jnp.bfloat16)) == S((256, 64), jnp.bfloat16)
  np.testing.assert_array_equal(scaled_tuned.lower(x, interpret=True).compile()(x), x * 2.0)
  assert isinstance(scaled_tuned.trace(S((256, 64), F32)), jax.stages.Traced)


def test_a_bare_shape_for_a_spec_is_reported_at_the_call_with_the_spec_it_means():
  """`kernel.check((256, 64))` was MG006 at the kernel's def, hinting jnp.asarray of the tuple's numbers (an
  array of two elements); it is at the user's call, and the hint's spec checks the kernel."""
  with pytest.raises(mg.SignatureError) as e:
    scaled.check((256, 64), bm=64)
  line, col = _line(test_a_bare_shape_for_a_spec_is_reported_at_the_call_with_the_spec_it_means, "scaled.check((256")
  assert (e.value.filename, e.value.lineno, e.value.col_offset) == (__file__, line, col)
  assert e.value.message == ("scaled.check: x is given the tuple (256, 64), a shape without a dtype; specs are"
                             " arrays or jax.ShapeDtypeStructs")
  assert e.value.hint == "give the shape its dtype: jax.ShapeDtypeStruct((256, 64), jnp.float32)"
  scaled.check(jax.ShapeDtypeStruct((256, 64), jnp.float32), bm=64)
  with pytest.raises(mg.SignatureError) as e:
    scaled.typed_ir((256, 64))
  assert e.value.message.startswith("scaled.typed_ir: x is given the tuple (256, 64)")
