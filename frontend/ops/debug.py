"""Debugging: `print(...)` and `breakpoint()` inside kernels.

Interpret mode prints every value of every program and stops at a breakpoint in a
debugger with the kernel's values; the GPU prints the text and scalar values (once
per warpgroup) and ignores breakpoints. The tracer evaluates print's arguments
(f-strings included) and hands the parts here.
"""
from __future__ import annotations

import re

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..ir import Traits
from ..types import ScalarType, resolve


@ir.op(Traits())
class Print(ir.Op):
  """Static text and values, in order; `specs[i]` is the format spec of value part i ("" for none)."""
  parts: tuple
  specs: tuple
  loc: object
  results: tuple = ()


@ir.op(Traits())
class DeviceAssert(ir.Op):
  """Triton's `tl.device_assert(cond, msg)`: `cond` (a boolean tensor or scalar) holds at every element, checked
  in interpret mode; no code on the GPU (Triton's own without TRITON_DEBUG). `text`: the condition as written;
  `own`: a padded trace's condition's own shape (its padding lanes made True), else None."""
  cond: object
  msg: str
  text: str
  own: object
  loc: object
  results: tuple = ()


@ir.op(Traits())
class Breakpoint(ir.Op):
  """The kernel's names and values at a `breakpoint()`."""
  names: tuple
  values: tuple
  loc: object
  results: tuple = ()


# Python format specs printf can honour: [<|>][+| ][#][0][width][.precision][type].
_SPEC = re.compile(r"^(?P<align>[<>]?)(?P<sign>[+ -]?)(?P<alt>#?)(?P<zero>0?)(?P<width>\d*)"
                   r"(?:\.(?P<prec>\d+))?(?P<type>[dxXofFeEgG]?)$")


def printf_spec(spec: str, dtype: DType) -> str | None:
  """The printf conversion (`%+08.3f`) that prints a scalar of `dtype` as Python's `format(v, spec)`
  does, or None when printf cannot. Integers are passed as 64-bit, floats as double."""
  m = _SPEC.match(spec)
  if m is None:
    return None
  g = m.groupdict()
  t = g["type"]
  is_float = dtype.is_float
  if t in "dxXo" and t and is_float:
    return None
  if not t:
    t = ("g" if g["prec"] else "f") if is_float else "d"
  if t in "dxXo":
    if g["prec"]:
      return None
    t = "ll" + ({"d": "d" if dtype.is_signed or dtype == DType.bool_ else "u"}.get(t, t))
  flags = ("-" if g["align"] == "<" else "") + g["sign"].replace("-", "") + g["alt"] + g["zero"]
  prec = f".{g['prec']}" if g["prec"] else ""
  return f"%{flags}{g['width']}{prec}{t}"


def check_spec(loc, x, spec: str, text: str) -> None:
  """A format spec must suit the value's dtype (as Python formats it in interpret mode) and, for
  scalars (which the GPU prints), be one printf can honour."""
  d = resolve(x.type.dtype)
  if not isinstance(d, DType):
    return
  sample = 0.0 if d.is_float else True if d == DType.bool_ else 0
  try:
    format(sample, spec)
  except (TypeError, ValueError) as e:
    raise E.KernelTypeError(f"cannot format {text} ({d}) with {spec!r}: {e}", loc,
                            hint="use a spec that suits the dtype: .3f or e for floats, d or x for integers") from None
  if isinstance(x.type, ScalarType) and printf_spec(spec, d) is None:
    raise E.KernelTypeError(
        f"the GPU cannot print {text} with the format spec {spec!r}: printf has no equivalent", loc,
        hint="use [<][+][#][0][width][.precision][type] with type d, x, o (integers) or f, e, g (floats)")


def print_(cx, parts):
  """`parts`: text, values, and (value, spec, source text, loc) for formatted f-string fields."""
  merged, specs = [], []
  for p in parts:          # join adjacent text
    if isinstance(p, str) and merged and isinstance(merged[-1], str):
      merged[-1] += p
      continue
    spec = ""
    if isinstance(p, tuple):
      p, spec, text, loc = p
      check_spec(loc, p, spec, text)
    merged.append(p)
    specs.append(spec)
  cx.b.emit(Print, tuple(merged), tuple(specs), loc=cx.loc)


def breakpoint_(cx, names, values):
  cx.b.emit(Breakpoint, tuple(names), tuple(values), loc=cx.loc)
