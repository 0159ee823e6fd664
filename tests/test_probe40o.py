"""Probe 40o (mgpu_dsl as a JAX citizen: a kernel next to jax.jit's ahead-of-time methods, vmap, grad through
custom_vjp, scan/cond, export, donation, x64, specs; and the errors each gives when misused)."""
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
  assert isinstance(traced, jax.stages.Traced) and "mosaic_gpu" in str(traced.jaxpr)
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
  x = jax.random.normal(jax.random.key(0), (256, 64), F32)
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
  x = jax.random.normal(jax.random.key(1), (512, 64), F32)
  np.testing.assert_array_equal(jax.jit(inc_clamped_followed)(x), x + 1.0)
  n = jnp.array([256], jnp.int32)
  np.testing.assert_array_equal(jax.jit(inc_clamped_data_followed)(x, n), x.at[:256].add(1.0))
