"""Python numbers passed eagerly for a kernel's 0-d inputs: made the arrays jax.jit makes of them.

Under `jax.jit(kernel)(x, 2.0)` the 2.0 arrives as a weakly typed 0-d array (float32; int32 for an int,
int64 with jax_enable_x64), which the kernel reads with `s[...]`; `kernel(x, 2.0)` called eagerly gets
the same array, as a jnp function treats a Python number the same both ways."""
from __future__ import annotations

import numbers


def as_arrays(args, scalar_positions, bounds) -> tuple[tuple, tuple]:
  """`args` with the Python ints and floats at input positions (not ml.scalar parameters, which take
  numbers themselves; not bools, `interpret` passed by position) as the weakly typed 0-d arrays jax.jit
  would trace, and the positions converted. Nothing converts when the count of inputs is wrong, or an
  int is past int32 (jax.jit raises OverflowError there): the call's own error says so."""
  import jax.numpy as jnp
  if not bounds[0] <= len(args) <= bounds[1]:
    return tuple(args), ()
  out, done = list(args), []
  for p, a in enumerate(args):
    if p in scalar_positions or isinstance(a, bool) or not isinstance(a, (int, float)):
      continue
    if not isinstance(a, numbers.Integral) or -2 ** 31 <= a < 2 ** 31:
      out[p] = jnp.asarray(a)
      done.append(p)
  return tuple(out), tuple(done)


def not_an_input(e, specialise):
  """The kernel's error `e` for a call whose Python numbers `as_arrays` made arrays: when the call as
  given (the numbers themselves) fails its signature check (a number passed for an array the kernel
  slices, an output's place), that error, which names the number and the conventions; else `e`."""
  from .frontend import errors as E
  try:
    specialise()
  except E.SignatureError as given:
    return given
  except Exception:
    return e
  return e
