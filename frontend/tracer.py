"""Python source -> typed IR: one `ast.NodeVisitor` over the kernel function.

Python-level values (ints, tuples, dtypes, constexprs, shapes) are computed
while tracing; everything that depends on data or on the program id becomes an
op in the typed IR, built by the op families' type rules (frontend/ops/). Syntax
the DSL does not support reaches `generic_visit` and is reported at its node.
"""
from __future__ import annotations

import ast

import numpy as np
import operator

import astor

from . import errors as E
from .builder import Builder, Call
from .calls import _DEBUG, PY_BUILTINS, Calls, _Texts
from .containers import Containers
from .dtypes import DType
from .env import POISON, PoisonedUse, Unbound, appended_list, assigned_names
from . import missing, pointer_steps
from .ops import elementwise as ew
from .ops.base import is_value, kind_of, static_number, typed_number, typed_op, value_words
from .ops.power import power
from .assign import Assignments, holds_value, nothing_used
from .unknown_names import known_names, unknown_names_errors
from .short_circuit import (as_condition, chain_rest, is_bool_scalar, is_number_scalar, may_read, not_boolean_hint,
                            number_and_or, short_circuit, tensor_and_or, walrus_hint)
from .source import QUOTE_DEPTH, Source, nests_deeper, numbers_as_written
from .py_scalars import member
from .stmt_hints import in_hint, one_element_hint
from .ref_conditions import check_not_ref, written_as_return
from .subscripts import Subscripts
from .triton_semantics import check_division
from .types import RefType, ScalarType, TensorType, resolve

_BINOPS = {ast.Add: ew.BinOp.ADD, ast.Sub: ew.BinOp.SUB, ast.Mult: ew.BinOp.MUL,
           ast.Div: ew.BinOp.DIV, ast.FloorDiv: ew.BinOp.FLOORDIV, ast.Mod: ew.BinOp.MOD,
           ast.BitAnd: ew.BinOp.AND, ast.BitOr: ew.BinOp.OR, ast.BitXor: ew.BinOp.XOR,
           ast.LShift: ew.BinOp.SHL, ast.RShift: ew.BinOp.SHR}
_PYBINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
             ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
             ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
             ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
             ast.MatMult: operator.matmul}     # every operator of Python's: `len(a) @ n` is Python's TypeError
_CMPOPS = {ast.Lt: ew.CmpOp.LT, ast.LtE: ew.CmpOp.LE, ast.Gt: ew.CmpOp.GT,
           ast.GtE: ew.CmpOp.GE, ast.Eq: ew.CmpOp.EQ, ast.NotEq: ew.CmpOp.NE}
_PYCMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
             ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_,
             ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
             ast.NotIn: lambda a, b: a not in b}
SUPPORTED = ("assignments, augmented assignments, if/else, for over range()/ml.range()/ml.static_range()"
             " (with else when no break ends them), while, expressions, calls of ml.* functions")
_NICE = {"While": "a while loop", "With": "a with statement", "Try": "try/except",
         "FunctionDef": "a nested function", "Lambda": "a lambda", "Raise": "raise",
         "Import": "import", "ImportFrom": "import", "Global": "global", "Nonlocal": "nonlocal",
         "Delete": "del", "ListComp": "a list comprehension", "GeneratorExp": "a generator expression",
         "DictComp": "a dict comprehension", "SetComp": "a set comprehension",
         "Dict": "a dict", "Set": "a set", "Starred": "star-unpacking", "Yield": "yield",
         "Await": "await", "NamedExpr": "the := operator", "Break": "break",
         "Continue": "continue", "ClassDef": "a class definition",
         "Match": "match"}


class Tracer(Subscripts, Assignments, Calls, Containers, ast.NodeVisitor):
  def __init__(self, source: Source, scope: dict, builder: Builder):
    self.src = source
    self.scope = scope          # globals + closure of the kernel function
    self.b = builder
    self.env: dict[str, object] = {}
    self.pending_name = ""      # the name an assignment is about to bind (names buffers)
    self.pending_node = None    # the assigned expression, whose call gets that name
    self.call_node = None       # the call whose function is being evaluated (x.to(...): its arguments)
    self.errors: list[E.KernelError] = []   # every independent mistake, in program order
    self.depth = 0                           # @ml.inline nesting
    self.globals_read: dict[str, object] = {}   # module-level names the kernel read, and their values
    self.where: dict[str, object] = {}        # name -> Loc of the statement that last bound it
    self.carried: dict[str, tuple] = {}       # leaf name -> (entry value, loop Loc) of enclosing runtime loops
    self.loops: list = []     # enclosing loops, innermost last: an unrolled one's block, None for a runtime one
    self.ifs: list = []       # enclosing runtime ifs (ast.If), innermost last
    self.unrolled: list = []  # enclosing unrolled loops: a while's test (ast), None for a for
    self.jump: str | None = None   # "break"/"continue" ending an unrolled iteration, "return" ending the kernel
    self.top = builder.block  # the kernel's top-level block: a static `return` is allowed there
    self.returned = None      # what an @ml.inline helper's `return` gave
    # Names the function assigns anywhere: as in Python, they are its locals, never the module's
    # globals of the same name (reading one before its assignment is an error, not the global).
    self.local_names: set[str] = set()
    self.failed = 0           # statements that failed (their errors may repeat one already recorded)
    self.body: list = []      # the function's statements (which names are read later)
    self.parent = None        # an @ml.inline helper's caller
    self.at_call, self.call_text = None, ""   # mgpu_dsl's own helper: the user's call locating it, its text naming it
    self.expr_stmt = None     # the expression statement being traced, if any

  def child(self, source: Source, scope: dict) -> "Tracer":
    """A tracer for an @ml.inline helper's body, sharing the builder and the error list."""
    t = Tracer(source, scope, self.b)
    t.errors, t.depth, t.globals_read = self.errors, self.depth + 1, self.globals_read
    t.parent = self
    return t

  # ------------------------------------------------------------ helpers
  def loc(self, node):
    return self.src.loc(node) if self.at_call is None else self.at_call   # (mgpu_dsl's helper: the user's call)

  def cx(self, node, name="", values=(), operands=()) -> Call:
    """The Call of an operator at `node`; `values` and `operands`: its operands and their AST
    nodes, whose text messages quote."""
    return Call(self.b, self.loc(node), name, "", _Texts(self, values, operands))

  def text(self, node) -> str:
    """The user's expression, for messages (without the parentheses astor wraps it in), on one
    line (astor's default breaks long ones at 79 columns). An expression nested deeper than astor
    recurses safely (a chain of hundreds of operators) is quoted as written instead."""
    if getattr(node, "mgpu_text", None):       # a jnp call traced as its ml.* form: the call as written
      return node.mgpu_text
    if getattr(node, "mgpu_shown", None):      # a part of that form: its operands as written (jnp_calls.trace_form)
      s = astor.to_source(node, pretty_source="".join).strip()
      for t, shown in node.mgpu_shown.items():
        s = s.replace(t, shown)
      return s
    if nests_deeper(node, QUOTE_DEPTH):
      return self.src.quote(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
      return repr(node.value)          # 'rtz', not astor's """rtz"""
    s = astor.to_source(numbers_as_written(self.src, node), pretty_source="".join).strip()
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
    hint = None
    if name == "GeneratorExp":
      hint = "reduce register tensors with ml.sum / ml.max / ml.min; unroll static loops with ml.static_range"
    elif name in ("ListComp", "DictComp", "SetComp"):
      hint = "build tuples of static values with a for loop over ml.static_range"
    elif name in ("FunctionDef", "AsyncFunctionDef", "Lambda"):
      hint = ("write a plain def (no decorator but @ml.inline or JAX's @jax.jit, @jax.named_call, @jax.checkpoint,"
              " not async): a def in a kernel's body is a helper,"
              " traced where it is called, and jax.lax.fori_loop, while_loop, cond and switch of it run as the loop or"
              " if they mean; lax.scan's body is a Python loop here: for j in range(n): carry, y = f(carry, x[j])")
      if node.__class__.__name__ != "Lambda" and node.decorator_list:
        fn_node, node = node, node.decorator_list[0]     # the caret at the decorator, where the helper starts
        deco = self.text(node).split("(")[0].rsplit(".", 1)[-1]
        if deco in ("when", "loop", "fori_loop"):          # Pallas's @pl.when(cond), @pl.loop(lo, hi) bodies
          from .lax_hints import decorated_body_hint
          hint = decorated_body_hint(deco, self.text(node), fn_node)
    elif name in ("Import", "ImportFrom", "Global", "Nonlocal", "Delete", "Match", "Try", "TryStar"):
      from .stmt_hints import statement_hint
      hint = statement_hint(self, node)
    elif name == "With":
      hint = ("write the with block's body without the with: a context manager has no meaning inside a kernel"
              " (jax.named_scope, profiler annotations and jax.ensure_compile_time_eval are taken, and name nothing)")
    self.unsupported(node, _NICE.get(name, f"the Python construct {name}"), hint)

  # ------------------------------------------------------------ statements
  def run_body(self, stmts):
    for s in stmts:
      self.run_stmt(s)
      if self.jump:      # a static break/continue/return: the rest of the block does not run
        return

  def run_unrolled(self, stmts, test=None) -> bool:
    """One iteration of a loop unrolled while tracing (`test`: a while's condition); False when a
    static `break` (or a `return`) ends the loop."""
    self.loops.append(self.b.block)
    self.unrolled.append(test)
    try:
      self.run_body(stmts)
    finally:
      self.loops.pop()
      self.unrolled.pop()
    if self.jump == "continue":
      self.jump = None
    elif self.jump == "break":
      self.jump = None
      return False
    return self.jump is None

  def run_stmt(self, node):
    """Trace one statement. A user mistake in it is recorded, the names it binds are
    poisoned, and tracing goes on with the next statement, so one pass reports every
    independent mistake (compile.trace raises them together)."""
    env = self.env
    self.stmt = node
    try:
      try:
        self.visit(node)
      except RecursionError:
        raise E.UnsupportedSyntaxError(
            "this statement nests too deep for the compiler to trace (an expression of hundreds of nested"
            " operators or calls)", self.loc(node),
            hint="split it into several statements, each nesting a few operators or calls: t = -v, then"
                 " t = -t, ...; a flat chain a + b + c + ... of hundreds of terms needs no split") from None
    except E.InternalError:
      raise
    except (E.KernelError, PoisonedUse) as e:
      self.env, self.pending_name, self.pending_node = env, "", None
      self.failed += 1
      if isinstance(e, E.KernelError):
        self.record(e)
      for other in getattr(e, "also", None) or unknown_names_errors(self, node, None):   # (after a poisoned name too)
        self.record(other)
      for name in assigned_names([node]):
        self.env[name] = POISON
      call = node.value if isinstance(node, ast.Expr) else None      # lst.append(v) failed: lst is
      if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
          and isinstance(call.func.value, ast.Name) \
          and isinstance(self.env.get(call.func.value.id), (list, dict, set)):
        self.env[call.func.value.id] = POISON                         # not what the rest expects
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
    if (lst := appended_list(node)) is not None and isinstance(self.env.get(lst), list):
      # `hs.append(v)`: `hs += [v]`, a new list bound to hs (carried by loops, merged by ifs, as any name)
      call = node.value
      item = ast.List(elts=[call.args[0]], ctx=ast.Load()) if call.func.attr == "append" else \
          ast.Call(func=ast.Name(id="list", ctx=ast.Load()), args=[call.args[0]], keywords=[])
      aug = ast.AugAssign(target=ast.Name(id=lst, ctx=ast.Store()), op=ast.Add(),
                          value=ast.copy_location(item, call.args[0]))
      aug.written = f"{lst}.{call.func.attr}(...)"
      return self.visit_AugAssign(ast.fix_missing_locations(ast.copy_location(aug, node)))
    self.expr_stmt = node        # (a helper that returns nothing may be called here: frontend/inline.py)
    try:
      value = self.eval(node.value)
    finally:
      self.expr_stmt = None
    from .stmt_hints import dropped_value_error
    if (err := dropped_value_error(self, node, value)) is not None:
      raise err

  def visit_Pass(self, node):
    pass

  def visit_With(self, node):
    from .with_scopes import trace_with     # `with jax.named_scope("qk"):`: the body as written without it
    if not trace_with(self, node):
      self.generic_visit(node)

  def visit_FunctionDef(self, node):
    """`def step(v): ...` (or decorated @ml.inline) in the body: a helper traced where it is called."""
    from .inline import local_function
    from .lax_flow import UNHANDLED, decorated     # @functools.partial(lax.fori_loop, 0, n, init_val=c): its carry
    fn = local_function(self, node)
    if fn is None and (fn := decorated(self, node)) is UNHANDLED:
      self.generic_visit(node)      # decorated otherwise (Pallas's @pl.when): the hint for it
    self.env[node.name] = fn
    self.where[node.name] = self.loc(node)

  def eval_Lambda(self, node):
    from .inline import local_function
    return local_function(self, node)

  def visit_Return(self, node):
    if self.depth > 0:                # an @ml.inline helper's return: its value is the call's
      if self.b.block is self.top and all(blk is not None for blk in self.loops):   # (unrolled loops too)
        self.returned = self.eval(node.value) if node.value is not None else None
        self.jump = "return"          # the rest of the helper does not run
        return
      if any(blk is None for blk in self.loops):
        v = self.text(node.value) if node.value is not None else None
        r = next(n for n in ("result", "found", "res_") if n not in self.env and n != v)
        self.unsupported(node, "return inside a run-time loop of an @ml.inline helper",
                         hint=f"keep the result in a name the loop carries ({r} = the value for no hit, before the"
                              f" loop; {r} = {v}, then break, in it) and return {r} after the loop" if v else
                              "break out of the loop (a flag the loops around it test) and return after it")
      if self.loops:
        self.unsupported(node, "return under a run-time condition in a loop of an @ml.inline helper unrolled"
                               " while tracing",
                         hint="keep the result and a flag in names: r = v, done = False before the loop;"
                              " r = ml.where(cond & ~done, a, r), done = done | cond in it (the first trip whose"
                              " condition holds gives r, as the return would), and return r after the loop")
      self.unsupported(node, "return under a run-time condition in an @ml.inline helper that has a path"
                             " without a return",
                       hint="end every path with a return (return a value after the if, or in its else:), so"
                            " that each path gives the value the call takes")
    if node.value is not None:
      from .stmt_hints import return_hint
      self.unsupported(node, "returning a value", hint=return_hint(self, node))
    if self.depth == 0 and self.b.block is self.top:
      self.jump = "return"      # at the top level or under static conditions: the kernel ends here
      return
    if self.ifs and not any(blk is None for blk in self.loops):
      test = self.text(self.ifs[-1].test)
      self.unsupported(node, "return under a run-time condition",
                       hint=f"a kernel ends early only under a static condition; put the rest of the kernel"
                            f" in the else: branch of `if {test}:` instead")
    self.unsupported(node, "return inside a runtime loop",
                     hint="end the loop with break instead (a run-time loop's break ends it), and guard what"
                          " follows the loop with an if on a flag the break sets: done = 1 before break")

  def visit_If(self, node):
    from .branches import static_if, tensor_condition_hint, trace_if
    cond = self.eval(as_condition(node.test))
    if not is_value(cond):
      return static_if(self, node, cond)
    check_not_ref(self, node.test, cond, self._if_word(node))
    cond = self.one_element_condition(node.test, cond)
    if not isinstance(cond.type, ScalarType) or resolve(cond.type.dtype) != DType.bool_:
      scalar = isinstance(cond.type, ScalarType)
      raise E.KernelTypeError(
          f"an if condition must be a Python value or a boolean scalar, got {value_words(cond)}",
          self.loc(node.test), hint=f"compare it: {self._if_word(node)} {self.nonzero(node.test)}:" if scalar else
          one_element_hint(self, node.test, cond, self._if_word(node)) or
          tensor_condition_hint(self.text(node.test), cond, self._if_word(node)))
    try:
      trace_if(self, node, cond)
    except E.KernelError as e:
      if getattr(node, "loop_else", None) is not None:     # the if that runs a loop's else (frontend/jumps.py)
        from .jumps import loop_else_words
        loop_else_words(e, node, self.loc)
      raise

  def one_element_condition(self, test, cond):
    """A condition that is a one-element tensor made from a scalar (`m > 0` of a full reduction with
    keepdims=True) is that scalar, as such a tensor's math and stores are; a number scalar is its truth,
    as Python's `if n:` and `while k:` (non-zero, NaN too); other values as they are."""
    one = cond if isinstance(cond.type, ScalarType) else ew.one_element_scalar(self.cx(test), cond)
    if one is None:
      return cond
    return ew.truth(self.cx(test), one) if is_number_scalar(one) else one

  def _if_word(self, node) -> str:
    """'elif' for an if statement written as an elif, else 'if'."""
    loc = self.loc(node)
    return "elif" if (loc.source_line or "")[loc.col_offset:].startswith("elif") else "if"

  def visit_Assert(self, node):
    """assert on static values (shapes, dtypes, constexprs), checked while tracing, as in Pallas."""
    cond = self.eval(node.test)
    if is_value(cond):
      self.unsupported(node.test, "assert of a run-time value",
                       hint="a kernel's assert runs while tracing, so it checks static values (shapes, dtypes,"
                            " constexprs: assert x.shape[0] % 128 == 0); run-time indices are checked by"
                            " interpret mode (interpret=True), and ml.where masks values")
    try:
      holds = bool(cond)
    except Exception as e:        # an array's truth, a user object's __bool__: the user's to fix
      raise E.KernelTypeError(f"assert {self.text(node.test)}: its truth cannot be decided: {type(e).__name__}: {e}",
                              self.loc(node.test), hint="assert on a Python bool (for arrays: (a == b).all())") from None
    if not holds:
      msg = "" if node.msg is None else f": {self.eval(node.msg)}"
      raise E.StaticAssertionError(f"assert {self.text(node.test)} failed{msg}", self.loc(node),
                                   hint="the kernel's own check, on the shapes, dtypes and constexprs of this"
                                        " call: call it with arguments that satisfy it")

  def visit_Raise(self, node):
    """raise reached while tracing outside run-time control flow: the kernel's own argument check."""
    if self.ifs or node.exc is None:         # (a static if inside a run-time loop is static)
      self.unsupported(node, "raise under a run-time condition" if node.exc is not None else "a bare raise",
                       hint="a kernel raises only while tracing, under static conditions (shapes, dtypes,"
                            " constexprs): if x.shape[0] % 128: raise ValueError(...)")
    exc = self.eval(node.exc)
    what = (f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else
            exc.__name__ if isinstance(exc, type) else self.text(node.exc))
    raise E.StaticAssertionError(f"the kernel raised {what}", self.loc(node),
                                 hint="the kernel's own check, on the shapes, dtypes and constexprs of this"
                                      " call: call it with arguments that satisfy it")

  def visit_For(self, node):
    from .flow import trace_for
    trace_for(self, node)

  def visit_While(self, node):
    from .while_loops import trace_while
    as_condition(node.test)
    trace_while(self, node)

  def visit_Break(self, node):
    self._jump(node, "break", "a pipelined loop (ml.range with stages=, warp_specialize=, pingpong=) and one with a"
               " run-time step run every trip: drop those options, or make the step static, for a break under if"
               " statements; in a pipelined loop without an else, a break on its own index first in the body"
               " (if k >= n: break) cuts its trip count instead")

  def visit_Continue(self, node):
    self._jump(node, "continue", "guard the rest of the loop body with an if instead")

  def _jump(self, node, what, hint):
    """break/continue: taken while unrolling when its loop is unrolled and nothing between them
    depends on run-time values; otherwise an error."""
    loop = self.loops[-1] if self.loops else None
    if loop is not None and self.b.block is loop:
      self.jump = what
      return
    test = self.unrolled[-1] if loop is not None and self.unrolled else None
    if test is not None and what == "break" and self.ifs:     # while j < 10: (Python j) ... if x[j] == e: break
      from .stmt_hints import static_while_break_hint
      self.unsupported(node, f"{what} under a run-time condition",
                       hint=static_while_break_hint(self.text(test), self.text(self.ifs[-1].test)))
    if loop is not None:
      returns = what == "break" and written_as_return(self.loc(node))     # a kernel's return, made a break
      self.unsupported(node, "return under a run-time condition in a loop unrolled while tracing" if returns
                       else f"{what} under a run-time condition",
                       hint=f"this loop is unrolled while tracing, so only a static condition (Python values,"
                            f" constexprs) can {'end it' if what == 'break' else 'skip an iteration'}; "
                            + (f"for a run-time exit, loop at run time: for ... in range(...), which a"
                               f" {'return' if returns else 'break'} ends" if what == "break" else hint))
    if what == "break" and self.loops and written_as_return(self.loc(node)):   # a kernel's return in a loop
      self.unsupported(node, "return in a pipelined loop or one with a run-time step",
                       hint="such a loop runs every trip: set a flag (done = True) and guard the rest of the body"
                            " and what follows the loop with if statements on it, or drop stages= (or make the"
                            " step static) for a loop a return ends")
    self.unsupported(node, "break in a pipelined loop or one with a run-time step" if what == "break" and self.loops else what, hint=hint)

  # ------------------------------------------------------------ expressions
  def eval(self, node):
    method = getattr(self, "eval_" + type(node).__name__, None)
    if method is None:
      self.generic_visit(node)
    if not getattr(self.b, "none_inputs", ()):
      return method(node)
    from .none_inputs import evaluated    # b[...] of an input passed as None: said so
    return evaluated(self, node, method)

  def eval_Constant(self, node):
    return node.value

  def eval_Name(self, node):
    return self.lookup(node.id, node)

  def lookup(self, name, node):
    if name in self.env:
      v = self.env[name]
      if v is POISON:
        raise PoisonedUse(name)
      if isinstance(v, Unbound):
        self.env[name] = POISON     # report it once, at its first read
        raise E.UnboundNameError(v.message or f"{name} is possibly unbound here: {v.why}", self.loc(node),
                                 hint=v.hint or f"assign {name} before the branch or loop")
      return v
    if name in self.local_names:
      self.env[name] = POISON     # report it once, at its first read
      shadows = name in self.scope
      raise E.UnboundNameError(
          f"{name} is read before it is assigned: it is assigned in this"
          f" {'function' if self.depth else 'kernel'}, so (as in Python) it is a local name"
          + (", not the module's global of the same name" if shadows else "")
          + ("" if not self.loops else ", and an iteration does not see what the previous one assigned"
             " unless it is assigned before the loop"), self.loc(node),
          hint=(f"assign {name} before its first read" + (" (before the loop, to carry it)" if self.loops else "")
                + ("; to use the global, give the local another name" if shadows else "")))
    if name in self.scope:
      v = self.scope[name]
      self.globals_read.setdefault(name, v)
      return self.outer_value(name, v, node)
    if name in PY_BUILTINS:
      return PY_BUILTINS[name]
    if name in _DEBUG:
      return _DEBUG[name]
    self.env[name] = POISON         # report it once, at its first use
    message, hint = missing.unknown_name(name, PY_BUILTINS, known_names(self))
    err = E.UnknownNameError(message, self.loc(node), hint=hint)
    err.also = unknown_names_errors(self, getattr(self, "stmt", None), node)   # the statement's other unknown names (`v * scale + bias`)
    raise err

  def outer_value(self, name, v, node):
    """A global or closure variable as the kernel sees it: a NumPy scalar as the Python number
    it holds (as constexprs and static calls' results are); a value JAX is tracing is an error."""
    if isinstance(v, np.generic):        # numpy's and ml_dtypes' (bfloat16) scalars
      return static_number(v)
    traced = any(c.__name__.endswith("Tracer") for c in type(v).__mro__)
    if not traced and getattr(v, "shape", None) == () and hasattr(v, "item") and hasattr(v, "dtype"):
      return typed_number(v)     # a concrete 0-d JAX array: jnp.float32(0.5) at module level
    if traced:
      raise E.KernelTypeError(
          f"{name} is a value JAX is tracing (captured from the function that calls the kernel); a"
          f" kernel reads Python values, its inputs and its parameters", self.loc(node),
          hint=f"pass {name} to the kernel as an input (a run-time scalar: `{name}: ml.scalar`), or make it"
               f" a Python value (static_argnames in jax.jit)")
    return v

  def _untyped_hint(self, v) -> str:
    """Give an untyped buffer the dtype it should hold: an input's (`x.dtype`) where there is one."""
    from .types import Space
    src = next((k for k, x in self.env.items() if is_value(x) and isinstance(x.type, RefType)
                and x.type.space == Space.GMEM and isinstance(resolve(x.type.dtype), DType)), None)
    dtype = f"{src}.dtype" if src else "jnp.bfloat16"
    shape = v.type.shape if isinstance(v.type, RefType) else "shape"
    buf = f"{v.name} = " if isinstance(v.type, RefType) and v.name and v.name.isidentifier() else ""
    return (f"give the buffer, when you make it, the dtype of the data it will hold: {buf}ml.smem({shape},"
            f" {dtype})")

  def python(self, node, fn, *args):
    """fn(*args) on static values, as Python computes it: what Python raises (-x.shape, a tuple > 0)
    is the user's mistake, at `node`."""
    try:
      return fn(*args)
    except E.KernelError:
      raise
    except Exception as e:
      raise E.KernelTypeError(f"cannot compute {self.text(node)}: {e}", self.loc(node),
                              hint="static values compute as in Python") from None

  def eval_BinOp(self, node):
    # A chain `a + b + c + ...` nests to the left: walked down its left operands and computed back
    # up in a loop (in Python's order), not by recursion, so long chains need no deep stack.
    chain = [node]
    while isinstance(chain[-1].left, ast.BinOp):
      chain.append(chain[-1].left)
    value = self.operand(chain[-1].left)
    for n in reversed(chain):
      value = self.binop(type(n.op), value, self.operand(n.right), n)
    return value

  def binop(self, op, a, b, node, name=""):
    if (stepped := pointer_steps.binop(self, op, a, b, node)) is not None:   # a_ptrs += BLOCK_K (probe 62d)
      return stepped
    if not is_value(a) and not is_value(b):
      if op is ast.Add and {type(a), type(b)} == {list, tuple}:    # sums = [] ... sums + (v,): the left's kind
        return type(a)(list(a) + list(b))
      return self.python(node, typed_op(_PYBINOPS[op], a, b), a, b)   # np.uint8(7) ** 3 wraps, as NumPy's
    left, right = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
    from .static_tables import outside        # x * W of a module's NumPy table W: its register table
    a, b = outside(self, node, a), outside(self, node, b)
    if op is ast.MatMult:        # jnp.matmul's hint, with the operands as written (`x @ w_s[...].T`)
      from .jnp_dots import int8_matmul, register_dot
      from .ops.weak_lattice import weak_to_join
      a, b = weak_to_join(self.cx(node), (a, b))      # w @ x_bf16 of a weak float32 w: bfloat16, as jnp's
      if (got := register_dot(self, node, (left, right), (a, b), {}, batched=True, shown="@")) is not None:
        return got               # a_s[...] @ b_s[...] of 16-bit tiles: ml.dot, as jnp.matmul computes it
      int8_matmul(self.text(left), self.text(right), a, b, self.loc(node))
      self.unsupported(node, "the operator @", hint=self.matmul_hint(left, right, a, b))
    if op is ast.Pow:
      return power(self.cx(node, name), a, b, self.text(left), self.text(right))
    if op not in _BINOPS:
      self.unsupported(node, f"the operator {op.__name__} on register values")
    v = ew.binary(self.cx(node, name, (a, b), (left, right)), _BINOPS[op], a, b)
    return check_division(self, node, op, v) or v if op in (ast.FloorDiv, ast.Mod) else v

  def operand(self, sub):
    """An operator's operand; an `ml.` call that returns nothing (an atomic, which has no old value) is
    said to be one at the call, not as Python's error on None."""
    value = self.eval(sub)
    if value is None:
      nothing_used(self, sub)
    return value

  def eval_UnaryOp(self, node):
    x = self.operand(node.operand)
    if not is_value(x):
      return self.python(node, typed_op({ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                                         ast.Invert: operator.invert}[type(node.op)], x), x)   # -np.int32(5): int32
    if isinstance(node.op, ast.UAdd):
      return x
    if isinstance(node.op, ast.Not):
      check_not_ref(self, node.operand, x, "not")
    d = resolve(x.type.dtype) if isinstance(x.type, ScalarType) else None
    if isinstance(node.op, ast.Not) and isinstance(d, DType) and d != DType.bool_:
      return ew.compare(self.cx(node, "", (x,), (node.operand,)), ew.CmpOp.EQ, x, 0)   # not n: n == 0, as Python's
    if isinstance(node.op, ast.Invert):
      d = resolve(x.type.dtype)
      if isinstance(d, DType) and d.is_float and not isinstance(x.type, RefType):
        raise E.UnsupportedDtypeError(
            f"~ needs an integer or boolean operand, got {self.text(node.operand)} ({d})", self.loc(node),
            hint="negate a mask before it becomes a float (~(x > 0) is x <= 0); for the bits,"
                 f" ~ml.bitcast({self.text(node.operand)}, jnp.int{d.bits})")
      if resolve(x.type.dtype) == DType.bool_:
        return ew.unary(self.cx(node, "", (x,), (node.operand,)), ew.UnOp.NOT, x)
      return ew.binary(self.cx(node, "", (x,), (node.operand,)), ew.BinOp.XOR, x, -1)
    kind = ew.UnOp.NEG if isinstance(node.op, ast.USub) else ew.UnOp.NOT
    return ew.unary(self.cx(node, "", (x,), (node.operand,)), kind, x)

  def eval_Compare(self, node):
    """`a < b`; a chain `a < b < c` is `(a < b) and (b < c)` with b evaluated once: static parts
    short-circuit as in Python, run-time parts combine with &."""
    out, a, left = None, self.operand(node.left), node.left
    for k, (op, right) in enumerate(zip(node.ops, node.comparators)):
      if is_bool_scalar(out) and may_read(node.comparators[k:]) and (
          made := chain_rest(self, node, k - 1, a, out)) is not None:
        return made      # `-1 < i < s[i]`: the rest computed only where the comparisons before hold, as Python's
      b = self.operand(right)
      r = self.compare(node, type(op), a, b, (left, right))
      left = right
      if not is_value(r):
        if len(node.ops) == 1:
          return r       # one comparison: its value as Python gives it (a NumPy array's too)
        try:
          stop = not r
        except Exception as e:     # a chained comparison of arrays: Python cannot either
          raise E.KernelTypeError(f"{self.text(node)}: {type(e).__name__}: {e}", self.loc(node),
                                  hint="compare static arrays with (a == b).all()") from None
        if stop:
          return r       # False: Python stops here (so do we, even after a run-time part)
      else:
        out = r if out is None else ew.binary(self.cx(node), ew.BinOp.AND, out, r)
      a = b
    return out if out is not None else r

  def compare(self, node, op, a, b, operands=()):
    if op in (ast.In, ast.NotIn) and isinstance(b, dict) and not holds_value(a):    # "a" in d: its static keys
      return (a in b) == (op is ast.In)
    if op in (ast.In, ast.NotIn) and holds_value((a, b)) and (made := member(
        self.cx(node, "", (a,), operands[:1]), a, b, op is ast.NotIn)) is not None:
      return made          # `k in (1, 2, 4)` of a run-time scalar: Python's, k == 1 | k == 2 | k == 4
    if op in (ast.Is, ast.IsNot) and _dtype_like(a) and _dtype_like(b):   # x.dtype is tl.float32
      same = a == b if isinstance(a, DType) else b == a if isinstance(b, DType) else np.dtype(a) == np.dtype(b)
      return bool(same) == (op is ast.Is)     # Triton's dtypes are singletons; x.dtype here is numpy's object
    if not is_value(a) and not is_value(b):
      if op in (ast.Is, ast.IsNot):           # identity (`after is None` of a tuple of run-time ids): Python's
        return (a is b) == (op is ast.Is)
      if holds_value(a) or holds_value(b):     # Python would compare Value objects: silently False
        self.unsupported(node, "comparing tuples that hold runtime values",
                         hint="compare the scalars one by one: (i == 0) & (j == 1)")
      return self.python(node, _PYCMPOPS[op], a, b)
    if op in (ast.Is, ast.IsNot) and (a is None or b is None):
      return op is ast.IsNot            # a ref or register value is never None, as in Python
    if op not in _CMPOPS:
      word = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}.get(op, op.__name__)
      held = b if op in (ast.In, ast.NotIn) and is_value(b) and isinstance(b.type, TensorType) else \
          a if is_value(a) else b
      hint = "compare values with == and != (`is` compares Python objects, which a traced value is not)"
      if op in (ast.In, ast.NotIn):
        hint = in_hint(self, op, a, b, operands)
      self.unsupported(node, f"`{word}` on {kind_of(held)}", hint=hint)
    return ew.compare(self.cx(node, "", (a, b), operands), _CMPOPS[op], a, b)

  def eval_BoolOp(self, node):
    """Python's short-circuit, evaluated while tracing: a static operand decides whether the next
    one is evaluated; after a run-time boolean scalar, the rest run under a run-time if
    (frontend/short_circuit.py); another run-time value may only be the last one evaluated."""
    is_and = isinstance(node.op, ast.And)
    for i, sub in enumerate(node.values):
      check_not_ref(self, sub, v := self.eval(sub), "and" if is_and else "or")
      if getattr(node, "condition", False) and is_number_scalar(v):
        v = ew.truth(self.cx(sub), v)     # `if c and n[1]:`, `while k or j:`: only the operands' truth counts
      if is_value(v):
        if i == len(node.values) - 1:
          return v
        if not is_bool_scalar(v) and (made := tensor_and_or(self, node, i, v)) is not None:
          return made         # masks: Triton's elementwise `and`, both computed (m & k)
        if is_bool_scalar(v) and (made := short_circuit(self, node, i, v)) is not None:
          return made         # the operands after v computed only where v does not decide, as in Python
        if is_number_scalar(v) and (made := number_and_or(self, node, i, v)) is not None:
          return made         # `k or 1`: Python's value, k if k else 1
        if is_bool_scalar(v) and (walrus := walrus_hint(self, node, i)) is not None:
          self.unsupported(node, "a walrus (:=) after a run-time and/or that binds another kind of value than its"
                           " name held", hint=walrus)
        if is_bool_scalar(v) and (made := tensor_and_or(self, node, i, v)) is not None:
          return made         # `pid < n and offs < N`: a scalar and a mask, both computed, as Triton's
        if is_bool_scalar(v) and (hint := not_boolean_hint(self, node, i)) is not None:
          self.unsupported(node, "'and'/'or' of a run-time boolean and a value that is not one", hint=hint)
        op = " & " if is_and else " | "
        parts = [self.text(x) if isinstance(x, (ast.Name, ast.Call, ast.Subscript, ast.Attribute,
                                                ast.Constant)) else f"({self.text(x)})"
                 for x in node.values[i:]]
        if resolve(v.type.dtype) != DType.bool_:     # numbers: their truth, as Python's and (2 & 5 is 0)
          parts = [p if isinstance(x, ast.Compare) else f"({p} != 0)" for p, x in zip(parts, node.values[i:])]
        what = "run-time scalars" if isinstance(getattr(v, "type", None), ScalarType) else "register values"
        self.unsupported(node, f"'and'/'or' on {what}",
                         hint=f"use & and | on booleans (both sides are computed): {op.join(parts)}")
      if (not v) if is_and else v:
        return v
    return v

  def nonzero(self, test) -> str:
    """`k != 0` for a condition `k` that is a number, not a boolean (Python's truthiness)."""
    text = self.text(test)
    simple = isinstance(test, (ast.Name, ast.Call, ast.Subscript, ast.Attribute, ast.Constant))
    return f"{text if simple else f'({text})'} != 0"

  def eval_IfExp(self, node):
    cond = self.eval(node.test)
    if is_value(cond):
      check_not_ref(self, node.test, cond, "ifexp", (self.text(node.body), self.text(node.orelse)))
      from .branches import if_expression
      one = self.one_element_condition(node.test, cond)      # a number scalar by its truth, as Python's
      if is_bool_scalar(one) and (made := if_expression(self, node, one, bools_as_numbers=True)) is not None:
        return made         # `a if c else b` as the if statement `if c: t = a`, `else: t = b`
      test = self.text(node.test) if resolve(cond.type.dtype) == DType.bool_ else self.nonzero(node.test)
      from .branches import ifexp_hint
      self.unsupported(node, "a conditional expression on a runtime value",
                       hint=ifexp_hint(self, node, test, isinstance(one.type, ScalarType)))
    return self.eval(node.body if cond else node.orelse)


def _dtype_like(v) -> bool:
  """A dtype as a kernel sees one: ml's (tl.float32), numpy's (x.dtype), a NumPy scalar type or jnp's."""
  return isinstance(v, (DType, np.dtype)) or isinstance(v, type) and issubclass(v, np.generic) \
      or type(v).__name__ == "_ScalarMeta"
