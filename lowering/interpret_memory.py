"""Memory of interpret mode: GMEM, each CTA's SMEM (interpret_cta.py, CtaMemory), and the race checks on every
access.

The GPU reports none of these mistakes; it hangs or returns wrong numbers. The
interpreter sees every access, so it checks them: an SMEM access against the
async copies in flight (frontend/sync.py's waits and fences, whose absence is
a compiler bug), output elements touched by two programs (a user's race,
reported at the kernel's line), and SMEM touched by two CTAs of a cluster
between the same two cluster_syncs.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..frontend import ir
from ..frontend.memory_errors import grid_rank, masked_store, skipped_store, uncovered_error, uninitialized_read
from ..frontend.coverage import describe
from ..frontend.flag_races import flag_hint
from ..frontend.races import (ACCUMULATED_READ, CROSS_PROGRAM_READ, ONE_WRITER, SCATTERED_TWICE, own_window,
                               unreleased_flag_hint, clamped_program_hint, short_step_hint,
                               plain_write_hint, segment_spill_hint)
from .interpret_numerics import np_dtype, poison
from ..frontend.ops.access import ScalarRead
from ..frontend.types import RefType
from ..frontend.ops.atomic import AtomicKind, identity
from .interpret_sync import Order, olds

from ..frontend.errors import OutOfBoundsError, RaceError  # noqa: E402


COMPILER_BUG = ("the compiler inserts this synchronisation; an IR without it is a bug in mgpu_dsl,"
                " please report it")


@dataclasses.dataclass(frozen=True)
class Ref:
  """A window of a root buffer: a kernel parameter (GMEM) or one CTA's SMEM allocation."""
  root: ir.Value
  owner: int            # cluster rank of the CTA whose SMEM this is; -1 for GMEM
  win: tuple            # ((start, size, squeeze), ...) over the root's dimensions
  transposed: bool = False   # `buf.T`: only ml.dot reads it (transposing what it reads)
  # ((lo, hi), ...) over the root's dimensions: the part of the root inside the views the window
  # was taken from (View.within), which its elements inside the root must not leave; lo == 0 and
  # hi == the root's size where those views reach the root's ends. `label`: the window's name.
  bounds: tuple = ()
  label: str = ""

  @staticmethod
  def whole(root: ir.Value, owner: int) -> "Ref":
    return Ref(root, owner, tuple((0, n, False) for n in root.type.shape))

  @property
  def name(self) -> str:
    return self.root.name or "a buffer"

  @property
  def part(self) -> tuple:
    """The box of the window in the root, ((start, size), ...): accesses of disjoint boxes of
    one buffer (pipeline stages, windows filled by separate copies) do not overlap."""
    return tuple((s, 1 if sq else n) for s, n, sq in self.win)

  @property
  def index(self) -> tuple:
    return tuple(s if sq else slice(s, s + n) for s, n, sq in self.win)

  def check_bounds(self, o, lead: int = 0, program: str = ""):
    """OutOfBoundsError unless the window is inside the root; `lead`: the root's leading batch
    dimensions (jax.vmap), left out of the message, which shows the kernel's own shapes (and, under
    jax.vmap, names the `program` and its batch element in a note)."""
    shape = self.root.type.shape
    if any(s < 0 or s + n > d for (s, n, _), d in zip(self.win, shape)):
      win = ", ".join(str(s) if sq else f"{s}:{s + n}" for s, n, sq in self.win[lead:])
      negative = any(s < 0 for s, _, _ in self.win)
      raise OutOfBoundsError(f"{self.name}[{win}] is outside {self.name}'s shape {shape[lead:]}", o.loc,
                             notes=(f"in program {program}",) if program else (),
                             hint="check the dynamic indices (ml.ds starts, program ids) of this access"
                                  + ("; a negative run-time index does not count from the end (only a"
                                     " static one does, as x.at[-1]): ml.where(i < 0, i + n, i)" if negative
                                     else ""))

  def check_view(self, o, lead: int = 0, program: str = "", mask=None):
    """OutOfBoundsError where the window's part inside the root leaves the views it was taken
    from (TMA reads zeros and masks keep off only past the root's own ends); `mask`: the elements
    a masked access touches, as root coordinates (see lowering/access.py)."""
    if not self.bounds:
      return
    shape = self.root.type.shape
    if mask is not None:
      bad = np.zeros(mask[0].shape, bool)
      for c, (lo, hi) in zip(mask, self.bounds):
        bad |= (c < lo) | (c >= hi)
      if not bad.any():
        return
      k = int(np.argmax(bad))
      elem = ", ".join(str(int(c[k])) for c in mask[lead:])
      what = f"a masked access reaches {self.name}[{elem}]: the mask is on there, but it is"
    else:
      part = [(max(s, 0), min(s + n, d)) for (s, n, _), d in zip(self.win, shape)]
      if any(a >= b for a, b in part) or all(lo <= a and b <= hi for (a, b), (lo, hi) in zip(part, self.bounds)):
        return
      win = ", ".join(str(a) if sq else f"{a}:{b}" for (a, b), (_, _, sq) in list(zip(part, self.win))[lead:])
      what = f"{self.label or 'this window'} is {self.name}[{win}],"
    view = ", ".join(f"{lo}:{hi}" for lo, hi in self.bounds[lead:])
    check = "check the run-time starts (ml.ds, program ids) of the view and of its windows"
    raise OutOfBoundsError(
        f"{what} outside the view {self.name}[{view}] it is a window of", o.loc,
        notes=(f"in program {program}",) if program else (),
        hint=f"a window of an SMEM view stays inside it: {check}" if self.owner >= 0 else
             f"a window may leave a view only where the view reaches {self.name}'s end (TMA copies and"
             f" masks stop only at {self.name}'s own ends): {check}, or window {self.name} itself with a mask"
             f" keeping the view's part")

  def clip(self):
    """(root index, box index) of the part of a TMA box inside the root, or None: TMA
    reads zeros outside a GMEM tensor and drops writes there."""
    g, b = [], []
    for (s, n, sq), d in zip(self.win, self.root.type.shape):
      lo, hi = max(s, 0), min(s + n, d)
      if hi <= lo:
        return None
      g.append(s if sq else slice(lo, hi))
      if not sq:
        b.append(slice(lo - s, hi - s))
    return tuple(g), tuple(b)


def overlaps(p: tuple, q: tuple) -> bool:
  """Whether two buffer parts (see Ref.part) share elements: their boxes intersect."""
  return all(a < b + m and b < a + n for (a, n), (b, m) in zip(p, q))


def _element(index, bad) -> tuple:
  """The root coordinates of the first True of `bad` (taken at `index` of the root: ints and
  slices, or arrays of element coordinates for masked accesses)."""
  pos = tuple(np.argwhere(np.asarray(bad))[0])
  if any(isinstance(i, np.ndarray) for i in index):
    return tuple(int(i[pos]) if isinstance(i, np.ndarray) else int(i) for i in index)
  off = iter(pos)
  return tuple(int(i) if isinstance(i, (int, np.integer)) else i.start + int(next(off)) for i in index)


def _past_start(index, elem, lead, w, other) -> bool:
  """Whether the element two programs' row windows (`index` of slices) meet at lies past the first row
  of one of them (this program's, or the `other` writer's in `w`, which also wrote the row before): a
  window runs on into another's, rather than the two windows being one (out[seg[k]] of a repeated k)."""
  i = index[lead] if len(index) > lead else None
  if not isinstance(i, slice) or i.stop - i.start < 2:
    return False
  before = elem[:lead] + (elem[lead] - 1,) + elem[lead + 1:]
  return elem[lead] > i.start or (elem[lead] > 0 and int(w[before]) == other)


def _region(name, shape, index, bad, lead: int = 0) -> str:
  """`name[a:b, ...]` bounding the elements `bad` of the window `index` of a buffer of `shape`
  (without its `lead` leading batch dimensions: one program's window lies in one batch element)."""
  full = np.zeros(shape, bool)
  full[index] = bad
  if lead:
    full, shape = full.any(axis=tuple(range(lead))), tuple(shape[lead:])
  return describe(name, shape, full, np.ones(len(shape), np.int64))[0]


class Memory:
  """GMEM, who wrote and read each output element, and the current cluster's phase log."""

  def __init__(self, kernel: ir.Kernel, args):
    self.kernel = kernel
    self.aliased_outputs = {kernel.outputs[j].value.id for j in (kernel.aliases or {}).values()}
    self._defs = None                  # value id -> op, for data_dependent (made at the first race)
    self.gmem = {p.value.id: np.array(a, dtype=np_dtype(p.value.type.dtype))
                 for p, a in zip(kernel.inputs, args)}
    self.writers, self.readers, self.atomics, self.wlocs, self.rlocs = {}, {}, {}, {}, {}
    self.alocs: dict = {}               # (root id, program) -> loc of its last atomic update
    # The order atomics put programs in (interpret_sync.py): a clock ticking at each output access, the time
    # of each program's last access to each output, the clocks released at each element, and the program
    # (and loc) that last changed an element with a single-element atomic.
    self.order = Order(kernel) if Order.needed(kernel) else None
    self.syncs, self.rmw_last = {}, {}
    self.cooperative = self.order is not None and tuple(kernel.cluster) == (1, 1, 1)
    self.changes = 0                    # writes of output elements so far (a waiting program's progress)
    # An aliased input and output are one buffer, tracked under the output's id.
    self.canon = {kernel.inputs[i].value.id: kernel.outputs[o].value.id for i, o in kernel.aliases.items()}
    self.aliased = set(self.canon.values())
    # Outputs that start with values: aliased (the input's) and accumulated (the identity).
    self.initialised = self.aliased | set(kernel.accumulated)
    self.skipped_branches: set = set()  # ids of the If blocks some program did not take
    for p in kernel.outputs:
      shape, d = p.value.type.shape, p.value.type.dtype
      kind = kernel.accumulated.get(p.value.id)
      self.gmem[p.value.id] = poison(shape, d) if kind is None else np.full(
          shape, identity(kind, d), np_dtype(d))
      self.writers[p.value.id] = np.full(shape, -1, np.int64)   # program, or -1
      self.readers[p.value.id] = np.full(shape, -1, np.int64)   # program, -1, or -2: several
      self.atomics[p.value.id] = np.full(shape, -1, np.int64)   # atomic updaters: as readers
    for i, o in self.canon.items():
      self.gmem[o] = self.gmem[i]
    self.csize = int(np.prod(kernel.cluster))
    self.ctas: list = []       # the CTAs of the cluster running now, by cluster rank
    self.phase: dict = {}      # (owner, root id) -> (writer rank, reader bitmask, locs)
    self.late_reads: list = []  # reads of a peer's SMEM, checked for garbage when the phase ends

  def pid_of(self, lin: int) -> tuple:
    gx, gy, _ = self.kernel.grid
    return (lin % gx, lin // gx % gy, lin // (gx * gy))

  def shown(self, pid: tuple) -> str:
    """A program as the kernel sees it: under jax.vmap, its own program id (the grid axis the batch
    took reads 0 in the kernel) and its batch element."""
    k = self.kernel
    if k.batch_axis is None:
      return str(tuple(pid))
    own = tuple(0 if a == k.batch_axis else p for a, p in enumerate(pid))
    b, elem = pid[k.batch_axis], []
    for n in reversed(k.batch_sizes):
      elem.append(b % n)
      b //= n
    elem = elem[::-1]
    return f"{own} of batch element {elem[0] if len(elem) == 1 else tuple(elem)}"

  def lead(self, ref) -> int:
    """The leading batch dimensions (jax.vmap) of `ref`'s root: not the kernel's own."""
    return self.kernel.batch_lead.get(ref.root.id, 0) if ref.owner < 0 else 0

  def gmem_access(self, cta, ref: Ref, index, o, write: bool, atomic: bool = False, same=None):
    """Record a program's access to output elements; two programs meeting there is a race,
    unless both update it atomically. A plain read of an element nothing wrote reads garbage. `same`: where a
    scatter's write stores the bits the element already holds, another program's write there is no race (whichever
    lands last, the element holds them: an occupancy grid's `occ[cell] = 1` of many programs; probe 57g)."""
    rid = self.canon.get(ref.root.id, ref.root.id)
    if rid not in self.writers:
      return
    w, r, a, me = self.writers[rid], self.readers[rid], self.atomics[rid], cta.lin
    if not write and not atomic and rid not in self.initialised and np.any(w[index] == -1):
      name = next(p.name for p in self.kernel.outputs if p.value.id == rid)
      raise uninitialized_read(name, _region(name, w.shape, index, w[index] == -1, self.lead(ref)),
                               f" in program {cta.label}", True, o.loc)
    order = self.order.access(cta, rid, index) if self.order is not None else None
    known = (lambda t: t[index] == me) if order is None else order.known     # (or ordered before this access)
    other = lambda t: (t[index] != -1) & ~known(t)
    bad_w = (w[index] >= 0) & ~known(w)                  # a plain write meets every access
    if same is not None and write and not atomic:
      bad_w = bad_w & ~same
    bad_r = other(r) if write or atomic else False     # a read meets writes and atomics
    bad_a = False if atomic else other(a)               # atomics meet plain accesses
    bad = bad_w | bad_r | bad_a
    if np.any(bad):
      met = "writes" if np.any(bad_w) else "reads" if np.any(bad_r) else "updates"
      mine = "updates" if atomic else "writes" if write else "reads"
      self.report_race(cta, ref, index, o, bad, w, {"writes": w, "reads": r, "updates": a}[met], met, rid, mine)
    # (an access that comes after another program's takes its place: what comes after it comes after both)
    if (write or atomic) and not (atomic and type(o).__name__ in ("AtomicUpdate", "ScatterUpdate") and olds(o)):
      self.changes += 1                    # (a cas, an xchg, an old value: counted by rmw where it changes the element)
    if atomic:
      a[index] = np.where((a[index] == -1) | known(a), me, -2)
      self.alocs[(rid, me)] = o.loc
    elif write:
      if order is not None:
        r[index] = np.where(known(r), -1, r[index])
        a[index] = np.where(known(a), -1, a[index])
      w[index] = me
      self.wlocs[(rid, me)] = o.loc
    else:
      r[index] = np.where((r[index] == -1) | known(r), me, -2)
      self.rlocs[(rid, me)] = o.loc
    if order is not None:
      order.record(w, r, a, write, atomic)

  def report_race(self, cta, ref, index, o, bad, w, r, met="writes", rid=None, mine="writes"):
    """A race found at this program's access `o` (which `mine` it): reported there, with a note
    at the other program's access."""
    elem = _element(index, bad)
    shown = list(elem)[self.lead(ref):]       # the kernel's own coordinates (under jax.vmap)
    other = int(w[elem]) if w[elem] >= 0 and w[elem] != cta.lin else int(r[elem])
    who = f"program {self.shown(self.pid_of(other))}" if other >= 0 else "another program"
    locs = self.rlocs if met == "reads" else self.alocs if met == "updates" else self.wlocs
    rid = ref.root.id if rid is None else rid
    notes = (f"{locs[(rid, other)]}: {who} {met} it here",) if (rid, other) in locs else ()
    accumulated = rid in self.kernel.accumulated
    here = getattr(o, "loc", None)
    here = here if here is not None and getattr(here, "lineno", 0) else None
    if {met, mine} == {"writes", "updates"} and (mine == "writes" or (rid, other) in locs):
      # a plain write beside atomic updates (zeroing the output first): at the write, as the
      # compile-time check says it (frontend/checks.py)
      me, them = f"program {cta.label}", who
      writer, updater = (me, them) if mine == "writes" else (them, me)
      at_write = here if mine == "writes" else locs[(rid, other)]
      at_update = locs.get((rid, other)) if mine == "writes" else here
      raise RaceError(
          f"{writer} writes {ref.name}{shown if shown else ''} here while {updater} adds to it with atomics:"
          f" programs run in no fixed order, so the sum depends on timing", at_write or self.kernel.loc,
          notes=(f"{at_update}: {updater}'s atomic update",) if at_update is not None else (),
          hint=plain_write_hint(ref.name, rid in self.aliased_outputs))
    crossed = "reads" in (met, mine) and "updates" not in (met, mine)   # one program reads what another writes
    raise RaceError(
        f"{who} and program {cta.label} both access {ref.name}{shown if shown else ''}, and one"
        f" writes it: programs run in no fixed order, so the result depends on timing", here or self.kernel.loc,
        notes=notes + (() if here else (f"{o.loc}: program {cta.label} {mine} it here",)),
        hint=flag if mine == met == "writes" and (flag := flag_hint(self.kernel.body, op=o)) else
        step if mine == met == "writes" and (step := short_step_hint(
            self.kernel.body, ref.name, tuple(getattr(ref.root.type, 'shape', ()))[self.lead(ref):],
            self.kernel.own_grid, op=o)) else
        SCATTERED_TWICE if mine == met == "writes" and self.kernel.accumulated.get(rid) == AtomicKind.SET else
        (plain_write_hint(ref.name, rid in self.aliased_outputs) if mine == "writes" else ACCUMULATED_READ)
        if accumulated else (self.clamped_hint(o, locs.get((rid, other))) or unreleased_flag_hint(
            self.kernel.body, getattr(cta, "acquired", None)) or CROSS_PROGRAM_READ) if crossed else
        segment_spill_hint(ref.name, len(shown)) if mine == met == "writes" and _past_start(index, elem, self.lead(ref), w, other)
        and type(o).__name__ in ("Copy", "Store") and self.data_dependent(o) else
        clamped if mine == met == "writes" and (clamped := clamped_program_hint(self.kernel.body, op=o)) else
        own_window(ref.name, tuple(getattr(ref.root.type, 'shape', ()))[self.lead(ref):], self.kernel.own_grid)
        + (f"; where the place comes from data and repeats ({ref.name}[seg[k]] = v), accumulate instead:"
           f" ml.atomic_add({ref.name}.at[seg[k]], v) into a zeroed output (repeated places add up)"
           if mine == met == "writes" and self.data_dependent(o) else "") if len(elem)
        else ONE_WRITER)

  def clamped_hint(self, o, other_loc) -> str | None:
    """The hint for a read meeting another program's write where either's window comes from a program id
    clamped with ml.minimum (an in-place update on a grid larger than its tiles): those programs redo it."""
    return clamped_program_hint(self.kernel.body, op=o) or (
        clamped_program_hint(self.kernel.body, loc=other_loc) if other_loc is not None else None)

  def atomic_outside_hint(self, ref: Ref, o) -> str | None:
    """For an atomic update whose run-time window leaves its GMEM array: the scatter of its
    positions, which drops the updates outside (as the compile-time check hints)."""
    from ..frontend.ops.scatter_hints import atomic_outside_hint
    from ..frontend.ops.memory import View
    if self._defs is None:
      self._defs = ir.def_table(self.kernel.body)
    view = self._defs.get(getattr(o, "ref", None).id) if isinstance(getattr(o, "ref", None), ir.Value) else None
    if ref.owner >= 0 or self.lead(ref) or not isinstance(view, View):
      return None
    for d, ((s, n, sq), full) in enumerate(zip(ref.win, ref.root.type.shape)):
      if not sq and (s < 0 or s + n > full):
        return atomic_outside_hint(o, view.ref, view.index, d, n, full, s < 0)
    return None

  def register_outside_hint(self, ref: Ref, o) -> str | None:
    """For a register read or write (a Load or a Store) whose run-time ml.ds window leaves its GMEM
    array, or a scalar read of an element outside it: the mask, guard or clamp the compile-time check
    hints (frontend/checks.py)."""
    from ..frontend.bounds_hints import register_bounds_hint
    from ..frontend.memory_errors import scalar_read_hint
    from ..frontend.ops.access import ScalarRead
    from ..frontend.ops.memory import Load, Store, View
    if not isinstance(o, (Load, Store, ScalarRead)) or ref.owner >= 0 or self.lead(ref):
      return None
    if isinstance(o, ScalarRead):     # table[b, i] with i past the table's width: as the compile-time MG203
      return next((scalar_read_hint(ref.name, o.loc, d, s, ref.root.type.dtype)
                   for d, ((s, n, _), full) in enumerate(zip(ref.win, ref.root.type.shape)) if s < 0 or s + n > full),
                  None)
    if self._defs is None:
      self._defs = ir.def_table(self.kernel.body)
    view = self._defs.get(o.ref.id) if isinstance(o.ref, ir.Value) else None
    if not isinstance(view, View):
      return None
    output = any(p.value.id == ref.root.id for p in self.kernel.outputs)
    for d, ((s, n, sq), full) in enumerate(zip(ref.win, ref.root.type.shape)):
      if not sq and (s < 0 or s + n > full):
        return register_bounds_hint(o, view, ref.name, d, n, full, s < 0, output)
      if sq and isinstance(o, Load) and (s < 0 or s >= full) and d < len(view.index) and view.index[d].squeeze:
        # pages.at[table[b, i]][...] with a page id from data outside pages (a padding entry, -1)
        return scalar_read_hint(ref.name, o.loc, d, s, ref.root.type.dtype) + (
            "; a negative run-time index does not count from the end (only a static one does): to count"
            " from the end, index with ml.where(i < 0, i + n, i)" if s < 0 else "")
    return None

  def where_read_hint(self, o) -> str | None:
    from ..frontend.select_hints import users, where_read_hint
    if getattr(self, "_users", None) is None:
      self._users = users(self.kernel)
    return where_read_hint(self._users, o)

  def data_dependent(self, o) -> bool:
    """Whether the window op `o` writes is indexed by a value read from memory (out[seg[k]])."""
    if self._defs is None:
      self._defs = ir.def_table(self.kernel.body)
    todo, seen = [x for x in o.operands() if isinstance(x, ir.Value)], set()
    while todo:
      v = todo.pop()
      d = self._defs.get(v.id)
      if d is None or id(d) in seen:
        continue
      seen.add(id(d))
      if isinstance(d, ScalarRead) or any(a == ir.Access.REG_READ for _, a in ir.traits_of(d).effects(d)):
        return True
      todo += [x for x in d.operands() if isinstance(x, ir.Value) and not isinstance(x.type, RefType)]
    return False

  def check_covered(self):
    """Every element of every output that starts without values is written by some program."""
    for p in self.kernel.outputs:
      w = self.writers[p.value.id]
      if p.value.id in self.initialised or not np.any(w == -1):
        continue
      locs = [loc for (rid, _), loc in [*self.wlocs.items(), *self.alocs.items()] if rid == p.value.id]
      missing, lead = w == -1, self.kernel.batch_lead.get(p.value.id, 0)
      batch = tuple(int(b) for b in np.argwhere(missing)[0][:lead])     # under jax.vmap: the first batch
      missing = missing[batch]                                             # element missing any, as the kernel sees it
      err = uncovered_error(p.name, missing.shape, missing, np.ones(missing.ndim, np.int64), self.kernel.own_grid,
                            locs[0] if locs else p.loc or self.kernel.loc,
                            masked=masked_store(self.kernel, p.value.id), rank=grid_rank(self.kernel),
                            skipped=skipped_store(self.kernel, p.value.id, self.skipped_branches))
      if lead:
        err.notes = tuple(err.notes) + (f"in batch element {batch[0] if lead == 1 else batch} of jax.vmap",)
      raise err

  def smem_phase(self, cta, ref: Ref, o, write: bool):
    """Record a CTA's access to a cluster's SMEM between two cluster_syncs."""
    if self.csize == 1:
      return
    key = (ref.owner, ref.root.id)
    if key not in self.phase:
      shape = ref.root.type.shape
      self.phase[key] = (np.full(shape, -1, np.int16), np.zeros(shape, np.int32), {})
    w, r, locs = self.phase[key]
    idx, me = ref.index, cta.rank
    bad = (w[idx] >= 0) & (w[idx] != me)
    if write:
      bad |= (r[idx] & ~(1 << me)) != 0
    if np.any(bad):
      elem = _element(idx, bad)
      mask = int(r[elem]) & ~(1 << me)
      other = int(w[elem]) if w[elem] >= 0 and w[elem] != me else (mask & -mask).bit_length() - 1
      whose = "its own" if ref.owner == me else f"program {self.ctas[ref.owner].pid}'s"
      raise RaceError(
          f"program {cta.pid} {'writes' if write else 'reads'} {whose} {ref.name}{list(elem)} while"
          f" program {self.ctas[other].pid} also uses it between the same two ml.cluster_sync() calls",
          o.loc,
          notes=(f"{locs[other]}: program {self.ctas[other].pid} accesses it here",),
          hint="separate the write from the other access with ml.cluster_sync()")
    if write:
      w[idx] = me
    else:
      r[idx] |= 1 << me
    locs[me] = o.loc

  def check_multicasts(self):
    """The CTAs of a cluster along a multicast's axis must load the same windows, in order."""
    c = self.kernel.cluster
    for me in self.ctas:
      for slot, win, o in me.multicasts[:1]:
        coords = [me.rank % c[0], me.rank // c[0] % c[1], me.rank // (c[0] * c[1])]
        peers = [p for p in self.ctas if all(
            (p.rank % c[0], p.rank // c[0] % c[1], p.rank // (c[0] * c[1]))[a] == coords[a]
            for a in range(3) if a != o.multicast)]
        mine = [(s, w) for s, w, _ in me.multicasts]
        for p in peers:
          theirs = [(s, w) for s, w, _ in p.multicasts]
          if theirs != mine:
            n = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
            bad = (me.multicasts[n] if n < len(mine) else p.multicasts[n])[2]
            raise RaceError(
                f"programs {me.pid} and {p.pid} of a cluster multicast different windows (load {n + 1}"
                f" of this copy differs): every CTA along cluster axis {o.multicast} must load the same"
                f" windows in the same order", bad.loc,
                hint="compute the multicast window from what the CTAs of a cluster share (e.g. the"
                     " cluster's tile index), and give them the same number of iterations")

  def check_exit(self, cta):
    """A CTA may not exit while a peer still uses its SMEM in the same phase."""
    for (owner, _), (_, _, locs) in self.phase.items():
      others = [k for k in locs if k != owner]
      if owner == cta.rank and others:
        k = others[0]
        raise RaceError(
            f"program {self.ctas[k].pid} uses the SMEM of program {cta.pid}, which may already have"
            " exited", locs[k], hint="end the kernel with ml.cluster_sync() so no CTA exits while a"
            " peer still reads or writes its SMEM")
