"""Calls of `@ml.inline` helpers: the helper's body is traced in place, in its own scope.

Its statements are located in the helper's own source, so a mistake inside it is
reported where it is; the caller's statement is then skipped without a second error.
"""
from __future__ import annotations

import ast
import inspect

from . import errors as E
from .env import PoisonedUse, local_names
from .jumps import without_return
from .ops.base import bind_message
from .source import read_function

MAX_DEPTH = 16


def call_inline(tracer, node, fn, args, kwargs):
  loc = tracer.loc(node)
  if tracer.depth >= MAX_DEPTH:
    name = getattr(fn.fn, "__name__", "the helper")
    if any(n == name for _, n in tracer.b.inline_stack):     # a recursion on static values ends while tracing
      raise E.UnsupportedSyntaxError(
          f"@ml.inline calls nest more than {MAX_DEPTH} deep here: {name} calls itself, and a recursion must end"
          f" within {MAX_DEPTH} calls (its depth decided by static values)", loc,
          hint=f"make it end sooner (fewer than {MAX_DEPTH} levels), or unroll it into a loop: for _ in"
               f" ml.static_range(depth): ... (or a run-time loop, range(n), for a depth known only at run time)")
    raise E.UnsupportedSyntaxError(
        f"@ml.inline calls nest more than {MAX_DEPTH} deep here", loc,
        hint="call fewer helpers inside one another: fold a level into its caller")
  if fn.parsed is None:
    fn.parsed = read_function(fn.fn, "@ml.inline")
  src, tree, scope = fn.parsed
  from .language import BoundInline
  if isinstance(fn, BoundInline):      # model.step(v): the instance is the method's first argument
    args = (fn.obj, *args)
  sig = fn.signature if isinstance(fn, LocalFunction) else inspect.signature(fn.fn)
  try:
    bound = sig.bind(*args, **kwargs)
  except TypeError as e:
    raise E.KernelTypeError(f"{tree.name}(...): {bind_message(sig, kwargs, e)}", loc,
                            hint=f"{tree.name}{sig}") from None
  bound.apply_defaults()
  child = tracer.child(src, scope)
  from .loc import package_file
  ours = tracer.at_call is not None or package_file(src.filename)
  if ours:              # mgpu_dsl's own helper (a jnp form's): located at the user's call, which it computes
    child.at_call, child.call_text = loc, tracer.call_text or tracer.text(node)
  child.env = {**fn.closure(), **bound.arguments} if isinstance(fn, LocalFunction) else dict(bound.arguments)
  from .none_inputs import passed_on
  child.none_names = passed_on(tracer, node, sig, bound, isinstance(fn, BoundInline))   # (an input passed as None)
  before = len(tracer.errors)
  child.local_names = local_names(tree.body)
  child.body = tree.body
  if not ours:           # (ops of mgpu_dsl's helpers are located at the call: no call of the helper to note)
    tracer.b.inline_stack.append((str(loc), tree.name))
  try:
    # a `return` at the end or under static conditions ends it; under run-time ifs, each path
    # binds the returned value (frontend/jumps.py)
    bare = all(n.value is None for n in ast.walk(tree) if isinstance(n, ast.Return))   # a helper that returns nothing
    if (y := next((n for n in ast.walk(tree) if isinstance(n, (ast.Yield, ast.YieldFrom))), None)) is not None:
      raise E.UnsupportedSyntaxError(       # (a plain generator of the user's, probe 52b: not "gives no value")
          f"{tree.name} yields its values: a generator is not a helper a kernel can call", child.loc(y),
          hint=f"return them instead, as a list or tuple built in {tree.name} (return [..., ...]), and iterate that")
    if bare and tracer.expr_stmt is None:      # ... whose value is used: `y = step(v)`, `o[...] = step(v)`
      raise E.KernelTypeError(
          f"{tree.name}(...) gives no value: {tree.name} has no return statement with a value, so its call is"
          f" None", loc, hint=f"end {tree.name} with `return <its result>`, or, where it only writes refs, call it"
                              f" as a statement of its own: {tracer.text(node)}")
    from .with_scopes import returns_opened    # (a return under a run-time if in a `with jax.named_scope(...)`)
    child.run_body(without_return(returns_opened(child, tree.body), None if bare else _value(tree.name),
                                  tuple(bound.arguments)))
  finally:
    if not ours:
      tracer.b.inline_stack.pop()
  for e in tracer.errors[before:]:
    _in_words(e, tree.name)
    if ours and tracer.at_call is None:
      _as_called(e, child.call_text)
  if len(tracer.errors) > before or child.failed:
    at = tracer.loc(node)        # which call of the helper the mistake comes from
    for e in tracer.errors[before:] if not ours else ():
      note = f"{at}: in this call of {tree.name}"
      if note not in e.notes:    # (recursion: one note, not one per level)
        e.notes = tuple(e.notes) + (note,)
    raise PoisonedUse()          # reported inside the helper (a repeat: already); skip the caller's statement
  return child.returned


def _as_called(err, call) -> None:
  """A mistake of an operator inside mgpu_dsl's own helper ("- on v of shape (8, 64) and ...", the helper's `p - q`)
  told as the user's call: "jnp.logaddexp on v of shape (8, 64) and ..."."""
  import re
  op = re.match(r"(\*\*|//|[-+*/%@&|^]|<<|>>|[<>=!]=|[<>]) on ", err.message)
  called = re.match(r"[\w.]+", call)
  if op and called:
    err.message = f"{called.group(0)} on {err.message[op.end():]}"
    err.args = (err.message,)


def _value(name) -> str:
  """The name that holds what a helper whose returns sit under run-time ifs returns (not an identifier)."""
  return f"(the value {name} returns)"


def _in_words(err, name) -> None:
  """A mistake about that name (two returns of different types) told in the user's words."""
  v = _value(name)
  if v not in err.message + (err.hint or "") + "".join(err.notes):
    return
  err.message = err.message.replace(v, f"the value {name} returns")
  err.args = (err.message,)
  err.hint = err.hint and err.hint.replace(f"{v} = ", "return ").replace(
      f"give {v} the same kind of value in both branches", "return the same kind of value on every path").replace(
      v, f"the value {name} returns")
  err.notes = tuple(n.replace(f"{v} is assigned here", f"{name} returns here").replace(v, f"what {name} returns")
                    for n in err.notes)


class _Fn:
  """What a LocalFunction's `fn` shows of it: its name."""
  def __init__(self, name):
    self.__name__ = self.__qualname__ = name


class LocalFunction:
  """A lambda or a def in the kernel's body (`f = lambda t: t * 2`, `def step(v): ...`): traced in
  place where it is called, as an @ml.inline helper, reading the names of the body that defined it
  as they are at the call (Python's closures), its parameters' defaults evaluated where it is defined."""

  def __init__(self, tracer, tree: ast.FunctionDef, name: str):
    self.definer, self.parsed, self.fn = tracer, (tracer.src, tree, tracer.scope), _Fn(name)
    a, P = tree.args, inspect.Parameter
    positional = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs] + [(x, P.POSITIONAL_OR_KEYWORD) for x in a.args]
    defaults = [P.empty] * (len(positional) - len(a.defaults)) + [tracer.eval(d) for d in a.defaults]
    params = [P(x.arg, kind, default=d) for (x, kind), d in zip(positional, defaults)]
    if a.vararg:
      params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += [P(x.arg, P.KEYWORD_ONLY, default=P.empty if d is None else tracer.eval(d))
               for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
      params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    self.signature = inspect.Signature(params)

  def __call__(self, *args, **kwargs):
    """Called by Python on static values (`sorted(parts, key=lambda k: -k)`): traced there too."""
    return call_inline(self.definer, self.parsed[1], self, args, kwargs)

  def closure(self) -> dict:
    """The defining body's names as they are now (a late-binding closure, as Python's)."""
    return dict(self.definer.env)


def local_function(tracer, node):
  """The value of a lambda, or of a def statement in a kernel's body (None: a def it does not take,
  decorated otherwise than with @ml.inline, for the caller to report)."""
  if isinstance(node, ast.Lambda):
    ret = ast.copy_location(ast.Return(value=node.body), node.body)
    tree = ast.copy_location(ast.FunctionDef(
        name=tracer.pending_name or "<lambda>", args=node.args, body=[ret], decorator_list=[], returns=None,
        type_comment=None, **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {})), node)
    return LocalFunction(tracer, tree, tree.name)
  if any((d.id if isinstance(d, ast.Name) else getattr(d, "attr", None)) != "inline" and not _jax_transform(tracer, d)
         for d in node.decorator_list):
    return None
  return LocalFunction(tracer, node, node.name)


def _jax_transform(tracer, decorator) -> bool:
  """Whether a def's decorator is JAX's jit / named_call / checkpoint / named_scope (frontend/jax_wrapped.py)."""
  from .jax_wrapped import transform_decorator
  try:
    return transform_decorator(tracer.eval(decorator))
  except Exception:        # (a decorator the tracer cannot evaluate: the def's own MG001 says what to write)
    return False
