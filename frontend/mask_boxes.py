"""The part of a window a masked store writes, where its mask is known while compiling.

A store's mask built from ml.arange, constants and the scalars the grid evaluation knows
(program ids, loop counters, static sizes: Triton's tail mask `offs < n`) is evaluated in
every program at once; what the coverage checks (frontend/checks.py) count as written is the
box around the elements it keeps in each program, so writes stay over-approximated (a mask
with gaps counts as its box). Masks of data are unknown: the whole window, as before.

Values are numpy arrays of shape (programs or 1, *dims), a dimension 1 where the value does not
vary along it, so `rows[:, None] < m` stays (P, n, 1); `&` of masks intersects their boxes and
`|` joins them without building the full mask.
"""
from __future__ import annotations

import math

import numpy as np

from . import ir
from .absint import UNKNOWN, _wrap
from .dtypes import DType
from .ops.elementwise import Arange, BinOp, Binary, Cast, CmpOp, Compare, Constant, Full, UnOp, Unary, Where
from .ops.memory import Load, Store
from .ops.shape import Broadcast, Reshape
from .types import ScalarType, resolve

MAX_ELEMENTS = 1 << 22      # a value larger than this over the programs is not evaluated
MAX_BOXES = 1 << 14         # masks made of more boxes (over the programs) are counted as their box

_BIN = {BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply, BinOp.MAX: np.maximum,
        BinOp.MIN: np.minimum, BinOp.AND: np.bitwise_and, BinOp.OR: np.bitwise_or, BinOp.XOR: np.bitwise_xor,
        BinOp.FLOORDIV: np.floor_divide, BinOp.MOD: np.mod, BinOp.SHL: np.left_shift, BinOp.SHR: np.right_shift}
_CMP = {CmpOp.LT: np.less, CmpOp.LE: np.less_equal, CmpOp.GT: np.greater,
        CmpOp.GE: np.greater_equal, CmpOp.EQ: np.equal, CmpOp.NE: np.not_equal}


def store_mask(defs: dict, o):
  """The mask of a masked store: a MaskedStore's, or that of ml.store into SMEM with a mask (a
  Store of ml.where(mask, value, the buffer's merge read)); None for other ops."""
  from .ops.access import MaskedStore
  if isinstance(o, MaskedStore):
    return o.mask
  if isinstance(o, Store):
    w = defs.get(o.value.id)
    old = defs.get(w.on_false.id) if isinstance(w, Where) and isinstance(w.on_false, ir.Value) else None
    if isinstance(old, Load) and old.merge and old.ref is o.ref:
      return w.cond
  return None


def kept_boxes(ev, mask: ir.Value, progs: np.ndarray, exact_only: bool = False):
  """(owner, lo, hi): boxes (rows of the int arrays lo, hi, of the window's rank) holding the
  window's elements `mask` keeps, and the index into `progs` (programs of the grid) of the
  program each is in; an empty box where a program keeps none. None where the mask is not known
  while compiling. The boxes are exact where the mask is a product of runs along each axis (a
  tail, `a % 2 == 0`, `(a < 32) | (a >= 96)`), else the box around what it keeps (None instead
  with `exact_only`: the race proof counts only elements certainly touched)."""
  shape = tuple(mask.type.shape)
  e = _Eval(ev, progs, shape)
  v = e.value(mask)
  exact = _runs_product(v, shape) if v is not None else None
  if exact is not None:
    owner, lo, hi = exact
    if v.shape[0] == 1 and len(progs) * len(owner) <= MAX_BOXES:   # the same boxes in every program
      return np.repeat(np.arange(len(progs)), len(owner)), np.tile(lo, (len(progs), 1)), np.tile(hi, (len(progs), 1))
    if v.shape[0] > 1:
      return exact
  if exact_only:
    return None
  box = _bounding_box(v, shape) if v is not None else e.box(mask)
  if box is None:
    return None
  lo, hi = (np.broadcast_to(b, (len(progs), len(shape))).astype(np.int64) for b in box)
  return np.arange(len(progs)), lo, hi


def _held(v, y, o):
  """Operand `y`'s value `v`, a Python int as the GPU holds it in the op's operand dtype (-1
  meeting a uint32 is 0xFFFFFFFF: u <= -1 holds everywhere)."""
  if v is None or isinstance(y, ir.Value) or isinstance(y, bool):
    return v
  d = next((resolve(x.type.dtype) for x in (o.lhs, o.rhs) if isinstance(x, ir.Value)), None)
  return _wrap(v.astype(np.int64), d) if isinstance(d, DType) and d.is_int else v


class _Eval:
  def __init__(self, ev, progs, shape):
    self.ev, self.progs, self.shape = ev, progs, shape
    self.memo = {}          # (value id, depth) -> its box or value: an unrolled loop's values meet many times

  # ------------------------------------------------------------ boxes
  def box(self, x, depth=0):
    """(lo, hi) arrays (programs or 1, rank) of the elements of the bool tensor `x` that hold."""
    if not isinstance(x, ir.Value):
      return self._box(x, depth)
    key = ("box", x.id, depth)
    if key not in self.memo:
      self.memo[key] = self._box(x, depth)
    return self.memo[key]

  def _box(self, x, depth):
    o = self.ev.defs.get(x.id) if isinstance(x, ir.Value) else None
    if depth < 32 and isinstance(o, Binary) and o.kind in (BinOp.AND, BinOp.OR):
      a, b = (self.box(y, depth + 1) for y in (o.lhs, o.rhs))
      if o.kind == BinOp.AND:      # within both boxes
        return a if b is None else b if a is None else (np.maximum(a[0], b[0]), np.minimum(a[1], b[1]))
      if a is None or b is None:
        return None
      ea, eb = ((h <= l).any(axis=1, keepdims=True) for l, h in (a, b))   # empty boxes join nothing
      return (np.where(ea, b[0], np.where(eb, a[0], np.minimum(a[0], b[0]))),
              np.where(ea, b[1], np.where(eb, a[1], np.maximum(a[1], b[1]))))
    v = self.value(x)
    return None if v is None else _bounding_box(v.astype(bool), self.shape)

  # ------------------------------------------------------------ values
  def value(self, x, depth=0):
    """`x` (an operand of rank len(shape) or less) as an array (programs or 1, *dims); None if unknown. Each value is
    evaluated once a depth (a static loop's binary search, `lo, hi = ml.where(go, mid + 1, lo), ml.where(go, hi,
    mid)`, meets each step's values several times: walked as a tree, the evaluation took time exponential in the
    steps)."""
    if not isinstance(x, ir.Value):
      return self._value(x, depth)
    key = (x.id, depth)
    if key not in self.memo:
      self.memo[key] = self._value(x, depth)
    return self.memo[key]

  def _value(self, x, depth):
    if isinstance(x, (bool, int)):
      return np.asarray(x).reshape(1)
    if not isinstance(x, ir.Value) or depth > 32:
      return None
    if isinstance(x.type, ScalarType):
      s = self.ev.value(x)
      return None if s is UNKNOWN else np.asarray(s)[self.progs]
    o, t = self.ev.defs.get(x.id), x.type
    shape = tuple(t.shape)
    d = resolve(t.dtype)
    if not isinstance(d, DType) or not (d.is_int or d == DType.bool_):
      return None
    get = lambda y: self.value(y, depth + 1)
    r = None
    if isinstance(o, Constant):
      r = np.asarray(o.value).reshape(1) if isinstance(o.value, (bool, int)) else None
    elif isinstance(o, Arange):
      r = np.arange(shape[o.dim]).reshape((1,) + tuple(n if a == o.dim else 1 for a, n in enumerate(shape)))
    elif isinstance(o, Full):
      r = get(o.value)
    elif isinstance(o, (Binary, Compare)):
      fn = (_BIN if isinstance(o, Binary) else _CMP).get(o.kind)
      a, b = (_held(get(y), y, o) for y in (o.lhs, o.rhs))
      bits = resolve(o.lhs.type.dtype).bits if isinstance(o.lhs, ir.Value) else 32
      if b is not None and (o.kind in (BinOp.FLOORDIV, BinOp.MOD) and (b == 0).any()
                            or o.kind in (BinOp.SHL, BinOp.SHR) and ((b < 0) | (b >= bits)).any()):
        fn = None            # the GPU's result is not numpy's
      if fn is not None and a is not None and b is not None and _small(a, b):
        a, b = _lift(a, len(shape)), _lift(b, len(shape))
        with np.errstate(all="ignore"):
          r = fn(a, b)
    elif isinstance(o, Unary) and o.kind in (UnOp.NOT, UnOp.NEG):
      a = get(o.x)
      r = None if a is None else np.logical_not(a) if o.kind == UnOp.NOT else -a
    elif isinstance(o, Where):
      c, a, b = get(o.cond), get(o.on_true), get(o.on_false)
      if c is not None and a is not None and b is not None and _small(c, a, b):
        r = np.where(*(_lift(v, len(shape)) for v in (c, a, b)))
    elif isinstance(o, Cast) and not o.bitcast:
      r = get(o.x)
    elif isinstance(o, Broadcast):
      a = get(o.x)
      if a is not None:
        a = _lift(a, len(getattr(o.x.type, "shape", ())))
        placed = [1] * len(shape)
        for i, dim in enumerate(o.dims):
          placed[dim] = a.shape[1 + i]
        r = a.reshape((a.shape[0],) + tuple(placed))
    elif isinstance(o, Reshape):
      r = self._reshape(get(o.x), tuple(getattr(o.x.type, "shape", ())), shape)
    if r is None or r.size > MAX_ELEMENTS:
      return None
    r = _lift(np.asarray(r), len(shape))
    if d == DType.bool_:
      return r.astype(bool)
    r = r.astype(np.int64)
    lo, hi = d.int_range if d.bits <= 32 else (r.min(), r.max())
    return _wrap(r, d) if r.min() < lo or r.max() > hi else r    # (integers wrap as the GPU's do)

  def _reshape(self, a, old, new):
    if a is None:
      return None
    a = _lift(a, len(old))
    keep_old, keep_new = [k for k, n in enumerate(old) if n != 1], [k for k, n in enumerate(new) if n != 1]
    if [old[k] for k in keep_old] == [new[k] for k in keep_new]:    # size-1 axes inserted or removed
      placed = [1] * len(new)
      for i, j in zip(keep_old, keep_new):
        placed[j] = a.shape[1 + i]
      return a.reshape((a.shape[0],) + tuple(placed))
    if a.shape[0] * math.prod(old) > MAX_ELEMENTS:
      return None
    return np.broadcast_to(a, (a.shape[0],) + old).reshape((a.shape[0],) + new)


def _small(*xs) -> bool:
  """Whether the broadcast of the arrays `xs` (programs or 1, *dims) has at most MAX_ELEMENTS."""
  rank = max(x.ndim for x in xs) - 1
  return math.prod(np.broadcast_shapes(*(_lift(x, rank).shape for x in xs))) <= MAX_ELEMENTS


def _lift(a: np.ndarray, rank: int) -> np.ndarray:
  """`a` (programs or 1, *dims of rank `rank` or less) with size-1 axes added before its dims."""
  extra = rank - (a.ndim - 1)
  return a.reshape((a.shape[0],) + (1,) * extra + a.shape[1:]) if extra > 0 else a


def _runs_product(v: np.ndarray, shape):
  """(owner, lo, hi) of the boxes the mask `v` (programs or 1, *dims) is made of in each program,
  where it is the product of its runs along each axis, and they are at most MAX_BOXES; None
  otherwise."""
  if v.shape[0] * math.prod(shape) > MAX_ELEMENTS:
    return None
  m = np.broadcast_to(v, (v.shape[0],) + shape).astype(bool)
  owner = np.arange(m.shape[0])                   # the boxes over the axes so far, by program
  lo = hi = np.zeros((m.shape[0], 0), np.int64)
  product = np.ones(m.shape, bool)
  for a, n in enumerate(shape):
    on = m.any(axis=tuple(1 + b for b in range(len(shape)) if b != a))
    product &= on.reshape((m.shape[0],) + tuple(n if b == a else 1 for b in range(len(shape))))
    step = np.diff(np.pad(on.astype(np.int8), ((0, 0), (1, 1))), axis=1)
    (p, start), (_, end) = np.nonzero(step == 1), np.nonzero(step == -1)
    runs = np.bincount(p, minlength=m.shape[0])   # each box, times each run of its program
    reps = runs[owner]
    if reps.sum() > MAX_BOXES:
      return None
    i = np.repeat(np.arange(len(owner)), reps)
    j = (np.cumsum(runs) - runs)[owner[i]] + np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
    owner, lo, hi = owner[i], np.column_stack([lo[i], start[j]]), np.column_stack([hi[i], end[j]])
  if not (product == m).all():
    return None
  return owner, lo.astype(np.int64), hi.astype(np.int64)


def _bounding_box(m: np.ndarray, shape):
  """(lo, hi) arrays (programs, rank) of the box around the true elements of `m` in each program."""
  m = _lift(m, len(shape))
  any_on = m.reshape(m.shape[0], -1).any(axis=1)
  lo = np.zeros((m.shape[0], len(shape)), np.int64)
  hi = np.zeros_like(lo)
  for a, n in enumerate(shape):
    if m.shape[1 + a] == 1:
      hi[:, a] = np.where(any_on, n, 0)
      continue
    on = m.any(axis=tuple(1 + b for b in range(len(shape)) if b != a))
    lo[:, a] = np.where(any_on, np.argmax(on, axis=1), 0)
    hi[:, a] = np.where(any_on, n - np.argmax(on[:, ::-1], axis=1), 0)
  return lo, hi
