"""jnp's finite differences and cumulative functions of register values (probe 56f; they were MG003): forms as
jnp_forms' are (the parameters a form reads, a function of the bound arguments giving (the form, its operands) or
None, whose MG003 hint stands).

`jnp.gradient(f, *spacing, axis=None)` of numbers for spacing is jax's: along each axis, the central difference
`(f[i + 1] - f[i - 1]) * 0.5 / h` inside, the one-sided `(f[1] - f[0]) / h` and `(f[-1] - f[-2]) / h` at the ends.
The neighbours are rolls of the tile and the ends selects on the axis' index, as an axis' first or last slice is no
register tensor (the last axis of a tile); a list of one tensor an axis, the tensor itself for one axis.
`jnp.cumulative_sum` / `jnp.cumulative_prod(x, axis=None, dtype=None, include_initial=False)` (NumPy 2's names) are
jnp.cumsum / jnp.cumprod along the axis (one axis, or a vector's), with include_initial a 0 (1) joined before it."""
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


NUMERICS = {
    ("jnp", "gradient"): (("f", "varargs", "axis", "edge_order"), _gradient),
    ("jnp", "cumulative_sum"): (("x", "axis", "dtype", "include_initial"), _cumulative("cumsum", 0)),
    ("jnp", "cumulative_prod"): (("x", "axis", "dtype", "include_initial"), _cumulative("cumprod", 1)),
}
