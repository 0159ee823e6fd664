"""A small evaluator of straight-line MLIR (arith, vector, gpu thread ids) for one GPU thread.

Tests of lowerings that compute per-thread values (index grids, masks) evaluate the real MLIR those lowerings
build, thread by thread, with no GPU: `Eval(range(128), block=128).value(v)` follows `v`'s defining ops back to
constants and thread ids, for all the threads at once (a leading axis). Integers are exact modulo their width.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

_INDEX_BITS = 64


def _is(x, cls) -> bool:
  """isinstance for MLIR types and attributes (older bindings: cls.isinstance; newer ones downcast)."""
  check = getattr(cls, "isinstance", None)
  return check(x) if check is not None else isinstance(x, cls)


def _bits(t) -> int:
  if _is(t, ir.IndexType):
    return _INDEX_BITS
  return ir.IntegerType(t).width


def _element_type(t):
  return ir.VectorType(t).element_type if _is(t, ir.VectorType) else t


def _wrap(x, bits, signed=True):
  """x modulo 2 ** bits, signed or not (int64 arrays; 64-bit values, indices, are taken as they are)."""
  x = np.asarray(x, dtype=np.int64)
  if bits >= 64:
    return x
  m = np.int64(1) << bits
  x = x % m
  return np.where(x >= m // 2, x - m, x) if signed else x


def _unsigned(x, bits):
  return _wrap(x, bits, signed=False)


class Eval:
  """The values of every thread of `tids` at once (a leading axis of len(tids)), in a block of `block` threads."""

  def __init__(self, tids, block: int):
    self.tids, self.block = np.asarray(tids, np.int64), block
    self.memo: dict = {}

  def value(self, v: ir.Value):
    if v not in self.memo:
      self.memo[v] = self._eval(v)
    return self.memo[v]

  def _threads(self, x):
    return np.broadcast_to(np.asarray(x, np.int64), self.tids.shape)

  def _eval(self, v):
    op = v.owner
    name = op.name if hasattr(op, "name") else op.operation.name
    ops = [self.value(x) for x in op.operands]
    t = v.type
    bits = _bits(_element_type(t))
    attrs = op.attributes
    if name == "arith.constant":
      a = attrs["value"]
      if _is(a, ir.DenseElementsAttr):
        return _wrap(np.array([int(x) for x in ir.DenseIntElementsAttr(a)]), bits)
      return _wrap(ir.IntegerAttr(a).value, bits)
    if name == "gpu.thread_id":
      return self.tids if "x" in str(attrs["dimension"]) else np.int64(0)
    if name == "gpu.block_dim":
      return np.int64(self.block if "x" in str(attrs["dimension"]) else 1)
    if name in ("arith.index_cast", "arith.extsi", "arith.trunci"):
      return _wrap(ops[0], bits)
    if name in ("arith.index_castui", "arith.extui"):
      return _wrap(_unsigned(ops[0], _bits(_element_type(op.operands[0].type))), bits)
    if name in _BINARY:
      ob = _bits(_element_type(op.operands[0].type))
      return _wrap(_BINARY[name](ops[0], ops[1], ob), bits)
    if name == "arith.cmpi":
      pred = int(ir.IntegerAttr(attrs["predicate"]).value)
      ob = _bits(_element_type(op.operands[0].type))
      a, b = ops
      if pred in (6, 7, 8, 9):          # ult ule ugt uge
        a, b = _unsigned(a, ob), _unsigned(b, ob)
      return np.asarray(_CMP[pred](a, b)).astype(np.int64)
    if name == "arith.select":
      return np.where(ops[0] != 0, ops[1], ops[2])
    if name == "vector.from_elements":
      return np.stack([self._threads(x) for x in ops], axis=-1)
    if name in ("vector.splat", "vector.broadcast"):
      n = ir.VectorType(t).shape[-1]
      return np.repeat(self._threads(ops[0])[..., None], n, axis=-1)
    if name in ("vector.extractelement", "vector.extract"):
      pos = [int(x) for x in ops[1:]] or list(ir.DenseI64ArrayAttr(attrs["static_position"]))
      return np.asarray(ops[0])[(Ellipsis, *pos)]
    if name == "llvm.mlir.undef":
      return np.zeros(ir.VectorType(t).shape, np.int64) if _is(t, ir.VectorType) else np.int64(0)
    raise NotImplementedError(name)


_BINARY = {
    "arith.addi": lambda a, b, n: a + b,
    "arith.subi": lambda a, b, n: a - b,
    "arith.muli": lambda a, b, n: a * b,
    "arith.divui": lambda a, b, n: _unsigned(a, n) // _unsigned(b, n),
    "arith.remui": lambda a, b, n: _unsigned(a, n) % _unsigned(b, n),
    "arith.andi": lambda a, b, n: a & b,
    "arith.ori": lambda a, b, n: a | b,
    "arith.xori": lambda a, b, n: a ^ b,
}
# arith.CmpIPredicate: eq ne slt sle sgt sge ult ule ugt uge
_CMP = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal,
        6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}
