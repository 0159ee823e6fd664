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
    if _through_smem(o) or any(a in _MEET for _, a in ir.traits_of(o).effects(o)):
      if (staged := _staged_a(loop, o)) is not None:
        raise staged
      raise E.WarpSpecializeError(
          "here every compute thread of the CTA would have to meet, but the warpgroups of a pingpong=True"
          " loop run a turn apart, so they would meet at different points of the loop", o.loc,
          hint=_MOVES_HINT if _moves_at(kernel, loop, o.loc) else
          "move this out of the loop (SMEM written from registers, a transpose, a scan or a TMA"
          " store need all threads to meet), or drop pingpong=True")


def _through_smem(o) -> bool:
  """An op moving a register tensor's elements between threads through SMEM (not a gather from GMEM)."""
  t = ir.traits_of(o)
  return t.moves_elements and any(r is not None and getattr(r.type, "space", None) == Space.SMEM
                                  for r, _ in t.effects(o))


def _moves_at(kernel, loop, loc) -> bool:
  """Whether the user's line at `loc` moves register elements through SMEM the compiler allocates for it (a slice, a
  concatenation, a transpose of a register tile: an op moving elements, or a store into a buffer allocated at that
  line, which is no `ml.smem` of the user's), not a write of the user's own buffer."""
  from .ops.memory import SmemAlloc, Store, root_in
  defs = {r.id: x for x in ir.walk(kernel.body) for r in x.results}
  return any(x.loc == loc and (_through_smem(x) or isinstance(x, Store) and isinstance(
      defs.get(root_in(defs, x.ref).id), SmemAlloc) and defs[root_in(defs, x.ref).id].loc == loc)
      for x in ir.walk(loop.body))


# (a per-trip slice or concatenation of loaded tiles, probe 62b: "move this out of the loop" fits it badly)
_MOVES_HINT = ("this moves a register tile's elements between threads, through SMEM: read the part each trip needs"
               " straight from memory instead, a window of the ref (x.at[rows, ml.ds(k * bk + start, n)][...], or a"
               " TMA copy into a buffer of its own) in place of slicing, concatenating or transposing register tiles;"
               " or move it out of the loop, or drop pingpong=True")


def _staged_a(loop, o):
  """The error of a register A that the compiler stages through an SMEM scratch for the dot at `o`'s line (an 8-bit
  A of a K the tensor cores do not take from registers, a float32 A, which TF32 reads from SMEM): the meeting is the
  staging's, and the fix is to load A by TMA as B is (probe 62b: it said "here every compute thread ... would have to
  meet" at the dot, with a hint to move the dot out of the loop). None where `o` is no such staging."""
  from .ops.memory import SmemAlloc, Store
  from .ops.mma import Dot
  from .types import RefType, dtype_name, resolve
  ops = list(ir.walk(loop.body))
  defs = {r.id: x for x in ops for r in x.results}
  for d in (x for x in ops if isinstance(x, Dot) and x.loc == o.loc):
    if not isinstance(defs.get(d.a.id), SmemAlloc):
      continue
    store = next((x for x in ops if isinstance(x, Store) and x.ref is d.a), None)
    if store is None or isinstance(store.value.type, RefType):
      continue
    m, k = store.value.type.shape
    dt = dtype_name(resolve(store.value.type.dtype))
    name = store.value.name if (store.value.name or "").isidentifier() else "a"
    window = _window_text(defs.get(store.value.id)) or f"<the window {name} reads>"
    return E.WarpSpecializeError(
        f"this ml.dot's A, {name} ({dt}[{m}, {k}] in registers), is one the tensor cores read from SMEM here, so"
        f" the compiler stages it through an SMEM buffer, where every compute thread of the CTA would have to meet;"
        f" the warpgroups of a pingpong=True loop run a turn apart, so they would meet at different points of the"
        f" loop", o.loc,
        hint=f"load A into SMEM by TMA, as B is: {name}_s = ml.smem(({m}, {k}), jnp.{dt}) before the loop,"
             f" ml.copy({window}, {name}_s) in it, and ml.dot({name}_s, ...); or drop pingpong=True")
  return None


def _window_text(load) -> str | None:
  """The GMEM window a register tile was read from as the user wrote it (`x0.at[ml.ds(i * 128, 128), :]` of
  `x0.at[...][...]` or `.load()`), for a hint; None for anything else."""
  import ast
  from .loc import expr_at
  from .ops.memory import Load
  from .types import RefType, Space
  node = expr_at(load.loc) if isinstance(load, Load) and isinstance(load.ref.type, RefType) and \
      load.ref.type.space == Space.GMEM else None
  if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value is Ellipsis:
    node = node.value            # (x.at[...][...]: the view read whole)
  elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load" \
      and not node.args and not node.keywords:
    node = node.func.value
  if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at"):
    return None
  return ast.unparse(node)


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
