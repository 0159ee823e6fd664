"""The scalar IR evaluated over the whole grid while compiling (abstract interpretation).

Program ids, `ml.num_programs`, constants, loop counters and the integer arithmetic on
them are known before the kernel runs. `GridEval` runs that scalar part of a kernel's
IR for every program at once (each scalar is a numpy array over the grid), walks loops
iteration by iteration within a budget, and hands each memory access, in program order,
to a visitor with the window it touches in every program and two masks: the programs
that certainly run it (`must`) and those that may (`may`). What it cannot know (data,
loops past the budget, floats) is UNKNOWN (a loop past the budget is walked exactly on its
first and last trips, what it carries unknown on the last, and summarised between); a branch on an unknown condition runs both
sides as "may". Checks built on it (frontend/checks.py) report a mistake only where
every program it names really makes it, so they never reject a valid kernel.

`known_multiple` is the companion divisibility analysis: a number every value of a
scalar is a multiple of (from constants, products and `ml.multiple_of`), for loops and
values the grid evaluation cannot enumerate.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import errors as E
from . import grid_affine
from . import ir
from .dtypes import DType
from .ops.control import Condition, For, If, MultipleOf, NumPrograms, PositiveStep, ProgramId, While, Yield
from .ops.elementwise import BinOp, Binary, Cast, CmpOp, Compare, Constant, UnOp, Unary, Where
from .ops.access import ScalarRead
from .ops.gather import Gather
from .ops.memory import ClusterRef, View
from .overflow import Overflows
from .types import RefType, ScalarType

UNKNOWN = None
# The proofs run on every compile, so they must stay a small part of its time (tens of ms).
# BUDGET is in units of one scalar op evaluated over the whole grid of up to BUDGET_PROGRAMS
# programs (a larger grid's budget shrinks in proportion: the work is per program); a memory
# access, whose checks cost about a dozen of those, counts ACCESS_COST more. Loops that do not fit
# are summarised.
BUDGET = 1_000
BUDGET_PROGRAMS = 1 << 14
ACCESS_COST = 12
MAX_PROGRAMS = 1 << 22    # larger grids are not evaluated (every check then defers to interpret mode)


@dataclasses.dataclass(frozen=True)
class Window:
  """The part of a root ref (a kernel parameter or an SMEM buffer) an access touches."""
  root: ir.Value
  starts: tuple          # per root dimension: int64 array over the programs, or UNKNOWN
  sizes: tuple
  remote: bool = False   # another CTA's SMEM (ml.cluster_ref)
  spans: tuple = ()      # per root dimension, for an UNKNOWN start in a summarised loop: (lo, hi) arrays bounding it
                         # over the trips (frontend/loop_spans.py), or None; () where there is none

  @property
  def shape(self):
    return self.root.type.shape


@dataclasses.dataclass(frozen=True)
class Access:
  op: ir.Op
  ref: ir.Value
  kind: ir.Access
  window: Window
  must: np.ndarray       # programs that certainly perform it
  may: np.ndarray        # programs that may perform it
  exact: bool            # False in a summarised pass over a loop (windows over-approximate)


_BIN = {BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply, BinOp.MAX: np.maximum,
        BinOp.MIN: np.minimum, BinOp.AND: np.bitwise_and, BinOp.OR: np.bitwise_or,
        BinOp.XOR: np.bitwise_xor}
_CMP = {CmpOp.LT: np.less, CmpOp.LE: np.less_equal, CmpOp.GT: np.greater,
        CmpOp.GE: np.greater_equal, CmpOp.EQ: np.equal, CmpOp.NE: np.not_equal}


def _wrap(x, d: DType):
  """`x` as the GPU holds it in `d` (integers wrap); UNKNOWN for dtypes not tracked."""
  if d == DType.bool_:
    return x.astype(bool)
  if not d.is_int or d.bits > 32:
    return UNKNOWN if not d.is_int else x
  m = 1 << d.bits
  x = np.mod(x, m)
  return np.where(x >= m // 2, x - m, x) if d.is_signed else x


class GridEval:
  """Run `kernel`'s scalar IR over the grid; call `visit(Access)` for every memory access."""

  def __init__(self, kernel: ir.Kernel, visit, *, budget: int = BUDGET, programs=None):
    """`programs`: the linear indices of the programs to run (all of them by default; a grid past
    MAX_PROGRAMS is then not run)."""
    self.kernel, self.visit = kernel, visit
    g = kernel.grid
    self.sampled = programs is not None
    self.P = g[0] * g[1] * g[2] if programs is None else len(programs)
    self.budget = budget * min(1.0, BUDGET_PROGRAMS / max(self.P, 1))
    lin = (np.asarray(programs, np.int64) if programs is not None else
           np.arange(self.P if self.P <= MAX_PROGRAMS else 0, dtype=np.int64))   # (too many: not run)
    self.pid = (lin % g[0], lin // g[0] % g[1], lin // (g[0] * g[1]))
    self.env: dict[int, object] = {}
    self.defs = ir.def_table(kernel.body)
    self.exact = True
    self.trips = []           # (loop index, its values now) of the loops being walked, outermost first
    self.overflows = Overflows()     # int32 index arithmetic that wraps (frontend/overflow.py)
    self.decided: dict = {}   # id(block of an If) -> programs its condition, known here, kept out of it
    self.decided_trip: dict = {}   # id(such a block) -> the loop counters of its first skip ("r = 1")
    self.broken_promises: list = []   # false ml.multiple_of promises the grid decides (check_promise)
    self._promised: set = set()       # (the MultipleOf ops reported)
    self.divisors: dict = {}          # id(integer //, % or fmod) -> (it, whether every walk knew its divisor non-zero)
    self.signs: dict = {}             # integer scalar's id -> whether every walk knew it >= 0 (triton_semantics.py)
    self.watch_signs = getattr(kernel, "watch_signs", False)     # (only a Triton port with divisions to warn of)
    self.spans: dict = {}             # a summarised loop's counter id -> (lo, hi) over its trips (loop_spans.py)
    self.grid_compares: dict = {}     # id(tensor Compare) -> (it, whether every walk proved it free of wrap-around)
    self.grid_sides: dict = {}        # id(tensor Compare) -> (its sides' affine forms or None, dtype)

  def program(self, p: int) -> tuple:
    return tuple(int(a[p]) for a in self.pid)

  def run(self) -> bool:
    """Walk the kernel; False when the grid is too large to evaluate."""
    if self.P > MAX_PROGRAMS and not self.sampled:
      return False
    every = np.ones(self.P, bool)
    self.block(self.kernel.body, every, every)
    return True

  def check_promise(self, o: MultipleOf, vals, must) -> None:
    """An `ml.multiple_of` promise that a program certainly making it breaks (program ids, loop counters):
    the compiled kernel trusts it, moving vectors (or a TMA box) from an address off their alignment,
    which faults the GPU, so it is reported while compiling, as interpret mode reports one on data."""
    bad = must & (np.asarray(vals) % o.multiple != 0)
    if not bad.any() or id(o) in self._promised:
      return
    self._promised.add(id(o))
    p = int(np.argmax(bad))
    trips = ", ".join(f"{iv.name or 'the loop index'} = {int(v[p])}" for iv, v in self.trips if v is not UNKNOWN)
    self.broken_promises.append(E.InterpretError(
        f"ml.multiple_of promises a multiple of {o.multiple}, but {o.x.name or 'the value'} is {int(vals[p])} in"
        f" program {self.program(p)}{f' (at {trips})' if trips else ''}: the compiled kernel trusts it, and a"
        f" vector access or TMA copy at an address off its alignment faults the GPU", o.loc,
        hint=f"promise only what holds in every program, or make the value a multiple of {o.multiple}"))

  # ------------------------------------------------------------ values
  def value(self, x):
    if isinstance(x, ir.Value):
      return self.env.get(x.id, UNKNOWN)
    if isinstance(x, (bool, np.bool_)):
      return np.full(self.P, bool(x))
    if isinstance(x, int):
      return np.full(self.P, x, np.int64)
    return UNKNOWN

  def set(self, v: ir.Value, x):
    self.env[v.id] = x if isinstance(v.type, ScalarType) else UNKNOWN
    if self.watch_signs and isinstance(v.type, ScalarType) and isinstance(v.type.dtype, DType) and v.type.dtype.is_int:
      self.signs[v.id] = self.signs.get(v.id, True) and x is not UNKNOWN and not np.any(np.asarray(x) < 0)

  # ------------------------------------------------------------ blocks
  def block(self, blk: ir.Block, must, may):
    """Run `blk` for the programs in `may`; the values of its Yield."""
    for o in blk.ops:
      self.budget -= _cost(o)
      if isinstance(o, Yield):
        return [self.value(v) for v in o.values]
      if isinstance(o, For):
        self.overflows.track(self, o, must, (o.start, o.stop, o.step))
        self.loop(o, must, may)
      elif isinstance(o, If):
        self.branch(o, must, may)
      elif o.regions:
        self.opaque(o, must, may)
      else:
        self.effects(o, must, may)
        if isinstance(o, ScalarRead) and may.any():   # pure, yet its index may leave the input
          w = Window(o.ref, tuple(self.value(i.start) for i in o.index), (1,) * len(o.index), False)
          self.visit(Access(o, o.ref, ir.Access.REG_READ, w, must, may, self.exact))
        rule = _RULES.get(type(o))
        out = rule(self, o) if rule is not None and o.results else None
        if isinstance(o, MultipleOf) and out is not UNKNOWN:
          self.check_promise(o, out, must)
        for r in o.results:
          self.set(r, out)
        self.overflows.track(self, o, must)
        if isinstance(o, Compare) and not isinstance(o.result.type, ScalarType):
          grid_affine.see(self, o)       # (an index grid's comparison: lowering/index_compare.py)
    return []

  def branch(self, o: If, must, may):
    c = self.value(o.cond)
    if c is not UNKNOWN:        # blocks a condition known here keeps some programs out of (MG602's hint)
      for blk, off in ((o.then_block, may & ~c), (o.else_block, may & c)):
        if off.any():
          self.decided[id(blk)] = self.decided.get(id(blk), False) | off
          p = int(np.flatnonzero(off)[0])        # (and the trip of the loops around it, where there are some)
          if self.exact and all(isinstance(v, np.ndarray) for _, v in self.trips):
            self.decided_trip.setdefault(id(blk), ", ".join(f"{iv.name} = {v[p]}" for iv, v in self.trips if iv.name))
    sides = []
    for blk, on in ((o.then_block, c), (o.else_block, None if c is UNKNOWN else ~c)):
      m = must & on if on is not None else np.zeros_like(must)
      y = may & on if on is not None else may
      sides.append(self.block(blk, m, y) if y.any() else [UNKNOWN] * len(o.results))
    for r, a, b in zip(o.results, *sides):
      if c is not UNKNOWN and a is not UNKNOWN and b is not UNKNOWN:
        self.set(r, np.where(c, a, b))
      else:
        self.set(r, a if a is not UNKNOWN and b is not UNKNOWN and np.array_equal(a, b) else UNKNOWN)

  def loop(self, o: For, must, may):
    iv, *args = o.body.args
    start, stop, step = (self.value(x) for x in (o.start, o.stop, o.step))
    inits = [self.value(v) for v in o.inits]
    trips = None
    if not any(x is UNKNOWN for x in (start, stop, step)) and np.all(step[may] > 0):
      n = np.maximum(0, -((start - stop) // np.maximum(step, 1)))
      trips = int(n[may].max()) if may.any() else 0
    size = sum(_cost(x) for x in ir.walk(o.body))
    if trips is not None and trips * size <= self.budget:
      carried = inits
      for k in range(trips):
        on = k < n
        self.env[iv.id] = start + k * step
        for a, v in zip(args, carried):
          self.set(a, v)
        self.trips.append((iv, self.env[iv.id]))
        try:
          ys = self.block(o.body, must & on, may & on)
        finally:
          self.trips.pop()
        carried = [UNKNOWN if y is UNKNOWN or c is UNKNOWN else np.where(on, y, c)
                   for y, c in zip(ys, carried)]
      for r, v in zip(o.results, carried):
        self.set(r, v)
      return
    # Summarise: the first iteration exactly (when it runs), then every iteration at once.
    runs = n > 0 if trips is not None else None        # programs that run a first iteration
    self.env[iv.id] = start
    for a, v in zip(args, inits):
      self.set(a, v)
    self.trips.append((iv, start))
    try:
      self.block(o.body, must & runs if runs is not None else np.zeros_like(must),
                 may & runs if runs is not None else may)
    finally:
      self.trips.pop()
    saved, self.exact = self.exact, False
    self.env[iv.id] = UNKNOWN
    for a in args:
      self.set(a, UNKNOWN)
    if trips is not None:             # the counter runs from start to the last trip's value
      last = start + np.maximum(n - 1, 0) * step
      self.spans[iv.id] = (np.minimum(start, last), np.maximum(start, last))
    try:
      self.block(o.body, np.zeros_like(must), may)
    finally:
      self.spans.pop(iv.id, None)
    self.exact = saved
    if trips is not None and trips > 1 and size <= self.budget:
      # and the last iteration exactly, with what the loop carries unknown: an access whose window
      # follows from the index and the program ids (x[i + 1] at the last i) is proven there too
      last = start + np.maximum(n - 1, 0) * step
      self.env[iv.id] = last
      for a in args:
        self.set(a, UNKNOWN)
      self.trips.append((iv, last))
      try:
        self.block(o.body, must & (n > 1), may & (n > 1))
      finally:
        self.trips.pop()
    for r in o.results:
      self.set(r, UNKNOWN)

  def opaque(self, o, must, may):
    """A region op without a rule here (a `while`): its regions may run any number of times,
    with unknown block arguments; summarised as a loop of unknown trip count. A `while`'s condition
    runs at least once, with the carries' first values: that first test is walked as certain, so a
    spin-wait's read of what other programs write or update (`while flags[i - 1] == 0:`) is checked."""
    if isinstance(o, While) and len(o.before.args) == len(o.inits):
      inits = [self.value(v) for v in o.inits]
      for a, v in zip(o.before.args, inits):
        self.set(a, v)
      self.block(o.before, must, may)
      test = o.before.ops[-1] if o.before.ops else None
      c = self.value(test.cond) if isinstance(test, Condition) else UNKNOWN
      if c is not UNKNOWN and (must & c).any():    # the programs whose first test holds run a first trip
        for a, v in zip(o.body.args, [self.value(v) for v in test.values]):
          self.set(a, v)
        self.block(o.body, must & c, may & c)
    for exact in (True, False):
      saved, self.exact = self.exact, exact and self.exact
      for r in o.regions:
        blk = getattr(o, r)
        for a in blk.args:
          self.set(a, UNKNOWN)
        self.block(blk, np.zeros_like(must), may)
      self.exact = saved
    for r in o.results:
      self.set(r, UNKNOWN)

  # ------------------------------------------------------------ memory
  def window(self, ref: ir.Value) -> Window:
    d = self.defs.get(ref.id)
    index = None
    if isinstance(d, View):
      index, ref = d.index, d.ref
      d = self.defs.get(ref.id)
    remote = isinstance(d, ClusterRef)
    if remote:
      ref, index = d.ref, None      # a peer's buffer: the whole window, over-approximated
      d = self.defs.get(ref.id)
      if isinstance(d, View):
        ref = d.ref
    shape = ref.type.shape
    if index is None:
      starts = tuple(UNKNOWN if remote else self.value(0) for _ in shape)
      return Window(ref, starts, tuple(shape), remote)
    starts = tuple(self.value(i.start) for i in index)
    spans = ()
    if self.spans and any(x is UNKNOWN for x in starts):
      from .loop_spans import span
      spans = tuple(span(self, i.start, self.spans) if x is UNKNOWN else None for i, x in zip(index, starts))
    return Window(ref, starts, tuple(i.size for i in index), remote, spans)

  def effects(self, o, must, may):
    # A gather reads the elements its index tensors name (data): its window is only where they may be.
    exact = self.exact and not isinstance(o, Gather)
    for ref, kind in ir.traits_of(o).effects(o):
      if ref is not None and isinstance(ref.type, RefType) and may.any():
        self.visit(Access(o, ref, kind, self.window(ref), must, may, exact))


def _cost(o) -> int:
  """What evaluating `o` costs against the budget: 1, plus ACCESS_COST per memory access."""
  if o.regions:
    return 1
  return 1 + ACCESS_COST * sum(1 for ref, _ in ir.traits_of(o).effects(o)
                               if ref is not None and isinstance(ref.type, RefType))


# ---------------------------------------------------------------- scalar rules
def _int_operands(ev, o, *xs, dtype=None):
  """The operands' values; a Python int as the GPU holds it in `dtype`, the op's (-1 meeting a
  uint32 is 0xFFFFFFFF there: ml.minimum(u, -1) is u, u > -1 is False)."""
  vals = [ev.value(x) if isinstance(x, ir.Value) or dtype is None or isinstance(x, bool) else
          _wrap(ev.value(x), dtype) if isinstance(x, int) else UNKNOWN for x in xs]
  return None if any(v is UNKNOWN for v in vals) else vals


_DIVISIONS = (BinOp.FLOORDIV, BinOp.MOD, BinOp.FMOD)


def _binary(ev, o):
  d = o.result.type.dtype
  if not (d.is_int or d == DType.bool_):
    return UNKNOWN
  vals = _int_operands(ev, o, o.lhs, o.rhs, dtype=d)
  if vals is None:
    if o.kind in _DIVISIONS and isinstance(o.rhs, ir.Value):     # (a dividend of data: the divisor alone)
      b = _int_operands(ev, o, o.rhs, dtype=d)
      ev.divisors[id(o)] = (o, ev.divisors.get(id(o), (o, True))[1] and b is not None and not np.any(b[0] == 0))
    return UNKNOWN
  a, b = vals
  if o.kind in _DIVISIONS and isinstance(o.rhs, ir.Value):
    ev.divisors[id(o)] = (o, ev.divisors.get(id(o), (o, True))[1] and not np.any(b == 0))
  with np.errstate(all="ignore"):
    if o.kind in (BinOp.FLOORDIV, BinOp.MOD):
      if np.any(b == 0):
        return UNKNOWN
      r = np.floor_divide(a, b) if o.kind == BinOp.FLOORDIV else np.mod(a, b)
    elif o.kind in (BinOp.SHL, BinOp.SHR):
      if np.any((b < 0) | (b >= d.bits)):
        return UNKNOWN
      r = np.left_shift(a, b) if o.kind == BinOp.SHL else np.right_shift(a, b)
    elif o.kind in _BIN:
      r = _BIN[o.kind](a, b)
    else:
      return UNKNOWN
  return _wrap(np.asarray(r, np.int64 if d != DType.bool_ else bool), d)


def _compare(ev, o):
  d = next((x.type.dtype for x in (o.lhs, o.rhs) if isinstance(x, ir.Value)), DType.i32)
  if not (d.is_int or d == DType.bool_):
    return UNKNOWN
  vals = _int_operands(ev, o, o.lhs, o.rhs, dtype=d)
  return UNKNOWN if vals is None else _CMP[o.kind](*vals)


def _unary(ev, o):
  x, d = ev.value(o.x), o.result.type.dtype
  if x is UNKNOWN:
    return UNKNOWN
  if o.kind == UnOp.NOT:
    return ~x if x.dtype == bool else UNKNOWN
  if o.kind == UnOp.NEG and d.is_int:
    return _wrap(-x, d)
  if o.kind == UnOp.ABS and d.is_int:
    return _wrap(np.abs(x), d)
  return UNKNOWN


def _cast(ev, o):
  x, d = ev.value(o.x), o.result.type.dtype
  if x is UNKNOWN or o.bitcast or not (o.x.type.dtype.is_int or o.x.type.dtype == DType.bool_):
    return UNKNOWN
  return _wrap(x.astype(np.int64), d)


def _where(ev, o):
  d = o.result.type.dtype
  if not (d.is_int or d == DType.bool_):
    return UNKNOWN
  cond = _int_operands(ev, o, o.cond)
  vals = _int_operands(ev, o, o.on_true, o.on_false, dtype=d)
  return UNKNOWN if cond is None or vals is None else np.where(*cond, *vals)


def _constant(ev, o):
  v = o.value
  return ev.value(v) if isinstance(v, (bool, int)) else UNKNOWN


_RULES = {
    ProgramId: lambda ev, o: ev.pid[o.axis].copy(),
    NumPrograms: lambda ev, o: np.full(ev.P, ev.kernel.grid[o.axis], np.int64),
    Constant: _constant,
    Binary: _binary,
    Compare: _compare,
    Unary: _unary,
    Cast: _cast,
    Where: _where,
    MultipleOf: lambda ev, o: ev.value(o.x),
    PositiveStep: lambda ev, o: ev.value(o.x),
}


# ---------------------------------------------------------------- divisibility
def known_multiple(x, defs: dict, loops: dict | None = None, depth: int = 0, memo: dict | None = None) -> int:
  """A number every value of `x` is a multiple of (0: x is always 0); 1 when nothing is known.

  `defs` maps value ids to their ops; `loops` maps a loop's counter id to its For. `memo` holds what one call
  found of each value at each depth (a static loop's binary search, `lo, hi = ml.where(go, mid + 1, lo),
  ml.where(go, hi, mid)`, meets each step's values several times: walked as a tree, a window at `lo` took time
  exponential in the steps).
  """
  if not isinstance(x, ir.Value) or isinstance(x, bool):
    return _known_multiple(x, defs, loops, depth, {} if memo is None else memo)
  memo = {} if memo is None else memo
  key = (x.id, depth)
  if key not in memo:
    memo[key] = _known_multiple(x, defs, loops, depth, memo)
  return memo[key]


def _known_multiple(x, defs, loops, depth, memo) -> int:
  if isinstance(x, bool):
    return 1
  if isinstance(x, int):
    return abs(x)
  if not isinstance(x, ir.Value) or depth > 64:
    return 1
  d = getattr(x.type, "dtype", None)
  if isinstance(d, DType) and d.is_float:
    # a float has no multiple: `(f[0] * 8).astype(jnp.int32)` is 3 for f[0] = 0.375 (its product was
    # taken for a multiple of 8, and a window at it moved 8-byte vectors and passed the TMA check)
    return 1
  rec = lambda y: known_multiple(y, defs, loops, depth + 1, memo)
  if loops and x.id in loops:
    f = loops[x.id]
    if isinstance(f, int):                # a loop carry, assumed while its updates are checked
      return f
    if isinstance(f, _Carry):
      return _carried_multiple(f, defs, loops, depth)
    return math.gcd(rec(f.start), rec(f.step))
  o = defs.get(x.id)
  if isinstance(o, MultipleOf):
    return math.lcm(o.multiple, rec(o.x))
  if isinstance(o, Constant):
    return rec(o.value)
  if isinstance(o, Cast) and not o.bitcast:
    return rec(o.x)
  if isinstance(o, Where):                # either value: `ml.where(c, i * 64, 0)`
    return math.gcd(rec(o.on_true), rec(o.on_false))
  if isinstance(o, If):                   # what either branch of a run-time `if` assigns
    k = next(k for k, r in enumerate(o.results) if r.id == x.id)
    ends = [blk.ops[-1] if blk.ops else None for blk in (o.then_block, o.else_block)]
    if not all(isinstance(e, Yield) and len(e.values) > k for e in ends):
      return 1
    return math.gcd(*(rec(e.values[k]) for e in ends))
  if isinstance(o, Unary) and o.kind in (UnOp.NEG, UnOp.ABS):
    return rec(o.x)
  if not isinstance(o, Binary):
    return 1
  a, b = rec(o.lhs), rec(o.rhs)
  k = o.kind
  m = defs.get(o.rhs.id) if isinstance(o.rhs, ir.Value) else None
  if (k == BinOp.SUB and isinstance(m, Binary) and m.kind == BinOp.MOD and isinstance(m.lhs, ir.Value)
      and isinstance(o.lhs, ir.Value) and m.lhs.id == o.lhs.id
      and isinstance(m.rhs, int) and m.rhs):
    return math.lcm(abs(m.rhs), math.gcd(a, b))   # `s - s % 8`: s rounded toward a multiple of 8
  if k in (BinOp.ADD, BinOp.SUB, BinOp.MAX, BinOp.MIN):
    return math.gcd(a, b)
  if k == BinOp.AND:                      # `s & ~63`: the low zero bits of either operand stay zero
    return 0 if 0 in (a, b) else max(a & -a, b & -b)
  if k == BinOp.SHR and isinstance(o.rhs, int) and 0 <= o.rhs < 32 and a % (1 << o.rhs) == 0:
    return a >> o.rhs
  if k == BinOp.MUL:
    return a * b
  if k == BinOp.MOD and isinstance(o.rhs, int) and o.rhs:
    return math.gcd(a, abs(o.rhs))
  if k == BinOp.FLOORDIV and isinstance(o.rhs, int) and o.rhs > 0 and a % o.rhs == 0:
    return a // o.rhs
  if k == BinOp.SHL and isinstance(o.rhs, int) and 0 <= o.rhs < 32:
    return a << o.rhs
  return 1


@dataclasses.dataclass(frozen=True)
class _Carry:
  """A value a loop carries: its names in the loop's blocks and after it (`ids`), its value before the
  loop (`init`) and what each trip hands on (`updates`: a for loop's yield; a while loop's yield and
  the values its condition forwards)."""
  ids: tuple
  init: object
  updates: tuple


def _carried_multiple(c: _Carry, defs, loops, depth) -> int:
  """A number every value of the carry is a multiple of: the init's, then the largest divisor of it that
  each update keeps, assuming the carry is a multiple of it (`start = 0`, then `start += 64` in a while
  loop: 64). The divisor only shrinks, so this ends."""
  m = known_multiple(c.init, defs, loops, depth + 1)
  for _ in range(8):
    assumed = {**loops, **{i: m for i in c.ids}}
    new = m
    for u in c.updates:
      new = math.gcd(new, known_multiple(u, defs, assumed, depth + 1))
    if new == m:
      return m
    m = new
  return 1


def loop_counters(block: ir.Block) -> dict:
  """Loop counter value id -> its For, for every loop under `block`; and each value a loop carries (in
  the loop's blocks and after it) -> its _Carry, for the divisibility of carried window starts."""
  out = {}
  for o in ir.walk(block):
    if isinstance(o, For):
      out[o.body.args[0].id] = o
      ys = o.body.ops[-1].values if o.body.ops and isinstance(o.body.ops[-1], Yield) else None
      for k, init in enumerate(o.inits):
        if ys is not None:
          c = _Carry((o.body.args[k + 1].id, o.results[k].id), init, (ys[k],))
          out.update({i: c for i in c.ids})
    elif isinstance(o, While) and o.before.ops and isinstance(o.before.ops[-1], Condition) and o.body.ops and (
        isinstance(o.body.ops[-1], Yield)):
      fwd, ys = o.before.ops[-1].values, o.body.ops[-1].values
      for k, init in enumerate(o.inits):
        c = _Carry((o.before.args[k].id, o.body.args[k].id, o.results[k].id), init, (ys[k], fwd[k]))
        out.update({i: c for i in c.ids})
  return out
