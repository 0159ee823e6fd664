"""Whole-kernel proofs about clusters, on the grid evaluation (frontend/absint.py).

The GPU reports none of these mistakes: it hangs, races or faults. Interpret mode finds
them when it runs; here they are found while compiling, where the program-id arithmetic
decides them in every program that certainly runs the op:

* an ml.cluster_ref whose CTA index falls outside the cluster (IndexOutOfBoundsError);
* an ml.cluster_sync() that some CTAs of a cluster reach and a peer never does, when the
  CTAs certainly call it different numbers of times (ClusterSyncError: a hang);
* a peer's buffer read (or written) through ml.cluster_ref while that peer certainly wrote the
  buffer since the last ml.cluster_sync() (RaceError);
* a peer's buffer read (or written) with no ml.cluster_sync() after it before the kernel ends:
  the peer may exit, and its SMEM be reused, while it is read (RaceError).

Like checks.py, each report names a program that certainly makes the mistake: writes count only
where they certainly happen, a sync wherever it may, so valid kernels pass.
"""
from __future__ import annotations

import numpy as np

from . import errors as E
from . import ir
from .absint import UNKNOWN, GridEval
from .ir import Access as A
from .ops.control import ClusterSync
from .ops.memory import ClusterRef, View

WRITES = (A.REG_WRITE, A.TMA_WRITE)
END_HINT = ("end the kernel with ml.cluster_sync() (after the last ml.cluster_ref access), so no CTA exits"
            " while a peer still reads or writes its SMEM")


def check_clusters(kernel: ir.Kernel) -> list:
  """The cluster mistakes the grid evaluation proves (none for kernels without a cluster)."""
  c, g = kernel.cluster, kernel.grid
  if np.prod(c) == 1 or any(n % k for n, k in zip(g, c)):
    return []
  if not any(isinstance(o, (ClusterRef, ClusterSync)) for o in ir.walk(kernel.body)):
    return []
  ev = _ClusterEval(kernel)
  if not ev.run():
    return []
  return ev.finish()


class _ClusterEval(GridEval):
  """The grid evaluation, watching cluster_syncs, cluster_refs and SMEM writes."""

  def __init__(self, kernel: ir.Kernel):
    super().__init__(kernel, self.access)
    self.c = kernel.cluster
    self.lo = np.zeros(self.P, np.int64)          # ml.cluster_sync() calls each program certainly made
    self.hi = np.zeros(self.P, np.float64)        # ... and may have made (inf: uncounted)
    self.syncs: list = []                         # (op, must, may) of every sync visited, in order
    self.written: dict = {}                       # root id -> [(window, programs, loc)] written since a sync
    self.peer_uses: dict = {}                     # op -> programs that used a peer's SMEM since a sync
    self.errors: list = []
    self.smem = {a.id for a in kernel.smem}

  # ------------------------------------------------------------ the grid's clusters
  def peer(self, axis: int, k):
    """Per program, the linear index of the CTA with coordinate `k` along `axis` in its cluster."""
    pid = [a.copy() for a in self.pid]
    pid[axis] = pid[axis] - pid[axis] % self.c[axis] + k
    g = self.kernel.grid
    return pid[0] + g[0] * (pid[1] + g[1] * pid[2])

  def cluster_of(self):
    g, c = self.kernel.grid, self.c
    x, y, z = (a // k for a, k in zip(self.pid, c))
    return x + (g[0] // c[0]) * (y + (g[1] // c[1]) * z)

  def report(self, err):
    if all((type(e), e.loc) != (type(err), err.loc) for e in self.errors):
      self.errors.append(err)

  # ------------------------------------------------------------ visits
  def effects(self, o, must, may):
    if isinstance(o, ClusterSync):
      self.sync(o, must, may)
    elif isinstance(o, ClusterRef):
      self.cluster_ref(o, must)
    super().effects(o, must, may)

  def sync(self, o, must, may):
    self.lo[must] += 1
    self.hi[may] += 1 if self.exact else np.inf
    self.syncs.append((o, must.copy(), may.copy()))
    for writes in self.written.values():
      for _, progs, _ in writes:
        progs[may] = False
    for progs in self.peer_uses.values():
      progs[may] = False

  def cluster_ref(self, o, must):
    k, n = self.value(o.cta), self.c[o.axis]
    if k is UNKNOWN or not self.exact:
      return
    bad = must & ((k < 0) | (k >= n))
    if bad.any():
      p = int(np.flatnonzero(bad)[0])
      self.report(E.IndexOutOfBoundsError(
          f"the CTA index of this ml.cluster_ref is {int(k[p])} in program {self.program(p)}, outside the"
          f" cluster's {n} CTAs along axis {o.axis}", o.loc,
          hint=f"CTAs of the cluster are numbered 0 to {n - 1} along axis {o.axis}: this CTA's own is"
               f" ml.program_id({o.axis}) % {n}, its neighbour's (ml.program_id({o.axis}) + 1) % {n}"))

  def access(self, acc):
    w = acc.window
    if w.remote:
      self.peer_access(acc)
    elif acc.kind in WRITES and w.root.id in self.smem and acc.must.any():
      self.written.setdefault(w.root.id, []).append(
          (tuple(zip(w.starts, w.sizes)), acc.must.copy(), acc.op.loc))

  def peer_window(self, ref):
    """(ClusterRef, ((start, size) per root dimension)) of an access through ml.cluster_ref: the
    peer's whole buffer, or one view of it (starts as this program computes them); None else."""
    d = self.defs.get(ref.id)
    outer = None
    if isinstance(d, View):
      outer, d = d, self.defs.get(d.ref.id)
    if not isinstance(d, ClusterRef):
      return None
    inner = self.defs.get(d.ref.id)
    if d.ref.id in self.smem:
      inner = None
    elif not (isinstance(inner, View) and inner.ref.id in self.smem) or outer is not None:
      return None                      # (a view of a view: left to interpret mode)
    view = outer or inner
    if view is None:
      return d, tuple((self.value(0), n) for n in d.ref.type.shape)
    return d, tuple((self.value(i.start), i.size) for i in view.index)

  def peer_access(self, acc):
    got = self.peer_window(acc.ref)
    if got is None or not acc.exact:
      return
    d, win = got
    k = self.value(d.cta)
    if k is UNKNOWN:
      return
    inside = (k >= 0) & (k < self.c[d.axis])
    q = np.where(inside, self.peer(d.axis, np.where(inside, k, 0)), 0)
    me = np.arange(self.P)
    progs = acc.must & inside & (q != me)
    if not progs.any():
      return
    self.peer_uses.setdefault(acc.op, np.zeros(self.P, bool))[progs] = True
    same_phase = (self.lo <= self.hi[q]) & (self.lo[q] <= self.hi)   # sync counts that may agree
    shape = acc.window.root.type.shape
    for wrote, writers, loc in self.written.get(acc.window.root.id, []):
      race = progs & writers[q] & same_phase & _overlap(win, wrote, q, shape)
      if race.any():
        p = int(np.flatnonzero(race)[0])
        name = acc.window.root.name or "the buffer"
        verb = "writes" if acc.kind in WRITES else "reads"
        self.report(E.RaceError(
            f"program {self.program(p)} {verb} {name} of program {self.program(int(q[p]))} (ml.cluster_ref)"
            f" while that program may still be writing it: no ml.cluster_sync() comes between its write of"
            f" {name} and this access", acc.op.loc,
            notes=(f"{loc}: program {self.program(int(q[p]))} writes {name} here",),
            hint=f"call ml.cluster_sync() after the write of {name} and before this ml.cluster_ref access"))
        return

  # ------------------------------------------------------------ at the end
  def finish(self) -> list:
    for o, progs in self.peer_uses.items():
      if progs.any():
        p = int(np.flatnonzero(progs)[0])
        self.report(E.RaceError(
            f"program {self.program(p)} uses another CTA's SMEM here (ml.cluster_ref), but no"
            f" ml.cluster_sync() follows before the kernel ends: the other CTA may exit, and its SMEM be"
            f" reused, while it is read", o.loc, hint=END_HINT))
    self.check_sync_counts()
    return self.errors

  def check_sync_counts(self):
    """A cluster whose CTAs certainly call ml.cluster_sync() different numbers of times hangs."""
    cid = self.cluster_of()
    order = np.argsort(cid, kind="stable")
    bounds = np.flatnonzero(np.diff(cid[order])) + 1
    for members in np.split(order, bounds):
      p = members[np.argmax(self.lo[members])]
      q = members[np.argmin(self.hi[members])]
      if self.lo[p] <= self.hi[q]:
        continue
      # the first sync p certainly reaches and q certainly does not: where they part
      o = next((o for o, must, may in self.syncs if must[p] and not may[q]), None)
      if o is None:
        o = [o for o, must, _ in self.syncs if must[p]][-1]
      self.report(E.ClusterSyncError(
          f"program {self.program(int(p))} reaches this ml.cluster_sync() but program {self.program(int(q))}"
          f" of its cluster does not (it calls ml.cluster_sync() {_times(self.lo[q], self.hi[q], 'at most')},"
          f" program {self.program(int(p))} {_times(self.lo[p], self.hi[p], 'at least')}): the CTAs of a"
          f" cluster wait for each other there, so on the GPU this hangs", o.loc,
          hint="call ml.cluster_sync() the same number of times in every CTA of a cluster: move it out of"
               " the branch (or loop) whose condition (or trip count) differs between them"))
      return


def _times(lo, hi, bound: str) -> str:
  """How many times a program calls ml.cluster_sync(): exactly, or the bound that is known."""
  n = int(hi) if bound == "at most" else int(lo)
  return ("" if lo == hi else bound + " ") + ("once" if n == 1 else f"{n} times")


def _overlap(read, wrote, q, shape) -> np.ndarray:
  """Per program p, whether its window `read` of peer q[p]'s buffer certainly overlaps the window
  `wrote` that q wrote (each (start, size) per dimension; starts per program, or UNKNOWN)."""
  out = np.ones(len(q), bool)
  for (rs, rn), (ws, wn), full in zip(read, wrote, shape):
    if rs is not UNKNOWN and ws is not UNKNOWN:
      out &= (rs < ws[q] + wn) & (ws[q] < rs + rn)
    elif not ((rs is not UNKNOWN and rn == full and not rs.any())
              or (ws is not UNKNOWN and wn == full and not ws.any())):
      out &= False          # (one whole dimension overlaps any window of it)
  return out
