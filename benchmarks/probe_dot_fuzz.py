"""GPU run of probe 60a's differential fuzzer of tensor-core-structured kernels (tests/dot_fuzz.py): ml.dot / jnp.dot
/ `@` of float16, bfloat16, float32 (TF32), float8 and int8 operands, tiles from a few rows to multi-warpgroup ones
(block=128/256/384), transposed SMEM views, A from registers, operands by TMA, pointer grids and masked windows,
K loops (range, ml.range with stages, warp specialisation) with a ragged last block, chained dots (q @ k.T, then
p @ v), batched grids, split-K by atomics and TMA reductions, epilogues (bias, scales, activations, casts, masked,
pointer, TMA and transposed stores). Each seed's kernel runs under `jax.jit` on the GPU and in interpret mode on the
same inputs, both compared with the NumPy reference its plan gives (exact inputs: only the epilogue rounds).
Interpret mode runs the typed IR, not the Mosaic GPU module, so a WGMMA descriptor, a swizzle, a TMA box or a
barrier that builds but computes otherwise shows only here.

  python benchmarks/probe_dot_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_dot_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_dot_fuzz.py --seeds 0:500 --family chain      # one family (gemm, chain, pallas)

Classes (one line per seed that is not "ok", then a summary): "fault" (a CUDA error: the seed's kernel faulted; its
worker is replaced, as the fault poisons the process's CUDA context), "wrong-gpu" (the GPU's result is not the
reference), "wrong" (interpret mode's is not), "crash" (a raw traceback or an InternalError), "refused" (a
KernelError), "build" (interpret mode right, the GPU's compilation failed), "timeout" (the seed ran past --timeout: a
hang; the worker is killed), "died" (the worker process died: a fault). Workers are processes sharing the GPU
(preallocation off). Exit status 1 when any seed failed.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed."""
  import dot_fuzz
  g = dot_fuzz.Gen(seed, family=family)
  tags = " ".join(sorted(g.tags))
  if not on_gpu:     # interpret mode (and a CUDA export of a sample: no GPU here)
    cls, detail = dot_fuzz.run(g, build=seed % export_every == 0)
    return cls, g.family, tags, detail
  cls, detail = fuzz_pool.gpu_check(g, dot_fuzz.run, lambda got, want: dot_fuzz.compare(got, want, g.tol_dtype))
  return cls, g.family, tags, detail


def main():
  return fuzz_pool.main(__doc__, run_seed, "dot_fuzz", family_flag=("--family",),
                        family_help="only kernels of this family (tests/dot_fuzz.py, Gen.FAMILIES)", quiet=("ok",),
                        progress=200)


if __name__ == "__main__":
  sys.exit(main())
