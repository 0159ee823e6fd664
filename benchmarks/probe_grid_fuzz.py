"""GPU run of probe 63b's differential fuzzer of grid and schedule structures (tests/grid_fuzz.py): 1-D, 2-D and 3-D
grids, program ids of each axis, row- and column-major splits of a 1-D id, Triton's GROUP_SIZE_M swizzle, grids
larger than the work (early returns), grids of one program, persistent loops over tiles (`range` and `ml.range`,
pipelined, with an epilogue a tile and a total added atomically), reductions across programs into scalars and
rows, split-K by atomics, TMA reductions and a last-program ticket, stream-K style locks and flags, ragged tiles in
either axis; plus plans whose plain writes overlap, which must be refused (MG951 / MG602). Each seed's kernel runs
under `jax.jit` on the GPU and in interpret mode on the same inputs, both compared with the NumPy reference its
plan gives (exact inputs: every sum is exact in any order).

  python benchmarks/probe_grid_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_grid_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_grid_fuzz.py --seeds 0:500 --family lock       # one family (tests/grid_fuzz.py, FAMILIES)

Classes as benchmarks/probe_dot_fuzz.py's ("wrong-gpu": the GPU's result is not the reference, interpret mode's
is). An `overlap` plan refused as expected is "expected:MG951" (MG602, MG601), a quiet class (on the GPU too: it
never builds); one accepted is "wrong". Other refusals are counted by code.
Exit status 1 when any seed failed.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed."""
  import grid_fuzz
  g = grid_fuzz.Gen(seed, family=family)
  tags = " ".join(sorted(g.tags))
  # (a race's kernel runs in interpret mode on the GPU machine too: its result is the check's, not the GPU's)
  cls, detail = fuzz_pool.check_seed(g, grid_fuzz.run, on_gpu and not g.race, not on_gpu and seed % export_every == 0,
                                     lambda got, want: grid_fuzz.compare(got, want))
  if detail.startswith("refused as expected"):      # an overlap plan's refusal, counted by code too
    cls = "expected:" + detail.split()[3]
  return cls, g.family, tags, detail


if __name__ == "__main__":
  sys.exit(fuzz_pool.main(__doc__, run_seed, "grid_fuzz", family_flag=("--family",), progress=200,
                          quiet=("ok",) + tuple("expected:" + c for c in ("MG951", "MG602", "MG601")),
                          family_help="only kernels of this family (tests/grid_fuzz.py, FAMILIES)"))
