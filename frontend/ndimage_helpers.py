"""jax.scipy.ndimage.map_coordinates in the kernel language, as jax defines it (jax/_src/scipy/ndimage.py), for
jnp_ndimage's form (probe 57g): per axis the nodes of order 0 (the coordinate rounded half away from zero, weight 1)
or 1 (its floor and the next index, weights 1 - f and f), each index fixed by the mode ('constant': as it is, with a
validity mask; 'nearest': clipped; 'wrap': modulo the size; 'mirror', 'reflect': jax's triangular waves); every
corner of the nodes gathered from the input (a register gather: jnp's clamp of indices past the axis, never
selected where the mask is off), cval where it lies outside in 'constant' mode, weighted by the product of its
weights in axis order and summed in itertools.product's order; integer inputs rounded, then converted back."""
from . import language as ml


@ml.inline
def _round_away(c):
  """lax.round's default: halves away from zero (exact: the fraction c - trunc(c))."""
  t = ml.trunc(c)
  return ml.where(ml.abs(c - t) >= 0.5, t + ml.where(c < 0, -1.0, 1.0), t)


@ml.inline
def _mirror(index, size):
  s = size - 1
  return ml.abs((index + s) % (2 * s) - s)


@ml.inline
def _fixed(index, size, mode):
  if mode == "nearest":
    return ml.clip(index, 0, size - 1)
  if mode == "wrap":
    return index % size
  if mode == "mirror":
    return _mirror(index, size)
  if mode == "reflect":
    return (_mirror(2 * index + 1, 2 * size + 1) - 1) // 2
  return index


@ml.inline
def _gathered(x, idx):
  if len(idx) == 1:
    return x[idx[0]]
  if len(idx) == 2:
    return x[idx[0], idx[1]]
  return x[idx[0], idx[1], idx[2]]


@ml.inline
def map_coordinates(x, coords, order, mode, cval, is_int):
  axes = []
  for c, size in zip(coords, x.shape):
    if order == 0:
      nodes = [(_round_away(c).astype(ml.int32), None)]
    else:
      lower = ml.floor(c)
      upper_weight = c - lower
      index = lower.astype(ml.int32)
      nodes = [(index, 1 - upper_weight), (index + 1, upper_weight)]
    axes.append([(_fixed(i, size, mode), (0 <= i) & (i < size) if mode == "constant" else None, w) for i, w in nodes])
  corners = [[]]
  for nodes in axes:                  # itertools.product's order: the last axis fastest
    corners = [k + [n] for k in corners for n in nodes]
  out = None
  for corner in corners:
    v = _gathered(x, [n[0] for n in corner])
    valid = None
    for n in corner:
      if n[1] is not None:
        valid = n[1] if valid is None else valid & n[1]
    if valid is not None:
      v = ml.where(valid, v, cval)
    w = None
    for n in corner:
      if n[2] is not None:
        w = n[2] if w is None else w * n[2]
    term = v if w is None else w * v
    out = term if out is None else out + term
  if is_int:
    out = _round_away(out)
  return out.astype(x.dtype)
