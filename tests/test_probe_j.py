"""Hints found by porting Pallas's GPU ops (eighth session's fourth probe): each names the fix that
works for the case at hand."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


@mg.mgpu_kernel(out_shape=lambda x, *, stages: S((64, 256), x.dtype))
def big_stages(x, out, *, stages: ml.constexpr):
  """Two 64 KiB buffers a stage: only one stage fits in 227 KiB."""
  a_s, b_s = ml.smem((64, 256)), ml.smem((64, 256))
  acc = ml.zeros((64, 256), jnp.float32)
  for k in ml.range(x.shape[0] // 128, stages=stages):
    ml.copy(x.at[ml.ds(k * 128, 64)], a_s)
    ml.copy(x.at[ml.ds(k * 128 + 64, 64)], b_s)
    acc = acc + a_s[...] + b_s[...]
  out[...] = acc.astype(out.dtype)


def test_when_only_one_stage_fits_the_hint_says_stages_1():
  """Once 'use smaller tiles' alone, though stages=1 fits (the docs say the largest that fits)."""
  with pytest.raises(mg.SmemCapacityError) as info:
    big_stages.check(S((1024, 256), F32), stages=4)
  e = info.value
  assert e.message.startswith("with stages=4 this loop's buffers need") and "a_s 64 KiB, b_s 64 KiB" in e.message
  assert e.hint.startswith("use stages=1 (") and "unpipelined" in e.hint
  x = jnp.ones((1024, 256), F32)
  np.testing.assert_allclose(np.asarray(big_stages(x, stages=1, interpret=True)), 16.0)


@mg.mgpu_kernel(out_shape=lambda q, k: S((64, 64), F32))
def head_dim_96(q, k, out):
  q_s, k_s = ml.smem(q.shape), ml.smem(k.shape)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  out[...] = ml.dot(q_s, k_s.T)


def test_a_contracted_head_dim_of_96_needs_no_padding():
  """head_dim 96 (192 bytes) was MG501 with padding to 128 as the hint; its buffers now take the 64-byte
  swizzle (twenty-ninth session), and a head_dim that is no multiple of 32 bytes is padded (probe 47e)."""
  q = rand.normal(rand.key(0), (64, 96), F16)
  k = rand.normal(rand.key(1), (64, 96), F16)
  got = head_dim_96(q, k, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(q.astype(F32) @ k.astype(F32).T), rtol=1e-2, atol=1e-2)
  # head_dim 72, no multiple of 32 bytes, was MG501 until probe 47e, which pads it with zeros in registers
  q, k = q[:, :72], k[:, :72]
  np.testing.assert_allclose(np.asarray(head_dim_96(q, k, interpret=True)), np.asarray(q.astype(F32) @ k.astype(F32).T),
                             rtol=1e-2, atol=1e-2)
