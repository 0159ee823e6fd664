"""Which ml.dot accumulators need a `wgmma.fence` before the dot that chains them (design note 203).

PTX orders a `wgmma.mma_async`'s accesses of its accumulator registers against other instructions' accesses of
the same registers only through `wgmma.fence` ("between a register access by a thread in the warpgroup and any
wgmma.mma_async instruction that accesses the same registers ... otherwise, the behavior is undefined"); only a
chain of dots of one shape passing an accumulator on is ordered without one. Mosaic GPU fences an accumulator
built from registers (`WGMMAAccumulator.from_registers`: zeros, `acc * alpha`), and a register A operand, but not
an accumulator a dot computed (`_sync=False`), whatever read it since: a running row max of `acc` read each trip,
then the next trip's dot chaining `acc`, had no fence between the reads and the dot.

`touched(kernel_body)` is the ids of the values whose registers threads may have accessed since a dot wrote them
(and of accumulators a dot of another instruction shape computed, k16 then k32: the exemption is for one shape):
a value any op other than a dot (as its accumulator) or a region's end reads (or that a region's end hands on
twice: one is a copy); and the values sharing its registers
across control flow (a loop's body argument with its initial value and the value yielded for it, a loop's or
an if's result with the values yielded for it). `mark` sets `Dot.fence_acc` on the dots chaining one of them (after
the sync pass), and lowering/mma.py fences those. IR only.
"""
from __future__ import annotations

import dataclasses

from . import ir
from .ops.control import Condition, For, If, While, Yield, terminator_values
from .ops.mma import Dot


def touched(body: ir.Block) -> set:
  reads: set = set()
  flows: dict = {}            # value id -> ids of the values whose registers it takes over

  def flow(dst, srcs):
    flows.setdefault(dst.id, []).extend(s.id for s in srcs if isinstance(s, ir.Value))

  def ends(block):
    return terminator_values(block.ops[-1]) or [] if block.ops else []

  for o in ir.walk(body):
    if isinstance(o, (Yield, Condition)):    # handed on, not read; but a value handed on twice is copied
      vals = terminator_values(o)
      reads |= {v.id for k, v in enumerate(vals) if isinstance(v, ir.Value) and any(w is v for w in vals[:k])}
      if isinstance(o, Condition):
        reads.add(o.cond.id)
      continue
    skip = set()
    if isinstance(o, Dot) and o.acc is not None:
      skip.add(id(o.acc))
    if isinstance(o, (For, While)):
      skip |= {id(v) for v in o.inits}
    reads |= {v.id for v in o.operands() if id(v) not in skip}
    if isinstance(o, For):
      ys = ends(o.body)
      for k, a in enumerate(o.body.args[1:]):
        flow(a, [o.inits[k]] + ys[k:k + 1])
      for k, r in enumerate(o.results):
        flow(r, ys[k:k + 1])
    elif isinstance(o, While):
      cs, ys = ends(o.before)[1:], ends(o.body)
      for k, a in enumerate(o.before.args):
        flow(a, [o.inits[k]] + ys[k:k + 1])
      for k, a in enumerate(o.body.args):
        flow(a, cs[k:k + 1])
      for k, r in enumerate(o.results):
        flow(r, cs[k:k + 1])
    elif isinstance(o, If):
      for k, r in enumerate(o.results):
        flow(r, ends(o.then_block)[k:k + 1] + ends(o.else_block)[k:k + 1])
  # the instruction shapes (k: the operands' element width) of the dots whose result each value may be
  shapes = {x.results[0].id: {_k(x)} for x in ir.walk(body) if isinstance(x, Dot) and x.results}
  out = set(reads)
  changed = True
  while changed:              # registers shared through loops and ifs: a fixed point
    changed = False
    for v, srcs in flows.items():
      if v not in out and any(s in out for s in srcs):
        out.add(v)
        changed = True
      more = set().union(*(shapes.get(s, set()) for s in srcs)) - shapes.get(v, set())
      if more:
        shapes.setdefault(v, set()).update(more)
        changed = True
  # an accumulator a dot of another shape computed (a float16 product's, then a float8 one's): PTX's exemption
  # of a chain is for dots of one shape
  out |= {x.acc.id for x in ir.walk(body) if isinstance(x, Dot) and x.acc is not None
          and shapes.get(x.acc.id, set()) - {_k(x)}}
  return out


def mark(body: ir.Block) -> None:
  """Set `fence_acc` on every dot (at any depth) whose accumulator is `touched`."""
  hit = touched(body)

  def visit(block):
    for i, o in enumerate(block.ops):
      if isinstance(o, Dot) and o.acc is not None and o.acc.id in hit:
        block.ops[i] = dataclasses.replace(o, fence_acc=True)
      for r in o.regions:
        visit(getattr(o, r))
  visit(body)


def _k(dot) -> int:
  """A dot's instruction shape beside its tile's: the width of its operands' elements (k = 32 bytes of them)."""
  return dot.b.type.dtype.bits
