"""Padded values of the padded trace of odd reads (ops/padded_tiles.py) meeting others (probe 47a): operands
padded to different lengths along an axis grown to meet, a padded statistic stretched by a reshape recorded padded,
and strided slices of padded values (or with results no register tensor holds) taken padded."""
from __future__ import annotations

import math

from .. import hw
from ..dtypes import DType
from ..types import TensorType, resolve
from .padded_tiles import PadAbort, _holds, _up, allowed


def stretched(cx, operands, broadcast, shape):
  """Record as padded each of `broadcast` (the operands broadcast to `shape`) whose operand is padded but which no
  Broadcast op made (a keepdims statistic of a padded 3-D tile, the vector of its rows typed (3, 8, 1), stretched
  along its last axis by a reshape of the vector's broadcast): its own shape is the operand's, with the stretched
  axes whole (probe 47a; it met the padded tile unrecorded and ended the padded trace)."""
  pads = cx.b.pad_tiles
  for x, y in zip(operands, broadcast):
    if getattr(x, "id", None) not in pads or y is x or getattr(y, "id", None) in pads:
      continue
    own, src = pads[x.id], tuple(x.type.shape)
    lead = len(shape) - len(src)
    pads[y.id] = tuple(n if k < lead or src[k - lead] == 1 and n != 1 else own[k - lead] for k, n in enumerate(shape))


def widen_rows(cx, operands):
  """The operands of an elementwise op where one is padded, each grown with zeros along the axes where another is
  padded longer with the same own length, so that they meet: an unpadded vector as long as the padded one's own
  length along an axis (`w[None, :]`, an RMSNorm's (360,) weight beside a (3, 360) tile padded to (4, 384); a (40,)
  row of cos beside the half of a padded tile of heads; probe 46j), and since probe 47a a padded one padded shorter
  (a (45,) bias read padded to 48 beside a (3, 45) tile padded to (4, 64); a tile's 3 rows padded to 4 beside a
  (3,) column scale padded to 8): recorded padded with its own shape. The operands as they are otherwise."""
  pads = cx.b.pad_tiles
  if getattr(cx.b, "pad_ok", 0):
    return operands
  tensors = [x for x in operands if isinstance(getattr(x, "type", None), TensorType)]
  if not any(x.id in pads for x in tensors):
    return operands
  rank = max(len(x.type.shape) for x in tensors)
  target = {}          # result axis -> (own length, the longest padded length of an operand padded along it)
  for x in tensors:
    if x.id not in pads:
      continue
    lead = rank - len(x.type.shape)
    for k, (n, u) in enumerate(zip(pads[x.id], x.type.shape)):
      if u != 1 and n != u:
        own, best = target.get(lead + k, (n, u))
        target[lead + k] = (own, max(best, u)) if own == n else (own, best)
  if not target:
    return operands
  out = []
  for x in operands:
    if not isinstance(getattr(x, "type", None), TensorType):
      out.append(x)
      continue
    out.append(_grown(cx, x, rank, target))
  return _cut_to_unpadded(cx, tuple(out), rank, target)


def widen_to_hold(cx, operands):
  """The 2-D operands of an elementwise op whose result no row-wise layout holds (an outer product of a (5,) and a
  (24,) vector, `a[:, None] * b[None, :]`: (5, 24), or (8, 24), (100, 24)), each grown with zeros to rows a multiple
  of 4 and columns of 32 along the axes it spans, recorded padded with its own shape, so that the result is computed
  padded (probe 53a; it was MG204); the operands as they are otherwise."""
  pads = cx.b.pad_tiles
  tensors = [x for x in operands if isinstance(getattr(x, "type", None), TensorType)]
  if getattr(cx.b, "pad_ok", 0) or len(tensors) < 2 or any(len(x.type.shape) != 2 for x in tensors):
    return operands
  shape = tuple(max(x.type.shape[a] for x in tensors) for a in range(2))
  if min(shape) == 1 or hw.rows_fit(*shape) or any(x.type.shape[a] not in (1, shape[a]) for x in tensors for a in (0, 1)):
    return operands
  target = {}
  for a, m in ((0, 4), (1, hw.WARP)):
    owns = {tuple(pads.get(x.id, x.type.shape))[a] for x in tensors if x.type.shape[a] != 1}
    if len(owns) != 1:
      return operands
    if shape[a] % m:
      target[a] = (owns.pop(), -(-shape[a] // m) * m)
  out = tuple(_grown(cx, x, 2, target) if isinstance(getattr(x, "type", None), TensorType) else x for x in operands)
  if any(x.type.shape[a] not in (1, target[a][1]) for x in out if isinstance(getattr(x, "type", None), TensorType)
         for a in target):
    return operands           # (an operand registers could not grow: it fails as it did)
  return out


def _cut_to_unpadded(cx, operands, rank, target):
  """The operands with each padded one cut along an axis where another operand of the same own length could not be
  grown to its length, to the shortest such length (a (4,) running max filled padded to 8 beside the (4,) row
  maxima of a (4, 16) score tile padded to (4, 32), or a (3,) one padded to 8 beside the maxima of 3 rows padded to
  4: a statistic of a tile's rows is a vector of that tile's rows, which no zeros lengthen; probe 48a): `x[:n]`
  along it, through SMEM, recorded padded with its own shape where it still is."""
  from .shape import index_through_smem
  pads = cx.b.pad_tiles
  cut = {}
  for x in operands:
    if isinstance(getattr(x, "type", None), TensorType):
      lead, mine = rank - len(x.type.shape), tuple(pads.get(x.id, x.type.shape))
      for k, (n, u) in enumerate(zip(mine, x.type.shape)):
        if lead + k in target and target[lead + k][0] == n and u != 1:
          cut.setdefault(lead + k, set()).add(u)
  cut = {k: min(us) for k, us in cut.items() if len(us) > 1}
  if not cut:
    return operands
  out = []
  for x in operands:
    if getattr(x, "id", None) not in pads:
      out.append(x)
      continue
    own, up, lead = pads[x.id], tuple(x.type.shape), rank - len(x.type.shape)
    axes = {k: cut[lead + k] for k, (n, u) in enumerate(zip(own, up)) if lead + k in cut and n == target[lead + k][0]
            and u > cut[lead + k]}
    if not axes:
      out.append(x)
      continue
    with allowed(cx):
      y = index_through_smem(cx, x, tuple(slice(0, axes[k]) if k in axes else slice(None) for k in range(len(up))))
    if tuple(own) != tuple(y.type.shape):
      pads[y.id] = tuple(own)
    out.append(y)
  return tuple(out)


def _grown(cx, x, rank, target):
  """`x` grown with zeros to the padded lengths of `target` (result axis -> (own, padded)) along the axes where its
  own length is that own one and it is shorter, recorded padded with its own shape; x itself where none is, or
  where a part of zeros registers cannot hold would be needed."""
  from .elementwise import full_
  from .shape import concatenate, reshape_
  pads, shape = cx.b.pad_tiles, tuple(x.type.shape)
  lead, mine = rank - len(shape), tuple(cx.b.pad_tiles.get(x.id, shape))
  d = resolve(x.type.dtype)
  grow = {k: target[lead + k][1] for k, (n, u) in enumerate(zip(mine, shape))
          if lead + k in target and target[lead + k][0] == n and u < target[lead + k][1] and u != 1}
  if not grow or not isinstance(d, DType):
    return x
  if x.id not in pads and any(u % 8 for u in shape if u != 1):
    y = _index_grown(cx, x, tuple(grow.get(k, u) for k, u in enumerate(shape)))
    if y is None and len(grow) == 1 and sum(u != 1 for u in shape) == 1:
      k = next(iter(grow))    # (a statistic of 12 rows beside a tile of 32 columns: gathered longer, probe 72a)
      with allowed(cx):
        flat = x if len(shape) == 1 else reshape_(cx, x, (shape[k],))
        if (wide := _gathered_longer(cx, flat, grow[k])) is not None:
          new = tuple(grow[k] if j == k else 1 for j in range(len(shape)))
          y = reshape_(cx, wide, new) if len(new) > 1 else wide
    if y is not None:         # (an index grid, `ks[None, :] == j` of a (1, 2) top-k slot mask: made at the padded
      pads[y.id] = mine       # width, its padding whatever the grid is there; probe 52e)
    return x if y is None else y          # (another unpadded operand registers cannot hold: it fails as it did)
  axes = [k for k, u in enumerate(shape) if u != 1]
  with allowed(cx):
    if len(axes) == 1:        # (a vector, in any rank: grown flat, then its axes put back)
      k = axes[0]
      flat = x if len(shape) == 1 else reshape_(cx, x, (shape[k],))
      if (grow[k] - shape[k]) % 8:
        wide = _gathered_longer(cx, flat, grow[k])
        if wide is None:
          return x
      else:
        wide = concatenate.rule(cx, [flat, full_(cx, (grow[k] - shape[k],), 0, x.type.dtype)], 0)
      new = tuple(grow[k] if j == k else 1 for j in range(len(shape)))
      y = reshape_(cx, wide, new) if len(new) > 1 else wide
    else:
      y = x
      for k, u in grow.items():
        rest = tuple(u - n if j == k else n for j, n in enumerate(y.type.shape))
        if not _holds(rest):
          return x
        y = concatenate.rule(cx, [y, full_(cx, rest, 0, x.type.dtype)], k)
  pads[y.id] = mine
  return y


def _gathered_longer(cx, flat, n):
  """A padded vector lengthened to `n` where no part of zeros registers hold makes up the difference (a (12,) row
  statistic of a (9, 9) tile padded to (12, 32) beside the tile's 32 columns: 20 more): its elements gathered at
  min(i, len - 1), through SMEM, the new lanes padding as the old ones are (probe 72a: the tile was cut to (12, 12)
  instead, which no layout holds, and the padded trace of an HMM's backward pass ended). None where the gather does
  not take it."""
  from .. import errors as E
  from .elementwise import BinOp, binary
  from .elementwise_fns import arange
  from .register_gather import register_gather
  last = flat.type.shape[0] - 1
  try:
    pos = binary(cx, BinOp.MIN, arange.rule(cx, n), last)
    return register_gather(cx, flat, (pos,))
  except (E.KernelError, PadAbort):      # (a gather it does not take: the operands stay as they are)
    return None


def _index_grown(cx, v, shape, depth=0):
  """`v`, a tensor of aranges, fills, numbers and scalars (elementwise math, comparisons and broadcasts of them),
  made again at the longer `shape` (its aranges run on); None where v is made otherwise."""
  from .elementwise import Arange, Binary, Compare, Full, binary, compare, full_
  from .shape import Broadcast, broadcast_to_shape
  if not isinstance(getattr(v, "type", None), TensorType):
    return v
  o, d = cx.b.defining(v), v.type.dtype
  if depth > 16 or v.id in cx.b.pad_tiles:
    return None
  if isinstance(o, Arange):
    return cx.b.emit(Arange, o.dim, loc=cx.loc, types=[TensorType(shape, d)], names=[""]).result
  if isinstance(o, Full) and isinstance(o.value, (int, float, bool)):
    return full_(cx, shape, o.value, d)
  if isinstance(o, Broadcast):
    src = tuple(o.x.type.shape)
    y = _index_grown(cx, o.x, tuple(shape[k] if n == v.type.shape[k] else n for n, k in zip(src, o.dims)), depth + 1)
    return None if y is None else broadcast_to_shape(cx, y, shape, o.dims)
  if isinstance(o, (Binary, Compare)):
    a, b = (_index_grown(cx, x, shape, depth + 1) for x in (o.lhs, o.rhs))
    if a is None or b is None:
      return None
    return binary(cx, o.kind, a, b) if isinstance(o, Binary) else compare(cx, o.kind, a, b)
  return None


def padded_steps(cx, x, index, redo):
  """`x[lo:hi:k]` along one axis (the others whole) in a padded trace, of a padded `x` or of one whose result no
  register tensor holds (`x[...][::2]` of a (100,) read padded to 104: 50 elements; `v[::2]` of a (1000,) vector:
  500): x grown with zeros along the axis to hold the window of whole steps of the result padded (`_up`), sliced
  there by `redo(grown, index)` (the plain strided slice), and recorded padded with the result's own length, which
  takes only x's own elements (probe 47a; it was MG204). None where it is no such slice or the plain one holds."""
  pads = getattr(cx.b, "pad_tiles", None)
  t = getattr(x, "type", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or not isinstance(t, TensorType) or not isinstance(
      resolve(t.dtype), DType) or not isinstance(index, (tuple, list, slice)):
    return None
  shape = tuple(t.shape)
  index = list(index) if isinstance(index, (tuple, list)) else [index]
  if index.count(Ellipsis) == 1:          # (`v[..., 0::2]`: GPT-J RoPE's pairs, probe 49a)
    k = index.index(Ellipsis)
    index[k:k + 1] = [slice(None)] * (len(shape) - len(index) + 1)
  index += [slice(None)] * (len(shape) - len(index))
  if len(index) != len(shape) or not all(isinstance(i, slice) and all(
      v is None or isinstance(v, int) and not isinstance(v, bool) for v in (i.start, i.stop, i.step)) for i in index):
    return None
  steps = [a for a, i in enumerate(index) if i.step not in (None, 1)]
  if len(steps) != 1 or any(i != slice(None) for a, i in enumerate(index) if a != steps[0]):
    return None
  a = steps[0]
  own = pads.get(x.id, shape)
  lo, hi, k = index[a].indices(own[a])
  m = len(range(lo, hi, k))
  res_own = tuple(m if j == a else n for j, n in enumerate(own))
  if k < 2 or m < 1 or x.id not in pads and _holds(res_own):
    return None
  up = next((w for w in range(m, m + hw.WARPGROUP + 1)
             if _holds(tuple(w if j == a else n for j, n in enumerate(shape)))), None)
  if up is None:
    return None
  need, u = lo + k * up, shape[a]
  grow = next((g for g in range(max(need, u), max(need, u) + hw.WARPGROUP + 1) if g == u or _holds(
      tuple(g - u if j == a else n for j, n in enumerate(shape))) and _holds(
      tuple(g if j == a else n for j, n in enumerate(shape)))), None)
  if grow is None:
    return None
  from .elementwise import full_
  from .shape import concatenate
  with allowed(cx):
    y = x if grow == u else concatenate.rule(cx, [x, full_(cx, tuple(grow - u if j == a else n for j, n in
                                                                      enumerate(shape)), 0, t.dtype)], a)
    out = redo(y, tuple(slice(lo, lo + k * up, k) if j == a else slice(None) for j in range(len(shape))))
  want = tuple(up if j == a else n for j, n in enumerate(shape))
  if out is None or tuple(getattr(out.type, "shape", ())) != want:
    raise PadAbort("strided")
  if res_own != want:
    pads[out.id] = res_own
  return out


def carried(b, inits, values) -> None:
  """Record `values` (a run-time loop's block arguments, or its results) padded as the `inits` they carry are (an
  accumulator `ml.zeros((45,))` beside the padded (45,) rows it sums: probe 47a; a padded carry ended the padded
  trace)."""
  pads = getattr(b, "pad_tiles", None)
  if pads is None:
    return
  for init, v in zip(inits, values):
    if getattr(init, "id", None) in pads:
      pads[v.id] = pads[init.id]


class carrying:
  """A loop (or its Yield, `yields`) emitted with padded carries: each yielded value must be padded as its init is
  (the same own shape; a PadAbort otherwise: the padding would meet the real part in the next trip)."""
  def __init__(self, b, inits, yields=None):
    self.b, self.inits, self.yields = b, inits, yields

  def __enter__(self):
    pads = getattr(self.b, "pad_tiles", None)
    if pads is None:
      return
    own = lambda v: tuple(pads.get(v.id, getattr(v.type, "shape", ()))) if hasattr(v, "id") else None
    for init, y in zip(self.inits, self.yields or ()):
      if (getattr(init, "id", None) in pads or getattr(y, "id", None) in pads) and own(init) != own(y):
        raise PadAbort("carry")
    self.b.pad_ok = getattr(self.b, "pad_ok", 0) + 1

  def __exit__(self, *a):
    if getattr(self.b, "pad_tiles", None) is not None:
      self.b.pad_ok -= 1


def flattened(cx, x, own, up, redo):
  """`x.reshape(-1)` of a padded 2-D `x` of own shape `own` held in `up` (redo(shape): the plain reshape): where
  only its rows are padded, the padded reshape (the padding, after the last row, stays at the end); else its rows
  joined along the flat axis as a padded ml.concatenate joins them (one row through SMEM each, so up to 64 rows:
  `x[...].reshape(-1)` of a (7, 33) read, padded to (8, 64): 231 elements, padded to 232; probe 47a)."""
  from .padded_joins import _joined_along_padding
  from .padded_tiles import _up
  from .shape import index_through_smem
  pads, n = cx.b.pad_tiles, math.prod(own)
  if own[1] == up[1]:
    with allowed(cx):
      out = redo((math.prod(up),))
    pads[out.id] = (n,)
    return out
  if own[0] > 64:       # (more rows: each flat element gathered from its row and column, one pass through SMEM)
    return _flat_gather(cx, x, own, up)
  rows = [index_through_smem(cx, x, (r, slice(None))) for r in range(own[0])]
  if own[0] == 1:
    return rows[0]
  out = _joined_along_padding(cx, rows, [(own[1],)] * own[0], 0)
  if tuple(out.type.shape) != (n,) and tuple(out.type.shape) != _up((n,), resolve(x.type.dtype)):
    raise PadAbort("reshape")
  return out


def _flat_gather(cx, x, own, up):
  """`x.reshape(-1)` of a padded 2-D `x` whose columns are padded, of more rows than flattened joins one by one (a
  router's (100, 2) top-2 experts, flattened to sort the 200 (token, slot) pairs; probe 49e): element k of the flat
  vector is x's (k // c, k % c), gathered through SMEM (register_gather.gather_positions); its padding repeats the
  last element."""
  from .elementwise import Arange, BinOp, binary
  from .padded_tiles import _up
  from .register_gather import gather_positions
  n, c = math.prod(own), own[1]
  with allowed(cx):
    k = cx.b.emit(Arange, 0, loc=cx.loc, types=[TensorType(_up((n,), resolve(x.type.dtype)), DType.i32)]).result
    k = binary(cx, BinOp.MIN, k, n - 1)
    pos = binary(cx, BinOp.ADD, binary(cx, BinOp.MUL, binary(cx, BinOp.FLOORDIV, k, c), up[1]),
                 binary(cx, BinOp.MOD, k, c))
    out = gather_positions(cx, x, pos, x.name or "")
  if tuple(out.type.shape) != (n,):       # (200 elements are a vector of their own: not padded)
    cx.b.pad_tiles[out.id] = (n,)
  return out


class Refill(Exception):
  """A loop carry started by a fill (`m = ml.full((4,), -inf)`) whose body makes it a value of the same own shape
  held at another padded shape (the (4,) row maxima of a score tile padded to (4, 32), where the fill was padded
  to 8; a (3, 40) accumulator the body makes padded where its fill was not): the loop is traced again with the
  fill made at that shape (probe 48a; the carry's types differed, MG005, and the padded trace ended)."""

  def __init__(self, leaf, shape, own):
    super().__init__(leaf)
    self.leaf, self.shape, self.own = leaf, shape, own


def refill_for(b, leaf_name, init, leaf):
  """Raise Refill where `init` (a loop's initial value) is a fill the padded trace may make again at `leaf`'s
  shape (see Refill), once per carry."""
  from .elementwise import Full
  pads = getattr(b, "pad_tiles", None)
  if pads is None or not all(isinstance(getattr(v, "type", None), TensorType) for v in (init, leaf)):
    return
  if init.id in getattr(b, "refilled", ()) or init.type.dtype != leaf.type.dtype:
    return
  if not isinstance(b.defining(init), Full) and not ((init.id in pads or leaf.id in pads)
                                                     and len(init.type.shape) == len(leaf.type.shape)):
    return        # (a value the step makes padded otherwise, a (9,) HMM alpha read padded to 16 whose step makes it
                  # 32, or a (24,) one the step pads to 32: regrown, probe 72a)
  own = tuple(pads.get(leaf.id, leaf.type.shape))
  if tuple(pads.get(init.id, init.type.shape)) == own and tuple(leaf.type.shape) != tuple(init.type.shape):
    raise Refill(leaf_name, tuple(leaf.type.shape), own)


def refill(cx, init, shape, own):
  """The fill `init` made again at `shape`, recorded padded with its own shape `own` where they differ; a padded
  value other than a fill is grown with zeros (or cut, through SMEM) along each axis to `shape`: its padding holds
  nothing its uses read (probe 72a: the state vector of an HMM's 9 states, read padded to 16, which its step makes
  a statistic of the (9, 9) transition tile padded to (12, 32), 32 long)."""
  from .elementwise import Full, full_
  b = cx.b
  with allowed(cx):
    if isinstance(b.defining(init), Full):
      out = full_(cx, shape, b.defining(init).value, init.type.dtype)
    else:
      out = _repadded(cx, init, shape)
  if tuple(own) != tuple(shape):
    b.pad_tiles[out.id] = tuple(own)
  b.__dict__.setdefault("refilled", set()).add(out.id)
  return out


def _repadded(cx, x, shape):
  """`x` (a padded value) grown with zeros or cut along each axis to `shape`."""
  from .elementwise import full_
  from .shape import concatenate, index_through_smem
  y = x
  for k, n in enumerate(shape):
    have = y.type.shape[k]
    if have < n:
      rest = tuple(n - have if j == k else m for j, m in enumerate(y.type.shape))
      y = concatenate.rule(cx, [y, full_(cx, rest, 0, x.type.dtype)], k)
    elif have > n:
      y = index_through_smem(cx, y, tuple(slice(0, n) if j == k else slice(None) for j in range(len(shape))))
  return y


def rows_of_vector(cx, x, shape):
  """`x.reshape(h, d)` in a padded trace of an unpadded vector `x` of h * d elements where no register tensor holds
  (h, d) (a token's query row of 8 heads of 40, `q[t].reshape(8, -1)`, normalised per head; 192 elements as (8, 24)):
  its rows, each a window of the vector, stored into an SMEM scratch of the padded shape (rows a multiple of 4,
  columns of 32) beside zeros, read back whole and recorded padded with its own shape (probe 48a; it was MG204).
  None for any other reshape."""
  from .elementwise import full_
  from .memory import view
  from .padded_tiles import _up
  from .scratches import scratch
  from .shape import index_through_smem
  from .transfers import load, store
  pads = getattr(cx.b, "pad_tiles", None)
  t = getattr(x, "type", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or not isinstance(t, TensorType) or len(t.shape) != 1 \
      or x.id in pads or not isinstance(resolve(t.dtype), DType) or not isinstance(shape, (tuple, list)):
    return None
  if not all(isinstance(n, int) and not isinstance(n, bool) for n in shape) or len(shape) != 2:
    return None
  n = t.shape[0]
  if list(shape).count(-1) == 1:
    rest = math.prod(k for k in shape if k != -1)
    shape = tuple(n // rest if k == -1 else k for k in shape) if rest > 0 and n % rest == 0 else shape
  h, d = shape
  if h <= 1 or d <= 1 or h * d != n or _holds((h, d)) or d % 8 or h > 64:
    return None
  up = _up((h, d), resolve(t.dtype))
  if not _holds(up):
    return None
  name = cx.name
  with allowed(cx):
    buf = scratch(cx, up, t.dtype, f"the rows of {cx.named(x, 'a vector')} padded to {up}")
    for r in range(h):
      store(cx, view(cx, buf, (r, slice(0, d))), index_through_smem(cx, x, (slice(r * d, (r + 1) * d),)))
    if up[1] > d:
      store(cx, view(cx, buf, (slice(0, up[0]), slice(d, up[1]))), full_(cx, (up[0], up[1] - d), 0, t.dtype))
    if up[0] > h:
      store(cx, view(cx, buf, (slice(h, up[0]), slice(0, d))), full_(cx, (up[0] - h, d), 0, t.dtype))
    out = load(cx, buf, name)
  pads[out.id] = (h, d)
  return out


def merged_rows(cx, x, own, up, shape):
  """`x.reshape(r, -1)` of a padded 3-D `x` of own shape (r, h, d) held in `up` (a (3, 5, 7) read padded to (3, 8,
  32), the heads of a few tokens merged back, `o.reshape(t, -1)` of (2, 4, 24)): each of its r tiles flattened as
  `x[i].reshape(-1)` is (`flattened`: rows joined through SMEM), stored into a row of an SMEM scratch of the padded
  result shape, read back whole and recorded padded with its own shape (probe 49a; PadAbort, the plain trace's MG204,
  before). None where `shape` is no such merge; up to 64 rows of 64 tiles each."""
  from .elementwise import full_
  from .memory import view
  from .padded_tiles import _up
  from .scratches import scratch
  from .shape import index_through_smem, reshape_
  from .transfers import load, store
  if len(own) != 3 or len(shape) != 2 or tuple(shape) != (own[0], own[1] * own[2]) or own[0] > 64 or own[1] > 64:
    return None
  d = resolve(x.type.dtype)
  if not isinstance(d, DType):
    return None
  target = tuple(shape) if _holds(shape) else _up(shape, d)
  if not _holds(target):
    return None
  name = cx.name
  with allowed(cx):
    buf = scratch(cx, target, x.type.dtype, f"the rows of {cx.named(x, 'a tile')} merged, padded to {target}")
  rows = []
  for r in range(own[0]):
    cx.name = ""
    t = index_through_smem(cx, x, (r,))
    v = flattened(cx, t, own[1:], tuple(up[1:]), lambda s, t=t: reshape_(cx, t, s))
    rows.append(v)
  cx.name = name
  with allowed(cx):
    for r, v in enumerate(rows):
      n = v.type.shape[0]
      if n > target[1]:         # (a tile padded along its rows only: its padding, at the end, cut off)
        v, n = index_through_smem(cx, v, (slice(0, target[1]),)), target[1]
      store(cx, view(cx, buf, (r, slice(0, n))), v)
      if n < target[1]:
        store(cx, view(cx, buf, (r, slice(n, target[1]))), full_(cx, (target[1] - n,), 0, x.type.dtype))
    if target[0] > own[0]:
      store(cx, view(cx, buf, (slice(own[0], target[0]), slice(None))),
            full_(cx, (target[0] - own[0], target[1]), 0, x.type.dtype))
    out = load(cx, buf, name)
  if tuple(out.type.shape) != tuple(shape):
    cx.b.pad_tiles[out.id] = tuple(shape)
  return out


def row_grown(cx, x, index):
  """`x` for `x[None, :]`: where the trace is padded and x a padded vector of more than a warp's length whose padded
  length is no multiple of 32 (an `ml.arange(100)` made padded to 104), x grown with zeros to one (128), as a padded
  tile's columns are, so that the index grid it makes (`ml.arange(5)[:, None] * 100 + ml.arange(100)[None, :]`, rows
  padded to 8) takes a row-wise layout (probe 50a; MG204 before); x itself otherwise."""
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or getattr(x, "id", None) not in pads or len(x.type.shape) != 1:
    return x
  index = index if isinstance(index, tuple) else (index,)
  if len(index) != 2 or index[0] is not None or index[1] != slice(None):
    return x
  (n,), (up,) = pads[x.id], x.type.shape
  want = -(-up // hw.WARP) * hw.WARP
  if n <= hw.WARP or want == up or not _holds((want - up,)):
    return x
  from .elementwise import full_
  from .shape import concatenate
  with allowed(cx):
    out = concatenate.rule(cx, [x, full_(cx, (want - up,), 0, x.type.dtype)], 0)
  pads[out.id] = (n,)
  return out


def one_line(cx, x, index):
  """`x[:, j:j + 1]` (axis 1) of a padded trace's 2-D tile as `x[:, j][:, None]`, the same (m, 1) column, and
  `x[j:j + 1, :]` (axis 0) as `x[j][None, :]`: the slice through SMEM met a padded tile unpadded (the threshold
  `vals[:, 1:2]` of top_k of a (5, 96) read, the row `st[1:2, :]` of a stack of (3, 40) column statistics: MG204),
  the vector does not; None for any other slice or trace."""
  from .shape import _may_hold_dot_result, _plain_slice, expand, index_through_smem
  if getattr(cx.b, "pad_tiles", None) is None or len(index) != 2 or len(getattr(x.type, "shape", ())) != 2:
    return None
  whole = [isinstance(i, slice) and i == slice(None) for i in index]
  if whole.count(True) != 1:
    return None
  axis = whole.index(False)
  s = index[axis]
  if not _plain_slice(s) or _may_hold_dot_result(cx, x):
    return None
  own = cx.b.pad_tiles.get(x.id, tuple(x.type.shape))     # (`vals[:, -1:]` counts from the end of its own columns)
  lo, hi, _ = s.indices(own[axis])
  if hi - lo != 1:
    return None
  if axis == 1:
    return expand(cx, index_through_smem(cx, x, (slice(None), lo)), (slice(None), None))
  return expand(cx, index_through_smem(cx, x, (lo,)), (None, slice(None)))


def broadcast_to(cx, x, shape, plain):
  """`ml.broadcast_to(x, shape)` (plain(cx, x, shape): the broadcast as traced outside a padded trace): in a padded
  trace, to a shape no register tensor holds, of an `x` that broadcasts to its padded shape (a row of per-channel
  scales over a decode tile of 3 tokens, `ml.broadcast_to(s[0:1, :], x.shape)`), x broadcast to the padded shape,
  recorded with its own (probe 52e). An `x` whose own length along an axis is the shape's is first grown with zeros
  to the padded length (a (1, 40) row over a (3, 40) tile padded to (4, 64); a (1, 100) row read padded to (1, 104)
  over (3, 100) padded to (4, 128)), or, padded longer than the tile (a (3,) per-token scale read padded to 8,
  `a_s[:, None]` over (3, 40)), broadcast long and cut through SMEM. x.shape in `shape` is a padded value's own: a
  padded x that no padded broadcast makes ends the padded trace."""
  pads = getattr(cx.b, "pad_tiles", None)
  d, shape = resolve(x.type.dtype), tuple(shape)
  if pads is None or getattr(cx.b, "pad_ok", 0):
    return plain(cx, x, shape)
  if x.id in pads and tuple(x.type.shape) != pads[x.id] and (not isinstance(d, DType) or _holds(shape) or len(
      shape) < 2):
    raise PadAbort("broadcast_to")      # (a padded value to a shape registers hold: no padded broadcast makes it)
  if not isinstance(d, DType) or _holds(shape) or len(shape) < 2:
    return plain(cx, x, shape)
  up, src = _up(shape, d), tuple(x.type.shape)
  lead = len(up) - len(src)
  own = pads.get(x.id, src)
  grow = {lead + k: (n, up[lead + k]) for k, n in enumerate(own) if lead >= 0 and src[k] != 1 and n == shape[lead + k]
          and src[k] < up[lead + k]}
  if grow and _holds(up):             # (a row of the tile's own width grown with zeros to its padded width first:
    x = _grown(cx, x, len(up), grow)  # a (1, 40) row of scales over a (3, 40) tile padded to (4, 64), probe 52e)
    src = tuple(x.type.shape)
  if lead >= 0 and _holds(up) and all(n in (1, u) or n > u and own[k] == shape[lead + k] for k, (n, u) in enumerate(
      zip(src, up[lead:]))) and any(n > u for n, u in zip(src, up[lead:])):
    from .shape import index_through_smem     # (padded longer than the tile: a (3,) per-token scale read padded to 8,
    big = tuple(max(n, u) for n, u in zip((1,) * lead + src, up))       # `a_s[:, None]` over a (3, 40) tile padded
    with allowed(cx):                                                  # to (4, 64): broadcast long, then cut)
      out = index_through_smem(cx, plain(cx, x, big), tuple(slice(0, u) for u in up))
    pads[out.id] = shape
    return out
  if not _holds(up) or len(src) > len(up) or any(n not in (1, u) for n, u in zip(src[::-1], up[::-1])):
    if x.id in pads and tuple(x.type.shape) != pads[x.id]:
      raise PadAbort("broadcast_to")
    return plain(cx, x, shape)
  with allowed(cx):
    out = plain(cx, x, up)
  pads[out.id] = shape
  return out
