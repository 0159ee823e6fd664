"""jax.scipy.ndimage.map_coordinates of a register tensor (a 1-, 2- or 3-D grid read whole: a volume's trilinear
interpolation, a bilinear grid_sample of an image) at a list of coordinate tensors of one shape, order 0 or 1 and
jax's modes, as jax computes it (probe 57g; MG003 before): ndimage_helpers' map_coordinates. Forms as jnp_math's
are (the parameters a form reads, a function of the bound arguments giving (the form, its operands) or None: MG003
and its hint stand)."""
from __future__ import annotations

from .jnp_forms import _dtype, _kind

_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")


def _map_coordinates(a):
  from . import ndimage_helpers
  from .ops.base import is_value
  from .types import TensorType
  x, coords, order, mode, cval = a["input"], a["coordinates"], a["order"], a["mode"], a["cval"]
  if isinstance(coords, list):
    coords = tuple(coords)
  stacked = is_value(coords) and isinstance(coords.type, TensorType) and is_value(x) and \
      isinstance(x.type, TensorType) and len(coords.type.shape) >= 2 and coords.type.shape[0] == len(x.type.shape)
  if stacked:               # (an array of the coordinates, (ndim, ...): jax iterates its first axis)
    body = ", ".join(f"{{2}}[{k}]" for k in range(coords.type.shape[0]))
    got = _map_coordinates({**a, "coordinates": tuple(coords for _ in range(coords.type.shape[0]))})
    if got is None:
      return None
    form, operands = got
    return form.replace("{2}", f"({body},)"), [*operands[:2], coords, *operands[3:]]
  if not is_value(x) or not isinstance(x.type, TensorType) or not 1 <= len(x.type.shape) <= 3 or \
      not isinstance(coords, tuple) or len(coords) != len(x.type.shape) or order not in (0, 1) or \
      isinstance(order, bool) or mode not in _MODES or _kind(x) not in ("float", "int") or \
      not isinstance(cval, (int, float)) or isinstance(cval, bool):
    return None
  shapes = {tuple(getattr(c.type, "shape", ())) for c in coords if is_value(c)}
  if len(shapes) != 1 or not all(is_value(c) and isinstance(c.type, TensorType) and _kind(c) == "float"
                                 for c in coords):
    return None
  is_int = _kind(x) == "int"
  if is_int:
    cval = int(cval)
  d = str(_dtype(x))
  if not is_int and d != str(_dtype(coords[0])):
    return None        # (weights of another float dtype than the grid's: jnp's promotion, not taken)
  return "{0}({1}, {2}, {3}, {4}, {5}, {6})", [ndimage_helpers.map_coordinates, x, coords, order, mode, cval, is_int]


NDIMAGE = {
    ("jax.scipy.ndimage", "map_coordinates"): (("input", "coordinates", "order", "mode", "cval"), _map_coordinates),
}
