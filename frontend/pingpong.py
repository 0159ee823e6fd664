"""Ping-pong scheduling of a warp-specialised loop's two compute warpgroups:
`ml.range(n, stages=s, warp_specialize=True, pingpong=True)` in a kernel with block=256.

FlashAttention-3's schedule. Each warpgroup owns its rows of the loop's tensor-core tiles;
the two take turns issuing dots, so that one's softmax (the code between its dots) runs
while the other's dots do. A turn is passed between them on two named barriers (`Turn`):
a warpgroup takes its turn right before the body's last dot and passes it right after the
body's first dot (of the next iteration), so a turn is "p @ v of this block, q @ k.T of the
next" and the softmax in between runs while the other warpgroup's dots do:

    wg 0:  take [A0] pass  softmax  take [B0][A1] pass  softmax  take [B1] ...
    wg 1:        take [A0] pass  softmax  take [B0][A1] pass ...

Before the loop warpgroup 1 hands warpgroup 0 the first turn and both take one (for the
first iteration's first dot); after it both pass and warpgroup 0 takes the turn warpgroup 1
passed last, so every wait is matched by one arrival whatever the trip count. (A body of one
dot takes a turn before it and passes it after.) Turns order
no memory. Since the warpgroups run apart, a barrier of all compute threads inside the body
(one they would reach at different points) is rejected, and so are dots inside branches or
inner loops of the body (the turns would not pair up).
"""
from __future__ import annotations

from . import errors as E
from . import hw
from . import ir
from .ir import Access
from .ops.control import For, Turn
from .types import Space

_MEET = (Access.CTA_BARRIER, Access.CLUSTER_BARRIER)


def insert_turns(kernel: ir.Kernel) -> None:
  """Put the turns of every ping-pong loop in (after the sync pass: its dot waits are in place)."""
  for block in _blocks(kernel.body):
    for o in list(block.ops):
      if isinstance(o, For) and o.pingpong:
        _check(kernel, o)
        _insert(block, o)


def _blocks(block: ir.Block):
  yield block
  for o in block.ops:
    for r in o.regions:
      yield from _blocks(getattr(o, r))


def _issues_dot(o) -> bool:
  return any(a == Access.MMA_ISSUE for _, a in ir.traits_of(o).effects(o))


def _check(kernel, loop) -> None:
  warpgroups = kernel.block // hw.WARPGROUP
  if warpgroups != 2:
    raise E.WarpSpecializeError(
        f"pingpong=True needs two compute warpgroups to take turns, and this kernel has {warpgroups}"
        f" (block={kernel.block})", loop.loc,
        hint="launch it with block=256 (each warpgroup then owns half the rows of every tensor-core tile)")
  for o in loop.body.ops:
    if any(_issues_dot(x) for r in o.regions for x in ir.walk(getattr(o, r))):
      raise E.WarpSpecializeError(
          "a dot inside a branch or an inner loop of a pingpong=True loop: the warpgroups' turns are taken"
          " at the dots of the loop's body, so every iteration must issue them unconditionally", o.loc,
          hint="issue the dots at the top level of the loop body (mask with ml.where rather than an if)")
  if not any(_issues_dot(o) for o in loop.body.ops):
    raise E.WarpSpecializeError(
        "this pingpong=True loop issues no dot: the warpgroups take turns on the tensor cores", loop.loc,
        hint="drop pingpong=True")
  _check_reductions(kernel, loop)
  for o in ir.walk(loop.body):
    t = ir.traits_of(o)
    through_smem = t.moves_elements and any(r is not None and getattr(r.type, "space", None) == Space.SMEM
                                            for r, _ in t.effects(o))   # (not a gather from GMEM)
    if through_smem or any(a in _MEET for _, a in t.effects(o)):
      raise E.WarpSpecializeError(
          "here every compute thread of the CTA would have to meet, but the warpgroups of a pingpong=True"
          " loop run a turn apart, so they would meet at different points of the loop", o.loc,
          hint="move this out of the loop (SMEM written from registers, a transpose, a scan or a TMA"
               " store need all threads to meet), or drop pingpong=True")


def _check_reductions(kernel, loop) -> None:
  """A full reduction whose warpgroups combine their parts (smem.exchange_slots) makes them meet:
  between the body's first and last dot (where neither holds the turn: the softmax of attention)
  they both get there; elsewhere the one holding the turn would wait for the other, which waits for
  that turn (a hang on the GPU)."""
  from .ops.shape import Reduce
  from .smem import column_exchange, exchange_slots
  ops = loop.body.ops
  dots = [i for i, o in enumerate(ops) if _issues_dot(o)]
  first, last = dots[0], dots[-1]
  for i, top in enumerate(ops):
    if first < i < last or first == last:
      continue
    for o in [top, *(x for r in top.regions for x in ir.walk(getattr(top, r)))]:
      if isinstance(o, Reduce) and column_exchange(kernel, o):
        raise E.WarpSpecializeError(
            "this column statistic combines the two warpgroups' parts (each holds its own rows of the tile), so"
            " they must meet here, but here one warpgroup of the pingpong=True loop holds the turn on the tensor"
            " cores, waiting for the other, which waits for that turn", o.loc,
            hint=("take it between the loop's first and last ml.dot (where neither warpgroup holds the turn) or"
                  " after the loop, where the warpgroups meet" if first != last else
                  "take it after the loop, where the warpgroups meet") + ", or drop pingpong=True")
      if isinstance(o, Reduce) and exchange_slots(kernel, o):
        raise E.WarpSpecializeError(
            "this full reduction combines the two warpgroups' parts, so they must meet here, but here one"
            " warpgroup of the pingpong=True loop holds the turn on the tensor cores, waiting for the other,"
            " which waits for that turn", o.loc,
            hint=_reduction_hint(o, first != last))


def _reduction_hint(o, two_dots: bool) -> str:
  """Where the loop accumulates the reduction with its own operation (`s = s + ml.sum(x)`), carry
  per-row (or per-element) parts, each warpgroup's own, and reduce them after the loop; else reduce
  between the two dots (where neither warpgroup holds the turn), or leave ping-pong off."""
  from .types import dtype_name, resolve
  x = o.x.name if (o.x.name or "").isidentifier() else "x"
  kind = o.kind.value
  fn = f"ml.{kind}"
  dt = f"jnp.{dtype_name(resolve(o.x.type.dtype))}"
  whole = f"{fn}({x})"
  part = f"{fn}({x}, axis=1)" if len(o.x.type.shape) == 2 else x
  n = (o.x.type.shape[0],)
  if kind == "sum":
    acc, step, start = f"s = s + {whole}", f"part = part + {part}", f"part = ml.zeros({n}, {dt})"
  else:
    f = "ml.maximum" if kind == "max" else "ml.minimum"
    inf = "float('-inf')" if kind == "max" else "float('inf')"
    acc, step, start = f"s = {f}(s, {whole})", f"part = {f}(part, {part})", f"part = ml.full({n}, {inf}, {dt})"
  where = "reduce between the loop's first and last ml.dot (where neither warpgroup holds the turn), or" if two_dots else ""
  return (f"where the loop accumulates it ({acc}), carry parts each warpgroup reduces alone and reduce them after"
          f" the loop, where the warpgroups meet: {start} before the loop, {step} in it, s = {fn}(part) after it;"
          f" else {where} drop pingpong=True")


def _insert(block: ir.Block, loop: For) -> None:
  """One dot: a turn is that dot. Several: a turn is the last dot of one step and the first of the
  next, so the first step's first dot takes a turn before the loop and the last step's last dot
  passes one after it."""
  ops = loop.body.ops
  dots = [i for i, o in enumerate(ops) if _issues_dot(o)]
  first, last = dots[0], dots[-1]
  out = []
  for i, o in enumerate(ops):
    if i == last:
      out.append(Turn(True, None, o.loc))       # take, before the last dot
    out.append(o)
    if i == first and first != last:
      out.append(Turn(False, None, o.loc))      # pass, after the first one
    if i == last and first == last:
      out.append(Turn(False, None, o.loc))
  ops[:] = out
  at = next(i for i, o in enumerate(block.ops) if o is loop)
  loc = loop.loc
  inner = [loop] if first == last else [Turn(True, None, loc), loop, Turn(False, None, loc)]
  block.ops[at:at + 1] = [Turn(False, 1, loc)] + inner + [Turn(True, 0, loc)]
