"""How deep the compiler's walks go (probe 71b). The passes walk values back to their definitions recursively, so a
dependency chain some thousand values deep (SHA-1's or SHA-512's 80 rounds unrolled, a hash over hundreds of bytes
by ml.static_range) passed Python's default limit of 1000 frames: a RecursionError, reported as MG900 ("a bug in
mgpu_dsl"). Compiling raises the limit; a chain deeper still is the user's MG001 at the kernel, with what to write."""
from __future__ import annotations

import contextlib
import sys

from . import errors as E

# Python's own frames take no C stack (3.11 on); a walk that recurses through C (`all(...)` of a generator) takes
# some at each level, which 10000 frames (5000 such levels) keep well inside a thread's 8 MiB (20000 levels of
# `all` crashed Python 3.11 there, 10000 did not): such walks are written with stacks of their own (remat.py).
DEEP_WALKS = 10_000


@contextlib.contextmanager
def deep_walks():
  """Python's recursion limit raised to DEEP_WALKS while compiling (restored after)."""
  old = sys.getrecursionlimit()
  sys.setrecursionlimit(max(old, DEEP_WALKS))
  try:
    yield
  finally:
    sys.setrecursionlimit(old)


def too_deep(loc) -> E.KernelError:
  """The error of a chain past DEEP_WALKS frames, at the kernel (`loc`)."""
  return E.UnsupportedSyntaxError(
      "a value of this kernel depends on a chain of thousands of values, each computed from the last (a loop"
      f" unrolled over thousands of steps), deeper than the compiler's walks go ({DEEP_WALKS} Python frames)",
      loc, hint="keep the long loop a run-time loop (for i in range(n) over a value it carries, not"
                " ml.static_range or a list it indexes), or unroll an inner loop of a few hundred steps inside a"
                " run-time outer one")
