"""The GMEM windows the padded trace grows (ops/padded_tiles.py): where a window read, or a padded value stored, lies
in its kernel parameter, and the index of the grown window."""
from __future__ import annotations


def window_of(cx, ref, k):
  """(root, starts) of `ref`, a kernel parameter or a plain window of one with k axes of its own (the others indexed
  away: leading ones, or since probe 59b any, `k[:, h, :]` of a KV cache of few tokens, whose starts then record
  the kept axes, `_Starts.kept`); (None, None) for anything else (a transposed view, a view of a view)."""
  from .memory import View
  win = cx.b.defining(ref)
  if win is None:
    root, index = ref, (0,) * k
  elif isinstance(win, View) and not win.transpose and len(win.index) == len(win.ref.type.shape) and \
      not any(i.squeeze for i in win.index[-k:]) and all(i.squeeze for i in win.index[:-k]):
    root, index = win.ref, tuple(i.start for i in win.index)
  elif isinstance(win, View) and not win.transpose and len(win.index) == len(win.ref.type.shape) and \
      sum(not i.squeeze for i in win.index) == k:
    root, index = win.ref, _Starts(i.start for i in win.index)
    index.kept = tuple(a for a, i in enumerate(win.index) if not i.squeeze)
  else:
    return None, None
  return (None, None) if cx.b.defining(root) is not None else (root, index)


class _Starts(tuple):
  """A window's starts where the axes it keeps are not its last ones (`kept`)."""
  kept = ()


def grown_index(index, up):
  """The index of the padded window of `up` at `index` (_window_of's starts): the kept axes as slices of their
  padded lengths, the others indexed away."""
  from .memory import DSlice
  kept = index.kept if isinstance(index, _Starts) else tuple(range(len(index) - len(up), len(index)))
  out = list(index)
  for a, u in zip(kept, up):
    out[a] = DSlice(index[a], u)
  return tuple(out)
