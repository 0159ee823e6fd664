"""A 16-bit float sum past its dtype's largest value (probe 50f): a PrecisionWarning in interpret mode.

`ml.sum(v)` of a float16 tile adds in float32 and rounds once, as jnp's sum does, so a row of 1024 values
near 200 sums to about 2e5, past float16's largest value (65504): the sum is inf, and `ml.sum(v) / n` (a mean)
inf with it, where `ml.mean(v)` (which divides in float32) is finite. jnp computes the same, so it is no error;
but a kernel summing float16 data means its float32 sum, which the result's dtype cannot hold: warned once per
sum and run where finite elements sum to inf, with `dtype=jnp.float32` as the hint.
"""
from __future__ import annotations

import numpy as np

from ..frontend import errors as E
from ..frontend.dtypes import DType
from ..frontend.loc import sum_call_in_f32

_HALF = {DType.f16: "float16", DType.bf16: "bfloat16"}


def check_half_sum(cta, o, x, r) -> None:
  """`r`: the float32 sum of `x` (the elements of o, a sum of float16 or bfloat16 values) before rounding."""
  d = o.x.type.dtype
  if d not in _HALF:
    return
  held = np.asarray(r).astype(x.dtype)
  over = np.isinf(held) & np.isfinite(np.asarray(r))
  warned = cta.m.__dict__.setdefault("half_sums_warned", set())
  if not over.any() or o.loc in warned or not np.isfinite(x).all():
    return
  warned.add(o.loc)
  t, big = _HALF[d], float(np.asarray(r)[over].flat[0])
  top = float(np.finfo(x.dtype).max)
  E.warn(E.KernelError(
      f"this sum of {t} elements, all finite, is {big:.6g} in program {cta.label}, past {t}'s largest value"
      f" ({top:.6g}): as a {t} result it is {'inf' if big > 0 else '-inf'} (jnp's sum gives the same), and so is"
      f" anything computed from it (a mean)", o.loc,
      hint=f"keep the sum in float32: {sum_call_in_f32(o.loc)}, and convert after dividing"
           f" ((... / n).astype(jnp.{t})); ml.mean divides in float32 itself; if {t} is meant, silence this with"
           f" warnings.filterwarnings('ignore', category=mg.PrecisionWarning)"),
         category=E.PrecisionWarning)
