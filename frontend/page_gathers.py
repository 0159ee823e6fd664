"""Pages gathered by a vector of page ids (Pallas's paged attention: `k_pages_ref[block_tables]` of a (pages,
page_size, head_dim) ref by an (n,) vector, then `.reshape(n * page_size, head_dim)`). Its result is 3-D, which a
gather's index grids cannot give (MG204, whose hint takes the pages in a static loop); it is that loop's result: the
stack of the n pages, each a 2-D read of the ref at its id, the id wrapped where negative and clamped into the ref
as jnp's gather takes it, so no read leaves the ref (probe 48h). Few pages only: each is a read of its own."""
from __future__ import annotations

from .dtypes import DType
from .ops.base import is_tensor, is_value
from .types import RefType, resolve

MAX_PAGES = 16       # (pages read one at a time, unrolled: a longer vector keeps MG204 and its loop hint)


def stacked_pages(tracer, node, ref, index):
  """`ref[ids]` (or `ref[ids, :, :]`) of a ref of three or more axes by a 1-D integer tensor of at most MAX_PAGES
  ids, where the gather would be 3-D: `ml.stack` of the pages; None for other gathers."""
  items = index if isinstance(index, tuple) else (index,)
  if not (is_value(ref) and isinstance(ref.type, RefType) and len(ref.type.shape) >= 3 and items):
    return None
  ids, rest = items[0], items[1:]
  d = resolve(getattr(getattr(ids, "type", None), "dtype", None))
  if not (is_tensor(ids) and len(ids.type.shape) == 1 and isinstance(d, DType) and d.is_int
          and 0 < ids.type.shape[0] <= MAX_PAGES):
    return None
  if any(r is not Ellipsis and r != slice(None) for r in rest) or len(rest) > len(ref.type.shape) - 1:
    return None
  n, pages = ids.type.shape[0], ref.type.shape[0]
  if len([k for k in (n, *ref.type.shape[1:]) if k != 1]) <= 2:
    return None               # (a gather registers hold: gather.gather's)
  table = _table_window(tracer, ids) if n % 8 else None
  at = "{2}" if table is not None else "{1}"
  page = "{0}[ml.clip(ml.where(%s[%%d] < 0, %s[%%d] + %%d, %s[%%d]), 0, %%d)]" % (at, at, at)
  form = "ml.stack([" + ", ".join(page % (p, p, pages, p, pages - 1) for p in range(n)) + "], axis=0)"
  from .jnp_calls import trace_form
  operands, names = [ref, ids], [ref.name or "", tracer.text(node.slice)]
  if table is not None:
    operands, names = operands + [table], names + [table.name or ""]
  before = len(tracer.b.allocs)
  out = trace_form(tracer, node, form, operands, names=names)
  for buf in tracer.b.allocs[before:]:    # the stack's join, named for MG402's hint (frontend/smem.py)
    if buf.name == "concatenate scratch":
      buf.name = PAGE_SCRATCH
      tracer.b.__dict__.setdefault("page_gathers", {})[buf.id] = (ref.name or "pages", names[1], n, tuple(ref.type.shape[1:]))
  return out


PAGE_SCRATCH = "page gather scratch"


def _table_window(tracer, ids):
  """The window of a kernel input that `ids` is a whole read of (`block_tables_ref[ml.ds(k * 4, 4)]`), whose ids
  the pages then read as scalars, so the vector itself, of fewer than 8 ids (no register layout), is never used
  and is dropped (probe 49h: Pallas's paged attention with 4 pages a block); None otherwise."""
  from .ops.gather import root_id
  from .ops.memory import Load
  d = tracer.b.defining(ids)
  if not isinstance(d, Load) or d.merge or d.keep or len(d.ref.type.shape) != 1:
    return None
  root = root_id(tracer.b, d.ref)
  return d.ref if root in tracer.b.read_only and root not in tracer.b.aliased else None
