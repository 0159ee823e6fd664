"""ml.concatenate of padded tiles (frontend/ops/padded_tiles.py's padded trace): parts padded alike on the other
axes joined with their padding kept; parts padded along the joined axis widened, rolled to their place and
selected in (probe 46j; fills no register tensor holds, probe 47a)."""
from __future__ import annotations

from .. import hw
from ..dtypes import DType
from ..types import TensorType, resolve
from .padded_tiles import PadAbort, WideVectors, _holds, _up, allowed


def padded_concatenate(cx, xs, axis, redo):
  """`ml.concatenate(xs, axis)` where some part is padded (the rotated halves of a padded tile of heads): `redo()`
  with the padding kept, where every part is padded alike on the other axes and none along `axis`; None where no
  part is padded. Any other join ends the padded trace."""
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or not all(isinstance(getattr(x, "type", None), TensorType)
                                                           for x in xs):
    return None
  owns = [pads.get(x.id, tuple(x.type.shape)) for x in xs]
  if not any(x.id in pads for x in xs) and (len({len(o) for o in owns}) != 1 or _holds(_sum_along(owns, axis))):
    return None                 # (no part padded, and the join holds: the plain one)
  if any(tuple(n for k, n in enumerate(o) if k != axis) != tuple(n for k, n in enumerate(owns[0]) if k != axis)
         for o in owns):
    raise PadAbort("concatenate")
  if any(o[axis] != x.type.shape[axis] for o, x in zip(owns, xs)) or not _holds(_sum_along(owns, axis)) and \
      not any(x.id in pads for x in xs) or len({tuple(u for k, u in enumerate(x.type.shape) if k != axis)
                                                for x in xs}) > 1 or not _holds(_sum_along(
                                                    [tuple(x.type.shape) for x in xs], axis)):   # ((104, 2): 49e)
    if (rows := _stacked_rows(cx, xs, owns, axis)) is not None:
      return rows
    return _joined_along_padding(cx, xs, owns, axis)   # (since probe 47a also a join no register tensor holds of
  with allowed(cx):
    out = redo()
  own = list(owns[0])
  own[axis] = sum(o[axis] for o in owns)
  pads[out.id] = tuple(own)
  return out


def _stacked_rows(cx, xs, owns, axis):
  """`ml.stack(rows)` (`ml.concatenate` along axis 0 of (1, u) rows) of padded vectors of one own length n, a few
  heads' scores over a KV cache of a few tokens (`jnp.stack([jnp.sum(q[h][None, :] * k[:, h, :], -1) for h in
  range(H)])`, (6,) each held as (8,)): the rows widened with zeros to whole warps and selected into a tile of rows a
  multiple of 4, recorded padded with the own (k, n) (probe 59b: the join no register tensor holds, (2, 8), ended the
  padded trace). None for any other join."""
  from .elementwise import CmpOp, compare, full_, where_
  from .elementwise_fns import arange
  from .shape import concatenate, expand, reshape_
  pads = cx.b.pad_tiles
  if axis != 0 or any(len(x.type.shape) != 2 or x.type.shape[0] != 1 or x.id not in pads for x in xs):
    return None
  us, ns, d = {x.type.shape[1] for x in xs}, {o[1] for o in owns}, resolve(xs[0].type.dtype)
  if len(us) != 1 or len(ns) != 1 or any(o[0] != 1 for o in owns) or not isinstance(d, DType) or any(
      resolve(x.type.dtype) != d for x in xs):
    return None
  u, n, k = us.pop(), ns.pop(), len(xs)
  cols, rows = -(-u // hw.WARP) * hw.WARP, -(-k // 4) * 4
  if not _holds((rows, cols)) or u % 8 or (cols - u) % 8 or k > 64:
    return None
  with allowed(cx):
    grown = []
    for x in xs:
      flat = reshape_(cx, x, (u,))
      if cols > u:
        flat = concatenate.rule(cx, [flat, full_(cx, (cols - u,), 0, x.type.dtype)], 0)
      grown.append(reshape_(cx, flat, (1, cols)))
    at = expand(cx, arange.rule(cx, rows), (slice(None), None))
    out = full_(cx, (rows, cols), 0, xs[0].type.dtype)
    for i, r in enumerate(grown):
      out = where_(cx, compare(cx, CmpOp.EQ, at, i), r, out)
  pads[out.id] = (k, n)
  return out


def _sum_along(owns, axis):
  """The shape of parts of shapes `owns` joined along `axis`."""
  return tuple(sum(o[axis] for o in owns) if k == axis else n for k, n in enumerate(owns[0]))


def _joined_along_padding(cx, xs, owns, axis):
  """ml.concatenate(xs, axis) where a part is padded along `axis` (`[ml.zeros((1,)), cs]`, `[s[...], x[...]]` of
  (3, 64) and (5, 64) tiles read padded): each part widened along the axis to the result's padded length (zeros
  after it), rolled to its start, and selected in by index there; the parts padded alike on the other axes
  (probe 46j)."""
  from .elementwise import Full, full_
  from .roll import _select_range, roll_tensor
  from .shape import broadcast_to_shape, concatenate
  pads, wide = cx.b.pad_tiles, isinstance(cx.b.pad_tiles, WideVectors)
  ref = next((x for x in xs if not isinstance(cx.b.defining(x), Full) or x.id in pads), xs[0])
  made = []
  for x in xs:              # (fills no register tensor holds, or not padded as the others are: remade so, probe 47a)
    f, other = cx.b.defining(x), tuple(u if k != axis else x.type.shape[axis] for k, u in enumerate(ref.type.shape))
    if isinstance(f, Full) and x.id not in pads and (not _holds(x.type.shape) or tuple(x.type.shape) != other):
      n = x.type.shape[axis]
      w = next((w for w in range(n, n + hw.WARPGROUP + 1) if _holds(tuple(w if k == axis else u for k, u in
                                                                         enumerate(other)))), None)
      if w is None:
        raise PadAbort("concatenate")
      with allowed(cx):
        x = full_(cx, tuple(w if k == axis else u for k, u in enumerate(other)), f.value, x.type.dtype)
    made.append(x)
  xs = made
  ups = [tuple(x.type.shape) for x in xs]
  d = resolve(xs[0].type.dtype)
  if not isinstance(d, DType) or any(resolve(x.type.dtype) != d for x in xs) or len({len(u) for u in ups}) != 1:
    raise PadAbort("concatenate")
  own = _sum_along(owns, axis)
  shape = own if _holds(own) else _up(own, d, wide)
  shape = tuple(n if k == axis else max([n] + [u[k] for u in ups]) for k, n in enumerate(shape))
  if not _holds(shape):
    raise PadAbort("concatenate")
  out, at = None, 0
  total = shape[axis]
  with allowed(cx):
    for x, o in zip(xs, owns):
      for k, n in enumerate(shape):   # (parts padded less on the other axes: grown there, probe 47a)
        if k != axis and x.type.shape[k] < n:
          rest = tuple(n - m if j == k else m for j, m in enumerate(x.type.shape))
          if not _holds(rest):
            raise PadAbort("concatenate")
          x = concatenate.rule(cx, [x, full_(cx, rest, 0, x.type.dtype)], k)
      u = x.type.shape[axis]
      if u > total and o[axis] <= total and axis == len(shape) - 1 == 1:
        from .permute import restride_tensor    # (a part held past the result's width, (16, 32) of a (12, 12)
        x, u = restride_tensor(cx, x, (x.type.shape[0], total), 0, (u, 1)), total   # padded to 16 columns: its own
                                                                                     # columns, probe 56a)
      if u == o[axis] == 1 < total and axis == len(shape) - 1:   # (a column, `i[:, None]` of jnp.argwhere's (40, 2)
        x = broadcast_to_shape(cx, x, shape)                      # coordinates: stretched, selected in at its place)
        out = x if out is None else _select_range(cx, shape, axis, at, at + 1, x, out)
        at += 1
        continue
      if u < total:
        rest = tuple(total - u if k == axis else n for k, n in enumerate(shape))
        if not _holds(rest):
          raise PadAbort("concatenate")
        x = concatenate.rule(cx, [x, full_(cx, rest, 0, x.type.dtype)], axis)
      x = roll_tensor(cx, x, at, axis, "") if at else x
      out = x if out is None else _select_range(cx, shape, axis, at, at + o[axis], x, out)
      at += o[axis]
  if own != shape:
    cx.b.pad_tiles[out.id] = own
  return out
