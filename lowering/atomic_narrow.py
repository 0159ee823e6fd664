"""Atomics of 8- and 16-bit integers in GMEM and SMEM (probe 56b).

PTX has no `atom` or `red` of int8, uint8, int16 or uint16 (its 16-bit ones are float adds and a cas), so each
element's update, whatever its kind, is a loop of `atom.cas.b32` on the aligned 32-bit word that holds it: read
the word, compute the element's new bits from the ones found, swap the word with the other bytes as found, and
try again where another thread changed the word meanwhile (CUDA's own atomicAdd of a short). The element's old
value is the one the successful swap found. The arithmetic is the element's own type's (an add wraps, a max of
int8 compares signed and one of uint8 unsigned): jnp's `.at[].add` / `.max` numbers, which interpret mode's
combine computes.
"""
from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, llvm, scf

from ..frontend.dtypes import DType
from ..frontend.ops.atomic import AtomicKind


def is_narrow(d) -> bool:
  """Whether `d` is an integer PTX's atomics do not take (8 or 16 bits)."""
  return isinstance(d, DType) and d.is_int and d.bits in (8, 16)


def half_extreme(kind: AtomicKind, value, bits):
  """The new 16 bits of a float16 or bfloat16 max or min from the element's `bits` (an i16): the value where it is
  >= the element (<= for min) or the element is a NaN and the value is not (np.fmax's and np.fmin's order of
  operands, as atomic_rmw._half_cas_loop's)."""
  i16 = ir.IntegerType.get_signless(16)
  a = arith.bitcast(value.type, bits)
  pred = arith.CmpFPredicate.OGE if kind == AtomicKind.MAX else arith.CmpFPredicate.OLE
  take = arith.ori(arith.cmpf(pred, value, a), arith.andi(arith.cmpf(arith.CmpFPredicate.UNO, a, a),
                                                          arith.cmpf(arith.CmpFPredicate.ORD, value, value)))
  return arith.select(take, arith.bitcast(i16, value), bits)


def _asm(text: str, args, constraints: str, result):
  return llvm.inline_asm(result, list(args), text, constraints, has_side_effects=True)


def _new(kind: AtomicKind, signed: bool, old, value, cmp):
  """The element's new bits from its `old` ones (the narrow type's arithmetic; a 16-bit float's max or min)."""
  if not isinstance(value.type, ir.IntegerType):
    return half_extreme(kind, value, old)
  if kind == AtomicKind.ADD:
    return arith.addi(old, value)
  if kind == AtomicKind.MAX:
    return (arith.maxsi if signed else arith.maxui)(old, value)
  if kind == AtomicKind.MIN:
    return (arith.minsi if signed else arith.minui)(old, value)
  if kind == AtomicKind.XCHG:
    return value
  if kind == AtomicKind.CAS:
    return arith.select(arith.cmpi(arith.CmpIPredicate.eq, old, cmp), value, old)
  op = {AtomicKind.AND: arith.andi, AtomicKind.OR: arith.ori, AtomicKind.XOR: arith.xori}[kind]
  return op(old, value)


def narrow_atom(ptr, kind: AtomicKind, d: DType, value, cmp=None, order: str = ".relaxed.gpu", smem: bool = False):
  """The old value of the 8- or 16-bit integer element at the generic pointer `ptr` (`smem`: its 32-bit shared::cta
  address, an i32) after its atomic `kind` with `value` (`cmp` a cas's expected value), by a cas loop on its 32-bit
  word (`order` the cas's `.sem.scope`; the CTA's own in SMEM). A float16 or bfloat16 max or min in SMEM too (`d`
  then the float, its old bits returned as an i16)."""
  i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
  nt = ir.IntegerType.get_signless(d.bits)
  c32 = lambda v: arith.constant(i32, v)
  if smem:
    word = arith.andi(ptr, c32(-4))
    shift = arith.muli(arith.andi(ptr, c32(3)), c32(8))
    load, cas, p = "ld.shared.b32 $0, [$1];", "atom.shared.cas.b32 $0, [$1], $2, $3;", "r"
  else:
    c64 = lambda v: arith.constant(i64, v)
    addr = llvm.ptrtoint(i64, ptr)
    word = llvm.inttoptr(llvm.PointerType.get(), arith.andi(addr, c64(-4)))
    shift = arith.trunci(i32, arith.muli(arith.andi(addr, c64(3)), c64(8)))
    load, cas, p = "ld.relaxed.gpu.b32 $0, [$1];", f"atom{order}.cas.b32 $0, [$1], $2, $3;", "l"
  keep = arith.xori(arith.shli(c32((1 << d.bits) - 1), shift), c32(-1))     # the word's other bytes
  start = _asm(load, [word], f"=r,{p}", i32)
  loop = scf.WhileOp([i32], [start])
  before = loop.before.blocks.append(i32)
  with ir.InsertionPoint(before):
    seen = before.arguments[0]
    old = arith.trunci(nt, arith.shrui(seen, shift))
    new = _new(kind, d.is_signed, old, value, cmp)
    swapped = arith.ori(arith.andi(seen, keep), arith.shli(arith.extui(i32, new), shift))
    found = _asm(cas, [word, seen, swapped], f"=r,{p},r,r", i32)
    scf.condition(arith.cmpi(arith.CmpIPredicate.ne, found, seen), [found])
  after = loop.after.blocks.append(i32)
  with ir.InsertionPoint(after):
    scf.yield_([after.arguments[0]])
  return arith.trunci(nt, arith.shrui(loop.results[0], shift))
