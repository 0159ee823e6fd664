"""Comparisons of index grids: a thread's scalar against its elements' constant offsets.

A causal mask compares two grids made of `ml.arange`, broadcasts and scalars:

    rows = i * bkv + ml.arange(bkv)[:, None]
    cols = j * bq + ml.arange(bq)[None, :]
    ml.where(cols >= rows, s, -inf)

Built as written, each grid holds one index a register element, and LLVM hoists their loop-invariant parts (a
WGMMA tile's 16 column and 2 row numbers a thread) out of the kernel's loop, where they stay live: about 18 registers
a thread that attention's backward spills for (LLVM may reassociate `j * bq + (col_thread + c)`, wrap-around being
exact, so writing the sums otherwise keeps them). In every Mosaic GPU tiled layout an element's index is its
thread's index (that of the thread's first element) plus a constant its place in the registers fixes (`_additive`
checks every thread). Where the grid evaluation proved that neither side nor their difference can wrap
(`Compare.no_wrap`, frontend/grid_affine.py), `lhs cmp rhs` is `lhs - rhs cmp 0`, which is `D cmp -K_e`: D one
scalar a thread (the scalars and the thread's first indices), K_e an immediate per element. No index grid is left
to hoist, and the predicate costs one register.

Comparisons not so proven, of other forms or of layouts not tiled, are lowered as before.
"""
from __future__ import annotations

import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, vector

from ..frontend.grid_affine import affine
from ..frontend.ops.elementwise import CmpOp
from ..frontend.types import TensorType
from .mosaic import is_split, layout_of, mlir_type

ENABLED = True        # (benchmarks/attn_bwd_order.py --index-compare turns it off to compare: INDEX_COMPARE=0)
_PRED = {CmpOp.LT: "slt", CmpOp.LE: "sle", CmpOp.GT: "sgt", CmpOp.GE: "sge", CmpOp.EQ: "eq", CmpOp.NE: "ne"}


def _digits(lin, strides):
  out = []
  for s in strides:
    out.append(lin // s)
    lin = lin % s
  return np.stack(out)


def _thread_offsets(layout, tile_strides) -> np.ndarray:
  """Each of a warpgroup's 128 threads' linear offset, as TiledLayout.thread_idxs computes it (lane and warp
  numbers spread over their tiled dimensions)."""
  tiled = layout.tiled_tiling_shape
  tid = np.arange(fa.WARPGROUP_SIZE)
  total = np.zeros_like(tid)
  for idx, dims in ((tid % fa.WARP_SIZE, layout.lane_dims), (tid // fa.WARP_SIZE % fa.WARPS_IN_WARPGROUP,
                                                              layout.warp_dims)):
    sizes = [d.times if isinstance(d, fa.Replicated) else tiled[d] for d in dims]
    strides = [int(np.prod(sizes[k + 1:], dtype=np.int64)) for k in range(len(sizes))]
    for d, size, stride in zip(dims, sizes, strides):
      if not isinstance(d, fa.Replicated):
        total = total + (idx // stride % size) * tile_strides[d]
  return total


def _register_offsets(layout, shape):
  """(each register's linear offset, the tiling's strides), as thread_idxs computes them."""
  contig = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]
  strides = layout.tiling.tile_strides(tuple(contig))
  regs = np.array([sum(i * s for i, s in zip(r, strides)) for r in np.ndindex(layout.registers_shape(shape))])
  return regs, strides, contig


def _additive(layout, shape):
  """Per register, its elements' indices less the thread's first element's (one (len(shape),) column per vector
  element), or None where some thread's offset carries into a register's (the decomposition would be wrong)."""
  regs, strides, contig = _register_offsets(layout, shape)
  thr = _thread_offsets(layout, strides[-layout.tiled_tiling_rank:])
  whole = _digits(thr[:, None] + regs[None, :], contig)                  # (axes, threads, registers)
  parts = _digits(thr, contig)[:, :, None] + _digits(regs, contig)[:, None, :]
  if not np.array_equal(whole, parts):
    return None
  return _digits(regs, contig)                                          # (axes, registers)


def lower_compare(ctx, o, d):
  """The comparison `o` (of operands of dtype `d`) of two index grids proven free of wrap-around (Compare.no_wrap)
  as one scalar a thread against immediates, or None (lower it as before)."""
  t = o.result.type
  if not ENABLED or not o.no_wrap or not isinstance(t, TensorType) or not isinstance(layout_of(t), fa.TiledLayout):
    return None
  defs = ctx.defs
  sides = [affine(defs, x, d) for x in (o.lhs, o.rhs)]
  if any(s is None for s in sides):
    return None
  split = is_split(t) and ctx.wg is not None
  # Arange's lowering offsets a split tensor's rows by this warpgroup's first row; so does the thread scalar here,
  # along the result's first axis
  if ctx.wg is not None and any((is_split(at) and dim == 0) != (split and axis == 0)
                                for s in sides for at, dim, axis in s.aranges):
    return None
  layout = layout_of(t)
  shape = ctx.local_shape(t)
  kept = [a for a in range(len(t.shape)) if a not in t.layout.drop]
  if len(kept) != len(shape) or any(a not in kept for s in sides for a in s.axes):
    return None
  offsets = _additive(layout, shape)
  if offsets is None:
    return None
  ty = mlir_type(d)
  const = lambda v: arith.constant(ty, v)
  first = [arith.index_cast(ty, i) for i in next(iter(layout.thread_idxs(shape)))]
  if split:
    first[0] = arith.addi(first[0], arith.muli(arith.index_cast(ty, ctx.wg), const(shape[0])))
  # lhs - rhs = D + K_e: D this thread's (the scalars, the first element's indices), K_e the element's offset
  coef = {a: sides[0].axes.get(a, 0) - sides[1].axes.get(a, 0) for a in kept}
  terms = [(c, x) for c, x in sides[0].scalars] + [(-c, x) for c, x in sides[1].scalars]
  terms += [(c, first[kept.index(a)]) for a, c in coef.items()]
  D = const(0)
  for c, x in terms:
    if c:
      x = const(x) if isinstance(x, int) else x if isinstance(x, ir.Value) else ctx.get(x)
      D = arith.addi(D, x if c == 1 else arith.muli(x, const(c)))
  pred = getattr(arith.CmpIPredicate, _PRED[o.kind])
  vec = layout.vector_length
  i1 = ir.IntegerType.get_signless(1)
  regs = np.empty(layout.registers_shape(shape), dtype=object)
  for r, ridx in enumerate(np.ndindex(regs.shape)):
    bits = []
    for j in range(vec):
      idx = offsets[:, r].copy()
      idx[-1] += j
      k = sum(c * int(idx[kept.index(a)]) for a, c in coef.items())
      bits.append(arith.cmpi(pred, D, const(-k)))          # lhs cmp rhs  <=>  D cmp -K_e
    regs[ridx] = vector.from_elements(ir.VectorType.get((vec,), i1), bits)
  return fa.FragmentedArray(_registers=regs, _layout=layout, _is_signed=False)
