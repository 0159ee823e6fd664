"""Masked loads and stores whose mask, known while compiling, keeps no element in any program (probe 50f).

`out.at[r, cols].store(v, mask=(cols < n) & (cols < 0))` writes nothing: into an output the coverage check
(MG602) reports the elements it leaves unwritten, but into an output aliased to an input
(`input_output_aliases`) the output keeps the input's values and nothing was said. A load of such a mask reads
only its `other=`. Either is a mask that contradicts itself, or compares with the wrong bound, so the access
is reported (MG602 for a store, MG203 for a load) where every program that may run it, on every loop trip the
grid evaluation walks, keeps nothing. An access in an `ml.static_range` loop is one per trip, all at its line:
it is reported only where no trip keeps an element (a fixed number of chunks, of which the last ones lie past
a short row, is fine), and so is a mask of an empty array, or a constant one (`mask=False`). A mask the evaluation cannot tell (of data, of a loop counter summarised over its
trips) keeps the access out of the check.
"""
from __future__ import annotations

from . import errors as E
from .call_texts import keywords
from . import ir
from .ops.access import MaskedLoad, MaskedStore
from .ops.elementwise import Compare


class EmptyMasks:
  """Per source location of a masked access: whether some walk kept an element or could not tell."""

  def __init__(self):
    self.seen: dict = {}     # loc -> (the first access there, whether any walk kept or could not tell)

  def see(self, mem, acc) -> None:
    o = acc.op
    if not isinstance(o, (MaskedLoad, MaskedStore)) or not acc.may.any() or 0 in acc.window.root.type.shape:
      return                 # (an empty array: nothing to keep, as meant)
    if not _compares(o.mask, mem.ev.defs):
      return                 # (mask=False written as such: meant)
    kept = mem.masked_boxes(acc, acc.may, o.mask, exact_only=True)
    some = kept is None or bool((kept[1] > kept[0]).all(axis=1).any())
    first, before = self.seen.get(o.loc, (acc, False))
    self.seen[o.loc] = (first, before or some)

  def errors(self) -> list:
    return [_error(acc) for acc, some in self.seen.values() if not some]


def _compares(v, defs, depth=0) -> bool:
  """Whether mask `v` is made by a comparison (not a constant: `mask=False`, a test's scalar mask, is meant)."""
  o = defs.get(getattr(v, "id", None))
  if o is None or depth > 32:
    return False
  return isinstance(o, Compare) or any(_compares(x, defs, depth + 1) for x in o.operands() if isinstance(x, ir.Value))


def _error(acc):
  o, root = acc.op, acc.window.root.name or "the array"
  mask = keywords(o.loc).get("mask", "its mask")
  if isinstance(o, MaskedStore):
    return E.UncoveredOutputError(
        f"this masked store writes nothing: its mask {mask} is false for every element in every program, so"
        f" {root} keeps what it held", o.loc,
        hint="a mask is true where the store should write: check each comparison's bound (a tail mask is"
             f" offs < {root}.shape[...]), or drop the store")
  other = keywords(o.loc).get("other", "0")
  return E.IndexOutOfBoundsError(
      f"this masked load reads nothing: its mask {mask} is false for every element in every program, so it"
      f" gives other={other} everywhere and none of {root}", o.loc,
      hint="a mask is true where the load should read: check each comparison's bound (a tail mask is"
           f" offs < {root}.shape[...])")
