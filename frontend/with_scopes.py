"""`with` statements in a kernel's body whose context manager only names or annotates what runs inside it
(`with jax.named_scope("qk"):`, a profiler annotation, `jax.ensure_compile_time_eval()`, where everything
static is computed while tracing anyway): the body is traced as if written without the with. Any other
context manager stays the tracer's UnsupportedSyntaxError, whose hint says to drop the with."""
from __future__ import annotations

import ast

# (module, name) of the context managers whose body means what it means without them
_NAMING = {("jax._src.api", "named_scope"), ("jax._src.core", "ensure_compile_time_eval"),
           ("jax._src.profiler", "TraceAnnotation"), ("jax._src.profiler", "StepTraceAnnotation"),
           ("contextlib", "nullcontext")}


def _manager_names(tracer, item) -> bool:
  """Whether the with item is a call of one of _NAMING's context managers, bound to no name (only the function
  called is evaluated)."""
  call = item.context_expr
  if item.optional_vars is not None or not isinstance(call, ast.Call):
    return False
  try:
    fn = tracer.eval(call.func)
  except Exception:
    return False
  return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", getattr(fn, "__name__", None))) in _NAMING


def _naming(tracer, item) -> bool:
  """Whether the with item is a call of one of _NAMING's context managers, bound to no name, of no starred
  arguments; its arguments are evaluated (a mistake in them is still the user's), their values unused."""
  call = item.context_expr
  if not _manager_names(tracer, item) or any(isinstance(a, ast.Starred) for a in call.args) or any(
      k.arg is None for k in call.keywords):
    return False
  for a in [*call.args, *(k.value for k in call.keywords)]:
    for part in (a.values if isinstance(a, ast.JoinedStr) else [a]):    # (a scope's f"step{i}" of a loop's i)
      if isinstance(part, ast.FormattedValue):
        tracer.eval(part.value)
      elif not isinstance(part, ast.Constant):
        tracer.eval(part)
  return True


def trace_with(tracer, node) -> bool:
  """Trace `node`'s body where each of its items only names what runs inside it; False otherwise."""
  if not all(_naming(tracer, item) for item in node.items):
    return False
  tracer.run_body(node.body)
  return True


def opened(tracer, loop):
  """`loop` (a for or while) with each naming with-statement of its body that holds a break or continue of it
  replaced by the with's body, so the jumps' rewriting (frontend/jumps.py, which sees through ifs) meets them
  as it meets any: `for ...: with jax.named_scope("step"): if done: break`. Only the context manager's function
  is evaluated here (its arguments may use names the body binds); other withs are left to trace_with."""
  import copy
  from .jumps import JUMPS, holds
  new, changed = _spliced(tracer, loop.body, lambda stmts: holds(stmts, JUMPS))
  if not changed:
    return loop
  loop = copy.copy(loop)
  loop.body = new
  return loop


def returns_opened(tracer, stmts):
  """An @ml.inline helper's body with each naming with-statement that holds a return replaced by its body, so the
  returns' rewriting (jumps.without_return, which sees through ifs) meets a return under a run-time if in it:
  `with jax.named_scope("gate"): if t > 0: return v * 2` (probe 50d; was MG001)."""
  new, _ = _spliced(tracer, stmts, lambda body: any(isinstance(n, ast.Return) for st in body for n in ast.walk(st)))
  return new


def _spliced(tracer, stmts, holding):
  """`stmts` with each naming with-statement (through ifs) whose body is `holding` replaced by that body;
  (the statements, whether any was)."""
  import copy

  def naming(st):
    return isinstance(st, ast.With) and holding(st.body) and all(_manager_names(tracer, item) for item in st.items)

  def body(stmts):
    out, changed = [], False
    for st in stmts:
      if naming(st):
        inner, _ = body(st.body)
        out += inner
        changed = True
      elif isinstance(st, ast.If):
        then, a = body(st.body)
        other, b = body(st.orelse)
        if a or b:
          st = copy.copy(st)
          st.body, st.orelse = then, other
          changed = True
        out.append(st)
      else:
        out.append(st)
    return out, changed

  return body(stmts)
