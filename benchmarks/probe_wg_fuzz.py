"""GPU run of probe 62a's differential fuzzer of multi-warpgroup kernels (tests/wg_fuzz.py): register tiles of 64-384
rows and 16-256 columns at block=256 and 384 (block=128 the control), loaded by TMA windows, plain or masked window
reads, with row and column statistics (sum, max, min, argmax, argmin, keepdims or not) broadcast back, scans along
either axis and of vectors, `ml.where` of `ml.arange` masks, casts, a tensor-core product, vectors and tiles carried
through `ml.range` loops and warp-specialised dot loops, stored whole, masked or by windows. Each seed's kernel runs
under `jax.jit` on the GPU and in interpret mode on the same inputs, both compared with the NumPy reference its plan
gives (exact inputs: sums are exact, the kernel and the reference round at the same points).

  python benchmarks/probe_wg_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_wg_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_wg_fuzz.py --seeds 0:500 --block 384         # one block size (wg_fuzz.BLOCKS)
  python benchmarks/probe_wg_fuzz.py --seeds 0:500 --block wide        # column slices, cummax, transposes, means too

Classes as benchmarks/probe_dot_fuzz.py's ("wrong-gpu": the GPU's result is not the reference, interpret mode's is:
the class this fuzzer hunts). Refusals are counted by code. Exit status 1 when any seed failed.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, block, on_gpu, export_every):
  """(class, block size, tags, detail) of one seed."""
  import wg_fuzz
  wide = (block or "").startswith("wide")      # `--block wide` or `--block wide:384`: the wider set of ops
  block = block.split(":")[1] if wide and ":" in block else (None if wide else block)
  g = wg_fuzz.Gen(seed, block=int(block) if block else None, wide=wide)
  tags = " ".join(sorted(g.tags))
  cls, detail = fuzz_pool.check_seed(g, wg_fuzz.run, on_gpu, seed % export_every == 0,
                                     lambda got, want: wg_fuzz.compare(got, want))
  return cls, f"block={g.block} {g.family}", tags, detail


if __name__ == "__main__":
  sys.exit(fuzz_pool.main(__doc__, run_seed, "wg_fuzz", family_flag=("--block",), progress=200,
                          family_help="only kernels of this block size (tests/wg_fuzz.py, BLOCKS); wide[:N], the wider ops"))
