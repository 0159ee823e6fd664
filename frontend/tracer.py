"""Python source -> typed IR: one `ast.NodeVisitor` over the kernel function.

Python-level values (ints, tuples, dtypes, constexprs, shapes) are computed
while tracing; everything that depends on data or on the program id becomes an
op in the typed IR. Syntax the DSL does not support reaches `generic_visit`
and is reported at its node.
"""
from __future__ import annotations

import ast
import builtins
import operator

import astor

from . import errors as E
from . import ir
from . import language as L
from .dtypes import DType
from .loc import Loc
from .semantics import Emitter, is_value, kind_of
from .types import RefType, ScalarType, resolve

_BINOPS = {ast.Add: ir.BinOp.ADD, ast.Sub: ir.BinOp.SUB, ast.Mult: ir.BinOp.MUL,
           ast.Div: ir.BinOp.DIV, ast.FloorDiv: ir.BinOp.FLOORDIV, ast.Mod: ir.BinOp.MOD,
           ast.BitAnd: ir.BinOp.AND, ast.BitOr: ir.BinOp.OR, ast.BitXor: ir.BinOp.XOR}
_PYBINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
             ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
             ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
             ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_CMPOPS = {ast.Lt: ir.CmpOp.LT, ast.LtE: ir.CmpOp.LE, ast.Gt: ir.CmpOp.GT,
           ast.GtE: ir.CmpOp.GE, ast.Eq: ir.CmpOp.EQ, ast.NotEq: ir.CmpOp.NE}
_PYCMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
             ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_,
             ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
             ast.NotIn: lambda a, b: a not in b}
# Python builtins a kernel may call on static values.
_PY_BUILTINS = {f: getattr(builtins, f) for f in
                ("len", "min", "max", "int", "float", "bool", "abs", "tuple", "range", "isinstance")}
SUPPORTED = ("assignments, augmented assignments, if/else, for over range()/ml.range()/ml.static_range(),"
             " expressions, calls of ml.* functions")


def _is_whole(index) -> bool:
  return index is Ellipsis or index == (Ellipsis,)


_DEBUG_BUILTINS = {"print": object(), "breakpoint": object()}


class _At:
  """`ref.at`: subscripting it makes a view."""
  def __init__(self, ref):
    self.ref = ref


class _Method:
  """A bound method of a typed value (`x.astype`)."""
  def __init__(self, name, value):
    self.name, self.value = name, value


class _Unbound:
  """A name that is not bound on every path to here."""
  def __init__(self, why: str):
    self.why = why


class _Poison:
  """The value of a name whose defining statement failed (its error is already recorded).

  Reading it abandons the reading statement silently, so one mistake is reported
  once, not again at every later use.
  """
  def __repr__(self):
    return "<poisoned>"


POISON = _Poison()


class _PoisonedUse(Exception):
  """A statement read a poisoned name: skip it without a new error."""


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


class Tracer(ast.NodeVisitor):
  def __init__(self, source: Source, scope: dict, emitter: Emitter):
    self.src = source
    self.scope = scope          # globals + closure of the kernel function
    self.em = emitter
    self.env: dict[str, object] = {}
    self.pending_name = ""      # the name an assignment is about to bind (names buffers)
    self.errors: list[E.KernelError] = []   # every independent mistake, in program order
    self.depth = 0                           # @ml.inline nesting

  # ------------------------------------------------------------ helpers
  def loc(self, node) -> Loc:
    return self.src.loc(node)

  def text(self, node) -> str:
    """The user's expression, for messages (without the parentheses astor wraps it in)."""
    s = astor.to_source(node).strip()
    if not isinstance(node, ast.Tuple) and s[:1] == "(" and s[-1:] == ")":
      depth = 0
      for ch in s[1:-1]:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
          return s
      s = s[1:-1]
    return s

  def unsupported(self, node, what: str, hint: str | None = None):
    raise E.UnsupportedSyntaxError(
        f"{what} is not supported in a kernel", self.loc(node),
        hint=hint or f"kernels support {SUPPORTED}")

  def generic_visit(self, node):
    name = type(node).__name__
    nice = {"While": "a while loop", "With": "a with statement", "Try": "try/except",
            "FunctionDef": "a nested function", "Lambda": "a lambda", "Raise": "raise",
            "Import": "import", "ImportFrom": "import", "Global": "global", "Nonlocal": "nonlocal",
            "Delete": "del", "ListComp": "a list comprehension", "GeneratorExp": "a generator",
            "DictComp": "a dict comprehension", "SetComp": "a set comprehension",
            "Dict": "a dict", "Set": "a set", "Starred": "star-unpacking", "Yield": "yield",
            "Await": "await", "NamedExpr": "the := operator", "Break": "break",
            "Continue": "continue", "Assert": "assert", "ClassDef": "a class definition",
            "Match": "match"}.get(name, f"the Python construct {name}")
    self.unsupported(node, nice)

  # ------------------------------------------------------------ statements
  def run_body(self, stmts):
    for s in stmts:
      self.run_stmt(s)

  def run_stmt(self, node):
    """Trace one statement. A user mistake in it is recorded, the names it binds are
    poisoned, and tracing goes on with the next statement, so one pass reports every
    independent mistake (compile.trace raises them together)."""
    env = self.env
    try:
      self.visit(node)
    except E.InternalError:
      raise
    except (E.KernelError, _PoisonedUse) as e:
      self.env, self.pending_name = env, ""
      if isinstance(e, E.KernelError):
        self.record(e)
      from .control import assigned_names
      for name in assigned_names([node]):
        self.env[name] = POISON
    except Exception as e:   # a bug in mgpu_dsl: wrap it once, at the user's statement
      raise E.InternalError.wrap("mgpu_dsl failed while tracing this statement", e, self.loc(node)) from e

  def record(self, err: E.KernelError) -> None:
    """Keep `err` unless the same mistake was already reported (unrolled loops repeat them)."""
    key = (type(err), err.lineno, err.col_offset)
    if all((type(e), e.lineno, e.col_offset) != key for e in self.errors):
      self.errors.append(err)

  def visit_Expr(self, node):
    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
      return   # docstring
    self.eval(node.value)

  def visit_Pass(self, node):
    pass

  def visit_Return(self, node):
    if node.value is not None:
      self.unsupported(node, "returning a value",
                       hint="kernels write their results into output refs (the last parameters)")
    self.unsupported(node, "return", hint="let the kernel run to its end; guard work with if")

  def visit_Assign(self, node):
    t = node.targets[0]
    self.pending_name = t.id if len(node.targets) == 1 and isinstance(t, ast.Name) else ""
    value = self.eval(node.value)
    self.pending_name = ""
    if isinstance(t, ast.Subscript) and is_value(value) and not value.name:
      value.name = self.text(node.value)     # messages about the store quote the expression
    for target in node.targets:
      self.assign(target, value, node.value)

  def visit_AnnAssign(self, node):
    if node.value is None:
      return
    self.assign(node.target, self.eval(node.value), node.value)

  def visit_AugAssign(self, node):
    op = type(node.op)
    if isinstance(node.target, ast.Name):
      cur = self.lookup(node.target.id, node.target)
      self.env[node.target.id] = self.binop(op, cur, self.eval(node.value), node, self.text(node.target))
    elif isinstance(node.target, ast.Subscript):
      ref, index = self.subscript_target(node.target)
      view = self.em.view(ref, index, self.text(node.target), self.loc(node.target))
      cur = self.em.load(view, self.text(node.target), self.loc(node))
      self.em.store(view, self.binop(op, cur, self.eval(node.value), node), self.loc(node))
    else:
      self.unsupported(node, "this augmented assignment target")

  def assign(self, target, value, value_node):
    if isinstance(target, ast.Name):
      if is_value(value) and not value.name.isidentifier():
        value.name = target.id      # messages say `a`, not the expression that made it
      self.env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
      if not isinstance(value, tuple) or len(value) != len(target.elts):
        raise E.KernelTypeError(
            f"cannot unpack {kind_of(value)} into {len(target.elts)} names", self.loc(target))
      for t, v in zip(target.elts, value):
        self.assign(t, v, value_node)
    elif isinstance(target, ast.Subscript):
      ref, index = self.subscript_target(target)
      view = ref if _is_whole(index) else self.em.view(ref, index, self.text(target), self.loc(target))
      self.em.store(view, value, self.loc(target))
    elif isinstance(target, ast.Attribute):
      self.unsupported(target, "assigning to an attribute")
    else:
      self.unsupported(target, "this assignment target")

  def subscript_target(self, target):
    base = self.eval(target.value)
    if isinstance(base, _At):
      self.unsupported(target, "assigning to ref.at[...]", hint="write through the ref: ref[idx] = value")
    if not is_value(base) or not isinstance(base.type, RefType):
      raise E.KernelTypeError(
          f"only refs can be written with [...] =, but {self.text(target.value)} is {kind_of(base)}",
          self.loc(target))
    return base, self.eval_index(target.slice)

  def visit_If(self, node):
    cond = self.eval(node.test)
    if not is_value(cond):
      self.run_body(node.body if cond else node.orelse)
      return
    if not isinstance(cond.type, ScalarType) or resolve(cond.type.dtype) != DType.bool_:
      raise E.KernelTypeError(
          f"an if condition must be a Python value or a boolean scalar, got {kind_of(cond)}",
          self.loc(node.test), hint="compare scalars (i < n); tensors select with ml.where")
    from .control import trace_if
    trace_if(self, node, cond)

  def visit_For(self, node):
    from .control import trace_for
    trace_for(self, node)

  # ------------------------------------------------------------ expressions
  def eval(self, node):
    method = getattr(self, "eval_" + type(node).__name__, None)
    if method is None:
      self.generic_visit(node)
    return method(node)

  def eval_Constant(self, node):
    return node.value

  def eval_Tuple(self, node):
    return tuple(self.eval(e) for e in node.elts)

  eval_List = eval_Tuple

  def eval_Name(self, node):
    return self.lookup(node.id, node)

  def lookup(self, name, node):
    if name in self.env:
      v = self.env[name]
      if v is POISON:
        raise _PoisonedUse(name)
      if isinstance(v, _Unbound):
        self.env[name] = POISON     # report it once, at its first read
        raise E.UnboundNameError(f"{name} is possibly unbound here: {v.why}", self.loc(node),
                                 hint=f"assign {name} before the branch or loop")
      return v
    if name in self.scope:
      return self.scope[name]
    if name in _PY_BUILTINS:
      return _PY_BUILTINS[name]
    if name in ("print", "breakpoint"):
      return _DEBUG_BUILTINS[name]
    self.env[name] = POISON         # report it once, at its first use
    raise E.UnknownNameError(f"name {name!r} is not defined", self.loc(node),
                             hint="kernels see their parameters, local names and module globals")

  def eval_Attribute(self, node):
    base = self.eval(node.value)
    attr = node.attr
    if is_value(base):
      t = base.type
      if attr == "shape":
        return t.shape
      if attr == "ndim":
        return len(t.shape)
      if attr == "dtype":
        d = resolve(t.dtype)
        if not isinstance(d, DType):
          raise E.DtypeInferenceError(
              f"{base.name or 'this buffer'}'s dtype is not known yet at this point", self.loc(node),
              hint="give the buffer a dtype: ml.smem(shape, jnp.float32)")
        return d
      if attr == "at" and isinstance(t, RefType):
        return _At(base)
      if attr == "astype" and not isinstance(t, RefType):
        return _Method("astype", base)
      raise E.KernelTypeError(f"{kind_of(base)} has no attribute {attr!r}", self.loc(node),
                              hint="refs have .at, .shape, .dtype; register values .astype, .shape, .dtype")
    try:
      return getattr(base, attr)
    except AttributeError:
      raise E.UnknownNameError(f"{self.text(node.value)} has no attribute {attr!r}", self.loc(node)) from None

  def eval_index(self, node):
    if isinstance(node, ast.Slice):
      return slice(*(self.eval(x) if x is not None else None for x in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Tuple):
      return tuple(self.eval_index(e) for e in node.elts)
    return self.eval(node)

  def eval_Subscript(self, node):
    base = self.eval(node.value)
    index = self.eval_index(node.slice)
    loc, name = self.loc(node), self.text(node)
    if isinstance(base, _At):
      return self.em.view(base.ref, index, name, loc)
    if is_value(base):
      if isinstance(base.type, RefType):
        view = base if _is_whole(index) else self.em.view(base, index, name, loc)
        return self.em.load(view, name, loc)
      self.unsupported(node, "indexing a register tensor", hint="index the ref before loading: ref.at[...][...]")
    try:
      return base[index]
    except Exception as e:
      raise E.KernelTypeError(f"cannot index {self.text(node.value)}: {e}", loc) from None

  def eval_BinOp(self, node):
    return self.binop(type(node.op), self.eval(node.left), self.eval(node.right), node)

  def binop(self, op, a, b, node, name=""):
    if not is_value(a) and not is_value(b):
      try:
        return _PYBINOPS[op](a, b)
      except Exception as e:
        raise E.KernelTypeError(f"cannot compute {self.text(node)}: {e}", self.loc(node)) from None
    if op not in _BINOPS:
      self.unsupported(node, f"the operator {type(node.op).__name__ if hasattr(node, 'op') else op.__name__} on register values")
    return self.em.binary(_BINOPS[op], a, b, self.loc(node), name)

  def eval_UnaryOp(self, node):
    x = self.eval(node.operand)
    if not is_value(x):
      return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
              ast.Invert: operator.invert}[type(node.op)](x)
    if isinstance(node.op, ast.UAdd):
      return x
    if isinstance(node.op, ast.Invert):
      self.unsupported(node, "~ on register values", hint="use 'x == 0' or xor with -1")
    kind = ir.UnOp.NEG if isinstance(node.op, ast.USub) else ir.UnOp.NOT
    return self.em.unary(kind, x, self.loc(node))

  def eval_Compare(self, node):
    if len(node.ops) != 1:
      self.unsupported(node, "a chained comparison", hint="split it: (a < b) & (b < c)")
    a, b = self.eval(node.left), self.eval(node.comparators[0])
    op = type(node.ops[0])
    if not is_value(a) and not is_value(b):
      return _PYCMPOPS[op](a, b)
    if op not in _CMPOPS:
      self.unsupported(node, f"{type(node.ops[0]).__name__} on register values")
    return self.em.compare(_CMPOPS[op], a, b, self.loc(node))

  def eval_BoolOp(self, node):
    vals = [self.eval(v) for v in node.values]
    if any(is_value(v) for v in vals):
      self.unsupported(node, "'and'/'or' on register values", hint="use & and | on booleans")
    out = vals[0]
    for v in vals[1:]:
      out = (out and v) if isinstance(node.op, ast.And) else (out or v)
    return out

  def eval_IfExp(self, node):
    cond = self.eval(node.test)
    if is_value(cond):
      self.unsupported(node, "a conditional expression on a runtime value", hint="use ml.where(cond, a, b)")
    return self.eval(node.body if cond else node.orelse)

  def eval_JoinedStr(self, node):
    self.unsupported(node, "an f-string")

  def eval_Call(self, node):
    fn = self.eval(node.func)
    if fn is _DEBUG_BUILTINS["print"]:
      from .debug import trace_print
      return trace_print(self, node)
    if fn is _DEBUG_BUILTINS["breakpoint"]:
      from .debug import trace_breakpoint
      return trace_breakpoint(self, node)
    args = [self.eval(a) for a in node.args]
    kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
      self.unsupported(node, "*args/**kwargs in a call")
    from .calls import call
    return call(self, node, fn, args, kwargs)
