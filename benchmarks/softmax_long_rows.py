"""Softmax of long rows (1024 x 32768) on the H200: each of examples/softmax.py's kernels for
rows that do not fit one CTA's registers, against XLA and the `a * 2` copy of the same input.

    python benchmarks/softmax_long_rows.py

GB/s by kernel time (bytes read + written, CUPTI median of 20), every result checked first.
"""
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import softmax as SM  # noqa: E402
import mgpu_dsl as mg  # noqa: E402


def main():
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; softmax of (1024, 32768), GB/s by kernel time")
  for dt in (jnp.float32, jnp.bfloat16):
    x = jax.random.normal(jax.random.key(0), (1024, 32768), jnp.float32).astype(dt)
    nbytes = 2 * x.size * x.dtype.itemsize
    ref = jax.nn.softmax(x.astype(jnp.float32), -1)
    cases = [("copy (a * 2)", lambda x: x * 2),
             ("XLA", lambda x: jax.nn.softmax(x.astype(jnp.float32), -1).astype(x.dtype)),
             ("two passes", lambda x: SM.softmax_long_rows(x, rows=1)),
             ("SMEM, 1 CTA a row, 4 chunks", lambda x: SM.softmax_smem(x, chunks=4, parts=1)),
             ("SMEM, 1 CTA a row, 8 chunks", lambda x: SM.softmax_smem(x, chunks=8, parts=1)),
             ("SMEM, 2 CTAs a row, 4 chunks", lambda x: SM.softmax_smem(x, chunks=4, parts=2)),
             # The last 1/4 or 1/8 of the row in registers: less SMEM a CTA, more CTAs an SM.
             ("SMEM + 1/4 in registers, 8 chunks", lambda x: SM.softmax_smem(x, chunks=8, regs=32)),
             ("SMEM + 1/8 in registers, 8 chunks", lambda x: SM.softmax_smem(x, chunks=8, regs=16)),
             ("SMEM + 1/4 in registers, 4 chunks", lambda x: SM.softmax_smem(x, chunks=4, regs=32)),
             ("SMEM online, 1 CTA, 8 chunks", lambda x: SM.softmax_smem(x, chunks=8, parts=1, online=True)),
             ("SMEM online, 1 CTA, 16 chunks", lambda x: SM.softmax_smem(x, chunks=16, parts=1, online=True)),
             ("SMEM online, 2 CTAs, 4 chunks", lambda x: SM.softmax_smem(x, chunks=4, parts=2, online=True)),
             ("SMEM online, 2 CTAs, 8 chunks", lambda x: SM.softmax_smem(x, chunks=8, parts=2, online=True)),
             ("one CTA a row", lambda x: SM.softmax_rows(x, rows=1)),
             ("softmax() default", SM.softmax)]
    for name, fn in cases:
      try:
        f = jax.jit(fn)
        if name != "copy (a * 2)":
          err = float(jnp.abs(f(x).astype(jnp.float32) - ref).max())
          assert err < 1e-2, err
        print(f"{dt.__name__:9s} {name:30s} {nbytes / mg.bench(f, x) / 1e9:6.0f} GB/s", flush=True)
      except Exception as e:  # noqa: BLE001  (a variant that cannot run is reported, not fatal)
        print(f"{dt.__name__:9s} {name:30s} failed: {type(e).__name__}: {str(e)[:120]}", flush=True)


if __name__ == "__main__":
  main()
