"""Index grids and broadcasts met by a small tensor held as a vector, evaluated at its elements.

A small tensor held as the vector of its elements (a (2, 8) window read whole, frontend/ops/small_loads.py; a small
statistic) meets elementwise math whose other operands are the compiler's to lay out: an index grid
(`v + ml.arange(8)[None, :]`), per-row lengths broadcast to its shape (`ml.where(ml.arange(8)[None, :] < n[...][:, None],
v, 0)`), or math of them. No layout holds those at the small shape, so each was MG204 ('v of shape (2, 8) is reduced
or broadcast along its rows or columns'). Such an operand is evaluated at the elements of the vector instead: its
value at flat position f is computed from f's index along each axis ((f // stride) % size, an iota's math), an
arange being that index, a broadcast reading its source at the index it keeps, and a source of a few elements (the
lengths) selected among its scalars, read as scalars from memory or through SMEM. Such math stored whole by itself
(`out[...] = ml.zeros((2, 8))`, a small mask) is held as that vector too (`as_held`), which small stores take.
"""
from __future__ import annotations

import itertools
import math

from .. import ir
from ..types import ScalarType, TensorType
from . import elementwise as ew
from .elementwise_fns import arange
from .small_parts import MAX_PARTS, held_vector

SOURCE_SCALARS = 16     # at most this many elements of a broadcast's source selected among, a scalar each
FLAT_ELEMENTS = 2048    # at most this many elements evaluated (16 a thread: an (8, 40) statistic meets its (8, 1) scale)


def flat_values(cx, v):
  """The (n,) vector of `v`'s elements in row-major order, `v` an index grid, a broadcast of a few elements, a fill,
  a small tensor held as a vector, or elementwise math of them, of a small shape; None for any other."""
  shape = tuple(v.type.shape)
  n = math.prod(shape)
  if n > FLAT_ELEMENTS:
    return None
  cache = {}

  def index(a):        # f's index along axis a of `shape`
    if a not in cache:
      iota = cache.get("iota") or arange.apply(cx, (n,), {})
      cache["iota"] = iota
      stride = math.prod(shape[a + 1:])
      at = ew.binary(cx, ew.BinOp.FLOORDIV, iota, stride) if stride > 1 else iota
      cache[a] = ew.binary(cx, ew.BinOp.MOD, at, shape[a]) if a > 0 else at
    return cache[a]
  if _at(cx, v, list(range(len(shape))), None, probe=True) is None:
    return None
  out = _at(cx, v, list(range(len(shape))), index, probe=False)
  if isinstance(out, ir.Value) and isinstance(out.type, TensorType):
    return out
  return ew.stretch(cx, (n,), out) if isinstance(out, ir.Value) else ew.full_(cx, (n,), out, v.type.dtype)


def element_of(cx, v, idx):
  """`v`'s element at the static index `idx` (a scalar or a number), `v` of the kinds flat_values takes or a
  few-element statistic; None for any other."""
  from . import few_stats
  shape = tuple(v.type.shape)
  if v.id in cx.b.few_stats:
    return cx.b.few_stats[v.id][sum(i * math.prod(shape[d + 1:]) for d, i in enumerate(idx))]
  if few_stats._scalars(cx, v, {}, probe=True) is not None:
    k = sum(i * math.prod(shape[d + 1:]) for d, i in enumerate(idx))
    return few_stats._scalars(cx, v, {}, probe=False)[k]
  if _at(cx, v, list(range(len(shape))), None, probe=True) is None:
    return None
  return _at(cx, v, list(range(len(shape))), lambda a: idx[a], probe=False)


def _at(cx, v, axes, index, probe):
  """`v` at the flat positions: `axes[i]` is the top-level axis whose index v's axis i takes (None: index 0);
  True for one that can be where `probe`; None where it cannot."""
  from .broadcast_nd import index_only
  from .shape import Broadcast, Reshape
  if not (isinstance(v, ir.Value) and isinstance(v.type, TensorType)):
    return v
  o = cx.b.defining(v)
  shape = tuple(v.type.shape)
  if all(a is None or n == 1 for a, n in zip(axes, shape)):       # (one element of v: its scalar)
    one = ew.one_element_scalar(cx, v) if math.prod(shape) == 1 else None
    if one is not None:
      return True if probe else one
  if (vec := held_vector(cx, v)) is not None and math.prod(shape) <= MAX_PARTS:   # (met through a broadcast)
    return True if probe else _selected(cx, shape, axes, index, lambda j: _element(cx, vec, j))
  if isinstance(o, ew.Full):
    return True if probe else o.value
  if isinstance(o, ew.Arange):
    a = axes[o.dim]
    if a is None:
      return True if probe else 0
    at = True if probe else index(a)
    return at if probe or isinstance(at, int) else ew.astype(cx, at, v.type.dtype)
  if isinstance(o, Broadcast):
    sub = [axes[d] if o.x.type.shape[i] != 1 else None for i, d in enumerate(o.dims)]
    return _at(cx, o.x, sub, index, probe)
  if isinstance(o, Reshape) and _unit_only(o.x.type.shape, shape):
    long = [a for a, n in zip(axes, shape) if n != 1]
    it = iter(long)
    sub = [next(it) if n != 1 else None for n in o.x.type.shape]
    return _at(cx, o.x, sub, index, probe)
  from .random import Philox      # (elementwise too; of Philox, the word v is: probe 49g)
  if isinstance(o, (*ew.ELEMENTWISE_OPS, Philox)) and all(
      not isinstance(x.type, TensorType) or tuple(x.type.shape) == shape for x in o.operands()):
    which = next(i for i, r in enumerate(o.results) if r is v)
    each = [_at(cx, x, axes, index, probe) for x in o.operands()]
    if any(e is None for e in each):
      return None
    if probe:
      return True
    mapping = {x: (e if isinstance(e, ir.Value) else ew.full_(cx, (), e, x.type.dtype))
               for x, e in zip(o.operands(), each) if isinstance(x.type, TensorType)}
    if all(isinstance(e, ir.Value) and isinstance(e.type, ScalarType) for x, e in mapping.items()):
      return cx.b.append(ir.retyped(o, mapping, lambda r: ScalarType(r.type.dtype))).results[which]
    n = next(e.type.shape for e in mapping.values() if isinstance(e.type, TensorType))
    mapping = {x: e if isinstance(e.type, TensorType) else ew.stretch(cx, n, e) for x, e in mapping.items()}
    return cx.b.append(ir.retyped(o, mapping, lambda r: TensorType(n, r.type.dtype))).results[which]
  if index_only(cx.b.defining, v):
    return None
  if 1 < math.prod(shape) <= SOURCE_SCALARS and len(shape) == 1:     # (per-row lengths n[...]: its scalars)
    return True if probe else _selected(cx, shape, axes, index, lambda j: _element(cx, v, j))
  return None


def _unit_only(src, dst) -> bool:
  """Whether a reshape of `src` to `dst` only inserts or removes size-1 axes."""
  return [n for n in src if n != 1] == [n for n in dst if n != 1]


def _selected(cx, shape, axes, index, scalar):
  """v (of `shape`, each element's scalar `scalar(j)`, j its flat index) at the flat positions."""
  flat, stride = None, 1
  for a, n in reversed(list(zip(axes, shape))):
    if n != 1 and a is not None:
      i = index(a)
      term = i * stride if isinstance(i, int) else i if stride == 1 else ew.binary(cx, ew.BinOp.MUL, i, stride)
      flat = term if flat is None else flat + term if isinstance(flat, int) and isinstance(term, int) else \
          ew.binary(cx, ew.BinOp.ADD, flat, term)
    stride *= n
  if flat is None or isinstance(flat, int):      # (one position, or a static one: element_of)
    return scalar(flat or 0)
  res = None
  for j in reversed(range(stride)):
    s = scalar(j)
    res = s if res is None else ew.where_(cx, ew.compare(cx, ew.CmpOp.EQ, flat, j), s, res)
  return res


def _element(cx, v, j):
  """Element j of the short vector `v`: read straight from memory where v is a ref read whole (a scalar needs no
  register vector), else through SMEM."""
  from .access import scalar_load
  from .memory import Load, view
  from .shape import index_through_smem
  o = cx.b.defining(v)
  if isinstance(o, Load) and not o.merge and o.keep is None:
    return scalar_load(cx, view(cx, o.ref, (j,), o.ref.name))
  return index_through_smem(cx, v, (j,))


def as_held(cx, v):
  """`v`, a small tensor of a fill, an index grid or broadcasts of few elements (`ml.zeros((2, 8))`,
  `ml.arange(8)[None, :] < n[...][:, None]`) stored whole, as the vector of its elements typed with its shape (which
  frontend/ops/small_stores.py stores a row or an element at a time); None where it is no such tensor."""
  from .broadcast_nd import small_shape
  from .shape import Reshape
  if not (isinstance(v, ir.Value) and isinstance(v.type, TensorType)) or v.id in cx.b.spread or v.id in cx.b.few_stats:
    return None
  shape = tuple(v.type.shape)
  if not small_shape(shape) or held_vector(cx, v) is not None:
    return None
  from .small_parts import FEW_SCALARS
  if math.prod(shape) <= FEW_SCALARS and math.prod(shape) % 8:      # (no vector: a few-element statistic)
    from .small_parts import assemble
    parts = [element_of(cx, v, idx) for idx in itertools.product(*(range(n) for n in shape))]
    if any(p is None for p in parts):
      return None
    return assemble(cx, shape, [p if isinstance(p, ir.Value) else ew.full_(cx, (), p, v.type.dtype) for p in parts])
  if math.prod(shape) % 8:
    return None
  vec = flat_values(cx, v)
  if vec is None:
    return None
  return cx.b.emit(Reshape, vec, loc=cx.loc, types=[TensorType(shape, vec.type.dtype)], names=[v.name]).result
