"""Strided slices and 2-D reshapes of 1-D register vectors of any length a vector may have (a
multiple of 8 elements), not only of a multiple of 128 (one element a thread of a warpgroup): a
row statistic of a 192-row tile, `m[1::2]` and `m.reshape(2, 96)`.

`v[a:b:k]` of an n-element vector is jnp's result for any static bounds and a step k > 1: the
vector padded with zeros to a length P that the (P // k, k) reshape holds in registers, that
reshape's column a % k (through SMEM, as `v.reshape(..., n // k, k)[..., j]` of a long vector is),
then its window of the trips' elements. A 2-D reshape of a vector whose elements no 2-D register
tensor holds (fewer or not a multiple of 128) is an error at the reshape naming the slices that
give its rows or columns."""
from __future__ import annotations

import math

from .. import errors as E
from .. import hw, ir
from .base import python_int as _int
from .out_names import stored_into


def _one_slice(index):
  """The slice of `v[s]`, `v[s,]` or `v[..., s]` of a 1-D tensor; else None."""
  items = index if isinstance(index, tuple) else (index,)
  items = tuple(i for i in items if i is not Ellipsis) if sum(i is Ellipsis for i in items) <= 1 else ()
  return items[0] if len(items) == 1 and isinstance(items[0], slice) else None


def strided_vector(cx, x, index):
  """`v[a:b:k]` (k > 1, static bounds) of a 1-D register vector: jnp's result, or None where the
  result is no register vector (its length not a multiple of 8) or the index is something else (the
  slice-step error then reports it)."""
  from .base import is_tensor
  from .elementwise import full_
  from .shape import concatenate, expand, reshape_
  from ..types import resolve
  s = _one_slice(index)
  if not is_tensor(x) or len(x.type.shape) != 1 or s is None:
    return None
  if not (_int(s.step) and s.step > 1 and all(v is None or _int(v) for v in (s.start, s.stop))):
    return None
  n, k = x.type.shape[0], s.step
  a, b, _ = s.indices(n)
  count = len(range(a, b, k))
  if n % 8 or count == 0:
    return None
  if count % 8:
    raise _short_result(cx, x, s, n, a, k, count)
  unit = math.lcm(hw.WARPGROUP, 8 * k)         # P: P % 128 == 0 (the reshape), (P // k) % 8 == 0 (its column)
  p = -(-n // unit) * unit
  if p > n:
    x = concatenate.rule(cx, [x, full_(cx, (p - n,), 0, resolve(x.type.dtype), "ml.zeros")], 0)
  col = expand(cx, reshape_(cx, x, (p // k, k)), (slice(None), a % k))
  first = a // k
  return col if (first, count) == (0, p // k) else expand(cx, col, (slice(first, first + count),))


def held_reshape(cx, x, shape) -> bool:
  """Whether `x.reshape(shape)` is held as a small statistic is (the vector typed with the shape, stored a row or an
  element at a time, frontend/ops/small_stores.py; since probe 62c): a vector of at most FEW_ELEMENTS elements, not a
  multiple of 128, into two or more axes no register tensor holds (a decode step's (queries, heads) statistics),
  whose length a register vector holds (a multiple of 8) or which is a tile's row statistic (any length: the
  (12,) row max of a 12-row tile, or math of it, carried through loops)."""
  from .base import is_tensor
  from .small_stores import FEW_ELEMENTS
  if not is_tensor(x) or len(x.type.shape) != 1 or sum(d != 1 for d in shape) < 2:
    return False
  n = x.type.shape[0]
  if not n % hw.WARPGROUP or n > FEW_ELEMENTS:
    return False
  return n % 8 == 0 or _row_statistic(cx.b.defining, x)


def _row_statistic(defining, x) -> bool:
  """Whether vector `x` is made from row reductions of 2-D tiles, through elementwise math of its shape and the
  values loops and ifs carry (an online softmax's running max), and nothing else but fills."""
  from .control import For, While
  from .elementwise import ELEMENTWISE_OPS
  from .shape import Reduce
  todo, seen, found = [x], set(), False
  while todo:
    v = todo.pop()
    if v.id in seen:
      continue
    seen.add(v.id)
    o = defining(v)
    if isinstance(o, Reduce):
      if len(o.x.type.shape) != 2 or tuple(o.axes) != (1,):
        return False
      found = True
    elif isinstance(o, ELEMENTWISE_OPS):
      todo.extend(a for a in o.operands() if _is_vector_like(a, v))
    elif isinstance(o, (For, While)) and o.body.ops and hasattr(o.body.ops[-1], "values"):
      k = list(o.results).index(v)
      todo.extend(a for a in (o.body.ops[-1].values[k],) if _is_vector_like(a, v))
    elif o is not None and type(o).__name__ != "Full":     # (None: a loop body's carried value, walked at its loop)
      return False
  return found


def _is_vector_like(a, v) -> bool:
  return isinstance(a, ir.Value) and getattr(a.type, "shape", None) == v.type.shape


def check_vector_reshape(cx, x, shape):
  """A reshape of a 1-D vector into a 2-D shape (or more) that no register tensor holds: its
  elements are not a multiple of 128. The error is at the reshape, with the slices that give the
  reshape's rows or columns as vectors."""
  from .base import is_tensor
  if not is_tensor(x) or len(x.type.shape) != 1 or sum(d != 1 for d in shape) < 2:
    return
  n = x.type.shape[0]
  if n % hw.WARPGROUP == 0:
    return
  # (an unnamed vector, `ml.sum(t, axis=1).reshape(4, 8)`, is named in the hint, by the user's text where the
  # call has it: a placeholder `v` read as the user's own v, the tile the vector was reduced from)
  src = x.name if (x.name or "").isidentifier() else cx.named(x, "")
  name = src if src.isidentifier() else "vec"
  bind = "" if name == src else f"name it, vec = {src}, then " if src else "name it vec, then "
  dims = [d for d in shape if d != 1]
  rows, cols = math.prod(dims[:-1]), dims[-1]
  fits = lambda m: m % 8 == 0 or m % hw.WARPGROUP == 0
  ways = []
  if fits(cols):
    ways.append(f"row r of it is the vector {name}[r * {cols}:(r + 1) * {cols}] (stored with"
                f" {stored_into(cx)}.at[r][...] = {name}[r * {cols}:(r + 1) * {cols}] for r in ml.static_range({rows}))")
  if fits(rows):
    ways.append(f"column j of it is the vector {name}[j::{cols}] (a strided slice of the vector)")
  unit = math.lcm(hw.WARPGROUP, cols)
  p = -(-n // unit) * unit
  pad = (f"pad it to a length that fills the threads: padded = ml.concatenate([{name}, ml.zeros(({p - n},),"
         f" {name}.dtype)]).reshape({p // cols}, {cols}), whose first {rows} rows are the reshape: store"
         f" them with {stored_into(cx)}.at[ml.ds(0, {p // cols})].store(padded, mask=ml.arange({p // cols})[:, None] < {rows})")
  raise E.LayoutError(
      f"reshape of {src or 'a vector'}, a vector of {n} elements, into {tuple(shape)}: a register tensor of more than"
      f" one axis needs a multiple of {hw.WARPGROUP} elements (one per thread of a warpgroup; a 1-D vector only a"
      f" multiple of 8)", cx.loc,
      hint=("keep it a vector: " + bind + "; ".join(ways) + "; or " + pad) if ways else bind + pad)


def _short_result(cx, x, s, n, a, k, count):
  """`v[::4]` of a 40-element vector: 10 elements, which no register vector holds (a multiple of 8).
  The hint pads the vector so that the slice takes a multiple of 8 elements, the first `count` of
  which are the slice's, and stores those under a mask."""
  text = x.name or "v"
  name = text if text.isidentifier() else "v"
  bind = "" if name == text else f"v = {text}; "
  want = -(-count // 8) * 8
  stop = a + k * want
  length = max(n, -(-stop // 8) * 8)
  part = lambda v: "" if v is None else str(v)
  shown_slice = f"{part(s.start)}:{part(s.stop)}:{s.step}"
  pad = f"ml.concatenate([{name}, ml.zeros(({length - n},), {name}.dtype)])" if length > n else name
  return E.LayoutError(
      f"{text}[{shown_slice}] has {count} elements: a 1-D register vector needs a multiple of 8 elements",
      cx.loc,
      hint=f"take {want} elements and keep the first {count}: {bind}w = {pad}[{a}:{stop}:{k}], then store them with"
           f" {stored_into(cx)}.at[ml.ds(0, {want})].store(w, mask=ml.arange({want}) < {count})")
