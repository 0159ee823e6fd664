"""Matmul epilogues with more SMEM buffers (issue #10): does the epilogue's wait for its stores cost?

    python benchmarks/epilogue_bufs.py

A persistent matmul stores each (bm, bn) tile through `epi_bufs` SMEM buffers of `epi` columns,
used in turn: writing chunk e waits until the TMA store of chunk e - epi_bufs has read its buffer.
When every CTA enters its epilogue at once, those stores share HBM's write bandwidth and the wait
is exposed (an f32 tile of 128 x 256 is 128 KiB a CTA). More buffers (fewer pipeline stages, to
free the SMEM) let the compute warpgroups issue the whole tile and go on to the next tile's dots
while the stores drain. f16 4096x8192x4096 (examples/matmul.py) and float8_e4m3fn 8192^3 with
float32 and bfloat16 results (examples/matmul_fp8.py), TFLOP/s by kernel time (CUPTI) beside
cuBLAS / XLA in the same run; each result checked first.

Measured on the H200 (docs/benchmarks.md, fourteenth session): within noise or slower at every
configuration (f16 773-779 against the default's 778; FP8 f32 results 1480-1487 against 1500).
"""
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

import mgpu_dsl as mg

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from common import table  # noqa: E402
import matmul as mm  # noqa: E402

_spec = importlib.util.spec_from_file_location("matmul_fp8_example", os.path.join(HERE, "..", "examples", "matmul_fp8.py"))
f8 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(f8)


def tflops(m, n, k, seconds):
  return 2 * m * n * k / seconds / 1e12


def measure(fn, args, want):
  got = fn(*args).astype(jnp.float32)
  err = float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))
  if not err < 1e-2:
    raise AssertionError(f"relative error {err:.2g}")
  return mg.bench(fn, *args)


def main():
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; TFLOP/s by kernel time (CUPTI)")
  rows = []
  m, n, k = 4096, 8192, 4096
  ka, kb = jax.random.split(jax.random.key(0))
  a = jax.random.normal(ka, (m, k), jnp.float16)
  b = jax.random.normal(kb, (k, n), jnp.float16)
  want = jnp.dot(a, b, preferred_element_type=jnp.float32)
  cublas = tflops(m, n, k, measure(jax.jit(lambda a, b: a @ b), (a, b), want))
  for cfg in (dict(stages=4), dict(stages=4, epi=32, epi_bufs=4), dict(stages=3), dict(stages=3, epi_bufs=4),
              dict(stages=3, epi_bufs=3)):
    fn = jax.jit(lambda a, b, cfg=cfg: mm.matmul(a, b, bn=256, **cfg))
    try:
      t = tflops(m, n, k, measure(fn, (a, b), want))
      rows.append(("float16", f"{m}x{n}x{k}", str(cfg), f"{t:.0f}", f"{cublas:.0f}", f"{t / cublas:.3f}"))
    except Exception as e:  # a configuration that does not fit: note it, go on
      rows.append(("float16", f"{m}x{n}x{k}", str(cfg), f"{type(e).__name__}", f"{cublas:.0f}", ""))
    print(table(("dtype", "shape", "config", "mgpu_dsl", "cuBLAS", "ratio"), rows[-1:]), flush=True)
  m = n = k = 8192
  a, bt, _, _ = f8.random_operands(jax.random.key(1), m, n, k, jnp.float8_e4m3fn)
  ones_r, ones_c = jnp.ones((m,), jnp.float32), jnp.ones((n,), jnp.float32)
  want = jnp.dot(a, bt.T, preferred_element_type=jnp.float32)
  xla = tflops(m, n, k, measure(jax.jit(lambda a, bt: jnp.dot(a, bt.T, preferred_element_type=jnp.float32)),
                                (a, bt), want))
  for out, cfgs in ((jnp.float32, (dict(stages=4, epi=32), dict(stages=3, epi=32, epi_bufs=4),
                                   dict(stages=3, epi=64, epi_bufs=2), dict(stages=4, epi=32, specialize=False))),
                    (jnp.bfloat16, (dict(stages=4), dict(stages=3, epi_bufs=4), dict(stages=4, epi=32, epi_bufs=4),
                                    dict(stages=4, specialize=False)))):
    for cfg in cfgs:
      fn = jax.jit(lambda a, bt, r, c, cfg=cfg, out=out: f8.scaled_matmul(a, bt, r, c, out_dtype=out, **cfg))
      name = f"float8_e4m3fn -> {jnp.dtype(out).name}"
      try:
        t = tflops(m, n, k, measure(fn, (a, bt, ones_r, ones_c), want))
        rows.append((name, f"{m}^3", str(cfg), f"{t:.0f}", f"{xla:.0f}", f"{t / xla:.3f}"))
      except Exception as e:  # a configuration that does not fit: note it, go on
        rows.append((name, f"{m}^3", str(cfg), f"{type(e).__name__}: {str(e)[:60]}", f"{xla:.0f}", ""))
      print(table(("dtype", "shape", "config", "mgpu_dsl", "cuBLAS/XLA", "ratio"), rows[-1:]), flush=True)
  print("\nEpilogue buffers:")
  print(table(("dtype", "shape", "config", "mgpu_dsl", "cuBLAS/XLA", "ratio"), rows))


if __name__ == "__main__":
  main()
