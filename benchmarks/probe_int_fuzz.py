"""GPU run of probe 64a's integer-pattern fuzzer (tests/int_fuzz.py): small kernels of int8 / int16 / int32 / uint8 /
uint16 / uint32 elementwise chains (neg, abs, ~, + - *, // %, << >>, & | ^, jnp.minimum / maximum, jnp.where,
comparisons, astype between widths) feeding a cross-lane operation (`ml.sum / min / max / argmax / argmin` along
either axis or the whole tile, `ml.cumsum / cummax / cummin` along either axis) or a plain store; tiles of 16-256
rows and 16-128 columns read plain, by a masked window with a fill, or by TMA, at block 128, 256 and 384. Session 52's
class (ptxas miscompiling an int32 max of a negation across lanes, design note 216) is what it hunts: each seed's
kernel runs under `jax.jit` on the GPU and in interpret mode, both against jnp's result on the same inputs.

  python benchmarks/probe_int_fuzz.py --seeds 0:2000 --jobs 14                # on the GPU machine
  python benchmarks/probe_int_fuzz.py --cpu --jobs 2 --seeds 0:200            # no GPU: interpret mode (+ export)
  python benchmarks/probe_int_fuzz.py --seeds 0:2000 --family max             # one consumer (int_fuzz.CONSUMERS)

Classes as benchmarks/probe_wg_fuzz.py's ("wrong-gpu": the GPU's result is not jnp's, interpret mode's is). The
summary's families are the consumers; every non-ok line shows its tags (dtype, load, shape, block, ops, consumer).
Refusals are counted by code. Exit status 1 when any seed was not ok.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, family, on_gpu, export_every):
  """(class, consumer, tags, detail) of one seed (with `--family F`, a seed of another consumer is "skipped", not
  run, and not printed)."""
  import diff_fuzz
  import int_fuzz
  g = int_fuzz.Gen(seed)
  tags = " ".join(sorted(g.tags))
  if family and g.family != family:
    return "skipped", g.family, tags, ""
  cls, detail = fuzz_pool.check_seed(g, int_fuzz.run, on_gpu, seed % export_every == 0,
                                     lambda got, want: diff_fuzz.compare(got, want))
  return cls, g.family, tags, detail


if __name__ == "__main__":
  sys.exit(fuzz_pool.main(__doc__, run_seed, "int_fuzz", progress=200, quiet=("ok", "skipped"),
                          family_help="only kernels of this consumer (tests/int_fuzz.py, CONSUMERS)"))
