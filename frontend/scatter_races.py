"""A plain store beside an atomic scatter at indices of data (probe 56b).

Probe 55a raced a plain store of an output with the atomic scatters into it where every scatter's indices are known
while compiling (`ml.arange` chains); a scatter at indices of data (a histogram's bins) left the output to interpret
mode. Where its indices are data along some dimensions, a scatter still lands somewhere in the span those
dimensions have (an index outside is dropped, as jnp's), so where the plain stores of another program cover that
whole span, and the box of the scatter's known indices along the other dimensions, they write elements the scatter
adds to whatever the data is: `if i == 0: o[...] = 0` before every program's `ml.atomic_add(o.at[ids], 1)`. That is
MG951 at the store (a scatter whose every index is outside, or masked off, is the one run it would not race in). A
store that covers part of the span (a histogram's header element the kernel writes, probe 24b), or only the
program's own row of a row-indexed scatter (`o[i, :] = 0` beside `o.at[i, ids]`), stays interpret mode's.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from . import errors as E
from .races import plain_write_hint

_CELLS = 1 << 22       # (outputs of at most this many elements, and the first programs that store into them)
_WRITERS = 64


def note_data_scatter(chk, acc, boxes) -> None:
  """Record the atomic scatter `acc` whose indices are not all known while compiling (`boxes`: its window's rows in
  the programs that certainly run it, or None): its known indices' bounding boxes and the dimensions of data."""
  from .mask_boxes import _Eval
  w = acc.window
  chk.scatter_data.add(w.root.id)
  if boxes is None or len(acc.op.indices) != boxes[0].shape[1]:
    return
  progs = np.flatnonzero(acc.must)
  lo, hi = boxes[0].copy(), boxes[1].copy()
  data = []
  for d, v in enumerate(acc.op.indices):
    val = (np.asarray(v).reshape(1) if isinstance(v, int) else
           _Eval(chk.ev, progs, tuple(getattr(v.type, "shape", ()))).value(v))
    if val is None:
      data.append(d)
      continue
    val = np.asarray(val).reshape(val.shape[0], -1) if val.ndim else val.reshape(1, 1)
    if not val.size:
      return
    lo[:, d] = np.maximum(lo[:, d], val.min(1))
    hi[:, d] = np.minimum(hi[:, d], val.max(1) + 1)
  if data and len(progs):
    chk.data_scatters.append((w.root.id, lo, np.maximum(hi, lo), progs, tuple(data), acc.op.loc))


def data_scatter_races(chk) -> list:
  """MG951 at a plain store (probe 55a's `scatter_plain`) of an output where the plain stores of one program cover all
  that a data scatter of another program may reach: its span along the dimensions of data, its known indices' box
  along the others (so every element it scatters inside the output lands in what that program writes)."""
  out = []
  batch = chk.kernel.grid[chk.kernel.batch_axis] if chk.kernel.batch_axis is not None else 1
  if chk.ev.P // batch < 2:
    return out
  for root in {r for r, *_ in chk.data_scatters}:
    stores = [(b, p, loc) for r, b, p, loc in chk.scatter_plain if r == root and b is not None]
    scatters = [x for x in chk.data_scatters if x[0] == root]
    p = next((p for p in chk.kernel.outputs if p.value.id == root), None)
    shape = tuple(p.value.type.shape) if p is not None else ()
    if p is None or not stores or math.prod(shape) > _CELLS:
      continue
    race = _first_race(stores, scatters, shape)
    if race is None:
      continue
    b, a, sloc, box, dloc = race
    aliased = root in {chk.kernel.outputs[j].value.id for j in (chk.kernel.aliases or {}).values()}
    out.append(E.RaceError(
        f"program {chk.ev.program(b)} writes {_region(p.name, *box, shape)} here while program {chk.ev.program(a)}"
        f" adds to {p.name} with atomics at indices of data, which land in what program {chk.ev.program(b)} writes"
        f" whatever the data is: programs run in no fixed order, so the sum depends on timing", sloc,
        notes=(f"{dloc}: program {chk.ev.program(a)}'s atomic update",), hint=plain_write_hint(p.name, aliased)))
  return out


def _first_race(stores, scatters, shape):
  """(storing program, scattering program, the store's loc and box there, the scatter's loc) of the first pair of
  different programs where the storing one's plain stores cover the scattering one's reach; None if none. A writer's
  stores are rasterised over their bounding box only, and only where that box holds some other program's reach."""
  writers = sorted({int(q) for _, pids, _ in stores for q in pids})[:_WRITERS]
  for b in writers:
    mine = [(loc, lo[row], hi[row]) for (lo, hi), pids, loc in stores for row in np.flatnonzero(pids == b)]
    base = np.min([m[1] for m in mine], axis=0)
    top = np.max([m[2] for m in mine], axis=0)
    reach = [(lo[dpids != b], hi[dpids != b], dpids[dpids != b], dloc) for _, lo, hi, dpids, _, dloc in scatters]
    reach = [(lo, hi, p, loc, ((lo >= base) & (hi <= top) & (hi > lo)).all(axis=1)) for lo, hi, p, loc in reach]
    if not any(inside.any() for *_, inside in reach):
      continue
    mask = np.zeros(tuple(int(n) for n in top - base), bool)
    for _, lo, hi in mine:
      mask[tuple(slice(int(x), int(y)) for x, y in zip(lo - base, hi - base))] = True
    table = np.pad(mask.astype(np.int64), [(1, 0)] * len(shape))
    for d in range(len(shape)):
      table = table.cumsum(axis=d)
    for lo, hi, dpids, dloc, inside in reach:
      if not inside.any():
        continue
      lo, hi, dpids = lo[inside] - base, hi[inside] - base, dpids[inside]
      ok = _covered(table, lo, hi)
      if ok.any():
        a = int(dpids[np.argmax(ok)])
        loc, slo, shi = max(mine, key=lambda m: int(np.prod(np.asarray(m[2]) - np.asarray(m[1]))))
        return b, a, loc, (slo, shi), dloc
  return None


def _covered(table, lo, hi):
  """Whether each box (rows of lo, hi) lies wholly in the mask whose summed-area `table` is given."""
  nd = lo.shape[1]
  got = np.zeros(len(lo), np.int64)
  for corner in itertools.product((0, 1), repeat=nd):
    idx = tuple(np.where(corner[d], hi[:, d], lo[:, d]) for d in range(nd))
    got += (-1) ** (nd - sum(corner)) * table[idx]
  return got == np.prod(hi - lo, axis=1)


def _region(name, lo, hi, shape) -> str:
  """`name` where the box (lo, hi) is all of it, else name[lo:hi, ...] (a single index where one element)."""
  if all(int(a) == 0 and int(b) == n for a, b, n in zip(lo, hi, shape)):
    return f"all of {name}"
  parts = [":" if int(a) == 0 and int(b) == n else str(int(a)) if int(b) == int(a) + 1 else f"{int(a)}:{int(b)}"
           for a, b, n in zip(lo, hi, shape)]
  return f"{name}[{', '.join(parts)}]"
