"""Hints for the jnp, lax and jax.nn functions of shape and structure (expand_dims, squeeze,
swapaxes, tril, one_hot, roll, lax.slice, ...) that a Pallas kernel calls on register values:
the indexing, reshape, ml.where or ml.concatenate that a kernel writes instead, with the call's own
arguments (`pos`, `kw`: as written) and the shape of its first operand where known."""
from __future__ import annotations

import ast
import re

from .formula_hints import operand  # an argument as written, parenthesised where an operator or index follows it


def literal(text):
  """The Python literal an argument's text spells (`(0, 2)`, `-1`), else None."""
  try:
    return ast.literal_eval(text.strip()) if text is not None else None
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    return None


def _arg(pos, kw, i, name, default=None):
  return kw.get(name, pos[i] if len(pos) > i else default)


def _axes(v, rank):
  """An int or tuple of ints (as a literal) -> the non-negative axes; None if not static."""
  v = (v,) if isinstance(v, int) else v
  if not isinstance(v, tuple) or not all(isinstance(a, int) and -rank <= a < rank for a in v):
    return None
  return tuple(a % rank for a in v)


def _atom(text):
  """`text` as the operand of a subscript: parenthesised unless a name, call or subscript."""
  return text if re.fullmatch(r"[\w.]+(\[[^\]]*\]|\([^)]*\))*", text) else f"({text})"


def _index(marks):
  return "[" + ", ".join(marks) + "]"


def _expand(x, axis, rank):
  axes = _axes(literal(axis), rank + 1)
  if axes is None:
    return None
  marks, it = [], iter([":"] * rank)
  for i in range(rank + 1):
    marks.append("None" if i in axes else next(it, ":"))
  return f"write {x}{_index(marks)} (a size-1 axis where None stands)"


def _squeeze(x, axis, shape):
  if shape is None:
    return None
  axes = tuple(i for i, n in enumerate(shape) if n == 1) if axis is None else _axes(literal(axis), len(shape))
  if axes is None:
    return None
  rest = tuple(n for i, n in enumerate(shape) if i not in axes)
  return f"write {x}.reshape({rest})" if rest else f"write {x}[{', '.join(['0'] * len(shape))}] (its one element)"


def _band(x, k, shape, upper):
  if shape is None or len(shape) != 2:
    return None
  m, n = shape
  op = ">=" if upper else "<="
  k = (k or "0").strip()
  off = "" if k == "0" else f" - {k[1:].strip()}" if k.startswith("-") else f" + {k}"
  return (f"write ml.where(ml.arange({n})[None, :] {op} ml.arange({m})[:, None]{off}, {x}, 0) (the"
          f" {'upper' if upper else 'lower'} triangle kept by index, as jnp.{'triu' if upper else 'tril'})")


_INF = ("jnp.inf", "np.inf", "math.inf", "float('inf')", 'float("inf")', "numpy.inf")


def _norm(x, pos, kw, rank):
  """jnp.linalg.norm(x, ord, axis, keepdims) as a kernel writes it, for the orders it reads as written: the L2 (or
  Frobenius) norm, a vector's 1-norm and +-inf-norm along an axis (an L1 row normalisation's
  `jnp.linalg.norm(v, ord=1, axis=1, keepdims=True)`), a matrix's 1- and inf-norms; None for others (the general
  hint)."""
  order = _arg(pos, kw, 1, "ord")
  order = None if order is None or order.strip() == "None" else order.strip().replace(" ", "")
  axis, keep = _arg(pos, kw, 2, "axis"), _arg(pos, kw, 3, "keepdims")      # (x / norm(x, keepdims=True) broadcasts)
  vector = rank == 1 or isinstance(literal(axis), int)
  tail = (f", axis={axis.strip()}" if axis else "") + (
      f", keepdims={keep.strip()}" if keep and keep.strip() != "False" else "")
  if order in (None, "'fro'", '"fro"') or order == "2" and vector:
    return f"write ml.sqrt(ml.sum({x} * {x}{tail}))"
  if vector and order == "1":
    return f"write ml.sum(ml.abs({x}){tail})"
  if vector and (order in _INF or order.startswith("-") and order[1:] in _INF):
    return f"write ml.{'min' if order.startswith('-') else 'max'}(ml.abs({x}){tail})"
  if rank == 2 and axis is None and not keep and (order == "1" or order in _INF):    # a matrix's largest column or row
    return f"write ml.max(ml.sum(ml.abs({x}), axis={0 if order == '1' else 1}))"
  if not vector and order in _SINGULAR:
    return _singular(x, order)
  return None


_SINGULAR = {"2": "2-norm (its largest singular value)", "-2": "-2-norm (its smallest singular value)",
             "'nuc'": "nuclear norm (the sum of its singular values)", '"nuc"': "nuclear norm (the sum of its singular"
             " values)"}


def _singular(x, order):
  """The hint of a matrix norm of singular values (probe 52d: the general one wrote the L2 formula, which is the
  Frobenius norm of a matrix, another number)."""
  return (f"a matrix's {_SINGULAR[order]} needs an SVD, which no kernel form computes: take it outside the kernel;"
          f" the Frobenius norm is ml.sqrt(ml.sum({x} * {x})) (ord='fro'), each row's 2-norm"
          f" ml.sqrt(ml.sum({x} * {x}, axis=1)) (axis=1)")


def _roll(x, shift, axis, shape):
  s, rank = literal(shift), len(shape) if shape is not None else None
  if isinstance(s, int) and rank == 1 and (axis is None or axis.strip() == "None" or literal(axis) in (0, -1)):
    return f"write ml.roll({x}, {s}) (jnp.roll's, through an SMEM scratch)"     # (a vector's one axis)
  axes = _axes(literal(axis), rank) if rank else None
  if not isinstance(s, int) or axes is None or len(axes) != 1:
    return None                       # the caller's general hint: shifted windows, wrapped gathers
  (a,) = axes
  return f"write ml.roll({x}, {s}, axis={a}) (jnp.roll's, through an SMEM scratch)"


def _slice(x, start, limit, shape):
  lo, hi = literal(start), literal(limit)
  if not (isinstance(lo, tuple) and isinstance(hi, tuple) and len(lo) == len(hi)):
    return None
  return f"write {x}{_index([f'{a}:{b}' for a, b in zip(lo, hi)])} (a static window of a register tensor)"


def _dynamic(x, starts, sizes):
  try:
    e = ast.parse((starts or "").strip(), mode="eval").body
    st = [ast.unparse(x) for x in e.elts] if isinstance(e, (ast.Tuple, ast.List)) else []
  except SyntaxError:
    st = []
  sz = literal(sizes)
  lead = ("a register tensor's window takes a tuple of integer starts, one a static int or an integer scalar per"
          " axis, and static sizes inside its shape; or read it from the ref")
  if not isinstance(sz, tuple) or len(st) != len(sz):
    return f"{lead}, ref.at[ml.ds(start, size), ...][...] (or mask a load with other=)"
  win = ", ".join(f"ml.ds({s}, {n})" for s, n in zip(st, sz))
  return f"{lead} {x} came from, ref[{win}] (ref.at[{win}] for a view)"


_UPDATES_IN = {"dynamic_update_slice": "(pos, 0)", "dynamic_update_slice_in_dim": "pos, axis=0",
               "dynamic_update_index_in_dim": "pos, 0"}


def _dynamic_update(name, x, u):
  """lax's dynamic updates of a register tensor compute (jnp_moves, jnp_dynamic) where the update has the operand's
  dtype and rank and the starts are integers: what to write where one of them is not."""
  rank = "its rank less one or its rank" if name == "dynamic_update_index_in_dim" else "its rank"
  return (f"lax.{name} of a register tensor takes an update of the operand's dtype and {rank}, and integer starts"
          f" (static ints or integer scalars, a tuple of one per axis for dynamic_update_slice): "
          f"jax.lax.{name}({x}, {operand(u)}.astype({operand(x)}.dtype), {_UPDATES_IN[name]})")


PERMUTES = ("transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis")


def _permutation(name, pos, kw, rank):
  """The axes of jnp.transpose (permute_dims, matrix_transpose, swapaxes, moveaxis) as ml.transpose takes
  them, from the call's static arguments; None where they are not static."""
  order = list(range(rank))
  if name in ("transpose", "permute_dims"):
    axes = literal(_arg(pos, kw, 1, "axes"))
    if axes is None and len(pos) < 2 and "axes" not in kw:
      return tuple(order[::-1])
    return axes if _axes(axes, rank) is not None and len(set(_axes(axes, rank))) == rank == len(axes) else None
  if name == "matrix_transpose":
    return tuple(order[:-2] + order[-1:] + order[-2:-1])
  a = _axes(literal(_arg(pos, kw, 1, "axis1" if name == "swapaxes" else "source")), rank)
  b = _axes(literal(_arg(pos, kw, 2, "axis2" if name == "swapaxes" else "destination")), rank)
  if a is None or b is None or len(a) != 1 or len(b) != 1:
    return None
  if name == "swapaxes":
    order[a[0]], order[b[0]] = order[b[0]], order[a[0]]
  else:
    order.insert(b[0], order.pop(a[0]))
  return tuple(order)


def _einsum_one(spec, x):
  """jnp.einsum of one operand that permutes its axes (`'bsd->bds'`) or sums some away (`'ij->i'`), as ml writes it."""
  m = re.fullmatch(r"\s*([a-zA-Z]+)\s*->\s*([a-zA-Z]*)\s*", spec)
  if m is None or len(set(m[1])) != len(m[1]) or len(set(m[2])) != len(m[2]) or not set(m[2]) <= set(m[1]):
    return None
  src, dst = m[1], m[2]
  kept = [c for c in src if c in dst]
  out = x
  if len(kept) < len(src):
    gone = tuple(k for k, c in enumerate(src) if c not in dst)
    out = f"ml.sum({x}, axis={gone[0] if len(gone) == 1 else gone})" if kept else f"ml.sum({x})"
  perm = tuple(kept.index(c) for c in dst)
  if perm != tuple(range(len(perm))):
    out = f"{_atom(out)}.T" if len(perm) == 2 else f"ml.transpose({out}, {perm})"
  return f"write {out} (einsum's '{spec}', no tensor cores needed)" if out != x else f"write {x} (einsum's '{spec}' is the tensor itself)"


def method_shape_hint(attr, recv, args, shape) -> str | None:
  """What to write for jnp's and torch's shape methods of a register tensor of `shape` (`v.swapaxes(1, 2)`,
  `v.permute(0, 2, 1)`, `v.unsqueeze(0)`, `v.repeat(2, axis=0)`), with the call's arguments as written; None
  for others."""
  if args is None or shape is None:
    return None
  rank = len(shape)
  pos = [a.strip() for a in args if not re.match(r"\s*\w+\s*=[^=]", a)]
  kw = {a.split("=", 1)[0].strip(): a.split("=", 1)[1].strip() for a in args if a.strip() not in pos}
  if attr == "permute" and rank >= 3:            # torch's dims, listed or as one tuple
    dims = literal(pos[0]) if len(pos) == 1 else literal(f"({', '.join(pos)},)")
    if _axes(dims, rank) is not None and sorted(_axes(dims, rank)) == list(range(rank)):
      return f"write ml.transpose({recv}, {tuple(_axes(dims, rank))}) (torch's .permute, through SMEM)"
  if attr in ("swapaxes", "moveaxis") and rank >= 3 and (perm := _permutation(attr, [recv, *pos], kw, rank)):
    return f"write ml.transpose({recv}, {perm}) (jnp's .{attr}, through SMEM)"
  if attr == "unsqueeze" and pos:
    return _expand(recv, pos[0], rank)
  if attr == "repeat" and pos:                  # jnp's method (torch's .repeat is jnp.tile: its reps have no axis=)
    return shape_call_hint("repeat", [recv, *pos], kw, shape) if "axis" in kw or len(pos) > 1 else None
  return None


def shape_call_hint(name, pos, kw, shape) -> str | None:
  """The hint for jnp.`name`(...) (or lax's, jax.nn's) on register values; None if not one of these."""
  x = pos[0].strip() if pos else "x"
  xp = operand(x)                     # where an index, .T or an operator follows it: (v - w)[:, None]
  rank = len(shape) if shape is not None else None
  if name == "expand_dims" and rank is not None:
    return _expand(xp, _arg(pos, kw, 1, "axis", _arg(pos, kw, 1, "dimensions")), rank)
  if name == "squeeze":
    return _squeeze(xp, _arg(pos, kw, 1, "axis", _arg(pos, kw, 1, "dimensions")), shape)
  if name in ("swapaxes", "moveaxis") and rank == 2:
    return f"write {xp}.T (a 2-D transpose, through SMEM)"
  if name == "einsum" and len(pos) == 2 and isinstance(spec := literal(pos[0]), str) and (h := _einsum_one(spec, pos[1].strip())):
    return h
  if name == "take" and len(pos) >= 2 and rank is not None and isinstance(
      axis := literal(_arg(pos, kw, 2, "axis")), int) and not isinstance(axis, bool) and -rank <= axis < rank:
    return f"write {xp}[{':, ' * (axis % rank)}{pos[1].strip()}] (NumPy's advanced indexing, a gather as jnp.take's)"
  if name == "take_along_axis" and len(pos) >= 2 and rank is not None and isinstance(
      axis := literal(_arg(pos, kw, 2, "axis")), int) and not isinstance(axis, bool):
    return f"write ml.take_along_axis({x}, {pos[1].strip()}, axis={axis})"
  if name in PERMUTES and rank is not None and rank >= 3 and (perm := _permutation(name, pos, kw, rank)):
    return f"write ml.transpose({x}, {perm}) (jnp.transpose's order, through SMEM)"
  if name in ("amax", "amin"):
    return f"write ml.{name[1:]}({', '.join(p.strip() for p in pos)}{''.join(f', {k}={v}' for k, v in kw.items())})"
  if name == "outer" and len(pos) == 2:
    return f"write {xp}[:, None] * {operand(pos[1].strip())}[None, :] (broadcasting)"
  if name in ("triu", "tril"):
    return _band(x, _arg(pos, kw, 1, "k"), shape, name == "triu")
  if name == "one_hot" and len(pos) >= 2 and rank == 1:
    dt = kw.get("dtype", "jnp.float32")
    return f"write ({xp}[:, None] == ml.arange({pos[1].strip()})[None, :]).astype({dt})"
  if name == "roll":
    return _roll(x, _arg(pos, kw, 1, "shift"), _arg(pos, kw, 2, "axis"), shape)
  if name == "slice" and len(pos) >= 3 and not kw and len(pos) == 3:
    return _slice(xp, pos[1], pos[2], shape)
  if name == "dynamic_slice" and len(pos) >= 3:
    return _dynamic(x, pos[1], pos[2])
  if name == "dynamic_slice_in_dim":
    return ("a register tensor's window takes an integer start (a static int or an integer scalar) and a static"
            " size inside the axis; or read it from the ref it came from, ref.at[..., ml.ds(start, size)][...]"
            " along the axis")
  if name in _UPDATES_IN and len(pos) >= 2:
    return _dynamic_update(name, x, pos[1].strip())
  if name in SPLITS and pos:
    h = split_hint(name, [*pos, *(f"{k}={v}" for k, v in kw.items())], shape)
    return h and f"{h} (jnp.{name}'s parts, each a register tensor of its own)"
  if name == "vector_norm" and kw.get("ord", "2").strip() in ("2", "2.0") and len(pos) == 1:
    name, kw = "norm", {k: v for k, v in kw.items() if k != "ord"}      # jnp.linalg.vector_norm(x, axis=1)
  if name == "norm":
    return _norm(xp, pos, kw, rank)
  if name == "matrix_norm" and (order := kw.get("ord", "").strip().replace(" ", "")) in _SINGULAR:
    return _singular(xp, order)
  reps = literal(_arg(pos, kw, 1, "reps" if name == "tile" else "repeats"))
  if name == "tile" and rank == 1 and isinstance(reps, int) and reps > 1:
    return f"write ml.concatenate([{', '.join([x] * reps)}], axis=0)"
  if name == "tile" and rank and rank > 1 and (isinstance(reps, int) and reps > 1 or isinstance(reps, tuple) and len(
      reps) == rank and all(isinstance(r, int) and r >= 1 for r in reps) and max(reps) > 1):
    reps, out = (1,) * (rank - 1) + (reps,) if isinstance(reps, int) else reps, x    # an int tiles the last axis
    for a, r in enumerate(reps):
      if r > 1:
        out = f"ml.concatenate([{out}] * {r}, axis={a})"
    return f"write {out} (jnp.tile's copies, joined through SMEM)"
  if name == "repeat" and rank == 1 and isinstance(reps, int) and reps > 1:
    return (f"write {_atom(x)}[ml.arange({shape[0] * reps}) // {reps}] (a gather from the register tensor, each element"
            f" {reps} times, as jnp.repeat)")
  axis = literal(_arg(pos, kw, 2, "axis"))
  if name == "repeat" and rank and rank > 2 and isinstance(reps, int) and reps > 1 and isinstance(axis, int) and (
      not isinstance(axis, bool) and -rank <= axis < rank):
    a = axis % rank
    return (f"write {_atom(x)}[{':, ' * a}ml.arange({shape[a] * reps}) // {reps}] (a gather from the register tensor,"
            f" each element {reps} times along axis {a}, as jnp.repeat)")
  if name == "repeat" and rank == 2 and isinstance(reps, int) and reps > 1 and axis in (0, 1, -1, -2):
    (m, n), a = shape, axis % 2       # copies along a new axis after the repeated one, merged into it
    part, out = (f"{xp}[:, None, :]", f"({m * reps}, {n})") if a == 0 else (f"{xp}[:, :, None]", f"({m}, {n * reps})")
    if a == 1 and reps % 32 == 0:     # (a broadcast along the new last axis, where it is 32 or more wide)
      return f"write ml.broadcast_to({part}, ({m}, {n}, {reps})).reshape{out} (jnp.repeat's order)"
    return f"write ml.concatenate([{part}] * {reps}, axis={a + 1}).reshape{out} (through SMEM, jnp.repeat's order)"
  return None


# the same functions looked up on ml (`ml.tril(x)`), or called where the operand's shape is unknown
NOT_YET = {
    "squeeze": "no ml.squeeze: drop the size-1 axes with x.reshape(shape) (or index them with 0)",
    "tril": "no ml.tril: keep the lower triangle by index, ml.where(ml.arange(n)[None, :] <= ml.arange(m)[:, None],"
            " x, 0) for an (m, n) x",
    "triu": "no ml.triu: keep the upper triangle by index, ml.where(ml.arange(n)[None, :] >= ml.arange(m)[:, None],"
            " x, 0) for an (m, n) x",
    "one_hot": "no ml.one_hot: compare with an index vector, (ids[:, None] == ml.arange(n)[None, :]).astype(jnp.float32)",
    "swapaxes": "no ml.swapaxes: x.T transposes a 2-D tensor, ml.transpose(x, axes) permutes a wider one",
    "moveaxis": "no ml.moveaxis: x.T transposes a 2-D tensor, ml.transpose(x, axes) permutes a wider one",
    "outer": "no ml.outer: a[:, None] * b[None, :] (broadcasting)",
    "dynamic_slice": "no ml.dynamic_slice: read the window from its ref, ref[ml.ds(start, size), ...]",
    "tile": "no ml.tile: ml.concatenate([x, x], axis=0) joins copies",
    "repeat": "no ml.repeat: read the tensor from its ref with a gather, ref[ml.arange(n * r) // r]",
}


def _call_args(text):
  """(positional, keyword) argument texts of a call as written (`jnp.zeros((8, 128), jnp.float32)`)."""
  try:
    call = ast.parse(text.strip(), mode="eval").body
  except SyntaxError:
    return None
  if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args):
    return None
  seg = lambda n: ast.get_source_segment(text.strip(), n)
  return [seg(a) for a in call.args], {k.arg: seg(k.value) for k in call.keywords if k.arg}


def static_numbers_hint(name, text) -> str:
  """For an array computed while tracing from static values (`np.exp(-np.arange(-2, 3) ** 2)`,
  `jnp.array([1.0, 2.0, 1.0])`), which a stencil means as its weights: Python numbers, indexed with
  static ints."""
  got = _call_args(text) if name in ("array", "asarray") else None
  pos = got[0] if got else []
  if pos and pos[0].lstrip().startswith(("[", "(")):
    return (f"for numbers known while tracing (a filter's taps), use the list itself, {pos[0]}, and index it"
            f" with static ints (w[k] in an ml.static_range loop)")
  return ("for numbers known while tracing (a filter's taps, a window's weights), use a list of Python"
          " numbers, [math.exp(-k * k / 2.0) for k in range(-2, 3)], and index it with static ints (w[k]"
          " in an ml.static_range loop), or pass a tuple as a constexpr")


def _int32(dtype):
  return dtype is None or dtype.replace(" ", "") in ("jnp.int32", "np.int32", "int32", "'int32'", "ml.int32")


def static_array_hint(name, text, shape=None) -> str | None:
  """The ml.* call for jnp.zeros/ones/full/empty/arange and lax.iota/broadcasted_iota written in a
  kernel (`text`: the call as written), with its own arguments; None where they are not plain
  (`shape`: the array the call returned, for a shape written as an expression, `x.shape`)."""
  got = _call_args(text)
  if got is None:
    return None
  pos, kw = got
  if name in ("zeros", "ones", "empty", "full"):
    shape = _arg(pos, kw, 0, "shape")
    value = "1" if name == "ones" else "0" if name != "full" else _arg(pos, kw, 1, "fill_value")
    dtype = _arg(pos, kw, 1 if name != "full" else 2, "dtype")
    if shape is None or value is None:
      return None
    if dtype is None:       # jnp's default: float32, or the fill value's kind
      v = literal(value)
      dtype = "jnp.int32" if name == "full" and isinstance(v, int) and not isinstance(v, bool) else "jnp.float32"
    return f"ml.zeros({shape}, {dtype})" if value == "0" and name != "full" else f"ml.full({shape}, {value}, {dtype})"
  if name == "arange" and not kw and 1 <= len(pos) <= 2:
    return f"ml.arange({', '.join(pos)}) (int32)"
  if name == "iota" and len(pos) == 2:
    cast = "" if _int32(pos[0]) else f".astype({pos[0]})"
    return f"ml.arange({pos[1]}){cast}"
  if name == "broadcasted_iota" and len(pos) == 3:
    written, dim = literal(pos[1]), literal(pos[2])
    shape = written if isinstance(written, tuple) else tuple(shape) if shape is not None else None
    if not (isinstance(shape, tuple) and len(shape) == 2 and dim in (0, 1, -1, -2)):
      return None
    m, n = shape
    vec = f"ml.arange({m})[:, None]" if dim % 2 == 0 else f"ml.arange({n})[None, :]"
    cast = "" if _int32(pos[0]) else f".astype({pos[0]})"
    return (f"ml.broadcast_to({vec}, {pos[1]}){cast} (or {vec}{cast} alone, which broadcasts against the"
            f" tile it meets)")
  return None


def made_by(b, v) -> str:
  """How the operand `v` of a padded_axis_hint was made: "full" (ml.zeros, ml.full: nothing to read),
  "carried" (a loop's carried value, an accumulator more often than not), else "read"."""
  if v is None:
    return "read"
  op = b.defining(v)
  return "carried" if op is None else "full" if type(op).__name__ == "Full" else "read"


def padded_for(b, names, values):
  """padded_axis_hint(n_big, n_small, name) for broadcast_shape's operands, worded by how each was made."""
  made = dict(zip(names, values))
  return lambda big, small, name, axis=None: padded_axis_hint(
      big, small, name, made=made_by(b, made.get(name)),
      shape=getattr(getattr(made.get(name), "type", None), "shape", None), axis=axis)


def padded_axis_hint(n_big: int, n_small: int, small: str, dtype_is_float: bool = True, made: str = "read",
                     shape=None, axis=None) -> str:
  """An operand of `n_small` elements along an axis where the other has `n_big`, a multiple of 32
  past it: the other is likely a narrow tile read padded (MG204's fix for 3 channels, a 7-wide
  filter: a window of 32 columns, masked), so this one is read padded the same way ("" otherwise)."""
  import re
  if not (n_big % 32 == 0 and n_small < n_big and n_small % 32 and n_big - n_small < 32 * (1 + n_small // 32)):
    return ""
  ref = re.match(r"\s*([A-Za-z_]\w*)\s*\[\s*\.\.\.\s*\]", small)
  other = "0.0" if dtype_is_float else "0"
  shape = tuple(shape) if shape and n_small in tuple(shape) else (n_small,)
  k = len(shape) - 1 - shape[::-1].index(n_small)           # the axis padded (the last of that size, or `axis`)
  k = axis if axis is not None and 0 <= axis < len(shape) and shape[axis] == n_small else k
  axes = "" if len(shape) == 1 else "[" + ", ".join(":" if j == k else "None" for j in range(len(shape))) + "]"
  window = lambda start: ", ".join(f"ml.ds({start}, {n_big})" if j == k else ":" for j in range(len(shape)))
  whole = ref is not None and ref.end() == len(small.rstrip())     # `y[...]`: the value has the ref's shape
  read = (f"{ref.group(1)}.at[{window(0) if whole else f'ml.ds(0, {n_big})'}].load(mask=ml.arange({n_big})"
          f"{axes if whole else ''} < {n_small}, other={other})"
          if ref else f"a window of {n_big} elements loaded with the mask ml.arange({n_big}) < {n_small}, other={other}")
  other_op = (f" if the other operand holds {n_small} elements padded to {n_big} (a masked load of a wider window, as"
              f" for a narrow tile),")
  if made == "read":
    return f"{other_op} read {small} padded the same way: {read}, then index it as before;"
  grown = shape[:k] + (n_big,) + shape[k + 1:]
  text = f"({grown[0]},)" if len(grown) == 1 else str(grown)
  grow = (f" make {small} {n_big} long too (ml.zeros({text}) for an accumulator, ml.full for another value) and"
          f" keep the extra {n_big - n_small} out of the result: store a window of {n_big} with the mask,"
          f" ref.at[{window('start')}].store(v, mask=ml.arange({n_big}){axes} < {n_small})")
  return other_op + grow + (";" if made == "full" else f"; where {small} is read from a ref, read it padded the same way: {read};")


def scalar_reshape_hint(name: str, shape) -> str:
  """For `s.reshape(1)` of a scalar `s` (one value, no tensor to reshape): a tensor of that shape holding
  it, ml.full; a store takes the scalar as it is."""
  if isinstance(shape, int) and not isinstance(shape, bool):
    shape = (shape,)
  if not (isinstance(shape, tuple) and all(isinstance(n, int) and not isinstance(n, bool) for n in shape)):
    return f"{name} is one value, not a tensor: make a tensor of it with ml.full(shape, {name}), or store it as it is"
  text = f"({shape[0]},)" if len(shape) == 1 else str(shape)
  return (f"{name} is one value, not a tensor: make a tensor of shape {text} holding it, ml.full({text}, {name});"
          f" a store takes it as it is (out[...] = {name} fills every element of out, out[0] = {name} one)")


SPLITS = ("split", "array_split", "hsplit", "vsplit", "chunk", "tensor_split")


def split_hint(name, args, shape=None, *, sizes=False) -> str | None:
  """jnp.split(v, k_or_indices, axis=0) (array_split, hsplit, vsplit; ml.split; torch's v.split(size, dim)
  with `sizes` and v.chunk(k, dim)) of a register tensor, as the static windows of it that the parts are:
  `v[:, :64], v[:, 64:]`. `args`: the call's arguments as written, the tensor first; None where the
  arguments are not static literals."""
  pos = [a.strip() for a in args if not (a.split("=", 1)[0].strip().isidentifier() and "=" in a
                                         and not a.split("=", 1)[1].startswith("="))]
  kw = {a.split("=", 1)[0].strip(): a.split("=", 1)[1].strip() for a in args if a.strip() not in pos}
  if len(pos) < 2 and not ({"indices_or_sections", "sections", "split_size_or_sections", "chunks"} & set(kw)):
    return None
  x = operand(pos[0])                 # (v - w)[:, :64]: its windows index it
  sec = literal(kw.get("indices_or_sections", kw.get("sections", kw.get("split_size_or_sections",
                kw.get("chunks", pos[1] if len(pos) > 1 else None)))))
  axis = {"hsplit": 1, "vsplit": 0}.get(name, literal(kw.get("axis", kw.get("dim", pos[2] if len(pos) > 2 else "0"))))
  rank = len(shape) if shape is not None else None
  if name == "hsplit" and rank == 1:
    axis = 0
  if not isinstance(axis, int) or isinstance(axis, bool) or rank is not None and not -rank <= axis < rank:
    return None
  if rank is not None:
    axis %= rank
  elif axis < -1:
    return None
  lead = "..., " if axis == -1 else ":, " * axis
  n = shape[axis] if rank is not None else None
  win = lambda a, b: f"{x}[{lead}{'' if a in (0, '0') else a}:{'' if b is None else b}]"
  if isinstance(sec, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in sec) and sec:
    cuts = [0, *sec, None]
    if sizes:                                   # torch's list of part sizes
      cuts = [sum(sec[:k]) for k in range(len(sec) + 1)]
  elif isinstance(sec, int) and not isinstance(sec, bool) and sec >= 1:
    if sizes:                                   # torch: parts of sec elements, the last one shorter
      if n is None:
        return f"the parts are windows of {x} along axis {axis}: {win(0, sec)}, {win(sec, 2 * sec)}, ..."
      cuts = [*range(0, n, sec), n]
    elif n is None:
      w = f"{x}.shape[{axis}] // {sec}"
      if sec > 4:
        return (f"the parts are windows of {x} along axis {axis}, [{win(f'i * ({w})', f'(i + 1) * ({w})')}"
                f" for i in ml.static_range({sec})]")
      cuts = [0, *(w if k == 1 else f"{k} * ({w})" for k in range(1, sec)), None]
    else:
      big, extra = divmod(n, sec)
      if extra and name in ("split", "hsplit", "vsplit"):
        return None                               # (jnp.split's own error: not an equal division)
      cuts = [k * big + min(k, extra) for k in range(sec + 1)]
  else:
    return None
  parts = [win(a, b if b != n else None) for a, b in zip(cuts, cuts[1:])]
  if len(parts) > 4:
    return f"the parts are windows of {x} along axis {axis}: {', '.join(parts[:2])}, ..., {parts[-1]}"
  return f"the parts are windows of {x} along axis {axis}: {', '.join(parts)}"


def window_hint(na, nb) -> str | None:
  """The fix for a whole ref's read meeting a window of another (`out.at[offs].store(x[...])`, the
  Triton habit of offsets applied to one pointer only): read the same window of it; None otherwise."""
  import re
  for whole, window in ((na, nb), (nb, na)):
    r, w = re.fullmatch(r"(\w+)\[\.\.\.\]", whole or ""), re.fullmatch(r"(\w+)\.at\[(.+)\]", window or "")
    if r and w and r.group(1) != w.group(1):
      return (f" {whole} reads all of {r.group(1)}: read the same window of it, {r.group(1)}.at[{w.group(2)}][...]"
              f" (or {r.group(1)}.at[{w.group(2)}].load(mask=..., other=...) where it may run past the end)")
  return None


def align_hint(a, na, b, nb) -> str | None:
  """The fix for operands of one rank where one holds a single axis of n elements on the wrong axis
  (`ml.sum(v, axis=1)[None, :]`, (1, 16), meeting its (16, 128) tile): that vector on the axis of the
  other's size n, in the user's words (`[:, None]` for `[None, :]`, its `.T` dropped); None otherwise."""
  if len(a) != len(b):
    return None
  for (low, name), high in (((a, na), b), ((b, nb), a)):
    big = [i for i, n in enumerate(low) if n != 1]
    if len(big) != 1 or not name:
      continue
    n, p = low[big[0]], big[0]
    to = [q for q, m in enumerate(high) if m == n and q != p]
    if len(to) != 1 or high[p] in (1, n):
      continue
    shape = tuple(n if k == to[0] else 1 for k in range(len(low)))
    flipped = {"[None, :]": "[:, None]", "[:, None]": "[None, :]"}
    text = (name[:-9] + flipped[name[-9:]] if len(low) == 2 and name[-9:] in flipped
            else name[:-2] if name.endswith(".T") and len(low) == 2 else None)
    if text is None:
      text = f"{name if name.isidentifier() else f'({name})'}.reshape{shape}"
    return f" {name} has its {n} elements on axis {p}, where the other operand has {high[p]}: put them on axis {to[0]}, {text} (shape {shape})"
  return None


def insert_axes_hint(a, na, b, nb, *, exact=False) -> str | None:
  """The fix for operands of different ranks that do not broadcast: the lower-rank one, named
  as the user wrote it, indexed with the axes it lacks (`m[:, None]` for the (8,) row maximum
  of an (8, 128) tile); None when the ranks agree or no insertion of axes fits. `exact`: the
  result must have the higher-rank shape itself (a value stored into a window of its elements)."""
  import itertools
  if len(a) == len(b):
    return None
  (low, name), high = ((a, na), b) if len(a) < len(b) else ((b, nb), a)
  for pos in itertools.combinations(range(len(high)), len(low)):
    if all(n == high[p] or not exact and (n == 1 or high[p] == 1) for n, p in zip(low, pos)) and (
        not exact or all(high[k] == 1 for k in range(len(high)) if k not in pos)):
      break
  else:
    return None
  index = "[" + ", ".join(":" if k in pos else "None" for k in range(len(high))) + "]"
  shape = tuple(low[pos.index(k)] if k in pos else 1 for k in range(len(high)))
  try:
    node = ast.parse(name, mode="eval").body
  except SyntaxError:
    node = None
  if node is None:
    return f" give {name} the axes it lacks: index it {index} (shape {shape})"
  expr = name if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({name})"
  return f" give {name} the axes it lacks: {expr}{index} (shape {shape})"


def outer_hint(a, na, b, nb, what) -> str | None:
  """For two masks of different lengths combined (a stencil's row and column masks, `(r >= 1) & (c < w)`):
  the (n, m) grid of both, the first as a column and the second as a row."""
  if len(a) != 1 or len(b) != 1 or not na or not nb or what not in ("&", "|", "^"):
    return None                   # (x + y of 128 and 256 elements is more likely a wrong length)

  def axis(name, index):
    try:
      node = ast.parse(name, mode="eval").body
    except SyntaxError:
      return None
    return (name if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({name})") + index
  x, y = axis(na, "[:, None]"), axis(nb, "[None, :]")
  if x is None or y is None:
    return None
  expr = f"{what}({x}, {y})" if what[:1].isalpha() else f"{x} {what} {y}"
  return (f" for the {a[0]} x {b[0]} grid of both (a mask of rows and columns), make {na} a column and {nb} a"
          f" row: {expr}")


# jnp's functions that ml.* has with the same arguments and meaning (frontend/ops/stacking.py, probe 46k), where no
# other hint comes first (jnp.pad keeps its stencil's: a vector padded by one on each side is no register tensor)
ML_SAME = ("stack", "split", "repeat", "expand_dims", "squeeze")


def ml_same_hint(name, pos, kw) -> str | None:
  """`jnp.stack([a, b], axis=-1)` called on register values: the same call on ml; `pos`, `kw`: the call's
  arguments as written (kw's values without their names, or with them)."""
  if name not in ML_SAME or not pos:
    return None
  named = [v if re.match(rf"\s*{k}\s*=", v) else f"{k}={v.strip()}" for k, v in kw.items()]
  return f"write ml.{name}({', '.join([*pos, *named])}) (jnp.{name}'s meaning, on register tensors)"
