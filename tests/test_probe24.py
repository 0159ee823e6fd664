"""Probe 24 (helpers writing kernels from the docs: quantization, mixture-of-experts and
data-dependent kernels, scans and sorts, odd shapes and borders, hand-written pipelines, training
steps): valid kernels the compiler failed or rejected, messages naming the wrong thing or hinting
at a second error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- narrow windows of wider rows
@mg.mgpu_kernel(out_shape=lambda x, *, c0, c: S((x.shape[0], c), x.dtype))
def some_columns(x, out, *, c0: ml.constexpr, c: ml.constexpr):
  out[...] = x.at[:, c0:c0 + c][...] * 2


@mg.mgpu_kernel(out_shape=lambda x, *, c0, c: x, input_output_aliases={0: 0})
def scale_columns(x, out, *, c0: ml.constexpr, c: ml.constexpr):
  out.at[:, c0:c0 + c][...] = x.at[:, c0:c0 + c][...] * 2


WINDOWS = [((128, 3), 0, 2), ((256, 3), 0, 1), ((256, 2), 1, 1), ((256, 4), 0, 2), ((512, 12), 1, 4),
           ((256, 5), 0, 4), ((512, 9), 1, 8)]


@pytest.mark.parametrize("shape,c0,c", WINDOWS)
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_narrow_column_windows_move_in_vectors_their_rows_allow(shape, c0, c, dtype):
  # x.at[:, c0:c0 + c] of wider rows: Mosaic GPU's vectors must divide the window's row width,
  # the rows' step and its start; the compiler used the widest vector the tile's size allows
  # (an InternalError at the export, where interpret mode gave the right numbers)
  x = jnp.arange(np.prod(shape), dtype=F32).reshape(shape).astype(dtype)
  np.testing.assert_array_equal(some_columns(x, c0=c0, c=c, interpret=True), x[:, c0:c0 + c] * 2)
  _export(lambda a: some_columns(a, c0=c0, c=c), S(shape, dtype))
  want = x.at[:, c0:c0 + c].multiply(2)
  np.testing.assert_array_equal(scale_columns(x, c0=c0, c=c, interpret=True), want)
  _export(lambda a: scale_columns(a, c0=c0, c=c), S(shape, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,c0,c", WINDOWS)
def test_gpu_narrow_column_windows(shape, c0, c):
  x = jnp.arange(np.prod(shape), dtype=F32).reshape(shape)
  np.testing.assert_array_equal(some_columns(x, c0=c0, c=c), x[:, c0:c0 + c] * 2)
  np.testing.assert_array_equal(scale_columns(x, c0=c0, c=c), x.at[:, c0:c0 + c].multiply(2))


@mg.mgpu_kernel(out_shape=lambda x, s: S((1024,), x.dtype))
def from_offset(x, s: ml.scalar, out):
  out[...] = x.at[ml.ds(s, 1024)][...] + x.at[ml.ds(1, 1024)][...]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gpu_register_windows_at_unaligned_starts(dtype):
  x = jnp.arange(2048, dtype=F32).astype(dtype)
  for s in (0, 1, 3):
    np.testing.assert_array_equal(from_offset(x, s), x[s:s + 1024] + x[1:1025])
