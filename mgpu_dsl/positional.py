"""Constexprs passed by position after the inputs, as a Triton kernel takes them (`scale(x, 64)`), so
that `jax.jit(kernel, static_argnums=(1,))(x, 64)` works as it does for any Python function.

A value after the inputs is a constexpr only where the inputs' count is fixed (the out_shape and grid
callables, or a static out_shape, decide it): otherwise a Python number there could be a 0-d input, and
the call is refused with the fix (pass it by keyword). The constexprs that may come by position are the
kernel's, in the def's order, up to the first one a functools.partial binds (Python's partial makes
that one and those after it keyword-only) or the first without a default after one with a default (a
positional parameter's rule). The kernel's signature (signature.signature) shows them as positional, which
is what jax.jit reads to check `static_argnums`; the others stay keyword-only. A value of another kind
than its constexpr's default (3.0 where the default is jnp.float32, "relu" where it is 2.0) was meant for
another constexpr: the call is refused with the binding said and the values by keyword in the hint.
"""
from __future__ import annotations

from .frontend import errors as E


def names(pk, bounds: tuple[int, int], bound=None, skip=()) -> list[str]:
  """The constexprs a call may pass by position after its inputs; none where the input count is not fixed.
  `skip`: constexprs the call cannot pass at all (an autotuned kernel's tuned ones: its signature drops them)."""
  lo, hi = bounds
  if lo != hi:
    return []
  out, defaulted = [], False
  for c in (c for c in pk.constexpr_params if c not in skip):
    if c in (bound or {}) or defaulted and c not in pk.defaults:
      break
    defaulted = defaulted or c in pk.defaults
    out.append(c)
  return out


def _is_constexpr_value(v) -> bool:
  """Whether `v`, past the inputs, is a constexpr's value: not an array, a NumPy scalar (taken as a constexpr
  passed by keyword is), or the weak 0-d array jax.jit makes of a Python number it traced (check_constexprs
  says to name it static). A jax array past the inputs is more likely an input the out_shape and grid
  callables leave out, or an output passed Triton's way: check_count reports those."""
  import numpy as np
  from .calling import is_array_like, is_weak
  return not is_array_like(v) or isinstance(v, np.generic) or is_weak(v) and tuple(getattr(v, "shape", (1,))) == ()


def place(kernel, args: tuple, constexprs: dict, given: dict, loc, skip=()) -> tuple[tuple, dict]:
  """(args, constexprs) with the values past the inputs moved to the constexprs they stand for.
  `given`: the constexprs the call passed by keyword (a partial's bound values are not among them)."""
  pk = kernel.parsed
  bounds = kernel._input_bounds(pk)
  hi = bounds[1]
  if len(args) <= hi or bounds[0] != bounds[1]:
    return args, constexprs
  extra = args[hi:]
  allowed = names(pk, bounds, kernel._bound, skip)
  if not all(map(_is_constexpr_value, extra)) or not allowed:
    return args, constexprs          # an input too many, an output passed: check_count reports it
  if not _outputs_fit(kernel, pk, args[:hi], {**constexprs, **dict(zip(allowed, extra))}):
    return args, constexprs      # add_kernel(x, y, x.size, BLOCK_SIZE=1024): Triton's n_elements, which the count explains
  name = pk.tree.name
  if len(extra) > len(allowed):
    from .calling import describe, source_repr
    rest = extra[len(allowed):]
    placed = ", ".join(f"{c}={source_repr(v)}" for c, v in zip(allowed, extra))
    others = [c for c in pk.constexpr_params if c not in allowed and c not in given]
    if len(rest) == 1 and isinstance(rest[0], bool) and "interpret" not in given:
      hint = f"pass interpret by keyword: {name}(..., {placed}, interpret={rest[0]})"
    elif others:
      hint = f"pass the others by keyword: {name}(..., {placed}, {', '.join(f'{c}=...' for c in others[:len(rest)])})"
    else:
      hint = f"{name} takes no more constexprs: {name}(..., {placed})"
    s = "s" if len(allowed) > 1 else ""
    raise E.SignatureError(
        f"{name} was given {len(extra)} values after its {hi} input{'s' if hi != 1 else ''}"
        f" ({', '.join(describe(v) for v in extra)}), but takes {len(allowed)} constexpr{s} by position"
        f" ({', '.join(allowed)})", loc, hint=hint)
  for c, v in zip(allowed, extra):
    if isinstance(v, bool) and c in pk.defaults and not isinstance(pk.defaults[c], bool):
      raise E.SignatureError(          # k(x, True): meant as interpret=True, more likely than a float's True
          f"{name}: the bool {v} after the inputs would be constexpr {c} (default {pk.defaults[c]!r}), and"
          f" interpret is passed by keyword", loc, hint=f"{name}(..., interpret={v})")
  twice = [c for c in allowed[:len(extra)] if c in given]
  if twice:
    raise E.SignatureError(
        f"{name}: constexpr {twice[0]} is given twice, by position (the value after the"
        f" {hi} input{'s' if hi != 1 else ''}) and by keyword", loc,
        hint=f"drop one: {name}(..., {twice[0]}=...) or the value by position")
  if any(c in pk.defaults and _misfit(v, pk.defaults[c]) for c, v in zip(allowed, extra)):
    raise _misplaced(pk, name, hi, allowed, extra, given, loc)
  constexprs = {**constexprs, **dict(zip(allowed, extra))}
  _callables_take(kernel, pk, args[:hi], constexprs, allowed[:len(extra)], loc)
  return tuple(args[:hi]), constexprs


def _callables_take(kernel, pk, inputs, constexprs: dict, placed: list, loc) -> None:
  """The out_shape and grid callables, given the constexprs a call passed by position: where one fails (in
  its own code, a TypeError or the like), the values were likely in another order than the def's
  (head(x, 128, jnp.float32) for dt, n), so the error is at the call and says how they were bound; it was
  the callable's failure at the decorator, with the hint "out_shape is called with the kernel's inputs"."""
  import jax
  from .calling import source_repr
  from .meta_calls import _on_arrays, parameters
  meta = {**{c: pk.defaults[c] for c in pk.constexpr_params if c in pk.defaults}, **constexprs}
  for what in ("out_shape", "grid"):
    f = getattr(kernel, what)
    if not callable(f) or hasattr(f, "shape"):
      continue
    try:
      params = parameters(f)
    except (TypeError, ValueError):
      continue
    if any(p.kind == p.VAR_KEYWORD for p in params):
      kw = meta
    else:
      kw = {k: v for k, v in meta.items() if k in {p.name for p in params}}
    if not any(c in kw for c in placed) or any(
        p.kind == p.KEYWORD_ONLY and p.default is p.empty and p.name not in meta for p in params):
      continue                  # (a constexpr still to come: mg.autotune's, or one missing, said later)
    try:
      with jax.ensure_compile_time_eval():
        _on_arrays(f, tuple(inputs), kw)
    except E.KernelError:
      continue                  # (ml.cdiv(n, 0): its own words, when the call goes on)
    except Exception as e:
      from .value_hints import reads_values
      if reads_values(e):
        continue                # (a callable reading an input's values: its own error says so)
      name = pk.tree.name
      shown = ", ".join(f"{c}={source_repr(constexprs[c])}" for c in placed)
      ins = ", ".join(pk.ref_params[:len(inputs)])
      them = "them" if len(placed) > 1 else "it"
      raise E.SignatureError(
          f"{name}: the value{'s' if len(placed) > 1 else ''} after the input{'s' if len(inputs) != 1 else ''}"
          f" {'were' if len(placed) > 1 else 'was'} taken by position as {shown} (constexprs bind by position in"
          f" the def's order: {', '.join(names(pk, kernel._input_bounds(pk), kernel._bound))}), and the {what}"
          f" callable failed with {them}: {type(e).__name__}: {e}", loc,
          notes=(f"{pk.option_loc(what)}: the {what} callable",),
          hint=f"check the order, or pass {them} by keyword: {name}({ins}, {', '.join(c + '=...' for c in placed)})"
      ) from None


def _kind(v) -> str | None:
  """What a constexpr's value is, as far as binding by position can tell: "a dtype", "a number", "a string", or
  None (anything else: a function, a tuple, None; not compared)."""
  import numbers
  import numpy as np
  from .frontend.types import DType
  if isinstance(v, str):
    return "a string"
  if isinstance(v, DType):             # ml.float32
    return "a dtype"
  if isinstance(v, (numbers.Number, np.generic)):
    return "a number"
  try:
    if isinstance(v, np.dtype) or isinstance(v, type) and np.dtype(v).kind != "O":
      return "a dtype"
  except TypeError:
    pass
  return None


def _misfit(v, default) -> bool:
  """Whether `v`, bound by position to a constexpr whose default is `default`, is another kind of value (3.0
  where jnp.float32 is the default, "relu" where 2.0 is): the value was meant for another constexpr. A dtype's
  name ("float16") is a dtype."""
  import numpy as np
  got, want = _kind(v), _kind(default)
  if got is None or want is None or got == want:
    return False
  if got == "a string" and want == "a dtype":
    try:
      return np.dtype(v).kind == "O"
    except TypeError:
      return True
  return True


def _misplaced(pk, name: str, hi: int, allowed: list, extra: tuple, given: dict, loc) -> E.SignatureError:
  """`name(x, 3.0)` where 3.0 binds the constexpr dt (default jnp.float32) by position: the value was meant for
  another constexpr (k=2.0), which the hint names by keyword."""
  from .calling import source_repr as plain_repr
  from .frontend.types import DType
  source_repr = lambda x: f"ml.{x.value}" if isinstance(x, DType) else plain_repr(x)
  d = pk.defaults
  c, v = next((c, v) for c, v in zip(allowed, extra) if c in d and _misfit(v, d[c]))
  target = {}                            # each value's constexpr: its own, or the first other of its kind
  for ci, vi in zip(allowed, extra):
    fits = ci not in d or not _misfit(vi, d[ci])
    target[ci] = ci if fits else next((o for o in pk.constexpr_params if o not in given and o in d and o != ci
                                       and _kind(d[o]) == _kind(vi) and o not in target.values()), None)
  ins = ", ".join(pk.ref_params[:hi])
  if None not in target.values() and len(set(target.values())) == len(target):
    shown = ", ".join(f"{target[ci]}={source_repr(vi)}" for ci, vi in zip(allowed, extra))
    hint = f"pass {'it' if len(extra) == 1 else 'them'} by keyword: {name}({ins}, {shown})"
  else:
    hint = (f"{c} takes {_kind(d[c])} ({name}({ins}, {c}={source_repr(d[c])})): pass each value by keyword, to the"
            f" constexpr it is for")
  s = "s" if hi != 1 else ""
  return E.SignatureError(
      f"{name}: {source_repr(v)}, a value after the input{s}, was taken as constexpr {c} by position (constexprs"
      f" bind by position in the def's order: {', '.join(allowed)}), and {c} takes {_kind(d[c])} (its default"
      f" is {source_repr(d[c])})", loc, hint=hint)


def _outputs_fit(kernel, pk, inputs, constexprs) -> bool:
  """Whether out_shape describes as many outputs as the ref parameters after `inputs` (else a value after them
  is no constexpr but a ref parameter passed, Triton's `n_elements`: the count's error explains it). True where
  out_shape cannot say (its own error comes later)."""
  import jax
  out = kernel.out_shape
  try:
    if callable(out) and not hasattr(out, "shape"):
      from .meta_calls import call_with_meta
      meta = {**{c: pk.defaults[c] for c in pk.constexpr_params if c in pk.defaults}, **constexprs}
      out = call_with_meta(out, tuple(inputs), meta, "out_shape", None, pk.ref_params[:len(inputs)])
    return len(jax.tree.leaves(out)) == len(pk.ref_params) - len(inputs)
  except Exception:
    return True


def too_many(pk, bounds: tuple[int, int], bound, n_extra: int) -> str:
  """Why values past the inputs cannot be constexprs by position (the end of check_count's message)."""
  allowed = names(pk, bounds, bound)
  if bounds[0] != bounds[1]:
    return (": the out_shape and grid callables do not fix how many inputs it takes (they take different"
            " numbers, or any number), so a value after the inputs could be an input; pass constexprs by keyword")
  if not allowed or n_extra <= len(allowed):     # (or out_shape leaves a ref parameter after the inputs)
    return ": pass constexprs by keyword"
  return (f": {pk.tree.name} takes at most {len(allowed)} constexpr{'s' if len(allowed) != 1 else ''} by position"
          f" ({', '.join(allowed)}); pass the others by keyword")


def refuse_vmap(name: str, given: dict, ins: list, n_args: int):
  """jax.vmap(kernel)(x, 64): JAX would map the constexpr 64 along axis 0 (its error: the rank of 64)."""
  from .bench import caller_loc
  from .vmap_keywords import _text
  shown = ", ".join(f"{k}={_text(v)}" for k, v in given.items())
  axes = ", ".join(["0"] * len(ins) + ["None"] * (n_args - len(ins)))
  them = "them" if len(given) > 1 else "it"
  raise E.SignatureError(
      f"jax.vmap maps every positional argument along axis 0 unless its in_axes says None, and {name}'s"
      f" constexpr{'s' if len(given) > 1 else ''} {shown} {'are' if len(given) > 1 else 'is'} passed by position",
      caller_loc(), hint=f"leave {them} unmapped, jax.vmap({name}, in_axes=({axes}))(...), or bind {them} before"
                         f" mapping: jax.vmap(functools.partial({name}, {shown}))({', '.join(ins) or '...'})")


def refuse_jit(name: str, given: dict, how: str = "jax.jit"):
  """jax.jit(kernel)(x, "relu"), jax.checkpoint(kernel)(x, "relu") (`how`): JAX would fail to make an
  abstract array of the string."""
  from .bench import caller_loc
  from .vmap_keywords import _text
  shown = ", ".join(f"{k}={_text(a)}" for k, (_, a) in given.items())
  nums = ", ".join(str(i) for i, _ in given.values()) + ("," if len(given) == 1 else "")
  them = "them" if len(given) > 1 else "it"
  raise E.SignatureError(
      f"{how} traces every argument not named static, and {name}'s constexpr{'s' if len(given) > 1 else ''}"
      f" {shown}, passed by position, {'are' if len(given) > 1 else 'is'} not an array it can trace", caller_loc(),
      hint=f"name {them} static, {how}({name}, static_argnums=({nums})), or bind {them} first:"
           f" {how}(functools.partial({name}, {shown}))")
