"""A grid axis whose program id steps no dimension of an output's window (the hint of MG602).

A 2-D tiling written with one program id twice, `out.at[ml.ds(i * 64, 64), ml.ds(i * 64, 64)]` on a grid
(m // 64, n // 64): the programs along axis 1 all write program (i, 0)'s window, and out's other columns stay
unwritten. The generic hint (launch ml.cdiv programs along the axis that steps the dimension) does not fit: no
axis steps it. This one names the program id the window leaves out.
"""
from __future__ import annotations

import numpy as np

from .absint import UNKNOWN


def idle_axis_hint(ev, kernel, name, starts, may) -> str | None:
  """The hint where some grid axis of more than one program changes none of the starts of the first write into
  output `name` (`starts`: per dimension, an array over the programs; `may`: the programs that may write)."""
  grid = tuple(kernel.grid)
  if ev is None or may is None or not starts or any(s is UNKNOWN for s in starts) or ev.P != int(np.prod(grid)):
    return None
  if kernel.batch_axis is not None:
    return None
  lin = np.arange(ev.P, dtype=np.int64)
  strides = (1, grid[0], grid[0] * grid[1])
  may = np.asarray(may, bool)
  for a in range(3):
    if grid[a] < 2:
      continue
    first = lin - ev.pid[a] * strides[a]             # the program with the same other coordinates, 0 along a
    both = may & may[first]
    if not both.any() or not both[ev.pid[a] > 0].any():
      continue
    if all(np.array_equal(np.broadcast_to(s, (ev.P,))[both], np.broadcast_to(s, (ev.P,))[first][both])
           for s in starts):
      return (f"ml.program_id({a}) steps no dimension of {name}'s window: the {grid[a]} programs along grid axis {a}"
              f" write the same elements of {name} and leave the rest unwritten; index the dimension that axis"
              f" should step with it, as the other axes step theirs: {name}.at[ml.program_id({a}), ...] for one"
              f" element of it a program, ml.ds(ml.program_id({a}) * t, t) for tiles of t")
  return None
