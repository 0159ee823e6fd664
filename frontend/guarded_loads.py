"""TMA loads under a run-time `if` in a pipelined loop's body, issued on every trip (probe 56c).

A block-sparse matmul or attention skips the blocks its layout table leaves out, `if lay[i, k]:` around the
block's copies and its dot. A pipelined loop issues each trip's loads `stages - 1` trips early, before the trip's
`if` runs, so the loads cannot stay under it (MG502 before). Where the loads may run on every trip without
changing what the kernel computes, they are moved out of the `if`, just before it, with the scalar arithmetic of
their windows: the `if` still skips the dot (the tensor cores' work), and the loop pipelines the loads as it does
loads written at the top of the body. The skipped blocks are still read (their bandwidth is spent); a loop over
the list of the blocks that count (`k = indices[first + p]`) reads only those.

A load moves when: its destination is a buffer allocated before the loop that no other op of the kernel fills
and that only the ops of the load's own branch read (a read elsewhere would see the tile of a skipped trip
where the kernel as written kept an older one); and its window's operands are computed, in the branch, by pure
scalar arithmetic and views (no read of memory, which the `if` may guard: `if p < n: k = idx[p]`). A moved
load's window is then checked on every trip, as any load's (a window past the array's end on a skipped trip
is reported, MG203). Loads under an `if` nested in the branch move out one level at a time.
"""
from __future__ import annotations

from . import ir
from .ops.control import If
from .ops.memory import SmemAlloc, View, is_load, root_in
from .types import RefType, ScalarType


def hoist_guarded_loads(kernel, body) -> None:
  """Move the loads under the top-level ifs of a pipelined loop's `body` out, before their if, where they may
  run on every trip (see the module's docstring)."""
  defs = {r.id: o for o in ir.walk(kernel.body) for r in o.results}
  inside = {id(o) for o in ir.walk(body)}
  _hoist_block(kernel, body, defs, inside)


def _hoist_block(kernel, block, defs, inside) -> None:
  out = []
  for o in block.ops:
    if isinstance(o, If):
      for r in o.regions:
        region = getattr(o, r)
        _hoist_block(kernel, region, defs, inside)
        out.extend(_hoist_region(kernel, region, defs, inside))
    out.append(o)
  block.ops[:] = out


def _hoist_region(kernel, region, defs, inside) -> list:
  """The ops of `region` (a branch) to run before its if, taken out of it: each movable load, after the
  scalar ops and views its window needs."""
  moved = []
  for c in list(region.ops):
    if not is_load(c) or c not in region.ops:
      continue
    need = _movable(kernel, region, c, defs, inside)
    if need is None:
      continue
    for x in need:
      region.ops.remove(x)
    moved.extend(need)
  return moved


def _movable(kernel, region, c, defs, inside):
  """[ops of `region` computing c's operands, in order, then c] if the load `c` may run on every trip; else
  None."""
  buf = root_in(defs, c.dst)
  alloc = defs.get(buf.id)
  if not isinstance(alloc, SmemAlloc) or id(alloc) in inside:
    return None
  own = {id(o) for o in ir.walk(region)}
  local = {r.id: o for o in region.ops for r in o.results}
  for u in ir.walk(kernel.body):
    if u is c or isinstance(u, SmemAlloc):
      continue
    ops = [v for v in u.operands() if isinstance(v, ir.Value)]
    if any(root_in(defs, v) is buf for v in ops) and id(u) not in own:
      if isinstance(u, View) and all(id(w) in own for w in ir.walk(kernel.body) if u.result in w.operands()):
        continue        # a view made outside the branch and used only in it
      return None
    if is_load(u) and root_in(defs, u.dst) is buf:
      return None       # another load fills the buffer
  need, seen = [], set()

  def visit(v) -> bool:
    if not isinstance(v, ir.Value) or v.id not in local or v.id in seen:
      return True
    seen.add(v.id)
    o = local[v.id]
    if not _pure_address(o):
      return False
    ok = all(visit(x) for x in o.operands())
    need.append(o)
    return ok

  if not all(visit(v) for v in c.operands()):
    return None
  return sorted(need, key=region.ops.index) + [c]


def _pure_address(o) -> bool:
  """Pure scalar arithmetic, or a view (a window of an array or buffer): no memory read, not even of an input
  (`k = idx[p]` under `if p < n:` may lie past idx's end on the trips the if skips)."""
  if isinstance(o, View):
    return True
  t = ir.traits_of(o)
  return (t.pure and not o.regions and bool(o.results) and all(isinstance(r.type, ScalarType) for r in o.results)
          and not reads_memory(o))


def reads_memory(o) -> bool:
  """An op reading an element of a ref (a table's entry, `idx[i, p]`)."""
  return any(isinstance(getattr(v, "type", None), RefType) for v in o.operands()) and not isinstance(o, View)


def window_reads(region, c) -> list:
  """The ops of `region` reading memory that the window of its load `c` is computed from (a table's entry)."""
  local = {r.id: o for o in ir.walk(region) for r in o.results}
  out, seen, todo = [], set(), [v for v in c.operands() if isinstance(v, ir.Value)]
  while todo:
    v = todo.pop()
    o = local.get(v.id)
    if o is None or id(o) in seen:
      continue
    seen.add(id(o))
    if reads_memory(o):
      out.append(o)
    todo.extend(x for x in o.operands() if isinstance(x, ir.Value))
  return out
