"""`jax.lax.reduce_window` of a register tile (max, min, sum and product pooling), written in the kernel language as
XLA computes it (probe 53c; it was MG003 with a hint that gathered the taps from GMEM): the tile padded with the init
value where the padding asks (`jnp.pad`'s constant, "SAME" as lax.padtype_to_pads pads), then each tap of the window
a static slice of the padded tile whose step is the stride (`p[a:a + (o - 1) * s + 1:s, ...]`, a strided slice of
registers), combined with the init value first and then in the window's row-major order, as XLA's loop does
(form_helpers.window_taps). No
dilations (MG003 stays, with its hint); a result no register tensor holds is MG204 at the call, as any slice's.
Traced by jnp_calls.formula as the other SHAPED forms are."""
from __future__ import annotations

import itertools
import math

from .jnp_math import _shape

# the computation, by its name in lax, jnp or operator (ufunc_reduce's monoids that pooling takes)
_COMBINE = {"max": "max", "maximum": "max", "min": "min", "minimum": "min", "add": "add", "mul": "mul",
            "multiply": "mul"}


def _ints(t, rank):
  """A static tuple of `rank` ints, or None."""
  if not isinstance(t, (tuple, list)) or len(t) != rank:
    return None
  if not all(isinstance(v, int) and not isinstance(v, bool) for v in t):
    return None
  return tuple(t)


def _pads(padding, shape, window, strides):
  """reduce_window's `padding` as (lo, hi) pairs: "VALID", "SAME" (lax.padtype_to_pads's), or the pairs."""
  if isinstance(padding, str):
    if padding.upper() == "VALID":
      return tuple((0, 0) for _ in shape)
    if padding.upper() != "SAME":
      return None
    pads = []
    for n, w, s in zip(shape, window, strides):
      total = max((math.ceil(n / s) - 1) * s + w - n, 0)
      pads.append((total // 2, total - total // 2))
    return tuple(pads)
  if not isinstance(padding, (tuple, list)) or len(padding) != len(shape):
    return None
  pairs = tuple(_ints(p, 2) for p in padding)
  return None if None in pairs or any(lo < 0 or hi < 0 for lo, hi in pairs) else pairs


def reduce_window(a):
  """jax.lax.reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding) of one
  register tile of 1 to 3 axes (see the module)."""
  from .jnp_calls import library
  x, init, comp = a["operand"], a["init_value"], a["computation"]
  shape = _shape(a, x)
  if shape is None or not 1 <= len(shape) <= 3 or isinstance(init, (tuple, list)) or isinstance(x, (tuple, list)):
    return None
  rank = len(shape)
  lib = library(comp) if callable(comp) else None
  name = lib[1] if lib is not None else getattr(comp, "__name__", None) if getattr(
      comp, "__module__", None) in ("_operator", "operator") else None
  combine = _COMBINE.get(name)
  window = _ints(a["window_dimensions"], rank)
  strides = (1,) * rank if a["window_strides"] is None else _ints(a["window_strides"], rank)
  if combine is None or window is None or strides is None or min(window + strides) < 1:
    return None
  for dil in (a["base_dilation"], a["window_dilation"]):
    if dil is not None and _ints(dil, rank) != (1,) * rank:
      return None
  pads = _pads(a["padding"], shape, window, strides)
  if pads is None:
    return None
  padded = tuple(n + lo + hi for n, (lo, hi) in zip(shape, pads))
  out = tuple((p - w) // s + 1 for p, w, s in zip(padded, window, strides))
  if min(out) < 1:
    return None
  tile = "{0}" if not any(lo or hi for lo, hi in pads) else f"jnp.pad({{0}}, {pads!r}, constant_values={{1}})"
  taps = tuple(tuple(slice(t, t + (o - 1) * s + 1, s) for t, o, s in zip(tap, out, strides))
               for tap in itertools.product(*(range(w) for w in window)))
  from .form_helpers import window_taps
  return f"{{3}}({tile}, {{1}}, {{2}}, {combine!r})", [x, init, taps, window_taps]


# (lib, name) -> (the parameters the form reads, its maker): merged into jnp_calls.SHAPED
WINDOWS = {
    ("jax.lax", "reduce_window"): (("operand", "init_value", "computation", "window_dimensions", "window_strides",
                                    "padding", "base_dilation", "window_dilation"), reduce_window),
}
