"""Reading a Python function's source for tracing: its AST, positions in the user's file, scope."""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap

from . import errors as E
from .loc import Loc


class Source:
  """A kernel's source text and how its AST positions map to the user's file."""

  def __init__(self, filename: str, lines: list[str], first_lineno: int, indent: int):
    self.filename, self.lines = filename, lines
    self.first_lineno, self.indent = first_lineno, indent

  def loc(self, node) -> Loc:
    line = node.lineno + self.first_lineno - 1
    end = getattr(node, "end_lineno", None)
    end = end + self.first_lineno - 1 if end else None
    col = node.col_offset + self.indent
    end_col = node.end_col_offset + self.indent if getattr(node, "end_col_offset", None) is not None else None
    text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
    return Loc(self.filename, line, col, end, end_col, text)


def read_function(fn, what: str):
  """(Source, ast.FunctionDef, scope) of `fn`; `what` names the decorator, for messages."""
  code = getattr(fn, "__code__", None)
  filename = inspect.getsourcefile(fn) or getattr(code, "co_filename", "<unknown>")
  try:
    lines, first = inspect.getsourcelines(fn)
  except (OSError, TypeError) as e:
    raise E.SourceUnavailableError(
        f"cannot read the source of {fn.__qualname__}: {e}",
        Loc(filename, getattr(code, "co_firstlineno", 0), 0),
        hint="define kernels in a file or a notebook cell, not in exec() or a REPL string") from None
  text = "".join(lines)
  dedented = textwrap.dedent(text)
  indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
  file_lines = linecache.getlines(filename) or [""] * (first - 1) + lines
  src = Source(filename, [l.rstrip("\n") for l in file_lines], first, indent)
  tree = ast.parse(dedented).body[0]
  if not isinstance(tree, ast.FunctionDef):
    raise E.UnsupportedSyntaxError(f"{what} decorates a plain def function", src.loc(tree),
                                   hint="put the decorator on a `def` statement")
  if tree.name != fn.__name__:    # exec()'d code: linecache may hold some other "<string>"
    raise E.SourceUnavailableError(
        f"cannot read the source of {fn.__qualname__}: {filename}:{first} holds {tree.name}",
        Loc(filename, first, 0),
        hint="define kernels in a file or a notebook cell, not in exec() or a REPL string")
  scope = dict(fn.__globals__)
  if fn.__closure__:
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
      try:
        scope[name] = cell.cell_contents
      except ValueError:
        pass
  return src, tree, scope
