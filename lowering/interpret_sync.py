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
    m.syncs[key] = _merge(_merge(m.syncs.get(key, {}), getattr(cta, "vc", {})), {cta.lin: m.clock})
  if o.results:
    cta.set(o.results[0], np.asarray(old).reshape(()))


def ordered(m, cta, rid) -> tuple[list, bool]:
  """(the programs whose accesses to the array `rid` all come before this program's, through releases it
  acquired; whether every program that accessed it does)."""
  vc = getattr(cta, "vc", None)
  if not vc:
    return [], False
  before, every = [], True
  for (r, p), t in m.atime.items():
    if r != rid or p == cta.lin:
      continue
    if t <= vc.get(p, -1):
      before.append(p)
    else:
      every = False
  return before, every


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
