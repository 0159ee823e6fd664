"""jnp's phase functions of real register values that signal-processing kernels call (probe 72b; each was MG003
"has no form in a kernel", whose hint said to write it with ml.* functions): `jnp.unwrap(p, discont, axis, period)`
(a phase vocoder's or a pitch tracker's unwrapped phase along frames or bins) as jax's own definition, the jumps
`d = p - roll(p, 1)` wrapped into [-period / 2, period / 2) and their corrections cumulatively summed (the first
element's correction 0: jax's `concatenate([p[:1], p[1:] + cumsum(...)])`, with no slice of another length); and
`jnp.angle(x)` of a real x (jax's atan2(0, x): 0 or pi; `deg=True` in degrees), of 1-D and 2-D float tensors along
a static axis; `jnp.fft.fftshift` / `ifftshift` (a centred spectrum's roll by n // 2 along each axis; MG003 before,
whose hint wrote the concatenation) of a register tensor."""
from __future__ import annotations

import math

from .jnp_forms import _dtype, _kind


def _shape(x):
  return getattr(getattr(x, "type", None), "shape", None)


def _unwrap(a):
  p, axis, period, discont = a["p"], a["axis"], a["period"], a["discont"]
  s = _shape(p)
  if s is None or len(s) not in (1, 2) or _kind(p) != "float" or not isinstance(axis, int) or \
      not -len(s) <= axis < len(s) or not isinstance(period, (int, float)) or \
      discont is not None and not isinstance(discont, (int, float)):
    return None
  axis %= len(s)
  half = period / 2
  disc = half if discont is None else discont
  n = s[axis]
  idx = f"ml.arange({n})" if len(s) == 1 else f"ml.arange({n})[:, None]" if axis == 0 else f"ml.arange({n})[None, :]"
  ty = "ml.float32" if str(_dtype(p)) in ("float16", "bfloat16") else "{0}.dtype"
  i, per, dc = repr(float(half)), repr(float(period)), repr(float(disc))
  fix = (f"ml.where((ml.abs(_d_) < {dc}) | ({idx} == 0), 0.0, ml.where((_m_ == -{i}) & (_d_ > 0), {i}, _m_) - _d_)")
  form = (f"(lambda _p_: (lambda _d_: (lambda _m_: _p_ + ml.cumsum({fix}, axis={axis}))((_d_ + {i}) % {per} - {i}))"
          f"(_p_ - ml.roll(_p_, 1, axis={axis})))({{0}}.astype({ty}))")
  return (f"({form}).astype({{0}}.dtype)" if ty == "ml.float32" else form), [p]


def _angle(a):
  z, deg = a["z"], a["deg"]
  if _shape(z) is None or _kind(z) not in ("float", "int", "bool") or not isinstance(deg, bool):
    return None
  x = "{0}" if _kind(z) == "float" else "{0}.astype(ml.float32)"
  form = f"ml.atan2(ml.zeros_like({x}), {x})"
  return (f"({form}) * {repr(180 / math.pi)}" if deg else form), [z]


def _shift(sign):
  """jnp.fft.fftshift (sign 1) and ifftshift (-1): a roll by n // 2 (by -(n // 2)) along each of `axes` (all
  where None), jax's own definition."""
  def make(a):
    x, axes = a["x"], a["axes"]
    s = _shape(x)
    if s is None or not s:
      return None
    axes = tuple(range(len(s))) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    if not all(isinstance(ax, int) and -len(s) <= ax < len(s) for ax in axes):
      return None
    axes = tuple(ax % len(s) for ax in axes)
    shifts = tuple(sign * (s[ax] // 2) for ax in axes)
    return f"ml.roll({{0}}, {shifts}, axis={axes})", [x]
  return make


FORMS = {("jnp", "unwrap"): (("p", "discont", "axis", "period"), _unwrap),
         ("jnp.fft", "fftshift"): (("x", "axes"), _shift(1)), ("jnp.fft", "ifftshift"): (("x", "axes"), _shift(-1)),
         ("jnp", "angle"): (("z", "deg"), _angle)}
