"""Inputs passed as None (probe 52b): Triton's optional pointer, `k(x, w, None)` with `if b is not None:` in the
kernel, and Pallas's optional ref (a pytree with no leaves). The parameter is Python's None while tracing, so
`b is None` decides static branches, and each call compiles the kernel for what it passes (the None is part of
the specialisation's structure, mgpu_dsl/pytree_inputs.py). A use of it that the kernel does not guard (`b[...]`,
`b.shape`, `b + offs`, `ml.copy(b, s)`) fails on a Python None; `reraised` puts that error in the user's words."""
from __future__ import annotations

import ast

from . import errors as E


def _operands(node):
  """The names `node` itself reads (not those deeper in its subexpressions)."""
  if isinstance(node, ast.Call):
    yield from node.args
    yield from (k.value for k in node.keywords)
    if isinstance(node.func, ast.Attribute):
      yield node.func.value                  # b.astype(...), b.load(...)
    return
  yield from ast.iter_child_nodes(node)


def _names(tracer) -> dict:
  """{name: the input it is} of the names bound to an input passed as None in `tracer` (a helper's parameters that
  the call passed one to, by name)."""
  if not tracer.depth:
    return {n: n for n in getattr(tracer.b, "none_inputs", ())}
  return getattr(tracer, "none_names", {})


def passed_on(tracer, node, sig, bound, method: bool) -> dict:
  """{parameter: input} of a helper's parameters that its call `node` passes an input passed as None by name."""
  names = _names(tracer) if getattr(tracer.b, "none_inputs", ()) else {}
  if not names or not isinstance(node, ast.Call):
    return {}
  pos = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  pairs = [(k.arg, k.value) for k in node.keywords if k.arg]
  for i, a in enumerate(node.args):
    if isinstance(a, ast.Starred) or i + method >= len(pos):
      break
    pairs.append((pos[i + method], a))
  return {p: names[a.id] for p, a in pairs if isinstance(a, ast.Name) and a.id in names
          and tracer.env.get(a.id, 0) is None and bound.arguments.get(p, 0) is None}


def reraised(tracer, node, err: E.KernelError) -> E.KernelError:
  """`err`, raised at `node`, replaced by the error of a use of an input passed as None where `node` uses one
  directly and the error is about `node` itself; else `err`."""
  names = _names(tracer)
  if not names or isinstance(node, (ast.Compare, ast.BoolOp, ast.IfExp)) or err.loc != tracer.loc(node):
    return err
  hit = next((n.id for n in _operands(node) if isinstance(n, ast.Name) and n.id in names
              and n.id in tracer.env and tracer.env[n.id] is None), None)
  if hit is None:
    return err
  shown = hit if names[hit] == hit else f"{hit}, which is {names[hit]}"
  return E.KernelTypeError(
      f"{tracer.text(node)} uses {shown}, an input the call passed as None", err.loc,
      hint=f"guard its uses with `if {hit} is not None:` (a static test: each call compiles the kernel for what it"
           f" passes), or pass an array for {names[hit]}")


def evaluated(tracer, node, method):
  """`method(node)` (the tracer's eval_ of `node`), its KernelError put in these words where it is one of a use."""
  try:
    return method(node)
  except E.KernelError as e:
    got = reraised(tracer, node, e)
    if got is e:
      raise
    raise got from None
