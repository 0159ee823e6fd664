"""jax.scipy.special's elementwise functions built of logs and erf, and jnp's odds a Pallas kernel reaches for, as
forms of ml functions in jax's own definitions (probe 49b): `xlogy`, `xlog1py` (0 where x is 0, unless y is NaN),
`entr`, `rel_entr`, `kl_div`, `ndtr` (float32, as jax's), `jnp.divmod` (ml's `//` and `%`, jnp's bit for bit),
`jnp.vdot` of two tiles of one shape, and `jnp.conjugate` / `conj` / `real` / `imag` of real values. Forms as
jnp_math's are (the parameters a form reads, a function of the bound arguments giving (the form, its operands) or
None: MG003 and its hint stand)."""
from __future__ import annotations

import numpy as np

from .jnp_forms import _dtype, _kind

_FLOATS = ("float32", "float16", "bfloat16")
_HALF_SQRT_2 = float(np.float32(0.5) * np.sqrt(np.float32(2.0)))


def _inexact_pair(x, y):
  """(x's form, y's form) converted to their inexact promotion (integers and bools as float32), or None."""
  from .ops.promotion import arithmetic_in
  ds = [_dtype(v) for v in (x, y)]
  if all(d is None for d in ds) or any(_kind(v) not in ("float", "int", "bool") for v in (x, y)):
    return None
  floats = [d for v, d in zip((x, y), ds) if d is not None and _kind(v) == "float"]
  if len(floats) == 2 and floats[0] != floats[1]:
    d = arithmetic_in(*floats)
    if d is None:
      return None
  elif floats:
    d = floats[0]
  else:
    d = "float32"
  d = str(d)
  if d not in _FLOATS:
    return None
  return tuple(f"{{{i}}}" if dv is not None and str(dv) == d else f"{{{i}}}.astype(ml.{d})" if dv is not None else
               f"{{{i}}}" for i, dv in enumerate(ds))


def _xlog(log):
  def make(a):
    x, y = a["x"], a["y"]
    got = _inexact_pair(x, y)
    if got is None:
      return None
    p, q = got
    if _dtype(y) is None:          # (a number y: a tile of x's shape, as jnp broadcasts it)
      q = f"ml.full({{0}}.shape, {{1}}, {p.split('astype(')[1][:-1] if 'astype' in p else '{0}.dtype'})"
    if _dtype(x) is None:
      p = f"ml.full({{1}}.shape, {{0}}, {q.split('astype(')[1][:-1] if 'astype' in q else '{1}.dtype'})"
    return f"ml.where(({p} != 0) | ml.isnan({q}), {p} * ml.{log}({q}), 0)", [x, y]
  return make


def _rel_entr(kl):
  """rel_entr(p, q): p log p - p log q where both are positive, 0 where p is 0 and q not negative, else inf;
  kl_div adds q - p (jax's definitions)."""
  def make(a):
    p, q = a["p"], a["q"]
    got = _inexact_pair(p, q)
    if got is None or _dtype(p) is None or _dtype(q) is None:
      return None
    x, y = got
    form = (f"ml.where(({x} > 0) & ({y} > 0), {x} * ml.log({x}) - {x} * ml.log({y}),"
            f" ml.where(({x} == 0) & ({y} >= 0), 0, float('inf')))")
    return (f"{form} - {x} + {y}" if kl else form), [p, q]
  return make


def _entr(a):
  x = a["x"]
  got = _inexact_pair(x, 1.0)
  if got is None or _dtype(x) is None:
    return None
  p = got[0]
  return f"ml.where({p} < 0, float('-inf'), -ml.where(({p} != 0) | ml.isnan({p}), {p} * ml.log({p}), 0))", [x]


def _ndtr(a):
  x = a["x"]
  if str(_dtype(x)) != "float32":
    return None                      # (jax's TypeError for another dtype)
  h = repr(_HALF_SQRT_2)
  w = f"({{0}} * {h})"
  return (f"0.5 * ml.where(ml.abs({w}) < {h}, 1.0 + ml.erf({w}), ml.where({w} > 0, 2.0 - ml.erfc(ml.abs({w})),"
          f" ml.erfc(ml.abs({w}))))"), [x]


def _divmod(a):
  x, y = a["x1"], a["x2"]
  if all(_dtype(v) is None for v in (x, y)) or any(_kind(v) not in ("float", "int") for v in (x, y)):
    return None
  return "({0} // {1}, {0} % {1})", [x, y]


def _unravel(a):
  """jnp.unravel_index(indices, shape) of a run-time index (a beam search's flat argmax over (beams, vocab); probe
  56d): jax's own steps, divmod by each extent from the last, then an index past the end clipped to the last
  position of each axis (and one below -1, signed, to 0)."""
  x, shape = a["indices"], a["shape"]
  shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
  if _dtype(x) is None or _kind(x) != "int" or not shape or not all(
      isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s > 0 for s in shape):
    return None
  rest, parts = "{0}", []
  for s in reversed(shape):
    parts.append(f"({rest} % {int(s)})")
    rest = f"({rest} // {int(s)})"
  signed = not str(_dtype(x)).startswith("uint")
  inner = [f"ml.where({rest} < -1, 0, {p})" if signed else p for p in reversed(parts)]
  outs = [f"ml.where({rest} > 0, {int(s) - 1}, {i})" for s, i in zip(shape, inner)]
  return "(" + ", ".join(outs) + ("," if len(outs) == 1 else "") + ")", [x]


def _ravel(a):
  """jnp.ravel_multi_index(multi_index, dims, mode=, order=) of run-time indices (a beam's id and a token's, one
  flat candidate id; probe 56d), as jax computes it: each index clipped (mode='clip') or wrapped ('wrap'), times its
  stride, summed in the indices' dtype. mode='raise' checks values, which jax does only outside jit: no form."""
  idx, dims, mode, order = a["multi_index"], a["dims"], a["mode"], a["order"]
  if not isinstance(idx, (tuple, list)) or not isinstance(dims, (tuple, list)) or len(idx) != len(dims) or not idx \
      or mode not in ("clip", "wrap", "ignore") or order not in ("C", "F") or a.get("dtype") is not None:
    return None
  if any(_kind(i) != "int" for i in idx) or not all(isinstance(d, (int, np.integer)) and d > 0 for d in dims) \
      or len({str(_dtype(i)) for i in idx if _dtype(i) is not None}) != 1:
    return None
  d = next(str(_dtype(i)) for i in idx if _dtype(i) is not None)
  dims = [int(n) for n in dims]
  strides = np.cumprod((1,) + tuple(dims[:-1])) if order == "F" else np.cumprod((1,) + tuple(dims[1:][::-1]))[::-1]
  terms = []
  for k, (n, st) in enumerate(zip(dims, strides)):
    i = (f"ml.clip({{{k}}}, 0, {n - 1})" if mode == "clip" else f"({{{k}}} % {n})" if mode == "wrap" else f"{{{k}}}")
    terms.append(f"ml.cast({i}, {{{len(idx)}}}) * {int(st)}")
  return " + ".join(terms), [*idx, d]


def _lexsort(a):
  """jnp.lexsort(keys, axis): jax's own, lax.sort of the keys (the last one first) and the positions along the axis,
  the positions it gives (ops/sort_together.py; probe 56d)."""
  keys, axis = a["keys"], a["axis"]
  if not isinstance(keys, (tuple, list)) or not keys or any(_dtype(k) is None for k in keys) \
      or len({tuple(k.type.shape) for k in keys}) != 1 or not isinstance(axis, int):
    return None
  shape = tuple(keys[0].type.shape)
  if not -len(shape) <= axis < len(shape):
    return None
  axis %= len(shape)
  idx = ", ".join(":" if i == axis else "None" for i in range(len(shape)))
  iota = f"ml.broadcast_to(ml.arange({shape[axis]})[{idx}], {shape!r})"
  ops = ", ".join(f"{{{i}}}" for i in reversed(range(len(keys))))
  return f"ml.sort(({ops}, {iota}), axis={axis}, num_keys={len(keys)})[-1]", [*keys]


def _vdot(a):
  """jnp.vdot of two tiles of one shape: dot of the flattened (real) operands, float32 products summed for 16-bit
  floats and converted to jnp's dtype."""
  x, y = a["a"], a["b"]
  sx, sy = (getattr(getattr(v, "type", None), "shape", None) for v in (x, y))
  if sx is None or sx != sy or a.get("precision") is not None or any(_kind(v) not in ("float", "int") for v in (x, y)):
    return None
  from .ops.promotion import arithmetic_in
  d = _dtype(x) if _dtype(x) == _dtype(y) else arithmetic_in(_dtype(x), _dtype(y))
  want = a.get("preferred_element_type")
  if d is None:
    return None
  wide = str(d) in ("float16", "bfloat16")
  conv = "{i}.astype(ml.float32)" if wide else "{i}"
  px, py = conv.replace("{i}", "{0}"), conv.replace("{i}", "{1}")
  if not wide and str(_dtype(x)) != str(d):
    px = f"{{0}}.astype(ml.{d})"
  if not wide and str(_dtype(y)) != str(d):
    py = f"{{1}}.astype(ml.{d})"
  return f"ml.sum({px} * {py}).astype({'{2}' if want is not None else f'ml.{d}'})", [x, y, want]


def _real(part):
  def make(a):
    x = a.get("x", a.get("val"))
    if _dtype(x) is None or _kind(x) not in ("float", "int", "bool"):
      return None
    return ("{0}", [x]) if part else ("ml.zeros({0}.shape, {0}.dtype)", [x])
  return make


def _gcd(name):
  """jnp.gcd / jnp.lcm of two integer operands of one dtype (or one a Python int): form_helpers' fixed Euclid
  steps, enough for the dtype's values (ceil(1.44 bits) + 2: Lame's bound)."""
  def make(a):
    from . import form_helpers
    x, y = a["x1"], a["x2"]
    ds = {str(_dtype(v)) for v in (x, y) if _dtype(v) is not None}
    if len(ds) != 1 or any(_kind(v) != "int" for v in (x, y)):
      return None
    bits = np.dtype(ds.pop()).itemsize * 8
    p, q = ("ml.full({1}.shape, {0}, {1}.dtype)" if _dtype(x) is None else "{0}",
            "ml.full({0}.shape, {1}, {0}.dtype)" if _dtype(y) is None else "{1}")     # (a Python int: jnp's weak one)
    return f"{{2}}({p}, {q}, {{3}})", [x, y, getattr(form_helpers, name), int(np.ceil(bits * 1.4405)) + 2]
  return make


SCIPY = {
    ("jax.scipy.special", "xlogy"): (("x", "y"), _xlog("log")),
    ("jax.scipy.special", "xlog1py"): (("x", "y"), _xlog("log1p")),
    ("jax.scipy.special", "entr"): (("x",), _entr),
    ("jax.scipy.special", "rel_entr"): (("p", "q"), _rel_entr(False)),
    ("jax.scipy.special", "kl_div"): (("p", "q"), _rel_entr(True)),
    ("jax.scipy.special", "ndtr"): (("x",), _ndtr),
    ("jnp", "divmod"): (("x1", "x2"), _divmod),
    ("jnp", "gcd"): (("x1", "x2"), _gcd("gcd")), ("jnp", "lcm"): (("x1", "x2"), _gcd("lcm")),
    ("jnp", "vdot"): (("a", "b", "precision", "preferred_element_type"), _vdot),
    ("jnp", "unravel_index"): (("indices", "shape"), _unravel),
    ("jnp", "ravel_multi_index"): (("multi_index", "dims", "mode", "order", "dtype"), _ravel),
    ("jnp", "lexsort"): (("keys", "axis"), _lexsort),
    ("jnp", "conjugate"): (("x",), _real(True)), ("jnp", "conj"): (("x",), _real(True)),
    ("jnp", "real"): (("val",), _real(True)), ("jnp", "imag"): (("val",), _real(False)),
}
