"""A ref where a condition belongs (probe 61b): `a if x_ref else b`, `if x_ref:`, `while flag_ref:`,
`x_ref and ...`, `not x_ref`, `bool(x_ref)`. A ref names memory, not the values it holds; Python's truth of it
would be the ref's, always true, where the author meant an element's (a flag passed as a one-element array, as
Pallas and Triton kernels take one). Each form raises the one MG003, "a ref is not a condition", at the
test, with a hint that reads a value as the condition needs it: its one element (`x_ref[0]`), one element of
many (`x_ref[i]`), or every element reduced (`ml.any(x_ref[...] != 0)`)."""
from __future__ import annotations

import ast
import re

from . import errors as E
from .dtypes import DType
from .ops.base import is_ref
from .types import resolve

_VIEW = re.compile(r"^([A-Za-z_][A-Za-z_0-9]*)\.at\[(.*)\]$")


def check_not_ref(tracer, test: ast.expr, cond, form: str = "if", branches=("a", "b")) -> None:
  """Raise MG003 when `cond`, the value of the condition `test`, is a ref. `form` is how the condition is
  used: 'if', 'elif', 'while', 'ifexp' (`a if test else b`, `branches` its two values as written), 'not',
  'and'/'or', 'bool'."""
  if not is_ref(cond):
    return
  text = tracer.text(test)
  t = cond.type
  shape, dtype = tuple(t.shape), resolve(t.dtype)
  words = f"{'an' if str(t.space) == 'SMEM' else 'a'} {t.space} ref ({dtype}{list(shape)})"
  raise E.KernelTypeError(
      f"a ref is not a condition: {text} is {words}, which names memory, not a value; the condition needs a value"
      f" read from it", tracer.loc(test), hint=_hint(text, shape, dtype, form, branches))


def check_named_ref(tracer, test: ast.expr, form: str) -> None:
  """check_not_ref of a condition written as a bare name (`while flag_ref:`), seen before the loop traces it."""
  if isinstance(test, ast.Name):
    check_not_ref(tracer, test, tracer.env.get(test.id), form)


def _read(text: str, shape: tuple, at: str) -> str:
  """The read of the element `at` (or `...`) of the ref written `text`: `f[0]`; a view's `f.at[i]` as `f[i]`
  where its index names the element (a 0-d view)."""
  m = _VIEW.match(text)
  if m is not None and not shape and ":" not in m.group(2):
    return f"{m.group(1)}[{m.group(2)}]"
  simple = re.fullmatch(r"[A-Za-z_][A-Za-z_0-9.]*(\[.*\])?", text) is not None
  return f"{text if simple else f'({text})'}[{at}]"


def _hint(text: str, shape: tuple, dtype, form: str, branches) -> str:
  one = all(n == 1 for n in shape)
  boolean = dtype == DType.bool_
  test = lambda r: r if boolean else f"{r} != 0"
  if one:
    value = _read(text, shape, ", ".join("0" * len(shape)) if shape else "...")
    return f"read its value: {_written(form, value, branches)}"
  elem = _read(text, shape, ", ".join("ijklmn"[:len(shape)]))
  whole = _read(text, shape, "...")
  if form == "ifexp":
    return (f"read a value: {_written(form, elem, branches)} (one element), or choose per element with"
            f" ml.where({test(whole)}, {branches[0]}, {branches[1]})")
  return (f"read a value: {_written(form, elem, branches)} (one element), or reduce every element to one truth"
          f" value: {_written(form, f'ml.any({test(whole)})', branches)}")


def _written(form: str, value: str, branches) -> str:
  """The condition `value` in the user's form, as they would write it back."""
  if form in ("if", "elif", "while"):
    return f"{form} {value}:"
  if form == "ifexp":
    return f"{branches[0]} if {value} else {branches[1]}"
  if form == "not":
    return f"not {value}"
  if form == "bool":
    return f"bool({value})"
  return value


def written_as_return(loc) -> bool:
  """Whether the statement at `loc` is a `return` (a kernel's return in a loop, which frontend/jumps.py
  made a break of it)."""
  return (loc.source_line or "")[loc.col_offset:].startswith("return")
