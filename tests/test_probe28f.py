"""Probe 28f: kernels ported from Pallas's GPU ops (decode attention, layer norm, softmax), as a
Pallas user writes them: grid=() for a single program, an (n, 1) mask of head indices reshaped
back to a vector (`q_mask.reshape(-1)`) beside a row statistic, and lax/jnp/jax.nn calls of habit
whose hints are what to write instead."""
import functools
import linecache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

from locate import expect


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(functools.partial(kernel, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- grid=()
@mg.mgpu_kernel(out_shape=lambda x: (x, jax.ShapeDtypeStruct((), x.dtype)), grid=())
def row_stats(x_ref, o_ref, m_ref):           # Pallas's vmapped per-row kernels: grid=()
  v = x_ref[...]
  m_ref[...] = ml.max(v)
  o_ref[...] = v - ml.max(v)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ())
def doubled(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2


def test_an_empty_grid_is_one_program_as_in_pallas():
  x = rand.normal(rand.PRNGKey(0), (256,), jnp.float32)
  o, m = row_stats(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(m), np.max(np.asarray(x)))
  np.testing.assert_array_equal(np.asarray(o), np.asarray(x) - np.max(np.asarray(x)))
  np.testing.assert_array_equal(np.asarray(doubled(x, interpret=True)), np.asarray(x) * 2)
  xs = rand.normal(rand.PRNGKey(1), (3, 256), jnp.float32)     # vmapped, as Pallas's ops do
  o, m = jax.vmap(functools.partial(row_stats, interpret=True))(xs)
  np.testing.assert_array_equal(np.asarray(m), np.max(np.asarray(xs), axis=1))
  spec = jax.ShapeDtypeStruct((256,), jnp.float32)
  assert "mosaic_gpu" in _export(row_stats, spec) and "mosaic_gpu" in _export(doubled, spec)


# ---------------------------------------------------------------- index masks reshaped back
@mg.mgpu_kernel(out_shape=lambda x, *, form: (jax.ShapeDtypeStruct(x.shape, jnp.float32),
                                              jax.ShapeDtypeStruct(x.shape[:1], jnp.float32)))
def masked_heads(x_ref, o_ref, m_ref, *, form: ml.constexpr):
  """Pallas's decode attention: q_mask (block_h, 1) masks the output tile, and q_mask.reshape(-1)
  the row statistics stored beside it."""
  qk = x_ref[...]
  m = qk.max(axis=-1)
  q_mask = (ml.arange(x_ref.shape[0]) < 5)[:, None]
  if form == "reshape":
    m_ref[...] = ml.where(q_mask.reshape(-1), m, 0)
    o_ref[...] = ml.where(q_mask, qk - m[:, None], 0)
  elif form == "index":
    m_ref[...] = ml.where(q_mask[:, 0], m, 0)
    o_ref[...] = ml.where(q_mask, qk, 0)
  else:                                        # masked stores of the tile
    m_ref[...] = ml.where(q_mask.reshape(x_ref.shape[0]), m, 0)
    o_ref.store(qk, mask=q_mask)
    o_ref.store(qk * 0, mask=~q_mask)


@pytest.mark.parametrize("form", ["reshape", "index", "stores"])
def test_an_index_mask_reshaped_back_to_a_vector_meets_a_row_statistic(form):
  x = rand.normal(rand.PRNGKey(0), (8, 128), jnp.float32)
  o, m = masked_heads(x, form=form, interpret=True)
  v = np.asarray(x)
  keep = np.arange(8) < 5
  rows = v - v.max(-1)[:, None] if form == "reshape" else v
  np.testing.assert_array_equal(np.asarray(m), np.where(keep, v.max(-1), 0))
  np.testing.assert_array_equal(np.asarray(o), np.where(keep[:, None], rows, 0))
  assert "mosaic_gpu" in _export(masked_heads, jax.ShapeDtypeStruct((8, 128), jnp.float32), form=form)


# ---------------------------------------------------------------- lax / jnp / jax.nn habits
_SRC = '''
@mg.mgpu_kernel(out_shape=lambda x: x)
def k(x_ref, o_ref):
    x = x_ref[...]
    y = x_ref[...] * 0.5
    v = {call}
    o_ref[...] = x
'''


def _kernel(call, n):
  src = _SRC.format(call=call)
  name = f"<probe28f-{n}>"
  linecache.cache[name] = (len(src), None, src.splitlines(True), name)
  ns = {"mg": mg, "ml": ml, "jnp": jnp, "jax": jax, "lax": lax}
  exec(compile(src, name, "exec"), ns)
  return ns["k"]


# these hints' calls compute as the hint's ml.* form since probe 46i (test_probe46i compares them with jax)
_COMPUTED = ["lax.max(x, y)", "lax.min(x + 1, 0.0)", "lax.logistic(x)", "lax.mul(x, y + 1)", "jax.nn.relu(x)",
             "jax.nn.silu(x)", "jax.nn.gelu(x, approximate=False)", "jnp.max(x, axis=1)", "jnp.zeros((8, 128))",
             "jnp.arange(128)", "lax.select(x > 0, x, y)", "jnp.zeros_like(x)", "jnp.full_like(x, 2.0)",
             "lax.broadcasted_iota(jnp.int32, (8, 128), 1)",
             # and these as jnp_forms' forms since probe 47b (test_probe47b compares them with jax)
             "lax.clamp(0.0, x, 1.0)", "lax.integer_pow(x, 3)", "jnp.reciprocal(x - 2)", "jnp.logical_and(x > 0, y > 0)",
             "lax.reduce_max(x, (1,))",   # (and lax's reductions since probe 47h)
             "lax.select_n(x > 0, x, y)",   # (hinted as ml.where(x > 0, y, x); computes as that since probe 48b)
             "jnp.astype(x, jnp.float16)"]  # (hinted as x.astype(jnp.float16); computes as that since probe 49d)


@pytest.mark.parametrize("call", _COMPUTED)
def test_lax_and_jnp_calls_once_hinted_compute(call):
  _kernel(call, 3).check(jax.ShapeDtypeStruct((8, 128), jnp.float32))


# ---------------------------------------------------------------- Pallas's optional outputs
def _ln_stats(x):
  return (x, jax.ShapeDtypeStruct((), x.dtype))


def test_an_optional_output_ref_hints_dropping_its_default():
  def ln(x_ref, o_ref, mean_ref=None):        # Pallas's layer_norm_forward_kernel
    m = ml.sum(x_ref[...]) / x_ref.shape[0]
    if mean_ref is not None:
      mean_ref[...] = m
    o_ref[...] = x_ref[...] - m

  with pytest.raises(mg.SignatureError) as info:
    mg.mgpu_kernel(out_shape=_ln_stats)(ln).check(jax.ShapeDtypeStruct((256,), jnp.float32))
  e = info.value
  assert e.message == ("mean_ref has a default (None), but a positional parameter without ml.constexpr is a ref"
                       " (an input or output array), so mean_ref would be taken for an array")
  assert e.hint.startswith("a ref parameter is always bound, one per input and output (Pallas's optional"
                           " mean_ref=None outputs are not): drop the default, mean_ref, and give out_shape an"
                           " output for it;")

  def followed(x_ref, o_ref, mean_ref):       # the hint followed
    m = ml.sum(x_ref[...]) / x_ref.shape[0]
    if mean_ref is not None:
      mean_ref[...] = m
    o_ref[...] = x_ref[...] - m

  x = jnp.arange(256, dtype=jnp.float32)
  o, m = mg.mgpu_kernel(out_shape=_ln_stats)(followed)(x, interpret=True)
  assert float(m) == 127.5 and float(o[0]) == -127.5


def test_star_residual_refs_are_reported_at_the_parameter():
  """(Since probe 53b a star parameter takes the refs the named ones leave: here none, an empty tuple.)"""
  def attn(q_ref, o_ref, *residual_refs, block_h: ml.constexpr = 64):
    assert not residual_refs
    o_ref[...] = q_ref[...]

  q = np.random.default_rng(0).standard_normal(128).astype(np.float32)
  np.testing.assert_array_equal(mg.mgpu_kernel(out_shape=lambda q: q)(attn)(q, interpret=True), q)


def test_jax_debug_print_and_named_scopes_hint_the_kernel_form():
  """(Since probe 49d jax.debug.print is the print it means and a named scope's body is traced as written:
  test_probe49d checks what they compute; a with of another context manager keeps its MG001.)"""
  spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
  _kernel('jax.debug.print("x {}", x)', 3).check(spec)
  _kernel('print(f"x {x}")', 4).check(spec)

  def scoped(x_ref, o_ref):
    with jax.default_matmul_precision("float32"):
      o_ref[...] = x_ref[...]

  k = mg.mgpu_kernel(out_shape=lambda x: x)(scoped)
  e = expect(k, [spec], mg.UnsupportedSyntaxError, "with jax.default_matmul_precision",
             "a with statement is not supported in a kernel")
  assert e.hint.startswith("write the with block's body without the with")


# ---------------------------------------------------------------- accumulating over a grid axis
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0], 128), jnp.float32),
                grid=lambda x: (x.shape[0] // 8, x.shape[1] // 128))
def revisited_sum(x_ref, o_ref):             # Pallas (TPU) style: zero in the first step, then +=
  i, k = ml.program_id(0), ml.program_id(1)
  if k == 0:
    o_ref.at[ml.ds(i * 8, 8)][...] = ml.zeros((8, 128), jnp.float32)
  o_ref.at[ml.ds(i * 8, 8)][...] += x_ref.at[ml.ds(i * 8, 8), ml.ds(k * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0], 128), jnp.float32),
                grid=lambda x: (x.shape[0] // 8, x.shape[1] // 128))
def atomic_sum(x_ref, o_ref):                # the hint followed
  i, k = ml.program_id(0), ml.program_id(1)
  ml.atomic_add(o_ref.at[ml.ds(i * 8, 8)], x_ref.at[ml.ds(i * 8, 8), ml.ds(k * 128, 128)][...])


def test_accumulating_an_output_over_a_grid_axis_hints_atomics():
  spec = jax.ShapeDtypeStruct((16, 512), jnp.float32)
  e = expect(revisited_sum, [spec], mg.RaceError, "o_ref.at[ml.ds(i * 8, 8)][...] +=",
             "program (0, 1, 0) reads o_ref[0, 0] while program (0, 0, 0) writes o_ref[0, 0]: programs run in no"
             " fixed order, so the value read depends on timing")
  assert e.hint.endswith("; to sum the programs' shares into one output (Pallas's accumulation over a grid axis,"
                         " out[...] += part after zeroing it in the first program), add them atomically instead,"
                         " ml.atomic_add(out.at[...], part): an output updated only by atomics starts at 0, so drop"
                         " the zeroing write")
  x = rand.normal(rand.PRNGKey(0), (16, 512), jnp.float32)
  got = atomic_sum(x, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(x).reshape(16, 4, 128).sum(1), rtol=1e-6, atol=1e-6)
  assert "mosaic_gpu" in _export(atomic_sum, spec)


# ---------------------------------------------------------------- pl.ds(start, size, stride)
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), jnp.float32))
def strided(x_ref, o_ref):
  o_ref[...] = x_ref[ml.ds(0, 128, 2)]


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((128,), jnp.float32))
def strided_at_run_time(x_ref, s_ref, o_ref):
  o_ref[...] = x_ref[ml.ds(s_ref[0], 128, 2)]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), jnp.float32))
def unit_stride(x_ref, o_ref):
  o_ref[...] = x_ref[ml.ds(0, 128, 1)]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), jnp.float32))
def strided_followed(x_ref, o_ref):          # x reshaped to (128, 2) outside
  o_ref[...] = x_ref.at[ml.ds(0 // 2, 128), 0][...]


def test_a_strided_ds_is_explained_and_its_fix_works():
  """(Since probe 46a a static start's strided ds is the strided slice x[0:255:2]; a run-time start's is explained.)"""
  e = expect(strided_at_run_time, [jax.ShapeDtypeStruct((256,), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.int32)],
             mg.KernelTypeError, "ml.ds(s_ref[0], 128, 2)",
             "ml.ds takes no stride (Pallas's pl.ds(start, size, stride)): a window's elements are consecutive")
  assert "x.reshape(..., n // 2, 2)" in e.hint and "x.at[ml.ds(start // 2, size), 0]" in e.hint
  x = jnp.arange(256, dtype=jnp.float32)
  np.testing.assert_array_equal(np.asarray(strided(x, interpret=True)), np.arange(0, 256, 2))
  np.testing.assert_array_equal(np.asarray(strided_followed(x.reshape(128, 2), interpret=True)), np.arange(0, 256, 2))
  np.testing.assert_array_equal(np.asarray(unit_stride(x, interpret=True)), np.arange(128))
  assert "mosaic_gpu" in _export(strided_followed, jax.ShapeDtypeStruct((128, 2), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), jnp.float32))
def sizeless(x_ref, o_ref):
  o_ref[...] = x_ref[ml.ds(0)]


def test_the_ds_usage_hint_shows_start_and_size():
  expect(sizeless, [jax.ShapeDtypeStruct((256,), jnp.float32)], mg.KernelTypeError, "ml.ds(0)",
         "ml.ds: missing a required argument: 'size'", hint="ml.ds(start, size)")


def test_a_lambda_for_lax_cond_runs_as_an_if():
  """lax.cond of lambdas hinted the if it means; since probe 48h the call runs as that if."""
  def branchy(x_ref, o_ref):
    o_ref[...] = lax.cond(ml.program_id(0) == 0, lambda: x_ref[...], lambda: x_ref[...] * 2)

  k = mg.mgpu_kernel(out_shape=lambda x: x)(branchy)
  x = np.random.default_rng(3).standard_normal(128).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), x)
