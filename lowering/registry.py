"""The two backends' rule tables, keyed by op class, filled by the family modules.

`LOWER[Op](ctx, op)` emits Mosaic GPU (Lane semantics); `INTERPRET[Op](cta, op)` runs
the op with numpy. Each family module (memory, elementwise, shape, mma, control,
debug) holds both rules of each of its ops; `load()` imports them all.
"""
from __future__ import annotations

import importlib

LOWER: dict[type, callable] = {}
INTERPRET: dict[type, callable] = {}
FAMILIES = ("memory", "access", "atomic", "elementwise", "fma", "fast_math", "shape", "mma", "control", "debug", "random", "gather", "scan", "sort")


def lower(*ops):
  def deco(fn):
    for o in ops:
      LOWER[o] = fn
    return fn
  return deco


def interpret(*ops):
  def deco(fn):
    for o in ops:
      INTERPRET[o] = fn
    return fn
  return deco


def load():
  for f in FAMILIES:
    importlib.import_module(f"{__package__}.{f}")
