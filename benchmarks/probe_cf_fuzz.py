"""GPU run of probe 59c's differential fuzzer of control-flow-structured kernels (tests/cf_fuzz.py): run-time and
static loops (zero trips, descending, stepped, nested, bounded by an outer index), while loops of data-dependent
conditions, ifs on GMEM scalars, program ids and reductions, early returns, break / continue / for-else, ml.where
masks, lax.fori_loop / while_loop / cond, helpers whose loops return, tuple carries. Each seed's kernel runs under
`jax.jit` on the GPU and in interpret mode on the same inputs, both compared with the reference its body gives when
run as Python on jnp values (exact: the fuzzer keeps every decision exact). Interpret mode runs the typed IR, not
the Mosaic GPU module, so a lowering of scf.while / scf.if / scf.for that builds but computes otherwise shows only here.

  python benchmarks/probe_cf_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_cf_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_cf_fuzz.py --seeds 0:500 --tag while_data    # only kernels of a feature (Gen.tags)

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
  import cf_fuzz
  g = cf_fuzz.Gen(seed)
  g.family = "cf"
  tags = " ".join(sorted(g.tags))
  if family and family not in g.tags:
    return "skipped", g.family, tags, ""
  if not on_gpu:     # interpret mode (and a CUDA export of a sample: no GPU here)
    cls, detail = cf_fuzz.run(g, build=seed % export_every == 0)
    return cls, g.family, tags, detail
  cls, detail = fuzz_pool.gpu_check(g, cf_fuzz.run, cf_fuzz.compare)
  return cls, g.family, tags, detail


def main():
  return fuzz_pool.main(__doc__, run_seed, "cf_fuzz", family_flag=("--tag",),
                        family_help="only kernels of this tag (tests/cf_fuzz.py, Gen.tags)", quiet=("ok", "skipped"), progress=100)


if __name__ == "__main__":
  sys.exit(main())
