"""Checks of a run-time loop's `range`: wrapped ranges (`reversed`, `zip`, `enumerate` of a run-time
range) and static bounds that overflow the loop's counter (frontend/flow.py traces the loop); whether
its body may make a TMA load (what `num_stages=`'s hint says); a while whose condition never changes."""
from __future__ import annotations

import ast

from . import errors as E
from .builder import Call
from .dtypes import DType
from .ops import control as ctl
from .ops.base import is_value
from .ops.elementwise_checks import check_python_int
from .jax_wrapped import _filled
from .types import dtype_name, resolve


def check_wrapped_range(tracer, node, it, fn) -> None:
  """`for c in reversed(range(n))`, zip(range(n), ...), enumerate(range(n)) with a run-time n (or
  over ml.range): a runtime loop counts upwards over its own index only."""
  if not isinstance(it, ast.Call) or not isinstance(fn, type(len)) and fn not in (reversed, zip, enumerate):
    return
  for a in it.args:
    inner = tracer.eval(a.func) if isinstance(a, ast.Call) else None
    if inner not in (range, ctl.range):
      continue
    if inner is range and not any(is_value(x) for x in tracer.eval_spread(a.args)):
      continue              # range(4): a static sequence, unrolled
    called, rng = getattr(fn, "__name__", "it"), tracer.text(a)
    why = "has a run-time bound" if inner is range else "is a runtime loop"
    c = node.target.id if isinstance(node.target, ast.Name) else "c"
    k = "k" if c != "k" else "j"
    bounds = [tracer.text(x) for x in a.args]
    if fn is reversed:
      last = None
      if len(bounds) == 1 or len(bounds) == 2 and bounds[0] == "0":
        last = f"{bounds[-1]} - 1"
      elif len(bounds) == 2:
        off = int(bounds[0]) - 1 if bounds[0].isdigit() else None
        last = (bounds[1] if off == 0 else f"{bounds[1]} + {off}" if off is not None
                else f"{bounds[0]} + {bounds[1]} - 1")
      hint = (f"count upwards and compute the descending index inside: for {k} in {rng}: {c} = {last} - {k}"
              if last else
              "count upwards and compute the descending index inside: for k in range(n): c = n - 1 - k")
      values = tracer.eval_spread(a.args)
      if any(is_value(x) and resolve(x.type.dtype) == DType.u32 for x in values):
        # (uint32 bounds: reversed(range(...)) of int32 ones runs; its count of uint32 ones would wrap)
        wide = ", ".join([f"{t}.astype(jnp.int32)" if is_value(x) else t for t, x in zip(bounds, values)]
                         + [f"{kw.arg}={tracer.text(kw.value)}" for kw in a.keywords if kw.arg])
        hint = f"convert the uint32 bounds to int32, which it takes: for {c} in reversed({tracer.text(a.func)}({wide}))"
    elif fn is zip:
      hint = (f"loop over {rng} and compute the other item from the loop's index (for i in {rng}: w = ... i ...),"
              f" or read it from a ref at that index (w = w_ref[i]); a static tuple zips with a static range:"
              f" zip(range(4), ws)")
    elif fn is enumerate:
      hint = (f"loop over {rng} alone and take the position from its index: in for i in range(a, n) it is"
              f" i - a (i itself for range(n))")
    else:
      hint = f"loop over {rng} itself and compute from its index inside the body"
    raise E.UnsupportedSyntaxError(
        f"{called}() cannot take a runtime loop: {rng} {why}, and a runtime loop only counts upwards over"
        f" its own index", tracer.loc(it), hint=hint)


def check_static_bounds(tracer, it, bounds, counter) -> None:
  """A runtime loop counts in int32 (uint32 with uint32 bounds): its static bounds and step, and
  the index it steps to after its last trip, must fit, or the count wraps on the GPU."""
  kind = dtype_name(counter)
  hint = (f"a runtime loop counts in {kind}: keep its bounds below 2**{32 if counter == DType.u32 else 63 if counter == DType.i64 else 31}"
          f" (count further with two nested loops: for hi in range(a): for lo in range(b)),"
          f" or unroll it with ml.static_range if it is short")
  given = bounds[1:2] if len(it.args) == 1 else bounds[:len(it.args)]   # range(stop), (start, stop), ...
  spread = any(isinstance(a, ast.Starred) for a in it.args)
  for k, x in enumerate(given):
    if isinstance(x, int) and not (k == 2 and x < 0):   # (a negative step counts down: frontend/count_down.py)
      what = "stop" if len(given) == 1 else ("start", "stop", "step")[k]
      at = tracer.loc(it if spread else it.args[k])
      if counter == DType.u32 and x < 0:    # range(-2, n) of a uint32 n: -2 would wrap to 2**32 - 2 (no trips)
        u32 = [tracer.text(a) for a, b in zip(it.args, given) if not isinstance(b, int)] if not spread else []
        n = u32[0] if u32 else "n"
        n = n if n.isidentifier() else f"({n})"
        raise E.KernelTypeError(
            f"this loop's {what} is {x}, but its run-time bounds are uint32, so it counts in uint32, where {x}"
            f" would wrap to {x % 2 ** 32}", at,
            hint=f"convert the uint32 bound to int32 (values below 2**31): {n}.astype(jnp.int32) in the range, as"
                 f" Python counts from a negative {what}")
      check_python_int(Call(tracer.b, at), x, counter, f"this loop's {what}", hint=hint)
  start, stop, step = bounds
  if all(isinstance(x, int) for x in bounds) and step > 0 and stop > start:
    last = start + (stop - start - 1) // step * step
    hi = 2 ** 32 - 1 if counter == DType.u32 else 2 ** 63 - 1 if counter == DType.i64 else 2 ** 31 - 1
    if last + step > hi:
      raise E.KernelTypeError(
          f"this loop steps its index from {last} to {last + step}, which does not fit in {kind}: the loop"
          f" counts in {kind}, so the index would wrap and the loop would not end", tracer.loc(it), hint=hint)


def _library_function(v) -> bool:
  """Whether `v`, a name's value, is a function of the language (not ml.copy) or of NumPy, JAX or math: a module-level
  alias such as Liger's `tanh = tl.extra.cuda.libdevice.tanh` makes no TMA load (probe 60b: it was taken for a helper
  that might, so Triton's `num_stages=` on the loop asked for a pipeline, MG502)."""
  from .ops.base import Builtin
  if isinstance(v, Builtin):
    return v.__name__ != "copy"
  module = getattr(v, "__module__", None) or ""
  return callable(v) and module.split(".")[0] in ("jax", "jaxlib", "numpy", "math")


def _helper_makes_no_load(v, depth: int = 0) -> bool:
  """Whether the module-level helper `v` (a plain def, an @ml.inline one) surely makes no TMA load: its source calls
  no `copy` and only the language's, NumPy's, JAX's and math's functions, Python's builtins, its values' methods and
  helpers of the same kind (four deep). False where its source cannot be read (probe 60b: Liger's `_gelu_tanh(x)` in
  a `tl.range(..., num_stages=)` loop of register loads was taken for a possible load, MG502)."""
  import builtins
  import inspect
  import textwrap
  import types
  fn = getattr(v, "fn", v)
  if depth > 4 or not isinstance(fn, types.FunctionType):
    return False
  try:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
  except (OSError, TypeError, SyntaxError):
    return False
  cells = {n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()) if _filled(c)}
  scope = {**vars(builtins), **fn.__globals__, **cells}
  local = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | {
      a.arg for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda)) for a in ast.walk(n.args)
      if isinstance(a, ast.arg)}
  for n in ast.walk(tree):
    if not isinstance(n, ast.Call):
      continue
    f = n.func
    if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) == "copy":
      return False
    root = f
    while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
      root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name) or root.id in local:
      continue                      # a literal's or a value's method (x.to(...)), a local lambda's call
    if root.id not in scope:
      return False                  # (a name it cannot see: perhaps a helper that loads)
    g = scope[root.id]
    if isinstance(g, types.ModuleType):
      if g.__name__.split(".")[0] in ("mgpu_dsl", "jax", "numpy", "math"):
        continue
      return False
    if root is f and (g is vars(builtins).get(root.id, ...) or _library_function(g)
                      or _helper_makes_no_load(g, depth + 1)):
      continue
    return False
  return True


def may_load(tracer, body) -> bool:
  """Whether a loop body may make a TMA load (for `num_stages=`'s hint): it calls ml.copy, or something
  that could (an @ml.inline helper, a method of a Python object); the language's functions, NumPy's,
  JAX's and math's, Python's builtins and methods of the kernel's values make none."""
  import types
  from .calls import PY_BUILTINS
  for n in (n for s in body for n in ast.walk(s)):
    if not isinstance(n, ast.Call):
      continue
    f = n.func
    if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) == "copy":
      return True
    root = f
    while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
      root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name):
      continue                      # a literal's method
    known = root.id in tracer.env or root.id in tracer.scope
    v = tracer.env.get(root.id, tracer.scope.get(root.id))
    if root is f:                   # a bare name: a builtin, or a helper
      if not known and root.id in PY_BUILTINS:
        continue
      if _library_function(v) or _helper_makes_no_load(v):   # Liger's `from ...libdevice import tanh`, a helper
        continue
      return True
    if isinstance(v, types.ModuleType):
      if v.__name__.split(".")[0] in ("mgpu_dsl", "jax", "numpy", "math"):
        continue
      return True
    if not known or is_value(v) or isinstance(v, (int, float, str, tuple, list, dict)) or hasattr(v, "type"):
      continue                      # a kernel value's method (x.at[...].load, v.astype), or a name the body binds
    from .ops.block_ptrs import BlockPtr, TensorDescriptor
    if isinstance(v, (BlockPtr, TensorDescriptor)):
      continue                      # Triton's desc_k.load([y, 0]): a register load of a block (probe 51f)
    return True
  return False


def _input_element(tracer, node) -> str | None:
  """The name of the kernel input `node` (a subscript in a while condition: `x[i]`, `t.at[b][i]`) reads
  an element of, where that input is read-only (not aliased to an output): what no trip can change."""
  base = node
  while isinstance(base, ast.Subscript) or isinstance(base, ast.Attribute) and base.attr == "at":
    base = base.value
  v = tracer.env.get(base.id) if isinstance(base, ast.Name) else None
  b = tracer.b
  return base.id if is_value(v) and v.id in b.read_only and v.id not in b.aliased else None


def check_while_ends(tracer, node, assigned) -> None:
  """A run-time while whose condition reads names the body never rebinds, and no memory (no call, and
  no subscript but elements of read-only inputs, which no trip changes), is the same on every trip:
  `k = i; while k < 4:` without `k += 1`, or `while x[i] < t:` without `i += 1`, never ends once
  entered, a hang on the GPU (and in interpret mode, ten million trips)."""
  test = node.test
  if any(isinstance(n, ast.Call) for n in ast.walk(test)):
    return
  inputs = [_input_element(tracer, n) for n in ast.walk(test) if isinstance(n, ast.Subscript)]
  if None in inputs:
    return
  names = list(dict.fromkeys(n.id for n in ast.walk(test) if isinstance(n, ast.Name) and n.id not in inputs))
  if not names and not inputs or set(names) & set(assigned):
    return
  reads = f", and {' and '.join(dict.fromkeys(inputs))} {'is an input' if len(set(inputs)) == 1 else 'are inputs'}" \
          f" (read-only)" if inputs else ""
  listed = " or ".join(names)
  what = f"the loop's body assigns none of {', '.join(names)}{reads}" if names else \
      f"it reads only {' and '.join(dict.fromkeys(inputs))}, {'read-only inputs' if len(set(inputs)) > 1 else 'a read-only input'}"
  raise E.KernelTypeError(
      f"this while condition never changes: {what}, so a program that enters the loop never leaves it (the GPU"
      f" would hang)", tracer.loc(test),
      hint=(f"change {listed} in the loop's body (a counter: {names[0]} += 1), or loop a fixed number of times:"
            f" for j in range(n)") if names else "loop a fixed number of times (for j in range(n)), or test a"
            " value the loop's body changes")
