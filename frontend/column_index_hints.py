"""Hints for gathers and scatters that index the last axis with a vector after slices
(`t[:, cols]`, `ml.atomic_add(out.at[:, cols], v)`) whose (rows, len(cols)) tile the registers
cannot hold: the index vector is widened to columns the rows' lanes hold, the extra columns
kept out at the store (a gather's padding reads index 0; a scatter's points past the output's
end, where its updates are dropped). The user's own names, from the source at the op."""
from __future__ import annotations

import ast

from . import hw


def _source(loc):
  line, a, b = getattr(loc, "source_line", ""), getattr(loc, "col_offset", 0), getattr(loc, "end_col_offset", None)
  if not line or b is None or getattr(loc, "end_lineno", None) != getattr(loc, "lineno", None):
    return None
  try:
    return ast.parse(line[a:b], mode="eval").body
  except SyntaxError:
    return None


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
  found = _column_subscript(_source(o.loc)) if _source(o.loc) is not None else None
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
  node = _source(o.loc)
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
