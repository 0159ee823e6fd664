"""Findings of a user probe: inputs that reached an InternalError, and diagnostics whose words
were not the user's. Each gets a KernelError at the user's line, in the user's words, with a
hint, or works, the same in interpret mode and when compiling."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- f16/bf16 atomics of 128 * odd elements
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=(2,))
def atomic_into_output(x, o, *, kind: ml.constexpr = "add"):
  if kind == "add":
    ml.atomic_add(o, x[...])
  elif kind == "max":
    ml.atomic_max(o, x[...])
  else:
    ml.atomic_min(o, x[...])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def atomic_into_smem(x, o):
  buf = ml.smem(x.shape, x.dtype)
  buf[...] = ml.zeros(x.shape, x.dtype)
  ml.atomic_add(buf, x[...])
  ml.atomic_add(buf, x[...])
  o[...] = buf[...]


ODD_SHAPES = [(128,), (384,), (1, 128)]


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
def test_half_atomic_add_of_single_elements_per_thread_works(shape, dtype):
  """Once: InternalError 'f16/bf16 atomic stores require even vector length, got 1' at .check
  (each thread of a (128,) float16 vector holds one element, and Mosaic GPU's red takes pairs)."""
  x = (jnp.arange(np.prod(shape)) % 7).reshape(shape).astype(dtype)
  atomic_into_output.check(x)
  atomic_into_smem.check(x)
  want = np.asarray(x, np.float32)
  np.testing.assert_array_equal(np.asarray(atomic_into_output(x, interpret=True), np.float32), 2 * want)
  np.testing.assert_array_equal(np.asarray(atomic_into_smem(x, interpret=True), np.float32), 2 * want)


def test_half_atomic_add_of_single_elements_is_one_red_per_element():
  txt = atomic_into_output.mlir(S((128,), jnp.float16))
  assert "red.relaxed.gpu.add.noftz.f16 " in txt
  txt = atomic_into_smem.mlir(S((384,), jnp.bfloat16))
  assert "red.shared::cta.relaxed.cta.add.noftz.bf16 " in txt


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape", ODD_SHAPES + [(64,)], ids=str)
def test_half_atomic_max_of_single_elements_is_a_layout_error(shape, kind):
  """Hopper's float16 red max/min exists only for pairs of neighbours (.v2.f16 in GMEM): the
  (64,) vector compiled before, one red.max.f16 per element, and ptxas rejected it on the H200
  ("Vector modifier required for instruction 'red.max.f16'")."""
  msg = (f"ml.atomic_{kind} of a float16 tensor of shape {shape}: Hopper's float16 atomic {kind} updates"
         f" pairs of neighbouring elements, and the threads hold this tensor's elements singly")
  hint = ("update 256 elements or a multiple at once (e.g. a window of shape (256,) or (8, 128)), not a"
          " row or column statistic (a reduction's result); ml.atomic_add takes any shape")
  expect(atomic_into_output, [S(shape, jnp.float16)], mg.LayoutError, f"ml.atomic_{kind}(", msg, hint=hint,
         kind=kind)
  with pytest.raises(mg.LayoutError) as info:        # interpret mode rejects what compiling rejects
    atomic_into_output(jnp.ones(shape, jnp.float16), kind=kind, interpret=True)
  assert info.value.message == msg


@pytest.mark.parametrize("shape", [(256,), (8, 128)], ids=str)
def test_half_atomic_max_of_pairs_works(shape):
  x = (jnp.arange(np.prod(shape)) % 5).reshape(shape).astype(jnp.float16)
  atomic_into_output.check(x, kind="max")
  np.testing.assert_array_equal(atomic_into_output(x, kind="max", interpret=True), x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
@pytest.mark.parametrize("shape", ODD_SHAPES + [(64,)], ids=str)
def test_half_atomic_add_of_single_elements_on_the_gpu(shape, dtype):
  x = (jnp.arange(np.prod(shape)) % 7).reshape(shape).astype(dtype)
  want = 2 * np.asarray(x, np.float32)
  np.testing.assert_array_equal(np.asarray(atomic_into_output(x), np.float32), want)
  np.testing.assert_array_equal(np.asarray(atomic_into_smem(x), np.float32), want)
