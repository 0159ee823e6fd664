"""Short and odd-length windows read whole and used as tiles, computed padded.

A window no register tensor holds (a (17,) vector, not a multiple of 8; a (3, 45) or (8, 24) tile, not a multiple
of 128; a (2, 8) window scanned) was MG204 wherever it was used. A kernel that fails so is traced again
(frontend/compile.py) with each such GMEM window read whole read padded instead (1-D to a multiple of 8 (16 for
8-bit); 2-D and more, the last two axes to rows a multiple of 4 and columns of 32)
under a mask, 0 in the padding. What is computed from it stays padded, recorded with its own shape and tracked op
by op (Builder.emit): elementwise math, casts, selects and forward scans keep the padding at the end of each axis
(a reverse scan, since probe 46h, with the scan's identity put in the padding of its axis first);
a whole reduction replaces it by the reduction's identity first; an axis reduction does too along the padded axes
it reduces; a store into a window of the unpadded shape writes under the same mask. Anything else that meets a
padded value (a shape op, an index, a dot, a loop carry) ends the padded trace, and the kernel fails as it did,
with its hint. Since probe 46j rolls, flips, parts of a padded axis, joins along one (padded_joins.py), fills of odd
shapes and rows of a padded tile's own width beside it keep the padding too, and x.shape tells a padded value's own
shape."""
from __future__ import annotations

import math

from .. import hw
from ..dtypes import DType
from ..types import Space, TensorType, resolve


from .padded_windows import grown_index, window_of as _window_of  # noqa: F401 (padded_masks reads them here)


class PadAbort(Exception):
  """A padded value met an op that does not keep its padding apart: the padded trace is given up."""


class Pads(dict):
  """The padded trace's record (value id -> unpadded shape); `mixed`: 1-D reads of one length were padded to
  different lengths (a bool or 8-bit one to a multiple of 16 beside a float one to a multiple of 8)."""
  mixed = False


class RowPads(Pads):
  """The padded trace's record (value id -> unpadded shape) where 2-D windows that registers hold but whose rows no
  row-wise layout takes (a (6, 64) or (2, 64) tile of few heads, rows not a multiple of 4 and columns not of 128)
  are read padded too: what their halves (`x[:, :d]`) meet, a row vector broadcast along them, needs such rows
  (probe 46d). Tried after the plain padded trace fails."""


class WholeRowPads(RowPads):
  """A RowPads trace whose 2-D windows of rows not a multiple of 4 are read padded whatever their columns: a token's
  (7, 128) tile of heads (Qwen2-7B's 28 heads over 4 GPUs) is held as it is, but its NeoX halves `x[:, :64]` are
  (7, 64) tiles that no layout takes beside a row of cos broadcast along them (probe 53e). Tried after the traces
  before it fail, so that a kernel they take keeps its IR."""


class WideVectors(RowPads):
  """A RowPads trace whose 1-D reads are all padded to a multiple of 16, so that a (17,) bool mask and the (17,)
  floats it selects are padded alike (32); tried last, where a trace before it padded them apart (probe 46j)."""


class ArangePads(Pads):
  """A padded trace whose user's `ml.arange(n)` of an odd n is made padded too (the token index beside 100 sorted
  ids, `out[o] = ml.arange(100)`: probe 48e); tried last, since an index grid of few heads made of one
  (`h = ml.arange(3); x.at[t, h[:, None], d[None, :]]`) is padded by its masked window instead (probe 48g)."""
  aranges = True


class LeadPads(Pads):
  """A padded trace whose 2-D windows of a short last axis (below 32: a point cloud's (64, 3) xyz, a (20, 2) list of
  pixel positions) are padded along their leading axis instead, to a multiple of 128 elements: (64, 3) as (128, 3).
  Padded to (64, 32), such a tile cannot meet its own kind along a new middle axis, `a[:, None, :] - b[None, :, :]`
  (the (m, n, 3) differences of pairwise distances, reduced over the coordinates), which its 3 columns meet as they
  are (probe 57g; MG204 at the read before). Tried last, where the kernel reads such a window."""


def _lead_up(shape):
  """`shape` (m, k) of a short k grown along its leading axis to the fewest rows that hold a multiple of 128
  elements, or (k, m) (xyz coordinate-major, `q[:, ml.ds(i, 64)]`, transposed in the kernel) along its last axis;
  None: not such a shape."""
  if len(shape) != 2 or _holds(shape) or min(shape) <= 1 or (shape[0] < 32) == (shape[1] < 32):
    return None
  k = min(shape)
  step = hw.WARPGROUP // math.gcd(k, hw.WARPGROUP)
  grown = tuple(-(-n // step) * step if n != k else n for n in shape)
  return grown


def _up(shape, d, wide=False, lead=False):
  """The padded shape of a window of `shape` (as the MG204 hints pad it; `wide`: 1-D ones to a multiple of 16;
  `lead`: a (m, k) one of a short k along its rows, LeadPads)."""
  shape = tuple(shape)
  if lead and _lead_up(shape) is not None:
    return _lead_up(shape)
  if len(shape) == 1:
    m = 16 if d.bits < 16 or wide else 8
    return (-(-shape[0] // m) * m,)
  return (*shape[:-2], -(-shape[-2] // 4) * 4, -(-shape[-1] // 32) * 32)


def _holds(shape) -> bool:
  n = math.prod(shape)
  return n % 8 == 0 if len(shape) == 1 else n % hw.WARPGROUP == 0


def _one_row(shape) -> bool:
  """A (1, n) row (n a multiple of 8) read whole: registers hold it as it is, and it broadcasts along a padded tile's
  rows as a row does (padded to (4, n) its zero rows would meet the tile's: a decode tile of 3 tokens times its
  per-channel scales, `x[...] * s[0:1, :]`, probe 52e)."""
  return len(shape) >= 2 and set(shape[:-1]) == {1} and shape[-1] % 8 == 0


def padded_load(cx, ref, name):
  """`ref[...]` read padded (see the module) where the kernel is traced so and ref is a GMEM window no register
  tensor holds; else None."""
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None:
    return None
  from .memory import view
  t = ref.type
  shape, k, d = tuple(t.shape), len(t.shape), resolve(t.dtype)
  rows = isinstance(pads, RowPads) and k == 2 and shape[0] % 4 and (shape[1] % hw.WARPGROUP
                                                                   or isinstance(pads, WholeRowPads))
  if k == 2 and shape[0] % 4 and shape[0] > 1 and not shape[1] % hw.WARPGROUP:
    pads.whole_rows = True    # (a tile WholeRowPads reads padded: that trace is worth trying)
  if k == 0 or _holds(shape) and not rows or not isinstance(d, DType) or getattr(t, "transposed", False):
    return None
  if _lead_up(shape) is not None:
    pads.short_rows = True    # (a tile LeadPads reads padded along its rows: that trace is worth trying)
  up = _up(shape, d, isinstance(pads, WideVectors), isinstance(pads, LeadPads))
  if k > 1 and set(shape[:-1]) == {1}:      # (a (1, n) row padded as a row, n to a vector's length: a (1, 100) row of
    up = (*shape[:-1], _up(shape[-1:], d, isinstance(pads, WideVectors))[0])       # scales, probe 52e)
  if up == shape or not (_holds(up) or _one_row(up)) or _one_row(shape):
    return None
  if k == 1 and isinstance(pads, Pads):
    seen = pads.__dict__.setdefault("vectors", {})
    pads.mixed |= seen.setdefault(shape, up) != up
  root, index = _window_of(cx, ref, k)
  if root is None and k == 1:            # (a short column strided in memory, x.at[:, 1] of 60 rows: probe 51g)
    from .strided_columns import read
    with allowed(cx):
      out = read(cx, ref, keep=up[0], other=False if d == DType.bool_ else 0)
    if out is not None:
      pads[out.id] = shape
    return out
  if root is None or root.type.space != Space.GMEM:
    return None
  from .access import _mask_arg, _masked_read
  padded = view(cx, root, grown_index(index, up), ref.name or "")
  with allowed(cx):
    out = _masked_read(cx, padded, _mask_arg(cx, padded, mask(cx, shape, up), "ml.load"), False if d == DType.bool_ else 0)
  pads[out.id] = shape
  return out


def padded_fill(cx, shape, dtype, emit):
  """`ml.zeros(shape)`, `ml.full(shape, v)` (emit(shape): the Full op) at a shape no register tensor holds, in a
  padded trace: made padded as an odd read is (`z = ml.zeros((100,)); o[...] = z + 1`, a (129, 3) fill), and
  recorded with its own shape (probe 46j); any other fill as it is (one with an axis of 1 is stretched along it, as
  ml.logsumexp's keepdims row: it meets padded values as it is)."""
  pads = getattr(cx.b, "pad_tiles", None)
  shape = tuple(shape)
  if pads is None or getattr(cx.b, "pad_ok", 0) or not shape or _holds(shape) or min(shape) <= 1 \
      or not isinstance(resolve(dtype), DType):
    return emit(shape)
  up = _up(shape, resolve(dtype), isinstance(pads, WideVectors))
  if not _holds(up):
    return emit(shape)
  out = emit(up)
  pads[out.id] = shape
  return out


def mask(cx, shape, up):
  """Whether each element of the padded `up` lies inside `shape` (None: everywhere): index grids, as a user writes
  the mask (ml.arange(4)[None, :, None] < 3), which the compiler recomputes at the shape they meet."""
  from .elementwise import BinOp, CmpOp, binary, compare
  from .elementwise_fns import arange
  from .shape import expand
  m = None
  for a, (n, u) in enumerate(zip(shape, up)):
    if n == u:
      continue
    c = compare(cx, CmpOp.LT, arange.rule(cx, u), n)
    if len(up) > 1:
      c = expand(cx, c, tuple(slice(None) if i == a else None for i in range(len(up))))
    m = c if m is None else binary(cx, BinOp.AND, m, c)
  return m


class allowed:
  """Ops emitted inside take padded operands without ending the padded trace."""
  def __init__(self, cx):
    self.b = cx.b

  def __enter__(self):
    self.b.pad_ok = getattr(self.b, "pad_ok", 0) + 1

  def __exit__(self, *a):
    self.b.pad_ok -= 1


def padded_table(cx, x):
  """The builder's table of padded tiles (id -> own shape) where `x` is one of them and no op that keeps the
  padding is being built (`allowed`), else None: where an op of a padded tile takes its padded path."""
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(x, "id", None) not in pads or getattr(cx.b, "pad_ok", 0):
    return None
  return pads


def on_emit(b, cls, args, results):
  """Builder.emit's check of a padded trace: the padding carried through elementwise ops, broadcasts of size-1 axes
  and forward scans. A result's own part is where every operand's is (an operand stretched along an axis has all of
  it there: a row max broadcast back along its row)."""
  pads = b.pad_tiles
  ins = [a for a in args if getattr(a, "id", None) in pads]
  if not ins or getattr(b, "pad_ok", 0):
    return
  from .elementwise import Binary, Cast, Compare, Full, Unary, Where
  from .scan import Scan
  from .shape import Broadcast, Reduce, Reshape
  if cls is Broadcast and len(results) == 1 and list(args[1]) == sorted(set(args[1])):
    # (size-1 axes inserted anywhere, `w[None, :]`, `c[:, None, :]` of padded reads, and size-1 axes stretched:
    # a kept axis has the source's own length, the others the result's; probe 47a, before only trailing ones)
    src, up = ins[0], tuple(results[0].type.shape)
    own = list(up)
    for i, k in enumerate(args[1]):
      if src.type.shape[i] == up[k]:
        own[k] = pads[src.id][i]
    pads[results[0].id] = tuple(own)
    return
  if cls is Reduce and len(results) == 1 and len(args) >= 3 and args[1] is ins[0] and isinstance(
      results[0].type, TensorType) and all(ins[0].type.shape[a] == 1 for a in args[2]):
    # (size-1 axes removed: a keepdims statistic made a vector again, ml.logsumexp's of a padded (100, 8) router tile)
    pads[results[0].id] = tuple(n for k, n in enumerate(pads[ins[0].id]) if k not in args[2])
    return
  if cls is Reshape and len(results) == 1 and (own := _reshaped(pads[ins[0].id], ins[0].type.shape,
                                                                 results[0].type.shape)) is not None:
    pads[results[0].id] = own      # (the compiler's own reshape of the axes before the padded ones: a 3-D broadcast's)
    return
  from .random import Philox      # (elementwise, Philox with its four words: probe 49g)
  ok = cls in (Binary, Cast, Compare, Unary, Where, Philox) or cls is Scan and not args[3]
  others = [a for a in args if isinstance(getattr(a, "type", None), TensorType) and a.id not in pads]
  padded = {k for a in ins for k, (n, m) in enumerate(zip(pads[a.id], a.type.shape)) if n != m}
  if not ok or len(results) != (4 if cls is Philox else 1) or padded and any(any(n != 1 for n in a.type.shape) and not isinstance(
      b.defining(a), Full) and not _constant_along(b, a, padded) for a in others):
    raise PadAbort(cls.__name__)      # (a fill, a (1,) one, or a row broadcast along padded rows: the same there;
                                      # anything beside values of their own shape, nothing padded: probe 48a)
  up = tuple(getattr(results[0].type, "shape", ()))
  own = list(up)
  if cls is Broadcast and len(ins[0].type.shape) < len(up):    # a[..., None]: new trailing axes, not padded
    src = ins[0]
    own[:len(src.type.shape)] = [n if m == u else u for n, m, u in zip(pads[src.id], src.type.shape, up)]
    pads[results[0].id] = tuple(own)
    return
  for a in ins:
    u = tuple(a.type.shape)
    if len(u) != len(up) or any(n != m and n != 1 for n, m in zip(u, up)):
      raise PadAbort(cls.__name__)
    own = [min(o, n if k == m else m) for o, n, k, m in zip(own, pads[a.id], u, up)]
  for r in results:
    pads[r.id] = tuple(own)


def _reshaped(own, shape, new):
  """The own shape of a padded value of own shape `own`, held in `shape`, reshaped to `new` where the reshape keeps
  the run of axes from the first padded one on and regroups only the axes before it ((1, 64) of a (45,) bias read
  padded, broadcast to (8, 64), back to (2, 4, 64)); None for any other reshape."""
  padded = [k for k, (n, u) in enumerate(zip(own, shape)) if n != u]
  if not padded:
    return None
  p = padded[-1] + 1          # (or the axes up to the last padded one kept, the rest regrouped: ml.interleave's
  if tuple(new[:p]) == tuple(shape[:p]) and math.prod(new[p:]) == math.prod(shape[p:]):   # pairs of a padded
    return tuple(own[:p]) + tuple(new[p:])                                                # tile, probe 49a)
  q = padded[-1]              # (the last padded axis merged with the unpadded ones after it: its padding stays at
  if len(new) == q + 1 and tuple(new[:q]) == tuple(shape[:q]) and new[q] == math.prod(shape[q:]):   # the end:
    return tuple(own[:q]) + (own[q] * math.prod(shape[q + 1:]),)        # ml.interleave's pairs joined, probe 49a)
  tail = tuple(shape[padded[0]:])
  if len(new) < len(tail) or tuple(new[len(new) - len(tail):]) != tail:
    return None
  return tuple(new[:len(new) - len(tail)]) + tuple(own[padded[0]:])


def keep_reshaped(cx, x, out):
  """`out`, x reshaped as the reshape of the value x was reshaped from (`r[None, None, :]` made a vector again, the
  statistic of jax.nn.logsumexp over (0, 1) of a (2, 3, 40) tile read padded: its own (40,)), recorded padded where x
  is and that value is not (probe 53a: the store met it unpadded, MG202)."""
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(x, "id", None) not in pads or out.id in pads:
    return out
  if (own := _reshaped(pads[x.id], x.type.shape, out.type.shape)) is not None and own != tuple(out.type.shape):
    pads[out.id] = own
  return out


def _constant_along(b, a, axes) -> bool:
  """Whether the unpadded tensor `a` is a broadcast that stretches along every axis of `axes` (`c[None, :]`
  stretched over a padded tile's rows), so that its values there are the same in the padding as in the rest; also
  through a reshape that keeps the axes up to the last of `axes` (a 3-D broadcast's 2-D one between reshapes,
  `k[None, :, :]` stretched over a padded group of query heads: probe 48a)."""
  from .shape import Broadcast, Reshape
  o = b.defining(a)
  if isinstance(o, Reshape) and axes:
    blocks = _reshape_blocks(tuple(o.x.type.shape), tuple(a.type.shape))
    if blocks is None:
      return False
    src_axes = {i for s, r in blocks if set(r) & set(axes) for i in s}
    return bool(src_axes) and _constant_along(b, o.x, src_axes)
  if not isinstance(o, Broadcast) or not axes:
    return False
  src, dims = tuple(o.x.type.shape), tuple(o.dims)
  return all(k not in dims or src[dims.index(k)] == 1 for k in axes)


def _reshape_blocks(src, new):
  """The blocks of a reshape from `src` to `new`: pairs (source axes, result axes) of equal sizes that it merges or
  splits into each other (size-1 axes join their neighbours); None where the sizes do not pair so."""
  src = [n for n in src]
  new = [n for n in new]
  i = j = 0
  blocks = []
  while i < len(src) or j < len(new):
    si, rj, ps, pn = [], [], 1, 1
    while True:
      if i < len(src) and (ps <= pn or j >= len(new)) and (ps < pn or not si or src[i] == 1):
        si.append(i)
        ps *= src[i]
        i += 1
      elif j < len(new) and (pn < ps or not rj or new[j] == 1):
        rj.append(j)
        pn *= new[j]
        j += 1
      else:
        break
      if ps == pn and si and rj and not (i < len(src) and src[i] == 1) and not (j < len(new) and new[j] == 1):
        break
    if ps != pn or not si or not rj:
      return None
    blocks.append((si, rj))
  return blocks


def pair_part(cx, x, index):
  """`w[..., j]` (or tl.split's `w[..., j:j + 1]`) of `w = v.reshape(..., d // k, k)` of a tile `v` computed padded
  (Triton's GPT-J pairs, `tl.split(tl.reshape(x, (h, d // 2, 2)))` of a (3, 80) tile of heads): the strided slice
  `v[..., j::k]` of the tile, which a padded trace holds (probe 49a), where the reshape's own halves would be a tile
  of a (4, 48) no register tensor holds; None for any other index or value (probe 53e)."""
  from .shape import Reshape
  pads = padded_table(cx, x)
  o = cx.b.defining(x) if pads is not None else None
  if not isinstance(o, Reshape) or not is_tensor_value(o.x) or o.x.id not in pads:
    return None
  src, shape = tuple(o.x.type.shape), tuple(x.type.shape)
  k = shape[-1]
  if len(shape) != len(src) + 1 or shape[:-2] != src[:-1] or shape[-2] * k != src[-1] or k < 2:
    return None
  index = list(index) if isinstance(index, (tuple, list)) else [index]
  if index.count(Ellipsis) == 1:
    e = index.index(Ellipsis)
    index[e:e + 1] = [slice(None)] * (len(shape) - len(index) + 1)
  if len(index) != len(shape) or any(i != slice(None) for i in index[:-1]):
    return None
  j = index[-1]
  if isinstance(j, slice) and isinstance(j.start, int) and j.stop == j.start + 1 and j.step in (None, 1):
    j = j.start
  if not isinstance(j, int) or isinstance(j, bool) or not -k <= j < k:
    return None
  from ..subscripts import Subscripts
  return Subscripts._stepped(cx, o.x, (Ellipsis, slice(j % k, None, k)))


def is_tensor_value(v) -> bool:
  return getattr(getattr(v, "type", None), "shape", None) is not None and hasattr(v, "id")


def padded_index(cx, x, index, redo):
  """`x[index]` of padded `x` (`x[:, :d]`, a half of a (6, 64) tile of heads read padded), where the index takes
  each padded axis whole, or an element of its real part (a static one inside it, or a run-time one clamped into it
  as jnp clamps: `lsm[t[r]]` of a padded row), and static slices or ints of the others: `redo(index)` (through SMEM)
  with the padding kept, recorded with the unpadded shape; None where x is not padded. Any other index ends the
  padded trace."""
  from ..types import ScalarType
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0) or getattr(x, "id", None) not in pads and not _odd_part(x, index):
    return None
  if (part := pair_part(cx, x, index)) is not None:
    return part               # (`w[..., 0]` of GPT-J's pairs `w = v.reshape(h, d // 2, 2)`: `v[..., 0::2]`)
  own = pads.get(x.id, tuple(x.type.shape))
  up = tuple(x.type.shape)
  index = list(index) + [slice(None)] * (len(up) - len(index))
  if len(index) != len(up):
    raise PadAbort("index")
  for a, (i, n, u) in enumerate(zip(index, own, up)):
    if n == u:
      continue
    if isinstance(i, int) and not isinstance(i, bool) and -n <= i < n:
      index[a] = i % n
    elif getattr(i, "type", None) is not None and isinstance(i.type, ScalarType) and \
        getattr(resolve(i.type.dtype), "is_int", False):
      from .shape import _clamped_index
      index[a] = _clamped_index(cx, i, n)
  # (a part of an unpadded axis of a padded tile is made padded too where the plain part no register tensor holds:
  # RoPE's halves `x[:, :48]` of a (2, 96) tile padded to (4, 96), (4, 48) otherwise; probe 49a)
  x, index, own, cut = _parts_of_padded_axes(cx, x, index, own, up, x.id not in pads or not _holds(_sliced(index, up)))
  index = tuple(index)
  kept, kept_up = [], []
  for a, (i, n, u) in enumerate(zip(index, own, up)):
    if isinstance(i, slice) and all(v is None or isinstance(v, int) and not isinstance(v, bool)
                                    for v in (i.start, i.stop, i.step)):
      lo, hi, step = i.indices(u)
      if step != 1:
        raise PadAbort("index")
      if n != u and not ((lo, hi) == (0, u) and i.indices(n)[:2] == (0, n)) and a not in cut:
        raise PadAbort("index")         # a part of a padded axis: where its rows end is not known there
      kept.append(n if n != u and hi == u else min(n, hi - lo))
      kept_up.append(hi - lo)
      axis = a
    elif isinstance(i, int) and not isinstance(i, bool) and -n <= i < n or getattr(i, "type", None) is not None \
        and isinstance(i.type, ScalarType):
      continue                # (an element: a run-time one clamped into the real part above, or by redo itself)
    else:
      raise PadAbort("index")
  if len(kept_up) == 1 and not _holds(tuple(kept_up)) and index[axis] == slice(None):
    x, kept_up = _vector_grown(cx, x, axis, kept_up[0])    # (`x[:, 0]` of (3, 64) held as (4, 64), probe 49a; of a
                                                            # (4, 128) tile of 4 rows, probe 53a)
  with allowed(cx):
    out = redo(index, x)
  if tuple(getattr(out.type, "shape", ())) != tuple(kept_up):
    raise PadAbort("index")
  if tuple(kept) != tuple(kept_up):   # (an element of the real part, or a part of unpadded axes: not padded)
    pads[out.id] = tuple(kept)
  return out


def _vector_grown(cx, x, axis, n):
  """(x, [length]) for a 1-D part of padded `x` along its padded `axis` taken whole (a column `x[:, 0]` of a (3, 64)
  tile held as (4, 64): 4 elements, which no register vector holds): x grown with zero rows along the axis to the
  next length a vector holds (8), which the index then takes whole (probe 49a; MG204 before)."""
  from .elementwise import full_
  from .shape import concatenate
  shape = tuple(x.type.shape)
  want = _up((n,), resolve(x.type.dtype))[0]
  grown = tuple(want if k == axis else m for k, m in enumerate(shape))
  rest = tuple(want - n if k == axis else m for k, m in enumerate(shape))
  if want <= n or not _holds(grown) or not _holds(rest):
    raise PadAbort("index")
  with allowed(cx):
    x = concatenate.rule(cx, [x, full_(cx, rest, 0, x.type.dtype)], axis)
  return x, [want]


def _sliced(index, up):
  """The shape of `x[index]` for x of shape `up`, its static slices applied and other indices dropping their axis
  (a shape that holds where an index is of another kind: that goes its own way)."""
  shape = []
  for i, u in zip(index, up):
    if isinstance(i, slice):
      if not all(v is None or isinstance(v, int) and not isinstance(v, bool) for v in (i.start, i.stop, i.step)):
        return (hw.WARPGROUP,)
      shape.append(len(range(*i.indices(u))))
  return tuple(shape) if shape else (hw.WARPGROUP,)


def _odd_part(x, index) -> bool:
  """Whether `x[index]` of an unpadded tensor is a static window of step 1 (slices only) that no register tensor
  holds but whose padding one does: `v[:5]` of a sorted (64,) vector (a top 5), `t[:3]` of a (64, 32) tile, made
  padded in a padded trace as a part of a padded axis is (probe 47a; it was MG204); or a line of a 2-D tile, one axis
  taken whole and a static element of the other, too short for a vector (`s[:, 3]` of a sorted (4, 128) tile: 4
  elements, its column grown to 8 rows, probe 53a)."""
  t = getattr(x, "type", None)
  if not isinstance(t, TensorType) or not isinstance(resolve(t.dtype), DType) or not isinstance(index, (tuple, list)):
    return False
  index = list(index) + [slice(None)] * (len(t.shape) - len(index))
  static = lambda v: v is None or isinstance(v, int) and not isinstance(v, bool)
  if len(index) == 2 == len(t.shape) and sum(isinstance(i, slice) for i in index) == 1:
    (a, i), (b, j) = sorted(enumerate(index), key=lambda e: not isinstance(e[1], slice))
    n = t.shape[a]
    return i == slice(None) and static(j) and j is not None and -t.shape[b] <= j < t.shape[b] and \
        not _holds((n,)) and _holds(_up((n,), resolve(t.dtype)))
  if len(index) != len(t.shape) or not all(isinstance(i, slice) and all(
      static(v) for v in (i.start, i.stop, i.step)) for i in index):
    return False
  parts = [i.indices(n) for i, n in zip(index, t.shape)]
  shape = tuple(len(range(*p)) for p in parts)
  return all(p[2] == 1 for p in parts) and min(shape) > 0 and not _holds(shape) and _holds(_up(shape, resolve(t.dtype)))


def _parts_of_padded_axes(cx, x, index, own, up, every=False):
  """(x, index, own, axes) with each static slice of a padded axis that takes a part of its real elements (`o[1:]`,
  `o[:-1]` of a padded (9,), `x[:, 40:]` of a padded (6, 80) tile), as the user wrote it of the axis's own length,
  made a slice from 0: x rolled back by its start along the axis, the slice as long as the part padded (`_up`),
  its own length the part's, its axis in `axes` (probe 46j); everything else as it is. `every`: unpadded axes too
  (an odd part of an unpadded tensor, `_odd_part`)."""
  from .roll import roll_tensor
  d, axes = resolve(x.type.dtype), set()
  for a, (i, n, u) in enumerate(zip(index, own, up)):
    if n == u and not every or not isinstance(i, slice) or not all(v is None or isinstance(v, int) and not isinstance(v, bool)
                                                     for v in (i.start, i.stop, i.step)):
      continue
    lo, hi, step = i.indices(n)
    if step != 1 or hi <= lo or (lo, hi) == (0, n) or not isinstance(d, DType):
      continue
    part = tuple(hi - lo if k == a else m for k, m in enumerate(own))
    cut = _up(part, d, isinstance(cx.b.pad_tiles, WideVectors))[a] if not _holds(part) else hi - lo
    if lo:
      with allowed(cx):
        x = roll_tensor(cx, x, -lo, a, "")
    index = [slice(0, cut) if k == a else j for k, j in enumerate(index)]
    own = tuple(hi - lo if k == a else m for k, m in enumerate(own))
    axes.add(a)
  return x, index, own, axes


def padded_strided(cx, x, redo, index=None):
  """`x[..., a::k]` of padded `x` whose last axis is not padded (interleaved RoPE's pairs of a padded tile of
  heads): `redo()` with the padding kept (None: x is not padded, or redo() gives None, not such a slice, or the
  slice of the padded tile, `index`, is one no register tensor holds: padded_steps pads it, probe 49a)."""
  pads = padded_table(cx, x)
  if pads is None:
    return None
  own, up = pads[x.id], tuple(x.type.shape)
  if own[-1] != up[-1]:
    return None               # (no strided slice of a padded axis: any other index goes its own way)
  if index is not None:       # (`v[:, 0::2]` of a (2, 96) tile padded to (4, 96): (4, 48))
    index = list(index) if isinstance(index, (tuple, list)) else [index]
    if index.count(Ellipsis) == 1:
      k = index.index(Ellipsis)
      index[k:k + 1] = [slice(None)] * (len(up) - len(index) + 1)
    if not _holds(_sliced(index + [slice(None)] * (len(up) - len(index)), up)):
      return None
  with allowed(cx):
    out = redo()
  if out is None:
    return None
  if tuple(getattr(out.type, "shape", ()))[:-1] != up[:-1]:
    raise PadAbort("strided")
  if tuple(own[:-1]) != up[:-1]:
    pads[out.id] = tuple(own[:-1]) + (out.type.shape[-1],)
  return out


def padded_reshape(cx, x, shape, redo):
  """`x.reshape(shape)` of padded `x`, `shape` as the user wrote it (of x's unpadded shape): the axes up to the
  last padded one kept, the rest reshaped (`v.reshape(6, 64)` of a padded (6, 32, 2) tile of heads, its pairs
  interleaved back): `redo(padded shape)` with the padding kept; None where x is not padded."""
  pads = padded_table(cx, x)
  if pads is None:
    return None
  own, up = pads[x.id], tuple(x.type.shape)
  if not (isinstance(shape, tuple) and all(isinstance(n, int) and not isinstance(n, bool) for n in shape)):
    raise PadAbort("reshape")
  if shape.count(-1) == 1:
    rest = math.prod(n for n in shape if n != -1)
    shape = tuple(math.prod(own) // rest if n == -1 and rest > 0 else n for n in shape)
  padded = [k for k, (n, u) in enumerate(zip(own, up)) if n != u]
  if not padded:              # (a statistic of its own shape along the padded axes: reshaped as it is)
    del pads[x.id]
    return None
  p = padded[-1] + 1
  from .padded_reshapes import pairs_reshape, unit_reshape, window_reshape
  if (held := unit_reshape(cx, x, shape)) is not None:      # (size-1 axes only: a 3-axis block, probe 59a)
    with allowed(cx):
      out = redo(held)
    pads[out.id] = tuple(shape)
    return out
  if len(shape) == 1 and len(own) == 2 and shape[0] == math.prod(own):
    from .padded_meets import flattened
    return flattened(cx, x, own, up, redo)
  if len(own) == 3 and len(shape) == 2 and tuple(shape) == (own[0], own[1] * own[2]) and padded[0] >= 1:
    from .padded_meets import merged_rows          # (the heads of a few tokens merged: (3, 5, 7) as (3, 35))
    if (out := merged_rows(cx, x, own, up, shape)) is not None:
      return out
  if len(own) == 3 and len(shape) == 2 and tuple(shape) == (own[0] * own[1], own[2]) and 1 < own[0] <= 64 \
      and padded[0] >= 1:     # (tokens and heads merged: (2, 3, 40) as (6, 40), each token's tile joined along rows)
    from .shape import concatenate, index_through_smem
    return concatenate.rule(cx, [index_through_smem(cx, x, (i,)) for i in range(own[0])], 0)
  if tuple(shape[:p]) == tuple(own[:p]) and math.prod(shape[p:]) == math.prod(own[p:]):
    held = tuple(up[:p]) + tuple(shape[p:])
  elif (held := pairs_reshape(own, up, shape, padded[-1])) is None:
    if (out := window_reshape(cx, x, own, up, shape, padded)) is not None:    # (tried last: probe 56g)
      return out
    raise PadAbort("reshape")
  with allowed(cx):
    out = redo(held)
  pads[out.id] = tuple(shape)
  return out


def unpadded_reduce(cx, kind, x, axes, keepdims):
  """A reduction of padded `x` over `axes`: x with the reduction's identity in the padding of the axes it reduces
  (None: x is not padded). The result of an axis reduction is recorded padded where kept axes are."""
  pads = padded_table(cx, x)
  if pads is None:
    return None
  from .elementwise import where_
  from .reduce import ReduceKind, extreme_identity
  shape, up = pads[x.id], tuple(x.type.shape)
  if kind not in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN):
    raise PadAbort("reduce")
  d = resolve(x.type.dtype)
  ident = 0 if kind == ReduceKind.SUM else extreme_identity(kind, d)
  cut = tuple(n if a in axes else u for a, (n, u) in enumerate(zip(shape, up)))
  with allowed(cx):
    m = mask(cx, cut, up)
    y = x if m is None else where_(cx, m, x, ident)
  kept = tuple(1 if a in axes else n for a, n in enumerate(shape) if keepdims or a not in axes)
  kept_up = tuple(1 if a in axes else u for a, u in enumerate(up) if keepdims or a not in axes)
  return y, (kept if kept_up else None)       # (one of the unpadded shape too: what meets it is padded)


def reverse_scanned(cx, kind, x, axis, emit):
  """A reverse scan of padded `x` along `axis` (emit(x): the Scan op of x): the padding at the end of the axis is
  scanned first, so it takes the scan's identity there first (0 for a sum, 1 for a product, the extreme for a max
  or min), and the result is recorded padded as x is (None: x is not padded; probe 46h)."""
  pads = padded_table(cx, x)
  if pads is None:
    return None
  from .elementwise import where_
  from .reduce import ReduceKind, extreme_identity
  from .scan import ScanKind
  shape, up = pads[x.id], tuple(x.type.shape)
  ident = {ScanKind.SUM: 0, ScanKind.PROD: 1}.get(kind)
  if ident is None:
    ident = extreme_identity(ReduceKind.MAX if kind == ScanKind.MAX else ReduceKind.MIN, resolve(x.type.dtype))
  cut = tuple(n if a == axis else u for a, (n, u) in enumerate(zip(shape, up)))
  with allowed(cx):
    m = mask(cx, cut, up)
    res = emit(x if m is None else where_(cx, m, x, ident))
  pads[res.id] = shape
  return res


def padded_store(cx, ref, value) -> bool:
  """`ref[...] = value` of a padded value into a GMEM window of its unpadded shape: under its mask, into the
  padded window (masked lanes touch no memory past the array's end); False where it is no such store."""
  pads = padded_table(cx, value)
  if pads is None:
    return False                # (inside an op that keeps the padding: its own scratch, padded as the value)
  shape, up = pads[value.id], tuple(value.type.shape)
  if shape == up:        # (a keepdims statistic along a padded axis, its own shape: stored as it is)
    del pads[value.id]
    return False
  from .memory import view
  from .odd_fills import stored_in_pieces
  k = len(shape)
  if tuple(ref.type.shape) != shape or ref.type.space != Space.GMEM:
    want = tuple(ref.type.shape)
    if len(shape) > len(want) or any(n != m and n != 1 for n, m in zip(shape[::-1], want[::-1])):
      from .. import errors as E    # (the user's mistake in the value's own shape: reported so, probe 47a)
      e = E.ShapeMismatchError(f"cannot store a tensor of shape {shape} into {ref.name or 'a ref'} of shape {want}",
                               cx.loc, hint="store a value of the window's shape (slice the ref with .at[...] to"
                                            " match), or broadcast it explicitly with ml.broadcast_to")
      e.padded_mistake = True
      raise e
    if want == shape and ref.type.space == Space.SMEM and stored_in_pieces(cx, ref, value, up):
      return True         # (an odd tile into an SMEM buffer of its own shape: odd_fills.py, probe 59a)
    if want == shape and ref.type.space == Space.SMEM and k == 1:
      return _scattered_row(cx, ref, value, shape, up)
    raise PadAbort("store")
  root, index = _window_of(cx, ref, k)
  if root is None and k == 1:            # (a short column strided in memory, o.at[:, 1] of 60 rows: probe 51g)
    from .strided_columns import write
    with allowed(cx):
      if write(cx, ref, value, mask(cx, shape, up), padded=True):
        return True
  if root is None:
    raise PadAbort("store")
  from .access import masked_store
  padded = view(cx, root, grown_index(index, up), ref.name or "")
  with allowed(cx):
    masked_store(cx, padded, value, mask(cx, shape, up))
  return True


def _scattered_row(cx, ref, value, shape, up) -> bool:
  """A padded vector stored into an SMEM window of its own length, too short for the pieces registers hold (a
  Viterbi step's 5 back-pointers, `bp[t, :] = ml.argmax(x, axis=0)` of 5 tags, held padded to 8): the masked
  scatter of its first `shape[0]` lanes at their positions in the window (probe 72a; the padded trace ended)."""
  from .atomic import AtomicKind
  from .elementwise_fns import arange
  from .gather import IndexedRef, scatter
  with allowed(cx):
    pos = arange.rule(cx, up[0])
    scatter(cx, AtomicKind.SET, IndexedRef(ref, (pos,)), value, mask(cx, shape, up), what="the store")
  return True


def reduced(cx, redo, kept):
  """An axis reduction's result (redo(): the reduction, which may reshape its operand), recorded padded with the
  unpadded shape `kept` (None: not padded)."""
  with allowed(cx):
    res = redo()
  if kept is not None:
    cx.b.pad_tiles[res.id] = kept
  return res


def true_shape(b, x):
  """`x`'s shape, unpadded where x is computed padded."""
  pads = getattr(b, "pad_tiles", None)
  return pads[x.id] if pads is not None and getattr(x, "id", None) in pads else tuple(x.type.shape)
