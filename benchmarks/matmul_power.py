"""Is the H200's matmul limited by power? The same matmuls on random normal, small-integer and
all-zero inputs (zeros toggle no multiplier bits), with the SM clock and board power sampled by
nvidia-smi while each runs in a loop.

    python benchmarks/matmul_power.py

If TFLOP/s rises on zeros for every contender, the tensor cores are held back by the clock the
power limit allows, not by the kernels' schedules.
"""
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import matmul as ex  # noqa: E402
import mgpu_dsl as mg  # noqa: E402

M, K, N = 4096, 4096, 8192


def inputs(kind, dtype):
  ka, kb = jax.random.split(jax.random.key(0))
  if kind == "normal":
    a, b = jax.random.normal(ka, (M, K)), jax.random.normal(kb, (K, N))
  elif kind == "ints":          # -2..2: few mantissa bits toggle
    a = jax.random.randint(ka, (M, K), -2, 3).astype(jnp.float32)
    b = jax.random.randint(kb, (K, N), -2, 3).astype(jnp.float32)
  else:
    a, b = jnp.zeros((M, K)), jnp.zeros((K, N))
  return a.astype(dtype), b.astype(dtype)


def sampled(fn, args, seconds=1.5):
  """(median SM MHz, median W) while fn runs back to back for about `seconds`."""
  with tempfile.NamedTemporaryFile("r+") as log:
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=log, stderr=subprocess.DEVNULL)
    try:
      t0 = time.time()
      while time.time() - t0 < seconds:
        for _ in range(50):
          out = fn(*args)
        jax.block_until_ready(out)
    finally:
      smi.terminate()
      smi.wait()
    log.seek(0)
    rows = [r.split(",") for r in log.read().splitlines() if r.count(",") == 1]
  vals = np.array([[float(x) for x in r] for r in rows[len(rows) // 4:]]) if rows else np.zeros((1, 2))
  return np.median(vals[:, 0]), np.median(vals[:, 1])


def main():
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; {M}x{N}x{K} (m x n x k)")
  ours = jax.jit(lambda a, b: ex.matmul(a, b))
  cublas = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype))
  flops = 2 * M * N * K
  for dtype in (jnp.float16, jnp.bfloat16):
    for kind in ("normal", "ints", "zeros"):
      a, b = inputs(kind, dtype)
      for name, fn in (("mgpu_dsl", ours), ("cuBLAS", cublas)):
        err = float(jnp.abs(fn(a, b).astype(jnp.float32) - cublas(a, b).astype(jnp.float32)).max())
        tf = flops / mg.bench(fn, a, b, iterations=50) / 1e12
        mhz, watts = sampled(fn, (a, b))
        print(f"{jnp.dtype(dtype).name:9s} {kind:7s} {name:9s} {tf:6.0f} TFLOP/s  SM {mhz:5.0f} MHz"
              f"  {watts:4.0f} W  (max diff to cuBLAS {err:.2g})", flush=True)


if __name__ == "__main__":
  main()
