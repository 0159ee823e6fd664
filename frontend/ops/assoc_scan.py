"""`ml.associative_scan`: an inclusive scan with the user's own combine function, as `jax.lax.associative_scan`
(`ml.associative_scan(fn, elems, reverse=False, axis=0)`) and Triton's `tl.associative_scan`
(`ml.associative_scan(input, axis, combine_fn, reverse=False)`): a selective scan's `h = a * h + b` as pairs
combined `(a1 * a2, a2 * b1 + b2)`, a segmented sum with reset flags, a running argmax.

No op of its own: ceil(log2(n)) Hillis and Steele steps, each combining every element with the one 2**k places
before it (after it, reversed), that copy made by `ml.roll` (through an SMEM scratch) and the first 2**k elements
kept by an `ml.where` on their index; the combine is traced at each step as the @ml.inline helper (or lambda, or
def of the kernel's body, or ml.* function) it is. The combine must be associative, as for jax and Triton; its
first argument is the earlier part of the sequence (the later one, reversed: jax's `reverse=True`, the scan of the
flipped elements flipped back)."""
from __future__ import annotations

from .. import errors as E
from ..types import resolve
from . import elementwise as ew
from .base import builtin, check_register_value, is_tensor, kind_of, shown
from .roll import roll_tensor
from .shape import reshape_

USAGE = ("ml.associative_scan(combine, (a, b), axis=1) (jax's order: the function first, then the elements; or"
         " Triton's, ml.associative_scan((a, b), 1, combine)), with combine an @ml.inline helper, a lambda or a def"
         " of the kernel's body taking two elements, each a tuple like (a, b), and giving one")


# jnp's, numpy's, lax's and operator's binary functions a scan combines with (`lax.associative_scan(jnp.add, x)`)
LIBRARY = {"add": ew.BinOp.ADD, "multiply": ew.BinOp.MUL, "mul": ew.BinOp.MUL, "maximum": ew.BinOp.MAX,
           "max": ew.BinOp.MAX, "minimum": ew.BinOp.MIN, "min": ew.BinOp.MIN, "bitwise_or": ew.BinOp.OR,
           "or_": ew.BinOp.OR, "logical_or": ew.BinOp.OR, "bitwise_and": ew.BinOp.AND, "and_": ew.BinOp.AND,
           "logical_and": ew.BinOp.AND, "bitwise_xor": ew.BinOp.XOR, "xor": ew.BinOp.XOR}


def _traced(f) -> bool:
  """Whether the kernel traces calls of `f` itself: a helper, a lambda or def of the body, an ml.* function."""
  from ..inline import LocalFunction
  from ..language import Inline
  from .base import Builtin
  import functools
  from ..jax_wrapped import plain_helper
  while isinstance(f, functools.partial):
    f = f.func
  return isinstance(f, (Inline, LocalFunction, Builtin)) or plain_helper(f) is not None   # (a plain one: probe 52b)


def _library(f):
  """The BinOp of a library binary function (jnp.add, np.maximum, lax.max, operator.mul), else None."""
  mod = getattr(f, "__module__", None) or ("numpy" if type(f).__name__ == "ufunc" else "")
  if not any(mod == m or mod.startswith(m + ".") for m in ("jax", "numpy", "operator", "_operator")):
    return None
  return LIBRARY.get(getattr(f, "__name__", ""))


def _array_function(f) -> bool:
  """jnp.logaddexp, np.fmax, lax.max, jnp.gcd, ...: a jax or NumPy function the kernel calls as its own call of it
  (its form, or its MG003 at the scan, probe 56f)."""
  mod = getattr(f, "__module__", None) or ""
  return callable(f) and (mod.split(".")[0] in ("jax", "numpy") or type(f).__name__ == "ufunc")


def _arity(f):
  """How many positional arguments a helper takes (None: any number, or not known)."""
  import functools
  import inspect
  from ..inline import LocalFunction
  if isinstance(f, functools.partial) or not _traced(f):
    return None
  try:
    sig = f.signature if isinstance(f, LocalFunction) else inspect.signature(f.fn)
  except (TypeError, ValueError, AttributeError):
    return None
  kinds = [p.kind for p in sig.parameters.values()]
  if inspect.Parameter.VAR_POSITIONAL in kinds:
    return None
  return sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)


def _function_like(f) -> bool:
  return _traced(f) or (callable(f) and not isinstance(f, (tuple, list, dict)) and not hasattr(f, "type"))


def _bind(cx, args, kwargs):
  """(fn, elems, axis, reverse, flat) from jax's or Triton's argument order; `flat`: the combine takes the
  elements' parts spread (Triton's combine_fn(a1, b1, a2, b2)) rather than two tuples (jax's fn(x, y))."""
  kw = dict(kwargs)
  unknown = set(kw) - {"fn", "elems", "axis", "reverse", "combine_fn", "input"}
  if unknown:
    raise E.KernelTypeError(f"ml.associative_scan() got an unexpected keyword argument {sorted(unknown)[0]!r}",
                            cx.loc, hint=USAGE)
  args = list(args)
  if "fn" in kw or "elems" in kw or (args and _function_like(args[0])):   # jax: (fn, elems, reverse=False, axis=0)
    names, defaults, flat = ("fn", "elems", "reverse", "axis"), {"reverse": False, "axis": 0}, False
  else:                                                                  # Triton: (input, axis, combine_fn, reverse)
    names, defaults, flat = ("input", "axis", "combine_fn", "reverse"), {"reverse": False}, True
  if len(args) > len(names):
    raise E.KernelTypeError(f"ml.associative_scan() takes at most {len(names)} arguments ({len(args)} given)",
                            cx.loc, hint=USAGE)
  got = dict(defaults)
  for n, a in zip(names, args):
    if n in kw:
      raise E.KernelTypeError(f"ml.associative_scan() got multiple values for argument {n!r}", cx.loc, hint=USAGE)
    got[n] = a
  got.update(kw)
  fn = got.get("fn", got.get("combine_fn"))
  elems = got.get("elems", got.get("input"))
  if fn is None or elems is None or "axis" not in got:
    missing = "the combine function" if fn is None else "the elements" if elems is None else "axis"
    raise E.KernelTypeError(f"ml.associative_scan() is missing {missing}", cx.loc, hint=USAGE)
  if not _traced(fn) and _library(fn) is not None:
    fn = _library(fn)
  elif not _traced(fn) and not _array_function(fn):
    raise E.KernelTypeError(
        "ml.associative_scan's combine function must be an @ml.inline helper, a lambda or def of the kernel's"
        " body, or an ml.* function, got " + (f"{fn.__name__}, a Python function it cannot trace" if callable(fn)
                                               and hasattr(fn, "__name__") else shown(fn)),
        cx.loc, hint="decorate it with @ml.inline (its body is traced at each step of the scan): " + USAGE)
  return fn, elems, got["axis"], got["reverse"], flat


def _flatten(x):
  """(leaves, rebuild) of a pytree of tuples, lists and dicts (a dict's leaves by sorted key, as jax's); rebuild is
  None for a single leaf."""
  if isinstance(x, dict):
    keys = sorted(x)
    subs = [_flatten(x[k]) for k in keys]
  elif isinstance(x, (tuple, list)):
    keys, subs = None, [_flatten(v) for v in x]
  else:
    return [x], None
  counts = [len(leaves) for leaves, _ in subs]

  def rebuild(leaves):
    parts, at = [], 0
    for (_, sub), n in zip(subs, counts):
      parts.append(leaves[at] if sub is None else sub(leaves[at:at + n]))
      at += n
    if keys is not None:
      return dict(zip(keys, parts))
    return type(x)(*parts) if hasattr(x, "_fields") else type(x)(parts)      # (a namedtuple by its fields)
  return [leaf for leaves, _ in subs for leaf in leaves], rebuild


def _parts(cx, elems):
  """The elements' tensors, and how to rebuild the structure the user passed from them (tuples, lists and dicts
  nested as in jax's pytrees)."""
  parts, rebuild = _flatten(elems)
  if not parts:
    raise E.KernelTypeError("ml.associative_scan of no elements", cx.loc, hint=USAGE)
  for p in parts:
    check_register_value(cx, p, "ml.associative_scan")
    if not is_tensor(p):
      raise E.KernelTypeError(f"ml.associative_scan scans register tensors, got {kind_of(p)}", cx.loc,
                              hint="read it into registers first (x[...]); a scalar's scan is the scalar itself")
  shape = parts[0].type.shape
  if any(p.type.shape != shape for p in parts):
    raise E.ShapeMismatchError(
        "ml.associative_scan's elements must have one shape, got "
        + ", ".join(str(p.type.shape) for p in parts), cx.loc,
        hint="broadcast them first: ml.broadcast_to(b, a.shape)")
  return parts, rebuild


def _combine(cx, fn, flat, rebuild, earlier, later, like):
  """fn applied to two elements (lists of parts), its result checked against `like` (the parts)."""
  if isinstance(fn, ew.BinOp):                 # jnp.add: elementwise, each part with its own
    out = [ew.binary(cx, fn, e, x) for e, x in zip(earlier, later)]
    out = out[0] if rebuild is None else rebuild(out)
  elif flat:
    out = cx.invoke(fn, [*earlier, *later])
  elif rebuild is None:
    out = cx.invoke(fn, [earlier[0], later[0]])
  else:
    out = cx.invoke(fn, [rebuild(earlier), rebuild(later)])
  outs = _flatten(out)[0]
  name = fn.name.lower() if isinstance(fn, ew.BinOp) else getattr(getattr(fn, "fn", fn), "__name__", "the combine function")
  if len(outs) != len(like):
    raise E.KernelTypeError(
        f"ml.associative_scan: {name} gives {len(outs)} value{'s' if len(outs) != 1 else ''} for"
        f" {len(like)} element part{'s' if len(like) != 1 else ''}", cx.loc,
        hint=f"return one value for each part of the elements, in their order ({USAGE})")
  fixed = []
  for o, p in zip(outs, like):
    if not is_tensor(o) or o.type.shape != p.type.shape or resolve(o.type.dtype) != resolve(p.type.dtype):
      what = kind_of(o) if not is_tensor(o) else f"{o.type.shape} {resolve(o.type.dtype)}"
      raise E.KernelTypeError(
          f"ml.associative_scan: {name} must give each part in its own shape and dtype,"
          f" {p.type.shape} {resolve(p.type.dtype)}, got {what}", cx.loc,
          hint="convert inside the combine, (...).astype(a.dtype), or convert the elements before the scan")
    fixed.append(o)
  return fixed


@builtin
def associative_scan(cx, *args, **kwargs):
  """`jax.lax.associative_scan(fn, elems, reverse=False, axis=0)` of register tensors (one, or a tuple or list
  of tensors of one shape), also in Triton's order `(input, axis, combine_fn, reverse=False)`, whose combine
  takes the parts spread, `combine(a1, b1, a2, b2)`. Inclusive; `fn`'s first argument is the earlier element."""
  fn, elems, axis, reverse, flat = _bind(cx, args, kwargs)
  parts, rebuild = _parts(cx, elems)
  # (Triton's combine takes the parts spread, jax's two tuples; either order takes either combine, by its arity)
  arity = _arity(fn)
  if len(parts) == 1 or arity == 2:
    flat = False
  elif arity == 2 * len(parts):
    flat = True
  shape = parts[0].type.shape
  rank = len(shape)
  if not isinstance(axis, int) or isinstance(axis, bool):
    raise E.KernelTypeError(f"ml.associative_scan: axis must be a static int, got {shown(axis)}", cx.loc,
                            hint=f"axis is a static int in [-{rank}, {rank})")
  if not -rank <= axis < rank:
    raise E.IndexOutOfBoundsError(f"ml.associative_scan: axis {axis!r} is out of range for a tensor of rank"
                                  f" {rank}", cx.loc, hint=f"axes run from {-rank} to {rank - 1}")
  if not isinstance(reverse, bool):
    raise E.KernelTypeError(f"ml.associative_scan: reverse is a static bool, got {shown(reverse)}", cx.loc,
                            hint="reverse=True scans from the end")
  return combined_scan(cx, fn, parts, rebuild, axis % rank, reverse, flat)


def combined_scan(cx, fn, parts, rebuild, axis, reverse, flat=False):
  """The Hillis and Steele steps of `fn` (a BinOp, or the user's combine) over `parts` along a static axis (also
  ml.cumsum's of 64-bit integers: scan.py)."""
  shape = parts[0].type.shape
  rank = len(shape)
  n = shape[axis]
  padded = _padded(cx, parts)         # (an odd-shaped read computed padded: its own length, and a guard)
  true_n = padded[0][axis] if padded else n
  from .elementwise_fns import arange
  idx = arange.rule(cx, n)
  if rank > 1:
    idx = reshape_(cx, idx, tuple(n if a == axis else 1 for a in range(rank)))
  s = 1
  while s < true_n:
    with padded[1] if padded else _nothing():
      moved = [_same_padding(cx, roll_tensor(cx, p, -s if reverse else s, axis), p) for p in parts]
    # (reversed, the element s places after is the earlier part of the flipped sequence: it comes first too)
    new = _combine(cx, fn, flat, rebuild, moved, parts, parts)
    with padded[1] if padded else _nothing():
      # (padded: the padding at the axis's end rolls in before the first s elements, which keep their own; from the
      # end, the elements whose partner lies s places on, inside the unpadded length, take it)
      keep = ew.compare(cx, ew.CmpOp.LT, idx, true_n - s) if reverse else ew.compare(cx, ew.CmpOp.GE, idx, s)
      parts = [_same_padding(cx, ew.where_(cx, keep, c, p), p) for c, p in zip(new, parts)]
    s *= 2
  return parts[0] if rebuild is None else rebuild(parts)


class _nothing:
  def __enter__(self):
    return None

  def __exit__(self, *a):
    return False


def _padded(cx, parts):
  """(the parts' unpadded shape, a context in which ops take them) where they are computed padded (an odd-shaped
  read, frontend/ops/padded_tiles.py), else None; a padded trace is given up where only some of them are."""
  from .padded_tiles import PadAbort, allowed
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is None or getattr(cx.b, "pad_ok", 0):
    return None
  shapes = {pads.get(p.id) for p in parts}
  if shapes == {None}:
    return None
  held = {tuple(p.type.shape) for p in parts if p.id in pads}
  if len(shapes - {None}) == 1 and len(held) == 1 and all(tuple(p.type.shape) in held for p in parts):
    own = next(iter(shapes - {None}))     # (a part made at the padded shape, `ml.zeros_like(v)` of a padded v: its
    for p in parts:                       # padding is never read for the real part; probe 48a)
      pads.setdefault(p.id, own)
    shapes = {own}
  if len(shapes) != 1:
    raise PadAbort("associative_scan")
  return shapes.pop(), allowed(cx)


def _same_padding(cx, y, like):
  """`y` recorded padded as `like` is (a roll or select of padded parts)."""
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is not None and like.id in pads and y is not like:
    pads[y.id] = pads[like.id]
  return y
