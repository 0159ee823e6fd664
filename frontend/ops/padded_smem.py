"""SMEM windows no register tensor holds, read in a padded trace (ops/padded_tiles.py) through the rows that cover them.

A stencil's interior, `t.at[ml.ds(1, 16), ml.ds(1, 66)][...]` of an (18, 72) halo tile staged by TMA, is (16, 66):
1056 elements, no register tile. A GMEM window of that shape is read padded under a mask (a grown window, whose
masked-off elements are never touched); an SMEM window cannot grow past its buffer's end, which the halo's window
reaches. Its rows can: the window of whole buffer rows `t.at[ml.ds(1, 16), :]` (16 x 72, a tile registers hold) is
read, its elements outside the window read and dropped (Load.keep: not checked for being written), and the window's
columns are the register slice `[:, 1:67]`, padded as any odd slice of a tile is (probe 69b; MG204 before). Rows
no tile holds ((8, 72), (1, 132)) are copied row by row into a padded scratch first, as an odd SMEM tile's are.
"""
from __future__ import annotations

from ..types import RefType, Space, resolve
from ..dtypes import DType


def covering_read(cx, ref, name=""):
  """`ref[...]` of a 1-D or 2-D SMEM window whose last axis starts at a static column, as the read of the buffer's
  whole rows it lies in and the register slice of its columns; None where the window is not such a one, or those
  rows are no tensor registers hold either (the caller's MG204 then)."""
  from .memory import DSlice, View, view
  from .padded_dots import rows_padded
  from .padded_tiles import _holds
  from .shape import expand
  from .transfers import load
  t = getattr(ref, "type", None)
  win = cx.b.defining(ref)
  if not isinstance(t, RefType) or t.space != Space.SMEM or t.remote or t.transposed or len(t.shape) not in (1, 2) \
      or not isinstance(win, View) or win.transpose or isinstance(cx.b.defining(win.ref), View) \
      or not isinstance(resolve(t.dtype), DType) or _holds(tuple(t.shape)):
    return None
  last = win.index[-1]
  width = win.ref.type.shape[-1]
  if last.squeeze or not isinstance(last.start, int) or (last.start, last.size) == (0, width):
    return None
  index = tuple(i.start if i.squeeze else DSlice(i.start, i.size) for i in win.index[:-1]) + (DSlice(0, width),)
  cover = view(cx, win.ref, index, win.ref.name or "")
  if _holds(tuple(t.shape[:-1]) + (width,)):
    keep = tuple((0, n) for n in t.shape[:-1]) + ((last.start, last.start + last.size),)
    whole = load(cx, cover, name, keep=keep)
  elif (whole := rows_padded(cx, cover)) is cover:    # (rows no tile holds: copied into a padded scratch, as an
    return None                                        # odd SMEM tile's are, ops/padded_dots.py)
  return expand(cx, whole, (slice(None),) * (len(t.shape) - 1) + (slice(last.start, last.start + last.size),))


def element_read(cx, ref, name=""):
  """`ref[...]` of a 1-D SMEM window of a few elements no register vector holds, in a padded trace (a row of an HMM's
  alphas kept in an SMEM (T, 9) buffer, `al[t, :]`, read back in the backward pass): its elements copied one at a
  time into a zeroed scratch of the padded length and read back whole, recorded padded with its own length (probe
  72a: no covering read takes a full-width row, and the padded trace ended). None for other windows."""
  from .access import scalar_load
  from .elementwise import full_
  from .memory import view
  from .padded_tiles import _holds, _up, allowed
  from .scratches import scratch
  from .transfers import load, store
  t = getattr(ref, "type", None)
  if not isinstance(t, RefType) or t.space != Space.SMEM or t.remote or t.transposed or len(t.shape) != 1 \
      or not isinstance(dt := resolve(t.dtype), DType) or dt == DType.bool_ or _holds(tuple(t.shape)) \
      or not 0 < t.shape[0] <= 64:
    return None
  n = t.shape[0]
  up = _up((n,), dt)
  with allowed(cx):
    buf = scratch(cx, up, t.dtype, f"{ref.name or 'row'} padded to {up}")
    store(cx, buf, full_(cx, up, 0, t.dtype))
    for j in range(n):
      store(cx, view(cx, buf, (j,), buf.name), scalar_load(cx, view(cx, ref, (j,), ref.name)))
    out = load(cx, buf, name)
  cx.b.pad_tiles[out.id] = (n,)
  return out
