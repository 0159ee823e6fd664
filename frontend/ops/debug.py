"""Debugging: `print(...)` and `breakpoint()` inside kernels.

Interpret mode prints every value of every program and stops at a breakpoint in a
debugger with the kernel's values; the GPU prints the text and scalar values (once
per warpgroup) and ignores breakpoints. The tracer evaluates print's arguments
(f-strings included) and hands the parts here.
"""
from __future__ import annotations

from .. import ir
from ..ir import Traits


@ir.op(Traits())
class Print(ir.Op):
  """Static text and values, in order."""
  parts: tuple
  loc: object
  results: tuple = ()


@ir.op(Traits())
class Breakpoint(ir.Op):
  """The kernel's names and values at a `breakpoint()`."""
  names: tuple
  values: tuple
  loc: object
  results: tuple = ()


def print_(cx, parts):
  merged = []
  for p in parts:          # join adjacent text
    if merged and isinstance(p, str) and isinstance(merged[-1], str):
      merged[-1] += p
    else:
      merged.append(p)
  cx.b.emit(Print, tuple(merged), loc=cx.loc)


def breakpoint_(cx, names, values):
  cx.b.emit(Breakpoint, tuple(names), tuple(values), loc=cx.loc)
