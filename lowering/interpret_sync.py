"""Interpret mode's atomics that return the old value, and the order they put programs in (probe 48c).

Interpret mode runs the programs one after another, so a program that takes a lock finds it free (its
holder has ended) and the last program's ticket comes last. Which accesses of different programs are then a
race is decided as the GPU would see them, with vector clocks: each single-element atomic with an acquiring
`sem` merges into its program's clock what the programs that released at that element knew when they
released it, and each releasing one leaves there its program's clock and the time. An access of another
program's element (Memory.gmem_access) is no race where that program's last access to the array comes before
a release this program has acquired (directly or through others): accesses under a lock, a count read under
it, a last program's reads of the totals the others added before taking their ticket. Without an acquire a
program's clock is empty and the race checks are those of before.

A while loop whose trip changes nothing, its atomics included (a cas that fails, an add of 0), runs forever
here: no other program runs meanwhile. That is an InterpretError naming the element, its value and the
program that last changed it (a lock an ended program still holds also deadlocks the GPU).
"""
from __future__ import annotations

import numpy as np

from ..frontend.ops.atomic import AtomicKind
from . import interpret_numerics as N


def fetches(o) -> bool:
  """Whether the atomic `o` is one of a single element returning or ordering (an `atom` on the GPU)."""
  return not o.ref.type.shape and (bool(o.results) or o.kind in (AtomicKind.CAS, AtomicKind.XCHG)
                                   or o.sem != "relaxed")


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
  on = True if o.mask is None or isinstance(o.mask, bool) else bool(cta.get(o.mask))
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
    m.rmw_last[key] = (cta.lin, o.loc)
  cta.last_rmw = (o, ref, old, key)
  if o.sem in ("acquire", "acq_rel"):
    cta.vc = _merge(getattr(cta, "vc", {}), m.syncs.get(key, {}))
  if o.sem in ("release", "acq_rel"):
    m.syncs[key] = _merge(_merge(m.syncs.get(key, {}), getattr(cta, "vc", {})), {cta.lin: m.order.clock})
  if o.results:
    cta.set(o.results[0], np.asarray(old).reshape(()))


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
    return any(isinstance(o, AtomicUpdate) and fetches(o) for o in ir.walk(kernel.body))

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
  from .interpret_memory import InterpretError
  from ..frontend import ir as fir
  last = getattr(cta, "last_rmw", None)
  if last is not None and not any(x is last[0] for x in (*fir.walk(o.before), *fir.walk(o.body))):
    last = None                     # (an atomic before the loop)
  notes, hint = (), "check that the loop's body moves its condition towards False"
  if last is not None:
    a, ref, old, key = last
    elem = list(key[1])
    value = np.asarray(old).reshape(()).item()
    who = cta.m.rmw_last.get(key)
    what = f"ml.atomic_{a.kind.value if a.kind != AtomicKind.XCHG else 'xchg'}"
    notes = (f"{a.loc}: {what} finds {ref.name}{elem} = {value}" + (
        f", last set by program {cta.m.shown(cta.m.pid_of(who[0]))} at {who[1]}" if who else "")
        + ", and no other program runs while this one waits (interpret mode runs them one after another)",)
    if who and who[0] != cta.lin:
      hint = (f"program {cta.m.shown(cta.m.pid_of(who[0]))} ended without setting {ref.name}{elem} back: release"
              f" a lock in every program that takes it, ml.atomic_xchg({ref.name}.at[...], 0) after the critical"
              f" section (on the GPU the waiting programs would hang too)")
    elif who:
      hint = (f"this program set {ref.name}{elem} itself (it takes a lock it already holds?): release it first,"
              f" ml.atomic_xchg({ref.name}.at[...], 0), or take it once")
    else:
      hint = (SPIN_WAIT + f"a program may wait only for one that has already begun (a lock another holds), not for"
              f" programs to come: count them with a ticket, t = ml.atomic_add({ref.name}{'.at[...]' if elem else ''}, 1), and let the last"
              " one (t == ml.num_programs(0) - 1) finish the work, or use a second kernel")
  elif reads:
    hint = (SPIN_WAIT + "write what other programs must see in one kernel and read it in a second one"
            " (for a prefix over programs, pass jnp.cumsum(totals) - totals to the second)")
  return InterpretError(
      f"this while loop never ends in program {cta.label}: a trip changes neither what it carries nor any"
      " memory, so its condition stays true", o.loc, hint=hint, notes=notes)
