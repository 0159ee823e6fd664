"""An integer `acc + ml.dot(a, b)` becomes `ml.dot(a, b, acc)` (design note 207).

Integer sums are exact (int32 wraps the same either way), so a fresh integer dot whose one use is an add to a tensor
of its own shape and dtype computes the same values chained onto that tensor: one WGMMA group accumulating in place,
with no zero-filled accumulator and no separate add. It also keeps 8-bit integer dots off the form ptxas miscompiled:
a fresh int32 accumulator (zeros) of an int8 dot over 32-byte swizzled operands in a pipelined loop read one
register's value in place of the zeros (an H100, session 49: async fuzzer 61c's seeds 306, 693, 894, 997 and 1046,
each right when written chained; the lowering since gives such accumulators registers of their own, lowering/mma.py
`_own_registers`, measured right alone in the fiftieth session). Floating-point sums are not rewritten: WGMMA's
rounding of `acc + a @ b` differs.

Runs on the program as written, before pipelining, layouts and the sync pass, which then see the dot the user could
have written.
"""
from __future__ import annotations

import dataclasses

from . import ir
from .ops.elementwise_ops import Binary, BinOp
from .ops.mma import Dot
from .types import TensorType


def chain_integer_dots(body: ir.Block, defs: dict) -> None:
  """Rewrite in place; `defs` (value id -> defining op) follows the rewritten dots."""
  uses: dict[int, int] = {}
  for o in ir.walk(body):
    for v in o.operands():
      uses[id(v)] = uses.get(id(v), 0) + 1
  mapping: dict = {}
  _visit(body, uses, mapping, defs)
  if mapping:       # (a second `acc += ml.dot(..)` chains onto the first's add, replaced here by the first dot)
    body.ops[:] = [ir.substitute_deep(o, mapping) for o in body.ops]
    defs.update({r.id: o for o in ir.walk(body) for r in o.results})


def _visit(blk: ir.Block, uses, mapping, defs) -> None:
  for o in blk.ops:
    for r in o.regions:
      _visit(getattr(o, r), uses, mapping, defs)
  where = {r.id: i for i, o in enumerate(blk.ops) for r in o.results}
  dropped: set[int] = set()
  for i, o in enumerate(blk.ops):
    if not (isinstance(o, Binary) and o.kind == BinOp.ADD):
      continue
    for d, x in ((o.rhs, o.lhs), (o.lhs, o.rhs)):
      j = where.get(getattr(d, "id", None))
      if j is None or j >= i:
        continue
      dot = blk.ops[j]
      if not (isinstance(dot, Dot) and dot.acc is None and _same_int_tensor(d, x) and uses.get(id(d)) == 1
              and x is not d and where.get(x.id, -1) < j):    # (x defined before the dot, or outside this block)
        continue
      blk.ops[j] = dataclasses.replace(dot, acc=x)
      mapping[o.result] = d
      dropped.add(i)
      break
  if dropped:
    blk.ops[:] = [o for i, o in enumerate(blk.ops) if i not in dropped]


def _same_int_tensor(d, x) -> bool:
  t, u = getattr(d, "type", None), getattr(x, "type", None)
  return (isinstance(t, TensorType) and isinstance(u, TensorType) and t.shape == u.shape and t.dtype == u.dtype
          and getattr(t.dtype, "is_int", False))
