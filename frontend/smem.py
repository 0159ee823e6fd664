"""Where each SMEM buffer lives, and the 227 KiB budget.

The layout is fixed here (the lowering follows it) so the budget check sees
every byte the kernel will use: one 8-byte mbarrier per TMA load site first,
then each buffer at a 1024-byte boundary (what 128-byte swizzled TMA needs).
"""
from __future__ import annotations

import dataclasses

from . import errors as E
from . import ir

SMEM_LIMIT = 227 * 1024   # bytes a CTA may use on Hopper (cudaFuncAttributeMaxDynamicSharedMemorySize)
BUFFER_ALIGN = 1024
MBARRIER_BYTES = 8


@dataclasses.dataclass(frozen=True)
class SmemPlan:
  barrier_bytes: int
  offsets: tuple[int, ...]     # byte offset of each kernel.smem buffer
  total: int


def _align(n, a):
  return (n + a - 1) // a * a


def plan_smem(kernel) -> SmemPlan:
  off = kernel.num_load_slots * MBARRIER_BYTES
  barrier_bytes = off
  offsets = []
  for buf in kernel.smem:
    off = _align(off, BUFFER_ALIGN)
    offsets.append(off)
    off += buf.type.nbytes
  if off > SMEM_LIMIT:
    sizes = ", ".join(f"{b.name or '?'} {b.type.nbytes // 1024} KiB" for b in kernel.smem)
    biggest = max(kernel.smem, key=lambda b: b.type.nbytes)
    raise E.SmemCapacityError(
        f"the kernel's SMEM needs {off} bytes ({sizes}, plus barriers and alignment), more than the"
        f" {SMEM_LIMIT} bytes (227 KiB) a CTA can use", _alloc_loc(kernel, biggest),
        hint="use smaller tiles or fewer pipeline stages")
  return SmemPlan(barrier_bytes, tuple(offsets), off)


def _alloc_loc(kernel, buf):
  for o in ir.walk(kernel.body):
    if isinstance(o, ir.SmemAlloc) and o.result is buf:
      return o.loc
  return kernel.loc
