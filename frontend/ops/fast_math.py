"""Fast math that trades a little accuracy for throughput: `ml.exp2(x, approx=True, emulate=share)`.

The H200's special function unit (MUFU) runs 16 `ex2.approx` a clock per SM, a quarter of the
rate of its FMA units. In a flash attention forward at head_dim 64 it has as much to do as the
tensor cores (one exponential per 64 multiply-adds of Q K^T and P V), so it bounds the kernel.
`emulate` moves a share of the elements to the FMA units, as FlashAttention-4 does: 2 ** x is
2 ** floor(x) (built in the exponent bits) times a degree-3 polynomial of the fraction (relative
error below 1e-4), in ten FMA and integer instructions. Results below 2 ** -126 are zero, as
`ex2.approx.ftz`'s are; -inf gives 0, NaN stays NaN, x >= 128 gives inf.
"""
from __future__ import annotations

from .. import errors as E
from .. import ir
from .base import shown
from .elementwise import PURE_ELEMENTWISE

# 2 ** f on [0, 1): 1 + f * (C1 + f * (C2 + f * C3)), fitted for relative error (8.6e-5 at most in float32).
EXP2_POLY = (0.6951163411140442, 0.22764700651168823, 0.07706519961357117)
EXP2_POLY_ERROR = 8.6e-5


@ir.op(PURE_ELEMENTWISE)
class Exp2Emulated(ir.Op):
  """2 ** x (float32, approximate): `share` of the registers of each thread by EXP2_POLY on the
  FMA units, the rest by ex2.approx.ftz (the MUFU unit)."""
  x: ir.Value
  share: float
  loc: object
  results: tuple


def check_share(cx, emulate, name) -> float:
  """`emulate` of ml.exp2, a Python number in [0, 1]."""
  if isinstance(emulate, bool) or not isinstance(emulate, int | float) or not 0 <= emulate <= 1:
    raise E.KernelTypeError(
        f"ml.exp2's emulate is the share of elements computed on the FMA units, a Python number from 0 to 1,"
        f" got {shown(emulate)}", cx.loc,
        hint=f"ml.exp2({name}, approx=True, emulate=0.25) (a quarter by polynomial); 0 (the default) for none")
  return float(emulate)


def exp2_emulated(cx, x, share: float):
  """Emit Exp2Emulated of float32 register tensor `x` (share > 0)."""
  return cx.b.emit(Exp2Emulated, x, share, loc=cx.loc, types=[x.type], names=[cx.name]).result


def emulated_registers(n: int, share: float) -> list[bool]:
  """Which of a thread's `n` registers take the polynomial: `share` of them, spread evenly."""
  return [int((r + 1) * share) > int(r * share) for r in range(n)]
