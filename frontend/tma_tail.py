"""TMA windows that start past the end of a 1-D array whose bytes are not whole 16-byte units (session 45).

A TMA copy of a window that runs past an array's end is legal: a load reads zeros there, a store drops the
elements. On an H100, though, a window lying *wholly* past the end of a 1-D array whose size is not a whole number
of 16-byte units (579 float16 elements, 1158 bytes) stops the kernel with CUDA_ERROR_ILLEGAL_INSTRUCTION: probe
58b's memory fuzzer found seven such kernels in 700 (`docs/logs/memfuzz_session45_h100.log`), every one a copy of
more than 256 elements at a run-time start (`x.at[ml.ds(i * 512, 512)]`), which the frontend splits into pieces of
256 (ops/transfers._leading_pieces), the last of them past the end in the last program; the same windows over
arrays of whole 16-byte units, and pieces only partly past the end, ran right. The grid visitor (grid_memory)
reports such a window at the copy's line, in the user's words, before any GPU code is built.
"""
from __future__ import annotations

import numpy as np

from . import errors as E
from .tma import ALIGN            # (TMA's 16-byte unit)
from .absint import UNKNOWN
from .types import resolve



def check(visitor, acc) -> None:
  """Report acc (a GMEM TMA access, its window evaluated over the grid) where, in a program that runs it, its
  window of a 1-D array of a size that is no whole number of 16-byte units starts at or past the array's end."""
  w = acc.window
  if len(w.shape) != 1 or not acc.exact or w.starts[0] is UNKNOWN:
    return
  item = getattr(resolve(w.root.type.dtype), "itemsize", None)
  n = int(w.shape[0])
  if not item or (n * item) % ALIGN == 0:
    return
  s = np.asarray(w.starts[0])
  bad = acc.must & (s >= n)
  if not np.any(bad):
    return
  p = int(np.argmax(bad))
  root = w.root.name or "the array"
  start, size = int(s[p]), int(w.sizes[0])
  where = f" in program {visitor.ev.program(p)}" if visitor.ev.P > 1 else ""
  pad = -(-n * item // ALIGN) * ALIGN // item
  verb = "load" if "READ" in acc.kind.name else "store"
  visitor.report(E.IndexOutOfBoundsError(
      f"this copy's TMA {verb} of {root}[{start}:{start + size}]{where} (its window, or the 256-element piece of a"
      f" longer one TMA moves) lies wholly past the end of {root}"
      f" ({n} elements of {item} bytes, {n * item} bytes: no whole number of 16-byte units); on the GPU such a"
      f" window faults (an illegal instruction) instead of reading zeros", acc.op.loc,
      hint=f"pad {root} to a multiple of {ALIGN // item} elements ({pad}: jnp.pad outside the kernel, the result"
           f" sliced back), or take windows of at most 256 elements, a grid of ml.cdiv({n}, 256) programs (a longer"
           f" window moves in pieces of 256, and one wholly past the end faults), or read it with a masked load"
           f" (ml.load({root}.at[offs], mask=offs < {n}))"))
