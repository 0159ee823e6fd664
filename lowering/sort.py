"""Sorts on both backends (frontend/ops/sort.py): a bitonic network through two SMEM scratches.

Every thread stores its elements' keys and positions; then each step (k, j) of the network (two
nested loops, so each thread's code for a step is emitted once) gives
the element at position p the smaller or the larger (in the sort's total order: the key, NaN
last, then the original position) of itself and its partner, read back from the
scratches, with a barrier between a step's reads and its writes. Warpgroups holding the same
elements store the same values. Interpret mode sorts directly: the total order makes the result
the same.

The network sorts every block ascending (the bitonic sorter without direction changes): the first
step of a merge of blocks of k pairs p with its mirror in the block, p ^ (k - 1), the later ones
with p ^ j, and the lower position always takes the first of the two. So a length n that is not a
power of two sorts as if padded to the next one with elements after every real one: a partner at
n or past it is such an element, which never moves below n, and the element at p keeps its own
(nothing is read or stored past n). A padded read's rows (Sort.valid) sort their first `valid`
elements so, the padding after them keeping its place.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, memref, scf

from ..frontend.ops.sort import Sort
from . import interpret_numerics as N
from .registry import interpret, lower
from .shape import _element_indices, _flat, _vector_coords


def _before(d, descending, late_first, ka, ia, kb, ib):
  """Whether (ka, ia) comes before (kb, ib): keys in jnp.sort's order, ties by position (the later
  first if `late_first`)."""
  first = arith.cmpi(arith.CmpIPredicate.sgt if late_first else arith.CmpIPredicate.slt, ia, ib)
  if d.is_float:
    a_nan = arith.cmpf(arith.CmpFPredicate.UNO, ka, ka)
    b_nan = arith.cmpf(arith.CmpFPredicate.UNO, kb, kb)
    lt = arith.cmpf(arith.CmpFPredicate.OLT, ka, kb)
    gt = arith.cmpf(arith.CmpFPredicate.OGT, ka, kb)
    if descending:
      lt, gt = gt, lt
    tie = arith.andi(arith.xori(gt, _true()), first)             # equal keys (0.0 and -0.0 too)
    if descending:       # NaN first: a NaN precedes any number, NaNs by position
      return arith.select(a_nan, arith.ori(arith.xori(b_nan, _true()), first),
                          arith.andi(arith.xori(b_nan, _true()), arith.ori(lt, tie)))
    return arith.select(a_nan, arith.andi(b_nan, first), arith.ori(b_nan, arith.ori(lt, tie)))
  signed = d.is_signed
  lt = arith.cmpi(arith.CmpIPredicate.slt if signed else arith.CmpIPredicate.ult, ka, kb)
  gt = arith.cmpi(arith.CmpIPredicate.sgt if signed else arith.CmpIPredicate.ugt, ka, kb)
  if descending:
    lt, gt = gt, lt
  return arith.ori(lt, arith.andi(arith.xori(gt, _true()), first))


def _true():
  return arith.constant(ir.IntegerType.get_signless(1), 1)


@lower(Sort)
def _sort(ctx, o):
  """The network's stages run as two nested scf.for loops (k = 2**a, j = 2**(a - 1 - b)): each
  thread's code for one step is emitted once, not once per step."""
  t, d = o.x.type, o.x.type.dtype
  keys, order = ctx.memref(ctx.get(o.keys)), ctx.memref(ctx.get(o.order))
  two_d = len(t.shape) == 2
  n = t.shape[-1]
  real = o.valid or n                  # the elements of a row that are sorted (the rest: a padded read's padding)
  row = n + o.pad
  index = ir.IndexType.get()
  i32 = ir.IntegerType.get_signless(32)
  c = lambda v: arith.constant(index, v)

  def coords(idx):
    return _element_indices(ctx, t, idx) if two_d else _vector_coords(ctx, t, idx)

  x = ctx.get(o.x)
  pos = x.foreach(lambda v, idx: arith.index_cast(i32, coords(idx)[1]), create_array=True, is_signed=True)

  def put(arr, mem):
    def store(v, idx):
      i, j = coords(idx)
      memref.store(v, mem, [_flat(i, j, row)])
    arr.foreach(store)

  def choose(want_key, mask):
    def step(v, idx):
      i, p = coords(idx)
      at = _flat(i, p, row)
      q = arith.xori(p, mask)
      past = None
      if real & (real - 1) or real != n:     # a partner at `real` or past it: the padding, after every real element
        past = arith.cmpi(arith.CmpIPredicate.uge, q, c(real))
        if real != n:                        # (a padded read's own padding keeps its place too)
          past = arith.ori(past, arith.cmpi(arith.CmpIPredicate.uge, p, c(real)))
        q = arith.minui(q, c(n - 1))         # (its address kept in the row; the element keeps its own)
      other = _flat(i, q, row)
      ka, ia = memref.load(keys, [at]), memref.load(order, [at])
      kb, ib = memref.load(keys, [other]), memref.load(order, [other])
      wants_first = arith.cmpi(arith.CmpIPredicate.ult, p, q)       # the lower position takes the first
      keep = arith.xori(arith.xori(_before(d, o.descending, o.late_first, ka, ia, kb, ib), wants_first), _true())
      if past is not None:
        keep = arith.ori(keep, past)
      return arith.select(keep, ka, kb) if want_key else arith.select(keep, ia, ib)
    return step

  put(x, keys)
  put(pos, order)
  levels = (real - 1).bit_length()                     # 2 ** levels >= real
  outer = scf.ForOp(c(1), c(levels + 1), c(1))
  with ir.InsertionPoint(outer.body):
    a = outer.induction_variable
    inner = scf.ForOp(c(0), a, c(1))
    with ir.InsertionPoint(inner.body):
      b = inner.induction_variable
      k = arith.shli(c(1), a)
      j = arith.shli(c(1), arith.subi(arith.subi(a, c(1)), b))
      first = arith.cmpi(arith.CmpIPredicate.eq, b, c(0))         # a merge's first step: the mirror
      mask = arith.select(first, arith.subi(k, c(1)), j)
      ctx.thread_barrier()           # the step's reads see every thread's writes
      new_x = x.foreach(choose(True, mask), create_array=True, is_signed=d.is_signed if d.is_int else None)
      new_pos = pos.foreach(choose(False, mask), create_array=True, is_signed=True)
      ctx.thread_barrier()           # every read of this step is done before it is overwritten
      put(new_x, keys)
      put(new_pos, order)
      scf.yield_([])
    scf.yield_([])
  ctx.thread_barrier()

  def read(mem):
    return lambda v, idx: memref.load(mem, [_flat(*coords(idx), row)])
  ctx.set(o.results[0], x.foreach(read(keys), create_array=True, is_signed=d.is_signed if d.is_int else None))
  ctx.set(o.results[1], pos.foreach(read(order), create_array=True, is_signed=True))


# ---------------------------------------------------------------- interpreter
@interpret(Sort)
def _i_sort(cta, o):
  d = o.x.type.dtype
  x = np.array(cta.get(o.x), N.np_dtype(d))
  rows = 1 if x.ndim == 1 else x.shape[0]
  n = x.shape[-1]
  flat = x.reshape(rows, n)
  scratch = np.zeros((rows, n + o.pad), N.np_dtype(d))
  scratch[:, :n] = flat
  cta.write(cta.get(o.keys), scratch.reshape(-1), o)       # the scratches' traffic, for the race checks
  cta.write(cta.get(o.order), np.zeros(rows * (n + o.pad), np.int32), o)
  pos = np.broadcast_to(np.arange(n)[::-1] if o.late_first else np.arange(n), flat.shape)
  if d.is_float:
    wide = flat.astype(np.float64)
    nan = np.isnan(wide)
    value = np.where(nan, 0.0, -wide if o.descending else wide)
    rank = ~nan if o.descending else nan          # NaN last (first when descending)
  else:
    wide = flat.astype(np.int64)
    value, rank = (-wide if o.descending else wide), np.zeros(flat.shape, bool)
  real = o.valid or n                 # (a padded read's padding stays where it is)
  perm = np.stack([np.concatenate([np.lexsort((pos[r, :real], value[r, :real], rank[r, :real])), np.arange(real, n)])
                   for r in range(rows)])
  vals = np.take_along_axis(flat, perm, axis=1).reshape(x.shape)
  cta.set(o.results[0], vals)
  cta.set(o.results[1], perm.astype(np.int32).reshape(x.shape))
