"""Where does probe_layouts' masked_flatten[300x1:int8;R=128] spend its time on the H200 (it ran past
90 s there, while every other masked_flatten case took seconds)? Lowering, compiling and running are
timed apart; a Python stack is printed every 20 s, so a hang names its phase.

  python benchmarks/probe_hang.py [--dtype int8] [--rows 300]
"""
import argparse
import faulthandler
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from layout_kernels import masked_flatten   # noqa: E402


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--dtype", default="int8")
  ap.add_argument("--rows", type=int, default=300)
  a = ap.parse_args()
  faulthandler.dump_traceback_later(20, repeat=True)
  x = jnp.asarray(np.arange(a.rows) % 100, a.dtype).reshape(a.rows, 1)
  f = jax.jit(lambda x: masked_flatten(x, R=128))
  t = time.perf_counter()
  lowered = f.lower(x)
  print(f"lowered in {time.perf_counter() - t:.1f} s", flush=True)
  t = time.perf_counter()
  compiled = lowered.compile()
  print(f"compiled in {time.perf_counter() - t:.1f} s", flush=True)
  t = time.perf_counter()
  y = jax.block_until_ready(compiled(x))
  print(f"ran in {time.perf_counter() - t:.1f} s; equal: {bool((np.asarray(y) == np.asarray(x).reshape(-1)).all())}",
        flush=True)
  faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
  main()
