"""`ml.dot` of fewer rows than a tensor-core tile: decode's few tokens, a GQA group of query heads, a
GEMV batch of 1 to 16 (probe 47e).

WGMMA computes 64 rows a warpgroup per instruction. A dot of m rows, m not a multiple of 64, is written
out here at trace time in existing ops, as the hint of MG501 told users to write it by hand: A read
into registers (`a_s[...]`, or the register tensor it is) and padded with zero rows to the tile's rows
(`ml.concatenate`, through its SMEM scratch), the padded dot, and its first m rows (a row window,
through an SMEM scratch): row i of a product reads row i of A only, so the zero rows change nothing.
A 16-bit or 8-bit padded A is read by the tensor cores from registers; a float32 (TF32) one, or an
int8 one whose k registers cannot take, is stored into an SMEM buffer of the tile's rows the dot reads.
An accumulator is added to the product after (the product computed in the accumulator's dtype), so
a loop carries the m rows only. No IR op of its own: layouts, interpret mode and lowering need nothing
new.
"""
from __future__ import annotations

from .. import hw
from ..types import DType, RefType, TensorType


def padded_rows(m: int) -> int:
  """The rows of the tensor-core tile that holds m rows: 64 for 1..64, 128 for 65..128, ..."""
  return -(-m // hw.MMA_M) * hw.MMA_M


def small_m_dot(cx, a, b, acc, d, acc_dtype, dot_rule):
  """`acc + a @ b` for (m, k) `a`, m not a multiple of 64, written out in ops that exist (see the
  module's docstring). `d` is the operands' dtype, `acc_dtype` the product's, `dot_rule` ml.dot's."""
  from .elementwise import BinOp, binary, full_
  from .scratches import scratch
  from .shape import concatenate, index_through_smem
  from .transfers import load, store
  name = cx.name
  cx.name = ""                   # (only the result takes the name it is bound to)
  try:
    m, k = a.type.shape
    rows = padded_rows(m)
    x = load(cx, a) if isinstance(a.type, RefType) else a      # a_s[...], a_s.T[...]: A in registers
    pad = concatenate.rule(cx, [x, full_(cx, (rows - m, k), 0, x.type.dtype)], 0)
    if d not in hw.MMA_REG_A_DTYPES or d == DType.i8 and k % hw.MMA_REG_A_INT_K:
      tile = scratch(cx, (rows, k), x.type.dtype, "padded dot rows")   # (TF32 reads A from SMEM)
      cx.b.transient.discard(tile.id)     # read by the asynchronous dot: planned as a buffer of its own
      store(cx, tile, pad)
      pad = tile
    product = dot_rule(cx, pad, b, None, out_dtype=acc_dtype)
    if acc is None:
      cx.name = name
    out = index_through_smem(cx, product, (slice(0, m), slice(None)))
    if acc is not None:
      cx.name = name
      out = binary(cx, BinOp.ADD, acc, out)
    return out
  finally:
    cx.name = name


def is_small_m(a) -> bool:
  """Whether `a` (a 2-D ml.dot operand) has rows that are not whole tensor-core tiles."""
  return isinstance(a.type, (RefType, TensorType)) and len(a.type.shape) == 2 and a.type.shape[0] % hw.MMA_M != 0
