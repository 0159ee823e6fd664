"""One lowering rule per typed-IR op: typed IR -> Mosaic GPU (Lane semantics).

The frontend has proved every op legal, so nothing here reports a user
mistake; an exception raised while lowering is wrapped as an InternalError at
the op's source line (lowering/kernel.py).

Register tensors are FragmentedArrays in one strided layout per shape
(`strided_layout`), so any two tensors of a shape combine without conversion.
"""
from __future__ import annotations

import jax
import jax.experimental.mosaic.gpu as mgpu
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu, nvvm, scf

from ..frontend import ir as kir
from ..frontend.dtypes import DType
from ..frontend.types import Layout, ScalarType, TensorType
from . import compat

RULES: dict[type, callable] = {}


def rule(*ops):
  def deco(fn):
    for o in ops:
      RULES[o] = fn
    return fn
  return deco


# ---------------------------------------------------------------- types
def mlir_type(d: DType) -> ir.Type:
  return {
      DType.f32: ir.F32Type.get, DType.f16: ir.F16Type.get, DType.bf16: ir.BF16Type.get,
      DType.f8e4m3: ir.Float8E4M3FNType.get, DType.f8e5m2: ir.Float8E5M2Type.get,
      DType.bool_: lambda: ir.IntegerType.get_signless(1),
  }.get(d, lambda: ir.IntegerType.get_signless(d.bits))()


def i32():
  return ir.IntegerType.get_signless(32)


def index():
  return ir.IndexType.get()


def strided_layout(shape) -> fa.WGStridedFragLayout:
  n = 1
  for s in shape:
    n *= s
  for v in (4, 2, 1):
    if n % (128 * v) == 0 and shape[-1] % v == 0:
      return fa.WGStridedFragLayout(shape=tuple(shape), vec_size=v)
  raise AssertionError(f"no strided layout for {shape}")   # frontend checks prod % 128


def layout_of(t: TensorType):
  if t.layout == Layout.WGMMA:
    return fa.WGMMA_LAYOUT
  if t.layout == Layout.COL:
    return fa.WGMMA_COL_LAYOUT
  return strided_layout(t.shape)


def flat_types(ctx, t) -> list[ir.Type]:
  """The MLIR types a value of typed-IR type `t` flattens to (scf.if results)."""
  if isinstance(t, ScalarType):
    return [mlir_type(t.dtype)]
  layout = layout_of(t)
  n = 1
  for s in layout.registers_shape(ctx.local_shape(t)):
    n *= s
  return [layout.registers_element_type(mlir_type(t.dtype))] * n


# ---------------------------------------------------------------- helpers
def to_index(x) -> ir.Value | int:
  if isinstance(x, int):
    return x
  return arith.index_cast(index(), x)


def scalar_const(value, d: DType) -> ir.Value:
  t = mlir_type(d)
  if d.is_float:
    return arith.constant(t, float(value))
  return arith.constant(t, int(value))


def as_array(ctx, x, like_type: TensorType, d: DType):
  """A FragmentedArray for operand `x`: tensors as they are, scalars splatted."""
  if isinstance(x, fa.FragmentedArray):
    shape = ctx.local_shape(like_type)
    if x.shape != shape:     # a column vector broadcast over the tile's rows
      x = x.broadcast_in_dim(shape, (1,), layout_of(like_type))
    return x
  if not isinstance(x, ir.Value):
    x = scalar_const(x, d)
  return fa.FragmentedArray.splat(x, ctx.local_shape(like_type), layout_of(like_type),
                                  is_signed=d.is_signed)


def operand(ctx, x):
  return ctx.get(x) if isinstance(x, kir.Value) else x


# ---------------------------------------------------------------- grid, constants
@rule(kir.ProgramId, kir.NumPrograms)
def _program_id(ctx, o):
  dim = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)[o.axis]
  fn = gpu.block_id if isinstance(o, kir.ProgramId) else gpu.grid_dim
  ctx.set(o.result, arith.index_cast(i32(), fn(dim)))


@rule(kir.Constant)
def _constant(ctx, o):
  ctx.set(o.result, scalar_const(o.value, o.result.type.dtype))


# ---------------------------------------------------------------- refs
@rule(kir.SmemAlloc)
def _smem_alloc(ctx, o):
  ctx.set(o.result, ctx.smem_refs[o.result.id])


@rule(kir.View)
def _view(ctx, o):
  ctx.set(o.result, ctx.View(ctx.get(o.ref), o.index, o.ref.id))


@rule(kir.ClusterRef)
def _cluster_ref(ctx, o):
  dim = (gpu.Dimension.x, gpu.Dimension.y, gpu.Dimension.z)[o.axis]
  cta = operand(ctx, o.cta)
  cta = arith.constant(index(), cta) if isinstance(cta, int) else to_index(cta)
  ctx.set(o.result, mgpu.utils.get_cluster_ref(ctx.memref(ctx.get(o.ref)), dim, cta))


@rule(kir.Load)
def _load(ctx, o):
  t = o.result.type
  ref = ctx.get(o.ref)
  tiled = ctx.smem_layout(ref)
  mem = ctx.memref(ref)
  if t.layout == Layout.WGMMA:
    mem = ctx.my_rows(mem, t.shape[0], tiled)
  if tiled is not None:
    x = fa.FragmentedArray.load_tiled(mem, swizzle=tiled.swizzle, is_signed=t.dtype.is_signed)
  elif t.layout in (Layout.WGMMA, Layout.COL):
    x = fa.FragmentedArray.load_untiled(mem, layout=layout_of(t), optimized=False,
                                        is_signed=t.dtype.is_signed)
  else:
    x = fa.FragmentedArray.load_strided(mem, is_signed=t.dtype.is_signed,
                                        vec_size=strided_layout(t.shape).vec_size)
  ctx.set(o.result, x)


@rule(kir.Store)
def _store(ctx, o):
  ref = ctx.get(o.ref)
  tiled = ctx.smem_layout(ref)
  mem = ctx.memref(ref)
  if o.value.type.layout == Layout.WGMMA:
    mem = ctx.my_rows(mem, o.value.type.shape[0], tiled)
  if tiled is not None:
    ctx.get(o.value).store_tiled(mem, swizzle=tiled.swizzle)
  else:
    ctx.get(o.value).store_untiled(mem, optimized=False)


@rule(kir.Copy)
def _copy(ctx, o):
  src, dst = ctx.get(o.src), ctx.get(o.dst)
  smem = dst if o.slot >= 0 else src
  tiled = ctx.smem_layout(smem)
  kw = {} if tiled is None else dict(gmem_transform=mgpu.TileTransform(tiled.tile),
                                     swizzle=tiled.swizzle)
  if o.slot >= 0:   # GMEM -> SMEM
    gmem, gslice = ctx.gmem_window(src)
    ctx.launch.async_copy(src_ref=gmem, dst_ref=ctx.memref(dst), gmem_slice=gslice,
                          barrier=ctx.barrier(o.slot, o.stage), predicate=ctx.tma_predicate, **kw)
  else:
    gmem, gslice = ctx.gmem_window(dst)
    ctx.launch.async_copy(src_ref=ctx.memref(src), dst_ref=gmem, gmem_slice=gslice,
                          predicate=ctx.tma_predicate, **kw)


# ---------------------------------------------------------------- synchronisation
@rule(kir.WaitLoad)
def _wait_load(ctx, o):
  ctx.barrier(o.slot, o.stage).wait()


@rule(kir.AwaitStores)
def _await_stores(ctx, o):
  nvvm.cp_async_bulk_wait_group(0, read=o.read_only)
  ctx.thread_barrier()


@rule(kir.CommitShared)
def _commit_shared(ctx, o):
  nvvm.fence_proxy(nvvm.ProxyKind.async_shared, space=nvvm.SharedSpace.shared_cta)
  ctx.thread_barrier()


@rule(kir.Barrier)
def _barrier(ctx, o):
  ctx.thread_barrier()


@rule(kir.ClusterSync)
def _cluster_sync(ctx, o):
  nvvm.cluster_arrive(aligned=True)
  nvvm.cluster_wait(aligned=True)


# ---------------------------------------------------------------- arithmetic
_SCALAR_INT = {kir.BinOp.ADD: arith.addi, kir.BinOp.SUB: arith.subi, kir.BinOp.MUL: arith.muli,
               kir.BinOp.FLOORDIV: arith.floordivsi, kir.BinOp.MOD: arith.remsi,
               kir.BinOp.MAX: arith.maxsi, kir.BinOp.MIN: arith.minsi,
               kir.BinOp.AND: arith.andi, kir.BinOp.OR: arith.ori, kir.BinOp.XOR: arith.xori}
_SCALAR_FLOAT = {kir.BinOp.ADD: arith.addf, kir.BinOp.SUB: arith.subf, kir.BinOp.MUL: arith.mulf,
                 kir.BinOp.DIV: arith.divf, kir.BinOp.MAX: arith.maximumf,
                 kir.BinOp.MIN: arith.minimumf}
_ARRAY = {kir.BinOp.ADD: lambda a, b: a + b, kir.BinOp.SUB: lambda a, b: a - b,
          kir.BinOp.MUL: lambda a, b: a * b, kir.BinOp.DIV: lambda a, b: a / b,
          kir.BinOp.FLOORDIV: lambda a, b: a // b, kir.BinOp.MOD: lambda a, b: a % b,
          kir.BinOp.MAX: lambda a, b: a.max(b), kir.BinOp.MIN: lambda a, b: a.min(b),
          kir.BinOp.AND: lambda a, b: a & b, kir.BinOp.OR: lambda a, b: a | b,
          kir.BinOp.XOR: lambda a, b: a ^ b}
_CMP_ARRAY = {kir.CmpOp.LT: lambda a, b: a < b, kir.CmpOp.LE: lambda a, b: a <= b,
              kir.CmpOp.GT: lambda a, b: a > b, kir.CmpOp.GE: lambda a, b: a >= b,
              kir.CmpOp.EQ: lambda a, b: a == b, kir.CmpOp.NE: lambda a, b: a != b}


def _operand_dtype(o):
  for x in (o.lhs, o.rhs):
    if isinstance(x, kir.Value):
      return x.type.dtype
  raise AssertionError


def _scalar_operands(ctx, o, d):
  return [operand(ctx, x) if isinstance(x, kir.Value) else scalar_const(x, d) for x in (o.lhs, o.rhs)]


@rule(kir.Binary)
def _binary(ctx, o):
  t, d = o.result.type, o.result.type.dtype
  if isinstance(t, ScalarType):
    a, b = _scalar_operands(ctx, o, d)
    table = _SCALAR_FLOAT if d.is_float else _SCALAR_INT
    if not d.is_signed and d.is_int:
      table = {**table, kir.BinOp.FLOORDIV: arith.divui, kir.BinOp.MOD: arith.remui,
               kir.BinOp.MAX: arith.maxui, kir.BinOp.MIN: arith.minui}
    ctx.set(o.result, table[o.kind](a, b))
    return
  a = as_array(ctx, operand(ctx, o.lhs), t, d)
  b = as_array(ctx, operand(ctx, o.rhs), t, d)
  ctx.set(o.result, _ARRAY[o.kind](a, b))


@rule(kir.Compare)
def _compare(ctx, o):
  d = _operand_dtype(o)
  t = o.result.type
  if isinstance(t, ScalarType):
    a, b = _scalar_operands(ctx, o, d)
    if d.is_float:
      pred = {kir.CmpOp.LT: "olt", kir.CmpOp.LE: "ole", kir.CmpOp.GT: "ogt", kir.CmpOp.GE: "oge",
              kir.CmpOp.EQ: "oeq", kir.CmpOp.NE: "une"}[o.kind]
      ctx.set(o.result, arith.cmpf(getattr(arith.CmpFPredicate, pred.upper()), a, b))
    else:
      s = "s" if d.is_signed else "u"
      pred = {kir.CmpOp.LT: s + "lt", kir.CmpOp.LE: s + "le", kir.CmpOp.GT: s + "gt",
              kir.CmpOp.GE: s + "ge", kir.CmpOp.EQ: "eq", kir.CmpOp.NE: "ne"}[o.kind]
      ctx.set(o.result, arith.cmpi(getattr(arith.CmpIPredicate, pred), a, b))
    return
  like = TensorType(t.shape, d, t.layout)
  a = as_array(ctx, operand(ctx, o.lhs), like, d)
  b = as_array(ctx, operand(ctx, o.rhs), like, d)
  ctx.set(o.result, _CMP_ARRAY[o.kind](a, b))


@rule(kir.Unary)
def _unary(ctx, o):
  x = ctx.get(o.x)
  d = o.x.type.dtype
  if isinstance(o.result.type, ScalarType):
    ctx.set(o.result, compat.scalar_unary(o.kind.value, x, d))
    return
  fns = {kir.UnOp.NEG: lambda: -x, kir.UnOp.EXP: lambda: x.exp(), kir.UnOp.EXP2: lambda: x.exp2(),
         kir.UnOp.LOG: lambda: x.log(), kir.UnOp.TANH: lambda: x.tanh(),
         kir.UnOp.RSQRT: lambda: x.rsqrt(), kir.UnOp.ABS: lambda: x.abs(),
         kir.UnOp.SQRT: lambda: compat.array_sqrt(x), kir.UnOp.NOT: lambda: x == False}  # noqa: E712
  ctx.set(o.result, fns[o.kind]())


@rule(kir.Where)
def _where(ctx, o):
  t = o.result.type
  cond = as_array(ctx, ctx.get(o.cond), TensorType(t.shape, DType.bool_, t.layout), DType.bool_)
  a = as_array(ctx, operand(ctx, o.on_true), t, t.dtype)
  b = as_array(ctx, operand(ctx, o.on_false), t, t.dtype)
  ctx.set(o.result, cond.select(a, b))


@rule(kir.Cast)
def _cast(ctx, o):
  x, src, dst = ctx.get(o.x), o.x.type.dtype, o.result.type.dtype
  if isinstance(o.result.type, ScalarType):
    ctx.set(o.result, compat.scalar_cast(x, src, dst, mlir_type(dst)))
    return
  if src == dst:
    ctx.set(o.result, x)
    return
  ctx.set(o.result, compat.array_cast(x, src, dst, mlir_type(dst)))


@rule(kir.Full)
def _full(ctx, o):
  t = o.result.type
  v = operand(ctx, o.value)
  if not isinstance(v, ir.Value):
    v = scalar_const(v, t.dtype)
  ctx.set(o.result, fa.FragmentedArray.splat(v, ctx.local_shape(t), layout_of(t),
                                             is_signed=t.dtype.is_signed))


@rule(kir.Arange)
def _arange(ctx, o):
  t = o.result.type
  ctx.set(o.result, fa.FragmentedArray.broadcasted_iota(
      mlir_type(t.dtype), t.shape, o.dim, strided_layout(t.shape), is_signed=t.dtype.is_signed))


# ---------------------------------------------------------------- control flow
@rule(kir.For)
def _for(ctx, o):
  def bound(x):
    x = operand(ctx, x)
    return arith.constant(i32(), x) if isinstance(x, int) else x
  inits = [ctx.carried(v) for v in o.inits]
  flat, tree = jax.tree.flatten(inits)
  loop = scf.ForOp(bound(o.start), bound(o.stop), bound(o.step), flat)
  with ir.InsertionPoint(loop.body):
    iv, *args = o.body.args
    ctx.set(iv, loop.induction_variable)
    for a, v in zip(args, jax.tree.unflatten(tree, list(loop.inner_iter_args))):
      ctx.set(a, v)
    ctx.lower_block(o.body, yield_fn=lambda vals: scf.YieldOp(jax.tree.flatten(vals)[0]),
                    carried=True)
  for r, v in zip(o.results, jax.tree.unflatten(tree, list(loop.results))):
    ctx.set(r, v)


@rule(kir.If)
def _if(ctx, o):
  types = [t for r in o.results for t in flat_types(ctx, r.type)]
  op_ = scf.IfOp(ctx.get(o.cond), types, has_else=True)
  trees = []

  def yield_fn(vals):
    flat, tree = jax.tree.flatten(vals)
    trees.append(tree)
    scf.YieldOp(flat)

  with ir.InsertionPoint(op_.then_block):
    ctx.lower_block(o.then_block, yield_fn=yield_fn)
  with ir.InsertionPoint(op_.else_block):
    ctx.lower_block(o.else_block, yield_fn=yield_fn)
  for r, v in zip(o.results, jax.tree.unflatten(trees[0], list(op_.results))):
    ctx.set(r, v)


@rule(kir.Dot)
def _dot(ctx, o):
  m, n = ctx.local_shape(o.result.type)
  acc = ctx.carried(o.acc) if o.acc is not None else mgpu.WGMMAAccumulator.zero(
      m, n, mlir_type(o.result.type.dtype))
  a, b = ctx.get(o.a), ctx.get(o.b)
  tiled = ctx.smem_layout(a)
  a_rows = ctx.my_rows(ctx.memref(a), o.a.type.shape[0], tiled)
  res = mgpu.wgmma(acc, a_rows, ctx.memref(b), swizzle=tiled.swizzle)
  nvvm.wgmma_commit_group_sync_aligned()
  ctx.set(o.result, res)


@rule(kir.DotWait)
def _dot_wait(ctx, o):
  nvvm.wgmma_wait_group_sync_aligned(o.pending)


@rule(kir.Print)
def _print(ctx, o):
  fmt, args = "", []
  for p in o.parts:
    if isinstance(p, str):
      fmt += p.replace("{", "{{").replace("}", "}}")
    elif isinstance(p, kir.Value) and isinstance(p.type, ScalarType):
      fmt += "{}"
      args.append(ctx.get(p))
    else:   # a tensor: its values print in interpret mode only
      fmt += f"<{p.type}>".replace("{", "{{").replace("}", "}}")
  mgpu.utils.debug_print(fmt, *args)


@rule(kir.Breakpoint)
def _breakpoint(ctx, o):
  """Breakpoints stop in interpret mode only."""


@rule(kir.Yield)
def _yield(ctx, o):
  raise AssertionError("Yield is lowered by its parent region")
