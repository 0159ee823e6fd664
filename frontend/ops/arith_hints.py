"""The hints of integer arithmetic's mistakes, written out in the user's operands: divisors and
shift amounts that can be out of range (every lane computes, also one a select discards), Python
ints that fit only uint32, and Triton's pointer arithmetic."""
from __future__ import annotations

import math

from ..dtypes import DType


def unsigned_hint(value, dtype, name, op, value_right=True):
  """The hint for a signed integer meeting a Python int that fits only uint32 (Knuth's hash
  `ids * 2654435761`, a mask `x & 0xFFFFFFFF`): compute in uint32; None for other cases."""
  if not (isinstance(value, int) and 2 ** 31 <= value < 2 ** 32 and isinstance(dtype, DType) and dtype.is_int
          and dtype not in (DType.u32, DType.i64) and op in ("+", "-", "*", "&", "|", "^")):
    return None
  x = name if name.replace("[...]", "").replace(".", "").replace("_", "").isalnum() else f"({name})"
  u = f"{x}.astype(jnp.uint32)"
  expr = f"{u} {op} {value}" if value_right else f"{value} {op} {u}"
  return (f"{value} fits uint32: compute in uint32, {expr} (int32's bits unchanged, as jnp converts; .astype(jnp.int32)"
          f" converts back)")


def int64_hint(value, dtype, name, op, value_right=True):
  """The hint for an integer value meeting a Python int past 32 bits (`i % 2**32`, `t // 10**10`):
  compute in int64, which takes 64-bit constants (a float would fail for //, % and bitwise ops,
  and round for the others); None where it does not apply."""
  ops = ("+", "-", "*", "//", "%", "&", "|", "^", "<", "<=", ">", ">=", "==", "!=")
  if not (isinstance(value, int) and not isinstance(value, bool) and -2 ** 63 <= value < 2 ** 63
          and isinstance(dtype, DType) and dtype.is_int and dtype != DType.i64 and op in ops):
    return None
  x = name if name.replace("[...]", "").replace(".", "").replace("_", "").isalnum() else f"({name})"
  w = f"{x}.astype(jnp.int64)"
  expr = f"{w} {op} {value}" if value_right else f"{value} {op} {w}"
  return f"compute in int64, which holds {value}: {expr} (then .astype(...) back to the type you store)"


def _access(at, access, atomic=False) -> str:
  """The user's load or store (`access`: its kind and texts) with `at` for the pointer; the forms when unknown."""
  kind, *texts = access or (None,)
  args = lambda *pairs: "".join(f", {k}={v}" for k, v in pairs if v)
  return (f"ml.load({at}{args(('mask', texts[0]), ('other', texts[1]))})" if kind == "load" else
          f"ml.store({at}, {texts[0] or 'value'}{args(('mask', texts[1]))})" if kind == "store" else
          f"ml.load({at}, mask=mask, other=0.0), ml.store({at}, value, mask=mask)"
          + (f", ml.atomic_add({at}, value)" if atomic else ""))


def pointer_hint(name, off, offs=None, access=None, grid=None, row=None) -> str:
  """What Triton's `ptr + offsets` becomes: the ref indexed by the offsets (`offs`, as written), `x.at[offs]`,
  which a load, a store (`access`: "load" or "store", the call around it) or an atomic takes: the window
  they cover where they run start + ml.arange(n), a gather or scatter elsewhere. For 2-D offsets of
  strides, the tile they cover: `grid` (pointer_grid's), the ref indexed by the user's row and column vectors;
  for one row's offsets of a 2-D ref, `row` (pointer_row's), the ref indexed by that row and the columns."""
  shape = off.type.shape
  if len(shape) == 1 and row:     # x_ptr + cols + row * stride of a 2-D ref: the row's columns, not rows
    return (f"index {name} by row and column (refs have no strides: {name}'s rows are its first index):"
            f" {_access(f'{name}.at[{row[0]}, {row[1]}]', access)}")
  if len(shape) == 1 and offs:
    lead = _access(f"{name}.at[{offs}]", access, atomic=True)
    return (f"index {name} with the offsets instead of adding them: {lead} (a run start + ml.arange(n) moves the"
            f" window it covers; other offsets gather or scatter); to add to {name}'s values, read it first:"
            f" {name}[...] + ...")
  if len(shape) == 2 and grid:   # rows[:, None] * stride + cols[None, :]: the grid of the vectors, by dimension
    lead = _access(f"{name}.at[{grid[0]}, {grid[1]}]", access)
    return (f"index {name} by dimension with the offsets' vectors instead of adding them (refs have no strides:"
            f" {name}'s rows are its first index, so {grid[2]} goes): {lead} (runs start + ml.arange(n) move the tile they cover;"
            f" other offsets gather or scatter)")
  if len(shape) == 2:        # Triton's rows[:, None] * stride + cols[None, :] (x_ptr + rows[:, None] * stride
    # meets the ref before the columns are added: an (m, 1) part, whose other size is not known yet)
    m, n = (k if k > 1 else unknown for k, unknown in zip(shape, ("m", "n")))
    w = f"{name}.at[ml.ds(r0, {m}), ml.ds(c0, {n})]"
    return (f"for offsets (r0 + ml.arange({m}))[:, None] * stride + (c0 + ml.arange({n}))[None, :] of a"
            f" 2-D {name} (refs are indexed by dimension: no strides), take the tile they cover: load {w}.load(mask=mask,"
            f" other=0.0), store ml.store({w}, value, mask=mask), or ml.copy({w}, buf) into SMEM for ml.dot; other"
            f" offsets index it, {name}[rows, cols] (a gather)")
  n = shape[-1] if len(shape) == 1 else None
  w = f"{name}.at[ml.ds(start, {n})]" if n else f"{name}.at[ml.ds(start, n)]"
  return (f"for offsets start + ml.arange({n or 'n'}), take the window they cover: load {w}.load(mask=mask,"
          f" other=0.0), store ml.store({w}, value, mask=mask), atomics ml.atomic_add({w}, value); other"
          f" offsets index it, {name}[offsets] (a gather); to add to {name}'s values, read it first: {name}[...] + ...")


def pointer_grid(loc, name):
  """(row index text, column index text, stride text) where the line at `loc` adds to the ref `name`
  Triton's 2-D offsets `rows[:, None] * stride + cols[None, :]` (in any order and grouping); else None."""
  import ast
  line = getattr(loc, "source_line", "")
  try:
    tree = ast.parse(line.strip())
  except SyntaxError:
    return None

  def terms(e):
    return terms(e.left) + terms(e.right) if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) else [e]

  def column(e):      # v[:, None] or v[None, :]
    return isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Tuple) and len(e.slice.elts) == 2 and any(
        isinstance(k, ast.Constant) and k.value is None for k in e.slice.elts)

  for node in ast.walk(tree):
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
      continue
    parts = terms(node)
    if sum(isinstance(t, ast.Name) and t.id == name for t in parts) != 1 or len(parts) != 3:
      continue
    rows = [t for t in parts if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult)
            and (column(t.left) or column(t.right))]
    cols = [t for t in parts if column(t)]
    if len(rows) == 1 and len(cols) == 1:
      r = rows[0]
      v, s = (r.left, r.right) if column(r.left) else (r.right, r.left)
      if ast.unparse(v).endswith("[:, None]") and ast.unparse(cols[0]).endswith("[None, :]"):
        return ast.unparse(v), ast.unparse(cols[0]), ast.unparse(s)
    return None
  return None


def pointer_row(loc, name):
  """(row text, column text) where the line at `loc` adds to the 2-D ref `name` Triton's one-row offsets
  `row * stride + cols` (`x_ptr + row * x.shape[1] + cols`, `x_ptr + cols + row * stride_x`): a scalar row times
  a stride (`name.shape[1]`, or a name with "stride" in it) and one other term, the columns; else None."""
  import ast
  try:
    tree = ast.parse(getattr(loc, "source_line", "").strip())
  except SyntaxError:
    return None

  def terms(e):
    return terms(e.left) + terms(e.right) if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) else [e]

  def stride(e):
    text = ast.unparse(e)
    return text == f"{name}.shape[1]" or "stride" in text.lower()

  for node in ast.walk(tree):
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
      continue
    parts = terms(node)
    if len(parts) != 3 or sum(isinstance(t, ast.Name) and t.id == name for t in parts) != 1:
      continue
    rows = [t for t in parts if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult)
            and (stride(t.left) or stride(t.right))]
    cols = [t for t in parts if not (isinstance(t, ast.Name) and t.id == name) and t not in rows]
    if len(rows) == 1 and len(cols) == 1 and "None" not in ast.unparse(cols[0]):   # (a grid: pointer_grid's)
      r = rows[0]
      return ast.unparse(r.left if stride(r.right) else r.right), ast.unparse(cols[0])
  return None


def divisor_guard(x: str, op: str, d: str, call: str = "") -> str:
  """How to divide `x` by a `d` that can be 0 (with `op`, or the builtin `call`: ml.cdiv): every
  lane divides (integer division by zero is undefined even where a select discards it), so the
  zeros are replaced first."""
  safe = f"ml.where({d} == 0, 1, {d})"
  call = call or (op if op.startswith("ml.") else "")     # (ml.fmod: a call)
  q = f"{call}({x}, {safe})" if call else f"{x} {op} {safe}"
  return (f"a divisor that can be 0 must be replaced where it is: ml.where({d} == 0, 0, {q})"
          f" (the outer ml.where sets the lanes where {d} == 0, to 0 or the value you want)")


def shift_guard(x: str, op: str, s: str, d, negative: bool) -> str:
  """How to shift `x` by amounts `s` some of which lie outside 0..bits-1: every lane shifts
  (an out-of-range shift is undefined even where a select discards it), so the amount is clamped
  first; jnp gives 0 beyond the width, or the sign fill for >> of a signed type."""
  top = d.bits - 1
  amount = f"ml.clip({s}, 0, {top})" if negative else f"ml.minimum({s}, {top})"
  ok = f"({s} >= 0) & ({s} < {d.bits})" if negative else f"{s} < {d.bits}"
  guarded = f"ml.where({ok}, {x} {op} {amount}, 0)"
  if op == ">>" and d.is_signed and not negative:
    return (f"clamp the amount: {x} >> {amount} (amounts of {d.bits} or more then give the sign fill, as jnp's"
            f" >>), or {guarded} for 0 there")
  jnp_zero = op == "<<" or not d.is_signed        # (jnp's >> of a signed type fills with the sign)
  return (f"clamp the amount and set the lanes it was out of range in: {guarded}"
          f" ({'0 there, as jnp gives' if jnp_zero else 'or the value you want there'})")




def enclosing_access(loc):
  """Where the expression at `loc` (Triton's `out_ptr + offs`) is the first argument of an
  ml.store or ml.load call on its line: ("store", value text, mask text) or ("load", mask text,
  other text), the texts as the user wrote them (None where not given); else None."""
  import ast
  line, a, b = getattr(loc, "source_line", ""), getattr(loc, "col_offset", 0), getattr(loc, "end_col_offset", None)
  if not line or b is None or getattr(loc, "end_lineno", None) != getattr(loc, "lineno", None):
    return None
  indent = len(line) - len(line.lstrip())
  try:
    tree = ast.parse(line.strip())
  except SyntaxError:
    return None
  for node in ast.walk(tree):
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.func, (ast.Attribute, ast.Name))):
      continue
    name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
    first = node.args[0]
    if name not in ("store", "load") or not (first.col_offset + indent <= a and b <= first.end_col_offset + indent):
      continue
    kw = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
    if name == "store":
      value = ast.unparse(node.args[1]) if len(node.args) > 1 else kw.get("value")
      return "store", value, ast.unparse(node.args[2]) if len(node.args) > 2 else kw.get("mask")
    return "load", ast.unparse(node.args[1]) if len(node.args) > 1 else kw.get("mask"), kw.get("other")
  return None


def whole_argument(loc) -> bool:
  """Whether the expression at `loc` is the whole first argument of the ml.load or ml.store around it
  (`tl.load(p + i)`, not `tl.load(p + i + ml.arange(n))`)."""
  import ast
  line, a, b = getattr(loc, "source_line", ""), getattr(loc, "col_offset", 0), getattr(loc, "end_col_offset", None)
  if not line or b is None:
    return False
  indent = len(line) - len(line.lstrip())
  try:
    tree = ast.parse(line.strip())
  except SyntaxError:
    return False
  return any(isinstance(n, ast.Call) and n.args and (n.args[0].col_offset + indent, n.args[0].end_col_offset + indent)
             == (a, b) for n in ast.walk(tree))


def pointer_step_hint(name, off, base, rank, aug="", access=None, row=None, whole=False) -> str:
  """What Triton's `ptrs += BLOCK_K * stride` (or `x_ptr + row * stride`) becomes: a window of the
  array (`base`, the parameter or buffer the ref `name` views) indexed anew from the loop counter
  or program id; inside an ml.store (`access`, enclosing_access's), the store of that window with
  the call's own value and mask. `row`: pointer_row's (row, columns) texts of a 2-D ref's one-row offsets."""
  lead = ", ".join([":"] * (rank - 1))
  w = f"{base}.at[{lead + ', ' if lead else ''}ml.ds(k * BLOCK, BLOCK)]"
  store = access is not None and access[0] == "store"
  if store:
    value, mask = access[1] or "value", access[2]
    done = lambda at: f"ml.store({at}, {value}" + (f", mask={mask})" if mask else ")")
  else:
    done = lambda at: f"{at}.load(mask=mask, other=0.0)"
  if rank >= 2:
    parts = [f"{w} in the loop over k (Triton's ptrs += BLOCK * stride)",
             f"a row, {base}.at[row] (for x_ptr + row * stride)",
             f"a block of a row, {done(f'{base}.at[row, ml.ds(start, n)]')} (for ... + start +"
             f" ml.arange(n))"]
    where = "; ".join(parts if aug else parts[1:] + parts[:1])      # a += steps a loop: its form first
  elif whole and access is not None and not aug and name == base:   # tl.load(expert_ids_ptr + pid_m): one element
    if store:
      return (f"write the element at that offset: {_access(f'{base}.at[{off}]', access)} (or {base}[{off}] ="
              f" {access[1] or 'v'}, unmasked); for a block from there, {done(f'{base}.at[ml.ds({off}, n)]')}")
    return (f"read the element at that offset: {_access(f'{base}.at[{off}]', access)} (or {base}[{off}], unmasked),"
            f" a scalar; for a block from there, {base}.at[ml.ds({off}, n)].load(mask=mask, other=0)")
  elif store:
    where = (f"a block, {done(f'{base}.at[ml.ds({off}, n)]')} (for {name} + {off} + ml.arange(n), n the"
             f" length of {access[1] or 'the value'}); one element, {base}[i] = v")
  else:
    where = (f"a block, {base}.at[ml.ds(start, n)].load(mask=mask, other=0.0) (for x_ptr + start +"
             f" ml.arange(n); in a loop over k, start = k * BLOCK for Triton's ptrs += BLOCK); one element,"
             f" {base}[i]")
  if rank == 2 and row is not None and not aug:     # x_ptr + row * stride + cols: the row's columns
    where = (f"index {name} by row and column (refs have no strides: {name}'s rows are its first index):"
             f" {_access(f'{base}.at[{row[0]}, {row[1]}]', access)}")
    if store:
      return where
    return f"{where}; to add to {name}'s values, read it first: {name}[...] + {off}"
  if store:
    return f"index the window each step needs instead of moving {name}: {where}"
  return (f"index the window each step needs instead of moving {name}: {where}; to add to {name}'s values, "
          + (f"write through it: {name}[...] {aug} {off}" if aug else f"read it first: {name}[...] + {off}"))


def _index_text(cx, i) -> str:
  """An index of `ref.at[...]` in the user's words; a tensor of float (or bool) indices converted, as
  gathers and scatters take them."""
  from .base import is_tensor
  if isinstance(i, slice):
    return ":"
  if not is_tensor(i):
    return str(i)
  from .scatter_hints import as_int_indices
  return as_int_indices(cx.named(i, "ids"), i)


def _window_text(cx, x, items) -> str:
  """The window `x.at[...]` that offsets start + ml.arange(n) along each tensor-indexed axis cover:
  `c.at[ml.ds(start, 16), :]` for `c.at[t, :]` with 16 indices (start0, start1, ... where several)."""
  from .base import is_tensor
  tensors = [k for k, i in enumerate(items) if is_tensor(i)]
  parts = []
  for k, i in enumerate(items):
    if is_tensor(i):
      start = "start" if len(tensors) == 1 else f"start{tensors.index(k)}"
      parts.append(f"ml.ds({start}, {max(i.type.shape, default=1)})")
    else:
      parts.append(_index_text(cx, i))
  return f"{x}.at[{', '.join(parts)}]"


def _a_grid(tensors) -> bool:
  """Whether index tensors (one, or several each varying along its own axis, r[:, None] and
  c[None, :]) name a rectangle of elements, the window a hint may offer."""
  axes = [[a for a, k in enumerate(t.type.shape) if k != 1] for t in tensors]
  return len(tensors) <= 1 or all(len(a) <= 1 for a in axes) and len({a[0] for a in axes if a}) == len(
      [a for a in axes if a]) and all(len(t.type.shape) == len(tensors[0].type.shape) for t in tensors)


def not_a_ref_hint(cx, ref, what, mask, other, value) -> str:
  """The hint for ml.load / ml.store given no ref: Triton's `tl.load(x_ptr + offs, mask=m)` written
  `ml.load(x.at[offs], mask=m)` (a ref indexed by tensors: a gather or a scatter), or a value
  already read into registers; in the user's names."""
  from .base import is_tensor
  from .gather import IndexedRef
  m = cx.named(mask, "mask") if mask is not None else None
  o = cx.named(other, "0.0") if not isinstance(other, (int, float)) or isinstance(other, bool) else repr(other)
  v = cx.named(value, "value")
  if isinstance(ref, IndexedRef):
    from .index_hints import _run_of
    x = ref.ref.name or "x"
    items = ref.index if isinstance(ref.index, tuple) else (ref.index,)
    ids = ", ".join(_index_text(cx, i) for i in items)
    floats = any(_index_text(cx, i).endswith(".astype(jnp.int32)") for i in items)
    written = cx.operands.get(ref) if cx.operands is not None else None    # x.at[r[:, None], c[None, :]]
    if written and written.endswith("]") and ".at[" in written and not floats:
      x, ids = written.split(".at[", 1)[0], written.split(".at[", 1)[1][:-1]
    one = len(items) == 1 and is_tensor(items[0]) and len(items[0].type.shape) == 1
    tens = [i for i in items if is_tensor(i)]
    n = items[0].type.shape[0] if one else max(tens[0].type.shape, default=1) if len(tens) == 1 else "n"
    w = f"{x}.at[ml.ds(start, {n})]" if one else _window_text(cx, x, items)
    runs = [_run_of(cx.b, i) if is_tensor(i) else None for i in items]
    if all(r is not None or not is_tensor(i) and not isinstance(i, slice) for r, i in zip(runs, items)):
      w = f"{x}.at[{', '.join(f'ml.ds({r[0]}, {r[1]})' if r else str(i) for r, i in zip(runs, items))}]"
      n = None
    window = (f"for offsets start + ml.arange({n}), take the window they cover: " if n is not None else
              "these offsets run over consecutive positions: take the window they cover, ")
    if not _a_grid(tens) and n is not None:    # out.at[r, c] of (128,) r and c: pairs, no window
      n = max(math.prod(t.type.shape) for t in tens)
      if what == "ml.load":
        return (f"{x}[{ids}] reads them (a gather), one element per index pair"
                + (f", and a select keeps the mask: ml.where({m}, {x}[{ids}], {o}) (a gather clamps each index"
                   f" into {x}, so it never reads outside it)" if m is not None else ": write it without ml.load"))
      from .scatter_hints import scatter_set_hint, scatter_target
      first, out = scatter_target(cx.b, ref.ref, x)
      return (f"{first}the indices pair up element by element, so they cover no window (for consecutive flat"
              f" positions, give {out} a one-dimensional out_shape, reshaped outside the kernel, and store into"
              f" its window: ml.store({out}.at[ml.ds(start, {n})], {v}{', mask=' + m if m is not None else ''}));"
              f" " + scatter_set_hint(out, ids, v, m))
    if what == "ml.load":
      if m is None:
        return f"{x}[{ids}] reads them (a gather): write {x}[{ids}], without ml.load"
      return (f"{window}{w}.load(mask={m}, other={o}); other offsets are a gather and a select, ml.where({m},"
              f" {x}[{ids}], {o}) (a gather clamps each index into {x}, so it never reads outside it)")
    masked = f", mask={m}" if m is not None else ""
    from .scatter_hints import aliased_input, scatter_set_hint, scatter_target
    first, out = scatter_target(cx.b, ref.ref, x)
    if first and w.startswith(f"{x}.at["):
      w = out + w[len(x):]
    return f"{first}{window}ml.store({w}, {v}{masked}); at other offsets, " + scatter_set_hint(
        out, ids, v, m, aliased_input(cx.b, out))
  if is_tensor(ref):
    r = cx.named(ref, "v")
    if what == "ml.load":
      return (f"{r} is already in registers (reading a ref gives register values): use it as it is"
              + (f", or select with the mask, ml.where({m}, {r}, {o})" if m is not None else ""))
    from .base import is_ref
    if is_ref(value):       # ml.store(x[...], out): Triton's tl.store(ptr, value) has the ref first
      return f"the ref comes first, then the value: ml.store({value.name or v}, {r})"
    return f"store into a ref (or a window of one, out.at[ml.ds(start, n)]): ml.store(out, {v}), not into {r}"
  return f"{what}(x.at[ml.ds(i * 128, 128)], mask=m)"


def is_index(x) -> bool:
  """Whether `x` is an index a ref takes (`(ml.ds(...), :)`, a slice, `...`, an ml.ds): what Pallas's
  pl.load(ref, idx) and pl.store(ref, idx, value) pass second, not a mask or a value."""
  from .memory import DSlice
  if isinstance(x, tuple):
    return bool(x) and all(isinstance(i, (slice, DSlice, int, type(Ellipsis))) or is_index(i) for i in x) \
        and any(not isinstance(i, int) for i in x)
  return isinstance(x, (slice, DSlice, type(Ellipsis)))


def pallas_access_error(cx, name, nargs):
  """Pallas's `pl.load(x_ref, idx, mask=m, other=0)` and `pl.store(o_ref, idx, v, mask=m)` written
  with ml.load / ml.store, whose second argument is the mask (Triton's order) or the value: the
  window is the ref's view, `x_ref.at[idx]`, in the user's own words."""
  import ast
  from .. import errors as E
  try:
    call = ast.parse(cx.text.strip(), mode="eval").body
  except SyntaxError:
    call = None
  call = call if isinstance(call, ast.Call) else ast.Call(ast.Name("ml"), [], [])
  args = list(call.args)
  if isinstance(call.func, ast.Attribute) and len(args) == nargs - 1:      # x_ref.load(idx, ...): the ref's method
    args = [call.func.value] + args
  pos = [ast.unparse(a) for a in args]
  kw = {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}
  ref, idx = (pos + ["x_ref", "idx"])[:2]
  node = args[1] if len(args) > 1 else None
  def part(e):         # slice(None) -> :, slice(a, b) -> a:b, as written in a subscript
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "slice" and not e.keywords \
        and 1 <= len(e.args) <= 3:
      a = [None if isinstance(x, ast.Constant) and x.value is None else x for x in e.args]
      a = [None] + a if len(a) == 1 else a
      return ast.unparse(ast.Slice(*(a + [None] * (3 - len(a)))))
    return ast.unparse(e)
  if isinstance(node, ast.Tuple):        # (ml.ds(i * 128, 128),) -> ml.ds(i * 128, 128)
    idx = ", ".join(part(e) for e in node.elts)
  elif node is not None:
    idx = part(node)
  rest = pos[2:] + [f"{k}={v}" for k, v in kw.items()]
  if name == "store" and rest and "=" not in rest[0].split("(")[0]:
    value, rest = rest[0], rest[1:]
  else:
    value = "value" if name == "store" else None
  args = ", ".join([f"{ref}.at[{idx}]"] + ([value] if value else []) + rest)
  return E.KernelTypeError(
      f"ml.{name}'s second argument is {'the mask' if name == 'load' else 'the value'}, got an index: ml.{name}"
      f" takes a window of the ref, not the ref and an index (Pallas's pl.{name}(ref, idx, ...))", cx.loc,
      hint=f"index the ref first: ml.{name}({args})")


def run_store_hint(b, out: str, items, index_node, text, value: str) -> str:
  """For a store at tensor indices (`o[offs] = v`) each of which is a run of consecutive positions
  (`pid * 128 + ml.arange(128)`, Triton's offsets), the window they cover, stored under the mask that
  keeps the positions past `out`'s end off, as the lead of the hint ("" otherwise)."""
  import ast
  from .base import is_tensor
  from .index_hints import _run_of
  nodes = index_node.elts if isinstance(index_node, ast.Tuple) else [index_node]
  tensors = [i for i in items if is_tensor(i)]
  if len(nodes) != len(items) or not tensors or not (len(tensors) == 1 and len(tensors[0].type.shape) == 1
                                                     or len(tensors) > 1 and _a_grid(tensors)):
    return ""                # (two vectors index pairs of elements, a diagonal: no window)
  parts, masks = [], []
  for k, (i, node) in enumerate(zip(items, nodes)):
    if not is_tensor(i):
      parts.append(text(node))
      continue
    run = _run_of(b, i)
    if run is None:
      return ""
    parts.append(f"ml.ds({run[0]}, {run[1]})")
    masks.append(f"{text(node)} < {out}.shape[{k}]")
  mask = masks[0] if len(masks) == 1 else " & ".join(f"({m})" for m in masks)
  return (f"these offsets run over consecutive positions: take the window they cover,"
          f" {out}.at[{', '.join(parts)}].store({value}, mask={mask}) (the mask keeps the positions past {out}'s end"
          f" off); at other offsets, ")
