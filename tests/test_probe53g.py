"""Probe 53g: training kernels (backward passes and optimizers) as Triton and Pallas users write them.

About forty kernels of the theme (fused Adam, AdamW, Lion, SGD with momentum, AMSGrad, 8-bit blockwise Adam, apex's
chunk table over a flat buffer, global-norm clipping, loss scaling with an inf/NaN flag, EMA, bf16 params with f32
master weights, stochastic rounding; softmax, log-softmax, RMSNorm, LayerNorm, SwiGLU, GeGLU and dropout backward;
Liger's cross-entropy with its gradient over the logits; a fused linear cross-entropy) computed as jnp and
jax.grad do and built for CUDA. Two classes did not:

*An in-place update's hint aliased an input to an output meant for another.* An optimizer that writes its moments
into the inputs `m` and `v` (the aliases left out) was told to alias them to output 0, the parameters' `p_out`, which
the kernel writes with the new parameters (or which is already aliased to `p`): following it makes two arrays one
buffer, silently wrong. The hint now names an output nothing else is meant for (unwritten, or written only with the
input's own values, not aliased, not named for another input), else a new output; its dict holds the kernel's other
aliases.

*A list of arrays as one output parameter.* A multi-tensor optimizer, `out_shape=lambda ps, gs: ps` for lists of
parameters and `def step(ps, gs, new_ps)`, was MG006 "input 0 (ps) is a list of 3 items; kernel inputs are arrays".
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
