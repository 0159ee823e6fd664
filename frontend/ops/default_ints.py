"""jnp's default integer under jax_enable_x64 (probe 50d). jnp gives int64 indices, `jnp.arange(n)`'s,
`jnp.argmax`'s, `jnp.argmin`'s and `jnp.argsort`'s (not `jax.lax.top_k`'s: int32 in JAX too), where a kernel
computes them in int32 (an index fits: shapes are below 2**31, so the values are jnp's exactly, and the GPU's int32
math is the fast one); so is a count, a sum of booleans (`jnp.sum(m)`, `jnp.count_nonzero(x)`). Such a result is
remembered (`b.default_ints`), through shape ops too (a reshape, `[:, None]`): stored into an int64 ref it widens,
as jnp's int64 would have been stored; into an int32 one it is stored as it is. Arithmetic on it stays int32 (int64
meeting an int64), so a store of `jnp.arange(n) + i` into an int64 ref is MG102, whose hint converts it; a sum of
int32 (int64 in jnp, accumulated in int64) stays int32 too (MG102's hint into an int64 ref sums in int64:
`jnp.sum(x, dtype=jnp.int64)`)."""
from __future__ import annotations

from ..dtypes import DType
from ..types import resolve
from .base import is_value

INDEX_RESULTS = frozenset({"arange", "argmax", "argmin", "argsort"})    # (lax.top_k's are int32 in JAX too)


def mark(b, name, out, args=()):
  """`out` of the builtin `name`, remembered as jnp's default integer where it is an int32 index (with x64), or a
  count: a sum of booleans (`jnp.sum(m)`, `jnp.count_nonzero(x)`: at most the element count, so exact too)."""
  counts = name == "sum" and args and is_value(args[0]) and resolve(args[0].type.dtype) == DType.bool_
  if b is None or not b.x64 or name not in INDEX_RESULTS and not counts:
    return out
  if is_value(out) and resolve(out.type.dtype) == DType.i32:
    b.default_ints.add(out.id)
  return out


def stored_as(cx, v, do):
  """An index `v` jnp gives as int64 (x64), stored into an int64 ref: widened (exact), as jnp's value would be."""
  if is_value(v) and v.id in cx.b.default_ints and do == DType.i64 and resolve(v.type.dtype) == DType.i32:
    from .elementwise import astype
    return astype(cx, v, DType.i64)
  return v
