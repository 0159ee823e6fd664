"""jnp.piecewise and jnp.kron of register values (probe 54d), forms as jnp_forms' are (the parameters a form reads,
a function of the bound arguments giving (the form, its operands) or None, whose MG003 hint stands).

`jnp.piecewise(x, condlist, funclist)` is jax's: each function (or constant) applied to the whole of `x`, the
last condition that holds choosing (an added first function, 0, where there are as many conditions as functions;
else the extra function is the otherwise), each result in x's dtype. `jnp.kron(a, b)` of two 1-D or two 2-D
tiles is ml.repeat of `a` (each element repeated b's extent along each axis) times `b` tiled (concatenated a's
extent of times): a[i, j] * b[k, l] at (i * p + k, j * q + l), as jnp's broadcast product reshaped."""
from __future__ import annotations

import numpy as np

from .jnp_forms import _dtype, _shape


def _piecewise(a):
  x, conds, funcs = a["x"], a["condlist"], a["funclist"]
  if _dtype(x) is None or a.get("args") or a.get("kw"):
    return None
  if not isinstance(conds, (list, tuple)):   # (jax reads a bare array's first axis as its conditions: no form)
    return None
  conds = list(conds)
  funcs = list(funcs) if isinstance(funcs, (list, tuple)) else [funcs]
  if not conds or any(_dtype(c) is None or str(_dtype(c)) != "bool" for c in conds):
    return None
  if len(funcs) == len(conds):
    funcs = [0] + funcs
  elif len(funcs) == len(conds) + 1:
    funcs = funcs[-1:] + funcs[:-1]      # (jax's order: the otherwise first, then one function a condition)
  else:
    return None
  ops, n = [x, str(_dtype(x))], len(conds)
  def value(i, f):
    if callable(f):
      return f"({{{i}}}({{0}}))"
    if isinstance(f, (bool, int, float)):
      return f"{{{i}}}"
    return None
  parts = [value(2 + n + i, f) for i, f in enumerate(funcs)]
  if None in parts:
    return None
  form = f"ml.where({{0}} == {{0}}, {parts[0]}, 0).astype({{1}})"       # (the otherwise, at x's shape)
  for k in range(n):
    form = f"ml.where({{{2 + k}}}, {parts[k + 1]}, {form}).astype({{1}})"
  return form, ops + conds + funcs


def _kron(a):
  x, y = a["a"], a["b"]
  sx, sy = _shape(x), _shape(y)
  if sx is None or sy is None or len(sx) != len(sy) or len(sx) not in (1, 2):
    return None
  own = a.get("_shape_of", _shape)(x)
  if int(np.prod(own)) <= SCALAR_A and str(_dtype(x)) == str(_dtype(y)):
    return _kron_scalars(tuple(own)), [x, y]
  rep, tile = "{0}", "{1}"
  for axis, (m, p) in enumerate(zip(sx, sy)):
    if p > 1:
      rep = f"ml.repeat({rep}, {p}, axis={axis})"
    if m > 1:
      tile = f"ml.concatenate([{', '.join([tile] * m)}], axis={axis})"
  return f"{rep} * {tile}", [x, y]


SCALAR_A = 16          # a of at most this many elements: its scalars times b (probe 55b)


def _kron_scalars(own):
  """jnp.kron(a, b) of a small `a` (its own shape `own`, a padded trace may hold it padded) as its scalar elements
  times b, concatenated: a 4-element a's ml.repeat was MG204 (its (4, 1) broadcast; probe 55b). Only where a and b
  share a dtype (a scalar of a times b keeps b's)."""
  if len(own) == 1:
    return f"ml.concatenate([{', '.join(f'{{0}}[{i}] * {{1}}' for i in range(own[0]))}], axis=0)" \
        if own[0] > 1 else "{0}[0] * {1}"
  rows = [f"ml.concatenate([{', '.join(f'{{0}}[{i}, {j}] * {{1}}' for j in range(own[1]))}], axis=1)"
          if own[1] > 1 else f"{{0}}[{i}, 0] * {{1}}" for i in range(own[0])]
  return f"ml.concatenate([{', '.join(rows)}], axis=0)" if own[0] > 1 else rows[0]


COMPOSE = {
    ("jnp", "piecewise"): (("x", "condlist", "funclist", "args", "kw"), _piecewise),
    ("jnp", "kron"): (("a", "b"), _kron),
}


def linspace_f32(start, stop, num):
  """jnp.linspace(start, stop, num) in float32 as jax computes it: start * (1 - s) + stop * s, s = iota / (num - 1),
  each step rounded to float32, the last `stop` itself."""
  div = num - 1
  lo, hi = np.float32(start), np.float32(stop)
  s = np.arange(div, dtype=np.float32) / np.float32(div)
  return np.concatenate([lo * (np.float32(1) - s) + hi * s, [hi]]).astype(np.float32)


def _histogram(a):
  """jnp.histogram(x, bins=n, range=(lo, hi)) of a float32 (or integer) tile: jax's float32 edges (linspace_f32),
  each bin's count the number of elements e[j] <= x < e[j + 1] (the last bin's right edge included: jax's
  searchsorted, side='right', with x == e[-1] in the last bin; NaN and values outside the range in none), a sum a
  bin; `density=True` divides by the count and the widths. The edges are a NumPy array (static)."""
  x, bins, rng, weights, density = a["a"], a["bins"], a["range"], a["weights"], a["density"]
  d = str(_dtype(x))
  if d not in ("float32", "int32", "int16", "int8", "uint8", "uint16", "uint32", "bool") or weights is not None:
    return None
  if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or bins < 8 or bins % 8:
    return None       # (a register vector of bins: a multiple of 8; other bins, array edges: its MG003 hint)
  if not isinstance(rng, (tuple, list)) or len(rng) != 2 or \
     not all(isinstance(r, (int, float, np.integer, np.floating)) and not isinstance(r, bool) for r in rng):
    return None       # (a range from the data needs the data's extremes first: MG003)
  if not rng[0] <= rng[1] or density not in (None, False, True):
    return None
  e = linspace_f32(float(rng[0]) - (rng[0] == rng[1]) * 0.5, float(rng[1]) + (rng[0] == rng[1]) * 0.5, bins + 1)
  v = "{0}.astype(ml.float32)"
  form = f"ml.zeros(({bins},), ml.float32)"
  for j in range(bins):
    top = "<=" if j == bins - 1 else "<"
    inside = f"(({v} >= {float(e[j])!r}) & ({v} {top} {float(e[j + 1])!r})).astype(ml.float32)"
    form = f"ml.where(ml.arange({bins}) == {j}, ml.sum({inside}), {form})"
  if density:
    widths = np.diff(e).astype(np.float32)
    if not np.all(widths == widths[0]):
      return None
    form = f"(({form}) / {float(widths[0])!r}) / ml.sum({form})"
  return f"({form}, {{1}})", [x, e]


COMPOSE[("jnp", "histogram")] = (("a", "bins", "range", "weights", "density"), _histogram)
