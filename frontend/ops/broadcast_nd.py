"""NumPy broadcasting into a 3-D (or higher) result, as a 2-D broadcast between two reshapes.

A register tile keeps its rows in fixed threads, so the layout pass broadcasts into 1-D and 2-D
tensors only (MG204). Where the stretched axes are the result's trailing ones (a per-group scale
`s[:, :, None]` of shape (r, g, 1) against a tile (r, g, c) of a group quantisation) or its leading
ones (a (g, c) tensor added to every (g, c) slice of an (r, g, c) tile), the broadcast is the 2-D one
of the axes merged: `x.reshape(r * g, 1)` stretched to (r * g, c), reshaped to (r, g, c), which the
compiler moves through SMEM as it does any reshape of a row-wise tile. Broadcasts built only from
`ml.arange`, constants and scalars (index grids, masks) are left as they are: frontend/index_grids.py
recomputes them at the result's shape.
"""
from __future__ import annotations

import math

from .. import hw, ir
from ..types import TensorType
from .elementwise import ELEMENTWISE_OPS, Arange, Cast, Full



def flattened_plan(src: tuple, dst: tuple, dims: tuple) -> tuple | None:
  """((2-D shape x is reshaped to), (2-D shape it is broadcast to)) for NumPy's broadcast of `src`
  to `dst` (trailing axes aligned: `dims`, the result axis of each of src's, says so) into a result
  of 3 or more axes whose stretched axes are all trailing or all leading; None for any other."""
  if len(dst) < 3 or len(src) > len(dst) or tuple(dims) != tuple(range(len(dst) - len(src), len(dst))):
    return None
  full = (1,) * (len(dst) - len(src)) + tuple(src)
  stretched = [k for k in range(len(dst)) if full[k] == 1 and dst[k] != 1]
  if not stretched:
    return None
  lo, hi = stretched[0], stretched[-1] + 1
  if any(full[k] != 1 for k in range(lo, hi)):
    return None                    # kept axes between stretched ones (a middle axis kept)
  if hi == len(dst):               # trailing: (r, g, 1) -> (r, g, c)
    rows, cols, src2 = math.prod(dst[:lo]), math.prod(dst[lo:]), (math.prod(dst[:lo]), 1)
  elif lo == 0:                    # leading: (g, c) -> (r, g, c)
    rows, cols, src2 = math.prod(dst[:hi]), math.prod(dst[hi:]), (1, math.prod(dst[hi:]))
  else:
    return None                    # a middle axis stretched: ml.concatenate's copies (the MG204 hint)
  if not hw.rows_fit(rows, cols):
    return None                    # (a 2-D tile no row-wise layout holds: the MG204 hint's copies)
  return src2, (rows, cols)


def unit_result_axes(src: tuple, dst: tuple, dims: tuple) -> tuple | None:
  """(src, dst, dims) of a broadcast into 3 or more axes without the result's size-1 axes (Triton's bitonic
  compare-and-swap stretches `ml.sum(y * m, 1)[:, None, :]` of a (1, 2, 64) `y`: (1, 1, 64) to (1, 2, 64) is
  (1, 64) to (2, 64)); None where the result has no size-1 axis, nothing would be left, or it holds no whole
  warpgroups (a small mask, (2, 8, 1), is recomputed at its tile's shape: ops/small_regrid.py)."""
  keep = [k for k in range(len(dst)) if dst[k] != 1]
  if len(dst) < 3 or len(keep) in (0, len(dst)) or math.prod(src) == math.prod(dst) or math.prod(dst) % hw.WARPGROUP:
    return None     # (inserting size-1 axes is a reshape's, which comes here; small masks are small_regrid's)
  src2 = tuple(n for n, d in zip(src, dims) if dst[d] != 1)
  return src2, tuple(dst[k] for k in keep), tuple(keep.index(d) for d in dims if dst[d] != 1)


def two_step_plan(src: tuple, dst: tuple, dims: tuple) -> tuple | None:
  """The shape between two broadcasts that flattened_plan takes, for one that stretches both a leading and a
  trailing run of axes around kept ones (a batch norm's (1, c, 1) statistic of an (n, c, w) tile: (1, c, w)
  first, then (n, c, w)); None for any other."""
  if len(dst) < 3 or len(src) > len(dst) or tuple(dims) != tuple(range(len(dst) - len(src), len(dst))):
    return None
  full = (1,) * (len(dst) - len(src)) + tuple(src)
  stretched = [k for k in range(len(dst)) if full[k] == 1 and dst[k] != 1]
  lead = 0
  while lead in stretched:
    lead += 1
  if not lead or lead == len(dst) or not all(k >= lead for k in stretched[lead:]):
    return None
  mid = tuple(1 if k < lead else n for k, n in enumerate(dst))
  if flattened_plan(src, mid, tuple(dims)) is not None and flattened_plan(mid, dst, tuple(range(len(dst)))) is not None:
    return mid
  # (the kept and trailing axes too few for a row-wise tile, a group norm's (1, 8, 1) statistic of a (64, 8, 8) tile
  # of 64 channels: the leading run first, (64, 8, 1), then the trailing one)
  trail = len(dst)
  while trail - 1 in stretched:
    trail -= 1
  mid = tuple(n if k < trail else 1 for k, n in enumerate(dst))
  if trail < len(dst) and flattened_plan(src, mid, tuple(dims)) is not None and flattened_plan(
      mid, dst, tuple(range(len(dst)))) is not None:
    return mid
  return None


def copied_axes(src: tuple, dst: tuple, dims: tuple) -> list | None:
  """The axes along which a broadcast into 3 or more axes that flattened_plan cannot take (a middle axis
  stretched: a per-head carry (h, 1, d) against an (h, t, d) chunk) is made of copies of the source,
  ml.concatenate([x] * n, axis=k) (through SMEM, as jnp.repeat's hint writes it), so that what is left
  stretches only trailing axes flattened_plan takes (or none); None where there is none to copy."""
  if len(dst) < 3 or len(src) > len(dst) or tuple(dims) != tuple(range(len(dst) - len(src), len(dst))):
    return None
  full = (1,) * (len(dst) - len(src)) + tuple(src)
  stretched = [k for k in range(len(dst)) if full[k] == 1 and dst[k] != 1]
  trail = len(dst)
  while trail - 1 in stretched:
    trail -= 1
  rest = tuple(dst[k] if k < trail else 1 for k in range(len(dst)))
  # (the trailing run is left to flattened_plan where its columns fill a warp; narrower, a nearest upsampling's
  # last axis of 2, `v[:, :, None, :, None]` of an NCHW (c, h, w) tile to (c, h, 2, w, 2), its (n, 2) broadcast of
  # the copies' reshape is a row statistic's reshape no layout takes: copied too, as an interleave; probe 46h)
  keep = trail < len(dst) and flattened_plan(rest, dst, tuple(range(len(dst)))) is not None and (
      math.prod(dst[trail:]) >= hw.WARP or not any(k < trail for k in stretched))
  copied = [k for k in stretched if k < trail or not keep]
  return copied or None


def trailing_first(src: tuple, dst: tuple, dims: tuple) -> tuple | None:
  """The shape between two broadcasts of a small `src` (too few elements to copy along a middle axis: the (2, 1, 8, 1)
  statistic over axes (1, 3) of a (2, 2, 8, 64) tile) whose stretched trailing axes flattened_plan takes first, so
  that what is left to copy holds whole warpgroups ((2, 1, 8, 64), then copied along axis 1); None for any other."""
  if not math.prod(src) % hw.WARPGROUP or tuple(dims) != tuple(range(len(dst) - len(src), len(dst))):
    return None
  full = (1,) * (len(dst) - len(src)) + tuple(src)
  trail = len(dst)
  while trail > 0 and full[trail - 1] == 1 and dst[trail - 1] != 1:
    trail -= 1
  mid = full[len(dst) - len(src):trail] + tuple(dst[trail:])
  if trail == len(dst) or math.prod(mid) % hw.WARPGROUP or flattened_plan(src, mid, tuple(range(len(mid)))) is None:
    return None
  return mid


def kept_last_plan(src: tuple, dst: tuple, dims: tuple) -> tuple | None:
  """(2-D shape x is reshaped to, 2-D shape it is broadcast to, the shape that is reshaped to, the permutation that
  moves its axes back) of a broadcast into 3 or more axes that no plan above holds the tiles of: axes stretched on
  both sides of kept ones (a batch norm's (1, 32, 1) statistic of a (2, 32, 2) tile: (1, 32) stretched to (4, 32),
  reshaped to (2, 2, 32), its axes permuted back to (2, 32, 2) through SMEM), or a stretch too short for rows (a
  (4, 16) tile copied twice along a leading or middle axis: (64, 1) stretched to (64, 2), permuted); probe 53a. None
  for any other, or where the result holds no whole warpgroups."""
  if len(dst) < 3 or len(src) > len(dst) or tuple(dims) != tuple(range(len(dst) - len(src), len(dst))) or \
      math.prod(dst) % hw.WARPGROUP:
    return None
  full = (1,) * (len(dst) - len(src)) + tuple(src)
  stretched = [k for k in range(len(dst)) if full[k] == 1 and dst[k] != 1]
  kept = [k for k in range(len(dst)) if k not in stretched]
  if not stretched or not kept:
    return None
  many, few = math.prod(dst[k] for k in stretched), math.prod(dst[k] for k in kept)
  # (the stretched axes first, the statistic a row; or, where its rows are too few (2 copies of a (4, 16) tile along
  # a leading or middle axis), the kept ones first, the source a column stretched along (64, 2))
  for order, src2, mid in ((stretched + kept, (1, few), (many, few)), (kept + stretched, (few, 1), (few, many))):
    if order != list(range(len(dst))) and hw.rows_fit(*mid):
      return src2, mid, tuple(dst[k] for k in order), tuple(order.index(d) for d in range(len(dst)))
  return None


def flattens(defining, x) -> bool:
  """Whether `x` can take the 2-D shape: a tensor of 1 or 2 axes, one of whole warpgroups' elements, or
  one made by inserting size-1 axes (`s[:, :, None]`, reshaped from its source); a small tensor of more
  axes read as it is (a (1, 1, 1, 32) bias) has no layout to reshape from (the MG204 hint's loops)."""
  from .shape import Broadcast, Reshape       # (shape.py imports this module)
  return (len(x.type.shape) <= 2 or math.prod(x.type.shape) % hw.WARPGROUP == 0
          or isinstance(defining(x), (Broadcast, Reshape))) and not index_only(defining, x)


def index_only(defining, v) -> bool:
  """Whether tensor `v` is computed from ml.arange, constants and scalars alone."""
  from .shape import Broadcast, Reshape       # (shape.py imports this module)
  todo, seen = [v], set()
  while todo:                                 # (iterative: an unrolled loop's chain can be long)
    x = todo.pop()
    if not isinstance(x, ir.Value) or not isinstance(x.type, TensorType) or x.id in seen:
      continue
    seen.add(x.id)
    d = defining(x)
    if isinstance(d, (Arange, Full)):
      continue
    if not isinstance(d, (*ELEMENTWISE_OPS, Broadcast, Reshape)):
      return False
    todo.extend(d.operands())
  return True


def through_small_reshape(cx, operands, make):
  """Elementwise math on 3-D (or wider) tensors too small for a register tensor of their shape (a keepdims
  statistic (4, 8, 1) of a (4, 8, 64) tile: 32 elements, frontend/ops/reduce.py) where every tensor operand
  is a reshape of a source of one shape (the (32,) vector the reduction gave): `make(operands, shape)` on
  the sources, reshaped back, so the result broadcasts against the tile as they do; None for any other."""
  from .shape import Reshape       # (shape.py imports this module)
  tensors = [x for x in operands if isinstance(x, ir.Value) and isinstance(x.type, TensorType)]
  if not tensors:
    return None
  shape = tensors[0].type.shape
  if any(x.id in cx.b.spread for x in tensors) and all(x.id in cx.b.spread or _fill(cx, x, shape) or _stretched(
      cx, x) for x in tensors):
    # (small middle-axis statistics, and fills of their shape or broadcasts into it: on their spread tiles too)
    from .spread import along
    return along(cx, operands, make(operands, shape), make)
  if not small_shape(shape):
    return None
  made = [small_source(cx.b.defining, x) for x in tensors]
  known = [m for m in made if m is not None]
  if not known or any(m.type.shape != known[0].type.shape for m in known) or any(x.type.shape != shape for x in tensors):
    return None
  flat = {}
  if any(m is None and _fill(cx, x, shape) is None for m, x in zip(made, tensors)):
    # (an index grid or a broadcast meeting a small tensor held as a vector: at its elements, ops/small_flat.py)
    from .small_flat import flat_values
    if len(known[0].type.shape) != 1 or known[0].type.shape[0] != math.prod(shape):
      return None
    for m, x in zip(made, tensors):
      if m is None and _fill(cx, x, shape) is None:
        flat[x.id] = flat_values(cx, x)
        if flat[x.id] is None:
          return None
  sources = [(flat.get(x.id) or small_source(cx.b.defining, x) or _full_as(cx, x, known[0].type.shape))
             if isinstance(x, ir.Value) and isinstance(x.type, TensorType) else x for x in operands]
  made = known
  r = make(sources, made[0].type.shape)
  out = cx.b.emit(Reshape, r, loc=cx.loc, types=[TensorType(shape, r.type.dtype)], names=[r.name]).result
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is not None and (owns := [pads[x.id] for x in tensors if x.id in pads]):
    pads[out.id] = tuple(min(n) for n in zip(*owns))     # (a padded statistic's math, `ml.exp(x[...].sum(axis=2))`: still padded)
  return out


def _stretched(cx, x) -> bool:
  """Whether `x` is a broadcast of a smaller tensor or an index grid (ops/small_regrid.at_spread takes them)."""
  from .shape import Broadcast       # (shape.py imports this module)
  o = cx.b.defining(x)
  return isinstance(o, Broadcast) and math.prod(o.x.type.shape) < math.prod(x.type.shape) or index_only(cx.b.defining, x)


def _fill(cx, x, shape):
  """The fill op making `x`, a tensor of the small shape filled with one value (`ml.full((2, 8, 1), -jnp.inf)`
  meeting a statistic of that shape); else None."""
  o = cx.b.defining(x)
  return o if isinstance(o, Full) and tuple(x.type.shape) == tuple(shape) else None


def _full_as(cx, x, source):
  """The fill `x` (see _fill) at the source's shape."""
  from .elementwise import full_
  return full_(cx, tuple(source), cx.b.defining(x).value, x.type.dtype)


def small_cast(cx, x, dtype, **kw):
  """`x` converted (`bitcast=True`: reinterpreted) to `dtype` where it is a small statistic's reshape
  (`ml.max(v, axis=2, keepdims=True).astype(jnp.bfloat16)` of a (4, 8, 64) tile), as through_small_reshape; else None."""
  return through_small_reshape(cx, (x,), lambda o, s: cx.b.emit(
      Cast, *o, loc=cx.loc, types=[TensorType(s, dtype)], names=[cx.name], **kw).result)


def small_shape(shape) -> bool:
  """Whether a tensor of `shape` is too small for a register tensor of its shape though a vector holds it: fewer (or
  not a multiple of) 128 elements over 3 or more axes, or over 2 of which neither is 1 (a (4, 8) statistic; an (n, 1)
  column is a vector with an axis inserted, which register tensors take)."""
  return bool(math.prod(shape) % hw.WARPGROUP) and (len(shape) >= 3 or len(shape) == 2 and 1 not in shape)


def small_source(defining, x):
  """The tensor `x` reshapes, where `x` is made by a Reshape or by a Broadcast that only inserts size-1
  axes (the (4, 1, 1) statistic of ml.var over axes (1, 2) of a (4, 16, 32) tile is its (4,) vector with
  two axes inserted; not an index grid's, `ml.arange(4)[:, None, None]`, which frontend/index_grids.py recomputes at
  the shape it meets); None for any other."""
  from .shape import Broadcast, Reshape       # (shape.py imports this module)
  m = defining(x)
  if isinstance(m, Reshape) or (isinstance(m, Broadcast) and math.prod(m.x.type.shape) == math.prod(x.type.shape)
                                 and not index_only(defining, x)):
    src = m.x       # (a small statistic reshaped again, m[..., None] of a (4, 8) one: the vector at its root)
    deeper = small_source(defining, src) if small_shape(src.type.shape) else None
    return deeper if deeper is not None else src
  return None


def index_small(cx, x, idx):
  """`m[i]`, `m[i, j]`, `m[a:b]` (indices normalised by index_through_smem: static ones in range, run-time ones
  clamped) of a small statistic (a (4, 8, 1) keepdims max of a (4, 8, 64) tile: the (32,) vector of its 2-D
  reshape's rows typed with its shape, frontend/ops/reduce.py), which no register tensor of its shape holds to
  store: the same elements of that vector, a run of its row-major order, read through SMEM as a vector's are,
  given the index's shape. None where x is no such statistic; an error naming x where the index picks elements
  that are no run (m[:, 2])."""
  from .. import errors as E
  from . import elementwise as ew
  from .memory import DSlice
  from .shape import Reshape, index_through_smem, reshape_
  shape = tuple(x.type.shape)
  from .few_stats import involves
  if small_shape(shape) and involves(cx.b, x) and len(idx) <= len(shape):   # (held as scalars: ops/small_parts.py)
    from .small_parts import pick
    return pick(cx, x, tuple(idx) + tuple(slice(0, n) for n in shape[len(idx):]))
  src = small_source(cx.b.defining, x) if small_shape(shape) else None
  if src is None or len(src.type.shape) != 1 or len(idx) > len(shape):
    return None
  idx = tuple(idx) + tuple(slice(0, n) for n in shape[len(idx):])
  k = next((d for d, i in enumerate(idx) if isinstance(i, slice)), len(idx))     # the first axis a slice keeps
  if any(isinstance(i, slice) and i.indices(n)[:2] != (0, n) and n != 1 or not isinstance(i, slice) and n != 1
         for i, n in zip(idx[k + 1:], shape[k + 1:])):
    from .small_parts import pick
    if (picked := pick(cx, x, idx)) is not None:      # (static indices: each element a scalar, assembled)
      return picked
    name = cx.named(x, "the statistic")
    e = E.LayoutError(
        f"{cx.text or name + '[...]'} picks elements of {name} {shape} that are no run of its row-major order:"
        f" {name} has {math.prod(shape)} elements, too few for a register tensor of its shape (a multiple of"
        f" {hw.WARPGROUP}), and is held as a vector of them, which only a run of indices reads", cx.loc,
        hint=f"store it whole as the vector it is: give the output the shape ({math.prod(shape)},) and write"
             f" out[...] = {name if name.isidentifier() else '(' + name + ')'}.reshape({math.prod(shape)}), then"
             f" index the result outside the kernel, .reshape{shape}{_index_text(cx.text)} (free in XLA)")
    e.held_vector = True     # (a small window read whole: compile.trace reports it at the read, as a tile)
    raise e
  strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
  parts = [(i, s) for i, s in zip(idx[:k], strides)] + ([(idx[k].start, strides[k])] if k < len(shape) else [])
  off = 0
  for i, s in parts:
    term = i * s if isinstance(i, int) else ew.binary(cx, ew.BinOp.MUL, i, s) if s != 1 else i
    off = term if isinstance(off, int) and off == 0 else (off + term if isinstance(off, int) and isinstance(term, int)
                                                         else ew.binary(cx, ew.BinOp.ADD, off, term))
  size = (idx[k].stop - idx[k].start) * strides[k] if k < len(shape) else 1
  out = tuple(i.stop - i.start for i in idx if isinstance(i, slice))
  if size > 1 and size % 8:        # (a run no vector holds, `seg[0, 2:6]`: its elements, ops/small_parts.py)
    from .small_parts import pick
    if (picked := pick(cx, x, idx)) is not None:
      return picked
  if size == 1:                    # one element: its scalar (stretched to a (1, 1) index's shape)
    one = index_through_smem(cx, src, (off,))
    return ew.stretch(cx, out, one) if out else one
  if size == math.prod(shape):
    vec = src
  else:
    vec = index_through_smem(cx, src, (slice(off, off + size) if isinstance(off, int) else DSlice(off, size),))
  if len(out) <= 1:
    return vec
  if len(out) >= 3 and math.prod(out) % hw.WARPGROUP:
    return cx.b.emit(Reshape, vec, loc=cx.loc, types=[TensorType(out, vec.type.dtype)], names=[cx.name]).result
  return reshape_(cx, vec, out)


def _index_text(text) -> str:
  """The subscript of the user's `m[:, 2]` (`[:, 2]`), to apply outside the kernel; '' where there is none."""
  k = (text or "").find("[")
  return text[k:] if k > 0 and text.endswith("]") else ""
