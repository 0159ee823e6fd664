"""Debugging ops on both backends: print (text and scalars on the GPU; everything in interpret
mode, per program) and breakpoint (a debugger in interpret mode; nothing on the GPU)."""
from __future__ import annotations

import jax.experimental.mosaic.gpu as mgpu
import numpy as np

from ..frontend import ir as kir
from ..frontend.ops.debug import Breakpoint, Print
from ..frontend.types import ScalarType
from .interpret_memory import Ref
from .registry import interpret, lower


def _split(p):
  return p if isinstance(p, tuple) else (p, "")


@lower(Print)
def _print(ctx, o):
  fmt, args = "", []
  for p in o.parts:
    if isinstance(p, str):
      fmt += p.replace("{", "{{").replace("}", "}}")
      continue
    v, _ = _split(p)
    if isinstance(v, kir.Value) and isinstance(v.type, ScalarType):
      fmt += "{}"
      args.append(ctx.get(v))
    else:   # a tensor: its values print in interpret mode only
      fmt += f"<{v.type}>".replace("{", "{{").replace("}", "}}")
  mgpu.utils.debug_print(fmt, *args)


@lower(Breakpoint)
def _breakpoint(ctx, o):
  """Breakpoints stop in interpret mode only."""


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
  v = v.item() if isinstance(v, np.ndarray) else v
  return format(v, spec) if spec else str(v)


@interpret(Print)
def _i_print(cta, o):
  text = "".join(p if isinstance(p, str) else _format(show(cta, _split(p)[0]), _split(p)[1])
                 for p in o.parts)
  print(f"[program {cta.pid}] {text}", flush=True)


@interpret(Breakpoint)
def _i_breakpoint(cta, o):
  from . import interpret as machine          # tests replace machine.open_debugger
  values = {n: show(cta, v) for n, v in zip(o.names, o.values)}
  machine.open_debugger(values, f"{o.loc} (program {cta.pid})")
