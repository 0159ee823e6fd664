"""The hint for a constant table (a list, tuple, dict or NumPy array from outside the kernel, or a list
of register tiles) indexed at run time: one ml.where per entry, or the table passed in as an input and
gathered from (NF4's 16 levels, a per-program coefficient, `parts[i % 3]`, `{1: 0.5, 3: 2.0}[k]`)."""
from __future__ import annotations


def _select_chain_hint(table, table_text: str, index_text: str) -> str | None:
  """A list or tuple of register values (`parts[i % 3]` of three tiles), or a dict with int keys
  (`{1: 0.5, 3: 2.0}[k]`), indexed by a run-time scalar: one ml.where per entry, over its keys.
  Tables of numbers only, in a list, tuple or array, are the caller's (which can pass them in)."""
  from .base import is_ref, is_value
  if isinstance(table, dict):
    keys, vals = list(table), list(table.values())
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
      return None
  elif isinstance(table, (list, tuple)):
    keys, vals = list(range(len(table))), list(table)
    if not any(is_value(v) for v in vals):      # numbers only: the caller's hint
      return None
  else:
    return None
  if not 1 < len(keys) <= 256 or not all(
      is_value(v) and not is_ref(v) or isinstance(v, (int, float)) for v in vals):
    return None
  i = index_text if index_text.isidentifier() else f"({index_text})"
  rest = (f"ml.static_range(1, {len(keys)})" if keys == list(range(len(keys))) else
          f"({', '.join(map(str, keys[1:]))}{',' if len(keys) == 2 else ''})")
  return (f"select the entry instead: r = {table_text}[{keys[0]}], then for k in {rest}:"
          f" r = ml.where({i} == k, {table_text}[k], r)")


def table_lookup_hint(table, index, table_text: str, index_text: str) -> str | None:
  """A constant table from outside the kernel (NF4's 16 levels as a list, a NumPy or JAX array) indexed
  by a register tensor: one select per entry, or the table passed in as an input and gathered."""
  import numpy as np
  from .base import is_tensor
  from ..types import resolve
  from .base import is_value
  scalar = is_value(index) and not is_tensor(index) and getattr(resolve(index.type.dtype), "is_int", False)
  if not (scalar or is_tensor(index) and resolve(index.type.dtype).is_int):
    return None
  if scalar and (chain := _select_chain_hint(table, table_text, index_text)):
    return chain
  try:
    a = np.asarray(table)
  except Exception:
    return None
  i = index_text if index_text.isidentifier() else "idx"
  if a.ndim == 1 and a.dtype.kind in "iuf" and len(a) > 256:     # (a register table holds 256: probe 71b)
    bind = "" if i == index_text else f"idx = {index_text}; "
    return (f"a module's table of more than 256 numbers is no register table: pass it to the kernel as an input"
            f" array, t ({table_text} as an argument), and gather from it: {bind}t[{i}]")
  if a.ndim != 1 or a.dtype.kind not in "iuf" or not 0 < len(a) <= 256:
    return None
  if scalar:             # COEFFS[pid], a per-program constant: one select per entry, or the table as an input
    i = index_text if index_text.isidentifier() else f"({index_text})"
    return (f"a run-time index into a table of numbers: select its entries, r = {table_text}[0], then for k in"
            f" ml.static_range(1, {len(a)}): r = ml.where({i} == k, {table_text}[k], r); or pass the table to"
            f" the kernel as an input array, t (jnp.asarray({table_text}, jnp.{'float32' if a.dtype.kind == 'f' else 'int32'})),"
            f" and read t[{index_text}]")
  dt = "float32" if a.dtype.kind == "f" else "int32"
  i = index_text if index_text.isidentifier() else "idx"
  bind = "" if i == index_text else f"idx = {index_text}; "
  return (f"a table indexed by a tensor: select its entries, {bind}r = ml.zeros({i}.shape, jnp.{dt}), then"
          f" for k in ml.static_range({len(a)}): r = ml.where({i} == k, {table_text}[k], r) (one select per"
          f" entry); or pass the table to the kernel as an input array, t, and gather from it: t[{i}]")
