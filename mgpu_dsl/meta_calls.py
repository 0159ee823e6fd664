"""Calling the decorator's out_shape, grid, block and cluster callables with a kernel's inputs (and
the constexprs each names), and reporting their failures in the kernel's words."""
from __future__ import annotations

import re

import numpy as np

from .calling import cap, describe
from .signature import parameters
from .frontend import errors as E


def call_with_meta(f, args, constexprs, what, loc, inputs=()):
  """Call a grid/out_shape callable with the inputs and whichever constexprs it names
  (`inputs`: the inputs' parameter names, for the hints)."""
  try:
    params = parameters(f)
  except TypeError:       # an unhashable callable
    params = None
  import jax
  try:
    kw = {} if params is None else constexprs
    if params is not None and not any(p.kind == p.VAR_KEYWORD for p in params):
      kw = {k: v for k, v in constexprs.items() if k in {p.name for p in params}}
    with jax.ensure_compile_time_eval():      # jnp on shapes and constants stays a value under jax.jit
      got = _on_arrays(f, args, kw)
      if what == "out_shape" or not _jax_ints(got):
        return got
      # jnp.int32(x.shape[0] // 128): an int when the callable gives it also for abstract inputs (so it
      # does not come from their values: an ml.scalar's is known only at run time)
      spec = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") and hasattr(a, "dtype") else a
      shape_only = _on_arrays(f, [spec(a) for a in args], kw)
    return _concrete_ints(got, shape_only)
  except E.InternalError:
    raise
  except E.KernelError as e:     # ml.cdiv(n, 0) in the callable: its own words, once
    raise E.SignatureError(cap(
        f"the {what} callable failed for {len(args)} input(s)"
        f" {', '.join(describe(a) for a in args)}: {e.message}"), loc, hint=e.hint) from None
  except Exception as e:
    from . import value_hints
    if value_hints.reads_values(e):
      raise value_hints.values_error(what, ", ".join(describe(a) for a in args), loc) from None
    missing = _ARRAY_ATTR.match(str(e)) if isinstance(e, AttributeError) else None
    text = f"an input array has no attribute {missing.group(1)!r}" if missing else str(e)
    from . import triton_names
    triton = (triton_names.meta_hint(loc, f, list(inputs) or [f"x{i}" for i in range(len(args))], constexprs, what)
              or triton_names.name_hint(e))
    raise E.SignatureError(cap(
        f"the {what} callable failed for {len(args)} input(s)"
        f" {', '.join(describe(a) for a in args)}: {type(e).__name__}: {text}"), loc,
        hint=triton or _mg_name(e) or _every_input(f, params, args, inputs, what) or _container(e, inputs, what) or
        _low_rank(e, f, args, inputs, what) or
        f"{what} is called with the kernel's inputs (and the constexprs it names)"
        + ("; an input has .shape, .dtype, .ndim and jnp's array methods" if missing else "")) from None


def _mg_name(e) -> str | None:
  """The hint where the callable asked `ml` for what `mg` has (probe 67a: a persistent conv's
  `grid=lambda x, w: (ml.num_sms(),)`): the kernel language is `ml`, the host-side API `mg`."""
  m = re.match(r"module 'mgpu_dsl\.language' has no attribute '(\w+)'", str(e)) if isinstance(e, AttributeError) \
      else None
  import mgpu_dsl
  if m is None or not hasattr(mgpu_dsl, m.group(1)):
    return None
  return (f"{m.group(1)} is mgpu_dsl's, not the kernel language's: mg.{m.group(1)} (import mgpu_dsl as mg; ml"
          f" holds what kernels call)")


def _container(e, inputs, what) -> str | None:
  """The hint where an input is a list, tuple or dict (`k([x])`, `k({'a': x})`, its leaves named `x[0]`,
  `x['a']`): the callables get that structure, as the kernel's parameter does, so an array's attribute
  (x.shape) fails on it."""
  kind = re.match(r"'(list|tuple|dict)' object has no attribute", str(e)) if isinstance(e, AttributeError) else None
  leaf = next((n for n in inputs if re.match(r"\w+\[", n)), None)
  if kind is None or leaf is None:
    return None
  name, kind = leaf[:leaf.index("[")], kind.group(1)
  n = sum(n.startswith(name + "[") for n in inputs)
  return (f"{name} was passed a {kind} ({n} array{'s' if n != 1 else ''}), and the {what} callable gets that {kind},"
          f" as the kernel's parameter does: pass the array itself ({leaf} where the {kind} holds one), or index the"
          f" {kind} in the callable and the kernel ({leaf}.shape[0], {leaf}[...])")


def _low_rank(e, f, args, inputs, what) -> str | None:
  """The hint where the callable indexed a shape past an input's rank (`lambda x: (x.shape[0] // 128,)` given a
  0-d x, or x.shape[1] of a vector): the input has fewer axes than the kernel is written for."""
  if not (isinstance(e, IndexError) and "tuple index out of range" in str(e)):
    return None
  import inspect
  try:
    text = inspect.getsource(f)
  except (OSError, TypeError):
    text = ""
  for i, a in enumerate(args):
    shape = getattr(a, "shape", None)
    name = inputs[i] if i < len(inputs) else f"input {i}"
    used = [int(k) for k in re.findall(rf"\b{re.escape(name.split('[')[0])}\.shape\[(\d+)\]", text)]
    if shape is not None and used and max(used) >= len(shape):
      return (f"{name} has shape {tuple(shape)} ({len(shape)} ax{'is' if len(shape) == 1 else 'es'}), and the {what}"
              f" callable reads {name}.shape[{max(used)}]: pass {name} with the axes the kernel is written for"
              f" (at least {max(used) + 1}{', not a number' if not shape else ''})")
  return None


def _every_input(f, params, args, inputs, what) -> str | None:
  """The hint for a callable that takes fewer inputs than the kernel has (grid=lambda x: ... for a kernel
  of x and y): it is called with every input, so it names one parameter for each."""
  if params is None or len(inputs) != len(args) or any(p.kind == p.VAR_POSITIONAL for p in params):
    return None
  pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  if len(pos) >= len(args):
    return None
  kws = [p.name for p in params if p.kind == p.KEYWORD_ONLY]
  names = list(pos) + [n for n in inputs[len(pos):] if n not in pos]
  return (f"{what} is called with every input of the kernel ({', '.join(inputs)}): give it a parameter for each,"
          f" also those it does not use: {what}=lambda {', '.join(names)}{', *, ' + ', '.join(kws) if kws else ''}: ...")


def _jax_ints(x) -> bool:
  """Whether a launch tuple (or count) holds a 0-d integer jax array."""
  import jax
  if isinstance(x, (tuple, list)):
    return any(_jax_ints(i) for i in x)
  return isinstance(x, jax.Array) and x.shape == () and np.issubdtype(x.dtype, np.integer)


def _concrete_ints(x, shape_only):
  """`x` (a launch tuple or count) with its 0-d integer jax arrays that are values also in `shape_only`
  (the callable's result for abstract inputs: computed from shapes and constants) as ints."""
  import jax
  if isinstance(x, (tuple, list)) and isinstance(shape_only, (tuple, list)) and len(x) == len(shape_only):
    return type(x)(_concrete_ints(i, j) for i, j in zip(x, shape_only))
  if _jax_ints(x) and isinstance(shape_only, jax.Array) and not isinstance(shape_only, jax.core.Tracer):
    return int(x)
  return x


# JAX's words for an attribute an abstract array lacks (a tracer under jit, a ShapeDtypeStruct)
_ARRAY_ATTR = re.compile(r"^'?(?:\w*Tracer|ShapedArray|ShapeDtypeStruct|[\w.]*ArrayImpl|numpy\.ndarray)'?(?: object)? has no attribute '?(\w+)'?$")


def _on_arrays(f, args, kwargs):
  """`f(*args, **kwargs)`, where the jax.ShapeDtypeStructs among `args` (the specs of typed_ir, check
  and mlir, and each element's shapes under jax.vmap) stand as abstract arrays: a callable written
  for the arrays of a call (lambda x: x.astype(jnp.float16), x[:, :64], x.T) gives there what it
  gives on them. Arrays it returns come back as jax.ShapeDtypeStructs."""
  import jax
  at = [i for i, a in enumerate(args) if isinstance(a, jax.ShapeDtypeStruct)]
  if not at:
    return f(*args, **kwargs)
  got = []
  spec = lambda l: jax.ShapeDtypeStruct(tuple(l.shape), l.dtype) if isinstance(l, jax.core.Tracer) else l

  def on(*xs):
    full = list(args)
    for i, x in zip(at, xs):
      full[i] = x
    got.append(jax.tree.map(spec, f(*full, **kwargs)))    # no tracer leaves the trace (jax_check_tracer_leaks)
    return ()
  jax.eval_shape(on, *[args[i] for i in at])
  return got[0]
