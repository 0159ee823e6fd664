"""GPU run of probe 58b's differential fuzzer of memory-structured kernels (tests/mem_fuzz.py): TMA copies of windows
at static and run-time offsets and partial windows, masked loads and stores, pipelined and warp-specialised loops,
SMEM buffers read and written in registers, ml.dot of SMEM tiles, atomics, persistent grids. Each seed's kernel runs
under `jax.jit` on the GPU and in interpret mode on the same inputs, both compared with the NumPy reference its plan
gives (tests/mem_fuzz.py's tolerances). Interpret mode runs the typed IR, not the Mosaic GPU module, so a lowering
that builds and verifies but computes otherwise (a barrier, a swizzle, a TMA box) shows only here.

  python benchmarks/probe_mem_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_mem_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_mem_fuzz.py --seeds 0:500 --family matmul     # one family of kernels

Classes (one line per seed that is not "ok" or an expected refusal, then a summary): "fault" (a CUDA error: the seed's
kernel faulted; its worker is replaced, as the fault poisons the process's CUDA context), "wrong-gpu" (the GPU's result
is not the reference), "wrong" (interpret mode's is not), "crash" (a raw traceback or an InternalError), "refused"
(a KernelError of a legal plan), "build" (interpret mode right, the GPU's compilation failed), "timeout" (the
seed ran past --timeout: a hang; the worker is killed), "died" (the worker process died: a fault). Workers are
processes sharing the GPU (preallocation off). Exit status 1 when any seed failed.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed."""
  import mem_fuzz
  g = mem_fuzz.Gen(seed, family=family)
  tags = " ".join(sorted(g.tags))
  if g.illegal or not on_gpu:     # interpret mode (and a CUDA export of a sample: no GPU here)
    cls, detail = mem_fuzz.run(g, build=not on_gpu and seed % export_every == 0)
    if g.illegal and cls == "refused":
      cls = "ok"
    return cls, g.family, tags, detail
  cls, detail = fuzz_pool.gpu_check(g, mem_fuzz.run, lambda got, want: mem_fuzz.compare(got, want, dot="dot" in g.tags))
  return cls, g.family, tags, detail


def main():
  return fuzz_pool.main(__doc__, run_seed, "mem_fuzz", family_flag=("--family",),
                        family_help="only kernels of this family (tests/mem_fuzz.py, Gen.FAMILIES)", quiet=("ok",), progress=0)


if __name__ == "__main__":
  sys.exit(main())
