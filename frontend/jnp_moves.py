"""jnp's and jax.lax's data-movement functions of register tensors that are forms of ml's own moves (probe 52c):
the array API's names (jnp.concat, permute_dims, matrix_transpose, unstack), NumPy's stacks and splits (hstack,
vstack, dstack, column_stack, append, array_split, hsplit, vsplit, dsplit, atleast_1d/2d/3d), its flips and
rotations (fliplr, flipud, rot90, rollaxis), jnp.broadcast_arrays, jnp.take along an axis, and lax's slicing by
static positions (slice_in_dim, index_in_dim, dynamic_slice and dynamic_update_slice of static starts, clamped as
lax clamps them), lax.pad without interior padding, lax.collapse and lax.broadcast. Each was MG003 ("cannot take a
register tensor"), where the same data movement written with ml.concatenate, windows, ml.transpose or ml.flip
compiled. Forms are traced by jnp_calls.formula as jnp_calls.SHAPED's are: (the parameters the form reads, a
function of the bound arguments giving (the form, its operands) or None, which leaves the call to its MG003)."""
from __future__ import annotations

import numpy as np

from .jnp_dynamic import _int, _scalar, _scalar_of, index_form, scalar_update_form, slice_form, update_form
from .jnp_forms import _kind, _take


def _shape(a, x):
  """A register tensor's own shape (unpadded where it is computed padded), None for anything else."""
  t = getattr(x, "type", None)
  shape = getattr(t, "shape", None)
  if shape is None or type(t).__name__ != "TensorType":
    return None
  if a.get("_shape_of") is not None:
    shape = a["_shape_of"](x)
  return tuple(shape)


def _tensors(a, xs):
  """The shapes of a sequence of register tensors, None where it is not one (a single tensor, a number)."""
  if not isinstance(xs, (tuple, list)) or not xs:
    return None
  shapes = [_shape(a, x) for x in xs]
  return None if any(s is None for s in shapes) else shapes


def _axis(axis, rank):
  return axis % rank if _int(axis) and -rank <= axis < rank else None


def _at(rank, axis, part) -> str:
  """The index `[:, part]` that puts `part` at `axis` of a rank-`rank` tensor."""
  return "[" + ", ".join(part if i == axis else ":" for i in range(rank)) + "]"


def _join(parts, axis):
  return parts[0] if len(parts) == 1 else f"ml.concatenate([{', '.join(parts)}], axis={axis})"


def _stacked(expand, axis_of):
  """hstack, vstack, dstack, column_stack: each tensor given axes as jnp's atleast_Nd (or column_stack's
  columns) gives them, then ml.concatenate along the axis jnp joins them on."""
  def make(a):
    shapes = _tensors(a, a["tup"])
    if shapes is None or a.get("dtype") is not None or any(not s for s in shapes):
      return None
    parts = [f"{{{i}}}{expand(len(s))}" for i, s in enumerate(shapes)]
    return _join(parts, axis_of(len(shapes[0]))), list(a["tup"])
  return make


def _concat(a):
  shapes = _tensors(a, a["arrays"])
  if shapes is None:
    return None
  if a["axis"] is None:          # jnp.concat(xs, axis=None): the flattened tensors, one after another
    return _join([f"{{{i}}}.reshape(-1)" for i in range(len(shapes))], 0), list(a["arrays"])
  return f"ml.concatenate([{', '.join(f'{{{i}}}' for i in range(len(shapes)))}], axis={a['axis']!r})", list(a["arrays"])


def _append(a):
  x, v, axis = a["arr"], a["values"], a["axis"]
  if _shape(a, x) is None or _shape(a, v) is None:
    return None
  if axis is None:
    return "ml.concatenate([{0}.reshape(-1), {1}.reshape(-1)], axis=0)", [x, v]
  return f"ml.concatenate([{{0}}, {{1}}], axis={axis!r})", [x, v]


def _unstack(a):
  shape = _shape(a, a["x"])
  axis = None if not shape else _axis(a["axis"], len(shape))
  if axis is None:
    return None
  return "(" + "".join(f"{{0}}{_at(len(shape), axis, str(k))}, " for k in range(shape[axis])) + ")", [a["x"]]


def _permute_dims(a):
  shape = _shape(a, a["a"])
  if shape is None:
    return None
  axes = tuple(reversed(range(len(shape)))) if a["axes"] is None else a["axes"]
  return f"ml.transpose({{0}}, {tuple(axes)!r})", [a["a"]]


def _matrix_transpose(a):
  shape = _shape(a, a["x"])
  if shape is None or len(shape) < 2:
    return None
  order = list(range(len(shape)))
  order[-2:] = order[-1], order[-2]
  return f"ml.transpose({{0}}, {tuple(order)!r})", [a["x"]]


def _flip(axis):
  def make(a):
    shape = _shape(a, a["m"])
    return None if shape is None or len(shape) <= axis else (f"ml.flip({{0}}, {axis})", [a["m"]])
  return make


def _rot90(a):
  """NumPy's: k = 1 flips axes[1] then swaps the two, k = 2 flips both, k = 3 swaps then flips axes[1]."""
  m, k, axes = a["m"], a["k"], a["axes"]
  shape = _shape(a, m)
  if shape is None or not _int(k) or not isinstance(axes, (tuple, list)) or len(axes) != 2:
    return None
  ax = [_axis(x, len(shape)) for x in axes]
  if None in ax or ax[0] == ax[1]:
    return None
  order = list(range(len(shape)))
  order[ax[0]], order[ax[1]] = order[ax[1]], order[ax[0]]
  swap = f"ml.transpose({{}}, {tuple(order)!r})"
  form = {0: "{0}", 1: swap.format(f"ml.flip({{0}}, {ax[1]})"), 2: f"ml.flip({{0}}, ({ax[0]}, {ax[1]}))",
          3: f"ml.flip({swap.format('{0}')}, {ax[1]})"}[k % 4]
  return form, [m]


def _rollaxis(a):
  shape = _shape(a, a["a"])
  if shape is None or not _int(a["start"]):
    return None
  n, axis, start = len(shape), _axis(a["axis"], len(shape)), a["start"]
  if axis is None or not -n <= start <= n:
    return None
  start = start + n if start < 0 else start
  if axis < start:
    start -= 1
  order = [i for i in range(n) if i != axis]
  order.insert(start, axis)
  return f"ml.transpose({{0}}, {tuple(order)!r})", [a["a"]]


_ATLEAST = {1: {0: "[None]"}, 2: {0: "[None, None]", 1: "[None, :]"},
            3: {0: "[None, None, None]", 1: "[None, :, None]", 2: "[:, :, None]"}}


def _atleast(n):
  def make(a):
    xs = a["arys"]
    if not isinstance(xs, (tuple, list)) or not xs:
      return None
    # (a scalar is jnp's 0-d array: jnp.atleast_1d(s) is s[None], session 55)
    shapes = [() if type(getattr(x, "type", None)).__name__ == "ScalarType" else _shape(a, x) for x in xs]
    if any(s is None for s in shapes):
      return None
    parts = [f"{{{i}}}{_ATLEAST[n].get(len(s), '')}" for i, s in enumerate(shapes)]
    return (parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"), list(xs)
  return make


def _broadcast_arrays(a):
  shapes = _tensors(a, a["args"])
  if shapes is None:
    return None
  try:
    to = tuple(int(n) for n in np.broadcast_shapes(*shapes))
  except ValueError:
    return None
  return "[" + ", ".join(f"ml.broadcast_to({{{i}}}, {to!r})" for i in range(len(shapes))) + "]", list(a["args"])


def _cuts(n, sections, name):
  """The parts' bounds along an axis of n elements: NumPy's array_split of an int (the first n % k parts one
  longer), or of a list of indices (as Python slices read them); None where a part would be empty or the
  division unequal for split's family."""
  if _int(sections):
    if sections < 1:
      return None
    big, extra = divmod(n, sections)
    if extra and name != "array_split":
      return None                          # (jnp's own error: not an equal division)
    cuts = [k * big + min(k, extra) for k in range(sections + 1)]
  elif isinstance(sections, (tuple, list)) and all(_int(i) for i in sections):
    norm = [min(max(i + n if i < 0 else i, 0), n) for i in sections]
    cuts = [0, *norm, n]
  else:
    return None
  return cuts if all(b > a for a, b in zip(cuts, cuts[1:])) else None


def _split(name, axis_of):
  def make(a):
    x = a["ary"]
    shape = _shape(a, x)
    if shape is None or not shape:
      return None
    axis = axis_of(a, len(shape))
    sec = a["indices_or_sections"]
    cuts = None if axis is None else _cuts(shape[axis], sec, name)
    if cuts is None and axis is not None and _int(sec) and sec >= 1 and name != "array_split":
      return f"ml.split({{0}}, {sec}, axis={axis})", [x]      # (not an equal division: ml.split's error says so)
    if cuts is None:
      return None
    parts = [f"{{0}}{_at(len(shape), axis, f'{lo}:{hi}')}" for lo, hi in zip(cuts, cuts[1:])]
    return "[" + ", ".join(parts) + "]", [x]
  return make


def _slice_in_dim(a):
  x = a["operand"]
  shape = _shape(a, x)
  axis = None if not shape else _axis(a["axis"], len(shape))
  lo, hi, step = a["start_index"], a["limit_index"], a["stride"]
  if axis is None or not all(v is None or _int(v) for v in (lo, hi)) or not _int(step) or step < 1:
    return None
  n = shape[axis]
  lo = 0 if lo is None else lo + n if lo < 0 else lo      # (lax's: a negative index counts from the end)
  hi = n if hi is None else hi + n if hi < 0 else hi
  if not 0 <= lo < hi <= n:
    return None
  return f"{{0}}{_at(len(shape), axis, f'{lo}:{hi}' + (f':{step}' if step != 1 else ''))}", [x]


def _index_in_dim(a):
  x, i = a["operand"], a["index"]
  shape = _shape(a, x)
  axis = None if not shape else _axis(a["axis"], len(shape))
  if axis is None or not _int(i) or not -shape[axis] <= i < shape[axis]:
    return None
  i %= shape[axis]
  keep = a["keepdims"]
  if not isinstance(keep, (bool, np.bool_)):
    return None
  return f"{{0}}{_at(len(shape), axis, f'{i}:{i + 1}' if keep else str(i))}", [x]


def _starts(shape, starts, sizes):
  """lax's static start indices: a negative one counts from the end, then each is clamped so that the window
  of `sizes` lies inside `shape` (lax.dynamic_slice's rule); None where one is not a static int."""
  if not isinstance(starts, (tuple, list)) or len(starts) != len(shape) or not all(_int(s) for s in starts):
    return None
  if len(sizes) != len(shape) or not all(_int(k) and 0 < k <= n for k, n in zip(sizes, shape)):
    return None
  return [min(max(s + n if s < 0 else s, 0), n - k) for s, n, k in zip(starts, shape, sizes)]


def _dynamic_slice(a):
  x = a["operand"]
  shape = _shape(a, x)
  sizes = a["slice_sizes"]
  if shape is None or not isinstance(sizes, (tuple, list)) or a["allow_negative_indices"] is not True:
    return None
  starts = _starts(shape, a["start_indices"], tuple(sizes))
  if starts is None:       # (a run-time start: the register gather of its window, jnp_dynamic, probe 57d)
    return slice_form(x, shape, a["start_indices"], tuple(sizes), True)
  return "{0}[" + ", ".join(f"{s}:{s + k}" for s, k in zip(starts, sizes)) + "]", [x]


def _in_dim(a, index, size, keep=True):
  """(start_indices, slice_sizes) of lax's *_in_dim forms: the whole of every other axis."""
  shape = _shape(a, a["operand"])
  axis = None if not shape else _axis(a["axis"], len(shape))
  if axis is None or not (_int(index) or _scalar(index)):
    return None
  starts = [0] * len(shape)
  starts[axis] = index
  sizes = list(shape)
  sizes[axis] = size
  return starts, sizes, axis


def _dynamic_slice_in_dim(a):
  got = _in_dim(a, a["start_index"], a["slice_size"])
  if got is None or a["allow_negative_indices"] is not True:
    return None
  return _dynamic_slice({**a, "start_indices": got[0], "slice_sizes": got[1]})


def _dynamic_index_in_dim(a):
  got = _in_dim(a, a["index"], 1)
  if got is None or a["allow_negative_indices"] is not True or not isinstance(a["keepdims"], (bool, np.bool_)):
    return None
  if _scalar(a["index"]):  # (a run-time index of a 1- or 2-D tile: the register gather of its row or column)
    form = index_form(a["operand"], _shape(a, a["operand"]), got[2], a["index"], bool(a["keepdims"]), True)
    if form is not None:
      return form
  form = _dynamic_slice({**a, "start_indices": got[0], "slice_sizes": got[1]})
  if form is None or a["keepdims"]:
    return form
  shape = _shape(a, a["operand"])
  return f"{form[0]}{_at(len(shape), got[2], '0')}", form[1]


def _dynamic_update_slice(a):
  """The operand with the update's window replaced: along each axis, the operand's parts before and after the
  window joined around the next axis's (ml.concatenate), the update innermost."""
  x, u = a["operand"], a["update"]
  shape, ushape = _shape(a, x), _shape(a, u)
  if shape is None or ushape is None or len(shape) != len(ushape) or a["allow_negative_indices"] is not True:
    return None
  starts = _starts(shape, a["start_indices"], ushape)
  if starts is None:       # (a run-time start: the update selected in its window, jnp_dynamic, probe 57d)
    return update_form(x, u, shape, ushape, a["start_indices"], True)
  if ushape == shape and str(x.type.dtype) != str(u.type.dtype):
    return None            # (a dtype lax refuses: the joins below report it, MG104, where there are any)
  rank, form = len(shape), "{1}"
  for axis in reversed(range(rank)):
    s, k, n = starts[axis], ushape[axis], shape[axis]
    outer = ", ".join(f"{starts[i]}:{starts[i] + ushape[i]}" for i in range(axis))
    lead = outer + ", " if outer else ""
    parts = ([f"{{0}}[{lead}0:{s}]"] if s else []) + [form] + ([f"{{0}}[{lead}{s + k}:{n}]"] if s + k < n else [])
    form = _join(parts, axis)
  return form, [x, u]


def _dynamic_update_slice_in_dim(a):
  u = a["update"]
  ushape = _shape(a, u)
  got = None if ushape is None else _in_dim(a, a["start_index"], 1)
  if got is None:
    return None
  return _dynamic_update_slice({**a, "start_indices": got[0]})


def _dynamic_update_index_in_dim(a):
  """lax.dynamic_update_index_in_dim: an update of the operand's rank less one gains the axis first, as lax's."""
  x, u = a["operand"], a["update"]
  shape, ushape = _shape(a, x), _shape(a, u)
  if shape is not None and len(shape) == 1 and _scalar_of(u, x) and a["allow_negative_indices"] is True:
    return scalar_update_form(x, u, shape[0], a["index"])   # (a vector's element: probe 57b's lattice cell)
  got = None if shape is None or ushape is None else _in_dim(a, a["index"], 1)
  if got is None or a["allow_negative_indices"] is not True:
    return None
  axis = got[2]
  if len(ushape) == len(shape) - 1:
    form = _dynamic_update_slice({**a, "start_indices": got[0], "_shape_of": lambda v: (
        ushape[:axis] + (1,) + ushape[axis:] if v is u else _shape(a, v))})
    if form is not None:
      form = (form[0].replace("{1}", "{1}" + _at(len(shape), axis, "None")), form[1])
    return form
  return _dynamic_update_slice({**a, "start_indices": got[0]})


def _pad(a):
  """lax.pad without interior padding and with no negative edge: jnp.pad's constant mode."""
  from .jnp_pad import pad_form
  config, c = a["padding_config"], a["padding_value"]
  if not isinstance(config, (tuple, list)) or not all(isinstance(p, (tuple, list)) and len(p) == 3 and all(
      _int(v) for v in p) for p in config):
    return None
  if any(i != 0 or lo < 0 or hi < 0 for lo, hi, i in config):
    return None
  return pad_form({"array": a["operand"], "pad_width": [(lo, hi) for lo, hi, _ in config], "mode": "constant",
                   "kwargs": {"constant_values": c}, "_shape_of": a.get("_shape_of")})


def _collapse(a):
  shape = _shape(a, a["operand"])
  lo, hi = a["start_dimension"], a["stop_dimension"]
  if shape is None or not _int(lo) or not (hi is None or _int(hi)):
    return None
  n = len(shape)
  lo, hi = lo % n if -n <= lo < n else None, n if hi is None else hi + n if hi < 0 else hi
  if lo is None or not lo <= hi <= n:
    return None
  new = shape[:lo] + (int(np.prod(shape[lo:hi])),) + shape[hi:]
  return f"{{0}}.reshape({new!r})", [a["operand"]]


def _broadcast(a):
  shape, sizes = _shape(a, a["operand"]), a["sizes"]
  if shape is None or not isinstance(sizes, (tuple, list)) or not all(_int(k) for k in sizes) or \
      a.get("out_sharding") is not None:
    return None
  return f"ml.broadcast_to({{0}}, {tuple(sizes) + shape!r})", [a["operand"]]


def _take_axis(a):
  """jnp.take of a register tensor along an axis (a 1-D one's is jnp_forms._take): the register gather `v[ids]`
  (`v[:, ids]`), with jnp's modes: "fill" (the default: fill_value, NaN or the dtype's lowest integer, where an
  index lies outside [-n, n)), "clip" (indices clamped into [0, n)), "wrap" (taken modulo n)."""
  if (got := _take(a)) is not None:
    return got
  x, ids, axis, mode, fill = a["a"], a["indices"], a["axis"], a["mode"], a["fill_value"]
  shape, ishape = _shape(a, x), _shape(a, ids)
  if _scalar(ids):         # (a run-time scalar index, probe 57b)
    ishape = ()
  if shape is None or ishape is None or len(ishape) > 1 or a["out"] is not None or _kind(ids) != "int":
    return None
  ax = (0 if len(shape) == 1 else None) if axis is None else _axis(axis, len(shape))
  if ax is None or len(shape) > 2 or _kind(x) not in ("float", "int"):
    return None
  n, lead = shape[ax], ":, " * ax
  if mode == "clip":
    return f"{{0}}[{lead}ml.clip({{1}}, 0, {n - 1})]", [x, ids]
  if mode == "wrap":
    return f"{{0}}[{lead}{{1}} % {n}]", [x, ids]
  if mode not in (None, "fill"):
    return None
  if fill is None:
    d = str(getattr(x.type, "dtype", ""))
    fill = float("nan") if _kind(x) == "float" else int(np.iinfo(d).min if d.startswith("int") else np.iinfo(d).max)
  ok = f"(({{1}} >= -{n}) & ({{1}} < {n}))" + ("" if not ishape or len(shape) == 1 else "[:, None]" if ax == 0
                                                else "[None, :]")
  return f"ml.where({ok}, {{0}}[{lead}{{1}}], {{2}})", [x, ids, fill]



def _fill_of(x, fill):
  """jnp's fill_value for an index outside the axis: the caller's, else NaN for floats, the lowest signed or the
  highest unsigned integer, True for bools (jnp's defaults)."""
  if fill is not None:
    return fill
  d = str(getattr(x.type, "dtype", ""))
  return float("nan") if _kind(x) == "float" else True if _kind(x) == "bool" else int(
      np.iinfo(d).min if d.startswith("int") else np.iinfo(d).max)


def _take_along(a):
  """jnp.take_along_axis of a register tensor with jnp's modes (probe 57f): "fill", the default, gives fill_value
  (NaN, the dtype's lowest signed or highest unsigned integer) where an index lies outside [-n, n) (a negative one
  counts from the end, as jnp's unless wrap_negative_indices=False); "clip" clamps it into the axis (after the
  wrap), as ml.take_along_axis does; "promise_in_bounds" is ml's. ml.take_along_axis alone clamped every index, so
  the default mode's NaN of a label past the vocabulary was the last column's logit, silently."""
  x, ids, axis, mode = a["arr"], a["indices"], a["axis"], a["mode"]
  wrap = a.get("wrap_negative_indices")
  shape, ishape = _shape(a, x), _shape(a, ids)
  if mode not in (None, "fill", "clip", "promise_in_bounds") or wrap not in (None, True, False):
    return None
  if shape is None or ishape is None or _kind(ids) != "int" or _kind(x) is None or not _int(
      axis) or not -len(shape) <= axis < len(shape):
    return "ml.take_along_axis({0}, {1}, axis={2})", [x, ids, axis]    # (ml's own errors name what is amiss)
  ax, n = axis % len(shape), shape[axis % len(shape)]
  d = str(getattr(ids.type, "dtype", ""))
  # (jnp converts 32- and 64-bit indices to int32 first, wrapping: uint32's 2**32 - 1 is -1, int64's -2**40 is 0)
  i = "{1}.astype(jnp.int32)" if d in ("uint32", "int64", "uint64") else "{1}"
  signed = d.startswith("int") or d in ("uint32", "uint64")
  take = f"ml.take_along_axis({{0}}, {i}, axis={ax})"
  if wrap is False and signed:     # a negative index lies outside the axis, not counted from the end
    if mode == "clip":
      return f"ml.take_along_axis({{0}}, ml.clip({i}, 0, {n - 1}), axis={ax})", [x, ids]
    low = "0"
  else:
    low = f"-{n}"
  if mode in ("clip", "promise_in_bounds"):
    return take, [x, ids]
  ok = f"(({i} >= {low}) & ({i} < {n}))" if signed else f"({i} < {n})"
  return f"ml.where({ok}, {take}, {{2}})", [x, ids, _fill_of(x, a["fill_value"])]


def _put_along(a):
  """jnp.put_along_axis(arr, ids, values, axis, inplace=False) of a 2-D register tile with one index a row (axis 1,
  ids (m, 1)) or a column (axis 0, ids (1, n)): the select of `values` at each row's index (a negative one counts
  from the end; one outside the axis is dropped, jnp's default, or clamped with mode="clip"). Probe 57f: MG003."""
  x, ids, axis, mode = a["arr"], a["indices"], a["axis"], a["mode"]
  shape, ishape = _shape(a, x), _shape(a, ids)
  if shape is None or ishape is None or len(shape) != 2 or len(ishape) != 2 or not _int(axis) or not (
      -2 <= axis < 2) or a["inplace"] is not False or mode not in (None, "drop", "fill", "clip",
      "promise_in_bounds") or _kind(ids) != "int" or _kind(x) not in ("float", "int"):
    return None
  ax = axis % 2
  n = shape[ax]
  if ishape != ((shape[0], 1) if ax == 1 else (1, shape[1])):
    return None
  i = "ml.where({1} < 0, {1} + %d, {1})" % n if str(ids.type.dtype).startswith("int") else "{1}"
  if mode == "clip":
    i = f"ml.clip({i}, 0, {n - 1})"
  at = f"ml.arange({n})" + ("[None, :]" if ax == 1 else "[:, None]")
  return f"ml.where({at} == {i}, {{2}}, {{0}}).astype({{0}}.dtype)", [x, ids, a["values"]]


def _diagonal(a):
  """jnp.diagonal (jnp.diag of a matrix) of a 2-D register tile, a static offset along axes (0, 1): the element
  each row (column) keeps, ml.take_along_axis's select of one index a row (exact: -0.0 and NaN its own), over every
  row (k >= 0) or every column (k < 0) of the tile, then its first elements where the diagonal is shorter (CLIP's
  logits' positives, probe 57f; MG003 before). An empty diagonal keeps its MG003."""
  x = a["a"] if "a" in a else a["v"]
  k = a["offset"] if "offset" in a else a["k"]
  shape = _shape(a, x)
  if shape is None or not _int(k) or _kind(x) not in ("float", "int") or (a.get("axis1", 0) % 2, a.get(
      "axis2", 1) % 2) != (0, 1):
    return None
  if len(shape) == 1:        # jnp.diag of a vector: the matrix with it on the main diagonal
    if k != 0 or "offset" in a:
      return None
    n = shape[0]
    # ({0}[:, None]: the same elements on the diagonal; a row statistic, the usual vector here, is one)
    return f"ml.where(ml.arange({n})[:, None] == ml.arange({n})[None, :], {{0}}[:, None], {{1}})", [x, _zero(x)]
  if len(shape) != 2:
    return None
  m, n = shape
  size = min(m, n - k) if k >= 0 else min(m + k, n)
  if size <= 0:
    return None                  # (an empty diagonal: its MG003)
  if k >= 0:                     # row i's column i + k (clamped past the last column: rows the slice drops)
    cols = f"(ml.arange({m}) + {k})" if size == m else f"ml.minimum(ml.arange({m}) + {k}, {n - 1})"
    got = f"ml.take_along_axis({{0}}, {cols}[:, None], axis=1)[:, 0]"
    return (got if size == m else f"{got}[:{size}]"), [x]
  rows = f"(ml.arange({n}) + {-k})" if size == n else f"ml.minimum(ml.arange({n}) + {-k}, {m - 1})"
  got = f"ml.take_along_axis({{0}}, {rows}[None, :], axis=0)[0, :]"
  return (got if size == n else f"{got}[:{size}]"), [x]


def _zero(x):
  return 0.0 if _kind(x) == "float" else 0


def _diagflat(a):
  """jnp.diagflat of a vector (k = 0): jnp.diag's matrix."""
  x, k = a["v"], a["k"]
  shape = _shape(a, x)
  if shape is None or len(shape) != 1 or k != 0 or _kind(x) not in ("float", "int"):
    return None
  return _diagonal({"v": x, "k": 0, "_shape_of": a.get("_shape_of")})


MOVES = {
    ("jnp", "concat"): (("arrays", "axis"), _concat),
    ("jnp", "take_along_axis"): (("arr", "indices", "axis", "mode", "fill_value", "wrap_negative_indices"),
                                 _take_along),
    ("jnp", "put_along_axis"): (("arr", "indices", "values", "axis", "inplace", "mode"), _put_along),
    ("jnp", "diagonal"): (("a", "offset", "axis1", "axis2"), _diagonal),
    ("jnp", "diag"): (("v", "k"), _diagonal), ("jnp", "diagflat"): (("v", "k"), _diagflat),
    ("jnp", "append"): (("arr", "values", "axis"), _append),
    ("jnp", "hstack"): (("tup", "dtype"), _stacked(lambda r: "", lambda r: 0 if r == 1 else 1)),
    ("jnp", "vstack"): (("tup", "dtype"), _stacked(lambda r: "[None, :]" if r == 1 else "", lambda r: 0)),
    ("jnp", "dstack"): (("tup", "dtype"), _stacked(lambda r: _ATLEAST[3].get(r, ""), lambda r: 2)),
    ("jnp", "column_stack"): (("tup",), _stacked(lambda r: "[:, None]" if r == 1 else "", lambda r: 1)),
    ("jnp", "unstack"): (("x", "axis"), _unstack),
    ("jnp", "permute_dims"): (("a", "axes"), _permute_dims),
    ("jnp", "matrix_transpose"): (("x",), _matrix_transpose),
    ("jnp", "fliplr"): (("m",), _flip(1)), ("jnp", "flipud"): (("m",), _flip(0)),
    ("jnp", "rot90"): (("m", "k", "axes"), _rot90),
    ("jnp", "rollaxis"): (("a", "axis", "start"), _rollaxis),
    **{("jnp", f"atleast_{n}d"): (("arys",), _atleast(n)) for n in (1, 2, 3)},
    ("jnp", "broadcast_arrays"): (("args",), _broadcast_arrays),
    ("jnp", "array_split"): (("ary", "indices_or_sections", "axis"),
                             _split("array_split", lambda a, r: _axis(a["axis"], r))),
    ("jnp", "hsplit"): (("ary", "indices_or_sections"), _split("hsplit", lambda a, r: 0 if r == 1 else 1)),
    ("jnp", "vsplit"): (("ary", "indices_or_sections"), _split("vsplit", lambda a, r: 0 if r >= 2 else None)),
    ("jnp", "dsplit"): (("ary", "indices_or_sections"), _split("dsplit", lambda a, r: 2 if r >= 3 else None)),
    ("jnp", "take"): (("a", "indices", "axis", "out", "mode", "unique_indices", "indices_are_sorted", "fill_value"),
                      _take_axis),
    ("jax.lax", "slice_in_dim"): (("operand", "start_index", "limit_index", "stride", "axis"), _slice_in_dim),
    ("jax.lax", "index_in_dim"): (("operand", "index", "axis", "keepdims"), _index_in_dim),
    ("jax.lax", "dynamic_slice"): (("operand", "start_indices", "slice_sizes", "allow_negative_indices"),
                                   _dynamic_slice),
    ("jax.lax", "dynamic_slice_in_dim"): (("operand", "start_index", "slice_size", "axis", "allow_negative_indices"),
                                          _dynamic_slice_in_dim),
    ("jax.lax", "dynamic_index_in_dim"): (("operand", "index", "axis", "keepdims", "allow_negative_indices"),
                                          _dynamic_index_in_dim),
    ("jax.lax", "dynamic_update_slice"): (("operand", "update", "start_indices", "allow_negative_indices"),
                                          _dynamic_update_slice),
    ("jax.lax", "dynamic_update_slice_in_dim"): (("operand", "update", "start_index", "axis",
                                                  "allow_negative_indices"), _dynamic_update_slice_in_dim),
    ("jax.lax", "dynamic_update_index_in_dim"): (("operand", "update", "index", "axis", "allow_negative_indices"),
                                                 _dynamic_update_index_in_dim),
    ("jax.lax", "pad"): (("operand", "padding_value", "padding_config"), _pad),
    ("jax.lax", "collapse"): (("operand", "start_dimension", "stop_dimension"), _collapse),
    ("jax.lax", "broadcast"): (("operand", "sizes", "out_sharding"), _broadcast),
}


def _bits_axis(a, shape):
  """(the rank the bits run along the last axis of, the transposition putting `axis` last, or "") for jnp.packbits /
  unpackbits: axis=None of a vector, the last axis, or axis 0 of a 2-D tile (through ml.transpose); None otherwise."""
  axis, rank = a["axis"], len(shape)
  if a["bitorder"] not in ("big", "little") or rank not in (1, 2) or axis is None and rank != 1:
    return None
  axis = rank - 1 if axis is None else _axis(axis, rank)
  if axis is None:
    return None
  return axis, ("" if axis == rank - 1 else "ml.transpose({}, (1, 0))")


def _shifts(a, rank):
  k = "(7 - ml.arange(8))" if a["bitorder"] == "big" else "ml.arange(8)"
  return f"{k}.astype(ml.uint32)[{'None, ' * rank}:]"


def _packbits(a):
  """jnp.packbits: each 8 elements of the axis (nonzero: a 1 bit) one uint8, the first the highest bit ("big") or the
  lowest ("little"); an axis not a multiple of 8 keeps its MG003 (jnp pads it with zeros)."""
  x = a["a"]
  shape = _shape(a, x)
  got = None if shape is None or _kind(x) not in ("int", "bool") else _bits_axis(a, shape)
  if got is None:
    return None
  axis, swap = got
  n = shape[axis]
  if n % 8:
    return None
  last = (swap.format("{0}") if swap else "{0}")
  lead = tuple(shape[i] for i in range(len(shape)) if i != axis)
  bits = f"({last} != 0).astype(ml.uint32).reshape({lead + (n // 8, 8)!r})"
  form = f"ml.sum({bits} << {_shifts(a, len(lead) + 1)}, axis=-1).astype(ml.uint8)"
  return (swap.format(form) if swap else form), [x]


def _unpackbits(a):
  """jnp.unpackbits of uint8: each element 8 elements of 0 and 1 along the axis, its highest bit first ("big") or its
  lowest; count= keeps the first count (a negative one drops that many from the end; more pads with zeros)."""
  x, count = a["a"], a["count"]
  shape = _shape(a, x)
  got = None if shape is None or str(getattr(x.type, "dtype", "")) != "uint8" else _bits_axis(a, shape)
  if got is None or not (count is None or _int(count)):
    return None
  axis, swap = got
  last = (swap.format("{0}") if swap else "{0}")
  lead = tuple(shape[i] for i in range(len(shape)) if i != axis)
  n = shape[axis] * 8
  form = (f"((({last}.astype(ml.uint32)[..., None] >> {_shifts(a, len(lead) + 1)}) & 1).astype(ml.uint8)"
          f".reshape({lead + (n,)!r}))")
  if count is not None:
    keep = count if count >= 0 else max(n + count, 0)
    if keep == 0:
      return None
    idx = ":, " * len(lead)
    form = (f"{form}[{idx}:{keep}]" if keep <= n else
            f"ml.concatenate([{form}, ml.zeros({lead + (keep - n,)!r}, ml.uint8)], axis={len(lead)})")
  return (swap.format(form) if swap else form), [x]


MOVES.update({
    ("jnp", "packbits"): (("a", "axis", "bitorder"), _packbits),
    ("jnp", "unpackbits"): (("a", "axis", "count", "bitorder"), _unpackbits),
})


# jnp's joins: their parts of different dtypes are promoted as jnp promotes them (lax.concatenate's are not: lax
# refuses them, and so does ml.concatenate, MG104)
JOINS = frozenset(("concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack", "append"))


def promoted_parts(cx, name, args, kwargs):
  """(args, kwargs) of a jnp join with its register parts converted to jnp's result dtype (`jnp.concatenate([a_bf16,
  b_f32])` is float32: probe 52c, it was MG104) by jnp's lattice with its weak types (ops/weak_lattice.join): a
  weakly typed part takes a strong part's dtype (`jnp.concatenate([v_bool * 0.5, x_bf16])` is bfloat16 and
  `[x_i8, jnp.where(m, 1, 2)]` int8; the diff fuzzer's seed 41005: they were float32 and int32), weak parts alone
  join weakly. Unchanged where the parts share a dtype or no dtype is common (float8 beside another float:
  ml.concatenate's MG104 stands)."""
  from .dtypes import DType
  from .ops import elementwise as ew
  from .ops.base import is_value
  from .ops.weak_lattice import join
  from .types import resolve
  args, kwargs = list(args), dict(kwargs)
  if name == "append":
    slots = [(args, i) for i in range(min(2, len(args)))] + [(kwargs, k) for k in ("arr", "values") if k in kwargs]
    holder = None
  else:
    holder = (args, 0) if args else next(((kwargs, k) for k in ("arrays", "tup") if k in kwargs), None)
    if holder is None or not isinstance(holder[0][holder[1]], (list, tuple)):
      return args, kwargs
    parts = list(holder[0][holder[1]])
    slots = [(parts, i) for i in range(len(parts))]
  vals = [(c, k) for c, k in slots if is_value(c[k]) and isinstance(resolve(c[k].type.dtype), DType)]
  if len({resolve(c[k].type.dtype) for c, k in vals}) < 2:
    return args, kwargs
  j = join(cx, [c[k] for c, k in vals])
  if j is None:
    return args, kwargs
  to, weak = j
  for c, k in vals:
    if resolve(c[k].type.dtype) != to:
      c[k] = ew.astype(cx, c[k], to)
      if weak:
        cx.b.weak.add(c[k].id)     # (every part weak: so is the join, as jnp's; ops/base.keep_weak)
  if holder is not None:
    holder[0][holder[1]] = type(holder[0][holder[1]])(parts)
  return args, kwargs
