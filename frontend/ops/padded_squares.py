"""A padded tile moved into a plain tile of whole rows and back (probe 56a), for the forms that need the tile's
elements at their own places in a tile registers hold: jnp.linalg.inv, solve and det of an (n, n) matrix, n not a
multiple of 16, read padded as (n rounded up to 4, to 32) (frontend/ops/padded_tiles.py) and solved as the
(16k, 16k) matrix of it with an identity block below and right of it (jnp_linalg.py). Neither is an `ml.`
builtin: the forms take them as operands (`GROWN`, `SHRUNK`). Both go through an SMEM scratch
(permute.restride_tensor): the tile's rows laid out in it and read back at the other width."""
from __future__ import annotations

from .. import errors as E
from ..types import TensorType
from .base import Builtin
from .padded_tiles import _holds, _up, allowed, mask


def _zero_padding(cx, x, own):
  """`x` with 0 in its padding (a computed tile's padding holds anything)."""
  from .elementwise import where_
  up = tuple(x.type.shape)
  m = mask(cx, own, up) if tuple(own) != up else None
  return x if m is None else where_(cx, m, x, 0.0 if x.type.dtype.is_float else 0)


def _rows_to(cx, x, rows):
  """`x` (r, c) with zero rows appended up to `rows`."""
  from .elementwise import full_
  from .shape import concatenate
  r, c = x.type.shape
  if r == rows:
    return x
  if not _holds((rows - r, c)):
    raise E.InternalError(f"no register tensor holds ({rows - r}, {c}) rows of zeros", cx.loc)
  return concatenate.rule(cx, [x, full_(cx, (rows - r, c), 0, x.type.dtype)], 0)


def _cols_to(cx, x, cols):
  """`x` (r, c) with zero columns appended up to `cols`."""
  from .elementwise import full_
  from .shape import concatenate
  r, c = x.type.shape
  if c == cols:
    return x
  if not _holds((r, cols - c)):
    raise E.InternalError(f"no register tensor holds ({r}, {cols - c}) columns of zeros", cx.loc)
  return concatenate.rule(cx, [x, full_(cx, (r, cols - c), 0, x.type.dtype)], 1)


def _unpadded(cx, own, dtype):
  """The first trace's MG204 at a call that computes on a small tile read padded: it stands (listed first) only where
  the padded trace failed, at another error of the kernel."""
  return E.LayoutError(
      f"this call's {tuple(own)} {'tile' if len(own) > 1 else 'vector'} is no register tensor as it is; it is"
      f" computed read padded, as {_up(own, dtype)} under a mask, in a trace that another error of this kernel"
      f" stopped", cx.loc, hint="fix the kernel's other errors, listed after this one: then this call computes")


def _grown(cx, x, rows, cols=None):
  """The plain (rows, cols) tile of the 2-D `x` (padded or not; its own (r, c) at most that): its elements at
  their places, 0 elsewhere. `cols` None: x's columns as it is held."""
  from .permute import restride_tensor
  from .padded_tiles import true_shape
  own = true_shape(cx.b, x)
  if len(own) == 1:
    return _grown_vector(cx, x, own, rows)
  if not _holds(tuple(x.type.shape)):      # (the first trace's small read: the padded trace reads it as a tile)
    raise _unpadded(cx, own, x.type.dtype)
  if len(own) != 2 or own[0] > rows:
    raise E.InternalError(f"a tile of shape {own} grown to {rows} rows", cx.loc)
  with allowed(cx):
    x = _rows_to(cx, _zero_padding(cx, x, own), max(rows, x.type.shape[0]))
    c = x.type.shape[1]
    cols = c if cols is None else cols
    if cols > c:
      x = _cols_to(cx, x, cols)
      c = cols
    if (rows, cols) == tuple(x.type.shape):
      return x
    return restride_tensor(cx, x, (rows, cols), 0, (c, 1))


def _grown_vector(cx, x, own, n):
  """The plain (n,) vector of the 1-D `x` (its own length at most n), 0 past its own elements."""
  from .permute import restride_tensor
  if not _holds(tuple(x.type.shape)):
    raise _unpadded(cx, own, x.type.dtype)
  with allowed(cx):
    x = _zero_padding(cx, x, own)
    u = x.type.shape[0]
    if u < n:
      x = _cols_to_vector(cx, x, n)
    elif u > n:
      x = restride_tensor(cx, x, (n,), 0, (1,))
  return x


def _cols_to_vector(cx, x, n):
  from .elementwise import full_
  from .shape import concatenate
  return concatenate.rule(cx, [x, full_(cx, (n - x.type.shape[0],), 0, x.type.dtype)], 0)


def _shrunk(cx, x, r, c=None):
  """The (r, c) tile in the top left of the plain 2-D `x`, held padded where registers do not hold it as it is
  (recorded with its own shape in the padded trace) and 0 in its padding."""
  from .permute import restride_tensor
  shape = (r, c) if c is not None else (r,)
  pads = getattr(cx.b, "pad_tiles", None)
  if c is None:               # (a vector: its first r elements, padded to a multiple of 8)
    up = shape if _holds(shape) or pads is None else _up(shape, x.type.dtype)
    with allowed(cx):
      x = restride_tensor(cx, x, up, 0, (1,)) if up[0] < x.type.shape[0] else x
      if up != shape:
        x = _zero_padding(cx, x, shape)
    if up != shape:
      pads[x.id] = shape
    return x
  up = shape if _holds(shape) or pads is None else _up(shape, x.type.dtype)
  with allowed(cx):
    if up[1] > x.type.shape[1]:
      x = _cols_to(cx, x, up[1])
    if up[0] > x.type.shape[0]:
      x = _rows_to(cx, x, up[0])
    if up != tuple(x.type.shape):
      x = restride_tensor(cx, x, up, 0, (x.type.shape[1], 1))
    if up != shape:
      x = _zero_padding(cx, x, shape)
  if up != shape:
    pads[x.id] = shape
  return x


def _grown_rule(cx, x, rows, cols=None):
  if not isinstance(getattr(x, "type", None), TensorType):
    raise E.InternalError("a padded square of a non-tensor", cx.loc)
  return _grown(cx, x, rows, cols)


def _shrunk_rule(cx, x, rows, cols=None):
  return _shrunk(cx, x, rows, cols)


def _columns_rule(cx, x, start, width):
  """Columns start:start + width of the plain 2-D `x`, through an SMEM scratch (no tensor-core layout needed)."""
  from .permute import restride_tensor
  with allowed(cx):
    return restride_tensor(cx, x, (x.type.shape[0], width), start, (x.type.shape[1], 1))


GROWN = Builtin(_grown_rule, "_grown")
COLUMNS = Builtin(_columns_rule, "_columns")
SHRUNK = Builtin(_shrunk_rule, "_shrunk")
