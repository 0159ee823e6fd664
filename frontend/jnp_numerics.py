"""jnp's finite differences and cumulative functions of register values (probe 56f; they were MG003): forms as
jnp_forms' are (the parameters a form reads, a function of the bound arguments giving (the form, its operands) or
None, whose MG003 hint stands).

`jnp.gradient(f, *spacing, axis=None)` of numbers for spacing is jax's: along each axis, the central difference
`(f[i + 1] - f[i - 1]) * 0.5 / h` inside, the one-sided `(f[1] - f[0]) / h` and `(f[-1] - f[-2]) / h` at the ends.
The neighbours are rolls of the tile and the ends selects on the axis' index, as an axis' first or last slice is no
register tensor (the last axis of a tile); a list of one tensor an axis, the tensor itself for one axis.
`jnp.cumulative_sum` / `jnp.cumulative_prod(x, axis=None, dtype=None, include_initial=False)` (NumPy 2's names) are
jnp.cumsum / jnp.cumprod along the axis (one axis, or a vector's), with include_initial a 0 (1) joined before it.
`jnp.cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None)` of vectors of 2 or 3 components (a point set's (n, 3)
xyz, or (3, n) with axis=0) is jax's: each operand's components taken along its axis (a missing third one zeros),
`a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0` stacked at axisc, and of two 2-D vectors the z component
alone (probe 57g; it was MG003)."""
from __future__ import annotations

from .jnp_forms import _dtype, _kind
from .jnp_math import _shape


def _axes(axis, rank):
  if axis is None:
    return tuple(range(rank))
  axes = axis if isinstance(axis, (tuple, list)) else (axis,)
  if not all(isinstance(v, int) and not isinstance(v, bool) and -rank <= v < rank for v in axes):
    return None
  axes = tuple(v % rank for v in axes)
  return axes if len(set(axes)) == len(axes) else None


def _gradient(a):
  f, spacing = a["f"], tuple(a.get("varargs") or ())
  shape = _shape(a, f)
  if shape is None or _kind(f) not in ("float", "int", "bool") or a.get("edge_order") is not None:
    return None
  axes = _axes(a.get("axis"), len(shape))
  if not axes or any(shape[ax] < 2 for ax in axes):
    return None
  if not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in spacing) or \
      len(spacing) not in (0, 1, len(axes)):
    return None                 # (spacing arrays: coordinates, MG003)
  hs = [float(h) for h in spacing] * (len(axes) if len(spacing) == 1 else 1) if spacing else [1.0] * len(axes)
  x = "{0}" if _kind(f) == "float" else "{0}.astype(ml.float32)"
  rank = len(shape)
  parts = []
  for ax, h in zip(axes, hs):
    n = shape[ax]
    idx = "ml.arange(%d)%s" % (n, "" if rank == 1 else "[" + ", ".join(
        ":" if k == ax else "None" for k in range(rank)) + "]")
    up, down = f"ml.roll(_g_, {n - 1}, {ax})", f"ml.roll(_g_, 1, {ax})"    # f[i + 1] and f[i - 1]
    parts.append(f"(lambda _g_: ml.where({idx} == 0, ({up} - _g_) / {h!r}, ml.where({idx} == {n - 1},"
                 f" (_g_ - {down}) / {h!r}, ({up} - {down}) * 0.5 / {h!r})))({x})")
  return (parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"), [f]


def _cumulative(name, initial):
  def make(a):
    x, axis, dtype, include = a["x"], a.get("axis"), a.get("dtype"), a.get("include_initial", False)
    shape = _shape(a, x)
    if shape is None or _dtype(x) is None or not isinstance(include, bool):
      return None
    if axis is None:
      if len(shape) != 1:
        return None             # (jax's ValueError: an axis for a tensor of several)
      axis = 0
    if not isinstance(axis, int) or isinstance(axis, bool) or not -len(shape) <= axis < len(shape):
      return None
    axis %= len(shape)
    form = f"ml.{name}({{0}}, axis={axis}, dtype={{1}})"
    if include:
      one = tuple(1 if k == axis else m for k, m in enumerate(shape))
      form = f"(lambda _c_: ml.concatenate([ml.full({one}, {initial}, _c_.dtype), _c_], axis={axis}))({form})"
    return form, [x, dtype]
  return make


def _cross(a):
  x, y = a["a"], a["b"]
  axes = (a["axis"],) * 3 if a["axis"] is not None else (a["axisa"], a["axisb"], a["axisc"])
  sx, sy = (tuple(getattr(getattr(v, "type", None), "shape", ())) for v in (x, y))
  if not sx or not sy or _kind(x) not in ("float", "int") or _kind(y) not in ("float", "int") or \
      not all(isinstance(v, int) and not isinstance(v, bool) for v in axes):
    return None
  parts = []
  for i, (shape, axis) in enumerate(((sx, axes[0]), (sy, axes[1]))):
    if not -len(shape) <= axis < len(shape) or shape[axis] not in (2, 3):
      return None
    axis %= len(shape)
    comps = [f"{{{i}}}[{', '.join(str(k) if d == axis else ':' for d in range(len(shape)))}]"
             for k in range(shape[axis])]
    parts.append(comps + ([f"ml.zeros_like({comps[0]})"] if len(comps) == 2 else []))
  (a0, a1, a2), (b0, b1, b2) = parts
  if sx[axes[0]] == sy[axes[1]] == 2:
    return f"{a0} * {b1} - {a1} * {b0}", [x, y]
  return (f"ml.stack([{a1} * {b2} - {a2} * {b1}, {a2} * {b0} - {a0} * {b2}, {a0} * {b1} - {a1} * {b0}],"
          f" axis={axes[2]})"), [x, y]


NUMERICS = {
    ("jnp", "cross"): (("a", "b", "axisa", "axisb", "axisc", "axis"), _cross),
    ("jnp", "gradient"): (("f", "varargs", "axis", "edge_order"), _gradient),
    ("jnp", "cumulative_sum"): (("x", "axis", "dtype", "include_initial"), _cumulative("cumsum", 0)),
    ("jnp", "cumulative_prod"): (("x", "axis", "dtype", "include_initial"), _cumulative("cumprod", 1)),
}
