"""Each op's layout constraints collected once per kernel, replayed by the solves after the first (probe 58c).

relayout.py solves a kernel's layouts again after each conflict it moves through SMEM (a reshape of a row-wise
tile, a vector used in two layouts): Triton's bitonic sort of 128 elements takes 276 solves, and collecting the
constraints (walking every op, its operands and effects, its windows' geometry) was 85% of each. What an op adds to
the solver's state depends only on the op and on what defines the refs it touches, which no move changes (a move
replaces the ops it rewrites with new ones). So the first solve records, per op, what it added, in order, and
later solves replay it for the ops still in the kernel: the unions in their order, the first uses, the tensors, the
relations and sets in their order, so the solver's state, and every layout and error it reaches, is the one a
fresh collection makes. An op met for the first time (the moves' stores and loads) is collected and recorded; the
ops of loops and branches are collected each time (what they add reads their blocks, which moves rewrite in place).
"""
from __future__ import annotations

COLLECTED = [0]     # ops collected (and recorded) since import
REPLAYED = [0]      # ops whose recorded constraints were replayed since import


class _Log(list):
  """A set or list of the solver's, as one op adds to it: the items in the order they came."""
  def add(self, x):
    self.append(x)

  def __ior__(self, other):      # (`nosplit |= {...}`: the set, kept whole, joined in its own order on replay)
    self.append(other)
    return self


class _Unions(list):
  """The solver's union-find, as one op joins classes: the pairs, in order (find, path halving, is the replay's)."""
  def union(self, a, b):
    self.append((a, b))


class _Record:
  """What collecting one op adds to a solver's state. The solver's own methods (node, join, root, window_of_tiles,
  note_split and the rules) run on it, reading the kernel and defs as the solver does."""

  def __init__(self, solver):
    self.kernel, self.defs, self.rows = solver.kernel, solver.defs, solver.rows
    self._solver_type = type(solver)
    self.first_use, self.tensors, self.vec_limit = {}, {}, {}
    self.uf = _Unions()
    self.seeds, self.mma_roots, self.unit_vec, self.windowed, self.nosplit = _Log(), _Log(), _Log(), _Log(), _Log()
    self.dot_bytes, self.tile_windows, self.relations = [], [], []
    self.warp_specialized = False

  def __getattr__(self, name):     # (the solver's methods, bound to this record)
    return getattr(self._solver_type, name).__get__(self)

  def done(self):
    """The record, with the parts this op left empty dropped (most ops only join values and note first uses)."""
    self.first_use = tuple(self.first_use.items())
    self.sets = tuple((name, tuple(got)) for name in ("seeds", "mma_roots", "unit_vec", "windowed")
                      if (got := getattr(self, name)))
    self.rest = any((self.vec_limit, self.nosplit, self.dot_bytes, self.tile_windows, self.relations,
                     self.warp_specialized))
    return self

  def replay(self, s) -> None:
    setdefault = s.first_use.setdefault
    for k, o in self.first_use:
      setdefault(k, o)
    if self.tensors:
      s.tensors.update(self.tensors)        # (in order: a key already there keeps its place, as setting it does)
    if self.uf:
      union = s.uf.union
      for a, b in self.uf:
        union(a, b)
    for name, items in self.sets:
      add = getattr(s, name).add
      for x in items:
        add(x)
    if not self.rest:
      return
    for node, limit in self.vec_limit.items():     # (the least of every window's limit: the rule's own update)
      s.vec_limit[node] = min(limit, s.vec_limit.get(node, limit))
    for part in self.nosplit:
      s.nosplit |= part
    s.dot_bytes += self.dot_bytes
    s.tile_windows += self.tile_windows
    s.relations += self.relations
    s.warp_specialized |= self.warp_specialized


def collect_op(solver, o, memo: dict) -> None:
  """`solver.collect_op(o)`, from `memo` (id(op) -> (op, its record)) where `o` was collected before. A loop's or
  a branch's op is collected each time: its rule reads its blocks' terminators, which a move may rebuild in place
  (relayout._copy_result substitutes a statistic's copy into a loop's yield), and its effects its blocks'."""
  if o.regions:
    COLLECTED[0] += 1
    return type(solver).collect_op(solver, o)
  got = memo.get(id(o))
  if got is None or got[0] is not o:
    rec = _Record(solver)
    type(solver).collect_op(rec, o)
    memo[id(o)] = got = (o, rec.done())
    COLLECTED[0] += 1
  else:
    REPLAYED[0] += 1
  got[1].replay(solver)
