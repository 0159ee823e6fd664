"""`ml.searchsorted(a, v, side="left")`: jnp.searchsorted of a sorted 1-D array and run-time queries (which
group of a grouped GEMM's offsets a row falls in, which expert a token's slot belongs to), composed of ops the
compiler has, so it has no IR op or lowering of its own:

- `a` a ref (a kernel parameter, a window of one, an SMEM buffer) and `v` a scalar: a binary search on scalars,
  `a.shape[0].bit_length()` steps, each reading one element (`a[mid]`, mid clamped into `a`: a finished search's
  may be its length) and narrowing `lo:hi`;
- `a` a GMEM ref and `v` a tensor: the same search elementwise, each step a gather `a[mid]` (clamped into `a`,
  as every gather is: a finished lane's `mid` may be `a`'s length);
- `a` a register vector (or an SMEM ref, read whole): the count of its elements before each query,
  `ml.sum(a[None, :] < v[:, None], axis=1)` (`<=` for side="right"), for a scalar or 1-D `v`; a 2-D `v`'s
  flattened queries counted so and shaped back, where the tile is a multiple of 128 elements (probe 53i).
The result is int32, as jnp's (positions 0 to len(a))."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..types import RefType, Space
from .base import builtin, check_register_value, is_tensor, is_value, kind_of, shown

_SIDES = ("left", "right")
_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")       # jnp's: the same answer by any of them


@builtin
def searchsorted(cx, a, v, side="left", sorter=None, *, method="scan"):
  """jnp.searchsorted(a, v, side): for each query, the position in the sorted 1-D `a` where it would be inserted
  (left: before equal elements; right: after them), int32."""
  if side not in _SIDES:
    raise E.KernelTypeError(f"ml.searchsorted: side is 'left' or 'right', got {shown(side)}", cx.loc,
                            hint="side='left' counts the elements below each query, side='right' those not above it")
  if sorter is not None:
    raise E.KernelTypeError("ml.searchsorted takes no sorter=", cx.loc,
                            hint="search the sorted values themselves: ml.searchsorted(ml.sort(a), v), or"
                                 " a[ml.argsort(a)] read as a gather")
  if method not in _METHODS:
    raise E.KernelTypeError(f"ml.searchsorted: method is one of jnp's {_METHODS}, got {shown(method)}", cx.loc,
                            hint="leave it out: the compiler picks the search")
  check_register_value(cx, v, "ml.searchsorted")
  if isinstance(v, (int, float)) and not isinstance(v, bool) and is_value(a):
    from .elementwise import constant       # jnp.searchsorted(a, 0.5): one query, a weakly typed scalar (session
    v = constant(cx, v)                     # 60: an internal error)
  if isinstance(getattr(a, "type", None), RefType):
    if len(a.type.shape) != 1:
      raise E.KernelTypeError(f"ml.searchsorted searches a 1-D sorted array, got {cx.named(a)} of shape"
                              f" {tuple(a.type.shape)}", cx.loc,
                              hint=f"search one row of it: ml.searchsorted({cx.named(a)}.at[r], v)")
    if not is_tensor(v) or a.type.space == Space.GMEM:
      return _binary_search(cx, a, v, side)
    from .transfers import load
    a = load(cx, a)             # an SMEM buffer and tensor queries: its elements counted
  elif is_tensor(v) and len(v.type.shape) == 1 and (ref := _narrow_input(cx, a, v)) is not None:
    return _binary_search(cx, ref, v, side)
  return _count(cx, a, v, side)


def _narrow_input(cx, a, v):
  """The GMEM input `a` is a whole read of (`offsets[...]`), where its length is no multiple of a warp's 32 lanes,
  else None. Its queries are searched in the input itself, as jnp's binary search does (probe 56e: counting
  them in a (queries, 9) tile left that tile without a register layout where the positions index a gather's rows,
  `dense[jnp.searchsorted(offsets[...], j, side='right') - 1, :]`, MG204)."""
  from ..types import Space
  from .memory import Load
  from .padded_tiles import true_shape
  d = cx.b.defs.get(getattr(a, "id", None))
  if not isinstance(d, Load) or not isinstance(getattr(d.ref, "type", None), RefType):
    return None
  ref = d.ref
  shape = tuple(ref.type.shape)
  if ref.type.space != Space.GMEM or ref.id not in cx.b.read_only or ref.id in cx.b.aliased or len(shape) != 1 or \
      true_shape(cx.b, a) != shape or shape[0] % 32 == 0 or cx.b.defining(ref) is not None or \
      true_shape(cx.b, v) != tuple(v.type.shape):
    return None
  return ref


def _binary_search(cx, a, v, side):
  """lo:hi narrowed `n.bit_length()` times (n + 1 answers, halved each step), elementwise for tensor queries."""
  from .elementwise import BinOp, CmpOp, binary, compare, constant, full_, where_
  n = a.type.shape[0]
  tensor = is_tensor(v)
  start = (lambda x: full_(cx, tuple(v.type.shape), x, DType.i32)) if tensor else \
      (lambda x: constant(cx, x, DType.i32))
  lo, hi = start(0), start(n)
  for _ in range(n.bit_length()):
    mid = binary(cx, BinOp.SHR, binary(cx, BinOp.ADD, lo, hi), 1)
    open_ = compare(cx, CmpOp.LT, lo, hi)
    below = _before(cx, side, _element(cx, a, mid, tensor), v)
    up = binary(cx, BinOp.AND, open_, below)
    down = binary(cx, BinOp.AND, open_, compare(cx, CmpOp.EQ, below, False))
    lo = where_(cx, up, binary(cx, BinOp.ADD, mid, 1), lo)
    hi = where_(cx, down, mid, hi)
  return lo


def _before(cx, side, elem, v):
  """Whether the table's `elem` comes before the query `v` (left: elem < v; right: elem <= v) in jnp's order of
  floats, its sort's: NaN after every number and equal to NaN (probe 56h: a NaN query was placed at 0, where every
  method of jnp.searchsorted places it after the table's numbers)."""
  from .elementwise import BinOp, CmpOp, binary, compare
  below = compare(cx, CmpOp.LT if side == "left" else CmpOp.LE, elem, v)
  if not getattr(v.type.dtype, "is_float", False):
    return below
  nan_v = compare(cx, CmpOp.NE, v, v)
  after = nan_v if side == "right" else binary(cx, BinOp.AND, nan_v, compare(cx, CmpOp.EQ, elem, elem))
  return binary(cx, BinOp.OR, below, after)


def _element(cx, a, i, tensor):
  """a[i]: a gather for a tensor of positions (clamped into a: a finished lane's i may be len(a)), else an
  element read at i clamped into a: the steps are unrolled, so a search that has finished (lo == hi) still reads,
  and its i is len(a) where the query comes after every element (the value read is not used)."""
  if tensor:
    from .gather import gather
    return gather(cx, a, (i,))
  from .elementwise import BinOp, binary
  from .memory import view
  from .transfers import load
  return load(cx, view(cx, a, (binary(cx, BinOp.MIN, i, a.type.shape[0] - 1),)))


def _count(cx, a, v, side, own=None):
  """How many elements of the register vector `a` come before each query (of its first `own` elements: a table
  read padded, counted where the padded trace does not follow it)."""
  from .elementwise import CmpOp, astype, compare
  from .reduce import ReduceKind, reduce
  from .shape import expand
  check_register_value(cx, a, "ml.searchsorted")
  if not is_tensor(a) or len(a.type.shape) != 1:
    raise E.KernelTypeError(f"ml.searchsorted searches a 1-D sorted array, got {kind_of(a)}"
                            + (f" of shape {tuple(a.type.shape)}" if is_tensor(a) else ""), cx.loc,
                            hint="pass the sorted vector, or the GMEM array it is read from (searched by gathers)")
  if not is_tensor(v):
    return reduce(cx, ReduceKind.SUM, astype(cx, _before(cx, side, a, v), DType.i32), None, False)
  if len(v.type.shape) == 2:      # a tile of queries (jnp.interp of a (16, 32) tile, jnp.digitize of a block): the
    from contextlib import nullcontext
    from .padded_tiles import allowed, padded_table
    from .shape import reshape_  # count of its flattened queries, shaped back (probe 53i: it was MG003)
    pads, table = padded_table(cx, v), padded_table(cx, a)    # (a (2, 16) or (5, 40) tile read padded: its padded
    with allowed(cx) if pads or table else nullcontext():      # queries counted too, each its own; probe 54a)
      flat = reshape_(cx, v, (v.type.shape[0] * v.type.shape[1],))
      own = table[a.id][0] if table else None
      out = reshape_(cx, _count(cx, a, flat, side, own), tuple(v.type.shape))
    if pads is not None:
      pads[out.id] = pads[v.id]
    return out
  if len(v.type.shape) != 1:
    raise E.KernelTypeError(f"ml.searchsorted of a register vector takes a scalar or 1-D queries, got"
                            f" {kind_of(v)} of shape {tuple(v.type.shape)}", cx.loc,
                            hint="search the GMEM array instead (each step a gather, any shape of queries), or"
                                 " reshape the queries to 1-D and back")
  hits = _before(cx, side, expand(cx, a, (None, slice(None))), expand(cx, v, (slice(None), None)))
  if own is not None and own < a.type.shape[0]:
    from .elementwise import BinOp, binary
    from .elementwise_fns import arange
    real = compare(cx, CmpOp.LT, arange.rule(cx, a.type.shape[0]), own)
    hits = binary(cx, BinOp.AND, hits, expand(cx, real, (None, slice(None))))
  return reduce(cx, ReduceKind.SUM, astype(cx, hits, DType.i32), 1, False)
