"""Cumulative sums on the H200: ml.cumsum in a kernel against XLA's jnp.cumsum and the `x * 2` copy.

    python benchmarks/scan.py              # along the rows: x (16384, 1024), axis=1
    python benchmarks/scan.py --axis 0     # down the columns: x (2048, 16384), axis=0

Along the rows each program scans `rows` rows held in registers. Down the columns each program
walks a strip of `cols` columns in (rows, cols) tiles, scanning each along axis 0 (design note 86's
whole-vector steps) and carrying the strip's last row into the next tile. float32 and bfloat16
(accumulated in float32). GB/s counts bytes read plus written. Every result is checked against jnp.cumsum first (float32
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

SHAPE = {1: (16384, 1024), 0: (2048, 16384)}


@mg.mgpu_kernel(out_shape=lambda x, *, rows: x, grid=lambda x, *, rows: (x.shape[0] // rows,))
def row_cumsum(x, out, *, rows: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * rows, rows), :][...] = ml.cumsum(x.at[ml.ds(i * rows, rows), :][...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x, *, rows, cols: x, grid=lambda x, *, rows, cols: (x.shape[1] // cols,))
def col_cumsum(x, out, *, rows: ml.constexpr, cols: ml.constexpr):
  j = ml.program_id(0)
  carry = ml.zeros((cols,), jnp.float32)
  for r in range(x.shape[0] // rows):
    win = (ml.ds(r * rows, rows), ml.ds(j * cols, cols))
    c = ml.cumsum(x.at[win][...].astype(jnp.float32), axis=0) + carry[None, :]
    out.at[win][...] = c.astype(out.dtype)
    carry = c[rows - 1, :]


CONFIGS = {1: [dict(rows=r) for r in (1, 2, 4, 8, 16)],
           0: [dict(rows=r, cols=c) for r, c in ((32, 128), (64, 128), (128, 128), (64, 64), (128, 64))]}


def main():
  axis = int(sys.argv[sys.argv.index("--axis") + 1]) if "--axis" in sys.argv else 1
  shape, kernel = SHAPE[axis], (row_cumsum if axis == 1 else col_cumsum)
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; cumsum along axis {axis} of {shape}")
  out = []
  for dtype in (jnp.float32, jnp.bfloat16):
    x = jax.random.normal(jax.random.key(0), shape, jnp.float32).astype(dtype)
    want = np.cumsum(np.asarray(x, np.float32), axis)
    nbytes = 2 * x.size * x.dtype.itemsize
    copy = timings(jax.jit(lambda x: x * 2), x)
    xla = jax.jit(lambda x: jnp.cumsum(x, axis=axis))
    xla_t = timings(xla, x)
    best = None
    for cfg in CONFIGS[axis]:
      f = jax.jit(lambda x, cfg=cfg: kernel(x, **cfg))
      rows = ",".join(f"{k} {v}" for k, v in cfg.items())
      try:
        err = float(np.abs(np.asarray(f(x), np.float32) - want).max())
        if not err < (1e-3 * (1 + 20 * (axis == 0)) if dtype == jnp.float32 else 0.5 * (1 + 3 * (axis == 0))):
          print(f"  {rows}: WRONG RESULT (max error {err})", flush=True)
          continue
        tm = timings(f, x)
      except Exception as e:  # noqa: BLE001  (a configuration that cannot run is reported, not fatal)
        print(f"  {rows}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", flush=True)
        continue
      print(f"  {dtype.__name__} {rows}: {nbytes / tm.kernel_s / 1e9:.0f} GB/s (kernel)", flush=True)
      if best is None or tm.kernel_s < best[1].kernel_s:
        best = (rows, tm)
    gb = lambda tm: f"{nbytes / tm.kernel_s / 1e9:.0f} / {nbytes / tm.wall_s / 1e9:.0f}"
    out.append([dtype.__name__, gb(copy), gb(xla_t), gb(best[1]), best[0],
                f"{xla_t.kernel_s / best[1].kernel_s:.2f}", f"{copy.kernel_s / best[1].kernel_s:.2f}"])
  print("\nGB/s by kernel time / by wall time:")
  print(table(["dtype", "copy (x * 2)", "XLA cumsum", "mgpu_dsl", "config", "vs XLA", "of copy"], out))


if __name__ == "__main__":
  main()
