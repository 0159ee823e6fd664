"""The hint of a jnp / lax / NumPy function called on a ref (probe 70b): `jnp.nextafter(x, 1.0)` of an input ref `x`
said "jnp.nextafter has no form in a kernel" (it has one, of register values) and `jnp.hypot(x, y)` of refs the
formula that overflows; the fix is the read the ref was missing, written into the user's call."""
from __future__ import annotations

import ast

from .ops.base import is_value
from .types import RefType


def read_first(tracer, node, fn, args, kwargs, hint) -> str:
  """`jnp.nextafter(x[...], 1.0)`: the call with each argument that is a ref read whole, where the function computes
  of register values (a jnp / lax function jnp_calls maps); `hint` otherwise."""
  from .jnp_calls import library, maps
  refs = [is_value(a) and isinstance(a.type, RefType) for a in args]
  kw_refs = {k: is_value(v) and isinstance(v.type, RefType) for k, v in kwargs.items()}
  if not (any(refs) or any(kw_refs.values())) or library(fn) is None or not maps(fn):
    return hint
  if not (hint.startswith(("use ml.", "kernels call", "no ml.")) or "has no form in a kernel" in hint):
    return hint           # a hint of its own (jnp.take(t, ids) of a ref: the gather t[ids[...]])
  if any(isinstance(a, ast.Starred) for a in node.args) or len(node.args) != len(args):
    return hint
  read = lambda t, is_ref: f"{t}[...]" if is_ref else t
  parts = [read(tracer.text(a), r) for a, r in zip(node.args, refs)]
  parts += [f"{k.arg}={read(tracer.text(k.value), kw_refs.get(k.arg, False))}" for k in node.keywords if k.arg]
  names = ", ".join(tracer.text(a) for a, r in zip(node.args, refs) if r)
  return (f"read the ref into registers first: {tracer.text(node.func)}({', '.join(parts)}) ({names}[...] is its"
          " elements; the function computes of register values)")
