"""Index vectors recomputed for each orientation they are broadcast in.

A register vector lives in one layout: as the rows' values of one tile or as the columns' of
another, not both (layouts.py reports such a conflict as MG204). Index vectors are the common
case in real kernels: a masked transpose compares `c = j * T + ml.arange(T)` against the bound
as `c[:, None]` for one tile and as `c[None, :]` for the other, as Triton users write it. Such a
vector costs a few instructions to compute, so before layouts are assigned this pass gives each
broadcast orientation of a vector computed only from `ml.arange`, constants and scalars its own
copy of the computation (the original stays for its uses that are not broadcast), as the user
would have written it for each use. So is a vector read from a kernel input (`p[...]` of a
particle's coordinates, `p[...][:, None] - p[...][None, :]` written with one load, as n-body forces
and distance matrices are): inputs are read-only, so reading the window again gives the same values
(an input aliased to an output is left alone, and so are SMEM reads). Reduced vectors are left alone:
their conflicts stay MG204.

Since probe 51f a vector stretched into tiles of different shapes in one orientation gets a copy per tile shape
too (a head_dim mask meeting a 128-row Q tile, the tensor cores' A, and 32-row K and V tiles, which the compiler
stores into SMEM in another layout), and a (1, n) row or (n, 1) column made once and stretched into several tiles
(Pallas's `head_mask = (jnp.arange(d) < head_dim)[None, :]`) is such a vector.
"""
from __future__ import annotations

import dataclasses

from . import ir
from .ops.access import MaskedLoad
from .ops.elementwise import ELEMENTWISE_OPS, Arange, Full
from .ops.memory import Load, View
from .ops.shape import Broadcast
from .types import TensorType



def _blocks(block: ir.Block):
  """Each (op, the block holding it), nested blocks included."""
  for o in block.ops:
    yield o, block
    for r in o.regions:
      yield from _blocks(getattr(o, r))


def _tensor(v) -> bool:
  return isinstance(v, ir.Value) and isinstance(v.type, TensorType)


class _Index:
  def __init__(self, defs, inputs=frozenset()):
    self.defs = defs
    self.inputs = inputs                 # ids of the input parameters no output aliases
    self.memo: dict[int, bool] = {}

  def input_read(self, d) -> bool:
    """Whether `d` reads a window of a read-only input into registers (a plain or masked load)."""
    if not isinstance(d, (Load, MaskedLoad)):
      return False
    ref = d.ref
    while isinstance(self.defs.get(ref.id), View):
      ref = self.defs[ref.id].ref
    return ref.id in self.inputs

  def pure(self, v) -> bool:
    """Whether tensor `v` is computed from ml.arange, constants, scalars and reads of inputs only. Walked with a
    stack of its own, not Python's (probe 71b: SHA-1's 80 unrolled rounds, a chain some thousand values deep, were
    a RecursionError, MG900)."""
    if not _tensor(v):
      return True                        # a number or a scalar operand
    todo = [(v, False)]
    while todo:
      x, done = todo.pop()
      d = self.defs.get(x.id)
      if done:
        self.memo[x.id] = isinstance(d, (Arange, Full)) or self._walked(d) and all(
            self.memo.get(y.id, False) for y in d.operands() if _tensor(y))
        continue
      if x.id in self.memo:
        continue
      self.memo[x.id] = False            # (no cycles in pure chains; loop carries are not pure)
      todo.append((x, True))
      if not isinstance(d, (Arange, Full)) and self._walked(d):
        todo.extend((y, False) for y in d.operands() if _tensor(y) and y.id not in self.memo)
    return self.memo[v.id]

  def _walked(self, d) -> bool:
    return isinstance(d, ELEMENTWISE_OPS) or self.input_read(d) or _row(d)

  def chain(self, v, out: list, seen: set) -> None:
    """The ops computing tensor `v`, operands first (a stack of its own, as pure's)."""
    todo = [(v, False)]
    while todo:
      x, done = todo.pop()
      if done:
        out.append(self.defs[x.id])
        continue
      if not _tensor(x) or x.id in seen:
        continue
      seen.add(x.id)
      todo.append((x, True))
      todo.extend((y, False) for y in reversed(self.defs[x.id].operands()))


def _row(d) -> bool:
  """Whether op `d` makes a 1-D vector a (1, n) row or an (n, 1) column (Pallas's `head_mask =
  (jnp.arange(d) < head_dim)[None, :]`, stretched again into each tile it masks)."""
  return isinstance(d, Broadcast) and len(d.x.type.shape) == 1 and len(d.result.type.shape) == 2


def _users(body: ir.Block) -> dict:
  """Id of a value -> the ops that read it."""
  users: dict = {}
  for o, _ in _blocks(body):
    for x in o.operands():
      if isinstance(x, ir.Value):
        users.setdefault(x.id, []).append(o)
  return users


def _orientation(o, defs) -> tuple:
  """Where broadcast `o` puts the vector it stretches: (the result's axes its axis lands on, the result's rank). A
  (1, n) row or (n, 1) column stretched again (`dmask[None, :]` made once, then into each tile) lands where the row
  put it: `v[:, None]` then into (128, 128) is the same orientation as `v` stretched into (128, 128) directly."""
  dims = tuple(o.dims)
  d = defs.get(o.x.id)
  if len(o.x.type.shape) != 1 and _row(d):
    dims = tuple(dims[a] for a in d.dims)
  return dims, len(o.result.type.shape)


def _tiles(v, users: dict) -> frozenset:
  """The shapes of the tiles a broadcast vector `v` reaches through elementwise ops and further
  broadcasts (`rn[None, :] < N` in a (64, 64) B tile's mask and in a (16, 64) product's store mask):
  tiles of two shapes may take two layouts (a decode's product of 16 rows, the B tile it is
  multiplied by), which one vector cannot hold."""
  seen, todo, shapes = set(), [v], set()
  while todo:
    x = todo.pop()
    if x.id in seen:
      continue
    seen.add(x.id)
    shapes.add(tuple(x.type.shape))
    for u in users.get(x.id, ()):
      if isinstance(u, (Broadcast, *ELEMENTWISE_OPS)):
        todo.extend(r for r in u.results if isinstance(r.type, TensorType))
  return frozenset(s for s in shapes if not any(
      t != s and len(t) == len(s) and all(a >= b for a, b in zip(t, s)) for t in shapes))


def _clone(o, mapping: dict):
  kw = {f.name: mapping[getattr(o, f.name).id] for f in dataclasses.fields(o)
        if isinstance(getattr(o, f.name), ir.Value) and getattr(o, f.name).id in mapping}
  results = tuple(ir.Value(r.type, r.name) for r in o.results)
  mapping.update({r.id: n for r, n in zip(o.results, results)})
  return dataclasses.replace(o, results=results, **kw)


def split_index_vectors(kernel: ir.Kernel, defs: dict) -> None:
  # The ops as the body holds them now: the pipeliner rewrote a pipelined loop's body (its index, start + trip *
  # step, substituted into copies of the ops), so the tracer's `defs` may name ops that read the loop's old index;
  # a copy made from one would read a value no longer defined (int64 cu_seqlens bounds: MG900, KeyError). The
  # caller's map is brought up to date in place: the later passes read it too, and this pass adds its copies to it
  defs.update({r.id: o for o, _ in _blocks(kernel.body) for r in o.results})
  home = {id(o): b for o, b in _blocks(kernel.body)}
  aliased = set((kernel.aliases or {}).keys())
  idx = _Index(defs, frozenset(p.value.id for k, p in enumerate(kernel.inputs) if k not in aliased))
  uses = []        # (broadcast op, its block, the ops computing its operand)
  for o, block in list(_blocks(kernel.body)):
    if isinstance(o, Broadcast) and (len(o.x.type.shape) == 1 or _row(defs.get(o.x.id))) and isinstance(
        defs.get(o.x.id), (Arange, Load, MaskedLoad, Broadcast, *ELEMENTWISE_OPS)) and idx.pure(o.x):
      ops: list = []
      idx.chain(o.x, ops, set())
      uses.append((o, block, ops))
  users = _users(kernel.body)
  orientations: dict[int, set] = {}    # id of a chain op -> where the vectors it computes go
  shaped: dict[int, set] = {}          # ... and the shapes of the tiles they reach
  for o, _, ops in uses:
    where = _orientation(o, defs)
    for x in ops:
      orientations.setdefault(id(x), set()).add(where)
      shaped.setdefault(id(x), set()).add((*where, _tiles(o.result, users)))
  split = False
  for o, block, ops in uses:
    # Every broadcast of a chain that is broadcast both ways gets its own copy; the original
    # stays for the chain's other uses (a 1-D store, a sum with a row statistic).
    if all(len(orientations[id(x)]) == 1 for x in ops):
      # one orientation, tiles of several shapes (probe 51f): a copy each, but never a read of memory repeated
      # in a loop the chain is outside of (attention's backward reads its LSE and delta rows once, before the
      # key loop: copied at their uses inside it they were read again every trip)
      if all(len(shaped[id(x)]) == 1 for x in ops) or any(
          isinstance(x, (Load, MaskedLoad)) and home.get(id(x)) is not block for x in ops):
        continue
    split = True
    mapping: dict = {}
    clones = [_clone(x, mapping) for x in ops]
    for c in clones:
      for r in c.results:
        defs[r.id] = c
    new = dataclasses.replace(o, x=mapping[o.x.id])
    for r in new.results:
      defs[r.id] = new
    at = next(k for k, x in enumerate(block.ops) if x is o)
    block.ops[at:at + 1] = clones + [new]
  if split:
    ir.prune_dead(kernel.body)     # (an original nothing else uses: a load is not read twice)
