"""The ranges of integer values carried through loops and branches, for frontend/narrow_index.py.

A value a loop carries (`i = i + 100` in `while i < 200:`, `c = c + 1` in `for k in range(300):`) is
what its start and every iteration's update make it: each carry's range is its start's, joined with
what one pass over the body makes of the ranges so far, repeated to a fixpoint (for a loop of a
static trip count, no further than it runs). A bound that moves by the same step each pass is taken
on to where the trip count, or its dtype's end, stops it; one that has not settled after MAX_PASSES
(fewer in a loop nested in loops being solved) is its dtype's whole range. In a while loop's body a
carry is narrowed by the condition that let it in (`i < 200`: i is at most 199 there), so `i + 1`
under `while i < n` of a uint8 n does not wrap, and `i + 100` under `while i < 200` does; an if's
branches see the values its test compares narrowed the same way. A wrap a carry takes in one
iteration is the wrap of the next iteration's uses and of the loop's result (in a while loop, of the
carries its condition bounds). An `if`'s results join its branches'.
"""
from __future__ import annotations

from . import ir
from .dtypes import DType
from .ops.control import Condition, For, If, While, Yield
from .ops.elementwise import BinOp, Binary, Cast, CmpOp, Compare
from .types import resolve

MAX_PASSES = 12
_FLIP = {CmpOp.LT: CmpOp.GT, CmpOp.LE: CmpOp.GE, CmpOp.GT: CmpOp.LT, CmpOp.GE: CmpOp.LE,
         CmpOp.EQ: CmpOp.EQ, CmpOp.NE: CmpOp.NE}
_NOT = {CmpOp.LT: CmpOp.GE, CmpOp.LE: CmpOp.GT, CmpOp.GT: CmpOp.LE, CmpOp.GE: CmpOp.LT,
        CmpOp.EQ: CmpOp.NE, CmpOp.NE: CmpOp.EQ}


def region(w, o) -> bool:
  """Evaluate region op `o` with walk `w` (frontend/narrow_index.py's _Walk); False if `o` is no loop
  or branch (its regions are walked in order, once)."""
  if isinstance(o, (For, While)):
    w.op(o)                       # (a loop's bounds that wrap; its results, redone below)
    _loop(w, o)
    return True
  if isinstance(o, If):
    w.op(o)
    _branch(w, o.then_block, _facts(w, o.cond))
    _branch(w, o.else_block, _facts(w, o.cond, negate=True))
    ys = [_yielded(b) for b in (o.then_block, o.else_block)]
    for j, r in enumerate(o.results):
      vals = [y[j] for y in ys if j < len(y)]
      _set(w, r, _join_all([_range(w, v) for v in vals]) if len(vals) == 2 else None,
           w.wraps.get(r.id) or next((w.wraps[v.id] for v in vals if isinstance(v, ir.Value) and v.id in w.wraps),
                                     None))
    return True
  return False


def _loop(w, o):
  body = o.body
  carried = body.args[1:] if isinstance(o, For) else o.before.args
  inits = [_range(w, v) for v in o.inits]
  init_wraps = [w.wraps.get(v.id) if isinstance(v, ir.Value) else None for v in o.inits]
  trips = None
  if isinstance(o, For):
    trips = _trips(o)
    iv = _iv_range(w, o)
    _set(w, body.args[0], iv, None)
  inner = [r.id for b in ([o.before] if isinstance(o, While) else []) + [body] for x in ir.walk(b) for r in x.results]
  state = (list(inits), list(init_wraps))
  hist = [state[0]]
  passes = 0
  w.quiet += 1
  limit = MAX_PASSES >> min(w.quiet - 1, 2)       # (a loop inside loops being solved: fewer passes each)
  last = None         # a static trip count's carries one trip before the last, where a bound was taken on
  while trips is None or passes < trips - 1:
    if passes == limit:
      state = ([None if a != i else a for a, i in zip(state[0], inits)], state[1])
      trips = None
      break
    new = _pass(w, o, carried, inner, state, inits)
    passes += 1
    if new == state:
      break
    hist.append(new[0])
    if len(hist) >= 3:
      left = None if trips is None else trips - 1 - passes
      ext = _extrapolate(hist[-3:], carried, left)
      if ext is not None:
        last = None if left is None else state[0] if left == 0 else _extrapolate(hist[-3:], carried, left - 1)
        hist.append(ext)
        new = (ext, new[1])
        if trips is not None:
          passes = trips - 1
    state = new
  # the wraps the carries take round: of the whole range taken on where the trips are not known; of a static
  # count's, the trips before the last (the last one's updates reach only the loop's results)
  if trips is None or last is not None:
    state = (state[0], _pass(w, o, carried, inner, (state[0] if trips is None else last, state[1]), inits)[1])
  w.quiet -= 1
  ys = _yielded(body)
  for a, start, y in zip(carried, o.inits, ys):
    if isinstance(y, ir.Value):
      w.updates[y.id] = (a, start)     # (a wrap's hint widens a counter where the loop starts it)
  _pass(w, o, carried, inner, state, inits)        # (the reporting pass, at the carries' fixpoint)
  for j, r in enumerate(o.results):
    if isinstance(o, While):            # (what the condition last saw)
      _set(w, r, state[0][j], state[1][j])
    else:
      y = ys[j] if j < len(ys) else None
      rng = _join(inits[j], _range(w, y)) if trips != 0 else inits[j]
      _set(w, r, rng, state[1][j] or (w.wraps.get(y.id) if isinstance(y, ir.Value) else None))


def _pass(w, o, carried, inner, state, inits):
  """One evaluation of the loop's body with its carries at `state`: the carries' next state."""
  for i in inner:
    w.ranges.pop(i, None)
    w.wraps.pop(i, None)
  for a, rng, src in zip(carried, *state):
    _set(w, a, rng, src)
  if isinstance(o, While):
    w.block(o.before)
    cond = o.before.ops[-1] if o.before.ops else None
    values = cond.values if isinstance(cond, Condition) else o.before.args
    facts = _facts(w, cond.cond) if isinstance(cond, Condition) else []
    for a, v in zip(o.body.args, values):
      _set(w, a, _narrowed(facts, v, _range(w, v)), w.wraps.get(v.id) if isinstance(v, ir.Value) else None)
    # a wrap goes round only in a carry the condition bounds: of another (a flag the body sets, `while c and
    # n[3]:`'s rotated test) nothing is known here that the body's own tests did not (frontend/short_circuit.py)
    named = [any(x.id == v.id for x, _, _ in facts) for v in values]
  w.block(o.body)
  ys = _yielded(o.body)
  rngs = [_join(i, _range(w, y)) for i, y in zip(inits, ys)]
  srcs = [s or (w.wraps.get(y.id) if isinstance(y, ir.Value) else None) for s, y in zip(state[1], ys)]
  if isinstance(o, While):
    srcs = [s if n or s is i else None for s, n, i in zip(srcs, named, state[1])]
  return (rngs, srcs)


def _extrapolate(hist, carried, left):
  """The carries' ranges `left` more passes on (None: as far as their dtypes go), where each bound
  moved by the same step in the last two passes; None where some bound did not."""
  out = []
  for a, b, c, v in zip(*hist, carried):
    if a is None or b is None or c is None:
      if not (a is b is c is None):
        return None
      out.append(None)
      continue
    bounds = []
    for k in (0, 1):
      d = c[k] - b[k]
      if d != b[k] - a[k]:
        return None
      lo, hi = _dtype_range(v)
      x = c[k] + d * left if left is not None else (hi if d > 0 else lo if d < 0 else c[k])
      bounds.append(min(max(x, lo), hi))
    out.append(tuple(bounds))
  return out


def _trips(o):
  if all(isinstance(x, int) for x in (o.start, o.stop, o.step)) and o.step != 0:
    return len(range(o.start, o.stop, o.step))
  return None


def _iv_range(w, o):
  """The range of a for loop's index: its static range's, or its bounds' where its step's sign is known."""
  if _trips(o) is not None:
    r = range(o.start, o.stop, o.step)
    return (min(r[0], r[-1]), max(r[0], r[-1])) if len(r) else None
  start, stop, step = (_range(w, x) for x in (o.start, o.stop, o.step))
  if None in (start, stop, step):
    return None
  if step[0] > 0:
    return (start[0], max(start[0], stop[1] - 1))
  if step[1] < 0:
    return (min(start[1], stop[0] + 1), start[1])
  return None


def _facts(w, cond, negate=False) -> list:
  """What condition `cond` holding (or failing, `negate`) says of integer values: (value, comparison,
  range of what it is compared with), for `v < n`, `v >= 0 and v < n`, `not (a or b)`, `v != 0` (`while v:`)."""
  c = w.defs.get(cond.id) if isinstance(cond, ir.Value) else None
  if isinstance(c, Binary) and resolve(c.results[0].type.dtype) == DType.bool_ and (
      c.kind == (BinOp.OR if negate else BinOp.AND)):
    return _facts(w, c.lhs, negate) + _facts(w, c.rhs, negate)
  if not isinstance(c, Compare):
    return []
  out = []
  kind = _NOT[c.kind] if negate else c.kind
  for x, other, k in ((c.lhs, c.rhs, kind), (c.rhs, c.lhs, _FLIP[kind])):
    b = _range(w, other)
    if not isinstance(x, ir.Value) or b is None:
      continue
    out.append((x, k, b))
    u = w.defs.get(x.id)
    if isinstance(u, Cast) and not u.bitcast and isinstance(u.x, ir.Value) and _keeps(u.x, x):
      out.append((u.x, k, b))        # (`i < 200` of a uint8 i compares i widened to int32)
  return out


def _narrowed(facts, v, rng, same=None):
  """Range `rng` of value `v`, narrowed by `facts` (_facts) on it (or on a value `same` says is it)."""
  if rng is None or not isinstance(v, ir.Value):
    return rng
  lo, hi = rng
  for x, kind, (bl, bh) in facts:
    if x.id != v.id and not (same is not None and same(x, v)):
      continue
    if kind in (CmpOp.LT, CmpOp.LE, CmpOp.EQ):
      hi = min(hi, bh - (kind == CmpOp.LT))
    if kind in (CmpOp.GT, CmpOp.GE, CmpOp.EQ):
      lo = max(lo, bl + (kind == CmpOp.GT))
    if kind == CmpOp.NE and bl == bh:
      lo, hi = lo + (lo == bl), hi - (hi == bl)
  return (lo, max(lo, hi))            # (empty: a branch that never runs, taken as one value)


def _keeps(v, x) -> bool:
  """Cast `x` of `v` keeps every value of `v`'s dtype (a widening)."""
  (a, b), (p, q) = _dtype_range(v), _dtype_range(x)
  return p <= a and b <= q


def _branch(w, block, facts):
  """Walk `block` with the values `facts` name narrowed by them; their ranges restored after."""
  saved, reads = {}, dict(w.narrowed_reads)
  for x, _, _ in facts:
    if x.id not in saved:
      saved[x.id] = w.ranges.get(x.id)
      rng = _narrowed(facts, x, _range(w, x))
      if rng is not None:
        w.ranges[x.id] = rng
        if (key := w.read_key(x)) is not None:       # (the element read again in the branch)
          w.narrowed_reads[key] = rng
  w.block(block)
  w.narrowed_reads = reads
  for i, rng in saved.items():
    if rng is None:
      w.ranges.pop(i, None)
    else:
      w.ranges[i] = rng


def _yielded(b) -> list:
  return list(b.ops[-1].values) if b.ops and isinstance(b.ops[-1], Yield) else []


def _range(w, x):
  from .narrow_index import _range as r
  return r(w.ranges, x) if x is not None else None


def _dtype_range(v):
  d = resolve(v.type.dtype)
  return d.int_range if isinstance(d, DType) and d.is_int else (0, 1)


def _set(w, v, rng, src):
  if rng is None:
    w.ranges.pop(v.id, None)
  else:
    w.ranges[v.id] = rng
  if src is None:
    w.wraps.pop(v.id, None)
  else:
    w.wraps[v.id] = src


def _join(a, b):
  return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))


def _join_all(rs):
  out = rs[0] if rs else None
  for r in rs[1:]:
    out = _join(out, r)
  return out
