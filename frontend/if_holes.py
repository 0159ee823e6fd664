"""MG602's hint when an `if` known while compiling made the hole: `if i < 1: out.at[i][...] = v`
with grid=(2,) (a run-time if on the program id, decided per program by the grid evaluator), or
`if r == 0:` inside `ml.static_range` (an if on Python values, decided while tracing). Launching
more programs, the generic hint, would not help: the condition skips the write."""
from __future__ import annotations

import ast
import re

import numpy as np

from . import ir
from .memory_errors import skipped_store


def if_hole_hint(kernel: ir.Kernel, ev, param) -> str | None:
  """The hint naming the condition that kept a write into output `param` from running, or None."""
  name = param.name
  decided = getattr(ev, "decided", None) or {}
  found = skipped_store(kernel, param.value.id, set(decided)) if decided else None
  if found is not None and found[2] != "loop":
    write, cond, _ = found
    blk = _block_at(kernel, write)
    off = decided.get(id(blk)) if blk is not None else None
    who = _programs(ev, off) if off is not None else "some programs"
    trip = ev.decided_trip.get(id(blk)) if blk is not None else None
    if trip:
      who = f"the trip {trip}" if ev.P == 1 else f"{who} (first at {trip})"
    return _hint(name, cond.lineno, _condition(cond), write.lineno, f"is known while compiling: it skips"
                 f" the write in {who}")
  for loc, text, skipped, taken in getattr(kernel, "static_skips", ()):
    if _names(skipped, name) and not _names(taken, name):       # (not if HAS_BIAS: out = .. else: out = ..)
      return _hint(name, loc.lineno, text, None, "is decided while tracing (on Python values: shapes,"
                   f" constexprs, ml.static_range indices), and it skipped a branch that writes into {name}")
  return None


def _names(stmts, name) -> bool:
  return any(isinstance(n, ast.Name) and n.id == name for s in stmts for n in ast.walk(s))


def _hint(name, line, text, write, how) -> str:
  at = f" at line {write}" if write is not None else ""
  cond = f"the condition {text} of" if text else "the condition of"
  return (f"{cond} the if at line {line} {how}; write {name}{at} on every path (an else:"
          f" branch that writes the value meant for the rest, zeros or the input's values), or change the"
          f" condition so that every element is written; to keep an input's old values there, alias it to"
          f" {name}: @mgpu_kernel(..., input_output_aliases={{input index: output index}})")


def _block_at(kernel, write_loc):
  """The innermost If block holding an op at `write_loc`."""
  from .ops.control import If
  found = None
  for o in ir.walk(kernel.body):
    if isinstance(o, If):
      for blk in (o.then_block, o.else_block):
        if any(getattr(x, "loc", None) is write_loc for x in ir.walk(blk)):
          found = blk
  return found


def _programs(ev, off) -> str:
  ps = [ev.program(int(p)) for p in np.flatnonzero(off)]
  rank = max(1, max((a + 1 for a, n in enumerate(ev.kernel.grid) if n > 1), default=1))
  shown = ", ".join(str(p[:rank]) for p in ps[:3]) + (", ..." if len(ps) > 3 else "")
  return f"program{'s' if len(ps) > 1 else ''} {shown}"


def _condition(loc) -> str:
  """The condition of the `if` (or `elif`) statement at `loc`, as written."""
  line = getattr(loc, "source_line", "") or ""
  m = re.match(r"\s*(?:el)?if\s+(.*):\s*(?:#.*)?$", line)
  if m:
    try:
      ast.parse(m.group(1), mode="eval")
      return m.group(1).strip()
    except SyntaxError:
      pass
  return ""
