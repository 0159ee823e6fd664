"""Tensor-core ops on both backends: Dot (WGMMA) and DotWait."""
from __future__ import annotations

import jax.experimental.mosaic.gpu as mgpu
import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jax.experimental.mosaic.gpu import utils as mgpu_utils
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, llvm, nvvm, vector

from ..frontend.ops.mma import Dot, DotWait
from ..frontend.types import RefType
from . import interpret_numerics as N
from .interpret_memory import Ref
from .mosaic import is_split, mlir_type
from .registry import interpret, lower


def _smem_operand(ctx, x, rows: int | None):
  """The tiled memref WGMMA reads for an SMEM operand: this warpgroup's rows of an A operand
  (`rows`: the tile's rows, None for B), transposed for a `buf.T` view."""
  tiled = ctx.smem_layout(x)
  mem = ctx.memref(x)
  transpose = getattr(x, "transpose", False)
  if rows is not None and ctx.num_warpgroups > 1:
    if transpose:    # the rows of a.T are the columns of the stored buffer: slice whole column tiles
      per = rows // ctx.num_warpgroups // tiled.tile[1]
      start = arith.muli(ctx.wg, arith.constant(ir.IndexType.get(), per))
      mem = mgpu.memref_slice(mem, (slice(None), mgpu.ds(start, per)))
    else:
      mem = ctx.my_rows(mem, rows, tiled)
  if transpose:
    mem = mgpu.memref_transpose(mem, (1, 0, 3, 2))
  return mem, tiled


def _eight_bit_a(a):
  """An 8-bit register A operand moved from the WGMMA layout (two bytes of a row per register, columns
  2c, 2c+1 and 8+2c, 8+2c+1 of each 16 for lane c of a quad) into the 8-bit layout WGMMA reads from
  registers (four bytes per register, columns 4c..4c+3). Rows stay with their lanes, so each 16
  columns of a row are a quad's exchange: lane c takes its bytes from lanes 2(c % 2) and 2(c % 2) + 1,
  the first two columns of each (c < 2) or the last two (c >= 2): two shuffles and a byte permute."""
  if a.layout == fa.WGMMA_LAYOUT_8BIT:
    return a
  assert a.layout == fa.WGMMA_LAYOUT, a.layout
  i32 = ir.IntegerType.get_signless(32)
  c = lambda x: arith.constant(i32, x)
  quad = arith.andi(mgpu_utils.thread_idx(), c(3))
  lo = arith.xori(quad, arith.shli(arith.andi(quad, c(1)), c(1)))     # quad ^ 2(quad % 2): lane 2(c % 2)
  hi = arith.xori(lo, c(1))
  perm = arith.select(arith.cmpi(arith.CmpIPredicate.ult, quad, c(2)), c(0x5410), c(0x7632))
  regs = a.registers
  new = np.empty(fa.WGMMA_LAYOUT_8BIT.registers_shape(a.shape), dtype=object)
  vec4 = ir.VectorType.get((4,), ir.VectorType(regs.flat[0].type).element_type)
  for idx in np.ndindex(new.shape):
    pair = [regs[(idx[0], 2 * idx[1] + i, *idx[2:])] for i in range(2)]
    word = mgpu_utils.bitcast(mgpu_utils.vector_concat(pair), i32)
    got = mgpu_utils.prmt(mgpu_utils.shfl_bfly(word, lo), mgpu_utils.shfl_bfly(word, hi), perm)
    new[idx] = mgpu_utils.bitcast(got, vec4)
  return fa.FragmentedArray(_registers=new, _layout=fa.WGMMA_LAYOUT_8BIT, _is_signed=a.is_signed)


def _own_registers(x):
  """Integer accumulator registers that share a value (a fresh dot's zeros, `ml.zeros` or `ml.full` chained onto)
  copied each through an opaque `mov` into a PTX register of its own, before Mosaic GPU's fence ties them to the
  instruction.
  Left to LLVM, every register was a copy of one shared zero register and the last of them that register itself
  (`mov.b32 %r28, %r35` ... `wgmma ... {%r28, ..., %r34, %r35}`, %r35 also the TMA's zero coordinate), and ptxas
  then read that register's result for every input: an H100 added each thread's last result register to its whole
  product (design note 207). `x`: a FragmentedArray whose registers share values (`_shares_registers`)."""
  i32 = ir.IntegerType.get_signless(32)
  regs = np.empty(x.registers.shape, dtype=object)
  for idx, r in np.ndenumerate(x.registers):
    vec = ir.VectorType(r.type)
    parts = [llvm.inline_asm(i32, [vector.extract(r, dynamic_position=[], static_position=[k])], "mov.b32 $0, $1;",
                             "=r,r", has_side_effects=True) for k in range(vec.shape[0])]
    out = vector.broadcast(vec, parts[0])
    for k, p in enumerate(parts[1:], 1):
      out = vector.insert(p, out, dynamic_position=[], static_position=[k])
    regs[idx] = out
  return fa.FragmentedArray(_registers=regs, _layout=x.layout, _is_signed=x.is_signed)


def _shares_registers(x) -> bool:
  """Whether two 32-bit slots of accumulator `x` hold one value: a splat (`arith.constant`, or a vector broadcast of
  a scalar: `ml.zeros`, `ml.full(shape, s)`) or one vector in two places. A loop's carried accumulator (block
  arguments, distinct) does not."""
  seen = set()
  for r in x.registers.flat:
    owner = getattr(r, "owner", None)
    name = getattr(owner, "name", None)
    if name in ("arith.constant", "vector.broadcast", "vector.splat") or r in seen:
      return True
    seen.add(r)
  return False


@lower(Dot)
def _dot(ctx, o):
  m, n = ctx.local_shape(o.result.type)
  t = o.result.type.dtype
  raw = ctx.values[o.acc.id] if o.acc is not None else None
  if t.is_int and (o.acc is None or isinstance(raw, fa.FragmentedArray) and _shares_registers(raw)):
    if o.acc is None:
      zero = arith.constant(mlir_type(t), ir.IntegerAttr.get(mlir_type(t), 0))
      raw = fa.FragmentedArray.splat(zero, (m, n), fa.WGMMA_LAYOUT, is_signed=t.is_signed)
    acc = mgpu.WGMMAAccumulator.from_registers(_own_registers(raw))
  else:
    acc = ctx.carried(o.acc) if o.acc is not None else mgpu.WGMMAAccumulator.zero(
        m, n, mlir_type(t), is_signed=t.is_signed)
  if o.fence_acc and isinstance(ctx.values[o.acc.id], mgpu.WGMMAAccumulator):
    # a dot's result other instructions read since: PTX orders them before this dot only by a wgmma.fence
    acc = mgpu.WGMMAAccumulator(_value=acc._value, _original_layout=acc._original_layout, _sync=True)
  b, tiled = _smem_operand(ctx, ctx.get(o.b), None)
  if isinstance(o.a.type, RefType):
    a, _ = _smem_operand(ctx, ctx.get(o.a), o.a.type.shape[0] if is_split(o.result.type) else None)
  else:
    a = ctx.get(o.a)
    if o.a.type.dtype.bits == 8:
      a = _eight_bit_a(a)
  res = mgpu.wgmma(acc, a, b, swizzle=tiled.swizzle)
  nvvm.wgmma_commit_group_sync_aligned()
  ctx.set(o.result, res)


@lower(DotWait)
def _dot_wait(ctx, o):
  nvvm.wgmma_wait_group_sync_aligned(o.pending)


@interpret(Dot)
def _i_dot(cta, o):
  """acc + a @ b: products summed in float32 (as WGMMA does), rounded to the acc dtype (a float16 one
  after each instruction's k); the
  group stays in flight, reading a and b, until a DotWait retires it. float32 operands are
  read as TF32 (their low 13 mantissa bits dropped), as the tensor cores read them."""
  refs = [r for r in (cta.get(o.a), cta.get(o.b)) if isinstance(r, Ref)]
  x, y = (_tf32(_operand(cta, cta.get(v), o)) for v in (o.a, o.b))
  t = o.result.type
  wide = np.int64 if t.dtype.is_int else np.float32
  acc = cta.get(o.acc).astype(wide) if o.acc is not None else wide(0)
  out = N.np_dtype(t.dtype)
  if np.dtype(out).itemsize == 2:
    # a float16 accumulator lives in float16 registers: each instruction (k of 32 bytes of operand, 16
    # elements of 16-bit operands, 32 of 8-bit ones) adds its float32 sum to it and rounds
    step = 32 // x.dtype.itemsize
    r = np.broadcast_to(acc, (x.shape[0], y.shape[1])).astype(out)
    for k0 in range(0, x.shape[1], step):
      r = (r.astype(wide) + x[:, k0:k0 + step].astype(wide) @ y[k0:k0 + step].astype(wide)).astype(out)
  else:
    r = (acc + x.astype(wide) @ y.astype(wide)).astype(out)
  register_a = not isinstance(o.a.type, RefType)
  if register_a and cta.dots:
    cta.check_dot_a(None, o, o.a.name)
  if cta.dots:
    cta.check_dot_acc(o, None if o.acc is None else cta.get(o.acc))
  cta.dots.append((r, {(x.owner, x.root.id, x.part) for x in refs}, o.loc, o.a.id if register_a else None, o))
  cta.dot_reads[id(r)] = set()
  cta.set(o.result, r)


def _tf32(v):
  if v.dtype != np.float32:
    return v
  return (np.ascontiguousarray(v).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _operand(cta, x, o):
  """An operand as the tensor cores see it: an SMEM window (transposed for `buf.T`), or registers."""
  if not isinstance(x, Ref):
    return x
  v = cta.read(x, o, "mma_read")
  return v.T if x.transposed else v


@interpret(DotWait)
def _i_dot_wait(cta, o):
  del cta.dots[:max(0, len(cta.dots) - o.pending)]
  cta.dot_reads = {id(d[0]): cta.dot_reads.get(id(d[0]), set()) for d in cta.dots}
