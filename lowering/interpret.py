"""Interpret mode: run a typed-IR kernel on the CPU with numpy, from the same IR the GPU gets.

Why an interpreter of the typed IR and not of the Python source: it runs exactly
what the frontend produced (dtype inference, inserted waits and fences), so a
bug in a kernel or in the compiler shows up the same way on a laptop as on an
H200. One rule per op (`INTERPRET_RULES`, mirroring lowering/rules.py's RULES).

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
  fence, two programs touching the same output element, two CTAs of a cluster
  touching the same SMEM element between the same two cluster_syncs, and a CTA
  exiting while a peer still uses its SMEM.

Limitations (documented, not silent): threads inside a CTA are not modelled, so
a missing Barrier between a register write and a register read of SMEM is not
caught; a WaitLoad with nothing in flight (a hang on the GPU) is a no-op; TMA
stores reach GMEM at once; transcendental functions use numpy's float32, which
may differ from libdevice by an ulp. Under `jax.jit` the run is a
`jax.pure_callback`, and XLA wraps any error in a JaxRuntimeError whose text
holds the rendered KernelError; called eagerly, the KernelError itself is raised.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from ..frontend import errors as E
from ..frontend import ir
from ..frontend.dtypes import DType


class InterpretError(E.KernelError):
  """A kernel that goes wrong at run time in interpret mode (a hang, a division by zero)."""
  code = "MG950"


class RaceError(InterpretError):
  """A data race the GPU would not report: an access before its synchronisation."""
  code = "MG951"


class OutOfBoundsError(InterpretError):
  """A dynamic index outside a buffer (undefined behaviour on the GPU)."""
  code = "MG952"


INTERPRET_RULES: dict[type, callable] = {}
COMPILER_BUG = "the compiler inserts this synchronisation; an IR without it is a bug in mgpu_dsl, please report it"


def rule(*ops):
  def deco(fn):
    for o in ops:
      INTERPRET_RULES[o] = fn
    return fn
  return deco


# ---------------------------------------------------------------- dtypes and numerics
def np_dtype(d: DType) -> np.dtype:
  return np.dtype(getattr(ml_dtypes, d.numpy_name, d.numpy_name))


def _compute_dtype(d: DType) -> np.dtype:
  """Narrow floats compute in float32 and round back after each op."""
  return np.dtype(np.float32) if d.is_float and d.bits < 32 else np_dtype(d)


def poison(shape, d: DType) -> np.ndarray:
  """Never-written memory: NaN for floats, the most negative (or largest unsigned) int, True."""
  if d.is_float:
    v = np.nan
  elif d == DType.bool_:
    v = True
  else:
    info = np.iinfo(np_dtype(d))
    v = info.min if d.is_signed else info.max
  return np.full(shape, v, np_dtype(d))


def const(x, d: DType) -> np.ndarray:
  """A Python scalar as a value of `d` (arith.constant: rounded for floats, wrapped for ints)."""
  if d.is_float:
    return np.asarray(np.float64(x)).astype(np_dtype(d))
  if d == DType.bool_:
    return np.asarray(bool(x))
  return np.asarray(np.int64(int(x))).astype(np_dtype(d))


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  """arith casts: float -> int truncates and saturates, NaN -> 0 (PTX cvt.rzi); ints wrap."""
  nd = np_dtype(dst)
  if src == dst:
    return x
  if src.is_float and not dst.is_float:
    f = np.trunc(x.astype(np.float64))
    info = np.iinfo(nd)
    hi, lo = f >= float(info.max), f <= float(info.min)
    out = np.where(hi | lo | np.isnan(f), 0, f).astype(nd)
    return np.where(hi, info.max, np.where(lo, info.min, out)).astype(nd)
  return x.astype(np.float64).astype(nd) if dst.is_float else x.astype(nd)


B, C, U = ir.BinOp, ir.CmpOp, ir.UnOp
_FLOAT_BIN = {B.ADD: np.add, B.SUB: np.subtract, B.MUL: np.multiply, B.DIV: np.divide,
              B.MAX: np.maximum, B.MIN: np.minimum, B.MOD: np.fmod,
              B.FLOORDIV: lambda a, b: np.floor(np.divide(a, b))}
# arith.floordivsi floors; arith.remsi keeps the dividend's sign (C's %): np.fmod.
_INT_BIN = {B.ADD: np.add, B.SUB: np.subtract, B.MUL: np.multiply, B.FLOORDIV: np.floor_divide,
            B.MOD: np.fmod, B.MAX: np.maximum, B.MIN: np.minimum, B.AND: np.bitwise_and,
            B.OR: np.bitwise_or, B.XOR: np.bitwise_xor}
_CMP = {C.LT: np.less, C.LE: np.less_equal, C.GT: np.greater, C.GE: np.greater_equal,
        C.EQ: np.equal, C.NE: np.not_equal}
_FLOAT_UN = {U.NEG: np.negative, U.EXP: np.exp, U.EXP2: np.exp2, U.LOG: np.log, U.SQRT: np.sqrt,
             U.RSQRT: lambda x: np.divide(1, np.sqrt(x)).astype(x.dtype), U.TANH: np.tanh,
             U.ABS: np.abs}
_INT_UN = {U.NEG: np.negative, U.ABS: np.abs, U.NOT: np.logical_not}


# ---------------------------------------------------------------- refs
@dataclasses.dataclass(frozen=True)
class Ref:
  """A window of a root buffer: a kernel parameter (GMEM) or one CTA's SMEM allocation."""
  root: ir.Value
  owner: int            # cluster rank of the CTA whose SMEM this is; -1 for GMEM
  win: tuple            # ((start, size, squeeze), ...) over the root's dimensions

  @property
  def name(self) -> str:
    return self.root.name or "a buffer"

  @property
  def index(self) -> tuple:
    return tuple(s if sq else slice(s, s + n) for s, n, sq in self.win)

  def check_bounds(self, o):
    shape = self.root.type.shape
    if any(s < 0 or s + n > d for (s, n, _), d in zip(self.win, shape)):
      win = ", ".join(str(s) if sq else f"{s}:{s + n}" for s, n, sq in self.win)
      raise OutOfBoundsError(f"{self.name}[{win}] is outside {self.name}'s shape {shape}", o.loc,
                             hint="check the dynamic indices (ml.ds starts, program ids) of this access")

  def clip(self):
    """(root index, box index) of the part of a TMA box inside the root, or None: TMA
    reads zeros outside a GMEM tensor and drops writes there."""
    g, b = [], []
    for (s, n, sq), d in zip(self.win, self.root.type.shape):
      lo, hi = max(s, 0), min(s + n, d)
      if hi <= lo:
        return None
      g.append(s if sq else slice(lo, hi))
      if not sq:
        b.append(slice(lo - s, hi - s))
    return tuple(g), tuple(b)


def _full_window(v: ir.Value) -> tuple:
  return tuple((0, n, False) for n in v.type.shape)


def _element(index, bad) -> tuple:
  """The root coordinates of the first True of `bad` (taken at `index` of the root)."""
  off = iter(np.argwhere(np.asarray(bad))[0])
  return tuple(i if isinstance(i, (int, np.integer)) else i.start + int(next(off)) for i in index)


# ---------------------------------------------------------------- the machine
class Machine:
  """GMEM, who wrote and read each output element, and the current cluster's phase log."""

  def __init__(self, kernel: ir.Kernel, args):
    self.kernel = kernel
    self.gmem = {p.value.id: np.array(a, dtype=np_dtype(p.value.type.dtype))
                 for p, a in zip(kernel.inputs, args)}
    self.writers, self.readers, self.wlocs = {}, {}, {}
    for p in kernel.outputs:
      shape, d = p.value.type.shape, p.value.type.dtype
      self.gmem[p.value.id] = poison(shape, d)
      self.writers[p.value.id] = np.full(shape, -1, np.int64)
      self.readers[p.value.id] = np.full(shape, -1, np.int64)
    self.csize = int(np.prod(kernel.cluster))
    self.ctas: list[CTA] = []
    self.phase: dict = {}

  def pid_of(self, lin: int) -> tuple:
    gx, gy, _ = self.kernel.grid
    return (lin % gx, lin // gx % gy, lin // (gx * gy))

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

  # -------------------------------------------------------------- race bookkeeping
  def gmem_access(self, cta, ref, index, o, write: bool):
    """Record a program's access to output elements; two programs meeting there is a race."""
    rid = ref.root.id
    if rid not in self.writers:
      return
    w, r = self.writers[rid], self.readers[rid]
    bad = (w[index] >= 0) & (w[index] != cta.lin)
    if write:
      bad |= (r[index] >= 0) & (r[index] != cta.lin) | (r[index] == -2)
    if np.any(bad):
      elem = _element(index, bad)
      other = int(w[elem]) if w[elem] >= 0 and w[elem] != cta.lin else int(r[elem])
      who = f"program {self.pid_of(other)}" if other >= 0 else "another program"
      notes = ((f"{self.wlocs[(rid, other)]}: {who} writes it here",)
               if (rid, other) in self.wlocs else ())
      raise RaceError(
          f"{who} and program {cta.pid} both access {ref.name}{list(elem)}, and one writes it:"
          f" programs run in no fixed order, so the result depends on timing",
          self.kernel.loc, notes=notes + (f"{o.loc}: program {cta.pid} accesses it here",),
          hint="give each program its own window of the output, e.g. out.at[ml.ds(ml.program_id(0) * 128, 128)]")
    if write:
      w[index] = cta.lin
      self.wlocs[(rid, cta.lin)] = o.loc
    else:
      r[index] = np.where((r[index] == -1) | (r[index] == cta.lin), cta.lin, -2)

  def smem_phase(self, cta, ref, o, write: bool):
    """Record a CTA's access to a cluster's SMEM between two cluster_syncs."""
    if self.csize == 1:
      return
    key = (ref.owner, ref.root.id)
    if key not in self.phase:
      shape = ref.root.type.shape
      self.phase[key] = (np.full(shape, -1, np.int16), np.zeros(shape, np.int32), {})
    w, r, locs = self.phase[key]
    idx, me = ref.index, cta.rank
    bad = (w[idx] >= 0) & (w[idx] != me)
    if write:
      bad |= (r[idx] & ~(1 << me)) != 0
    if np.any(bad):
      elem = _element(idx, bad)
      mask = int(r[elem]) & ~(1 << me)
      other = int(w[elem]) if w[elem] >= 0 and w[elem] != me else (mask & -mask).bit_length() - 1
      raise RaceError(
          f"program {cta.pid} {'writes' if write else 'reads'} {ref.name}{list(elem)} of program"
          f" {self.ctas[ref.owner].pid} while program {self.ctas[other].pid} also uses it between the"
          f" same two ml.cluster_sync() calls", o.loc,
          notes=(f"{locs[other]}: program {self.ctas[other].pid} accesses it here",),
          hint="separate the write from the other access with ml.cluster_sync()")
    if write:
      w[idx] = me
    else:
      r[idx] |= 1 << me
    locs[me] = o.loc

  def check_exit(self, c):
    """A CTA may not exit while a peer still uses its SMEM in the same phase."""
    for (owner, _), (w, r, locs) in self.phase.items():
      others = [k for k in locs if k != owner]
      if owner == c.rank and others:
        k = others[0]
        raise RaceError(
            f"program {self.ctas[k].pid} uses the SMEM of program {c.pid}, which may already have"
            f" exited", locs[k], hint="end the kernel with ml.cluster_sync() so no CTA exits while a"
            " peer still reads or writes its SMEM")


class CTA:
  """One program: its values, its SMEM, and what its asynchronous copies have in flight."""

  def __init__(self, m: Machine, pid: tuple, rank: int):
    self.m, self.pid, self.rank = m, pid, rank
    gx, gy, _ = m.kernel.grid
    self.lin = pid[0] + gx * (pid[1] + gy * pid[2])
    self.env: dict[int, object] = {}
    self.smem = {v.id: poison(v.type.shape, v.type.dtype) for v in m.kernel.smem}
    self.pending_load: dict[int, tuple] = {}   # root id -> (slot, loc of the copy)
    self.pending_store: dict[int, object] = {}  # root id -> loc of the TMA store reading it
    self.unfenced: dict[int, object] = {}       # root id -> loc of a register write, no fence since
    self.touched: set[int] = set()              # roots used from registers since the last barrier
    self.sync_loc = None

  def get(self, v: ir.Value):
    return self.env[v.id]

  def set(self, v: ir.Value, x):
    self.env[v.id] = x

  def operand(self, x, d: DType | None = None):
    if isinstance(x, ir.Value):
      return self.env[x.id]
    return const(x, d) if d is not None else x

  def buffer(self, ref: Ref) -> np.ndarray:
    return self.m.gmem[ref.root.id] if ref.owner < 0 else self.m.ctas[ref.owner].smem[ref.root.id]

  def main(self):
    k = self.m.kernel
    for p in k.params:
      self.set(p.value, Ref(p.value, -1, _full_window(p.value)))
    yield from self.block(k.body)
    if self.pending_load:
      _, loc = next(iter(self.pending_load.values()))
      raise RaceError("the kernel ends before this async copy lands", loc, hint=COMPILER_BUG)
    if self.pending_store:
      raise RaceError("the kernel ends while this TMA store may still be in flight",
                      next(iter(self.pending_store.values())), hint=COMPILER_BUG)

  def block(self, blk: ir.Block):
    """Run a block's ops; returns the values of its Yield (a generator: pauses at cluster_sync)."""
    for o in blk.ops:
      if type(o) is ir.Yield:
        return [self.get(v) for v in o.values]
      try:
        r = INTERPRET_RULES[type(o)](self, o)
        if r is not None:
          yield from r
      except E.KernelError:
        raise
      except Exception as e:
        raise E.InternalError(
            f"the interpreter failed on this {type(o).__name__} operation: {type(e).__name__}: {e}",
            o.loc, hint="this is a bug in mgpu_dsl, not in your kernel; please report it") from e
    return []

  # -------------------------------------------------------------- memory accesses
  def smem_sync(self, ref: Ref, o, kind: str):
    """Check one SMEM access against what is in flight; kind: read, write, tma_write, tma_read."""
    owner = self.m.ctas[ref.owner]
    rid, name, local = ref.root.id, ref.name, ref.owner == self.rank
    if rid in owner.pending_load:
      slot, at = owner.pending_load[rid]
      what = {"read": f"{name} is read before its async copy landed",
              "write": f"{name} is written while an async copy into it is in flight",
              "tma_write": f"a second async copy into {name} starts before the first landed",
              "tma_read": f"{name} is stored before its async copy landed"}[kind]
      raise RaceError(what, o.loc, notes=(f"{at}: the async copy (slot {slot}) starts here",), hint=COMPILER_BUG)
    if kind in ("write", "tma_write") and rid in owner.pending_store:
      raise RaceError(f"{name} is overwritten while a TMA store may still be reading it", o.loc,
                      notes=(f"{owner.pending_store[rid]}: the TMA store starts here",), hint=COMPILER_BUG)
    if local and kind == "tma_write" and rid in self.touched:
      raise RaceError(f"an async copy overwrites {name} while threads may still use it from registers"
                      " (no barrier since)", o.loc, hint=COMPILER_BUG)
    if local and kind == "tma_read" and rid in self.unfenced:
      raise RaceError(f"a TMA store reads {name}, written from registers, without a fence"
                      " (commit_shared) in between", o.loc,
                      notes=(f"{self.unfenced[rid]}: {name} is written here",), hint=COMPILER_BUG)
    if local and kind in ("read", "write"):
      self.touched.add(rid)
      if kind == "write":
        self.unfenced[rid] = o.loc

  def read(self, ref: Ref, o, tma: bool = False) -> np.ndarray:
    if ref.owner >= 0:
      ref.check_bounds(o)
      self.smem_sync(ref, o, "tma_read" if tma else "read")
      self.m.smem_phase(self, ref, o, write=False)
      return self.buffer(ref)[ref.index].copy()
    if not tma:
      ref.check_bounds(o)
    shape = tuple(n for _, n, sq in ref.win if not sq)
    out = np.zeros(shape, np_dtype(ref.root.type.dtype))
    if (c := ref.clip()) is not None:
      self.m.gmem_access(self, ref, c[0], o, write=False)
      out[c[1]] = self.buffer(ref)[c[0]]
    return out

  def write(self, ref: Ref, data: np.ndarray, o, tma: bool = False):
    if ref.owner >= 0:
      ref.check_bounds(o)
      self.smem_sync(ref, o, "tma_write" if tma else "write")
      self.m.smem_phase(self, ref, o, write=True)
      self.buffer(ref)[ref.index] = data
      return
    if not tma:
      ref.check_bounds(o)
    if (c := ref.clip()) is not None:
      self.m.gmem_access(self, ref, c[0], o, write=True)
      self.buffer(ref)[c[0]] = data[c[1]]


# ---------------------------------------------------------------- rules: grid, constants, refs
@rule(ir.ProgramId)
def _program_id(cta, o):
  cta.set(o.result, np.asarray(cta.pid[o.axis], np.int32))


@rule(ir.NumPrograms)
def _num_programs(cta, o):
  cta.set(o.result, np.asarray(cta.m.kernel.grid[o.axis], np.int32))


@rule(ir.Constant)
def _constant(cta, o):
  cta.set(o.result, const(o.value, o.result.type.dtype))


@rule(ir.SmemAlloc)
def _smem_alloc(cta, o):
  cta.set(o.result, Ref(o.result, cta.rank, _full_window(o.result)))


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
  cta.write(dst, cta.read(src, o, tma=True), o, tma=True)
  if dst.owner >= 0:                 # GMEM -> SMEM lands at the matching WaitLoad
    cta.pending_load[dst.root.id] = (o.slot, o.loc)
  else:                              # SMEM -> GMEM reads SMEM until AwaitStores
    cta.pending_store[src.root.id] = o.loc


# ---------------------------------------------------------------- rules: synchronisation
@rule(ir.WaitLoad)
def _wait_load(cta, o):
  for rid in [r for r, (slot, _) in cta.pending_load.items() if slot == o.slot]:
    del cta.pending_load[rid]


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


# ---------------------------------------------------------------- rules: arithmetic
@rule(ir.Binary)
def _binary(cta, o):
  d = o.result.type.dtype
  a, b = cta.operand(o.lhs, d), cta.operand(o.rhs, d)
  if d.is_float:
    c = _compute_dtype(d)
    r = _FLOAT_BIN[o.kind](a.astype(c), b.astype(c))
  else:
    if o.kind in (B.FLOORDIV, B.MOD) and np.any(b == 0):
      raise InterpretError(f"integer {o.kind.value} by zero (undefined on the GPU)", o.loc)
    r = _INT_BIN[o.kind](a, b)
  cta.set(o.result, np.asarray(r).astype(np_dtype(d)))


@rule(ir.Compare)
def _compare(cta, o):
  d = next(x.type.dtype for x in (o.lhs, o.rhs) if isinstance(x, ir.Value))
  c = _compute_dtype(d)
  a, b = cta.operand(o.lhs, d).astype(c), cta.operand(o.rhs, d).astype(c)
  cta.set(o.result, np.asarray(_CMP[o.kind](a, b)))


@rule(ir.Unary)
def _unary(cta, o):
  x, d = cta.get(o.x), o.x.type.dtype
  if d.is_float:
    r = _FLOAT_UN[o.kind](x.astype(_compute_dtype(d)))
  else:
    r = _INT_UN[o.kind](x)
  cta.set(o.result, np.asarray(r).astype(np_dtype(d)))


@rule(ir.Where)
def _where(cta, o):
  t = o.result.type
  r = np.where(cta.get(o.cond), cta.operand(o.on_true, t.dtype), cta.operand(o.on_false, t.dtype))
  cta.set(o.result, np.array(np.broadcast_to(r, t.shape), np_dtype(t.dtype)))


@rule(ir.Cast)
def _cast(cta, o):
  cta.set(o.result, np.asarray(cast(cta.get(o.x), o.x.type.dtype, o.result.type.dtype)))


@rule(ir.Full)
def _full(cta, o):
  t = o.result.type
  cta.set(o.result, np.full(t.shape, cta.operand(o.value, t.dtype), np_dtype(t.dtype)))


@rule(ir.Arange)
def _arange(cta, o):
  t = o.result.type
  shape = [1] * len(t.shape)
  shape[o.dim] = t.shape[o.dim]
  r = np.arange(t.shape[o.dim]).reshape(shape)
  cta.set(o.result, np.array(np.broadcast_to(r, t.shape), np_dtype(t.dtype)))


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
