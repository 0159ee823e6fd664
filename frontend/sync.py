"""Insert the waits, fences and barriers that asynchronous copies need.

Mosaic GPU never reports these mistakes; a kernel that misses one hangs or
races. So users never write them: this pass tracks, per SMEM buffer, what is in
flight and inserts exactly the ops the hardware needs, before:

* a read of a buffer whose TMA load has not landed      -> WaitLoad (mbarrier wait)
* a register read of SMEM other threads wrote            -> Barrier
* a TMA store of SMEM written from registers             -> CommitShared (proxy fence + barrier)
* overwriting SMEM that an in-flight TMA store reads     -> AwaitStores(read_only=True)
  (in a pipelined loop, a store buffer's stage waits only for the store that used
  it S iterations ago: AwaitStores(pending=newer stores), just before its first write)
* overwriting SMEM other threads still read or write     -> Barrier / CommitShared
* the kernel's end, with stores or loads in flight       -> WaitLoad / AwaitStores

GMEM that registers write and read back (an output kept as a histogram, a result reread)
is ordered the same way as SMEM: a barrier between one thread's write and another's read or
write. Atomic updates need none among themselves.

Control flow is handled conservatively: a loop body or branch starts from a
state that assumes the previous iteration's accesses, and ends with its own
loads landed. One exception keeps loads in flight across a plain runtime loop's back
edge (`carried_loads`): when loads into static windows of a buffer are in flight as the
loop starts, and its body's last access of each such window is a load into it at the
body's top level (a persistent kernel fetching its next row while it finishes this one),
those loads reuse the barriers of the ones before the loop and are awaited where the next
iteration (or the code after the loop) first touches their window.
"""
from __future__ import annotations

import dataclasses

from . import hw
from . import ir
from .ir import Access
from .ops.atomic import AtomicUpdate
from .ops.control import LOOPS, AwaitStores, Barrier, CommitShared, Condition, For, WaitLoad, Yield
from .ops.memory import Copy, View
from .ops.mma import Dot, DotWait
from .gmem_disjoint import disjoint, loop_bounds, past_region
from .sync_gmem import GmemOrdering, WindowSet, access_key, deep_effects, overlap, static_window
from .sync_loops import UNKNOWN_DOT, UNKNOWN_WINDOW, LoopEntry, register_a
from .types import LayoutKind, RefType, ScalarType, Space, TensorType

_NO_REF = (Access.MMA_ISSUE, Access.CTA_BARRIER, Access.CLUSTER_BARRIER)
ATOMIC = "atomic"    # a register write that is an atomic update: others of its kind need no order
KEY_TERMS = 256      # SyncPass.expr_key: a run-time start of more terms is keyed as its own value


@dataclasses.dataclass
class State:
  # root id -> {slot: the window it fills}: loads into disjoint static windows of one buffer
  # are awaited one by one, each before the first access that overlaps its window.
  pending_load: dict = dataclasses.field(default_factory=dict)
  pending_store: set = dataclasses.field(default_factory=set)
  # The TMA stores issued since this block began (or since the last wait), oldest first:
  # (root, 1, window) for a store here, (root, 0, None) for stores inside a nested region (0 or
  # more groups). A wait for a root's store may leave the newer ones in flight.
  store_log: list = dataclasses.field(default_factory=list)
  # Roots whose pending stores may predate the log (windows unknown).
  store_base: set = dataclasses.field(default_factory=set)
  dirty: set = dataclasses.field(default_factory=set)            # written from registers
  atomic: set = dataclasses.field(default_factory=set)           # updated by atomics
  # Written from registers since the last proxy fence: a Barrier orders threads but
  # not the generic proxy against the async one (TMA, WGMMA), so only CommitShared clears it.
  unfenced: set = dataclasses.field(default_factory=set)
  reg_read: set = dataclasses.field(default_factory=set)
  # root id -> the windows registers touched since the last barrier. One
  # warpgroup reading and writing one window owns the same elements in each
  # thread (the register layout is a function of the shape), so it needs no barrier.
  reg_windows: dict = dataclasses.field(default_factory=dict)
  # Dot groups issued and not yet awaited, oldest first: each the id of the value it computes,
  # or UNKNOWN_DOT (one of `unknown_dot_values`, e.g. a pipelined loop's carried accumulator),
  # and the buffers each reads.
  dots: list = dataclasses.field(default_factory=list)
  dot_roots: list = dataclasses.field(default_factory=list)
  # Parallel to `dots`: the register A operands each group reads (value ids; empty for an SMEM A). WGMMA
  # reads them while it runs, and PTX leaves writing them meanwhile undefined: a loop's next trip
  # rewrites the registers of a value its body defines, so the group retires first (`a_rewritten`).
  dot_a: list = dataclasses.field(default_factory=list)
  unknown_dot_values: set = dataclasses.field(default_factory=set)
  in_pipeline: bool = False       # a pipelined loop's body: its dots stay in flight across iterations
  # Barrier slots of loads the body re-issues for the next iteration (carried_loads): they stay
  # in flight at the back edge.
  carried: set = dataclasses.field(default_factory=set)
  # A pipelined loop's store buffers (frontend/pipeline.py): root -> stores that may stay in
  # flight when this iteration first writes its stage. Cleared by the first such wait.
  deferred: dict = dataclasses.field(default_factory=dict)
  # Buffers read by dots this warpgroup has awaited: other warpgroups may still be reading them
  # until the next barrier, so a write to them needs one first.
  dot_retired: set = dataclasses.field(default_factory=set)
  gmem_stored: set = dataclasses.field(default_factory=set)     # GMEM roots a TMA store may still write
  # GMEM root -> {(window, reduce kind)} of the TMA stores that may still write it (windows as
  # SyncPass.window keys): a store to elements one of them surely writes waits for it first.
  store_windows: dict = dataclasses.field(default_factory=dict)
  # GMEM root (written from registers only, not read back) -> the access keys of its register
  # writes since the last barrier: a write by other threads to elements one of them surely wrote
  # meets them at a barrier first (the last write wins, as in interpret mode).
  gmem_reg_writes: dict = dataclasses.field(default_factory=dict)
  # GMEM root -> {(SMEM root, slot)} of TMA loads from it that may still be reading it.
  load_src: dict = dataclasses.field(default_factory=dict)

  @property
  def dot_pending(self) -> bool:
    return bool(self.dots)


def all_slots(st: State) -> list:
  return sorted(s for slots in st.pending_load.values() for s in slots)


def ir_error(o, why):
  from .errors import InternalError
  return InternalError(f"the sync pass cannot order {type(o).__name__}: {why}", o.loc)


class SyncPass(GmemOrdering, LoopEntry):
  def __init__(self, defs, *, block: int = 128, explicit=frozenset(), deferred=None, group=None, alias=None):
    self.defs = defs
    self.group = group or {}     # buffers sharing memory (frontend/smem.py) are tracked as one
    sizes: dict = {}
    for g in self.group.values():
      sizes[g] = sizes.get(g, 0) + 1
    self.shared_groups = {g for g, n in sizes.items() if n > 1}
    # An input aliased to an output (input_output_aliases) is that output's memory: one root.
    self.alias = alias or {}     # input value id -> output value
    self.single_warpgroup = block == hw.WARPGROUP
    self.explicit = explicit     # roots a pipelined loop synchronises itself
    self.deferred = {self.group.get(r, r): n for r, n in (deferred or {}).items()}
    self.read_back = set()
    self.proxy_back = set()
    self.bounds: dict = {}       # loop indices' static ranges (frontend/gmem_disjoint.py loop_bounds)
    self._expr_keys: dict = {}   # expr_key's memo: value id -> (key, terms)

  def register_only(self) -> set:
    """GMEM roots only registers access (no TMA load reads them back): no proxy fence."""
    return self.read_back - self.proxy_back

  def root(self, ref: ir.Value) -> ir.Value:
    d = self.defs.get(ref.id)
    r = d.ref if isinstance(d, View) else ref
    return self.alias.get(r.id, r)

  def local_smem(self, ref: ir.Value):
    t = ref.type
    if isinstance(t, RefType) and t.space == Space.SMEM and not t.remote:
      rid = self.root(ref).id
      return None if rid in self.explicit else self.group.get(rid, rid)
    return None

  def accesses(self, o) -> list[tuple[int | None, Access]]:
    """The op's effects on this CTA's SMEM (by root, or group of roots sharing memory), its
    register accesses of GMEM (by root), and its ref-less effects (barriers, issuing
    tensor-core work), from its declared traits."""
    out = []
    for ref, acc in ir.traits_of(o).effects(o):
      if acc == Access.REG_WRITE and isinstance(o, AtomicUpdate):
        acc = ATOMIC
      if ref is None:
        if acc not in _NO_REF:
          raise ir_error(o, f"effect {acc} needs a ref")
        out.append((None, acc, None))
      elif (r := self.local_smem(ref)) is not None:
        out.append((r, acc, ref))
      elif self.root(ref).id in self.read_back and acc in (Access.REG_READ, Access.REG_WRITE, ATOMIC):
        out.append((self.root(ref).id, acc, ref))
      elif self.root(ref).id in self.proxy_back and acc in (Access.REG_WRITE, ATOMIC, Access.TMA_READ,
                                                            Access.TMA_WRITE):
        out.append((self.root(ref).id, acc, ref))
    return out

  def window(self, ref):
    d = self.defs.get(ref.id)
    rid = self.root(ref).id    # buffers sharing memory lay their elements out differently
    if not isinstance(d, View):
      return (rid,)
    full = d.ref.type.shape
    if all(i.start == 0 and i.size == n and not i.squeeze for i, n in zip(d.index, full)):
      return (rid,)
    # A run-time start is keyed by how it is computed (expr_key): equal keys are the same
    # window, and `overlap` tells apart only windows whose starts are ints.
    return (rid,) + tuple((self.expr_key(i.start) if isinstance(i.start, ir.Value) else i.start, i.size, i.squeeze)
                          for i in d.index)

  def expr_key(self, v):
    """A key equal for run-time scalars computed alike in one trip (`i * 64` written twice:
    the same program id or loop index, the same arithmetic); ("v", id) for anything else, and for a
    computation of more than KEY_TERMS terms (`off = ml.maximum(off, off * 1)` unrolled twenty times is
    a key of 2**20 terms: each value's key is made once, from its operands' keys, and one too large
    to compare is the value's own)."""
    memo = self._expr_keys
    if v.id not in memo:
      key, terms = self._expr_key(v, memo)
      memo[v.id] = (key, terms) if terms <= KEY_TERMS else (("v", v.id), 1)
    return memo[v.id][0]

  def _expr_key(self, v, memo):
    from .ops.control import NumPrograms, PositiveStep, ProgramId
    from .ops.elementwise import Binary
    d = self.defs.get(v.id)
    if isinstance(d, ProgramId):
      return ("pid", d.axis), 1
    if isinstance(d, NumPrograms):    # positive, one value in the kernel
      return ("nprog", d.axis), 1
    terms = [1]

    def side(x):
      if not isinstance(x, ir.Value):
        return ("c", x)
      key = self.expr_key(x)
      terms[0] += memo[x.id][1]
      return key
    if isinstance(d, PositiveStep):   # a pipelined loop's run-time step: positive (frontend/gmem_disjoint.py)
      return ("step", side(d.x)), terms[0]
    if isinstance(d, Binary) and d.tile and isinstance(v.type, ScalarType):   # ml.grouped_ids' (i, j)
      within = d.lhs if d.tile[0] else getattr(self.defs.get(getattr(d.rhs, "id", None)), "lhs", None)
      pid = getattr(self.defs.get(getattr(within, "id", None)), "lhs", None)
      if pid is not None:
        return ("tile",) + d.tile[:1] + (side(pid),) + d.tile[1:], terms[0]
    if isinstance(d, Binary) and isinstance(v.type, ScalarType):
      return ("bin", d.kind, side(d.lhs), side(d.rhs)), terms[0]
    return ("v", v.id), 1

  def thread_private(self, root, ref, o, st: State) -> bool:
    """Whether every register access of `root` since the last barrier is this window of it,
    as a tensor (a scalar access is every thread's: all of them read or write the element),
    or a window no element of which this one touches."""
    window = self.window(ref)
    key = access_key(o, window)
    if key is None:
      return False
    # With several warpgroups each holds every element, unless the tensor is split among them
    # by rows (Layout.wgs): then too each element is one thread's.
    mine = self.single_warpgroup or key[1].wgs > 1
    if root not in st.reg_windows:
      return False
    return all(k == key and mine or k is not UNKNOWN_WINDOW and not overlap(k[0], window)
               for k in st.reg_windows[root].near(window))

  def region_accesses(self, block: ir.Block) -> list[tuple[int, Access]]:
    return [(r, a) for o in ir.walk(block) for r, a, _ in self.accesses(o) if r is not None]

  def region_accesses_of(self, o) -> list[tuple[int, Access]]:
    return [x for r in o.regions for x in self.region_accesses(getattr(o, r))]

  # ------------------------------------------------------------------ rewriting
  def run(self, kernel_body: ir.Block, loc) -> None:
    # GMEM that registers write and read back (an output kept as a histogram) is ordered
    # among threads; GMEM only written, or only read, needs no order within a CTA.
    # GMEM written from registers (or atomically) and read by a TMA load in the same kernel needs
    # a barrier and a proxy fence for global memory between the two (`proxy_back`).
    seen: dict = {}
    for o in ir.walk(kernel_body):
      for ref, acc in ir.traits_of(o).effects(o):
        if ref is not None and ref.type.space == Space.GMEM and acc in (Access.REG_READ, Access.REG_WRITE,
                                                                          Access.TMA_READ, Access.TMA_WRITE):
          if acc == Access.REG_WRITE and isinstance(o, AtomicUpdate):
            acc = ATOMIC
          seen.setdefault(self.root(ref).id, set()).add(acc)
    # Read back, or written from registers and updated atomically by other threads.
    self.read_back = {r for r, accs in seen.items() if Access.REG_READ in accs and accs & {Access.REG_WRITE, ATOMIC}
                      or {Access.REG_WRITE, ATOMIC} <= accs}
    # Written from registers (or atomically) and read or written by TMA: a proxy fence between.
    self.proxy_back = {r for r, accs in seen.items()
                       if accs & {Access.TMA_READ, Access.TMA_WRITE} and accs & {Access.REG_WRITE, ATOMIC}}
    # the defining ops as they are now (a pipelined loop's renumbering substituted new ones)
    self.defs = {**self.defs, **{r.id: o for o in ir.walk(kernel_body) for r in o.results}}
    self.bounds = loop_bounds(kernel_body)
    st = State()
    self.block(kernel_body, st)
    tail = [WaitLoad(s, loc) for s in all_slots(st)]
    if st.dot_pending:
      tail.append(DotWait(0, loc))
    if any(a == Access.TMA_READ for o in ir.walk(kernel_body) for _, a in ir.traits_of(o).effects(o)):
      # Until the stores have read their SMEM (also stores of pipelined stages, synchronised
      # elsewhere): the grid's completion makes their GMEM writes visible, so a CTA need not
      # wait for them to land before it exits and the SM takes the next one (CUTLASS's
      # epilogues end the same way, cp.async.bulk.wait_group.read 0).
      tail.append(AwaitStores(True, loc))
    kernel_body.ops.extend(tail)

  def block(self, block: ir.Block, st: State) -> None:
    out = []
    for o in block.ops:
      for g in self.stage_loads(o):       # a pipelined loop's loads into memory other buffers had
        if any(g in roots for roots in st.dot_roots):
          self.dot_wait(st, out, o.loc)
        self.before(g, Access.TMA_WRITE, None, o, st, out)
      if isinstance(o, (Yield, Condition)):
        if not st.carried <= set(all_slots(st)):
          from .errors import PipelineError
          raise PipelineError(
              "this loop loads the next trip's data into SMEM before its body ends (the load stays in"
              " flight across the back edge), but something after that load waits for it: an"
              " ml.cluster_sync(), or a write into the array the load reads", o.loc,
              hint="move the ml.cluster_sync() or the write before the load of the next trip, or load the"
                   " next trip's data at the top of the next trip instead")
        out.extend(WaitLoad(s, o.loc) for s in all_slots(st) if s not in st.carried)
        st.pending_load.clear()
        if not st.in_pipeline:
          self.dot_wait(st, out, o.loc)
        else:     # the back edge copies the yielded values into the body's arguments
          self.dot_wait(st, out, o.loc, self.back_edge_wait(st, o, block))
      elif isinstance(o, DotWait):        # a pipelined loop's own wait
        self.retire(st, o.pending)
      elif o.regions:
        inner = [x for r in o.regions for x in ir.walk(getattr(o, r))]
        self.await_gmem_loads({g for x in inner for g in self.gmem_writes(x)}, st, out, o.loc)
        if any(self.issues_dot(x) for x in inner):
          self.dot_wait(st, out, o.loc)
        else:
          inside = {r.id for x in inner for r in x.results} | {
              a.id for x in [o, *inner] for r in x.regions for a in getattr(x, r).args}
          # (`o` itself too: a loop's initial values, a dot result carried in and read by the body)
          self.dot_wait(st, out, o.loc, self.dot_wait_before([o, *inner], st, inside))
        self.enter_region(o, st, out)
      else:
        self.dot_wait(st, out, o.loc, self.dot_wait_before([o], st, set()))
        self.await_gmem(self.gmem_roots(o), st, out, o.loc)
        if any(not disjoint(p, w, self.bounds) for p, w in self.store_pairs(o, st)):
          self.await_gmem(set(st.gmem_stored), st, out, o.loc)   # TMA stores land in no order
        if self.rewrites_others_elements(o, st):
          self.sync(st, out, o.loc, fence=False)
        self.await_gmem_loads(self.gmem_writes(o), st, out, o.loc)
        accs = self.accesses(o)
        for root, acc, ref in accs:
          if root is not None:
            self.before(root, acc, ref, o, st, out)
        kinds = {a for r, a, _ in accs if r is None}
        if Access.CLUSTER_BARRIER in kinds:   # publishes this CTA's SMEM to the cluster
          out.extend(WaitLoad(s, o.loc) for s in all_slots(st))
          st.pending_load.clear()
          # ... and hands it to peers that may write it: nothing of this CTA may still read it.
          self.dot_wait(st, out, o.loc)
          if st.pending_store:
            out.append(AwaitStores(True, o.loc))
            st.pending_store.clear()
            st.store_log.clear()
            st.store_base.clear()
            st.deferred.clear()
        if kinds & {Access.CTA_BARRIER, Access.CLUSTER_BARRIER}:
          if isinstance(o, Barrier) and redundant_barrier(out):
            continue
          self.met(st)
      out.append(o)
      if not o.regions:
        for root, acc, ref in self.accesses(o):
          self.after(root, acc, ref, o, st)
        if self.issues_dot(o):
          st.dots.append(o.results[0].id if o.results else UNKNOWN_DOT)
          st.dot_roots.append({r for r, a, _ in self.accesses(o) if r is not None and a == Access.MMA_READ})
          st.dot_a.append(register_a([o]))
        st.gmem_stored |= self.gmem_stores(o)
        for root, k in self.reg_write_keys(o):
          st.gmem_reg_writes.setdefault(root, WindowSet()).add(k)
        for root, w in self.store_keys(o):
          st.store_windows.setdefault(root, WindowSet()).add(w)
        if isinstance(o, Copy) and o.slot >= 0 and (r := self.local_smem(o.dst)) is not None:
          st.load_src.setdefault(self.root(o.src).id, set()).add((r, o.slot))
    block.ops[:] = out

  def stage_loads(self, o) -> list:
    """The memory groups that TMA loads of `o` (at any depth) fill through buffers a pipelined loop
    handles itself (`explicit`), where the group also holds other buffers: the loop's first loads
    land in memory an earlier buffer used, so they wait for what may still read it (a dot, a TMA
    store, other threads' register reads), as a load into that buffer would."""
    if not self.shared_groups:
      return []
    out = set()
    for _, r, a in deep_effects(o):
      if a == Access.TMA_WRITE and r is not None and r.type.space == Space.SMEM:
        rid = self.root(r).id
        g = self.group.get(rid, rid)
        if rid in self.explicit and g in self.shared_groups:
          out.add(g)
    return sorted(out)

  def issues_dot(self, o) -> bool:
    return any(a == Access.MMA_ISSUE for _, a in ir.traits_of(o).effects(o))

  def dot_wait_before(self, ops, st: State, inside: set) -> int | None:
    """How many dot groups may stay in flight before `ops` run (None: no wait): those issued
    after every group computing a value the ops read or reading SMEM the ops write. Values in
    `inside` are computed by the ops themselves."""
    if not st.dots:
      return None
    keep = None

    def through(i):      # retire group i and all older ones
      nonlocal keep
      later = len(st.dots) - 1 - i
      keep = later if keep is None else min(keep, later)

    for o in ops:
      for r, a, _ in self.accesses(o):
        if a in (Access.REG_WRITE, Access.TMA_WRITE):
          for i, roots in enumerate(st.dot_roots):
            if r in roots:
              through(i)
      reads = [o.a] if self.issues_dot(o) else o.operands()   # a dot chains its accumulator in flight
      for v in reads:
        if v.id in inside or not (isinstance(v.type, TensorType) and v.type.layout.kind == LayoutKind.WGMMA):
          continue
        key = v.id if v.id in st.dots else UNKNOWN_DOT if v.id in st.unknown_dot_values else None
        if key is not None and key in st.dots:     # (any of the unknown groups may compute it: the newest)
          through(len(st.dots) - 1 - st.dots[::-1].index(key))
    # values the ops (re)define, and register A operands of dots they issue (Mosaic GPU's fence copies
    # them into the instruction's registers): a running group reading one of them retires first
    defined = {r.id for x in ops for r in x.results} | {
        a.id for x in ops for r in x.regions for a in getattr(x, r).args} | register_a(ops, values=False)
    rewritten = self.a_rewritten(st, defined)
    if rewritten is not None:
      keep = rewritten if keep is None else min(keep, rewritten)
    for x in ops:
      if (i := self.acc_rewritten(st, x)) is not None:
        through(i)
    return keep

  @staticmethod
  def acc_rewritten(st: State, o) -> int | None:
    """The newest running group that dot `o` (issued again: a loop's later trip) would overwrite: its own
    earlier instance, unless `o` chains that group's accumulator (PTX lets dots of one shape chain an
    accumulator in flight, nothing else write it). A fresh accumulator (zeros, a bias tile, anything
    but the running result) is written into the running instruction's registers before `o` issues.
    A group of unknown value (`carried_dots`: a result the body neither yields nor reads, a dead dot's) is
    never the one `o` chains."""
    if not isinstance(o, Dot):
      return None
    hit = [i for i, a in enumerate(st.dot_a) if ("out", id(o)) in a and (o.acc is None or st.dots[i] != o.acc.id)]
    return hit[-1] if hit else None

  @staticmethod
  def a_rewritten(st: State, ids: set) -> int | None:
    """How many dot groups may stay in flight before the registers of values `ids` are written:
    those issued after every group whose register A operand is one of them (None: no wait)."""
    hit = [i for i, a in enumerate(st.dot_a) if a & ids]
    return len(st.dots) - 1 - hit[-1] if hit else None

  def dot_wait(self, st: State, out, loc, pending: int | None = 0):
    """Wait until at most `pending` dot groups run (nothing if None or if no more run)."""
    if pending is not None and len(st.dots) > pending:
      out.append(DotWait(pending, loc))
      self.retire(st, pending)

  def retire(self, st: State, pending: int):
    n = max(0, len(st.dots) - pending)
    if not self.single_warpgroup:
      # A warpgroup's wait covers its own dots only: the others may still read these buffers.
      for roots in st.dot_roots[:n]:
        st.dot_retired |= roots
    del st.dots[:n], st.dot_roots[:n], st.dot_a[:n]

  def met(self, st: State):
    """All threads met: their register accesses of SMEM are ordered."""
    st.dot_retired.clear()
    st.dirty.clear()
    st.atomic.clear()
    st.reg_read.clear()
    st.reg_windows.clear()
    st.gmem_reg_writes.clear()

  def sync(self, st: State, out, loc, *, fence: bool):
    """A barrier; with `fence`, a proxy fence first for the unfenced writes (SMEM, and GMEM that a
    TMA load reads back)."""
    if not fence:
      out.append(Barrier(loc))
    else:
      gmem = bool(st.unfenced & self.proxy_back)
      out.append(CommitShared(loc, global_=gmem, only_global=gmem and not st.unfenced - self.proxy_back))
      st.unfenced.clear()
    self.met(st)

  def wait_load(self, root, st, out, loc, ref=None):
    """Wait for the loads into `root` (those overlapping `ref`'s window, if given)."""
    slots = st.pending_load.get(root, {})
    win = None if ref is None else self.window(ref)
    for s in sorted(s for s, w in slots.items() if overlap(w, win)):
      out.append(WaitLoad(s, loc))
      del slots[s]
    if not slots:
      st.pending_load.pop(root, None)

  def await_stores(self, roots, st, out, loc, ref=None):
    """Wait until in-flight TMA stores stop reading SMEM, if any of `roots` has one (one whose
    window overlaps `ref`'s, if given); a pipelined store buffer's stage waits only for the
    stores issued before its last use."""
    hit = set(roots) & st.pending_store
    win = None if ref is None else self.window(ref)
    # Stores before the log began are older than all of it; the newer ones may stay in flight.
    last = max((i for i, (r, _, w) in enumerate(st.store_log) if r in hit and overlap(w, win)), default=-1)
    if hit and (last >= 0 or hit & st.store_base):
      newer = st.store_log[last + 1:]
      out.append(AwaitStores(True, loc, pending=sum(n for _, n, _ in newer)))
      st.store_log = list(newer)
      st.store_base = set()
      st.pending_store = {r for r, _, _ in newer}
      st.deferred.clear()       # a pipelined stage's older stores are done too
      self.met(st)
    elif set(roots) & set(st.deferred):
      out.append(AwaitStores(True, loc, pending=min(st.deferred.values())))
      st.deferred.clear()
      self.met(st)

  def before(self, root, acc, ref, o, st: State, out) -> None:
    loc = o.loc
    self.wait_load(root, st, out, loc, ref)
    if acc == Access.REG_READ:
      if root in st.atomic or root in st.dirty and not self.thread_private(root, ref, o, st):
        self.sync(st, out, loc, fence=False)
    elif acc in (Access.REG_WRITE, ATOMIC):
      self.await_stores({root}, st, out, loc, ref)
      if ((root in st.dirty or root in st.reg_read) and not self.thread_private(root, ref, o, st)
          or root in st.dot_retired or acc == Access.REG_WRITE and root in st.atomic):
        self.sync(st, out, loc, fence=False)
    elif acc == Access.TMA_WRITE:
      self.await_stores({root}, st, out, loc, ref)
      fence = root in st.dirty or root in st.unfenced
      if fence or root in st.reg_read or root in st.dot_retired:
        self.sync(st, out, loc, fence=fence)
    elif acc in (Access.TMA_READ, Access.MMA_READ):
      if root in st.dirty or root in st.unfenced:
        self.sync(st, out, loc, fence=True)

  def after(self, root, acc, ref, o, st: State) -> None:
    if root is None:
      return
    if acc in (Access.REG_READ, Access.REG_WRITE):
      st.reg_windows.setdefault(root, WindowSet()).add(access_key(o, self.window(ref)) or UNKNOWN_WINDOW)
    if acc == Access.REG_READ:
      st.reg_read.add(root)
    elif acc in (ATOMIC, Access.REG_WRITE):
      (st.atomic if acc == ATOMIC else st.dirty).add(root)
      if root not in self.read_back or root in self.proxy_back:   # the async proxy (TMA, WGMMA) needs a fence
        st.unfenced.add(root)
    elif acc == Access.TMA_WRITE and ref.type.space == Space.SMEM:   # (a TMA store's GMEM is not a load)
      st.pending_load.setdefault(root, {})[o.slot] = self.window(ref)
    elif acc == Access.TMA_READ:
      st.pending_store.add(root)
      st.store_log.append((root, 1, self.window(ref)))

  def enter_region(self, o, st: State, out) -> None:
    acc = [a for r in o.regions for a in self.region_accesses(getattr(o, r))]
    touched = {r for r, _ in acc}
    written = {r for r, a in acc if a in (Access.REG_WRITE, Access.TMA_WRITE, ATOMIC)}
    plain = {r for r, a in acc if a != ATOMIC}
    # Atomics inside on buffers only updated atomically since the last barrier need no order.
    ordered = {r for r in touched if r in plain or r in st.dirty}
    carry = self.carried_loads(o, st)
    inner_ops = [x for r in o.regions for x in ir.walk(getattr(o, r))]
    if any(a == Access.CLUSTER_BARRIER for x in inner_ops for _, a in ir.traits_of(x).effects(x)):
      # an ml.cluster_sync() inside publishes all of this CTA's SMEM, as one outside does: every
      # load lands before it, and nothing of this CTA may still read what its peers may write next
      waits = set(st.pending_load)
      self.dot_wait(st, out, o.loc)
      self.await_stores(set(st.pending_store), st, out, o.loc)
    else:
      waits = touched & set(st.pending_load)
    for r in sorted(waits - set(carry)):
      self.wait_load(r, st, out, o.loc)
    if ordered & (st.dirty | st.unfenced) or written & (st.reg_read | st.dot_retired) or plain & st.atomic:
      self.sync(st, out, o.loc, fence=bool((ordered - self.register_only()) & (st.dirty | st.unfenced)))
    self.await_stores(written, st, out, o.loc)
    self.await_gmem(set().union(*(self.gmem_roots(x) for x in inner_ops)), st, out, o.loc)
    region_stores = set().union(*(self.gmem_stores(x) for x in inner_ops))
    loop = isinstance(o, LOOPS)
    stored = {r for r, a in acc if a == Access.TMA_READ}
    pipelined = loop and getattr(o, "stages", 1) > 1
    dots = pipelined and any(self.issues_dot(x) for x in ir.walk(o.body))
    deferred = {r: n for r, n in self.deferred.items() if r in stored} if pipelined else {}
    mma_read = {r for r, a in acc if a == Access.MMA_READ}
    others = set() if self.single_warpgroup else mma_read
    carried = self.carried_dots(o.body) if dots else []
    back = {"dirty": {x for x, a in acc if a == Access.REG_WRITE}, "atomic": {x for x, a in acc if a == ATOMIC},
            "reg_read": {x for x, a in acc if a == Access.REG_READ}, "dot_retired": others}
    back["unfenced"] = (back["dirty"] | back["atomic"]) - self.register_only()
    for r in o.regions:
      base = (st.pending_store & touched) | (stored - set(deferred) if loop else set())
      def enter(edge, base=base):
        """The body's entry state, assuming `edge` of the back edge (a loop's; {} for a branch)."""
        inner = State(pending_store=set(base), store_base=set(base), in_pipeline=pipelined, deferred=dict(deferred),
                      dot_retired=st.dot_retired | edge.get("dot_retired", set()),
                      gmem_stored=set(st.gmem_stored) | (region_stores if loop else set()),
                      store_windows={k: v.copy() for k, v in st.store_windows.items()},
                      gmem_reg_writes={k: v.copy() for k, v in st.gmem_reg_writes.items()})
        if loop:
          self.enter_loop(o, inner, carry, dots, carried, mma_read, st, idle=not edge.get("busy", {1}))
          self.enter_back_edge(inner, edge)
        return inner
      if isinstance(o, For) and not o.warp_specialize and not o.pingpong:
        self.back_edge_fixed_point(o, enter, back, st.dot_retired)
      else:
        self.block(getattr(o, r), enter(back if loop else {}))
    st.dirty |= {r for r, a in acc if a == Access.REG_WRITE}
    st.atomic |= {r for r, a in acc if a == ATOMIC}
    st.unfenced |= {r for r, a in acc if a in (Access.REG_WRITE, ATOMIC)} - self.register_only()
    st.reg_read |= {r for r, a in acc if a == Access.REG_READ}
    for r in {r for r, a in acc if a in (Access.REG_READ, Access.REG_WRITE)}:
      st.reg_windows.setdefault(r, WindowSet()).add(UNKNOWN_WINDOW)
    st.pending_store |= stored
    st.store_log += [(r, 0, None) for r in sorted(stored)]
    st.gmem_stored |= region_stores
    for root, w in self.store_keys(o):     # values computed inside are unknown after it
      st.store_windows.setdefault(root, WindowSet()).add(past_region(w, o))
    for root, k in self.reg_write_keys(o):
      st.gmem_reg_writes.setdefault(root, WindowSet()).add(past_region(k, o))
    st.dot_retired |= others
    if dots:   # its dots still run
      st.dots = [UNKNOWN_DOT if i is None else o.results[i].id for i, _ in carried] or [UNKNOWN_DOT]
      st.dot_roots = [set(mma_read) for _ in st.dots]
      st.dot_a = [a for _, a in carried] or [register_a(ir.walk(o.body))]
      st.unknown_dot_values = {r.id for r in o.results}
    if pipelined:   # its dots and stores still read its loaded buffers: memory shared with them must wait
      used = lambda kind: {self.group.get(r, r) for r in self.explicit
                           if any(r == self.root(v).id for x in ir.walk(o.body)
                                  for v, a in ir.traits_of(x).effects(x) if a == kind)}
      if dots:
        st.dot_roots[-1] |= used(Access.MMA_READ)
      st.pending_store |= used(Access.TMA_READ)
      st.store_log += [(r, 0, None) for r in sorted(used(Access.TMA_READ))]

  def carried_loads(self, o, st: State) -> dict:
    """Buffers whose loads may stay in flight across the back edge of loop `o`: root -> the
    body's copies, each given the barrier slot of the load in flight before the loop into
    the same window (replaced in the body). Every window of the root loaded before the loop must
    be reloaded by a copy at the body's top level, after which the body does not touch it again
    (the last thing an iteration does with it is fetch the next iteration's data); windows
    static and pairwise disjoint; a plain runtime `for` (pipelined and warp-specialised
    loops schedule their own loads). {} if none qualify."""
    if not isinstance(o, For) or o.stages > 1 or o.warp_specialize or st.in_pipeline:
      return {}
    ops = o.body.ops
    carry = {}
    for root, before in st.pending_load.items():
      wins = list(before.values())
      if not all(static_window(w) for w in wins) or any(
          overlap(a, b) for i, a in enumerate(wins) for b in wins[i + 1:]):
        continue
      copies = {}              # window -> (position, copy op)
      last = {}                # window -> position of the body's last access overlapping it
      ok = True
      for i, x in enumerate(ops):
        if x.regions:          # nested accesses: windows unknown, never a carried copy
          if any(r == root for r, _ in self.region_accesses_of(x)):
            ok = False
          continue
        for r, a, ref in self.accesses(x):
          if r != root:
            continue
          w = self.window(ref)
          if a == Access.TMA_WRITE:
            if w not in wins:
              ok = False
            copies[w] = (i, x)     # the last load into the window is the carried one
          for v in wins:
            if overlap(v, w):
              last[v] = i
      if not ok or set(copies) != set(wins) or any(last[w] != copies[w][0] for w in wins):
        continue
      carry[root] = [(copies[w][0], slot) for slot, w in before.items()]
    for pairs in carry.values():
      for i, slot in pairs:
        ops[i] = dataclasses.replace(ops[i], slot=slot)
    return carry


_NOTHING_TO_ORDER = (WaitLoad,)


def redundant_barrier(out) -> bool:
  """Whether the ops since the last barrier in `out` (this block) leave nothing for another
  barrier to order: only TMA copies and waits on them (asynchronous; barriers do not order
  them) and scalar arithmetic. Threads that met there have done nothing since."""
  for o in reversed(out):
    t = ir.traits_of(o)
    effects = {a for _, a in t.effects(o)}
    if Access.CTA_BARRIER in effects:
      return True
    if o.regions or isinstance(o, DotWait):
      return False
    if isinstance(o, _NOTHING_TO_ORDER) or effects and effects <= {Access.TMA_READ, Access.TMA_WRITE}:
      continue
    if not (t.pure and all(not isinstance(r.type, TensorType) for r in o.results)):
      return False
  return False
