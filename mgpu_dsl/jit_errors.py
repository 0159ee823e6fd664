"""Interpret mode's run-time errors under `jax.jit`, raised as the KernelError they are.

Under `jax.jit` the interpreter runs as a `jax.pure_callback`, and XLA turns any exception a
callback raises into a `JaxRuntimeError` whose text is a raw traceback through JAX and the
interpreter, with the KernelError's text at its end. The interpreter keeps each KernelError it
raises from a callback (lowering/interpret.py `raised`); when the executable that ran the
callback fails with XLA's error, the call raises that KernelError (a `RaceError`, an
`OutOfBoundsError` at the kernel's line, with its hint) instead, as an eager call does.

A program with a host callback never takes JAX's C++ fast path, so its every run goes through
`ExecuteReplicated.__call__`, which is wrapped once here. Where JAX lays itself out otherwise,
nothing is wrapped and XLA's error (which holds the KernelError's text) stays.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def install() -> None:
  """Wrap JAX's executable call so that XLA's error for a failed interpreter callback is raised
  as the interpreter's KernelError. Installed once, on the first interpreted call under a trace."""
  try:
    import jax
    from jax._src.interpreters import pxla
    execute = pxla.ExecuteReplicated.__call__
    runtime_error = jax.errors.JaxRuntimeError
  except (ImportError, AttributeError):      # another JAX layout: XLA's error stays
    return
  from .lowering import interpret

  @functools.wraps(execute)
  def __call__(self, *args):
    try:
      return execute(self, *args)
    except runtime_error as e:
      err = interpret.take_raised(str(e)) if getattr(self, "has_host_callbacks", True) else None
      if err is None:
        raise
      raise err from None

  pxla.ExecuteReplicated.__call__ = __call__
