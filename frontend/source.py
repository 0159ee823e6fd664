"""Reading a Python function's source for tracing: its AST, positions in the user's file, scope.

A function's source is read once and kept (`snapshot`): at decoration for kernels (and
`@ml.inline` helpers, when the kernel that calls them is decorated in the same file), at
first read otherwise. Every later parse, retrace and cache key uses that text, so a process
compiles what Python runs even after the file is edited on disk without a reload (the
notebook situation). A file's text is recorded when a kernel in it is decorated; a function
takes the newest recorded text whose lines at its position match its code object (line
numbers and constants), and otherwise the file as it is now.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import linecache
import os
import re
import textwrap
import types
import weakref

from . import errors as E
from .loc import Loc

CHANGED = "the file changed since it was imported; reload the module to compile the new text"
_DEF = re.compile(r"^\s*(@|def\s|async\s+def\s)")


@dataclasses.dataclass(frozen=True)
class Snapshot:
  """The text of one function as Python compiled it (as far as can be told)."""
  code: object                # the code object it describes
  filename: str
  file_lines: tuple           # the whole file, lines ending in "\n"
  lines: tuple                # the function's own lines (decorators included)
  first: int                  # 1-based line of `lines[0]`
  changed: bool = False       # no recorded text matched the code: the file changed since import
  verified: bool = False      # `lines` compiled to the code's lines and constants (not only assumed)

  @property
  def text(self) -> str:
    return "".join(self.lines)


_snapshots: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_files: dict[str, list[tuple]] = {}       # filename -> texts recorded at decorations, oldest first
_FUTURE = 0
for _f in __import__("__future__").all_feature_names:
  _FUTURE |= getattr(__import__("__future__"), _f).compiler_flag


def _filename(fn) -> str:
  code = fn.__code__
  try:
    return inspect.getsourcefile(fn) or code.co_filename
  except TypeError:
    return code.co_filename


def _current_lines(fn, filename) -> tuple:
  if not (filename.startswith("<") and filename.endswith(">")):
    linecache.checkcache(filename)
  return tuple(linecache.getlines(filename, fn.__globals__))


def record_file(fn) -> None:
  """Record the text of `fn`'s file now (called when a kernel is decorated: the module is
  being executed, so its file holds what Python compiled)."""
  code = getattr(fn, "__code__", None)
  if not isinstance(code, types.CodeType):
    return
  filename = _filename(fn)
  lines = _current_lines(fn, filename)
  if lines:
    versions = _files.setdefault(filename, [])
    if not versions or versions[-1] != lines:
      versions.append(lines)


def _block(file_lines, code) -> tuple | None:
  """The lines of the def (decorators included) starting at `code.co_firstlineno`."""
  start = code.co_firstlineno - 1
  if not 0 <= start < len(file_lines) or not _DEF.match(file_lines[start]):
    return None
  try:
    return tuple(inspect.getblock(list(file_lines[start:])))
  except (IndentationError, SyntaxError, IndexError):
    return None


def _shape(code):
  lines = frozenset(l for _, _, l in code.co_lines() if l is not None)
  consts = tuple(_shape(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                 for c in code.co_consts)
  return code.co_name, lines, consts


def _matches(code, block, filename, rewritten=False) -> bool | None:
  """Whether `block` (at `code.co_firstlineno`) compiles to a function of `code`'s line numbers
  and constants; None when that cannot be told (the block does not compile on its own).
  `rewritten`: pytest rewrote the module's asserts (a kernel in a test file), which adds lines
  and constants of its own: the block's must be among the code's."""
  text = "".join(block)
  if textwrap.dedent(text) != text and code.co_firstlineno > 1:
    # a def nested in a function or class keeps its indentation, under an `if 1:` on the line before:
    # dedented, a string literal's continuation lines (a kernel's multi-line docstring) would lose
    # theirs, and its constant would no longer be the compiled one
    src = "\n" * (code.co_firstlineno - 2) + "if 1:\n" + text
  else:
    src = "\n" * (code.co_firstlineno - 1) + textwrap.dedent(text)
  module = _compiled(src, filename, code.co_flags & _FUTURE)
  if module is None:
    return None
  # The def is found by its first line, not its name: a function renamed after its def
  # (`f.__name__ = ...`, `code.replace(co_name=...)`: factory-built kernels) is still found.
  found = [c for c in module.co_consts if isinstance(c, types.CodeType)
           and c.co_firstlineno == code.co_firstlineno and c.co_name != "<lambda>"]
  if rewritten:
    return any(_within(_shape(c), _shape(code)) for c in found)
  return any(_shape(c)[1:] == _shape(code)[1:] for c in found)


@functools.lru_cache(maxsize=1024)
def _compiled(src: str, filename: str, flags: int):
  """`src` compiled (None where it does not compile): one compilation per text, as the same helper (a jnp form's,
  an inline function's) is looked up by every kernel that calls it."""
  try:
    return compile(src, filename, "exec", flags=flags, dont_inherit=True)
  except (SyntaxError, ValueError):
    return None


def _within(small, big) -> bool:
  """Each line and constant of `small` (a _shape) is in `big`, nested code by nested code."""
  (_, lines, consts), (_, big_lines, big_consts) = small, big
  if not lines <= big_lines:
    return False
  nested = [c for c in big_consts if isinstance(c, tuple) and len(c) == 3 and isinstance(c[1], frozenset)]
  return all(any(_within(c, b) for b in nested) if isinstance(c, tuple) and len(c) == 3 and isinstance(c[1], frozenset)
             else c in big_consts for c in consts)


def snapshot(fn, *, record: bool = False) -> Snapshot | None:
  """The kept source of the function `fn` (read now if it was not yet); None when it has none.
  `record`: also record its file's text now (at a kernel's decoration)."""
  code = getattr(fn, "__code__", None)
  if not isinstance(code, types.CodeType) or not isinstance(fn, types.FunctionType):
    return None
  snap = _snapshots.get(fn)
  if snap is not None and snap.code is code:
    return snap
  if record:
    record_file(fn)
  filename = _filename(fn)
  current = _current_lines(fn, filename)
  candidates = list(reversed(_files.get(filename, []))) + [current]
  snap = None
  for file_lines in candidates:
    block = _block(file_lines, code)
    matched = (_matches(code, block, filename, "@py_builtins" in getattr(fn, "__globals__", {}))
               if block is not None else False)
    if matched is not False:
      snap = Snapshot(code, filename, file_lines, block, code.co_firstlineno, verified=bool(matched))
      break
  if snap is None:
    # No recorded text matches the code: a lambda (its line is not a def), source that only
    # inspect finds (a zip import, a REPL), or a file edited since Python compiled it.
    try:
      lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
      return None
    file_lines = current if len(current) >= first - 1 + len(lines) else tuple([""] * (first - 1) + lines)
    snap = Snapshot(code, filename, file_lines, tuple(lines), first,
                    changed=code.co_name != "<lambda>" and bool(current) and os.path.isfile(filename))
  _snapshots[fn] = snap
  return snap


class Source:
  """A kernel's source text and how its AST positions map to the user's file."""

  def __init__(self, filename: str, lines: list[str], first_lineno: int, indent: int):
    self.filename, self.lines = filename, lines
    self.first_lineno, self.indent = first_lineno, indent

  def _column(self, line: int, offset: int) -> int:
    """ast's UTF-8 byte offset (in the dedented text) as a character column of the file's line."""
    text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
    raw = offset + self.indent
    if text.isascii():
      return raw
    data = text.encode("utf-8")
    return len(data[:raw].decode("utf-8", "replace")) + max(0, raw - len(data))

  def loc(self, node) -> Loc:
    line = node.lineno + self.first_lineno - 1
    end = getattr(node, "end_lineno", None)
    end = end + self.first_lineno - 1 if end else None
    col = self._column(line, node.col_offset)
    end_col = (self._column(end or line, node.end_col_offset)
               if getattr(node, "end_col_offset", None) is not None else None)
    text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
    return Loc(self.filename, line, col, end, end_col, text)

  def after(self, node) -> str:
    """The text after `node` on the line where it ends (`.exp2(x)` after `ml.math`), for hints."""
    loc = self.loc(node)
    line = loc.end_lineno or loc.lineno
    text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
    return text[loc.end_col_offset:].rstrip("\n") if loc.end_col_offset is not None else ""

  def quote(self, node) -> str:
    """The text of `node` as the user wrote it, on one line."""
    loc = self.loc(node)
    lines = list(self.lines[loc.lineno - 1:(loc.end_lineno or loc.lineno)])
    if lines and loc.end_col_offset is not None:
      lines[-1] = lines[-1][:loc.end_col_offset]
    if lines:
      lines[0] = lines[0][loc.col_offset:]
    return " ".join(" ".join(lines).split())


def numbers_as_written(src, node):
  """`node`, or a copy of it whose number literals written otherwise than Python prints them (`1e-5`, not
  `1e-05`; `0x7F`, `1_000`, `.5`) are names holding the text as written, so a message quotes them so. A literal
  whose source text does not read back as its value (a node the compiler made) keeps Python's form."""
  import copy
  written = {}
  for n in ast.walk(node):
    if isinstance(n, ast.Constant) and type(n.value) in (int, float) and getattr(n, "end_col_offset", None) is not None:
      try:
        text = src.quote(n)
        same = text != repr(n.value) and " " not in text and type(ast.literal_eval(text)) is type(n.value) \
            and ast.literal_eval(text) == n.value
      except Exception:       # (a position outside the source: the compiler's node)
        continue
      if same:
        written[(n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)] = text
  if not written:
    return node

  class _Written(ast.NodeTransformer):
    def visit_Constant(self, n):
      text = written.get((n.lineno, n.col_offset, n.end_lineno, n.end_col_offset))
      return n if text is None else ast.copy_location(ast.Name(id=text, ctx=ast.Load()), n)
  return _Written().visit(copy.deepcopy(node))


QUOTE_DEPTH = 64     # astor rebuilds an expression's text recursively: one nested deeper is quoted as written


def nests_deeper(node, depth: int) -> bool:
  """Whether the AST under `node` nests more than `depth` levels (walked without recursion,
  leftmost operands first, so a long chain answers after about `depth` steps)."""
  stack = [(node, 0)]
  while stack:
    n, d = stack.pop()
    if d > depth:
      return True
    stack.extend((c, d + 1) for c in reversed(list(ast.iter_child_nodes(n))))
  return False


def _unavailable(fn, filename, reason, changed=False) -> E.KernelError:
  code = getattr(fn, "__code__", None)
  first = getattr(code, "co_firstlineno", 0)
  return E.SourceUnavailableError(
      f"cannot read the source of {fn.__qualname__}: {reason}", Loc(filename, first, 0),
      hint=CHANGED if changed else "define kernels in a file or a notebook cell, not in exec() or a REPL string")


def read_function(fn, what: str):
  """(Source, ast.FunctionDef, scope) of `fn`; `what` names the decorator, for messages."""
  code = getattr(fn, "__code__", None)
  if not isinstance(fn, types.FunctionType) or not isinstance(code, types.CodeType):
    raise not_a_function(fn, what)
  filename = _filename(fn)
  snap = snapshot(fn)
  if snap is None:
    try:
      inspect.getsourcelines(fn)
      reason = "no file holds it"
    except (OSError, TypeError) as e:
      reason = str(e)
    raise _unavailable(fn, filename, reason)
  lines, first = list(snap.lines), snap.first
  if snap.changed:
    raise _unavailable(fn, filename, f"{filename}:{first} no longer holds the text Python compiled", True)
  text = "".join(lines)
  dedented = textwrap.dedent(text)
  indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
  src = Source(filename, [l.rstrip("\n") for l in snap.file_lines], first, indent)
  try:
    tree = ast.parse(dedented).body[0]
  except SyntaxError as e:        # a lambda whose lines are no statement: found in its whole file
    found = _lambda_in_file(snap, code) if code.co_name == "<lambda>" and what == "@ml.inline" else None
    if found is None:
      raise _unavailable(fn, filename, f"{filename}:{first} does not parse ({e.msg})") from None
    tree, src = found, Source(filename, src.lines, 1, 0)
  else:
    if code.co_name == "<lambda>" and what == "@ml.inline":      # ml.inline(lambda v: ...): its one expression
      tree = _lambda_def(tree, code, first, indent) or tree
  if not isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
    raise E.UnsupportedSyntaxError(f"{what} decorates a plain def function", src.loc(tree),
                                   hint="put the decorator on a `def` statement")
  if isinstance(tree, ast.AsyncFunctionDef):      # its call would be a coroutine, not its result
    raise E.UnsupportedSyntaxError(f"{what} decorates a plain def function, not an async def", src.loc(tree),
                                   hint=f"write `def {tree.name}(...)`: kernel code has no coroutines")
  if tree.name not in (code.co_name, fn.__name__) and not (snap.verified and os.path.isfile(filename)):
    # exec()'d code: linecache may hold some other "<string>". (In a file, text that compiles to
    # this very code is found by its first line, whatever the function is called now: `__name__`
    # or `co_name` set by a kernel factory.)
    raise _unavailable(fn, filename, f"{filename}:{first} holds {tree.name}")
  scope = dict(fn.__globals__)
  if fn.__closure__:
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
      try:
        scope[name] = cell.cell_contents
      except ValueError:
        pass
  from .match import desugar          # match statements: the if/elif chains they mean
  return src, desugar(tree, src), scope


def _lambda_in_file(snap, code) -> ast.FunctionDef | None:
  """The lambda of `code` found in its whole file, for a lambda whose own lines are no statement (an
  entry of a dict display, `"relu": lambda v: ...,`, or an argument on a call's continuation line);
  positions are the file's (first line 1, no indent). None when the file does not parse or holds no
  one such lambda."""
  try:
    module = ast.parse("".join(snap.file_lines))
  except (SyntaxError, ValueError):
    return None
  return _lambda_def(module, code, 1, 0)


def _lambda_def(stmt, code, first, indent) -> ast.FunctionDef | None:
  """The lambda of `code` in the statement `stmt` (parsed from line `first`, dedented by `indent`) as a
  def returning its expression, at the expression's own positions; None when it cannot be told."""
  names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
  found = [n for n in ast.walk(stmt) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno - first + 1
           and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == names]
  if len(found) > 1:       # several on the line (a tuple of helpers): the one whose body the bytecode runs
    at = {(p[0], p[2]) for p in code.co_positions()}
    found = [n for n in found if (n.body.lineno + first - 1, n.body.col_offset + indent) in at]
  if len(found) != 1:
    return None
  lam = found[0]
  ret = ast.copy_location(ast.Return(value=lam.body), lam.body)
  fd = ast.FunctionDef(name="<lambda>", args=lam.args, body=[ret], decorator_list=[], returns=None,
                       type_comment=None, **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}))
  return ast.copy_location(fd, lam)


def not_a_function(fn, what: str, loc: Loc | None = None) -> E.KernelError:
  """The error for decorating something other than a plain function (a functools.partial, a
  kernel: decorated twice, a class or another callable), at `loc` (else the inner function's)."""
  import functools
  from .loc import UNKNOWN
  inner = fn.func if isinstance(fn, functools.partial) else getattr(fn, "fn", None)
  if inner is None and isinstance(fn, (staticmethod, classmethod)):
    inner = fn.__func__
  if inner is None and callable(fn):
    inner = inspect.unwrap(fn)        # an lru_cache'd or functools.wraps'd function: the def's own line
  code = getattr(inner, "__code__", None)
  if loc is not None:
    pass
  elif not isinstance(code, types.CodeType):
    loc = UNKNOWN
  else:
    line = code.co_firstlineno
    loc = Loc(code.co_filename, line, 0, source_line=linecache.getline(code.co_filename, line).rstrip("\n"))
  if isinstance(fn, functools.partial):
    import reprlib
    short = reprlib.Repr()
    short.maxstring = short.maxother = 30
    bound = ", ".join([short.repr(a) for a in fn.args][:4] + [f"{k}={short.repr(v)}" for k, v in fn.keywords.items()][:4])
    name = getattr(fn.func, "__name__", "the function")
    first = next(iter(fn.keywords), None)
    return E.SignatureError(
        f"{what} takes a def function, got functools.partial({name}, {bound})", loc,
        hint=(f"make {first} a constexpr, keyword-only after a bare * (def {name}(..., *, {first})): a partial"
              f" may bind a kernel's constexprs by keyword (or pass them by keyword at the call)"
              if first else "bind the kernel's constexprs by keyword (functools.partial(kernel, block=128)), or"
                            " pass them by keyword at the call: the refs are the call's arrays, in order"))
  if hasattr(fn, "fn") and hasattr(fn, "cache_info"):
    return E.SignatureError(
        f"{what} decorates {getattr(fn.fn, '__name__', fn.fn)}, which is already an @mgpu_kernel", loc,
        hint="decorate once: remove the second @mgpu_kernel (pass all options to one)")
  if isinstance(fn, types.MethodType):      # mg.mgpu_kernel(...)(self.kern): its self is no array
    name = getattr(fn.__func__, "__qualname__", getattr(fn.__func__, "__name__", "the method"))
    first = next(iter(inspect.signature(fn.__func__).parameters), "self")
    return E.SignatureError(
        f"{what} takes a def function, got the bound method {name}: a kernel binds no {first} (every"
        f" parameter is an array or a constexpr)", loc,
        hint=f"define the kernel inside the method as a def without {first}, reading what it needs from"
             f" {first} (a closure: {first}.scale in its body is followed, and a change recompiles it), or"
             f" pass such values as constexprs at the call, kernel(x, scale={first}.scale)")
  from .language import Inline
  name = getattr(inner, "__name__", "f")
  if isinstance(fn, (staticmethod, classmethod)):
    deco = type(fn).__name__
    return E.SignatureError(
        f"{what} decorates a {deco} ({name})", loc,
        hint=f"put @{deco} above {what} (outermost), so that {what} decorates the def itself")
  if getattr(fn, "__wrapped__", None) is not None and not isinstance(fn, Inline):
    return E.SignatureError(
        f"{what} decorates {name} wrapped by another decorator ({type(fn).__name__})", loc,
        hint=f"put {what} right above `def {name}`, nearest the def" + (
            " (a helper's body is traced into each call: it needs no cache)" if "cache" in type(fn).__name__ else ""))
  if isinstance(fn, Inline) and what == "@mgpu_kernel":
    return E.SignatureError(
        f"{what} decorates {getattr(fn.fn, '__name__', 'a function')}, which is an @ml.inline helper", loc,
        hint="drop @ml.inline: it marks the helpers a kernel calls, and a kernel is decorated with"
             " @mg.mgpu_kernel(...) alone")
  return E.SignatureError(
      f"{what} takes a def function, got {type(fn).__name__} {fn!r:.60}", loc,
      hint="put the decorator on a `def` statement")
