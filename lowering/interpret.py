"""Interpret mode: run a typed-IR kernel on the CPU with numpy, from the same IR the GPU gets.

Why an interpreter of the typed IR and not of the Python source: it runs exactly
what the frontend produced (dtype inference, inserted waits and fences), so a
bug in a kernel or in the compiler shows up the same way on a laptop as on an
H200. One rule per op (`INTERPRET_RULES`, beside the Mosaic GPU rules in lowering/registry.py);
numerics live in interpret_numerics.py, memory and race checks in
interpret_memory.py.

Execution model:
* Each program (CTA) runs vectorised: a register tensor is one numpy array,
  computed in its dtype (narrow floats in float32, rounded after every op, as
  the GPU rounds per op; integers wrap).
* The CTAs of one cluster run in lockstep phases: each CTA is a Python
  generator that pauses at `ml.cluster_sync()`, so `ml.cluster_ref` reads the
  peer's real SMEM. Clusters run one after another.
* Races the GPU would hide are reported as located `RaceError`s: reading (or
  reusing) SMEM whose async TMA copy has not landed, overwriting SMEM an
  in-flight TMA store reads, a TMA store of register-written SMEM without a
  fence, reading an `ml.dot` result (or overwriting its SMEM operands) before a
  DotWait retires it, two programs touching the same output element, two CTAs
  of a cluster touching the same SMEM element between the same two
  cluster_syncs, and a CTA exiting while a peer still uses its SMEM.
* Dynamic indices outside a buffer raise `OutOfBoundsError`, except on the
  GMEM side of a TMA copy, which reads zeros and drops writes there as TMA does.

Limitations (documented, not silent): threads inside a CTA are not modelled, so
a missing Barrier between a register write and a register read of SMEM is not
caught; a WaitLoad with nothing in flight (a hang on the GPU) is a no-op; TMA
stores reach GMEM at once; transcendental functions use numpy's float32, which
may differ from libdevice by an ulp. Under `jax.jit` the run is a
`jax.pure_callback`, and XLA wraps any error in a JaxRuntimeError whose text
holds the rendered KernelError; the callback keeps the KernelError (`raised`), and
mgpu_dsl/jit_errors.py raises it in place of XLA's error, as an eager call raises it.
"""
from __future__ import annotations

import collections
import functools
import itertools
import logging
import threading

import jax
import numpy as np

from ..frontend import errors as E
from ..frontend import ir
from ..frontend.errors import InterpretError
from ..frontend.ops.control import LOOPS, Condition, Yield, terminator_values
from ..frontend.ops.mma import Dot
from . import interpret_numerics as N
from . import interpret_padding as P
from . import registry
from .interpret_cta import CtaMemory
from .interpret_memory import COMPILER_BUG, Memory, RaceError, Ref

registry.load()
INTERPRET_RULES = registry.INTERPRET
# interpret mode's errors, where callers catch them (interp.RaceError, interp.InterpretError; not all used here)
OutOfBoundsError = E.OutOfBoundsError


class Machine(Memory):
  """Runs the grid cluster by cluster; the CTAs of a cluster in lockstep phases."""

  def run(self):
    g, c = self.kernel.grid, self.kernel.cluster
    if self.cooperative:           # programs that wait on each other through atomics (interpret_sync.py)
      from .interpret_sync import run_cooperative
      run_cooperative(self, lambda pid: CTA(self, pid, 0))
      self.check_covered()
      return [self.gmem[p.value.id] for p in self.kernel.outputs]
    for oz, oy, ox in itertools.product(*(range(0, g[a], c[a]) for a in (2, 1, 0))):
      self.ctas = [CTA(self, (ox + lx, oy + ly, oz + lz), lx + c[0] * (ly + c[1] * lz))
                   for lz, ly, lx in itertools.product(range(c[2]), range(c[1]), range(c[0]))]
      self.run_cluster()
    self.check_covered()
    return [self.gmem[p.value.id] for p in self.kernel.outputs]

  def run_cluster(self):
    """Run the cluster's CTAs phase by phase, from one ml.cluster_sync() to the next."""
    alive = [(c, c.main()) for c in self.ctas]
    while alive:
      synced, done = [], []
      for c, gen in alive:
        try:
          next(gen)
          synced.append((c, gen))
        except StopIteration:
          done.append(c)
      if synced and done:
        c = synced[0][0]
        raise InterpretError(
            f"program {c.pid} waits at ml.cluster_sync() but program {done[0].pid} of its cluster"
            f" ends without reaching it: on the GPU this hangs", c.sync_loc,
            hint="call ml.cluster_sync() the same number of times in every CTA of a cluster")
      for c in done:
        self.check_exit(c)
      for reader, ref, o in self.late_reads:
        reader.check_filled(ref, o)
      self.late_reads.clear()
      self.phase.clear()
      alive = synced
    self.check_multicasts()


class CTA(CtaMemory):
  """One program: its values (numpy arrays; scalars are 0-d) and its memory."""

  def __init__(self, m, pid, rank):
    super().__init__(m, pid, rank)
    self.env: dict[int, object] = {}
    self.at = None                                # the op running (for a race's location)
    self.sync_loc = None
    if not hasattr(m, "track_pads"):
      m.track_pads = P.tracks(m.kernel)
    # masked-off lanes past an array's end followed to the reductions they reach (interpret_padding.py)
    self.pads: dict[int, tuple] = {}
    self.neutral: set[int] = set()
    self.pad_sums: dict[int, tuple] = {}
    self.pad_dots: dict[int, tuple] = {}          # id of a (TMA) load -> the ml.dot its padding went through
    self.pad_mixes: dict[int, tuple] = {}         # id of a masked (or TMA) load -> where its padding first changed data
    self.smem_pad: dict[int, np.ndarray] = {}     # SMEM root id -> elements a TMA load read past its array's end
    self.smem_src: dict[int, object] = {}         # SMEM root id -> that load
    self.fresh: dict[int, frozenset] = {}         # value id -> the arrays whose elements it holds at its lanes' positions
    self.smem_tma: dict[int, int] = {}            # SMEM root id -> the GMEM array a TMA load last filled it from
    self.scratch_lanes: dict[int, tuple] = {}     # scratch id -> (lane states, load, arrays) of what a relayout stored
    self.pad_gathers: dict[int, object] = {}      # id of a masked load -> the first gather its padding indexed
    self.pad_meets: dict[int, tuple] = {}         # id of a masked (or TMA) load -> (loc, arrays) where its padding met their data
    self.pad_wheres: dict[int, tuple] = {}        # id of a masked (or TMA) load -> (ml.where, its constant) that refilled its padding
    self.pad_inside: set[int] = set()             # ids of masked loads whose padding holds lanes inside their array
    self.sort_late: dict[int, tuple] = {}         # SMEM root id -> a sort whose padding sorted among what it holds

  def get(self, v: ir.Value):
    return self.env[v.id]

  def set(self, v: ir.Value, x):
    if self.dots:
      self.check_dot_a(v.id, None, v.name)
    self.env[v.id] = x

  def check_dot_a(self, vid, dot, name):
    """A running ml.dot reads its register A operand until it retires: PTX leaves writing those
    registers meanwhile undefined, as a loop's next trip does when it redefines the operand (`vid`)
    or issues the same dot again (`dot`: its operand is copied into the instruction's registers)."""
    for _, _, at, a, d in self.dots:
      if a is not None and (a == vid or d is dot):
        raise RaceError(f"{name or 'the A operand of an ml.dot'} is rewritten while an ml.dot that reads it"
                        " from registers may still be running", (dot or self.at).loc,
                        notes=(f"{at}: the ml.dot is issued here",), hint=COMPILER_BUG)

  def check_dot_yield(self, o, blk):
    """A region's end copies its values into the region's results (a loop's back edge, into the body's
    arguments): a running ml.dot's result handed on twice, or into a carried value whose old value is handed on
    too (`acc1, acc2 = ml.dot(a, b, acc2), acc1`: the two swap registers), is copied while WGMMA writes it."""
    running = {id(r): at for r, _, at, *_ in self.dots}
    vals = terminator_values(o)
    got = [id(self.env.get(v.id)) for v in vals]
    args = blk.args[len(blk.args) - len(vals):] if isinstance(o, Yield) else ()
    old = [id(self.env.get(a.id)) for a in args]
    for i, (v, x) in enumerate(zip(vals, got)):
      if x not in running:
        continue
      if x in got[:i] or (old and old[i] in got[:i] + got[i + 1:]):
        raise RaceError(f"{v.name or 'an ml.dot result'} is handed on (a copy of it is read) before its ml.dot"
                        " finished", o.loc, notes=(f"{running[x]}: the ml.dot is issued here",), hint=COMPILER_BUG)
      if args and args[i].id in self.dot_reads.get(x, ()):
        raise RaceError(f"{v.name or 'an ml.dot result'} takes the place of the carried {args[i].name or 'value'}, whose"
                        " old value is read after the ml.dot is issued, so the two cannot share registers: the back"
                        " edge copies the result before its ml.dot finished", o.loc,
                        notes=(f"{running[x]}: the ml.dot is issued here",), hint=COMPILER_BUG)

  def note_reads(self, o):
    """Record the values `o` reads for every running ml.dot (a carried value read after a dot whose result
    takes its place in the back edge: check_dot_yield)."""
    ids = {v.id for v in (terminator_values(o) if type(o) in (Yield, Condition) else o.operands())}
    for s in self.dot_reads.values():
      s |= ids

  def check_dot_acc(self, dot, acc):
    """A running ml.dot writes its accumulator until it retires: issuing the same dot again (a loop's next
    trip) writes those registers first unless it chains that running accumulator (`acc` is its result)."""
    for r, _, at, _, d in self.dots:
      if d is dot and acc is not r:
        raise RaceError("this ml.dot is issued again while its previous instance may still be running, and"
                        " its accumulator is not that instance's result: it overwrites the registers the"
                        " running instance still writes", dot.loc, notes=(f"{at}: the running ml.dot",),
                        hint=COMPILER_BUG)

  def operand(self, x, d=None):
    if isinstance(x, ir.Value):
      return self.env[x.id]
    return N.const(x, d) if d is not None else x

  def main(self):
    for p in self.m.kernel.params:
      self.set(p.value, Ref.whole(p.value, -1))
    yield from self.block(self.m.kernel.body)
    self.check_end()

  def block(self, blk: ir.Block):
    """Run a block's ops; returns the values of its Yield (a generator: pauses at cluster_sync)."""
    for o in blk.ops:
      if type(o) in (Yield, Condition):
        if self.dots:
          self.check_dot_yield(o, blk)
          self.note_reads(o)
        return [self.get(v) for v in terminator_values(o)]
      if self.dots and not isinstance(o, (*LOOPS, Dot)):
        self.check_dot_results(o)
      if self.dots:
        self.note_reads(o)
      self.steps += 1
      self.at = o
      rule = INTERPRET_RULES.get(type(o))
      if rule is None:
        raise E.InternalError(f"no interpreter rule for {type(o).__name__}", o.loc)
      try:
        r = rule(self, o)
        if r is not None:
          yield from r
        if self.m.track_pads:
          P.after(self, o)
      except E.KernelError:
        raise
      except Exception as e:
        raise E.InternalError.wrap(
            f"the interpreter failed on this {type(o).__name__} operation", e, o.loc) from e
    return []

  def check_dot_results(self, o):
    """Registers an in-flight ml.dot writes may be carried (loops, a chained dot's acc), not read."""
    running = {id(r): at for r, _, at, *_ in self.dots}
    for v in o.operands():
      if id(self.env.get(v.id)) in running:
        raise RaceError(f"{v.name or 'an ml.dot result'} is read before its ml.dot finished", o.loc,
                        notes=(f"{running[id(self.env[v.id])]}: the ml.dot is issued here",),
                        hint=COMPILER_BUG)


def open_debugger(values: dict, where: str) -> None:
  """Stop in pdb with the kernel's values as locals (tests replace this function)."""
  import os
  import pdb
  if os.environ.get("PYTHONBREAKPOINT") == "0":
    return
  print(f"mgpu_dsl breakpoint at {where}; kernel values: {', '.join(values)}  (c to continue)")
  pdb.Pdb().run("pass", {"__name__": "__kernel__"}, values)


# ---------------------------------------------------------------- entry point
def run_numpy(kernel: ir.Kernel, *args) -> list[np.ndarray]:
  """Run every program of `kernel` on numpy copies of `args`; returns the outputs."""
  with np.errstate(all="ignore"):
    try:
      return Machine(kernel, args).run()
    except E.KernelError as e:      # a mistake at a line of an @ml.inline helper: which calls
      E.note_inline_calls(e, getattr(kernel, "inline_sites", {}))
      raise


def run(kernel: ir.Kernel, args, out_specs, site=None) -> list:
  """The outputs of `kernel` on `args`, as jax arrays; under jax.jit, through jax.pure_callback.
  `site`: (file, line, note, ...) of the user's call, its notes noted on the run's errors under jax.jit."""
  specs = tuple(jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in out_specs)
  if any(isinstance(a, jax.core.Tracer) for a in args):
    outs = jax.pure_callback(functools.partial(_callback, kernel, site), specs, *args,
                             vmap_method="sequential")
    return list(outs)
  # Explicit transfers, which jax.transfer_guard("disallow") allows: the run is on the host by design.
  device = _committed_device(args)
  return [jax.device_put(x, device) for x in run_numpy(kernel, *jax.device_get(list(args)))]


def _committed_device(args):
  """The one device the call's committed inputs are on (where a jnp function's result would be), else None
  (the default device)."""
  devices = {d for a in args if isinstance(a, jax.Array) and getattr(a, "committed", False)
             for d in [next(iter(a.devices()))] if len(a.devices()) == 1}
  return devices.pop() if len(devices) == 1 else None


class _QuietKernelErrors(logging.Filter):
  """jax logs a failing pure_callback's whole traceback (through this interpreter) to stderr; a
  KernelError is the user's mistake, and its text reaches them in the JaxRuntimeError already."""

  def filter(self, record):
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, E.KernelError)


logging.getLogger("jax._src.callback").addFilter(_QuietKernelErrors())


# KernelErrors the callback raised, newest last, for the JaxRuntimeError XLA wraps each in
# (mgpu_dsl/jit_errors.py): a few, since a failed run's error is taken as it surfaces.
_raised: collections.deque = collections.deque(maxlen=8)
_raised_lock = threading.Lock()


def take_raised(xla_text: str) -> E.KernelError | None:
  """The KernelError whose text ends XLA's error text `xla_text` (removed from those kept), or None.
  Found by its first line, `file:line:col: message [code]` (XLA may shorten what follows)."""
  with _raised_lock:
    for e in reversed(_raised):
      if f"{e.loc}: {e.message} [{e.code}]" in xla_text:
        _raised.remove(e)
        return e.with_traceback(None)
  return None


def _callback(kernel, site, *args):
  try:
    return tuple(run_numpy(kernel, *args))
  except E.KernelError as e:     # its text, not the interpreter's frames, in XLA's message
    if site is not None and (e.filename, e.lineno) != site[:2]:
      for err in e.errors:       # the call that made it, as an eager call's errors name it (and notes of
        for note in site[2:]:    # how it runs: a chunk of a jax.vmap batch)
          if note not in err.notes:
            err.notes = tuple(err.notes) + (note,)
    with _raised_lock:
      _raised.append(e)
    raise e.with_traceback(None) from None
