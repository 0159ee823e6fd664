"""GPU run of probe 63a's differential fuzzer of data-dependent and ragged kernels (tests/ragged_fuzz.py): windows,
masks and trip counts from values the kernel reads (CSR offsets, cu_seqlens, group offsets, page tables, index
vectors), run-time `ml.range` loops (stages 1-4, warp-specialised page-table and grouped-GEMM loops), TMA windows at
run-time rows, masked loads and partial-tile stores, `ml.where` by data, `if`/`while` on loaded scalars, atomics into
data-chosen rows, `ml.dot` over ragged M and K, block 128 and 256. Each seed's kernel runs under `jax.jit` on the GPU
and in interpret mode on the same inputs, both compared with the NumPy reference its plan and data give (exact
inputs: sums are exact).

  python benchmarks/probe_ragged_fuzz.py --seeds 0:2000 --jobs 14            # on the GPU machine
  python benchmarks/probe_ragged_fuzz.py --seeds 0:40 --jobs 1 --cpu         # interpret mode only (+ export)
  python benchmarks/probe_ragged_fuzz.py --seeds 0:500 --family paged        # one family (ragged_fuzz.FAMILIES)

Classes as benchmarks/probe_wg_fuzz.py's ("wrong-gpu": the GPU's result is not the reference, interpret mode's is).
Refusals are counted by code. Exit status 1 when any seed failed.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed."""
  import ragged_fuzz
  g = ragged_fuzz.Gen(seed, family=family)
  tags = " ".join(sorted(g.tags))
  cls, detail = fuzz_pool.check_seed(g, ragged_fuzz.run, on_gpu, seed % export_every == 0, ragged_fuzz.compare)
  return cls, g.family, tags, detail


if __name__ == "__main__":
  sys.exit(fuzz_pool.main(__doc__, run_seed, "ragged_fuzz", progress=100,
                          family_help="only kernels of this family (tests/ragged_fuzz.py, FAMILIES)"))
