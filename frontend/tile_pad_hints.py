"""Hints for 3-D tiles read from memory that no register tensor holds (a multiple of 128 elements): the masked
window, padded, that holds each, which the reductions over each axis take."""
from __future__ import annotations

import math

from . import errors as E, hw
from .layout_hints import _padding_note, loaded_other, read_window


def padded_3d_hint(shape, ref, window, reduced) -> str:
  """A 3-D GMEM tile that no register tensor holds, reduced (torch.sum(x, dim=1) of a (3, 40, 72) array read
  whole): the masked window that holds it, its last axis a multiple of 32 and the one before it of 4 (a multiple
  of 128 elements, which the reductions over each axis take), at the window's own starts."""
  b, r, c = shape
  R, C = -(-r // 4) * 4, max(32, -(-c // 32) * 32)
  parts = window[2] if window is not None else None
  if parts is None or sum(1 for _, _, squeeze in parts if not squeeze) != 3:
    parts = [("0", b, False), ("0", r, False), ("0", c, False)]
  mask = " & ".join(f"(ml.arange({P}){ax} < {n})" for P, n, ax in ((R, r, "[None, :, None]"), (C, c, "[None, None, :]"))
                    if P != n)
  mask = mask[1:-1] if " & " not in mask else mask
  sizes = iter((b, R, C))
  at = ", ".join(s if squeeze else f"ml.ds({s}, {next(sizes)})" for s, _, squeeze in parts)
  kinds, dtype = reduced
  other = loaded_other(kinds, dtype)
  return (f"work on a larger tile, masked to this one: {ref}.at[{at}].load(mask={mask}, other={other}) (a result"
          f" that keeps a padded axis is stored with that axis's part of the mask){_padding_note(kinds, dtype, mask)}")


def check_read_tile(cx, x, axes, what) -> None:
  """A 3-D tile read from memory (`x[...]`, a masked load) whose elements are no multiple of 128, reduced (torch's
  sum over dim=1 of a (3, 40, 72) array read whole): MG204 at the read, whose hint pads it (the reduction over a
  middle axis was MG204 at the compiler's SMEM scratch, 'give tensor scratch the shape (8640,)'; over the others,
  'partial reductions work on 1-D and 2-D tensors')."""
  shape, load = tuple(x.type.shape), cx.b.defining(x)
  if len(shape) != 3 or math.prod(shape) % hw.WARPGROUP == 0 or type(load).__name__ not in ("Load", "MaskedLoad"):
    return
  window = read_window(cx.b.defs, load)
  if window is None or window[1]:
    return
  name = what.removeprefix("ml.").removeprefix("arg")
  kind = {"var": "mean", "std": "mean", "softmax": "max", "log_softmax": "max", "logsumexp": "max"}.get(name, name)
  kind = kind if kind in ("sum", "max", "min", "mean") else "sum"
  raise E.LayoutError(
      f"{x.name or 'this tensor'} has shape {shape}: register tensors need a multiple of {hw.WARPGROUP} elements"
      f" (one per thread of a warpgroup)", load.loc,
      hint=padded_3d_hint(shape, window[0], window, ((kind,), x.type.dtype)))
