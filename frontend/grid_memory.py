"""The memory proofs of the grid evaluation (frontend/checks.py runs them): what each SMEM buffer and output
holds over the grid, as the visitor of absint.GridEval: uninitialised reads, windows outside their buffers,
outputs left unwritten, races between programs, multicast windows, and the TMA starts check_tiled_starts reads
(split from checks.py in probe 58c)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import errors as E
from . import ir
from . import tma_tail
from .absint import UNKNOWN, Window
from .contraction import ContractionReads
from .coverage import Boxes, describe, unique_rows
from .empty_masks import EmptyMasks
from .gather_bounds import GatherBounds
from .mask_boxes import kept_boxes, store_mask
from .memory_errors import (_with_lone_axis_note, gathered_table_read, grid_rank, masked_store_words, uncovered_error,
                            scalar_read_hint, uninitialized_read, masked_outside_hint)
from .idle_axes import idle_axis_hint
from .stride_hints import loop_trips_hint
from .ir import Access as A
from .ops.access import MaskedLoad, MaskedStore, ScalarRead
from .ops.atomic import AtomicKind, AtomicUpdate
from .ops.gather import Gather, ScatterUpdate
from .ops.memory import Copy, View
from .scatter_races import data_scatter_races, note_data_scatter
from .races import ACCUMULATED_READ, Writers, spin_wait, plain_write_hint, race_error, short_step_hint
from .types import Space

from .bounds_hints import READS, _bounds_hint

MASKED = (MaskedLoad, MaskedStore)      # touch only where a mask holds: windows may leave GMEM
MAX_READ_BOXES = 100_000
_VERB = {A.REG_READ: "register read", A.REG_WRITE: "register write", A.MMA_READ: "ml.dot operand",
         A.TMA_READ: "copy", A.TMA_WRITE: "copy"}


@dataclasses.dataclass
class Facts:
  """What the proofs learnt for later passes: the GMEM window starts of each TMA copy site."""
  tma_starts: dict = dataclasses.field(default_factory=dict)   # (loc, dim) -> np.ndarray or UNKNOWN
  late: list = dataclasses.field(default_factory=list)         # mistakes to report when no other is found
  # integer //, % and fmod ops whose divisor the grid evaluation knew non-zero in every program and trip
  # (mark_nonzero_divisions rebuilds them with Binary.nonzero: the lowering keeps their plain division)
  nonzero_divisions: list = dataclasses.field(default_factory=list)
  # tensor comparisons of index grids proven free of wrap-around in every program and trip (rebuilt with
  # Compare.no_wrap: frontend/grid_affine.py)
  no_wrap_compares: list = dataclasses.field(default_factory=list)
  # ids of the integer scalars the grid evaluation knew non-negative in every program and trip (a Triton port's
  # TritonSemanticsWarning of `a // b` or `a % b` of them is not issued: frontend/triton_semantics.py)
  nonneg_scalars: frozenset = frozenset()


def _in_source_order(errors: list, kernel: ir.Kernel) -> list:
  """`errors` of the per-output checks (races, coverage) in source order, as the other checks report: they
  came in the outputs' order, so a race on the second output, written at line 9, came after one on the first
  written at line 10. Those at lines of another file (an @ml.inline helper's) come after, in their order."""
  here = getattr(kernel.loc, "filename", None)
  return sorted(errors, key=lambda e: (getattr(e.loc, "filename", None) != here, getattr(e.loc, "lineno", 0) or 0,
                                       getattr(e.loc, "col_offset", 0) or 0))


def _plain_write(acc) -> bool:
  """A write that certainly replaces its whole window (not masked, atomic or reducing)."""
  o = acc.op
  return (acc.kind in (A.REG_WRITE, A.TMA_WRITE) and not isinstance(o, MASKED + (AtomicUpdate,))
          and getattr(o, "reduce", None) is None)


class _Memory:
  """The visitor of the grid evaluation: what each SMEM buffer and output holds."""

  def __init__(self, kernel: ir.Kernel):
    self.kernel, self.ev = kernel, None
    # Outputs that start with values: aliased to an input, or updated by atomics (the identity).
    aliased = {kernel.outputs[o].value.id for o in kernel.aliases.values()} | set(kernel.accumulated)
    self.tracked = {a.id: Boxes(a.type.shape) for a in kernel.smem if a.type.shape}
    for p in kernel.outputs:
      if p.value.id not in aliased and p.value.type.shape:
        self.tracked[p.value.id] = Boxes(p.value.type.shape)
    self.first_write: dict[int, object] = {}
    self.first_starts: dict[int, tuple] = {}  # output id -> (window starts over the programs, the programs) of its first write
    self.masked_off: dict[int, tuple] = {}   # root id -> (first masked store, its stores' whole windows)
    self.writers = {p.value.id: Writers(p.value.type.shape) for p in kernel.outputs}   # 0-d ones too
    # Reads of an output's memory (through an input aliased to it, or the output itself) race
    # with other programs' certain writes of the same elements.
    self.read_as = {kernel.inputs[i].value.id: kernel.outputs[o].value.id for i, o in kernel.aliases.items()}
    self.read_as.update({p.value.id: p.value.id for p in kernel.outputs})
    self.errors: list = []
    self.facts = Facts()
    # Outputs updated with atomics: each program's certain updates, and reads of them (added as the
    # "writes" of a Writers, the updates as its "reads"), so a read races only with other programs'
    # updates of the same elements; an output updated where the proof cannot tell stays whole.
    # (an output written by plain scatters, kind SET, is written plainly at places that are data: its
    # races are interpret mode's, as a plain store's at a run-time index are)
    self.atomic = {o: Writers(v.type.shape) for o, k in kernel.accumulated.items() if k != AtomicKind.SET
                   for v in [next(p.value for p in kernel.outputs if p.value.id == o)]}
    self.atomic_unknown: set = set()
    self.atomic_plain: set = set()     # locations of plain stores into atomically updated outputs
    self.scattered = {o.ref.id for o in ir.walk(kernel.body) if isinstance(o, ScatterUpdate)}
    # Plain stores into outputs atomic scatters update (probe 55a): raced with the scatters' elements where every
    # scatter's indices are known while compiling (ml.arange chains), else left to interpret mode (a histogram's
    # bins of data beside a header element the kernel writes)
    self.scatter_data: set = set()
    self.scatter_plain: list = []
    self.data_scatters: list = []     # (a store covering where they land is a race: scatter_races.py)
    self.alias_reads: dict = {}      # loc -> the aliased input a read of an updated output names
    self.smem_per_program: dict = {}  # SMEM root id -> Boxes over (program, *shape): what each may have written
    self.smem_uneven: set = set()     # SMEM roots some programs may write differently from others
    self.contraction = ContractionReads(kernel)   # how far each input axis a dot sums over is read
    self.synced = synced_ops(kernel)   # accesses after an acquiring atomic: interpret mode's (ops/atomic_rmw.py)
    self.empty = EmptyMasks()          # masked accesses whose mask keeps nothing (frontend/empty_masks.py)
    self.gathers = GatherBounds(kernel)   # unmasked gathers past the end (frontend/gather_bounds.py)

  def bounds(self, acc):
    """Windows outside their buffer: each a mistake of one program, certain without the others."""
    w = acc.window
    gmem_tma = w.root.type.space == Space.GMEM and acc.kind in (A.TMA_READ, A.TMA_WRITE)
    masked = isinstance(acc.op, MASKED)
    if gmem_tma and not w.remote:
      tma_tail.check(self, acc)       # (a window wholly past a 1-D array of no whole 16-byte units faults)
    if acc.exact and not w.remote and not gmem_tma and not (masked and w.root.type.space == Space.GMEM):
      self.check_bounds(acc)
    elif acc.exact and not w.remote and masked:
      self.check_masked_bounds(acc)
    if isinstance(acc.op, (Gather, ScatterUpdate)) and acc.op.view and self.ev.exact:
      # the view a gather or scatter indexes: its indices are clamped (dropped) at the view's edges
      view = acc.op.view
      self.check_bounds(dataclasses.replace(acc, window=Window(
          w.root, tuple(self.ev.value(i.start) for i in view), tuple(i.size for i in view))))

  def _accumulated_read(self, acc, w, root) -> bool:
    """Record a read of atomically updated output `root` (or of the input aliased to it) for
    race_errors; False if it cannot be told."""
    if not (acc.exact and all(x is not UNKNOWN for x in w.starts) and root not in self.atomic_unknown):
      return False
    if root != w.root.id:
      self.alias_reads[acc.op.loc] = w.root.name
    self.atomic[root].add(*self.boxes_of(w, acc.must, dedupe=False), np.flatnonzero(acc.must), acc.op.loc)
    return True

  def __call__(self, acc):
    w, kind = acc.window, acc.kind
    self.contraction(acc, READS)
    gmem_tma = w.root.type.space == Space.GMEM and kind in (A.TMA_READ, A.TMA_WRITE)
    if gmem_tma:
      self.record_starts(acc)
      if kind == A.TMA_READ and isinstance(acc.op, Copy) and acc.op.multicast is not None:
        self.check_multicast(acc)
    masked = isinstance(acc.op, MASKED)
    self.bounds(acc)
    self.empty.see(self, acc)
    self.gathers.see(self, acc)
    # (programs along the batch axis jax.vmap added update separate slices: not "other programs")
    batch = self.kernel.grid[self.kernel.batch_axis] if self.kernel.batch_axis is not None else 1
    # An access after an acquiring atomic (under a lock, a last program's reads) meets other programs' in an
    # order the atomics set, which the proofs do not follow: its races (and the reads of what another program
    # wrote) are interpret mode's, which orders the programs as the atomics do (lowering/interpret_sync.py).
    synced = id(acc.op) in self.synced and w.root.type.space == Space.GMEM
    if kind not in READS and w.root.id in self.atomic and acc.may.any() and not synced:
      # any write of an atomically updated output (an update, a reduce=, a plain store): reads of the
      # same elements by other programs race with it. Only what certainly happens where the proof
      # knows the window is recorded; a write that may happen leaves the output to the whole rule.
      plain = _plain_write(acc)      # a plain store races with other programs' updates, as a read does
      known = acc.exact and all(x is not UNKNOWN for x in w.starts) and not (acc.may & ~acc.must).any()
      boxes = self.boxes_of(w, acc.must, dedupe=False) if known else None
      if not plain and isinstance(acc.op, ScatterUpdate):
        # an atomic scatter: the elements its indices name where they are known while compiling
        boxes = self._scatter_boxes(acc, *boxes) if known else None
        if boxes is None:
          boxes = self.boxes_of(w, acc.must, dedupe=False) if known else None
          note_data_scatter(self, acc, boxes)     # (its indices of data: frontend/scatter_races.py, probe 56b)
      if plain and w.root.id in self.scattered:
        if isinstance(acc.op, ScatterUpdate) or not known:
          pass                       # a plain scatter's elements are data: left to interpret mode
        else:                        # (judged once every scatter's indices are seen: race_errors)
          self.scatter_plain.append((w.root.id, boxes, np.flatnonzero(acc.must), acc.op.loc))
      elif known:
        if plain:
          self.atomic_plain.add(acc.op.loc)
        self.atomic[w.root.id].add(*boxes, np.flatnonzero(acc.must), acc.op.loc, read=None if plain else "update")
      elif not plain:
        self.atomic_unknown.add(w.root.id)
    updated = self.read_as.get(w.root.id) if kind in READS else None    # (an aliased input is its output)
    if (updated in self.atomic and self.ev.P // batch > 1 and acc.must.any() and not synced
        and not self._accumulated_read(acc, w, updated)):
      self.report(E.RaceError(
          f"{w.root.name}{_aliased(self.kernel, w.root.id)} is read here while other programs may still be"
          f" adding to it with atomics:"
          f" programs run in no fixed order, so the value read depends on timing", acc.op.loc,
          hint=spin_wait(acc.op.loc) + ACCUMULATED_READ + _aliased_hint(self.kernel, w.root.id)))
    certain = acc.exact and all(x is not UNKNOWN for x in w.starts) and acc.must.any()
    if certain and not synced and w.root.id in self.writers and (_plain_write(acc) or isinstance(acc.op, MaskedStore)):
      self.writers[w.root.id].add(*self.certain_boxes(acc), acc.op.loc)
    out = self.read_as.get(w.root.id)
    if certain and not synced and kind in READS and out is not None and out not in self.kernel.accumulated:
      self.writers[out].add(*self.certain_boxes(acc), acc.op.loc, read=w.root.name or "this array")
    boxes = self.tracked.get(w.root.id)
    if boxes is None:
      return
    smem = w.root.type.space == Space.SMEM
    if smem and kind not in READS:
      self._smem_written(acc)
    if kind not in READS:            # writes, and effects this check does not know: may write
      if isinstance(acc.op, AtomicUpdate) and acc.op.kind != AtomicKind.SET and acc.exact and not w.remote:
        # an atomic update of SMEM reads what it combines with: a buffer nothing filled holds garbage
        self.check_read(acc, boxes, atomic=True)
      lo, hi = self.boxes_of(w, acc.may)
      kept = self.masked_boxes(acc) if acc.kind == A.REG_WRITE else None
      if kept is not None:           # a mask known while compiling: only the elements it keeps
        self.masked_off.setdefault(w.root.id, (acc.op, Boxes(w.shape)))[1].add(lo, hi)
        lo, hi = kept
      boxes.add(lo, hi)
      self.first_write.setdefault(w.root.id, acc.op.loc)
      if not smem:
        self.first_starts.setdefault(w.root.id, (tuple(w.starts), acc.may))
    elif acc.exact and not w.remote and not masked and not getattr(acc.op, "merge", False) and not synced:
      seen = len(self.errors)
      self.check_read(acc, boxes)
      if smem and len(self.errors) == seen and not getattr(acc.op, "keep", None):
        self._smem_unwritten(acc)

  def _smem_written(self, acc):
    """SMEM is each CTA's own: what each program may have written, as boxes over (program, *shape)."""
    w = acc.window
    per = self.smem_per_program.setdefault(w.root.id, Boxes((self.ev.P,) + tuple(w.root.type.shape)))
    pids = np.flatnonzero(acc.may)
    if len(pids) and not w.remote:
      lo, hi = self.boxes_of(w, acc.may)
      if len(lo) != 1 or not acc.may.all():
        self.smem_uneven.add(w.root.id)    # (else what each program wrote is the union check_read takes)
      if len(lo) == 1:               # one window in every program: a box a run of consecutive programs
        cut = np.flatnonzero(np.diff(pids) != 1) + 1
        first, last = pids[np.r_[0, cut]], pids[np.r_[cut - 1, len(pids) - 1]] + 1
        per.add(np.c_[first, np.repeat(lo, len(first), 0)], np.c_[last, np.repeat(hi, len(first), 0)])
      else:
        lo, hi = self.boxes_of(w, acc.may, dedupe=False)
        per.add(np.c_[pids, lo], np.c_[pids + 1, hi])

  def _smem_unwritten(self, acc):
    """A read, in a program that certainly reads it, of SMEM elements nothing in that program may have
    written (the write on another program's branch: `if pid % 2 == 0: buf[...] = ...`, then `else:`
    a read of buf): the union over programs the check_read proof takes cannot see it. (Clusters, whose
    CTAs write each other's SMEM, are left to that union.)"""
    w = acc.window
    per = self.smem_per_program.get(w.root.id)
    pids = np.flatnonzero(acc.must)
    if (per is None or not len(pids) or w.root.id not in self.smem_uneven or math.prod(self.kernel.cluster) > 1
        or any(x is UNKNOWN for x in w.starts)):
      return
    lo, hi = self.boxes_of(w, acc.must, dedupe=False)
    shape = np.asarray(w.root.type.shape, np.int64)
    lo, hi = np.clip(lo, 0, shape), np.clip(hi, 0, shape)
    g = per.cells([np.c_[pids, lo], np.c_[pids + 1, hi]])
    m = per.mask(g) if not per.overflow else None
    if m is None:
      return
    # the written cells of each program's window, all programs at once: a prefix sum over (program, *cells)
    a, b, row = lo // g[1:], hi // g[1:], pids // g[0]
    sums = np.zeros(tuple(n + 1 for n in m.shape), np.int64)
    sums[(slice(1, None),) * m.ndim] = m
    for d in range(m.ndim):
      sums = np.cumsum(sums, axis=d)
    got = np.zeros(len(pids), np.int64)
    for corner in np.ndindex(*(2,) * m.ndim):
      idx = tuple(np.where(c, hi_, lo_) for c, lo_, hi_ in zip(corner, [row] + list(a.T), [row + 1] + list(b.T)))
      got += (-1) ** (m.ndim - sum(corner)) * sums[idx]
    short = np.flatnonzero(got < np.prod(np.maximum(b - a, 0), axis=1))
    if len(short):
      p, a, b = pids[short[0]], a[short[0]], b[short[0]]
      sub = m[(p // g[0],) + tuple(slice(x, y) for x, y in zip(a, b))]
      missing = np.zeros(m.shape[1:], bool)
      missing[tuple(slice(x, y) for x, y in zip(a, b))] = ~sub
      name = w.root.name or "this buffer"
      region = describe(name, w.root.type.shape, missing, g[1:])[0] if sub.any() else name
      self.report(uninitialized_read(name, region, f" in program {self.ev.program(int(p))}", False, acc.op.loc))

  def masked_boxes(self, acc, progs=None, mask=None, exact_only=False):
    """(lo, hi) rows of what a masked store whose mask is known while compiling writes in each
    program of acc.may (or of `progs`): its window narrowed to the box its mask keeps; None for
    other writes. With `exact_only`, (lo, hi, programs) of exactly the elements it keeps, or None."""
    mask = mask if mask is not None else store_mask(self.ev.defs, acc.op)
    progs = acc.may if progs is None else progs
    w, v = acc.window, self.ev.defs.get(acc.ref.id)
    if mask is None or w.remote or (isinstance(v, View) and v.transpose):
      return None
    dims = [k for k, i in enumerate(v.index) if not i.squeeze] if isinstance(v, View) else range(len(w.shape))
    kept = kept_boxes(self.ev, mask, np.flatnonzero(progs), exact_only)
    if kept is None or len(dims) != kept[1].shape[1]:
      return None
    owner, klo, khi = kept
    lo, hi = (b[owner] for b in self.boxes_of(w, progs, dedupe=False))
    for j, k in enumerate(dims):
      if w.starts[k] is not UNKNOWN:   # (a window somewhere unknown stays whole)
        lo[:, k], hi[:, k] = lo[:, k] + klo[:, j], lo[:, k] + khi[:, j]
    empty = (hi <= lo).any(axis=1) | (khi <= klo).any(axis=1)
    lo[empty], hi[empty] = 0, 0
    return (lo, hi, np.flatnonzero(progs)[owner]) if exact_only else (lo, hi)

  def certain_boxes(self, acc):
    """(lo, hi, programs) of the elements an access whose window is known certainly touches in each
    program that certainly performs it: the whole window, or, for a masked one, what a mask known
    exactly while compiling keeps (a stencil's halo: `idx >= 0`); nothing where the mask is not known."""
    if not isinstance(acc.op, MASKED):
      return (*self.boxes_of(acc.window, acc.must, dedupe=False), np.flatnonzero(acc.must))
    kept = self.masked_boxes(acc, acc.must, acc.op.mask, exact_only=True)
    rank = len(acc.window.shape)
    return kept if kept is not None else (np.zeros((0, rank), np.int64), np.zeros((0, rank), np.int64),
                                          np.zeros(0, np.int64))

  def report(self, err):
    """Keep `err` unless one of its class stands at its place, or says the same on its line (the compiler's own
    read again of a window the user read, a (1, n) row stored whole: its statement's column; probe 52e)."""
    line = lambda e: (type(e), e.loc.filename, e.loc.lineno, e.message)
    if all((type(e), e.loc) != (type(err), err.loc) and line(e) != line(err) for e in self.errors):
      self.errors.append(err)

  def _scatter_boxes(self, acc, lo, hi):
    """The window rows (lo, hi) of the atomic scatter `acc` narrowed, per program, to the bounding box of its
    indices where they are known while compiling (`o.at[ml.arange(128)]`, `o.at[i, 64 + ml.arange(64)]`); None
    where one is data (probe 55a: a plain store beside it is then proved apart or a race)."""
    from .mask_boxes import _Eval
    progs = np.flatnonzero(acc.must)
    if len(acc.op.indices) != lo.shape[1]:
      return None
    lo, hi = lo.copy(), hi.copy()
    for d, v in enumerate(acc.op.indices):
      val = _Eval(self.ev, progs, tuple(getattr(v.type, "shape", ()))).value(v) if isinstance(v, ir.Value) else \
          (np.asarray(v).reshape(1) if isinstance(v, int) else None)
      if val is None:
        return None
      val = np.asarray(val).reshape(val.shape[0], -1) if val.ndim else val.reshape(1, 1)
      if not val.size:
        return None
      lo[:, d] = np.maximum(lo[:, d], val.min(1))
      hi[:, d] = np.minimum(hi[:, d], val.max(1) + 1)
    return lo, np.maximum(hi, lo)

  def boxes_of(self, w, progs, *, dedupe=True):
    """(lo, hi) rows of the window in each program of `progs`; unknown starts span the dimension, or, in a
    summarised loop, the hull of their windows over its trips (w.spans)."""
    idx = np.flatnonzero(progs)
    spans = w.spans or (None,) * len(w.starts)
    same = lambda a: (a[idx] == a[idx[0]]).all()
    if dedupe and all(same(s) if s is not UNKNOWN else sp is None or (same(sp[0]) and same(sp[1]))
                      for s, sp in zip(w.starts, spans)):
      idx = idx[:1]                     # the same window in every program: one row
    lo = np.zeros((len(idx), len(w.shape)), np.int64)
    hi = np.empty_like(lo)
    for d, (s, sp, n, full) in enumerate(zip(w.starts, spans, w.sizes, w.shape)):
      if s is UNKNOWN and sp is not None:
        lo[:, d] = sp[0][idx]
        hi[:, d] = sp[1][idx] + n
      elif s is UNKNOWN:
        hi[:, d] = full
      else:
        lo[:, d] = s[idx]
        hi[:, d] = s[idx] + n
    return lo, hi

  # ------------------------------------------------------------ reads
  def check_read(self, acc, boxes: Boxes, atomic=False):
    w = acc.window
    lo, hi = self.boxes_of(w, acc.may)
    keep = getattr(acc.op, "keep", None)
    if keep:                # a masked SMEM load uses only the elements its mask keeps
      v = self.ev.defs.get(acc.ref.id)
      dims = [k for k, i in enumerate(v.index) if not i.squeeze] if isinstance(v, View) else range(len(w.shape))
      if len(dims) != len(keep):
        return
      for k, (a, b) in zip(dims, keep):
        if b <= a:
          return
        lo[:, k], hi[:, k] = lo[:, k] + a, lo[:, k] + b
    shape = np.asarray(w.shape, np.int64)
    lo, hi = np.clip(lo, 0, shape), np.clip(hi, 0, shape)
    rows, first = unique_rows(np.concatenate([lo, hi], axis=1))
    if len(rows) > MAX_READ_BOXES:
      return
    nd = len(w.shape)
    g = boxes.cells([rows[:, :nd], rows[:, nd:]])
    m = boxes.mask(g)
    if m is None:
      return
    exact = all(s is not UNKNOWN for s in w.starts)
    for row, f in sorted(zip(rows, first), key=lambda t: t[1]):
      a, b = row[:nd] // g, row[nd:] // g
      if np.any(b <= a):
        continue
      sub = m[tuple(slice(x, y) for x, y in zip(a, b))]
      if sub.all() or (not exact and sub.any()):
        continue
      missing = np.zeros_like(m)
      missing[tuple(slice(x, y) for x, y in zip(a, b))] = ~sub
      pid = np.flatnonzero(acc.may)[f]
      self.report(self.uninitialized(acc, missing, g, m.any(), pid if len(rows) > 1 else None, atomic))
      return

  def uninitialized(self, acc, missing, g, any_written, pid, atomic=False):
    root = acc.window.root
    name = root.name or "this buffer"
    region = describe(name, root.type.shape, missing, g)[0] if any_written else name
    where = f" in program {self.ev.program(pid)}" if pid is not None else ""
    if acc.op.results and acc.op.results[0].id in getattr(self.kernel, "gathered_reads", ()) and \
        root.type.space == Space.SMEM:
      return gathered_table_read(name, region, where, root.type.shape, acc.op.loc)
    return uninitialized_read(name, region, where, root.type.space == Space.GMEM, acc.op.loc,
                              keep=getattr(acc.op, "keep", None), dtype=str(root.type.dtype), programs=self.ev.P,
                              atomic=acc.op.kind if atomic else None,
                              mma_shape=root.type.shape if acc.kind == A.MMA_READ else None,
                              source=self._copied_from(root) if acc.kind == A.MMA_READ else None)

  def _copied_from(self, root):
    """The name of the array a TMA copy fills SMEM buffer `root` (or a window of it) from, or None."""
    defs = ir.def_table(self.kernel.body)
    for o in ir.walk(self.kernel.body):
      if isinstance(o, Copy) and o.dst.type.space == Space.SMEM:
        dst, src = o.dst, o.src
        while isinstance(defs.get(dst.id), View):
          dst = defs[dst.id].ref
        while isinstance(defs.get(src.id), View):
          src = defs[src.id].ref
        if dst is root and src.name and src.name.isidentifier():
          return src.name
    return None

  # ------------------------------------------------------------ bounds
  def _trip(self, p) -> str:
    """' when t = 0' (', i = 2'): the loop indices, named by the user, of the trip being walked."""
    known = [(iv.name, v) for iv, v in self.ev.trips
             if iv.name and iv.name.isidentifier() and v is not UNKNOWN]
    return (" when " + ", ".join(f"{name} = {int(v[p])}" for name, v in known)) if known else ""

  def _is_output(self, root) -> bool:
    return any(q.is_output and q.value is root for q in self.kernel.params)

  def check_bounds(self, acc):
    w = acc.window
    for d, (s, n, full) in enumerate(zip(w.starts, w.sizes, w.shape)):
      if s is UNKNOWN:
        continue
      bad = acc.must & ((s < 0) | (s + n > full))
      if not bad.any():
        continue
      p = int(np.argmax(bad))
      win = ", ".join("?" if x is UNKNOWN else f"{int(x[p])}:{int(x[p]) + k}"
                      for x, k in zip(w.starts, w.sizes))
      root = w.root.name or "the buffer"
      where = f" in program {self.ev.program(p)}" if self.ev.P > 1 else ""
      gmem = w.root.type.space == Space.GMEM
      if isinstance(acc.op, ScalarRead):
        win = ", ".join("?" if x is UNKNOWN else str(int(x[p])) for x in w.starts)
        self.report(E.IndexOutOfBoundsError(
            f"{root}[{win}] is read{where}, outside {root}'s shape {tuple(w.shape)}", acc.op.loc,
            hint=scalar_read_hint(root, acc.op.loc, d, int(s[p]), w.root.type.dtype)))
        return
      trip = self._trip(p)
      if isinstance(acc.op, (Gather, ScatterUpdate)):
        what, edge = ("gather", "clamped to") if isinstance(acc.op, Gather) else ("scatter", "dropped outside")
        self.report(E.IndexOutOfBoundsError(
            f"this {what} indexes the view {root}[{win}]{where}{trip}, outside {root}'s shape {tuple(w.shape)}:"
            f" its indices are {edge} the view, not {root}", acc.op.loc,
            hint=f"index {root} itself with the view's start added to the indices ("
                 + (f"{root}[start + ids] for {root}.at[ml.ds(start, n)][ids]), where an index past {root}'s end"
                    f" clamps to its last element" if what == "gather" else
                    f"{root}.at[start + ids] for {root}.at[ml.ds(start, n)].at[ids]), where an update past"
                    f" {root}'s end is dropped") + ", or keep the view inside it"))
        return
      self.report(E.IndexOutOfBoundsError(
          f"this {_VERB.get(acc.kind, 'access')} touches {root}[{win}]{where}{trip}, outside {root}'s shape"
          f" {tuple(w.shape)}", acc.op.loc, hint=_bounds_hint(acc, root, d, n, full, bool((s[p] < 0)), gmem,
                                              self.ev.defs.get(acc.ref.id), output=self._is_output(w.root))))
      return

  def check_masked_bounds(self, acc):
    """A masked GMEM window may leave the array where its mask is off; where a mask known while
    compiling is on outside the array, in a program that certainly runs the access, the GPU would
    touch memory past the array (masks of data are checked in interpret mode, MG952)."""
    kept = self.masked_boxes(acc, acc.must, acc.op.mask, exact_only=True) if acc.must.any() else None
    if kept is None:
      return
    lo, hi, progs = kept
    full = np.asarray(acc.window.shape)
    out = (hi > lo).all(axis=1)[:, None] & ((lo < 0) | (hi > full))
    if not out.any():
      return
    r, d = (int(k) for k in np.argwhere(out)[0])
    p, root = int(progs[r]), acc.window.root.name or "the array"
    where = f" in program {self.ev.program(p)}" if self.ev.P > 1 else ""
    box = ", ".join(f"{a}:{b}" for a, b in zip(lo[r], hi[r]))
    what = "load" if isinstance(acc.op, MaskedLoad) else "store"
    longer = f"make {root} longer in out_shape" if self._is_output(acc.window.root) else f"pass a longer {root}"
    self.report(E.IndexOutOfBoundsError(
        f"this masked {what} touches {root}[{box}]{where}{self._trip(p)} where its mask is on, outside"
        f" {root}'s shape {tuple(acc.window.shape)}", acc.op.loc,
        hint=masked_outside_hint(acc.op.loc, root, len(acc.window.shape), lo[r, d] < 0, d, data=False) or (
             f"make the mask false before {root}'s start: keep the offsets along dimension {d} at 0 or more"
             f" (offs >= 0)" if lo[r, d] < 0 else
             f"make the mask false past {root}'s end: compare the offsets along dimension {d} with"
             f" {root}.shape[{d}] (offs < {root}.shape[{d}]), or {longer}")))

  # ------------------------------------------------------------ coverage
  def coverage_errors(self) -> list:
    return _in_source_order(self._coverage_errors(), self.kernel)

  def _coverage_errors(self) -> list:
    out = []
    for p in self.kernel.outputs:
      boxes = self.tracked.get(p.value.id)
      if boxes is None:
        continue
      # (masked stores whose masks are known: their whole windows, to tell which of them left a hole)
      store, windows = self.masked_off.get(p.value.id, (None, None))
      g = boxes.cells(windows.lo + windows.hi if windows else ())
      m = boxes.mask(g)
      if m is None or boxes.overflow or m.all():
        continue
      shape = p.value.type.shape
      if windows:
        whole = windows.mask(g)
        if whole is None:
          continue
        if (m | whole).all():        # the windows cover it: the masks leave the rest unwritten
          out.append(uncovered_error(p.name, shape, ~m, g, self.kernel.grid, store.loc,
                                     masked=masked_store_words(store, p.name)))
          continue
        m = m | whole
      if not boxes:
        out.append(E.UncoveredOutputError(
            f"{p.name} is never written: every output must be written in full", p.loc or self.kernel.loc,
            hint=f"store the results into {p.name} (ml.copy(buf, {p.name}.at[...]) or {p.name}[...] = value)"))
        continue
      err = uncovered_error(p.name, shape, ~m, g, self.kernel.grid, self.first_write[p.value.id],
                            rank=grid_rank(self.kernel))
      # (windows stepped by less than their size: they overlap and fall short of the end; the step is the fix)
      err.hint = short_step_hint(self.kernel.body, p.name, shape, self.kernel.grid,
                                 loc=self.first_write[p.value.id]) or err.hint
      err.hint = idle_axis_hint(self.ev, self.kernel, p.name, *self.first_starts.get(p.value.id, ((), None))) or err.hint
      err.hint = loop_trips_hint(self.kernel, p.name, shape, ~m, self.first_write[p.value.id]) or err.hint
      out.append(_with_lone_axis_note(self.kernel, err, (self.ev, p)))
    return out

  def race_errors(self) -> list:
    out = data_scatter_races(self)
    for root, boxes, pids, loc in self.scatter_plain:
      if root not in self.scatter_data:
        self.atomic_plain.add(loc)
        self.atomic[root].add(*boxes, pids, loc)
    batch = self.kernel.grid[self.kernel.batch_axis] if self.kernel.batch_axis is not None else 1
    for o, w in self.atomic.items():      # a read of elements another program updates atomically
      race = w.first_race() if self.ev.P // batch > 1 else None
      # (a read whose updates are not all known is reported whole; a plain write is then left to
      # interpret mode: a scatter's elements are data)
      reads = [i for i in range(len(w.locs)) if i not in w.reads and w.locs[i] not in self.atomic_plain]
      if race is not None or (o in self.atomic_unknown and reads):
        loc = race[4] if race is not None else w.locs[reads[0]]
        name = next(p.name for p in self.kernel.outputs if p.value.id == o)
        if race is not None and loc in self.atomic_plain:
          element, a, at, b = race[:4]
          if at in self.atomic_plain:      # program a also writes it plainly: point at its atomic update
            at = next((x for x in w.locs if x not in self.atomic_plain), at)
          aliased = o in {self.kernel.outputs[j].value.id for j in (self.kernel.aliases or {}).values()}
          out.append(E.RaceError(
              f"program {self.ev.program(b)} writes {name}{list(element)} here while program {self.ev.program(a)}"
              f" adds to it with atomics: programs run in no fixed order, so the sum depends on timing", loc,
              notes=(f"{at}: program {self.ev.program(a)}'s atomic update",), hint=plain_write_hint(name, aliased)))
          continue
        hint = spin_wait(loc) + ACCUMULATED_READ
        if loc in self.alias_reads:
          hint += _aliased_hint(self.kernel, next((p.value.id for p in self.kernel.inputs
                                                   if p.name == self.alias_reads[loc]), None))
          name = f"{self.alias_reads[loc]} (aliased to {name})"
        out.append(E.RaceError(
            f"{name} is read here while other programs may still be adding to it with atomics:"
            f" programs run in no fixed order, so the value read depends on timing", loc, hint=hint))
    for p in self.kernel.outputs:
      w = self.writers.get(p.value.id)
      race = w.first_race() if w is not None else None
      if race is not None:
        # a read whose statement writes the element read too (out[...] += part)
        # (or, for two writes, a statement that reads the element it writes: out[...] += part)
        accumulates = (w.writes_at(race[0], race[1], race[2]) if len(race) > 5 and race[5] is not None
                       else w.reads_on_line(race[4]))
        out.append(_with_lone_axis_note(self.kernel, race_error(p.name, race, self.ev.program,
                                                                p.value.type.shape, self.kernel.grid,
                                                                accumulates, self.kernel.body)))
    return _in_source_order(out, self.kernel)

  def check_multicast(self, acc):
    """The CTAs of a cluster along a multicast's axis load one window (each fetches a share
    of it for all): starts that differ between such peers are a race, proved over the grid
    (interpret mode checks what depends on data)."""
    w, axis, c = acc.window, acc.op.multicast, self.kernel.cluster
    if self.ev.P < 2:
      return
    pid = self.ev.pid
    every = [pid[a] // c[a] for a in range(3)] + [pid[a] % c[a] for a in range(3) if a != axis]
    _, peers = np.unique(np.stack(every, axis=1), axis=0, return_inverse=True)
    peers = peers.reshape(-1)
    lone = np.flatnonzero(acc.must & np.isin(peers, peers[~acc.may]))
    if len(lone):                 # a peer certainly skips a multicast another certainly issues
      p = lone[0]
      q = np.flatnonzero((peers == peers[p]) & ~acc.may)[0]
      self.report(E.RaceError(
          f"program {self.ev.program(p)} multicasts into its cluster here, but its peer {self.ev.program(q)}"
          f" along cluster axis {axis} does not (a loop of other trip counts, a branch): the peer's SMEM"
          f" would take a load it does not wait for, and the loads' barriers would never complete", acc.op.loc,
          hint="give the CTAs of a cluster the same trip counts and branches around a multicast (compute them"
               " from what they share: program_id // cluster size), or drop multicast="))
      return
    if any(s is UNKNOWN for s in w.starts):
      return
    progs = np.flatnonzero(acc.must)
    if len(progs) < 2:
      return
    group = [pid[a][progs] // c[a] for a in range(3)] + [pid[a][progs] % c[a] for a in range(3) if a != axis]
    _, first, inverse = np.unique(np.stack(group, axis=1), axis=0, return_index=True, return_inverse=True)
    starts = np.stack([s[progs] for s in w.starts], axis=1)
    lead = starts[first][inverse.reshape(-1)]
    bad = np.flatnonzero((starts != lead).any(axis=1))
    if len(bad):
      p, q = progs[bad[0]], progs[first[inverse.reshape(-1)[bad[0]]]]
      self.report(E.RaceError(
          f"programs {self.ev.program(q)} and {self.ev.program(p)} of a cluster multicast different windows"
          f" ({w.root.name} from {tuple(int(s[q]) for s in w.starts)} and from"
          f" {tuple(int(s[p]) for s in w.starts)}): every CTA along cluster axis {axis} must load the same"
          f" window, which each fetches a share of for all", acc.op.loc,
          hint="compute the multicast window from what the CTAs of a cluster share (e.g. the cluster's tile"
               " index, program_id // cluster size), or drop multicast= for a window that is each CTA's own"))

  # ------------------------------------------------------------ facts
  def record_starts(self, acc):
    w = acc.window
    for d, s in enumerate(w.starts):
      key = (acc.op.loc, d)
      old = self.facts.tma_starts.get(key, ())
      if s is UNKNOWN or old is UNKNOWN:
        self.facts.tma_starts[key] = UNKNOWN
      else:
        self.facts.tma_starts[key] = np.union1d(old, s[acc.may])


def synced_ops(kernel: ir.Kernel) -> set:
  """Ids of the ops that come after an acquiring single-element atomic in program order (ml.atomic_cas, an
  xchg, a ticket whose value is used): ops/atomic_rmw.py."""
  used = {v.id for o in ir.walk(kernel.body) for v in o.operands()}
  out, after = set(), False
  for o in ir.walk(kernel.body):
    if after:
      out.add(id(o))
    if (isinstance(o, AtomicUpdate) and not o.ref.type.shape and (
        o.sem in ("acquire", "acq_rel") or o.sem == "" and o.results and o.results[0].id in used)):
      after = True
  return out


def _aliased(kernel, ref_id) -> str:
  """' (aliased to out)' where `ref_id` is an input that input_output_aliases makes output out."""
  for i, o in (kernel.aliases or {}).items():
    if kernel.inputs[i].value.id == ref_id:
      return f" (aliased to {kernel.outputs[o].name})"
  return ""


def _aliased_hint(kernel, ref_id) -> str:
  """For a read of an input aliased to an updated output: how to read what it held before the call."""
  for i, o in (kernel.aliases or {}).items():
    p = kernel.inputs[i]
    if p.value.id == ref_id:
      return (f"; for the values {p.name} held before the call, pass the array a second time as an input that"
              f" is not aliased, and read that one")
  return ""
