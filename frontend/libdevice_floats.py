"""libdevice's float intrinsics that signal-processing ports call and ml has no namesake for (probe 72b; each was
MG002 "has no attribute ... check the spelling"): `tl.extra.cuda.libdevice.sinpi(x)` and `cospi(x)` (sin(pi x),
cos(pi x): twiddles of `sinpi(2 k / n)` as cuFFT-style code writes them, exact zeros at whole and half numbers) and
`rhypot`. (Probe 72b wrote exp10, remainder and log10 here too, beside session 60's libdevice_math.py, which keeps
them: this module's forms are part of its registry.) Forms of ml functions
of their operands (traced as jnp's forms are, jnp_calls.formula, through triton_math's stand-ins): the argument
reduced exactly (x - 2 round(x / 2) lies in [-1, 1]) and folded into [-1/2, 1/2] before ml.sin, so interpret mode
and the GPU compute the same steps; within a few ulp of CUDA's. float16 and bfloat16 operands compute in float32
and round once. Of Python numbers each is NumPy's in float32, computed while tracing."""
from __future__ import annotations

import math

from .jnp_forms import _dtype, _kind

_PI = "3.141592653589793"
_R = "({0} - 2.0 * ml.round({0} * 0.5))"          # x reduced into [-1, 1], exactly
FORMS_TEXT = {
    "sinpi": (("x",), f"(lambda _r_: ml.sin({_PI} * ml.where(_r_ > 0.5, 1.0 - _r_, ml.where(_r_ < -0.5, -1.0 - _r_,"
                      f" _r_))))({_R})"),
    "cospi": (("x",), f"ml.sin({_PI} * (0.5 - ml.abs({_R})))"),
    "rhypot": (("x", "y"), "(lambda _a_, _b_: ml.where(ml.isinf(_a_) | ml.isinf(_b_), 0.0, 1.0 / (ml.maximum(_a_, _b_)"
                           " * ml.sqrt(1.0 + (ml.minimum(_a_, _b_) / ml.where(ml.maximum(_a_, _b_) == 0, 1.0,"
                           " ml.maximum(_a_, _b_))) ** 2))))(ml.abs({0}), ml.abs({1}))"),
}
NAMES = frozenset(FORMS_TEXT)
PARAMS = {n: p for n, (p, _) in FORMS_TEXT.items()}


def _make(name):
  params, text = FORMS_TEXT[name]

  def make(a):
    xs = [a[p] for p in params]
    if any(_kind(x) not in ("float", "int") for x in xs) or not any(_kind(x) == "float" for x in xs):
      return None
    ds = {str(_dtype(x)) for x in xs if _dtype(x) is not None}
    if len(ds) > 1 or not ds <= {"float32", "float16", "bfloat16"}:
      return None
    form = text
    if ds & {"float16", "bfloat16"}:           # (in float32, rounded once)
      for i, x in enumerate(xs):
        if _dtype(x) is not None:
          form = form.replace(f"{{{i}}}", f"{{{i}}}.astype(ml.float32)")
      first = next(i for i, x in enumerate(xs) if _dtype(x) is not None)
      form = f"({form}).astype({{{first}}}.dtype)"
    return form, xs
  return make


FORMS = {("libdevice", n): (PARAMS[n], _make(n)) for n in FORMS_TEXT}


def static(name, *args):
  """The intrinsic of Python numbers, in float32 (a Python float)."""
  import numpy as np
  x = [np.float32(a) for a in args]
  if name == "sinpi":
    return float(np.float32(math.sin(math.pi * float(x[0]))))
  if name == "cospi":
    return float(np.float32(math.cos(math.pi * float(x[0]))))
  with np.errstate(divide="ignore"):
    return float(np.float32(1) / np.hypot(x[0], x[1]))
