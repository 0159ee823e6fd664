"""A jnp / jax.nn / jax.lax / numpy function reached through another name and called on a register value: a
constexpr (`act=jax.nn.gelu`, called as `act(v)`), a global (`ACT = jnp.tanh`), a partial of one
(`functools.partial(jax.nn.gelu, approximate=False)`). Kernels call ml.* functions and @ml.inline helpers;
rewriting the call (`act(v)`) as the formula would lose the choice the name makes, so the hint replaces the
value where it is chosen: `act=ml.tanh`, or `act=ml.inline(lambda v: <jax.nn's formula>)`."""
from __future__ import annotations

import ast
import functools
import re

from . import missing

def _public(mod: str) -> tuple[str, str] | None:
  """(how users spell the module, its importable name) of a library function's `__module__`."""
  parts = mod.split(".")
  if parts[:2] in (["jax", "numpy"], ["jax", "_src"]) and (parts[1] == "numpy" or parts[2:3] == ["numpy"]):
    sub = [p for p in parts[2:] if p in ("linalg", "fft")]
    return ".".join(["jnp", *sub]), ".".join(["jax.numpy", *sub])
  if parts[:2] == ["jax", "nn"] or parts[:3] == ["jax", "_src", "nn"]:
    return "jax.nn", "jax.nn"
  if parts[:2] == ["jax", "lax"] or parts[:3] == ["jax", "_src", "lax"]:
    return "jax.lax", "jax.lax"
  if parts[:2] == ["jax", "image"] or parts[:3] == ["jax", "_src", "image"]:     # jax.image.resize (probe 53c)
    return "jax.image", "jax.image"
  if parts[:4] == ["jax", "_src", "ops", "scatter"]:      # jax.ops.segment_sum, segment_max, ...
    return "jax.ops", "jax.ops"
  if parts[:2] == ["jax", "scipy"] or parts[:3] == ["jax", "_src", "scipy"]:
    rest = ".".join(["jax.scipy", *parts[(2 if parts[1] == "scipy" else 3):]])
    return rest, rest
  if parts[0] in ("numpy", "math"):
    return ".".join(["np" if parts[0] == "numpy" else "math", *parts[1:]]), mod
  return None


def public_name(fn) -> str:
  """`jax.nn.gelu`, `jnp.tanh`: a library function as users spell it (its module may be jax._src's)."""
  mod, name = getattr(fn, "__module__", None) or "", getattr(fn, "__name__", repr(fn))
  lib = _public(mod) or (("np", "numpy") if type(fn).__name__ == "ufunc" else None)
  return f"{lib[0]}.{name}" if lib else name


def _spelt(fn, written: str) -> bool:
  """Whether `written` (a callee's last name) is the library's own name for `fn` (jax.nn.swish is silu)."""
  import importlib
  if written == getattr(fn, "__name__", None):
    return True
  lib = _public(getattr(fn, "__module__", None) or "")
  try:
    return lib is not None and getattr(importlib.import_module(lib[1]), written, None) is fn
  except ImportError:
    return False


def library_text(v, is_library) -> str | None:
  """`jax.nn.gelu`, `functools.partial(jax.nn.gelu, approximate=False)`: an array library's function (or a
  partial of one) as the user wrote it, for messages (its repr holds an address); None for other values."""
  base, args, kw = (v.func, v.args, dict(v.keywords)) if isinstance(v, functools.partial) else (v, (), {})
  if not callable(base) or getattr(base, "__name__", None) is None or not is_library(base):
    return None
  if base is v:
    return public_name(base)
  return f"functools.partial({', '.join([public_name(base), *map(repr, args), *(f'{k}={x!r}' for k, x in kw.items())])})"


def held_library(node: ast.Call, fn, callee: str, is_library, has_ml, outside: bool,
                 written: str = "") -> tuple[str, str] | None:
  """(the callee as the message names it, the hint) for a call `node` whose function `fn`, written `callee`,
  is an array library's function (`is_library`) held in another name; None for a direct call (`jnp.tanh(v)`,
  whose own hints stand; `written`: that hint, a formula in the call's operand used where jax.nn has none here).
  `has_ml(name)`: whether ml has a function of that name; `outside`: the callee is a
  name the kernel neither assigns nor reads from its module (a constexpr parameter), so the call passes it."""
  base, args, kw = (fn.func, fn.args, dict(fn.keywords)) if isinstance(fn, functools.partial) else (fn, (), {})
  name = getattr(base, "__name__", None)
  if name is None or not is_library(base) or (base is fn and _spelt(base, callee.split(".")[-1])):
    return None
  shown = library_text(fn, is_library)
  kws = ", ".join(f"{k}={v!r}" for k, v in kw.items())
  if args:
    repl = None
  elif has_ml(name):
    repl = f"functools.partial(ml.{name}, {kws})" if kw else f"ml.{name}"
  else:
    form = missing.form_hint(name, ["v"], {k: repr(v) for k, v in kw.items()},
                             lax=shown.startswith("jax.lax."))
    repl = f"ml.inline(lambda v: {form[len('write '):]})" if form and form.startswith("write ") else None
    op = ast.unparse(node.args[0]) if len(node.args) == 1 and not node.keywords else ""
    made = re.fullmatch(r"(?:no ml\.\w+: )?write (.*)", written or "")
    if repl is None and not kw and op.isidentifier() and made:      # jax.nn.soft_sign: the formula written for v
      repl = f"ml.inline(lambda {op}: {made.group(1)})"
  if repl is None:
    return f"{callee} ({shown})", (
        f"{callee} is {shown}, and kernels call ml.* functions and @ml.inline helpers on register values:"
        f" {'pass' if outside else 'bind'} an @ml.inline helper written with ml.* functions"
        f" {'for' if outside else 'to'} {callee} (@ml.inline def {name}(v): return ...)")
  where = f"pass {callee}={repl} in the call" if outside else f"bind {callee} to {repl} where it is chosen"
  return f"{callee} ({shown})", (f"{callee} is {shown}, and kernels call ml.* functions and @ml.inline helpers on"
                                 f" register values: {where}")
