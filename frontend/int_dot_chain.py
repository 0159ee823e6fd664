"""An integer `acc + ml.dot(a, b)` becomes `ml.dot(a, b, acc)` (design note 207).

Integer sums are exact (int32 wraps the same either way), so a fresh integer dot whose one use is an add to a tensor
of its own shape and dtype computes the same values chained onto that tensor: one WGMMA group accumulating in place,
with no zero-filled accumulator and no separate add. It also keeps 8-bit integer dots off the form ptxas miscompiled:
a fresh int32 accumulator (zeros) of an int8 dot over 32-byte swizzled operands in a pipelined loop read one
register's value in place of the zeros (an H100, session 49: async fuzzer 61c's seeds 306, 693, 894, 997 and 1046,
each right when written chained). Floating-point sums are not rewritten: WGMMA's rounding of `acc + a @ b` differs.

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


def check_fresh_int8_dots(kernel: ir.Kernel, defs: dict) -> None:
  """MG501 for each fresh (no `acc`) 8-bit integer dot over 32-byte swizzled operands (K in steps of 32 columns) in
  a pipelined loop whose product still reaches an integer add or subtract through elementwise math in its block
  (`acc + d * 1`, `acc - d`): the form ptxas miscompiled (module docstring) that chaining did not remove. Fresh
  products used otherwise (a new accumulator, a chained dot, a row statistic) were right on the GPU (41 of the
  fuzzer's seeds); refused rather than run wrong until a lowering of this one is measured right."""
  from . import errors as E
  from .ops.control import For
  from .ops.memory import ClusterRef, View

  def root(ref):
    d = defs.get(ref.id)
    while isinstance(d, (View, ClusterRef)):
      ref = d.ref
      d = defs.get(ref.id)
    return ref

  errors = []

  def visit(blk, piped):
    users: dict[int, list] = {}
    for o in blk.ops:
      for v in o.operands():
        users.setdefault(id(v), []).append(o)
    for o in blk.ops:
      if isinstance(o, Dot) and o.acc is None and piped and _eight_bit_int(o.b) and _reaches_add(o, users):
        tiled = kernel.smem_layouts.get(root(o.b).id)
        if tiled is not None and tiled.swizzle == 32:
          errors.append(E.MmaOperandError(
              f"this int8 ml.dot starts from zeros with K in steps of 32 columns (32-byte swizzled operands) inside"
              f" a pipelined loop (stages={piped}), and its product is added on: the GPU's assembler (ptxas)"
              f" miscompiles that form, its sum came out wrong on an H100",
              o.loc, hint="chain it onto the accumulator it is added to, acc = ml.dot(a, b, acc) (integer sums are"
                          " exact; `acc += ml.dot(a, b)` is chained so by the compiler), or slice K 64 columns at a"
                          " time, or run the loop unpipelined (stages=1)"))
      for r in o.regions:
        stages = getattr(o, "stages", 1) if isinstance(o, For) else 1
        visit(getattr(o, r), stages if stages > 1 else piped)

  visit(kernel.body, 0)
  if errors:
    E.raise_all(errors)


def _reaches_add(dot, users) -> bool:
  """Whether `dot`'s product meets an integer + or - in its block, directly or through elementwise math."""
  seen, work = set(), [dot.results[0]]
  while work:
    v = work.pop()
    for u in users.get(id(v), ()):
      if id(u) in seen:
        continue
      seen.add(id(u))
      if isinstance(u, Binary) and u.kind in (BinOp.ADD, BinOp.SUB):
        return True
      if ir.traits_of(u).layout == ir.LayoutRule.ELEMENTWISE:
        work.extend(u.results)
  return False


def _eight_bit_int(ref) -> bool:
  dt = getattr(getattr(ref, "type", None), "dtype", None)
  return getattr(dt, "is_int", False) and getattr(dt, "bits", 0) == 8
