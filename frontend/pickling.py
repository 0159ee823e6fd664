"""Kernels (and `@ml.inline` helpers) copy and pickle as the functions they decorate do: by reference.

A kernel holds its parsed source, compiled specialisations and the modules its body reads,
none of which copy. `copy.copy` and `copy.deepcopy` (of a config or model object that holds
a kernel, say) give the kernel itself, as they give a function itself; `pickle` stores its
module and qualified name, as it does for a function, so a kernel defined at a module's top
level pickles and loads (in another process, by importing that module).
"""
from __future__ import annotations

import importlib
import pickle


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
    raise pickle.PicklingError(
        f"cannot pickle the {what} {qualname}: like a function, it pickles by its name, and"
        f" {module}.{qualname} is not this {what} (define it at a module's top level, under its own name)")
  return by_name, (module, qualname)
