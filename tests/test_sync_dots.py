"""Tensor-core results still in flight across a loop: a pipelined loop whose body issues
several dots yielding carried values (two accumulators) leaves all of them running when an
iteration ends, so reading any of them (at the next iteration's top, or after the loop) waits
for its own group (frontend/sync.py `carried_dots`). Found by a probe: only the last dot was
modelled, so the first accumulator was read while its WGMMA still ran."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
A, B = S((64, 64), jnp.float16), S((256, 64), jnp.float16)


@mg.mgpu_kernel(out_shape=lambda a, b0, b1: (S((64, 64), jnp.float32),) * 2)
def two_accumulators(a, b0, b1, o0, o1, *, rescale: ml.constexpr = False):
  a_s = ml.smem((64, 64))
  b0_s = ml.smem((64, 64))
  b1_s = ml.smem((64, 64))
  ml.copy(a, a_s)
  acc0 = ml.zeros((64, 64), jnp.float32)
  acc1 = ml.zeros((64, 64), jnp.float32)
  for j in ml.range(b0.shape[0] // 64, stages=2):
    ml.copy(b0.at[ml.ds(j * 64, 64)], b0_s)
    ml.copy(b1.at[ml.ds(j * 64, 64)], b1_s)
    if rescale:
      acc0 = acc0 * 0.5                      # the previous iteration's first dot's result
    p = ml.dot(a_s, b0_s.T).astype(jnp.float16)
    acc0 = ml.dot(p, b0_s, acc0)
    acc1 = ml.dot(p, b1_s, acc1)
  o0[...] = acc0
  o1[...] = acc1


def reference(a, b0, b1, rescale):
  a, b0, b1 = (np.asarray(x, np.float32) for x in (a, b0, b1))
  acc0, acc1 = np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32)
  for j in range(b0.shape[0] // 64):
    k0, k1 = b0[j * 64:(j + 1) * 64], b1[j * 64:(j + 1) * 64]
    if rescale:
      acc0 = acc0 * 0.5
    p = (a @ k0.T).astype(np.float16).astype(np.float32)
    acc0, acc1 = acc0 + p @ k0, acc1 + p @ k1
  return acc0, acc1


def inputs(key=0):
  ks = rand.split(rand.key(key), 3)
  return (rand.normal(ks[0], (64, 64)).astype(jnp.float16) * 0.1,
          rand.normal(ks[1], (256, 64)).astype(jnp.float16), rand.normal(ks[2], (256, 64)).astype(jnp.float16))


def _lines(rescale):
  return [l.strip() for l in two_accumulators.typed_ir(A, B, B, rescale=rescale).splitlines()]


def test_after_the_loop_the_first_accumulator_waits_for_its_own_dot():
  lines = _lines(False)
  o0 = next(l.split()[1] for l in lines if l.startswith("param ") and " o0:" in l)
  store0 = next(i for i, l in enumerate(lines) if l.startswith(f"store ref={o0} "))
  assert lines[store0 - 1] == "dotwait pending=1" or lines[store0 - 1].startswith("dotwait pending=1 "), lines[store0 - 3:store0 + 1]


def test_at_the_top_of_an_iteration_the_previous_first_dot_is_awaited():
  lines = _lines(True)
  body = lines.index(next(l for l in lines if "stages=2" in l and " = for " in l))
  mul = next(i for i in range(body, len(lines)) if "binary kind=mul" in lines[i] and "wgmma" in lines[i])
  assert any(l.startswith("dotwait pending=1") for l in lines[body:mul]), lines[body:mul + 1]


@pytest.mark.parametrize("rescale", [False, True])
def test_interpret_mode_sees_no_race_and_the_numbers_match(rescale):
  a, b0, b1 = inputs()
  got = two_accumulators(a, b0, b1, rescale=rescale, interpret=True)
  for g, w in zip(got, reference(a, b0, b1, rescale)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("rescale", [False, True])
def test_gpu_two_accumulators(rescale):
  a, b0, b1 = inputs(1)
  got = jax.jit(lambda *x: two_accumulators(*x, rescale=rescale))(a, b0, b1)
  for g, w in zip(got, reference(a, b0, b1, rescale)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=2e-2, atol=2e-2)
