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
  """Whether `fn` is one of the wrappers that leave what a function computes as it is: jax.jit's jitted function,
  jax.named_call's and a jax.named_scope decorator's (a name stack around the call), jax.checkpoint's (`fun_remat`).
  Others with `__wrapped__` (jax.vmap's, jax.grad's: another function of the same arguments) are not."""
  if getattr(fn, "__wrapped__", None) is None:
    return False
  if type(fn).__name__ == "PjitFunction" and (type(fn).__module__ or "").startswith("jaxlib"):
    return True
  code = getattr(fn, "__code__", None)
  if not isinstance(fn, types.FunctionType) or code is None or _JAX_SRC not in code.co_filename:
    return False
  cells = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
  if code.co_filename.endswith("source_info_util.py"):
    return any(type(c).__name__ == "ExtendNameStackContextManager" for c in cells)
  return code.co_filename.endswith("traceback_util.py") and any(
      getattr(getattr(c, "__code__", None), "co_name", None) == "fun_remat" for c in cells)


def _filled(cell) -> bool:
  try:
    cell.cell_contents
  except ValueError:
    return False
  return True


def _users(fn) -> bool:
  """A plain function of the user's: not JAX's, NumPy's or ml's, and wrapping nothing (jax.vmap's wrapper of a
  function carries the user's module name)."""
  mod = getattr(fn, "__module__", None) or ""
  code = getattr(fn, "__code__", None)
  return isinstance(fn, types.FunctionType) and mod.split(".")[0] not in ("jax", "jaxlib", "numpy", "mgpu_dsl") \
      and getattr(fn, "__wrapped__", None) is None and code is not None and _JAX_SRC not in code.co_filename


def reread(fns) -> None:
  """Forget the parse of the helpers made here for `fns` (a kernel's followed functions, its constexprs' helpers):
  their scope snapshot may predate a rebinding that retraces the kernel, as an @ml.inline helper's parse is
  forgotten (mgpu_dsl/kernel.py)."""
  for fn in fns:
    made = _HELPERS.get(fn) if isinstance(fn, types.FunctionType) else None
    if made is not None:
      made.parsed = None


def _inline(fn):
  from .language import Inline
  try:
    return _HELPERS[fn]
  except KeyError:
    made = _HELPERS[fn] = Inline(fn)
    return made


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
  return _inline(inner)


def _library_file(filename: str) -> bool:
  """Whether `filename` is Python's standard library's or an installed package's (not the user's own code)."""
  import sysconfig
  roots = {os.path.abspath(p) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")
           if (p := sysconfig.get_paths().get(k))}
  path = os.path.abspath(filename)
  return path.startswith(tuple(roots)) or os.sep + "site-packages" + os.sep in path


def plain_helper(fn):
  """The @ml.inline helper an undecorated function of the user's means, where the kernel calls it on run-time
  values (probe 52b: a Pallas kernel's helpers are plain functions; a def or lambda of the body already was one);
  None for other callables (library functions, jnp's, ml's) and for one whose source cannot be read (its MG003
  says to decorate it)."""
  from . import errors as E
  from .language import Inline
  from .source import read_function
  if not _users(fn) or _library_file(fn.__code__.co_filename):
    return None
  try:
    return _HELPERS[fn]
  except KeyError:
    pass
  made = Inline(fn)
  try:
    made.parsed = read_function(fn, "@ml.inline")
  except E.KernelError:
    return None
  _HELPERS[fn] = made
  return made


def plain_call(fn, args, kwargs):
  """(helper, args, kwargs) of a call of a plain function of the user's (plain_helper), also through
  functools.partial (its arguments first) or a bound method of the user's class (the instance first); else None."""
  import functools
  args, kwargs = list(args), dict(kwargs)
  while isinstance(fn, functools.partial):
    args, kwargs, fn = [*fn.args, *args], {**fn.keywords, **kwargs}, fn.func
  if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
    args, fn = [fn.__self__, *args], fn.__func__
  elif not isinstance(fn, (types.FunctionType, type)) and isinstance(getattr(type(fn), "__call__", None),
                                                                     types.FunctionType):
    args, fn = [fn, *args], type(fn).__call__          # an instance of the user's class with __call__
  made = plain_helper(fn)
  return None if made is None else (made, args, kwargs)


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


# JAX's transformations that compute another function of the helper's (jax.vmap's wrapper `vmap_f`, jax.grad's
# `grad_f`, ...): a kernel cannot trace them (it computes on whole tiles, and has no derivatives)
_MAPPED = {"vmap_f": "jax.vmap", "grad_f": "jax.grad", "value_and_grad_f": "jax.value_and_grad",
           "jacfun": "jax.jacrev or jax.jacfwd", "hessian": "jax.hessian"}


def transformed(fn):
  """(the transformation's spelling, the user's function, its closure's values by name) of a helper wrapped by
  jax.vmap, jax.grad, jax.value_and_grad, jax.jacrev or jax.jacfwd; None for any other callable."""
  inner = getattr(fn, "__wrapped__", None)
  code = getattr(fn, "__code__", None)
  if inner is None or not isinstance(fn, types.FunctionType) or code is None or _JAX_SRC not in code.co_filename:
    return None
  if code.co_filename.endswith("traceback_util.py"):     # api_boundary's wrapper around vmap_f, grad_f
    fn = next((c.cell_contents for c in fn.__closure__ or () if _filled(c)
               and isinstance(c.cell_contents, types.FunctionType)), None)
    code = getattr(fn, "__code__", None)
  if code is None or code.co_name not in _MAPPED:
    return None
  cells = {n: c.cell_contents for n, c in zip(code.co_freevars, fn.__closure__ or ()) if _filled(c)}
  return _MAPPED[code.co_name], getattr(inner, "__name__", "f"), cells


def transformed_hint(fn, called: str, args_text: list[str], ndim=None) -> tuple[str, str] | None:
  """(the call's name as written, the hint) for a helper of JAX's transformations called on register values."""
  made = transformed(fn)
  if made is None:
    return None
  how, name, cells = made
  x = args_text[0] if args_text else "x"
  if how != "jax.vmap":
    return called, (
        f"a kernel has no automatic derivatives: write the derivative's formula as a helper of its own (of"
        f" jnp.sum(r * r), 2 * r), or take {how} outside the kernel, of a function that calls the kernel under"
        f" jax.custom_vjp (docs/autodiff.md)")
  axes = cells.get("in_axes", 0)
  axis = axes if isinstance(axes, int) else 0
  others = ", ".join(str(a) for a in range(ndim or 2) if a != axis % (ndim or 2))
  others = f"({others})" if "," in others else others
  return called, (
      f"jax.vmap runs {name} once per slice of {x} along axis {axis}, which a kernel does not do (it computes on"
      f" whole tiles): write {name} for the whole tile, the mapped axis kept, a slice's reductions over the other"
      f" axes with keepdims=True (a slice's jnp.sum(r) is jnp.sum({x}, axis={others}, keepdims=True)), and call"
      f" that (an @ml.inline helper); or loop over the slices with a static for i in range(n)")
