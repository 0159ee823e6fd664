"""One tensor-core instruction's accumulator against the registers a thread is launched with.

ptxas compiles a kernel for its launch bound (hw.launch_registers: 128 registers a thread at 512
threads, 64 at 1024), and a WGMMA instruction keeps its whole 64 x n block of the accumulator in
registers at once: n / 2 registers for float32 and int32 accumulators, n / 4 for float16, plus
hw.MMA_EXTRA_REGISTERS. One that does not fit is not spilled: ptxas stops ("C7602 Insufficient
registers"), a raw "Pass pipeline failed" on the GPU. It is checked here, on the kernel after warp
specialisation added its producer warpgroup, at the ml.dot.
"""
from __future__ import annotations

from . import errors as E
from . import hw
from . import ir
from .types import DType, dtype_name, resolve
from .ops.control import WarpSpecialize
from .ops.mma import Dot


def _registers(n: int, acc: DType) -> int:
  """Registers a thread holds one instruction's 64 x n accumulator block in."""
  return hw.MMA_M * n * acc.bits // 32 // hw.WARPGROUP


def check_mma_registers(kernel: ir.Kernel) -> None:
  producer = any(isinstance(o, WarpSpecialize) for o in kernel.body.ops)
  threads = kernel.block + (hw.WARPGROUP if producer else 0)
  have = hw.launch_registers(threads)
  errors, seen = [], set()
  for o in ir.walk(kernel.body):
    if not isinstance(o, Dot) or o.loc in seen:
      continue
    t = o.results[0].type
    acc, n = resolve(t.dtype), t.shape[-1]
    need = _registers(n, acc) + hw.MMA_EXTRA_REGISTERS
    if need <= have:
      continue
    seen.add(o.loc)
    per_col = hw.MMA_M * acc.bits // 32 / hw.WARPGROUP
    fits = int((have - hw.MMA_EXTRA_REGISTERS) / per_col) // 64 * 64
    # the most threads (whole warpgroups) whose launch bound holds the instruction
    most = max((w * hw.WARPGROUP for w in range(1, hw.MAX_BLOCK // hw.WARPGROUP + 1)
                if hw.launch_registers(w * hw.WARPGROUP) >= need), default=0)
    block = most - (hw.WARPGROUP if producer else 0)
    launched = f"block={kernel.block}" + (" and the warp-specialised loop's producer warpgroup" if producer else "")
    fixes = []
    if fits >= 64:
      fixes.append(f"dots of at most {fits} columns (a b tile of {fits} columns, or several dots on column"
                   f" slices of b, each with its own accumulator)")
    if block >= hw.WARPGROUP:
      fixes.append(f"block={block} or fewer threads" + (" (the producer warpgroup comes on top)" if producer else ""))
    errors.append(E.RegisterCapacityError(
        f"this ml.dot's {'x'.join(map(str, t.shape))} {dtype_name(acc)} accumulator: one tensor-core instruction holds a"
        f" 64x{n} block of it in {_registers(n, acc)} registers a thread, and needs {need} in all; a CTA of"
        f" {threads} threads ({launched}) is compiled for {have} registers a thread", o.loc,
        hint="use " + " or ".join(fixes) if fixes else "use fewer threads and a narrower b tile"))
  if errors:
    E.raise_all(errors)
