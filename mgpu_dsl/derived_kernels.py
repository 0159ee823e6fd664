"""Kernels derived from a kernel for the form of a call's arguments: a pytree input's leaves (pytree_inputs.py), a
star parameter's count of refs (star_refs.py). A derived kernel is a copy of its base kernel whose parsed signature
is the base's, transformed (parsed again after the base's is: a retrace forgets both), with specialisation caches
of its own and a tag of each derivation in its disk key."""
from __future__ import annotations


def derive(kernel, transform, tag: str, derived=None):
  """A copy of `kernel` (or `derived`, a `copy` of it with attributes of its own) whose parsed signature is
  `transform(kernel.parsed)` and whose disk key holds `tag` after the tags of `kernel`'s own derivations."""
  if derived is None:
    derived = copy(kernel)
  derived._base, derived._transform = kernel, transform
  derived._tags = getattr(kernel, "_tags", ()) + (tag,)
  derived._parsed_from = None
  derived._cache = type(kernel._cache)()
  derived._const_deps = {}
  derived._bounds = None
  derived._pytree_kernels = {}
  return derived


def copy(kernel):
  """A kernel of `kernel`'s attributes, of the derived class of its class (made a derived kernel by `derive`)."""
  cls = _derived_class(type(kernel))
  out = cls.__new__(cls)
  out.__dict__.update(kernel.__dict__)
  return out


_CLASSES: dict = {}


def _derived_class(cls):
  """The subclass of the kernel class whose parsed signature is its base kernel's, transformed (a derived
  kernel's class is its own: each derived kernel's base is one of its attributes)."""
  if getattr(cls, "_derived", False):
    return cls
  if cls in _CLASSES:
    return _CLASSES[cls]

  class Derived(cls):
    _derived = True

    @property
    def parsed(self):
      base = self._base.parsed
      if self._parsed_from is not base:
        self._parsed, self._deps, self._parsed_from = self._transform(base), self._base._deps, base
      return self._parsed

    def _forget(self):
      super()._forget()
      self._parsed_from = None
      self._base._forget()

    def _disk_key(self, spec, constexprs, levels=()):
      key = super()._disk_key(spec, constexprs, levels)
      from . import cache as C
      for tag in self._tags:
        key = key and C.digest(key, tag)
      return key
  Derived.__name__ = Derived.__qualname__ = cls.__name__
  _CLASSES[cls] = Derived
  return Derived
