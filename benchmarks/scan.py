"""Row-wise cumulative sums on the H200: ml.cumsum in a kernel against XLA's jnp.cumsum(x, axis=1)
and the `x * 2` copy.

    python benchmarks/scan.py

x (16384, 1024), float32 and bfloat16; each program scans `rows` rows held in registers. GB/s
counts bytes read plus written. Every result is checked against jnp.cumsum first (float32
accumulation). Kernel time: CUPTI (mg.bench, median of 20 calls); wall time: median of timed
loops of jitted calls. A timing is never an assertion.
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import table, timings  # noqa: E402

import mgpu_dsl as mg  # noqa: E402
from mgpu_dsl import language as ml  # noqa: E402

SHAPE = (16384, 1024)


@mg.mgpu_kernel(out_shape=lambda x, *, rows: x, grid=lambda x, *, rows: (x.shape[0] // rows,))
def row_cumsum(x, out, *, rows: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * rows, rows), :][...] = ml.cumsum(x.at[ml.ds(i * rows, rows), :][...], axis=1)


def main():
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; cumsum along the rows of {SHAPE}")
  out = []
  for dtype in (jnp.float32, jnp.bfloat16):
    x = jax.random.normal(jax.random.key(0), SHAPE, jnp.float32).astype(dtype)
    want = np.cumsum(np.asarray(x, np.float32), 1)
    nbytes = 2 * x.size * x.dtype.itemsize
    copy = timings(jax.jit(lambda x: x * 2), x)
    xla = jax.jit(lambda x: jnp.cumsum(x, axis=1))
    xla_t = timings(xla, x)
    best = None
    for rows in (1, 2, 4, 8, 16):
      f = jax.jit(lambda x, rows=rows: row_cumsum(x, rows=rows))
      try:
        err = float(np.abs(np.asarray(f(x), np.float32) - want).max())
        if not err < (1e-3 if dtype == jnp.float32 else 0.5):
          print(f"  rows {rows}: WRONG RESULT (max error {err})", flush=True)
          continue
        tm = timings(f, x)
      except Exception as e:  # noqa: BLE001  (a configuration that cannot run is reported, not fatal)
        print(f"  rows {rows}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", flush=True)
        continue
      print(f"  {dtype.__name__} rows {rows}: {nbytes / tm.kernel_s / 1e9:.0f} GB/s (kernel)", flush=True)
      if best is None or tm.kernel_s < best[1].kernel_s:
        best = (rows, tm)
    gb = lambda tm: f"{nbytes / tm.kernel_s / 1e9:.0f} / {nbytes / tm.wall_s / 1e9:.0f}"
    out.append([dtype.__name__, gb(copy), gb(xla_t), gb(best[1]), best[0],
                f"{xla_t.kernel_s / best[1].kernel_s:.2f}", f"{copy.kernel_s / best[1].kernel_s:.2f}"])
  print("\nGB/s by kernel time / by wall time:")
  print(table(["dtype", "copy (x * 2)", "XLA cumsum", "mgpu_dsl", "rows", "vs XLA", "of copy"], out))


if __name__ == "__main__":
  main()
