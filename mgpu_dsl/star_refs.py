"""A kernel whose refs are a star parameter, as `pallas_call`'s kernels take them: `def kernel(*refs)` with
`x_ref, y_ref, o_ref = refs`, or `def kernel(x_ref, *out_refs)`. The star parameter is the tuple of the refs
its named parameters leave, the inputs then the outputs; how many is a call's (its inputs, and the leaves of
out_shape for them), so each count is served by a derived kernel whose parsed signature names them
`refs[0]`, `refs[1]`, ... (as mistakes name them) and binds `refs` to their tuple (frontend/compile.py's
`trees`, as a pytree input's structure)."""
from __future__ import annotations

import dataclasses
import functools

from . import calling, derived_kernels, meta_calls


def spread(pk, count: int):
  """The parsed kernel `pk` with its star parameter as `count` refs of its own (none where the named
  parameters take every ref: the count errors of the named signature then say what is missing)."""
  star, named = pk.vararg, list(pk.ref_params)
  leaves = [f"{star}[{k}]" for k in range(max(0, count - len(named)))]
  return dataclasses.replace(pk, ref_params=named + leaves, vararg=None, trees={**pk.trees, star: (tuple, leaves)})


def count(kernel, args, constexprs, loc) -> int:
  """The refs of a call on `args`: its inputs and out_shape's outputs for them. Where out_shape's callable takes
  fewer inputs than the call passes (`lambda x: x` called with two), the refs it describes (then the call's count
  error says "takes 1 input (refs[0]), then 1 output (refs[1])"); one output where it gives none the count could
  use (its own mistakes are reported by the derived kernel's call, in its words)."""
  from . import signature
  n_out = outputs(kernel, args, constexprs, loc)
  if n_out is not None:
    return len(args) + n_out
  out, pk = kernel.out_shape, kernel.parsed
  took = signature.arity(out, pk.constexpr_params) if callable(out) and not hasattr(out, "shape") else None
  if took is not None and took[1] < len(args):
    n_out = outputs(kernel, args[:int(took[1])], constexprs, loc)
    if n_out is not None:
      return int(took[1]) + n_out
  return len(args) + 1


def outputs(kernel, args, constexprs, loc) -> int | None:
  """How many outputs out_shape gives for `args`, or None where it gives none the count could use."""
  import jax
  pk, out = kernel.parsed, kernel.out_shape
  if out is None:
    return None
  if callable(out) and not hasattr(out, "shape"):
    meta = {**{c: pk.defaults[c] for c in pk.constexpr_params if c in pk.defaults}, **constexprs}
    names = (list(pk.ref_params) + [f"{pk.vararg}[{k}]" for k in range(len(args))])[:len(args)]
    try:
      out = meta_calls.call_with_meta(out, args, meta, "out_shape", loc, names)
    except Exception:
      return None
  leaves = jax.tree.leaves(out)
  return len(leaves) if leaves and all(calling.is_array_like(l) for l in leaves) else None


def star_call(kernel, args, constexprs, loc):
  """(the kernel of this call's count of refs, the args, the constexprs) for a kernel with a star parameter,
  else None."""
  pk = kernel.parsed
  if getattr(pk, "vararg", None) is None:
    return None
  n = count(kernel, args, constexprs, loc)
  key = ("star", n)
  if key not in kernel._pytree_kernels:
    kernel._pytree_kernels[key] = _derive(kernel, n)
  return kernel._pytree_kernels[key], args, constexprs


def _derive(kernel, count):
  """A copy of `kernel` whose parsed signature has the star parameter spread over `count` refs in all."""
  return derived_kernels.derive(kernel, functools.partial(spread, count=count), f"star {count}")
