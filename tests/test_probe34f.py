"""Probe 34f (convolution-family kernels: implicit-GEMM and direct convolutions, depthwise
convolutions, pooling, global average pooling, upsampling, pixel shuffle, batch norm): the
problems a computer-vision user met writing them from the docs."""
import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- a 3-D reduction over leading axes
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[3]), F32), grid=lambda x: (x.shape[0],))
def global_avg_pool(x, out):
  n = ml.program_id(0)
  v = x.at[n][...]
  out.at[n][...] = ml.mean(v, axis=(0, 1))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[3]), F32), grid=lambda x: (x.shape[0],))
def global_avg_pool_reshaped(x, out):
  n = ml.program_id(0)
  v = x.at[n][...]
  out.at[n][...] = ml.mean(v.reshape(64, 64), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],) + x.shape[1:3], F32), grid=lambda x: (x.shape[0],))
def channel_sums(x, out):
  n = ml.program_id(0)
  v = x.at[n][...]
  out.at[n][...] = v.sum(axis=2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],) + x.shape[1:3], F32), grid=lambda x: (x.shape[0],))
def channel_sums_reshaped(x, out):
  n = ml.program_id(0)
  v = x.at[n][...]
  out.at[n][...] = ml.sum(v.reshape(128, 64), axis=1).reshape(4, 32)


def test_a_3d_reduction_over_a_run_of_axes_is_a_register_reshape():
  """The hint said that a register tile cannot be reshaped into 2-D; it can (through SMEM where
  the layouts differ), and a global average pool's mean over (h, w) is that reshape's column mean.
  Probe 37e: the compiler now reduces so itself (the hint's reshape, written by the user, too)."""
  x = rand.normal(rand.key(0), (2, 8, 8, 64), F32)
  for kernel in (global_avg_pool, global_avg_pool_reshaped):
    np.testing.assert_allclose(kernel(x, interpret=True), jnp.mean(x, axis=(1, 2)), rtol=1e-5, atol=1e-6)
    builds(kernel, S((2, 8, 8, 64), F32))
  x = rand.normal(rand.key(1), (2, 4, 32, 64), F32)
  for kernel in (channel_sums, channel_sums_reshaped):
    np.testing.assert_allclose(kernel(x, interpret=True), jnp.sum(x, axis=3), rtol=1e-5, atol=1e-5)
    builds(kernel, S((2, 4, 32, 64), F32))


def test_a_3d_reduction_whose_2d_tile_would_not_reduce_computes_padded():
  """(7, 7, 32) as (49, 32): 49 rows of 32 columns do not reduce (MG204): no reshape is offered. (Since probe 45d
  the (7, 7, 32) tile itself, 1568 elements, is reported at its read, whose hint pads it to (7, 8, 32): it was
  'partial reductions work on 1-D and 2-D tensors' at the mean; tests/test_probe45d.py follows such hints. Since probe
  45g the compiler reads it padded itself.)"""
  # (since probe 45g the compiler reads it padded itself, the mean dividing by 49)
  x = rand.normal(rand.key(3), (2, 7, 7, 32), F32)
  np.testing.assert_allclose(global_avg_pool(x, interpret=True), jnp.mean(x, axis=(1, 2)), rtol=1e-5, atol=1e-6)
  # (4, 8) holds 32 elements: the (32,) vector of the 2-D reduction typed (4, 8) (probe 43a), stored whole a row of
  # 8 at a time (probe 44f; it was MG204 at the store)
  x = rand.normal(rand.key(2), (2, 4, 8, 64), F32)
  np.testing.assert_allclose(channel_sums(x, interpret=True), jnp.sum(x, axis=3), rtol=1e-5, atol=1e-5)
  builds(channel_sums, S((2, 4, 8, 64), F32))


# ---------------------------------------------------------------- a store at (n, h, w) index tensors
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0] * x.shape[1] * x.shape[2], 128),))
def relu_nhwc(x, out):
  i = ml.program_id(0)
  N, H, W, C = x.shape
  p = i * 128 + ml.arange(128)
  n = p // (H * W); h = p // W % H; w = p % W
  c = ml.arange(C)[None, :]
  ok = (p < N * H * W)[:, None]
  v = x.at[n[:, None], h[:, None], w[:, None], c].load(mask=ok, other=0.0)
  out.at[n[:, None], h[:, None], w[:, None], c].store(ml.maximum(v, 0.0), mask=ok)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * x.shape[1] * x.shape[2], x.shape[3]), x.dtype),
                grid=lambda x: (ml.cdiv(x.shape[0] * x.shape[1] * x.shape[2], 128),))
def relu_nhwc_flat(x, out):
  i = ml.program_id(0)
  N, H, W, C = x.shape
  p = i * 128 + ml.arange(128)
  n = p // (H * W); h = p // W % H; w = p % W
  c = ml.arange(C)[None, :]
  ok = (p < N * H * W)[:, None]
  v = x.at[n[:, None], h[:, None], w[:, None], c].load(mask=ok, other=0.0)
  out.at[ml.ds(i * 128, 128), :].store(ml.maximum(v, 0.0), mask=(p < 70)[:, None])


def test_a_store_at_index_tensors_of_one_flat_position_is_a_scatter():
  """An implicit GEMM's epilogue stores at (n, oh, ow) decomposed from p = i * 128 + ml.arange(128);
  it was an error whose hint gave the flat output's window. It is a scatter now (the masked-off rows'
  indices, past the array, are not stored), and the flat output's window still works."""
  x = rand.normal(rand.key(2), (2, 5, 7, 32), F32)
  np.testing.assert_array_equal(relu_nhwc(x, interpret=True), jnp.maximum(x, 0))
  builds(relu_nhwc_flat, S((2, 5, 7, 32), F32))
  np.testing.assert_array_equal(relu_nhwc_flat(x, interpret=True).reshape(x.shape), jnp.maximum(x, 0))


# ---------------------------------------------------------------- nearest upsampling by a 3-D broadcast
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype), grid=lambda x: (x.shape[0],))
def upsample_w(x, out):
  h = ml.program_id(0)
  W, C = x.shape[1], x.shape[2]
  v = x.at[h][...]
  out.at[h][...] = ml.broadcast_to(v[:, None, :], (W, 2, C)).reshape(2 * W, C)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype), grid=lambda x: (x.shape[0],))
def upsample_w_repeated(x, out):
  h = ml.program_id(0)
  W, C = x.shape[1], x.shape[2]
  t = x.at[h][...][:, None, :]
  out.at[h][...] = ml.concatenate([t] * 2, axis=1).reshape(2 * W, C)


def test_a_middle_axis_broadcast_is_a_repeat():
  """The hint offered only 2-D loops over the leading axis, whose (2, 32) tiles are too small for
  registers (MG204 again); then the concatenation of copies; since probe 38j the broadcast is those copies."""
  builds(upsample_w_repeated, S((4, 32, 32), F32))
  builds(upsample_w, S((4, 32, 32), F32))
  x = rand.normal(rand.key(3), (4, 32, 32), F32)
  np.testing.assert_array_equal(upsample_w_repeated(x, interpret=True), jnp.repeat(x, 2, axis=1))
  np.testing.assert_array_equal(upsample_w(x, interpret=True), jnp.repeat(x, 2, axis=1))


# ---------------------------------------------------------------- `or` of run-time scalars
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def skip_padding_rows(x, out):
  h = ml.program_id(0)
  acc = ml.zeros(x.shape[1:], F32)
  for dh in range(3):
    hh = h + dh - 1
    if hh < 0 or hh >= x.shape[0]:
      continue
    acc += x.at[hh][...]
  out.at[h][...] = acc


def test_or_of_runtime_scalars_skips_the_padding_rows():
  """A padded row skipped with `or` on the row index (a scalar) was said to be 'on register values', then
  MG001 on run-time scalars; a run-time `or` of booleans now short-circuits as Python's (probe 36d)."""
  x = jnp.arange(6 * 128, dtype=F32).reshape(6, 128)
  xp = np.pad(np.asarray(x), ((1, 1), (0, 0)))
  np.testing.assert_array_equal(skip_padding_rows(x, interpret=True), xp[:-2] + xp[1:-1] + xp[2:])
  builds(skip_padding_rows, S((6, 128), F32))
