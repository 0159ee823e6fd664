"""Assignments in a kernel (`x = ...`, `ref[idx] = v`, `ref[idx] += v`, tuple unpacking), the
tracer's statements that bind names and write refs; frontend/tracer.py mixes them in."""
from __future__ import annotations

import ast

from . import errors as E
from .ops import gather, memory, transfers
from .ops.base import is_ref, is_value, kind_of
from .env import Unbound, assigned_names, read_after
from .ops.arith_hints import run_store_hint
from .ops.run_stores import run_scatter, run_update
from .ops.scatter_hints import aliased_input, as_int_indices, scatter_set_hint, scatter_target
from .types import RefType, Space, TensorType, resolve


DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))   # static while tracing, as dicts
ITERATORS = (type(reversed(())), type(reversed([])), type(zip()), type(map(abs, ())), type(iter(())),
             type(iter([])), type(enumerate(())))        # (a builtin's items, as a tuple of them: zip(*pairs))


def holds_value(x) -> bool:
  """A runtime value, or a tuple, list or dict holding one (sum((a, b)) must not reach Python's sum)."""
  return (is_value(x) or (isinstance(x, (tuple, list)) and any(holds_value(y) for y in x))
          or isinstance(x, dict) and any(holds_value(y) for y in x.values()))


# Why a kernel's dicts refuse changes in place (d.update, d |= ...; design note 41).
DICTS_FIXED = ("dicts in a kernel are fixed once built (values while tracing, as tuples are: a change in place"
               " would happen once, while tracing, whatever run-time if or loop it is in)")


def _holds(x, obj, depth=0) -> bool:
  """Whether `x` is `obj`, or a tuple, list or dict holding it."""
  if x is obj:
    return True
  if depth > 8:
    return False
  items = x.values() if isinstance(x, dict) else x if isinstance(x, (tuple, list)) else ()
  return any(_holds(y, obj, depth + 1) for y in items)


def is_whole(index) -> bool:
  return index is Ellipsis or index == (Ellipsis,)


SCATTER_HINT = ("read rows at computed places with t[ids, :]; write them with out[ids, :] = rows (a scatter);"
                " add (or take the max or min) at them with ml.atomic_add(out.at[ids, :], rows) (an output"
                " written only by scatters starts at 0)")


class At:
  """`ref.at`: subscripting it makes a view."""
  def __init__(self, ref):
    self.ref = ref


def _nothing(callee: str, name: str) -> Unbound:
  """What a name bound to a call that returns nothing (ml.store, ml.copy, an atomic) holds: an
  error at its first use that says so (Triton's tl.atomic_add returns the old value)."""
  atomic = callee.rsplit(".", 1)[-1].startswith("atomic_")
  return Unbound(
      "", message=f"{name} is None: {callee}(...) returns nothing"
                  + (" here: an update of an SMEM window has no old value (each of its elements is held by"
                     " one thread of the CTA; a scatter's and an output's return them, as Triton's tl.atomic_add)"
                     if atomic else ""),
      hint=("read the window before the update, old = buf[...]: no other thread of the CTA updates its elements"
            " meanwhile" if atomic else
            f"use {callee}(...) as a statement, not a value"))


def language_call(tracer, func) -> bool:
  """Whether the callee `func` (as written) names an ml function: `ml.atomic_add`, also under the
  kernel's own alias of the language (`tl.atomic_add`) or imported by name."""
  from .ops.base import Builtin
  callee = tracer.text(func)
  if callee.startswith("ml."):
    return True
  head, *attrs = callee.split(".")
  obj = tracer.env.get(head, tracer.scope.get(head)) if isinstance(tracer.scope, dict) else None
  for a in attrs:
    obj = getattr(obj, a, None) if isinstance(obj, type(ast)) else None     # through modules only
  return isinstance(obj, Builtin)


def nothing_used(tracer, sub) -> None:
  """`sub` (an operand) is a call of an ml. function that returns nothing (an atomic, unlike Triton's): an
  error at the call, with the hint a name bound to it gets at its use."""
  call = sub.value if isinstance(sub, ast.NamedExpr) else sub
  if not isinstance(call, ast.Call):
    return
  callee = tracer.text(call.func)
  if not language_call(tracer, call.func):
    return
  said = _nothing(callee, "")
  raise E.UnboundNameError(said.message.split(": ", 1)[1] + ", so it has no value to compute with",
                           tracer.loc(call), hint=said.hint)


class Assignments:
  """The assignment statements of the Tracer (which provides eval, lookup, binop, loc, cx, text)."""

  def visit_Delete(self, node):
    """`del v` (Pallas's `del unused_ref`, probe 52b): the names are unbound from here on, as Python's; a read after
    it is MG004. `del d[k]`, `del t[i]` and attributes stay MG001 (a kernel's dicts and lists are values)."""
    if not all(isinstance(t, ast.Name) for t in node.targets):
      return self.generic_visit(node)
    for t in node.targets:
      self.lookup(t.id, t)           # (a name not bound: Python's NameError, as MG004 or MG002)
      self.env[t.id] = Unbound("it is deleted", message=f"{t.id} is read after `del {t.id}` (line {self.loc(node).lineno})",
                               hint=f"read {t.id} before the del, or drop the del")

  def visit_Assign(self, node):
    self.stmt = node
    t = node.targets[0]
    self.pending_name = t.id if len(node.targets) == 1 and isinstance(t, ast.Name) else ""
    if self.at_call is not None:      # (mgpu_dsl's own helper: its values are the user's call, not its names)
      self.pending_name = self.call_text
    self.pending_node = node.value    # the call the name is for; calls inside it keep their own text
    value = self.eval(node.value)
    self.pending_name, self.pending_node = "", None
    if isinstance(t, ast.Subscript) and is_value(value) and not value.name:
      value.name = self.text(node.value)     # messages about the store quote the expression
    if (value is None and isinstance(node.value, ast.Call) and isinstance(t, ast.Name)
        and language_call(self, node.value.func)):
      value = _nothing(self.text(node.value.func), t.id)      # old = ml.atomic_add(...): reported at a use
    for target in node.targets:
      self.assign(target, value, node.value)

  def eval_NamedExpr(self, node):
    """`(m := n[0]) > 2`: binds m, as an assignment does, and is its value. (In a while condition,
    which a run-time loop evaluates apart from its body, frontend/flow.py rejects it.)"""
    value = self.eval(node.value)
    if is_value(value) and not value.name:
      value.name = node.target.id
    self.assign(node.target, value, node.value)
    return value

  def visit_AnnAssign(self, node):
    if node.value is None:
      return
    self.stmt = node
    self.assign(node.target, self.eval(node.value), node.value)

  def visit_AugAssign(self, node):
    op = type(node.op)
    if isinstance(node.target, ast.Name):
      cur = self.lookup(node.target.id, node.target)
      self._not_in_place(node, cur)
      value = self.eval(node.value)
      self._not_a_pointer(node, cur, value)
      self._not_a_ref(node, cur)
      self.env[node.target.id] = self.binop(op, cur, value, node, self.text(node.target))
      self.where[node.target.id] = self.loc(node)
    elif isinstance(node.target, ast.Subscript):
      if isinstance(node.target.value, ast.Attribute) and node.target.value.attr == "at" and isinstance(
          node.op, (ast.Add, ast.Sub)):    # jnp's x.at[ids].add(v), written as x.at[ids] += v
        ref = self.text(node.target.value.value)
        idx = self.index_text(node.target.slice)
        sign = "-" if isinstance(node.op, ast.Sub) else ""
        self.unsupported(node.target, "assigning to ref.at[...]", hint=(
            f"accumulate with ml.atomic_add({ref}.at[{idx}], {sign}{self.text(node.value)}) (jnp's"
            f" {ref}.at[{idx}].add; repeated indices add up); for a window rather than indices, write"
            f" through the ref without .at: {ref}[{idx}] {'-' if sign else '+'}= ..."))
      if isinstance(node.target.value, ast.Name) and isinstance(self.env.get(node.target.value.id), (list, dict)) and \
          self._list_item(node.target, self.binop(op, self.eval(node.target), self.eval(node.value), node)):
        return                  # parts[0] += v of a list: the item rebound, as parts[0] = parts[0] + v (probe 52b)
      ref, index = self.subscript_target(node.target)
      if any(is_value(i) and isinstance(i.type, TensorType) for i in (index if isinstance(index, tuple) else (index,))):
        if ref.type.space == Space.GMEM and self._run_update(node, op, ref, index):
          return                          # out[offs] += v of a run pid * n + ml.arange(n): its window's
        name, idx = self.text(node.target.value), self.index_text(node.target.slice)   # counts[ids] += 1
        sign = "-" if isinstance(node.op, ast.Sub) else ""
        src = self._aliased_source(ref)
        start = f"the elements it does not update keep {src}'s values" if src else "an output so updated starts at 0"
        self.unsupported(node.target, "an augmented assignment at a tensor of indices", hint=(
            f"accumulate with ml.atomic_add({name}.at[{idx}], {sign}{self.text(node.value)}) (jnp's"
            f" {name}.at[{idx}].add; repeated indices add up; {start})"
            if isinstance(node.op, (ast.Add, ast.Sub)) else
            f"gather, combine and update element by element: {name}[...] is read and written whole,"
            f" scatters only add, max or min (ml.atomic_add / ml.atomic_max / ml.atomic_min)"))
      view = memory.view(self.cx(node.target), ref, index, self.text(node.target))
      cur = transfers.load(self.cx(node), view, self.text(node.target))
      value = self.eval(node.value)
      try:
        transfers.store(self.cx(node), view, self.binop(op, cur, value, node))
      except (E.DtypeMismatchError, E.StoreDtypeError) as e:    # the hints of `=` and `+` do not fit `+=`
        raise type(e)(e.message, e.loc, _aug_hint(self, node, view, value), notes=e.notes) from None
    else:
      self.unsupported(node, "this augmented assignment target")

  def _run_update(self, node, op, ref, index) -> bool:
    """`out[offs] += v` where offs is a run that never starts below 0: the read, update and masked store of
    the window it covers (frontend/ops/run_stores.py); False for other indices."""
    value = []

    def combine(cur):
      value.append(self.eval(node.value))
      return self.binop(op, cur, value[0], node)
    try:
      return run_update(self.cx(node.target), gather.IndexedRef(ref, index), combine)
    except (E.DtypeMismatchError, E.StoreDtypeError) as e:    # the hints of `=` and `+` do not fit `+=`
      raise type(e)(e.message, e.loc, _aug_hint(self, node, ref, value[0] if value else None), notes=e.notes) from None

  def _not_a_pointer(self, node, cur, step):
    """`a_ptrs += BLOCK_K * stride_ak`: Triton's pointer increment, on a ref (an integer step)."""
    from .ops.elementwise_checks import pointer_step
    if not (is_ref(cur) and isinstance(node.op, (ast.Add, ast.Sub))):
      return
    if (isinstance(step, int) and not isinstance(step, bool)) or (
        is_value(step) and not isinstance(step.type, TensorType) and getattr(resolve(step.type.dtype), "is_int", False)):
      pointer_step(self.cx(node), cur, self.text(node.value), self.loc(node), "+" if isinstance(node.op, ast.Add) else "-")

  def _attribute_hint(self, target, value_node) -> str | None:
    """`out.data = v` (a ref's contents, written through an index), `v.shape = (8, 16)` (numpy's in-place
    reshape, a new value here), `x.dtype = ...` (a conversion): what to write; None for other targets."""
    try:
      base = self.eval(target.value)
    except E.KernelError:
      return None
    if not is_value(base):
      return None
    name, value = self.text(target.value), self.text(value_node) if value_node is not None else "value"
    if target.attr == "shape":
      return (f"{name} is a ref: its shape is the array's; reshape the array outside the kernel (free in XLA), or"
              f" read it and reshape the value, v = {name}[...].reshape({value})" if is_ref(base) else
              f"a register value's shape is fixed: bind the name to the reshaped value, {name} = {name}.reshape({value})")
    if target.attr == "dtype":
      return (f"convert the value instead: v = {name}[...].astype({value})" if is_ref(base) else
              f"bind the name to the converted value, {name} = {name}.astype({value})")
    if is_ref(base):
      return f"a ref's elements are written through an index: {name}[...] = {value}"
    return None

  def _not_a_ref(self, node, cur):
    """`out *= 2.0`, `buf += 1.0` of a whole ref (a Pallas or NumPy habit: o_ref[...] *= 2): the name would be
    rebound to a value and the ref left as it was, so the update goes through an index."""
    if not is_ref(cur):
      return
    name, sym, value = node.target.id, _AUG_SYMBOLS.get(type(node.op), "?"), self.text(node.value)
    space = cur.type.space
    if gather.root_id(self.b, cur) in self.b.read_only and gather.root_id(self.b, cur) not in self.b.aliased:
      hint = (f"{name} is an input, which is read-only: compute in registers, v = {name}[...] {sym} {value}, and"
              f" store v into an output (out[...] = v)")
    else:
      hint = f"update its elements through an index: {name}[...] {sym}= {value}"
    raise E.KernelTypeError(
        f"{name} {sym}= ... would rebind the name {name}, {'an' if str(space) == 'SMEM' else 'a'} {space} ref, to a"
        f" value: a ref's elements are updated through an index", self.loc(node), hint=hint)

  def _not_in_place(self, node, cur, rebuilt=None):
    """`d |= {...}`, `taps += [v]`: Python changes the dict or list in place, where a kernel binds
    the name to a new one (its containers are values). A dict's |= is refused, as d.update is; a
    list's += is refused where another name, still read, holds the same list (it would not change)."""
    name, op = node.target.id, {ast.BitOr: "|", ast.Add: "+", ast.Mult: "*"}.get(type(node.op))
    value = self.text(node.value)
    if isinstance(cur, dict) and op == "|":
      value = value if len(value) <= 40 else "{'k': v}"
      raise E.KernelTypeError(
          f"{name} |= ...: {DICTS_FIXED}, so |= cannot change {name}", self.loc(node),
          hint=f"build a new one: {name} = {name} | {value}, or {name} = {{**{name}, 'k': v}}")
    if not isinstance(cur, (list, dict)) or op not in ("+", "*"):
      return
    kind = type(cur).__name__
    tracer, skip, stmt = self, {name}, node
    while tracer is not None:
      for other, v in tracer.env.items():
        if other in skip or not other.isidentifier() or not _holds(v, cur) \
            or not read_after(tracer.body, other, stmt):
          continue
        at = tracer.where.get(other)
        caller = "" if tracer is self else " in the caller"
        bound = f", bound at line {at.lineno}{caller}" if at is not None else caller
        copy = f"{other} = {kind}({name})" if v is cur and not caller else f"{kind}({name}) where {other} gets it"
        short = value if len(value) <= 40 else "[v]"
        said = getattr(node, "written", f"{name} {op}= ...")      # (hs.append(v), rewritten as hs += [v])
        raise E.KernelTypeError(
            f"{said} changes the {kind} {name} in place in Python, and {other} holds that same {kind}"
            f"{bound}; in a kernel {kind}s are values, fixed once built: {said} makes a new {kind}, so"
            f" {other} would keep the old items", self.loc(node),
            hint=f"write {rebuilt or f'{name} = {name} {op} {short}'} (a new {kind}, as in Python: {other} stays as"
                 f" it was), or give {other} a copy: {copy}")
      parent = tracer.parent
      stmt = getattr(parent, "stmt", None)
      if parent is None or stmt is None:
        return
      skip = set(assigned_names([stmt])) if isinstance(stmt, ast.Assign) else set()   # taps = add(taps, v)
      tracer = parent

  def assign(self, target, value, value_node):
    if isinstance(target, ast.Name):
      if is_value(value) and not (value.name or "").isidentifier() and self.at_call is None:
        value.name = target.id      # messages say `a`, not the expression that made it
      self.env[target.id] = value
      self.where[target.id] = self.loc(getattr(self, "stmt", None) or target)
    elif isinstance(target, (ast.Tuple, ast.List)):
      starred = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
      if starred and (items := _starred_items(self, value, value_node)) is not None:
        k, after = starred[0], len(target.elts) - starred[0] - 1      # *_, n = x.shape; first, *rest = tiles
        if len(items) < k + after:
          raise E.KernelTypeError(
              f"cannot unpack {kind_of(value)} of {len(items)} values into {len(target.elts) - 1} names and a"
              f" starred one (Python's ValueError: not enough values to unpack)", self.loc(target),
              hint=f"unpack at most {len(items)} names besides the starred one")
        parts = [*items[:k], list(items[k:len(items) - after]), *items[len(items) - after:]]
        for t, v in zip(target.elts, parts):
          self.assign(t.value if isinstance(t, ast.Starred) else t, v, value_node)
        return
      if starred:
        raise E.UnsupportedSyntaxError(
            "starred unpacking is not supported in a kernel", self.loc(target.elts[starred[0]]),
            hint=f"index instead: {self._index_instead(target, value_node, starred[0])}")
      value = tuple(value) if isinstance(value, (*DICT_VIEWS, *ITERATORS)) else value   # a, b = zip(*pairs)
      value = _rows(self, value, value_node, len(target.elts))   # a, b = x.at[0:2]: its rows, as Python's
      if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
        raise _unpack_error(self, target, value, value_node)
      for t, v in zip(target.elts, value):
        self.assign(t, v, value_node)
    elif isinstance(target, ast.Subscript):
      if self._list_item(target, value):
        return
      ref, index = self.subscript_target(target, value_node)
      if isinstance(ref, gather.IndexedRef):        # c.at[tok, :][...] = v
        return self._scatter(target.value, ref, value, value_node)
      from .ops.split_k import Split, write as split_write
      if isinstance(ref, Split):                    # (a buffer split along a ragged K: each part its columns)
        return split_write(self.cx(target), ref, index, value,
                           lambda p, piece: transfers.store(self.cx(target), p, piece))
      if self._scatter_set(target, ref, index, value_node):
        return self._scatter(target, gather.IndexedRef(ref, index), value, value_node)
      from .ops.permute import column_run, strided_rows
      if (cols := column_run(self.cx(target), ref, index)) is not None:   # o[:, j] = v of 8 rows: a scatter there
        return self._scatter(target, gather.IndexedRef(ref, cols), value, value_node)
      if (rows := strided_rows(self.cx(target), ref, index)) is not None:   # out[::2] = v: a scatter at those rows
        return self._scatter(target, gather.IndexedRef(*rows), value, value_node)
      values, nodes = self._index_operands(target.slice, index)     # (messages quote the user's index)
      cx = self.cx(target, values=[ref, *values], operands=[target.value, *nodes])
      cx.access = "write"
      view = ref if is_whole(index) else memory.view(cx, ref, index, self.text(target))
      whole = value_node is not None and not isinstance(getattr(self, "stmt", None), ast.AugAssign)
      transfers.store(self.cx(target, values=[value] if whole else (), operands=[value_node] if whole else ()),
                      view, value)     # (messages quote the value as written: `v.T`, not its name `v`)
    elif isinstance(target, ast.Attribute):
      self.unsupported(target, f"assigning to an attribute ({self.text(target)} = ...)",
                       hint=self._attribute_hint(target, value_node))
    else:
      self.unsupported(target, "this assignment target")

  def _list_item(self, target, value) -> bool:
    from .item_assign import item_assigned      # `parts[0] = v` of a list, `d["a"] = v` of a dict
    return item_assigned(self, target, value)

  def _index_instead(self, target, value_node, star) -> str:
    """`a, *rest = t` written with indices: `a, rest = t[0], t[1:]`."""
    n = len(target.elts)
    names = [self.text(t.value if isinstance(t, ast.Starred) else t) for t in target.elts]
    named = isinstance(value_node, (ast.Name, ast.Attribute))
    seq = self.text(value_node) if named else "t"
    idx = [f"{seq}[{i}]" for i in range(star)]
    idx.append(f"{seq}[{star}:{star - n + 1 or ''}]")
    idx += [f"{seq}[{i - n}]" for i in range(star + 1, n)]
    first = "" if named else f"t = {self.text(value_node)}; "
    return f"{first}{', '.join(names)} = {', '.join(idx)}"

  def _scatter(self, target, iref, value, value_node=None):
    """`c[tok, :] = v`: a plain scatter (jnp's `c.at[tok, :].set(v)`); of runs `pid * n + ml.arange(n)`, the
    store of the window they cover (frontend/ops/run_stores.py)."""
    whole = value_node is not None and not isinstance(getattr(self, "stmt", None), ast.AugAssign)
    run = self.cx(target, values=[value] if whole else (), operands=[value_node] if whole else ())
    run.access = "write"
    if run_scatter(run, iref, value):
      return
    cx = self.cx(target, values=[iref.ref, value], operands=[target, target])
    cx.access = "write"
    gather.scatter(cx, gather.AtomicKind.SET, iref, value, what="the scatter")

  def _aliased_source(self, ref) -> str | None:
    """The name of the input whose memory `ref` is (input_output_aliases: the aliased input itself, or the input
    its output starts as), or None: what an update at computed places keeps where it does not write."""
    from .ops.memory import root
    r = root(self.b, ref)
    if r.id in getattr(self.b, "aliased", ()):
      return r.name
    src = getattr(self.b, "alias_of", {}).get(r.id)
    return src.name if src is not None else None

  def _scatter_set(self, target, ref, index, value_node) -> bool:
    """Whether `c[tok, :] = v` of a GMEM ref or an SMEM buffer is a scatter (an index is a tensor); into an input,
    the error, with the output to scatter into in the user's words."""
    items = index if isinstance(index, tuple) else (index,)
    bad = next((i for i in items if is_value(i) and isinstance(i.type, TensorType)
                and any(n != 1 for n in i.type.shape)), None)
    if bad is None or ref.type.space not in (Space.GMEM, Space.SMEM) or ref.type.remote or ref.type.transposed:
      return False               # (an SMEM buffer's: its CTA's threads store at the places, probe 69b)
    name = self.text(target.value)
    first, out = scatter_target(self.b, ref, name)
    if not first:
      return True
    raise E.InputWriteError(
        f"this scatter writes {name}, an input: inputs are read-only", self.loc(target),
        hint=first + run_store_hint(self.b, out, items, target.slice, self.text, self.text(value_node))
        + scatter_set_hint(out, self.index_text(target.slice, items), self.text(value_node),
                           source=aliased_input(self.b, out)))

  def index_text(self, node, items=None) -> str:
    """A subscript's index as written, without the parentheses a tuple of indices takes in astor; with
    `items` (the index's values), a tensor of float (or bool) indices converted, as a scatter takes them."""
    nodes = node.elts if isinstance(node, ast.Tuple) else [node]
    items = list(items) if isinstance(items, (tuple, list)) else [items] if items is not None else []
    texts = [self.text(e) for e in nodes]
    return ", ".join([as_int_indices(t, i) for t, i in zip(texts, items)] + texts[len(items):])

  def _gmem_transposed_store(self, target, value_node):
    """`out.T[...] = v` of a GMEM ref: there is no transposed view to store through (only this CTA's SMEM
    has one), and its read's hint (copy it into SMEM first) would read an output nothing wrote: store
    the value transposed instead."""
    t = target.value
    if not (isinstance(t, ast.Attribute) and t.attr == "T" and isinstance(t.value, ast.Name)):
      return
    ref = self.lookup(t.value.id, t.value)
    if not (is_value(ref) and isinstance(ref.type, RefType) and ref.type.space == Space.GMEM
            and len(ref.type.shape) == 2):
      return
    from .ops.elementwise_checks import method_on
    name, value = t.value.id, self.text(value_node) if value_node is not None else "value"
    whole = isinstance(target.slice, ast.Constant) and target.slice.value is Ellipsis
    raise E.KernelTypeError(
        f"{name}.T: only this CTA's SMEM buffers have a transposed view, not GMEM refs", self.loc(target),
        hint=(f"store the value transposed: {name}[...] = {method_on(value)}.T (a register transpose, through"
              f" SMEM)" if whole else
              f"index {name} in its own order and store the value transposed: {name}[...] = {method_on(value)}.T,"
              f" with the indices of {name}.T[...] swapped"))

  def subscript_target(self, target, value_node=None):
    self._gmem_transposed_store(target, value_node)
    base = self.eval(target.value)
    if isinstance(base, gather.IndexedRef):
      hint = SCATTER_HINT
      if value_node is not None and isinstance(target.value, ast.Subscript) and is_whole(self.eval_index(target.slice)):
        sub = target.value                # c.at[tok, :][...] = v
        first, out = scatter_target(self.b, base.ref, self.text(sub.value.value) if isinstance(sub.value, ast.Attribute)
                                    else self.text(sub.value))
        if not first and base.ref.type.space == Space.GMEM:
          return base, None                 # a scatter (assign() does it)
        hint = first + run_store_hint(self.b, out, base.index if isinstance(base.index, tuple) else (base.index,),
                                      sub.slice, self.text, self.text(value_node)) \
            + scatter_set_hint(out, self.index_text(sub.slice), self.text(value_node),
                               source=aliased_input(self.b, out))
      raise E.KernelTypeError(
          f"{self.text(target.value)} is indexed by tensors: it is read ([...], a gather) or updated"
          f" atomically (a scatter), not assigned", self.loc(target), hint=hint)
    from .strided_views import StridedView, built, compose, part_indexed, strided_error
    from .ops.split_k import Split
    if isinstance(base, Split):             # (a buffer split along a ragged K: ops/split_k.write)
      return base, self.eval_index(target.slice)
    if isinstance(base, StridedView):       # out.at[1::2][...] = v: as out[1::2] = v
      index = self.eval_index(target.slice)
      if is_whole(index):
        return base.ref, base.index
      if (index := compose(base, index)) is None:
        raise part_indexed(base, index, self.loc(target)) \
            or strided_error(base, f"indexed again ({self.text(target)})", self.loc(target))
      return base.ref, built(self.cx(target), index)
    if isinstance(base, At):         # out.at[t] = h: the view's window, written with [...]
      ref, idx = self.text(target.value.value), self.index_text(target.slice)
      value = self.text(value_node) if value_node is not None else "value"
      self.unsupported(target, "assigning to ref.at[...]", hint=f"write through the view, {ref}.at[{idx}][...] ="
                       f" {value}, or the ref itself, {ref}[{idx}] = {value}")
    if isinstance(base, (tuple, list)):
      self._item_assignment(target, base)
    if isinstance(base, dict):      # (a static key of a dict bound to a name: frontend/item_assign.py)
      d, key = self.text(target.value), ast.unparse(target.slice)
      if holds_value(self.eval_index(target.slice)):
        raise E.KernelTypeError(
            f"{d} is a Python dict, whose keys are static (Python values while tracing): {key} is a run-time"
            f" value", self.loc(target), hint="key it by a static value (a constexpr, an ml.static_range index); to"
                                              " write at a run-time index keep the values in an ml.smem buffer")
      raise E.KernelTypeError(
          f"{d} is a Python dict: its entries are fixed once built (while tracing, a kernel's dicts are"
          f" values, as its tuples are)", self.loc(target),
          hint=f"build a new one: {d} = {{**{d}, {key}: ...}}")
    if not is_value(base) or not isinstance(base.type, RefType):
      hint = "write into a kernel parameter or an ml.smem buffer"
      if is_value(base) and isinstance(base.type, TensorType) and isinstance(target.value, ast.Name):
        hint = _register_write_hint(self, target, base)
      raise E.KernelTypeError(
          f"only refs can be written with [...] =, but {self.text(target.value)} is {kind_of(base)}",
          self.loc(target), hint=hint)
    from .static_tables import index_arrays       # out[REV] = v of a module's NumPy index table: a scatter
    return base, index_arrays(self, target, base, self.eval_index(target.slice))

  def _item_assignment(self, target, base):
    """`st[1] = v` on a Python list or tuple: they are values in a kernel (loops and branches
    carry them as such), so say how to rebuild one."""
    kind = type(base).__name__
    name = self.text(target.value)
    index = self.eval_index(target.slice)
    stmt = self.stmt if isinstance(getattr(self, "stmt", None), (ast.Assign, ast.AugAssign)) else None
    value = "v"
    if isinstance(stmt, ast.Assign):
      value = self.text(stmt.value)
    elif isinstance(stmt, ast.AugAssign):
      value = self.text(ast.BinOp(left=target, op=stmt.op, right=stmt.value))
    if len(value) > 40:
      value = "v"
    if holds_value(index):
      raise E.KernelTypeError(
          f"{name} is a Python {kind}: {kind}s in a kernel are values, so an item cannot be assigned",
          self.loc(target), hint=f"a {kind} is indexed with static ints (Python values, constexprs,"
                                 f" ml.static_range indices); to write at a run-time index keep the values in"
                                 f" an ml.smem buffer")
    if isinstance(index, int) and not isinstance(index, bool) and -len(base) <= index < len(base):
      i = index % len(base)
      item = f"[{value}]" if kind == "list" else f"({value},)"
      at = self.text(target.slice)     # (an ml.static_range index: its name, not this trip's value)
      rebuilt = f"{name}[:{i}] + {item} + {name}[{i + 1}:]" if isinstance(target.slice, ast.Constant) or \
          at.lstrip("-").isdigit() else f"{name}[:{at}] + {item} + {name}[{at} + 1:]"
    else:
      rebuilt = (f"[{value} if j == {self.text(target.slice)} else {name}[j]"
                 f" for j in ml.static_range(len({name}))]")
    raise E.KernelTypeError(
        f"{name} is a Python {kind}: {kind}s in a kernel are values, so an item cannot be assigned",
        self.loc(target), hint=f"rebuild it: {name} = {rebuilt}")


_AUG_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}


def _aug_hint(tracer, node, view, value) -> str:
  """What `ref[...] += v` of another dtype than the ref's is written as: the value converted to the ref's
  dtype (`out[...] += v.astype(jnp.bfloat16)`), or the whole update computed in the wider dtype and
  stored converted (`out[...] = (out[...] + v).astype(jnp.int32)`)."""
  from .types import dtype_name
  t, v, s = tracer.text(node.target), tracer.text(node.value), _AUG_OPS.get(type(node.op), "+")
  r = tracer.text(node.target.value)
  d = dtype_name(resolve(view.type.dtype))
  vd = resolve(value.type.dtype) if is_value(value) else None
  rd = resolve(view.type.dtype)
  whole = f"{t} = ({t} {s} {v}).astype(jnp.{d})"
  if vd is None or not hasattr(vd, "is_float"):
    return f"compute the update and store it converted to {r}'s dtype: {whole}"
  simple = isinstance(node.value, (ast.Name, ast.Call, ast.Subscript, ast.Attribute))
  converted = f"{t} {s}= {v if simple else f'({v})'}.astype(jnp.{d})"
  if getattr(rd, "is_float", False) and vd.is_float and vd.bits > rd.bits:
    w = dtype_name(vd)
    return (f"convert the value to {r}'s dtype, {converted}, or compute in {w} and store the result converted:"
            f" {t} = ({t}.astype(jnp.{w}) {s} {v}).astype(jnp.{d})")
  if getattr(rd, "is_float", False) and vd.is_float:
    return f"convert the value to {r}'s dtype: {converted}"
  return f"compute the update and store it converted to {r}'s dtype (as jnp's .astype does): {whole}"


def _register_write_hint(tracer, target, base) -> str:
  """`acc[...] = v`, `acc[...] += v`, `acc[:, :64] += 1.0` of a register tensor `acc`: it is a value, so
  the name is rebound, to the new tensor whole or to a select of the part (its mask an index grid)."""
  name, stmt = target.value.id, getattr(tracer, "stmt", None)
  aug = isinstance(stmt, ast.AugAssign) and stmt.target is target
  if not (aug or isinstance(stmt, ast.Assign) and target in stmt.targets):
    return "write into a kernel parameter or an ml.smem buffer"
  v = tracer.text(stmt.value)
  op = _AUG_OPS.get(type(stmt.op), "+") if aug else None
  new = f"{name} {op} {v}" if aug else v
  shape = base.type.shape
  items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
  conds, axis = [], 0
  for it in items:
    if isinstance(it, ast.Constant) and it.value is Ellipsis:
      if len(items) > 1:
        conds = None
        break
      axis = len(shape)
      continue
    if axis >= len(shape):
      conds = None
      break
    grid = "ml.arange({})".format(shape[axis]) + (
        "" if len(shape) == 1 else "[" + ", ".join(":" if k == axis else "None" for k in range(len(shape))) + "]")
    if isinstance(it, ast.Slice) and it.step is None and all(
        b is None or _static_int(b) is not None for b in (it.lower, it.upper)):
      lo, hi = (_static_int(b) if b is not None else None for b in (it.lower, it.upper))
      lo = lo + shape[axis] if lo is not None and lo < 0 else lo
      hi = hi + shape[axis] if hi is not None and hi < 0 else hi
      if lo not in (None, 0):
        conds.append(f"({grid} >= {lo})")
      if hi is not None and hi < shape[axis]:
        conds.append(f"({grid} < {hi})")
    elif _static_int(it) is not None:
      conds.append(f"({grid} == {_static_int(it) % shape[axis]})")
    else:
      conds = None
      break
    axis += 1
  if conds == []:
    return (f"{name} is a register value, not memory: rebind the name, {name} {op}= {v}" if aug else
            f"{name} is a register value, not memory: rebind the name, {name} = {v}")
  mask = " & ".join(conds) if conds else "m"
  return (f"{name} is a register value, not memory: rebind the name to a select of the part, {name} ="
          f" ml.where({mask}, {new}, {name})" + ("" if conds else
                                                 " (m a boolean index grid of the part, from ml.arange)"))


def _static_int(node):
  """The int a literal index is (`3`, `-8`), else None."""
  if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
    inner = _static_int(node.operand)
    return None if inner is None else -inner
  return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _starred_items(tracer, value, value_node):
  """The items `a, *rest = value` unpacks, as Python iterates it: a tuple's or list's (of any values), a static
  iterable's (a range, a dict's keys), the rows of a ref or register tensor of at most 64 (as `a, b = v`
  unpacks them); None for other values (their MG001)."""
  if isinstance(value, (tuple, list)):
    return list(value)
  if isinstance(value, (range, dict, str, *DICT_VIEWS, *ITERATORS)):
    return list(value)
  if is_value(value) and isinstance(value.type, (RefType, TensorType)) and value.type.shape and \
      isinstance(value.type.shape[0], int) and 0 < value.type.shape[0] <= 64:
    rows = _rows(tracer, value, value_node, value.type.shape[0])
    return list(rows) if isinstance(rows, tuple) else None
  return None


def _rows(tracer, value, value_node, n):
  """`a, b = x.at[0:2]` (a ref) or `a, b = v` (a register tensor) of `n` rows: its rows, as Python unpacks
  an array by its first axis (refs as windows, `x.at[0:2].at[k]`; register rows as `v[k]` reads them); any
  other value as it is."""
  from .ops import shape
  from .ops.base import keep_weak
  if not (is_value(value) and isinstance(value.type, (RefType, TensorType)) and value.type.shape
          and value.type.shape[0] == n and value_node is not None):
    return value
  text = tracer.text(value_node)
  out = []
  for k in range(n):
    cx = tracer.cx(value_node)
    if isinstance(value.type, RefType):
      out.append(memory.view(cx, value, k, f"{text}.at[{k}]"))
    else:
      cx.text = f"{text}[{k}]"
      out.append(keep_weak(tracer.b, [value], shape.expand(cx, value, k)))
  return tuple(out)


def _unpack_error(tracer, target, value, value_node):
  """`a, b = t` of a value that does not have as many items as names, in Python's words."""
  n = len(target.elts)
  names = ", ".join(tracer.text(e) for e in target.elts)
  text = tracer.text(value_node) if value_node is not None else "t"
  simple = isinstance(value_node, (ast.Name, ast.Call, ast.Subscript, ast.Attribute))
  t = text if simple else f"({text})"
  if isinstance(value, (tuple, list)):
    m = len(value)
    more = [f"v{k}" for k in range(m)]
    hint = (f"name each of its {m} values ({', '.join(more)} = {text})" if m > n else
            f"unpack as many names as it has values ({', '.join(more)} = {text})" if m else
            "it is empty: there is nothing to unpack")
    if m > n:
      hint += f", or take the first {n}: {names} = {t}[:{n}]"
    return E.KernelTypeError(f"cannot unpack {kind_of(value)} of {m} values into {n} names", tracer.loc(target),
                             hint=hint)
  if is_value(value) and isinstance(value.type, (RefType, TensorType)) and value.type.shape:
    rows = value.type.shape[0]
    what = "a window" if isinstance(value.type, RefType) else "a slice"
    take = f"{t}.at[0:{n}]" if isinstance(value.type, RefType) else f"{t}[0:{n}]"
    return E.KernelTypeError(
        f"cannot unpack {kind_of(value)} of {rows} rows into {n} names (an array unpacks by its first axis)",
        tracer.loc(target), hint=f"unpack {what} of {n} rows, {names} = {take}, or index the rows you need")
  return E.KernelTypeError(f"cannot unpack {kind_of(value)} into {n} names", tracer.loc(target),
                           hint=f"unpack a tuple of {n} values")


_AUG_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
                ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
                ast.BitXor: "^", ast.MatMult: "@"}
