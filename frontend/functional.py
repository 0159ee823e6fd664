"""Python's functional tools in a kernel, as a kernel author folds a static list of tiles (probe 52b):
`functools.reduce(f, parts[, initial])`, `map(f, *lists)`, `itertools.accumulate(parts, f, initial=)`,
`itertools.starmap(f, pairs)`, and the operator module's functions (`operator.add(a, b)`,
`functools.reduce(operator.mul, parts)`). Each is traced as the Python it means, over the list's static length:
statements built from temporaries bound to the call's values (as lax_flow.py builds lax.fori_loop's), placed at
the call, with `f(a, b)` written as the operator it is (`a + b`, `a < b`) where `f` is one of the operator
module's, so every value, register or static, computes as the same expression written out would. Diagnostics
from inside them name the call's arguments as written (lax_flow._renamed). `map` and `accumulate` give lists
(Python's lazy iterators, consumed once, hold the same values)."""
from __future__ import annotations

import ast
import builtins
import functools
import itertools
import operator
import types

from . import errors as E

_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/", operator.floordiv: "//",
           operator.mod: "%", operator.pow: "**", operator.matmul: "@", operator.and_: "&", operator.or_: "|",
           operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>", operator.lt: "<", operator.le: "<=",
           operator.eq: "==", operator.ne: "!=", operator.ge: ">=", operator.gt: ">"}
_BINARY.update({getattr(operator, f"i{f.__name__.rstrip('_')}"): s for f, s in list(_BINARY.items())
                if hasattr(operator, f"i{f.__name__.rstrip('_')}")})     # operator.iadd(a, b): a + b of values
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.abs: "abs"}
_FOLDS = (functools.reduce, builtins.map, itertools.accumulate, itertools.starmap)
_counter = itertools.count()
NOT_HANDLED = object()


def handles(fn) -> bool:
  from . import jax_trees        # (jax.tree.map(f, params, grads), jax.tree.leaves(g): jax_trees.py)
  if any(fn is f for f in _FOLDS) or jax_trees.handles(fn):
    return True
  return isinstance(fn, types.BuiltinFunctionType) and (fn in _BINARY or fn in _UNARY)


def texts_of(tracer, node, args, kwargs) -> dict:
  """The call's arguments as written: "*" its positional ones, by keyword the others ("fn" the function)."""
  nodes = list(getattr(node, "args", ()))
  if len(nodes) == len(args) and not any(isinstance(a, ast.Starred) for a in nodes):
    shown = [tracer.text(a) for a in nodes]
  else:
    shown = ["f", *(f"parts{k}" if k else "parts" for k in range(len(args) - 1))]
  out = {"*": shown, "fn": tracer.text(node.func) if isinstance(node, ast.Call) else ""}
  out.update((k.arg, tracer.text(k.value)) for k in getattr(node, "keywords", ()) if k.arg in kwargs)
  return out


def _items(tracer, node, what, seq):
  """The static items of `seq`, a tuple, list, dict (its keys), range or other iterable of static length."""
  if isinstance(seq, dict):
    return list(seq)
  from .ops.base import is_value
  if is_value(seq):
    raise E.KernelTypeError(f"{what} iterates a register tensor, which a kernel does not do", tracer.loc(node),
                            hint="iterate a static tuple or list of values (parts = [t[i] for i in"
                                 " ml.static_range(n)]), or reduce the tensor with ml.sum, ml.max, ...")
  try:
    return list(seq)
  except TypeError:
    raise E.KernelTypeError(f"{what}: {type(seq).__name__} is not iterable", tracer.loc(node),
                            hint="pass a tuple or list") from None


def call(tracer, node, fn, args, kwargs, texts):
  """The value of `fn(*args, **kwargs)` (`texts`: the arguments as written), or NOT_HANDLED where `fn` is
  not one of these or is called otherwise (a keyword it lacks: Python's own call then says so)."""
  from .assign import holds_value
  from .lax_flow import _run
  tmp = f"_fn{next(_counter)}_"
  values, words = {}, {}

  def bind(key, value, word):
    values[f"{tmp}{key}"] = value
    if word:
      words[f"{tmp}{key}"] = f"({word})" if word.startswith("lambda") else word
    return f"{tmp}{key}"

  def apply(f, fword, operands):
    """The source of f(*operands), an operator written as itself."""
    if f in _BINARY and len(operands) == 2:
      return f"({operands[0]} {_BINARY[f]} {operands[1]})"
    if f in _UNARY and len(operands) == 1:
      return f"abs({operands[0]})" if f is operator.abs else f"({_UNARY[f]}{operands[0]})"
    return f"{bind('f', f, fword)}({', '.join(operands)})"

  from . import jax_trees
  if jax_trees.handles(fn):
    return jax_trees.call(tracer, node, fn, args, kwargs)
  name = getattr(fn, "__name__", "")
  shown = texts.get("fn") or name
  if fn in _BINARY or fn in _UNARY:
    if kwargs or len(args) != (2 if fn in _BINARY else 1) or not holds_value(list(args)):
      return NOT_HANDLED      # (static operands: Python's operator computes them)
    src = f"{tmp}r = {apply(fn, shown, [bind(f'a{k}', a, t) for k, (a, t) in enumerate(zip(args, texts['*']))])}\n"
    return _run(tracer, node, src, values, tmp, words, None, [f"{tmp}r"])[0]
  if fn is functools.reduce:
    if kwargs or len(args) not in (2, 3):
      return NOT_HANDLED
    f, seq = args[0], _items(tracer, node, "functools.reduce", args[1])
    fword, sword = texts["*"][0], texts["*"][1]
    items = [bind(f"v{k}", v, f"{sword}[{k}]") for k, v in enumerate(seq)]
    if len(args) == 3:
      items = [bind("init", args[2], texts["*"][2]), *items]
    if not items:
      raise E.KernelTypeError(f"functools.reduce of an empty {sword} with no initial value", tracer.loc(node),
                              hint=f"pass an initial value, functools.reduce({fword}, {sword}, initial), as Python"
                                   " requires")
    words[f"{tmp}r"] = "the running value"
    src = f"{tmp}r = {items[0]}\n" + "".join(f"{tmp}r = {apply(f, fword, [f'{tmp}r', v])}\n" for v in items[1:])
    return _run(tracer, node, src, values, tmp, words, None, [f"{tmp}r"])[0]
  if fn in (builtins.map, itertools.starmap):
    if kwargs or len(args) < 2 or fn is itertools.starmap and len(args) != 2:
      return NOT_HANDLED
    f, fword = args[0], texts["*"][0]
    lists = [_items(tracer, node, name, a) for a in args[1:]]
    rows = list(zip(*lists)) if fn is builtins.map else [tuple(_items(tracer, node, name, r)) for r in lists[0]]
    src, results = "", []
    for j, row in enumerate(rows):
      shown_args = [t for t in texts["*"][1:]] if fn is builtins.map else [texts["*"][1]] * len(row)
      operands = [bind(f"v{j}_{k}", v, f"{shown_args[k] if fn is builtins.map else shown_args[0]}[{j}]"
                       + ("" if fn is builtins.map else f"[{k}]")) for k, v in enumerate(row)]
      results.append(f"{tmp}r{j}")
      src += f"{tmp}r{j} = {apply(f, fword, operands)}\n"
    return list(_run(tracer, node, src, values, tmp, words, None, results)) if src else []
  if fn is itertools.accumulate:
    if set(kwargs) - {"func", "initial"} or not 1 <= len(args) <= 2 or len(args) == 2 and "func" in kwargs:
      return NOT_HANDLED
    f = args[1] if len(args) == 2 else kwargs.get("func", operator.add)
    f = operator.add if f is None else f
    fword = texts["*"][1] if len(args) == 2 else texts.get("func", "operator.add")
    sword = texts["*"][0]
    items = [bind(f"v{k}", v, f"{sword}[{k}]") for k, v in enumerate(_items(tracer, node, name, args[0]))]
    if kwargs.get("initial") is not None:
      items = [bind("init", kwargs["initial"], texts.get("initial")), *items]
    src, results = "", []
    for j, v in enumerate(items):
      results.append(f"{tmp}r{j}")
      src += f"{tmp}r{j} = {v if j == 0 else apply(f, fword, [f'{tmp}r{j - 1}', v])}\n"
    return list(_run(tracer, node, src, values, tmp, words, None, results)) if src else []
  return NOT_HANDLED
