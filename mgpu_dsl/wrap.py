"""How a compiled specialisation enters JAX: under the kernel's name, with no silent derivative.

`jax.grad` of a kernel call would otherwise fail deep inside JAX ("Differentiation
rule for 'mosaic_gpu_p' not implemented", or "Pure callbacks do not support JVP" in
interpret mode). Both paths go through a `jax.custom_jvp` whose rule raises a
KernelError that says how to attach a backward (docs/autodiff.md).
"""
from __future__ import annotations

from typing import Callable

from .frontend import errors as E


def no_derivative(f: Callable, name: str, loc) -> Callable:
  """`f`, whose derivative is a KernelError naming the kernel `name` (defined at `loc`)."""
  import jax

  @jax.custom_jvp
  def call(*args):
    return f(*args)

  @call.defjvp
  def _jvp(primals, tangents):
    raise E.DifferentiationError(
        f"jax cannot differentiate the kernel {name}: mgpu_dsl kernels have no automatic derivative",
        loc, hint="wrap the call in a function decorated with jax.custom_vjp and give it a backward"
                  " (a second kernel or jnp code); see docs/autodiff.md")

  return call


def named_call(f: Callable, name: str, loc) -> Callable:
  """`f` (one built specialisation) jitted under the kernel's name, with no derivative.

  The name becomes the `func.func private @name` that wraps the Mosaic GPU custom
  call in `jax.jit(g).lower(...).as_text()`, and the `jit(name)` in XLA op metadata.
  """
  import jax
  guarded = no_derivative(f, name, loc)

  def call(*args):
    return guarded(*args)

  call.__name__ = call.__qualname__ = name
  return jax.jit(call)
