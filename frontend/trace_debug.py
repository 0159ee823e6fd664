"""Tracing `print(...)` and `breakpoint()` in a kernel (`self` is the frontend.tracer.Tracer):
the statements become ops of the debugging family (frontend/ops/debug.py)."""
from __future__ import annotations

import ast

from . import errors as E
from .ops import debug
from .ops.base import is_value, kind_of


def trace_print(self, node):
  """`print(...)` in a kernel: static text and register values, printed by the GPU."""
  kw = {}                   # sep= and end=: their values, written out or spread from **opts
  for k in node.keywords:
    m = {k.arg: k.value} if k.arg is not None else self.eval(k.value)
    if not isinstance(m, dict) or not all(isinstance(n, str) for n in m):
      raise E.KernelTypeError(f"**{self.text(k.value)} spreads a dict of names, not {kind_of(m)}",
                              self.loc(k.value), hint="pass sep= and end= by name")
    for n, v in m.items():
      kw[n] = v if k.arg is not None else _Static(v)
  unknown = set(kw) - {"sep", "end"}
  if unknown:
    self.unsupported(node, f"print with {', '.join(sorted(unknown))}",
                     hint="print(a, b, sep=' ', end='\\n') with values and f-strings")
  sep = _static_text(self, node, kw["sep"], "sep") if "sep" in kw else " "
  end = _static_text(self, node, kw["end"], "end") if "end" in kw else ""
  items = []                # (node, None), or (None, value) for each element *parts spreads
  for a in node.args:
    if isinstance(a, ast.Starred):
      items += [(None, v) for v in self.spread_sequence(a, "print(*parts) spreads a static tuple or list")]
    else:
      items.append((a, None))
  parts = []
  for i, (a, x) in enumerate(items):
    if i:
      parts.append(sep)
    if a is None:
      parts.append(x if is_value(x) else str(x))
    elif isinstance(a, ast.JoinedStr):
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



class _Static:
  """A print keyword's value spread from a dict (**opts): evaluated already."""
  def __init__(self, value):
    self.value = value


def _static_text(self, node, value_node, what):
  """A print keyword (sep, end) that must be static text."""
  x = value_node.value if isinstance(value_node, _Static) else self.eval(value_node)
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
