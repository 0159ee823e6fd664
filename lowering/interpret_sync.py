"""Interpret mode's atomics that return the old value, and the order they put programs in (probe 48c).

Interpret mode runs the programs one after another. Which accesses of different programs race is decided as
the GPU would see them, with vector clocks: each single-element atomic with an acquiring `sem` merges into its
program's clock what the programs that released at that element knew when they released it, and each releasing
one leaves there its program's clock and the time. An access meeting another program's (Memory.gmem_access) is
no race where that access (its time, kept per element; for an element several programs touched, each of them
whose box of accesses holds it) comes no later than what this program's clock knows of that program: accesses
under a lock, a count read under it, a last program's reads of the totals the others added before taking their
ticket. Without an acquire a program's clock is empty and the race checks are those of before.

In a kernel with such atomics the programs run cooperatively (run_cooperative): a while loop whose trip changes
nothing, its atomics included (a cas that fails, an add of 0), steps aside (a Spin) and the next programs start,
so a program may wait for a later one (stream-K's fix-up, a grid barrier), as on the GPU where both are resident.
More waiting programs than the GPU surely holds at once, or a wait nothing can end (a lock an ended program
still holds, a deadlock), is an InterpretError naming the element, its value and the program that set it.
"""
from __future__ import annotations

import numpy as np

from ..frontend.ops.atomic import AtomicKind
from . import interpret_numerics as N


def fetches(o) -> bool:
  """Whether the atomic `o` is one of a single element returning or ordering (an `atom` on the GPU)."""
  return not o.ref.type.shape and (bool(o.results) or o.kind in (AtomicKind.CAS, AtomicKind.XCHG)
                                   or o.sem != "relaxed")


def olds(o) -> bool:
  """Whether the atomic `o` returns old values: fetches(o), or a tensor's atomic (a window's or a scatter's) with
  a result or a cas or xchg (probe 50c: a spin on it, Triton's per-element locks, reads and counts its changes)."""
  return fetches(o) or bool(o.results) or o.kind in (AtomicKind.CAS, AtomicKind.XCHG)


def _changed(cta, old, new) -> None:
  """Count a tensor atomic's change of memory (a waiting program's progress, as rmw counts a single element's)."""
  if np.asarray(old).tobytes() != np.asarray(new).tobytes():
    cta.rmw_changes = getattr(cta, "rmw_changes", 0) + 1
    cta.m.changes += 1


def _merge(a: dict, b: dict) -> dict:
  out = dict(a)
  for k, t in b.items():
    if out.get(k, -1) < t:
      out[k] = t
  return out


def rmw(cta, o, combine):
  """Run the single-element atomic `o` (combine(kind, dtype, old, new) for add, max, min): the element's
  new value, its old one as the result, and the program's clock (acquire, then release)."""
  m = cta.m
  d = o.ref.type.dtype
  ref = cta.get(o.ref)
  value = cta.operand(o.value, d)
  on = True if o.mask is None or o.kind != AtomicKind.XCHG else bool(cta.get(o.mask))
  held = {}

  def fn(old):
    held["old"] = old = np.asarray(old).copy()
    if not on:
      return old
    if o.kind == AtomicKind.XCHG:
      return np.asarray(value, N.np_dtype(d)).reshape(old.shape)
    if o.kind == AtomicKind.CAS:
      cmp = np.asarray(cta.operand(o.cmp, d), N.np_dtype(d))
      same = old.tobytes() == cmp.tobytes()                   # (bitwise, as atom.cas.b32)
      return np.where(same, np.asarray(value, N.np_dtype(d)), old).astype(old.dtype)
    return combine(o.kind, d, old, value)

  cta.update(ref, fn, o)
  old = held["old"]
  new = cta.buffer(ref)[ref.index]
  key = (m.canon.get(ref.root.id, ref.root.id), tuple(int(np.ravel(i)[0]) if not isinstance(i, slice) else i.start
                                                      for i in ref.index))
  if np.asarray(old).tobytes() != np.asarray(new).tobytes():
    cta.rmw_changes = getattr(cta, "rmw_changes", 0) + 1
    m.changes += 1
    m.rmw_last[key] = (cta.lin, o.loc)
  cta.last_rmw = (o, ref, old, key)
  _lock_order(cta, o, ref, key, old, new)
  if o.sem in ("acquire", "acq_rel"):
    cta.vc = _merge(getattr(cta, "vc", {}), m.syncs.get(key, {}))
    cta.acquired = ref.name + "[" + ", ".join(str(k) for k in key[1]) + "]"   # (for a race's hint: the flag waited for)
  if o.sem in ("release", "acq_rel"):
    m.syncs[key] = _merge(_merge(m.syncs.get(key, {}), getattr(cta, "vc", {})), {cta.lin: m.order.clock})
  if o.results:
    cta.set(o.results[0], np.asarray(old).reshape(()))


def _spin_cas(m) -> set:
  """The ids of the cas ops in a while loop's condition (`while ml.atomic_cas(lock.at[g], 0, 1) == 1: pass`):
  a lock's acquire where it changes the element."""
  if not hasattr(m, "spin_cas"):
    from ..frontend import ir as fir
    from ..frontend.ops.atomic import AtomicUpdate
    m.spin_cas = {id(x) for w in fir.walk(m.kernel.body) if type(w).__name__ == "While"
                  for x in fir.walk(w.before) if isinstance(x, AtomicUpdate) and x.kind == AtomicKind.CAS}
  return m.spin_cas


def _lock_order(cta, o, ref, key, old, new) -> None:
  """Locks taken in opposite orders (probe 49c): each program's held locks (a spin's cas that took the element,
  until a cas or xchg of the program's sets it again), and for each lock taken while others are held, the pair
  in that order; a program taking the pair in the other order than one another program did is an InterpretError
  naming the four places. Interpret mode runs programs one after another, so it would never wait there, but on
  the GPU two programs that each hold one lock wait for each other forever (a deadlock)."""
  from ..frontend.errors import InterpretError
  held = cta.__dict__.setdefault("held_locks", {})
  changed = np.asarray(old).tobytes() != np.asarray(new).tobytes()
  name = f"{ref.name}{list(key[1]) if key[1] else ''}"
  if key in held and o.kind in (AtomicKind.CAS, AtomicKind.XCHG) and changed:
    del held[key]                    # (released)
    return
  if not (changed and o.kind == AtomicKind.CAS and id(o) in _spin_cas(cta.m)):
    return
  edges = cta.m.__dict__.setdefault("lock_edges", {})
  for k, (other, at) in held.items():
    edges.setdefault((k, key), (cta.lin, at, o.loc))
    back = edges.get((key, k))
    if back is not None and back[0] != cta.lin:
      p, q = cta.m.shown(cta.m.pid_of(back[0])), cta.label
      raise InterpretError(
          f"program {q} takes {name} while it holds {other}, and program {p} took {other} while it held {name}:"
          f" on the GPU, where both run at once, each can hold one lock and wait for the other forever (a deadlock;"
          f" interpret mode runs the programs one after another, so it never waits here)", o.loc,
          hint=f"take the locks in one order in every program, e.g. the lower index first (of indices i and j, take"
               f" ml.minimum(i, j), then ml.maximum(i, j)), or release {other} before taking {name}",
          notes=(f"{at}: program {q} takes {other}", f"{back[1]}: program {p} takes {name}",
                 f"{back[2]}: program {p} takes {other} while it holds {name}"))
  held[key] = (name, o.loc)


def _box(index, shape) -> tuple:
  """(lo, hi) per dimension of the elements `index` (slices, integers, arrays of coordinates) names."""
  lo, hi = [], []
  for d, n in enumerate(shape):
    i = index[d] if d < len(index) else slice(None)
    if isinstance(i, slice):
      a, b, _ = i.indices(n)
      lo.append(a), hi.append(b - 1)
    elif np.ndim(i) == 0:
      lo.append(int(i)), hi.append(int(i))
    else:
      x = np.asarray(i)
      lo.append(int(x.min()) if x.size else 0), hi.append(int(x.max()) if x.size else -1)
  return lo, hi


class Order:
  """The order single-element atomics put the programs in, for Memory.gmem_access (kernels that have such
  atomics only): a clock that ticks at each output access; beside Memory's arrays of the program that last
  wrote, read and updated each element, the time it did; each program's last access time to each output and
  the box of elements it accessed (for elements several programs read or updated: all of those whose box holds
  the access must come before it)."""

  @staticmethod
  def needed(kernel) -> bool:
    from ..frontend import ir
    from ..frontend.ops.atomic import AtomicUpdate
    return any(isinstance(o, AtomicUpdate) and olds(o) for o in ir.walk(kernel.body))

  def __init__(self, kernel):
    self.clock = 0
    self.programs = int(np.prod(kernel.grid))
    self.times = {p.value.id: tuple(np.zeros(p.value.type.shape, np.int64) for _ in range(3))
                  for p in kernel.outputs}
    self.last: dict = {}       # (output id, program) -> time of its last access
    self.boxes: dict = {}      # (output id, program) -> (lo, hi) of the elements it accessed

  def access(self, cta, rid, index) -> "Access":
    self.clock += 1
    self.last[(rid, cta.lin)] = self.clock
    shape = self.times[rid][0].shape
    lo, hi = _box(index, shape)
    old = self.boxes.get((rid, cta.lin))
    self.boxes[(rid, cta.lin)] = (lo, hi) if old is None else (
        [min(a, b) for a, b in zip(old[0], lo)], [max(a, b) for a, b in zip(old[1], hi)])
    return Access(self, cta, rid, index, lo, hi)


class Access:
  """One access of a program to an output's elements `index` (box lo..hi), at its clock's time."""

  def __init__(self, order, cta, rid, index, lo, hi):
    self.order, self.cta, self.rid, self.index, self.lo, self.hi = order, cta, rid, index, lo, hi
    self.vc = getattr(cta, "vc", None) or {}
    self.known_at = None
    if self.vc:
      self.known_at = np.full(order.programs, -1, np.int64)
      for p, t in self.vc.items():
        self.known_at[p] = t
    self._every = None

  def every(self) -> bool:
    """Whether every other program that accessed elements of this access's box did so before it."""
    if self._every is None:
      self._every = all(
          t <= self.vc.get(p, -1) for (r, p), t in self.order.last.items()
          if r == self.rid and p != self.cta.lin and all(
              a <= h and l <= b for a, b, l, h in zip(self.order.boxes[(r, p)][0], self.order.boxes[(r, p)][1],
                                                      self.lo, self.hi)))
    return self._every

  def known(self, t):
    """Over t[index] (Memory's writers, readers or atomics): the access recorded there is this program's, or
    one that comes before this access."""
    v = t[self.index]
    k = v == self.cta.lin
    if self.known_at is None:
      return k
    times = self.order.times[self.rid][self._which(t)][self.index]
    single = v >= 0
    k = k | (single & (self.known_at[np.where(single, v, 0)] >= times))
    several = v == -2
    if np.any(several) and self.every():
      k = k | several
    return k

  def _which(self, t) -> int:
    m = self.cta.m
    return [m.writers[self.rid] is t, m.readers[self.rid] is t, m.atomics[self.rid] is t].index(True)

  def record(self, w, r, a, write, atomic):
    t = self.order.times[self.rid]
    arr, times = (a, t[2]) if atomic else (w, t[0]) if write else (r, t[1])
    times[self.index] = np.where(arr[self.index] == self.cta.lin, self.order.clock, times[self.index])


def spin_error(cta, o, reads):
  """The InterpretError of a while loop `o` whose trips change nothing (its atomics included)."""
  from ..frontend.races import SPIN_WAIT
  from ..frontend.errors import InterpretError
  from ..frontend import ir as fir
  last = getattr(cta, "last_rmw", None)
  if last is not None and not any(x is last[0] for x in (*fir.walk(o.before), *fir.walk(o.body))):
    last = None                     # (an atomic before the loop)
  notes, hint = (), "check that the loop's body moves its condition towards False"
  if last is not None:
    a, ref, old, key = last
    elem = list(key[1]) if key[1] else ""         # (a 0-d output: its name alone)
    value = np.asarray(old).reshape(()).item()
    who = cta.m.rmw_last.get(key)
    what = f"ml.atomic_{a.kind.value if a.kind != AtomicKind.XCHG else 'xchg'}"
    notes = (f"{a.loc}: {what} finds {ref.name}{elem} = {value}" + (
        f", last set by program {cta.m.shown(cta.m.pid_of(who[0]))} at {who[1]}" if who else "")
        + ", and no other program runs while this one waits (interpret mode runs them one after another)",)
    ended = getattr(cta.m, "ended", None)
    if who and who[0] != cta.lin and ended is not None and who[0] not in ended:
      hint = (f"program {cta.m.shown(cta.m.pid_of(who[0]))}, which set {ref.name}{elem}, waits too, for what this"
              f" one or another waiting program would set: a deadlock (take locks in one order in every program, and"
              f" release each before waiting for another)")
    elif who and who[0] != cta.lin:
      hint = (f"program {cta.m.shown(cta.m.pid_of(who[0]))} ended without setting {ref.name}{elem} back: release"
              f" a lock in every program that takes it, ml.atomic_xchg({ref.name}.at[...], 0) after the critical"
              f" section (on the GPU the waiting programs would hang too)")
    elif who:
      hint = (f"this program set {ref.name}{elem} itself (it takes a lock it already holds?): release it first,"
              f" ml.atomic_xchg({ref.name}.at[...], 0), or take it once")
    else:
      hint = (f"every program has started, and those that have not ended wait here or elsewhere: none will change"
              f" {ref.name}{elem} (count what the programs do, e.g. a ticket, t = ml.atomic_add("
              f"{ref.name}{'.at[...]' if elem else ''}, 1), and let the last one, t == ml.num_programs(0) - 1, finish"
              " the work instead of waiting for all)")
  elif reads:
    hint = (SPIN_WAIT + "write what other programs must see in one kernel and read it in a second one"
            " (for a prefix over programs, pass jnp.cumsum(totals) - totals to the second)")
  return InterpretError(
      f"this while loop never ends in program {cta.label}: a trip changes neither what it carries nor any"
      " memory, so its condition stays true", o.loc, hint=hint, notes=notes)


class Spin:
  """What a program's while loop yields when a trip changed nothing (control._i_while): it waits for others."""

  def __init__(self, loop, reads, changes, cycled=0):
    self.loop, self.reads, self.changes = loop, reads, changes
    self.cycled = cycled          # (trips after which its carried values came round again: control._cycled)


def cycle_error(cta, o, trips: int):
  """The InterpretError of a while loop `o` whose carried values came back to a state they held, memory unchanged
  since (probe 70a: lanes probing a full hash table), after `trips` trips."""
  from ..frontend.errors import InterpretError
  return InterpretError(
      f"this while loop never ends in program {cta.label}: after {trips} trips it carries values it carried before,"
      f" with memory unchanged since, so its trips repeat that cycle forever (on the GPU it would hang)", o.loc,
      hint="a probe loop that finds no empty slot goes round a full table: give the table more slots than keys (a"
           " load factor below 1) and fill it with the empty marker, or bound the loop (for _ in range(capacity))")


def run_cooperative(m, make):
  """Run the grid's programs (clusters of one) in order, as Machine.run does, but let a program whose while loop
  waits (a trip that changes nothing: a lock another holds, a flag or a count a later program sets) step aside:
  the next programs start, and a waiting one resumes whenever memory has changed since it began to wait. The GPU
  holds at least one program per SM (hw.NUM_SMS) at once, no more for certain: a program that must start while
  that many wait may never start there, an InterpretError, as is a wait nothing can end (every program that has
  not ended waits, and nothing changed)."""
  import itertools
  from ..frontend import hw
  from ..frontend.errors import InterpretError
  g = m.kernel.grid
  todo = iter(itertools.product(range(g[2]), range(g[1]), range(g[0])))
  waiting: list = []         # [(cta, generator, Spin)], oldest first
  m.ended = set()

  def advance(cta, gen):
    """Run `cta` until it ends (None) or waits (its Spin)."""
    m.ctas = [cta]
    while True:
      try:
        token = next(gen)
      except StopIteration:
        m.ended.add(cta.lin)
        m.check_exit(cta)
        m.check_multicasts()
        return None
      if isinstance(token, Spin):
        return token
      for reader, ref, o in m.late_reads:     # (an ml.cluster_sync() of a cluster of one)
        reader.check_filled(ref, o)
      m.late_reads.clear()
      m.phase.clear()

  while True:
    moved = True
    while moved and waiting:        # resume the waiting programs while memory changes
      moved = False
      for item in list(waiting):
        cta, gen, spin = item
        if m.changes == spin.changes:
          continue
        waiting.remove(item)
        token = advance(cta, gen)
        if token is not None:
          waiting.append((cta, gen, token))
        moved = True
    z_y_x = next(todo, None)
    if z_y_x is None:
      break
    if len(waiting) >= hw.NUM_SMS:
      cta, _, spin = min(waiting, key=lambda w: w[0].lin)
      z, y, x = z_y_x
      raise InterpretError(
          f"program {cta.label} waits here for programs that have not started while {len(waiting)} programs wait:"
          f" the GPU holds {hw.NUM_SMS} programs at once for certain (one per SM), so program {m.shown((x, y, z))}"
          " may never start there and this hangs", spin.loop.loc,
          hint="wait only for programs that have started (a lock another holds), or launch at most mg.num_sms()"
               " programs that take their work in a loop (a persistent grid) when they wait for each other")
    cta = make((z_y_x[2], z_y_x[1], z_y_x[0]))
    gen = cta.main()
    token = advance(cta, gen)
    if token is not None:
      waiting.append((cta, gen, token))
  if waiting:
    cta, gen, spin = min(waiting, key=lambda w: w[0].lin)
    m.ctas = [cta]
    raise cycle_error(cta, spin.loop, spin.cycled) if spin.cycled else spin_error(cta, spin.loop, spin.reads)


# ---------------------------------------------------------------- a tensor's old values (probe 49c)
def _each(kind, d, old, value, cmp, combine):
  """What a tensor's atomic `kind` leaves in the elements `old` (arrays of one shape; a cas compares bitwise)."""
  nd = N.np_dtype(d)
  if kind == AtomicKind.XCHG:
    return np.asarray(value, nd).copy()
  if kind == AtomicKind.CAS:
    bits = lambda a: np.array(a, nd).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(nd).itemsize])
    return np.where(bits(old) == bits(cmp), np.asarray(value, nd), old).astype(nd)
  return combine(kind, d, old, value)


def tensor_rmw(cta, o, combine):
  """A GMEM window's atomic with its old values (a cas, an xchg, or an add, max or min whose values are used):
  every element the mask keeps updated (relaxed: no order among programs), the result its old value, 0 where
  the mask is off."""
  d = o.ref.type.dtype
  ref = cta.get(o.ref)
  value = np.asarray(cta.operand(o.value, d))
  cmp = np.asarray(cta.get(o.cmp)) if o.cmp is not None else None
  keep = np.asarray(cta.get(o.mask), bool) if o.mask is not None else None
  held = {}

  def fn(old):
    held["old"] = old = np.asarray(old).copy()
    new = _each(o.kind, d, old, np.broadcast_to(value, old.shape), cmp, combine)
    return new if keep is None else np.where(keep, new, old).astype(old.dtype)

  cta.update(ref, fn, o)
  old = held["old"]
  _changed(cta, old, cta.buffer(ref)[ref.index])
  if o.results:
    cta.set(o.results[0], old if keep is None else np.where(keep, old, 0).astype(old.dtype))


def scatter_rmw(cta, o, buf, coords, value, shape, combine, keep):
  """A GMEM scatter's atomic with its old values: its elements one at a time, in order (a repeated index sees
  the earlier elements' updates, as one order of the GPU's would), skipping those `keep` (its mask, flat) keeps
  off (an index outside the array among them), whose old value is 0."""
  d = o.value.type.dtype
  cmp = (np.broadcast_to(np.asarray(cta.get(o.cmp)), shape).reshape(-1) if o.cmp is not None else None)
  old = np.zeros(value.size, N.np_dtype(d))
  for e in range(value.size):
    if not keep[e]:
      continue
    at = tuple(int(c[e]) for c in coords)
    old[e] = buf[at]
    buf[at] = _each(o.kind, d, np.asarray(buf[at]), value[e], None if cmp is None else cmp[e], combine)
    _changed(cta, old[e], buf[at])
  if o.results:
    cta.set(o.results[0], old.reshape(shape))
