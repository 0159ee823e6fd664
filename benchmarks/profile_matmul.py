"""Run one mgpu_dsl matmul a few times, for Nsight Compute:

    ncu --clock-control none --kernel-name regex:matmul --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python3 benchmarks/profile_matmul.py 2048 2048 2048 --bn 256 --stages 3 [--no-persistent] [--no-specialize]
"""
import argparse
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import matmul as ex  # noqa: E402


def main():
  p = argparse.ArgumentParser()
  p.add_argument("m", type=int)
  p.add_argument("n", type=int)
  p.add_argument("k", type=int)
  p.add_argument("--bm", type=int, default=128)
  p.add_argument("--bn", type=int, default=256)
  p.add_argument("--stages", type=int, default=None, help="default: the kernel's")
  p.add_argument("--no-persistent", dest="persistent", action="store_false")
  p.add_argument("--no-specialize", dest="specialize", action="store_false")
  p.add_argument("--dtype", default="float16")
  p.add_argument("--runs", type=int, default=4)
  a = p.parse_args()
  dt = jnp.dtype(a.dtype)
  x = jax.random.normal(jax.random.key(0), (a.m, a.k), jnp.float32).astype(dt)
  y = jax.random.normal(jax.random.key(1), (a.k, a.n), jnp.float32).astype(dt)
  cfg = dict(bm=a.bm, bn=a.bn, stages=a.stages, persistent=a.persistent, specialize=a.specialize)
  f = jax.jit(lambda x, y: ex.matmul(x, y, **cfg))
  for _ in range(a.runs):
    jax.block_until_ready(f(x, y))


if __name__ == "__main__":
  main()
