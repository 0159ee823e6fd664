"""lax's dynamic slices and updates of a register tensor at run-time starts (probe 57d): a KV cache's or a rolling
buffer's `lax.dynamic_update_slice(cache, new[None], (pos, 0))`, `lax.dynamic_update_index_in_dim(cache, new, pos,
0)` and `lax.dynamic_slice(cache, (pos, 0), (16, d))` with `pos` read from memory. Each was MG003 ("cannot take a
register tensor"; jnp_moves computes static starts only) where `cache.at[pos].set(new)` and `v[pos + ml.arange(16)]`
compiled. A start is lax's: a negative one counts from the end (allow_negative_indices), then it is clamped so the
window lies inside the axis. A slice is the register gather of `start + ml.arange(size)` along each axis it
shortens; an update the select of the update, gathered to the operand's shape at the clamped offsets, inside the
window (an axis of size 1 broadcasts, one as long as the operand's starts at 0)."""
from __future__ import annotations

from .jnp_forms import _dtype, _kind
from .ops.base import static_integer as _int     # (jnp_moves and jnp_sized take it from here)


def _scalar(v) -> bool:
  """An integer run-time scalar (a value read from memory, a program id, a loop counter)."""
  t = getattr(v, "type", None)
  return type(t).__name__ == "ScalarType" and _kind(v) == "int"


def run_time_starts(shape, starts, sizes, negative=True):
  """(each axis's start as a form's text, its operands) for lax's start indices of which at least one is a run-time
  scalar, each wrapped (a negative one counting from the end, where `negative`) and clamped so the window of
  `sizes` lies inside `shape`; an axis the window spans whole starts at 0. None where a start is neither a static
  int nor an integer scalar, or the sizes do not fit."""
  if not isinstance(starts, (tuple, list)) or len(starts) != len(shape) or len(sizes) != len(shape):
    return None
  if not all(_int(k) and 0 < k <= n for k, n in zip(sizes, shape)):
    return None
  if not all(_int(s) or _scalar(s) for s in starts) or all(_int(s) for s in starts):
    return None
  texts, operands = [], []
  for s, n, k in zip(starts, shape, sizes):
    if k == n:
      texts.append("0")
    elif _int(s):
      texts.append(str(min(max(s + n if s < 0 and negative else s, 0), n - k)))
    else:
      slot = "{%d}" % (len(operands) + 2)      # ({0}, {1}: the operand and the update, or the operand twice)
      operands.append(s)
      d = _dtype(s)
      if not d.is_signed:           # (an unsigned start is never negative: only clamped)
        t = f"ml.minimum({slot}, {n - k})"
      else:
        wrapped = f"ml.where({slot} < 0, {slot} + {n}, {slot})" if negative else slot
        t = f"ml.minimum(ml.maximum({wrapped}, 0), {n - k})"
      texts.append(t if str(d) == "int32" else f"{t}.astype(ml.int32)")    # (in [0, n - k]: exact in int32)
  return texts, operands


def _gathered(form, rank, axis, index):
  return f"{form}[{', '.join([':'] * axis + [index])}]"


def slice_form(x, shape, starts, sizes, negative):
  """lax.dynamic_slice of a register tensor at run-time starts: the register gather of each shortened axis."""
  got = run_time_starts(shape, starts, sizes, negative)
  if got is None:
    return None
  texts, operands = got
  static = [f"{t}:{int(t) + k}" if t.lstrip("-").isdigit() else ":" for t, k in zip(texts, sizes)]
  form = "{0}" if all(w == ":" for w in static) else "{0}[" + ", ".join(static) + "]"   # (static starts: a window)
  for axis, (t, n, k) in enumerate(zip(texts, shape, sizes)):
    if k < n and static[axis] == ":":
      form = _gathered(form, len(shape), axis, f"(({t}) + ml.arange({k}))")
  return form, [x, x] + operands


def update_form(x, u, shape, ushape, starts, negative):
  """lax.dynamic_update_slice of a register tensor at run-time starts: the operand with the update selected inside
  its window, the update gathered along each axis it spans in part (more than one element, less than the axis)."""
  if str(x.type.dtype) != str(getattr(getattr(u, "type", None), "dtype", "")):
    return None            # (lax refuses another dtype: its MG003 stands)
  got = run_time_starts(shape, starts, ushape, negative)
  if got is None:
    return None
  texts, operands = got
  rank, placed, masks = len(shape), "{1}", []
  for axis, (t, n, k) in enumerate(zip(texts, shape, ushape)):
    if k == n:
      continue
    iota = f"ml.arange({n})"
    if k > 1:
      placed = _gathered(placed, rank, axis, f"ml.minimum(ml.maximum({iota} - ({t}), 0), {k - 1})")
    where = ", ".join(":" if i == axis else "None" for i in range(rank))
    masks.append(f"(({iota} >= ({t})) & ({iota} < ({t}) + {k}))[{where}]")
  if not masks:            # (the update spans the operand: lax clamps every start to 0)
    return "{1}", [x, u] + operands
  return f"ml.where({' & '.join(masks)}, {placed}, {{0}})", [x, u] + operands


def index_form(x, shape, axis, index, keepdims, negative):
  """lax.dynamic_index_in_dim of a 1- or 2-D register tensor at a run-time index (probe 57b: a recurrence reading
  row or column `t` of the tile it carries): the register gather `v[i]` / `v[:, i]` at lax's clamped start, the
  axis kept (`[None, :]`, `[:, None]`) where keepdims; None for other ranks (slice_form's gather then)."""
  if len(shape) not in (1, 2) or len(shape) == 1 and keepdims:
    return None
  starts = [0] * len(shape)
  starts[axis] = index
  got = run_time_starts(shape, starts, [1 if a == axis else n for a, n in enumerate(shape)], negative)
  if got is None:
    return None
  at = got[0][axis].replace("{2}", "{1}")
  form = f"{{0}}[{at}]" if axis == 0 else f"{{0}}[:, {at}]"
  if keepdims:
    form += "[None, :]" if axis == 0 else "[:, None]"
  return form, [x, index]


def _scalar_of(u, x) -> bool:
  """Whether `u` is a scalar of the register tensor `x`'s dtype (lax's update of one element of a vector)."""
  t = getattr(u, "type", None)
  if type(t).__name__ == "ScalarType":
    return str(t.dtype) == str(x.type.dtype)
  if isinstance(u, (int, float)) and not isinstance(u, bool):      # (a Python number, weak; a NumPy scalar, typed)
    return getattr(u, "dtype", None) is None or str(u.dtype) == str(x.type.dtype)
  return False


def scalar_update_form(x, u, n, index):
  """lax.dynamic_update_index_in_dim of a vector by a scalar (probe 57b: a lattice's cell written at step t): the
  select of `u` at lax's clamped position, a static int or a run-time integer scalar."""
  if _int(index):
    return f"ml.where(ml.arange({n}) == {min(max(index + n if index < 0 else index, 0), n - 1)}, {{1}}, {{0}})", [x, u]
  got = run_time_starts((n,), (index,), (1,))
  if got is None:
    return None
  return f"ml.where(ml.arange({n}) == ({got[0][0]}), {{1}}, {{0}})", [x, u] + got[1]
