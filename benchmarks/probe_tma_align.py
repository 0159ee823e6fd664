"""Probe: a TMA load whose window starts at a run-time column START of an int32 array.

    python benchmarks/probe_tma_align.py START

On the H200 a start that is not a multiple of 16 bytes faulted (CUDA_ERROR_ILLEGAL_INSTRUCTION,
which poisons the process's CUDA context: docs/logs/probe_tma_align.log). Since then mgpu_dsl
rejects such a copy when it compiles (MG401, frontend/tma_starts.py check_minor_starts): this kernel
now fails with a TmaLimitError for every START, as its start is not provably a multiple of 4;
with ml.multiple_of(first, 4) it compiles, and interpret mode checks the promise.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml


@mg.mgpu_kernel(out_shape=lambda t, s: jax.ShapeDtypeStruct((128,), jnp.int32), grid=(1,))
def window(t, s, out):
  first = s[0]
  buf = ml.smem((8,), jnp.int32)
  ml.copy(t.at[1, ml.ds(first, 8)], buf)
  out.at[ml.ds(0, 128)][...] = ml.zeros((128,), jnp.int32) + buf[3]


def main():
  start = int(sys.argv[1])
  t = jnp.arange(4 * 32, dtype=jnp.int32).reshape(4, 32)
  got = int(np.asarray(window(t, jnp.array([start], jnp.int32)))[0])
  print(f"start {start}: buf[3] = {got} (want {32 + start + 3})", flush=True)


if __name__ == "__main__":
  main()
