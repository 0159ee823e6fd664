"""A compare-and-swap that can never store: an output only ml.atomic_cas updates starts at 0 (ops/atomic.ZERO_KINDS, as
Triton's `torch.zeros` lock), and a cas stores only where the element already holds its `cmp`. Where every cas of such
an output compares with the same constant other than 0 (a hash table's EMPTY = -1, the CUDA port's
`cudaMemset(table, 0xFF)` left out), no element ever holds it, no cas stores, and a probe loop `while ml.any(active)`
spins forever, on the GPU and in interpret mode alike (probe 70a). Reported at the first cas, with the fill the kernel
meant: an input of that value aliased to the output."""
from __future__ import annotations

import math

from . import errors as E
from . import ir
from .ops.atomic import AtomicKind, AtomicUpdate
from .ops.elementwise import Constant, Full
from .ops.memory import View
from .ops.shape import Broadcast


def _constant(defs, v, depth=0):
  """The Python number `v` is everywhere (a number, or a tensor filled with one), else None."""
  if isinstance(v, (int, float)) and not isinstance(v, bool):
    return v
  o = defs.get(getattr(v, "id", None))
  if depth < 8 and isinstance(o, (Full, Broadcast)):
    return _constant(defs, o.value if isinstance(o, Full) else o.x, depth + 1)
  if isinstance(o, Constant) and isinstance(o.value, (int, float)) and not isinstance(o.value, bool):
    return o.value
  return None


def _zero_bits(c) -> bool:
  return c == 0 and not (isinstance(c, float) and math.copysign(1.0, c) < 0)


def check_cas_start(body: ir.Block, defs: dict, outputs, aliased: set) -> None:
  """Raise where an output that is not aliased to an input is updated by ml.atomic_cas alone, each comparing with
  one constant that is not 0 (the output's start)."""
  by_out: dict = {}
  out_ids = {p.value.id: p for p in outputs}
  for o in ir.walk(body):
    if not isinstance(o, AtomicUpdate):
      continue
    d = defs.get(o.ref.id)
    r = d.ref if isinstance(d, View) else o.ref
    if r.id in out_ids and r.id not in aliased:
      by_out.setdefault(r.id, []).append(o)
  for rid, ops in by_out.items():
    if any(o.kind != AtomicKind.CAS for o in ops):
      continue
    cmps = {_constant(defs, o.cmp) for o in ops}
    if len(cmps) != 1 or None in cmps:
      continue
    c = cmps.pop()
    if _zero_bits(c):
      continue
    name = out_ids[rid].name
    o = ops[0]
    raise E.KernelTypeError(
        f"ml.atomic_cas compares {name}'s elements with {c!r}, but {name} starts at 0 (an output only ml.atomic_cas"
        f" updates starts at 0, and nothing fills it) and a cas stores only where the element already holds"
        f" {c!r}: no cas here ever stores (a probe loop waiting for one spins forever)", o.loc,
        hint=f"fill {name} with {c!r} first: pass it as an input, jnp.full(shape, {c!r}, dtype), and alias that"
             f" input to {name}, @mgpu_kernel(..., input_output_aliases={{input index: output index}}); or make 0"
             f" the empty marker (keys then never 0)")
