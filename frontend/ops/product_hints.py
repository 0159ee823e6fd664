"""The hint of a broadcast product summed over its shared last axis, `ml.sum(a[:, None, :] * b[None, :, :], axis=2)`,
which is a @ b.T: ml.dot on the tensor cores, or one row of a at a time in registers. The operands are read from the
call's source text as the user wrote them (a name, a ref's read or window, a conversion, any expression)."""
from __future__ import annotations

import re

from ..types import dtype_name, resolve
from .shape import ReduceKind
from ..loc import expr_of


def _product_operands(text):
  """(a, b): the source texts of the operands of a broadcast product summed over its last axis as written,
  `a[:, None, :] * b[None, :, :]` (either order; `a[:, None]`, `b[None]` and `b[None, :]` too), whatever each
  operand is (a name, a ref's read or window, a conversion, an expression); None for any other text."""
  import ast
  node = expr_of(text)
  if node is None:
    return None
  if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
    return None

  def form(e):
    if not isinstance(e, ast.Subscript):
      return None
    idx = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
    k = "".join("n" if isinstance(i, ast.Constant) and i.value is None else
                "s" if isinstance(i, ast.Slice) and i.lower is None and i.upper is None and i.step is None else "?"
                for i in idx)
    return "row" if k in ("sns", "sn") else "col" if k in ("nss", "ns", "n") else None
  left, right = form(node.left), form(node.right)
  if {left, right} != {"row", "col"}:
    return None
  a, b = (node.left, node.right) if left == "row" else (node.right, node.left)
  return ast.unparse(a.value), ast.unparse(b.value)


def _held_names(cx, x, depth=16) -> dict:
  """The names of the register tensors `x` is computed from (through its broadcasts, reshapes and the scratches they
  move through, a few ops deep), each to the name of the ref it is a whole read of (`xv = x[...]`), or None for a
  value computed in registers, which no TMA copy can fill a buffer with (its bare name alone reads like a ref's)."""
  from .. import ir
  from ..types import RefType, TensorType

  def root(r):                        # a view's buffer
    while (op := cx.b.defining(r)) is not None and isinstance(getattr(op, "ref", None), ir.Value):
      r = op.ref
    return r
  writers: dict = {}                  # a scratch -> the tensors stored into it or its views (a relayout's stores)
  for op in cx.b.block.ops:
    vals = [u for u in op.operands() if isinstance(u, ir.Value)]
    for r in (u for u in vals if isinstance(u.type, RefType)):
      writers.setdefault(root(r).id, []).extend(u for u in vals if isinstance(u.type, TensorType))
  names, todo, seen = {}, [x], set()
  while todo and depth:
    depth -= 1
    nxt = []
    for v in todo:
      if v.id in seen:
        continue
      seen.add(v.id)
      op = cx.b.defining(v)
      if isinstance(v.type, TensorType) and getattr(v, "name", None):
        src = getattr(op, "ref", None)
        whole = (type(op).__name__ == "Load" and isinstance(src, ir.Value) and cx.b.defining(src) is None
                 and tuple(src.type.shape) == tuple(v.type.shape))
        names[v.name] = src.name if whole else names.get(v.name)
      nxt += [u for u in (op.operands() if op is not None else ()) if isinstance(u, ir.Value)]
      nxt += writers.get(root(v).id, []) if isinstance(v.type, RefType) else []
    todo = nxt
  return names


def _stage(text, rows, n, k, dt, b_operand, register=False):
  """(the SMEM buffer's name, how the hint fills it: None for a name or a ref's whole read, which the hint copies
  by TMA, the rows the buffer holds) for one operand of the product. A ref's window is copied by TMA (a `rows`-row
  one where it has fewer rows and starts at ml.ds(start, n)), and so is a ref's read converted to float32 (ml.dot
  of its own dtype accumulates in float32); any other expression is stored from registers, zero rows appended up
  to a multiple of 64 (a buffer filled from registers takes the tensor-core tile's rows, also as the B operand)."""
  simple = None if register else re.fullmatch(r"(\w+)(?:\[(.*)\])?(\.astype\([\w.]+\))?", text)
  if simple and (simple.group(3) is None or dt == "jnp.float32"):
    name, idx = simple.group(1), simple.group(2)
    if idx in (None, "...") and simple.group(3) is None:
      return name, None, rows
    if idx in (None, "...") and n < rows:
      idx = f"ml.ds(0, {rows}), :"
    elif n < rows:
      first = re.fullmatch(rf"ml\.ds\((.*), *{n}\)(, *:)?", idx)
      idx = f"ml.ds({first.group(1)}, {rows}), :" if first else None
    if idx is not None:
      return name, f"ml.copy({name}" + ("" if idx in (None, "...") else f".at[{idx}]") + f", {name}_s)", rows
  name = next((w for w in re.findall(r"(?<![.\w])[A-Za-z_]\w*", text) if w not in ("ml", "jnp", "np", "jax")), "a")
  full = -(-n // 64) * 64 if b_operand else rows
  value = text if n == full else f"ml.concatenate([{text}, ml.zeros(({full - n}, {k}), {dt})], axis=0)"
  return name, f"{name}_s = ml.smem(({full}, {k}), {dt}); {name}_s[...] = {value}", full


def product_hint(cx, x, shape, axes, kind):
  """The sum of a broadcast product over its shared last axis, `ml.sum(a[:, None, :] * b[None, :, :], axis=2)`
  (a GQA decode's scores of a few query heads against a page of keys), is a @ b.T: the tensor cores' ml.dot
  (a padded to 64 rows where it has fewer), whatever form its operands take; None for any other reduction."""
  ops = _product_operands(cx.named(x) or "")
  if kind != ReduceKind.SUM or len(shape) != 3 or tuple(axes) != (2,) or ops is None:
    return None
  ta, tb = ops                                               # (as written)
  n, m, k = shape
  rows = max(n, 64)
  dt = f"jnp.{dtype_name(resolve(x.type.dtype))}"
  bare = re.fullmatch(r"\w+", ta) or re.fullmatch(r"\w+", tb)
  held = _held_names(cx, x) if bare else {}             # (probe 68b: a register tensor's bare name is not a ref)
  stored = lambda t: t in held and held[t] is None      # (computed in registers: stored into its buffer)
  (a, fill_a, ra), (b, fill_b, rb) = (_stage(ta, rows, n, k, dt, False, stored(ta)),
                                      _stage(tb, m, m, k, dt, True, stored(tb)))
  ref_a, ref_b = held.get(ta) or a, held.get(tb) or b    # (a whole read's copy is of its ref: `x`, not `xv`)
  if b == a:
    b, fill_b = b + "2", fill_b and fill_b.replace(f"{b}_s", f"{b}2_s")
  from .out_names import stored_into
  out = stored_into(cx)                                 # (the output the statement stores into, else "out")
  if ra == n and rb == m:
    store = f"{out}[...] = s"
  else:
    mask = " & ".join(f for f in (f"(ml.arange({ra})[:, None] < {n})" if ra > n else "",
                                  f"(ml.arange({rb})[None, :] < {m})" if rb > m else "") if f)
    mask = mask[1:-1] if "&" not in mask else mask
    past = " and ".join(w for w in (f"{n} rows" if ra > n else "", f"{m} columns" if rb > m else "") if w)
    store = (f"{out}.at[ml.ds(0, {ra}), {f'ml.ds(0, {rb})' if rb > m else ':'}].store(s, mask={mask}) (the window past"
             f" the output's {past} masked)")
  if fill_a is None and fill_b is None:
    how = (f"copy the operands into SMEM buffers of {rows} and {m} rows, s = ml.dot({a}_s, {b}_s.T), a ({rows}, {m})"
           f" product"
           + (f" ({a} has {n} rows, fewer than the 64 of a tensor-core tile: copy a 64-row window into {a}_s, which"
              f" TMA fills with zeros past the array's last row, ml.copy(ref.at[ml.ds(0, 64), :], {a}_s))" if n < 64
              else ""))
  else:
    fills = [fill_a or f"ml.copy({ref_a}.at[ml.ds(0, {rows}), :], {a}_s) (zeros past the array's last row)",
             fill_b or f"ml.copy({ref_b}, {b}_s)"]
    how = (f"put the operands in SMEM buffers of {ra} and {rb} rows, {'; '.join(fills)}, then s = ml.dot({a}_s,"
           f" {b}_s.T), a ({ra}, {rb}) product")
  tf32 = (" (ml.dot reads float32 operands as TF32, about 3 significant digits; the rows keep float32)"
          if dt == "jnp.float32" and (fill_a or fill_b) else "")
  atom = lambda t: t if re.fullmatch(r"[\w.]+(\[[^\[\]]*\])?(\.\w+(\([^()]*\))?)*", t) else f"({t})"
  show_a, show_b = (a if fill_a is None else atom(ta)), (b if fill_b is None else atom(tb))
  product = f"{show_a} @ {show_b[:-2]}" if show_b.endswith(".T") else f"{show_a} @ {show_b}.T"   # (not `w.T.T`)
  used = set(re.findall(r"[A-Za-z_]\w*", ta + " " + tb))
  i = next(v for v in ("i", "r", "j", "row") if v not in used)
  return (f"this is {product}, which ml.dot computes on the tensor cores: {how}, then {store}{tf32}; or,"
          f" in registers, one row of {show_a} at a time: ml.sum({atom(ta)}[{i}][None, :] * {tb}, axis=1) for {i} in"
          f" ml.static_range({n}), each a ({m},) vector")
