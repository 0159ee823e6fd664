"""Probe 27a (Triton's tutorials ported literally): 8- and 16-bit integer seeds for ml.rand /
ml.randint (the docs promise any integer scalar), hints that named an operand `x` the kernel
does not have, Triton's block slice `x[pid * B:(pid + 1) * B]` whose hint ran past the array,
Triton's `tl.math` / libdevice spellings, and near-miss keyword names (`keep_dims`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.lowering.random import philox_numpy
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- narrow integer seeds
@mg.mgpu_kernel(out_shape=lambda x, seed: jax.ShapeDtypeStruct(x.shape, jnp.uint32), grid=lambda x, seed: (1,))
def bits_of_seed(x, seed: ml.scalar, out):
  out[...] = ml.randint(seed, ml.arange(1024))


@pytest.mark.parametrize("seed", [jnp.int16(-3), jnp.uint16(65535), jnp.int8(-1), jnp.uint8(200)],
                         ids=["int16", "uint16", "int8", "uint8"])
def test_narrow_integer_seeds_widen_by_signedness_as_triton(seed):
  x = np.zeros(1024, np.float32)
  got = np.asarray(bits_of_seed(x, seed, interpret=True))
  s = int(seed) & (2**64 - 1)                        # sign-extended (signed) or zero-extended (unsigned)
  want = philox_numpy(s & 0xFFFFFFFF, s >> 32, np.arange(1024))[0]
  np.testing.assert_array_equal(got, want)
  assert "mosaic_gpu" in _export(lambda x, s: bits_of_seed(x, s), S((1024,), F32), S((), seed.dtype))


@mg.mgpu_kernel(out_shape=lambda x, seed: x, grid=lambda x, seed: (1,))
def bool_seed(x, seed: ml.scalar, out):
  out[...] = ml.rand(seed > 0, ml.arange(1024))


def test_a_bool_seed_says_to_convert_it():
  expect(bool_seed, (S((1024,), F32), S((), jnp.int32)), mg.KernelTypeError, "ml.rand(seed > 0",
         "a random seed must be a Python int or an integer scalar, got a scalar (bool)",
         hint="convert it: (seed > 0).astype(jnp.int32), or pass a Python int")
