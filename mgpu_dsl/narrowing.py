"""64-bit types without jax_enable_x64: JAX makes int64 arrays int32 (uint64 uint32, float64 float32),
so a spec, an output or a value asked for in 64 bits would be narrowed where nobody sees it. A spec
(`jax.ShapeDtypeStruct`) of such a dtype is refused, and so is a NumPy integer array (or scalar) holding a value
the narrower type cannot; NumPy's int64 arrays of values that fit are taken as JAX takes them
(`kernel(np.arange(128))`). An output of such a dtype (`jnp.int_`, `int`) is JAX's narrowed dtype, with jnp's own
warning for a dtype it does not have, as `jnp.zeros(n, jnp.int_)` gives (probe 53b; it was refused too)."""
from __future__ import annotations

import numpy as np

from .frontend import errors as E

_ON = "jax.config.update('jax_enable_x64', True) (before any array is made)"


def narrowed(dtype):
  """The dtype JAX gives `dtype` now, where it differs (int64 -> int32 without x64), else None."""
  import jax
  try:
    d = np.dtype(dtype)
  except TypeError:
    return None
  if d.kind not in "iuf" or d.itemsize != 8:
    return None
  c = np.dtype(jax.dtypes.canonicalize_dtype(d))
  return c if c != d else None


def check(args, leaves, refs, name: str, loc, out_loc) -> None:
  """SignatureError for an input spec or output of a 64-bit dtype JAX would narrow, and for a NumPy
  integer input holding values its narrowed dtype cannot hold (`refs`: the parameters' names)."""
  import jax
  for i, a in enumerate(args):
    to = narrowed(getattr(a, "dtype", None))
    if to is None:
      continue
    p = refs[i] if i < len(refs) else f"x{i}"
    d = np.dtype(a.dtype).name
    if isinstance(a, jax.ShapeDtypeStruct):
      raise E.SignatureError(
          f"{name}: input {i} ({p}) is given as {d}, but jax_enable_x64 is off: JAX passes {d} arrays as"
          f" {to.name}, so the kernel would be checked and built for {to.name}", loc,
          hint=f"for {d}, turn 64-bit types on: {_ON}; else give the spec as jnp.{to.name}")
    if isinstance(a, (np.ndarray, np.generic)) and to.kind in "iu" and a.size:
      info = np.iinfo(to)
      lo, hi = int(np.min(a)), int(np.max(a))
      if lo < info.min or hi > info.max:
        bad = lo if lo < info.min else hi
        raise E.SignatureError(
            f"{name}: input {i} ({p}) is a NumPy {d} {'array' if np.ndim(a) else 'scalar'} holding {bad},"
            f" which {to.name} cannot hold, and jax_enable_x64 is off: JAX would pass it as {to.name},"
            f" keeping the low {to.itemsize * 8} bits", loc,
            hint=f"for {d}, turn 64-bit types on: {_ON}; else pass values {to.name} holds")
  inputs = {np.dtype(a.dtype) for a in args if getattr(a, "dtype", None) is not None and narrowed(a.dtype)}
  for k, leaf in enumerate(leaves):
    to = narrowed(getattr(leaf, "dtype", None))
    if to is None or np.dtype(leaf.dtype) in inputs:      # lambda x: x of a NumPy int64 input: as JAX takes x
      continue
    # jnp.int_ (or int, float, jnp.float64) without x64: the output is JAX's narrowed dtype, with jnp's own warning
    # for an explicitly requested dtype it does not have (jnp.zeros(n, jnp.int_) warns and gives int32; probe 53b:
    # it was MG006)
    import warnings
    d = np.dtype(leaf.dtype).name
    warnings.warn(f"Explicitly requested dtype {d} requested in out_shape (output {k}) is not available, and will be"
                  f" truncated to dtype {to.name}. To enable more dtypes, set the jax_enable_x64 configuration option"
                  f" or the JAX_ENABLE_X64 shell environment variable.", UserWarning, stacklevel=2)
