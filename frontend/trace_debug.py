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
  unknown = set(kw) - {"sep", "end", "flush"}
  if unknown:
    self.unsupported(node, f"print with {', '.join(sorted(unknown))}",
                     hint="print(a, b, sep=' ', end='\\n') with values and f-strings")
  if "flush" in kw:         # accepted: interpret mode flushes every line; the GPU's show at the kernel's end
    _static_value(self, node, kw["flush"], "flush", "flush=True")
  sep = _static_text(self, node, kw["sep"], "sep") if "sep" in kw else None
  end = _static_text(self, node, kw["end"], "end") if "end" in kw else None
  sep = " " if sep is None else sep         # None means the default, as in Python
  end = "" if end is None else end
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
        spec = _spec_text(self, v.format_spec)
        if is_value(x):         # a conversion (!r, and f"{x=}"'s) leaves a value's number as it is
          parts.append((x, spec, self.text(v.value), self.loc(v.value)) if spec else x)   # per element
        else:
          parts.append(_format_static(self, v, x, spec))
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


def _static_value(self, node, value_node, what, example):
  """A print keyword's value, which must be known while tracing."""
  x = value_node.value if isinstance(value_node, _Static) else self.eval(value_node)
  if is_value(x):
    raise E.KernelTypeError(f"print's {what} must be static, got {kind_of(x)}", self.loc(node),
                            hint=example)
  return x


def _static_text(self, node, value_node, what):
  """A print keyword (sep, end) that must be static text, or None for Python's default."""
  x = _static_value(self, node, value_node, what, f"{what}=' '")
  if x is not None and not isinstance(x, str):
    raise E.KernelTypeError(f"print's {what} must be a string or None, not {kind_of(x)}", self.loc(node),
                            hint=f"{what}=' '")
  return x


_CONVERSIONS = {ord("s"): str, ord("r"): repr, ord("a"): ascii}


def _spec_text(self, spec):
  """An f-string field's format spec, its nested fields (`{x:{width}.2f}`) filled in: they must be
  static, as the spec is fixed when compiling."""
  if spec is None:
    return ""
  text = ""
  for p in spec.values:
    if isinstance(p, ast.Constant):
      text += str(p.value)
      continue
    x = self.eval(p.value)
    if is_value(x):
      raise E.KernelTypeError(
          f"the format spec's field {{{self.text(p.value)}}} is {kind_of(x)}: a spec is fixed when compiling",
          self.loc(p.value), hint="compute the width or precision from static values (constexprs, shapes)")
    text += _format_static(self, p, x, _spec_text(self, p.format_spec))
  return text


def _format_static(self, field, x, spec):
  """A static value of an f-string field, with its conversion (!r, !s, !a) and spec, as Python."""
  try:
    return format(_CONVERSIONS.get(field.conversion, lambda v: v)(x), spec)
  except (TypeError, ValueError) as e:
    raise E.KernelTypeError(f"cannot format {self.text(field.value)} with {spec!r}: {e}",
                            self.loc(field.value), hint="use a format spec that suits the value") from None



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
