"""Hints for gathers and scatters that index the last axis with a vector after slices
(`t[:, cols]`, `ml.atomic_add(out.at[:, cols], v)`) whose (rows, len(cols)) tile the registers
cannot hold: the index vector is widened to columns the rows' lanes hold, the extra columns
kept out at the store (a gather's padding reads index 0; a scatter's points past the output's
end, where its updates are dropped). The user's own names, from the source at the op. Also gathers
and scatters of whole rows too narrow for a warp's lanes, taken 32 columns (or more) at a time."""
from __future__ import annotations

import ast

from . import hw
from .loc import call_at, expr_at


def _is_slice(e) -> bool:
  return isinstance(e, ast.Slice) or (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                                      and e.func.attr == "ds")


def _column_subscript(node):
  """The first subscript under `node` whose last index is a vector after slices: (ref, index)."""
  for s in ast.walk(node):
    if isinstance(s, ast.Subscript) and isinstance(s.slice, ast.Tuple) and len(s.slice.elts) >= 2:
      *lead, last = s.slice.elts
      if not _is_slice(last) and any(_is_slice(e) for e in lead) and not isinstance(last, ast.Constant):
        ref = s.value.value if isinstance(s.value, ast.Attribute) and s.value.attr == "at" else s.value
        return ast.unparse(ref), last
  return None


def _read_whole(e):
  """`c[...]`, `c.at[w][...]`: (c, its window or None), a vector read from a ref; else None."""
  if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and e.slice.value is Ellipsis:
    inner = e.value
    if isinstance(inner, ast.Name):
      return inner.id, None
    if (isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Attribute) and inner.value.attr == "at"
        and isinstance(inner.value.value, ast.Name)):
      return inner.value.value.id, ast.unparse(inner.slice)
  return None


def _wide(rows, n) -> int:
  unit = hw.WARP if rows % hw.WARPS_PER_WARPGROUP == 0 else hw.WARPGROUP
  return -(-n // unit) * unit


def _padded(idx, n, up, fill) -> str:
  """The index vector `idx` (an AST) widened to `up` entries, the extra ones `fill`."""
  read = _read_whole(idx)
  if read is not None and read[1] is None:
    return f"{read[0]}.at[ml.ds(0, {up})].load(mask=ml.arange({up}) < {n}, other={fill})"
  if read is not None and ":" not in read[1] and "," not in read[1]:    # ids.at[ml.ds(s, n)][...]
    w = read[1]
    if w.startswith("ml.ds(") and w.endswith(f", {n})"):
      return f"{read[0]}.at[{w[:-len(f', {n})')]}, {up})].load(mask=ml.arange({up}) < {n}, other={fill})"
  text = ast.unparse(idx)
  return f"ml.concatenate([{text}, ml.full(({up - n},), {fill}, {text}.dtype)])"


def column_gather_hint(o, shape) -> str | None:
  """For `t[:, cols]` of `shape` (rows, n): read `up` columns, index 0 past n, and store n."""
  found = _column_subscript(expr_at(o.loc)) if expr_at(o.loc) is not None else None
  if found is None or len(shape) != 2:
    return None
  table, idx = found
  rows, n = shape
  up = _wide(rows, n)
  return (f"widen the index vector to {up} entries, which each row's lanes hold, and keep {n} columns at the"
          f" store: cols = {_padded(idx, n, up, 0)}; v = {table}[:, cols] (index 0 where the mask is off);"
          f" out.at[:, ml.ds(0, {up})].store(v, mask=ml.arange({up})[None, :] < {n}) (the window may run past"
          f" out's last column: masked elements are never written)")


def column_scatter_hint(o, shape) -> str | None:
  """For `ml.atomic_<kind>(out.at[:, cols], v)` of `shape`: widen cols (past out's end: dropped) and v."""
  node = expr_at(o.loc)
  if not (isinstance(node, ast.Call) and len(node.args) == 2):
    return None
  found = _column_subscript(node.args[0])
  if found is None or len(shape) != 2:
    return None
  out, idx = found
  rows, n = shape
  up = _wide(rows, n)
  val = node.args[1]
  read = _read_whole(val)
  if read is not None and (read[1] is None or "," not in read[1]):     # v[...], v.at[rows][...]
    lead = ":" if read[1] is None else read[1]
    value = f"{read[0]}.at[{lead}, ml.ds(0, {up})].load(mask=ml.arange({up})[None, :] < {n}, other=0)"
  else:
    text = ast.unparse(val)
    value = f"ml.concatenate([{text}, ml.zeros(({rows}, {up - n}), {text}.dtype)], axis=1)"
  return (f"widen the index vector to {up} entries, which each row's lanes hold, the extra ones past {out}'s"
          f" last column (where a scatter drops its updates): cols = {_padded(idx, n, up, f'{out}.shape[1]')};"
          f" vals = {value}; ml.atomic_{o.kind.value}({out}.at[:, cols], vals)")


def scatter_columns_hint(o, n) -> str:
  """For a scatter whose rows are n (not a multiple of 32) wide: update 32 columns at a time,
  the value's columns past n loaded as 0 with a mask, the index's dropped past out's rows."""
  w, what = hw.WARP, f"ml.atomic_{o.kind.value}"
  out = o.ref.name or "out"
  ids = "ids"
  src, rows, node = "src", ":", call_at(o.loc)       # the user's ml.atomic_<kind>(out.at[ids, :], src.at[rows, :][...])
  if node is not None and len(node.args) == 2 and isinstance(node.args[0], ast.Subscript):
    elts = node.args[0].slice.elts if isinstance(node.args[0].slice, ast.Tuple) else [node.args[0].slice]
    if isinstance(elts[0], (ast.Name, ast.Subscript, ast.Call, ast.Attribute)):   # ids, ids[...], ids.at[...][...]
      ids = ast.unparse(elts[0])
    val = node.args[1]
    if (isinstance(val, ast.Subscript) and isinstance(val.value, ast.Subscript)
        and isinstance(val.value.value, ast.Attribute) and val.value.value.attr == "at"
        and isinstance(val.value.slice, ast.Tuple) and len(val.value.slice.elts) == 2):
      src, rows = ast.unparse(val.value.value.value), ast.unparse(val.value.slice.elts[0])
    elif (isinstance(val, ast.Subscript) and isinstance(val.value, ast.Name)
          and isinstance(val.slice, ast.Constant) and val.slice.value is Ellipsis):   # g[...]: all its rows
      src = val.value.id
  cols = f"ml.arange({w})" if n < w else f"(c + ml.arange({w}))"
  load = (f"v = {src}.at[{rows}, ml.ds({'0' if n < w else 'c'}, {w})].load(mask={cols}[None, :] < {n},"
          f" other=0)")
  loop = "" if n < w else f"for c in ml.static_range(0, {n}, {w}): "
  return (f"update {w} columns at a time, loading the value's columns past {n} as 0: {loop}{load}; then"
          f" {what}({out}.at[{ids}[:, None], {cols}[None, :]], v) (updates at columns past the end of"
          f" {out}'s rows are dropped); or pad {out}'s rows to a multiple of {w} elements (out_shape) and"
          f" slice the result outside the kernel" + ("" if ids != "ids" else " (ids: the rows' indices)")
          + (" (src: the rows' values)" if src == "src" else ""))


def gather_columns_hint(o, n) -> str:
  """For a gather whose rows are n (not a multiple of 32) wide: take 32 columns at a time."""
  w, t = hw.WARP, getattr(o.ref, "name", None) or "t"
  if n < w:
    return (f"take {w} columns and drop the extra ones at the store: v = {t}[ids[:, None], ml.arange({w})[None, :]]"
            f" (columns past the row's end clamp to its last), then out.at[rows, ml.ds(0, {w})].store(v,"
            f" mask=ml.arange({w})[None, :] < {n}); or pad the table's rows to {w} elements outside the kernel"
            f" (jnp.pad)")
  shape = getattr(getattr(o.results[0], "type", None), "shape", ()) if getattr(o, "results", ()) else ()
  rows = shape[-2] if len(shape) >= 2 else 0
  # any rows with 128s; rows a multiple of 4 with 32s (a 130-pixel image row read as 160)
  up = -(-n // w) * w if rows and rows % hw.WARPS_PER_WARPGROUP == 0 else -(-n // hw.WARPGROUP) * hw.WARPGROUP
  return (f"take {up} columns and drop the extra ones at the store: v = {t}[ids[:, None], ml.arange({up})[None, :]]"
          f" (columns past the row's end clamp to its last), then out.at[rows, ml.ds(0, {up})].store(v,"
          f" mask=ml.arange({up})[None, :] < {n}); or pad the table's rows to a multiple of {w} elements outside"
          f" the kernel (jnp.pad)")


def narrow_gather_hint(table, keep, wide) -> str:
  """For a gather of rows `keep` wide (read `wide` wide, the asked columns kept through SMEM) whose
  result is reduced or broadcast along its rows: gather the wide rows and mask the extra columns."""
  return (f"gather {wide} columns, v = {table}[ids[:, None], ml.arange({wide})[None, :]] (columns past a row's end"
          f" clamp to its last), and mask the {wide - keep} extra ones to what the reduction ignores,"
          f" ml.where(ml.arange({wide})[None, :] < {keep}, v, 0.0) for a sum (float('-inf') for a max,"
          f" float('inf') for a min); store {keep} columns with the mask ml.arange({wide})[None, :] < {keep}")
