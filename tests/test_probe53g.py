"""Probe 53g: training kernels (backward passes and optimizers) as Triton and Pallas users write them.

About forty kernels of the theme (fused Adam, AdamW, Lion, SGD with momentum, AMSGrad, 8-bit blockwise Adam, apex's
chunk table over a flat buffer, global-norm clipping, loss scaling with an inf/NaN flag, EMA, bf16 params with f32
master weights, stochastic rounding; softmax, log-softmax, RMSNorm, LayerNorm, SwiGLU, GeGLU and dropout backward;
Liger's cross-entropy with its gradient over the logits; a fused linear cross-entropy) computed as jnp and
jax.grad do and built for CUDA. Three classes did not:

*An in-place update's hint aliased an input to an output meant for another.* An optimizer that writes its moments
into the inputs `m` and `v` (the aliases left out) was told to alias them to output 0, the parameters' `p_out`, which
the kernel writes with the new parameters (or which is already aliased to `p`): following it makes two arrays one
buffer, silently wrong. The hint now names an output nothing else is meant for (unwritten, or written only with the
input's own values, not aliased, not named for another input), else a new output; its dict holds the kernel's other
aliases.

*A list of arrays as one output parameter.* A multi-tensor optimizer, `out_shape=lambda ps, gs: ps` for lists of
parameters and `def step(ps, gs, new_ps)`, was MG006 "input 0 (ps) is a list of 3 items; kernel inputs are arrays".

*A loop over lists of inputs.* `for p, g in zip(ps, gs)` with `mask = offs < p.shape[0]` was a false MG203 ("the size
of another array") where the lists' arrays differ in size: every leaf of ps takes the name `p`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from locate import expect

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
V = S((3000,), F32)


def rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- the hint of a write into an input
@mg.mgpu_kernel(out_shape=lambda p, g, m, v: p, grid=lambda p, *a: (ml.cdiv(p.shape[0], 1024),))
def adam_moments_in_inputs(p, g, m, v, p_out):
  offs = ml.program_id(0) * 1024 + ml.arange(1024)
  mask = offs < p.shape[0]
  gg = ml.load(g.at[offs], mask=mask)
  mm = 0.9 * ml.load(m.at[offs], mask=mask) + 0.1 * gg
  vv = 0.999 * ml.load(v.at[offs], mask=mask) + 0.001 * gg * gg
  ml.store(m.at[offs], mm, mask=mask)
  ml.store(v.at[offs], vv, mask=mask)
  ml.store(p_out.at[offs], ml.load(p.at[offs], mask=mask) - 1e-3 * mm / (ml.sqrt(vv) + 1e-8), mask=mask)


def test_a_moment_written_into_its_input_is_hinted_a_new_output_not_the_parameters():
  """It said input_output_aliases={2: 0}: m's memory would be p_out's, which the kernel writes with the new p."""
  expect(adam_moments_in_inputs, [V] * 4, mg.InputWriteError, "ml.store(m.at[offs]",
         "cannot write into m: it is an input of the kernel, and inputs are read-only (JAX arrays are immutable)",
         hint="write the result into an output; to update m in place, add an output of its shape and dtype (out_shape"
              " gives 2 outputs, the last like m) and alias it: input_output_aliases={2: 1}")


def test_the_second_moment_is_hinted_the_output_after_the_first_ones():
  """The second error of the same kernel said {3: 0} too: each input its own output, the dict holds both."""
  with pytest.raises(mg.InputWriteError) as info:
    adam_moments_in_inputs.check(*[V] * 4)
  text = str(info.value)
  assert "1 more error(s)" in text
  assert text.rstrip().endswith(
      "hint: write the result into an output; to update v in place, add an output of its shape and dtype (out_shape"
      " gives 3 outputs, the last like v) and alias it: input_output_aliases={2: 1, 3: 2}")


@mg.mgpu_kernel(out_shape=lambda p, g, m: p, grid=lambda p, *a: (ml.cdiv(p.shape[0], 1024),),
                input_output_aliases={0: 0})
def sgd_momentum_in_input(p, g, buf, p_out):
  offs = ml.program_id(0) * 1024 + ml.arange(1024)
  mask = offs < p.shape[0]
  b = 0.9 * ml.load(buf.at[offs], mask=mask) + ml.load(g.at[offs], mask=mask)
  ml.store(buf.at[offs], b, mask=mask)
  ml.store(p_out.at[offs], ml.load(p.at[offs], mask=mask) - 0.1 * b, mask=mask)


def test_an_output_already_aliased_is_not_hinted_and_the_dict_keeps_the_kernels_aliases():
  """It said {2: 0}: output 0 is p's memory already."""
  expect(sgd_momentum_in_input, [V] * 3, mg.InputWriteError, "ml.store(buf.at[offs]",
         "cannot write into buf: it is an input of the kernel, and inputs are read-only (JAX arrays are immutable)",
         hint="write the result into an output; to update buf in place, add an output of its shape and dtype"
              " (out_shape gives 2 outputs, the last like buf) and alias it: input_output_aliases={0: 0, 2: 1}")


@mg.mgpu_kernel(out_shape=lambda p, g, m, v: (m, v), grid=(1,))
def moments_into_inputs(p, g, m, v, m_out, v_out):
  m[...] = 0.9 * m[...] + g[...]
  v[...] = 0.9 * v[...] + g[...] * g[...]


def test_unwritten_outputs_are_hinted_one_each():
  """Both moments were hinted output 0."""
  with pytest.raises(mg.InputWriteError) as info:
    moments_into_inputs.check(*[S((256,), F32)] * 4)
  assert info.value.hint.endswith("alias it to an output of its shape and dtype: @mgpu_kernel(...,"
                                  " input_output_aliases={2: 0})")
  assert "to update v in place, alias it to an output of its shape and dtype: @mgpu_kernel(...," \
         " input_output_aliases={2: 0, 3: 1})" in str(info.value)


# ---------------------------------------------------------------- multi-tensor steps: lists of arrays
SIZES = (1000, 77, 2048)


def _lists(*seeds):
  return [[rnd(n, 10 * s + i) for i, n in enumerate(SIZES)] for s in seeds]


@mg.mgpu_kernel(out_shape=lambda ps, gs: ps, grid=(4,), input_output_aliases={0: 0, 1: 1, 2: 2})
def sgd_foreach(ps, gs, new_ps, *, lr: ml.constexpr = 0.1):
  pid = ml.program_id(0)
  for i, (p, g) in enumerate(zip(ps, gs)):
    for start in range(pid * 256, p.shape[0], ml.num_programs(0) * 256):
      offs = start + ml.arange(256)
      mask = offs < p.shape[0]
      ml.store(new_ps[i].at[offs], ml.load(p.at[offs], mask=mask) - lr * ml.load(g.at[offs], mask=mask), mask=mask)


def test_a_list_out_shape_is_the_one_output_parameters_list():
  """`out_shape=lambda ps, gs: ps` with one output parameter was MG006 'input 0 (ps) is a list of 3 items'."""
  ps, gs = _lists(1, 2)
  out = sgd_foreach(ps, gs, interpret=True)
  assert isinstance(out, list) and len(out) == 3
  for o, p, g in zip(out, ps, gs):
    np.testing.assert_allclose(np.asarray(o), p - np.float32(0.1) * g, rtol=1e-6, atol=1e-6)
  specs = jax.tree.map(lambda a: S(a.shape, a.dtype), (ps, gs))
  sgd_foreach.check(*specs)
  jax.export.export(jax.jit(lambda *a: sgd_foreach(*a)), platforms=["cuda"])(*specs)


@mg.mgpu_kernel(out_shape=lambda ps: [S(p.shape, jnp.bfloat16) for p in ps], grid=(1,))
def bf16_copies(ps, outs):
  for p, o in zip(ps, outs):
    for start in range(0, p.shape[0], 1024):
      offs = start + ml.arange(1024)
      ml.store(o.at[offs], ml.load(p.at[offs], mask=offs < p.shape[0]).astype(jnp.bfloat16), mask=offs < p.shape[0])


@mg.mgpu_kernel(out_shape=lambda ps, gs, ms: (ps, ms), grid=(1,))
def momentum_state(ps, gs, ms, state):
  new_ps, new_ms = state
  for p, g, m, po, mo in zip(ps, gs, ms, new_ps, new_ms):
    for start in range(0, p.shape[0], 1024):
      offs = start + ml.arange(1024)
      mask = offs < p.shape[0]
      mm = 0.9 * m.at[offs].load(mask=mask) + g.at[offs].load(mask=mask)
      mo.at[offs].store(mm, mask=mask)
      po.at[offs].store(p.at[offs].load(mask=mask) - 0.1 * mm, mask=mask)


def test_bf16_copies_of_master_weights_and_a_tuple_of_lists_as_one_parameter():
  """Both were MG006 'input 0 (ps) is a list of 3 items; kernel inputs are arrays'."""
  ps, gs, ms = _lists(3, 4, 5)
  out = bf16_copies(ps, interpret=True)
  for o, p in zip(out, ps):
    np.testing.assert_array_equal(np.asarray(o), np.asarray(jnp.asarray(p).astype(jnp.bfloat16)))
  new_ps, new_ms = momentum_state(ps, gs, ms, interpret=True)
  for po, mo, p, g, m in zip(new_ps, new_ms, ps, gs, ms):
    mm = np.float32(0.9) * m + g
    np.testing.assert_allclose(np.asarray(mo), mm, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(po), p - np.float32(0.1) * mm, rtol=1e-6, atol=1e-6)
  momentum_state.check(*jax.tree.map(lambda a: S(a.shape, a.dtype), (ps, gs, ms)))


@mg.mgpu_kernel(out_shape=lambda ps, gs: ps, grid=(1,))
def stored_as_bf16(ps, gs, outs):
  for p, g, o in zip(ps, gs, outs):
    o[...] = (p[...] - 0.1 * g[...]).astype(jnp.bfloat16)


def test_a_mistake_of_a_kernel_taking_a_list_whole_is_reported_at_its_line():
  """It was MG006 'input 0 (ps) is a list of 2 items' at the call, whatever the kernel's mistake."""
  expect(stored_as_bf16, [[S((128,), F32)] * 2] * 2, mg.StoreDtypeError, "o[...] =",
         "cannot store (p[...] - 0.1 * g[...]).astype(jnp.bfloat16) (bfloat16) into o (GMEM, float32): no implicit"
         " conversion")


@mg.mgpu_kernel(out_shape=lambda ps, gs, ms, vs: (ps, ms, vs), grid=(4,),
                input_output_aliases={0: 0, 1: 1, 2: 2, 6: 3, 7: 4, 8: 5, 9: 6, 10: 7, 11: 8})
def adam_lists(ps, gs, ms, vs, new_ps, new_ms, new_vs):
  pid = ml.program_id(0)
  for p, g, m, v, po, mo, vo in zip(ps, gs, ms, vs, new_ps, new_ms, new_vs):
    for start in range(pid * 256, p.shape[0], 1024):
      offs = start + ml.arange(256)
      mask = offs < p.shape[0]
      gg = g.at[offs].load(mask=mask)
      mm = 0.9 * m.at[offs].load(mask=mask) + 0.1 * gg
      vv = 0.999 * v.at[offs].load(mask=mask) + 0.001 * gg * gg
      po.at[offs].store(p.at[offs].load(mask=mask) - 1e-3 * mm / (ml.sqrt(vv) + 1e-8), mask=mask)
      mo.at[offs].store(mm, mask=mask)
      vo.at[offs].store(vv, mask=mask)


def _adam_lists_reference(ps, gs, ms, vs):
  m2 = [np.float32(0.9) * m + np.float32(0.1) * g for m, g in zip(ms, gs)]
  v2 = [np.float32(0.999) * v + np.float32(0.001) * g * g for v, g in zip(vs, gs)]
  return [p - np.float32(1e-3) * m / (np.sqrt(v) + np.float32(1e-8)) for p, m, v in zip(ps, m2, v2)], m2, v2


@mg.mgpu_kernel(out_shape=lambda ps, gs: ps, grid=(1,))
def unmasked_read_in_a_zip(ps, gs, outs):
  for p, g, o in zip(ps, gs, outs):
    for start in range(0, p.shape[0], 256):
      offs = start + ml.arange(256)
      ml.store(o.at[offs], ml.load(p.at[offs]) - 0.1 * ml.load(g.at[offs], mask=offs < g.shape[0]),
               mask=offs < p.shape[0])


def test_a_mask_bounded_by_its_own_arrays_size_in_a_loop_over_lists_is_not_mg203():
  """`for p, g, ... in zip(ps, gs, ...)`: every leaf of ps is named `p`, and the check took `p.shape[0]` for the
  size of the last one (2048) against the `g` of another trip (1000): MG203 'the size of another array'. A read
  that does leave its array is still MG203."""
  ps, gs, ms = _lists(6, 7, 8)
  vs = [np.abs(v) for v in _lists(9)[0]]
  out = jax.jit(lambda *a: adam_lists(*a, interpret=True))(ps, gs, ms, vs)
  for got, want in zip(jax.tree.leaves(out), jax.tree.leaves(_adam_lists_reference(ps, gs, ms, vs))):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
  adam_lists.check(*jax.tree.map(lambda a: S(a.shape, a.dtype), (ps, gs, ms, vs)))
  expect(unmasked_read_in_a_zip, [[S((1024,), F32), S((77,), F32)]] * 2, mg.IndexOutOfBoundsError,
         "ml.load(p.at[offs])", "this register read touches p[0:256] when start = 0, outside p's shape (77,)")


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_multi_tensor_steps_on_the_gpu_match_numpy():
  ps, gs, ms = _lists(11, 12, 13)
  vs = [np.abs(v) for v in _lists(14)[0]]
  for o, p, g in zip(sgd_foreach(ps, gs), ps, gs):
    np.testing.assert_allclose(np.asarray(o), p - np.float32(0.1) * g, rtol=1e-6, atol=1e-6)
  out = jax.jit(adam_lists)(ps, gs, ms, vs)
  for got, want in zip(jax.tree.leaves(out), jax.tree.leaves(_adam_lists_reference(ps, gs, ms, vs))):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
  for o, p in zip(bf16_copies(ps), ps):
    np.testing.assert_array_equal(np.asarray(o), np.asarray(jnp.asarray(p).astype(jnp.bfloat16)))
