"""a * 2 over 1 GiB of float32: mgpu_dsl (several tile shapes) against XLA.

    python benchmarks/elementwise.py            # on the H200

Prints TB/s counting bytes read plus bytes written (2 GiB a call).
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import first_call_time, median_time, table  # noqa: E402


def make_double(rows, cols):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // rows, x.shape[1] // cols))
  def double(x, out):
    i, j = ml.program_id(0), ml.program_id(1)
    buf = ml.smem((rows, cols))
    ml.copy(x.at[ml.ds(i * rows, rows), ml.ds(j * cols, cols)], buf)
    buf[...] = buf[...] * 2
    ml.copy(buf, out.at[ml.ds(i * rows, rows), ml.ds(j * cols, cols)])
  return double


def main():
  n = (1 << 30) // 4
  shape = (n // 4096, 4096)
  x = jax.random.normal(jax.random.key(0), shape, jnp.float32)
  nbytes = 2 * x.size * 4
  rows = []
  xla = jax.jit(lambda x: x * 2)
  t = median_time(xla, x)
  rows.append(("XLA x * 2", "-", f"{nbytes / t / 1e12:.2f}", "1.00"))
  base = t
  for r, c in [(64, 128), (128, 128), (128, 256), (256, 128), (256, 64)]:
    k = make_double(r, c)
    f = jax.jit(k)
    out = f(x)
    np.testing.assert_array_equal(np.asarray(out[:256]), np.asarray(x[:256] * 2))
    t = median_time(f, x)
    rows.append((f"mgpu_dsl tile {r}x{c}", f"{r * c * 4 // 1024} KiB", f"{nbytes / t / 1e12:.2f}", f"{base / t:.2f}"))
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; a * 2 over 1 GiB float32")
  print(table(("kernel", "SMEM/CTA", "TB/s", "vs XLA"), rows))
  print(f"first call (trace+compile+run) of a new 128x128 kernel: "
        f"{first_call_time(lambda: jax.jit(make_double(128, 128)), x):.2f} s")


if __name__ == "__main__":
  main()
