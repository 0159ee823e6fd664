"""Python numbers passed eagerly for a kernel's 0-d inputs: made the arrays jax.jit makes of them.

Under `jax.jit(kernel)(x, 2.0)` the 2.0 arrives as a weakly typed 0-d array (float32; int32 for an int,
int64 with jax_enable_x64), which the kernel reads with `s[...]`; `kernel(x, 2.0)` called eagerly gets
the same array, as a jnp function treats a Python number the same both ways."""
from __future__ import annotations

import numbers

import numpy as np


def as_arrays(args, scalar_positions, bounds) -> tuple[tuple, tuple]:
  """`args` with the Python ints, floats and bools at input positions (not ml.scalar parameters, which take
  numbers themselves; not a bool past the inputs a call must pass, where it may be `interpret` passed by
  position) as the 0-d arrays jax.jit would trace (weakly typed numbers; a bool a bool array, as
  jax.jit(k)(x, True) hands it on), and the positions converted. Nothing converts when the count of inputs is
  wrong, or an int is past int32 (jax.jit raises OverflowError there): the call's own error says so."""
  import jax.numpy as jnp
  if not bounds[0] <= len(args) <= bounds[1]:
    return tuple(args), ()
  out, done = list(args), []
  for p, a in enumerate(args):
    if p in scalar_positions or not isinstance(a, (int, float)) or isinstance(a, bool) and p >= bounds[0]:
      continue
    if not isinstance(a, numbers.Integral) or -2 ** 31 <= a < 2 ** 31:
      out[p] = jnp.asarray(a)
      done.append(p)
  return tuple(out), tuple(done)


def compiled(kernel, given, constexprs, **kw) -> tuple[dict, tuple]:
  """(kernel._compile's entry, the arguments as compiled) for a call's or a spec method's arguments
  `given`, Python numbers for 0-d inputs made arrays (`as_arrays`; ml.scalar numbers by _scalar_args,
  after, so a float made a float64 array with jax_enable_x64 is float32 there too). When a number made
  an array fails to compile, the call as given fails its signature check instead where it does (a number
  passed for an array the kernel slices, or in an output's place: that error names the number), unless the
  mistake is elsewhere: an error whose underlined code names none of those inputs is the kernel's own (it
  was always MG006 "kernel inputs are arrays", `ml.exp` of an int in a kernel called as k(x, 2.0) too)."""
  from .frontend import errors as E
  args, converted = as_arrays(given, kernel.parsed.scalar_positions(), kernel._input_bounds(kernel.parsed))
  args = kernel._scalar_args(args)
  try:
    return kernel._compile(args, constexprs, **kw), args
  except E.KernelError as e:
    if not converted or isinstance(e, E.InternalError) or not _names_any(e, [kernel.parsed.ref_params[p]
                                                                              for p in converted]):
      raise
    try:
      kernel._specialise(kernel._scalar_args(given), constexprs, allow_empty=True)
    except E.SignatureError as as_given:
      raise as_given from None
    except Exception:
      pass
    raise


def narrowed(a, dtype, weak: bool):
  """The weak int64/float64 0-d array `a` (a Python number under jax.jit with jax_enable_x64) as `dtype`
  (int32, float32), still weakly typed where `weak` (a 0-d input: `x_f16 * s[...]` stays float16, as
  jnp's); an ml.scalar parameter's is the plain int32 or float32 it documents."""
  import jax
  if weak:
    try:
      from jax._src.lax import lax as _lax
      return _lax._convert_element_type(a, np.dtype(dtype), weak_type=True)
    except (ImportError, AttributeError, TypeError):      # (a jax without it: plain, as before)
      pass
  return jax.lax.convert_element_type(a, dtype)


def _names_any(e, names) -> bool:
  """Whether the code a kernel error (or one of the others found with it) underlines names one of `names` (the
  inputs given as Python numbers), or the error is about the call itself (not at a line of the kernel's body)."""
  import re
  from .frontend import errors as E
  for err in getattr(e, "errors", None) or [e]:
    loc = err.loc
    line = getattr(loc, "source_line", None) or ""
    if isinstance(err, E.SignatureError) or not line:
      return True
    end = loc.end_col_offset if loc.end_lineno == loc.lineno and loc.end_col_offset else len(line)
    if any(re.search(rf"\b{re.escape(n)}\b", line[loc.col_offset:end]) for n in names):
      return True
  return False
