"""Interpret mode's memory of one CTA (interpret.py's CTA is one): its SMEM buffers, what its asynchronous copies
and stores have in flight, and the checks of its reads and writes (bounds, uninitialised SMEM, races with its own
copies). The grid's memory (GMEM, programs' windows, coverage) is interpret_memory.py's."""
from __future__ import annotations

import numpy as np

from ..frontend.errors import OutOfBoundsError, RaceError
from ..frontend.memory_errors import uninitialized_read
from .interpret_memory import COMPILER_BUG, Memory, Ref, _region, overlaps
from .interpret_numerics import np_dtype, poison


class CtaMemory:
  """One CTA's SMEM and what its asynchronous copies have in flight."""

  def __init__(self, m: Memory, pid: tuple, rank: int):
    self.m, self.pid, self.rank = m, pid, rank
    self.label = m.shown(pid)          # for messages: the kernel's own program id (and batch element)
    self.batch_label = self.label if m.kernel.batch_axis is not None else ""
    gx, gy, _ = m.kernel.grid
    self.lin = pid[0] + gx * (pid[1] + gy * pid[2])
    self.smem = {v.id: poison(v.type.shape, v.type.dtype) for v in m.kernel.smem}
    self.pending_load: dict[tuple, tuple] = {}    # (root id, part) -> (barrier, loc of the copy)
    # TMA stores reading SMEM, oldest first, one bulk group each: ((root id, part), loc of the store)
    self.pending_store: list[tuple[tuple, object]] = []
    self.unfenced: dict[int, object] = {}       # root id -> loc of a register write, no fence since
    self.touched: set[int] = set()              # roots used from registers since the last barrier
    # in-flight ml.dot groups: (result, {(owner, root, part)}, loc, register A's value id or None, the Dot)
    self.dots: list[tuple] = []
    # id of each running dot's result -> ids of the values read since it was issued (interpret.check_dot_yield)
    self.dot_reads: dict[int, set] = {}
    # Warp-specialised roles (lowering/roles.py): the running one, TMA loads issued and waited
    # per barrier, and a count of ops run (a round of the roles without progress is a hang).
    self.role = None
    self.multicasts: list[tuple] = []           # (load site, GMEM window, copy) of multicast loads
    self.issued: dict[int, int] = {}
    self.waited: dict[int, int] = {}
    self.steps = 0
    self.filled = {v.id: np.zeros(v.type.shape, bool) for v in m.kernel.smem}   # SMEM elements written
    self.holes: dict = {}                       # value id -> elements a masked SMEM store's merge read unwritten
    self.pending_gmem: list[tuple] = []         # (GMEM root id, box, loc, reduce kind) of TMA stores that may still write, in order

  def check_filled(self, ref: Ref, o, box=None, atomic=None):
    """An SMEM read must read elements something wrote (SMEM starts with garbage); `box`: only
    those of the window's elements (a TMA store's, whose elements past GMEM's end are dropped)."""
    filled = self.m.ctas[ref.owner].filled[ref.root.id][ref.index]
    if box is not None:
      filled = np.ones_like(filled)
      filled[box] = self.m.ctas[ref.owner].filled[ref.root.id][ref.index][box]
    if not np.all(filled):
      raise uninitialized_read(ref.name, _region(ref.name, ref.root.type.shape, ref.index, ~filled),
                               f" in program {self.label}", False, o.loc, keep=getattr(o, "keep", None),
                               dtype=str(ref.root.type.dtype), atomic=atomic,
                               mma_shape=ref.root.type.shape if type(o).__name__ == "Dot" else None)

  def buffer(self, ref: Ref) -> np.ndarray:
    return self.m.gmem[ref.root.id] if ref.owner < 0 else self.m.ctas[ref.owner].smem[ref.root.id]

  def check_end(self):
    if self.pending_load:
      _, loc = next(iter(self.pending_load.values()))
      raise RaceError("the kernel ends before this async copy lands", loc, hint=COMPILER_BUG)
    if self.pending_store:
      raise RaceError("the kernel ends while this TMA store may still be in flight",
                      self.pending_store[0][1], hint=COMPILER_BUG)
    if self.dots:
      raise RaceError("the kernel ends while this ml.dot may still be running", self.dots[0][2],
                      hint=COMPILER_BUG)
    # A TMA store may still be writing GMEM: the grid's completion makes it visible.

  def gmem_sync(self, ref: Ref, o):
    """GMEM elements a TMA store of this CTA may still be writing are not read or rewritten (an
    aliased array's other tiles may be: a tile-by-tile in-place update)."""
    rid = self.m.canon.get(ref.root.id, ref.root.id)
    at = next((loc for r, box, loc, _ in self.pending_gmem if r == rid and overlaps(box, ref.part)), None)
    if at is not None:
      raise RaceError(f"{ref.name} is accessed while a TMA store into it may still be in flight", o.loc,
                      notes=(f"{at}: the TMA store starts here",), hint=COMPILER_BUG)

  def store_sync(self, ref: Ref, o):
    """A TMA store of GMEM elements an earlier store of this CTA may still be writing: TMA stores
    land in no order, so the later one may land first (reductions of one kind commute)."""
    rid = self.m.canon.get(ref.root.id, ref.root.id)
    at = next((loc for r, box, loc, red in self.pending_gmem if r == rid and overlaps(box, ref.part)
               and (red is None or red != o.reduce)), None)
    if at is not None:
      raise RaceError(f"this TMA store writes elements of {ref.name} that an earlier TMA store of program"
                      f" {self.label} may still be writing (TMA stores land in no order)", o.loc,
                      notes=(f"{at}: the earlier TMA store starts here",), hint=COMPILER_BUG)

  def smem_sync(self, ref: Ref, o, kind: str):
    """Check one SMEM access against what is in flight.

    kind: read/write (registers), tma_read/tma_write (a TMA copy), mma_read (ml.dot's operand).
    """
    owner = self.m.ctas[ref.owner]
    rid, name, local = ref.root.id, ref.name, ref.owner == self.rank
    hit = lambda table: next((k for k in table if k[0] == rid and overlaps(k[1], ref.part)), None)
    if (key := hit(owner.pending_load)) is not None:
      slot, at = owner.pending_load[key]
      if not local:     # the peer's own load (a later trip's refill): the user's missing cluster_sync
        verb = "reads" if kind in ("read", "tma_read", "mma_read") else "writes"
        raise RaceError(
            f"program {self.pid} {verb} program {owner.pid}'s {name} while an async copy into it (program"
            f" {owner.pid}'s own load, such as a pipelined loop's load of a later trip) may be in flight",
            o.loc, notes=(f"{at}: program {owner.pid}'s async copy starts here",),
            hint="a CTA refills its buffer once its own threads are done with it, not its peers: put an"
                 " ml.cluster_sync() after the peers' reads of it in each trip, so that every CTA has read it"
                 " before any refills it (or read the peer's data from a buffer the loop does not load)")
      what = {"read": f"{name} is read before its async copy landed",
              "write": f"{name} is written while an async copy into it is in flight",
              "tma_write": f"a second async copy into {name} starts before the first landed",
              "tma_read": f"{name} is stored before its async copy landed",
              "mma_read": f"ml.dot reads {name} before its async copy landed"}[kind]
      raise RaceError(what, o.loc, notes=(f"{at}: the async copy (slot {slot}) starts here",),
                      hint=COMPILER_BUG)
    if kind in ("write", "tma_write") and (store := hit(dict(owner.pending_store))) is not None:
      raise RaceError(f"{name} is overwritten while a TMA store may still be reading it", o.loc,
                      notes=(f"{dict(owner.pending_store)[store]}: the TMA store starts here",),
                      hint=COMPILER_BUG)
    if kind in ("write", "tma_write"):
      for _, roots, at, *_ in owner.dots:
        if any(w == ref.owner and r == rid and overlaps(p, ref.part) for w, r, p in roots):
          raise RaceError(f"{name} is overwritten while an ml.dot may still be reading it", o.loc,
                          notes=(f"{at}: the ml.dot is issued here",), hint=COMPILER_BUG)
    if local and kind == "tma_write" and rid in self.touched:
      raise RaceError(f"an async copy overwrites {name} while threads may still use it from registers"
                      " (no barrier since)", o.loc, hint=COMPILER_BUG)
    if local and kind in ("tma_read", "mma_read") and rid in self.unfenced:
      what = "a TMA store" if kind == "tma_read" else "ml.dot"
      raise RaceError(f"{what} reads {name}, written from registers, without a fence"
                      " (commit_shared) in between", o.loc,
                      notes=(f"{self.unfenced[rid]}: {name} is written here",), hint=COMPILER_BUG)
    if local and kind in ("read", "write"):
      self.touched.add(rid)
      if kind == "write":
        self.unfenced[rid] = o.loc

  def retire_stores(self, pending: int):
    """cp.async.bulk.wait_group(pending): all but the `pending` newest stores are done."""
    del self.pending_store[:max(len(self.pending_store) - pending, 0)]

  def read(self, ref: Ref, o, kind: str = "read", check: bool = True) -> np.ndarray:
    try:
      return self._read(ref, o, kind, check)
    except OutOfBoundsError as e:
      e.hint = self.m.where_read_hint(o) or e.hint
      raise

  def _read(self, ref: Ref, o, kind: str, check: bool) -> np.ndarray:
    tma = kind == "tma_read"
    if ref.owner >= 0:
      ref.check_bounds(o, self.m.lead(ref), self.batch_label)
      ref.check_view(o, self.m.lead(ref), self.batch_label)
      self.smem_sync(ref, o, kind)
      self.m.smem_phase(self, ref, o, write=False)
      if ref.owner != self.rank:       # a peer may still write it in this phase (a race, reported then)
        self.m.late_reads.append((self, ref, o))
      elif check:
        self.check_filled(ref, o)
      return self.buffer(ref)[ref.index].copy()
    if not tma:
      self._check_register_bounds(ref, o)
    ref.check_view(o, self.m.lead(ref), self.batch_label)
    self.gmem_sync(ref, o)
    out = np.zeros(tuple(n for _, n, sq in ref.win if not sq), np_dtype(ref.root.type.dtype))
    if (c := ref.clip()) is not None:
      self.m.gmem_access(self, ref, c[0], o, write=False)
      out[c[1]] = self.buffer(ref)[c[0]]
    return out

  def _check_register_bounds(self, ref: Ref, o):
    """A register access of a GMEM window: inside its array, else an OutOfBoundsError hinting the mask."""
    try:
      ref.check_bounds(o, self.m.lead(ref), self.batch_label)
    except OutOfBoundsError as e:
      e.hint = self.m.register_outside_hint(ref, o) or e.hint
      raise

  def update(self, ref: Ref, fn, o):
    """An atomic read-modify-write of `ref`'s window: its elements become fn(elements)."""
    try:
      ref.check_bounds(o, self.m.lead(ref), self.batch_label)
    except OutOfBoundsError as e:
      e.hint = self.m.atomic_outside_hint(ref, o) or e.hint
      raise
    ref.check_view(o, self.m.lead(ref), self.batch_label)
    if ref.owner >= 0:
      self.smem_sync(ref, o, "write")
      self.m.smem_phase(self, ref, o, write=True)
      self.check_filled(ref, o, atomic=getattr(o, "kind", None))   # an update reads what is there: not garbage
    else:
      self.m.gmem_access(self, ref, ref.index, o, write=True, atomic=True)
    buf = self.buffer(ref)
    buf[ref.index] = fn(buf[ref.index])

  def write(self, ref: Ref, data: np.ndarray, o, kind: str = "write", holes=None):
    """`holes`: elements of the window a masked SMEM store leaves unwritten (see Load.merge)."""
    tma = kind == "tma_write"
    if ref.owner >= 0:
      ref.check_bounds(o, self.m.lead(ref), self.batch_label)
      ref.check_view(o, self.m.lead(ref), self.batch_label)
      self.smem_sync(ref, o, kind)
      self.m.smem_phase(self, ref, o, write=True)
      self.buffer(ref)[ref.index] = data
      filled = self.m.ctas[ref.owner].filled[ref.root.id]
      filled[ref.index] = True if holes is None else ~holes.reshape(filled[ref.index].shape)
      return
    if not tma:
      self._check_register_bounds(ref, o)
      self.gmem_sync(ref, o)
    ref.check_view(o, self.m.lead(ref), self.batch_label)
    if (c := ref.clip()) is not None:
      self.m.gmem_access(self, ref, c[0], o, write=True)
      self.buffer(ref)[c[0]] = data[c[1]]
