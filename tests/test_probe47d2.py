"""Probe 47d (second file): `ml.copy` of windows whose rows TMA cannot align (int8 rows of 40 or 200 bytes, a
float16 head dimension of 36) was MG401 whose hint read the window into registers; the copy now goes through
registers itself, masked where the window leaves the array (TMA's zero fill on loads, clipping on stores)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, I8, I32 = jnp.float32, jnp.float16, jnp.int8, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _exports(kernel, *specs, **constexprs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  return jax.export.export(jax.jit(lambda *a: kernel(*a, **constexprs)), platforms=["cuda"])(*specs)


@mg.mgpu_kernel(out_shape=lambda q, s: S(q.shape, F32), grid=lambda q, s: (ml.cdiv(q.shape[0], 64),))
def dequantize(q, s, out):
  """int8 rows of 40 bytes, the last tile of rows past the end: loaded and stored with ml.copy."""
  i = ml.program_id(0)
  b = ml.smem((64, q.shape[1]), q.dtype)
  o = ml.smem((64, q.shape[1]), jnp.float32)
  ml.copy(q.at[ml.ds(i * 64, 64), :], b)
  o[...] = b[...].astype(jnp.float32) * s[0]
  ml.copy(o, out.at[ml.ds(i * 64, 64), :])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (ml.cdiv(x.shape[0], 64),))
def head_dim_36(x, out):
  """A float16 head dimension of 36 (72-byte rows), scaled in SMEM and copied back."""
  i = ml.program_id(0)
  b = ml.smem((64, 36), x.dtype)
  ml.copy(x.at[ml.ds(i * 64, 64), :], b)
  b[...] = b[...] * 2
  ml.copy(b, out.at[ml.ds(i * 64, 64), :])


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), I32),
                grid=lambda a, bt: (a.shape[0] // 64, bt.shape[0] // 64))
def int8_matmul(a, bt, c):
  """A W8A8 matmul whose K of 200 makes rows 200 bytes apart: both tiles copied into the tensor cores'
  buffers through registers, the last k tile past K filled with zeros as TMA would."""
  i, j = ml.program_id(0), ml.program_id(1)
  acc = ml.zeros((64, 64), jnp.int32)
  for k in range(ml.cdiv(a.shape[1], 64)):
    a_s, b_s = ml.smem((64, 64), jnp.int8), ml.smem((64, 64), jnp.int8)
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(bt.at[ml.ds(j * 64, 64), ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def invert(x, out):
  """A uint8 image of rows 999 bytes apart in (16, 128) tiles of a grid-stride loop (not pipelined): the last
  tiles of each row and of the image run past its ends, read as zeros and written only inside."""
  per_row = ml.cdiv(x.shape[1], 128)
  a, b = ml.smem((16, 128), jnp.uint8), ml.smem((16, 128), jnp.uint8)
  for t in range(ml.program_id(0), ml.cdiv(x.shape[0], 16) * per_row, ml.num_programs(0)):
    rows, cols = ml.ds(t // per_row * 16, 16), ml.ds(t % per_row * 128, 128)
    ml.copy(x.at[rows, cols], a)
    b[...] = (255 - a[...].astype(jnp.int32)).astype(jnp.uint8)
    ml.copy(b, out.at[rows, cols])


def _operands(seed):
  rng = np.random.default_rng(seed)
  q, s = rng.integers(-100, 100, (100, 40)).astype(np.int8), np.array([0.5], np.float32)
  x = rng.standard_normal((128, 36)).astype(np.float16)
  a, bt = rng.integers(-5, 5, (64, 200)).astype(np.int8), rng.integers(-5, 5, (128, 200)).astype(np.int8)
  return q, s, x, a, bt, rng.integers(0, 256, (100, 999)).astype(np.uint8)


@mg.mgpu_kernel(out_shape=lambda x: x)
def too_few(x, out):
  b = ml.smem((16, 2), jnp.float32)
  ml.copy(x, b)
  ml.copy(b, out)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def pipelined(x, out):
  a = ml.smem((16, x.shape[1]), jnp.uint8)
  for t in ml.range(ml.program_id(0), x.shape[0] // 16, ml.num_programs(0), stages=2):
    ml.copy(x.at[ml.ds(t * 16, 16), :], a)
    out.at[ml.ds(t * 16, 16), :][...] = a[...]


def _registers_cannot_take_keep_the_tma_error():
  """32 elements are too few for a warpgroup's registers; a pipelined loop needs its TMA loads."""
  expect(too_few, [S((16, 2), F32)], mg.TmaLimitError, "ml.copy(x, b)",
         "TMA copies need the last dimension to span a multiple of 16 bytes; 2 x 4 bytes = 8")
  expect(pipelined, [S((64, 120), jnp.uint8)], mg.TmaLimitError, "ml.copy(x.at",
         "TMA copies need the last dimension to span a multiple of 16 bytes; 120 x 1 bytes = 120")


def test_copies_of_rows_tma_cannot_align_go_through_registers():
  q, s, x, a, bt, img = _operands(0)
  np.testing.assert_array_equal(invert(img, interpret=True), 255 - img)
  _exports(invert, S((100, 999), jnp.uint8))
  np.testing.assert_array_equal(dequantize(q, s, interpret=True), q.astype(np.float32) * 0.5)
  np.testing.assert_array_equal(np.asarray(head_dim_36(x, interpret=True)), x * 2)
  np.testing.assert_array_equal(int8_matmul(a, bt, interpret=True), a.astype(np.int64) @ bt.astype(np.int64).T)
  for k, specs in ((dequantize, (S((100, 40), I8), S((1,), F32))), (head_dim_36, (S((128, 36), F16),)),
                   (int8_matmul, (S((64, 200), I8), S((128, 200), I8)))):
    txt = k.mlir(*specs)
    assert "cp.async.bulk.tensor.shared.cluster.global" not in txt, k.__name__     # (no TMA load left)
    _exports(k, *specs)
  assert "cp.async.bulk.tensor.global.shared" in dequantize.mlir(S((100, 40), I8), S((1,), F32))  # (f32 rows: TMA)
  _registers_cannot_take_keep_the_tma_error()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_register_copies_on_the_gpu():
  q, s, x, a, bt, img = _operands(1)
  np.testing.assert_array_equal(jax.jit(invert)(img), 255 - img)
  np.testing.assert_array_equal(jax.jit(dequantize)(q, s), q.astype(np.float32) * 0.5)
  np.testing.assert_array_equal(np.asarray(jax.jit(head_dim_36)(x)), x * 2)
  np.testing.assert_array_equal(jax.jit(int8_matmul)(a, bt), a.astype(np.int64) @ bt.astype(np.int64).T)
