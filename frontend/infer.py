"""Element-type inference: SMEM buffers allocated without a dtype get one from their uses.

A buffer's dtype is a `DTypeVar` (a union-find cell); each use that determines
it binds or joins it here, recording where and why, so a later conflict can
name both lines.
"""
from __future__ import annotations

import re

from . import errors as E
from .dtypes import DType
from .loc import Loc
from .types import DTypeVar, dtype_name, resolve


def unify(a, b, loc: Loc, why: str):
  """Make dtypes `a` and `b` equal. Returns the common dtype, or None on conflict."""
  a, b = resolve(a), resolve(b)
  if isinstance(a, DType) and isinstance(b, DType):
    return a if a == b else None
  if isinstance(a, DTypeVar) and isinstance(b, DTypeVar):
    if a is not b:
      a._parent = b
    return b
  var, concrete = (a, b) if isinstance(a, DTypeVar) else (b, a)
  var.dtype, var.bound_at, var.bound_by = concrete, loc, why
  return concrete


def conflict(var_dtype, other, loc: Loc, what: str, stored: str | None = None, shape=None):
  """If `var_dtype` is a bound inferred dtype, the DtypeConflictError naming both uses.
  `stored`: the stored value as the user wrote it, where the conflict is a register store;
  `shape`: the buffer's shape, where it is a copy."""
  if not isinstance(var_dtype, DTypeVar):
    return None
  v = var_dtype.find()
  if v.dtype is None or v.bound_at is None:
    return None
  if stored is not None and re.search(r"\.astype\([^()]*\)$", stored):   # buf[...] = buf[...].astype(jnp.bfloat16)
    # (converted on purpose: converting it back is no fix; the other dtype needs a buffer of its own)
    new = f"{v.owner}_{dtype_name(other)}" if v.owner and v.owner.isidentifier() else "buf2"
    hint = (f"{v.owner} holds {v.dtype} (line {v.bound_at.lineno}): keep the {dtype_name(other)} values in a buffer of"
            f" their own, {new} = ml.smem({v.owner}.shape, jnp.{dtype_name(other)}); {new}[...] = {stored}, and use"
            f" {new} where they go (ml.copy({new}, ...))")
  elif stored is not None:   # an explicit dtype alone only turns this into MG102: convert the value
    hint = (f"convert the stored value to {v.dtype}: {v.owner}[...] = {stored}.astype(jnp.{v.dtype});"
            f" giving {v.owner} an explicit dtype does not convert it")
  else:                      # TMA copies never convert: the other dtype needs a buffer of its own
    hint = (f"copies never convert: copy the {dtype_name(other)} data into a buffer of its own,"
            f" ml.smem({tuple(shape) if shape is not None else 'shape'}, jnp.{dtype_name(other)}), and convert between the two in registers"
            f" with .astype(...)")
  return E.DtypeConflictError(
      f"{v.owner} (SMEM, inferred dtype) would be {dtype_name(other)} here ({what}),"
      f" but line {v.bound_at.lineno} already made it {v.dtype} ({v.bound_by})",
      loc, hint=hint,
      notes=(f"{v.bound_at}: {v.owner} inferred as {v.dtype} here",))
