"""GPU run of probe 57e's differential fuzzer (tests/diff_fuzz.py), which had run in interpret mode only: random
kernels of register math in float32, float16, bfloat16, int8, uint8, int16, int32 and bool (elementwise ops and
Python numbers, broadcasts, row and column reductions, `ml.where`, casts, reshapes, transposes, static slices, iota
masks, cumulative sums and maxima, dots of small tiles, masked loads and stores of odd lengths). Each seed's kernel
runs under `jax.jit` on the GPU and in interpret mode; both are compared with jnp's result on the same inputs (on
the GPU machine jnp evaluates eagerly on the GPU: XLA's own arithmetic is the reference), floats within
diff_fuzz.TOL, the rest bit for bit.

  python benchmarks/probe_diff_fuzz.py --seeds 0:2000 --jobs 14               # on the GPU machine
  python benchmarks/probe_diff_fuzz.py --cpu --jobs 2 --seeds 0:200           # no GPU: interpret mode (+ export)
  python benchmarks/probe_diff_fuzz.py --seeds 0:2000 --family dot            # one family (math, dot, store)

Classes as benchmarks/probe_wg_fuzz.py's ("wrong-gpu": the GPU's result is not jnp's, interpret mode's is); the
families: "dot" (a kernel with a dot), "store" (a masked store of an odd length), "math" (the rest). Every non-ok
line shows the seed's tags. Refusals are counted by code. Exit status 1 when any seed was not ok.
"""
from __future__ import annotations

import sys

import fuzz_pool


def family_of(tags):
  """The summary's family of a seed from its tags."""
  if "dot" in tags:
    return "dot"
  return "store" if "masked_store" in tags else "math"


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed (with `--family F`, a seed of another family is "skipped")."""
  import diff_fuzz
  g = diff_fuzz.Gen(seed)
  fam = family_of(g.tags)
  tags = " ".join(sorted(g.tags))
  if family and fam != family:
    return "skipped", fam, tags, ""
  cls, detail = fuzz_pool.check_seed(g, diff_fuzz.run, on_gpu, seed % export_every == 0,
                                     lambda got, want: diff_fuzz.compare(got, want, dot="dot" in g.tags))
  return cls, fam, tags, detail


if __name__ == "__main__":
  sys.exit(fuzz_pool.main(__doc__, run_seed, "diff_fuzz", progress=200, quiet=("ok", "skipped"),
                          family_help="only kernels of this family (math, dot, store)"))
