"""A float multiplied by a boolean mask of its own shape, as jnp computes it: jnp converts the mask
to the float's dtype inside its multiply, and XLA's algebraic simplifier rewrites `mul(convert(pred),
x)` into `select(pred, x, 0)`, so jnp's `x * (x > 0)` and `v * keep` are +0.0 where the mask is off,
also where `x` is NaN, +-inf or negative (an IEEE product gives NaN and -0.0 there), eagerly and under
jit. The kernel's product is that select. Where the mask is broadcast to the product's shape
(`v * m[:, None]`, a scalar mask), jnp converts it before broadcasting, the rewrite does not apply, and
the product multiplies; so does an explicit conversion, `v * keep.astype(jnp.float32)` (eager jnp
converts it in an operation of its own; under jit XLA may select there too)."""
from __future__ import annotations

from ..dtypes import DType
from ..types import ScalarType, TensorType, resolve
from .base import is_value


def mask_product(cx, a0, b0, a, b, shape, d):
  """The select for `a0 * b0` (as written; `a`, `b`: converted to the result's dtype `d` and `shape`)
  where one side is a boolean value of the product's shape and the other a float value; else None."""
  from .elementwise import where_
  if not (isinstance(d, DType) and d.is_float):
    return None
  for m0, other in ((a0, b), (b0, a)):
    if is_value(m0) and is_value(other) and resolve(m0.type.dtype) == DType.bool_ and _same_shape(m0, shape):
      return where_(cx, m0, other, 0.0)
  return None


def _same_shape(m, shape) -> bool:
  """Whether the mask `m` has the product's `shape` (None: a scalar product), unbroadcast."""
  if shape is None:
    return isinstance(m.type, ScalarType)
  return isinstance(m.type, TensorType) and tuple(m.type.shape) == tuple(shape)
