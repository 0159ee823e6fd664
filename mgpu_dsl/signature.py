"""The kernel's call signature (`inspect.signature(kernel)`: what help() shows, and what JAX reads), and jax.jit's
`static_argnums`, `static_argnames` and `donate_argnums` checked against it; the parameters of callables
(out_shape's and grid's arities, the inputs a kernel takes) and of Pallas-style partial kernel functions.

JAX checks those against the function's signature when jax.jit is called, and refuses one that names no
parameter with its own ValueError ("Jitted function has static_argnums=(2,), but only accepts 2 positional
arguments"), which does not say why the kernel takes fewer (its constexprs are keyword-only where the out_shape
and grid callables do not fix how many inputs it takes, positional.py) nor what to write instead; one naming an
input failed at every call ("Non-hashable static arguments"). jax.jit reads the signature there
(KernelFunction.__signature__), so the same check runs first, with JAX's rules, and the mistake is a
SignatureError at the user's jax.jit call, with the fix."""
from __future__ import annotations

import difflib
import functools
import inspect
import math
import sys
import threading
import types

from .frontend import errors as E
from .frontend import language as L

_BUSY = threading.local()        # (the check reads the jitted function's signature: the kernel's again)
P = inspect.Parameter


def signature(pk, out_shape, grid, bound=None) -> inspect.Signature:
  """`(inputs..., *, constexprs..., interpret=None)`: the call users make (`bound`: the values a
  functools.partial kernel function binds, shown as defaults)."""
  P = inspect.Parameter
  # Exact when out_shape and grid decide it; otherwise the largest count they allow
  # (one output: the common case).
  defaults = {**pk.defaults, **(bound or {})}
  if getattr(pk, "vararg", None):       # def k(*refs): the inputs the named refs leave, then the constexprs
    params = [P(r, P.POSITIONAL_ONLY, annotation="jax.Array") for r in pk.ref_params]
    params += [P(pk.vararg, P.VAR_POSITIONAL)]
    params += [P(c, P.KEYWORD_ONLY, annotation=L.constexpr, default=defaults.get(c, P.empty))
               for c in pk.constexpr_params]
    params.append(P("interpret", P.KEYWORD_ONLY, default=None, annotation="bool | None"))
    from .vmap_keywords import KernelSignature
    sig = KernelSignature(params)
    sig.kernel_name = pk.tree.name
    return sig
  bounds = input_bounds(pk, out_shape, grid)
  n_in = max(0, bounds[1])
  params = [P(r, P.POSITIONAL_OR_KEYWORD, annotation="jax.Array") for r in pk.ref_params[:n_in]]
  from .positional import names            # (those a call may pass by position: static_argnums works)
  by_position = names(pk, bounds, bound)
  params += [P(c, P.POSITIONAL_OR_KEYWORD if c in by_position else P.KEYWORD_ONLY, annotation=L.constexpr,
               default=defaults.get(c, P.empty)) for c in pk.constexpr_params]
  params.append(P("interpret", P.KEYWORD_ONLY, default=None, annotation="bool | None"))
  from .vmap_keywords import KernelSignature      # (constexprs through jax.vmap: a SignatureError)
  sig = KernelSignature(params)
  sig.kernel_name = pk.tree.name
  return sig


def fallback_signature(name="the kernel") -> inspect.Signature:
  from .vmap_keywords import KernelSignature
  P = inspect.Parameter
  sig = KernelSignature([P("inputs", P.VAR_POSITIONAL),
                         P("interpret", P.KEYWORD_ONLY, default=None, annotation="bool | None"),
                         P("constexprs", P.VAR_KEYWORD)])
  sig.kernel_name = name
  return sig


def check(kernel) -> None:
  """Raise SignatureError where jax.jit is being given `kernel` (or a function whose signature is read from
  it: a functools.partial, an autotuned kernel) with static or donated arguments its signature does not have.
  Anything else this check might raise is dropped: JAX's own check follows."""
  try:
    _check(kernel)
  except E.KernelError:
    raise
  except Exception:
    pass


def _check(kernel) -> None:
  if getattr(_BUSY, "on", False):
    return
  frame = _jit_frame()
  if frame is None:
    return
  loc = frame.f_locals
  _BUSY.on = True
  try:
    sig = inspect.signature(loc["fun"])
    bound = dict(getattr(loc["fun"], "keywords", None) or {})     # (a functools.partial's)
  except Exception:         # (JAX's own check reads it too, and reports what it finds)
    return
  finally:
    _BUSY.on = False
  how = _call_text(kernel, loc["fun"])
  try:
    for what in ("static_argnums", "donate_argnums"):
      nums = _all_of(loc.get(what), int)
      if nums:
        _check_nums(kernel, sig, what, nums, how, frame, bound)
    for what in ("static_argnames", "donate_argnames"):
      names = _all_of(loc.get(what), str)
      if names:
        _check_names(kernel, sig, what, names, how, frame)
  except E.SignatureError as e:
    if _made_by(frame, ("make_jaxpr", "make_jaxpr_f")):     # jax.make_jaxpr(kernel, static_argnums=...): its jit
      e.message = e.message.replace("jax.jit(", "jax.make_jaxpr(", 1)
      if "static_argnames" in e.hint:      # (make_jaxpr takes static_argnums alone)
        pk = kernel.parsed
        shown = ", ".join(f"{c}=..." for c in [c for c in pk.constexpr_params if c not in pk.defaults]
                          or pk.constexpr_params[:1])
        e.hint = f"bind the constexprs first: jax.make_jaxpr(functools.partial({kernel.__name__}, {shown}))"
    raise


def _made_by(frame, apis: tuple) -> bool:
  """Whether a JAX function of those named `apis` (make_jaxpr's) called the jax.jit at `frame`."""
  import jax
  from .frontend.loc import ours
  f = frame
  while f is not None and ours(f, (jax,)):
    if f.f_code.co_name in apis:
      return True
    f = f.f_back
  return False


def _jit_frame():
  """The frame of jax.jit that reads the signature to check its arguments (its locals hold `fun` and the
  argnums), or None: not inside jax.jit."""
  f = sys._getframe(2)
  for _ in range(24):
    if f is None:
      return None
    names = f.f_locals if f.f_globals.get("__name__", "").startswith("jax") else ()
    if "fun" in names and "static_argnums" in names and "donate_argnums" in names:
      return f
    f = f.f_back
  return None


def _all_of(v, kind) -> tuple:
  """`v` (one `kind`, or an iterable of them: jax.jit's static_argnums=, static_argnames=) as a tuple; () for
  None or anything else."""
  if v is None:
    return ()
  if isinstance(v, kind):
    return (v,)
  try:
    return tuple(v) if all(isinstance(i, kind) for i in v) else ()
  except TypeError:
    return ()


def _call_text(kernel, fun) -> str:
  """How the user passed the kernel to jax.jit: `scale`, or `functools.partial(scale, ...)`."""
  import functools
  from .calling import source_repr
  name = kernel.__name__
  if isinstance(fun, functools.partial) and not fun.args:
    return f"functools.partial({', '.join([name] + [f'{k}={source_repr(v)}' for k, v in fun.keywords.items()])})"
  return name if fun is kernel or getattr(fun, "__name__", None) == name else f"functools.partial({name}, ...)"


def _shown(v) -> str:
  return repr(v[0]) if len(v) == 1 and isinstance(v[0], str) else (str(v[0]) if len(v) == 1 else repr(tuple(v)))


def _user_loc(frame):
  """The user's jax.jit call: the first frame above jax.jit's outside mgpu_dsl and JAX."""
  import jax
  from .frontend.loc import ours, user_loc
  f = frame
  while f is not None and ours(f, (jax,)):
    f = f.f_back
  return user_loc(frame=f) if f is not None else None


def _check_nums(kernel, sig, what: str, nums: tuple, how: str, frame, bound: dict) -> None:
  params = list(sig.parameters.values())
  if any(p.kind == P.VAR_POSITIONAL for p in params):
    return
  pos = [p.name for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
  bad = [i for i in nums if i >= len(pos) or -i > len(pos)]
  name = kernel.__name__
  pk = kernel.parsed
  if not bad:
    (_check_static_inputs if what == "static_argnums" else _check_donated)(kernel, sig, what, [pos[i] for i in nums],
                                                                           how, frame)
    return
  keyword = [p.name for p in params if p.kind == P.KEYWORD_ONLY and p.name in pk.constexpr_params]
  inputs = [r for r in pos if r in pk.ref_params]
  n = len(pos)
  message = (f"jax.jit({how}, {what}={_shown(nums)}): {name} takes {n} argument{'s' if n != 1 else ''} by"
             f" position ({', '.join(pos) or 'none'}), so argument {bad[0]} is past them")
  bounds = kernel._input_bounds(pk)
  if keyword:
    partial = [c for c in keyword if c in bound]
    if bounds[0] != bounds[1]:
      why = ("the out_shape and grid callables do not fix how many inputs it takes (they take different numbers,"
             " or any number), so a value after the inputs could be an input")
    elif partial:
      why = (f"functools.partial binds {', '.join(partial)}, which makes {'them' if len(partial) > 1 else 'it'}"
             f" and the parameters after {'them' if len(partial) > 1 else 'it'} keyword-only, as Python's partial does")
    else:
      why = "a constexpr without a default after one with a default is keyword-only, as in a Python function"
    message += (f"; its constexpr{'s' if len(keyword) > 1 else ''} {', '.join(keyword)}"
                f" {'are' if len(keyword) > 1 else 'is'} passed by keyword: {why}")
  free = [c for c in keyword if c not in bound]
  if what == "static_argnums" and free:
    meant = [free[i - n] for i in bad if 0 <= i - n < len(free)] or free
    them = "them" if len(meant) > 1 else "it"
    call = ", ".join(inputs + [f"{c}=..." for c in meant])
    hint = (f"name {them} in static_argnames and pass {them} by keyword: jax.jit({how}, static_argnames="
            f"[{', '.join(map(repr, meant))}])({call})")
  elif what == "donate_argnums":
    hint = (f"donate_argnums counts the arguments passed by position from 0 ({', '.join(pos)}); only inputs"
            f" are donated: donate_argnums=({', '.join(str(pos.index(r)) for r in inputs[:1]) or 0},)")
  else:
    counted = ", ".join(f"{i}: {p}" for i, p in enumerate(pos))
    hint = (f"{what} counts {name}'s arguments by position from 0 ({counted}),"
            f" or name them: static_argnames=[...]")
  raise E.SignatureError(message, _user_loc(frame), hint=hint)


def _check_names(kernel, sig, what: str, names: tuple, how: str, frame) -> None:
  params = sig.parameters
  if any(p.kind == P.VAR_KEYWORD for p in params.values()):
    return
  valid = [k for k, p in params.items() if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)]
  bad = [k for k in names if k not in valid]
  if not bad:
    (_check_static_inputs if what == "static_argnames" else _check_donated)(kernel, sig, what, list(names), how, frame)
    return
  name = kernel.__name__
  pk = kernel.parsed
  k = bad[0]
  message = f"jax.jit({how}, {what}={_shown(names)}): {name} has no parameter {k}"
  if k in pk.ref_params:
    message += " to pass: it is an output (out_shape describes it, and the kernel returns it)"
    hint = f"{name} takes {', '.join(valid)}: name those"
  elif k in pk.constexpr_params:          # (dropped from the signature: an autotuned kernel's tuned constexpr)
    message += " to pass: mg.autotune picks its value, from the configs"
    hint = f"{how} takes {', '.join(valid)}: name those"
  else:
    close = difflib.get_close_matches(k, valid, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"{name} takes {', '.join(valid)}"
  raise E.SignatureError(message, _user_loc(frame), hint=hint)


def _check_static_inputs(kernel, sig, what: str, named: list, how: str, frame) -> None:
  """static_argnums=1 naming the input y (an off-by-one for the constexpr after it): jax.jit hashes a static
  argument at every call, and an array is not hashable (JAX's ValueError "Non-hashable static arguments are not
  supported", printing the whole array). An ml.scalar input may be a Python number: static is fine there."""
  pk = kernel.parsed
  scalars = getattr(pk, "scalar_params", ())
  inputs = [k for k in named if k in pk.ref_params and k not in scalars]
  if not inputs:
    return
  k = inputs[0]
  pos = [p.name for p in sig.parameters.values() if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
  shown = _shown(tuple(pos.index(k) for k in named if k in pos)) if what == "static_argnums" else _shown(tuple(named))
  consts = [p.name for p in sig.parameters.values() if p.name in pk.constexpr_params]
  by_pos = [(i, c) for i, c in enumerate(pos) if c in consts]
  if by_pos and what == "static_argnums":
    hint = (f"static_argnums names the constexprs: {', '.join(f'{c} is argument {i}' for i, c in by_pos)}"
            f" (static_argnums={_shown(tuple(i for i, _ in by_pos))})")
  elif consts:
    hint = f"name the constexprs static: static_argnames=[{', '.join(map(repr, consts))}]"
  else:
    hint = f"{kernel.__name__} has no constexprs to make static: drop {what}"
  raise E.SignatureError(
      f"jax.jit({how}, {what}={shown}): {k} is an input of {kernel.__name__}, an array, which jax.jit cannot hold"
      f" static (it hashes a static argument at every call, and arrays are not hashable)", _user_loc(frame),
      hint=hint)


def _check_donated(kernel, sig, what: str, named: list, how: str, frame) -> None:
  """donate_argnums naming a constexpr (a Python value: nothing to donate): static too, it was JAX's "cannot
  intersect" ValueError; traced, a constexpr that is a traced value."""
  pk = kernel.parsed
  consts = [k for k in named if k in pk.constexpr_params]
  if not consts:
    return
  pos = [p.name for p in sig.parameters.values() if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
  inputs = [r for r in pos if r in pk.ref_params]
  shown = _shown(tuple(pos.index(k) for k in named)) if what == "donate_argnums" else _shown(tuple(named))
  keep = ([f"donate_argnums=({', '.join(str(pos.index(r)) for r in inputs)},)"] if inputs else []) + [
      f"static_argnames=[{', '.join(map(repr, consts))}]"]
  raise E.SignatureError(
      f"jax.jit({how}, {what}={shown}): {consts[0]} is a constexpr of {kernel.__name__}, a Python value known when"
      f" it compiles: only inputs, arrays, can be donated", _user_loc(frame),
      hint=f"donate inputs and make constexprs static: jax.jit({how}, {', '.join(keep)})")


# ---------------------------------------------------------------- the parameters of callables and partials
@functools.lru_cache(maxsize=512)
def parameters(f) -> tuple[inspect.Parameter, ...] | None:
  """The parameters of the callable `f` (None when it has no signature), looked up once:
  kernels call their grid/out_shape callables on every call."""
  try:
    return tuple(inspect.signature(f).parameters.values())
  except (TypeError, ValueError):
    return None


def arity(f, constexprs) -> tuple[int, float] | None:
  """(min, max) positional inputs the callable `f` takes (constexprs it names excluded)."""
  params = parameters(f)
  if params is None:
    return None
  pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
         and p.name not in constexprs]
  lo = sum(p.default is p.empty for p in pos)
  hi = math.inf if any(p.kind == p.VAR_POSITIONAL for p in params) else len(pos)
  return lo, hi


def input_bounds(pk, out_shape, grid) -> tuple[int, int]:
  """(min, max) inputs the kernel can take, from its ref parameters, a static out_shape and
  the positional arities of the out_shape and grid callables."""
  import jax
  refs = len(pk.ref_params)
  lo, hi = 0, refs - 1           # at least one output
  if out_shape is not None and (hasattr(out_shape, "shape") or not callable(out_shape)):
    n = refs - len(jax.tree.leaves(out_shape))
    lo, hi = max(lo, n), min(hi, n)
  for f in (out_shape, grid):
    if callable(f) and not hasattr(f, "shape"):
      a = arity(f, pk.constexpr_params)
      if a is not None:
        lo, hi = max(lo, a[0]), min(hi, a[1])
  return (lo, int(hi)) if lo <= hi else (0, refs - 1)


def unpartial(fn) -> tuple:
  """(function, bound keywords) of a kernel function: Pallas's `pallas_call(functools.partial(kernel,
  eps=eps, block=b))` binds compile-time options by keyword, which are the kernel's constexprs here,
  passed at every call (a call may still override them, as with a partial). Anything else (a
  partial binding positional arguments, or a parameter that is not a constexpr: a ref) is returned as
  it is, with no keywords: @mgpu_kernel reports it."""
  if not (isinstance(fn, functools.partial) and not fn.args and isinstance(fn.func, types.FunctionType)):
    return fn, {}
  params = inspect.signature(fn.func).parameters

  def constexpr(name):
    p = params.get(name)
    return p is not None and (p.kind is p.KEYWORD_ONLY or p.annotation is L.constexpr
                              or isinstance(p.annotation, str) and p.annotation.endswith("constexpr"))
  return (fn.func, dict(fn.keywords)) if all(map(constexpr, fn.keywords)) else (fn, {})
