"""A scalar's shapes: a scalar is jnp's 0-d array, so its reshape to one element (`s.reshape(1)`, `jnp.reshape(s,
(1, 1))`, `s.reshape(-1)`, `s.ravel()`) is a tensor of that shape holding it (session 55)."""
from __future__ import annotations

import math

from .. import errors as E
from .base import static_shape
from .elementwise import full_


def scalar_reshaped(cx, x, shape):
  """A scalar (jnp's 0-d array) reshaped to one element, `s.reshape(1)`, `jnp.reshape(s, (1, 1))`, `s.reshape(-1)`:
  a tensor of that shape holding it, as jnp's (probe 35f had refused it with ml.full in the hint); `()` is itself."""
  if isinstance(shape, (int, tuple, list)):
    shape = tuple(1 if isinstance(n, int) and n == -1 else n for n in ((shape,) if isinstance(shape, int) else shape))
    if not shape:
      return x
  shape = static_shape(cx, shape, "reshape")
  if math.prod(shape) != 1:
    raise E.ShapeMismatchError(f"cannot reshape {x.name or 'a scalar'} (one element) to {shape} ({math.prod(shape)}"
                               " elements)", cx.loc,
                               hint=f"a reshape keeps the number of elements; to repeat the value, ml.full({shape}, "
                                    f"{cx.named(x, 's')})")
  return full_(cx, shape, x, x.type.dtype)
