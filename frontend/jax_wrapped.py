"""Helpers wrapped by JAX's function transformations (`@jax.jit`, `@jax.named_call`, `@jax.checkpoint` /
`jax.remat`, also around an `@ml.inline` helper) called in a kernel: the function they wrap, traced into the
kernel as an `@ml.inline` helper is (a kernel is one program: jit's inlining, a call's name and
rematerialisation change nothing in it, and a kernel has no derivative). A wrapper is JAX's where it is jaxlib's
jitted function or a function of JAX's own source with `__wrapped__`; the function it wraps must be the user's
(jnp's own functions are jitted too, and are jnp_calls' to map)."""
from __future__ import annotations

import os
import types
import weakref

_JAX_SRC = os.sep + "jax" + os.sep + "_src" + os.sep
_HELPERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()     # the user's function -> its Inline


def _jax_wrapper(fn) -> bool:
  if getattr(fn, "__wrapped__", None) is None:
    return False
  if (type(fn).__module__ or "").startswith("jaxlib"):          # jax.jit's PjitFunction
    return True
  code = getattr(fn, "__code__", None)
  return isinstance(fn, types.FunctionType) and code is not None and _JAX_SRC in code.co_filename


def _users(fn) -> bool:
  mod = getattr(fn, "__module__", None) or ""
  return isinstance(fn, types.FunctionType) and not mod.split(".")[0] in ("jax", "jaxlib", "numpy", "mgpu_dsl")


def helper(fn):
  """The @ml.inline helper a JAX-wrapped function of the user's means; None for any other callable."""
  from .language import Inline
  inner, wrapped = fn, False
  while _jax_wrapper(inner):
    inner, wrapped = inner.__wrapped__, True
  if not wrapped:
    return None
  if isinstance(inner, Inline):
    return inner
  if not _users(inner):
    return None
  try:
    return _HELPERS[inner]
  except KeyError:
    made = _HELPERS[inner] = Inline(inner)
    return made


# JAX's transformations a def in a kernel's body may be decorated with (`@jax.jit`, `@partial(jax.jit, ...)`,
# `@jax.named_scope("qk")`): the def is then the helper it would be undecorated, as a jitted helper is above
_TRANSFORMS = {("jax._src.api", "jit"), ("jax._src.api", "named_call"), ("jax._src.ad_checkpoint", "checkpoint"),
               ("jax._src.ad_checkpoint", "remat")}


def transform_decorator(value) -> bool:
  """Whether a decorator's value is one of JAX's transformations that leave a kernel's helper as it is."""
  import functools
  while isinstance(value, functools.partial):
    value = value.func
  if (getattr(value, "__module__", None), getattr(value, "__name__", None)) in _TRANSFORMS:
    return True
  return type(value).__name__ == "ExtendNameStackContextManager" and \
      (type(value).__module__ or "").startswith("jax._src")          # jax.named_scope("qk")
