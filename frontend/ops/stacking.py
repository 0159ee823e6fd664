"""Array-building ops of jnp and Triton composed of the shape ops: ml.stack, ml.join, ml.interleave,
ml.repeat, ml.pad, ml.expand_dims, ml.squeeze, ml.split (probe 46k).

No IR op of their own: each is written out at trace time in `shape`'s ops (axes inserted or removed
by a reshape, ml.concatenate through its SMEM scratch, static windows), so layouts, interpret mode and
lowering need nothing new, and each works wherever the forms it is written in work (the forms
docs/language.md gave as the way to write them before they existed).
"""
from __future__ import annotations

from .. import errors as E
from .. import hw
from ..types import resolve
from . import elementwise as ew
from .base import builtin, check_register_value, is_tensor, kind_of, python_int as _int, shown


def _tensor(cx, x, what):
  check_register_value(cx, x, what)
  if not is_tensor(x):
    raise E.KernelTypeError(f"{what} takes register tensors, got {kind_of(x)}", cx.loc,
                            hint="make a number a tensor first: ml.full(shape, value, dtype)")
  return x


def _axis(cx, axis, rank, what, example):
  if not _int(axis) or not -rank <= axis < rank:
    raise E.KernelTypeError(f"{what}: axis must be a static int in [-{rank}, {rank}), got {shown(axis)}", cx.loc,
                            hint=example)
  return axis % rank


def _insert(cx, x, axis):
  """`x` with a size-1 axis inserted at `axis` (of the result's rank)."""
  from .shape import reshape_
  shape = list(x.type.shape)
  shape.insert(axis, 1)
  return reshape_(cx, x, tuple(shape))


def _joined(cx, xs, axis, what):
  """ml.concatenate's rule, its messages naming `what`."""
  from .shape import concatenate
  return concatenate.rule(cx, list(xs), axis)


@builtin
def stack(cx, xs, axis=0):
  """jnp.stack: register tensors of one shape joined along a new axis `axis` (of the result):
  `ml.stack([a, b], axis=-1)` of (m, n) tensors is (m, n, 2). Through ml.concatenate's SMEM scratch."""
  if not isinstance(xs, (list, tuple)) or not xs:
    raise E.KernelTypeError(f"ml.stack takes a list or tuple of register tensors, got {kind_of(xs)}", cx.loc,
                            hint="ml.stack([a, b], axis=0)")
  xs = [_tensor(cx, x, "ml.stack") for x in xs]
  shape = xs[0].type.shape
  for x in xs[1:]:
    if x.type.shape != shape:
      raise E.ShapeMismatchError(
          f"ml.stack of parts of shapes {shape} and {x.type.shape}: the parts need one shape", cx.loc,
          hint="ml.stack joins tensors of one shape; ml.concatenate joins along an existing axis")
  axis = _axis(cx, axis, len(shape) + 1, "ml.stack", "ml.stack([a, b], axis=-1) stacks along a new last axis")
  return _joined(cx, [_insert(cx, x, axis) for x in xs], axis, "ml.stack")


@builtin
def join(cx, a, b):
  """Triton's tl.join: `a` and `b` (one shape) along a new last axis of 2, `ml.stack([a, b], axis=-1)`."""
  return stack.rule(cx, [_tensor(cx, a, "ml.join"), _tensor(cx, b, "ml.join")], -1)


@builtin
def interleave(cx, a, b):
  """Triton's tl.interleave: the last axes of `a` and `b` (one shape) interleaved, a[..., 0], b[..., 0],
  a[..., 1], ...: `ml.join(a, b)` with its last two axes merged."""
  from .shape import reshape_
  a, b = _tensor(cx, a, "ml.interleave"), _tensor(cx, b, "ml.interleave")
  shape = a.type.shape
  out = tuple(shape[:-1]) + (2 * shape[-1],)
  if len(shape) > 1 and set(shape[:-1]) == {1} and a.type.shape == b.type.shape and shape[-1] % 8 == 0 and \
      shape[-1] < 128:
    from .shape import index_through_smem        # (a group's (1, n) row of AWQ zeros, `tl.interleave(z, z)` three
    row = lambda v: index_through_smem(cx, v, (0,) * (len(shape) - 1))       # times: its (n,) vector's, probe 52e)
    return reshape_(cx, interleave.rule(cx, row(a), row(b)), out)
  if len(shape) > 1 and set(shape[:-1]) == {1} and a.type.shape == b.type.shape and shape[-1] < 8:
    from .few_stats import _scalars               # (a row of fewer than 8 held as its scalars: a group's (1, 4) AWQ
    from .small_parts import assemble             # zero words at BLOCK_N = 32, ops/small_loads.py's 'few', probe 52e)
    pa, pb = _scalars(cx, a, {}, probe=False), _scalars(cx, b, {}, probe=False)
    if pa is not None and pb is not None:
      made = assemble(cx, out, [p for pair in zip(pa, pb) for p in pair])
      if made is not None:
        return made
  j = join.rule(cx, a, b)
  return reshape_(cx, j, out)


@builtin(methods=("repeat",))
def repeat(cx, x, repeats, axis=None):
  """jnp.repeat with a static int: each element of `x` `repeats` times along `axis` (None: of `x`
  flattened), `ml.repeat(v, 2, axis=0)` of (w, c) is (2 w, c): a nearest upsampling's rows."""
  from .shape import reshape_
  x = _tensor(cx, x, "ml.repeat")
  if not _int(repeats) or repeats < 1:
    raise E.KernelTypeError(
        f"ml.repeat takes a static positive int of repeats, got {shown(repeats)}", cx.loc,
        hint="ml.repeat(v, 2, axis=0); repeats that differ by element are a gather from the ref,"
             " ref[ml.arange(n * r) // r]")
  if axis is None:
    x = reshape_(cx, x, (_size(x.type.shape),))
    axis = 0
  shape = x.type.shape
  axis = _axis(cx, axis, len(shape), "ml.repeat", "ml.repeat(v, 2, axis=0)")
  if repeats == 1:
    return x
  from .padded_tiles import true_shape
  own = true_shape(cx.b, x)
  long = own[-1] * repeats > hw.WARPGROUP and own[-1] * repeats % hw.WARPGROUP   # (a (40,) vector 4 times: 160)
  if (len(shape) == 1 or len(shape) == 2 and own[0] == 1 and axis == 1) and (own[-1] % 8 or long) \
      and own[-1] * repeats % 8 == 0:
    # A vector of a length no register vector holds (a 256-wide tile's two 128x128 block scales) repeated into one
    # that does: each output element's source read as a register gather, x[ml.arange(n * r) // r], as jnp.repeat's
    # form (probe 57c: its joined (n, 1) columns were MG204, and the padded trace's repeat of the (8,) it held was a
    # (1024,) vector beside the (128, 256) tile it scales); so is one of more than 128 elements that are no multiple
    # of 128, whose joined (n, r) columns hold no layout either (probe 68b: a (40,) vector 4 times, a (200,) twice)
    from ..dtypes import DType
    from ..types import TensorType
    from .register_gather import register_gather
    i = cx.b.emit(ew.Arange, 0, loc=cx.loc, types=[TensorType((own[-1] * repeats,), DType.i32)]).result
    index = (0,) * (len(shape) - 1) + (ew.binary(cx, ew.BinOp.FLOORDIV, i, repeats),)
    if (out := register_gather(cx, x, index, cx.name)) is not None:
      return out if len(shape) == 1 else _insert(cx, out, 0)    # (a (1, n) row: the (1, n * r) row)
  if (padded := _padded_repeat(cx, x, repeats, axis)) is not None:
    return padded
  out = list(shape)
  out[axis] *= repeats
  if len(shape) > 1 and _size(shape) < 128 and (_size(shape) == shape[axis] or shape[axis] == 1 and
                                               _size(shape) == shape[-1]):
    # A row (1, n) repeated along its columns (or a column along its rows: a group's (1, n) row of zero words made
    # BN wide, AWQ's `ml.repeat(z, 8, axis=1)`) is its vector repeated, as a vector is: the joined (1, n, r) below
    # holds no layout (probe 68b: MG204 naming a (1, n, 1) the kernel never wrote)
    from .shape import broadcast_to_shape, index_through_smem
    along = axis if _size(shape) == shape[axis] else len(shape) - 1         # the axis its elements lie along
    v = index_through_smem(cx, x, tuple(slice(None) if d == along else 0 for d in range(len(shape))))
    if along != axis:                       # (1, n) repeated along its one row: its vector broadcast
      return broadcast_to_shape(cx, v, tuple(out), dims=(along,))
    return reshape_(cx, repeat.rule(cx, v, repeats, 0), tuple(out))
  if len(shape) == 2 and axis == 1 and _size(shape) < 128 and shape[0] <= 8:
    # A few short rows (AWQ's (2, 8) zero words of two groups in one k tile) along their columns: each row's vector
    # repeated, the rows stacked. The joined (r, n, repeats) below moves its (n,) vectors through windows strided in
    # their last axis, whose one-element vectors no other use of the rows could share (probe 68b: MG204 "z of shape
    # (8,) comes from or goes to a window strided in its last dimension" where the result met a table of shifts)
    from .shape import index_through_smem
    rows = [repeat.rule(cx, index_through_smem(cx, x, (r, slice(None))), repeats, 0) for r in range(shape[0])]
    return stack.rule(cx, rows, 0)
  e = _insert(cx, x, axis + 1)
  j = _joined(cx, [e] * repeats, axis + 1, "ml.repeat")
  return reshape_(cx, j, tuple(out))


def _padded_repeat(cx, x, repeats, axis):
  """ml.repeat of a value computed padded (a (5,) vector or a (7, 64) tile read padded to (8,), (8, 64)): repeated
  as it is held, each axis's padding stays at its end ((24,) holding the (15,), (16, 64) the (14, 64)), recorded with
  its own shape (probe 53a: its (5, 1) columns, or the reshape of its padded rows, were MG204); None otherwise."""
  from .padded_tiles import allowed, padded_table
  pads = padded_table(cx, x)
  if pads is None:
    return None
  own = list(pads[x.id])
  with allowed(cx):
    if len(own) == 1:       # (a vector's (n, 1) columns joined hold no layout: its elements gathered, v[i // r])
      from ..dtypes import DType
      from ..types import TensorType
      from .register_gather import gather_positions
      n = x.type.shape[0] * repeats
      i = cx.b.emit(ew.Arange, 0, loc=cx.loc, types=[TensorType((n,), DType.i32)]).result
      out = gather_positions(cx, x, ew.binary(cx, ew.BinOp.FLOORDIV, i, repeats), cx.name)
    else:
      out = repeat.rule(cx, x, repeats, axis)
  own[axis] *= repeats
  pads[out.id] = tuple(own)
  return out


def _size(shape):
  n = 1
  for d in shape:
    n *= d
  return n


def _pad_widths(cx, pad_width, rank):
  """jnp.pad's pad_width normalised to a (before, after) pair per axis."""
  bad = E.KernelTypeError(
      f"ml.pad: pad_width must be static ints: n, (before, after), or a (before, after) pair per axis, got"
      f" {shown(pad_width)}", cx.loc, hint="ml.pad(v, ((0, 0), (0, 3))) pads 3 columns after the last")
  def pair(p):
    if _int(p):
      return (p, p)
    if isinstance(p, (tuple, list)) and len(p) == 1 and _int(p[0]):
      return (p[0], p[0])
    if isinstance(p, (tuple, list)) and len(p) == 2 and all(_int(v) for v in p):
      return tuple(p)
    raise bad
  if _int(pad_width) or isinstance(pad_width, (tuple, list)) and all(_int(v) for v in pad_width):
    widths = [pair(pad_width if _int(pad_width) else tuple(pad_width))] * rank
  elif isinstance(pad_width, (tuple, list)) and len(pad_width) == 1:
    widths = [pair(pad_width[0])] * rank
  elif isinstance(pad_width, (tuple, list)) and len(pad_width) == rank:
    widths = [pair(p) for p in pad_width]
  else:
    raise bad
  if any(v < 0 for w in widths for v in w):
    raise E.KernelTypeError(f"ml.pad: negative pad widths {widths}", cx.loc,
                            hint="take a window to drop elements: v[:, 2:]")
  return widths


@builtin
def pad(cx, x, pad_width, mode="constant", constant_values=0):
  """jnp.pad of a register tensor, constant mode: `ml.pad(v, ((0, 0), (1, 2)), constant_values=-inf)`
  puts one column of -inf before `v` and two after. The value is converted to `x`'s dtype (as jnp's)."""
  x = _tensor(cx, x, "ml.pad")
  if mode != "constant":
    raise E.KernelTypeError(
        f"ml.pad supports mode='constant' only, got {shown(mode)}", cx.loc,
        hint="edge and reflect padding are windows joined: ml.concatenate([v[:, :1], v], axis=1)")
  if not isinstance(constant_values, (int, float)):
    raise E.KernelTypeError(
        f"ml.pad: constant_values must be a Python number, got {shown(constant_values)}", cx.loc,
        hint="ml.pad(v, ((0, 0), (0, 4)), constant_values=0.0); a run-time value: ml.where on a padded index")
  from .padded_tiles import true_shape
  widths = _pad_widths(cx, pad_width, len(x.type.shape))
  dt = resolve(x.type.dtype)
  for axis, (lo, hi) in enumerate(widths):
    if lo == 0 and hi == 0:
      continue
    parts = []
    for n in (lo, hi):
      shape = list(true_shape(cx.b, x))       # (a padded value's own: its fills are remade padded, probe 47a)
      shape[axis] = n
      parts.append(ew.full_(cx, tuple(shape), constant_values, dt, "ml.pad", convert=True) if n else None)
    x = _joined(cx, [p for p in (parts[0], x, parts[1]) if p is not None], axis, "ml.pad")
  return x


def _axes(cx, axis, rank, what, example):
  axes = axis if isinstance(axis, (tuple, list)) else (axis,)
  if not axes or not all(_int(a) and -rank <= a < rank for a in axes):
    raise E.KernelTypeError(f"{what}: axis must be a static int or tuple of ints in [-{rank}, {rank}), got"
                            f" {shown(axis)}", cx.loc, hint=example)
  axes = sorted(a % rank for a in axes)
  if len(set(axes)) != len(axes):
    raise E.KernelTypeError(f"{what}: repeated axis in {shown(axis)}", cx.loc, hint=example)
  return axes


@builtin
def expand_dims(cx, x, axis):
  """jnp.expand_dims: `x` with size-1 axes inserted at `axis` (an int or a tuple, positions in the
  result): `ml.expand_dims(v, 1)` is `v[:, None]`."""
  from .shape import reshape_
  x = _tensor(cx, x, "ml.expand_dims")
  rank = len(x.type.shape) + (len(axis) if isinstance(axis, (tuple, list)) else 1)
  axes = _axes(cx, axis, rank, "ml.expand_dims", "ml.expand_dims(v, 1) is v[:, None]")
  shape, it = [], iter(x.type.shape)
  for d in range(rank):
    shape.append(1 if d in axes else next(it))
  return reshape_(cx, x, tuple(shape))


@builtin(methods=("squeeze",))
def squeeze(cx, x, axis=None):
  """jnp.squeeze: `x` without its size-1 axes (those of `axis`, an int or a tuple, which must be
  size 1; None: all of them)."""
  from .shape import reshape_
  x = _tensor(cx, x, "ml.squeeze")
  shape = x.type.shape
  if axis is None:
    axes = [d for d, n in enumerate(shape) if n == 1]
  else:
    axes = _axes(cx, axis, len(shape), "ml.squeeze", "ml.squeeze(v, axis=1)")
    if (big := [d for d in axes if shape[d] != 1]):
      raise E.ShapeMismatchError(
          f"ml.squeeze: axis {big[0]} of {cx.named(x, 'the tensor')} {shape} has size {shape[big[0]]}, not 1",
          cx.loc, hint="only size-1 axes are squeezed; a window takes part of a larger one: v[:, 0]")
  kept = tuple(n for d, n in enumerate(shape) if d not in axes)
  if not kept:
    raise E.KernelTypeError(
        f"ml.squeeze of {cx.named(x, 'a tensor')} {shape} leaves no axes: its one element is a scalar", cx.loc,
        hint="reduce it to a scalar instead: ml.max(v) (or ml.sum(v)) of a one-element tensor is its element")
  return reshape_(cx, x, kept)


@builtin
def split(cx, x, indices_or_sections=None, axis=0):
  """jnp.split of a register tensor: `ml.split(v, 2, axis=1)` (equal parts) or `ml.split(v, [32, 64],
  axis=-1)` (at those indices), a list of static windows; without sections, Triton's tl.split, the two
  halves of a last axis of 2: `a, b = ml.split(ml.join(a, b))`."""
  from .padded_tiles import true_shape
  from .shape import expand, reshape_
  x = _tensor(cx, x, "ml.split")
  shape = true_shape(cx.b, x)     # (a tile computed padded splits at its own size: the halves of a (3, 80) head tile)
  if indices_or_sections is None:
    if shape[-1] != 2:
      raise E.ShapeMismatchError(
          f"ml.split without sections is Triton's tl.split of a last axis of 2, but {cx.named(x, 'the tensor')}"
          f" has shape {shape}", cx.loc, hint="ml.split(v, 2, axis=-1) splits any axis into equal parts")
    rest = tuple(shape[:-1])
    from .padded_tiles import pair_part
    if (parts := [pair_part(cx, x, (Ellipsis, k)) for k in range(2)])[0] is not None and parts[1] is not None:
      return tuple(parts)     # (tl.split(tl.reshape(v, (h, d // 2, 2))) of a tile computed padded: v[..., k::2])
    return tuple(reshape_(cx, expand(cx, x, (slice(None),) * (len(shape) - 1) + (slice(k, k + 1),)), rest)
                 for k in range(2))
  axis = _axis(cx, axis, len(shape), "ml.split", "ml.split(v, 2, axis=1)")
  n = shape[axis]
  if _int(indices_or_sections):
    k = indices_or_sections
    if k < 1 or n % k:
      raise E.ShapeMismatchError(
          f"ml.split of axis {axis} of size {n} into {k} equal parts: {k} does not divide {n}", cx.loc,
          hint=f"give the indices to split at instead: ml.split(v, [{n // 2}], axis={axis})" if k > 1 else
          "ml.split(v, 2, axis=1)")
    cuts = [i * (n // k) for i in range(1, k)]
  elif isinstance(indices_or_sections, (tuple, list)) and all(_int(i) for i in indices_or_sections):
    cuts = [min(max(i + n if i < 0 else i, 0), n) for i in indices_or_sections]
  else:
    raise E.KernelTypeError(
        f"ml.split takes a static int of sections or a list of static indices, got {shown(indices_or_sections)}",
        cx.loc, hint="ml.split(v, [32, 64], axis=-1)")
  out = []
  for lo, hi in zip([0, *cuts], [*cuts, n]):
    hi = max(lo, hi)
    if hi == lo:
      raise E.ShapeMismatchError(
          f"ml.split at {list(indices_or_sections)}: the part [{lo}:{hi}] of axis {axis} is empty", cx.loc,
          hint="register tensors have at least one element: give increasing indices inside the axis")
    if lo == 0 and hi == n:
      out.append(x)
      continue
    index = tuple(slice(lo, hi) if d == axis else slice(None) for d in range(len(shape)))
    out.append(expand(cx, x, index))
  return out


@builtin(name="broadcast")
def tl_broadcast(cx, input, other):
  """Triton's `tl.broadcast(a, b)`: both operands broadcast to their common shape, as NumPy broadcasts them (`a +
  b` does it for arithmetic): the pair `(ml.broadcast_to(a, s), ml.broadcast_to(b, s))`. Session 60 (MG002 before,
  whose hint wrote the pair)."""
  from .padded_tiles import true_shape
  from .shape import broadcast_shape, broadcast_to
  for v in (input, other):
    check_register_value(cx, v, "ml.broadcast")
  shapes = [tuple(true_shape(cx.b, v)) if is_tensor(v) else () for v in (input, other)]
  shape = broadcast_shape(cx, shapes, "ml.broadcast", [cx.named(input, "a"), cx.named(other, "b")])
  return tuple(v if is_tensor(v) and tuple(v.type.shape) == shape else broadcast_to.rule(cx, v, shape)
               for v in (input, other))
