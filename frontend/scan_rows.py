"""A long `lax.scan` whose body returns ys to stack (probe 53f): a recurrence written as jax.lax writes it,
`_, ys = lax.scan(step, h0, (a_ref[...], b_ref[...]))` over hundreds of steps (Mamba's selective scan, an RNN),
then `y_ref[...] = ys`. A kernel unrolls at most SCAN_UNROLL trips (frontend/lax_flow.py), so a longer scan runs as
a run-time loop, and its ys, which no register tensor holds while the loop runs, are stored a row a trip into an
SMEM buffer of n rows per leaf, read back whole after the loop: the first trip is traced on its own (peeled), which
gives each leaf's shape and dtype, then the buffers are made and the other trips run as the loop. Only a body whose
returns are written `return carry, y` with a y other than None takes this path (returns of None keep the loop of
probe 51i, so kernels that compiled compile as before)."""
from __future__ import annotations

import ast
import functools


def returns_ys(fn) -> bool:
  """Whether the scan body `fn`, a def or lambda of the kernel, returns a pair whose y is written as something
  other than None in some return (not inside functions it defines)."""
  from .inline import LocalFunction
  while isinstance(fn, functools.partial):
    fn = fn.func
  if not isinstance(fn, LocalFunction):
    return False
  tree = fn.parsed[1]
  if isinstance(tree, ast.Lambda):
    rets = [tree.body]
  else:
    rets, todo = [], list(tree.body)
    while todo:
      n = todo.pop()
      if isinstance(n, ast.Return) and n.value is not None:
        rets.append(n.value)
      todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, (ast.FunctionDef, ast.Lambda,
                                                                            ast.AsyncFunctionDef, ast.ClassDef)))
  return any(isinstance(r, ast.Tuple) and len(r.elts) == 2 and not (
      isinstance(r.elts[1], ast.Constant) and r.elts[1].value is None) for r in rets)


def _leaves(y, path=""):
  """[(path, leaf)] of a y: a value, or a tuple or list of them (nested); None leaves skipped."""
  if isinstance(y, (tuple, list)):
    return [p for k, v in enumerate(y) for p in _leaves(v, f"{path}[{k}]")]
  return [] if y is None else [(path, y)]


def _rebuilt(y, rows, path=""):
  if isinstance(y, (tuple, list)):
    return type(y)(_rebuilt(v, rows, f"{path}[{k}]") for k, v in enumerate(y))
  return None if y is None else rows[path]


def stacked_loop(tracer, node, n, reverse, tmp, new, arg, x, back, values, words, body, run, too_many):
  """(the carry as the loop holds it, ys): the scan's first trip (its last with `reverse`), its y stored as row j0
  of an SMEM buffer per leaf, then the run-time loop of the other trips storing row j, the buffers read whole.
  `new`, `arg`, `x`, `back`: the loop's statements' pieces (lax_flow._scan_loop); `run`: lax_flow._run;
  `too_many(why)`: the MG003 of ys the kernel does not stack, saying why."""
  from .ops import BUILTINS
  from .ops.base import is_value
  first = n - 1 if reverse else 0
  one = f"{tmp}j = {first}\n{new}, {tmp}y = {tmp}f({arg}, {x})\n{back}"
  carry, y0 = run(tracer, node, one, dict(values), tmp, words, body, [f"{tmp}r", f"{tmp}y"])
  leaves = _leaves(y0)
  if not leaves or not all(is_value(v) for _, v in leaves):
    raise too_many("which a kernel stacks past 64 steps only where each is a register value (a tensor or a scalar)")
  import math
  from . import hw
  if sum(n * math.prod(v.type.shape) * v.type.dtype.itemsize for _, v in leaves) > hw.SMEM_LIMIT // 2:
    raise too_many(f"{n} rows of {' and '.join(_shown(v) for _, v in leaves)}: more than the half of a kernel's SMEM"
                   " that a long scan's ys may take")     # (rows no SMEM buffer holds beside the kernel's others)
  trips = f"{n - 2}, -1, -1" if reverse else f"1, {n}"
  more = {f"{tmp}r": carry, f"{tmp}smem": BUILTINS["smem"]}
  src = []
  for k, (path, v) in enumerate(leaves):
    more[f"{tmp}y0_{k}"] = v
    src.append(f"{tmp}b{k} = {tmp}smem(({n},) + {tuple(v.type.shape)!r}, {tmp}t{k})\n{tmp}b{k}[{first}] = {tmp}y0_{k}\n")
    more[f"{tmp}t{k}"] = v.type.dtype
    words[f"{tmp}b{k}"] = "ys"
  src.append(f"for {tmp}j in {tmp}range({trips}):\n  {new}, {tmp}y = {tmp}f({arg}, {x})\n")
  src += [f"  {tmp}b{k}[{tmp}j] = {tmp}y{path}\n" for k, (path, _) in enumerate(leaves)]
  src.append(back)
  src += [f"{tmp}s{k} = {tmp}b{k}[...]\n" for k in range(len(leaves))]
  m = len(leaves)
  out = run(tracer, node, "".join(src), {**values, **more}, tmp, words, body,
            [f"{tmp}r"] + [f"{tmp}s{k}" for k in range(m)] + [f"{tmp}b{k}" for k in range(m)])
  for k, buf in enumerate(out[1 + m:]):
    buf.name = f"the ys of lax.scan{'' if m == 1 else f' (leaf {k})'}"     # (SMEM plans name it)
  return out[0], _rebuilt(y0, {path: v for (path, _), v in zip(leaves, out[1:1 + m])})


def _shown(v):
  from .types import dtype_name
  return f"{dtype_name(v.type.dtype)}{list(v.type.shape)}"
