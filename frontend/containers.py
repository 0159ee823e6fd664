"""The Tracer's static containers and strings: tuples, lists and dicts, comprehensions (unrolled
while tracing) and f-strings. A mixin of Tracer, as Calls is."""
from __future__ import annotations

import ast

from . import errors as E
from .assign import DICT_VIEWS, holds_value
from .calls import PY_BUILTINS
from .env import assigned_names, names_restored
from .ops.base import is_value, kind_of


class Containers:
  """Tuples, lists, dicts, comprehensions and f-strings, evaluated while tracing."""

  def eval_Tuple(self, node):
    return tuple(self.eval_spread(node.elts))

  def eval_List(self, node):
    return self.eval_spread(node.elts)

  def eval_spread(self, nodes) -> list:
    """The values of `nodes` (a display's elements, a loop header's arguments), each `*seq` of a
    static tuple or list spread into its elements."""
    out = []
    for n in nodes:
      if isinstance(n, ast.Starred):
        out.extend(self.spread_sequence(n, "spread static tuples and lists; name each element otherwise"))
      else:
        out.append(self.eval(n))
    return out

  def spread_sequence(self, n: ast.Starred, hint: str) -> tuple:
    """The elements `*seq` spreads: a static tuple, list or range (or zip, enumerate, reversed of
    them), a dict's keys; anything else is a KernelTypeError with `hint`."""
    seq = self.eval(n.value)
    if hasattr(seq, "__next__") and not is_value(seq) or isinstance(seq, dict):   # zip, enumerate,
      seq = tuple(seq)                  # reversed of static values; a dict's keys, as in Python's [*d]
    if is_value(seq) or not isinstance(seq, (tuple, list, range)):
      raise E.KernelTypeError(f"*{self.text(n.value)} spreads a tuple or list, not {kind_of(seq)}", self.loc(n),
                              hint=hint)
    return tuple(seq)

  def eval_Set(self, node):
    """A set display of static values (`k in {1, 2, 4}`, `mode in {"relu", "gelu"}`): Python's set. Of run-time
    values, which have no value to hash while tracing: MG001, a tuple hinted (`in` compares each item)."""
    items = self.eval_spread(node.elts)
    if holds_value(items):
      items = ", ".join(self.text(e) for e in node.elts) + "," * (len(node.elts) == 1)
      self.unsupported(node, "a set of run-time values",
                       hint=f"use a tuple, ({items}): `in` tests it item by item, as a set does")
    try:
      return set(items)
    except TypeError as e:
      self.unsupported(node, f"this set ({e})", hint="use a tuple of its items")

  def eval_Dict(self, node):
    """A dict of static keys (its values any: `opts = {"bias": b}`, spread into a call with **opts)."""
    out = {}
    for k, v in zip(node.keys, node.values):
      if k is None:                       # {**opts, "w": 2.0}
        m = self.eval(v)
        if not isinstance(m, dict):
          raise E.KernelTypeError(f"**{self.text(v)} spreads a dict, not {kind_of(m)}", self.loc(v),
                                  hint="spread another dict, or name each entry")
        out.update(m)
        continue
      key = self.eval(k)
      if holds_value(key) or not isinstance(key, (str, int, bool, float, tuple, type(None))):
        raise E.KernelTypeError(f"a dict key must be a static value, not {kind_of(key)}", self.loc(k),
                                hint="key dicts by names or ints known while tracing")
      out[key] = self.eval(v)
    return out

  def eval_ListComp(self, node):
    """`[f(i, j) for i in static_iterable if static_cond for j in ...]`: unrolled while tracing,
    the for clauses nested left to right, as Python's (a later clause may use an earlier name)."""
    if any(g.is_async for g in node.generators):
      self.unsupported(node, "an async comprehension", hint="use a static for clause")
    for gen in node.generators:
      if any(isinstance(t, (ast.Subscript, ast.Attribute, ast.Starred)) for t in ast.walk(gen.target)):
        self.unsupported(gen.target, "this comprehension target", hint="iterate over names: for i, w in zip(...)")
    names = assigned_names([g.target for g in node.generators])
    out = []

    from .flow import check_unrolling

    def clause(k):
      gen = node.generators[k]
      items, before = self._comprehension_items(gen.iter, node, gen), len(self.b.defs)
      for done, v in enumerate(items):     # (the values it makes bounded as an unrolled loop's: range(1 << 40))
        check_unrolling(self, gen.iter, len(items), done, len(self.b.defs) - before, "this comprehension")
        self.assign(gen.target, v, gen.iter)
        conds = [self.eval(c) for c in gen.ifs]
        if any(is_value(c) for c in conds):
          raise E.KernelTypeError("a comprehension's if must be static", self.loc(gen.ifs[0]),
                                  hint="select runtime values with ml.where")
        if not all(conds):
          continue
        if k + 1 < len(node.generators):
          clause(k + 1)
        else:
          out.append(self.eval(node.elt))
    with names_restored(self.env, names):     # (Python's comprehension scope: the names as before after it)
      clause(0)
    return out

  def _comprehension_items(self, it, comp=None, gen=None):
    """The static values a comprehension's for clause iterates over."""
    fn = self.eval(it.func) if isinstance(it, ast.Call) else None
    from .ops import control
    if fn in (control.static_range, PY_BUILTINS["range"]):
      args = self.eval_spread(it.args)
      called = "ml.static_range" if fn is control.static_range else "range"
      if not 1 <= len(args) <= 3 or it.keywords:     # (as a for statement's range: Python's TypeError, said)
        got = f"keywords ({', '.join(f'{k.arg}=' for k in it.keywords)})" if it.keywords else f"{len(args)} arguments"
        raise E.KernelTypeError(f"{called} takes 1 to 3 arguments by position, got {got}", self.loc(it),
                                hint=f"{called}(stop), {called}(start, stop) or {called}(start, stop, step)")
      if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        from .stmt_hints import runtime_comprehension_hint
        hint = ("comprehensions are unrolled while tracing: use ints or constexprs" if comp is None else
                runtime_comprehension_hint(self, comp, gen, args[0] if len(args) > 1 else 0))
        raise E.KernelTypeError("a comprehension needs static bounds", self.loc(it), hint=hint)
      if len(args) == 3 and args[2] == 0:
        raise E.KernelTypeError(f"{called}'s step is 0", self.loc(it), hint="use a non-zero step, as range() does")
      return range(*args)
    items = self.eval(it)
    if (hasattr(items, "__next__") or isinstance(items, (dict, *DICT_VIEWS))) and not is_value(items):
      items = tuple(items)            # zip, enumerate, reversed of static values; a dict, d.items()
    if is_value(items) or not isinstance(items, (tuple, list, range)):
      raise E.KernelTypeError(f"a comprehension iterates over static values, not {kind_of(items)}",
                              self.loc(it), hint="iterate over ml.static_range(n) or a tuple")
    return items

  def eval_DictComp(self, node):
    """`{k: f(v) for k, v in d.items()}`: unrolled as the list comprehension of its (key, value) pairs;
    its keys must be static."""
    pairs = ast.copy_location(ast.ListComp(ast.Tuple([node.key, node.value], ast.Load()), node.generators), node)
    out = {}
    for k, v in self.eval_ListComp(pairs):
      if holds_value(k):
        raise E.KernelTypeError(f"a dict key must be a static value, not {kind_of(k)}", self.loc(node.key),
                                hint="key dicts by names or ints known while tracing")
      out[k] = v
    return out

  def eval_GeneratorExp(self, node):
    """`tuple(f(i) for i in ml.static_range(n))`: unrolled while tracing, as the list comprehension
    (its elements computed at once, which nothing static can tell from Python's lazy order)."""
    return tuple(self.eval_ListComp(node))

  def eval_JoinedStr(self, node):
    """An f-string of static values (a message for raise or assert) is a Python string."""
    parts = []
    for v in node.values:
      if isinstance(v, ast.Constant):
        parts.append(str(v.value))
        continue
      x = self.eval(v.value)
      if holds_value(x):
        self.unsupported(node, "an f-string of register values outside print(...)",
                         hint="f-strings format run-time values in print(f'...') only")
      spec = "" if v.format_spec is None else self.eval(v.format_spec)
      x = {115: str, 114: repr, 97: ascii}.get(v.conversion, lambda y: y)(x)
      try:
        parts.append(format(x, spec))
      except (ValueError, TypeError) as e:
        raise E.KernelTypeError(f"cannot format {self.text(v.value)} with {spec!r}: {e}", self.loc(v.value),
                                hint="use a format spec that suits the value") from None
    return "".join(parts)
