"""Locating diagnostics in test files: `where` finds the marked text of a kernel's source,
`expect` checks an error's class, code, line, column and exact message."""
import inspect

import pytest

import mgpu_dsl as mg


def where(kernel, text, nth=0):
  """(lineno, col) of the nth occurrence of `text` in the kernel's source."""
  lines, first = inspect.getsourcelines(kernel.fn)
  hits = [(first + n, line.index(text)) for n, line in enumerate(lines) if text in line]
  assert len(hits) > nth, f"{text!r} not in {kernel.__name__}"
  return hits[nth]


def expect(kernel, specs, cls, at, message, *, nth=0, hint=None, **constexprs):
  """The kernel fails with `cls` (and its code) at `at`, with exactly `message` (and `hint`)."""
  with pytest.raises(mg.KernelError) as info:
    kernel.check(*specs, **constexprs)
  e = info.value
  assert type(e) is cls, f"{type(e).__name__}: {e}"
  assert e.code == cls.code
  assert (e.lineno, e.col_offset) == where(kernel, at, nth), e.render()
  assert e.filename == kernel.fn.__code__.co_filename
  assert e.message == message
  assert e.hint, "every diagnostic has a hint"
  if hint is not None:
    assert e.hint == hint
  assert "Traceback" not in str(e) and "mlir" not in str(e).lower()
  return e


def expect_call(kernel, specs, cls, at, message, *, hint=None, **constexprs):
  """A mistake of the call itself (an input too many, a misspelt constexpr, an unsupported dtype): `cls` with
  exactly `message` at the `kernel.check(...)` call (here), the kernel's def (at `at`) its first note."""
  import sys
  with pytest.raises(mg.KernelError) as info:
    kernel.check(*specs, **constexprs)
  e, line = info.value, sys._getframe().f_lineno - 1
  assert type(e) is cls, f"{type(e).__name__}: {e}"
  assert e.code == cls.code
  assert (e.filename, e.lineno) == (__file__, line), e.render()
  lineno, col = where(kernel, at)
  assert e.notes[0] == f"{kernel.fn.__code__.co_filename}:{lineno}:{col}: the kernel", e.render()
  assert e.message == message
  if hint is not None:
    assert e.hint == hint
  return e


def builds(kernel, *specs, **constexprs):
  kernel.check(*specs, **constexprs)     # traces, checks and builds the Mosaic GPU module
