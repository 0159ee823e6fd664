"""Kernels (and `@ml.inline` helpers) copy and pickle as the functions they decorate do: by reference.

A kernel holds its parsed source, compiled specialisations and the modules its body reads,
none of which copy. `copy.copy` and `copy.deepcopy` (of a config or model object that holds
a kernel, say) give the kernel itself, as they give a function itself; `pickle` stores its
module and qualified name, as it does for a function, so a kernel defined at a module's top
level pickles and loads (in another process, by importing that module). A kernel bound at a module's
top level under another name than its function's (`pk = mg.mgpu_kernel(functools.partial(body, eps=1e-5),
...)`, `tuned = mg.autotune(...)(mg.mgpu_kernel(...)(body))`) pickles by that name.
"""
from __future__ import annotations

import importlib
import pickle
import sys


class ByReference:
  """A kernel, an @mg.autotune kernel, an @ml.inline helper: copied and pickled as a function is, by
  reference (`reduce`). `pickled_what` names it in the error of one that cannot pickle."""
  pickled_what = "kernel"

  def __copy__(self):
    return self

  def __deepcopy__(self, memo):
    return self

  def __reduce__(self):
    return reduce(self, self.pickled_what)


def by_name(module: str, qualname: str):
  """The object `module`.`qualname` (unpickling a kernel)."""
  obj = importlib.import_module(module)
  for part in qualname.split("."):
    obj = getattr(obj, part)
  return obj


def reduce(kernel, what="kernel"):
  """`kernel.__reduce__()`: a reference by name, checked to lead back to `kernel` (a kernel, an
  @mg.autotune kernel or an @ml.inline helper: `what`). A kernel under @mg.autotune is found as
  the tuner's `.kernel`, since the tuner holds the decorated function's name."""
  fn = getattr(kernel, "fn", None) or kernel.kernel.fn
  module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", fn.__name__)
  try:
    found = by_name(module, qualname) if module and "<locals>" not in qualname else None
  except (ImportError, AttributeError):
    found = None
  if found is not kernel and getattr(found, "kernel", None) is kernel:
    return by_name, (module, qualname + ".kernel")
  if found is not kernel:
    bound = _bound_name(module, kernel)
    if bound is not None:
      return by_name, (module, bound)
  if found is not kernel:
    raise pickle.PicklingError(
        f"cannot pickle the {what} {qualname}: like a function, it pickles by its name, and"
        f" {module}.{qualname} is not this {what} (define it at a module's top level, under its own name)")
  return by_name, (module, qualname)


def _bound_name(module, kernel):
  """The name in `module`'s globals holding `kernel` (or the tuner whose `.kernel` it is), or None:
  a kernel made under another name than its function's (a partial's, or mgpu_kernel(...)(fn))."""
  mod = sys.modules.get(module) if module else None
  names = list(vars(mod).items()) if mod is not None else []
  for n, v in names:
    if v is kernel:
      return n
  for n, v in names:
    if isinstance(getattr(v, "__dict__", None), dict) and v.__dict__.get("kernel") is kernel:   # a tuner
      return n + ".kernel"
  return None
