"""`jax.lax.reduce_window` of a register tile (max, min, sum and product pooling) and `jax.image.resize` at
integer factors (resize, below), written in the kernel language as
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

from .jnp_forms import _dtype, _kind
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


def _method(m):
  """jax.image.resize's method (a string or a ResizeMethod) as 'nearest' or 'linear'; None for the others."""
  name = (m if isinstance(m, str) else getattr(m, "name", "")).lower()
  return "nearest" if name == "nearest" else "linear" if name in ("linear", "bilinear", "trilinear",
                                                                   "triangle") else None


def resize(a):
  """jax.image.resize(image, shape, method) of a register tile at static integer factors (probe 53c; it was MG003):
  'nearest' as jax's (source index floor((i + 0.5) * in / out)): each element repeated f times along an axis
  scaled up by f (jnp.repeat), every f-th from f // 2 along one scaled down by f (a strided slice); 'linear'
  ('bilinear') scaled up by 2, jax's triangle weights 3/4 and 1/4 of the two nearest elements, the edge element
  alone at the ends (form_helpers.upsample2_linear), one axis after another (16-bit floats in float32, rounded
  once; jax's einsum may round between the axes: within an ulp). Other factors and methods stay MG003 with its
  hint."""
  x, shape, method = a["image"], a["shape"], _method(a["method"])
  own = _shape(a, x)
  if own is None or method is None or not isinstance(shape, (tuple, list)) or len(shape) != len(own) or not all(
      isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
    return None
  form, extra = "{0}", []
  for d, (m, n) in enumerate(zip(own, shape)):
    if m == n:
      continue
    if method == "linear":
      if n != 2 * m or m < 2:
        return None
      if not extra:
        from .form_helpers import upsample2_linear
        extra.append(upsample2_linear)
      form = f"{{1}}({form}, {d})"
    elif n % m == 0:
      form = f"jnp.repeat({form}, {n // m}, axis={d})"
    elif m % n == 0:
      f = m // n
      form = f"({form})[{', '.join([':'] * d + [f'{f // 2}::{f}'])}]"
    else:
      return None
  if extra and _kind(x) == "float" and getattr(_dtype(x), "bits", 32) == 16:    # (16-bit floats blended in float32,
    form = form.replace("{0}", "{0}.astype(jnp.float32)", 1) + ".astype({0}.dtype)"   # rounded once)
  elif extra and _kind(x) != "float":
    return None
  return form, [x, *extra]


# (lib, name) -> (the parameters the form reads, its maker): merged into jnp_calls.SHAPED
WINDOWS = {
    ("jax.image", "resize"): (("image", "shape", "method", "antialias", "precision"), resize),
    ("jax.lax", "reduce_window"): (("operand", "init_value", "computation", "window_dimensions", "window_strides",
                                    "padding", "base_dilation", "window_dilation"), reduce_window),
}
