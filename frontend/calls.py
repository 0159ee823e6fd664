"""Calls in a kernel: `ml.` builtins and register-value methods, @ml.inline helpers, Python
builtins and functions of static values (called while tracing), and the errors and hints for the
calls a kernel cannot make (jnp on register values, Triton's or Pallas's functions, lax control
flow, another kernel). A mixin of the Tracer, which provides eval, loc, text and the builder.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re

import numpy as np

from . import errors as E, jax_trees, library_ref_hints, missing, nan_name_hints, random_hints
from .static_tables import FILLED as _FILLED
from .scan_hints import scan_hint  # jnp.cumulative_sum, jnp.maximum.accumulate, lax.cumlogsumexp
from .assign import DICT_VIEWS, ITERATORS as _ITERATORS, holds_value
from .builder import Call
from .dot_hints import dot_hint
from .dtypes import DType, to_dtype
from .formula_hints import reduce_precision_hint, with_operands
from .jnp_dispatch import _NOT_MAPPED, jnp_call
from .lax_flow import UNHANDLED
from .lax_hints import LAX_CONTROL, control_hint, debug_print_hint, foreign_call_hint, pipeline_hint
from .ml_name_hints import ml_name_hint
from .ref_conditions import check_not_ref
from .shape_hints import NOT_YET as SHAPE_NOT_YET, shape_call_hint, static_array_hint, static_numbers_hint
from .ops import elementwise as ew
from .ops.base import (BUILTINS, TRANSPOSES, Builtin, is_scalar, numpy_scalars, is_smem_matrix, is_value, kind_of, smem_transpose_hint,
                        typed_number)
from .py_scalars import MATH_TO_INT, is_float_scalar
from .trace_debug import jax_debug_fn, trace_breakpoint, trace_jax_debug, trace_print
from .types import RefType, resolve

# Python builtins a kernel may call on static values, and the exceptions it may raise while tracing.
PY_BUILTINS = {f: getattr(builtins, f) for f in
               ("len", "min", "max", "int", "float", "bool", "abs", "tuple", "range", "isinstance",
                "round", "sum", "all", "any", "divmod", "pow", "list", "zip", "enumerate", "reversed",
                "sorted", "str", "slice", "dict", "type", "complex", "set", "frozenset", "bytes", "repr",
                "format", "ord", "chr", "hex", "bin", "oct", "hash", "callable", "map")}
PY_BUILTINS.update({n: e for n, e in vars(builtins).items() if isinstance(e, type) and issubclass(e, Exception)})
PY_BUILTINS["Ellipsis"] = Ellipsis        # (`c is Ellipsis` of a constexpr; `...` indexes refs)
# print and breakpoint: traced by trace_debug, not called.
_DEBUG = {"print": object(), "breakpoint": object()}
_PY_BUILTIN_FNS = frozenset(f for f in PY_BUILTINS.values() if isinstance(f, type(builtins.abs)) or f in (
    builtins.list, builtins.tuple, builtins.set, builtins.frozenset, builtins.complex, builtins.bytes, builtins.str,
    builtins.enumerate, builtins.reversed, builtins.int, builtins.float, builtins.bool))


_ITERATE_FIRST = (builtins.sorted, builtins.list, builtins.tuple, builtins.reversed, builtins.enumerate,
                  builtins.any, builtins.all, builtins.sum)


def _dict_keys(fn, args):
  """The arguments of a builtin that iterates them, with each dict it iterates as its keys (static
  while tracing, whatever its values: sorted(d) of a dict of register values is its sorted keys)."""
  keys = lambda a: tuple(a) if isinstance(a, dict) else a
  if fn is builtins.zip or fn in (builtins.min, builtins.max) and len(args) == 1:
    return [keys(a) for a in args]
  if fn in _ITERATE_FIRST and args:
    return [keys(args[0]), *args[1:]]
  return args


def _is_array_library(fn) -> bool:
  """jnp.exp, np.exp, math.exp, ...: functions whose ml.* counterpart a user likely wants."""
  mod = getattr(fn, "__module__", None) or ""
  return mod.split(".")[0] in ("jax", "jaxlib", "numpy", "math") or type(fn).__name__ == "ufunc" or \
      type(getattr(fn, "__self__", None)).__name__ == "ufunc"          # np.maximum.accumulate


def _is_numpy_or_jnp(fn) -> bool:
  """np.triu, jnp.triu, ...: functions whose static-call arguments may be static arrays of other such calls (not
  jax.random's, whose keys keep their own error, nor jax.nn's or lax's)."""
  mod = getattr(fn, "__module__", None) or ""
  return mod.split(".")[0] == "numpy" or mod.startswith(("jax.numpy", "jax._src.numpy")) or \
      type(fn).__name__ == "ufunc"


# static array builders of one value or of indices along an axis: tensors, never a stencil's weights
# (_FILLED: static array builders of one value or of indices along an axis, static_tables.FILLED)


def _static_result(cx, name, out):
  """A static call's result as the kernel sees it: Python numbers, tuples, dtypes, ..."""
  if isinstance(out, (bool, int, float, str, type(None), DType)) or isinstance(out, type):
    return out
  if isinstance(out, np.dtype):      # jnp.dtype("float16"), jnp.result_type(...): a static dtype
    return out
  if isinstance(out, (tuple, list)):
    return tuple(_static_result(cx, name, x) for x in out)
  if getattr(out, "shape", None) is not None and ("key<" in str(getattr(out, "dtype", "")) or name == "PRNGKey"):
    raise E.KernelTypeError(
        f"{name}(...) made a PRNG key while tracing: a kernel draws random numbers with ml.rand (Philox,"
        f" counter-based), not with jax.random's keys", cx.loc,
        hint=random_hints.KEY)
  if getattr(out, "shape", None) == () and hasattr(out, "item"):     # a NumPy or JAX scalar
    try:
      return out.item() if getattr(out, "weak_type", False) else typed_number(out)   # (jnp.floor(7): weak)
    except (NotImplementedError, TypeError, ValueError) as e:     # (a 0-d value of no number: no .item())
      raise E.KernelTypeError(f"{name}(...) returned a {getattr(out, 'dtype', type(out).__name__)} value while"
                              f" tracing, which is not a number a kernel can use ({e})", cx.loc,
                              hint="compute static values (shapes, constants) with Python numbers, and run-time"
                                   " ones with ml.* functions") from None
  if hasattr(out, "shape"):
    hint = (f"write {static_array_hint(name, cx.text, out.shape) or missing.STATIC_ARRAYS[name]}"
            if name in missing.STATIC_ARRAYS else "use ml.zeros, ml.full, ml.arange, or load it from an input")
    if name not in _FILLED:             # numbers computed while tracing, as a stencil's weights are
      hint += "; " + static_numbers_hint(name, cx.text)
    called = (cx.text or "").split("(", 1)[0].strip()      # (np.arange, jnp.linspace: as written; probe 50b)
    raise E.KernelTypeError(
        f"{called if called.endswith(name) else name}(...) returned an array of shape {tuple(out.shape)} while"
        f" tracing; a kernel's tensors"
        f" are built with ml.* functions", cx.loc, hint=hint)
  return out


def _number_of(dt: DType):
  """The call `tl.float32(c)`: `c` as a NumPy scalar of that dtype (static_call makes it a typed number)."""
  def convert(value):
    with np.errstate(over="raise", invalid="ignore"):
      return np.asarray(value).astype(dt.dtype)[()] if isinstance(value, float) or dt.dtype.kind == "f" else \
          np.asarray(value, dtype=dt.dtype)[()]
  convert.__name__ = f"ml.{np.dtype(dt.dtype).name}"      # (ml.int8, ml.bfloat16: the spelling the user wrote)
  return convert


def _library(fn) -> bool:
  """An ml.* builtin or method, or a function of jax or NumPy (whose array arguments a kernel computes with)."""
  if isinstance(fn, (Builtin, _Method)):
    return True
  mod = getattr(fn, "__module__", None) or ""
  return mod.split(".")[0] in ("jax", "numpy") and not _lax_control(fn)


def _tuples(x):
  """`x` with its lists made tuples (a list literal is a list in a kernel, as in Python)."""
  return tuple(_tuples(e) for e in x) if isinstance(x, (list, tuple)) else x


_DICT_READS = ("get", "keys", "values", "items")


def _unwrap_partial(fn, args, kwargs):
  """(function, args, kwargs) of a call of `fn`; a functools.partial of an @ml.inline helper or an
  ml.* function (nested partials too) is that function called with the partial's arguments first,
  as Python calls it."""
  from .language import Inline
  inner, a, kw = fn, list(args), dict(kwargs)
  while isinstance(inner, functools.partial):
    a, kw, inner = [*inner.args, *a], {**inner.keywords, **kw}, inner.func
  from .inline import LocalFunction
  from .jnp_calls import maps      # functools.partial(jax.nn.gelu, approximate=False): as jnp_call maps it
  mapped = inner is not fn and callable(inner) and not isinstance(inner, type) and maps(inner)
  return (inner, a, kw) if isinstance(inner, (Inline, Builtin, LocalFunction)) or mapped else (fn, args, kwargs)


class _Method:
  """A bound method of a register tensor (`x.astype`, `x.sum`)."""
  def __init__(self, fn: Builtin, value):
    self.fn, self.value = fn, value


class _Texts:
  """The source text of the register values a call or operator was given, by value; made only
  when a message asks for it. Values the rule derives from them (a broadcast, a cast) have none."""
  def __init__(self, tracer, values, nodes):
    self.tracer = tracer
    from .ops.gather import IndexedRef     # (x.at[ids]: its text, for the hints of tl.load(x.at[r[:, None], c]))
    self.nodes = {id(v): (v, n) for v, n in zip(values, nodes) if is_value(v) or isinstance(v, IndexedRef)}

  def get(self, x):
    hit = self.nodes.get(id(x))
    return self.tracer.text(hit[1]) if hit is not None and hit[0] is x else None


def _lax_control(fn) -> bool:
  return jax_trees.of_jax_not_tree(fn) and getattr(fn, "__name__", "") in LAX_CONTROL     # (lax.map, not jax.tree.map)


class Calls:
  """The call expressions of the Tracer."""

  def eval_Call(self, node):
    self.call_node = node         # (x.to(jnp.int32, bitcast=True): the hint for .to quotes its arguments)
    if isinstance(node.func, ast.Call):
      self.applied_to = node      # plgpu.emit_pipeline(body, ...)(x_ref, o_ref): its hint names the refs
    fn = self.eval(node.func)
    self.call_node = None
    if fn is _DEBUG["print"]:
      return trace_print(self, node)
    if fn is _DEBUG["breakpoint"]:
      return trace_breakpoint(self, node)
    if (shown := jax_debug_fn(fn)) is not None:     # jax.debug.print / pl.debug_print: the print they mean
      return trace_jax_debug(self, node, shown)
    self._not_foreign(node, fn)     # before its arguments: plgpu.emit_pipeline(body, in_specs=[lambda...])
    if _lax_control(fn) and (out := self._lax_flow(node, fn)) is not UNHANDLED:
      return out                    # lax.fori_loop(0, n, body, acc) of the kernel's helpers: its Python loop
    if _lax_control(fn):            # before a mistake in its arguments: lax.scan(f, 0.0, jnp.arange(n))
      self._not_lax(node, fn, [self._tolerant_eval(a) for a in node.args],
                    self.pending_name if self.pending_node is None or node is self.pending_node else "",
                    {k.arg: self._tolerant_eval(k.value) for k in node.keywords if k.arg})
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
      return self.call(*self._spread(node, fn))
    if fn in MATH_TO_INT and len(node.args) == 1 and not node.keywords:
      from .py_scalars import math_to_int      # math.floor(f) of a float scalar is an int, as Python's: x[...]
      if (made := math_to_int(self, node, fn)) is not None:
        return made
    args, kwargs = self._static_args(node, fn)
    if _library(fn) and holds_value(list(args) + list(kwargs.values())):
      from .static_tables import outside     # jnp.dot(x, W), jnp.where(M, x, 0) of a module's NumPy table
      args, kwargs = [outside(self, node, a) for a in args], {k: outside(self, node, v) for k, v in kwargs.items()}
    return self.call(node, fn, args, kwargs)

  def _static_args(self, node, fn):
    """(args, kwargs) of a call. Those of a NumPy or jnp function that are calls themselves
    (`np.triu(np.ones((64, 64)), 1)`) are first evaluated to their static arrays as NumPy returns them
    (probe 55b: the inner call's own MG003 stood); where the outer call then takes a register value, such an
    argument is evaluated again as before (its MG003, or its register table)."""
    raw = set()
    if _is_numpy_or_jnp(fn) and not isinstance(fn, (Builtin, _Method)):
      raw = {id(a) for a in [*node.args, *(k.value for k in node.keywords)] if isinstance(a, ast.Call)}
    saved, self.raw_static = getattr(self, "raw_static", frozenset()), raw
    try:
      args = [self.eval(a) for a in node.args]
      kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
    finally:
      self.raw_static = saved
    if raw and holds_value(list(args) + list(kwargs.values())):
      # (only the arguments that came back as raw static arrays: a call that traced ops, ml.dot(a, b) in
      # jnp.exp(ml.dot(a, b)), is not traced twice)
      again = lambda a, v: self.eval(a) if id(a) in raw and isinstance(v, np.ndarray) else v
      args = [again(a, v) for a, v in zip(node.args, args)]
      kwargs = {k.arg: again(k.value, kwargs[k.arg]) for k in node.keywords}
    return args, kwargs

  def _spread(self, node, fn):
    """(call, fn, args, kwargs) of a call with `*seq` / `**mapping` arguments: static tuples, lists
    and dicts (of any values) spread into one argument each, each named `seq[i]` / `mapping['k']`
    in messages (the call node is rebuilt with those, at the same place)."""
    args, arg_nodes = [], []
    for a in node.args:
      if not isinstance(a, ast.Starred):
        args.append(self.eval(a))
        arg_nodes.append(a)
        continue
      for i, v in enumerate(self.spread_sequence(a, "pass each argument by position")):
        args.append(v)
        arg_nodes.append(ast.copy_location(ast.Subscript(a.value, ast.Constant(i), ast.Load()), a))
    kwargs, kw_nodes = {}, []
    for k in node.keywords:
      if k.arg is not None:
        items = [(k.arg, self.eval(k.value), k.value)]
      else:
        m = self.eval(k.value)
        if not isinstance(m, dict):
          raise E.KernelTypeError(f"**{self.text(k.value)} spreads a dict of names, not {kind_of(m)}",
                                  self.loc(k.value), hint="pass each argument by name")
        if not all(isinstance(n, str) for n in m):
          bad = next(n for n in m if not isinstance(n, str))
          raise E.KernelTypeError(f"**{self.text(k.value)} spreads a dict of names, but one key is {bad!r}",
                                  self.loc(k.value), hint="key the dict by the parameters' names (strings)")
        items = [(n, v, ast.copy_location(ast.Subscript(k.value, ast.Constant(n), ast.Load()), k.value))
                 for n, v in m.items()]
      for name, v, vnode in items:
        if name in kwargs:
          raise E.KernelTypeError(f"{self.text(node.func)}() got the keyword argument {name!r} twice",
                                 self.loc(vnode), hint=f"pass {name} once")
        kwargs[name] = v
        kw_nodes.append(ast.copy_location(ast.keyword(name, vnode), vnode))
    return ast.copy_location(ast.Call(node.func, arg_nodes, kw_nodes), node), fn, args, kwargs

  def _tolerant_eval(self, a):
    """An argument's value, or None where it is itself a mistake (reported after the call's own)."""
    try:
      return self.eval(a)
    except E.KernelError:
      return None

  def _lax_flow(self, node, fn):
    """The value of a call of JAX's control flow traced as the Python statement it means (lax_flow.py), or
    UNHANDLED where it is not one the kernel runs as written (its arguments then evaluated again, for the hint)."""
    from .lax_flow import FORMS, counted_node, counted_xs, ref_rows, trace
    if getattr(fn, "__name__", "") not in FORMS or any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords):      # (called where _lax_control holds: jax.tree.map is not lax.map)
      return UNHANDLED
    counted = counted_xs(self, node) or ref_rows(self, node) if fn.__name__ == "scan" else None
    try:
      args = [counted if counted is not None and a is counted_node(node) else self.eval(a) for a in node.args]
      kwargs = {k.arg: counted if counted is not None and k.value is counted_node(node) else self.eval(k.value)
                for k in node.keywords}
    except E.KernelError:
      return UNHANDLED                  # (the call's hint first, as before)
    params = FORMS[fn.__name__]
    texts = {p: self.text(a) for p, a in zip(params, node.args)} | {"fn": self.text(node.func)}
    texts.update((k.arg, self.text(k.value)) for k in node.keywords)
    texts["*"] = [self.text(a) for a in node.args[len(params):]] + [texts[k] for k in ("operand",) if k in texts]
    branches = node.args[1] if fn.__name__ == "switch" and len(node.args) > 1 else None
    if isinstance(branches, (ast.List, ast.Tuple)):
      texts["branches*"] = [self.text(b) for b in branches.elts]
    return trace(self, node, fn, args, kwargs, texts)

  def _not_lax(self, node, fn, args, target, kwargs=None):
    """KernelTypeError at a call of JAX's control flow (lax.scan, fori_loop, ...), with the Python
    statement that does its work, written with the call's own arguments (keywords too)."""
    if not _lax_control(fn):
      return
    plain = all(k.arg for k in node.keywords) and not any(isinstance(a, ast.Starred) for a in node.args)
    raise E.KernelTypeError(
        f"{self.text(node.func)} is JAX's control flow, which a kernel writes in Python", self.loc(node),
        hint=plain and control_hint(fn.__name__, [self.text(a) for a in node.args], args, target,
                                    frozenset(re.findall(r"[A-Za-z_]\w*", "\n".join(self.src.lines))),
                                    {k.arg: self.text(k.value) for k in node.keywords}, kwargs)
        or LAX_CONTROL[fn.__name__])

  def _not_foreign(self, node, fn):
    """KernelTypeError at a call of a Pallas or Triton function, naming what mgpu_dsl writes."""
    func = getattr(node, "func", None)
    if func is None or (foreign := missing.foreign_dsl(fn, self.text(func))) is None:
      return
    what = "Triton" if (getattr(fn, "__module__", "") or "").startswith("triton") else "Pallas"
    name = getattr(fn, "__name__", "") or self.text(func).rsplit(".", 1)[-1]
    if not any(isinstance(a, ast.Starred) for a in node.args) and all(k.arg for k in node.keywords):
      kw = {k.arg: self.text(k.value) for k in node.keywords}
      outer = getattr(self, "applied_to", None)
      if name == "emit_pipeline" and node.args and outer is not None and outer.func is node:
        body = self.eval(node.args[0]) if isinstance(node.args[0], ast.Name) else None
        foreign = pipeline_hint(kw, [self.text(a) for a in outer.args], self.text(node.args[0]), body) or foreign
      foreign = foreign_call_hint(name, [self.text(a) for a in node.args], kw) or foreign
    raise E.KernelTypeError(f"{self.text(func)} is {what}'s; an mgpu_dsl kernel calls ml.* functions",
                            self.loc(node), hint=foreign)

  def call(self, node, fn, args, kwargs):
    from .language import Inline
    own = self.pending_node is None or node is self.pending_node
    values, nodes = list(args), list(getattr(node, "args", ()))
    for k in getattr(node, "keywords", ()):
      values.append(kwargs.get(k.arg))
      nodes.append(k.value)
    if isinstance(getattr(node, "func", None), ast.Attribute) and isinstance(fn, _Method):
      values, nodes = [fn.value, *values], [node.func.value, *nodes]   # x.sum(): the receiver too
    cx = Call(self.b, self.loc(node), self.pending_name if own else self.text(node), self.text(node),
              _Texts(self, values, nodes), calls=lambda f, a: self.call(node, f, list(a), {}))
    fn, args, kwargs = _unwrap_partial(fn, args, kwargs)   # functools.partial(helper, s=0.5): the helper
    from .jax_wrapped import helper
    fn = helper(fn) or fn       # @jax.jit / @jax.named_call / @jax.checkpoint of the user's function: an inline
    from .inline import LocalFunction, call_inline
    if isinstance(fn, (Inline, LocalFunction)):      # (a lambda or def of the kernel's body: traced in place too)
      return call_inline(self, node, fn, args, kwargs)
    if isinstance(fn, (Builtin, _Method)):    # ml.* take sequences as tuples: ml.zeros([128, 64])
      args, kwargs = [_tuples(a) for a in args], {k: _tuples(v) for k, v in kwargs.items()}
    if isinstance(fn, Builtin):
      cx.builtin = fn.__name__
      return fn.apply(cx, args, kwargs)
    if isinstance(fn, _Method):
      cx.builtin = fn.fn.__name__
      return fn.fn.apply(cx, [fn.value, *args], kwargs)
    if (is_value(fn) or not callable(fn)) and isinstance(getattr(node, "func", None), ast.Name):
      # `abs = s[0]`, then abs(v): Python's TypeError, named
      self._not_callable(node.func.id, fn, cx.loc, self.text(node.args[0]) if len(node.args) == 1 else "v")
    self._not_lax(node, fn, args, cx.name if own else "", kwargs)
    if fn is functools.partial and args and callable(args[0]) and not holds_value(args[0]):
      return functools.partial(*args, **kwargs)    # partial(body, x_ref=x_ref): a Python value holding refs or
                                                   # register values, which a call unwraps (a lax body, Pallas's)
    from . import functional        # functools.reduce(f, tiles), map(f, tiles), operator.add(a, b): traced as written
    if functional.handles(fn) and (got := functional.call(self, node, fn, args, kwargs, functional.texts_of(
        self, node, args, kwargs))) is not functional.NOT_HANDLED:
      return got
    from .jax_wrapped import plain_call      # a plain function of the user's on run-time values: an inline helper
    if holds_value(list(args) + list(kwargs.values())) and (made := plain_call(fn, args, kwargs)) is not None:
      return call_inline(self, node, *made)
    if fn in (builtins.int, builtins.float, builtins.bool) and len(args) == 1 and not kwargs and is_value(args[0]):
      if isinstance((x := args[0]).type, RefType):     # int(x) / float(x) / bool(x): a cast (32 bits) of a value
        check_not_ref(self, node.args[0], x, "bool") if fn is builtins.bool else None    # (a condition)
        raise E.KernelTypeError(f"{fn.__name__}() of {kind_of(x)}", cx.loc,
                                hint=f"read it into registers first: {fn.__name__}({self.text(node.args[0])}[...])")
      return ew.astype(cx, x, {builtins.int: DType.i32, builtins.float: DType.f32}.get(fn, DType.bool_))
    args = _dict_keys(fn, args)           # sorted(d), list(d), zip(d, ws): its static keys, as in Python
    if fn in _PY_BUILTIN_FNS or fn is builtins.zip:      # sum(reversed(parts)), list(zip(a, b)): their items
      args = [tuple(a) if isinstance(a, _ITERATORS) else a for a in args]
    if fn in (builtins.len, builtins.tuple, builtins.list, builtins.enumerate, builtins.reversed) \
        and len(args) == 1 and not kwargs:
      x = args[0]              # the structure of a Python list or tuple of register values is static
      if isinstance(x, (tuple, list)):
        return fn(x)
      if fn is builtins.len and is_value(x) and x.type.shape:
        from .ops.padded_tiles import true_shape
        return true_shape(self.b, x)[0]          # (a padded tile's own length, not its padded one)
    if fn is builtins.zip and not kwargs and all(isinstance(a, (tuple, list)) for a in args):
      return zip(*args)
    dtype = to_dtype(fn) if isinstance(fn, type) or hasattr(fn, "dtype") else None
    if dtype is not None and len(args) == 1 and not kwargs and is_value(args[0]):
      return ew.astype(cx, args[0], dtype)    # jnp.float16(x)
    if isinstance(fn, DType) and len(args) == 1 and not kwargs and isinstance(args[0], (bool, int, float, np.generic)):
      # Triton's tl.float32(-float("inf")) (Liger's online softmax): the number as a scalar of that dtype, as
      # jnp.float32(c) is (probe 60b; it was MG003 "tl.float32 is not callable")
      return self.static_call(cx, _number_of(fn), args, {}, node)
    if type(fn).__name__ == "KernelFunction" and hasattr(fn, "typed_ir"):     # an @mgpu_kernel
      name = getattr(getattr(fn, "fn", None), "__name__", "it")
      raise E.KernelTypeError(
          f"a kernel cannot call another kernel ({name}): kernels are launched from JAX, one grid each", cx.loc,
          hint=f"move {name}'s body into an @ml.inline helper taking the refs it reads and writes"
               f" (def body(x, out): ...), call it from both kernels, and keep {name} as a kernel calling it;"
               f" or call the two kernels one after the other from JAX")
    if isinstance(getattr(fn, "__self__", None), dict) and getattr(fn, "__name__", "") in _DICT_READS \
        or fn is builtins.dict or fn is builtins.len and len(args) == 1 and isinstance(args[0], dict):
      return self.python_call(cx, fn, args, kwargs)   # d.get("b", v), d.values(), dict(d, w=v): a static dict
    args = [tuple(a) if isinstance(a, DICT_VIEWS) else a for a in args]    # sum(d.values())
    if fn in (builtins.min, builtins.max) and kwargs.get("key", 0) is None:
      kwargs = {k: v for k, v in kwargs.items() if k != "key"}     # Python's default key
    if fn in (builtins.min, builtins.max) and len(args) == 1 and isinstance(args[0], (list, tuple)) and not kwargs \
        and len(args[0]) >= 2 and any(holds_value(a) for a in args[0]):
      args = tuple(args[0])                                          # max([a, b, c]) as max(a, b, c)
    if (mapped := jnp_call(self, node, fn, args, kwargs, cx)) is not _NOT_MAPPED:
      return mapped         # jnp.exp(v), jax.nn.silu(v), jnp.zeros((8, 128)): as ml's
    if any(holds_value(a) for a in list(args) + list(kwargs.values())):
      if fn in _PY_BUILTIN_FNS:             # abs(f, i): Python's TypeError, before a rule drops an argument
        from .py_scalars import builtin_arguments
        builtin_arguments(cx, fn, args, kwargs, self.text(node))
      if fn is builtins.abs:
        return ew.unary(cx, ew.UnOp.ABS, args[0])
      if fn in (builtins.min, builtins.max) and len(args) >= 2 and not kwargs:   # max(a, b, c): pairwise
        from .py_scalars import min_max
        out = args[0]
        for v in args[1:]:       # (of float scalars Python's rule: the first of equal values, a later NaN skipped)
          out = min_max(cx, fn is builtins.max, out, v) if holds_value(out) or holds_value(v) else fn(out, v)
        return out
      if fn is builtins.divmod and len(args) == 2 and not kwargs and len(node.args) == 2 \
          and not any(isinstance(a, ast.Starred) for a in node.args):   # divmod(t, n) is (t // n, t % n)
        a, b = node.args
        return tuple(self.binop(op, args[0], args[1], ast.copy_location(ast.BinOp(a, op(), b), node))
                     for op in (ast.FloorDiv, ast.Mod))
      if fn is builtins.pow and len(args) == 2 and not kwargs:       # pow(v, 2) is v ** 2
        from .ops.power import power
        return power(cx, args[0], args[1], self.text(node.args[0]), self.text(node.args[1]))
      nd = args[1] if len(args) == 2 else kwargs.get("ndigits")
      if fn is builtins.round and is_value(args[0]) and type(nd) is int and nd < 0 and getattr(
          resolve(args[0].type.dtype), "is_int", False):       # round(i, -1) of integers: Python's and NumPy's
        from .py_scalars import round_int
        return round_int(cx, args[0], nd)
      if fn is builtins.round and nd is None and is_float_scalar(args[0]):
        from .py_scalars import round_to_int     # round(f) of a float scalar is an int, as Python's: x[round(f)]
        return round_to_int(cx, args[0])
      if fn is builtins.round and is_value(args[0]):   # round(v), round(v, 2) of an array, as numpy: ml.round
        return BUILTINS["round"].apply(cx, args, {"decimals": kwargs.pop("ndigits")} if "ndigits" in kwargs else kwargs)
      if fn is builtins.sum and args and isinstance(args[0], (tuple, list)) and len(args) + len(kwargs) <= 2 and \
          set(kwargs) <= {"start"}:
        total = args[1] if len(args) == 2 else kwargs.get("start", 0)    # Python's sum: start + a + b + ...
        for v in args[0]:
          total = ew.binary(cx, ew.BinOp.ADD, total, v) if holds_value(total) or holds_value(v) else total + v
        return total
      if fn in (builtins.min, builtins.max) and (kwargs or len(args) == 1 and isinstance(args[0], (list, tuple))):
        how = ("key= (a key function)" if "key" in kwargs else f"{', '.join(kwargs)}=") if kwargs else \
            "a list or tuple of values"
        cmp = ">=" if fn is builtins.max else "<="
        raise E.KernelTypeError(
            f"{fn.__name__}(...) of register values with {how} is not supported in a kernel", cx.loc,
            hint=f"pass the values themselves, {fn.__name__}(a, b, c) (elementwise, as ml.{fn.__name__}imum), or"
                 f" select by your key with ml.where(key(a) {cmp} key(b), a, b)" if "key" in kwargs else
                 f"the {fn.__name__} of one tensor's elements is ml.{fn.__name__}(t) (its default is not needed:"
                 f" a tensor is never empty)" if "default" in kwargs else
                 f"pass the values themselves: {fn.__name__}(a, b, c), elementwise, as ml.{fn.__name__}imum")
      one = cx.named(args[0], "x") if len(args) == 1 and is_value(args[0]) else "x"   # the one tensor, as written
      if fn in (builtins.min, builtins.max) and len(args) == 1 and is_value(args[0]):
        raise E.KernelTypeError(
            f"{fn.__name__}(...) of one register value is Python's iteration, which kernels do not do", cx.loc,
            hint=f"reduce it with ml.{fn.__name__}({one}) (or ml.{fn.__name__}({one}, axis=...)); the elementwise"
                 f" {fn.__name__} of two values is {fn.__name__}(a, b) or ml.{fn.__name__}imum(a, b)")
      if fn is builtins.sum:
        raise E.UnsupportedSyntaxError(
            "sum(...) of register values is not supported in a kernel", cx.loc,
            hint=f"reduce a register tensor with ml.sum({one}) (or ml.sum({one}, axis=...)); add values with +")
      if fn in (builtins.any, builtins.all) and len(args) == 1 and not kwargs and isinstance(args[0], (tuple, list)):
        from .short_circuit import any_all
        if (made := any_all(cx, fn is builtins.any, args[0])) is not None:
          return made          # any([i < 0, i >= n]) of run-time booleans: their | (or &), as Python's
      if fn in (builtins.any, builtins.all):
        word, op = ("any", "|") if fn is builtins.any else ("all", "&")
        raise E.KernelTypeError(
            f"{word}(...) of register values is Python's iteration, which kernels do not do", cx.loc,
            hint=f"whether {'any' if word == 'any' else 'every'} element of {one} holds is ml.{word}({one}) (or"
                 f" ml.{word}({one}, axis=...)); combine register booleans elementwise with {op}: a {op} b {op} c"
            if one != "x" else f"combine register booleans with {op}: a {op} b {op} c (elementwise); whether {word}"
                 f" element of one tensor t holds is ml.{word}(t)")
      if fn is builtins.range:
        self.unsupported(node, "range() outside a for statement",
                         hint=f"loop over it in the for statement itself, for i in {self.text(node)}: (sliced there with"
                              " static parts too, range(a, n)[1:], [::2], [:-1]; convert uint32 bounds first,"
                              " n.astype(jnp.int32)); its length is a scalar, ml.cdiv(stop - start, step)")
      if fn is builtins.slice and not kwargs and 1 <= len(args) <= 3 and all(
          a is None or isinstance(a, int) or is_scalar(a) and getattr(resolve(a.type.dtype), "is_int", False)
          for a in args):
        return slice(*args)      # sl = slice(c * 64, (c + 1) * 64) of a run-time c: x[sl] is x[c * 64:(c + 1) * 64]
      if fn in (builtins.isinstance, builtins.type) and args and not kwargs:      # isinstance(k, int) of a value
        from .py_scalars import type_test
        return type_test(cx, fn, args, [self.text(a) for a in node.args])
      if fn in _PY_BUILTIN_FNS:             # len(k), str(k), pow(a, b, m) of run-time values: what to write instead
        from .py_scalars import builtin_value_hint
        if (why := builtin_value_hint(fn, args, [self.text(a) for a in node.args])) is not None:
          what = kind_of(args[0]) if is_value(args[0]) else "run-time values"
          raise E.KernelTypeError(f"Python's {fn.__name__}(...) cannot take {what} in a kernel", cx.loc, hint=why)
      held = next((a for a in list(args) + list(kwargs.values()) if holds_value(a)))
      name = getattr(fn, "__name__", repr(fn))
      if name in TRANSPOSES and args and is_smem_matrix(args[0]) and isinstance(node.args[0], ast.Name):
        raise E.KernelTypeError(f"{name} cannot take an SMEM ref inside a kernel", cx.loc,
                                hint=smem_transpose_hint(self.text(node.args[0])))     # jnp.transpose(b_s)
      ours = BUILTINS.get(name) if _is_array_library(fn) else None
      hint = (f"use ml.{name}: kernels call ml.* functions on register values" if ours is not None else
              "kernels call ml.* functions on register values; decorate a helper of your own with"
              " @ml.inline to call it here")
      if _is_array_library(fn):     # jnp.log1p as ml.log1p: what to write instead
        hint = missing.ARRAY_CALLS.get(name, missing.NOT_YET.get(name, SHAPE_NOT_YET.get(name, hint))
                                       if ours is None else hint)
        first = args[0] if args else None
        d = resolve(first.type.dtype) if is_value(first) and hasattr(first.type, "dtype") else None
        is_float = isinstance(d, DType) and d.is_float
        pos, kw = [self.text(a) for a in node.args], {k.arg: self.text(k.value) for k in node.keywords if k.arg}
        mod = getattr(fn, "__module__", None) or ""
        taken = frozenset(re.findall(r"[A-Za-z_]\w*", "\n".join(self.src.lines)))
        operands, note = self._dot_operands(*((node.args[1:3], args[1:3]) if name == "einsum"
                                              else (node.args[:2], args[:2])))
        as_dot = dot_hint(name, pos, kw, operands, taken)
        hint = ((as_dot and as_dot + note)
                or scan_hint(name, pos, kw, ufunc=getattr(getattr(fn, "__self__", None), "__name__", None),
                             ndim=len(first.type.shape) if is_value(first) and hasattr(first.type, "shape") else None,
                             lax=mod == "jax.lax" or mod.startswith("jax._src.lax"))
                or (debug_print_hint(pos, kw) if name == "debug_print" else None)
                or (reduce_precision_hint(pos, kw) if name == "reduce_precision" else None)
                or shape_call_hint(name, pos, kw, tuple(first.type.shape) if is_value(first) and
                                   hasattr(first.type, "shape") else None)
                or missing.form_hint(name, pos, kw, lax=mod == "jax.lax" or mod.startswith("jax._src.lax"),
                                     taken=taken)
                or missing.array_call_hint(name, pos, kw, is_float, d if isinstance(d, DType) else None)
                or ((nan_name_hints.hint(name, pos + [f"{k}={v}" for k, v in kw.items()], taken)
                     or (ml_name_hint(name, pos + [f"{k}={v}" for k, v in kw.items()])   # jnp.logaddexp
                         if name != "clamp" else None))
                    if ours is None and hint.startswith("kernels call") else None)
                or with_operands(name, hint, pos + [f"{k}={v}" for k, v in kw.items()], taken)
                or (missing.no_form(self.text(node.func)) if hint.startswith("kernels call") else hint))
      if "random" in (getattr(fn, "__module__", None) or "").split(".") and _is_array_library(fn):
        hint = random_hints.key_hint(name, [self.text(a) for a in node.args]) or hint   # jax.random.key(seed)
      if name == "where" and _is_array_library(fn) and len(node.args) == 1 and not node.keywords:
        hint = missing.WHERE_ONE               # jnp.where(c): the indices, a data-dependent count
      if name in ("ceil", "floor") and _is_array_library(fn) and len(node.args) == 1 and isinstance(
          node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div):     # math.ceil(n / 64): a tile count
        a, b = self.text(node.args[0].left), self.text(node.args[0].right)
        a, b = (t if t.isidentifier() or t.isdigit() else f"({t})" for t in (a, b))
        hint = (f"of integers, ceil({a} / {b}) is ml.cdiv({a}, {b}) (the tiles of {b} that cover {a}, the last one"
                f" partial: Triton's triton.cdiv), an integer scalar a loop or a window takes; of floats,"
                f" ml.ceil({a} / {b})" if name == "ceil" else
                f"of integers, floor({a} / {b}) is {a} // {b}, an integer scalar a loop or a window takes; of"
                f" floats, ml.floor({a} / {b})")
      from .language import constexpr
      if fn is constexpr and len(node.args) == 1:     # Triton's tl.constexpr(v) of a run-time value
        v = self.text(node.args[0])
        bind = f" ({self.pending_name} = {v})" if self.pending_name else ""
        hint = (f"drop ml.constexpr: {v} is a run-time value, used as it is{bind}; ml.constexpr(...) only wraps"
                f" a value known while compiling (a number, a shape); to specialise the kernel on a value, make it"
                f" a keyword-only parameter, def k(x, out, *, n: ml.constexpr), called as k(x, n=4)")
      from .held_library import held_library      # act(v) of a constexpr act=jax.nn.gelu: pass ml's instead
      top, root = (node.func.id if isinstance(node.func, ast.Name) else None), node.func
      while isinstance(root, ast.Attribute):
        root = root.value
      spelt = root is not node.func and isinstance(root, ast.Name) and inspect.ismodule(self.scope.get(root.id))
      name, hint = (None if spelt else held_library(   # (not jax.debug.print(...): a module's own spelling)
          node, fn, self.text(node.func), _is_array_library, lambda n: n in BUILTINS,
          top is not None and top not in self.scope and top not in self.where, hint)) or (name, hint)
      from .jax_wrapped import transformed_hint    # jax.vmap(row_fn)(x), jax.grad(f)(x): what to write instead
      name, hint = transformed_hint(fn, self.text(node.func), [self.text(a) for a in node.args], len(
          args[0].type.shape) if args and is_value(args[0]) and hasattr(args[0].type, "shape") else None) or (name, hint)
      from .jnp_pad import refusal       # jnp.pad of a register tensor in a mode or of widths it has no form for
      why = refusal(fn, args, kwargs) if name == "pad" and _is_array_library(fn) else None
      hint = library_ref_hints.read_first(self, node, fn, args, kwargs, hint) if _is_array_library(fn) else hint
      raise E.KernelTypeError(why or (
          f"{name} cannot take"
          f" {kind_of(held) if is_value(held) else f'a {type(held).__name__} of register values'} inside a"
          f" kernel"), cx.loc, hint=hint)
    if fn in PY_BUILTINS.values():
      return self.python_call(cx, fn, args, kwargs)
    if callable(fn):      # a Python function of static values (shapes, constexprs): computed now
      return self.static_call(cx, fn, args, kwargs, node)
    raise E.KernelTypeError(f"{self.text(node.func)} is not callable", cx.loc,
                            hint="call ml.* functions or @ml.inline helpers")

  def python_call(self, cx, fn, args, kwargs):
    """A Python builtin or a static dict's method called on static values, as Python calls it: what Python raises
    (`d.get()`, `d.values(1)`, `len(5)`) is the user's mistake, at the call."""
    try:
      return fn(*args, **kwargs)
    except E.KernelError:
      raise
    except Exception as e:
      raise E.KernelTypeError(f"{getattr(fn, '__name__', fn)}(...) failed: {e}", cx.loc,
                              hint="static values compute as in Python") from None

  def _not_callable(self, name, fn, loc, arg="v"):
    """`name(...)` of a name bound to a value, not a function (Python's TypeError): said so, with where it was bound;
    a builtin's name the kernel rebound (`abs = s[0]`, `max = x[0]`) hinted to be renamed."""
    from .carried import describe
    at = self.where.get(name)
    bound = f" (bound at line {at.lineno})" if getattr(at, "lineno", None) else ""
    shadows = name in PY_BUILTINS and not isinstance(fn, type(PY_BUILTINS[name]))
    dtype = None if is_value(fn) else to_dtype(fn) if isinstance(fn, (DType, np.dtype)) else None
    what = describe(fn) if is_value(fn) else f"the dtype {dtype}" if dtype is not None else f"{kind_of(fn)} {fn!r}"
    raise E.KernelTypeError(
        f"{name} is {what}{bound}, not a function, so it cannot be called"
        + (f"; it hides Python's builtin {name}" if shadows else ""), loc,
        hint=f"rename that variable ({name}_ = ...) so {name}(...) is Python's builtin again" if shadows else
        f"convert with .astype: {arg}.astype({name})" if dtype is not None else
        f"call a function: an ml.* function or an @ml.inline helper, or use {name} without the call")

  def matmul_hint(self, left, right, a, b):
    """The hint for `a @ b` of register values: the ml.dot call jnp.matmul's hint writes."""
    taken = frozenset(re.findall(r"[A-Za-z_]\w*", "\n".join(self.src.lines)))
    operands, note = self._dot_operands((left, right), (a, b))
    hint = dot_hint("matmul", [self.text(left), self.text(right)], {}, operands, taken)
    return (hint and hint + note) or (
        "tensor-core products are ml.dot(a_s, b_s) of SMEM buffers (A may be a register tensor:"
        " ml.dot(p.astype(jnp.float16), v_s, acc))")

  def _dot_operands(self, nodes, values):
    """The (text, value, transposed) of a jnp.dot's operands, for its hint, and a note to add to it: operands
    of one 16-bit float dtype each widened to float32 first (`a_s[...].astype(jnp.float32) @ ...`) are
    given unconverted, as ml.dot takes them (their products are exact in float32, where it accumulates)."""
    operands = [self._dot_operand(n, v) for n, v in zip(nodes, values)]
    widened = [self._widened(n, v) for n, v in zip(nodes, values)]
    if len(widened) != 2 or None in widened or widened[0][1] != widened[1][1]:
      return operands, ""
    d = widened[0][1]
    return [w[0] for w in widened], (f"; {d} products are exact in float32, where ml.dot accumulates them, so it"
                                     f" computes the widened product without .astype(jnp.float32)")

  def _widened(self, node, value):
    """((text, value, transposed), dtype) of `x.astype(jnp.float32)` (its .T, or `x.T.astype(...)`) of a ref read
    whole or a register tile `x` of float16 or bfloat16 (read as stored, either way round); None for others."""
    flip = isinstance(node, ast.Attribute) and node.attr == "T"
    call = node.value if flip else node
    if not (is_value(value) and resolve(getattr(value.type, "dtype", None)) == DType.f32 and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute) and call.func.attr == "astype" and len(call.args) == 1):
      return None
    inner = call.func.value
    if isinstance(inner, ast.Attribute) and inner.attr == "T":     # x_s[...].T.astype(f32): a transpose cast
      inner, flip = inner.value, not flip
    name = inner.value if isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Constant) and (
        inner.slice.value is Ellipsis) else inner
    if not isinstance(name, ast.Name):
      return None
    held = self.eval(name)
    d = resolve(getattr(getattr(held, "type", None), "dtype", None)) if is_value(held) else None
    if d not in (DType.f16, DType.bf16) or isinstance(held.type, RefType) and name is inner:
      return None
    return (self.text(name), held, flip), d

  def _dot_operand(self, node, value):
    """(text, value, transposed) of a jnp.dot operand, for its hint: a ref read whole (`k_s[...]`,
    `k_s[...].T`) is the ref itself, as ml.dot takes it; `w.T` of a register tile is w, transposed."""
    inner, flip = (node.value, True) if isinstance(node, ast.Attribute) and node.attr == "T" else (node, False)
    if isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Constant) and inner.slice.value is Ellipsis \
        and isinstance(inner.value, ast.Name):
      ref = self.eval(inner.value)
      if is_value(ref) and isinstance(ref.type, RefType):
        return self.text(inner.value), ref, flip
    if flip and isinstance(inner, ast.Name):      # `w.T` of a register tile: stage w, pass w_s.T
      held = self.eval(inner)
      if is_value(held) and len(getattr(held.type, "shape", ())) == 2:
        return self.text(inner), held, True
    return self.text(node), value, False

  def static_call(self, cx, fn, args, kwargs, node=None):
    """`fn(*args)` of static values, called while tracing (`math.sqrt(d)`, a helper of the
    user's on shapes); a NumPy or JAX scalar result becomes a Python number."""
    name = getattr(fn, "__name__", repr(fn))
    try:
      out = fn(*numpy_scalars(fn, args), **kwargs)     # (jnp.sign(np.uint8(7)) is uint8, as jnp's)
    except E.KernelError as e:
      from .jax_wrapped import plain_call
      if getattr(e, "outside_kernel", False) and node is not None and (made := plain_call(fn, args, kwargs)):
        # FlagGems' tle.program_id(0), a helper of static arguments calling ml's functions: Python could not run
        # it, so it is the kernel's, traced in place as an @ml.inline helper (probe 60b; it was MG003 there)
        from .inline import call_inline
        return call_inline(self, node, *made)
      raise
    except Exception as e:
      shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
      shown = shown if len(shown) <= 80 else shown[:77] + "..."
      raise E.KernelTypeError(
          f"{name}(...) of static values failed while tracing: {type(e).__name__}: {e}", cx.loc,
          hint=f"it ran in Python while the kernel was traced, as {name}({shown}): check those values (the"
               f" constexprs and shapes of this call) or compute this outside the kernel") from None
    if node is not None and id(node) in getattr(self, "raw_static", ()) and hasattr(out, "shape") and \
        getattr(out, "shape", None) != ():
      return np.asarray(out)              # (an argument of a static NumPy call: np.triu(np.ones(...)); probe 55b)
    from .static_tables import index_tables, table      # jnp.array([1.0, 2.0, 4.0]): a register vector of its numbers
    if (got := index_tables(self, node, name, out)) is not None:
      return got                          # (np.tril_indices(27, -1): DLRM's pairs; probe 56e)
    got = table(self, node, name, out)
    return _static_result(cx, name, out) if got is None else got

