"""Whole-kernel proofs, on the typed IR after tracing and before the passes rewrite it.

* Inputs are read-only: a write (store, TMA store, any op whose effects write a ref) into
  an input that `input_output_aliases` does not alias to an output is an InputWriteError.
* With the grid evaluated (frontend/absint.py), every access's window is known in every
  program where the index arithmetic allows:
  - a read of SMEM, or of an output, that nothing wrote before it is an UninitializedReadError;
  - output elements that no program may write are an UncoveredOutputError;
  - a register access (or the SMEM side of a copy) outside its buffer in a program that
    certainly runs it is an IndexOutOfBoundsError (TMA's GMEM side may leave the array:
    it reads zeros there and drops writes, as documented);
  - the starts of TMA windows are recorded for `check_tiled_starts`, which runs after the
    layout pass has decided which buffers are tiled for the tensor cores.
Each check reports only what holds in every execution it names (writes are
over-approximated, reads exact), so valid kernels pass; what cannot be decided here is
checked by interpret mode.

This module runs the proofs (check_kernel) and hands on what they proved (mark_nonzero_divisions); the memory
visitor of the grid evaluation, which makes most of them, is frontend/grid_memory.py's.
"""
from __future__ import annotations

import dataclasses

from . import ir
from .absint import GridEval
from .cluster_checks import check_clusters
from .grid_memory import MASKED, Facts, _Memory, synced_ops
from .memory_errors import check_input_writes
from .narrow_index import check_narrow_indices
from .overflow import sample_programs
from .carried_registers import check_register_values

__all__ = ["MASKED", "Facts", "check_kernel", "mark_nonzero_divisions", "synced_ops"]


def check_kernel(kernel: ir.Kernel, defs: dict) -> tuple[list, Facts]:
  """Every mistake the proofs find, and the facts for check_tiled_starts."""
  errors = check_input_writes(kernel, defs) + check_register_values(kernel) + check_narrow_indices(kernel)
  mem = _Memory(kernel)
  ev = GridEval(kernel, mem)
  mem.ev = ev
  if ev.run():
    # (the whole grid walked: every trip's divisor known, or an unknown one seen)
    mem.facts.nonzero_divisions = [o for o, nonzero in ev.divisors.values() if nonzero]
    mem.facts.no_wrap_compares = [o for o, proven in ev.grid_compares.values() if proven]
    mem.facts.nonneg_scalars = frozenset(i for i, nonneg in ev.signs.items() if nonneg)
    errors += (ev.overflows.errors + ev.broken_promises + mem.errors + mem.coverage_errors() + mem.race_errors()
               + mem.empty.errors() + mem.gathers.errors() + check_clusters(kernel))
    mem.facts.late = mem.contraction.errors()     # after the window checks: a misplaced window comes first
  else:
    mem.facts.tma_starts.clear()
    errors += _sampled_errors(kernel)
  return errors, mem.facts


def mark_nonzero_divisions(kernel: ir.Kernel, defs: dict, facts: Facts) -> None:
  """Each division of `facts.nonzero_divisions` rebuilt with `nonzero=True`, each comparison of
  `facts.no_wrap_compares` with `no_wrap=True`, in its block and in `defs` (a new op for the frozen one: the passes
  after this copy the field into their clones, and the lowering reads it)."""
  new = {id(o): dataclasses.replace(o, nonzero=True) for o in facts.nonzero_divisions if not o.nonzero}
  new.update({id(o): dataclasses.replace(o, no_wrap=True) for o in facts.no_wrap_compares if not o.no_wrap})
  if not new:
    return

  def visit(block):
    for i, o in enumerate(block.ops):
      if id(o) in new:
        block.ops[i] = o = new[id(o)]
        for r in o.results:
          defs[r.id] = o
      for r in o.regions:
        visit(getattr(o, r))
  visit(kernel.body)


def _sampled_errors(kernel: ir.Kernel) -> list:
  """A grid too large to evaluate whole, in its corner and middle programs only (frontend/overflow.py's
  sample_programs): index arithmetic that wraps and windows out of bounds, each a mistake of one program
  (coverage and races need every program: interpret mode's)."""
  mem = _Memory(kernel)
  ev = mem.ev = GridEval(kernel, mem.bounds, programs=sample_programs(kernel.grid))
  ev.run()
  return ev.overflows.errors + ev.broken_promises + mem.errors
