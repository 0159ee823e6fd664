"""Values that stand in for arrays without holding any, passed where a kernel call takes arrays: what a
jax.custom_vjp or jax.custom_jvp rule defined with symbolic_zeros=True hands over (docs/autodiff.md), and
abstract values (x.aval). Each is an MG006 at the call saying what it is and what to pass instead."""
from __future__ import annotations


def derivative_stand_in(a, what: str, param: str):
  """(message, hint) for what a jax.custom_vjp or jax.custom_jvp rule defined with symbolic_zeros=True hands
  over in place of an array, else None: a SymbolicZero cotangent or tangent (it has a shape and a dtype, so it
  went on as an array and failed inside the interpreter or JAX with a raw TypeError), a CustomVJPPrimal input of
  the forward (MG006 "kernel inputs are arrays" with no word of its .value)."""
  import jax
  zero = getattr(jax.custom_derivatives, "SymbolicZero", None)
  primal = getattr(jax.custom_derivatives, "CustomVJPPrimal", None)
  if zero is not None and isinstance(a, zero):
    return (f"{what} is a symbolic zero (jax.custom_derivatives.SymbolicZero of {describe_aval(a)}), which holds"
            f" no numbers: a rule defined with symbolic_zeros=True receives one for each cotangent (or tangent)"
            f" that is known to be zero",
            f"leave its term out where it is zero, `if isinstance({param}, jax.custom_derivatives.SymbolicZero)`,"
            f" or make it an array first: jnp.zeros({param}.shape, {param}.dtype)")
  if primal is not None and isinstance(a, primal):
    return (f"{what} is a jax.custom_derivatives.CustomVJPPrimal: a forward defined with symbolic_zeros=True"
            f" receives each input wrapped with whether it is differentiated",
            f"pass its array, {param}.value ({param}.perturbed says whether jax differentiates it)")
  return None


def describe_aval(a) -> str:
  """`float32[256]` for anything with a shape and a dtype (a SymbolicZero, a ShapedArray), else its type."""
  try:
    return f"{getattr(a.dtype, 'name', a.dtype)}{list(a.shape)}"
  except (AttributeError, TypeError):
    return type(a).__name__
