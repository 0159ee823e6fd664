"""`ml.reduce(input, axis, combine_fn, keep_dims=False)`: Triton's `tl.reduce`, a reduction with the user's own
associative combine: a Welford merge of (mean, m2, count) triples (Triton's and TorchInductor's
`welford_combine`), an argmax of (value, index) pairs, a product. Before probe 47h it was MG002 whose hint folded
the tile with its rolled copy by hand.

No op of its own: the inclusive `ml.associative_scan` along the axis (Triton's argument order, so its combine
takes the parts spread, `combine(a1, b1, a2, b2)`, or two tuples, by its arity), of which the last element along
the axis is the reduction (a static index, `expand`). ceil(log2(n)) steps, each rolling the parts through SMEM, so
it costs about what `ml.cumsum` of each part does; `ml.sum`, `ml.max`, `ml.min`, `ml.argmax` and `ml.argmin` stay
the faster way to their own combines. axis=None reduces every element (of a tensor of two or more axes, its
row-major reshape, through SMEM). The combine must be associative, as Triton asks; floats combine in the scan's
order, not Triton's tree."""
from __future__ import annotations

import math

from .. import errors as E
from .assoc_scan import associative_scan
from .base import builtin, is_tensor, kind_of, shown
from .shape import expand, reshape_

_USE = ("ml.reduce((m, m2, w), 1, welford_combine) (Triton's tl.reduce: the elements, a static axis or None, a"
        " combine of two elements' parts, an @ml.inline helper or a lambda of the kernel's body)")


def _parts(x):
  return list(x) if isinstance(x, (tuple, list)) else [x]


@builtin
def reduce(cx, input, axis, combine_fn, keep_dims=False):
  """Triton's `tl.reduce`: the reduction of `input` (a register tensor, or a tuple of tensors of one shape) along
  `axis` (a static int, or None for every element) with the associative `combine_fn`, whose first arguments are
  the earlier element's parts; a tuple input gives a tuple. `keep_dims` keeps the axis with size 1."""
  parts = _parts(input)
  if not parts or not all(is_tensor(p) for p in parts):
    bad = next((p for p in parts if not is_tensor(p)), input)
    raise E.KernelTypeError(f"ml.reduce reduces register tensors, got {kind_of(bad)}", cx.loc, hint=_USE)
  if not isinstance(keep_dims, bool):
    raise E.KernelTypeError(f"ml.reduce: keep_dims is a static bool, got {shown(keep_dims)}", cx.loc, hint=_USE)
  shape = parts[0].type.shape
  rank = len(shape)
  if axis is None:
    from .padded_tiles import true_shape
    if rank > 1 and any(true_shape(cx.b, p) != tuple(p.type.shape) for p in parts):
      # (an odd read computed padded, which no reshape keeps: its last axis reduced first, then the next; probe 52d)
      flat = reduce.rule(cx, input, rank - 1, combine_fn, False)
      for a in range(rank - 2, -1, -1):
        flat = reduce.rule(cx, flat, a, combine_fn, False)
      if not keep_dims:
        return flat
      from .elementwise import full_      # (each part's scalar stretched to (1, ..., 1), as a keepdims max's)
      kept = tuple(full_(cx, (1,) * rank, r, r.type.dtype) for r in _parts(flat))
      return kept if isinstance(input, (tuple, list)) else kept[0]
    else:
      flat = [p if rank == 1 else reshape_(cx, p, (math.prod(p.type.shape),)) for p in parts]
    out = reduce.rule(cx, tuple(flat) if isinstance(input, (tuple, list)) else flat[0], 0, combine_fn, keep_dims)
    if not keep_dims or rank == 1:
      return out
    return tuple(reshape_(cx, o, (1,) * rank) for o in out) if isinstance(out, tuple) else reshape_(
        cx, out, (1,) * rank)
  if not isinstance(axis, int) or isinstance(axis, bool):
    raise E.KernelTypeError(f"ml.reduce: axis must be a static int or None, got {shown(axis)}", cx.loc, hint=_USE)
  if not -rank <= axis < rank:
    raise E.IndexOutOfBoundsError(f"ml.reduce: axis {axis!r} is out of range for a tensor of rank {rank}", cx.loc,
                                  hint=f"axes run from {-rank} to {rank - 1}")
  axis %= rank
  from .padded_tiles import true_shape
  n = true_shape(cx.b, parts[0])[axis]   # (a padded odd read's own length: its last real element, probe 48a)
  elems = tuple(parts) if isinstance(input, (tuple, list)) else parts[0]
  scanned = associative_scan.rule(cx, elems, axis, combine_fn)
  last = tuple((slice(n - 1, n) if keep_dims else n - 1) if a == axis else slice(None) for a in range(rank))
  taken = [expand(cx, s, last) for s in _parts(scanned)]
  return tuple(taken) if isinstance(input, (tuple, list)) else taken[0]



@builtin
def xor_sum(cx, input, axis=None, keep_dims=False, keepdims=None):
  """Triton's `tl.xor_sum`: the bitwise xor of the integers (or booleans) of `input` along `axis` (a static int, or
  None for every element): ml.reduce of form_helpers.bit_xor (probe 52d; it was MG002)."""
  from ..dtypes import DType
  from ..form_helpers import bit_xor
  from ..types import resolve
  from .elementwise_checks import method_on
  keep = keep_dims if keepdims is None else keepdims
  if not is_tensor(input):
    raise E.KernelTypeError(f"ml.xor_sum reduces a register tensor, got {kind_of(input)}", cx.loc,
                            hint="read it first: ml.xor_sum(x[...], axis=1)")
  d = resolve(input.type.dtype)
  if not isinstance(d, DType) or not (d.is_int or d == DType.bool_):
    xs = method_on(cx.named(input, "x"))
    raise E.UnsupportedDtypeError(f"ml.xor_sum needs integers, got {d}", cx.loc,
                                  hint=f"xor the bits: ml.xor_sum(ml.bitcast({xs}, jnp.int32), ...) (or convert the"
                                       f" values, {xs}.astype(jnp.int32))")
  if isinstance(axis, (tuple, list)) and axis and all(isinstance(a, int) and not isinstance(a, bool) for a in axis):
    rank = len(input.type.shape)            # (several axes, jnp's way: each reduced, the last first)
    if not all(-rank <= a < rank for a in axis) or len({a % rank for a in axis}) != len(axis):
      raise E.IndexOutOfBoundsError(f"ml.xor_sum: axes {tuple(axis)!r} are not distinct axes of a tensor of rank"
                                    f" {rank}", cx.loc, hint=f"axes run from {-rank} to {rank - 1}, each once")
    shape = tuple(input.type.shape)
    merged = merged_axes(shape, {a % rank for a in axis})
    if merged is not None and not keep:     # (a run of leading or trailing axes: one axis of the reshape)
      return reduce.rule(cx, reshape_(cx, input, merged[0]), merged[1], bit_xor, False)
    out = input
    for a in sorted((a % rank for a in axis), reverse=True):
      out = reduce.rule(cx, out, a, bit_xor, keep)
    return out
  return reduce.rule(cx, input, axis, bit_xor, keep)


def merged_axes(shape, axes):
  """(the 2-D shape, its axis) that reduces the run of leading or trailing `axes` of `shape` (a set) as one axis of a
  reshape (`(4, 8, 128)` over (1, 2): `(4, 1024)`, axis 1); None for other axes, all of them, or one."""
  rank, k = len(shape), len(axes)
  if k < 2 or k == rank:
    return None
  if axes == set(range(rank - k, rank)):
    return (math.prod(shape[:rank - k]), math.prod(shape[rank - k:])), 1
  if axes == set(range(k)):
    return (math.prod(shape[:k]), math.prod(shape[k:])), 0
  return None
