"""Where a pipelined loop refills the stage its previous trip read, once the sync pass has run.

frontend/pipeline.py issues the next loads of a loop whose dots (or several warpgroups' register
reads) read the loaded buffers behind a guard: a DotWait retiring the previous trip's dots, then a
block barrier, so that no thread still reads the stage the loads overwrite (S - 1 trips ahead, the
stage of the previous trip). The sync pass then adds the barriers the body needs of its own: a
commit before a TMA store, a barrier before SMEM other warpgroups read. When one of those already
stands after every read of the previous trip's stage, the guard's barrier orders nothing new: this
pass drops it and issues the refill just after that barrier (at the body's top when the previous
trip's own last barrier follows all its reads). The attention backward's step had three block
barriers and needs two (design note 196).

Read of the loaded buffers: a register read, or a dot reading them, until the DotWait that retires
it. Bail out (the guard stays) when a nested region issues dots, when dots still run at the body's
end (the previous trip's would then be retired inside this one), when a TMA store reads the loaded
buffers, or when the sync pass put ops between the guard and the refill.
"""
from __future__ import annotations

from . import ir
from .ir import Access
from .ops.control import AwaitStores, Barrier, CommitShared, WaitLoad
from .ops.memory import View
from .ops.mma import DotWait

_MEETS = (Barrier, CommitShared, AwaitStores)      # ops that lower to a block barrier


def place_refills(kernel_body, refills, defs, group) -> None:
  if not refills:
    return
  defs = {**defs, **{r.id: o for o in ir.walk(kernel_body) for r in o.results}}   # (as the sync pass sees them)
  for body, guard, refill, loaded in refills:
    _place(body, guard, refill, loaded, defs, group)


def _place(body, guard, refill, loaded, defs, group) -> None:
  ops = body.ops
  at = next((i for i, o in enumerate(ops) if o is guard), None)
  if at is None or tuple(ops[at + 1:at + 1 + len(refill)]) != tuple(refill):
    return
  roots = {group.get(r, r) for r in loaded}

  def reads_loaded(o, kinds):
    for ref, acc in ir.traits_of(o).effects(o):
      if ref is None or acc not in kinds:
        continue
      d = defs.get(ref.id)
      r = (d.ref if isinstance(d, View) else ref).id
      if group.get(r, r) in roots:
        return True
    return False

  last_read, flight, meets = -1, [], []
  for i, o in enumerate(ops):
    if i == at or any(o is x for x in refill):
      continue
    inner = [x for r in o.regions for x in ir.walk(getattr(o, r))]
    if any(reads_loaded(x, (Access.TMA_READ,)) for x in [o, *inner]):
      return
    if any(_issues_dot(x) for x in inner):
      return
    if any(reads_loaded(x, (Access.REG_READ,)) for x in [o, *inner]):
      last_read = i
    if isinstance(o, DotWait):
      done, flight = flight[:max(0, len(flight) - o.pending)], flight[max(0, len(flight) - o.pending):]
      if any(done):
        last_read = i
    elif _issues_dot(o):
      flight.append(reads_loaded(o, (Access.MMA_READ,)))
    if isinstance(o, _MEETS):
      meets.append(i)
  if flight or not meets:
    return
  import os
  if os.environ.get("MGPU_EXP_NO_REFILL"):
    return
  if meets[-1] > last_read:       # the previous trip met after all its reads: refill at the top
    after = None
  elif meets[0] < at or os.environ.get("MGPU_EXP_LATE_REFILL"):   # this trip meets after the previous trip's reads
    after = ops[meets[0]]
  else:
    return
  rest = [o for i, o in enumerate(ops) if i != at and not any(o is x for x in refill)]
  # Just after the first dots issued there (the top's: the trip's first products), so that the thread issuing the
  # loads has its warpgroup's dots running first (at the top, before them, the backward lost 9%: note 196).
  to = 0 if after is None else next(i for i, o in enumerate(rest) if o is after) + 1
  first = next((i for i in range(to, len(rest)) if _issues_dot(rest[i])), None)
  if first is not None and all(isinstance(o, (View, WaitLoad)) or not o.regions and ir.traits_of(o).pure
                               for o in rest[to:first]):
    to = first
    while to < len(rest) and (_issues_dot(rest[to]) or isinstance(rest[to], View)):
      to += 1
  body.ops[:] = rest[:to] + list(refill) + rest[to:]


def _issues_dot(o) -> bool:
  return any(a == Access.MMA_ISSUE for _, a in ir.traits_of(o).effects(o))
