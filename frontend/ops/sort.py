"""Sorting register tensors along their last axis: `ml.sort`, `ml.argsort`.

A sort moves values between threads, so it runs through two SMEM scratches the compiler
allocates (the keys, and each key's original position): a bitonic network of
log2(n) * (log2(n) + 1) / 2 compare-exchange steps, each element reading its partner from the
scratch, with a barrier between a step's reads and its writes (lowering/sort.py). Keys are
ordered as jnp.sort orders them (NaN last; first when descending) and ties by original position,
so the order is total: the result equals jnp.sort's and jnp.argsort's (stable) exactly, and
interpret mode computes it directly. The sorted length may be any: the network runs as on the next
power of two, its partners past the end standing for elements after every real one. A 3-D or
wider tensor sorts as its 2-D reshape (the rows of its last axis), reshaped back.
"""
from __future__ import annotations

import contextlib
import math

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..ir import Access, LayoutRule, Traits
from ..types import TensorType, dtype_name, resolve
from . import elementwise as ew
from . import padded_tiles
from .base import builtin, check_register_value, is_tensor, kind_of, shown
from .scratches import row_scratch, scratch
from .elementwise_checks import method_on
from .elementwise_fns import bitcast


@ir.op(Traits(effects=lambda o: [(o.keys, Access.REG_WRITE), (o.keys, Access.REG_READ),
                                 (o.order, Access.REG_WRITE), (o.order, Access.REG_READ)],
              layout=LayoutRule.ELEMENTWISE, moves_elements=True))
class Sort(ir.Op):
  """`x` (1- or 2-D; wider ones are reshaped) sorted along its last axis: results (the sorted values, the positions they
  came from, int32). Equal keys keep their order, or (`late_first`) the reverse: jnp.sort with
  descending=True is the ascending sort reversed. `keys` and `order` are flat scratches of x's
  rows of n + pad elements. `valid` (0: all n): the elements of each row that are x's own, the rest a
  padded read's padding, which stays where it is (ops/padded_tiles.py)."""
  x: ir.Value
  descending: bool
  late_first: bool
  keys: ir.Value
  order: ir.Value
  pad: int
  loc: object
  results: tuple
  valid: int = 0


def sort_tensor(cx, x, axis, descending, what, late_first=False, total=False):
  """`total`: floats in XLA's total order, as jax.lax.top_k compares them (-0.0 below +0.0, a NaN above +inf or
  below -inf by its sign bit), where jnp.sort's order ties the zeros and puts every NaN last: the sort of integer
  keys of the bits (total_keys), which give back the same bits (probe 53c)."""
  check_register_value(cx, x, what)
  if not is_tensor(x) or not x.type.shape:
    raise E.KernelTypeError(f"{what} takes a register tensor, got {kind_of(x)}"
                            + (f" of shape {x.type.shape}" if is_tensor(x) else ""), cx.loc,
                            hint=f"{what} sorts the elements of a tensor along its last axis; a scalar is sorted"
                                 " already: use it as it is")
  shape = x.type.shape
  rank = len(shape)
  if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
    raise E.KernelTypeError(f"{what}: axis must be a static int in [-{rank}, {rank}), got {shown(axis)}", cx.loc,
                            hint=f"{what}({cx.named(x)}) sorts along the last axis")
  if not isinstance(descending, bool):
    raise E.KernelTypeError(f"{what}: descending is a static bool, got {shown(descending)}", cx.loc,
                            hint="descending=True puts the largest first")
  if axis % rank != rank - 1:        # (another axis moved last, sorted, moved back: transposes through SMEM, as
    from .permute import transpose   # the hint wrote them; it was MG003, probe 52d)
    a = axis % rank
    perm = tuple(i for i in range(rank) if i != a) + (a,)
    back = tuple(perm.index(i) for i in range(rank))
    moved = transpose.rule(cx, x, perm)
    return tuple(transpose.rule(cx, r, back) for r in sort_tensor(cx, moved, -1, descending, what, late_first, total))
  if rank > 2:         # each row of the last axis sorted apart: the sort of the 2-D reshape, reshaped back
    from .shape import reshape_
    flat = reshape_(cx, x, (math.prod(shape[:-1]), shape[-1]))
    return tuple(reshape_(cx, r, shape) for r in sort_tensor(cx, flat, -1, descending, what, late_first, total))
  if total and isinstance(resolve(x.type.dtype), DType) and resolve(x.type.dtype).is_float:
    return total_sort(cx, x, descending, what, late_first)
  from .small_scans import held_sort
  if rank == 2 and (held := held_sort(cx, x, descending, what, late_first, sort_tensor)) is not None:
    return held           # a small statistic held as a vector: row by row through SMEM (ops/small_scans.py)
  n = shape[-1]
  d = resolve(x.type.dtype)
  if not isinstance(d, DType):
    raise E.DtypeInferenceError(f"{what}: the dtype of {x.name or 'the tensor'} is not known yet", cx.loc,
                                hint="give its buffer, when you make it, the dtype of the data it will hold:"
                                     " ml.smem(shape, x.dtype) of an input x, or a dtype such as jnp.float32")
  if d == DType.i64:        # jax_enable_x64's int64: the sort of its two 32-bit words (ops/sort_together.py)
    from .sort_together import sort_wide
    return sort_wide(cx, x, axis, descending, what, late_first)
  if d.bits > 32:
    raise E.UnsupportedDtypeError(f"{what} of {dtype_name(d)}: elements of 8 to 32 bits", cx.loc,
                                  hint="sort 32-bit keys (64-bit elements do not fit the sort's scratch)")
  # keys of 32 bits for 8-bit elements (bools as 0 and 1, float8 exactly in float32), converted back
  key = (DType.u32 if d == DType.bool_ else DType.f32 if d.is_float and d.bits == 8 else
         DType.i32 if d.is_int and d.bits == 8 and d.is_signed else DType.u32 if d.is_int and d.bits == 8 else d)
  own = padded_tiles.true_shape(cx.b, x)        # a padded read's (100,) in its (104,): sorted, the padding kept
  padded = own != tuple(shape)
  with padded_tiles.allowed(cx) if padded else contextlib.nullcontext():
    v = x if key == d else ew.astype(cx, x, key)
    rows = 1 if rank == 1 else shape[0]
    keys, pad = row_scratch(cx, rows, n, key, "sort keys")
    order = scratch(cx, (rows * (n + pad),), DType.i32, "sort positions")       # rows as long as the keys'
    vals, pos = cx.b.emit(Sort, v, descending, late_first, keys, order, pad, loc=cx.loc,
                          types=[TensorType(shape, key), TensorType(shape, DType.i32)],
                          names=[cx.name, None], valid=own[-1] if own[-1] != n else 0).results
    vals = vals if key == d else ew.narrowed(cx, vals, d)      # (float8_e5m2's infinities kept)
  if padded:
    cx.b.pad_tiles[vals.id] = cx.b.pad_tiles[pos.id] = own
  return vals, pos


def total_sort(cx, x, descending, what, late_first):
  """sort_tensor(..., total=True) of floats: the sort of `k = b ^ 0x7FFF...` where the bits `b` (as signed integers of
  the float's width; float8 widened to float32 first, exactly) are negative, `b` elsewhere: integers that order as
  XLA's total order of the floats, -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN; the same map takes the
  sorted keys back to the floats' bits."""
  d = resolve(x.type.dtype)
  wide = DType.f32 if d.bits == 8 else d
  ints = {32: DType.i32, 16: DType.i16}[wide.bits]
  own = padded_tiles.true_shape(cx.b, x)
  padded = own != tuple(x.type.shape)
  flip = (1 << (wide.bits - 1)) - 1

  def keys(v):        # (an involution: keys of keys are the bits)
    return ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, v, 0), ew.binary(cx, ew.BinOp.XOR, v, flip), v)

  with padded_tiles.allowed(cx) if padded else contextlib.nullcontext():
    v = x if wide == d else ew.astype(cx, x, wide)
    k = keys(bitcast.rule(cx, v, ints))
    if padded:
      cx.b.pad_tiles[k.id] = own
  sk, pos = sort_tensor(cx, k, -1, descending, what, late_first)
  with padded_tiles.allowed(cx) if padded else contextlib.nullcontext():
    vals = bitcast.rule(cx, keys(sk), wide)
    vals = vals if wide == d else ew.narrowed(cx, vals, d)
  if padded:
    cx.b.pad_tiles[vals.id] = own
  return vals, pos


def _stable(cx, stable, what):
  """jnp.sort's and jnp.argsort's `stable=` (default True): the sort here always is, which any
  order `stable=False` allows too."""
  if not isinstance(stable, bool):
    raise E.KernelTypeError(f"{what}: stable is a static bool, got {shown(stable)}", cx.loc,
                            hint="leave it out: the sort is always stable (equal keys keep their order)")


@builtin
def sort(cx, x, axis=-1, descending=False, stable=True, num_keys=1):
  """`x` sorted along its last axis (jnp.sort: NaN last; `descending=True` gives jnp's ascending
  order reversed, NaN first). Any length; any rank (along the last axis). Always stable.

  A tuple or list of tensors of one shape (jax.lax.sort's operands) is sorted by its first `num_keys` (the first
  the most significant), the others carried along: a tuple of them all, each in the keys' order (tokens ordered
  by their expert, `ml.sort((experts, tokens))`)."""
  _stable(cx, stable, "ml.sort")
  if isinstance(x, (tuple, list)):
    from .sort_together import sort_together
    return sort_together(cx, tuple(x), axis, descending, num_keys)
  if num_keys != 1:
    raise E.KernelTypeError(f"ml.sort of one tensor has one key, got num_keys={shown(num_keys)}", cx.loc,
                            hint="pass the keys and the values as a tuple, ml.sort((k0, k1, v), num_keys=2)")
  return sort_tensor(cx, x, axis, descending, "ml.sort", late_first=descending)[0]


@builtin
def argsort(cx, x, axis=-1, descending=False, stable=True):
  """The int32 positions that sort `x` along its last axis (jnp.argsort, stable: equal keys keep
  their order, also for stable=False). Any length; any rank (along the last axis)."""
  _stable(cx, stable, "ml.argsort")
  return sort_tensor(cx, x, axis, descending, "ml.argsort")[1]


@builtin
def top_k(cx, x, k, axis=-1):
  """jax.lax.top_k: `(values, indices)`, the k largest elements of `x` along its last axis, largest first,
  and their int32 positions (equal elements by position, NaN first, as jax.lax.top_k and
  jnp.argsort(descending=True)). One sort of the axis (any length), then its first k."""
  if not isinstance(k, int) or isinstance(k, bool):
    raise E.KernelTypeError(f"ml.top_k: k is a static int, got {shown(k)}", cx.loc,
                            hint="k sets the shape of the result: pass a Python int or a constexpr, ml.top_k(p, 2)")
  check_register_value(cx, x, "ml.top_k")
  own = padded_tiles.true_shape(cx.b, x) if is_tensor(x) else ()
  if own and not 1 <= k <= own[-1]:
    raise E.KernelTypeError(f"ml.top_k: k={k} of {own[-1]} elements along the last axis", cx.loc,
                            hint=f"k is 1 to {own[-1]}")
  rank = len(own)
  if rank and isinstance(axis, int) and not isinstance(axis, bool) and -rank <= axis < rank \
      and axis % rank != rank - 1:
    a = axis % rank
    perm = tuple(i for i in range(rank) if i != a) + (a,)
    back = tuple(perm.index(i) for i in range(rank))
    name = cx.named(x)
    hint = (f"transpose first: v, i = ml.top_k({method_on(name)}.T, {k}); then v.T and i.T hold each column's top {k}"
            if rank == 2 else f"move the axis last: v, i = ml.top_k(ml.transpose({name}, {perm}), {k}); then"
            f" ml.transpose(v, {back}) and ml.transpose(i, {back}) have it where it was")
    raise E.KernelTypeError(f"ml.top_k takes the top k along the last axis; axis {axis} of a {rank}-D tensor is not"
                            " it", cx.loc, hint=hint)
  vals, pos = sort_tensor(cx, x, axis, True, "ml.top_k", total=True)
  shape = tuple(x.type.shape)
  n = shape[-1]
  rows = math.prod(shape[:-1])
  # The first k columns are a register tensor where (rows, k) is one (a vector: a multiple of 8 elements; else a
  # multiple of 128, or fewer than 128 of a 2-D tile, held as its elements). A padded read's, and in the padded
  # trace any other, are kept padded to the next width that is (the columns past k padding too), which masked
  # stores write as the unpadded (rows, k).
  strict = (lambda c: c % 8 == 0) if len(shape) == 1 else (lambda c: rows * c % 128 == 0)
  padded = own != shape
  if not padded and (strict(k) or len(shape) == 2 and rows * k < 128):
    k_up = k
  else:
    k_up = next((c for c in range(k, n) if strict(c)), n)
    if not padded and getattr(cx.b, "pad_tiles", None) is None:
      out = f"a ({k},) vector" if len(shape) == 1 else f"{(*shape[:-1], k)} tensors"
      need = "a 1-D vector holds a multiple of 8 elements" if len(shape) == 1 else \
          "a register tensor holds a multiple of 128 elements"
      win = f"ml.ds(0, {k_up})" if len(shape) == 1 else f"{', '.join([':'] * (len(shape) - 1))}, ml.ds(0, {k_up})"
      lead = ", ".join(["None"] * (len(shape) - 1))
      lane = f"ml.arange({k_up})" if len(shape) == 1 else f"ml.arange({k_up})[{lead}, :]"
      raise E.LayoutError(
          f"ml.top_k(..., {k}) of {cx.named(x)} {shape} gives {out}, which no register tensor holds ({need})", cx.loc,
          hint=f"take {k_up}, v, i = ml.top_k({cx.named(x)}, {k_up}), and store the first {k} under a mask:"
               f" out.at[{win}].store(v, mask={lane} < {k}) (the window may run past out's end: masked elements are"
               f" never written)")
  keep = padded or k_up != k            # (recorded padded: its own shape is (..., k))
  if k_up == n:
    if keep:
      cx.b.pad_tiles[vals.id] = cx.b.pad_tiles[pos.id] = (*own[:-1], k)
    return vals, pos
  from .shape import expand, index_through_smem, reshape_
  out = (*shape[:-1], k_up)
  # the first k_up columns: in registers where they are whole 8-column tiles (a tensor-core layout's, the sort of an
  # ml.dot result keeps it), else through an SMEM scratch
  cut = expand if k_up % 8 == 0 else index_through_smem
  if len(shape) == 1:
    first = lambda t: cut(cx, t, (slice(0, k_up),))
  elif len(shape) == 2:
    first = lambda t: cut(cx, t, (slice(None), slice(0, k_up)))
  else:
    first = lambda t: reshape_(cx, cut(cx, reshape_(cx, t, (rows, n)), (slice(None), slice(0, k_up))), out)
  with padded_tiles.allowed(cx) if keep else contextlib.nullcontext():
    res = first(vals), first(pos)
  if keep:
    for r in res:
      cx.b.pad_tiles[r.id] = (*own[:-1], k)
  return res


@builtin
def topk(cx, x, k, axis=-1):
  """Triton's `tl.topk(x, k, dim=None)`: the k largest elements of `x` along its last axis, largest first (the
  values of ml.top_k, whose indices Triton's does not return); probe 62d, where it was MG002."""
  return top_k.rule(cx, x, k, -1 if axis is None else axis)[0]


for _f in (sort, argsort, top_k, topk):
  _f.rule.aliases = {"dim": "axis"}       # Triton's keyword (tl.sort(x, dim=1), tl.topk(x, k, dim=1)); probe 58d
