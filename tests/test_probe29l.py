"""Probe 29l (elementwise and fused memory-bound kernels on awkward shapes): tails in both
dimensions, dtype conversions at the boundary, in-place updates, int4 packing and unpacking."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _packed(a):
  ai = np.asarray(a).astype(np.int32)
  return ((ai[:, 0::2] & 15) | ((ai[:, 1::2] & 15) << 4)).astype(np.uint8)


# ---------------------------------------------------------------- a row-masked tile reshaped
@mg.mgpu_kernel(out_shape=lambda a: S((a.shape[0], a.shape[1] // 2), jnp.uint8),
                grid=lambda a: (ml.cdiv(a.shape[0], 16),))
def pack_nibbles(a, out):
  i = ml.program_id(0)
  r = i * 16 + ml.arange(16)
  m = r[:, None] < a.shape[0]
  v = a.at[ml.ds(i * 16, 16), :].load(mask=m, other=0).astype(jnp.int32)
  v2 = v.reshape(16 * 64, 2)
  p = (v2[:, 0] & 0xF) | ((v2[:, 1] & 0xF) << 4)
  out.at[ml.ds(i * 16, 16), :].store(p.reshape(16, 64).astype(jnp.uint8), mask=m)


@mg.mgpu_kernel(out_shape=lambda a: S((a.shape[0], a.shape[1] // 2), jnp.uint8),
                grid=lambda a: (ml.cdiv(a.shape[0], 16),))
def pack_nibbles_3d(a, out):
  i = ml.program_id(0)
  m = (i * 16 + ml.arange(16))[:, None] < a.shape[0]
  v3 = a.at[ml.ds(i * 16, 16), :].load(mask=m, other=0).astype(jnp.int32).reshape(16, 64, 2)
  p = (v3[:, :, 0] & 0xF) | ((v3[:, :, 1] & 0xF) << 4)
  out.at[ml.ds(i * 16, 16), :].store(p.astype(jnp.uint8), mask=m)


@mg.mgpu_kernel(out_shape=lambda q: S((q.shape[0], q.shape[1] * 2), jnp.float32),
                grid=lambda q: (ml.cdiv(q.shape[0], 16),))
def unpack_nibbles(q, out):
  i = ml.program_id(0)
  m = (i * 16 + ml.arange(16))[:, None] < q.shape[0]
  v = q.at[ml.ds(i * 16, 16), :].load(mask=m, other=0).astype(jnp.int32)
  lo, hi = (v << 28) >> 28, (v << 24) >> 28
  both = ml.concatenate([lo[:, :, None], hi[:, :, None]], axis=2).reshape(16, 128)
  out.at[ml.ds(i * 16, 16), :].store(both.astype(jnp.float32), mask=m)


@pytest.mark.parametrize("kernel", [pack_nibbles, pack_nibbles_3d], ids=["2d", "3d"])
def test_a_row_masked_tile_reshapes_as_an_unmasked_one_does(kernel):
  """It was MG204 ("a row-wise tile ... can only gain or lose size-1 axes"): the row mask
  `r[:, None] < n`, a broadcast, gave the loaded tile a layout a reshape cannot take, while the
  same kernel without the mask compiled. The mask is now computed at the tile's shape."""
  a = rand.randint(rand.key(0), (100, 128), -8, 8).astype(jnp.int8)
  np.testing.assert_array_equal(kernel(a, interpret=True), _packed(a))
  assert "mosaic_gpu" in str(_export(kernel, S((100, 128), jnp.int8)))
  for block in (256,):
    k = mg.mgpu_kernel(out_shape=lambda a: S((a.shape[0], a.shape[1] // 2), jnp.uint8),
                       grid=lambda a: (ml.cdiv(a.shape[0], 16),), block=block)(kernel.fn)
    np.testing.assert_array_equal(k(a, interpret=True), _packed(a))
    _export(k, S((100, 128), jnp.int8))


def test_a_row_masked_tile_meeting_a_3d_tensor_compiles():
  """unpack: the masked tile is made 3-D (lo[:, :, None]) and concatenated; was MG204."""
  q = rand.randint(rand.key(1), (100, 64), 0, 256).astype(jnp.uint8)
  qi = np.asarray(q).astype(np.int32)
  want = np.stack([(qi << 28) >> 28, (qi << 24) >> 28], -1).reshape(100, 128).astype(np.float32)
  np.testing.assert_array_equal(unpack_nibbles(q, interpret=True), want)
  _export(unpack_nibbles, S((100, 64), jnp.uint8))


@pytest.mark.gpu
def test_row_masked_reshape_on_the_gpu():
  a = rand.randint(rand.key(2), (1000, 128), -8, 8).astype(jnp.int8)
  np.testing.assert_array_equal(jax.jit(pack_nibbles)(a), _packed(a))
  np.testing.assert_array_equal(jax.jit(pack_nibbles_3d)(a), _packed(a))


# ---------------------------------------------------------------- columns of a narrow strided tile
@mg.mgpu_kernel(out_shape=lambda x: S((2, x.shape[0]), x.dtype), grid=lambda x: (1,))
def two_columns(x, out):
  v = x[...]
  out.at[0, :][...] = v[:, 0]
  out.at[1, :][...] = v[:, 1]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype", [((1024, 2), jnp.int32), ((512, 4), jnp.int32), ((1024, 2), jnp.float16),
                                         ((256, 8), jnp.int8), ((128, 24), jnp.float32)], ids=str)
def test_columns_of_a_narrow_strided_tile_on_the_gpu(shape, dtype):
  """The columns of a (1024, 2) int32 tile came out wrong on the H200 (1024 of 2048 elements):
  Mosaic's foreach adds a register vector's element number to the last index alone, so elements
  past a row's end were stored as that row's. benchmarks/probe_reshape_pairs.py found it."""
  x = jnp.arange(shape[0] * shape[1]).reshape(shape).astype(dtype)
  np.testing.assert_array_equal(jax.jit(two_columns)(x), np.asarray(x)[:, :2].T)
