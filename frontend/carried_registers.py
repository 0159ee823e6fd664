"""Register tensors a loop carries past a thread's registers (a RegisterSpillWarning, MG403's text).

A value a loop carries (a running sum over row blocks, `acc = acc + x.at[ml.ds(r * 128, 128)][...]`) lives in
registers all through the loop. Past the registers ptxas compiles each thread for (hw.launch_registers: 255 at
128 threads) it spills to local memory, and every trip reads and writes it there: the kernel computes, several
times slower. checks.check_register_values rejects a value only far past a thread's registers (REGISTER_SLACK),
and frontend/mma_registers.py counts tensor-core accumulators; this warns where a loop's other carries, together,
do not fit, at the line that makes the largest one's initial value.
"""
from __future__ import annotations

import math

from . import errors as E
from . import ir
from .checks import _register_bits
from .ops.control import For, While, terminator_values
from .ops.mma import Dot
from .mma_registers import launch_of
from .types import DType, TensorType, dtype_name, resolve


def _words(t, threads: int) -> float:
  return math.prod(t.shape) * _register_bits(resolve(t.dtype)) / 32 / threads


def check_carried_registers(kernel: ir.Kernel) -> None:
  _, threads, have = launch_of(kernel)
  made = {r.id: o for o in ir.walk(kernel.body) for r in o.results}
  dots = {r.id for o in made.values() if isinstance(o, Dot) for r in o.results}
  for loop in ir.walk(kernel.body):
    if not isinstance(loop, (For, While)):
      continue
    args = loop.body.args[1:] if isinstance(loop, For) else loop.body.args
    ends = terminator_values(loop.body.ops[-1]) or []
    carried = [(arg, init) for arg, init, end in zip(args, loop.inits, ends)
               if isinstance(arg.type, TensorType) and isinstance(resolve(arg.type.dtype), DType)
               and getattr(end, "id", None) not in dots and getattr(init, "id", None) not in dots]
    words = sum(_words(arg.type, kernel.block) for arg, _ in carried)
    if not carried or words <= have:
      continue
    arg, init = max(carried, key=lambda c: _words(c[0].type, kernel.block))
    at = made.get(getattr(init, "id", None))
    t = arg.type
    name = arg.name or init.name or "the value"
    rows = t.shape[0]
    while rows > 1 and sum(_words(TensorType((max(1, a.type.shape[0] * rows // t.shape[0]), *a.type.shape[1:]),
                                             a.type.dtype), kernel.block) for a, _ in carried) > have:
      rows //= 2
    others = "" if len(carried) == 1 else f" (with the loop's other carries, {int(words)} in all)"
    fit = (f"carry a tile of {rows} rows ({'x'.join(map(str, (rows, *t.shape[1:])))}) a program, launching more"
           " programs for the rest" if rows != t.shape[0] and len(t.shape) > 1 and rows >= 1 and
           sum(_words(TensorType((max(1, a.type.shape[0] * rows // t.shape[0]), *a.type.shape[1:]), a.type.dtype),
                      kernel.block) for a, _ in carried) <= have else
           "carry fewer values a program (a narrower window, more programs)")
    E.warn(E.RegisterCapacityError(
        f"the loop at line {loop.loc.lineno} carries {name} ({'x'.join(map(str, t.shape))} {dtype_name(t.dtype)})"
        f" in registers, {int(_words(t, kernel.block))} a thread across the CTA's {kernel.block} threads{others}; a CTA"
        f" of {threads} threads is compiled for {have} registers a thread, so ptxas spills it to local memory and"
        " each trip reads and writes it there (it computes, several times slower)",
        at.loc if at is not None else loop.loc,
        hint=f"{fit}, or keep it in SMEM (ml.smem) and update it in parts"))
