"""Register tensors past a thread's registers: one far past them even spread over the CTA (a RegisterCapacityError,
`check_register_values`), and those a loop carries (a RegisterSpillWarning, MG403's text).

A value a loop carries (a running sum over row blocks, `acc = acc + x.at[ml.ds(r * 128, 128)][...]`) lives in
registers all through the loop. Past the registers ptxas compiles each thread for (hw.launch_registers: 255 at
128 threads) it spills to local memory, and every trip reads and writes it there: the kernel computes, several
times slower. check_register_values rejects a value only far past a thread's registers (REGISTER_SLACK),
and frontend/mma_registers.py counts tensor-core accumulators; this warns where a loop's other carries, together,
do not fit, at the line that makes the largest one's initial value.
"""
from __future__ import annotations

import math

from . import errors as E
from . import hw
from . import ir
from .bounds_hints import whole_table_gather_hint
from .ops.control import For, While, terminator_values
from .ops.mma import Dot
from .mma_registers import launch_of
from .types import DType, TensorType, dtype_name, resolve


REGISTER_SLACK = 8     # a value may spill (ptxas copes, slowly); past 8x a thread's registers it is a mistake


def _register_bits(d: DType) -> int:
  """The bits of a register an element of `d` takes: Mosaic GPU's layouts hold 16-bit values two
  to a 32-bit register and 8-bit values four (vectors of 2 and 4); booleans and wider types one
  register (or two, 64-bit) each."""
  return d.bits if d != DType.bool_ and d.bits < 32 else max(d.bits, 32)


def check_register_values(kernel: ir.Kernel) -> list:
  """A register tensor needing more than REGISTER_SLACK times a thread's registers, even spread
  over every thread of the CTA, is a RegisterCapacityError: ptxas would spill it whole to local
  memory (or not finish), so it is reported at the op that makes it, once per kernel."""
  big = []
  used = {id(v) for o in ir.walk(kernel.body) for v in o.operands()}
  for o in ir.walk(kernel.body):
    for r in o.results:
      t = r.type
      if id(r) not in used and ir._removable(o) and not o.regions:
        continue        # (a read nothing uses, pruned before lowering: `w_ref[...]` of `w_ref[...][ids]`, probe 53b)
      if not (isinstance(t, TensorType) and isinstance(resolve(t.dtype), DType)):
        continue
      words = math.prod(t.shape) * _register_bits(resolve(t.dtype)) / 32 / kernel.block
      if words > REGISTER_SLACK * hw.THREAD_REGISTERS:
        big.append((o, r, words))
  if big:
    # the statement of the first one; of its tensors, the last it computes (a gather's value, not
    # the index grid the compiler makes for it)
    o, r, words = [b for b in big if b[0].loc == big[0][0].loc][-1]
    t = r.type
    what = f"this {'x'.join(map(str, t.shape))} {dtype_name(t.dtype)} tile"
    casts = [b[0].x for b in big if b[0].loc == o.loc and type(b[0]).__name__ == "Cast"]
    src = next((x for x in casts if isinstance(resolve(x.type.dtype), DType) and resolve(x.type.dtype).bits == 8), None)
    if src is not None and resolve(t.dtype).bits == 32:     # 8-bit max/min/where compute in 32 bits
      what += (f" (8-bit {dtype_name(src.type.dtype)} values widened to 32 bits, as a cast does and as 8-bit"
               f" ml.maximum, ml.minimum, ml.where and comparisons compute)")
    per = 32 // _register_bits(resolve(t.dtype))
    packed = f" ({'two' if per == 2 else 'four'} values a register)" if per > 1 else ""
    return [E.RegisterCapacityError(
        f"{what} needs {int(words)} registers a thread{packed} across the CTA's {kernel.block} threads;"
        f" a thread has {hw.THREAD_REGISTERS}", o.loc,
        hint=whole_table_gather_hint(kernel, o, r) or "keep tiles of at most a few hundred values a thread: loop"
             " over smaller windows (rows or column chunks), or hold the data in SMEM (ml.smem) and read it in parts")]
  return []


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
