"""int32 index arithmetic that wraps, found while compiling.

The grid evaluation (frontend/absint.py) computes program ids, loop counters and the integer
arithmetic on them as the GPU does, so a sum, difference or product of int32 scalars past
2**31 - 1 wraps there, as it would on the GPU. Where such a value reaches an index (a window
start, an element read, a loop bound) or the index vectors and masks built from it (`idx < end`),
the kernel would touch other elements than its arithmetic says: the end of the last tile of an
array of nearly 2**31 elements, `(i + 1) * 1024`, wraps negative and its mask keeps nothing. Such
an op is reported at the arithmetic, once, for the first program that certainly runs it; a
wrapped value that only feeds data (a hash, a value stored) is left alone.
"""
from __future__ import annotations

import numpy as np

from . import errors as E
from .dtypes import DType
from .ops.access import MaskedLoad, MaskedStore, ScalarRead
from .ops.control import For
from .ops.elementwise import BinOp, Binary
from .ops.gather import Gather, ScatterUpdate
from .ops.memory import View
from .overflow_ranges import track_tensor
from .types import ScalarType, TensorType, resolve

def _shl(a, b):
  """a << b exactly (a times 2**b); None where some shift is outside 0..31 (not a wrap: lax's shift
  past the width, which the grid evaluation does not know either)."""
  return None if np.any((b < 0) | (b > 31)) else np.left_shift(a, b)


_EXACT = {BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply, BinOp.SHL: _shl}


class Overflows:
  """The int32 scalars that wrapped in some program, and the errors for those an index uses."""

  def __init__(self):
    self.wrapped: dict[int, tuple] = {}    # value id -> (op that wrapped, program index, exact value)
    self.errors: list = []
    self._reported: set = set()
    self.ranges: dict = {}                 # int32 index tensor id -> its Sep (frontend/overflow_ranges.py)

  def track(self, ev, o, must, operands=None):
    """After the grid evaluation ran op `o` for the programs `must` certainly run: note a wrap
    it makes, carry one its operands hold to its integer results, report one an index uses."""
    ops = o.operands() if operands is None else [x for x in operands if hasattr(x, "id")]
    src = next((self.wrapped[v.id] for v in ops if v.id in self.wrapped), None)
    if src is not None:
      used = _index_operands(o)
      at = src if used is None else next((self.wrapped[v.id] for v in used if v.id in self.wrapped), None)
      if at is not None:
        self._report(ev, at, o)
      if _mixes(o):
        return
      for r in o.results:                # the index vectors and masks made from it, too
        if _integral(r.type.dtype):
          self.wrapped[r.id] = src
      return
    wrap = track_tensor(ev, self.ranges, o, must)
    if wrap is not None:
      self.wrapped[o.result.id] = (o, *wrap)
      return
    if not (isinstance(o, Binary) and o.kind in _EXACT and ev.exact and isinstance(o.result.type, ScalarType)
            and resolve(o.result.type.dtype) == DType.i32):
      return
    from .absint import _int_operands
    vals = _int_operands(ev, o, o.lhs, o.rhs, dtype=DType.i32)
    if vals is None:
      return
    exact = _EXACT[o.kind](*(np.asarray(v, np.int64) for v in vals))
    if exact is None:
      return
    lo, hi = DType.i32.int_range
    bad = must & ((exact < lo) | (exact > hi))
    if bad.any():
      p = int(np.argmax(bad))
      self.wrapped[o.result.id] = (o, p, int(exact[p]))

  def _report(self, ev, src, use):
    op, p, exact = src
    if id(op) in self._reported:
      return
    self._reported.add(id(op))
    loc = op.loc
    line = loc.source_line or ""
    one_line = loc.end_lineno == loc.lineno and loc.end_col_offset is not None
    text = line[loc.col_offset:loc.end_col_offset] if one_line else "this int32 arithmetic"
    wrapped = (exact + 2 ** 31) % 2 ** 32 - 2 ** 31
    tensor = isinstance(op.results[0].type, TensorType)
    what = ("the window" if isinstance(use, View) else "the element read" if isinstance(use, ScalarRead)
            else "the loop's bounds" if isinstance(use, For) else "the mask" if isinstance(use, (MaskedLoad, MaskedStore))
            else "the indices")
    self.errors.append(E.KernelTypeError(
        f"{text} overflows int32 in program {ev.program(p)}: {'an element of it' if tensor else 'it'} is {exact}"
        f" there, past int32's"
        f" {'2147483647' if exact > 0 else '-2147483648'}, so the GPU wraps it to {wrapped}, and {what} at"
        f" line {use.loc.lineno} use{'' if what == 'the indices' else 's'} it", loc,
        hint="rearrange it so that no intermediate value passes 2**31 - 1 (for a tile's end, ml.minimum((i + 1)"
             " * t, n), compare the offsets instead: i * t + ml.arange(t) < n), or compute in uint32"
             " (.astype(jnp.uint32), for values below 2**32)" if not tensor else
             "rearrange it so that no element passes 2**31 - 1: for the tail mask of a tile of t elements, compare"
             " the positions within the tile with what is left of the array, ml.arange(t) < n - i * t (no value"
             " past n); for indices, compute in uint32 ((i * t).astype(jnp.uint32) + ml.arange(t, dtype=jnp.uint32),"
             " for values below 2**32)"))


def _index_operands(o):
  """The operands of `o` that say which elements it touches: None where all of them do (a view's
  starts, an element read's indices, a loop's bounds); () for an op that touches no memory."""
  if isinstance(o, (View, ScalarRead, For)):
    return None
  if isinstance(o, (MaskedLoad, MaskedStore)):
    return (o.mask,)
  if isinstance(o, (Gather, ScatterUpdate)):
    return tuple(i for i in o.indices if hasattr(i, "id"))
  return ()


def _mixes(o) -> bool:
  """An integer tensor's bits mixed (`&`, `|`, `^`): a hash of wrapped positions (an LCG's
  `(idx * 1103515245 + 12345) & 0x7FFFFFFF`, a random keep mask), which wraps by design, not an index
  (`>>` alone, `(idx << 1) >> 1`, may still be one)."""
  return (isinstance(o, Binary) and o.kind in (BinOp.AND, BinOp.OR, BinOp.XOR)
          and isinstance(o.result.type, TensorType) and resolve(o.result.type.dtype) != DType.bool_)


def _integral(d) -> bool:
  d = resolve(d)
  return isinstance(d, DType) and (d.is_int or d == DType.bool_)



def sample_programs(grid) -> list:
  """The linear indices of the programs at a grid's corners and middle, where index arithmetic takes
  its extremes (the last tile of an array of nearly 2**31 elements in 256-element tiles is program
  8388607 of 8388608): what a grid too large to evaluate whole (frontend/absint.py's MAX_PROGRAMS)
  is checked in."""
  picks = [sorted({p for p in (0, 1, n // 2, n - 2, n - 1) if 0 <= p < n}) for n in grid]
  return [x + grid[0] * (y + grid[1] * z) for z in picks[2] for y in picks[1] for x in picks[0]]
