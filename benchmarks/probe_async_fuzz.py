"""GPU run of probe 61a's differential fuzzer of tensor-core operands in flight (tests/async_fuzz.py): dots whose
register A operands and accumulators stay in flight in pipelined loops (`stages=2..4`), warp-specialised and
ping-pong loops, persistent grids and nested loops; A loaded, masked, computed, read back from SMEM, carried, loaded
once, defined under an `if`, a previous dot's converted result, reused by two dots; accumulators chained, rescaled,
doubled, read mid-loop, fresh each trip, yielded twice. Each seed's kernel runs under `jax.jit` on the GPU and in
interpret mode (which reports a missing wait as MG951, class "race") on the same inputs, both compared with the
NumPy reference its plan gives (exact inputs: only conversions round).

  python benchmarks/probe_async_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_async_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_async_fuzz.py --seeds 0:500 --loop pingpong     # one loop structure (async_fuzz.LOOPS)
  python benchmarks/probe_async_fuzz.py --seeds 0:2000 --loop 61c         # probe 61c's shapes (tests/async_fuzz2.py:
      int8 / float8 / TF32 register A, several warpgroups, sliced / concatenated / jnp.where A, static_range dots,
      lax.fori_loop and while loops, masked epilogues); --loop 61c:fori picks one of async_fuzz2.LOOPS

Classes as benchmarks/probe_dot_fuzz.py's ("wrong-gpu": the GPU's result is not the reference, interpret mode's is:
the class this fuzzer hunts), plus "race". Exit status 1 when any seed failed.
"""
from __future__ import annotations

import sys

import fuzz_pool


def run_seed(seed, loop, on_gpu, export_every):
  """(class, loop structure, tags, detail) of one seed."""
  import async_fuzz
  if loop and loop.startswith("61c"):        # probe 61c's generator (its loop after the colon, if any)
    import async_fuzz2
    g = async_fuzz2.Gen(seed, loop=loop[4:] or None)
    loop = "61c:" + g.loop
  else:
    g = async_fuzz.Gen(seed, loop=loop)
    loop = g.loop
  tags = " ".join(sorted(g.tags))
  if not on_gpu:     # interpret mode (and a CUDA export of a sample: no GPU here)
    cls, detail = async_fuzz.run(g, build=seed % export_every == 0)
    return cls, loop, tags, detail
  cls, detail = fuzz_pool.gpu_check(g, async_fuzz.run, lambda got, want: async_fuzz.compare(got, want, g.tol_dtype))
  return cls, loop, tags, detail


def main():
  return fuzz_pool.main(__doc__, run_seed, "async_fuzz", family_flag=("--loop",),
                        family_help="only kernels of this loop structure (tests/async_fuzz.py, LOOPS)", quiet=("ok",),
                        progress=200)


if __name__ == "__main__":
  sys.exit(main())
