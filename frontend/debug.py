"""`print(...)` and `breakpoint()` inside kernels.

print takes static text, f-strings and values; interpret mode prints every value of
every program, the GPU prints the text and scalar values. breakpoint() records the
names in scope; interpret mode stops there in a debugger with their values.
"""
from __future__ import annotations

import ast

from . import errors as E
from . import ir
from .semantics import is_value


def _static(tracer, node, x, what):
  if is_value(x):
    raise E.KernelTypeError(f"print's {what} must be a static string", tracer.loc(node))
  return x


def trace_print(tracer, node):
  kw = {k.arg: k for k in node.keywords}
  unknown = set(kw) - {"sep", "end"}
  if unknown or any(isinstance(a, ast.Starred) for a in node.args):
    tracer.unsupported(node, f"print with {', '.join(sorted(unknown)) or '*args'}",
                       hint="print(a, b, sep=' ', end='\\n') with values and f-strings")
  sep = _static(tracer, node, tracer.eval(kw["sep"].value), "sep") if "sep" in kw else " "
  end = _static(tracer, node, tracer.eval(kw["end"].value), "end") if "end" in kw else ""
  parts = []
  for i, a in enumerate(node.args):
    if i:
      parts.append(sep)
    if isinstance(a, ast.JoinedStr):
      for v in a.values:
        if isinstance(v, ast.Constant):
          parts.append(str(v.value))
        else:
          x = tracer.eval(v.value)
          spec = tracer.eval(v.format_spec) if v.format_spec is not None else ""
          parts.append(x if is_value(x) else format(x, spec))
    else:
      x = tracer.eval(a)
      parts.append(x if is_value(x) else str(x))
  if end and end != "\n":
    parts.append(end.rstrip("\n"))
  merged = []
  for p in parts:          # join adjacent text
    if merged and isinstance(p, str) and isinstance(merged[-1], str):
      merged[-1] += p
    else:
      merged.append(p)
  tracer.em.emit(ir.Print, tuple(merged), loc=tracer.loc(node))


def trace_breakpoint(tracer, node):
  if node.args or node.keywords:
    tracer.unsupported(node, "breakpoint with arguments")
  names, values = [], []
  for name, v in tracer.env.items():
    if is_value(v) or isinstance(v, (int, float, bool, str, tuple)):
      names.append(name)
      values.append(v)
  tracer.em.emit(ir.Breakpoint, tuple(names), tuple(values), loc=tracer.loc(node))
