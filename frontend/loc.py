"""Source locations: every typed-IR op carries one (the user's file, line, column)."""
from __future__ import annotations

import dataclasses
import functools


@dataclasses.dataclass(frozen=True)
class Loc:
  filename: str
  lineno: int
  col_offset: int           # 0-based, as in Python's ast
  end_lineno: int | None = None
  end_col_offset: int | None = None
  source_line: str = ""     # the text of line `lineno`, for rendering

  def __str__(self):
    return f"{self.filename}:{self.lineno}:{self.col_offset}"

  @property
  def short(self) -> str:
    import os
    return f"{os.path.basename(self.filename)}:{self.lineno}"


UNKNOWN = Loc("<unknown>", 0, 0)


def expr_of(text):
  """`text` (the user's, as written: `x.at[i, :]`, `ml.sum(v, axis=1)`) parsed as an expression, an ast node;
  None where it is not one (or not a string)."""
  import ast
  if not isinstance(text, str):
    return None
  try:
    return ast.parse(text.strip(), mode="eval").body
  except (SyntaxError, ValueError):
    return None


def expr_at(loc):
  """The expression written at `loc` (on one line of the user's source) as an ast node, or None (`loc` None,
  or on several lines): hints quote the user's own text (a call's arguments, a subscript's indices)."""
  line, a, b = getattr(loc, "source_line", ""), getattr(loc, "col_offset", 0), getattr(loc, "end_col_offset", None)
  if not line or b is None or getattr(loc, "end_lineno", None) != getattr(loc, "lineno", None):
    return None
  return expr_of(line[a:b])


def call_at(loc):
  """The call expression written at `loc` (one line of the user's source) as an ast.Call, or
  None: hints quote the user's own arguments (the mask of their store, the ml function called)."""
  import ast
  node = expr_at(loc)
  return node if isinstance(node, ast.Call) else None


def ours(frame, skip=()) -> bool:
  """Whether `frame` runs code of mgpu_dsl (or of the packages `skip`, e.g. jax), not the user's."""
  import os
  import sys
  dirs = {os.path.dirname(os.path.abspath(__file__)) + os.sep} | {
      os.path.dirname(os.path.abspath(m.__file__)) + os.sep
      for m in [*(sys.modules.get(n) for n in ("mgpu_dsl", "mgpu_dsl.lowering")), *skip]
      if getattr(m, "__file__", None)}
  return os.path.abspath(frame.f_code.co_filename).startswith(tuple(dirs))


def package_file(filename: str) -> bool:
  """Whether `filename` is one of mgpu_dsl's own sources (a helper a jnp form calls), not the user's."""
  import os
  import sys
  dirs = {os.path.dirname(os.path.abspath(__file__)) + os.sep} | {
      os.path.dirname(os.path.abspath(m.__file__)) + os.sep
      for m in (sys.modules.get(n) for n in ("mgpu_dsl", "mgpu_dsl.lowering")) if getattr(m, "__file__", None)}
  return os.path.abspath(filename).startswith(tuple(dirs))


def user_loc(skip=(), frame=None) -> "Loc":
  """The statement of the first frame outside mgpu_dsl (and the packages `skip`, e.g. jax, whose
  transformations call back into it): where the user called an ml.* function, an @ml.inline helper
  outside a kernel, mg.bench, a kernel. `frame`: where to start looking (the caller's frame)."""
  import linecache
  import sys
  f = frame or sys._getframe(1)
  while f is not None and (ours(f, skip) or skip and _python_library(f)):
    f = f.f_back
  if f is None:
    return UNKNOWN
  line = linecache.getline(f.f_code.co_filename, f.f_lineno)
  col = len(line) - len(line.lstrip()) if line.strip() else 0
  end = len(line.rstrip()) if line.strip() else None
  pos = _call_positions(f)        # the call itself, not its whole statement (Python 3.11's positions)
  if pos is not None and None not in pos and line.strip() and pos[0] <= f.f_lineno <= pos[1]:
    first = linecache.getline(f.f_code.co_filename, pos[0])
    return Loc(f.f_code.co_filename, pos[0], pos[2], pos[1], pos[3], source_line=first)
  return Loc(f.f_code.co_filename, f.f_lineno, col, f.f_lineno, end, source_line=line)


def outside_loc() -> "Loc":
  """Where the user called an ml.* function or an @ml.inline helper outside a kernel: the first frame outside
  mgpu_dsl, JAX (once it is loaded: `jax.jit(helper)(x)`, `jax.vmap(helper)` call it from JAX's tracing, and the
  error pointed into JAX's partial_eval.py) and Python's own library."""
  import sys
  jax = sys.modules.get("jax")      # (never imported here: the frontend runs without JAX)
  return user_loc(skip=(jax,) if jax is not None else (), frame=sys._getframe(1))


def _python_library(frame) -> bool:
  """Whether `frame` runs Python's own library (contextlib's wrapper of a function JAX decorates with a
  context manager, functools'), never the user's code; its site-packages are not part of it."""
  import os
  path, lib = os.path.abspath(frame.f_code.co_filename), _stdlib()
  return path.startswith(lib) and not {"site-packages", "dist-packages"} & set(path[len(lib):].split(os.sep))


@functools.lru_cache(maxsize=1)
def _stdlib() -> str:
  import os
  import sysconfig
  return os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def _call_positions(frame):
  """(lineno, end_lineno, col, end_col) of the instruction a frame is executing, if known."""
  try:
    import inspect
    p = inspect.getframeinfo(frame, context=0).positions
    return (p.lineno, p.end_lineno, p.col_offset, p.end_col_offset) if p is not None else None
  except (AttributeError, ValueError, TypeError):
    return None


def sum_call_in_f32(loc) -> str:
  """The sum's call at `loc` as the user wrote it, with dtype=jnp.float32 (the hint of interpret mode's
  16-bit sum warning, lowering/interpret_overflow.py: the frontend reads the source, the lowering only asks)."""
  import ast
  import copy
  node = call_at(loc)
  if node is None or any(k.arg == "dtype" for k in node.keywords):
    return "ml.sum(v, dtype=jnp.float32)"
  node = copy.deepcopy(node)
  node.keywords.append(ast.keyword("dtype", ast.parse("jnp.float32", mode="eval").body))
  return ast.unparse(node)


def called_text(loc, default):
  """(the function's text, its first argument's text) of the call at `loc`: `jnp.prod(v)`, `jax.lax.reduce_prod(v,
  ...)` (a module's function, however deep), or `v.cumprod()` (a method: its receiver); `default` and None where
  no call is written there (interpret mode's MG953 of a scan, lowering/interpret_pad_scans.py, asks)."""
  import ast
  node = call_at(loc)
  if node is None:
    return default, None
  f = node.func
  root = f
  while isinstance(root, ast.Attribute):
    root = root.value
  module = isinstance(root, ast.Name) and root.id in ("ml", "tl", "jnp", "np", "jax", "lax")
  if isinstance(f, ast.Attribute) and not module:
    return f"{ast.unparse(f)}()", ast.unparse(f.value)
  return ast.unparse(f), ast.unparse(node.args[0]) if node.args else None
