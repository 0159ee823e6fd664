"""Probe 26 (seventeenth session): fixes found by the session's probes of the language."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import hw
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- SMEM at the limit
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), F32))
def two_buffers(x, out, *, first: ml.constexpr, second: ml.constexpr):
  a = ml.smem((first // 4,), F32)
  b = ml.smem((second // 4,), F32)
  a.at[0:128][...] = x[...]
  b.at[0:128][...] = x[...]
  out[...] = a.at[0:128][...] + b.at[0:128][...]


def test_two_buffers_that_fill_the_smem_exactly_in_their_own_order_fit():
  """Placed largest first, the 1024-aligned 100 KiB buffer went after the other one's unaligned end
  and the plan took 16 bytes past the limit (MG402); in the kernel's order they fit exactly."""
  x = jnp.arange(128, dtype=F32)
  second = hw.SMEM_LIMIT - 102400
  np.testing.assert_array_equal(np.asarray(two_buffers(x, first=102400, second=second, interpret=True)),
                                2 * np.asarray(x))
  assert "mosaic_gpu" in _export(lambda x: two_buffers(x, first=102400, second=second), S((128,), F32))
  # 16 bytes more for b (127 KiB): no order fits; 4 bytes less for a: sizes not whole KiB in bytes
  expect(two_buffers, [S((128,), F32)], mg.SmemCapacityError, "ml.smem((second",
         f"the kernel's SMEM needs {hw.SMEM_LIMIT + 16} bytes (a 100 KiB, b 127 KiB, plus barriers and"
         f" alignment), more than the {hw.SMEM_LIMIT} bytes (227 KiB less 16 bytes) a kernel's buffers can use",
         first=102400, second=second + 16)
  expect(two_buffers, [S((128,), F32)], mg.SmemCapacityError, "ml.smem((second",
         f"the kernel's SMEM needs {hw.SMEM_LIMIT + 12} bytes (a 102396 bytes, b 127 KiB, plus barriers"
         f" and alignment), more than the {hw.SMEM_LIMIT} bytes (227 KiB less 16 bytes) a kernel's buffers can use",
         first=102396, second=second + 16)
