"""Hints that rewrite the user's grid callable (read from the decorator's line or the callable's own
source): a grid axis that came out 0, wrapped in max(1, ...) or its floor division rounded up, a float
count made an int; and the hint of an out_shape that gives no arrays.
"""
from __future__ import annotations

import inspect
import textwrap


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


def no_work(loc, grid, fn) -> str | None:
  """The text of the grid callable's axes that came out 0 where none of them rounds down (no `//`: `ml.cdiv(n, 256)`
  or `rp.shape[0] - 1` of a CSR's row pointers counts items, of which there are none: an empty graph's degree
  histogram, probe 71a), else None: an axis of `x.shape[0] // 128` that gives 0 for 100 rows is the mistake MG007's
  hint rounds up."""
  import ast
  zero = [a for a, n in enumerate(grid) if n == 0]
  rounds = lambda e: isinstance(e, ast.Constant) or any(isinstance(n, (ast.FloorDiv, ast.Div)) for n in ast.walk(e))
  for lam in _grid_lambdas(loc, fn, len(grid)):
    axes = [lam.body.elts[a] for a in zero]
    return None if any(map(rounds, axes)) else ", ".join(ast.unparse(e) for e in axes)
  try:                  # (a def: no `//` or `/` anywhere in it, each return a tuple whose zero axes are no constant)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
  except (OSError, TypeError, SyntaxError):
    return None
  defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
  rets = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return)]
  if len(defs) != 1 or rounds(defs[0]) or not rets or not all(
      isinstance(r, ast.Tuple) and len(r.elts) == len(grid) and not any(rounds(r.elts[a]) for a in zero) for r in rets):
    return None
  return ", ".join(ast.unparse(rets[-1].elts[a]) for a in zero) + f" of {defs[0].name}"


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


def launch_hint(what, x, runtime, zero, computed, loc, fn) -> str:
  """The hint of a grid (or block, cluster) that is not 1 to 3 positive ints: one known only at run
  time, an axis of 0, a float count (`x.shape[0] / 64`, `np.ceil(n / 64)`), or another value."""
  if runtime:
    return (f"compute the {what} from shapes and constexprs: a count known when compiling is a constexpr"
            f" (def k(x, out, *, n: ml.constexpr), called k(x, n=4)), then {what}=lambda x, *, n: (n,)")
  if zero:
    return ("the grid callable gave no programs along an axis for these inputs (fewer rows than one"
            f" program's tile, with //): round up, {rounded_up_grid(loc, x, fn) if fn else _CDIV},"
            " and mask the last tile's accesses (or pad the input)" if computed else
            f"a grid has at least one program along each axis: grid=(1,), or a callable that computes it"
            f" from the inputs, {_CDIV}")
  if _float_counts(x) and what == "grid":
    fixed = (counted_grid(loc, x, fn) if fn else
             f"grid={tuple(int(i) if float(i).is_integer() else i for i in x)!r}"
             if all(float(i).is_integer() for i in x) else _CDIV)
    return f"a count of programs is an int: divide with // (or round up with ml.cdiv), {fixed}"
  return (f"{what}=(n,), (n, m) or (n, m, k) of positive ints; a {what} callable returns one, e.g. "
          + ("grid=lambda x: (x.shape[0] // 128,)" if what == "grid" else f"{what}=(2,)"))


_CDIV = "grid=lambda x: (ml.cdiv(x.shape[0], 128),)"


def _float_counts(x) -> bool:
  import numbers
  return isinstance(x, (tuple, list)) and any(
      isinstance(i, numbers.Real) and not isinstance(i, numbers.Integral) for i in x)


def float_constexpr(e, grid, constexprs, fn=None):
  """`e` (the LaunchConfigError of a grid of float counts) with the hint naming the float constexprs they were
  computed from (`bm=64.0` into `x.shape[0] // bm`, which divides with // already): pass them as ints. Only
  those the grid callable `fn` names (a float `scale=2.0` default it never reads is no cause)."""
  import numpy as np
  from .signature import parameters
  params = parameters(fn) if fn is not None else None
  reads = (None if params is None or any(p.kind == p.VAR_KEYWORD for p in params)
           else {p.name for p in params})
  given = [(k, v) for k, v in constexprs.items() if isinstance(v, (float, np.floating)) and float(v).is_integer()
           and (reads is None or k in reads)]
  if _float_counts(grid) and given:
    many = len(given) > 1
    e.hint = (f"{', '.join(f'{k}={v!r}' for k, v in given)} {'are floats' if many else 'is a float'}, so the counts"
              f" computed from {'them' if many else 'it'} are floats: pass {', '.join(f'{k}={int(v)}' for k, v in given)}"
              f" ({'ints' if many else 'an int'})")
  return e


def counted_grid(loc, grid, fn) -> str:
  """The user's grid callable with its float counts made ints: a true division `a / b` (and a
  ceiling of one, `math.ceil(a / b)`, `np.ceil(...)`, `jnp.ceil(...)`) becomes ml.cdiv(a, b)."""
  import ast

  class Count(ast.NodeTransformer):
    def visit_Call(self, node):
      f = node.func
      name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
      if name == "ceil" and len(node.args) == 1 and isinstance(node.args[0], ast.BinOp) and \
          isinstance(node.args[0].op, ast.Div):
        return self.visit(node.args[0])
      return self.generic_visit(node)

    def visit_BinOp(self, node):
      node = self.generic_visit(node)
      if not isinstance(node.op, ast.Div):
        return node
      return ast.Call(ast.Attribute(ast.Name("ml", ast.Load()), "cdiv", ast.Load()), [node.left, node.right], [])

  for lam in _grid_lambdas(loc, fn, len(grid)):
    before = ast.dump(lam)
    lam = Count().visit(lam)
    if ast.dump(lam) != before:
      return "grid=" + ast.unparse(lam)
  return rounded_up_grid(loc, [0] * len(grid), fn)


def out_shape_hint(out, inputs) -> str:
  """out_shape gave something else than arrays: a shape alone (`lambda x: x.shape`, `(256, 128)`) is
  given its dtype, that of the first input; else the forms out_shape takes."""
  import numbers
  x = inputs[0] if inputs else None
  if isinstance(out, (tuple, list)) and out and all(
      isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in out):
    return (f"{tuple(int(d) for d in out)} is a shape: give it a dtype, out_shape=lambda "
            f"{', '.join(inputs) or 'x'}: jax.ShapeDtypeStruct({tuple(int(d) for d in out)}, {x or 'x'}.dtype)"
            f" ({x}.shape for the first input's shape)" if x else
            f"{tuple(int(d) for d in out)} is a shape: give it a dtype, jax.ShapeDtypeStruct({tuple(out)}, jnp.float32)")
  return "out_shape=jax.ShapeDtypeStruct(shape, dtype), a tuple of them, or a callable of the inputs returning one"
