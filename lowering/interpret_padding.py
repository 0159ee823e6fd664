"""Interpret mode's check of masked-off lanes that reach a reduction (MaskedReductionError, MG953).

Triton's classic tail bug: a row of 100 elements read as a tile of 128 with `mask=cols < n`, and the 28
lanes past the end, filled with `other`, reduced as if they were data: `other=0.0` under a max of negative
values (or the argmax, or a softmax's max), a layer norm's `ml.sum(d * d)` of `d = v - mean` (the padding
holds -mean there), `ml.mean(v)` dividing by 128. The kernel runs, on the GPU as here, and gives wrong
numbers. The interpreter knows the data, so it follows those lanes and reports a reduction whose result
they change.

Each register value may carry a lane state, broadcast to its shape: PAD (a lane a masked load kept off at a
position outside its array, or inside it under a run-time bound such as a row's own length (probe 56d), an element
of SMEM a TMA load filled with a zero from outside its array, or math of such lanes and uniform values only), REAL
(data, or math mixing data in: a loop's running sum of a last tile's padding, which no lane-wise rule can take
apart), NEUTRAL (constants, `ml.arange`, scalars and reduction results: the same for every lane, or a summary of
lanes).
Only tensors holding a PAD lane are stored (`CTA.pads`). A reduction over groups mixing PAD lanes with
others is computed again with the PAD lanes replaced by its identity (0 for a sum, -inf for a max, +inf
for a min); a result that changes is the error, at the reduction, with the hint that fits: the identity
as `other`, or an `ml.where` of the mask before reducing. A sum over PAD lanes divided by the group's
size (`ml.mean`, `ml.sum(v) / BLOCK`) is one too. Loops and branches hand the states on with their values (a
column sum carried over rows keeps its PAD lanes). A running max or sum over tiles (`acc = ml.maximum(acc, v)`)
whose last tile's PAD lanes meet lanes of data that earlier tiles put there cannot be taken apart lane by lane:
where the padding changed such a lane (a max of data below `other=0.0`, a sum of `d * d` after the mean was taken
off the padding), the lane is DIRTY, and a reduction whose result such lanes change is the error too. What the
state does not follow (SMEM written from registers, dots, gathers, scans) is REAL: no report, so a valid kernel is
never rejected.
"""
from __future__ import annotations

import numpy as np

from ..frontend import errors as E
from ..frontend import ir
from ..frontend import call_texts as T
from ..frontend.ops.access import MaskedLoad
from ..frontend.ops.elementwise import Arange, BinOp, Binary, Cast, Compare, Constant, Full, Unary, Where
from ..frontend.ops.memory import Copy, Load, Store
from ..frontend.ops.mma import Dot
from ..frontend.ops.shape import Broadcast, Reduce, ReduceKind, Reshape
from . import interpret_numerics as N
from .interpret_pad_texts import _identity, _load_texts, _num, _origin, _reduce_error, _with_where

REAL, PAD, NEUTRAL, DIRTY = 0, 1, 2, 3
# (a, b) -> the state of a lane computed from lanes in states a and b
_COMBINE = np.array([[REAL, REAL, REAL, DIRTY],
                     [REAL, PAD, PAD, DIRTY],
                     [REAL, PAD, NEUTRAL, DIRTY],
                     [DIRTY, DIRTY, DIRTY, DIRTY]], np.int8)
# a lane of data meeting a PAD lane in one of these keeps its value where the padding holds the op's identity
_ACCUMULATE = (BinOp.ADD, BinOp.MAX, BinOp.MIN)


def tracks(kernel: ir.Kernel) -> bool:
  """Whether `kernel` has a masked load or a TMA load (else nothing is followed, at no cost)."""
  return any(isinstance(o, MaskedLoad) or isinstance(o, Copy) and o.slot >= 0 for o in ir.walk(kernel.body))


def state(cta, v):
  """The lane state of operand `v`: an int8 array broadcastable to it, or a scalar state."""
  if not isinstance(v, ir.Value):
    return NEUTRAL
  s = cta.pads.get(v.id)
  if s is not None:
    return s[0]
  if v.id in cta.neutral or not getattr(v.type, "shape", ()):
    return NEUTRAL
  return REAL


def _is(st, k) -> bool:
  return not isinstance(st, np.ndarray) and st == k


def _source(cta, v):
  """The masked load (or TMA load) a PAD lane of `v` came from."""
  s = cta.pads.get(v.id) if isinstance(v, ir.Value) else None
  return s[1] if s is not None else None


def _set(cta, v, st, src):
  """Record `v`'s lanes (an array or a scalar state)."""
  if isinstance(st, np.ndarray) and ((st == PAD) | (st == DIRTY)).any():
    cta.pads[v.id] = (st, src)
  elif isinstance(st, np.ndarray) and st.size and (st == NEUTRAL).all() or _is(st, NEUTRAL):
    cta.neutral.add(v.id)


def carry(cta, dsts, srcs):
  """Values a loop or a branch hands on (its inits and yields to a loop's arguments, its yields to the
  results): each takes the lane state of the value it receives."""
  got = [(state(cta, v), _source(cta, v)) for v in srcs]       # (all read first: a loop may swap two carries)
  for d, (st, src) in zip(dsts, got):
    cta.pads.pop(d.id, None)
    cta.neutral.discard(d.id)
    if src is not None:
      _set(cta, d, st, src)
    elif _is(st, NEUTRAL):
      cta.neutral.add(d.id)


def after(cta, o):
  """Follow the lanes of `o`'s result (run after its interpreter rule); raise MG953 at a reduction or
  division the padding changes."""
  try:
    if (cta.smem_pad or cta.smem_tma) and not isinstance(o, (Copy, Store)):
      _smem_written(cta, o)
    rule = _RULES.get(type(o))
    if rule is None:
      return
    for r in o.results:
      cta.pads.pop(r.id, None)
      cta.neutral.discard(r.id)
      cta.fresh.pop(r.id, None)
    rule(cta, o)
  except E.KernelError:
    raise
  except Exception:          # a shape this bookkeeping did not foresee: nothing of it is followed (REAL), never an
    for r in o.results:      # error of the user's kernel
      cta.pads.pop(r.id, None)
      cta.neutral.discard(r.id)
    cta.smem_pad.clear()


def _masked_load(cta, o):
  from .access import _coords
  ref, mask = cta.get(o.ref), np.asarray(cta.get(o.mask), bool)
  if getattr(ref, "owner", 0) < 0:
    cta.fresh[o.result.id] = frozenset((ref.root.id,))
  coords = _coords(ref, mask.shape)
  outside = np.zeros(mask.shape, bool)
  for c, d in zip(coords, ref.root.type.shape):
    outside |= (c < 0) | (c >= d)
  pad = ~mask            # (past the end, or inside the array under a run-time bound: a row's own length; probe 56d)
  if (pad & ~outside).any() and _static(cta, o.mask):
    pad &= outside       # a mask of aranges, constants and program ids inside the array: the kernel's own choice
  if (pad & ~outside).any():
    cta.pad_inside.add(id(o))
  if pad.any():
    cta.pads[o.result.id] = (np.where(pad, PAD, REAL).astype(np.int8), o)


def _static(cta, v) -> bool:
  """Whether mask `v` is computed from aranges, constants, program ids and their pure math alone (no value read from
  memory, no loop index or carry, no scalar parameter): lanes it keeps off inside the array are then the kernel's
  choice of data, not a run-time length's padding (`c < vl[r]`, probe 56d). Probe 62a."""
  defs = getattr(cta.m, "pad_defs", None)
  if defs is None:
    defs = cta.m.pad_defs = ir.def_table(cta.m.kernel.body)
  todo, seen = [v], set()
  while todo:
    x = todo.pop()
    if not isinstance(x, ir.Value) or x.id in seen:
      continue
    seen.add(x.id)
    d = defs.get(x.id)
    if d is None or not ir.traits_of(d).pure:
      return False
    todo.extend(d.operands())
  return True


def _copy(cta, o):
  """A TMA load: the elements of its SMEM window whose GMEM positions lie outside the array (read as zeros)."""
  src, dst = cta.get(o.src), cta.get(o.dst)
  if dst.owner < 0 or src.owner >= 0:
    return
  if dst.owner != cta.rank or o.multicast is not None:      # (a peer's SMEM: not followed)
    cta.smem_pad.pop(dst.root.id, None)
    return
  cta.smem_tma[dst.root.id] = src.root.id
  shape = tuple(n for _, n, sq in src.win if not sq)
  outside = np.zeros(shape, bool)
  axis = 0
  for (s_, n, sq), d in zip(src.win, src.root.type.shape):
    if sq:
      if not 0 <= s_ < d:
        outside[...] = True
      continue
    c = s_ + np.arange(n)
    outside |= ((c < 0) | (c >= d)).reshape([n if a == axis else 1 for a in range(len(shape))])
    axis += 1
  have = cta.smem_pad.get(dst.root.id)
  if not outside.any() and have is None:
    return
  if have is None:
    have = cta.smem_pad[dst.root.id] = np.zeros(dst.root.type.shape, bool)
  view = have[dst.index]
  have[dst.index] = outside.reshape(view.shape)
  cta.smem_src[dst.root.id] = o


def _smem_written(cta, o):
  """Any other write into an SMEM buffer whose padding (or TMA load) is followed: the padding of the whole buffer
  is forgotten, and it holds no TMA load's data any more (what it holds now is the kernel's)."""
  for v, kind in ir.traits_of(o).effects(o):
    if kind in (ir.Access.REG_WRITE, ir.Access.TMA_WRITE) and isinstance(v, ir.Value):
      ref = cta.env.get(v.id)
      if getattr(ref, "owner", -1) >= 0:
        cta.smem_pad.pop(ref.root.id, None)
        cta.smem_tma.pop(ref.root.id, None)


def _store(cta, o):
  """A register tensor stored into this CTA's SMEM: its PAD lanes mark the window's elements (a masked load's
  padding staged for ml.dot), its other lanes clear them."""
  ref = cta.get(o.ref)
  if getattr(ref, "owner", -1) >= 0:
    cta.smem_tma.pop(ref.root.id, None)
  if getattr(ref, "owner", -1) != cta.rank or getattr(ref, "transposed", False):
    if getattr(ref, "owner", -1) >= 0:
      cta.smem_pad.pop(ref.root.id, None)
    return
  st = state(cta, o.value)
  have = cta.smem_pad.get(ref.root.id)
  pad = np.broadcast_to(st, o.value.type.shape) == PAD if isinstance(st, np.ndarray) else None
  if pad is None or not pad.any():
    if have is not None:
      have[ref.index] = False
    return
  if have is None:
    have = cta.smem_pad[ref.root.id] = np.zeros(ref.root.type.shape, bool)
  view = have[ref.index]
  have[ref.index] = pad.reshape(np.shape(view))
  cta.smem_src[ref.root.id] = _source(cta, o.value)


def _load(cta, o):
  """A read of SMEM that a TMA load filled: the lanes it read past the array's end are PAD."""
  ref = cta.get(o.ref)
  if ref.owner < 0 or ref.owner == cta.rank and ref.root.id in cta.smem_tma:
    cta.fresh[o.result.id] = frozenset((ref.root.id if ref.owner < 0 else cta.smem_tma[ref.root.id],))
  have = cta.smem_pad.get(ref.root.id) if ref.owner == cta.rank else None
  if have is None or o.merge:
    return
  st = have[ref.index]
  if st.any():
    cta.pads[o.result.id] = (np.where(st, PAD, REAL).astype(np.int8).reshape(o.result.type.shape),
                             cta.smem_src[ref.root.id])


def _dot_operand(cta, v, shape):
  """Which elements of ml.dot operand `v` (an SMEM window, maybe transposed, or a register tensor) are PAD, and
  the load they came from: (bool array of `shape`, src) or (None, None)."""
  x = cta.get(v)
  if hasattr(x, "root") and hasattr(x, "index"):
    have = cta.smem_pad.get(x.root.id) if x.owner == cta.rank else None
    if have is None:
      return None, None
    st = np.asarray(have[x.index])
    st = st.T if x.transposed else st
    return st.reshape(shape), cta.smem_src[x.root.id]
  st = state(cta, v)
  if not isinstance(st, np.ndarray):
    return None, None
  return np.broadcast_to(st, shape) == PAD, _source(cta, v)


def _dot(cta, o):
  """acc + a @ b: an element whose row of `a` or column of `b` is all padding (the scores of keys a TMA load read
  past the sequence's end, `ml.dot(q_s, k_s.T)`) is PAD, as the sum of the padding's products; padding along the
  contraction adds its zeros to data (REAL)."""
  r = o.results[0]
  m, n = r.type.shape[-2:]
  k = o.a.type.shape[-1]
  a, src_a = _dot_operand(cta, o.a, (m, k))
  b, src_b = _dot_operand(cta, o.b, (k, n))
  rows = a.all(axis=1) if a is not None else np.zeros(m, bool)
  cols = b.all(axis=0) if b is not None else np.zeros(n, bool)
  if not (rows.any() or cols.any()):
    return
  pad = rows[:, None] | cols[None, :]
  acc = np.broadcast_to(state(cta, o.acc), (m, n)) if o.acc is not None else np.full((m, n), NEUTRAL, np.int8)
  st = np.where(pad, _COMBINE[acc, PAD], _COMBINE[acc, REAL]).astype(np.int8)
  src = src_b if cols.any() else src_a
  cta.pad_dots[id(src)] = (o, "columns" if cols.any() else "rows")
  _set(cta, r, st, src)


def _fresh(cta, o):
  cta.neutral.add(o.result.id)


def _lanewise(cta, o):
  ins = [x for x in (getattr(o, f, None) for f in ("lhs", "rhs", "x")) if x is not None]
  if isinstance(o, Where):
    _where(cta, o)
    return
  states = [state(cta, x) for x in ins]
  fresh = [_fresh_data(cta, x, s) for x, s in zip(ins, states)]
  if all(f is not None for f in fresh) and any(fresh):
    cta.fresh[o.result.id] = frozenset().union(*(f for f in fresh if f))
  src = next((s for s in (_source(cta, x) for x in ins) if s is not None), None)
  if isinstance(o, Binary) and o.kind == BinOp.DIV:
    _check_mean(cta, o)
  if src is not None and len(ins) > 1 and any(fresh):
    states = _meeting_padding(cta, o, src, states, fresh, o.result.type.shape)
  if src is None:
    if all(_is(s, NEUTRAL) for s in states):
      cta.neutral.add(o.result.id)
    return
  st = states[0]
  for s in states[1:]:
    st = _COMBINE[st, s]
  if isinstance(o, Binary) and o.kind in _ACCUMULATE and isinstance(st, np.ndarray):
    st = _mix(cta, o, states, st, src)
  _set(cta, o.result, np.asarray(st, np.int8), src)


def _fresh_data(cta, v, st):
  """For an operand of lanewise math: the GMEM arrays (root ids) whose elements `v` holds at its lanes' own
  positions (a load of GMEM or of SMEM a TMA load filled, and lanewise math of such loads and uniform values),
  False for a NEUTRAL operand, None for other data (a loop's carry, a dot's result, ...)."""
  if _is(st, NEUTRAL):
    return False
  return cta.fresh.get(v.id) if isinstance(v, ir.Value) else None


def _meeting_padding(cta, o, src, states, fresh, shape):
  """A lane where the padding of one operand meets elements of another array read at the same position
  (`v * w[...]` of a row padded past x's end and a longer w, `v * b[None, :] + b[None, :]` of rows padded past
  the array's end): the result there is no element of the data, it is padding (PAD), whatever it holds. Data
  of the padded array itself (other windows of it: a running max over a row's tiles that static_range unrolls)
  and data carried from earlier trips meet the padding in _mix, as a running accumulator."""
  root = _root_of(cta, src)
  if root is None:
    return states
  full = [np.broadcast_to(s, shape) for s in states]
  pad = np.zeros(shape, bool)
  for s in full:
    pad |= s == PAD
  if not pad.any():
    return states
  out = [np.where(pad & (s == REAL), NEUTRAL, s).astype(np.int8) if f and root not in f else st
         for st, s, f in zip(states, full, fresh)]
  met = [f for st, s, f in zip(states, full, fresh) if f and root not in f and (pad & (s == REAL)).any()]
  if met and id(src) not in cta.pad_meets:
    names = {p.value.id: p.value.name for p in cta.m.kernel.params}
    cta.pad_meets[id(src)] = (o.loc, sorted(names.get(r, "another array") for r in met[0]))
  return out


def _root_of(cta, src):
  """The root id of the GMEM array whose end the padding of masked (or TMA) load `src` ran past."""
  ref = cta.env.get((src.src if isinstance(src, Copy) else src.ref).id)
  return getattr(getattr(ref, "root", None), "id", None)


def _mix(cta, o, states, st, src):
  """A lane of data meeting a PAD lane in a sum, max or min (a running accumulator over tiles whose last one
  runs past the array's end): DIRTY where the padding changed it, else REAL (it added 0, or lost the max)."""
  shape = np.shape(cta.get(o.result))
  a, b = (np.broadcast_to(s, shape) for s in states)
  data_a, data_b = (a == REAL) & (b == PAD), (a == PAD) & (b == REAL)
  if not (data_a.any() or data_b.any()):
    return st
  got = np.broadcast_to(np.asarray(cta.get(o.result)), shape)
  had = np.where(data_a, np.broadcast_to(np.asarray(cta.operand(o.lhs)), shape),
                 np.broadcast_to(np.asarray(cta.operand(o.rhs)), shape))
  changed = (data_a | data_b) & _differs(got, had, 0, o.result.type.dtype)
  if not changed.any():
    return st
  if id(src) not in cta.pad_mixes:
    k = tuple(np.argwhere(changed)[0])
    pad_side, lanes = (o.rhs, b) if data_a[k] else (o.lhs, a)     # (the operand holding the padding)
    fill = 0 if isinstance(src, Copy) else src.other
    pads = np.broadcast_to(np.asarray(cta.operand(pad_side)), shape)[lanes == PAD]
    raw = isinstance(fill, (int, float)) and bool(np.all(pads == np.asarray(fill).astype(pads.dtype)))
    cta.pad_mixes[id(src)] = (o, had[k], got[k], 1 if data_a[k] else 0, raw)
  return np.where(changed, DIRTY, st).astype(np.int8)


def _where(cta, o):
  """A lane takes the state of the side its condition picks."""
  a, b = state(cta, o.on_true), state(cta, o.on_false)
  fa, fb = _fresh_data(cta, o.on_true, a), _fresh_data(cta, o.on_false, b)
  if fa is not None and fb is not None and (fa or fb):
    cta.fresh[o.result.id] = frozenset().union(*(f for f in (fa, fb) if f))
  src = _source(cta, o.on_true) or _source(cta, o.on_false)
  if src is None:
    if _is(a, NEUTRAL) and _is(b, NEUTRAL):
      cta.neutral.add(o.result.id)
    return
  cond = np.asarray(cta.get(o.cond), bool)
  shape = o.result.type.shape
  # (only a uniform side, a number or a fill, is such a fill: a select between two tensors, the two rolls a padded
  # roll picks from, takes no padding of the side it leaves; probe 72a: a CTC step's rolled alpha of 11 states,
  # whose constant lanes beside the other roll's padding were made PAD, was MG953 with the right numbers)
  ka, kb = not isinstance(a, np.ndarray), not isinstance(b, np.ndarray)
  c, a, b = (np.broadcast_to(s, shape) for s in (cond, a, b))
  st = np.where(c, a, b)
  # a constant the select puts where the other side holds padding is a fill of its own (`ml.where(m, v, 0.0)` after
  # the load's other=-inf is other=0.0 again): those lanes stay PAD, and a reduction they change is MG953 as before
  refill = np.where(c, ka & (a == NEUTRAL) & (b == PAD), kb & (b == NEUTRAL) & (a == PAD))
  if refill.any():
    st = np.where(refill, PAD, st)
    side = o.on_true if bool(np.any(refill & c)) else o.on_false
    cta.pad_wheres.setdefault(id(src), (o, side))
  _set(cta, o.result, st.astype(np.int8), src)


def _lanes_of(cta, o):
  """The lane states of `o.x` a shape op carries to its result, or None (a neutral operand makes a neutral result)."""
  if isinstance(o.x, ir.Value) and o.x.id in cta.fresh:
    cta.fresh[o.result.id] = cta.fresh[o.x.id]
  st = state(cta, o.x)
  if _is(st, NEUTRAL):
    cta.neutral.add(o.result.id)
    return None
  return st if isinstance(st, np.ndarray) else None


def _broadcast(cta, o):
  st = _lanes_of(cta, o)
  if st is None:
    return
  out = o.result.type.shape
  st = np.broadcast_to(st, o.x.type.shape).reshape(
      [o.x.type.shape[o.dims.index(a)] if a in o.dims else 1 for a in range(len(out))])
  _set(cta, o.result, np.array(np.broadcast_to(st, out)), _source(cta, o.x))


def _reshape(cta, o):
  st = _lanes_of(cta, o)
  if st is None:
    return
  _set(cta, o.result, np.broadcast_to(st, o.x.type.shape).reshape(o.result.type.shape).copy(), _source(cta, o.x))


def _reduce_values(kind, x, axes, d):
  if kind == ReduceKind.SUM:
    c = np.float32 if d.is_float else N.np_dtype(d)
    return np.asarray(np.sum(x.astype(c), axis=axes, dtype=c))
  return np.asarray(N.ieee_reduce(kind == ReduceKind.MAX, x, axes))


def _reduce(cta, o):
  st = state(cta, o.x)
  if not isinstance(st, np.ndarray):
    cta.neutral.add(o.result.id)
    return
  src = _source(cta, o.x)
  x, d = np.asarray(cta.get(o.x)), o.x.type.dtype
  st = np.broadcast_to(st, x.shape)
  pad = st == PAD
  real = np.any(st == REAL, axis=o.axes)       # (NEUTRAL lanes beside PAD ones: a where's constant, no data)
  all_pad = np.any(pad, axis=o.axes) & ~real
  inside = _inside_own(cta, o.result, o)   # (a padded result's lanes past its own shape: padding no use reads)
  mixed = np.any(pad, axis=o.axes) & real & inside
  if mixed.any():
    got = _reduce_values(o.kind, x, o.axes, d)
    want = _reduce_values(o.kind, np.where(pad, np.asarray(_identity(o.kind, d)).astype(x.dtype), x), o.axes, d)
    scale = np.max(np.where(pad, 0, np.abs(x.astype(np.float64))), axis=o.axes) if d.is_float else 0
    bad = mixed & _differs(got, want, scale, d)
    if bad.any():
      raise _reduce_error(cta, o, src, x, pad, got, want, bad)
  dirty = np.any(st == DIRTY, axis=o.axes) & inside
  if dirty.any():
    _check_dirty(cta, o, src, x, st == DIRTY, dirty, d)
  if o.kind == ReduceKind.SUM and mixed.any():
    # (a mean: this sum divided by the group's size, which counts the PAD lanes)
    cta.pad_sums[o.result.id] = (int(np.prod([x.shape[a] for a in o.axes])),
                                 np.sum(st == REAL, axis=o.axes), mixed, src)
  if all_pad.any():
    _set(cta, o.result, np.where(all_pad, PAD, NEUTRAL).astype(np.int8), src)
  else:
    cta.neutral.add(o.result.id)


def _inside_own(cta, v, reduce=None):
  """True, or where `v` is a value the padded trace holds padded (a statistic of a tile padded from (9, 9) to (12,
  32), 32 long for its own 9), a bool array of its lanes inside its own shape: the rest is the trace's padding, which
  no use reads as data (probe 72a: an HMM step's padding columns, carried, were MG953's "result 16")."""
  pads = getattr(cta.m.kernel, "pad_tiles", None) or {}
  own = pads.get(v.id)
  shape = tuple(getattr(v.type, "shape", ()))
  if own is None and reduce is not None and (x := _own_of_tile(cta, reduce.x, pads)) is not None:
    kept = tuple(n for k, n in enumerate(x) if k not in reduce.axes)    # (a statistic the trace did not record: its
    own = kept if len(kept) == len(shape) else None                     # tile's own shape less the reduced axes)
  if own is None or len(own) != len(shape) or tuple(own) == shape:
    return True
  inside = np.zeros(shape, bool)
  inside[tuple(slice(0, n) for n in own)] = True
  return inside


def _own_of_tile(cta, v, pads):
  """The own shape of a reduction's tile: its record, or that of the tile a select of the padding by the reduction's
  identity (`ml.where(rows < 9, t, -inf)`, which the trace makes without a record) keeps."""
  if v.id in pads:
    return pads[v.id]
  defs = cta.m.__dict__.get("_pad_defs")
  if defs is None:
    defs = cta.m.__dict__["_pad_defs"] = ir.def_table(cta.m.kernel.body)
  made = defs.get(v.id)
  if isinstance(made, Where):
    for u in (made.on_true, made.on_false):
      if isinstance(u, ir.Value) and u.id in pads and tuple(u.type.shape) == tuple(v.type.shape):
        return pads[u.id]
  return None


def _check_dirty(cta, o, src, x, lanes, groups, d):
  """A reduction of DIRTY lanes (data the padding changed): the error where they change its result (a max
  that other lanes of data decide is right still)."""
  got = _reduce_values(o.kind, x, o.axes, d)
  if o.kind != ReduceKind.SUM:
    without = _reduce_values(o.kind, np.where(lanes, np.asarray(_identity(o.kind, d)).astype(x.dtype), x), o.axes, d)
    groups = groups & _differs(got, without, 0, d)
  if not groups.any() or id(src) not in cta.pad_mixes:
    return
  mix, had, became, side, raw = cta.pad_mixes[id(src)]
  k = tuple(int(i) for i in np.argwhere(groups)[0]) if np.ndim(groups) else ()
  ref, axis, mask, other = _load_texts(cta, src)
  what, _ = T.called(o.loc, f"ml.{o.kind.value}")
  where = "" if not k else f" (result {list(k) if len(k) > 1 else k[0]})"
  kind = mix.kind
  ident = "float('-inf')" if kind == BinOp.MAX else "float('inf')" if kind == BinOp.MIN else "0.0"
  dt = mix.result.type.dtype
  if not dt.is_float:
    ident = "0" if kind == BinOp.ADD else str(_identity(ReduceKind.MAX if kind == BinOp.MAX else ReduceKind.MIN, dt))
  name = {BinOp.ADD: "a sum", BinOp.MAX: "a max", BinOp.MIN: "a min"}[kind]
  keep = mask or f"pos < {ref}.shape[{axis}]"
  texts = T.keep_term(mix.loc, side, keep, ident)
  at = f"line {mix.loc.lineno}" + (f" ({texts[0]})" if texts else "")
  hint = (f"keep the padding out of the {name[2:]} at line {mix.loc.lineno}: " +
          (texts[1] if texts else f"ml.where({keep}, term, {ident}) in place of the padded term"))
  if raw and not isinstance(src, Copy):
    hint = (f"fill the lanes with the identity of {name}: other={ident} in the masked load at line {src.loc.lineno},"
            f" or {hint[0].lower()}{hint[1:]}")
  raise E.MaskedReductionError(
      f"{what} reduces lanes of data that the padding changed at {at}: {_origin(src, ref, other, cta)} met data"
      f" there, and a lane holding {_num(had)} became {_num(became)}, so its result in program {cta.label}{where},"
      f" {_num(np.asarray(got)[k])}, counts the padding", o.loc, hint=hint)


def _differs(got, want, scale, d):
  g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
  same = (g == w) | (np.isnan(g) & np.isnan(w))
  if not d.is_float:
    return ~same
  with np.errstate(invalid="ignore"):
    tol = (1e-5 if d.bits >= 32 else 1e-2) * (np.abs(w) + scale)
    return ~(same | (np.abs(g - w) <= tol))


def _check_mean(cta, o):
  rec = cta.pad_sums.get(o.lhs.id) if isinstance(o.lhs, ir.Value) else None
  if rec is None:
    return
  size, real, mixed, src = rec
  n = np.asarray(cta.operand(o.rhs, o.result.type.dtype), np.float64)
  if n.shape or float(n) != size:
    return
  inside = int(np.min(np.where(mixed, real, size)))
  what, arg = T.called(o.loc, "ml.mean")
  ref, axis, mask, other = _load_texts(cta, src)
  mean = what.endswith("mean") and T.is_call(o.loc)
  r = cta.get(src.src if isinstance(src, Copy) else src.ref)
  whole = r.root.type.shape[cta.m.lead(r) + axis] == inside      # (the tile holds the whole axis: its size divides)
  them = (f"lanes the masked load at line {src.loc.lineno} kept off" if not isinstance(src, Copy) else
          f"elements the TMA copy at line {src.loc.lineno} read")
  where = _with_where(o.loc, mask, ReduceKind.SUM, o.result.type.dtype) if mask else None
  raise E.MaskedReductionError(
      f"{'this mean' if mean else 'this division'} counts {size} elements, but {size - inside} of them are {them}"
      f" {'off under its mask' if id(src) in cta.pad_inside else 'past the end of ' + ref} (program {cta.label}): the"
      f" mean of the {inside} elements inside divides by {inside}",
      o.loc,
      hint=(f"average only the elements inside: {where}" if mean and where and not whole else
            f"average only the elements inside: {where + ', or ' if where else ''}{T.as_sum(o.loc, arg)} /"
            f" {ref}.shape[{axis}]" if mean else
            f"divide by the number of elements inside ({ref}.shape[{axis}]), not by the tile's size" if whole else
            f"divide by the number of elements inside ({inside} in this program), not by the tile's size"))


_RULES = {Dot: _dot, Store: _store, MaskedLoad: _masked_load, Copy: _copy, Load: _load, Constant: _fresh, Full: _fresh, Arange: _fresh,
          Binary: _lanewise, Compare: _lanewise, Unary: _lanewise, Cast: _lanewise, Where: _lanewise,
          Broadcast: _broadcast, Reshape: _reshape, Reduce: _reduce}

from .interpret_pad_moves import RULES as _MOVES     # (transposes, permutes, rolls: their own module)  # noqa: E402
_RULES.update(_MOVES)
from .interpret_pad_scans import RULES as _SCANS     # (scans: a product's total, a reverse scan; probe 51a)  # noqa: E402
_RULES.update(_SCANS)
from .interpret_pad_sorts import RULES as _SORTS     # (sorts: padding sorted among the data; probe 54e)  # noqa: E402
_RULES.update(_SORTS)
