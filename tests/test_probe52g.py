"""Probe 52g (convolution, pooling and image kernels as Triton and Pallas users write them): a group norm's
per-group statistic broadcast back over a tile of fewer than 128 channels a row; plain strided reads of a ref beside
run-time indices (a stride-2 pool or downsample of NHWC pixels, Pallas's `pl.ds(start, size, stride)`); jnp.roll of
several axes at once (Swin's cyclic shift); chained vector-matrix products of a narrow bottleneck (an SE block's
excitation)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from jax import lax
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _input(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _f64(x):
  return np.asarray(x).astype(np.float64)


def _export(kernel, *args, **constexprs):
  specs = [S(a.shape, a.dtype) for a in args]
  return jax.export.export(jax.jit(lambda *a: kernel(*a, **constexprs)), platforms=["cuda"])(*specs).mlir_module()


def _tol(dtype):
  return 3e-2 if jnp.dtype(dtype).itemsize == 2 else 1e-4


# ---------------------------------------------------------------- per-group statistics broadcast back
@mg.mgpu_kernel(out_shape=lambda x, g, b, *, G: x, grid=lambda x, g, b, *, G: (x.shape[0],))
def group_norm_silu(x, gamma, beta, out, *, G: ml.constexpr):
  """GroupNorm then SiLU of an (HW, C) tile of NHWC pixels, as a diffusion U-Net's ResNet block writes it."""
  n = ml.program_id(0)
  v = x[n].astype(F32)
  hw, c = v.shape
  vg = v.reshape(hw, G, c // G)
  mean = vg.mean(axis=(0, 2), keepdims=True)
  var = jnp.mean(jnp.square(vg - mean), axis=(0, 2), keepdims=True)
  y = ((vg - mean) * lax.rsqrt(var + 1e-6)).reshape(hw, c)
  y = y * gamma[...] + beta[...]
  out[n] = (y * jax.nn.sigmoid(y)).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x, w, *, G: S((x.shape[0], x.shape[1], w.shape[1]), F32),
                grid=lambda x, w, *, G: (x.shape[0],))
def conv1x1_group_norm(x, w, out, *, G: ml.constexpr):
  """A 1x1 convolution (a tensor-core dot) with its group norm fused, the statistics as (G,) vectors."""
  n = ml.program_id(0)
  y = ml.dot(x[n], w[...])
  hw, k = y.shape
  yg = y.reshape(hw, G, k // G)
  mean = jnp.mean(yg, axis=(0, 2))
  msq = jnp.mean(yg * yg, axis=(0, 2))
  rstd = lax.rsqrt(msq - mean * mean + 1e-5)
  out[n] = ((yg - mean[None, :, None]) * rstd[None, :, None]).reshape(hw, k)


@mg.mgpu_kernel(out_shape=lambda x: x)
def batch_norm_ncw(x, out):
  """A batch norm's centring of an (N, C, W) tile: its (1, C, 1) mean stretched along both ends."""
  v = x[...]
  out[...] = v - v.mean(axis=(0, 2), keepdims=True)


def _group_norm(y, G):
  n, hw, c = y.shape
  yg = y.reshape(n, hw, G, c // G)
  return ((yg - yg.mean((1, 3), keepdims=True)) / np.sqrt(yg.var((1, 3), keepdims=True) + 1e-6)).reshape(n, hw, c)


GROUPS = [(64, 64, 32, BF16), (16, 96, 32, F32), (32, 192, 32, F16)]


@pytest.mark.parametrize("hw, c, G, dtype", GROUPS)
def test_group_norm_of_fewer_than_128_channels_a_row_computes(hw, c, G, dtype):
  """The (1, G, 1) statistic broadcast back to (hw, G, c // G) was MG204 ("broadcasting works into 1-D and 2-D
  tensors") where G * (c // G) is no multiple of 128 (64, 96, 192 channels): the broadcast stretched the trailing
  run first, into a (G, c // G) tile no row-wise layout holds. It now stretches the leading run first where that
  one does not fit: (hw, G, 1), then the (hw * G, c // G) broadcast."""
  x, g, b = _input((2, hw, c), dtype), _input((c,), F32, 1), _input((c,), F32, 2)
  got = _f64(group_norm_silu(x, g, b, G=G, interpret=True))
  y = _group_norm(_f64(x), G) * _f64(g) + _f64(b)
  np.testing.assert_allclose(got, y / (1 + np.exp(-y)), rtol=_tol(dtype), atol=_tol(dtype))
  assert "mosaic_gpu" in str(_export(group_norm_silu, x, g, b, G=G))


def test_fused_conv_group_norm_and_batch_norm_statistics_compute():
  """Two more broadcasts of the class: `mean[None, :, None]` of a (G,) vector over a 64-channel dot result, and a
  (1, 16, 1) mean of an (8, 16, 4) tile (both MG204 before)."""
  x, w = _input((2, 64, 32), F16), jnp.asarray(_f64(_input((32, 64), F16, 1)) * 0.2, F16)
  got = _f64(conv1x1_group_norm(x, w, G=16, interpret=True))
  y = _f64(x) @ _f64(w)
  yg = y.reshape(2, 64, 16, 4)
  want = ((yg - yg.mean((1, 3), keepdims=True)) / np.sqrt(yg.var((1, 3), keepdims=True) + 1e-5)).reshape(y.shape)
  np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
  assert "mosaic_gpu" in str(_export(conv1x1_group_norm, x, w, G=16))
  v = _input((8, 16, 4))
  np.testing.assert_allclose(_f64(batch_norm_ncw(v, interpret=True)), _f64(v) - _f64(v).mean((0, 2), keepdims=True),
                             rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in str(_export(batch_norm_ncw, v))


# ---------------------------------------------------------------- strided reads beside run-time indices
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3]), x.dtype),
                grid=lambda x: (x.shape[0], x.shape[1] // 2))
def avg_pool_2x2(x, out):
  """A 2x2 average pool of NHWC pixels from four strided reads of two rows."""
  n, i = ml.program_id(0), ml.program_id(1)
  s = (x[n, 2 * i, ::2].astype(F32) + x[n, 2 * i, 1::2].astype(F32)
       + x[n, 2 * i + 1, ::2, :].astype(F32) + x[n, 2 * i + 1, 1::2, :].astype(F32))
  out[n, i] = (s * 0.25).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2, w.shape[1]), F32),
                grid=lambda x, w: (x.shape[0], x.shape[1] // 2))
def downsample_1x1(x, w, out):
  """A ResNet shortcut: a 1x1 convolution of stride 2, every other pixel of every other row."""
  n, oh = ml.program_id(0), ml.program_id(1)
  out[n, oh] = ml.dot(x[n, 2 * oh, ::2, :], w[...])


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], x.shape[1] // 2, x.shape[2]), F32), grid=lambda x, w: (x.shape[0],))
def conv1d_stride2(x, w, out):
  """A depthwise conv1d of stride 2 and two taps, Pallas's strided ml.ds (pl.ds(start, size, stride))."""
  b = ml.program_id(0)
  half = x.shape[1] // 2
  out[b] = x[b, ml.ds(0, half, 2)] * w[0][None, :] + x.at[b, ml.ds(1, half, 2)][...] * w[1][None, :]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3]), x.dtype),
                grid=lambda x: (x.shape[0],))
def subsample(x, out):
  """Every other pixel along both spatial axes of one image: two steps beside a program id."""
  out[ml.program_id(0)] = x[ml.program_id(0), ::2, ::2, :]


def test_strided_reads_beside_runtime_indices_compute():
  """`x[n, 2 * i, ::2]` (n, i program ids), `x[b, ml.ds(0, 32, 2)]` and `x.at[b, ml.ds(1, 32, 2)][...]` were MG003
  "strided slices (step 2) are not supported": the covering window read whole and sliced in registers took only
  static indices. The other axes may now be run-time ints or windows of a step of 1, kept in the window."""
  x = _input((2, 8, 16, 64), BF16)
  want = _f64(x).reshape(2, 4, 2, 8, 2, 64).mean((2, 4))
  np.testing.assert_allclose(_f64(avg_pool_2x2(x, interpret=True)), want, rtol=1e-2, atol=1e-2)
  assert "mosaic_gpu" in str(_export(avg_pool_2x2, x))
  x, w = _input((1, 8, 128, 32), F16), jnp.asarray(_f64(_input((32, 64), F16, 1)) * 0.2, F16)
  np.testing.assert_allclose(_f64(downsample_1x1(x, w, interpret=True)), _f64(x)[:, ::2, ::2] @ _f64(w),
                             rtol=2e-2, atol=2e-2)
  assert "mosaic_gpu" in str(_export(downsample_1x1, x, w))
  x, w = _input((2, 64, 32)), _input((2, 32), F32, 1)
  np.testing.assert_allclose(_f64(conv1d_stride2(x, w, interpret=True)),
                             _f64(x)[:, 0::2] * _f64(w)[0] + _f64(x)[:, 1::2] * _f64(w)[1], rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in str(_export(conv1d_stride2, x, w))
  x = _input((2, 8, 16, 32))
  np.testing.assert_array_equal(np.asarray(subsample(x, interpret=True)), np.asarray(x)[:, ::2, ::2])
  assert "mosaic_gpu" in str(_export(subsample, x))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3]), x.dtype),
                grid=lambda x: (x.shape[0], x.shape[1] // 2))
def max_pool_2x2(x, out):
  """A 2x2 max pool from strided reads of two rows, at the odd widths of a ResNet's later stages or an RGB image."""
  n, i = ml.program_id(0), ml.program_id(1)
  a = jnp.maximum(x[n, 2 * i, ::2], x[n, 2 * i, 1::2])
  b = jnp.maximum(x[n, 2 * i + 1, ::2], x[n, 2 * i + 1, 1::2])
  out[n, i] = jnp.maximum(a, b)


@pytest.mark.parametrize("w, c", [(14, 96), (16, 3)])
def test_strided_reads_of_odd_results_compute_padded(w, c):
  """`x[n, 2 * i, ::2]` of a (14, 96) row gives (7, 96), 672 elements, which no register tensor holds: MG204 ("which
  registers cannot hold"), while the same steps of the row read first, `r = x[n, 2 * i]; r[::2]`, computed padded.
  A ref's strided read now takes the steps of its covering window as a register tensor's do."""
  x = _input((1, 4, w, c), F32, 3)
  want = np.asarray(x).reshape(1, 2, 2, w // 2, 2, c).max((2, 4))
  np.testing.assert_array_equal(np.asarray(max_pool_2x2(x, interpret=True)), want)
  assert "mosaic_gpu" in str(_export(max_pool_2x2, x))


# ---------------------------------------------------------------- jnp.roll of several axes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def cyclic_shift(x, out):
  """Swin's shifted windows: the (H, W, C) image rolled by -2 along both spatial axes."""
  n = ml.program_id(0)
  out[n] = jnp.roll(x[n], shift=(-2, -2), axis=(0, 1))


@mg.mgpu_kernel(out_shape=lambda x: x)
def diagonal_blur(x, out):
  """The mean of the four diagonal neighbours of a wrapped-around image, one shift for two axes and pairs."""
  v = x[...]
  out[...] = 0.25 * (jnp.roll(v, 1, axis=(0, 1)) + ml.roll(v, (-1, -1), (0, 1)) + jnp.roll(v, (1, -1), (0, 1))
                     + jnp.roll(v, [-1, 1], axis=[1, 0]))


@mg.mgpu_kernel(out_shape=lambda x: x)
def flat_roll(x, out):
  out[...] = jnp.roll(x[...], (2, 3))


@mg.mgpu_kernel(out_shape=lambda x: x)
def unpaired_roll(x, out):
  out[...] = jnp.roll(x[...], (1, 2, 3), (0, 1))


def test_roll_of_several_axes_computes():
  """jnp.roll with a tuple (or list) of shifts and axes was MG003 "axis must be a static int": each pair now rolls
  in turn, a single shift applies to every axis named, and a tuple of shifts without axes rolls the flattened
  tensor by their sum, as jnp's do."""
  x = _input((2, 8, 16, 32))
  np.testing.assert_array_equal(np.asarray(cyclic_shift(x, interpret=True)), np.roll(np.asarray(x), (-2, -2), (1, 2)))
  assert "mosaic_gpu" in str(_export(cyclic_shift, x))
  for v in (_input((16, 32), F32, 1), _input((7, 7), F32, 2)):      # (7, 7): an odd read, computed padded
    a = np.asarray(v)
    want = 0.25 * (np.roll(a, 1, (0, 1)) + np.roll(a, (-1, -1), (0, 1)) + np.roll(a, (1, -1), (0, 1))
                   + np.roll(a, (-1, 1), (1, 0)))
    np.testing.assert_allclose(np.asarray(diagonal_blur(v, interpret=True)), want, rtol=1e-6, atol=1e-6)
    assert "mosaic_gpu" in str(_export(diagonal_blur, v))
  v = _input((16, 32), F32, 3)
  np.testing.assert_array_equal(np.asarray(flat_roll(v, interpret=True)), np.asarray(jnp.roll(v, (2, 3))))


def test_roll_shifts_and_axes_that_do_not_pair_up():
  expect(unpaired_roll, [S((16, 32), F32)], mg.KernelTypeError, "jnp.roll(",
         "jnp.roll (as ml.roll): 3 shifts (1, 2, 3) and 2 axes (0, 1) do not pair up (jnp.roll broadcasts them"
         " against each other)",
         hint="give one shift per axis, ml.roll(v, (1, 2), axis=(0, 1)), or one shift for every axis named")


# ---------------------------------------------------------------- strided register slices at a loop counter
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2), x.dtype))
def pool_taps_in_range(x, out):
  """A 2x2 max pool of a register tile, its four strided taps in run-time `ml.range` loops."""
  v = x[...]
  acc = v[0::2, 0::2]
  for a in ml.range(2):
    for b in ml.range(2):
      acc = jnp.maximum(acc, v[a::2, b::2])
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2), x.dtype))
def pool_taps_in_python_range(x, out):
  """The same in Python `range` loops (Pallas's spelling): unrolled as Python runs them (probe 52b)."""
  v = x[...]
  acc = v[0::2, 0::2]
  for a in range(2):
    for b in range(2):
      acc = jnp.maximum(acc, v[a::2, b::2])
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2), x.dtype))
def pool_taps_unrolled(x, out):
  """The same, as the hint writes it."""
  v = x[...]
  acc = v[0::2, 0::2]
  for a in ml.static_range(2):
    for b in ml.static_range(2):
      acc = jnp.maximum(acc, v[a::2, b::2])
  out[...] = acc


def test_strided_slice_of_a_register_tensor_at_a_loop_counter_says_to_unroll():
  """It was "strided slices (step 2) of a register tensor are not supported: its elements live in other threads",
  hinting an axis made outside the kernel, though static steps of a register tile are taken: the start is the
  counter of a run-time `ml.range` loop. It is now the run-time bounds' error, whose hint unrolls the loop."""
  e = expect(pool_taps_in_range, [S((16, 64), F32)], mg.KernelTypeError, "v[a::2, b::2]",
             "a window of v needs static bounds; this one starts or ends at a run-time value")
  assert "ml.smem" in e.hint, e.hint           # (a Python range loop is unrolled now: probe 52b)
  x = _input((16, 64))
  for k in (pool_taps_unrolled, pool_taps_in_python_range):
    np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), np.asarray(x).reshape(8, 2, 32, 2).max((1, 3)))
  assert "mosaic_gpu" in str(_export(pool_taps_unrolled, x))


# ---------------------------------------------------------------- offsets written `ow - 1`
@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0], x.shape[1]))
def depthwise_row(x, w, out):
  """A depthwise 1x3 convolution along the rows of NHWC pixels, Triton's pointer blocks at `ow - 1 + kw`."""
  n, oh = ml.program_id(0), ml.program_id(1)
  W, C = x.shape[2], x.shape[3]
  ow = ml.arange(W)
  acc = ml.zeros((W, C), F32)
  for kw in ml.static_range(3):
    iw = ow - 1 + kw
    m = (iw >= 0) & (iw < W)
    acc += ml.load(x.at[n, oh, iw[:, None], ml.arange(C)[None, :]], mask=m[:, None], other=0.0) * w[kw][None, :]
  out[n, oh] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0], x.shape[1]))
def halo_unmasked(x, out):
  """The same taps read without their mask: the left one reads column -1."""
  n, oh = ml.program_id(0), ml.program_id(1)
  W, C = x.shape[2], x.shape[3]
  ow = ml.arange(W)
  acc = ml.zeros((W, C), F32)
  for kw in ml.static_range(3):
    iw = ow - 1 + kw
    acc += x.at[n, oh, iw[:, None], ml.arange(C)[None, :]].load()
  out[n, oh] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def shifted_left(x, out):
  """A 1-D stencil's left neighbour, `offs - 1`, masked at the start."""
  offs = ml.arange(x.shape[0])
  out[...] = ml.load(x.at[offs - 1], mask=offs >= 1, other=0.0)


def test_offsets_with_a_subtracted_start_are_a_window():
  """`ow - 1` of an `ml.arange` was not read as a run (only `ow + k` was), so the load was a gather, and a gather's
  index -1 counts from the end as jnp's does: unmasked, the left tap silently read the row's last pixel. Such offsets
  are now the run from -1, as `ow + (kw - 1)` was: masked, the window's masked load (no gather); unmasked, MG203."""
  x, w = _input((1, 4, 16, 32)), _input((3, 32), F32, 1)
  want = lax.conv_general_dilated(x, w[None, :, None, :], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                  feature_group_count=32, precision=lax.Precision.HIGHEST)
  np.testing.assert_allclose(_f64(depthwise_row(x, w, interpret=True)), _f64(want), rtol=1e-5, atol=1e-5)
  assert "gather" not in depthwise_row.typed_ir(S(x.shape, F32), S(w.shape, F32))
  assert "mosaic_gpu" in str(_export(depthwise_row, x, w))
  v = _input((256,), F32, 2)
  np.testing.assert_array_equal(np.asarray(shifted_left(v, interpret=True)), np.concatenate([[0.0], np.asarray(v)[:-1]]))
  assert "gather" not in shifted_left.typed_ir(S(v.shape, F32))
  expect(halo_unmasked, [S((1, 4, 16, 32), F32)], mg.IndexOutOfBoundsError, "x.at[n, oh, iw[:, None]",
         "the offsets iw[:, None] run over -1..14 along dimension 2 of x, outside its size 16: an unmasked register"
         " read must stay inside the array",
         hint="mask the offsets to the elements inside: x.at[n, oh, iw[:, None], ml.arange(C)[None, :]].load(mask=iw[:,"
              " None] >= 0, other=0)")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def blur_1d(x, out):
  """A 3-tap blur of a long row, Triton-style: neighbours at `offs - 1` and `offs + 1` of a program's run."""
  pid = ml.program_id(0)
  n = x.shape[0]
  offs = pid * 128 + ml.arange(128)
  c = ml.load(x.at[offs], mask=offs < n, other=0.0)
  left = ml.load(x.at[offs - 1], mask=(offs >= 1) & (offs - 1 < n), other=0.0)
  right = ml.load(x.at[offs + 1], mask=offs + 1 < n, other=0.0)
  ml.store(out.at[offs], 0.25 * left + 0.5 * c + 0.25 * right, mask=offs < n)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def left_unmasked(x, out):
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(128)
  out.at[offs].store(x.at[offs - 1].load())


def test_runs_of_a_program_moved_by_a_constant_are_windows():
  """`offs - 1` and `offs + 1` of `offs = pid * 128 + ml.arange(128)` were gathers (only a static start could move):
  masked, correct but a gather; unmasked, program 0's index -1 counted from the end and read the row's last element
  with no error. They are now the windows from `pid * 128 - 1` and `pid * 128 + 1`: unmasked, MG203."""
  x = _input((1000,), F32, 4)
  p = np.pad(_f64(x), 1)
  np.testing.assert_allclose(_f64(blur_1d(x, interpret=True)), 0.25 * p[:-2] + 0.5 * _f64(x) + 0.25 * p[2:],
                             rtol=1e-6, atol=1e-6)
  assert "gather" not in blur_1d.typed_ir(S(x.shape, F32))
  assert "mosaic_gpu" in str(_export(blur_1d, x))
  expect(left_unmasked, [S((256,), F32)], mg.IndexOutOfBoundsError, "x.at[offs - 1]",
         "this register read touches x[-1:127] in program (0, 0, 0), outside x's shape (256,)",
         hint="mask the offsets to the elements inside: x.at[offs - 1].load(mask=offs - 1 >= 0, other=0)")


# ---------------------------------------------------------------- chained vector-matrix products
@mg.mgpu_kernel(out_shape=lambda x, w1, b1, w2, b2: x, grid=lambda x, *a: (x.shape[0],))
def squeeze_excite(x, w1, b1, w2, b2, out):
  """An SE block after a convolution: the image's channel means through a bottleneck MLP of r < 32 units, then a
  sigmoid gate per channel."""
  n = ml.program_id(0)
  v = x[n].astype(F32)
  s = v.mean(axis=(0, 1))
  h = jax.nn.relu(s @ w1[...] + b1[...])
  g = jax.nn.sigmoid(h @ w2[...] + b2[...])
  out[n] = (v * g).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda s, w1, w2: S((w2.shape[1],), F32))
def gemv_chain(s, w1, w2, out):
  """The same two products written as Triton's multiply and sum."""
  h = ml.maximum(ml.sum(s[...][:, None] * w1[...], axis=0), 0.0)
  out[...] = ml.sum(h[:, None] * w2[...], axis=0)


def _se(x, w1, b1, w2, b2):
  v = _f64(x)
  g = 1 / (1 + np.exp(-(np.maximum(v.mean((1, 2)) @ _f64(w1) + _f64(b1), 0) @ _f64(w2) + _f64(b2))))
  return v * g[:, None, None, :]


@pytest.mark.parametrize("h, c, r", [(8, 64, 4), (14, 96, 24)])
def test_chained_vector_matrix_products_compute(h, c, r):
  """`h = s @ w1` of a (c, r) `w1`, r not a multiple of 32, then `h @ w2`: `h` is a column statistic of the first
  product's (c, r) tile and a row vector of the second's (r, c) one, which no one row-wise layout holds (MG204 "this
  tile of shape (64, 4) is reduced or broadcast along its rows or columns"), though each alone fits one. The layout
  pass now gives the vector's uses a copy through SMEM (as it does two reductions' vectors that meet)."""
  args = (_input((2, h, h, c), BF16), _input((c, r), F32, 1) * 0.3, _input((r,), F32, 2) * 0.1,
          _input((r, c), F32, 3) * 0.3, _input((c,), F32, 4) * 0.1)
  np.testing.assert_allclose(_f64(squeeze_excite(*args, interpret=True)), _se(*args), rtol=2e-2, atol=2e-2)
  assert "mosaic_gpu" in str(_export(squeeze_excite, *args))


def test_gemv_chain_by_hand_computes():
  s, w1, w2 = _input((128,)), _input((128, 8), F32, 1), _input((8, 128), F32, 2)
  want = np.maximum(_f64(s) @ _f64(w1), 0) @ _f64(w2)
  np.testing.assert_allclose(_f64(gemv_chain(s, w1, w2, interpret=True)), want, rtol=1e-4, atol=1e-4)
  assert "mosaic_gpu" in str(_export(gemv_chain, s, w1, w2))


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_on_the_gpu_as_in_numpy():
  x, g, b = _input((2, 64, 64), BF16), _input((64,), F32, 1), _input((64,), F32, 2)
  y = _group_norm(_f64(x), 32) * _f64(g) + _f64(b)
  np.testing.assert_allclose(_f64(jax.jit(lambda *a: group_norm_silu(*a, G=32))(x, g, b)), y / (1 + np.exp(-y)),
                             rtol=3e-2, atol=3e-2)
  v = _input((8, 16, 4))
  np.testing.assert_allclose(_f64(jax.jit(batch_norm_ncw)(v)), _f64(v) - _f64(v).mean((0, 2), keepdims=True),
                             rtol=1e-5, atol=1e-5)
  x = _input((2, 8, 16, 64), BF16)
  np.testing.assert_allclose(_f64(jax.jit(avg_pool_2x2)(x)), _f64(x).reshape(2, 4, 2, 8, 2, 64).mean((2, 4)),
                             rtol=1e-2, atol=1e-2)
  x, w = _input((2, 64, 32)), _input((2, 32), F32, 1)
  np.testing.assert_allclose(_f64(jax.jit(conv1d_stride2)(x, w)),
                             _f64(x)[:, 0::2] * _f64(w)[0] + _f64(x)[:, 1::2] * _f64(w)[1], rtol=1e-5, atol=1e-5)
  x = _input((2, 8, 16, 32))
  np.testing.assert_array_equal(np.asarray(jax.jit(subsample)(x)), np.asarray(x)[:, ::2, ::2])
  for w, c in ((14, 96), (16, 3)):
    v = _input((1, 4, w, c), F32, 3)
    np.testing.assert_array_equal(np.asarray(jax.jit(max_pool_2x2)(v)),
                                  np.asarray(v).reshape(1, 2, 2, w // 2, 2, c).max((2, 4)))
  np.testing.assert_array_equal(np.asarray(jax.jit(cyclic_shift)(x)), np.roll(np.asarray(x), (-2, -2), (1, 2)))
  v = _input((7, 7), F32, 2)
  a = np.asarray(v)
  want = 0.25 * (np.roll(a, 1, (0, 1)) + np.roll(a, (-1, -1), (0, 1)) + np.roll(a, (1, -1), (0, 1))
                 + np.roll(a, (-1, 1), (1, 0)))
  np.testing.assert_allclose(np.asarray(jax.jit(diagonal_blur)(v)), want, rtol=1e-6, atol=1e-6)
  x, w = _input((1, 4, 16, 32)), _input((3, 32), F32, 1)
  want = lax.conv_general_dilated(x, w[None, :, None, :], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                  feature_group_count=32, precision=lax.Precision.HIGHEST)
  np.testing.assert_allclose(_f64(jax.jit(depthwise_row)(x, w)), _f64(want), rtol=1e-5, atol=1e-5)
  v = _input((256,), F32, 2)
  np.testing.assert_array_equal(np.asarray(jax.jit(shifted_left)(v)), np.concatenate([[0.0], np.asarray(v)[:-1]]))
  x = _input((1000,), F32, 4)
  p = np.pad(_f64(x), 1)
  np.testing.assert_allclose(_f64(jax.jit(blur_1d)(x)), 0.25 * p[:-2] + 0.5 * _f64(x) + 0.25 * p[2:], rtol=1e-6, atol=1e-6)
  args = (_input((2, 8, 8, 64), BF16), _input((64, 4), F32, 1) * 0.3, _input((4,), F32, 2) * 0.1,
          _input((4, 64), F32, 3) * 0.3, _input((64,), F32, 4) * 0.1)
  np.testing.assert_allclose(_f64(jax.jit(squeeze_excite)(*args)), _se(*args), rtol=2e-2, atol=2e-2)
  s, w1, w2 = _input((128,)), _input((128, 8), F32, 1), _input((8, 128), F32, 2)
  np.testing.assert_allclose(_f64(jax.jit(gemv_chain)(s, w1, w2)), np.maximum(_f64(s) @ _f64(w1), 0) @ _f64(w2),
                             rtol=1e-4, atol=1e-4)
