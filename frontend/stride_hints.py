"""The hint for a persistent loop that does not step by the grid: `for t in range(ml.program_id(0), n, 1)`
(or a step other than the number of programs along that axis) has programs meet on the same tiles (a
RaceError) or skip tiles between their steps (an UncoveredOutputError), where the grid-stride loop,
`range(ml.program_id(0), n, ml.num_programs(0))`, gives each tile one program."""
from __future__ import annotations

from . import ir


def persistent_stride_hint(kernel, loc) -> str | None:
  """The hint for the error at `loc` (a write into an output) inside a loop that starts at
  ml.program_id(a) and steps by a static count other than the grid's extent along `a`; None otherwise."""
  from .ops.control import For, ProgramId
  if loc is None:
    return None
  pids = {o.result.id: o.axis for o in ir.walk(kernel.body) if isinstance(o, ProgramId)}
  for o in ir.walk(kernel.body):
    if not isinstance(o, For) or not isinstance(o.step, int) or isinstance(o.step, bool):
      continue
    axis = pids.get(getattr(o.start, "id", None))
    if axis is None or axis == kernel.batch_axis or kernel.grid[axis] <= 1 or o.step == kernel.grid[axis]:
      continue
    if not any(x.loc is not None and (x.loc.filename, x.loc.lineno) == (loc.filename, loc.lineno)
               for x in ir.walk(o.body)):
      continue
    g = kernel.grid[axis]
    what = ("so programs meet on the same tiles" if o.step < g else
            f"so the tiles t with t % {o.step} >= {g} are left to no program")
    return (f"the loop at line {o.loc.lineno} walks tiles from ml.program_id({axis}) in steps of {o.step}, but the"
            f" grid has {g} programs along axis {axis}, {what}: step by the number of programs, range(ml.program_id"
            f"({axis}), n, ml.num_programs({axis})), so each tile has one program")
  return None
