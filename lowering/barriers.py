"""Named barriers that LLVM may not duplicate.

Mosaic GPU writes a warpgroup's barrier (`mgpu.utils.warpgroup_barrier`, used by its reductions,
TMA stores and ours) as inline assembly, `bar.sync $0, 128;`, and inline assembly carries no
`convergent` attribute. LLVM may then copy it into both arms of a branch: jump threading does so
when the branch before the barrier and the one after it test the same condition, as a masked load
and a masked store of the same rows do. Threads of one warp that took different arms then wait at
two different `bar.sync` instructions, which PTX's `.aligned` barriers do not allow: on the H200 the
kernel hung (design note 66: a row-masked (300, 1) int8 tile reshaped through SMEM).

`make_convergent(op)` rewrites every such barrier under `op` as NVVM's `nvvm.barrier` /
`nvvm.barrier.arrive`, whose intrinsics LLVM knows are convergent and never duplicates. The
barrier's number and thread count stay as they were.
"""
from __future__ import annotations

import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, nvvm

CONVERGENT = True      # False keeps the assembly (benchmarks/barrier_forms.py compares the two)
_ASM = re.compile(r"^\s*bar\.(sync|arrive)\s+(\$0|\d+)\s*,\s*(\d+)\s*;\s*$")


def _barriers(op):
  for region in op.regions:
    for block in region:
      for inner in block:
        if inner.operation.name == "llvm.inline_asm":
          m = _ASM.match(ir.StringAttr(inner.operation.attributes["asm_string"]).value)
          if m:
            yield inner, m
        yield from _barriers(inner.operation)


def _rewrite(op, kind, which, threads) -> bool:
  i32 = ir.IntegerType.get_signless(32)
  with ir.InsertionPoint(op), op.location:
    barrier_id = op.operands[0] if which == "$0" else arith.constant(i32, int(which))
    count = arith.constant(i32, int(threads))
    if kind == "sync":
      nvvm.barrier(barrier_id=barrier_id, number_of_threads=count)
    else:
      nvvm.barrier_arrive(count, barrier_id=barrier_id)
  op.operation.erase()
  return True


def make_convergent(root) -> int:
  """Rewrite the inline-assembly named barriers under `root` (an operation) as NVVM barrier ops;
  the number rewritten. A jax whose NVVM dialect lacks those ops keeps the assembly."""
  if not CONVERGENT:
    return 0
  found = list(_barriers(root))
  n = 0
  for op, m in found:
    try:
      n += _rewrite(op, *m.groups())
    except (TypeError, AttributeError):       # an NVVM binding of another shape: leave it
      break
  return n
