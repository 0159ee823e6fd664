"""A plain store beside an atomic scatter at indices of data (probe 56b).

Probe 55a raced a plain store of an output with the atomic scatters into it where every scatter's indices are known
while compiling (`ml.arange` chains); a scatter at indices of data (a histogram's bins) left the output to interpret
mode. Where its indices are data along some dimensions, a scatter still lands somewhere in the span those dimensions
have (an index outside is dropped, as jnp's), so a plain store by another program that covers that whole span, and
meets the scatter's known indices along the other dimensions, writes elements the scatter adds to whatever the data
is: `if i == 0: o[...] = 0` before every program's `ml.atomic_add(o.at[ids], 1)`. That is MG951 at the store. A store
that covers part of the span (a histogram's header element the kernel writes, probe 24b), or only the program's own
row of a row-indexed scatter (`o[i, :] = 0` beside `o.at[i, ids]`), stays interpret mode's.
"""
from __future__ import annotations

import numpy as np

from . import errors as E
from .races import plain_write_hint

_PAIRS = 1 << 22       # (program pairs compared at most: the first programs of each side beyond it)


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
  """MG951 at each plain store (probe 55a's `scatter_plain`) of an output whose data scatters land in it whatever
  their data, from another program."""
  out, seen = [], set()
  batch = chk.kernel.grid[chk.kernel.batch_axis] if chk.kernel.batch_axis is not None else 1
  if chk.ev.P // batch < 2:
    return out
  for root, boxes, spids, sloc in chk.scatter_plain:
    if boxes is None or root not in chk.scatter_data or sloc in seen:
      continue
    for sroot, lo, hi, dpids, data, dloc in chk.data_scatters:
      if sroot != root:
        continue
      race = _first_pair(boxes, spids, lo, hi, dpids, data)
      if race is None:
        continue
      b, a, (slo, shi) = race
      name = next(p.name for p in chk.kernel.outputs if p.value.id == root)
      shape = next(p.value.type.shape for p in chk.kernel.outputs if p.value.id == root)
      aliased = root in {chk.kernel.outputs[j].value.id for j in (chk.kernel.aliases or {}).values()}
      out.append(E.RaceError(
          f"program {chk.ev.program(b)} writes {_region(name, slo, shi, shape)} here while program"
          f" {chk.ev.program(a)} adds to {name} with atomics at indices of data, which land in what this store"
          f" writes whatever the data is: programs run in no fixed order, so the sum depends on timing",
          sloc, notes=(f"{dloc}: program {chk.ev.program(a)}'s atomic scatter",),
          hint=plain_write_hint(name, aliased)))
      seen.add(sloc)
      break
  return out


def _first_pair(boxes, spids, lo, hi, dpids, data):
  """(storing program, scattering program, the store's box) of the first two different programs where the store
  covers the scatter's span along its dimensions of data and meets its box along the others; None if none."""
  slo, shi = boxes
  n = max(1, _PAIRS // max(1, len(dpids)))
  slo, shi, spids = slo[:n], shi[:n], spids[:n]
  nd = slo.shape[1]
  ok = (spids[:, None] != dpids[None, :])
  for d in range(nd):
    s0, s1, d0, d1 = slo[:, d, None], shi[:, d, None], lo[None, :, d], hi[None, :, d]
    ok &= (s0 <= d0) & (s1 >= d1) & (d1 > d0) if d in data else (np.maximum(s0, d0) < np.minimum(s1, d1))
  if not ok.any():
    return None
  i, j = np.argwhere(ok)[0]
  return int(spids[i]), int(dpids[j]), (slo[i], shi[i])


def _region(name, lo, hi, shape) -> str:
  """`name` where the box (lo, hi) is all of it, else name[lo:hi, ...] (a single index where one element)."""
  if all(int(a) == 0 and int(b) == n for a, b, n in zip(lo, hi, shape)):
    return f"all of {name}"
  parts = [":" if int(a) == 0 and int(b) == n else str(int(a)) if int(b) == int(a) + 1 else f"{int(a)}:{int(b)}"
           for a, b, n in zip(lo, hi, shape)]
  return f"{name}[{', '.join(parts)}]"
