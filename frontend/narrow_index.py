"""Index arithmetic in an 8- or 16-bit integer type that can wrap, found while compiling.

An index read from a uint8 or int16 input (`s[0]`) is widened to int32 where it is used, but the
arithmetic on it before that is computed in its own dtype, as jnp computes it: `s[0] * 64` of a
uint8 `s` is 64 at s = 5 (320 wrapped past 255), so `x.at[ml.ds(s[0] * 64, 64)]` reads at 64. jnp
would give the same, yet in an index it is almost surely a bug, and the values are known only at
run time. So a sum, difference, product, left shift or negation in an integer dtype of fewer than 32
bits that can leave its dtype for some value of its operands (their dtype's range, narrowed by
constants, `% n`, `& m`, `>> k`, casts), and whose result reaches an index (a window start, an
element read or write, a gather's or scatter's indices, a loop's bounds or a while loop's condition,
a mask), is an error at
the arithmetic, whose hint widens the operand first. The same arithmetic feeding data only (a
value stored, a hash) is jnp's and left alone.

Values a loop carries and an if's results are followed through their loop or branches, narrowed by a
while loop's condition and an if's test (frontend/narrow_loops.py): `i = i + 100` under `while i < 200:`
of a uint8 i is reported, `i += 1` under `while i < n[0]` of a uint8 n is not.

A signed value nothing more is known of (read from memory) is taken as non-negative: an index or a
length, which near its type's minimum would index nothing. So `n[0] - 1` of an int16 `n` (a count-down
loop's start) is not reported, while `n[0] + 1` and `n[0] * 64` are, and `s[0] - 1` of a uint8 `s`
(255 at s = 0) is.
"""
from __future__ import annotations

from . import errors as E
from . import ir
from .dtypes import DType
from . import narrow_loops as loops
from .ops.access import ScalarRead
from .ops.control import Condition, For
from .ops.elementwise import BinOp, Binary, Cast, Constant, UnOp, Unary, Where
from .overflow import _index_operands, _integral, _mixes
from .types import resolve

_WRAPS = (BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.SHL)
_BOUNDS = ("For", "Condition", "MaskedLoad", "MaskedStore")      # (uses that compare it: "as a bound")
_USE = {"View": "the window", "ScalarRead": "the element read", "For": "the loop's bounds", "Condition": "the while loop's condition",
        "MaskedLoad": "the mask", "MaskedStore": "the mask", "Gather": "the indices", "ScatterUpdate": "the indices"}


def _narrow(v) -> DType | None:
  d = resolve(v.type.dtype) if isinstance(v, ir.Value) else None
  return d if isinstance(d, DType) and d.is_int and d.bits < 32 else None


def _range(ranges, x):
  """(lo, hi) of an operand: a Python int exactly, a value by what is known of it, else its dtype's."""
  if isinstance(x, bool):
    return (int(x), int(x))
  if isinstance(x, int):
    return (x, x)
  if isinstance(x, ir.Value):
    if x.id in ranges:
      return ranges[x.id]
    d = resolve(x.type.dtype)
    if isinstance(d, DType) and d.is_int and d.is_signed and d.bits < 32:
      return (0, d.int_range[1])       # an index or a length: n[0] - 1 of an int16 n does not wrap (see above)
    if isinstance(d, DType) and (d.is_int or d == DType.bool_):
      return d.int_range if d.is_int else (0, 1)
  return None


def _binary_range(kind, a, b, bits=32):
  (al, ah), (bl, bh) = a, b
  if kind == BinOp.ADD:
    return (al + bl, ah + bh)
  if kind == BinOp.SUB:
    return (al - bh, ah - bl)
  if kind == BinOp.MUL:
    p = (al * bl, al * bh, ah * bl, ah * bh)
    return (min(p), max(p))
  if kind == BinOp.SHL and 0 <= bl:
    bl, bh = min(bl, bits), min(bh, bits)      # (a shift by the width or more is 0 in jnp: past any wrap)
    p = (al << bl, al << bh, ah << bl, ah << bh)
    return (min(p), max(p))
  if kind == BinOp.MOD and bl > 0:
    return (0, bh - 1)
  if kind == BinOp.AND and (al >= 0 or bl >= 0):
    return (0, min(h for l_, h in (a, b) if l_ >= 0))
  if kind == BinOp.SHR and 0 <= bl and bh < 32:
    return (min(al >> bl, al >> bh), max(ah >> bl, ah >> bh))
  if kind == BinOp.FLOORDIV and bh > 0 and bl >= 0:
    bl = max(bl, 1)                              # (by 0: jnp's -1 or -2, no index: interpret mode's MG952)
    q = (al // bl, al // bh, ah // bl, ah // bh)
    return (min(q), max(q))
  if kind in (BinOp.MIN, BinOp.MAX):
    f = min if kind == BinOp.MIN else max
    return (f(al, bl), f(ah, bh))
  return None


def _src(o) -> str | None:
  loc = getattr(o, "loc", None)
  if loc is None or loc.end_lineno != loc.lineno or loc.end_col_offset is None or not loc.source_line:
    return None
  return loc.source_line[loc.col_offset:loc.end_col_offset]


def check_narrow_indices(kernel: ir.Kernel) -> list:
  """The errors for 8- and 16-bit index arithmetic that can wrap (see the module's docstring)."""
  w = _Walk(kernel)
  w.block(kernel.body)
  return w.errors


class _Walk:
  """The ranges of integer values in program order, loops to a fixpoint (frontend/narrow_loops.py)."""

  def __init__(self, kernel):
    self.defs = ir.def_table(kernel.body)
    self.ranges: dict = {}          # value id -> (lo, hi) known of an integer value
    self.wraps: dict = {}           # value id -> (op that may wrap, (lo, hi) of its exact result, dtype)
    self.errors, self.reported = [], set()
    self.quiet = 0                  # > 0 while a loop's body is evaluated to find its carries' ranges
    self.updates: dict = {}         # id of a value a loop's body yields -> (the carry it becomes, its start)
    self.narrowed_reads: dict = {}  # input element (read_key) -> its range under the branch being walked

  def block(self, b):
    for o in b.ops:
      if not loops.region(self, o):
        self.op(o)
        for r in o.regions:
          self.block(getattr(o, r))

  def op(self, o):
    ranges, wraps = self.ranges, self.wraps
    ops = [x for x in o.operands() if isinstance(x, ir.Value)]
    src = self._select_wraps(o) if isinstance(o, Where) else next((wraps[v.id] for v in ops if v.id in wraps), None)
    if src is not None:
      used = _used(o)
      at = src if used is None else next((wraps[v.id] for v in used if v.id in wraps), None)
      if at is not None and not self.quiet and id(at[0]) not in self.reported:
        self.reported.add(id(at[0]))
        self.errors.append(_error(at, o, self.defs, self.updates))
      if not _mixes(o):
        for r in o.results:
          if _integral(r.type.dtype):
            wraps[r.id] = src
      return
    if not o.results:
      return
    r = o.results[0]
    d = resolve(r.type.dtype)
    if not (isinstance(d, DType) and d.is_int):
      return
    rng = None
    if isinstance(o, Constant) and isinstance(o.value, (int, bool)):
      rng = (int(o.value), int(o.value))
    elif isinstance(o, ScalarRead) and self.read_key(r) in self.narrowed_reads:
      rng = self.narrowed_reads[self.read_key(r)]     # (`if s[0] < 10: ... s[0] + 1`: a read again in the branch)
    elif isinstance(o, Cast) and not o.bitcast:
      rng = _range(ranges, o.x)
    elif isinstance(o, Unary) and o.kind == UnOp.NEG:
      a = _range(ranges, o.x)
      rng = None if a is None else (-a[1], -a[0])
    elif isinstance(o, Binary):
      a, b = _range(ranges, o.lhs), _range(ranges, o.rhs)
      rng = None if a is None or b is None else (
          self._quotient_range(o) or _binary_range(o.kind, a, b, self._width(o, d)))
    if rng is None:
      return
    lo, hi = d.int_range
    if lo <= rng[0] and rng[1] <= hi:
      ranges[r.id] = rng
    elif d.bits < 32:
      at = _wrapping(o) or (_wrapping(self.defs.get(o.x.id)) if isinstance(o, Cast) and _same_span(
          o, self.defs.get(o.x.id)) else None)
      if at is not None:          # (else a cast that truncates on purpose: its dtype's range)
        wraps[r.id] = (at, rng, d)

  def _select_wraps(self, o):
    """The wrap a select's result takes: of a side its condition does not guard (`ml.where(h == 255, 0, h + 1)`
    picks h + 1 only where h is at most 254, where it does not wrap)."""
    if isinstance(o.cond, ir.Value) and o.cond.id in self.wraps:
      return self.wraps[o.cond.id]
    for side, negate in ((o.on_true, False), (o.on_false, True)):
      if not (isinstance(side, ir.Value) and side.id in self.wraps):
        continue
      src = self.wraps[side.id]
      facts = loops._facts(self, o.cond, negate)
      if not (facts and self._fits_under(src, facts)):
        return src
    return None

  def _fits_under(self, src, facts) -> bool:
    """The wrapping arithmetic of `src` stays inside its dtype with its operands narrowed by `facts`."""
    op, _, d = src
    if not isinstance(op, (Binary, Unary)) or (isinstance(op, Unary) and op.kind != UnOp.NEG):
      return False
    xs = (op.x,) if isinstance(op, Unary) else (op.lhs, op.rhs)
    rs = []
    for x in xs:
      u = self._source(x)
      r = (loops._narrowed(facts, u, _range(self.ranges, u), self._same) if isinstance(u, ir.Value)
           else _range(self.ranges, u))
      if r is None:
        return False
      rs.append(r)
    rng = (-rs[0][1], -rs[0][0]) if isinstance(op, Unary) else _binary_range(op.kind, *rs, self._width(op, d))
    return rng is not None and d.int_range[0] <= rng[0] and rng[1] <= d.int_range[1]

  def _quotient_range(self, o):
    """The range of `a // b * b` (0..a: at most a), or of ml.cdiv(a, b)'s last sum (a / b's ceiling), of
    a >= 0 and b >= 0, which interval arithmetic on `a // b` and `b` alone puts at 255 * 255 of uint8 a and b."""
    if o.kind not in (BinOp.MUL, BinOp.ADD):
      return None
    ops = [self._source(x) for x in (o.lhs, o.rhs)]
    for i, x in enumerate(ops):
      div = self.defs.get(x.id) if isinstance(x, ir.Value) else None
      if not (isinstance(div, Binary) and div.kind == BinOp.FLOORDIV):
        continue
      a, b = _range(self.ranges, div.lhs), _range(self.ranges, div.rhs)
      if a is None or b is None or a[0] < 0 or b[0] < 0 or b[1] < 1:
        return None
      other = ops[1 - i]
      if o.kind == BinOp.MUL and self._same(other, self._source(div.rhs)):
        return (0, a[1])
      if o.kind == BinOp.ADD and o.via[:1] == ("ml.cdiv",):
        return (-(-a[0] // b[1]), -(-a[1] // max(b[0], 1)))
    return None

  def _same(self, x, y) -> bool:
    """One value, or one element of an input read twice (`n[0] // n[1] * n[1]`: inputs never change)."""
    if not (isinstance(x, ir.Value) and isinstance(y, ir.Value)):
      return False
    return x.id == y.id or self.read_key(x) is not None and self.read_key(x) == self.read_key(y)

  def read_key(self, x):
    """The input element `x` was read from (a ScalarRead's ref and static or value indices), or None."""
    r = self.defs.get(x.id) if isinstance(x, ir.Value) else None
    if not isinstance(r, ScalarRead):
      return None
    return (r.ref.id, tuple((i.start.id if isinstance(i.start, ir.Value) else i.start) for i in r.index))

  def _source(self, x):
    """`x` before the casts that keep its value (8-bit arithmetic is computed in int32 and cast back)."""
    while isinstance(x, ir.Value) and isinstance(c := self.defs.get(x.id), Cast) and not c.bitcast:
      r, d = _range(self.ranges, c.x), resolve(x.type.dtype)
      if r is None or not (isinstance(d, DType) and d.is_int and d.int_range[0] <= r[0] and r[1] <= d.int_range[1]):
        break
      x = c.x
    return x

  def _width(self, o, d) -> int:
    """The bits of the integer type `o` computes in as the user wrote it: an 8-bit operand's, where the
    compiler widened it to int32 for the arithmetic (`1 << s[0]` of a uint8 s is uint8 arithmetic)."""
    for x in (o.lhs, o.rhs):
      u = _unwidened(x, o, self.defs)
      if u is not x:
        return _narrow(u).bits
    return d.bits


def _used(o):
  """The operands of `o` that say which elements it touches or how often a loop runs (None: all)."""
  if isinstance(o, Condition):
    return (o.cond,)
  if isinstance(o, For):
    return tuple(x for x in (o.start, o.stop, o.step) if isinstance(x, ir.Value))
  return _index_operands(o)


def _wrapping(o):
  """`o` where it is a sum, difference, product, left shift or negation (which wrap past their dtype)."""
  return o if (isinstance(o, Binary) and o.kind in _WRAPS) or (isinstance(o, Unary) and o.kind == UnOp.NEG) else None


def _same_span(a, b) -> bool:
  """Two ops of one expression: the cast back to 8 bits of 8-bit arithmetic computed in int32."""
  la, lb = getattr(a, "loc", None), getattr(b, "loc", None)
  return la is not None and lb is not None and (la.lineno, la.col_offset, la.end_col_offset) == (
      lb.lineno, lb.col_offset, lb.end_col_offset)


def _error(src, use, defs, updates=None):
  op, (lo, hi), d = src
  text = _src(op) or "this arithmetic"
  lo_d, hi_d = d.int_range
  what = _USE.get(type(use).__name__, "the index")
  past = hi if hi > hi_d else lo
  if isinstance(op, Unary):
    fix = f"-{_operand_text(op.x, op, defs)}.astype(jnp.int32)"
  else:
    sym = op.kind.value
    a, b = op.lhs, op.rhs
    wide = a if isinstance(a, ir.Value) and _narrow(_unwidened(a, op, defs)) else b
    parts = [f"{_operand_text(x, op, defs)}.astype(jnp.int32)" if x is wide else _operand_text(x, op, defs)
             for x in (a, b)]
    fix = f"{parts[0]} {sym} {parts[1]}"
  name = str(d)
  plural = what in ("the indices", "the loop's bounds")
  carry = _carry_update(op, defs, updates or {})
  if carry is not None:         # i = i + 7 of a counter a loop carries: widened there, the carry would change type
    arg, start = carry
    first = _src(defs.get(start.id)) if isinstance(start, ir.Value) else None
    first = f"{first if _atom(first) else f'({first})'}" if first else arg.name
    fix = (f"widen {arg.name} where it starts, before the loop: {arg.name} = {first}.astype(jnp.int32) (a value a loop"
           f" carries keeps the type it enters with; an index in {name} is widened to int32 only where it is used,"
           f" after the arithmetic)")
    return E.KernelTypeError(_message(text, name, lo_d, hi_d, past, what, use, plural), op.loc, hint=fix)
  return E.KernelTypeError(
      _message(text, name, lo_d, hi_d, past, what, use, plural), op.loc,
      hint=f"widen it before the arithmetic: {fix} (an index in {name} is widened to int32 only where it is"
           f" used, after the arithmetic)")


def _message(text, name, lo_d, hi_d, past, what, use, plural) -> str:
  return (f"{text} is computed in {name} ({lo_d}..{hi_d}), where it can reach {past} and wrap (as jnp's {name}"
          f" arithmetic does), and {what} at line {use.loc.lineno} use{'' if plural else 's'} it as"
          f" {'a bound' if type(use).__name__ in _BOUNDS else 'an index'}")


def _carry_update(op, defs, updates):
  """(the carry, its start) where `op`'s result (or its cast back to 8 bits) is what a loop's body yields
  for a named carry (`i = i + 7`), else None."""
  r = op.results[0]
  for yid, (arg, start) in updates.items():
    d = defs.get(yid)
    if (yid == r.id or isinstance(d, Cast) and isinstance(d.x, ir.Value) and d.x.id == r.id) and arg.name and (
        arg.name.isidentifier()):
      return arg, start
  return None


def _unwidened(x, op, defs):
  """The 8-bit value an operand of `op` widened to int32 for its arithmetic was (the compiler's cast)."""
  o = defs.get(x.id) if isinstance(x, ir.Value) else None
  return o.x if isinstance(o, Cast) and _narrow(o.x) and _same_span(o, op) else x


def _operand_text(x, op, defs) -> str:
  x = _unwidened(x, op, defs)
  if not isinstance(x, ir.Value):
    return repr(x)
  whole = _src(op) or ""
  t = next((c for c in (_src(defs.get(x.id)), x.name) if c and c in whole), None) or x.name or "it"
  return t if _atom(t) else f"({t})"


def _atom(t: str) -> bool:
  """`t` needs no parentheses before `.astype(...)` (a name, `s[0]`, `f(x)`, `x.y`; not `n // d`)."""
  import ast
  try:
    node = ast.parse(t, mode="eval").body
  except SyntaxError:
    return False
  return isinstance(node, (ast.Name, ast.Subscript, ast.Call, ast.Attribute, ast.Constant))    # (-1 is a UnaryOp)
