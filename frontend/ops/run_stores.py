"""`out[offs] = v` where every index tensor is a run `start + ml.arange(n)` (Triton's `o_ptr + offs`, or
a grid `rows[:, None], cols[None, :]`): the store of the window the run covers, as `ml.store(out.at[offs],
v)` is (frontend/ops/access.py), with jnp's scatter semantics kept by a mask: positions past the end are
dropped. A window store is checked while compiling as any window is (two programs writing one element,
MG951; an output some element of which no program writes), where a scatter is left to interpret mode,
and it moves whole vectors where a scatter moves one element a thread.

Only runs whose start is never negative take this path: jnp counts a negative scatter index from the
end, which no window does."""
from __future__ import annotations

from ..dtypes import DType
from ..types import ScalarType, TensorType, resolve
from . import elementwise as ew
from .base import is_value


def never_negative(b, s, depth: int = 0) -> bool:
  """Whether the int or run-time integer scalar `s` is at least 0 in every program: program ids, program
  counts, counters of loops that start at such a value, unsigned values, and sums, products, quotients,
  remainders, maxima and minima of such values (and constants of at least 0)."""
  from .control import MultipleOf, NumPrograms, ProgramId
  from .elementwise import BinOp, Binary
  if isinstance(s, bool):
    return False
  if isinstance(s, int):
    return s >= 0
  if not (is_value(s) and isinstance(s.type, ScalarType)) or depth > 8:
    return False
  d = resolve(s.type.dtype)
  if getattr(d, "is_int", False) and not d.is_signed:
    return True
  if s.id in b.counts_from:
    return never_negative(b, b.counts_from[s.id], depth + 1)
  o = b.defining(s)
  if isinstance(o, (ProgramId, NumPrograms)):
    return True
  if isinstance(o, MultipleOf):
    return never_negative(b, o.x, depth + 1)
  if isinstance(o, Binary):
    lhs, rhs = (never_negative(b, x, depth + 1) for x in (o.lhs, o.rhs))
    if o.kind in (BinOp.ADD, BinOp.MUL, BinOp.FLOORDIV, BinOp.MOD, BinOp.MIN, BinOp.SHR, BinOp.AND, BinOp.OR):
      return lhs and rhs
    if o.kind == BinOp.MAX:
      return lhs or rhs
  return False


def run_scatter(cx, iref, value) -> bool:
  """`out[offs] = v` of runs that never start below 0, stored as the window they cover (masked where it
  may run past the end, whose updates jnp's scatter drops); False where another index or a run that may
  start before 0 leaves the store to the scatter."""
  import numpy as np
  from .access import store_
  plan = run_store_plan(cx, iref, value)
  if plan is None:
    return False
  shape = tuple(plan[0].type.shape)
  if is_value(value) and isinstance(value.type, TensorType):
    from .padded_tiles import true_shape
    try:
      fits = np.broadcast_shapes(true_shape(cx.b, value), shape) == shape      # (a padded value: its own shape)
    except ValueError:
      fits = False
    if not fits:
      return False                    # the scatter's error: the value takes the shape the indices give
  store_.rule(cx, plan[0], value, plan[1])
  return True


def run_update(cx, iref, combine) -> bool:
  """`out[offs] += v` of such runs: the window read where the mask keeps it, combined (`combine(current)`) and
  stored back (jnp's `out.at[offs].add(v)` of distinct positions); False as for run_scatter."""
  from .access import load_, store_
  plan = run_store_plan(cx, iref)
  if plan is None:
    return False
  window, keep = plan
  cur = load_.rule(cx, window, keep, 0) if keep is not None else load_.rule(cx, window)
  store_.rule(cx, window, combine(cur), keep)
  return True


def run_store_plan(cx, iref, value=None):
  """(the window, the mask of the positions inside the array or None) that a store at `iref`'s runs moves;
  None where an index is not a run that never starts below 0 (see run_scatter). A run of an odd `ml.arange` made
  padded (ArangePads) storing a `value` held at its own length (a row statistic of 4 rows) takes a mask of that
  length, the run's positions recomputed from its start (probe 71a: the padded mask was MG202 against the window)."""
  from .gather import run_window
  from .index_hints import run_start
  items = iref.index if isinstance(iref.index, tuple) else (iref.index,)
  runs = [(k, run_start(cx.b, i)) for k, i in enumerate(items) if is_value(i) and isinstance(i.type, TensorType)]
  if not runs or any(r is None or not never_negative(cx.b, r[0]) for _, r in runs):
    return None
  shape = iref.ref.type.shape
  if any(isinstance(r[0], int) and r[0] >= shape[k] for k, r in runs):
    return None                       # no element inside: jnp drops them all, a window would be refused
  scalars = [(k, i) for k, i in enumerate(items) if is_value(i) and isinstance(i.type, ScalarType)]
  if any(not never_negative(cx.b, i) for _, i in scalars) or any(
      isinstance(i, int) and not isinstance(i, bool) and not -shape[k] <= i < shape[k] for k, i in enumerate(items)):
    return None                       # a row that may fall outside (jnp counts it from the end, or drops it)
  last = items[-1] if len(items) == len(shape) else slice(None)
  if not (isinstance(last, slice) or is_value(last) and isinstance(last.type, TensorType)):
    return None                       # out[rows, c]: a column, strided in memory: the scatter stores it
  window = run_window(cx, iref, cx.named(iref.ref, ""))
  if window is None:
    return None
  rank = len(window.type.shape)
  keep = None
  from .padded_tiles import true_shape
  pads = getattr(cx.b, "pad_tiles", None) if not getattr(cx.b, "pad_ok", 0) else None
  for k, (start, n) in runs:
    if isinstance(start, int) and start + n <= shape[k]:
      continue                        # inside the array whatever the program
    pos = items[k]
    if pads is not None and pos.id in pads and len(pos.type.shape) == 1 and is_value(value) and isinstance(
        value.type, TensorType) and true_shape(cx.b, value) == tuple(value.type.shape) == tuple(pads[pos.id]):
      from .elementwise_fns import arange
      pos = ew.binary(cx, ew.BinOp.ADD, arange.rule(cx, pads[pos.id][0]), start)   # (the compiler's own: exact)
    inside = ew.compare(cx, ew.CmpOp.LT, pos, shape[k])
    if len(inside.type.shape) < rank:   # out[rows, :]: the run's axis leads the window's
      from .shape import reshape_
      inside = reshape_(cx, inside, inside.type.shape + (1,) * (rank - len(inside.type.shape)))
    keep = inside if keep is None else ew.binary(cx, ew.BinOp.AND, keep, inside)
  for k, i in scalars:                # out[r, cols] = v: the row past the end is dropped, as jnp drops it
    inside = ew.compare(cx, ew.CmpOp.LT, i, shape[k])
    keep = inside if keep is None else ew.binary(cx, ew.BinOp.AND, keep, inside)
  if keep is not None and not isinstance(keep.type, TensorType):
    keep = ew.where_(cx, keep, ew.full_(cx, window.type.shape, True, DType.bool_), False)
  return window, keep
