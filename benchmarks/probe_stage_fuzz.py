"""GPU run of probe 66a's differential fuzzer of pipelined loops whose stages are not whole 128-byte multiples and of
store buffers under SMEM pressure (tests/stage_fuzz.py): vectors and tiles of odd bytes TMA-loaded by
`ml.range(n, stages=s)` loops (plain, warp-specialised, in a persistent loop, twice in a row), read into registers,
transposed, windowed, stored back; store buffers a copy a stage overflows (one copy kept) or that overflow even once
(MG402 expected). Each seed's kernel runs under `jax.jit` on the GPU and in interpret mode on the same inputs, both
compared with the NumPy reference its plan gives. Interpret mode runs the typed IR, not the Mosaic GPU module, so a
stage's offset, a TMA box or a missing wait between a one-copy store buffer's TMA store and the next trip's write
shows only here.

  python benchmarks/probe_stage_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_stage_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_stage_fuzz.py --seeds 0:500 --family store      # one family of kernels

Classes as benchmarks/probe_mem_fuzz.py's ("fault", "wrong-gpu", "wrong", "crash", "refused:<code>", "build",
"timeout", "died"); an expected MG402 that comes as expected is "ok". Exit status 1 when any seed failed.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed."""
  import mem_fuzz
  import stage_fuzz
  g = stage_fuzz.Gen(seed, family=family)
  tags = " ".join(sorted(g.tags))
  if g.illegal:
    cls, detail = stage_fuzz.run(g)
    return ("ok" if cls == "refused" else cls), g.family, tags, detail
  cls, detail = fuzz_pool.check_seed(g, stage_fuzz.run, on_gpu, not on_gpu and seed % export_every == 0,
                                     lambda got, want: mem_fuzz.compare(got, want, dot="dot" in g.tags))
  return cls, g.family, tags, detail


def main():
  return fuzz_pool.main(__doc__, run_seed, "stage_fuzz", family_flag=("--family",),
                        family_help="only kernels of this family (tests/stage_fuzz.py, Gen.FAMILIES)", quiet=("ok",),
                        progress=0)


if __name__ == "__main__":
  sys.exit(main())
