"""The sync pass's window keys and its orderings of GMEM (frontend/sync.py's SyncPass takes them
as a mixin): which elements a register access touches (`access_key`), when two windows may or
surely share elements, and the waits and barriers between accesses of one GMEM array by one CTA
(design notes 18 and 19): TMA loads still reading what is written, TMA stores landing in no
order, register writes of other threads."""
from __future__ import annotations

import bisect

from . import ir
from .gmem_disjoint import disjoint
from .ir import Access
from .ops.atomic import AtomicUpdate
from .ops.control import AwaitStores, WaitLoad
from .types import Space, TensorType


def deep_effects(o):
  """(op, ref, access) of `o` and of every op in its regions."""
  for x in [o, *(y for g in o.regions for y in ir.walk(getattr(o, g)))]:
    for r, a in ir.traits_of(x).effects(x):
      yield x, r, a


def access_key(o, window):
  """Which elements each thread of a register access touches: the window and the tensor's
  layout (a vector stored as a row statistic and read back as a column vector moves between
  threads); None for a scalar access, which is every thread's."""
  if ir.traits_of(o).moves_elements:          # a transpose, a scan: each thread's elements are others'
    return None
  layouts = [v.type.layout for v in [*o.results, *o.operands()] if isinstance(v.type, TensorType)]
  return (window, layouts[0]) if layouts else None


def overlap(a, b) -> bool:
  """Whether two windows (SyncPass.window keys, or None: unknown) may share an element. Only
  windows of one root with static starts are told apart."""
  if a is None or b is None or a[0] != b[0] or len(a) == 1 or len(b) == 1 or len(a) != len(b):
    return True
  for (s1, n1, _), (s2, n2, _) in zip(a[1:], b[1:]):
    if isinstance(s1, int) and isinstance(s2, int) and (s1 + n1 <= s2 or s2 + n2 <= s1):
      return False
  return True


class WindowSet:
  """A set of keys (tuples whose first item is a window key, or a marker for an unknown window)
  that finds the keys whose windows may share elements with a window without comparing it with
  every key: those starting at a static offset along their first dimension are kept sorted by it,
  so an unrolled loop writing row after row compares each row with its neighbours only. `copy`
  is a layer over this set (a region's state starts as its parent's, and adds its own keys)."""

  def __init__(self, keys=(), parent: WindowSet | None = None):
    self.parent = parent
    self.keys: set = set()
    self.wide: set = set()      # no static first start (or the whole root): may meet any window
    self.rows: dict = {}        # (root, rank) -> [sorted starts, {start: keys}, the largest size]
    for k in keys:
      self.add(k)

  @staticmethod
  def _row(window):
    """((root, rank), first start, first size) of a window with a static first start, else None."""
    if not isinstance(window, tuple) or len(window) < 2 or not isinstance(window[1][0], int):
      return None
    return (window[0], len(window)), window[1][0], window[1][1]

  def __contains__(self, key) -> bool:
    return key in self.keys or self.parent is not None and key in self.parent

  def add(self, key) -> None:
    if key in self:
      return
    self.keys.add(key)
    row = self._row(key[0]) if isinstance(key, tuple) else None
    if row is None:
      self.wide.add(key)
      return
    group, start, size = row
    entry = self.rows.setdefault(group, [[], {}, 0])
    if start not in entry[1]:
      bisect.insort(entry[0], start)
      entry[1][start] = set()
    entry[1][start].add(key)
    entry[2] = max(entry[2], size)

  def copy(self) -> WindowSet:
    return WindowSet(parent=self)

  def near(self, window):
    """The keys whose windows may share an element with `window` (more, never fewer: the caller's
    test decides); keys of the same root and rank starting past it along the first dimension are
    left out."""
    row = self._row(window)
    if row is None:
      yield from self.keys
    else:
      yield from self.wide
      group, start, size = row
      for g, (starts, at, longest) in self.rows.items():
        near = starts if g != group else \
            starts[bisect.bisect_right(starts, start - longest):bisect.bisect_left(starts, start + size)]
        for s in near:
          yield from at[s]
    if self.parent is not None:
      yield from self.parent.near(window)


def static_window(w) -> bool:
  return len(w) > 1 and all(isinstance(s, int) for s, _, _ in w[1:])


class GmemOrdering:
  """SyncPass's GMEM orderings (it supplies root, window, read_back, single_warpgroup and bounds)."""

  def gmem_writes(self, o) -> set:
    """GMEM roots `o` writes: from registers, atomically, or by a TMA store."""
    return {self.root(r).id for r, a in ir.traits_of(o).effects(o) if r is not None
            and r.type.space == Space.GMEM and a in (Access.REG_WRITE, Access.TMA_WRITE)}

  def await_gmem_loads(self, roots, st, out, loc):
    """GMEM that a TMA load may still be reading is written only once the load has landed."""
    for g in roots & set(st.load_src):
      for smem, slot in sorted(st.load_src.pop(g)):
        slots = st.pending_load.get(smem, {})
        if slot in slots:
          out.append(WaitLoad(slot, loc))
          del slots[slot]
          if not slots:
            st.pending_load.pop(smem, None)

  def gmem_roots(self, o) -> set:
    """GMEM roots `o` reads or writes (a TMA store's own destination excluded)."""
    return {self.root(r).id for r, a in ir.traits_of(o).effects(o) if r is not None
            and r.type.space == Space.GMEM and a != Access.TMA_WRITE}

  def gmem_stores(self, o) -> set:
    return {self.root(r).id for r, a in ir.traits_of(o).effects(o) if r is not None
            and r.type.space == Space.GMEM and a == Access.TMA_WRITE}

  def store_keys(self, o) -> list:
    """[(GMEM root id, (window, reduce kind))] of the TMA stores `o` issues (at any depth)."""
    return [(self.root(r).id, (self.window(r), x.reduce)) for x, r, a in deep_effects(o)
            if r is not None and r.type.space == Space.GMEM and a == Access.TMA_WRITE]

  def reg_write_keys(self, o) -> list:
    """[(GMEM root id, access key)] of the plain register writes `o` makes (at any depth) into
    GMEM that nothing reads back (read-back GMEM is ordered by `before`)."""
    return [(self.root(r).id, access_key(x, self.window(r)) or (self.window(r), None))
            for x, r, a in deep_effects(o) if r is not None and r.type.space == Space.GMEM
            and a == Access.REG_WRITE and not isinstance(x, AtomicUpdate) and self.root(r).id not in self.read_back]

  def rewrites_others_elements(self, o, st) -> bool:
    """Whether `o` writes GMEM elements that other threads surely wrote since the last barrier."""
    for root, key in self.reg_write_keys(o):
      for k in st.gmem_reg_writes[root].near(key[0]) if root in st.gmem_reg_writes else ():
        mine = k == key and key[1] is not None and (self.single_warpgroup or key[1].wgs > 1)
        if not mine and not disjoint(k[0], key[0], self.bounds):
          return True
    return False

  def store_pairs(self, o, st):
    """(an in-flight store, a store of `o`) to one GMEM root, not both the same atomic reduction."""
    for root, w in self.store_keys(o):
      for p in st.store_windows[root].near(w[0]) if root in st.store_windows else ():
        if p[1] is None or p[1] != w[1]:
          yield p[0], w[0]

  def await_gmem(self, roots, st, out, loc):
    """GMEM a TMA store may still be writing is read (or rewritten) only after the store lands."""
    if roots & st.gmem_stored:
      out.append(AwaitStores(False, loc))     # every store done: SMEM reads and GMEM writes
      st.gmem_stored.clear()
      st.store_windows.clear()
      st.pending_store.clear()
      st.store_log.clear()
      st.store_base.clear()
      st.deferred.clear()
