"""Matrix transpose on the H200: examples/transpose.py against XLA's `x.T` and the `x * 2` copy.

    python benchmarks/transpose.py

(8192, 8192) in float32 and bfloat16. mgpu_dsl's two kernels (register tiles, and TMA tiles read
transposed from SMEM) over a sweep of tile shapes; the best by kernel time is reported, and every
contender's result is checked against `x.T` first. GB/s counts bytes read plus bytes written.
Kernel time: CUPTI (mg.bench, median of 20 calls); wall time: median of timed loops of jitted
calls. A timing is never an assertion.
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import timings, table  # noqa: E402
import transpose as ex  # noqa: E402

SHAPE = (8192, 8192)
TILES = [(64, 64), (32, 128), (128, 32), (128, 64), (64, 128), (32, 64)]


def main():
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; transpose of {SHAPE}")
  rows = []
  for dtype in (jnp.float32, jnp.bfloat16):
    x = jax.random.normal(jax.random.key(0), SHAPE, jnp.float32).astype(dtype)
    nbytes = 2 * x.size * x.dtype.itemsize
    want = np.asarray(x).T
    copy = timings(jax.jit(lambda x: x * 2), x)
    xla = jax.jit(lambda x: x.T)
    assert np.array_equal(np.asarray(xla(x)), want)
    xla_t = timings(xla, x)
    best = None
    for kernel in (ex.transpose, ex.transpose_tma):
      for bm, bn in TILES:
        name = f"{kernel.fn.__name__} {bm}x{bn}"
        try:
          f = jax.jit(lambda x, kernel=kernel, bm=bm, bn=bn: kernel(x, bm=bm, bn=bn))
          if not np.array_equal(np.asarray(f(x)), want):
            print(f"  {name}: WRONG RESULT", flush=True)
            continue
          t = timings(f, x)
        except Exception as e:  # noqa: BLE001  (a tile a kernel cannot take is reported, not fatal)
          print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", flush=True)
          continue
        print(f"  {dtype.__name__} {name}: {nbytes / t.kernel_s / 1e9:.0f} GB/s (kernel),"
              f" {nbytes / t.wall_s / 1e9:.0f} (wall)", flush=True)
        if best is None or t.kernel_s < best[1].kernel_s:
          best = (name, t)
    gb = lambda t: f"{nbytes / t.kernel_s / 1e9:.0f} / {nbytes / t.wall_s / 1e9:.0f}"
    rows.append([dtype.__name__, gb(copy), gb(xla_t), gb(best[1]), best[0],
                 f"{xla_t.kernel_s / best[1].kernel_s:.2f}", f"{copy.kernel_s / best[1].kernel_s:.2f}"])
  print("\nGB/s by kernel time / by wall time:")
  print(table(["dtype", "copy (x * 2)", "XLA x.T", "mgpu_dsl", "config", "vs XLA", "of copy"], rows))


if __name__ == "__main__":
  main()
