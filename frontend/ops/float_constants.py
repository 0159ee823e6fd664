"""A Python float that the dtype it meets cannot hold (PrecisionWarning, not an error; probe 49f).

A Python float meeting a kernel value takes that value's dtype, as in jnp: `x * 1e5` of float16 `x` multiplies
by inf (float16 holds nothing past 65504) and `v / (n + 1e-8)` adds 0 (float16's smallest non-zero value is 6e-8).
jnp computes the same, so the kernel is not wrong by the language's rules: a warning at the op, with the constant
the dtype holds, or float32 math, as the hint. A select's fill and a comparison are left alone (-1e30 as -inf is
the mask value meant; `x < 1e5` is the same test). Ints are MG003 where they do not fit
(elementwise_checks.check_python_int): a float's conversion is the one jnp does, so only warned.
"""
from __future__ import annotations

import math

import numpy as np

from .. import errors as E
from ..dtypes import DType, FLOAT8
from ..types import dtype_name, resolve


# Where the constant's conversion gives what was meant: a select's fill (`ml.where(m, s, -1e30)`: -inf, a mask
# value), a comparison (`x < 1e5` of float16 x holds for every finite x either way)
_QUIET = frozenset({"ml.where", "<", "<=", ">", ">=", "==", "!="})


def check_python_float(cx, value, dtype, other: str, what: str) -> None:
  """Warn where the Python float `value`, meeting `other` (of `dtype`) in `what`, becomes inf or 0 in `dtype`."""
  if not isinstance(value, float) or value == 0 or not math.isfinite(value) or what in _QUIET:
    return
  d = resolve(dtype)
  if not isinstance(d, DType) or not d.is_float or d in FLOAT8 or d.bits > 32:
    return
  with np.errstate(over="ignore", under="ignore"):
    got = float(np.asarray(value).astype(d.np))
  if math.isfinite(got) and got != 0:
    return
  import ml_dtypes
  t = dtype_name(d)
  info = ml_dtypes.finfo(d.np)
  if got == 0:
    held = float(info.smallest_subnormal)
    effect = f"0 ({t} holds no value between 0 and {held:g})"
    fix = f"a constant {t} holds ({float(info.smallest_normal):g}, its smallest normal value)"
  else:
    held = float(info.max)
    effect = f"{'-' if got < 0 else ''}inf ({t} holds no finite value past {held:g})"
    sign = "-" if value < 0 else ""
    fix = f"a constant {t} holds ({sign}{held:g}), or float('{sign}inf') where it is meant"
  wide = f"({other}).astype(jnp.float32)" if any(c in other for c in " +-*/%@<>&|^~") else \
      f"{other}.astype(jnp.float32)"
  E.warn(E.KernelError(
      f"the Python float {value!r} takes the dtype of {other} ({t}), which it meets in {what}, as in jnp: as {t}"
      f" it is {effect}", cx.loc,
      hint=f"compute in float32 ({wide} first), or use {fix}; if {t} is meant, silence this with"
           f" warnings.filterwarnings('ignore', category=mg.PrecisionWarning)"),
         category=E.PrecisionWarning)
