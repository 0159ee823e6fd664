"""Probe 72b's corpus at block=256 and block=512 (two and four warpgroups): each case that is one kernel rebuilt with
the block size, checked against the same reference and exported (python tests/probe72b_sweep.py [256 512])."""
import sys

import mgpu_dsl as mg
from probe72b_run import MODULES, classify, load


def with_block(kernel, block):
  """The kernel rebuilt with `block` threads (None for a host driver or a wrapper of several launches)."""
  if not isinstance(kernel, mg.KernelFunction):
    return None
  return mg.mgpu_kernel(kernel.fn, out_shape=kernel.out_shape, grid=kernel.grid, block=block,
                        input_output_aliases=kernel.input_output_aliases)


if __name__ == "__main__":
  cases, x64 = load(MODULES)
  for block in [int(b) for b in sys.argv[1:]] or [256, 512]:
    tally = {}
    for name, (kernel, make, ref, tol) in cases.items():
      k = with_block(kernel, block)
      if k is None:
        continue
      kind, info = classify((k, make, ref, tol), name in x64)
      tally[kind] = tally.get(kind, 0) + 1
      if kind != "ok":
        print(f"=== block={block} {name}: {kind}\n{info}", flush=True)
    print("TALLY", block, tally, flush=True)
