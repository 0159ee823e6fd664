"""Interpret mode: run a typed-IR kernel on the CPU with numpy, from the same IR the GPU gets.

Why an interpreter of the typed IR and not of the Python source: it runs exactly
what the frontend produced (dtype inference, inserted waits and fences), so a
bug in a kernel or in the compiler shows up the same way on a laptop as on an
H200. One rule per op (`INTERPRET_RULES`, mirroring lowering/rules.py's RULES);
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
holds the rendered KernelError; called eagerly, the KernelError itself is raised.
"""
from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from ..frontend import errors as E
from ..frontend import ir
from . import interpret_numerics as N
from .interpret_memory import (COMPILER_BUG, CtaMemory, InterpretError, Memory,  # noqa: F401
                               OutOfBoundsError, RaceError, Ref)

INTERPRET_RULES: dict[type, callable] = {}


def rule(*ops):
  def deco(fn):
    for o in ops:
      INTERPRET_RULES[o] = fn
    return fn
  return deco


class Machine(Memory):
  """Runs the grid cluster by cluster; the CTAs of a cluster in lockstep phases."""

  def run(self):
    g, c = self.kernel.grid, self.kernel.cluster
    for oz, oy, ox in itertools.product(*(range(0, g[a], c[a]) for a in (2, 1, 0))):
      self.ctas = [CTA(self, (ox + lx, oy + ly, oz + lz), lx + c[0] * (ly + c[1] * lz))
                   for lz, ly, lx in itertools.product(range(c[2]), range(c[1]), range(c[0]))]
      self.run_cluster()
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
      self.phase.clear()
      alive = synced


class CTA(CtaMemory):
  """One program: its values (numpy arrays; scalars are 0-d) and its memory."""

  def __init__(self, m, pid, rank):
    super().__init__(m, pid, rank)
    self.env: dict[int, object] = {}
    self.sync_loc = None

  def get(self, v: ir.Value):
    return self.env[v.id]

  def set(self, v: ir.Value, x):
    self.env[v.id] = x

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
      if type(o) is ir.Yield:
        return [self.get(v) for v in o.values]
      if self.dots and type(o) not in (ir.For, ir.Dot):
        self.check_dot_results(o)
      try:
        r = INTERPRET_RULES[type(o)](self, o)
        if r is not None:
          yield from r
      except E.KernelError:
        raise
      except Exception as e:
        raise E.InternalError.wrap(
            f"the interpreter failed on this {type(o).__name__} operation", e, o.loc) from e
    return []

  def check_dot_results(self, o):
    """Registers an in-flight ml.dot writes may be carried (loops, a chained dot's acc), not read."""
    running = {id(r): at for r, _, at in self.dots}
    for v in o.operands():
      if id(self.env.get(v.id)) in running:
        raise RaceError(f"{v.name or 'an ml.dot result'} is read before its ml.dot finished", o.loc,
                        notes=(f"{running[id(self.env[v.id])]}: the ml.dot is issued here",),
                        hint=COMPILER_BUG)


# ---------------------------------------------------------------- rules: grid, constants, refs
@rule(ir.ProgramId)
def _program_id(cta, o):
  cta.set(o.result, np.asarray(cta.pid[o.axis], np.int32))


@rule(ir.NumPrograms)
def _num_programs(cta, o):
  cta.set(o.result, np.asarray(cta.m.kernel.grid[o.axis], np.int32))


@rule(ir.Constant)
def _constant(cta, o):
  cta.set(o.result, N.const(o.value, o.result.type.dtype))


@rule(ir.SmemAlloc)
def _smem_alloc(cta, o):
  cta.set(o.result, Ref.whole(o.result, cta.rank))


@rule(ir.View)
def _view(cta, o):
  base, it, win = cta.get(o.ref), iter(o.index), []
  for s, n, sq in base.win:          # compose onto the base's window (it may be a ClusterRef of a view)
    if sq:
      win.append((s, n, sq))
      continue
    i = next(it)
    win.append((s + int(cta.operand(i.start)), i.size, i.squeeze))
  cta.set(o.result, Ref(base.root, base.owner, tuple(win)))


@rule(ir.ClusterRef)
def _cluster_ref(cta, o):
  base, c = cta.get(o.ref), cta.m.kernel.cluster
  k = int(cta.operand(o.cta))
  if not 0 <= k < c[o.axis]:
    raise OutOfBoundsError(f"CTA {k} is outside the cluster's {c[o.axis]} CTAs along axis {o.axis}", o.loc)
  coords = [cta.rank % c[0], cta.rank // c[0] % c[1], cta.rank // (c[0] * c[1])]
  coords[o.axis] = k
  cta.set(o.result, Ref(base.root, coords[0] + c[0] * (coords[1] + c[1] * coords[2]), base.win))


@rule(ir.Load)
def _load(cta, o):
  cta.set(o.result, cta.read(cta.get(o.ref), o))


@rule(ir.Store)
def _store(cta, o):
  cta.write(cta.get(o.ref), cta.get(o.value), o)


@rule(ir.Copy)
def _copy(cta, o):
  src, dst = cta.get(o.src), cta.get(o.dst)
  cta.write(dst, cta.read(src, o, "tma_read"), o, "tma_write")
  if dst.owner >= 0:                 # GMEM -> SMEM lands at the matching WaitLoad
    cta.pending_load[(dst.root.id, dst.part)] = (o.slot + _stage(cta, o.stage), o.loc)
  else:                              # SMEM -> GMEM reads SMEM until AwaitStores
    cta.pending_store[(src.root.id, src.part)] = o.loc


def _stage(cta, stage) -> int:
  return int(cta.get(stage)) if isinstance(stage, ir.Value) else stage


# ---------------------------------------------------------------- rules: synchronisation
@rule(ir.WaitLoad)
def _wait_load(cta, o):
  barrier = o.slot + _stage(cta, o.stage)
  for key in [k for k, (slot, _) in cta.pending_load.items() if slot == barrier]:
    del cta.pending_load[key]


@rule(ir.AwaitStores)
def _await_stores(cta, o):
  cta.pending_store.clear()
  cta.touched.clear()


@rule(ir.CommitShared)
def _commit_shared(cta, o):
  cta.unfenced.clear()
  cta.touched.clear()


@rule(ir.Barrier)
def _barrier(cta, o):
  cta.touched.clear()


@rule(ir.ClusterSync)
def _cluster_sync(cta, o):
  cta.touched.clear()
  cta.sync_loc = o.loc
  yield                              # the other CTAs of the cluster catch up here


# ---------------------------------------------------------------- rules: debugging
def _show(cta, x):
  if isinstance(x, ir.Value):
    v = cta.get(x)
    if isinstance(v, Ref):
      return cta.buffer(v)[v.index]
    return v
  return x


@rule(ir.Print)
def _print(cta, o):
  fmt = lambda v: np.array2string(v, max_line_width=10**9) if isinstance(v, np.ndarray) and v.ndim else str(v)
  text = "".join(p if isinstance(p, str) else fmt(_show(cta, p)) for p in o.parts)
  print(f"[program {cta.pid}] {text}", flush=True)


def open_debugger(values: dict, where: str) -> None:
  """Stop in pdb with the kernel's values as locals (tests replace this function)."""
  import os
  import pdb
  if os.environ.get("PYTHONBREAKPOINT") == "0":
    return
  print(f"mgpu_dsl breakpoint at {where}; kernel values: {', '.join(values)}  (c to continue)")
  pdb.Pdb().run("pass", {"__name__": "__kernel__"}, values)


@rule(ir.Breakpoint)
def _breakpoint(cta, o):
  values = {n: _show(cta, v) for n, v in zip(o.names, o.values)}
  open_debugger(values, f"{o.loc} (program {cta.pid})")


# ---------------------------------------------------------------- rules: arithmetic
@rule(ir.Binary)
def _binary(cta, o):
  d = o.result.type.dtype
  a, b = cta.operand(o.lhs, d), cta.operand(o.rhs, d)
  if d.is_float:
    c = N.compute_dtype(d)
    r = N.FLOAT_BIN[o.kind](a.astype(c), b.astype(c))
  else:
    if o.kind in (ir.BinOp.FLOORDIV, ir.BinOp.MOD) and np.any(b == 0):
      raise InterpretError(f"integer {o.kind.value} by zero (undefined on the GPU)", o.loc)
    r = N.INT_BIN[o.kind](a, b)
  cta.set(o.result, np.asarray(r).astype(N.np_dtype(d)))


@rule(ir.Compare)
def _compare(cta, o):
  d = next(x.type.dtype for x in (o.lhs, o.rhs) if isinstance(x, ir.Value))
  c = N.compute_dtype(d)
  a, b = cta.operand(o.lhs, d).astype(c), cta.operand(o.rhs, d).astype(c)
  cta.set(o.result, np.asarray(N.CMP[o.kind](a, b)))


@rule(ir.Unary)
def _unary(cta, o):
  x, d = cta.get(o.x), o.x.type.dtype
  if d.is_float:
    r = N.FLOAT_UN[o.kind](x.astype(N.compute_dtype(d)))
  else:
    r = N.INT_UN[o.kind](x)
  cta.set(o.result, np.asarray(r).astype(N.np_dtype(d)))


@rule(ir.Where)
def _where(cta, o):
  t = o.result.type
  r = np.where(cta.get(o.cond), cta.operand(o.on_true, t.dtype), cta.operand(o.on_false, t.dtype))
  cta.set(o.result, np.array(np.broadcast_to(r, t.shape), N.np_dtype(t.dtype)))


@rule(ir.Cast)
def _cast(cta, o):
  cta.set(o.result, np.asarray(N.cast(cta.get(o.x), o.x.type.dtype, o.result.type.dtype)))


@rule(ir.Full)
def _full(cta, o):
  t = o.result.type
  cta.set(o.result, np.full(t.shape, cta.operand(o.value, t.dtype), N.np_dtype(t.dtype)))


@rule(ir.Arange)
def _arange(cta, o):
  t = o.result.type
  shape = [1] * len(t.shape)
  shape[o.dim] = t.shape[o.dim]
  r = np.arange(t.shape[o.dim]).reshape(shape)
  cta.set(o.result, np.array(np.broadcast_to(r, t.shape), N.np_dtype(t.dtype)))


@rule(ir.Dot)
def _dot(cta, o):
  """acc + a @ b: products summed in float32 (as WGMMA does), rounded to the acc dtype; the
  group stays in flight, reading a and b, until a DotWait retires it."""
  a, b = cta.get(o.a), cta.get(o.b)
  x = cta.read(a, o, "mma_read").astype(np.float32)
  y = cta.read(b, o, "mma_read").astype(np.float32)
  t = o.result.type
  acc = cta.get(o.acc).astype(np.float32) if o.acc is not None else np.float32(0)
  r = (acc + x @ y).astype(N.np_dtype(t.dtype))
  cta.dots.append((r, {(a.owner, a.root.id, a.part), (b.owner, b.root.id, b.part)}, o.loc))
  cta.set(o.result, r)


@rule(ir.DotWait)
def _dot_wait(cta, o):
  del cta.dots[:max(0, len(cta.dots) - o.pending)]


# ---------------------------------------------------------------- rules: control flow
@rule(ir.For)
def _for(cta, o):
  start, stop, step = (int(cta.operand(x)) for x in (o.start, o.stop, o.step))
  if step <= 0:
    raise InterpretError(f"a loop step of {step}: scf.for needs a positive step", o.loc)
  carried = [cta.get(v) for v in o.inits]
  iv, *args = o.body.args
  for i in range(start, stop, step):
    cta.set(iv, np.asarray(i, np.int32))
    for a, v in zip(args, carried):
      cta.set(a, v)
    carried = yield from cta.block(o.body)
  for r, v in zip(o.results, carried):
    cta.set(r, v)


@rule(ir.If)
def _if(cta, o):
  vals = yield from cta.block(o.then_block if bool(cta.get(o.cond)) else o.else_block)
  for r, v in zip(o.results, vals):
    cta.set(r, v)


@rule(ir.Yield)
def _yield(cta, o):
  raise AssertionError("Yield is run by its parent region")


# ---------------------------------------------------------------- entry point
def run_numpy(kernel: ir.Kernel, *args) -> list[np.ndarray]:
  """Run every program of `kernel` on numpy copies of `args`; returns the outputs."""
  with np.errstate(all="ignore"):
    return Machine(kernel, args).run()


def run(kernel: ir.Kernel, args, out_specs) -> list:
  """The outputs of `kernel` on `args`, as jax arrays; under jax.jit, through jax.pure_callback."""
  specs = tuple(jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in out_specs)
  if any(isinstance(a, jax.core.Tracer) for a in args):
    outs = jax.pure_callback(functools.partial(_callback, kernel), specs, *args,
                             vmap_method="sequential")
    return list(outs)
  return [jnp.asarray(x) for x in run_numpy(kernel, *args)]


def _callback(kernel, *args):
  return tuple(run_numpy(kernel, *args))
