"""Ragged dot (grouped GEMM, MoE) on the H200: mgpu_dsl (examples/ragged_dot.py) vs
jax.lax.ragged_dot (XLA) vs Pallas Mosaic GPU's ragged_dot_mgpu, TFLOP/s.

    python benchmarks/ragged_dot.py [--quick] [--shape m k n g]

Default shape m16384 k2048 n16384 G16 f16 (the project's reference figures: lax.ragged_dot 46,
Pallas best 593). Group sizes come from sorted random boundaries (as Pallas's own benchmark),
inputs are random normal. Every contender is checked against jax.lax.ragged_dot (in float32)
before it is timed, and runs at its best configuration of a sweep. Two figures each, measured
in this process: kernel time (CUPTI, jax's Mosaic GPU profiler, median of 20) and wall time
(median of timed loops of jitted calls). A timing is never an assertion.
"""
import argparse
import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import kernel_ms, median_time, table  # noqa: E402

OURS = [dict(bm=128, bn=256, bk=64, stages=4), dict(bm=128, bn=256, bk=64, stages=3),
        dict(bm=128, bn=128, bk=64, stages=4), dict(bm=128, bn=128, bk=64, stages=6)]
PALLAS = [dict(block_m=bm, block_n=bn, block_k=64, max_concurrent_steps=s, grid_block_n=gb)
          for bm in (64, 128) for bn in (128, 64) for s in (4, 6) for gb in (1, 4)]


def tflops(m, k, n, ms):
  return 2 * m * k * n / (ms * 1e-3) / 1e12


def check(fn, args, want):
  got = np.asarray(fn(*args), np.float32)
  err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
  if not err < 1e-2:
    raise AssertionError(f"relative error {err:.3g}")


def best(candidates, args, want, flops):
  """(kernel TFLOP/s, wall TFLOP/s, config) of the fastest correct candidate by kernel time."""
  out, err = None, ""
  for name, fn in candidates:
    try:
      check(fn, args, want)
      k = kernel_ms(fn, *args)
    except Exception as e:      # a configuration the contender cannot run: report, go on
      err = f"{type(e).__name__}: {str(e).splitlines()[0][:90]}"
      print(f"  skip {name}: {err}", flush=True)
      continue
    print(f"  {name}: {flops(k):.0f} TFLOP/s (kernel)", flush=True)
    if out is None or k < out[0]:
      out = (k, fn, name)
  if out is None:
    return float("nan"), float("nan"), err
  k, fn, name = out
  return flops(k), flops(median_time(fn, *args) * 1e3), name


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="one configuration per contender")
  p.add_argument("--shape", type=int, nargs=4, default=(16384, 2048, 16384, 16), metavar=("M", "K", "N", "G"))
  a = p.parse_args()
  import ragged_dot as ex
  m, k, n, g = a.shape
  print("jax", jax.__version__, jax.devices()[0].device_kind)
  kl, kr, kg = jax.random.split(jax.random.key(1234), 3)
  lhs = jax.random.normal(kl, (m, k), jnp.float16)
  rhs = jax.random.normal(kr, (g, k, n), jnp.float16)
  sizes = ex.random_group_sizes(kg, m, g)
  print("group sizes", np.asarray(sizes).tolist())
  args = (lhs, rhs, sizes)
  want = np.asarray(jax.jit(lambda l, r, s: jax.lax.ragged_dot(l, r, s, preferred_element_type=jnp.float32))(*args))
  flops = functools.partial(tflops, m, k, n)
  rows = []

  ours = [(str(c), jax.jit(functools.partial(ex.ragged_dot, **c))) for c in (OURS[:1] if a.quick else OURS)]
  print("mgpu_dsl", flush=True)
  rows.append(("mgpu_dsl ragged_dot", *best(ours, args, want, flops)))

  print("jax.lax.ragged_dot", flush=True)
  xla = jax.jit(lambda l, r, s: jax.lax.ragged_dot(l, r, s))
  rows.append(("jax.lax.ragged_dot (XLA)", *best([("default", xla)], args, want, flops)))

  print("Pallas ragged_dot_mgpu", flush=True)
  try:
    from jax.experimental.pallas.ops.gpu import ragged_dot_mgpu as pal
    cands = [(str(c), jax.jit(lambda l, r, s, c=c: pal.ragged_dot(l, r, group_sizes=s, **c)))
             for c in (PALLAS[:1] if a.quick else PALLAS) if n % (c["grid_block_n"] * c["block_n"]) == 0]
    rows.append(("Pallas ragged_dot_mgpu", *best(cands, args, want, flops)))
  except ImportError as e:
    rows.append(("Pallas ragged_dot_mgpu", float("nan"), float("nan"), f"ImportError: {e}"))

  base = max((r[1] for r in rows[1:] if r[1] == r[1]), default=float("nan"))
  print(f"\nragged dot f16 m{m} k{k} n{n} G{g}, TFLOP/s (best configuration each)")
  print(table(["contender", "kernel TFLOP/s", "wall TFLOP/s", "vs best other (kernel)", "configuration"],
              [(r[0], f"{r[1]:.0f}", f"{r[2]:.0f}", f"{r[1] / base:.2f}x", r[3]) for r in rows]))


if __name__ == "__main__":
  main()
