"""Every name a statement reads that nothing defines (`out[...] = v * scale + bias - offset`): the tracer
stops a statement at its first mistake, so the others are found here and reported with it, each once."""
from __future__ import annotations

import ast

from . import errors as E
from . import missing
from .calls import _DEBUG, PY_BUILTINS
from .env import POISON


def known_names(tracer) -> list:
  """The names a kernel's code may mean where it reads one nothing defines: its own (parameters, locals)
  and its module's (not modules or kernels), for a typo's `did you mean`."""
  import types
  kernel_or_module = lambda v: isinstance(v, types.ModuleType) or hasattr(v, "check") and hasattr(v, "fn")
  return [*(k for k, v in tracer.env.items() if v is not POISON), *tracer.local_names,
          *(k for k, v in tracer.scope.items() if not kernel_or_module(v))]


def unknown_names_errors(tracer, stmt, node) -> list:
  """An UnknownNameError for each name after `node` (None: anywhere) in the statement `stmt` that nothing
  defines, each then reported once (its later reads are poisoned, as the first one's)."""
  out = []
  for n in _unknown_names_after(tracer, stmt, node):
    tracer.env[n.id] = POISON
    message, hint = missing.unknown_name(n.id, PY_BUILTINS, known_names(tracer))
    out.append(E.UnknownNameError(message, tracer.loc(n), hint=hint))
  return out


def _unknown_names_after(tracer, stmt, node):
  """The names, after `node` (None: anywhere), that `stmt` (an if's or loop's header only) reads and that
  nothing defines: not the kernel's (assigned anywhere in it), its module's or a builtin, nor bound in the
  statement itself (a comprehension's or lambda's variable, a walrus)."""
  if stmt is None or node is not None and not any(n is node for n in ast.walk(stmt)):
    return []                   # (not this statement's name: one of a helper it called)
  parts = [stmt] if not isinstance(stmt, (ast.If, ast.While, ast.For, ast.With)) else \
      [getattr(stmt, f) for f in ("test", "iter", "items") if getattr(stmt, f, None) is not None]
  nodes = [n for p in parts for n in (ast.walk(p) if isinstance(p, ast.AST) else
                                      (m for q in p for m in ast.walk(q)))]
  bound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
  bound |= {a.arg for n in nodes if isinstance(n, ast.arguments) for a in n.posonlyargs + n.args + n.kwonlyargs}
  seen, out = {node.id} if node is not None else set(), []
  for n in sorted((n for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)),
                  key=lambda n: (n.lineno, n.col_offset)):
    if node is not None and (n.lineno, n.col_offset) <= (node.lineno, node.col_offset) or n.id in seen \
        or n.id in bound:
      continue
    seen.add(n.id)
    if not (n.id in tracer.env or n.id in tracer.local_names or n.id in tracer.scope or n.id in PY_BUILTINS
            or n.id in _DEBUG):
      out.append(n)
  return out
