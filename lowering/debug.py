"""Debugging ops on both backends: print (text and scalars on the GPU; everything in interpret
mode, per program) and breakpoint (a debugger in interpret mode; nothing on the GPU)."""
from __future__ import annotations

import jax.experimental.mosaic.gpu as mgpu
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, gpu

from ..frontend import ir as kir
from ..frontend.dtypes import DType
from ..frontend import errors as E
from ..frontend.ops.debug import Breakpoint, DeviceAssert, Print, printf_spec
from ..frontend.types import ScalarType
from .interpret_memory import Ref
from .registry import interpret, lower


@lower(Print)
def _print(ctx, o):
  """Text and scalars, once per warpgroup, through printf with the format specs translated
  (frontend/ops/debug.py checked they translate); tensors print as their type."""
  fmt, args = "", []
  for p, spec in zip(o.parts, o.specs):
    if isinstance(p, str):
      fmt += p.replace("%", "%%")
      continue
    if isinstance(p.type, ScalarType):
      d = p.type.dtype
      conv = printf_spec(spec, d)
      x = ctx.get(p)
      if d == DType.bool_ and not spec:     # Python's True/False, as interpret mode prints it
        fmt += "%c%c%c%c%.0llx"
        args += _true_false(x)
        continue
      if d.is_float or conv[-1] in "fFeEgG":
        if not d.is_float:
          x = (arith.sitofp if d.is_signed else arith.uitofp)(ir.F32Type.get(), x)   # (True is 1.0)
        elif d.bits < 32:
          x = arith.extf(ir.F32Type.get(), x)
      elif d.bits < 64:
        i64 = ir.IntegerType.get_signless(64)
        x = (arith.extsi if d.is_signed else arith.extui)(i64, x)
      fmt += conv
      args.append(x)
    else:   # a tensor: its values print in interpret mode only
      fmt += f"<{p.type}>"
  # As mgpu.utils.debug_print (once per warpgroup), with the args as they are: it widens every
  # integer to 64 bits, and a %c takes an int.
  with mgpu.utils.single_thread(scope=mgpu.utils.ThreadSubset.WARPGROUP):
    gpu.printf(fmt + "\n", *args)


def _true_false(x):
  """printf arguments that print the bool `x` as True or False: four characters (%c) and an 'e',
  the hex digit 14, that a precision of 0 prints as nothing when the value is 0 (C's rule)."""
  i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
  pick = lambda t, f, ty: arith.select(x, arith.constant(ty, t), arith.constant(ty, f))
  return [pick(ord(t), ord(f), i32) for t, f in zip("True", "Fals")] + [pick(0, 14, i64)]


@lower(Breakpoint)
def _breakpoint(ctx, o):
  """Breakpoints stop in interpret mode only."""


@lower(DeviceAssert)
def _device_assert(ctx, o):
  """ml.device_assert is checked in interpret mode only (Triton's without TRITON_DEBUG: no code)."""


def show(cta, x):
  if isinstance(x, kir.Value):
    v = cta.get(x)
    if isinstance(v, Ref):
      return cta.buffer(v)[v.index]
    return v
  return x


def _format(v, spec):
  if isinstance(v, np.ndarray) and v.ndim:
    fmt = (lambda e: format(e, spec)) if spec else None
    return np.array2string(v, max_line_width=10**9, formatter={"all": fmt} if fmt else None)
  if isinstance(v, (np.ndarray, np.generic)):   # a scalar: its dtype's shortest text (0.01, not
    v = np.asarray(v)[()]                        # float32's exact 0.009999999776482582), as numpy
    return format(v.item(), spec) if spec else str(v)
  return format(v, spec) if spec else str(v)


@interpret(Print)
def _i_print(cta, o):
  text = "".join(p if isinstance(p, str) else _format(show(cta, p), spec) for p, spec in zip(o.parts, o.specs))
  print(f"[program {cta.label}] {text}", flush=True)


@interpret(Breakpoint)
def _i_breakpoint(cta, o):
  from . import interpret as machine          # tests replace machine.open_debugger
  values = {n: show(cta, v) for n, v in zip(o.names, o.values)}
  machine.open_debugger(values, f"{o.loc} (program {cta.label})")


@interpret(DeviceAssert)
def _i_device_assert(cta, o):
  held = np.asarray(cta.get(o.cond), bool)
  if held.all():
    return
  bad = np.argwhere(~held) if held.ndim else np.zeros((1, 0), int)
  at = f" at element {tuple(int(i) for i in bad[0])}" if held.ndim else ""
  size = int(np.prod(o.own)) if o.own is not None else held.size     # (a padded value: its own elements)
  raise E.InterpretError(
      f"device_assert {o.text} failed{at} ({int((~held).sum())} of {size} false) in program {cta.label}"
      + (f": {o.msg}" if o.msg else ""), o.loc,
      hint="the kernel's own run-time check (the GPU runs none): call it with inputs that satisfy it, or fix what"
           " computes the condition")
