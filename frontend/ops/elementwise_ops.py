"""The elementwise IR: the op kinds (`BinOp`, `CmpOp`, `UnOp`: the table of math functions, each with its numpy
meaning) and the ops (constants, arithmetic, comparisons, math functions, selects, casts, fills, iotas) with their
traits. Their type rules are in elementwise.py (which re-exports every name here), the dtype checks and hints'
wording in elementwise_checks.py, the `ml.` builtins in elementwise_fns.py; lowering/elementwise.py lowers and
interprets them.
"""
from __future__ import annotations

import dataclasses
import enum
import math as pymath

import numpy as np

from .. import ir
from ..ir import LayoutRule, Traits
from ..types import TensorType

# Elementwise lowering works on each warpgroup's own rows as on a whole tensor: splits=True.
PURE_ELEMENTWISE = Traits(layout=LayoutRule.ELEMENTWISE, pure=True, splits=True)
PURE_FRESH = Traits(layout=LayoutRule.FRESH, pure=True, splits=True)


class BinOp(enum.Enum):
  ADD = "+"; SUB = "-"; MUL = "*"; DIV = "/"; FLOORDIV = "//"; MOD = "%"
  MAX = "max"; MIN = "min"
  ATAN2 = "ml.atan2"; POW = "ml.pow"      # libdevice's (floating point only)
  FMOD = "ml.fmod"                        # C's remainder (the dividend's sign)
  DIV_RN = "ml.div_rn"                    # float32 x / y rounded to nearest (Triton's tl.div_rn; `/` is approximate)
  MULHI = "ml.umulhi"                     # the high 32 bits of a 32-bit integer product (Triton's tl.umulhi)
  AND = "&"; OR = "|"; XOR = "^"; SHL = "<<"; SHR = ">>"


class CmpOp(enum.Enum):
  LT = "<"; LE = "<="; GT = ">"; GE = ">="; EQ = "=="; NE = "!="


@dataclasses.dataclass(frozen=True)
class UnaryDef:
  """An elementwise function: its name (the FragmentedArray method and MLIR math op the
  lowering calls), which dtypes it takes, and its numpy meaning for interpret mode."""
  name: str
  floats_only: bool
  numpy: object
  approx: bool = False      # the hardware's approximate instruction (float32 only)


_erf = np.vectorize(pymath.erf, otypes=[np.float64])
_erfc = np.vectorize(pymath.erfc, otypes=[np.float64])


class UnOp(enum.Enum):
  NEG = UnaryDef("neg", False, np.negative)
  NOT = UnaryDef("not", False, np.logical_not)
  ABS = UnaryDef("abs", False, np.abs)
  EXP = UnaryDef("exp", True, np.exp)
  EXP2 = UnaryDef("exp2", True, np.exp2)
  EXP2_APPROX = UnaryDef("exp2", True, np.exp2, approx=True)
  LOG = UnaryDef("log", True, np.log)
  LOG2 = UnaryDef("log2", True, np.log2)
  SQRT = UnaryDef("sqrt", True, np.sqrt)
  RSQRT = UnaryDef("rsqrt", True, lambda x: np.divide(1, np.sqrt(x)))
  TANH = UnaryDef("tanh", True, np.tanh)
  SIN = UnaryDef("sin", True, np.sin)
  COS = UnaryDef("cos", True, np.cos)
  ERF = UnaryDef("erf", True, lambda x: _erf(x))
  FLOOR = UnaryDef("floor", True, np.floor)
  CEIL = UnaryDef("ceil", True, np.ceil)
  TRUNC = UnaryDef("trunc", True, np.trunc)
  ROUND = UnaryDef("round", True, np.rint)      # half to even (math.roundeven), as jnp.round
  # libdevice's (Triton's tl.math / tutorial 07): MLIR math ops, which the GPU pipeline calls __nv_* for
  ASIN = UnaryDef("asin", True, np.arcsin)
  ACOS = UnaryDef("acos", True, np.arccos)
  ATAN = UnaryDef("atan", True, np.arctan)
  TAN = UnaryDef("tan", True, np.tan)
  CBRT = UnaryDef("cbrt", True, np.cbrt)
  EXPM1 = UnaryDef("expm1", True, np.expm1)
  LOG1P = UnaryDef("log1p", True, np.log1p)
  ERFC = UnaryDef("erfc", True, lambda x: _erfc(x))


# ---------------------------------------------------------------- ops
@ir.op(Traits(pure=True))
class Constant(ir.Op):
  """A Python scalar materialised as a CTA-uniform scalar of the result's dtype."""
  value: int | float | bool
  loc: object
  results: tuple


@ir.op(PURE_ELEMENTWISE)
class Binary(ir.Op):
  kind: BinOp
  lhs: ir.Operand
  rhs: ir.Operand
  loc: object
  results: tuple
  via: tuple = ()     # (builtin, its operands' texts) where a builtin made it (ml.cdiv's //), for hints
  tile: tuple = ()    # (k, num_m, num_n, group): ml.grouped_ids' k-th coordinate (frontend/gmem_disjoint.py)
  # An integer //, % or fmod whose divisor the grid evaluation found non-zero wherever it runs (frontend/absint.py):
  # the GPU's division needs no zero guard (lowering/elementwise._needs_zero_guard)
  nonzero: bool = False


@ir.op(PURE_ELEMENTWISE)
class Compare(ir.Op):
  kind: CmpOp
  lhs: ir.Operand
  rhs: ir.Operand
  loc: object
  results: tuple
  # Index grids (affine in `ml.arange`) the grid evaluation proved never reach the dtype's bounds
  # (frontend/grid_affine.py): the lowering compares one scalar a thread with immediates (lowering/index_compare.py)
  no_wrap: bool = False


@ir.op(PURE_ELEMENTWISE)
class Unary(ir.Op):
  kind: UnOp
  x: ir.Value
  loc: object
  results: tuple


@ir.op(PURE_ELEMENTWISE)
class Where(ir.Op):
  cond: ir.Value
  on_true: ir.Operand
  on_false: ir.Operand
  loc: object
  results: tuple


@ir.op(PURE_ELEMENTWISE)
class Cast(ir.Op):
  """A value converted to the result's dtype (`bitcast`: its bits reinterpreted)."""
  x: ir.Value
  loc: object
  results: tuple
  bitcast: bool = False


# The elementwise ops with no effects and tensor operands of the result's shape: recomputed at another shape (an
# index grid, a small mask at its tile's), as scalars or elsewhere (rematerialised), they are the same math.
ELEMENTWISE_OPS = (Binary, Compare, Unary, Cast, Where)


def remade(op, v, t, operand):
  """A copy of `op` (one of ELEMENTWISE_OPS, of result `v`) whose result is a new value of type `t` named as `v`,
  each tensor operand (of v's shape) replaced by `operand(x)`: the same math at another shape (index grids, a
  mask's row). None where an operand has another shape or `operand` gives None."""
  kw = {}
  for f in dataclasses.fields(op):
    x = getattr(op, f.name)
    if isinstance(x, ir.Value) and isinstance(x.type, TensorType):
      if x.type.shape != v.type.shape:
        return None
      x = operand(x)
      if x is None:
        return None
      kw[f.name] = x
  return dataclasses.replace(op, results=(ir.Value(t, v.name),), **kw)


@ir.op(PURE_FRESH)
class Full(ir.Op):
  """A tensor filled with one (static or scalar) value."""
  value: ir.Operand
  loc: object
  results: tuple


@ir.op(PURE_FRESH)
class Arange(ir.Op):
  """`[0, 1, ..., n)` along `dim` of the result's shape."""
  dim: int
  loc: object
  results: tuple
