"""Keyword arguments through `jax.vmap`: JAX maps every keyword argument along axis 0 (its in_axes
name positional arguments only), so `jax.vmap(kernel)(x, block_rows=128)` fails inside jax.vmap,
before the kernel is called, with JAX's "vmap was requested to map its argument along axis 0 ...
its rank should be at least 1" about a value the user never meant to map. jax.vmap reads the
function's signature and binds the call's arguments to it (for its debug information) before it
maps them: the kernel's signature (`KernelSignature`) refuses constexprs there, at the user's call,
with the fix (bind them first, `functools.partial`). jax.jit binds it too, its static arguments replaced by a
placeholder, before it makes abstract arrays of the others: a constexpr it cannot trace (a string, a dtype, a
function) is refused there, where JAX's error was a TypeError about an abstract array."""
from __future__ import annotations

import inspect
import sys

from .frontend import errors as E
from .frontend import language as L


class KernelSignature(inspect.Signature):
  """A kernel's call signature (signature.signature): binding constexprs under jax.vmap is a
  SignatureError naming them, not JAX's error about their rank."""
  kernel_name = "the kernel"

  def replace(self, **changes):         # (inspect.signature of a functools.partial of the kernel)
    sig = super().replace(**changes)
    sig.kernel_name = self.kernel_name
    return sig

  def bind(self, *args, **kwargs):
    P = inspect.Parameter
    rest = any(p.kind == P.VAR_KEYWORD for p in self.parameters.values())    # (an unreadable kernel's)
    given = [k for k, v in kwargs.items() if v is not None and (
        k in self.parameters and _constexpr_or_option(self.parameters[k]) or rest and k not in self.parameters)]
    ins = [p.name for p in self.parameters.values() if p.kind == P.POSITIONAL_OR_KEYWORD and not _constexpr_or_option(p)]
    if given and _under_vmap():
      _refuse(self.kernel_name, given, kwargs, ", ".join(ins[:len(args)]) or "...")
    # constexprs by position (positional.py): jax.vmap maps them unless in_axes says None; jax.jit traces them
    # unless static_argnums names them
    by_pos = {p.name: (i, a) for i, (p, a) in enumerate(zip(self.parameters.values(), args))
              if p.annotation is L.constexpr and p.kind == P.POSITIONAL_OR_KEYWORD}
    mapped = [k for k, (i, _) in by_pos.items() if _vmap_maps(i)]
    if mapped:
      from .positional import refuse_vmap
      refuse_vmap(self.kernel_name, {k: by_pos[k][1] for k in mapped}, ins[:len(args)], len(args))
    not_arrays = [k for k, (_, a) in by_pos.items() if not _array_like(a)]
    how = _under_jit() if not_arrays else None
    if how:
      from .positional import refuse_jit
      refuse_jit(self.kernel_name, {k: by_pos[k] for k in not_arrays}, how)
    # jax.jit(kernel)(x, act="relu"): jax.jit binds the call (its static arguments replaced by a placeholder)
    # before it makes abstract arrays of the others, where a string, a dtype or a function fails in JAX
    not_arrays = [k for k in given if not _array_like(kwargs[k])]
    how = _under_jit() if not_arrays else None
    if how:
      _refuse_jit(self.kernel_name, not_arrays, kwargs, how)
    return super().bind(*args, **kwargs)


def _vmap_maps(i: int) -> bool:
  """Whether jax.vmap's wrapper is binding the call and maps its positional argument `i` (its in_axes,
  read from the wrapper's frame, do not say None there)."""
  f = _vmap_frame()
  if f is None:
    return False
  axes = f.f_locals.get("in_axes", 0)
  axis = axes[i] if isinstance(axes, (tuple, list)) and i < len(axes) else axes
  return axis is not None and not isinstance(axes, dict)


def _constexpr_or_option(p) -> bool:
  """Whether the parameter `p` is a constexpr (keyword-only, or one a call may pass by position too:
  positional.py) or `interpret`, not an input."""
  return p.kind == inspect.Parameter.KEYWORD_ONLY or p.annotation is L.constexpr


def _array_like(v) -> bool:
  """Whether jax.jit can trace `v` (a pytree of numbers and arrays), or it is jax.jit's placeholder
  for a static argument (a bare object())."""
  import jax
  import numpy as np
  if type(v) is object:
    return True
  return all(isinstance(x, (bool, int, float, complex, np.ndarray, np.generic, jax.Array)) for x in jax.tree.leaves(v))


def _under_jit() -> str | None:
  """Which of jax.jit's and jax.checkpoint's wrappers is binding the call (its debug information, before it
  makes abstract arrays of the arguments), "jax.jit" or "jax.checkpoint": a frame of the code that one alone
  runs there (found by the same probe as vmap's); None for neither."""
  codes = _jit_codes()
  f = sys._getframe(2)
  for _ in range(8):
    if f is None or not codes:
      return None
    if f.f_code in codes:
      return "jax.checkpoint" if f.f_code in _CKPT_CODES else "jax.jit"
    f = f.f_back
  return None


def _under_vmap() -> bool:
  """Whether jax.vmap's wrapper is binding the call: a frame of the code that jax.vmap alone runs
  between a mapped call and the signature's bind (found by calling a probe through jax.vmap, jax.jit
  and jax.grad once, whatever JAX names its functions); by the name JAX 0.4 to 0.10 gave it (vmap_f)
  where the probe finds nothing."""
  return _vmap_frame() is not None


def _vmap_frame():
  """The frame of jax.vmap's wrapper binding the call (see _under_vmap), or None. Called by the functions
  the signature's bind calls: the search starts at bind's caller."""
  codes = _vmap_codes()
  f = sys._getframe(3)
  for _ in range(8):
    if f is None:
      return None
    if f.f_code in codes if codes else (
        f.f_code.co_name == "vmap_f" and f.f_globals.get("__name__", "").startswith("jax")):
      return f
    f = f.f_back
  return None


_CODES = None


def _vmap_codes() -> frozenset:
  """The code objects on the stack between a call through jax.vmap and its signature's bind that a call
  through jax.jit or jax.grad does not run (the vmap wrapper); empty where that cannot be told."""
  global _CODES, _JIT_CODES, _CKPT_CODES
  if _CODES is None:
    try:
      _CODES, jit, _CKPT_CODES = _probe()
      _JIT_CODES = jit | _CKPT_CODES
    except Exception:       # (a JAX whose transformations bind no signature, or fail on the probe)
      _CODES = _JIT_CODES = _CKPT_CODES = frozenset()
  return _CODES


_JIT_CODES = None
_CKPT_CODES: frozenset = frozenset()


def _jit_codes() -> frozenset:
  """The same for jax.jit and jax.checkpoint: the code each alone runs before binding the signature (its
  debug information), both together."""
  global _JIT_CODES, _CKPT_CODES
  if _JIT_CODES is None:
    try:
      _, jit, _CKPT_CODES = _probe()
      _JIT_CODES = jit | _CKPT_CODES
    except Exception:
      _JIT_CODES = frozenset()
  return _JIT_CODES


def _probe() -> tuple[frozenset, frozenset, frozenset]:
  import jax
  import numpy as np
  seen = {}

  class Recorder(inspect.Signature):
    def bind(self, *args, **kwargs):
      codes, f = [], sys._getframe(1)
      while f is not None and f.f_code is not here:
        codes.append(f.f_code)
        f = f.f_back
      seen.setdefault(mode, set()).update(codes if f is not None else ())
      return super().bind(*args, **kwargs)

  def fn(x):
    return (x * 2.0).sum()
  fn.__signature__ = Recorder([inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
  here = sys._getframe().f_code
  x = np.ones((2,), np.float32)
  for mode, f in (("vmap", jax.vmap(fn)), ("jit", jax.jit(fn)), ("grad", jax.grad(fn)),
                  ("checkpoint", jax.checkpoint(fn))):
    f(x)
  own = lambda m: frozenset(seen.get(m, set()).difference(*(seen.get(o, set()) for o in seen if o != m)))
  return own("vmap"), own("jit"), own("checkpoint")


def _text(v) -> str:
  """A keyword's value as the user wrote it where it is a plain Python value, else `...` (a value
  jax.jit traced: the constexpr is then not static outside the vmap either)."""
  import numpy as np
  plain = isinstance(v, (int, float, bool, str, type(None))) or isinstance(v, tuple) and all(
      isinstance(x, (int, float, bool, str)) for x in v)
  if plain:
    return repr(v)
  try:                                  # a dtype (jnp.bfloat16, np.dtype("float16")) as jnp names it
    if isinstance(v, np.dtype) or isinstance(v, type) and np.dtype(v).kind != "O":
      return f"jnp.{np.dtype(v).name}"
  except TypeError:
    pass
  name = getattr(v, "__name__", None)   # a function or helper by its name
  return name if callable(v) and isinstance(name, str) and name.isidentifier() else "..."


def _refuse(name, given, kwargs, ins):
  from .bench import caller_loc
  shown = ", ".join(f"{k}={_text(kwargs[k])}" for k in given)
  lam = "*a" if ins == "..." else ins
  traced = "..." in shown
  raise E.SignatureError(
      f"jax.vmap maps every keyword argument along axis 0 (its in_axes name positional arguments only), so"
      f" {name}'s keyword argument{'s' if len(given) > 1 else ''} {shown} cannot be passed through it", caller_loc(),
      hint=f"bind {'them' if len(given) > 1 else 'it'} before mapping: jax.vmap(functools.partial({name}, {shown}))"
           f"({ins}), or map a function that calls the kernel: jax.vmap(lambda {lam}: {name}({lam}, {shown}))({ins})"
           + (" (a value that is traced, as jax.jit's arguments are, is not static: pass it as a Python value,"
              " outside jax.jit or through its static_argnames)" if traced else ""))


def _refuse_jit(name, given, kwargs, how="jax.jit"):
  from .bench import caller_loc
  shown = ", ".join(f"{k}={_text(kwargs[k])}" for k in given)
  names = ", ".join(repr(k) for k in given)
  if how == "jax.checkpoint":          # (it has static_argnums, no static_argnames)
    them = "them" if len(given) > 1 else "it"
    raise E.SignatureError(
        f"jax.checkpoint traces every argument not named in its static_argnums, and {name}'s constexpr"
        f"{'s' if len(given) > 1 else ''} {shown}, passed by keyword, {'are' if len(given) > 1 else 'is'} not an"
        f" array it can trace", caller_loc(),
        hint=f"bind {them} first: jax.checkpoint(functools.partial({name}, {shown}))")
  raise E.SignatureError(
      f"jax.jit traces every argument not named in its static_argnames, and {name}'s constexpr"
      f"{'s' if len(given) > 1 else ''} {shown} {'are' if len(given) > 1 else 'is'} not an array it can trace",
      caller_loc(), hint=f"name {'them' if len(given) > 1 else 'it'} static, jax.jit({name}, static_argnames=[{names}]),"
                         f" or bind {'them' if len(given) > 1 else 'it'} first: jax.jit(functools.partial({name}, {shown}))")
