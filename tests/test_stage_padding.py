"""Pipelined loops whose buffers TMA could not stage as written (session 54):

- a loaded buffer whose bytes are not a multiple of 128 (a vector of 80 float32 statistics beside an 80-row tile,
  attention's logsumexp at a query block of 80) gets stages padded to 128 bytes each (it was MG401);
- store buffers (written from registers, then TMA-stored each trip) take one copy rather than one a stage where a
  copy a stage overflows the SMEM beside the kernel's other buffers (it was MG402): each trip's write then waits
  for the previous trip's store to have read the buffer.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x: x)
def pipelined_small_buffer(x, out):
  buf = ml.smem((2, 4), jnp.float32)
  for j in ml.range(4, stages=2):
    ml.copy(x.at[ml.ds(j * 2, 2)], buf)
    ml.copy(buf, out.at[ml.ds(j * 2, 2)])


@mg.mgpu_kernel(out_shape=lambda x, v: S((x.shape[0], x.shape[1]), jnp.float32))
def scaled_rows(x, v, out, *, rows: ml.constexpr, stages: ml.constexpr):
  """out[j-th block] = x block * v block[:, None]: an 80-row tile and its 80 float32 factors (320 bytes) a trip."""
  x_s = ml.smem((rows, x.shape[1]), x.dtype)
  v_s = ml.smem((rows,), jnp.float32)
  o_s = ml.smem((rows, x.shape[1]), jnp.float32)
  for j in ml.range(x.shape[0] // rows, stages=stages):
    ml.copy(x.at[ml.ds(j * rows, rows)], x_s)
    ml.copy(v.at[ml.ds(j * rows, rows)], v_s)
    o_s[...] = x_s[...].astype(jnp.float32) * v_s[...][:, None]
    ml.copy(o_s, out.at[ml.ds(j * rows, rows)])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32), block=256)
def widened_tiles(x, out, *, rows: ml.constexpr, stages: ml.constexpr):
  """Each trip loads a (rows, 256) float16 tile and stores it widened to float32: at rows=64 with three stages the
  store buffers, a copy a stage, pass the SMEM (3 x 32 KiB loaded + 3 x 64 KiB stored); one copy fits."""
  x_s = ml.smem((rows, x.shape[1]), x.dtype)
  o_s = ml.smem((rows, x.shape[1]), jnp.float32)
  for j in ml.range(x.shape[0] // rows, stages=stages):
    ml.copy(x.at[ml.ds(j * rows, rows)], x_s)
    o_s[...] = x_s[...].astype(jnp.float32) * 2.0
    ml.copy(o_s, out.at[ml.ds(j * rows, rows)])


def _alloc_shapes(kernel, *specs, **kw):
  """The shapes of the kernel's SMEM allocations in its typed IR, in order."""
  return re.findall(r"ref<SMEM, ([0-9x]+), \w+> = smemalloc", kernel.typed_ir(*specs, **kw))


def test_a_pipelined_buffer_of_32_bytes_gets_stages_of_128():
  x = np.arange(32, dtype=np.float32).reshape(8, 4)
  assert _alloc_shapes(pipelined_small_buffer, S(x.shape, F32)) == ["2x8x4"]
  np.testing.assert_array_equal(np.asarray(pipelined_small_buffer(x, interpret=True)), x)
  pipelined_small_buffer.check(S(x.shape, F32))       # builds the Mosaic GPU module


@pytest.mark.parametrize("rows,stages,padded", [(80, 2, 96), (80, 3, 96), (40, 2, 64), (48, 2, 64)])
def test_vectors_of_odd_bytes_beside_their_tiles(rows, stages, padded):
  rng = np.random.default_rng(rows + stages)
  x = rng.standard_normal((rows * 4, 64)).astype(np.float16)
  v = rng.standard_normal(rows * 4).astype(np.float32)
  specs = (S(x.shape, jnp.float16), S(v.shape, F32))
  shapes = _alloc_shapes(scaled_rows, *specs, rows=rows, stages=stages)
  assert f"{stages}x{padded}" in shapes, shapes            # the vector: each stage padded to 128 bytes
  assert f"{stages}x{rows}x64" in shapes, shapes            # the tile: unpadded (its bytes were whole)
  got = np.asarray(scaled_rows(x, v, rows=rows, stages=stages, interpret=True))
  np.testing.assert_allclose(got, x.astype(np.float32) * v[:, None], rtol=1e-6)
  scaled_rows.check(*specs, rows=rows, stages=stages)


def test_cuda_export_of_a_padded_stage():
  x = S((320, 64), jnp.float16)
  v = S((320,), F32)
  f = jax.jit(lambda a, b: scaled_rows(a, b, rows=80, stages=2))
  text = jax.export.export(f, platforms=["cuda"])(x, v).mlir_module()
  assert "mosaic_gpu" in text


def test_store_buffers_take_one_copy_where_a_copy_a_stage_overflows():
  spec = S((768, 256), jnp.float16)
  # two stages fit with a copy a stage (2 x 32 + 2 x 64 KiB); three do not (96 + 192), with one store copy they do
  assert _alloc_shapes(widened_tiles, spec, rows=64, stages=2) == ["2x64x256", "2x64x256"]
  shapes = _alloc_shapes(widened_tiles, spec, rows=64, stages=3)
  assert shapes == ["3x64x256", "64x256"], shapes          # the store buffer: one copy
  mlir = widened_tiles.mlir(spec, rows=64, stages=3)
  assert "memref<64x256xf32" in mlir and "memref<3x64x256xf32" not in mlir
  x = np.random.default_rng(0).standard_normal(spec.shape).astype(np.float16)
  got = np.asarray(widened_tiles(x, rows=64, stages=3, interpret=True))
  np.testing.assert_array_equal(got, x.astype(np.float32) * 2)


def test_a_store_buffer_too_big_even_once_is_still_mg402():
  with pytest.raises(mg.SmemCapacityError) as info:
    widened_tiles.check(S((768, 256), jnp.float16), rows=256, stages=2)
  assert info.value.code == "MG402"
  assert info.value.hint


@pytest.mark.gpu
@pytest.mark.parametrize("rows,stages", [(80, 2), (80, 3), (40, 2), (48, 2)])
def test_gpu_vectors_of_odd_bytes_beside_their_tiles(rows, stages):
  rng = np.random.default_rng(rows + stages)
  x = rng.standard_normal((rows * 8, 64)).astype(np.float16)
  v = rng.standard_normal(rows * 8).astype(np.float32)
  got = np.asarray(jax.jit(lambda a, b: scaled_rows(a, b, rows=rows, stages=stages))(x, v))
  np.testing.assert_allclose(got, x.astype(np.float32) * v[:, None], rtol=1e-6)


@pytest.mark.gpu
def test_gpu_pipelined_small_buffer_and_one_copy_store_buffers():
  x = np.arange(32, dtype=np.float32).reshape(8, 4)
  np.testing.assert_array_equal(np.asarray(pipelined_small_buffer(x)), x)
  y = np.random.default_rng(1).standard_normal((1024, 256)).astype(np.float16)
  got = np.asarray(widened_tiles(y, rows=64, stages=3))
  np.testing.assert_array_equal(got, y.astype(np.float32) * 2)
