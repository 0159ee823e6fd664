"""A masked load's or store's bound taken from another dimension of the array it indexes (MG203).

Triton's tail mask compares each index vector with the size of the dimension it positions:
`x.at[r, cols].load(mask=cols < x.shape[1])`. Written with the other dimension's size, `cols < x.shape[0]` (or
`cols < M` after `M, N = x.shape`), the mask keeps off elements inside the array where that size is the smaller
one (a row sum of a (64, 100) array adds 64 of its 100 columns, with no error from the GPU or interpret mode), and
keeps on elements past its end where it is the larger (MG203's bounds check found those, with a hint that kept
the wrong bound). Read from the source: the comparison (its op's own location), the window's subscript at the
access, and the kernel's `M, N = x.shape` / `N = x.shape[1]` assignments; reported at the comparison where the
two sizes differ (a square array gives the right numbers). Frontend only: it reads the AST and the typed IR.
"""
from __future__ import annotations

import ast

from . import errors as E
from . import ir
from .loc import call_at
from .ops.access import MaskedLoad, MaskedStore
from .ops.elementwise import BinOp, Binary, Compare
from .ops.memory import View
from .ops.shape import Broadcast

_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


def _bound_once(tree, bind) -> dict:
  """{name: what it is bound to} of the kernel's names bound once: `bind(node, found)` records the bindings of each
  node it understands into `found`; a name that any assignment (augmented, annotated) or for loop binds again is
  dropped."""
  found, count = {}, {}
  for node in ast.walk(tree):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
    for t in targets:
      for n in ast.walk(t):
        if isinstance(n, ast.Name):
          count[n.id] = count.get(n.id, 0) + 1
    bind(node, found)
  return {n: d for n, d in found.items() if count.get(n) == 1}


def shape_names(tree) -> dict:
  """{name: (array text, dimension)} of the kernel's names bound once to an array's size: `N = x.shape[1]`,
  `M, N = x.shape`, `M, N = x.shape[0], x.shape[1]`."""
  def bind(node, found):
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
      return
    t, v = node.targets[0], node.value
    if isinstance(t, ast.Name) and _dim(v) is not None:
      found[t.id] = _dim(v)
    elif isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts):
      if isinstance(v, ast.Attribute) and v.attr == "shape":
        for k, e in enumerate(t.elts):
          found[e.id] = (ast.unparse(v.value), k)
      elif isinstance(v, ast.Tuple) and len(v.elts) == len(t.elts):
        for e, x in zip(t.elts, v.elts):
          if _dim(x) is not None:
            found[e.id] = _dim(x)
  return _bound_once(tree, bind)


def _dim(node):
  """(array text, dimension) of `x.shape[k]` (k a literal, `x.shape[-1]` too), else None."""
  if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape"):
    return None
  k, sign = node.slice, 1
  if isinstance(k, ast.UnaryOp) and isinstance(k.op, ast.USub):
    k, sign = k.operand, -1
  if isinstance(k, ast.Constant) and type(k.value) is int:
    return ast.unparse(node.value.value), sign * k.value
  return None


def view_names(tree) -> dict:
  """{name: the `x.at[...]` subscript} of the kernel's names bound once to a view (probe 49f): `xr = x.at[r]`,
  `ptrs = x.at[r, cols]`, `blk = x.at[ml.ds(i * 64, 64)]`."""
  def bind(node, found):
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _at(
        node.value):
      found[node.targets[0].id] = node.value
  return _bound_once(tree, bind)


def _at(node) -> bool:
  return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at"


def _items(sub, views, depth=0):
  """(array text, [(names, text)]) of `sub` (`x.at[...]`), through the views it is taken of (`xr.at[cols]` of
  `xr = x.at[r]`: x's items `r, cols`; a scalar index drops its dimension, a slice or `ml.ds` keeps it for the
  next view's items), or None."""
  items = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
  if any(isinstance(i, ast.Constant) and i.value is Ellipsis for i in items):
    return None
  own = [(variables(i), _bare(i)) for i in items]
  base = sub.value.value
  if not (isinstance(base, ast.Name) and base.id in views) or depth > 8:
    return ast.unparse(base), own
  outer = _items(views[base.id], views, depth + 1)
  if outer is None:
    return None
  name, above = outer
  outer_nodes = views[base.id].slice.elts if isinstance(views[base.id].slice, ast.Tuple) else [views[base.id].slice]
  if len(outer_nodes) != len(above):          # (the outer view is itself composed: keep it simple)
    return None
  composed, rest = [], list(own)
  for node, (used, text) in zip(outer_nodes, above):
    if _keeps(node) and rest:
      inner = rest.pop(0)
      composed.append((used | inner[0], inner[1]))
    else:
      composed.append((used, text))
  return name, composed + rest


def _keeps(node) -> bool:
  """Whether a view's index keeps its dimension: a slice, or `ml.ds(...)`."""
  return isinstance(node, ast.Slice) or isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
      node.func.attr in ("ds", "dslice"))


def _window(loc, views=None):
  """(array text, [(the names each subscript item uses, its text less broadcasts)]) of the access
  `x.at[i, cols].load(...)` / `.store(...)` (or `ml.load(x.at[...], ...)`) written at `loc`, or None; through the
  names bound to views (`ptrs.load(...)` of `ptrs = x.at[r, cols]`, `xr.at[cols].load(...)` of `xr = x.at[r]`)."""
  views = views or {}
  node = call_at(loc) or _call_lines(loc)
  if node is None:
    return None
  sub = None
  if isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "store"):
    sub = node.func.value
    sub = views.get(sub.id, sub) if isinstance(sub, ast.Name) else sub
    if not _at(sub):
      sub = node.args[0] if node.args else None
  sub = views.get(sub.id, sub) if isinstance(sub, ast.Name) else sub
  if not _at(sub):
    return None
  return _items(sub, views)


def _call_lines(loc):
  """The call written at `loc` over several lines (`x.at[...].load(\n    mask=..., other=0.0)`), or None."""
  import linecache
  first, last = getattr(loc, "lineno", 0), getattr(loc, "end_lineno", None)
  lines = linecache.getlines(getattr(loc, "filename", ""))
  if not last or last <= first or last > len(lines) or getattr(loc, "end_col_offset", None) is None:
    return None
  text = [lines[first - 1][loc.col_offset:]] + lines[first:last - 1] + [lines[last - 1][:loc.end_col_offset]]
  try:
    node = ast.parse("(" + "".join(text) + ")", mode="eval").body
  except SyntaxError:
    return None
  return node if isinstance(node, ast.Call) else None


def _bare(node) -> str:
  """`node`'s text without the broadcasts around it: `ml.arange(64)` of `ml.arange(64)[None, :]`."""
  while isinstance(node, ast.Subscript) and all(
      isinstance(e, ast.Constant) and e.value is None or isinstance(e, ast.Slice) and not (e.lower or e.upper or e.step)
      for e in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])):
    node = node.value
  return ast.unparse(node)


def _compares(mask, defs):
  """The Compare ops a mask is made of (through `&` and broadcasts)."""
  out, todo, seen = [], [mask], set()
  while todo:
    v = todo.pop()
    o = defs.get(getattr(v, "id", None))
    if o is None or id(o) in seen:
      continue
    seen.add(id(o))
    if isinstance(o, Compare):
      out.append(o)
    elif isinstance(o, Broadcast):
      todo.append(o.x)
    elif isinstance(o, Binary) and o.kind == BinOp.AND:
      todo += [o.lhs, o.rhs]
  return out


def _bound(cmp_node, dims):
  """((index side's names, its text less broadcasts), (array text, dimension) of the bound, the ast node naming
  the bound) of a comparison
  `index < bound` (or `bound > index`), the bound `x.shape[k]` or a name bound to one; else None."""
  if not (isinstance(cmp_node, ast.Compare) and len(cmp_node.ops) == 1):
    return None
  left, right, op = cmp_node.left, cmp_node.comparators[0], type(cmp_node.ops[0])
  if op in (ast.Gt, ast.GtE):
    left, right = right, left
  elif op not in (ast.Lt, ast.LtE):
    return None
  d = _dim(right) or (dims.get(right.id) if isinstance(right, ast.Name) else None)
  if d is None:
    return None
  return (variables(left), _bare(left)), d, right


def variables(node) -> set:
  """The names `node` reads as values (`cols` of `k + cols[None, :]`), not as modules (`ml` of `ml.arange(64)`)."""
  bases = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)}
  return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in bases}


def check_mask_axes(kernel: ir.Kernel, defs: dict, tree) -> list:
  """MG203 for each comparison of a masked access's mask that bounds an index by another dimension's size."""
  dims, views = shape_names(tree), view_names(tree)
  errors, seen = [], {}
  lead = getattr(kernel, "batch_lead", {}) or {}
  shapes, inputs = _param_names(kernel, lead)
  for o in ir.walk(kernel.body):
    if not isinstance(o, (MaskedLoad, MaskedStore)):
      continue
    win = _window(o.loc, views)
    view, root = defs.get(getattr(o.ref, "id", None)), o.ref
    while isinstance(view, View):
      root, view = view.ref, defs.get(getattr(view.ref, "id", None))
    shape = tuple(getattr(root.type, "shape", ()))[lead.get(root.id, 0):]
    if win is None or len(win[1]) != len(shape):
      continue
    name, items = win
    for c in _compares(o.mask, defs):
      key = (c.loc.filename, c.loc.lineno, c.loc.col_offset, o.loc.lineno, o.loc.col_offset)
      if id(c) in seen or key in seen:     # (one error per comparison and access: ml.static_range unrolls both)
        seen.get(id(c), seen.get(key)).access.add((o.loc.lineno, o.loc.col_offset))
        continue
      if (node := _parsed(c)) is None:
        continue
      b = _bound(node, dims)
      other = b is not None and b[1][0] != name and shapes.get(b[1][0]) != shape     # (x.shape of o = x's)
      if b is None or other and not _other_input(o, name, b[1][0], inputs, shapes):
        continue
      (names, text), (array, k), bnode = b
      if names:                  # (the item whose names the index uses, and no other item uses them)
        at = [p for p, (used, _) in enumerate(items) if names <= used]
        if len(at) != 1 or any(names & used for p, (used, _) in enumerate(items) if p != at[0]):
          continue
      else:                      # (an index of no variable, `ml.arange(64)`: the item written the same)
        at = [p for p, (_, it) in enumerate(items) if it == text]
        if len(at) != 1:
          continue
      p, k = at[0], k % len(shape) if -len(shape) <= k < len(shape) else None
      if other:                  # (another input's size of the same dimension, and no bound of x's own beside it)
        if k != p or shapes[array][k] == shape[p] or _offsets(shape, shapes[array][k]) or _own_bound(
            o.mask, defs, names, text, name, p, dims, len(shape)):
          continue
        e = seen[id(c)] = seen[key] = _error_other(c, o, name, array, node, bnode, p, shape, shapes[array], dims)
        e.access = {(o.loc.lineno, o.loc.col_offset)}
        errors.append(e)
        continue
      if k is None or k == p or shape[k] == shape[p]:
        continue
      e = seen[id(c)] = seen[key] = _error(c, o, name, array, node, bnode, p, k, shape, dims)
      e.access = {(o.loc.lineno, o.loc.col_offset)}
      errors.append(e)
  return errors


def _param_names(kernel, lead) -> tuple[dict, set]:
  """({name: shape}, the inputs' names) of the kernel's parameters, by the names the source reads them by. A
  pytree's leaves take the name of the variable a loop binds them to (`for p, g in zip(ps, gs)`: every leaf
  of ps is `p`), so a name several parameters of different shapes share says no one array: it is left out
  (a mask bounded by `p.shape[0]` compared with the `g` of another trip was MG203, probe 53g)."""
  shapes, inputs, clash = {}, set(), set()
  for p in kernel.params:
    name, shape = p.value.name, tuple(getattr(p.value.type, "shape", ()))[lead.get(p.value.id, 0):]
    if shapes.setdefault(name, shape) != shape:
      clash.add(name)
    if not p.is_output:
      inputs.add(name)
  return {n: s for n, s in shapes.items() if n not in clash}, inputs - clash


def _parsed(c):
  """The source of comparison op `c` parsed (an expression's AST), where it is written on one line; else None."""
  if c.loc.end_lineno != c.loc.lineno:
    return None
  try:
    return ast.parse(c.loc.source_line[c.loc.col_offset:c.loc.end_col_offset], mode="eval").body
  except (SyntaxError, TypeError):
    return None


def _other_input(o, name, array, inputs, shapes) -> bool:
  """A masked load of input `name` bounded by the size of another input `array` of the same rank (probe 49f)."""
  return (isinstance(o, MaskedLoad) and name in inputs and array in inputs and name in shapes
          and len(shapes.get(array, ())) == len(shapes[name]))


def _offsets(shape, bound) -> bool:
  """Whether a 1-D input of `shape` is the offsets of `bound` items (probe 71a): a CSR's row pointers, a jagged
  batch's offsets or `cu_seqlens`, n + 1 entries, read at the items' indices under the items' own bound, `start =
  ml.load(rowptr.at[u], mask=u < n)` with `n = x.shape[0]` of a feature array (it was MG203, whose hint wrote both
  bounds for the mask that keeps off only the last offset, read as `rowptr.at[u + 1]`)."""
  return len(shape) == 1 and shape[0] == bound + 1


def _own_bound(mask, defs, names, text, name, p, dims, rank) -> bool:
  """Whether `mask` also bounds the same index by `name`'s own size along `p` (`(cols < x.shape[1]) &
  (cols < y.shape[1])`: a prefix of x the size of y's meant, and said)."""
  for c in _compares(mask, defs):
    if (node := _parsed(c)) is None:
      continue
    b = _bound(node, dims)
    if b is not None and b[1][0] == name and -rank <= b[1][1] < rank and b[1][1] % rank == p and (
        b[0][0] == names if names else b[0][1] == text):
      return True
  return False


def _error_other(c, o, name, array, node, bnode, p, shape, bshape, dims):
  """MG203 for a load of `name` whose mask bounds its index along `p` by another input's size there (probe 49f)."""
  index, said, effect = _bound_words(node, bnode, array, p, name, "load", shape[p], bshape[p])
  own = next((n for n, d in dims.items() if d == (name, p)), None) or f"{name}.shape[{p}]"
  fixed = ast.unparse(_replaced(node, bnode, own))
  prefix = (f"; where only the first {array}.shape[{p}] elements of {name} are meant, say so with both bounds:"
            f" ({fixed}) & ({ast.unparse(node)})") if bshape[p] < shape[p] else ""
  return E.IndexOutOfBoundsError(
      f"this mask bounds {index}, which indexes dimension {p} of {name} (size {shape[p]}) in the masked load at line"
      f" {o.loc.lineno}, by {said} (size {bshape[p]}), the size of another array: {effect}", c.loc,
      hint=f"bound each index by the size of the array it indexes: {fixed}{prefix}")


def with_mask_axes(found: list, errors: list) -> list:
  """`found` (check_mask_axes') first, then `errors` less what they cause: the bounds error (MG203) or the
  unwritten output (MG602) of the same masked access."""
  if not found:
    return errors
  at = set().union(*(e.access for e in found))
  return found + [e for e in errors if not (e.code in ("MG203", "MG602") and (e.lineno, e.col_offset) in at)]


def _error(c, o, name, array, node, bnode, p, k, shape, dims):
  what = "load" if isinstance(o, MaskedLoad) else "store"
  index, said, effect = _bound_words(node, bnode, array, k, name, what, shape[p], shape[k])
  other = next((n for n, d in dims.items() if d == (array, p)), None)
  fix = other or f"{array}.shape[{p}]"
  fixed = ast.unparse(_replaced(node, bnode, fix))
  return E.IndexOutOfBoundsError(
      f"this mask bounds {index}, which indexes dimension {p} of {name} (size {shape[p]}) in the masked {what} at line"
      f" {o.loc.lineno}, by {said} (size {shape[k]}), the size of dimension {k}: {effect}", c.loc,
      hint=f"bound each index by the size of the dimension it indexes: {fixed}")


def _bound_words(node, bnode, array, axis, name, what, size, bound_size):
  """(the index the mask compares, the bound as said, what the bound does) of a mask's comparison `node` that bounds
  an index of `name` (of `size` along the dimension it indexes) by `bnode`, `array`'s size along `axis`
  (`bound_size`), in the masked `what` ("load" or "store")."""
  index = ast.unparse(node.left if type(node.ops[0]) in (ast.Lt, ast.LtE) else node.comparators[0])
  bound = ast.unparse(bnode)
  said = bound if bound == f"{array}.shape[{axis}]" else f"{bound}, {array}.shape[{axis}]"
  if bound_size < size:
    effect = (f"it keeps off positions {bound_size} to {size - 1} of that dimension, inside {name}, so the {what}"
              f" {'leaves them out' if what == 'load' else 'leaves them unwritten'}")
  else:
    effect = (f"it keeps on positions {size} to {bound_size - 1}, past the end of that dimension, so the {what}"
              f" touches memory outside {name}")
  return index, said, effect


def _replaced(node, old, text):
  """`node` (a comparison) with its bound `old` replaced by the expression `text`."""
  new = ast.parse(text, mode="eval").body
  cmp_ = ast.Compare(left=node.left, ops=node.ops, comparators=list(node.comparators))
  if cmp_.left is old:
    cmp_.left = new
  else:
    cmp_.comparators = [new if x is old else x for x in cmp_.comparators]
  return cmp_
