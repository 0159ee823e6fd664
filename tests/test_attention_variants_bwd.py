"""The backward of attention variants by hand (probe 62c): FlashAttention-2's two kernels (dq per query tile, dk and
dv per key block summed over the kv head's query heads) with FlexAttention's score_mod, its derivative and a
mask_mod, under `jax.custom_vjp` (attention_variants_lib.flex_attention). Logit softcapping (d/ds of cap * tanh(s /
cap) is 1 - tanh(s / cap) ** 2), a sliding window (both kernels' loops cut to the window: the key blocks of a query
tile, the query blocks of a key block) and ALiBi, against `jax.vjp` of the float32 jnp reference; CUDA export of the
whole gradient; the GPU against the reference and interpret mode (-m gpu).
"""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mgpu_dsl import language as ml
from attention_variants_lib import TOL, flex_attention, inputs, positions, reference, rel


def softcap_mods(cap):
  def score_mod(s, b, h, rows, cols):
    return cap * ml.tanh(s / cap)

  def score_grad(s, b, h, rows, cols):
    t = ml.tanh(s / cap)
    return 1.0 - t * t
  return dict(score_mod=score_mod, score_grad=score_grad), dict(score_mod=lambda s: cap * jnp.tanh(s / cap))


def window_mods(left, right, sq):
  def mask_mod(b, h, rows, cols):
    return (cols >= rows - left) & (cols <= rows + right)

  def kv_range(i, bq, bkv, skv):       # the key blocks query tile i's window touches
    return ml.maximum(i * bq - left, 0) // bkv, ml.minimum(ml.cdiv((i + 1) * bq + right, bkv), ml.cdiv(skv, bkv))

  def q_range(j, bq, bkv, sq):         # the query blocks whose windows touch key block j
    return ml.maximum(j * bkv - right, 0) // bq, ml.minimum(ml.cdiv((j + 1) * bkv + left, bq), ml.cdiv(sq, bq))
  r, c = positions(sq, sq)
  return (dict(mask_mod=mask_mod, kv_range=kv_range, q_range=q_range),
          dict(mask=(c >= r - left) & (c <= r + right)))


def alibi_mods(heads, sq):
  def score_mod(s, b, h, rows, cols):
    return s - ml.exp2(-8.0 * (h + 1) / heads) * ml.abs(rows - cols)
  r, c = positions(sq, sq)
  slopes = 2.0 ** (-8.0 * (jnp.arange(heads) + 1) / heads)
  return dict(score_mod=score_mod), dict(bias=-slopes[None, :, None, None] * jnp.abs(r - c))


F16, BF16 = jnp.float16, jnp.bfloat16
# (shape (batch, seq, heads, head_dim), kv heads, dtype, the mods (kernel's, reference's), tiles)
CASES = {
    "softcap_f16_d64_gqa": ((1, 200, 4, 64), 2, F16, lambda: softcap_mods(30.0), dict()),
    "softcap_bf16_d128_tail": ((2, 130, 2, 128), 1, BF16, lambda: softcap_mods(50.0), dict(stages=3)),
    "window_f16_d64_both_sides": ((1, 333, 2, 64), 1, F16, lambda: window_mods(100, 17, 333), dict()),
    "window_bf16_d128_gqa": ((1, 256, 4, 128), 2, BF16, lambda: window_mods(30, 60, 256), dict()),
    "alibi_f16_d64_mqa": ((1, 192, 4, 64), 1, F16, lambda: alibi_mods(4, 192), dict()),
}


def _run(name, interpret):
  shape, kv_heads, dtype, mods, tiles = CASES[name]
  q, k, v, do = inputs(shape, kv_heads, dtype, scale=3.0, seed=shape[1])
  kernel_mods, ref_kw = mods()
  scale = 1.0 / math.sqrt(shape[3])
  fn = functools.partial(flex_attention, scale=scale, mods=kernel_mods, interpret=interpret, **tiles)
  o, vjp = jax.vjp(fn, q, k, v)
  want, vjp_ref = jax.vjp(lambda q, k, v: reference(q, k, v, scale, **ref_kw)[0], q, k, v)
  return (o, *vjp(do)), (want, *vjp_ref(do.astype(jnp.float32))), dtype


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_in_interpret_mode_match_the_vjp_of_the_reference(name):
  got, want, dtype = _run(name, True)
  assert rel(got[0], want[0]) < TOL[dtype]
  for g, w, what in zip(got[1:], want[1:], "qkv"):
    assert np.isfinite(np.asarray(g, np.float32)).all(), what
    assert rel(g, w) < 2 * TOL[dtype], (what, rel(g, w))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_gradient_exports_for_cuda(name):
  shape, kv_heads, dtype, mods, tiles = CASES[name]
  kernel_mods, _ = mods()
  loss = lambda q, k, v: flex_attention(q, k, v, 0.125, mods=kernel_mods, **tiles).astype(jnp.float32).sum()
  kv = jax.ShapeDtypeStruct(shape[:2] + (kv_heads, shape[3]), dtype)
  exported = jax.export.export(jax.jit(jax.grad(loss, argnums=(0, 1, 2))), platforms=["cuda"])(
      jax.ShapeDtypeStruct(shape, dtype), kv, kv)
  assert exported.mlir_module().count("mosaic_gpu") >= 3      # the forward, dq and dkv kernels


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_gradients_match_the_reference_and_interpret_mode(name):
  got, want, dtype = _run(name, False)
  cpu, _, _ = _run(name, True)
  for g, w, c in zip(got, want, cpu):
    assert rel(g, w) < 2 * TOL[dtype]
    assert rel(g, c) < 1e-2


def test_a_wrong_derivative_is_caught_by_the_reference():
  """The check can fail: the softcap's score_grad left at 1 (the derivative of the plain scores) gives dq and dk
  off by more than the tolerance, while dv (which does not see it) still matches."""
  shape, kv_heads, dtype = (1, 128, 2, 64), 1, F16
  q, k, v, do = inputs(shape, kv_heads, dtype, scale=3.0)
  mods, ref_kw = softcap_mods(10.0)
  mods = dict(score_mod=mods["score_mod"])
  _, vjp = jax.vjp(functools.partial(flex_attention, scale=0.125, mods=mods, interpret=True), q, k, v)
  _, vjp_ref = jax.vjp(lambda q, k, v: reference(q, k, v, 0.125, **ref_kw)[0], q, k, v)
  (dq, dk, dv), (wq, wk, wv) = vjp(do), vjp_ref(do.astype(jnp.float32))
  assert rel(dq, wq) > 10 * TOL[dtype] and rel(dk, wk) > 10 * TOL[dtype]
  assert rel(dv, wv) < 2 * TOL[dtype]
