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
    a = as_fstring(_spread_format(self, a)) or a     # "{} of {}".format(i, n), "%d: %.3f" % (i, s): f-strings
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



# jax.debug.print's keywords that choose how JAX orders or routes its callback, not what it prints
_DEBUG_PRINT_FLAGS = ("ordered", "partitioned", "skip_format_check", "_use_logging")


_JAX_DEBUG = {("jax._src.debugging", "debug_print"): "jax.debug.print",
              ("jax._src.pallas.primitives", "debug_print"): "pl.debug_print",
              ("mgpu_dsl.frontend.language", "debug_print"): "ml.debug_print",
              ("mgpu_dsl.frontend.language", "static_print"): "ml.static_print",
              ("mgpu_dsl.frontend.language", "device_print"): "ml.device_print",
              ("mgpu_dsl.frontend.language", "assume"): "ml.assume",
              ("jax._src.debugger.core", "breakpoint"): "jax.debug.breakpoint",
              ("jax._src.debugging", "debug_callback"): "jax.debug.callback",
              ("jax._src.callback", "pure_callback"): "jax.pure_callback",
              ("jax._src.callback", "io_callback"): "io_callback"}


def jax_debug_fn(fn) -> str | None:
  """The name a user reaches one of JAX's debugging functions by (`jax.debug.print`, Pallas's `pl.debug_print`,
  `jax.debug.breakpoint`, the callbacks); None for any other function. Called while tracing, JAX's own would run
  then (a breakpoint stopped the compile in JAX's debugger; a print of static text printed once, at the compile)."""
  return _JAX_DEBUG.get((getattr(fn, "__module__", None), getattr(fn, "__name__", None)))


def trace_jax_debug(self, node, shown):
  """jax.debug.print / pl.debug_print: the print they mean; jax.debug.breakpoint(): breakpoint() (its keywords
  choose JAX's debugger's frames and order: static, unused); a callback: an error, there is no Python to call."""
  if shown in ("ml.static_print", "ml.device_print", "ml.assume"):
    return _trace_triton_debug(self, node, shown)
  if shown.endswith("print"):
    return trace_debug_print(self, node, shown)
  if shown == "jax.debug.breakpoint":
    for k in node.keywords:
      _static_flag(self, k, shown)
    if node.args:
      self.unsupported(node, "jax.debug.breakpoint with positional arguments")
    return trace_breakpoint(self, ast.copy_location(ast.Call(func=node.func, args=[], keywords=[]), node))
  raise E.KernelTypeError(
      f"{shown} cannot run inside a kernel: the kernel runs on the GPU, where there is no Python to call back",
      self.loc(node), hint="print the values, print(f\"v={v}\") or jax.debug.print(\"v={}\", v) (on the GPU and in"
                           " interpret mode); stop at breakpoint() in interpret mode; or call back outside the kernel,"
                           " on its outputs")


def _trace_triton_debug(self, node, shown):
  """Triton's `tl.static_print(...)` and `tl.device_print(prefix, *args)`: the `print(...)` they mean (a static
  value prints while tracing, a run-time one per program); `tl.assume(cond)`: its condition traced, a boolean, and
  nothing more (probe 60b; each was MG002)."""
  name = shown.split(".")[1]
  if name == "assume":
    if len(node.args) != 1 or node.keywords:
      self.unsupported(node, "ml.assume of other than one condition", hint="ml.assume(pid >= 0)")
    from .dtypes import DType
    from .types import resolve
    cond = self.eval(node.args[0])
    if not (isinstance(cond, bool) or is_value(cond) and resolve(cond.type.dtype) == DType.bool_):
      raise E.KernelTypeError(f"ml.assume takes a condition (a comparison), got {kind_of(cond)}",
                              self.loc(node.args[0]), hint="ml.assume(pid >= 0)")
    return None
  if name == "static_print":        # once, while tracing, as Triton's prints at its compile (a value: its type)
    kw = {k.arg: self.eval(k.value) for k in node.keywords if k.arg in ("sep", "end")}
    print(*[str(v.type) if is_value(v) else v for v in (self.eval(a) for a in node.args)], **kw)
    return None
  keywords = list(node.keywords)
  if name == "device_print":
    for k in keywords:
      if k.arg != "hex" or self.eval(k.value) is not False:
        raise E.KernelTypeError(f"ml.device_print takes no keyword {k.arg!r} here", self.loc(k),
                                hint="print the values as they are, ml.device_print(\"v\", v); for their bits,"
                                     " print v.to(tl.int32, bitcast=True)")
    keywords = []
  printed = ast.copy_location(ast.Call(func=ast.copy_location(ast.Name(id="print", ctx=ast.Load()), node),
                                       args=list(node.args), keywords=keywords), node)
  return trace_print(self, printed)


def _static_flag(self, k, shown):
  """A keyword of JAX's debugging functions that chooses how JAX runs them (`ordered=True`): static, unused."""
  x = self.eval(k.value)
  if is_value(x):
    raise E.KernelTypeError(f"{shown}'s {k.arg or '**'}= must be static, got {kind_of(x)}", self.loc(k.value),
                            hint=f"leave it out: {shown}'s flags choose how JAX orders its callbacks, which a kernel"
                                 " has none of")


def trace_debug_print(self, node, shown):
  """`jax.debug.print("i={} m={m:.3f}", i, m=v)` (or Pallas's `pl.debug_print(fmt, *args)`) in a kernel: the
  `print(fmt.format(...))` it means, so it prints per program in interpret mode and on the GPU as print does
  (its fields are an f-string's). Its ordering flags (`ordered=`) are static and change nothing here."""
  from .lax_hints import debug_print_hint
  keywords = []
  for k in node.keywords:
    if k.arg in _DEBUG_PRINT_FLAGS and shown == "jax.debug.print":
      _static_flag(self, k, shown)
    else:
      keywords.append(k)
  fmt_node = node.args[0] if node.args else next((k.value for k in keywords if k.arg == "fmt"), None)
  keywords = [k for k in keywords if k.arg != "fmt"]
  fmt = None if fmt_node is None else self.eval(fmt_node)
  if not isinstance(fmt, str):
    raise E.KernelTypeError(
        f"{shown} takes a format string first, got {kind_of(fmt) if fmt_node is not None else 'none'}",
        self.loc(fmt_node if fmt_node is not None else node),
        hint=f'{shown}("i={{}} x={{}}", i, x), or print(...) with values and f-strings')
  args = node.args[1:] if node.args and node.args[0] is fmt_node else node.args
  args, keywords = _spread(self, args, keywords)
  text = ast.copy_location(ast.Constant(value=fmt), fmt_node)
  call = ast.copy_location(ast.Call(func=ast.copy_location(ast.Attribute(value=text, attr="format",
                                                                         ctx=ast.Load()), node),
                                    args=list(args), keywords=keywords), node)
  joined = as_fstring(call)
  if joined is None:
    pos = [repr(fmt)] + [self.text(a) for a in args]
    raise E.KernelTypeError(f"{shown}'s format {fmt!r} is not one a kernel reads with these arguments",
                            self.loc(node), hint=debug_print_hint(pos, {k.arg: self.text(k.value) for k in keywords
                                                                        if k.arg})
                            or 'fields "{}", "{0}" or "{name}" with a spec ("{:.3f}"), one per argument: or'
                               ' write print(f"...") with the values in the f-string')
  printed = ast.copy_location(ast.Call(func=ast.copy_location(ast.Name(id="print", ctx=ast.Load()), node),
                                       args=[joined], keywords=[]), node)
  return trace_print(self, printed)


def _spread_format(self, node):
  """`"...".format(*pair, **named)` and `"%d %d" % pair` of a tuple the kernel holds: the arguments spread
  (`pair[0], pair[1]`), so as_fstring reads one per field (probe 50d); any other node as it is."""
  import copy
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" and \
      isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
    node = copy.copy(node)
    node.args, node.keywords = _spread(self, node.args, node.keywords)
  elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and \
      isinstance(node.left.value, str) and not isinstance(node.right, (ast.Tuple, ast.Constant)):
    held = self.eval(node.right)
    if isinstance(held, (tuple, list)):
      node = copy.copy(node)
      node.right = ast.copy_location(ast.Tuple(elts=[_item(node.right, i) for i in range(len(held))],
                                               ctx=ast.Load()), node.right)
  return node


def _item(value, key):
  """`value[key]`, at `value`'s place."""
  return ast.copy_location(ast.Subscript(value=value, slice=ast.copy_location(ast.Constant(value=key), value),
                                         ctx=ast.Load()), value)


def _spread(self, args, keywords):
  """`*pair` and `**named` of a print's arguments, a tuple or list (a dict of str keys) the kernel holds: their
  elements as arguments of their own, `pair[0], pair[1]` (`named["m"]`), so each field reads one; others kept
  (the format's MG003 then names them)."""
  item = _item
  spread = []
  for a in args:
    held = self.eval(a.value) if isinstance(a, ast.Starred) else None
    if isinstance(held, (tuple, list)):
      spread += [item(a.value, i) for i in range(len(held))]
    else:
      spread.append(a)
  named = []
  for k in keywords:
    held = self.eval(k.value) if k.arg is None else None
    if isinstance(held, dict) and all(isinstance(n, str) and n.isidentifier() for n in held):
      named += [ast.copy_location(ast.keyword(arg=n, value=item(k.value, n)), k) for n in held]
    else:
      named.append(k)
  return spread, named


def as_fstring(node) -> ast.JoinedStr | None:
  """`"...".format(args)` or `"..." % args` of a literal format string, as the f-string it means (each
  field the argument's own expression, so run-time values print as an f-string's do); None for any
  other expression, or a format this does not read (an attribute or index in a field, a `*` spread,
  a `%(name)s` mapping, a nested spec)."""
  import string
  if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
      and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
      return None
    named, auto, values = {k.arg: k.value for k in node.keywords}, 0, []
    try:
      fields = list(string.Formatter().parse(node.func.value.value))
    except ValueError:
      return None
    for text, field, spec, conv in fields:
      if text:
        values.append(text)
      if field is None:
        continue
      if field == "":
        field, auto = str(auto), auto + 1
      arg = (node.args[int(field)] if field.isdigit() and int(field) < len(node.args) else named.get(field))
      if arg is None or "{" in (spec or "") or conv not in (None, "r", "s", "a"):
        return None
      values.append((arg, conv, spec))
    return _joined(node, values)
  if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant)
      and isinstance(node.left.value, str)):
    import re
    args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
    if any(isinstance(a, ast.Starred) for a in args):
      return None
    values, k, pos = [], 0, 0
    fmt = node.left.value
    for m in re.finditer(r"%([-+ 0#]*)(\d*)(?:\.(\d+))?([diouxXeEfFgGsr%])", fmt):
      values.append(fmt[pos:m.start()])
      pos = m.end()
      flags, width, prec, conv = m.groups()
      if conv == "%":
        values.append("%")
        continue
      if k >= len(args):
        return None
      align = "<" if "-" in flags else ""
      sign = "+" if "+" in flags else " " if " " in flags else ""
      zero = "0" if "0" in flags and not align else ""
      spec = (f"{align}{sign}{'#' if '#' in flags else ''}{zero}{width}{'.' + prec if prec else ''}"
              f"{'d' if conv in 'iu' else '' if conv in 'sr' else conv}")
      values.append((args[k], "r" if conv == "r" else None, spec))
      k += 1
    if k != len(args) or "%" in fmt[pos:]:
      return None
    values.append(fmt[pos:])
    return _joined(node, values)
  return None


def _joined(node, values):
  """An ast.JoinedStr at `node` of text and (expression, conversion, spec) fields."""
  out = []
  for v in values:
    if isinstance(v, str):
      if v:
        out.append(ast.copy_location(ast.Constant(value=v), node))
      continue
    arg, conv, spec = v
    fs = (ast.copy_location(ast.JoinedStr(values=[ast.copy_location(ast.Constant(value=spec), node)]), node)
          if spec else None)
    out.append(ast.copy_location(ast.FormattedValue(value=arg, conversion=ord(conv) if conv else -1,
                                                    format_spec=fs), arg))
  return ast.copy_location(ast.JoinedStr(values=out), node)


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
