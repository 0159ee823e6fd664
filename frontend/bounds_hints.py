"""Hints for a window outside its buffer (MG203, interpret mode's MG952): the window in the user's
words (`_user_window`), the value stored (`_stored_text`), and the mask or clamp that keeps it inside."""
from __future__ import annotations

from .ir import Access as A
from .ops.atomic import AtomicUpdate
from .ops.scatter_hints import atomic_outside_hint
from .ops.memory import View
from .types import RefType

READS = (A.REG_READ, A.TMA_READ, A.MMA_READ)


def _view_axis(view, d):
  """(axis of the view that dimension d of its root becomes, the view's rank); axis None when
  an integer index drops dimension d."""
  if not isinstance(view, View):
    return d, None
  kept = [k for k, i in enumerate(view.index) if not i.squeeze]
  return (kept.index(d) if d in kept else None), len(kept)


def _user_window(loc, root, d):
  """(the window as the user wrote it, `root.at[...]`, the text of its start in dimension d, and None) for
  an access written `root[idx]` or `root.at[idx][...]` with an ml.ds(start, size) for dimension d; for a
  run of offsets (`ml.load(root.at[offs], ...)`, `root.at[offs].store(v)`: Triton's `ptr + offs`), the
  window, None and the offsets' text; else None."""
  import ast
  from .loc import expr_at
  node = expr_at(loc)
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "store"):
    f = node.func             # ml.load(root.at[offs], ...), root.at[offs].store(v, ...)
    node = node.args[0] if isinstance(f.value, ast.Name) and f.value.id == "ml" and node.args else f.value
  if not isinstance(node, ast.Subscript):
    return None
  base, index = node.value, node.slice
  if isinstance(base, ast.Subscript) and isinstance(base.value, ast.Attribute) and base.value.attr == "at" and (
      isinstance(index, ast.Constant) and index.value is Ellipsis):
    base, index = base.value.value, base.slice            # root.at[idx][...]
  run = isinstance(base, ast.Attribute) and base.attr == "at"
  if run:
    base = base.value                                     # root.at[offs]
  if not (isinstance(base, ast.Name) and base.id == root):
    return None
  items = index.elts if isinstance(index, ast.Tuple) else [index]
  at = items[d] if d < len(items) and not any(
      isinstance(i, ast.Constant) and i.value is Ellipsis for i in items[:d + 1]) else None
  window = ", ".join(ast.unparse(i) for i in items)
  ds = isinstance(at, ast.Call) and ast.unparse(at.func) == "ml.ds"
  if run and at is not None and not ds and not isinstance(at, (ast.Slice, ast.Constant)):    # (ml.arange(128) too)
    return f"{root}.at[{window}]", None, ast.unparse(at)
  if not (ds and len(at.args) == 2):
    return None
  start = at.args[0]
  low = isinstance(start, (ast.BoolOp, ast.Compare, ast.IfExp, ast.Lambda)) or isinstance(start, ast.BinOp) and (
      not isinstance(start.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)))
  return f"{root}.at[{window}]", f"({ast.unparse(start)})" if low else ast.unparse(start), None


def _element_index(loc, d):
  """The text of index d of the element access `y[i, j]` (`y.at[i, j][...]`) at `loc`, where it is a plain index
  (no slice, ml.ds or Ellipsis); else None."""
  import ast
  from .memory_errors import _index_texts
  node = _expr_at(loc)
  texts = _index_texts(loc) if isinstance(node, ast.Subscript) else None
  if not texts or d >= len(texts) or any(":" in t or "ml.ds" in t or t == "..." for t in texts[:d + 1]):
    return None
  return texts[d]


def _expr_at(loc):
  from .loc import expr_at
  try:
    return expr_at(loc)
  except Exception:       # (a location whose source cannot be read)
    return None


def _block_ptr_access(loc):
  """(the name of the block pointer a load or store at `loc` takes unchecked, the stored value's text) for
  `tl.load(K_block_ptr)` / `tl.store(O_block_ptr, v)` of a name the kernel's file binds with make_block_ptr or
  advance, else None (probe 49h)."""
  import ast
  import linecache
  import re
  try:
    call = ast.parse((loc.source_line or "")[loc.col_offset:loc.end_col_offset], mode="eval").body
  except (SyntaxError, TypeError):
    return None
  if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("load", "store")
          and call.args and isinstance(call.args[0], ast.Name)
          and not any(k.arg in ("mask", "boundary_check") for k in call.keywords)):
    return None
  name = call.args[0].id
  text = "".join(linecache.getlines(loc.filename))
  if not re.search(rf"\b{name}\s*=\s*[\w.]*\b(make_block_ptr|advance)\(", text):
    return None
  value = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "value"), None)
  return name, ast.unparse(value) if value is not None else "value"


def _stored_text(loc):
  """The text of the value an assignment `window = value` on one source line stores (or the value of the
  `ml.store(ref, value)` / `ref.store(value)` call at `loc`), else None."""
  import ast
  try:
    call = ast.parse((loc.source_line or "")[loc.col_offset:loc.end_col_offset], mode="eval").body
  except SyntaxError:
    call = None
  if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "store":
    ml_form = isinstance(call.func.value, ast.Name) and call.func.value.id == "ml"
    args = call.args[1:] if ml_form else call.args
    value = args[0] if args else next((k.value for k in call.keywords if k.arg == "value"), None)
    return ast.unparse(value) if value is not None else None
  try:
    stmt = ast.parse((loc.source_line or "").strip()).body[0]
  except (SyntaxError, IndexError):
    return None
  return ast.unparse(stmt.value) if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None


def _bounds_hint(acc, root, d, n, full, before, gmem, view=None, output=False) -> str:
  """What fixes a window that starts before 0 (`before`) or runs past the end of dimension d.
  The mask it suggests has the window's rank: the positions along the masked axis, with the
  window's other axes inserted as size-1 axes (`[:, None]` for rows of a 2-D window). A read of
  an output is not clamped: the clamped window is one this program has not written yet; nor is a
  write: the clamped window overlaps the one before it, which another program writes."""
  clamp = acc.kind in READS and not output
  # an SMEM window's start in the user's words (`i * 64` of `a_s.at[ml.ds(i * 64, 64)]`, an ml.dot operand)
  written = _user_window(view.loc, root, d) if not gmem and isinstance(view, View) else None
  s = written[1] if written and written[1] else "start"
  if n == 1 and not written and acc.kind in (A.REG_READ, A.REG_WRITE) and (i := _element_index(acc.op.loc, d)):
    # (an element `y[row + 1] = v` past the end: its index as written, where the hint said "if start + 1 <= 4",
    # a start the user never wrote; probe 71a)
    return (f"guard the access (if {i} >= 0:)" if before else f"guard the access (if {i} < {root}.shape[{d}]:)") + (
        "" if not clamp else f" or clamp its index ({'ml.maximum' if before else 'ml.minimum'}({i},"
        f" {0 if before else f'{root}.shape[{d}] - 1'}))")     # (no clamp of an output's read: MG601 there)
  fix = (f"guard the access (if {s} >= 0:, with the trips it skips handled apart)"
         + (f" or clamp its start (ml.maximum({s}, 0))" if clamp else "") if before else
         f"guard the access (if {s} + {n} <= {full}:)"
         + (f" or clamp its start (ml.minimum({s}, {full - n}))" if clamp else ""))
  if n > full and not before:      # no start keeps so long a window inside: neither guard nor clamp helps
    fix = (f"call the kernel on non-empty arrays only ({root} has no elements along dimension {d}; a call"
           " whose outputs are all empty returns them without a launch)" if full == 0 else
           f"take a window of at most {full} elements along dimension {d}")
  if isinstance(acc.op, AtomicUpdate) and gmem and isinstance(view, View):
    # a guard skips the tail and a clamped start adds the overlap twice: a scatter drops what is outside
    return atomic_outside_hint(acc.op, view.ref, view.index, d, n, full, before)
  if not gmem:
    return fix + "; windows of an SMEM buffer must stay inside it"
  axis, rank = _view_axis(view, d)
  if rank is None:
    rank = len(acc.ref.type.shape) if isinstance(acc.ref.type, RefType) else 1
  if acc.kind in (A.REG_READ, A.REG_WRITE) and (ptr := _block_ptr_access(acc.op.loc)) is not None:
    checked = tuple(range(rank))                    # (every axis: right whichever axis the pointer walks here)
    return (f"check the block pointer's bounds: ml.load({ptr[0]}, boundary_check={checked}, padding_option=\"zero\")"
            f" reads zeros past its shape" if acc.kind == A.REG_READ else
            f"check the block pointer's bounds: ml.store({ptr[0]}, {ptr[1]}, boundary_check={checked}) drops what lies"
            f" past its shape")
  if acc.kind in (A.REG_READ, A.REG_WRITE) and axis is not None:
    written = _user_window(acc.op.loc, root, d)     # the user's own window, else a template of it
    window, start, offs = written or (f"{root}.at[...]", "start", None)
    pos = offs or f"{start} + ml.arange({n})"
    if rank > 1 and offs is None:
      pos = f"({pos})[{', '.join(':' if k == axis else 'None' for k in range(rank))}]"
    inside = (f"{pos} >= 0" if before else f"{pos} < {root}.shape[{d}]")
    op = (f"{window}.load(mask={inside}, other=0)" if acc.kind == A.REG_READ
          else f"{window}.store({(written and _stored_text(acc.op.loc)) or 'value'}, mask={inside})")
    # the mask first: a guard leaves a ragged tail unwritten, a clamped start overlaps a neighbour's
    tail = " (read an input's tail the same way, .load(mask=..., other=0))"
    if offs is not None:        # Triton's ptr + offs: the mask is the whole fix
      return f"mask the offsets to the elements inside: {op}"
    if written:                 # the user's access rewritten: a read stays a read
      for form in ("(if start ", "(ml.maximum(start,", "(ml.minimum(start,"):
        fix = fix.replace(form, form.replace("start", start))
      return f"mask it to the elements inside: {op}{'' if acc.kind == A.REG_READ else tail}; or {fix}"
    return f"mask it to the elements inside, start being the window's start: {op}{tail}; or {fix}"
  if acc.kind in (A.REG_READ, A.REG_WRITE):
    return fix                 # an integer index past the end: no mask drops it
  return fix + "; ml.copy into SMEM instead reads zeros outside a GMEM array"


def register_bounds_hint(op, view, root, d, n, full, before, output) -> str:
  """`_bounds_hint` for interpret mode: a register read or write (`op`, a Load or a Store of the
  window `op.ref`, made by `view`) whose run-time window leaves dimension d of its GMEM array, as the
  compile-time check hints a window the program ids prove outside."""
  from types import SimpleNamespace
  kind = A.REG_WRITE if hasattr(op, "value") else A.REG_READ
  return _bounds_hint(SimpleNamespace(op=op, kind=kind, ref=op.ref), root, d, n, full, before, True, view,
                      output=output)


def whole_table_gather_hint(kernel, o, r) -> str | None:
  """For a register tile too large to hold that is a whole read of a GMEM ref only gathered from
  (`w_ref[...][ids]`, `jnp.take(w_ref[...], ids, axis=0)` of an embedding table, probe 52c): gather from
  the ref itself, which reads only the rows the ids name. None for other tiles."""
  from . import ir
  from .ops.memory import Load
  from .ops.register_gather import ScratchGather
  from .relayout import RelayoutStore
  from .types import Space
  if type(o) is not Load or o.ref.type.space != Space.GMEM:
    return None
  ops = list(ir.walk(kernel.body))
  users = [u for u in ops if any(v is r for v in u.operands())]
  scratches = {id(u.scratch) for u in users if type(u) is RelayoutStore}
  if not users or len(scratches) != len(users) or not any(
      type(u) is ScratchGather and id(u.scratch) in scratches for u in ops):
    return None
  name = o.ref.name or "the table"
  rows = o.ref.type.shape[0] if o.ref.type.shape else 0
  index = "ids" if len(o.ref.type.shape) == 1 else "ids, :"
  return (f"gather from {name} itself, {name}[{index}] of the index tensor ids (or {name}.at[{index}][...]): a gather"
          f" of a GMEM ref reads only the rows the ids name, where {name}[...] first reads all {rows} of them into"
          f" registers")
