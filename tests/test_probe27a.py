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


# ---------------------------------------------------------------- hints name the user's operand
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32), grid=lambda x: (1,))
def root_of_ints(x, out):
  v = x[...]
  out[...] = v ** 0.5


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def square_of_bytes(x, out):
  v = x[...]
  out[...] = v ** 2


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32), grid=lambda x: (1,))
def sigmoid_of_ints(x, out):
  v = x[...]
  out[...] = ml.sigmoid(v)


def test_power_and_sigmoid_hints_name_the_operand_as_written():
  # The hints said x.astype(...), and x is the kernel's input ref here, which has no .astype.
  # (v ** 0.5 of integers is float32 now, as jnp computes it: probe 37f)
  x = jnp.arange(256, dtype=jnp.int32)
  np.testing.assert_allclose(root_of_ints(x, interpret=True), x ** 0.5, rtol=1e-6)
  b = jnp.arange(-128, 128, dtype=jnp.int8)      # (int8 ** 2 wraps as jnp's since probe 39a: was MG106)
  np.testing.assert_array_equal(square_of_bytes(b, interpret=True), b ** 2)
  expect(sigmoid_of_ints, (S((256,), jnp.int32),), mg.UnsupportedDtypeError, "ml.sigmoid(v)",
         "ml.sigmoid needs a floating-point operand, got int32", hint="convert first: v.astype(jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32), grid=lambda x: (1,))
def root_followed(x, out):
  v = x[...]
  out[...] = v.astype(jnp.float32) ** 0.5 + ml.sigmoid(v.astype(jnp.float32))


def test_the_power_hint_followed_works():
  x = np.arange(256, dtype=np.int32)
  got = np.asarray(root_followed(x, interpret=True))
  xf = x.astype(np.float32)
  np.testing.assert_allclose(got, np.sqrt(xf) + 1 / (1 + np.exp(-xf)), rtol=1e-6)
  assert "mosaic_gpu" in _export(root_followed, S((256,), jnp.int32))


# ---------------------------------------------------------------- Triton's block slice
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def block_slice(x, out):
  pid = ml.program_id(0)
  offs = pid * 1024 + ml.arange(1024)
  v = x.at[pid * 1024:(pid + 1) * 1024].load(mask=offs < x.shape[0])
  out.at[pid * 1024:(pid + 1) * 1024].store(v * 2, mask=offs < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8), 2))
def block_slice_2d(x, out):
  pid, j = ml.program_id(0), ml.program_id(1)
  out.at[8 * pid:8 * (pid + 1) + 0, j * 128:j * 128 + 128][...] = x.at[ml.ds(pid * 8, 8), ml.ds(j * 128, 128)][...]


# The hint, pasted (a window of the slice's fixed length, masked at the array's end).
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def block_slice_followed(x, out):
  pid = ml.program_id(0)
  v = x.at[ml.ds(pid * 1024, 1024)].load(mask=pid * 1024 + ml.arange(1024) < 3000, other=0)
  out.at[ml.ds(pid * 1024, 1024)].store(v * 2, mask=pid * 1024 + ml.arange(1024) < 3000)


def test_tritons_block_slice_is_a_fixed_window_masked_at_the_end():
  """x[pid * B:(pid + 1) * B] was hinted a window of the whole array's size, masked to B elements:
  pasted, the last program's mask reached past the array (an OutOfBoundsError). Since probe 39a the
  slice is the window ml.ds(pid * B, B) it then hinted."""
  x = np.random.default_rng(0).standard_normal(3000).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(block_slice(x, interpret=True)), x * 2)
  x2 = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(block_slice_2d(x2, interpret=True)), x2)
  np.testing.assert_array_equal(np.asarray(block_slice_followed(x, interpret=True)), x * 2)
  assert "mosaic_gpu" in _export(block_slice_followed, S((3000,), F32))


# ---------------------------------------------------------------- Triton's spellings
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def libdevice_rsqrt(x, out):
  v = x[...]
  out[...] = ml.math.rsqrt(v)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def libdevice_pow(x, out):
  v = x[...]
  out[...] = ml.extra.cuda.libdevice.pow(v, 2.5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (8,))
def keep_dims_spelling(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8)][...]
  out.at[ml.ds(i * 8, 8)][...] = v / ml.sum(v, axis=1, keep_dims=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (8,))
def keepdims_followed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8)][...]
  out.at[ml.ds(i * 8, 8)][...] = v / ml.sum(v, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (8,))
def max_with_indices(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8)][...]
  m, j = ml.max(v, axis=1, return_indices=True)
  out.at[ml.ds(i * 8, 8)][...] = v - m[:, None]


def test_tritons_math_namespaces_and_keyword_spellings_are_hinted():
  spec = (S((64, 128), F32),)
  x = np.random.default_rng(1).random((64, 128)).astype(np.float32) + 0.5
  # ml.math.rsqrt and ml.extra.cuda.libdevice.pow were MG002 hints until probe 48g: they are ml.rsqrt and ml.pow
  np.testing.assert_allclose(np.asarray(libdevice_rsqrt(x, interpret=True)), 1 / np.sqrt(x), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(libdevice_pow(x, interpret=True)), x ** 2.5, rtol=1e-5)
  x = np.random.default_rng(1).random((64, 128)).astype(np.float32) + 0.5
  # keep_dims= (Triton's spelling) was this hint until probe 47g: it is keepdims=
  np.testing.assert_allclose(np.asarray(keep_dims_spelling(x, interpret=True)), x / x.sum(1, keepdims=True), rtol=1e-6)
  # return_indices=True was this hint until probe 47g; it is now the pair (ml.max, ml.argmax)
  np.testing.assert_array_equal(np.asarray(max_with_indices(x, interpret=True)), x - x.max(1, keepdims=True))
  np.testing.assert_allclose(np.asarray(keepdims_followed(x, interpret=True)), x / x.sum(1, keepdims=True),
                             rtol=1e-6)
  assert "mosaic_gpu" in _export(keepdims_followed, *spec)


@mg.mgpu_kernel(out_shape=lambda x, l: S((8,), x.dtype), grid=(8,))
def runtime_stop(x, l, out):
  p = ml.program_id(0)
  out[p] = ml.sum(x.at[p, p * 40:l[p]][...])


# The hint, pasted: a stop past the row's end clamps, as Python's slice does.
@mg.mgpu_kernel(out_shape=lambda x, l: S((8,), x.dtype), grid=(8,))
def runtime_stop_followed(x, l, out):
  p = ml.program_id(0)
  out[p] = ml.sum(x.at[p, ml.ds(p * 40, 256)].load(mask=ml.arange(256) < (ml.minimum(l[p], 256) - p * 40), other=0))


def test_a_runtime_stop_hint_clamps_the_mask_at_the_arrays_end():
  """The mask was ml.arange(256) < (l[p] - p * 40): with l[p] past the row's end it turned on
  elements outside the array (an OutOfBoundsError), where Python's slice clamps."""
  specs = (S((8, 256), F32), S((8,), jnp.int32))
  e = expect(runtime_stop, specs, mg.KernelTypeError, "x.at[p, p * 40",
             "slice p * 40:l[p] of dimension 1 of x has a run-time stop: a window's size is fixed when the kernel"
             " is compiled")
  assert "x.at[p, ml.ds(p * 40, 256)].load(mask=ml.arange(256) < (ml.minimum(l[p], 256) - p * 40), other=0)" \
      in e.hint, e.hint
  x = np.random.default_rng(2).standard_normal((8, 256)).astype(np.float32)
  l = np.array([0, 300, 100, 256, 200, 255, 250, 1000], np.int32)
  want = [x[p, p * 40:l[p]].sum() for p in range(8)]
  np.testing.assert_allclose(np.asarray(runtime_stop_followed(x, l, interpret=True)), want, rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in _export(runtime_stop_followed, *specs)
