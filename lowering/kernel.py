"""Typed IR kernel -> `mgpu.as_gpu_kernel` -> a jax-callable (a `mosaic_gpu` custom call).

Every op is emitted under `ir.Location.file(user_file, line, col)`, and any
exception Mosaic GPU raises while emitting it becomes an `InternalError` at
that user line.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools

import jax
import jax.numpy as jnp
import jax.experimental.mosaic.gpu as mgpu
from jax._src.interpreters import mlir as jax_mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu, llvm, memref, scf

from ..frontend import errors as E
from ..frontend import hw
from ..frontend import ir as kir
from ..frontend.dtypes import DType
from ..frontend.types import LayoutKind, TensorType
from ..frontend.ops.control import BarrierAlloc, Condition, WarpSpecialize, Yield
from . import platforms, registry
from .barriers import make_convergent
from .module_size import size_warning
from .bool_memory import bool_boundary, mem_shape, mem_type
from .mosaic import is_split, to_index

MAX_BARRIERS_PER_GROUP = hw.MAX_BARRIERS_PER_GROUP
CONSUMER_BARRIER_ID = 15      # named barrier of a warp-specialised kernel's compute threads
TURN_BARRIER_ID = 12          # named barriers 12 and 13: warpgroup 0's and 1's turn of a ping-pong loop
registry.load()
platforms.register()


def jax_dtype(d):
  return jnp.dtype(d.numpy_name)


def shape_dtype(t):
  return jax.ShapeDtypeStruct(tuple(t.shape), jax_dtype(t.dtype))


@dataclasses.dataclass
class View:
  ref: object            # the root memref (ir.Value)
  index: tuple           # tuple[kir.Idx]
  root_id: int           # the typed-IR root ref's value id
  transpose: bool = False   # `buf.T`: ml.dot transposes the memref (memref() returns it as stored)


class LowerCtx:
  View = View

  def __init__(self, kernel: kir.Kernel, launch, params, smem_refs, barrier_groups, role_barriers=None):
    self.kernel = kernel
    self.role = None             # "producer" / "consumer" inside a WarpSpecialize op
    self.role_barriers = role_barriers or {}   # BarrierAlloc value id -> BarrierRef
    self.launch = launch
    self.values: dict[int, object] = {}
    self.params = params
    self.smem_refs = smem_refs
    self.barrier_groups = barrier_groups
    self.tma_predicate = mgpu.single_thread_predicate(mgpu.ThreadSubset.BLOCK)
    self.root_ids = {id(r): rid for rid, r in smem_refs.items()}
    # With several warpgroups, a WGMMA-layout (tensor-core) tensor is split by rows:
    # warpgroup w holds rows [w * m / W, (w + 1) * m / W).
    self.num_warpgroups = kernel.block // hw.WARPGROUP
    self.wg = None
    if self.num_warpgroups > 1:
      self.wg = arith.index_cast(ir.IndexType.get(), mgpu.warpgroup_idx(sync=True))

  @functools.cached_property
  def defs(self) -> dict:
    """Value id -> the typed-IR op defining it (lowering/index_compare.py reads how index grids were made)."""
    return kir.def_table(self.kernel.body)

  def local_shape(self, t) -> tuple[int, ...]:
    """The shape this warpgroup's FragmentedArray has for a tensor of type `t`: size-1 axes
    of row and column vectors squeezed, tensor-core rows split among warpgroups."""
    shape = t.layout.register_shape(t.shape)
    if self.num_warpgroups > 1 and is_split(t):
      return (shape[0] // self.num_warpgroups,) + tuple(shape[1:])
    return tuple(shape)

  def my_rows(self, mem, rows: int, tiled):
    """This warpgroup's rows of a memref holding a WGMMA-layout tile (rows tiled by 8 if tiled)."""
    if self.num_warpgroups == 1:
      return mem
    per = rows // self.num_warpgroups
    if tiled is not None:
      per //= tiled.tile[0]
    start = arith.muli(self.wg, arith.constant(ir.IndexType.get(), per))
    return mgpu.memref_slice(mem, mgpu.ds(start, per))

  def get(self, v: kir.Value):
    """The lowered value; a tensor-core accumulator is read as a FragmentedArray."""
    x = self.values[v.id]
    if isinstance(x, mgpu.WGMMAAccumulator):
      # Not cached: the first read may sit inside an scf.if or loop body, and a value
      # made there does not dominate reads after it (MLIR verification fails).
      x = x.value
    return x

  def carried(self, v: kir.Value):
    """A value as loops carry it: WGMMA-layout tensors as accumulators (no layout round trips). An 8-bit one (a
    register A operand carried across trips) stays a FragmentedArray: no accumulator is 8-bit, and Mosaic GPU's
    fence of an accumulator (an optimization barrier of whole 32-bit registers) takes no two-byte register."""
    x = self.values[v.id]
    if (isinstance(v.type, TensorType) and v.type.layout.kind == LayoutKind.WGMMA and not v.type.layout.drop
        and getattr(v.type.dtype, "bits", 32) >= 16 and not isinstance(x, mgpu.WGMMAAccumulator)):
      x = mgpu.WGMMAAccumulator.from_registers(x)
    return x

  def smem_layout(self, ref):
    """The tiling of the SMEM root under `ref`, or None when it is untiled."""
    rid = ref.root_id if isinstance(ref, View) else self.root_ids.get(id(ref))
    return self.kernel.smem_layouts.get(rid)

  def set(self, v: kir.Value, x):
    self.values[v.id] = x

  def barrier(self, slot: int, stage=0):
    """The mbarrier of load site `slot` (+ `stage`, an int or a lowered i32 scalar)."""
    group = self.barrier_groups[slot // MAX_BARRIERS_PER_GROUP]
    if isinstance(stage, kir.Value):
      offset = arith.addi(arith.constant(ir.IntegerType.get_signless(32), slot % MAX_BARRIERS_PER_GROUP),
                          self.get(stage))
      return group[offset]
    return group[slot % MAX_BARRIERS_PER_GROUP + stage]

  def thread_barrier(self):
    """All threads of the running role (of the CTA outside roles) meet."""
    threads = self.kernel.block if self.role != "producer" else hw.WARPGROUP
    if self.role is None and warp_specialized(self.kernel):
      threads += hw.WARPGROUP
    if threads == hw.WARPGROUP:
      mgpu.utils.warpgroup_barrier()
    elif self.role is None:
      gpu.barrier()
    else:
      llvm.inline_asm(ir.Type.parse("!llvm.void"), [], f"bar.sync {CONSUMER_BARRIER_ID}, {threads};", "",
                      has_side_effects=True)

  def turn(self, take: bool, only):
    """A ping-pong loop's turn (frontend/pingpong.py): warpgroup w takes it by waiting on named
    barrier TURN_BARRIER_ID + w, which completes when the other warpgroup has arrived there
    (passed it); run by both warpgroups, or only by warpgroup `only`."""
    i32 = ir.IntegerType.get_signless(32)
    wg = arith.index_cast(i32, self.wg)
    mine = wg if take else arith.subi(arith.constant(i32, 1), wg)
    bar = arith.addi(mine, arith.constant(i32, TURN_BARRIER_ID))
    asm = lambda: llvm.inline_asm(ir.Type.parse("!llvm.void"), [bar],
                                  f"bar.{'sync' if take else 'arrive'} $0, {self.kernel.block};", "r",
                                  has_side_effects=True)
    if only is None:
      asm()
      return
    branch = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, self.wg, arith.constant(ir.IndexType.get(), only)))
    with ir.InsertionPoint(branch.then_block):
      asm()
      scf.yield_([])

  @contextlib.contextmanager
  def in_role(self, role: str):
    """Lower a role's ops: its barriers meet its threads; its TMA copies are issued by one of them."""
    saved = self.role, self.tma_predicate
    self.role = role
    if role == "producer":
      self.tma_predicate = mgpu.single_thread_predicate(mgpu.ThreadSubset.WARPGROUP)
    try:
      yield
    finally:
      self.role, self.tma_predicate = saved

  def _slices(self, index, dims=None):
    """Mosaic GPU's indices of a window. With `dims` (a TMA copy's GMEM side), run-time starts are
    clamped to [-size, dim]: TMA coordinates are int32, so a start past them (an int64 one, or a uint32
    one of 2**31 or more, which index_cast would make negative) could land inside the array, where the
    window it names lies wholly outside it (TMA reads zeros and drops writes there, as interpret mode)."""
    out = []
    for k, i in enumerate(index):
      start = self.get(i.start) if isinstance(i.start, kir.Value) else i.start
      if dims is not None and isinstance(start, ir.Value):
        start = _tma_coordinate(start, i, dims[k])
      if i.squeeze:
        out.append(to_index(start))
      elif isinstance(start, int) and start >= 0:
        out.append(slice(start, start + i.size))
      elif isinstance(start, int):     # before 0 (TMA reads zeros there): a constant, not a Python
        out.append(mgpu.ds(arith.constant(ir.IndexType.get(), start), i.size))    # slice, whose -1 is the last
      else:
        out.append(mgpu.ds(to_index(start), i.size))
    return tuple(out)

  def _tile_slice(self, i, t: int):
    """The tiles window `i` of a tiled dimension covers (tiles of `t`): its start is a static multiple
    of t, or a run-time one the frontend proved one (layout_checks' whole_tiles)."""
    if isinstance(i.start, int):
      return slice(i.start // t, (i.start + i.size) // t)
    start = arith.divsi(to_index(self.get(i.start)), arith.constant(ir.IndexType.get(), t))
    return mgpu.ds(start, i.size // t)

  def memref(self, ref):
    """A memref for a root ref or a View (memref_slice of the root).

    A tiled root (leading dims, then tiles of rows and of columns, then a tile) is viewed along
    its leading (stage) dimensions and, for TMA copies, by whole tiles (the frontend checks).
    """
    if isinstance(ref, View):
      tiled = self.kernel.smem_layouts.get(ref.root_id)
      if tiled is None:
        return mgpu.memref_slice(ref.ref, self._slices(ref.index)) if ref.index else ref.ref
      lead = self._slices(ref.index[:-2])
      tiles = tuple(self._tile_slice(i, t) for i, t in zip(ref.index[-2:], tiled.tile))
      if all(isinstance(i.start, int) and i.start == 0 and i.size == n * t for i, n, t in
             zip(ref.index[-2:], ir.MemRefType(ref.ref.type).shape[-4:-2], tiled.tile)):
        tiles = ()           # the whole tile grid
      index = lead + tiles
      return mgpu.memref_slice(ref.ref, index) if index else ref.ref
    return ref

  def gmem_window(self, ref):
    """(kernel argument, gmem_slice) for a TMA copy: Mosaic wants the argument itself."""
    if isinstance(ref, View):
      return ref.ref, self._slices(ref.index, dims=ir.MemRefType(ref.ref.type).shape)
    return ref, ()

  def lower_block(self, block: kir.Block, yield_fn=None, carried=False):
    for o in block.ops:
      if isinstance(o, (Yield, Condition)):
        vals = [self.carried(v) if carried else self.get(v) for v in o.values]
        yield_fn([self.get(o.cond), *vals] if isinstance(o, Condition) else vals)
        continue
      self.lower_op(o)

  def lower_op(self, o):
    loc = o.loc
    with ir.Location.file(loc.filename, loc.lineno, loc.col_offset + 1):
      try:
        rule = registry.LOWER.get(type(o))
        if rule is None:
          raise E.InternalError(f"no Mosaic GPU lowering rule for {type(o).__name__}", loc)
        rule(self, o)
      except E.KernelError:
        raise
      except Exception as e:
        raise E.InternalError.wrap(
            f"Mosaic GPU failed while compiling this {type(o).__name__} operation", e, loc) from e


def _tma_coordinate(start: ir.Value, i, dim: int) -> ir.Value:
  """A run-time start of a TMA window, as an index clamped to [-size, dim] (see `_slices`); the
  same where it lies there."""
  d = getattr(getattr(i.start, "type", None), "dtype", None)
  unsigned = isinstance(d, DType) and d.is_int and not d.is_signed
  if start.type != ir.IndexType.get():
    start = (arith.index_castui if unsigned else arith.index_cast)(ir.IndexType.get(), start)
  lo = arith.constant(ir.IndexType.get(), -(1 if i.squeeze else i.size))
  return arith.minsi(arith.maxsi(start, lo), arith.constant(ir.IndexType.get(), dim))


def warp_specialized(kernel: kir.Kernel) -> bool:
  """Whether the kernel runs a producer warpgroup besides its `block` compute threads."""
  return any(isinstance(o, WarpSpecialize) for o in kernel.body.ops)


def scratch_tree(kernel: kir.Kernel):
  """SMEM scratch for as_gpu_kernel: the barrier groups (TMA load barriers, then the
  compiler's barrier values), then one byte arena that holds every buffer at the offset
  frontend/smem.py planned (buffers may share memory)."""
  plan = kernel.smem_plan
  tree, n = [], kernel.num_load_slots
  while n > 0:
    k = min(n, MAX_BARRIERS_PER_GROUP)
    tree.append(mgpu.TMABarrier(k))
    n -= k
  groups = list(range(len(tree)))
  roles = {}
  for o in kernel.body.ops:
    if isinstance(o, BarrierAlloc):
      roles[o.result.id] = len(tree)
      t = o.result.type
      if t.arrivals < 1:   # an mbarrier of no arrivals never completes a phase: the GPU would hang
        raise E.InternalError(f"a barrier of {t.arrivals} arrivals ({t})", o.loc)
      if t.cluster_axis is None:
        tree.append(mgpu.Barrier(arrival_count=t.arrivals, num_barriers=t.count))
      else:   # each warpgroup arrives once, on this CTA's barrier and its peers' along the axis;
        # Mosaic GPU multiplies the count by the CTAs along the axis
        dim = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)[t.cluster_axis]
        tree.append(mgpu.ClusterBarrier((dim,), arrival_count=t.arrivals, num_barriers=t.count))
  arena_start = min(plan.offsets, default=plan.barrier_bytes)
  if arena_start > plan.barrier_bytes:
    tree.append(jax.ShapeDtypeStruct((arena_start - plan.barrier_bytes,), jnp.int8))
  arena = None
  if kernel.smem:
    arena = len(tree)
    tree.append(jax.ShapeDtypeStruct((plan.total - arena_start,), jnp.int8))
  return tuple(tree), groups, roles, arena, arena_start


def buffer_views(kernel: kir.Kernel, arena_ref, arena_start: int) -> dict:
  """Typed SMEM memrefs of the kernel's buffers, carved out of the arena."""
  out = {}
  for buf, off in zip(kernel.smem, kernel.smem_plan.offsets):
    shape = tuple(buf.type.shape)
    if kernel.smem_plan.shared_scratch and buf.id in kernel.scratch_ids:    # the whole shared place
      shape = (kernel.smem_plan.scratch_region // buf.type.dtype.itemsize,)
    tiled = kernel.smem_layouts.get(buf.id)
    if tiled is not None:
      shape = shape[:-2] + mgpu.tile_shape(shape[-2:], tiled.tile)
    ty = ir.MemRefType.get(shape, mem_type(buf.type.dtype), memory_space=mgpu.utils.smem())
    out[buf.id] = memref.view(ty, arena_ref, arith.constant(ir.IndexType.get(), off - arena_start), [])
  return out


def build(kernel: kir.Kernel):
  """The jax-callable of `kernel` (jitted; inputs -> tuple of outputs).

  Outputs that start with values are inouts of the Mosaic GPU kernel: an output aliased to
  an input (`kernel.aliases`) starts as the input (the custom call aliases that operand to
  its result, so XLA updates the buffer in place when the caller donates it), one updated by
  atomics (`kernel.accumulated`) as its operation's identity."""
  from .platforms import KERNEL_LOCS
  KERNEL_LOCS[kernel.name] = kernel.loc      # where a NoGpuError at lowering points (its def)
  ins, outs = kernel.inputs, kernel.outputs
  aliased = sorted(kernel.aliases.items(), key=lambda io: io[1])        # (input, output) pairs
  plain_in = [i for i in range(len(ins)) if i not in kernel.aliases]
  acc = [o for o, p in enumerate(outs) if p.value.id in kernel.accumulated and o not in kernel.aliases.values()]
  inout = [o for _, o in aliased] + acc
  plain_out = [o for o in range(len(outs)) if o not in inout]
  shapes = lambda idx: tuple(mem_shape(outs[k].value.type) for k in idx)
  scratch, groups, roles, arena, arena_start = scratch_tree(kernel)
  # as_gpu_kernel's refs: plain inputs, inouts, plain outputs; its results: plain outputs, inouts.
  order = [ins[i].value.id for i in plain_in] + [outs[o].value.id for o in inout + plain_out]
  same = {ins[i].value.id: outs[o].value.id for i, o in aliased}     # an aliased input is its output

  large = []        # the ModuleSizeWarning to issue once the module is built

  def body(launch, *args):
    *refs, scratch_refs = args
    by_id = dict(zip(order, refs))
    refs = [by_id[same.get(p.value.id, p.value.id)] for p in kernel.params]
    barrier_groups = [scratch_refs[g] for g in groups]
    with ir.Location.file(kernel.loc.filename, kernel.loc.lineno, kernel.loc.col_offset + 1):
      smem_refs = buffer_views(kernel, scratch_refs[arena], arena_start) if arena is not None else {}
      ctx = LowerCtx(kernel, launch, refs, smem_refs, barrier_groups,
                     {v: scratch_refs[i] for v, i in roles.items()})
    for p, r in zip(kernel.params, refs):
      ctx.set(p.value, r)
    ctx.lower_block(kernel.body)
    make_convergent(ir.InsertionPoint.current.block.owner)   # the gpu.launch: its barriers (barriers.py)
    large[:] = [size_warning(kernel, ir.InsertionPoint.current.block.owner)]    # (module_size.py)

  with jax_mlir.make_ir_context(), ir.Location.unknown():
    try:
      fn = mgpu.as_gpu_kernel(
          body, grid=kernel.grid,
          block=(kernel.block + (hw.WARPGROUP if warp_specialized(kernel) else 0), 1, 1),
          in_shape=tuple(mem_shape(ins[i].value.type) for i in plain_in),
          out_shape=shapes(plain_out), smem_scratch_shape=scratch, cluster=kernel.cluster,
          module_name=kernel.name, kernel_name=kernel.name, inout_shape=shapes(inout))
    except E.KernelError:
      raise
    except Exception as e:
      raise E.InternalError.wrap(f"Mosaic GPU could not build kernel {kernel.name}", e, kernel.loc) from e
  if large and large[0] is not None:
    E.warn(large[0], E.ModuleSizeWarning)
  bool_io = any(p.value.type.dtype == DType.bool_ for p in kernel.params)
  if bool_io:                                   # bool refs are bytes (bool_memory)
    true = lambda idx: tuple(shape_dtype(outs[k].value.type) for k in idx)
    fn = bool_boundary(fn, [mem_shape(ins[i].value.type) for i in plain_in] + list(shapes(inout)),
                       true(plain_out), true(inout))
  if not inout:
    return fn
  from ..frontend.ops.atomic import identity
  result_of = {o: k for k, o in enumerate(plain_out + inout)}

  def with_inouts(*args):
    inits = [jnp.full(s.shape, identity(kernel.accumulated[outs[o].value.id], outs[o].value.type.dtype),
                      jnp.bool_ if bool_io and outs[o].value.type.dtype == DType.bool_ else s.dtype)
             for o, s in zip(acc, shapes(acc))]        # (a bool output's zeros are bools at the boundary)
    res = fn(*[args[i] for i in plain_in], *[args[i] for i, _ in aliased], *inits)
    return tuple(res[result_of[o]] for o in range(len(outs)))
  return with_inouts


def module_text(fn, in_shapes) -> str:
  """The Mosaic GPU module inside the custom call of a built kernel, as MLIR text."""
  jaxpr = jax.make_jaxpr(fn)(*in_shapes)
  for eqn in _eqns(jaxpr.jaxpr):
    if "module" in eqn.params:
      return str(eqn.params["module"])
  raise RuntimeError("no Mosaic GPU module found in the kernel's jaxpr")


def _eqns(jaxpr):
  for eqn in jaxpr.eqns:
    yield eqn
    for p in eqn.params.values():
      inner = getattr(p, "jaxpr", None)
      if inner is not None:
        yield from _eqns(getattr(inner, "jaxpr", inner))
