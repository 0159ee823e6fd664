"""One-element tensors meeting larger ones (probe 48a): a (1,) running max of one query row, the (1, 1) keepdims
statistic of a (1, n) score row. Such a tensor broadcast as a tensor makes the tensor it meets a row-wise tile, which
no layout holds for a row of fewer than 128 elements (MG204); its element, a scalar, meets a tensor of any shape and
layout, and stretched it is the same numbers. A loop carries one as its element too (frontend/small_carries.py)."""
from __future__ import annotations

import math

from ..types import resolve
from . import elementwise as ew
from .base import is_tensor


def one_element_operands(cx, operands, tensors):
  """The operands with each one-element tensor that meets a larger one of its dtype replaced by its element, a
  scalar, which meets a tensor of any shape and layout (None where there is none): a (1,) running max of one
  query row, `s - m[:, None]` of a (1, n) score tile, `acc * alpha[:, None]` of a (1, d) accumulator (probe 48a).
  Broadcast as a tensor, it made the other a row-wise tile, which no layout holds for a row or two of fewer than
  128 elements (MG204); the element stretched is the same numbers."""
  if not cx.b.one_elements:
    return None              # (a trace after the plain one failed: where a (1, 4096) row takes a row layout, as
                             # one softmax row a program does, its (1, 1) statistic broadcasts as before)
  ones = [x for x in tensors if math.prod(x.type.shape) == 1]
  big = [x for x in tensors if math.prod(x.type.shape) > 1]
  if not ones or not big or getattr(cx.b, "pad_ok", 0) or len({resolve(x.type.dtype) for x in tensors}) != 1:
    return None
  if any(len(x.type.shape) > max(len(y.type.shape) for y in big) for x in ones):
    return None              # (a (1, 1, 1) one beside a (4, 64) tile: the result's rank is the one-element one's)
  return tuple(element_of(cx, x) if is_tensor(x) and math.prod(x.type.shape) == 1 else x for x in operands)


def element_of(cx, x):
  """The scalar one-element tensor `x` holds: a fill's value, else its element read as ml.max of it reads it (of
  the tensor it is a reshape or broadcast of: the (1,) m of `m[:, None]`)."""
  from .reduce import reduce
  from .shape import Broadcast, Reshape, ReduceKind
  while isinstance(o := cx.b.defining(x), (Broadcast, Reshape)) and is_tensor(o.x):
    x = o.x
  one = ew.one_element_scalar(cx, x)
  return one if one is not None else reduce(cx, ReduceKind.MAX, x, None, False, "the element")
