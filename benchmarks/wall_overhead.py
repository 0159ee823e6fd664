"""Where wall time goes beyond kernel time, per call (H200).

    python benchmarks/wall_overhead.py

For a few calls: kernel time (CUPTI, all kernels of a call) beside wall time (timed loops of
jitted calls), and their difference, to tell a host-side cost of our custom calls from the
GPU's. A small mgpu_dsl kernel and XLA's equivalent set the floor.
"""
import functools
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import kernel_ms, median_time, table  # noqa: E402

import mgpu_dsl as mg  # noqa: E402
from mgpu_dsl import language as ml  # noqa: E402


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


def main():
  import paged_attention as ex
  print("jax", jax.__version__, jax.devices()[0].device_kind)
  rows = []

  def row(name, fn, *args):
    jax.block_until_ready(fn(*args))
    k = kernel_ms(fn, *args) * 1e3
    w = median_time(fn, *args) * 1e6
    rows.append((name, f"{k:.1f}", f"{w:.1f}", f"{w - k:.1f}"))
    print(rows[-1], flush=True)

  small = jnp.ones((128 * 64, 128), jnp.float32)
  row("mgpu_dsl double, 4 MB", jax.jit(double), small)
  row("XLA x * 2, 4 MB", jax.jit(lambda x: x * 2), small)
  args = ex.make_inputs(jax.random.key(1), 32, 32, 8, 128, 16, 256)
  best = dict(splits=4, stages=3, tensor_cores=True, q_regs=True)
  row("paged_attention (parts + combine)", functools.partial(ex.paged_attention, **best), *args)
  row("paged_attention, jit of a lambda", jax.jit(lambda *a: ex.paged_attention(*a, **best)), *args)
  parts = jax.jit(lambda *a: ex.paged_attention_parts_mma(*a, splits=4, group=4, stages=3, q_regs=True))
  row("paged_attention_parts_mma alone", parts, *args)
  o, m, l = parts(*args)
  row("combine_splits alone", jax.jit(lambda o, m, l: ex.combine_splits(o, m, l, dtype=jnp.float16)), o, m, l)
  print(table(["call", "kernel us", "wall us", "wall - kernel us"], rows))


if __name__ == "__main__":
  main()
