"""Calls inside a kernel: `ml.*` builtins, `.astype`, and Python builtins on static values."""
from __future__ import annotations

import inspect

from . import errors as E
from . import ir
from . import language as L
from . import mma
from .dtypes import to_dtype
from .semantics import is_value, kind_of


def _bind(tracer, node, builtin, args, kwargs):
  try:
    return inspect.signature(builtin.__wrapped__).bind(*args, **kwargs).arguments
  except TypeError as e:
    raise E.KernelTypeError(f"ml.{builtin.__name__}: {e}", tracer.loc(node),
                            hint=f"ml.{builtin.__name__}{inspect.signature(builtin.__wrapped__)}") from None


def _dtype(tracer, node, x, what, *, optional=False):
  if x is None and optional:
    return None
  d = to_dtype(x)
  if d is None:
    raise E.KernelTypeError(f"{what} needs a dtype such as jnp.float32, got {x!r}", tracer.loc(node))
  return d


def call(tracer, node, fn, args, kwargs):
  em, loc = tracer.em, tracer.loc(node)
  if isinstance(fn, L.Inline):
    from .inline import call_inline
    return call_inline(tracer, node, fn, args, kwargs)
  if isinstance(fn, L.Builtin):
    a = _bind(tracer, node, fn, args, kwargs)
    handler = _HANDLERS.get(fn)
    if handler is None:
      tracer.unsupported(node, f"ml.{fn.__name__} here",
                         hint="ml.static_range is only for `for` loops" if fn is L.static_range else None)
    return handler(tracer, node, loc, a)
  from .tracer import _Method
  if isinstance(fn, _Method):
    if fn.name == "astype":
      if len(args) != 1 or kwargs:
        raise E.KernelTypeError(".astype takes one dtype", loc)
      return em.cast(fn.value, _dtype(tracer, node, args[0], ".astype"), loc)
  dtype = to_dtype(fn) if isinstance(fn, type) or hasattr(fn, "dtype") else None
  if dtype is not None and len(args) == 1 and not kwargs and is_value(args[0]):
    return em.cast(args[0], dtype, loc)    # jnp.float16(x)
  if any(is_value(a) for a in list(args) + list(kwargs.values())):
    if fn in (abs,):
      return em.unary(ir.UnOp.ABS, args[0], loc)
    if fn in (min, max) and len(args) == 2:
      return em.binary(ir.BinOp.MIN if fn is min else ir.BinOp.MAX, args[0], args[1], loc)
    if fn is range:
      tracer.unsupported(node, "range() outside a for statement")
    raise E.KernelTypeError(
        f"{getattr(fn, '__name__', repr(fn))} cannot take {kind_of(next(a for a in args if is_value(a)))}"
        f" inside a kernel", loc,
        hint="kernels call ml.* functions on register values; decorate a helper of your own with"
             " @ml.inline to call it here")
  if fn in tracer_py_builtins():
    try:
      return fn(*args, **kwargs)
    except Exception as e:
      raise E.KernelTypeError(f"{getattr(fn, '__name__', fn)}(...) failed: {e}", loc) from None
  if callable(fn):
    raise E.UnsupportedSyntaxError(
        f"calling {getattr(fn, '__name__', repr(fn))} is not supported in a kernel", loc,
        hint="decorate it with @ml.inline to trace it into the kernel")
  raise E.KernelTypeError(f"{tracer.text(node.func)} is not callable", loc)


def tracer_py_builtins():
  from .tracer import _PY_BUILTINS
  return tuple(_PY_BUILTINS.values())


def _min_max(t, kind, x, y, loc):
  if not is_value(x) and not is_value(y) and all(isinstance(v, (int, float)) for v in (x, y)):
    return (max if kind == ir.BinOp.MAX else min)(x, y)     # static numbers stay Python
  return t.em.binary(kind, x, y, loc)


def _unary(kind):
  return lambda t, node, loc, a: t.em.unary(kind, a["x"], loc)


_HANDLERS = {
    L.program_id: lambda t, node, loc, a: t.em.program_id(a["axis"], loc),
    L.num_programs: lambda t, node, loc, a: t.em.program_id(a["axis"], loc, num=True),
    L.smem: lambda t, node, loc, a: t.em.smem(
        a["shape"], _dtype(t, node, a.get("dtype"), "ml.smem", optional=True), t.pending_name, loc),
    L.ds: lambda t, node, loc, a: L.DSlice(a["start"], a["size"]),
    L.copy: lambda t, node, loc, a: t.em.copy(a["src"], a["dst"], loc),
    L.zeros: lambda t, node, loc, a: t.em.full(a["shape"], 0, _dtype(t, node, a["dtype"], "ml.zeros"), loc),
    L.full: lambda t, node, loc, a: t.em.full(a["shape"], a["value"], _dtype(t, node, a["dtype"], "ml.full"), loc),
    L.arange: lambda t, node, loc, a: t.em.arange(a["n"], _dtype(t, node, a.get("dtype"), "ml.arange", optional=True), loc),
    L.maximum: lambda t, node, loc, a: _min_max(t, ir.BinOp.MAX, a["a"], a["b"], loc),
    L.minimum: lambda t, node, loc, a: _min_max(t, ir.BinOp.MIN, a["a"], a["b"], loc),
    L.where: lambda t, node, loc, a: t.em.where(a["cond"], a["a"], a["b"], loc),
    L.cast: lambda t, node, loc, a: t.em.cast(a["x"], _dtype(t, node, a["dtype"], "ml.cast"), loc),
    L.cluster_ref: lambda t, node, loc, a: t.em.cluster_ref(
        a["buf"], a["cta"], a.get("axis", 0), t.text(node), loc),
    L.cluster_sync: lambda t, node, loc, a: t.em.emit(ir.ClusterSync, loc=loc) and None,
    L.dot: lambda t, node, loc, a: mma.dot(t.em, a["a"], a["b"], a.get("acc"), loc),
    L.grouped_ids: lambda t, node, loc, a: _grouped_ids(t, loc, a),
    **{b: _unary(k) for b, k in {L.exp: ir.UnOp.EXP, L.exp2: ir.UnOp.EXP2, L.log: ir.UnOp.LOG,
                                 L.sqrt: ir.UnOp.SQRT, L.rsqrt: ir.UnOp.RSQRT,
                                 L.tanh: ir.UnOp.TANH, L.abs: ir.UnOp.ABS}.items()},
}



def _grouped_ids(t, loc, a):
  em, pid, num_m, num_n, group = t.em, a["pid"], a["num_m"], a["num_n"], a.get("group", 8)
  for name in ("num_m", "num_n", "group"):
    v = a.get(name, 8)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
      raise E.KernelTypeError(f"ml.grouped_ids' {name} must be a positive static int, got {v!r}", loc)
  em.index_operand(pid, loc)
  B = ir.BinOp
  width = group * num_n
  first_m = em.binary(B.MUL, em.binary(B.FLOORDIV, pid, width, loc), group, loc)
  size_m = em.binary(B.MIN, em.binary(B.SUB, num_m, first_m, loc), group, loc)
  within = em.binary(B.MOD, pid, width, loc)
  i = em.binary(B.ADD, first_m, em.binary(B.MOD, within, size_m, loc), loc)
  j = em.binary(B.FLOORDIV, within, size_m, loc)
  return i, j
