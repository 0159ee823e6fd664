"""SMEM scratch buffers the compiler allocates for a builtin (transposes, scans, sorts, indexing, concatenation)."""
from __future__ import annotations

from ..dtypes import DType
from ..types import resolve


def scratch(cx, shape, dtype, name):
  """An SMEM buffer the compiler allocates for a builtin (planned and shared like any buffer)."""
  from ..types import RefType, Space
  from .memory import SmemAlloc
  buf = cx.b.emit(SmemAlloc, loc=cx.loc, types=[RefType(tuple(shape), dtype, Space.SMEM)], names=[name]).result
  cx.b.allocs.append(buf)
  cx.b.transient.add(buf.id)       # its data never outlives the builtin (frontend/smem.py lifetimes)
  return buf


def row_scratch(cx, rows, n, dtype, name):
  """(scratch, pad): an SMEM scratch for a tensor of `rows` rows of `n` elements, flat, each row
  padded by one 4-byte bank so that a warp reading a column meets 32 banks (transposes, scans)."""
  d = resolve(dtype)
  pad = max(1, 4 // (d.bits // 8)) if isinstance(d, DType) else 1
  return scratch(cx, (rows * (n + pad),), dtype, name), pad
