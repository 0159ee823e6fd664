"""Tracing `print(...)` and `breakpoint()` in a kernel (`self` is the frontend.tracer.Tracer):
the statements become ops of the debugging family (frontend/ops/debug.py)."""
from __future__ import annotations

import ast

from . import errors as E
from .ops import debug
from .ops.base import is_value


def trace_print(self, node):
  """`print(...)` in a kernel: static text and register values, printed by the GPU."""
  kw = {k.arg: k for k in node.keywords}
  unknown = set(kw) - {"sep", "end"}
  if unknown or any(isinstance(a, ast.Starred) for a in node.args):
    self.unsupported(node, f"print with {', '.join(sorted(unknown)) or '*args'}",
                     hint="print(a, b, sep=' ', end='\\n') with values and f-strings")
  sep = _static_text(self, node, kw["sep"].value, "sep") if "sep" in kw else " "
  end = _static_text(self, node, kw["end"].value, "end") if "end" in kw else ""
  parts = []
  for i, a in enumerate(node.args):
    if i:
      parts.append(sep)
    if isinstance(a, ast.JoinedStr):
      for v in a.values:
        if isinstance(v, ast.Constant):
          parts.append(str(v.value))
          continue
        x = self.eval(v.value)
        spec = "".join(str(p.value) for p in v.format_spec.values
                       if isinstance(p, ast.Constant)) if v.format_spec is not None else ""
        if is_value(x):
          parts.append((x, spec, self.text(v.value), self.loc(v.value)) if spec else x)   # per element
        else:
          try:
            parts.append(format(x, spec))
          except (TypeError, ValueError) as e:
            raise E.KernelTypeError(f"cannot format {self.text(v.value)} with {spec!r}: {e}",
                                    self.loc(v.value), hint="use a format spec that suits the value") from None
    else:
      x = self.eval(a)
      parts.append(x if is_value(x) else str(x))
  if end and end != "\n":
    parts.append(end.rstrip("\n"))
  debug.print_(self.cx(node), parts)



def _static_text(self, node, value_node, what):
  """A print keyword (sep, end) that must be static text."""
  x = self.eval(value_node)
  if is_value(x):
    raise E.KernelTypeError(f"print's {what} must be a static string", self.loc(node),
                            hint=f"{what}=' '")
  return x



def trace_breakpoint(self, node):
  """`breakpoint()`: the names bound here, for interpret mode to show."""
  if node.args or node.keywords:
    self.unsupported(node, "breakpoint with arguments")
  names, values = [], []
  for name, v in self.env.items():
    if is_value(v) or isinstance(v, (int, float, bool, str, tuple)):
      names.append(name)
      values.append(v)
  debug.breakpoint_(self.cx(node), names, values)
