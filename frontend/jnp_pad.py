"""jnp.pad of a register tensor (probe 51g), as a stencil or a causal convolution written in jnp's words pads its
tile: `p = jnp.pad(v, 1)` then the taps `p[di:di + H, dj:dj + W]`, or `jnp.pad(v, ((3, 0), (0, 0)))` of a (L, D)
tile for a width-4 causal conv1d. It was MG003, whose hint read shifted windows from memory.

The form joins, along each padded axis in turn, the parts jnp puts before and after the tensor: `ml.full` of the
constant (mode 'constant', jnp's default, `constant_values` one number or scalar), the first or last slice
repeated ('edge'), the slices next to the edge reversed ('reflect', without the edge; 'symmetric', with it) or
the slices at the other end ('wrap'), with `ml.concatenate` (through an SMEM scratch). The parts take the tensor's
own shape, so an odd tile computed padded (a (28, 28) image) pads as its padded trace joins them. A pad of a GMEM ref, of
per-axis constants, of a width a mode cannot take (a reflection wider than the axis) or a run-time width has no
form: its MG003 hint stands. Along a vector's or a tile's last axis, whose first or last elements are slices no
register tensor holds, the modes other than 'constant' are selects of rolls (`_last_axis`, probe 56f)."""
from __future__ import annotations

import numpy as np

_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _widths(pad_width, rank):
  """((lo, hi),) * rank of jnp's pad_width (an int, a pair, or a pair per axis), static non-negative ints; None
  where it is not."""
  try:
    w = np.asarray(pad_width, dtype=object)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in w.ravel()):
      return None
    w = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (rank, 2))
  except (ValueError, TypeError):
    return None
  if (w < 0).any():
    return None
  return [(int(lo), int(hi)) for lo, hi in w]


def _at(rank, axis, part):
  """The subscript text `[:, a:b]` of `part` (a slice's text) along `axis` of a rank-`rank` tensor."""
  return "[" + ", ".join(part if k == axis else ":" for k in range(rank)) + "]"


def _parts(mode, rank, axis, lo, hi, n, shape):
  """(the text before, the text after) joined to `_p_` along `axis` (n elements) for `mode`; None where the mode
  cannot take the widths."""
  def size(k):
    return tuple(k if j == axis else m for j, m in enumerate(shape))
  if mode == "constant":
    fill = "ml.full({shape}, {c}, _p_.dtype)"
    return (fill.format(shape=size(lo), c="{1}") if lo else None, fill.format(shape=size(hi), c="{1}") if hi else None)
  if mode == "edge":          # (the edge slice joined k times: a broadcast of it would end a padded trace)
    first, last = f"_p_{_at(rank, axis, '0:1')}", f"_p_{_at(rank, axis, f'{n - 1}:{n}')}"
    return (", ".join([first] * lo) if lo else None, ", ".join([last] * hi) if hi else None)
  if mode == "reflect":
    if max(lo, hi) > n - 1:
      return None
    return (f"ml.flip(_p_{_at(rank, axis, f'1:{lo + 1}')}, {axis})" if lo else None,
            f"ml.flip(_p_{_at(rank, axis, f'{n - 1 - hi}:{n - 1}')}, {axis})" if hi else None)
  if mode == "symmetric":
    if max(lo, hi) > n:
      return None
    return (f"ml.flip(_p_{_at(rank, axis, f'0:{lo}')}, {axis})" if lo else None,
            f"ml.flip(_p_{_at(rank, axis, f'{n - hi}:{n}')}, {axis})" if hi else None)
  if max(lo, hi) > n:           # wrap
    return None
  return (f"_p_{_at(rank, axis, f'{n - lo}:{n}')}" if lo else None, f"_p_{_at(rank, axis, f'0:{hi}')}" if hi else None)


def pad_form(a):
  """(the form, its operands) of jnp.pad(array, pad_width, mode, **kwargs) of a register tensor, or None."""
  x, mode, kw = a["array"], a["mode"], dict(a.get("kwargs") or {})
  t = getattr(x, "type", None)
  shape = getattr(t, "shape", None)
  if shape is None or type(t).__name__ != "TensorType" or not shape or mode not in _MODES:
    return None
  if a.get("_shape_of") is not None:     # (its own shape where it is computed padded: an odd (28, 28) tile)
    shape = tuple(a["_shape_of"](x))
  c = kw.pop("constant_values", 0) if mode == "constant" else 0
  if mode in ("reflect", "symmetric") and kw.get("reflect_type", "even") == "even":
    kw.pop("reflect_type", None)
  if kw or not (isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, bool)
                or type(getattr(c, "type", None)).__name__ == "ScalarType"):
    return None
  widths = _widths(a["pad_width"], len(shape))
  if widths is None:
    return None
  form, shape = "{0}", list(shape)
  for axis, (lo, hi) in enumerate(widths):
    if not (lo or hi):
      continue
    if axis == len(shape) - 1 and mode != "constant":
      return _last_axis(form, mode, shape, lo, hi, x, c)
    parts = _parts(mode, len(shape), axis, lo, hi, shape[axis], tuple(shape))
    if parts is None:
      return None
    joined = ", ".join(p for p in (parts[0], "_p_", parts[1]) if p is not None)
    form = f"(lambda _p_: ml.concatenate([{joined}], axis={axis}))({form})"
    shape[axis] += lo + hi
  return form, [x, c]


def _last_axis(form, mode, shape, lo, hi, x, c):
  """(the form, its operands) of `form` (the leading axes padded) padded along its last axis by `mode`: a vector's
  or a tile's first or last columns are slices no register tensor holds, so the axis is padded with zeros (as mode
  'constant' joins them) and the padding's positions take the elements jnp puts there from rolls of that (flipped
  for 'reflect' and 'symmetric'; one step at a time for 'edge'), by selects on the column's index (probe 56f)."""
  rank, n = len(shape), shape[-1]
  ax, size = rank - 1, n + lo + hi
  if mode in ("reflect", "wrap") and max(lo, hi) > n - (mode == "reflect") or mode == "symmetric" and max(lo, hi) > n \
      or mode == "edge" and max(lo, hi) > 16:
    return None
  parts = _parts("constant", rank, ax, lo, hi, n, tuple(shape))
  joined = ", ".join(p for p in (parts[0], "_p_", parts[1]) if p is not None)
  zeros = f"(lambda _p_: ml.concatenate([{joined}], axis={ax}))({form})"
  col = "ml.arange(%d)%s" % (size, "" if rank == 1 else "[" + ", ".join(["None"] * ax + [":"]) + "]")

  def roll(v, k):
    return f"ml.roll({v}, {k % size}, {ax})"
  left, right = f"({col} < {lo})", f"({col} >= {lo + n})"
  if mode == "edge":
    # (each step binds the last one's tile to a name, `_e_`: written out twice, as `roll(body)` and `body`, it was
    # traced twice, so lo + hi steps made 2 ** (lo + hi) - 1 rolls: 255 for widths (2, 6))
    body = "_q_"
    for k in range(1, lo + 1):           # (position lo - k takes its right neighbour, the edge)
      body = f"(lambda _e_: ml.where({col} == {lo - k}, {roll('_e_', -1)}, _e_))({body})"
    for k in range(hi):                  # (position lo + n + k its left one)
      body = f"(lambda _e_: ml.where({col} == {lo + n + k}, {roll('_e_', 1)}, _e_))({body})"
  elif mode == "wrap":
    body = f"ml.where({left}, {roll('_q_', -n)}, ml.where({right}, {roll('_q_', n)}, _q_))"
  else:                                   # reflect (without the edge) or symmetric (with it): the axis flipped
    e = 1 if mode == "reflect" else 0
    f = f"ml.flip(_q_, {ax})"
    body = f"ml.where({left}, {roll(f, 2 * lo - size + e)}, ml.where({right}, {roll(f, 2 * lo + 2 * n - size - e)}, _q_))"
  return f"(lambda _q_: {body})({zeros})", [x, c]


PAD = {("jnp", "pad"): (("array", "pad_width", "mode", "kwargs"), pad_form)}


def refusal(fn, args, kwargs) -> str | None:
  """The MG003 message of a jnp.pad call of a register tensor that pad_form does not take (naming what it asks
  for), or None for other calls."""
  import inspect
  try:
    a = dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
  except (TypeError, ValueError):
    return None
  x = a.get("array")
  t = getattr(x, "type", None)
  if type(t).__name__ != "TensorType" or not getattr(t, "shape", None):
    return None
  mode, kw = a.get("mode", "constant"), dict(a.get("kwargs") or {})
  shape = t.shape
  widths = _widths(a.get("pad_width"), len(shape))
  if not isinstance(mode, str) or mode not in _MODES:
    why = f"mode={mode!r}"
  elif widths is None:
    why = "pad_width, which is not made of static non-negative ints,"
  elif mode == "constant" and "constant_values" in kw:
    why = "constant_values, one per axis or side,"
  elif mode == "edge" and max(widths[-1]) > 16:
    why = f"mode='edge' {max(widths[-1])} wide along the last axis (at most 16)"
  elif kw:
    why = f"{next(iter(kw))}={kw[next(iter(kw))]!r}"
  else:
    why = "width, wider than the axis it reflects or wraps,"
  return (f"jnp.pad of a register tensor pads with one constant, or by mode 'edge', 'reflect', 'symmetric' or"
          f" 'wrap', along any axis by static widths: this call's {why} is not computed in a kernel")
