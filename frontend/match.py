"""`match` statements, as the if/elif chain they mean.

`match mode: case "relu": ... case "gelu" | "silu": ... case _: ...` on a constexpr (a string, an
enum member, a dtype, an int) is decided while tracing, as the `if mode == "relu": ... elif ...` it
stands for; on a run-time scalar it is that chain of run-time ifs. The rewrite happens on the parsed
function, before tracing, so every later pass sees ordinary ifs and assignments; the tests it builds
carry the patterns' positions, so a mistake is reported at the case. Literal and value patterns
(`case 0:`, `case Mode.FAST:`), `|`, `None`/`True`/`False`, captures (`case n:`, `case "a" | "b" as m:`)
and guards are supported; sequence, mapping and class patterns are not (MG001 at the pattern).
"""
from __future__ import annotations

import ast
import copy

from . import errors as E


def desugar(tree, src):
  """`tree` (a function's AST) with each `match` statement replaced by its if/elif chain."""
  if not any(isinstance(n, ast.Match) for n in ast.walk(tree)):
    return tree
  return _Rewrite(src).visit(tree)


class _Rewrite(ast.NodeTransformer):
  def __init__(self, src):
    self.src = src

  def visit_Match(self, node):
    self.generic_visit(node)          # matches inside the cases' bodies first
    chain: list = []
    for case in reversed(node.cases):
      test, names = self._pattern(case.pattern, node.subject)
      binds = [ast.copy_location(ast.Assign(targets=[ast.copy_location(ast.Name(id=n, ctx=ast.Store()), case.pattern)],
                                            value=copy.deepcopy(node.subject)), case.pattern) for n in names]
      if case.guard is not None:      # the guard reads the captures: the subject stands for them there
        guard = _Substitute(set(names), node.subject).visit(copy.deepcopy(case.guard))
        test = guard if test is None else _at(ast.BoolOp(op=ast.And(), values=[test, guard]), case.pattern)
      body = binds + case.body
      chain = body if test is None else [_at(ast.If(test=test, body=body, orelse=chain), case.pattern)]
    return chain or [_at(ast.Pass(), node)]

  def _pattern(self, p, subject):
    """(the test of pattern `p` on `subject`, or None where it always matches; the names it binds)."""
    if isinstance(p, ast.MatchValue):
      return _at(ast.Compare(left=copy.deepcopy(subject), ops=[ast.Eq()], comparators=[p.value]), p), []
    if isinstance(p, ast.MatchSingleton):
      return _at(ast.Compare(left=copy.deepcopy(subject), ops=[ast.Is()],
                             comparators=[_at(ast.Constant(value=p.value), p)]), p), []
    if isinstance(p, ast.MatchAs):
      if p.pattern is None:
        return None, [p.name] if p.name else []
      test, names = self._pattern(p.pattern, subject)
      return test, names + [p.name]
    if isinstance(p, ast.MatchOr):
      parts = [self._pattern(q, subject) for q in p.patterns]
      if any(names for _, names in parts):
        self._unsupported(p, "a capture inside an or-pattern")
      if any(test is None for test, _ in parts):
        return None, []
      return _at(ast.BoolOp(op=ast.Or(), values=[test for test, _ in parts]), p), []
    kind = {"MatchSequence": "a sequence pattern", "MatchMapping": "a mapping pattern",
            "MatchClass": "a class pattern", "MatchStar": "a starred pattern"}.get(type(p).__name__, "this pattern")
    self._unsupported(p, kind)

  def _unsupported(self, p, what):
    raise E.UnsupportedSyntaxError(
        f"{what} is not supported in a kernel's match", self.src.loc(p),
        hint="a kernel's match compares its subject with values (`case \"relu\":`, `case Mode.FAST:`, `case 0 | 1:`,"
             " `case _:`), as an if/elif chain would; test a tuple's parts with an if instead: if len(t) == 2:"
             " a, b = t")


class _Substitute(ast.NodeTransformer):
  """Reads of the names `names` replaced by (copies of) `subject`."""

  def __init__(self, names, subject):
    self.names, self.subject = names, subject

  def visit_Name(self, node):
    if node.id in self.names and isinstance(node.ctx, ast.Load):
      return copy.deepcopy(self.subject)
    return node


def _at(node, where):
  """`node` with `where`'s position (and its children without one given it too)."""
  ast.copy_location(node, where)
  for child in ast.walk(node):
    if not hasattr(child, "lineno"):
      ast.copy_location(child, where)
  return node
