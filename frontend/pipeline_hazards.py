"""Pipelined loads of GMEM that the same loop writes.

A pipelined loop issues the TMA load of trip j up to `stages - 1` trips early, before the
writes of trips j - stages + 1 .. j - 1 (and, when a write comes before the load in the body,
of trip j itself). A load from an array the loop writes (an output read back, or an input
aliased to one by `input_output_aliases`) is sound only when no such write touches its window.
The windows' starts are taken as affine functions of the trip counter (`c * k + base + offset`,
`base` a value from before the loop); where two starts share `c` and `base` the overlap is
decided exactly. A start may instead be `(T // P) * k + base + offset` or `(T % P) * k + ...`
(a `Part`), T affine with a non-zero stride and P != 0: different trips have different T, so
different (T // P, T % P) pairs, and tiles indexed by both in two dimensions cannot meet.
Elsewhere overlap is assumed. Found overlaps are a PipelineError at the load.
"""
from __future__ import annotations

import collections

from . import errors as E
from . import ir
from .ir import Access
from .ops.control import NumPrograms, PositiveStep, ProgramId
from .ops.elementwise import BinOp, Binary
from .ops.memory import View
from .types import RefType, Space

WRITES = (Access.REG_WRITE, Access.TMA_WRITE)
# A window start `(T // P) * k + base + off` (op "//") or `(T % P) * k + base + off` (op "%"):
# tp = (T's affine form, P's key), k != 0.
Part = collections.namedtuple("Part", "op tp k base off")


def _positive(v, all_defs) -> bool:
  """Whether `v`, a value from before the loop, is at least 1: a grid size (ml.num_programs), or
  a pipelined loop's run-time step (checked positive)."""
  return isinstance(all_defs.get(id(v)), (NumPrograms, PositiveStep))


def _divisor(v, all_defs):
  """A key for `v` as a divisor known not to be 0 and the same in every trip, or None."""
  if isinstance(v, int) and not isinstance(v, bool):
    return v or None
  return ("value", id(v)) if isinstance(v, ir.Value) and _positive(v, all_defs) else None


def _affine(v, iv, body_defs, all_defs, depth=0):
  """(coef, base, offset) with v == coef * iv + sum(base) + offset, or None. `coef` is
  (c, s): c times the value `s` (by id) from before the loop that is at least 1, or times 1
  (s None): the stride of a persistent loop, `t = pid + k * ml.num_programs(0)`, is (1, id of it)."""
  if isinstance(v, bool):
    return None
  if isinstance(v, int):
    return (0, None), (), v
  if v is iv:
    return (1, None), (), 0
  if not isinstance(v, ir.Value) or depth > 32:
    return None
  o = body_defs.get(id(v))
  if o is None or isinstance(o, (ProgramId, NumPrograms)):     # from before the loop, or the same
    return (0, None), ((id(v), 1),), 0                        # in every trip: a fixed base
  if isinstance(o, Binary) and o.kind in (BinOp.FLOORDIV, BinOp.MOD) \
      and getattr(o.results[0].type.dtype, "is_int", False):
    # T // P or T % P, T varying with the trip: a term of its own (a base key that is a tuple)
    t, p = _affine(o.lhs, iv, body_defs, all_defs, depth + 1), _divisor(o.rhs, all_defs)
    if t is None or p is None or not t[0][0] or any(isinstance(i, tuple) for i, _ in t[1]):
      return None
    return (0, None), (((o.kind.value, t, p), 1),), 0
  if not isinstance(o, Binary) or o.kind not in (BinOp.ADD, BinOp.SUB, BinOp.MUL):
    return None
  a, b = (_affine(x, iv, body_defs, all_defs, depth + 1) for x in (o.lhs, o.rhs))
  if a is None or b is None:
    return None
  if o.kind == BinOp.MUL:
    const = next(((x, y) for x, y in ((a, b), (b, a)) if x[0][0] == 0 and not x[1]), None)
    if const is not None:
      k, ((c, sym), base, off) = const[0][2], const[1]
      return (c * k, sym), tuple((i, m * k) for i, m in base if m * k), off * k
    # iv (times c) times a positive value from before the loop: a stride only known to be >= 1
    for (c, sym), base, off in ((a[0], a[1], a[2]), (b[0], b[1], b[2])):
      other = b if (c, sym) == a[0] and base == a[1] else a
      if sym is None and not base and off == 0 and other[0] == (0, None) and other[2] == 0 \
          and len(other[1]) == 1 and other[1][0][1] == 1:
        sid = other[1][0][0]
        value = next((x for x in (o.lhs, o.rhs) if id(x) == sid), None)
        if value is not None and _positive(value, all_defs):
          return (c, sid), (), 0
    return None
  sign = 1 if o.kind == BinOp.ADD else -1
  (ca, sa), (cb, sb) = a[0], b[0]
  if sa is not None and sb is not None and sa != sb or (sa or sb) is not None and ca and cb and sa != sb:
    return None
  if (sa is None) != (sb is None) and (ca if sa is None else cb):
    return None                                   # c * iv + d * s * iv: not one stride
  base = dict(a[1])
  for i, m in b[1]:
    base[i] = base.get(i, 0) + sign * m
  return ((ca + sign * cb, sa if sa is not None else sb),
          tuple(sorted(((i, m) for i, m in base.items() if m), key=repr)), a[2] + sign * b[2])


def _start(v, iv, body_defs, all_defs):
  """A window start: an affine form (as `_affine`), a `Part`, or None (not understood)."""
  a = _affine(v, iv, body_defs, all_defs)
  terms = [e for e in a[1] if isinstance(e[0], tuple)] if a is not None else ()
  if not terms:
    return a
  if len(terms) > 1 or a[0][0]:
    return None                                   # two such terms, or one plus the counter itself
  (op, t, p), k = terms[0]
  return Part(op, (t, p), k, tuple(e for e in a[1] if e is not terms[0]), a[2])


def _window(ref, iv, body_defs, all_defs):
  """(root, [(affine start or None, size)] per root dimension) of a GMEM ref or view of one."""
  d = all_defs.get(id(ref))
  if isinstance(d, View) and not d.transpose:
    root = d.ref
    if all_defs.get(id(root)) is not None:        # a view of a view: not followed
      return root, [(None, n) for n in root.type.shape]
    return root, [(_start(i.start, iv, body_defs, all_defs), i.size) for i in d.index]
  return ref, [(((0, None), (), 0), n) for n in ref.type.shape]


def _comparable(la, wa) -> bool:
  """Whether two starts differ only in their offsets (so their distance is known)."""
  if la is None or wa is None or isinstance(la, Part) != isinstance(wa, Part):
    return False
  return la[:4] == wa[:4] if isinstance(la, Part) else la[:2] == wa[:2]


# The trips t + delta and t (delta != 0) have different T, so for one P the quotients T // P,
# the remainders T % P or both differ: (quotients differ, remainders differ).
_DIFFER = ((True, True), (True, False), (False, True))


def _may_overlap(load, write, deltas) -> bool:
  """Whether load's window of trip t + delta meets write's window of trip t for some delta."""
  tp = next((s.tp for s, _ in load if isinstance(s, Part)), None)   # the (T, P) split on
  for delta in deltas:
    for differ in (_DIFFER if delta and tp else ((False, False),)):
      if all(_dim_overlaps(l, w, delta, tp, differ) for l, w in zip(load, write)):
        return True
  return False


def _dim_overlaps(l, w, delta, tp=None, differ=(False, False)) -> bool:
  (la, ls), (wa, ws) = l, w
  if not _comparable(la, wa):
    return True                                   # not comparable: assume they meet
  if isinstance(la, Part):
    if delta and la.tp != tp:
      return True                                 # another T or P: its terms may be anything
    off = la.off - wa.off
    if not differ[la.op == "%"]:                  # the same quotient (remainder) in both trips
      return -ls < off < ws
    # m * k + off for some integer m != 0: apart when |k| clears the windows both ways
    return abs(la.k) < ws - off or abs(la.k) < ls + off
  (c, sym), off = la[0], la[2] - wa[2]
  diff = c * delta + off                          # load start - write start (a stride of 1)
  if sym is None or c * delta == 0:
    return -ls < diff < ws
  # stride S >= 1 unknown: the difference is c * delta * S + off, from diff on away from off
  return diff < ws if c * delta > 0 else diff > -ls


# How many trips back a warp-specialised loop's read of its own writes is looked for.
READ_BACK_TRIPS = 4096


def check_loads_of_written_memory(kernel, body, iv, sites, stages, unpipelined="stages=1", pre=(),
                                  ws=False, trips=None) -> None:
  """PipelineError at a pipelined load whose window a write of the loop may change before the
  original program would have read it. `pre`: ops the loop's normalisation put before it (its
  checked run-time step), not yet in the kernel's body."""
  params = {id(p.value): k for k, p in enumerate(kernel.params)}
  inputs = [p for p in kernel.params if not p.is_output]
  outputs = [p for p in kernel.params if p.is_output]
  same_memory = {id(inputs[i].value): id(outputs[o].value) for i, o in kernel.aliases.items()}
  memory = lambda root: same_memory.get(id(root), id(root))
  body_defs = {id(r): o for o in ir.walk(body) for r in o.results}
  all_defs = {id(r): o for o in [*ir.walk(kernel.body), *pre] for r in o.results}
  order = {id(o): n for n, o in enumerate(ir.walk(body))}
  for copy, _view, _addr in sites:
    root, load = _window(copy.src, iv, body_defs, all_defs)
    if id(root) not in params or root.type.space != Space.GMEM:
      continue
    for o in ir.walk(body):
      for ref, kind in ir.traits_of(o).effects(o):
        if ref is None or kind not in WRITES or not isinstance(ref.type, RefType):
          continue
        wroot, write = _window(ref, iv, body_defs, all_defs)
        if memory(wroot) != memory(root):
          continue
        first = 0 if order[id(o)] < order[id(copy)] else 1
        via = f" (through {wroot.name}, its alias)" if wroot is not root else ""
        back = READ_BACK_TRIPS if not isinstance(trips, int) else min(trips, READ_BACK_TRIPS)
        comparable = all(_comparable(l, w) for (l, _), (w, _) in zip(load, write))   # (else MG502 decides)
        if ws and comparable and _may_overlap(load, write, range(max(first, stages), back)):
          # The producer warpgroup's loads wait for stage slots, not for the consumers' stores (their
          # TMA stores may still be writing GMEM; register stores need a proxy fence): reading back
          # an earlier trip's writes would race on the GPU.
          raise E.WarpSpecializeError(
              f"this load reads {root.name}, which an earlier trip of this warp-specialised loop writes{via}:"
              f" the producer's loads do not wait for the consumers' stores", copy.loc,
              hint="use warp_specialize=False (the software pipeline waits for the stores before such a"
                   " load), or read from another array", notes=(f"{o.loc}: the write",))
        if _may_overlap(load, write, range(first, stages)):
          raise E.PipelineError(
              f"this pipelined load reads {root.name}, which the loop writes{via}: with stages={stages}"
              f" it is issued up to {stages - 1} trip(s) early, before those writes", copy.loc,
              hint=f"use {unpipelined} (or range()) for a loop that reads back what it writes" + (
                  ", or read from another array" if not via else "; an in-place update may stay pipelined"
                  " when no two trips share a tile (ml.ds(t * bm, bm), or rows t // n * bm, columns t % n * bn)"),
              notes=(f"{o.loc}: the write",))
