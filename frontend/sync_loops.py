"""The sync pass's loop entry (frontend/sync.py): what a `for` body may assume at its top.

A body's first trip starts from the state before the loop (the pass ordered it when entering); the
others from the state the previous trip left at its Yield. The pass used to assume there everything
the body touches (each register write unordered, each dot's buffers retired by one warpgroup only),
so a body whose last barrier orders all of it still met again at its top. `back_edge_fixed_point`
finds what the back edge really carries instead: design note 196. The dot groups still running at the
back edge (`carried_dots`) and the waits the back edge's copies need (`back_edge_wait`) live here too.
"""
from __future__ import annotations

from . import ir
from .gmem_disjoint import prev_trip
from .ops.control import Yield
from .ops.mma import Dot, DotWait
from .sync_gmem import WindowSet
from .types import LayoutKind, RefType, TensorType

UNKNOWN_WINDOW = object()
UNKNOWN_DOT = -1


def register_a(ops, values=True) -> frozenset:
  """What the register A operands of the dots among `ops` are, to the sync pass (WGMMA reads them
  while it runs): each operand's value id, and the dot itself (`("dot", id)`: Mosaic GPU's fence
  copies the operand into the instruction's own registers, which the same dot's next trip rewrites
  even when the operand is defined outside the loop). `values=False`: the dots only. With `values`,
  also `("out", id)` for every dot among `ops` (an SMEM A too): WGMMA writes its accumulator while it
  runs, and the same dot issued again on a later trip writes those registers first unless it chains
  that very accumulator (`SyncPass.acc_rewritten`, design note 203)."""
  dots = [o for o in ops if isinstance(o, Dot) and not isinstance(o.a.type, RefType)]
  out = [("out", id(o)) for o in ops if isinstance(o, Dot)] if values else []
  return frozenset([("dot", id(o)) for o in dots] + ([o.a.id for o in dots] if values else []) + out)


class LoopEntry:
  def enter_loop(self, o, inner, carry, dots, carried, mma_read, st, idle=False) -> None:
    """A loop body's entry state: the previous trips' stores and register writes (their loop index
    renamed), loads in flight across the back edge, the previous trip's dots still running (none if
    `idle`: the body was found to end with every dot awaited)."""
    for root, w in self.store_keys(o):
      inner.store_windows.setdefault(root, WindowSet()).add(prev_trip(w, o, self.defs))
    for root, k in self.reg_write_keys(o):
      inner.gmem_reg_writes.setdefault(root, WindowSet()).add(prev_trip(k, o, self.defs))
    if carry:  # loads issued before the loop, or by the previous iteration for this one
      inner.pending_load = {root: dict(st.pending_load[root]) for root in carry}
      inner.carried = {slot for root in carry for slot in st.pending_load[root]}
    if dots and not idle:   # the previous iteration's dots still run (each dot yielding a carried value)
      inner.dots = [UNKNOWN_DOT if i is None else o.body.args[1 + i].id for i, _ in carried] or [UNKNOWN_DOT]
      inner.dot_roots = [set(mma_read) for _ in inner.dots]
      inner.dot_a = [a for _, a in carried] or [register_a(ir.walk(o.body))]
      inner.unknown_dot_values = {a.id for a in o.body.args[1:]}

  def back_edge_wait(self, st, o, block) -> int | None:
    """How many dot groups may stay in flight across a pipelined body's back edge (`o`, its Yield): the
    copies into the body's arguments rewrite a register A operand carried there (`a_rewritten`), and
    read a running result that cannot take its argument's registers in place (`copied_results`)."""
    keep = self.a_rewritten(st, {a.id for a in block.args})
    copied = copied_results(block)
    hit = [i for i, d in enumerate(st.dots) if d in copied]
    if hit:
      later = len(st.dots) - 1 - hit[-1]
      keep = later if keep is None else min(keep, later)
    return keep

  def carried_dots(self, body: ir.Block) -> list:
    """The dot groups that may still run when the body ends (so when the next iteration starts,
    or the loop ends), oldest first: for each, the position of the yielded value it computes,
    or None (a group computing no yielded value), and its register A operands (`register_a`).
    Follows the body's own dots and the waits already in it (a pipelined loop's), and the back
    edge's own wait (`copied_results`); empty if it issues none at its top level."""
    values = body.ops[-1].values if body.ops and isinstance(body.ops[-1], Yield) else ()
    where = {id(v): i for i, v in enumerate(values)}
    copied = copied_results(body)
    flight = []       # (position, register A, copied at the back edge, the value it computes)
    for x in body.ops:
      inner = _nested(x)
      if any(self.issues_dot(y) for y in inner):
        flight = []   # the pass retires every dot before a region issuing dots, which retires its own
      # a read of a running result retires its group and the older ones (`dot_wait_before`: no dot of one
      # body stays unknown for the next trip when the body reads its result)
      reads = {v.id for y in [x, *inner] if not (y is x and isinstance(x, Yield))   # (back edge: back_edge_wait)
               for v in ([y.a] if self.issues_dot(y) else y.operands())
               if isinstance(v.type, TensorType) and v.type.layout.kind == LayoutKind.WGMMA}
      hit = [i for i, f in enumerate(flight) if f[3] in reads]
      if hit:
        flight = flight[hit[-1] + 1:]
      if self.issues_dot(x):
        flight.append((where.get(id(x.results[0])) if x.results else None, register_a([x]),
                       bool(x.results) and x.results[0].id in copied, x.results[0].id if x.results else None))
      elif isinstance(x, DotWait):
        flight = flight[max(0, len(flight) - x.pending):]
    last = [i for i, f in enumerate(flight) if f[2]]
    return [f[:2] for f in flight[last[-1] + 1 if last else 0:]]

  @staticmethod
  def enter_back_edge(inner, edge: dict) -> None:
    """The register accesses of SMEM the previous trip left unordered (windows unknown)."""
    inner.dirty, inner.atomic = set(edge["dirty"]), set(edge["atomic"])
    inner.unfenced, inner.reg_read = set(edge["unfenced"]), set(edge["reg_read"])
    inner.reg_windows = {x: WindowSet([UNKNOWN_WINDOW]) for x in inner.dirty | inner.reg_read}

  def back_edge_fixed_point(self, o, enter, conservative: dict, outer_retired: set) -> None:
    """Rewrite the body of `for` loop `o` assuming at its top only what the previous trip leaves
    unordered at its end (the state at its Yield), not everything the body touches: a barrier late in
    the body (a commit before a TMA store, a pipelined loop's refill guard) then orders the next trip's
    first writes, and the body needs no barrier of its own there (design note 196). The assumption
    starts empty and widens by each trial's end state until the end state is within it (a fixed
    point: what the back edge carries is what was assumed); each trial's rewriting is undone but the
    last one's. Bounded: past a few rounds, the conservative assumption. `enter(edge)` makes the
    body's entry state; `outer_retired`, the dots retired before the loop (not the back edge's)."""
    conservative = {**conservative, "busy": {1}}      # ("busy": dots still run at the back edge)
    edge = {k: set() for k in conservative}
    for attempt in range(4):
      if attempt == 3:
        edge = conservative
      saved = [(b, list(b.ops)) for b in _blocks(o.body)]
      inner = enter(edge)
      self.block(o.body, inner)
      end = {"dirty": inner.dirty, "atomic": inner.atomic, "reg_read": inner.reg_read,
             "unfenced": inner.unfenced, "dot_retired": inner.dot_retired - outer_retired,
             "busy": {1} if inner.dots else set()}
      if attempt == 3 or all(end[k] <= edge[k] for k in edge):
        return
      for b, ops in saved:
        b.ops[:] = ops
      edge = {k: edge[k] | end[k] for k in edge}

def _blocks(block: ir.Block) -> list:
  """`block` and every block nested in its ops, at any depth."""
  out = [block]
  for o in block.ops:
    for r in o.regions:
      out += _blocks(getattr(o, r))
  return out


def copied_results(body: ir.Block) -> set:
  """The ids of the dot results a loop body yields (`body`, ending in its Yield) that the back edge must copy,
  reading registers a running dot still writes: yielded at two positions (`last = acc`: one is a copy), or
  into a carried value whose old value is still live when the dot is issued (used after it, or yielded at
  another position: `acc1, acc2 = ml.dot(a, b, acc2), acc1`), so the two cannot share registers. A result
  yielded in place of the value it was computed from (`acc = ml.dot(a, b, acc)`, or from `acc * alpha`
  read before the dot) takes that value's registers and is copied by nothing."""
  if not body.ops or not isinstance(body.ops[-1], Yield):
    return set()
  values = list(body.ops[-1].values)
  carried = body.args[len(body.args) - len(values):]
  pos = {x.results[0].id: k for k, x in enumerate(body.ops) if isinstance(x, Dot) and x.results}
  out = set()
  for i, v in enumerate(values):
    if v.id not in pos:
      continue
    if any(w is v for j, w in enumerate(values) if j != i):
      out.add(v.id)
      continue
    arg = carried[i]
    later = [y for x in body.ops[pos[v.id] + 1:] for y in [x, *_nested(x)]]
    if any(u is arg for y in later for u in y.operands()):
      out.add(v.id)
  return out


def _nested(o) -> list:
  return [y for r in o.regions for y in ir.walk(getattr(o, r))]
