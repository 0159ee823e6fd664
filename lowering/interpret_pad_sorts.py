"""Interpret mode's check of masked-off lanes that reach a sort (MaskedReductionError, MG953; probe 54e).

A sort (`jax.lax.top_k`, `jnp.sort`, `jnp.argsort`, `ml.top_k`) of a row of 100 elements read as a tile of 128 with
`mask=cols < n` orders the 28 lanes past the end, filled with `other`, among the elements: `other=0.0` under a
top k of logits that may all be negative makes the top k padding, and a sorted row stored back under the load's
mask (or its first element read as the minimum) loses elements of data to padding. Every such use wants the
padding after the data, where `other` below every element (above, ascending) leaves it: a sort that puts a lane of
padding before a lane of data of another value (ties are harmless) is the error, at the sort. Sorted lanes of
padding stay padding (a masked store drops them, a reduction sees them as padding). A sort of 64-bit keys (two
passes of 32-bit words) is checked at its first pass in the order of the whole keys (probe 56b); its result's lanes
are not followed.

The kernel's reads decide what "before" means (probe 56d): a sort whose every use reverses it (`jnp.sort(p)[::-1]`,
jnp's descending sort) is judged reversed, and a sort whose every use stores it into SMEM and reads elements or
windows back (`s[-k]`, `s[-8:]`, `s[k - 1]`) is judged at each read: an error only where a position read holds
padding (CTA.sort_late), at the sort, naming that position. Any other use keeps the check at the sort.
"""
from __future__ import annotations

import numpy as np

from ..frontend import errors as E
from ..frontend.loc import called_text
from ..frontend.ir import walk
from ..frontend.ops.access import ScalarLoad
from ..frontend.ops.memory import Copy, Load, SmemAlloc, Store, View
from ..frontend.ops.register_gather import ScratchGather
from ..frontend.ops.roll import FlipLoad
from ..frontend.relayout import RelayoutStore
from . import interpret_pad_moves as M
from . import interpret_padding as P
from ..frontend.ops.sort import Sort
from .interpret_padding import DIRTY, PAD, REAL, _set, _source, state
from .interpret_pad_texts import _load_texts, _origin


def _sort(cta, o):
  st = state(cta, o.x)
  src = _source(cta, o.x)
  if not isinstance(st, np.ndarray) or src is None:
    return
  d = src.result.type.dtype if not isinstance(src, Copy) else None
  wide = d is not None and d.bits > 32
  x = np.asarray(cta.get(o.x))
  n = x.shape[-1]
  perm = np.asarray(cta.get(o.results[1])).reshape(-1, n)
  vals = np.asarray(cta.get(o.results[0])).reshape(-1, n)
  if wide:
    if (pv := _wide(cta, o, n)) is None:
      return
    perm, vals = pv
  lanes = np.broadcast_to(st, x.shape).reshape(-1, n)
  moved = np.take_along_axis(lanes, perm, axis=1)
  pad = moved == PAD
  data = (moved == REAL) | (moved == DIRTY)
  # a lane of padding with a lane of data of another value after it, row by row (padding equal to elements of
  # data ties with them: either order gives the same values); sorted, the last lane of data differs if any does
  kind, bufs = _reads(cta, o)
  rev = kind == "flip"
  # a tile the compiler computes padded (Sort.valid): its own padding past `valid` is not sorted and stays there,
  # and a flip of the sorted tile reverses its first `valid` lanes only (probe 59b: `jnp.sort(x)[:, ::-1]` of a
  # (2, 16) tile held as (4, 32) was judged as if the padding had sorted first)
  v = o.valid or n
  sl = (lambda a: a) if v == n else (lambda a: a[:, :v].copy())
  s_moved, s_vals, s_pad, s_data = sl(moved), sl(vals), sl(pad), sl(data)
  if rev:                 # judged in the order the kernel reads it: `jnp.sort(p)[::-1]`, padding first is last there
    s_moved, s_vals, s_pad, s_data = (np.flip(a, 1) for a in (s_moved, s_vals, s_pad, s_data))
  last = np.where(s_data.any(1), v - 1 - np.argmax(np.flip(s_data, 1), 1), -1)
  tail = np.take_along_axis(s_vals, np.maximum(last, 0)[:, None], 1)
  s_early = s_pad & (np.arange(v)[None, :] < last[:, None]) & (s_vals != tail)
  if v == n:
    moved, vals, early = s_moved, s_vals, s_early
  else:
    moved, vals, early = moved.copy(), vals.copy(), np.zeros_like(pad)
    moved[:, :v], vals[:, :v], early[:, :v] = s_moved, s_vals, s_early
  what, _ = called_text(o.loc, "ml.sort")
  name = what.rsplit(".", 1)[-1]
  if name in _RANKS:
    # an order statistic ranks every lane of the tile: padding sorted last still moves the position it reads
    # (the median of 128 lanes, not of the row's 100 elements); the NaN-skipping ones skip padding that is NaN
    counted = pad & data.any(1)[:, None]
    if o.valid:        # (a tile the compiler computes padded: its own padding stays past `valid`, unranked)
      counted &= np.arange(n)[None, :] < o.valid
    if name.startswith("nan"):
      counted &= ~np.isnan(vals.astype(np.float64)) if vals.dtype.kind == "f" else True
    if counted.any():
      raise _rank_error(cta, o, src, what, name, counted, data)
  for b in bufs:
    cta.sort_late.pop(b, None)
  if early.any() and (kind != "read" or wide):
    raise _sort_error(cta, o, src, vals, moved, early, rev)
  if wide:                # (the low words' order: not the result's, whose lanes stay REAL)
    return
  shape = o.results[0].type.shape
  lanes = np.where(pad, PAD, REAL).astype(np.int8).reshape(shape)
  _set(cta, o.results[0], lanes, src)
  if early.any():      # only the positions the kernel reads must hold data: checked where it reads them
    _set(cta, o.results[1], lanes, src)
    for b in bufs:
      cta.sort_late[b] = (o, src, vals, moved, early, data)


def _wide(cta, o, n):
  """(positions, values), rows of n, of the int64 sort (ops/sort_together.sort_wide, two passes of 32-bit words)
  whose first pass is `o`, the sort of the low words (a cast of the int64 tensor): the order of the whole keys, which
  the check reads as one sort's (probe 56b; the second pass sorts gathered words, whose lanes are not followed).
  None where `o` is not such a first pass."""
  from ..frontend import ir
  from ..frontend.ops.elementwise import Cast
  m = cta.m
  if getattr(m, "_defs", None) is None:
    m._defs = ir.def_table(m.kernel.body)
  cast = m._defs.get(o.x.id)
  if not isinstance(cast, Cast) or cast.bitcast or getattr(cast.x.type, "dtype", None) is None or \
      cast.x.type.dtype.bits != 64:
    return None
  x = np.asarray(cta.get(cast.x)).reshape(-1, n)
  k = o.valid or n          # (a tile the compiler computes padded: its own padding stays past `valid`, as Sort's)
  perm = np.argsort(x[:, :k], axis=1, kind="stable")
  if o.descending:
    perm = perm[:, ::-1]
  perm = np.concatenate([perm, np.broadcast_to(np.arange(k, n), (len(x), n - k))], axis=1)
  return perm, np.take_along_axis(x, perm, axis=1)


def _late(cta, o, root, flat):
  """A read of the SMEM copy of a sort's result (`s[-k]`) at the flat positions `flat` of its buffer: where one
  holds padding, the sort's MG953, saying which position the kernel read."""
  have = cta.sort_late.get(root)
  if have is None or not len(flat):
    return
  so, src, vals, moved, early, data = have
  n = vals.shape[1]
  row, pos = divmod(int(flat[0]), n)
  row = min(row, len(data) - 1)
  if early[row].any():        # (the message's row is the one read)
    early = np.where(np.arange(len(early))[:, None] == row, early, False)
  err = _sort_error(cta, so, src, vals, moved, early)
  inside = int(data[row].sum())
  lo = int(np.argmax(data[row]))
  msg = err.message + (f"; line {o.loc.lineno} reads position {pos}{f' of row {row}' if len(data) > 1 else ''}, which"
                  f" holds padding (the {inside} elements of data sort to positions {lo}..{lo + inside - 1} of the"
                  f" {n} lanes)")
  hint = (f"read only positions that hold data (a top k's k at most the row's {inside} elements, counted from the"
          f" {'end' if lo else 'start'} of the sorted row), or " + err.hint)
  raise E.MaskedReductionError(msg, so.loc, hint=hint)


def _scalar_load(cta, o):
  ref = cta.get(o.ref)
  if getattr(ref, "owner", -1) == cta.rank and ref.root.id in cta.sort_late and ref.root.id in cta.smem_pad:
    read = np.zeros(ref.root.type.shape, bool)
    read[ref.index] = True
    _late(cta, o, ref.root.id, np.flatnonzero(read & cta.smem_pad[ref.root.id]))


def _load(cta, o):
  P._load(cta, o)
  _scalar_load(cta, o)


def _gather(cta, o):
  M.RULES[ScratchGather](cta, o)
  have = cta.scratch_lanes.get(o.scratch.id)
  if have is not None and o.scratch.id in cta.sort_late:
    pos = np.asarray(cta.get(o.pos)).astype(np.int64).reshape(-1)
    _late(cta, o, o.scratch.id, pos[have[0].reshape(-1)[pos] == PAD])


def _reads(cta, o):
  """How the kernel reads the sort's results (memoised per kernel): ("flip", ()) where every use reverses them along
  the sorted axis (`jnp.sort(p)[::-1]`, `jnp.flip(jnp.argsort(p))`: padding sorted first ends up last); ("read",
  scratch ids) where every use stores them into SMEM and reads elements or windows back (`s[-k]`, `s[-8:]`,
  `s[k - 1]`: only the positions read must hold data, checked at each read); else ("all", ())."""
  memo = cta.m.__dict__.setdefault("_sort_reads", {})
  if id(o) not in memo:
    memo[id(o)] = _read_kind(cta.m.kernel, o)
  return memo[id(o)]


def _read_kind(kernel, o):
  ops = list(walk(kernel.body))
  defs = {r.id: u for u in ops for r in u.results}
  ids = {r.id for r in o.results}

  def root(v):
    while v.id in defs and isinstance(defs[v.id], View):
      v = defs[v.id].ref
    return v if isinstance(defs.get(v.id), SmemAlloc) else None

  def readers(buf, writer):
    return [u for u in ops if u is not writer and not isinstance(u, View)
            and any(root(v) is buf for v in u.operands())]

  last = len(o.results[0].type.shape) - 1
  kinds, bufs = set(), []
  users = [u for u in ops if any(v.id in ids for v in u.operands())]
  for u in users:
    if isinstance(u, RelayoutStore) and u.x.id in ids and root(u.scratch) is not None:
      rs = readers(root(u.scratch), u)
      if rs and all(isinstance(r, FlipLoad) and last in r.axes for r in rs):
        kinds.add("flip")
        continue
      if rs and all(isinstance(r, ScratchGather) for r in rs):
        kinds.add("read")
        bufs.append(root(u.scratch).id)
        continue
    elif isinstance(u, Store) and u.value.id in ids and root(u.ref) is not None:
      rs = readers(root(u.ref), u)
      if rs and all(isinstance(r, (ScalarLoad, Load)) for r in rs):
        kinds.add("read")
        bufs.append(root(u.ref).id)
        continue
    return "all", ()
  return (kinds.pop(), tuple(bufs)) if len(kinds) == 1 else ("all", ())


def _sort_error(cta, o, src, vals, moved, early, rev=False):
  r, p = (int(i) for i in np.argwhere(early)[0])
  q = p + 1 + int(np.argmax((moved[r, p + 1:] != PAD) & (vals[r, p + 1:] != vals[r, p])))
  ref, axis, mask, other = _load_texts(cta, src)
  what, _ = called_text(o.loc, "ml.sort")
  row = f" (row {r})" if len(vals) > 1 else ""
  desc = o.descending != rev
  first = "largest" if desc else "smallest"
  gives = ("the first positions it gives are the padding's" if "argsort" in what else
           f"the {first} values it gives are padding")
  msg = (f"{what} sorts {_origin(src, ref, other, cta)}: in program {cta.label}{row} a lane of padding sorts to"
         f" position {p}, before an element of data at position {q}, so {gives}")
  d = src.result.type.dtype if not isinstance(src, Copy) else o.x.type.dtype
  if d.is_float:
    ident = "float('-inf')" if desc else "float('inf')"
  else:
    info = np.iinfo(np.dtype(str(d)) if str(d) != "bool" else np.int8)
    ident = str(info.min if desc else info.max)
  if isinstance(src, Copy):
    hint = (f"sort the padding last: ml.where(pos < {ref}.shape[{axis}], v, {ident}) with pos the positions of the"
            f" copied window along that dimension")
  else:
    hint = (f"fill them so that they sort after the data: other={ident} in the masked load at line {src.loc.lineno}"
            f" (or sort ml.where({mask}, v, {ident}))")
  return E.MaskedReductionError(msg, o.loc, hint=hint)


_RANKS = ("median", "quantile", "percentile", "nanmedian", "nanquantile", "nanpercentile")


def _rank_error(cta, o, src, what, name, counted, data):
  r = int(np.argwhere(counted)[0][0])
  n, real = counted.shape[1], int(data[r].sum())
  ref, axis, mask, other = _load_texts(cta, src)
  row = f" (row {r})" if len(counted) > 1 else ""
  msg = (f"{what} ranks {_origin(src, ref, other, cta)}: in program {cta.label}{row} it ranks all {n} lanes, not the"
         f" {real} elements of data, so the position it reads is the wrong one")
  nan = name if name.startswith("nan") else "nan" + name
  if isinstance(src, Copy):
    hint = (f"fill the padding with NaN and skip it: jnp.{nan}(ml.where(pos < {ref}.shape[{axis}], v, float('nan')))"
            f" with pos the positions of the copied window along that dimension")
  else:
    hint = (f"fill the padding with NaN and skip it: other=float('nan') in the masked load at line"
            f" {src.loc.lineno} and jnp.{nan}")
  return E.MaskedReductionError(msg, o.loc, hint=hint)


RULES = {Sort: _sort, ScalarLoad: _scalar_load, Load: _load, ScratchGather: _gather}
