"""Hints that rewrite the user's grid callable (read from the decorator's line or the callable's own
source): a grid axis that came out 0, wrapped in max(1, ...) or its floor division rounded up.
"""
from __future__ import annotations

import inspect


def callable_texts(loc, fn) -> list[str]:
  """Where a callable argument's source may be read: the decorator's argument where it is written on
  one line (`grid=lambda ...`), then the callable's own source."""
  texts = []
  if loc.end_lineno == loc.lineno and loc.source_line:
    texts.append(loc.source_line[loc.col_offset:loc.end_col_offset].split("=", 1)[-1])
  try:
    texts.append(inspect.getsource(fn).strip())
  except (OSError, TypeError):
    pass
  return texts


def _grid_lambdas(loc, fn, rank):
  """The user's grid callable as an ast.Lambda whose body is a tuple of `rank` axes, from the
  decorator's line (`grid=lambda ...` written on one line) or else the callable's own source:
  each candidate, fresh (callers rewrite it)."""
  import ast
  for text in callable_texts(loc, fn):
    try:
      found = [n for n in ast.walk(ast.parse(text.rstrip(",)") if text.count("(") < text.count(")") else text))
               if isinstance(n, ast.Lambda)]
    except SyntaxError:
      continue
    if len(found) == 1 and isinstance(found[0].body, ast.Tuple) and len(found[0].body.elts) == rank:
      yield found[0]


def one_program_grid(loc, grid, fn) -> str:
  """The user's grid callable with each axis that came out 0 wrapped in max(1, ...); in words
  where its source is not one lambda."""
  import ast
  zero = [a for a, n in enumerate(grid) if n == 0]
  words = (f"a grid with each axis that came out 0 (axis {', '.join(map(str, zero))} of {tuple(grid)}) wrapped"
           f" in max(1, ...), e.g. max(1, ml.cdiv(x.shape[0], 128))")
  for lam in _grid_lambdas(loc, fn, len(grid)):
    lam.body.elts = [ast.Call(ast.Name("max", ast.Load()), [ast.Constant(1), e], []) if n == 0 else e
                     for e, n in zip(lam.body.elts, grid)]
    return "grid=" + ast.unparse(lam)
  return words


def rounded_up_grid(loc, grid, fn) -> str:
  """The user's grid callable with the floor divisions of each axis that came out 0 rounded up
  (`x.shape[0] // 128` -> `ml.cdiv(x.shape[0], 128)`); else an example in its own parameters' names
  (a grid callable takes every input: `lambda x:` fails for a kernel of two)."""
  import ast
  import inspect
  zero = [a for a, n in enumerate(grid) if n == 0]

  class RoundUp(ast.NodeTransformer):
    def visit_BinOp(self, node):
      node = self.generic_visit(node)
      if not isinstance(node.op, ast.FloorDiv):
        return node
      return ast.Call(ast.Attribute(ast.Name("ml", ast.Load()), "cdiv", ast.Load()), [node.left, node.right], [])

  for lam in _grid_lambdas(loc, fn, len(grid)):
    before = [ast.dump(e) for e in lam.body.elts]
    lam.body.elts = [RoundUp().visit(e) if a in zero else e for a, e in enumerate(lam.body.elts)]
    if [ast.dump(e) for e in lam.body.elts] != before:
      return "grid=" + ast.unparse(lam)
  try:
    names = [p.name for p in inspect.signature(fn).parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  except (TypeError, ValueError):
    names = []
  params = ", ".join(names) or "x"
  return f"grid=lambda {params}: (ml.cdiv({names[0] if names else 'x'}.shape[0], 128),)"
