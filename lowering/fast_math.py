"""Rules of frontend/ops/fast_math.py: 2 ** x by ex2.approx.ftz (the MUFU unit) or, on `share` of each
thread's registers, by a polynomial on the FMA units."""
from __future__ import annotations

import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa

from ..frontend.ops.elementwise import UnOp
from ..frontend.ops.fast_math import EXP2_POLY, Exp2Emulated, emulated_registers
from . import interpret_numerics as N
from .mosaic import asm_per_element
from .registry import interpret, lower


def _hex(x: float) -> str:
  return "0f%08X" % int(np.float32(x).view(np.uint32))


_C1, _C2, _C3 = (_hex(c) for c in EXP2_POLY)
# t = x clamped to [-127, 128]; j = t + 1.5 * 2**23 rounded down (its low bits hold floor(t));
# f = t - floor(t); p = 2 ** f by Horner; 2 ** floor(t) built as float bits (floor(t) + 127) << 23
# (0 at -127: results below 2 ** -126 are zero, as ex2.approx.ftz's; inf at 128); NaN stays NaN through p.
EXP2_POLY_PTX = f"""{{
.reg .f32 t, j, f, p, s;
.reg .b32 jb, e;
max.ftz.NaN.f32 t, $1, {_hex(-127.0)};
min.ftz.NaN.f32 t, t, {_hex(128.0)};
add.rm.ftz.f32 j, t, {_hex(12582912.0)};
sub.ftz.f32 f, j, {_hex(12582912.0)};
sub.ftz.f32 f, t, f;
fma.rn.ftz.f32 p, f, {_C3}, {_C2};
fma.rn.ftz.f32 p, p, f, {_C1};
fma.rn.ftz.f32 p, p, f, {_hex(1.0)};
mov.b32 jb, j;
mad.lo.s32 e, jb, 8388608, 1065353216;
mov.b32 s, e;
mul.ftz.f32 $0, p, s;
}}"""
EX2_PTX = "ex2.approx.ftz.f32 $0, $1;"


@lower(Exp2Emulated)
def _exp2_emulated(ctx, o):
  x = ctx.get(o.x)
  regs = np.asarray(x.registers)
  out = np.empty_like(regs)
  poly = emulated_registers(regs.size, o.share)
  for r, (idx, reg) in enumerate(np.ndenumerate(regs)):
    out[idx] = asm_per_element(EXP2_POLY_PTX if poly[r] else EX2_PTX, "=f,f", reg)
  ctx.set(o.result, fa.FragmentedArray(_registers=out, _layout=x.layout, _is_signed=None))


@interpret(Exp2Emulated)
def _i_exp2_emulated(cta, o):
  """As ex2.approx.ftz: the polynomial's error (below 1e-4 relative) is not modelled."""
  x = cta.get(o.x)
  cta.set(o.result, np.asarray(N.float_unary(UnOp.EXP2_APPROX, x.astype(np.float32))))


